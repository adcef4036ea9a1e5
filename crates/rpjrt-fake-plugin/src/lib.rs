//! A scriptable PJRT plugin for tests.
//!
//! Built as a `cdylib` (`librpjrt_fake_plugin.so`) it exports `GetPjrtApi` like a vendor
//! plugin, so a client can `dlopen` it; built as an `rlib` the same table is reachable
//! from Rust through [`GetPjrtApi`] and [`configure`]. It implements a small in-memory PJRT
//! (clients, devices, memories, buffers, events, a fake compiler and executables) and
//! lets a test choose, per process, which version it claims, which slots exist, which
//! entries fail and how, so that a client's error paths can all be reached without a
//! real plugin.
//!
//! # Knobs
//!
//! Environment variables, read once, at the first `GetPjrtApi` call of a process (the
//! configuration is then cached for the life of the process; use [`configure`],
//! [`configure_from_spec`] or the exported `rpjrt_fake_configure` to change it later).
//! Their names are the constants in [`knobs`].
//!
//! | knob | value | default |
//! |---|---|---|
//! | `RPJRT_FAKE_VERSION` | `MAJOR.MINOR` put in `pjrt_api_version` | `0.114` |
//! | `RPJRT_FAKE_TABLE_SLOTS` | `N`: `PJRT_Api.struct_size = 40 + 8*N`; slots past `N` are null | the slots that existed at the version's minor (138 at 0.114, 118 at 0.81) |
//! | `RPJRT_FAKE_NULL_SLOTS` | `PJRT_Client_Create,PJRT_Buffer_Delete,...`: those slots are null | none |
//! | `RPJRT_FAKE_FAIL` | `ENTRY:CODE:message;...`: that entry returns a `PJRT_Error` with that code (name like `INVALID_ARGUMENT`, or number) and message | none |
//! | `RPJRT_FAKE_MIN_STRUCT_SIZE` | `STRUCT:SIZE,...`, e.g. `PJRT_Client_Create_Args:200`: a smaller `struct_size` is rejected with INVALID_ARGUMENT `Unexpected PJRT_Client_Create_Args size: expected 200, got 88` | each struct's 0.114 size |
//! | `RPJRT_FAKE_EXTENSIONS` | extension type ids or names (`Layouts,FFI`, `4,5`), `ID:SIZE` to force a size; empty for none | `Layouts,FFI` |
//! | `RPJRT_FAKE_ATTRIBUTES` | `name=kind:value;...`, kind `string`, `int64`, `int64list` (`1,9,0`), `float`, `bool`; empty for none | see below |
//! | `RPJRT_FAKE_EVENT_ERROR` | `ENTRY:CODE:message;...`: events handed out by that entry complete with that error | none |
//! | `RPJRT_FAKE_ALLOWED_OPTIONS` | create-option names accepted besides `fake_*`; others are rejected with INVALID_ARGUMENT | all accepted |
//! | `RPJRT_FAKE_NULL_API` | `1`: `GetPjrtApi` returns null | `0` |
//! | `RPJRT_FAKE_CRASH_ON` | `ENTRY,...`: calling that entry raises SIGSEGV (after printing `ENTRY: crashing` to stderr); `GetPjrtApi` counts as an entry for this knob and the next two | none |
//! | `RPJRT_FAKE_EXIT_ON` | `ENTRY,...`: calling that entry ends the process with `exit(0)` (after printing `ENTRY: exiting` to stderr) | none |
//! | `RPJRT_FAKE_HANG_ON` | `ENTRY,...`: calling that entry prints `ENTRY: hanging` to stderr and sleeps forever; the name `dlopen` makes the library's initializer do it, while the system's loader is loading it (so its lock stays taken) | none |
//! | `RPJRT_FAKE_PRINT_ON` | `ENTRY,...`: calling that entry first prints `... ENTRY says hello on stdout` to stdout and a log line to stderr | none |
//! | `RPJRT_FAKE_FFI` | `ok`, `refuse` or `drop`: what the FFI extension's `register_handler` does (see below) | `ok` |
//! | `RPJRT_FAKE_FFI_VERSION` | `MAJOR.MINOR`: the XLA FFI API version the fake implements | `0.4` |
//! | `RPJRT_FAKE_KV` | `1`: client create exchanges device counts through the KV callbacks (see below) | `0` |
//! | `RPJRT_FAKE_MEMORY_LIMIT` | `BYTES`: each device's `device` memory holds at most that many buffer bytes; more fails with RESOURCE_EXHAUSTED | unlimited |
//! | `RPJRT_FAKE_TRITON_VERSION` | `1` or `2`: the Triton extension's args layout (see below) | `2` |
//! | `RPJRT_FAKE_PRINT_TEXT` | text `PRINT_ON` writes on stdout instead of its hello line, as is | unset |
//! | `RPJRT_FAKE_VERSION_STRUCT_SIZE` | `BYTES` put in `pjrt_api_version.struct_size` (`0` plays a plugin that leaves it unset) | `24`, the struct's size |
//! | `RPJRT_FAKE_API_STRUCT_SIZE` | `BYTES` put in `PJRT_Api.struct_size` whatever the slots exposed (a table that claims more than its version has); the slots past those exposed hold a function that aborts the process | the exposed slots' size |
//!
//! Entry names are the C names (`PJRT_Client_Compile`); an unknown name, a malformed
//! value or an unknown knob in a spec makes `GetPjrtApi` print the problem to stderr and
//! return null. A message in `FAIL`/`EVENT_ERROR` cannot contain `;`; an empty message
//! becomes `fake plugin: forced CODE from ENTRY`. `MIN_STRUCT_SIZE` can only raise the
//! minimum: the fake never reads past what it checked. It also accepts
//! `PJRT_NamedValue`, `PJRT_Program`, `PJRT_Buffer_MemoryLayout` and
//! `PJRT_ExecuteOptions`. `FAIL` works on every slot, implemented or not, except the
//! two that return void (`PJRT_Error_Destroy`, `PJRT_Error_Message`). `CRASH_ON` and
//! `HANG_ON` work on the same entries and on `PJRT_FFI_Register_Handler` and
//! `PJRT_Triton_Compile`; use them only in a child process.
//!
//! The default slot count uses the minor version each entry appeared in
//! (`rpjrt_sys::PJRT_API_ENTRIES`): 118 at 0.81, 128 at 0.90, all 138 from 0.110 or
//! with a major above 0; a minor below 0.57 gives an empty table unless
//! `RPJRT_FAKE_TABLE_SLOTS` says otherwise.
//!
//! Default extension sizes follow the configured minor: Layouts is 64 bytes before
//! 0.81, 72 before 0.93 and 80 from then on; FFI is 48; other known all-function
//! extensions get their 0.114 size; Profiler is 40 (the API pointer and a context id);
//! unknown types just the 24-byte base. Every function slot of an extension returns
//! UNIMPLEMENTED, except FFI's `register_handler` and Triton's `compile` (see below).
//!
//! Default plugin attributes, one of each `PJRT_NamedValue` kind: `xla_version` int64 2,
//! `stablehlo_current_version` int64 list `[1, 9, 0]`, `stablehlo_minimum_version`
//! `[0, 9, 0]`, `fake_plugin_name` string `rpjrt-fake`, `fake_is_fake` bool true,
//! `fake_ratio` float 0.5.
//!
//! # Behaviour
//!
//! - **Errors** start with the 0.107 vtable pointer (and the `PJRT_Error_*` entries work
//!   too). They carry no payloads.
//! - **Client create options** are all accepted and recorded (unless
//!   `RPJRT_FAKE_ALLOWED_OPTIONS` is set); `PJRT_Client_PlatformVersion` reports them as
//!   `fake 0.1.0; create options: name=int64:4, ...`. Options the fake acts on:
//!   `fake_device_count` int64 (default 2), `fake_addressable_device_count` int64 (the
//!   first N devices are addressable, the rest belong to process `index + 1`),
//!   `fake_process_index` int64 (default 0), `fake_kv_roundtrip` bool (put a value
//!   through the KV callbacks and read it back with get and, if given, try_get; any
//!   callback error or mismatch fails the create). Platform name `fake`, device kind
//!   `fake`; each device has memories `device` (default, kind id 0), `pinned_host` (1) and
//!   `unpinned_host` (2). Memories have no vtable (no user data).
//! - **FFI**: the FFI extension's `register_handler` works (its other functions return
//!   UNIMPLEMENTED). With `RPJRT_FAKE_FFI=ok` it calls the handler once, as XLA does at
//!   registration, with a call frame of XLA's layout (168 bytes; `api` at 16, `stage` at
//!   32, empty args, results and attributes) whose extension chain holds the metadata
//!   extension, and whose `api` is a minimal `XLA_FFI_Api` holding the configured
//!   version and `XLA_FFI_Error_Create`/`GetMessage`/`Destroy` (every other slot null).
//!   A handler error fails the registration with its code and message; a handler
//!   reporting a version newer than `RPJRT_FAKE_FFI_VERSION` is dropped silently
//!   (success, not recorded), like XLA; otherwise the target is recorded:
//!   [`ffi_targets`], or the exported `rpjrt_fake_ffi_targets(buf, cap)`, which writes
//!   `name\tplatform\tMAJOR.MINOR\ttraits` lines and returns their length. `refuse`
//!   fails every registration with INVALID_ARGUMENT; `drop` returns success and records
//!   nothing. Compiled custom calls are out of scope (the compiler is a toy).
//! - **Triton** (`Triton` in `RPJRT_FAKE_EXTENSIONS`): `PJRT_Triton_Compile` works. An
//!   empty module or arch, a non-positive count, or a module containing `tt.bad` is
//!   INVALID_ARGUMENT; otherwise the output is PTX-looking text naming the module's size
//!   and FNV-1a 64 hash, the options and `.target sm_<arch's letters and digits>`, with
//!   an entry `fake_triton_<hash>` and `.maxntid 32*num_warps`; shared memory is
//!   `1024 * num_stages * num_warps`. The strings are C++ `new[]` blocks the caller
//!   frees with `delete[]`, as with XLA. Version 2 (default) writes `out_path` null and 0
//!   after assembly, or, for an arch starting with `gfx`, no assembly and a path (to no
//!   real file); version 1 writes cluster dims `(num_ctas, 1, 1)` where version 2 has
//!   the path.
//! - **KV exchange** (`RPJRT_FAKE_KV=1`): a client created with int64 options
//!   `num_nodes` and `node_id` and non-null `kv_put`/`kv_get` callbacks puts
//!   `fake:device:<node_id>` = its local device count (`fake_addressable_device_count`,
//!   else `fake_device_count`), then gets every other node's key (timeout 10 s) and
//!   builds the global device list, node by node: each device reports its node as
//!   process index, only this node's devices are addressable, and the client's process
//!   index is `node_id`. A get error fails the create with the callback's code and a
//!   message naming the process it was waiting for.
//! - **Memory**: buffers in a `device` memory count against their device;
//!   `PJRT_Device_MemoryStats` reports bytes in use, peak, number of allocations and the
//!   largest one, and, under `RPJRT_FAKE_MEMORY_LIMIT`, the limit and the largest free
//!   block (limit minus use).
//! - **Buffers** are host memory (64-byte aligned). `BufferFromHostBuffer` copies during
//!   the call whatever the semantics, honours any `byte_strides` (negative included),
//!   accepts only the dense major-to-minor `device_layout`, and returns a complete
//!   `done_with_host_buffer` event. Sub-byte types take a byte per element; INVALID,
//!   TOKEN and unknown type codes are rejected. `IsOnCpu` is true; `UnsafePointer`,
//!   `OpaqueDeviceMemoryDataPointer` and the external reference count work; `Delete`
//!   frees the data unless external references remain. `CopyToDevice`/`CopyToMemory`
//!   refuse a copy to where the buffer already is.
//! - **Events** are always complete; `OnReady` calls the callback at once, on the
//!   calling thread. `RPJRT_FAKE_EVENT_ERROR` makes them complete with an error (for
//!   `PJRT_Buffer_ToHostBuffer` the data is then not copied). The exception is an event
//!   from `PJRT_Event_Create`: pending until `PJRT_Event_Set` (once only), which wakes
//!   `Await` and runs the `OnReady` callbacks registered meanwhile, on the setting thread.
//! - **Profiler**: with `Profiler` on the extension chain (`RPJRT_FAKE_EXTENSIONS=
//!   Layouts,FFI,Profiler`), its `profiler_api` works: create, start, stop (in that
//!   order, else FAILED_PRECONDITION), collect (as XLA's plugins do, a null `buffer` is
//!   pointed at the profiler's own copy; a caller's buffer gets a copy) and destroy. The
//!   data is always [`profile_bytes`]: an `XSpace` with plane [`PROFILE_PLANE`] holding
//!   three [`PROFILE_EVENT`] events, and host name `fake-host`.
//! - **DMA**: `PJRT_Client_DmaMap` records a host range (refusing a null or empty one, or
//!   one overlapping a mapped range); `PJRT_Client_DmaUnmap` refuses an address that is
//!   not the start of a mapped range.
//! - **Compile** accepts format `mlir` whose code contains `func`; code containing
//!   `FAKE_COMPILE_ERROR` fails with INVALID_ARGUMENT and a compiler-like message
//!   (`program.mlir:L:C: error: ...`). Compile options must be a `CompileOptionsProto`
//!   with `num_replicas` and `num_partitions` at least 1 (real plugins abort on an empty
//!   blob; the fake reports it); a `device_assignment` is honoured, else devices
//!   `0..replicas*partitions` are used, replica-major.
//! - **Executables** compute one thing: **one output, a copy of the first argument**,
//!   on every device they run on. If the `@main` signature is readable text, the number
//!   and static types of its parameters are checked at execute time (mismatch:
//!   INVALID_ARGUMENT like real plugins) and the output type/dimensions are those of the
//!   first parameter; otherwise any number (at least one) of arguments is accepted and
//!   `OutputElementTypes`/`OutputDimensions`/`ParameterMemoryKinds` return
//!   UNIMPLEMENTED. The name is the `module @name` (else `fake_executable`); the
//!   fingerprint is a hash of format, code and options; `OptimizedProgram` returns the
//!   compiled text with format `mlir`; every memory kind is `device`.
//!   `Serialize` gives [`SERIALIZED_MAGIC`] followed by the format, the compile options
//!   and the code; `DeserializeAndLoad` (honouring overridden options) compiles that
//!   again and `GetCompileOptions` returns the options as given; blobs are freed by the
//!   deleter handed out with them. `ExecuteContext_Create`/`Destroy` work (the context
//!   is otherwise ignored).
//! - Every entry checks `args` for null and `args->struct_size` against the struct's
//!   0.114 size (or the knob's larger minimum) before reading anything, and every handle
//!   against a registry of live handles, so a stale or foreign pointer gets
//!   INVALID_ARGUMENT instead of undefined behaviour. Panics are caught at every entry and
//!   become INTERNAL errors. Entries without an implementation return UNIMPLEMENTED
//!   `fake plugin: <name> is not implemented` (see [`implemented_entries`]).
//! - Everything is freed by its destroy call; [`live_handle_count`] (exported as
//!   `rpjrt_fake_live_handle_count`) counts the caller-owned handles still alive
//!   (errors, clients, buffers, events, executables, execute contexts, serialized
//!   blobs, XLA FFI errors), so a test can check it leaked none.
//!
//! A second cdylib, the example `rpjrt_no_symbol` (`cargo build --examples`), exports
//! no `GetPjrtApi`, for testing that failure.

