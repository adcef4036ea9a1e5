//! Finding PJRT plugins on disk, without loading (or even opening) any library: a
//! satellite of [rpjrt](https://docs.rs/rpjrt) that uses only its public API.
//!
//! Rust users, the `rpjrt` CLI and the Python package all use this crate, so they find
//! the same plugins in the same order:
//!
//! 1. `RPJRT_PLUGIN`: a path to a plugin library (listed first), or the name of a plugin
//!    found by the steps below (`RPJRT_PLUGIN=cuda`), which is then moved to the front.
//! 2. `PJRT_NAMES_AND_LIBRARY_PATHS`: `name:path,name:path` as JAX reads it (`;` between
//!    name and path on Windows); a path ending in `.json` is a JAX plugin config
//!    (`{"library_path": ..., "create_options": {...}}`).
//! 3. Installed wheels that declare an entry point in the `jax_plugins` or `xla_plugins`
//!    group (read from `*.dist-info/entry_points.txt`); the library is found from the
//!    distribution's `RECORD`, else in the module's directory on the search path.
//! 4. Sub-directories of the `jax_plugins` / `xla_plugins` namespace packages.
//! 5. Known plugin wheels by name ([`KNOWN_PACKAGES`]), with `TPU_LIBRARY_PATH` just
//!    before libtpu.
//!
//! A file found twice is listed once, under its first source. The search path is a list of
//! site-packages style directories: Python passes its `sys.path`; elsewhere
//! [`SearchPath::from_env`] uses `RPJRT_PLUGIN_PATH` (a `:`-separated list), the
//! site-packages of `VIRTUAL_ENV` and of the environment the program is installed in, and
//! the site directories a Python interpreter gives (`RPJRT_PYTHON`, or `python3`, when
//! `VIRTUAL_ENV` gives none). Only regular files are ever read (metadata files and
//! JSON configs); libraries are only listed.

#![warn(missing_docs)]

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rpjrt::{ClientOptions, Value};
use rpjrt::{Error, Result};

/// Entry point groups whose values name a plugin module.
pub const ENTRY_POINT_GROUPS: [&str; 2] = ["jax_plugins", "xla_plugins"];
/// Namespace packages whose sub-packages are plugin modules.
pub const NAMESPACE_PACKAGES: [&str; 2] = ["jax_plugins", "xla_plugins"];

/// A plugin wheel rpjrt knows by name (found even without an entry point).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownPackage {
    /// Distribution name on PyPI.
    pub package: &'static str,
    /// Directory of the library, relative to site-packages, `/`-separated.
    pub module_dir: &'static str,
    /// Preferred library file name in that directory.
    pub library: &'static str,
    /// Plugin name.
    pub name: &'static str,
    /// Platform.
    pub platform: &'static str,
}

/// The plugin wheels rpjrt knows by name, in search order.
pub const KNOWN_PACKAGES: [KnownPackage; 6] = [
    KnownPackage {
        package: "xla-cpu-pjrt",
        module_dir: "xla_plugins/xla_cpu_pjrt",
        library: "xla_cpu_pjrt.so",
        name: "xla_cpu_pjrt",
        platform: "cpu",
    },
    KnownPackage {
        package: "lammps-jax-pjrt-cpu",
        module_dir: "lammps_jax_pjrt_cpu",
        library: "pjrt_c_api_cpu_plugin.so",
        name: "lammps_jax_pjrt_cpu",
        platform: "cpu",
    },
    // A plain package (no entry point, no namespace package) holding XLA's CPU plugin.
    KnownPackage {
        package: "fastatomstruct-xla-cpu",
        module_dir: "fastatomstruct_xla_cpu",
        library: "libpjrt_cpu.so",
        name: "fastatomstruct_xla_cpu",
        platform: "cpu",
    },
    KnownPackage {
        package: "jax-cuda12-pjrt",
        module_dir: "jax_plugins/xla_cuda12",
        library: "xla_cuda_plugin.so",
        name: "xla_cuda12",
        platform: "cuda",
    },
    KnownPackage {
        package: "jax-cuda13-pjrt",
        module_dir: "jax_plugins/xla_cuda13",
        library: "xla_cuda_plugin.so",
        name: "xla_cuda13",
        platform: "cuda",
    },
    KnownPackage {
        package: "libtpu",
        module_dir: "libtpu",
        library: "libtpu.so",
        name: "libtpu",
        platform: "tpu",
    },
];

const INSTALL_HINTS: [(&str, &str); 5] = [
    (
        "cpu",
        "pip install 'rpjrt[cpu]'   (the xla-cpu-pjrt plugin)",
    ),
    (
        "cuda",
        "pip install jax-cuda12-pjrt   (or jax-cuda13-pjrt for CUDA 13)",
    ),
    (
        "gpu",
        "pip install jax-cuda12-pjrt   (NVIDIA; or jax-cuda13-pjrt, or a ROCm PJRT wheel)",
    ),
    ("rocm", "pip install jax-rocm7-pjrt   (AMD ROCm)"),
    ("tpu", "pip install libtpu   (or set TPU_LIBRARY_PATH)"),
];

/// A plugin library that discovery found (nothing is loaded).
#[derive(Clone, Debug, PartialEq)]
pub struct PluginInfo {
    /// The entry point or module name, the name given in `PJRT_NAMES_AND_LIBRARY_PATHS`,
    /// or the file's stem for a bare path.
    pub name: String,
    /// Path of the shared library (absolute; resolved when found inside a wheel).
    pub path: PathBuf,
    /// Version of the wheel that installed it, when it came from one.
    pub version: Option<String>,
    /// Where it was found, e.g. `RPJRT_PLUGIN`, `entry point xla_plugins:xla_cpu_pjrt`,
    /// `package lammps-jax-pjrt-cpu`.
    pub source: String,
    /// `cpu`, `cuda`, `rocm`, `tpu`, ... guessed from names; `None` when unknown.
    pub platform: Option<String>,
    /// The distribution (wheel) name, when it came from one.
    pub package: Option<String>,
    /// Client create options from a JAX plugin config (`.json`).
    pub options: Option<ClientOptions>,
}

impl PluginInfo {
    /// A plugin named by a path (and a name: the one given, or the file's stem). Its
    /// platform is guessed from meaningful names only ([`guess_platform`]): the name, the
    /// library's file name, and the name of the directory holding it when that directory
    /// is a Python package (a plugin module's directory: it has an `__init__.py`). Other
    /// directories on the way are never read: `.../output/libmine.so` is no TPU plugin.
    fn bare(name: String, path: PathBuf, source: &str) -> PluginInfo {
        let file = path.file_name().map(|f| f.to_string_lossy().into_owned());
        let package = path
            .parent()
            .filter(|dir| dir.join("__init__.py").is_file())
            .and_then(Path::file_name)
            .map(|d| d.to_string_lossy().into_owned());
        let platform = guess_platform(&[Some(&name), file.as_deref(), package.as_deref()]);
        PluginInfo {
            name,
            path,
            version: None,
            source: source.to_string(),
            platform,
            package: None,
            options: None,
        }
    }

    /// True when `want` (a platform, a plugin name, a wheel name or a file name) names
    /// this plugin. `gpu` matches cuda and rocm, `host` matches cpu.
    pub fn matches(&self, want: &str) -> bool {
        let w = want.to_lowercase();
        let platforms: &[&str] = match w.as_str() {
            "gpu" => &["cuda", "rocm"],
            "host" => &["cpu"],
            other => &[other][..0],
        };
        if let Some(p) = &self.platform {
            if p == &w || platforms.contains(&p.as_str()) {
                return true;
            }
        }
        let mut names = vec![self.name.to_lowercase()];
        if let Some(f) = self.path.file_name() {
            names.push(f.to_string_lossy().to_lowercase());
        }
        if let Some(p) = &self.package {
            names.push(p.to_lowercase());
            names.push(p.to_lowercase().replace('-', "_"));
        }
        names.contains(&w) || names.contains(&w.replace('-', "_"))
    }

    fn rank(&self) -> u8 {
        match self.platform.as_deref() {
            Some("tpu") => 0,
            Some("cuda") => 1,
            Some("rocm") => 2,
            Some("cpu") => 4,
            _ => 3,
        }
    }
}

/// The directories discovery looks in for installed wheels.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchPath {
    /// Site-packages style directories, in priority order.
    pub dirs: Vec<PathBuf>,
    /// For a search path read from the environment ([`SearchPath::from_env`]) that holds
    /// no directory: why each source gave none (for [`Discovery::searched`]).
    empty_because: Option<String>,
}

impl SearchPath {
    /// Exactly these directories (Python passes `sys.path`).
    pub fn new(dirs: impl IntoIterator<Item = impl Into<PathBuf>>) -> SearchPath {
        SearchPath {
            dirs: dirs.into_iter().map(Into::into).collect(),
            empty_because: None,
        }
    }

    /// `RPJRT_PLUGIN_PATH` (`:`-separated), then the site-packages directories of the
    /// virtual environment in `VIRTUAL_ENV` (`lib/python*/site-packages`), then those of
    /// the virtual environment the running program is installed in (a `bin/` next to a
    /// `pyvenv.cfg`), if any; then the site directories of a Python interpreter
    /// ([`python_site_dirs`]), asked when `RPJRT_PYTHON` names one (always honoured), or
    /// when `VIRTUAL_ENV` gives no directory: unset, or naming no environment (deleted,
    /// moved, a typo), which never turns the query off. `RPJRT_PYTHON` set empty turns it
    /// off.
    pub fn from_env() -> SearchPath {
        let mut dirs = Vec::new();
        let plugin_path = std::env::var_os("RPJRT_PLUGIN_PATH");
        if let Some(v) = &plugin_path {
            dirs.extend(std::env::split_paths(v).filter(|p| !p.as_os_str().is_empty()));
        }
        // Set but empty is said as such below; it names no environment either way.
        let venv = std::env::var_os("VIRTUAL_ENV");
        let venv_dirs = venv
            .as_ref()
            .filter(|v| !v.is_empty())
            .map(|v| venv_site_packages(Path::new(v)))
            .unwrap_or_default();
        dirs.extend(venv_dirs.iter().cloned());
        // A program installed in a virtual environment's bin/ (the Python console script,
        // or a binary copied there) sees that environment's wheels without activation.
        if let Some(prefix) = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent()?.parent().map(Path::to_path_buf))
        {
            if is_regular_file(&prefix.join("pyvenv.cfg")) {
                for d in venv_site_packages(&prefix) {
                    if !dirs.contains(&d) {
                        dirs.push(d);
                    }
                }
            }
        }
        // An environment activated only by PATH (`VIRTUAL_ENV` unset, as `uv run`, conda
        // and direct `venv/bin` invocations leave it), a stale `VIRTUAL_ENV`, or a user
        // site: ask the Python that a `python3` command would run, as other tools do; an
        // interpreter named by RPJRT_PYTHON is asked whatever else is set.
        let python = std::env::var_os("RPJRT_PYTHON");
        let explicit = python.as_ref().is_some_and(|p| !p.is_empty());
        let asked = explicit || venv_dirs.is_empty();
        if asked {
            for d in python_site_dirs() {
                if !dirs.contains(&d) {
                    dirs.push(d);
                }
            }
        }
        // Each directory once (RPJRT_PLUGIN_PATH may hold VIRTUAL_ENV's site-packages too,
        // as the Python console script's does), in first-seen order.
        let mut seen: Vec<PathBuf> = Vec::with_capacity(dirs.len());
        dirs.retain(|d| {
            let new = !seen.contains(d);
            if new {
                seen.push(d.clone());
            }
            new
        });
        let empty_because = dirs.is_empty().then(|| {
            no_directories_because(plugin_path.as_deref(), venv.as_deref(), python.as_deref())
        });
        SearchPath {
            dirs,
            empty_because,
        }
    }
}

