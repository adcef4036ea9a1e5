//! Custom calls (XLA FFI) from Python: handlers written in Python, and native handlers
//! given as PyCapsules or addresses. The sugar (decorator, jaxlib targets) is in
//! `rpjrt/ffi.py`.
//!
//! A Python handler runs on whatever thread the plugin calls it from; it takes the GIL only
//! for the call itself (every execute releases the GIL while the plugin runs, so a handler
//! on a plugin worker thread cannot deadlock against the caller).

use crate::detach::Detach;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyCapsule, PyDict, PyList, PyString, PyTuple};
use rpjrt::ffi::{self, AttrArray, AttrValue, Attrs, CallFrame, FfiError, HandlerFn};
use rpjrt::{Code, ElementType};

use crate::client::{PyClient, PyPlugin};
use crate::convert::{dtype_obj, Conversion};
use crate::errors::{invalid, PyErrExt};

/// One buffer argument or result of a custom call; valid only during the handler call.
///
/// Views (``memoryview()``, ``to_numpy()``, ``__array__``, ``__dlpack__``) never address the
/// runtime's memory: the first view of a buffer makes a copy (an argument's bytes, or a zeroed
/// result), and what is written into a result's views is copied into the result when the
/// handler returns, as ``jax.pure_callback`` copies. A view kept past the call stays readable
/// but is detached from the computation; a new view after the call raises. ``data`` is the
/// runtime's address, meaningful during the call only.
#[pyclass(frozen, name = "FfiBuffer", module = "rpjrt.ffi")]
pub struct PyFfiBuffer {
    shape: Vec<i64>,
    element_type: Option<ElementType>,
    ffi_dtype: i32,
    nbytes: usize,
    data: usize,
    host: bool,
    writable: bool,
    /// A result whose memory is also an argument's (`output_operand_aliases`): its first
    /// view copies the argument's values instead of starting zeroed.
    in_place: bool,
    valid: Arc<AtomicBool>,
    /// The copy Python views: made on the first view, copied back into a result's memory
    /// when the handler returns. Views never address the runtime's memory, so a view kept
    /// past the call reads (or writes) this copy, never memory the runtime freed or reused.
    staging: pyo3::sync::PyOnceLock<Py<PyByteArray>>,
}

impl PyFfiBuffer {
    fn check(&self) -> PyResult<()> {
        if self.valid.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(invalid(
                "this custom-call buffer is only valid during the handler call",
            ))
        }
    }

    /// The buffer's copy, made on first use during the call: an argument's bytes (also for a
    /// result that aliases an argument, whose memory holds them), or a zeroed result.
    fn stage<'py>(&self, py: Python<'py>) -> PyResult<&Py<PyByteArray>> {
        if let Some(s) = self.staging.get(py) {
            self.check()?;
            return Ok(s);
        }
        self.check()?;
        if !self.host {
            return Err(invalid(
                "this custom-call buffer is in device memory; use .data and the stream",
            ));
        }
        let made = if (self.writable && !self.in_place) || self.nbytes == 0 {
            PyByteArray::new_with(py, self.nbytes, |_| Ok(()))?
        } else {
            // SAFETY: `valid` is true, so the handler call is in progress (it is cleared,
            // with the GIL held, before the handler returns to the runtime): `data` points at
            // `nbytes` bytes of host memory the runtime keeps alive for the call (an
            // argument's, or an in-place result's, which nothing writes while the GIL is
            // held here). They are copied into the bytearray before this function returns.
            let bytes = unsafe { std::slice::from_raw_parts(self.data as *const u8, self.nbytes) };
            PyByteArray::new(py, bytes)
        };
        let _ = self.staging.set(py, made.unbind());
        self.staging
            .get(py)
            .ok_or_else(|| invalid("custom-call buffer copy missing"))
    }
}

impl PyFfiBuffer {
    /// `__array__` of a sub-byte buffer (int4, uint4, int2, uint2): the runtime packs its
    /// elements two or four to a byte, ml_dtypes holds one per byte, so no numpy array is a
    /// view of it. An unpacked copy (converted to `dtype` where one is asked) is given
    /// wherever numpy allows a copy; refused are `copy=False` (a view is required), and a
    /// result's `copy=None` with no conversion, which asks for the view whose writes reach
    /// the result (a detached copy would drop them silently).
    fn sub_byte_array<'py>(
        &self,
        py: Python<'py>,
        t: ElementType,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let role = if self.writable { "result" } else { "argument" };
        let per_byte = 8 / t.storage_bits();
        let np = py.import("numpy")?;
        let have = np.getattr("dtype")?.call1((dtype_obj(py, t)?,))?;
        let want = match dtype.filter(|d| !d.is_none()) {
            None => None,
            Some(d) => {
                let want = np.getattr("dtype")?.call1((d,))?;
                (!want.eq(&have)?).then_some(want)
            }
        };
        if copy == Some(false) {
            return Err(invalid(format!(
                "__array__({}copy=False) of this custom-call {t} {role} cannot be a view: {t} \
                 packs {per_byte} elements to a byte, which no numpy array shows; pass \
                 copy=None or copy=True for an unpacked copy{}, or use .memoryview() for the \
                 packed bytes (low bits first)",
                match &want {
                    Some(w) => format!("dtype={}, ", w.str()?),
                    None => String::new(),
                },
                if self.writable {
                    " (detached from the result: return an array to set the result)"
                } else {
                    ""
                }
            )));
        }
        if self.writable && want.is_none() && copy.is_none() {
            return Err(invalid(format!(
                "np.asarray of this custom-call {t} result would have to be a view for writes \
                 to reach the result, and {t} packs {per_byte} elements to a byte, which no \
                 numpy array shows: return an array of the result's shape and dtype \
                 (ml_dtypes.{t}; rpjrt packs it), or write the packed bytes (low bits first) \
                 into .memoryview(); np.array(ret) (copy=True) gives a detached, unpacked copy \
                 of its current values"
            )));
        }
        let a = self.unpacked(py, t)?;
        match want {
            // Fresh already: converted without a second copy.
            Some(w) => {
                let kw = PyDict::new(py);
                kw.set_item("copy", false)?;
                a.call_method("astype", (w,), Some(&kw))
            }
            None => {
                if copy.is_none() {
                    // An argument is read-only, as its views are.
                    a.getattr("flags")?.setattr("writeable", false)?;
                }
                Ok(a)
            }
        }
    }

    /// A fresh numpy array of the buffer's ml_dtypes sub-byte type, one element per byte
    /// holding the type's bits with zeros above (as ml_dtypes stores them, and as a handler
    /// may return them), unpacked from the buffer's copy (low bits first).
    fn unpacked<'py>(&self, py: Python<'py>, t: ElementType) -> PyResult<Bound<'py, PyAny>> {
        let stage = self.stage(py)?.bind(py);
        let bits = t.storage_bits();
        let count = self
            .shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?))
            .ok_or_else(|| invalid(format!("custom-call buffer shape {:?}", self.shape)))?;
        // SAFETY: the bytearray is the buffer's private copy; nothing resizes it while the
        // GIL is held, and the bytes are copied out before any Python code runs.
        let packed = unsafe { stage.as_bytes() }.to_vec();
        if count
            .checked_mul(bits)
            .is_none_or(|b| b.div_ceil(8) > packed.len())
        {
            return Err(invalid(format!(
                "this custom-call {t} buffer {:?} holds {} bytes, fewer than its {count} \
                 elements pack into",
                self.shape,
                packed.len()
            )));
        }
        let mask = ((1u16 << bits) - 1) as u8;
        let mut dense = rpjrt::try_unpack_sub_byte(t, &packed, count).pyerr()?;
        for v in &mut dense {
            *v &= mask;
        }
        let (ndarray, dtypes) = numpy_cache(py)?;
        let dt = dtypes
            .get(t.code() as usize)
            .and_then(|d| d.as_ref())
            .ok_or_else(|| invalid(format!("{t} has no numpy dtype here (install ml_dtypes)")))?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("buffer", PyByteArray::new(py, &dense))?;
        ndarray
            .bind(py)
            .call((PyTuple::new(py, &self.shape)?, dt.bind(py)), Some(&kwargs))
    }
}

