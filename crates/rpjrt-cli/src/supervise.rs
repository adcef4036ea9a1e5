//! A plugin that crashes ends the verb with a message, not with the shell's "Segmentation
//! fault": the verbs that load a plugin into the process (`info`, `run`, `compile`,
//! `rendezvous --plugin`) run in a
//! child process of the CLI, and the parent reports a child killed by a signal. `plugins`
//! reads each plugin's version in a child of its own ([`probe_version`]), so one broken
//! library does not take the listing down.
//!
//! The child is the same program run again (the Rust binary, or `python -m rpjrt` for the
//! Python package's command) with [`CHILD_ENV`] set; it inherits stdin, stdout and stderr,
//! so what it prints and reads is the verb's own.

use std::ffi::OsString;
use std::io::{BufRead as _, Read as _};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::common::{CliError, EXIT_DEFECT};

/// Set to `1` in a child's environment; a CLI that sees `1` runs the verb itself. Setting
/// it to `1` by hand turns supervision off (the verb then runs in the calling process);
/// unset, empty or `0` leaves it on, and any other value is refused ([`check_env`]).
pub const CHILD_ENV: &str = "RPJRT_CLI_SUPERVISED";

/// Refuses a [`CHILD_ENV`] value other than unset, empty, `0` or `1` (a usage error naming
/// the variable): `RPJRT_CLI_SUPERVISED=0` (or `no`) must not read as "supervised" and
/// silently turn supervision off, nor any value pass for another.
pub fn check_env() -> Result<(), CliError> {
    match std::env::var_os(CHILD_ENV) {
        None => Ok(()),
        Some(v) if v.is_empty() || v == "0" || v == "1" => Ok(()),
        Some(v) => Err(CliError::usage(format!(
            "{CHILD_ENV}={}: set it to 1 to run the verbs that load a plugin in this process \
             (no supervising parent), or leave it unset (or 0) to keep them in a child process \
             that a plugin's crash cannot take the CLI down with",
            rpjrt_distributed::shown(&v.to_string_lossy())
        ))),
    }
}

/// Set in a verb's child: the directory where its captures of the plugin's output keep
/// their names, so that after a crash the parent can show what the plugin wrote.
pub const CAPTURE_DIR_ENV: &str = "RPJRT_CLI_CAPTURE_DIR";

/// The command that runs this CLI again: the `RPJRT_CLI_SELF` JSON list when set (the
/// Python package sets it to `python -m rpjrt`), else this executable.
pub fn self_command() -> Result<Vec<OsString>, CliError> {
    if let Ok(v) = std::env::var(crate::cmd::conform::SELF_COMMAND_ENV) {
        if let Ok(list) = serde_json::from_str::<Vec<String>>(&v) {
            if !list.is_empty() {
                return Ok(list.into_iter().map(OsString::from).collect());
            }
        }
    }
    let exe = std::env::current_exe()
        .map_err(|e| CliError::failed(format!("cannot find this program to re-run it: {e}")))?;
    Ok(vec![exe.into_os_string()])
}

/// This CLI run again as a child: [`CHILD_ENV`] set, and killed (SIGKILL, which a plugin
/// cannot ignore or handle) when the thread that starts it ends, whichever way this
/// process ends (SIGKILL included): a supervisor killed by its own launcher leaves
/// nothing running. A supervisor asked to stop gives its child SIGTERM and
/// [`STOP_GRACE`] first ([`run_verb_in_child`]).
fn child_command() -> Result<Command, CliError> {
    let cmd = self_command()?;
    let mut c = Command::new(&cmd[0]);
    c.args(&cmd[1..]).env(CHILD_ENV, "1");
    rpjrt_raw::process::killed_with_parent(&mut c);
    Ok(c)
}

/// How long a supervised child asked to stop (the signal that stopped the CLI, passed on)
/// has to end before it is killed: a plugin may ignore or handle SIGTERM and SIGINT.
pub const STOP_GRACE: Duration = Duration::from_secs(2);

/// The file a supervised child leaves in its capture directory when its verb ran to the end.
const FINISHED: &str = "finished";

