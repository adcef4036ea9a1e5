//! Streaming uploads, raw partial reads, uninitialised, error and alias buffers (conversion only;
//! the logic is `rpjrt::transfer`). Python-side sugar (tqdm bars, numpy sources) lives in
//! `rpjrt/transfer.py`.

use crate::detach::{calling_python, Detach};
use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3::{PyTraverseError, PyVisit};

use crate::buffer::PyBuffer;
use crate::client::PyClient;
use crate::convert::dtype_from_py;
use crate::errors::{invalid, PyErrExt};
use crate::pybuf::HostView;

/// The largest value a size, offset or count of the transfer API may take: 2**63 - 1.
pub(crate) const MAX_COUNT: u64 = i64::MAX as u64;

/// A whole-number argument `what` of the transfer API in `lo..=hi`. A bool or anything
/// that is not an integer is a `TypeError` naming it; a value out of range, however large
/// or negative, is an `InvalidArgumentError` naming it and the range (never Python's
/// `OverflowError` about C types).
pub(crate) fn count_arg(obj: &Bound<'_, PyAny>, what: &str, lo: u64, hi: u64) -> PyResult<u64> {
    let type_error = || {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "{what} must be an integer, not {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    };
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(type_error());
    }
    let range = || {
        invalid(format!(
            "{what} is {obj}, outside its range: an integer from {lo} to {}",
            if hi == MAX_COUNT {
                "2**63-1".to_string()
            } else {
                hi.to_string()
            }
        ))
    };
    let index = obj
        .py()
        .import("operator")?
        .call_method1("index", (obj,))
        .map_err(|e| {
            if e.is_instance_of::<pyo3::exceptions::PyTypeError>(obj.py()) {
                type_error()
            } else {
                e
            }
        })?;
    match index.extract::<i128>() {
        Ok(v) if v >= i128::from(lo) && v <= i128::from(hi) => Ok(v as u64),
        _ => Err(range()),
    }
}

/// Uploads `dtype[shape]` through the plugin's async transfer manager, one chunk at a time:
/// `source(offset, nbytes)` returns a C-contiguous buffer-protocol object of exactly
/// `nbytes` bytes (bytes `offset..offset + nbytes` of the row-major array), which is handed
/// to the plugin in place, with the GIL released while it copies. `progress(done, total)`
/// is called after each chunk when the array is at least `progress_threshold` bytes.
#[pyfunction]
#[pyo3(signature = (client, source, dtype, shape, device = None, memory = None, chunk_bytes = None, progress = None, progress_threshold = None))]
#[allow(clippy::too_many_arguments)]
pub fn _put_streaming(
    py: Python<'_>,
    client: &Bound<'_, PyClient>,
    source: &Bound<'_, PyAny>,
    dtype: &Bound<'_, PyAny>,
    shape: Vec<i64>,
    device: Option<&Bound<'_, PyAny>>,
    memory: Option<&Bound<'_, PyAny>>,
    chunk_bytes: Option<&Bound<'_, PyAny>>,
    progress: Option<&Bound<'_, PyAny>>,
    progress_threshold: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyBuffer>> {
    let chunk_bytes = match chunk_bytes {
        Some(c) => count_arg(c, "chunk_bytes", 1, MAX_COUNT)? as usize,
        None => rpjrt::StreamOptions::default().chunk_size,
    };
    let progress_threshold = match progress_threshold {
        Some(t) => count_arg(t, "progress_threshold", 0, MAX_COUNT)?,
        None => rpjrt::StreamOptions::default().progress_threshold,
    };
    let t = dtype_from_py(dtype)?;
    let me = client.get();
    let (dev, mem) = me.resolve_target(py, device, memory)?;
    // A Python exception from the source or the progress callback is raised as itself.
    let raised: RefCell<Option<PyErr>> = RefCell::new(None);
    let keep = |r: PyResult<()>| -> rpjrt::Result<()> {
        r.map_err(|e| {
            let msg = format!("the streaming upload was stopped: {e}");
            *raised.borrow_mut() = Some(e);
            rpjrt::Error::InvalidArgument(msg)
        })
    };
    let mut lend = |offset: usize, n: usize, sink: &mut rpjrt::ChunkSink<'_>| {
        let r = (|| -> PyResult<()> {
            let chunk = calling_python(py, || source.call1((offset, n)))?;
            let view = HostView::get(&chunk).ok_or_else(|| {
                invalid(format!(
                    "source({offset}, {n}) must return a buffer-protocol object, not {}",
                    chunk
                        .get_type()
                        .name()
                        .map(|s| s.to_string())
                        .unwrap_or_default()
                ))
            })?;
            if !view.is_c_contiguous() {
                return Err(invalid(format!(
                    "source({offset}, {n}) returned bytes that are not C-contiguous"
                )));
            }
            let region = view.region(0, view.byte_len() as i128)?;
            // SAFETY: `view` lives until the end of this closure, so the region's bytes stay
            // valid; the plugin is done with them when `write` returns.
            let bytes = unsafe { region.as_slice() };
            py.detach_call(|| sink.write(bytes)).pyerr()
        })();
        keep(r)
    };
    let progress = progress.filter(|p| !p.is_none());
    let mut report = |done: u64, total: u64| -> rpjrt::Result<()> {
        match progress {
            Some(p) => keep(calling_python(py, || p.call1((done, total))).map(|_| ())),
            None => Ok(()),
        }
    };
    let options = rpjrt::StreamOptions {
        chunk_size: chunk_bytes,
        progress: Some(&mut report),
        progress_threshold,
    };
    let r = me
        .inner
        .put_streaming_lent(t, &shape, &dev, mem.as_ref(), &mut lend, options);
    match (r, raised.into_inner()) {
        (Ok(b), _) => PyBuffer::wrap(py, b, &client.clone().unbind()),
        (Err(_), Some(e)) => Err(e),
        (Err(e), None) => Err(e).pyerr(),
    }
}

