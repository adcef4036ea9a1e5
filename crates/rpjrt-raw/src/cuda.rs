//! A probe of the CUDA driver (`libcuda.so.1`) for diagnostics: can it be loaded, which
//! version is it, how many devices does it see.
//!
//! `cuda::create_client` uses it to say why a CUDA plugin could not create a client. It
//! opens the library at run time (nothing links against CUDA) and calls four entry
//! points; the driver API helpers for kernels live in the `rpjrt-cuda` crate.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, CStr};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

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

/// What the exit report of a call into the CUDA driver calls the library.
pub const CUDA_DRIVER: &str = "the CUDA driver library";

/// Opens the CUDA driver library `name` (a path, or a bare name searched the way the
/// dynamic loader does) through [`crate::guard::open_checked_library`]: the file is checked
/// before the loader sees it (a truncated copy would crash the loader, a FIFO would block
/// it), and an `exit()` in its initialisers is reported. Errors are FAILED_PRECONDITION at
/// `dlopen`, naming the library and what is wrong with it. Shared with `rpjrt-cuda`.
pub fn open_driver(given: &std::path::Path) -> Result<crate::guard::CheckedLibrary> {
    let name = given.display();
    // SAFETY: loading the CUDA driver runs its initialisers; the caller chose `name` as
    // the driver.
    let opened = unsafe { crate::guard::open_checked_library(given, CUDA_DRIVER, |_| Ok(())) };
    opened.map_err(|e| {
        let hint = match &e {
            crate::guard::CheckedOpenError::Refused { .. } => " (is an NVIDIA driver installed?)",
            crate::guard::CheckedOpenError::Unusable { .. } => "",
        };
        unavailable(
            "dlopen",
            format!(
                "cannot load the CUDA driver {name}: {}{hint}",
                e.reason_for(given)
            ),
        )
    })
}

/// Opens `name` (searched the way the dynamic loader does), initialises the driver and
/// reads its version and device count. The library stays loaded (`cuInit` starts the
/// driver's threads, and a library that is no driver may have started its own: unloading
/// would pull their code from under them).
pub fn probe(name: &str) -> Result<DriverFacts> {
    let lib = open_driver(std::path::Path::new(name))?;
    let label = lib.label;
    // SAFETY: a handle the loader just returned, owned from here by `lib` and never
    // unloaded (see above).
    let lib = std::mem::ManuallyDrop::new(libloading::Library::from(unsafe {
        libloading::os::unix::Library::from_raw(lib.handle)
    }));
    // Each call into the driver is watched: a library that calls exit() there ends the
    // process with a report and a non-zero status, not as if the program had finished.
    let watch = |step| crate::guard::watch_exit_as(CUDA_DRIVER, label, step);
    let init: InitFn = symbol(&lib, name, "cuInit")?;
    let version: CountFn = symbol(&lib, name, "cuDriverGetVersion")?;
    let count: CountFn = symbol(&lib, name, "cuDeviceGetCount")?;
    let error_name: ErrorNameFn = symbol(&lib, name, "cuGetErrorName")?;
    let describe = |code: CuResult| {
        let mut p: *const c_char = std::ptr::null();
        let _w = watch("cuGetErrorName");
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
    let w = watch("cuInit");
    // SAFETY: cuInit takes a flags word (must be 0) and nothing else.
    let rc = unsafe { init(0) };
    drop(w);
    if rc != 0 {
        return Err(unavailable(
            "cuInit",
            format!("{name} loaded, but cuInit failed: {}", describe(rc)),
        ));
    }
    let mut v: c_int = 0;
    let w = watch("cuDriverGetVersion");
    // SAFETY: a valid out-pointer.
    let rc = unsafe { version(&mut v) };
    drop(w);
    if rc != 0 {
        return Err(unavailable(
            "cuDriverGetVersion",
            format!("{name}: cuDriverGetVersion failed: {}", describe(rc)),
        ));
    }
    let mut n: c_int = 0;
    let w = watch("cuDeviceGetCount");
    // SAFETY: a valid out-pointer.
    let rc = unsafe { count(&mut n) };
    drop(w);
    Ok(DriverFacts {
        version: v,
        devices: if rc == 0 { Ok(n) } else { Err(describe(rc)) },
    })
}

/// One line on the CUDA driver `library`: loaded, with its version and device count, or why
/// it cannot be used (the loader's message, a missing entry point, the driver's error from
/// `cuInit`, an invalid value it reported). The probe runs on a thread of its own, waited
/// for at most `bound`: a driver whose `cuInit` never returns gives a line saying that
/// rpjrt's probe did not return (that thread stays blocked in the driver; later calls wait
/// for the same probe rather than starting another).
pub fn summary(library: &str, bound: Duration) -> String {
    match probe_bounded(library, bound) {
        Some(line) => line,
        None => format!(
            "rpjrt's probe of the CUDA driver {library} (cuInit, cuDriverGetVersion, \
             cuDeviceGetCount) did not return within {} s; the driver may be stuck in cuInit",
            bound.as_secs_f64()
        ),
    }
}

/// The line for what [`probe`] found in `library`.
fn describe(library: &str, found: Result<DriverFacts>) -> String {
    match found {
        Err(e) => e.to_string(),
        Ok(f) => {
            let version = if f.version < 0 {
                format!(
                    "but the driver reported an invalid CUDA version ({})",
                    f.version
                )
            } else {
                format!("CUDA {}.{}", f.version / 1000, (f.version % 1000) / 10)
            };
            let devices = match f.devices {
                Ok(n) if n < 0 => format!("the driver reported an invalid device count ({n})"),
                Ok(n) => format!("{n} device(s)"),
                Err(why) => format!("cuDeviceGetCount failed: {why}"),
            };
            format!("{library} loaded, {version}, {devices}")
        }
    }
}

/// A probe in flight: its line once it returns.
#[derive(Default)]
struct ProbeSlot {
    line: Mutex<Option<String>>,
    done: Condvar,
}

/// The probes in flight, by library: a second caller joins the first one's probe.
static PROBES: Mutex<Option<HashMap<String, Arc<ProbeSlot>>>> = Mutex::new(None);

fn probes() -> std::sync::MutexGuard<'static, Option<HashMap<String, Arc<ProbeSlot>>>> {
    PROBES.lock().unwrap_or_else(|p| p.into_inner())
}

