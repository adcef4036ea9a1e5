//! The owning event handle: waits, polls and the `OnReady` callback.

use std::borrow::Borrow;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rpjrt_sys as sys;

use super::callback::{self, StatusCallback};
use super::client::Client;
use super::{args_types, pjrt, Args};
use crate::error::{Code, Error, Result};

args_types! {
    PJRT_Event_Destroy_Args => PJRT_Event_Destroy_Args_STRUCT_SIZE,
    PJRT_Event_IsReady_Args => PJRT_Event_IsReady_Args_STRUCT_SIZE,
    PJRT_Event_Error_Args => PJRT_Event_Error_Args_STRUCT_SIZE,
    PJRT_Event_Await_Args => PJRT_Event_Await_Args_STRUCT_SIZE,
    PJRT_Event_OnReady_Args => PJRT_Event_OnReady_Args_STRUCT_SIZE,
    PJRT_Event_Create_Args => PJRT_Event_Create_Args_STRUCT_SIZE,
    PJRT_Event_Set_Args => PJRT_Event_Set_Args_STRUCT_SIZE,
}

/// How long, in nanoseconds, [`Event::wait`] polls an event that is not ready yet before it
/// blocks in `PJRT_Event_Await` (the setting behind `crate::event::set_wait_spin`).
static SPIN_NANOS: AtomicU64 = AtomicU64::new(DEFAULT_SPIN_NANOS);

/// The default poll time of a wait: 100 µs.
pub const DEFAULT_SPIN_NANOS: u64 = 100_000;

/// Sets the poll time of every later wait.
pub fn set_spin_nanos(nanos: u64) {
    SPIN_NANOS.store(nanos, Ordering::Relaxed);
}

/// The poll time of a wait.
pub fn spin_nanos() -> u64 {
    SPIN_NANOS.load(Ordering::Relaxed)
}

/// Calls `ready` until it says true or the poll time has passed; whether it said true.
pub fn spin_until(ready: impl FnMut() -> bool) -> bool {
    spin_for(Duration::from_nanos(spin_nanos()), ready)
}

/// Calls `ready` until it says true or `budget` has passed (not at all for a zero budget);
/// whether it said true.
pub fn spin_for(budget: Duration, mut ready: impl FnMut() -> bool) -> bool {
    if budget.is_zero() {
        return false;
    }
    ready() || keep_polling(budget, ready)
}

/// After a check that found the event pending: yields, then calls `ready` until it says
/// true or `budget` has passed; whether it said true.
pub fn keep_polling(budget: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < budget {
        // Yielding, not spinning: a thread the plugin needs (or any other) gets the core.
        std::thread::yield_now();
        if ready() {
            return true;
        }
    }
    false
}

/// An owned `PJRT_Event`, destroyed on drop. Keeps its client alive: `C` is an
/// `Arc<Client>` for events that are handed out, or a `&Client` for one that lives inside a
/// call (a wait on a buffer's ready event), which spares two atomic reference-count updates.
pub struct Event<C: Deref<Target = Client> = Arc<Client>> {
    client: C,
    ptr: NonNull<sys::PJRT_Event>,
}

// SAFETY: PJRT events are thread-safe by the C API's contract; `C` is an `Arc` or a
// reference of the client, which is Send + Sync.
unsafe impl<C: Deref<Target = Client> + Send> Send for Event<C> {}
// SAFETY: as for Send.
unsafe impl<C: Deref<Target = Client> + Sync> Sync for Event<C> {}

impl<C: Deref<Target = Client>> Drop for Event<C> {
    fn drop(&mut self) {
        let mut a = sys::PJRT_Event_Destroy_Args::new();
        a.event = self.ptr.as_ptr();
        // SAFETY: live event owned by us, destroyed exactly once; its client is alive.
        let _ = unsafe { pjrt!(self.client.api(), PJRT_Event_Destroy, &mut a) };
    }
}

