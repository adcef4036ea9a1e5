//! Round 28 (discovery and `launch`) of the CLI's regression tests: `launch` forwards a
//! line of exactly 64 KiB (or a multiple) as itself, with no invented empty line; `plugins`
//! under a low open-files limit lists every plugin (a probe that cannot start costs only
//! its row's version, said in its `problem`); discovery reads each wheel's RECORD once, so
//! hundreds of plugin modules beside hundreds of wheels cost seconds, not minutes; the
//! search list tells unset, set-but-empty and set-but-useless variables apart; and a
//! script whose `#!` interpreter is missing is said to be that, not a missing script.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{rpjrt, tmpdir};

/// Runs `c` with a time limit: (exit code, stdout, stderr); panics past the limit.
fn run_limited(c: &mut Command, limit: Duration) -> (i32, Vec<u8>, String) {
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut b).ok();
        b
    });
    let ereader = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut err, &mut b).ok();
        String::from_utf8_lossy(&b).into_owned()
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (
        status.code().unwrap_or(-1),
        reader.join().unwrap(),
        ereader.join().unwrap(),
    )
}

/// `rpjrt ARGS` under `sh` with the open-files limit `nofile`, in the environment
/// [`rpjrt`] gives.
fn rpjrt_with_nofile(nofile: u32, args: &str) -> Command {
    let c = rpjrt();
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(format!("ulimit -n {nofile} && exec \"$0\" {args}"))
        .arg(c.get_program());
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    sh
}

// --- 4: a line of exactly 64 KiB ------------------------------------------------------------

#[test]
fn a_line_of_a_multiple_of_64_kib_is_forwarded_without_an_empty_line() {
    // "a" * 65536 + "\n" went out as the line and then "[0] ", a line never written.
    let dir = tmpdir("r28-lines");
    for n in [65535usize, 65536, 65537, 131072, 196608] {
        let file = dir.join(format!("l{n}.txt"));
        let mut data = vec![b'a'; n];
        data.extend_from_slice(b"\nnext\n");
        std::fs::write(&file, &data).unwrap();
        let (rc, out, err) = run_limited(
            rpjrt().args(["launch", "-n", "1", "--", "cat"]).arg(&file),
            Duration::from_secs(60),
        );
        assert_eq!(rc, 0, "{err}");
        let lines: Vec<&[u8]> = out
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert!(lines.iter().all(|l| *l != b"[0] "), "{n}: an empty piece");
        assert_eq!(lines.last().copied(), Some(&b"[0] next"[..]), "{n}");
        assert_eq!(lines.len(), n.div_ceil(65536) + 1, "{n}");
        let body: Vec<u8> = lines[..lines.len() - 1]
            .iter()
            .flat_map(|l| l.strip_prefix(b"[0] ").unwrap().to_vec())
            .collect();
        assert_eq!(body.len(), n, "{n}");
    }
}

// --- 5: probes that cannot start --------------------------------------------------------------

/// A site directory with `n` plugin modules under `jax_plugins/`, each a hard link to the
/// fake plugin (a distinct path, no disk use).
fn many_plugins(dir: &Path, n: usize) {
    let fake = common::fake();
    for i in 0..n {
        let d = dir.join(format!("jax_plugins/p{i:03}"));
        std::fs::create_dir_all(&d).unwrap();
        if std::fs::hard_link(&fake, d.join("pjrt_plugin.so")).is_err() {
            std::fs::copy(&fake, d.join("pjrt_plugin.so")).unwrap();
        }
    }
}