/// The file a supervised child leaves in its capture directory as soon as rpjrt runs in
/// it: a child that exits without it never got as far as rpjrt (the command that runs the
/// CLI again failed: an interpreter that cannot import rpjrt, say), so no plugin was
/// loaded and none is to blame.
const STARTED: &str = "started";

/// In a supervised child: notes, with a file in its capture directory, that rpjrt runs.
pub fn note_started() {
    if let Some(dir) = std::env::var_os(CAPTURE_DIR_ENV).filter(|_| is_child()) {
        let _ = std::fs::write(std::path::Path::new(&dir).join(STARTED), b"");
    }
}

/// In a supervised child: notes, with a file in its capture directory, that the verb ran
/// to its end.
pub fn note_finished() {
    if let Some(dir) = std::env::var_os(CAPTURE_DIR_ENV) {
        let _ = std::fs::write(std::path::Path::new(&dir).join(FINISHED), b"");
    }
}

/// Whether this process is a supervised child (or supervision is off): [`CHILD_ENV`] is
/// `1`.
pub fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some_and(|v| v == "1")
}

/// The file a supervised child leaves in its capture directory when a stop signal ended
/// its verb after it wrote what it had to (a trace): the signal's number.
const STOPPED: &str = "stopped";

/// In a supervised child: notes that the stop signal `sig` ends the verb (the process then
/// exits with 128 + `sig`), so that the supervisor reports it as the signal, not as an
/// `exit()` from inside the process.
pub fn note_stopped(sig: i32) {
    if let Some(dir) = std::env::var_os(CAPTURE_DIR_ENV).filter(|_| is_child()) {
        let _ = std::fs::write(Path::new(&dir).join(STOPPED), sig.to_string());
    }
}

/// Runs the CLI again on `args` (without the program name) in a child and returns its exit
/// code; a child killed by a signal is reported as the plugin's crash (exit code 1).
pub fn run_verb_in_child(verb: &str, args: &[OsString]) -> Result<i32, CliError> {
    let logs = LogDir::new();
    let mut cmd = child_command()?;
    if let Some(dir) = &logs.0 {
        cmd.env(CAPTURE_DIR_ENV, dir);
    }
    // The child inherits the /dev/null that Rust's runtime put on a closed stdout, and
    // cannot tell it from `>/dev/null`: tell it.
    if crate::common::stdout_closed() {
        cmd.env(crate::common::STDOUT_CLOSED_ENV, "1");
    }
    // A stop signal (Ctrl-C, SIGTERM from `timeout` or a job manager, SIGHUP) must not end
    // this process before its child and its log directory are gone: it is caught, passed
    // on to the child, and the child killed after STOP_GRACE if it has not ended.
    let stop = rpjrt_raw::process::StopSignals::catch().ok();
    let mut child = cmd.args(args).spawn().map_err(|e| {
        CliError::failed(format!(
            "cannot start rpjrt again to run `rpjrt {verb}` in a child process: {e} (set \
                 {CHILD_ENV}=1 to run it in this process)"
        ))
    })?;
    let startup = logs.0.as_ref().map(|d| Startup::new(d.join(STARTED), verb));
    let (status, stopped_by) = match wait_or_stop(&mut child, stop.as_ref(), verb, startup)? {
        Waited::Ended(status, stopped_by) => (status, stopped_by),
        Waited::NeverStarted(after) => return Err(never_started(verb, after)),
    };
    if let Some(sig) = stopped_by {
        // As a shell reports a command a signal ended: 128 + N, quietly (the user asked).
        drop(logs);
        return Ok(128 + sig);
    }
    // A child that a stop signal ended once it had written what it had to (a trace) counts
    // as ended by that signal.
    let stopped = logs
        .0
        .as_ref()
        .and_then(|d| std::fs::read_to_string(d.join(STOPPED)).ok())
        .and_then(|s| s.trim().parse::<i32>().ok())
        .filter(|&sig| status.code() == Some(128 + sig));
    let finished = logs.0.as_ref().is_none_or(|d| d.join(FINISHED).exists());
    let started = logs.0.as_ref().is_none_or(|d| d.join(STARTED).exists());
    let (code, signal) = match stopped {
        Some(sig) => (None, Some(sig)),
        None => (status.code(), signal_of(status)),
    };
    if !started && stopped.is_none() && !matches!(signal, Some(2 | 13)) {
        return Err(not_started(verb, status));
    }
    match (code, signal) {
        (Some(code), _) if finished => Ok(code),
        // Exited without reaching the end of the verb: a plugin called exit() (while
        // loading, say), which a status of 0 would pass off as success.
        (Some(code), _) => Err(CliError {
            message: crate::common::with_log(
                format!(
                    "`rpjrt {verb}` ended with exit status {code} before it finished: \
                     something in the process (the plugin, while loading or running) \
                     called exit()"
                ),
                &logs.read(),
            ),
            exit_code: if code == 0 { 1 } else { code },
        }),
        // A plugin's crash: SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGSYS.
        (None, Some(4 | 5 | 6 | 7 | 8 | 11 | 31)) | (None, None) => {
            let e = crashed(verb, status);
            Err(CliError {
                message: crate::common::with_log(e.message, &logs.read()),
                ..e
            })
        }
        // Ctrl-C, a closed pipe: the user's doing, which the shell reports its own way.
        (None, Some(sig @ (2 | 13))) => Ok(128 + sig),
        // SIGXFSZ, which the CLI ignores (so writes fail with "File too large"): only
        // something that set it back (a plugin) is ended by it.
        (None, Some(sig @ 25)) => Err(CliError {
            message: format!(
                "`rpjrt {verb}` was ended by signal {sig} (SIGXFSZ): a write went past the \
                 file-size limit (`ulimit -f`); raise the limit or write less"
            ),
            exit_code: 128 + sig,
        }),
        // Ended from outside (SIGTERM, SIGKILL from the OOM killer, ...): say so.
        (None, Some(sig)) => Err(CliError {
            message: format!("`rpjrt {verb}` was ended by signal {sig} from outside rpjrt"),
            exit_code: 128 + sig,
        }),
    }
}