impl Event {
    /// Takes ownership of an event the plugin returned (`None` for a null pointer).
    pub(super) fn new(client: &Arc<Client>, ptr: *mut sys::PJRT_Event) -> Option<Event> {
        Some(Event {
            client: Arc::clone(client),
            ptr: NonNull::new(ptr)?,
        })
    }
}

impl Event {
    /// `PJRT_Event_Create` (0.89): a pending event that completes when [`Event::set`] is
    /// called on it.
    pub fn create(client: &Arc<Client>) -> Result<Event> {
        let mut a = sys::PJRT_Event_Create_Args::new();
        // SAFETY: the args struct has no input pointer; the plugin writes `event`.
        unsafe { pjrt!(client.api(), PJRT_Event_Create, &mut a) }?;
        let event = Event::new(client, a.event).ok_or_else(|| Error::Pjrt {
            entry: "PJRT_Event_Create",
            code: Code::Internal,
            message: "the plugin returned no event".into(),
        })?;
        // An event nothing can complete would keep its waiters for ever.
        let api = client.api();
        if !api.has_slot(std::mem::offset_of!(sys::PJRT_Api, PJRT_Event_Set)) {
            return Err(Error::Unsupported {
                what: "PJRT_Event_Set (completing a user event)".into(),
                needs: crate::ApiVersion {
                    major: 0,
                    minor: api.version().minor,
                },
                plugin: api.version(),
                missing_slot: true,
            });
        }
        Ok(event)
    }
}

impl<'a> Event<&'a Client> {
    /// Takes ownership of an event the plugin returned, for the duration of a call that
    /// borrows its client (`None` for a null pointer).
    pub(super) fn borrowing(client: &'a Client, ptr: *mut sys::PJRT_Event) -> Option<Self> {
        Some(Event {
            client,
            ptr: NonNull::new(ptr)?,
        })
    }
}

impl<C: Deref<Target = Client>> Event<C> {
    /// The client whose plugin made the event.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Waits until the event is ready and returns its status: polls `PJRT_Event_IsReady`
    /// (yielding the CPU between polls) for up to the poll time, then blocks in
    /// `PJRT_Event_Await`. A blocked waiter is woken by the plugin's worker thread through
    /// the kernel, which costs tens of microseconds (on a virtual machine, ~55 µs measured);
    /// a short computation is over before that, and polling sees it at once.
    pub fn wait(&self) -> Result<()> {
        // A failed poll ends the polling; the Await below reports the event's state.
        spin_until(|| self.is_ready().unwrap_or(true));
        let mut a = sys::PJRT_Event_Await_Args::new();
        a.event = self.ptr.as_ptr();
        // SAFETY: live event.
        unsafe { pjrt!(self.client.api(), PJRT_Event_Await, &mut a) }
    }

    /// `PJRT_Event_IsReady`.
    pub fn is_ready(&self) -> Result<bool> {
        let mut a = sys::PJRT_Event_IsReady_Args::new();
        a.event = self.ptr.as_ptr();
        // SAFETY: live event.
        unsafe { pjrt!(self.client.api(), PJRT_Event_IsReady, &mut a) }?;
        Ok(a.is_ready)
    }

    /// `PJRT_Event_Error` of a ready event: `Ok(())` if it completed without error.
    pub fn status(&self) -> Result<()> {
        let mut a = sys::PJRT_Event_Error_Args::new();
        a.event = self.ptr.as_ptr();
        // SAFETY: live event.
        unsafe { pjrt!(self.client.api(), PJRT_Event_Error, &mut a) }
    }

