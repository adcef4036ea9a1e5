//! Plugin, Client, Device, Memory.

use crate::detach::Detach;
use std::collections::BTreeMap;
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use pyo3::{PyTraverseError, PyVisit};
use rpjrt::{ClientOptions, CompileOptions, OptionOverride, Program, Value};

use crate::buffer::PyBuffer;
use crate::convert::{
    attributes_to_py, int_arg, int_like, option_items, q, sequence_items, value_from_py,
};
use crate::errors::{invalid, make_err, PyErrExt};
use crate::executable::PyExecutable;

fn discovery(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    py.import("rpjrt._discovery")
}

/// A loaded PJRT plugin library. Loading the same file twice returns the same plugin.
///
/// `Plugin(spec=None, *, timeout=None)` loads the plugin that `spec` names (a platform,
/// a plugin or wheel name, a path to the library, or a discovered `PluginInfo`). The load
/// runs on a thread of its own: Ctrl-C interrupts the wait, and after `timeout` seconds
/// (default: RPJRT_PLUGIN_TIMEOUT, else none) it raises DeadlineExceededError; a load
/// given up on goes on in the background.
#[pyclass(frozen, weakref, name = "Plugin", module = "rpjrt")]
pub struct PyPlugin {
    pub inner: rpjrt::Plugin,
    info: Py<PyAny>,
}

impl PyPlugin {
    fn load(
        py: Python<'_>,
        info: &Bound<'_, PyAny>,
        timeout: Option<std::time::Duration>,
    ) -> PyResult<PyPlugin> {
        let path: std::ffi::OsString = info.getattr("path")?.extract()?;
        let what = format!("loading plugin {}", std::path::Path::new(&path).display());
        let inner =
            crate::slow::run_abandonable(py, &what, timeout, move || rpjrt::Plugin::load(&path))?
                .pyerr()?;
        Ok(PyPlugin {
            inner,
            info: info.clone().unbind(),
        })
    }
}

#[pymethods]
impl PyPlugin {
    #[new]
    #[pyo3(signature = (spec = None, *, timeout = None))]
    fn new(
        py: Python<'_>,
        spec: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyPlugin> {
        let timeout = crate::slow::timeout_from_py(timeout)?;
        // Python code (discovery's, a path's `__fspath__`): see `detach::calling_python`.
        let found = crate::detach::calling_python(py, || {
            discovery(py)?.call_method1("candidates", (spec,))
        })?;
        let first = found.get_item(0)?;
        PyPlugin::load(py, &first, timeout)
    }

    /// The library's path (a name that is not UTF-8 keeps its bytes, as `os.fsdecode` does).
    #[getter]
    fn path(&self) -> std::ffi::OsString {
        self.inner.path().as_os_str().to_owned()
    }

    /// What discovery knew about it (source, wheel version...).
    #[getter]
    fn info(&self, py: Python<'_>) -> Py<PyAny> {
        self.info.clone_ref(py)
    }

    /// The plugin's name, as discovery found it.
    #[getter]
    fn name(&self, py: Python<'_>) -> PyResult<String> {
        self.info.bind(py).getattr("name")?.extract()
    }

    /// The PJRT C API version the plugin implements, (major, minor).
    #[getter]
    fn api_version(&self) -> (i32, i32) {
        let v = self.inner.version();
        (v.major, v.minor)
    }

    /// Number of function slots in the plugin's PJRT API table.
    #[getter]
    fn table_slots(&self) -> usize {
        self.inner.table_slots()
    }

    /// Names of the PJRT extensions the plugin offers (e.g. "FFI", "Layouts").
    #[getter]
    fn extensions(&self) -> Vec<String> {
        self.inner
            .extensions()
            .all()
            .iter()
            .map(|e| e.name.clone())
            .collect()
    }

    /// The plugin's attributes (xla_version, stablehlo_current_version, ...). A name the
    /// plugin reports more than once keeps its first value (see duplicate_attributes).
    #[getter]
    fn attributes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        attributes_to_py(py, self.inner.attributes())
    }

    /// The attributes the plugin reported again under a name it had already used, as
    /// `[(name, value)]` in its order: what `attributes` (first value wins) leaves out.
    #[getter]
    fn duplicate_attributes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let all = self.inner.attributes();
        let items = PyList::empty(py);
        for (i, (name, v)) in all.iter().enumerate() {
            if all[..i].iter().any(|(n, _)| n == name) {
                items.append((name, crate::convert::value_to_py(py, v)?))?;
            }
        }
        Ok(items)
    }

    /// The newest StableHLO version the plugin reads (its stablehlo_current_version), by
    /// the rule of stablehlo_versions(): three numbers, none negative; else None.
    ///
    /// Serialize portable artifacts for at most this version.
    #[getter]
    fn stablehlo_version(&self) -> Option<(u32, u32, u32)> {
        let list = self.inner.stablehlo_current_version()?;
        let text: Vec<String> = list.iter().map(i64::to_string).collect();
        let v: rpjrt::StablehloVersion = text.join(".").parse().ok()?;
        Some((v.major, v.minor, v.patch))
    }

    fn __repr__(&self) -> String {
        let v = self.inner.version();
        format!(
            "rpjrt.Plugin({}, pjrt={}.{})",
            q(&self.inner.path().display().to_string()),
            v.major,
            v.minor
        )
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        match other.cast::<PyPlugin>() {
            Ok(o) => o.get().inner.same(&self.inner),
            Err(_) => false,
        }
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.inner.path().hash(&mut h);
        h.finish()
    }
}

