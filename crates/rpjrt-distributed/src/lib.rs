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

mod cancel;
mod launch;
mod memory;
mod tcp;

pub use cancel::Cancel;

pub use launch::signal_name;
pub use launch::{
    first_host, LaunchEnv, LaunchOutcome, LaunchSource, Launcher, OutputCut, OutputSink,
    DEFAULT_PORT, MAX_LOCAL_PROCESSES, OUTPUT_IDLE_LIMIT, STOP_GRACE,
};
pub use memory::InMemoryStore;
pub use rpjrt::{DistributedOptions, KvStore};
pub use tcp::{
    Departure, TcpStore, MAX_ENTRY_BYTES, MAX_KEY_BYTES, MAX_TOKEN_BYTES, PROTOCOL_MAGIC,
};

/// The most processes a job may have: the TCP store's protocol carries a process id in 32
/// bits, so ids run from 0 to `u32::MAX - 1`. Every count and id that rpjrt takes from a
/// caller or a launcher's environment is checked against it ([`check_world`]).
pub const MAX_PROCESSES: usize = u32::MAX as usize;

/// Checks a process's place in a job before anything uses it: at least one process, at
/// most [`MAX_PROCESSES`], and `process_id` below `num_processes`. Barriers, launch
/// environments and the TCP store call it first, so a bad pair is refused before the
/// store is touched.
///
/// ```
/// use rpjrt_distributed::check_world;
/// assert!(check_world(1, 2).is_ok());
/// assert!(check_world(2, 2).unwrap_err().to_string().contains("out of range for 2"));
/// assert!(check_world(0, 0).unwrap_err().to_string().contains("at least 1"));
/// ```
pub fn check_world(process_id: usize, num_processes: usize) -> Result<()> {
    match world_problem(process_id, num_processes) {
        None => Ok(()),
        Some(why) => Err(invalid(why)),
    }
}

/// What is wrong with `process_id` of `num_processes`, if anything ([`check_world`]).
pub(crate) fn world_problem(process_id: usize, num_processes: usize) -> Option<String> {
    if num_processes == 0 {
        return Some("num_processes must be at least 1 (a job has at least one process)".into());
    }
    if num_processes > MAX_PROCESSES {
        return Some(format!(
            "num_processes {num_processes} is above the limit of {MAX_PROCESSES} processes"
        ));
    }
    if process_id >= num_processes {
        return Some(format!(
            "process id {process_id} is out of range for {num_processes} processes \
             (ids run from 0 to {})",
            num_processes - 1
        ));
    }
    None
}

/// A [`KvStore`] the processes of a job can meet at: [`Rendezvous::barrier`].
///
/// Every store gets the key-based barrier of [`barrier_on`]; a store that knows more
/// (the TCP store knows which peers are still connected) overrides it. A store that can
/// remove keys says so by implementing [`Rendezvous::delete`]: its barriers then remove
/// the arrivals of old generations, so that a barrier met at every step of a long job
/// keeps the store's size bounded.
pub trait Rendezvous: KvStore {
    /// Waits until each of `num_processes` processes has called `barrier` with the same
    /// `name`, or until `timeout` runs out. The error names every process that did not
    /// arrive in time. A name may be used again: each use is a new generation, which
    /// waits for every process to arrive again.
    ///
    /// A process id is at a barrier once at a time: a call with the same store handle,
    /// `name` and `process_id` while another is still waiting there (two threads claiming
    /// one id) is refused at once with `FAILED_PRECONDITION`, naming the id; the waiting
    /// call goes on unharmed and the generations stay aligned.
    ///
    /// An arrival is not taken back when the wait times out: a process whose barrier
    /// failed has still arrived at that generation, so a process that arrives there later
    /// passes it at once, without waiting for the one that gave up. Every process's count
    /// of uses still moves on by one, so the generations stay aligned: when every process
    /// calls the barrier again (after all of them failed, or after the late ones passed),
    /// they meet in the next generation as usual.
    ///
    /// A barrier whose call is cancelled ([`Cancel`]; Python's Ctrl-C) ends within 100 ms,
    /// takes its arrival back (where the store can delete keys) and gives its use back:
    /// calling it again waits at the same generation, so a retry meets the others. (A
    /// process that saw the arrival before it was taken back has passed; the retry then
    /// passes too, at once.)
    ///
    /// Each arrival carries the `num_processes` it was called with: a process that finds
    /// another that arrived with a different count fails at once, naming both counts. A
    /// `process_id` out of range for `num_processes`, and a `num_processes` of 0 or above
    /// [`MAX_PROCESSES`], are refused before the store is touched.
    ///
    /// What it keeps in the store, per name and process: the count of uses and, once a
    /// use has passed, that use's arrival (the arrivals of older uses are removed with
    /// [`Rendezvous::delete`], at most 64 per use; a store without it keeps them all).
    /// The count is read back from the store: one that is damaged, or at [`u64::MAX`],
    /// fails the barrier with `DATA_LOSS` saying what is wrong with it.
    fn barrier(
        &self,
        name: &str,
        process_id: usize,
        num_processes: usize,
        timeout: Duration,
    ) -> Result<()> {
        barrier_with(
            self,
            self as *const Self as *const () as usize,
            name,
            process_id,
            num_processes,
            timeout,
            &Hooks {
                delete: Some(&|k: &str| self.delete(k)),
                ..Hooks::plain(name)
            },
        )
    }

