//! The Profiler extension's profiler API: create, start, stop, collect and destroy work
//! and hand back a fixed `XSpace` (one plane `/device:FAKE:0` with one line of three
//! `fake_kernel` events, host name `fake-host`), so that clients can test collecting a
//! plugin's profile.

use std::ffi::{c_char, c_int};
use std::panic::catch_unwind;

use rpjrt_sys as sys;

/// The plane name in the fake's profile.
pub const PROFILE_PLANE: &str = "/device:FAKE:0";
/// The event name in the fake's profile (three events).
pub const PROFILE_EVENT: &str = "fake_kernel";

struct Profiler {
    started: bool,
    stopped: bool,
    collected: Vec<u8>,
}

struct ProfError {
    code: c_int,
    message: String,
}

fn fail(code: c_int, message: &str) -> *mut sys::PLUGIN_Profiler_Error {
    Box::into_raw(Box::new(ProfError {
        code,
        message: message.to_string(),
    }))
    .cast()
}

const INVALID_ARGUMENT: c_int = sys::PJRT_Error_Code_INVALID_ARGUMENT as c_int;
const FAILED_PRECONDITION: c_int = sys::PJRT_Error_Code_FAILED_PRECONDITION as c_int;
const INTERNAL: c_int = sys::PJRT_Error_Code_INTERNAL as c_int;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn int_field(out: &mut Vec<u8>, field: u64, v: u64) {
    varint(out, field << 3);
    varint(out, v);
}

