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
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::{PyTraverseError, PyVisit};

/// Which notifier thread runs a callable.
#[derive(Clone, Copy)]
pub enum Lane {
    /// rpjrt's own wake-ups (`await`): short, never blocking.
    Wake,
    /// Callbacks users register (`Event.add_done_callback`).
    User,
}

/// What a notifier thread runs.
enum Job {
    /// `callable()`.
    Call(Py<PyAny>),
    /// The call a [`CallbackSlot`] still holds, taken out with the GIL held.
    Slot(Arc<CallbackSlot>),
}

/// A notifier thread's channel, and the flag it raises when it ends.
type Slot = Mutex<Option<(Sender<Job>, Arc<(Mutex<bool>, Condvar)>)>>;

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
    let (tx, rx) = channel::<Job>();
    let done = Arc::new((Mutex::new(false), Condvar::new()));
    let ended = Arc::clone(&done);
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            for job in rx {
                // `try_attach` gives up while the interpreter shuts down; the callable is
                // then dropped without the GIL (PyO3 defers the reference count change).
                let _ = Python::try_attach(|py| {
                    crate::detach::keep_thread_state(py);
                    let called = match job {
                        Job::Call(cb) => cb.call0(py).map(drop),
                        Job::Slot(slot) => slot.run(py),
                    };
                    if let Err(e) = called {
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
    send(lane, Job::Call(callback));
}

/// Runs the call `callback` still holds soon, from `lane`'s notifier thread with the GIL
/// held (nothing, if it was taken out meanwhile: [`CallbackSlot::take`]). Never blocks and
/// never takes the GIL, so plugin threads may call it; the Python objects stay in the slot
/// until the notifier takes them out with the GIL held.
pub fn post_slot(lane: Lane, callback: Arc<CallbackSlot>) {
    send(lane, Job::Slot(callback));
}

fn send(lane: Lane, job: Job) {
    let tx = slot(lane).lock().unwrap_or_else(|p| p.into_inner());
    if let Some((tx, _)) = tx.as_ref() {
        // Fails only if the notifier thread is gone; nothing is waiting then.
        let _ = tx.send(job);
    }
}

/// A done-callback waiting for its event: `function(argument)`, held in Rust by the
/// event's completion handler (which only posts the slot, [`post_slot`]) until a notifier
/// thread takes it out, with the GIL held, and calls it. Taking the call out only under the
/// GIL means a cycle collection (which holds the GIL) never sees it move; an owner that
/// accounts for the slot (`AliasFulfiller`) can visit the objects in it
/// ([`CallbackSlot::traverse`]) and drop them ([`CallbackSlot::take`]).
pub struct CallbackSlot {
    call: Mutex<Option<(Py<PyAny>, Py<PyAny>)>>,
}

impl CallbackSlot {
    pub fn new(function: Py<PyAny>, argument: Py<PyAny>) -> CallbackSlot {
        CallbackSlot {
            call: Mutex::new(Some((function, argument))),
        }
    }

    /// Takes the call out (for its caller to drop or run after the lock is released).
    pub fn take(&self) -> Option<(Py<PyAny>, Py<PyAny>)> {
        self.call.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Whether the call is still waiting (not run, not taken out).
    pub fn is_pending(&self) -> bool {
        self.call
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Calls the function with its argument, once (nothing if it was taken out).
    fn run(&self, py: Python<'_>) -> PyResult<()> {
        match self.take() {
            Some((function, argument)) => function.call1(py, (argument,)).map(drop),
            None => Ok(()),
        }
    }

    /// Visits the function and its argument while the call waits. The lock is only ever
    /// held briefly by threads that hold the GIL; one held elsewhere is not waited for (the
    /// objects are skipped this time, which the collector handles safely).
    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Ok(call) = self.call.try_lock() {
            if let Some((function, argument)) = call.as_ref() {
                visit.call(function)?;
                visit.call(argument)?;
            }
        }
        Ok(())
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

/// A value a frozen Python object owns, like [`Held`], that the object's `__clear__` (the
/// cycle collector's `tp_clear`) may also take out, through a shared reference
/// ([`Clearable::clear`]). Derefs to the value; using it after `clear` panics (PyO3 raises
/// that as `PanicException`), which only an object the collector has already reclaimed
/// could do.
pub struct Clearable<T> {
    cleared: AtomicBool,
    value: UnsafeCell<Option<T>>,
}

// SAFETY: shared references only read the value (as `T: Sync` allows from any thread); it
// is moved out only by `take` (through `&mut self`, so no reader exists) or by `clear`,
// whose contract excludes every other reader then and afterwards (readers check `cleared`
// first and panic).
unsafe impl<T: Send + Sync> Sync for Clearable<T> {}

impl<T> Clearable<T> {
    pub fn new(value: T) -> Clearable<T> {
        Clearable {
            cleared: AtomicBool::new(false),
            value: UnsafeCell::new(Some(value)),
        }
    }

    /// The value, for the owner's `Drop` (`None` once `clear` took it).
    pub fn take(&mut self) -> Option<T> {
        self.value.get_mut().take()
    }

    /// Whether `clear` took the value out.
    pub fn is_cleared(&self) -> bool {
        self.cleared.load(Ordering::Acquire)
    }

    /// Takes the value out through a shared reference (once; later calls return `None`).
    ///
    /// # Safety
    /// No other reference to the value may exist while this runs, and none may be taken
    /// afterwards except through `Deref` (which then panics). The `tp_clear` of the Python
    /// object that owns this value meets that: the cycle collector clears only objects no
    /// running code refers to (every method call holds a reference to its object, which
    /// keeps the object reachable), and every reference to the value is borrowed from the
    /// object for the length of such a call.
    pub unsafe fn clear(&self) -> Option<T> {
        if self.cleared.swap(true, Ordering::AcqRel) {
            return None;
        }
        // SAFETY: the caller guarantees that no reference to the value exists now; later
        // ones see `cleared` first.
        unsafe { (*self.value.get()).take() }
    }
}

impl<T> std::ops::Deref for Clearable<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        if self.cleared.load(Ordering::Acquire) {
            panic!("this rpjrt object was reclaimed by the garbage collector and cannot be used");
        }
        // SAFETY: not cleared, so the value is only ever read here; it is moved out only
        // by `take` (which needs `&mut self`) or `clear` (which no reader can overlap).
        match unsafe { &*self.value.get() } {
            Some(v) => v,
            None => unreachable!("a clearable value is taken only by `clear` or its owner's drop"),
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
