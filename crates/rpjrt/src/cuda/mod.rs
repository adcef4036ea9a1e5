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

use crate::error::{Code, Error, Result};
use crate::raw::cuda::probe;
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

/// One line on the CUDA driver ([`DRIVER_LIBRARY`]): loaded, with its version and device
/// count, or why it cannot be used (the loader's message, a missing entry point, or the
/// driver's error from `cuInit`).
pub fn driver_summary() -> String {
    match probe(DRIVER_LIBRARY) {
        Err(e) => e.to_string(),
        Ok(f) => {
            let devices = match f.devices {
                Ok(n) => format!("{n} device(s)"),
                Err(why) => format!("cuDeviceGetCount failed: {why}"),
            };
            format!(
                "{DRIVER_LIBRARY} loaded, CUDA {}.{}, {devices}",
                f.version / 1000,
                (f.version % 1000) / 10
            )
        }
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

    #[test]
    fn the_summary_names_the_library() {
        // With or without a driver, the line says which library it is about.
        assert!(driver_summary().contains(DRIVER_LIBRARY));
    }
}