/// Why [`SearchPath::from_env`] found no directory, source by source, from the values of
/// `RPJRT_PLUGIN_PATH`, `VIRTUAL_ENV` and `RPJRT_PYTHON` (`None`: unset), and what to do:
/// each variable is said to be unset, set but empty, or set to a value that gave nothing,
/// and the advice never asks to set a variable that is set.
fn no_directories_because(
    plugin_path: Option<&OsStr>,
    venv: Option<&OsStr>,
    python: Option<&OsStr>,
) -> String {
    let shown = |v: &OsStr| format!("{:?}", v.to_string_lossy());
    let mut why = vec![match plugin_path {
        None => "RPJRT_PLUGIN_PATH is not set".to_string(),
        Some(v) if v.is_empty() => "RPJRT_PLUGIN_PATH is set but empty".to_string(),
        Some(v) => format!(
            "RPJRT_PLUGIN_PATH={} names no directory (only `:` separators and empty entries)",
            shown(v)
        ),
    }];
    why.push(match venv {
        None => "VIRTUAL_ENV is not set".to_string(),
        Some(v) if v.is_empty() => "VIRTUAL_ENV is set but empty".to_string(),
        Some(v) => format!(
            "VIRTUAL_ENV={} has no lib/python*/site-packages (no virtual environment there)",
            v.to_string_lossy()
        ),
    });
    why.push(match python {
        Some(p) if p.is_empty() => {
            "the Python query is off (RPJRT_PYTHON is set empty)".to_string()
        }
        Some(p) => format!(
            "RPJRT_PYTHON={} gave no site directories (it did not run, or did not answer \
             within {}s)",
            p.to_string_lossy(),
            PYTHON_QUERY_TIMEOUT.as_secs()
        ),
        None => "no `python3` on PATH gave site directories".to_string(),
    });
    let plugin_fix = match plugin_path {
        None => "set RPJRT_PLUGIN_PATH to a site-packages directory holding the plugin wheels",
        Some(_) => "give RPJRT_PLUGIN_PATH a site-packages directory holding the plugin wheels",
    };
    let venv_fix = match venv {
        None => "VIRTUAL_ENV to a virtual environment",
        Some(v) if v.is_empty() => "VIRTUAL_ENV a virtual environment's directory",
        Some(_) => "VIRTUAL_ENV an existing virtual environment",
    };
    let venv_verb = match (plugin_path.is_some(), venv.is_some()) {
        (false, false) | (true, true) => "",
        (true, false) => "set ",
        (false, true) => "give ",
    };
    format!("{}; {plugin_fix}, or {venv_verb}{venv_fix}", why.join("; "))
}

/// How long [`python_site_dirs`] waits for the interpreter.
pub const PYTHON_QUERY_TIMEOUT: Duration = Duration::from_secs(3);

/// The site-packages directories of the Python interpreter `RPJRT_PYTHON` names (default
/// `python3` on PATH; set it empty to skip the query), asked with a timeout of
/// [`PYTHON_QUERY_TIMEOUT`]. Empty when there is no such interpreter or it does not answer
/// in time.
pub fn python_site_dirs() -> Vec<PathBuf> {
    let python = std::env::var_os("RPJRT_PYTHON").unwrap_or_else(|| "python3".into());
    if python.is_empty() {
        return Vec::new();
    }
    let script = "import site, sys\n\
        dirs = getattr(site, 'getsitepackages', lambda: [])()\n\
        user = getattr(site, 'getusersitepackages', lambda: '')()\n\
        print('\\n'.join(dirs + ([user] if isinstance(user, str) and user else [])))";
    let Ok(mut child) = std::process::Command::new(&python)
        .args(["-I", "-c", script])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
    else {
        return Vec::new();
    };
    let deadline = std::time::Instant::now() + PYTHON_QUERY_TIMEOUT;
    // The answer is read on its own thread while this one waits, both within the one
    // deadline: an interpreter (or a wrapper script) that leaves a process behind holding
    // its stdout, or that writes more than a pipe holds, cannot hold discovery.
    let (tx, rx) = std::sync::mpsc::channel();
    if let Some(stdout) = child.stdout.take() {
        let reader = std::thread::Builder::new()
            .name("rpjrt-python-query".into())
            .spawn(move || {
                use std::io::Read;
                let mut out = String::new();
                let _ = stdout.take(1 << 16).read_to_string(&mut out);
                let _ = tx.send(out);
            });
        if reader.is_err() {
            let _ = child.kill();
            let _ = child.wait();
            return Vec::new();
        }
    }
    let out = rx
        .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
        .unwrap_or_default();
    // Reaped within what is left of the deadline, else killed.
    if !matches!(
        rpjrt::stdio::wait_until(&mut child, deadline),
        rpjrt::stdio::Reaped::Ended(_)
    ) {
        return Vec::new();
    }
    out.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .collect()
}

/// The `site-packages` directories of a virtual environment or Python prefix.
pub fn venv_site_packages(prefix: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for lib in ["lib", "lib64"] {
        let Ok(entries) = fs::read_dir(prefix.join(lib)) else {
            continue;
        };
        let mut names: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("python"))
            .map(|e| e.path().join("site-packages"))
            .filter(|p| p.is_dir())
            .collect();
        names.sort();
        for n in names {
            let n = resolve(&n);
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    let win = prefix.join("Lib").join("site-packages");
    if win.is_dir() {
        out.push(win);
    }
    out
}

/// The platform that names suggest, or `None`: the first of `texts` that holds a platform
/// word as a whole token decides. A token is a run of letters and digits (split at `_`,
/// `-`, `.`, `/`...), compared without case, without a `lib` prefix and without trailing
/// digits (`libtpu`, `xla_cuda12`, `jax-rocm7-pjrt`): `tpu`, `cuda`, `rocm`, `metal`,
/// `cpu`, `host` (cpu). A word inside another is no token of it: `output` and
/// `throughput` are no `tpu`, `cpuinfo` no `cpu`.
fn guess_platform(texts: &[Option<&str>]) -> Option<String> {
    const WORDS: [(&str, &str); 6] = [
        ("tpu", "tpu"),
        ("cuda", "cuda"),
        ("rocm", "rocm"),
        ("metal", "metal"),
        ("cpu", "cpu"),
        ("host", "cpu"),
    ];
    for t in texts.iter().flatten() {
        let t = t.to_lowercase();
        let tokens: Vec<&str> = t
            .split(|c: char| !c.is_alphanumeric())
            .map(platform_token)
            .filter(|w| !w.is_empty())
            .collect();
        // The words in the order of WORDS, so that the answer does not depend on which
        // comes first in the name (as before: tpu, then cuda, ...).
        for (word, platform) in WORDS {
            if tokens.contains(&word) {
                return Some(platform.to_string());
            }
        }
    }
    None
}

/// A name's token as [`guess_platform`] compares it: without a `lib` prefix (when
/// something is left) and without trailing digits.
fn platform_token(token: &str) -> &str {
    let t = match token.strip_prefix("lib") {
        Some(rest) if !rest.is_empty() => rest,
        _ => token,
    };
    let t = t.trim_end_matches(|c: char| c.is_ascii_digit());
    if t.is_empty() {
        token
    } else {
        t
    }
}

/// True when `spec` is spelled like a path rather than a name.
pub fn looks_like_path(spec: &str) -> bool {
    spec.contains('/')
        || (cfg!(windows) && spec.contains('\\'))
        || spec.ends_with(".so")
        || spec.ends_with(".dylib")
        || spec.ends_with(".dll")
        || spec.contains(".so.")
}

fn is_library_name(name: &str) -> bool {
    name.ends_with(".so")
        || name.ends_with(".dylib")
        || name.ends_with(".dll")
        || name.contains(".so.")
}

/// What `name` is in the current directory when something not a regular file has that
/// name (`a directory`, `a FIFO (named pipe)`, ...); `None` when nothing or a file does.
fn not_a_file_here(name: &str) -> Option<&'static str> {
    rpjrt::file_kind(&fs::metadata(name).ok()?)
}

fn is_regular_file(p: &Path) -> bool {
    fs::metadata(p).map(|m| m.is_file()).unwrap_or(false)
}

fn read_small_text(p: &Path) -> Option<String> {
    // Only regular files are opened: a FIFO or device would block or misbehave.
    let meta = fs::metadata(p).ok()?;
    if !meta.is_file() || meta.len() > 16 << 20 {
        return None;
    }
    // Opened without waiting, and what was opened decides: a FIFO swapped in since the
    // look above is not waited on.
    let (file, opened) = rpjrt::open_for_reading(p).ok()?;
    if !opened.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(16 << 20).read_to_end(&mut bytes).ok()?;
    // Lossy: one byte that is not UTF-8 (a Latin-1 file name in RECORD, a METADATA
    // description) must not hide the whole wheel.
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

fn absolute(p: impl AsRef<OsStr>) -> PathBuf {
    let p = Path::new(p.as_ref());
    let expanded = match (p.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) if !rest.as_os_str().is_empty() => Path::new(&home).join(rest),
        _ => p.to_path_buf(),
    };
    std::path::absolute(&expanded).unwrap_or(expanded)
}

/// An environment variable that may hold a path or a name: `None` when unset or blank.
/// Text is trimmed; a value that is not UTF-8 is kept as it is (it can only be a path).
fn env_os(key: &str) -> Option<OsString> {
    let v = std::env::var_os(key)?;
    match v.to_str() {
        Some(s) if s.trim().is_empty() => None,
        Some(s) => Some(OsString::from(s.trim())),
        None => Some(v),
    }
}