#[pymethods]
impl PyFfiBuffer {
    /// Dimensions.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// Element type (the same objects `Buffer.dtype` gives).
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.element_type {
            Some(t) => dtype_obj(py, t),
            None => Err(invalid(format!(
                "XLA FFI type code {} has no rpjrt element type",
                self.ffi_dtype
            ))),
        }
    }

    /// The XLA FFI data type code.
    #[getter]
    fn ffi_dtype(&self) -> i32 {
        self.ffi_dtype
    }

    /// Size of the data in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// Address of the data. Device memory on accelerators (the runtime's, valid during the
    /// call). For host memory, the address of the copy the views share (made on first use),
    /// so bytes written through it (ctypes, a C kernel) reach a result when the handler
    /// returns, as a view's do; asking after the call raises.
    #[getter]
    fn data(&self, py: Python<'_>) -> PyResult<usize> {
        if !self.host {
            return Ok(self.data);
        }
        let staged = self.stage(py)?.bind(py);
        Ok(staged.data() as usize)
    }

    /// Whether the data is host memory (readable through `memoryview()` / `to_numpy()`).
    #[getter]
    fn is_host(&self) -> bool {
        self.host
    }

    /// Whether this is a result (the handler writes it).
    #[getter]
    fn writable(&self) -> bool {
        self.writable
    }

    /// A memoryview over a copy of the host bytes, made during the call (writable for
    /// results: what is written there becomes the result when the handler returns). A view
    /// kept past the call stays readable but is detached from the computation.
    fn memoryview<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stage = self.stage(py)?;
        let mv = pyo3::types::PyMemoryView::from(stage.bind(py).as_any())?.into_any();
        if self.writable {
            Ok(mv)
        } else {
            mv.call_method0("toreadonly")
        }
    }

    /// A numpy array over the buffer's copy (see `memoryview`); made during the call only.
    fn to_numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let mv = self.memoryview(py)?;
        let t = self
            .element_type
            .ok_or_else(|| invalid("unknown element type"))?;
        if t == ElementType::Token {
            return Err(invalid(
                "this custom-call buffer is a token: it orders effects and holds no data \
                 (return None for a token result)",
            ));
        }
        if t.byte_width().is_none() {
            let bits = t.storage_bits();
            return Err(invalid(if self.writable {
                format!(
                    "{t} packs {} elements to a byte, which a numpy view cannot show: return \
                     an array of the result's shape and dtype (ml_dtypes.{t}; rpjrt packs \
                     it), or write the packed bytes (low bits first) into .memoryview() \
                     (np.array(ret) gives a detached, unpacked copy of its current values)",
                    8 / bits
                )
            } else {
                format!(
                    "{t} packs {} elements to a byte, which a numpy view cannot show: read \
                     the packed bytes from .memoryview() and unpack them (low bits first), \
                     or take an unpacked copy with np.asarray(arg) or np.array(arg)",
                    8 / bits
                )
            }));
        }
        // Straight through numpy's C API where it is usable: the array's base is the
        // memoryview, whose export keeps the copy alive and its size fixed.
        if let Some(api) = crate::npy::api(py)? {
            let descr = crate::npy::descr(py, t)?.bind(py);
            let made = api.over(
                py,
                descr,
                t.host_itemsize(),
                &self.shape,
                mv.clone(),
                self.writable,
            )?;
            if let Some(a) = made {
                return Ok(a);
            }
        }
        let (ndarray, dtypes) = numpy_cache(py)?;
        let dt = dtypes
            .get(t.code() as usize)
            .and_then(|d| d.as_ref())
            .ok_or_else(|| invalid(format!("{t} has no numpy dtype here")))?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("buffer", mv)?;
        ndarray
            .bind(py)
            .call((PyTuple::new(py, &self.shape)?, dt.bind(py)), Some(&kwargs))
    }

    /// numpy's array protocol over the buffer's copy (see `memoryview`), as numpy defines
    /// ``__array__(dtype=None, copy=None)``: the view itself when no conversion is needed
    /// (``dtype`` unset or the buffer's own), so that ``np.asarray(call.rets[k],
    /// dtype=<its dtype>)`` writes reach the result; a converted copy for another dtype;
    /// a fresh copy for ``copy=True``; and ``ValueError`` for ``copy=False`` when only a
    /// copy could be given (a converted copy is detached from the result). A sub-byte buffer
    /// (int4, uint4, int2, uint2) has no view: it gives an unpacked copy where numpy allows
    /// one (read-only for an argument with ``copy=None``), and ``ValueError`` for
    /// ``copy=False`` and for a result's ``copy=None`` with no conversion (a detached copy
    /// would drop the writes meant for the result).
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // numpy passes True, False or None; anything else is read as numpy reads it.
        let copy = match copy.filter(|c| !c.is_none()) {
            None => None,
            Some(c) => Some(c.is_truthy()?),
        };
        if let Some(t) = self.element_type.filter(|t| t.is_sub_byte()) {
            return self.sub_byte_array(py, t, dtype, copy);
        }
        let a = self.to_numpy(py)?;
        let have = a.getattr("dtype")?;
        let want = match dtype.filter(|d| !d.is_none()) {
            None => None,
            Some(d) => {
                let want = py.import("numpy")?.getattr("dtype")?.call1((d,))?;
                (!want.eq(&have)?).then_some(want)
            }
        };
        match (want, copy) {
            (None, Some(true)) => a.call_method0("copy"),
            (None, _) => Ok(a),
            (Some(want), Some(false)) => Err(invalid(format!(
                "__array__(dtype={}, copy=False) of this custom-call {} cannot avoid a copy: \
                 the buffer is {}, and converting it makes a new array{}; leave dtype unset \
                 (or give {}) for a view, or pass copy=None to allow the copy",
                want.str()?,
                if self.writable { "result" } else { "argument" },
                have.str()?,
                if self.writable {
                    " whose writes would not reach the result"
                } else {
                    ""
                },
                have.str()?
            ))),
            (Some(want), _) => a.call_method1("astype", (want,)),
        }
    }

    /// DLPack export of the buffer's copy (see `memoryview`), through numpy. An argument is
    /// read-only, which only versioned DLPack (``max_version=(1, 0)`` or newer, as
    /// ``np.from_dlpack`` asks) can mark: a legacy request (no ``max_version``) gets a
    /// private writable copy of the argument's values instead (writing it changes nothing),
    /// and a legacy request with ``copy=False`` raises ``BufferError`` saying what to pass.
    #[pyo3(signature = (**kwargs))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let view = self.to_numpy(py)?;
        if self.writable {
            return view.call_method("__dlpack__", (), kwargs);
        }
        let given = |key: &str| -> PyResult<Option<Bound<'py, PyAny>>> {
            Ok(match kwargs {
                Some(d) => d.get_item(key)?.filter(|v| !v.is_none()),
                None => None,
            })
        };
        // Versioned DLPack marks the export read-only; an odd max_version is numpy's to
        // refuse.
        let versioned = match given("max_version")? {
            None => false,
            Some(v) => v
                .extract::<(i64, i64)>()
                .map_or(true, |(major, _)| major >= 1),
        };
        if versioned {
            return view.call_method("__dlpack__", (), kwargs);
        }
        if let Some(copy) = given("copy")? {
            if !copy.is_truthy()? {
                return Err(pyo3::exceptions::PyBufferError::new_err(
                    "this custom-call argument is read-only, which the legacy DLPack protocol \
                     (__dlpack__() without max_version, or with one below (1, 0)) cannot mark, \
                     so it is exported only as a copy: pass max_version=(1, 0) for a read-only \
                     export (np.from_dlpack does), or leave copy unset for a writable copy",
                ));
            }
        }
        let rest = PyDict::new(py);
        if let Some(d) = kwargs {
            for (k, v) in d.iter() {
                if !k.eq("copy")? {
                    rest.set_item(k, v)?;
                }
            }
        }
        view.call_method0("copy")?
            .call_method("__dlpack__", (), Some(&rest))
    }

    fn __dlpack_device__(&self) -> PyResult<(i32, i32)> {
        if self.host {
            Ok((1, 0))
        } else {
            Err(invalid(
                "device-memory custom-call buffers have no DLPack export here",
            ))
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "rpjrt.ffi.FfiBuffer({}{:?}, {} bytes at {:#x}{})",
            self.element_type
                .map_or("?".to_string(), |t| t.name().to_string()),
            self.shape,
            self.nbytes,
            self.data,
            if self.writable { ", result" } else { "" }
        )
    }
}

type NumpyCache = (Py<PyAny>, Vec<Option<Py<PyAny>>>);
static NUMPY: pyo3::sync::PyOnceLock<NumpyCache> = pyo3::sync::PyOnceLock::new();

/// `numpy.ndarray` and the numpy dtype of each PJRT type code (None where numpy/ml_dtypes
/// has none), looked up once.
fn numpy_cache(py: Python<'_>) -> PyResult<&NumpyCache> {
    NUMPY.get_or_try_init(py, || -> PyResult<NumpyCache> {
        let np = py.import("numpy")?;
        let ndarray = np.getattr("ndarray")?.unbind();
        let np_dtype = np.getattr("dtype")?;
        let max = ElementType::ALL.iter().map(|t| t.code()).max().unwrap_or(0) as usize;
        let mut dtypes: Vec<Option<Py<PyAny>>> = (0..=max).map(|_| None).collect();
        for &t in ElementType::ALL {
            if let Ok(d) = dtype_obj(py, t).and_then(|d| np_dtype.call1((d,))) {
                dtypes[t.code() as usize] = Some(d.unbind());
            }
        }
        Ok((ndarray, dtypes))
    })
}

/// What a Python custom-call handler receives.
///
/// The handler returns ``None`` (after writing ``rets``), or the results: one array-like
/// for a single result, or a tuple/list with one per result (a plain list is one value
/// per result, even for a single result), each of the result's exact shape and dtype
/// (anything else fails the execution with ``InvalidArgumentError``). A ``BaseException``
/// that is not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit``,
/// one's own subclass...) raised in a handler propagates as itself from the call that
/// reports the execution's error, each time that error is reported (with the handler's
/// traceback); rpjrt keeps the 1024 most recent such exceptions for that (only the 64 most
/// recent with their tracebacks; an older one carries a note saying where the handler
/// raised it), and an error whose exception it no longer holds raises an ``rpjrt.Error``
/// that names the exception. A string attribute that is not UTF-8 fails
/// the call with an error naming the attribute. At interpreter exit, handlers not yet
/// started fail (``CancelledError``) without running Python.
#[pyclass(frozen, name = "FfiCall", module = "rpjrt.ffi")]
pub struct PyFfiCall {
    /// The custom call's target name.
    #[pyo3(get)]
    target: String,
    /// The argument buffers (FfiBuffer), in order.
    #[pyo3(get)]
    args: Py<PyTuple>,
    /// The result buffers (FfiBuffer), in order.
    #[pyo3(get)]
    rets: Py<PyTuple>,
    /// The custom call's attributes, by name.
    #[pyo3(get)]
    attrs: Py<PyDict>,
    /// The platform stream (a `cudaStream_t` on GPUs); 0 on the host.
    #[pyo3(get)]
    stream: usize,
    /// The `ffi_user_data` the execution was given, or None.
    #[pyo3(get)]
    user_data: Option<Py<PyAny>>,
    /// The XLA FFI API version of the runtime, (major, minor).
    #[pyo3(get)]
    runtime_version: (i32, i32),
    /// The stage the handler runs in: "instantiate", "prepare", "initialize" or "execute".
    #[pyo3(get)]
    stage: &'static str,
    /// The ordinal of the device the call runs on (None where the runtime does not say, and
    /// during the instantiate stage, which runs at compile, outside any execution).
    #[pyo3(get)]
    device_ordinal: Option<i32>,
    /// The instance's state (what the instantiate function returned); None for handlers
    /// registered without one, and during the instantiate stage itself.
    #[pyo3(get)]
    state: Option<Py<PyAny>>,
}

#[pymethods]
impl PyFfiCall {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "rpjrt.ffi.FfiCall({:?}, {} args, {} rets)",
            self.target,
            self.args.bind(py).len(),
            self.rets.bind(py).len()
        )
    }
}

