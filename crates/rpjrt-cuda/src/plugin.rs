//! Clients of the CUDA PJRT plugin: whether a plugin is one, client creation that says
//! what the CUDA driver is missing when a CUDA plugin cannot create a client, and one line
//! on the driver ([`driver_summary`]), from rpjrt's own probe of `libcuda.so.1` (opened at
//! run time, so everything builds and loads on machines without a GPU).

use std::time::Duration;

use rpjrt::{Client, ClientOptions, Code, Error, Plugin, Result};

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
    rpjrt::diagnostics::cuda_driver_summary(DRIVER_LIBRARY, PROBE_BOUND)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_the_library() {
        // With or without a driver, the line says which library it is about.
        assert!(driver_summary().contains(DRIVER_LIBRARY));
    }
}
