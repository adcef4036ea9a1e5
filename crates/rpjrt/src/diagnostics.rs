//! Errors that explain themselves: allocator figures for out-of-memory errors, and what to
//! do about a plugin that cannot be loaded.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::client::Device;
use crate::error::{Code, Error, Result};

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

/// A library a plugin needs that the dynamic loader will not find.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MissingLibrary {
    /// The name as the needing library asks for it (`DT_NEEDED`), e.g. `libcuda.so.1`.
    pub name: String,
    /// The library that needs it (the plugin itself, or one of its dependencies).
    pub needed_by: PathBuf,
    /// What usually provides it (the NVIDIA driver, ROCm, ...), when known.
    pub provider: Option<&'static str>,
}

/// What usually provides a library, by name prefix.
const PROVIDERS: &[(&[&str], &str)] = &[
    (
        &["libcuda.so", "libnvidia-"],
        "the NVIDIA driver (not a pip package: install the driver on a machine with an NVIDIA GPU)",
    ),
    (
        &[
            "libcudart", "libcublas", "libcudnn", "libcupti", "libcufft", "libcusolver",
            "libcusparse", "libcurand", "libnccl", "libnvrtc", "libnvJitLink", "libnvshmem",
            "libnvtx", "libcufile",
        ],
        "the nvidia-* wheels (pip install the plugin with its [with-cuda] extra) or the CUDA toolkit",
    ),
    (
        &[
            "libamdhip", "libhsa-", "libhip", "librocm", "librocblas", "librocsolver",
            "librocsparse", "librocfft", "librocrand", "libroctracer", "librocprofiler",
            "libroctx", "libMIOpen", "librccl", "libamd_comgr", "libhipblaslt", "librocprim",
            "libdrm_amdgpu", "libamd_smi", "librocm_sysdeps",
        ],
        "ROCm (AMD's runtime, usually /opt/rocm/lib on LD_LIBRARY_PATH or in ld.so.conf)",
    ),
    (
        &["libmpi", "libhwloc"],
        "an MPI library (Open MPI, MPICH or Intel MPI; hwloc comes with it)",
    ),
    (
        &[
            "libccl", "libsycl", "libze_", "libur_", "libOpenCL", "libmkl", "libsvml", "libimf",
            "libintlc", "libirng", "libirc", "libiomp", "libtbb", "libumf", "libpti",
        ],
        "Intel oneAPI (its setvars.sh puts the libraries on LD_LIBRARY_PATH; the Level Zero \
         loader comes with the GPU driver)",
    ),
    (
        &["libstdc++", "libgcc_s"],
        "the system's C++ runtime (an OS package)",
    ),
    (&["libpython"], "a shared Python library (an OS or python.org package)"),
];

/// What usually provides the library `name`, when the table knows it.
pub fn library_provider(name: &str) -> Option<&'static str> {
    PROVIDERS
        .iter()
        .find(|(prefixes, _)| prefixes.iter().any(|p| name.starts_with(p)))
        .map(|(_, what)| *what)
}

/// The directories the loader's cache (`/etc/ld.so.cache`) knows a library name in, read
/// once from `ldconfig -p`; empty when that cannot run.
fn loader_cache() -> &'static HashMap<String, PathBuf> {
    static CACHE: OnceLock<HashMap<String, PathBuf>> = OnceLock::new();
    CACHE.get_or_init(|| {
        let mut map = HashMap::new();
        for ldconfig in ["/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"] {
            let Ok(out) = std::process::Command::new(ldconfig)
                .arg("-p")
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .output()
            else {
                continue;
            };
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                // "\tlibfoo.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libfoo.so.1"
                let Some((left, right)) = line.split_once(" => ") else {
                    continue;
                };
                let Some(name) = left.split_whitespace().next() else {
                    continue;
                };
                let ours = if cfg!(target_arch = "x86_64") {
                    left.contains("x86-64")
                } else if cfg!(target_arch = "aarch64") {
                    left.contains("AArch64")
                } else {
                    true
                };
                if ours {
                    map.entry(name.to_string())
                        .or_insert_with(|| PathBuf::from(right.trim()));
                }
            }
            break;
        }
        map
    })
}

/// The directories the loader always searches last.
const DEFAULT_DIRS: &[&str] = &[
    "/lib",
    "/usr/lib",
    "/lib64",
    "/usr/lib64",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
];

