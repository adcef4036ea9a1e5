//! The harness end to end: checks run in child processes against the fake plugin (scripted
//! through its `RPJRT_FAKE_*` knobs) and a real CPU plugin.
//!
//! This test binary is its own harness (`harness = false`) so that it can also be the
//! conform child: started as `isolated child --plugin PATH --checks NAMES`, it runs
//! `child_main` and exits. The CPU plugin comes from `RPJRT_TEST_PLUGIN_NEW` or
//! `.deps/plugins.env` (written by `scripts/setup.sh`); the fake plugin from
//! `RPJRT_FAKE_PLUGIN`, else it is built with cargo into this profile's target folder.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rpjrt_conform::{
    run_isolated, select, CheckResult, LoadTimeout, Outcome, Report, RunConfig, CLIENT_CHECK,
    TEST_CRASH_ENV,
};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child") {
        std::process::exit(child(&args[2..]));
    }
    // libtest-style filtering: `cargo test -p rpjrt-conform --test isolated -- NAME`.
    let filter = args.iter().skip(1).find(|a| !a.starts_with('-')).cloned();
    let tests: &[(&str, fn())] = &[
        (
            "cpu_plugin_passes_api_and_buffers",
            cpu_plugin_passes_api_and_buffers,
        ),
        (
            "no_client_blocks_the_checks_that_need_one",
            no_client_blocks_the_checks_that_need_one,
        ),
        (
            "a_zero_version_struct_size_fails_api_version",
            a_zero_version_struct_size_fails_api_version,
        ),
        (
            "unimplemented_is_reported_as_such",
            unimplemented_is_reported_as_such,
        ),
        (
            "a_plugin_that_cannot_compile_does_not_conform",
            a_plugin_that_cannot_compile_does_not_conform,
        ),
        (
            "a_plugin_without_the_core_entries_does_not_conform",
            a_plugin_without_the_core_entries_does_not_conform,
        ),
        ("a_crash_is_isolated", a_crash_is_isolated),
        (
            "a_table_size_the_loader_clamped_fails_table_size",
            a_table_size_the_loader_clamped_fails_table_size,
        ),
        (
            "a_child_hanging_after_its_last_check_is_killed_and_noted",
            a_child_hanging_after_its_last_check_is_killed_and_noted,
        ),
        (
            "a_plugin_printing_protocol_lines_forges_nothing",
            a_plugin_printing_protocol_lines_forges_nothing,
        ),
        (
            "a_load_that_hangs_ends_at_the_load_timeout_naming_it",
            a_load_that_hangs_ends_at_the_load_timeout_naming_it,
        ),
        (
            "a_load_within_its_timeout_runs_the_checks",
            a_load_within_its_timeout_runs_the_checks,
        ),
    ];
    let mut failed = Vec::new();
    let mut ran = 0;
    for (name, test) in tests {
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        ran += 1;
        print!("test {name} ... ");
        match std::panic::catch_unwind(test) {
            Ok(()) => println!("ok"),
            Err(_) => {
                println!("FAILED");
                failed.push(*name);
            }
        }
    }
    println!(
        "\ntest result: {}. {} passed; {} failed",
        if failed.is_empty() { "ok" } else { "FAILED" },
        ran - failed.len(),
        failed.len()
    );
    if !failed.is_empty() {
        std::process::exit(101);
    }
}

/// The child: `--plugin PATH --checks A,B,...`.
fn child(args: &[String]) -> i32 {
    let value = |flag: &str| {
        let at = args.iter().position(|a| a == flag);
        at.and_then(|i| args.get(i + 1))
            .cloned()
            .unwrap_or_default()
    };
    let names: Vec<String> = value("--checks")
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let plugin = PathBuf::from(value("--plugin"));
    rpjrt_conform::child_main(&plugin, &names, &mut std::io::stdout().lock())
}

/// The core's test helpers: where the plugins are, and the fake plugin built once.
#[path = "../../rpjrt/tests/common/mod.rs"]
mod common;

fn fake_plugin() -> PathBuf {
    common::fake_plugin_library()
}

fn cpu_plugin() -> PathBuf {
    common::plugin_path(common::Which::New)
}

/// Runs the checks matching `only` against `plugin`, with `env` set in the children.
fn conform(plugin: &Path, only: &str, env: &[(&str, &str)]) -> Report {
    conform_within(plugin, only, env, Duration::from_secs(60))
}

