//! Hand-declared C ABI for talking to PJRT plugins.
//!
//! Three modules, all re-exported at the crate root:
//!
//! - [`pjrt`]: the PJRT C API at the 0.114 layout (handles, enums, argument
//!   structs, the [`PJRT_Api`] function table, per-slot version data);
//! - [`ext`]: the optional extension structs a plugin may chain off
//!   `PJRT_Api::extension_start`, plus the profiler plugin API they use;
//! - [`ffi`]: the XLA FFI C API (0.3) used by custom-call handlers.
//!
//! Conventions (see `docs/CONVENTIONS.md`): every name is spelled as in C; a C
//! enum is an integer type alias plus one constant per enumerator (a plugin may
//! hand back a value we do not know); every struct `T` with a size in the
//! header has `T_STRUCT_SIZE`, the offset of its designated last field plus
//! that field's size, which is what callers must store in `struct_size`.
//! A C anonymous union becomes a named field whose type is `<Struct>_Union`.
//! Every function-table slot and function-pointer field is an `Option` so a
//! null pointer is representable.
//!
//! The layout is checked field by field against the upstream headers by
//! `tests/abi.rs`, using facts produced by `tools/abi-probe`.
//!
//! This crate has types and constants only: no functions, no linking.

#![no_std]
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]
#![warn(missing_docs)]

/// Declares `pub const $name: usize` = offset of `$field` in `$t` plus the size
/// of that field (`$fty`), the value the C header's `*_STRUCT_SIZE` carries.
macro_rules! struct_size {
    ($name:ident = $t:ident, $field:ident : $fty:ty) => {
        #[doc = concat!(
                                                    "Size a caller puts in `struct_size` for [`",
                                                    stringify!($t),
                                                    "`]: end of field `",
                                                    stringify!($field),
                                                    "`."
                                                )]
        pub const $name: usize =
            ::core::mem::offset_of!($t, $field) + ::core::mem::size_of::<$fty>();
    };
}

pub mod ext;
pub mod ffi;
pub mod pjrt;

pub use ext::*;
pub use ffi::*;
pub use pjrt::*;
