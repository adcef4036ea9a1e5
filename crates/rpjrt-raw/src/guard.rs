//! Process-level guards around plugin calls: a plugin used in a forked child.
//!
//! A PJRT plugin runs worker threads; `fork()` copies only the calling thread, so in the
//! child every client inherited from the parent refers to threads that do not exist, and
//! destroying it (or running anything on it) crashes or hangs. The loader registers a
//! `pthread_atfork` child handler that bumps a generation counter; each loaded plugin
//! records the generation it was loaded in, and [`super::Api::invoke`] refuses every call
//! from a later generation with a clear error. Drops ignore that error, so objects
//! inherited across a fork are leaked in the child, never destroyed.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Once;

/// Bumped in the child after every `fork()`.
static GENERATION: AtomicU32 = AtomicU32::new(0);
static REGISTER: Once = Once::new();

extern "C" {
    // POSIX: `int pthread_atfork(void (*prepare)(void), void (*parent)(void),
    // void (*child)(void))`, in libc (which every Rust program on Linux links).
    fn pthread_atfork(
        prepare: Option<extern "C" fn()>,
        parent: Option<extern "C" fn()>,
        child: Option<extern "C" fn()>,
    ) -> i32;
}

extern "C" fn in_child() {
    // Only atomic operations: async-signal-safe, as a fork handler must be.
    GENERATION.fetch_add(1, Ordering::Relaxed);
    for slot in &RESET_IN_CHILD {
        let counter = slot.load(Ordering::Relaxed);
        if !counter.is_null() {
            // SAFETY: only `&'static AtomicUsize`s are stored (`reset_after_fork`).
            unsafe { (*counter).store(0, Ordering::Relaxed) };
        }
    }
}

/// Counters of calls in progress on some thread that [`reset_after_fork`] registered.
static RESET_IN_CHILD: [std::sync::atomic::AtomicPtr<AtomicUsize>; 8] =
    [const { std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()) }; 8];

/// Sets `counter` (calls in progress on other threads, which a process waits for before
/// it ends) to zero in every child forked from now on: `fork()` copies only the calling
/// thread, so the calls it counted are not running in the child, and a wait for them
/// there would never end. At most eight counters; registering one twice is harmless.
pub fn reset_after_fork(counter: &'static AtomicUsize) {
    generation();
    let ptr = counter as *const AtomicUsize as *mut AtomicUsize;
    for slot in &RESET_IN_CHILD {
        match slot.compare_exchange(
            std::ptr::null_mut(),
            ptr,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return,
            Err(existing) if existing == ptr => return,
            Err(_) => {}
        }
    }
    debug_assert!(
        false,
        "more than eight counters registered for reset after fork"
    );
}

/// The current fork generation, registering the fork handler on first use.
pub fn generation() -> u32 {
    REGISTER.call_once(|| {
        // SAFETY: registers a handler that only performs an atomic add; the function lives
        // for the whole program (it is part of this library, which is never unloaded
        // while it is in use by the Rust program that links it statically).
        unsafe {
            pthread_atfork(None, None, Some(in_child));
        }
    });
    GENERATION.load(Ordering::Relaxed)
}

/// Registers `prepare`, `parent` and `child` to run inside every `fork()` of the process,
/// after every handler a language runtime runs around its own fork call (Python's
/// `os.register_at_fork` hooks run before `fork()` is entered): `prepare` just before the
/// process is copied, then `parent` in the parent and `child` in the child, on the forking
/// thread. `child` must do only what is safe in a child of a threaded process (atomics,
/// unlocking).
pub fn on_fork(prepare: extern "C" fn(), parent: extern "C" fn(), child: extern "C" fn()) {
    // SAFETY: registers three functions that live for the whole program (Rust functions
    // of the caller, which never unloads); the C library calls them with no arguments.
    unsafe {
        pthread_atfork(Some(prepare), Some(parent), Some(child));
    }
}

/// Whether this process is a fork of the one in `generation` (cheap: one atomic load).
#[inline]
pub fn forked_since(generation: u32) -> bool {
    GENERATION.load(Ordering::Relaxed) != generation
}

/// The fork generation in which a library was first handed to the system's loader
/// ([`note_library_loaded`]); `u32::MAX` while none has been.
static LOADED_IN: AtomicU32 = AtomicU32::new(u32::MAX);

