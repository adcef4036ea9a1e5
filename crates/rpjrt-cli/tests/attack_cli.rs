//! Regressions from an outside attack on the command line: every defect found there is
//! pinned here by the input class that exposed it.

use serde_json::Value as Json;

mod common;

use common::{fake, new, rpjrt, run, tmpdir};

/// Runs `c`, checks that it exits with `code` and that its stderr contains `want`, and
/// returns the stderr.
fn fails(c: &mut std::process::Command, code: i32, want: &str) -> String {
    let (got, _, err) = run(c);
    assert_eq!(got, code, "{err}");
    assert!(err.contains(want), "{err}");
    err
}

/// An identity program on `tensor<2xTY>` written to `dir`.
fn identity(dir: &std::path::Path, ty: &str) -> std::path::PathBuf {
    let path = dir.join(format!("id_{}.mlir", ty.replace(['<', '>'], "")));
    let t = format!("tensor<2x{ty}>");
    std::fs::write(
        &path,
        format!("func.func public @main(%a: {t}) -> {t} {{\n  return %a : {t}\n}}\n"),
    )
    .unwrap();
    path
}

/// Outputs of the types numpy lacks (float8, float4, the packed int4/int2) print their
/// values in text and JSON, not `?` and `null`.
#[test]
fn outputs_of_every_element_type_print_their_values() {
    let dir = tmpdir("attack-types");
    let cases = [
        ("f8E4M3FN", "[1.5, -448]", "[1.5, -448.]", "[1.5,-448.0]"),
        ("f8E5M2", "[0.5, -2]", "[0.5, -2.]", "[0.5,-2.0]"),
        ("f4E2M1FN", "[1, -6]", "[1., -6.]", "[1.0,-6.0]"),
        ("f8E8M0FNU", "[0.25, 4]", "[0.25, 4.]", "[0.25,4.0]"),
        ("i4", "[7, -8]", "[7, -8]", "[7,-8]"),
        ("ui4", "[15, 0]", "[15, 0]", "[15,0]"),
        ("i2", "[1, -2]", "[1, -2]", "[1,-2]"),
        ("bf16", "[1.5, -2]", "[1.5, -2.]", "[1.5,-2.0]"),
    ];
    for (ty, input, text, json) in cases {
        let program = identity(&dir, ty);
        let (code, out, err) = run(rpjrt()
            .arg("run")
            .arg(&program)
            .arg("--plugin")
            .arg(new())
            .args(["-i", input]));
        assert_eq!(code, 0, "{ty}: {err}");
        assert!(
            out.contains(&format!("out0: array({text}, dtype=")),
            "{ty}: {out}"
        );
        let (code, out, err) = run(rpjrt()
            .arg("run")
            .arg(&program)
            .arg("--plugin")
            .arg(new())
            .args(["-i", input, "--json"]));
        assert_eq!(code, 0, "{ty}: {err}");
        let doc: Json = serde_json::from_str(&out).unwrap();
        assert_eq!(doc["outputs"][0]["data"].to_string(), json, "{ty}");
    }
}

/// A plugin error whose message merely contains the letters "oom" ("boom") is not taken for
/// an out-of-memory error: no allocator figures, no memory hint under it.
#[test]
fn an_error_saying_boom_gets_no_out_of_memory_advice() {
    let err = fails(
        rpjrt()
            .arg("info")
            .arg(fake())
            .env("RPJRT_FAKE_FAIL", "PJRT_Plugin_Initialize:13:init boom"),
        1,
        "init boom",
    );
    assert!(
        !err.contains("allocator") && !err.contains("memory cap"),
        "{err}"
    );
}

/// Where a verb writes its result is checked before it loads a plugin or runs anything: a
/// missing directory or a directory given as the file is a usage error naming the option
/// (before, a whole run or conformance pass ended in it, and `compile -o DIR/` left a
/// `DIR.rpjrt-partial` file beside the directory).
#[test]
fn output_paths_are_checked_before_anything_runs() {
    let dir = tmpdir("attack-out");
    let program = common::fixture("mul_add.mlir");
    let missing = dir.join("no/such/dir/x.npz");
    let as_dir = dir.join("d.npz");
    std::fs::create_dir_all(&as_dir).unwrap();
    let slash = format!("{}/", dir.join("sub").display());
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    // A plugin that hangs in client creation: reaching it would time the test out.
    let hang = |c: &mut std::process::Command| {
        c.arg("--plugin")
            .arg(fake())
            .env("RPJRT_FAKE_HANG_ON", "PJRT_Client_Create");
    };
    // Each case: the command line after `rpjrt`, and what its error must say.
    let argv = |items: &[&dyn AsRef<std::ffi::OsStr>]| -> Vec<std::ffi::OsString> {
        items.iter().map(|i| i.as_ref().to_os_string()).collect()
    };
    let run_out = |out: &dyn AsRef<std::ffi::OsStr>, option: &str| {
        argv(&[&"run", &program, &"--random", &option, out])
    };
    let cases: Vec<(Vec<std::ffi::OsString>, &str)> = vec![
        (run_out(&missing, "--out"), "does not exist"),
        (run_out(&as_dir, "--out"), "is a directory"),
        (run_out(&dir.join("x.txt"), "--out"), ".npz or .npy"),
        (run_out(&dir.join("no/t.json"), "--trace"), "--trace"),
        (
            argv(&[&"compile", &program, &"-o", &slash]),
            "is a directory",
        ),
    ];
    for (args, want) in cases {
        let mut c = rpjrt();
        c.args(&args);
        hang(&mut c);
        let (code, _, err) = run(&mut c);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // conform checks its report files before starting any child.
    for (option, path) in [("--json", missing.clone()), ("--html", as_dir.clone())] {
        let (code, _, err) = run(rpjrt()
            .arg("conform")
            .arg(fake())
            .arg(option)
            .arg(&path)
            .env("RPJRT_FAKE_HANG_ON", "PJRT_Client_Create"));
        assert_eq!(code, 2, "{option}: {err}");
        assert!(err.contains(option), "{option}: {err}");
    }
    fails(
        rpjrt()
            .args(["trace", "view"])
            .arg(&program)
            .arg("-o")
            .arg(&missing),
        2,
        "--output",
    );
    // compile -o DIR/ on a working plugin leaves nothing beside the directory.
    let (code, _, err) = run(rpjrt()
        .arg("compile")
        .arg(&program)
        .arg("-o")
        .arg(&slash)
        .arg("--plugin")
        .arg(new()));
    assert_eq!(code, 2, "{err}");
    assert!(!dir.join("sub.rpjrt-partial").exists());
}

/// `.npy`/`.npz` inputs are checked against the parameter they fill from their header,
/// before their data is read or inflated: a small archive that inflates to gigabytes, or
/// an array of the wrong shape, costs a header read. Shown with a member whose data is
/// damaged: the shape error comes first, so the data was never read.
/// An output path that is a FIFO (or a device) is refused before anything runs and left
/// as it was: the artifact and the `.npz` were renamed over it (as root, `compile -o
/// /dev/full` replaced the device node with a file). And the artifact's temporary file has
/// a name of its own: `compile x.rpjrt-partial -o x.rpjrt` wrote it over the program.
#[test]
fn outputs_that_are_not_regular_files_are_refused_untouched() {
    use std::os::unix::fs::FileTypeExt as _;
    let dir = tmpdir("attack-fifo-out");
    let program = common::fixture("mul_add.mlir");
    let fifo = dir.join("out.npz");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let is_fifo = || std::fs::metadata(&fifo).unwrap().file_type().is_fifo();
    let plugin = new();
    for (option, args) in [
        (
            "--output",
            vec!["compile".as_ref(), program.as_os_str(), "-o".as_ref()],
        ),
        (
            "--out",
            vec![
                "run".as_ref(),
                program.as_os_str(),
                "--random".as_ref(),
                "--out".as_ref(),
            ],
        ),
        (
            "--trace",
            vec![
                "run".as_ref(),
                program.as_os_str(),
                "--random".as_ref(),
                "--trace".as_ref(),
            ],
        ),
    ] {
        let mut c = rpjrt();
        c.args(&args).arg(&fifo).arg("--plugin").arg(&plugin);
        fails(
            &mut c,
            2,
            &format!(
                "{option} {}: a FIFO (named pipe), not a regular file",
                fifo.display()
            ),
        );
        assert!(is_fifo(), "{option} replaced the FIFO");
    }
    let input = dir.join("p.rpjrt-partial");
    std::fs::copy(&program, &input).unwrap();
    let mut c = rpjrt();
    c.args(["compile", "--format", "mlir"])
        .arg(&input)
        .arg("-o")
        .arg(dir.join("p.rpjrt"))
        .arg("--plugin")
        .arg(&plugin);
    let (code, _, err) = run(&mut c);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read(&input).unwrap(),
        std::fs::read(&program).unwrap()
    );
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["out.npz", "p.rpjrt", "p.rpjrt-partial"]);
}