/// A PJRT client: devices, compilation, buffers. A context manager; close() is idempotent.
///
/// `Client(plugin=None, *, options=None, cache_dir=None, kv=None, process_id=None,
/// num_processes=None, timeout=None)` creates a client of `plugin` (anything `Plugin`
/// accepts, or a loaded Plugin) with the create `options`. cache_dir turns the persistent
/// compile cache on for this client (also on when RPJRT_CACHE_DIR is set). kv, process_id
/// and num_processes together make one process of a multi-process client: the plugin
/// rendezvouses through kv's set/get/try_get. Loading the plugin and creating the client
/// run on a thread of their own: Ctrl-C interrupts the wait, and after `timeout` seconds
/// (default: RPJRT_PLUGIN_TIMEOUT, else none) it raises DeadlineExceededError; a call
/// given up on goes on in the background.
#[pyclass(frozen, weakref, name = "Client", module = "rpjrt")]
pub struct PyClient {
    pub inner: crate::notify::Held<rpjrt::Client>,
    plugin: Py<PyPlugin>,
    /// The Python key-value store of a multi-process client (`kv=`), held here alone: the
    /// plugin reaches it weakly, and `close()` (or the collector) lets it go.
    kv: Mutex<Option<Py<crate::distributed::PyClientStore>>>,
    platform: String,
    /// Small buffers whose last Python reference went with the GIL held, destroyed by the
    /// next call of one of this client's executables while it has the GIL released.
    deferred: Mutex<DeferredDrops>,
}

/// How many dropped buffers a client keeps for a later destruction.
const DEFERRED_DROPS: usize = 8;

/// Buffers of at most this many bytes may wait for a later destruction; bigger ones are
/// freed at once (their memory matters more than the time).
pub const DEFERRED_DROP_BYTES: usize = rpjrt::QUICK_COPY_BYTES;

/// Dropped buffers waiting for a region without the GIL (at most `DEFERRED_DROPS`).
#[derive(Default)]
pub struct DeferredDrops {
    items: [Option<rpjrt::Buffer>; DEFERRED_DROPS],
    len: usize,
}

