//! Round 25 (command line, many processes) of the CLI's regression tests: `rendezvous
//! --plugin` puts its client steps under the bounded, quiet path of every verb
//! (`--plugin-timeout`, the captured log, no destroy to hang in); a process that crashed
//! or failed after its client was made is named by the others at once, and the plugin's
//! waits in the store end at `--timeout`; outputs that are one file through a dangling
//! symbolic link are refused; a bare executable is run with a warning; and the small
//! messages (`rendezvous -o` without `--plugin`, a plugin that formed no multi-process
//! client, `conform` at a limit of a microsecond).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

mod common;

use common::{fake, finish, free_port, rpjrt, run, tmpdir};

const ADD: &str = "func.func @main(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {\n  \
                   %0 = stablehlo.add %a, %b : tensor<3xf32>\n  return %0 : tensor<3xf32>\n}\n";

/// `rpjrt rendezvous` as process `p` of `n` on `port`, with `--timeout`, and `--plugin`
/// the fake when `plugin`; `env` set on top.
fn rendezvous(
    p: usize,
    n: usize,
    port: u16,
    timeout: &str,
    plugin: bool,
    env: &[(&str, &str)],
) -> Command {
    let mut c = rpjrt();
    c.args(["rendezvous", "--timeout", timeout])
        .args(["--process-id", &p.to_string()])
        .args(["--num-processes", &n.to_string()])
        .args(["--coordinator", &format!("127.0.0.1:{port}")])
        .env("RPJRT_TOKEN", "round25");
    if plugin {
        c.arg("--plugin").arg(fake());
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// A job of `per.len()` processes started apart (as under Slurm): each one's (plugin?,
/// environment). Every process's (exit code, stdout, stderr, time).
fn job(per: &[(bool, Vec<(&str, &str)>)], timeout: &str) -> Vec<(i32, String, String, Duration)> {
    let port = free_port();
    let n = per.len();
    let children: Vec<Child> = per
        .iter()
        .enumerate()
        .map(|(p, (plugin, env))| {
            rendezvous(p, n, port, timeout, *plugin, env)
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .enumerate()
        .map(|(p, c)| finish(c, Duration::from_secs(40), &format!("process {p}")))
        .collect()
}

// --- 1: the client steps of `rendezvous --plugin` are bounded and quiet -------------------

/// A plugin hanging in `PJRT_Client_Create` or `PJRT_Client_Devices` kept `rendezvous
/// --plugin` waiting for ever whatever `--plugin-timeout` said; now it gives up at the
/// limit (exit 1), naming the step, with the plugin's log.
#[test]
fn rendezvous_client_steps_end_at_the_plugin_timeout() {
    for entry in ["PJRT_Client_Create", "PJRT_Client_Devices"] {
        let child = rendezvous(0, 1, 0, "20", true, &[("RPJRT_FAKE_HANG_ON", entry)])
            .args(["--plugin-timeout", "1"])
            .spawn()
            .unwrap();
        let (code, out, err, took) = finish(child, Duration::from_secs(30), entry);
        assert_eq!(code, 1, "{entry}: {out}\n{err}");
        assert!(took < Duration::from_secs(15), "{entry}: {took:?}");
        assert!(
            err.contains("did not return within 1.0s (--plugin-timeout)"),
            "{entry}: {err}"
        );
        assert!(err.contains(&format!("{entry}: hanging")), "{entry}: {err}");
        assert!(!out.contains("rendezvous ok"), "{entry}: {out}");
    }
}

/// A plugin hanging in `PJRT_Client_Destroy` held the rendezvous (done and printed) for
/// ever; the client is now left undestroyed, as every verb leaves it.
#[test]
fn rendezvous_does_not_wait_for_the_client_destroy() {
    let child = rendezvous(
        0,
        1,
        0,
        "20",
        true,
        &[("RPJRT_FAKE_HANG_ON", "PJRT_Client_Destroy")],
    )
    .spawn()
    .unwrap();
    let (code, out, err, _) = finish(child, Duration::from_secs(20), "destroy");
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("rendezvous ok"), "{out}");
    assert!(!err.contains("hanging"), "{err}");
}

/// `run` whose client was made and whose inputs are wrong (exit 2) hung in the client's
/// destroy on its way out, its error never said; the same leave-it-undestroyed.
#[test]
fn a_failed_run_does_not_wait_for_the_client_destroy() {
    let dir = tmpdir("r25-run-destroy");
    std::fs::write(dir.join("add.mlir"), ADD).unwrap();
    let child = rpjrt()
        .current_dir(&dir)
        .env("RPJRT_FAKE_HANG_ON", "PJRT_Client_Destroy")
        .args([
            "run",
            "add.mlir",
            "-i",
            "[1,2]:f32",
            "-i",
            "[1,2,3]:f32",
            "--plugin",
        ])
        .arg(fake())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (code, out, err, _) = finish(child, Duration::from_secs(20), "run");
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("does not match"), "{err}");
    assert!(!err.contains("PJRT_Client_Destroy: hanging"), "{err}");
}

/// The plugin's log during a client creation that succeeds was printed; it is captured
/// and dropped, as for `info`.
#[test]
fn rendezvous_captures_the_plugin_log_of_a_good_client_creation() {
    let child = rendezvous(
        0,
        1,
        0,
        "20",
        true,
        &[("RPJRT_FAKE_PRINT_ON", "PJRT_Client_Create")],
    )
    .spawn()
    .unwrap();
    let (code, out, err, _) = finish(child, Duration::from_secs(20), "print");
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("rendezvous ok"), "{out}");
    assert!(!err.contains("a log line on stderr"), "{err}");
    assert!(
        !err.contains("says hello") && !out.contains("says hello"),
        "{out}\n{err}"
    );
}

// --- 4, 5: a process that crashed or failed is named at once ------------------------------

/// Process 2's plugin crashes in `PJRT_Client_Create`: the others waited the plugin's own
/// KV timeout (the fake's 10 s) and blamed a key; now they end at once naming process 2.
#[test]
fn a_process_that_crashed_in_its_client_creation_is_named_at_once() {
    let kv = vec![("RPJRT_FAKE_KV", "1")];
    let crash = vec![
        ("RPJRT_FAKE_KV", "1"),
        ("RPJRT_FAKE_CRASH_ON", "PJRT_Client_Create"),
    ];
    let r = job(&[(true, kv.clone()), (true, kv), (true, crash)], "30");
    for (p, (code, out, err, took)) in r.iter().take(2).enumerate() {
        assert_eq!(*code, 1, "process {p}: {out}\n{err}");
        assert!(
            *took < Duration::from_secs(6),
            "process {p}: {took:?}\n{err}"
        );
        assert!(
            err.contains("process 2 of 3 lost its connection to the store"),
            "process {p}: {err}"
        );
    }
    assert_ne!(r[2].0, 0, "{}", r[2].2);
}

/// The plugin's waits in the store end at `--timeout` (they took the fake's own 10 s):
/// here process 1 runs without `--plugin`, so its key never comes.
#[test]
fn the_plugin_waits_in_the_store_end_at_the_timeout() {
    let r = job(
        &[(true, vec![("RPJRT_FAKE_KV", "1")]), (false, vec![])],
        "2",
    );
    for (p, (code, out, err, took)) in r.iter().enumerate() {
        assert_eq!(*code, 1, "process {p}: {out}\n{err}");
        assert!(
            *took < Duration::from_secs(7),
            "process {p}: {took:?}\n{err}"
        );
    }
    assert!(r[0].2.contains("was not set within 2.0s"), "{}", r[0].2);
    assert!(r[0].2.contains("--timeout"), "{}", r[0].2);
    // The process without --plugin hears why, rather than only that process 0 is late.
    assert!(r[1].2.contains("another process failed"), "{}", r[1].2);
}

/// A failure after the client was made (`PJRT_Client_Devices`, `PJRT_Client_ProcessIndex`)
/// was published but not read: the others waited in the last barrier and blamed a lost
/// connection. Now they name the error, at once, whichever process failed.
#[test]
fn a_failure_after_client_creation_is_named_by_the_others() {
    for (failing, entry) in [(1, "PJRT_Client_Devices"), (0, "PJRT_Client_ProcessIndex")] {
        let spec = format!("{entry}:INTERNAL:round25 broke it");
        let bad = vec![("RPJRT_FAKE_KV", "1"), ("RPJRT_FAKE_FAIL", spec.as_str())];
        let good = vec![("RPJRT_FAKE_KV", "1")];
        let per = match failing {
            0 => [(true, bad), (true, good)],
            _ => [(true, good), (true, bad)],
        };
        let r = job(&per, "20");
        let other = 1 - failing;
        let (code, out, err, took) = &r[other];
        assert_eq!(*code, 1, "{entry}: {out}\n{err}");
        assert!(*took < Duration::from_secs(4), "{entry}: {took:?}\n{err}");
        assert!(
            err.contains("another process failed") && err.contains("round25 broke it"),
            "{entry}: {err}"
        );
        assert!(err.contains(entry), "{entry}: {err}");
        let (code, _, err, took) = &r[failing];
        assert_eq!(*code, 1, "{entry}: {err}");
        assert!(*took < Duration::from_secs(4), "{entry}: {took:?}\n{err}");
    }
}

// --- 7a, 7b: rendezvous' small messages ---------------------------------------------------

/// `-o` without `--plugin` was parsed and ignored (exit 0); it is refused.
#[test]
fn rendezvous_refuses_options_without_a_plugin() {
    let (code, out, err) = run(rpjrt()
        .args(["rendezvous", "--process-id", "0", "--num-processes", "1"])
        .args(["--coordinator", "127.0.0.1:0", "-o", "cpu_device_count=2"]));
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("--plugin"), "{err}");
    assert!(!out.contains("rendezvous ok"), "{out}");
}