/// The processes whose parent is `parent`, from `/proc` (zombies left out: they are gone).
fn children_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for ent in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = ent.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(ent.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = rest.split(' ').collect();
        if fields[1].parse::<u32>() == Ok(parent) && fields[0] != "Z" {
            out.push(pid);
        }
    }
    out
}

/// `rpjrt conform` killed by SIGTERM (as `timeout` and job managers stop it) takes its
/// child along: the child, hung in the plugin, kept running for ever, an orphan.
#[test]
fn a_conform_run_killed_by_sigterm_leaves_no_child_behind() {
    let mut parent = rpjrt()
        .args(["conform", "--timeout", "300", "--only", "client.create"])
        .arg(fake())
        .env("RPJRT_FAKE_HANG_ON", "PJRT_Client_Create")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let child = loop {
        if let Some(&c) = children_of(parent.id()).first() {
            break c;
        }
        assert!(started.elapsed().as_secs() < 30, "no conform child started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // Let the child reach the hanging call.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &parent.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let _ = parent.wait();
    let proc_dir = std::path::PathBuf::from(format!("/proc/{child}"));
    let gone = || {
        std::fs::read_to_string(proc_dir.join("stat"))
            .map(|s| s[s.rfind(')').unwrap() + 2..].starts_with('Z'))
            .unwrap_or(true)
    };
    let since = std::time::Instant::now();
    while !gone() && since.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let left = !gone();
    if left {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &child.to_string()])
            .status();
    }
    assert!(
        !left,
        "the conform child {child} outlived its killed parent"
    );
}

#[test]
fn input_files_are_checked_from_their_header_before_their_data() {
    let dir = tmpdir("attack-header-first");
    let program = common::fixture("mul_add.mlir");
    let four = rpjrt_npy::literal::parse_literal("[1,2,3,4]:f32", None).unwrap();
    let eight = rpjrt_npy::literal::parse_literal("[1,2,3,4,5,6,7,8]:f32", None).unwrap();
    let npz = dir.join("x.npz");
    rpjrt_npy::save_npz(&npz, &[("a".into(), four.clone()), ("b".into(), eight)]).unwrap();
    // Damage member a's data (its last byte, just before member b's local header).
    let mut bytes = std::fs::read(&npz).unwrap();
    let b_at = bytes
        .windows(4)
        .enumerate()
        .filter(|(_, w)| *w == b"PK\x03\x04")
        .nth(1)
        .unwrap()
        .0;
    bytes[b_at - 1] ^= 0xff;
    std::fs::write(&npz, &bytes).unwrap();
    let (code, _, err) = run(rpjrt()
        .arg("run")
        .arg(&program)
        .arg("--plugin")
        .arg(new())
        .arg("-i")
        .arg(&npz));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("takes shape [8]") && err.contains("has shape [4]"),
        "{err}"
    );
    // A .npy given by key whose data is cut short is still refused from its size.
    let npy = dir.join("a.npy");
    let mut one = rpjrt_npy::write_npy(&four).unwrap();
    one.truncate(one.len() - 2);
    std::fs::write(&npy, &one).unwrap();
    fails(
        rpjrt()
            .arg("run")
            .arg(&program)
            .arg("--plugin")
            .arg(new())
            .arg("-i")
            .arg(format!("a={}", npy.display()))
            .arg("-i")
            .arg("b=[1,2,3,4,5,6,7,8]"),
        2,
        "needs 16 data bytes",
    );
}

