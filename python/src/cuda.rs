//! `rpjrt.cuda`: typed CUDA plugin options (rpjrt::cuda) and the CUDA driver helpers
//! (the rpjrt-cuda crate).
//! The Python-facing module is rpjrt/cuda.py.

use crate::detach::Detach;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::sync::Mutex;

use rpjrt::cuda::{Allocator, CudaOptions};
use rpjrt::Value;
use rpjrt_cuda::{
    Context, Cuda, DeviceBuffer, DevicePtr, Event, Function, KernelArg, LaunchConfig, Module,
    PinnedBuffer, Stream, StreamRef,
};

use crate::errors::{invalid, PyErrExt};

/// Checked CUDA plugin create options as a dict for `Client(..., options=...)`.
#[pyfunction]
#[pyo3(signature = (*, memory_fraction = None, preallocate = None, allocator = None, visible_devices = None))]
pub fn _cuda_options<'py>(
    py: Python<'py>,
    memory_fraction: Option<f64>,
    preallocate: Option<bool>,
    allocator: Option<String>,
    visible_devices: Option<Vec<i64>>,
) -> PyResult<Bound<'py, PyDict>> {
    let mut o = CudaOptions::new();
    if let Some(f) = memory_fraction {
        o = o.memory_fraction(f);
    }
    if let Some(p) = preallocate {
        o = o.preallocate(p);
    }
    if let Some(a) = allocator {
        o = o.allocator(a.parse::<Allocator>().pyerr()?);
    }
    if let Some(d) = visible_devices {
        o = o.visible_devices(d);
    }
    let opts = o.to_client_options().pyerr()?;
    let out = PyDict::new(py);
    for (k, v) in opts.entries() {
        match v {
            Value::String(s) => out.set_item(k, s)?,
            Value::Int64(i) => out.set_item(k, i)?,
            Value::Int64List(l) => out.set_item(k, l.clone())?,
            Value::Float(f) => out.set_item(k, f64::from(*f))?,
            Value::Bool(b) => out.set_item(k, b)?,
        }
    }
    Ok(out)
}

/// The allocator names the CUDA plugin accepts.
#[pyfunction]
pub fn _cuda_allocators() -> Vec<&'static str> {
    Allocator::ALL.iter().map(|a| a.name()).collect()
}

/// One line on the CUDA driver: loaded with version and device count, or why not.
#[pyfunction]
pub fn _cuda_driver_summary(py: Python<'_>) -> String {
    py.detach_call(rpjrt::cuda::driver_summary)
}

/// The CUDA driver library (libcuda.so.1), opened at run time.
#[pyclass(frozen, name = "CudaDriver", module = "rpjrt.cuda")]
pub struct PyCudaDriver {
    inner: Cuda,
}

#[pymethods]
impl PyCudaDriver {
    /// Opens the driver (`libcuda.so.1`, or `path`) and initialises it.
    #[staticmethod]
    #[pyo3(signature = (path = None))]
    fn load(py: Python<'_>, path: Option<std::path::PathBuf>) -> PyResult<PyCudaDriver> {
        let inner = py
            .detach_call(|| match path {
                Some(p) => Cuda::load_from(p),
                None => Cuda::load(),
            })
            .pyerr()?;
        Ok(PyCudaDriver { inner })
    }

    /// The library the driver was opened from.
    #[getter]
    fn library(&self) -> String {
        self.inner.library().to_string()
    }

    /// The driver's CUDA version, e.g. `13000` for 13.0.
    #[getter]
    fn driver_version(&self) -> PyResult<i32> {
        self.inner.driver_version().pyerr()
    }

    /// The number of CUDA devices the driver sees.
    fn device_count(&self) -> PyResult<i32> {
        self.inner.device_count().pyerr()
    }

    /// The name of device `ordinal`.
    fn device_name(&self, ordinal: i32) -> PyResult<String> {
        self.inner.device_name(ordinal).pyerr()
    }

    /// Device `ordinal`'s primary context (the one XLA uses).
    #[pyo3(signature = (ordinal = 0))]
    fn context(&self, py: Python<'_>, ordinal: i32) -> PyResult<PyCudaContext> {
        let inner = py.detach_call(|| self.inner.context(ordinal)).pyerr()?;
        Ok(PyCudaContext { inner })
    }

