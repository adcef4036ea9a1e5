//! The `rpjrt` command line: argument parsing and rendering only.
//!
//! Exposed as a library so the Python package's `rpjrt` console script runs the very same
//! code as the Rust binary. Each verb is a module under [`cmd`], registered once in
//! `cmd/mod.rs`; shared conventions (exit codes, colour, JSON, plugin resolution) live in
//! [`common`].

#![forbid(unsafe_code)]

pub mod cmd;
pub mod common;
pub mod literal;
pub mod progress;
pub mod supervise;

use clap::Parser;

pub use common::{CliError, EXIT_DEFECT, EXIT_OK, EXIT_USAGE};

/// Command-line interface of rpjrt.
#[derive(Parser, Debug)]
#[command(name = "rpjrt", version, about = "Inspect and drive PJRT plugins")]
struct Cli {
    #[command(subcommand)]
    command: cmd::Command,
    /// Let the plugin's own log lines through to stderr (also: RPJRT_PLUGIN_LOG=1).
    /// By default the CLI sets TF_CPP_MIN_LOG_LEVEL=3 for its own process, unless it is
    /// already set, so that XLA's INFO/WARNING/ERROR lines do not mix with its output.
    #[arg(long, global = true)]
    plugin_log: bool,
    /// Give up when loading a plugin or creating its client takes longer than this many
    /// seconds (also: RPJRT_PLUGIN_TIMEOUT): the CLI then exits with status 1, naming the
    /// call and showing the plugin's log. By default it waits, saying what it waits on.
    #[arg(long, global = true, value_name = "SECONDS")]
    plugin_timeout: Option<f64>,
}

/// Runs the CLI on `args` (including the program name) and returns the exit code:
/// 0 ok, 1 a defect or failure was found, 2 usage error or bad input.
pub fn run_from_args<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    // A supervised child notes first of all that rpjrt runs in it: one that ends without
    // the note failed to start (its parent then blames no plugin).
    if supervise::is_child() {
        supervise::note_started();
    }
    let code = run_args(args);
    // A verb may have left its objects to leak (`common::work_done`); the process this CLI
    // runs in (Python's, for the console script) may go on using rpjrt.
    rpjrt::set_leak_on_drop(false);
    // A supervised child that gets here ran its verb to the end; one that exits without
    // this note was ended by something in the process (a plugin calling exit()).
    if supervise::is_child() {
        supervise::note_finished();
    }
    code
}

fn run_args<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    progress::init();
    common::take_stdout_closed_env();
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            // clap says only "invalid UTF-8 was detected in one or more arguments": name
            // the argument, and what takes text.
            if e.kind() == clap::error::ErrorKind::InvalidUtf8 {
                if let Some(message) = not_utf8_message(&args) {
                    common::print_error(&CliError::usage(message));
                    return EXIT_USAGE;
                }
            }
            if e.use_stderr() {
                let _ = e.print();
                return EXIT_USAGE;
            }
            // --help and --version: output like any other, so one that cannot be written
            // (a full disk, `> /dev/full`, a stdout closed at start) fails the command.
            let rendered = e.render();
            let printed = if common::stdout_colour() {
                rendered.ansi().to_string()
            } else {
                rendered.to_string()
            };
            common::write_out(format_args!("{printed}"));
            return match common::take_output_error() {
                Some(err) => {
                    common::print_error(&err);
                    err.exit_code
                }
                None => EXIT_OK,
            };
        }
    };
    if let Err(e) = refuse_repeated_globals(&args, &cli) {
        common::print_error(&e);
        return e.exit_code;
    }
    if let Err(e) = supervise::check_env() {
        common::print_error(&e);
        return e.exit_code;
    }
    common::quiet_plugin_logs(cli.plugin_log);
    if let Err(e) = common::set_plugin_timeout(cli.plugin_timeout) {
        common::print_error(&e);
        return e.exit_code;
    }
    // Verbs that load a plugin into the process run in a child, so that a plugin's crash
    // is reported here instead of ending the CLI with the signal.
    let verb = match cli.command {
        cmd::Command::Info(_) => Some("info"),
        cmd::Command::Run(_) => Some("run"),
        cmd::Command::Compile(_) => Some("compile"),
        // Only with --plugin does it load one.
        cmd::Command::Rendezvous(ref r) if r.plugin.is_some() => Some("rendezvous"),
        _ => None,
    };
    if let Some(verb) = verb.filter(|_| !supervise::is_child()) {
        return exit_code(supervise::run_verb_in_child(
            verb,
            args.get(1..).unwrap_or_default(),
        ));
    }
    // A plugin's prints never reach stdout, which is the verb's own (read by programs:
    // --json, the probe's answer line): see `diverts_plugin_stdout`.
    let diverted = diverts_plugin_stdout(&cli.command)
        .then(common::divert_plugin_stdout)
        .flatten();
    let result = cmd::run(cli.command);
    common::end_plugin_stdout_diversion();
    drop(diverted);
    // Output that could not be written (a full disk) fails a command that succeeded.
    let result = match (result, common::take_output_error()) {
        (Ok(_), Some(e)) => Err(e),
        (result, _) => result,
    };
    exit_code(result)
}