/// A plugin whose `PJRT_Plugin_Attributes` fails is not shown as a plugin without
/// attributes: `info` says they are unavailable and why, and conform's `api.attributes`
/// fails (it passed on the empty list).
#[test]
fn a_failing_attributes_call_is_reported_not_taken_for_none() {
    let fail = ("RPJRT_FAKE_FAIL", "PJRT_Plugin_Attributes:13:attr boom");
    let (code, out, err) = run(rpjrt().arg("info").arg(fake()).env(fail.0, fail.1));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("unavailable:") && out.contains("attr boom"),
        "{out}"
    );
    let (code, out, err) = run(rpjrt()
        .arg("info")
        .arg(fake())
        .arg("--json")
        .env(fail.0, fail.1));
    assert_eq!(code, 0, "{err}");
    let doc: Json = serde_json::from_str(&out).unwrap();
    assert!(
        doc["attributes_error"]
            .as_str()
            .unwrap()
            .contains("attr boom"),
        "{doc}"
    );
    let (code, out, err) = run(rpjrt()
        .arg("conform")
        .arg(fake())
        .args(["--only", "api.attributes"])
        .env(fail.0, fail.1));
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("fail") && out.contains("attr boom"), "{out}");
    // Without the fault both are as before.
    let (code, out, _) = run(rpjrt()
        .arg("conform")
        .arg(fake())
        .args(["--only", "api.attributes"]));
    assert_eq!(code, 0, "{out}");
}

/// A negative number is a value, not an option: `-i -1.5` (a literal for the next
/// argument) and `--device -1` (refused by rpjrt, naming the devices) used to be refused
/// by the argument parser as unknown options, with advice (`-- -1`) that did not help.
#[test]
fn negative_numbers_are_values_of_input_and_device() {
    let dir = tmpdir("attack-negative");
    let program = dir.join("scalar.mlir");
    std::fs::write(
        &program,
        "func.func public @main(%a: tensor<f32>) -> tensor<f32> {\n  return %a : tensor<f32>\n}\n",
    )
    .unwrap();
    for (lit, want) in [
        ("-1.5", "array(-1.5, dtype=float32)"),
        ("-inf", "array(-inf, dtype=float32)"),
    ] {
        let (code, out, err) = run(rpjrt()
            .arg("run")
            .arg(&program)
            .arg("--plugin")
            .arg(new())
            .args(["-i", lit]));
        assert_eq!(code, 0, "{lit}: {err}");
        assert!(out.contains(want), "{lit}: {out}");
    }
    fails(
        rpjrt()
            .arg("run")
            .arg(&program)
            .arg("--plugin")
            .arg(new())
            .args(["-i", "1", "--device", "-1"]),
        2,
        "no device with id -1",
    );
}

/// The Python interpreter discovery asks for its site directories is bounded as a whole:
/// one that leaves a process behind holding its stdout (a wrapper script backgrounding
/// something) held `rpjrt plugins` until that process ended.
#[test]
fn a_python_that_leaves_its_stdout_open_does_not_hold_discovery() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tmpdir("attack-python");
    let python = dir.join("python3");
    std::fs::write(&python, "#!/bin/sh\n(sleep 60 &)\necho /tmp\n").unwrap();
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let t = std::time::Instant::now();
    let mut child = rpjrt()
        .arg("plugins")
        .env("RPJRT_PYTHON", &python)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let status = status.expect("rpjrt plugins still waiting after 20 s");
    assert!(status.code().is_some(), "{status:?}");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(15),
        "{:?}",
        t.elapsed()
    );
}

/// HLO text (`HloModule ...`), which no PJRT plugin compiles, is refused naming what to
/// give instead: as `.hlo` it reached the plugin as a proto ("failed to deserialize
/// HloModuleProto"), as `.txt` as StableHLO text with advice about newer printers.
#[test]
fn hlo_text_is_refused_with_what_to_give_instead() {
    let dir = tmpdir("attack-hlo-text");
    let text =
        "HloModule m\nENTRY main {\n  a = f32[2] parameter(0)\n  ROOT b = f32[2] add(a, a)\n}\n";
    for name in ["m.hlo", "m.txt", "m.mlir"] {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let (code, _, err) = run(rpjrt()
            .arg("run")
            .arg(&path)
            .arg("--plugin")
            .arg(new())
            .args(["-i", "[1,2]"]));
        assert_eq!(code, 2, "{name}: {err}");
        assert!(
            err.contains("HLO text") && err.contains("HloModuleProto"),
            "{name}: {err}"
        );
    }
}

/// `run` on an executable for several devices says that it runs single-device programs
/// (it said "1 argument lists given, but the executable runs on 2 device(s)"), and an
/// artifact rpjrt refuses (for another plugin, damaged) is bad input, exit 2, not 1.
#[test]
fn run_refuses_multi_device_and_foreign_artifacts_as_bad_input() {
    let dir = tmpdir("attack-artifacts");
    let program = common::fixture("mul_add.mlir");
    let two = dir.join("two.rpjrt");
    let (code, _, err) = run(rpjrt()
        .arg("compile")
        .arg(&program)
        .arg("-o")
        .arg(&two)
        .arg("--plugin")
        .arg(new())
        .args(["--num-replicas", "2"]));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(rpjrt()
        .arg("run")
        .arg(&two)
        .arg("--plugin")
        .arg(new())
        .arg("--random"));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("runs on 2 devices") && err.contains("single-device"),
        "{err}"
    );
    // Built on the 0.81 plugin, loaded on the 0.115 one.
    let foreign = dir.join("old.rpjrt");
    let (code, _, err) = run(rpjrt()
        .arg("compile")
        .arg(&program)
        .arg("-o")
        .arg(&foreign)
        .arg("--plugin")
        .arg(common::old()));
    assert_eq!(code, 0, "{err}");
    fails(
        rpjrt()
            .arg("run")
            .arg(&foreign)
            .arg("--plugin")
            .arg(new())
            .arg("--random"),
        2,
        "cannot be loaded here",
    );
}

/// `compile` asked for more devices than the client has is refused by rpjrt before the
/// plugin sees it: bad input, exit 2 (it was 1, a plugin failure).
#[test]
fn compile_for_more_devices_than_there_are_is_bad_input() {
    let dir = tmpdir("attack-compile-devices");
    fails(
        rpjrt()
            .arg("compile")
            .arg(common::fixture("mul_add.mlir"))
            .arg("-o")
            .arg(dir.join("x.rpjrt"))
            .arg("--plugin")
            .arg(new())
            .args(["--num-replicas", "64"]),
        2,
        "need 64 devices",
    );
}

