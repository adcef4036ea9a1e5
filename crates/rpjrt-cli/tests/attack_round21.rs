//! Round 21 of the CLI's attack tests: `conform` writes its report (with `load_error`)
//! for a plugin that cannot be loaded, and pages and matrices show it; `run --trace`
//! writes its trace when the run is stopped by a signal or given up on; an output that
//! cannot be written after the work is exit 1 in one message form, and what can be known
//! before the work (a dangling link, `/proc`) is refused before it; a stale `VIRTUAL_ENV`
//! does not turn the Python query off; `launch` passes the user's environment, not the
//! CLI's settings; `run -i` tells files from literals (any-case suffixes, files with `=`
//! in their names, FIFOs and unknown files named); small messages (the slow-load note
//! with a limit, compile's create options, `--help` into a full device, `--format
//! executable` on a program, conform's timeouts, `RPJRT_CLI_SUPERVISED`); and saved
//! reports that break the schema (a check twice, wrong types) are refused naming the
//! field.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{children_of, fake, ignored_signals, new, rpjrt, run, tmpdir};

/// A program adding its one argument to itself, f32[N], written into `dir`.
fn add_program(dir: &Path, n: usize) -> PathBuf {
    let p = dir.join(format!("add{n}.mlir"));
    std::fs::write(
        &p,
        format!(
            "func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{\n  \
             %0 = stablehlo.add %x, %x : tensor<{n}xf32>\n  return %0 : tensor<{n}xf32>\n}}\n"
        ),
    )
    .unwrap();
    p
}

/// A program with two outputs.
fn two_outputs(dir: &Path) -> PathBuf {
    let p = dir.join("two.mlir");
    std::fs::write(
        &p,
        "func.func @main(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {\n  \
         %0 = stablehlo.add %x, %x : tensor<3xf32>\n  return %0, %x : tensor<3xf32>, \
         tensor<3xf32>\n}\n",
    )
    .unwrap();
    p
}

/// A `.npy` file of float32 `[0, 1, 2]` at `path`.
fn npy3(path: &Path) {
    let a = rpjrt_npy::literal::parse_literal("[0, 1, 2]:f32", None).unwrap();
    rpjrt_npy::save_npy(path, &a).unwrap();
}