/// Records that a library was loaded (its initialisers ran, and may have registered exit
/// handlers) in the current fork generation; only the first call counts.
pub(crate) fn note_library_loaded() {
    let now = generation();
    let _ = LOADED_IN.compare_exchange(u32::MAX, now, Ordering::Relaxed, Ordering::Relaxed);
}

/// Whether this process is a fork of one that had loaded a plugin library.
pub fn forked_after_load() -> bool {
    let loaded_in = LOADED_IN.load(Ordering::Relaxed);
    loaded_in != u32::MAX && forked_since(loaded_in)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" {
    // glibc: `int on_exit(void (*function)(int, void *), void *arg)`: like `atexit`, in the
    // same list (run last-registered first), and the function gets the exit status.
    fn on_exit(
        function: extern "C" fn(i32, *mut std::ffi::c_void),
        arg: *mut std::ffi::c_void,
    ) -> i32;
}

/// The exit handler [`end_before_older_exit_handlers`] registers: flushes C stdio (glibc
/// gives a forked child fresh stream locks) and ends the process with `status`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" fn end_with_status(status: i32, _arg: *mut std::ffi::c_void) {
    // SAFETY: `fflush(NULL)` flushes every open C stream; `_exit` ends the process with
    // the status `exit` was given, and touches no memory of ours.
    unsafe {
        libc::fflush(std::ptr::null_mut());
        libc::_exit(status);
    }
}

/// How many exit handlers [`before_fork`] registered in this process and its ancestors
/// (inherited by each child).
static FORK_HANDLERS: AtomicU32 = AtomicU32::new(0);

/// The most exit handlers [`before_fork`] registers in one process (each fork adds one,
/// a few dozen bytes that stay until the process ends).
const MAX_FORK_HANDLERS: u32 = 4096;

/// The exit handler [`before_fork`] registers, with the fork generation of the process
/// that registered it as `arg`: in a descendant of that process forked after a plugin
/// library was loaded, ends it as [`end_with_status`] does; in the registering process
/// itself (a child that forks in turn registers one too), or one that loaded nothing
/// before its fork, it does nothing, so that process's own exit handlers still run.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" fn end_if_forked(status: i32, arg: *mut std::ffi::c_void) {
    let registered_in = arg as usize as u32;
    if forked_since(registered_in) && forked_after_load() {
        end_with_status(status, arg);
    }
}

/// For a process that is about to `fork()` (Python's `os.register_at_fork(before=...)`),
/// once it has loaded a plugin library: registers an exit handler that ends a child of this
/// fork normally exiting (`exit(status)`) with its status, after the exit handlers the child
/// registers itself and before those registered until now, which include the plugin's
/// static destructors. Those wait for the plugin's locks and thread pools; in the child a
/// lock one of the parent's other threads held at the fork (a compile in progress) is held
/// for ever, and the pool's threads do not exist. Python's `multiprocessing` ends its forked
/// children with `os._exit` for the same reason. Returns whether it registered one (at most
/// 4096 per process; never on a C library without `on_exit`).
pub fn before_fork() -> bool {
    if LOADED_IN.load(Ordering::Relaxed) == u32::MAX {
        return false;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if FORK_HANDLERS.load(Ordering::Relaxed) >= MAX_FORK_HANDLERS {
            return false;
        }
        // The generation travels as the pointer's value, never dereferenced.
        let registered_in = generation() as usize as *mut std::ffi::c_void;
        // SAFETY: registers a function of this library (never unloaded while in use) whose
        // argument is a number, not a pointer to anything.
        if unsafe { on_exit(end_if_forked, registered_in) } == 0 {
            FORK_HANDLERS.fetch_add(1, Ordering::Relaxed);
            return true;
        }
    }
    false
}

