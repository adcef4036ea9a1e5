//! Loading a PJRT plugin and reading what it offers.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::raw::value::Value;
use crate::raw::{self, Api};

pub use crate::error::ApiVersion;

/// Names of the extension type ids, in the C API's numbering (separated by spaces).
const EXTENSION_NAMES: &str = "GpuCustomCall Profiler CustomPartitioner Stream Layouts \
     FFI MemoryDescriptions Triton RawBuffer PhaseCompile Example Unknown CrossHostTransfers \
     ExecutableMetadata Callback HostAllocator TpuTopology TpuExecutable Megascale Shardings \
     AbiVersion Collectives MultiSlice HostMemoryAllocator XlaTransform";

/// One extension a plugin offers on its extension chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtensionInfo {
    /// The extension's type id in the C API.
    pub type_id: i32,
    /// A readable name (`FFI`, `Layouts`, ...), or `unknown(<id>)`.
    pub name: String,
    /// Size of the plugin's extension struct in bytes.
    pub struct_size: usize,
}

macro_rules! extension_getters {
    ($($fn:ident = $id:literal, $what:literal;)*) => {
        impl Extensions {
            $(
                #[doc = concat!("The ", $what, ".")]
                pub fn $fn(&self) -> Option<&ExtensionInfo> {
                    self.get($id)
                }
            )*
        }
    };
}

/// The extensions of a plugin, found by walking its chain once at load time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extensions {
    all: Vec<ExtensionInfo>,
}

impl Extensions {
    /// Every extension on the chain, in chain order.
    pub fn all(&self) -> &[ExtensionInfo] {
        &self.all
    }

    /// The extension with this type id, if present.
    pub fn get(&self, type_id: i32) -> Option<&ExtensionInfo> {
        self.all.iter().find(|e| e.type_id == type_id)
    }
}

extension_getters! {
    gpu_custom_call = 0, "GPU custom-call extension";
    profiler = 1, "profiler extension";
    custom_partitioner = 2, "custom partitioner extension";
    stream = 3, "stream extension";
    layouts = 4, "layouts extension";
    ffi = 5, "XLA FFI extension (custom calls)";
    memory_descriptions = 6, "memory descriptions extension";
    triton = 7, "Triton extension";
    raw_buffer = 8, "raw buffer extension";
    phase_compile = 9, "phase compile extension";
    cross_host_transfers = 12, "cross-host transfers extension";
    executable_metadata = 13, "executable metadata extension";
    callback = 14, "callback extension";
    shardings = 19, "shardings extension";
    collectives = 21, "collectives extension";
    xla_transform = 24, "XLA transform extension";
}

pub(crate) struct PluginInner {
    pub(crate) path: PathBuf,
    /// The library file's identity, by which the registry knows it.
    key: FileKey,
    pub(crate) api: &'static Api,
    extensions: Extensions,
    attributes: Vec<(String, Value)>,
    /// Why `PJRT_Plugin_Attributes` failed, when the plugin has the entry and it failed.
    attributes_error: Option<String>,
    /// The library file as loaded (opened then), which [`Plugin::build`] hashes.
    file: Option<std::fs::File>,
    /// [`Plugin::build`], computed at first need.
    build: OnceLock<String>,
    /// [`Plugin::xla_flags`], settled as the plugin's first client is created.
    xla_flags: OnceLock<XlaFlags>,
    /// The flags as they were at the first attempt to create a client, which the plugin
    /// may have read even if that attempt failed.
    xla_flags_first_attempt: Mutex<Option<XlaFlags>>,
}

/// The `XLA_FLAGS` a plugin's compiler runs with, as the compile cache sees them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum XlaFlags {
    /// Known: the parts of the cache key (none when unset).
    Known(Vec<Vec<u8>>),
    /// Not known for sure, and why: nothing is cached or served from the cache then.
    Unknown(String),
}

