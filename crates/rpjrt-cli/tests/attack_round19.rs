//! Round 19 of the CLI's attack tests: interrupting a supervised verb (its child and its
//! log directory), the `plugins` probe of a plugin that prints, `compile --json` under a
//! plugin that prints, `rendezvous --plugin` supervised, a coordinator name not in DNS
//! yet, the median of an even count, and a `launch` argument that is not UTF-8.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{
    alive, build_so, children_of, fake, fixture, ignored_signals, new, rpjrt, run, signal, tmpdir,
    wait_for,
};

/// A plugin whose `GetPjrtApi` ignores SIGTERM and SIGINT, then never returns.
const IGNORES_STOP: &str = "#include <signal.h>\n#include <unistd.h>\n\
const void* GetPjrtApi(void) { signal(SIGTERM, SIG_IGN); signal(SIGINT, SIG_IGN); \
for (;;) pause(); return 0; }\n";

/// The log directories of supervised verbs left in `dir`.
fn log_dirs(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".rpjrt-child-logs-"))
        .collect()
}

/// Starts `rpjrt info LIB` with its TMPDIR in `tmp`, and waits until its child is loading
/// the plugin: (the CLI, its child's pid).
fn start_stuck_info(lib: &Path, tmp: &Path) -> (std::process::Child, u32) {
    let mut cli = rpjrt()
        .arg("info")
        .arg(lib)
        .env("TMPDIR", tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = cli.id();
    let mut child = None;
    let lib_text = lib.to_string_lossy().into_owned();
    let loading = wait_for(Duration::from_secs(20), || {
        child = children_of(pid).into_iter().find(|c| {
            std::fs::read_to_string(format!("/proc/{c}/maps")).is_ok_and(|m| m.contains(&lib_text))
        });
        child.is_some()
    });
    if !loading {
        let _ = cli.kill();
        panic!("the child of `rpjrt info` never loaded {lib_text}");
    }
    // Into GetPjrtApi, past its signal() calls.
    std::thread::sleep(Duration::from_millis(300));
    (cli, child.unwrap())
}

/// SIGTERM, SIGHUP or SIGINT to the CLI alone while its child is stuck in a plugin that ignores
/// both: the CLI passes the signal on, kills the child after its grace, removes its log
/// directory and exits 128 + N. Before, the CLI died at once and left both behind.
#[test]
fn a_stopped_supervised_verb_kills_a_child_that_ignores_the_signal_and_leaves_no_logs() {
    let dir = tmpdir("r19-stop");
    let lib = build_so(&dir, "ignores_stop", IGNORES_STOP);
    // A signal this test process ignores (SIGINT under a shell's background job) is
    // ignored by the CLI too, as a shell's children should: only the others are sent.
    let ignored = ignored_signals();
    let signals: Vec<(&str, i32)> = [("TERM", 143), ("HUP", 129), ("INT", 130)]
        .into_iter()
        .filter(|&(_, code)| ignored & (1u64 << (code - 128 - 1)) == 0)
        .collect();
    assert!(signals.iter().any(|(s, _)| *s == "TERM"), "{ignored:#x}");
    for (sig, code) in signals {
        let tmp = dir.join(format!("tmp-{sig}"));
        std::fs::create_dir_all(&tmp).unwrap();
        let (mut cli, child) = start_stuck_info(&lib, &tmp);
        assert_eq!(log_dirs(&tmp).len(), 1, "{sig}");
        let t = Instant::now();
        signal(cli.id(), sig);
        let mut status = None;
        let ended = wait_for(Duration::from_secs(15), || {
            status = cli.try_wait().unwrap();
            status.is_some()
        });
        if !ended {
            let _ = cli.kill();
            signal(child, "KILL");
            panic!("SIG{sig}: the CLI did not end");
        }
        assert_eq!(status.unwrap().code(), Some(code), "SIG{sig}");
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "SIG{sig}: {:?}",
            t.elapsed()
        );
        let gone = wait_for(Duration::from_secs(2), || !alive(child));
        if !gone {
            signal(child, "KILL");
        }
        assert!(gone, "SIG{sig}: the child {child} runs on after the CLI");
        assert_eq!(log_dirs(&tmp), Vec::<String>::new(), "SIG{sig}");
    }
}