fn attr_to_py<'py>(py: Python<'py>, v: &AttrValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        AttrValue::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        AttrValue::Str(s) => s.into_pyobject(py)?.into_any(),
        AttrValue::F32(x) => x.into_pyobject(py)?.into_any(),
        AttrValue::F64(x) => x.into_pyobject(py)?.into_any(),
        AttrValue::F16Bits(_) | AttrValue::BF16Bits(_) => {
            v.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
        }
        AttrValue::U64(x) => x.into_pyobject(py)?.into_any(),
        AttrValue::Array(a) => array_to_py(py, a)?.into_any(),
        AttrValue::Dict(d) => attrs_to_py(py, d)?.into_any(),
        other => match other.as_i64() {
            Some(i) => i.into_pyobject(py)?.into_any(),
            None => py.None().into_bound(py),
        },
    })
}

fn array_to_py<'py>(py: Python<'py>, a: &AttrArray) -> PyResult<Bound<'py, PyList>> {
    match a {
        AttrArray::Bool(v) => PyList::new(py, v),
        AttrArray::F32(v) => PyList::new(py, v),
        AttrArray::F64(v) => PyList::new(py, v),
        AttrArray::U64(v) => PyList::new(py, v),
        other => PyList::new(py, other.to_i64_vec().unwrap_or_default()),
    }
}

fn attrs_to_py<'py>(py: Python<'py>, a: &Attrs) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in a.iter() {
        d.set_item(k, attr_to_py(py, v)?)?;
    }
    Ok(d)
}

fn stage_name(s: ffi::Stage) -> &'static str {
    match s {
        ffi::Stage::Instantiate => "instantiate",
        ffi::Stage::Prepare => "prepare",
        ffi::Stage::Initialize => "initialize",
        ffi::Stage::Execute => "execute",
    }
}

/// `<wrapper>"target" raised ExcType: message (traceback, innermost first: ...)`, the last
/// three frames; the wrapper names the role (handler or instantiate function).
///
/// A `BaseException` that is not an `Exception` (a Ctrl-C's `KeyboardInterrupt`) raised
/// by `str()` of the exception is returned too, so that it reaches the caller as itself
/// (as one the handler raised does) rather than only as words in the text.
fn describe_exception(
    py: Python<'_>,
    e: &PyErr,
    target: &str,
    role: Role,
) -> (String, Option<PyErr>) {
    let ty = e
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    let mut raised = None;
    let msg = match e.value(py).str() {
        Ok(s) => s.to_string_lossy().into_owned(),
        Err(f) => {
            let why = f
                .value(py)
                .get_type()
                .name()
                .map_or_else(|_| "?".into(), |n| n.to_string());
            if !f.is_instance_of::<pyo3::exceptions::PyException>(py) {
                raised = Some(f);
            }
            format!("<str() of the exception raised {why}>")
        }
    };
    let mut frames = Vec::new();
    if let Some(tb) = e.traceback(py) {
        if let Ok(summary) = py
            .import("traceback")
            .and_then(|m| m.call_method1("extract_tb", (tb,)))
        {
            if let Ok(items) = summary.try_iter() {
                for f in items.flatten() {
                    let file = lossy_text(f.getattr("filename"));
                    let line: i64 = f.getattr("lineno").and_then(|x| x.extract()).unwrap_or(0);
                    let func = lossy_text(f.getattr("name"));
                    let short = file.rsplit('/').next().unwrap_or(&file).to_string();
                    frames.push(format!("{short}:{line} in {func}"));
                }
            }
        }
    }
    let tail: Vec<String> = frames.iter().rev().take(3).cloned().collect();
    let where_ = if tail.is_empty() {
        String::new()
    } else {
        format!("{TRACEBACK}{})", tail.join(" <- "))
    };
    let below = made_below(py, e, &msg);
    let text = wrap_handler_error(role.wrapper(), target, &ty, &msg, &where_, below);
    (text, raised)
}

