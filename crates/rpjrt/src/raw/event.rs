//! PJRT events: polling, blocking waits and the `OnReady` callback behind `Future`.

use std::ffi::c_void;
use std::sync::{Arc, Mutex};
use std::task::Waker;

use rpjrt_sys as sys;

use super::calls::EventPtr;
use super::{pjrt, Api, Args};
use crate::error::{Error, Result};

/// `PJRT_Event_Destroy`.
pub(crate) fn event_destroy(api: &Api, e: EventPtr) -> Result<()> {
    let mut a = sys::PJRT_Event_Destroy_Args::new();
    a.event = e.0;
    // SAFETY: live event, destroyed once by its owner.
    unsafe { pjrt!(api, PJRT_Event_Destroy, &mut a) }
}

/// `PJRT_Event_IsReady`.
pub(crate) fn event_is_ready(api: &Api, e: EventPtr) -> Result<bool> {
    let mut a = sys::PJRT_Event_IsReady_Args::new();
    a.event = e.0;
    // SAFETY: live event.
    unsafe { pjrt!(api, PJRT_Event_IsReady, &mut a) }?;
    Ok(a.is_ready)
}

/// `PJRT_Event_Await`: blocks until the event is ready and returns its status.
pub(crate) fn event_await(api: &Api, e: EventPtr) -> Result<()> {
    let mut a = sys::PJRT_Event_Await_Args::new();
    a.event = e.0;
    // SAFETY: live event.
    unsafe { pjrt!(api, PJRT_Event_Await, &mut a) }
}

/// `PJRT_Event_Error` of a ready event: `Ok(())` if it completed without error.
pub(crate) fn event_status(api: &Api, e: EventPtr) -> Result<()> {
    let mut a = sys::PJRT_Event_Error_Args::new();
    a.event = e.0;
    // SAFETY: live event.
    unsafe { pjrt!(api, PJRT_Event_Error, &mut a) }
}

/// Shared completion state between an event's `OnReady` callback and its waiters.
pub(crate) struct ReadyState {
    api: &'static Api,
    inner: Mutex<ReadyInner>,
}

#[derive(Default)]
struct ReadyInner {
    result: Option<Result<()>>,
    waker: Option<Waker>,
}

impl ReadyState {
    /// A fresh, incomplete state.
    pub(crate) fn new(api: &'static Api) -> Arc<ReadyState> {
        Arc::new(ReadyState {
            api,
            inner: Mutex::new(ReadyInner::default()),
        })
    }

    /// The result if the event has completed; otherwise remembers `waker`.
    pub(crate) fn poll(&self, waker: &Waker) -> Option<Result<()>> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = &g.result {
            return Some(r.clone());
        }
        g.waker = Some(waker.clone());
        None
    }

    fn complete(&self, result: Result<()>) {
        let waker = {
            let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            g.result = Some(result);
            g.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

extern "C" fn on_ready_trampoline(err: *mut sys::PJRT_Error, user_arg: *mut c_void) {
    // Never unwind into the plugin.
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: `user_arg` came from `Arc::into_raw` in `event_on_ready`, and the plugin
        // calls this callback exactly once, so the reference count is given back once.
        let state = unsafe { Arc::from_raw(user_arg.cast::<ReadyState>()) };
        let result = if err.is_null() {
            Ok(())
        } else {
            Err(state.api.take_error(err, "PJRT_Event_OnReady"))
        };
        state.complete(result);
    });
}

/// `PJRT_Event_OnReady`: completes `state` when the event is ready.
pub(crate) fn event_on_ready(
    api: &'static Api,
    e: EventPtr,
    state: &Arc<ReadyState>,
) -> Result<()> {
    let user = Arc::into_raw(Arc::clone(state)) as *mut c_void;
    let mut a = sys::PJRT_Event_OnReady_Args::new();
    a.event = e.0;
    a.callback = Some(on_ready_trampoline);
    a.user_arg = user;
    // SAFETY: the trampoline matches the callback type and never unwinds; `user` is a leaked
    // Arc reclaimed by the trampoline.
    let r = unsafe { pjrt!(api, PJRT_Event_OnReady, &mut a) };
    if r.is_err() {
        // The callback will never run: take the reference back.
        // SAFETY: `user` came from `Arc::into_raw` just above and was not consumed.
        drop(unsafe { Arc::from_raw(user.cast::<ReadyState>()) });
    }
    r.map_err(|e: Error| e)
}
