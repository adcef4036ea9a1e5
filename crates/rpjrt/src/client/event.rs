//! Completion events.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::client::{Client, ClientCore};
use crate::error::{Error, Result};
use crate::raw;

/// Sets how long a blocking wait ([`Event::wait`], [`crate::Buffer::block_until_ready`],
/// reading a buffer that is still being computed) polls for completion before it sleeps
/// in the plugin; `Duration::ZERO` sleeps at once. Process-wide; the default is 100 µs, or
/// the environment variable `RPJRT_WAIT_SPIN_US` (microseconds) when it is set at the
/// first client's creation.
///
/// Polling trades CPU for latency: a sleeping waiter is woken through the kernel, which
/// on the CPU plugins costs more than a short computation itself (a 70 µs training step
/// waits ~40 µs longer asleep than polling; bench/RESULTS.md). Waits on long computations
/// poll for the budget and then sleep, so they spend at most the budget in polling. Set it
/// to zero where cores are scarce and latency does not matter. The poll yields the CPU
/// between checks, so other runnable threads are not starved. A wait for a multi-device
/// call ([`crate::CallOutputs::block_until_ready`]) with at least as many devices still
/// running as the host has cores sleeps at once: their work needs every core. At most
/// [`MAX_WAIT_SPIN`].
pub fn set_wait_spin(spin: Duration) {
    let spin = spin.min(MAX_WAIT_SPIN);
    raw::event::set_spin_nanos(u64::try_from(spin.as_nanos()).unwrap_or(u64::MAX));
}

/// The longest poll [`set_wait_spin`] accepts (longer values are cut to it): one second.
pub const MAX_WAIT_SPIN: Duration = Duration::from_secs(1);

/// The current poll time of a blocking wait (see [`set_wait_spin`]).
pub fn wait_spin() -> Duration {
    Duration::from_nanos(raw::event::spin_nanos())
}

/// Applies `RPJRT_WAIT_SPIN_US` once per process, at the first client's creation.
pub(crate) fn wait_spin_from_env() -> Result<()> {
    static APPLIED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    let r = APPLIED.get_or_init(|| {
        let Some(v) = std::env::var_os("RPJRT_WAIT_SPIN_US") else {
            return Ok(());
        };
        let text = v.to_string_lossy();
        match text.trim().parse::<u64>() {
            Ok(us) if u128::from(us) <= MAX_WAIT_SPIN.as_micros() => {
                set_wait_spin(Duration::from_micros(us));
                Ok(())
            }
            _ => Err(format!(
                "RPJRT_WAIT_SPIN_US={text:?}: give whole microseconds from 0 to {}",
                MAX_WAIT_SPIN.as_micros()
            )),
        }
    });
    r.clone().map_err(Error::InvalidArgument)
}

/// Something the device will finish later: a transfer, a computation.
///
/// Wait with [`Event::wait`] (or [`Event::wait_timeout`]), poll with [`Event::is_ready`], or
/// `.await` it: the future is completed from the plugin's `OnReady` callback, with no thread
/// blocked.
pub struct Event {
    core: Arc<ClientCore>,
    raw: raw::event::Event,
    ready: OnceLock<Arc<ReadyState>>,
    /// For an event made by [`Event::new_user`]: whether [`Event::set`] was called.
    user_set: Option<AtomicBool>,
    /// For a buffer's ready event: the devices whose queues produce the buffer (a wait for
    /// it from a custom-call handler on a plugin worker thread of one is refused, as the
    /// buffer's is).
    devices: Vec<raw::device::DeviceRef>,
}

/// Completion state shared between an event's `OnReady` callback and its waiters.
#[derive(Default)]
struct ReadyState {
    inner: Mutex<ReadyInner>,
    cv: Condvar,
}

/// The completion states of a client's events that asynchronous waiters use, which
/// [`Client::close`](crate::Client::close) completes with its error (weakly held: an event
/// dropped, or completed, is let go as the list grows).
#[derive(Default)]
pub(crate) struct Waited(Mutex<Vec<std::sync::Weak<ReadyState>>>);