    fn __repr__(&self) -> String {
        format!("CudaDriver({:?})", self.inner.library())
    }
}

fn kernel_arg(kind: &str, v: &Bound<'_, PyAny>) -> PyResult<KernelArg> {
    Ok(match kind {
        "ptr" => KernelArg::Ptr(DevicePtr(v.extract()?)),
        "i32" => KernelArg::I32(v.extract()?),
        "u32" => KernelArg::U32(v.extract()?),
        "i64" => KernelArg::I64(v.extract()?),
        "u64" => KernelArg::U64(v.extract()?),
        "f32" => KernelArg::F32(v.extract()?),
        "f64" => KernelArg::F64(v.extract()?),
        other => {
            return Err(invalid(format!(
                "unknown kernel argument type {other:?}: use ptr, i32, u32, i64, u64, f32 or f64"
            )))
        }
    })
}

fn dims(name: &str, v: Vec<u32>) -> PyResult<[u32; 3]> {
    match v.as_slice() {
        [x] => Ok([*x, 1, 1]),
        [x, y] => Ok([*x, *y, 1]),
        [x, y, z] => Ok([*x, *y, *z]),
        _ => Err(invalid(format!(
            "{name} needs 1 to 3 dimensions, got {}",
            v.len()
        ))),
    }
}

/// A device's primary context (the one XLA uses).
#[pyclass(frozen, name = "CudaContext", module = "rpjrt.cuda")]
pub struct PyCudaContext {
    inner: Context,
}

#[pymethods]
impl PyCudaContext {
    /// The device ordinal of the context.
    #[getter]
    fn ordinal(&self) -> i32 {
        self.inner.ordinal()
    }

