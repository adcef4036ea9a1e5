//! The process-wide state: the current configuration and the function tables built from
//! it, plus the `entry` guard every implemented function runs through.

use std::ffi::c_void;
use std::mem::offset_of;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, RwLock};

use rpjrt_sys as sys;

use crate::config::{Config, ExtensionSpec, ForcedError};
use crate::error::{internal, invalid, Fail};
use crate::named::NamedValues;

/// Byte offset of slot 0 in `PJRT_Api`.
pub(crate) const FIRST_SLOT: usize = offset_of!(sys::PJRT_Api, PJRT_Error_Destroy);

/// Everything built from one configuration. Never freed: old tables stay valid for
/// anyone still holding a pointer to them.
pub(crate) struct State {
    pub config: Config,
    api: Box<sys::PJRT_Api>,
    _extensions: Vec<Box<[usize]>>,
    pub attributes: NamedValues,
}

// SAFETY: after construction the state is never mutated; its raw pointers point into
// heap blocks it owns (the extension chain) or to functions.
unsafe impl Send for State {}
// SAFETY: as above; shared references only read.
unsafe impl Sync for State {}

impl State {
    pub fn api_ptr(&self) -> *const sys::PJRT_Api {
        &*self.api
    }
}

static ALL_STATES: Mutex<Vec<Arc<State>>> = Mutex::new(Vec::new());
static CURRENT: RwLock<Option<Arc<State>>> = RwLock::new(None);

/// The state in force; built from the environment on first use.
pub(crate) fn current() -> Result<Arc<State>, String> {
    if let Some(s) = CURRENT.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        return Ok(s.clone());
    }
    let mut slot = CURRENT.write().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = slot.as_ref() {
        return Ok(s.clone());
    }
    let state = build(Config::from_env()?)?;
    *slot = Some(state.clone());
    Ok(state)
}

/// The state in force for an entry call (falls back to the default configuration if the
/// environment is malformed, which `GetPjrtApi` has already reported).
pub(crate) fn current_or_default() -> Arc<State> {
    match current() {
        Ok(s) => s,
        Err(_) => {
            let state = build(Config::default()).expect("the default configuration is valid");
            *CURRENT.write().unwrap_or_else(|e| e.into_inner()) = Some(state.clone());
            state
        }
    }
}

/// Makes `config` the one in force and returns its table.
pub(crate) fn install(config: Config) -> Result<Arc<State>, String> {
    let state = build(config)?;
    *CURRENT.write().unwrap_or_else(|e| e.into_inner()) = Some(state.clone());
    Ok(state)
}

fn build(config: Config) -> Result<Arc<State>, String> {
    validate(&config)?;
    // SAFETY: every field of PJRT_Api is an integer, a raw pointer or an Option of a
    // function pointer, for all of which the all-zero bit pattern is valid (0 / null /
    // None).
    let mut api: Box<sys::PJRT_Api> = Box::new(unsafe { std::mem::zeroed() });
    crate::table::fill(&mut api);
    for name in &config.null_slots {
        if let Some(i) = crate::table::slot_index(name) {
            clear_slot(&mut api, i);
        }
    }
    let slots = slot_count(&config);
    for i in slots..sys::PJRT_API_ENTRIES.len() {
        clear_slot(&mut api, i);
    }
    api.struct_size = FIRST_SLOT + 8 * slots;
    api.pjrt_api_version = sys::PJRT_Api_Version {
        struct_size: sys::PJRT_Api_Version_STRUCT_SIZE,
        extension_start: std::ptr::null_mut(),
        major_version: config.version.0,
        minor_version: config.version.1,
    };
    let mut extensions = build_extensions(&config.extensions, config.version);
    api.extension_start = extensions
        .first_mut()
        .map(|b| b.as_mut_ptr().cast::<sys::PJRT_Extension_Base>())
        .unwrap_or(std::ptr::null_mut());
    let attributes = NamedValues::new(&config.attributes);
    let state = Arc::new(State {
        config,
        api,
        _extensions: extensions,
        attributes,
    });
    ALL_STATES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(state.clone());
    Ok(state)
}

/// Extension functions the fake implements, which the entry knobs also accept.
pub(crate) const EXTENSION_ENTRIES: [&str; 1] = ["PJRT_FFI_Register_Handler"];

fn validate(config: &Config) -> Result<(), String> {
    let known =
        |name: &str| crate::table::slot_index(name).is_some() || EXTENSION_ENTRIES.contains(&name);
    for (knob, names) in [
        (crate::knobs::CRASH_ON, &config.crash_on),
        (crate::knobs::HANG_ON, &config.hang_on),
    ] {
        if let Some(name) = names.iter().find(|n| !known(n)) {
            return Err(format!("{knob}: unknown entry {name:?}"));
        }
    }
    for name in &config.null_slots {
        if !known(name) {
            return Err(format!(
                "{}: unknown entry {name:?}",
                crate::knobs::NULL_SLOTS
            ));
        }
    }
    for name in config.fail.keys() {
        if !known(name) {
            return Err(format!("{}: unknown entry {name:?}", crate::knobs::FAIL));
        }
    }
    for name in config.event_error.keys() {
        if !known(name) {
            return Err(format!(
                "{}: unknown entry {name:?}",
                crate::knobs::EVENT_ERROR
            ));
        }
    }
    if let Some(n) = config.table_slots {
        if n > sys::PJRT_API_ENTRIES.len() {
            return Err(format!(
                "{}: {n} is more than {}",
                crate::knobs::TABLE_SLOTS,
                sys::PJRT_API_ENTRIES.len()
            ));
        }
    }
    Ok(())
}

