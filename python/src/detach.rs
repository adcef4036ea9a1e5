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
//! then, and nothing waits for them). Threads already on their way back to the GIL when
//! the hook began are let through first: the hook waits, without the GIL, until they hold
//! it ([`let_returning_threads_in`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use pyo3::Python;

/// Set by the exit hook: threads whose work returns from now on park.
static EXITING: AtomicBool = AtomicBool::new(false);

/// Threads whose work returned and that are taking the GIL back.
static RETURNING: AtomicUsize = AtomicUsize::new(0);

/// The exit hook's own thread, which must not park (its id, as a number).
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
        let out = self.detach(|| {
            let out = f();
            // Counted first, checked after: the exit hook either sees this thread
            // returning (and waits for it to hold the GIL) or this thread sees the hook.
            RETURNING.fetch_add(1, SeqCst);
            if EXITING.load(SeqCst) && Some(&std::thread::current().id()) != EXIT_THREAD.get() {
                RETURNING.fetch_sub(1, SeqCst);
                park_for_good();
            }
            out
        });
        RETURNING.fetch_sub(1, SeqCst);
        out
    }
}

/// Parks the calling thread until the process ends.
fn park_for_good() -> ! {
    loop {
        std::thread::park();
    }
}

/// Called by the exit hook on its thread, holding the GIL: from now on threads whose work
/// returns park, and those already returning are given the GIL first (waited for without
/// it, for at most `limit`), so that none of them takes it back while the interpreter
/// finalizes.
pub(crate) fn let_returning_threads_in(py: Python<'_>, limit: Duration) {
    let _ = EXIT_THREAD.set(std::thread::current().id());
    EXITING.store(true, SeqCst);
    if RETURNING.load(SeqCst) == 0 {
        return;
    }
    let start = Instant::now();
    // Each pass releases the GIL for a moment, for a returning thread to take.
    while RETURNING.load(SeqCst) > 0 && start.elapsed() < limit {
        py.detach(|| std::thread::sleep(Duration::from_millis(1)));
    }
}
