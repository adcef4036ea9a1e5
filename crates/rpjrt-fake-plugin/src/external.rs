//! User-created events (`PJRT_Event_Create`/`Set`) and DMA mapping of host memory
//! (`PJRT_Client_DmaMap`/`DmaUnmap`), which the CPU plugins lack or refuse.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::{Condvar, Mutex, MutexGuard};

use rpjrt_sys as sys;

use crate::buffer::FakeEvent;
use crate::error::Fail;
use crate::registry::{self, get};

/// The completion state of an event made by `PJRT_Event_Create`.
#[derive(Default)]
pub(crate) struct UserEvent {
    state: Mutex<UserState>,
    cv: Condvar,
}

#[derive(Default)]
struct UserState {
    /// `None` while pending; then the status it was set with.
    done: Option<Option<Fail>>,
    /// `OnReady` callbacks registered while pending, with their user argument.
    waiting: Vec<(sys::PJRT_Event_OnReadyCallback, usize)>,
}

impl UserEvent {
    fn lock(&self) -> MutexGuard<'_, UserState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `PJRT_Event_Set` was called.
    pub fn is_set(&self) -> bool {
        self.lock().done.is_some()
    }

    /// Blocks until set, then gives the status.
    pub fn wait(&self) -> Result<(), Fail> {
        let mut g = self.lock();
        loop {
            if let Some(done) = &g.done {
                return done.clone().map_or(Ok(()), Err);
            }
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Runs `callback` once set: now if it is, else from `PJRT_Event_Set`.
    pub fn on_ready(&self, callback: sys::PJRT_Event_OnReadyCallback, user_arg: *mut c_void) {
        let mut g = self.lock();
        match &g.done {
            Some(done) => {
                let err = done.clone().map_or(std::ptr::null_mut(), Fail::into_raw);
                drop(g);
                // SAFETY: the caller registered this callback with this user_arg; it owns
                // `err`.
                unsafe { callback(err, user_arg) };
            }
            None => g.waiting.push((callback, user_arg as usize)),
        }
    }

    fn set(&self, status: Option<Fail>) -> Result<(), Fail> {
        let waiting = {
            let mut g = self.lock();
            if g.done.is_some() {
                bail!("fake plugin: PJRT_Event_Set on an event that was set already");
            }
            g.done = Some(status.clone());
            std::mem::take(&mut g.waiting)
        };
        self.cv.notify_all();
        for (callback, user_arg) in waiting {
            let err = status.clone().map_or(std::ptr::null_mut(), Fail::into_raw);
            // SAFETY: registered by `on_ready` with this user_arg; the callback owns `err`.
            unsafe { callback(err, user_arg as *mut c_void) };
        }
        Ok(())
    }
}

entry!(PJRT_Event_Create, |a, _| {
    a.event = crate::buffer::new_user_event();
});

entry!(PJRT_Event_Set, |a, _| {
    let event: &FakeEvent = get(a.event)?;
    let user = event
        .user
        .as_ref()
        .ok_or_else(|| invalid!("fake plugin: PJRT_Event_Set on an event the plugin made"))?;
    let status = if a.error_code == 0 {
        None
    } else {
        let message = if a.error_message.is_null() {
            String::new()
        } else {
            // SAFETY: the caller passes `error_message_size` bytes at `error_message`.
            let bytes = unsafe {
                std::slice::from_raw_parts(a.error_message.cast::<u8>(), a.error_message_size)
            };
            String::from_utf8_lossy(bytes).into_owned()
        };
        Some(Fail::new(a.error_code, message))
    };
    user.set(status)?;
});

/// Host ranges mapped for DMA: start address to length.
static MAPPED: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());

fn mapped() -> MutexGuard<'static, BTreeMap<usize, usize>> {
    MAPPED.lock().unwrap_or_else(|e| e.into_inner())
}

entry!(PJRT_Client_DmaMap, |a, _| {
    registry::get(a.client)?;
    let start = a.data as usize;
    if start == 0 || a.size == 0 {
        bail!(
            "fake plugin: PJRT_Client_DmaMap of {} bytes at {:p}",
            a.size,
            a.data
        );
    }
    let end = start
        .checked_add(a.size)
        .ok_or_else(|| invalid!("fake plugin: PJRT_Client_DmaMap range wraps"))?;
    let mut m = mapped();
    let overlaps = m
        .range(..end)
        .next_back()
        .is_some_and(|(&s, &n)| s + n > start);
    if overlaps {
        bail!(
            "fake plugin: PJRT_Client_DmaMap of {:p} overlaps a mapped range",
            a.data
        );
    }
    m.insert(start, a.size);
});

entry!(PJRT_Client_DmaUnmap, |a, _| {
    registry::get(a.client)?;
    if mapped().remove(&(a.data as usize)).is_none() {
        bail!(
            "fake plugin: PJRT_Client_DmaUnmap of {:p}, which is not mapped",
            a.data
        );
    }
});
