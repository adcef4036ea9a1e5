//! `rpjrt.cuda`: typed CUDA plugin options (rpjrt_cuda::CudaOptions) and the CUDA driver helpers
//! (the rpjrt-cuda crate).
//! The Python-facing module is rpjrt/cuda.py.
//!
//! Every call that reaches the driver runs without the GIL (`detach_call`): a driver call
//! can block (waits, copies, module loads, a pinned buffer waiting for its last copy), and
//! other Python threads run meanwhile. Our own locks (a pinned buffer's) are only taken
//! without the GIL, so a thread that holds the GIL never waits on one. The objects' last
//! references are dropped without the GIL too (freeing memory, unloading a module or
//! destroying an event can wait for the device).

use crate::detach::Detach;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::sync::Mutex;

use rpjrt::Value;
use rpjrt_cuda::{Allocator, CudaOptions};
use rpjrt_cuda::{
    Context, Cuda, DeviceBuffer, DevicePtr, Event, Function, KernelArg, LaunchConfig, Module,
    PinnedBuffer, Stream, StreamRef,
};

use crate::errors::{invalid, PyErrExt};

/// A value dropped without the GIL (`notify::drop_detached`) when its Python object is
/// collected: freeing driver objects can wait for the device. Reads through `Deref`.
struct DropDetached<T: Send>(Option<T>);

impl<T: Send> DropDetached<T> {
    fn new(value: T) -> Self {
        DropDetached(Some(value))
    }
}

impl<T: Send> std::ops::Deref for DropDetached<T> {
    type Target = T;
    fn deref(&self) -> &T {
        match &self.0 {
            Some(v) => v,
            None => unreachable!("the value is taken only by drop"),
        }
    }
}

impl<T: Send> Drop for DropDetached<T> {
    fn drop(&mut self) {
        if let Some(v) = self.0.take() {
            crate::notify::drop_detached(v);
        }
    }
}

