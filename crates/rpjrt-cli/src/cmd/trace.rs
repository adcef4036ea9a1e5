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
        rpjrt::read_regular_file(&args.trace).map_err(|e| CliError::usage(e.to_string()))?;
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
        crate::outln!("{}", out.display());
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

/// Runs `body` with rpjrt's spans recorded, then writes the trace to `path` (and the
/// plugin's profile beside it), whether `body` succeeded or not; a failure is noted in
/// the trace's metadata (`outcome`). Prints where the trace went on stderr.
pub fn record(
    path: &Path,
    command: &str,
    body: impl FnOnce(&mut ProfilerSlot) -> Result<i32, CliError>,
) -> Result<i32, CliError> {
    trace::start().map_err(|e| CliError::usage(format!("--trace: {}", crate::common::bare(e))))?;
    let mut slot = ProfilerSlot::default();
    let result = body(&mut slot);
    let mut t = trace::stop().map_err(|e| CliError::failed(format!("--trace: {e}")))?;
    t.attach_plugin_profile(slot.finish());
    t.set_metadata("command", command);
    t.set_metadata(
        "outcome",
        match &result {
            Ok(code) => format!("exit code {code}"),
            Err(e) => format!("failed (exit code {}): {}", e.exit_code, e.message),
        },
    );
    let saved = t.save(path);
    match (&saved, &result) {
        (Ok(()), _) => {
            let beside = t
                .plugin_profile()
                .map(|_| format!(" and {}", trace::profile_path(path).display()))
                .unwrap_or_default();
            crate::errln!(
                "{}",
                paint_stderr(
                    &format!(
                        "trace: {} ({} spans){beside}",
                        path.display(),
                        t.events().len()
                    ),
                    Style::Dim
                )
            );
        }
        // The run's own error matters more; the trace's is reported beside it.
        (Err(e), Err(_)) => crate::errln!("rpjrt: --trace: {e}"),
        (Err(_), Ok(_)) => {}
    }
    let code = result?;
    saved.map_err(|e| CliError::failed(format!("--trace: {e}")))?;
    Ok(code)
}
