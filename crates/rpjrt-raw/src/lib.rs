//! The unsafe layer of rpjrt: the only place where it touches the PJRT C ABI. Most users
//! want the `rpjrt` crate, the safe client built on this one; this crate's API follows the
//! plugins' contracts and changes with `rpjrt`.
//!
//! No C pointer leaves this crate. Callers see owning handles, one per PJRT object
//! ([`client::Client`], [`buffer::Buffer`], [`executable::Loaded`],
//! [`executable::Executable`], [`event::Event`]), each holding a private non-null pointer and
//! the plugin's table and destroying the C object on drop, plus device and memory views
//! ([`device::DeviceRef`], [`device::MemoryRef`]) that are only ever used through their live
//! client. The C entries are methods on these handles; a function whose precondition it
//! cannot check itself is an `unsafe fn` with the contract written on it.
//!
//! Every call into the plugin goes through [`Api::invoke`] (via the `pjrt!` macro), which
//! checks that the plugin's function table has the slot and that it is non-null, and turns
//! a returned `PJRT_Error*` into an [`Error`].
//!
//! Besides `rpjrt-sys` (the declarations), the crate depends on nothing of rpjrt: it takes
//! and returns plain slices, integers, strings and its own small types (the error type
//! [`error::Error`] and the out-of-memory report [`oom::OomReport`] among them), and the
//! safe layer converts.
#![warn(missing_docs)]
// C `int`/`size_t` fields are cast explicitly so the code stays right where they differ.
#![allow(clippy::unnecessary_cast)]

use std::ffi::c_void;
use std::mem::{offset_of, size_of, MaybeUninit};
use std::path::{Path, PathBuf};

use rpjrt_sys as sys;

use crate::error::{ApiVersion, Code, Error, Result};

pub mod error;
pub mod oom;

pub mod aot;
pub mod buffer;
pub mod bytecode;
pub mod callback;
pub mod capture;
pub mod client;
pub mod cuda;
pub mod device;
pub mod dlpack;
pub mod dtype;
pub mod elf;
pub mod event;
pub mod executable;
pub mod execute;
pub mod extension;
pub mod external;
pub mod ffi;
pub mod files;
#[cfg(feature = "bench")]
pub mod floor;
pub mod fpmode;
pub mod guard;
pub mod hostmem;
pub mod inline;
pub mod kv;
pub mod layout;
pub mod libraries;
pub mod malloc;
pub mod memstats;
pub mod prepared;
pub mod process;
pub mod profiler;
pub mod stdio;
pub mod tpu;
pub mod transfer;
pub mod triton;
pub mod util;
pub mod value;

/// Calls table entry `$entry` with `$args` (a `&mut` to its args struct).
///
/// Expands to an unsafe call: the caller promises that every pointer in the args struct is
/// valid for the duration of the call, as the C API documents for that entry.
macro_rules! pjrt {
    ($api:expr, $entry:ident, $args:expr) => {
        $api.invoke(
            ::std::mem::offset_of!(::rpjrt_sys::PJRT_Api, $entry),
            stringify!($entry),
            $args,
            // Runs inside the caller's unsafe block; `invoke` calls it only after checking
            // that the plugin's table covers this slot, so the read stays in bounds.
            |p| ::std::ptr::addr_of!((*p).$entry).read(),
        )
    };
}
pub(crate) use pjrt;

/// The function pointer of table entry `$entry`, after the same checks `pjrt!` makes:
/// `Err(Unsupported)` when the plugin's table is too short or the slot is null.
#[cfg(feature = "bench")]
macro_rules! pjrt_fn {
    ($api:expr, $entry:ident) => {
        $api.slot(
            ::std::mem::offset_of!(::rpjrt_sys::PJRT_Api, $entry),
            stringify!($entry),
            |p| {
                // SAFETY: `slot` calls this only after checking that the plugin's table
                // covers this slot, so the read stays inside the table.
                unsafe { ::std::ptr::addr_of!((*p).$entry).read() }
            },
        )
    };
}
#[cfg(feature = "bench")]
pub(crate) use pjrt_fn;

/// An args struct of the C API: a `#[repr(C)]` struct whose first field is `size_t
/// struct_size` and for which all-zero bytes are a valid (empty) value.
///
/// # Safety
/// Implementors must be such structs, and `STRUCT_SIZE` must be the header's size.
pub unsafe trait Args: Sized {
    /// The header's STRUCT_SIZE for this struct.
    const STRUCT_SIZE: usize;