fn resolve(p: &Path) -> PathBuf {
    fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The PJRT library in a plugin module's directory: `preferred` if present, else a shared
/// library that is not a Python extension, preferring names with `pjrt`, then `plugin`.
pub fn pick_library(directory: &Path, preferred: Option<&str>) -> Option<PathBuf> {
    let mut entries: Vec<PathBuf> = fs::read_dir(directory)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| is_regular_file(p))
        .collect();
    entries.sort();
    if let Some(pref) = preferred {
        if let Some(p) = entries
            .iter()
            .find(|p| p.file_name().is_some_and(|n| n == pref))
        {
            return Some(p.clone());
        }
    }
    let libs: Vec<&PathBuf> = entries
        .iter()
        .filter(|p| {
            let n = p
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            is_library_name(&n)
                && !n.contains(".cpython-")
                && !n.contains(".abi3.")
                && !n.starts_with('_')
        })
        .collect();
    for key in ["pjrt", "plugin"] {
        if let Some(p) = libs.iter().find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().to_lowercase().contains(key))
        }) {
            return Some((*p).clone());
        }
    }
    libs.first().map(|p| (*p).clone())
}

/// An installed distribution: its `.dist-info` directory and metadata.
#[derive(Clone, Debug)]
struct Dist {
    site: PathBuf,
    info_dir: PathBuf,
    name: String,
    version: Option<String>,
    /// `site` resolved (symlinks followed), found once.
    real_site: OnceLock<PathBuf>,
    /// Its RECORD, read and split once per discovery (`None`: it has none, or it cannot
    /// be read): every question about the files it installed is answered from here, so a
    /// discovery reads each wheel's RECORD at most once, however many plugins it finds.
    record: OnceLock<Option<Arc<Record>>>,
}

/// The files a wheel's RECORD lists, by directory (`/`-separated, relative to the site
/// directory; `""` for the site itself), each directory's file names in RECORD's order.
#[derive(Debug, Default)]
struct Record {
    by_dir: HashMap<String, Vec<String>>,
}

impl Record {
    /// RECORD's text split into its files (the first field of each line).
    fn parse(text: &str) -> Record {
        let mut by_dir: HashMap<String, Vec<String>> = HashMap::new();
        for line in text.lines() {
            let file = line.split(',').next().unwrap_or("");
            if file.is_empty() {
                continue;
            }
            let file = file.replace('\\', "/");
            let (dir, name) = file.rsplit_once('/').unwrap_or(("", &file));
            by_dir
                .entry(dir.to_string())
                .or_default()
                .push(name.to_string());
        }
        Record { by_dir }
    }
}

/// `library` with its directory resolved as a site directory is (RECORD lists a file
/// under a symlinked directory as installed there).
fn real_library_path(library: &Path) -> PathBuf {
    match (library.parent().map(fs::canonicalize), library.file_name()) {
        (Some(Ok(dir)), Some(name)) => dir.join(name),
        _ => library.to_path_buf(),
    }
}

fn normalize(name: &str) -> String {
    name.to_lowercase().replace(['-', '.'], "_")
}

impl Dist {
    fn read(site: &Path, info_dir: PathBuf) -> Option<Dist> {
        let stem = info_dir
            .file_name()?
            .to_string_lossy()
            .strip_suffix(".dist-info")?
            .to_string();
        let (mut name, mut version) = match stem.split_once('-') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (stem.clone(), None),
        };
        if let Some(meta) = read_small_text(&info_dir.join("METADATA")) {
            for line in meta.lines() {
                if line.is_empty() {
                    break; // end of the headers
                }
                if let Some(v) = line.strip_prefix("Name:") {
                    name = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("Version:") {
                    version = Some(v.trim().to_string());
                }
            }
        }
        Some(Dist {
            site: site.to_path_buf(),
            info_dir,
            name,
            version,
            real_site: OnceLock::new(),
            record: OnceLock::new(),
        })
    }

    /// The site directory, resolved (once).
    fn real_site(&self) -> &Path {
        self.real_site
            .get_or_init(|| fs::canonicalize(&self.site).unwrap_or_else(|_| self.site.clone()))
    }

    /// RECORD, read on first use and kept for the rest of the discovery.
    fn record(&self) -> Option<&Record> {
        self.record
            .get_or_init(|| {
                read_small_text(&self.info_dir.join("RECORD"))
                    .map(|text| Arc::new(Record::parse(&text)))
            })
            .as_deref()
    }

    /// The library under `module_dir` (`a/b`) among the files RECORD lists.
    fn library(&self, module_dir: &str, preferred: Option<&str>) -> Option<PathBuf> {
        let record = self.record()?;
        let dir = module_dir.trim_end_matches('/');
        let found: Vec<PathBuf> = record
            .by_dir
            .get(dir)
            .into_iter()
            .flatten()
            .filter(|name| is_library_name(name))
            .map(|name| self.site.join(dir).join(name))
            .filter(|p| is_regular_file(p))
            .collect();
        if let Some(pref) = preferred {
            if let Some(p) = found
                .iter()
                .find(|p| p.file_name().is_some_and(|n| n == pref))
            {
                return Some(resolve(p));
            }
        }
        let first = found.first()?;
        Some(resolve(
            &pick_library(first.parent()?, preferred).unwrap_or_else(|| first.clone()),
        ))
    }

    fn entry_points(&self) -> Vec<(String, String, String)> {
        let Some(text) = read_small_text(&self.info_dir.join("entry_points.txt")) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut group = String::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if line.starts_with('[') && line.ends_with(']') {
                group = line[1..line.len() - 1].trim().to_string();
                continue;
            }
            if let Some((name, value)) = line.split_once('=') {
                out.push((
                    group.clone(),
                    name.trim().to_string(),
                    value.trim().to_string(),
                ));
            }
        }
        out
    }
}

/// A client opened by [`Discovery::open_client`].
#[derive(Debug)]
pub struct Opened {
    /// The new client.
    pub client: rpjrt::Client,
    /// The plugin it runs on.
    pub plugin: rpjrt::Plugin,
    /// Where the plugin was found.
    pub info: PluginInfo,
    /// Its position among the candidates.
    pub index: usize,
    /// The candidates tried before it, each with why it could not be used (worth a
    /// warning: the user may have meant one of them).
    pub skipped: Vec<(PluginInfo, Error)>,
}

/// Opens a client on the first of `candidates` that both loads and creates a client, so a
/// plugin that loads but cannot serve here (a CUDA plugin on a machine without a GPU, ranked
/// before the CPU plugin) does not stop the search.
///
/// Each candidate gets `options` over the options of its own JAX plugin config (`options`
/// win). `create` makes the client: [`rpjrt::Client::new`], `rpjrt_cuda::create_client`
/// (which explains CUDA failures) or a closure over [`rpjrt::Client::new_distributed`].
///
/// When no candidate works: with one candidate, or one failure, that failure as it was;
/// otherwise an error that lists every candidate and why it failed: a
/// [`Error::PluginLoad`] (of the first) when none could be loaded, else the first loaded
/// plugin's code, so that a plugin that loaded is never said to be unloadable.
pub fn open_first(
    candidates: Vec<PluginInfo>,
    options: &ClientOptions,
    mut create: impl FnMut(&rpjrt::Plugin, &ClientOptions) -> Result<rpjrt::Client>,
) -> Result<Opened> {
    let describe =
        |(_, info): &(usize, PluginInfo)| format!("{} ({})", info.name, info.path.display());
    let open = |(_, info): &(usize, PluginInfo)| {
        let plugin = rpjrt::Plugin::load(&info.path)?;
        let mut merged = options.clone();
        for (name, value) in info.options.iter().flat_map(|o| o.entries()) {
            if !options.entries().iter().any(|(n, _)| n == name) {
                merged = merged.set(name.clone(), value.clone());
            }
        }
        create(&plugin, &merged).map(|client| (plugin, client))
    };
    let indexed: Vec<(usize, PluginInfo)> = candidates.into_iter().enumerate().collect();
    let mut skipped_infos = indexed.clone();
    match first_that_opens(indexed, describe, open) {
        Ok(((plugin, client), failures)) => {
            let index = failures.len();
            let info = skipped_infos.swap_remove(index).1;
            skipped_infos.truncate(index);
            let skipped = skipped_infos
                .into_iter()
                .zip(failures)
                .map(|((_, info), (_, e))| (info, e))
                .collect();
            Ok(Opened {
                client,
                plugin,
                info,
                index,
                skipped,
            })
        }
        // Every plugin refused the options or settings (an option out of range, a bad
        // `RPJRT_*` value): the caller's mistake, reported as such, not as a missing plugin.
        Err(OpenFailure::All(all))
            if all
                .iter()
                .all(|(_, e)| e.code() == rpjrt::Code::InvalidArgument) =>
        {
            Err(Error::invalid(OpenFailure::All(all).message_led_by(
                "every plugin tried refused the client options or settings",
            )))
        }
        // A plugin that loaded and failed later (a CUDA plugin without a GPU) is not said to
        // be unloadable: the error is that plugin's, led by what happened to every one.
        Err(OpenFailure::All(all)) => {
            let loaded = all
                .iter()
                .map(|(_, e)| e)
                .find(|e| !matches!(e, Error::PluginLoad { .. }));
            let Some(first_loaded) = loaded else {
                let path = skipped_infos
                    .first()
                    .map(|(_, i)| i.path.clone())
                    .unwrap_or_default();
                let reason = OpenFailure::All(all).message_led_by(
                    "no plugin could be used: none of the plugins tried could be loaded",
                );
                return Err(Error::PluginLoad { path, reason });
            };
            let entry = match first_loaded.entry() {
                Some("PJRT_Plugin_Initialize") => "PJRT_Plugin_Initialize",
                _ => "PJRT_Client_Create",
            };
            let code = first_loaded.code();
            Err(Error::Pjrt {
                entry,
                code,
                message: OpenFailure::All(all).message_led_by(
                    "no plugin could be used (a plugin that loaded could not create a client)",
                ),
            })
        }
        Err(OpenFailure::One(e)) => Err(e),
    }
}

/// The discovery itself: a search path and what it found there.
#[derive(Clone, Debug)]
pub struct Discovery {
    search: SearchPath,
    dists: Vec<Dist>,
}