/// The number of slots exposed: the knob, or every entry that existed at the configured
/// version (all of them for a version at or past 0.114 or a major above 0).
pub(crate) fn slot_count(config: &Config) -> usize {
    if let Some(n) = config.table_slots {
        return n;
    }
    let (major, minor) = config.version;
    if major > 0 {
        return sys::PJRT_API_ENTRIES.len();
    }
    sys::PJRT_API_ENTRIES
        .iter()
        .take_while(|e| i64::from(e.since_minor) <= i64::from(minor))
        .count()
}

fn clear_slot(api: &mut sys::PJRT_Api, index: usize) {
    assert!(index < sys::PJRT_API_ENTRIES.len());
    let base: *mut sys::PJRT_Api = api;
    // SAFETY: slot `index` lies inside the PJRT_Api (checked above; the ABI test of
    // rpjrt-sys pins slot i at FIRST_SLOT + 8 * i). Every slot is an
    // Option<unsafe extern "C" fn ...>, all of which have the same size and use the
    // null pointer for None, so writing a None of one function type is writing a None
    // of the slot's own type.
    unsafe {
        base.cast::<u8>()
            .add(FIRST_SLOT + 8 * index)
            .cast::<Option<unsafe extern "C" fn()>>()
            .write(None);
    }
}

/// The default `struct_size` of an extension at a PJRT version: the extension's size
/// when the plugin's minor version was current (only Layouts changed within the range we
/// support), or just the base for a type the fake does not know.
pub fn default_extension_size(type_id: sys::PJRT_Extension_Type, version: (i32, i32)) -> usize {
    let base = sys::PJRT_Extension_Base_STRUCT_SIZE;
    let minor = if version.0 > 0 { i32::MAX } else { version.1 };
    let slots = match type_id {
        sys::PJRT_Extension_Type_Layouts => {
            if minor >= 93 {
                7
            } else if minor >= 81 {
                6
            } else {
                5
            }
        }
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
        _ => 0,
    };
    base + 8 * slots
}

/// The function every extension slot points at.
unsafe extern "C" fn extension_stub(_args: *mut c_void) -> *mut sys::PJRT_Error {
    catch_unwind(|| {
        crate::error::unimplemented("fake plugin: extension functions are not implemented")
            .into_raw()
    })
    .unwrap_or(std::ptr::null_mut())
}

fn build_extensions(specs: &[ExtensionSpec], version: (i32, i32)) -> Vec<Box<[usize]>> {
    let word = std::mem::size_of::<usize>();
    let mut blocks: Vec<Box<[usize]>> = specs
        .iter()
        .map(|spec| {
            let size = spec
                .struct_size
                .unwrap_or_else(|| default_extension_size(spec.type_id, version))
                .max(sys::PJRT_Extension_Base_STRUCT_SIZE);
            let mut block = vec![0usize; size.div_ceil(word)].into_boxed_slice();
            let first = sys::PJRT_Extension_Base_STRUCT_SIZE / word;
            // The profiler extension holds data, not functions: leave it zeroed.
            if spec.type_id != sys::PJRT_Extension_Type_Profiler {
                for w in block.iter_mut().take(size / word).skip(first) {
                    *w = extension_stub as *const () as usize;
                }
            }
            // The FFI extension's register_handler works.
            let slot = offset_of!(sys::PJRT_FFI_Extension, register_handler);
            if spec.type_id == sys::PJRT_Extension_Type_FFI && slot + word <= size {
                block[slot / word] = crate::ffi::register_handler as *const () as usize;
            }
            let base = block.as_mut_ptr().cast::<sys::PJRT_Extension_Base>();
            // SAFETY: the block is at least PJRT_Extension_Base_STRUCT_SIZE bytes (3
            // words) and word-aligned, which is the base's size and alignment.
            unsafe {
                base.write(sys::PJRT_Extension_Base {
                    struct_size: size,
                    r#type: spec.type_id,
                    next: std::ptr::null_mut(),
                });
            }
            block
        })
        .collect();
    for i in 1..blocks.len() {
        let next = blocks[i].as_mut_ptr().cast::<sys::PJRT_Extension_Base>();
        let base = blocks[i - 1]
            .as_mut_ptr()
            .cast::<sys::PJRT_Extension_Base>();
        // SAFETY: `base` points at the base struct written above; the blocks are boxed,
        // so `next` stays valid when the vector moves.
        unsafe { (*base).next = next };
    }
    blocks
}

extern "C" {
    fn raise(signal: std::os::raw::c_int) -> std::os::raw::c_int;
    fn signal(signal: std::os::raw::c_int, handler: usize) -> usize;
}

