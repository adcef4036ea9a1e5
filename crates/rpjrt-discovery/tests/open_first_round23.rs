//! Round 23: when every candidate fails and one of them loaded (and failed later, as a CUDA
//! plugin without a GPU fails to create a client), `open_first` does not say "cannot load
//! PJRT plugin <first path>": the error has the loaded plugin's code, and its text leads
//! with what happened and lists every candidate. When none could be loaded, it stays a
//! `PluginLoad` error.

use std::path::PathBuf;

use rpjrt::{ClientOptions, Code, Error};
use rpjrt_discovery::{open_first, PluginInfo};

fn info(name: &str, path: PathBuf) -> PluginInfo {
    PluginInfo {
        name: name.into(),
        path,
        version: None,
        source: "test".into(),
        platform: None,
        package: None,
        options: None,
    }
}

fn cpu_plugin() -> PathBuf {
    PathBuf::from(std::env::var_os("RPJRT_TEST_PLUGIN_NEW").expect(
        "RPJRT_TEST_PLUGIN_NEW is not set: source .deps/plugins.env (scripts/setup.sh writes it)",
    ))
}

/// A client creation that fails as a CUDA plugin's does without a GPU.
fn no_device(_: &rpjrt::Plugin, _: &ClientOptions) -> rpjrt::Result<rpjrt::Client> {
    Err(Error::Pjrt {
        entry: "PJRT_Client_Create",
        code: Code::FailedPrecondition,
        message: "No visible GPU devices (round 23 test)".into(),
    })
}

#[test]
fn a_plugin_that_loaded_is_not_said_to_be_unloadable() {
    let candidates = vec![
        info("first", cpu_plugin()),
        info(
            "missing",
            PathBuf::from("/nonexistent/rpjrt-r23/libmissing.so"),
        ),
    ];
    let e = open_first(candidates, &ClientOptions::new(), no_device).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e}");
    assert!(!matches!(e, Error::PluginLoad { .. }), "{e}");
    let m = e.to_string();
    let loaded = format!("cannot load PJRT plugin {}", cpu_plugin().display());
    assert!(!m.contains(&loaded), "{m}");
    assert!(m.contains("no plugin could be used"), "{m}");
    assert!(m.contains("No visible GPU devices (round 23 test)"), "{m}");
    assert!(m.contains("libmissing.so"), "{m}");
}

#[test]
fn none_loaded_stays_a_load_error() {
    let candidates = vec![
        info("a", PathBuf::from("/nonexistent/rpjrt-r23/liba.so")),
        info("b", PathBuf::from("/nonexistent/rpjrt-r23/libb.so")),
    ];
    let e = open_first(candidates, &ClientOptions::new(), no_device).unwrap_err();
    assert!(matches!(e, Error::PluginLoad { .. }), "{e}");
    let m = e.to_string();
    assert!(
        m.contains("none of the plugins tried could be loaded"),
        "{m}"
    );
    assert!(m.contains("libb.so"), "{m}");
}