/// In a process forked from one that had loaded a plugin library, when the fork did not
/// go through [`before_fork`] (a fork from C, or past its bound): registers the handler of
/// [`before_fork`] now, so that the process's normal exit ends, with its status, before the
/// exit handlers registered until now (the plugin's static destructors, and any the child
/// registered itself). Returns whether the exit is covered, by this or by [`before_fork`];
/// nothing is covered elsewhere, or on a C library without `on_exit`. Call it as late as
/// possible in the exit; calling it again adds nothing.
pub fn end_before_older_exit_handlers() -> bool {
    static DONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !forked_after_load() {
        return false;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if FORK_HANDLERS.load(Ordering::Relaxed) > 0 || DONE.swap(true, Ordering::SeqCst) {
            return true;
        }
        // SAFETY: registers a function of this library (never unloaded while in use) that
        // takes no pointer of ours (`arg` is null and unused).
        unsafe { on_exit(end_with_status, std::ptr::null_mut()) == 0 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = &DONE;
        false
    }
}

/// The message for a call refused in a forked child.
pub fn forked_message(loaded_in_pid: u32) -> String {
    format!(
        "this process (pid {}) is a fork of the process that loaded the plugin (pid \
         {loaded_in_pid}); a PJRT plugin's threads do not survive fork, so nothing inherited \
         from the parent can be used or destroyed here (it is leaked instead). Create \
         clients after fork only in processes started fresh (multiprocessing's \"spawn\")",
        std::process::id()
    )
}

extern "C" {
    // POSIX: `sighandler_t signal(int signum, sighandler_t handler)`; SIG_DFL is 0.
    fn signal(signum: i32, handler: usize) -> usize;
}

/// SIGPIPE's number on Linux (and every other Unix rpjrt builds for).
const SIGPIPE: i32 = 13;

/// Restores the default action of SIGPIPE (end the process), which the Rust runtime
/// replaces with "ignore" at start-up (so a write to a closed pipe returns EPIPE and
/// `println!` panics).
pub fn default_sigpipe() {
    // SAFETY: installs the default disposition for SIGPIPE; no handler code of ours runs.
    unsafe {
        signal(SIGPIPE, 0);
    }
}

/// An entry of the PJRT C API, as the guard calls it (every entry takes one pointer to its
/// args struct and returns a `PJRT_Error*`).
pub type RawEntry = unsafe extern "C" fn(*mut std::ffi::c_void) -> *mut std::ffi::c_void;

extern "C" {
    // src/guard.cpp: calls `entry(args)` inside a C++ try block; on an exception sets
    // `*threw` (left untouched otherwise) and keeps its text for `rpjrt_guard_last_what`.
    fn rpjrt_guarded_call(
        entry: RawEntry,
        args: *mut std::ffi::c_void,
        threw: *mut i32,
    ) -> *mut std::ffi::c_void;
    fn rpjrt_guard_last_what() -> *const std::ffi::c_char;
    // src/guard.cpp: `dlopen(path, flags)` inside a C++ try block (as above).
    fn rpjrt_guarded_dlopen(
        path: *const std::ffi::c_char,
        flags: i32,
        threw: *mut i32,
    ) -> *mut std::ffi::c_void;
    // src/guard.cpp: `entry()` (a plugin's `GetPjrtApi`) inside a C++ try block.
    fn rpjrt_guarded_get_api(
        entry: unsafe extern "C" fn() -> *const std::ffi::c_void,
        threw: *mut i32,
    ) -> *const std::ffi::c_void;
    // POSIX: the calling thread's description of its last dlopen/dlsym failure, or null.
    fn dlerror() -> *const std::ffi::c_char;
    #[cfg(test)]
    fn rpjrt_guard_test_throw(args: *mut std::ffi::c_void) -> *mut std::ffi::c_void;
}

/// Calls a plugin entry, catching any C++ exception it lets escape: `Err(what())`.
///
/// # Safety
/// `entry` must be a C function taking one pointer and returning one pointer, and `args`
/// valid for it, as for calling it directly.
#[inline]
pub unsafe fn call(
    entry: RawEntry,
    args: *mut std::ffi::c_void,
) -> std::result::Result<*mut std::ffi::c_void, String> {
    let mut threw = 0i32;
    // SAFETY: the caller vouches for `entry` and `args`; `threw` is a valid int.
    let r = unsafe { rpjrt_guarded_call(entry, args, &mut threw) };
    if threw == 0 {
        return Ok(r);
    }
    Err(last_what())
}

/// `RTLD_LAZY` (resolve functions on first call, as libloading does) with `RTLD_LOCAL`
/// (0: the library's symbols stay its own, so two plugins built from one code base do not
/// resolve into each other).
const RTLD_LAZY: i32 = 1;

/// How opening a library failed.
#[derive(Debug)]
pub enum OpenFailure {
    /// The loader refused it; its message.
    Refused(String),
    /// An initialiser of the library threw a C++ exception; its `what()`.
    Threw(String),
}

/// Opens the shared library at `path` as libloading would (`RTLD_LAZY | RTLD_LOCAL`), but
/// catches a C++ exception that one of its static initialisers throws.
///
/// # Safety
/// Opening a library runs its initialisers (arbitrary code), as any dlopen does.
pub unsafe fn open_library(
    path: &std::path::Path,
) -> std::result::Result<*mut std::ffi::c_void, OpenFailure> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| OpenFailure::Refused("the path contains a NUL byte".into()))?;
    let mut threw = 0i32;
    // SAFETY: `c` is a NUL-terminated path that lives through the call; `threw` is a
    // valid int; what the library's initialisers do is the caller's choice (see above).
    let handle = unsafe { rpjrt_guarded_dlopen(c.as_ptr(), RTLD_LAZY, &mut threw) };
    if threw != 0 {
        return Err(OpenFailure::Threw(last_what()));
    }
    if handle.is_null() {
        // SAFETY: dlerror returns null or a NUL-terminated message of this thread's last
        // loader failure (the dlopen above), copied right away.
        let msg = unsafe { dlerror() };
        let msg = match msg.is_null() {
            true => "the dynamic loader gave no reason".to_string(),
            // SAFETY: non-null: a NUL-terminated string, valid until the next loader call
            // on this thread.
            false => unsafe { std::ffi::CStr::from_ptr(msg) }
                .to_string_lossy()
                .into_owned(),
        };
        return Err(OpenFailure::Refused(msg));
    }
    Ok(handle)
}

