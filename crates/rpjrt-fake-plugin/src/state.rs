//! The process-wide state: the current configuration and the function tables built from
//! it, plus the `entry` guard every implemented function runs through.

use std::ffi::c_void;
use std::mem::offset_of;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, RwLock};

use rpjrt_sys as sys;

use crate::config::{knobs, Config, ForcedError};
use crate::error::{internal, unimplemented, Fail};
use crate::named::NamedValues;

/// Byte offset of slot 0 in `PJRT_Api`.
pub(crate) const FIRST_SLOT: usize = offset_of!(sys::PJRT_Api, PJRT_Error_Destroy);

/// Everything built from one configuration. Never freed (leaked when built): old tables
/// stay valid for anyone still holding a pointer to them.
pub(crate) struct State {
    pub config: Config,
    api: sys::PJRT_Api,
    pub attributes: NamedValues,
    /// The XLA FFI API table FFI handlers see.
    pub ffi_api: sys::XLA_FFI_Api,
}

// SAFETY: after construction the state is never mutated; its raw pointers point into
// leaked heap blocks (the extension chain) or to functions.
unsafe impl Send for State {}
// SAFETY: as above; shared references only read.
unsafe impl Sync for State {}

impl State {
    pub fn api_ptr(&self) -> *const sys::PJRT_Api {
        &self.api
    }
}

static ALL_STATES: Mutex<Vec<&'static State>> = Mutex::new(Vec::new());
static CURRENT: RwLock<Option<&'static State>> = RwLock::new(None);

/// The state in force; built from the environment on first use.
pub(crate) fn current() -> Result<&'static State, String> {
    if let Some(s) = *CURRENT.read().unwrap_or_else(|e| e.into_inner()) {
        return Ok(s);
    }
    let mut slot = CURRENT.write().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = *slot {
        return Ok(s);
    }
    let state = build(Config::from_env()?)?;
    *slot = Some(state);
    Ok(state)
}

/// The state in force for an entry call (falls back to the default configuration if the
/// environment is malformed, which `GetPjrtApi` has already reported).
pub(crate) fn current_or_default() -> &'static State {
    current().unwrap_or_else(|_| install(Config::default()).expect("the default is valid"))
}

/// Makes `config` the one in force and returns its table.
pub(crate) fn install(config: Config) -> Result<&'static State, String> {
    let state = build(config)?;
    *CURRENT.write().unwrap_or_else(|e| e.into_inner()) = Some(state);
    Ok(state)
}

fn build(config: Config) -> Result<&'static State, String> {
    validate(&config)?;
    // SAFETY: every field of PJRT_Api is an integer, a raw pointer or an Option of a
    // function pointer, for all of which the all-zero bit pattern is valid.
    let mut api: sys::PJRT_Api = unsafe { std::mem::zeroed() };
    crate::table::fill(&mut api);
    let slots = slot_count(&config);
    let nulls = config.null_slots.iter().filter_map(|n| slot_index(n));
    for i in nulls.chain(slots..sys::PJRT_API_ENTRIES.len()) {
        clear_slot(&mut api, i);
    }
    api.struct_size = FIRST_SLOT + 8 * slots;
    if let Some(size) = config.api_struct_size {
        api.struct_size = size;
        for i in slots..sys::PJRT_API_ENTRIES.len() {
            set_slot(&mut api, i, past_the_table);
        }
    }
    api.pjrt_api_version = sys::PJRT_Api_Version {
        struct_size: config.version_struct_size,
        extension_start: std::ptr::null_mut(),
        major_version: config.version.0,
        minor_version: config.version.1,
    };
    api.extension_start = build_extensions(&config);
    let attributes = NamedValues::new(&config.attributes);
    // Leaked on purpose, a table must outlive every pointer handed out to it; kept in a
    // list so that leak checkers still see it reachable.
    let ffi_api = crate::ffi::api(config.ffi_version);
    let state = Box::leak(Box::new(State {
        config,
        api,
        attributes,
        ffi_api,
    }));
    ALL_STATES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(state);
    Ok(state)
}