impl XlaFlags {
    /// The flags in the environment now: the value and, when it names a file (it does not
    /// start with `-`, as XLA reads it), a digest of the file's contents. A file that is not
    /// regular (a pipe such as `<(...)` or `/dev/stdin`: reading it would take what the
    /// plugin reads) or cannot be read makes them unknown.
    fn now() -> XlaFlags {
        let Some(v) = std::env::var_os("XLA_FLAGS").filter(|v| !v.is_empty()) else {
            return XlaFlags::Known(Vec::new());
        };
        let mut parts = vec![b"XLA_FLAGS".to_vec(), v.as_encoded_bytes().to_vec()];
        if !v.as_encoded_bytes().trim_ascii_start().starts_with(b"-") {
            let path = Path::new(&v);
            let digest = match std::fs::metadata(path) {
                Ok(m) if !m.is_file() => {
                    Err("it is not a regular file (a pipe, device or folder), and \
                     reading it would take what the plugin reads"
                        .to_string())
                }
                Ok(_) => raw::files::open_for_reading(path)
                    .and_then(|(mut f, _)| {
                        let mut h = Sha256::new();
                        std::io::copy(&mut f, &mut h).map(|_| h.finalize().to_vec())
                    })
                    .map_err(|e| format!("it cannot be read ({e})")),
                Err(e) => Err(format!("it cannot be read ({e})")),
            };
            match digest {
                Ok(d) => parts.extend([b"XLA_FLAGS file sha256".to_vec(), d]),
                Err(why) => {
                    return XlaFlags::Unknown(format!(
                        "XLA_FLAGS names the file {}, whose flags rpjrt cannot know: {why}",
                        path.display()
                    ))
                }
            }
        }
        XlaFlags::Known(parts)
    }
}

/// What a build fingerprint hashes before the library's bytes (so that no fingerprint of
/// the whole file equals one of the earlier rpjrt's, which hashed its two ends only).
const BUILD_DOMAIN: &[u8] = b"rpjrt plugin build v2\0";

/// Lower-case hex digits of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 over [`BUILD_DOMAIN`] and every byte of the library open as `file`, as 16 hex
/// digits: copies of one build anywhere agree, and any change to the file changes it.
fn hash_library(mut file: &std::fs::File) -> std::io::Result<String> {
    use std::io::Seek as _;
    file.rewind()?;
    let mut h = Sha256::new();
    h.update(BUILD_DOMAIN);
    std::io::copy(&mut file, &mut h)?;
    Ok(hex(&h.finalize()[..8]))
}

/// A loaded PJRT plugin. Cheap to clone.
///
/// Each library is loaded and initialised once per process; loading the same path again
/// returns the same plugin. Libraries are never unloaded.
#[derive(Clone)]
pub struct Plugin {
    pub(crate) inner: Arc<PluginInner>,
}

/// A file's identity ([`raw::file_key`]: device and inode).
type FileKey = (u64, u64);

/// The plugins loaded, and the loads in progress. Held only to look up and record entries,
/// never across a load's calls into a library: a load that never returns holds up only
/// later loads of the same file.
struct Registry {
    plugins: Vec<Plugin>,
    loading: Vec<Loading>,
}

/// A load in progress: of which file, on which thread, and the threads waiting for it.
struct Loading {
    key: FileKey,
    path: PathBuf,
    number: u64,
    thread: std::thread::ThreadId,
    waiters: Vec<std::thread::ThreadId>,
}

static LOADED: Mutex<Registry> = Mutex::new(Registry {
    plugins: Vec::new(),
    loading: Vec::new(),
});

/// Signalled as each load in progress ends.
static LOAD_ENDED: std::sync::Condvar = std::sync::Condvar::new();

/// For a process about to `fork()`, on the forking thread (before the fork hooks of
/// others, with the interpreter's lock released where there is one): waits up to `limit`
/// for a plugin load in progress on another thread, then registers the exit handler of
/// `rpjrt_raw::guard::before_fork`. The registry of plugins itself is held inside
/// `fork()`, around the copy of the process, after every hook: a hook that loads a plugin
/// (one registered before rpjrt's runs after it) finds it free. A load that outlasts
/// `limit` is not waited for again inside `fork()`.
pub fn before_fork(limit: std::time::Duration) {
    watch_forks();
    let wait = match registry_within(limit) {
        Some(_) => limit,
        None => std::time::Duration::ZERO,
    };
    let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
    NEXT_FORK_WAIT_MS.store(ms, Ordering::Relaxed);
    raw::guard::before_fork();
}