impl Drop for PyClient {
    fn drop(&mut self) {
        // The kept buffers may hold the last references to the C client.
        let kept = self.take_deferred();
        if let Some(inner) = self.inner.take() {
            // Counted while it runs, so that the exit hook (`_leak_at_exit`) can wait for a
            // destroy in flight, for a bounded time, and say which one it gave up on.
            DESTROYS_IN_FLIGHT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            struct Done;
            impl Drop for Done {
                fn drop(&mut self) {
                    DESTROYS_IN_FLIGHT.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
            // Dropped last of the three (a tuple drops its fields in order), without the
            // GIL: the count falls when the destroy returned, not when the GIL is back
            // (which a daemon thread at exit never gets: see `detach`).
            crate::notify::drop_detached((inner, kept, Done));
        }
    }
}

/// Client drops (`PJRT_Client_Destroy`, which may wait for the client's work) running now.
pub static DESTROYS_IN_FLIGHT: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

impl PyClient {
    /// The platform name, cached at creation.
    pub fn platform_name(&self) -> &str {
        &self.platform
    }

    /// Keeps `b` (a buffer whose Python object is being freed, with the GIL held) for
    /// destruction by a later call that releases the GIL (`take_deferred`), so that two
    /// Python threads calling executables do not destroy their outputs while holding the
    /// GIL. Gives `b` back when there is no room (or the list is busy: this never waits).
    pub fn defer_drop(&self, b: rpjrt::Buffer) -> Option<rpjrt::Buffer> {
        let Ok(mut d) = self.deferred.try_lock() else {
            return Some(b);
        };
        let i = d.len;
        match d.items.get_mut(i) {
            Some(slot) => {
                *slot = Some(b);
                d.len = i + 1;
                None
            }
            None => Some(b),
        }
    }

    /// The buffers `defer_drop` kept, for the caller to drop without the GIL (the lock is
    /// held only to move them out).
    pub fn take_deferred(&self) -> DeferredDrops {
        match self.deferred.try_lock() {
            Ok(mut d) if d.len > 0 => std::mem::take(&mut *d),
            _ => DeferredDrops::default(),
        }
    }
}

fn options_from_py(
    options: Option<&Bound<'_, PyAny>>,
    info_options: Option<&Bound<'_, PyAny>>,
) -> PyResult<ClientOptions> {
    let mut out = ClientOptions::new();
    for source in [info_options, options].into_iter().flatten() {
        if source.is_none() {
            continue;
        }
        for (name, value) in option_items(source, "options", "option")? {
            let value = value_from_py(&name, &value)?;
            out = out.set(name, value);
        }
    }
    Ok(out)
}

/// A Python `PluginInfo` as the core's.
fn plugin_info_from_py(info: &Bound<'_, PyAny>) -> PyResult<rpjrt_discovery::PluginInfo> {
    let opts = info.getattr("options")?;
    Ok(rpjrt_discovery::PluginInfo {
        name: info.getattr("name")?.extract()?,
        path: info
            .getattr("path")?
            .extract::<std::ffi::OsString>()?
            .into(),
        version: info.getattr("version")?.extract()?,
        source: info.getattr("source")?.extract()?,
        platform: info.getattr("platform")?.extract()?,
        package: info.getattr("package")?.extract()?,
        options: if opts.is_none() {
            None
        } else {
            Some(options_from_py(Some(&opts), None)?)
        },
    })
}

/// A Python device argument as the core names it: a Device, an index into devices(), or
/// the default (None).
fn device_choice(device: Option<&Bound<'_, PyAny>>) -> PyResult<rpjrt::DeviceChoice> {
    let Some(d) = device.filter(|d| !d.is_none()) else {
        return Ok(rpjrt::DeviceChoice::Default);
    };
    if let Ok(dev) = d.cast::<PyDevice>() {
        return Ok(rpjrt::DeviceChoice::Device(dev.get().inner.clone()));
    }
    if !int_like(d)? {
        return Err(invalid(format!(
            "device must be an rpjrt.Device or an index, not {}",
            d.get_type().name()?
        )));
    }
    Ok(rpjrt::DeviceChoice::Index(int_arg(d, "a device index")?))
}

/// A Python memory argument as the core names it: a Memory, a kind name, or none.
fn memory_choice(memory: Option<&Bound<'_, PyAny>>) -> PyResult<rpjrt::MemoryChoice> {
    let Some(m) = memory.filter(|m| !m.is_none()) else {
        return Ok(rpjrt::MemoryChoice::Default);
    };
    if let Ok(mem) = m.cast::<PyMemory>() {
        return Ok(rpjrt::MemoryChoice::Memory(mem.get().inner.clone()));
    }
    if let Ok(kind) = m.extract::<String>() {
        return Ok(rpjrt::MemoryChoice::Kind(kind));
    }
    Err(invalid(format!(
        "memory must be an rpjrt.Memory or a kind name, not {}",
        m.get_type().name()?
    )))
}

impl PyClient {
    /// The device an operation targets: a Device, an index into devices(), or the default.
    pub fn resolve_device(
        &self,
        _py: Python<'_>,
        device: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<rpjrt::Device> {
        self.inner.resolve_device(&device_choice(device)?).pyerr()
    }

    /// Device and memory of a put: a Memory alone picks its first device.
    pub fn resolve_target(
        &self,
        _py: Python<'_>,
        device: Option<&Bound<'_, PyAny>>,
        memory: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(rpjrt::Device, Option<rpjrt::Memory>)> {
        self.inner
            .resolve_target(&device_choice(device)?, &memory_choice(memory)?)
            .pyerr()
    }
}

pub fn wrap_device(
    py: Python<'_>,
    client: &Py<PyClient>,
    d: rpjrt::Device,
) -> PyResult<Py<PyDevice>> {
    Py::new(
        py,
        PyDevice {
            inner: d,
            client: client.clone_ref(py),
        },
    )
}

pub fn wrap_memory(
    py: Python<'_>,
    client: &Py<PyClient>,
    m: rpjrt::Memory,
) -> PyResult<Py<PyMemory>> {
    Py::new(
        py,
        PyMemory {
            inner: m,
            client: client.clone_ref(py),
        },
    )
}

fn device_list<'py>(
    py: Python<'py>,
    client: &Py<PyClient>,
    devs: Vec<rpjrt::Device>,
) -> PyResult<Bound<'py, PyList>> {
    let items = devs
        .into_iter()
        .map(|d| wrap_device(py, client, d))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

#[pymethods]
impl PyClient {
    #[new]
    #[pyo3(signature = (plugin = None, *, options = None, cache_dir = None, kv = None,
        process_id = None, num_processes = None, timeout = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        plugin: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyAny>>,
        cache_dir: Option<&Bound<'_, PyAny>>,
        kv: Option<&Bound<'_, PyAny>>,
        process_id: Option<&Bound<'_, PyAny>>,
        num_processes: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClient> {
        let timeout = crate::slow::timeout_from_py(timeout)?;
        let cache = cache_dir
            .filter(|c| !c.is_none())
            .map(crate::aot::cache_from_py)
            .transpose()?;
        let (dist, kv_store) =
            match crate::distributed::distributed_from_py(kv, process_id, num_processes)? {
                Some(d) => (Some(d.options), d.store),
                None => (None, None),
            };
        // A creation that runs out of time while the plugin waits in the store is named
        // as that wait ([`kv_wait_timeout`]), not as a plugin that did not return.
        let started = std::time::Instant::now();
        let world = dist.as_ref().map(|d| (d.process_id, d.num_processes));
        let named = |py: Python<'_>, e: PyErr| kv_wait_timeout(py, e, world, started, timeout);
        // The plugin may call a Python store back from its own threads during creation:
        // the GIL is released around the call (py.detach), so those calls can take it.
        let create = move |pl: &rpjrt::Plugin, opts: &ClientOptions| match &dist {
            // A CUDA plugin's creation failure gets the library and driver state added.
            None => rpjrt_cuda::create_client(pl, opts),
            Some(d) => rpjrt::Client::new_distributed(pl, opts, d),
        };
        // A loaded Plugin: use it as is.
        if let Some(p) = plugin {
            if let Ok(p) = p.cast::<PyPlugin>() {
                let opts = options_from_py(options, None)?;
                let pl = p.get().inner.clone();
                let what = format!("creating a client of plugin {}", pl.path().display());
                let inner =
                    crate::slow::run_abandonable(py, &what, timeout, move || create(&pl, &opts))
                        .map_err(|e| named(py, e))?
                        .pyerr()?;
                if cache.is_some() {
                    inner.set_cache(cache.clone());
                }
                let platform = inner.platform_name().pyerr()?;
                return Ok(PyClient {
                    inner: crate::notify::Held::new(inner),
                    plugin: p.clone().unbind(),
                    kv: Mutex::new(kv_store),
                    platform,
                    deferred: Mutex::default(),
                });
            }
        }
        // Discovery and its spec rules are Python-facing (`_discovery.candidates`); trying
        // them in turn is the core's `open_first`.
        // Python code (discovery's, a path's `__fspath__`): see `detach::calling_python`.
        let found: Vec<Bound<'_, PyAny>> = crate::detach::calling_python(py, || {
            discovery(py)?
                .call_method1("candidates", (plugin,))?
                .extract()
        })?;
        let infos = found
            .iter()
            .map(plugin_info_from_py)
            .collect::<PyResult<Vec<_>>>()?;
        let opts = options_from_py(options, None)?;
        let what = match infos.as_slice() {
            [one] => format!("opening plugin {}", one.path.display()),
            all => format!(
                "opening the first plugin that works of {}",
                all.iter()
                    .map(|i| i.path.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let opened = crate::slow::run_abandonable(py, &what, timeout, move || {
            rpjrt_discovery::open_first(infos, &opts, create)
        })
        .map_err(|e| named(py, e))?
        .map_err(|e| match e {
            rpjrt::Error::PluginLoad { reason, .. } if found.len() > 1 => {
                make_err(py, "NOT_FOUND", "PluginLoad", reason, None)
            }
            other => crate::errors::to_py(other),
        })?;
        for (info, e) in &opened.skipped {
            let msg = format!(
                "rpjrt: skipped plugin {} ({}): {}",
                info.name,
                info.path.display(),
                crate::errors::to_py(e.clone()).value(py)
            );
            let warnings = py.import("warnings")?;
            let cat = py.get_type::<pyo3::exceptions::PyRuntimeWarning>();
            warnings.call_method1("warn", (msg, cat, 2))?;
        }
        let inner = opened.client;
        if cache.is_some() {
            inner.set_cache(cache.clone());
        }
        let platform = inner.platform_name().pyerr()?;
        Ok(PyClient {
            inner: crate::notify::Held::new(inner),
            plugin: Py::new(
                py,
                PyPlugin {
                    inner: opened.plugin,
                    info: found[opened.index].clone().unbind(),
                },
            )?,
            kv: Mutex::new(kv_store),
            platform,
            deferred: Mutex::default(),
        })
    }

    /// The Plugin this client was created from.
    #[getter]
    fn plugin(&self, py: Python<'_>) -> Py<PyPlugin> {
        self.plugin.clone_ref(py)
    }

    /// The platform name the plugin reports, e.g. "cpu", "cuda".
    #[getter]
    fn platform(&self) -> String {
        self.platform.clone()
    }

    /// The platform version the plugin reports.
    #[getter]
    fn platform_version(&self) -> PyResult<String> {
        self.inner.platform_version().pyerr()
    }

    /// This process's index among the processes of the client.
    #[getter]
    fn process_index(&self) -> PyResult<i32> {
        self.inner.process_index().pyerr()
    }

    /// Whether close() has been called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Every device of the client, other processes' too (`rpjrt::Client::devices`).
    fn devices<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyList>> {
        let devs = slf.get().inner.devices().pyerr()?;
        device_list(slf.py(), &slf.clone().unbind(), devs)
    }

    /// The devices this process can use (`rpjrt::Client::addressable_devices`).
    fn addressable_devices<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyList>> {
        let devs = slf.get().inner.addressable_devices().pyerr()?;
        device_list(slf.py(), &slf.clone().unbind(), devs)
    }

    /// Deprecated name of `devices()` (every device); kept for one release.
    fn all_devices<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyList>> {
        crate::errors::deprecated(slf.py(), "Client.all_devices()", "Client.devices()")?;
        Self::devices(slf)
    }

    /// The device with global id `id`.
    fn device(slf: &Bound<'_, Self>, id: &Bound<'_, PyAny>) -> PyResult<Py<PyDevice>> {
        let id = int_arg(id, "a device id")?;
        let id = i32::try_from(id).map_err(|_| {
            invalid(format!(
                "device id {id} is out of range: there is no such device"
            ))
        })?;
        let d = slf.get().inner.lookup_device(id).pyerr()?;
        wrap_device(slf.py(), &slf.clone().unbind(), d)
    }

    /// The memories this process can use.
    fn memories<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyList>> {
        let py = slf.py();
        let me = slf.clone().unbind();
        let mems = slf.get().inner.addressable_memories().pyerr()?;
        let items = mems
            .into_iter()
            .map(|m| wrap_memory(py, &me, m))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// Compile StableHLO (text, bytecode or a jax.export portable artifact) or an HLO proto.
    ///
    /// device_assignment is indexed `[replica][partition]`; device picks the one device of
    /// a single-device program (default: the first addressable one); portable=True makes a
    /// single-device program that runs on any device (`exe(..., device=d)`).
    #[pyo3(signature = (program, *, format = None, num_replicas = None, num_partitions = None,
        use_spmd_partitioning = None, use_shardy_partitioner = None, device_assignment = None,
        device = None, portable = false, env_option_overrides = None, cache = None))]
    #[allow(clippy::too_many_arguments)]
    fn compile(
        slf: &Bound<'_, Self>,
        program: &Bound<'_, PyAny>,
        format: Option<&str>,
        num_replicas: Option<&Bound<'_, PyAny>>,
        num_partitions: Option<&Bound<'_, PyAny>>,
        use_spmd_partitioning: Option<bool>,
        use_shardy_partitioner: Option<bool>,
        device_assignment: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
        portable: bool,
        env_option_overrides: Option<&Bound<'_, PyAny>>,
        cache: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyExecutable>> {
        let py = slf.py();
        let this = slf.get();
        // Extracted here: an object's own `__index__` may run (`detach::extract_arg`).
        // (Not given: 1.)
        let count = |v: Option<&Bound<'_, PyAny>>, name: &str| -> PyResult<i64> {
            match v.filter(|v| !v.is_none()) {
                Some(v) => crate::detach::extract_arg(v, name),
                None => Ok(1),
            }
        };
        let num_replicas = count(num_replicas, "num_replicas")?;
        let num_partitions = count(num_partitions, "num_partitions")?;
        let path = crate::aot::as_path(program)?;
        let code: Vec<u8> = if path.is_some() {
            Vec::new()
        } else if let Ok(s) = program.cast::<PyString>() {
            crate::aot::program_text(s)?
        } else if let Ok(b) = program.cast::<PyBytes>() {
            b.as_bytes().to_vec()
        } else if let Some(view) = crate::pybuf::HostView::get(program) {
            view.contiguous_bytes()
                .ok_or_else(|| invalid("the program buffer must be contiguous"))?
                .to_vec()
        } else {
            return Err(invalid(format!(
                "program must be str (StableHLO text) or bytes (bytecode, portable artifact or HLO proto), not {}",
                program.get_type().name()?
            )));
        };
        let prog = match &path {
            Some(p) => Program::read(p, format).pyerr()?,
            None => crate::aot::program_from_code(code, format)?,
        };
        let mut opts = CompileOptions::for_mesh(num_replicas, num_partitions).pyerr()?;
        if let Some(spmd) = use_spmd_partitioning {
            opts.use_spmd_partitioning = spmd;
        }
        opts.use_shardy_partitioner = use_shardy_partitioner.unwrap_or(false);
        opts.portable = portable;
        if let Some(da) = device_assignment.filter(|d| !d.is_none()) {
            let mut rows = Vec::new();
            for row in sequence_items(da, "device_assignment")? {
                let mut ids = Vec::new();
                for item in sequence_items(&row, "a device_assignment row")? {
                    let id = if let Ok(d) = item.cast::<PyDevice>() {
                        if !d.get().client.is(slf) {
                            return Err(invalid(format!(
                                "device_assignment: {} belongs to another client",
                                d.get().inner
                            )));
                        }
                        i64::from(d.get().inner.id())
                    } else if int_like(&item)? {
                        int_arg(&item, "a device id")?
                    } else {
                        return Err(invalid(format!(
                            "device_assignment holds Devices or device ids, not {}",
                            item.get_type().name()?
                        )));
                    };
                    ids.push(id);
                }
                rows.push(ids);
            }
            opts.device_assignment = Some(rows);
        }
        if let Some(d) = device.filter(|d| !d.is_none()) {
            let dev = this.resolve_device(py, Some(d))?;
            opts = opts.on_device(i64::from(dev.id())).pyerr()?;
        }
        if let Some(env) = env_option_overrides.filter(|d| !d.is_none()) {
            let mut map = BTreeMap::new();
            let items =
                crate::convert::option_items(env, "env_option_overrides", "env_option_overrides")?;
            for (k, v) in items {
                // XLA's options take these four kinds (bool is an int); a list, which the
                // shared converter takes for create options, is refused here by name.
                if !(v.is_instance_of::<pyo3::types::PyString>()
                    || v.is_instance_of::<pyo3::types::PyInt>()
                    || v.is_instance_of::<pyo3::types::PyFloat>())
                {
                    return Err(invalid(format!(
                        "env option {k:?} must be a str, bool, int or float, not {}",
                        v.get_type().name()?
                    )));
                }
                // A float is a double here, whole: the float32 range of create options
                // (`value_from_py`) does not apply.
                let as_value = match v.is_instance_of::<pyo3::types::PyFloat>() {
                    true => Value::Float(0.0),
                    false => value_from_py(&k, &v)?,
                };
                let o = match as_value {
                    Value::Bool(b) => OptionOverride::Bool(b),
                    Value::Int64(i) => OptionOverride::Int(i),
                    Value::Float(_) => OptionOverride::Double(v.extract()?),
                    Value::String(s) => OptionOverride::String(s),
                    _ => {
                        return Err(invalid(format!(
                            "env option {k:?} must be a str, bool, int or float"
                        )))
                    }
                };
                map.insert(k, o);
            }
            opts.env_option_overrides = map;
        }
        let client = this.inner.clone();
        let cache = match cache.filter(|c| !c.is_none()) {
            Some(c) => Some(crate::aot::cache_from_py(c)?),
            None => client.cache(),
        };
        let run = |p: &Program| match &cache {
            Some(c) => client.compile_with_cache(p, &opts, c),
            None => client.compile(p, &opts),
        };
        // CHLO ops legalized by jaxlib's code, as JAX does (docs/compile.md).
        let prog = crate::aot::legalize_chlo(py, &client, &prog)?.unwrap_or(prog);
        let exe = py.detach_call(|| run(&prog));
        // Text the plugin's StableHLO parser refused: compile it as a portable artifact.
        let exe = crate::aot::retry_as_portable(py, &client, &prog, exe, run)?;
        if let Some(c) = &cache {
            crate::aot::emit_cache_warnings(py, c)?;
        }
        PyExecutable::wrap(py, exe.pyerr()?, slf.clone().unbind())
    }

    /// Put host data on a device.
    ///
    /// device: a Device, or an int: the device at that place in addressable_devices() (not
    /// a device id; in a job of several processes the two differ, and `client.device(id)`
    /// looks a device up by id). Default: the client's default device.
    /// obj: any buffer-protocol object (bytes, bytearray, array.array, memoryview, numpy
    /// arrays, including non-contiguous ones), a `__dlpack__` producer, a Python number or a
    /// nested list of numbers of one kind, or a Buffer (copied to `device`). numpy and
    /// ml_dtypes scalars in a list keep their dtype, promoted as `numpy.asarray` promotes
    /// them (`[np.int8(1)]` is int8); a `longdouble` one is refused, as the bare scalar is.
    /// dtype: the element type; with raw bytes (format "B", "b" or "c", or numpy's raw
    /// "|V" items of the same width) it reinterprets them; numpy arrays and scalars,
    /// `__dlpack__` producers, Python numbers and lists are converted, and every value must
    /// fit exactly (out-of-range values, float -> int, complex -> real and float overflow
    /// raise InvalidArgumentError; a NaN keeps its sign and payload as numpy's astype
    /// keeps them); with other buffer-protocol objects it must match the data (big-endian
    /// data is converted, other formats refused).
    /// cast: convert as numpy's astype does (wrapping, truncating, saturating) instead of
    /// refusing values the dtype cannot hold.
    /// copy: True copies during the call; False shares the host memory (raises if the
    /// plugin cannot use it in place; the data must then stay unchanged while the Buffer
    /// lives); None shares when possible. Host allocations that cannot be made raise
    /// ResourceExhaustedError (a MemoryError).
    /// layout: a device layout to ask the plugin for, as minor_to_major dimension numbers
    /// (``(0, 1)``: column-major 2-d) or an untiled ``rpjrt.transfer.DeviceLayout``; the
    /// data is copied (copy=False is refused). Host reads stay row-major; programs refuse
    /// such a buffer as an argument (plugins disagree on it), so copy it first.
    #[pyo3(signature = (obj, device = None, *, memory = None, dtype = None, copy = Some(true), cast = false, layout = None))]
    #[pyo3(
        text_signature = "(self, obj, device=None, *, memory=None, dtype=None, copy=True, cast=False, layout=None)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn put(
        slf: &Bound<'_, Self>,
        obj: &Bound<'_, PyAny>,
        device: Option<&Bound<'_, PyAny>>,
        memory: Option<&Bound<'_, PyAny>>,
        dtype: Option<&Bound<'_, PyAny>>,
        copy: Option<bool>,
        cast: bool,
        layout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyBuffer>> {
        let layout = layout
            .filter(|l| !l.is_none())
            .map(crate::put::layout_from_py)
            .transpose()?;
        crate::put::put_with(
            slf,
            obj,
            device,
            memory,
            dtype.filter(|d| !d.is_none()),
            copy,
            cast,
            layout,
        )
    }

    /// A buffer of ``dtype[shape]`` whose contents come later, and its fulfiller
    /// (PJRT_Client_CreateAliasBuffer): ``fulfiller.fulfill(other)`` gives it the contents
    /// of a buffer of the same dtype, shape and device; ``fulfiller.fail(code, message)``
    /// an error. Waiting on the alias blocks until then. Raises UnsupportedError naming
    /// the entry on plugins without it.
    #[pyo3(signature = (dtype, shape, device = None, *, memory = None))]
    fn create_alias_buffer(
        slf: &Bound<'_, Self>,
        dtype: &Bound<'_, PyAny>,
        shape: &Bound<'_, PyAny>,
        device: Option<&Bound<'_, PyAny>>,
        memory: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(Py<PyBuffer>, crate::transfer::PyAliasFulfiller)> {
        // Extracted here: a sequence's and its items' own methods may run.
        let shape: Vec<i64> = crate::detach::extract_arg(shape, "shape")?;
        crate::transfer::create_alias_buffer(slf.py(), slf, dtype, shape, device, memory)
    }

    /// Adopt a `__dlpack__` producer's memory (zero-copy when possible).
    #[pyo3(signature = (obj, device = None, *, copy = None))]
    fn from_dlpack(
        slf: &Bound<'_, Self>,
        obj: &Bound<'_, PyAny>,
        device: Option<&Bound<'_, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyBuffer>> {
        let py = slf.py();
        let (dev, _) = slf.get().resolve_target(py, device, None)?;
        crate::dlpack::import(slf, obj, &dev, copy)
            .map_err(|e| crate::dlpack::producer_refused(obj, e))
    }

    /// Destroy the client. Later use of it or its objects raises ClientClosedError. A
    /// Python key-value store (`kv=`) is released: the plugin's later calls to it fail.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let kept = self.take_deferred();
        py.detach_call(move || drop(kept));
        let closed = self.inner.close().pyerr();
        // The Python store goes too: the plugin's later calls to it fail.
        let kv = self.kv.lock().unwrap_or_else(|p| p.into_inner()).take();
        drop(kv);
        closed
    }

    /// Visits the plugin and the Python key-value store (`kv=`), which the Client alone
    /// holds, so that a store that refers back to its Client (an object that is both the
    /// store and the client's owner) is a cycle the collector reclaims. The store's lock is
    /// held only briefly, by threads that hold the GIL; a held one is not waited for.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.plugin)?;
        if let Ok(kv) = self.kv.try_lock() {
            visit.call(kv.as_ref())?;
        }
        Ok(())
    }

    /// Breaks such a cycle: closes the client as `close()` does, which lets the store go.
    fn __clear__(&self, py: Python<'_>) {
        // `close` fails on nothing it does; an error would have nowhere to go here.
        let _ = self.close(py);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> PyResult<()> {
        self.close(py)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let v = self.inner.plugin().version();
        let name = self
            .plugin
            .get()
            .info
            .bind(py)
            .getattr("name")
            .and_then(|n| n.extract::<String>())
            .unwrap_or_else(|_| "?".into());
        if self.inner.is_closed() || self.inner.is_forked() {
            return format!(
                "rpjrt.Client({}, platform={}, plugin={})",
                gone(&self.inner),
                q(&self.platform),
                q(&name)
            );
        }
        let n = self
            .inner
            .addressable_devices()
            .map(|d| d.len())
            .unwrap_or(0);
        format!(
            "rpjrt.Client(platform={}, devices={n}, plugin={}, pjrt={}.{})",
            q(&self.platform),
            q(&name),
            v.major,
            v.minor
        )
    }
}

/// Why a client's objects are unusable, as reprs say it: `closed`, or, in a process forked
/// from the one that made the client, `inherited across fork`.
pub(crate) fn gone(client: &rpjrt::Client) -> &'static str {
    match client.is_forked() {
        true => "inherited across fork",
        false => "closed",
    }
}

/// `", closed"` or `", inherited across fork"` for a repr whose client can no longer be
/// used; empty while it can.
pub(crate) fn gone_suffix(client: &rpjrt::Client) -> String {
    match client.is_closed() || client.is_forked() {
        true => format!(", client {}", gone(client)),
        false => String::new(),
    }
}

/// A device of a client.
#[pyclass(frozen, weakref, name = "Device", module = "rpjrt")]
pub struct PyDevice {
    pub inner: rpjrt::Device,
    pub client: Py<PyClient>,
}

/// The `#[pymethods]` of a view of a client's table (`Device`, `Memory`): what both have
/// (`id`, `kind`, `client`, equality of the core's views, a hash salted with `$salt`) and
/// the class's own items.
macro_rules! view_class {
    ($class:ident, $salt:literal { $($own:tt)* }) => {
        #[pymethods]
        impl $class {
            /// The id the plugin gives it (for a device: its global id).
            #[getter]
            fn id(&self) -> i32 {
                self.inner.id()
            }
            /// Its kind as the plugin names it (e.g. "cpu", "device", "pinned_host").
            #[getter]
            fn kind(&self) -> String {
                self.inner.kind().to_string()
            }
            /// The client it belongs to.
            #[getter]
            fn client(&self, py: Python<'_>) -> Py<PyClient> {
                self.client.clone_ref(py)
            }
            fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
                match other.cast::<$class>() {
                    Ok(o) => o.get().inner == self.inner,
                    Err(_) => false,
                }
            }
            /// Visits its client (its own reference), so that a cycle through it and a
            /// Client's store is collectable.
            fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
                visit.call(&self.client)
            }
            fn __hash__(&self) -> isize {
                (self.client.as_ptr() as isize)
                    .wrapping_mul($salt)
                    .wrapping_add(self.inner.id() as isize)
            }
            $($own)*
        }
    };
}