/// A CLI killed outright (SIGKILL: no handler runs) still takes its child with it: the
/// child's parent-death signal is SIGKILL, which a plugin cannot ignore.
#[test]
fn a_killed_cli_takes_its_child_with_it() {
    let dir = tmpdir("r19-kill");
    let lib = build_so(&dir, "ignores_stop", IGNORES_STOP);
    let (mut cli, child) = start_stuck_info(&lib, &dir);
    signal(cli.id(), "KILL");
    let _ = cli.wait();
    let gone = wait_for(Duration::from_secs(3), || !alive(child));
    if !gone {
        signal(child, "KILL");
    }
    assert!(gone, "the child {child} runs on after its CLI was killed");
}

/// A working plugin that prints at load (a banner its C library flushes at exit, or a
/// line on stdout with RPJRT_PLUGIN_LOG=1) is listed with its version, not as crashed by
/// SIGPIPE; a line `version 9.99` it prints is not taken for the answer.
#[test]
fn plugins_reads_the_version_of_a_plugin_that_prints() {
    let dir = tmpdir("r19-chatty");
    let lib = build_so(
        &dir,
        "chatty",
        "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <dlfcn.h>\n\
         __attribute__((constructor)) static void init(void) {\n\
           static char b[100000]; memset(b, '=', sizeof b - 1);\n\
           printf(\"version 9.99\\n\"); fflush(stdout);\n\
           printf(\"banner %s\\n\", b);\n}\n\
         const void* GetPjrtApi(void) {\n\
           void* h = dlopen(getenv(\"REAL_PLUGIN\"), RTLD_NOW | RTLD_LOCAL);\n\
           const void* (*g)(void) = h ? (const void*(*)(void))dlsym(h, \"GetPjrtApi\") : 0;\n\
           return g ? g() : 0;\n}\n",
    );
    for log in ["0", "1"] {
        for _ in 0..3 {
            let (code, out, err) = run(rpjrt()
                .args(["plugins", "--json"])
                .env(
                    "PJRT_NAMES_AND_LIBRARY_PATHS",
                    format!("chatty:{}", lib.display()),
                )
                .env("REAL_PLUGIN", new())
                .env("RPJRT_PLUGIN_LOG", log));
            assert_eq!(code, 0, "{out}{err}");
            let v: serde_json::Value =
                serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
            let row = v["plugins"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["name"] == "chatty")
                .unwrap_or_else(|| panic!("{v}"))
                .clone();
            assert_eq!(row["pjrt_version"], "0.115", "log={log}: {row}");
            assert!(row.get("problem").is_none(), "log={log}: {row}");
        }
    }
}

/// `compile --json` prints JSON even when the plugin writes on stdout while compiling
/// (XLA's own `--xla_dump_to=-`), as `run --json` does.
#[test]
fn compile_json_stays_json_when_the_plugin_prints_while_compiling() {
    let dir = tmpdir("r19-compile-json");
    let out_file = dir.join("m.rpjrt");
    let (code, out, err) = run(rpjrt()
        .arg("compile")
        .arg(fixture("mul_add.mlir"))
        .arg("-o")
        .arg(&out_file)
        .arg("--plugin")
        .arg(new())
        .arg("--json")
        .env("XLA_FLAGS", "--xla_dump_to=-"));
    assert_eq!(code, 0, "{err}");
    serde_json::from_str::<serde_json::Value>(&out)
        .unwrap_or_else(|e| panic!("{e}: {}", &out[..out.len().min(500)]));
    assert!(err.contains("HloModule"), "the dump went to stderr: {err}");
}