/// The other half of [`before_fork`]'s pairing, kept for its callers: the registry is let
/// go inside `fork()` itself, so this only makes sure nothing is still held.
pub fn after_fork() {
    release_registry_after_fork();
}

thread_local! {
    /// The registry, held by the forking thread inside `fork()` ([`watch_forks`]).
    static HELD_FOR_FORK: std::cell::RefCell<Option<std::sync::MutexGuard<'static, Registry>>> =
        const { std::cell::RefCell::new(None) };
}

/// How long the next fork waits, inside `fork()`, for a plugin load in progress on another
/// thread (set by [`before_fork`]; [`FORK_WAIT_MS`] for a fork that did not call it).
static NEXT_FORK_WAIT_MS: AtomicU64 = AtomicU64::new(FORK_WAIT_MS);
const FORK_WAIT_MS: u64 = 2000;

/// The fork generation of the last fork made while another thread held the registry (a
/// load that outlasted the fork's wait); `u32::MAX` when the last fork held it.
static FORKED_MID_LOAD: AtomicU32 = AtomicU32::new(u32::MAX);

/// Has every `fork()` of the process hold the registry of plugins around the copy (its
/// `pthread_atfork` handlers, which run after every fork hook of Python's): a child forked
/// while another thread was loading a plugin would find the registry locked for ever, and
/// the C library's list of exit handlers too, by the library's constructors.
fn watch_forks() {
    static WATCHING: std::sync::Once = std::sync::Once::new();
    WATCHING.call_once(|| {
        raw::guard::on_fork(
            hold_registry_for_fork,
            release_registry_after_fork,
            release_registry_after_fork,
        )
    });
}

/// Inside `fork()`, before the copy: holds the registry, waiting for a load in progress
/// for at most the fork's wait.
extern "C" fn hold_registry_for_fork() {
    let limit = NEXT_FORK_WAIT_MS.swap(FORK_WAIT_MS, Ordering::Relaxed);
    let held = registry_within(std::time::Duration::from_millis(limit));
    // A child of this fork inherits the registry locked by a thread it does not have.
    let mid_load = if held.is_some() {
        u32::MAX
    } else {
        raw::guard::generation()
    };
    FORKED_MID_LOAD.store(mid_load, Ordering::Relaxed);
    let _ = HELD_FOR_FORK.try_with(|h| {
        if let Ok(mut slot) = h.try_borrow_mut() {
            *slot = held;
        }
    });
}