/// A library [`open_checked_library`] opened. Never closed: a library's code may be in
/// use by threads it started while it loaded, long after rpjrt is done with it.
#[derive(Debug)]
pub struct CheckedLibrary {
    /// The loader's handle.
    pub handle: *mut std::ffi::c_void,
    /// The file that was checked and handed to the loader: the path given, or for a bare
    /// name the first usable file of the loader's search (the bare name itself when that
    /// search found nothing where rpjrt looks, and the loader searched on its own).
    pub path: std::path::PathBuf,
    /// `path` as text, kept for the life of the process: what [`watch_exit_as`] names in
    /// calls into the library.
    pub label: &'static str,
}

/// Why [`open_checked_library`] did not open a library.
#[derive(Debug)]
pub enum CheckedOpenError {
    /// The file at `path` cannot be a library this process loads (missing, unreadable, a
    /// FIFO, a device or a directory, not ELF, truncated, for another machine, or refused
    /// by the caller's own check): `reason` says which. The loader was not called.
    Unusable {
        /// The file that was checked.
        path: std::path::PathBuf,
        /// Why it cannot be loaded, in words.
        reason: String,
    },
    /// The loader refused the file at `path`: its message.
    Refused {
        /// The file handed to the loader.
        path: std::path::PathBuf,
        /// The loader's message (`dlerror`).
        message: String,
    },
}

impl CheckedOpenError {
    /// The file the error is about.
    pub fn path(&self) -> &std::path::Path {
        match self {
            CheckedOpenError::Unusable { path, .. } | CheckedOpenError::Refused { path, .. } => {
                path
            }
        }
    }

    /// Why, in words, naming the file when the loader's search found it for the bare name
    /// `given` (for a path, the caller names it).
    pub fn reason_for(&self, given: &std::path::Path) -> String {
        let why = match self {
            CheckedOpenError::Unusable { reason, .. } => reason.clone(),
            CheckedOpenError::Refused { message, .. } => message.clone(),
        };
        if self.path() == given {
            return why;
        }
        format!(
            "the loader's search (LD_LIBRARY_PATH, its cache, the system directories) finds \
             {} first, and {why}; remove that file or change LD_LIBRARY_PATH",
            self.path().display()
        )
    }
}

/// The name of a library as exit reports give it: one string per path for the whole
/// process, kept in a table (so loading the same library again adds nothing, and the
/// strings stay reachable rather than leaked).
fn library_label(path: &std::path::Path) -> &'static str {
    static LABELS: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let text = path.display().to_string();
    let mut labels = LABELS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(known) = labels.iter().find(|l| **l == text) {
        return known;
    }
    let label: &'static str = Box::leak(text.into_boxed_str());
    labels.push(label);
    label
}