/// `--out` with an output type `.npy` cannot hold (bfloat16, int4, ...) is refused before
/// the program runs, naming the output (it ran, then failed to save).
#[test]
fn out_refuses_output_types_npy_cannot_hold_before_running() {
    let dir = tmpdir("attack-out-types");
    for (ty, input) in [("bf16", "[1, 2]"), ("i4", "[1, 2]")] {
        let program = identity(&dir, ty);
        let (code, out, err) = run(rpjrt()
            .arg("run")
            .arg(&program)
            .arg("--plugin")
            .arg(new())
            .args(["-i", input, "--out"])
            .arg(dir.join("o.npz")));
        assert_eq!(code, 2, "{ty}: {err}");
        assert!(
            err.contains("output 0 is") && err.contains("--json"),
            "{ty}: {err}"
        );
        assert!(!out.contains("out0"), "{ty}: it ran: {out}");
        assert!(!dir.join("o.npz").exists());
    }
}

/// `conform --only` with several patterns names one that selects no check (a typo), rather
/// than running the others as if it were not there.
#[test]
fn conform_only_names_a_pattern_that_selects_nothing() {
    let (code, out, err) = run(rpjrt().arg("conform").arg(fake()).args([
        "--only",
        "api.version,api.verison",
        "--list",
    ]));
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("\"api.verison\""), "{err}");
    let (code, out, _) = run(rpjrt().arg("conform").arg(fake()).args([
        "--only",
        "api.version, api.table_size",
        "--list",
    ]));
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 2, "{out}");
}

/// An output that names the verb's own input is refused, the input left as it was:
/// `compile f.mlir -o f.mlir` replaced the program with its artifact, and `trace view`
/// of a trace named `.html` wrote the page over the trace.
#[test]
fn an_output_naming_the_input_is_refused() {
    let dir = tmpdir("attack-same-file");
    let program = dir.join("p.mlir");
    std::fs::copy(common::fixture("mul_add.mlir"), &program).unwrap();
    let before = std::fs::read(&program).unwrap();
    fails(
        rpjrt()
            .arg("compile")
            .arg(&program)
            .arg("-o")
            .arg(dir.join(".").join("p.mlir"))
            .arg("--plugin")
            .arg(new()),
        2,
        "that is the input file",
    );
    assert_eq!(std::fs::read(&program).unwrap(), before);
    let trace = dir.join("t.html");
    std::fs::write(&trace, r#"{"traceEvents": []}"#).unwrap();
    fails(
        rpjrt().args(["trace", "view"]).arg(&trace),
        2,
        "that is the input file",
    );
    assert_eq!(
        std::fs::read_to_string(&trace).unwrap(),
        r#"{"traceEvents": []}"#
    );
    // run's trace over its program.
    fails(
        rpjrt()
            .arg("run")
            .arg(&program)
            .arg("--plugin")
            .arg(new())
            .args(["--random", "--trace"])
            .arg(&program),
        2,
        "that is the input file",
    );
    assert_eq!(std::fs::read(&program).unwrap(), before);
    // conform's report over the plugin it checks.
    let plugin = dir.join("plugin.so");
    std::fs::copy(fake(), &plugin).unwrap();
    fails(
        rpjrt()
            .arg("conform")
            .arg(&plugin)
            .args(["--only", "api.version", "--json"])
            .arg(&plugin),
        2,
        "that is the input file",
    );
    assert_eq!(
        std::fs::read(&plugin).unwrap(),
        std::fs::read(fake()).unwrap()
    );
}

/// conform reads its child's stdout as bytes: a plugin printing text that is not UTF-8
/// (Latin-1, binary) there ended the reading, and every check after it was reported as a
/// crash; a line without end longer than any protocol line is skipped, not held. The child
/// is replaced by a script speaking the protocol around such output.
#[test]
fn conform_survives_a_plugin_printing_bytes_that_are_not_text() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tmpdir("attack-conform-bytes");
    let child = dir.join("child.sh");
    std::fs::write(
        &child,
        r#"#!/bin/sh
checks=$(echo "$@" | sed 's/.*--checks //')
n=$RPJRT_CONFORM_NONCE
printf '\n\036rpjrt-conform %s {"plugin":{"path":"x"}}\n' "$n"
head -c 20000000 /dev/zero | tr '\0' 'x'
printf '\n'
IFS=,
for c in $checks; do
  printf '\n\036rpjrt-conform %s {"start":"%s"}\n' "$n" "$c"
  printf 'plugin says \377\376 caf\351\n'
  printf '\n\036rpjrt-conform %s {"result":{"name":"%s","group":"api","outcome":"pass","detail":"","facts":{},"duration_ms":1}}\n' "$n" "$c"
done
"#,
    )
    .unwrap();
    std::fs::set_permissions(&child, std::fs::Permissions::from_mode(0o755)).unwrap();
    let self_command = serde_json::to_string(&[child.to_str().unwrap()]).unwrap();
    let (code, out, err) = run(rpjrt()
        .arg("conform")
        .arg(fake())
        .args(["--only", "api.version,api.table_size", "--timeout", "20"])
        .env("RPJRT_CLI_SELF", self_command));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2 checks: 2 pass"), "{out}");
}

/// `launch --port 0` means any free port, as it does to the OS: the processes were told
/// to meet on port 0 and the peers could never reach the host.
#[test]
fn launch_port_0_picks_a_free_port() {
    let (code, out, err) = run(rpjrt()
        .args(["launch", "-n", "2", "--port", "0", "--timeout", "60", "--"])
        .arg(env!("CARGO_BIN_EXE_rpjrt"))
        .args(["rendezvous", "--timeout", "20"]));
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.matches("rendezvous ok").count(), 2, "{out}");
    assert!(
        !out.contains("127.0.0.1:0,") && !out.contains("127.0.0.1:0)"),
        "{out}"
    );
}

/// `cache info ""` picked whichever entry was alone (an empty prefix starts every key);
/// an empty or blank key is now refused, asking for one.
#[test]
fn cache_info_with_an_empty_key_is_refused() {
    let dir = tmpdir("attack-cache-key");
    let cache = dir.join("cache");
    let (code, _, err) = run(rpjrt()
        .arg("compile")
        .arg(common::fixture("mul_add.mlir"))
        .arg("-o")
        .arg(dir.join("a.rpjrt"))
        .arg("--plugin")
        .arg(new())
        .arg("--cache-dir")
        .arg(&cache));
    assert_eq!(code, 0, "{err}");
    for key in ["", "  "] {
        let (code, out, err) = run(rpjrt().args(["cache", "info", key, "--dir"]).arg(&cache));
        assert_eq!(code, 2, "{key:?}: {out}{err}");
        assert!(err.contains("give a key"), "{err}");
    }
}