/// Refuses an option of every verb (`--plugin-timeout`, `--plugin-log`) given both before
/// and after the verb: clap refuses one given twice on the same side, but lets the later
/// side's value win silently across the verb. A usage error (exit 2), as clap's own.
///
/// Before the verb only these options can stand, so the tokens there are read plainly;
/// whether one was given after the verb too is asked of clap, by parsing the command line
/// again without the occurrence before the verb.
fn refuse_repeated_globals(args: &[std::ffi::OsString], cli: &Cli) -> Result<(), CliError> {
    let mut i = 1;
    let mut before: Vec<(&str, std::ops::Range<usize>)> = Vec::new();
    while let Some(a) = args.get(i).and_then(|a| a.to_str()) {
        let (name, len) = match a {
            "--plugin-log" => ("--plugin-log", 1),
            "--plugin-timeout" => ("--plugin-timeout <SECONDS>", 2),
            a if a.starts_with("--plugin-timeout=") => ("--plugin-timeout <SECONDS>", 1),
            _ => break,
        };
        before.push((name, i..i + len));
        i += len;
    }
    for (name, at) in before {
        let given_before = match name {
            "--plugin-log" => cli.plugin_log,
            _ => cli.plugin_timeout.is_some(),
        };
        if !given_before {
            continue;
        }
        let rest: Vec<&std::ffi::OsString> = args
            .iter()
            .enumerate()
            .filter(|(k, _)| !at.contains(k))
            .map(|(_, a)| a)
            .collect();
        let Ok(again) = Cli::try_parse_from(rest) else {
            continue;
        };
        let after = match name {
            "--plugin-log" => again.plugin_log,
            _ => again.plugin_timeout.is_some(),
        };
        if after {
            return Err(CliError::usage(format!(
                "the argument '{name}' cannot be used multiple times (it was given before \
                 the verb and after it; give it once)"
            )));
        }
    }
    Ok(())
}

/// The message for an argument that is not UTF-8 where the command line wants text (a
/// create option, a format, a pattern...): which argument, as its bytes, and which option
/// took it. Every file and plugin argument takes any bytes; only text is refused.
fn not_utf8_message(args: &[std::ffi::OsString]) -> Option<String> {
    let at = args.iter().skip(1).position(|a| a.to_str().is_none())? + 1;
    let arg = &args[at];
    // `--name=VALUE`, else the option before it (`-o VALUE`), else the argument's place.
    use std::os::unix::ffi::OsStrExt;
    let bytes = arg.as_bytes();
    let attached = bytes
        .starts_with(b"--")
        .then(|| bytes.iter().position(|&b| b == b'='))
        .flatten()
        .map(|eq| {
            (
                String::from_utf8_lossy(&bytes[..eq]).into_owned(),
                std::ffi::OsStr::from_bytes(&bytes[eq + 1..]),
            )
        });
    let before = args
        .get(at - 1)
        .and_then(|a| a.to_str())
        .filter(|a| at > 1 && a.starts_with('-') && *a != "--")
        .map(|o| (o.to_string(), arg.as_os_str()));
    let what = match attached.or(before) {
        Some((option, value)) => format!("the value of {option}, {value:?},"),
        None => format!("argument {at}, {arg:?},"),
    };
    Some(format!(
        "{what} is not valid UTF-8, and it is read as text there (file names and plugin \
         paths may hold any bytes; names, options and literals must be UTF-8)"
    ))
}

/// Whether a verb sends descriptor 1 to stderr while it runs (its own output still reaches
/// stdout), so that what a plugin prints (a banner, XLA's `--xla_dump_to=-`) cannot mix
/// with the verb's output: one rule for every verb, whether it loads a plugin or not,
/// except those whose stdout is a protocol or another process's output that they pass on
/// themselves (`launch`, `conform`, `conform-child`: conform reads its workers' marked
/// lines, and launch relays its processes' lines).
fn diverts_plugin_stdout(command: &cmd::Command) -> bool {
    !matches!(
        command,
        cmd::Command::Launch(_) | cmd::Command::Conform(_) | cmd::Command::ConformChild(_)
    )
}

/// A verb's exit code; its error, if any, printed.
fn exit_code(result: Result<i32, CliError>) -> i32 {
    match result {
        Ok(code) => code,
        Err(e) => {
            common::print_error(&e);
            e.exit_code
        }
    }
}