    /// Removes `key` and its value; returns whether it was set. The stores of this crate
    /// implement it (the TCP store over its protocol, from the host and from a peer);
    /// the default says `UNIMPLEMENTED`, and a barrier over such a store keeps every
    /// arrival.
    fn delete(&self, key: &str) -> Result<bool> {
        Err(store_error(
            Code::Unimplemented,
            format!(
                "this key-value store cannot delete keys (asked to delete {})",
                shown(key)
            ),
        ))
    }
}

impl<T: Rendezvous + ?Sized> Rendezvous for Arc<T> {
    fn barrier(&self, name: &str, pid: usize, n: usize, timeout: Duration) -> Result<()> {
        (**self).barrier(name, pid, n, timeout)
    }
    fn delete(&self, key: &str) -> Result<bool> {
        (**self).delete(key)
    }
}

/// The barrier for any [`KvStore`]. Process `p`'s `k`-th use of `name` (counted in the
/// store, under a key only `p` writes) sets `rpjrt:barrier:<name>:<k>:<p>` to the decimal
/// `num_processes` it was called with, and waits for the other processes' keys of
/// generation `k`; a timeout names the processes whose keys never came, and a key holding
/// another count fails the barrier at once. Every process must use the same names in the
/// same order. A [`KvStore`] cannot delete keys, so this barrier keeps every generation's
/// arrivals; [`Rendezvous::barrier`] on a store with [`Rendezvous::delete`] removes them.
pub fn barrier_on<S: KvStore + ?Sized>(
    store: &S,
    name: &str,
    process_id: usize,
    num_processes: usize,
    timeout: Duration,
) -> Result<()> {
    barrier_with(
        store,
        store as *const S as *const () as usize,
        name,
        process_id,
        num_processes,
        timeout,
        &Hooks::plain(name),
    )
}

/// What removes a key from a store ([`Rendezvous::delete`]).
pub(crate) type Deleter<'a> = dyn Fn(&str) -> Result<bool> + 'a;

/// What a store adds to the key-based barrier ([`barrier_with`]).
pub(crate) struct Hooks<'a> {
    /// Wait in slices of this (when given), asking `alive` after each.
    pub(crate) poll: Option<Duration>,
    /// Whether process `p` can still arrive (an error ends the wait at once).
    pub(crate) alive: &'a dyn Fn(usize) -> Result<()>,
    /// What a timeout says the missing processes did not do ("reach barrier \"b\"").
    pub(crate) what: String,
    /// Removes a key (the arrivals of old generations); `None`: keys stay.
    pub(crate) delete: Option<&'a Deleter<'a>>,
}

impl Hooks<'static> {
    /// No polling, every process alive, no deletion, the plain wording.
    pub(crate) fn plain(name: &str) -> Hooks<'static> {
        fn always(_: usize) -> Result<()> {
            Ok(())
        }
        Hooks {
            poll: None,
            alive: &always,
            what: format!("reach barrier {}", shown(name)),
            delete: None,
        }
    }
}

