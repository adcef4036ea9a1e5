//! `rpjrt launch -n N [--port P] [--timeout S] -- CMD ...`: starts N local processes of a
//! multi-process job, each with RPJRT_PROCESS_ID, RPJRT_NUM_PROCESSES, RPJRT_COORDINATOR
//! and RPJRT_TOKEN, prefixes their output with `[i]`, and exits non-zero if any fails.

use std::io::Write;
use std::sync::Arc;

use rpjrt_distributed::Launcher;

use crate::common::CliError;

/// Arguments of `rpjrt launch`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// How many processes to start.
    #[arg(short = 'n', long = "num-processes", value_name = "N")]
    pub num_processes: usize,
    /// Port on 127.0.0.1 where process 0 hosts the key-value store (default: a free one).
    #[arg(long)]
    pub port: Option<u16>,
    /// Kill every process after this many seconds and exit with 124.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
    /// The command to run, after `--` (its arguments need not be UTF-8).
    #[arg(last = true, required = true, value_name = "CMD", value_parser = clap::value_parser!(std::ffi::OsString))]
    pub command: Vec<std::ffi::OsString>,
}

/// Runs `rpjrt launch`; the exit code is the first failing process's, 128 + N for one
/// killed by signal N (as a shell reports it), 124 on timeout.
pub fn run(args: Args) -> Result<i32, CliError> {
    // A count clap accepts but a launch cannot use is a usage error too (exit 2), like
    // the negative counts clap refuses itself.
    if args.num_processes == 0 {
        return Err(CliError::usage(
            "launch needs at least one process (-n 1 or more)",
        ));
    }
    let timeout = args
        .timeout
        .map(|t| crate::common::positive_seconds(t, "--timeout"))
        .transpose()?;
    // The job's processes get the environment the user set, not the CLI's own settings
    // (the log level it quiets plugins with, the Python front end's search path and
    // re-run command): a `rpjrt` started by the job must run as itself.
    crate::common::restore_user_env();
    let launcher = Launcher {
        num_processes: args.num_processes,
        command: args.command,
        port: args.port,
        timeout,
    };
    // Each line as the process wrote it (bytes, not text), after its prefix.
    let sink = Arc::new(|p: usize, is_err: bool, line: &[u8]| {
        let mut out = format!("[{p}] ").into_bytes();
        out.extend_from_slice(line);
        out.push(b'\n');
        if is_err {
            let _ = std::io::stderr().lock().write_all(&out);
        } else {
            crate::common::write_out_bytes(&out);
        }
    });
    match launcher.run(sink) {
        Ok(outcome) => {
            for line in cut_messages(&outcome, timeout) {
                crate::errln!("{line}");
            }
            for line in end_messages(&outcome, timeout) {
                crate::errln!("{line}");
            }
            Ok(outcome.exit_code())
        }
        // A launch refused before anything ran (no process, a command that cannot start)
        // is a usage error, exit 2; anything else is a failure.
        Err(e) => Err(CliError::from(e)),
    }
}

/// What `rpjrt launch` says about each process whose output it stopped reading: why it
/// stopped (the pipe stayed silent, the timeout ran out, a stop signal came), and which
/// processes still held the pipe open (they were started by the job's processes and
/// left running: the launcher does not stop them).
pub fn cut_messages(
    outcome: &rpjrt_distributed::LaunchOutcome,
    timeout: Option<std::time::Duration>,
) -> Vec<String> {
    use rpjrt_distributed::OutputCut;
    // Whether the job's own processes had all exited (by themselves) when the reading
    // stopped; otherwise the launcher killed them while they still wrote.
    let every_process_exited = outcome.exit_codes.iter().all(|c| c.is_some());
    let holders = match outcome.output_holders.as_slice() {
        // Nothing else holds the pipe: the reading was cut short (a timeout or a stop
        // killed the job while it wrote, or the launcher's own output was taken slowly).
        [] if !every_process_exited => {
            "no other process holds it: the job was stopped while it still wrote, or the \
             launcher's own output was not taken fast enough"
                .to_string()
        }
        [] => "no process holding it was found: it may have closed it since".to_string(),
        [pid] => format!("a process it started (pid {pid}) keeps it open and was left running"),
        pids => format!(
            "processes it started (pids {}) keep it open and were left running",
            pids.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let why = match outcome.output_cut_why {
        Some(OutputCut::Timeout) => format!(
            "the launch timed out after {} while its pipe was still open{}",
            rpjrt_distributed::duration_text(timeout.unwrap_or_default()),
            match every_process_exited {
                true => " after every process had exited",
                false => "",
            }
        ),
        Some(OutputCut::Stopped) => match outcome.stopped_by {
            Some(sig) => format!(
                "the launcher was stopped by {} ({sig}) while its pipe was still open",
                rpjrt_distributed::signal_name(sig)
            ),
            None => "the launcher was stopped while its pipe was still open".to_string(),
        },
        Some(OutputCut::Idle) | None => format!(
            "its pipe was still open, with nothing written to it, {}s after every process \
             had exited",
            rpjrt_distributed::OUTPUT_IDLE_LIMIT.as_secs()
        ),
    };
    outcome
        .output_cut
        .iter()
        .map(|p| {
            format!(
                "rpjrt: stopped reading the output of process {p}: {why} ({holders}); \
                 anything written to it later is lost"
            )
        })
        .collect()
}

/// What `rpjrt launch` says about how the launch ended, where it did not simply succeed:
/// the timeout that ran out (as given: `1ms`, not `0.0s`) or the process that failed, and
/// the signal that stopped the launcher itself (it said nothing, and exited 128 + N).
/// Empty for a launch that succeeded.
pub fn end_messages(
    outcome: &rpjrt_distributed::LaunchOutcome,
    timeout: Option<std::time::Duration>,
) -> Vec<String> {
    let mut lines = Vec::new();
    let every_process_exited = outcome.exit_codes.iter().all(|c| c.is_some());
    if outcome.timed_out
        && every_process_exited
        && outcome.output_cut_why == Some(rpjrt_distributed::OutputCut::Timeout)
    {
        let held = match outcome.output_holders.is_empty() {
            false => "a process they started still held their output open",
            true => "their output was still open",
        };
        lines.push(format!(
            "rpjrt: launch timed out after {}: every process had exited, but {held}",
            rpjrt_distributed::duration_text(timeout.unwrap_or_default())
        ));
    } else if outcome.timed_out {
        lines.push(format!(
            "rpjrt: launch timed out after {}; killed the processes still running",
            rpjrt_distributed::duration_text(timeout.unwrap_or_default())
        ));
    } else if let Some(p) = outcome.first_failure {
        lines.push(format!(
            "rpjrt: process {p} failed ({}); killed the processes still running",
            outcome.describe(p)
        ));
    }
    if let Some(sig) = outcome.stopped_by {
        lines.push(format!(
            "rpjrt: stopped by {} ({sig}): sent SIGTERM to the processes still running, \
             SIGKILL to those still running {} later",
            rpjrt_distributed::signal_name(sig),
            rpjrt_distributed::duration_text(rpjrt_distributed::STOP_GRACE)
        ));
    }
    lines
}