/// What runs the CLI again in a verb's child, for messages: the command in
/// `RPJRT_CLI_SELF` (and the program running it), or this executable.
fn self_command_text() -> String {
    let program = self_command()
        .ok()
        .and_then(|c| c.into_iter().next())
        .map(|p| rpjrt_distributed::shown(&p.to_string_lossy()))
        .unwrap_or_default();
    if std::env::var_os(crate::cmd::conform::SELF_COMMAND_ENV).is_some() {
        format!(
            "the command in {} (run by {program})",
            crate::cmd::conform::SELF_COMMAND_ENV
        )
    } else {
        program
    }
}

/// The error for a verb's child that ended before rpjrt ran in it: the command that runs
/// the CLI again (`RPJRT_CLI_SELF`, set by the Python front end, or this executable) could
/// not run it. What the child printed (an interpreter's `No module named rpjrt`) is
/// already on stderr.
fn not_started(verb: &str, status: ExitStatus) -> CliError {
    let how = self_command_text();
    CliError::failed(format!(
        "`rpjrt {verb}` runs in a child process, which {} before rpjrt started in it: \
         {how} could not run rpjrt (what it printed, if anything, is above); no plugin was \
         loaded",
        rpjrt_conform::describe_exit(status)
    ))
}

/// The least time a supervised child is given to start rpjrt (its `started` marker) before
/// the parent gives up on it, whatever `--plugin-timeout` says: starting an interpreter
/// and importing rpjrt (`python -m rpjrt`) takes a moment, and the limit is the plugin's.
pub const STARTUP_FLOOR: Duration = Duration::from_secs(10);

/// The parent's watch on a child that has not started rpjrt yet: until its `started`
/// marker appears, no note nor limit of the child's own can apply (they live in rpjrt), so
/// the parent says what it waits on after [`crate::common::SLOW_CALL_NOTICE`], and gives up
/// at `--plugin-timeout` (no sooner than [`STARTUP_FLOOR`]).
struct Startup {
    marker: std::path::PathBuf,
    since: Instant,
    /// Set once the marker was seen (or the watch ended).
    done: bool,
    /// The note on stderr while waiting.
    note: Option<rpjrt::stdio::Watch>,
    /// When to give up: `--plugin-timeout`, at least [`STARTUP_FLOOR`].
    limit: Option<Duration>,
}

