//! numpy arrays made in the extension through numpy's C API, so that `Buffer.to_numpy()`
//! allocates its array once and the core copies straight into it, without a Python-level
//! detour (importing a helper, wrapping a memoryview, calling `numpy.asarray`).
//!
//! numpy stays optional: nothing here runs before the first `to_numpy()`, which imports it.
//! The API is numpy's table of function pointers, published as the `_ARRAY_API` capsule of
//! its `_multiarray_umath` extension. Three entries are used, at positions numpy keeps
//! fixed in its 1.x and 2.x ABIs (its promise to extensions compiled against older
//! versions): 0 `PyArray_GetNDArrayCVersion`, 2 `PyArray_Type`, 94
//! `PyArray_NewFromDescr` and 282 `PyArray_SetBaseObject`. The table is used only when entry 0 reports ABI major version 1
//! or 2. An array's data pointer is the first field after the object header
//! (`PyArrayObject_fields.data`, what numpy's own `PyArray_DATA` reads); that is checked once
//! against the pointer the buffer protocol gives. When anything does not match, [`api`]
//! returns `None` and callers take the portable path.
//!
//! Element types are described by the `numpy.dtype` objects that `rpjrt.dtype(...).numpy`
//! gives (ml_dtypes' types included: `PyArray_NewFromDescr` takes any descriptor), cached
//! per type, each checked once to have the host item size rpjrt writes.

use std::ffi::{c_int, c_uint, c_void};
use std::ptr;

use pyo3::exceptions::PyImportError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use rpjrt::ElementType;

use crate::convert::dtype_obj;
use crate::errors::invalid;
use crate::pybuf::HostView;

/// `PyArray_NewFromDescr(subtype, descr, nd, dims, strides, data, flags, obj)`; steals a
/// reference to `descr`.
type NewFromDescr = unsafe extern "C" fn(
    *mut ffi::PyTypeObject,
    *mut ffi::PyObject,
    c_int,
    *const ffi::Py_ssize_t,
    *const ffi::Py_ssize_t,
    *mut c_void,
    c_int,
    *mut ffi::PyObject,
) -> *mut ffi::PyObject;

/// `PyArray_SetBaseObject(arr, obj)`: makes `obj` own `arr`'s memory; steals `obj`.
type SetBaseObject = unsafe extern "C" fn(*mut ffi::PyObject, *mut ffi::PyObject) -> c_int;

/// `PyArray_GetNDArrayCVersion()`: the ABI version (major in the top byte).
type AbiVersion = unsafe extern "C" fn() -> c_uint;

/// Position of each entry in numpy's API table.
const SLOT_ABI_VERSION: usize = 0;
const SLOT_ARRAY_TYPE: usize = 2;
const SLOT_NEW_FROM_DESCR: usize = 94;
const SLOT_SET_BASE_OBJECT: usize = 282;

/// Array flags (`NPY_ARRAY_*`), the same in numpy 1.x and 2.x.
const NPY_ARRAY_C_CONTIGUOUS: c_int = 0x0001;
const NPY_ARRAY_WRITEABLE: c_int = 0x0400;

/// The most dimensions every supported numpy takes (`NPY_MAXDIMS` is 32 in 1.x, 64 in 2.x).
const MAX_DIMS: usize = 32;

/// The numpy entries this module uses.
pub struct Api {
    array_type: *mut ffi::PyTypeObject,
    new_from_descr: NewFromDescr,
    set_base_object: SetBaseObject,
    /// The most dimensions this numpy's arrays have (`NPY_MAXDIMS`: 32 in 1.x, 64 in 2.x).
    max_dims: usize,
    /// Keeps the capsule (and so the table it points to) alive.
    _capsule: Py<PyAny>,
}

// SAFETY: the pointers address numpy's static type object and function, valid for the life
// of the process once numpy is imported (extension modules are never unloaded); they are
// used only with the GIL held.
unsafe impl Send for Api {}
// SAFETY: as for Send; the struct is never mutated after creation.
unsafe impl Sync for Api {}

/// `None` once numpy's table was found unusable (then `to_numpy` takes the portable path).
static API: PyOnceLock<Option<Api>> = PyOnceLock::new();

/// The numpy dtype of each element type, by PJRT code.
static DESCRS: [PyOnceLock<Py<PyAny>>; 64] = [const { PyOnceLock::new() }; 64];

