//! `PJRT_Error` objects and the error values the entries pass around before they become
//! one.

use std::ffi::c_void;
use std::os::raw::c_char;

use rpjrt_sys as sys;

use crate::config::ForcedError;
use crate::registry;

/// An error on its way out of an entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fail {
    pub code: sys::PJRT_Error_Code,
    pub message: String,
}

impl Fail {
    pub fn new(code: sys::PJRT_Error_Code, message: impl Into<String>) -> Fail {
        let message = message.into();
        Fail { code, message }
    }

    /// The same error with `context: ` in front of its message.
    pub fn context(self, context: impl std::fmt::Display) -> Fail {
        Fail::new(self.code, format!("{context}: {}", self.message))
    }

    /// Turns the error into a caller-owned `PJRT_Error*`.
    pub fn into_raw(self) -> *mut sys::PJRT_Error {
        registry::new(FakeError {
            vtable: &ERROR_VTABLE.0,
            code: self.code,
            message: self.message,
        })
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

handles! { PJRT_Error => FakeError, }

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

/// The live error behind `error`, if it is one.
pub(crate) fn lookup(error: *const sys::PJRT_Error) -> Option<&'static FakeError> {
    registry::get(error.cast_mut()).ok()
}

/// Frees an error; a null, unknown or already freed pointer is ignored (and reported on
/// stderr, since the call has no way to return an error).
pub(crate) fn destroy_error(error: *mut sys::PJRT_Error) {
    if !error.is_null() && registry::take(error).is_none() {
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
        let text = lookup(error).map_or("", |e| e.message.as_str());
        if !message.is_null() && !message_size.is_null() {
            // SAFETY: the caller passes two writable out-pointers (checked non-null).
            unsafe { (*message, *message_size) = (text.as_ptr().cast(), text.len()) };
        }
    });
}

unsafe extern "C" fn vtable_get_code(error: *const sys::PJRT_Error) -> sys::PJRT_Error_Code {
    let code = || lookup(error).map_or(sys::PJRT_Error_Code_UNKNOWN, |e| e.code);
    std::panic::catch_unwind(code).unwrap_or(sys::PJRT_Error_Code_UNKNOWN)
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
    // SAFETY: the callback passes `message_size` readable bytes at `message`.
    let text = || unsafe { crate::named::read_str(message, message_size) };
    std::panic::catch_unwind(|| Fail::new(code, text()).into_raw()).unwrap_or(std::ptr::null_mut())
}

/// Turns an error a caller's callback returned (made with `callback_error`) into a
/// `Fail` prefixed with `context`, freeing it.
pub(crate) fn take_callback_error(error: *mut sys::PJRT_Error, context: &str) -> Fail {
    match registry::take(error) {
        Some(e) => Fail::new(e.code, format!("{context}: {}", e.message)),
        None => internal(format!(
            "{context}: the callback returned an error not made with PJRT_CallbackError"
        )),
    }
}
