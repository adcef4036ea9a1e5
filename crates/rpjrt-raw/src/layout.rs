//! The Layouts extension, read according to the size the plugin gives its struct.
//!
//! The extension struct grew under a constant extension version (72 bytes at PJRT 0.81,
//! 80 at 0.115): a function slot is used only when it lies wholly inside the plugin's
//! `struct_size`, otherwise the call is `Error::Unsupported` naming the slot.

use std::mem::{offset_of, size_of};
use std::ptr::null_mut;

use rpjrt_sys as sys;

use super::buffer::Buffer;
use super::client::Client;
use super::extension::{Extension, ExtensionView};
use super::transfer::zeroed_args;
use super::Api;
use crate::error::{Error, Result};

/// The Layouts extension for the typed extension access (`Api::extension`).
pub struct Layouts;

// SAFETY: `PJRT_Layouts_Extension` is rpjrt-sys's declaration of the Layouts extension
// (type 4); the first four slots (destroy, serialize, client default layout, buffer layout)
// are present at every PJRT minor rpjrt accepts. Later slots are read only when the
// plugin's struct covers them (`ext_fn!`).
unsafe impl Extension for Layouts {
    const TYPE_ID: i32 = sys::PJRT_Extension_Type_Layouts as i32;
    const NAME: &'static str = "PJRT_Layouts_Extension";
    type Struct = sys::PJRT_Layouts_Extension;
    fn required_size(_minor: i32) -> usize {
        offset_of!(
            sys::PJRT_Layouts_Extension,
            PJRT_Layouts_PJRT_Buffer_MemoryLayout
        ) + size_of::<usize>()
    }
}

/// The plugin's Layouts extension, through the typed extension view.
pub struct LayoutsExt {
    api: &'static Api,
    view: ExtensionView<Layouts>,
}

/// Finds the Layouts extension on the plugin's chain.
pub fn layouts_ext(api: &'static Api) -> Result<LayoutsExt> {
    match api.extension::<Layouts>()? {
        Some(view) => Ok(LayoutsExt { api, view }),
        None => Err(Error::Unsupported {
            what: "the Layouts extension".into(),
            needs: api.version(),
            plugin: api.version(),
            missing_slot: true,
        }),
    }
}

/// Reads function slot `$field` of the extension, only if it lies inside the plugin's
/// struct and is non-null.
macro_rules! ext_fn {
    ($ext:expr, $field:ident) => {{
        let off = offset_of!(sys::PJRT_Layouts_Extension, $field);
        match $ext.view.read::<Option<sys::$field>>(off) {
            None => Err(Error::Unsupported {
                what: format!(
                    "{} (the plugin's Layouts extension struct is {} bytes)",
                    stringify!($field),
                    $ext.view.struct_size()
                ),
                needs: $ext.api.version(),
                plugin: $ext.api.version(),
                missing_slot: false,
            }),
            Some(None) => Err(Error::Unsupported {
                what: stringify!($field).to_string(),
                needs: $ext.api.version(),
                plugin: $ext.api.version(),
                missing_slot: true,
            }),
            Some(Some(f)) => Ok(f),
        }
    }};
}

impl LayoutsExt {
    /// Size of the plugin's extension struct in bytes.
    pub fn struct_size(&self) -> usize {
        self.view.struct_size()
    }

    fn check(&self, err: *mut sys::PJRT_Error, entry: &'static str) -> Result<()> {
        if err.is_null() {
            Ok(())
        } else {
            Err(self.api.take_error(err, entry))
        }
    }

