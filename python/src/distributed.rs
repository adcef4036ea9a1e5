//! Key-value stores for multi-process clients: the Rust stores as Python classes, any
//! Python object with `set`/`get`/`try_get` as a store for the plugin, and launch-env
//! detection. The GIL is released whenever a store may wait.

use crate::detach::Detach;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyWeakrefMethods, PyWeakrefReference};
use pyo3::{PyTraverseError, PyVisit};
use rpjrt::Code;
use rpjrt_distributed::{
    check_world, Cancel, DistributedOptions, InMemoryStore, KvStore, LaunchEnv, Rendezvous,
    TcpStore, MAX_PROCESSES,
};

use crate::convert::{int_arg, secs_arg};
use crate::errors::{invalid, PyErrExt};
use crate::pybuf::HostView;
use crate::slow::run_interruptible;

/// The default wait of `get`, `barrier` and `connect`, in seconds.
const DEFAULT_TIMEOUT: f64 = 30.0;

/// A process id or process count from Python, through the one integer check
/// (`convert::int_arg`: a bool is refused, as is anything but an int), then bounded:
/// not negative, and at most `rpjrt_distributed::MAX_PROCESSES`. Whether the id fits the
/// count is `check_world`'s to say, where both are known.
pub fn process_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    let negative = || invalid(format!("{what} must be a non-negative integer, not {obj}"));
    let too_big = || {
        invalid(format!(
            "{what} {obj} is above the limit of {MAX_PROCESSES} processes"
        ))
    };
    let v = match int_arg(obj, what) {
        Ok(v) => v,
        // An int beyond 64 bits: say which end of the range it left.
        // (int_arg's own refusal or a conversion failure; Ctrl-C from `__index__` is not.)
        Err(e)
            if (crate::errors::is_rpjrt_error(obj.py(), &e)
                || crate::convert::is_conversion_failure(obj.py(), &e))
                && !obj.is_instance_of::<pyo3::types::PyBool>()
                && crate::convert::int_like(obj)? =>
        {
            return Err(if obj.lt(0)? { negative() } else { too_big() });
        }
        Err(e) => return Err(e),
    };
    let v = u64::try_from(v).map_err(|_| negative())?;
    match usize::try_from(v) {
        Ok(v) if v <= MAX_PROCESSES => Ok(v),
        _ => Err(too_big()),
    }
}

/// An optional process id or count ([`process_arg`]); `None` stays `None`.
pub fn opt_process_arg(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<usize>> {
    obj.filter(|o| !o.is_none())
        .map(|o| process_arg(o, what))
        .transpose()
}

/// Runs a store call on a thread of its own inside a [`Cancel`] token, answering Ctrl-C
/// at once: the token is cancelled, so the call ends (a wait within 100 ms, a call on a
/// connection at once; a barrier takes its arrival back) and is waited for (briefly)
/// before `KeyboardInterrupt` is raised. Nothing it held is left behind.
fn cancellable<T: Send + 'static>(
    py: Python<'_>,
    what: &str,
    call: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    let cancel = Cancel::new();
    let token = cancel.clone();
    run_interruptible(py, what, move || cancel.cancel(), move || token.run(call))
}

