//! Typed access to the plugin's extension chain.
//!
//! The chain is walked once, when the plugin loads ([`Found`] entries on the `Api`).
//! [`Api::extension`] finds an extension by its type, checks the struct size the plugin
//! reports against what rpjrt needs to read at the plugin's PJRT minor (extension structs
//! are laid out by the plugin's PJRT version, not by their own version numbers), and returns
//! a view whose reads are bounds-checked against the plugin's struct.
//!
//! The FFI, layouts and transfer support build on this.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::{offset_of, size_of};

use rpjrt_sys as sys;

use super::Api;
use crate::error::{Error, Result};

/// One extension on the chain, found at load time.
pub struct Found {
    type_id: i32,
    struct_size: usize,
    addr: *const c_void,
}

// SAFETY: the chain is immutable and lives as long as the library, which is never unloaded.
unsafe impl Send for Found {}
// SAFETY: as for Send.
unsafe impl Sync for Found {}

impl Found {
    pub(super) fn new(type_id: i32, struct_size: usize, addr: *const c_void) -> Found {
        Found {
            type_id,
            struct_size,
            addr,
        }
    }
    /// The extension's type id (`PJRT_Extension_Type`).
    pub fn type_id(&self) -> i32 {
        self.type_id
    }
    /// The extension struct's size as the plugin set it.
    pub fn struct_size(&self) -> usize {
        self.struct_size
    }
}

/// An extension struct rpjrt reads.
///
/// # Safety
/// `Struct` must be the `#[repr(C)]` layout of the extension whose type id is `TYPE_ID`,
/// and `required_size(minor)` must cover every field rpjrt reads from a plugin of that PJRT
/// minor (views check each read against the plugin's size anyway).
pub unsafe trait Extension {
    /// The extension's type id in the C API.
    const TYPE_ID: i32;
    /// A name for errors.
    const NAME: &'static str;
    /// The struct rpjrt declares.
    type Struct;
    /// The bytes rpjrt needs from a plugin of PJRT minor `minor`.
    fn required_size(minor: i32) -> usize;
}

/// A typed view of an extension struct of the loaded plugin.
pub struct ExtensionView<T: Extension> {
    addr: *const c_void,
    struct_size: usize,
    _t: PhantomData<fn() -> T>,
}

// SAFETY: the view points into the immutable, never-unloaded extension chain.
unsafe impl<T: Extension> Send for ExtensionView<T> {}
// SAFETY: as for Send.
unsafe impl<T: Extension> Sync for ExtensionView<T> {}

impl<T: Extension> ExtensionView<T> {
    /// Reads the field at byte `offset` (from `offset_of!` on `T::Struct`) as an `F`;
    /// `None` when the plugin's struct is too short to hold it.
    ///
    /// `F` must be the field's type: integers, raw pointers and nullable function pointers,
    /// for which every bit pattern the plugin may store is valid.
    pub fn read<F: Copy>(&self, offset: usize) -> Option<F> {
        if offset.checked_add(size_of::<F>())? > self.struct_size {
            return None;
        }
        // SAFETY: the field lies inside the plugin's struct (checked above), which is
        // immutable and lives as long as the process; the caller names the field's type.
        Some(unsafe {
            self.addr
                .cast::<u8>()
                .add(offset)
                .cast::<F>()
                .read_unaligned()
        })
    }

    /// The plugin's struct size.
    #[allow(dead_code)] // for extension users that branch on the plugin's layout
    /// The extension struct's size as the plugin set it.
    pub fn struct_size(&self) -> usize {
        self.struct_size
    }
}

impl Api {
    /// The extension `T`, if the plugin offers it: `Ok(None)` when absent, an error when the
    /// plugin's struct is smaller than what rpjrt reads at the plugin's version.
    pub fn extension<T: Extension>(&self) -> Result<Option<ExtensionView<T>>> {
        let Some(found) = self.extensions.iter().find(|e| e.type_id == T::TYPE_ID) else {
            return Ok(None);
        };
        let need = T::required_size(self.version().minor);
        if found.struct_size < need {
            return Err(Error::Unsupported {
                what: format!(
                    "{} (the plugin's struct has {} bytes, rpjrt reads {need})",
                    T::NAME,
                    found.struct_size
                ),
                needs: super::OUR_VERSION,
                plugin: self.version(),
                missing_slot: false,
            });
        }
        Ok(Some(ExtensionView {
            addr: found.addr,
            struct_size: found.struct_size,
            _t: PhantomData,
        }))
    }
}

/// The XLA FFI extension: handler and type registration, user data.
pub struct Ffi;

// SAFETY: `PJRT_FFI_Extension` is rpjrt-sys's declaration of the FFI extension (type 5);
// every field up to `register_handler` has been there on every plugin rpjrt accepts.
unsafe impl Extension for Ffi {
    const TYPE_ID: i32 = sys::PJRT_Extension_Type_FFI as i32;
    const NAME: &'static str = "PJRT_FFI_Extension";
    type Struct = sys::PJRT_FFI_Extension;
    fn required_size(_minor: i32) -> usize {
        offset_of!(sys::PJRT_FFI_Extension, register_handler)
            + size_of::<Option<sys::PJRT_FFI_Register_Handler>>()
    }
}
