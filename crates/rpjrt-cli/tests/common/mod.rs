//! What the CLI's test files share: where the workspace, the CPU plugins, the fake plugin
//! and the fixtures are, and fresh scratch folders.
//!
//! The CPU plugins come from `RPJRT_TEST_PLUGIN_OLD`/`_NEW` or `.deps/plugins.env`
//! (written by `scripts/setup.sh`); the fake plugin from `RPJRT_FAKE_PLUGIN` or
//! `target/debug` (`cargo build -p rpjrt-fake-plugin`, which `scripts/test.sh` runs).
//! Missing plugins fail the tests; nothing is skipped.

// Each test file uses its own subset.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The plugin named by the variable `var`, from the environment or `.deps/plugins.env`.
pub fn plugin(var: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    let env_file = root().join(".deps/plugins.env");
    let text = std::fs::read_to_string(&env_file).unwrap_or_else(|e| {
        panic!(
            "{var} unset and {} unreadable ({e}): run scripts/setup.sh",
            env_file.display()
        )
    });
    let line = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix(var)?.strip_prefix('='))
        .next_back()
        .unwrap_or_else(|| panic!("no {var} in {}", env_file.display()));
    PathBuf::from(line.trim().trim_matches('"'))
}

/// The PJRT 0.81 CPU plugin.
pub fn old() -> PathBuf {
    plugin("RPJRT_TEST_PLUGIN_OLD")
}

/// The PJRT 0.115 CPU plugin.
pub fn new() -> PathBuf {
    plugin("RPJRT_TEST_PLUGIN_NEW")
}

/// The fake plugin.
pub fn fake() -> PathBuf {
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

/// The core's test fixtures folder.
pub fn fixtures() -> PathBuf {
    root().join("crates/rpjrt/tests/fixtures")
}

/// A fixture of the core's tests.
pub fn fixture(name: &str) -> PathBuf {
    fixtures().join(name)
}

/// A fresh, empty scratch folder for this test process and `tag`.
pub fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rpjrt-cli-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
