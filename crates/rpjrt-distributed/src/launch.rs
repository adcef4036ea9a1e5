//! Where this process sits in a job: process id, process count, coordinator address and
//! token, read from the environment of the common launchers; and a local launcher that
//! starts N processes with that environment (`rpjrt launch`).

use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rpjrt::Result;
use rpjrt_raw::process::{signal_child_tree_in, ProcessTree};

use crate::env_text;

/// The port the coordinator listens on when the launcher names only a host (Slurm) and
/// `RPJRT_COORDINATOR_PORT` does not say otherwise.
pub const DEFAULT_PORT: u16 = 57_471;

/// Which launcher's variables [`LaunchEnv::detect`] used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LaunchSource {
    /// Given by the caller.
    Explicit,
    /// `rpjrt launch` (`RPJRT_PROCESS_ID`, `RPJRT_NUM_PROCESSES`, `RPJRT_COORDINATOR`).
    Rpjrt,
    /// torchrun / torch.distributed.launch (`RANK`, `WORLD_SIZE`, `MASTER_ADDR`, ...).
    Torchrun,
    /// Open MPI's mpirun (`OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`).
    OpenMpi,
    /// A PMI launcher such as MPICH's or Intel MPI's (`PMI_RANK`, `PMI_SIZE`).
    Pmi,
    /// Slurm's srun (`SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_NODELIST`).
    Slurm,
}

impl LaunchSource {
    /// A short lower-case name: `explicit`, `rpjrt`, `torchrun`, `openmpi`, `pmi`, `slurm`.
    pub fn name(self) -> &'static str {
        match self {
            LaunchSource::Explicit => "explicit",
            LaunchSource::Rpjrt => "rpjrt",
            LaunchSource::Torchrun => "torchrun",
            LaunchSource::OpenMpi => "openmpi",
            LaunchSource::Pmi => "pmi",
            LaunchSource::Slurm => "slurm",
        }
    }
}

impl fmt::Display for LaunchSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// This process's place in a multi-process job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchEnv {
    /// This process's index, `0..num_processes`.
    pub process_id: usize,
    /// The number of processes.
    pub num_processes: usize,
    /// `host:port` where process 0 hosts the store, when known.
    pub coordinator: Option<String>,
    /// The job's shared secret, when known (see [`LaunchEnv::detect`]).
    pub token: Option<String>,
    /// Which launcher's variables these came from.
    pub source: LaunchSource,
}

/// True for text that is a decimal integer as a launcher writes one: ASCII digits only,
/// at least one (no sign, no spaces, no other text).
fn decimal(t: &str) -> bool {
    !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())
}

/// The error for launcher variable `set` given without its partner `missing`.
fn half_pair(set: &str, missing: &str) -> rpjrt::Error {
    crate::invalid(format!(
        "{set} is set but {missing} is not: set both (or neither, to let another launcher's \
         variables or explicit arguments decide)"
    ))
}

/// A launcher's count or id variable: a decimal integer from 0 to [`MAX_PROCESSES`]
/// (`crate::MAX_PROCESSES`); a sign, spaces, other text or a larger value is an error
/// naming it.
fn parse_num(get: &dyn Fn(&str) -> Option<String>, name: &str) -> Result<Option<usize>> {
    let Some(v) = get(name) else {
        return Ok(None);
    };
    if !decimal(&v) {
        return Err(crate::invalid(format!(
            "environment variable {name}={} is not a non-negative integer (decimal digits \
             only: no sign, spaces or other text)",
            crate::shown(&v)
        )));
    }
    match v.parse::<usize>() {
        Ok(n) if n <= crate::MAX_PROCESSES => Ok(Some(n)),
        _ => Err(crate::invalid(format!(
            "environment variable {name}={} is above the limit of {} processes",
            crate::shown(&v),
            crate::MAX_PROCESSES
        ))),
    }
}

/// A launcher's port variable (`MASTER_PORT`, `RPJRT_COORDINATOR_PORT`): a decimal
/// integer from 0 to 65535, as [`parse_num`] reads a count.
fn parse_port(name: &str, v: &str) -> Result<u16> {
    match v.parse::<u16>() {
        Ok(n) if decimal(v) => Ok(n),
        _ => Err(crate::invalid(format!(
            "environment variable {name}={} is not a port (a decimal integer from 0 to \
             65535, with no sign, spaces or other text)",
            crate::shown(v)
        ))),
    }
}

impl LaunchEnv {
    /// Explicit values, checked.
    pub fn explicit(
        process_id: usize,
        num_processes: usize,
        coordinator: Option<String>,
        token: Option<String>,
    ) -> Result<LaunchEnv> {
        LaunchEnv {
            process_id,
            num_processes,
            coordinator,
            token,
            source: LaunchSource::Explicit,
        }
        .checked()
    }

    fn checked(self) -> Result<LaunchEnv> {
        match crate::world_problem(self.process_id, self.num_processes) {
            None => Ok(self),
            Some(why) => Err(crate::invalid(format!("{why} (from {})", self.source))),
        }
    }

    /// The launch environment of `initialize`-style arguments, reading this process's
    /// environment; see [`LaunchEnv::resolve_from`].
    pub fn resolve(
        process_id: Option<usize>,
        num_processes: Option<usize>,
        coordinator: Option<String>,
        token: Option<String>,
    ) -> Result<LaunchEnv> {
        LaunchEnv::resolve_from(env_text, process_id, num_processes, coordinator, token)
    }

    /// The launch environment of `initialize`-style arguments: with `process_id` and
    /// `num_processes` both given, those (checked; source [`LaunchSource::Explicit`]) with
    /// the coordinator and token defaulting to `RPJRT_COORDINATOR` and `RPJRT_TOKEN`;
    /// with neither, what [`LaunchEnv::detect_from`] finds, `coordinator` and `token`
    /// overriding it. One without the other is an error. An empty `coordinator` counts as
    /// none.
    pub fn resolve_from(
        get: impl Fn(&str) -> Option<String>,
        process_id: Option<usize>,
        num_processes: Option<usize>,
        coordinator: Option<String>,
        token: Option<String>,
    ) -> Result<LaunchEnv> {
        let coordinator = coordinator.filter(|c| !c.is_empty());
        match (process_id, num_processes) {
            (Some(p), Some(n)) => LaunchEnv::explicit(
                p,
                n,
                coordinator.or_else(|| get("RPJRT_COORDINATOR")),
                token.or_else(|| get("RPJRT_TOKEN")),
            ),
            (None, None) => {
                let mut env = LaunchEnv::detect_from(get)?;
                if coordinator.is_some() {
                    env.coordinator = coordinator;
                }
                if token.is_some() {
                    env.token = token;
                }
                Ok(env)
            }
            _ => Err(crate::invalid(
                "give both process_id and num_processes, or neither",
            )),
        }
    }

    /// Reads the environment of this process; see [`LaunchEnv::detect_from`].
    pub fn detect() -> Result<LaunchEnv> {
        LaunchEnv::detect_from(env_text)
    }

