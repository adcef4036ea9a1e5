//! A conformance harness for PJRT plugins: a second opinion on a plugin that is not JAX.
//!
//! The checks are data ([`Check`]: name, group, description, function) in
//! [`all_checks`]. Each exercises an entry point or extension through rpjrt's public API
//! and ends in one [`Outcome`]: pass, fail (a defect), unsupported (the capability is
//! absent; not a defect, except for the core entries of [`REQUIRED_ENTRIES`]), blocked (an earlier step it needs, creating the client, failed),
//! crash or timeout.
//!
//! Isolation: [`run_isolated`] runs the checks in a child process (the caller says how to
//! start one, normally its own binary with a hidden subcommand that calls
//! [`child_main`]). The child runs the checks one after another, announcing each on its
//! stdout before it starts and reporting it when done. When the child dies (a signal, an
//! abort, an exit) or a check runs past its timeout (the child is killed), that check is
//! recorded as crash or timeout and a fresh child continues with the checks after it. So a
//! plugin that segfaults or hangs in one check still gets a full report, and the plugin's
//! own stderr never mixes with the caller's output: the child marks each check's start on
//! stderr too, and the report keeps each check's part. The child also watches its stdin, a
//! pipe from the runner: when the runner dies, killed or not, the child ends too.
//!
//! The report ([`Report`]) serializes to the JSON schema documented in
//! `docs/conform-schema.md`, versioned by [`SCHEMA_VERSION`]; [`diff`] compares two, and
//! [`render_html`] draws one as a page or several as a matrix (the [`html`] module).
//!
//! # Example
//!
//! A program that checks a plugin: it is its own child process, started again with a
//! `child` argument followed by the `--plugin PATH --checks NAMES` that the runner adds.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! fn main() -> rpjrt::Result<()> {
//!     let args: Vec<String> = std::env::args().collect();
//!     if args.get(1).map(String::as_str) == Some("child") {
//!         // args: [exe, "child", "--plugin", PATH, "--checks", NAMES]
//!         let names: Vec<String> = args[5].split(',').map(str::to_string).collect();
//!         let code = rpjrt_conform::child_main(args[3].as_ref(), &names, &mut std::io::stdout());
//!         std::process::exit(code);
//!     }
//!     let config = rpjrt_conform::RunConfig {
//!         child: vec![std::env::current_exe().expect("own path").into(), "child".into()],
//!         timeout: Duration::from_secs(60),
//!         env: Vec::new(),
//!         load_timeout: None,
//!         load_notice: None,
//!     };
//!     let checks = rpjrt_conform::select(Some("api.*,buffers.*"));
//!     let mut progress = |_: usize, _: usize, _: &str, _: Option<&rpjrt_conform::CheckResult>| {};
//!     let report = rpjrt_conform::run_isolated(
//!         "/path/to/pjrt_plugin.so".as_ref(),
//!         &checks,
//!         &config,
//!         &mut progress,
//!     )?;
//!     for r in &report.results {
//!         println!("{:<12} {} {}", r.outcome.name(), r.name, r.detail);
//!     }
//!     std::process::exit(i32::from(report.has_defects()));
//! }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod checks;
mod exact;
pub mod html;

// Durations as the command line writes them (`2.0s`, `500ms`, `0.1ms`): exactly, never
// rounded to `0.0 s` (a limit of 1 ms read "after 0.0 s").
use rpjrt::stdio::duration_text;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value as Json};

use rpjrt::{Code, Error, Plugin};

pub use checks::all as all_checks;
pub use html::render_html;

/// Version of the report's JSON schema. Bumped on any incompatible change (2 added the
/// `blocked` outcome and the `blocked_by` field). Reports of version 1 are still read.
pub const SCHEMA_VERSION: u32 = 2;

/// The check whose job is creating the shared client: when that fails, it is the one
/// defect reported, and every other check that needs the client is [`Outcome::Blocked`].
pub const CLIENT_CHECK: &str = "client.create";

fn invalid(msg: impl Into<String>) -> Error {
    Error::InvalidArgument(msg.into())
}

/// Marks the child's protocol lines on its stdout, so that anything a plugin prints there
/// (even without a newline) cannot be taken for, or garble, a result.
const MARK: &str = "\u{1e}rpjrt-conform ";
/// The longest line of a child's stdout read as a protocol line; longer ones (a plugin's
/// output without end) are skipped unread into memory.
const MAX_PROTOCOL_LINE: usize = 16 << 20;

/// Set by [`run_isolated`] in a child's environment: a fresh random word the child puts in
/// each protocol line after the mark (`\u{1e}rpjrt-conform `). Lines without it are not read
/// as the protocol, so a plugin printing the mark (a log of another run, say) cannot forge
/// or end a check.
pub const NONCE_ENV: &str = "RPJRT_CONFORM_NONCE";

/// What starts a protocol line on stdout under `nonce` (empty: no runner gave one).
fn protocol_mark(nonce: &str) -> String {
    format!("{MARK}{nonce} ")
}

/// This child's [`protocol_mark`], for its stdout and stderr.
fn mark_here() -> &'static str {
    static MARK_HERE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    MARK_HERE.get_or_init(|| protocol_mark(&std::env::var(NONCE_ENV).unwrap_or_default()))
}

fn emit(out: &mut dyn Write, v: &Json) {
    // The leading newline ends any partial line a plugin left on stdout.
    let _ = write!(out, "\n{}{v}\n", mark_here());
    let _ = out.flush();
}

/// Test-only: the child aborts (SIGABRT) when it is about to run the check named here.
/// Lets tests prove the isolation without a plugin that crashes.
pub const TEST_CRASH_ENV: &str = "RPJRT_CONFORM_TEST_CRASH";
/// Test-only: the child sleeps forever when it is about to run the check named here.
pub const TEST_HANG_ENV: &str = "RPJRT_CONFORM_TEST_HANG";

/// Set by [`run_isolated`] in a child's environment: the runner holds the write end of the
/// child's stdin, and [`child_main`] ends the child when that pipe closes. A runner that
/// is killed (`SIGTERM` from `timeout` or a job manager, `SIGKILL`) thereby takes its
/// child along, instead of leaving it running, perhaps hung in a plugin call, for ever.
pub const PARENT_PIPE_ENV: &str = "RPJRT_CONFORM_PARENT_PIPE";

/// When [`PARENT_PIPE_ENV`] is set, a thread that reads stdin and exits the process at end
/// of file (the runner is gone). It writes nothing: there is no one left to read it.
///
/// The exit is `_exit` ([`rpjrt::stdio::exit_now`]): a normal exit runs the C library's
/// exit handlers, which take the dynamic loader's lock, and a plugin hung in its library
/// initializer (inside `dlopen`) holds that lock for ever. The thread is running, its own
/// set-up done, before this returns (and so before the plugin is loaded), for the same
/// reason: a new thread's first uses of thread-locals take that lock too.
fn exit_with_parent() {
    if std::env::var_os(PARENT_PIPE_ENV).is_none() {
        return;
    }
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let watcher = std::thread::Builder::new()
        .name("rpjrt-conform-parent".into())
        .spawn(move || {
            let _ = std::thread::current();
            let mut stdin = std::io::stdin();
            let _ = ready_tx.send(());
            let mut buf = [0u8; 64];
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) => break,
                    Err(e) if e.kind() != std::io::ErrorKind::Interrupted => break,
                    _ => {}
                }
            }
            rpjrt::stdio::exit_now(1)
        });
    if watcher.is_ok() {
        let _ = ready_rx.recv_timeout(Duration::from_secs(5));
    }
}

/// Where [`child_main`] writes its protocol.
enum Channel<'a> {
    /// A private copy of descriptor 1 taken before the plugin was loaded (the child of
    /// [`run_isolated`]): a plugin that points descriptor 1 elsewhere (`/dev/null`) or
    /// closes it cannot take the channel with it.
    /// Never closed: it stays open until the process ends, so that the runner's end of
    /// file means the child has ended (or that something cut the channel under it).
    Private(std::mem::ManuallyDrop<std::fs::File>),
    /// What the caller gave.
    Given(&'a mut dyn Write),
}

impl Write for Channel<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Channel::Private(f) => std::io::Write::write(&mut **f, buf).inspect_err(lost),
            Channel::Given(w) => w.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Channel::Private(f) => std::io::Write::flush(&mut **f).inspect_err(lost),
            Channel::Given(w) => w.flush(),
        }
    }
}

/// What starts the line a child writes on stderr, after its mark, when its channel is
/// lost ([`lost`]): the runner reads it there (the mark holds the run's nonce).
const LOST: &str = "lost-channel";

/// Ends the child whose channel cannot be written (`e`, other than an interrupted call):
/// something in the process (the plugin) closed the copy of stdout it writes to. Nothing
/// it finds can reach the runner any more, so it says so on stderr, under its mark, and
/// ends at once (the plugin may be inside a call on another thread).
fn lost(e: &std::io::Error) {
    if e.kind() == std::io::ErrorKind::Interrupted {
        return;
    }
    let _ = write!(std::io::stderr().lock(), "\n{}{LOST} {e}\n", mark_here());
    rpjrt::stdio::exit_now(1)
}

/// The channel of [`child_main`]: when [`run_isolated`] started this process
/// ([`PARENT_PIPE_ENV`] set), its protocol goes to the runner on the process's stdout, and
/// is written to a private copy of descriptor 1 (close-on-exec, numbered above 2), so that
/// the plugin owns descriptor 1 as any program's library does; otherwise `out`.
fn channel(out: &mut dyn Write) -> Channel<'_> {
    if std::env::var_os(PARENT_PIPE_ENV).is_some() {
        use std::os::fd::AsFd as _;
        let _ = out.flush();
        if let Ok(fd) = std::io::stdout().as_fd().try_clone_to_owned() {
            return Channel::Private(std::mem::ManuallyDrop::new(std::fs::File::from(fd)));
        }
    }
    Channel::Given(out)
}

/// How a check ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// The plugin did what PJRT specifies.
    Pass,
    /// The plugin did something wrong: a defect.
    Fail,
    /// The capability is absent (by the plugin, or not yet bound by rpjrt): not a defect.
    Unsupported,
    /// The process died during the check (a signal, an abort, an unexpected exit).
    Crash,
    /// The check ran past its time limit and was killed.
    Timeout,
    /// The check needs something an earlier step failed to make (the client): it could
    /// not run. Not a defect of its own; the cause is in [`CheckResult::blocked_by`].
    Blocked,
}

impl Outcome {
    /// The lower-case name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Unsupported => "unsupported",
            Outcome::Crash => "crash",
            Outcome::Timeout => "timeout",
            Outcome::Blocked => "blocked",
        }
    }

    /// The outcome with that name.
    pub fn from_name(s: &str) -> Option<Outcome> {
        Some(match s {
            "pass" => Outcome::Pass,
            "fail" => Outcome::Fail,
            "unsupported" => Outcome::Unsupported,
            "crash" => Outcome::Crash,
            "timeout" => Outcome::Timeout,
            "blocked" => Outcome::Blocked,
            _ => return None,
        })
    }

    /// True for the outcomes that count as defects (fail, crash, timeout).
    pub fn is_defect(self) -> bool {
        matches!(self, Outcome::Fail | Outcome::Crash | Outcome::Timeout)
    }

    /// Every outcome, in the order reports list them.
    pub const ALL: [Outcome; 6] = [
        Outcome::Pass,
        Outcome::Fail,
        Outcome::Unsupported,
        Outcome::Blocked,
        Outcome::Crash,
        Outcome::Timeout,
    ];
}