/// The `#[pymethods]` of a Rust store's class: what every store has (`set`, `get`,
/// `try_get`, `delete`, `barrier` on its `store` field, each releasing the GIL while it
/// may wait; a call that talks to another process, and every wait, answers Ctrl-C) and
/// the class's own items.
macro_rules! store_class {
    ($class:ty { $($own:tt)* }) => {
        #[pymethods]
        impl $class {
            /// Sets `key` to `value` (any bytes-like object: bytes, bytearray, memoryview
            /// ...).
            fn set(&self, py: Python<'_>, key: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
                let value = bytes_like(value)?;
                if self.remote {
                    let (store, k) = (Arc::clone(&self.store), key.to_string());
                    return cancellable(py, "a key-value store set", move || {
                        store.set(&k, &value)
                    })?
                    .pyerr();
                }
                py.detach_call(|| self.store.set(key, &value)).pyerr()
            }
            /// The value of `key`, waiting up to `timeout` seconds for it to be set
            /// (Ctrl-C interrupts the wait).
            #[pyo3(signature = (key, timeout = None), text_signature = "(self, key, timeout=30.0)")]
            fn get<'py>(
                &self,
                py: Python<'py>,
                key: &str,
                timeout: Option<&Bound<'py, PyAny>>,
            ) -> PyResult<Bound<'py, PyBytes>> {
                let t = secs_arg(timeout, DEFAULT_TIMEOUT, "timeout")?;
                // Set already in this process's memory: no wait. Otherwise (and always
                // for a peer, whose every call may wait on the host) the call answers
                // Ctrl-C.
                if !self.remote {
                    if let Some(v) = py.detach_call(|| self.store.try_get(key)).pyerr()? {
                        return Ok(PyBytes::new(py, &v));
                    }
                }
                let (store, k) = (Arc::clone(&self.store), key.to_string());
                let v = cancellable(py, "a key-value store get", move || store.get(&k, t))?
                    .pyerr()?;
                Ok(PyBytes::new(py, &v))
            }
            /// The value of `key`, or None when it is not set (does not wait for the key).
            fn try_get<'py>(
                &self,
                py: Python<'py>,
                key: &str,
            ) -> PyResult<Option<Bound<'py, PyBytes>>> {
                let v = if self.remote {
                    let (store, k) = (Arc::clone(&self.store), key.to_string());
                    cancellable(py, "a key-value store try_get", move || store.try_get(&k))?
                } else {
                    py.detach_call(|| self.store.try_get(key))
                }
                .pyerr()?;
                Ok(v.map(|v| PyBytes::new(py, &v)))
            }
            /// Removes `key`; returns whether it was set.
            fn delete(&self, py: Python<'_>, key: &str) -> PyResult<bool> {
                if self.remote {
                    let (store, k) = (Arc::clone(&self.store), key.to_string());
                    return cancellable(py, "a key-value store delete", move || store.delete(&k))?
                        .pyerr();
                }
                py.detach_call(|| self.store.delete(key)).pyerr()
            }
            /// Waits for every process (see `Rendezvous::barrier`): the ids and count go
            /// through one integer check (no bools, no negatives, at most
            /// `MAX_PROCESSES`) and `check_world` before the store is touched.
            #[pyo3(
                signature = (name, process_id, num_processes, timeout = None),
                text_signature = "(self, name, process_id, num_processes, timeout=30.0)"
            )]
            fn barrier(
                &self,
                py: Python<'_>,
                name: &str,
                process_id: &Bound<'_, PyAny>,
                num_processes: &Bound<'_, PyAny>,
                timeout: Option<&Bound<'_, PyAny>>,
            ) -> PyResult<()> {
                let p = process_arg(process_id, "process_id")?;
                let n = process_arg(num_processes, "num_processes")?;
                check_world(p, n).pyerr()?;
                let t = secs_arg(timeout, DEFAULT_TIMEOUT, "timeout")?;
                let (store, name) = (Arc::clone(&self.store), name.to_string());
                cancellable(py, "a key-value store barrier", move || {
                    store.barrier(&name, p, n, t)
                })?
                .pyerr()
            }
            $($own)*
        }
    };
}

/// A key-value store in this process's memory, shared by its threads.
///
/// A store belongs to the process that made it: in a process forked from that one, `set`,
/// `get`, `try_get`, `delete` and `barrier` raise `FailedPreconditionError` naming the
/// fork (a thread of the parent may have held its lock at the fork).
#[pyclass(frozen, weakref, name = "InMemoryStore", module = "rpjrt.distributed")]
pub struct PyInMemoryStore {
    store: Arc<dyn Rendezvous>,
    /// Never: the store is in this process's memory.
    remote: bool,
}