    /// Detects the launcher from variables that `get` returns, trying in order:
    ///
    /// 1. rpjrt: `RPJRT_PROCESS_ID`, `RPJRT_NUM_PROCESSES`.
    /// 2. torchrun: `RANK`, `WORLD_SIZE`; coordinator `MASTER_ADDR` at `MASTER_PORT + 1`
    ///    (torch's own store already listens on `MASTER_PORT`); token `TORCHELASTIC_RUN_ID`.
    /// 3. Open MPI: `OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`.
    /// 4. PMI: `PMI_RANK`, `PMI_SIZE`.
    /// 5. Slurm: `SLURM_PROCID`, `SLURM_NTASKS` (or `SLURM_NPROCS`); coordinator the first
    ///    host of `SLURM_STEP_NODELIST` / `SLURM_JOB_NODELIST` / `SLURM_NODELIST` at
    ///    `RPJRT_COORDINATOR_PORT` or [`DEFAULT_PORT`]; token from `SLURM_JOB_ID` and
    ///    `SLURM_STEP_ID`.
    ///
    /// Whatever the launcher, `RPJRT_COORDINATOR` (`host:port`) and `RPJRT_TOKEN` override
    /// the coordinator and token. A token derived from a job id only keeps jobs from
    /// mixing by accident; set `RPJRT_TOKEN` to a secret to keep other users out.
    pub fn detect_from(get: impl Fn(&str) -> Option<String>) -> Result<LaunchEnv> {
        let get: &dyn Fn(&str) -> Option<String> = &get;
        // Half of a pair is refused, never passed over for the next launcher's variables
        // (which would give this process another launcher's id): a rank without its count
        // for every launcher (as Slurm's), and either half alone for rpjrt's own pair,
        // which only a user or `rpjrt launch` sets.
        let pair = |rank: &str, size: &str| -> Result<Option<(usize, usize)>> {
            let own = rank.starts_with("RPJRT_");
            match (parse_num(get, rank)?, parse_num(get, size)?) {
                (Some(r), Some(n)) => Ok(Some((r, n))),
                (Some(_), None) => Err(half_pair(rank, size)),
                (None, Some(_)) if own => Err(half_pair(size, rank)),
                _ => Ok(None),
            }
        };
        let port_plus_one = |p: String| -> Result<String> {
            let n = parse_port("MASTER_PORT", &p)?;
            Ok((n.checked_add(1).ok_or_else(|| {
                crate::invalid(
                    "MASTER_PORT is 65535: rpjrt hosts its store at MASTER_PORT+1 (torch's \
                     own store listens on MASTER_PORT), which does not exist for 65535; set \
                     RPJRT_COORDINATOR=host:port (or give torchrun another --master-port)",
                )
            })?)
            .to_string())
        };
        // `RPJRT_COORDINATOR` overrides any launcher's coordinator, which is then not
        // worked out at all: a launcher address rpjrt cannot use refuses nothing.
        let own_coordinator = get("RPJRT_COORDINATOR");
        let overridden = own_coordinator.is_some();
        let mut env = if let Some((r, n)) = pair("RPJRT_PROCESS_ID", "RPJRT_NUM_PROCESSES")? {
            LaunchEnv {
                process_id: r,
                num_processes: n,
                coordinator: None,
                token: None,
                source: LaunchSource::Rpjrt,
            }
        } else if let Some((r, n)) = pair("RANK", "WORLD_SIZE")? {
            let coordinator = match (get("MASTER_ADDR"), get("MASTER_PORT")) {
                _ if overridden => None,
                (Some(a), Some(p)) => Some(format!("{a}:{}", port_plus_one(p)?)),
                _ => None,
            };
            LaunchEnv {
                process_id: r,
                num_processes: n,
                coordinator,
                token: get("TORCHELASTIC_RUN_ID").map(|id| format!("torchrun-{id}")),
                source: LaunchSource::Torchrun,
            }
        } else if let Some((r, n)) = pair("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")? {
            LaunchEnv {
                process_id: r,
                num_processes: n,
                coordinator: None,
                token: None,
                source: LaunchSource::OpenMpi,
            }
        } else if let Some((r, n)) = pair("PMI_RANK", "PMI_SIZE")? {
            LaunchEnv {
                process_id: r,
                num_processes: n,
                coordinator: None,
                token: None,
                source: LaunchSource::Pmi,
            }
        } else if let Some(r) = parse_num(get, "SLURM_PROCID")? {
            let n = match parse_num(get, "SLURM_NTASKS")? {
                Some(n) => n,
                None => parse_num(get, "SLURM_NPROCS")?.ok_or_else(|| {
                    crate::invalid("SLURM_PROCID is set but neither SLURM_NTASKS nor SLURM_NPROCS")
                })?,
            };
            let list = get("SLURM_STEP_NODELIST")
                .or_else(|| get("SLURM_JOB_NODELIST"))
                .or_else(|| get("SLURM_NODELIST"));
            let port = match get("RPJRT_COORDINATOR_PORT") {
                _ if overridden => DEFAULT_PORT,
                Some(p) => parse_port("RPJRT_COORDINATOR_PORT", &p)?,
                None => DEFAULT_PORT,
            };
            let coordinator = match list {
                Some(l) if !overridden => Some(format!("{}:{port}", first_host(&l)?)),
                _ => None,
            };
            let token = get("SLURM_JOB_ID")
                .map(|j| format!("slurm-{j}-{}", get("SLURM_STEP_ID").unwrap_or_default()));
            LaunchEnv {
                process_id: r,
                num_processes: n,
                coordinator,
                token,
                source: LaunchSource::Slurm,
            }
        } else {
            return Err(crate::invalid(
                "no launcher found in the environment: set RPJRT_PROCESS_ID and \
                 RPJRT_NUM_PROCESSES (or run under rpjrt launch, torchrun, srun, mpirun), or \
                 pass the process id and count explicitly",
            ));
        };
        if let Some(c) = own_coordinator {
            env.coordinator = Some(c);
        }
        if let Some(t) = get("RPJRT_TOKEN") {
            env.token = Some(t);
        }
        check_token_source(&env, get)?;
        env.checked()
    }

    /// The `RPJRT_*` variables that describe this environment to a child process.
    pub fn to_env_vars(&self) -> Vec<(String, String)> {
        let mut v = vec![
            ("RPJRT_PROCESS_ID".to_string(), self.process_id.to_string()),
            (
                "RPJRT_NUM_PROCESSES".to_string(),
                self.num_processes.to_string(),
            ),
        ];
        if let Some(c) = &self.coordinator {
            v.push(("RPJRT_COORDINATOR".to_string(), c.clone()));
        }
        if let Some(t) = &self.token {
            v.push(("RPJRT_TOKEN".to_string(), t.clone()));
        }
        v
    }
}

/// Refuses a job token no store would accept ([`crate::tcp::MAX_TOKEN_BYTES`]), naming
/// the variable it came from: `RPJRT_TOKEN`, or the launcher's job id it was made from
/// (`TORCHELASTIC_RUN_ID`, `SLURM_JOB_ID` and `SLURM_STEP_ID`), with their lengths, so
/// that the error does not speak of a token the user never set.
fn check_token_source(env: &LaunchEnv, get: &dyn Fn(&str) -> Option<String>) -> Result<()> {
    let Some(token) = &env.token else {
        return Ok(());
    };
    let max = crate::tcp::MAX_TOKEN_BYTES;
    if token.len() <= max {
        return Ok(());
    }
    let len = |name: &str| get(name).map_or(0, |v| v.len());
    let made_from = if get("RPJRT_TOKEN").is_some() {
        return Err(crate::invalid(format!(
            "RPJRT_TOKEN is {} bytes long; at most {max} are accepted",
            token.len()
        )));
    } else {
        match env.source {
            LaunchSource::Torchrun => {
                format!("TORCHELASTIC_RUN_ID ({} bytes)", len("TORCHELASTIC_RUN_ID"))
            }
            LaunchSource::Slurm => format!(
                "SLURM_JOB_ID ({} bytes) and SLURM_STEP_ID ({} bytes)",
                len("SLURM_JOB_ID"),
                len("SLURM_STEP_ID")
            ),
            _ => format!("the {} launch environment", env.source),
        }
    };
    Err(crate::invalid(format!(
        "the job token made from {made_from} is {} bytes long; at most {max} are accepted: \
         set RPJRT_TOKEN to a shorter secret shared by the job's processes",
        token.len()
    )))
}

/// The first host of a Slurm node list: `node[01-04,07]` → `node01`,
/// `gpu-a[3,5],cpu1` → `gpu-a3`, `rack[1-2]-n[08-09]` → `rack1-n08`, `host` → `host`.
pub fn first_host(list: &str) -> Result<String> {
    let bad = |why: &str| crate::invalid(format!("Slurm node list {}: {why}", crate::shown(list)));
    let list = list.trim();
    // The first entry ends at the first comma outside brackets.
    let mut depth = 0i32;
    let mut end = list.len();
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                end = i;
                break;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(bad("unbalanced or nested brackets"));
        }
    }
    let entry = &list[..end];
    let mut out = String::new();
    let mut rest = entry;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let close = rest[open..]
            .find(']')
            .map(|c| open + c)
            .ok_or_else(|| bad("a bracket is not closed"))?;
        let inner = &rest[open + 1..close];
        // Every item is checked, not only the first: a damaged list is refused rather
        // than read as far as it happens to make sense.
        let number = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
        for item in inner.split(',') {
            let item = item.trim();
            let (lo, hi) = item.split_once('-').unwrap_or((item, item));
            if !number(lo) || !number(hi) {
                return Err(bad(&format!(
                    "{item:?} in brackets is not a number or a range of numbers (N or N-M)"
                )));
            }
            let value = |s: &str| s.trim_start_matches('0').parse::<u128>().unwrap_or(0);
            if lo.len() > 30 || hi.len() > 30 || value(lo) > value(hi) {
                return Err(bad(&format!(
                    "the range {item:?} runs backwards or is too long"
                )));
            }
        }
        let first = inner.split(',').next().unwrap_or("");
        let first = first.split('-').next().unwrap_or("").trim();
        out.push_str(first);
        rest = &rest[close + 1..];
    }
    if rest.contains(']') {
        return Err(bad("unbalanced brackets"));
    }
    out.push_str(rest);
    if out.is_empty() {
        return Err(bad("no host"));
    }
    Ok(out)
}

// ------------------------------------------------------------------------------ launcher

/// The most processes [`Launcher`] starts. Each costs a process, two pipes and two reader
/// threads on this one machine, started one after another (about a millisecond each):
/// 4096 start in seconds, while a count of millions would fork for hours and exhaust the
/// machine's process and descriptor limits before any of them could meet the others.
pub const MAX_LOCAL_PROCESSES: usize = 4096;

/// Starts N local processes of one command, each with its `RPJRT_*` environment, and
/// collects their output and exit codes. Used by `rpjrt launch`.
#[derive(Clone, Debug)]
pub struct Launcher {
    /// How many processes to start: 1 to [`MAX_LOCAL_PROCESSES`].
    pub num_processes: usize,
    /// The program and its arguments (OS strings: an argument need not be UTF-8, as a
    /// file name need not be).
    pub command: Vec<std::ffi::OsString>,
    /// The port process 0 hosts the store on; `None` picks a free one.
    pub port: Option<u16>,
    /// Kill everything after this long; `None` waits for ever.
    pub timeout: Option<Duration>,
}

/// How a launch ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchOutcome {
    /// Each process's exit code; `None` where it was killed (by us or by a signal).
    pub exit_codes: Vec<Option<i32>>,
    /// The signal that ended each process, where one did (the launcher's own SIGKILL for
    /// processes it stopped included); `None` for a process that exited.
    pub signals: Vec<Option<i32>>,
    /// The first process that failed, if any.
    pub first_failure: Option<usize>,
    /// Whether the timeout ran out.
    pub timed_out: bool,
    /// The signal (SIGINT, SIGTERM or SIGHUP) that stopped the launcher itself, if one
    /// came while it ran: its processes still running were sent SIGTERM, and those still
    /// running [`STOP_GRACE`] later (or at a second such signal) were killed with
    /// SIGKILL. [`LaunchOutcome::exit_code`] is then 128 + that signal.
    pub stopped_by: Option<i32>,
    /// Processes whose output the launcher stopped reading before it ended: a process
    /// they started (in the background) still held their pipe open, so anything written
    /// to it later is lost. [`Self::output_cut_why`] says why the launcher stopped reading.
    pub output_cut: Vec<usize>,
    /// Why the output of [`Self::output_cut`] was cut; `None` when nothing was cut.
    pub output_cut_why: Option<OutputCut>,
    /// The processes found holding a cut pipe open when the launcher stopped reading
    /// (their pids, read from `/proc` on Linux; empty elsewhere, or when none could be
    /// read). The launcher does not stop them: they left the job's process tree when the
    /// process that started them exited, and run on.
    pub output_holders: Vec<u32>,
}