/// `rendezvous --plugin` loads the plugin in a supervised child: a plugin that calls
/// exit(0) or crashes while loading is a failure said so (exit 1), never a silent
/// success or the CLI's own crash.
#[test]
fn rendezvous_with_a_plugin_that_exits_or_crashes_fails_clearly() {
    for (knob, says) in [
        ("RPJRT_FAKE_EXIT_ON", "before it finished"),
        ("RPJRT_FAKE_CRASH_ON", "SIGSEGV"),
    ] {
        let (code, out, err) = run(rpjrt()
            .args([
                "rendezvous",
                "--process-id",
                "0",
                "--num-processes",
                "1",
                "--coordinator",
                "127.0.0.1:0",
                "--timeout",
                "20",
                "--plugin",
            ])
            .arg(fake())
            .env(knob, "GetPjrtApi"));
        assert_eq!(code, 1, "{knob}\nstdout: {out}\nstderr: {err}");
        assert!(err.contains("`rpjrt rendezvous`"), "{knob}: {err}");
        assert!(err.contains(says), "{knob}: {err}");
        assert!(!out.contains("rendezvous ok"), "{knob}: {out}");
    }
    // A working plugin still meets.
    let (code, out, err) = run(rpjrt()
        .args([
            "rendezvous",
            "--process-id",
            "0",
            "--num-processes",
            "1",
            "--coordinator",
            "127.0.0.1:0",
            "--timeout",
            "20",
            "--plugin",
        ])
        .arg(new()));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("rendezvous ok"), "{out}");
}

/// A coordinator whose name does not resolve (yet) is retried until --timeout, as an
/// unreachable address is, and the error names it (exit 1, not a usage error at once).
#[test]
fn a_coordinator_name_that_does_not_resolve_is_retried_until_the_timeout() {
    let t = Instant::now();
    let (code, out, err) = run(rpjrt().args([
        "rendezvous",
        "--process-id",
        "1",
        "--num-processes",
        "2",
        "--coordinator",
        "pod-0.not-yet-in-dns.invalid:5000",
        "--timeout",
        "1.5",
    ]));
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        t.elapsed() >= Duration::from_millis(1400),
        "{:?}",
        t.elapsed()
    );
    assert!(err.contains("pod-0.not-yet-in-dns.invalid"), "{err}");
    assert!(err.contains("did not resolve within"), "{err}");
    // An address that cannot be one is still refused at once.
    let (code, _, err) = run(rpjrt().args([
        "rendezvous",
        "--process-id",
        "1",
        "--num-processes",
        "2",
        "--coordinator",
        "no-port-here",
        "--timeout",
        "30",
    ]));
    assert_eq!(code, 2, "{err}");
}

/// The median of an even count of samples is the mean of the middle two.
#[test]
fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
    use rpjrt_cli::cmd::run::median;
    assert_eq!(median(&[1.0, 3.0]), 2.0);
    assert_eq!(median(&[1.0, 2.0, 4.0, 10.0]), 3.0);
    assert_eq!(median(&[1.0, 2.0, 7.0]), 2.0);
    assert_eq!(median(&[5.0]), 5.0);
}

/// `launch` runs a command whose arguments are not UTF-8 (as file names need not be).
#[test]
fn launch_passes_an_argument_that_is_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let arg = std::ffi::OsStr::from_bytes(b"caf\xe9");
    let out = rpjrt()
        .args(["launch", "-n", "1", "--", "printf", "%s\\n"])
        .arg(arg)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"[0] caf\xe9\n");
}

/// A log directory that a CLI killed outright left behind (SIGKILL runs no cleanup) is
/// removed by a later supervised verb once it is old and its process is gone; a young one,
/// or one of a process that still runs, is left alone.
#[test]
fn log_directories_of_killed_runs_are_removed_later() {
    let dir = tmpdir("r19-orphan-logs");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut done = Command::new("true").spawn().unwrap();
    let dead = done.id();
    done.wait().unwrap();
    let old_dead = tmp.join(format!(".rpjrt-child-logs-{dead}-1"));
    let young_dead = tmp.join(format!(".rpjrt-child-logs-{dead}-2"));
    let old_alive = tmp.join(format!(".rpjrt-child-logs-{}-3", std::process::id()));
    for d in [&old_dead, &young_dead, &old_alive] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("capture"), b"log").unwrap();
    }
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    for d in [&old_dead, &old_alive] {
        std::fs::File::open(d)
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
    }
    let (code, _, err) = run(rpjrt().arg("info").arg(new()).env("TMPDIR", &tmp));
    assert_eq!(code, 0, "{err}");
    assert!(
        !old_dead.exists(),
        "an old directory of a dead process stays"
    );
    assert!(young_dead.exists() && old_alive.exists());
    let mut left = log_dirs(&tmp);
    left.sort();
    assert_eq!(left.len(), 2, "{left:?}");
}