impl Startup {
    fn new(marker: std::path::PathBuf, verb: &str) -> Startup {
        let limit = crate::common::plugin_timeout().map(|l| l.max(STARTUP_FLOOR));
        let give_up = match (limit, crate::common::plugin_timeout_shown()) {
            (Some(l), Some(shown)) => format!(
                "rpjrt gives up after {} (the limit is {shown}, and a child is given \
                 at least {} to start)",
                rpjrt_distributed::duration_text(l),
                rpjrt_distributed::duration_text(STARTUP_FLOOR)
            ),
            _ => "or give up after a while with --plugin-timeout SECONDS".to_string(),
        };
        let program = self_command()
            .ok()
            .and_then(|c| c.into_iter().next())
            .map(|p| rpjrt_distributed::shown(&p.to_string_lossy()))
            .unwrap_or_default();
        let note = rpjrt::stdio::watch(
            format!(
                "the child process that runs `rpjrt {verb}` has not started rpjrt yet (it \
                 runs {program}{}; no plugin is loaded yet): Ctrl-C ends it, {give_up}",
                if std::env::var_os(crate::cmd::conform::SELF_COMMAND_ENV).is_some() {
                    format!(", from {}", crate::cmd::conform::SELF_COMMAND_ENV)
                } else {
                    String::new()
                }
            ),
            crate::common::SLOW_CALL_NOTICE,
        );
        Startup {
            marker,
            since: Instant::now(),
            done: false,
            note: Some(note),
            limit,
        }
    }

    /// Whether the child has been waited for past the limit without starting rpjrt; ends
    /// the watch once it has started.
    fn overdue(&mut self) -> Option<Duration> {
        if self.done {
            return None;
        }
        if self.marker.exists() {
            self.done = true;
            self.note = None;
            return None;
        }
        let waited = self.since.elapsed();
        self.limit.filter(|l| waited >= *l).map(|_| waited)
    }
}

/// How waiting for a supervised child ended.
enum Waited {
    /// It ended: its status, and the stop signal passed on to it, if one was.
    Ended(ExitStatus, Option<i32>),
    /// It did not start rpjrt within the start-up limit ([`Startup`]), and was killed
    /// after this long.
    NeverStarted(Duration),
}

/// The error for a verb's child that did not start rpjrt within the limit (killed).
fn never_started(verb: &str, after: Duration) -> CliError {
    let how = self_command_text();
    CliError::failed(format!(
        "`rpjrt {verb}` runs in a child process, which had not started rpjrt after {} \
         ({}; a child is given at least {} to start): {how} hangs before it reaches rpjrt; \
         it was killed, and no plugin was loaded",
        rpjrt_distributed::duration_text(rpjrt::stdio::rounded_to(
            after,
            Duration::from_millis(100)
        )),
        crate::common::plugin_timeout_shown()
            .map_or_else(|| "its limit".to_string(), |s| format!("the limit is {s}")),
        rpjrt_distributed::duration_text(STARTUP_FLOOR)
    ))
}