/// Extension functions the fake implements, which the entry knobs also accept.
pub(crate) const EXTENSION_ENTRIES: [&str; 2] =
    ["PJRT_FFI_Register_Handler", "PJRT_Triton_Compile"];

/// The slot index of an entry in `PJRT_Api`, if `name` is an entry.
pub(crate) fn slot_index(name: &str) -> Option<usize> {
    sys::PJRT_API_ENTRIES.iter().position(|e| e.name == name)
}

fn validate(config: &Config) -> Result<(), String> {
    let named = [
        (knobs::CRASH_ON, config.crash_on.iter().collect::<Vec<_>>()),
        (knobs::EXIT_ON, config.exit_on.iter().collect()),
        (knobs::HANG_ON, config.hang_on.iter().collect()),
        (knobs::PRINT_ON, config.print_on.iter().collect()),
        (knobs::NULL_SLOTS, config.null_slots.iter().collect()),
        (knobs::FAIL, config.fail.keys().collect()),
        (knobs::EVENT_ERROR, config.event_error.keys().collect()),
    ];
    for (i, (knob, names)) in named.into_iter().enumerate() {
        // The print, crash and hang knobs also take `GetPjrtApi` (the first three).
        let unknown = |n: &&String| {
            slot_index(n).is_none()
                && !EXTENSION_ENTRIES.contains(&n.as_str())
                && !(i < 3 && n.as_str() == "GetPjrtApi")
        };
        if let Some(name) = names.into_iter().find(unknown) {
            return Err(format!("{knob}: unknown entry {name:?}"));
        }
    }
    match config.table_slots {
        Some(n) if n > sys::PJRT_API_ENTRIES.len() => Err(format!(
            "{}: {n} is more than the {} slots of PJRT 0.114",
            knobs::TABLE_SLOTS,
            sys::PJRT_API_ENTRIES.len()
        )),
        _ => Ok(()),
    }
}

/// The number of slots exposed: the knob, or every entry that existed at the configured
/// version (all of them for a major above 0).
pub(crate) fn slot_count(config: &Config) -> usize {
    let (major, minor) = config.version;
    let existed = |e: &&sys::PjrtEntry| major > 0 || i64::from(e.since_minor) <= i64::from(minor);
    (config.table_slots).unwrap_or_else(|| sys::PJRT_API_ENTRIES.iter().take_while(existed).count())
}

fn clear_slot(api: &mut sys::PJRT_Api, index: usize) {
    write_slot(api, index, None);
}

/// Writes slot `index` of the table: `None` (absent) or a function.
fn write_slot(api: &mut sys::PJRT_Api, index: usize, f: Option<unsafe extern "C" fn()>) {
    assert!(index < sys::PJRT_API_ENTRIES.len());
    let base: *mut sys::PJRT_Api = api;
    // SAFETY: slot `index` lies inside the PJRT_Api (checked above; the ABI test of
    // rpjrt-sys pins slot i at FIRST_SLOT + 8 * i). Every slot is an
    // Option<unsafe extern "C" fn ...>, all of which have the same size and use the
    // null pointer for None, so writing one of one function type is writing one of the
    // slot's own type. A function written here is never called by a client that
    // respects the table's version (its signature does not matter then).
    unsafe {
        base.cast::<u8>()
            .add(FIRST_SLOT + 8 * index)
            .cast::<Option<unsafe extern "C" fn()>>()
            .write(f);
    }
}

/// What the slots past the exposed ones hold under `API_STRUCT_SIZE`: calling one is what
/// calling past a real plugin's table would be, so it ends the process.
unsafe extern "C" fn past_the_table() {
    eprintln!("rpjrt-fake-plugin: a slot past the table of this PJRT version was called");
    std::process::abort();
}

