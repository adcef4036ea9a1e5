//! The one place where C calls back into Rust.
//!
//! Rules every callback follows (events today; FFI handlers, KV stores, transfers and
//! progress reports later):
//! - The `extern "C"` trampoline never unwinds into the plugin: its body runs inside
//!   [`guard`], which catches a panic and reports it as a failed call.
//! - User data is Rust data boxed and leaked to C with [`leak`], and taken back exactly once
//!   with [`reclaim`]: by the trampoline of a one-shot callback, or by whoever unregisters
//!   it — and also when the registering call itself failed, because then C will never call.
//! - A trampoline may run on a plugin thread, possibly before the registering call returns.
//!   It must not block on anything the registering thread may hold; in particular, bindings
//!   must never wait for Python's GIL inside a callback on a plugin thread (hand the work to
//!   a Python-owned thread or a waker instead).

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use rpjrt_sys as sys;

use super::Api;
use crate::error::Result;

/// Boxes `data` and gives up ownership of it to C as a `void*` user argument.
pub fn leak<T: Send + 'static>(data: T) -> *mut c_void {
    Box::into_raw(Box::new(data)).cast()
}

/// Takes back data given to C by [`leak`].
///
/// # Safety
/// `user` must come from `leak::<T>` and must not have been reclaimed before: each leaked
/// pointer is reclaimed exactly once.
pub unsafe fn reclaim<T>(user: *mut c_void) -> T {
    // SAFETY: per the contract, `user` is a `Box<T>` leaked by `leak` and still owned by C.
    *unsafe { Box::from_raw(user.cast::<T>()) }
}

/// Runs `body`, catching any panic so that it never unwinds into C. Returns `None` when the
/// body panicked. While it runs, the thread counts as inside a plugin callback
/// ([`in_callback`]).
pub fn guard<R>(body: impl FnOnce() -> R) -> Option<R> {
    let _inside = Inside::enter();
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(r) => Some(r),
        Err(p) => {
            drop_payload(p);
            None
        }
    }
}

/// Drops a caught panic's payload without unwinding: its `Drop` is user code too (a
/// `panic_any` of a value whose drop panics), and a panic there is caught in turn; the
/// payload of that second panic is leaked rather than dropped.
pub fn drop_payload(p: Box<dyn std::any::Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(p))) {
        std::mem::forget(again);
    }
}

