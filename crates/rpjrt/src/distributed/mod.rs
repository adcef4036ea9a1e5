//! Many processes: the key-value store a plugin rendezvouses through, the stores rpjrt
//! ships (in-process and TCP), and the launch environment of common launchers.
//!
//! A multi-process PJRT client exchanges facts with its peers (device lists, addresses)
//! through a key-value store that the caller hands to `PJRT_Client_Create` as callbacks.
//! [`KvStore`] is that store's interface; [`DistributedOptions`] carries it, with this
//! process's index and the process count, into [`crate::Client::new_distributed`].
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use rpjrt::distributed::{KvStore, LaunchEnv, TcpStore};
//!
//! # fn main() -> rpjrt::Result<()> {
//! let env = LaunchEnv::detect()?;              // RPJRT_*, torchrun, Slurm, Open MPI, PMI
//! let store = TcpStore::from_env(&env, Duration::from_secs(30))?;   // process 0 hosts
//! store.barrier("ready", env.process_id, env.num_processes, Duration::from_secs(30))?;
//! store.shutdown();
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Code, Error, Result};

mod launch;
mod memory;
mod tcp;

pub use launch::{first_host, LaunchEnv, LaunchOutcome, LaunchSource, Launcher, DEFAULT_PORT};
pub use memory::InMemoryStore;
pub use tcp::{TcpStore, PROTOCOL_MAGIC};

/// A key-value store shared by the processes of one job.
///
/// Every method may be called from any thread, including threads the plugin owns, and
/// concurrently. Implementations must return within the time they are given (`get`) or
/// within their own bounded I/O timeout (`set`, `try_get`): a plugin waiting on a store
/// that never answers would hang client creation.
pub trait KvStore: Send + Sync {
    /// Stores `value` under `key`, replacing any earlier value.
    fn set(&self, key: &str, value: &[u8]) -> Result<()>;

    /// Waits up to `timeout` for `key` to be set and returns its value. Errors with code
    /// `DEADLINE_EXCEEDED` when the time runs out.
    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>>;

    /// The value of `key` if it is set now, without waiting.
    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>>;

    /// Waits until each of `num_processes` processes has called `barrier` with the same
    /// `name`, or until `timeout` runs out. The error names every process that did not
    /// arrive in time.
    fn barrier(
        &self,
        name: &str,
        process_id: usize,
        num_processes: usize,
        timeout: Duration,
    ) -> Result<()> {
        barrier_on(self, name, process_id, num_processes, timeout)
    }
}

impl<T: KvStore + ?Sized> KvStore for Arc<T> {
    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        (**self).set(key, value)
    }
    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>> {
        (**self).get(key, timeout)
    }
    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        (**self).try_get(key)
    }
    fn barrier(&self, name: &str, pid: usize, n: usize, timeout: Duration) -> Result<()> {
        (**self).barrier(name, pid, n, timeout)
    }
}

/// The barrier every [`KvStore`] gets: each process sets `rpjrt:barrier:<name>:<id>`, then
/// waits for the others' keys; a timeout names the processes whose keys never came.
pub fn barrier_on<S: KvStore + ?Sized>(
    store: &S,
    name: &str,
    process_id: usize,
    num_processes: usize,
    timeout: Duration,
) -> Result<()> {
    barrier_with(
        store,
        name,
        process_id,
        num_processes,
        timeout,
        None,
        &|_| Ok(()),
    )
}

