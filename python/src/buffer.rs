//! Buffer: device arrays, waiting (interruptible and async), host copies.

use crate::detach::Detach;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use pyo3::{PyTraverseError, PyVisit};
use rpjrt::ElementType;

use crate::client::{wrap_device, wrap_memory, PyClient, PyDevice, PyMemory};
use crate::convert::{dtype_obj, shape_tuple, spec_string, Conversion};
use crate::errors::{deleted, invalid, PyErrExt};
use crate::pybuf::{host_memoryview, HostView};

/// How often a blocking wait wakes up to check for Ctrl-C.
const SIGNAL_SLICE: Duration = Duration::from_millis(20);

/// An array in device memory. Operations on it do not block unless they say so.
///
/// `await buf` waits for its contents without blocking the event loop and returns the
/// buffer.
#[pyclass(frozen, weakref, name = "Buffer", module = "rpjrt")]
pub struct PyBuffer {
    inner: crate::notify::Clearable<rpjrt::Buffer>,
    pub client: Py<PyClient>,
    /// The buffer borrows host memory (zero-copy put, DLPack import): dropping it may wait
    /// for the plugin.
    borrows_host: bool,
    /// A zero-copy buffer made here: its share of the pin of the host memory it uses,
    /// through which `__traverse__` shows the cycle collector that memory's exporter.
    host: Option<crate::pybuf::HostLink>,
    /// An alias buffer made here: the done-callbacks registered on its ready events, which
    /// its fulfiller accounts for (`transfer::AliasCallbacks`).
    alias: Option<Arc<crate::transfer::AliasCallbacks>>,
    /// The device buffer's identity ([`buffer_key`]), for `==` and `hash`.
    key: usize,
}

/// The identity of the device buffer behind `b` among live handles: the address of the
/// metadata that every clone of one `rpjrt::Buffer` shares (the allocation its `dims()`
/// slice lives in; a rank above the inline limit keeps its dims in a box of its own,
/// equally unique). The core has no public identity accessor; this one holds while a
/// handle lives, which the Buffer holding it guarantees.
fn buffer_key(b: &rpjrt::Buffer) -> usize {
    b.dims().as_ptr() as usize
}

impl Drop for PyBuffer {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        self.release_handle(inner);
    }
}

impl PyBuffer {
    /// Lets go of the device buffer handle as dropping the Buffer does.
    fn release_handle(&self, inner: rpjrt::Buffer) {
        // A small buffer waits for the next call of its client's executables, which
        // destroys it with the GIL released (see `PyClient::defer_drop`).
        let inner = if !self.borrows_host && inner.host_size() <= crate::client::DEFERRED_DROP_BYTES
        {
            match self.client.get().defer_drop(inner) {
                Some(kept_back) => kept_back,
                None => return,
            }
        } else {
            inner
        };
        // Destroying a buffer may wait for the plugin (until it is done with borrowed host
        // memory, or until another thread's donation of it settles): never with the GIL
        // held, so that threads which need the GIL to finish cannot deadlock against us.
        crate::notify::drop_detached(inner);
    }
}

impl PyBuffer {
    pub fn new(inner: rpjrt::Buffer, client: Py<PyClient>, borrows_host: bool) -> PyBuffer {
        PyBuffer {
            key: buffer_key(&inner),
            inner: crate::notify::Clearable::new(inner),
            client,
            borrows_host,
            host: None,
            alias: None,
        }
    }

    /// A zero-copy buffer over host memory that `pin` keeps exported (a put or a DLPack
    /// import made here, once the put is over): its cycles through the memory's exporter
    /// are collectable (`__traverse__`).
    pub fn wrap_pinned(
        py: Python<'_>,
        inner: rpjrt::Buffer,
        client: &Py<PyClient>,
        pin: Arc<crate::pybuf::PinnedHost>,
    ) -> PyResult<Py<PyBuffer>> {
        let mut b = PyBuffer::new(inner, client.clone_ref(py), true);
        b.host = Some(crate::pybuf::HostLink::new(pin));
        Py::new(py, b)
    }

    /// A pending alias buffer whose ready events register their done-callbacks with
    /// `callbacks` (its fulfiller's).
    pub fn wrap_alias(
        py: Python<'_>,
        inner: rpjrt::Buffer,
        client: &Py<PyClient>,
        callbacks: Arc<crate::transfer::AliasCallbacks>,
    ) -> PyResult<Py<PyBuffer>> {
        let mut b = PyBuffer::new(inner, client.clone_ref(py), false);
        b.alias = Some(callbacks);
        Py::new(py, b)
    }