/// Why `rpjrt launch` stopped reading an output pipe that was still open after every
/// process had exited ([`LaunchOutcome::output_cut`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputCut {
    /// The pipe stayed open and silent for [`OUTPUT_IDLE_LIMIT`].
    Idle,
    /// The launch's timeout ran out while the pipe still delivered output
    /// ([`LaunchOutcome::timed_out`] is set).
    Timeout,
    /// A stop signal (SIGINT, SIGTERM, SIGHUP) came ([`LaunchOutcome::stopped_by`]).
    Stopped,
}

impl LaunchOutcome {
    /// The launcher's own exit code: 128 + N when signal N stopped the launcher
    /// ([`Self::stopped_by`]: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP), else 0
    /// when all succeeded and all their output was forwarded, 124 on timeout, else the
    /// first failing process's code, or 128 + N if a signal N killed it (as a shell
    /// reports it: 134 for SIGABRT, 137 for SIGKILL); 1 when all succeeded but some
    /// output was cut ([`Self::output_cut`]).
    pub fn exit_code(&self) -> i32 {
        if let Some(sig) = self.stopped_by {
            return 128 + sig;
        }
        if self.timed_out {
            return 124;
        }
        match self.first_failure {
            None if !self.output_cut.is_empty() => 1,
            None => 0,
            Some(p) => match (self.exit_codes[p], self.signals.get(p).copied().flatten()) {
                (Some(c), _) if c != 0 => c,
                (_, Some(sig)) if sig > 0 => 128 + sig,
                _ => 1,
            },
        }
    }

    /// How process `p` ended, in words: `exit code 3`, `killed by SIGABRT (6)`.
    pub fn describe(&self, p: usize) -> String {
        match (
            self.exit_codes.get(p).copied().flatten(),
            self.signals.get(p).copied().flatten(),
        ) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(sig)) => format!("killed by {} ({sig})", signal_name(sig)),
            (None, None) => "ended without an exit code".to_string(),
        }
    }
}

/// The name of signal `sig` on Linux (`SIGSEGV` for 11), or `signal N` for one without a
/// fixed name (the real-time signals).
pub fn signal_name(sig: i32) -> String {
    const NAMES: [&str; 31] = [
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    usize::try_from(sig)
        .ok()
        .and_then(|s| s.checked_sub(1))
        .and_then(|i| NAMES.get(i))
        .map_or_else(|| format!("signal {sig}"), |n| n.to_string())
}

/// The signal that ended a process, if one did.
fn signal_of(status: std::process::ExitStatus) -> Option<i32> {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        status.signal()
    }
    #[cfg(not(unix))]
    {
        let _ = status;
        None
    }
}

/// SIGTERM, the signal a stopped launcher passes to its processes (15 on every Unix).
const SIGTERM: i32 = 15;

/// SIGKILL, which ends a process and its descendants when the launch is abandoned (9 on
/// every Unix).
const SIGKILL: i32 = 9;

/// How long a launcher stopped by SIGINT, SIGTERM or SIGHUP gives its processes, after
/// passing them SIGTERM, to exit before it kills those still running with SIGKILL (a
/// second stop signal kills them at once).
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// How long the launcher keeps reading an output pipe that stays open, and silent, after
/// every process has exited (a process they started in the background holds it). A pipe
/// that still delivers output, or whose last line is still being written out (to a slow
/// reader of the launcher's own output), is read to its end however long that takes,
/// unless the launch has a timeout: reading then ends when the timeout runs out (or at
/// most this long after the processes were killed, where they were still running then).
pub const OUTPUT_IDLE_LIMIT: Duration = Duration::from_secs(2);

/// One line of a child's output: process index, whether it came from stderr, and the
/// line's bytes exactly as the process wrote them, without the `\n` that ended it (and
/// nothing else removed: no `\r`, no decoding, so bytes that are not UTF-8 pass as they
/// are). A line longer than 64 KiB comes in pieces of at most 64 KiB, one call each, cut
/// between characters where the line is UTF-8 (`rpjrt launch` prints each piece as a line
/// of its own); the last line of a stream may have had no `\n`.
pub type OutputSink = Arc<dyn Fn(usize, bool, &[u8]) + Send + Sync>;

/// The longest piece of a process's output forwarded as one line: a longer line (a
/// process writing hundreds of megabytes without a newline) goes out in pieces of this
/// size, so the launcher holds one piece at a time, not the whole line.
const MAX_LINE: usize = 64 << 10;

/// Where to cut `piece`, a full piece of a longer line, so that no UTF-8 character is
/// split between two pieces: before a character whose lead byte is among the last three
/// bytes and whose continuation bytes are not all there yet; at the end otherwise (for
/// bytes that are not UTF-8 no cut is better than another).
fn utf8_cut(piece: &[u8]) -> usize {
    let n = piece.len();
    for back in 1..=3.min(n) {
        let b = piece[n - back];
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back for its lead byte
        }
        let needs = match b {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return n, // ASCII or not UTF-8: the piece ends on a boundary
        };
        let at = n - back;
        return match back < needs && at > 0 {
            true => at,
            false => n,
        };
    }
    n
}

/// Calls `f` with each line of `r` (without its newline), a line longer than `max` bytes
/// in pieces of at most `max`, cut between UTF-8 characters ([`utf8_cut`]); stops at
/// the end of input or a read error. Every byte of `r` but the newlines reaches `f`
/// unchanged, in order, and the pieces do not depend on how the reads split the input: a
/// line of exactly `max` bytes (or a piece of a longer line that ends exactly at its
/// newline) is one piece, never followed by an empty one for its newline.
fn for_each_line(mut r: impl BufRead, max: usize, mut f: impl FnMut(&[u8])) {
    let max = max.max(1);
    let mut line: Vec<u8> = Vec::new();
    loop {
        let buf = match r.fill_buf() {
            Ok([]) => break,
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if line.len() >= max {
            // A full piece: whether it is the whole line or one piece of a longer one
            // depends on the byte after it, which this read has brought.
            if buf[0] == b'\n' {
                r.consume(1);
                f(&line);
                line.clear();
            } else {
                let cut = utf8_cut(&line);
                f(&line[..cut]);
                // The start of a character cut short opens the next piece.
                line.drain(..cut);
            }
            continue;
        }
        let room = max - line.len();
        let (take, newline) = match buf.iter().take(room).position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len().min(room), false),
        };
        line.extend_from_slice(&buf[..take]);
        r.consume(take);
        if newline {
            line.pop();
            f(&line);
            line.clear();
        }
    }
    if !line.is_empty() {
        f(&line);
    }
}

/// Milliseconds from `epoch` to now.
fn millis_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn free_port() -> Result<u16> {
    let fail = |e: std::io::Error| {
        crate::store_error(
            rpjrt::Code::Unavailable,
            format!("cannot find a free local port: {e}"),
        )
    };
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(fail)?;
    Ok(l.local_addr().map_err(fail)?.port())
}

/// A launch's process that could not start, as an error: a command that is not there or
/// cannot be run (not found, not executable, a directory, a name too long, an argument
/// list too long) is the caller's input, `INVALID_ARGUMENT`; anything else (out of file
/// descriptors, processes or memory) is the system failing the launch, never reported as
/// an invalid argument (see [`resource_error`]).
fn spawn_error(e: &std::io::Error, message: String) -> rpjrt::Error {
    use std::io::ErrorKind;
    // Linux's numbers for what std's `ErrorKind` does not name on a stable release.
    const ENOEXEC: i32 = 8;
    const ELOOP: i32 = 40;
    let the_callers = matches!(
        e.kind(),
        ErrorKind::NotFound
            | ErrorKind::PermissionDenied
            | ErrorKind::IsADirectory
            | ErrorKind::NotADirectory
            | ErrorKind::InvalidFilename
            | ErrorKind::ArgumentListTooLong
            | ErrorKind::InvalidInput
    ) || matches!(e.raw_os_error(), Some(ENOEXEC | ELOOP));
    if the_callers {
        crate::invalid(message)
    } else {
        resource_error(e, message)
    }
}

/// The most bytes of a `#!` line the kernel reads (Linux's `BINPRM_BUF_SIZE`).
const SHEBANG_BYTES: usize = 256;