/// New bytes of `len` filled by `fill` (which runs with the GIL; it releases it for the
/// driver). A size no allocation can have is `InvalidArgumentError`; one the system cannot
/// give is `ResourceExhaustedError` (a `MemoryError`); both name the size. Never an abort.
fn new_bytes<'py>(
    py: Python<'py>,
    len: usize,
    what: &str,
    fill: impl FnOnce(&mut [u8]) -> PyResult<()>,
) -> PyResult<Bound<'py, PyBytes>> {
    if isize::try_from(len).is_err() {
        return Err(invalid(format!(
            "{what}: {len} bytes is more than any host allocation can hold (at most {} bytes)",
            isize::MAX
        )));
    }
    let mut filling = false;
    let made = PyBytes::new_with(py, len, |b| {
        filling = true;
        fill(b)
    });
    match made {
        Err(e) if !filling && e.is_instance_of::<pyo3::exceptions::PyMemoryError>(py) => {
            Err(rpjrt::Error::ResourceExhausted(format!(
                "{what} needs a host allocation of {len} bytes, which cannot be made"
            )))
            .pyerr()
        }
        other => other,
    }
}

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
    py.detach_call(rpjrt_cuda::driver_summary)
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
    fn driver_version(&self, py: Python<'_>) -> PyResult<i32> {
        py.detach_call(|| self.inner.driver_version()).pyerr()
    }

    /// The number of CUDA devices the driver sees.
    fn device_count(&self, py: Python<'_>) -> PyResult<i32> {
        py.detach_call(|| self.inner.device_count()).pyerr()
    }

    /// The name of device `ordinal`.
    fn device_name(&self, py: Python<'_>, ordinal: i32) -> PyResult<String> {
        py.detach_call(|| self.inner.device_name(ordinal)).pyerr()
    }

    /// Device `ordinal`'s primary context (the one XLA uses).
    #[pyo3(signature = (ordinal = 0))]
    fn context(&self, py: Python<'_>, ordinal: i32) -> PyResult<PyCudaContext> {
        let inner = py.detach_call(|| self.inner.context(ordinal)).pyerr()?;
        Ok(PyCudaContext {
            inner: DropDetached::new(inner),
        })
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
    inner: DropDetached<Context>,
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
    fn mem_info(&self, py: Python<'_>) -> PyResult<(usize, usize)> {
        py.detach_call(|| self.inner.mem_info()).pyerr()
    }

    /// Allocates `nbytes` of device memory.
    fn alloc(&self, py: Python<'_>, nbytes: usize) -> PyResult<PyDeviceMemory> {
        let inner = py.detach_call(|| self.inner.alloc(nbytes)).pyerr()?;
        Ok(PyDeviceMemory {
            inner: DropDetached::new(inner),
        })
    }

    /// Page-locked host memory for the asynchronous copies, zeroed.
    fn alloc_pinned(&self, py: Python<'_>, nbytes: usize) -> PyResult<PyPinnedMemory> {
        let inner = py.detach_call(|| self.inner.alloc_pinned(nbytes)).pyerr()?;
        Ok(PyPinnedMemory {
            nbytes,
            inner: DropDetached::new(Mutex::new(inner)),
        })
    }

    /// Queues a copy of all of `src` (pinned) to device address `dst` on `stream`.
    #[pyo3(signature = (dst, src, stream = 0))]
    fn memcpy_htod_async(
        &self,
        py: Python<'_>,
        dst: u64,
        src: &PyPinnedMemory,
        stream: usize,
    ) -> PyResult<()> {
        // Waits for `src`'s last copy: without the GIL, and its lock is taken there too.
        py.detach_call(|| {
            let src = src.lock();
            self.inner
                .memcpy_htod_async(DevicePtr(dst), &src, StreamRef(stream))
        })
        .pyerr()
    }

    /// Queues a copy from device address `src` filling all of `dst` (pinned) on `stream`.
    #[pyo3(signature = (dst, src, stream = 0))]
    fn memcpy_dtoh_async(
        &self,
        py: Python<'_>,
        dst: &PyPinnedMemory,
        src: u64,
        stream: usize,
    ) -> PyResult<()> {
        py.detach_call(|| {
            let mut dst = dst.lock();
            self.inner
                .memcpy_dtoh_async(&mut dst, DevicePtr(src), StreamRef(stream))
        })
        .pyerr()
    }

    /// A new stream in this context.
    fn stream(&self, py: Python<'_>) -> PyResult<PyCudaStream> {
        let inner = py.detach_call(|| self.inner.stream()).pyerr()?;
        Ok(PyCudaStream {
            inner: DropDetached::new(inner),
        })
    }

    /// A new event; `timing=True` lets it measure elapsed time.
    #[pyo3(signature = (timing = false))]
    fn event(&self, py: Python<'_>, timing: bool) -> PyResult<PyCudaEvent> {
        let inner = py.detach_call(|| self.inner.event(timing)).pyerr()?;
        Ok(PyCudaEvent {
            inner: DropDetached::new(inner),
        })
    }

    /// Loads a module from PTX text.
    fn load_ptx(&self, py: Python<'_>, ptx: &str) -> PyResult<PyCudaModule> {
        let inner = py.detach_call(|| self.inner.load_ptx(ptx)).pyerr()?;
        Ok(PyCudaModule {
            inner: DropDetached::new(inner),
        })
    }

    /// Loads a module from a cubin (or fatbin) image.
    fn load_cubin(&self, py: Python<'_>, image: Vec<u8>) -> PyResult<PyCudaModule> {
        let inner = py.detach_call(|| self.inner.load_cubin(&image)).pyerr()?;
        Ok(PyCudaModule {
            inner: DropDetached::new(inner),
        })
    }

    /// Copies `data` to device address `dst` (waits for the copy).
    fn memcpy_htod(&self, py: Python<'_>, dst: u64, data: Vec<u8>) -> PyResult<()> {
        py.detach_call(|| self.inner.memcpy_htod(DevicePtr(dst), &data))
            .pyerr()
    }

    /// Copies `nbytes` from device address `src` into new bytes (waits for the copy).
    /// A size the host cannot allocate raises `ResourceExhaustedError` naming it.
    fn memcpy_dtoh<'py>(
        &self,
        py: Python<'py>,
        src: u64,
        nbytes: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        new_bytes(py, nbytes, "memcpy_dtoh", |b| {
            py.detach_call(|| self.inner.memcpy_dtoh(b, DevicePtr(src)))
                .pyerr()
        })
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
    fn memcpy_dtod_async(
        &self,
        py: Python<'_>,
        dst: u64,
        src: u64,
        nbytes: usize,
        stream: usize,
    ) -> PyResult<()> {
        py.detach_call(|| {
            self.inner
                .memcpy_dtod_async(DevicePtr(dst), DevicePtr(src), nbytes, StreamRef(stream))
        })
        .pyerr()
    }

    /// Sets `nbytes` bytes at device address `dst` to `value` (waits).
    fn memset(&self, py: Python<'_>, dst: u64, value: u8, nbytes: usize) -> PyResult<()> {
        py.detach_call(|| self.inner.memset(DevicePtr(dst), value, nbytes))
            .pyerr()
    }

    /// Queues setting `nbytes` bytes at device address `dst` to `value` on `stream`.
    #[pyo3(signature = (dst, value, nbytes, stream = 0))]
    fn memset_async(
        &self,
        py: Python<'_>,
        dst: u64,
        value: u8,
        nbytes: usize,
        stream: usize,
    ) -> PyResult<()> {
        py.detach_call(|| {
            self.inner
                .memset_async(DevicePtr(dst), value, nbytes, StreamRef(stream))
        })
        .pyerr()
    }

    /// Launches `function`; `args` are (type, value) pairs, type one of ptr, i32, u32,
    /// i64, u64, f32, f64.
    #[pyo3(signature = (function, grid, block, args, *, shared_mem = 0, stream = 0))]
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        py: Python<'_>,
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
        py.detach_call(|| {
            self.inner
                .launch(&function.inner, cfg, &args, StreamRef(stream))
        })
        .pyerr()
    }
}

