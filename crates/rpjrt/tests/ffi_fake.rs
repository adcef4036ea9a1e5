//! FFI registration against the fake plugin scripted to accept, refuse or silently drop
//! handlers (`RPJRT_FAKE_FFI`), with a chosen FFI runtime version
//! (`RPJRT_FAKE_FFI_VERSION`). Each test loads its own copy of the fake's library, which
//! reads the knobs once at its first `GetPjrtApi`.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use rpjrt::ffi::{self, CallFrame, FfiError};
use rpjrt::{Code, Plugin};

static LOCK: Mutex<()> = Mutex::new(());
static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A fresh copy of the fake with `RPJRT_FAKE_FFI=mode` and the given FFI version.
fn fake(mode: &str, version: Option<&str>) -> Plugin {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let dir = std::env::temp_dir().join(format!("rpjrt-ffi-fake-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let copy = dir.join(format!("fake-{n}.so"));
    std::fs::copy(common::fake_plugin_library(), &copy).unwrap();
    std::env::set_var("RPJRT_FAKE_FFI", mode);
    match version {
        Some(v) => std::env::set_var("RPJRT_FAKE_FFI_VERSION", v),
        None => std::env::remove_var("RPJRT_FAKE_FFI_VERSION"),
    }
    let p = Plugin::load(&copy).unwrap();
    // The library stays mapped (never unloaded); the copy on disk is not needed again.
    let _ = std::fs::remove_file(&copy);
    // The copy has read its knobs; later loads set their own.
    let _ = p.version();
    std::env::remove_var("RPJRT_FAKE_FFI");
    std::env::remove_var("RPJRT_FAKE_FFI_VERSION");
    p
}

fn ok_handler() -> std::sync::Arc<ffi::HandlerFn> {
    std::sync::Arc::new(|_: &mut CallFrame<'_>| Ok::<(), FfiError>(()))
}

#[test]
fn accepted_registration_reports_both_versions() {
    let p = fake("ok", None);
    let r = ffi::register_on(&p, "cpu", "fake_ok", false, ok_handler()).unwrap();
    assert_eq!(r.platform, "host");
    assert_eq!(r.runtime_version, (0, 4));
    assert_eq!(r.handler_version, (0, 3));
    assert!(ffi::is_registered(&p, "cpu", "fake_ok"));
    assert_eq!(ffi::runtime_version(&p).unwrap(), (0, 4));
}

#[test]
fn older_runtime_gets_its_own_version_and_keeps_the_handler() {
    let p = fake("ok", Some("0.2"));
    let r = ffi::register_on(&p, "cpu", "fake_old_runtime", false, ok_handler()).unwrap();
    assert_eq!(r.runtime_version, (0, 2));
    assert_eq!(
        r.handler_version,
        (0, 2),
        "rpjrt reports min(ours, runtime's)"
    );
}

#[test]
fn refused_registration_is_an_error_at_register_time() {
    let p = fake("refuse", None);
    let e = ffi::register_on(&p, "cpu", "fake_refused", false, ok_handler()).unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("refused") && m.contains("\"fake_refused\""),
        "{m}"
    );
    assert!(m.contains("\"host\"") && m.contains("0.3"), "{m}");
    assert!(!ffi::is_registered(&p, "cpu", "fake_refused"));
}

#[test]
fn dropped_registration_is_an_error_at_register_time() {
    let p = fake("drop", None);
    let e = ffi::register_on(&p, "cpu", "fake_dropped", false, ok_handler()).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    let m = e.to_string();
    assert!(
        m.contains("dropped") && m.contains("\"fake_dropped\""),
        "{m}"
    );
    assert!(
        m.contains("\"host\"") && m.contains("0.3") && m.contains("unknown"),
        "{m}"
    );
    assert!(!ffi::is_registered(&p, "cpu", "fake_dropped"));
    // The version probe is dropped too, so the runtime version is unknown.
    assert!(ffi::runtime_version(&p).is_err());
}

#[test]
fn registering_a_name_twice_needs_replace() {
    let p = fake("ok", None);
    ffi::register_on(&p, "cpu", "fake_twice", false, ok_handler()).unwrap();
    let e = ffi::register_on(&p, "cpu", "fake_twice", false, ok_handler()).unwrap_err();
    assert_eq!(e.code(), Code::AlreadyExists);
    ffi::register_on(&p, "cpu", "fake_twice", true, ok_handler()).unwrap();
}