store_class!(PyInMemoryStore {
    #[new]
    fn new() -> PyInMemoryStore {
        PyInMemoryStore {
            store: Arc::new(InMemoryStore::new()),
            remote: false,
        }
    }
    fn __repr__(&self) -> String {
        "InMemoryStore()".into()
    }
});

/// The TCP key-value store: process 0 hosts it, the others connect with the job's token.
///
/// A store belongs to the process that made it: in a process forked from that one, `set`,
/// `get`, `try_get`, `delete`, `barrier` and `shutdown` raise `FailedPreconditionError`
/// naming the fork, and dropping the store there does nothing (the parent's store goes on
/// working).
#[pyclass(frozen, weakref, name = "TcpStore", module = "rpjrt.distributed")]
pub struct PyTcpStore {
    tcp: Arc<TcpStore>,
    store: Arc<dyn Rendezvous>,
    /// Whether the store is a peer's (every call goes to the host, and may wait on it).
    remote: bool,
}

impl PyTcpStore {
    fn wrap(t: TcpStore) -> PyTcpStore {
        let tcp = Arc::new(t);
        PyTcpStore {
            store: tcp.clone(),
            remote: !tcp.is_host(),
            tcp,
        }
    }
}

store_class!(PyTcpStore {
    /// Hosts the store on `address` ("127.0.0.1:0" picks a free port).
    #[staticmethod]
    fn host(py: Python<'_>, address: &str, token: &str) -> PyResult<PyTcpStore> {
        py.detach_call(|| TcpStore::host(address, token))
            .pyerr()
            .map(PyTcpStore::wrap)
    }
    /// Connects to the store at `address` as `process_id`, waiting up to `timeout` seconds.
    #[staticmethod]
    #[pyo3(
        signature = (address, token, process_id, timeout = None),
        text_signature = "(address, token, process_id, timeout=30.0)"
    )]
    fn connect(
        py: Python<'_>,
        address: &str,
        token: &str,
        process_id: &Bound<'_, PyAny>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTcpStore> {
        let p = process_arg(process_id, "process_id")?;
        let t = secs_arg(timeout, DEFAULT_TIMEOUT, "timeout")?;
        let (address, token) = (address.to_string(), token.to_string());
        cancellable(py, "connecting to the key-value store", move || {
            TcpStore::connect(&address, &token, p, t)
        })?
        .pyerr()
        .map(PyTcpStore::wrap)
    }
    /// The address the store is hosted on.
    #[getter]
    fn address(&self) -> String {
        self.tcp.address().to_string()
    }
    /// Whether this process hosts the store.
    #[getter]
    fn is_host(&self) -> bool {
        self.tcp.is_host()
    }
    /// Stops the host (after waiting up to `grace` seconds for peers to leave) or closes
    /// this client's connections. Returns whether every peer had left in time. Ctrl-C
    /// ends the wait: the host then stops at once, and `KeyboardInterrupt` is raised.
    /// Refused in a process forked from the one that made the store.
    #[pyo3(signature = (grace = None), text_signature = "(self, grace=0.0)")]
    fn shutdown(&self, py: Python<'_>, grace: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        let g = secs_arg(grace, 0.0, "grace")?;
        self.tcp.check_not_forked().pyerr()?;
        if g.is_zero() || !self.tcp.is_host() {
            // No wait for peers (a peer's goodbye is bounded by a brief grace of its own).
            return Ok(py.detach_call(|| self.tcp.shutdown_after(g)));
        }
        let tcp = Arc::clone(&self.tcp);
        let r = cancellable(py, "shutting down the key-value store host", move || {
            tcp.shutdown_after(g)
        });
        if r.is_err() {
            // Interrupted: stop now (the wait given up on ends with it).
            py.detach_call(|| self.tcp.shutdown());
        }
        r
    }
    fn __repr__(&self) -> String {
        format!("{:?}", self.tcp)
    }
});

