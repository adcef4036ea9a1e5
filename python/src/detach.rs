//! Releasing the GIL around Rust work, safely at interpreter exit.
//!
//! On Python 3.10 to 3.13 a thread that takes the GIL back while the interpreter finalizes
//! is ended by `pthread_exit` inside `PyEval_RestoreThread`. That exit unwinds the thread's
//! stack, and PyO3's frames above it catch every unwind: the C library then ends the
//! process ("FATAL: exception not rethrown", status 134), after the program's own work
//! was done. A daemon thread whose rpjrt call returns while the process ends hits exactly
//! this.
//!
//! So every release of the GIL in the bindings goes through [`Detach::detach_call`]: once
//! the exit hook (`_leak_at_exit`) has begun, a thread whose work returns parks for good
//! instead of taking the GIL back (the process is ending; only daemon threads are left
//! then, and nothing waits for them). A thread that was already on its way back to the GIL
//! when the hook began is given it: when other threads exist, the hook releases the GIL
//! for a moment before the interpreter finalizes ([`let_returning_threads_in`]). The check
//! on the call path is one relaxed load: a GIL release stays as cheap as PyO3's own.
//!
//! Python code that rpjrt itself calls (an array-like's `__array__` through the host
//! adapter, a streaming upload's source and progress callback) runs with rpjrt's frames
//! under it, and may release the GIL and take it back where rpjrt cannot step in (a
//! `time.sleep`, a file read). Every such call goes through [`calling_python`]: it is
//! counted while it runs, a thread parks instead of starting one once the exit hook has
//! begun, and parks when one returns after that; the exit hook leaves the GIL to the
//! threads inside one (for at most [`CALLBACK_EXIT_WAIT`]) so that they return to rpjrt and
//! park before the interpreter finalizes.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// Set by the exit hook: threads whose work returns from now on park.
static EXITING: AtomicBool = AtomicBool::new(false);

/// Threads now running Python code that rpjrt called ([`calling_python`]).
static IN_CALLBACK: AtomicUsize = AtomicUsize::new(0);

/// The longest the exit hook waits for threads inside [`calling_python`] to return.
const CALLBACK_EXIT_WAIT: Duration = Duration::from_secs(3);

/// Runs `f`, which calls Python code from inside an rpjrt call, so that the thread does not
/// take the GIL back under rpjrt's frames while the interpreter finalizes: once the exit
/// hook has begun, the thread parks (without the GIL) instead of calling, or when the call
/// returns (see the module documentation).
pub(crate) fn calling_python<T>(py: Python<'_>, f: impl FnOnce() -> T) -> T {
    /// Dropped when the call returned (`.1` set), or during an unwind: a Rust panic
    /// (the GIL held) or the interpreter's exit unwinding the thread (the GIL not held).
    struct Leave<'py>(Python<'py>, bool);
    impl Drop for Leave<'_> {
        fn drop(&mut self) {
            IN_CALLBACK.fetch_sub(1, Ordering::SeqCst);
            if EXITING.load(Ordering::SeqCst) {
                if self.1 || std::thread::panicking() {
                    self.0.detach(park_unless_exit_thread);
                }
                // Releasing a GIL it does not hold would corrupt the interpreter.
                park_unless_exit_thread();
            }
        }
    }
    // Counted before the check: the exit hook sets EXITING, then reads the count.
    IN_CALLBACK.fetch_add(1, Ordering::SeqCst);
    let mut leave = Leave(py, false);
    if EXITING.load(Ordering::SeqCst) {
        py.detach(park_unless_exit_thread);
    }
    let out = f();
    leave.1 = true;
    drop(leave);
    out
}

/// Whether the exit hook has begun (from then on threads whose work returns park).
pub(crate) fn exiting() -> bool {
    EXITING.load(Ordering::SeqCst)
}

/// Whether the interpreter is finalizing (or gone): no thread but the finalizing one may
/// take the GIL then. Needs no GIL.
pub(crate) fn finalizing() -> bool {
    // SAFETY: both only read the runtime's state; callable without the GIL and after the
    // interpreter is gone (CPython documents `Py_IsInitialized` so; `Py_IsFinalizing`
    // reads one field of the runtime, and 3.13 made it public API).
    unsafe { pyo3::ffi::Py_IsInitialized() == 0 || py_is_finalizing() }
}

/// `Py_IsFinalizing` (`_Py_IsFinalizing` before 3.13), looked up at run time: the
/// extension is built for the stable ABI, which has neither.
#[cfg(unix)]
unsafe fn py_is_finalizing() -> bool {
    use std::os::raw::{c_char, c_int, c_void};
    type IsFinalizing = unsafe extern "C" fn() -> c_int;
    extern "C" {
        fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    }
    #[cfg(target_os = "macos")]
    const RTLD_DEFAULT: *mut c_void = -2isize as *mut c_void;
    #[cfg(not(target_os = "macos"))]
    const RTLD_DEFAULT: *mut c_void = std::ptr::null_mut();
    static FUNC: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let f = FUNC.get_or_init(|| {
        [c"Py_IsFinalizing", c"_Py_IsFinalizing"]
            .into_iter()
            // SAFETY: a lookup among the symbols the process has loaded (the interpreter's).
            .map(|name| unsafe { dlsym(RTLD_DEFAULT, name.as_ptr()) })
            .find(|p| !p.is_null())
            .map(|p| p as usize)
    });
    f.is_some_and(|f| {
        // SAFETY: a symbol of either name is CPython's `int (void)` function, which only
        // reads the runtime's state.
        let f = unsafe { std::mem::transmute::<usize, IsFinalizing>(f) };
        // SAFETY: see above.
        unsafe { f() != 0 }
    })
}