/// [`barrier_on`], waiting in slices of `poll` (when given) and asking `alive(p)` after
/// each slice whether process `p` can still arrive (an error ends the wait at once).
pub(crate) fn barrier_with<S: KvStore + ?Sized>(
    store: &S,
    name: &str,
    process_id: usize,
    num_processes: usize,
    timeout: Duration,
    poll: Option<Duration>,
    alive: &dyn Fn(usize) -> Result<()>,
) -> Result<()> {
    if process_id >= num_processes {
        return Err(Error::invalid(format!(
            "process id {process_id} is out of range for {num_processes} processes"
        )));
    }
    let deadline = Instant::now() + timeout;
    store.set(&barrier_key(name, process_id), b"1")?;
    for p in (0..num_processes).filter(|&p| p != process_id) {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let slice = poll.map_or(left, |s| s.min(left));
            match store.get(&barrier_key(name, p), slice) {
                Ok(_) => break,
                Err(e) if e.code() == Code::DeadlineExceeded => {
                    if Instant::now() < deadline {
                        alive(p)?;
                        continue;
                    }
                    let mut missing = vec![p];
                    for q in (p + 1..num_processes).filter(|&q| q != process_id) {
                        if store.try_get(&barrier_key(name, q))?.is_none() {
                            missing.push(q);
                        }
                    }
                    return Err(missing_processes(name, &missing, num_processes, timeout));
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

fn barrier_key(name: &str, p: usize) -> String {
    format!("rpjrt:barrier:{name}:{p}")
}

fn missing_processes(name: &str, missing: &[usize], n: usize, timeout: Duration) -> Error {
    let who = if missing.len() == 1 {
        format!("process {}", missing[0])
    } else {
        let ids: Vec<String> = missing.iter().map(|p| p.to_string()).collect();
        format!("processes {}", ids.join(", "))
    };
    store_error(
        Code::DeadlineExceeded,
        format!(
            "{who} of {n} did not reach barrier {name:?} within {:.1}s (never started, \
             crashed, or cannot reach the store)",
            timeout.as_secs_f64()
        ),
    )
}

/// A [`KvStore`] as the raw layer's KV callbacks see it.
pub(crate) struct Backend(pub(crate) Arc<dyn KvStore>);

impl crate::raw::kv::KvBackend for Backend {
    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        self.0.set(key, value)
    }
    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>> {
        self.0.get(key, timeout)
    }
    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.0.try_get(key)
    }
}

/// A store error with `code` and `message`.
pub(crate) fn store_error(code: Code, message: impl Into<String>) -> Error {
    Error::Store {
        code,
        message: message.into(),
    }
}

/// What a multi-process client needs at creation: the store, this process's index and the
/// number of processes.
#[derive(Clone)]
pub struct DistributedOptions {
    /// The store the plugin exchanges keys through.
    pub store: Arc<dyn KvStore>,
    /// This process's index, `0..num_processes`.
    pub process_id: usize,
    /// The number of processes in the job.
    pub num_processes: usize,
}

impl DistributedOptions {
    /// Options for process `process_id` of `num_processes`, rendezvousing on `store`.
    pub fn new(
        store: Arc<dyn KvStore>,
        process_id: usize,
        num_processes: usize,
    ) -> Result<DistributedOptions> {
        if num_processes == 0 || process_id >= num_processes {
            return Err(Error::invalid(format!(
                "process id {process_id} is out of range for {num_processes} processes \
                 (ids run from 0 to num_processes - 1)"
            )));
        }
        Ok(DistributedOptions {
            store,
            process_id,
            num_processes,
        })
    }
}

impl fmt::Debug for DistributedOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DistributedOptions(process {} of {})",
            self.process_id, self.num_processes
        )
    }
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::KvStore;
    use std::sync::Arc;
    use std::time::Duration;

    /// 8 clients (made by `make(i)`) each write 1,000 keys at once, then each reads
    /// another client's keys back (waiting for them) and its own (without waiting): no
    /// value may be lost or mixed up.
    pub(crate) fn hammer(make: impl Fn(usize) -> Arc<dyn KvStore>) {
        const CLIENTS: usize = 8;
        const KEYS: usize = 1000;
        let value = |c: usize, k: usize| format!("value of {k} from {c}").into_bytes();
        let stores: Vec<Arc<dyn KvStore>> = (0..CLIENTS).map(&make).collect();
        std::thread::scope(|s| {
            for (c, store) in stores.iter().enumerate() {
                s.spawn(move || {
                    for k in 0..KEYS {
                        store.set(&format!("c{c}/k{k}"), &value(c, k)).unwrap();
                    }
                    let other = (c + 1) % CLIENTS;
                    for k in 0..KEYS {
                        let got = store
                            .get(&format!("c{other}/k{k}"), Duration::from_secs(30))
                            .unwrap();
                        assert_eq!(got, value(other, k));
                        let own = store.try_get(&format!("c{c}/k{k}")).unwrap();
                        assert_eq!(own, Some(value(c, k)));
                    }
                });
            }
        });
    }
}