/// `size` bytes from byte `offset` of the buffer's on-device form, as bytes. The wait for
/// the buffer's contents answers Ctrl-C ([`wait_settled`]).
#[pyfunction]
pub fn _copy_raw_to_host<'py>(
    py: Python<'py>,
    buffer: &Bound<'py, PyBuffer>,
    offset: &Bound<'py, PyAny>,
    size: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let offset = count_arg(offset, "offset", 0, MAX_COUNT)? as usize;
    let size = count_arg(size, "size", 0, MAX_COUNT)? as usize;
    let b = buffer.get();
    b.check_not_deleted()?;
    // The range first: the destination is allocated only for a read that can happen.
    b.rb().check_raw_read(offset, size).pyerr()?;
    let mut out = rpjrt::host::try_zeroed(size, "a raw read").pyerr()?;
    wait_settled(py, b.rb())?;
    py.detach_call(|| b.rb().copy_raw_to_host(offset, &mut out))
        .pyerr()?;
    Ok(PyBytes::new(py, &out))
}

/// Waits until `b`'s contents are ready, have failed, or the buffer is gone, through the
/// one interruptible wait ([`crate::buffer::wait_buffer`]: without the GIL, answering
/// Ctrl-C): for calls that would otherwise wait inside one plugin call, where no signal is
/// seen (a raw read, a raw copy's wait, a checkpoint save). Returns only an interruption
/// (what a signal handler raised: `KeyboardInterrupt`, ...): the buffer's own failure, or
/// its deletion, is left to the call that follows, which reports it as it always has.
pub(crate) fn wait_settled(py: Python<'_>, b: &rpjrt::Buffer) -> PyResult<()> {
    match crate::buffer::wait_buffer(py, b) {
        Err(e) if !crate::errors::is_rpjrt_error(py, &e) => Err(e),
        _ => Ok(()),
    }
}

