//! rpjrt's own spans (conversion only; the recorder, the Chrome trace format, the viewer
//! page and the plugin-profile policy are `rpjrt::trace`). The context manager
//! `rpjrt.trace()` is Python sugar in `rpjrt/_trace.py`.

use crate::detach::Detach;
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::client::PyClient;
use crate::errors::{invalid, PyErrExt};
use rpjrt::profiler::PluginProfiler;
use rpjrt::trace::{self, Arg, Trace};

/// A running recording, from `_trace_begin`: `finish()` stops it once and returns the
/// `Trace`. The recording is the process's that began it: in a process forked since,
/// `finish()` stops nothing (the child's own recording, if it began one, goes on) and
/// gives an empty trace, and dropping it stops nothing either.
#[pyclass(name = "_TraceRecording", module = "rpjrt._rpjrt", frozen)]
pub struct PyTraceRecording {
    /// `None` after `finish`; inside, the plugin profiler (or why there is none; `None`
    /// when no client was given).
    state: Mutex<Option<Option<rpjrt::Result<PluginProfiler>>>>,
    /// The process that began the recording.
    pid: u32,
}

impl PyTraceRecording {
    /// Whether this process is a fork of the one that began the recording.
    fn inherited(&self) -> bool {
        self.pid != std::process::id()
    }
}

/// Starts recording rpjrt's spans; with `client`, also starts its plugin's profiler (the
/// Profiler extension) when the plugin has one.
#[pyfunction]
#[pyo3(signature = (client = None))]
pub fn _trace_begin(
    py: Python<'_>,
    client: Option<&Bound<'_, PyClient>>,
) -> PyResult<PyTraceRecording> {
    trace::start().pyerr()?;
    let profiler = client.map(|c| {
        let c = c.get();
        py.detach_call(|| PluginProfiler::begin(&c.inner))
    });
    Ok(PyTraceRecording {
        state: Mutex::new(Some(profiler)),
        pid: std::process::id(),
    })
}

impl Drop for PyTraceRecording {
    /// A recording dropped without `finish` (its `with` block never ended) stops, so
    /// that the next `rpjrt.trace()` can start.
    fn drop(&mut self) {
        let inherited = self.inherited();
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        match state.take() {
            // The parent's recording and profiler: left alone (leaked) in a forked child.
            Some(profiler) if inherited => std::mem::forget(profiler),
            Some(_) => {
                let _ = trace::stop();
            }
            None => {}
        }
    }
}

#[pymethods]
impl PyTraceRecording {
    /// Stops the recording (and the plugin's profiler) and returns the trace.
    fn finish(&self, py: Python<'_>) -> PyResult<PyTrace> {
        let state = self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| invalid("this trace recording was already finished"))?;
        if self.inherited() {
            // The parent's recording: nothing of it was recorded here, and its plugin
            // profiler is the parent's (leaked: nothing inherited across fork may call the
            // plugin).
            std::mem::forget(state);
            let mut t = Trace::default();
            t.set_metadata(
                "recording",
                format!(
                    "none in this process: it was forked (pid {}) from the process that \
                     began the recording (pid {}), which records and writes it",
                    std::process::id(),
                    self.pid
                ),
            );
            t.set_metadata("command", "rpjrt.trace() (Python)");
            return Ok(PyTrace { inner: t });
        }
        let mut t = trace::stop().pyerr()?;
        match state {
            Some(profiler) => {
                let collected = py.detach_call(|| profiler.and_then(|p| p.finish()));
                t.attach_plugin_profile(collected);
            }
            None => t.set_metadata(
                "plugin_profile",
                "none: no client was given (rpjrt.trace(client=...) collects its plugin's \
                 profile)",
            ),
        }
        t.set_metadata("command", "rpjrt.trace() (Python)");
        Ok(PyTrace { inner: t })
    }
}

/// A finished trace: rpjrt's spans, metadata and the plugin's profile.
#[pyclass(name = "Trace", module = "rpjrt", frozen)]
pub struct PyTrace {
    inner: Trace,
}

fn arg_to_py(py: Python<'_>, a: &Arg) -> PyResult<Py<PyAny>> {
    Ok(match a {
        Arg::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        Arg::Text(s) => s.into_pyobject(py)?.into_any().unbind(),
    })
}

#[pymethods]
impl PyTrace {
    /// The spans, ordered by start: dicts with `name`, `category`, `start_us`,
    /// `duration_us`, `thread` and `args`.
    #[getter]
    fn events<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for e in self.inner.events() {
            let d = PyDict::new(py);
            d.set_item("name", &e.name)?;
            d.set_item("category", e.category.name())?;
            d.set_item("start_us", e.start_us)?;
            d.set_item("duration_us", e.duration_us)?;
            d.set_item("thread", e.thread)?;
            let args = PyDict::new(py);
            for (k, v) in &e.args {
                args.set_item(*k, arg_to_py(py, v)?)?;
            }
            d.set_item("args", args)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// How many spans of `category` (`load`, `compile`, `transfer`, `execute`, `wait`,
    /// `fetch`, `custom_call`) were recorded.
    fn count(&self, category: &str) -> PyResult<usize> {
        let c = trace::Category::from_name(category).ok_or_else(|| {
            let names: Vec<&str> = trace::Category::ALL.iter().map(|c| c.name()).collect();
            invalid(format!(
                "unknown trace category {category:?}: expected one of {}",
                names.join(", ")
            ))
        })?;
        Ok(self.inner.count(c))
    }

    /// The metadata (`otherData` of the Chrome trace): `plugin_profile` says what the
    /// plugin's profiler gave, or why nothing.
    #[getter]
    fn metadata(&self) -> std::collections::BTreeMap<String, String> {
        self.inner.metadata().clone()
    }

    /// The plugin's serialized `XSpace`, or `None`.
    #[getter]
    fn plugin_profile<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.inner.plugin_profile().map(|b| PyBytes::new(py, b))
    }

    /// The Chrome trace-event JSON text (open it in Perfetto or `chrome://tracing`).
    fn to_chrome_json(&self) -> String {
        self.inner.to_chrome_json()
    }

    /// The self-contained HTML viewer page of this trace.
    fn to_html(&self) -> String {
        self.inner.to_html()
    }

    /// Writes the Chrome trace JSON to `path`, and the plugin's profile beside it
    /// (`NAME.plugin.xspace.pb`) when there is one.
    fn save(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        py.detach_call(|| self.inner.save(&path)).pyerr()
    }

    fn __len__(&self) -> usize {
        self.inner.events().len()
    }

    fn __repr__(&self) -> String {
        let mut parts = Vec::new();
        for c in trace::Category::ALL {
            let n = self.inner.count(c);
            if n > 0 {
                parts.push(format!("{}={n}", c.name()));
            }
        }
        let n = self.inner.events().len();
        if parts.is_empty() {
            return format!("<rpjrt.Trace {n} spans>");
        }
        format!("<rpjrt.Trace {n} spans: {}>", parts.join(" "))
    }
}

/// The viewer page of a Chrome trace given as JSON text.
#[pyfunction]
#[pyo3(signature = (json, title = "rpjrt trace"))]
pub fn _trace_html(json: &str, title: &str) -> PyResult<String> {
    trace::html(json, title).pyerr()
}

/// Registers the trace functions and classes.
pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTraceRecording>()?;
    m.add_class::<PyTrace>()?;
    m.add_function(wrap_pyfunction!(_trace_begin, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_html, m)?)?;
    Ok(())
}
