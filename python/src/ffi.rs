//! Custom calls (XLA FFI) from Python: handlers written in Python, and native handlers
//! given as PyCapsules or addresses. The sugar (decorator, jaxlib targets) is in
//! `rpjrt/ffi.py`.
//!
//! A Python handler runs on whatever thread the plugin calls it from; it takes the GIL only
//! for the call itself (every execute releases the GIL while the plugin runs, so a handler
//! on a plugin worker thread cannot deadlock against the caller).

use std::ffi::c_char;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyList, PyTuple};
use rpjrt::ffi::{self, AttrArray, AttrValue, Attrs, CallFrame, FfiError, HandlerFn};
use rpjrt::{Code, ElementType};

use crate::client::{PyClient, PyPlugin};
use crate::convert::dtype_obj;
use crate::errors::{invalid, PyErrExt};

/// One buffer argument or result of a custom call, valid only during the handler call.
#[pyclass(frozen, name = "FfiBuffer", module = "rpjrt.ffi")]
pub struct PyFfiBuffer {
    shape: Vec<i64>,
    element_type: Option<ElementType>,
    ffi_dtype: i32,
    nbytes: usize,
    data: usize,
    host: bool,
    writable: bool,
    valid: Arc<AtomicBool>,
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

    /// Address of the data (device memory on accelerators).
    #[getter]
    fn data(&self) -> usize {
        self.data
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

    /// A memoryview over the host bytes (writable for results). Valid during the call only.
    fn memoryview<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.check()?;
        if !self.host {
            return Err(invalid(
                "this custom-call buffer is in device memory; use .data and the stream",
            ));
        }
        let flags = if self.writable {
            0x200 // PyBUF_WRITE
        } else {
            0x100 // PyBUF_READ
        };
        let mut dummy = 0u8;
        let ptr = if self.nbytes == 0 {
            &mut dummy as *mut u8 as *mut c_char
        } else {
            self.data as *mut c_char
        };
        // SAFETY: `data` points at `nbytes` bytes of host memory that the runtime keeps
        // alive for the handler call (checked by `valid`); a zero-length view never reads
        // its pointer. The memoryview does not own the memory.
        let obj = unsafe {
            let raw = pyo3::ffi::PyMemoryView_FromMemory(ptr, self.nbytes as isize, flags);
            Bound::from_owned_ptr_or_err(py, raw)?
        };
        Ok(obj)
    }

    /// A numpy array viewing the data (no copy; valid during the call only).
    fn to_numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let mv = self.memoryview(py)?;
        let t = self
            .element_type
            .ok_or_else(|| invalid("unknown element type"))?;
        if t.byte_width().is_none() {
            return Err(invalid(format!(
                "{t} is packed below a byte; read .memoryview() and unpack it"
            )));
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

    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let a = self.to_numpy(py)?;
        let a = match dtype {
            Some(d) if !d.is_none() => a.call_method1("astype", (d,))?,
            _ => a,
        };
        if copy == Some(true) {
            return a.call_method0("copy");
        }
        Ok(a)
    }