/// Process `p`'s arrival at generation `generation` of barrier `name`.
fn arrival_key(name: &str, generation: u64, p: usize) -> String {
    format!("rpjrt:barrier:{name}:{generation}:{p}")
}

/// [`barrier_on`] with a store's `hooks` (polling and liveness, deletion of old
/// arrivals). `owner` identifies the store handle (its address) for the
/// one-entry-at-a-time check.
pub(crate) fn barrier_with<S: KvStore + ?Sized>(
    store: &S,
    owner: usize,
    name: &str,
    process_id: usize,
    num_processes: usize,
    timeout: Duration,
    hooks: &Hooks<'_>,
) -> Result<()> {
    check_world(process_id, num_processes)?;
    cancel::check()?;
    let deadline = deadline_after(timeout);
    // One entry per (store, name, process id) at a time: the use count is read, then
    // written, so two threads entering together took one generation between them, and
    // the barrier blamed the wrong process and stayed out of step afterwards.
    let _entry = BarrierEntry::enter(owner, name, process_id)?;
    let counter = format!("rpjrt:barrier-uses:{name}:{process_id}");
    let before = store.try_get(&counter)?;
    let uses = Uses::parse(name, &counter, before.as_deref())?;
    let generation = uses.used;
    let mine = arrival_key(name, generation, process_id);
    let next_used = uses.next_use(name, &counter)?;
    let result = (|| {
        // The count as it will stand once this use passed and its older arrivals are
        // gone: one write in the usual case (a failure below writes it again).
        let next = Uses {
            used: next_used,
            from: generation,
        };
        store.set(&counter, next.text().as_bytes())?;
        store.set(&mine, num_processes.to_string().as_bytes())?;
        wait_for_arrivals(
            store,
            name,
            generation,
            process_id,
            num_processes,
            timeout,
            deadline,
            hooks,
        )
    })();
    match result {
        Ok(()) => {
            // Every process arrived here, so every process has ended its calls of the
            // older generations: nobody reads this process's older arrivals again.
            // The range comes from the store (another program sharing it, or damage, may
            // have written any count): at most `MAX_CLEANUP` keys per use, for at most
            // `LOOKUP_TIME`, and not past a cancel; what is left stays in the count for
            // the next uses to remove.
            if let Some(delete) = hooks.delete {
                let stop = Instant::now() + LOOKUP_TIME;
                let mut g = uses.from;
                while g < generation {
                    let tried = g - uses.from;
                    if tried >= MAX_CLEANUP
                        || tried > 0 && (Instant::now() >= stop || cancel::check().is_err())
                    {
                        break;
                    }
                    let _ = cancel::shielded(|| delete(&arrival_key(name, g, process_id)));
                    g += 1;
                }
                if g < generation {
                    let left = Uses {
                        used: next_used,
                        from: g,
                    };
                    let _ = cancel::shielded(|| store.set(&counter, left.text().as_bytes()));
                }
            }
            Ok(())
        }
        Err(e) if cancel::ended_by_cancel(&e) => {
            // Given up on: the arrival is taken back and the use given back, so that
            // calling the barrier again waits at this generation.
            cancel::shielded(|| {
                if let Some(delete) = hooks.delete {
                    let _ = delete(&mine);
                }
                let _ = match (&before, hooks.delete) {
                    (Some(v), _) => store.set(&counter, v),
                    (None, Some(delete)) => delete(&counter).map(drop),
                    (None, None) => store.set(&counter, b"0"),
                };
            });
            Err(if e.code() == Code::Cancelled {
                e
            } else {
                cancel::cancelled_error()
            })
        }
        Err(e) => {
            // The arrival stands (see `Rendezvous::barrier`): the count keeps the older
            // arrivals still stored, for the next use that passes to remove.
            if hooks.delete.is_some() && uses.from < generation {
                let keep = Uses {
                    used: next_used,
                    from: uses.from,
                };
                let _ = cancel::shielded(|| store.set(&counter, keep.text().as_bytes()));
            }
            Err(e)
        }
    }
}