impl Discovery {
    /// Discovery over `search` (reads the `.dist-info` directories found there).
    pub fn new(search: SearchPath) -> Discovery {
        let mut dists = Vec::new();
        let mut seen = HashSet::new();
        for site in &search.dirs {
            let Ok(entries) = fs::read_dir(if site.as_os_str().is_empty() {
                Path::new(".")
            } else {
                site
            }) else {
                continue;
            };
            let mut infos: Vec<PathBuf> = entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "dist-info") && p.is_dir())
                .collect();
            infos.sort();
            for info in infos {
                if let Some(d) = Dist::read(site, info) {
                    // The first distribution of a name shadows later ones, as for imports.
                    if seen.insert(normalize(&d.name)) {
                        dists.push(d);
                    }
                }
            }
        }
        Discovery { search, dists }
    }

    /// Discovery over [`SearchPath::from_env`].
    pub fn from_env() -> Discovery {
        Discovery::new(SearchPath::from_env())
    }

    /// The search path in use.
    pub fn search_path(&self) -> &SearchPath {
        &self.search
    }

    fn module_dirs(&self, module: &str) -> Vec<PathBuf> {
        let rel: PathBuf = module.split(['.', '/']).collect();
        self.search
            .dirs
            .iter()
            .map(|base| base.join(&rel))
            .filter(|d| d.is_dir())
            .map(|d| resolve(&d))
            .collect()
    }

    fn dist(&self, package: &str) -> Option<&Dist> {
        let want = normalize(package);
        self.dists.iter().find(|d| normalize(&d.name) == want)
    }

    /// Every plugin library discovery can see, in search order (nothing is loaded).
    ///
    /// Fails only on a `.json` plugin config in `PJRT_NAMES_AND_LIBRARY_PATHS` that cannot
    /// be read.
    pub fn plugins(&self) -> Result<Vec<PluginInfo>> {
        let mut no_problems = None;
        self.collect(&mut no_problems)
    }

    /// [`Discovery::plugins`] for a listing: a `.json` plugin config in
    /// `PJRT_NAMES_AND_LIBRARY_PATHS` that cannot be read does not fail the whole list; it
    /// comes back among the problems instead, as an entry whose path is the config's,
    /// with the reason, so the other plugins are still shown.
    pub fn plugins_and_problems(&self) -> (Vec<PluginInfo>, Vec<(PluginInfo, String)>) {
        let mut problems = Some(Vec::new());
        let found = self.collect(&mut problems).unwrap_or_default();
        (found, problems.unwrap_or_default())
    }

    /// The plugins in search order; a config that cannot be read goes to `problems`
    /// when that is `Some`, else fails the call.
    fn collect(&self, problems: &mut Option<Vec<(PluginInfo, String)>>) -> Result<Vec<PluginInfo>> {
        let mut found = Vec::new();
        let env_os = env_os("RPJRT_PLUGIN");
        // Not UTF-8: a path, and no name to match.
        let env = env_os.as_ref().map_or(Some(""), |e| e.to_str());
        if let Some(e) = env_os.as_ref().filter(|_| env.is_none_or(looks_like_path)) {
            let path = absolute(e);
            let name = stem(&path);
            found.push(PluginInfo::bare(name, path, "RPJRT_PLUGIN"));
        }
        let env = env.unwrap_or("");
        found.extend(from_names_and_paths(problems)?);
        found.extend(self.find_entry_points());
        found.extend(self.find_namespaces());
        found.extend(self.find_known_packages());
        let mut found = merge(found);
        if !env.is_empty() && !looks_like_path(env) {
            // RPJRT_PLUGIN names one of the others: list it first.
            found.sort_by_key(|p| !p.matches(env));
        }
        Ok(found)
    }

    fn find_entry_points(&self) -> Vec<PluginInfo> {
        let mut out = Vec::new();
        for group in ENTRY_POINT_GROUPS {
            for dist in &self.dists {
                for (g, name, value) in dist.entry_points() {
                    if g != group {
                        continue;
                    }
                    let module = value.split(':').next().unwrap_or("").trim().to_string();
                    if module.is_empty() {
                        continue;
                    }
                    let lib = dist.library(&module.replace('.', "/"), None).or_else(|| {
                        self.module_dirs(&module)
                            .iter()
                            .find_map(|d| pick_library(d, None))
                    });
                    let Some(lib) = lib else { continue };
                    let file = lib.file_name().map(|f| f.to_string_lossy().into_owned());
                    let platform = guess_platform(&[
                        Some(&name),
                        Some(&module),
                        Some(&dist.name),
                        file.as_deref(),
                    ]);
                    out.push(PluginInfo {
                        name: name.clone(),
                        path: resolve(&lib),
                        version: dist.version.clone(),
                        source: format!("entry point {group}:{name}"),
                        platform,
                        package: Some(dist.name.clone()),
                        options: None,
                    });
                }
            }
        }
        out
    }

    fn find_namespaces(&self) -> Vec<PluginInfo> {
        let mut out = Vec::new();
        // Each entry of `out`'s library, resolved as RECORD lists it.
        let mut libs: Vec<PathBuf> = Vec::new();
        for ns in NAMESPACE_PACKAGES {
            let mut seen = HashSet::new();
            for d in self.module_dirs(ns) {
                let Ok(entries) = fs::read_dir(&d) else {
                    continue;
                };
                let mut subs: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| {
                        p.is_dir()
                            && p.file_name().is_some_and(|n| {
                                let n = n.to_string_lossy();
                                !n.starts_with('_') && !n.starts_with('.')
                            })
                    })
                    .collect();
                subs.sort();
                for sub in subs {
                    let name = sub
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .to_string();
                    if !seen.insert(name.clone()) {
                        continue; // an earlier directory shadows it, as for imports
                    }
                    if let Some(lib) = pick_library(&sub, None) {
                        // The module's name, then the library's own.
                        let file = lib.file_name().map(|f| f.to_string_lossy().into_owned());
                        let platform = guess_platform(&[Some(&name), file.as_deref()]);
                        libs.push(real_library_path(&lib));
                        out.push(PluginInfo {
                            source: format!("namespace package {ns}.{name}"),
                            name,
                            path: resolve(&lib),
                            version: None,
                            platform,
                            package: None,
                            options: None,
                        });
                    }
                }
            }
        }
        // The wheel that installed each module, where its RECORD lists the library (a
        // namespace package's module has no entry point naming its wheel).
        for (info, owner) in out.iter_mut().zip(self.owners(&libs)) {
            if let Some(d) = owner.map(|i| &self.dists[i]) {
                info.version = d.version.clone();
                info.package = Some(d.name.clone());
            }
        }
        out
    }

    /// For each of `libs` (paths as [`real_library_path`] gives them), the first
    /// distribution (an index into `dists`) whose RECORD lists it. Each RECORD is read
    /// once (and only those of site directories holding one of `libs`), and each of its
    /// directories is looked up once: the cost is that of reading the RECORDs, not of
    /// reading them once per library.
    fn owners(&self, libs: &[PathBuf]) -> Vec<Option<usize>> {
        let mut owner = vec![None; libs.len()];
        // Per resolved site directory: the libraries under it, by directory relative to
        // it, as (index into `libs`, file name).
        type Wanted = HashMap<String, Vec<(usize, String)>>;
        let mut by_site: HashMap<PathBuf, Wanted> = HashMap::new();
        for d in &self.dists {
            let site = d.real_site();
            if by_site.contains_key(site) {
                continue;
            }
            let mut wanted = Wanted::new();
            for (i, lib) in libs.iter().enumerate() {
                let Some(rel) = lib.strip_prefix(site).ok().and_then(|r| r.to_str()) else {
                    continue;
                };
                let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
                wanted
                    .entry(dir.to_string())
                    .or_default()
                    .push((i, name.to_string()));
            }
            by_site.insert(site.to_path_buf(), wanted);
        }
        for (di, d) in self.dists.iter().enumerate() {
            let Some(wanted) = by_site.get(d.real_site()).filter(|w| !w.is_empty()) else {
                continue;
            };
            let Some(record) = d.record() else { continue };
            // Whichever of the two is smaller is walked, the other looked up.
            let mut claim = |names: &[String], want: &[(usize, String)]| {
                for (i, name) in want {
                    if owner[*i].is_none() && names.iter().any(|n| n == name) {
                        owner[*i] = Some(di);
                    }
                }
            };
            if wanted.len() <= record.by_dir.len() {
                for (dir, want) in wanted {
                    if let Some(names) = record.by_dir.get(dir) {
                        claim(names, want);
                    }
                }
            } else {
                for (dir, names) in &record.by_dir {
                    if let Some(want) = wanted.get(dir) {
                        claim(names, want);
                    }
                }
            }
        }
        owner
    }

    fn find_known_packages(&self) -> Vec<PluginInfo> {
        let mut out = Vec::new();
        let tpu = env_os("TPU_LIBRARY_PATH");
        for known in KNOWN_PACKAGES {
            if let Some(tpu) = tpu.as_ref().filter(|_| known.package == "libtpu") {
                let mut info = PluginInfo::bare("libtpu".into(), absolute(tpu), "TPU_LIBRARY_PATH");
                info.platform = Some("tpu".into());
                out.push(info);
            }
            let dist = self.dist(known.package);
            let lib = dist
                .and_then(|d| d.library(known.module_dir, Some(known.library)))
                .or_else(|| {
                    self.module_dirs(known.module_dir)
                        .iter()
                        .find_map(|d| pick_library(d, Some(known.library)))
                });
            let Some(lib) = lib else { continue };
            out.push(PluginInfo {
                name: known.name.into(),
                path: resolve(&lib),
                version: dist.and_then(|d| d.version.clone()),
                source: format!("package {}", known.package),
                platform: Some(known.platform.into()),
                package: Some(
                    dist.map(|d| d.name.clone())
                        .unwrap_or_else(|| known.package.to_string()),
                ),
                options: None,
            });
        }
        out
    }

    /// The plugins that `spec` selects, in the order to try them.
    ///
    /// `spec` is `None` (then `RPJRT_PLUGIN` if set, else everything found: accelerators
    /// first, CPU last), a platform (`cpu`, `cuda`, `gpu`, `rocm`, `tpu`), a plugin or
    /// wheel name, or a path to a library. The error says what was searched and what to
    /// install.
    ///
    /// `spec` is an OS string: a path that is not UTF-8 is still a path (and can only be
    /// one, since platform and plugin names are text).
    pub fn candidates(&self, spec: Option<impl AsRef<OsStr>>) -> Result<Vec<PluginInfo>> {
        let (spec, source) = match spec {
            Some(s) => (Some(s.as_ref().to_owned()), "argument"),
            None => match env_os("RPJRT_PLUGIN") {
                Some(env) => (Some(env), "RPJRT_PLUGIN"),
                None => (None, "argument"),
            },
        };
        if let Some(raw) = spec.as_deref().filter(|s| s.to_str().is_none()) {
            let path = absolute(raw);
            let given = PluginInfo::bare(stem(&path), path, source);
            return Ok(vec![self.enrich(given)]);
        }
        let spec = spec.and_then(|s| s.into_string().ok());
        if let Some(s) = &spec {
            if s.trim().is_empty() {
                return Err(Error::invalid("an empty string names no plugin"));
            }
            let lower = s.to_lowercase();
            let is_platform = INSTALL_HINTS.iter().any(|(p, _)| *p == lower) || lower == "host";
            if looks_like_path(s) || (is_regular_file(Path::new(s)) && !is_platform) {
                let path = absolute(s);
                let given = PluginInfo::bare(stem(&path), path, source);
                return Ok(vec![self.enrich(given)]);
            }
        }
        // A plugin config that cannot be read fails only the lookups it could answer:
        // everything (no spec), or a spec that names its entry. Another plugin asked for
        // by name, platform or path is found as if the broken entry were not there.
        let (found, problems) = self.plugins_and_problems();
        let spec_lower = spec.as_deref().map(str::to_lowercase);
        if let Some((p, why)) = problems.iter().find(|(p, _)| match &spec_lower {
            None => true,
            Some(s) => p.name.to_lowercase() == *s,
        }) {
            return Err(Error::PluginLoad {
                path: p.path.clone(),
                reason: why.clone(),
            });
        }
        let Some(spec) = spec else {
            if found.is_empty() {
                return Err(self.not_found(None, source, &found));
            }
            let mut found = found;
            found.sort_by_key(PluginInfo::rank);
            return Ok(found);
        };
        let chosen: Vec<PluginInfo> = found.iter().filter(|p| p.matches(&spec)).cloned().collect();
        if chosen.is_empty() {
            return Err(self.not_found(Some(&spec), source, &found));
        }
        Ok(chosen)
    }

    /// Opens a client on the first candidate for `spec` (see [`Discovery::candidates`]) that
    /// both loads and creates a client; see [`open_first`].
    pub fn open_client(
        &self,
        spec: Option<impl AsRef<OsStr>>,
        options: &ClientOptions,
        create: impl FnMut(&rpjrt::Plugin, &ClientOptions) -> Result<rpjrt::Client>,
    ) -> Result<Opened> {
        open_first(self.candidates(spec)?, options, create)
    }

    /// A path given directly, named and versioned as discovery knows the same file.
    fn enrich(&self, info: PluginInfo) -> PluginInfo {
        let real = resolve(&info.path);
        let Ok(all) = self.plugins() else { return info };
        match all.into_iter().find(|k| resolve(&k.path) == real) {
            Some(k) => PluginInfo {
                name: k.name,
                path: info.path,
                version: k.version,
                source: info.source,
                platform: k.platform.or(info.platform),
                package: k.package,
                options: k.options,
            },
            None => info,
        }
    }

    /// What was searched, one place per line (for error messages and `rpjrt plugins`).
    pub fn searched(&self) -> Vec<String> {
        // Unset, set but blank (ignored) and set are three different things to say; a
        // path that is not there is said to be missing.
        let show = |k: &str| match (std::env::var_os(k), env_os(k)) {
            (None, _) => "(unset)".to_string(),
            (Some(raw), None) if raw.is_empty() => "(set but empty: ignored)".to_string(),
            (Some(raw), None) => {
                format!("(set to blank text {:?}: ignored)", raw.to_string_lossy())
            }
            (Some(_), Some(v)) => {
                let text = v.to_string_lossy().into_owned();
                let is_path = k == "TPU_LIBRARY_PATH"
                    || (k == "RPJRT_PLUGIN" && v.to_str().is_none_or(looks_like_path));
                match is_path && fs::metadata(absolute(&v)).is_err() {
                    true => format!("{text} (no such file)"),
                    false => text,
                }
            }
        };
        let dirs: Vec<String> = self
            .search
            .dirs
            .iter()
            .map(|d| {
                let shown = d.display().to_string();
                match fs::metadata(if d.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    d
                }) {
                    Err(_) => format!("{shown} (does not exist)"),
                    Ok(m) if !m.is_dir() => format!("{shown} (not a directory)"),
                    Ok(_) => shown,
                }
            })
            .collect();
        vec![
            format!("RPJRT_PLUGIN: {}", show("RPJRT_PLUGIN")),
            format!(
                "PJRT_NAMES_AND_LIBRARY_PATHS: {}",
                show("PJRT_NAMES_AND_LIBRARY_PATHS")
            ),
            format!("entry points in groups {}", ENTRY_POINT_GROUPS.join(", ")),
            format!("namespace packages {}", NAMESPACE_PACKAGES.join(", ")),
            format!(
                "wheels {}",
                KNOWN_PACKAGES
                    .iter()
                    .map(|k| k.package)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            format!("TPU_LIBRARY_PATH: {}", show("TPU_LIBRARY_PATH")),
            format!(
                "in: {}",
                if dirs.is_empty() {
                    match &self.search.empty_because {
                        Some(why) => format!("(no directories: {why})"),
                        None => "(no directories were given)".to_string(),
                    }
                } else {
                    dirs.join(", ")
                }
            ),
        ]
    }

    fn not_found(&self, spec: Option<&str>, source: &str, found: &[PluginInfo]) -> Error {
        let mut msg = match spec {
            None => "no PJRT plugin found. Searched:\n".to_string(),
            Some(s) => {
                let origin = if source == "RPJRT_PLUGIN" {
                    " (from RPJRT_PLUGIN)"
                } else {
                    ""
                };
                match not_a_file_here(s) {
                    // A directory or FIFO of that name where the user is: they likely meant
                    // it as a path; say what it is, not only that no plugin has the name.
                    Some(kind) => format!(
                        "{s:?}{origin} is {kind} here, not a plugin library (a plugin named by \
                         its path must be a shared library file), and no PJRT plugin matching \
                         {s:?} was found either. Searched:\n"
                    ),
                    None => format!("no PJRT plugin matching {s:?}{origin} found. Searched:\n"),
                }
            }
        };
        for line in self.searched() {
            msg.push_str(&format!("  {line}\n"));
        }
        if found.is_empty() {
            msg.push_str("found: nothing\n");
        } else {
            msg.push_str("found, but not matching:\n");
            for p in found {
                msg.push_str(&format!(
                    "  {} ({}) at {}\n",
                    p.name,
                    p.platform.as_deref().unwrap_or("unknown platform"),
                    p.path.display()
                ));
            }
        }
        msg.push_str("Install one:\n  ");
        msg.push_str(&install_hint(spec));
        Error::PluginLoad {
            path: PathBuf::from(spec.unwrap_or("")),
            reason: msg,
        }
    }
}