/// Why `program` could not be started, in words, from the error the start gave (`e`,
/// whose text ends the message): which file the failure is about. `execve` says
/// `ENOENT` both for a program that is not there and for one whose `#!` interpreter or
/// ELF dynamic loader is not there, and `EACCES` for a file that is not executable and
/// for a `#!` interpreter that is not; the file (found on `PATH` for a bare name, as the
/// start looked it up) is read to tell which.
fn why_not_started(program: &std::ffi::OsStr, e: &std::io::Error) -> String {
    use std::path::{Path, PathBuf};
    const ENOENT: i32 = 2;
    const EACCES: i32 = 13;
    const ENOEXEC: i32 = 8;
    let errno = e.raw_os_error();
    if !matches!(errno, Some(ENOENT | EACCES | ENOEXEC)) {
        return e.to_string();
    }
    let bytes = program.as_encoded_bytes();
    let file: PathBuf = if bytes.contains(&b'/') {
        PathBuf::from(program)
    } else if bytes.is_empty() {
        return format!("the command is an empty string ({e})");
    } else {
        // The start looked the name up in each directory of PATH (an empty entry is the
        // current directory), going on past one that is not there.
        let path = std::env::var_os("PATH");
        let dirs: Vec<PathBuf> = match &path {
            Some(p) => std::env::split_paths(p).collect(),
            None => vec!["/bin".into(), "/usr/bin".into()],
        };
        let found = dirs.iter().map(|d| {
            if d.as_os_str().is_empty() {
                Path::new(".").join(program)
            } else {
                d.join(program)
            }
        });
        let mut found = found.filter(|f| std::fs::metadata(f).is_ok());
        match found.next() {
            Some(f) => f,
            None if errno == Some(ENOENT) => {
                let path = match &path {
                    None => "PATH is unset, so only /bin and /usr/bin were searched".into(),
                    Some(p) if p.is_empty() => {
                        "PATH is set but empty, so only the current directory was searched".into()
                    }
                    Some(p) => format!("PATH is {}", crate::shown(&p.to_string_lossy())),
                };
                let here = match Path::new(program).is_file() {
                    true => format!(
                        "; a program in the current directory is started as ./{}",
                        program.to_string_lossy()
                    ),
                    false => String::new(),
                };
                return format!(
                    "no program of that name in any directory of PATH ({path}{here}) ({e})"
                );
            }
            None => return e.to_string(),
        }
    };
    let shown = |p: &Path| crate::shown(&p.to_string_lossy());
    let named = match bytes.contains(&b'/') {
        true => String::new(),
        false => format!("{} (found on PATH) ", shown(&file)),
    };
    let meta = match std::fs::metadata(&file) {
        Ok(m) => m,
        Err(_) => return e.to_string(),
    };
    if let Some(kind) = rpjrt_raw::files::kind_of(&meta) {
        return format!("{named}is {kind}, not a program ({e})");
    }
    let head = read_head(&file, 64 << 10);
    let interp = shebang(&head);
    let is_elf = head.starts_with(b"\x7fELF");
    match errno {
        Some(ENOENT) => {
            if let Some(interp) = &interp {
                let cr = match interp.ends_with('\r') {
                    true => {
                        "; the line ends with a carriage return: the file has Windows (CRLF) \
                         line endings, convert it (`dos2unix`, `sed -i 's/\\r$//'`)"
                    }
                    false => "",
                };
                if std::fs::metadata(interp).is_err() {
                    return format!(
                        "{named}exists, but the interpreter its #! line names, {}, does not \
                         (bad interpreter{cr}) ({e})",
                        crate::shown(interp)
                    );
                }
                let loader = elf_interpreter(&read_head(Path::new(interp), 64 << 10));
                if let Some(loader) = loader.filter(|l| std::fs::metadata(l).is_err()) {
                    return format!(
                        "{named}exists, and so does its #! interpreter {}, but that needs the \
                         dynamic loader {}, which this system does not have (a program built \
                         for another system or C library) ({e})",
                        crate::shown(interp),
                        crate::shown(&loader)
                    );
                }
            } else if is_elf {
                if let Some(loader) =
                    elf_interpreter(&head).filter(|l| std::fs::metadata(l).is_err())
                {
                    return format!(
                        "{named}exists, but needs the dynamic loader {}, which this system \
                         does not have (a program built for another system or C library) ({e})",
                        crate::shown(&loader)
                    );
                }
            }
            format!("{named}exists, but could not be started ({e})")
        }
        Some(EACCES) => {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = meta.permissions().mode();
            if mode & 0o111 == 0 {
                return format!(
                    "{named}is not executable (its mode is {:04o}): make it so (`chmod +x`) \
                     or name its interpreter first (`sh FILE`, `python FILE`) ({e})",
                    mode & 0o7777
                );
            }
            if let Some(interp) = &interp {
                match std::fs::metadata(interp) {
                    Ok(m) if m.is_dir() => {
                        return format!(
                            "{named}names in its #! line the interpreter {}, which is a \
                             directory ({e})",
                            crate::shown(interp)
                        )
                    }
                    Ok(m) if m.permissions().mode() & 0o111 == 0 || !m.is_file() => {
                        return format!(
                            "{named}names in its #! line the interpreter {}, which is not \
                             executable ({e})",
                            crate::shown(interp)
                        )
                    }
                    _ => {}
                }
            }
            format!(
                "{named}is executable by its mode ({:04o}), but this user may not run it: it \
                 may belong to another user or group, its file system may be mounted noexec, \
                 or a directory above it may not be searchable ({e})",
                mode & 0o7777
            )
        }
        _ => {
            let what = match (is_elf, interp.is_some()) {
                (true, _) => "an ELF file this system cannot run (built for another machine, or not a program)",
                (false, true) => "a script whose #! line the system cannot use",
                (false, false) => "neither a program for this machine nor a script starting with a #! line",
            };
            format!("{named}is {what} ({e})")
        }
    }
}

/// The first `limit` bytes of the regular file `path` (fewer if it is shorter; none if it
/// cannot be read or is not a regular file: a FIFO is not opened to wait for a writer).
fn read_head(path: &std::path::Path, limit: u64) -> Vec<u8> {
    use std::io::Read as _;
    let mut head = Vec::new();
    if let Ok((file, meta)) = rpjrt_raw::files::open_for_reading(path) {
        if meta.is_file() {
            let _ = file.take(limit).read_to_end(&mut head);
        }
    }
    head
}

/// The interpreter a script's `#!` line names, as the kernel reads it: the first word
/// after `#!` (blanks are spaces and tabs only, so a `\r` stays part of it), within the
/// first [`SHEBANG_BYTES`].
fn shebang(head: &[u8]) -> Option<String> {
    let line = head.strip_prefix(b"#!")?;
    let line = &line[..line.len().min(SHEBANG_BYTES - 2)];
    let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
    let word = line
        .split(|&b| b == b' ' || b == b'\t')
        .find(|w| !w.is_empty())?;
    Some(String::from_utf8_lossy(word).into_owned())
}

/// The dynamic loader an ELF program asks for (its `PT_INTERP`), read from `head`, the
/// start of the file; `None` where there is none or it lies past `head`.
fn elf_interpreter(head: &[u8]) -> Option<String> {
    if !head.starts_with(b"\x7fELF") {
        return None;
    }
    let is64 = *head.get(4)? == 2;
    let little = *head.get(5)? == 1;
    let num = |at: usize, n: usize| -> Option<usize> {
        let b = head.get(at..at.checked_add(n)?)?;
        let mut v: u64 = 0;
        for i in 0..n {
            let byte = if little { b[n - 1 - i] } else { b[i] };
            v = (v << 8) | u64::from(byte);
        }
        usize::try_from(v).ok()
    };
    let (phoff, phentsize, phnum) = match is64 {
        true => (num(0x20, 8)?, num(0x36, 2)?, num(0x38, 2)?),
        false => (num(0x1C, 4)?, num(0x2A, 2)?, num(0x2C, 2)?),
    };
    const PT_INTERP: usize = 3;
    for i in 0..phnum {
        let at = phoff.checked_add(i.checked_mul(phentsize)?)?;
        if num(at, 4)? != PT_INTERP {
            continue;
        }
        let (offset, size) = match is64 {
            true => (num(at + 8, 8)?, num(at + 0x20, 8)?),
            false => (num(at + 4, 4)?, num(at + 0x10, 4)?),
        };
        let text = head.get(offset..offset.checked_add(size)?)?;
        let text = text.split(|&b| b == 0).next()?;
        return Some(String::from_utf8_lossy(text).into_owned());
    }
    None
}

/// A launch the system could not carry out (`RESOURCE_EXHAUSTED` when it ran out of file
/// descriptors, processes, threads or memory; `INTERNAL` for another failure), with what
/// to do about it where that is known.
fn resource_error(e: &std::io::Error, message: String) -> rpjrt::Error {
    use std::io::ErrorKind;
    // Linux's numbers: too many open files (in this process, in the system).
    const EMFILE: i32 = 24;
    const ENFILE: i32 = 23;
    let (code, what) = match (e.raw_os_error(), e.kind()) {
        (Some(EMFILE | ENFILE), _) => (
            rpjrt::Code::ResourceExhausted,
            "out of file descriptors (each process started takes pipes for its output): \
             raise the limit (`ulimit -n`) or start fewer processes",
        ),
        (_, ErrorKind::WouldBlock) => (
            rpjrt::Code::ResourceExhausted,
            "out of processes or threads: raise the limit (`ulimit -u`) or start fewer \
             processes",
        ),
        (_, ErrorKind::OutOfMemory) => (
            rpjrt::Code::ResourceExhausted,
            "out of memory: start fewer processes",
        ),
        _ => (rpjrt::Code::Internal, ""),
    };
    let message = match what {
        "" => message,
        what => format!("{message}; {what}"),
    };
    crate::store_error(code, message)
}