/// numpy's API, importing numpy the first time. `Err(ImportError)` when numpy cannot be
/// imported (see [`import_failed`]); `Ok(None)` when its table is not one this module
/// knows.
pub fn api(py: Python<'_>) -> PyResult<Option<&'static Api>> {
    if let Some(a) = API.get(py) {
        return Ok(a.as_ref());
    }
    if let Err(e) = py.import("numpy") {
        return Err(import_failed(py, e));
    }
    let found = load(py);
    Ok(API.get_or_init(py, || found).as_ref())
}

/// The error for `to_numpy()` when `import numpy` raised `e` ([`import_failed_for`]).
fn import_failed(py: Python<'_>, e: PyErr) -> PyErr {
    import_failed_for(
        py,
        "numpy",
        "Buffer.to_numpy()",
        "Buffer.to_host() gives a memoryview without it",
        e,
    )
}

/// The error for `what` when importing `module` (numpy, ml_dtypes) raised `e`, with `e` as
/// its cause and `hint` (what works without the module) at its end, if any: says to install the module only when it is not installed. While the
/// interpreter shuts down (a `__del__` or finalizer run then), imports fail whatever is
/// installed, and the error says that instead; a module present but failing to import
/// gives its own error's text. An exception that is not an ImportError (a Ctrl-C during
/// the import) stands as it is. The Python package's conversions use the same rule
/// (`_import_failed`).
pub(crate) fn import_failed_for(
    py: Python<'_>,
    module: &str,
    what: &str,
    hint: &str,
    e: PyErr,
) -> PyErr {
    if !e.is_instance_of::<PyImportError>(py) {
        return e;
    }
    let finalizing = py
        .import("sys")
        .and_then(|sys| sys.call_method0("is_finalizing"))
        .and_then(|f| f.is_truthy())
        // No usable `sys` is itself a sign of the interpreter's end.
        .unwrap_or(true);
    let absent = e.is_instance_of::<pyo3::exceptions::PyModuleNotFoundError>(py)
        && e.value(py)
            .getattr("name")
            .and_then(|n| n.extract::<String>())
            .is_ok_and(|n| n.split('.').next() == Some(module));
    let message = if finalizing {
        format!(
            "{what} cannot import {module}: the interpreter is shutting down (an object read \
             in a __del__ or finalizer at exit), when Python refuses imports; do it before then"
        )
    } else if absent {
        format!("{what} needs {module} (pip install 'rpjrt[numpy]')")
    } else {
        format!(
            "{what} could not import {module}: {}: {}",
            e.get_type(py)
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "ImportError".into()),
            e.value(py)
        )
    };
    let message = match hint {
        "" => message,
        hint => format!("{message}; {hint}"),
    };
    // Made as an instance at once: pyo3 normalizes a lazily made error (as `set_cause`
    // needs) through a fresh attach, which panics once the interpreter is finalizing.
    match py.get_type::<PyImportError>().call1((message,)) {
        Ok(inst) => {
            let err = PyErr::from_value(inst);
            err.set_cause(py, Some(e));
            err
        }
        Err(_) => e,
    }
}

/// `_import_failed(module, what, error, hint="")`: the ImportError to raise for `what`
/// when importing `module` raised `error` (the rule of [`import_failed_for`]).
#[pyfunction]
#[pyo3(signature = (module, what, error, hint = ""))]
pub fn _import_failed(
    py: Python<'_>,
    module: &str,
    what: &str,
    error: Bound<'_, PyAny>,
    hint: &str,
) -> Py<PyAny> {
    import_failed_for(py, module, what, hint, PyErr::from_value(error))
        .into_value(py)
        .into_any()
}