/// The one way rpjrt hands a foreign library to the system's loader (PJRT plugins, the
/// CUDA driver, the driver probe). `name` is a path, or a bare file name searched as the
/// loader does ([`crate::libraries::dlopen_search`]). In order:
///
/// 1. the file is checked before the loader sees it ([`crate::elf::check_library_file`]):
///    the loader trusts a file's headers (a truncated copy raises SIGBUS inside it) and
///    waits for a writer on a FIFO, holding its lock; for a bare name every file the
///    search passes on the way is checked too (a file for another machine is passed over,
///    as the loader does);
/// 2. `vet` (the caller's own check of the file, e.g. that an entry point is code) runs;
/// 3. the file is opened with [`open_library`], counted in [`crate::loads_in_loader`], with
///    [`watch_exit_as`] naming `kind` and the file: a library whose initialisers call
///    `exit()` ends the process with a report and a non-zero status instead of a silent
///    success. An initialiser that throws a C++ exception leaves the loader locked: the
///    process is ended with a report (abort).
///
/// # Safety
/// Opening a library runs its initialisers (arbitrary code), as any dlopen does: the
/// caller chose `name` as a library of that `kind`.
pub unsafe fn open_checked_library(
    name: &std::path::Path,
    kind: &'static str,
    vet: impl FnOnce(&std::path::Path) -> std::result::Result<(), String>,
) -> std::result::Result<CheckedLibrary, CheckedOpenError> {
    let path = checked_file(name)?;
    vet(&path).map_err(|reason| CheckedOpenError::Unusable {
        path: path.clone(),
        reason,
    })?;
    // Named in the report of a library that calls exit() while it loads, and in later
    // calls into it (never unloaded, so neither is its name).
    let label = library_label(&path);
    arm_exit_watch();
    let opened = {
        let _in_loader = crate::InLoader::enter();
        let _watch = watch_exit_as(
            kind,
            label,
            "its library initialisers (while dlopen loaded it)",
        );
        // SAFETY: the caller chose this library (see above); the file was checked.
        unsafe { open_library(&path) }
    };
    if !matches!(opened, Err(OpenFailure::Refused(_))) {
        // Its initialisers ran: exit handlers of its own may be registered from here on.
        note_library_loaded();
        // Re-armed so the watch runs before those handlers (bounded per process).
        arm_exit_watch();
    }
    match opened {
        Ok(handle) => Ok(CheckedLibrary {
            handle,
            path,
            label,
        }),
        Err(OpenFailure::Refused(message)) => Err(CheckedOpenError::Refused { path, message }),
        Err(OpenFailure::Threw(what)) => initialiser_threw(kind, &path, &what),
    }
}