/// A Python object with `set(key, value)`, `get(key, timeout)` and `try_get(key)`, used
/// as a store by the plugin. Each call takes the GIL; client creation releases it first.
/// The object is one of `rpjrt.distributed`'s bounded stores (an adapter, or any other
/// object wrapped in `BoundedStore` by [`store_from_py`]), so every call returns within
/// its bound even when the object's own method never does.
///
/// The plugin keeps its store as long as the C client lives, which other objects of the
/// client may prolong; the Python object, though, is the `Client`'s ([`PyClientStore`]):
/// this store reaches it through a weak reference, and fails once the Client let it go
/// (`close()`, or the Client's collection). So a store that refers back to its Client
/// forms a cycle the collector sees through the Client alone.
struct PyObjectStore {
    /// A weak reference to the Client's [`PyClientStore`].
    owner: Py<PyWeakrefReference>,
}

impl PyObjectStore {
    /// The Python store, while its Client holds it.
    fn store<'py>(&self, py: Python<'py>) -> rpjrt::Result<Bound<'py, PyAny>> {
        let gone = || rpjrt::Error::Store {
            code: Code::FailedPrecondition,
            message: "the Python key-value store was released: its rpjrt.Client was closed \
                      or garbage-collected"
                .into(),
        };
        let owner = self
            .owner
            .bind(py)
            .upgrade_as::<PyClientStore>()
            .ok()
            .flatten()
            .ok_or_else(gone)?;
        let obj = owner
            .get()
            .obj
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|o| o.clone_ref(py))
            .ok_or_else(gone)?;
        Ok(obj.into_bound(py))
    }
}

/// The Python store of a `Client(kv=...)`, held by the Client alone (the plugin's store
/// reaches it weakly: [`PyObjectStore`]). `__traverse__` visits it, so that a store that
/// refers back to its Client (an object that is both) is a cycle the collector reclaims;
/// `__clear__`, and the Client's `close()`, let it go.
#[pyclass(frozen, weakref, name = "_ClientStore", module = "rpjrt._rpjrt")]
pub struct PyClientStore {
    obj: std::sync::Mutex<Option<Py<PyAny>>>,
}

#[pymethods]
impl PyClientStore {
    /// Visits the store object (the lock is held only briefly, by threads that hold the
    /// GIL; a held one is not waited for).
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Ok(obj) = self.obj.try_lock() {
            visit.call(obj.as_ref())?;
        }
        Ok(())
    }

    /// Lets go of the store object (the plugin's later calls to it fail).
    fn __clear__(&self) {
        let obj = self.obj.lock().unwrap_or_else(|p| p.into_inner()).take();
        drop(obj);
    }
}

/// A store method's exception as a store error, coded by the one exception table. A
/// `BaseException` that is not an `Exception` (`KeyboardInterrupt`, `SystemExit`) is kept
/// as a custom-call handler's is (`ffi::keep_base_exception`): the error that reaches
/// Python (`Client(kv=...)` failing) raises it as itself.
fn store_err(py: Python<'_>, e: PyErr, what: &str) -> rpjrt::Error {
    let mut message = format!(
        "the Python store's {what} raised {}: {}",
        e.get_type(py)
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default(),
        e.value(py)
    );
    if !e.is_instance_of::<pyo3::exceptions::PyException>(py) {
        message.push_str(&crate::ffi::keep_base_exception(
            py,
            &e,
            &format!("the key-value store's {what}"),
        ));
    }
    rpjrt::Error::Store {
        code: crate::errors::code_of_exception(py, &e),
        message,
    }
}

/// A store method's result as bytes (the bounded stores hand back `bytes`; anything else
/// is the store's error, named).
fn store_bytes(v: &Bound<'_, PyAny>, what: &str) -> rpjrt::Result<Vec<u8>> {
    match v.cast::<PyBytes>() {
        Ok(b) => Ok(b.as_bytes().to_vec()),
        Err(_) => Err(rpjrt::Error::Store {
            code: Code::InvalidArgument,
            message: format!(
                "the Python store's {what} returned {}, not bytes",
                v.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ),
        }),
    }
}