/// Device memory allocated by rpjrt, freed when collected.
#[pyclass(frozen, name = "DeviceMemory", module = "rpjrt.cuda")]
pub struct PyDeviceMemory {
    inner: DropDetached<DeviceBuffer>,
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

    /// The whole allocation copied to host bytes. An allocation the host cannot hold raises
    /// `ResourceExhaustedError` naming its size.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        new_bytes(py, self.inner.len(), "DeviceMemory.to_bytes", |b| {
            py.detach_call(|| self.inner.copy_to_host(b)).pyerr()
        })
    }

    fn __repr__(&self) -> String {
        format!("{:?}", *self.inner)
    }
}

/// Page-locked host memory, zeroed when allocated; it waits for its last asynchronous copy
/// before it is read, written or freed.
#[pyclass(frozen, name = "PinnedMemory", module = "rpjrt.cuda")]
pub struct PyPinnedMemory {
    /// The size, readable without the lock.
    nbytes: usize,
    inner: DropDetached<Mutex<PinnedBuffer>>,
}

impl PyPinnedMemory {
    /// The buffer, locked. Only ever called without the GIL (inside `detach_call`): the
    /// holder may be waiting for the device, and a thread holding the GIL must never wait
    /// for it.
    fn lock(&self) -> std::sync::MutexGuard<'_, PinnedBuffer> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl PyPinnedMemory {
    /// The size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
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
        new_bytes(py, self.nbytes, "PinnedMemory.to_bytes", |b| {
            py.detach_call(|| {
                let buf = self.lock();
                b.copy_from_slice(buf.as_slice()?);
                Ok(())
            })
            .pyerr()
        })
    }
}

/// A loaded module.
#[pyclass(frozen, name = "CudaModule", module = "rpjrt.cuda")]
pub struct PyCudaModule {
    inner: DropDetached<Module>,
}

#[pymethods]
impl PyCudaModule {
    /// The kernel function `name` of the module.
    fn function(&self, py: Python<'_>, name: &str) -> PyResult<PyCudaFunction> {
        let inner = py.detach_call(|| self.inner.function(name)).pyerr()?;
        Ok(PyCudaFunction {
            inner: DropDetached::new(inner),
        })
    }
}

/// A kernel in a loaded module.
#[pyclass(frozen, name = "CudaFunction", module = "rpjrt.cuda")]
pub struct PyCudaFunction {
    inner: DropDetached<Function>,
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
    inner: DropDetached<Stream>,
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
    fn wait_event(&self, py: Python<'_>, event: &PyCudaEvent) -> PyResult<()> {
        py.detach_call(|| self.inner.wait_event(&event.inner))
            .pyerr()
    }
}

/// A CUDA event.
#[pyclass(frozen, name = "CudaEvent", module = "rpjrt.cuda")]
pub struct PyCudaEvent {
    inner: DropDetached<Event>,
}

#[pymethods]
impl PyCudaEvent {
    /// Records the event on `stream` (0: the default stream).
    #[pyo3(signature = (stream = 0))]
    fn record(&self, py: Python<'_>, stream: usize) -> PyResult<()> {
        py.detach_call(|| self.inner.record(StreamRef(stream)))
            .pyerr()
    }

    /// Waits until the event has completed.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach_call(|| self.inner.synchronize()).pyerr()
    }

    /// Milliseconds between the `start` event and this one (both recorded with timing).
    fn elapsed_ms(&self, py: Python<'_>, start: &PyCudaEvent) -> PyResult<f32> {
        py.detach_call(|| self.inner.elapsed_ms(&start.inner))
            .pyerr()
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