/// A plugin that made a client of its own devices in each process (the fake without its
/// KV exchange, as XLA's CPU plugin does) passed as "rendezvous ok" with no word; it now
/// says that no multi-process client formed. A plugin that formed one says nothing.
#[test]
fn rendezvous_says_when_no_multi_process_client_formed() {
    let r = job(&[(true, vec![]), (true, vec![])], "20");
    for (p, (code, out, err, _)) in r.iter().enumerate() {
        assert_eq!(*code, 0, "process {p}: {out}\n{err}");
        assert!(out.contains("rendezvous ok"), "{out}");
        assert!(
            err.contains("warning") && err.contains("formed no multi-process client"),
            "process {p}: {err}"
        );
    }
    let kv = vec![("RPJRT_FAKE_KV", "1")];
    let r = job(&[(true, kv.clone()), (true, kv)], "20");
    for (p, (code, out, err, _)) in r.iter().enumerate() {
        assert_eq!(*code, 0, "process {p}: {out}\n{err}");
        assert!(!err.contains("formed no multi-process client"), "{err}");
    }
}

// --- 2: outputs that are one file through a dangling link --------------------------------

/// `L` a link to `T`, which does not exist yet: `--out L --trace T` wrote both into `T`
/// (exit 0, the outputs lost). Refused now, as when `T` exists, also through a chain of
/// links in other folders (each read from its own folder) and an absolute link.
#[test]
fn outputs_that_meet_through_a_dangling_link_are_refused() {
    let dir = tmpdir("r25-dangling");
    std::fs::write(dir.join("add.mlir"), ADD).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    let attempt = |out: &str, trace: &str| {
        run(rpjrt()
            .current_dir(&dir)
            .args(["run", "add.mlir", "-i", "[1,2,3]:f32", "-i", "[4,5,6]:f32"])
            .arg("--plugin")
            .arg(fake())
            .args(["--out", out, "--trace", trace]))
    };
    // A direct link.
    std::os::unix::fs::symlink("T.json", dir.join("L.npz")).unwrap();
    let (code, out, err) = attempt("L.npz", "T.json");
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("name the same file"), "{err}");
    assert!(!dir.join("T.json").exists());
    // A chain: C.npz -> sub/M.npz -> ../T2.json (relative to sub/).
    std::os::unix::fs::symlink("../T2.json", dir.join("sub/M.npz")).unwrap();
    std::os::unix::fs::symlink("sub/M.npz", dir.join("C.npz")).unwrap();
    let (code, out, err) = attempt("C.npz", "T2.json");
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("name the same file"), "{err}");
    assert!(!dir.join("T2.json").exists());
    // An absolute link, the other way round (the trace through the link).
    std::os::unix::fs::symlink(dir.join("O.npz"), dir.join("A.json")).unwrap();
    let (code, out, err) = attempt("O.npz", "A.json");
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("name the same file"), "{err}");
    assert!(!dir.join("O.npz").exists());
    // Distinct files still run.
    let (code, out, err) = attempt("o.npz", "t.json");
    assert_eq!(code, 0, "{out}\n{err}");
}