impl Waited {
    fn add(&self, state: &Arc<ReadyState>) {
        let mut list = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if list.len() == list.capacity() {
            // Amortised: the live, pending ones are kept before the list grows.
            list.retain(|w| w.upgrade().is_some_and(|s| s.poll(None).is_none()));
        }
        list.push(Arc::downgrade(state));
    }

    /// Completes every pending one with `error()`.
    pub(crate) fn close_all(&self, error: impl Fn() -> Error) {
        let list = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        for state in list.iter().filter_map(|w| w.upgrade()) {
            state.complete(Err(error()));
        }
    }
}

/// A function run once an event completes, with its result.
type DoneCallback = Box<dyn FnOnce(Result<()>) + Send>;

#[derive(Default)]
struct ReadyInner {
    result: Option<Result<()>>,
    waker: Option<Waker>,
    callbacks: Vec<DoneCallback>,
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

    /// Called from the plugin's callback, or by [`Client::close`](crate::Client::close):
    /// the first result stays. Never blocks for long (a short lock); the done callbacks run
    /// after the lock is released.
    fn complete(&self, result: Result<()>) {
        let (waker, callbacks) = {
            let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            if g.result.is_some() {
                return;
            }
            g.result = Some(result.clone());
            (g.waker.take(), std::mem::take(&mut g.callbacks))
        };
        self.cv.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
        for f in callbacks {
            f(result.clone());
        }
    }