    /// Serializes and destroys an owned `PJRT_Layouts_MemoryLayout*`.
    fn serialize_and_destroy(
        &self,
        layout: *mut sys::PJRT_Layouts_MemoryLayout,
    ) -> Result<Vec<u8>> {
        let out = (|| {
            let f = ext_fn!(self, PJRT_Layouts_MemoryLayout_Serialize)?;
            // SAFETY: a C API args struct starting with `struct_size`, valid when zeroed.
            let mut a: sys::PJRT_Layouts_MemoryLayout_Serialize_Args =
                unsafe { zeroed_args(sys::PJRT_Layouts_MemoryLayout_Serialize_Args_STRUCT_SIZE) };
            a.layout = layout;
            // SAFETY: a live layout owned by us; out-parameters only.
            let err =
                unsafe { super::call_guarded("PJRT_Layouts_MemoryLayout_Serialize", f, &mut a) }?;
            self.check(err, "PJRT_Layouts_MemoryLayout_Serialize")?;
            let bytes = if a.serialized_bytes.is_null() || a.serialized_bytes_size == 0 {
                Vec::new()
            } else {
                // SAFETY: the plugin returned this pointer/length, valid until the deleter.
                unsafe {
                    std::slice::from_raw_parts(
                        a.serialized_bytes.cast::<u8>(),
                        a.serialized_bytes_size,
                    )
                }
                .to_vec()
            };
            if let (Some(del), false) = (a.serialized_layout_deleter, a.serialized_layout.is_null())
            {
                // SAFETY: the deleter the plugin gave for this serialized layout, called once.
                unsafe { del(a.serialized_layout) };
            }
            Ok(bytes)
        })();
        if let Ok(d) = ext_fn!(self, PJRT_Layouts_MemoryLayout_Destroy) {
            // SAFETY: a C API args struct starting with `struct_size`, valid when zeroed.
            let mut a: sys::PJRT_Layouts_MemoryLayout_Destroy_Args =
                unsafe { zeroed_args(sys::PJRT_Layouts_MemoryLayout_Destroy_Args_STRUCT_SIZE) };
            a.layout = layout;
            // SAFETY: the layout is owned by us and destroyed once, here.
            let err = unsafe { d(&mut a) };
            let _ = self.check(err, "PJRT_Layouts_MemoryLayout_Destroy");
        }
        out
    }

    /// The serialized layout of a live buffer.
    pub fn buffer_layout<M>(&self, b: &Buffer<M>) -> Result<Vec<u8>> {
        let f = ext_fn!(self, PJRT_Layouts_PJRT_Buffer_MemoryLayout)?;
        // SAFETY: a C API args struct starting with `struct_size`, valid when zeroed.
        let mut a: sys::PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args =
            unsafe { zeroed_args(sys::PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args_STRUCT_SIZE) };
        a.buffer = b.ptr();
        a.layout = null_mut();
        // SAFETY: a live buffer; the layout out-parameter becomes ours.
        let err =
            unsafe { super::call_guarded("PJRT_Layouts_PJRT_Buffer_MemoryLayout", f, &mut a) }?;
        self.check(err, "PJRT_Layouts_PJRT_Buffer_MemoryLayout")?;
        if a.layout.is_null() {
            return Err(Error::invalid("the plugin returned no buffer layout"));
        }
        self.serialize_and_destroy(a.layout)
    }

    /// The serialized default layout of `ty[dims]` on this client.
    pub fn default_layout(&self, c: &Client, ty: i32, dims: &[i64]) -> Result<Vec<u8>> {
        let f = ext_fn!(self, PJRT_Layouts_PJRT_Client_GetDefaultLayout)?;
        // SAFETY: a C API args struct starting with `struct_size`, valid when zeroed.
        let mut a: sys::PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args =
            unsafe { zeroed_args(sys::PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args_STRUCT_SIZE) };
        a.client = c.ptr();
        a.r#type = ty as sys::PJRT_Buffer_Type;
        a.dims = dims.as_ptr();
        a.num_dims = dims.len();
        // SAFETY: a live client; dims outlive the call; the layout becomes ours.
        let err =
            unsafe { super::call_guarded("PJRT_Layouts_PJRT_Client_GetDefaultLayout", f, &mut a) }?;
        self.check(err, "PJRT_Layouts_PJRT_Client_GetDefaultLayout")?;
        if a.layout.is_null() {
            return Err(Error::invalid("the plugin returned no default layout"));
        }
        self.serialize_and_destroy(a.layout)
    }
}
