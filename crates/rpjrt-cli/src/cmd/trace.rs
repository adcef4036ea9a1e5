//! `rpjrt trace view TRACE.json -o TRACE.html`, and the recording behind `--trace`.

use std::path::{Path, PathBuf};

use rpjrt::profiler::PluginProfiler;
use rpjrt::trace;

use crate::common::{paint_stderr, CliError, Style};

/// Arguments of `rpjrt trace`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Verb,
}

#[derive(clap::Subcommand, Debug)]
enum Verb {
    /// Write a self-contained HTML page (timeline per thread, coloured by phase, with a
    /// per-phase summary) of a Chrome trace file, such as `rpjrt run --trace` writes.
    View(ViewArgs),
}

/// Arguments of `rpjrt trace view`.
#[derive(clap::Args, Debug)]
pub struct ViewArgs {
    /// The trace: a Chrome trace-event JSON file.
    pub trace: PathBuf,
    /// Where to write the page (default: the trace's name with .html; `-` for stdout).
    #[arg(short = 'o', long = "output", value_name = "PAGE.html|-")]
    pub output: Option<PathBuf>,
}

/// Runs `rpjrt trace`.
pub fn run(args: Args) -> Result<(), CliError> {
    match args.command {
        Verb::View(v) => view(v),
    }
}

fn view(args: ViewArgs) -> Result<(), CliError> {
    // Never over the trace itself (`-o` naming it, or a trace already called `.html`).
    let out = args
        .output
        .clone()
        .unwrap_or_else(|| args.trace.with_extension("html"));
    let to_stdout = crate::common::output_is_stdout(&out, "--output", crate::common::Dash::Text)?;
    crate::common::check_outputs(&[("--output", &out)], &[("the trace", &args.trace)])?;
    let bytes =
        crate::common::read_file_at_most(&args.trace, crate::common::MAX_TRACE_BYTES, "a trace")?;
    let text = String::from_utf8(bytes)
        .map_err(|_| CliError::usage(format!("{}: not UTF-8 text", args.trace.display())))?;
    let title = format!(
        "rpjrt trace: {}",
        args.trace.file_name().map_or_else(
            || args.trace.display().to_string(),
            |n| n.to_string_lossy().into_owned()
        )
    );
    let page = trace::html(&text, &title).map_err(|e| {
        CliError::usage(format!(
            "{}: {}",
            args.trace.display(),
            crate::common::bare(e)
        ))
    })?;
    if to_stdout {
        crate::outln!("{}", page.trim_end_matches('\n'));
    } else {
        crate::common::write_output(&out, "--output", page.as_bytes())?;
        crate::outln!("{}", crate::common::printable_path(&out));
    }
    Ok(())
}

/// Where a traced command puts the plugin's profiler once it has a client.
#[derive(Default)]
pub struct ProfilerSlot {
    profiler: Option<rpjrt::Result<PluginProfiler>>,
}

impl ProfilerSlot {
    /// Starts the profiler of `client`'s plugin (or keeps why there is none).
    pub fn begin(&mut self, client: &rpjrt::Client) {
        self.profiler = Some(PluginProfiler::begin(client));
    }

    fn finish(self) -> rpjrt::Result<Vec<u8>> {
        match self.profiler {
            Some(p) => p.and_then(|p| p.finish()),
            None => Err(rpjrt::Error::InvalidArgument(
                "the command ended before it created a client".into(),
            )),
        }
    }
}

/// The trace a command is recording (`--trace`), while it runs: where it goes and which
/// command it is of. Taken by whichever writes the trace: [`record`] when the command
/// returns, or [`save_before_exit`] when the process ends before that.
struct Active {
    path: PathBuf,
    command: String,
}

static ACTIVE: std::sync::Mutex<Option<Active>> = std::sync::Mutex::new(None);