/// An INVALID_ARGUMENT `Fail` with a `format!` message.
macro_rules! invalid {
    ($($fmt:tt)*) => {
        $crate::error::invalid(format!($($fmt)*))
    };
}

/// Returns an INVALID_ARGUMENT `Fail` with a `format!` message from the function.
macro_rules! bail {
    ($($fmt:tt)*) => {
        return Err(invalid!($($fmt)*))
    };
}

#[macro_use]
mod registry;
mod error;
#[macro_use]
mod state;
mod buffer;
mod client;
pub mod config;
mod exec;
mod external;
mod ffi;
mod memory;
mod mlir;
mod named;
mod plugin;
mod profiler;
mod proto;
mod table;
mod triton;

use std::os::raw::{c_char, c_int};
use std::panic::catch_unwind;

use rpjrt_sys as sys;

pub use client::{DEFAULT_DEVICE_COUNT, DEVICE_KIND, MEMORY_KINDS, PLATFORM_NAME};
pub use config::{knobs, AttrValue, Attribute, Config, ExtensionSpec, FfiMode, ForcedError};
pub use exec::{COMPILE_ERROR_MARKER, SERIALIZED_MAGIC};
pub use ffi::{ffi_targets, FfiTarget};
pub use profiler::{profile_bytes, PROFILE_EVENT, PROFILE_PLANE};

