//! Completion events.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::client::ClientCore;
use crate::error::{Error, Result};
use crate::raw;

/// Something the device will finish later: a transfer, a computation.
///
/// Wait with [`Event::wait`] (or [`Event::wait_timeout`]), poll with [`Event::is_ready`], or
/// `.await` it: the future is completed from the plugin's `OnReady` callback, with no thread
/// blocked.
pub struct Event {
    core: Arc<ClientCore>,
    raw: raw::event::Event,
    ready: OnceLock<Arc<ReadyState>>,
}

/// Completion state shared between an event's `OnReady` callback and its waiters.
#[derive(Default)]
struct ReadyState {
    inner: Mutex<ReadyInner>,
    cv: Condvar,
}

#[derive(Default)]
struct ReadyInner {
    result: Option<Result<()>>,
    waker: Option<Waker>,
}

impl ReadyState {
    /// The result if the event has completed; otherwise remembers `waker`.
    fn poll(&self, waker: Option<&Waker>) -> Option<Result<()>> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = &g.result {
            return Some(r.clone());
        }
        if let Some(w) = waker {
            g.waker = Some(w.clone());
        }
        None
    }

    /// Called once, from the plugin's callback: never blocks for long (a short lock).
    fn complete(&self, result: Result<()>) {
        let waker = {
            let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            g.result = Some(result);
            g.waker.take()
        };
        self.cv.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Waits for the result until `deadline`.
    fn wait_until(&self, deadline: Instant) -> Option<Result<()>> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(r) = &g.result {
                return Some(r.clone());
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            g = self
                .cv
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

impl Event {
    pub(crate) fn from_raw(core: &Arc<ClientCore>, raw: raw::event::Event) -> Event {
        Event {
            core: Arc::clone(core),
            raw,
            ready: OnceLock::new(),
        }
    }

    /// Blocks until the event completes; returns its error if it failed.
    pub fn wait(&self) -> Result<()> {
        self.core.check("event")?;
        self.raw.wait()
    }

    /// Blocks until the event completes or `timeout` passes: `Ok(true)` when it completed
    /// without error, `Ok(false)` on timeout, its error if it failed. Registers the plugin's
    /// `OnReady` callback once (no thread is kept blocked in the plugin after a timeout).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<bool> {
        self.core.check("event")?;
        let deadline = Instant::now().checked_add(timeout);
        let state = self.ready_state()?;
        let result = match deadline {
            Some(d) => state.wait_until(d),
            // A timeout too large to represent: wait without one.
            None => return self.raw.wait().map(|()| true),
        };
        match result {
            Some(r) => r.map(|()| true),
            None => Ok(false),
        }
    }

    /// Whether the event has completed.
    pub fn is_ready(&self) -> Result<bool> {
        self.core.check("event")?;
        self.raw.is_ready()
    }

    /// The error of a completed, failed event; `None` while pending or after success.
    pub fn error(&self) -> Option<Error> {
        if !self.is_ready().unwrap_or(false) {
            return None;
        }
        self.raw.status().err()
    }

    /// The completion state, registering the `OnReady` callback the first time.
    fn ready_state(&self) -> Result<&Arc<ReadyState>> {
        self.core.check("event")?;
        let mut fresh = false;
        let state = self.ready.get_or_init(|| {
            fresh = true;
            Arc::new(ReadyState::default())
        });
        if fresh {
            let target = Arc::clone(state);
            if let Err(e) = self.raw.on_ready(Box::new(move |r| target.complete(r))) {
                // The callback will never run: record the failure for every waiter.
                state.complete(Err(e));
            }
        }
        Ok(state)
    }
}

impl Future for Event {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        if let Err(e) = self.core.check("event") {
            return Poll::Ready(Err(e));
        }
        let state = match self.ready_state() {
            Ok(s) => s,
            Err(e) => return Poll::Ready(Err(e)),
        };
        match state.poll(Some(cx.waker())) {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        }
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