/// Elsewhere only the exit hook's flag tells ([`exiting`]).
#[cfg(not(unix))]
unsafe fn py_is_finalizing() -> bool {
    false
}

/// Ends a process forked on this thread of rpjrt's (inside a done-callback or an FFI
/// handler) once the Python code it ran returns: `generation` is the process's
/// `rpjrt::fork_generation()` from before the call. A child forked from a plain Python
/// thread ends when that thread's function returns (it is the child's only thread); this
/// thread would go back to waiting for work that never comes there (the notifier's
/// channel, the plugin's execution, whose other threads the child lacks). Python's
/// buffered streams are flushed first, then the process ends with status 0 without
/// running exit handlers (the plugin's static destructors would wait for threads the child
/// lacks), as `os._exit` does.
pub(crate) fn end_if_forked_here(py: Python<'_>, generation: u32) {
    if rpjrt::fork_generation() == generation {
        return;
    }
    for stream in ["stdout", "stderr"] {
        if let Ok(s) = py.import("sys").and_then(|sys| sys.getattr(stream)) {
            if !s.is_none() {
                let _ = s.call_method0("flush");
            }
        }
    }
    let _ = std::io::Write::flush(&mut std::io::stderr());
    rpjrt::stdio::exit_now(0);
}

thread_local! {
    /// Set on threads of rpjrt's that run Python code: the notifiers, and the plugin
    /// threads that run FFI handlers ([`mark_rpjrt_thread`]).
    static RPJRT_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the calling thread, which Python did not start, as one of rpjrt's that runs
/// Python code (see [`_on_rpjrt_thread`]).
pub(crate) fn mark_rpjrt_thread() {
    RPJRT_THREAD.with(|t| t.set(true));
}

/// Whether the calling thread is one of rpjrt's that runs Python code (a done-callback's
/// notifier, a plugin thread running an FFI handler): the fork hook imports nothing there.
#[pyfunction]
pub fn _on_rpjrt_thread() -> bool {
    RPJRT_THREAD.with(|t| t.get())
}

/// The argument `name` of an rpjrt function as a `T`, extracted as PyO3 extracts a typed
/// parameter (the error gets the note `while processing 'name'`), but inside
/// [`calling_python`]: the extraction may run the object's own Python code (`__index__`,
/// `__float__`, `__fspath__`, a sequence's `__iter__`).
pub(crate) fn extract_arg<'a, 'py, T: pyo3::FromPyObject<'a, 'py>>(
    obj: &'a Bound<'py, PyAny>,
    name: &str,
) -> PyResult<T> {
    let py = obj.py();
    calling_python(py, || obj.extract::<T>().map_err(Into::into)).inspect_err(|e| {
        let _ = e
            .value(py)
            .call_method1("add_note", (format!("while processing '{name}'"),));
    })
}

/// The exit hook's own thread, which must not park.
static EXIT_THREAD: std::sync::OnceLock<std::thread::ThreadId> = std::sync::OnceLock::new();

/// [`Python::detach`] that does not take the GIL back once the process is ending.
pub(crate) trait Detach {
    /// Runs `f` without the GIL and returns its result with the GIL held again; a thread
    /// other than the exit hook's whose `f` returns after the exit hook began never
    /// returns (see the module documentation).
    fn detach_call<T: Send, F: Send + FnOnce() -> T>(self, f: F) -> T;
}

impl Detach for Python<'_> {
    #[inline]
    fn detach_call<T: Send, F: Send + FnOnce() -> T>(self, f: F) -> T {
        self.detach(|| {
            let out = f();
            if EXITING.load(Ordering::Relaxed) {
                park_unless_exit_thread();
            }
            out
        })
    }
}

/// Parks the calling thread until the process ends, unless it runs the exit hook.
#[cold]
fn park_unless_exit_thread() {
    if Some(&std::thread::current().id()) == EXIT_THREAD.get() {
        return;
    }
    loop {
        std::thread::park();
    }
}

/// Called by the exit hook on its thread, holding the GIL: from now on threads whose work
/// returns park. When other Python threads exist, the GIL is released for `grace` (in
/// short slices) first, so that one already on its way back takes it now rather than
/// while the interpreter finalizes.
pub(crate) fn let_returning_threads_in(py: Python<'_>, grace: Duration) {
    let _ = EXIT_THREAD.set(std::thread::current().id());
    EXITING.store(true, Ordering::SeqCst);
    let others = py
        .import("sys")
        .and_then(|sys| sys.call_method0("_current_frames"))
        .and_then(|frames| frames.len())
        .map_or(true, |n| n > 1);
    // Threads inside Python code that rpjrt called are waited for however the others
    // are counted (a thread inside a C function may show no frame).
    let start = Instant::now();
    while others && start.elapsed() < grace
        || IN_CALLBACK.load(Ordering::SeqCst) > 0 && start.elapsed() < CALLBACK_EXIT_WAIT
    {
        py.detach(|| std::thread::sleep(Duration::from_millis(1)));
    }
}