    /// `PJRT_Event_OnReady`: `callback` runs once with the event's status, on whatever
    /// thread the plugin completes it (possibly this one, before this returns). It must not
    /// block (see `raw::callback`).
    pub fn on_ready(&self, callback: StatusCallback) -> Result<()> {
        let api = self.client.api();
        let user = callback::leak_status(api, "PJRT_Event_OnReady", callback);
        let mut a = sys::PJRT_Event_OnReady_Args::new();
        a.event = self.ptr.as_ptr();
        a.callback = Some(callback::status_trampoline);
        a.user_arg = user;
        // SAFETY: live event; the trampoline matches the callback type and never unwinds;
        // `user` is reclaimed by the trampoline, or below when the registration failed.
        let r = unsafe { pjrt!(api, PJRT_Event_OnReady, &mut a) };
        if r.is_err() {
            // SAFETY: the registration failed, so C will never call the trampoline: the
            // user data is still ours and is reclaimed exactly once, here.
            drop(unsafe { callback::reclaim::<callback::StatusUser>(user) });
        }
        r
    }

    /// `PJRT_Event_Set` (0.89): completes an event made by [`Event::create`], without error
    /// (`None`) or with the code number and message given. The plugin copies the message.
    pub fn set(&self, error: Option<(i32, &str)>) -> Result<()> {
        let mut a = sys::PJRT_Event_Set_Args::new();
        a.event = self.ptr.as_ptr();
        if let Some((code, message)) = error {
            a.error_code = code as sys::PJRT_Error_Code;
            a.error_message = message.as_ptr().cast();
            a.error_message_size = message.len();
        }
        // SAFETY: live event; the message outlives the call, which copies it.
        unsafe { pjrt!(self.client.api(), PJRT_Event_Set, &mut a) }
    }
}

/// One wait for several events (the completion events of a multi-device execution, the
/// ready events of its outputs): an `OnReady` callback on each pending event counts down,
/// and the last one to run wakes the waiter, so a caller that has to sleep is woken once,
/// not once per event. Events already complete when it is made are read at once and get no
/// callback. The callbacks keep only the shared state alive, so a waiter may give up (a
/// timeout) and drop the events and this value before they run.
pub struct AllReady {
    shared: Arc<AllShared>,
    /// Events whose readiness could not be read or whose callback the plugin refused:
    /// waited on one by one instead.
    direct: Box<[usize]>,
    /// Whether a wait polls before it sleeps (see [`AllReady::register`]).
    poll: bool,
}

/// The number of cores this process may run on, read once.
fn host_cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// What the callbacks and the waiter share.
struct AllShared {
    /// Events not counted out yet (callbacks that have not run).
    pending: AtomicUsize,
    /// Each event's error, by event index; set once.
    errors: Box<[OnceLock<Error>]>,
    /// Set (under the lock) by the last callback. The lock is held only to set or read the
    /// flag, never across a plugin call, so a callback never waits for a plugin call.
    done: Mutex<bool>,
    cv: Condvar,
}

impl AllShared {
    /// Counts event `index` out with its status. Runs on whatever thread completed the
    /// event (a plugin worker, or the registering thread) and never blocks beyond the short
    /// lock above.
    fn finish(&self, index: usize, status: Result<()>) {
        if let (Err(e), Some(slot)) = (status, self.errors.get(index)) {
            let _ = slot.set(e);
        }
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self.done.lock().unwrap_or_else(|p| p.into_inner()) = true;
            self.cv.notify_all();
        }
    }
}

