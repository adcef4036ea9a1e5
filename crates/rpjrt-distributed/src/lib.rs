//! Many processes for rpjrt: the key-value stores a multi-process client rendezvouses
//! through (in-process and TCP), barriers with generations, the launch environment of
//! common launchers, and a local launcher (`rpjrt launch`).
//!
//! A multi-process PJRT client exchanges facts with its peers (device lists, addresses)
//! through a key-value store that the caller hands to `PJRT_Client_Create` as callbacks.
//! The interface of that store, [`KvStore`], and [`DistributedOptions`] belong to the
//! core crate (re-exported here); this crate builds stores and rendezvous on top of
//! them, using only rpjrt's public API.
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use rpjrt_distributed::{DistributedOptions, LaunchEnv, Rendezvous, TcpStore};
//!
//! # fn main() -> rpjrt::Result<()> {
//! let env = LaunchEnv::detect()?;              // RPJRT_*, torchrun, Slurm, Open MPI, PMI
//! // Process 0 hosts, the others connect; returns once every process has joined.
//! let store = Arc::new(TcpStore::from_env(&env, Duration::from_secs(30))?);
//! let dist = DistributedOptions::new(store.clone(), env.process_id, env.num_processes)?;
//! // ... rpjrt::Client::new_distributed(&plugin, &options, &dist) ...
//! store.barrier("ready", env.process_id, env.num_processes, Duration::from_secs(30))?;
//! store.shutdown_after(Duration::from_secs(30)); // the host waits for every goodbye
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use rpjrt::{Code, Error, Result};

mod launch;
mod memory;
mod tcp;

pub use launch::{
    first_host, LaunchEnv, LaunchOutcome, LaunchSource, Launcher, OutputSink, DEFAULT_PORT,
    MAX_LOCAL_PROCESSES,
};
pub use memory::InMemoryStore;
pub use rpjrt::{DistributedOptions, KvStore};
pub use tcp::{TcpStore, MAX_ENTRY_BYTES, PROTOCOL_MAGIC};

/// A [`KvStore`] the processes of a job can meet at: [`Rendezvous::barrier`].
///
/// Every store gets the key-based barrier of [`barrier_on`]; a store that knows more
/// (the TCP store knows which peers are still connected) overrides it.
pub trait Rendezvous: KvStore {
    /// Waits until each of `num_processes` processes has called `barrier` with the same
    /// `name`, or until `timeout` runs out. The error names every process that did not
    /// arrive in time. A name may be used again: each use is a new generation, which
    /// waits for every process to arrive again.
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

impl<T: Rendezvous + ?Sized> Rendezvous for Arc<T> {
    fn barrier(&self, name: &str, pid: usize, n: usize, timeout: Duration) -> Result<()> {
        (**self).barrier(name, pid, n, timeout)
    }
}

/// The barrier for any [`KvStore`]. Process `p`'s `k`-th use of `name` (counted in the
/// store, under a key only `p` writes) sets `rpjrt:barrier:<name>:<k>:<p>` and waits for
/// the other processes' keys of generation `k`; a timeout names the processes whose keys
/// never came. Every process must use the same names in the same order.
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
        &format!("reach barrier {name:?}"),
    )
}

