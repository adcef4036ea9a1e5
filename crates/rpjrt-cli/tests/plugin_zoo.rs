//! What loading the plugins published on PyPI taught, checked without them: plugins that
//! print on stdout (the fake plugin's `RPJRT_FAKE_PRINT_ON`), plugins whose sibling
//! libraries are missing (a tiny library built with `cc` that needs two that do not
//! exist), and discovery through the `python3` on PATH. The real wheels are the opt-in
//! tier `scripts/test-zoo.sh`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

mod common;

use common::{fake, run, tmpdir};

/// The hermetic command, also without `LD_LIBRARY_PATH` (the missing-sibling tests).
fn rpjrt() -> Command {
    let mut c = common::rpjrt();
    c.env_remove("LD_LIBRARY_PATH");
    c
}

#[test]
fn a_plugin_printing_on_stdout_keeps_json_valid_and_its_log_quiet() {
    let entries = "PJRT_Plugin_Initialize,PJRT_Client_Create,PJRT_Plugin_Attributes";
    let (code, out, err) = run(rpjrt()
        .args(["info", "--json"])
        .arg(fake())
        .env("RPJRT_FAKE_PRINT_ON", entries));
    assert_eq!(code, 0, "{err}");
    let v: Json = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(v["pjrt_version"].is_string(), "{v}");
    assert!(!out.contains("says hello"), "{out}");
    // Quiet by default: neither the prints nor the log lines reach the terminal...
    assert!(!err.contains("RPJRT_FAKE_PRINT_ON"), "{err}");
    assert!(!err.contains("says hello"), "{err}");
    // ...and --plugin-log lets them through, on stderr.
    let (code, out, err) = run(rpjrt()
        .args(["info", "--json", "--plugin-log"])
        .arg(fake())
        .env("RPJRT_FAKE_PRINT_ON", entries));
    assert_eq!(code, 0, "{err}");
    serde_json::from_str::<Json>(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(
        err.contains("PJRT_Client_Create says hello on stdout"),
        "{err}"
    );
    assert!(err.contains("a log line on stderr"), "{err}");
}

#[test]
fn a_failing_plugin_shows_its_captured_log() {
    let (code, out, err) = run(rpjrt()
        .args(["info", "--json"])
        .arg(fake())
        .env("RPJRT_FAKE_PRINT_ON", "PJRT_Client_Create")
        .env(
            "RPJRT_FAKE_FAIL",
            "PJRT_Client_Create:UNAVAILABLE:no device here",
        ));
    assert_eq!(code, 1, "{err}");
    let v: Json = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(
        v["client_error"]
            .as_str()
            .unwrap()
            .contains("no device here"),
        "{v}"
    );
    assert!(err.contains("the plugin's log"), "{err}");
    assert!(
        err.contains("PJRT_Client_Create: a log line on stderr"),
        "{err}"
    );
}

/// Builds `x.so` needing `libzoomissing1.so` and `libcudart.so.99`-like names that do not
/// exist (stub libraries are linked, then deleted).
fn library_with_missing_siblings(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("stub.c"), "int stub_fn(void) { return 1; }\n").unwrap();
    std::fs::write(dir.join("x.c"), "int x_fn(void) { return 2; }\n").unwrap();
    for name in ["zoomissing1", "zoomissing2"] {
        let lib = format!("lib{name}.so");
        let ok = Command::new("cc")
            .args(["-shared", "-fPIC", "-o", &lib, "stub.c"])
            .current_dir(dir)
            .status()
            .expect("cc runs");
        assert!(ok.success());
    }
    let ok = Command::new("cc")
        .args([
            "-shared",
            "-fPIC",
            "-o",
            "x.so",
            "x.c",
            "-Wl,--no-as-needed",
            "-L.",
            "-lzoomissing1",
            "-lzoomissing2",
        ])
        .current_dir(dir)
        .status()
        .expect("cc runs");
    assert!(ok.success());
    for name in ["zoomissing1", "zoomissing2"] {
        std::fs::remove_file(dir.join(format!("lib{name}.so"))).unwrap();
    }
    dir.join("x.so")
}