    /// A zeroed value with `struct_size` set.
    fn new() -> Self {
        let mut v = MaybeUninit::<Self>::zeroed();
        // SAFETY: the trait's contract says the struct starts with a `usize` and that all-zero
        // bytes are a valid value, so writing the first word and assuming init is sound.
        unsafe {
            v.as_mut_ptr().cast::<usize>().write(Self::STRUCT_SIZE);
            v.assume_init()
        }
    }
}

/// Whether the table entry at `offset` is one that a program's steady loop calls (execute,
/// readiness, buffer release, host transfers): those calls skip the exit watch
/// (`guard::watch_exit`), which every other call (loading, creating, compiling) keeps.
#[inline(always)]
const fn fast_path_entry(offset: usize) -> bool {
    use sys::PJRT_Api as A;
    let fast = [
        offset_of!(A, PJRT_LoadedExecutable_Execute),
        offset_of!(A, PJRT_Event_IsReady),
        offset_of!(A, PJRT_Event_Await),
        offset_of!(A, PJRT_Event_Error),
        offset_of!(A, PJRT_Event_Destroy),
        offset_of!(A, PJRT_Event_OnReady),
        offset_of!(A, PJRT_Buffer_ReadyEvent),
        offset_of!(A, PJRT_Buffer_Destroy),
        offset_of!(A, PJRT_Buffer_ToHostBuffer),
        offset_of!(A, PJRT_Client_BufferFromHostBuffer),
    ];
    let mut i = 0;
    while i < fast.len() {
        if fast[i] == offset {
            return true;
        }
        i += 1;
    }
    false
}

macro_rules! args_types {
    ($($t:ident => $size:ident),* $(,)?) => {
        $(
            // SAFETY: every listed type is a C API args struct declared in rpjrt-sys; each
            // begins with `struct_size` and contains only integers, raw pointers, bools and
            // nullable function pointers, for which zero is valid.
            unsafe impl Args for sys::$t { const STRUCT_SIZE: usize = sys::$size; }
        )*
    };
}
pub(crate) use args_types;

args_types! {
    PJRT_Error_Destroy_Args => PJRT_Error_Destroy_Args_STRUCT_SIZE,
    PJRT_Error_Message_Args => PJRT_Error_Message_Args_STRUCT_SIZE,
    PJRT_Error_GetCode_Args => PJRT_Error_GetCode_Args_STRUCT_SIZE,
    PJRT_Plugin_Initialize_Args => PJRT_Plugin_Initialize_Args_STRUCT_SIZE,
    PJRT_Plugin_Attributes_Args => PJRT_Plugin_Attributes_Args_STRUCT_SIZE,
    PJRT_NamedValue => PJRT_NamedValue_STRUCT_SIZE,
}

/// The loaded function table of one plugin.
pub struct Api {
    ptr: *const sys::PJRT_Api,
    /// The part of the table rpjrt uses: `claimed_table_size`, clamped to the slots that
    /// existed at the plugin's version.
    table_size: usize,
    /// `PJRT_Api.struct_size` as the plugin set it (may be larger than `table_size`, and
    /// need not be the header plus whole slots).
    claimed_table_size: usize,
    version: ApiVersion,
    /// `pjrt_api_version.struct_size` as the plugin set it.
    version_struct_size: usize,
    /// The fork generation (see `guard`) and process the plugin was loaded in.
    fork_generation: u32,
    /// The library's path, as an exit inside one of its calls is reported
    /// ([`guard::watch_exit`]).
    plugin: &'static str,
    loaded_in_pid: u32,
    /// The extension chain, walked once at load: (type id, struct size, address).
    extensions: Vec<extension::Found>,
    /// The empty execute context that executions get once FFI handlers exist and the
    /// caller gave none (made on first use; `None` if the plugin could not make one).
    default_context: std::sync::OnceLock<Option<ffi::ExecuteContextPtr>>,
}

// SAFETY: the table is immutable after GetPjrtApi returns, and the library is never unloaded,
// so the pointer may be shared and used from any thread; the C API is thread-safe by contract.
unsafe impl Send for Api {}
// SAFETY: see `Send`; the only interior mutability is a `OnceLock` of a Send + Sync value.
unsafe impl Sync for Api {}

/// Size of the `PJRT_Api` header fields before the first function slot.
const TABLE_HEADER: usize = offset_of!(sys::PJRT_Api, PJRT_Error_Destroy);

/// The layout rpjrt-sys declares.
pub const OUR_VERSION: ApiVersion = ApiVersion {
    major: sys::PJRT_API_MAJOR as i32,
    minor: sys::PJRT_API_MINOR as i32,
};