/// Waits for a supervised child. When `stop` catches a stop signal, the child gets that
/// signal, and SIGKILL after [`STOP_GRACE`] (or at a second signal) if it has not ended;
/// the signal is returned with the child's status once it has ended. While the child has
/// not started rpjrt (`startup`), the wait is bounded and noted as [`Startup`] says.
fn wait_or_stop(
    child: &mut std::process::Child,
    stop: Option<&rpjrt_raw::process::StopSignals>,
    verb: &str,
    mut startup: Option<Startup>,
) -> Result<Waited, CliError> {
    let mut asked: Option<(i32, Instant, usize)> = None;
    let mut killed = false;
    loop {
        match child.try_wait() {
            // A signal to the whole group (Ctrl-C) may end the child before this loop saw
            // it caught here: it still counts.
            Ok(Some(status)) => {
                let sig = asked
                    .map(|(sig, _, _)| sig)
                    .or_else(|| stop.and_then(|s| s.caught()));
                return Ok(Waited::Ended(status, sig));
            }
            Ok(None) => {}
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(CliError::failed(format!(
                    "waiting for the child running `rpjrt {verb}` failed: {e}"
                )));
            }
        }
        if let Some(stop) = stop {
            match (asked, stop.caught()) {
                (None, Some(sig)) => {
                    let _ = rpjrt_raw::process::signal_child(child, sig);
                    asked = Some((sig, Instant::now(), stop.times()));
                }
                (Some((sig, at, times)), _)
                    if !killed && (at.elapsed() >= STOP_GRACE || stop.times() > times) =>
                {
                    rpjrt::stdio::notice(&format!(
                        "rpjrt: `rpjrt {verb}` did not end within {} of {}; killed it",
                        rpjrt_distributed::duration_text(STOP_GRACE),
                        rpjrt_distributed::signal_name(sig)
                    ));
                    let _ = child.kill();
                    killed = true;
                }
                _ => {}
            }
        }
        if asked.is_none() {
            if let Some(after) = startup.as_mut().and_then(Startup::overdue) {
                drop(startup.take());
                // SIGKILL: the child may be a wrapper (a shell) whose own child hangs.
                let _ = rpjrt_raw::process::signal_child_tree(child, 9);
                let _ = child.kill();
                let _ = child.wait();
                return Ok(Waited::NeverStarted(after));
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The signal that ended a child, if one did.
fn signal_of(status: ExitStatus) -> Option<i32> {
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

/// A private directory for a child's captures (`None` when it cannot be made: the child
/// then captures as usual), removed with what is in it.
struct LogDir(Option<std::path::PathBuf>);

/// The name every [`LogDir`] starts with, followed by `PID-NANOS`.
const LOG_DIR_PREFIX: &str = ".rpjrt-child-logs-";

/// How long a log directory of a process that no longer runs is left alone before it is
/// taken for one that a killed CLI (SIGKILL cannot be caught) left behind.
const LOG_DIR_ORPHAN_AGE: std::time::Duration = std::time::Duration::from_secs(600);

/// Removes the log directories in `tmp` that CLI runs killed before their cleanup left:
/// named for a process that no longer runs (`/proc` tells; elsewhere nothing is removed),
/// untouched for [`LOG_DIR_ORPHAN_AGE`]. Symbolic links and other users' directories are
/// left alone (the one is never followed, the other cannot be removed).
fn remove_orphaned_log_dirs(tmp: &std::path::Path) {
    let proc = std::path::Path::new("/proc");
    if !proc.join("self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some((pid, nanos)) = name
            .to_str()
            .and_then(|n| n.strip_prefix(LOG_DIR_PREFIX))
            .and_then(|rest| rest.split_once('-'))
        else {
            continue;
        };
        let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), nanos.parse::<u128>()) else {
            continue;
        };
        if pid == std::process::id() || pid == 0 || proc.join(pid.to_string()).exists() {
            continue;
        }
        // `DirEntry::metadata` does not follow a symbolic link.
        let old = e
            .metadata()
            .ok()
            .filter(|m| m.is_dir())
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= LOG_DIR_ORPHAN_AGE);
        if old {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl LogDir {
    fn new() -> LogDir {
        let tmp = std::env::temp_dir();
        remove_orphaned_log_dirs(&tmp);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = tmp.join(format!("{LOG_DIR_PREFIX}{}-{nanos}", std::process::id()));
        LogDir(std::fs::create_dir(&dir).ok().map(|()| dir))
    }

    /// What the child's captures hold: those it left behind (a crash ends the process
    /// before a capture removes its file), oldest first.
    fn read(&self) -> String {
        let Some(dir) = &self.0 else {
            return String::new();
        };
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
        // The end of each (a plugin may write a lot); `with_log` keeps the last lines.
        files
            .iter()
            .filter_map(|p| {
                use std::io::{Seek, SeekFrom};
                let mut f = std::fs::File::open(p).ok()?;
                let len = f.metadata().ok()?.len();
                f.seek(SeekFrom::Start(
                    len.saturating_sub(rpjrt::stdio::CAPTURE_KEEP),
                ))
                .ok()?;
                let mut b = Vec::new();
                f.read_to_end(&mut b).ok()?;
                Some(String::from_utf8_lossy(&b).into_owned())
            })
            .collect::<Vec<_>>()
            .join("")
    }
}

impl Drop for LogDir {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The error for a child that did not exit by itself.
fn crashed(verb: &str, status: ExitStatus) -> CliError {
    CliError {
        message: format!(
            "`rpjrt {verb}` {}: the plugin crashed the process (rpjrt checks what it hands a \
             plugin; a crash is the plugin's defect); --plugin-log shows the plugin's whole \
             log",
            rpjrt_conform::describe_exit(status)
        ),
        exit_code: EXIT_DEFECT,
    }
}

/// What reading a plugin's PJRT version in a child found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// The version, `major.minor`.
    Version(String),
    /// The library loaded but its version could not be read (the reason).
    Failed(String),
    /// The child crashed or did not finish in time (what happened).
    Broken(String),
}

/// Reads the PJRT version of the library at `path` in a child process (`rpjrt
/// probe-version PATH`), giving up after `timeout`: loading a library runs its code, which
/// may crash or hang.
pub fn probe_version(path: &Path, timeout: Duration) -> Result<Probe, CliError> {
    // The time limit is this side's: a child that also gave up by itself at the same
    // moment would race the kill, and read as a plugin that answered nothing.
    let mut child = child_command()?
        .env_remove("RPJRT_PLUGIN_TIMEOUT")
        .arg("probe-version")
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| {
            CliError::failed(format!(
                "cannot start rpjrt again to read a plugin's version: {e}"
            ))
        })?;
    // The answer is the first line; read it on a thread so that neither the wait nor the
    // read can outlast the limit (a process the library started may hold the pipe open).
    let stdout = child.stdout.take();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let Some(out) = stdout else {
            let _ = tx.send(String::new());
            return;
        };
        let mut out = std::io::BufReader::new(out);
        // The first line is the answer, sent as soon as it is read.
        let mut s = Vec::new();
        let _ = out.by_ref().take(4096).read_until(b'\n', &mut s);
        let _ = tx.send(String::from_utf8_lossy(&s).into_owned());
        // The rest is read to its end and dropped: a child with more to write (what a
        // plugin printed and its C library flushes at exit) must not die of SIGPIPE.
        let _ = std::io::copy(&mut out, &mut std::io::sink());
    });
    let deadline = Instant::now() + timeout;
    let too_long = || {
        Probe::Broken(format!(
            "loading it did not finish in {}",
            rpjrt_distributed::duration_text(timeout)
        ))
    };
    let status = match rpjrt::stdio::wait_until(&mut child, deadline) {
        rpjrt::stdio::Reaped::Ended(status) => status,
        rpjrt::stdio::Reaped::Killed(_) => return Ok(too_long()),
        rpjrt::stdio::Reaped::Failed(e) => {
            return Err(CliError::failed(format!("waiting for a child failed: {e}")))
        }
    };
    let left = deadline.saturating_duration_since(Instant::now());
    let text = match rx.recv_timeout(left.max(Duration::from_millis(100))) {
        Ok(text) => text,
        Err(_) if status.code().is_some() => return Ok(too_long()),
        Err(_) => String::new(),
    };
    if status.code().is_none() {
        return Ok(Probe::Broken(format!(
            "loading it crashed the process ({})",
            rpjrt_conform::describe_exit(status)
        )));
    }
    let line = text.lines().next().unwrap_or("").trim().to_string();
    Ok(match line.strip_prefix("version ") {
        Some(v) if status.success() => Probe::Version(v.to_string()),
        _ if line.is_empty() => Probe::Failed(format!(
            "loading it ended the process without an answer ({})",
            rpjrt_conform::describe_exit(status)
        )),
        _ => Probe::Failed(line.strip_prefix("error ").unwrap_or(&line).to_string()),
    })
}

/// The child side of [`probe_version`]: prints `version M.N` or `error MESSAGE` on stdout.
pub fn probe_version_child(path: &Path) -> i32 {
    let quiet =
        crate::common::Quiet::start_loading("loading the plugin to read its PJRT version", [path]);
    let r = rpjrt::Plugin::probe_version(path);
    drop(quiet.finish());
    match r {
        Ok(v) => {
            crate::outln!("version {v}");
            crate::common::EXIT_OK
        }
        Err(e) => {
            crate::outln!("error {}", e.to_string().replace('\n', " "));
            EXIT_DEFECT
        }
    }
}
