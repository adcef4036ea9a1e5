//! What every verb shares: exit codes, errors, colour, JSON output, plugin resolution.

use std::ffi::OsStr;
use std::fmt;
use std::io::IsTerminal;

use rpjrt::{ClientOptions, Plugin, Value};
use rpjrt_discovery::{install_hint, Discovery, PluginInfo};
use serde_json::{json, Value as Json};

/// `println!` that never panics on stdout: a failed write is kept and, once the verb is
/// done, turns its success into exit code 1 naming the error ([`take_output_error`]).
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        $crate::common::write_out(format_args!("{}\n", format_args!($($arg)*)));
    }};
}

/// `eprintln!` that never panics: a line that cannot be written to stderr (a full disk,
/// a closed descriptor) is dropped, so that the exit code the verb chose still reaches the
/// caller (`eprintln!` would end the process with a panic, exit 101).
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(
            $crate::common::Patient(&mut ::std::io::stderr().lock()),
            $($arg)*
        );
    }};
}

/// A writer that waits out a full non-blocking descriptor: a pipe whose open file has
/// `O_NONBLOCK` set by the other side (node.js, some CI runners and `ssh` leave it so)
/// answers `EAGAIN` when its buffer is full, where a blocking one would wait for the reader.
/// Each write is tried again until the reader makes room, so output larger than the pipe's
/// buffer arrives whole instead of failing after 64 KiB.
pub struct Patient<'a, W: std::io::Write + ?Sized>(pub &'a mut W);

/// How long [`Patient`] waits before trying a write the descriptor refused for now again
/// (the longest; it starts shorter).
const PATIENT_MAX_PAUSE: std::time::Duration = std::time::Duration::from_millis(20);

impl<W: std::io::Write + ?Sized> Patient<'_, W> {
    /// `op` tried again, pausing a little longer each time, while it says `WouldBlock`.
    fn again<T>(&mut self, mut op: impl FnMut(&mut W) -> std::io::Result<T>) -> std::io::Result<T> {
        let mut pause = std::time::Duration::from_micros(100);
        loop {
            match op(self.0) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(PATIENT_MAX_PAUSE);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                other => return other,
            }
        }
    }
}

impl<W: std::io::Write + ?Sized> std::io::Write for Patient<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.again(|w| w.write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.again(|w| w.flush())
    }
}

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: a defect or a failure was found (a failed check, a plugin error).
pub const EXIT_DEFECT: i32 = 1;
/// Exit code: the command line or an input file was wrong.
pub const EXIT_USAGE: i32 = 2;

/// An error that ends a verb: one line for stderr and the exit code.
#[derive(Debug, Clone)]
pub struct CliError {
    /// The message (printed after `rpjrt: `).
    pub message: String,
    /// The process exit code.
    pub exit_code: i32,
}