/// What to install for a platform (`cpu`, `cuda`, `gpu`, `rocm`, `tpu`), or the general
/// advice when `want` is none of them.
pub fn install_hint(want: Option<&str>) -> String {
    let w = want.map(str::to_lowercase);
    if let Some(w) = &w {
        if let Some((_, h)) = INSTALL_HINTS.iter().find(|(p, _)| p == w) {
            return h.to_string();
        }
    }
    format!(
        "{}\n  or point RPJRT_PLUGIN at a PJRT plugin library (a .so exporting GetPjrtApi)",
        INSTALL_HINTS[0].1
    )
}

fn stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    name.split('.').next().unwrap_or("").to_string()
}

fn from_names_and_paths(
    problems: &mut Option<Vec<(PluginInfo, String)>>,
) -> Result<Vec<PluginInfo>> {
    use std::os::unix::ffi::OsStrExt;
    // Parsed as bytes: a path that is not UTF-8 is still a path.
    let value = std::env::var_os("PJRT_NAMES_AND_LIBRARY_PATHS").unwrap_or_default();
    let mut out = Vec::new();
    for item in value.as_bytes().split(|&b| b == b',') {
        let item = item.trim_ascii();
        let Some(at) = item.iter().position(|&b| b == b':') else {
            continue; // malformed: JAX ignores it too
        };
        let (name, path) = (&item[..at], &item[at + 1..]);
        if name.is_empty() || path.is_empty() {
            continue;
        }
        let path = OsStr::from_bytes(path);
        let (path, options) = if path.as_bytes().ends_with(b".json") {
            match (read_json_config(Path::new(path)), problems.as_mut()) {
                (Ok((p, o)), _) => (OsString::from(p), o),
                (Err(e), Some(problems)) => {
                    let info = PluginInfo::bare(
                        String::from_utf8_lossy(name).into_owned(),
                        absolute(path),
                        "PJRT_NAMES_AND_LIBRARY_PATHS",
                    );
                    problems.push((info, e.to_string()));
                    continue;
                }
                (Err(e), None) => return Err(e),
            }
        } else {
            (path.to_owned(), None)
        };
        let mut info = PluginInfo::bare(
            String::from_utf8_lossy(name).into_owned(),
            absolute(&path),
            "PJRT_NAMES_AND_LIBRARY_PATHS",
        );
        info.options = options;
        out.push(info);
    }
    Ok(out)
}

fn read_json_config(path: &Path) -> Result<(String, Option<ClientOptions>)> {
    let err = |reason: String| Error::PluginLoad {
        path: path.to_path_buf(),
        reason,
    };
    if !is_regular_file(path) {
        let what = if fs::symlink_metadata(path).is_err() {
            "does not exist"
        } else {
            "is not a regular file (a FIFO, directory or device is never opened)"
        };
        return Err(err(format!(
            "the PJRT plugin config {} {what}",
            path.display()
        )));
    }
    // A config names a library and a few options: a file far larger is not one (and is
    // not read whole into memory).
    const MAX_CONFIG: u64 = 1 << 20;
    let mut text = String::new();
    // Opened without waiting: a FIFO swapped in since the look above is refused.
    rpjrt::open_for_reading(path)
        .and_then(|(f, m)| match m.is_file() {
            true => f.take(MAX_CONFIG + 1).read_to_string(&mut text),
            false => Err(std::io::Error::other("it is not a regular file")),
        })
        .map_err(|e| {
            err(format!(
                "cannot read the PJRT plugin config {} (named in PJRT_NAMES_AND_LIBRARY_PATHS): {e}",
                path.display()
            ))
        })?;
    if text.len() as u64 > MAX_CONFIG {
        return Err(err(format!(
            "the PJRT plugin config {} is larger than {} KiB, which no config is",
            path.display(),
            MAX_CONFIG >> 10
        )));
    }
    let config: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        // serde_json refuses a number beyond float64 (`1e400`) before any option is
        // looked at: name the option, as for one beyond float32.
        let huge = raw_create_options(&text).into_iter().find_map(|(k, raw)| {
            let t = raw.get().trim();
            let number = t.starts_with(|c: char| c == '-' || c.is_ascii_digit());
            (number && serde_json::from_str::<serde_json::Value>(t).is_err()).then(|| {
                let limit = if is_integer_text(t) { "int64" } else { "float32 (PJRT's float option type)" };
                format!("create option {k:?} is {}, beyond {limit}", shown_number(t))
            })
        });
        match huge {
            Some(why) => err(format!(
                "the PJRT plugin config {}: {why}; options are booleans, integers, floats, \
                 strings or lists of integers",
                path.display()
            )),
            None => err(format!(
                "the PJRT plugin config {} (named in PJRT_NAMES_AND_LIBRARY_PATHS) is not valid JSON: {e}",
                path.display()
            )),
        }
    })?;
    if !config.is_object() {
        return Err(err(format!(
            "the PJRT plugin config {} is {}, not a JSON object with a 'library_path' field",
            path.display(),
            json_kind(&config)
        )));
    }
    let lib = match config.get("library_path") {
        Some(serde_json::Value::String(s)) => s,
        Some(other) => {
            return Err(err(format!(
                "the PJRT plugin config {}: 'library_path' is {}, not a string (the path \
                 of the plugin library)",
                path.display(),
                json_kind(other)
            )))
        }
        None => {
            return Err(err(format!(
                "the PJRT plugin config {} has no 'library_path' field",
                path.display()
            )))
        }
    };
    // Every option is kept as written, or refused naming it: an option dropped here
    // would leave the client created without what the config asked for.
    let options = match config.get("create_options") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::Object(o)) => Some({
            // The options' text as written: serde_json reads an integer beyond u64 as a
            // float, which must be refused as an integer out of range, not passed on as a
            // float (nor rounded).
            let raw = raw_create_options(&text);
            o.iter()
                .map(|(k, v)| {
                    // The name is checked here, as the value is, so that the error names
                    // the config it came from (the client's own check cannot).
                    if let Err(e) = ClientOptions::check_name(k) {
                        return Err(err(format!(
                            "the PJRT plugin config {}: {}; each key of 'create_options' is \
                             the name of an option the plugin takes",
                            path.display(),
                            bare_message(&e)
                        )));
                    }
                    let checked = json_value(v, raw.get(k).map(|r| r.get()));
                    checked.map(|v| (k.clone(), v)).map_err(|why| {
                        err(format!(
                            "the PJRT plugin config {}: create option {k:?} is {why}; options \
                             are booleans, integers, floats, strings or lists of integers",
                            path.display()
                        ))
                    })
                })
                .collect::<Result<ClientOptions>>()?
        }),
        Some(_) => {
            return Err(err(format!(
                "the PJRT plugin config {}: 'create_options' is not an object of NAME: VALUE",
                path.display()
            )))
        }
    };
    Ok((lib.to_string(), options))
}

