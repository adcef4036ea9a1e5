//! A probe of the CUDA driver (`libcuda.so.1`) for diagnostics: can it be loaded, which
//! version is it, how many devices does it see.
//!
//! `cuda::create_client` uses it to say why a CUDA plugin could not create a client. It
//! opens the library at run time (nothing links against CUDA) and calls four entry
//! points; the driver API helpers for kernels live in the `rpjrt-cuda` crate.

use std::ffi::{c_char, c_int, c_uint, CStr};

use crate::error::{Code, Error, Result};

type CuResult = c_int;
type InitFn = unsafe extern "C" fn(c_uint) -> CuResult;
type CountFn = unsafe extern "C" fn(*mut c_int) -> CuResult;
type ErrorNameFn = unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult;

/// What the probe found in a driver that loads.
#[derive(Clone, Debug)]
pub struct DriverFacts {
    /// `cuDriverGetVersion`, e.g. 13000 for CUDA 13.0.
    pub version: i32,
    /// `cuDeviceGetCount`, or the driver's name for why it failed.
    pub devices: std::result::Result<i32, String>,
}

/// A driver that cannot be used: FAILED_PRECONDITION, like the plugins without a GPU.
fn unavailable(entry: &'static str, message: String) -> Error {
    Error::Pjrt {
        entry,
        code: Code::FailedPrecondition,
        message,
    }
}

fn symbol<T: Copy>(lib: &libloading::Library, name: &str, sym: &str) -> Result<T> {
    // SAFETY: every caller asks for a CUDA driver entry point by its documented name with
    // the C signature the driver API gives it (the type aliases above).
    let s = unsafe { lib.get::<T>(format!("{sym}\0").as_bytes()) };
    s.map(|s| *s).map_err(|e| {
        unavailable(
            "dlsym",
            format!("{name} is not a usable CUDA driver: missing symbol {sym}: {e}"),
        )
    })
}

/// Opens `name` (searched the way the dynamic loader does), initialises the driver and
/// reads its version and device count. The library stays loaded (`cuInit` starts the
/// driver's threads, and a library that is no driver may have started its own: unloading
/// would pull their code from under them).
pub fn probe(name: &str) -> Result<DriverFacts> {
    // SAFETY: loading the CUDA driver runs its initialisers, which have no preconditions.
    let lib = unsafe { libloading::Library::new(name) }.map(std::mem::ManuallyDrop::new);
    let lib = lib.map_err(|e| {
        unavailable(
            "dlopen",
            format!("cannot load the CUDA driver {name}: {e} (is an NVIDIA driver installed?)"),
        )
    })?;
    let init: InitFn = symbol(&lib, name, "cuInit")?;
    let version: CountFn = symbol(&lib, name, "cuDriverGetVersion")?;
    let count: CountFn = symbol(&lib, name, "cuDeviceGetCount")?;
    let error_name: ErrorNameFn = symbol(&lib, name, "cuGetErrorName")?;
    let describe = |code: CuResult| {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: a valid out-pointer; the driver stores a static string or leaves it null.
        let rc = unsafe { error_name(code, &mut p) };
        if rc != 0 || p.is_null() {
            format!("CUresult {code}")
        } else {
            // SAFETY: a non-null result is a static NUL-terminated string.
            let s = unsafe { CStr::from_ptr(p) }.to_string_lossy();
            format!("{s} ({code})")
        }
    };
    // SAFETY: cuInit takes a flags word (must be 0) and nothing else.
    let rc = unsafe { init(0) };
    if rc != 0 {
        return Err(unavailable(
            "cuInit",
            format!("{name} loaded, but cuInit failed: {}", describe(rc)),
        ));
    }
    let mut v: c_int = 0;
    // SAFETY: a valid out-pointer.
    let rc = unsafe { version(&mut v) };
    if rc != 0 {
        return Err(unavailable(
            "cuDriverGetVersion",
            format!("{name}: cuDriverGetVersion failed: {}", describe(rc)),
        ));
    }
    let mut n: c_int = 0;
    // SAFETY: a valid out-pointer.
    let rc = unsafe { count(&mut n) };
    Ok(DriverFacts {
        version: v,
        devices: if rc == 0 { Ok(n) } else { Err(describe(rc)) },
    })
}