#[test]
fn every_missing_library_is_named_not_the_first_only() {
    let dir = tmpdir("missing");
    let lib = library_with_missing_siblings(&dir);
    let (code, _, err) = run(rpjrt().arg("info").arg(&lib));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("libzoomissing1.so"), "{err}");
    assert!(err.contains("libzoomissing2.so"), "{err}");
    assert!(err.contains("2 libraries"), "{err}");
    assert!(!err.contains("the file is not there"), "{err}");
    // The same library through the core, with what provides each name.
    let missing = rpjrt::diagnostics::missing_libraries(&lib).unwrap();
    let names: Vec<&str> = missing.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names.len(), 2, "{missing:?}");
    assert!(missing.iter().all(|m| m.needed_by == lib), "{missing:?}");
    // Found once they are on LD_LIBRARY_PATH (stubs rebuilt in another directory).
    let stubs = tmpdir("stubs");
    std::fs::write(stubs.join("stub.c"), "int stub_fn(void) { return 1; }\n").unwrap();
    for name in ["zoomissing1", "zoomissing2"] {
        let ok = Command::new("cc")
            .args(["-shared", "-fPIC", "-o", &format!("lib{name}.so"), "stub.c"])
            .current_dir(&stubs)
            .status()
            .unwrap();
        assert!(ok.success());
    }
    let (_, _, err) = run(rpjrt()
        .arg("info")
        .arg(&lib)
        .env("LD_LIBRARY_PATH", &*stubs));
    assert!(err.contains("GetPjrtApi"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&stubs).unwrap();
}

#[test]
fn providers_are_named_for_known_libraries() {
    use rpjrt::diagnostics::library_provider;
    assert!(library_provider("libcuda.so.1")
        .unwrap()
        .contains("NVIDIA driver"));
    assert!(library_provider("libcudart.so.12")
        .unwrap()
        .contains("nvidia-*"));
    assert!(library_provider("libamdhip64.so.7")
        .unwrap()
        .contains("ROCm"));
    assert!(library_provider("libmpi.so.12").unwrap().contains("MPI"));
    assert!(library_provider("libsycl.so.8").unwrap().contains("oneAPI"));
    assert_eq!(library_provider("libzoomissing1.so"), None);
}

#[test]
fn the_install_hint_is_said_once() {
    let (code, _, err) = run(rpjrt().args(["info", "/nonexistent/plugin.so"]));
    assert_ne!(code, 0);
    assert_eq!(err.matches("pip install").count(), 1, "{err}");
}

