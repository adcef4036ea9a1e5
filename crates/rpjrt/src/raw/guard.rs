//! Process-level guards around plugin calls: a plugin used in a forked child.
//!
//! A PJRT plugin runs worker threads; `fork()` copies only the calling thread, so in the
//! child every client inherited from the parent refers to threads that do not exist, and
//! destroying it (or running anything on it) crashes or hangs. The loader registers a
//! `pthread_atfork` child handler that bumps a generation counter; each loaded plugin
//! records the generation it was loaded in, and [`super::Api::invoke`] refuses every call
//! from a later generation with a clear error. Drops ignore that error, so objects
//! inherited across a fork are leaked in the child, never destroyed.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;

/// Bumped in the child after every `fork()`.
static GENERATION: AtomicU32 = AtomicU32::new(0);
static REGISTER: Once = Once::new();

extern "C" {
    // POSIX: `int pthread_atfork(void (*prepare)(void), void (*parent)(void),
    // void (*child)(void))`, in libc (which every Rust program on Linux links).
    fn pthread_atfork(
        prepare: Option<extern "C" fn()>,
        parent: Option<extern "C" fn()>,
        child: Option<extern "C" fn()>,
    ) -> i32;
}

extern "C" fn in_child() {
    // Only an atomic add: async-signal-safe, as a fork handler must be.
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// The current fork generation, registering the fork handler on first use.
pub(crate) fn generation() -> u32 {
    REGISTER.call_once(|| {
        // SAFETY: registers a handler that only performs an atomic add; the function lives
        // for the whole program (it is part of this library, which is never unloaded
        // while it is in use by the Rust program that links it statically).
        unsafe {
            pthread_atfork(None, None, Some(in_child));
        }
    });
    GENERATION.load(Ordering::Relaxed)
}

/// Whether this process is a fork of the one in `generation` (cheap: one atomic load).
#[inline]
pub(crate) fn forked_since(generation: u32) -> bool {
    GENERATION.load(Ordering::Relaxed) != generation
}

/// The message for a call refused in a forked child.
pub(crate) fn forked_message(loaded_in_pid: u32) -> String {
    format!(
        "this process (pid {}) is a fork of the process that loaded the plugin (pid \
         {loaded_in_pid}); a PJRT plugin's threads do not survive fork, so nothing inherited \
         from the parent can be used or destroyed here (it is leaked instead). Create \
         clients after fork only in processes started fresh (multiprocessing's \"spawn\")",
        std::process::id()
    )
}

extern "C" {
    // POSIX: `sighandler_t signal(int signum, sighandler_t handler)`; SIG_DFL is 0.
    fn signal(signum: i32, handler: usize) -> usize;
}

/// SIGPIPE's number on Linux (and every other Unix rpjrt builds for).
const SIGPIPE: i32 = 13;

/// Restores the default action of SIGPIPE (end the process), which the Rust runtime
/// replaces with "ignore" at start-up (so a write to a closed pipe returns EPIPE and
/// `println!` panics).
pub(crate) fn default_sigpipe() {
    // SAFETY: installs the default disposition for SIGPIPE; no handler code of ours runs.
    unsafe {
        signal(SIGPIPE, 0);
    }
}