impl AllReady {
    /// Reads which events are complete (their status too) and registers a counting
    /// callback on every other one. An event whose readiness cannot be read, or whose
    /// callback the plugin refuses, is left to [`AllReady::wait`] to wait on directly.
    ///
    /// A wait polls first only for fewer events (devices) than the host has cores. On a CPU
    /// plugin each device's work needs a core of its own, and a waiter that polls takes one
    /// from them: an 8-device call on 2 cores ran 10-15 % slower polling
    /// than sleeping at once (bench/RESULTS.md). With a core to spare, polling saves the
    /// waiter's wake-up, as for one device.
    pub fn register<C, E>(events: &[E]) -> AllReady
    where
        C: Deref<Target = Client>,
        E: Borrow<Event<C>>,
    {
        let shared = Arc::new(AllShared {
            pending: AtomicUsize::new(events.len()),
            errors: (0..events.len()).map(|_| OnceLock::new()).collect(),
            done: Mutex::new(events.is_empty()),
            cv: Condvar::new(),
        });
        let mut direct = Vec::new();
        for (i, ev) in events.iter().enumerate() {
            let ev = ev.borrow();
            match ev.is_ready() {
                Ok(true) => shared.finish(i, ev.status()),
                Ok(false) => {
                    let s = Arc::clone(&shared);
                    // The callback may run before `on_ready` returns, on this thread.
                    if ev.on_ready(Box::new(move |r| s.finish(i, r))).is_err() {
                        // Refused: `on_ready` dropped the callback, which will never run.
                        direct.push(i);
                        shared.finish(i, Ok(()));
                    }
                }
                Err(_) => {
                    direct.push(i);
                    shared.finish(i, Ok(()));
                }
            }
        }
        AllReady {
            shared,
            direct: direct.into_boxed_slice(),
            poll: events.len() < host_cores(),
        }
    }

    /// Whether every callback has run (no plugin call).
    pub fn is_done(&self) -> bool {
        self.shared.pending.load(Ordering::Acquire) == 0
    }

    /// Blocks until every event is complete: polls the count for up to the poll time
    /// ([`spin_until`]; no plugin call), then sleeps until the last callback wakes it.
    /// `events` are those it was made from, in the same order. Returns each failed event's
    /// index and error, in index order.
    pub fn wait<C, E>(&self, events: &[E]) -> Vec<(usize, Error)>
    where
        C: Deref<Target = Client>,
        E: Borrow<Event<C>>,
    {
        if !self.is_done() && (!self.poll || !spin_until(|| self.is_done())) {
            let g = self.shared.done.lock().unwrap_or_else(|p| p.into_inner());
            let _g = self
                .shared
                .cv
                .wait_while(g, |done| !*done)
                .unwrap_or_else(|p| p.into_inner());
        }
        self.collect(events, |ev| Some(ev.wait()))
    }

    /// As [`AllReady::wait`], for at most `timeout` (the poll too): `None` when some event is
    /// still pending then (the callbacks stay registered; wait again later).
    pub fn wait_timeout<C, E>(&self, events: &[E], timeout: Duration) -> Option<Vec<(usize, Error)>>
    where
        C: Deref<Target = Client>,
        E: Borrow<Event<C>>,
    {
        let poll = match self.poll {
            true => Duration::from_nanos(spin_nanos()).min(timeout),
            false => Duration::ZERO,
        };
        if !self.is_done() && !spin_for(poll, || self.is_done()) {
            let g = self.shared.done.lock().unwrap_or_else(|p| p.into_inner());
            let (g, _) = self
                .shared
                .cv
                .wait_timeout_while(g, timeout, |done| !*done)
                .unwrap_or_else(|p| p.into_inner());
            if !*g {
                return None;
            }
        }
        let mut pending = false;
        let errors = self.collect(events, |ev| match ev.is_ready() {
            Ok(false) => {
                pending = true;
                None
            }
            Ok(true) => Some(ev.status()),
            Err(e) => Some(Err(e)),
        });
        (!pending).then_some(errors)
    }

    /// The recorded errors, and those of the directly waited events as `direct` gives them
    /// (`None`: not complete yet), in index order.
    fn collect<C, E>(
        &self,
        events: &[E],
        mut direct: impl FnMut(&Event<C>) -> Option<Result<()>>,
    ) -> Vec<(usize, Error)>
    where
        C: Deref<Target = Client>,
        E: Borrow<Event<C>>,
    {
        let mut errors: Vec<(usize, Error)> = self
            .shared
            .errors
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.get().map(|e| (i, e.clone())))
            .collect();
        for &i in self.direct.iter() {
            if let Some(Err(e)) = events.get(i).and_then(|ev| direct(ev.borrow())) {
                errors.push((i, e));
            }
        }
        errors.sort_by_key(|(i, _)| *i);
        errors
    }
}
