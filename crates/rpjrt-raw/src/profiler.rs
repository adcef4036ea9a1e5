//! The Profiler extension: the plugin's own profiler, through the profiler plugin API the
//! extension points at (create, start, stop, collect, destroy). What it collects is a
//! serialized `XSpace` proto, handed over as bytes.
//!
//! The API table lives in the plugin and is copied once (after checking that the
//! plugin's `struct_size` covers every slot); errors are the API's own error objects,
//! read (code, message) and destroyed here.

use std::mem::{offset_of, size_of};
use std::ptr::NonNull;

use rpjrt_sys as sys;

use super::extension::Extension;
use super::Api;
use crate::error::{Code, Error, Result};

/// The Profiler extension for the typed extension access (`Api::extension`).
pub struct ProfilerExtension;

// SAFETY: `PJRT_Profiler_Extension` is rpjrt-sys's declaration of the Profiler extension
// (type 1); rpjrt reads only `profiler_api`, which every version of the extension has.
unsafe impl Extension for ProfilerExtension {
    const TYPE_ID: i32 = sys::PJRT_Extension_Type_Profiler as i32;
    const NAME: &'static str = "PJRT_Profiler_Extension";
    type Struct = sys::PJRT_Profiler_Extension;
    fn required_size(_minor: i32) -> usize {
        offset_of!(sys::PJRT_Profiler_Extension, profiler_api) + size_of::<usize>()
    }
}

/// The plugin's profiler API table, copied.
#[derive(Clone, Copy)]
pub struct ProfilerApi {
    table: sys::PLUGIN_Profiler_Api,
}

// SAFETY: the table holds function pointers and an opaque `priv_` the plugin never asks
// us to dereference; the plugin's profiler API is meant to be called from any thread.
unsafe impl Send for ProfilerApi {}
// SAFETY: as for Send; the copy is immutable.
unsafe impl Sync for ProfilerApi {}

/// The plugin's profiler API: `Ok(None)` when the plugin has no Profiler extension; an
/// error when the extension is there but unusable (no API pointer, a table too small).
pub fn profiler_api(api: &'static Api) -> Result<Option<ProfilerApi>> {
    let Some(view) = api.extension::<ProfilerExtension>()? else {
        return Ok(None);
    };
    let unusable = |why: String| Error::Unsupported {
        what: format!("the plugin's profiler (PJRT_Profiler_Extension: {why})"),
        needs: api.version(),
        plugin: api.version(),
        missing_slot: true,
    };
    let ptr = view
        .read::<*const sys::PLUGIN_Profiler_Api>(offset_of!(
            sys::PJRT_Profiler_Extension,
            profiler_api
        ))
        .unwrap_or(std::ptr::null());
    if ptr.is_null() {
        return Err(unusable("its profiler_api is null".into()));
    }
    // SAFETY: a non-null profiler_api points at the plugin's table, which lives as long as
    // the library (never unloaded); its first field is the table's size.
    let size = unsafe { ptr.cast::<usize>().read_unaligned() };
    if size < sys::PLUGIN_Profiler_Api_STRUCT_SIZE {
        return Err(unusable(format!(
            "its PLUGIN_Profiler_Api has {size} bytes, rpjrt reads {}",
            sys::PLUGIN_Profiler_Api_STRUCT_SIZE
        )));
    }
    // SAFETY: the table holds at least the bytes of our declaration (checked above).
    let table = unsafe { ptr.read_unaligned() };
    Ok(Some(ProfilerApi { table }))
}

macro_rules! slot {
    ($api:expr, $field:ident, $entry:literal) => {
        $api.table.$field.ok_or_else(|| Error::Pjrt {
            entry: $entry,
            code: Code::Unimplemented,
            message: concat!("the plugin's profiler API has no ", $entry, " (null slot)")
                .to_string(),
        })
    };
}