view_class!(PyDevice, 31 {
    /// The platform name of the device's client, e.g. "cpu", "cuda".
    #[getter]
    fn platform(&self) -> String {
        self.client.get().platform.clone()
    }
    /// The index of the process that can address the device.
    #[getter]
    fn process_index(&self) -> i32 {
        self.inner.process_index()
    }
    /// The device's local hardware id, or None where the plugin reports none.
    #[getter]
    fn local_hardware_id(&self) -> Option<i32> {
        let id = self.inner.local_hardware_id();
        (id >= 0).then_some(id)
    }
    /// Whether this process can use the device.
    #[getter]
    fn is_addressable(&self) -> bool {
        self.inner.is_addressable()
    }
    /// The device's attributes, as the plugin describes them.
    #[getter]
    fn attributes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        attributes_to_py(py, self.inner.attributes())
    }
    /// The memories this device can address.
    fn memories<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .inner
            .addressable_memories()
            .pyerr()?
            .into_iter()
            .map(|m| wrap_memory(py, &self.client, m))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }
    /// The memory buffers go to when no memory is named.
    fn default_memory(&self, py: Python<'_>) -> PyResult<Py<PyMemory>> {
        wrap_memory(py, &self.client, self.inner.default_memory().pyerr()?)
    }
    /// The allocator's figures: bytes_in_use, peak_bytes_in_use, num_allocs,
    /// largest_alloc_size, bytes_limit, largest_free_block_bytes (None: not reported).
    ///
    /// Raises UnsupportedError, quoting the plugin's answer, where the plugin reports
    /// none (both CPU plugins).
    fn memory_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = &self.inner;
        let s = match py.detach_call(|| d.memory_stats()) {
            Ok(s) => s,
            Err(e) if e.code() == rpjrt::Code::Unimplemented => {
                return Err(crate::errors::unsupported(format!(
                    "device {} reports no allocator figures: {e}",
                    d.id()
                )))
            }
            Err(e) => return Err(crate::errors::to_py(e)),
        };
        crate::errors::memory_stats_dict(py, &s)
    }
    /// The memory of this device with the given kind, e.g. "pinned_host".
    fn memory(&self, py: Python<'_>, kind: &str) -> PyResult<Py<PyMemory>> {
        wrap_memory(py, &self.client, self.inner.memory_by_kind(kind).pyerr()?)
    }
    fn __repr__(&self) -> String {
        format!(
            "rpjrt.Device(id={}, kind={}, platform={}{})",
            self.inner.id(),
            q(self.inner.kind()),
            q(&self.client.get().platform),
            gone_suffix(&self.client.get().inner)
        )
    }
    fn __str__(&self) -> String {
        format!("{}:{}", self.client.get().platform, self.inner.id())
    }
});