/// `rpjrt plugins --json` over the plugins in `dir` under `ulimit -n nofile`: it must
/// succeed and list all 150 of them; their rows.
fn listing_under_nofile(dir: &std::path::Path, nofile: u32) -> Vec<serde_json::Value> {
    let mut c = rpjrt_with_nofile(nofile, "plugins --json");
    c.env("RPJRT_PLUGIN_PATH", dir).env("RPJRT_PYTHON", "");
    let (rc, out, err) = run_limited(&mut c, Duration::from_secs(300));
    assert_eq!(rc, 0, "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let rows = v["plugins"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 150, "{v}");
    rows
}

#[test]
fn plugins_under_a_low_open_files_limit_lists_every_plugin() {
    // 150 plugins and `ulimit -n 200`: the whole listing failed (rc 1, "Too many open
    // files"), naming no plugin and not saying `ulimit -n`.
    let dir = tmpdir("r28-many");
    many_plugins(&dir, 150);
    let rows = listing_under_nofile(&dir, 200);
    // Bounded probes at once: every version is read under that limit.
    assert!(
        rows.iter().all(|r| r["pjrt_version"].is_string()),
        "{:?}",
        rows.iter().find(|r| !r["pjrt_version"].is_string())
    );
    // Far too low a limit for any child: every row is listed, each saying why it has no
    // version and what to do.
    let rows = listing_under_nofile(&dir, 8);
    for r in &rows {
        if r["pjrt_version"].is_null() {
            let why = r["problem"].as_str().unwrap_or_default();
            assert!(why.contains("ulimit -n"), "{r}");
        }
    }
}

// --- 6: discovery reads each RECORD once ---------------------------------------------------------

#[test]
fn many_plugin_modules_beside_many_wheels_are_found_in_linear_time() {
    // 200 plugin modules beside 200 wheels with RECORDs of 140 KB: every RECORD was read
    // once per module (46 s for `rpjrt info cpu` with this debug binary).
    let dir = tmpdir("r28-wheels");
    let record: String = (0..2000)
        .map(|i| format!("pkg/mod{i}/file_{i}.py,sha256=abcdefabcdefabcdefabcdefabcdef,1234\n"))
        .collect();
    for i in 0..200 {
        let d = dir.join(format!("pkg{i}-1.0.dist-info"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("METADATA"),
            format!("Name: pkg{i}\nVersion: 1.0\n\n"),
        )
        .unwrap();
        std::fs::write(d.join("RECORD"), &record).unwrap();
    }
    many_plugins(&dir, 200);
    // One module's wheel still names it (the lookup is not skipped).
    let d = dir.join("pkg7-1.0.dist-info");
    std::fs::write(
        d.join("RECORD"),
        format!("{record}jax_plugins/p007/pjrt_plugin.so,,\n"),
    )
    .unwrap();
    let started = Instant::now();
    let (rc, _, err) = run_limited(
        rpjrt()
            .args(["info", "no-such-plugin"])
            .env("RPJRT_PLUGIN_PATH", &*dir)
            .env("RPJRT_PYTHON", ""),
        Duration::from_secs(120),
    );
    let took = started.elapsed();
    assert_eq!(rc, 2, "{err}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    // The wheel that lists a module is still found (its version and package), and only
    // that module is said to come from a wheel.
    let (rc, out, err) = run_limited(
        rpjrt()
            .args(["plugins", "--json"])
            .env("RPJRT_PLUGIN_PATH", &*dir)
            .env("RPJRT_PYTHON", ""),
        Duration::from_secs(300),
    );
    assert_eq!(rc, 0, "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let rows = v["plugins"].as_array().unwrap();
    assert_eq!(rows.len(), 200);
    for r in rows {
        let (package, version) = match r["name"] == "p007" {
            true => (serde_json::json!("pkg7"), serde_json::json!("1.0")),
            false => (serde_json::Value::Null, serde_json::Value::Null),
        };
        assert_eq!((&r["package"], &r["version"]), (&package, &version), "{r}");
    }
}

// --- 7: unset, set but empty, set but useless ------------------------------------------------------

#[test]
fn the_search_list_tells_unset_from_set_but_empty_or_useless() {
    // RPJRT_PLUGIN_PATH=":" and "" were "unset" (and the advice was to set it);
    // VIRTUAL_ENV= was "unset" too.
    let searched = |env: &[(&str, Option<&str>)]| {
        let mut c = rpjrt();
        c.current_dir(std::env::temp_dir())
            .args(["plugins"])
            .env("RPJRT_PYTHON", "");
        for (k, v) in env {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        let (rc, out, err) = run_limited(&mut c, Duration::from_secs(60));
        assert_eq!(rc, 0, "{err}");
        String::from_utf8_lossy(&out).into_owned()
    };
    let out = searched(&[("RPJRT_PLUGIN_PATH", Some(":")), ("VIRTUAL_ENV", None)]);
    assert!(
        out.contains("RPJRT_PLUGIN_PATH=\":\" names no directory"),
        "{out}"
    );
    assert!(out.contains("VIRTUAL_ENV is not set"), "{out}");
    assert!(!out.contains("set RPJRT_PLUGIN_PATH"), "{out}");
    assert!(out.contains("or set VIRTUAL_ENV"), "{out}");
    let out = searched(&[("RPJRT_PLUGIN_PATH", Some("")), ("VIRTUAL_ENV", Some(""))]);
    assert!(out.contains("RPJRT_PLUGIN_PATH is set but empty"), "{out}");
    assert!(out.contains("VIRTUAL_ENV is set but empty"), "{out}");
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("in:"))
        .unwrap();
    assert!(
        !line.contains("unset") && !line.contains("not set"),
        "{line}"
    );
    assert!(
        !out.contains("set RPJRT_PLUGIN_PATH") && !out.contains("set VIRTUAL_ENV"),
        "{out}"
    );
    let out = searched(&[("RPJRT_PLUGIN_PATH", None), ("VIRTUAL_ENV", None)]);
    assert!(out.contains("RPJRT_PLUGIN_PATH is not set"), "{out}");
    assert!(out.contains("set RPJRT_PLUGIN_PATH to"), "{out}");
    // Set to directories that are not there, or not directories: each is said so.
    let out = searched(&[
        ("RPJRT_PLUGIN_PATH", Some("/nonexistent-r28:/etc/passwd")),
        ("VIRTUAL_ENV", None),
        ("RPJRT_PLUGIN", Some("")),
        ("TPU_LIBRARY_PATH", Some("  ")),
    ]);
    assert!(out.contains("/nonexistent-r28 (does not exist)"), "{out}");
    assert!(out.contains("/etc/passwd (not a directory)"), "{out}");
    assert!(
        out.contains("RPJRT_PLUGIN: (set but empty: ignored)"),
        "{out}"
    );
    assert!(
        out.contains("TPU_LIBRARY_PATH: (set to blank text"),
        "{out}"
    );
    assert!(
        out.contains("PJRT_NAMES_AND_LIBRARY_PATHS: (unset)"),
        "{out}"
    );
}

// --- 8: a script whose interpreter is missing ---------------------------------------------------------

#[test]
fn launch_names_the_missing_interpreter_of_a_script() {
    // 'cannot start "./s.sh" ...: No such file or directory', though ./s.sh is there.
    let dir = tmpdir("r28-interp");
    let write = |name: &str, body: &str, mode: u32| {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    write("s.sh", "#!/nonexistent/interp\necho hi\n", 0o755);
    write("crlf.sh", "#!/bin/sh\r\necho hi\r\n", 0o755);
    write("plain.sh", "#!/bin/sh\necho hi\n", 0o644);
    write("viaplain.sh", "#!./plain.sh\necho hi\n", 0o755);
    let cases = [
        (
            "./s.sh",
            "\"/nonexistent/interp\", does not (bad interpreter",
        ),
        ("./crlf.sh", "Windows (CRLF) line endings"),
        ("./plain.sh", "is not executable (its mode is 0644)"),
        (
            "./viaplain.sh",
            "the interpreter \"./plain.sh\", which is not executable",
        ),
        (
            "s.sh",
            "a program in the current directory is started as ./s.sh",
        ),
        ("./nothing-here", "No such file or directory"),
    ];
    for (program, want) in cases {
        let (rc, _, err) = run_limited(
            rpjrt()
                .current_dir(&*dir)
                .args(["launch", "-n", "2", "--", program]),
            Duration::from_secs(60),
        );
        assert_eq!(rc, 2, "{program}: {err}");
        assert!(
            err.contains(&format!("cannot start \"{program}\"")),
            "{err}"
        );
        assert!(err.contains(want), "{program}: {err}");
    }
    // The script found on PATH is the one explained.
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (rc, _, err) = run_limited(
        rpjrt()
            .env("PATH", path)
            .args(["launch", "-n", "1", "--", "s.sh"]),
        Duration::from_secs(60),
    );
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("(found on PATH)") && err.contains("/nonexistent/interp"),
        "{err}"
    );
}
