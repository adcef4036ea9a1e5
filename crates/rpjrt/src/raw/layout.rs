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
use super::transfer::zeroed_args;
use super::Api;
use crate::error::{Error, Result};

/// The plugin's Layouts extension and the size of its struct.
pub(crate) struct LayoutsExt {
    api: &'static Api,
    ptr: *const sys::PJRT_Layouts_Extension,
    size: usize,
}

/// Finds the Layouts extension in the plugin's chain.
pub(crate) fn layouts_ext(api: &'static Api) -> Result<LayoutsExt> {
    // SAFETY: the table is at least as large as its header (checked at load).
    let mut cur = unsafe { std::ptr::addr_of!((*api.ptr).extension_start).read() };
    let mut hops = 0;
    while !cur.is_null() && hops < 64 {
        // SAFETY: each extension begins with a PJRT_Extension_Base, per the C API; the
        // chain is immutable and lives as long as the library (never unloaded).
        let base = unsafe { cur.read() };
        if base.r#type == sys::PJRT_Extension_Type_Layouts {
            return Ok(LayoutsExt {
                api,
                ptr: cur.cast(),
                size: base.struct_size,
            });
        }
        cur = base.next;
        hops += 1;
    }
    Err(Error::Unsupported {
        what: "the Layouts extension".into(),
        needs: api.version(),
        plugin: api.version(),
        missing_slot: true,
    })
}

/// Reads function slot `$field` of the extension, only if it lies inside the plugin's
/// struct and is non-null.
macro_rules! ext_fn {
    ($ext:expr, $field:ident) => {{
        let off = offset_of!(sys::PJRT_Layouts_Extension, $field);
        if off + size_of::<usize>() > $ext.size {
            Err(Error::Unsupported {
                what: format!(
                    "{} (the plugin's Layouts extension struct is {} bytes)",
                    stringify!($field),
                    $ext.size
                ),
                needs: $ext.api.version(),
                plugin: $ext.api.version(),
                missing_slot: false,
            })
        } else {
            // SAFETY: the slot lies inside the plugin's struct (checked above); each slot is
            // a nullable function pointer.
            unsafe { std::ptr::addr_of!((*$ext.ptr).$field).read() }.ok_or_else(|| {
                Error::Unsupported {
                    what: stringify!($field).to_string(),
                    needs: $ext.api.version(),
                    plugin: $ext.api.version(),
                    missing_slot: true,
                }
            })
        }
    }};
}

impl LayoutsExt {
    /// Size of the plugin's extension struct in bytes.
    pub(crate) fn struct_size(&self) -> usize {
        self.size
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
            let err = unsafe { f(&mut a) };
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
    pub(crate) fn buffer_layout<M>(&self, b: &Buffer<M>) -> Result<Vec<u8>> {
        let f = ext_fn!(self, PJRT_Layouts_PJRT_Buffer_MemoryLayout)?;
        // SAFETY: a C API args struct starting with `struct_size`, valid when zeroed.
        let mut a: sys::PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args =
            unsafe { zeroed_args(sys::PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args_STRUCT_SIZE) };
        a.buffer = b.ptr();
        a.layout = null_mut();
        // SAFETY: a live buffer; the layout out-parameter becomes ours.
        let err = unsafe { f(&mut a) };
        self.check(err, "PJRT_Layouts_PJRT_Buffer_MemoryLayout")?;
        if a.layout.is_null() {
            return Err(Error::invalid("the plugin returned no buffer layout"));
        }
        self.serialize_and_destroy(a.layout)
    }

    /// The serialized default layout of `ty[dims]` on this client.
    pub(crate) fn default_layout(&self, c: &Client, ty: i32, dims: &[i64]) -> Result<Vec<u8>> {
        let f = ext_fn!(self, PJRT_Layouts_PJRT_Client_GetDefaultLayout)?;
        // SAFETY: a C API args struct starting with `struct_size`, valid when zeroed.
        let mut a: sys::PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args =
            unsafe { zeroed_args(sys::PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args_STRUCT_SIZE) };
        a.client = c.ptr();
        a.r#type = ty as sys::PJRT_Buffer_Type;
        a.dims = dims.as_ptr();
        a.num_dims = dims.len();
        // SAFETY: a live client; dims outlive the call; the layout becomes ours.
        let err = unsafe { f(&mut a) };
        self.check(err, "PJRT_Layouts_PJRT_Client_GetDefaultLayout")?;
        if a.layout.is_null() {
            return Err(Error::invalid("the plugin returned no default layout"));
        }
        self.serialize_and_destroy(a.layout)
    }
}