impl CliError {
    /// Bad command line or bad input: exit code 2.
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            exit_code: EXIT_USAGE,
        }
    }

    /// Something failed at run time: exit code 1.
    pub fn failed(message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            exit_code: EXIT_DEFECT,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<rpjrt::Error> for CliError {
    fn from(e: rpjrt::Error) -> CliError {
        // A request rpjrt refused before it reached the plugin was wrong: a usage error.
        // Anything else (a plugin that cannot be loaded, an error the plugin reported) is
        // a failure.
        let code = match &e {
            rpjrt::Error::InvalidArgument(_) => EXIT_USAGE,
            _ => EXIT_DEFECT,
        };
        CliError {
            message: e.to_string(),
            exit_code: code,
        }
    }
}

static QUIETED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The variable XLA-based plugins read for their minimum log level.
pub const PLUGIN_LOG_LEVEL_ENV: &str = "TF_CPP_MIN_LOG_LEVEL";

/// Keeps the plugin's log lines off stderr for this CLI process: sets
/// `TF_CPP_MIN_LOG_LEVEL=3` (fatal only) before any plugin is loaded, unless `show` is
/// set, `RPJRT_PLUGIN_LOG` is `1`, or the user set the variable. Only the CLI does this,
/// once, at start-up, before it starts threads; the rpjrt library never changes the
/// process environment.
pub fn quiet_plugin_logs(show: bool) {
    let env_show = std::env::var("RPJRT_PLUGIN_LOG").is_ok_and(|v| v == "1");
    SHOW_PLUGIN_LOG.store(show || env_show, std::sync::atomic::Ordering::Relaxed);
    if show || env_show || std::env::var_os(PLUGIN_LOG_LEVEL_ENV).is_some() {
        return;
    }
    std::env::set_var(PLUGIN_LOG_LEVEL_ENV, "3");
    QUIETED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Set by the Python front end (`python -m rpjrt`, `python/rpjrt/_cli.py`) to what it
/// changed in the environment for the tool: a JSON object naming each variable it set
/// (`RPJRT_PLUGIN_PATH`, with `sys.path` added; `RPJRT_CLI_SELF`), with the value the user
/// had, as the hex of its bytes, or `null` where it was unset.
pub const ADDED_ENV: &str = "RPJRT_CLI_ADDED_ENV";

/// The variables only a supervised child of this CLI is given (its capture directory):
/// never the user's.
const CHILD_ONLY_ENV: [&str; 1] = [crate::supervise::CAPTURE_DIR_ENV];

/// Gives this process's environment back what the user set, before it starts processes
/// of the user's (`rpjrt launch`): what the CLI set for itself is removed or restored,
/// never passed on: the plugin log level it set ([`quiet_plugin_logs`]), the Python
/// front end's settings ([`ADDED_ENV`]: the command that runs the tool again, its own
/// additions to `RPJRT_PLUGIN_PATH`), and what only a supervised child is given. What the
/// user set themselves (even `RPJRT_CLI_SUPERVISED=1`) is passed on unchanged. Call it
/// before the process has other threads.
pub fn restore_user_env() {
    use std::os::unix::ffi::OsStringExt as _;
    if plugin_logs_quieted() {
        std::env::remove_var(PLUGIN_LOG_LEVEL_ENV);
    }
    for k in CHILD_ONLY_ENV {
        std::env::remove_var(k);
    }
    let Some(added) = std::env::var_os(ADDED_ENV) else {
        return;
    };
    std::env::remove_var(ADDED_ENV);
    let Ok(Json::Object(added)) = serde_json::from_str::<Json>(&added.to_string_lossy()) else {
        return;
    };
    let hex = |s: &str| -> Option<Vec<u8>> {
        s.len()
            .is_multiple_of(2)
            .then(|| {
                (0..s.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
                    .collect()
            })
            .flatten()
    };
    for (name, user) in added {
        // Only the front end's own variables: the list cannot set anything else.
        if !name.starts_with("RPJRT_") {
            continue;
        }
        match user.as_str().and_then(hex) {
            Some(bytes) => std::env::set_var(&name, std::ffi::OsString::from_vec(bytes)),
            None => std::env::remove_var(&name),
        }
    }
}

/// True when [`quiet_plugin_logs`] set the log level itself (a child process whose stderr
/// is captured may then have it back).
pub fn plugin_logs_quieted() -> bool {
    QUIETED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Where the CLI's own output goes: the original stdout while [`divert_plugin_stdout`]
/// sends descriptor 1 (a plugin's prints) to stderr.
static ORIGINAL_STDOUT: std::sync::Mutex<Option<std::fs::File>> = std::sync::Mutex::new(None);

/// The first error writing the CLI's own output met (a full disk, `> /dev/full`, an I/O
/// error): the output is incomplete, so the command must not report success.
static OUTPUT_ERROR: std::sync::Mutex<Option<std::io::Error>> = std::sync::Mutex::new(None);

/// Writes the CLI's own output (see [`outln!`]); a failed write is kept for
/// [`take_output_error`].
pub fn write_out(text: fmt::Arguments<'_>) {
    write_with(|w| w.write_fmt(text));
}

/// [`write_out`] for bytes that need not be UTF-8 (`rpjrt launch` forwards its
/// processes' output as they wrote it).
pub fn write_out_bytes(bytes: &[u8]) {
    write_with(|w| w.write_all(bytes));
}

/// Set in a supervised child whose parent found descriptor 1 closed at its start (the
/// child inherits the `/dev/null` Rust's runtime put there, and could not tell).
pub const STDOUT_CLOSED_ENV: &str = "RPJRT_CLI_STDOUT_CLOSED";

/// True when this command was started with descriptor 1 closed (`rpjrt ... >&-`): Rust's
/// runtime then reopens it on `/dev/null` before `main`, so every write would succeed and
/// the output be lost; the CLI checks before the runtime does
/// (`rpjrt_raw::stdio::stdout_closed_at_start`, Linux only). `>/dev/null`, asked for, is
/// not this.
pub fn stdout_closed() -> bool {
    rpjrt_raw::stdio::stdout_closed_at_start()
        || *STDOUT_CLOSED_BY_ENV
            .get_or_init(|| std::env::var_os(STDOUT_CLOSED_ENV).is_some_and(|v| v == "1"))
}

/// [`STDOUT_CLOSED_ENV`] as this process found it ([`take_stdout_closed_env`]).
static STDOUT_CLOSED_BY_ENV: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Reads [`STDOUT_CLOSED_ENV`] once, at start-up, and removes it from the environment: the
/// note is for this process only (the Rust binary's supervisor, or the Python console
/// script, which cannot make Rust's start-up check see its closed descriptor). Processes
/// this one starts (`rpjrt launch`'s, a plugin's) must not take it for theirs; a supervised
/// child of this CLI gets it again explicitly.
pub fn take_stdout_closed_env() {
    let closed = *STDOUT_CLOSED_BY_ENV
        .get_or_init(|| std::env::var_os(STDOUT_CLOSED_ENV).is_some_and(|v| v == "1"));
    if closed {
        std::env::remove_var(STDOUT_CLOSED_ENV);
    }
}

fn write_with(write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>) {
    let mut original = ORIGINAL_STDOUT.lock().unwrap_or_else(|p| p.into_inner());
    let written = if stdout_closed() {
        Err(std::io::Error::other(
            "descriptor 1 was closed when rpjrt started (`>&-`), so the output has nowhere \
             to go; redirect it to /dev/null to discard it",
        ))
    } else {
        match original.as_mut() {
            Some(f) => write(&mut Patient(f)),
            None => write(&mut Patient(&mut std::io::stdout())),
        }
    };
    if let Err(e) = written {
        OUTPUT_ERROR
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
    }
}

/// Flushes stdout and returns the first error met writing the CLI's output since the last
/// call, as the error that ends the command (exit code 1): output that did not arrive
/// whole is a failure, never a silent success.
pub fn take_output_error() -> Option<CliError> {
    use std::io::Write as _;
    if let Err(e) = Patient(&mut std::io::stdout()).flush() {
        OUTPUT_ERROR
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
    }
    let e = OUTPUT_ERROR
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()?;
    Some(CliError::failed(format!(
        "cannot write the output to stdout: {e}"
    )))
}

/// Sends what plugins print on stdout to stderr until the guard drops, so that the CLI's
/// own output (JSON above all) stays clean; [`write_out`] keeps reaching the real stdout.
pub fn divert_plugin_stdout() -> Option<rpjrt::stdio::StdoutDiverted> {
    let diverted = rpjrt::stdio::divert_stdout().ok()?;
    *ORIGINAL_STDOUT.lock().unwrap_or_else(|p| p.into_inner()) = diverted.original().ok();
    Some(diverted)
}

/// Ends [`divert_plugin_stdout`]'s redirection of the CLI's own output.
pub fn end_plugin_stdout_diversion() {
    ORIGINAL_STDOUT
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
}

/// The plugin's output around loading and client creation: captured (unless
/// `--plugin-log` or `RPJRT_PLUGIN_LOG=1` asked to see it), with a note on stderr when the
/// call takes longer than a few seconds, saying what it waits on.
pub struct Quiet {
    capture: Option<rpjrt::stdio::Capture>,
    _watch: rpjrt::stdio::Watch,
}

/// How long a plugin call may take before the CLI says what it is waiting on.
pub const SLOW_CALL_NOTICE: std::time::Duration = std::time::Duration::from_secs(5);

impl Quiet {
    /// Starts capturing; `what` names the call for the slow-call note. With
    /// `--plugin-timeout`, a call still running at the limit ends the process with an error
    /// naming the call and the plugin's log so far (the call cannot be taken back from
    /// the plugin, and its static destructors must not run under it).
    pub fn start(what: &str) -> Quiet {
        Quiet::start_with(what, None)
    }

    /// [`Quiet::start`] for loading one of `plugins`: when one of them is libtpu, the
    /// slow-call note also says how to skip its wait for the cloud metadata server (see
    /// [`rpjrt::tpu::slow_load_hint`]).
    pub fn start_loading<'a>(
        what: &str,
        plugins: impl IntoIterator<Item = &'a std::path::Path>,
    ) -> Quiet {
        let hint = plugins.into_iter().find_map(rpjrt::tpu::slow_load_hint);
        Quiet::start_with(what, hint)
    }

    fn start_with(what: &str, hint: Option<&str>) -> Quiet {
        let show = SHOW_PLUGIN_LOG.load(std::sync::atomic::Ordering::Relaxed);
        let capture = if show {
            None
        } else {
            // A supervised child keeps its capture where the supervisor reads it after a
            // crash (crate::supervise).
            let keep = std::env::var_os(crate::supervise::CAPTURE_DIR_ENV);
            rpjrt::stdio::capture_in(keep.as_deref().map(std::path::Path::new)).ok()
        };
        let deadline = plugin_timeout().map(|limit| {
            let log = capture.as_ref().and_then(|c| c.log());
            let what = what.to_string();
            // The watched call runs on this thread: the step it is in names the entry.
            let caller = std::thread::current().id();
            let give_up: rpjrt::stdio::OnDeadline = Box::new(move |_ran| {
                let log = log.map(|l| l.read()).unwrap_or_default();
                let step = rpjrt::Plugin::current_step(caller)
                    .map_or_else(String::new, |s| format!(", in {s}"));
                // The limit as given (`0.1ms`, `2.0s`), not the time the watch ran, rounded
                // (a limit under half a second read "0s").
                let message = with_log(
                    format!(
                        "{what}: the plugin did not return within {}{step}; giving up",
                        plugin_timeout_shown().unwrap_or_else(|| "its limit".into())
                    ),
                    &log,
                );
                rpjrt::stdio::notice(&format!(
                    "{} {}",
                    paint_stderr("rpjrt:", Style::Red),
                    printable_lines(&message)
                ));
                // A trace being recorded (`run --trace`) is written first, saying so.
                crate::cmd::trace::save_before_exit(&format!(
                    "failed (exit code {EXIT_DEFECT}): {}",
                    message.lines().next().unwrap_or("")
                ));
                // The verb ends here by rpjrt's own decision, its error said: a supervising
                // parent must not take the exit for a plugin's exit() and say it again.
                crate::supervise::note_finished();
                rpjrt::stdio::exit_now(EXIT_DEFECT)
            });
            (limit, give_up)
        });
        // With a limit in force, the note says when rpjrt gives up, rather than advising
        // to set one.
        let give_up = match plugin_timeout_shown() {
            Some(limit) => format!("rpjrt gives up at the limit of {limit}"),
            None => "or give up after a while with --plugin-timeout SECONDS".to_string(),
        };
        Quiet {
            capture,
            _watch: rpjrt::stdio::watch_until(
                format!(
                    "{what} (the plugin has not returned; a plugin may wait on a device, a \
                     driver or a network service: rerun with --plugin-log to see its log, \
                     {give_up}){}",
                    hint.map_or_else(String::new, |h| format!("; {h}"))
                ),
                SLOW_CALL_NOTICE,
                deadline,
            ),
        }
    }

    /// Stops capturing and returns what the plugin wrote.
    pub fn finish(mut self) -> String {
        self.capture.take().map(|c| c.finish()).unwrap_or_default()
    }
}

/// Notes on stderr when a plugin call after loading (compiling, executing) has not
/// returned after [`SLOW_CALL_NOTICE`] (`rpjrt: still waiting after 5s: the plugin's
/// compile of f.mlir ...`, then every 30 s), as loading does: a plugin that hangs there
/// no longer looks like a silent rpjrt. Stops when dropped. `--plugin-timeout` does not
/// apply (a long compile is not a fault); Ctrl-C ends the command.
pub fn watch_plugin(step: &str) -> rpjrt::stdio::Watch {
    rpjrt::stdio::watch(
        format!(
            "the plugin's {step} (it has not returned; Ctrl-C ends rpjrt, --plugin-log shows \
             the plugin's log)"
        ),
        SLOW_CALL_NOTICE,
    )
}

/// What [`with_log`] puts between a message and the plugin's log.
pub const LOG_HEADING: &str =
    "\n  the plugin's log (shown because it failed; --plugin-log shows it always):\n";

/// `message` with the plugin's captured log appended, when there is one.
pub fn with_log(message: String, log: &str) -> String {
    if log.trim().is_empty() {
        return message;
    }
    format!(
        "{message}{LOG_HEADING}{}",
        rpjrt::stdio::summarize_log(log, 20)
            .lines()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    )
}

static SHOW_PLUGIN_LOG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--plugin-timeout` as given, and what gave it (the option or the variable); `None`: no
/// limit.
static PLUGIN_TIMEOUT: std::sync::Mutex<Option<(std::time::Duration, &'static str)>> =
    std::sync::Mutex::new(None);

/// Sets how long loading a plugin or creating its client may take before the CLI gives up
/// (`--plugin-timeout`, or `RPJRT_PLUGIN_TIMEOUT` when the option is not given).
pub fn set_plugin_timeout(seconds: Option<f64>) -> Result<(), CliError> {
    let (seconds, what) = match seconds {
        Some(s) => (Some(s), "--plugin-timeout"),
        // Read as bytes: a value that is not UTF-8 is refused as a bad value, never taken
        // for unset (which would mean no limit at all).
        None => match std::env::var_os("RPJRT_PLUGIN_TIMEOUT") {
            Some(raw) => match raw.to_str() {
                Some(v) if v.trim().is_empty() => (None, ""),
                Some(v) => (
                    Some(v.trim().parse::<f64>().map_err(|_| {
                        CliError::usage(format!(
                            "RPJRT_PLUGIN_TIMEOUT must be a number of seconds, got {}",
                            rpjrt_distributed::shown(v)
                        ))
                    })?),
                    "RPJRT_PLUGIN_TIMEOUT",
                ),
                None => {
                    return Err(CliError::usage(format!(
                        "RPJRT_PLUGIN_TIMEOUT must be a number of seconds, got {} (not \
                         UTF-8 text)",
                        rpjrt_distributed::shown(&raw.to_string_lossy())
                    )))
                }
            },
            None => (None, ""),
        },
    };
    let limit = match seconds {
        // Kept as given: a limit of 0.0001 s is 100 µs, not rounded to a millisecond.
        Some(s) => Some((positive_seconds(s, what)?, what)),
        None => None,
    };
    *PLUGIN_TIMEOUT.lock().unwrap_or_else(|p| p.into_inner()) = limit;
    Ok(())
}

/// The `--plugin-timeout` in force, if any.
pub fn plugin_timeout() -> Option<std::time::Duration> {
    PLUGIN_TIMEOUT
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .map(|(d, _)| d)
}

/// The `--plugin-timeout` in force as messages name it: its length, in the one format of
/// the CLI's durations (`2.0s`, `0.1ms`... see [`rpjrt_distributed::duration_text`]; a
/// short limit never reads as `0s`), and what set it: `2.0s (--plugin-timeout)`,
/// `500ms (RPJRT_PLUGIN_TIMEOUT)`. `None` when there is no limit.
pub fn plugin_timeout_shown() -> Option<String> {
    let (limit, what) = (*PLUGIN_TIMEOUT.lock().unwrap_or_else(|p| p.into_inner()))?;
    Some(format!(
        "{} ({what})",
        rpjrt_distributed::duration_text(limit)
    ))
}

/// Prints `rpjrt: message` on stderr (the error prefix in red on a colour terminal).
pub fn print_error(e: &CliError) {
    let prefix = paint_stderr("rpjrt:", Style::Red);
    // A message may hold a name or path from outside (a file name, a plugin's log): its
    // control characters are escaped, its lines kept.
    crate::errln!("{prefix} {}", printable_lines(&e.message));
}

/// `text` made safe for the CLI's human-readable output (tables, `key  value` lines,
/// messages), as `ls` shows odd file names: every control character (C0, DEL, C1) and
/// every bidirectional-override character is written as an escape, so that a name cannot
/// recolour the terminal, move its cursor, reorder what follows it or break a row:
/// `\n`, `\r`, `\t`, `\e` (ESC), `\xNN` for the other control bytes below U+0100, and
/// `\u{NNNN}` for the rest. Anything else is kept as it is. (`--json` output needs none
/// of this: JSON escapes control characters itself.)
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    escape_controls(text, false)
}

/// [`printable`] that keeps newlines and tabs: for messages of several lines.
pub fn printable_lines(text: &str) -> std::borrow::Cow<'_, str> {
    escape_controls(text, true)
}

/// A path (or any OS string) for human-readable output: [`printable`], with each byte
/// that is not UTF-8 written as `\xNN` (never a replacement character that names no file).
pub fn printable_os(text: &OsStr) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let mut out = String::new();
    for chunk in text.as_bytes().utf8_chunks() {
        out.push_str(&printable(chunk.valid()));
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// [`printable_os`] of a path.
pub fn printable_path(path: &std::path::Path) -> String {
    printable_os(path.as_os_str())
}

/// Whether [`printable`] escapes `c`: a control character, or one that changes the
/// direction of the text after it.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn escape_controls(text: &str, keep_lines: bool) -> std::borrow::Cow<'_, str> {
    let escaped = |c: char| needs_escape(c) && !(keep_lines && matches!(c, '\n' | '\t'));
    if !text.chars().any(escaped) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !escaped(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{1b}' => out.push_str("\\e"),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Sets `key` of the JSON object `obj` to `path`, losslessly: the path as text, and, when
/// it is not valid UTF-8, also `KEY_hex`, the hex of its bytes. The text then has U+FFFD in
/// place of each byte that is not UTF-8 (JSON text is Unicode), so it names no file;
/// `KEY_hex` does (`os.fsdecode(bytes.fromhex(v))` in Python). docs/cli.md documents it.
pub fn set_path_json(obj: &mut Json, key: &str, path: &std::path::Path) {
    obj[key] = json!(path.to_string_lossy());
    if let Some(hex) = path_hex(path.as_os_str()) {
        obj[format!("{key}_hex")] = json!(hex);
    }
}

/// The hex of `text`'s bytes when they are not valid UTF-8 (`None` when they are).
pub fn path_hex(text: &OsStr) -> Option<String> {
    rpjrt_conform::path_hex(std::path::Path::new(text))
}

/// Text styles used by the tables.
#[derive(Clone, Copy, Debug)]
pub enum Style {
    /// Failures.
    Red,
    /// Passes.
    Green,
    /// Unsupported / warnings.
    Yellow,
    /// Headings.
    Bold,
    /// Secondary text.
    Dim,
}

fn colour_allowed(is_tty: bool) -> bool {
    if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
        return false;
    }
    is_tty
}

/// True when stdout gets colour: a terminal, and `NO_COLOR` unset or empty.
pub fn stdout_colour() -> bool {
    // While plugin prints are diverted, descriptor 1 is stderr: ask about the real stdout.
    colour_allowed(stdout_is_terminal())
}

/// True when stderr gets colour: a terminal, and `NO_COLOR` unset or empty.
pub fn stderr_colour() -> bool {
    colour_allowed(std::io::stderr().is_terminal())
}

fn paint_with(on: bool, text: &str, style: Style) -> String {
    if !on {
        return text.to_string();
    }
    let code = match style {
        Style::Red => "31",
        Style::Green => "32",
        Style::Yellow => "33",
        Style::Bold => "1",
        Style::Dim => "2",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// `text` styled for stdout (plain unless stdout is a colour terminal).
pub fn paint(text: &str, style: Style) -> String {
    paint_with(stdout_colour(), text, style)
}

/// `text` styled for stderr (plain unless stderr is a colour terminal).
pub fn paint_stderr(text: &str, style: Style) -> String {
    paint_with(stderr_colour(), text, style)
}

/// Prints a JSON document, pretty, on stdout.
pub fn print_json(doc: &Json) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(doc).map_err(|e| CliError::failed(e.to_string()))?;
    crate::outln!("{text}");
    Ok(())
}

/// Parses a `NAME=VALUE` create option (`ClientOptions::parse_assignment`: integers,
/// true/false, floats, else text; the name checked), with what the command line adds: a
/// decimal integer outside int64 is refused (it became a rounded float of another type),
/// and `[1,2,3]` (`[]` for none) is an integer list (`Value::Int64List`, which real
/// options such as `visible_devices` take). A bad one is a usage error.
pub fn parse_option(s: &str) -> Result<(String, Value), CliError> {
    parse_option_for(s, "-o")
}

/// [`parse_option`] for a create option given to `flag` (`-o`, or `compile`'s
/// `--client-option`): its errors name that option.
pub fn parse_option_for(s: &str, flag: &str) -> Result<(String, Value), CliError> {
    let (name, value) = ClientOptions::parse_assignment(s).map_err(|e| CliError::usage(bare(e)))?;
    let raw = s.split_once('=').map_or("", |(_, v)| v);
    let digits = raw.strip_prefix(['-', '+']).unwrap_or(raw);
    let integer = |t: &str| -> Result<i64, CliError> {
        t.parse::<i64>().map_err(|_| {
            CliError::usage(format!(
                "{flag} {name}: {t} is not an int64 (-9223372036854775808 to \
                 9223372036854775807)"
            ))
        })
    };
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        let v = integer(raw)?;
        return Ok((name, Value::Int64(v)));
    }
    if let Some(inner) = raw.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        let items: Vec<&str> = inner.split(',').map(str::trim).collect();
        let list = if items == [""] {
            Vec::new()
        } else {
            items
                .iter()
                .map(|t| {
                    let d = t.strip_prefix(['-', '+']).unwrap_or(t);
                    if d.is_empty() || !d.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(CliError::usage(format!(
                            "{flag} {name}={raw}: a list holds integers ([0,1,2]), not {t:?}"
                        )));
                    }
                    integer(t)
                })
                .collect::<Result<Vec<i64>, CliError>>()?
        };
        return Ok((name, Value::Int64List(list)));
    }
    // A number float32 cannot hold is refused, as a JSON config's is: one too large was
    // passed on as text, and a nonzero one too small became 0.
    if let Ok(x) = raw.parse::<f64>() {
        if raw.bytes().any(|b| b.is_ascii_digit()) {
            if let Err(why) = Value::float_option(x, Some(raw)) {
                return Err(CliError::usage(format!("{flag} {name}: {raw} is {why}")));
            }
        }
    }
    Ok((name, value))
}

/// Client options from `NAME=VALUE` strings ([`parse_option`]); a name given twice is
/// refused (the last one silently won).
pub fn parse_options(options: &[String]) -> Result<ClientOptions, CliError> {
    parse_options_for(options, "-o")
}

/// [`parse_options`] for create options given to `flag` (`compile` takes them as
/// `--client-option`, its `-o` being the output): its errors name that option.
pub fn parse_options_for(options: &[String], flag: &str) -> Result<ClientOptions, CliError> {
    let parsed = options
        .iter()
        .map(|o| parse_option_for(o, flag))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, (name, _)) in parsed.iter().enumerate() {
        if let Some(j) = parsed[..i].iter().position(|(n, _)| n == name) {
            return Err(CliError::usage(format!(
                "{flag} {name} is given twice ({} and {}); give each option once",
                options[j], options[i]
            )));
        }
    }
    Ok(parsed.into_iter().collect())
}

/// A plugin attribute or option value as JSON.
pub fn value_json(v: &Value) -> Json {
    match v {
        Value::String(s) => json!(s),
        Value::Int64(i) => json!(i),
        Value::Int64List(l) => json!(l),
        // JSON has no NaN or infinity (serde would write null): those are text.
        Value::Float(f) if f.is_finite() => json!(f),
        Value::Float(f) => nonfinite_json(f64::from(*f)),
        Value::Bool(b) => json!(b),
    }
}

/// A float as JSON: a number when finite, else the text `"nan"`, `"inf"` or `"-inf"`
/// (JSON has no such numbers; serde would write null): the spelling of numpy and of the
/// `--input` literals, which read it back.
pub fn nonfinite_json(f: f64) -> Json {
    if f.is_nan() {
        json!("nan")
    } else if f.is_infinite() {
        json!(if f > 0.0 { "inf" } else { "-inf" })
    } else {
        json!(f)
    }
}

/// The message of an rpjrt error without the `invalid argument: ` prefix (for one-line
/// usage errors about the user's own input).
pub fn bare(e: rpjrt::Error) -> String {
    match e {
        rpjrt::Error::InvalidArgument(m) => m,
        other => other.to_string(),
    }
}

/// `e`'s message followed by what rpjrt can add: allocator figures for out-of-memory
/// errors on `device`, install hints for load failures.
pub fn explain(e: &rpjrt::Error, device: Option<&rpjrt::Device>) -> String {
    match rpjrt::diagnostics::explain(e, device, None) {
        Some(more) => format!("{e}\n{more}"),
        None => e.to_string(),
    }
}

/// Like [`explain`], naming the request that failed (what was being allocated).
pub fn explain_request(e: &rpjrt::Error, device: Option<&rpjrt::Device>, request: &str) -> String {
    match rpjrt::diagnostics::explain(e, device, Some(request)) {
        Some(more) => format!("{e}\n{more}"),
        None => e.to_string(),
    }
}

/// The shortest time limit the command line takes: one microsecond. A shorter one cannot
/// be measured (1e-10 s is 0 ns, a limit of zero, which is refused).
pub const MIN_LIMIT: std::time::Duration = std::time::Duration::from_micros(1);

/// A positive number of seconds from the command line (infinity and huge values mean
/// "as long as it takes", capped at `rpjrt::MAX_SECONDS`), at least [`MIN_LIMIT`];
/// anything else is a usage error naming `what` and the value.
pub fn positive_seconds(seconds: f64, what: &str) -> Result<std::time::Duration, CliError> {
    match rpjrt::duration_from_secs(seconds, what) {
        Ok(d) if seconds > 0.0 && d >= MIN_LIMIT => Ok(d),
        Ok(_) if seconds > 0.0 => Err(CliError::usage(format!(
            "{what} must be at least 0.000001 seconds (1µs), got {seconds:?}: a shorter \
             time limit cannot be measured"
        ))),
        _ => Err(CliError::usage(format!(
            // `{:?}`: -1e-300 in 1e-300's form, not 300 digits.
            "{what} must be a positive number of seconds, got {seconds:?}"
        ))),
    }
}

/// Checks, before any work, that a file can be written at `path` (given as `option`): not
/// a directory, not a FIFO, device or socket, and a file can be created where it will be
/// written: in the directory of the file a symbolic link at `path` leads to (following
/// links as the write does; a dangling link's target directory must exist), which must
/// exist and take a new file (one is created there and removed at once: a read-only
/// file system, `/proc`, a directory without write permission are found here, not after
/// the work). A usage error naming the option and the path otherwise, so that a long run
/// does not end in an error about where to put its result.
pub fn check_output_path(path: &std::path::Path, option: &str) -> Result<(), CliError> {
    let shown = path.display();
    if path.as_os_str().is_empty() {
        return Err(CliError::usage(format!("{option}: the file name is empty")));
    }
    if path.is_dir() || path.as_os_str().to_string_lossy().ends_with('/') {
        return Err(CliError::usage(format!(
            "{option} {shown}: that is a directory; give a file name"
        )));
    }
    // A FIFO would block the write, and a device would be replaced by the renamed file.
    rpjrt::check_regular_output(path)
        .map_err(|e| CliError::usage(format!("{option} {}", bare(e))))?;
    let target =
        follow_links(path).map_err(|why| CliError::usage(format!("{option} {shown}: {why}")))?;
    let through = if target.as_path() == path {
        String::new()
    } else {
        format!(" (a symbolic link to {})", target.display())
    };
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    if !dir.is_dir() {
        return Err(CliError::usage(format!(
            "{option} {shown}{through}: the directory {} does not exist",
            dir.display()
        )));
    }
    probe_directory(dir, &target).map_err(|e| {
        CliError::usage(format!(
            "{option} {shown}{through}: a file cannot be created in {} ({e}); give a path \
             in a directory this user can write to",
            dir.display()
        ))
    })
}

/// The file a symbolic link at `path` leads to (following links in turn, as writing
/// through it would), or `path` itself when it is no link; the target need not exist.
/// Why not, for a loop or an unreadable link.
fn follow_links(path: &std::path::Path) -> Result<std::path::PathBuf, String> {
    let mut p = path.to_path_buf();
    // Linux's own bound on the links followed in one path lookup.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p)
                    .map_err(|e| format!("cannot read the symbolic link {}: {e}", p.display()))?;
                p = match p.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(p),
        }
    }
    Err("too many levels of symbolic links".to_string())
}

/// Creates a file of its own in `dir`, beside where `target` will be written, and removes
/// it: whether the output's temporary file (`rpjrt::write_regular_file` writes one there,
/// then renames it) can be made. The probe is named as such a temporary is, so that one
/// left by a process killed in between is cleaned up as they are.
fn probe_directory(dir: &std::path::Path, target: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt as _;
    static PROBES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Numbers of their own (from the top of the range): never a writer's temporary name.
    let suffix = format!(".{}-{}.tmp", std::process::id(), u64::MAX - n);
    let name = target.file_name().map(OsStr::as_bytes).unwrap_or(b"out");
    let keep = 255 - 1 - suffix.len();
    let mut probe = std::ffi::OsString::from(".");
    probe.push(OsStr::from_bytes(&name[..name.len().min(keep)]));
    probe.push(&suffix);
    let probe = dir.join(probe);
    std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(&probe)?;
    std::fs::remove_file(&probe)
}

/// How an output option takes `-`: one rule for every output file of every verb, so that
/// `-` never silently becomes a file of that name (write `./-` for such a file).
#[derive(Clone, Copy, Debug)]
pub enum Dash {
    /// Text (JSON, HTML): `-` writes it to stdout.
    Text,
    /// Binary data (an artifact): `-` writes it to stdout when stdout is not a terminal
    /// (a pipe or a file); on a terminal it is refused, as the bytes would garble it.
    Binary,
    /// `-` is refused: stdout already carries the verb's own output (the text given says
    /// which), or the output is more than one file.
    Refused(&'static str),
}

/// Whether `path`, given to `option`, means stdout: exactly `-`, as [`Dash`] allows it for
/// that option; a usage error (exit 2) naming the option where `-` cannot be stdout.
pub fn output_is_stdout(
    path: &std::path::Path,
    option: &str,
    dash: Dash,
) -> Result<bool, CliError> {
    if path.as_os_str() != "-" {
        return Ok(false);
    }
    match dash {
        Dash::Text => Ok(true),
        Dash::Binary if stdout_is_terminal() => Err(CliError::usage(format!(
            "{option} -: the output is binary and stdout is a terminal; redirect stdout to \
             a file or a pipe (`> FILE`, `| ...`), or give a file name (./- for a file \
             named -)"
        ))),
        Dash::Binary => Ok(true),
        Dash::Refused(why) => Err(CliError::usage(format!(
            "{option} -: stdout cannot take it ({why}); give a file name (./- for a file \
             named -)"
        ))),
    }
}

/// True when the CLI's own stdout (not where plugin prints are diverted) is a terminal.
pub fn stdout_is_terminal() -> bool {
    let original = ORIGINAL_STDOUT.lock().unwrap_or_else(|p| p.into_inner());
    match original.as_ref() {
        Some(f) => f.is_terminal(),
        None => std::io::stdout().is_terminal(),
    }
}

/// The default bound on the size of a trace `rpjrt trace view` reads (1 GiB; its JSON takes
/// several times that once parsed); `RPJRT_MAX_FILE_BYTES` replaces it.
pub const MAX_TRACE_BYTES: u64 = 1 << 30;

/// The default bound on the size of a conformance report `rpjrt conform --diff` reads
/// (64 MiB; a report of every check is a few hundred KB); `RPJRT_MAX_FILE_BYTES` replaces
/// it.
pub const MAX_REPORT_BYTES: u64 = 64 << 20;

/// The default bound on the size of a serialized OpSharding read from a file (16 MiB);
/// `RPJRT_MAX_FILE_BYTES` replaces it.
pub const MAX_SHARDING_BYTES: u64 = 16 << 20;

pub use rpjrt_raw::files::{read_regular_file_at_most, MAX_READ_ENV};

/// The bytes of the user-named regular file `path`, `what` (a kind of file, for the
/// message) at most `default` bytes unless `RPJRT_MAX_FILE_BYTES` says otherwise
/// ([`read_regular_file_at_most`]): a larger file is a usage error naming its size and the
/// bound, found before anything is allocated; one that does not fit in memory is an
/// out-of-memory error, never an abort.
pub fn read_file_at_most(
    path: &std::path::Path,
    default: u64,
    what: &str,
) -> Result<Vec<u8>, CliError> {
    read_regular_file_at_most(path, default, what).map_err(|e| match e {
        rpjrt::Error::InvalidArgument(_) => CliError::usage(bare(e)),
        e => CliError::from(e),
    })
}

/// Reads a program file for `run` or `compile`: the core's one rule
/// ([`rpjrt::ProgramFile::detect`] on the bytes of the regular file `path`), its errors
/// naming the file. An rpjrt artifact given with `--format` is refused in the verb's own
/// words (`advice`: what to do with it), not as a program of that format to compile.
pub fn read_program_file(
    path: &std::path::Path,
    format: Option<&str>,
    advice: &str,
) -> Result<rpjrt::ProgramFile, CliError> {
    let bytes = rpjrt::read_regular_file(path)?;
    if let (true, Some(f)) = (rpjrt::is_artifact(&bytes), format) {
        return Err(CliError::usage(format!(
            "{}: an rpjrt artifact (what `rpjrt compile` writes), not a program in format \
             {f}: {advice}",
            path.display()
        )));
    }
    let name = path.to_string_lossy();
    rpjrt::ProgramFile::detect(bytes, Some(&name), format).map_err(|e| {
        CliError::from(rpjrt::Error::invalid(format!(
            "{}: {}",
            path.display(),
            bare(e)
        )))
    })
}

/// Writes an output file whole or not at all (`rpjrt::write_regular_file`: never over a
/// FIFO or a device, never half a file); errors are [`output_failed`].
pub fn write_output(path: &std::path::Path, option: &str, bytes: &[u8]) -> Result<(), CliError> {
    rpjrt::write_regular_file(path, |f| std::io::Write::write_all(f, bytes))
        .map_err(|e| output_failed(option, path, e))
}

/// The error of an output file (`option` gave `path`) that could not be written once the
/// work was done (a full disk, a file system that failed): a failure, exit code 1, never
/// a usage error (the command line was right, and was checked before the work), in one
/// form for every output of every verb: `--out o.npz: cannot write it: REASON`.
pub fn output_failed(option: &str, path: &std::path::Path, e: rpjrt::Error) -> CliError {
    let shown = path.display().to_string();
    let reason = bare(e);
    // rpjrt's file errors lead with the path, which the message has named already.
    let reason = reason
        .strip_prefix(&format!("{shown}: "))
        .map_or_else(|| reason.clone(), str::to_string);
    CliError::failed(format!("{option} {shown}: cannot write it: {reason}"))
}

/// A file a verb reads or writes: (what names it, the path). For an output, what names it
/// is the option (`--out`); for an input, a description (`the program`, `--input 0`,
/// `the plugin library`).
pub type NamedPath<'a> = (&'a str, &'a std::path::Path);

/// How many symbolic links [`resolved`] follows at most (as the kernel's `ELOOP` limit): a
/// longer chain, or a loop, is left as it is (its write fails, naming it).
const MAX_LINK_HOPS: usize = 40;

/// Where `path` leads, for comparing paths that may not exist yet: the canonical path when
/// it exists; else, for a symbolic link whose target does not exist yet (a dangling link,
/// which a write follows and creates the target of), where its chain of links ends, each
/// link read relative to its own directory (at most [`MAX_LINK_HOPS`] links: a loop is
/// left as it is); then that path's directory's canonical path joined with its file name
/// (so `x.npy` and `./x.npy`, neither written yet, compare equal); else the path made
/// absolute.
fn resolved(path: &std::path::Path) -> std::path::PathBuf {
    let mut at = path.to_path_buf();
    for _ in 0..MAX_LINK_HOPS {
        if let Ok(p) = std::fs::canonicalize(&at) {
            return p;
        }
        // Not there (yet): a link is followed to where the write would go.
        let is_link = std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink());
        let target = match is_link {
            true => std::fs::read_link(&at).ok(),
            false => None,
        };
        match target {
            Some(t) if t.is_absolute() => at = t,
            Some(t) => {
                let dir = at.parent().map(std::path::Path::to_path_buf);
                at = match dir {
                    Some(d) if !d.as_os_str().is_empty() => d.join(t),
                    _ => t,
                };
            }
            None => break,
        }
    }
    let dir = match at.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    match (std::fs::canonicalize(dir), at.file_name()) {
        (Ok(d), Some(name)) => d.join(name),
        _ => std::path::absolute(&at).unwrap_or(at),
    }
}

/// The compile cache directory a verb compiles through, with what named it: `given` (the
/// verb's `--cache-dir`), else a `cache_dir` client option, else `RPJRT_CACHE_DIR`.
pub fn cache_dir_in_use<'a>(
    given: Option<&'a std::path::Path>,
    options: &'a rpjrt::ClientOptions,
) -> Option<(&'static str, std::path::PathBuf)> {
    if let Some(d) = given {
        return Some(("--cache-dir", d.to_path_buf()));
    }
    if let Some(d) = options.cache_dir_path() {
        return Some(("the cache_dir client option", d.to_path_buf()));
    }
    std::env::var_os("RPJRT_CACHE_DIR")
        .filter(|d| !d.is_empty())
        .map(|d| ("RPJRT_CACHE_DIR", d.into()))
}

/// Refuses, before anything runs, an output that would collide with the compile cache
/// directory `cache` (what named it, and the path): the directory itself (the cache makes
/// it a directory, and the output then cannot be written), a path the directory lies under
/// (the output's name would have to be a directory), or a file in it under a name the
/// cache keeps for itself (an entry, a temporary of one, the plugin-build memo). A usage
/// error (exit 2) naming both. Other files in the directory are left alone by the cache
/// and allowed.
pub fn check_outputs_outside_cache(
    outputs: &[NamedPath<'_>],
    cache: Option<(&str, &std::path::Path)>,
) -> Result<(), CliError> {
    let Some((named, dir)) = cache else {
        return Ok(());
    };
    let at_dir = resolved(dir);
    for (option, path) in outputs.iter().filter(|(_, p)| p.as_os_str() != "-") {
        let at = resolved(path);
        let name = at.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let cache_name = name.starts_with(".tmp-rpjrtexe-")
            || name.starts_with(".rpjrt-build-")
            || name.strip_suffix(".rpjrtexe").is_some_and(|k| {
                k.len() == 64 && k.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            });
        let why = if at == at_dir {
            "name the same path: the compile cache would make it a directory, where the \
             output cannot be written"
        } else if at_dir.starts_with(&at) {
            "collide: the compile cache directory lies under the output's path, which would \
             have to be a directory"
        } else if at.parent() == Some(at_dir.as_path()) && cache_name {
            "collide: the output's name is one the compile cache keeps for its own files in \
             that directory"
        } else {
            continue;
        };
        return Err(CliError::usage(format!(
            "{option} {} and {named} {} {why}; give the output another name, or the cache \
             another directory",
            path.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// The one check of a verb's files, before anything runs: each output must be writable
/// ([`check_output_path`]), must not be any file the verb reads (`inputs`: the program,
/// the `--input` files, the plugin library, the reports rendered or compared), and must not
/// be another of its outputs (`--out` and `--trace`, `--json` and `--html` naming one file:
/// the second written would replace the first). A usage error (exit 2) naming both.
/// Outputs given as `-` are stdout, which every verb writes to: stdout itself must not be
/// any of the inputs ([`check_stdout`], `rpjrt ... >> INPUT`).
pub fn check_outputs(outputs: &[NamedPath<'_>], inputs: &[NamedPath<'_>]) -> Result<(), CliError> {
    check_stdout(inputs)?;
    let outputs: Vec<(&str, &std::path::Path, std::path::PathBuf)> = outputs
        .iter()
        .filter(|(_, p)| p.as_os_str() != "-")
        .map(|&(o, p)| (o, p, resolved(p)))
        .collect();
    for (option, path, _) in &outputs {
        check_output_path(path, option)?;
    }
    let inputs: Vec<(&str, &std::path::Path, std::path::PathBuf)> = inputs
        .iter()
        .map(|&(what, p)| (what, p, resolved(p)))
        .collect();
    for (i, (option, path, at)) in outputs.iter().enumerate() {
        if let Some((what, input, _)) = inputs.iter().find(|(_, _, b)| b == at) {
            return Err(CliError::usage(format!(
                "{option} {}: that is the input file {} ({what}); give another name",
                path.display(),
                input.display()
            )));
        }
        if let Some((other, other_path, _)) = outputs[..i].iter().find(|(_, _, b)| b == at) {
            return Err(CliError::usage(format!(
                "{other} {} and {option} {} name the same file: the one written last would \
                 replace the other; give each its own",
                other_path.display(),
                path.display()
            )));
        }
    }
    Ok(())
}

/// (device, inode) of the CLI's own stdout (not where a plugin's prints are diverted) when
/// it is a regular file; `None` for a terminal, a pipe, a device, or a closed stdout.
fn stdout_file_id() -> Option<(u64, u64)> {
    use std::os::fd::AsFd as _;
    use std::os::unix::fs::MetadataExt as _;
    if stdout_closed() {
        return None;
    }
    let original = ORIGINAL_STDOUT.lock().unwrap_or_else(|p| p.into_inner());
    let meta = match original.as_ref() {
        Some(f) => f.metadata(),
        None => std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .and_then(|fd| std::fs::File::from(fd).metadata()),
    }
    .ok()?;
    meta.is_file().then(|| (meta.dev(), meta.ino()))
}

/// Whether stdout is a regular file, which [`check_stdout`] compares with the inputs (a
/// verb may skip finding its inputs otherwise).
pub fn stdout_is_a_file() -> bool {
    stdout_file_id().is_some()
}

/// Refuses (exit 2) a stdout that is one of the files the verb reads (`inputs`): `rpjrt
/// compile p.mlir -o - >> p.mlir`, `rpjrt trace view t.json -o - 1<> t.json` would write
/// the verb's output into its own input, as a named output is refused for (`cat f >> f`
/// refuses it too). Compared by device and inode, so any name for the file is caught.
pub fn check_stdout(inputs: &[NamedPath<'_>]) -> Result<(), CliError> {
    use std::os::unix::fs::MetadataExt as _;
    let Some(id) = stdout_file_id() else {
        return Ok(());
    };
    for (what, path) in inputs {
        let same = std::fs::metadata(path).is_ok_and(|m| (m.dev(), m.ino()) == id);
        if same {
            return Err(CliError::usage(format!(
                "stdout is the input file {} ({what}): the output would be written into \
                 the file this command reads; send stdout to another file",
                path.display()
            )));
        }
    }
    Ok(())
}

/// The plugin libraries a verb may load for `spec` (every candidate discovery offers; none
/// when there is none, which loading reports later): inputs for [`check_outputs`].
pub fn plugin_paths(spec: Option<&OsStr>) -> Vec<std::path::PathBuf> {
    candidates(spec)
        .map(|c| c.into_iter().map(|i| i.path).collect())
        .unwrap_or_default()
}

/// What the user asked for, as text for the install hint: the spec (lossy if it is not
/// UTF-8), else `$RPJRT_PLUGIN`.
fn wanted(spec: Option<&OsStr>) -> Option<String> {
    spec.map(|s| s.to_string_lossy().into_owned())
        .or_else(|| std::env::var("RPJRT_PLUGIN").ok())
}

fn candidates(spec: Option<&OsStr>) -> Result<Vec<PluginInfo>, CliError> {
    let discovery = Discovery::from_env();
    if let Some(e) = unmatched_name(&discovery, spec) {
        return Err(e);
    }
    let found = discovery.candidates(spec).map_err(|e| match e {
        rpjrt::Error::PluginLoad { reason, .. } => CliError::usage(reason),
        other => CliError::from(other),
    })?;
    if let [one] = &found[..] {
        if let Some(why) = special_file(&one.path) {
            return Err(CliError::failed(format!(
                "cannot load PJRT plugin {}: {why}",
                printable_path(&one.path)
            )));
        }
    }
    Ok(found)
}

/// Why a plugin path naming a special file that says it is empty but is not (a `/proc` or
/// `/sys` file: `stat` gives size 0, and its contents are made as it is read) cannot be
/// loaded: the loader's own check would call it empty. `None` for anything else.
pub fn special_file(path: &std::path::Path) -> Option<&'static str> {
    use std::io::Read as _;
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() != 0 {
        return None;
    }
    let (file, opened) = rpjrt::open_for_reading(path).ok()?;
    if !opened.is_file() {
        return None;
    }
    let mut byte = [0u8; 1];
    let got = file.take(1).read(&mut byte).ok()?;
    (got == 1).then_some(rpjrt_raw::elf::SPECIAL_FILE)
}

/// Whether `spec` (as bytes) names a file rather than a plugin, by the rule discovery
/// applies to text (`rpjrt_discovery::looks_like_path`: a `/`, a library suffix), or
/// because a regular file of that name exists.
fn names_a_path(spec: &OsStr) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let b = spec.as_bytes();
    b.contains(&b'/')
        || [&b".so"[..], b".dylib", b".dll"]
            .iter()
            .any(|s| b.ends_with(s))
        || b.windows(4).any(|w| w == b".so.")
        || std::fs::metadata(spec).is_ok_and(|m| m.is_file())
}

/// The error for a plugin named (by the argument, else `RPJRT_PLUGIN`) with bytes that are
/// not UTF-8 and do not name a file: plugin, wheel and platform names are text, so it
/// matches none of them, and it is said as any other unknown name is (`no PJRT plugin
/// matching ... found. Searched: ...`, exit 2), not taken for a relative path that does
/// not exist. `None` for every other spec (discovery answers those).
fn unmatched_name(discovery: &Discovery, spec: Option<&OsStr>) -> Option<CliError> {
    let (raw, from_env) = match spec {
        Some(s) => (s.to_os_string(), false),
        None => (std::env::var_os("RPJRT_PLUGIN")?, true),
    };
    if raw.to_str().is_some() || names_a_path(&raw) {
        return None;
    }
    let origin = if from_env { " (from RPJRT_PLUGIN)" } else { "" };
    // `{:?}` of an OsStr shows the bytes that are not UTF-8 as `\xFF`.
    let mut msg = format!("no PJRT plugin matching {raw:?}{origin} found. Searched:\n");
    for line in discovery.searched() {
        msg.push_str(&format!("  {line}\n"));
    }
    // RPJRT_PLUGIN's own value is not a plugin found (discovery lists it as a path).
    let found: Vec<PluginInfo> = discovery
        .plugins_and_problems()
        .0
        .into_iter()
        .filter(|p| !(from_env && p.source == "RPJRT_PLUGIN"))
        .collect();
    if found.is_empty() {
        msg.push_str("found: nothing\n");
    } else {
        msg.push_str("found, but not matching:\n");
        for p in &found {
            msg.push_str(&format!(
                "  {} ({}) at {}\n",
                p.name,
                p.platform.as_deref().unwrap_or("unknown platform"),
                p.path.display()
            ));
        }
    }
    msg.push_str(
        "a plugin name is text: this one is not valid UTF-8 (to load a file by that name, \
         give its path, e.g. ./NAME)\nInstall one:\n  ",
    );
    msg.push_str(&install_hint(None));
    Some(CliError::usage(msg))
}

/// The first plugin discovery offers for `spec` (see [`load_plugin`]), without loading it.
pub fn find_plugin(spec: Option<&OsStr>) -> Result<PluginInfo, CliError> {
    Ok(candidates(spec)?.remove(0))
}

/// How far a candidate plugin got before it failed: what decides whether the error ends
/// with what to install (only when no library could be loaded at all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reached {
    /// The library could not be loaded: missing, unreadable, not a PJRT plugin, too old,
    /// or needing libraries that are not installed (`rpjrt::Error::PluginLoad`).
    Library,
    /// The library loaded; its `PJRT_Plugin_Initialize` (or a later step of the load)
    /// failed.
    Initialize,
    /// The plugin loaded and initialised; creating its client failed.
    Client,
}

/// One candidate's failure in [`open_client`].
struct Failed {
    error: rpjrt::Error,
    reached: Reached,
    /// Its client creation refused the create options or settings (the user's input).
    refused: bool,
}

/// One candidate's failure, worded by how far it got: a library that could not be loaded
/// is said as the loader's error (`cannot load PJRT plugin ...`); one that loaded says so
/// before its later failure, so that no plugin that loaded reads as unloadable.
impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let error = explain(&self.error, None);
        match self.reached {
            Reached::Library => f.write_str(&error),
            Reached::Initialize => write!(
                f,
                "the library loaded, but initialising the plugin failed: {error}"
            ),
            Reached::Client => write!(
                f,
                "the plugin loaded, but its client could not be created: {error}"
            ),
        }
    }
}

