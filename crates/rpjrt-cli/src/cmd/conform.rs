//! `rpjrt conform`: the conformance harness (the `rpjrt-conform` crate), and its hidden child.

use std::ffi::OsString;
use std::path::PathBuf;

use rpjrt_conform::{self as conform, CheckResult, Outcome, Report, RunConfig};
use serde_json::json;

use crate::common::{self, paint, CliError, Style, EXIT_DEFECT, EXIT_OK};
use crate::progress::Progress;

/// Environment variable holding the command that starts this CLI again, as a JSON list
/// (`["/usr/bin/python3", "-c", BOOTSTRAP, DIR]`: the interpreter, told the directory its
/// rpjrt was imported from); set by the Python console script, whose process is the
/// interpreter rather than the `rpjrt` binary.
pub const SELF_COMMAND_ENV: &str = "RPJRT_CLI_SELF";

/// Arguments of `rpjrt conform`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The plugin: a path, a plugin or wheel name, or a platform (`cpu`); defaults to
    /// $RPJRT_PLUGIN, then the first plugin found. With --html: saved reports (`*.json`)
    /// to render instead of running the checks.
    #[arg(conflicts_with = "diff", value_name = "PLUGIN | REPORT.json...")]
    pub plugin: Vec<OsString>,
    /// Write the JSON report to this file (`-` for stdout, instead of the table).
    #[arg(long, value_name = "REPORT|-")]
    pub json: Option<PathBuf>,
    /// Write an HTML page of the report to this file (`-` for stdout): this run's, or of
    /// the saved reports given (a matrix of plugins × checks when there are several).
    #[arg(long, value_name = "PAGE.html|-", conflicts_with = "diff")]
    pub html: Option<PathBuf>,
    /// Run only the checks whose names match (substring, or a glob with `*`; comma-separated).
    #[arg(long, value_name = "PATTERN")]
    pub only: Option<String>,
    /// Show every check's facts and the plugin's log lines.
    #[arg(short, long)]
    pub verbose: bool,
    /// Time limit per check, in seconds.
    #[arg(long, default_value_t = 60.0)]
    pub timeout: f64,
    /// List the checks instead of running them.
    #[arg(long)]
    pub list: bool,
    /// Compare two reports instead of running checks.
    #[arg(long, num_args = 2, value_names = ["A.json", "B.json"])]
    pub diff: Option<Vec<PathBuf>>,
}

/// Arguments of the hidden `conform-child` verb (one isolated worker).
#[derive(clap::Args, Debug)]
pub struct ChildArgs {
    /// The plugin library.
    #[arg(long)]
    pub plugin: PathBuf,
    /// The checks to run, comma-separated, in order.
    #[arg(long)]
    pub checks: String,
}

/// Runs the hidden child: the checks, one JSON line per event on stdout.
pub fn run_child(args: ChildArgs) -> Result<i32, CliError> {
    let names: Vec<String> = args
        .checks
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    Ok(conform::child_main(&args.plugin, &names, &mut out))
}

fn outcome_text(o: Outcome) -> String {
    let style = match o {
        Outcome::Pass => Style::Green,
        Outcome::Unsupported => Style::Yellow,
        Outcome::Blocked => Style::Dim,
        _ => Style::Red,
    };
    paint(&format!("{:<11}", o.name()), style)
}

fn print_result(r: &CheckResult, verbose: bool) {
    let by = match r.unsupported_by.as_deref() {
        Some("rpjrt") => " [not yet in rpjrt]",
        _ => "",
    };
    // A blocked check names its cause; the cause's own line has the error.
    let detail = match (r.outcome, r.blocked_by.as_deref()) {
        (Outcome::Blocked, Some(cause)) => format!("blocked by {cause}"),
        _ => r.detail.lines().next().unwrap_or("").to_string(),
    };
    // What a check says may hold the plugin's own text (an error message, an attribute):
    // its control characters are escaped.
    crate::outln!(
        "{} {:<34} {}{}",
        outcome_text(r.outcome),
        common::printable(&r.name),
        common::printable(&detail),
        by
    );
    if verbose {
        for (k, v) in &r.facts {
            crate::outln!(
                "{:>12}{} = {}",
                "",
                common::printable(k),
                common::printable(&v.to_string())
            );
        }
    }
}