    pub fn wrap(
        py: Python<'_>,
        inner: rpjrt::Buffer,
        client: &Py<PyClient>,
    ) -> PyResult<Py<PyBuffer>> {
        Py::new(py, PyBuffer::new(inner, client.clone_ref(py), false))
    }

    /// A buffer that uses host memory in place (kept alive by its owner).
    pub fn wrap_borrowing(
        py: Python<'_>,
        inner: rpjrt::Buffer,
        client: &Py<PyClient>,
    ) -> PyResult<Py<PyBuffer>> {
        Py::new(py, PyBuffer::new(inner, client.clone_ref(py), true))
    }

    /// A Python Buffer sharing an rpjrt buffer that something else also holds (a session
    /// slot): deleting or donating it shows through both.
    pub fn wrap_shared(
        py: Python<'_>,
        inner: rpjrt::Buffer,
        client: &Py<PyClient>,
    ) -> PyResult<Py<PyBuffer>> {
        Py::new(py, PyBuffer::new(inner, client.clone_ref(py), false))
    }

    /// The device buffer handle, for other modules (which may keep a clone of it: an
    /// execution, a session slot, an export ...; a zero-copy buffer then stops showing its
    /// host memory's exporter to the cycle collector, see `pybuf::HostLink`).
    pub fn rb(&self) -> &rpjrt::Buffer {
        if let Some(h) = &self.host {
            h.mark_shared();
        }
        &self.inner
    }

    /// Waits until the buffer is ready, checking for Ctrl-C every few milliseconds.
    pub fn wait_ready(&self, py: Python<'_>) -> PyResult<()> {
        wait_buffer(py, &self.inner)
    }

    /// A dense host copy (one element per byte for sub-byte types).
    pub fn host_bytes(&self, py: Python<'_>) -> PyResult<Vec<u8>> {
        self.check_host_copy(py)?;
        let b: &rpjrt::Buffer = &self.inner;
        let what = format!("a host copy of {}{:?}", b.element_type(), b.dims());
        let mut v = rpjrt::host::try_zeroed(b.host_array_size(), &what).pyerr()?;
        copy_to_host_array(py, b, &mut v)?;
        Ok(v)
    }

    /// Refuses a token and waits until the contents are ready (what every host copy does
    /// first).
    fn check_host_copy(&self, py: Python<'_>) -> PyResult<()> {
        if self.inner.element_type() == ElementType::Token {
            self.check_not_deleted()?;
            return Err(invalid("a token has no data to copy to the host"));
        }
        self.wait_ready(py)
    }