/// [`probe`] of `library` on its own thread, waited for at most `bound`; `None` if it has
/// not returned by then.
fn probe_bounded(library: &str, bound: Duration) -> Option<String> {
    let slot = {
        let mut map = probes();
        let map = map.get_or_insert_with(HashMap::new);
        if let Some(s) = map.get(library) {
            s.clone()
        } else {
            let slot = Arc::new(ProbeSlot::default());
            let (mine, lib) = (slot.clone(), library.to_string());
            let spawned = std::thread::Builder::new()
                .name("rpjrt-cuda-probe".into())
                .spawn(move || {
                    let line = describe(&lib, probe(&lib));
                    if let Some(map) = probes().as_mut() {
                        if map.get(&lib).is_some_and(|s| Arc::ptr_eq(s, &mine)) {
                            map.remove(&lib);
                        }
                    }
                    *mine.line.lock().unwrap_or_else(|p| p.into_inner()) = Some(line);
                    mine.done.notify_all();
                });
            if spawned.is_err() {
                // No thread to be had: probe here, unbounded, as before.
                return Some(describe(library, probe(library)));
            }
            map.insert(library.to_string(), slot.clone());
            slot
        }
    };
    let deadline = Instant::now() + bound;
    let mut line = slot.line.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        if let Some(l) = line.as_ref() {
            return Some(l.clone());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        line = slot
            .done
            .wait_timeout(line, left)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

#[cfg(test)]
mod summary_tests {
    use super::*;

    #[test]
    fn a_missing_driver_is_named_with_the_loaders_message() {
        let e = probe("/nonexistent/libcuda.so.1").unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition);
        let msg = e.to_string();
        assert!(
            msg.contains("cannot load the CUDA driver /nonexistent/libcuda.so.1"),
            "{msg}"
        );
        assert!(
            msg.contains("No such file"),
            "the loader's text is kept: {msg}"
        );
    }

    #[test]
    fn a_library_that_is_not_the_driver_is_refused() {
        let e = probe("libc.so.6").unwrap_err().to_string();
        assert!(
            e.contains("libc.so.6 is not a usable CUDA driver: missing symbol cuInit"),
            "{e}"
        );
    }

    /// A fake CUDA driver with the four entry points the probe resolves, built with the
    /// system C compiler (`cc`) for `mode`: `hang` (cuInit never returns), `negver`
    /// (version -123456), `negcount` (-5 devices).
    fn fake_driver(mode: &str) -> String {
        const SRC: &str = r#"
            #include <unistd.h>
            typedef int CUresult;
            CUresult cuInit(unsigned f) { (void)f; if (MODE == 1) for (;;) sleep(1000); return 0; }
            CUresult cuDriverGetVersion(int *v) { *v = MODE == 2 ? -123456 : 13000; return 0; }
            CUresult cuDeviceGetCount(int *n) { *n = MODE == 3 ? -5 : 1; return 0; }
            CUresult cuGetErrorName(CUresult c, const char **p) { (void)c; *p = "FAKE"; return 0; }
        "#;
        let n = match mode {
            "hang" => 1,
            "negver" => 2,
            "negcount" => 3,
            _ => 0,
        };
        let dir = std::env::temp_dir().join(format!("rpjrt-probe-fake-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join(format!("{mode}.c"));
        std::fs::write(&src, SRC).unwrap();
        let out = dir.join(format!("libcuda-{mode}.so"));
        let r = std::process::Command::new("cc")
            .args(["-shared", "-fPIC", &format!("-DMODE={n}"), "-o"])
            .arg(&out)
            .arg(&src)
            .output()
            .unwrap_or_else(|e| {
                panic!("the C compiler `cc` is needed to build a fake CUDA driver: {e}")
            });
        assert!(
            r.status.success(),
            "cc failed: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        out.to_string_lossy().into_owned()
    }

    #[test]
    fn a_probe_that_hangs_is_bounded_and_named() {
        let lib = fake_driver("hang");
        let t = Instant::now();
        let line = summary(&lib, Duration::from_millis(300));
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(
            line.contains(&format!("rpjrt's probe of the CUDA driver {lib}")),
            "{line}"
        );
        assert!(line.contains("did not return within 0.3 s"), "{line}");
        assert!(line.contains("cuInit"), "{line}");
        // A second call joins the stuck probe (no new thread) and is bounded the same way.
        let t = Instant::now();
        assert!(summary(&lib, Duration::from_millis(200)).contains("did not return"));
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn invalid_versions_and_counts_are_named() {
        let lib = fake_driver("negver");
        let line = summary(&lib, Duration::from_secs(30));
        assert!(
            line.contains("the driver reported an invalid CUDA version (-123456)"),
            "{line}"
        );
        assert!(!line.contains("-123."), "{line}");
        let lib = fake_driver("negcount");
        let line = summary(&lib, Duration::from_secs(30));
        assert!(
            line.contains("the driver reported an invalid device count (-5)"),
            "{line}"
        );
        let lib = fake_driver("ok");
        let line = summary(&lib, Duration::from_secs(30));
        assert!(line.ends_with("loaded, CUDA 13.0, 1 device(s)"), "{line}");
    }
}