/// True for an argument naming a saved report rather than a plugin.
fn is_report(arg: &OsString) -> bool {
    arg.to_string_lossy()
        .to_ascii_lowercase()
        .ends_with(".json")
}

fn is_stdout(p: Option<&PathBuf>) -> bool {
    p.is_some_and(|p| p.as_os_str() == "-")
}

/// Writes `text` to `path`, or to stdout for `-`.
fn write_out(path: &std::path::Path, text: &str) -> Result<(), CliError> {
    if path.as_os_str() == "-" {
        crate::outln!("{}", text.trim_end_matches('\n'));
        return Ok(());
    }
    common::write_output(path, "--html", text.as_bytes())
}

/// `rpjrt conform --html PAGE REPORT.json...`: renders saved reports, runs nothing.
fn render_saved(args: &Args, page: &std::path::Path) -> Result<i32, CliError> {
    if args.json.is_some() || args.list {
        return Err(CliError::usage(
            "--json and --list need a plugin to run; with saved reports only --html \
             (and --only) apply",
        ));
    }
    let files: Vec<PathBuf> = args.plugin.iter().map(PathBuf::from).collect();
    // Never over a report being rendered.
    let inputs: Vec<common::NamedPath<'_>> = files
        .iter()
        .map(|f| ("a report to render", f.as_path()))
        .collect();
    common::check_outputs(&[("--html", page)], &inputs)?;
    let mut reports = Vec::with_capacity(files.len());
    for f in &files {
        let mut r = read_report(f)?;
        if let Some(only) = args.only.as_deref() {
            r.results.retain(|c| conform::matches(only, &c.name));
        }
        reports.push((f.display().to_string(), r));
    }
    if let Some(only) = args.only.as_deref() {
        if reports.iter().all(|(_, r)| r.results.is_empty()) {
            return Err(CliError::usage(format!(
                "no check in these reports matches {only:?}"
            )));
        }
    }
    let named: Vec<(&str, &Report)> = reports.iter().map(|(s, r)| (s.as_str(), r)).collect();
    write_out(page, &conform::render_html(&named))?;
    Ok(EXIT_OK)
}

/// `rpjrt conform --list`: the checks `--only` selects, as a table, or with `--json
/// FILE|-` as JSON (`{"checks": [{"name", "group", "description"}]}`). `--html` has no
/// page of a list to write: refused (exit 2), as a flag a verb cannot honour is.
fn list_checks(args: &Args, checks: &[conform::Check]) -> Result<i32, CliError> {
    if args.html.is_some() {
        return Err(CliError::usage(
            "--list lists the checks and runs none, so there is no report for --html to \
             render; leave --html out (--list --json FILE|- writes the list as JSON)",
        ));
    }
    if let Some(p) = &args.json {
        let rows: Vec<serde_json::Value> = checks
            .iter()
            .map(|c| json!({"name": c.name, "group": c.group, "description": c.description}))
            .collect();
        let doc = json!({ "checks": rows });
        if p.as_os_str() == "-" {
            common::print_json(&doc)?;
        } else {
            common::check_outputs(&[("--json", p.as_path())], &[])?;
            let text =
                serde_json::to_string_pretty(&doc).map_err(|e| CliError::failed(e.to_string()))?;
            common::write_output(p, "--json", (text + "\n").as_bytes())?;
        }
        return Ok(EXIT_OK);
    }
    for c in checks {
        crate::outln!("{:<34} {}", c.name, c.description);
    }
    Ok(EXIT_OK)
}

