//! rpjrt-cuda: small safe helpers over the CUDA driver API, for custom kernels next to
//! XLA (an FFI handler receives XLA's stream and device pointers and launches its own
//! kernel with them).
//!
//! The driver library is opened at run time ([`Cuda::load`]); nothing links against CUDA,
//! so this crate builds and loads on machines without a GPU, and [`Cuda::load`] then
//! returns an error naming `libcuda.so.1` and quoting the loader's message. Errors are
//! [`rpjrt::Error`]s: a driver failure is `Error::Pjrt` with the driver call as its entry
//! and the driver's error name and description as its message.
//!
//! It also holds what concerns the CUDA PJRT plugin (`jax-cuda12-pjrt`, `jax-cuda13-pjrt`)
//! as a client: its typed create options ([`CudaOptions`]), [`create_client`], which says
//! what the CUDA driver is missing when such a plugin cannot create a client, and
//! [`driver_summary`]. The core crate knows nothing of CUDA.
//!
//! ```no_run
//! use rpjrt_cuda::{Allocator, CudaOptions};
//! # fn main() -> rpjrt::Result<()> {
//! let plugin = rpjrt::Plugin::load("/path/to/xla_cuda_plugin.so")?;
//! let options = CudaOptions::new()
//!     .memory_fraction(0.5)
//!     .allocator(Allocator::Bfc)
//!     .to_client_options()?;
//! let client = rpjrt_cuda::create_client(&plugin, &options)?;
//! # Ok(()) }
//! ```
//!
//! Kernels next to XLA:
//!
//! ```no_run
//! use rpjrt_cuda::{Cuda, KernelArg, LaunchConfig, StreamRef};
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
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod driver;
mod options;
mod plugin;
#[allow(unsafe_code)]
mod raw;

pub use options::{Allocator, CudaOptions};
pub use plugin::{create_client, driver_summary, is_cuda_plugin, DRIVER_LIBRARY};

pub use driver::{
    Context, Cuda, DeviceBuffer, DevicePtr, Event, Function, KernelArg, LaunchConfig, Module,
    PinnedBuffer, Stream, StreamRef,
};
