//! The verbs of the `rpjrt` tool, one module each.
//!
//! To add a verb: write `cmd/<verb>.rs` with an `Args` struct (clap `Args`) and a
//! `run(Args) -> Result<i32, CliError>` function, then add one `mod` line, one variant of
//! [`Command`] and one arm in [`run()`] below. Nothing else needs to change.

use clap::Subcommand;

use crate::common::{CliError, EXIT_OK};

pub mod cache;
pub mod compile;
pub mod conform;
pub mod info;
pub mod launch;
pub mod plugins;
pub mod rendezvous;
pub mod run;
pub mod trace;

/// The verbs.
/// Arguments of the hidden `probe-version` verb (the child side of `rpjrt plugins`).
#[derive(clap::Args, Debug)]
pub struct ProbeArgs {
    /// The library whose PJRT version to print.
    pub path: std::path::PathBuf,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Show a plugin's version, attributes, extensions, devices and memories.
    Info(info::Args),
    /// List the PJRT plugins discovery finds, in search order, and where each was found.
    Plugins(plugins::Args),
    /// Check a plugin's conformance, each check isolated; or compare two reports (--diff).
    Conform(conform::Args),
    /// One isolated conform worker (internal).
    #[command(name = "conform-child", hide = true)]
    ConformChild(conform::ChildArgs),
    /// Reads one plugin's version in a child of `rpjrt plugins` (internal).
    #[command(name = "probe-version", hide = true)]
    ProbeVersion(ProbeArgs),
    /// Compile and run a program on inputs from .npy/.npz files, literals or --random.
    Run(run::Args),
    /// Start N local processes of a multi-process job (each gets RPJRT_PROCESS_ID,
    /// RPJRT_NUM_PROCESSES, RPJRT_COORDINATOR, RPJRT_TOKEN); exit non-zero if any fails.
    Launch(launch::Args),
    /// Check that the processes of a job meet on process 0's key-value store.
    Rendezvous(rendezvous::Args),
    /// Compile a program once and write an rpjrt artifact (load it with client.load).
    Compile(compile::CompileArgs),
    /// List, inspect or clear a compile-cache directory.
    Cache(cache::CacheArgs),
    /// Work with trace files (`rpjrt run --trace`): draw one as a self-contained HTML page.
    Trace(trace::Args),
}

/// Runs one verb; returns the process exit code.
pub fn run(command: Command) -> Result<i32, CliError> {
    match command {
        Command::Info(args) => info::run(args),
        Command::Plugins(args) => plugins::run(args),
        Command::ProbeVersion(args) => Ok(crate::supervise::probe_version_child(&args.path)),
        Command::Run(args) => run::run(args),
        Command::Conform(args) => conform::run(args),
        Command::ConformChild(args) => conform::run_child(args),
        Command::Launch(args) => launch::run(args),
        Command::Rendezvous(args) => rendezvous::run(args),
        Command::Compile(args) => compile::run(args).map(|()| EXIT_OK),
        Command::Cache(args) => cache::run(args).map(|()| EXIT_OK),
        Command::Trace(args) => trace::run(args).map(|()| EXIT_OK),
    }
}
