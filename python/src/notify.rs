//! Runs Python callbacks for plugin threads, so that no plugin thread ever waits for the GIL.
//!
//! A plugin thread that blocks on the GIL can deadlock the process: the thread holding the
//! GIL may be waiting for that very plugin thread (destroying a client joins its workers).
//! So readiness callbacks never touch Python on the plugin's thread: they hand the Python
//! callable to one notifier thread of ours over a channel (no GIL, no blocking), and the
//! notifier takes the GIL — it is nobody's worker, so waiting is harmless there — and calls
//! it (for `await`, that callable only schedules the future's completion on its event loop
//! with `call_soon_threadsafe`).

use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};

use pyo3::prelude::*;

static NOTIFIER: OnceLock<Mutex<Option<Sender<Py<PyAny>>>>> = OnceLock::new();

fn start() -> Mutex<Option<Sender<Py<PyAny>>>> {
    let (tx, rx) = channel::<Py<PyAny>>();
    let spawned = std::thread::Builder::new()
        .name("rpjrt-notify".into())
        .spawn(move || {
            for cb in rx {
                // `try_attach` gives up while the interpreter shuts down; the callable is
                // then dropped without the GIL (PyO3 defers the reference count change).
                let _ = Python::try_attach(|py| {
                    if let Err(e) = cb.call0(py) {
                        e.write_unraisable(py, None);
                    }
                });
            }
        });
    Mutex::new(spawned.ok().map(|_| tx))
}

/// Calls `callback()` soon, from the notifier thread with the GIL held. Never blocks and
/// never takes the GIL, so plugin threads may call it.
pub fn post(callback: Py<PyAny>) {
    let slot = NOTIFIER.get_or_init(start);
    let tx = slot.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(tx) = tx.as_ref() {
        // Fails only if the notifier thread is gone; nothing is waiting then.
        let _ = tx.send(callback);
    }
}

/// Starts the notifier thread now (from a thread that holds the GIL), so that the first
/// callback does not spawn a thread on a plugin's thread.
pub fn warm_up() {
    let _ = NOTIFIER.get_or_init(start);
}

/// A value a Python object owns until its own drop, which takes it out to drop it its own
/// way (without the GIL: [`drop_detached`]). Derefs to the value; safe in place of a
/// `ManuallyDrop` taken in `Drop`.
pub struct Held<T>(Option<T>);

impl<T> Held<T> {
    pub fn new(value: T) -> Held<T> {
        Held(Some(value))
    }

    /// The value, for the owner's `Drop` (only there: the owner is never used after it).
    pub fn take(&mut self) -> Option<T> {
        self.0.take()
    }
}

impl<T> std::ops::Deref for Held<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        match &self.0 {
            Some(v) => v,
            None => unreachable!("a held value is taken only by its owner's drop"),
        }
    }
}

/// Drops `value` (a client or executable, whose destruction may wait for running
/// computations) without holding the GIL where this thread holds it, so that other Python
/// threads run meanwhile and nothing that needs the GIL can deadlock against the wait.
pub fn drop_detached<T: Send>(value: T) {
    let mut slot = Some(value);
    let _ = Python::try_attach(|py| {
        let v = slot.take();
        py.detach(move || drop(v));
    });
    drop(slot);
}