/// What a check found.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckResult {
    /// The check's name, `group.what`.
    pub name: String,
    /// Its group.
    pub group: String,
    /// How it ended.
    pub outcome: Outcome,
    /// For unsupported: `plugin` (the plugin lacks it) or `rpjrt` (rpjrt does not bind it
    /// yet). `None` otherwise.
    pub unsupported_by: Option<String>,
    /// For blocked: the check whose failure blocked this one ([`CLIENT_CHECK`]). `None`
    /// otherwise.
    pub blocked_by: Option<String>,
    /// One line saying what happened (the error, what differed, why unsupported).
    pub detail: String,
    /// Facts observed (sizes, versions, names), compared by [`diff`].
    pub facts: Map<String, Json>,
    /// Wall time of the check.
    pub duration_ms: f64,
    /// The plugin's stderr output during the check (its log lines), when there was any.
    pub stderr: String,
}

impl CheckResult {
    fn to_json(&self) -> Json {
        json!({
            "name": self.name, "group": self.group, "outcome": self.outcome.name(),
            "unsupported_by": self.unsupported_by, "blocked_by": self.blocked_by,
            "detail": self.detail,
            "facts": self.facts, "duration_ms": self.duration_ms, "stderr": self.stderr,
        })
    }

    fn from_json(v: &Json) -> Option<CheckResult> {
        CheckResult::read(v).ok()
    }

    /// A result as a report holds it, each field checked against the schema: a field of
    /// the wrong type (`"duration_ms": "fast"`), an unknown outcome or a missing name is
    /// refused naming the field. Fields that version 1 reports lack (`blocked_by`) and the
    /// optional ones may be absent or null.
    fn read(v: &Json) -> std::result::Result<CheckResult, String> {
        let o = v
            .as_object()
            .ok_or_else(|| format!("is {}, not an object", kind(v)))?;
        let text = |k: &str| -> std::result::Result<Option<String>, String> {
            match o.get(k) {
                None | Some(Json::Null) => Ok(None),
                Some(Json::String(s)) => Ok(Some(s.clone())),
                Some(other) => Err(format!("\"{k}\" is {}, not a string", kind(other))),
            }
        };
        let name = text("name")?
            .filter(|n| !n.is_empty())
            .ok_or("has no \"name\" (the check's name)")?;
        let group = text("group")?.ok_or("has no \"group\"")?;
        let outcome = match o.get("outcome") {
            Some(Json::String(s)) => Outcome::from_name(s).ok_or_else(|| {
                format!(
                    "\"outcome\" is {s:?}, not one of {}",
                    Outcome::ALL.map(Outcome::name).join(", ")
                )
            })?,
            Some(other) => return Err(format!("\"outcome\" is {}, not a string", kind(other))),
            None => return Err("has no \"outcome\"".into()),
        };
        let facts = match o.get("facts") {
            None | Some(Json::Null) => Map::new(),
            Some(Json::Object(f)) => f.clone(),
            Some(other) => return Err(format!("\"facts\" is {}, not an object", kind(other))),
        };
        let duration_ms = match o.get("duration_ms") {
            None | Some(Json::Null) => 0.0,
            Some(Json::Number(n)) => match n.as_f64() {
                Some(d) if d.is_finite() && d >= 0.0 => d,
                _ => {
                    return Err(format!(
                        "\"duration_ms\" is {n}, not a number of milliseconds (0 or more)"
                    ))
                }
            },
            Some(other) => {
                return Err(format!(
                    "\"duration_ms\" is {}, not a number of milliseconds",
                    kind(other)
                ))
            }
        };
        Ok(CheckResult {
            name,
            group,
            outcome,
            unsupported_by: text("unsupported_by")?,
            blocked_by: text("blocked_by")?,
            detail: text("detail")?.unwrap_or_default(),
            facts,
            duration_ms,
            stderr: text("stderr")?.unwrap_or_default(),
        })
    }
}

/// A JSON value's kind, for a message: `a string ("fast")`, `a number (5)`, `null`, ...
fn kind(v: &Json) -> String {
    let short = |s: String| {
        if s.chars().count() > 40 {
            format!("{}...", s.chars().take(40).collect::<String>())
        } else {
            s
        }
    };
    match v {
        Json::Null => "null".into(),
        Json::Bool(b) => format!("a boolean ({b})"),
        Json::Number(n) => format!("a number ({})", short(n.to_string())),
        Json::String(s) => format!("a string ({})", short(format!("{s:?}"))),
        Json::Array(_) => "a list".into(),
        Json::Object(_) => "an object".into(),
    }
}

/// The verdict a check function returns (the runner adds name, group and timing).
#[derive(Clone, Debug, Default)]
pub struct Verdict {
    outcome: Option<Outcome>,
    unsupported_by: Option<String>,
    detail: String,
    facts: Map<String, Json>,
}

impl Verdict {
    /// A pass.
    pub fn pass() -> Verdict {
        Verdict {
            outcome: Some(Outcome::Pass),
            ..Verdict::default()
        }
    }

    /// A defect, with what was wrong.
    pub fn fail(detail: impl Into<String>) -> Verdict {
        Verdict {
            outcome: Some(Outcome::Fail),
            detail: detail.into(),
            ..Verdict::default()
        }
    }

    /// The plugin lacks the capability.
    pub fn unsupported(detail: impl Into<String>) -> Verdict {
        Verdict::unsupported_by("plugin", detail.into())
    }

    /// rpjrt does not bind the capability yet (the plugin may have it).
    pub fn unsupported_in_rpjrt(detail: impl Into<String>) -> Verdict {
        Verdict::unsupported_by("rpjrt", detail.into())
    }

    /// Unsupported, and by whom (`plugin` or `rpjrt`).
    fn unsupported_by(by: &str, detail: String) -> Verdict {
        Verdict {
            outcome: Some(Outcome::Unsupported),
            unsupported_by: Some(by.into()),
            detail,
            ..Verdict::default()
        }
    }

    /// Adds a fact.
    pub fn fact(mut self, key: &str, value: impl Into<Json>) -> Verdict {
        self.facts.insert(key.to_string(), value.into());
        self
    }

    /// Turns this verdict (with the facts gathered so far) into a defect: `detail` says
    /// what was wrong.
    pub fn into_fail(mut self, detail: impl Into<String>) -> Verdict {
        self.outcome = Some(Outcome::Fail);
        self.unsupported_by = None;
        self.detail = detail.into();
        self
    }

    /// Sets the detail line.
    pub fn detail(mut self, detail: impl Into<String>) -> Verdict {
        self.detail = detail.into();
        self
    }

    /// The verdict for an error: unsupported for a capability the plugin lacks
    /// (`Unsupported`, `UNIMPLEMENTED`), a defect otherwise. The detail says what
    /// happened: a plugin that answered UNIMPLEMENTED is named as such, and a version is
    /// given only when the plugin's version is what is missing.
    ///
    /// The exception is an entry of [`REQUIRED_ENTRIES`]: a plugin without it (an empty
    /// slot, or UNIMPLEMENTED) cannot run anything, so its absence is a defect, and the
    /// detail says that the entry is required of every PJRT plugin.
    pub fn from_error(e: &Error) -> Verdict {
        if let Some((entry, how)) = missing_required_entry(e) {
            return Verdict::fail(format!(
                "{entry} is required of every PJRT plugin, but {how}"
            ))
            .fact("missing_required_entry", entry);
        }
        match e {
            Error::Pjrt {
                entry,
                code: Code::Unimplemented,
                message,
            } => Verdict::unsupported(answered_unimplemented(entry, message, None)),
            Error::Unsupported {
                what,
                needs,
                plugin,
                ..
            } => {
                if let Some((what, entry, message)) = unimplemented_in(what) {
                    return Verdict::unsupported(answered_unimplemented(
                        entry,
                        message,
                        Some(what),
                    ));
                }
                // Only a newer version than the plugin's is worth naming; at its own
                // version the plugin simply leaves the capability out (an empty slot, an
                // absent extension, a short extension struct).
                Verdict::unsupported(if needs > plugin {
                    format!("{what} needs PJRT {needs}; this plugin implements PJRT {plugin}")
                } else {
                    format!("the plugin does not provide {what} (PJRT {plugin})")
                })
            }
            _ if e.code() == Code::Unimplemented => Verdict::unsupported(e.to_string()),
            _ => Verdict::fail(e.to_string()),
        }
    }
}

/// The entries of the PJRT C API that every plugin must implement: without one of them a
/// plugin cannot run a program at all (read the errors it returns, create a client, find the devices it can use, put
/// host data on one, compile, execute, and read a result back). A check that finds one of
/// them missing (an empty slot, or a call answered with UNIMPLEMENTED) reports a failure,
/// not `unsupported`; every other capability may be absent without being a defect.
pub const REQUIRED_ENTRIES: &[&str] = &[
    // Without these no error the plugin returns can be read (its code, its message) or
    // freed: every other check's verdict on an error would be a guess.
    "PJRT_Error_Destroy",
    "PJRT_Error_Message",
    "PJRT_Error_GetCode",
    "PJRT_Client_Create",
    "PJRT_Client_AddressableDevices",
    "PJRT_Client_BufferFromHostBuffer",
    "PJRT_Buffer_ToHostBuffer",
    "PJRT_Client_Compile",
    "PJRT_LoadedExecutable_Execute",
];

/// When `e` says that an entry of [`REQUIRED_ENTRIES`] is missing or answered
/// UNIMPLEMENTED: that entry, and how it is missing (the end of a sentence).
fn missing_required_entry(e: &Error) -> Option<(&str, String)> {
    let required = |entry: &str| REQUIRED_ENTRIES.contains(&entry);
    match e {
        Error::Pjrt {
            entry,
            code: Code::Unimplemented,
            message,
        } if required(entry) => Some((entry, answered_unimplemented(entry, message, None))),
        Error::Unsupported {
            what,
            plugin,
            missing_slot,
            ..
        } => {
            if let Some((what, entry, message)) = unimplemented_in(what) {
                return required(entry)
                    .then(|| (entry, answered_unimplemented(entry, message, Some(what))));
            }
            // A table entry the plugin leaves out: `what` is the entry's name.
            let entry = what.as_str();
            required(entry).then(|| {
                let how = if *missing_slot {
                    format!("the plugin (PJRT {plugin}) leaves its slot in the function table null")
                } else {
                    format!("the plugin's function table (PJRT {plugin}) ends before it")
                };
                (entry, how)
            })
        }
        Error::OutOfMemory { error, .. } => missing_required_entry(error),
        _ if e.code() == Code::Unimplemented => e
            .entry()
            .filter(|entry| required(entry))
            .map(|entry| (entry, format!("the plugin answered UNIMPLEMENTED: {e}"))),
        _ => None,
    }
}

fn answered_unimplemented(entry: &str, message: &str, what: Option<&str>) -> String {
    let mut s = format!("the plugin answered UNIMPLEMENTED for {entry}");
    if let Some(what) = what.filter(|w| !w.is_empty()) {
        s.push_str(&format!(" (asked for {what})"));
    }
    if !message.trim().is_empty() {
        s.push_str(": ");
        s.push_str(message.trim());
    }
    s
}

/// rpjrt reports an entry that answered UNIMPLEMENTED, where it stands for a missing
/// capability, as `Unsupported` with `what` = `WHAT (ENTRY: the plugin says UNIMPLEMENTED:
/// MESSAGE)`; the parts, when `what` has that form.
fn unimplemented_in(what: &str) -> Option<(&str, &str, &str)> {
    const SAYS: &str = ": the plugin says UNIMPLEMENTED";
    let at = what.find(SAYS)?;
    let open = what[..at].rfind(" (")?;
    let entry = &what[open + 2..at];
    if !entry.starts_with("PJRT_") {
        return None;
    }
    let rest = &what[at + SAYS.len()..];
    let message = rest.strip_prefix(':').unwrap_or(rest).trim_start();
    let message = message.strip_suffix(')').unwrap_or(message);
    Some((what[..open].trim(), entry, message))
}

/// What a check function gets: the plugin, and a client made on first use.
pub struct Ctx {
    /// The plugin under test.
    pub plugin: Plugin,
    client: Option<rpjrt::Client>,
    /// Why the client could not be created (tried once per child process).
    client_error: Option<String>,
    /// Set when the running check asked for the client and there was none.
    wanted_missing_client: bool,
}