fn bytes_field(out: &mut Vec<u8>, field: u64, b: &[u8]) {
    varint(out, (field << 3) | 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// The serialized `XSpace` every collection returns.
pub fn profile_bytes() -> Vec<u8> {
    let mut line = Vec::new();
    int_field(&mut line, 1, 1); // id
    bytes_field(&mut line, 2, b"fake ops"); // name
    int_field(&mut line, 3, 1_000_000); // timestamp_ns
    for k in 0..3u64 {
        let mut event = Vec::new();
        int_field(&mut event, 1, 1); // metadata_id
        int_field(&mut event, 2, k * 2_000_000); // offset_ps
        int_field(&mut event, 3, 1_000_000); // duration_ps
        bytes_field(&mut line, 4, &event);
    }
    let mut metadata = Vec::new();
    int_field(&mut metadata, 1, 1);
    bytes_field(&mut metadata, 2, PROFILE_EVENT.as_bytes());
    let mut entry = Vec::new();
    int_field(&mut entry, 1, 1); // map key
    bytes_field(&mut entry, 2, &metadata);
    let mut plane = Vec::new();
    int_field(&mut plane, 1, 1);
    bytes_field(&mut plane, 2, PROFILE_PLANE.as_bytes());
    bytes_field(&mut plane, 3, &line);
    bytes_field(&mut plane, 4, &entry);
    let mut space = Vec::new();
    bytes_field(&mut space, 1, &plane);
    bytes_field(&mut space, 4, b"fake-host");
    space
}

/// Runs `f` on the profiler of `args`, turning panics and a null profiler into errors.
fn with_profiler(
    profiler: *mut sys::PLUGIN_Profiler,
    f: impl FnOnce(&mut Profiler) -> *mut sys::PLUGIN_Profiler_Error,
) -> *mut sys::PLUGIN_Profiler_Error {
    if profiler.is_null() {
        return fail(INVALID_ARGUMENT, "fake profiler: null profiler");
    }
    // SAFETY: a non-null profiler is one `create` made (API contract), used by one
    // thread at a time.
    let p = unsafe { &mut *profiler.cast::<Profiler>() };
    f(p)
}

unsafe extern "C" fn error_destroy(args: *mut sys::PLUGIN_Profiler_Error_Destroy_Args) {
    let _ = catch_unwind(|| {
        // SAFETY: args points at a valid args struct (API contract).
        let Some(a) = (unsafe { args.as_ref() }) else {
            return;
        };
        if !a.error.is_null() {
            // SAFETY: errors are boxed `ProfError`s, destroyed once (API contract).
            drop(unsafe { Box::from_raw(a.error.cast::<ProfError>()) });
        }
    });
}

unsafe extern "C" fn error_message(args: *mut sys::PLUGIN_Profiler_Error_Message_Args) {
    let _ = catch_unwind(|| {
        // SAFETY: args points at a valid args struct (API contract).
        let Some(a) = (unsafe { args.as_mut() }) else {
            return;
        };
        // SAFETY: a live error made by `fail` (API contract).
        if let Some(e) = unsafe { a.error.cast::<ProfError>().as_ref() } {
            a.message = e.message.as_ptr().cast::<c_char>();
            a.message_size = e.message.len();
        }
    });
}

unsafe extern "C" fn error_get_code(
    args: *mut sys::PLUGIN_Profiler_Error_GetCode_Args,
) -> *mut sys::PLUGIN_Profiler_Error {
    catch_unwind(|| {
        // SAFETY: args points at a valid args struct (API contract).
        let Some(a) = (unsafe { args.as_mut() }) else {
            return fail(INVALID_ARGUMENT, "fake profiler: null args");
        };
        // SAFETY: a live error made by `fail` (API contract).
        match unsafe { a.error.cast::<ProfError>().as_ref() } {
            Some(e) => {
                a.code = e.code;
                std::ptr::null_mut()
            }
            None => fail(INVALID_ARGUMENT, "fake profiler: null error"),
        }
    })
    .unwrap_or_else(|_| fail(INTERNAL, "fake profiler: panic"))
}

unsafe extern "C" fn create(
    args: *mut sys::PLUGIN_Profiler_Create_Args,
) -> *mut sys::PLUGIN_Profiler_Error {
    catch_unwind(|| {
        // SAFETY: args points at a valid args struct (API contract).
        let Some(a) = (unsafe { args.as_mut() }) else {
            return fail(INVALID_ARGUMENT, "fake profiler: null args");
        };
        if a.struct_size < sys::PLUGIN_Profiler_Create_Args_STRUCT_SIZE {
            return fail(INVALID_ARGUMENT, "fake profiler: create args too small");
        }
        let p = Box::new(Profiler {
            started: false,
            stopped: false,
            collected: Vec::new(),
        });
        a.profiler = Box::into_raw(p).cast();
        std::ptr::null_mut()
    })
    .unwrap_or_else(|_| fail(INTERNAL, "fake profiler: panic"))
}

unsafe extern "C" fn destroy(
    args: *mut sys::PLUGIN_Profiler_Destroy_Args,
) -> *mut sys::PLUGIN_Profiler_Error {
    catch_unwind(|| {
        // SAFETY: args points at a valid args struct (API contract).
        let Some(a) = (unsafe { args.as_ref() }) else {
            return fail(INVALID_ARGUMENT, "fake profiler: null args");
        };
        if !a.profiler.is_null() {
            // SAFETY: a profiler `create` made, destroyed once (API contract).
            drop(unsafe { Box::from_raw(a.profiler.cast::<Profiler>()) });
        }
        std::ptr::null_mut()
    })
    .unwrap_or_else(|_| fail(INTERNAL, "fake profiler: panic"))
}

unsafe extern "C" fn start(
    args: *mut sys::PLUGIN_Profiler_Start_Args,
) -> *mut sys::PLUGIN_Profiler_Error {
    catch_unwind(|| {
        // SAFETY: args points at a valid args struct (API contract).
        let Some(a) = (unsafe { args.as_ref() }) else {
            return fail(INVALID_ARGUMENT, "fake profiler: null args");
        };
        with_profiler(a.profiler, |p| {
            if p.started {
                return fail(FAILED_PRECONDITION, "fake profiler: already started");
            }
            p.started = true;
            std::ptr::null_mut()
        })
    })
    .unwrap_or_else(|_| fail(INTERNAL, "fake profiler: panic"))
}

unsafe extern "C" fn stop(
    args: *mut sys::PLUGIN_Profiler_Stop_Args,
) -> *mut sys::PLUGIN_Profiler_Error {
    catch_unwind(|| {
        // SAFETY: args points at a valid args struct (API contract).
        let Some(a) = (unsafe { args.as_ref() }) else {
            return fail(INVALID_ARGUMENT, "fake profiler: null args");
        };
        with_profiler(a.profiler, |p| {
            if !p.started {
                return fail(FAILED_PRECONDITION, "fake profiler: stop before start");
            }
            p.stopped = true;
            std::ptr::null_mut()
        })
    })
    .unwrap_or_else(|_| fail(INTERNAL, "fake profiler: panic"))
}

/// As XLA's plugins do: with `buffer` null, points it at the profiler's own copy; with a
/// caller's buffer of at least `buffer_size_in_bytes`, copies into it.
unsafe extern "C" fn collect_data(
    args: *mut sys::PLUGIN_Profiler_CollectData_Args,
) -> *mut sys::PLUGIN_Profiler_Error {
    catch_unwind(|| {
        // SAFETY: args points at a valid args struct (API contract).
        let Some(a) = (unsafe { args.as_mut() }) else {
            return fail(INVALID_ARGUMENT, "fake profiler: null args");
        };
        let (buffer, size) = (a.buffer, a.buffer_size_in_bytes);
        let mut out = (std::ptr::null_mut(), 0usize);
        let e = with_profiler(a.profiler, |p| {
            if !p.stopped {
                return fail(FAILED_PRECONDITION, "fake profiler: collect before stop");
            }
            if p.collected.is_empty() {
                p.collected = profile_bytes();
            }
            if buffer.is_null() {
                out = (p.collected.as_mut_ptr(), p.collected.len());
            } else if size < p.collected.len() {
                return fail(INVALID_ARGUMENT, "fake profiler: buffer too small");
            } else {
                // SAFETY: the caller's buffer holds `size` bytes (API contract).
                unsafe {
                    std::ptr::copy_nonoverlapping(p.collected.as_ptr(), buffer, p.collected.len())
                };
                out = (buffer, p.collected.len());
            }
            std::ptr::null_mut()
        });
        if e.is_null() {
            (a.buffer, a.buffer_size_in_bytes) = out;
        }
        e
    })
    .unwrap_or_else(|_| fail(INTERNAL, "fake profiler: panic"))
}

struct Api(sys::PLUGIN_Profiler_Api);
// SAFETY: the table is immutable; its only data pointer (`priv_`) is null.
unsafe impl Sync for Api {}

static API: Api = Api(sys::PLUGIN_Profiler_Api {
    struct_size: sys::PLUGIN_Profiler_Api_STRUCT_SIZE,
    priv_: std::ptr::null_mut(),
    error_destroy: Some(error_destroy),
    error_message: Some(error_message),
    error_get_code: Some(error_get_code),
    create: Some(create),
    destroy: Some(destroy),
    start: Some(start),
    stop: Some(stop),
    collect_data: Some(collect_data),
});

/// The address of the fake's profiler API table, for the extension's `profiler_api`.
pub(crate) fn api_address() -> usize {
    &API.0 as *const sys::PLUGIN_Profiler_Api as usize
}