/// Output that cannot be written (`> /dev/full`: ENOSPC) was dropped without a word and
/// the command exited 0 (`info`, `run`, `conform --list`), or it panicked (`compile`,
/// `cache`, which printed with `println!`). Every verb now exits 1 naming the error.
#[test]
fn output_that_cannot_be_written_fails_the_command() {
    if !std::path::Path::new("/dev/full").exists() {
        panic!("this test needs /dev/full");
    }
    let dir = tmpdir("attack-dev-full");
    let cache = dir.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let program = common::fixture("mul_add.mlir");
    let cases: Vec<Vec<std::ffi::OsString>> = vec![
        vec!["info".into(), new().into(), "--json".into()],
        vec!["info".into(), new().into()],
        vec!["plugins".into(), "--json".into()],
        vec!["conform".into(), new().into(), "--list".into()],
        vec![
            "run".into(),
            program.clone().into(),
            "--plugin".into(),
            new().into(),
            "--random".into(),
            "--json".into(),
        ],
        vec![
            "compile".into(),
            program.into(),
            "--plugin".into(),
            new().into(),
            "-o".into(),
            dir.join("a.rpjrt").into(),
        ],
        vec!["cache".into(), "ls".into(), "--dir".into(), cache.into()],
    ];
    for args in cases {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let (code, _, err) = run(rpjrt().args(&args).stdout(full));
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.contains("cannot write the output to stdout"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// `run --out` (or `--trace`) naming one of the `--input` files replaced that input with
/// the outputs (or the trace); like an output naming the program, it is refused before
/// anything runs and the input is left as it was.
#[test]
fn run_output_naming_an_input_file_is_refused() {
    let dir = tmpdir("attack-out-over-input");
    let x = dir.join("x.npy");
    // A float32[2] .npy of [1, 2], for the identity program on tensor<2xf32>.
    let program = identity(&dir, "f32");
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    let pad = 64 - (10 + header.len() + 1) % 64;
    let header = format!("{header}{}\n", " ".repeat(pad % 64));
    npy.extend_from_slice(&(header.len() as u16).to_le_bytes());
    npy.extend_from_slice(header.as_bytes());
    npy.extend_from_slice(&1f32.to_le_bytes());
    npy.extend_from_slice(&2f32.to_le_bytes());
    std::fs::write(&x, &npy).unwrap();
    for (option, input) in [
        ("--out", "0=".to_string()),
        ("--out", String::new()),
        ("--trace", "a=".to_string()),
    ] {
        fails(
            rpjrt()
                .arg("run")
                .arg(&program)
                .arg("--plugin")
                .arg(new())
                .arg("-i")
                .arg(format!("{input}{}", x.display()))
                .arg(option)
                .arg(dir.join(".").join("x.npy")),
            2,
            "that is the input file",
        );
        assert_eq!(std::fs::read(&x).unwrap(), npy, "{option} {input}");
    }
    // The same run with another output name works.
    let (code, _, err) = run(rpjrt()
        .arg("run")
        .arg(&program)
        .arg("--plugin")
        .arg(new())
        .arg("-i")
        .arg(&x)
        .arg("--out")
        .arg(dir.join("y.npy")));
    assert_eq!(code, 0, "{err}");
}

/// An error message that cannot be written (stderr on a full disk) is no panic: each verb
/// still ends with the exit code it documents (2 for bad input, the child's code for
/// `launch`), not Rust's 101.
#[test]
fn a_stderr_that_cannot_be_written_keeps_the_exit_code() {
    let full = || {
        std::process::Stdio::from(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .expect("/dev/full opens"),
        )
    };
    let program = common::fixture("mul_add.mlir");
    let cases: Vec<(Vec<std::ffi::OsString>, i32)> = vec![
        (vec!["run".into(), "/nonexistent".into()], 2),
        (
            vec!["trace".into(), "view".into(), "/nonexistent".into()],
            2,
        ),
        (vec!["rendezvous".into()], 2),
        (
            vec![
                "cache".into(),
                "info".into(),
                "x".into(),
                "--dir".into(),
                "/nonexistent".into(),
            ],
            2,
        ),
        (
            vec![
                "launch".into(),
                "-n".into(),
                "1".into(),
                "--".into(),
                "sh".into(),
                "-c".into(),
                "echo to stderr >&2; exit 3".into(),
            ],
            3,
        ),
    ];
    // Bad input, and a plugin's error, met in the supervised child that runs the verb.
    let mut cases = cases;
    for (inputs, want) in [
        (["[1,,2]:f32", "[1]:f32"], 2),
        (["[1,2]:f32", "[1]:f32"], 1),
    ] {
        let mut args: Vec<std::ffi::OsString> = vec![
            "run".into(),
            program.clone().into(),
            "--plugin".into(),
            fake().into(),
        ];
        for i in inputs {
            args.extend(["-i".into(), i.into()]);
        }
        cases.push((args, want));
    }
    for (args, want) in cases {
        let out = rpjrt()
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(full())
            .output()
            .expect("the rpjrt binary runs");
        assert_eq!(out.status.code(), Some(want), "{args:?}");
    }
}

/// A file with an entry's extension but a multi-byte name (anyone who can write to a
/// shared cache can drop one) made `cache ls` panic when it shortened the "key" by bytes.
/// Only files named by a key (64 hex digits) are entries now: it is neither listed nor
/// cleared, and nothing panics.
#[test]
fn cache_ls_and_clear_pass_over_a_file_with_a_non_ascii_name() {
    let dir = tmpdir("cache-utf8");
    let name = dir.join("aééééééééé€€日本語のキーです.rpjrtexe");
    std::fs::write(&name, b"").unwrap();
    let (code, out, err) = run(rpjrt().args(["cache", "ls", "--dir"]).arg(&*dir));
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.contains("0 entries"), "{out}");
    let (code, _, err) = run(rpjrt().args(["cache", "clear", "--dir"]).arg(&*dir));
    assert_eq!(code, 0, "{err}");
    assert!(name.exists());
}

/// `cache ls` reads each entry's header, not the whole file: a 1 GiB entry (sparse, its
/// executable and checksum all zeros) is listed at once, with the target its header
/// records; `cache info`, which verifies the whole entry, finds the bad checksum.
#[test]
fn cache_ls_reads_only_the_header_of_each_entry() {
    let dir = tmpdir("cache-head");
    let key = "ab".repeat(32);
    let artifact = rpjrt::Artifact {
        target: rpjrt::ArtifactTarget {
            platform_name: "cpu".into(),
            platform_version: "test".into(),
            pjrt_version: "0.81".into(),
            xla_version: String::new(),
            stablehlo_current_version: String::new(),
            stablehlo_minimum_version: String::new(),
            plugin_build: String::new(),
            device_kind: "cpu".into(),
            device_count: 1,
        },
        compile_options: Vec::new(),
        blob: Vec::new(),
        extra: vec![("cache_key".into(), key.clone())],
    };
    let bytes = artifact.encode();
    // Everything up to the executable's length (8 bytes) and the checksum (32).
    let head = &bytes[..bytes.len() - 40];
    // Sparse: 256 GiB that take no disk, and more memory than the machine has, so a
    // listing that read entries whole could not list it.
    let size: u64 = 1 << 38;
    let mut file = head.to_vec();
    file[12..20].copy_from_slice(&size.to_le_bytes());
    file.extend_from_slice(&(size - head.len() as u64 - 40).to_le_bytes());
    let path = dir.join(format!("{key}.rpjrtexe"));
    std::fs::write(&path, &file).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(size)
        .unwrap();
    // With the bound on file reads raised past it, the entry is listed from its header.
    let (code, out, err) = run(rpjrt()
        .env("RPJRT_MAX_FILE_BYTES", (1u64 << 40).to_string())
        .args(["cache", "ls", "--json", "--dir"])
        .arg(&*dir));
    assert_eq!(code, 0, "{err}");
    let doc: Json = serde_json::from_str(&out).unwrap();
    let entry = &doc["entries"][0];
    assert_eq!(entry["bytes"], size, "{out}");
    assert_eq!(entry["target"]["platform_version"], "test", "{out}");
    assert!(entry["error"].is_null(), "{out}");
    // Under the default bound (4 GiB) it is listed as unusable, as a hit would not read it.
    let (code, out, err) = run(rpjrt().args(["cache", "ls", "--json", "--dir"]).arg(&*dir));
    assert_eq!(code, 0, "{err}");
    let doc: Json = serde_json::from_str(&out).unwrap();
    let why = doc["entries"][0]["error"].as_str().unwrap_or_default();
    assert!(why.contains("RPJRT_MAX_FILE_BYTES"), "{out}");
    // A small entry with the same damage: `info` reads it whole and names the checksum.
    let small: u64 = head.len() as u64 + 8 + 16 + 32;
    let mut file = head.to_vec();
    file[12..20].copy_from_slice(&small.to_le_bytes());
    file.extend_from_slice(&16u64.to_le_bytes());
    file.resize(small as usize, 0);
    std::fs::write(&path, &file).unwrap();
    let (code, out, err) = run(rpjrt().args(["cache", "info", "ab", "--dir"]).arg(&*dir));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("checksum"), "{out}");
}

/// `--out` over an existing file replaces it through a temporary file: the new file keeps
/// the old one's permission bits (a 0640 or read-only file used to become 0644).
#[test]
fn out_over_an_existing_file_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tmpdir("out-mode");
    let program = common::fixture("mul_add.mlir");
    for mode in [0o640, 0o444] {
        let out = dir.join(format!("out-{mode:o}.npz"));
        std::fs::write(&out, b"old").unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(mode)).unwrap();
        let (code, _, err) = run(rpjrt()
            .arg("run")
            .arg(&program)
            .arg("--plugin")
            .arg(new())
            .arg("--random")
            .arg("--out")
            .arg(&out));
        assert_eq!(code, 0, "{err}");
        assert_ne!(std::fs::read(&out).unwrap(), b"old");
        let got = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(got, mode, "mode of {}: {got:o}", out.display());
    }
}

