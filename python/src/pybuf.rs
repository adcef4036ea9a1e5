//! The buffer protocol, both ways, under the abi3-py310 stable ABI.
//!
//! PyO3 exposes `Py_buffer` only for abi3 >= 3.11, but `PyObject_GetBuffer`,
//! `PyBuffer_Release` and the `Py_buffer` layout exist unchanged in every CPython 3.x (3.11
//! merely added them to the limited API), so they are declared here. Exporting uses a small
//! heap type made with `PyType_FromSpec` and the `Py_bf_getbuffer` slot, which CPython
//! accepts in type specs since 3.9.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::mem::ManuallyDrop;
use std::ptr;

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use pyo3::{PyTraverseError, PyVisit};
use rpjrt::ElementType;

/// CPython's `Py_buffer` (identical in 3.3 through 3.14).
#[repr(C)]
pub struct RawBuffer {
    buf: *mut c_void,
    obj: *mut ffi::PyObject,
    len: ffi::Py_ssize_t,
    itemsize: ffi::Py_ssize_t,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut ffi::Py_ssize_t,
    strides: *mut ffi::Py_ssize_t,
    suboffsets: *mut ffi::Py_ssize_t,
    internal: *mut c_void,
}

extern "C" {
    fn PyObject_GetBuffer(obj: *mut ffi::PyObject, view: *mut RawBuffer, flags: c_int) -> c_int;
    fn PyBuffer_Release(view: *mut RawBuffer);
}

const PYBUF_WRITABLE: c_int = 0x0001;
const PYBUF_FORMAT: c_int = 0x0004;
const PYBUF_ND: c_int = 0x0008;
const PYBUF_STRIDES: c_int = 0x0010 | PYBUF_ND;
const PYBUF_RECORDS_RO: c_int = PYBUF_STRIDES | PYBUF_FORMAT;
const PYBUF_RECORDS: c_int = PYBUF_RECORDS_RO | PYBUF_WRITABLE;

/// A buffer-protocol view of a Python object, released on drop (under the GIL: the type is
/// neither `Send` nor `Sync`, so it never leaves the attached thread).
///
/// The Py_buffer is boxed: exporters may point `strides`/`shape` into the struct itself
/// (array.array points `strides` at `itemsize`), so it must never move.
pub struct HostView {
    raw: Box<RawBuffer>,
}

impl HostView {
    /// `PyObject_GetBuffer(obj, PyBUF_RECORDS_RO)`; `None` when `obj` does not export a
    /// strided buffer (no buffer protocol, suboffsets, or an exporter error).
    pub fn get(obj: &Bound<'_, PyAny>) -> Option<HostView> {
        match Self::get_with(obj, PYBUF_RECORDS_RO) {
            Ok(v) => Some(v),
            Err(e) => {
                // Not an exporter, or one that refuses this request: the caller falls back.
                drop(e);
                None
            }
        }
    }

