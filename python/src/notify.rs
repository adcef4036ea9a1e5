//! Runs Python callbacks for plugin threads, so that no plugin thread ever waits for the GIL.
//!
//! A plugin thread that blocks on the GIL can deadlock the process: the thread holding the
//! GIL may be waiting for that very plugin thread (destroying a client joins its workers).
//! So readiness callbacks never touch Python on the plugin's thread: they hand the Python
//! callable to one notifier thread of ours over a channel (no GIL, no blocking), and the
//! notifier takes the GIL — it is nobody's worker, so waiting is harmless there — and calls
//! it (for `await`, that callable only schedules the future's completion on its event loop
//! with `call_soon_threadsafe`).

//!
//! Two such threads: one for rpjrt's own wake-ups (an `await` resuming its event loop),
//! one for callbacks users register, so that a callback that blocks delays no `await`.
//! Both are stopped by an exit hook before the interpreter finalizes: a thread that takes
//! the GIL during finalization is ended by CPython from inside Rust frames, which aborts
//! the process.

use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use pyo3::prelude::*;

/// Which notifier thread runs a callable.
#[derive(Clone, Copy)]
pub enum Lane {
    /// rpjrt's own wake-ups (`await`): short, never blocking.
    Wake,
    /// Callbacks users register (`Event.add_done_callback`).
    User,
}

/// A notifier thread's channel, and the flag it raises when it ends.
type Slot = Mutex<Option<(Sender<Py<PyAny>>, Arc<(Mutex<bool>, Condvar)>)>>;

static WAKE: OnceLock<Slot> = OnceLock::new();
static USER: OnceLock<Slot> = OnceLock::new();

fn slot(lane: Lane) -> &'static Slot {
    let (cell, name) = match lane {
        Lane::Wake => (&WAKE, "rpjrt-notify"),
        Lane::User => (&USER, "rpjrt-callbacks"),
    };
    cell.get_or_init(|| start(name))
}

fn start(name: &str) -> Slot {
    let (tx, rx) = channel::<Py<PyAny>>();
    let done = Arc::new((Mutex::new(false), Condvar::new()));
    let ended = Arc::clone(&done);
    let spawned = std::thread::Builder::new()
        .name(name.into())
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
            *ended.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
            ended.1.notify_all();
        });
    Mutex::new(spawned.ok().map(|_| (tx, done)))
}

/// Calls `callback()` soon, from `lane`'s notifier thread with the GIL held. Never blocks
/// and never takes the GIL, so plugin threads may call it. After [`stop`] the callable is
/// dropped uncalled.
pub fn post(lane: Lane, callback: Py<PyAny>) {
    let tx = slot(lane).lock().unwrap_or_else(|p| p.into_inner());
    if let Some((tx, _)) = tx.as_ref() {
        // Fails only if the notifier thread is gone; nothing is waiting then.
        let _ = tx.send(callback);
    }
}

/// Starts `lane`'s notifier thread now (from a thread that holds the GIL), so that the
/// first callback does not spawn a thread on a plugin's thread.
pub fn warm_up(lane: Lane) {
    let _ = slot(lane);
}

/// The exit hook: closes both notifier threads' channels and waits (without the GIL, up to
/// two seconds each) for them to finish the callbacks already posted, so that none takes
/// the GIL once the interpreter finalizes.
#[pyfunction]
pub fn _stop_notifiers(py: Python<'_>) {
    for cell in [&WAKE, &USER] {
        let Some(slot) = cell.get() else { continue };
        let taken = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some((tx, done)) = taken {
            drop(tx);
            py.detach(|| {
                let flag = done.0.lock().unwrap_or_else(|p| p.into_inner());
                let _ = done
                    .1
                    .wait_timeout_while(flag, Duration::from_secs(2), |ended| !*ended);
            });
        }
    }
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