/// [`barrier_on`], waiting in slices of `poll` (when given) and asking `alive(p)` after
/// each slice whether process `p` can still arrive (an error ends the wait at once). A
/// timeout says the missing processes did not `what` ("reach barrier \"b\"").
#[allow(clippy::too_many_arguments)]
pub(crate) fn barrier_with<S: KvStore + ?Sized>(
    store: &S,
    name: &str,
    process_id: usize,
    num_processes: usize,
    timeout: Duration,
    poll: Option<Duration>,
    alive: &dyn Fn(usize) -> Result<()>,
    what: &str,
) -> Result<()> {
    if process_id >= num_processes {
        return Err(invalid(format!(
            "process id {process_id} is out of range for {num_processes} processes"
        )));
    }
    let deadline = deadline_after(timeout);
    let generation = next_generation(store, name, process_id)?;
    let key = |p: usize| format!("rpjrt:barrier:{name}:{generation}:{p}");
    store.set(&key(process_id), b"1")?;
    for p in (0..num_processes).filter(|&p| p != process_id) {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let slice = poll.map_or(left, |s| s.min(left));
            match store.get(&key(p), slice) {
                Ok(_) => break,
                Err(e) if e.code() == Code::DeadlineExceeded => {
                    if Instant::now() < deadline {
                        alive(p)?;
                        continue;
                    }
                    // The others are looked up once each, up to a bound: a job of a
                    // million processes must not cost a million round trips to report.
                    let mut missing = vec![p];
                    let rest = (p + 1..num_processes).filter(|&q| q != process_id);
                    let mut checked = 0usize;
                    for q in rest.clone().take(MAX_LOOKED_UP) {
                        checked += 1;
                        if store.try_get(&key(q))?.is_none() {
                            missing.push(q);
                        }
                    }
                    // Counted, not iterated: a world size of billions must not turn
                    // the report of a timeout into a wait of minutes.
                    let later = num_processes - (p + 1) - usize::from(process_id > p);
                    let unchecked = later - checked;
                    return Err(missing_processes(
                        what,
                        &missing,
                        unchecked,
                        num_processes,
                        timeout,
                    ));
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// The generation of this process's next use of barrier `name`, kept in the store under a
/// key only this process writes (so every handle on the store sees the same count).
fn next_generation<S: KvStore + ?Sized>(store: &S, name: &str, process_id: usize) -> Result<u64> {
    let counter = format!("rpjrt:barrier-uses:{name}:{process_id}");
    let used = match store.try_get(&counter)? {
        None => 0,
        Some(v) => std::str::from_utf8(&v)
            .ok()
            .and_then(|t| t.parse::<u64>().ok())
            .ok_or_else(|| {
                store_error(
                    Code::DataLoss,
                    format!("barrier {name:?}: the store's use count {counter:?} is not a number"),
                )
            })?,
    };
    store.set(&counter, (used + 1).to_string().as_bytes())?;
    Ok(used)
}

/// How many other processes a timed-out barrier looks up to name the missing ones.
const MAX_LOOKED_UP: usize = 10_000;
/// How many runs of missing ids a message lists before it counts the rest.
const MAX_RUNS_SHOWN: usize = 20;

/// `missing` (ascending) as runs, `1-3, 7, 9-12`, at most [`MAX_RUNS_SHOWN`] of them.
fn id_runs(missing: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &p in missing {
        match runs.last_mut() {
            Some((_, hi)) if *hi + 1 == p => *hi = p,
            _ => runs.push((p, p)),
        }
    }
    let shown: Vec<String> = runs
        .iter()
        .take(MAX_RUNS_SHOWN)
        .map(|&(lo, hi)| match hi - lo {
            0 => lo.to_string(),
            1 => format!("{lo}, {hi}"),
            _ => format!("{lo}-{hi}"),
        })
        .collect();
    let hidden: usize = runs
        .iter()
        .skip(MAX_RUNS_SHOWN)
        .map(|(lo, hi)| hi - lo + 1)
        .sum();
    match hidden {
        0 => shown.join(", "),
        h => format!("{} and {h} more", shown.join(", ")),
    }
}

fn missing_processes(
    what: &str,
    missing: &[usize],
    unchecked: usize,
    n: usize,
    timeout: Duration,
) -> Error {
    let who = if missing.len() == 1 && unchecked == 0 {
        format!("process {}", missing[0])
    } else {
        format!("processes {}", id_runs(missing))
    };
    let more = match unchecked {
        0 => String::new(),
        u => format!(" ({u} later processes were not looked up)"),
    };
    store_error(
        Code::DeadlineExceeded,
        format!(
            "{who} of {n} did not {what} within {:.1}s (never started, \
             crashed, or cannot reach the store){more}",
            timeout.as_secs_f64()
        ),
    )
}

/// `now + after`, saturating: a wait given as "forever" (`Duration::MAX`) is a wait
/// of about a century, not an overflow panic.
pub(crate) fn deadline_after(after: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(after)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 24 * 3600)))
        .unwrap_or(now)
}

/// A store error with `code` and `message`.
pub(crate) fn store_error(code: Code, message: impl Into<String>) -> Error {
    Error::Store {
        code,
        message: message.into(),
    }
}

/// An invalid-argument error.
pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidArgument(message.into())
}

/// An environment variable as text, `None` when unset or empty. A value that is not UTF-8
/// keeps its other characters (with replacement characters), so that it fails the
/// caller's parse with a message naming it, instead of passing for unset.
pub(crate) fn env_text(name: &str) -> Option<String> {
    let v = std::env::var_os(name)?;
    Some(v.to_string_lossy().into_owned()).filter(|v| !v.is_empty())
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