/// [`conform`] with `timeout` per check.
fn conform_within(plugin: &Path, only: &str, env: &[(&str, &str)], timeout: Duration) -> Report {
    conform_limited(plugin, only, env, timeout, None).expect("the run completes")
}

/// [`conform_within`] with a limit on loading the plugin, returning the run's error.
fn conform_limited(
    plugin: &Path,
    only: &str,
    env: &[(&str, &str)],
    timeout: Duration,
    load_timeout: Option<LoadTimeout>,
) -> rpjrt::Result<Report> {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child_env: Vec<(OsString, OsString)> = env
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();
    // Keep the plugins' logs out of the way; the report keeps them anyway.
    child_env.push(("TF_CPP_MIN_LOG_LEVEL".into(), "3".into()));
    let config = RunConfig {
        child: vec![exe.into_os_string(), "child".into()],
        timeout,
        env: child_env,
        load_timeout,
        load_notice: None,
    };
    let checks = select(Some(only));
    assert!(!checks.is_empty(), "no check matches {only}");
    let mut progress = |_: usize, _: usize, _: &str, _: Option<&CheckResult>| {};
    run_isolated(plugin, &checks, &config, &mut progress)
}

fn result<'a>(r: &'a Report, name: &str) -> &'a CheckResult {
    r.results
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no result for {name}"))
}

fn cpu_plugin_passes_api_and_buffers() {
    let r = conform(&cpu_plugin(), "api.*,client.*,buffers.s*", &[]);
    for c in &r.results {
        assert!(
            matches!(c.outcome, Outcome::Pass | Outcome::Unsupported),
            "{}: {} {}",
            c.name,
            c.outcome.name(),
            c.detail
        );
    }
    let v = result(&r, "api.version");
    assert_eq!(v.facts["version_struct_size"], 24);
    assert!(!r.has_defects());
    assert_eq!(r.summary()["blocked"], 0);
}

fn no_client_blocks_the_checks_that_need_one() {
    // A plugin whose client cannot be created (a GPU plugin on a machine without one).
    let r = conform(
        &fake_plugin(),
        "api.*,client.*,devices.*,buffers.*,ext.layouts",
        &[(
            "RPJRT_FAKE_FAIL",
            "PJRT_Client_Create:FAILED_PRECONDITION:no devices found",
        )],
    );
    let create = result(&r, CLIENT_CHECK);
    assert_eq!(create.outcome, Outcome::Fail, "{}", create.detail);
    assert!(
        create.detail.contains("no devices found"),
        "{}",
        create.detail
    );
    // The one failure is the only defect: every other check that needs a client says it
    // was blocked by it, and those that need none still ran.
    let defects: Vec<&str> = r
        .results
        .iter()
        .filter(|c| c.outcome.is_defect())
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(defects, [CLIENT_CHECK]);
    let blocked: Vec<&CheckResult> = r
        .results
        .iter()
        .filter(|c| c.outcome == Outcome::Blocked)
        .collect();
    assert!(blocked.len() > 30, "only {} blocked", blocked.len());
    for c in &blocked {
        assert_eq!(c.blocked_by.as_deref(), Some(CLIENT_CHECK), "{}", c.name);
        assert!(c.detail.contains("no devices found"), "{}", c.detail);
    }
    for name in [
        "client.create_options",
        "devices.list",
        "buffers.roundtrip.float32",
    ] {
        assert_eq!(result(&r, name).outcome, Outcome::Blocked, "{name}");
    }
    for name in ["api.version", "api.table_size", "ext.layouts"] {
        assert_eq!(result(&r, name).outcome, Outcome::Pass, "{name}");
    }
    assert!(r.has_defects());
    let json = r.to_json();
    assert_eq!(json["summary"]["blocked"], blocked.len());
    assert_eq!(Report::from_json(&json).unwrap(), r);
}

fn a_zero_version_struct_size_fails_api_version() {
    let r = conform(
        &fake_plugin(),
        "api.version",
        &[("RPJRT_FAKE_VERSION_STRUCT_SIZE", "0")],
    );
    let v = result(&r, "api.version");
    assert_eq!(v.outcome, Outcome::Fail, "{}", v.detail);
    assert!(
        v.detail.contains("pjrt_api_version.struct_size is 0"),
        "{}",
        v.detail
    );
    assert_eq!(v.facts["version_struct_size"], 0);
    // The same plugin with the size set passes.
    let r = conform(&fake_plugin(), "api.version", &[]);
    assert_eq!(result(&r, "api.version").outcome, Outcome::Pass);
}

