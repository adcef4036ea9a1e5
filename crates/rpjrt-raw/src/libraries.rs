//! Libraries a plugin needs that the dynamic loader will not find: the plugin's `DT_NEEDED`
//! entries resolved the way the loader resolves them (run paths with `$ORIGIN`,
//! `LD_LIBRARY_PATH`, the loader's cache, the default directories), each named with what
//! usually provides it. Pure: it reads files and names no handle, so `plugin` can use it
//! when `dlopen` refuses a library, and `rpjrt::diagnostics` re-exports it.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::{Error, Result};

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

/// The `glibc-hwcaps` subdirectories the loader tries in each directory of its search
/// before the directory itself, on CPUs of that level (glibc 2.33 and later).
const HWCAPS_DIRS: &[&str] = if cfg!(target_arch = "x86_64") {
    &["x86-64-v4", "x86-64-v3", "x86-64-v2"]
} else {
    &[]
};

/// Where the dynamic loader looks for a library that this process opens by the bare name
/// `name` (no slash), in the loader's order: the program's `DT_RPATH` (when it has no
/// `DT_RUNPATH`), `LD_LIBRARY_PATH` (an empty entry is the working directory), the
/// loader's cache, the default directories. Each path comes with whether it may be
/// chosen: a `glibc-hwcaps` subdirectory's file (searched by the loader only on CPUs of
/// that level) is `false`, to be checked for what would block or crash the loader, never
/// loaded in the place of the loader's choice.
pub fn dlopen_search(name: &str) -> Vec<(PathBuf, bool)> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Ok(exe) = std::fs::canonicalize("/proc/self/exe") {
        if let Ok(info) = crate::elf::dynamic_info(&exe) {
            if let (None, Some(rpath)) = (&info.runpath, &info.rpath) {
                dirs.extend(search_dirs(rpath, exe.parent().unwrap_or(Path::new("/"))));
            }
        }
    }
    if let Some(v) = std::env::var_os("LD_LIBRARY_PATH") {
        use std::os::unix::ffi::OsStrExt as _;
        for d in v.as_bytes().split(|&b| b == b':' || b == b';') {
            let d = std::ffi::OsStr::from_bytes(d);
            dirs.push(if d.is_empty() {
                PathBuf::from(".")
            } else {
                PathBuf::from(d)
            });
        }
    }
    let mut out = Vec::new();
    let push_dir = |out: &mut Vec<(PathBuf, bool)>, d: &Path| {
        for level in HWCAPS_DIRS {
            out.push((d.join("glibc-hwcaps").join(level).join(name), false));
        }
        out.push((d.join(name), true));
    };
    for d in &dirs {
        push_dir(&mut out, d);
    }
    if let Some(p) = loader_cache().get(name) {
        out.push((p.clone(), true));
    }
    for d in DEFAULT_DIRS {
        push_dir(&mut out, Path::new(d));
    }
    out
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
        let info = match crate::elf::dynamic_info(&lib) {
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
    fn run_paths_expand_origin() {
        let dirs = search_dirs("$ORIGIN/../lib::${ORIGIN}/x:/opt/y", Path::new("/p/q"));
        let want: Vec<PathBuf> = ["/p/q/../lib", "/p/q/x", "/opt/y"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(dirs, want);
    }
}
