//! Key-value stores for multi-process clients: the Rust stores as Python classes, any
//! Python object with `set`/`get`/`try_get` as a store for the plugin, and launch-env
//! detection. The GIL is released whenever a store may wait.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use rpjrt::Code;
use rpjrt_distributed::{
    DistributedOptions, InMemoryStore, KvStore, LaunchEnv, Rendezvous, TcpStore,
};

use crate::errors::{invalid, PyErrExt};

fn secs(timeout: f64, what: &str) -> PyResult<Duration> {
    rpjrt::duration_from_secs(timeout, what).pyerr()
}

/// The `#[pymethods]` of a Rust store's class: what every store has (`set`, `get`,
/// `try_get`, `barrier` on its `store` field, each releasing the GIL while it may wait)
/// and the class's own items.
macro_rules! store_class {
    ($class:ty { $($own:tt)* }) => {
        #[pymethods]
        impl $class {
            fn set(&self, py: Python<'_>, key: &str, value: &[u8]) -> PyResult<()> {
                let value = value.to_vec();
                py.detach(|| self.store.set(key, &value)).pyerr()
            }
            #[pyo3(signature = (key, timeout = 30.0))]
            fn get<'py>(
                &self,
                py: Python<'py>,
                key: &str,
                timeout: f64,
            ) -> PyResult<Bound<'py, PyBytes>> {
                let t = secs(timeout, "timeout")?;
                let v = py.detach(|| self.store.get(key, t)).pyerr()?;
                Ok(PyBytes::new(py, &v))
            }
            fn try_get<'py>(
                &self,
                py: Python<'py>,
                key: &str,
            ) -> PyResult<Option<Bound<'py, PyBytes>>> {
                let v = py.detach(|| self.store.try_get(key)).pyerr()?;
                Ok(v.map(|v| PyBytes::new(py, &v)))
            }
            #[pyo3(signature = (name, process_id, num_processes, timeout = 30.0))]
            fn barrier(
                &self,
                py: Python<'_>,
                name: &str,
                process_id: usize,
                num_processes: usize,
                timeout: f64,
            ) -> PyResult<()> {
                let t = secs(timeout, "timeout")?;
                py.detach(|| self.store.barrier(name, process_id, num_processes, t))
                    .pyerr()
            }
            $($own)*
        }
    };
}

/// A key-value store in this process's memory, shared by its threads.
#[pyclass(frozen, name = "InMemoryStore", module = "rpjrt.distributed")]
pub struct PyInMemoryStore {
    store: Arc<dyn Rendezvous>,
}

store_class!(PyInMemoryStore {
    #[new]
    fn new() -> PyInMemoryStore {
        PyInMemoryStore {
            store: Arc::new(InMemoryStore::new()),
        }
    }
    fn __repr__(&self) -> String {
        "InMemoryStore()".into()
    }
});

/// The TCP key-value store: process 0 hosts it, the others connect with the job's token.
#[pyclass(frozen, name = "TcpStore", module = "rpjrt.distributed")]
pub struct PyTcpStore {
    tcp: Arc<TcpStore>,
    store: Arc<dyn Rendezvous>,
}

impl PyTcpStore {
    fn wrap(t: TcpStore) -> PyTcpStore {
        let tcp = Arc::new(t);
        PyTcpStore {
            store: tcp.clone(),
            tcp,
        }
    }
}

store_class!(PyTcpStore {
    /// Hosts the store on `address` ("127.0.0.1:0" picks a free port).
    #[staticmethod]
    fn host(py: Python<'_>, address: &str, token: &str) -> PyResult<PyTcpStore> {
        py.detach(|| TcpStore::host(address, token))
            .pyerr()
            .map(PyTcpStore::wrap)
    }
    /// Connects to the store at `address` as `process_id`, waiting up to `timeout` seconds.
    #[staticmethod]
    #[pyo3(signature = (address, token, process_id, timeout = 30.0))]
    fn connect(
        py: Python<'_>,
        address: &str,
        token: &str,
        process_id: usize,
        timeout: f64,
    ) -> PyResult<PyTcpStore> {
        let t = secs(timeout, "timeout")?;
        py.detach(|| TcpStore::connect(address, token, process_id, t))
            .pyerr()
            .map(PyTcpStore::wrap)
    }
    #[getter]
    fn address(&self) -> String {
        self.tcp.address().to_string()
    }
    #[getter]
    fn is_host(&self) -> bool {
        self.tcp.is_host()
    }
    /// Stops the host (after waiting up to `grace` seconds for peers to leave) or closes
    /// this client's connections. Returns whether every peer had left in time.
    #[pyo3(signature = (grace = 0.0))]
    fn shutdown(&self, py: Python<'_>, grace: f64) -> PyResult<bool> {
        let g = secs(grace, "grace")?;
        Ok(py.detach(|| self.tcp.shutdown_after(g)))
    }
    fn __repr__(&self) -> String {
        format!("{:?}", self.tcp)
    }
});