impl Ctx {
    fn new(plugin: Plugin) -> Ctx {
        Ctx {
            plugin,
            client: None,
            client_error: None,
            wanted_missing_client: false,
        }
    }

    /// The shared default client of this child process, created on first use. Creation
    /// is tried once: when it fails, this and every later call return that error, and
    /// the checks that asked are reported as blocked by it rather than each as a failure.
    pub fn client(&mut self) -> rpjrt::Result<&rpjrt::Client> {
        if self.client.is_none() {
            if let Some(e) = &self.client_error {
                self.wanted_missing_client = true;
                return Err(invalid(format!("no client: {e}")));
            }
            match rpjrt::Client::new(&self.plugin, &rpjrt::ClientOptions::new()) {
                Ok(c) => self.client = Some(c),
                Err(e) => {
                    self.client_error = Some(e.to_string());
                    self.wanted_missing_client = true;
                    return Err(e);
                }
            }
        }
        Ok(self.client.as_ref().expect("set above"))
    }
}

/// A check function: `Err` becomes [`Verdict::from_error`].
pub type CheckFn = fn(&mut Ctx) -> rpjrt::Result<Verdict>;

/// One conformance check.
#[derive(Clone, Debug)]
pub struct Check {
    /// `group.what`, unique.
    pub name: String,
    /// The group (the part before the first dot).
    pub group: String,
    /// What it checks, one line.
    pub description: String,
    /// The function.
    pub run: CheckFn,
}

/// The comma-separated parts of `only` that select no check (a typo among several
/// patterns would otherwise go unnoticed), in order.
pub fn unmatched(only: &str) -> Vec<String> {
    let names: Vec<String> = all_checks().into_iter().map(|c| c.name).collect();
    only.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .filter(|p| !names.iter().any(|n| matches(p, n)))
        .map(str::to_string)
        .collect()
}

/// True when `name` matches `pattern`: `*` matches any run of characters; a pattern
/// without `*` matches names containing it. Several patterns separated by `,` match
/// when any does.
pub fn matches(pattern: &str, name: &str) -> bool {
    pattern
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .any(|p| {
            if !p.contains('*') {
                return name.contains(p);
            }
            glob(p.as_bytes(), name.as_bytes())
        })
}

/// Whole-string match of `s` against `p`, where `*` matches any run. Backtracks only to the
/// last `*` seen, so it takes time proportional to `p.len() * s.len()` at worst (trying
/// every split for every `*` took exponential time: `**********x` hung).
fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    // The position after the last `*` and the text position it is tried from.
    let mut retry: Option<(usize, usize)> = None;
    while si < s.len() {
        match p.get(pi) {
            Some(b'*') => {
                pi += 1;
                retry = Some((pi, si));
            }
            Some(&c) if c == s[si] => {
                pi += 1;
                si += 1;
            }
            _ => match retry {
                // The last `*` takes one more character.
                Some((after_star, from)) => {
                    pi = after_star;
                    si = from + 1;
                    retry = Some((after_star, from + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// The checks selected by `only` (all when `None`).
pub fn select(only: Option<&str>) -> Vec<Check> {
    all_checks()
        .into_iter()
        .filter(|c| match only {
            Some(p) => matches(p, &c.name),
            None => true,
        })
        .collect()
}

/// The check that reports a required entry the plugin leaves out: the one defect when an
/// error entry is missing (`ERROR_READERS`).
pub const NULL_ENTRIES_CHECK: &str = "api.null_entries";

/// The entries through which an error the plugin returns is read: without
/// `PJRT_Error_GetCode` every error reads as `UNKNOWN` (an `UNIMPLEMENTED` cannot be told
/// from a defect), without `PJRT_Error_Message` it says nothing.
const ERROR_READERS: &[&str] = &["PJRT_Error_GetCode", "PJRT_Error_Message"];

/// A check that failed on an error the plugin returned, while the plugin leaves an entry
/// of [`ERROR_READERS`] out: the failure may only be that the error could not be read
/// (`UNIMPLEMENTED` read as `UNKNOWN`). Reported as blocked by [`NULL_ENTRIES_CHECK`],
/// which fails once for the missing entry, naming the entry; `None` for any other verdict.
fn unreadable_error(
    plugin: &Plugin,
    check: &str,
    verdict: &Verdict,
    error: Option<&Error>,
) -> Option<String> {
    if check == NULL_ENTRIES_CHECK || verdict.outcome != Some(Outcome::Fail) {
        return None;
    }
    let missing: Vec<&str> = ERROR_READERS
        .iter()
        .copied()
        .filter(|e| !plugin.has_entry(e))
        .collect();
    if missing.is_empty() {
        return None;
    }
    // An error from the plugin: returned by the check, or read by it (its detail names
    // the code that could not be read, or the message that could not be).
    let from_plugin = error.is_some_and(|e| e.entry().is_some())
        || verdict.detail.contains("UNKNOWN")
        || verdict.detail.contains("(the plugin gave no message)");
    if !from_plugin {
        return None;
    }
    let them = if missing.len() == 1 { "it" } else { "them" };
    Some(format!(
        "the plugin returned an error that cannot be read: its function table leaves {} \
         null ({NULL_ENTRIES_CHECK} fails for {them}), so its code or message is unknown; \
         as read: {}",
        missing.join(" and "),
        verdict.detail
    ))
}

fn run_one(ctx: &mut Ctx, check: &Check) -> CheckResult {
    let start = Instant::now();
    ctx.wanted_missing_client = false;
    let mut error = None;
    let verdict = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (check.run)(ctx)))
    {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            let v = Verdict::from_error(&e);
            error = Some(e);
            v
        }
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Verdict::fail(format!("the check panicked: {msg}"))
        }
    };
    // Only the client check reports a failure to create the client; the others could
    // not run without one.
    let blocked = ctx.wanted_missing_client && check.name != CLIENT_CHECK;
    let unreadable = unreadable_error(&ctx.plugin, &check.name, &verdict, error.as_ref());
    let (verdict, blocked_by) = match (&ctx.client_error, blocked, unreadable) {
        (Some(e), true, _) => (
            Verdict {
                outcome: Some(Outcome::Blocked),
                detail: format!("needs a client, and the plugin could not create one: {e}"),
                ..Verdict::default()
            },
            Some(CLIENT_CHECK.to_string()),
        ),
        (_, _, Some(detail)) => (
            Verdict {
                outcome: Some(Outcome::Blocked),
                detail,
                facts: verdict.facts,
                ..Verdict::default()
            },
            Some(NULL_ENTRIES_CHECK.to_string()),
        ),
        _ => (verdict, None),
    };
    CheckResult {
        name: check.name.clone(),
        group: check.group.clone(),
        outcome: verdict.outcome.unwrap_or(Outcome::Pass),
        unsupported_by: verdict.unsupported_by,
        blocked_by,
        detail: verdict.detail,
        facts: verdict.facts,
        duration_ms: start.elapsed().as_secs_f64() * 1e3,
        stderr: String::new(),
    }
}

/// The body of the child process: loads `plugin`, runs the named checks in order, and
/// writes one marked JSON line per event on `out` (`{"plugin": {...}}` once loaded,
/// `{"start": NAME}` before a check, `{"result": {...}}` after it). Returns the process
/// exit code. Started by [`run_isolated`] ([`PARENT_PIPE_ENV`] set), it also ends the
/// process as soon as the runner is gone.
///
/// With [`LOAD_TIMEOUT_ENV`] set (by a runner given [`RunConfig::load_timeout`]), a load
/// still running at that limit ends the child at once (the call cannot be taken back from
/// the plugin, and its static destructors must not run under it), after a `load_error`
/// naming the limit and the step the load was in.
pub fn child_main(plugin: &Path, names: &[String], out: &mut dyn Write) -> i32 {
    exit_with_parent();
    let mut channel = channel(out);
    let out = &mut channel;
    let checks = all_checks();
    let loaded = match load_limit_from_env() {
        Some((limit, shown_as)) => load_within(plugin, limit, &shown_as, out),
        None => Plugin::load(plugin),
    };
    let plugin = match loaded {
        Ok(p) => p,
        Err(e) => {
            let reason = match e {
                Error::PluginLoad { reason, .. } => reason,
                other => other.to_string(),
            };
            emit(out, &json!({ "load_error": reason }));
            return 1;
        }
    };
    emit(out, &json!({"plugin": describe(&plugin)}));
    let mut ctx = Ctx::new(plugin);
    let crash = std::env::var(TEST_CRASH_ENV).unwrap_or_default();
    let hang = std::env::var(TEST_HANG_ENV).unwrap_or_default();
    for name in names {
        let Some(check) = checks.iter().find(|c| &c.name == name) else {
            emit(out, &json!({ "unknown_check": name }));
            return 2;
        };
        emit(out, &json!({ "start": name }));
        // The same mark on stderr splits the plugin's log lines by check, whatever the
        // order in which the two pipes are read.
        // Never a panic when stderr cannot be written: the mark is only a help.
        let _ = write!(std::io::stderr().lock(), "\n{}start {name}\n", mark_here());
        if !crash.is_empty() && matches(&crash, name) {
            std::process::abort();
        }
        if !hang.is_empty() && matches(&hang, name) {
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        let r = run_one(&mut ctx, check);
        emit(out, &json!({"result": r.to_json()}));
    }
    0
}

/// Set by [`run_isolated`] in a child's environment when [`RunConfig::load_timeout`] is
/// given: the limit on loading the plugin, in seconds (a decimal number).
pub const LOAD_TIMEOUT_ENV: &str = "RPJRT_CONFORM_LOAD_TIMEOUT";
/// Set with [`LOAD_TIMEOUT_ENV`]: how the child's error names the limit
/// ([`LoadTimeout::shown_as`]).
pub const LOAD_TIMEOUT_SHOWN_ENV: &str = "RPJRT_CONFORM_LOAD_TIMEOUT_SHOWN";

/// The stack of the thread that loads the plugin under a limit: as large as a main
/// thread's usually is (a plugin's initializers may recurse deeply).
const LOAD_THREAD_STACK: usize = 16 << 20;

/// The load limit [`run_isolated`] gave this child, when it gave one.
fn load_limit_from_env() -> Option<(Duration, String)> {
    let secs: f64 = std::env::var(LOAD_TIMEOUT_ENV).ok()?.parse().ok()?;
    let limit = Duration::try_from_secs_f64(secs).ok()?;
    let shown = std::env::var(LOAD_TIMEOUT_SHOWN_ENV)
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("{secs}s"));
    Some((limit, shown))
}

/// [`Plugin::load`] on a thread of its own, given up at `limit`: the child then reports a
/// `load_error` naming the limit (as `shown_as`) and the step the load was in
/// ([`Plugin::current_step`]), and ends at once (see [`child_main`]).
fn load_within(
    path: &Path,
    limit: Duration,
    shown_as: &str,
    out: &mut dyn Write,
) -> rpjrt::Result<Plugin> {
    let (tx, rx) = mpsc::channel();
    // A thread's first blocking wait on a channel registers thread-locals with destructors,
    // which takes the dynamic loader's lock: a `dlopen` that never returns holds it. This
    // thread's first such wait is made here, before the load starts, so that the wait
    // below cannot block on that lock and never give up. The mark is made ready too.
    let _ = rx.recv_timeout(Duration::from_millis(1));
    let _ = mark_here();
    let owned = path.to_path_buf();
    let loader = std::thread::Builder::new()
        .name("rpjrt-conform-load".into())
        .stack_size(LOAD_THREAD_STACK)
        .spawn(move || {
            let _ = tx.send(Plugin::load(&owned));
        });
    let loader = match loader {
        Ok(t) => t,
        // No thread to spare: load here, without the limit.
        Err(_) => return Plugin::load(path),
    };
    let loader_id = loader.thread().id();
    match rx.recv_timeout(limit) {
        Ok(loaded) => {
            let _ = loader.join();
            loaded
        }
        // The load panicked: as it would have on this thread.
        Err(mpsc::RecvTimeoutError::Disconnected) => match loader.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            // Not expected: the loader sends its result before it ends.
            Ok(()) => Err(Error::PluginLoad {
                path: path.to_path_buf(),
                reason: "the thread loading the plugin ended without a result".into(),
            }),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            let step =
                Plugin::current_step(loader_id).map_or_else(String::new, |s| format!(", in {s}"));
            emit(
                out,
                &json!({
                    "load_error": format!(
                        "the plugin did not return within {shown_as}{step}; the conform \
                         child process gave up on it and exited"
                    ),
                    "timed_out": true,
                }),
            );
            // The load cannot be taken back: no exit handlers or static destructors run
            // while it is still inside the plugin (and may hold the loader's lock).
            rpjrt::stdio::exit_now(1)
        }
    }
}

/// A limit on loading the plugin in each child of [`run_isolated`] (`dlopen` and the
/// library's initializers, `GetPjrtApi`, `PJRT_Plugin_Initialize`, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadTimeout {
    /// How long a child may take to load the plugin.
    pub limit: Duration,
    /// How an error names the limit, after "did not return within": its length and what
    /// set it, e.g. `2.0s (--plugin-timeout)`.
    pub shown_as: String,
}

