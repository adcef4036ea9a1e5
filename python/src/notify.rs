//! Runs Python callbacks for plugin threads, so that no plugin thread ever waits for the GIL.
//!
//! A plugin thread that blocks on the GIL can deadlock the process: the thread holding the
//! GIL may be waiting for that very plugin thread (destroying a client joins its workers).
//! So readiness callbacks never touch Python on the plugin's thread: they hand the Python
//! callable to a notifier thread over a channel (no GIL, no blocking), and the notifier
//! takes the GIL — it is nobody's worker, so waiting is harmless there — and calls it (for
//! `await`, that callable only schedules the future's completion on its event loop with
//! `call_soon_threadsafe`).
//!
//! Two such threads: one for rpjrt's own wake-ups (an `await` resuming its event loop),
//! one for callbacks users register, so that a callback that blocks delays no `await`.
//! Each is a Python thread whose loop (`rpjrt._notifier_loop`) calls the callables under
//! Python frames only: a callback still running when the interpreter finalizes is ended
//! by CPython as any daemon thread is (from inside Rust frames, that would abort the
//! process). The exit hook closes their channels and waits for them for a while; what is
//! queued after that is dropped uncalled.

use crate::detach::Detach;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyTuple;
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

/// Set by the exit hook once it stops waiting for the notifiers: the callbacks still
/// queued are dropped uncalled.
static GIVEN_UP: AtomicBool = AtomicBool::new(false);

/// Whether a notifier thread must call nothing more: the exit hook gave up waiting for
/// it, the last exit hook has begun, or the interpreter is finalizing.
fn abandoned() -> bool {
    GIVEN_UP.load(Ordering::Acquire) || crate::detach::exiting() || crate::detach::finalizing()
}

/// The slot of a process whose notifiers were stopped: nothing runs callbacks any more.
static NONE: Slot = Mutex::new(None);