/// An error's message without the `invalid argument: ` its display leads with.
fn bare_message(e: &Error) -> String {
    match e {
        Error::InvalidArgument(m) => m.clone(),
        other => other.to_string(),
    }
}

/// The most of a number's text an error message shows.
const SHOWN_NUMBER_BYTES: usize = 48;

/// A JSON value's kind for a message: `a number (5)`, `a boolean (true)`, `null`, `a
/// list`, `an object`, `a string`.
fn json_kind(v: &serde_json::Value) -> String {
    use serde_json::Value as J;
    match v {
        J::Null => "null".into(),
        J::Bool(b) => format!("a boolean ({b})"),
        J::Number(n) => format!("a number ({})", shown_number(&n.to_string())),
        J::String(_) => "a string".into(),
        J::Array(_) => "a list".into(),
        J::Object(_) => "an object".into(),
    }
}

/// A number's (or a list's) text as a message shows it: whole when short, else its first
/// characters and how many bytes there are (a config may hold a number of a million
/// digits).
fn shown_number(text: &str) -> String {
    if text.len() <= SHOWN_NUMBER_BYTES {
        return text.to_string();
    }
    let mut end = SHOWN_NUMBER_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} characters)", &text[..end], text.len())
}

/// The `create_options` of a config's JSON `text`, each value as written (empty when the
/// text holds none; the parsed config says what is wrong with it then).
fn raw_create_options(
    text: &str,
) -> std::collections::BTreeMap<String, &serde_json::value::RawValue> {
    use serde_json::value::RawValue;
    use std::collections::BTreeMap;
    // Duplicate keys: the last one counts, as in the parsed config.
    serde_json::from_str::<BTreeMap<String, &RawValue>>(text)
        .ok()
        .and_then(|top| top.get("create_options").copied())
        .and_then(|o| serde_json::from_str::<BTreeMap<String, &RawValue>>(o.get()).ok())
        .unwrap_or_default()
}

/// A JSON number as a create option: an integer (written without a point or an
/// exponent, whatever its sign: `-0` is the integer 0, as Python's `json` reads it) or a
/// float32.
#[derive(Debug, PartialEq)]
enum Number {
    Int(i64),
    Float(f32),
}

