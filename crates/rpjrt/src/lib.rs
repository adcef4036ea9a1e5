//! rpjrt: a small, safe client for PJRT plugins.
//!
//! Load a vendor's PJRT plugin (a shared library exporting `GetPjrtApi`), create a client,
//! compile StableHLO, move buffers and run programs, all through the PJRT C API, with
//! versions negotiated per plugin and every failure returned as an [`Error`].
//!
//! ```no_run
//! use rpjrt::{Client, ClientOptions, CompileOptions, Plugin, Program};
//!
//! # fn main() -> rpjrt::Result<()> {
//! let plugin = Plugin::load("/path/to/pjrt_plugin.so")?;
//! let client = Client::new(&plugin, &ClientOptions::new())?;
//! let program = Program::mlir(
//!     "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {
//!        %0 = stablehlo.add %a, %a : tensor<4xf32>
//!        return %0 : tensor<4xf32>
//!      }",
//! );
//! let exe = client.compile(&program, &CompileOptions::default())?;
//! let device = client.default_device()?;
//! let x = client.buffer_from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4], &device)?;
//! let out = exe.execute(&[&x])?;
//! assert_eq!(out[0].to_vec_of::<f32>()?, vec![2.0, 4.0, 6.0, 8.0]);
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "bench")]
mod bench;
mod client;
pub mod diagnostics;
pub mod dlpack;
use rpjrt_raw::dtype;
pub mod external;
pub mod ffi;
mod hlo;
pub mod host;
mod introspect;
mod kv;
pub mod layout;
mod mlir;
mod options;
mod plugin;
pub mod profiler;
mod program;
mod screen;
mod session;
pub mod sharding;
mod stablehlo;
pub mod staging;
pub mod transfer;
pub mod triton;

// The unsafe layer is its own crate, so the boundary is the compiler's: this crate forbids
// `unsafe`. Its paths stay `crate::raw::X`, and the error vocabulary it defines is ours.
pub(crate) use rpjrt_raw as raw;
/// Keeping a plugin's own output out of a program's output (see `rpjrt_raw::capture`).
pub use rpjrt_raw::capture as stdio;
pub use rpjrt_raw::ffi::WorkerWait;
/// libtpu on a machine without a TPU: how it is recognised, and the variables set before
/// it loads (see `rpjrt_raw::tpu`).
pub use rpjrt_raw::tpu;
pub(crate) use rpjrt_raw::{error, oom};
pub use rpjrt_trace as trace;

/// Benchmark support: the raw C floor of an execution. Not part of the API; only with the
/// `bench` feature, which the benchmarks enable and the shipped crate and wheel do not.
#[cfg(feature = "bench")]
#[doc(hidden)]
pub mod __bench {
    pub use crate::bench::*;
    pub use crate::raw::guard::guard_overhead_ns;
}

pub use client::executable::CONSUMED_NOTE;
pub use client::{
    set_wait_spin, wait_spin, Artifact, ArtifactTarget, Buffer, Cache, CacheEntry, CacheStats,
    Client, Device, DeviceChoice, Event, Executable, ExecuteOptions, Execution, ExternalReference,
    HostView, Memory, MemoryChoice, Topology, ENVELOPE_VERSION, MAX_CPU_DEVICE_COUNT,
    MAX_WAIT_SPIN, QUICK_COPY_BYTES,
};
pub use client::{CallOutputs, PreparedCall};

/// With `true`, clients, executables and buffers dropped from now on are not destroyed in
/// the plugin (their handles leak); `false` ends that. For a process whose work is done and
/// that is about to end, such as a command-line tool after printing its results: the system
/// reclaims the memory anyway, and a plugin hanging in a destroy call cannot keep the
/// process from ending.
pub fn set_leak_on_drop(leak: bool) {
    raw::callback::set_leaking(leak)
}

/// For a process about to end while other threads may still be inside the plugin: from
/// now on, client creation, compiles and executable loads are refused (`CANCELLED`, before
/// reaching the plugin), and those already running are waited for, up to `limit`. Returns
/// how many still run after it. Ending the process during a compile tears down the
/// plugin's global state under it and can crash; Python's exit hook calls this. `on_wait`
/// is called once, with the count, if the wait lasts beyond a tenth of `limit`.
pub fn end_long_plugin_calls(limit: std::time::Duration, on_wait: impl FnOnce(usize)) -> usize {
    raw::callback::end_long_calls(limit, on_wait)
}

/// How many `fork()`s lie between the first call of this function and this process (0 in
/// the process that first called it). State kept per process (threads, locks) is stale
/// when this differs from the value it was made under.
pub fn fork_generation() -> u32 {
    raw::guard::generation()
}

