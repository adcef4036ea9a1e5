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

use crate::detach::Detach;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex};
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

/// One process's notifier thread for a lane: a forked child has none of its parent's
/// threads, and may have inherited `slot`'s lock held, so it starts its own and never
/// touches the parent's (which it leaks).
struct Notifier {
    generation: u32,
    slot: Slot,
}

static WAKE: AtomicPtr<Notifier> = AtomicPtr::new(std::ptr::null_mut());
static USER: AtomicPtr<Notifier> = AtomicPtr::new(std::ptr::null_mut());

fn cell(lane: Lane) -> (&'static AtomicPtr<Notifier>, &'static str) {
    match lane {
        Lane::Wake => (&WAKE, "rpjrt-notify"),
        Lane::User => (&USER, "rpjrt-callbacks"),
    }
}

/// This process's notifier of `cell`, if it has started one.
fn current(cell: &AtomicPtr<Notifier>) -> Option<&'static Notifier> {
    let p = cell.load(Ordering::Acquire);
    // SAFETY: a non-null pointer in a cell comes from `Box::into_raw` and is never freed
    // once published (a forked child leaks its parent's).
    let n = unsafe { p.as_ref() }?;
    (n.generation == rpjrt::fork_generation()).then_some(n)
}

/// Set by the exit hook: from then on no notifier thread starts (one running while the
/// interpreter finalizes would abort the process).
static STOPPED: AtomicBool = AtomicBool::new(false);

/// The slot of a process whose notifiers were stopped: nothing runs callbacks any more.
static NONE: Slot = Mutex::new(None);

fn slot(lane: Lane) -> &'static Slot {
    let (cell, name) = cell(lane);
    if let Some(n) = current(cell) {
        return &n.slot;
    }
    if STOPPED.load(Ordering::Acquire) {
        return &NONE;
    }
    let seen = cell.load(Ordering::Acquire);
    let made = Box::into_raw(Box::new(Notifier {
        generation: rpjrt::fork_generation(),
        slot: start(name),
    }));
    match cell.compare_exchange(seen, made, Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: just published; never freed.
        Ok(_) => unsafe { &(*made).slot },
        Err(_) => {
            // Another thread started one first: ours ends when its channel is dropped.
            // SAFETY: `made` was never published, so this is its only owner.
            drop(unsafe { Box::from_raw(made) });
            slot(lane)
        }
    }
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
/// first callback does not spawn a thread on a plugin's thread. `false` once the exit hook
/// has stopped the notifiers: a callback posted now would never run, so the caller waits
/// and calls it itself.
pub fn warm_up(lane: Lane) -> bool {
    let running = slot(lane)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .is_some();
    running && !STOPPED.load(Ordering::Acquire)
}

/// The exit hook: closes both notifier threads' channels and waits (without the GIL, up to
/// two seconds each) for them to finish the callbacks already posted, so that none takes
/// the GIL once the interpreter finalizes.
#[pyfunction]
pub fn _stop_notifiers(py: Python<'_>) {
    STOPPED.store(true, Ordering::Release);
    for cell in [&WAKE, &USER] {
        // A parent's notifier (in a forked child) has no thread here to wait for.
        let Some(n) = current(cell) else { continue };
        let taken = n.slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some((tx, done)) = taken {
            drop(tx);
            py.detach_call(|| {
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
        py.detach_call(move || drop(v));
    });
    drop(slot);
}