/// A memory space of a client.
#[pyclass(frozen, weakref, name = "Memory", module = "rpjrt")]
pub struct PyMemory {
    pub inner: rpjrt::Memory,
    pub client: Py<PyClient>,
}

view_class!(PyMemory, 37 {
    /// The platform-specific number of the memory's kind.
    #[getter]
    fn kind_id(&self) -> i32 {
        self.inner.kind_id()
    }
    /// The devices that can address this memory.
    fn devices<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let devs = self.inner.addressable_by_devices().pyerr()?;
        device_list(py, &self.client, devs)
    }
    fn __repr__(&self) -> String {
        let devices = match self.inner.addressable_by_devices() {
            Ok(d) => {
                let ids: Vec<String> = d.iter().map(|d| d.id().to_string()).collect();
                format!("devices=[{}]", ids.join(", "))
            }
            // Not "devices=[]": the memory is not attached to no device, its client is gone.
            Err(_) => gone(&self.client.get().inner).to_string(),
        };
        format!(
            "rpjrt.Memory(id={}, kind={}, {devices})",
            self.inner.id(),
            q(self.inner.kind()),
        )
    }
    fn __str__(&self) -> String {
        self.inner.to_string()
    }
});

/// A multi-process client's creation that ran out of time (`timeout`, or
/// `RPJRT_PLUGIN_TIMEOUT`) while the plugin was waiting in rpjrt's own key-value callback
/// for a key (`Client::kv_keys_waited_for`, waits begun since `started`): the error says
/// so, naming the key, instead of blaming the plugin. Any other error is `e` as it is.
fn kv_wait_timeout(
    py: Python<'_>,
    e: PyErr,
    world: Option<(usize, usize)>,
    started: std::time::Instant,
    timeout: Option<std::time::Duration>,
) -> PyErr {
    let (Some((p, n)), Some(t)) = (world, timeout) else {
        return e;
    };
    let text = e.value(py).to_string();
    let Some((what, _)) = text.split_once(": the plugin did not return within ") else {
        return e;
    };
    let keys = rpjrt::Client::kv_keys_waited_for(started);
    let Some(key) = keys.first() else {
        return e;
    };
    crate::errors::make_err(
        py,
        "DEADLINE_EXCEEDED",
        "Timeout",
        format!(
            "{what}: the client's creation (process {p} of {n}) did not finish within {} s \
             (timeout, or RPJRT_PLUGIN_TIMEOUT, which also bounds the wait for the other \
             processes): it was waiting in the key-value store for key {key:?}, which another \
             process of the job sets as it joins; that process has not joined yet (not \
             started, slower, crashed, or using another store). Start every process of the \
             job, or give a longer timeout. The plugin's call goes on in the background until \
             the key comes or the store's wait ends; restart the process before creating \
             another client of this plugin",
            t.as_secs_f64()
        ),
        None,
    )
}

#[pymethods]
impl crate::aot::PyTopology {
    /// `rpjrt.Topology(platform='cpu', version='...', devices=4)`.
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let name: String = slf.getattr("platform_name")?.extract()?;
        let version: String = slf.getattr("platform_version")?.extract()?;
        let devices = slf.call_method0("devices")?.len()?;
        Ok(format!(
            "rpjrt.Topology(platform={name:?}, version={version:?}, devices={devices})"
        ))
    }
}
