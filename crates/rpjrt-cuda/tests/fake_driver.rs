//! The driver helpers against a fake CUDA driver that lies (`tests/fake/fakecuda.c`, built
//! here with the system C compiler `cc`, one library per mode): NULL handles and pointers
//! returned with success, names without a terminator, failing waits and records, negative
//! versions and counts, odd cuInit codes. Each is refused with a clear error or handled
//! safely; nothing crashes. These need no GPU; without `cc` they fail and say so.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use rpjrt::Code;
use rpjrt_cuda::{Cuda, DevicePtr, KernelArg, LaunchConfig, StreamRef};

/// The fake driver compiled for `mode`, once per test process.
fn fake(mode: &str) -> PathBuf {
    static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let map = built.get_or_insert_with(HashMap::new);
    if let Some(p) = map.get(mode) {
        return p.clone();
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake/fakecuda.c");
    let dir = std::env::temp_dir().join(format!("rpjrt-cuda-fake-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("libcuda-{mode}.so"));
    let r = Command::new("cc")
        .args(["-shared", "-fPIC", "-O0"])
        .arg(format!("-DFAKE_MODE=\"{mode}\""))
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "the C compiler `cc` is needed to build the fake CUDA driver {}: {e}",
                src.display()
            )
        });
    assert!(
        r.status.success(),
        "cc failed to build the fake CUDA driver: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    map.insert(mode.to_string(), out.clone());
    out
}

/// How many times the fake driver for `mode` has seen `entry` called.
fn calls(mode: &str, entry: &str) -> i32 {
    let path = fake(mode);
    // SAFETY: the library is already loaded by the test (the same handle comes back); its
    // initialisers have no preconditions.
    let lib = unsafe { libloading::Library::new(&path) }.unwrap();
    // SAFETY: `fake_calls` is declared in fakecuda.c as `int fake_calls(const char *)`.
    let f =
        unsafe { lib.get::<unsafe extern "C" fn(*const std::ffi::c_char) -> i32>(b"fake_calls\0") }
            .unwrap();
    let name = std::ffi::CString::new(entry).unwrap();
    // SAFETY: a NUL-terminated name; the function only reads it.
    let n = unsafe { f(name.as_ptr()) };
    std::mem::forget(lib);
    assert!(n >= 0, "the fake driver does not count {entry}");
    n
}

/// The error of `r`, which must have failed.
fn err<T>(r: rpjrt::Result<T>) -> rpjrt::Error {
    match r {
        Ok(_) => panic!("the call succeeded; an error was expected"),
        Err(e) => e,
    }
}

fn load(mode: &str) -> Cuda {
    Cuda::load_from(fake(mode)).unwrap()
}

#[test]
fn the_fake_driver_works_when_it_does_not_lie() {
    let cuda = load("ok");
    assert_eq!(cuda.driver_version().unwrap(), 13000);
    assert_eq!(cuda.device_name(0).unwrap(), "Fake GPU");
    let ctx = cuda.context(0).unwrap();
    let buf = ctx.alloc(64).unwrap();
    assert_eq!(buf.to_vec().unwrap(), vec![0x5A; 64]);
    let m = ctx.load_ptx(".entry k() { ret; }").unwrap();
    let f = m.function("k").unwrap();
    ctx.launch(
        &f,
        LaunchConfig::linear(1, 1),
        &[KernelArg::I32(1)],
        StreamRef::DEFAULT,
    )
    .unwrap();
}

#[test]
fn a_null_pinned_pointer_is_refused() {
    let ctx = load("nullhost").context(0).unwrap();
    let e = err(ctx.alloc_pinned(16));
    assert_eq!(e.code(), Code::Internal);
    assert_eq!(e.entry(), Some("cuMemAllocHost"));
    let msg = e.to_string();
    assert!(
        msg.contains("cuMemAllocHost reported success but returned a NULL pointer for 16 bytes"),
        "{msg}"
    );
    // Zero bytes need no allocation.
    assert!(ctx.alloc_pinned(0).unwrap().as_slice().unwrap().is_empty());
}

#[test]
fn null_handles_with_success_are_refused() {
    let e = load("nullctx").context(0).unwrap_err().to_string();
    assert!(
        e.contains("cuDevicePrimaryCtxRetain reported success but returned a NULL context"),
        "{e}"
    );
    // The retain that succeeded was balanced by a release.
    assert_eq!(calls("nullctx", "cuDevicePrimaryCtxRelease"), 1);

    let e = load("nulldev").context(0).unwrap().alloc(64).unwrap_err();
    assert_eq!(e.code(), Code::Internal);
    assert!(
        e.to_string()
            .contains("cuMemAlloc reported success but returned device address 0 for 64 bytes"),
        "{e}"
    );

    let e = err(load("nullmod")
        .context(0)
        .unwrap()
        .load_ptx(".entry k() { ret; }"))
    .to_string();
    assert!(
        e.contains("cuModuleLoadData reported success but returned a NULL module handle"),
        "{e}"
    );

    let m = load("nullfunc")
        .context(0)
        .unwrap()
        .load_ptx(".entry k() { ret; }")
        .unwrap();
    let e = err(m.function("k")).to_string();
    assert!(
        e.contains(
            "cuModuleGetFunction reported success but returned a NULL function handle for \"k\""
        ),
        "{e}"
    );

    let e = err(load("nullstream").context(0).unwrap().stream()).to_string();
    assert!(
        e.contains("cuStreamCreate reported success but returned a NULL stream handle"),
        "{e}"
    );

    let ctx = load("nullevent").context(0).unwrap();
    let e = err(ctx.event(true)).to_string();
    assert!(
        e.contains("cuEventCreate reported success but returned a NULL event handle"),
        "{e}"
    );
    // An async copy needs an event: refused before the copy is queued.
    let p = ctx.alloc_pinned(8).unwrap();
    assert!(ctx
        .memcpy_htod_async(DevicePtr(0x1000), &p, StreamRef::DEFAULT)
        .is_err());
}

#[test]
fn a_device_name_without_a_terminator_stays_in_its_buffer() {
    let name = load("nonul").device_name(0).unwrap();
    assert_eq!(name, "A".repeat(256));
}

#[test]
fn a_failed_wait_keeps_the_copy_pending() {
    let mode = "evfail1";
    let ctx = load(mode).context(0).unwrap();
    let mut p = ctx.alloc_pinned(16).unwrap();
    ctx.memcpy_dtoh_async(&mut p, DevicePtr(0x1000), StreamRef::DEFAULT)
        .unwrap();
    let e = p.as_slice().unwrap_err().to_string();
    assert!(e.contains("cuEventSynchronize"), "{e}");
    assert_eq!(calls(mode, "cuEventSynchronize"), 1);
    // The next read waits again (and now the wait succeeds).
    assert_eq!(p.as_slice().unwrap(), &[0x5A; 16]);
    assert_eq!(calls(mode, "cuEventSynchronize"), 2);
    // Done: no more waits.
    p.as_mut_slice().unwrap().fill(1);
    assert_eq!(calls(mode, "cuEventSynchronize"), 2);
}

#[test]
fn a_failed_record_still_guards_the_buffer() {
    let mode = "recordfail";
    let ctx = load(mode).context(0).unwrap();
    let p = ctx.alloc_pinned(16).unwrap();
    let e = ctx
        .memcpy_htod_async(DevicePtr(0x1000), &p, StreamRef::DEFAULT)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cuEventRecord"), "{e}");
    let before = calls(mode, "cuCtxSynchronize");
    // The copy was queued with no event: the next read synchronizes the context first.
    assert_eq!(p.as_slice().unwrap(), &[0; 16]);
    assert_eq!(calls(mode, "cuCtxSynchronize"), before + 1);
    // Drop frees it without waiting again.
    let freed = calls(mode, "cuMemFreeHost");
    drop(p);
    assert_eq!(calls(mode, "cuMemFreeHost"), freed + 1);
}

#[test]
fn new_pinned_memory_is_zeroed() {
    // The fake's cuMemAllocHost fills new memory with 0xAB, as reused memory would be.
    let ctx = load("ok").context(0).unwrap();
    let p = ctx.alloc_pinned(4096).unwrap();
    assert!(p.as_slice().unwrap().iter().all(|&b| b == 0));
}

#[test]
fn invalid_versions_and_counts_are_named() {
    let e = load("negver").driver_version().unwrap_err().to_string();
    assert!(
        e.contains("cuDriverGetVersion reported success but returned an invalid (negative) driver version -123456"),
        "{e}"
    );
    let cuda = load("negcount");
    let e = cuda.device_count().unwrap_err().to_string();
    assert!(e.contains("an invalid (negative) device count -5"), "{e}");
    let e = cuda.context(0).unwrap_err().to_string();
    assert!(e.contains("invalid (negative) device count -5"), "{e}");
    assert!(!e.contains("sees -5"), "{e}");
}

#[test]
fn any_cuinit_failure_is_failed_precondition() {
    let e = Cuda::load_from(fake("initweird")).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e}");
    assert_eq!(e.entry(), Some("cuInit"));
    let msg = e.to_string();
    assert!(msg.contains("loaded, but cuInit failed"), "{msg}");
    assert!(msg.contains("CUDA_ERROR_FAKE (12345)"), "{msg}");
}

#[test]
fn launch_shapes_that_wrap_are_refused_before_the_driver() {
    // A mode of its own (any unknown mode behaves as "ok"): no other test launches on it.
    let mode = "ok-launch";
    let ctx = load(mode).context(0).unwrap();
    let f = ctx
        .load_ptx(".entry k() { ret; }")
        .unwrap()
        .function("k")
        .unwrap();
    let before = calls(mode, "cuLaunchKernel");
    for block in [[1 << 22, 1 << 21, 1 << 21], [1 << 31, 1 << 31, 1 << 31]] {
        let cfg = LaunchConfig {
            grid: [1, 1, 1],
            block,
            shared_mem_bytes: 0,
        };
        let e = ctx.launch(&f, cfg, &[], StreamRef::DEFAULT).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.to_string().contains("at most 1024"), "{e}");
    }
    assert_eq!(
        calls(mode, "cuLaunchKernel"),
        before,
        "none reached the driver"
    );
}