    /// A writable strided view (`PyBUF_RECORDS`), or an error saying whether `obj` is
    /// read-only or exports no strided buffer at all.
    pub fn get_writable(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<HostView> {
        match Self::get_with(obj, PYBUF_RECORDS) {
            Ok(v) => Ok(v),
            Err(e) => {
                let ty = obj
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_else(|_| "?".into());
                if Self::get(obj).is_some() {
                    Err(crate::errors::invalid(format!(
                        "{what} (a {ty}) is read-only"
                    )))
                } else {
                    Err(crate::errors::invalid(format!(
                        "{what} (a {ty}) does not export a writable strided buffer: {e}"
                    )))
                }
            }
        }
    }

    fn get_with(obj: &Bound<'_, PyAny>, flags: c_int) -> PyResult<HostView> {
        let mut raw = Box::new(RawBuffer {
            buf: ptr::null_mut(),
            obj: ptr::null_mut(),
            len: 0,
            itemsize: 0,
            readonly: 0,
            ndim: 0,
            format: ptr::null_mut(),
            shape: ptr::null_mut(),
            strides: ptr::null_mut(),
            suboffsets: ptr::null_mut(),
            internal: ptr::null_mut(),
        });
        // SAFETY: `obj` is a live object and we hold the GIL (a Bound proves it); `raw` is a
        // writable Py_buffer at a stable address that CPython fills in.
        // A class's own `__buffer__` (3.12+) is Python code rpjrt calls (see
        // `detach::calling_python`).
        let rc = crate::detach::calling_python(obj.py(), || unsafe {
            PyObject_GetBuffer(obj.as_ptr(), &mut *raw, flags)
        });
        if rc != 0 {
            return Err(PyErr::take(obj.py())
                .unwrap_or_else(|| PyBufferError::new_err("the object exports no buffer")));
        }
        Ok(HostView { raw })
    }

    /// Address of the first element.
    pub fn ptr(&self) -> *const u8 {
        self.raw.buf as *const u8
    }

    /// The struct-module format string ("B" when the exporter gives none).
    pub fn format(&self) -> &str {
        if self.raw.format.is_null() {
            return "B";
        }
        // SAFETY: a non-null format is a NUL-terminated string owned by the exporter, valid
        // while the view is held.
        unsafe { CStr::from_ptr(self.raw.format) }
            .to_str()
            .unwrap_or("?invalid")
    }

    pub fn itemsize(&self) -> usize {
        self.raw.itemsize.max(0) as usize
    }

    /// Dimensions (empty for a 0-d view).
    pub fn shape(&self) -> Vec<i64> {
        let n = self.raw.ndim.max(0) as usize;
        if self.raw.shape.is_null() {
            return if n == 0 {
                Vec::new()
            } else {
                vec![self.raw.len as i64 / self.raw.itemsize.max(1) as i64]
            };
        }
        // SAFETY: with PyBUF_ND the exporter provides `ndim` shape entries.
        unsafe { std::slice::from_raw_parts(self.raw.shape, n) }
            .iter()
            .map(|&d| d as i64)
            .collect()
    }

    /// Byte strides (C-contiguous ones when the exporter gives none).
    pub fn strides(&self) -> Vec<i64> {
        let n = self.raw.ndim.max(0) as usize;
        if self.raw.strides.is_null() || self.raw.shape.is_null() {
            return c_strides(&self.shape(), self.itemsize() as i64);
        }
        // SAFETY: with PyBUF_STRIDES the exporter provides `ndim` stride entries.
        unsafe { std::slice::from_raw_parts(self.raw.strides, n) }
            .iter()
            .map(|&d| d as i64)
            .collect()
    }
}

impl HostView {
    /// Whether the view is C-contiguous (row-major, dense).
    pub fn is_c_contiguous(&self) -> bool {
        let dims = self.shape();
        let strides = self.strides();
        let c = c_strides(&dims, self.itemsize() as i64);
        dims.contains(&0)
            || dims
                .iter()
                .zip(strides.iter().zip(&c))
                .all(|(&d, (&s, &cs))| d == 1 || s == cs)
    }

    /// Whether the exporter gave a read-only view.
    pub fn readonly(&self) -> bool {
        self.raw.readonly != 0
    }

    /// The view's length in bytes (`Py_buffer.len`).
    pub fn byte_len(&self) -> usize {
        self.raw.len.max(0) as usize
    }

    /// The view's bytes when it is C-contiguous (`None` otherwise), borrowed while the
    /// view is held.
    pub fn contiguous_bytes(&self) -> Option<&[u8]> {
        match (self.is_c_contiguous(), self.byte_len()) {
            (false, _) => None,
            (true, 0) => Some(&[]),
            // SAFETY: a C-contiguous view addresses `len` bytes from its first element, and
            // the borrow of `self` keeps the export held while the slice lives.
            (true, len) => Some(unsafe { std::slice::from_raw_parts(self.ptr(), len) }),
        }
    }