fn set_slot(api: &mut sys::PJRT_Api, index: usize, f: unsafe extern "C" fn()) {
    write_slot(api, index, Some(f));
}

/// The default `struct_size` of an extension at a PJRT version: the extension's size
/// when the plugin's minor version was current (only Layouts changed within the range we
/// support), or just the base for a type the fake does not know.
pub(crate) fn default_extension_size(
    type_id: sys::PJRT_Extension_Type,
    version: (i32, i32),
) -> usize {
    let minor = if version.0 > 0 { i32::MAX } else { version.1 };
    let slots = match type_id {
        sys::PJRT_Extension_Type_Layouts if minor >= 93 => 7,
        sys::PJRT_Extension_Type_Layouts if minor >= 81 => 6,
        sys::PJRT_Extension_Type_Layouts => 5,
        sys::PJRT_Extension_Type_FFI => 3,
        sys::PJRT_Extension_Type_MemoryDescriptions => 2,
        sys::PJRT_Extension_Type_PhaseCompile => 5,
        sys::PJRT_Extension_Type_Shardings => 2,
        sys::PJRT_Extension_Type_Stream => 2,
        sys::PJRT_Extension_Type_Callback => 2,
        sys::PJRT_Extension_Type_Triton => 1,
        sys::PJRT_Extension_Type_RawBuffer => 7,
        sys::PJRT_Extension_Type_MultiSlice => 5,
        sys::PJRT_Extension_Type_Collectives => 9,
        sys::PJRT_Extension_Type_AbiVersion => 12,
        // The profiler API pointer and the trace context id.
        sys::PJRT_Extension_Type_Profiler => 2,
        _ => 0,
    };
    sys::PJRT_Extension_Base_STRUCT_SIZE + 8 * slots
}

/// The function every extension slot points at.
unsafe extern "C" fn extension_stub(_args: *mut c_void) -> *mut sys::PJRT_Error {
    catch_unwind(|| {
        unimplemented("fake plugin: extension functions are not implemented").into_raw()
    })
    .unwrap_or(std::ptr::null_mut())
}

/// The extension chain of `config`, as leaked blocks (reachable from the leaked state).
fn build_extensions(config: &Config) -> *mut sys::PJRT_Extension_Base {
    let (word, base_size) = (
        std::mem::size_of::<usize>(),
        sys::PJRT_Extension_Base_STRUCT_SIZE,
    );
    let mut next = std::ptr::null_mut();
    for spec in config.extensions.iter().rev() {
        let size = (spec.struct_size)
            .unwrap_or_else(|| default_extension_size(spec.type_id, config.version))
            .max(base_size);
        let mut block = vec![0usize; size.div_ceil(word)];
        // The profiler extension holds data, not functions: the profiler API's address
        // (when the struct has room for it) and a zero context id.
        if spec.type_id != sys::PJRT_Extension_Type_Profiler {
            block[base_size / word..size / word].fill(extension_stub as *const () as usize);
        } else {
            let slot = offset_of!(sys::PJRT_Profiler_Extension, profiler_api);
            if slot + word <= size {
                block[slot / word] = crate::profiler::api_address();
            }
        }
        // The FFI extension's register_handler works.
        let slot = offset_of!(sys::PJRT_FFI_Extension, register_handler);
        if spec.type_id == sys::PJRT_Extension_Type_FFI && slot + word <= size {
            block[slot / word] = crate::ffi::PJRT_FFI_Register_Handler as *const () as usize;
        }
        // So does the Triton extension's compile.
        let slot = offset_of!(sys::PJRT_Triton_Extension, compile);
        if spec.type_id == sys::PJRT_Extension_Type_Triton && slot + word <= size {
            block[slot / word] = crate::triton::PJRT_Triton_Compile as *const () as usize;
        }
        let base = Box::leak(block.into_boxed_slice())
            .as_mut_ptr()
            .cast::<sys::PJRT_Extension_Base>();
        let head = sys::PJRT_Extension_Base {
            struct_size: size,
            r#type: spec.type_id,
            next,
        };
        // SAFETY: the block is at least PJRT_Extension_Base_STRUCT_SIZE bytes (3 words)
        // and word-aligned, which is the base's size and alignment.
        unsafe { base.write(head) };
        next = base;
    }
    next
}