/// A C++ exception's text cut to what a reader needs, the cause first: the backtrace
/// frames (lines from `backtrace:` on, and lines that are only a frame address) are
/// dropped and counted, and an `info:` section (the human explanation some runtimes put
/// after the failed assertion) comes before the assertion. Short plain texts are unchanged.
pub fn summarize_exception(what: &str) -> String {
    let is_frame = |l: &str| {
        let t = l.trim_start();
        t.starts_with("--- ") || t.starts_with("#") && t.contains("0x") || t.contains("(+0x")
    };
    let mut kept = Vec::new();
    let mut dropped = 0usize;
    let mut in_backtrace = false;
    for line in what.lines() {
        let t = line.trim();
        if t.eq_ignore_ascii_case("backtrace:") || t.eq_ignore_ascii_case("stack trace:") {
            in_backtrace = true;
            continue;
        }
        if in_backtrace || is_frame(line) {
            dropped += 1;
            continue;
        }
        if !t.is_empty() {
            kept.push(t);
        }
    }
    // "ASSERTION\ninfo:\nCAUSE" becomes "CAUSE (ASSERTION)".
    let text = match kept.iter().position(|l| l.eq_ignore_ascii_case("info:")) {
        Some(i) if i + 1 < kept.len() => {
            format!("{} ({})", kept[i + 1..].join("; "), kept[..i].join("; "))
        }
        _ => kept.join("; "),
    };
    let mut text = if text.chars().count() > 600 {
        format!("{}...", text.chars().take(600).collect::<String>())
    } else {
        text
    };
    if dropped > 0 {
        text.push_str(&format!("; {dropped} backtrace lines left out"));
    }
    text
}

/// Plugin libraries being loaded by the system's loader (`dlopen`) right now, process-wide.
static IN_LOADER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Counts one load inside the loader while it lives.
struct InLoader;

impl InLoader {
    fn enter() -> InLoader {
        static REGISTER: std::sync::Once = std::sync::Once::new();
        // A forked child does not run the parent's load (and glibc gives the child a fresh
        // loader lock).
        REGISTER.call_once(|| guard::reset_after_fork(&IN_LOADER));
        IN_LOADER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        InLoader
    }
}