/// A frame's file or function name as text: a name that is not valid UTF-8 (a lone
/// surrogate, as `os.fsdecode` makes of a non-UTF-8 path) keeps its other characters, each
/// such one replaced, rather than the whole name being dropped.
fn lossy_text(name: PyResult<Bound<'_, PyAny>>) -> String {
    name.ok()
        .and_then(|n| n.cast_into::<PyString>().ok())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What starts the error of a Python function rpjrt called for a custom call, by role.
const WRAPPERS: [&str; 2] = [
    "Python handler for ",
    "Python instantiate function (the instantiate stage) for ",
];
/// What starts the traceback part of such an error.
const TRACEBACK: &str = " (traceback, innermost first: ";
/// What a collapsed chain of nested handler errors says after its count.
const NESTED: &str = " nested handler errors; the innermost: ";

/// The error text of a Python function that raised `ty: msg` for `target`.
///
/// A handler (or instantiate function) that ran a program (or compiled one) whose own
/// handler failed, and let that error pass up unchanged, carries that handler's error in
/// `msg`, which may carry another's, up to 16 deep: one wrapper per level would bury the
/// cause. `below` is that error when `msg` is one rpjrt made ([`made_below`]: found
/// structurally, never by reading the text): how many handler errors it stands for, and
/// where its innermost error lies in `msg`. From two nested errors on, the text is
/// `<wrapper>"target" raised Ty from N nested handler errors; the innermost: <the innermost
/// error>`, N counting every handler error below this one (of both kinds), with the
/// innermost's own traceback and this level's. Any other message (a handler's own, however
/// many errors it quotes) is kept whole. The text made is remembered for the level above.
fn wrap_handler_error(
    wrapper: &str,
    target: &str,
    ty: &str,
    msg: &str,
    where_: &str,
    below: Option<(usize, std::ops::Range<usize>)>,
) -> String {
    let head = format!("{wrapper}{target:?} raised {ty}");
    let (text, nested, inner) = match below {
        Some((n, at)) if n > 1 => {
            let start = head.len() + format!(" from {n}{NESTED}").len();
            let inner = start..start + at.len();
            let text = format!("{head} from {n}{NESTED}{}{where_}", &msg[at]);
            (text, n + 1, inner)
        }
        Some((n, at)) => {
            let start = head.len() + 2;
            let text = format!("{head}: {msg}{where_}");
            (text, n + 1, start + at.start..start + at.end)
        }
        None => {
            let text = format!("{head}: {msg}{where_}");
            let len = text.len();
            (text, 1, 0..len)
        }
    };
    let entry = Made {
        hash: text_hash(&text),
        len: text.len(),
        nested,
        inner,
    };
    let mut made = MADE.lock().unwrap_or_else(|p| p.into_inner());
    if made.len() == MADE_KEPT {
        made.pop_front();
    }
    made.push_back(entry);
    drop(made);
    text
}

/// A handler error text rpjrt made ([`wrap_handler_error`]): its hash and length, how many
/// handler errors it stands for, and where its innermost error lies in it.
struct Made {
    hash: u64,
    len: usize,
    nested: usize,
    inner: std::ops::Range<usize>,
}

/// The most recent texts rpjrt made, newest last, at most [`MADE_KEPT`] (a nested error is
/// read by the level above right after it is made; one read later than that is kept whole).
static MADE: std::sync::Mutex<std::collections::VecDeque<Made>> =
    std::sync::Mutex::new(std::collections::VecDeque::new());
const MADE_KEPT: usize = 256;

/// A hash with this process's random keys: a text made elsewhere cannot be crafted to match.
fn text_hash(text: &str) -> u64 {
    use std::hash::BuildHasher;
    static KEYS: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    KEYS.get_or_init(Default::default).hash_one(text)
}

/// The handler error rpjrt made that the exception `e` (with message `msg`) passes up
/// unchanged: `e` is an rpjrt error, raised by the execute (or compile) whose handler
/// failed, whose message is that text after the error's own `<entry> failed with <CODE>: `
/// (and before an out-of-memory report rpjrt added, on lines of its own). Returns how many
/// handler errors it stands for and where its innermost error lies in `msg`.
fn made_below(py: Python<'_>, e: &PyErr, msg: &str) -> Option<(usize, std::ops::Range<usize>)> {
    if !crate::errors::is_rpjrt_error(py, e) {
        return None;
    }
    let v = e.value(py);
    let entry: Option<String> = v.getattr("entry").ok()?.extract().ok()?;
    let code: String = v.getattr("code").ok()?.extract().ok()?;
    let head = entry.map_or(String::new(), |en| format!("{en} failed with {code}: "));
    let rest = msg.strip_prefix(head.as_str())?;
    let reported = v.getattr("hint").is_ok_and(|h| !h.is_none());
    let made: Vec<(u64, usize, usize, std::ops::Range<usize>)> = {
        let made = MADE.lock().unwrap_or_else(|p| p.into_inner());
        let fits = |m: &&Made| {
            rest.is_char_boundary(m.len)
                && (m.len == rest.len() || (reported && rest[m.len..].starts_with('\n')))
        };
        made.iter()
            .rev()
            .filter(fits)
            .map(|m| (m.hash, m.len, m.nested, m.inner.clone()))
            .collect()
    };
    let (_, _, nested, inner) = made
        .into_iter()
        .find(|(hash, len, ..)| text_hash(&rest[..*len]) == *hash)?;
    let at = head.len() + inner.start..head.len() + inner.end;
    msg.get(at.clone()).map(|_| (nested, at))
}

/// Set by the `atexit` hook: the interpreter is finalizing, and Python handlers fail
/// without touching Python (a worker thread must never wait for the GIL then).
static FINALIZING: AtomicBool = AtomicBool::new(false);
/// Python handler calls past the `FINALIZING` check and not yet returned.
pub(crate) static IN_FLIGHT: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// Counts one handler call in flight for as long as it lives.
struct InFlight;

impl InFlight {
    /// `None` once the interpreter is finalizing.
    fn enter() -> Option<InFlight> {
        IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        let guard = InFlight;
        (!FINALIZING.load(Ordering::SeqCst)).then_some(guard)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How many Python handler calls (execute stage) may be in progress at once, process-wide;
/// more wait for a place (see [`Gate`]). The half of the CPU plugins' bound on executions in
/// flight (32 per device) that rpjrt's other nesting rules keep to.
const MAX_RUNNING_PY_HANDLERS: usize = 16;

/// The words of rpjrt's nesting refusals (`rpjrt_raw::ffi::NESTING_LIMIT`, which the core
/// does not re-export): errors carrying them are a limit, not an allocation failure, so no
/// out-of-memory report is added.
const NESTING_LIMIT: &str = "rpjrt's custom-call nesting limit";

/// How long a Python handler waits for a place when all [`MAX_RUNNING_PY_HANDLERS`] are
/// taken and none of their handlers returns, in milliseconds; set by
/// `rpjrt.ffi.set_handler_wait_limit`.
static WAIT_LIMIT_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(5000);

/// The places of the [`Gate`]: how many Python handler calls are in progress, the waiting
/// ones in arrival order (by ticket), and how many have returned so far (the waiters'
/// sign that the running handlers still make progress).
struct GateState {
    running: usize,
    queue: std::collections::VecDeque<u64>,
    next_ticket: u64,
    returned: u64,
}

static GATE: std::sync::Mutex<GateState> = std::sync::Mutex::new(GateState {
    running: 0,
    queue: std::collections::VecDeque::new(),
    next_ticket: 0,
    returned: 0,
});
static GATE_MOVED: std::sync::Condvar = std::sync::Condvar::new();

thread_local! {
    /// Python handler calls in progress on this thread (a handler nested in another
    /// through a program it executes on its own thread).
    static GATED_HERE: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// One place among the Python handler calls in progress, held for the call.
///
/// Each custom call holds one of the plugin's executions in flight while its handler runs,
/// and the CPU plugins bound those (32 per device; an execute past the bound waits inside
/// the plugin for one to finish). A handler that waits for an execution started on another
/// thread (a thread pool, a thread it joins) holds its place while that execution needs
/// one more: a chain of such handlers about 32 deep fills the bound, and the next execute
/// waits inside the plugin for ever, where no check of rpjrt's can end it. So at most
/// [`MAX_RUNNING_PY_HANDLERS`] Python handler calls are in progress at once, and the others
/// wait for a place (in arrival order, without the GIL and without any lock of ours held
/// across the plugin), which leaves the plugin slots for the executions the running ones
/// wait for. Handlers that return keep places turning over, so many threads running
/// programs whose handlers return promptly only queue briefly. When no running handler has
/// returned for the wait limit (`rpjrt.ffi.set_handler_wait_limit`, 5 s by default) while
/// one waits, the running ones are taken to wait for each other (or for work that cannot
/// start), and the waiting handler is refused with `RESOURCE_EXHAUSTED` naming rpjrt's
/// custom-call nesting limit, so the chain above it fails instead of hanging.
///
/// A handler nested on the thread of a running one (its handler executed a program whose
/// custom call runs on that thread) takes a place without waiting: the enclosing handler
/// cannot return before it, and the core bounds that nesting (16 deep on a thread, and no
/// nested execute while 16 handlers run). So does one whose execute kept the GIL (the bench
/// mode `_bench_hold_gil`), since waiting there would stop every Python thread.
struct Gate;

impl Gate {
    /// A place for a Python handler call of `target`, or the refusal of it.
    fn enter(target: &str) -> Result<Gate, FfiError> {
        let mut st = GATE.lock().unwrap_or_else(|p| p.into_inner());
        // Nested on this thread, or a free place with nobody waiting ahead (the common
        // case: no queue, and no wake-up to send, which costs a system call).
        if GATED_HERE.with(|g| g.get()) > 0
            || crate::bench::hold_gil()
            || (st.queue.is_empty() && st.running < MAX_RUNNING_PY_HANDLERS)
        {
            st.running += 1;
            GATED_HERE.with(|g| g.set(g.get() + 1));
            return Ok(Gate);
        }
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.queue.push_back(ticket);
        let mut seen = st.returned;
        let mut since = std::time::Instant::now();
        loop {
            let leave = |st: &mut GateState| {
                st.queue.retain(|&t| t != ticket);
                GATE_MOVED.notify_all();
            };
            if FINALIZING.load(Ordering::SeqCst) {
                leave(&mut st);
                return Err(shutting_down(target));
            }
            if st.running < MAX_RUNNING_PY_HANDLERS && st.queue.front() == Some(&ticket) {
                st.queue.pop_front();
                st.running += 1;
                GATED_HERE.with(|g| g.set(g.get() + 1));
                // The next in line may fit too.
                if !st.queue.is_empty() {
                    GATE_MOVED.notify_all();
                }
                return Ok(Gate);
            }
            if st.returned != seen {
                seen = st.returned;
                since = std::time::Instant::now();
            }
            let limit = std::time::Duration::from_millis(WAIT_LIMIT_MS.load(Ordering::Relaxed));
            let waited = since.elapsed();
            // Refused only while every place is taken: with one free, the waiter ahead is
            // about to take it and this one moves up.
            if waited >= limit && st.running >= MAX_RUNNING_PY_HANDLERS {
                let running = st.running;
                leave(&mut st);
                return Err(gate_refusal(target, running, limit));
            }
            let pause = limit
                .saturating_sub(waited)
                .max(std::time::Duration::from_millis(1));
            st = GATE_MOVED
                .wait_timeout(st, pause)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        GATED_HERE.with(|g| g.set(g.get().saturating_sub(1)));
        let mut st = GATE.lock().unwrap_or_else(|p| p.into_inner());
        st.running = st.running.saturating_sub(1);
        st.returned = st.returned.wrapping_add(1);
        // Only waiters need the news (a wake-up is a system call).
        if !st.queue.is_empty() {
            GATE_MOVED.notify_all();
        }
    }
}

/// The error of a handler refused by the [`Gate`].
fn gate_refusal(target: &str, running: usize, limit: std::time::Duration) -> FfiError {
    FfiError::new(
        Code::ResourceExhausted,
        format!(
            "the Python handler for {target:?} was not run ({NESTING_LIMIT}): \
             {running} Python handlers are in progress, the most rpjrt runs at once, \
             and none of them returned in the {} s this one waited for a place. Each holds one \
             of the plugin's executions in flight (the CPU plugins allow 32 per device), so \
             handlers that wait for executions started on other threads (a thread pool, a \
             thread they join) whose handlers need places too would wait for ever; refused \
             instead of hanging. Do not make a handler wait for a program run on another \
             thread more than a few levels deep (return, and run the next level outside the \
             handler), or, if the handlers are merely slow, run fewer at once or raise the \
             wait with rpjrt.ffi.set_handler_wait_limit(seconds)",
            limit.as_secs_f64()
        ),
    )
}

/// `_ffi_handler_wait_limit(seconds=None)`: sets how long a Python handler waits for a
/// place among the 16 in progress while none of them returns, before it is refused (see
/// [`Gate`]); returns the previous limit in seconds. `None` only reads it.
#[pyfunction]
#[pyo3(signature = (seconds = None))]
pub fn _ffi_handler_wait_limit(seconds: Option<f64>) -> PyResult<f64> {
    let before = WAIT_LIMIT_MS.load(Ordering::Relaxed) as f64 / 1000.0;
    if let Some(s) = seconds {
        // At least a millisecond, at most a day: the wait is measured in milliseconds.
        if !(0.001..=86_400.0).contains(&s) {
            return Err(invalid(format!(
                "the handler wait limit must be a number of seconds from 0.001 to 86400, not \
                 {s:?}"
            )));
        }
        WAIT_LIMIT_MS.store((s * 1000.0).round() as u64, Ordering::Relaxed);
        // Waiters measure against the new limit at once.
        GATE_MOVED.notify_all();
    }
    Ok(before)
}

/// The `atexit` hook: from now on Python handlers fail at once without touching Python;
/// the ones already running get the GIL (released here) and finish, for up to ten seconds.
/// Then every Python object the handler registry holds is released (see [`Held`]), and
/// the kept `BaseException`s with them, so that the interpreter's teardown finalizes the
/// modules those objects kept alive (a handler's `__globals__`: buffered files are
/// flushed, `__del__` runs).
#[pyfunction]
pub fn _ffi_finalize(py: Python<'_>) {
    FINALIZING.store(true, Ordering::SeqCst);
    // Handlers waiting for a place give up now (they see FINALIZING once woken); the lock
    // is taken so that none misses the wake-up between its check and its wait.
    drop(GATE.lock().unwrap_or_else(|p| p.into_inner()));
    GATE_MOVED.notify_all();
    py.detach_call(|| {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while IN_FLIGHT.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
    Held::release_all(py);
    let kept = std::mem::take(&mut *BASE_EXCEPTIONS.lock().unwrap_or_else(|p| p.into_inner()));
    // Dropped with the GIL held and no lock taken: a `__del__` may run here.
    drop(kept);
}

/// A Python object a registered Python handler holds: its function, its instantiate
/// function, or an instance's state. The plugin-wide registry keeps handlers for the life
/// of the process (and the runtime keeps states as long as their executables), so the exit
/// hook, after which no Python handler runs, empties every one ([`Held::release_all`]); a
/// call that starts later finds it empty and fails as "shutting down". The lock is taken
/// only to take a new reference or to take the object out, never while Python code runs.
struct Held(std::sync::Mutex<Option<Py<PyAny>>>);

/// Every `Held` made, for the exit hook, and the length at which dead entries are next
/// pruned (twice the live ones after a pruning, so pruning costs O(1) a registration).
static ALL_HELD: std::sync::Mutex<(Vec<std::sync::Weak<Held>>, usize)> =
    std::sync::Mutex::new((Vec::new(), 64));

impl Held {
    /// Holds `obj`; `None` (dropping it) once the exit hook has run.
    fn new(obj: Py<PyAny>) -> Option<Arc<Held>> {
        let held = Arc::new(Held(std::sync::Mutex::new(Some(obj))));
        {
            let mut all = ALL_HELD.lock().unwrap_or_else(|p| p.into_inner());
            let (list, prune_at) = &mut *all;
            if list.len() >= *prune_at {
                list.retain(|w| w.strong_count() > 0);
                *prune_at = (2 * list.len()).max(64);
            }
            list.push(Arc::downgrade(&held));
        }
        // Checked after the entry is listed: a hook that set FINALIZING before this read
        // either finds the entry or is seen here (both are SeqCst).
        if FINALIZING.load(Ordering::SeqCst) {
            return None;
        }
        Some(held)
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Py<PyAny>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new reference to the object; `None` once the exit hook released it.
    fn get(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.slot().as_ref().map(|o| o.clone_ref(py))
    }

    /// Empties every `Held` (the exit hook; `_py`: with the GIL held, so each object is
    /// released now). The objects are dropped after each lock is let go: dropping one may
    /// run Python code (`__del__`), which may register.
    fn release_all(_py: Python<'_>) {
        let listed = std::mem::take(&mut ALL_HELD.lock().unwrap_or_else(|p| p.into_inner()).0);
        let all: Vec<Arc<Held>> = listed.iter().filter_map(std::sync::Weak::upgrade).collect();
        for held in all {
            let obj = held.slot().take();
            drop(obj);
        }
    }
}

/// The error of a registration made after the exit hook ran.
fn finalizing_error() -> PyErr {
    crate::errors::to_py(rpjrt::Error::Pjrt {
        entry: "XLA_FFI_Handler_Register",
        code: Code::Cancelled,
        message: "a Python handler cannot be registered: the Python interpreter is shutting down"
            .to_string(),
    })
}

/// A `BaseException` that is not an `Exception` (`KeyboardInterrupt`, `SystemExit`, ...)
/// raised by a handler, kept until the error it caused reaches Python: `errors::to_py`
/// re-raises the original instead of a PJRT error.
struct KeptBase {
    id: u64,
    value: Py<PyAny>,
    /// The traceback the handler's raise gave it, which every re-raise starts from again
    /// (a re-raise appends the reader's frames to the object's `__traceback__`, which
    /// would otherwise grow with every read). `None` once let go (see [`KEPT_WHOLE`]).
    traceback: Option<Py<PyAny>>,
    target: String,
}

/// The kept exceptions, oldest first. Each failed output re-raises its exception at every
/// read, and nothing says when the last output holding the error is gone, so they are kept
/// by recency, bounded: the [`KEPT_WHOLE`] most recent whole, with their tracebacks (whose
/// frames keep the handlers' locals alive: the call and its result copies); older ones,
/// up to [`KEPT_MAX`], without their tracebacks and chained exceptions (a note on the
/// exception shows where the handler raised it); older still are let go, and their
/// errors raise a clear rpjrt error naming the exception instead (see
/// [`base_exception_in`]).
static BASE_EXCEPTIONS: std::sync::Mutex<std::collections::VecDeque<KeptBase>> =
    std::sync::Mutex::new(std::collections::VecDeque::new());
static NEXT_BASE_EXCEPTION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
const KEPT_WHOLE: usize = 64;
const KEPT_MAX: usize = 1024;
const BASE_EXCEPTION_TAG: &str = "[rpjrt: re-raised as the handler's ";
/// What starts the note on an exception whose traceback was let go.
const LET_GO_NOTE: &str = "rpjrt: raised by the Python handler for ";

/// Keeps `e`, raised by the handler (or instantiate function) for `target`, and returns
/// the tag its error message carries: `[rpjrt: re-raised as the handler's Type #id.key]`
/// (see [`tag_key`]), the type's name without `#`, `[` and `]`, so that the tag parses
/// whatever the name.
pub(crate) fn keep_base_exception(py: Python<'_>, e: &PyErr, target: &str) -> String {
    let id = NEXT_BASE_EXCEPTION.fetch_add(1, Ordering::Relaxed);
    let entry = KeptBase {
        id,
        value: e.value(py).clone().into_any().unbind(),
        traceback: e.traceback(py).map(|t| t.into_any().unbind()),
        target: target.to_string(),
    };
    let (dropped, let_go) = {
        let mut kept = BASE_EXCEPTIONS.lock().unwrap_or_else(|p| p.into_inner());
        kept.push_back(entry);
        let dropped = (kept.len() > KEPT_MAX).then(|| kept.pop_front()).flatten();
        // The one that just stopped being among the most recent KEPT_WHOLE.
        let let_go = match kept.len().checked_sub(KEPT_WHOLE + 1) {
            Some(at) => {
                let recent_has = |v: &Py<PyAny>| {
                    kept.iter()
                        .skip(at + 1)
                        .any(|k| k.value.is(v) && k.traceback.is_some())
                };
                let older = &kept[at];
                // The same object kept again since (a nested handler that let it
                // propagate) keeps its traceback there: only this entry's copy goes.
                let shared = recent_has(&older.value);
                let older = &mut kept[at];
                older
                    .traceback
                    .take()
                    .map(|tb| (older.value.clone_ref(py), tb, older.target.clone(), shared))
            }
            None => None,
        };
        (dropped, let_go)
    };
    // Python code (a `__del__` of what the traceback held) may run from here on: no lock
    // of ours is held.
    if let Some((value, tb, target, shared)) = let_go {
        if !shared {
            let_go_of_traceback(py, value.bind(py), tb.bind(py), &target);
        }
        drop(tb);
    }
    drop(dropped);
    let ty = e
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default()
        .replace(['#', '[', ']'], "_");
    format!(" {BASE_EXCEPTION_TAG}{ty} #{id}.{:016x}]", tag_key())
}

/// Lets go of a kept exception's traceback and chained exceptions (which keep the frames,
/// and so the handler's locals, alive), leaving a note that says where the handler raised
/// it (its innermost 16 frames). Best effort: an exception that refuses is left as it is.
fn let_go_of_traceback(
    py: Python<'_>,
    value: &Bound<'_, PyAny>,
    tb: &Bound<'_, PyAny>,
    target: &str,
) {
    let _ = (|| -> PyResult<()> {
        let noted = match value.getattr("__notes__") {
            Ok(notes) => notes.try_iter()?.flatten().any(|n| {
                n.extract::<String>()
                    .is_ok_and(|n| n.starts_with(LET_GO_NOTE))
            }),
            Err(_) => false,
        };
        if !noted && value.hasattr("add_note")? {
            let frames: Vec<String> = py
                .import("traceback")?
                .call_method1("format_tb", (tb, -16))?
                .extract()?;
            let mut where_ = frames.concat();
            if where_.len() > 4000 {
                let mut cut = where_.len() - 4000;
                while !where_.is_char_boundary(cut) {
                    cut += 1;
                }
                where_ = format!("  ...\n{}", &where_[cut..]);
            }
            value.call_method1(
                "add_note",
                (format!(
                    "{LET_GO_NOTE}{target:?}; its traceback and chained exceptions were let \
                     go to bound memory (rpjrt keeps them for the {KEPT_WHOLE} most recent \
                     such exceptions). The handler raised it here:\n{}",
                    where_.trim_end()
                ),),
            )?;
        }
        value.setattr("__traceback__", py.None())?;
        value.setattr("__cause__", py.None())?;
        value.setattr("__context__", py.None())
    })();
}

/// The tag of a kept exception in `message` (the last one: the outermost handler's):
/// where it starts and ends, the type's name it gives, and the id.
fn base_exception_tag(message: &str) -> Option<(usize, usize, &str, u64)> {
    let at = message.rfind(BASE_EXCEPTION_TAG)?;
    let rest = &message[at + BASE_EXCEPTION_TAG.len()..];
    let close = rest.find(']')?;
    let (ty, id) = rest[..close].rsplit_once(" #")?;
    let (id, key) = id.split_once('.')?;
    if u64::from_str_radix(key, 16).ok()? != tag_key() {
        return None;
    }
    let id = id.parse().ok()?;
    Some((at, at + BASE_EXCEPTION_TAG.len() + close + 1, ty, id))
}

/// A random number of this process that every tag carries: text that looks like a tag in a
/// message of the handler's own (an ordinary exception's) is not taken for one. A real
/// tag's text does not reach Python through rpjrt's exceptions (its error is raised as the
/// exception, or, once that is let go, as a message without the tag).
fn tag_key() -> u64 {
    static KEY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *KEY.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        // A hasher with the process's random keys: its empty hash is random too.
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    })
}

/// The Python exception for an error whose `message` carries the tag of a handler's
/// `BaseException`: the original itself, its traceback reset to the handler's (each read
/// raises it as if first raised there, plus the reader's frames); or, for one that was let
/// go, an rpjrt error with the same code that says so, without the tag.
pub fn base_exception_in(py: Python<'_>, message: &str) -> Option<PyErr> {
    let (start, end, ty, id) = base_exception_tag(message)?;
    let found = BASE_EXCEPTIONS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .find(|k| k.id == id)
        .map(|k| {
            (
                k.value.clone_ref(py),
                k.traceback.as_ref().map(|t| t.clone_ref(py)),
            )
        });
    if let Some((value, tb)) = found {
        let value = value.into_bound(py);
        // Set before the PyErr is made: it takes the traceback from the object.
        let tb = tb.unwrap_or_else(|| py.None());
        let _ = value.setattr("__traceback__", tb);
        return Some(PyErr::from_value(value));
    }
    // An id never handed out is text that looks like a tag, not one.
    if id >= NEXT_BASE_EXCEPTION.load(Ordering::Relaxed) {
        return None;
    }
    let text = format!(
        "{}(the handler raised {ty}, which rpjrt no longer holds to raise as itself: it \
         keeps the {KEPT_MAX} most recent BaseExceptions that handlers raised, and more were \
         raised before this error was read){}",
        &message[..start],
        &message[end..]
    );
    // The code and entry that `errors::to_py` would take from the error, read back from
    // its text, `<entry> failed with <CODE>: ...` (a handler's error as the plugin reports
    // it); UNKNOWN (a BaseException's code) otherwise.
    let (entry, code) = message
        .split_once(" failed with ")
        .filter(|(entry, _)| {
            entry.starts_with("PJRT_")
                && entry.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
        .and_then(|(entry, rest)| {
            let code = Code::from_name(rest.split(':').next()?).ok()?;
            Some((Some(entry), code))
        })
        .unwrap_or((None, Code::Unknown));
    let kind = if entry.is_some() { "Pjrt" } else { "Other" };
    Some(crate::errors::make_err(py, code.name(), kind, text, entry))
}

/// How a handler may use a buffer of its frame.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    /// An argument: its views copy its values.
    Read,
    /// A result: its views start zeroed and are copied into it when the handler returns.
    Write,
    /// A result that aliases an argument: its views start with the argument's values.
    InPlace,
}

// One argument per fact of the frame's buffer (Arg and Ret share no trait to take).
#[allow(clippy::too_many_arguments)]
fn ffi_buffer(
    b_dims: &[i64],
    element_type: Option<ElementType>,
    ffi_dtype: i32,
    nbytes: usize,
    data: usize,
    host: bool,
    access: Access,
    valid: &Arc<AtomicBool>,
) -> PyFfiBuffer {
    PyFfiBuffer {
        shape: b_dims.to_vec(),
        element_type,
        ffi_dtype,
        nbytes,
        data,
        host,
        writable: access != Access::Read,
        in_place: access == Access::InPlace,
        valid: valid.clone(),
        staging: pyo3::sync::PyOnceLock::new(),
    }
}

/// Writes a handler's return value into the results: one array-like for a single result,
/// or a tuple/list with one per result; each must have the result's shape and dtype.
///
/// The values are read as they were when the handler returned, as if all were read before
/// any result was written: a value may be a view of a result's copy (`call.rets[k]`, its
/// `to_numpy()`, `memoryview()`), and writing an earlier result would change it
/// (`return (rets[1], rets[0])` swaps, `return (x * 2, r0)` gives `r0`'s values as they
/// were). So every value is converted first, and one whose memory overlaps the copy of a
/// result written before it is copied before anything is written; other values are not
/// copied.
fn write_returned(
    py: Python<'_>,
    target: &str,
    value: &Bound<'_, PyAny>,
    rets: &Bound<'_, PyTuple>,
) -> PyResult<()> {
    let values: Vec<Bound<'_, PyAny>> = if rets.len() == 1
        && !(value.is_instance_of::<PyTuple>() || value.is_instance_of::<PyList>())
    {
        vec![value.clone()]
    } else if value.is_instance_of::<PyTuple>() || value.is_instance_of::<PyList>() {
        value.try_iter()?.collect::<PyResult<Vec<_>>>()?
    } else {
        return Err(invalid(format!(
            "the Python handler for {target:?} returned a {}; return None (after writing \
             call.rets), or one array per result ({} here)",
            value.get_type().name()?,
            rets.len()
        )));
    };
    if values.len() != rets.len() {
        // A list or tuple is one value per result, also for a single result: a plain list
        // of numbers given for one array result reads as that many results.
        let one_array = if rets.len() == 1 {
            "; for the one array result, return a numpy array (np.asarray(the_list, \
             dtype=...)) rather than a plain list"
        } else {
            ""
        };
        return Err(invalid(format!(
            "the Python handler for {target:?} returned {} values (a {}, which is taken as \
             one value per result), but the custom call has {} result{}{one_array}",
            values.len(),
            value.get_type().name()?,
            rets.len(),
            if rets.len() == 1 { "" } else { "s" }
        )));
    }
    let np = py.import("numpy")?;
    let rets: Vec<Bound<'_, PyFfiBuffer>> = rets
        .iter()
        .map(|r| r.cast_into::<PyFfiBuffer>().map_err(PyErr::from))
        .collect::<PyResult<_>>()?;
    // Every value as an array (None for a token result's place), before anything is
    // written: converting a value (`__array__`) runs Python code that may read results.
    let mut arrays: Vec<Option<Bound<'_, PyAny>>> = Vec::with_capacity(values.len());
    for (i, (v, r)) in values.iter().zip(&rets).enumerate() {
        if r.get().element_type == Some(ElementType::Token) {
            // A token result holds no data: its place in the tuple takes None.
            if v.is_none() {
                arrays.push(None);
                continue;
            }
            return Err(invalid(format!(
                "the Python handler for {target:?} returned a {} for result {i}, which is a \
                 token (it holds no data): give None in its place",
                v.get_type().name()?
            )));
        }
        // An object that is not an array is read through its `__array__` here, so that
        // what that gives is checked too (numpy's `asarray` would drop a mask).
        let ndarray = np.getattr("ndarray")?;
        let is_array = v.is_instance(&ndarray)?;
        if !is_array {
            refuse_asynchronous(py, target, &format!(" for result {i}"), v)?;
        }
        let v = match !is_array && v.hasattr("__array__")? {
            true => v.call_method0("__array__")?,
            false => v.clone(),
        };
        // A masked array's mask would be lost and its masked values written as data, as
        // `put` refuses (the one check, for sub-byte results too).
        crate::put::refuse_masked(&v).map_err(|e| {
            invalid(format!(
                "the Python handler for {target:?} returned a numpy masked array for result \
                 {i}: {}",
                e.value(py)
            ))
        })?;
        arrays.push(Some(np.call_method1("asarray", (v,))?));
    }
    // The results whose copies exist now, which a value can view (the handler viewed
    // them, or a value converted was one of them), as the byte ranges they hold, sorted
    // (distinct bytearrays: disjoint, so sorted by end too); the copies made below for
    // writing are new, and nothing else views them.
    let mut staged: Vec<(usize, usize, usize)> = rets
        .iter()
        .enumerate()
        .filter_map(|(j, r)| {
            let s = r.get().staging.get(py)?.bind(py);
            let lo = s.data() as usize;
            (s.len() > 0).then(|| (lo, lo + s.len(), j))
        })
        .collect();
    staged.sort_unstable();
    // Checked against the results, in order; a sub-byte value is packed here (a copy).
    let mut writes: Vec<Option<Written<'_>>> = Vec::with_capacity(values.len());
    for (i, (arr, r)) in arrays.into_iter().zip(&rets).enumerate() {
        let Some(arr) = arr else {
            writes.push(None);
            continue;
        };
        if let Some(t) = r.get().element_type.filter(|t| t.is_sub_byte()) {
            writes.push(Some(Written::Packed(pack_sub_byte(
                py,
                target,
                i,
                &arr,
                r.get(),
                t,
            )?)));
            continue;
        }
        let view = r.get().to_numpy(py)?;
        let (want_shape, got_shape) = (view.getattr("shape")?, arr.getattr("shape")?);
        let (want_dtype, got_dtype) = (view.getattr("dtype")?, arr.getattr("dtype")?);
        if !want_shape.eq(&got_shape)? || !want_dtype.eq(&got_dtype)? {
            return Err(invalid(format!(
                "the Python handler for {target:?} returned {} {} for result {i}, which is {} \
                 {}",
                got_dtype.str()?,
                got_shape.str()?,
                want_dtype.str()?,
                want_shape.str()?
            )));
        }
        // Overlapping the copy of a result written before it: copied now, while it still
        // holds what the handler returned. (Overlapping its own result's copy is fine:
        // np.copyto handles overlap.) Two binary searches among the sorted copies, so
        // returning many results costs O(n log n), not a check per pair; an array over
        // more than two copies (strided across them) is simply copied.
        let mut arr = arr;
        if let Some((lo, hi)) = array_extent(&arr)? {
            let first = staged.partition_point(|s| s.1 <= lo);
            let over = &staged[first..staged.partition_point(|s| s.0 < hi).max(first)];
            if over.len() > 2 || over.iter().any(|s| s.2 < i) {
                arr = arr.call_method0("copy")?;
            }
        }
        writes.push(Some(Written::Dense { view, arr }));
    }
    for (w, r) in writes.into_iter().zip(&rets) {
        match w {
            None => {}
            Some(Written::Dense { view, arr }) => {
                np.call_method1("copyto", (view, arr))?;
            }
            Some(Written::Packed(packed)) => {
                let mv = r.get().memoryview(py)?;
                mv.set_item(
                    pyo3::types::PySlice::full(py),
                    pyo3::types::PyBytes::new(py, &packed),
                )?;
            }
        }
    }
    Ok(())
}

/// The bytes a numpy array's elements lie in, `[lo, hi)`; `None` when it has none.
fn array_extent(arr: &Bound<'_, PyAny>) -> PyResult<Option<(usize, usize)>> {
    let (addr, _): (usize, bool) = arr
        .getattr("__array_interface__")?
        .get_item("data")?
        .extract()?;
    let shape: Vec<i64> = arr.getattr("shape")?.extract()?;
    let strides: Vec<i64> = arr.getattr("strides")?.extract()?;
    let itemsize: usize = arr.getattr("itemsize")?.extract()?;
    let at = |off: i128| usize::try_from(addr as i128 + off).unwrap_or(0);
    Ok(rpjrt::host::extent(&shape, &strides, itemsize)
        .pyerr()?
        .map(|(lo, hi)| (at(lo), at(hi))))
}

/// What [`write_returned`] writes into one result: an array into the result's view, or a
/// sub-byte result's packed bytes.
enum Written<'py> {
    Dense {
        view: Bound<'py, PyAny>,
        arr: Bound<'py, PyAny>,
    },
    Packed(Vec<u8>),
}

/// A handler's returned array for a sub-byte result (int4, uint4, int2, uint2...), packed:
/// numpy (ml_dtypes) holds one element per byte, the result packs them (low bits first, as
/// `rpjrt::pack_sub_byte`). The array must have the result's exact shape and dtype, and
/// each byte must hold a value of the type (ml_dtypes keeps the type's bits in the low
/// bits and zeros above; a byte with other bits set, as `.view()` of wider data makes, is
/// refused rather than cut down to the type's bits).
fn pack_sub_byte(
    py: Python<'_>,
    target: &str,
    i: usize,
    arr: &Bound<'_, PyAny>,
    r: &PyFfiBuffer,
    t: ElementType,
) -> PyResult<Vec<u8>> {
    let np = py.import("numpy")?;
    let want_dtype = dtype_obj(py, t)?;
    let got_dtype = arr.getattr("dtype")?;
    let got_shape: Vec<i64> = arr.getattr("shape")?.extract()?;
    if got_shape != r.shape || !want_dtype.eq(&got_dtype)? {
        return Err(invalid(format!(
            "the Python handler for {target:?} returned {} {} for result {i}, which is {} {}",
            got_dtype.str()?,
            arr.getattr("shape")?.str()?,
            want_dtype.str()?,
            PyTuple::new(py, &r.shape)?.str()?
        )));
    }
    let bytes: Vec<u8> = np
        .call_method1("ascontiguousarray", (arr,))?
        .call_method1("view", (np.getattr("uint8")?,))?
        .call_method0("tobytes")?
        .extract()?;
    let bits = t.storage_bits();
    if let Some((k, b)) = bytes.iter().enumerate().find(|(_, &b)| b >> bits != 0) {
        return Err(invalid(format!(
            "the Python handler for {target:?} returned a {t} array for result {i} whose \
             element {k} (in C order) is stored as byte {b:#04x}, which is outside {t}'s {bits} \
             bits (an array made by .view() of wider data?); rpjrt refuses it rather than cut \
             it to {bits} bits: make the array with .astype({want})",
            want = want_dtype.str()?
        )));
    }
    let packed = rpjrt::try_pack_sub_byte(t, &bytes).pyerr()?;
    if packed.len() != r.nbytes {
        return Err(invalid(format!(
            "result {i} of the custom call {target:?} ({t} {:?}) holds {} bytes, but its {} \
             elements pack into {} bytes",
            r.shape,
            r.nbytes,
            bytes.len(),
            packed.len()
        )));
    }
    Ok(packed)
}

fn shutting_down(target: &str) -> FfiError {
    FfiError::new(
        Code::Cancelled,
        format!(
            "the Python handler for {target:?} was not run: the Python interpreter is shutting \
             down"
        ),
    )
}

/// What a Python function is called for: the execute stage (its return value and what it
/// wrote into the result views become the results) or the instantiate stage (its return
/// value is the instance's state).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Execute,
    Instantiate,
}

impl Role {
    /// What starts the error of a function called in this role (one of [`WRAPPERS`]).
    fn wrapper(self) -> &'static str {
        match self {
            Role::Execute => WRAPPERS[0],
            Role::Instantiate => WRAPPERS[1],
        }
    }
}

/// Calls `func` with an `FfiCall` for this frame (taking the GIL for the call only) and
/// maps its exception to the call's error. `state` is the instance's state for handlers
/// registered with an instantiate function. In the instantiate role, what `func` returned
/// (the instance's state), held so that the exit hook releases it.
fn call_python(
    call: &mut CallFrame<'_>,
    func: &Held,
    state: Option<&Held>,
    role: Role,
) -> Result<Option<Arc<Held>>, FfiError> {
    let Some(_in_flight) = InFlight::enter() else {
        return Err(shutting_down(call.target()));
    };
    let target = call.target().to_string();
    // A place among the Python handlers in progress (see `Gate`), taken without the GIL;
    // the instantiate stage runs in a compile, which holds no execution in flight.
    let _place = match role {
        Role::Execute => Some(Gate::enter(&target)?),
        Role::Instantiate => None,
    };
    // Python's floats are IEEE: the handler's code (and the attributes' conversion to
    // Python floats) must not run under the runtime's flush-to-zero mode, where
    // `1e-310 * 1.0` is 0 and a subnormal f32 attribute reads as 0.
    // `try_attach` gives up (instead of waiting or panicking) once the interpreter is
    // finalizing.
    ffi::with_ieee_subnormals(|| {
        Python::try_attach(|py| {
            // New references, taken with the GIL held: the exit hook may release the held
            // ones (with the GIL held too) once this call has them, and these keep the
            // objects alive until the call is over. Released already: the interpreter is
            // finalizing, and nothing of Python runs.
            let Some(func) = func.get(py) else {
                return Err(shutting_down(&target));
            };
            let state = match state.map(|s| s.get(py)) {
                Some(None) => return Err(shutting_down(&target)),
                Some(Some(s)) => Some(s),
                None => None,
            };
            let valid = Arc::new(AtomicBool::new(true));
            let build = |py: Python<'_>, call: &mut CallFrame<'_>| -> PyResult<Py<PyFfiCall>> {
                let mut args = Vec::with_capacity(call.args().len());
                for a in call.args() {
                    args.push(Py::new(
                        py,
                        ffi_buffer(
                            a.dims(),
                            a.element_type(),
                            a.ffi_dtype(),
                            a.nbytes(),
                            a.data_ptr(),
                            a.is_host(),
                            Access::Read,
                            &valid,
                        ),
                    )?);
                }
                let mut rets = Vec::with_capacity(call.rets().len());
                for r in call.rets().iter() {
                    rets.push(Py::new(
                        py,
                        ffi_buffer(
                            r.dims(),
                            r.element_type(),
                            r.ffi_dtype(),
                            r.nbytes(),
                            r.address(),
                            r.is_host(),
                            match r.is_in_place() {
                                true => Access::InPlace,
                                false => Access::Write,
                            },
                            &valid,
                        ),
                    )?);
                }
                let attrs = call.attrs().map_err(|e| invalid(e.message))?;
                let args = PyTuple::new(py, args)?;
                let rets = PyTuple::new(py, rets)?;
                let obj = Py::new(
                    py,
                    PyFfiCall {
                        target: target.clone(),
                        args: args.unbind(),
                        rets: rets.unbind(),
                        attrs: attrs_to_py(py, attrs)?.unbind(),
                        stream: call.stream(),
                        user_data: call.user_data::<Py<PyAny>>().map(|o| o.clone_ref(py)),
                        runtime_version: call.runtime_version(),
                        stage: stage_name(call.stage()),
                        device_ordinal: call.device_ordinal(),
                        state: state.as_ref().map(|s| s.clone_ref(py)),
                    },
                )?;
                Ok(obj)
            };
            let result = build(py, call).and_then(|obj| {
                let rets = obj.get().rets.clone_ref(py);
                let rets = rets.bind(py);
                // The handler's code may release the GIL (see `detach::calling_python`);
                // a process it forks ends as it returns there (`end_if_forked_here`).
                let generation = rpjrt::fork_generation();
                crate::detach::mark_rpjrt_thread();
                let value = crate::detach::calling_python(py, || func.bind(py).call1((obj,)));
                crate::detach::end_if_forked_here(py, generation);
                let value = value?;
                if role == Role::Instantiate {
                    return Ok(Some(value.unbind()));
                }
                if !value.is_none() {
                    // Whatever the number of results (none too): a coroutine is named, and
                    // closed so that Python does not warn it was never awaited.
                    let kind = value.get_type().name()?;
                    if matches!(
                        kind.to_str()?,
                        "coroutine" | "generator" | "async_generator"
                    ) {
                        refuse_asynchronous(py, &target, "", &value)?;
                    }
                    write_returned(py, &target, &value, rets)?;
                }
                // What the handler wrote into its result views becomes the results. A
                // result it neither viewed nor returned is left untouched here, so the
                // core's rule applies to it (`Ret::host_bytes_mut`): zeros, as its view would
                // have started, or the argument's values for one that aliases an argument.
                for (r, out) in rets.iter().zip(call.rets().iter_mut()) {
                    let r = r.cast_into::<PyFfiBuffer>()?;
                    let Some(stage) = r.get().staging.get(py) else {
                        continue;
                    };
                    let Some(dst) = out.host_bytes_mut() else {
                        continue;
                    };
                    let stage = stage.bind(py);
                    // SAFETY: the GIL is held and no Python code runs while the
                    // bytearray's bytes are borrowed for this copy.
                    let src = unsafe { stage.as_bytes() };
                    if src.len() != dst.len() {
                        return Err(invalid(format!(
                            "result copy of {} bytes for a {}-byte result",
                            src.len(),
                            dst.len()
                        )));
                    }
                    copy_result(r.get().element_type, src, dst);
                }
                Ok(None)
            });
            valid.store(false, Ordering::Release);
            let state = result.map_err(|e| {
                let (mut message, raised) = describe_exception(py, &e, &target, role);
                // The handler's own BaseException, else one raised while describing it.
                let base = match e.is_instance_of::<pyo3::exceptions::PyException>(py) {
                    true => raised.as_ref(),
                    false => Some(&e),
                };
                if let Some(b) = base {
                    message.push_str(&keep_base_exception(py, b, &target));
                }
                FfiError::new(
                    crate::errors::code_of_exception(py, base.unwrap_or(&e)),
                    message,
                )
            })?;
            // The instance's state, held before the GIL is let go: the exit hook (which
            // runs with the GIL) has either released everything already, and this is
            // refused, or has not yet, and will release this too.
            match state {
                Some(state) => Held::new(state)
                    .map(Some)
                    .ok_or_else(|| shutting_down(&target)),
                None => Ok(None),
            }
        })
    })
    .unwrap_or_else(|| Err(shutting_down(&target)))
}

/// Refuses a coroutine, generator or async generator returned (`place`: for which result,
/// or empty for the whole return value) by an `async def` or generator handler that
/// registration could not see as one (a lambda calling one), closing it so that Python
/// does not warn that it was never awaited. Read as an array, it would be a 0-d object
/// array, and the refusal would name only that. Other awaitables (an rpjrt Buffer) are
/// array-likes like any other.
fn refuse_asynchronous(
    py: Python<'_>,
    target: &str,
    place: &str,
    v: &Bound<'_, PyAny>,
) -> PyResult<()> {
    // Coroutines and generators only: an object that is also awaitable (an rpjrt Buffer,
    // an asyncio Future) is an array-like like any other here.
    let inspect = py.import("inspect")?;
    let kinds = [
        ("isgenerator", "a generator"),
        ("isasyncgen", "an async generator"),
        ("iscoroutine", "a coroutine (is it an async def function?)"),
    ];
    for (test, what) in kinds {
        if inspect.call_method1(test, (v,))?.is_truthy()? {
            if v.hasattr("close")? {
                // Whatever closing raises is beside the point of the refusal.
                let _ = v.call_method0("close");
            }
            return Err(invalid(format!(
                "the Python handler for {target:?} returned {what}{place}: handlers run \
                 synchronously on the plugin's thread, so return the result itself (run \
                 asynchronous work before the call, or block on it inside the handler)"
            )));
        }
    }
    Ok(())
}

/// Copies a result's staged bytes (what the handler returned or wrote into its views, or
/// through `data`) into the result's memory. A bool result is normalised as rpjrt's put
/// normalises bool bytes (`rpjrt::host`: nonzero is true): each byte becomes 0 or 1, so an
/// array made by `.view(np.bool_)` of wider data, or bytes written through `memoryview()`,
/// never leave an `i1` byte other than 0 and 1 for later ops to misread.
fn copy_result(element_type: Option<ElementType>, src: &[u8], dst: &mut [u8]) {
    if element_type == Some(ElementType::Pred) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = u8::from(s != 0);
        }
    } else {
        dst.copy_from_slice(src);
    }
}

fn python_handler(func: Arc<Held>) -> Arc<HandlerFn> {
    Arc::new(move |call: &mut CallFrame<'_>| -> Result<(), FfiError> {
        call_python(call, &func, None, Role::Execute).map(|_| ())
    })
}

/// The plugin of a Client or Plugin, and the client if it is one.
fn plugin_of(target: &Bound<'_, PyAny>) -> PyResult<(rpjrt::Plugin, Option<rpjrt::Client>)> {
    if let Ok(c) = target.cast::<PyClient>() {
        let c: &rpjrt::Client = &c.get().inner;
        return Ok((c.plugin().clone(), Some(c.clone())));
    }
    if let Ok(p) = target.cast::<PyPlugin>() {
        return Ok((p.get().inner.clone(), None));
    }
    Err(invalid(format!(
        "expected an rpjrt.Client or rpjrt.Plugin, got {}",
        target.get_type().name()?
    )))
}

/// The plugin of a Client or Plugin and the platform to register for: `platform` if given,
/// else the core's rule (`ffi::platform_or_default`).
fn resolve(target: &Bound<'_, PyAny>, platform: Option<&str>) -> PyResult<(rpjrt::Plugin, String)> {
    let (plugin, client) = plugin_of(target)?;
    let platform = ffi::platform_or_default(platform, client.as_ref()).pyerr()?;
    Ok((plugin, platform))
}

fn registration_tuple(r: ffi::Registration) -> (String, String, (i32, i32), (i32, i32)) {
    (r.target, r.platform, r.runtime_version, r.handler_version)
}

type RegTuple = (String, String, (i32, i32), (i32, i32));

/// Registers a Python callable as the handler of `name`; with `instantiate`, a handler
/// with per-instance state (`ffi::register_with_state_on`): `instantiate(call)` runs once
/// per compiled custom call and its return value is `call.state` at every execution.
#[pyfunction]
#[pyo3(signature = (target, name, func, platform = None, replace = false, instantiate = None))]
pub fn _ffi_register_python(
    py: Python<'_>,
    target: &Bound<'_, PyAny>,
    name: &str,
    func: Py<PyAny>,
    platform: Option<String>,
    replace: bool,
    instantiate: Option<Py<PyAny>>,
) -> PyResult<RegTuple> {
    if !func.bind(py).is_callable() {
        return Err(invalid("the FFI handler must be callable"));
    }
    let (plugin, platform) = resolve(target, platform.as_deref())?;
    let Some(instantiate) = instantiate.filter(|f| !f.is_none(py)) else {
        let handler = python_handler(Held::new(func).ok_or_else(finalizing_error)?);
        return py
            .detach_call(|| ffi::register_on(&plugin, &platform, name, replace, handler))
            .pyerr()
            .map(registration_tuple);
    };
    if !instantiate.bind(py).is_callable() {
        return Err(invalid(format!(
            "instantiate for {name:?} must be callable, not {}",
            instantiate.bind(py).get_type().name()?
        )));
    }
    let func = Held::new(func).ok_or_else(finalizing_error)?;
    let instantiate = Held::new(instantiate).ok_or_else(finalizing_error)?;
    // The state is a Python object owned by the runtime's instance: it is released (its
    // reference dropped) when the executable holding the instance is destroyed, or by the
    // exit hook.
    let make = move |call: &mut CallFrame<'_>| -> Result<StateObject, FfiError> {
        call_python(call, &instantiate, None, Role::Instantiate)?
            .map(StateObject)
            .ok_or_else(|| FfiError::internal("the instantiate function returned no state"))
    };
    let run = move |call: &mut CallFrame<'_>, state: &StateObject| -> Result<(), FfiError> {
        call_python(call, &func, Some(&state.0), Role::Execute).map(|_| ())
    };
    py.detach_call(|| ffi::register_with_state_on(&plugin, &platform, name, replace, make, run))
        .pyerr()
        .map(registration_tuple)
}