/// The plugin entry point: the function table for the configuration in force (read from
/// the environment on the first call), or null if `RPJRT_FAKE_NULL_API` is set or the
/// knobs are malformed (the problem is printed to stderr).
#[no_mangle]
pub extern "C" fn GetPjrtApi() -> *const sys::PJRT_Api {
    catch_unwind(|| match state::current() {
        Ok(s) => {
            state::trap(s, "GetPjrtApi");
            match s.config.null_api {
                true => std::ptr::null(),
                false => s.api_ptr(),
            }
        }
        Err(e) => {
            eprintln!("rpjrt-fake-plugin: bad configuration: {e}");
            std::ptr::null()
        }
    })
    .unwrap_or(std::ptr::null())
}

/// Makes `config` the configuration in force and returns its table (null if
/// `config.null_api`). Tables handed out before stay valid, but every entry follows the
/// configuration in force, so reconfigure only between tests, with no handles alive.
pub fn configure(config: Config) -> Result<*const sys::PJRT_Api, String> {
    let s = state::install(config)?;
    Ok(if s.config.null_api {
        std::ptr::null()
    } else {
        s.api_ptr()
    })
}

/// [`configure`] from `NAME=VALUE` lines using the knob names (as in the environment).
pub fn configure_from_spec(spec: &str) -> Result<*const sys::PJRT_Api, String> {
    configure(Config::from_spec(spec)?)
}