/// A buffer with unspecified contents.
#[pyfunction]
#[pyo3(signature = (client, dtype, shape, device = None, memory = None))]
pub fn _create_uninitialized_buffer(
    py: Python<'_>,
    client: &Bound<'_, PyClient>,
    dtype: &Bound<'_, PyAny>,
    shape: Vec<i64>,
    device: Option<&Bound<'_, PyAny>>,
    memory: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyBuffer>> {
    let t = dtype_from_py(dtype)?;
    let me = client.get();
    let (dev, mem) = me.resolve_target(py, device, memory)?;
    let b = py
        .detach_call(|| {
            me.inner
                .create_uninitialized_buffer(t, &shape, &dev, mem.as_ref())
        })
        .pyerr()?;
    PyBuffer::wrap(py, b, &client.clone().unbind())
}

/// A buffer that carries the error `code` (a name such as "INTERNAL") and `message`.
#[pyfunction]
#[pyo3(signature = (client, dtype, shape, code, message, device = None, memory = None))]
#[allow(clippy::too_many_arguments)]
pub fn _create_error_buffer(
    py: Python<'_>,
    client: &Bound<'_, PyClient>,
    dtype: &Bound<'_, PyAny>,
    shape: Vec<i64>,
    code: &str,
    message: &str,
    device: Option<&Bound<'_, PyAny>>,
    memory: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyBuffer>> {
    let t = dtype_from_py(dtype)?;
    let c = rpjrt::Code::from_name(code).pyerr()?;
    let me = client.get();
    let (dev, mem) = me.resolve_target(py, device, memory)?;
    let b = py
        .detach_call(|| {
            me.inner
                .create_error_buffer(c, message, t, &shape, &dev, mem.as_ref())
        })
        .pyerr()?;
    PyBuffer::wrap(py, b, &client.clone().unbind())
}

/// The promise that completes an alias buffer (rpjrt::AliasFulfiller): `fulfill(buffer)`
/// gives the alias that buffer's contents, `fail(code, message)` an error. Used once;
/// dropped unused, it fails the alias with CANCELLED so nothing waits forever.
#[pyclass(frozen, weakref, name = "AliasFulfiller", module = "rpjrt")]
pub struct PyAliasFulfiller {
    inner: Mutex<Option<rpjrt::AliasFulfiller>>,
    spec: String,
    /// The done-callbacks waiting on the alias's ready events, which this fulfiller
    /// accounts for while the alias is pending (see [`AliasCallbacks`]).
    callbacks: Arc<AliasCallbacks>,
}

impl PyAliasFulfiller {
    fn take(&self) -> PyResult<rpjrt::AliasFulfiller> {
        let f = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| invalid(format!("this {} alias was already completed", self.spec)))?;
        // Completing the alias (or failing to, which drops the fulfiller: the alias is then
        // cancelled) completes its events, whose callbacks run as usual from now on.
        drop(self.callbacks.close());
        Ok(f)
    }
}

impl Drop for PyAliasFulfiller {
    fn drop(&mut self) {
        // The alias is cancelled as the fulfiller goes (unless completed): its callbacks run.
        drop(self.callbacks.close());
    }
}

/// The done-callbacks registered (`Event.add_done_callback`, `await`) on the ready events of
/// one pending alias buffer made here, shared by the alias Buffer, its events and its
/// fulfiller.
///
/// Those events complete only when the fulfiller completes the alias, or is dropped (which
/// cancels it). So a callback that refers to the fulfiller (`lambda ev, f=fulfiller: ...`)
/// forms a cycle that nothing but the fulfiller can account for: the fulfiller's
/// `__traverse__` visits the callbacks still waiting, and its `__clear__` drops them
/// (uncalled: the collector may already have cleared what they refer to) before it lets go
/// of the alias, which is then cancelled. Only the fulfiller visits them, and only while
/// the alias is pending; each callback waits in one [`CallbackSlot`], out of which only the
/// notifier thread (with the GIL) or the fulfiller's `__clear__` takes it.
pub struct AliasCallbacks {
    /// The slots; `None` once the alias completed (or its fulfiller went): callbacks added
    /// then are left to their events, which have completed.
    slots: Mutex<Option<Vec<Arc<crate::notify::CallbackSlot>>>>,
}

impl AliasCallbacks {
    fn new() -> Arc<AliasCallbacks> {
        Arc::new(AliasCallbacks {
            slots: Mutex::new(Some(Vec::new())),
        })
    }

    /// Accounts for `slot` (a done-callback of one of the alias's events) while the alias is
    /// pending; slots that have run are pruned.
    pub fn register(&self, slot: &Arc<crate::notify::CallbackSlot>) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(list) = slots.as_mut() {
            list.retain(|s| s.is_pending());
            list.push(Arc::clone(slot));
        }
    }

    /// Stops accounting (the alias completed, or its fulfiller went) and hands back the
    /// slots (the caller drops them, or the calls in them, after the lock is released).
    fn close(&self) -> Vec<Arc<crate::notify::CallbackSlot>> {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_default()
    }

    /// Visits the callbacks (and their events) still waiting. The locks are held only
    /// briefly, by threads that hold the GIL; a held one is not waited for.
    fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Ok(slots) = self.slots.try_lock() {
            for slot in slots.iter().flatten() {
                slot.traverse(visit)?;
            }
        }
        Ok(())
    }
}

