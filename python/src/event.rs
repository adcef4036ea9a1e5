//! Event: something the device finishes later (a buffer's readiness, an execution's
//! completion), future-shaped: `wait`, `is_ready`, `await`, `add_done_callback`, `error`.

use crate::detach::Detach;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

use crate::errors::PyErrExt;

/// How often a blocking wait wakes up to check for Ctrl-C.
const SIGNAL_SLICE: Duration = Duration::from_millis(20);

/// Something the device finishes later (a buffer's readiness, an execution).
///
/// Future-shaped: ``wait``, ``is_ready``/``done``, ``await ev``, ``add_done_callback``,
/// ``error``.
#[pyclass(frozen, weakref, name = "Event", module = "rpjrt")]
pub struct PyEvent {
    inner: crate::notify::Held<Arc<rpjrt::Event>>,
    /// What completes: `buffer float32[8] ready`, `execution of main on device 0`.
    what: String,
    /// For a pending alias buffer's ready event: where its done-callbacks are registered,
    /// so that the alias's fulfiller accounts for them (`transfer::AliasCallbacks`).
    alias: Option<Arc<crate::transfer::AliasCallbacks>>,
    /// The process that made it: in a process forked since, its client is the parent's
    /// (every use refused), as the repr says.
    pid: u32,
    /// How it ended, once known (its done-callbacks' result, or a completed state read
    /// while the client was open): what `error` and the repr report after the client
    /// closed, when the event itself can no longer be asked.
    outcome: Arc<OnceLock<Result<(), rpjrt::Error>>>,
}

impl Drop for PyEvent {
    fn drop(&mut self) {
        // The event holds its client: the last reference may destroy the client, which
        // waits for running work; never with the GIL held.
        if let Some(inner) = self.inner.take() {
            crate::notify::drop_detached(inner);
        }
    }
}

impl PyEvent {
    pub fn new(inner: rpjrt::Event, what: String) -> PyEvent {
        PyEvent {
            inner: crate::notify::Held::new(Arc::new(inner)),
            what,
            alias: None,
            pid: std::process::id(),
            outcome: Arc::new(OnceLock::new()),
        }
    }

    /// The event, with its done-callbacks registered with `alias` (the callbacks of a
    /// pending alias buffer's fulfiller) when given.
    pub fn with_alias(mut self, alias: Option<Arc<crate::transfer::AliasCallbacks>>) -> PyEvent {
        self.alias = alias;
        self
    }

    /// How the event ended: `Some(Ok)` done, `Some(Err)` failed, or, once its client is
    /// closed, the closing error unless it was seen to complete before (an event that did
    /// not complete never reads as a success); `None` while pending. Other errors of the
    /// readiness check are returned as `Err` too.
    fn outcome(&self) -> Option<Result<(), rpjrt::Error>> {
        if let Some(r) = self.outcome.get() {
            return Some(r.clone());
        }
        match self.inner.is_ready() {
            Ok(false) => None,
            Ok(true) => {
                let r = match self.inner.error() {
                    Some(e) => Err(e),
                    // Closed between the two checks: its status was not read.
                    None => match self.inner.is_ready() {
                        Err(e) => return Some(Err(e)),
                        Ok(_) => Ok(()),
                    },
                };
                Some(self.outcome.get_or_init(|| r).clone())
            }
            Err(e) => Some(Err(e)),
        }
    }

    /// `done`, `failed: CODE`, `pending`, `closed`, or, in a process forked from the one
    /// that made the event, `inherited across fork` (as the reprs of the client's other
    /// objects say, `client::gone`).
    fn state(&self) -> String {
        if self.pid != std::process::id() {
            return "inherited across fork".into();
        }
        match self.outcome() {
            None => "pending".into(),
            Some(Ok(())) => "done".into(),
            Some(Err(rpjrt::Error::Closed(_))) => "closed".into(),
            Some(Err(e)) if self.outcome.get().is_some() => format!("failed: {}", e.code()),
            Some(Err(e)) => format!("unknown: {}", e.code()),
        }
    }
}