fn unimplemented_is_reported_as_such() {
    let r = conform(
        &fake_plugin(),
        "executable.cost_analysis,devices.memory_stats",
        &[(
            "RPJRT_FAKE_FAIL",
            "PJRT_Executable_GetCostAnalysis:UNIMPLEMENTED:no cost model;\
             PJRT_Device_MemoryStats:UNIMPLEMENTED:no allocator stats",
        )],
    );
    for (name, entry, message) in [
        (
            "executable.cost_analysis",
            "PJRT_Executable_GetCostAnalysis",
            "no cost model",
        ),
        (
            "devices.memory_stats",
            "PJRT_Device_MemoryStats",
            "no allocator stats",
        ),
    ] {
        let c = result(&r, name);
        assert_eq!(c.outcome, Outcome::Unsupported, "{name}: {}", c.detail);
        assert_eq!(c.unsupported_by.as_deref(), Some("plugin"));
        assert!(
            c.detail
                .starts_with(&format!("the plugin answered UNIMPLEMENTED for {entry}")),
            "{name}: {}",
            c.detail
        );
        assert!(c.detail.contains(message), "{name}: {}", c.detail);
        assert!(!c.detail.contains("needs PJRT"), "{name}: {}", c.detail);
    }
}

fn a_plugin_that_cannot_compile_does_not_conform() {
    // Compile (and execute, and load) answer UNIMPLEMENTED. compile.diagnostics passed on
    // that refusal, every other check was unsupported, and the run vouched for a plugin
    // that cannot run a program.
    let r = conform(
        &fake_plugin(),
        "compile.*,execute.*,executable.*",
        &[(
            "RPJRT_FAKE_FAIL",
            "PJRT_Client_Compile:UNIMPLEMENTED:;PJRT_LoadedExecutable_Execute:UNIMPLEMENTED:;\
             PJRT_Executable_DeserializeAndLoad:UNIMPLEMENTED:",
        )],
    );
    for c in &r.results {
        assert_ne!(c.outcome, Outcome::Pass, "{}: {}", c.name, c.detail);
    }
    for name in [
        "compile.diagnostics",
        "compile.text",
        "execute.wrong_arguments",
    ] {
        let c = result(&r, name);
        assert_eq!(c.outcome, Outcome::Fail, "{name}: {}", c.detail);
        assert!(
            c.detail.starts_with(
                "PJRT_Client_Compile is required of every PJRT plugin, but the plugin \
                 answered UNIMPLEMENTED for PJRT_Client_Compile"
            ),
            "{name}: {}",
            c.detail
        );
    }
    assert!(r.has_defects());
    // Compile works but execute does not: the checks that run a program fail on it.
    let r = conform(
        &fake_plugin(),
        "compile.diagnostics,execute.single,execute.wrong_arguments",
        &[(
            "RPJRT_FAKE_FAIL",
            "PJRT_LoadedExecutable_Execute:UNIMPLEMENTED:no runs",
        )],
    );
    for name in ["execute.single", "execute.wrong_arguments"] {
        let c = result(&r, name);
        assert_eq!(c.outcome, Outcome::Fail, "{name}: {}", c.detail);
        assert!(
            c.detail
                .starts_with("PJRT_LoadedExecutable_Execute is required of every PJRT plugin"),
            "{name}: {}",
            c.detail
        );
    }
}