thread_local! {
    /// How many plugin callbacks this thread is inside (they can nest).
    static DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// How many plugin callbacks all threads are inside. While it is zero no thread is in one,
/// so [`in_callback`] answers without touching thread-local storage (in a shared library,
/// such as the Python extension, every thread-local access is a call into the loader).
/// A thread always sees its own increments, so a nonzero depth of this thread is never
/// missed.
static INSIDE_ANYWHERE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Marks the current thread as inside a plugin callback until dropped.
pub struct Inside(());

impl Inside {
    /// Enters a callback on this thread.
    pub fn enter() -> Inside {
        INSIDE_ANYWHERE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        DEPTH.with(|d| d.set(d.get().saturating_add(1)));
        Inside(())
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        INSIDE_ANYWHERE.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Whether this thread is running a callback the plugin called (a custom-call handler, a
/// key-value callback, a readiness or deleter callback). The plugin may be waiting for
/// that callback to return, so nothing here may wait for the plugin.
#[inline]
pub fn in_callback() -> bool {
    INSIDE_ANYWHERE.load(std::sync::atomic::Ordering::Relaxed) != 0 && depth() > 0
}

/// How many plugin callbacks this thread is inside (a custom-call handler that runs a
/// program whose custom call runs on this thread too is two deep).
pub fn depth() -> u32 {
    DEPTH.with(|d| d.get())
}

type Job = Box<dyn FnOnce() + Send + 'static>;

/// The reaper thread's queue, started on first use.
static REAPER: std::sync::OnceLock<Option<std::sync::Mutex<std::sync::mpsc::Sender<Job>>>> =
    std::sync::OnceLock::new();

fn reaper() -> Option<&'static std::sync::Mutex<std::sync::mpsc::Sender<Job>>> {
    REAPER
        .get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("rpjrt-reaper".into())
                .spawn(move || {
                    for job in rx {
                        // A panicking destructor must not end the reaper.
                        if let Err(p) = catch_unwind(AssertUnwindSafe(job)) {
                            drop_payload(p);
                        }
                    }
                })
                .ok()
                .map(|_| std::sync::Mutex::new(tx))
        })
        .as_ref()
}

/// Set by [`set_leaking`]: destructions are skipped (their handles leaked).
static LEAK_AT_END: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// With `true`, plugin objects (clients, executables, buffers) dropped from now on are not
/// destroyed: their handles are leaked. For a process about to end (a command-line tool
/// whose work is done), where the system reclaims everything anyway and a plugin that
/// hangs in a destroy call must not keep the process from ending; `false` ends it.
pub fn set_leaking(leak: bool) {
    LEAK_AT_END.store(leak, std::sync::atomic::Ordering::Relaxed);
}

/// Whether [`set_leaking`] turned leaking on.
pub fn leaking() -> bool {
    LEAK_AT_END.load(std::sync::atomic::Ordering::Relaxed)
}

/// Plugin calls that may run for seconds (client creation, compiles, loads) in progress.
static LONG_CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Set by [`end_long_calls`]: no new long call starts.
static ENDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// One long plugin call in progress (see [`end_long_calls`]); dropping it ends it.
pub(crate) struct LongCall(());

impl LongCall {
    /// Counts a long call of `entry` starting now, or refuses it once the process is
    /// ending. Counted first and checked after, so that `end_long_calls` either sees it or
    /// it sees `ENDING`.
    pub(crate) fn enter(entry: &'static str) -> Result<LongCall, crate::Error> {
        use std::sync::atomic::Ordering::SeqCst;
        static REGISTER: std::sync::Once = std::sync::Once::new();
        // A child forked during a long call does not run it.
        REGISTER.call_once(|| crate::guard::reset_after_fork(&LONG_CALLS));
        LONG_CALLS.fetch_add(1, SeqCst);
        let call = LongCall(());
        if ENDING.load(SeqCst) {
            return Err(crate::Error::Pjrt {
                entry,
                code: crate::Code::Cancelled,
                message: "rpjrt did not start it: the process is ending, and a plugin call \
                          still running when the plugin's global state is torn down can \
                          crash the process"
                    .into(),
            });
        }
        Ok(call)
    }
}

impl Drop for LongCall {
    fn drop(&mut self) {
        LONG_CALLS.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// For a process about to end: refuses plugin calls that can run long (client creation,
/// `PJRT_Client_Compile`, `PJRT_Compile`, `PJRT_Executable_DeserializeAndLoad`) from now
/// on, and waits up to `limit` for those already running on other threads to return.
/// Returns how many are still running. Exiting while another thread compiles runs the
/// plugin's global destructors under that compile, which crashes the process; `on_wait`
/// is called once, with the count, when the wait goes beyond a tenth of `limit`.
pub fn end_long_calls(limit: std::time::Duration, on_wait: impl FnOnce(usize)) -> usize {
    use std::sync::atomic::Ordering::SeqCst;
    ENDING.store(true, SeqCst);
    let start = std::time::Instant::now();
    let mut on_wait = Some(on_wait);
    loop {
        let n = LONG_CALLS.load(SeqCst);
        if n == 0 || start.elapsed() >= limit {
            return n;
        }
        if start.elapsed() >= limit / 10 {
            if let Some(f) = on_wait.take() {
                f(n);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Runs a destruction now, or, on a thread inside a plugin callback, hands it to the reaper
/// thread: destroying a client (or a buffer or executable it computes with) waits for the
/// client's work, and the callback is part of that work, so destroying it there would wait
/// for itself. Jobs run in the order they were handed over.
pub fn destroy_outside_callbacks(job: impl FnOnce() + Send + 'static) {
    if LEAK_AT_END.load(std::sync::atomic::Ordering::Relaxed) {
        std::mem::forget(job);
        return;
    }
    if !in_callback() {
        job();
        return;
    }
    let job: Job = Box::new(job);
    let rejected = match reaper() {
        Some(q) => match q.lock().unwrap_or_else(|e| e.into_inner()).send(job) {
            Ok(()) => None,
            Err(e) => Some(e.0),
        },
        None => Some(job),
    };
    if let Some(job) = rejected {
        // No reaper (the thread could not start): leaking the handle is better than a
        // destruction that waits for its own caller.
        std::mem::forget(job);
    }
}

/// A one-shot callback that receives a status (an event became ready, a transfer ended).
pub type StatusCallback = Box<dyn FnOnce(Result<()>) + Send + 'static>;

/// What a status trampoline's user argument points to.
pub struct StatusUser {
    api: &'static Api,
    entry: &'static str,
    callback: StatusCallback,
}

/// Leaks a status callback for a C registration through `entry` (named in errors).
pub fn leak_status(
    api: &'static Api,
    entry: &'static str,
    callback: StatusCallback,
) -> *mut c_void {
    leak(StatusUser {
        api,
        entry,
        callback,
    })
}

/// The trampoline of a one-shot `void (*)(PJRT_Error*, void*)` callback: takes ownership of
/// the error (turning it into `Err`), reclaims the user data and calls the callback once.
pub(crate) extern "C" fn status_trampoline(err: *mut sys::PJRT_Error, user: *mut c_void) {
    guard(|| {
        // SAFETY: `user` was made by `leak_status` for this registration, and the C API
        // calls a one-shot callback exactly once, so it is reclaimed exactly once.
        let u = unsafe { reclaim::<StatusUser>(user) };
        let status = if err.is_null() {
            Ok(())
        } else {
            Err(u.api.take_error(err, u.entry))
        };
        (u.callback)(status);
    });
}