#[pymethods]
impl PyEvent {
    /// Waits until the event completes, or `timeout` seconds pass (`None`: no limit):
    /// `True` when it completed, `False` on timeout; raises the event's error if it failed.
    /// The GIL is released while waiting, and Ctrl-C interrupts the wait.
    #[pyo3(signature = (timeout = None))]
    pub(crate) fn wait(
        &self,
        py: Python<'_>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        // The package's one rule for seconds (no bool, a value's own failure kept).
        let limit = match timeout.filter(|t| !t.is_none()) {
            Some(t) => Some(crate::convert::secs_arg(Some(t), 0.0, "timeout")?),
            None => None,
        };
        let deadline = limit.and_then(|l| Instant::now().checked_add(l));
        let ev: &Arc<rpjrt::Event> = &self.inner;
        loop {
            let slice = match deadline {
                Some(d) => d
                    .saturating_duration_since(Instant::now())
                    .min(SIGNAL_SLICE),
                None => SIGNAL_SLICE,
            };
            let e = Arc::clone(ev);
            if py.detach_call(move || e.wait_timeout(slice)).pyerr()? {
                return Ok(true);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(false);
            }
            py.check_signals()?;
        }
    }

    /// Whether the event has completed (with or without an error), without blocking.
    fn is_ready(&self) -> PyResult<bool> {
        self.inner.is_ready().pyerr()
    }

    /// Whether the event has completed (`concurrent.futures` spelling).
    fn done(&self) -> PyResult<bool> {
        self.is_ready()
    }

    /// The exception a completed, failed event carries; `None` while pending or after
    /// success. Once the client is closed, an event not seen to complete before carries a
    /// `ClientClosedError` (it never reads as a success).
    fn error(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.outcome()?
            .err()
            .map(|e| crate::errors::to_py(e).into_value(py).into_any())
    }

    /// Calls `fn(event)` once the event completes. It runs on rpjrt's callback thread
    /// (never on the plugin's thread, which must not wait for the GIL), also when the event
    /// has completed already; exceptions it raises are reported as unraisable. Callbacks run
    /// one at a time: one that blocks delays the others (never an `await`).
    fn add_done_callback(slf: &Bound<'_, Self>, r#fn: Bound<'_, PyAny>) -> PyResult<()> {
        Self::on_done(slf, r#fn, crate::notify::Lane::User)
    }

    /// `add_done_callback` for rpjrt's own `await` (its wake-up thread, which runs no user
    /// code).
    fn _on_done(slf: &Bound<'_, Self>, r#fn: Bound<'_, PyAny>) -> PyResult<()> {
        Self::on_done(slf, r#fn, crate::notify::Lane::Wake)
    }

    fn __await__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let coro = py
            .import("rpjrt._aio")?
            .getattr("wait_event")?
            .call1((slf,))?;
        coro.call_method0("__await__")
    }

    fn __repr__(&self) -> String {
        let state = self.state();
        // "buffer float32[8] ready" names what completes: not said of one that did not.
        let what = match state.as_str() {
            "done" | "pending" => &self.what,
            s if s.starts_with("failed") => &self.what,
            _ => self.what.strip_suffix(" ready").unwrap_or(&self.what),
        };
        format!("rpjrt.Event({what}, {state})")
    }
}

/// How long `add_done_callback` waits for its event in an exit hook that runs after
/// rpjrt's (when no thread will call back any more).
const EXIT_CALLBACK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl PyEvent {
    fn on_done(
        slf: &Bound<'_, Self>,
        r#fn: Bound<'_, PyAny>,
        lane: crate::notify::Lane,
    ) -> PyResult<()> {
        let py = slf.py();
        if !r#fn.is_callable() {
            return Err(crate::errors::invalid(format!(
                "add_done_callback takes a callable, not {}",
                r#fn.get_type().name()?
            )));
        }
        if !crate::notify::warm_up(py, lane) {
            // The interpreter is exiting (an exit hook that runs after rpjrt's): no thread
            // will call back, so wait here (for a while: the event may never complete) and
            // call now.
            let inner = &slf.get().inner;
            let done = py.detach_call(|| inner.wait_timeout(EXIT_CALLBACK_WAIT).unwrap_or(true));
            let called = if done {
                crate::detach::calling_python(py, || r#fn.call1((slf,)).map(drop))
            } else {
                Err(pyo3::exceptions::PyRuntimeWarning::new_err(format!(
                    "the interpreter is exiting and {} did not complete within {} s: its \
                     done-callback is not called",
                    slf.get().what,
                    EXIT_CALLBACK_WAIT.as_secs()
                )))
            };
            if let Err(e) = called {
                e.write_unraisable(py, None);
            }
            return Ok(());
        }
        // The call waits in a slot, taken out (and run) only by the notifier thread with the
        // GIL held; an alias's fulfiller accounts for the slots of its alias's events.
        let call = Arc::new(crate::notify::CallbackSlot::new(
            r#fn.unbind(),
            slf.clone().into_any().unbind(),
        ));
        if let Some(alias) = &slf.get().alias {
            alias.register(&call);
        }
        // Runs on whichever thread completes the event: records how it ended (what `error`
        // reports once the client is closed), then only hands the slot over.
        let outcome = Arc::clone(&slf.get().outcome);
        slf.get().inner.add_done_callback(move |r| {
            let _ = outcome.set(r);
            crate::notify::post_slot(lane, call)
        });
        Ok(())
    }
}