/// Sets `counter` (calls in progress on some thread that the process waits for before it
/// ends) to zero in every child forked from now on: the child does not run the threads
/// that made those calls, so waiting for them there would never end. At most eight
/// counters in a process.
pub fn reset_after_fork(counter: &'static std::sync::atomic::AtomicUsize) {
    raw::guard::reset_after_fork(counter)
}

/// For a process forked from one that had loaded a plugin, as it ends normally: makes
/// `exit` end the process (with its status) before the exit handlers registered so far
/// run, which include the plugin's static destructors. Those wait for locks and threads of
/// the parent that the child does not have, so the child would never end. Returns whether
/// it applies (in a forked child, on glibc). Python's exit hook calls it; a Rust program
/// that forks should end its children with `_exit` instead, as `multiprocessing` does.
pub fn skip_plugin_exit_handlers_in_forked_child() -> bool {
    raw::guard::end_before_older_exit_handlers()
}

pub use plugin::{after_fork, before_fork};

/// For command-line tools: restores the default action of SIGPIPE, so that writing to a
/// closed pipe (`rpjrt info --json | head`) ends the process quietly, as C tools do,
/// instead of making `println!` panic on EPIPE. Process-wide: call it at the start of a
/// binary's `main`, never from a library.
pub fn exit_quietly_on_broken_pipe() {
    raw::guard::default_sigpipe();
}

/// The longest duration [`duration_from_secs`] gives: 10^9 seconds (about 31 years), long
/// enough to mean "forever" for any timeout, and far from where adding it to an `Instant`
/// overflows.
pub const MAX_SECONDS: f64 = 1e9;

/// Seconds given as a float (a timeout, a delay) as a [`std::time::Duration`]. NaN and
/// negative values are an error naming `what`; values beyond [`MAX_SECONDS`], infinity
/// included, are capped there. (`Duration::from_secs_f64` panics on all three.)
///
/// ```
/// # fn main() -> rpjrt::Result<()> {
/// use std::time::Duration;
/// assert_eq!(rpjrt::duration_from_secs(1.5, "timeout")?, Duration::from_millis(1500));
/// assert_eq!(rpjrt::duration_from_secs(f64::INFINITY, "timeout")?.as_secs_f64(), rpjrt::MAX_SECONDS);
/// let e = rpjrt::duration_from_secs(f64::NAN, "--timeout").unwrap_err();
/// assert!(e.to_string().contains("--timeout"));
/// # Ok(())
/// # }
/// ```
pub fn duration_from_secs(seconds: f64, what: &str) -> Result<std::time::Duration> {
    if seconds.is_nan() || seconds < 0.0 {
        return Err(Error::invalid(format!(
            "{what} must be a non-negative number of seconds, got {seconds}"
        )));
    }
    Ok(std::time::Duration::from_secs_f64(seconds.min(MAX_SECONDS)))
}

pub(crate) use rpjrt_raw::files::remove_orphaned_temps;
pub use rpjrt_raw::files::{
    check_regular_output, kind_of as file_kind, open_for_reading, open_regular_file,
    read_regular_file, write_regular_file,
};

/// An environment variable as text, `None` when unset or empty. A value that is not UTF-8
/// keeps its other characters (with replacement characters), so that it fails the
/// caller's parse with a message naming it, instead of passing for unset.
pub(crate) fn env_text(name: &str) -> Option<String> {
    let v = std::env::var_os(name)?;
    Some(v.to_string_lossy().into_owned()).filter(|v| !v.is_empty())
}
pub use dtype::{
    element_count, first_foreign_byte, foreign_byte_text, pack_sub_byte, try_pack_sub_byte,
    try_unpack_sub_byte, unpack_sub_byte, DlDataType, ElementKind, ElementType, NativeType,
};
pub use error::{Code, Error, Result};
pub use external::{DeviceAddress, DmaRegion, RawCopy};
pub use host::{
    classify, extent, gather, ByteOrder, CopyMode, HostArray, HostBytes, HostData, Layout,
};
pub use introspect::{CompiledLayout, CompiledMemoryStats};
pub use kv::{random_token, DistributedOptions, KvStore};
pub use layout::{DeviceLayout, HostDestination};
pub use options::{CompileOptions, OptionOverride, CPU_FAST_MIN_MAX};
pub use plugin::{ApiVersion, ExtensionInfo, Extensions, Plugin};
pub use program::{
    is_artifact, ArraySpec, Program, ProgramFile, ENVELOPE_MAGIC, EXECUTABLE_FORMAT,
    PROGRAM_FORMATS,
};
pub use rpjrt_raw::value::{ClientOptions, Value};
pub use rpjrt_xla::{OpSharding, ShardGroup, ShardingType};
pub use session::{Loader, Session, SessionProgram, SlotInfo, SlotState, SlotValue};
pub use stablehlo::{artifact_version, is_text_parse_refusal, StablehloFit, StablehloVersion};
pub use transfer::{AliasFulfiller, ChunkSink, StreamOptions, Upload};