impl KvStore for PyObjectStore {
    fn set(&self, key: &str, value: &[u8]) -> rpjrt::Result<()> {
        Python::attach(|py| {
            self.store(py)?
                .call_method1("set", (key, PyBytes::new(py, value)))
                .map(|_| ())
                .map_err(|e| store_err(py, e, "set"))
        })
    }
    fn get(&self, key: &str, timeout: Duration) -> rpjrt::Result<Vec<u8>> {
        Python::attach(|py| {
            let v = self
                .store(py)?
                .call_method1("get", (key, timeout.as_secs_f64()))
                .map_err(|e| store_err(py, e, "get"))?;
            store_bytes(&v, &format!("get({key:?})"))
        })
    }
    fn try_get(&self, key: &str) -> rpjrt::Result<Option<Vec<u8>>> {
        Python::attach(|py| {
            let v = self
                .store(py)?
                .call_method1("try_get", (key,))
                .map_err(|e| store_err(py, e, "try_get"))?;
            if v.is_none() {
                return Ok(None);
            }
            store_bytes(&v, &format!("try_get({key:?})")).map(Some)
        })
    }
}

/// The store behind `kv`: a Rust store as is; one of `rpjrt.distributed`'s bounded
/// stores (the adapters, `BoundedStore`) through its methods; any other object wrapped in
/// `BoundedStore` first, so that a method that never returns cannot hang the plugin. For a
/// Python store, also the [`PyClientStore`] that holds it, for the Client to keep (the
/// plugin's store reaches it weakly).
fn store_from_py(kv: &Bound<'_, PyAny>) -> PyResult<StoreAndHolder> {
    if let Ok(s) = kv.cast::<PyInMemoryStore>() {
        return Ok((s.get().store.clone() as Arc<dyn KvStore>, None));
    }
    if let Ok(s) = kv.cast::<PyTcpStore>() {
        return Ok((s.get().store.clone() as Arc<dyn KvStore>, None));
    }
    for m in ["set", "get", "try_get"] {
        if !kv.hasattr(m)? {
            return Err(invalid(format!(
                "kv must be a key-value store with set, get and try_get methods; {} has no {m}",
                kv.get_type().name()?
            )));
        }
    }
    let dist = kv.py().import("rpjrt.distributed")?;
    let bounded = if kv.is_instance(&dist.getattr("BoundedStore")?)? {
        kv.clone()
    } else {
        dist.getattr("BoundedStore")?.call1((kv,))?
    };
    let py = kv.py();
    let owner = Py::new(
        py,
        PyClientStore {
            obj: std::sync::Mutex::new(Some(bounded.unbind())),
        },
    )?;
    let weak = PyWeakrefReference::new(owner.bind(py).as_any())?.unbind();
    Ok((Arc::new(PyObjectStore { owner: weak }), Some(owner)))
}

/// A store for the plugin, and the holder of its Python object (for a Python store).
type StoreAndHolder = (Arc<dyn KvStore>, Option<Py<PyClientStore>>);

/// What `Client(kv=..., process_id=..., num_processes=...)` makes of its arguments: the
/// core's options, and for a Python store the holder the Client keeps ([`store_from_py`]).
pub struct DistributedFromPy {
    pub options: DistributedOptions,
    pub store: Option<Py<PyClientStore>>,
}