    /// The bytes `lo..end` relative to the view's first element (from `rpjrt::extent` over
    /// the view's own shape and strides, or a reshaping of a contiguous view that stays
    /// within `len`).
    pub fn region(&self, lo: i128, end: i128) -> PyResult<Region> {
        if end <= lo {
            return Ok(Region {
                addr: self.ptr() as usize,
                len: 0,
            });
        }
        let base = self.ptr() as usize as i128;
        let len = usize::try_from(end - lo)
            .map_err(|_| PyBufferError::new_err("the buffer's extent overflows"))?;
        Ok(Region {
            addr: (base + lo) as usize,
            len,
        })
    }
}

impl Drop for HostView {
    fn drop(&mut self) {
        // SAFETY: the view was filled by a successful PyObject_GetBuffer and is released once;
        // HostView is !Send, so this runs on the thread that holds the GIL.
        unsafe { PyBuffer_Release(&mut *self.raw) }
    }
}

/// Row-major byte strides.
pub fn c_strides(dims: &[i64], itemsize: i64) -> Vec<i64> {
    rpjrt::host::c_strides(dims, itemsize.max(0) as usize)
}

/// A byte range inside a held [`HostView`].
#[derive(Clone, Copy)]
pub struct Region {
    addr: usize,
    len: usize,
}

impl Region {
    /// The bytes, writable.
    ///
    /// # Safety
    /// The region must come from a view taken with [`HostView::get_writable`], that view
    /// must be held while the slice is used, and nothing else may use the slice meanwhile.
    pub unsafe fn as_mut_slice<'a>(&self) -> &'a mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: `HostView::region` checked that the range lies inside the view's memory;
        // the caller holds a writable export of it.
        unsafe { std::slice::from_raw_parts_mut(self.addr as *mut u8, self.len) }
    }

    /// The bytes.
    ///
    /// # Safety
    /// The view the region came from must still be held while the slice is used.
    pub unsafe fn as_slice<'a>(&self) -> &'a [u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `HostView::region` checked that the range lies inside the view's memory
        // (by its shape and strides); the caller keeps the view held.
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }
}

/// The format a host copy of `t` is exported with: the format of its carrier type
/// (`rpjrt::host::carrier_type`: itself, or an integer of its size holding the raw bits),
/// NUL-terminated for the buffer protocol.
pub fn export_format(t: ElementType) -> &'static CStr {
    use ElementType as E;
    match rpjrt::host::carrier_type(t) {
        E::Pred => c"?",
        E::S8 => c"b",
        E::S16 => c"h",
        E::U16 => c"H",
        E::S32 => c"i",
        E::U32 => c"I",
        E::S64 => c"q",
        E::U64 => c"Q",
        E::F16 => c"e",
        E::F32 => c"f",
        E::F64 => c"d",
        E::C64 => c"Zf",
        E::C128 => c"Zd",
        // uint8, and (never: every carrier has a format) anything else.
        _ => c"B",
    }
}

// ---------------------------------------------------------------------------------------
// Exporting: HostArray, a minimal object that owns bytes and exports them.

/// What a HostArray exports.
pub struct HostData {
    pub bytes: Vec<u8>,
    pub shape: Vec<ffi::Py_ssize_t>,
    pub strides: Vec<ffi::Py_ssize_t>,
    pub format: &'static CStr,
    pub itemsize: usize,
    pub readonly: bool,
}

#[repr(C)]
struct HostArrayObject {
    ob_base: ffi::PyObject,
    data: *mut HostData,
}