impl Drop for InLoader {
    fn drop(&mut self) {
        IN_LOADER.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// How many plugin libraries [`load`] is handing to the system's loader right now. One that
/// never comes back (a library whose initializer hangs) holds the loader's lock for good,
/// and a normal process exit, which takes that lock to run the libraries' finalizers, then
/// waits forever.
pub fn loads_in_loader() -> usize {
    IN_LOADER.load(std::sync::atomic::Ordering::SeqCst)
}

/// What a plugin's `PJRT_Api.struct_size` said, and how much of it rpjrt uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableClaim {
    /// `PJRT_Api.struct_size` as the plugin set it.
    pub claimed: usize,
    /// The bytes rpjrt reads: `claimed`, clamped to the header plus the slots that
    /// existed at the plugin's PJRT version ([`Api::table_size`]).
    pub used: usize,
}

/// The table sizes [`load`] read, by canonical library path (kept for code that holds a
/// higher-level plugin handle rather than the [`Api`]).
static CLAIMS: std::sync::Mutex<Vec<(PathBuf, TableClaim)>> = std::sync::Mutex::new(Vec::new());

fn record_claim(path: &Path, claim: TableClaim) {
    let Ok(canonical) = canonical(path) else {
        return;
    };
    let mut claims = CLAIMS.lock().unwrap_or_else(|p| p.into_inner());
    match claims.iter_mut().find(|(p, _)| *p == canonical) {
        Some(entry) => entry.1 = claim,
        None => claims.push((canonical, claim)),
    }
}

/// The table size the plugin library at `path` claimed when [`load`] read it in this
/// process, and the part rpjrt uses; `None` if [`load`] has not read that library (or
/// refused it before reading its size). Lets `rpjrt info` and the conformance harness
/// report a `PJRT_Api.struct_size` that the loader clamped.
pub fn table_claim(path: &Path) -> Option<TableClaim> {
    let canonical = canonical(path).ok()?;
    CLAIMS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .find(|(p, _)| *p == canonical)
        .map(|(_, c)| *c)
}

/// Loads a plugin library, checks it is a usable PJRT plugin, and returns its table.
/// The library is never unloaded.
pub fn load(path: &Path) -> Result<Api> {
    let fail = |reason: String| Error::PluginLoad {
        path: path.to_path_buf(),
        reason,
    };
    // The shared path of every library rpjrt loads: the file is checked first (dlopen
    // trusts its headers: a truncated copy raises SIGBUS inside it; it blocks on a FIFO),
    // then opened guarded, counted and watched for exit() (`guard::open_checked_library`).
    // A `GetPjrtApi` that is data, not code, would be jumped to (SIGSEGV): refused before
    // anything of the library runs.
    let vet = |file: &Path| match elf::defined_symbol(file, "GetPjrtApi") {
        Ok(Some(elf::SymbolKind::NotCode(what))) => Err(format!(
            "it exports GetPjrtApi, but as {what}, not a function, so it is not a PJRT plugin \
             (a PJRT plugin defines `const PJRT_Api* GetPjrtApi(void)`)"
        )),
        _ => Ok(()),
    };
    // SAFETY: loading a library runs its initialisers. That is what loading a plugin
    // means; the user chose this path as a PJRT plugin.
    let opened = unsafe { guard::open_checked_library(path, guard::PJRT_PLUGIN, vet) };
    let (handle, plugin) = match opened {
        Ok(lib) => (lib.handle, lib.label),
        Err(e @ guard::CheckedOpenError::Refused { .. }) => {
            return Err(fail(format!(
                "it is not a loadable shared library ({})",
                e.reason_for(path)
            )))
        }
        Err(e) => return Err(fail(e.reason_for(path))),
    };
    // SAFETY: a handle dlopen just returned, owned from here by `lib`. Never unloaded,
    // whatever follows: handles from a plugin may outlive every rpjrt object, a library
    // whose entry point threw may be in any state, and a library that is no plugin at all
    // may have started threads or registered thread-exit functions while it loaded (code
    // that unloading would pull from under them: a crash later, anywhere).
    let lib = std::mem::ManuallyDrop::new(libloading::Library::from(unsafe {
        libloading::os::unix::Library::from_raw(handle)
    }));
    // SAFETY: `GetPjrtApi` is declared by the C API as `const PJRT_Api* GetPjrtApi(void)`.
    let get: libloading::Symbol<unsafe extern "C" fn() -> *const std::ffi::c_void> = unsafe {
        lib.get(b"GetPjrtApi\0")
    }
    .map_err(|_| fail("it does not export GetPjrtApi, so it is not a PJRT plugin".into()))?;
    // What the file said can be forged (a data object typed as a function) or come from
    // another library: the address itself must be code.
    let entry = *get as usize;
    if guard::executable(entry) == Some(false) {
        return Err(fail(format!(
            "its GetPjrtApi (at {entry:#x}) is not in executable memory (it is data, not a \
             function), so it is not a PJRT plugin"
        )));
    }
    let got = {
        let _watch = guard::watch_exit(plugin, "GetPjrtApi");
        // SAFETY: the plugin's entry point, which takes no arguments, called inside the
        // exception guard.
        unsafe { guard::get_api(*get) }
    };
    let ptr = got
        .map_err(|what| {
            fail(format!(
                "its GetPjrtApi threw a C++ exception instead of returning its table ({})",
                summarize_exception(&what)
            ))
        })?
        .cast::<sys::PJRT_Api>();
    if ptr.is_null() {
        return Err(fail("GetPjrtApi returned a null table".into()));
    }
    // The table is the plugin's memory, read by rpjrt: each part is checked readable
    // (asked of the kernel, which reports rather than faults) before it is read.
    let unreadable = |what: &str, len: usize| {
        fail(format!(
            "its GetPjrtApi returned a table at {:#x} whose {what} ({len} bytes) is not \
             readable memory (a wild or dangling pointer, or a struct_size larger than the \
             table), so it is not a usable PJRT plugin",
            ptr as usize
        ))
    };
    if guard::readable(ptr as usize, size_of::<usize>()) == Some(false) {
        return Err(unreadable("struct_size", size_of::<usize>()));
    }
    // SAFETY: a PJRT_Api starts with `size_t struct_size`, readable (checked above).
    let table_size = unsafe { ptr.cast::<usize>().read() };

    if table_size < TABLE_HEADER {
        return Err(fail(format!(
            "its PJRT_Api struct is only {table_size} bytes, too small to hold a version"
        )));
    }
    if guard::readable(ptr as usize, TABLE_HEADER) == Some(false) {
        return Err(unreadable(
            &format!("header (struct_size {table_size})"),
            TABLE_HEADER,
        ));
    }
    // SAFETY: the struct covers the header (checked above), so the version is inside it.
    let v = unsafe { std::ptr::addr_of!((*ptr).pjrt_api_version).read() };
    let version = ApiVersion {
        major: v.major_version as i32,
        minor: v.minor_version as i32,
    };
    if version.major != OUR_VERSION.major {
        return Err(fail(format!(
            "it implements PJRT {version}, a different major version than rpjrt's {OUR_VERSION}"
        )));
    }
    if version.minor < 57 {
        return Err(fail(format!(
            "it implements PJRT {version}; rpjrt needs PJRT 0.57 or newer (the function table \
             was reordered at 0.56/0.57)"
        )));
    }
    // The error entries must exist for any call to report failures.
    if table_size < TABLE_HEADER + 3 * size_of::<usize>() {
        return Err(fail(format!(
            "its PJRT_Api struct is only {table_size} bytes, too small for the error entries"
        )));
    }
    // A table longer than its version has (a plugin of 0.81 whose struct_size claims
    // 0.114's slots) would make rpjrt call past its end, where there are no functions:
    // only the slots that existed at the plugin's version are used. A newer plugin's
    // table is longer than ours, which reads only the slots it declares.
    let existed = sys::PJRT_API_ENTRIES
        .iter()
        .take_while(|e| i64::from(e.since_minor) <= i64::from(version.minor))
        .count();
    let claimed_table_size = table_size;
    let table_size = table_size.min(TABLE_HEADER + existed * size_of::<usize>());
    if guard::readable(ptr as usize, table_size) == Some(false) {
        return Err(unreadable(
            &format!("function table (struct_size {claimed_table_size})"),
            table_size,
        ));
    }
    record_claim(
        path,
        TableClaim {
            claimed: claimed_table_size,
            used: table_size,
        },
    );
    let mut api = Api {
        ptr,
        table_size,
        claimed_table_size,
        version,
        version_struct_size: v.struct_size,
        fork_generation: guard::generation(),
        plugin,
        loaded_in_pid: std::process::id(),
        extensions: Vec::new(),
        default_context: std::sync::OnceLock::new(),
    };
    api.extensions = api.walk_extensions().map_err(fail)?;
    Ok(api)
}

impl Api {
    /// Whether both came from one library: the loader maps a file once whatever name
    /// reaches it (a hard link, another symbolic link), so its `GetPjrtApi` gives one table.
    pub fn same_library(&self, other: &Api) -> bool {
        std::ptr::eq(self.ptr, other.ptr)
    }