    /// Waits until every piece of work in the context is done.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach_call(|| self.inner.synchronize()).pyerr()
    }

    /// (free, total) device memory in bytes.
    fn mem_info(&self) -> PyResult<(usize, usize)> {
        self.inner.mem_info().pyerr()
    }

    /// Allocates `nbytes` of device memory.
    fn alloc(&self, nbytes: usize) -> PyResult<PyDeviceMemory> {
        Ok(PyDeviceMemory {
            inner: self.inner.alloc(nbytes).pyerr()?,
        })
    }

    /// Page-locked host memory for the asynchronous copies.
    fn alloc_pinned(&self, nbytes: usize) -> PyResult<PyPinnedMemory> {
        Ok(PyPinnedMemory {
            inner: Mutex::new(self.inner.alloc_pinned(nbytes).pyerr()?),
        })
    }

    /// Queues a copy of all of `src` (pinned) to device address `dst` on `stream`.
    #[pyo3(signature = (dst, src, stream = 0))]
    fn memcpy_htod_async(&self, dst: u64, src: &PyPinnedMemory, stream: usize) -> PyResult<()> {
        let src = src.lock();
        self.inner
            .memcpy_htod_async(DevicePtr(dst), &src, StreamRef(stream))
            .pyerr()
    }

    /// Queues a copy from device address `src` filling all of `dst` (pinned) on `stream`.
    #[pyo3(signature = (dst, src, stream = 0))]
    fn memcpy_dtoh_async(&self, dst: &PyPinnedMemory, src: u64, stream: usize) -> PyResult<()> {
        let mut dst = dst.lock();
        self.inner
            .memcpy_dtoh_async(&mut dst, DevicePtr(src), StreamRef(stream))
            .pyerr()
    }

    /// A new stream in this context.
    fn stream(&self) -> PyResult<PyCudaStream> {
        Ok(PyCudaStream {
            inner: self.inner.stream().pyerr()?,
        })
    }

    /// A new event; `timing=True` lets it measure elapsed time.
    #[pyo3(signature = (timing = false))]
    fn event(&self, timing: bool) -> PyResult<PyCudaEvent> {
        Ok(PyCudaEvent {
            inner: self.inner.event(timing).pyerr()?,
        })
    }

    /// Loads a module from PTX text.
    fn load_ptx(&self, py: Python<'_>, ptx: &str) -> PyResult<PyCudaModule> {
        let inner = py.detach_call(|| self.inner.load_ptx(ptx)).pyerr()?;
        Ok(PyCudaModule { inner })
    }

    /// Loads a module from a cubin (or fatbin) image.
    fn load_cubin(&self, py: Python<'_>, image: Vec<u8>) -> PyResult<PyCudaModule> {
        let inner = py.detach_call(|| self.inner.load_cubin(&image)).pyerr()?;
        Ok(PyCudaModule { inner })
    }

    /// Copies `data` to device address `dst` (waits for the copy).
    fn memcpy_htod(&self, py: Python<'_>, dst: u64, data: Vec<u8>) -> PyResult<()> {
        py.detach_call(|| self.inner.memcpy_htod(DevicePtr(dst), &data))
            .pyerr()
    }

    /// Copies `nbytes` from device address `src` into new bytes (waits for the copy).
    fn memcpy_dtoh<'py>(
        &self,
        py: Python<'py>,
        src: u64,
        nbytes: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let mut v = vec![0u8; nbytes];
        py.detach_call(|| self.inner.memcpy_dtoh(&mut v, DevicePtr(src)))
            .pyerr()?;
        Ok(PyBytes::new(py, &v))
    }

    /// Copies `nbytes` from device address `src` to `dst` (waits for the copy).
    fn memcpy_dtod(&self, py: Python<'_>, dst: u64, src: u64, nbytes: usize) -> PyResult<()> {
        py.detach_call(|| {
            self.inner
                .memcpy_dtod(DevicePtr(dst), DevicePtr(src), nbytes)
        })
        .pyerr()
    }

    /// Queues a copy of `nbytes` from device address `src` to `dst` on `stream`.
    #[pyo3(signature = (dst, src, nbytes, stream = 0))]
    fn memcpy_dtod_async(&self, dst: u64, src: u64, nbytes: usize, stream: usize) -> PyResult<()> {
        self.inner
            .memcpy_dtod_async(DevicePtr(dst), DevicePtr(src), nbytes, StreamRef(stream))
            .pyerr()
    }

    /// Sets `nbytes` bytes at device address `dst` to `value` (waits).
    fn memset(&self, py: Python<'_>, dst: u64, value: u8, nbytes: usize) -> PyResult<()> {
        py.detach_call(|| self.inner.memset(DevicePtr(dst), value, nbytes))
            .pyerr()
    }

    /// Queues setting `nbytes` bytes at device address `dst` to `value` on `stream`.
    #[pyo3(signature = (dst, value, nbytes, stream = 0))]
    fn memset_async(&self, dst: u64, value: u8, nbytes: usize, stream: usize) -> PyResult<()> {
        self.inner
            .memset_async(DevicePtr(dst), value, nbytes, StreamRef(stream))
            .pyerr()
    }

    /// Launches `function`; `args` are (type, value) pairs, type one of ptr, i32, u32,
    /// i64, u64, f32, f64.
    #[pyo3(signature = (function, grid, block, args, *, shared_mem = 0, stream = 0))]
    fn launch(
        &self,
        function: &PyCudaFunction,
        grid: Vec<u32>,
        block: Vec<u32>,
        args: Vec<(String, Bound<'_, PyAny>)>,
        shared_mem: u32,
        stream: usize,
    ) -> PyResult<()> {
        let args = args
            .iter()
            .map(|(k, v)| kernel_arg(k, v))
            .collect::<PyResult<Vec<_>>>()?;
        let cfg = LaunchConfig {
            grid: dims("grid", grid)?,
            block: dims("block", block)?,
            shared_mem_bytes: shared_mem,
        };
        self.inner
            .launch(&function.inner, cfg, &args, StreamRef(stream))
            .pyerr()
    }
}

/// Device memory allocated by rpjrt, freed when collected.
#[pyclass(frozen, name = "DeviceMemory", module = "rpjrt.cuda")]
pub struct PyDeviceMemory {
    inner: DeviceBuffer,
}

#[pymethods]
impl PyDeviceMemory {
    /// The device address.
    #[getter]
    fn ptr(&self) -> u64 {
        self.inner.ptr().0
    }

    /// The size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.len()
    }

    /// Copies `data` (exactly the allocation's size) into it (waits for the copy).
    fn copy_from_host(&self, py: Python<'_>, data: Vec<u8>) -> PyResult<()> {
        py.detach_call(|| self.inner.copy_from_host(&data)).pyerr()
    }

    /// The whole allocation copied to host bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let v = py.detach_call(|| self.inner.to_vec()).pyerr()?;
        Ok(PyBytes::new(py, &v))
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}

