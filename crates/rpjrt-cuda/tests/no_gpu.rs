//! The driver helpers on a machine without an NVIDIA driver: loading fails with an error
//! that names the library and keeps the loader's message; nothing panics. On a machine with
//! a driver these tests fail on purpose: the GPU tier is `scripts/test-gpu.sh`.

use rpjrt::Code;
use rpjrt_cuda::{Cuda, DevicePtr, LaunchConfig, StreamRef};

#[test]
fn loading_the_driver_names_the_missing_library() {
    let err = Cuda::load().unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(err.entry(), Some("dlopen"));
    let msg = err.to_string();
    assert!(msg.contains(Cuda::LIBRARY), "{msg}");
    assert!(
        msg.contains("cannot load the CUDA driver libcuda.so.1"),
        "{msg}"
    );
    // The loader's own text is kept (glibc says the file cannot be opened).
    assert!(msg.contains("cannot open shared object file"), "{msg}");
}

#[test]
fn a_path_that_does_not_exist_is_named() {
    let err = Cuda::load_from("/nonexistent/dir/libcuda.so.1").unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    let msg = err.to_string();
    assert!(msg.contains("/nonexistent/dir/libcuda.so.1"), "{msg}");
    assert!(msg.contains("No such file"), "{msg}");
}

#[test]
fn a_library_that_is_not_the_driver_is_refused() {
    let err = Cuda::load_from("libc.so.6").unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(err.entry(), Some("dlsym"));
    let msg = err.to_string();
    assert!(
        msg.contains("libc.so.6 is not a usable CUDA driver: missing symbol cuInit"),
        "{msg}"
    );
}

#[test]
fn plain_values_need_no_driver() {
    assert_eq!(DevicePtr(0x1000).offset(0x10), DevicePtr(0x1010));
    assert_eq!(StreamRef::DEFAULT, StreamRef(0));
    let c = LaunchConfig::linear(1000, 256);
    assert_eq!((c.grid, c.block), ([4, 1, 1], [256, 1, 1]));
}