unsafe extern "C" fn host_array_getbuffer(
    obj: *mut ffi::PyObject,
    view: *mut RawBuffer,
    flags: c_int,
) -> c_int {
    // SAFETY: CPython calls this slot with a live HostArray and a writable Py_buffer, holding
    // the GIL; `data` was set at creation and lives until dealloc.
    unsafe {
        let data = (*(obj as *mut HostArrayObject)).data;
        if data.is_null() || view.is_null() {
            ffi::PyErr_SetString(
                ffi::PyExc_BufferError,
                c"rpjrt HostArray has no data".as_ptr(),
            );
            return -1;
        }
        let d = &*data;
        if flags & PYBUF_WRITABLE != 0 && d.readonly {
            (*view).obj = ptr::null_mut();
            ffi::PyErr_SetString(
                ffi::PyExc_BufferError,
                c"this rpjrt host array is read-only".as_ptr(),
            );
            return -1;
        }
        let v = &mut *view;
        v.buf = d.bytes.as_ptr() as *mut c_void;
        ffi::Py_IncRef(obj);
        v.obj = obj;
        v.len = d.bytes.len() as ffi::Py_ssize_t;
        v.itemsize = d.itemsize as ffi::Py_ssize_t;
        v.readonly = c_int::from(d.readonly);
        v.format = if flags & PYBUF_FORMAT != 0 {
            d.format.as_ptr() as *mut c_char
        } else {
            ptr::null_mut()
        };
        if flags & PYBUF_ND != 0 {
            v.ndim = d.shape.len() as c_int;
            v.shape = d.shape.as_ptr() as *mut ffi::Py_ssize_t;
            v.strides = if flags & PYBUF_STRIDES == PYBUF_STRIDES {
                d.strides.as_ptr() as *mut ffi::Py_ssize_t
            } else {
                ptr::null_mut()
            };
        } else {
            v.ndim = 1;
            v.shape = ptr::null_mut();
            v.strides = ptr::null_mut();
        }
        v.suboffsets = ptr::null_mut();
        v.internal = ptr::null_mut();
        0
    }
}

unsafe extern "C" fn host_array_dealloc(obj: *mut ffi::PyObject) {
    // SAFETY: CPython calls tp_dealloc once, with the GIL, when the refcount reaches zero.
    // `data` came from Box::into_raw in `new_host_array`. Instances of heap types own a
    // reference to their type, given back here.
    unsafe {
        let o = obj as *mut HostArrayObject;
        let data = (*o).data;
        if !data.is_null() {
            (*o).data = ptr::null_mut();
            drop(Box::from_raw(data));
        }
        let tp = ffi::Py_TYPE(obj);
        let free = ffi::PyType_GetSlot(tp, ffi::Py_tp_free);
        if !free.is_null() {
            let free: ffi::freefunc = std::mem::transmute::<*mut c_void, ffi::freefunc>(free);
            free(obj as *mut c_void);
        }
        ffi::Py_DecRef(tp as *mut ffi::PyObject);
    }
}

static HOST_ARRAY_TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn host_array_type(py: Python<'_>) -> PyResult<&Py<PyType>> {
    HOST_ARRAY_TYPE.get_or_try_init(py, || {
        // CPython keeps pointers into the spec's name, so spec and slots live forever.
        let slots: &'static mut [ffi::PyType_Slot; 3] = Box::leak(Box::new([
            ffi::PyType_Slot {
                slot: ffi::Py_bf_getbuffer,
                pfunc: host_array_getbuffer as *mut c_void,
            },
            ffi::PyType_Slot {
                slot: ffi::Py_tp_dealloc,
                pfunc: host_array_dealloc as *mut c_void,
            },
            ffi::PyType_Slot::default(),
        ]));
        let spec: &'static mut ffi::PyType_Spec = Box::leak(Box::new(ffi::PyType_Spec {
            name: c"rpjrt._rpjrt.HostArray".as_ptr(),
            basicsize: std::mem::size_of::<HostArrayObject>() as c_int,
            itemsize: 0,
            flags: (ffi::Py_TPFLAGS_DEFAULT | ffi::Py_TPFLAGS_DISALLOW_INSTANTIATION)
                as std::ffi::c_uint,
            slots: slots.as_mut_ptr(),
        }));
        // SAFETY: a valid, 'static spec; we hold the GIL.
        let tp = unsafe { ffi::PyType_FromSpec(spec) };
        if tp.is_null() {
            return Err(PyErr::fetch(py));
        }
        // SAFETY: PyType_FromSpec returned a new reference to a type object.
        let bound = unsafe { Bound::from_owned_ptr(py, tp) };
        Ok(bound.cast_into::<PyType>()?.unbind())
    })
}

