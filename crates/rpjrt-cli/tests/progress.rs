//! Progress lines on a terminal: the binary run under a pseudo-terminal (util-linux's
//! `script`, present on every Debian system) shows which conform check runs and a spinner
//! for a compile that takes longer than a second; piped, or with `--json`, it shows none.
//! A missing `script` or plugin fails these tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn old_plugin() -> PathBuf {
    if let Some(p) = std::env::var_os("RPJRT_TEST_PLUGIN_OLD").filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    let text = std::fs::read_to_string(root().join(".deps/plugins.env")).expect(
        "RPJRT_TEST_PLUGIN_OLD unset and .deps/plugins.env unreadable: run scripts/setup.sh",
    );
    let line = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("RPJRT_TEST_PLUGIN_OLD="))
        .next_back()
        .expect("no RPJRT_TEST_PLUGIN_OLD in .deps/plugins.env");
    PathBuf::from(line.trim().trim_matches('"'))
}

fn fake_plugin() -> PathBuf {
    if let Some(p) = std::env::var_os("RPJRT_FAKE_PLUGIN") {
        return PathBuf::from(p);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let p = target.join("debug/librpjrt_fake_plugin.so");
    assert!(
        p.exists(),
        "{} missing: cargo build -p rpjrt-fake-plugin",
        p.display()
    );
    p
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The command line of the binary with `args`, for a shell.
fn command_line(args: &[String]) -> String {
    let mut words = vec![quote(env!("CARGO_BIN_EXE_rpjrt"))];
    words.extend(args.iter().map(|a| quote(a)));
    words.join(" ")
}

/// Runs the binary with `args` and `env` under a pseudo-terminal for at most `seconds`;
/// returns everything the terminal got.
fn on_terminal(args: &[String], env: &[(&str, &str)], seconds: u32) -> String {
    let mut c = Command::new("timeout");
    c.args([format!("{seconds}"), "script".into(), "-qec".into()])
        .arg(command_line(args))
        .arg("/dev/null")
        .stdin(Stdio::null())
        .env_remove("NO_COLOR")
        .env_remove("RPJRT_PLUGIN_LOG")
        .env("RPJRT_PYTHON", "");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("`script` (util-linux) runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The same, piped: (stdout, stderr).
fn piped(args: &[String], env: &[(&str, &str)], seconds: u32) -> (String, String) {
    let mut c = Command::new("timeout");
    c.arg(format!("{seconds}"))
        .arg(env!("CARGO_BIN_EXE_rpjrt"))
        .args(args)
        .stdin(Stdio::null())
        .env_remove("NO_COLOR")
        .env("RPJRT_PYTHON", "");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("the rpjrt binary runs");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

#[test]
fn conform_shows_the_running_check_and_how_many_are_left_on_a_terminal_only() {
    let plugin = old_plugin().display().to_string();
    let args = strings(&["conform", &plugin, "--only", "api.*"]);
    let seen = on_terminal(&args, &[], 120);
    assert!(seen.contains("[1/"), "no progress line: {seen}");
    assert!(seen.contains(" left)"), "no count of checks left: {seen}");
    assert!(
        seen.contains("\x1b[K"),
        "the line is redrawn in place: {seen}"
    );
    assert!(seen.contains("checks:"), "the run finished: {seen}");

    let (out, err) = piped(&args, &[], 120);
    assert!(out.contains("checks:"), "{out}{err}");
    assert!(
        !err.contains("[1/") && !err.contains("\x1b["),
        "piped: {err}"
    );

    let json = strings(&["conform", &plugin, "--only", "api.*", "--json", "-"]);
    let seen = on_terminal(&json, &[], 120);
    assert!(seen.contains("\"results\""), "{seen}");
    assert!(!seen.contains("[1/"), "no progress with --json: {seen}");
}

#[test]
fn a_compile_longer_than_a_second_shows_a_spinner_on_a_terminal_only() {
    // The fake plugin hangs in PJRT_Client_Compile; `timeout` ends the run after 4 s.
    let dir = std::env::temp_dir().join(format!("rpjrt-progress-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let program = root().join("crates/rpjrt/tests/fixtures/mul_add.mlir");
    let args = vec![
        "compile".to_string(),
        program.display().to_string(),
        "-o".into(),
        dir.join("x.rpjrt").display().to_string(),
        "--plugin".into(),
        fake_plugin().display().to_string(),
    ];
    let hang = [("RPJRT_FAKE_HANG_ON", "PJRT_Client_Compile")];
    let seen = on_terminal(&args, &hang, 4);
    assert!(
        seen.contains("compiling ") && seen.contains("mul_add.mlir ("),
        "{seen}"
    );
    assert!(seen.contains("s)"), "elapsed time shown: {seen}");
    assert!(seen.contains("\x1b[2m"), "dim on a colour terminal: {seen}");

    let no_colour = [hang[0], ("NO_COLOR", "1")];
    let seen = on_terminal(&args, &no_colour, 4);
    assert!(seen.contains("compiling "), "{seen}");
    assert!(!seen.contains("\x1b[2m"), "NO_COLOR: plain text: {seen}");

    let mut json = args.clone();
    json.push("--json".into());
    let seen = on_terminal(&json, &hang, 4);
    assert!(
        !seen.contains("compiling "),
        "no spinner with --json: {seen}"
    );

    let (_, err) = piped(&args, &hang, 4);
    assert!(!err.contains("compiling "), "no spinner when piped: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}