/// A Python object with `set(key, value)`, `get(key, timeout)` and `try_get(key)`, used
/// as a store by the plugin. Each call takes the GIL; client creation releases it first.
struct PyObjectStore {
    obj: Py<PyAny>,
}

/// A store method's exception as a store error, coded by the one exception table.
fn store_err(py: Python<'_>, e: PyErr, what: &str) -> rpjrt::Error {
    rpjrt::Error::Store {
        code: crate::errors::code_of_exception(py, &e),
        message: format!("the Python store's {what} raised {}", e.value(py)),
    }
}

impl KvStore for PyObjectStore {
    fn set(&self, key: &str, value: &[u8]) -> rpjrt::Result<()> {
        Python::attach(|py| {
            self.obj
                .call_method1(py, "set", (key, PyBytes::new(py, value)))
                .map(|_| ())
                .map_err(|e| store_err(py, e, "set"))
        })
    }
    fn get(&self, key: &str, timeout: Duration) -> rpjrt::Result<Vec<u8>> {
        Python::attach(|py| {
            let v = self
                .obj
                .call_method1(py, "get", (key, timeout.as_secs_f64()))
                .map_err(|e| store_err(py, e, "get"))?;
            v.extract::<Vec<u8>>(py).map_err(|_| rpjrt::Error::Store {
                code: Code::InvalidArgument,
                message: format!("the Python store's get({key:?}) returned a non-bytes value"),
            })
        })
    }
    fn try_get(&self, key: &str) -> rpjrt::Result<Option<Vec<u8>>> {
        Python::attach(|py| {
            let v = self
                .obj
                .call_method1(py, "try_get", (key,))
                .map_err(|e| store_err(py, e, "try_get"))?;
            if v.is_none(py) {
                return Ok(None);
            }
            v.extract::<Vec<u8>>(py)
                .map(Some)
                .map_err(|_| rpjrt::Error::Store {
                    code: Code::InvalidArgument,
                    message: format!(
                        "the Python store's try_get({key:?}) returned neither bytes nor None"
                    ),
                })
        })
    }
}

/// The store behind `kv`: a Rust store as is, any other object through its methods.
fn store_from_py(kv: &Bound<'_, PyAny>) -> PyResult<Arc<dyn KvStore>> {
    if let Ok(s) = kv.cast::<PyInMemoryStore>() {
        return Ok(s.get().store.clone() as Arc<dyn KvStore>);
    }
    if let Ok(s) = kv.cast::<PyTcpStore>() {
        return Ok(s.get().store.clone() as Arc<dyn KvStore>);
    }
    for m in ["set", "get", "try_get"] {
        if !kv.hasattr(m)? {
            return Err(invalid(format!(
                "kv must be a key-value store with set, get and try_get methods; {} has no {m}",
                kv.get_type().name()?
            )));
        }
    }
    Ok(Arc::new(PyObjectStore {
        obj: kv.clone().unbind(),
    }))
}

/// The distributed options of `Client(kv=..., process_id=..., num_processes=...)`.
pub fn distributed_from_py(
    kv: Option<&Bound<'_, PyAny>>,
    process_id: Option<usize>,
    num_processes: Option<usize>,
) -> PyResult<Option<DistributedOptions>> {
    match (kv, process_id, num_processes) {
        (None, None, None) => Ok(None),
        (Some(kv), Some(p), Some(n)) => Ok(Some(
            DistributedOptions::new(store_from_py(kv)?, p, n).pyerr()?,
        )),
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
pub fn _initialize(
    py: Python<'_>,
    process_id: Option<i64>,
    num_processes: Option<i64>,
    coordinator: Option<String>,
    token: Option<String>,
    timeout: f64,
) -> PyResult<(Bound<'_, PyDict>, PyTcpStore)> {
    let count = |v: Option<i64>| -> PyResult<Option<usize>> {
        v.map(|v| {
            usize::try_from(v).map_err(|_| {
                invalid(format!(
                    "process_id {} is out of range for {} processes",
                    process_id.unwrap_or(v),
                    num_processes.unwrap_or(v)
                ))
            })
        })
        .transpose()
    };
    let t = secs(timeout, "timeout")?;
    let env = LaunchEnv::resolve(
        count(process_id)?,
        count(num_processes)?,
        coordinator,
        token,
    )
    .pyerr()?;
    let store = py.detach(|| TcpStore::from_env(&env, t)).pyerr()?;
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