/// How [`run_isolated`] starts a child and reports progress.
pub struct RunConfig {
    /// The program and leading arguments that start a child: the runner appends
    /// `--plugin PATH --checks NAME,NAME,...`.
    pub child: Vec<OsString>,
    /// Time limit per check.
    pub timeout: Duration,
    /// Environment variables set in the child (on top of the caller's).
    pub env: Vec<(OsString, OsString)>,
    /// The limit on loading the plugin in each child. `None`: the larger of `timeout` and
    /// a minute. A child still loading at the limit reports a timeout naming it and the
    /// step the load was in (or, when it cannot, is killed a moment later and the
    /// timeout is reported for it): [`run_isolated`] fails with that error.
    pub load_timeout: Option<LoadTimeout>,
    /// A note while a child loads the plugin slowly: `(after, what)` writes `rpjrt: still
    /// waiting after 5s: WHAT` on stderr once a child has not loaded the plugin `after` its
    /// start, then every 30 s ([`rpjrt::stdio::watch`]), until the load ends. `None`:
    /// silent.
    pub load_notice: Option<(Duration, String)>,
}

/// The least time [`run_isolated`] gives a child to load the plugin when no
/// [`RunConfig::load_timeout`] is given, whatever the limit per check (loading a GPU
/// plugin takes seconds).
pub const LOAD_TIMEOUT_FLOOR: Duration = Duration::from_secs(60);

/// How long after a [`RunConfig::load_timeout`] the runner waits for the child's own
/// report of it (the child starting up counts against the limit too) before it kills it.
const LOAD_REPORT_GRACE: Duration = Duration::from_secs(3);

/// A report's `schema_version` that is not one, for a message: as written, except a whole
/// number past 64 bits, which JSON parsing kept only as a float (2^70 would read
/// `1.1805916207174113e+21`): said to be one, with its order of magnitude.
fn version_shown(raw: &Json) -> String {
    match raw.as_f64() {
        Some(f) if raw.is_f64() && f.is_finite() && f.fract() == 0.0 && f.abs() >= 1e19 => {
            format!(
                "{}, a whole number of about 10^{} (far past any version)",
                if f < 0.0 { "negative" } else { "too large" },
                f.abs().log10().floor()
            )
        }
        _ => raw.to_string(),
    }
}

/// The whole report of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// [`SCHEMA_VERSION`] of the file.
    pub schema_version: u32,
    /// The rpjrt version that ran the checks.
    pub rpjrt_version: String,
    /// What the plugin says about itself (path, versions, table, attributes, extensions).
    pub plugin: Map<String, Json>,
    /// One result per check, in run order.
    pub results: Vec<CheckResult>,
    /// What the runner saw outside any check (a child that would not exit after its
    /// last check, a hang between two checks); `"notes"` in the JSON, absent when empty.
    /// Not a check's verdict: [`Report::has_defects`] does not count them.
    pub notes: Vec<String>,
    /// The integers of the report's file too wide for 64 bits, as the file writes them,
    /// by JSON pointer (`/results/0/facts/bytes_limit`, `/plugin/attributes/x`):
    /// [`Report::from_text`] finds them. The values above hold them as the nearest float
    /// (all a `serde_json::Value` can); [`diff`] compares and shows these texts instead,
    /// so 2^64 and 2^64 + 1 differ. Empty for a report made by a run.
    pub wide_integers: BTreeMap<String, String>,
}

impl Report {
    /// Number of results with each outcome.
    pub fn summary(&self) -> BTreeMap<&'static str, usize> {
        let mut m = BTreeMap::new();
        for o in Outcome::ALL {
            m.insert(
                o.name(),
                self.results.iter().filter(|r| r.outcome == o).count(),
            );
        }
        m
    }

    /// True when any check failed, crashed or timed out, or could not run (blocked), or
    /// the plugin could not be loaded at all ([`Report::load_error`]): a run that leaves
    /// checks undone does not vouch for the plugin.
    pub fn has_defects(&self) -> bool {
        self.load_error().is_some()
            || self
                .results
                .iter()
                .any(|r| r.outcome.is_defect() || r.outcome == Outcome::Blocked)
    }

    /// The report of a run in which the plugin at `path` (or the plugin named so, when
    /// none was found) could not be loaded, for `reason`: its `plugin` holds `path` and
    /// `load_error` (the schema's field), and no check ran.
    pub fn load_failed(path: &str, reason: &str) -> Report {
        let mut plugin = Map::new();
        plugin.insert("path".into(), json!(path));
        plugin.insert("load_error".into(), json!(reason));
        Report {
            schema_version: SCHEMA_VERSION,
            rpjrt_version: env!("CARGO_PKG_VERSION").to_string(),
            plugin,
            results: Vec::new(),
            notes: Vec::new(),
            wide_integers: BTreeMap::new(),
        }
    }

    /// Why the plugin could not be loaded, for a report of a run that could not load it
    /// (`plugin.load_error`); `None` when it loaded.
    pub fn load_error(&self) -> Option<&str> {
        self.plugin.get("load_error").and_then(Json::as_str)
    }

    /// The report as JSON (the documented schema).
    pub fn to_json(&self) -> Json {
        let mut v = json!({
            "schema": "rpjrt-conform",
            "schema_version": self.schema_version,
            "rpjrt_version": self.rpjrt_version,
            "plugin": self.plugin,
            "summary": self.summary(),
            "results": self.results.iter().map(CheckResult::to_json).collect::<Vec<_>>(),
        });
        if !self.notes.is_empty() {
            v["notes"] = json!(self.notes);
        }
        v
    }

    /// Reads a report from its JSON text: [`Report::from_json`] of it, with the integers
    /// too wide for 64 bits kept as written ([`Report::wide_integers`]), so that [`diff`]
    /// compares and shows them exactly. Text that is not JSON is refused saying so.
    pub fn from_text(text: &str) -> rpjrt::Result<Report> {
        let v: Json = serde_json::from_str(text).map_err(|e| invalid(format!("not JSON ({e})")))?;
        let mut report = Report::from_json(&v)?;
        report.wide_integers = exact::wide_integers(text);
        Ok(report)
    }

    /// Reads a report; refuses other schemas and newer schema versions, and a report that
    /// breaks the schema: a check listed twice, a field of the wrong type (a `duration_ms`
    /// that is text, a count that is negative, `"plugin": null`), naming the field
    /// (`results[3] ("api.version") "duration_ms" is a string ...`).
    pub fn from_json(v: &Json) -> rpjrt::Result<Report> {
        if v.get("schema").and_then(|s| s.as_str()) != Some("rpjrt-conform") {
            return Err(invalid(
                "not an rpjrt conform report (no \"schema\": \"rpjrt-conform\")",
            ));
        }
        // Read whole: a version of 2^32 + 2 must not pass for 2 (`as u32` kept the low bits).
        let raw = v.get("schema_version").unwrap_or(&Json::Null);
        let version = match raw.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) if (1..=SCHEMA_VERSION).contains(&n) => n,
            _ => {
                return Err(invalid(format!(
                    "conform report schema version {}; this rpjrt reads 1 to {SCHEMA_VERSION}",
                    version_shown(raw)
                )))
            }
        };
        let results = match v.get("results") {
            Some(Json::Array(r)) => r,
            Some(other) => {
                return Err(invalid(format!(
                    "\"results\" is {}, not a list of check results",
                    kind(other)
                )))
            }
            None => return Err(invalid("the report has no \"results\" list")),
        };
        let mut read: Vec<CheckResult> = Vec::with_capacity(results.len());
        for (i, r) in results.iter().enumerate() {
            let r = CheckResult::read(r).map_err(|why| {
                let name = r.get("name").and_then(Json::as_str);
                let which = name.map_or_else(String::new, |n| format!(" ({n:?})"));
                invalid(format!("results[{i}]{which} {why}"))
            })?;
            // Each check once: a second result for a check would be compared (--diff, the
            // matrix) by its first alone.
            if let Some(first) = read.iter().position(|x| x.name == r.name) {
                return Err(invalid(format!(
                    "results[{i}]: the check {:?} is listed twice (also at results[{first}]); \
                     a report lists each check once",
                    r.name
                )));
            }
            read.push(r);
        }
        let text = |k: &str| -> rpjrt::Result<String> {
            match v.get(k) {
                None | Some(Json::Null) => Ok(String::new()),
                Some(Json::String(s)) => Ok(s.clone()),
                Some(other) => Err(invalid(format!("\"{k}\" is {}, not a string", kind(other)))),
            }
        };
        let plugin = match v.get("plugin") {
            Some(Json::Object(p)) => p.clone(),
            Some(other) => {
                return Err(invalid(format!(
                    "\"plugin\" is {}, not an object describing the plugin",
                    kind(other)
                )))
            }
            // A minimal report (schema, version, results) reads; a present one is typed.
            None => Map::new(),
        };
        check_plugin(&plugin).map_err(|why| invalid(format!("\"plugin\": {why}")))?;
        // The counts are made again from the results; a summary given must be counts.
        if let Some(summary) = v.get("summary").filter(|s| !s.is_null()) {
            let Json::Object(summary) = summary else {
                return Err(invalid(format!(
                    "\"summary\" is {}, not an object of counts",
                    kind(summary)
                )));
            };
            for (k, n) in summary {
                if n.as_u64().is_none() {
                    return Err(invalid(format!(
                        "\"summary\": {k:?} is {}, not a count (a whole number, 0 or more)",
                        kind(n)
                    )));
                }
            }
        }
        let notes = match v.get("notes") {
            None | Some(Json::Null) => Vec::new(),
            Some(Json::Array(n)) => n
                .iter()
                .enumerate()
                .map(|(i, s)| match s {
                    Json::String(s) => Ok(s.clone()),
                    other => Err(invalid(format!(
                        "\"notes\"[{i}] is {}, not a string",
                        kind(other)
                    ))),
                })
                .collect::<rpjrt::Result<Vec<String>>>()?,
            Some(other) => {
                return Err(invalid(format!(
                    "\"notes\" is {}, not a list of strings",
                    kind(other)
                )))
            }
        };
        Ok(Report {
            schema_version: version,
            rpjrt_version: text("rpjrt_version")?,
            plugin,
            results: read,
            notes,
            wide_integers: BTreeMap::new(),
        })
    }
}

/// Checks the fields of a report's `plugin` that the schema types: why one is wrong.
fn check_plugin(p: &Map<String, Json>) -> std::result::Result<(), String> {
    for (k, v) in p {
        let ok = match k.as_str() {
            "path" | "pjrt_version" | "load_error" => v.is_string(),
            "table_size" | "table_slots" => v.is_u64(),
            "attributes" => v.is_object(),
            "extensions" => v.as_array().is_some_and(|e| e.iter().all(Json::is_object)),
            // Fields may be added within a version: others are not checked.
            _ => true,
        };
        if !ok {
            let want = match k.as_str() {
                "table_size" | "table_slots" => "a whole number, 0 or more",
                "attributes" => "an object",
                "extensions" => "a list of objects",
                _ => "a string",
            };
            return Err(format!("{k:?} is {}, not {want}", kind(v)));
        }
    }
    Ok(())
}