    /// A fresh numpy array made in the extension (numpy's C API), or `None` where that API
    /// is unusable (then the caller takes the portable path).
    fn numpy_array<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.check_host_copy(py)?;
        let Some(api) = crate::npy::api(py)? else {
            return Ok(None);
        };
        let b: &rpjrt::Buffer = &self.inner;
        let descr = crate::npy::descr(py, b.element_type())?.bind(py);
        let Some((arr, data)) = api.empty(py, descr, b.dims())? else {
            return Ok(None);
        };
        let len = b.host_array_size();
        if len > 0 {
            // SAFETY: `data` addresses the new array's `len` bytes (its dtype has the host
            // item size, checked by `npy::descr`); nothing else can reach the array before
            // it is returned, and `arr` keeps it alive while the slice is used.
            let dst = unsafe { std::slice::from_raw_parts_mut(data, len) };
            copy_to_host_array(py, b, dst)?;
        }
        Ok(Some(arr))
    }

    /// Copies the buffer into `out`, a writable buffer-protocol object (or numpy array) of
    /// the buffer's shape and dtype with any strides: the core checks the destination
    /// (`rpjrt::Buffer::check_host_destination`) and copies (`copy_to_host_strided`).
    pub fn copy_into(&self, py: Python<'_>, out: &Bound<'_, PyAny>) -> PyResult<()> {
        // `out`'s own attributes and export are Python code rpjrt calls (see
        // `detach::calling_python`).
        crate::detach::calling_python(py, || self.copy_into_unguarded(py, out))
    }

    fn copy_into_unguarded(&self, py: Python<'_>, out: &Bound<'_, PyAny>) -> PyResult<()> {
        self.check_not_deleted()?;
        // A masked array's buffer is its .data: the copy would land under the old mask, so
        // the copied values would stay hidden (and masked ones read as before).
        if is_masked(out)? {
            return Err(invalid(format!(
                "out is a numpy masked array ({}): the copy would go into its .data under \
                 its old mask, so copied values would stay hidden; pass out.data (and clear \
                 the mask with out.mask = numpy.ma.nomask to show them) or a plain ndarray",
                out.get_type().name()?
            )));
        }
        let b: &rpjrt::Buffer = &self.inner;
        let t = b.element_type();
        // A numpy array states its dtype; those of ml_dtypes types export no buffer at
        // all, so when the dtype is the buffer's their bits are viewed as the carrier
        // integer type (the form `to_host()` exports). That view is in native order
        // whatever the dtype's, so the byte order is checked on the dtype first.
        let mut type_name = None;
        let viewed;
        let mut target = out;
        if HostView::get(out).is_none() && out.hasattr("dtype")? {
            let dtype = out.getattr("dtype")?;
            let name: String = dtype.getattr("name")?.extract()?;
            if name == t.name() {
                check_native_order(&dtype, &name)?;
                let carrier = rpjrt::host::carrier_type(t);
                if carrier != t {
                    viewed = out.call_method1("view", (carrier.name(),))?;
                    target = &viewed;
                }
            }
            type_name = Some(name);
        }
        // Refused before asking for the export (which may fail for other reasons).
        b.check_host_type(type_name.as_deref()).pyerr()?;
        let view = HostView::get_writable(target, "the destination")?;
        let dims = view.shape();
        let strides = view.strides();
        let dest = rpjrt::HostDestination {
            type_name: type_name.as_deref(),
            format: view.format(),
            itemsize: view.itemsize(),
            dims: &dims,
            byte_strides: &strides,
        };
        let (lo, end) = b.check_host_destination(&dest).pyerr()?;
        let region = view.region(lo, end)?;
        let offset = usize::try_from(-lo).unwrap_or(0);
        self.wait_ready(py)?;
        // SAFETY: the region lies inside `view`, a writable export held until this function
        // returns; no other Rust code uses it meanwhile.
        let dst = unsafe { region.as_mut_slice() };
        py.detach_call(|| b.copy_to_host_strided(dst, &strides, offset))
            .pyerr()
    }

    pub fn check_not_deleted(&self) -> PyResult<()> {
        if self.inner.is_deleted() {
            return Err(deleted(format!(
                "buffer {} was deleted or donated and cannot be used",
                spec_string(self.inner.element_type(), self.inner.dims())
            )));
        }
        Ok(())
    }
}

/// Refuses a destination dtype (`dtype`, named `name`) in non-native byte order with
/// multi-byte items, as the core refuses a foreign-order buffer format: a copy to the host
/// writes native order, and an ml_dtypes dtype (big-endian bfloat16) reaches the copy only
/// through a native-order view of its bits, which would hide the order and leave the bytes
/// swapped. One-byte items (float8, int4 ..., which numpy gives a byte order too) have no
/// order to get wrong. A dtype-like object without numpy's `isnative` is taken as native.
fn check_native_order(dtype: &Bound<'_, PyAny>, name: &str) -> PyResult<()> {
    let attr = |a: &str| dtype.getattr(a);
    let native = attr("isnative")
        .and_then(|v| v.extract::<bool>())
        .or_none()?
        .unwrap_or(true);
    let itemsize = attr("itemsize")
        .and_then(|v| v.extract::<usize>())
        .or_none()?
        .unwrap_or(0);
    if native || itemsize <= 1 {
        return Ok(());
    }
    let order = attr("byteorder")
        .and_then(|v| v.extract::<String>())
        .or_none()?
        .unwrap_or_default();
    let order = match order.as_str() {
        ">" => "big-endian",
        "<" => "little-endian",
        _ => "non-native",
    };
    let spelled = attr("str")
        .and_then(|v| v.extract::<String>())
        .or_none()?
        .map(|s| format!(", {s:?}"))
        .unwrap_or_default();
    Err(invalid(format!(
        "the destination is in foreign byte order (dtype {name}, {order}{spelled}); a copy \
         to the host writes native order: pass an array of dtype {name} in native order \
         (out.dtype.newbyteorder(\"=\")) and convert it afterwards"
    )))
}