/// A fake `python3` that prints `site` as its only site directory (or sleeps).
fn fake_python(dir: &Path, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("python3");
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn the_python_on_path_is_asked_for_its_site_directories() {
    let site = common::old()
        .ancestors()
        .find(|a| a.ends_with("site-packages"))
        .expect("the plugin is in a site-packages directory")
        .to_path_buf();
    let dir = tmpdir("python");
    let python = fake_python(&dir, &format!("echo '{}'", site.display()));
    let (code, out, err) = run(rpjrt()
        .args(["plugins", "--json"])
        .env("RPJRT_PYTHON", &python));
    assert_eq!(code, 0, "{err}");
    let v: Json = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = v["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(names.iter().any(|n| n.contains("xla")), "{v}");
    // An interpreter that does not answer is given up on after the timeout.
    let slow = fake_python(&dir, "exec sleep 30");
    let started = Instant::now();
    let (code, _, err) = run(rpjrt().args(["plugins"]).env("RPJRT_PYTHON", &slow));
    assert_eq!(code, 0, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_plugin_that_does_not_answer_is_reported_while_its_log_is_captured() {
    use std::io::Read;
    let mut child = rpjrt()
        .args(["info", "--json"])
        .arg(fake())
        .env("RPJRT_FAKE_HANG_ON", "PJRT_Client_Create")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        // Reads until the note arrives (or the pipe closes when the child is killed).
        let mut seen = Vec::new();
        let mut buf = [0u8; 512];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            if String::from_utf8_lossy(&seen).contains("still waiting") {
                break;
            }
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    let started = Instant::now();
    while !reader.is_finished() && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let err = reader.join().unwrap();
    assert!(err.contains("still waiting after 5s"), "{err}");
    assert!(err.contains("creating a client"), "{err}");
    // The plugin's own line ("hanging") stays in the capture.
    assert!(!err.contains("RPJRT_FAKE_HANG_ON"), "{err}");
}

/// Runs `c` (a command whose plugin hangs) with its stderr in `log`, until the CLI's
/// "still waiting" note appears or 30 s pass (or it ends), kills it, and returns what it
/// wrote on stderr.
fn stderr_until_slow_note(mut c: Command, log: &Path) -> String {
    let mut child = c
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut err = String::new();
    while started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(250));
        err = std::fs::read_to_string(log).unwrap_or_default();
        if err.contains("still waiting after") || child.try_wait().ok().flatten().is_some() {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    err
}

/// The note on a libtpu that does not answer says how to skip its wait for the cloud
/// metadata server (libtpu retries it for minutes off a Cloud TPU VM); another plugin's
/// note does not mention it. The fake plugin stands in for libtpu under libtpu's name.
#[test]
fn the_slow_load_note_on_libtpu_names_the_metadata_server_variable() {
    let dir = tmpdir("zoo-slow-libtpu");
    let libtpu = dir.join("libtpu").join("libtpu.so");
    std::fs::create_dir_all(libtpu.parent().unwrap()).unwrap();
    let other = fake();
    std::fs::copy(&other, &libtpu).unwrap();
    for (plugin, named) in [(libtpu.as_path(), true), (other.as_path(), false)] {
        let mut c = rpjrt();
        c.args(["info", "--json", "--plugin-timeout", "8"])
            .arg(plugin)
            .env("RPJRT_FAKE_HANG_ON", "PJRT_Client_Create");
        let err = stderr_until_slow_note(c, &dir.join("stderr.txt"));
        assert!(err.contains("still waiting after 5s"), "{plugin:?}: {err}");
        assert_eq!(
            err.contains("TPU_SKIP_MDS_QUERY=1"),
            named,
            "{plugin:?}: {err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--plugin-timeout` (or `RPJRT_PLUGIN_TIMEOUT`) gives up on a plugin that does not return
/// from client creation: status 1 soon after the limit, naming the call and showing the
/// plugin's log so far; a bad value is a usage error before anything loads.
#[test]
fn a_plugin_that_does_not_answer_is_given_up_on_after_the_timeout() {
    for (option, env) in [(Some("1"), None), (None, Some("1"))] {
        let mut c = rpjrt();
        c.args(["info", "--json"]).arg(fake());
        if let Some(o) = option {
            c.args(["--plugin-timeout", o]);
        }
        if let Some(e) = env {
            c.env("RPJRT_PLUGIN_TIMEOUT", e);
        }
        c.env("RPJRT_FAKE_HANG_ON", "PJRT_Client_Create");
        let started = Instant::now();
        let (code, out, err) = run(&mut c);
        let took = started.elapsed();
        assert_eq!(code, 1, "{err}");
        assert!(took < Duration::from_secs(20), "took {took:?}");
        assert!(out.is_empty(), "{out}");
        // The limit is named with what set it.
        let named = if option.is_some() {
            "did not return within 1.0s (--plugin-timeout)"
        } else {
            "did not return within 1.0s (RPJRT_PLUGIN_TIMEOUT)"
        };
        assert!(
            err.contains("creating a client") && err.contains(named),
            "{err}"
        );
        assert!(err.contains("PJRT_Client_Create: hanging"), "{err}");
        // Said once: the supervising parent took the child's end for a plugin's exit()
        // and repeated the log under a second, false error.
        assert_eq!(err.matches("did not return within").count(), 1, "{err}");
        assert_eq!(
            err.matches("PJRT_Client_Create: hanging").count(),
            1,
            "{err}"
        );
        assert!(!err.contains("called exit()"), "{err}");
    }
    // The same for a library that hangs while the system's loader loads it, and for the
    // other supervised verbs.
    let program = common::fixture("mul_add.mlir");
    let verbs: [&[&str]; 2] = [&["info"], &["run", "--random"]];
    for verb in verbs {
        let mut c = rpjrt();
        c.args(verb);
        if verb[0] == "run" {
            c.arg(&program).arg("--plugin");
        }
        c.arg(fake())
            .args(["--plugin-timeout", "1"])
            .env("RPJRT_FAKE_HANG_ON", "dlopen");
        let (code, _, err) = run(&mut c);
        assert_eq!(code, 1, "{verb:?}: {err}");
        assert_eq!(err.matches("did not return within").count(), 1, "{err}");
        assert!(!err.contains("called exit()"), "{verb:?}: {err}");
    }
    for bad in ["0", "-3", "nan", "soon"] {
        let (code, _, err) = run(rpjrt().args(["info", "--plugin-timeout", bad]).arg(fake()));
        assert_eq!(code, 2, "--plugin-timeout {bad}: {err}");
        let (code, _, err) = run(rpjrt()
            .args(["info"])
            .arg(fake())
            .env("RPJRT_PLUGIN_TIMEOUT", bad));
        assert_eq!(code, 2, "RPJRT_PLUGIN_TIMEOUT={bad}: {err}");
        assert!(err.contains("RPJRT_PLUGIN_TIMEOUT"), "{err}");
    }
}

/// `rpjrt plugins` reads every version at once, each in its own child: three copies of a
/// library that never returns from loading cost one timeout in all (they cost one each,
/// 60 s apiece by default, before: 15 s here), and are listed with what went wrong.
#[test]
fn libraries_that_hang_while_loading_cost_one_timeout_together() {
    let dir = tmpdir("zoo-hang-three");
    let mut entries = Vec::new();
    for i in 0..3 {
        let copy = dir.join(format!("hang{i}.so"));
        std::fs::copy(fake(), &copy).unwrap();
        entries.push(format!("hang{i}:{}", copy.display()));
    }
    let started = Instant::now();
    let (code, out, err) = run(rpjrt()
        .args(["plugins", "--json"])
        .env("PJRT_NAMES_AND_LIBRARY_PATHS", entries.join(","))
        .env("RPJRT_FAKE_HANG_ON", "GetPjrtApi")
        .env("RPJRT_PLUGIN_TIMEOUT", "5"));
    let took = started.elapsed();
    assert_eq!(code, 0, "{err}");
    let v: Json = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let rows: Vec<&Json> = v["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["name"].as_str().unwrap_or("").starts_with("hang"))
        .collect();
    assert_eq!(rows.len(), 3, "{v}");
    for r in rows {
        assert!(r["pjrt_version"].is_null(), "{r}");
        assert!(
            r["problem"]
                .as_str()
                .unwrap_or("")
                .contains("did not finish in 5.0s"),
            "{r}"
        );
    }
    assert!(took < Duration::from_secs(14), "{took:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `info` shows the `PJRT_Api.struct_size` the plugin reported when the loader clamped it
/// to the slots of the plugin's version: it showed the clamped size as the plugin's.
#[test]
fn info_shows_a_table_size_the_loader_clamped() {
    let (code, out, err) = run(rpjrt()
        .args(["info", "--json"])
        .arg(fake())
        .env("RPJRT_FAKE_VERSION", "0.81")
        .env("RPJRT_FAKE_API_STRUCT_SIZE", "1144"));
    assert_eq!(code, 0, "{err}");
    let v: Json = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["claimed_table_size"], 1144, "{v}");
    assert_eq!(v["table_size"], 984, "{v}");
    let (code, out, err) = run(rpjrt()
        .arg("info")
        .arg(fake())
        .env("RPJRT_FAKE_API_STRUCT_SIZE", "2001"));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("the plugin's table claims 2001 bytes; rpjrt uses 1144 bytes"),
        "{out}"
    );
    // An honest plugin: one size.
    let (code, out, err) = run(rpjrt().args(["info", "--json"]).arg(fake()));
    assert_eq!(code, 0, "{err}");
    let v: Json = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["claimed_table_size"], v["table_size"], "{v}");
}

/// A plugin that does not return from compiling (or executing) is named on stderr after a
/// few seconds, as one that does not return from loading is: `compile` and `run` waited
/// silently for ever.
#[test]
fn a_plugin_hanging_in_compile_or_execute_is_named_while_waited_on() {
    let dir = tmpdir("zoo-hang-compile");
    let program = common::fixture("mul_add.mlir");
    let cases: [(&[&str], &str, &str); 2] = [
        (
            &["compile"],
            "PJRT_Client_Compile",
            "the plugin's compile of",
        ),
        (
            &[
                "run",
                "-i",
                "0=[1,2,3,4,5,6,7,8]:f32",
                "-i",
                "1=[1,1,1,1,1,1,1,1]:f32",
            ],
            "PJRT_LoadedExecutable_Execute",
            "the plugin's execution",
        ),
    ];
    for (verb, entry, want) in cases {
        let mut c = rpjrt();
        c.args(verb).arg(&program).arg("--plugin").arg(fake());
        if verb[0] == "compile" {
            c.arg("-o").arg(dir.join("x.rpjrtexe"));
        }
        c.env("RPJRT_FAKE_HANG_ON", entry);
        let err = stderr_until_slow_note(c, &dir.join("stderr.txt"));
        assert!(err.contains("still waiting after 5s"), "{verb:?}: {err}");
        assert!(err.contains(want), "{verb:?}: {err}");
    }
}

/// `conform` honours `--plugin-timeout` (and `RPJRT_PLUGIN_TIMEOUT`) for the load in its
/// children: it waited a fixed minute for a load that hung, then reported its own kill as
/// "killed by SIGKILL (9)", as if the plugin had crashed.
#[test]
fn conform_gives_up_on_a_load_at_the_plugin_timeout_naming_it() {
    for (hang, option, step) in [
        ("dlopen", true, "the system's library loader"),
        ("dlopen", false, "the system's library loader"),
        ("GetPjrtApi", true, "GetPjrtApi"),
    ] {
        let mut c = rpjrt();
        if option {
            c.args(["--plugin-timeout", "2"]);
        } else {
            c.env("RPJRT_PLUGIN_TIMEOUT", "2");
        }
        c.arg("conform")
            .arg(fake())
            .args(["--timeout", "3", "--only", "api.version"])
            .env("RPJRT_FAKE_HANG_ON", hang);
        let started = Instant::now();
        let (code, _, err) = run(&mut c);
        let took = started.elapsed();
        assert_eq!(code, 1, "{hang}: {err}");
        assert!(
            took < Duration::from_secs(20),
            "{hang}: took {took:?}: {err}"
        );
        let named = if option {
            "did not return within 2.0s (--plugin-timeout)"
        } else {
            "did not return within 2.0s (RPJRT_PLUGIN_TIMEOUT)"
        };
        assert!(err.contains(named), "{hang}: {err}");
        assert!(err.contains(&format!(", in {step}")), "{hang}: {err}");
        assert!(!err.contains("SIGKILL"), "{hang}: {err}");
    }
}

/// A short `--plugin-timeout` is named as given, in milliseconds: 0.0001 s read "0s".
#[test]
fn a_short_plugin_timeout_is_not_shown_as_zero() {
    let (code, _, err) = run(rpjrt()
        .arg("info")
        .arg(fake())
        .env("RPJRT_PLUGIN_TIMEOUT", "0.0001")
        .env("RPJRT_FAKE_HANG_ON", "PJRT_Client_Create"));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("did not return within 0.1ms (RPJRT_PLUGIN_TIMEOUT)"),
        "{err}"
    );
    assert!(!err.contains("within 0s"), "{err}");
}

/// A plugin timeout too short to measure is refused like a zero one (1e-10 s was a limit
/// of 0 ns, shown "0.0s"), and a limit is shown as given (1.96 s read "2.0s").
#[test]
fn plugin_timeouts_under_a_microsecond_are_refused_and_limits_shown_as_given() {
    for tiny in ["1e-10", "1e-12", "0.0000009"] {
        let (code, _, err) = run(rpjrt().args(["info", "--plugin-timeout", tiny]).arg(fake()));
        assert_eq!(code, 2, "--plugin-timeout {tiny}: {err}");
        assert!(
            err.contains("--plugin-timeout must be at least 0.000001 seconds (1µs)"),
            "{err}"
        );
        let (code, _, err) = run(rpjrt()
            .arg("info")
            .arg(fake())
            .env("RPJRT_PLUGIN_TIMEOUT", tiny));
        assert_eq!(code, 2, "RPJRT_PLUGIN_TIMEOUT={tiny}: {err}");
        assert!(
            err.contains("RPJRT_PLUGIN_TIMEOUT must be at least 0.000001 seconds"),
            "{err}"
        );
        assert!(!err.contains("0.0s"), "{err}");
    }
    // A long value is shown short.
    let (code, _, err) = run(rpjrt()
        .arg("info")
        .arg(fake())
        .env("RPJRT_PLUGIN_TIMEOUT", "x".repeat(100_000)));
    assert_eq!(code, 2, "{}", &err[..err.len().min(500)]);
    assert!(err.len() < 1000, "{} bytes", err.len());
    assert!(err.contains("(100000 bytes)"), "{err}");
    let (code, _, err) = run(rpjrt()
        .args(["info", "--plugin-timeout", "1.96"])
        .arg(fake())
        .env("RPJRT_FAKE_HANG_ON", "PJRT_Client_Create"));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("did not return within 1.96s (--plugin-timeout)"),
        "{err}"
    );
}

/// A plugin path that cannot be read for another reason than its absence (a loop of
/// symbolic links) is not said to be "not there".
#[test]
fn a_symlink_loop_is_not_called_a_missing_file() {
    let dir = tmpdir("zoo-symlink-loop");
    let (a, b) = (dir.join("loop1.so"), dir.join("loop2.so"));
    let _ = std::fs::remove_file(&a);
    let _ = std::fs::remove_file(&b);
    std::os::unix::fs::symlink(&b, &a).unwrap();
    std::os::unix::fs::symlink(&a, &b).unwrap();
    let (code, _, err) = run(rpjrt().arg("info").arg(&a));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("loop of symbolic links"), "{err}");
    assert!(!err.contains("not there"), "{err}");
    let (code, _, err) = run(rpjrt().arg("info").arg(dir.join("absent.so")));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not there"), "{err}");
}