extern "C" {
    fn raise(signal: std::os::raw::c_int) -> std::os::raw::c_int;
    fn signal(signal: std::os::raw::c_int, handler: usize) -> usize;
}

/// The `PRINT_ON`, `EXIT_ON`, `CRASH_ON` and `HANG_ON` knobs: print, exit, crash with SIGSEGV or
/// never return if `entry` is named.
pub(crate) fn trap(state: &State, entry: &str) {
    if state.config.print_on.contains(entry) {
        use std::io::Write as _;
        // Written to the descriptors directly, as a plugin's C code would.
        let _ = match &state.config.print_text {
            Some(text) => write!(std::io::stdout(), "{text}"),
            None => writeln!(
                std::io::stdout(),
                "rpjrt-fake-plugin: {entry} says hello on stdout"
            ),
        };
        let _ = std::io::stdout().flush();
        eprintln!("rpjrt-fake-plugin: {entry}: a log line on stderr (RPJRT_FAKE_PRINT_ON)");
    }
    if state.config.exit_on.contains(entry) {
        eprintln!("rpjrt-fake-plugin: {entry}: exiting with status 0 (RPJRT_FAKE_EXIT_ON)");
        std::process::exit(0);
    }
    if state.config.crash_on.contains(entry) {
        eprintln!("rpjrt-fake-plugin: {entry}: crashing (RPJRT_FAKE_CRASH_ON)");
        const SIGSEGV: std::os::raw::c_int = 11;
        const SIG_DFL: usize = 0;
        // SAFETY: raise(3) and signal(2) have no preconditions. A handler installed by
        // the host (Rust's runtime, Python's faulthandler) runs first; if it returns, the
        // default action (ending the process) is restored and the signal raised again.
        unsafe {
            raise(SIGSEGV);
            signal(SIGSEGV, SIG_DFL);
            raise(SIGSEGV);
        }
        std::process::abort();
    }
    if state.config.hang_on.contains(entry) {
        eprintln!("rpjrt-fake-plugin: {entry}: hanging (RPJRT_FAKE_HANG_ON)");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
}

/// The forced error configured for `entry`, if any.
fn forced(state: &State, entry: &str) -> Option<Fail> {
    state.config.fail.get(entry).map(Fail::from)
}

/// The error events from `entry` complete with, if any.
pub(crate) fn event_error(state: &State, entry: &str) -> Option<ForcedError> {
    state.config.event_error.get(entry).cloned()
}

/// Checks a struct's `struct_size` against what the fake reads, raised by the
/// `RPJRT_FAKE_MIN_STRUCT_SIZE` knob.
pub(crate) fn check_size(
    state: &State,
    name: &str,
    actual: usize,
    reads: usize,
) -> Result<(), Fail> {
    let expected = state
        .config
        .min_struct_size
        .get(name)
        .copied()
        .unwrap_or(0)
        .max(reads);
    if actual < expected {
        bail!("Unexpected {name} size: expected {expected}, got {actual}");
    }
    Ok(())
}

/// A nested struct (`PJRT_Program`, ...) once [`check_size`] accepts its `struct_size`;
/// `None` for null. Use through `nested!(state, ptr, PJRT_Program)`.
///
/// # Safety
/// `ptr` must be null or point at a struct that starts with `size_t struct_size` and
/// is valid for that many bytes.
pub(crate) unsafe fn nested<'a, T>(
    state: &State,
    ptr: *const T,
    name: &str,
    reads: usize,
) -> Result<Option<&'a T>, Fail> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: non-null, and every such struct starts with struct_size (contract).
    check_size(state, name, unsafe { ptr.cast::<usize>().read() }, reads)?;
    // SAFETY: its struct_size covers every field the fake reads (checked).
    Ok(Some(unsafe { &*ptr }))
}