impl Launcher {
    /// Starts the processes, forwards each line of their output to `sink`, and waits.
    /// When one fails (non-zero exit or signal) or the timeout runs out, the others are
    /// killed.
    ///
    /// While it runs, SIGINT, SIGTERM and SIGHUP do not end this process (those not
    /// ignored when it started: `nohup`'s SIGHUP stays ignored): the launcher passes
    /// SIGTERM to its processes still running, kills with SIGKILL those still running
    /// [`STOP_GRACE`] later (or at once on a second such signal), and returns with
    /// [`LaunchOutcome::stopped_by`] set, so that no process of the job runs on without
    /// it, whatever the process does with SIGTERM. The signals' previous handling comes
    /// back when it returns. A launcher killed outright (SIGKILL, a crash) takes its
    /// processes with it through the parent-death signal, which is SIGKILL for the same
    /// reason.
    pub fn run(&self, sink: OutputSink) -> Result<LaunchOutcome> {
        if self.num_processes == 0 {
            return Err(crate::invalid(
                "launch needs at least one process (-n 1 or more)",
            ));
        }
        if self.num_processes > MAX_LOCAL_PROCESSES {
            return Err(crate::invalid(format!(
                "launch starts at most {MAX_LOCAL_PROCESSES} processes on one machine, \
                 not {}",
                self.num_processes
            )));
        }
        let Some((program, args)) = self.command.split_first() else {
            return Err(crate::invalid("launch needs a command to run"));
        };
        // Port 0 means "any free one", as it does to the OS: the peers need the real one.
        let port = match self.port {
            Some(p) if p != 0 => p,
            _ => free_port()?,
        };
        let token = rpjrt::random_token();
        // Caught before the first process starts: from then on a stop signal stops the
        // job, never the launcher alone.
        let stop = rpjrt_raw::process::StopSignals::catch().map_err(|e| {
            crate::store_error(
                rpjrt::Code::Internal,
                format!("cannot catch SIGINT, SIGTERM and SIGHUP for the launch: {e}"),
            )
        })?;
        // Each reader says which process it read when its pipe ends.
        let (done_tx, done_rx) = mpsc::channel::<usize>();
        // When a reader last forwarded a line (milliseconds since `epoch`), and how many
        // are forwarding one now: the drain below waits as long as output moves.
        let epoch = Instant::now();
        let activity = Arc::new(AtomicU64::new(0));
        let busy = Arc::new(AtomicUsize::new(0));
        // Per process, how many of its pipes are still being read.
        let mut open_pipes: Vec<usize> = Vec::with_capacity(self.num_processes);
        let mut children: Vec<Child> = Vec::new();
        let mut readers = 0usize;
        // Per process, what `/proc` calls its output pipes (`pipe:[1234]`), to name the
        // processes still holding one open if reading has to stop.
        let mut pipe_ids: Vec<Vec<String>> = Vec::with_capacity(self.num_processes);
        for p in 0..self.num_processes {
            if stop.caught().is_some() {
                // Stopped while starting: the wait below stops the ones started.
                break;
            }
            let env = LaunchEnv {
                process_id: p,
                num_processes: self.num_processes,
                coordinator: Some(format!("127.0.0.1:{port}")),
                token: Some(token.clone()),
                source: LaunchSource::Rpjrt,
            };
            let mut cmd = Command::new(program);
            cmd.args(args)
                .envs(env.to_env_vars())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            // A launcher that dies without stopping its job itself (SIGKILL, a crash) takes
            // the job with it: the parent-death signal is SIGKILL, not SIGTERM, because a
            // process may ignore or handle SIGTERM (a training script that checkpoints on
            // it, then hangs) and would run on, orphaned, with no launcher left to kill it.
            // A launcher asked to stop (SIGINT, SIGTERM, SIGHUP) gives its processes
            // SIGTERM and STOP_GRACE first (below).
            rpjrt_raw::process::killed_with_parent(&mut cmd);
            // Whatever cannot be started (the process, its output readers) ends the launch
            // with the ones started so far killed: never a panic, never a partial job.
            let abort = |children: &mut Vec<Child>, why: rpjrt::Error| {
                let tree = ProcessTree::scan();
                for c in children.iter_mut() {
                    let _ = signal_child_tree_in(c, SIGKILL, &tree);
                    let _ = c.kill();
                    let _ = c.wait();
                }
                why
            };
            let mut child = match cmd.spawn() {
                Ok(c) => c,
                Err(e) => {
                    let why = spawn_error(
                        &e,
                        format!(
                            "cannot start {} (process {p} of {}): {}",
                            crate::shown(&program.to_string_lossy()),
                            self.num_processes,
                            why_not_started(program.as_ref(), &e)
                        ),
                    );
                    return Err(abort(&mut children, why));
                }
            };
            pipe_ids.push(
                [
                    child.stdout.as_ref().and_then(pipe_id),
                    child.stderr.as_ref().and_then(pipe_id),
                ]
                .into_iter()
                .flatten()
                .collect(),
            );
            let pipes: [(bool, Option<Box<dyn Read + Send>>); 2] = [
                (false, child.stdout.take().map(|s| Box::new(s) as _)),
                (true, child.stderr.take().map(|s| Box::new(s) as _)),
            ];
            let mut pipes_read = 0usize;
            for (is_err, pipe) in pipes {
                let Some(pipe) = pipe else { continue };
                let sink = Arc::clone(&sink);
                let done = done_tx.clone();
                let (activity, busy) = (Arc::clone(&activity), Arc::clone(&busy));
                let reader = std::thread::Builder::new()
                    .name(format!("rpjrt-launch-{p}"))
                    // A reader holds a line at a time: a small stack lets many processes run.
                    .stack_size(64 << 10)
                    .spawn(move || {
                        for_each_line(BufReader::new(pipe), MAX_LINE, |line| {
                            busy.fetch_add(1, Ordering::SeqCst);
                            sink(p, is_err, line);
                            activity.fetch_max(millis_since(epoch), Ordering::SeqCst);
                            busy.fetch_sub(1, Ordering::SeqCst);
                        });
                        let _ = done.send(p);
                    });
                if let Err(e) = reader {
                    children.push(child);
                    // Never the user's input: the system is out of threads or memory.
                    let why = resource_error(
                        &e,
                        format!(
                            "cannot start a thread to read the output of process {p} of {}: {e}",
                            self.num_processes
                        ),
                    );
                    return Err(abort(&mut children, why));
                }
                readers += 1;
                pipes_read += 1;
            }
            open_pipes.push(pipes_read);
            children.push(child);
        }
        drop(done_tx);
        let start = Instant::now();
        let mut codes: Vec<Option<Option<i32>>> = vec![None; children.len()];
        let mut signals: Vec<Option<i32>> = vec![None; children.len()];
        let mut first_failure = None;
        let mut timed_out = false;
        // The stop signal caught, and when the processes' grace after SIGTERM ends.
        let mut stopping: Option<(i32, Instant)> = None;
        loop {
            for (i, c) in children.iter_mut().enumerate() {
                if codes[i].is_none() {
                    if let Ok(Some(status)) = c.try_wait() {
                        codes[i] = Some(status.code());
                        signals[i] = signal_of(status);
                        // A process ending once the launcher was told to stop is not a
                        // failure: it got the launcher's SIGTERM, or the signal itself
                        // (Ctrl-C reaches the terminal's whole process group).
                        let told_to_stop = stopping.is_some() || stop.caught().is_some();
                        if !status.success() && first_failure.is_none() && !told_to_stop {
                            first_failure = Some(i);
                        }
                    }
                }
            }
            if codes.iter().all(|c| c.is_some()) {
                break;
            }
            if stopping.is_none() {
                if let Some(sig) = stop.caught() {
                    // One reading of the process tree for the whole round: one per child
                    // made stopping thousands of processes take minutes.
                    let tree = ProcessTree::scan();
                    for (i, c) in children.iter_mut().enumerate() {
                        if codes[i].is_none() {
                            let _ = signal_child_tree_in(c, SIGTERM, &tree);
                        }
                    }
                    stopping = Some((sig, Instant::now() + STOP_GRACE));
                }
            }
            let over = self.timeout.is_some_and(|t| start.elapsed() >= t);
            let grace_over =
                stopping.is_some_and(|(_, until)| Instant::now() >= until || stop.times() > 1);
            if first_failure.is_some() || over || grace_over {
                timed_out = over && first_failure.is_none() && stopping.is_none();
                // Every tree is killed first (from one reading of /proc), then each process
                // reaped: a wait between kills would let the later trees run on meanwhile.
                let tree = ProcessTree::scan();
                for (i, c) in children.iter_mut().enumerate() {
                    if codes[i].is_none() {
                        // The whole tree: a wrapper script's job, or helpers the process
                        // started, would otherwise run on after the launcher.
                        let _ = signal_child_tree_in(c, SIGKILL, &tree);
                        let _ = c.kill();
                    }
                }
                for (i, c) in children.iter_mut().enumerate() {
                    if codes[i].is_none() {
                        let status = c.wait().ok();
                        codes[i] = Some(status.and_then(|s| s.code()));
                        signals[i] = status.and_then(signal_of);
                    }
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // Read what the children wrote to its end, however slowly the launcher's own
        // output is taken. Only a pipe that stays open and silent (a grandchild holds it)
        // is given up, after OUTPUT_IDLE_LIMIT, and reported in `output_cut`. The timeout
        // bounds the drain too: a grandchild that keeps writing cannot hold the launch
        // past it (nor past OUTPUT_IDLE_LIMIT after the timeout killed the processes).
        activity.fetch_max(millis_since(epoch), Ordering::SeqCst);
        let drain_deadline = self
            .timeout
            .map(|t| (start + t).max(Instant::now() + OUTPUT_IDLE_LIMIT.min(t)));
        let mut cut_why = None;
        while readers > 0 {
            // A stop signal during the drain: the processes are gone, stop reading now
            // (what is left unread is reported as cut).
            if stopping.is_none() && stop.caught().is_some() {
                cut_why = Some(OutputCut::Stopped);
                break;
            }
            if drain_deadline.is_some_and(|d| Instant::now() >= d) {
                cut_why = Some(OutputCut::Timeout);
                // The processes all exited on their own (or failed, or were stopped):
                // the launch still ran into its timeout, waiting on their output.
                if first_failure.is_none() && stopping.is_none() {
                    timed_out = true;
                }
                break;
            }
            match done_rx.recv_timeout(Duration::from_millis(50)) {
                Ok(p) => {
                    readers -= 1;
                    open_pipes[p] -= 1;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let idle = millis_since(epoch).saturating_sub(activity.load(Ordering::SeqCst));
                    if busy.load(Ordering::SeqCst) == 0
                        && idle >= OUTPUT_IDLE_LIMIT.as_millis() as u64
                    {
                        cut_why = Some(OutputCut::Idle);
                        break;
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        // A signal that came after the last process ended still stops the launcher.
        let stopped_by = stopping.map(|(sig, _)| sig).or_else(|| stop.caught());
        drop(stop);
        let output_cut: Vec<usize> = open_pipes
            .iter()
            .enumerate()
            .filter(|(_, &open)| open > 0)
            .map(|(p, _)| p)
            .collect();
        let cut_ids: Vec<&str> = output_cut
            .iter()
            .flat_map(|&p| pipe_ids.get(p).into_iter().flatten())
            .map(String::as_str)
            .collect();
        let output_holders = pipe_holders(&cut_ids);
        Ok(LaunchOutcome {
            exit_codes: codes.into_iter().map(|c| c.flatten()).collect(),
            signals,
            first_failure,
            timed_out,
            stopped_by,
            output_cut_why: if output_cut.is_empty() {
                None
            } else {
                Some(cut_why.unwrap_or(OutputCut::Idle))
            },
            output_cut,
            output_holders,
        })
    }
}

/// What `/proc/self/fd` calls the pipe behind `fd` (`pipe:[1234]`), on Linux.
fn pipe_id<F: std::os::fd::AsRawFd>(fd: &F) -> Option<String> {
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    let link = link.to_str()?;
    link.starts_with("pipe:").then(|| link.to_string())
}

/// The processes other than this one that hold any of the pipes `ids` open (their pids,
/// ascending), from `/proc/*/fd`; empty where `/proc` cannot be read.
fn pipe_holders(ids: &[&str]) -> Vec<u32> {
    if ids.is_empty() {
        return Vec::new();
    }
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let fds = std::fs::read_dir(entry.path().join("fd"));
        let holds = fds.into_iter().flatten().flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .ok()
                .and_then(|l| l.to_str().map(|l| ids.contains(&l)))
                .unwrap_or(false)
        });
        if holds {
            found.push(pid);
        }
    }
    found.sort_unstable();
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(vars: &[(&str, &str)]) -> Result<LaunchEnv> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        LaunchEnv::detect_from(move |k| m.get(k).cloned())
    }

    #[test]
    fn a_process_that_cannot_start_is_the_callers_error_only_for_the_command() {
        let e = |n: i32| spawn_error(&std::io::Error::from_raw_os_error(n), "cannot start".into());
        // ENOENT, EACCES, ENOEXEC, ENOTDIR, EISDIR, ENAMETOOLONG, ELOOP, E2BIG: the command.
        for n in [2, 13, 8, 20, 21, 36, 40, 7] {
            assert_eq!(e(n).code(), rpjrt::Code::InvalidArgument, "errno {n}");
        }
        // EMFILE, ENFILE, EAGAIN, ENOMEM: the system ran out; EIO: it failed.
        for (n, hint) in [
            (24, "ulimit -n"),
            (23, "ulimit -n"),
            (11, "ulimit -u"),
            (12, "out of memory"),
        ] {
            let err = e(n);
            assert_eq!(err.code(), rpjrt::Code::ResourceExhausted, "errno {n}");
            assert!(err.to_string().contains(hint), "errno {n}: {err}");
            assert!(!err.to_string().contains("invalid argument"), "{err}");
        }
        assert_eq!(e(5).code(), rpjrt::Code::Internal);
    }

    #[test]
    fn a_launch_of_more_processes_than_one_machine_holds_is_refused() {
        // 99999999 processes were started one by one: hours of forking, no error.
        for n in [MAX_LOCAL_PROCESSES + 1, 99_999_999, usize::MAX] {
            let launcher = Launcher {
                num_processes: n,
                command: vec!["true".into()],
                port: None,
                timeout: None,
            };
            let e = launcher.run(Arc::new(|_, _, _| {})).unwrap_err();
            assert_eq!(e.code(), rpjrt::Code::InvalidArgument, "{e}");
            assert!(
                e.to_string()
                    .contains(&format!("at most 4096 processes on one machine, not {n}")),
                "{e}"
            );
        }
    }

    #[test]
    fn output_lines_are_forwarded_in_bounded_pieces() {
        let lines = |input: &[u8], max: usize| {
            let mut out: Vec<Vec<u8>> = Vec::new();
            for_each_line(input, max, |l| out.push(l.to_vec()));
            out
        };
        assert_eq!(lines(b"a\nbb\n\nccc", 64), [&b"a"[..], b"bb", b"", b"ccc"]);
        // A line longer than the bound goes out in pieces; nothing is lost.
        let long = [b'x'; 10];
        let got = lines(&[&long[..], b"\nz\n"].concat(), 4);
        assert_eq!(got, [&b"xxxx"[..], b"xxxx", b"xx", b"z"]);
        assert!(lines(b"", 4).is_empty());
    }

    /// The lines `for_each_line` hands out for `input`, pieces of at most `max` bytes.
    fn pieces(input: &[u8], max: usize) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        for_each_line(input, max, |l| out.push(l.to_vec()));
        out
    }

    /// The pieces `for_each_line` should give, computed from the whole input at once: the
    /// input split at every newline (a last line without one kept if not empty), each line
    /// longer than `max` cut into pieces of at most `max` by [`utf8_cut`].
    fn reference_pieces(input: &[u8], max: usize) -> Vec<Vec<u8>> {
        let mut lines: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
        if lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        let mut out = Vec::new();
        for mut rest in lines {
            while rest.len() > max {
                let cut = utf8_cut(&rest[..max]);
                out.push(rest[..cut].to_vec());
                rest = &rest[cut..];
            }
            out.push(rest.to_vec());
        }
        out
    }

    /// A reader that hands out its bytes in chunks of the given sizes (cycled), as a pipe
    /// does, so that read boundaries fall anywhere.
    struct Chunked<'a> {
        data: &'a [u8],
        sizes: Vec<usize>,
        next: usize,
    }

    impl std::io::Read for Chunked<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let want = self.sizes[self.next % self.sizes.len()].max(1);
            self.next += 1;
            let n = want.min(out.len()).min(self.data.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_program_that_cannot_start_is_explained_by_the_file_at_fault() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("rpjrt-launch-why-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("adir")).unwrap();
        let write = |name: &str, body: &[u8], mode: u32| {
            let p = dir.join(name);
            std::fs::write(&p, body).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            p
        };
        let why = |p: &std::path::Path, errno: i32| {
            why_not_started(p.as_os_str(), &std::io::Error::from_raw_os_error(errno))
        };
        // ENOENT for a script that exists: its #! interpreter is missing ("No such file
        // or directory" for the script was all it said).
        let s = write("s.sh", b"#!/nonexistent/interp -x\necho hi\n", 0o755);
        let w = why(&s, 2);
        assert!(
            w.contains("\"/nonexistent/interp\"") && w.contains("bad interpreter"),
            "{w}"
        );
        let s = write("crlf.sh", b"#! /bin/sh\r\necho\r\n", 0o755);
        assert!(why(&s, 2).contains("CRLF"), "{}", why(&s, 2));
        // An ELF program whose dynamic loader is missing.
        let mut elf = std::fs::read("/bin/sh").unwrap();
        let loader = elf_interpreter(&elf).expect("/bin/sh has a dynamic loader");
        let at = elf
            .windows(loader.len())
            .position(|w| w == loader.as_bytes())
            .unwrap();
        elf[at..at + 5].copy_from_slice(b"/nope");
        let prog = write("prog", &elf, 0o755);
        let w = why(&prog, 2);
        assert!(
            w.contains("dynamic loader \"/nope") && !w.contains("interpreter"),
            "{w}"
        );
        // EACCES: not executable; an interpreter that is a directory or not executable.
        let s = write("plain.sh", b"#!/bin/sh\n", 0o644);
        assert!(
            why(&s, 13).contains("not executable (its mode is 0644)"),
            "{}",
            why(&s, 13)
        );
        let s = write(
            "d.sh",
            format!("#!{}\n", dir.join("adir").display()).as_bytes(),
            0o755,
        );
        assert!(
            why(&s, 13).contains("which is a directory"),
            "{}",
            why(&s, 13)
        );
        let s = write(
            "n.sh",
            format!("#!{}\n", dir.join("plain.sh").display()).as_bytes(),
            0o755,
        );
        assert!(
            why(&s, 13).contains("which is not executable"),
            "{}",
            why(&s, 13)
        );
        assert!(why(&dir.join("adir"), 13).contains("is a directory, not a program"));
        // ENOEXEC: neither a program nor a script.
        let s = write("junk", b"\x01\x02junk", 0o755);
        assert!(why(&s, 8).contains("#! line"), "{}", why(&s, 8));
        // A program that is not there keeps the system's words; another error too.
        let gone = dir.join("gone");
        assert_eq!(
            why(&gone, 2),
            std::io::Error::from_raw_os_error(2).to_string()
        );
        assert_eq!(
            why(&s, 24),
            std::io::Error::from_raw_os_error(24).to_string()
        );
        // A bare name is looked up on PATH, as the start did.
        let w = why_not_started(
            std::ffi::OsStr::new("rpjrt-no-such-program"),
            &std::io::Error::from_raw_os_error(2),
        );
        assert!(
            w.contains("no program of that name in any directory of PATH"),
            "{w}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_line_that_fills_a_piece_exactly_is_one_line() {
        // "a" * 64 KiB + "\n" went out as the line and then an invented empty line.
        for n in [
            MAX_LINE - 1,
            MAX_LINE,
            MAX_LINE + 1,
            2 * MAX_LINE,
            3 * MAX_LINE,
        ] {
            let input = [vec![b'a'; n], b"\nnext\n".to_vec()].concat();
            let got = pieces(&input, MAX_LINE);
            assert!(got.iter().all(|p| !p.is_empty()), "{n}: an empty piece");
            assert_eq!(got.last().map(Vec::as_slice), Some(&b"next"[..]), "{n}");
            assert_eq!(got.len(), n.div_ceil(MAX_LINE) + 1, "{n}");
        }
        assert_eq!(pieces(b"xxxx\n\nyy", 4), [&b"xxxx"[..], b"", b"yy"]);
        assert_eq!(pieces(b"xxxxxxxx\n", 4), [&b"xxxx"[..], b"xxxx"]);
        assert_eq!(pieces(b"xxxx", 4), [&b"xxxx"[..]]);
    }

    #[test]
    fn lines_are_split_exactly_whatever_the_read_boundaries() {
        // Random line lengths (many exact multiples of the bound, and the bound +-1),
        // random characters, random read sizes and buffer capacities, with and without a
        // last newline: the pieces are always the reference split of the whole input.
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut rand = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let atoms: [&[u8]; 6] = [
            b"a",
            b"\r",
            "\u{e9}".as_bytes(),
            "\u{20ac}".as_bytes(),
            "\u{1F600}".as_bytes(),
            b"\xff",
        ];
        for round in 0..3000 {
            let max = 1 + rand(9);
            let mut input = Vec::new();
            for _ in 0..rand(8) {
                let len = match rand(4) {
                    0 => max * rand(4),
                    1 => (max * (1 + rand(3))).saturating_sub(1),
                    2 => max * (1 + rand(3)) + 1,
                    _ => rand(4 * max),
                };
                let start = input.len();
                while input.len() - start < len {
                    let a = if rand(3) == 0 {
                        atoms[rand(atoms.len())]
                    } else {
                        b"a"
                    };
                    input.extend_from_slice(a);
                }
                input.push(b'\n');
            }
            if rand(2) == 0 {
                input.extend(std::iter::repeat_n(b'z', rand(3 * max)));
            }
            let sizes: Vec<usize> = (0..1 + rand(5)).map(|_| 1 + rand(2 * max + 2)).collect();
            let cap = 1 + rand(3 * max);
            let reader = std::io::BufReader::with_capacity(
                cap,
                Chunked {
                    data: &input,
                    sizes: sizes.clone(),
                    next: 0,
                },
            );
            let mut got: Vec<Vec<u8>> = Vec::new();
            for_each_line(reader, max, |l| got.push(l.to_vec()));
            assert_eq!(
                got,
                reference_pieces(&input, max),
                "round {round}: max {max}, reads {sizes:?}, capacity {cap}, input {input:?}"
            );
        }
    }

    #[test]
    fn output_bytes_pass_unchanged_and_characters_are_not_cut() {
        // Bytes that are not UTF-8 were replaced with U+FFFD, and every trailing \r of a
        // line was removed.
        assert_eq!(
            pieces(b"\xff\xfe\x00abc\r\n\r\r\nend\r", 64),
            [&b"\xff\xfe\x00abc\r"[..], b"\r\r", b"end\r"]
        );
        // A piece boundary inside a character: the character goes whole to the next piece
        // (it was cut in two, each half replaced by U+FFFD).
        assert_eq!(
            pieces("xxx\u{e9}\n".as_bytes(), 4),
            [&b"xxx"[..], "\u{e9}".as_bytes()]
        );
        // Every offset of 2-, 3- and 4-byte characters against the bound: each piece is
        // whole UTF-8, none longer than the bound, and together they are the line.
        for k in 0..12 {
            let line = format!(
                "{}\u{1F600}\u{20AC}\u{e9}\u{1F600}{}",
                "a".repeat(k),
                "b".repeat(k)
            );
            for max in [4, 5, 6, 7, 9] {
                let got = pieces(line.as_bytes(), max);
                assert!(
                    got.iter().all(|p| p.len() <= max && !p.is_empty()),
                    "{got:?}"
                );
                assert!(
                    got.iter().all(|p| std::str::from_utf8(p).is_ok()),
                    "{got:?}"
                );
                assert_eq!(got.concat(), line.as_bytes(), "k {k} max {max}");
            }
        }
        // Bytes that are not UTF-8 at a boundary are cut at the bound, and kept.
        let odd = b"xx\xff\xc3\xe2\x82\xf0\x9f\x98\xc0\xc1\x80\x80\x80";
        for max in 4..8 {
            let got = pieces(odd, max);
            assert!(
                got.iter().all(|p| p.len() <= max && !p.is_empty()),
                "{got:?}"
            );
            assert_eq!(got.concat(), odd, "max {max}");
        }
    }

    #[test]
    fn a_launch_forwards_its_processes_output_byte_for_byte() {
        // Through the launcher: raw bytes, \r's, a line whose 64 KiB piece boundary falls
        // inside a character, and a last line without a newline.
        // (from stderr, the line) for each call of the sink.
        type Lines = Vec<(bool, Vec<u8>)>;
        let got: Arc<std::sync::Mutex<Lines>> = Arc::default();
        let sink_got = Arc::clone(&got);
        let script = "printf '\\377\\376\\000abc\\r\\n'; \
                      head -c 65535 /dev/zero | tr '\\000' x; printf '\\303\\251\\n'; \
                      printf 'err\\377\\r\\r\\n' >&2; printf 'no newline\\r'";
        let launcher = Launcher {
            num_processes: 1,
            command: vec!["sh".into(), "-c".into(), script.into()],
            port: None,
            timeout: Some(Duration::from_secs(60)),
        };
        let outcome = launcher
            .run(Arc::new(move |p, is_err, line| {
                assert_eq!(p, 0);
                sink_got.lock().unwrap().push((is_err, line.to_vec()));
            }))
            .unwrap();
        assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
        let got = got.lock().unwrap();
        let stdout: Vec<&Vec<u8>> = got.iter().filter(|(e, _)| !e).map(|(_, l)| l).collect();
        let stderr: Vec<&Vec<u8>> = got.iter().filter(|(e, _)| *e).map(|(_, l)| l).collect();
        assert_eq!(stderr, [&b"err\xff\r\r".to_vec()]);
        assert_eq!(
            stdout.first().map(|l| l.as_slice()),
            Some(&b"\xff\xfe\x00abc\r"[..])
        );
        assert_eq!(
            stdout.last().map(|l| l.as_slice()),
            Some(&b"no newline\r"[..])
        );
        let long = &stdout[1..stdout.len() - 1];
        let want = format!("{}\u{e9}", "x".repeat(65535));
        assert_eq!(
            long.iter()
                .map(|l| l.as_slice())
                .collect::<Vec<_>>()
                .concat(),
            want.as_bytes()
        );
        assert!(long
            .iter()
            .all(|l| std::str::from_utf8(l).is_ok() && l.len() <= MAX_LINE));
    }

    #[test]
    fn resolve_takes_arguments_then_the_environment() {
        let vars: HashMap<String, String> = [
            ("RPJRT_COORDINATOR", "h:1"),
            ("RPJRT_TOKEN", "tok"),
            ("RANK", "1"),
            ("WORLD_SIZE", "4"),
            ("MASTER_ADDR", "m"),
            ("MASTER_PORT", "100"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let get = |k: &str| vars.get(k).cloned();
        let e = LaunchEnv::resolve_from(get, Some(0), Some(2), None, None).unwrap();
        assert_eq!(e.source, LaunchSource::Explicit);
        assert_eq!((e.process_id, e.num_processes), (0, 2));
        assert_eq!(
            (e.coordinator.as_deref(), e.token.as_deref()),
            (Some("h:1"), Some("tok"))
        );
        let e = LaunchEnv::resolve_from(get, Some(1), Some(2), Some("c:2".into()), Some("".into()))
            .unwrap();
        assert_eq!(
            (e.coordinator.as_deref(), e.token.as_deref()),
            (Some("c:2"), Some(""))
        );
        let e = LaunchEnv::resolve_from(get, None, None, Some("".into()), None).unwrap();
        assert_eq!(e.source, LaunchSource::Torchrun);
        assert_eq!((e.process_id, e.num_processes), (1, 4));
        assert_eq!(e.coordinator.as_deref(), Some("h:1")); // RPJRT_COORDINATOR overrides
        let e =
            LaunchEnv::resolve_from(get, None, None, Some("x:3".into()), Some("t".into())).unwrap();
        assert_eq!(
            (e.coordinator.as_deref(), e.token.as_deref()),
            (Some("x:3"), Some("t"))
        );
        let e = LaunchEnv::resolve_from(get, Some(0), None, None, None).unwrap_err();
        assert!(e.to_string().contains("give both"), "{e}");
        let e = LaunchEnv::resolve_from(get, Some(2), Some(2), None, None).unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
        let none = |_: &str| None;
        let e = LaunchEnv::resolve_from(none, Some(0), Some(1), None, None).unwrap();
        assert_eq!(e.coordinator, None);
    }

    #[test]
    fn first_host_of_slurm_lists() {
        assert_eq!(first_host("node[01-04,07]").unwrap(), "node01");
        assert_eq!(first_host("node[07,01-04]").unwrap(), "node07");
        assert_eq!(first_host("gpu-a[3,5],cpu1").unwrap(), "gpu-a3");
        assert_eq!(first_host("rack[1-2]-n[08-09],x").unwrap(), "rack1-n08");
        assert_eq!(first_host("localhost").unwrap(), "localhost");
        assert_eq!(first_host("a,b[1-2]").unwrap(), "a");
        // Every bracket item is a number or a forward range, not only the first.
        for bad in [
            "node[05-0a]",
            "node[05,]",
            "node[1,x]",
            "n[9-1]",
            "n[1-]",
            "n[-3]",
        ] {
            let e = first_host(bad).unwrap_err().to_string();
            assert!(e.contains("Slurm node list"), "{bad}: {e}");
        }
        assert_eq!(first_host("n[001-010]").unwrap(), "n001");
        assert!(first_host("node[01-04").is_err());
        assert!(first_host("node[x]").is_err());
        assert!(first_host("").is_err());
    }

    #[test]
    fn a_job_token_too_long_names_the_variable_it_came_from() {
        // A 100 KB SLURM_JOB_ID was refused as "the job token is 100007 bytes long".
        let long = "7".repeat(100_000);
        let slurm = [
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_JOB_ID", long.as_str()),
            ("SLURM_STEP_ID", "4"),
        ];
        let e = env(&slurm).unwrap_err().to_string();
        assert!(
            e.contains(
                "the job token made from SLURM_JOB_ID (100000 bytes) and SLURM_STEP_ID \
                 (1 bytes) is 100008 bytes long; at most 4096 are accepted"
            ),
            "{e}"
        );
        assert!(e.contains("RPJRT_TOKEN"), "{e}");
        assert!(e.len() < 400, "{e}");
        let e = env(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_JOB_ID", "1"),
            ("SLURM_STEP_ID", long.as_str()),
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("SLURM_STEP_ID (100000 bytes)"), "{e}");
        let e = env(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("TORCHELASTIC_RUN_ID", long.as_str()),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("the job token made from TORCHELASTIC_RUN_ID (100000 bytes) is 100009"),
            "{e}"
        );
        // RPJRT_TOKEN overrides the derived token: a short one is fine, a long one named.
        let mut with = slurm.to_vec();
        with.push(("RPJRT_TOKEN", "s"));
        assert_eq!(env(&with).unwrap().token.as_deref(), Some("s"));
        with.pop();
        with.push(("RPJRT_TOKEN", long.as_str()));
        let e = env(&with).unwrap_err().to_string();
        assert!(
            e.contains("RPJRT_TOKEN is 100000 bytes long; at most 4096 are accepted"),
            "{e}"
        );
        // The longest accepted token passes.
        let id = "1".repeat(crate::MAX_TOKEN_BYTES - "torchrun-".len());
        let e = env(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("TORCHELASTIC_RUN_ID", &id),
        ]);
        assert_eq!(e.unwrap().token.unwrap().len(), crate::MAX_TOKEN_BYTES);
    }

    #[test]
    fn a_long_program_name_is_shortened_in_the_error() {
        // `launch -- /nonexist/<100 KB>` printed the whole name.
        let program = format!("/nonexist/{}", "x".repeat(100_000));
        let e = Launcher {
            num_processes: 1,
            command: vec![program.into(), "arg".into()],
            port: None,
            timeout: Some(Duration::from_secs(10)),
        }
        .run(Arc::new(|_, _, _| {}))
        .unwrap_err()
        .to_string();
        assert!(
            e.len() < 400,
            "{} bytes: {}",
            e.len(),
            &e[..400.min(e.len())]
        );
        assert!(e.contains("cannot start \"/nonexist/xxx"), "{e}");
        assert!(e.contains("(100010 bytes)"), "{e}");
        // A short one is named whole.
        let e = Launcher {
            num_processes: 1,
            command: vec!["/nonexist/prog".into()],
            port: None,
            timeout: Some(Duration::from_secs(10)),
        }
        .run(Arc::new(|_, _, _| {}))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("cannot start \"/nonexist/prog\" (process 0 of 1)"),
            "{e}"
        );
    }

    #[test]
    fn each_launcher_is_recognised() {
        let e = env(&[
            ("RPJRT_PROCESS_ID", "1"),
            ("RPJRT_NUM_PROCESSES", "2"),
            ("RPJRT_COORDINATOR", "127.0.0.1:5000"),
            ("RPJRT_TOKEN", "s"),
            ("RANK", "0"),
            ("WORLD_SIZE", "8"),
        ])
        .unwrap();
        assert_eq!(
            e,
            LaunchEnv {
                process_id: 1,
                num_processes: 2,
                coordinator: Some("127.0.0.1:5000".into()),
                token: Some("s".into()),
                source: LaunchSource::Rpjrt
            }
        );
        let e = env(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "4"),
            ("MASTER_ADDR", "10.0.0.1"),
            ("MASTER_PORT", "29500"),
            ("TORCHELASTIC_RUN_ID", "abc"),
        ])
        .unwrap();
        assert_eq!(e.source, LaunchSource::Torchrun);
        assert_eq!((e.process_id, e.num_processes), (3, 4));
        assert_eq!(e.coordinator.as_deref(), Some("10.0.0.1:29501"));
        assert_eq!(e.token.as_deref(), Some("torchrun-abc"));
        let e = env(&[("OMPI_COMM_WORLD_RANK", "2"), ("OMPI_COMM_WORLD_SIZE", "3")]).unwrap();
        assert_eq!(
            (e.source, e.process_id, e.num_processes),
            (LaunchSource::OpenMpi, 2, 3)
        );
        assert_eq!(e.coordinator, None);
        let e = env(&[
            ("PMI_RANK", "0"),
            ("PMI_SIZE", "5"),
            ("RPJRT_COORDINATOR", "h:1"),
        ])
        .unwrap();
        assert_eq!((e.source, e.num_processes), (LaunchSource::Pmi, 5));
        assert_eq!(e.coordinator.as_deref(), Some("h:1"));
        let e = env(&[
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_JOB_NODELIST", "node[01-04,07]"),
            ("SLURM_JOB_ID", "77"),
            ("SLURM_STEP_ID", "0"),
        ])
        .unwrap();
        assert_eq!(
            (e.source, e.process_id, e.num_processes),
            (LaunchSource::Slurm, 5, 8)
        );
        assert_eq!(e.coordinator, Some(format!("node01:{DEFAULT_PORT}")));
        assert_eq!(e.token.as_deref(), Some("slurm-77-0"));
        let e = env(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NPROCS", "2"),
            ("SLURM_NODELIST", "localhost"),
            ("RPJRT_COORDINATOR_PORT", "6000"),
        ])
        .unwrap();
        assert_eq!(e.coordinator.as_deref(), Some("localhost:6000"));
    }

