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

/// A fresh, empty scratch folder for this test process and `tag`.
pub fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rpjrt-cli-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