    /// The plugin's PJRT version.
    pub fn version(&self) -> ApiVersion {
        self.version
    }

    /// `pjrt_api_version.struct_size` as the plugin reports it.
    pub fn version_struct_size(&self) -> usize {
        self.version_struct_size
    }

    /// Size of the plugin's `PJRT_Api` struct in bytes.
    pub fn table_size(&self) -> usize {
        self.table_size
    }

    /// `PJRT_Api.struct_size` as the plugin reported it. [`Api::table_size`] is this,
    /// clamped to the slots that existed at the plugin's version (a plugin claiming more
    /// slots than its version has would make rpjrt call past the end of its table); the
    /// two differ for a plugin whose table claims more than it can hold.
    pub fn claimed_table_size(&self) -> usize {
        self.claimed_table_size
    }

    /// Number of function slots the plugin's table holds.
    pub fn table_slots(&self) -> usize {
        self.table_size.saturating_sub(TABLE_HEADER) / size_of::<usize>()
    }

    /// Whether the table has a non-null entry at `offset`.
    pub fn has_slot(&self, offset: usize) -> bool {
        if offset + size_of::<usize>() > self.table_size {
            return false;
        }
        // SAFETY: the slot lies inside the plugin's table (checked above); every slot is a
        // pointer-sized nullable function pointer.
        let slot = unsafe {
            self.ptr
                .cast::<u8>()
                .add(offset)
                .cast::<*const c_void>()
                .read()
        };
        !slot.is_null()
    }

    /// Checks the slot, then calls it.
    ///
    /// # Safety
    /// Every pointer in `args` must be valid as the C API requires for this entry.
    #[inline]
    pub unsafe fn invoke<T>(
        &self,
        offset: usize,
        entry: &'static str,
        args: &mut T,
        read: impl FnOnce(
            *const sys::PJRT_Api,
        ) -> Option<unsafe extern "C" fn(*mut T) -> *mut sys::PJRT_Error>,
    ) -> Result<()> {
        if offset + size_of::<usize>() > self.table_size {
            return Err(self.unsupported_entry(entry, offset, false));
        }
        let Some(f) = read(self.ptr) else {
            return Err(self.unsupported_entry(entry, offset, true));
        };
        if guard::forked_since(self.fork_generation) {
            return Err(self.forked_error(entry));
        }
        // The entries of the execute and transfer loops are not watched: the mark costs two
        // thread-local writes per call, and those calls run thousands of times a second.
        let watch = (!fast_path_entry(offset)).then(|| guard::watch_exit(self.plugin, entry));
        // SAFETY: `f` is the plugin's implementation of `entry`; the caller vouches for args.
        let err = unsafe { call_guarded(entry, f, args) }?;
        drop(watch);
        if err.is_null() {
            Ok(())
        } else {
            Err(self.take_error(err, entry))
        }
    }

