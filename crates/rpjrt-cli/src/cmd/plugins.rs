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

/// The most version probes running at once: each is a child process and a thread here,
/// holding a pipe. A library stuck while loading holds its slot for the time limit, so
/// fewer stuck libraries than this still cost one time limit in all.
const PROBES_AT_ONCE: usize = 32;

/// How many probes to run at once for `n` libraries: [`PROBES_AT_ONCE`], fewer where the
/// open-files limit (`ulimit -n`) leaves less room (8 descriptors a probe, counting the
/// ones a start holds for a moment), at least one.
fn probes_at_once(n: usize) -> usize {
    let room = rpjrt_raw::files::open_files_limit()
        .map(|l| usize::try_from(l.saturating_sub(64) / 8).unwrap_or(usize::MAX))
        .unwrap_or(PROBES_AT_ONCE);
    PROBES_AT_ONCE.min(room).min(n).max(1)
}

/// A row's `problem` when its probe child could not be started: what failed, and what to
/// do where that is known.
fn start_failure(message: &str) -> String {
    format!("{message}{}", start_hint(message).unwrap_or_default())
}

/// What to do about a probe child that could not be started for want of a resource
/// (its error's text names the errno); `None` for another failure.
fn start_hint(message: &str) -> Option<&'static str> {
    if message.contains("os error 24") || message.contains("os error 23") {
        Some("; out of file descriptors: raise the limit (`ulimit -n`)")
    } else if message.contains("os error 11") {
        Some("; out of processes: raise the limit (`ulimit -u`)")
    } else {
        None
    }
}

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
    // Never printed into a library it reads (`rpjrt plugins >> lib.so`).
    let libraries: Vec<common::NamedPath<'_>> = listed
        .iter()
        .map(|(p, _)| ("a plugin library listed", p.path.as_path()))
        .collect();
    common::check_stdout(&libraries)?;
    // Every version is read at once, each in its own child, so that stuck libraries cost
    // one timeout in all, not one each.
    // How many probes are being started or waited for now (for the retry in `read`).
    let in_flight = std::sync::atomic::AtomicUsize::new(0);
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
        } else if let Some(why) = common::special_file(&p.path) {
            (None, Some(why.to_string()))
        } else if supervise::is_child() {
            let quiet = common::Quiet::start_loading(
                "loading the plugins to read their PJRT versions",
                [p.path.as_path()],
            );
            let v = Plugin::probe_version(&p.path);
            drop(quiet.finish());
            match v {
                Ok(v) => (Some(v.to_string()), None),
                Err(e) => (None, Some(unread(e.to_string()))),
            }
        } else {
            // A start that failed for want of descriptors or processes while other probes
            // run is tried again once one of those may have ended (a few times, briefly).
            let mut tries = 0;
            let probed = loop {
                in_flight.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let r = supervise::probe_version(&p.path, timeout);
                let others = in_flight.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) > 1;
                match r {
                    Err(e) if others && tries < 50 && start_hint(&e.message).is_some() => {
                        tries += 1;
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                    r => break r,
                }
            };
            match probed {
                Ok(Probe::Version(v)) => (Some(v), None),
                Ok(Probe::Failed(why)) => (None, Some(unread(why))),
                Ok(Probe::Broken(why)) => (None, Some(why)),
                // A child that could not be started (out of file descriptors or
                // processes) costs this row its version, not the whole listing.
                Err(e) => (None, Some(start_failure(&e.message))),
            }
        })
    };
    let answers: Vec<Result<Answer, CliError>> = if supervise::is_child() {
        // In this process: one at a time (loading is not something to do in parallel).
        listed.iter().map(|(p, why)| read(p, why.clone())).collect()
    } else {
        // A bounded number of children at once, each worker taking the next row: all
        // at once ran out of file descriptors (and threads) with hundreds of plugins.
        let workers = probes_at_once(listed.len());
        let next = std::sync::atomic::AtomicUsize::new(0);
        let slots: Vec<std::sync::Mutex<Option<Result<Answer, CliError>>>> =
            listed.iter().map(|_| std::sync::Mutex::new(None)).collect();
        std::thread::scope(|scope| {
            for _ in 0..workers {
                let work = || loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((p, why)) = listed.get(i) else { break };
                    let answer = read(p, why.clone());
                    *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(answer);
                };
                // A worker that cannot be started leaves its rows to the others (the
                // calling thread works too, below).
                let _ = std::thread::Builder::new().spawn_scoped(scope, work);
            }
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((p, why)) = listed.get(i) else { break };
                let answer = read(p, why.clone());
                *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(answer);
            }
        });
        slots
            .into_iter()
            .map(|s| {
                s.into_inner()
                    .unwrap_or_else(|e| e.into_inner())
                    .unwrap_or_else(|| Err(CliError::failed("reading a plugin's version failed")))
            })
            .collect()
    };
    // Each row's path as the table shows it (the bytes that are not UTF-8 escaped).
    let mut paths = Vec::with_capacity(listed.len());
    for ((p, _), answer) in listed.iter().zip(answers) {
        let (pjrt, problem) = answer?;
        let (package, version) = (p.package.clone(), p.version.clone());
        let mut row = json!({
            "name": p.name, "source": p.source,
            "platform": p.platform, "package": package, "version": version,
            "pjrt_version": pjrt,
        });
        common::set_path_json(&mut row, "path", &p.path);
        paths.push(common::printable_path(&p.path));
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
            crate::outln!("  {}", common::printable(&line));
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
    // Names come from directory and file names: their control characters are escaped
    // (an ESC would recolour the terminal, a newline split the row).
    let cell = |r: &serde_json::Value, k: &str| {
        common::printable(r[k].as_str().unwrap_or("-")).into_owned()
    };
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
    for (r, path) in rows.iter().zip(&paths) {
        let cells: Vec<String> = COLUMNS.iter().map(|(k, _, _)| cell(r, k)).collect();
        crate::outln!("{}", line(cells, path));
        if let Some(why) = r["problem"].as_str() {
            crate::outln!(
                "{:<w$} {}",
                "",
                paint(&format!("^ {}", common::printable(why)), Style::Red),
                w = widths[0]
            );
        }
    }
    Ok(EXIT_OK)
}