/// Waits for every other process's arrival at `generation` of barrier `name` (see
/// [`barrier_with`]).
#[allow(clippy::too_many_arguments)]
fn wait_for_arrivals<S: KvStore + ?Sized>(
    store: &S,
    name: &str,
    generation: u64,
    process_id: usize,
    num_processes: usize,
    timeout: Duration,
    deadline: Instant,
    hooks: &Hooks<'_>,
) -> Result<()> {
    let key = |p: usize| arrival_key(name, generation, p);
    // A peer's arrival must carry this process's count: one called with another count
    // waits for a different set of processes, and would otherwise leave one side waiting
    // until its timeout for a process the other never counted.
    let same_world = |p: usize, arrival: &[u8]| -> Result<()> {
        arrival_matches(name, process_id, num_processes, p, arrival)
    };
    for p in (0..num_processes).filter(|&p| p != process_id) {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let slice = hooks.poll.map_or(left, |s| s.min(left));
            match store.get(&key(p), slice) {
                Ok(arrival) => {
                    same_world(p, &arrival)?;
                    break;
                }
                Err(e) if e.code() == Code::DeadlineExceeded => {
                    cancel::check()?;
                    if Instant::now() < deadline {
                        (hooks.alive)(p)?;
                        continue;
                    }
                    // The others are looked up once each, up to a bound: a job of a
                    // million processes must not cost a million round trips to report.
                    // And for a bounded time: a report must not outlast the timeout by
                    // more than a moment, however slow the store's round trips.
                    let stop = Instant::now() + LOOKUP_TIME;
                    let mut missing = vec![p];
                    let rest = (p + 1..num_processes).filter(|&q| q != process_id);
                    let mut checked = 0usize;
                    for q in rest.clone().take(MAX_LOOKED_UP) {
                        if Instant::now() >= stop {
                            break;
                        }
                        checked += 1;
                        match store.try_get(&key(q))? {
                            None => missing.push(q),
                            // A mismatch explains the wait better than a missing list.
                            Some(arrival) => same_world(q, &arrival)?,
                        }
                    }
                    // Counted, not iterated: a world size of billions must not turn
                    // the report of a timeout into a wait of minutes.
                    let later = num_processes - (p + 1) - usize::from(process_id > p);
                    let unchecked = later - checked;
                    return Err(missing_processes(
                        &hooks.what,
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

/// A process's count of uses of a barrier name, as its counter key holds it: `used` uses
/// began, and its arrivals of generations `from..used` may still be stored. Written
/// `"<used>"` when `from` is `used - 1` (only the latest arrival stored, the usual case),
/// else `"<used> <from>"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Uses {
    used: u64,
    from: u64,
}

impl Uses {
    fn text(self) -> String {
        if self.from == self.used.saturating_sub(1) {
            self.used.to_string()
        } else {
            format!("{} {}", self.used, self.from)
        }
    }

    /// The counter's value (`None`: no use yet). A value that is not one or two decimal
    /// numbers, whose oldest generation is above its count, or whose count is at the
    /// largest number a count can hold (so that no further use can be counted) is a
    /// `DATA_LOSS` error saying which.
    fn parse(name: &str, counter: &str, value: Option<&[u8]>) -> Result<Uses> {
        let Some(value) = value else {
            return Ok(Uses { used: 0, from: 0 });
        };
        let damaged = |what: String| {
            store_error(
                Code::DataLoss,
                format!(
                    "barrier {}: the store's use count {} {what}; it is rpjrt's own key, \
                     written only by this process's barriers: another program sharing the \
                     store, or damage, changed it. Delete it (and the \
                     name's arrival keys) with every process stopped, or use another \
                     barrier name",
                    shown(name),
                    shown(counter)
                ),
            )
        };
        let text = String::from_utf8_lossy(value);
        let shown_value = shown(&text);
        let number = |t: &str| {
            (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())).then(|| t.parse::<u64>().ok())
        };
        let mut parts = text.split(' ');
        let fields = (parts.next(), parts.next(), parts.next());
        let (used, from) = match fields {
            (Some(u), from, None) => (number(u), from.map(number)),
            _ => (None, None),
        };
        let out_of_range = |n: &str| {
            damaged(format!(
                "holds {shown_value}, whose {n} is beyond the largest count ({})",
                u64::MAX
            ))
        };
        let used = match used {
            None => {
                return Err(damaged(format!(
                    "holds {shown_value}, which is not a count"
                )))
            }
            Some(None) => return Err(out_of_range("count")),
            Some(Some(u)) => u,
        };
        let from = match from {
            None => used.saturating_sub(1),
            Some(None) => {
                return Err(damaged(format!(
                    "holds {shown_value}, which is not a count"
                )))
            }
            Some(Some(None)) => return Err(out_of_range("oldest generation")),
            Some(Some(Some(f))) if f > used => {
                return Err(damaged(format!(
                    "holds {shown_value}: its oldest stored generation {f} is above its \
                     count of uses {used}"
                )))
            }
            Some(Some(Some(f))) => f,
        };
        Ok(Uses { used, from })
    }

    /// The count once the use at generation `used` began; a count already at the largest
    /// number ([`u64::MAX`]) is refused rather than wrapped to 0.
    fn next_use(self, name: &str, counter: &str) -> Result<u64> {
        self.used.checked_add(1).ok_or_else(|| {
            store_error(
                Code::DataLoss,
                format!(
                    "barrier {}: the store's use count {} is at the largest count ({}), so \
                     another use cannot be counted; it is rpjrt's own key: another program \
                     sharing the store, or damage, set it. Delete it (and the \
                     name's arrival keys) with every process stopped, or use another \
                     barrier name",
                    shown(name),
                    shown(counter),
                    self.used
                ),
            )
        })
    }
}

/// Checks that process `p`'s arrival at barrier `name` (the decimal process count it was
/// called with) matches this process's `num_processes`.
fn arrival_matches(
    name: &str,
    process_id: usize,
    num_processes: usize,
    p: usize,
    arrival: &[u8],
) -> Result<()> {
    let theirs = std::str::from_utf8(arrival)
        .ok()
        .and_then(|t| t.parse::<usize>().ok());
    match theirs {
        Some(n) if n == num_processes => Ok(()),
        Some(n) => Err(invalid(format!(
            "barrier {}: process {p} arrived with num_processes {n}, but this \
             process ({process_id}) was called with num_processes {num_processes}: every \
             process must pass the same count",
            shown(name)
        ))),
        None => Err(store_error(
            Code::DataLoss,
            format!(
                "barrier {}: process {p}'s arrival holds {:?}, not a process count \
                 (another program wrote the barrier's key, or an older rpjrt did)",
                shown(name),
                String::from_utf8_lossy(&arrival[..arrival.len().min(64)])
            ),
        )),
    }
}

/// The barriers being waited at in this process: (store address, name, process id), with
/// the fork generation they were entered in (a fork's copy of its parent's entries, whose
/// threads it does not have, is forgotten).
static IN_BARRIER: std::sync::Mutex<Entries> = std::sync::Mutex::new((0, Vec::new()));

/// The fork generation and the barrier entries of this process.
type Entries = (u32, Vec<(usize, String, usize)>);

/// A barrier entry of this process, held while the barrier is waited at: a second entry
/// for the same store handle, name and process id is refused until it ends.
struct BarrierEntry(usize, String, usize);

/// The entries of this process (a fork's inherited ones forgotten).
fn in_barrier() -> std::sync::MutexGuard<'static, Entries> {
    let mut inside = IN_BARRIER.lock().unwrap_or_else(|p| p.into_inner());
    let generation = rpjrt::fork_generation();
    if inside.0 != generation {
        *inside = (generation, Vec::new());
    }
    inside
}

impl BarrierEntry {
    fn enter(at: usize, name: &str, process_id: usize) -> Result<Self> {
        let mut inside = in_barrier();
        if inside
            .1
            .iter()
            .any(|(s, n, p)| *s == at && n == name && *p == process_id)
        {
            return Err(store_error(
                Code::FailedPrecondition,
                format!(
                    "barrier {}: process id {process_id} is already waiting at this barrier \
                     on this store (another thread of this process called it with the same \
                     process id and is still waiting, or an earlier call that was given up \
                     on is still ending); each process id may be at a barrier once at a \
                     time: give every participant its own id",
                    shown(name)
                ),
            ));
        }
        inside.1.push((at, name.to_string(), process_id));
        Ok(Self(at, name.to_string(), process_id))
    }
}

impl Drop for BarrierEntry {
    fn drop(&mut self) {
        let mut inside = in_barrier();
        if let Some(i) = inside
            .1
            .iter()
            .position(|(s, n, p)| *s == self.0 && *n == self.1 && *p == self.2)
        {
            inside.1.swap_remove(i);
        }
    }
}

/// How many other processes a timed-out barrier looks up to name the missing ones.
const MAX_LOOKED_UP: usize = 10_000;
/// How long a timed-out barrier spends looking them up, at most.
const LOOKUP_TIME: Duration = Duration::from_millis(500);

/// The most arrivals of older generations one passed barrier removes (the rest are left
/// to the next uses, a count of which the counter keeps).
const MAX_CLEANUP: u64 = 64;
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
            "{who} of {n} did not {what} within {} (never started, \
             crashed, or cannot reach the store){more}",
            duration_text(timeout)
        ),
    )
}

