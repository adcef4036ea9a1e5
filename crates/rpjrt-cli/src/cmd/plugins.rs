//! `rpjrt plugins`: every plugin discovery finds, in search order, and where.

use rpjrt::Plugin;
use rpjrt_discovery::Discovery;
use serde_json::json;

use crate::common::{self, paint, CliError, Style, EXIT_OK};
use crate::supervise::{self, Probe};

/// How long reading the plugins' versions may take (unless --plugin-timeout says
/// otherwise; every plugin is read at once, each in its own child): a CUDA plugin takes
/// seconds to load; one that takes this long is stuck.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// What reading one library's version gave: the version, or why there is none.
type Answer = (Option<String>, Option<String>);

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
    // A plugin config that cannot be read costs only its own row.
    let (found, bad_configs) = discovery.plugins_and_problems();
    // Reading a version loads the library, which runs its code: each is read in a child
    // process, so that a library that crashes or hangs while loading costs only its own
    // row (with supervision off, in this process). Some print while loading (absl's
    // pre-init warning, CUDA stubs): a listing has no use for that output.
    let timeout = common::plugin_timeout().unwrap_or(PROBE_TIMEOUT);
    let mut rows = Vec::with_capacity(found.len());
    let unread = |why: String| {
        if why.is_empty() {
            "its PJRT version could not be read".to_string()
        } else {
            why
        }
    };
    let listed: Vec<_> = found
        .iter()
        .map(|p| (p, None))
        .chain(bad_configs.iter().map(|(p, why)| (p, Some(why.clone()))))
        .collect();
    // Every version is read at once, each in its own child, so that stuck libraries cost
    // one timeout in all, not one each.
    let read = |p: &rpjrt_discovery::PluginInfo,
                config_problem: Option<String>|
     -> Result<Answer, CliError> {
        // Only a regular file is tried (a FIFO or device named by a variable is not opened).
        let meta = std::fs::metadata(&p.path);
        Ok(if let Some(why) = config_problem {
            (None, Some(why))
        } else if let Err(e) = &meta {
            (None, Some(format!("cannot be read: {e}")))
        } else if !meta.as_ref().is_ok_and(|m| m.is_file()) {
            (
                None,
                Some("not a regular file (a device, FIFO or directory); not loaded".into()),
            )
        } else if supervise::is_child() {
            let quiet = common::Quiet::start("loading the plugins to read their PJRT versions");
            let v = Plugin::probe_version(&p.path);
            drop(quiet.finish());
            match v {
                Ok(v) => (Some(v.to_string()), None),
                Err(e) => (None, Some(unread(e.to_string()))),
            }
        } else {
            match supervise::probe_version(&p.path, timeout)? {
                Probe::Version(v) => (Some(v), None),
                Probe::Failed(why) => (None, Some(unread(why))),
                Probe::Broken(why) => (None, Some(why)),
            }
        })
    };
    let answers: Vec<Result<Answer, CliError>> = if supervise::is_child() {
        // In this process: one at a time (loading is not something to do in parallel).
        listed.iter().map(|(p, why)| read(p, why.clone())).collect()
    } else {
        std::thread::scope(|scope| {
            let running: Vec<_> = listed
                .iter()
                .map(|(p, why)| scope.spawn(|| read(p, why.clone())))
                .collect();
            running
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(CliError::failed("reading a plugin's version failed"))
                    })
                })
                .collect()
        })
    };
    let dirs = &discovery.search_path().dirs;
    for ((p, _), answer) in listed.iter().zip(answers) {
        let (pjrt, problem) = answer?;
        // A plugin found without its wheel (through a namespace package): the wheel whose
        // RECORD lists the library, where one does.
        let (package, version) = match (&p.package, &p.version) {
            (None, None) => wheel_of(&p.path, dirs).map_or((None, None), |(n, v)| (Some(n), v)),
            (package, version) => (package.clone(), version.clone()),
        };
        let mut row = json!({
            "name": p.name, "path": p.path.display().to_string(), "source": p.source,
            "platform": p.platform, "package": package, "version": version,
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
    // Each column as wide as its widest cell (at least its usual width), so that a long
    // name (`intel_extension_for_openxla`) widens its column instead of shifting its row.
    const COLUMNS: [(&str, &str, usize); 5] = [
        ("name", "name", 22),
        ("pjrt_version", "pjrt", 6),
        ("platform", "kind", 6),
        ("version", "version", 10),
        ("source", "found by", 40),
    ];
    let cell = |r: &serde_json::Value, k: &str| r[k].as_str().unwrap_or("-").to_string();
    let widths: Vec<usize> = COLUMNS
        .iter()
        .map(|(key, _, least)| {
            rows.iter()
                .map(|r| cell(r, key).chars().count())
                .chain([*least])
                .max()
                .unwrap_or(*least)
        })
        .collect();
    let line = |cells: Vec<String>, last: &str| {
        let mut text = String::new();
        for (c, w) in cells.iter().zip(&widths) {
            text.push_str(&format!("{c:<w$} "));
        }
        text.push_str(last);
        text
    };
    let heading: Vec<String> = COLUMNS.iter().map(|(_, h, _)| h.to_string()).collect();
    crate::outln!("{}", paint(&line(heading, "path"), Style::Bold));
    for r in &rows {
        let cells: Vec<String> = COLUMNS.iter().map(|(k, _, _)| cell(r, k)).collect();
        crate::outln!("{}", line(cells, &cell(r, "path")));
        if let Some(why) = r["problem"].as_str() {
            crate::outln!(
                "{:<w$} {}",
                "",
                paint(&format!("^ {why}"), Style::Red),
                w = widths[0]
            );
        }
    }
    Ok(EXIT_OK)
}

/// The wheel (name, version) whose `.dist-info/RECORD`, in one of the site directories
/// `dirs`, lists the library `path`: for a plugin discovery found without its wheel (a
/// namespace package's module). `None` when no RECORD lists it.
fn wheel_of(
    path: &std::path::Path,
    dirs: &[std::path::PathBuf],
) -> Option<(String, Option<String>)> {
    // The directory resolved, not the file: a RECORD lists a symlink as installed.
    let real = match (path.parent().map(std::fs::canonicalize), path.file_name()) {
        (Some(Ok(dir)), Some(name)) => dir.join(name),
        _ => path.to_path_buf(),
    };
    for dir in dirs {
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
        let Ok(rel) = real.strip_prefix(&dir) else {
            continue;
        };
        let Some(rel) = rel.to_str() else { continue };
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut infos: Vec<std::path::PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "dist-info") && p.is_dir())
            .collect();
        infos.sort();
        for info in infos {
            let Some(record) = small_text(&info.join("RECORD")) else {
                continue;
            };
            let listed = record.lines().any(|l| {
                l.split(',')
                    .next()
                    .is_some_and(|f| f.replace('\\', "/") == rel)
            });
            if !listed {
                continue;
            }
            // The name and version: METADATA's, else the directory's (`name-1.2.dist-info`).
            let stem = info
                .file_name()
                .map(|n| {
                    n.to_string_lossy()
                        .trim_end_matches(".dist-info")
                        .to_string()
                })
                .unwrap_or_default();
            let (mut name, mut version) = match stem.split_once('-') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (stem.clone(), None),
            };
            for line in small_text(&info.join("METADATA"))
                .unwrap_or_default()
                .lines()
            {
                if line.is_empty() {
                    break; // the end of the headers
                }
                if let Some(v) = line.strip_prefix("Name:") {
                    name = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("Version:") {
                    version = Some(v.trim().to_string());
                }
            }
            return Some((name, version));
        }
    }
    None
}

/// A regular file's text (lossy), when it is at most 16 MiB: a FIFO or a device is not
/// opened.
fn small_text(p: &std::path::Path) -> Option<String> {
    let meta = std::fs::metadata(p).ok()?;
    if !meta.is_file() || meta.len() > 16 << 20 {
        return None;
    }
    std::fs::read(p)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}