/// The hex of a path's bytes when they are not valid UTF-8 (the report's `plugin.path`
/// then has U+FFFD in their place, and `plugin.path_hex` names the file exactly).
pub fn path_hex(path: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt as _;
    if path.to_str().is_some() {
        return None;
    }
    Some(
        path.as_os_str()
            .as_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

/// What the plugin says about itself, for the report's header (read in the child, so
/// that a plugin crashing while it loads cannot take the caller down).
fn describe(p: &Plugin) -> Map<String, Json> {
    let mut m = Map::new();
    m.insert("path".into(), json!(p.path().to_string_lossy()));
    if let Some(hex) = path_hex(p.path()) {
        m.insert("path_hex".into(), json!(hex));
    }
    m.insert("pjrt_version".into(), json!(p.version().to_string()));
    m.insert("table_size".into(), json!(p.table_size()));
    m.insert("table_slots".into(), json!(p.table_slots()));
    let attrs: Map<String, Json> = p
        .attributes()
        .iter()
        .map(|(k, v)| (k.clone(), json!(v.to_string())))
        .collect();
    m.insert("attributes".into(), Json::Object(attrs));
    let exts: Vec<Json> = p
        .extensions()
        .all()
        .iter()
        .map(|e| json!({"name": e.name, "type_id": e.type_id, "struct_size": e.struct_size}))
        .collect();
    m.insert("extensions".into(), Json::Array(exts));
    m
}

enum Event {
    Line(String),
    Eof,
}

fn spawn(
    config: &RunConfig,
    plugin: &Path,
    names: &[String],
    nonce: &str,
) -> std::io::Result<Child> {
    let (prog, args) = config
        .child
        .split_first()
        .ok_or_else(|| std::io::Error::other("no child command"))?;
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .arg("--plugin")
        .arg(plugin)
        .arg("--checks")
        .arg(names.join(","))
        // Never written: the child sees its end of file when this process is gone.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env(PARENT_PIPE_ENV, "1")
        .env(NONCE_ENV, nonce);
    for (k, v) in &config.env {
        cmd.env(k, v);
    }
    // Killed (SIGKILL, which no plugin can ignore) when this process ends, however it
    // ends: a child hung in the plugin's library initializer, inside `dlopen`, holds the
    // loader's lock and may never see its stdin close.
    rpjrt_raw::process::killed_with_parent(&mut cmd);
    match &config.load_timeout {
        Some(t) => {
            cmd.env(LOAD_TIMEOUT_ENV, t.limit.as_secs_f64().to_string())
                .env(LOAD_TIMEOUT_SHOWN_ENV, &t.shown_as);
        }
        None => {
            cmd.env_remove(LOAD_TIMEOUT_ENV)
                .env_remove(LOAD_TIMEOUT_SHOWN_ENV);
        }
    }
    cmd.spawn()
}

/// Progress callback of [`run_isolated`]: (index, total, check name, result when done).
pub type Progress<'a> = dyn FnMut(usize, usize, &str, Option<&CheckResult>) + 'a;

/// Runs `checks` against the plugin at `plugin`, each isolated as the module docs
/// describe. `progress` is called with (index, total, check name) before each check and
/// with the result after it.
pub fn run_isolated(
    plugin: &Path,
    checks: &[Check],
    config: &RunConfig,
    progress: &mut Progress<'_>,
) -> rpjrt::Result<Report> {
    let mut plugin_info: Option<Map<String, Json>> = None;
    let mut results: Vec<CheckResult> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let names: Vec<String> = checks.iter().map(|c| c.name.clone()).collect();
    let nonce = rpjrt::random_token();
    let mark = protocol_mark(&nonce);
    let group_of = |n: &str| {
        checks
            .iter()
            .find(|c| c.name == n)
            .map(|c| c.group.clone())
            .unwrap_or_default()
    };
    let total = names.len();
    let mut next = 0usize;
    while next < total {
        let remaining = &names[next..];
        let mut child =
            spawn(config, plugin, remaining, &nonce).map_err(|e| Error::PluginLoad {
                path: PathBuf::from(&config.child[0]),
                reason: format!("cannot start the conform child process: {e}"),
            })?;
        let stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        // Says what conform waits on while this child loads the plugin.
        let mut load_watch = config
            .load_notice
            .as_ref()
            .map(|(after, what)| rpjrt::stdio::watch(what.clone(), *after));
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // Lines as bytes: a plugin printing bytes that are not UTF-8 on stdout must not
            // end the reading (every later check then looked like a crash), nor a line
            // without end fill memory: a longer line is not ours and is skipped.
            let mut reader = BufReader::new(stdout);
            let mut buf = Vec::new();
            let mut skipping = false;
            loop {
                buf.clear();
                let limit = (MAX_PROTOCOL_LINE + 1) as u64;
                match (&mut reader).take(limit).read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let ended = buf.last() == Some(&b'\n');
                if skipping || !ended && buf.len() > MAX_PROTOCOL_LINE {
                    skipping = !ended;
                    continue;
                }
                let line = String::from_utf8_lossy(&buf)
                    .trim_end_matches('\n')
                    .to_string();
                if tx.send(Event::Line(line)).is_err() {
                    return;
                }
            }
            let _ = tx.send(Event::Eof);
        });
        // The plugin's stderr: collected, split per check by the time it arrived, and
        // bounded per check (a plugin writing without end must not fill our memory).
        let (etx, erx) = mpsc::channel::<Vec<u8>>();
        let stderr_mark = mark.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let mut cap = StderrCap::new(&stderr_mark);
            loop {
                match stderr.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let kept = cap.feed(&buf[..n]);
                        if !kept.is_empty() && etx.send(kept).is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = etx.send(cap.finish());
        });
        // After the child is gone: everything it wrote, waiting (briefly) for the pipe to
        // close so that its last lines (a crash message) are not lost.
        // Within `within` (a process the plugin started may hold the pipe open for good).
        let drain_within = |erx: &mpsc::Receiver<Vec<u8>>, within: Duration| {
            let deadline = Instant::now() + within;
            let mut s = Vec::new();
            while let Ok(chunk) =
                erx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                s.extend(chunk);
            }
            String::from_utf8_lossy(&s).into_owned()
        };
        let mut current: Option<(String, Instant)> = None;
        let mut timed_out = false;
        let first_here = results.len();
        // When the last event came: the limit between checks (and after the last one,
        // while the child tears the client down) counts from it.
        let mut last_event = Instant::now();
        // The load's limit counts from the child's start, whatever it prints meanwhile.
        let load_wait = match &config.load_timeout {
            Some(t) => t.limit.saturating_add(LOAD_REPORT_GRACE),
            // Loading a large plugin (a GPU one) may take longer than one check.
            None => config.timeout.max(LOAD_TIMEOUT_FLOOR),
        };
        let load_deadline = Instant::now().checked_add(load_wait);
        let mut load_timed_out = false;
        // When the child was seen to have exited (reaped): its end is watched apart from
        // its stdout's, which a process the plugin started (a helper, a daemon) may hold
        // open long after. Set when the child ended but its stdout did not.
        let mut exited: Option<Instant> = None;
        let mut pipe_held = false;
        // The child's channel reached its end (normally: the child ended).
        let mut eof = false;
        loop {
            let wait = match &current {
                Some((_, since)) => config.timeout.saturating_sub(since.elapsed()),
                None if plugin_info.is_none() => {
                    load_deadline.map_or(load_wait, |d| d.saturating_duration_since(Instant::now()))
                }
                // Between checks, or after the last one (the child tearing down): the
                // child has no more than a check's time.
                None => config.timeout.saturating_sub(last_event.elapsed()),
            };
            // Waited in slices, so that the child's own exit is seen while its stdout stays
            // open. Once the child has ended, nothing it does can run past a limit: what it
            // wrote is in the pipe, and the end of file is on its way (unless a process it
            // started holds the pipe), so it is waited for up to PIPE_GRACE from the end,
            // whatever is left of the limit (a limit of a microsecond, spent before the
            // end of file was read, made that look like a pipe held open).
            let slice = match exited {
                Some(at) => PIPE_GRACE
                    .saturating_sub(at.elapsed())
                    .clamp(Duration::from_millis(1), EXIT_POLL),
                None => wait.min(EXIT_POLL),
            };
            match rx.recv_timeout(slice) {
                Ok(Event::Line(line)) => {
                    let Some(at) = line.find(&mark) else {
                        continue; // not ours (a plugin printing to stdout)
                    };
                    let Ok(v) = serde_json::from_str::<Json>(&line[at + mark.len()..]) else {
                        continue;
                    };
                    last_event = Instant::now();
                    // The plugin shares the child's stdout: a line that is not the next
                    // step of the protocol (a start other than the next check's, a result
                    // for a check not running, a load error after the load) is not the
                    // child's, and is ignored rather than taken as a verdict.
                    let running = current.as_ref().map(|(n, _)| n.as_str());
                    if let Some(d) = v.get("plugin").and_then(|d| d.as_object()) {
                        load_watch = None;
                        plugin_info.get_or_insert_with(|| d.clone());
                    } else if let Some(name) = v.get("start").and_then(|s| s.as_str()) {
                        if running.is_some() || names.get(next).map(String::as_str) != Some(name) {
                            continue;
                        }
                        progress(next, total, name, None);
                        current = Some((name.to_string(), Instant::now()));
                    } else if let Some(r) = v.get("result").and_then(CheckResult::from_json) {
                        if running != Some(r.name.as_str()) {
                            continue;
                        }
                        progress(next, total, &r.name, Some(&r));
                        results.push(r);
                        next += 1;
                        current = None;
                    } else if let Some(e) = v
                        .get("load_error")
                        .and_then(|s| s.as_str())
                        .filter(|_| plugin_info.is_none())
                    {
                        drop(load_watch.take());
                        let _ = child.wait();
                        // A load given up at its limit: what the plugin wrote so far
                        // says what it waited on.
                        let log = match v.get("timed_out").and_then(Json::as_bool) {
                            Some(true) => with_stderr(&drain_within(&erx, STDERR_GRACE)),
                            _ => String::new(),
                        };
                        return Err(Error::PluginLoad {
                            path: plugin.to_path_buf(),
                            reason: format!("{e}{log}"),
                        });
                    }
                }
                Ok(Event::Eof) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    eof = true;
                    break;
                }
                // The child has exited and what it wrote has been read (its lines were in
                // the pipe when it ended), but the pipe is still open: another process
                // holds it. Nothing more of the child's can come.
                Err(mpsc::RecvTimeoutError::Timeout)
                    if child_exited(&mut child, &mut exited)
                        .is_some_and(|at| at.elapsed() >= PIPE_GRACE) =>
                {
                    pipe_held = true;
                    break;
                }
                // Ended a moment ago: its end of file is read next (see `slice`).
                Err(mpsc::RecvTimeoutError::Timeout) if exited.is_some() => continue,
                Err(mpsc::RecvTimeoutError::Timeout) if slice < wait => continue,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    timed_out = true;
                    let _ = child.kill();
                    let _ = child.wait();
                    let last = results[first_here..].last().map(|r| r.name.clone());
                    let (name, since) = match (current.take(), last) {
                        (Some(c), _) => c,
                        // Not loaded: reported below as a load that ran out of time.
                        (None, _) if plugin_info.is_none() => {
                            load_timed_out = true;
                            break;
                        }
                        // After its last check: the results stand; the hang (in the
                        // plugin's teardown, mostly) is noted, not pinned on a check.
                        (None, Some(last)) if next >= total => {
                            notes.push(format!(
                                "the conform child did not exit within {} after its \
                                 last check ({last}); it was killed (a hang in the \
                                 plugin's teardown: PJRT_Client_Destroy or a static \
                                 destructor)",
                                duration_text(rounded(last_event.elapsed()))
                            ));
                            break;
                        }
                        // Between two checks: not the next check's doing; a fresh child
                        // carries on from the next check.
                        (None, Some(last)) => {
                            notes.push(format!(
                                "the conform child hung for {} after {last} and before \
                                 {} started; it was killed and a new one went on",
                                duration_text(rounded(last_event.elapsed())),
                                names[next]
                            ));
                            break;
                        }
                        // Loaded, but no check started in this child: the next check is
                        // the one it could not start (a fresh child would hang the same).
                        (None, None) if next < total => (names[next].clone(), last_event),
                        (None, None) => break,
                    };
                    let r = CheckResult {
                        group: group_of(&name),
                        name: name.clone(),
                        outcome: Outcome::Timeout,
                        unsupported_by: None,
                        blocked_by: None,
                        detail: format!(
                            "no result within the limit of {} (--timeout); the child \
                             process was killed after {}",
                            duration_text(config.timeout),
                            duration_text(rounded(since.elapsed()))
                        ),
                        facts: Map::new(),
                        duration_ms: since.elapsed().as_secs_f64() * 1e3,
                        stderr: String::new(),
                    };
                    progress(next, total, &name, Some(&r));
                    results.push(r);
                    next += 1;
                    break;
                }
            }
        }
        drop(load_watch);
        // The channel is a private copy of the child's stdout, open until the child ends:
        // a child still running well after its end of file had it cut under it (the plugin
        // closed the descriptor, or pointed it elsewhere). It is killed, and what happened
        // is said as such: neither a crash nor the kill is the child's doing.
        let cut_alive = eof && !child_ends_within(&mut child, &mut exited, CUT_GRACE);
        if cut_alive {
            let _ = child.kill();
        }
        // Or the child found its channel closed and ended itself, saying so on stderr.
        let lost_mark = format!("{mark}{LOST}");
        let cut = match cut_alive {
            true => Some("the process was still running, and conform ended it"),
            false => None,
        };
        if plugin_info.is_none() {
            // The child never got the plugin loaded: nothing can be checked.
            let _ = child.kill();
            let status = child.wait().ok();
            let raw = drain_within(&erx, STDERR_GRACE);
            let cut = cut.or_else(|| {
                raw.contains(&lost_mark)
                    .then_some("the child found it closed and ended itself")
            });
            let log = with_stderr(&without_marks(&raw, &mark));
            // Killed here because the load ran out of time: a timeout, not a crash (the
            // SIGKILL was the runner's).
            let reason = match (&config.load_timeout, load_timed_out) {
                (Some(t), true) => format!(
                    "the plugin did not finish loading within {} in the conform child \
                     process, which did not report it itself; the child was killed{log}",
                    t.shown_as
                ),
                (None, true) => format!(
                    "the plugin did not finish loading within {} (the larger of the \
                     per-check limit and {}, as no limit on loading was given); the \
                     conform child process was killed{log}",
                    duration_text(load_wait),
                    duration_text(LOAD_TIMEOUT_FLOOR)
                ),
                _ if cut.is_some() => format!(
                    "{CUT_TEXT} while the plugin was loading; {}{log}",
                    cut.unwrap_or_default()
                ),
                _ => {
                    let how = status.map(describe_exit).unwrap_or_else(|| "ended".into());
                    format!("the conform child process {how} while loading the plugin{log}")
                }
            };
            return Err(Error::PluginLoad {
                path: plugin.to_path_buf(),
                reason,
            });
        }
        // The child is gone or ending: reap it, record a check it died in, then split its
        // stderr by check.
        let status = match rpjrt::stdio::wait_until(&mut child, Instant::now() + config.timeout) {
            rpjrt::stdio::Reaped::Ended(s) => Some(s),
            rpjrt::stdio::Reaped::Killed(s) => s,
            rpjrt::stdio::Reaped::Failed(_) => None,
        };
        let how = status.map(describe_exit).unwrap_or_else(|| "ended".into());
        if pipe_held {
            let after = match results[first_here..].last() {
                Some(r) => format!(" after {}", r.name),
                None => String::new(),
            };
            notes.push(format!(
                "the conform child process {how}{after}, but its output stayed open: a \
                 process the plugin started (a helper or daemon, which inherited the \
                 child's stdout and stderr) still holds it; conform did not wait for that \
                 process, nor end it (it is still running)"
            ));
        }
        // Its stderr is held open as long as its stdout was: what the child wrote is in
        // the pipe already, and comes within the grace given to its stdout.
        let log = drain_within(&erx, if pipe_held { PIPE_GRACE } else { STDERR_GRACE });
        let cut = cut.or_else(|| {
            log.contains(&lost_mark)
                .then_some("the child found it closed and ended itself")
        });
        let pushed_from = results.len();
        if let Some((name, since)) = current.take() {
            let duration_ms = since.elapsed().as_secs_f64() * 1e3;
            results.push(if let Some(end) = cut {
                cut_under(
                    group_of(&name),
                    name,
                    "during this check, so its result could not be read",
                    end,
                    duration_ms,
                )
            } else {
                crashed(
                    group_of(&name),
                    name,
                    format!("the process {how} during this check"),
                    duration_ms,
                )
            });
            next += 1;
        } else if !timed_out && next < total {
            // It exited between checks without finishing them all.
            let name = names[next].clone();
            results.push(if let Some(end) = cut {
                cut_under(group_of(&name), name, "before this check started", end, 0.0)
            } else {
                crashed(
                    group_of(&name),
                    name,
                    format!("the process {how} before this check started"),
                    0.0,
                )
            });
            next += 1;
        }
        assign_stderr(&log, &mark, &mut results[first_here..]);
        for (i, r) in results.iter().enumerate().skip(pushed_from) {
            progress(i, total, &r.name, Some(r));
        }
    }
    Ok(Report {
        schema_version: SCHEMA_VERSION,
        rpjrt_version: env!("CARGO_PKG_VERSION").to_string(),
        plugin: plugin_info.unwrap_or_default(),
        results,
        notes,
        wide_integers: BTreeMap::new(),
    })
}