/// A new HostArray exporting `data`.
pub fn new_host_array(py: Python<'_>, data: HostData) -> PyResult<Bound<'_, PyAny>> {
    let tp = host_array_type(py)?.bind(py);
    let tp_ptr = tp.as_ptr() as *mut ffi::PyTypeObject;
    // SAFETY: reading the tp_alloc slot of a heap type we created.
    let alloc = unsafe { ffi::PyType_GetSlot(tp_ptr, ffi::Py_tp_alloc) };
    if alloc.is_null() {
        return Err(PyBufferError::new_err("HostArray has no allocator"));
    }
    // SAFETY: the tp_alloc slot holds an allocfunc.
    let alloc: ffi::allocfunc =
        unsafe { std::mem::transmute::<*mut c_void, ffi::allocfunc>(alloc) };
    // SAFETY: allocating an instance of our type (zero-filled, refcount 1, type referenced).
    let obj = unsafe { alloc(tp_ptr, 0) };
    if obj.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: `obj` is a fresh HostArrayObject of basicsize bytes.
    unsafe { (*(obj as *mut HostArrayObject)).data = Box::into_raw(Box::new(data)) };
    // SAFETY: `obj` is a new (owned) reference.
    Ok(unsafe { Bound::from_owned_ptr(py, obj) })
}

/// `memoryview(HostArray(bytes))` with the given element type and shape.
pub fn host_memoryview<'py>(
    py: Python<'py>,
    t: ElementType,
    dims: &[i64],
    bytes: Vec<u8>,
) -> PyResult<Bound<'py, PyAny>> {
    // CPython's limit (PyBUF_MAX_NDIM), numpy's too: past it memoryview fails bare.
    if dims.len() > 64 {
        return Err(crate::errors::invalid(format!(
            "the {t} array has {} dimensions, but a memoryview (and numpy) holds at most 64; \
             reshape it to at most 64 dimensions on the device first (tobytes() gives its \
             bytes as they are)",
            dims.len()
        )));
    }
    let itemsize = t.host_itemsize();
    let shape: Vec<ffi::Py_ssize_t> = dims.iter().map(|&d| d as ffi::Py_ssize_t).collect();
    let strides: Vec<ffi::Py_ssize_t> = c_strides(dims, itemsize as i64)
        .iter()
        .map(|&s| s as ffi::Py_ssize_t)
        .collect();
    let arr = new_host_array(
        py,
        HostData {
            bytes,
            shape,
            strides,
            format: export_format(t),
            itemsize,
            readonly: false,
        },
    )?;
    // SAFETY: `arr` is a live exporter; we hold the GIL.
    let mv = unsafe { ffi::PyMemoryView_FromObject(arr.as_ptr()) };
    if mv.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference.
    Ok(unsafe { Bound::from_owned_ptr(py, mv) })
}

/// Host bytes for a zero-copy buffer: a region of memory that a [`HostPin`] keeps exported.
///
/// The device buffer keeps this value (as its owner of host memory) until the plugin is
/// done with the memory; only then is the pin dropped. Dropping it without the GIL is safe:
/// PyO3 defers the reference count change, and the pin's export is released by its own
/// deallocation, which CPython runs with the GIL.
pub struct PinnedHost {
    pin: Py<HostPin>,
    region: Region,
}

