//! The FFI extension's `register_handler`, with the metadata query XLA makes, and the
//! minimal XLA FFI API table the handler sees during that query.

use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::catch_unwind;
use std::sync::Mutex;

use rpjrt_sys as sys;

use crate::config::FfiMode;
use crate::error::Fail;
use crate::named::read_str;
use crate::registry;

/// A handler registration the fake accepted (`RPJRT_FAKE_FFI=ok`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FfiTarget {
    /// Custom-call target name.
    pub name: String,
    /// Platform name as given (`cpu`, `host`, `cuda`, ...).
    pub platform: String,
    /// `(major, minor)` FFI version the handler reported in its metadata.
    pub api_version: (i32, i32),
    /// Handler traits the handler reported.
    pub traits: u32,
}

static TARGETS: Mutex<Vec<FfiTarget>> = Mutex::new(Vec::new());

/// Handlers registered so far in this instance of the plugin, oldest first.
pub fn ffi_targets() -> Vec<FfiTarget> {
    TARGETS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The object behind an `XLA_FFI_Error*` made by the fake's `XLA_FFI_Error_Create`.
pub(crate) struct FfiError {
    code: sys::XLA_FFI_Error_Code,
    message: CString,
}

handles! { XLA_FFI_Error => FfiError, }

unsafe extern "C" fn error_create(
    args: *mut sys::XLA_FFI_Error_Create_Args,
) -> *mut sys::XLA_FFI_Error {
    catch_unwind(|| {
        // SAFETY: a non-null args points at an XLA_FFI_Error_Create_Args (FFI contract).
        let a = unsafe { args.as_ref() }?;
        // SAFETY: the message is NUL-terminated (FFI contract).
        let message = (!a.message.is_null()).then(|| unsafe { CStr::from_ptr(a.message) });
        let message = message.map_or_else(CString::default, CStr::to_owned);
        Some(registry::new(FfiError {
            code: a.errc,
            message,
        }))
    })
    .ok()
    .flatten()
    .unwrap_or(std::ptr::null_mut())
}

unsafe extern "C" fn error_get_message(args: *mut sys::XLA_FFI_Error_GetMessage_Args) {
    let _ = catch_unwind(|| {
        // SAFETY: a non-null args points at an XLA_FFI_Error_GetMessage_Args.
        if let Some(a) = unsafe { args.as_mut() } {
            a.message = registry::get(a.error).map_or(c"".as_ptr(), |e| e.message.as_ptr());
        }
    });
}

unsafe extern "C" fn error_destroy(args: *mut sys::XLA_FFI_Error_Destroy_Args) {
    // SAFETY: a non-null args points at an XLA_FFI_Error_Destroy_Args.
    let _ = catch_unwind(|| unsafe { args.as_ref() }.map(|a| registry::take(a.error)));
}

/// The FFI API table the fake hands to handlers at `version`: only the version and the
/// three error functions are filled in.
pub(crate) fn api(version: (i32, i32)) -> sys::XLA_FFI_Api {
    // SAFETY: every field of XLA_FFI_Api is an integer, a raw pointer or an Option of a
    // function pointer, all valid when zeroed.
    let mut api: sys::XLA_FFI_Api = unsafe { std::mem::zeroed() };
    api.struct_size = sys::XLA_FFI_Api_STRUCT_SIZE;
    api.api_version = sys::XLA_FFI_Api_Version {
        struct_size: sys::XLA_FFI_Api_Version_STRUCT_SIZE,
        extension_start: std::ptr::null_mut(),
        major_version: version.0,
        minor_version: version.1,
    };
    api.XLA_FFI_Error_Create = Some(error_create);
    api.XLA_FFI_Error_GetMessage = Some(error_get_message);
    api.XLA_FFI_Error_Destroy = Some(error_destroy);
    api
}

/// Calls `handler` once for its metadata, like XLA at registration: a call frame of
/// the real layout whose extension chain holds the metadata extension, whose `api` has
/// the fake's FFI version, and with no arguments, results or attributes.
fn query_metadata(
    handler: sys::XLA_FFI_Handler,
    api: &sys::XLA_FFI_Api,
) -> Result<sys::XLA_FFI_Metadata, Fail> {
    // SAFETY: all-zero is valid for these plain C structs (integers, pointers).
    let mut metadata: sys::XLA_FFI_Metadata = unsafe { std::mem::zeroed() };
    metadata.struct_size = sys::XLA_FFI_Metadata_STRUCT_SIZE;
    metadata.api_version.struct_size = sys::XLA_FFI_Api_Version_STRUCT_SIZE;
    let mut ext = sys::XLA_FFI_Metadata_Extension {
        extension_base: sys::XLA_FFI_Extension_Base {
            struct_size: sys::XLA_FFI_Metadata_Extension_STRUCT_SIZE,
            r#type: sys::XLA_FFI_Extension_Metadata,
            next: std::ptr::null_mut(),
        },
        metadata: &mut metadata,
    };
    // SAFETY: as above.
    let mut frame: sys::XLA_FFI_CallFrame = unsafe { std::mem::zeroed() };
    frame.struct_size = sys::XLA_FFI_CallFrame_STRUCT_SIZE;
    frame.extension_start = &mut ext.extension_base;
    frame.api = api;
    frame.args.struct_size = sys::XLA_FFI_Args_STRUCT_SIZE;
    frame.rets.struct_size = sys::XLA_FFI_Rets_STRUCT_SIZE;
    frame.attrs.struct_size = sys::XLA_FFI_Attrs_STRUCT_SIZE;
    // SAFETY: the caller registered this pointer as an XLA FFI handler; the frame and
    // everything it points at outlive the call.
    let err = unsafe { handler(&mut frame) };
    if err.is_null() {
        return Ok(metadata);
    }
    Err(match registry::take(err) {
        Some(e) => Fail::new(e.code, e.message.to_string_lossy().into_owned()),
        None => {
            crate::error::internal("the handler returned an error not made by XLA_FFI_Error_Create")
        }
    })
}

entry!(PJRT_FFI_Register_Handler, |a, state| {
    // SAFETY: per the C API, the names point at their sizes' bytes.
    let name = unsafe { read_str(a.target_name, a.target_name_size) };
    // SAFETY: as above.
    let platform = unsafe { read_str(a.platform_name, a.platform_name_size) };
    if name.is_empty() {
        bail!("fake plugin: FFI handler with an empty target name");
    }
    if a.handler.is_null() {
        bail!("fake plugin: FFI handler {name:?} is null");
    }
    match state.config.ffi {
        FfiMode::Refuse => {
            bail!("fake plugin: FFI handler {name:?} refused (RPJRT_FAKE_FFI=refuse)")
        }
        FfiMode::Drop => return Ok(()),
        FfiMode::Ok => {}
    }
    // SAFETY: the caller passes an XLA_FFI_Handler function as `handler`.
    let handler = unsafe { std::mem::transmute::<*mut c_void, sys::XLA_FFI_Handler>(a.handler) };
    let meta = query_metadata(handler, &state.ffi_api).map_err(|f| {
        f.context(format!(
            "fake plugin: FFI handler {name:?} failed its metadata call"
        ))
    })?;
    let api_version = (
        meta.api_version.major_version,
        meta.api_version.minor_version,
    );
    // Newer than the runtime: XLA drops it without a word.
    if api_version <= state.config.ffi_version {
        let target = FfiTarget {
            name,
            platform,
            api_version,
            traits: meta.traits,
        };
        TARGETS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(target);
    }
});

/// Writes the registered targets as `name\tplatform\tMAJOR.MINOR\ttraits` lines into
/// `buf` (up to `cap` bytes, no terminator) and returns the full length, so a caller can
/// size its buffer with a first call of capacity 0.
///
/// # Safety
/// `buf` must be writable for `cap` bytes (or null with `cap` 0).
#[no_mangle]
pub unsafe extern "C" fn rpjrt_fake_ffi_targets(buf: *mut c_char, cap: usize) -> usize {
    catch_unwind(|| {
        let text: String = ffi_targets()
            .iter()
            .map(|t| {
                format!(
                    "{}\t{}\t{}.{}\t{}\n",
                    t.name, t.platform, t.api_version.0, t.api_version.1, t.traits
                )
            })
            .collect();
        let n = text.len().min(cap);
        if n > 0 && !buf.is_null() {
            // SAFETY: the caller promises `cap` writable bytes at buf; n <= cap.
            unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n) };
        }
        text.len()
    })
    .unwrap_or(0)
}