/// The distributed options of `Client(kv=..., process_id=..., num_processes=...)`; the id
/// and count go through [`process_arg`].
pub fn distributed_from_py(
    kv: Option<&Bound<'_, PyAny>>,
    process_id: Option<&Bound<'_, PyAny>>,
    num_processes: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<DistributedFromPy>> {
    let p = opt_process_arg(process_id, "process_id")?;
    let n = opt_process_arg(num_processes, "num_processes")?;
    match (kv.filter(|k| !k.is_none()), p, n) {
        (None, None, None) => Ok(None),
        (Some(kv), Some(p), Some(n)) => {
            check_world(p, n).pyerr()?;
            let (store, holder) = store_from_py(kv)?;
            Ok(Some(DistributedFromPy {
                options: DistributedOptions::new(store, p, n).pyerr()?,
                store: holder,
            }))
        }
        _ => Err(invalid(
            "a multi-process client needs kv, process_id and num_processes together",
        )),
    }
}

/// The launch environment of this process, as a dict (process_id, num_processes,
/// coordinator, token, source), from the variables of rpjrt launch, torchrun, Open MPI,
/// PMI or Slurm.
#[pyfunction]
pub fn _detect_launch_env(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let env = LaunchEnv::detect().pyerr()?;
    env_dict(py, &env)
}

/// `distributed.initialize`: the launch environment (`LaunchEnv::resolve`) as a dict, and
/// the job's store joined under it (`TcpStore::from_env`: process 0 hosts, the others
/// connect, waiting up to `timeout` seconds; it returns once every process has joined).
#[pyfunction]
#[pyo3(signature = (process_id, num_processes, coordinator, token, timeout))]
pub fn _initialize<'py>(
    py: Python<'py>,
    process_id: Option<&Bound<'py, PyAny>>,
    num_processes: Option<&Bound<'py, PyAny>>,
    coordinator: Option<String>,
    token: Option<String>,
    timeout: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyDict>, PyTcpStore)> {
    let p = opt_process_arg(process_id, "process_id")?;
    let n = opt_process_arg(num_processes, "num_processes")?;
    let t = secs_arg(timeout, DEFAULT_TIMEOUT, "timeout")?;
    let env = LaunchEnv::resolve(p, n, coordinator, token).pyerr()?;
    let joining = env.clone();
    // Ctrl-C cancels the join: a host it started stops (its port free again) before
    // `KeyboardInterrupt` is raised, so a retry can host on the same address.
    let store = cancellable(py, "joining the job's key-value store", move || {
        TcpStore::from_env(&joining, t)
    })?
    .pyerr()?;
    Ok((env_dict(py, &env)?, PyTcpStore::wrap(store)))
}

fn env_dict<'py>(py: Python<'py>, env: &LaunchEnv) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("process_id", env.process_id)?;
    d.set_item("num_processes", env.num_processes)?;
    d.set_item("coordinator", &env.coordinator)?;
    d.set_item("token", &env.token)?;
    d.set_item("source", env.source.name())?;
    Ok(d)
}

/// The first host of a Slurm node list (`node[01-04,07]` → `node01`).
#[pyfunction]
pub fn _first_host(list: &str) -> PyResult<String> {
    rpjrt_distributed::first_host(list).pyerr()
}

/// The bytes of a bytes-like value (`bytes`, `bytearray`, a contiguous `memoryview` ...),
/// copied; anything else (a `str` included) is refused by name.
fn bytes_like(value: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let view = HostView::get(value);
    // A buffer of Python object pointers (numpy dtype=object, or a structured dtype with
    // such a field) holds this process's addresses, not data: refused like a str.
    let objects = view
        .as_ref()
        .map(HostView::format)
        .filter(|f| holds_objects(f))
        .map_or(String::new(), |f| {
            format!(" (its buffer holds Python object pointers, format {f:?}, not data)")
        });
    let bytes = view
        .as_ref()
        .filter(|_| objects.is_empty())
        .and_then(HostView::contiguous_bytes)
        .ok_or_else(|| {
            pyo3::exceptions::PyTypeError::new_err(format!(
                "a store value is a contiguous bytes-like object (bytes, bytearray, \
             memoryview), not {}{objects}",
                value
                    .get_type()
                    .name()
                    .map_or("?".into(), |n| n.to_string())
            ))
        })?;
    Ok(bytes.to_vec())
}

/// Whether a buffer's struct-module format holds Python object pointers (`O`), at the top
/// level or in a field of a structured format (`T{<i8:a:O:b:}`); field names (between
/// colons) are not codes and are skipped.
fn holds_objects(format: &str) -> bool {
    let mut in_name = false;
    for c in format.chars() {
        match c {
            ':' => in_name = !in_name,
            'O' if !in_name => return true,
            _ => {}
        }
    }
    false
}