/// The state of one instance of a stateful Python handler. Dropped by the runtime's state
/// deleter when the executable goes; without the GIL, pyo3 defers the decref until the
/// interpreter is next entered. The exit hook releases the object before that.
struct StateObject(Arc<Held>);

/// Registers native handler code: a PyCapsule (jax.ffi convention) or an address.
#[pyfunction]
#[pyo3(signature = (target, name, handler, platform = None, replace = false))]
pub fn _ffi_register_native(
    py: Python<'_>,
    target: &Bound<'_, PyAny>,
    name: &str,
    handler: &Bound<'_, PyAny>,
    platform: Option<String>,
    replace: bool,
) -> PyResult<RegTuple> {
    let (plugin, platform) = resolve(target, platform.as_deref())?;
    let address: usize = if let Ok(cap) = handler.cast::<PyCapsule>() {
        let name = cap.name()?;
        // SAFETY: reading the capsule's pointer with its own name, as PyCapsule_GetPointer
        // requires; the name pointer stays valid while the capsule lives (we hold it).
        let cname = name.map(|n| unsafe { n.as_cstr() });
        cap.pointer_checked(cname)?.as_ptr() as usize
    } else if let Some(a) = handler.extract::<usize>().or_none()? {
        a
    } else {
        return Err(invalid(
            "a native FFI handler must be a PyCapsule holding an XLA_FFI_Handler pointer, or \
             its address as an int",
        ));
    };
    if address == 0 {
        return Err(invalid(format!("the handler address for {name:?} is null")));
    }
    ffi::check_code_address(address).pyerr()?;
    // SAFETY: the CPython boundary: the caller hands us a capsule or address that, by the
    // jax.ffi.register_ffi_target convention, is an XLA_FFI_Handler in a loaded extension
    // module. Python keeps extension modules loaded for the life of the process.
    let Some(handler) = (unsafe { ffi::NativeHandler::from_address(address) }) else {
        return Err(invalid(format!("the handler address for {name:?} is null")));
    };
    let r = py.detach_call(|| ffi::register_raw_on(&plugin, &platform, name, handler, replace));
    r.pyerr().map(registration_tuple)
}