/// [`nested`] for the C struct `$ty`, reading all of `$ty_STRUCT_SIZE`.
macro_rules! nested {
    ($state:expr, $ptr:expr, $ty:ident) => {
        pastey::paste! {
            // SAFETY: per the C API the pointer is null or points at a `$ty`.
            unsafe {
                $crate::state::nested($state, $ptr, stringify!($ty), sys::[<$ty _STRUCT_SIZE>])
            }
        }
    };
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload.downcast_ref::<&str>().map(|s| s.to_string());
    text.or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// Runs one table entry: catches panics, applies the CRASH_ON / HANG_ON knobs, checks
/// `args` is non-null and its `struct_size` covers `reads` bytes (or the knob's larger
/// minimum), applies the FAIL knob, then runs `body`, which may therefore read and write
/// every field inside the first `reads` bytes.
pub(crate) fn entry<A>(
    name: &'static str,
    args: *mut A,
    reads: usize,
    body: impl FnOnce(*mut A, &State) -> Result<(), Fail>,
) -> *mut sys::PJRT_Error {
    let result = catch_unwind(AssertUnwindSafe(|| -> Result<(), Fail> {
        let state = current_or_default();
        trap(state, name);
        if args.is_null() {
            bail!("fake plugin: {name} called with null args");
        }
        // SAFETY: args is non-null and, per the C API, points at an args struct, all of
        // which start with `size_t struct_size`.
        let actual = unsafe { args.cast::<usize>().read() };
        check_size(state, &format!("{name}_Args"), actual, reads)?;
        match forced(state, name) {
            Some(f) => Err(f),
            None => body(args, state),
        }
    }));
    match result {
        Ok(Ok(())) => std::ptr::null_mut(),
        Ok(Err(fail)) => fail.into_raw(),
        Err(p) => internal(format!(
            "fake plugin: panic in {name}: {}",
            panic_message(&*p)
        ))
        .into_raw(),
    }
}

/// Defines the table function for entry `$entry` (`PJRT_Client_Create`), taking
/// `*mut sys::$entry_Args`: the ceremony every entry shares happens in [`entry`] (with
/// the whole `$entry_Args_STRUCT_SIZE`), then `$body` runs with `$a: &mut $entry_Args`
/// and `$s: &State`. The body fails with `?` or `return Err(..)`; reaching its end is
/// success. Handles inside args are checked by the body (`registry::get`), which turns
/// stale pointers into INVALID_ARGUMENT.
macro_rules! entry {
    ($entry:ident, |$a:pat_param, $s:pat_param| $body:expr) => {
        pastey::paste! {
            #[allow(non_snake_case, unreachable_code)]
            pub(crate) unsafe extern "C" fn $entry(
                args: *mut sys::[<$entry _Args>],
            ) -> *mut sys::PJRT_Error {
                let reads = sys::[<$entry _Args_STRUCT_SIZE>];
                $crate::state::entry(stringify!($entry), args, reads, |args, state| {
                    // SAFETY: `entry` checked that args is non-null and that its
                    // struct_size covers the whole struct.
                    let $a: &mut sys::[<$entry _Args>] = unsafe { &mut *args };
                    let $s: &$crate::state::State = state;
                    let () = $body;
                    Ok(())
                })
            }
        }
    };
}

/// What a stub slot returns: the forced error if configured, else UNIMPLEMENTED.
pub(crate) fn stub(name: &'static str) -> *mut sys::PJRT_Error {
    catch_unwind(|| {
        let state = current_or_default();
        trap(state, name);
        let not_implemented = || unimplemented(format!("fake plugin: {name} is not implemented"));
        forced(state, name)
            .unwrap_or_else(not_implemented)
            .into_raw()
    })
    .unwrap_or(std::ptr::null_mut())
}