/// Every output against every file the verb reads and against its other outputs, before
/// anything runs: `--out x.npy --trace x.npy` left the trace in `x.npy`, `conform --html
/// rep.json rep.json` replaced the report it rendered, `--diff A B --json A` replaced A,
/// `--json X --html X` kept only the page, and `compile -o` or `run --trace` naming the
/// plugin library replaced the plugin.
#[test]
fn outputs_are_checked_against_every_input_and_each_other() {
    let dir = tmpdir("attack-outputs-class");
    let program = dir.join("p.mlir");
    std::fs::copy(common::fixture("mul_add.mlir"), &program).unwrap();
    let in_dir = |name: &str| dir.join(name);
    // Two outputs naming one file (neither exists yet; one spelt with `./`).
    let (code, _, err) = run(rpjrt()
        .current_dir(&*dir)
        .args([
            "run", "p.mlir", "--random", "--out", "x.npy", "--trace", "./x.npy",
        ])
        .arg("--plugin")
        .arg(fake()));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("name the same file"), "{err}");
    assert!(!in_dir("x.npy").exists());
    // A bad --out is refused before a trace is written.
    let (code, _, err) = run(rpjrt()
        .arg("run")
        .arg(&program)
        .args(["--random", "--out"])
        .arg(in_dir("t.json"))
        .arg("--trace")
        .arg(in_dir("t.json"))
        .arg("--plugin")
        .arg(fake()));
    assert_eq!(code, 2, "{err}");
    assert!(!in_dir("t.json").exists(), "{err}");
    // The plugin library as an output.
    let plugin = in_dir("copy.so");
    std::fs::copy(fake(), &plugin).unwrap();
    let original = std::fs::read(&plugin).unwrap();
    fails(
        rpjrt()
            .current_dir(&*dir)
            .args(["compile", "p.mlir", "-o", "copy.so", "--plugin"])
            .arg(&plugin),
        2,
        "(the plugin library)",
    );
    fails(
        rpjrt()
            .current_dir(&*dir)
            .args([
                "run", "p.mlir", "--random", "--trace", "copy.so", "--plugin",
            ])
            .arg(&plugin),
        2,
        "(the plugin library)",
    );
    assert_eq!(std::fs::read(&plugin).unwrap(), original);
    // conform's saved reports and its two outputs.
    let report = in_dir("rep.json");
    let (code, _, err) = run(rpjrt()
        .arg("conform")
        .arg(fake())
        .args(["--only", "api.version", "--json"])
        .arg(&report));
    assert_eq!(code, 0, "{err}");
    let saved = std::fs::read(&report).unwrap();
    let other = in_dir("rep2.json");
    std::fs::write(&other, &saved).unwrap();
    fails(
        rpjrt()
            .args(["conform", "--html"])
            .arg(&report)
            .arg(&report),
        2,
        "(a report to render)",
    );
    fails(
        rpjrt()
            .args(["conform", "--diff"])
            .arg(&report)
            .arg(&other)
            .arg("--json")
            .arg(&report),
        2,
        "(a report to compare)",
    );
    assert_eq!(std::fs::read(&report).unwrap(), saved);
    let both = in_dir("both.out");
    fails(
        rpjrt()
            .arg("conform")
            .arg(fake())
            .args(["--only", "api.version", "--json"])
            .arg(&both)
            .arg("--html")
            .arg(&both),
        2,
        "name the same file",
    );
    assert!(!both.exists());
}