/// The `CRASH_ON` and `HANG_ON` knobs: crash with SIGSEGV or never return if `entry`
/// is named.
pub(crate) fn trap(state: &State, entry: &str) {
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
pub(crate) fn forced(state: &State, entry: &str) -> Option<Fail> {
    state.config.fail.get(entry).map(Fail::from)
}

/// The error events from `entry` complete with, if any.
pub(crate) fn event_error(state: &State, entry: &str) -> Option<ForcedError> {
    state.config.event_error.get(entry).cloned()
}

/// The smallest `struct_size` accepted for `struct_name`: what the fake reads, raised by
/// the `RPJRT_FAKE_MIN_STRUCT_SIZE` knob.
pub(crate) fn min_size(state: &State, struct_name: &str, reads: usize) -> usize {
    state
        .config
        .min_struct_size
        .get(struct_name)
        .copied()
        .unwrap_or(0)
        .max(reads)
}

/// Checks a nested struct's `struct_size` (a `PJRT_NamedValue`, `PJRT_Program`, ...).
pub(crate) fn check_size(
    state: &State,
    struct_name: &str,
    actual: usize,
    reads: usize,
) -> Result<(), Fail> {
    let expected = min_size(state, struct_name, reads);
    if actual < expected {
        return Err(invalid(format!(
            "Unexpected {struct_name} size: expected {expected}, got {actual}"
        )));
    }
    Ok(())
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Runs one table entry: catches panics, checks `args` is non-null and its
/// `struct_size` covers `reads` bytes (or the knob's larger minimum), applies the
/// `RPJRT_FAKE_FAIL` knob, then runs `body`.
///
/// `body` receives `args` only after those checks, so every field inside the first
/// `reads` bytes may be read and written.
pub(crate) fn entry<A>(
    name: &'static str,
    args: *mut A,
    reads: usize,
    body: impl FnOnce(*mut A, &State) -> Result<(), Fail>,
) -> *mut sys::PJRT_Error {
    let result = catch_unwind(AssertUnwindSafe(|| -> Result<(), Fail> {
        let state = current_or_default();
        trap(&state, name);
        if args.is_null() {
            return Err(invalid(format!(
                "fake plugin: {name} called with null args"
            )));
        }
        // SAFETY: args is non-null and, per the C API, points at an args struct, all of
        // which start with `size_t struct_size`.
        let actual = unsafe { args.cast::<usize>().read() };
        check_size(&state, &format!("{name}_Args"), actual, reads)?;
        if let Some(f) = forced(&state, name) {
            return Err(f);
        }
        body(args, &state)
    }));
    match result {
        Ok(Ok(())) => std::ptr::null_mut(),
        Ok(Err(fail)) => fail.into_raw(),
        Err(payload) => internal(format!(
            "fake plugin: panic in {name}: {}",
            panic_message(&*payload)
        ))
        .into_raw(),
    }
}

/// Runs an entry's body on its checked args (a typed call, so the body's closure gets
/// its parameter types from here).
pub(crate) fn run_body<A>(
    args: &mut A,
    state: &State,
    body: impl FnOnce(&mut A, &State) -> Result<(), Fail>,
) -> Result<(), Fail> {
    body(args, state)
}

/// Defines the table function `$fn_name` for entry `$entry` (`PJRT_Client_Create`):
/// it takes `*mut sys::$entry_Args` and runs [`entry`] with the full
/// `$entry_Args_STRUCT_SIZE`, so the ceremony every entry shares (panics caught, args
/// non-null and large enough, the CRASH_ON / HANG_ON / FAIL knobs, errors returned as
/// `PJRT_Error`) happens before `$body`, a closure `|args: &mut $entry_Args, state|`
/// returning `Result<(), Fail>`. Handles inside args are still checked by the body
/// (`client_ref`, `buffer_ref`, ...), which turns stale pointers into INVALID_ARGUMENT.
macro_rules! entry_fn {
    ($fn_name:ident, $entry:ident, $body:expr) => {
        pastey::paste! {
            pub(crate) unsafe extern "C" fn $fn_name(
                args: *mut sys::[<$entry _Args>],
            ) -> *mut sys::PJRT_Error {
                $crate::state::entry(
                    stringify!($entry),
                    args,
                    sys::[<$entry _Args_STRUCT_SIZE>],
                    |args, state| {
                        // SAFETY: `entry` checked that args is non-null and that its
                        // struct_size covers the whole struct.
                        let a = unsafe { &mut *args };
                        $crate::state::run_body(a, state, $body)
                    },
                )
            }
        }
    };
}

/// What a stub slot returns: the forced error if configured, else UNIMPLEMENTED.
pub(crate) fn stub(name: &'static str) -> *mut sys::PJRT_Error {
    catch_unwind(|| {
        let state = current_or_default();
        trap(&state, name);
        forced(&state, name)
            .unwrap_or_else(|| {
                crate::error::unimplemented(format!("fake plugin: {name} is not implemented"))
            })
            .into_raw()
    })
    .unwrap_or(std::ptr::null_mut())
}