    /// The error for a C++ exception that escaped from a plugin entry.
    #[cold]
    fn exception_error(&self, entry: &'static str, what: String) -> Error {
        exception_error(entry, what)
    }

    /// Whether this process is a fork of the one that loaded the plugin (where every
    /// plugin call is refused, and what the plugin's threads share is not to be touched).
    pub fn is_forked(&self) -> bool {
        guard::forked_since(self.fork_generation)
    }

    /// The error for a call refused in a forked child (see `guard`).
    #[cold]
    pub fn forked_error(&self, entry: &'static str) -> Error {
        Error::Pjrt {
            entry,
            code: Code::FailedPrecondition,
            message: guard::forked_message(self.loaded_in_pid),
        }
    }

    /// Checks the slot and returns its function pointer, for callers that call the same
    /// entry many times (the benchmark floor).
    #[cfg(feature = "bench")]
    pub fn slot<F>(
        &self,
        offset: usize,
        entry: &'static str,
        read: impl FnOnce(*const sys::PJRT_Api) -> Option<F>,
    ) -> Result<F> {
        if offset + size_of::<usize>() > self.table_size {
            return Err(self.unsupported_entry(entry, offset, false));
        }
        if guard::forked_since(self.fork_generation) {
            return Err(self.forked_error(entry));
        }
        read(self.ptr).ok_or_else(|| self.unsupported_entry(entry, offset, true))
    }

    #[cold]
    fn unsupported_entry(&self, entry: &'static str, offset: usize, missing_slot: bool) -> Error {
        let slot = (offset - TABLE_HEADER) / size_of::<usize>();
        let since = sys::PJRT_API_ENTRIES
            .get(slot)
            .map(|e| e.since_minor as i32)
            .unwrap_or(OUR_VERSION.minor);
        Error::Unsupported {
            what: entry.to_string(),
            needs: ApiVersion {
                major: 0,
                minor: since,
            },
            plugin: self.version,
            missing_slot,
        }
    }

    /// An `Unsupported` error for a feature (not a table entry) that needs a newer plugin.
    pub fn require(&self, what: &str, minor: i32) -> Result<()> {
        if self.version.minor >= minor {
            return Ok(());
        }
        Err(Error::Unsupported {
            what: what.to_string(),
            needs: ApiVersion { major: 0, minor },
            plugin: self.version,
            missing_slot: false,
        })
    }

    /// Turns an owned `PJRT_Error*` into an [`Error`] and destroys it.
    pub(crate) fn take_error(&self, err: *mut sys::PJRT_Error, entry: &'static str) -> Error {
        let (code, message) = self.error_parts(err);
        self.destroy_error(err);
        if let Some((struct_name, plugin_size, our_size)) = parse_size_complaint(&message) {
            return Error::StructSize {
                entry,
                struct_name,
                plugin_size,
                our_size,
                plugin: self.version,
                ours: OUR_VERSION,
            };
        }
        Error::Pjrt {
            entry,
            code,
            message,
        }
    }

    /// Reads code and message of a live `PJRT_Error*` without destroying it.
    pub(crate) fn error_parts(&self, err: *mut sys::PJRT_Error) -> (Code, String) {
        let mut m = sys::PJRT_Error_Message_Args::new();
        m.error = err;
        // SAFETY: the table covers the first slots (checked at load), and `err` is a live
        // error handed to us by the plugin.
        let called = unsafe {
            match std::ptr::addr_of!((*self.ptr).PJRT_Error_Message).read() {
                Some(f) => {
                    f(&mut m);
                    true
                }
                None => false,
            }
        };
        let message = match called {
            true if !m.message.is_null() => {
                // SAFETY: the plugin returned a pointer and length into the error, alive
                // until the error is destroyed.
                let bytes =
                    unsafe { std::slice::from_raw_parts(m.message.cast::<u8>(), m.message_size) };
                String::from_utf8_lossy(bytes).into_owned()
            }
            _ => String::from("(the plugin gave no message)"),
        };
        let mut c = sys::PJRT_Error_GetCode_Args::new();
        c.error = err;
        // Called directly, as the message is: through the checked path, an error from
        // GetCode would be read by GetCode again, without end (a stack overflow). Its own
        // error is destroyed unread and the code is UNKNOWN.
        // SAFETY: as above; an error GetCode returns is ours, destroyed once here.
        let code = unsafe {
            match std::ptr::addr_of!((*self.ptr).PJRT_Error_GetCode).read() {
                Some(f) => {
                    let failed = f(&mut c);
                    if failed.is_null() {
                        Code::from_raw(c.code as i32)
                    } else {
                        self.destroy_error(failed);
                        Code::Unknown
                    }
                }
                None => Code::Unknown,
            }
        };
        (code, message)
    }

