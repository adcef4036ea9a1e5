//! The verbs of the `rpjrt` tool, one module each.
//!
//! To add a verb: write `cmd/<verb>.rs` with an `Args` struct (clap `Args`) and a
//! `run(Args) -> Result<i32, CliError>` function, then add one `mod` line, one variant of
//! [`Command`] and one arm in [`run`] below. Nothing else needs to change.

use clap::Subcommand;

use crate::common::CliError;

pub mod conform;
pub mod info;
pub mod plugins;
pub mod run;

/// The verbs.
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
    /// Compile and run a program on inputs from .npy/.npz files, literals or --random.
    Run(run::Args),
}

/// Runs one verb; returns the process exit code.
pub fn run(command: Command) -> Result<i32, CliError> {
    match command {
        Command::Info(args) => info::run(args),
        Command::Plugins(args) => plugins::run(args),
        Command::Run(args) => run::run(args),
        Command::Conform(args) => conform::run(args),
        Command::ConformChild(args) => conform::run_child(args),
    }
}