fn a_plugin_without_the_core_entries_does_not_conform() {
    // Every core operation answers UNIMPLEMENTED: 56 checks were unsupported, and the run
    // failed only because buffers.memory_kinds happened to.
    let r = conform(
        &fake_plugin(),
        "*",
        &[(
            "RPJRT_FAKE_FAIL",
            "PJRT_Client_Compile:UNIMPLEMENTED:;PJRT_Client_BufferFromHostBuffer:UNIMPLEMENTED:;\
             PJRT_LoadedExecutable_Execute:UNIMPLEMENTED:;PJRT_Buffer_ToHostBuffer:UNIMPLEMENTED:",
        )],
    );
    for name in [
        "buffers.scalar",
        "buffers.roundtrip.int4",
        "buffers.memory_kinds",
        "buffers.delete",
    ] {
        let c = result(&r, name);
        assert_eq!(c.outcome, Outcome::Fail, "{name}: {}", c.detail);
        assert!(
            c.detail
                .starts_with("PJRT_Client_BufferFromHostBuffer is required of every PJRT plugin"),
            "{name}: {}",
            c.detail
        );
        assert_eq!(
            c.facts["missing_required_entry"],
            "PJRT_Client_BufferFromHostBuffer"
        );
    }
    assert!(r.has_defects());
    // A check that needs none of them still passes.
    let c = result(&r, "devices.memory_stats");
    assert_eq!(c.outcome, Outcome::Pass, "{}", c.detail);
    // An empty slot for a required entry: api.null_entries names it, and the checks that
    // need it fail.
    let r = conform(
        &fake_plugin(),
        "api.null_entries,execute.single",
        &[("RPJRT_FAKE_NULL_SLOTS", "PJRT_LoadedExecutable_Execute")],
    );
    let nulls = result(&r, "api.null_entries");
    assert_eq!(nulls.outcome, Outcome::Fail, "{}", nulls.detail);
    assert_eq!(
        nulls.detail,
        "PJRT_LoadedExecutable_Execute is required of every PJRT plugin, but the plugin's \
         function table leaves it out"
    );
    let exec = result(&r, "execute.single");
    assert_eq!(exec.outcome, Outcome::Fail, "{}", exec.detail);
    assert!(
        exec.detail
            .contains("required of every PJRT plugin, but the plugin (PJRT 0.114) leaves its slot"),
        "{}",
        exec.detail
    );
    // The fake as it is has them all.
    let r = conform(&fake_plugin(), "api.null_entries", &[]);
    assert_eq!(result(&r, "api.null_entries").outcome, Outcome::Pass);
}

fn a_crash_is_isolated() {
    // Run order: api.version, buffers.zero_size, buffers.scalar.
    let r = conform(
        &fake_plugin(),
        "api.version,buffers.scalar,buffers.zero_size",
        &[(TEST_CRASH_ENV, "buffers.zero_size")],
    );
    let names: Vec<&str> = r.results.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["api.version", "buffers.zero_size", "buffers.scalar"]
    );
    let crash = result(&r, "buffers.zero_size");
    assert_eq!(crash.outcome, Outcome::Crash);
    assert!(crash.detail.contains("SIGABRT"), "{}", crash.detail);
    // A fresh child carried on after it.
    assert_eq!(result(&r, "buffers.scalar").outcome, Outcome::Pass);
    assert!(r.has_defects());
}

fn a_plugin_printing_protocol_lines_forges_nothing() {
    // A plugin that prints the child's protocol lines on stdout (the mark, then a result
    // or a start) while the client is created. Each forged result was taken as a check's
    // result: 9 checks gave a report of 209, 200 of them a check that does not exist,
    // and a forged result for client.create could stand for the real one.
    let mark = "\u{1e}rpjrt-conform ";
    let line = |v: serde_json::Value| format!("\n{mark}{v}\n");
    let forged = [
        line(serde_json::json!({"result": {"name": "zzz.forged", "group": "zzz", "outcome": "pass"}})),
        line(serde_json::json!({"result": {"name": CLIENT_CHECK, "group": "client",
                                           "outcome": "fail", "detail": "forged"}})),
        line(serde_json::json!({"start": "api.version"})),
    ]
    .concat()
    .repeat(50);
    let r = conform(
        &fake_plugin(),
        "api.*,client.*",
        &[
            ("RPJRT_FAKE_PRINT_ON", "PJRT_Client_Create"),
            ("RPJRT_FAKE_PRINT_TEXT", &forged),
        ],
    );
    let names: Vec<&str> = r.results.iter().map(|c| c.name.as_str()).collect();
    let want: Vec<String> = select(Some("api.*,client.*"))
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, want);
    let create = result(&r, CLIENT_CHECK);
    assert_eq!(create.outcome, Outcome::Pass, "{}", create.detail);
    assert!(!r.has_defects());
}