    #[pyo3(signature = (**kwargs))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.to_numpy(py)?.call_method("__dlpack__", (), kwargs)
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

/// What a Python handler receives.
#[pyclass(frozen, name = "FfiCall", module = "rpjrt.ffi")]
pub struct PyFfiCall {
    #[pyo3(get)]
    target: String,
    #[pyo3(get)]
    args: Py<PyTuple>,
    #[pyo3(get)]
    rets: Py<PyTuple>,
    #[pyo3(get)]
    attrs: Py<PyDict>,
    #[pyo3(get)]
    stream: usize,
    #[pyo3(get)]
    user_data: Option<Py<PyAny>>,
    #[pyo3(get)]
    runtime_version: (i32, i32),
    #[pyo3(get)]
    stage: &'static str,
    #[pyo3(get)]
    device_ordinal: Option<i32>,
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

/// The status code for a Python exception: ValueError/TypeError are INVALID_ARGUMENT,
/// IndexError OUT_OF_RANGE, NotImplementedError UNIMPLEMENTED, MemoryError
/// RESOURCE_EXHAUSTED, anything else UNKNOWN.
fn exception_code(py: Python<'_>, e: &PyErr) -> Code {
    use pyo3::exceptions::{
        PyIndexError, PyMemoryError, PyNotImplementedError, PyTypeError, PyValueError,
    };
    if e.is_instance_of::<PyValueError>(py) || e.is_instance_of::<PyTypeError>(py) {
        Code::InvalidArgument
    } else if e.is_instance_of::<PyIndexError>(py) {
        Code::OutOfRange
    } else if e.is_instance_of::<PyNotImplementedError>(py) {
        Code::Unimplemented
    } else if e.is_instance_of::<PyMemoryError>(py) {
        Code::ResourceExhausted
    } else {
        Code::Unknown
    }
}

/// `ExcType: message (at file:line in func <- ...)`, the last three frames.
fn describe_exception(py: Python<'_>, e: &PyErr, target: &str) -> String {
    let ty = e
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    let msg = e.value(py).str().map(|s| s.to_string()).unwrap_or_default();
    let mut frames = Vec::new();
    if let Some(tb) = e.traceback(py) {
        if let Ok(summary) = py
            .import("traceback")
            .and_then(|m| m.call_method1("extract_tb", (tb,)))
        {
            if let Ok(items) = summary.try_iter() {
                for f in items.flatten() {
                    let file: String = f
                        .getattr("filename")
                        .and_then(|x| x.extract())
                        .unwrap_or_default();
                    let line: i64 = f.getattr("lineno").and_then(|x| x.extract()).unwrap_or(0);
                    let func: String = f
                        .getattr("name")
                        .and_then(|x| x.extract())
                        .unwrap_or_default();
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
        format!(" (traceback, innermost first: {})", tail.join(" <- "))
    };
    format!("Python handler for {target:?} raised {ty}: {msg}{where_}")
}

fn python_handler(func: Py<PyAny>) -> Arc<HandlerFn> {
    Arc::new(move |call: &mut CallFrame<'_>| -> Result<(), FfiError> {
        Python::attach(|py| {
            let valid = Arc::new(AtomicBool::new(true));
            let build = |py: Python<'_>, call: &mut CallFrame<'_>| -> PyResult<Py<PyFfiCall>> {
                let mut args = Vec::with_capacity(call.args().len());
                for a in call.args() {
                    args.push(PyFfiBuffer {
                        shape: a.dims().to_vec(),
                        element_type: a.element_type(),
                        ffi_dtype: a.ffi_dtype(),
                        nbytes: a.nbytes(),
                        data: a.data_ptr(),
                        host: a.is_host(),
                        writable: false,
                        valid: valid.clone(),
                    });
                }
                let mut rets = Vec::with_capacity(call.rets().len());
                for r in call.rets().iter() {
                    rets.push(PyFfiBuffer {
                        shape: r.dims().to_vec(),
                        element_type: r.element_type(),
                        ffi_dtype: r.ffi_dtype(),
                        nbytes: r.nbytes(),
                        data: r.data_ptr(),
                        host: r.is_host(),
                        writable: true,
                        valid: valid.clone(),
                    });
                }
                let attrs = call.attrs().map_err(|e| invalid(e.message))?;
                let args = PyTuple::new(
                    py,
                    args.into_iter()
                        .map(|b| Py::new(py, b))
                        .collect::<PyResult<Vec<_>>>()?,
                )?;
                let rets = PyTuple::new(
                    py,
                    rets.into_iter()
                        .map(|b| Py::new(py, b))
                        .collect::<PyResult<Vec<_>>>()?,
                )?;
                Py::new(
                    py,
                    PyFfiCall {
                        target: call.target().to_string(),
                        args: args.unbind(),
                        rets: rets.unbind(),
                        attrs: attrs_to_py(py, attrs)?.unbind(),
                        stream: call.stream(),
                        user_data: call.user_data::<Py<PyAny>>().map(|o| o.clone_ref(py)),
                        runtime_version: call.runtime_version(),
                        stage: stage_name(call.stage()),
                        device_ordinal: call.device_ordinal(),
                    },
                )
            };
            let result = build(py, call).and_then(|obj| func.bind(py).call1((obj,)).map(|_| ()));
            valid.store(false, Ordering::Release);
            result.map_err(|e| {
                FfiError::new(
                    exception_code(py, &e),
                    describe_exception(py, &e, call.target()),
                )
            })
        })
    })
}

/// `(plugin, default platform)` of a Client or Plugin.
fn resolve(target: &Bound<'_, PyAny>) -> PyResult<(rpjrt::Plugin, String)> {
    if let Ok(c) = target.cast::<PyClient>() {
        let c = c.get();
        return Ok((c.inner.plugin().clone(), c.platform_name().to_string()));
    }
    if let Ok(p) = target.cast::<PyPlugin>() {
        return Ok((p.get().inner.clone(), "cpu".to_string()));
    }
    Err(invalid(format!(
        "expected an rpjrt.Client or rpjrt.Plugin, got {}",
        target.get_type().name()?
    )))
}

fn registration_tuple(r: ffi::Registration) -> (String, String, (i32, i32), (i32, i32)) {
    (r.target, r.platform, r.runtime_version, r.handler_version)
}

type RegTuple = (String, String, (i32, i32), (i32, i32));

/// Registers a Python callable as the handler of `name`.
#[pyfunction]
#[pyo3(signature = (target, name, func, platform = None, replace = false))]
pub fn _ffi_register_python(
    py: Python<'_>,
    target: &Bound<'_, PyAny>,
    name: &str,
    func: Py<PyAny>,
    platform: Option<String>,
    replace: bool,
) -> PyResult<RegTuple> {
    if !func.bind(py).is_callable() {
        return Err(invalid("the FFI handler must be callable"));
    }
    let (plugin, default_platform) = resolve(target)?;
    let platform = platform.unwrap_or(default_platform);
    let handler = python_handler(func);
    py.detach(|| ffi::register_on(&plugin, &platform, name, replace, handler))
        .pyerr()
        .map(registration_tuple)
}

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
    let (plugin, default_platform) = resolve(target)?;
    let platform = platform.unwrap_or(default_platform);
    let address: usize = if let Ok(cap) = handler.cast::<PyCapsule>() {
        let name = cap.name()?;
        // SAFETY: reading the capsule's pointer with its own name, as PyCapsule_GetPointer
        // requires; the name pointer stays valid while the capsule lives (we hold it).
        let cname = name.map(|n| unsafe { n.as_cstr() });
        cap.pointer_checked(cname)?.as_ptr() as usize
    } else if let Ok(a) = handler.extract::<usize>() {
        a
    } else {
        return Err(invalid(
            "a native FFI handler must be a PyCapsule holding an XLA_FFI_Handler pointer, or \
             its address as an int",
        ));
    };
    // SAFETY: the CPython boundary: the caller hands us a capsule or address that, by the
    // jax.ffi.register_ffi_target convention, is an XLA_FFI_Handler in a loaded extension
    // module. Python keeps extension modules loaded for the life of the process.
    let Some(handler) = (unsafe { ffi::NativeHandler::from_address(address) }) else {
        return Err(invalid(format!("the handler address for {name:?} is null")));
    };
    let r = py.detach(|| ffi::register_raw_on(&plugin, &platform, name, handler, replace));
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
    let (plugin, default_platform) = resolve(target)?;
    ffi::unregister(&plugin, &platform.unwrap_or(default_platform), name).pyerr()
}

/// Whether `name` has a handler.
#[pyfunction]
#[pyo3(signature = (target, name, platform = None))]
pub fn _ffi_is_registered(
    target: &Bound<'_, PyAny>,
    name: &str,
    platform: Option<String>,
) -> PyResult<bool> {
    let (plugin, default_platform) = resolve(target)?;
    Ok(ffi::is_registered(
        &plugin,
        &platform.unwrap_or(default_platform),
        name,
    ))
}

/// The plugin's XLA FFI runtime version.
#[pyfunction]
pub fn _ffi_runtime_version(py: Python<'_>, target: &Bound<'_, PyAny>) -> PyResult<(i32, i32)> {
    let (plugin, _) = resolve(target)?;
    py.detach(|| ffi::runtime_version(&plugin)).pyerr()
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
    let (plugin, platform) = resolve(target)?;
    let handler: Arc<HandlerFn> = Arc::new(|call: &mut CallFrame<'_>| {
        let offset: f32 = call.attrs()?.get_as("offset")?;
        let (args, rets) = call.split();
        let x = args[0].as_slice::<f32>()?;
        for (y, x) in rets[0].as_mut_slice::<f32>()?.iter_mut().zip(x) {
            *y = 2.0 * x + offset;
        }
        Ok(())
    });
    py.detach(|| ffi::register_on(&plugin, &platform, name, true, handler))
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
    Ok(())
}