/// How long [`run_isolated`] waits for a conform child's stderr to close once the child
/// is gone, so that its last lines (a crash message) are not lost.
const STDERR_GRACE: Duration = Duration::from_secs(2);

/// How often [`run_isolated`] looks whether a conform child has exited while it waits for
/// the child's output.
const EXIT_POLL: Duration = Duration::from_millis(50);

/// How long a conform child that has exited may keep its stdout open (what it wrote
/// before it ended is read well within this) before the pipe is taken to be held by
/// another process: one the plugin started, which inherited it.
const PIPE_GRACE: Duration = Duration::from_millis(500);

/// How long a conform child may run on after its channel reached its end (the channel
/// closes as the process ends, and the process is gone a moment later) before the channel
/// is taken to have been cut under it.
const CUT_GRACE: Duration = Duration::from_secs(2);

/// What happened when a conform child's channel was cut under it.
const CUT_TEXT: &str = "the conform child's output channel (a copy of its stdout, which \
                        carries its results to conform) was closed under it: something in \
                        the process, the plugin, closed or redirected that descriptor";

/// The result of a check whose child had its channel cut ([`CUT_TEXT`]) `when`, the child
/// then ending as `end` says: a failure (the plugin took a descriptor it does not own),
/// said as what happened.
fn cut_under(group: String, name: String, when: &str, end: &str, duration_ms: f64) -> CheckResult {
    CheckResult {
        group,
        name,
        outcome: Outcome::Fail,
        unsupported_by: None,
        blocked_by: None,
        detail: format!("{CUT_TEXT} {when}; {end}"),
        facts: Map::new(),
        duration_ms,
        stderr: String::new(),
    }
}

/// Whether the conform `child` ends (is reaped) within `grace`; `exited` as for
/// [`child_exited`].
fn child_ends_within(
    child: &mut std::process::Child,
    exited: &mut Option<Instant>,
    grace: Duration,
) -> bool {
    let deadline = Instant::now() + grace;
    loop {
        if child_exited(child, exited).is_some() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// When the conform `child` was first seen to have exited, reaping it (`None` while it
/// runs); `exited` keeps the answer.
fn child_exited(child: &mut std::process::Child, exited: &mut Option<Instant>) -> Option<Instant> {
    if exited.is_none() && matches!(child.try_wait(), Ok(Some(_))) {
        *exited = Some(Instant::now());
    }
    *exited
}

/// A measured duration rounded for a message: to the millisecond from one on (to a tenth
/// of a second from a second on), else to the microsecond.
fn rounded(d: Duration) -> Duration {
    let unit = if d >= Duration::from_secs(1) {
        Duration::from_millis(100)
    } else if d >= Duration::from_millis(1) {
        Duration::from_millis(1)
    } else {
        Duration::from_micros(1)
    };
    rpjrt::stdio::rounded_to(d, unit)
}

/// `"; its stderr: LOG"` for a child's stderr `log`, or nothing when it wrote none.
fn with_stderr(log: &str) -> String {
    match log.trim() {
        "" => String::new(),
        log => format!("; its stderr: {log}"),
    }
}

/// The result of a check whose process ended abnormally (`detail` says how and when).
fn crashed(group: String, name: String, detail: String, duration_ms: f64) -> CheckResult {
    CheckResult {
        group,
        name,
        outcome: Outcome::Crash,
        unsupported_by: None,
        blocked_by: None,
        detail,
        facts: Map::new(),
        duration_ms,
        stderr: String::new(),
    }
}

/// The most of a child's stderr kept for one check (and for what it writes before the
/// first check); the rest is counted and said to be left out.
const MAX_STDERR_PER_CHECK: usize = 64 << 10;

/// Bounds what is kept of a conform child's stderr: whole lines, at most
/// [`MAX_STDERR_PER_CHECK`] bytes between two check start marks. The marks themselves are
/// always kept, so the log still splits by check; what is dropped is replaced by one line
/// saying how many bytes were left out.
struct StderrCap {
    /// The run's [`protocol_mark`]: a line holding it is a start mark.
    mark: String,
    /// The line being read (at most `MAX_STDERR_PER_CHECK` bytes of it).
    line: Vec<u8>,
    /// Bytes of the current line beyond what `line` holds.
    line_dropped: usize,
    /// Bytes kept since the last start mark.
    kept: usize,
    /// Bytes dropped since the last start mark.
    dropped: usize,
}

impl StderrCap {
    fn new(mark: &str) -> StderrCap {
        StderrCap {
            mark: mark.to_string(),
            line: Vec::new(),
            line_dropped: 0,
            kept: 0,
            dropped: 0,
        }
    }

    /// Takes the next bytes read; returns what is to be kept of the lines they end.
    fn feed(&mut self, mut bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let (part, ended) = match bytes.iter().position(|&b| b == b'\n') {
                Some(at) => (&bytes[..=at], true),
                None => (bytes, false),
            };
            bytes = &bytes[part.len()..];
            let room = MAX_STDERR_PER_CHECK.saturating_sub(self.line.len());
            let take = part.len().min(room);
            self.line.extend_from_slice(&part[..take]);
            self.line_dropped += part.len() - take;
            if ended {
                self.end_line(&mut out);
            }
        }
        out
    }

    /// The rest, once the pipe has closed: a last line without its newline, and the count
    /// of what was left out since the last mark.
    fn finish(mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if !self.line.is_empty() || self.line_dropped > 0 {
            self.end_line(&mut out);
        }
        self.note_dropped(&mut out);
        out
    }

    fn end_line(&mut self, out: &mut Vec<u8>) {
        let len = self.line.len() + self.line_dropped;
        let is_mark = self.line_dropped == 0
            && std::str::from_utf8(&self.line).is_ok_and(|l| l.contains(&self.mark));
        if is_mark {
            self.note_dropped(out);
            out.extend_from_slice(&self.line);
            self.kept = 0;
        } else if self.line_dropped == 0 && self.kept + len <= MAX_STDERR_PER_CHECK {
            out.extend_from_slice(&self.line);
            self.kept += len;
        } else {
            self.dropped += len;
        }
        self.line.clear();
        self.line_dropped = 0;
    }

    fn note_dropped(&mut self, out: &mut Vec<u8>) {
        if self.dropped > 0 {
            let note = format!(
                "[rpjrt conform: {} more bytes of stderr left out]\n",
                self.dropped
            );
            out.extend_from_slice(note.as_bytes());
            self.dropped = 0;
        }
    }
}

/// `log` without the lines holding `mark` (the child's own, not the plugin's).
fn without_marks(log: &str, mark: &str) -> String {
    log.split_inclusive('\n')
        .filter(|l| !l.contains(mark))
        .collect()
}

/// Gives each result the part of the child's stderr between its start mark (`mark`, then
/// `start NAME`) and the next.
fn assign_stderr(log: &str, mark: &str, results: &mut [CheckResult]) {
    let mut segments: Vec<(&str, String)> = Vec::new();
    for line in log.split_inclusive('\n') {
        if let Some(at) = line.find(mark) {
            let rest = line[at + mark.len()..].trim_end();
            if let Some(name) = rest.strip_prefix("start ") {
                segments.push((name, String::new()));
            }
            // Any other marked line ([`LOST`]) is the child's, not the plugin's.
            continue;
        }
        if let Some((_, text)) = segments.last_mut() {
            text.push_str(line);
        }
    }
    for r in results.iter_mut() {
        if let Some((_, text)) = segments.iter().find(|(n, _)| *n == r.name) {
            // Each mark brings a newline of its own: drop the blank lines around it.
            r.stderr = text.trim_matches('\n').to_string();
        }
    }
}

/// How a child process ended, in words: "was killed by SIGSEGV (11)", "exited with code 3".
pub fn describe_exit(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let name = match sig {
                6 => "SIGABRT",
                7 => "SIGBUS",
                8 => "SIGFPE",
                9 => "SIGKILL",
                11 => "SIGSEGV",
                4 => "SIGILL",
                1 => "SIGHUP",
                2 => "SIGINT",
                13 => "SIGPIPE (it wrote to a pipe nobody reads)",
                15 => "SIGTERM",
                _ => "a signal",
            };
            return format!("was killed by {name} ({sig})");
        }
    }
    match status.code() {
        Some(c) => format!("exited with code {c}"),
        None => "ended".into(),
    }
}