impl ProfilerApi {
    /// Turns a returned `PLUGIN_Profiler_Error*` into `Error` (and destroys it).
    fn check(&self, err: *mut sys::PLUGIN_Profiler_Error, entry: &'static str) -> Result<()> {
        if err.is_null() {
            return Ok(());
        }
        let mut code = Code::Unknown;
        let mut message = String::from("(the plugin gave no message)");
        if let Some(f) = self.table.error_get_code {
            let mut a = sys::PLUGIN_Profiler_Error_GetCode_Args {
                struct_size: sys::PLUGIN_Profiler_Error_GetCode_Args_STRUCT_SIZE,
                priv_: std::ptr::null_mut(),
                error: err,
                code: 0,
            };
            // SAFETY: a live error the plugin returned; `code` is an out-parameter.
            match unsafe { crate::call_guarded("PLUGIN_Profiler_Error_GetCode", f, &mut a) } {
                Ok(e) if e.is_null() => code = Code::from_raw(a.code),
                Ok(e) => self.destroy_error(e),
                Err(_) => {}
            }
        }
        if let Some(f) = self.table.error_message {
            let mut a = sys::PLUGIN_Profiler_Error_Message_Args {
                struct_size: sys::PLUGIN_Profiler_Error_Message_Args_STRUCT_SIZE,
                priv_: std::ptr::null_mut(),
                error: err,
                message: std::ptr::null(),
                message_size: 0,
            };
            // SAFETY: a live error; the message lives as long as the error.
            unsafe { f(&mut a) };
            if !a.message.is_null() {
                // SAFETY: the plugin's message bytes, valid until the error is destroyed.
                let bytes =
                    unsafe { std::slice::from_raw_parts(a.message.cast::<u8>(), a.message_size) };
                message = String::from_utf8_lossy(bytes).into_owned();
            }
        }
        self.destroy_error(err);
        Err(Error::Pjrt {
            entry,
            code,
            message,
        })
    }

    fn destroy_error(&self, err: *mut sys::PLUGIN_Profiler_Error) {
        if let Some(f) = self.table.error_destroy {
            let mut a = sys::PLUGIN_Profiler_Error_Destroy_Args {
                struct_size: sys::PLUGIN_Profiler_Error_Destroy_Args_STRUCT_SIZE,
                priv_: std::ptr::null_mut(),
                error: err,
            };
            // SAFETY: a live error the plugin returned, destroyed once, here.
            unsafe { f(&mut a) };
        }
    }

    /// Creates a profiler with serialized `ProfileOptions` (empty for the plugin's
    /// defaults).
    pub fn create(&self, options: &[u8]) -> Result<Profiler> {
        let f = slot!(self, create, "PLUGIN_Profiler_Create")?;
        let mut a = sys::PLUGIN_Profiler_Create_Args {
            struct_size: sys::PLUGIN_Profiler_Create_Args_STRUCT_SIZE,
            options: options.as_ptr().cast(),
            options_size: options.len(),
            profiler: std::ptr::null_mut(),
        };
        // SAFETY: the options bytes outlive the call; `profiler` is an out-parameter.
        let err = unsafe { crate::call_guarded("PLUGIN_Profiler_Create", f, &mut a) }?;
        self.check(err, "PLUGIN_Profiler_Create")?;
        let ptr = NonNull::new(a.profiler).ok_or_else(|| Error::Pjrt {
            entry: "PLUGIN_Profiler_Create",
            code: Code::Internal,
            message: "the plugin returned no profiler".into(),
        })?;
        Ok(Profiler { api: *self, ptr })
    }
}

/// A profiler the plugin created; destroyed on drop.
pub struct Profiler {
    api: ProfilerApi,
    ptr: NonNull<sys::PLUGIN_Profiler>,
}

// SAFETY: the profiler is the plugin's object, usable from any thread; the safe layer
// calls it from one thread at a time (behind a lock).
unsafe impl Send for Profiler {}

