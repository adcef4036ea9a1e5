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
pub mod cuda;
pub mod diagnostics;
pub mod dlpack;
mod dtype;
pub mod external;
pub mod ffi;
mod hlo;
pub mod host;
mod introspect;
mod kv;
pub mod layout;
mod libraries;
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
pub mod tpu;
pub mod trace;
pub mod transfer;
pub mod triton;
mod value;

// The unsafe layer is its own crate, so the boundary is the compiler's: this crate forbids
// `unsafe`. Its paths stay `crate::raw::X`, and the error vocabulary it defines is ours.
pub(crate) use rpjrt_raw as raw;
/// Keeping a plugin's own output out of a program's output (see `rpjrt_raw::capture`).
pub use rpjrt_raw::capture as stdio;
pub(crate) use rpjrt_raw::{error, oom};

/// Benchmark support: the raw C floor of an execution. Not part of the API; only with the
/// `bench` feature, which the benchmarks enable and the shipped crate and wheel do not.
#[cfg(feature = "bench")]
#[doc(hidden)]
pub mod __bench {
    pub use crate::bench::*;
    pub use crate::raw::guard::guard_overhead_ns;
}

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

/// The bytes of a regular file. A FIFO, a directory or a device is refused without being
/// read (reading a FIFO blocks until a writer comes; `/dev/zero` never ends), and every
/// error names the path.
///
/// ```
/// let e = rpjrt::read_regular_file("/dev/zero").unwrap_err();
/// assert_eq!(e.to_string(), "invalid argument: /dev/zero: not a regular file");
/// ```
pub fn read_regular_file(path: impl AsRef<std::path::Path>) -> Result<Vec<u8>> {
    let path = path.as_ref();
    let fail = |e: &dyn std::fmt::Display| Error::invalid(format!("{}: {e}", path.display()));
    let meta = std::fs::metadata(path).map_err(|e| fail(&e))?;
    if !meta.is_file() {
        return Err(fail(&"not a regular file"));
    }
    std::fs::read(path).map_err(|e| fail(&e))
}

/// Checks that a file can be written at `path` by replacing it: nothing there yet, or a
/// regular file. A FIFO, a device, a socket or a directory is refused: writing to a FIFO
/// blocks until a reader comes, and renaming a new file over a device node (as
/// [`write_regular_file`] does) would replace the node itself.
///
/// ```
/// let e = rpjrt::check_regular_output("/dev/null").unwrap_err();
/// assert!(e.to_string().contains("/dev/null: a character device, not a regular file"));
/// ```
pub fn check_regular_output(path: impl AsRef<std::path::Path>) -> Result<()> {
    use std::os::unix::fs::FileTypeExt as _;
    let path = path.as_ref();
    let kind = match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::invalid(format!("{}: {e}", path.display()))),
        Ok(m) if m.is_file() => return Ok(()),
        Ok(m) => match m.file_type() {
            t if t.is_dir() => "a directory",
            t if t.is_fifo() => "a FIFO (named pipe)",
            t if t.is_char_device() => "a character device",
            t if t.is_block_device() => "a block device",
            t if t.is_socket() => "a socket",
            _ => "not a plain file",
        },
    };
    Err(Error::invalid(format!(
        "{}: {kind}, not a regular file; give a file name to write",
        path.display()
    )))
}

/// The file a symbolic link at `path` leads to (following links in turn, as opening it
/// would), or `path` itself when it is no link. The target need not exist.
fn follow_links(path: &std::path::Path) -> Result<std::path::PathBuf> {
    let mut p = path.to_path_buf();
    // Linux's own bound on links followed in one path lookup.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p)
                    .map_err(|e| Error::invalid(format!("{}: {e}", p.display())))?;
                p = match p.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(Error::invalid(format!(
        "{}: too many levels of symbolic links",
        path.display()
    )))
}