/// How far a failed [`Plugin::load`] got.
fn load_reached(e: &rpjrt::Error) -> Reached {
    match e {
        rpjrt::Error::PluginLoad { .. } => Reached::Library,
        _ => Reached::Initialize,
    }
}

/// Whether `e`, from creating a client with `options`, refuses the options or settings
/// the user gave: rpjrt's own refusal (`-o cpu_device_count=0`, a bad `RPJRT_*` value),
/// or the plugin's `INVALID_ARGUMENT` from `PJRT_Client_Create` while create options were
/// given (`Unexpected option name passed to PJRT_Client_Create: bogus`: its only inputs
/// are the options). Such a failure is a usage error (exit 2), whatever the verb.
pub fn refuses_options(e: &rpjrt::Error, options: &ClientOptions) -> bool {
    match e {
        rpjrt::Error::InvalidArgument(_) => true,
        rpjrt::Error::Pjrt {
            entry: "PJRT_Client_Create",
            code: rpjrt::Code::InvalidArgument,
            ..
        } => !options.entries().is_empty(),
        _ => false,
    }
}

/// What follows a plugin's refusal of the create options ([`refuses_options`]): which
/// options were given, and what to do. Empty for rpjrt's own refusals, which name the
/// option and its range themselves.
pub fn option_refusal_note(e: &rpjrt::Error, options: &ClientOptions) -> String {
    if matches!(e, rpjrt::Error::InvalidArgument(_)) || options.entries().is_empty() {
        return String::new();
    }
    let given: Vec<String> = options
        .entries()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!(
        "\n  the plugin refused the client create options given ({}): check each name and \
         value type against what this plugin accepts, or leave the option out",
        given.join(", ")
    )
}