/// Runs `rpjrt conform`.
pub fn run(args: Args) -> Result<i32, CliError> {
    if let Some(files) = &args.diff {
        return diff(files, args.json.as_ref());
    }
    if is_stdout(args.json.as_ref()) && is_stdout(args.html.as_ref()) {
        return Err(CliError::usage(
            "--json - and --html - both want stdout; write one of them to a file",
        ));
    }
    let saved = args.plugin.iter().filter(|a| is_report(a)).count();
    if saved > 0 {
        if saved != args.plugin.len() {
            return Err(CliError::usage(
                "give one plugin to check, or saved reports (*.json) to render, not both",
            ));
        }
        return match &args.html {
            Some(page) => render_saved(&args, page),
            None => Err(CliError::usage(format!(
                "{} is a saved report: `rpjrt conform --html PAGE.html REPORT.json...` \
                 renders reports, `--diff A.json B.json` compares two",
                args.plugin[0].to_string_lossy()
            ))),
        };
    }
    if args.plugin.len() > 1 {
        return Err(CliError::usage(format!(
            "one plugin at a time (got {}); to compare plugins, save each one's report \
             with --json and render them together with --html PAGE.html A.json B.json",
            args.plugin.len()
        )));
    }
    // Every pattern must select something: a typo among several would pass unnoticed.
    if let Some(only) = args.only.as_deref() {
        let none = conform::unmatched(only);
        if !none.is_empty() && none.len() < only.split(',').filter(|p| !p.trim().is_empty()).count()
        {
            return Err(CliError::usage(format!(
                "--only: no check matches {}; `rpjrt conform --list` shows them",
                none.iter()
                    .map(|p| format!("{p:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    let checks = conform::select(args.only.as_deref());
    if checks.is_empty() {
        return Err(CliError::usage(format!(
            "no check matches {:?}; `rpjrt conform --list` shows them",
            args.only.as_deref().unwrap_or("")
        )));
    }
    if args.list {
        return list_checks(&args, &checks);
    }
    let timeout = common::positive_seconds(args.timeout, "--timeout")?;
    // Only the children load the plugin: one that crashes while loading cannot take this
    // process down.
    let spec = args.plugin.first().map(OsString::as_os_str);
    let found = common::find_plugin(spec);
    // The report's files are checked before the checks run, not after: writable, not the
    // plugin, not each other.
    let outputs: Vec<common::NamedPath<'_>> = [("--json", &args.json), ("--html", &args.html)]
        .into_iter()
        .filter_map(|(o, p)| Some((o, p.as_deref()?)))
        .collect();
    let library: Vec<common::NamedPath<'_>> = match &found {
        Ok(info) => vec![("the plugin library", info.path.as_path())],
        Err(_) => Vec::new(),
    };
    common::check_outputs(&outputs, &library)?;
    // A plugin that cannot be loaded, found or not, still gets its report (and page):
    // `plugin.load_error` says why, and a matrix of reports shows it.
    let info = match found {
        Ok(info) => info,
        Err(e) => {
            let named = match spec {
                Some(s) => s.to_string_lossy().into_owned(),
                None => std::env::var("RPJRT_PLUGIN").unwrap_or_default(),
            };
            let report = Report::load_failed(&named, &e.message);
            return Err(with_report(&args, &report, e));
        }
    };
    // The children resolve the path as this process does, except for a path that names
    // something of the process itself (`/dev/stdin`, `/proc/self/fd/0`): each child's
    // stdin is conform's pipe. What is not a regular file is refused here, as every verb
    // says it (`it is a character device, not a shared library file`).
    if let Some(kind) = std::fs::metadata(&info.path)
        .ok()
        .and_then(|m| rpjrt_raw::files::kind_of(&m))
    {
        let e = rpjrt::Error::PluginLoad {
            path: info.path.clone(),
            reason: format!("it is {kind}, not a shared library file"),
        };
        return Err(load_failure(&args, &info.path, &e));
    }
    let mut child = crate::supervise::self_command()?;
    child.push("conform-child".into());
    let config = RunConfig {
        child,
        timeout,
        // The children's stderr is captured per check (never mixed with ours), so the
        // plugin may log there as it would by default.
        env: if common::plugin_logs_quieted() {
            vec![(common::PLUGIN_LOG_LEVEL_ENV.into(), "0".into())]
        } else {
            Vec::new()
        },
        // `--plugin-timeout` bounds each child's load of the plugin, as it bounds every
        // verb's (client creation is a check, bounded by --timeout).
        load_timeout: common::plugin_timeout().map(|limit| conform::LoadTimeout {
            limit,
            shown_as: common::plugin_timeout_shown().unwrap_or_default(),
        }),
        // The note every verb gives when loading a plugin takes long.
        load_notice: Some((
            common::SLOW_CALL_NOTICE,
            format!(
                "loading the plugin in conform's child process (the plugin has not \
                 returned; a plugin may wait on a device, a driver or a network service: \
                 rerun with -v to see its log, {})",
                match common::plugin_timeout_shown() {
                    Some(limit) => format!("conform gives up at the limit of {limit}"),
                    None => format!(
                        "conform gives up after {}, or sooner with --plugin-timeout SECONDS",
                        rpjrt_distributed::duration_text(timeout.max(conform::LOAD_TIMEOUT_FLOOR))
                    ),
                }
            ),
        )),
    };
    let to_stdout = is_stdout(args.json.as_ref()) || is_stdout(args.html.as_ref());
    // Which check runs and how many are left, on a terminal only and never with --json.
    let shown = Progress::new(args.json.is_some() || to_stdout);
    let verbose = args.verbose;
    let mut progress = |i: usize, n: usize, name: &str, done: Option<&CheckResult>| match done {
        None => shown.step(i, n, name),
        Some(r) => {
            shown.clear();
            if !to_stdout {
                print_result(r, verbose);
            }
        }
    };
    let report = match conform::run_isolated(&info.path, &checks, &config, &mut progress) {
        Ok(report) => report,
        Err(e) => return Err(load_failure(&args, &info.path, &e)),
    };
    if verbose && !to_stdout {
        // The plugin's own output, per check (known once each child process has ended).
        for r in report.results.iter().filter(|r| !r.stderr.is_empty()) {
            crate::outln!(
                "{}",
                paint(&format!("plugin stderr during {}:", r.name), Style::Dim)
            );
            for line in r.stderr.lines() {
                crate::outln!("  {}", paint(&common::printable(line), Style::Dim));
            }
        }
    }
    // What happened outside the checks (a child killed after its last check): said
    // on stderr, and kept in the report's "notes".
    for note in &report.notes {
        crate::errln!(
            "{} {}",
            common::paint_stderr("rpjrt: note:", Style::Yellow),
            common::printable_lines(note)
        );
    }
    write_reports(&args, &report, &info.path.display().to_string())?;
    if !to_stdout {
        let s = report.summary();
        let blocked = match s["blocked"] {
            0 => String::new(),
            n => format!(", {n} blocked"),
        };
        let line = format!(
            "{} checks: {} pass, {} fail, {} unsupported{blocked}, {} crash, {} timeout  ({})",
            report.results.len(),
            s["pass"],
            s["fail"],
            s["unsupported"],
            s["crash"],
            s["timeout"],
            common::printable_path(&info.path)
        );
        let style = if report.has_defects() {
            Style::Red
        } else {
            Style::Green
        };
        crate::outln!("{}", paint(&line, style));
    }
    Ok(if report.has_defects() {
        EXIT_DEFECT
    } else {
        EXIT_OK
    })
}

/// Writes the run's report where `--json` and `--html` ask (a file, or stdout for `-`);
/// `plugin` names what was checked in the page's source line.
fn write_reports(args: &Args, report: &Report, plugin: &str) -> Result<(), CliError> {
    let doc = report.to_json();
    match &args.json {
        Some(p) if p.as_os_str() == "-" => common::print_json(&doc)?,
        Some(p) => {
            let text =
                serde_json::to_string_pretty(&doc).map_err(|e| CliError::failed(e.to_string()))?;
            common::write_output(p, "--json", (text + "\n").as_bytes())?;
        }
        None => {}
    }
    if let Some(page) = &args.html {
        let source = match &args.json {
            Some(p) if p.as_os_str() != "-" => p.display().to_string(),
            _ => format!("a run of rpjrt conform on {plugin}"),
        };
        write_out(page, &conform::render_html(&[(&source, report)]))?;
    }
    Ok(())
}

/// The error of a plugin at `path` that could not be loaded (`e`), with its report (see
/// [`with_report`]): the load error as every verb says it, and `plugin.load_error` (and
/// `plugin.path_hex` for a non-UTF-8 path) in the report.
fn load_failure(args: &Args, path: &std::path::Path, e: &rpjrt::Error) -> CliError {
    let reason = match e {
        rpjrt::Error::PluginLoad { reason, .. } => reason.clone(),
        other => other.to_string(),
    };
    let mut report = Report::load_failed(&path.to_string_lossy(), &reason);
    if let Some(hex) = common::path_hex(path.as_os_str()) {
        report.plugin.insert("path_hex".into(), json!(hex));
    }
    with_report(args, &report, CliError::failed(common::explain(e, None)))
}

/// `error` (the plugin could not be found or loaded), once the report of that
/// (`report`, with `plugin.load_error`) is written where `--json`/`--html` ask: a CI that
/// collects reports gets one for this plugin too. A report that cannot be written is said
/// too; the load error stays the command's.
fn with_report(args: &Args, report: &Report, error: CliError) -> CliError {
    if let Err(e) = write_reports(args, report, &report_path(report)) {
        common::print_error(&e);
    }
    error
}

/// The plugin a report is of, as its `plugin.path` gives it.
fn report_path(report: &Report) -> String {
    report
        .plugin
        .get("path")
        .and_then(|p| p.as_str())
        .unwrap_or("")
        .to_string()
}

fn read_report(p: &std::path::Path) -> Result<Report, CliError> {
    let bytes = common::read_file_at_most(p, common::MAX_REPORT_BYTES, "a conformance report")?;
    let text = String::from_utf8(bytes)
        .map_err(|_| CliError::usage(format!("{}: not UTF-8 text", p.display())))?;
    // From the text: integers too wide for 64 bits are compared and shown as written.
    Report::from_text(&text)
        .map_err(|e| CliError::usage(format!("{}: {}", p.display(), common::bare(e))))
}

/// The `--diff --json` document: the two reports' paths and the differences, whose values
/// are written as the reports write them (an integer too wide for 64 bits included).
/// `wide`: a report holds integers too wide for 64 bits.
fn diff_json(d: &[conform::Difference], files: &[PathBuf], wide: bool) -> Result<String, CliError> {
    let failed = |e: serde_json::Error| CliError::failed(e.to_string());
    let rows: Vec<serde_json::Value> = d
        .iter()
        .map(|x| json!({"what": x.what, "a": x.a, "b": x.b}))
        .collect();
    let mut doc = json!({ "differences": rows });
    common::set_path_json(&mut doc, "a", &files[0]);
    common::set_path_json(&mut doc, "b", &files[1]);
    if !wide {
        return serde_json::to_string_pretty(&doc).map_err(failed);
    }
    // Some value is past what a `Value` holds exactly: the rows go in as raw JSON text.
    use serde_json::value::{to_raw_value, RawValue};
    let rows = d
        .iter()
        .map(|x| RawValue::from_string(x.to_json_text()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(failed)?;
    let mut exact: std::collections::BTreeMap<String, Box<RawValue>> = Default::default();
    for (k, v) in doc.as_object().into_iter().flatten() {
        exact.insert(k.clone(), to_raw_value(v).map_err(failed)?);
    }
    exact.insert("differences".into(), to_raw_value(&rows).map_err(failed)?);
    serde_json::to_string_pretty(&exact).map_err(failed)
}

fn diff(files: &[PathBuf], json_out: Option<&PathBuf>) -> Result<i32, CliError> {
    // Never over a report being compared (stdout, where the text goes, included).
    let inputs: Vec<common::NamedPath<'_>> = files
        .iter()
        .map(|f| ("a report to compare", f.as_path()))
        .collect();
    let outputs: Vec<common::NamedPath<'_>> = json_out
        .map(|p| ("--json", p.as_path()))
        .into_iter()
        .collect();
    common::check_outputs(&outputs, &inputs)?;
    let a = read_report(&files[0])?;
    let b = read_report(&files[1])?;
    let d = conform::diff(&a, &b);
    if let Some(p) = json_out {
        let wide = !(a.wide_integers.is_empty() && b.wide_integers.is_empty());
        let text = diff_json(&d, files, wide)?;
        if p.as_os_str() == "-" {
            crate::outln!("{text}");
        } else {
            common::write_output(p, "--json", (text + "\n").as_bytes())?;
        }
        return Ok(EXIT_OK);
    }
    let name = |r: &Report, f: &PathBuf| {
        r.plugin
            .get("pjrt_version")
            .and_then(|v| v.as_str())
            .map(|v| format!("PJRT {v}"))
            .unwrap_or_else(|| f.display().to_string())
    };
    crate::outln!(
        "{}",
        paint(
            &format!(
                "A = {} ({})\nB = {} ({})",
                common::printable_path(&files[0]),
                common::printable(&name(&a, &files[0])),
                common::printable_path(&files[1]),
                common::printable(&name(&b, &files[1]))
            ),
            Style::Bold
        )
    );
    if d.is_empty() {
        crate::outln!("no differences");
        return Ok(EXIT_OK);
    }
    // Checks blocked on one side (by one cause, the client) are listed together, not as a
    // screenful of outcome changes.
    let blocked_in = |r: &Report, what: &str| {
        let name = what.strip_prefix("check ")?.strip_suffix(": outcome")?;
        let r = r.results.iter().find(|r| r.name == name)?;
        Some(r.blocked_by.clone()?).filter(|_| r.outcome == Outcome::Blocked)
    };
    let mut grouped: Vec<(&str, String, Vec<&str>)> = Vec::new();
    for x in &d {
        let side = match (blocked_in(&a, &x.what), blocked_in(&b, &x.what)) {
            (Some(cause), _) => Some(("A", cause)),
            (None, Some(cause)) => Some(("B", cause)),
            _ => None,
        };
        if let Some((side, cause)) = side {
            let name = &x.what["check ".len()..x.what.len() - ": outcome".len()];
            match grouped.iter_mut().find(|g| g.0 == side && g.1 == cause) {
                Some(g) => g.2.push(name),
                None => grouped.push((side, cause, vec![name])),
            }
            continue;
        }
        crate::outln!("{}", common::printable(&x.what));
        // The values are a report's (what a plugin said, or a file handed over): JSON
        // text leaves C1 controls and bidirectional overrides raw, so they are escaped
        // as every text line is.
        let a_text = common::printable(&x.a_text).into_owned();
        let b_text = common::printable(&x.b_text).into_owned();
        crate::outln!("  A: {}", paint(&a_text, Style::Red));
        crate::outln!("  B: {}", paint(&b_text, Style::Green));
    }
    for (side, cause, names) in &grouped {
        crate::outln!(
            "{} checks blocked in {side} by {}: {}",
            names.len(),
            common::printable(cause),
            paint(&common::printable(&names.join(", ")), Style::Dim)
        );
    }
    crate::outln!("{} differences", d.len());
    Ok(EXIT_OK)
}