    /// Destroys a `PJRT_Error*`.
    pub(crate) fn destroy_error(&self, err: *mut sys::PJRT_Error) {
        let mut d = sys::PJRT_Error_Destroy_Args::new();
        d.error = err;
        // SAFETY: the table covers the first slots (checked at load); `err` is owned by us
        // and destroyed exactly once here.
        unsafe {
            if let Some(f) = std::ptr::addr_of!((*self.ptr).PJRT_Error_Destroy).read() {
                f(&mut d);
            }
        }
    }

    /// Walks the extension chain once; an extension header that is not readable memory
    /// is an error saying so.
    fn walk_extensions(&self) -> std::result::Result<Vec<extension::Found>, String> {
        let mut out = Vec::new();
        // SAFETY: the table is at least as large as its header (checked in `load`).
        let mut cur = unsafe { std::ptr::addr_of!((*self.ptr).extension_start).read() };
        while !cur.is_null() && out.len() < 64 {
            let size = size_of::<sys::PJRT_Extension_Base>();
            if guard::readable(cur as usize, size) == Some(false) {
                return Err(format!(
                    "its extension chain points at {:#x} (extension {} of the chain), which \
                     is not readable memory (a wild or dangling pointer)",
                    cur as usize,
                    out.len()
                ));
            }
            // SAFETY: each extension begins with a PJRT_Extension_Base, per the C API, and
            // this one is readable (checked above); the chain is immutable and lives as
            // long as the library (never unloaded).
            let base = unsafe { cur.read() };
            out.push(extension::Found::new(
                base.r#type as i32,
                base.struct_size,
                cur.cast(),
            ));
            cur = base.next;
        }
        Ok(out)
    }

    /// `(type id, struct size)` of each extension on the chain, in chain order.
    pub fn extension_list(&self) -> Vec<(i32, usize)> {
        self.extensions
            .iter()
            .map(|e| (e.type_id(), e.struct_size()))
            .collect()
    }

    /// `PJRT_Plugin_Initialize`.
    pub fn plugin_initialize(&self) -> Result<()> {
        let mut a = sys::PJRT_Plugin_Initialize_Args::new();
        // SAFETY: no pointers in the args.
        unsafe { pjrt!(self, PJRT_Plugin_Initialize, &mut a) }
    }