/// Whether `obj` is a numpy masked array (`numpy.ma.MaskedArray` or a subclass), whose
/// buffer is its data without the mask. Only a subclass of `numpy.ndarray` can be one, so
/// anything else (an exact ndarray, a memoryview, bytearray, any object before numpy is
/// imported) costs a type comparison; nothing is imported here.
pub(crate) fn is_masked(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = obj.py();
    let Some(ndarray) = crate::npy::ndarray_type(py) else {
        return Ok(false);
    };
    let ty = obj.get_type();
    if ty.is(ndarray) || !ty.is_subclass(ndarray)? {
        return Ok(false);
    }
    let modules = py.import("sys")?.getattr("modules")?;
    let Some(ma) = modules
        .cast::<pyo3::types::PyDict>()
        .ok()
        .and_then(|m| m.get_item("numpy.ma").ok().flatten())
    else {
        return Ok(false);
    };
    match ma.getattr("MaskedArray") {
        Ok(cls) => obj.is_instance(&cls),
        // numpy.ma replaced by something else (or still importing): no MaskedArray yet.
        Err(_) => Ok(false),
    }
}

/// Copies `b` into `dst` (its host-array form), keeping the GIL for a quick copy of ready,
/// host-readable data (releasing and retaking it would cost more than the copy) and
/// releasing it otherwise.
fn copy_to_host_array(py: Python<'_>, b: &rpjrt::Buffer, dst: &mut [u8]) -> PyResult<()> {
    if b.host_copy_is_quick() {
        b.to_host_array(dst).pyerr()
    } else {
        py.detach_call(|| b.to_host_array(dst)).pyerr()
    }
}

/// The Python list of an execution's outputs, built in place (no intermediate list).
pub fn wrap_list<'py>(
    py: Python<'py>,
    outs: Vec<rpjrt::Buffer>,
    client: &Py<PyClient>,
) -> PyResult<Bound<'py, PyList>> {
    let n = outs.len();
    let len = ffi::Py_ssize_t::try_from(n).map_err(|_| invalid("too many outputs"))?;
    // SAFETY: `PyList_New` returns a new reference (or null with an exception set, which
    // `from_owned_ptr_or_err` turns into the error); the object is a list.
    let list = unsafe {
        Bound::from_owned_ptr_or_err(py, ffi::PyList_New(len))?.cast_into_unchecked::<PyList>()
    };
    for (i, b) in (0..len).zip(outs) {
        let item = PyBuffer::wrap(py, b, client)?;
        // SAFETY: `list` is a list of length `len` and `i < len`; `PyList_SetItem` steals
        // the new reference `into_ptr` hands over (also when it fails). A list left with
        // empty slots by an error above is released safely (empty slots are skipped).
        if unsafe { ffi::PyList_SetItem(list.as_ptr(), i, item.into_ptr()) } != 0 {
            return Err(PyErr::fetch(py));
        }
    }
    Ok(list)
}

/// A waker that flips a flag and signals a condition variable.
struct CondWaker {
    woke: Mutex<bool>,
    cv: Condvar,
}

impl Wake for CondWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        *self.woke.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.cv.notify_all();
    }
}

/// Blocks until `b` is ready without holding the GIL, waking every few ms for signals.
pub fn wait_buffer(py: Python<'_>, b: &rpjrt::Buffer) -> PyResult<()> {
    // A short computation is over sooner than a sleeping thread can be woken: poll first,
    // without the GIL (one ready event; a success is remembered, so the wait after it
    // makes no plugin call, and a failure is reported by it).
    if b.is_known_ready() || py.detach_call(|| b.poll_ready()).pyerr()? {
        return b.block_until_ready().pyerr();
    }
    // Held through the whole wait below (a handler waiting back for this one is refused).
    let _waiting = py.detach_call(|| b.begin_wait()).pyerr()?;
    let mut event = Box::pin(b.ready_event().pyerr()?);
    let cw = Arc::new(CondWaker {
        woke: Mutex::new(false),
        cv: Condvar::new(),
    });
    let waker = Waker::from(Arc::clone(&cw));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(r) = event.as_mut().poll(&mut cx) {
            return r.pyerr();
        }
        let c = Arc::clone(&cw);
        py.detach_call(move || {
            let g = c.woke.lock().unwrap_or_else(|p| p.into_inner());
            let (mut g, _) =
                c.cv.wait_timeout_while(g, SIGNAL_SLICE, |w| !*w)
                    .unwrap_or_else(|p| p.into_inner());
            *g = false;
        });
        py.check_signals()?;
    }
}

