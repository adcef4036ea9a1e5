//! Errors that explain themselves: allocator figures for out-of-memory errors, and what to
//! do about a plugin that cannot be loaded.

use std::fmt;

use crate::client::Device;
use crate::error::{Code, Error, Result};
pub use crate::libraries::{describe_missing, library_provider, missing_libraries, MissingLibrary};

/// A device allocator's figures, as `PJRT_Device_MemoryStats` reports them. Figures the
/// plugin leaves unset are `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes allocated now.
    pub bytes_in_use: i64,
    /// The most bytes ever allocated at once.
    pub peak_bytes_in_use: Option<i64>,
    /// Number of allocations made.
    pub num_allocs: Option<i64>,
    /// The largest single allocation made.
    pub largest_alloc_size: Option<i64>,
    /// The allocator's limit.
    pub bytes_limit: Option<i64>,
    /// The largest block that could be allocated now.
    pub largest_free_block_bytes: Option<i64>,
}

impl fmt::Display for MemoryStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: Option<i64>| v.map_or_else(|| "not reported".to_string(), human_bytes);
        write!(
            f,
            "in use {}, limit {}, largest free block {}, peak {}, allocations {}",
            human_bytes(self.bytes_in_use),
            show(self.bytes_limit),
            show(self.largest_free_block_bytes),
            show(self.peak_bytes_in_use),
            self.num_allocs
                .map_or_else(|| "not reported".to_string(), |n| n.to_string())
        )
    }
}

/// `12345678` → `11.8 MiB (12345678 bytes)`.
pub fn human_bytes(n: i64) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v.abs() >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} bytes")
    } else {
        format!("{v:.1} {} ({n} bytes)", units[u])
    }
}

/// The device allocator's figures, or the plugin's error (both CPU plugins answer
/// `UNIMPLEMENTED`; a plugin before the entry existed answers `Unsupported`).
pub fn memory_stats(device: &Device) -> Result<MemoryStats> {
    device.core().check("device")?;
    let r = crate::raw::memstats::device_memory_stats(device.core().raw(), device.raw_ref())?;
    Ok(MemoryStats {
        bytes_in_use: r.bytes_in_use,
        peak_bytes_in_use: r.peak_bytes_in_use,
        num_allocs: r.num_allocs,
        largest_alloc_size: r.largest_alloc_size,
        bytes_limit: r.bytes_limit,
        largest_free_block_bytes: r.largest_free_block_bytes,
    })
}

/// True when `e` says memory ran out (`RESOURCE_EXHAUSTED`, or an allocation failure the
/// plugin reported under another code).
pub fn is_out_of_memory(e: &Error) -> bool {
    if e.code() == Code::ResourceExhausted {
        return true;
    }
    let m = e.to_string().to_lowercase();
    m.contains("out of memory") || m.contains("failed to allocate") || m.contains("oom")
}

/// A few lines to append to an error: for an out-of-memory error on `device`, the
/// allocator's figures (or that the plugin reports none) and what to try; for a plugin
/// that does not load, what to install. `request` describes what was being allocated,
/// when known. `None` when there is nothing to add.
pub fn explain(e: &Error, device: Option<&Device>, request: Option<&str>) -> Option<String> {
    if is_out_of_memory(e) {
        let mut lines = Vec::new();
        if let Some(r) = request {
            lines.push(format!("request: {r}"));
        }
        match device {
            Some(d) => match memory_stats(d) {
                Ok(s) => lines.push(format!("device {} allocator: {s}", d.id())),
                Err(err) => lines.push(format!(
                    "device {}: the plugin reports no allocator figures ({})",
                    d.id(),
                    err.code()
                )),
            },
            None => lines.push("no device was named, so no allocator figures".into()),
        }
        lines.push(
            "hint: free buffers you no longer need (delete them or drop them), donate inputs, \
             use smaller batches, or run on a device with more memory"
                .into(),
        );
        return Some(lines.join("\n"));
    }
    if let Error::PluginLoad { reason, .. } = e {
        let r = reason.to_lowercase();
        let hint = if r.contains("cannot be found by the dynamic loader") {
            "install what provides the libraries above, or put the directory that holds them \
             on LD_LIBRARY_PATH; `rpjrt plugins` lists the other plugins installed"
        } else if r.contains("libcuda") || r.contains("libcudart") || r.contains("cublas") {
            "the CUDA libraries are missing: pip install the matching nvidia-* wheels \
             (jax-cuda12-plugin[with-cuda] pulls them) or install the CUDA toolkit"
        } else if r.contains("glibc") || r.contains("glibcxx") {
            "the plugin was built for a newer C/C++ runtime than this system has: use a \
             plugin wheel built for this platform"
        } else if r.contains("the file cannot be read") {
            "the file is not there: list what is installed with `rpjrt plugins`, or pip \
             install xla-cpu-pjrt for a CPU plugin"
        } else {
            return None;
        };
        return Some(format!("hint: {hint}"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libraries::{describe_missing, library_provider, MissingLibrary};

    #[test]
    fn bytes_read_well() {
        assert_eq!(human_bytes(512), "512 bytes");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB (3145728 bytes)");
        let s = MemoryStats {
            bytes_in_use: 10,
            ..Default::default()
        };
        assert!(s.to_string().contains("limit not reported"));
    }

    #[test]
    fn missing_libraries_are_grouped_by_provider_and_hinted() {
        let m = |name: &str| MissingLibrary {
            name: name.into(),
            needed_by: "/p/plugin.so".into(),
            provider: library_provider(name),
        };
        let text = describe_missing(&[m("libamdhip64.so.7"), m("libzz.so"), m("librocblas.so.5")]);
        assert!(text.contains("3 libraries"), "{text}");
        assert!(
            text.contains("libamdhip64.so.7, librocblas.so.5 (from ROCm"),
            "{text}"
        );
        assert!(text.contains("libzz.so (from an unknown package"), "{text}");
        let e = Error::PluginLoad {
            path: "/p/plugin.so".into(),
            reason: text,
        };
        let hint = explain(&e, None, None).unwrap();
        assert!(hint.contains("LD_LIBRARY_PATH"), "{hint}");
        assert!(!hint.contains("not there"), "{hint}");
    }

    #[test]
    fn load_errors_get_hints() {
        let e = Error::PluginLoad {
            path: "/x.so".into(),
            reason: "it is not a loadable shared library (libcudart.so.12: cannot open)".into(),
        };
        assert!(explain(&e, None, None).unwrap().contains("nvidia"));
    }
}