    /// `PJRT_Plugin_Attributes`.
    pub fn plugin_attributes(&self) -> Result<Vec<(String, util::NamedValue)>> {
        let mut a = sys::PJRT_Plugin_Attributes_Args::new();
        // SAFETY: out-parameters only; the attributes live as long as the plugin.
        unsafe { pjrt!(self, PJRT_Plugin_Attributes, &mut a) }?;
        Ok(util::read_named_values(a.attributes, a.num_attributes))
    }
}

/// Recognises a plugin's complaint about an args struct size:
/// `Unexpected PJRT_X_Args size: expected 88, got 72`.
fn parse_size_complaint(message: &str) -> Option<(String, usize, usize)> {
    let rest = &message[message.find("Unexpected ")? + "Unexpected ".len()..];
    let (name, rest) = rest.split_once(" size: expected ")?;
    let (expected, rest) = rest.split_once(", got ")?;
    let got: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    Some((
        name.to_string(),
        expected.trim().parse().ok()?,
        got.parse().ok()?,
    ))
}

/// Canonical form of a plugin path: the path a loaded plugin reports (the registry of
/// plugins matches files by [`file_key`], never by path).
///
/// A file reached through one of the kernel's links that name no path (a memfd's
/// `/proc/self/fd/N`) keeps `path`, made absolute. A path that names no file (a missing
/// one, `lib.so/` with its trailing slash) is an error: no unresolved guess is kept, so
/// nothing can compare equal to a file it does not name.
pub fn canonical(path: &Path) -> std::io::Result<PathBuf> {
    std::fs::canonicalize(path).or_else(|e| match std::fs::metadata(path) {
        Ok(_) => std::path::absolute(path),
        Err(_) => Err(e),
    })
}

/// What tells one file from another whatever names it (device and inode, as the system's
/// loader compares libraries): the registry of plugins matches files by it.
#[cfg(unix)]
pub fn file_key(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt as _;
    (meta.dev(), meta.ino())
}

/// `path` opened (never waiting on a FIFO) as a regular file, and its [`file_key`]; what
/// is wrong with it otherwise, in the words of [`load`]'s checks.
#[cfg(unix)]
pub fn open_library_file(path: &Path) -> Result<(std::fs::File, (u64, u64))> {
    match files::open_for_reading(path) {
        Ok((f, m)) if m.is_file() => Ok((f, file_key(&m))),
        _ => Err(Error::PluginLoad {
            path: path.to_path_buf(),
            reason: elf::check_library_file(path)
                .err()
                .unwrap_or_else(|| "it changed while it was opened".into()),
        }),
    }
}

/// Another name for the file at `path` that the system's loader has not seen: `dir/./file`.
/// The loader matches a name it has loaded before by its text, before it looks at the file,
/// so a library replaced at a path (a package upgrade, a reused `/proc/self/fd/N`) is only
/// loaded under a new name; `$ORIGIN` stays the same folder.
pub fn unseen_name(path: &Path) -> Option<PathBuf> {
    Some(path.parent()?.join(".").join(path.file_name()?))
}

/// Byte offset of function slot `slot` in `PJRT_Api`.
pub fn slot_offset(slot: usize) -> usize {
    TABLE_HEADER + slot * size_of::<usize>()
}

/// Calls `f(args)` inside the C++ guard: a function of any of the plugin's tables (the
/// main one through [`Api::invoke`], an extension's or the profiler's directly), so a C++
/// exception it lets escape is an `INTERNAL` error naming `entry` instead of an abort.
/// Returns the function's own error pointer (of its table's error type) for the caller.
///
/// # Safety
/// `f` is the plugin's function and `args` valid for it, as for calling `f` directly.
#[inline]
pub unsafe fn call_guarded<T, E>(
    entry: &'static str,
    f: unsafe extern "C" fn(*mut T) -> *mut E,
    args: &mut T,
) -> Result<*mut E> {
    // SAFETY: `f` is an `extern "C"` function taking one pointer and returning one
    // pointer; as `RawEntry` it has the same ABI, only the pointee types are erased.
    let raw = unsafe {
        std::mem::transmute::<unsafe extern "C" fn(*mut T) -> *mut E, guard::RawEntry>(f)
    };
    // SAFETY: the caller vouches for `f` and `args`; the guard catches a C++ exception
    // escaping from `f` (which would abort in Rust).
    match unsafe { guard::call(raw, (args as *mut T).cast()) } {
        Ok(e) => Ok(e.cast()),
        Err(what) => Err(exception_error(entry, what)),
    }
}

/// The error for a C++ exception that escaped from a plugin function.
#[cold]
fn exception_error(entry: &'static str, what: String) -> Error {
    Error::Pjrt {
        entry,
        code: Code::Internal,
        message: format!(
            "the plugin threw a C++ exception instead of returning an error ({}); \
             rpjrt caught it, but the plugin may be left in an inconsistent state",
            summarize_exception(&what)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exception_backtraces_are_summarised_cause_first() {
        let mut what = String::from(
            "TT_FATAL @ tt_cluster.cpp:129: num_chips > 0\ninfo:\nNo chips detected in the \
             cluster\nbacktrace:\n",
        );
        for i in 0..30 {
            what.push_str(&format!(
                " --- /x/libtt.so(+0x3d6dc{i:02}) [0x7f1c8a36dc0a]\n"
            ));
        }
        let s = summarize_exception(&what);
        assert!(
            s.starts_with("No chips detected in the cluster (TT_FATAL"),
            "{s}"
        );
        assert!(s.ends_with("30 backtrace lines left out"), "{s}");
        assert!(!s.contains("0x7f1c"), "{s}");
        assert_eq!(summarize_exception("bad_alloc"), "bad_alloc");
    }

    #[test]
    fn size_complaints_are_recognised() {
        let m = "Unexpected PJRT_Client_Create_Args size: expected 88, got 72. Check ...";
        assert_eq!(
            parse_size_complaint(m),
            Some(("PJRT_Client_Create_Args".to_string(), 88, 72))
        );
        assert_eq!(parse_size_complaint("something else"), None);
    }
}