    /// Runs `f` with the result once there is one: now, on this thread, if the event has
    /// completed; otherwise on the thread that completes it. No lock is held while it runs.
    fn on_done(&self, f: DoneCallback) {
        let result = {
            let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            match &g.result {
                Some(r) => r.clone(),
                None => {
                    g.callbacks.push(f);
                    return;
                }
            }
        };
        f(result);
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
            user_set: None,
            devices: Vec::new(),
        }
    }

    /// [`Event::from_raw`] of an event that completes on `devices`' queues: a buffer's
    /// ready event (`raw::buffer::Buffer::wait_devices`) or an execution's completion event
    /// (its device).
    pub(crate) fn of_buffer_on(
        core: &Arc<ClientCore>,
        raw: raw::event::Event,
        devices: Vec<raw::device::DeviceRef>,
    ) -> Event {
        Event {
            devices,
            ..Event::from_raw(core, raw)
        }
    }

    /// Sets the devices whose queues complete the event (an execution's, once its device is
    /// known).
    pub(crate) fn set_devices(&mut self, devices: Vec<raw::device::DeviceRef>) {
        self.devices = devices;
    }

    /// Refuses a wait that would never end: from a custom-call handler on a plugin worker
    /// thread, for a buffer's ready event on the device of the handler's own execution.
    fn refuse_wait_in_worker_handler(&self) -> Result<raw::ffi::WorkerWait> {
        raw::ffi::refuse_event_wait_in_worker_handler(self.core.raw(), &self.devices, || {
            self.raw.is_ready().unwrap_or(true)
        })
    }

    /// A pending event that this program completes with [`Event::set`]
    /// (`PJRT_Event_Create`, PJRT 0.89): something for device work or another thread to
    /// wait on, the way they wait on the plugin's own events. A plugin older than 0.89
    /// gives [`Error::Unsupported`] naming the entry and the version.
    ///
    /// Set it before it is dropped if anything may be waiting on it: a waiter blocked in
    /// the plugin is only woken by the set.
    pub fn new_user(client: &Client) -> Result<Event> {
        let core = client.core();
        core.check("client")?;
        let raw = raw::event::Event::create(core.raw())?;
        Ok(Event {
            core: Arc::clone(core),
            raw,
            ready: OnceLock::new(),
            user_set: Some(AtomicBool::new(false)),
            devices: Vec::new(),
        })
    }

    /// Completes an event made by [`Event::new_user`] (`PJRT_Event_Set`): `Ok(())` for
    /// success, or an error whose code and text its waiters then get. Once only: a second
    /// set, or a set on an event the plugin made, is refused with an error.
    pub fn set(&self, result: Result<()>) -> Result<()> {
        self.core.check("event")?;
        let Some(done) = &self.user_set else {
            return Err(Error::invalid(
                "only an event made by Event::new_user can be set; the plugin completes its \
                 own events",
            ));
        };
        if done.swap(true, Ordering::AcqRel) {
            return Err(Error::invalid(
                "this event was set already; an event is set once",
            ));
        }
        let error = result.err().map(|e| (e.code(), e.to_string()));
        let r = self
            .raw
            .set(error.as_ref().map(|(c, m)| (c.number(), m.as_str())));
        if r.is_err() {
            // The plugin refused: the event is still pending and may be set again.
            done.store(false, Ordering::Release);
        }
        r
    }

    /// Blocks until the event completes; returns its error if it failed.
    pub fn wait(&self) -> Result<()> {
        self.core.check("event")?;
        let _waiting = self.refuse_wait_in_worker_handler()?;
        let _span = crate::trace::span(crate::trace::Category::Wait, "event_wait");
        self.raw.wait()
    }

    /// Blocks until every event in `events` has completed; returns the error of the first
    /// one (in the order given) that failed (each event's own error stays readable with
    /// [`Event::error`]). One wait covers them all: it polls for up to the poll time, as
    /// [`Event::wait`] does, then sleeps until the last pending event's `OnReady` callback
    /// wakes it, so it wakes once however many events complete one after another.
    pub fn wait_all(events: &[&Event]) -> Result<()> {
        for e in events {
            e.core.check("event")?;
        }
        let _span = crate::trace::span(crate::trace::Category::Wait, "event_wait_all")
            .int("events", events.len() as i64);
        let raws: Vec<&raw::event::Event> = events.iter().map(|e| &e.raw).collect();
        let failed = raw::event::AllReady::register(&raws).wait(&raws);
        failed.into_iter().next().map_or(Ok(()), |(_, e)| Err(e))
    }

    /// Blocks until the event completes or `timeout` passes: `Ok(true)` when it completed
    /// without error, `Ok(false)` on timeout, its error if it failed. Polls first, like
    /// [`Event::wait`] (for at most the timeout), then registers the plugin's `OnReady`
    /// callback once (no thread is kept blocked in the plugin after a timeout).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<bool> {
        self.core.check("event")?;
        let _waiting = self.refuse_wait_in_worker_handler()?;
        let _span = crate::trace::span(crate::trace::Category::Wait, "event_wait");
        // Poll first, as `wait` does, but never past the timeout.
        if raw::event::spin_for(timeout.min(wait_spin()), || {
            self.raw.is_ready().unwrap_or(true)
        }) {
            return self.raw.status().map(|()| true);
        }
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

    /// Runs `callback` once the event completes, with its result (`Ok(())` or its error):
    /// at once on this thread when it has completed already, otherwise on the thread that
    /// completes it, often a plugin's worker. The callback must not block (the plugin may
    /// need that thread); no lock of rpjrt's is held while it runs. Callbacks run in the
    /// order they were added. A closed client's event reports `Closed` at once.
    pub fn add_done_callback(&self, callback: impl FnOnce(Result<()>) + Send + 'static) {
        match self.ready_state() {
            Ok(state) => state.on_done(Box::new(callback)),
            Err(e) => callback(Err(e)),
        }
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
            self.core.waited_events.add(state);
            let target = Arc::clone(state);
            if let Err(e) = self.raw.on_ready(Box::new(move |r| target.complete(r))) {
                // The callback will never run: record the failure for every waiter.
                state.complete(Err(e));
            }
            // Closed since the check above, perhaps before the state was listed.
            if let Err(e) = self.core.check("event") {
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