fn take_active() -> Option<Active> {
    ACTIVE.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// Writes the trace being recorded, if one is, with `outcome` in its metadata, for a
/// command that is about to end before [`record`] gets to write it: a stop signal
/// (SIGINT, SIGTERM, SIGHUP) or `--plugin-timeout` giving up on a plugin. The plugin's
/// profile is not collected then (the plugin may be inside a call). Says on stderr where
/// the trace went, or why it could not be written. Does nothing when no trace is being
/// recorded, or when it has been written already; returns whether it took the trace (then
/// the caller must end the process: the command's own ending finds no trace to write,
/// and waits for that).
pub fn save_before_exit(outcome: &str) -> bool {
    let Some(active) = take_active() else {
        return false;
    };
    let Ok(mut t) = trace::stop() else {
        return true;
    };
    t.attach_plugin_profile(Err(rpjrt::Error::InvalidArgument(format!(
        "not collected: the command ended early ({outcome})"
    ))));
    t.set_metadata("command", active.command.as_str());
    t.set_metadata("outcome", outcome);
    let line = match save(&mut t, &active.path).0 {
        Ok(()) => paint_stderr(
            &format!(
                "trace: {} ({} spans)",
                crate::common::printable_path(&active.path),
                t.events().len()
            ),
            Style::Dim,
        ),
        Err(e) => format!(
            "rpjrt: {}",
            crate::common::printable_lines(&trace_write_failed(&active.path, e).message)
        ),
    };
    rpjrt::stdio::notice(&line);
    true
}

/// Writes `t` to `path` and the plugin's profile, if it has one, beside it
/// ([`trace::profile_path`]), as `Trace::save` does, except that a profile that cannot be
/// written costs only itself: the trace is written anyway, its metadata (`plugin_profile`)
/// saying why the profile is missing. The trace's own result, and the profile's error.
fn save(t: &mut trace::Trace, path: &Path) -> (rpjrt::Result<()>, Option<rpjrt::Error>) {
    let beside = trace::profile_path(path);
    let profile = match t.plugin_profile() {
        None => return (t.save(path), None),
        Some(bytes) => rpjrt::write_regular_file(&beside, |f| std::io::Write::write_all(f, bytes)),
    };
    let profile_error = match profile {
        Ok(()) => {
            let name = beside
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            t.set_metadata("plugin_profile_file", name);
            None
        }
        Err(e) => {
            let note = t
                .metadata()
                .get("plugin_profile")
                .cloned()
                .unwrap_or_default();
            t.set_metadata(
                "plugin_profile",
                format!("{note}; not written: {}", crate::common::bare(e.clone())),
            );
            Some(e)
        }
    };
    let json = t.to_chrome_json();
    let saved = rpjrt::write_regular_file(path, |f| std::io::Write::write_all(f, json.as_bytes()));
    (saved, profile_error)
}

/// The error of a plugin profile that could not be written beside the trace at `path`.
fn profile_write_failed(path: &Path, e: rpjrt::Error) -> CliError {
    let beside = trace::profile_path(path);
    let shown = beside.display().to_string();
    let reason = crate::common::bare(e);
    let reason = reason
        .strip_prefix(&format!("{shown}: "))
        .map_or_else(|| reason.clone(), str::to_string);
    CliError::failed(format!(
        "--trace {}: the plugin's profile could not be written beside it, to {shown}: \
         {reason} (the trace itself was written)",
        path.display()
    ))
}

/// The error of a trace that could not be written ([`crate::common::output_failed`]).
fn trace_write_failed(path: &Path, e: rpjrt::Error) -> CliError {
    // The trace's own errors lead with "writing the trace to", which the form says.
    let e = match e {
        rpjrt::Error::InvalidArgument(m) => rpjrt::Error::InvalidArgument(
            m.strip_prefix("writing the trace to ")
                .map_or_else(|| m.clone(), str::to_string),
        ),
        other => other,
    };
    crate::common::output_failed("--trace", path, e)
}

/// Runs `body` with rpjrt's spans recorded, then writes the trace to `path` (and the
/// plugin's profile beside it), whether `body` succeeded or not; a failure is noted in
/// the trace's metadata (`outcome`). Prints where the trace went on stderr. A stop signal
/// (Ctrl-C, SIGTERM, SIGHUP; in a supervised child, the one its supervisor passes on)
/// writes the trace too, with `outcome` `interrupted (SIGINT)`, then ends the process as
/// the signal would have (status 128 + N; a supervisor is told the signal stopped it).
pub fn record(
    path: &Path,
    command: &str,
    body: impl FnOnce(&mut ProfilerSlot) -> Result<i32, CliError>,
) -> Result<i32, CliError> {
    trace::start().map_err(|e| CliError::usage(format!("--trace: {}", crate::common::bare(e))))?;
    *ACTIVE.lock().unwrap_or_else(|p| p.into_inner()) = Some(Active {
        path: path.to_path_buf(),
        command: command.to_string(),
    });
    // While the command runs, a stop signal is caught (not the end of the process): a
    // watcher writes the trace and ends the process then.
    let stop = rpjrt_raw::process::StopSignals::catch()
        .ok()
        .map(std::sync::Arc::new);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = stop.clone().and_then(|stop| {
        let done = done.clone();
        std::thread::Builder::new()
            .name("rpjrt-trace-stop".into())
            .spawn(move || loop {
                if let Some(sig) = stop.caught() {
                    let outcome = format!("interrupted ({})", rpjrt_distributed::signal_name(sig));
                    if !save_before_exit(&outcome) {
                        // The command is writing its trace: it sees the signal itself.
                        return;
                    }
                    crate::supervise::note_stopped(sig);
                    rpjrt::stdio::exit_now(128 + sig);
                }
                if done.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            })
            .ok()
    });
    let mut slot = ProfilerSlot::default();
    let result = body(&mut slot);
    let Some(active) = take_active() else {
        // Taken by the watcher (a stop signal) or by --plugin-timeout giving up: it
        // writes the trace and ends the process.
        loop {
            std::thread::park();
        }
    };
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    if let Some(w) = watcher {
        let _ = w.join();
    }
    let mut t = trace::stop().map_err(|e| CliError::failed(format!("--trace: {e}")))?;
    t.attach_plugin_profile(slot.finish());
    t.set_metadata("command", active.command.as_str());
    t.set_metadata(
        "outcome",
        match &result {
            Ok(code) => format!("exit code {code}"),
            Err(e) => format!("failed (exit code {}): {}", e.exit_code, e.message),
        },
    );
    let (saved, profile_error) = save(&mut t, path);
    match (&saved, &result) {
        (Ok(()), _) => {
            let beside = t
                .plugin_profile()
                .filter(|_| profile_error.is_none())
                .map(|_| {
                    format!(
                        " and {}",
                        crate::common::printable_path(&trace::profile_path(path))
                    )
                })
                .unwrap_or_default();
            crate::errln!(
                "{}",
                paint_stderr(
                    &format!(
                        "trace: {} ({} spans){beside}",
                        crate::common::printable_path(path),
                        t.events().len()
                    ),
                    Style::Dim
                )
            );
        }
        // The run's own error matters more; the trace's is reported beside it.
        (Err(e), Err(_)) => crate::errln!(
            "rpjrt: {}",
            crate::common::printable_lines(&trace_write_failed(path, e.clone()).message)
        ),
        (Err(_), Ok(_)) => {}
    }
    // A profile that could not be written: the trace was (or failed on its own); said
    // beside the run's own error, or as the command's failure (exit 1) when it succeeded.
    let profile_error = profile_error.map(|e| profile_write_failed(path, e));
    if let Some(e) = profile_error
        .as_ref()
        .filter(|_| result.is_err() || saved.is_err())
    {
        crate::errln!("rpjrt: {}", crate::common::printable_lines(&e.message));
    }
    // A stop signal that came as the command ended: its trace is written, and the
    // process ends as the signal asks.
    if let Some(sig) = stop.as_ref().and_then(|s| s.caught()) {
        crate::supervise::note_stopped(sig);
        return Ok(128 + sig);
    }
    let code = result?;
    saved.map_err(|e| trace_write_failed(path, e))?;
    if let Some(e) = profile_error {
        return Err(e);
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A profile that cannot be written (a directory at its path, made after the checks)
    /// lost the trace too (`Trace::save` returned on its error before writing the trace);
    /// now the trace is written, its metadata saying why the profile is missing, and the
    /// profile's error is reported apart.
    #[test]
    fn a_profile_that_cannot_be_written_costs_only_itself() {
        let dir = std::env::temp_dir().join(format!("rpjrt-trace-save-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("t.plugin.xspace.pb")).unwrap();
        let mut t = trace::Trace::default();
        t.attach_plugin_profile(Ok(vec![1, 2, 3]));
        let path = dir.join("t.json");
        let (saved, profile) = save(&mut t, &path);
        assert!(saved.is_ok(), "{saved:?}");
        let e = profile_write_failed(&path, profile.expect("the profile's error"));
        assert_eq!(e.exit_code, crate::common::EXIT_DEFECT);
        assert!(
            e.message.contains("t.plugin.xspace.pb") && e.message.contains("trace itself"),
            "{}",
            e.message
        );
        let written: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let note = written["otherData"]["plugin_profile"].as_str().unwrap();
        assert!(note.contains("not written"), "{note}");
        assert!(written["otherData"].get("plugin_profile_file").is_none());
        // Where it can be written: both, the trace naming the profile.
        std::fs::remove_dir(dir.join("t.plugin.xspace.pb")).unwrap();
        let mut t = trace::Trace::default();
        t.attach_plugin_profile(Ok(vec![1, 2, 3]));
        let (saved, profile) = save(&mut t, &path);
        assert!(saved.is_ok() && profile.is_none());
        assert_eq!(
            std::fs::read(dir.join("t.plugin.xspace.pb")).unwrap(),
            [1, 2, 3]
        );
        let written: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(
            written["otherData"]["plugin_profile_file"],
            "t.plugin.xspace.pb"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