/// Expands `$ORIGIN` (and `${ORIGIN}`) in a run path to the needing library's directory.
fn search_dirs(list: &str, origin: &Path) -> Vec<PathBuf> {
    let o = origin.to_string_lossy();
    list.split(':')
        .filter(|d| !d.is_empty())
        .map(|d| PathBuf::from(d.replace("${ORIGIN}", &o).replace("$ORIGIN", &o)))
        .collect()
}

/// Where the loader would find `name` for a library in `origin` with these run paths.
fn locate(
    name: &str,
    origin: &Path,
    runpath: Option<&str>,
    rpath: Option<&str>,
) -> Option<PathBuf> {
    if name.contains('/') {
        // A name with a slash is a path, taken as it is (relative to the working directory).
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    let mut dirs = Vec::new();
    // DT_RPATH counts only when there is no DT_RUNPATH, and comes before LD_LIBRARY_PATH.
    if runpath.is_none() {
        if let Some(r) = rpath {
            dirs.extend(search_dirs(r, origin));
        }
    }
    if let Some(v) = std::env::var_os("LD_LIBRARY_PATH") {
        dirs.extend(std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()));
    }
    if let Some(r) = runpath {
        dirs.extend(search_dirs(r, origin));
    }
    if let Some(p) = dirs.iter().map(|d| d.join(name)).find(|p| p.is_file()) {
        return Some(p);
    }
    if let Some(p) = loader_cache().get(name) {
        return Some(p.clone());
    }
    DEFAULT_DIRS
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// Every library that `path` needs, directly or through the libraries it needs, that the
/// dynamic loader would not find: `DT_NEEDED` entries resolved as the loader does
/// (`DT_RPATH`, `LD_LIBRARY_PATH`, `DT_RUNPATH` with `$ORIGIN`, the `ldconfig` cache, the
/// default directories). Empty when everything is found. The error says why the file could
/// not be read as a shared library.
pub fn missing_libraries(path: &Path) -> Result<Vec<MissingLibrary>> {
    let fail = |reason: String| Error::PluginLoad {
        path: path.to_path_buf(),
        reason,
    };
    let mut missing: Vec<MissingLibrary> = Vec::new();
    let mut seen: HashSet<PathBuf> = HashSet::new();
    let mut queue = vec![path.to_path_buf()];
    let mut first = true;
    // Bounded: a plugin with its dependencies is tens of libraries, not thousands.
    while let Some(lib) = queue.pop() {
        if !seen.insert(lib.clone()) || seen.len() > 400 {
            continue;
        }
        let info = match crate::raw::elf::dynamic_info(&lib) {
            Ok(i) => i,
            Err(reason) if first => return Err(fail(reason)),
            Err(_) => continue,
        };
        first = false;
        let origin = lib.parent().map(Path::to_path_buf).unwrap_or_default();
        for name in &info.needed {
            match locate(
                name,
                &origin,
                info.runpath.as_deref(),
                info.rpath.as_deref(),
            ) {
                Some(found) => queue.push(found),
                None => {
                    if !missing.iter().any(|m| &m.name == name) {
                        missing.push(MissingLibrary {
                            name: name.clone(),
                            needed_by: lib.clone(),
                            provider: library_provider(name),
                        });
                    }
                }
            }
        }
    }
    Ok(missing)
}

/// The reason text for a plugin whose libraries are missing: every one, grouped by what
/// provides it.
pub fn describe_missing(missing: &[MissingLibrary]) -> String {
    let mut groups: Vec<(Option<&'static str>, Vec<&str>)> = Vec::new();
    for m in missing {
        match groups.iter_mut().find(|(p, _)| *p == m.provider) {
            Some((_, names)) => names.push(&m.name),
            None => groups.push((m.provider, vec![&m.name])),
        }
    }
    let mut text = format!(
        "the plugin file is there, but {} {} it needs cannot be found by the dynamic loader:",
        missing.len(),
        if missing.len() == 1 {
            "library"
        } else {
            "libraries"
        }
    );
    for (provider, names) in groups {
        text.push_str(&format!(
            "\n    {} (from {})",
            names.join(", "),
            provider.unwrap_or("an unknown package: search for the name")
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn run_paths_expand_origin_and_missing_libraries_group_by_provider() {
        let dirs = search_dirs("$ORIGIN/../lib::${ORIGIN}/x:/opt/y", Path::new("/p/q"));
        let want: Vec<PathBuf> = ["/p/q/../lib", "/p/q/x", "/opt/y"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(dirs, want);
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