/// The create options a client on `info` gets: `options`, plus those of the plugin's JAX
/// config (`.json` in `PJRT_NAMES_AND_LIBRARY_PATHS`) that `options` does not set (as
/// `rpjrt_discovery::open_first` merges them).
fn with_config_options(options: &ClientOptions, info: &PluginInfo) -> ClientOptions {
    let mut merged = options.clone();
    for (name, value) in info.options.iter().flat_map(|o| o.entries()) {
        if !options.entries().iter().any(|(n, _)| n == name) {
            merged = merged.set(name.clone(), value.clone());
        }
    }
    merged
}

/// The plugin a verb should use: `spec` (a path, a plugin or wheel name, or a platform
/// such as `cpu`), else `$RPJRT_PLUGIN`, else the first plugin discovery finds. Each
/// candidate is tried in order; the first that loads wins. Load errors name the file and
/// the loader's reason; what to install follows only when no library could be loaded (a
/// plugin that loaded and failed in `PJRT_Plugin_Initialize` is there already).
pub fn load_plugin(spec: Option<&OsStr>) -> Result<(Plugin, PluginInfo), CliError> {
    let candidates = candidates(spec)?;
    let quiet = Quiet::start_loading(
        "loading and initialising the plugin",
        candidates.iter().map(|c| c.path.as_path()),
    );
    let result = rpjrt_discovery::first_that_opens(
        candidates,
        |info| info.name.clone(),
        |info| Plugin::load(&info.path).map(|p| (p, info.clone())),
    );
    let log = quiet.finish();
    let failed: Vec<rpjrt::Error> = match result {
        Ok((found, _skipped)) => return Ok(found),
        Err(rpjrt_discovery::OpenFailure::One(e)) => vec![e],
        Err(rpjrt_discovery::OpenFailure::All(all)) => all.into_iter().map(|(_, e)| e).collect(),
    };
    let errors: Vec<String> = failed.iter().map(|e| explain(e, None)).collect();
    let none_loaded = failed.iter().all(|e| load_reached(e) == Reached::Library);
    Err(CliError::failed(failure_text(
        errors.join("\n"),
        spec,
        &log,
        none_loaded.then(|| failed.iter().collect()),
    )))
}