impl Profiler {
    /// Starts collecting.
    pub fn start(&mut self) -> Result<()> {
        let f = slot!(self.api, start, "PLUGIN_Profiler_Start")?;
        let mut a = sys::PLUGIN_Profiler_Start_Args {
            struct_size: sys::PLUGIN_Profiler_Start_Args_STRUCT_SIZE,
            profiler: self.ptr.as_ptr(),
        };
        // SAFETY: a live profiler this handle owns.
        let err = unsafe { crate::call_guarded("PLUGIN_Profiler_Start", f, &mut a) }?;
        self.api.check(err, "PLUGIN_Profiler_Start")
    }

    /// Stops collecting.
    pub fn stop(&mut self) -> Result<()> {
        let f = slot!(self.api, stop, "PLUGIN_Profiler_Stop")?;
        let mut a = sys::PLUGIN_Profiler_Stop_Args {
            struct_size: sys::PLUGIN_Profiler_Stop_Args_STRUCT_SIZE,
            profiler: self.ptr.as_ptr(),
        };
        // SAFETY: a live profiler this handle owns.
        let err = unsafe { crate::call_guarded("PLUGIN_Profiler_Stop", f, &mut a) }?;
        self.api.check(err, "PLUGIN_Profiler_Stop")
    }

    /// What was collected (a serialized `XSpace`). Plugins built from XLA point `buffer`
    /// at their own copy on the first call; others follow the header (sizes first, then a
    /// second call into our buffer). Both are handled.
    pub fn collect(&mut self) -> Result<Vec<u8>> {
        const ENTRY: &str = "PLUGIN_Profiler_CollectData";
        let f = slot!(self.api, collect_data, "PLUGIN_Profiler_CollectData")?;
        let mut a = sys::PLUGIN_Profiler_CollectData_Args {
            struct_size: sys::PLUGIN_Profiler_CollectData_Args_STRUCT_SIZE,
            profiler: self.ptr.as_ptr(),
            buffer: std::ptr::null_mut(),
            buffer_size_in_bytes: 0,
        };
        // SAFETY: a live profiler; `buffer` and its size are out-parameters.
        let err = unsafe { crate::call_guarded(ENTRY, f, &mut a) }?;
        self.api.check(err, ENTRY)?;
        let size = a.buffer_size_in_bytes;
        if size == 0 {
            return Ok(Vec::new());
        }
        if !a.buffer.is_null() {
            // SAFETY: the plugin's own copy of `size` bytes, valid until the next call on
            // this profiler (we copy it out at once).
            return Ok(unsafe { std::slice::from_raw_parts(a.buffer, size) }.to_vec());
        }
        let mut out = Vec::new();
        out.try_reserve_exact(size).map_err(|_| {
            Error::ResourceExhausted(format!(
                "cannot allocate {size} bytes for the plugin's profile"
            ))
        })?;
        out.resize(size, 0);
        a.buffer = out.as_mut_ptr();
        // SAFETY: our buffer of `size` bytes, as the plugin asked for; live for the call.
        let err = unsafe { crate::call_guarded(ENTRY, f, &mut a) }?;
        self.api.check(err, ENTRY)?;
        out.truncate(a.buffer_size_in_bytes.min(size));
        Ok(out)
    }
}

impl Drop for Profiler {
    fn drop(&mut self) {
        if let Some(f) = self.api.table.destroy {
            let mut a = sys::PLUGIN_Profiler_Destroy_Args {
                struct_size: sys::PLUGIN_Profiler_Destroy_Args_STRUCT_SIZE,
                profiler: self.ptr.as_ptr(),
            };
            // SAFETY: the profiler this handle owns, destroyed once, here.
            if let Ok(err) = unsafe { crate::call_guarded("PLUGIN_Profiler_Destroy", f, &mut a) } {
                let _ = self.api.check(err, "PLUGIN_Profiler_Destroy");
            }
        }
    }
}