/// Started with stdout closed (`>&-`), a command whose output is its purpose fails (exit
/// 1, saying so) instead of exiting 0 with the output lost: Rust's runtime reopens a closed
/// descriptor 1 on /dev/null before `main`, so every write succeeded. `>/dev/null`, asked
/// for, still succeeds.
#[test]
fn a_closed_stdout_is_a_failure_not_a_silent_success() {
    let fake = fake();
    let cases: [Vec<String>; 3] = [
        vec!["info".into(), "--json".into(), fake.display().to_string()],
        vec![
            "run".into(),
            common::fixture("mul_add.mlir").display().to_string(),
            "--random".into(),
            "--json".into(),
            "--plugin".into(),
            new().display().to_string(),
        ],
        vec![
            "conform".into(),
            fake.display().to_string(),
            "--only".into(),
            "api.version".into(),
            "--json".into(),
            "-".into(),
        ],
    ];
    for args in cases {
        let script = format!(
            "exec \"$0\" {} >&-",
            args.iter()
                .map(|a| format!("'{a}'"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let c = rpjrt();
        let exe = c.get_program().to_owned();
        let mut sh = std::process::Command::new("sh");
        sh.arg("-c").arg(&script).arg(exe);
        for (k, v) in c.get_envs() {
            match v {
                Some(v) => sh.env(k, v),
                None => sh.env_remove(k),
            };
        }
        let (code, _, err) = run(&mut sh);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains("descriptor 1 was closed"), "{args:?}: {err}");
        let (code, _, err) = run(rpjrt().args(&args).stdout(std::process::Stdio::null()));
        assert_eq!(code, 0, "{args:?} >/dev/null: {err}");
    }
}

/// `f(zeta, alpha, mid) = zeta * 100 + alpha * 10 + mid` on `tensor<2xf32>`, its parameters
/// named `%zeta, %alpha, %mid` when `named`, else `%arg0, %arg1, %arg2` (no names, as in a
/// module JAX lowers).
fn zeta_alpha_mid(dir: &std::path::Path, named: bool) -> std::path::PathBuf {
    let [z, a, m] = if named {
        ["%zeta", "%alpha", "%mid"]
    } else {
        ["%arg0", "%arg1", "%arg2"]
    };
    let t = "tensor<2xf32>";
    let path = dir.join(if named { "named.mlir" } else { "unnamed.mlir" });
    std::fs::write(
        &path,
        format!(
            "func.func public @main({z}: {t}, {a}: {t}, {m}: {t}) -> {t} {{\n\
             \x20 %h = stablehlo.constant dense<100.0> : {t}\n\
             \x20 %d = stablehlo.constant dense<10.0> : {t}\n\
             \x20 %0 = stablehlo.multiply {z}, %h : {t}\n\
             \x20 %1 = stablehlo.multiply {a}, %d : {t}\n\
             \x20 %2 = stablehlo.add %0, %1 : {t}\n\
             \x20 %3 = stablehlo.add %2, {m} : {t}\n\
             \x20 return %3 : {t}\n}}\n"
        ),
    )
    .unwrap();
    path
}

/// `dir/NAME.npz` holding `members` (name, literal) in that order.
fn npz_of(dir: &std::path::Path, name: &str, members: &[(&str, &str)]) -> std::path::PathBuf {
    let path = dir.join(format!("{name}.npz"));
    let arrays: Vec<(String, rpjrt_npy::Array)> = members
        .iter()
        .map(|(n, v)| {
            let a = rpjrt_npy::literal::parse_literal(v, None).unwrap();
            (n.to_string(), a)
        })
        .collect();
    rpjrt_npy::save_npz(&path, &arrays).unwrap();
    path
}

/// zeta = [1,2], alpha = [3,4], mid = [5,6]: the right answer.
const ZAM: &str = "array([135., 246.], dtype=float32)";

fn run_zam(program: &std::path::Path, inputs: &[std::ffi::OsString]) -> (i32, String, String) {
    let mut c = rpjrt();
    c.arg("run").arg(program).arg("--plugin").arg(new());
    for i in inputs {
        c.arg("-i").arg(i);
    }
    run(&mut c)
}

/// A `.npz` member whose name names no parameter was placed by its order in the file
/// (exit 0, wrong values): `np.savez(alpha=.., mid=.., zeta=..)` for a JAX-lowered
/// `f(zeta, alpha, mid)` bound zeta <- alpha. Now it is refused from its name, before
/// anything runs, naming the member, the parameters and the file, whether or not the
/// program carries names (a typo of a name is refused the same way).
#[test]
fn npz_members_that_name_no_parameter_are_refused_not_taken_in_file_order() {
    let dir = tmpdir("attack-npz-names");
    let unnamed = zeta_alpha_mid(&dir, false);
    let named = zeta_alpha_mid(&dir, true);
    let by_name = npz_of(
        &dir,
        "by_name",
        &[
            ("alpha", "[3,4]:f32"),
            ("mid", "[5,6]:f32"),
            ("zeta", "[1,2]:f32"),
        ],
    );
    let (code, out, err) = run_zam(&unnamed, &[by_name.clone().into()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.is_empty(), "{out}");
    for want in [
        "member \"alpha\" names no parameter",
        "carries no parameter names",
        "arr_0, arr_1",
        &by_name.display().to_string(),
        "its parameters are 0 (float32[2]), 1 (float32[2]), 2 (float32[2])",
    ] {
        assert!(err.contains(want), "missing {want:?} in {err}");
    }
    // The same file for a program that carries those names binds by them.
    let (code, out, err) = run_zam(&named, &[by_name.into()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(ZAM), "{out}");
    // A name that is almost a parameter's is refused, not put in the next argument.
    let typo = npz_of(
        &dir,
        "typo",
        &[
            ("zeta", "[1,2]:f32"),
            ("alpha", "[3,4]:f32"),
            ("mi", "[5,6]:f32"),
        ],
    );
    let (code, out, err) = run_zam(&named, &[typo.clone().into()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("member \"mi\" names no parameter")
            && err.contains("\"mid\" (float32[2])")
            && err.contains(&typo.display().to_string()),
        "{err}"
    );
    // Any other non-positional name: argX, arr_, arr_-1, arr_+1, " 0".
    for bad in ["argX", "arr_", "arr_-1", "arr_+1", " 0", "arr0x"] {
        let f = npz_of(
            &dir,
            "bad",
            &[
                ("arr_0", "[1,2]:f32"),
                (bad, "[3,4]:f32"),
                ("arr_2", "[5,6]:f32"),
            ],
        );
        let (code, _, err) = run_zam(&unnamed, &[f.into()]);
        assert_eq!(code, 2, "{bad:?}: {err}");
        assert!(
            err.contains(&format!("member {bad:?} names no parameter")),
            "{bad:?}: {err}"
        );
    }
}

/// np.savez's positional names (`arr_N`), `argN` and `N` fill argument N by their number,
/// whatever their order in the file (`arr_1, arr_2, arr_0` filled 0, 1, 2); one past the
/// arguments is refused.
#[test]
fn npz_positional_members_fill_the_argument_their_number_names() {
    let dir = tmpdir("attack-npz-positional");
    for program in [zeta_alpha_mid(&dir, false), zeta_alpha_mid(&dir, true)] {
        for (tag, members) in [
            (
                "arr",
                [
                    ("arr_1", "[3,4]:f32"),
                    ("arr_2", "[5,6]:f32"),
                    ("arr_0", "[1,2]:f32"),
                ],
            ),
            (
                "mixed",
                [
                    ("arg2", "[5,6]:f32"),
                    ("0", "[1,2]:f32"),
                    ("arr_1", "[3,4]:f32"),
                ],
            ),
        ] {
            let f = npz_of(&dir, tag, &members);
            let (code, out, err) = run_zam(&program, &[f.into()]);
            assert_eq!(code, 0, "{tag}: {err}");
            assert!(out.contains(ZAM), "{tag}: {out}");
        }
        let past = npz_of(
            &dir,
            "past",
            &[
                ("arr_0", "[1,2]:f32"),
                ("arr_1", "[3,4]:f32"),
                ("arr_3", "[5,6]:f32"),
            ],
        );
        let (code, _, err) = run_zam(&program, &[past.into()]);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("member \"arr_3\": the program takes 3 argument(s)"),
            "{err}"
        );
    }
    // A named parameter and positional names mix; an input without KEY= after the file
    // fills the argument after the highest one it filled (not after its last member).
    let named = zeta_alpha_mid(&dir, true);
    let f = npz_of(
        &dir,
        "two",
        &[("alpha", "[3,4]:f32"), ("arr_0", "[1,2]:f32")],
    );
    let (code, out, err) = run_zam(&named, &[f.into(), "[5,6]".into()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(ZAM), "{out}");
}

/// Two members for the same argument, or a member and an `--input` for it, are refused:
/// neither silently wins.
#[test]
fn npz_members_and_inputs_for_the_same_argument_are_refused() {
    let dir = tmpdir("attack-npz-twice");
    let unnamed = zeta_alpha_mid(&dir, false);
    let named = zeta_alpha_mid(&dir, true);
    let twice = npz_of(
        &dir,
        "twice",
        &[
            ("arr_0", "[1,2]:f32"),
            ("arg0", "[9,9]:f32"),
            ("arr_1", "[3,4]:f32"),
        ],
    );
    let (code, _, err) = run_zam(&unnamed, &[twice.into(), "2=[5,6]".into()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("members \"arr_0\" and \"arg0\" both fill argument 0"),
        "{err}"
    );
    let by_name_and_index = npz_of(
        &dir,
        "name_index",
        &[("zeta", "[1,2]:f32"), ("arr_0", "[9,9]:f32")],
    );
    let (code, _, err) = run_zam(&named, &[by_name_and_index.into(), "2=[5,6]".into()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("both fill argument 0 (\"zeta\")"), "{err}");
    let two = npz_of(
        &dir,
        "pair",
        &[("arr_0", "[1,2]:f32"), ("arr_1", "[3,4]:f32")],
    );
    for inputs in [
        vec![
            two.clone().into_os_string(),
            "arg1=[3,4]".into(),
            "[5,6]".into(),
        ],
        vec![
            "1=[3,4]".into(),
            two.clone().into_os_string(),
            "[5,6]".into(),
        ],
    ] {
        let (code, _, err) = run_zam(&unnamed, &inputs);
        assert_eq!(code, 2, "{inputs:?}: {err}");
        assert!(
            err.contains("argument 1 is given twice"),
            "{inputs:?}: {err}"
        );
    }
}

#[test]
fn a_plugin_hanging_in_a_destroy_call_does_not_keep_the_cli_running() {
    // Results printed, the CLI then waited for ever in the plugin's destroy calls at
    // teardown, --plugin-timeout or not. Objects dropped once the work is done now leak.
    let dir = tmpdir("destroy-hang");
    // The fake plugin reports no parameter types: the input is given.
    let program = dir.join("id.mlir");
    std::fs::write(
        &program,
        "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}\n",
    )
    .unwrap();
    let art = dir.join("x.rpjrtexe");
    for entry in [
        "PJRT_Client_Destroy",
        "PJRT_LoadedExecutable_Destroy",
        "PJRT_Executable_Destroy",
    ] {
        let cases: Vec<Vec<std::ffi::OsString>> = vec![
            vec!["info".into(), fake().into()],
            vec![
                "run".into(),
                program.clone().into(),
                "-i".into(),
                "0=[1,2,3,4]:f32".into(),
                "--plugin".into(),
                fake().into(),
            ],
            vec![
                "compile".into(),
                program.clone().into(),
                "-o".into(),
                art.clone().into(),
                "--plugin".into(),
                fake().into(),
            ],
        ];
        for args in cases {
            let mut child = rpjrt()
                .args(&args)
                .env("RPJRT_FAKE_HANG_ON", entry)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            let status = loop {
                if let Some(s) = child.try_wait().unwrap() {
                    break Some(s);
                }
                if std::time::Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            };
            let status =
                status.unwrap_or_else(|| panic!("{args:?} with {entry} hanging: still running"));
            assert_eq!(status.code(), Some(0), "{args:?} with {entry} hanging");
        }
    }
}