#[pymethods]
impl PyAliasFulfiller {
    /// Give the alias ``buffer``'s contents (same client, dtype, shape and device).
    /// ``buffer`` is moved into the alias, as a donation is: it is deleted (later use of it
    /// raises ``BufferDeletedError``; read the alias instead). A buffer that does not match
    /// is refused and the alias stays pending.
    fn fulfill(&self, py: Python<'_>, buffer: &Bound<'_, PyBuffer>) -> PyResult<()> {
        buffer.get().check_not_deleted()?;
        let b = buffer.get();
        // A refused target leaves the alias pending (the fulfiller is kept for a retry);
        // the check calls nothing that can call back into rpjrt, so it runs under the lock.
        if let Some(f) = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            f.check(b.rb()).pyerr()?;
        }
        let f = self.take()?;
        py.detach_call(|| f.fulfill(b.rb())).pyerr()
    }

    /// Completes the alias with an error: using the alias raises `code` (a name such as
    /// "INTERNAL") with `message`.
    fn fail(&self, py: Python<'_>, code: &str, message: &str) -> PyResult<()> {
        let c = rpjrt::Code::from_name(code).pyerr()?;
        let f = self.take()?;
        py.detach_call(|| f.fail(c, message)).pyerr()
    }

    /// Whether the alias still waits to be completed.
    #[getter]
    fn pending(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    fn __repr__(&self) -> String {
        let state = if self.pending() { "pending" } else { "done" };
        format!("rpjrt.AliasFulfiller({}, {state})", self.spec)
    }

    /// Visits the done-callbacks still waiting on the pending alias's ready events (see
    /// [`AliasCallbacks`]): a callback that refers back to this fulfiller is then a cycle
    /// the collector can reclaim.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.callbacks.traverse(&visit)
    }

    /// Breaks such a cycle: drops the waiting callbacks uncalled, then lets go of the
    /// alias as dropping the fulfiller does (the alias is cancelled).
    fn __clear__(&self) {
        let calls: Vec<_> = self
            .callbacks
            .close()
            .iter()
            .filter_map(|slot| slot.take())
            .collect();
        drop(calls);
        let f = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        drop(f);
    }
}

/// A buffer of `dtype[shape]` completed later through the returned fulfiller
/// (`PJRT_Client_CreateAliasBuffer`).
pub fn create_alias_buffer(
    py: Python<'_>,
    client: &Bound<'_, PyClient>,
    dtype: &Bound<'_, PyAny>,
    shape: Vec<i64>,
    device: Option<&Bound<'_, PyAny>>,
    memory: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Py<PyBuffer>, PyAliasFulfiller)> {
    let t = dtype_from_py(dtype)?;
    let me = client.get();
    let (dev, mem) = me.resolve_target(py, device, memory)?;
    let (b, f) = py
        .detach_call(|| me.inner.create_alias_buffer(t, &shape, &dev, mem.as_ref()))
        .pyerr()?;
    let callbacks = AliasCallbacks::new();
    let buffer = PyBuffer::wrap_alias(py, b, &client.clone().unbind(), Arc::clone(&callbacks))?;
    Ok((
        buffer,
        PyAliasFulfiller {
            inner: Mutex::new(Some(f)),
            spec: crate::convert::spec_string(t, &shape),
            callbacks,
        },
    ))
}

/// The buffer's device layout through the plugin's Layouts extension:
/// `(minor_to_major, tiles, element_size_bits, memory_space)`.
#[pyfunction]
pub fn _device_layout(py: Python<'_>, buffer: &Bound<'_, PyBuffer>) -> PyResult<LayoutTuple> {
    let b = buffer.get();
    py.detach_call(|| b.rb().device_layout())
        .pyerr()
        .map(layout_tuple)
}

/// `(minor_to_major, tiles, element_size_bits, memory_space)`: a device layout for Python.
type LayoutTuple = (Vec<i64>, Vec<Vec<i64>>, i64, i64);

fn layout_tuple(l: rpjrt::DeviceLayout) -> LayoutTuple {
    (
        l.minor_to_major,
        l.tiles,
        l.element_size_bits,
        l.memory_space,
    )
}

/// The client's default device layout of `dtype[shape]`: `(minor_to_major, tiles,
/// element_size_bits, memory_space)`.
#[pyfunction]
pub fn _default_layout(
    py: Python<'_>,
    client: &Bound<'_, PyClient>,
    dtype: &Bound<'_, PyAny>,
    shape: Vec<i64>,
) -> PyResult<LayoutTuple> {
    let t = dtype_from_py(dtype)?;
    let me = client.get();
    py.detach_call(|| me.inner.default_layout(t, &shape))
        .pyerr()
        .map(layout_tuple)
}

/// Byte strides of the buffer's (untiled) device layout.
#[pyfunction]
pub fn _byte_strides(buffer: &Bound<'_, PyBuffer>) -> PyResult<Vec<i64>> {
    buffer.get().rb().byte_strides().pyerr()
}

/// Size in bytes of the plugin's Layouts extension struct.
#[pyfunction]
pub fn _layouts_extension_size(client: &Bound<'_, PyClient>) -> PyResult<usize> {
    client.get().inner.layouts_extension_size().pyerr()
}