/// The error of a failed [`open_client`]. A refused option or setting
/// ([`refuses_options`], by every plugin that got as far as creating a client) is the
/// user's mistake: exit 2, no install hint (the plugins are fine). Anything else is a
/// failure, exit 1, with what to install only when no plugin library could be loaded.
fn open_error(
    failure: rpjrt_discovery::OpenFailure<Failed>,
    options: &ClientOptions,
    spec: Option<&OsStr>,
    log: &str,
) -> CliError {
    use rpjrt_discovery::OpenFailure;
    let failures: Vec<&Failed> = match &failure {
        OpenFailure::One(f) => vec![f],
        OpenFailure::All(all) => all.iter().map(|(_, f)| f).collect(),
    };
    let created: Vec<&&Failed> = failures
        .iter()
        .filter(|f| f.reached == Reached::Client)
        .collect();
    let options_refused = !created.is_empty() && created.iter().all(|f| f.refused);
    let none_loaded = failures.iter().all(|f| f.reached == Reached::Library);
    let note = created
        .iter()
        .map(|f| option_refusal_note(&f.error, options))
        .find(|n| !n.is_empty())
        .filter(|_| options_refused)
        .unwrap_or_default();
    let (message, code) = match &failure {
        OpenFailure::One(f) => {
            let code = match f.error {
                rpjrt::Error::InvalidArgument(_) => EXIT_USAGE,
                _ => EXIT_DEFECT,
            };
            (explain(&f.error, None), code)
        }
        OpenFailure::All(_) if failures.iter().all(|f| f.refused) => (
            rpjrt::Error::invalid(
                failure.message_led_by("every plugin tried refused the client options or settings"),
            )
            .to_string(),
            EXIT_USAGE,
        ),
        // Several candidates, each failing its own way: the lead names no one library as
        // unloadable (the first may have loaded and failed later), and each candidate's
        // line says how far it got (`Failed`'s wording).
        OpenFailure::All(_) => {
            let lead = if none_loaded {
                "no plugin could be used: none of the plugins tried could be loaded"
            } else if failures.iter().all(|f| f.reached == Reached::Client) {
                "no plugin could be used: every plugin tried loaded, but none could create a \
                 client"
            } else {
                "no plugin could be used"
            };
            (failure.message_led_by(lead), EXIT_DEFECT)
        }
    };
    if options_refused {
        return CliError::usage(with_log(format!("{message}{note}"), log));
    }
    CliError {
        message: failure_text(
            message,
            spec,
            log,
            none_loaded.then(|| failures.iter().map(|f| &f.error).collect()),
        ),
        exit_code: code,
    }
}

