//! What the CLI's test files share: where the workspace, the CPU plugins, the fake plugin
//! and the fixtures are, and fresh scratch folders.
//!
//! The lookups are the core's test helpers (`crates/rpjrt/tests/common`): the CPU plugins
//! come from `RPJRT_TEST_PLUGIN_OLD`/`_NEW` or `.deps/plugins.env` (written by
//! `scripts/setup.sh`); the fake plugin from `RPJRT_FAKE_PLUGIN` or built once. Missing
//! plugins fail the tests; nothing is skipped.

// Each test file uses its own subset.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// The core's test helpers (plugin lookup, the fake plugin built once, fixtures).
#[path = "../../../rpjrt/tests/common/mod.rs"]
mod core_tests;

/// The workspace root.
pub fn root() -> PathBuf {
    core_tests::workspace_root()
}

/// The plugin named by the variable `var`, from the environment or `.deps/plugins.env`.
pub fn plugin(var: &str) -> PathBuf {
    core_tests::plugin_path_of(var)
}

/// The PJRT 0.81 CPU plugin.
pub fn old() -> PathBuf {
    plugin("RPJRT_TEST_PLUGIN_OLD")
}

/// The PJRT 0.115 CPU plugin.
pub fn new() -> PathBuf {
    plugin("RPJRT_TEST_PLUGIN_NEW")
}

/// The fake plugin (built once per test binary if needed).
pub fn fake() -> PathBuf {
    core_tests::fake_plugin_library()
}

/// The core's test fixtures folder.
pub fn fixtures() -> PathBuf {
    root().join("crates/rpjrt/tests/fixtures")
}

/// A fixture of the core's tests.
pub fn fixture(name: &str) -> PathBuf {
    fixtures().join(name)
}

/// A fresh, empty scratch folder for this test process and `tag`, removed with everything
/// in it when the value is dropped (at the end of the test, passed or failed), so test runs
/// leave nothing behind in the temporary directory.
pub fn tmpdir(tag: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("rpjrt-cli-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

/// A scratch folder that removes itself (see [`tmpdir`]); derefs to its path.
pub struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<std::path::Path> for TempDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `rpjrt` binary, hermetic: no plugin named by the environment, no colour, no
/// logging settings, no conform test hooks.
pub fn rpjrt() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rpjrt"));
    for k in [
        "RPJRT_PLUGIN",
        "PJRT_NAMES_AND_LIBRARY_PATHS",
        "TPU_LIBRARY_PATH",
        "RPJRT_PLUGIN_PATH",
        "VIRTUAL_ENV",
        "RPJRT_CONFORM_TEST_CRASH",
        "RPJRT_CONFORM_TEST_HANG",
        "RPJRT_PLUGIN_LOG",
        "TF_CPP_MIN_LOG_LEVEL",
    ] {
        c.env_remove(k);
    }
    c.env("NO_COLOR", "1");
    // Hermetic: the python3 on the test's PATH is not asked for its site directories.
    c.env("RPJRT_PYTHON", "");
    c
}

/// Runs `c`: (exit code, stdout, stderr).
pub fn run(c: &mut Command) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = c.output().expect("the rpjrt binary runs");
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// The signals this process ignores (`SigIgn` of /proc/self/status: bit N-1 for signal N).
/// A shell starts a background job with SIGINT ignored, and the CLI, as a shell's child
/// should, leaves an ignored signal ignored: tests send such a signal only when it is not.
pub fn ignored_signals() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("SigIgn:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}

/// The pids of `pid`'s children, from /proc.
pub fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Whether `pid` runs (a zombie does not).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim_start().to_string()))
        .is_some_and(|r| !r.starts_with('Z') && !r.starts_with('X'))
}

/// Sends `sig` (a name: `TERM`, `KILL`) to `pid`.
pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// Polls `f` every 20 ms for up to `limit`.
pub fn wait_for(limit: std::time::Duration, mut f: impl FnMut() -> bool) -> bool {
    let until = std::time::Instant::now() + limit;
    while std::time::Instant::now() < until {
        if f() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    f()
}

/// Compiles C `src` into the shared library `dir/name.so` with the system C compiler
/// (`cc`, linking libdl and libpthread).
pub fn build_so(dir: &std::path::Path, name: &str, src: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    let so = dir.join(format!("{name}.so"));
    std::fs::write(&c, src).unwrap();
    let ok = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&so)
        .arg(&c)
        .args(["-ldl", "-lpthread"])
        .status()
        .expect("cc runs");
    assert!(ok.success(), "cc {name}");
    so
}

/// A local TCP port nothing listens on (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits for `child` up to `limit`; a child still running then is killed, and the test
/// fails saying so (a hang must fail the test, not hold it). (exit code, stdout, stderr,
/// how long it ran).
pub fn finish(
    mut child: std::process::Child,
    limit: std::time::Duration,
    what: &str,
) -> (i32, String, String, std::time::Duration) {
    let t = std::time::Instant::now();
    while t.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            return (
                out.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
                t.elapsed(),
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    panic!(
        "{what}: still running after {limit:?}; killed\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
