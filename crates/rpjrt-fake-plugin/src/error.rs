//! `PJRT_Error` objects and the error values the entries pass around before they become
//! one.

use std::ffi::c_void;
use std::os::raw::c_char;

use rpjrt_sys as sys;

use crate::config::ForcedError;
use crate::registry::{self, Kind};

/// An error on its way out of an entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fail {
    pub code: sys::PJRT_Error_Code,
    pub message: String,
}

impl Fail {
    pub fn new(code: sys::PJRT_Error_Code, message: impl Into<String>) -> Fail {
        Fail {
            code,
            message: message.into(),
        }
    }

    /// Turns the error into a caller-owned `PJRT_Error*`.
    pub fn into_raw(self) -> *mut sys::PJRT_Error {
        new_error(self.code, self.message)
    }
}

impl From<&ForcedError> for Fail {
    fn from(f: &ForcedError) -> Fail {
        Fail::new(f.code, f.message.clone())
    }
}

pub(crate) fn invalid(message: impl Into<String>) -> Fail {
    Fail::new(sys::PJRT_Error_Code_INVALID_ARGUMENT, message)
}

pub(crate) fn unimplemented(message: impl Into<String>) -> Fail {
    Fail::new(sys::PJRT_Error_Code_UNIMPLEMENTED, message)
}

pub(crate) fn failed_precondition(message: impl Into<String>) -> Fail {
    Fail::new(sys::PJRT_Error_Code_FAILED_PRECONDITION, message)
}

pub(crate) fn internal(message: impl Into<String>) -> Fail {
    Fail::new(sys::PJRT_Error_Code_INTERNAL, message)
}

/// The object behind a `PJRT_Error*`. Starts with the vtable pointer that PJRT 0.107 put
/// at the front of `PJRT_Error`.
#[repr(C)]
pub(crate) struct FakeError {
    vtable: *const sys::PJRT_Error_FunctionTable,
    pub code: sys::PJRT_Error_Code,
    pub message: String,
}

struct SyncTable(sys::PJRT_Error_FunctionTable);

// SAFETY: the table is immutable and its only pointer field (extension_start) is null.
unsafe impl Sync for SyncTable {}

static ERROR_VTABLE: SyncTable = SyncTable(sys::PJRT_Error_FunctionTable {
    struct_size: sys::PJRT_Error_FunctionTable_STRUCT_SIZE,
    instance_size: sys::PJRT_Error_STRUCT_SIZE,
    extension_start: std::ptr::null_mut(),
    destroy: Some(vtable_destroy),
    message: Some(vtable_message),
    get_code: Some(vtable_get_code),
    for_each_payload: Some(vtable_for_each_payload),
});

/// Allocates a caller-owned error.
pub(crate) fn new_error(code: sys::PJRT_Error_Code, message: String) -> *mut sys::PJRT_Error {
    let raw = Box::into_raw(Box::new(FakeError {
        vtable: &ERROR_VTABLE.0,
        code,
        message,
    }));
    registry::register(raw, Kind::Error);
    raw.cast()
}

/// The live error behind `error`, if it is one.
pub(crate) fn lookup(error: *const sys::PJRT_Error) -> Option<&'static FakeError> {
    if error.is_null() || !registry::is_live(error.cast::<FakeError>(), Kind::Error) {
        return None;
    }
    // SAFETY: the registry says `error` came from `new_error` and has not been destroyed;
    // the caller owns it and promises not to destroy it while using what it returns.
    Some(unsafe { &*error.cast::<FakeError>() })
}

/// Frees an error made by `new_error`; a null, unknown or already freed pointer is
/// ignored (and reported on stderr, since the call has no way to return an error).
pub(crate) fn destroy_error(error: *mut sys::PJRT_Error) {
    if error.is_null() {
        return;
    }
    if registry::unregister(error.cast::<FakeError>(), Kind::Error) {
        // SAFETY: it was live in the registry, so it came from Box::into_raw in
        // `new_error` and nobody has freed it; unregistering first makes this the only
        // free.
        drop(unsafe { Box::from_raw(error.cast::<FakeError>()) });
    } else {
        eprintln!("rpjrt-fake-plugin: PJRT_Error_Destroy on {error:p}, which is not a live error");
    }
}

unsafe extern "C" fn vtable_destroy(error: *mut sys::PJRT_Error) {
    let _ = std::panic::catch_unwind(|| destroy_error(error));
}

unsafe extern "C" fn vtable_message(
    error: *const sys::PJRT_Error,
    message: *mut *const c_char,
    message_size: *mut usize,
) {
    let _ = std::panic::catch_unwind(|| {
        let (ptr, len) = match lookup(error) {
            Some(e) => (e.message.as_ptr().cast::<c_char>(), e.message.len()),
            None => (c"".as_ptr(), 0),
        };
        if !message.is_null() && !message_size.is_null() {
            // SAFETY: the caller passes two writable out-pointers (checked non-null).
            unsafe {
                *message = ptr;
                *message_size = len;
            }
        }
    });
}

unsafe extern "C" fn vtable_get_code(error: *const sys::PJRT_Error) -> sys::PJRT_Error_Code {
    std::panic::catch_unwind(|| {
        lookup(error)
            .map(|e| e.code)
            .unwrap_or(sys::PJRT_Error_Code_UNKNOWN)
    })
    .unwrap_or(sys::PJRT_Error_Code_UNKNOWN)
}

unsafe extern "C" fn vtable_for_each_payload(
    _error: *const sys::PJRT_Error,
    _visitor: Option<sys::PJRT_Error_PayloadVisitor>,
    _user_arg: *mut c_void,
) {
    // Fake errors carry no payloads.
}

/// The function the fake hands to callbacks as `PJRT_CallbackError`.
pub(crate) unsafe extern "C" fn callback_error(
    code: sys::PJRT_Error_Code,
    message: *const c_char,
    message_size: usize,
) -> *mut sys::PJRT_Error {
    std::panic::catch_unwind(|| {
        let text = if message.is_null() || message_size == 0 {
            String::new()
        } else {
            // SAFETY: the callback passes `message_size` readable bytes at `message`.
            let bytes = unsafe { std::slice::from_raw_parts(message.cast::<u8>(), message_size) };
            String::from_utf8_lossy(bytes).into_owned()
        };
        new_error(code, text)
    })
    .unwrap_or(std::ptr::null_mut())
}

/// Turns an error a caller's callback returned (made with `callback_error`) into a
/// `Fail` prefixed with `context`, freeing it.
pub(crate) fn take_callback_error(error: *mut sys::PJRT_Error, context: &str) -> Fail {
    let fail = match lookup(error) {
        Some(e) => Fail::new(e.code, format!("{context}: {}", e.message)),
        None => {
            return internal(format!(
                "{context}: the callback returned an error not made with PJRT_CallbackError"
            ))
        }
    };
    destroy_error(error);
    fail
}