/// The JSON of an artifact's target (`rpjrt compile --json`, `rpjrt cache ... --json`): the
/// fields [`rpjrt::ArtifactTarget::fields`] lists, `device_count` as a number (as Python's
/// `rpjrt.inspect_artifact` gives it), the rest as the text they are.
pub fn target_json(t: &rpjrt::ArtifactTarget) -> serde_json::Map<String, Json> {
    t.fields()
        .into_iter()
        .map(|(k, v)| {
            let v = match k {
                "device_count" => json!(t.device_count),
                _ => json!(v),
            };
            (k.to_string(), v)
        })
        .collect()
}

/// The text of a plugin that could not be used: `message`, what rpjrt can add about it
/// (another process holding libtpu's lock), the plugin's captured log (if any), then, when
/// `install` is given (no plugin library could be loaded at all: their load errors) and
/// the message carries no hint of its own, what to do: for a library too old for rpjrt
/// (PJRT before 0.57, such as jax-cuda12-pjrt 0.4.31), to upgrade the wheel it came from;
/// for any other, what to install. A plugin that was found and loaded but failed in
/// `PJRT_Plugin_Initialize` or client creation gets no install hint: it is installed, and
/// another CPU plugin would not make it work.
fn failure_text(
    message: String,
    spec: Option<&OsStr>,
    log: &str,
    install: Option<Vec<&rpjrt::Error>>,
) -> String {
    let mut message = message;
    if let Some(hint) = libtpu_lock_hint(&message) {
        message.push('\n');
        message.push_str(&hint);
    }
    let hinted = message.contains("hint:");
    let mut text = with_log(message, log);
    let Some(errors) = install.filter(|_| !hinted) else {
        return text;
    };
    let old: Vec<&std::path::Path> = errors.iter().filter_map(|e| too_old(e)).collect();
    for path in &old {
        let how = match owning_distribution(path) {
            Some((name, Some(version))) => {
                format!("pip install -U {name} (version {version} is installed; ")
            }
            Some((name, None)) => format!("pip install -U {name} ("),
            None => "install a newer release of this plugin (".to_string(),
        };
        // One library: the message has named it.
        let what = match errors.len() {
            1 => "to get a working plugin".to_string(),
            _ => format!("to use {}", printable_path(path)),
        };
        text.push_str(&format!(
            "\n  {what}: {how}rpjrt needs a plugin built for PJRT 0.57 or newer)"
        ));
    }
    if old.len() < errors.len() {
        let want = wanted(spec);
        text.push_str(&format!(
            "\n  to get a working plugin: {}",
            install_hint(want.as_deref())
        ));
    }
    text
}

