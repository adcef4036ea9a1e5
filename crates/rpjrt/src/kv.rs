//! The seam between a multi-process client and the key-value store it rendezvouses
//! through: the [`KvStore`] interface the plugin's callbacks call, and the
//! [`DistributedOptions`] that [`crate::Client::new_distributed`] takes.
//!
//! The stores themselves (in-process, TCP), barriers, launch-environment detection and
//! launchers live in the `rpjrt-distributed` crate, built on this interface; any type
//! that implements [`KvStore`] can serve a client.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};

/// A key-value store shared by the processes of one job.
///
/// Every method may be called from any thread, including threads the plugin owns, and
/// concurrently. Implementations must return within the time they are given (`get`) or
/// within their own bounded I/O timeout (`set`, `try_get`): a plugin waiting on a store
/// that never answers would hang client creation. Errors are best reported as
/// [`Error::Store`] with a code (`DEADLINE_EXCEEDED` for a wait that ran out).
pub trait KvStore: Send + Sync {
    /// Stores `value` under `key`, replacing any earlier value.
    fn set(&self, key: &str, value: &[u8]) -> Result<()>;

    /// Waits up to `timeout` for `key` to be set and returns its value. Errors with code
    /// `DEADLINE_EXCEEDED` when the time runs out.
    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>>;

    /// The value of `key` if it is set now, without waiting.
    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>>;
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
        if num_processes == 0 {
            return Err(Error::invalid(
                "num_processes must be at least 1 (a job has at least one process)",
            ));
        }
        if process_id >= num_processes {
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

/// 128 random bits as 32 hex digits, for a word a job's processes share and no one else
/// can guess: a store's token, a protocol line's mark. Read from the kernel's random
/// source, or where that cannot be read, hashed from the standard library's per-process
/// random keys, the time and the process id.
///
/// ```
/// let (a, b) = (rpjrt::random_token(), rpjrt::random_token());
/// assert!(a.len() == 32 && a.bytes().all(|c| c.is_ascii_hexdigit()));
/// assert_ne!(a, b);
/// ```
pub fn random_token() -> String {
    let mut bytes = [0u8; 16];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .is_ok();
    if !ok {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        h.write_u32(std::process::id());
        bytes[..8].copy_from_slice(&h.finish().to_le_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
