//! The owning event handle: waits, polls and the `OnReady` callback.

use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
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
        Event::new(client, a.event).ok_or_else(|| Error::Pjrt {
            entry: "PJRT_Event_Create",
            code: Code::Internal,
            message: "the plugin returned no event".into(),
        })
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