/// The library a load error refuses as too old for rpjrt (`it implements PJRT 0.54; rpjrt
/// needs PJRT 0.57 or newer`): a newer release of its own package is what helps, not a
/// CPU plugin.
fn too_old(e: &rpjrt::Error) -> Option<&std::path::Path> {
    match e {
        rpjrt::Error::PluginLoad { path, reason } if reason.contains("rpjrt needs PJRT") => {
            Some(path.as_path())
        }
        _ => None,
    }
}

/// The Python distribution (wheel) that installed the file at `path`, and its version: the
/// `*.dist-info` directory beside one of the file's parent directories (up to three levels
/// up, where site-packages holds both) whose `RECORD` lists the file. `None` when no
/// wheel's record lists it (a library built or copied by hand).
fn owning_distribution(path: &std::path::Path) -> Option<(String, Option<String>)> {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    for root in path.ancestors().skip(1).take(4) {
        let Ok(relative) = path.strip_prefix(root) else {
            continue;
        };
        let relative = relative.to_string_lossy().into_owned();
        let Ok(entries) = std::fs::read_dir(root) else {
            continue;
        };
        for entry in entries.flatten() {
            let dir_name = entry.file_name().to_string_lossy().into_owned();
            let Some(stem) = dir_name.strip_suffix(".dist-info") else {
                continue;
            };
            // A RECORD is a few kilobytes; one far larger is not read.
            let record = entry.path().join("RECORD");
            if std::fs::metadata(&record).map_or(true, |m| m.len() > (16 << 20)) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&record) else {
                continue;
            };
            let listed = text
                .lines()
                .any(|line| line.split(',').next() == Some(relative.as_str()));
            if !listed {
                continue;
            }
            let metadata =
                std::fs::read_to_string(entry.path().join("METADATA")).unwrap_or_default();
            let field = |key: &str| {
                metadata
                    .lines()
                    .take_while(|l| !l.is_empty())
                    .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
            };
            let (dir_dist, dir_version) = match stem.split_once('-') {
                Some((d, v)) => (d.replace('_', "-"), Some(v.to_string())),
                None => (stem.replace('_', "-"), None),
            };
            let name = field("Name:").unwrap_or(dir_dist);
            let version = field("Version:").or(dir_version);
            return Some((name, version));
        }
    }
    None
}

/// What rpjrt adds to libtpu's refusal to initialise while another process holds its
/// lock (`Internal error when accessing libtpu multi-process lockfile. Run "$ sudo rm
/// /tmp/libtpu_lockfile".`): that another process is probably using the TPU, which one
/// where `/proc/locks` says, and not to delete the lock file while it runs (libtpu's
/// advice is for a lock left behind by a process that has ended). `None` for any other
/// message.
fn libtpu_lock_hint(message: &str) -> Option<String> {
    if !message.contains("libtpu multi-process lockfile") && !message.contains("libtpu_lockfile") {
        return None;
    }
    let lock = lock_file_named(message).unwrap_or_else(|| "/tmp/libtpu_lockfile".to_string());
    let holder = match lock_holder(std::path::Path::new(&lock)) {
        Some((pid, command)) => format!("; process {pid} holds it now ({command})"),
        None => String::new(),
    };
    Some(format!(
        "hint: another process is probably using the TPU: libtpu lets one process at a time \
         use this host's TPU chips, and takes the lock file {lock} for it{holder}. Wait for \
         that process to end, or stop it, then try again; do not delete {lock} while it \
         runs (removing it is for a lock left behind by a process that has ended)"
    ))
}

/// The lock file libtpu's message names (`... Run "$ sudo rm /tmp/libtpu_lockfile".`).
fn lock_file_named(message: &str) -> Option<String> {
    let at = message.find(" rm ")? + " rm ".len();
    let path: String = message[at..]
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '"' && *c != '\'')
        .collect();
    let path = path.trim_end_matches(['.', ',', ';']).to_string();
    path.starts_with('/').then_some(path)
}

