//! The cdylib, loaded the way a client loads a vendor plugin.

use std::path::{Path, PathBuf};

use rpjrt_sys as sys;

/// target/<profile>/, from this test binary at target/<profile>/deps/.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

fn library(path: &Path) -> libloading::Library {
    assert!(
        path.exists(),
        "{} is missing; `cargo test -p rpjrt-fake-plugin` builds it",
        path.display()
    );
    // SAFETY: our own test libraries; their initialisers do nothing.
    unsafe { libloading::Library::new(path) }.unwrap()
}

type GetApi = unsafe extern "C" fn() -> *const sys::PJRT_Api;
type Configure = unsafe extern "C" fn(*const std::os::raw::c_char, usize) -> i32;
type LiveCount = unsafe extern "C" fn() -> usize;

#[test]
fn cdylib_exports_get_pjrt_api() {
    let lib = library(&target_dir().join("librpjrt_fake_plugin.so"));
    // SAFETY: the symbol has this signature.
    let get: libloading::Symbol<GetApi> = unsafe { lib.get(b"GetPjrtApi") }.unwrap();
    // SAFETY: as above.
    let api = unsafe { get() };
    assert!(!api.is_null());
    // SAFETY: tables live as long as the library, which is never unloaded here.
    assert!(unsafe { (*api).PJRT_Client_Create }.is_some());
    // SAFETY: the symbol has this signature.
    let live: libloading::Symbol<LiveCount> =
        unsafe { lib.get(b"rpjrt_fake_live_handle_count") }.unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { live() }, 0);
    std::mem::forget(lib);
}

#[test]
fn copies_of_the_library_are_configured_independently() {
    let src = target_dir().join("librpjrt_fake_plugin.so");
    let dir = std::env::temp_dir().join(format!("rpjrt-fake-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut minors = Vec::new();
    for (i, version) in ["0.81", "0.100"].iter().enumerate() {
        let copy = dir.join(format!("fake{i}.so"));
        std::fs::copy(&src, &copy).unwrap();
        let lib = library(&copy);
        // SAFETY: the symbols have these signatures.
        let configure: libloading::Symbol<Configure> =
            unsafe { lib.get(b"rpjrt_fake_configure") }.unwrap();
        let spec = format!("RPJRT_FAKE_VERSION={version}\n");
        // SAFETY: spec bytes are valid for the call.
        assert_eq!(unsafe { configure(spec.as_ptr().cast(), spec.len()) }, 0);
        let bad = "RPJRT_FAKE_VERSION=x";
        // SAFETY: as above.
        assert_eq!(unsafe { configure(bad.as_ptr().cast(), bad.len()) }, -1);
        // SAFETY: as above.
        let get: libloading::Symbol<GetApi> = unsafe { lib.get(b"GetPjrtApi") }.unwrap();
        // SAFETY: as above; tables outlive the (never unloaded) library.
        minors.push(unsafe { (*get()).pjrt_api_version.minor_version });
        std::mem::forget(lib);
    }
    assert_eq!(minors, vec![81, 100]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_symbol_library_has_no_get_pjrt_api() {
    let lib = library(&target_dir().join("examples").join("librpjrt_no_symbol.so"));
    // SAFETY: only looked up, never called with a wrong signature.
    assert!(unsafe { lib.get::<GetApi>(b"GetPjrtApi") }.is_err());
    // SAFETY: the symbol has this signature.
    let f: libloading::Symbol<unsafe extern "C" fn() -> i32> =
        unsafe { lib.get(b"rpjrt_not_a_plugin") }.unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { f() }, 42);
}