/// `numpy.ndarray`, once numpy is imported (this never imports it; `None` before).
pub fn ndarray_type(py: Python<'_>) -> Option<&Bound<'_, pyo3::types::PyType>> {
    static NDARRAY: PyOnceLock<Py<pyo3::types::PyType>> = PyOnceLock::new();
    numpy_type(py, &NDARRAY, "ndarray")
}

/// `numpy.generic`, the base class of numpy's scalars, once numpy is imported (this never
/// imports it; `None` before).
pub fn generic_type(py: Python<'_>) -> Option<&Bound<'_, pyo3::types::PyType>> {
    static GENERIC: PyOnceLock<Py<pyo3::types::PyType>> = PyOnceLock::new();
    numpy_type(py, &GENERIC, "generic")
}

/// The class `numpy.<name>`, kept in `cell` once numpy is imported.
fn numpy_type<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<pyo3::types::PyType>>,
    name: &str,
) -> Option<&'py Bound<'py, pyo3::types::PyType>> {
    if let Some(t) = cell.get(py) {
        return Some(t.bind(py));
    }
    let numpy = py
        .import("sys")
        .and_then(|sys| sys.getattr("modules"))
        .ok()?
        .get_item("numpy")
        .ok()?;
    let t = numpy
        .getattr(name)
        .ok()?
        .cast_into::<pyo3::types::PyType>()
        .ok()?;
    Some(cell.get_or_init(py, || t.unbind()).bind(py))
}

/// Reads and checks numpy's table; `None` on any surprise.
fn load(py: Python<'_>) -> Option<Api> {
    // numpy 2 moved its core to numpy._core (numpy.core still works there, with a warning).
    let module = [
        "numpy._core._multiarray_umath",
        "numpy.core._multiarray_umath",
    ]
    .iter()
    .find_map(|m| py.import(*m).ok())?;
    let capsule = module.getattr("_ARRAY_API").ok()?;
    // SAFETY: `capsule` is a live object; PyCapsule_IsValid accepts any object, and
    // numpy's capsule has no name (NULL).
    let table = unsafe {
        if ffi::PyCapsule_IsValid(capsule.as_ptr(), ptr::null()) == 0 {
            return None;
        }
        ffi::PyCapsule_GetPointer(capsule.as_ptr(), ptr::null())
    } as *const *const c_void;
    if table.is_null() {
        drop(PyErr::take(py));
        return None;
    }
    // SAFETY: numpy's table holds at least 300 entries in every 1.x and 2.x release; the
    // three read here are a function, the address of a static type object, and a function,
    // with the signatures declared above. The ABI version is checked before the others are
    // trusted.
    let api = unsafe {
        let version_fn = *table.add(SLOT_ABI_VERSION);
        if version_fn.is_null() {
            return None;
        }
        let version = std::mem::transmute::<*const c_void, AbiVersion>(version_fn)();
        let max_dims = match version >> 24 {
            1 => 32,
            2 => 64,
            _ => return None,
        };
        let array_type = *table.add(SLOT_ARRAY_TYPE) as *mut ffi::PyTypeObject;
        let new_fn = *table.add(SLOT_NEW_FROM_DESCR);
        let base_fn = *table.add(SLOT_SET_BASE_OBJECT);
        if array_type.is_null() || new_fn.is_null() || base_fn.is_null() {
            return None;
        }
        Api {
            array_type,
            new_from_descr: std::mem::transmute::<*const c_void, NewFromDescr>(new_fn),
            set_base_object: std::mem::transmute::<*const c_void, SetBaseObject>(base_fn),
            max_dims,
            _capsule: capsule.unbind(),
        }
    };
    // Check the data-pointer field against the buffer protocol once.
    let np = py.import("numpy").ok()?;
    let u8_descr = np.getattr("dtype").ok()?.call1(("uint8",)).ok()?;
    let (arr, data) = api.empty(py, &u8_descr, &[3]).ok()??;
    let view = HostView::get(&arr)?;
    if view.ptr() != data.cast_const() || view.byte_len() != 3 {
        return None;
    }
    drop(view);
    Some(api)
}

impl Api {
    /// Why an array of shape `dims` cannot be one of this numpy's, or `None` when it can:
    /// it has more dimensions than numpy holds (the memoryview fallback stops at 64 too).
    pub fn rank_refusal(&self, dims: &[i64]) -> Option<String> {
        let max = self.max_dims;
        (dims.len() > max).then(|| {
            format!(
                "it has {} dimensions, but numpy holds at most {max}; reshape it to at most \
                 {max} dimensions on the device first (in the program that makes it)",
                dims.len()
            )
        })
    }

    /// `PyArray_NewFromDescr` of a C-ordered array of `descr` with shape `dims` (at most
    /// `MAX_DIMS`) over `data` (null: numpy allocates) with `flags`; a new reference, never
    /// null.
    ///
    /// # Safety
    /// A non-null `data` must address `product(dims) * descr.itemsize` bytes that outlive
    /// the array (the caller makes their owner its base), writable if `flags` says so.
    unsafe fn new_array(
        &self,
        descr: &Bound<'_, PyAny>,
        dims: &[i64],
        data: *mut c_void,
        flags: c_int,
    ) -> PyResult<*mut ffi::PyObject> {
        let mut shape = [0 as ffi::Py_ssize_t; MAX_DIMS];
        for (s, &d) in shape.iter_mut().zip(dims) {
            *s = ffi::Py_ssize_t::try_from(d)
                .map_err(|_| invalid(format!("dimension {d} does not fit numpy")))?;
        }
        // SAFETY: we hold the GIL (`descr` is bound); `descr` is a live numpy dtype, whose
        // reference the call steals (hence the incref); `shape` holds `dims.len()` sizes
        // (at most MAX_DIMS: the callers check); `data` is as the caller vouches; null
        // strides ask for C order, and a null `obj` for no subtype hook.
        let obj = unsafe {
            ffi::Py_IncRef(descr.as_ptr());
            (self.new_from_descr)(
                self.array_type,
                descr.as_ptr(),
                dims.len().min(MAX_DIMS) as c_int,
                shape.as_ptr(),
                ptr::null(),
                data,
                flags,
                ptr::null_mut(),
            )
        };
        if obj.is_null() {
            return Err(PyErr::fetch(descr.py()));
        }
        Ok(obj)
    }

    /// A new, writable, C-ordered array of `descr` elements with shape `dims`, and the
    /// address of its data (`product(dims) * descr.itemsize` bytes, uninitialised).
    /// An error for more dimensions than numpy holds ([`Api::rank_refusal`]); `Ok(None)`
    /// for more than this path takes (`MAX_DIMS`; the caller's portable path takes them).
    pub fn empty<'py>(
        &self,
        py: Python<'py>,
        descr: &Bound<'py, PyAny>,
        dims: &[i64],
    ) -> PyResult<Option<(Bound<'py, PyAny>, *mut u8)>> {
        if let Some(why) = self.rank_refusal(dims) {
            return Err(invalid(format!(
                "the array cannot be copied to numpy: {why}"
            )));
        }
        if dims.len() > MAX_DIMS {
            return Ok(None);
        }
        // SAFETY: null data asks numpy for a fresh C-ordered allocation (flags 0), owned by
        // the array.
        let obj = unsafe { self.new_array(descr, dims, ptr::null_mut(), 0)? };
        // SAFETY: a new reference to a numpy array; its first field after the object
        // header is the data pointer (`PyArrayObject_fields.data`; checked in `load`).
        let (arr, data) = unsafe {
            let data_field =
                (obj as *const u8).add(std::mem::size_of::<ffi::PyObject>()) as *const *mut u8;
            (Bound::from_owned_ptr(py, obj), *data_field)
        };
        Ok(Some((arr, data)))
    }
}