/// The process holding a lock on `path` (`flock` or POSIX), from `/proc/locks`: its id
/// and command line (shortened). `None` when there is none, or it cannot be told (not
/// Linux, the file gone, a lock owned by an open file description with no process).
fn lock_holder(path: &std::path::Path) -> Option<(u32, String)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    let dev = meta.dev();
    // glibc's encoding of a device number (gnu_dev_major / gnu_dev_minor).
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let want = format!("{major:02x}:{minor:02x}:{}", meta.ino());
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let me = std::process::id();
    let pid = locks.lines().find_map(|line| {
        // `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`; a waiter's line has `->`
        // after the number, and does not hold the lock.
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(1) == Some(&"->") || fields.get(5) != Some(&want.as_str()) {
            return None;
        }
        fields
            .get(4)?
            .parse::<u32>()
            .ok()
            .filter(|&p| p > 0 && p != me)
    })?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut command = cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    if command.chars().count() > 120 {
        command = command.chars().take(117).collect::<String>() + "...";
    }
    if command.is_empty() {
        command = "its command line cannot be read".to_string();
    }
    Some((pid, command))
}

/// A client on the first plugin for `spec` that loads and creates a client with `options`
/// (as `rpjrt_discovery::Discovery::open_client` opens one): a plugin that loads but
/// cannot serve here, such as a CUDA plugin without a GPU, is skipped with a note on
/// stderr. When none can, the error says why (`open_error`: exit 2 for create options
/// the plugins refused, else 1, with what to install only when no library loaded).
pub fn open_client(
    spec: Option<&OsStr>,
    options: &ClientOptions,
) -> Result<(rpjrt::Client, Plugin, PluginInfo), CliError> {
    // No plugin matching the name is the user's input (exit 2), said as every verb says it
    // ([`candidates`]); only a plugin that was found but cannot be used is a failure.
    let candidates = candidates(spec)?;
    let quiet = Quiet::start_loading(
        "loading the plugin and creating a client",
        candidates.iter().map(|c| c.path.as_path()),
    );
    let result = rpjrt_discovery::first_that_opens(
        candidates,
        |info| format!("{} ({})", info.name, info.path.display()),
        |info| {
            let plugin = Plugin::load(&info.path).map_err(|error| Failed {
                reached: load_reached(&error),
                error,
                refused: false,
            })?;
            let merged = with_config_options(options, info);
            match rpjrt_cuda::create_client(&plugin, &merged) {
                Ok(client) => Ok((client, plugin, info.clone())),
                Err(error) => Err(Failed {
                    refused: refuses_options(&error, &merged),
                    error,
                    reached: Reached::Client,
                }),
            }
        },
    );
    let log = quiet.finish();
    let (opened, skipped) = result.map_err(|f| open_error(f, options, spec, &log))?;
    for (what, f) in &skipped {
        crate::errln!(
            "rpjrt: skipped plugin {}: {}",
            printable(what),
            printable_lines(&f.to_string())
        );
    }
    Ok(opened)
}

/// Called by a verb whose work is done and whose results are out: the plugin objects it
/// drops on the way out are leaked instead of destroyed, so that a plugin hanging in a
/// destroy call cannot keep the CLI from exiting (`rpjrt::set_leak_on_drop`; the CLI's
/// entry point turns it off again, for a CLI run inside a longer process).
pub fn work_done() {
    rpjrt::set_leak_on_drop(true);
}

/// Calls [`work_done`] when dropped: declared right after a verb's client, it drops before
/// the client on every way out of the verb, an error included, so that a plugin hanging
/// in `PJRT_Client_Destroy` cannot keep a failed command from saying why and exiting
/// (the objects made after it, dropped before it, are destroyed as usual).
pub struct LeakClientOnReturn;

impl Drop for LeakClientOnReturn {
    fn drop(&mut self) {
        work_done();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_float32_cannot_hold_are_refused_not_changed() {
        // 1e-46 became 0 and 1e300 the text "1e300".
        for (o, want) in [
            ("a=1e-46", "-o a: 1e-46 is too small for float32"),
            ("a=-1e-50", "-o a: -1e-50 is too small for float32"),
            ("a=1e300", "-o a: 1e300 is beyond float32"),
            ("a=-1e39", "-o a: -1e39 is beyond float32"),
            ("a=1e400", "-o a: 1e400 is beyond float32"),
        ] {
            let e = parse_option(o).unwrap_err();
            assert_eq!(e.exit_code, EXIT_USAGE, "{o}");
            assert!(e.message.contains(want), "{o}: {}", e.message);
        }
        assert_eq!(
            parse_option("a=1e-45").unwrap().1,
            Value::Float(f32::from_bits(1))
        );
        assert_eq!(parse_option("a=0.0").unwrap().1, Value::Float(0.0));
        assert_eq!(parse_option("a=0e-99").unwrap().1, Value::Float(0.0));
        assert_eq!(parse_option("a=-0").unwrap().1, Value::Int64(0));
        assert_eq!(
            parse_option("a=3.4028235e38").unwrap().1,
            Value::Float(f32::MAX)
        );
        // Not numbers: text, as before.
        for t in ["inf", "nan", "-infinity", "1e", "x1e-46"] {
            assert_eq!(
                parse_option(&format!("a={t}")).unwrap().1,
                Value::String(t.into()),
                "{t}"
            );
        }
    }

    #[test]
    fn time_limits_too_short_to_measure_are_refused() {
        // 1e-10 s passed as a limit of 0 ns, shown as "0.0s".
        for s in [1e-10, 1e-12, 9.99e-7, 5e-324] {
            let e = positive_seconds(s, "--plugin-timeout").unwrap_err();
            assert_eq!(e.exit_code, EXIT_USAGE, "{s}");
            assert!(
                e.message
                    .contains("--plugin-timeout must be at least 0.000001 seconds (1µs)"),
                "{s}: {}",
                e.message
            );
        }
        for s in [0.0, -1.0, f64::NAN] {
            let e = positive_seconds(s, "--timeout").unwrap_err();
            assert!(
                e.message.contains("must be a positive number"),
                "{}",
                e.message
            );
        }
        // Values are shown short, whatever their size.
        let e = positive_seconds(-1e-300, "--timeout").unwrap_err();
        assert!(e.message.ends_with("got -1e-300"), "{}", e.message);
        let e = positive_seconds(1e-10, "--timeout").unwrap_err();
        assert!(e.message.contains("got 1e-10:"), "{}", e.message);
        assert_eq!(
            positive_seconds(1e-6, "x").unwrap(),
            std::time::Duration::from_micros(1)
        );
        assert_eq!(
            positive_seconds(1.96, "x").unwrap(),
            std::time::Duration::from_millis(1960)
        );
        assert!(positive_seconds(f64::INFINITY, "x").is_ok());
    }

    #[test]
    fn options_are_typed() {
        assert_eq!(parse_option("a=3").unwrap().1, Value::Int64(3));
        assert_eq!(parse_option("a=true").unwrap().1, Value::Bool(true));
        assert_eq!(parse_option("a=0.5").unwrap().1, Value::Float(0.5));
        assert_eq!(parse_option("a=x").unwrap().1, Value::String("x".into()));
        assert_eq!(parse_option("novalue").unwrap_err().exit_code, EXIT_USAGE);
        // An integer past int64 is refused: it became a rounded float32.
        assert_eq!(
            parse_option("a=9223372036854775807").unwrap().1,
            Value::Int64(i64::MAX)
        );
        assert_eq!(
            parse_option("a=-9223372036854775808").unwrap().1,
            Value::Int64(i64::MIN)
        );
        for big in [
            "a=99999999999999999999999",
            "a=9223372036854775808",
            "a=-9223372036854775809",
        ] {
            let e = parse_option(big).unwrap_err();
            assert_eq!(e.exit_code, EXIT_USAGE, "{big}");
            assert!(e.message.contains("is not an int64"), "{}", e.message);
        }
        // Integer lists.
        assert_eq!(
            parse_option("l=[0, 1,-2]").unwrap().1,
            Value::Int64List(vec![0, 1, -2])
        );
        assert_eq!(parse_option("l=[]").unwrap().1, Value::Int64List(vec![]));
        for bad in ["l=[a,b]", "l=[1,]", "l=[1.5]", "l=[99999999999999999999]"] {
            assert_eq!(
                parse_option(bad).unwrap_err().exit_code,
                EXIT_USAGE,
                "{bad}"
            );
        }
        // A name given twice.
        let e = parse_options(&["a=1".into(), "b=2".into(), "a=2".into()]).unwrap_err();
        assert_eq!(e.exit_code, EXIT_USAGE);
        assert!(e.message.contains("-o a is given twice"), "{}", e.message);
        assert!(parse_options(&["a=1".into(), "b=1".into()]).is_ok());
        for bad in ["=", "=1", " a=1", "a b=1"] {
            assert_eq!(
                parse_option(bad).unwrap_err().exit_code,
                EXIT_USAGE,
                "{bad}"
            );
        }
    }

    #[test]
    fn non_finite_float_values_are_text_in_json() {
        assert_eq!(value_json(&Value::Float(f32::NAN)), json!("nan"));
        assert_eq!(value_json(&Value::Float(f32::NEG_INFINITY)), json!("-inf"));
        assert_eq!(value_json(&Value::Float(0.5)), json!(0.5));
    }

    #[test]
    fn no_colour_off_a_terminal() {
        assert_eq!(paint_with(false, "x", Style::Red), "x");
        assert_eq!(paint_with(true, "x", Style::Red), "\x1b[31mx\x1b[0m");
    }
}
