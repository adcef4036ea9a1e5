//! Completion events.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use crate::client::ClientCore;
use crate::error::{Error, Result};
use crate::raw::calls::EventPtr;
use crate::raw::event::{self as rev, ReadyState};

/// Something the device will finish later: a transfer, a computation.
///
/// Wait with [`Event::wait`], poll with [`Event::is_ready`], or `.await` it: the future is
/// completed from the plugin's `OnReady` callback, with no thread blocked.
pub struct Event {
    core: Arc<ClientCore>,
    ptr: EventPtr,
    ready: OnceLock<Arc<ReadyState>>,
}

impl Event {
    pub(crate) fn from_raw(core: &Arc<ClientCore>, ptr: EventPtr) -> Event {
        Event {
            core: Arc::clone(core),
            ptr,
            ready: OnceLock::new(),
        }
    }

    /// Blocks until the event completes; returns its error if it failed.
    pub fn wait(&self) -> Result<()> {
        self.core.check("event")?;
        rev::event_await(self.core.api, self.ptr)
    }

    /// Whether the event has completed.
    pub fn is_ready(&self) -> Result<bool> {
        self.core.check("event")?;
        rev::event_is_ready(self.core.api, self.ptr)
    }

    /// The error of a completed, failed event; `None` while pending or after success.
    pub fn error(&self) -> Option<Error> {
        if !self.is_ready().unwrap_or(false) {
            return None;
        }
        rev::event_status(self.core.api, self.ptr).err()
    }
}

impl Future for Event {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        if let Err(e) = self.core.check("event") {
            return Poll::Ready(Err(e));
        }
        let mut fresh = false;
        let state = self.ready.get_or_init(|| {
            fresh = true;
            ReadyState::new(self.core.api)
        });
        if let Some(r) = state.poll(cx.waker()) {
            return Poll::Ready(r);
        }
        if fresh {
            if let Err(e) = rev::event_on_ready(self.core.api, self.ptr, state) {
                return Poll::Ready(Err(e));
            }
            // The callback may have run already, before our waker was stored.
            if let Some(r) = state.poll(cx.waker()) {
                return Poll::Ready(r);
            }
        }
        Poll::Pending
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let _ = rev::event_destroy(self.core.api, self.ptr);
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.is_ready() {
            Ok(true) => "ready",
            Ok(false) => "pending",
            Err(_) => "closed",
        };
        write!(f, "Event({state})")
    }
}
