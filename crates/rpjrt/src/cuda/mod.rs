//! NVIDIA GPUs: typed create options for the CUDA PJRT plugin and small helpers over the
//! CUDA driver API for custom kernels.
//!
//! The driver helpers open `libcuda.so.1` at run time ([`Cuda::load`]); rpjrt never links
//! against CUDA, so everything here builds and loads on machines without a GPU, and
//! [`Cuda::load`] then returns an error naming the library and the loader's message.
//!
//! ```no_run
//! use rpjrt::cuda::{Cuda, KernelArg, LaunchConfig, StreamRef};
//! # fn main() -> rpjrt::Result<()> {
//! let cuda = Cuda::load()?;
//! let ctx = cuda.context(0)?;
//! let buf = ctx.alloc(1024)?;
//! ctx.memset(buf.ptr(), 0, 1024)?;
//! # let ptx = "";
//! let module = ctx.load_ptx(ptx)?;
//! let f = module.function("fill")?;
//! ctx.launch(&f, LaunchConfig::linear(256, 128), &[KernelArg::Ptr(buf.ptr())], StreamRef::DEFAULT)?;
//! ctx.synchronize()?;
//! # Ok(()) }
//! ```

mod driver;
mod options;

pub use driver::{
    Context, Cuda, DeviceBuffer, DevicePtr, Event, Function, KernelArg, LaunchConfig, Module,
    PinnedBuffer, Stream, StreamRef,
};
pub use options::{Allocator, CudaOptions};

use crate::error::{Code, Error, Result};
use crate::{Client, ClientOptions, Plugin};

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

/// One line on the CUDA driver: its library and version and device count, or why it
/// cannot be used.
pub fn driver_summary() -> String {
    match Cuda::load() {
        Err(e) => e.to_string(),
        Ok(c) => {
            let version = c
                .driver_version()
                .map(|v| format!("CUDA {}.{}", v / 1000, (v % 1000) / 10))
                .unwrap_or_else(|e| e.to_string());
            let devices = c
                .device_count()
                .map(|n| format!("{n} device(s)"))
                .unwrap_or_else(|e| e.to_string());
            format!("{} loaded, {version}, {devices}", c.library())
        }
    }
}
