//! `rpjrt plugins`: every plugin discovery finds, in search order, and where.

use rpjrt::Plugin;
use rpjrt_discovery::Discovery;
use serde_json::json;

use crate::common::{self, paint, CliError, Style, EXIT_OK};
use crate::supervise::{self, Probe};

/// How long reading one plugin's version may take (unless --plugin-timeout says otherwise):
/// a CUDA plugin takes seconds to load; one that takes this long is stuck.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Arguments of `rpjrt plugins`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `rpjrt plugins`.
pub fn run(args: Args) -> Result<i32, CliError> {
    let discovery = Discovery::from_env();
    let found = discovery.plugins()?;
    // Reading a version loads the library, which runs its code: each is read in a child
    // process, so that a library that crashes or hangs while loading costs only its own
    // row (with supervision off, in this process). Some print while loading (absl's
    // pre-init warning, CUDA stubs): a listing has no use for that output.
    let timeout = common::plugin_timeout().unwrap_or(PROBE_TIMEOUT);
    let mut rows = Vec::with_capacity(found.len());
    for p in &found {
        // Only a regular file is tried (a FIFO or device named by a variable is not opened).
        let regular = std::fs::metadata(&p.path).is_ok_and(|m| m.is_file());
        let (pjrt, problem) = if !regular {
            (None, None)
        } else if supervise::is_child() {
            let quiet = common::Quiet::start("loading the plugins to read their PJRT versions");
            let v = Plugin::probe_version(&p.path).ok().map(|v| v.to_string());
            drop(quiet.finish());
            (v, None)
        } else {
            match supervise::probe_version(&p.path, timeout)? {
                Probe::Version(v) => (Some(v), None),
                Probe::Failed(_) => (None, None),
                Probe::Broken(why) => (None, Some(why)),
            }
        };
        let mut row = json!({
            "name": p.name, "path": p.path.display().to_string(), "source": p.source,
            "platform": p.platform, "package": p.package, "version": p.version,
            "pjrt_version": pjrt,
        });
        if let Some(why) = problem {
            row["problem"] = json!(why);
        }
        rows.push(row);
    }
    if args.json {
        common::print_json(&json!({"plugins": rows, "searched": discovery.searched()}))?;
        return Ok(EXIT_OK);
    }
    if rows.is_empty() {
        crate::outln!("no PJRT plugin found. Searched:");
        for line in discovery.searched() {
            crate::outln!("  {line}");
        }
        crate::outln!("Install one:\n  {}", rpjrt_discovery::install_hint(None));
        return Ok(EXIT_OK);
    }
    crate::outln!(
        "{}",
        paint(
            &format!(
                "{:<22} {:<6} {:<6} {:<10} {:<40} path",
                "name", "pjrt", "kind", "version", "found by"
            ),
            Style::Bold
        )
    );
    for r in &rows {
        let s = |k: &str| r[k].as_str().unwrap_or("-").to_string();
        crate::outln!(
            "{:<22} {:<6} {:<6} {:<10} {:<40} {}",
            s("name"),
            s("pjrt_version"),
            s("platform"),
            s("version"),
            s("source"),
            s("path")
        );
        if let Some(why) = r["problem"].as_str() {
            crate::outln!("{:<22} {}", "", paint(&format!("^ {why}"), Style::Red));
        }
    }
    Ok(EXIT_OK)
}
