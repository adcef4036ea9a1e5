//! The CUDA PJRT plugin (`jax-cuda13-pjrt`) on a machine without a GPU: it loads and
//! describes itself; client creation fails cleanly and says what is missing. The driver
//! helpers' own no-GPU tests are in `no_gpu.rs` beside this file.
//!
//! The plugin is installed by `scripts/setup.sh` (`RPJRT_TEST_PLUGIN_CUDA` in
//! `.deps/plugins.env`). Client creation runs in a child process (this test binary run
//! again on one test) so that a plugin that aborts cannot take the test runner with it.
//! On a machine with a GPU these tests would fail on purpose: the GPU tier is
//! `scripts/test-gpu.sh`.

use std::path::PathBuf;
use std::process::Command;

/// The core's test helpers (plugins and fixtures).
#[path = "../../rpjrt/tests/common/mod.rs"]
mod common;

use rpjrt::{ApiVersion, ClientOptions, Plugin, Value};
use rpjrt_cuda::{Allocator, CudaOptions};

const CHILD_ENV: &str = "RPJRT_CUDA_NO_GPU_CHILD";

fn cuda_plugin_path() -> PathBuf {
    common::plugin_path_of("RPJRT_TEST_PLUGIN_CUDA")
}

#[test]
fn plugin_loads_and_describes_itself() {
    let plugin = Plugin::load(cuda_plugin_path()).expect("the CUDA plugin loads without a GPU");
    let v = plugin.version();
    assert_eq!(v.major, 0);
    assert!(
        v >= ApiVersion {
            major: 0,
            minor: 100
        },
        "PJRT {v} is older than the wheels rpjrt knows"
    );
    assert!(plugin.table_slots() > 100, "{} slots", plugin.table_slots());
    // Every slot of the newest plugin the tests see is declared (and so has a ledger row).
    assert!(
        plugin.table_slots() <= rpjrt_sys::PJRT_API_ENTRIES.len(),
        "the CUDA plugin (PJRT {v}) has {} table slots, rpjrt-sys declares {}: declare the \
         new slots with the minor that added each and give each a row in ledger.tsv",
        plugin.table_slots(),
        rpjrt_sys::PJRT_API_ENTRIES.len()
    );

    let names: Vec<&str> = plugin
        .extensions()
        .all()
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    for want in [
        "FFI",
        "Layouts",
        "GpuCustomCall",
        "Stream",
        "MemoryDescriptions",
    ] {
        assert!(
            names.iter().any(|n| n.contains(want)),
            "no {want} extension in {names:?}"
        );
    }

    match plugin.attribute("cuda_version") {
        Some(Value::Int64(c)) => assert!(*c >= 12000, "cuda_version {c}"),
        other => panic!("cuda_version attribute: {other:?}"),
    }
    assert!(plugin.xla_version().is_some());
    let shlo = plugin
        .stablehlo_current_version()
        .expect("stablehlo_current_version");
    assert_eq!(shlo.len(), 3);
    assert_eq!(shlo[0], 1);
}

/// Creates a client in a child process and returns (exit success, stdout+stderr).
fn create_in_child(options: &str) -> (bool, String) {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([
            "--exact",
            "child_creates_client",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, options)
        .env("RPJRT_TEST_PLUGIN_CUDA", cuda_plugin_path())
        // Hide any GPU a developer machine may have, so this stays the no-GPU path.
        .env("CUDA_VISIBLE_DEVICES", "")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.code().is_some(),
        "the child was killed by a signal ({:?}): {text}",
        out.status
    );
    (out.status.success(), text)
}

/// The child's half of `client_creation_fails_cleanly`: does nothing unless run by it.
#[test]
fn child_creates_client() {
    let Ok(which) = std::env::var(CHILD_ENV) else {
        return;
    };
    let plugin = Plugin::load(cuda_plugin_path()).unwrap();
    let options = match which.as_str() {
        "typed" => CudaOptions::new()
            .memory_fraction(0.5)
            .preallocate(false)
            .allocator(Allocator::Bfc)
            .visible_devices([0])
            .to_client_options()
            .unwrap(),
        _ => ClientOptions::new(),
    };
    let err = match rpjrt_cuda::create_client(&plugin, &options) {
        Ok(_) => panic!("a CUDA client was created: this machine has a GPU"),
        Err(e) => e,
    };
    println!(
        "CHILD-ERROR code={} entry={:?} msg={err}",
        err.code().name(),
        err.entry()
    );
}

#[test]
fn client_creation_fails_cleanly() {
    for opts in ["none", "typed"] {
        let (ok, text) = create_in_child(opts);
        assert!(ok, "child failed ({opts}): {text}");
        let line = text
            .lines()
            .find_map(|l| l.split_once("CHILD-ERROR").map(|(_, rest)| rest))
            .unwrap_or_else(|| panic!("no error line ({opts}): {text}"));
        assert!(line.contains("code=FAILED_PRECONDITION"), "{line}");
        assert!(line.contains("PJRT_Client_Create"), "{line}");
        assert!(
            line.contains("No visible GPU devices"),
            "names the missing GPU: {line}"
        );
        // rpjrt adds which plugin failed and what the driver check found.
        assert!(
            line.contains("xla_cuda_plugin.so"),
            "names the plugin: {line}"
        );
        assert!(
            line.contains("libcuda.so.1"),
            "names the driver library: {line}"
        );
    }
}

#[test]
fn driver_summary_names_the_missing_library() {
    let msg = rpjrt_cuda::driver_summary();
    assert!(msg.contains("libcuda.so.1"), "{msg}");
    assert!(msg.contains("cannot load the CUDA driver"), "{msg}");
    assert!(msg.contains("FAILED_PRECONDITION"), "{msg}");
    // The loader's own text is kept (glibc says the file cannot be opened).
    assert!(msg.contains("cannot open shared object file"), "{msg}");
}

#[test]
fn cpu_plugin_errors_are_left_alone() {
    // create_client only adds CUDA context to CUDA plugins' errors.
    let p = common::plugin_path(common::Which::New);
    let plugin = Plugin::load(p).unwrap();
    assert!(!rpjrt_cuda::is_cuda_plugin(&plugin));
    let cuda = Plugin::load(cuda_plugin_path()).unwrap();
    assert!(rpjrt_cuda::is_cuda_plugin(&cuda));
    let bad = ClientOptions::new().set("cpu_device_count", "many");
    let direct = rpjrt::Client::new(&plugin, &bad).map(|_| ()).unwrap_err();
    let wrapped = rpjrt_cuda::create_client(&plugin, &bad)
        .map(|_| ())
        .unwrap_err();
    assert_eq!(direct.to_string(), wrapped.to_string());
    assert!(!wrapped.to_string().contains("CUDA driver"));
}