/// The file [`open_checked_library`] hands to the loader for `name`, checked.
fn checked_file(
    name: &std::path::Path,
) -> std::result::Result<std::path::PathBuf, CheckedOpenError> {
    use std::os::unix::ffi::OsStrExt as _;
    let unusable = |path: &std::path::Path, reason: String| CheckedOpenError::Unusable {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = name.as_os_str().as_bytes();
    if bytes.is_empty() {
        return Err(unusable(name, "the library name is empty".into()));
    }
    if bytes.contains(&b'/') {
        crate::elf::check_library_file(name).map_err(|r| unusable(name, r))?;
        return Ok(name.to_path_buf());
    }
    let Some(bare) = name.to_str() else {
        // Not UTF-8: rpjrt's search cannot name it; the loader searches on its own.
        return Ok(name.to_path_buf());
    };
    for (candidate, choosable) in crate::libraries::dlopen_search(bare) {
        // What the loader's open() would find: a missing or unreachable entry is passed
        // over, by the loader too.
        let Ok(meta) = std::fs::metadata(&candidate) else {
            continue;
        };
        if !choosable {
            if let Some(kind) = crate::files::kind_of(&meta) {
                return Err(unusable(
                    &candidate,
                    format!("it is {kind}, not a shared library file"),
                ));
            }
            continue;
        }
        match crate::elf::check_library_file(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(_) if crate::elf::built_for_another_machine(&candidate) => continue,
            Err(reason) => return Err(unusable(&candidate, reason)),
        }
    }
    // Nowhere rpjrt looks: the loader searches on its own (and says so, most likely).
    Ok(name.to_path_buf())
}

/// Ends the process after a library's initialiser threw a C++ exception inside the loader.
#[cold]
fn initialiser_threw(kind: &str, path: &std::path::Path, what: &str) -> ! {
    eprintln!(
        "rpjrt: fatal: {kind} {} threw a C++ exception from its library initialisers while \
         it was being loaded: {}. The dynamic loader cannot recover from that (it stays \
         locked, so no other library could be loaded in this process), so the process ends \
         here. This is the library's defect: some plugins do this when several processes \
         load them at the same time (jax-tt-plugin unpacks files into $TMPDIR then); retry, \
         or load it in one process first.",
        path.display(),
        crate::summarize_exception(what)
    );
    std::process::abort()
}

/// Calls a plugin's `GetPjrtApi`, catching a C++ exception it throws: `Err(what())`.
///
/// # Safety
/// `entry` must be the library's `GetPjrtApi` (no arguments, returns the table).
pub unsafe fn get_api(
    entry: unsafe extern "C" fn() -> *const std::ffi::c_void,
) -> std::result::Result<*const std::ffi::c_void, String> {
    let mut threw = 0i32;
    // SAFETY: the caller vouches for `entry`; `threw` is a valid int.
    let r = unsafe { rpjrt_guarded_get_api(entry, &mut threw) };
    if threw == 0 {
        return Ok(r);
    }
    Err(last_what())
}

#[cold]
fn last_what() -> String {
    // SAFETY: the guard returns a NUL-terminated string owned by this thread, valid until
    // the next caught exception on this thread; it is copied right away.
    unsafe { std::ffi::CStr::from_ptr(rpjrt_guard_last_what()) }
        .to_string_lossy()
        .into_owned()
}

/// A trivial entry for measuring the guard: returns its argument.
#[cfg(feature = "bench")]
extern "C" fn echo(args: *mut std::ffi::c_void) -> *mut std::ffi::c_void {
    std::hint::black_box(args)
}

/// Times `iters` direct calls and `iters` guarded calls of a trivial `extern "C"` entry,
/// interleaved in rounds so machine noise hits both alike: `(direct_ns, guarded_ns)` per
/// call, the best round of each. What the guard adds to each plugin call is the difference.
#[cfg(feature = "bench")]
pub fn guard_overhead_ns(iters: usize) -> (f64, f64) {
    use std::time::Instant;
    let entry: RawEntry = echo;
    let entry = std::hint::black_box(entry);
    let (mut best_direct, mut best_guarded) = (f64::MAX, f64::MAX);
    for _ in 0..21 {
        let t = Instant::now();
        for i in 0..iters {
            // SAFETY: `echo` accepts any pointer and only returns it.
            let r = unsafe { entry(i as *mut std::ffi::c_void) };
            std::hint::black_box(r);
        }
        best_direct = best_direct.min(t.elapsed().as_nanos() as f64 / iters as f64);
        let t = Instant::now();
        for i in 0..iters {
            // SAFETY: as above; the guard calls `echo` the same way.
            let r = unsafe { call(entry, i as *mut std::ffi::c_void) };
            let _ = std::hint::black_box(r);
        }
        best_guarded = best_guarded.min(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    (best_direct, best_guarded)
}

/// What a library was loaded as (`"the PJRT plugin"`), its path, and the step rpjrt was in
/// when a thread entered it: what the exit handler of [`watch_exit`] names.
type InPlugin = Option<(&'static str, &'static str, &'static str, u32)>;

/// What [`watch_exit`] calls a PJRT plugin library in its report.
pub const PJRT_PLUGIN: &str = "the PJRT plugin";

thread_local! {
    /// The plugin call this thread is inside (library, step, fork generation), if any.
    static IN_PLUGIN: std::cell::Cell<InPlugin> = const { std::cell::Cell::new(None) };
}

/// How many exit handlers [`watch_exit`] registered (at most [`MAX_EXIT_WATCHERS`]).
static EXIT_WATCHERS: AtomicU32 = AtomicU32::new(0);

/// The most exit handlers [`watch_exit`] registers in one process (each a few dozen bytes
/// kept until the process ends). Every one does the same check: the latest runs first.
const MAX_EXIT_WATCHERS: u32 = 256;

/// Marks this thread as inside `plugin` at `step` while the value lives (restoring what it
/// was inside before, so calls nest): see [`watch_exit`].
pub struct InPluginCall(InPlugin);

impl Drop for InPluginCall {
    fn drop(&mut self) {
        IN_PLUGIN.with(|c| c.set(self.0));
    }
}

/// Marks this thread as inside the plugin library `plugin` at `step` (an entry's name,
/// `"dlopen"`, `"GetPjrtApi"`) while the returned value lives. A plugin that calls
/// `exit()` there (giving up in its own way, often with status 0) would end the process
/// as if the program had finished, its next line never run and nothing said: an exit
/// handler (registered once, cheaply, by [`arm_exit_watch`]) sees the mark on the exiting
/// thread, says on standard error which plugin exited at which step, and ends the process
/// with a non-zero status (the plugin's own, or 1 for 0). An exit from another thread, a
/// forked child's, or one outside plugin calls is left alone.
#[inline]
pub fn watch_exit(plugin: &'static str, step: &'static str) -> InPluginCall {
    watch_exit_as(PJRT_PLUGIN, plugin, step)
}

/// [`watch_exit`] for any library rpjrt loads and calls into: `kind` says what it is in
/// the report (`"the CUDA driver library"`), `library` its path, `step` the call (`"cuInit"`).
/// The report ends the process as [`watch_exit`] says; [`arm_exit_watch`] must have run
/// once ([`open_checked_library`] does).
#[inline]
pub fn watch_exit_as(
    kind: &'static str,
    library: &'static str,
    step: &'static str,
) -> InPluginCall {
    let now = Some((kind, library, step, GENERATION.load(Ordering::Relaxed)));
    InPluginCall(IN_PLUGIN.with(|c| c.replace(now)))
}

/// Registers the exit handler of [`watch_exit`], so that it runs before every exit handler
/// registered until now (a library's static destructors among them, which may wait on
/// the state the plugin left): once per call that loads or creates something (a bounded
/// number of times per process), and at least once before the first plugin call.
pub fn arm_exit_watch() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if EXIT_WATCHERS.fetch_add(1, Ordering::Relaxed) >= MAX_EXIT_WATCHERS {
            EXIT_WATCHERS.store(MAX_EXIT_WATCHERS, Ordering::Relaxed);
            return;
        }
        generation();
        // SAFETY: registers a function of this library (never unloaded while in use) that
        // takes no pointer of ours (`arg` is null and unused).
        unsafe {
            on_exit(exit_in_plugin, std::ptr::null_mut());
        }
    }
}

/// The exit handler of [`watch_exit`].
#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" fn exit_in_plugin(status: i32, _arg: *mut std::ffi::c_void) {
    let Some((kind, library, step, generation)) = IN_PLUGIN.with(|c| c.get()) else {
        return;
    };
    if forked_since(generation) {
        return; // a child the plugin forked, ending as it means to
    }
    let code = if status == 0 { 1 } else { status };
    let status_text = status.to_string();
    let code_text = code.to_string();
    let parts: [&str; 11] = [
        "rpjrt: fatal: ",
        kind,
        " ",
        library,
        " called exit(",
        &status_text,
        ") inside ",
        step,
        ", which would have ended this program as if it had finished, with nothing said; \
         it ends with exit status ",
        &code_text,
        " instead. This is the library's way of giving up: its own messages above (if any) \
         say why; run with its logging turned up to learn more.\n",
    ];
    for p in parts {
        // SAFETY: writes the bytes of a live string to standard error; a failed write
        // only loses the message.
        unsafe {
            libc::write(2, p.as_ptr().cast(), p.len());
        }
    }
    // SAFETY: as in `end_with_status`.
    unsafe {
        libc::fflush(std::ptr::null_mut());
        libc::_exit(code);
    }
}

/// Whether the `len` bytes at `addr` can be read in this process, asked of the kernel
/// (which reports an unmapped or unreadable address as an error instead of a fault):
/// `Some(false)` when they cannot, `None` when the kernel would not say. Memory a plugin
/// hands over (its function table, the extension chain) is checked with it before it is
/// read.
pub fn readable(addr: usize, len: usize) -> Option<bool> {
    if len == 0 {
        return Some(true);
    }
    if addr.checked_add(len).is_none() {
        return Some(false);
    }
    let mut buf = [0u8; 4096];
    let mut at = 0usize;
    while at < len {
        let n = (len - at).min(buf.len());
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: n,
        };
        let remote = libc::iovec {
            iov_base: (addr + at) as *mut std::ffi::c_void,
            iov_len: n,
        };
        // SAFETY: copies from this process's own address space into `buf`, which has room
        // for `n` bytes; the kernel checks the source range and fails (EFAULT) or stops
        // short rather than fault.
        let got = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
        if got < 0 {
            let e = std::io::Error::last_os_error().raw_os_error();
            return match e {
                Some(libc::EFAULT) => Some(false),
                _ => readable_by_pipe(addr + at, len - at),
            };
        }
        if got as usize != n {
            return Some(false);
        }
        at += n;
    }
    Some(true)
}

