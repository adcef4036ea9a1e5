//! `rpjrt plugins`: every plugin discovery finds, in search order, and where.

use rpjrt::Plugin;
use rpjrt_discovery::Discovery;
use serde_json::{json, Value as Json};

use crate::common::{self, paint, CliError, Style, EXIT_OK};

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
    // Reading versions loads the libraries, and some print while loading (absl's pre-init
    // warning, CUDA stubs): a listing has no use for that output.
    let quiet = common::Quiet::start("loading the plugins to read their PJRT versions");
    let rows: Vec<Json> = found
        .iter()
        .map(|p| {
            // Reading the version loads the library (without initialising it); only a
            // regular file is tried (a FIFO or device named by a variable is not opened).
            let regular = std::fs::metadata(&p.path).is_ok_and(|m| m.is_file());
            let pjrt = if regular {
                Plugin::probe_version(&p.path).ok().map(|v| v.to_string())
            } else {
                None
            };
            json!({
                "name": p.name, "path": p.path.display().to_string(), "source": p.source,
                "platform": p.platform, "package": p.package, "version": p.version,
                "pjrt_version": pjrt,
            })
        })
        .collect();
    drop(quiet.finish());
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
    }
    Ok(EXIT_OK)
}