/// Removes the handler of `name` (calls then fail saying so). Returns whether one was bound.
#[pyfunction]
#[pyo3(signature = (target, name, platform = None))]
pub fn _ffi_unregister(
    target: &Bound<'_, PyAny>,
    name: &str,
    platform: Option<String>,
) -> PyResult<bool> {
    let (plugin, platform) = resolve(target, platform.as_deref())?;
    ffi::unregister(&plugin, &platform, name).pyerr()
}

/// Whether `name` has a handler.
#[pyfunction]
#[pyo3(signature = (target, name, platform = None))]
pub fn _ffi_is_registered(
    target: &Bound<'_, PyAny>,
    name: &str,
    platform: Option<String>,
) -> PyResult<bool> {
    let (plugin, platform) = resolve(target, platform.as_deref())?;
    Ok(ffi::is_registered(&plugin, &platform, name))
}

/// The plugin's XLA FFI runtime version.
#[pyfunction]
pub fn _ffi_runtime_version(py: Python<'_>, target: &Bound<'_, PyAny>) -> PyResult<(i32, i32)> {
    let (plugin, _) = plugin_of(target)?;
    py.detach_call(|| ffi::runtime_version(&plugin)).pyerr()
}

/// rpjrt's own XLA FFI version.
#[pyfunction]
pub fn _ffi_rpjrt_version() -> (i32, i32) {
    ffi::rpjrt_ffi_version()
}