impl PinnedHost {
    /// Pins `obj`'s buffer; `region` (inside `view`, an export of `obj`) is the data.
    pub fn new(obj: &Bound<'_, PyAny>, view: &HostView, region: Region) -> PyResult<PinnedHost> {
        let py = obj.py();
        // A second export of the same memory, held by the pin (`view` is the caller's).
        let pinned = HostView::get_with(obj, PYBUF_RECORDS_RO)?;
        if pinned.ptr() != view.ptr() {
            return Err(PyBufferError::new_err(
                "the exporter moved its memory between two exports",
            ));
        }
        Ok(PinnedHost {
            pin: HostPin::wrap(py, obj, pinned)?,
            region,
        })
    }

    /// A pin of `obj`'s buffer for the `len` bytes at `addr` that something else (a DLPack
    /// tensor of `obj`) describes, or `None` when `obj` exports no buffer, or one that does
    /// not cover those bytes. The export asks for no format, so that arrays of types
    /// without a buffer format (bfloat16, ...) export too: only the addresses matter here.
    pub fn covering(
        obj: &Bound<'_, PyAny>,
        addr: usize,
        len: usize,
    ) -> PyResult<Option<PinnedHost>> {
        let py = obj.py();
        if len == 0 {
            return Ok(None);
        }
        let Ok(view) = HostView::get_with(obj, PYBUF_STRIDES) else {
            return Ok(None);
        };
        let itemsize = view.itemsize();
        let dims = view.shape();
        let strides = view.strides();
        let Ok(Some((lo, end))) = rpjrt::extent(&dims, &strides, itemsize) else {
            return Ok(None);
        };
        let base = view.ptr() as usize as i128;
        let (start, stop) = (base + lo, base + end);
        let (want, want_end) = (addr as i128, addr as i128 + len as i128);
        if want < start || want_end > stop {
            return Ok(None);
        }
        Ok(Some(PinnedHost {
            pin: HostPin::wrap(py, obj, view)?,
            region: Region { addr, len },
        }))
    }

    /// The pin (for the cycle collector: see `HostLink`).
    pub fn pin(&self) -> &Py<HostPin> {
        &self.pin
    }
}

/// An export of a Python object's buffer, held for a zero-copy device buffer: while it
/// lives, the exporter keeps that memory valid and in place (the buffer protocol's
/// promise). It is a Python object so that the export is released where CPython releases
/// objects (with the GIL, when the last reference goes, however late the device buffer's
/// owner drops it), and so that the cycle collector sees the exporter: `__traverse__`
/// visits the references the export holds. It has no `__clear__` on purpose: the export
/// may be given up only once the device buffer over its memory is destroyed and the plugin
/// is done with the memory, which is when the pin's last holder lets it go; a cycle through
/// it is broken elsewhere (the Buffer's `__clear__`, or the exporter's own).
#[pyclass(frozen, name = "_HostPin", module = "rpjrt._rpjrt")]
pub struct HostPin {
    /// The export; released (with its reference to the exporter) on drop.
    _export: PinView,
    /// The reference `view`'s `obj` holds (the exporter or the object it named), typed
    /// for the visitor; never released as such (`PyBuffer_Release` gives it back).
    view_obj: Option<ManuallyDrop<Py<PyAny>>>,
    /// A reference of our own to the exporter, so that its memory stays whatever the
    /// export names as its owner.
    exporter: Py<PyAny>,
}

/// A [`HostView`] that a `HostPin` may hold (for its drop, which releases the export).
struct PinView {
    _held: HostView,
}

// SAFETY: the view is created with the GIL held, never read after the pin is made (the
// pointers it holds are read only by `HostPin::wrap`), and released by `HostView`'s drop,
// which for a pyclass runs in its deallocation, with the GIL held, on whichever thread let
// go of the last reference.
unsafe impl Send for PinView {}
// SAFETY: as above: shared references to it are never used to read or change it.
unsafe impl Sync for PinView {}

