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

/// Keeps a Python thread state for the calling thread, which holds the GIL, for as long as
/// the thread lives: a thread Python did not start (rpjrt's notifier) otherwise gets a
/// new thread state each time it takes the GIL and
/// deletes it each time it lets go. Making and deleting one takes the interpreter's lock of
/// thread states without the GIL, and a `fork()` at that moment leaves the child waiting for
/// that lock for ever inside `os.fork()` (CPython re-creates it only after it deletes the
/// other threads' states, which needs it). Once kept, taking the GIL again only takes the GIL.
/// Call it only on threads that live as long as the process: the state outlives its
/// thread (a plugin's worker threads, which end with their client, are left to make and
/// delete theirs, as under JAX).
pub(crate) fn keep_thread_state(_py: Python<'_>) {
    thread_local! {
        static KEPT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if KEPT.with(|k| k.replace(true)) {
        return;
    }
    // SAFETY: the GIL is held (`_py`), and this thread has a thread state (the one it holds
    // the GIL with). `PyGILState_Ensure` then only counts one more use of it; that use is
    // never released, so the state is not deleted when the caller lets go of the GIL.
    unsafe {
        pyo3::ffi::PyGILState_Ensure();
    }
}