/// Writes the file at `path` whole or not at all: `write` fills a new temporary file in the
/// same directory (a name of its own, never an existing file), which then replaces `path`.
/// A `path` that exists and is not a regular file is refused untouched
/// ([`check_regular_output`]); on any error the temporary file is removed. Errors name
/// `path`. A symbolic link at `path` is followed: the file it leads to is replaced (in
/// that file's directory) and the link stays, as writing through the link would do;
/// replacing the link itself would leave its target holding the old contents.
/// A file that is replaced keeps its permission bits (a read-only 0444 file stays
/// read-only); being a new file, it gets this process's owner and is no longer
/// hard-linked to the old file's other names.
pub fn write_regular_file(
    path: impl AsRef<std::path::Path>,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> Result<()> {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let given = path.as_ref();
    check_regular_output(given)?;
    let target = follow_links(given)?;
    let path = target.as_path();
    let fail = |e: &dyn std::fmt::Display| Error::invalid(format!("{}: {e}", given.display()));
    let name = path.file_name().ok_or_else(|| fail(&"not a file name"))?;
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let suffix = format!(".{}-{n}.tmp", std::process::id());
    // Within the 255 bytes a file name may have: a long name is shortened in the temporary.
    let keep = 255 - 1 - suffix.len();
    let mut tmp_name = std::ffi::OsString::from(".");
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt as _;
        let b = name.as_bytes();
        tmp_name.push(std::ffi::OsStr::from_bytes(&b[..b.len().min(keep)]));
    }
    #[cfg(not(unix))]
    tmp_name.push(name);
    tmp_name.push(suffix);
    let tmp = path.with_file_name(tmp_name);
    let mut file = std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| {
            fail(&format!(
                "cannot create the temporary file {} ({e})",
                tmp.display()
            ))
        })?;
    // The file replaced keeps its mode: the new one would otherwise get the default.
    let keep_mode = std::fs::metadata(path).ok().map(|m| m.permissions());
    let result = write(&mut file)
        .and_then(|()| keep_mode.map_or(Ok(()), |mode| file.set_permissions(mode)))
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(&e));
    }
    // Temporaries of earlier writers of this file that were killed mid-write: named as
    // above, the whole name or (a long one) its first `keep` bytes.
    if let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        remove_orphaned_temps(dir, 2, |t| {
            let rest = t.strip_prefix('.')?.strip_suffix(".tmp")?;
            let (written, numbers) = rest.rsplit_once('.')?;
            let cut = 255usize.checked_sub(numbers.len() + ".tmp".len() + 2) == Some(written.len());
            (written == name || (cut && name.starts_with(written))).then_some(numbers)
        });
    }
    Ok(())
}

/// Removes the temporary files in `dir` that writers killed mid-write left: regular files
/// whose name `numbers_of` recognises, giving its numbers part (`fields` numbers joined by
/// `-`, the first the writer's process id, each written as a plain decimal), untouched for
/// at least [`ORPHAN_AGE`], whose process no longer runs. The age guards a writer this
/// process cannot see (another PID namespace, another host sharing the directory). Only
/// where `/proc` tells which processes run (Linux); elsewhere nothing is removed.
pub(crate) fn remove_orphaned_temps(
    dir: &std::path::Path,
    fields: usize,
    numbers_of: impl Fn(&str) -> Option<&str>,
) {
    let proc = std::path::Path::new("/proc");
    if !proc.join("self").exists() {
        return;
    }
    let dir = if dir.as_os_str().is_empty() {
        std::path::Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let me = std::process::id();
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(&numbers_of) else {
            continue;
        };
        let numbers: Vec<u64> = rest
            .split('-')
            .map_while(|f| f.parse::<u64>().ok().filter(|v| v.to_string() == f))
            .collect();
        let pid = match numbers.as_slice() {
            [pid, ..] if numbers.len() == fields && rest.split('-').count() == fields => *pid,
            _ => continue,
        };
        let old = entry
            .metadata()
            .ok()
            .filter(|m| m.file_type().is_file())
            .and_then(|m| m.modified().ok())
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age >= ORPHAN_AGE);
        if old && pid != u64::from(me) && pid != 0 && !proc.join(pid.to_string()).exists() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// How long a temporary file must sit untouched before [`remove_orphaned_temps`] may
/// judge it left behind.
pub(crate) const ORPHAN_AGE: std::time::Duration = std::time::Duration::from_secs(600);

/// An environment variable as text, `None` when unset or empty. A value that is not UTF-8
/// keeps its other characters (with replacement characters), so that it fails the
/// caller's parse with a message naming it, instead of passing for unset.
pub(crate) fn env_text(name: &str) -> Option<String> {
    let v = std::env::var_os(name)?;
    Some(v.to_string_lossy().into_owned()).filter(|v| !v.is_empty())
}
pub use dtype::{
    element_count, first_foreign_byte, foreign_byte_text, pack_sub_byte, unpack_sub_byte,
    DlDataType, ElementKind, ElementType, NativeType,
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
pub use rpjrt_xla::{OpSharding, ShardGroup, ShardingType};
pub use session::{Loader, Session, SessionProgram, SlotInfo, SlotState, SlotValue};
pub use stablehlo::{artifact_version, is_text_parse_refusal, StablehloFit, StablehloVersion};
pub use transfer::{AliasFulfiller, ChunkSink, StreamOptions, Upload};
pub use value::{ClientOptions, Value};