/// The registry, with no load in progress, once those on other threads end, waiting at
/// most `limit`; `None` past that. A load on this very thread (a library's initializer that
/// starts a process) would be waited for by itself: then `None` at once.
fn registry_within(limit: std::time::Duration) -> Option<std::sync::MutexGuard<'static, Registry>> {
    let (me, start) = (this_thread_number(), std::time::Instant::now());
    loop {
        let held = match LOADED.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        if let Some(g) = held {
            if g.loading.iter().any(|l| l.number == me) {
                return None;
            }
            if g.loading.is_empty() {
                return Some(g);
            }
        }
        if start.elapsed() >= limit {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Inside `fork()`, after the copy, in the parent and in the child: lets go of the
/// registry.
extern "C" fn release_registry_after_fork() {
    let _ = HELD_FOR_FORK.try_with(|h| {
        if let Ok(mut slot) = h.try_borrow_mut() {
            drop(slot.take());
        }
    });
}

/// The registry of plugins. In a child forked while another thread of the parent was
/// loading, the registry is locked by a thread that does not exist here, or holds a load
/// that never ends: refused at once, not waited for.
fn registry() -> Result<std::sync::MutexGuard<'static, Registry>> {
    watch_forks();
    let mid_load = FORKED_MID_LOAD.load(Ordering::Relaxed);
    if mid_load != u32::MAX && raw::guard::forked_since(mid_load) {
        return Err(Error::Pjrt {
            entry: "PJRT_Plugin_Initialize",
            code: crate::error::Code::FailedPrecondition,
            message: "this process was forked while another thread of its parent was loading \
                      a plugin (for longer than the fork waits, 2 s), so the registry of \
                      plugins it inherited is locked by a thread it does not have: plugins \
                      cannot be loaded in it. Fork once the load is over, or start the \
                      process with the spawn or forkserver method"
                .into(),
        });
    }
    Ok(LOADED.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Ends this thread's load of the file `0` when dropped (whatever happened): records the
/// plugin `1` if it loaded, and wakes the loads of the same file waiting for it.
struct LoadEnd(FileKey, Option<Plugin>);

impl Drop for LoadEnd {
    fn drop(&mut self) {
        let mut reg = LOADED.lock().unwrap_or_else(|p| p.into_inner());
        let me = this_thread_number();
        reg.loading.retain(|l| (l.key, l.number) != (self.0, me));
        reg.plugins.extend(self.1.take());
        LOAD_ENDED.notify_all();
    }
}

/// A number of this thread's own, never 0 (a fork handler compares numbers, not ids).
fn this_thread_number() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static NUMBER: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    NUMBER.try_with(|n| *n).unwrap_or(u64::MAX)
}

/// `raw::load`, with the settings libtpu needs off a TPU machine first, and a loader
/// failure over missing libraries explained: every missing library named (the loader names
/// only the first), with what provides it.
fn load_library(path: &Path) -> Result<Api> {
    crate::raw::tpu::prepare(path);
    raw::load(path).map_err(|e| match e {
        Error::PluginLoad { path, reason } if reason.contains("cannot open shared object") => {
            match crate::raw::libraries::missing_libraries(&path) {
                Ok(missing) if !missing.is_empty() => Error::PluginLoad {
                    reason: crate::raw::libraries::describe_missing(&missing),
                    path,
                },
                _ => Error::PluginLoad { path, reason },
            }
        }
        other => other,
    })
}

/// The steps of plugin loads running now, per thread, innermost last: what a caller that
/// gives up on a load (a timeout) names as the call that did not return. A thread whose
/// load has returned keeps [`STEP_LOADED`], so that a wait over a load and a client
/// creation can tell that the creation was running.
static STEPS: Mutex<Vec<(std::thread::ThreadId, &'static str)>> = Mutex::new(Vec::new());

/// The step of a load that is inside `raw::load` (the library loader, then `GetPjrtApi`).
const STEP_LIBRARY: &str = "library";

/// The mark a finished load leaves on its thread.
const STEP_LOADED: &str = "loaded";

/// The step of a load waiting for another thread's load of the same file.
const STEP_WAITING: &str = "waiting";

/// At most this many marks are kept (threads that loaded and ended leave theirs).
const STEPS_KEPT: usize = 256;

fn steps() -> std::sync::MutexGuard<'static, Vec<(std::thread::ThreadId, &'static str)>> {
    STEPS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Marks `name` as this thread's current step until dropped.
struct Step(std::thread::ThreadId);

impl Step {
    fn enter(name: &'static str) -> Step {
        let id = std::thread::current().id();
        let mut s = steps();
        if s.len() >= STEPS_KEPT {
            s.remove(0);
        }
        s.push((id, name));
        Step(id)
    }

    /// Runs `f` with this step marked.
    fn finish<T>(self, f: impl FnOnce() -> T) -> T {
        let out = f();
        drop(self);
        out
    }
}

impl Drop for Step {
    fn drop(&mut self) {
        let mut s = steps();
        if let Some(i) = s.iter().rposition(|(t, _)| *t == self.0) {
            s.remove(i);
        }
    }
}

impl Plugin {
    /// What the plugin load or client creation running on `thread` is waiting on, for a
    /// caller that gave up on it (`RPJRT_PLUGIN_TIMEOUT`, `--plugin-timeout`): the PJRT
    /// entry in flight (`GetPjrtApi`, `PJRT_Plugin_Initialize`, ...), the system's library
    /// loader, or, once [`Plugin::load`] has returned on that thread, the client creation
    /// that follows it. `None` when nothing is known (no load was started there).
    pub fn current_step(thread: std::thread::ThreadId) -> Option<String> {
        Self::step_of(thread, 4)
    }

    /// [`Plugin::current_step`], following waits for other threads' loads `depth` deep.
    fn step_of(thread: std::thread::ThreadId, depth: u32) -> Option<String> {
        let name = steps()
            .iter()
            .rev()
            .find(|(t, _)| *t == thread)
            .map(|(_, n)| *n)?;
        // Waited for briefly: a forked child's may be held by a thread it does not have.
        let reg = (0..200).find_map(|_| {
            let got = LOADED.try_lock().ok();
            if got.is_none() {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            got
        });
        let loading = reg.as_ref().map_or(&[][..], |r| &r.loading[..]);
        let others: Vec<String> = (loading.iter())
            .filter(|l| l.thread != thread)
            .map(|l| l.path.display().to_string())
            .collect();
        let waited = (loading.iter().find(|l| l.waiters.contains(&thread)))
            .map(|l| (l.path.clone(), l.thread));
        drop(reg);
        Some(match name {
            STEP_WAITING => match waited.filter(|_| depth > 0) {
                Some((path, loader)) => format!(
                    "a wait for another thread's load of the same file, {}, which is in {}",
                    path.display(),
                    Self::step_of(loader, depth - 1).unwrap_or_else(|| "no known step".into())
                ),
                None => "a wait for another thread's load of the same file".into(),
            },
            STEP_LIBRARY if raw::loads_in_loader() > 1 && !others.is_empty() => format!(
                "the system's library loader (dlopen), which loads one library at a time: \
                 other plugin loads are in progress ({}), and one whose library's initializer \
                 never returns holds the loader for every load",
                others.join(", ")
            ),
            STEP_LIBRARY if raw::loads_in_loader() > 0 => {
                "the system's library loader (dlopen, running the library's initializers)"
                    .to_string()
            }
            STEP_LIBRARY => "GetPjrtApi".to_string(),
            STEP_LOADED => "the client's creation after the plugin loaded \
                            (PJRT_Client_Create, or one of the new client's first queries: \
                            PJRT_Client_Devices, PJRT_Client_AddressableDevices, \
                            PJRT_Client_PlatformName, ...)"
                .to_string(),
            entry => entry.to_string(),
        })
    }

    /// The files of the plugin loads in progress in this process (empty when the registry
    /// is busy this instant).
    pub fn loads_in_progress() -> Vec<PathBuf> {
        let reg = LOADED.try_lock().ok();
        reg.map_or_else(Vec::new, |r| {
            r.loading.iter().map(|l| l.path.clone()).collect()
        })
    }

    /// Loads the plugin at `path`, checks that it is a PJRT plugin of a version rpjrt can
    /// talk to (0.57 or newer), and initialises it.
    pub fn load(path: impl AsRef<Path>) -> Result<Plugin> {
        let id = std::thread::current().id();
        steps().retain(|(t, _)| *t != id);
        let loaded = Self::load_marked(path.as_ref());
        if loaded.is_ok() {
            // Left in place: what this thread does next (creating a client) is past the load.
            std::mem::forget(Step::enter(STEP_LOADED));
        }
        loaded
    }

    /// [`Plugin::load`], marking each step for [`Plugin::current_step`].
    /// The registry knows files by identity: another name of a loaded file (a hard link,
    /// a symlink) gives its plugin, another file behind a name used before loads anew.
    fn load_marked(path: &Path) -> Result<Plugin> {
        let (file, key) = raw::open_library_file(path)?;
        let fail = |reason: String| Error::PluginLoad {
            path: path.to_path_buf(),
            reason,
        };
        let canonical =
            raw::canonical(path).map_err(|e| fail(format!("the file cannot be read ({e})")))?;
        let me = std::thread::current().id();
        let (mut reg, mut waiting) = (registry()?, None);
        while let Some(l) = reg.loading.iter_mut().find(|l| l.key == key) {
            if l.thread == me {
                return Err(fail(
                    "loading it asked to load it again on the same thread (from \
                     its own initializer or PJRT entry), which would wait for itself"
                        .into(),
                ));
            }
            if !l.waiters.contains(&me) {
                l.waiters.push(me);
            }
            waiting.get_or_insert_with(|| Step::enter(STEP_WAITING));
            reg = LOAD_ENDED.wait(reg).unwrap_or_else(|p| p.into_inner());
        }
        if let Some(p) = reg.plugins.iter().find(|p| p.inner.key == key) {
            return Ok(p.clone());
        }
        let (number, waiters) = (this_thread_number(), Vec::new());
        let seen = canonical.clone();
        reg.loading.push(Loading {
            key,
            path: seen,
            number,
            thread: me,
            waiters,
        });
        drop((reg, waiting));
        let mut end = LoadEnd(key, None);
        let plugin = Self::load_file(path, canonical, file, key)?;
        end.1 = Some(plugin.clone());
        Ok(plugin)
    }

    /// The load of [`Plugin::load_marked`], the registry not held (a load in progress of
    /// the file `key` is recorded there).
    fn load_file(
        path: &Path,
        canonical: PathBuf,
        file: std::fs::File,
        key: FileKey,
    ) -> Result<Plugin> {
        let _span = crate::trace::span(crate::trace::Category::Load, "plugin_load")
            .text("path", &path.to_string_lossy());
        let loaded_as = |api: &Api| {
            let reg = LOADED.lock().unwrap_or_else(|p| p.into_inner());
            let p = reg.plugins.iter().find(|p| p.inner.api.same_library(api));
            p.map(|p| p.path().to_path_buf())
        };
        let mut api = Step::enter(STEP_LIBRARY).finish(|| load_library(path))?;
        // The system's loader matches a name it loaded before by its text: a file replaced
        // at that path (or a reused /proc/self/fd number) gets the earlier library back, and
        // is loaded under a name the loader has not seen.
        if loaded_as(&api).is_some() {
            if let Some(other) = raw::unseen_name(path) {
                api = Step::enter(STEP_LIBRARY).finish(|| load_library(&other))?;
            }
        }
        if let Some(earlier) = loaded_as(&api) {
            return Err(Error::PluginLoad {
                path: path.to_path_buf(),
                reason: format!(
                    "the system's loader gave back the library it loaded earlier ({}), though \
                     this path now names another file (replaced since?): load a copy under \
                     another name, or restart the process",
                    earlier.display()
                ),
            });
        }
        let api: &'static Api = Box::leak(Box::new(api));
        Step::enter("PJRT_Plugin_Initialize").finish(|| api.plugin_initialize())?;
        // Attributes arrived at 0.58; a plugin without the entry simply has none. One whose
        // entry fails has none either, and the failure is kept (`attributes_error`) rather
        // than passed off as an empty list.
        let (attributes, attributes_error) =
            match Step::enter("PJRT_Plugin_Attributes").finish(|| api.plugin_attributes()) {
                Ok(list) => (crate::raw::value::from_raw_list(list), None),
                Err(Error::Unsupported { .. }) => (Vec::new(), None),
                Err(e) => (Vec::new(), Some(e.to_string())),
            };
        let extensions = Extensions {
            all: api
                .extension_list()
                .into_iter()
                .map(|(type_id, struct_size)| ExtensionInfo {
                    type_id,
                    name: usize::try_from(type_id)
                        .ok()
                        .and_then(|i| EXTENSION_NAMES.split_whitespace().nth(i))
                        .map_or_else(|| format!("unknown({type_id})"), |n| n.to_string()),
                    struct_size,
                })
                .collect(),
        };
        let plugin = Plugin {
            inner: Arc::new(PluginInner {
                path: canonical,
                key,
                api,
                extensions,
                attributes,
                attributes_error,
                file: Some(file),
                build: OnceLock::new(),
                xla_flags: OnceLock::new(),
                xla_flags_first_attempt: Mutex::new(None),
            }),
        };
        Ok(plugin)
    }

    /// How many plugin libraries are inside the system's library loader (`dlopen`) right
    /// now, in this process. A load that never comes back from there (a library whose
    /// initializer hangs) keeps the loader locked, so a normal exit of the process, which
    /// needs that lock, would wait forever: a caller that gave up on such a load can end
    /// the process with `_exit` instead.
    pub fn loads_in_loader() -> usize {
        raw::loads_in_loader()
    }

    /// Reads the PJRT version a plugin library reports without initialising it or creating
    /// anything: the library is loaded (and stays loaded) and `GetPjrtApi` is called. Errors
    /// are the same as [`Plugin::load`]'s for a file that is not a usable plugin.
    pub fn probe_version(path: impl AsRef<Path>) -> Result<ApiVersion> {
        let path = path.as_ref();
        let (_, key) = raw::open_library_file(path)?;
        let known = (registry()?.plugins.iter())
            .find(|p| p.inner.key == key)
            .map(Plugin::version);
        match known {
            Some(v) => Ok(v),
            None => Ok(load_library(path)?.version()),
        }
    }

    /// Whether `other` is this plugin (one library load; two files at one path differ).
    pub fn same(&self, other: &Plugin) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The library's path (canonicalised).
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// A fingerprint of the library file: SHA-256 over all of its bytes, as 16 hex digits
    /// (empty when it could not be read). Two builds that report the same versions still
    /// differ here. Artifacts and compile-cache keys record it. Computed at first need,
    /// once per process, from the file as it was when the plugin loaded.
    pub fn build(&self) -> &str {
        self.build_memo(None)
    }

    /// [`Plugin::build`], taken from (or recorded in) a memo file in the compile-cache
    /// directory `dir` named by the library's identity, so that a later process pays a
    /// `stat` and a small read instead of hashing the whole library.
    pub(crate) fn build_memo(&self, dir: Option<&Path>) -> &str {
        self.inner.build.get_or_init(|| {
            let Some(file) = &self.inner.file else {
                return String::new();
            };
            // Filed under a hash of the library's identity; its check, a hash of that and
            // the build, fails for a damaged memo, which is then rewritten.
            let id = dir.and(raw::files::identity(&self.inner.path, file));
            let id = id.map(|id| hex(&Sha256::digest(id)[..16]));
            let memo = dir.zip(id.as_ref());
            let memo = memo.map(|(d, id)| d.join(format!(".rpjrt-build-{id}")));
            let id = id.unwrap_or_default();
            let check = |b: &str| {
                let ok = b.len() == 16 && b.bytes().all(|c| c.is_ascii_hexdigit());
                ok.then(|| hex(&Sha256::digest(format!("{id} {b}"))[..8]))
            };
            raw::files::memoized(memo.as_deref(), check, || {
                hash_library(file).unwrap_or_default()
            })
        })
    }

    /// The `XLA_FLAGS` the plugin's compiler runs with (see [`XlaFlags::now`]), for the
    /// compile-cache key. XLA reads them once per library, at its first client's creation:
    /// [`Plugin::client_attempt`] and [`Plugin::client_created`] settle them then. Before any
    /// client, what the environment holds now.
    pub(crate) fn xla_flags(&self) -> XlaFlags {
        self.inner
            .xla_flags
            .get()
            .cloned()
            .unwrap_or_else(XlaFlags::now)
    }

    /// Notes an attempt to create a client: the flags now, which the caller gives to
    /// [`Plugin::client_created`] if the creation succeeds.
    pub(crate) fn client_attempt(&self) -> XlaFlags {
        let now = XlaFlags::now();
        let mut first =
            (self.inner.xla_flags_first_attempt.lock()).unwrap_or_else(|p| p.into_inner());
        first.get_or_insert_with(|| now.clone());
        now
    }

    /// Settles the flags once a client was created with `flags` in force (from
    /// [`Plugin::client_attempt`]). When the first attempt, which failed, saw others, the
    /// plugin may have read either: they are unknown.
    pub(crate) fn client_created(&self, flags: XlaFlags) {
        self.inner.xla_flags.get_or_init(|| {
            let first =
                (self.inner.xla_flags_first_attempt.lock()).unwrap_or_else(|p| p.into_inner());
            match first.as_ref() {
                Some(f) if *f != flags => XlaFlags::Unknown(
                    "XLA_FLAGS changed after a failed client creation, and which the plugin \
                     read is not known"
                        .into(),
                ),
                _ => flags,
            }
        });
    }

    /// The PJRT C API version the plugin implements.
    pub fn version(&self) -> ApiVersion {
        self.inner.api.version()
    }

    /// The PJRT layout rpjrt was built against.
    pub fn rpjrt_layout_version() -> ApiVersion {
        raw::OUR_VERSION
    }

    /// The `struct_size` the plugin put in its `PJRT_Api_Version` (the struct holding
    /// its version, 24 bytes in every PJRT release). A plugin that leaves it wrong (0)
    /// still loads; conformance checks report it.
    pub fn version_struct_size(&self) -> usize {
        self.inner.api.version_struct_size()
    }

    /// Size in bytes of the plugin's function table struct.
    pub fn table_size(&self) -> usize {
        self.inner.api.table_size()
    }

    /// Number of function slots in the plugin's table.
    pub fn table_slots(&self) -> usize {
        self.inner.api.table_slots()
    }

    /// The extensions the plugin offers.
    pub fn extensions(&self) -> &Extensions {
        &self.inner.extensions
    }

    /// The plugin's attributes (`xla_version`, `stablehlo_current_version`, ...).
    pub fn attributes(&self) -> &[(String, Value)] {
        &self.inner.attributes
    }

    /// Why the plugin's `PJRT_Plugin_Attributes` call failed at load, if it did: the
    /// plugin then shows no attributes ([`Plugin::attributes`] is empty), which is not the
    /// same as having none. `None` when it succeeded or the plugin lacks the entry.
    pub fn attributes_error(&self) -> Option<&str> {
        self.inner.attributes_error.as_deref()
    }

    /// One attribute by name.
    pub fn attribute(&self, name: &str) -> Option<&Value> {
        self.inner
            .attributes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }

    /// The newest StableHLO version the plugin accepts, as `[major, minor, patch]`.
    pub fn stablehlo_current_version(&self) -> Option<Vec<i64>> {
        match self.attribute("stablehlo_current_version") {
            Some(Value::Int64List(v)) => Some(v.clone()),
            _ => None,
        }
    }

    /// The oldest StableHLO version the plugin accepts, as `[major, minor, patch]`.
    pub fn stablehlo_minimum_version(&self) -> Option<Vec<i64>> {
        match self.attribute("stablehlo_minimum_version") {
            Some(Value::Int64List(v)) => Some(v.clone()),
            _ => None,
        }
    }

    /// The `xla_version` attribute.
    pub fn xla_version(&self) -> Option<i64> {
        match self.attribute("xla_version") {
            Some(Value::Int64(v)) => Some(*v),
            _ => None,
        }
    }

    /// Whether the plugin offers the XLA FFI extension with a handler-registration entry
    /// (what serving custom calls needs). `Ok(false)` when it has no FFI extension; an
    /// `Unsupported` error when its extension struct is too short for that entry.
    pub fn has_ffi_registration(&self) -> Result<bool> {
        use crate::raw::extension::Ffi;
        let Some(view) = self.inner.api.extension::<Ffi>()? else {
            return Ok(false);
        };
        let handler: Option<rpjrt_sys::PJRT_FFI_Register_Handler> = view
            .read(std::mem::offset_of!(
                rpjrt_sys::PJRT_FFI_Extension,
                register_handler
            ))
            .flatten();
        Ok(handler.is_some())
    }

    /// Whether the plugin's table has a non-null entry with this C name
    /// (e.g. `"PJRT_Buffer_CopyToMemory"`).
    pub fn has_entry(&self, name: &str) -> bool {
        rpjrt_sys::PJRT_API_ENTRIES
            .iter()
            .position(|e| e.name == name)
            .is_some_and(|slot| self.inner.api.has_slot(raw::slot_offset(slot)))
    }
}

impl fmt::Debug for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Plugin({}, PJRT {}, {} slots)",
            self.path().display(),
            self.version(),
            self.table_slots()
        )
    }
}