/// Whether a JSON number's text is an integer: digits, after an optional minus sign.
fn is_integer_text(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// The create option a JSON number written as `text` (parsed as `n`) stands for, or why
/// it cannot be passed on unchanged: an integer outside int64's range (never passed on
/// as a float), or a float beyond float32 (PJRT's float option type) either way, too
/// large (infinite) or too small (a nonzero value that would become 0). Subnormals that
/// float32 holds are kept.
fn json_number(text: &str, n: &serde_json::Number) -> std::result::Result<Number, String> {
    if is_integer_text(text) {
        return text
            .parse::<i64>()
            .map(Number::Int)
            .map_err(|_| format!("{}, beyond int64", shown_number(text)));
    }
    // JSON has no NaN nor infinity: a number that reads as one is beyond float32.
    let x = n.as_f64().filter(|x| x.is_finite()).unwrap_or(f64::MAX);
    Value::float_option(x, Some(text))
        .map(Number::Float)
        .map_err(|why| format!("{}, {why}", shown_number(text)))
}

/// A create option's value from a JSON config, or what it is instead of a value rpjrt can
/// pass on unchanged. `written` is the value's JSON text as the file has it, which tells
/// an integer from a float (serde_json reads `-0`, and integers beyond u64, as floats);
/// without it the parsed value's own text is used.
fn json_value(v: &serde_json::Value, written: Option<&str>) -> std::result::Result<Value, String> {
    use serde_json::value::RawValue;
    use serde_json::Value as J;
    let text = |n: &serde_json::Number, w: Option<&str>| {
        w.map_or_else(|| n.to_string(), |w| w.trim().to_string())
    };
    Ok(match v {
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => match json_number(&text(n, written), n)? {
            Number::Int(i) => Value::Int64(i),
            Number::Float(f) => Value::Float(f),
        },
        J::String(s) => Value::String(s.clone()),
        J::Array(a) => {
            let list = written.map_or_else(|| v.to_string(), |w| w.trim().to_string());
            let items: Vec<Option<&RawValue>> = written
                .and_then(|w| serde_json::from_str::<Vec<&RawValue>>(w).ok())
                .filter(|r| r.len() == a.len())
                .map_or_else(
                    || vec![None; a.len()],
                    |r| r.into_iter().map(Some).collect(),
                );
            let mut out = Vec::with_capacity(a.len());
            for (x, w) in a.iter().zip(items) {
                let not_integer = |item: String| {
                    format!(
                        "{}, a list that is not all int64 integers ({} is not one)",
                        shown_number(&list),
                        shown_number(&item)
                    )
                };
                let J::Number(n) = x else {
                    return Err(not_integer(x.to_string()));
                };
                let item = text(n, w.map(RawValue::get));
                if !is_integer_text(&item) {
                    return Err(not_integer(item));
                }
                match json_number(&item, n) {
                    Ok(Number::Int(i)) => out.push(i),
                    Ok(Number::Float(_)) => return Err(not_integer(item)),
                    Err(why) => return Err(format!("a list holding {why}")),
                }
            }
            Value::Int64List(out)
        }
        J::Null => return Err("null".into()),
        J::Object(_) => return Err("an object".into()),
    })
}

/// The same library found more than once (by the variables, an entry point, a package)
/// is listed once, under its first name, with what the later findings add. Names given in
/// `PJRT_NAMES_AND_LIBRARY_PATHS` are the exception: each is a backend of its own, as JAX
/// reads them (two names for one library, each with its own create options in its config),
/// so an entry that already holds one such name never takes in another.
fn merge(found: Vec<PluginInfo>) -> Vec<PluginInfo> {
    const NAMED_BY: &str = "PJRT_NAMES_AND_LIBRARY_PATHS";
    let mut out: Vec<PluginInfo> = Vec::new();
    // Per entry of `out`: its library, and the name from the variable it holds, if any.
    let mut keys: Vec<(PathBuf, Option<String>)> = Vec::new();
    for info in found {
        let key = resolve(&info.path);
        let given = (info.source == NAMED_BY).then(|| info.name.clone());
        let same = keys.iter().position(|(k, name)| {
            *k == key
                && match (&given, name) {
                    (Some(g), Some(n)) => g == n,
                    _ => true,
                }
        });
        if let Some(i) = same {
            if keys[i].1.is_none() {
                keys[i].1 = given;
            }
            let first = &mut out[i];
            if first.version.is_none() {
                first.version = info.version;
            }
            if first.platform.is_none() {
                first.platform = info.platform;
            }
            if first.package.is_none() {
                first.package = info.package;
            }
            if first.options.is_none() {
                first.options = info.options;
            }
            continue;
        }
        keys.push((key, given));
        out.push(info);
    }
    out
}

/// Why [`first_that_opens`] found nothing.
#[derive(Debug)]
pub enum OpenFailure<E> {
    /// There was one candidate; its error.
    One(E),
    /// Every one of several candidates failed: `(what, error)` in the order tried.
    All(Vec<(String, E)>),
}

impl<E: std::fmt::Display> OpenFailure<E> {
    /// One message naming every failure: `no plugin could be used; A: why` and an
    /// `also tried B: why` line for each other candidate.
    pub fn message(&self) -> String {
        self.message_led_by("no plugin could be used")
    }

    /// [`OpenFailure::message`] with `lead` in place of "no plugin could be used".
    pub fn message_led_by(&self, lead: &str) -> String {
        match self {
            OpenFailure::One(e) => e.to_string(),
            OpenFailure::All(failures) => {
                let mut it = failures.iter();
                let mut msg = match it.next() {
                    Some((what, e)) => format!("{lead}; {what}: {e}"),
                    None => "no plugin to try".to_string(),
                };
                for (what, e) in it {
                    msg.push_str(&format!("\n  also tried {what}: {e}"));
                }
                msg
            }
        }
    }
}

/// What [`first_that_opens`] returns: the opened value and the `(what, error)` of each
/// candidate skipped before it, or why nothing opened.
pub type OpenResult<T, E> = std::result::Result<(T, Vec<(String, E)>), OpenFailure<E>>;

/// Opens the first candidate (a discovered plugin, in [`Discovery::candidates`] order) that
/// `open` accepts, and returns it with the failures of the candidates tried before it
/// (`(describe(candidate), error)`, for the caller to report as skipped). When all fail,
/// [`OpenFailure`] says why: the one error, or every failure in order.
pub fn first_that_opens<C, T, E>(
    candidates: impl IntoIterator<Item = C>,
    describe: impl Fn(&C) -> String,
    mut open: impl FnMut(&C) -> std::result::Result<T, E>,
) -> OpenResult<T, E> {
    let mut failures = Vec::new();
    for c in candidates {
        match open(&c) {
            Ok(t) => return Ok((t, failures)),
            Err(e) => failures.push((describe(&c), e)),
        }
    }
    match failures.len() {
        1 => Err(OpenFailure::One(failures.remove(0).1)),
        _ => Err(OpenFailure::All(failures)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_that_opens_falls_back_and_reports() {
        let names = ["a", "b", "c"];
        let (got, skipped) = first_that_opens(
            names,
            |n| n.to_string(),
            |n| if *n == "b" { Ok(2) } else { Err("no") },
        )
        .unwrap();
        assert_eq!(got, 2);
        assert_eq!(skipped, vec![("a".to_string(), "no")]);
        match first_that_opens(["x"], |n| n.to_string(), |_| Err::<(), _>("bad file")) {
            Err(OpenFailure::One(e)) => assert_eq!(e, "bad file"),
            other => panic!("{other:?}"),
        }
        let all = first_that_opens(names, |n| n.to_string(), |n| Err::<(), _>(format!("{n}!")));
        let Err(f) = all else { panic!() };
        assert_eq!(
            f.message(),
            "no plugin could be used; a: a!\n  also tried b: b!\n  also tried c: c!"
        );
        let none = first_that_opens(
            Vec::<&str>::new(),
            |n| n.to_string(),
            |_| Ok::<(), &str>(()),
        );
        assert_eq!(none.unwrap_err().message(), "no plugin to try");
    }

    fn fake_lib(p: &Path) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, b"\x7fELF not really").unwrap();
    }

    /// The acme-pjrt wheel of `version` unpacked in `site`: its library, and its METADATA,
    /// entry_points.txt and RECORD with the contents given, in that order.
    fn acme_wheel(site: &Path, version: &str, files: [&[u8]; 3]) {
        fake_lib(&site.join("acme_pjrt/libacme_pjrt.so"));
        let info = site.join(format!("acme_pjrt-{version}.dist-info"));
        fs::create_dir_all(&info).unwrap();
        for (name, text) in ["METADATA", "entry_points.txt", "RECORD"]
            .into_iter()
            .zip(files)
        {
            fs::write(info.join(name), text).unwrap();
        }
    }

    /// The plugins discovery finds in `site` (searched alone), in search order.
    fn found_in(site: &Path) -> Vec<PluginInfo> {
        Discovery::new(SearchPath::new([site]))
            .plugins()
            .unwrap()
            .into_iter()
            .filter(|p| p.path.starts_with(resolve(site)))
            .collect()
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rpjrt-discovery-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn an_empty_search_says_unset_set_empty_and_useless_apart() {
        let os = |v: &str| OsString::from(v);
        let why = |pp: Option<&str>, venv: Option<&str>| {
            let (pp, venv) = (pp.map(os), venv.map(os));
            no_directories_because(pp.as_deref(), venv.as_deref(), Some(OsStr::new("")))
        };
        let w = why(None, None);
        assert!(
            w.contains("RPJRT_PLUGIN_PATH is not set; VIRTUAL_ENV is not set"),
            "{w}"
        );
        assert!(
            w.contains("set RPJRT_PLUGIN_PATH to") && w.contains("or VIRTUAL_ENV to"),
            "{w}"
        );
        let w = why(Some(":"), None);
        assert!(
            w.contains("RPJRT_PLUGIN_PATH=\":\" names no directory"),
            "{w}"
        );
        assert!(
            !w.contains("set RPJRT_PLUGIN_PATH") && w.contains("or set VIRTUAL_ENV"),
            "{w}"
        );
        let w = why(Some(""), Some(""));
        assert!(w.contains("RPJRT_PLUGIN_PATH is set but empty"), "{w}");
        assert!(w.contains("VIRTUAL_ENV is set but empty"), "{w}");
        assert!(
            !w.contains("not set") && !w.contains("set VIRTUAL_ENV"),
            "{w}"
        );
        let w = why(None, Some("/gone"));
        assert!(
            w.contains("VIRTUAL_ENV=/gone has no lib/python*/site-packages"),
            "{w}"
        );
        assert!(w.contains("give VIRTUAL_ENV an existing"), "{w}");
    }

    #[test]
    fn each_record_is_read_once_per_discovery() {
        // Every plugin module re-read every wheel's RECORD: (modules x RECORD bytes).
        let site = tmp("record-once");
        for i in 0..3 {
            let d = site.join(format!("w{i}-1.0.dist-info"));
            fs::create_dir_all(&d).unwrap();
            fs::write(
                d.join("METADATA"),
                format!("Name: w{i}\nVersion: 1.{i}\n\n"),
            )
            .unwrap();
            fs::write(
                d.join("RECORD"),
                format!("jax_plugins/m{i}/pjrt_plugin.so,,\n"),
            )
            .unwrap();
        }
        for i in 0..5 {
            let d = site.join(format!("jax_plugins/m{i}"));
            fs::create_dir_all(&d).unwrap();
            fake_lib(&d.join("pjrt_plugin.so"));
        }
        let disc = Discovery::new(SearchPath::new([&site]));
        let found = disc.plugins().unwrap();
        for i in 0..5 {
            let p = found.iter().find(|p| p.name == format!("m{i}")).unwrap();
            let want = (i < 3).then(|| (format!("w{i}"), format!("1.{i}")));
            assert_eq!(p.package.clone().zip(p.version.clone()), want, "{p:?}");
        }
        // Each RECORD was read once (its cache is filled); a second search reads none.
        assert!(disc.dists.iter().all(|d| d.record.get().is_some()));
        for i in 0..3 {
            fs::remove_file(site.join(format!("w{i}-1.0.dist-info/RECORD"))).unwrap();
        }
        let again = disc.plugins().unwrap();
        assert_eq!(again, found);
        let _ = fs::remove_dir_all(&site);
    }

    #[test]
    fn pick_library_prefers_pjrt_names_and_skips_extensions() {
        let d = tmp("pick");
        fake_lib(&d.join("libz.so"));
        fake_lib(&d.join("libfoo_pjrt_plugin.so"));
        fake_lib(&d.join("_ext.abi3.so"));
        let got = pick_library(&d, None).unwrap();
        assert_eq!(got.file_name().unwrap(), "libfoo_pjrt_plugin.so");
        assert!(pick_library(&d.join("missing"), None).is_none());
    }

    #[test]
    fn entry_point_namespace_and_known_wheel() {
        let site = tmp("site");
        acme_wheel(
            &site,
            "1.2.3",
            [
                b"Metadata-Version: 2.1\nName: acme-pjrt\nVersion: 1.2.3\n".as_slice(),
                b"[console_scripts]\nx = y\n[jax_plugins]\nacme = acme_pjrt\n",
                b"acme_pjrt/__init__.py,,\nacme_pjrt/libacme_pjrt.so,,\n",
            ],
        );
        fake_lib(&site.join("jax_plugins/xla_fakecuda/xla_cuda_plugin.so"));
        fake_lib(&site.join("jax_plugins/xla_fakecuda/_helper.cpython-311-x86_64-linux-gnu.so"));
        fake_lib(&site.join("lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so"));
        fs::create_dir_all(site.join("jax_plugins/xla_fifo")).unwrap();
        let fifo = site.join("jax_plugins/xla_fifo/libfifo_pjrt.so");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let d = Discovery::new(SearchPath::new([&site]));
        // Plugins named by the environment of whoever runs the tests come first; the
        // directory's own come after them, in search order.
        let found = found_in(&site);
        let names: Vec<&str> = found.iter().map(|p| p.name.as_str()).collect();
        // Search order: entry points, namespace packages, known wheels.
        assert_eq!(names, ["acme", "xla_fakecuda", "lammps_jax_pjrt_cpu"]);
        assert_eq!(found[0].version.as_deref(), Some("1.2.3"));
        assert_eq!(found[0].package.as_deref(), Some("acme-pjrt"));
        assert_eq!(found[0].source, "entry point jax_plugins:acme");
        assert_eq!(found[1].platform.as_deref(), Some("cuda"));
        assert_eq!(
            found[1].source,
            "namespace package jax_plugins.xla_fakecuda"
        );
        assert_eq!(found[2].source, "package lammps-jax-pjrt-cpu");
        // A FIFO is never opened (and never listed).
        assert!(found.iter().all(|p| p.path.is_file()));
        // Accelerators are tried first.
        let c = d.candidates(Some("gpu")).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].name, "xla_fakecuda");
        assert_eq!(d.candidates(Some("acme-pjrt")).unwrap()[0].name, "acme");
        let err = d.candidates(Some("tpu")).unwrap_err().to_string();
        assert!(err.contains("pip install libtpu"), "{err}");
        assert!(err.contains("xla_fakecuda (cuda)"), "{err}");
        // A spec that is not UTF-8 can only be a path, and keeps its bytes.
        use std::os::unix::ffi::OsStrExt;
        let raw = OsStr::from_bytes(b"/x/plug-\xff.so");
        let c = d.candidates(Some(raw)).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].path.as_os_str(), raw);
        assert_eq!(c[0].source, "argument");
    }

    #[test]
    fn config_create_options_are_kept_or_refused_never_dropped() {
        let d = tmp("config-options");
        let cfg = d.join("p.json");
        let write = |opts: &str| {
            std::fs::write(
                &cfg,
                format!(r#"{{"library_path": "/x/lib.so", "create_options": {opts}}}"#),
            )
            .unwrap()
        };
        write(r#"{"a": 2, "b": true, "c": 0.5, "d": "s", "e": [1, 2]}"#);
        let (_, opts) = read_json_config(&cfg).unwrap();
        assert_eq!(opts.unwrap().entries().len(), 5);
        for (opts, want) in [
            (r#"{"a": null}"#, "\"a\" is null"),
            (r#"{"a": {"x": 1}}"#, "\"a\" is an object"),
            (r#"{"a": [1, 2.5]}"#, "not all int64"),
            (r#"{"a": 18446744073709551615}"#, "beyond int64"),
            // Beyond u64: serde_json reads these as floats, which passed on as floats.
            (
                r#"{"a": 99999999999999999999999}"#,
                "\"a\" is 99999999999999999999999, beyond int64",
            ),
            (
                r#"{"a": -99999999999999999999999}"#,
                "\"a\" is -99999999999999999999999, beyond int64",
            ),
            (
                r#"{"a": [1, 99999999999999999999999]}"#,
                "a list holding 99999999999999999999999, beyond int64",
            ),
            // A duplicate key: the last one counts, as it does for the parsed config.
            (r#"{"a": 1, "a": 99999999999999999999999}"#, "beyond int64"),
            (r#"{"a": 1e300}"#, "beyond float32"),
            ("7", "not an object"),
            // A name no option has: refused naming the config, as a bad value is.
            (r#"{"": 1}"#, "a create option has an empty name"),
            (
                r#"{"a b": 1}"#,
                "contains '=', whitespace or a control character",
            ),
        ] {
            write(opts);
            let e = read_json_config(&cfg).unwrap_err().to_string();
            assert!(e.contains(want), "{opts}: {e}");
            assert!(e.contains("p.json"), "{opts}: {e}");
        }
    }

    #[test]
    fn integers_in_range_and_floats_are_kept_as_written() {
        let d = tmp("config-numbers");
        let cfg = d.join("p.json");
        std::fs::write(
            &cfg,
            r#"{"library_path": "/x/lib.so", "create_options": {"a": 9223372036854775807,
                "b": -9223372036854775808, "c": 1e23, "d": 100000000000000000000000.0,
                "e": [-1, 9223372036854775807]}}"#,
        )
        .unwrap();
        let (_, opts) = read_json_config(&cfg).unwrap();
        let opts = opts.unwrap();
        let get = |k: &str| {
            opts.entries()
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .unwrap()
        };
        assert_eq!(get("a"), Value::Int64(i64::MAX));
        assert_eq!(get("b"), Value::Int64(i64::MIN));
        // Written as floats: floats, whatever their size.
        assert_eq!(get("c"), Value::Float(1e23));
        assert_eq!(get("d"), Value::Float(1e23));
        assert_eq!(get("e"), Value::Int64List(vec![-1, i64::MAX]));
        // A number of 300 digits is shown by its first ones and its length.
        std::fs::write(
            &cfg,
            format!(
                r#"{{"library_path": "/x/lib.so", "create_options": {{"a": {}}}}}"#,
                "9".repeat(300)
            ),
        )
        .unwrap();
        let e = read_json_config(&cfg).unwrap_err().to_string();
        assert!(e.contains("(300 characters), beyond int64"), "{e}");
        assert!(!e.contains(&"9".repeat(49)), "{e}");
    }

    #[test]
    fn minus_zero_is_an_integer_and_floats_that_float32_cannot_hold_are_refused() {
        // `-0` became the float -0.0 (and a list holding it was refused), and 1e-46 was
        // passed on as 0 while 1e300 was refused.
        let d = tmp("config-zero");
        let cfg = d.join("p.json");
        std::fs::write(
            &cfg,
            r#"{"library_path": "/x/lib.so", "create_options": {"a": -0, "b": [1, -0],
                "c": -0.0, "d": 0e-400, "e": 1e-45, "f": -8e-46, "g": 0, "h": -0E5}}"#,
        )
        .unwrap();
        let (_, opts) = read_json_config(&cfg).unwrap();
        let opts = opts.unwrap();
        let get = |k: &str| {
            opts.entries()
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .unwrap()
        };
        assert_eq!(get("a"), Value::Int64(0));
        assert_eq!(get("b"), Value::Int64List(vec![1, 0]));
        assert_eq!(get("g"), Value::Int64(0));
        // Zeros written as floats stay floats (with their sign).
        let Value::Float(c) = get("c") else { panic!() };
        assert!(c == 0.0 && c.is_sign_negative());
        assert_eq!(get("d"), Value::Float(0.0));
        let Value::Float(h) = get("h") else { panic!() };
        assert!(h == 0.0 && h.is_sign_negative());
        // The smallest subnormal float32 is kept, and so is a value rounding to it.
        let tiny = f32::from_bits(1);
        assert_eq!(get("e"), Value::Float(tiny));
        assert_eq!(get("f"), Value::Float(-tiny));
        let write = |opts: &str| {
            std::fs::write(
                &cfg,
                format!(r#"{{"library_path": "/x/lib.so", "create_options": {opts}}}"#),
            )
            .unwrap()
        };
        for (opts, want) in [
            (r#"{"a": 1e-46}"#, "\"a\" is 1e-46, too small for float32"),
            (r#"{"a": -1e-50}"#, "\"a\" is -1e-50, too small for float32"),
            // Just under half the smallest subnormal: rounds to 0.
            (r#"{"a": 7e-46}"#, "\"a\" is 7e-46, too small for float32"),
            (r#"{"a": 1e-400}"#, "\"a\" is 1e-400, too small for float32"),
            (
                r#"{"a": 0.00000000000000000000000000000000000000000000001}"#,
                "too small",
            ),
            (r#"{"a": 1e300}"#, "\"a\" is 1e300, beyond float32"),
            (r#"{"a": -1e300}"#, "\"a\" is -1e300, beyond float32"),
            // Beyond float64 too, which the JSON parser itself refuses: still named.
            (r#"{"a": 1e400}"#, "\"a\" is 1e400, beyond float32"),
            (
                r#"{"b": 1, "a": -1e400}"#,
                "\"a\" is -1e400, beyond float32",
            ),
            (
                r#"{"a": [1, -0.0]}"#,
                "\"a\" is [1, -0.0], a list that is not all int64 integers (-0.0 is not one)",
            ),
            (r#"{"a": [1, "x"]}"#, "(\"x\" is not one)"),
            (r#"{"a": [-0, 1e2]}"#, "(1e2 is not one)"),
        ] {
            write(opts);
            let e = read_json_config(&cfg).unwrap_err().to_string();
            assert!(e.contains(want), "{opts}: {e}");
            assert!(e.contains("p.json"), "{opts}: {e}");
        }
        // A long list is shown by its start and its length.
        write(&format!(r#"{{"a": [{}0.5]}}"#, "1, ".repeat(10_000)));
        let e = read_json_config(&cfg).unwrap_err().to_string();
        assert!(e.len() < 600, "{e}");
        assert!(e.contains("(30005 characters)"), "{e}");
    }

    #[test]
    fn a_library_path_that_is_not_a_string_is_said_so_naming_the_file() {
        let d = tmp("config-library-path");
        let cfg = d.join("p.json");
        for (text, want) in [
            (
                r#"{"library_path": 5}"#,
                "'library_path' is a number (5), not a string",
            ),
            (
                r#"{"library_path": null}"#,
                "'library_path' is null, not a string",
            ),
            (
                r#"{"library_path": ["/x.so"]}"#,
                "'library_path' is a list, not a string",
            ),
            (r#"{"create_options": {}}"#, "has no 'library_path' field"),
            (r#"[1, 2]"#, "is a list, not a JSON object"),
        ] {
            std::fs::write(&cfg, text).unwrap();
            let e = read_json_config(&cfg).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
            assert!(e.contains("p.json"), "{text}: {e}");
        }
    }

    #[test]
    fn a_config_far_larger_than_any_config_is_refused_unread() {
        let d = tmp("config-huge");
        let cfg = d.join("p.json");
        let pad = " ".repeat(2 << 20);
        std::fs::write(&cfg, format!(r#"{{"library_path": "/x/lib.so"{pad}}}"#)).unwrap();
        let e = read_json_config(&cfg).unwrap_err().to_string();
        assert!(
            e.contains("larger than 1024 KiB") && e.contains("p.json"),
            "{e}"
        );
    }

    #[test]
    fn a_wheel_whose_metadata_is_not_utf8_is_still_found() {
        let site = tmp("latin1");
        // Latin-1 bytes in METADATA, entry_points.txt and RECORD: the rest of each counts.
        acme_wheel(
            &site,
            "1.0",
            [
                b"Name: acme-pjrt\nVersion: 1.0\n\ncaf\xe9\n".as_slice(),
                b"# \xa9 acme\n[jax_plugins]\nacme = acme_pjrt\n",
                b"acme_pjrt/caf\xe9.txt,,\nacme_pjrt/libacme_pjrt.so,,\n",
            ],
        );
        let found = found_in(&site);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].source, "entry point jax_plugins:acme");
        assert_eq!(found[0].version.as_deref(), Some("1.0"));
        assert_eq!(found[0].package.as_deref(), Some("acme-pjrt"));
    }

    #[test]
    fn matching_by_platform_alias_and_package() {
        let info = PluginInfo {
            name: "xla_cuda12".into(),
            path: "/x/xla_cuda_plugin.so".into(),
            version: None,
            source: "s".into(),
            platform: Some("cuda".into()),
            package: Some("jax-cuda12-pjrt".into()),
            options: None,
        };
        assert!(info.matches("gpu") && info.matches("CUDA") && info.matches("jax_cuda12_pjrt"));
        assert!(info.matches("xla_cuda_plugin.so") && !info.matches("cpu"));
    }

    #[test]
    fn platform_is_guessed_from_whole_tokens_of_meaningful_names() {
        let g = |t: &str| guess_platform(&[Some(t)]);
        for (name, want) in [
            ("libtpu.so", Some("tpu")),
            ("xla_cuda12", Some("cuda")),
            ("jax-rocm7-pjrt", Some("rocm")),
            ("pjrt_c_api_cpu_plugin.so", Some("cpu")),
            ("libpjrt_cpu.so", Some("cpu")),
            ("pjrt_plugin_metal_14.dylib", Some("metal")),
            ("HOST", Some("cpu")),
            // A word inside another word is not that word.
            ("output", None),
            ("throughput", None),
            ("cpuinfo", None),
            ("libcudart.so.12", None),
            ("hostname", None),
            ("procmon", None),
            ("libmine.so", None),
        ] {
            assert_eq!(g(name).as_deref(), want, "{name}");
        }
    }

    #[test]
    fn a_bare_path_reads_no_platform_from_unrelated_directories() {
        let d = tmp("bare-platform");
        for dir in ["output", "tpu", "cuda-build", "throughput/cpu"] {
            let lib = d.join(dir).join("libmine.so");
            fake_lib(&lib);
            let info = PluginInfo::bare(stem(&lib), lib.clone(), "RPJRT_PLUGIN");
            assert_eq!(info.platform, None, "{}", lib.display());
            // The name given with it still counts.
            let named =
                PluginInfo::bare("cuda".into(), lib.clone(), "PJRT_NAMES_AND_LIBRARY_PATHS");
            assert_eq!(named.platform.as_deref(), Some("cuda"));
        }
        // The file's own name counts, whatever the directories say.
        let lib = d.join("output/libtpu.so");
        fake_lib(&lib);
        let info = PluginInfo::bare("mine".into(), lib, "PJRT_NAMES_AND_LIBRARY_PATHS");
        assert_eq!(info.platform.as_deref(), Some("tpu"));
        // A plugin module's directory (a Python package) counts: it names the plugin.
        let module = d.join("site/jax_plugins/xla_cuda12");
        fake_lib(&module.join("xla_plugin.so"));
        fs::write(module.join("__init__.py"), b"").unwrap();
        let lib = module.join("xla_plugin.so");
        let info = PluginInfo::bare(stem(&lib), lib, "RPJRT_PLUGIN");
        assert_eq!(info.platform.as_deref(), Some("cuda"));
        // /proc/cpuinfo named as a plugin is no CPU plugin.
        let info = PluginInfo::bare("cpuinfo".into(), "/proc/cpuinfo".into(), "RPJRT_PLUGIN");
        assert_eq!(info.platform, None);
    }
}