/// Benchmark support: registers a Rust handler computing `y = 2·x + offset` over f32.
#[pyfunction]
pub fn _ffi_bench_register_rust(
    py: Python<'_>,
    target: &Bound<'_, PyAny>,
    name: &str,
) -> PyResult<RegTuple> {
    let (plugin, platform) = resolve(target, None)?;
    let handler: Arc<HandlerFn> = Arc::new(|call: &mut CallFrame<'_>| {
        let offset: f32 = call.attrs()?.get_as("offset")?;
        let (args, rets) = call.split();
        let x = args[0].as_slice::<f32>()?;
        for (y, x) in rets[0].as_mut_slice::<f32>()?.iter_mut().zip(x) {
            *y = 2.0 * x + offset;
        }
        Ok(())
    });
    py.detach_call(|| ffi::register_on(&plugin, &platform, name, true, handler))
        .pyerr()
        .map(registration_tuple)
}

/// An execute context carrying a Python object as user data.
pub fn user_data_context(
    client: &rpjrt::Client,
    obj: Py<PyAny>,
) -> PyResult<Arc<ffi::ExecuteContext>> {
    ffi::ExecuteContext::with_user_data(client, obj)
        .pyerr()
        .map(Arc::new)
}

/// Registers the module's functions and classes.
pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFfiBuffer>()?;
    m.add_class::<PyFfiCall>()?;
    m.add_function(wrap_pyfunction!(_ffi_register_python, m)?)?;
    m.add_function(wrap_pyfunction!(_ffi_register_native, m)?)?;
    m.add_function(wrap_pyfunction!(_ffi_unregister, m)?)?;
    m.add_function(wrap_pyfunction!(_ffi_is_registered, m)?)?;
    m.add_function(wrap_pyfunction!(_ffi_runtime_version, m)?)?;
    m.add_function(wrap_pyfunction!(_ffi_rpjrt_version, m)?)?;
    m.add_function(wrap_pyfunction!(_ffi_bench_register_rust, m)?)?;
    m.add_function(wrap_pyfunction!(_ffi_finalize, m)?)?;
    m.add_function(wrap_pyfunction!(_ffi_handler_wait_limit, m)?)?;
    // Registered at import: atexit runs hooks last-registered first, so this runs after
    // the hooks of modules imported later, still before the interpreter tears down.
    m.py()
        .import("atexit")?
        .call_method1("register", (m.getattr("_ffi_finalize")?,))?;
    Ok(())
}
