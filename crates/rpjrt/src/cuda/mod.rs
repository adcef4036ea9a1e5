//! NVIDIA GPUs: typed create options for the CUDA PJRT plugin, and client creation that
//! says what the CUDA driver is missing when a CUDA plugin cannot create a client.
//!
//! The CUDA driver API helpers for custom kernels (contexts, device and pinned memory,
//! PTX/cubin modules, kernel launch, streams, events) are the `rpjrt-cuda` crate
//! (`rpjrt_cuda::Cuda`). The core never depends on it and never links against CUDA: its
//! one look at the driver, [`driver_summary`], opens `libcuda.so.1` at run time, so
//! everything builds and loads on machines without a GPU.
//!
//! ```no_run
//! use rpjrt::cuda::{Allocator, CudaOptions};
//! # fn main() -> rpjrt::Result<()> {
//! let plugin = rpjrt::Plugin::load("/path/to/xla_cuda_plugin.so")?;
//! let options = CudaOptions::new()
//!     .memory_fraction(0.5)
//!     .allocator(Allocator::Bfc)
//!     .to_client_options()?;
//! let client = rpjrt::cuda::create_client(&plugin, &options)?;
//! # Ok(()) }
//! ```

mod options;

pub use options::{Allocator, CudaOptions};

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Code, Error, Result};
use crate::raw::cuda::{probe, DriverFacts};
use crate::{Client, ClientOptions, Plugin};

/// The CUDA driver library's name, as the dynamic loader searches for it.
pub const DRIVER_LIBRARY: &str = "libcuda.so.1";

/// Whether `plugin` is a CUDA plugin (it reports a `cuda_version` attribute).
pub fn is_cuda_plugin(plugin: &Plugin) -> bool {
    plugin.attribute("cuda_version").is_some()
}

/// [`Client::new`], with a better error from CUDA plugins: when a CUDA plugin fails for
/// want of a GPU or driver, the error also names the plugin file and says what loading the
/// CUDA driver found. Other plugins' errors are returned as they are.
///
/// The plugin's own message ("No visible GPU devices") says neither which library failed
/// nor why; this adds both, keeping the plugin's code and entry.
pub fn create_client(plugin: &Plugin, options: &ClientOptions) -> Result<Client> {
    let result = Client::new(plugin, options);
    if !is_cuda_plugin(plugin) {
        return result;
    }
    result.map_err(|e| match e {
        Error::Pjrt {
            entry,
            code,
            message,
        } if code == Code::FailedPrecondition || code == Code::Internal => Error::Pjrt {
            entry,
            code,
            message: format!(
                "{message} (plugin {}; CUDA driver: {})",
                plugin.path().display(),
                driver_summary()
            ),
        },
        other => other,
    })
}

/// How long rpjrt's own probe of the driver may take before [`driver_summary`] says that
/// it did not return. The probe only explains another error, and a driver that a plugin has
/// already initialised answers at once.
const PROBE_BOUND: Duration = Duration::from_secs(3);

/// One line on the CUDA driver ([`DRIVER_LIBRARY`]): loaded, with its version and device
/// count, or why it cannot be used (the loader's message, a missing entry point, or the
/// driver's error from `cuInit`).
///
/// The probe runs on a thread of its own and is waited for at most a few seconds: a driver
/// whose `cuInit` never returns gives a line saying that rpjrt's probe of `libcuda.so.1`
/// did not return (that thread stays blocked in the driver; later calls wait for the same
/// probe rather than starting another).
pub fn driver_summary() -> String {
    summary_of(DRIVER_LIBRARY, PROBE_BOUND)
}

/// The summary line for the driver library `library`, waiting at most `bound` for it.
fn summary_of(library: &str, bound: Duration) -> String {
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
mod tests {
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
        let line = summary_of(&lib, Duration::from_millis(300));
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(
            line.contains(&format!("rpjrt's probe of the CUDA driver {lib}")),
            "{line}"
        );
        assert!(line.contains("did not return within 0.3 s"), "{line}");
        assert!(line.contains("cuInit"), "{line}");
        // A second call joins the stuck probe (no new thread) and is bounded the same way.
        let t = Instant::now();
        assert!(summary_of(&lib, Duration::from_millis(200)).contains("did not return"));
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn invalid_versions_and_counts_are_named() {
        let lib = fake_driver("negver");
        let line = summary_of(&lib, Duration::from_secs(30));
        assert!(
            line.contains("the driver reported an invalid CUDA version (-123456)"),
            "{line}"
        );
        assert!(!line.contains("-123."), "{line}");
        let lib = fake_driver("negcount");
        let line = summary_of(&lib, Duration::from_secs(30));
        assert!(
            line.contains("the driver reported an invalid device count (-5)"),
            "{line}"
        );
        let lib = fake_driver("ok");
        let line = summary_of(&lib, Duration::from_secs(30));
        assert!(line.ends_with("loaded, CUDA 13.0, 1 device(s)"), "{line}");
    }

    #[test]
    fn the_summary_names_the_library() {
        // With or without a driver, the line says which library it is about.
        assert!(driver_summary().contains(DRIVER_LIBRARY));
    }
}