fn json_of(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn read_json(p: &Path) -> serde_json::Value {
    json_of(&std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

/// A saved report of the fake plugin (`api.*` checks), the good side of comparisons.
fn good_report(dir: &Path) -> PathBuf {
    let p = dir.join("good.json");
    let (code, out, err) = run(rpjrt()
        .arg("conform")
        .arg(fake())
        .args(["--only", "api.*", "--json"])
        .arg(&p));
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    p
}

// ---- 2: conform writes a report when the plugin cannot be loaded -----------------------

/// Every way a plugin can fail to load still gives a report, with `plugin.load_error`,
/// in a file and on stdout; the run fails (exit 1). The report was never written.
#[test]
fn conform_writes_a_report_with_load_error_whatever_stops_the_load() {
    let d = tmpdir("r21-load-error");
    let not_elf = d.join("notelf.so");
    std::fs::write(&not_elf, b"not a library").unwrap();
    let missing = d.join("missing.so");
    /// What fails, the plugin, its environment and the options before the verb.
    type Case<'a> = (&'a str, PathBuf, Vec<(&'a str, &'a str)>, Vec<&'a str>);
    let cases: Vec<Case<'_>> = vec![
        (
            "PJRT 0.56",
            fake(),
            vec![("RPJRT_FAKE_VERSION", "0.56")],
            vec![],
        ),
        ("not an ELF file", not_elf.clone(), vec![], vec![]),
        ("missing file", missing.clone(), vec![], vec![]),
        (
            "crash while loading",
            fake(),
            vec![("RPJRT_FAKE_CRASH_ON", "GetPjrtApi")],
            vec![],
        ),
        (
            "--plugin-timeout while loading",
            fake(),
            vec![("RPJRT_FAKE_HANG_ON", "GetPjrtApi")],
            vec!["--plugin-timeout", "0.3"],
        ),
    ];
    for (what, plugin, env, pre) in cases {
        let json = d.join("r.json");
        let html = d.join("r.html");
        let _ = std::fs::remove_file(&json);
        let _ = std::fs::remove_file(&html);
        let mut c = rpjrt();
        c.args(&pre)
            .arg("conform")
            .arg(&plugin)
            .arg("--json")
            .arg(&json);
        c.arg("--html").arg(&html);
        for (k, v) in &env {
            c.env(k, v);
        }
        let (code, out, err) = run(&mut c);
        assert_eq!(code, 1, "{what}: stdout: {out}\nstderr: {err}");
        let r = read_json(&json);
        assert_eq!(r["schema"], "rpjrt-conform", "{what}");
        let e = r["plugin"]["load_error"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: {r}"));
        assert!(!e.is_empty(), "{what}");
        assert_eq!(r["plugin"]["path"], plugin.display().to_string(), "{what}");
        assert_eq!(r["results"].as_array().map(Vec::len), Some(0), "{what}");
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(page.contains("could not be loaded"), "{what}: {page}");
        // The same on stdout with `--json -`.
        let mut c = rpjrt();
        c.args(&pre)
            .arg("conform")
            .arg(&plugin)
            .args(["--json", "-"]);
        for (k, v) in &env {
            c.env(k, v);
        }
        let (code, out, err) = run(&mut c);
        assert_eq!(code, 1, "{what}: {err}");
        let r = json_of(&out);
        assert!(r["plugin"]["load_error"].is_string(), "{what}: {r}");
        // A report of it reads back: a page, and a column of a matrix.
        let (code, page, err) = run(rpjrt().args(["conform", "--html", "-"]).arg(&json));
        assert_eq!(code, 0, "{what}: {err}");
        assert!(page.contains("data-load-error"), "{what}");
    }
}

/// A plugin name that matches nothing is a usage error as before (exit 2), and its report
/// is written too, naming what was asked for.
#[test]
fn conform_of_a_name_that_matches_nothing_writes_its_report_too() {
    let d = tmpdir("r21-no-match");
    let json = d.join("r.json");
    let (code, _, err) = run(rpjrt()
        .args(["conform", "no-such-plugin-r21", "--json"])
        .arg(&json));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no PJRT plugin matching"), "{err}");
    let r = read_json(&json);
    assert_eq!(r["plugin"]["path"], "no-such-plugin-r21");
    assert!(r["plugin"]["load_error"]
        .as_str()
        .is_some_and(|e| e.contains("no PJRT plugin matching")));
}

/// The matrix of a plugin that loads and one that does not keeps both columns: the one
/// that did not load shows its checks as not run and its load error under Plugins, and
/// every row differs.
#[test]
fn a_matrix_keeps_the_column_of_a_plugin_that_did_not_load() {
    let d = tmpdir("r21-matrix");
    let good = good_report(&d);
    let bad = d.join("bad.json");
    let (code, _, err) = run(rpjrt()
        .arg("conform")
        .arg(fake())
        .args(["--only", "api.*", "--json"])
        .arg(&bad)
        .env("RPJRT_FAKE_VERSION", "0.56"));
    assert_eq!(code, 1, "{err}");
    let (code, page, err) = run(rpjrt()
        .args(["conform", "--html", "-"])
        .arg(&good)
        .arg(&bad));
    assert_eq!(code, 0, "{err}");
    assert!(page.contains("load error"), "{page}");
    assert!(page.contains("PJRT 0.56"), "the load error is shown");
    assert!(page.contains("not run: the plugin could not be loaded"));
    assert!(page.contains("<tr class=\"diff\" data-check=\"api.version\""));
    // --diff names the load error and every check as missing on that side.
    let (code, out, err) = run(rpjrt().args(["conform", "--diff"]).arg(&good).arg(&bad));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("plugin.load_error"), "{out}");
}

// ---- 3: run --trace writes its trace when stopped -------------------------------------

/// Starts `rpjrt run` with `--trace` on the fake plugin hanging in its compile, waits
/// until it says it hangs there, sends `sig` (to the process group with `group`), and
/// returns the exit code and the trace written.
fn interrupted_trace(sig: &str, group: bool, supervised: bool) -> (i32, serde_json::Value) {
    let (code, trace, _) = interrupted_trace_of(sig, Target::of(group), supervised);
    (code, trace)
}

/// Where [`interrupted_trace_of`] sends its signal.
#[derive(Clone, Copy, PartialEq)]
enum Target {
    /// The CLI.
    Cli,
    /// The CLI's process group (Ctrl-C).
    Group,
    /// The supervised child alone (a signal from outside, not passed on by the CLI).
    Child,
}

impl Target {
    fn of(group: bool) -> Target {
        if group {
            Target::Group
        } else {
            Target::Cli
        }
    }
}

/// [`interrupted_trace`], sending the signal to `target`; also returns the CLI's stderr.
fn interrupted_trace_of(
    sig: &str,
    target: Target,
    supervised: bool,
) -> (i32, serde_json::Value, String) {
    let group = target == Target::Group;
    let d = tmpdir(&format!("r21-trace-{sig}-{group}-{supervised}"));
    let prog = add_program(&d, 3);
    let trace = d.join("t.json");
    let mut c = rpjrt();
    c.arg("run")
        .arg(&prog)
        .args(["-i", "0=[1,2,3]:f32", "--plugin"])
        .arg(fake())
        .arg("--trace")
        .arg(&trace)
        .env("RPJRT_FAKE_HANG_ON", "PJRT_Client_Compile")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    if !supervised {
        c.env("RPJRT_CLI_SUPERVISED", "1");
    }
    let mut child = c.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("PJRT_Client_Compile: hanging") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the fake plugin hangs in its compile");
    let target = match target {
        Target::Group => format!("-{}", child.id()),
        Target::Cli => child.id().to_string(),
        Target::Child => {
            let kids = children_of(child.id());
            assert_eq!(kids.len(), 1, "one supervised child: {kids:?}");
            kids[0].to_string()
        }
    };
    // bash's kill takes a process group as `-PGID` after `--` (dash's does not).
    let killed = Command::new("bash")
        .arg("-c")
        .arg(format!("kill -{sig} -- {target}"))
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "rpjrt run did not end after {sig}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let code = status.code().unwrap_or(-1);
    let err = reader.join().unwrap_or_default();
    (code, read_json(&trace), err)
}

/// Ctrl-C (SIGINT to the group), SIGTERM and SIGHUP to the CLI: the trace is written,
/// saying how the run ended, and the command ends as the signal asks (128 + N). Nothing
/// was written.
#[test]
fn a_stopped_run_writes_its_trace() {
    // SIGINT only where this process does not ignore it (under a shell's background job
    // it does, and so does the CLI then, as a shell's child should).
    let int_ignored = ignored_signals() & (1 << (2 - 1)) != 0;
    let cases = [("INT", 2, true), ("TERM", 15, false), ("HUP", 1, false)];
    for (sig, n, group) in cases.into_iter().filter(|c| !(int_ignored && c.0 == "INT")) {
        let (code, t) = interrupted_trace(sig, group, true);
        assert_eq!(code, 128 + n, "SIG{sig}");
        let outcome = t["otherData"]["outcome"].as_str().unwrap_or_default();
        assert_eq!(outcome, format!("interrupted (SIG{sig})"), "{t}");
        assert!(t["traceEvents"].as_array().is_some_and(|e| !e.is_empty()));
    }
    // Without a supervising parent (RPJRT_CLI_SUPERVISED=1): the same.
    let (code, t) = interrupted_trace("TERM", false, false);
    assert_eq!(code, 143);
    assert_eq!(t["otherData"]["outcome"], "interrupted (SIGTERM)");
    // SIGTERM to the supervised child alone, from outside: the trace is written, and the
    // CLI says the signal ended it (not that something in the process called exit()).
    let (code, t, err) = interrupted_trace_of("TERM", Target::Child, true);
    assert_eq!(code, 143, "{err}");
    assert_eq!(t["otherData"]["outcome"], "interrupted (SIGTERM)");
    assert!(
        err.contains("was ended by signal 15 from outside rpjrt"),
        "{err}"
    );
    assert!(!err.contains("called exit()"), "{err}");
}

/// `--plugin-timeout` giving up on a plugin's load writes the trace too (the command ends
/// at once, from the watching thread).
#[test]
fn a_plugin_timeout_writes_the_trace() {
    let d = tmpdir("r21-trace-timeout");
    let prog = add_program(&d, 3);
    let trace = d.join("t.json");
    let (code, _, err) = run(rpjrt()
        .args(["--plugin-timeout", "0.3", "run"])
        .arg(&prog)
        .args(["-i", "0=[1,2,3]:f32", "--plugin"])
        .arg(fake())
        .arg("--trace")
        .arg(&trace)
        .env("RPJRT_FAKE_HANG_ON", "GetPjrtApi"));
    assert_eq!(code, 1, "{err}");
    let t = read_json(&trace);
    let outcome = t["otherData"]["outcome"].as_str().unwrap_or_default();
    assert!(outcome.starts_with("failed (exit code 1)"), "{outcome}");
    assert!(outcome.contains("did not return within"), "{outcome}");
}

// ---- 4: outputs that cannot be written ------------------------------------------------

/// Runs `args` under a file size limit of 512 bytes (SIGXFSZ ignored, so a longer write
/// fails with EFBIG instead of killing the process): every output is larger, so its write
/// fails after the work, where the pre-check cannot see it.
fn with_small_file_limit(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let c = rpjrt();
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg("trap '' XFSZ; ulimit -f 1; exec \"$0\" \"$@\"")
        .arg(c.get_program())
        .args(args);
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    run(&mut sh)
}

/// Every output written after the work is done, failing then (a file too large here, a
/// full disk in life), exits 1 with `OPTION PATH: cannot write it: REASON`; it was a usage
/// error (exit 2), and `run --out` said "invalid argument:".
#[test]
fn an_output_that_fails_after_the_work_is_exit_1_in_one_form() {
    let d = tmpdir("r21-write-fails");
    let big = add_program(&d, 512);
    let prog = add_program(&d, 3);
    let plugin = new();
    let trace_in = d.join("in.json");
    let (code, _, err) = run(rpjrt()
        .arg("run")
        .arg(&prog)
        .args(["--random", "--plugin"])
        .arg(&plugin)
        .arg("--trace")
        .arg(&trace_in));
    assert_eq!(code, 0, "{err}");
    let good = good_report(&d);
    // A report of a plugin that did not load: its differences with `good` are many.
    let other = d.join("other.json");
    let (code, _, err) = run(rpjrt()
        .arg("conform")
        .arg(fake())
        .args(["--only", "api.*", "--json"])
        .arg(&other)
        .env("RPJRT_FAKE_VERSION", "0.56"));
    assert_eq!(code, 1, "{err}");
    let os = |s: &str| std::ffi::OsString::from(s);
    let p = |x: &Path| x.as_os_str().to_owned();
    let cases: Vec<(&str, Vec<std::ffi::OsString>)> = vec![
        (
            "--output",
            vec![
                os("compile"),
                p(&big),
                os("--plugin"),
                p(&plugin),
                os("-o"),
                p(&d.join("a.rpjrt")),
            ],
        ),
        (
            "--out",
            vec![
                os("run"),
                p(&big),
                os("--random"),
                os("--plugin"),
                p(&plugin),
                os("--out"),
                p(&d.join("o.npz")),
            ],
        ),
        (
            "--out",
            vec![
                os("run"),
                p(&big),
                os("--random"),
                os("--plugin"),
                p(&plugin),
                os("--out"),
                p(&d.join("o.npy")),
            ],
        ),
        (
            "--trace",
            vec![
                os("run"),
                p(&prog),
                os("--random"),
                os("--plugin"),
                p(&plugin),
                os("--trace"),
                p(&d.join("t.json")),
            ],
        ),
        (
            "--json",
            vec![
                os("conform"),
                p(&fake()),
                os("--only"),
                os("api.*"),
                os("--json"),
                p(&d.join("r.json")),
            ],
        ),
        (
            "--html",
            vec![os("conform"), os("--html"), p(&d.join("r.html")), p(&good)],
        ),
        (
            "--json",
            vec![
                os("conform"),
                os("--diff"),
                p(&good),
                p(&other),
                os("--json"),
                p(&d.join("d.json")),
            ],
        ),
        (
            "--output",
            vec![
                os("trace"),
                os("view"),
                p(&trace_in),
                os("-o"),
                p(&d.join("t.html")),
            ],
        ),
    ];
    for (option, args) in cases {
        let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let (code, out, err) = with_small_file_limit(&refs);
        assert_eq!(code, 1, "{args:?}\nstdout: {out}\nstderr: {err}");
        assert!(
            err.contains(&format!("rpjrt: {option} ")) && err.contains(": cannot write it: "),
            "{args:?}: {err}"
        );
        assert!(!err.contains("invalid argument"), "{args:?}: {err}");
    }
}

/// What can be known before the work is refused before it (exit 2, nothing loaded): a
/// dangling symbolic link whose target's directory does not exist, and a directory where
/// no file can be created (`/proc/self`), for every output option of every verb. The
/// plugin hangs if it is ever loaded.
#[test]
fn outputs_that_cannot_be_created_are_refused_before_the_work() {
    let d = tmpdir("r21-precheck");
    let prog = add_program(&d, 3);
    let good = good_report(&d);
    let trace_in = d.join("in.json");
    std::fs::write(&trace_in, r#"{"traceEvents": []}"#).unwrap();
    let dangling = d.join("dangling");
    std::os::unix::fs::symlink("/nonexistent-r21/dir/x", &dangling).unwrap();
    std::os::unix::fs::symlink("/nonexistent-r21/dir/x.npz", d.join("dangling.npz")).unwrap();
    let fake = fake();
    for bad in [dangling.clone(), PathBuf::from("/proc/self/r21-out")] {
        let with = |ext: &str| PathBuf::from(format!("{}{ext}", bad.display()));
        let cases: Vec<(&str, Vec<std::ffi::OsString>)> = vec![
            (
                "--output",
                vec![
                    "compile".into(),
                    prog.clone().into(),
                    "--plugin".into(),
                    fake.clone().into(),
                    "-o".into(),
                    bad.clone().into(),
                ],
            ),
            (
                "--out",
                vec![
                    "run".into(),
                    prog.clone().into(),
                    "--plugin".into(),
                    fake.clone().into(),
                    "--out".into(),
                    with(".npz").into(),
                ],
            ),
            (
                "--trace",
                vec![
                    "run".into(),
                    prog.clone().into(),
                    "--plugin".into(),
                    fake.clone().into(),
                    "--trace".into(),
                    bad.clone().into(),
                ],
            ),
            (
                "--json",
                vec![
                    "conform".into(),
                    fake.clone().into(),
                    "--json".into(),
                    bad.clone().into(),
                ],
            ),
            (
                "--html",
                vec![
                    "conform".into(),
                    fake.clone().into(),
                    "--html".into(),
                    bad.clone().into(),
                ],
            ),
            (
                "--html",
                vec![
                    "conform".into(),
                    "--html".into(),
                    bad.clone().into(),
                    good.clone().into(),
                ],
            ),
            (
                "--json",
                vec![
                    "conform".into(),
                    "--diff".into(),
                    good.clone().into(),
                    good.clone().into(),
                    "--json".into(),
                    bad.clone().into(),
                ],
            ),
            (
                "--output",
                vec![
                    "trace".into(),
                    "view".into(),
                    trace_in.clone().into(),
                    "-o".into(),
                    bad.clone().into(),
                ],
            ),
        ];
        for (option, args) in cases {
            let t = Instant::now();
            // Were the plugin loaded, it would hang until --plugin-timeout gives up (exit 1).
            let (code, out, err) = run(rpjrt()
                .args(["--plugin-timeout", "3"])
                .args(&args)
                .env("RPJRT_FAKE_HANG_ON", "GetPjrtApi"));
            assert_eq!(code, 2, "{args:?}\nstdout: {out}\nstderr: {err}");
            assert!(
                err.contains(&format!("rpjrt: {option} ")),
                "{args:?}: {err}"
            );
            assert!(
                err.contains("does not exist") || err.contains("cannot be created"),
                "{args:?}: {err}"
            );
            assert!(
                t.elapsed() < Duration::from_secs(3),
                "{args:?}: checked first"
            );
        }
    }
}

/// `run --out x.npy` for a program with two outputs is refused before it runs, and the
/// suffix is read in any case.
#[test]
fn out_npy_for_several_outputs_is_refused_before_the_run_and_suffixes_any_case() {
    let d = tmpdir("r21-out-npy");
    let prog = two_outputs(&d);
    let (code, _, err) = run(rpjrt()
        .arg("run")
        .arg(&prog)
        .args(["--random", "--plugin"])
        .arg(new())
        .arg("--out")
        .arg(d.join("o.npy")));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("save them as .npz"), "{err}");
    assert!(!err.contains("out0:"), "refused before running");
    let out = d.join("O.NPZ");
    let (code, _, err) = run(rpjrt()
        .arg("run")
        .arg(&prog)
        .args(["--random", "--plugin"])
        .arg(new())
        .arg("--out")
        .arg(&out));
    assert_eq!(code, 0, "{err}");
    assert!(out.exists());
}

// ---- 5: discovery with a stale VIRTUAL_ENV ---------------------------------------------

/// A stand-in Python interpreter answering the site query with `site`.
fn fake_python(dir: &Path, site: &Path) -> PathBuf {
    let p = dir.join("python-r21");
    std::fs::write(&p, format!("#!/bin/sh\necho '{}'\n", site.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// An explicit RPJRT_PYTHON is always asked, a VIRTUAL_ENV naming no environment does not
/// turn the query off, and the search list says why it is empty without asking to set a
/// variable that is set. RPJRT_PYTHON was ignored once VIRTUAL_ENV was set at all.
#[test]
fn a_stale_virtual_env_never_turns_the_python_query_off() {
    let d = tmpdir("r21-stale-venv");
    let site = d.join("site");
    let ns = site.join("jax_plugins").join("r21fake");
    std::fs::create_dir_all(&ns).unwrap();
    std::fs::write(ns.join("__init__.py"), "").unwrap();
    std::fs::copy(fake(), ns.join("pjrt_plugin_r21fake.so")).unwrap();
    let python = fake_python(&d, &site);
    let gone = d.join("gone-venv");
    for venv in [None, Some(gone.as_path())] {
        let mut c = rpjrt();
        c.args(["plugins", "--json"]).env("RPJRT_PYTHON", &python);
        if let Some(v) = venv {
            c.env("VIRTUAL_ENV", v);
        }
        let (code, out, err) = run(&mut c);
        assert_eq!(code, 0, "{venv:?}: {err}");
        assert!(out.contains("r21fake"), "{venv:?}: {out}");
    }
    // With nothing to search, the list says why, source by source.
    let (_, out, err) = run(rpjrt()
        .args(["info"])
        .env("VIRTUAL_ENV", &gone)
        .env("RPJRT_PYTHON", ""));
    let text = format!("{out}{err}");
    assert!(
        text.contains(&format!(
            "VIRTUAL_ENV={} has no lib/python*/site-packages",
            gone.display()
        )),
        "{text}"
    );
    assert!(text.contains("RPJRT_PYTHON is set empty"), "{text}");
    assert!(
        !text.contains("set RPJRT_PLUGIN_PATH or VIRTUAL_ENV)"),
        "{text}"
    );
}

// ---- 6: launch passes the user's environment -------------------------------------------

/// The job's processes get what the user set, not the CLI's settings: the log level the
/// CLI sets for itself, the Python front end's RPJRT_CLI_SELF and search path (recorded in
/// RPJRT_CLI_ADDED_ENV) are removed or put back; what the user set is passed on.
#[test]
fn launch_passes_the_users_environment_not_the_clis_settings() {
    let env_of = |c: &mut Command| -> Vec<String> {
        let (code, out, err) = run(c);
        assert_eq!(code, 0, "{err}");
        out.lines()
            .map(|l| l.trim_start_matches("[0] ").to_string())
            .collect()
    };
    let lines = env_of(rpjrt().args(["launch", "-n", "1", "--", "env"]));
    assert!(
        !lines.iter().any(|l| l.starts_with("TF_CPP_MIN_LOG_LEVEL=")),
        "{lines:?}"
    );
    assert!(lines.iter().any(|l| l.starts_with("RPJRT_PROCESS_ID=0")));
    // What the Python front end sets, with the user's own values recorded.
    let user_path = "/user/plugins";
    let hex: String = user_path.bytes().map(|b| format!("{b:02x}")).collect();
    let lines = env_of(
        rpjrt()
            .args(["launch", "-n", "1", "--", "env"])
            .env("TF_CPP_MIN_LOG_LEVEL", "1")
            .env("RPJRT_CLI_SUPERVISED", "1")
            .env("RPJRT_CLI_SELF", r#"["/usr/bin/python3", "-m", "rpjrt"]"#)
            .env("RPJRT_PLUGIN_PATH", "/user/plugins:/tmp:/site")
            .env(
                "RPJRT_CLI_ADDED_ENV",
                format!(r#"{{"RPJRT_PLUGIN_PATH": "{hex}", "RPJRT_CLI_SELF": null}}"#),
            ),
    );
    assert!(
        lines.contains(&"TF_CPP_MIN_LOG_LEVEL=1".to_string()),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"RPJRT_CLI_SUPERVISED=1".to_string()),
        "{lines:?}"
    );
    assert!(
        lines.contains(&format!("RPJRT_PLUGIN_PATH={user_path}")),
        "{lines:?}"
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("RPJRT_CLI_SELF=") || l.starts_with("RPJRT_CLI_ADDED_ENV=")),
        "{lines:?}"
    );
}

// ---- 7: run -i: files and literals -----------------------------------------------------

/// Runs `add3.mlir` on the CPU plugin with `-i input` in `dir`: (code, stdout, stderr).
fn run_input(dir: &Path, input: &std::ffi::OsStr) -> (i32, String, String) {
    let prog = add_program(dir, 3);
    run(rpjrt()
        .current_dir(dir)
        .arg("run")
        .arg(&prog)
        .arg("--plugin")
        .arg(new())
        .arg("-i")
        .arg(input))
}

/// Suffixes in any case, a `.npy` under another name, a path with `=` in it (no key, or
/// after a key): all read as files. A FIFO, an unknown file and a value that is neither a
/// literal nor a file say what they are. They were all "is not a number".
#[test]
fn run_inputs_tell_files_from_literals() {
    let d = tmpdir("r21-inputs");
    let files = d.join("f");
    std::fs::create_dir_all(&files).unwrap();
    for name in ["X.NPY", "x.bin", "a=b.npy", "c=d.Npy"] {
        npy3(&files.join(name));
    }
    let upper_npz = files.join("Z.Npz");
    let a = rpjrt_npy::literal::parse_literal("[0, 1, 2]:f32", None).unwrap();
    rpjrt_npy::save_npz(&upper_npz, &[("arr_0".to_string(), a)]).unwrap();
    let ok = |s: std::ffi::OsString| {
        let (code, out, err) = run_input(&d, &s);
        assert_eq!(code, 0, "{s:?}: {err}");
        assert!(
            out.contains("array([0., 2., 4.], dtype=float32)"),
            "{s:?}: {out}"
        );
    };
    let at = |n: &str| files.join(n).into_os_string();
    let keyed = |n: &str| {
        let mut s = std::ffi::OsString::from("0=");
        s.push(files.join(n));
        s
    };
    ok(keyed("X.NPY"));
    ok(at("X.NPY"));
    ok(at("x.bin"));
    ok(keyed("x.bin"));
    ok(at("a=b.npy"));
    ok(keyed("a=b.npy"));
    ok(at("c=d.Npy"));
    ok(at("Z.Npz"));
    ok("f/x.bin".into());
    // A FIFO is named as one, never opened.
    let fifo = files.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let (code, _, err) = run_input(&d, &keyed("fifo"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is a FIFO (named pipe)"), "{err}");
    // A file in neither format.
    std::fs::write(files.join("notes.txt"), "hello").unwrap();
    let (code, _, err) = run_input(&d, &keyed("notes.txt"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is neither a .npy nor a .npz file"), "{err}");
    // Neither a literal nor a file.
    let (code, _, err) = run_input(&d, "0=foo.bin".as_ref());
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("nor is it a file: no file foo.bin exists"),
        "{err}"
    );
    // A missing file named by a path.
    let (code, _, err) = run_input(&d, "0=/nonexistent-r21/x".as_ref());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot be read as a file"), "{err}");
    assert!(!err.contains("is not a number"), "{err}");
}

// ---- 8: small messages -----------------------------------------------------------------

/// With a limit given, the slow-load note says when rpjrt gives up, not to set one.
#[test]
fn the_slow_load_note_does_not_advise_a_limit_already_given() {
    let (code, _, err) = run(rpjrt()
        .args(["--plugin-timeout", "6", "info"])
        .arg(fake())
        .env("RPJRT_FAKE_HANG_ON", "GetPjrtApi"));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("still waiting"), "{err}");
    assert!(
        err.contains("rpjrt gives up at the limit of 6.0s (--plugin-timeout)"),
        "{err}"
    );
    assert!(!err.contains("give up after a while"), "{err}");
}

/// compile's create options are named as given (`--client-option`), not as `-o`, its
/// output; `--format executable` on a program says to leave `--format` out.
#[test]
fn compile_names_its_own_options() {
    let d = tmpdir("r21-compile-words");
    let prog = add_program(&d, 3);
    let out = d.join("a.rpjrt");
    let (code, _, err) = run(rpjrt()
        .arg("compile")
        .arg(&prog)
        .arg("--plugin")
        .arg(fake())
        .arg("-o")
        .arg(&out)
        .args(["--client-option", "a=1", "--option", "a=2"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--client-option a is given twice"), "{err}");
    assert!(!err.contains("-o a"), "{err}");
    let (code, _, err) = run(rpjrt()
        .arg("compile")
        .arg(&prog)
        .arg("--plugin")
        .arg(fake())
        .arg("-o")
        .arg(&out)
        .args(["--client-option", "a=1e300"]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--client-option a: 1e300 is beyond float32"),
        "{err}"
    );
    let (code, _, err) = run(rpjrt()
        .arg("compile")
        .arg(&prog)
        .arg("--plugin")
        .arg(fake())
        .arg("-o")
        .arg(&out)
        .args(["--format", "executable"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("leave --format out to compile it"), "{err}");
    assert!(!err.contains("--format executable`"), "{err}");
}

/// `--help` and `--version` into a full device fail (exit 1), as any output does.
#[test]
fn help_and_version_into_a_full_device_fail() {
    for args in [
        &["--help"][..],
        &["-V"],
        &["info", "--help"],
        &["--version"],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let (code, _, err) = run(rpjrt().args(args).stdout(full));
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.contains("cannot write the output to stdout"),
            "{args:?}: {err}"
        );
    }
    let (code, out, _) = run(rpjrt().arg("--help"));
    assert_eq!(code, 0);
    assert!(out.contains("Usage"), "{out}");
}

/// conform's timeouts name the limit exactly and the time taken, never `after 0.0 s`.
#[test]
fn conform_timeouts_are_never_zero() {
    let (code, out, err) = run(rpjrt()
        .arg("conform")
        .arg(fake())
        .args(["--only", "api.*", "--timeout", "0.001", "--json", "-"])
        .env("RPJRT_CONFORM_TEST_HANG", "api.version"));
    assert_eq!(code, 1, "{err}");
    let r = json_of(&out);
    let details: Vec<&str> = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["outcome"] == "timeout")
        .filter_map(|x| x["detail"].as_str())
        .collect();
    assert!(!details.is_empty(), "{r}");
    for d in details {
        assert!(!d.contains("0.0 s"), "{d}");
        assert!(d.contains("within the limit of 1ms (--timeout)"), "{d}");
    }
}

/// RPJRT_CLI_SUPERVISED=0 (or empty) keeps supervision on: a plugin's crash is reported,
/// not the CLI's death. A value that is neither is refused, naming the variable.
#[test]
fn rpjrt_cli_supervised_means_off_only_when_1() {
    for v in ["0", ""] {
        let (code, _, err) = run(rpjrt()
            .arg("info")
            .arg(fake())
            .env("RPJRT_CLI_SUPERVISED", v)
            .env("RPJRT_FAKE_CRASH_ON", "PJRT_Client_Create"));
        assert_eq!(code, 1, "{v:?}: {err}");
        assert!(err.contains("was killed by SIGSEGV"), "{v:?}: {err}");
    }
    let (code, _, err) = run(rpjrt()
        .arg("info")
        .arg(fake())
        .env("RPJRT_CLI_SUPERVISED", "yes"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("RPJRT_CLI_SUPERVISED"), "{err}");
}

// ---- 9: saved reports that break the schema --------------------------------------------

/// A report with a check listed twice, or a field of the wrong type, is refused by
/// `--diff` and `--html` (exit 2) naming the field. `--diff` said "no differences".
#[test]
fn reports_that_break_the_schema_are_refused_naming_the_field() {
    let d = tmpdir("r21-bad-reports");
    let good = good_report(&d);
    let base = read_json(&good);
    type Mutate = fn(&mut serde_json::Value);
    let cases: Vec<(&str, Mutate)> = vec![
        ("listed twice", |r| {
            let mut extra = r["results"][0].clone();
            extra["outcome"] = "fail".into();
            r["results"].as_array_mut().unwrap().push(extra);
        }),
        ("\"duration_ms\"", |r| {
            r["results"][1]["duration_ms"] = "fast".into()
        }),
        ("\"duration_ms\"", |r| {
            r["results"][1]["duration_ms"] = (-1.0).into()
        }),
        ("\"summary\"", |r| r["summary"]["pass"] = "many".into()),
        ("\"summary\"", |r| r["summary"]["fail"] = (-5).into()),
        ("\"plugin\"", |r| r["plugin"]["path"] = 5.into()),
        ("\"plugin\"", |r| r["plugin"] = serde_json::Value::Null),
        ("\"facts\"", |r| r["results"][0]["facts"] = "none".into()),
        ("\"detail\"", |r| r["results"][0]["detail"] = 3.into()),
        ("\"name\"", |r| r["results"][0]["name"] = "".into()),
        ("\"results\"", |r| r["results"] = "all".into()),
    ];
    for (i, (field, mutate)) in cases.into_iter().enumerate() {
        let mut r = base.clone();
        mutate(&mut r);
        let bad = d.join(format!("bad{i}.json"));
        std::fs::write(&bad, r.to_string()).unwrap();
        let (code, out, err) = run(rpjrt().args(["conform", "--diff"]).arg(&good).arg(&bad));
        assert_eq!(code, 2, "{field}: {out} {err}");
        assert!(err.contains(field), "{field}: {err}");
        assert!(err.contains(&bad.display().to_string()), "{field}: {err}");
        let (code, _, err) = run(rpjrt().args(["conform", "--html", "-"]).arg(&bad));
        assert_eq!(code, 2, "{field}: {err}");
    }
}