/// `conform --json J --html P` with `J` a link to `P`, not there yet: the page replaced
/// the report. Refused now.
#[test]
fn conform_reports_that_meet_through_a_dangling_link_are_refused() {
    let dir = tmpdir("r25-dangling-conform");
    std::os::unix::fs::symlink("P.html", dir.join("J.json")).unwrap();
    let (code, out, err) = run(rpjrt().current_dir(&dir).arg("conform").arg(fake()).args([
        "--only",
        "api.version",
        "--json",
        "J.json",
        "--html",
        "P.html",
    ]));
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("name the same file"), "{err}");
    assert!(!dir.join("P.html").exists());
}

// --- 3: a bare executable is run with a warning -------------------------------------------

/// The fake plugin's bare serialized executable of the program `add.mlir` in `dir`: what
/// its `PJRT_Executable_Serialize` gave, taken from the artifact `rpjrt compile` wraps it
/// in (the fake's magic, then format, options and code, each after its length).
fn fake_bare_executable(dir: &std::path::Path) -> Vec<u8> {
    let (code, out, err) = run(rpjrt()
        .current_dir(dir)
        .args(["compile", "add.mlir", "-o", "add.rpjrt", "--plugin"])
        .arg(fake()));
    assert_eq!(code, 0, "{out}\n{err}");
    let artifact = std::fs::read(dir.join("add.rpjrt")).unwrap();
    let magic = b"RPJRT-FAKE-EXECUTABLE\x01";
    let start = artifact
        .windows(magic.len())
        .position(|w| w == magic)
        .expect("the fake's executable in the artifact");
    let mut end = start + magic.len();
    for _ in 0..3 {
        let len = u64::from_le_bytes(artifact[end..end + 8].try_into().unwrap()) as usize;
        end += 8 + len;
    }
    artifact[start..end].to_vec()
}