/// One difference between two reports.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// What differs: `plugin.table_size`, `check api.table.outcome`, `check x.facts.y`.
    pub what: String,
    /// The value in the first report (`null` when absent).
    pub a: Json,
    /// The value in the second report.
    pub b: Json,
    /// [`Difference::a`] as JSON text, exactly as the first report writes it: integers too
    /// wide for 64 bits ([`Report::wide_integers`]) as they are, where `a` holds a float.
    pub a_text: String,
    /// [`Difference::b`] as JSON text, exactly as the second report writes it.
    pub b_text: String,
}

impl Difference {
    /// The difference as one JSON object, `{"a": ..., "b": ..., "what": ...}`, with the
    /// values written exactly ([`Difference::a_text`]).
    pub fn to_json_text(&self) -> String {
        format!(
            "{{\"a\":{},\"b\":{},\"what\":{}}}",
            self.a_text,
            self.b_text,
            Json::String(self.what.clone())
        )
    }
}

/// What differs between two reports: plugin facts (version, table size, attributes,
/// extensions), then per check its outcome and each fact. Paths, timings and log output
/// are not compared, nor the facts of a check that is blocked on either side (it observed
/// nothing; its outcome already differs).
pub fn diff(a: &Report, b: &Report) -> Vec<Difference> {
    let mut out = Vec::new();
    // Values are compared as the reports write them (wide integers exactly), and a
    // missing value differs from a null one.
    let exact = |r: &Report, v: Option<&Json>, pointer: String| {
        v.map(|v| exact::text_at(v, &pointer, &r.wide_integers))
    };
    let mut push = |what: String, x: Option<(&Json, String)>, y: Option<(&Json, String)>| {
        let value = |v: &Option<(&Json, String)>| v.as_ref().map_or(Json::Null, |v| v.0.clone());
        let text = |v: Option<(&Json, String)>| v.map_or_else(|| "null".to_string(), |v| v.1);
        out.push(Difference {
            what,
            a: value(&x),
            b: value(&y),
            a_text: text(x),
            b_text: text(y),
        });
    };
    let mut keys: Vec<&String> = a.plugin.keys().chain(b.plugin.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        if k == "path" || k == "path_hex" {
            continue;
        }
        let (x, y) = (a.plugin.get(k), b.plugin.get(k));
        let at = format!("/plugin/{}", exact::token(k));
        let (tx, ty) = (exact(a, x, at.clone()), exact(b, y, at));
        if tx != ty {
            push(format!("plugin.{k}"), x.zip(tx), y.zip(ty));
        }
    }
    let mut names: Vec<&String> = a
        .results
        .iter()
        .chain(&b.results)
        .map(|r| &r.name)
        .collect();
    names.sort();
    names.dedup();
    for n in names {
        let ia = a.results.iter().position(|r| &r.name == n);
        let ib = b.results.iter().position(|r| &r.name == n);
        let ra = ia.map(|i| &a.results[i]);
        let rb = ib.map(|i| &b.results[i]);
        let outcome =
            |r: Option<&CheckResult>| r.map(|r| json!(r.outcome.name())).unwrap_or(Json::Null);
        if outcome(ra) != outcome(rb) {
            let (oa, ob) = (outcome(ra), outcome(rb));
            let (ta, tb) = (oa.to_string(), ob.to_string());
            push(
                format!("check {n}: outcome"),
                Some((&oa, ta)),
                Some((&ob, tb)),
            );
        }
        let blocked = |r: Option<&CheckResult>| r.is_some_and(|r| r.outcome == Outcome::Blocked);
        if blocked(ra) || blocked(rb) {
            continue;
        }
        let empty = Map::new();
        let fa = ra.map(|r| &r.facts).unwrap_or(&empty);
        let fb = rb.map(|r| &r.facts).unwrap_or(&empty);
        let mut fk: Vec<&String> = fa.keys().chain(fb.keys()).collect();
        fk.sort();
        fk.dedup();
        for k in fk {
            let (x, y) = (fa.get(k), fb.get(k));
            let at =
                |i: Option<usize>| format!("/results/{}/facts/{}", i.unwrap_or(0), exact::token(k));
            let (tx, ty) = (exact(a, x, at(ia)), exact(b, y, at(ib)));
            if tx != ty {
                push(format!("check {n}: {k}"), x.zip(tx), y.zip(ty));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_version_is_read_whole() {
        for raw in ["4294967298", "0", "-1", "2.5", "\"2\"", "null"] {
            let text =
                format!(r#"{{"schema": "rpjrt-conform", "schema_version": {raw}, "results": []}}"#);
            let e = Report::from_json(&serde_json::from_str(&text).unwrap()).unwrap_err();
            assert!(
                e.to_string().contains(&format!(
                    "schema version {}; this rpjrt reads 1 to {SCHEMA_VERSION}",
                    serde_json::from_str::<Json>(raw).unwrap()
                )),
                "{raw}: {e}"
            );
        }
        // A whole number past 64 bits is said to be one, never shown as a float.
        for (raw, shown) in [
            (
                "1180591620717411303424",
                "too large, a whole number of about 10^21",
            ),
            (
                "-1180591620717411303424",
                "negative, a whole number of about 10^21",
            ),
            (
                "18446744073709551617",
                "too large, a whole number of about 10^19",
            ),
        ] {
            let text =
                format!(r#"{{"schema": "rpjrt-conform", "schema_version": {raw}, "results": []}}"#);
            let e = Report::from_json(&serde_json::from_str(&text).unwrap()).unwrap_err();
            assert!(e.to_string().contains(shown), "{raw}: {e}");
            assert!(!e.to_string().contains("e+21"), "{raw}: {e}");
        }
        let ok = r#"{"schema": "rpjrt-conform", "schema_version": 2, "results": []}"#;
        assert!(Report::from_json(&serde_json::from_str(ok).unwrap()).is_ok());
    }

    #[test]
    fn patterns_that_select_nothing_are_named() {
        assert!(unmatched("api.*,buffers.*").is_empty());
        assert_eq!(unmatched("api.version, zzz ,exec*x,"), ["zzz", "exec*x"]);
    }

    #[test]
    fn stderr_is_bounded_per_check_and_keeps_every_mark() {
        let mut cap = StderrCap::new(MARK);
        let mut kept = Vec::new();
        let spam = vec![b'x'; 1000];
        kept.extend(cap.feed(b"early\n"));
        kept.extend(cap.feed(format!("\n{MARK}start g.a\n").as_bytes()));
        for _ in 0..1000 {
            kept.extend(cap.feed(&spam));
            kept.extend(cap.feed(b"\n"));
        }
        // A mark split across two reads, then a line with no end at all.
        kept.extend(cap.feed(format!("\n{MARK}sta").as_bytes()));
        kept.extend(cap.feed(b"rt g.b\nsmall\n"));
        for _ in 0..200 {
            kept.extend(cap.feed(&spam));
        }
        kept.extend(cap.finish());
        let log = String::from_utf8(kept).unwrap();
        assert!(
            log.len() < 3 * MAX_STDERR_PER_CHECK,
            "{} bytes kept",
            log.len()
        );
        let mut results: Vec<CheckResult> = ["g.a", "g.b"]
            .iter()
            .map(|n| crashed("g".into(), n.to_string(), String::new(), 0.0))
            .collect();
        assign_stderr(&log, MARK, &mut results);
        let a = &results[0].stderr;
        assert!(a.len() <= MAX_STDERR_PER_CHECK + 100, "{}", a.len());
        let kept_lines = MAX_STDERR_PER_CHECK / 1001;
        let left_out = (1000 - kept_lines) * 1001;
        assert!(
            a.ends_with(&format!(
                "[rpjrt conform: {left_out} more bytes of stderr left out]"
            )),
            "{}",
            &a[a.len() - 80..]
        );
        assert_eq!(
            results[1].stderr,
            "small\n[rpjrt conform: 200000 more bytes of stderr left out]"
        );
    }

    #[test]
    fn stderr_is_split_by_the_start_marks() {
        let r = |name: &str| CheckResult {
            name: name.into(),
            group: "g".into(),
            outcome: Outcome::Pass,
            unsupported_by: None,
            blocked_by: None,
            detail: String::new(),
            facts: Map::new(),
            duration_ms: 0.0,
            stderr: String::new(),
        };
        let mut rs = vec![r("g.a"), r("g.b"), r("g.c")];
        let log = format!(
            "loading noise\n\n{MARK}start g.a\nline a1\nline a2\n\n{MARK}start g.b\n\n{MARK}start g.c\npartial"
        );
        assign_stderr(&log, MARK, &mut rs);
        assert_eq!(rs[0].stderr, "line a1\nline a2");
        assert_eq!(rs[1].stderr, "");
        assert_eq!(rs[2].stderr, "partial");
    }

    #[test]
    fn patterns() {
        assert!(matches("buffers.*", "buffers.roundtrip.f32"));
        assert!(matches("roundtrip", "buffers.roundtrip.f32"));
        assert!(matches("x,*.f32", "buffers.roundtrip.f32"));
        assert!(!matches("compile.*", "buffers.roundtrip.f32"));
        // The matcher against a plain recursive one, over every short pattern of `a`, `b`
        // and `*` and every short text of `a` and `b`.
        fn reference(p: &[u8], s: &[u8]) -> bool {
            match p.split_first() {
                None => s.is_empty(),
                Some((b'*', rest)) => (0..=s.len()).any(|i| reference(rest, &s[i..])),
                Some((c, rest)) => s.first() == Some(c) && reference(rest, &s[1..]),
            }
        }
        fn words(alphabet: &[u8], max: usize) -> Vec<Vec<u8>> {
            let mut all = vec![Vec::new()];
            let mut last = vec![Vec::new()];
            for _ in 0..max {
                last = last
                    .iter()
                    .flat_map(|w| {
                        alphabet.iter().map(move |&c| {
                            let mut w = w.clone();
                            w.push(c);
                            w
                        })
                    })
                    .collect();
                all.extend(last.iter().cloned());
            }
            all
        }
        for p in words(b"ab*", 5) {
            for s in words(b"ab", 6) {
                assert_eq!(glob(&p, &s), reference(&p, &s), "{p:?} {s:?}");
            }
        }
        // Many stars: this took exponential time (20 stars would run for hours).
        assert!(!matches(&format!("{}Q", "*".repeat(200)), &"x".repeat(200)));
        assert!(matches(&format!("{}x", "*".repeat(200)), &"x".repeat(200)));
    }

    #[test]
    fn names_are_unique_and_grouped() {
        let all = all_checks();
        let mut names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
        assert!(all
            .iter()
            .all(|c| c.name.starts_with(&format!("{}.", c.group))));
    }

    /// A report that breaks the schema is refused naming the field (a check listed twice
    /// was compared by its first result alone, and `"duration_ms": "fast"` read as 0); a
    /// version 1 report without `blocked_by` still reads.
    #[test]
    fn reports_breaking_the_schema_are_refused_naming_the_field() {
        let result = |name: &str, outcome: &str| {
            json!({"name": name, "group": "api", "outcome": outcome, "unsupported_by": null,
                   "blocked_by": null, "detail": "", "facts": {}, "duration_ms": 1.5,
                   "stderr": ""})
        };
        let good = json!({
            "schema": "rpjrt-conform", "schema_version": 2, "rpjrt_version": "0.1.0",
            "plugin": {"path": "/p.so", "pjrt_version": "0.81", "table_size": 984,
                       "table_slots": 118, "attributes": {}, "extensions": []},
            "summary": {"pass": 2, "fail": 0},
            "results": [result("api.version", "pass"), result("api.table_size", "pass")],
        });
        assert!(Report::from_json(&good).is_ok());
        let refused = |mutate: &dyn Fn(&mut Json), want: &str| {
            let mut r = good.clone();
            mutate(&mut r);
            let e = Report::from_json(&r).unwrap_err().to_string();
            assert!(e.contains(want), "{want}: {e}");
        };
        refused(
            &|r| {
                r["results"]
                    .as_array_mut()
                    .unwrap()
                    .push(result("api.version", "fail"))
            },
            "results[2]: the check \"api.version\" is listed twice (also at results[0])",
        );
        refused(
            &|r| r["results"][1]["duration_ms"] = json!("fast"),
            "results[1] (\"api.table_size\") \"duration_ms\" is a string (\"fast\")",
        );
        refused(
            &|r| r["results"][0]["duration_ms"] = json!(-3),
            "\"duration_ms\" is -3",
        );
        refused(
            &|r| r["results"][0]["outcome"] = json!("great"),
            "\"outcome\" is \"great\"",
        );
        refused(
            &|r| r["results"][0]["facts"] = json!([1]),
            "\"facts\" is a list",
        );
        refused(
            &|r| r["results"][0]["stderr"] = json!(7),
            "\"stderr\" is a number (7)",
        );
        refused(
            &|r| r["results"][0]["blocked_by"] = json!(true),
            "\"blocked_by\" is a boolean",
        );
        refused(
            &|r| r["summary"]["pass"] = json!("many"),
            "\"summary\": \"pass\" is a string",
        );
        refused(
            &|r| r["summary"]["fail"] = json!(-5),
            "\"summary\": \"fail\" is a number (-5)",
        );
        refused(&|r| r["summary"] = json!([]), "\"summary\" is a list");
        refused(&|r| r["plugin"] = Json::Null, "\"plugin\" is null");
        refused(
            &|r| r["plugin"]["path"] = json!(5),
            "\"plugin\": \"path\" is a number (5)",
        );
        refused(
            &|r| r["plugin"]["table_size"] = json!(-1),
            "\"plugin\": \"table_size\" is a number (-1)",
        );
        refused(
            &|r| r["rpjrt_version"] = json!(1),
            "\"rpjrt_version\" is a number",
        );
        refused(&|r| r["notes"] = json!([1]), "\"notes\"[0] is a number");
        refused(&|r| r["results"] = json!({}), "\"results\" is an object");
        // Version 1: no blocked_by; optional fields absent.
        let mut v1 = good.clone();
        v1["schema_version"] = json!(1);
        for r in v1["results"].as_array_mut().unwrap() {
            let o = r.as_object_mut().unwrap();
            o.remove("blocked_by");
            o.remove("stderr");
        }
        assert!(Report::from_json(&v1).is_ok());
    }

    /// A report of a plugin that could not be loaded: `plugin.load_error` with its path, no
    /// results; it reads back, and counts as a defect.
    #[test]
    fn a_load_failure_makes_a_report() {
        let r = Report::load_failed("/x/p.so", "it implements PJRT 0.56");
        assert_eq!(r.load_error(), Some("it implements PJRT 0.56"));
        assert!(r.has_defects());
        let j = r.to_json();
        assert_eq!(j["plugin"]["path"], "/x/p.so");
        assert_eq!(j["plugin"]["load_error"], "it implements PJRT 0.56");
        assert_eq!(j["results"], json!([]));
        let back = Report::from_json(&j).unwrap();
        assert_eq!(back, r);
        let page = render_html(&[("r.json", &back)]);
        assert!(page.contains("data-load-error"), "{page}");
        assert!(page.contains("it implements PJRT 0.56"));
    }

    /// Durations in messages are exact for limits, never `0.0 s`.
    #[test]
    fn durations_are_never_zero() {
        assert_eq!(duration_text(Duration::from_millis(1)), "1ms");
        assert_eq!(duration_text(Duration::from_micros(100)), "0.1ms");
        assert_eq!(duration_text(Duration::from_secs(60)), "60.0s");
        assert_eq!(duration_text(Duration::from_millis(1960)), "1.96s");
        assert_eq!(duration_text(rounded(Duration::from_micros(1234))), "1ms");
        assert_eq!(duration_text(rounded(Duration::from_micros(12))), "0.012ms");
        assert_eq!(duration_text(rounded(Duration::from_millis(2345))), "2.3s");
    }

    #[test]
    fn report_round_trips_and_diffs() {
        let r = CheckResult {
            name: "api.version".into(),
            group: "api".into(),
            outcome: Outcome::Pass,
            unsupported_by: None,
            blocked_by: None,
            detail: String::new(),
            facts: json!({"minor": 81}).as_object().unwrap().clone(),
            duration_ms: 1.0,
            stderr: String::new(),
        };
        let a = Report {
            schema_version: SCHEMA_VERSION,
            rpjrt_version: "x".into(),
            plugin: json!({"table_size": 984}).as_object().unwrap().clone(),
            results: vec![r.clone()],
            notes: vec!["the child did not exit".into()],
            wide_integers: BTreeMap::new(),
        };
        let back = Report::from_json(&a.to_json()).unwrap();
        assert_eq!(back, a);
        let mut b = a.clone();
        b.plugin.insert("table_size".into(), json!(1144));
        b.results[0].facts.insert("minor".into(), json!(115));
        b.results[0].outcome = Outcome::Unsupported;
        let d = diff(&a, &b);
        let whats: Vec<&str> = d.iter().map(|d| d.what.as_str()).collect();
        assert_eq!(
            whats,
            [
                "plugin.table_size",
                "check api.version: outcome",
                "check api.version: minor"
            ]
        );
        let mut future = a.to_json();
        future["schema_version"] = json!(SCHEMA_VERSION + 1);
        assert!(Report::from_json(&future).is_err());
        // A version past u32 is not read as its low bits (2^32 + 1 as version 1).
        future["schema_version"] = json!((1u64 << 32) + 1);
        let e = Report::from_json(&future).unwrap_err().to_string();
        assert!(e.contains("schema version 4294967297"), "{e}");
        // A version 1 report (no `blocked_by`) is still read.
        let mut v1 = a.to_json();
        v1["schema_version"] = json!(1);
        v1["results"][0]
            .as_object_mut()
            .unwrap()
            .remove("blocked_by");
        assert_eq!(Report::from_json(&v1).unwrap().results, a.results);
    }

    #[test]
    fn a_blocked_check_diffs_by_its_outcome_only() {
        let ok = CheckResult {
            name: "buffers.scalar".into(),
            group: "buffers".into(),
            outcome: Outcome::Pass,
            unsupported_by: None,
            blocked_by: None,
            detail: String::new(),
            facts: json!({"x": 1}).as_object().unwrap().clone(),
            duration_ms: 1.0,
            stderr: String::new(),
        };
        let blocked = CheckResult {
            outcome: Outcome::Blocked,
            blocked_by: Some(CLIENT_CHECK.into()),
            detail: "needs a client, and the plugin could not create one: no GPU".into(),
            facts: Map::new(),
            ..ok.clone()
        };
        let report = |r: &CheckResult| Report {
            schema_version: SCHEMA_VERSION,
            rpjrt_version: "x".into(),
            plugin: Map::new(),
            results: vec![r.clone()],
            notes: Vec::new(),
            wide_integers: BTreeMap::new(),
        };
        let (a, b) = (report(&ok), report(&blocked));
        let d = diff(&a, &b);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].what, "check buffers.scalar: outcome");
        assert_eq!((&d[0].a, &d[0].b), (&json!("pass"), &json!("blocked")));
        // Blocked is not a defect of its own, but a run with one does not vouch.
        assert!(!Outcome::Blocked.is_defect());
        assert!(b.has_defects() && !a.has_defects());
        assert_eq!(b.summary()["blocked"], 1);
        let back = Report::from_json(&b.to_json()).unwrap();
        assert_eq!(back.results[0].blocked_by.as_deref(), Some(CLIENT_CHECK));
        assert_eq!(back.results[0].outcome, Outcome::Blocked);
    }

    #[test]
    fn unimplemented_says_what_happened() {
        let v = rpjrt::ApiVersion {
            major: 0,
            minor: 115,
        };
        // An entry that answered UNIMPLEMENTED, as rpjrt reports it directly...
        let direct = Error::Pjrt {
            entry: "PJRT_Device_MemoryStats",
            code: Code::Unimplemented,
            message: "not on this device".into(),
        };
        let d = Verdict::from_error(&direct);
        assert_eq!(d.outcome, Some(Outcome::Unsupported));
        assert_eq!(
            d.detail,
            "the plugin answered UNIMPLEMENTED for PJRT_Device_MemoryStats: not on this device"
        );
        // ...and folded into `Unsupported` by the safe layer.
        let folded = Error::Unsupported {
            what: "cost analysis (PJRT_Executable_GetCostAnalysis: the plugin says \
                   UNIMPLEMENTED: no costs)"
                .into(),
            needs: v,
            plugin: v,
            missing_slot: true,
        };
        let d = Verdict::from_error(&folded);
        assert_eq!(
            d.detail,
            "the plugin answered UNIMPLEMENTED for PJRT_Executable_GetCostAnalysis \
             (asked for cost analysis): no costs"
        );
        assert!(!d.detail.contains("needs PJRT"), "{}", d.detail);
        // An absent capability at the plugin's own version names no version it needs.
        let absent = Error::Unsupported {
            what: "the Layouts extension".into(),
            needs: v,
            plugin: v,
            missing_slot: true,
        };
        assert_eq!(
            Verdict::from_error(&absent).detail,
            "the plugin does not provide the Layouts extension (PJRT 0.115)"
        );
        // A real version gap says so.
        let older = Error::Unsupported {
            what: "PJRT_Buffer_CopyToMemory".into(),
            needs: v,
            plugin: rpjrt::ApiVersion {
                major: 0,
                minor: 81,
            },
            missing_slot: false,
        };
        assert_eq!(
            Verdict::from_error(&older).detail,
            "PJRT_Buffer_CopyToMemory needs PJRT 0.115; this plugin implements PJRT 0.81"
        );
    }
}