/// Page-locked host memory; it waits for its last asynchronous copy before it is read,
/// written or freed.
#[pyclass(frozen, name = "PinnedMemory", module = "rpjrt.cuda")]
pub struct PyPinnedMemory {
    inner: Mutex<PinnedBuffer>,
}

impl PyPinnedMemory {
    fn lock(&self) -> std::sync::MutexGuard<'_, PinnedBuffer> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl PyPinnedMemory {
    /// The size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.lock().len()
    }

    /// Overwrites it with `data` (exactly its size), after any copy in flight.
    fn write(&self, py: Python<'_>, data: Vec<u8>) -> PyResult<()> {
        py.detach_call(|| {
            let mut buf = self.lock();
            if data.len() != buf.len() {
                return Err(rpjrt::Error::InvalidArgument(format!(
                    "write: {} bytes given, the pinned memory holds {}",
                    data.len(),
                    buf.len()
                )));
            }
            buf.as_mut_slice()?.copy_from_slice(&data);
            Ok(())
        })
        .pyerr()
    }

    /// Its bytes, after any copy in flight.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let v = py
            .detach_call(|| self.lock().as_slice().map(|s| s.to_vec()))
            .pyerr()?;
        Ok(PyBytes::new(py, &v))
    }
}

/// A loaded module.
#[pyclass(frozen, name = "CudaModule", module = "rpjrt.cuda")]
pub struct PyCudaModule {
    inner: Module,
}

#[pymethods]
impl PyCudaModule {
    /// The kernel function `name` of the module.
    fn function(&self, name: &str) -> PyResult<PyCudaFunction> {
        Ok(PyCudaFunction {
            inner: self.inner.function(name).pyerr()?,
        })
    }
}

/// A kernel in a loaded module.
#[pyclass(frozen, name = "CudaFunction", module = "rpjrt.cuda")]
pub struct PyCudaFunction {
    inner: Function,
}

#[pymethods]
impl PyCudaFunction {
    /// The function's name.
    #[getter]
    fn name(&self) -> String {
        self.inner.name().to_string()
    }
}

/// A stream created by rpjrt.
#[pyclass(frozen, name = "CudaStream", module = "rpjrt.cuda")]
pub struct PyCudaStream {
    inner: Stream,
}

#[pymethods]
impl PyCudaStream {
    /// The raw CUstream handle.
    #[getter]
    fn handle(&self) -> usize {
        self.inner.handle().0
    }

    /// Waits until the work queued on the stream is done.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach_call(|| self.inner.synchronize()).pyerr()
    }

    /// Makes later work on the stream wait for `event`.
    fn wait_event(&self, event: &PyCudaEvent) -> PyResult<()> {
        self.inner.wait_event(&event.inner).pyerr()
    }
}

/// A CUDA event.
#[pyclass(frozen, name = "CudaEvent", module = "rpjrt.cuda")]
pub struct PyCudaEvent {
    inner: Event,
}

#[pymethods]
impl PyCudaEvent {
    /// Records the event on `stream` (0: the default stream).
    #[pyo3(signature = (stream = 0))]
    fn record(&self, stream: usize) -> PyResult<()> {
        self.inner.record(StreamRef(stream)).pyerr()
    }

    /// Waits until the event has completed.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach_call(|| self.inner.synchronize()).pyerr()
    }

    /// Milliseconds between the `start` event and this one (both recorded with timing).
    fn elapsed_ms(&self, start: &PyCudaEvent) -> PyResult<f32> {
        self.inner.elapsed_ms(&start.inner).pyerr()
    }
}

/// Registers the classes and functions on the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_cuda_options, m)?)?;
    m.add_function(wrap_pyfunction!(_cuda_allocators, m)?)?;
    m.add_function(wrap_pyfunction!(_cuda_driver_summary, m)?)?;
    m.add_class::<PyCudaDriver>()?;
    m.add_class::<PyCudaContext>()?;
    m.add_class::<PyDeviceMemory>()?;
    m.add_class::<PyPinnedMemory>()?;
    m.add_class::<PyCudaModule>()?;
    m.add_class::<PyCudaFunction>()?;
    m.add_class::<PyCudaStream>()?;
    m.add_class::<PyCudaEvent>()?;
    Ok(())
}