    #[test]
    fn bad_environments_say_what_is_wrong() {
        let m = env(&[]).unwrap_err().to_string();
        assert!(m.contains("no launcher"), "{m}");
        let m = env(&[("RANK", "x"), ("WORLD_SIZE", "2")])
            .unwrap_err()
            .to_string();
        assert!(m.contains("RANK=\"x\""), "{m}");
        let m = env(&[("RANK", "2"), ("WORLD_SIZE", "2")])
            .unwrap_err()
            .to_string();
        assert!(m.contains("out of range") && m.contains("torchrun"), "{m}");
        let m = env(&[("SLURM_PROCID", "0")]).unwrap_err().to_string();
        assert!(m.contains("SLURM_NTASKS"), "{m}");
        assert!(LaunchEnv::explicit(0, 0, None, None).is_err());
    }

    #[test]
    fn launcher_counts_go_through_one_bounded_check() {
        let m = |vars: &[(&str, &str)]| env(vars).unwrap_err().to_string();
        // Signs, spaces and text are refused, naming the variable (spaces around a number
        // passed, though the documentation says "no other text").
        for bad in ["-1", "+1", "1.0", "0x2", " ", " 1", "1 ", "\t1", "1\n"] {
            let e = m(&[("RPJRT_PROCESS_ID", "0"), ("RPJRT_NUM_PROCESSES", bad)]);
            assert!(
                e.contains("RPJRT_NUM_PROCESSES") && e.contains("not a non-negative"),
                "{e}"
            );
        }
        for bad in [" 1", "1 "] {
            let e = m(&[("RPJRT_PROCESS_ID", bad), ("RPJRT_NUM_PROCESSES", "2")]);
            assert!(
                e.contains("RPJRT_PROCESS_ID") && e.contains("no sign, spaces"),
                "{e}"
            );
        }
        // Ports alike.
        for bad in [" 29500", "29500 ", "+29500", "65536"] {
            let e = m(&[
                ("RANK", "0"),
                ("WORLD_SIZE", "1"),
                ("MASTER_ADDR", "h"),
                ("MASTER_PORT", bad),
            ]);
            assert!(
                e.contains("MASTER_PORT") && e.contains("not a port"),
                "{bad:?}: {e}"
            );
            let e = m(&[
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "1"),
                ("RPJRT_COORDINATOR_PORT", bad),
            ]);
            assert!(
                e.contains("RPJRT_COORDINATOR_PORT") && e.contains("not a port"),
                "{bad:?}: {e}"
            );
        }
        // A value of 100 KB is shown by its start and its length, not whole.
        let long = "7".repeat(100_000) + "x";
        let e = m(&[("RPJRT_PROCESS_ID", &long), ("RPJRT_NUM_PROCESSES", "2")]);
        assert!(
            e.contains("(100001 bytes)") && e.len() < 400,
            "{}",
            &e[..e.len().min(400)]
        );
        // Beyond the bound (and beyond 64 bits), the bound is named.
        let limit = crate::MAX_PROCESSES.to_string();
        for huge in ["4294967296", "99999999999999999999999"] {
            let e = m(&[("WORLD_SIZE", huge), ("RANK", "0")]);
            assert!(e.contains("WORLD_SIZE") && e.contains(&limit), "{e}");
            let e = m(&[("RANK", huge), ("WORLD_SIZE", "2")]);
            assert!(e.contains("RANK") && e.contains(&limit), "{e}");
        }
        // A count of 0 says so, naming the launcher.
        let e = m(&[("PMI_RANK", "0"), ("PMI_SIZE", "0")]);
        assert!(e.contains("at least 1") && e.contains("pmi"), "{e}");
        // The largest job is allowed.
        let top = (crate::MAX_PROCESSES - 1).to_string();
        let e = env(&[("RANK", &top), ("WORLD_SIZE", &limit)]).unwrap();
        assert_eq!(e.num_processes, crate::MAX_PROCESSES);
    }

    #[test]
    fn round_trip_through_env_vars() {
        let e = LaunchEnv::explicit(1, 3, Some("127.0.0.1:9".into()), Some("t".into())).unwrap();
        let vars = e.to_env_vars();
        let back = env(&vars
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect::<Vec<_>>())
        .unwrap();
        assert_eq!(back.source, LaunchSource::Rpjrt);
        assert_eq!((back.process_id, back.num_processes), (1, 3));
        assert_eq!(back.coordinator, e.coordinator);
        assert_eq!(back.token, e.token);
    }

    #[test]
    fn a_launcher_stopped_by_a_signal_exits_with_128_plus_it() {
        let outcome = |stopped_by, timed_out, first_failure| LaunchOutcome {
            exit_codes: vec![None, Some(3)],
            signals: vec![Some(9), None],
            first_failure,
            timed_out,
            stopped_by,
            output_cut: vec![1],
            output_cut_why: Some(OutputCut::Idle),
            output_holders: vec![],
        };
        // The launcher's own stop signal wins over everything else it could report.
        assert_eq!(outcome(Some(2), false, None).exit_code(), 130);
        assert_eq!(outcome(Some(15), true, Some(1)).exit_code(), 143);
        assert_eq!(outcome(Some(1), false, None).exit_code(), 129);
        assert_eq!(outcome(None, true, None).exit_code(), 124);
        assert_eq!(outcome(None, false, Some(1)).exit_code(), 3);
        assert_eq!(outcome(None, false, Some(0)).exit_code(), 137);
    }
}