/// Calls a Python callable once, after whichever thread wakes it (a plugin thread).
struct PyWake {
    callback: Mutex<Option<Py<PyAny>>>,
}

impl PyWake {
    /// Runs on a plugin thread: hands the callable to the notifier thread, never waiting
    /// for the GIL here (see `notify`).
    fn fire(&self) {
        let cb = self
            .callback
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(cb) = cb {
            crate::notify::post(crate::notify::Lane::Wake, cb);
        }
    }
}

impl Wake for PyWake {
    fn wake(self: Arc<Self>) {
        self.fire();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.fire();
    }
}

/// Keeps a ready-event alive while `await buf` waits on it.
#[pyclass(frozen, name = "_Waiter", module = "rpjrt._rpjrt")]
pub struct PyWaiter {
    _event: Mutex<Option<Pin<Box<rpjrt::Event>>>>,
}

#[pymethods]
impl PyBuffer {
    /// The array's dimensions.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        shape_tuple(py, self.inner.dims())
    }

    /// The array's element type.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dtype_obj(py, self.inner.element_type())
    }

    /// The number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.inner.dims().len()
    }

    /// Number of elements.
    #[getter]
    fn size(&self) -> usize {
        self.inner.element_count()
    }

    /// Bytes of the host representation: size * dtype.itemsize.
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.host_array_size()
    }

    /// Bytes the buffer occupies on the device.
    #[getter]
    fn on_device_size(&self) -> PyResult<usize> {
        self.inner.on_device_size().pyerr()
    }

    /// The device that holds the buffer.
    #[getter]
    fn device(&self, py: Python<'_>) -> PyResult<Py<PyDevice>> {
        wrap_device(py, &self.client, self.inner.device().pyerr()?)
    }

    /// The memory that holds the buffer.
    #[getter]
    fn memory(&self, py: Python<'_>) -> PyResult<Py<PyMemory>> {
        wrap_memory(py, &self.client, self.inner.memory().pyerr()?)
    }

    /// The client the buffer belongs to.
    #[getter]
    fn client(&self, py: Python<'_>) -> Py<PyClient> {
        self.client.clone_ref(py)
    }

    /// Whether the contents are computed (does not wait).
    fn is_ready(&self) -> PyResult<bool> {
        self.inner.is_ready().pyerr()
    }

    /// Wait until the data is computed; raises the computation's error. Ctrl-C works.
    ///
    /// Polls for up to :func:`wait_spin` seconds (100 µs by default) before sleeping:
    /// waking a sleeping thread costs more than a short computation.
    fn block_until_ready(slf: &Bound<'_, Self>) -> PyResult<Py<Self>> {
        slf.get().wait_ready(slf.py())?;
        Ok(slf.clone().unbind())
    }

    /// Registers `callback()` to run (on a plugin thread, or right away) once the buffer is
    /// ready. Returns a handle that must be kept until then.
    fn _on_ready(&self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<PyWaiter> {
        let notifying = crate::notify::warm_up(py, crate::notify::Lane::Wake);
        let mut event = Box::pin(self.inner.ready_event().pyerr()?);
        if !notifying {
            // The interpreter is exiting (an exit hook that runs after rpjrt's): no thread
            // will wake the awaiting task, so wait here and wake it now.
            let inner = &self.inner;
            py.detach_call(|| {
                let _ = inner.block_until_ready();
            });
            crate::detach::calling_python(py, || callback.call0(py))?;
            return Ok(PyWaiter {
                _event: Mutex::new(Some(event)),
            });
        }
        let w = Arc::new(PyWake {
            callback: Mutex::new(Some(callback)),
        });
        let waker = Waker::from(Arc::clone(&w));
        let mut cx = Context::from_waker(&waker);
        if event.as_mut().poll(&mut cx).is_ready() {
            let cb = w.callback.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(cb) = cb {
                // Wakes an event loop (a write to its socket): `detach::calling_python`.
                crate::detach::calling_python(py, || cb.call0(py))?;
            }
        }
        Ok(PyWaiter {
            _event: Mutex::new(Some(event)),
        })
    }

    /// An `rpjrt.Event` that completes when the buffer's contents are ready.
    fn ready_event(&self) -> PyResult<crate::event::PyEvent> {
        let what = format!(
            "buffer {} ready",
            spec_string(self.inner.element_type(), self.inner.dims())
        );
        let ev = self.inner.ready_event().pyerr()?;
        Ok(crate::event::PyEvent::new(ev, what).with_alias(self.alias.clone()))
    }

    /// `await buf` waits without blocking the event loop and returns the buffer.
    fn __await__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let coro = py.import("rpjrt._aio")?.getattr("wait")?.call1((slf,))?;
        coro.call_method0("__await__")
    }

    /// A fresh host copy as a memoryview with this shape and a struct format, or, with
    /// ``out``, the data copied into ``out`` (see copy_to_host), which is returned.
    ///
    /// Types without a buffer-protocol format (bfloat16, float8..., int4...) come as
    /// unsigned integers of the same item size holding the raw bits.
    #[pyo3(signature = (out = None))]
    fn to_host<'py>(
        &self,
        py: Python<'py>,
        out: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(out) = out.filter(|o| !o.is_none()) {
            self.copy_into(py, &out)?;
            return Ok(out);
        }
        let bytes = self.host_bytes(py)?;
        host_memoryview(py, self.inner.element_type(), self.inner.dims(), bytes)
    }

    /// Copy into ``out``: any writable buffer-protocol object or numpy array of this
    /// shape and dtype, with any strides (negative, non-contiguous, Fortran order). Types
    /// without a buffer format take a numpy array of their ml_dtypes type, or integers of
    /// the same size (the raw bits). Sub-byte types land one element per byte. Wrong shape,
    /// dtype, byte order or a read-only ``out`` raise InvalidArgumentError naming it.
    fn copy_to_host(&self, py: Python<'_>, out: &Bound<'_, PyAny>) -> PyResult<()> {
        self.copy_into(py, out)
    }

    /// The contents as bytes in row-major order (waits for them).
    fn tobytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.host_bytes(py)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The contents as nested Python lists (waits for them).
    fn tolist<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let mv = slf.get().to_host(py, None)?;
        // numpy's code, which may release the GIL (see `detach::calling_python`).
        crate::detach::calling_python(py, || {
            py.import("rpjrt._host")?
                .getattr("tolist")?
                .call1((mv, slf.get().dtype(py)?))
        })
    }

    /// A fresh numpy array holding the buffer's contents, or, with `out`, the contents
    /// copied into `out` (returned): a preallocated writable array of the buffer's shape and
    /// dtype, any strides. `out` skips the allocation and the page faults of fresh memory,
    /// so a loop that reuses its destination copies at `memcpy` speed.
    #[pyo3(signature = (out = None))]
    fn to_numpy<'py>(
        slf: &Bound<'py, Self>,
        out: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        if let Some(out) = out.filter(|o| !o.is_none()) {
            slf.get().copy_into(py, &out)?;
            return Ok(out);
        }
        if let Some(arr) = slf.get().numpy_array(py)? {
            return Ok(arr);
        }
        let mv = slf.get().to_host(py, None)?;
        // numpy's code, which may release the GIL (see `detach::calling_python`).
        crate::detach::calling_python(py, || {
            py.import("rpjrt._host")?
                .getattr("to_numpy")?
                .call1((mv, slf.get().dtype(py)?))
        })
    }

    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        slf: &Bound<'py, Self>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if copy == Some(false) {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "an rpjrt.Buffer converts to numpy only by copying; use numpy.from_dlpack(buf) for a view",
            ));
        }
        let arr = Self::to_numpy(slf, None)?;
        match dtype {
            Some(d) if !d.is_none() => {
                // The array is already a fresh copy: convert without a second one.
                let kw = pyo3::types::PyDict::new(slf.py());
                kw.set_item("copy", false)?;
                // numpy's (and `d`'s own) code: see `detach::calling_python`.
                crate::detach::calling_python(slf.py(), || {
                    arr.call_method("astype", (d,), Some(&kw))
                })
            }
            _ => Ok(arr),
        }
    }

    /// JAX's conversion protocol: ``jnp.asarray(buf)`` and ``jnp.array(buf)`` take a host
    /// copy, as ``numpy.asarray(buf)`` does (``jax.dlpack.from_dlpack(buf)`` shares the
    /// memory instead). JAX reads ``.dtype`` of other array-likes as a numpy dtype, which
    /// ``Buffer.dtype`` (an ``rpjrt.DType``) is not.
    fn __jax_array__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let arr = Self::to_numpy(slf, None)?;
        // jax's code: see `detach::calling_python`.
        crate::detach::calling_python(slf.py(), || {
            slf.py()
                .import("jax.numpy")?
                .call_method1("asarray", (arr,))
        })
    }

    /// ``float(buf)`` of a one-element buffer, as numpy converts a 0-d array.
    fn __float__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::to_numpy(slf, None)?.call_method0("__float__")
    }

    /// ``int(buf)`` of a one-element buffer, as numpy converts a 0-d array.
    fn __int__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::to_numpy(slf, None)?.call_method0("__int__")
    }

    /// ``operator.index(buf)`` of a one-element integer buffer, as numpy allows for a 0-d
    /// integer array (a TypeError for other types).
    fn __index__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::to_numpy(slf, None)?.call_method0("__index__")
    }

    /// ``complex(buf)`` of a one-element buffer, as numpy converts a 0-d array.
    fn __complex__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::to_numpy(slf, None)?.call_method0("__complex__")
    }

    /// A copy of the buffer on another Device or in another Memory.
    fn copy_to(&self, py: Python<'_>, destination: &Bound<'_, PyAny>) -> PyResult<Py<PyBuffer>> {
        let b: &rpjrt::Buffer = &self.inner;
        let out = if let Ok(d) = destination.cast::<PyDevice>() {
            let dev = d.get().inner.clone();
            py.detach_call(|| b.copy_to_device(&dev)).pyerr()?
        } else if let Ok(m) = destination.cast::<PyMemory>() {
            let mem = m.get().inner.clone();
            py.detach_call(|| b.copy_to_memory(&mem)).pyerr()?
        } else {
            return Err(invalid(format!(
                "copy_to takes an rpjrt.Device or rpjrt.Memory, not {}",
                destination.get_type().name()?
            )));
        };
        PyBuffer::wrap(py, out, &self.client)
    }

    /// An independent copy in the same memory (`Buffer::duplicate`): deleting or donating
    /// one leaves the other.
    fn copy(&self, py: Python<'_>) -> PyResult<Py<PyBuffer>> {
        let b: &rpjrt::Buffer = &self.inner;
        let out = py.detach_call(|| b.duplicate()).pyerr()?;
        PyBuffer::wrap(py, out, &self.client)
    }

    fn __copy__(&self, py: Python<'_>) -> PyResult<Py<PyBuffer>> {
        self.copy(py)
    }

    fn __deepcopy__(&self, py: Python<'_>, _memo: &Bound<'_, PyAny>) -> PyResult<Py<PyBuffer>> {
        self.copy(py)
    }

    /// Free the device memory now (a no-op when already deleted). Later use raises BufferDeletedError.
    fn delete(&self, py: Python<'_>) -> PyResult<()> {
        let b: &rpjrt::Buffer = &self.inner;
        py.detach_call(|| b.delete()).pyerr()
    }

    /// Whether the buffer has been deleted or donated.
    fn is_deleted(&self) -> bool {
        self.inner.is_deleted()
    }

    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        slf: &Bound<'py, Self>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<&Bound<'py, PyAny>>,
        dl_device: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // Extracted here: a pair's items may be objects with their own `__index__`.
        let dl_device: Option<(i32, i32)> = match dl_device.filter(|d| !d.is_none()) {
            None => None,
            Some(d) => Some(crate::detach::extract_arg(d, "dl_device")?),
        };
        // Checked here, so that an out-of-range number is named (not PyO3's OverflowError).
        let max_version = match max_version.filter(|v| !v.is_none()) {
            None => None,
            Some(v) => {
                // Its own `__repr__` and items' `__index__`: see `detach::calling_python`.
                let shown = crate::detach::calling_python(slf.py(), || v.repr())
                    .map(|r| r.to_string().chars().take(80).collect::<String>())
                    .or_describe(|| "that".into())?;
                Some(
                    crate::detach::calling_python(slf.py(), || v.extract::<(u32, u32)>())
                        .or_refuse(|| {
                            invalid(format!(
                                "max_version must be a (major, minor) pair of integers from 0 to \
                         4294967295, not {shown}"
                            ))
                        })?,
                )
            }
        };
        crate::dlpack::export(slf, stream, max_version, dl_device, copy)
    }

    fn __dlpack_device__(&self) -> PyResult<(i32, i32)> {
        crate::dlpack::device_of(self)
    }

    fn __repr__(&self) -> String {
        if self.inner.is_cleared() {
            return "rpjrt.Buffer(reclaimed by the garbage collector)".into();
        }
        let spec = spec_string(self.inner.element_type(), self.inner.dims());
        if self.inner.is_deleted() {
            return format!("rpjrt.Buffer({spec}, deleted)");
        }
        match self.inner.device() {
            Ok(d) => format!(
                "rpjrt.Buffer({spec}, device={}:{})",
                self.client.get().platform_name(),
                d.id()
            ),
            Err(_) => format!(
                "rpjrt.Buffer({spec}, {})",
                crate::client::gone(&self.client.get().inner)
            ),
        }
    }

    fn __len__(&self) -> PyResult<usize> {
        match self.inner.dims().first() {
            Some(&d) => Ok(d as usize),
            None => Err(pyo3::exceptions::PyTypeError::new_err(
                "len() of a 0-d buffer",
            )),
        }
    }

    /// The truth of the value of a one-element buffer (read from the device, waiting for
    /// it), as numpy and JAX define it. Any other size raises ValueError, an empty buffer
    /// too (as numpy 2 does): `if buf:` is never a test of the buffer's existence.
    fn __bool__(slf: &Bound<'_, Self>) -> PyResult<bool> {
        let n = slf.get().inner.element_count();
        if n != 1 {
            let hint = if n == 0 {
                "it is empty; use `buffer.size > 0` to check that a buffer is not empty"
            } else {
                "reduce it to one element first, or test `buffer.to_numpy().any()` or \
                 `.all()`"
            };
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "The truth value of a buffer with {n} elements is ambiguous: {hint}"
            )));
        }
        // Nested one-element lists down to the value (any rank).
        let mut v = Self::tolist(slf)?;
        while let Ok(list) = v.cast::<PyList>() {
            let item = list.get_item(0)?;
            v = item;
        }
        v.is_truthy()
    }

    /// Buffers are equal when they are handles of one device buffer (deleting one deletes
    /// the other): `CallOutputs[i]`, `PreparedCall.argument()` and `Session.buffer()` make
    /// a new handle on every call. Never elementwise; anything but a Buffer is left to its
    /// own comparison (numpy arrays compare elementwise, through `__array__`).
    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> Py<PyAny> {
        match other.cast::<PyBuffer>() {
            Ok(o) => pyo3::types::PyBool::new(py, o.get().key == self.key)
                .to_owned()
                .into_any()
                .unbind(),
            Err(_) => py.NotImplemented(),
        }
    }

    /// `not ==` for two Buffers; anything else is left to its own comparison (as for
    /// `==`: PyO3's default `!=` would take the truth of numpy's elementwise answer).
    fn __ne__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> Py<PyAny> {
        match other.cast::<PyBuffer>() {
            Ok(o) => pyo3::types::PyBool::new(py, o.get().key != self.key)
                .to_owned()
                .into_any()
                .unbind(),
            Err(_) => py.NotImplemented(),
        }
    }

    /// The device buffer's identity (handles of one device buffer hash alike).
    fn __hash__(&self) -> u64 {
        // As CPython hashes pointers: the low bits of an aligned address carry nothing.
        (self.key as u64).rotate_right(4)
    }

    /// Visits the client, and for a zero-copy buffer made here whose device buffer no
    /// other handle shares, the pin of its host memory (and so the memory's exporter,
    /// which may hold this Buffer: `x.dev = client.put(x, copy=False)`). See
    /// `pybuf::HostLink` for when the pin is not visited.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.client)?;
        // Once the process is ending, a Buffer dropped keeps its pin for good (it is
        // leaked, `_leak_at_exit`): the pinned object must not look like garbage to the
        // last collections, which would clear it while its export is held.
        if !self.inner.is_cleared() && !crate::detach::exiting() {
            if let Some(h) = &self.host {
                h.traverse(&visit)?;
            }
        }
        Ok(())
    }

    /// Breaks a cycle as deleting the Buffer would: lets go of the device buffer handle
    /// (a zero-copy buffer waits, without the GIL, until the plugin is done with the host
    /// memory), then of the pin of that memory. Using the Buffer afterwards raises
    /// `PanicException`; only an object the collector has reclaimed can be.
    fn __clear__(&self) {
        // SAFETY: PyO3 calls `__clear__` only as the type's `tp_clear` (the class cannot be
        // subclassed), which the cycle collector calls only for an object no running code
        // refers to; every `&rpjrt::Buffer` borrowed from it lives within such a call.
        if let Some(inner) = unsafe { self.inner.clear() } {
            self.release_handle(inner);
        }
        if let Some(h) = &self.host {
            drop(h.release());
        }
    }
}