fn a_child_hanging_after_its_last_check_is_killed_and_noted() {
    // The client's destroy hangs: the child hangs in its teardown, after its last result.
    // The runner indexed the check list past its end (a panic, every result lost), and
    // waited at least 60 s whatever the limit per check.
    for only in ["devices.list", "api.version,devices.list"] {
        let started = std::time::Instant::now();
        let r = conform_within(
            &fake_plugin(),
            only,
            &[("RPJRT_FAKE_HANG_ON", "PJRT_Client_Destroy")],
            Duration::from_secs(3),
        );
        let waited = started.elapsed();
        let want: Vec<String> = select(Some(only)).into_iter().map(|c| c.name).collect();
        let names: Vec<&str> = r.results.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, want, "{only}");
        assert!(
            r.results.iter().all(|c| c.outcome == Outcome::Pass),
            "{:?}",
            r.results
        );
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
        assert!(
            r.notes[0].contains("did not exit") && r.notes[0].contains("killed"),
            "{}",
            r.notes[0]
        );
        assert!(waited < Duration::from_secs(30), "waited {waited:?}");
        // The note survives a round trip through the JSON report.
        assert_eq!(Report::from_json(&r.to_json()).unwrap().notes, r.notes);
    }
}

fn a_table_size_the_loader_clamped_fails_table_size() {
    // The loader clamps a PJRT_Api.struct_size past the plugin's version (safety) and the
    // check only saw the clamped size: it passed a 0.81 plugin claiming 0.114's table, and
    // a size that is not the header plus whole slots.
    let cases: [(&[(&str, &str)], &str); 3] = [
        (
            &[
                ("RPJRT_FAKE_VERSION", "0.81"),
                ("RPJRT_FAKE_API_STRUCT_SIZE", "1144"),
            ],
            "PJRT 0.81 has",
        ),
        (&[("RPJRT_FAKE_API_STRUCT_SIZE", "2001")], "not the"),
        (&[("RPJRT_FAKE_API_STRUCT_SIZE", "100000")], "but PJRT"),
    ];
    for (env, want) in cases {
        let r = conform(&fake_plugin(), "api.table_size", env);
        let c = result(&r, "api.table_size");
        assert_eq!(c.outcome, Outcome::Fail, "{env:?}: {}", c.detail);
        assert!(c.detail.contains(want), "{env:?}: {}", c.detail);
        let claimed = env
            .iter()
            .find(|(k, _)| k.ends_with("STRUCT_SIZE"))
            .unwrap()
            .1;
        assert_eq!(
            c.facts["claimed_table_size"].to_string(),
            claimed,
            "{env:?}"
        );
    }
    // An honest table passes, its claim the size used.
    let r = conform(&fake_plugin(), "api.table_size", &[]);
    let c = result(&r, "api.table_size");
    assert_eq!(c.outcome, Outcome::Pass, "{}", c.detail);
    assert_eq!(c.facts["claimed_table_size"], c.facts["table_size"]);
}

fn a_load_that_hangs_ends_at_the_load_timeout_naming_it() {
    // The runner waited a fixed minute for a load that hung (the load limit was not
    // passed on), then reported its own SIGKILL as if the plugin had crashed.
    for (entry, step) in [
        ("dlopen", "the system's library loader"),
        ("GetPjrtApi", "GetPjrtApi"),
    ] {
        let started = Instant::now();
        let e = conform_limited(
            &fake_plugin(),
            "api.version",
            &[("RPJRT_FAKE_HANG_ON", entry)],
            Duration::from_secs(60),
            Some(LoadTimeout {
                limit: Duration::from_secs(2),
                shown_as: "2.0s (the test's limit)".into(),
            }),
        )
        .expect_err("a load that never returns fails the run");
        let took = started.elapsed();
        let msg = e.to_string();
        assert!(
            took < Duration::from_secs(20),
            "{entry}: took {took:?}: {msg}"
        );
        assert!(
            msg.contains("did not return within 2.0s (the test's limit)"),
            "{entry}: {msg}"
        );
        assert!(msg.contains(&format!(", in {step}")), "{entry}: {msg}");
        assert!(!msg.contains("SIGKILL"), "{entry}: {msg}");
        // What the plugin wrote while it hung says where.
        assert!(msg.contains("hanging"), "{entry}: {msg}");
    }
}

fn a_load_within_its_timeout_runs_the_checks() {
    let r = conform_limited(
        &fake_plugin(),
        "api.version",
        &[],
        Duration::from_secs(60),
        Some(LoadTimeout {
            limit: Duration::from_secs(30),
            shown_as: "30.0s (the test's limit)".into(),
        }),
    )
    .expect("the run completes");
    let c = result(&r, "api.version");
    assert_eq!(c.outcome, Outcome::Pass, "{}", c.detail);
}