/// A duration for a message, exactly as it is, in a short form (see
/// [`rpjrt::stdio::duration_text`], which the CLI and the conformance harness use too).
pub use rpjrt::stdio::duration_text;

/// A measured duration rounded for a message: to the millisecond from one on, else to
/// the microsecond ([`duration_text`] shows a duration exactly, to the nanosecond).
pub(crate) fn rounded(d: Duration) -> Duration {
    let unit = if d >= Duration::from_millis(1) {
        Duration::from_millis(1)
    } else {
        Duration::from_micros(1)
    };
    rpjrt::stdio::rounded_to(d, unit)
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

/// How many bytes of a key or barrier name an error message shows at most.
const SHOWN_KEY_BYTES: usize = 48;

/// A key, barrier name, address or variable's value as an error message shows it: quoted
/// whole when short, else its first few dozen characters and its length, so that a message
/// stays short however long the text a caller passed (a key of 64 MiB made a 64 MiB
/// message; a `--coordinator` of 100 KB was echoed whole).
pub fn shown(key: &str) -> String {
    if key.len() <= SHOWN_KEY_BYTES {
        return format!("{key:?}");
    }
    let mut end = SHOWN_KEY_BYTES;
    while !key.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}... ({} bytes)", &key[..end], key.len())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::InMemoryStore;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const LONG: Duration = Duration::from_secs(30);

    #[test]
    fn durations_are_shown_exactly_never_rounded_to_another_value() {
        // 1.96 s read "2.0s", and 1e-10 s (0 ns) read "0.0s".
        let ns = Duration::from_nanos;
        for (d, want) in [
            (Duration::from_secs_f64(1.96), "1.96s"),
            (Duration::from_secs_f64(1.999), "1.999s"),
            (Duration::from_secs_f64(2.0000001), "2.0000001s"),
            (Duration::from_secs(2), "2.0s"),
            (Duration::from_secs(30), "30.0s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(300), "0.3s"),
            (Duration::from_millis(350), "350ms"),
            (Duration::from_micros(1), "0.001ms"),
            (Duration::from_micros(1500), "1.5ms"),
            (ns(1_000_001), "1.000001ms"),
            (ns(999), "999ns"),
            (ns(1), "1ns"),
            (Duration::ZERO, "0.0s"),
            (Duration::MAX, "18446744073709551615.999999999s"),
        ] {
            assert_eq!(duration_text(d), want, "{d:?}");
        }
        assert_eq!(rounded(ns(1_234_567_891)), Duration::from_millis(1235));
        assert_eq!(rounded(ns(1_499)), Duration::from_micros(1));
        assert_eq!(rounded(Duration::MAX), Duration::new(u64::MAX, 0));
    }

    /// Two processes of one barrier, each called with its own world size; both errors.
    fn two_sizes(first: (usize, usize), second: (usize, usize)) -> (Error, Error, Duration) {
        let s = Arc::new(InMemoryStore::new());
        let start = Instant::now();
        let s2 = Arc::clone(&s);
        let a = std::thread::spawn(move || s2.barrier("sizes", first.0, first.1, LONG));
        let b = s.barrier("sizes", second.0, second.1, LONG);
        let a = a.join().unwrap();
        (a.unwrap_err(), b.unwrap_err(), start.elapsed())
    }

    #[test]
    fn two_world_sizes_fail_at_once_on_both_sides_naming_both() {
        let (a, b, took) = two_sizes((0, 2), (1, 3));
        assert!(took < Duration::from_secs(5), "{took:?}: {a} / {b}");
        for (e, me, mine, peer, theirs) in [(&a, 0, 2, 1, 3), (&b, 1, 3, 0, 2)] {
            assert_eq!(e.code(), Code::InvalidArgument, "{e}");
            let want = format!(
                "barrier \"sizes\": process {peer} arrived with num_processes {theirs}, but \
                 this process ({me}) was called with num_processes {mine}"
            );
            assert!(e.to_string().contains(&want), "{e}");
        }
    }

    #[test]
    fn a_mismatch_is_seen_by_whoever_looks_at_the_other_arrival() {
        // Process 2 of 3 is out of range for the world of 2: the side that counts 3 sees
        // process 0's arrival (with 2) and fails at once.
        let s = InMemoryStore::new();
        s.set("rpjrt:barrier:b:0:0", b"2").unwrap();
        let start = Instant::now();
        let e = s.barrier("b", 2, 3, LONG).unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(
            e.to_string()
                .contains("process 0 arrived with num_processes 2"),
            "{e}"
        );
        // Found while naming the missing processes after a timeout: the mismatch is
        // reported, not process 1 as missing.
        let s = InMemoryStore::new();
        s.set("rpjrt:barrier:b:0:2", b"4").unwrap();
        let e = s
            .barrier("b", 0, 3, Duration::from_millis(100))
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(
            e.to_string()
                .contains("process 2 arrived with num_processes 4"),
            "{e}"
        );
    }

    #[test]
    fn an_arrival_that_is_not_a_count_is_data_loss() {
        let s = InMemoryStore::new();
        s.set("rpjrt:barrier:b:0:1", b"\xffjunk").unwrap();
        let e = s.barrier("b", 0, 2, LONG).unwrap_err();
        assert_eq!(e.code(), Code::DataLoss, "{e}");
        assert!(e.to_string().contains("not a process count"), "{e}");
    }

    #[test]
    fn the_same_world_size_still_meets_and_a_name_is_reused() {
        let s = Arc::new(InMemoryStore::new());
        for _round in 0..3 {
            let ts: Vec<_> = (0..4)
                .map(|p| {
                    let s = Arc::clone(&s);
                    std::thread::spawn(move || s.barrier("again", p, 4, LONG))
                })
                .collect();
            for t in ts {
                t.join().unwrap().unwrap();
            }
        }
        assert_eq!(
            s.try_get("rpjrt:barrier:again:2:3").unwrap().as_deref(),
            Some(&b"4"[..])
        );
    }

    /// A store that counts every call and serves none.
    #[derive(Default)]
    struct Untouchable(AtomicUsize);

    impl KvStore for Untouchable {
        fn set(&self, _: &str, _: &[u8]) -> Result<()> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Err(invalid("touched"))
        }
        fn get(&self, _: &str, _: Duration) -> Result<Vec<u8>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Err(invalid("touched"))
        }
        fn try_get(&self, _: &str) -> Result<Option<Vec<u8>>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Err(invalid("touched"))
        }
    }

    #[test]
    fn bad_ids_and_counts_are_refused_before_the_store_is_touched() {
        let s = Untouchable::default();
        let cases: [(usize, usize, &str); 5] = [
            (0, 0, "num_processes must be at least 1"),
            (
                2,
                2,
                "process id 2 is out of range for 2 processes (ids run from 0 to 1)",
            ),
            (7, 3, "process id 7 is out of range for 3 processes"),
            (
                0,
                MAX_PROCESSES + 1,
                "above the limit of 4294967295 processes",
            ),
            (usize::MAX, usize::MAX, "above the limit"),
        ];
        for (p, n, want) in cases {
            let e = barrier_on(&s, "b", p, n, LONG).unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{e}");
            assert!(e.to_string().contains(want), "({p}, {n}): {e}");
        }
        assert_eq!(s.0.load(Ordering::SeqCst), 0, "the store was touched");
        assert!(check_world(MAX_PROCESSES - 1, MAX_PROCESSES).is_ok());
    }
}
