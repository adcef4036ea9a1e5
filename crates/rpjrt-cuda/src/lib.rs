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
//! The typed create options of the CUDA PJRT plugin stay in the core, in `rpjrt::cuda`.
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
#[allow(unsafe_code)]
mod raw;

pub use driver::{
    Context, Cuda, DeviceBuffer, DevicePtr, Event, Function, KernelArg, LaunchConfig, Module,
    PinnedBuffer, Stream, StreamRef,
};