impl Api {
    /// A C-ordered array of `descr` elements (`itemsize` bytes each: the caller vouches for
    /// it, as [`descr`] checks it) with shape `dims` over `base`'s bytes, which must be
    /// contiguous and exactly `product(dims) * itemsize` long (checked); writable or not as
    /// `writable` says (a writable array needs a writable `base`). `base` is an object with
    /// the buffer protocol that keeps the memory alive and fixed while it lives (a
    /// memoryview holds an export, so its bytearray cannot be resized); it becomes the
    /// array's base. `Ok(None)` when the sizes do not match or this path takes no such
    /// shape; an error for more dimensions than numpy holds ([`Api::rank_refusal`]).
    pub fn over<'py>(
        &self,
        py: Python<'py>,
        descr: &Bound<'py, PyAny>,
        itemsize: usize,
        dims: &[i64],
        base: Bound<'py, PyAny>,
        writable: bool,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        if let Some(why) = self.rank_refusal(dims) {
            return Err(invalid(format!("the array cannot be a numpy array: {why}")));
        }
        if dims.len() > MAX_DIMS {
            return Ok(None);
        }
        let Some(view) = HostView::get(&base) else {
            return Ok(None);
        };
        let elements = dims.iter().try_fold(1usize, |n, &d| {
            usize::try_from(d).ok().and_then(|d| n.checked_mul(d))
        });
        if elements.and_then(|n| n.checked_mul(itemsize)) != Some(view.byte_len())
            || !view.is_c_contiguous()
            || (writable && view.readonly())
        {
            return Ok(None);
        }
        let data = view.ptr() as *mut c_void;
        drop(view);
        let flags = NPY_ARRAY_C_CONTIGUOUS | if writable { NPY_ARRAY_WRITEABLE } else { 0 };
        // SAFETY: `data` addresses `product(dims) * itemsize` bytes (checked above) that
        // `base` keeps alive and in place (its buffer export), writable when asked (checked).
        let obj = unsafe { self.new_array(descr, dims, data, flags)? };
        // SAFETY: `obj` is a new (owned, non-null) reference to a numpy array.
        let arr = unsafe { Bound::from_owned_ptr(py, obj) };
        // SAFETY: `arr` is a live array that owns no memory; the call steals our reference
        // to `base`, which from then on the array holds (numpy releases it on failure).
        if unsafe { (self.set_base_object)(arr.as_ptr(), base.into_ptr()) } != 0 {
            return Err(PyErr::fetch(py));
        }
        Ok(Some(arr))
    }
}

/// The numpy dtype of `t` (`rpjrt.dtype(t).numpy`), cached; checked to have the item size
/// of rpjrt's host form.
pub fn descr(py: Python<'_>, t: ElementType) -> PyResult<&Py<PyAny>> {
    let slot = DESCRS
        .get(t.code() as usize)
        .ok_or_else(|| invalid(format!("element type {t} has no numpy dtype")))?;
    slot.get_or_try_init(py, || {
        let d = dtype_obj(py, t)?.getattr("numpy")?;
        let itemsize: usize = d.getattr("itemsize")?.extract()?;
        if itemsize != t.host_itemsize() {
            return Err(invalid(format!(
                "numpy's {d} has {itemsize}-byte elements, but rpjrt's host form of {t} has {}",
                t.host_itemsize()
            )));
        }
        Ok(d.unbind())
    })
}