/// Replaces the configuration in force, from `NAME=VALUE` lines (knob names as in the
/// environment; `len` bytes at `spec`, no terminator needed). Returns 0 on success, -1
/// (printing why to stderr) if the spec is malformed. The next `GetPjrtApi` returns the
/// new table. Copying the `.so` to distinct paths gives independent instances in one
/// process, each with its own configuration.
///
/// # Safety
/// `spec` must point at `len` readable bytes (or be null with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn rpjrt_fake_configure(spec: *const c_char, len: usize) -> c_int {
    catch_unwind(|| {
        // SAFETY: the caller promises len readable bytes at spec.
        let text = unsafe { named::read_str(spec, len) };
        match configure_from_spec(&text) {
            Ok(_) => 0,
            Err(e) => {
                eprintln!("rpjrt-fake-plugin: bad configuration: {e}");
                -1
            }
        }
    })
    .unwrap_or(-1)
}

/// How many caller-owned handles (see [`live_handles`]) are alive in this instance of
/// the plugin.
pub fn live_handle_count() -> usize {
    registry::live_counts().values().sum()
}

/// [`live_handle_count`], exported for clients that load the cdylib.
#[no_mangle]
pub extern "C" fn rpjrt_fake_live_handle_count() -> usize {
    catch_unwind(live_handle_count).unwrap_or(usize::MAX)
}

/// Live caller-owned handles by C type name (`"PJRT_Buffer"` → 2).
pub fn live_handles() -> std::collections::BTreeMap<&'static str, usize> {
    registry::live_counts()
}

/// Names of the entries with a real implementation (the others return UNIMPLEMENTED).
pub fn implemented_entries() -> Vec<&'static str> {
    table::IMPLEMENTED.to_vec()
}

/// The slot index of an entry name in `PJRT_Api`, if the name is an entry.
pub fn slot_index(name: &str) -> Option<usize> {
    state::slot_index(name)
}

/// The `dlopen` value of `RPJRT_FAKE_HANG_ON`: an initializer that never returns, run by the
/// system's loader while it loads the library (and holds its lock), as a plugin whose
/// static constructors wait on something that never comes does.
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static HANG_WHILE_LOADING: extern "C" fn() = {
    extern "C" fn hang_while_loading() {
        let asked = std::env::var("RPJRT_FAKE_HANG_ON")
            .is_ok_and(|v| v.split(',').any(|e| e.trim() == "dlopen"));
        if asked {
            eprintln!("rpjrt-fake-plugin: dlopen: hanging (RPJRT_FAKE_HANG_ON)");
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
    }
    hang_while_loading
};