/// A bare executable of another plugin build may compute garbage with exit 0; nothing
/// said so. It still runs, with a warning saying the bytes carry no record of the build
/// that wrote them and pointing to the checked artifact.
#[test]
fn a_bare_executable_runs_with_a_warning() {
    let dir = tmpdir("r25-bare");
    std::fs::write(dir.join("add.mlir"), ADD).unwrap();
    std::fs::write(dir.join("add.exe"), fake_bare_executable(&dir)).unwrap();
    let (code, out, err) = run(rpjrt()
        .current_dir(&dir)
        .args(["run", "add.exe", "--format", "executable"])
        .args(["-i", "[1,2,3]:f32", "-i", "[4,5,6]:f32", "--plugin"])
        .arg(fake()));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("out0"), "{out}");
    assert!(err.contains("warning"), "{err}");
    assert!(err.contains("no record of the plugin build"), "{err}");
    assert!(err.contains("rpjrt compile"), "{err}");
    // A program, and the artifact rpjrt checks, are not warned about.
    for program in ["add.mlir", "add.rpjrt"] {
        let (code, _, err) = run(rpjrt()
            .current_dir(&dir)
            .args(["run", program, "-i", "[1,2,3]:f32", "-i", "[4,5,6]:f32"])
            .arg("--plugin")
            .arg(fake()));
        assert_eq!(code, 0, "{program}: {err}");
        assert!(
            !err.contains("no record of the plugin build"),
            "{program}: {err}"
        );
    }
}

// --- 7f: conform at a limit of a microsecond ---------------------------------------------

/// At `--timeout 0.000001`, a child that had exited was now and then taken for one whose
/// output a helper process held open (a note saying so, and a check given `crash`), when
/// its end of file was only on its way.
#[test]
fn conform_at_a_microsecond_does_not_imagine_a_helper_process() {
    let dir = tmpdir("r25-conform-us");
    for i in 0..12 {
        let report = dir.join(format!("r{i}.json"));
        let (code, out, err) = run(rpjrt()
            .arg("conform")
            .arg(fake())
            .args([
                "--only",
                "api.*,client.*",
                "--timeout",
                "0.000001",
                "--json",
            ])
            .arg(&report));
        assert!(code == 0 || code == 1, "{out}\n{err}");
        let text = std::fs::read_to_string(&report).unwrap();
        assert!(!text.contains("stayed open"), "run {i}: {text}");
        assert!(!text.contains("\"outcome\": \"crash\""), "run {i}: {text}");
        assert!(text.contains("\"outcome\": "), "run {i}: {text}");
    }
}

/// `compile --cache-dir` is bounded by `RPJRT_CACHE_MAX_BYTES`, as a cache named by
/// `RPJRT_CACHE_DIR` is, and a malformed bound is refused (exit 2) for both.
#[test]
fn a_cache_named_by_cache_dir_is_bounded_by_the_environment() {
    let dir = tmpdir("r25-cache-bound");
    let program = dir.join("add.mlir");
    std::fs::write(&program, ADD).unwrap();
    let cache = dir.join("cache");
    let compile = |bound: &str, out: &str| {
        let mut c = rpjrt();
        c.args(["compile", program.to_str().unwrap(), "-o"])
            .arg(dir.join(out))
            .args(["--plugin", common::new().to_str().unwrap(), "--cache-dir"])
            .arg(&cache)
            .env("RPJRT_CACHE_MAX_BYTES", bound)
            .env_remove("RPJRT_CACHE_DIR");
        run(&mut c)
    };
    let (code, out, err) = compile("1", "a.rpjrt");
    assert_eq!(code, 0, "{out}{err}");
    let entries = std::fs::read_dir(&cache)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "rpjrtexe"))
        })
        .count();
    assert_eq!(entries, 0, "a 1-byte bound keeps no entry");
    let (code, out, err) = compile("lots", "b.rpjrt");
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("RPJRT_CACHE_MAX_BYTES"), "{err}");
}