/// This process's slot for `lane`, starting its notifier thread when there is none and
/// `py` (the GIL) is at hand (a Python thread is started only with it); without, a lane
/// with no notifier gets [`NONE`] (nothing is called).
fn slot(py: Option<Python<'_>>, lane: Lane) -> &'static Slot {
    let (cell, _) = cell(lane);
    if let Some(n) = current(cell) {
        return &n.slot;
    }
    let Some(py) = py.filter(|_| !STOPPED.load(Ordering::Acquire)) else {
        return &NONE;
    };
    let seen = cell.load(Ordering::Acquire);
    let made = Box::into_raw(Box::new(Notifier {
        generation: rpjrt::fork_generation(),
        slot: start(py, lane),
    }));
    match cell.compare_exchange(seen, made, Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: just published; never freed.
        Ok(_) => unsafe { &(*made).slot },
        Err(_) => {
            // Another thread started one first: ours ends when its channel is dropped.
            // SAFETY: `made` was never published, so this is its only owner.
            drop(unsafe { Box::from_raw(made) });
            slot(Some(py), lane)
        }
    }
}

/// Starts a notifier: a Python thread (`_thread.start_new_thread`) running
/// `rpjrt._notifier_loop(next_job)`, which calls each callable that [`NextJob`] hands it.
/// The callables run under Python frames only, as on any Python thread: one still running
/// when the interpreter finalizes is ended by CPython as a daemon thread is, which no Rust
/// frame of ours may be under (that unwind through Rust code aborts the process).
fn start(py: Python<'_>, lane: Lane) -> Slot {
    let (tx, rx) = channel::<Job>();
    let done = Arc::new((Mutex::new(false), Condvar::new()));
    let next = NextJob {
        rx: Mutex::new(rx),
        generation: rpjrt::fork_generation(),
        ended: Arc::clone(&done),
        name: cell(lane).1,
    };
    let started = (|| -> PyResult<()> {
        let run = py.import("rpjrt")?.getattr("_notifier_loop")?;
        let next = Py::new(py, next)?;
        py.import("_thread")?
            .call_method1("start_new_thread", (run, (next,)))?;
        Ok(())
    })();
    Mutex::new(started.ok().map(|_| (tx, done)))
}

/// The source of a notifier thread's work (see [`start`]): called by its loop, it waits
/// (without the GIL) for the next callable and returns it with its arguments, or `None`
/// when the loop must end: the channel is closed (the exit hook), or the process is
/// ending, when what is still queued is dropped uncalled.
#[pyclass(frozen, module = "rpjrt")]
pub struct NextJob {
    rx: Mutex<std::sync::mpsc::Receiver<Job>>,
    /// The process that started the thread: a child forked inside a callback ends when
    /// the callback returns here ([`crate::detach::end_if_forked_here`]).
    generation: u32,
    /// Raised when the loop ends, for the exit hook.
    ended: Arc<(Mutex<bool>, Condvar)>,
    /// `rpjrt-notify` or `rpjrt-callbacks`, for reprs.
    name: &'static str,
}

impl NextJob {
    /// Ends the loop: drops what is queued uncalled (leaked: the process is ending, and a
    /// callable's `__del__` must not run now) and tells the exit hook.
    fn finish(&self) -> Option<(Py<PyAny>, Py<PyTuple>)> {
        let rx = self.rx.lock().unwrap_or_else(|p| p.into_inner());
        while let Ok(job) = rx.try_recv() {
            std::mem::forget(job);
        }
        *self.ended.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.ended.1.notify_all();
        None
    }
}

#[pymethods]
impl NextJob {
    fn __call__(&self, py: Python<'_>) -> PyResult<Option<(Py<PyAny>, Py<PyTuple>)>> {
        // A child forked inside the last callback ends as it returns, as a child forked on
        // a plain Python thread does when that thread's function returns.
        crate::detach::end_if_forked_here(py, self.generation);
        crate::detach::mark_rpjrt_thread();
        loop {
            if abandoned() {
                return Ok(self.finish());
            }
            let job = py.detach_call(|| self.rx.lock().unwrap_or_else(|p| p.into_inner()).recv());
            let Ok(job) = job else {
                return Ok(self.finish());
            };
            if abandoned() {
                std::mem::forget(job);
                return Ok(self.finish());
            }
            match job {
                Job::Call(cb) => return Ok(Some((cb, PyTuple::empty(py).unbind()))),
                Job::Slot(slot) => {
                    if let Some((function, argument)) = slot.take() {
                        return Ok(Some((function, PyTuple::new(py, [argument])?.unbind())));
                    }
                }
            }
        }
    }

    /// Reports what a callable raised as unraisable (as `sys.unraisablehook` shows it).
    fn report(&self, py: Python<'_>, error: Bound<'_, PyAny>) {
        PyErr::from_value(error).write_unraisable(py, None);
    }

    fn __repr__(&self) -> String {
        format!("<rpjrt {} notifier>", self.name)
    }
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
    let tx = slot(None, lane).lock().unwrap_or_else(|p| p.into_inner());
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
pub fn warm_up(py: Python<'_>, lane: Lane) -> bool {
    let running = slot(Some(py), lane)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .is_some();
    running && !STOPPED.load(Ordering::Acquire)
}

/// The exit hook: closes both notifier threads' channels and waits (without the GIL, up to
/// two seconds in all) for them to finish the callbacks already posted; the ones left then
/// are dropped uncalled, and a callback still running parks its thread for good when it
/// returns after the last exit hook began (`detach::calling_python`), so that no notifier
/// takes the GIL once the interpreter finalizes.
#[pyfunction]
pub fn _stop_notifiers(py: Python<'_>) {
    STOPPED.store(true, Ordering::Release);
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    for cell in [&WAKE, &USER] {
        // A parent's notifier (in a forked child) has no thread here to wait for.
        let Some(n) = current(cell) else { continue };
        let taken = n.slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some((tx, done)) = taken {
            drop(tx);
            py.detach_call(|| {
                let flag = done.0.lock().unwrap_or_else(|p| p.into_inner());
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                let _ = done.1.wait_timeout_while(flag, left, |ended| !*ended);
            });
        }
    }
    GIVEN_UP.store(true, Ordering::Release);
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