impl HostPin {
    fn wrap(py: Python<'_>, exporter: &Bound<'_, PyAny>, view: HostView) -> PyResult<Py<HostPin>> {
        let raw_obj = view.raw.obj;
        let view_obj = (!raw_obj.is_null()).then(|| {
            // SAFETY: a successful export's `obj` is a strong reference the view owns; the
            // `Py` made here stands for that same reference and is never dropped
            // (`ManuallyDrop`): `PyBuffer_Release` gives it back when the view goes.
            ManuallyDrop::new(unsafe { Bound::from_owned_ptr(py, raw_obj) }.unbind())
        });
        Py::new(
            py,
            HostPin {
                _export: PinView { _held: view },
                view_obj,
                exporter: exporter.clone().unbind(),
            },
        )
    }
}

#[pymethods]
impl HostPin {
    /// Visits the exporter and the object the export holds (two references of its own).
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Some(o) = &self.view_obj {
            visit.call(&**o)?;
        }
        visit.call(&self.exporter)
    }
}

/// A Buffer's share of the [`PinnedHost`] its zero-copy device buffer uses, through which
/// the Buffer's `__traverse__` lets the cycle collector see the host memory's exporter
/// (which may refer back to the Buffer: an ndarray subclass instance holding the Buffer made
/// from it).
///
/// The pin belongs to the device buffer, which other holders may share: it is visited only
/// while the Buffer object is that device buffer's one holder. So the visit stops for good
/// once the Buffer's handle was lent out ([`HostLink::mark_shared`]: an execution, a
/// session slot, an export...), and whenever the pin has more holders than when the Buffer
/// was made. Leaving a cycle uncollected is safe; visiting a reference someone else holds
/// is not.
pub struct HostLink {
    pinned: std::sync::Mutex<Option<std::sync::Arc<PinnedHost>>>,
    /// The pin's holders when the Buffer was made, this link included.
    holders: usize,
    /// The Buffer's handle may have been cloned: never visit again.
    shared: std::sync::atomic::AtomicBool,
}

impl HostLink {
    /// A link to `pin` (call once the put is over, so that its holders are counted).
    pub fn new(pin: std::sync::Arc<PinnedHost>) -> HostLink {
        HostLink {
            holders: std::sync::Arc::strong_count(&pin),
            pinned: std::sync::Mutex::new(Some(pin)),
            shared: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Records that the Buffer's device buffer handle was lent out and may now have holders
    /// besides the Buffer object.
    #[inline]
    pub fn mark_shared(&self) {
        use std::sync::atomic::Ordering;
        if !self.shared.load(Ordering::Relaxed) {
            self.shared.store(true, Ordering::Release);
        }
    }

    /// Visits the pin while the Buffer is its device buffer's only holder. The lock is taken
    /// only by threads that hold the GIL, briefly; a held one is not waited for.
    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        if self.shared.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(());
        }
        if let Ok(pinned) = self.pinned.try_lock() {
            if let Some(p) = pinned.as_ref() {
                if std::sync::Arc::strong_count(p) <= self.holders {
                    visit.call(p.pin())?;
                }
            }
        }
        Ok(())
    }

    /// The Buffer's share, taken out (for `__clear__`, after the handle was dropped).
    pub fn release(&self) -> Option<std::sync::Arc<PinnedHost>> {
        self.pinned.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

// SAFETY: `bytes` always returns the same range (fixed at creation), which lies inside the
// export that `pin` holds: valid and not resizable while this value lives. The exporter's
// owner may still write through other references; rpjrt's Python API documents that a
// zero-copy buffer must not be written to, as numpy does for shared memory.
unsafe impl rpjrt::HostBytes for PinnedHost {
    fn bytes(&self) -> &[u8] {
        // SAFETY: the region lies inside the export held by `pin`, which we own.
        unsafe { self.region.as_slice() }
    }
}