/// [`readable`] where `process_vm_readv` is not allowed (a sandbox): a `write` to a pipe
/// fails with EFAULT for an unreadable source, too.
fn readable_by_pipe(addr: usize, len: usize) -> Option<bool> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` has room for the two descriptors `pipe2` writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return None;
    }
    let mut result = Some(true);
    let mut at = 0usize;
    let mut sink = [0u8; 4096];
    while at < len {
        let n = (len - at).min(sink.len());
        // SAFETY: the kernel reads the source range itself and reports EFAULT for one
        // that is not readable; nothing of ours is read.
        let w = unsafe { libc::write(fds[1], (addr + at) as *const std::ffi::c_void, n) };
        if w <= 0 {
            let e = std::io::Error::last_os_error().raw_os_error();
            result = if e == Some(libc::EFAULT) {
                Some(false)
            } else {
                None
            };
            break;
        }
        // SAFETY: drains what was written into `sink`, which has room for it.
        unsafe { libc::read(fds[0], sink.as_mut_ptr().cast(), w as usize) };
        at += w as usize;
    }
    // SAFETY: closes the two descriptors opened above, once each.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    result
}

/// Whether `addr` lies in an executable mapping of this process (`/proc/self/maps`);
/// `None` when the maps cannot be read. A plugin's `GetPjrtApi` is checked with it before
/// it is called: jumping to data ends the process with SIGSEGV.
pub fn executable(addr: usize) -> Option<bool> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        let Some((lo, hi)) = range.split_once('-') else {
            continue;
        };
        let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        else {
            continue;
        };
        if lo <= addr && addr < hi {
            return Some(perms.as_bytes().get(2) == Some(&b'x'));
        }
    }
    Some(false)
}

#[cfg(test)]
mod tests {
    #[test]
    fn escaped_exceptions_become_errors() {
        // SAFETY: the test entry takes any pointer (it only compares it with null).
        let r = unsafe {
            super::call(
                super::rpjrt_guard_test_throw,
                std::ptr::NonNull::<u8>::dangling().as_ptr().cast(),
            )
        };
        assert_eq!(r, Err("vector::_M_default_append".to_string()));
        // SAFETY: as above.
        let r = unsafe { super::call(super::rpjrt_guard_test_throw, std::ptr::null_mut()) };
        assert!(r.unwrap_err().contains("not a std::exception"));
    }

    /// `call_guarded` (the path of extension and profiler entries, which called the
    /// plugin directly and aborted on an exception) turns one into an INTERNAL error.
    #[test]
    fn typed_entries_are_guarded_too() {
        let entry: super::RawEntry = super::rpjrt_guard_test_throw;
        // SAFETY: one pointer in, one out: the same ABI with typed pointees.
        let throws = unsafe {
            std::mem::transmute::<super::RawEntry, unsafe extern "C" fn(*mut u8) -> *mut u8>(entry)
        };
        let mut byte = 0u8;
        // SAFETY: `throws` takes any pointer; `byte` is live for the call.
        let r = unsafe { crate::call_guarded("PJRT_Test_Entry", throws, &mut byte) };
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("PJRT_Test_Entry") && e.contains("threw a C++ exception"),
            "{e}"
        );
        assert!(e.contains("vector::_M_default_append"), "{e}");
    }
}
