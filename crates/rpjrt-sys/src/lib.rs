//! Hand-declared C ABI for talking to PJRT plugins.
//!
//! Three modules, all re-exported at the crate root:
//!
//! - [`pjrt`]: the PJRT C API at the 0.114 layout (handles, enums, argument
//!   structs, the [`PJRT_Api`] function table, per-slot version data);
//! - [`ext`]: the extension structs rpjrt uses, chained off
//!   `PJRT_Api::extension_start`;
//! - [`ffi`]: the XLA FFI C API (0.3) used by custom-call handlers.
//!
//! Every C item is declared once, compactly, through the `c_api!` macro
//! below, which writes the `#[repr(C)]` struct (with the common
//! `struct_size` / `extension_start` prefix for argument structs), its
//! `T_STRUCT_SIZE` (offset of the last field plus its size, what callers
//! store in `struct_size`), the entry's function type and a list of layout
//! facts. Conventions (see `docs/CONVENTIONS.md`): every name is spelled as in
//! C; a C enum is an integer type alias plus one constant per enumerator (a
//! plugin may hand back a value we do not know); a C anonymous union becomes a
//! named field whose type is `<Struct>_Union`; every function-table slot and
//! function-pointer field is an `Option` so a null pointer is representable.
//!
//! `tests/abi.rs` compares those facts, row for row, with
//! `abi/pjrt-0.114.tsv`, measured from the upstream headers by
//! `tools/abi-probe`.
//!
//! This crate has types and constants only: no functions, no linking.

#![no_std]
#![forbid(unsafe_code)]
#![recursion_limit = "1024"]
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]
#![warn(missing_docs)]

/// One fact about a declaration, in the shape of a row of
/// `abi/pjrt-0.114.tsv`: `kind` (`struct`, `field`, `fieldcount`,
/// `struct_size`, `opaque`, `const`, `type`, `enumcount`, `slot`), the C
/// `name`, the `member` (`-` for none), the `value` and an optional `extra`
/// (a field's size, a struct's alignment).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbiFact {
    /// Row kind.
    pub kind: &'static str,
    /// C name of the struct, type, constant or table.
    pub name: &'static str,
    /// Field or slot name, or `-`.
    pub member: &'static str,
    /// Offset, size, value or index.
    pub value: i128,
    /// Field size or struct alignment, if the row has one.
    pub extra: Option<i128>,
    /// For `tools/abi-probe`: a field's Rust type, an enumerator's enum,
    /// `struct` or `union` for a record, a `struct_size` row's designated
    /// field (empty: the last one); otherwise empty.
    pub ty: &'static str,
}

/// Builds an [`AbiFact`]; `r#` is dropped from member names.
#[doc(hidden)]
pub const fn abi_fact(
    kind: &'static str,
    name: &'static str,
    member: &'static str,
    value: i128,
    extra: Option<i128>,
    ty: &'static str,
) -> AbiFact {
    let member = match member.as_bytes() {
        [b'r', b'#', rest @ ..] => match core::str::from_utf8(rest) {
            Ok(s) => s,
            Err(_) => member,
        },
        _ => member,
    };
    AbiFact {
        kind,
        name,
        member,
        value,
        extra,
        ty,
    }
}

/// Declares a run of C items, plus a constant `$facts` listing their layout
/// as [`AbiFact`]s (compared with the header facts by `tests/abi.rs`).
///
/// Item forms (each may carry doc comments):
/// - `const NAME: TYPE = VALUE;`
/// - `type NAME = TYPE;` (an alias whose size is checked);
/// - `enum NAME: REPR { CONST = VALUE, ... }`: an integer alias plus one
///   constant per enumerator (full C names; a plugin may return others);
/// - `opaque NAME;`: a handle only ever used behind a pointer;
/// - `args NAME [sized] [=> ENTRY] { fields }`: a struct starting with
///   `struct_size` and `extension_start`; `sized` adds `NAME_STRUCT_SIZE`
///   (end of the last field, what callers store in `struct_size`); `=> ENTRY`
///   adds the entry's type `unsafe extern "C" fn(*mut NAME) -> *mut PJRT_Error`
///   (`=> ENTRY -> TYPE` for another return type, `-> ()` for none);
/// - `struct NAME [sized] { fields }`: a plain struct;
/// - `union NAME { fields }`.
///
/// `sized(FIELD: TYPE)` ends `NAME_STRUCT_SIZE` at a field other than the
/// last, as a few headers do. Every struct is `#[repr(C)]`, `Clone + Copy`.
/// Writing `@unchecked` instead of `facts NAME;` declares items from headers
/// outside the measured set, without facts.
macro_rules! c_api {
    (@unchecked $($items:tt)*) => { c_api!(@item [] [] $($items)*); };
    (facts $facts:ident; $($items:tt)*) => { c_api!(@item [$facts] [] $($items)*); };
    (@item [] [$($acc:tt)*]) => {};
    (@item [$facts:ident] [$($acc:tt)*]) => {
        #[doc(hidden)]
        pub const $facts: &[&[$crate::AbiFact]] = &[$($acc)*];
    };
    (@item $f:tt [$($acc:tt)*] $(#[$m:meta])* const $name:ident: $t:ty = $v:expr; $($rest:tt)*) => {
        $(#[$m])* pub const $name: $t = $v;
        c_api!(@item $f [$($acc)* &[$crate::abi_fact("const", stringify!($name), "-", $name as i128, None, "")],] $($rest)*);
    };
    (@item $f:tt [$($acc:tt)*] $(#[$m:meta])* type $name:ident = $t:ty; $($rest:tt)*) => {
        $(#[$m])* pub type $name = $t;
        c_api!(@item $f [$($acc)* &[c_facts!(@type $name)],] $($rest)*);
    };
    (@item $f:tt [$($acc:tt)*] $(#[$m:meta])* enum $name:ident: $repr:ty {
        $($(#[$cm:meta])* $c:ident = $v:expr),* $(,)?
    } $($rest:tt)*) => {
        $(#[$m])* pub type $name = $repr;
        $(
            $(#[$cm])*
            #[doc = concat!("Enumerator `", stringify!($c), "` of [`", stringify!($name), "`].")]
            pub const $c: $name = $v;
        )*
        c_api!(@item $f [$($acc)* &[
            c_facts!(@type $name),
            $crate::abi_fact("enumcount", stringify!($name), "-", [$(stringify!($c)),*].len() as i128, None, ""),
            $($crate::abi_fact("const", stringify!($c), "-", $c as i128, None, stringify!($name)),)*
        ],] $($rest)*);
    };
    (@item $f:tt [$($acc:tt)*] $(#[$m:meta])* opaque $name:ident; $($rest:tt)*) => {
        $(#[$m])*
        #[doc = concat!("Opaque `", stringify!($name), "` handle; only ever used behind a pointer.")]
        #[repr(C)]
        pub struct $name {
            _opaque: [u8; 0],
        }
        c_api!(@item $f [$($acc)* &[$crate::abi_fact("opaque", stringify!($name), "-", 0, None, "")],] $($rest)*);
    };
    (@item $f:tt [$($acc:tt)*] $(#[$m:meta])* args $name:ident
        $($sized:ident $(($sf:ident: $st:ty))?)? $(=> $entry:ident $(-> $ret:ty)?)? {
        $($(#[$fm:meta])* $field:ident: $t:ty),* $(,)?
    } $($rest:tt)*) => {
        c_api!(@item $f [$($acc)*] $(#[$m])*
            struct $name $($sized $(($sf: $st))?)? $(=> $entry $(-> $ret)?)? {
            /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
            struct_size: usize,
            /// Head of an optional extension chain; null for none.
            extension_start: *mut PJRT_Extension_Base,
            $($(#[$fm])* $field: $t,)*
        } $($rest)*);
    };
    (@item $f:tt [$($acc:tt)*] $(#[$m:meta])* $kw:ident $name:ident
        $($sized:ident $(($sf:ident: $st:ty))?)? $(=> $entry:ident $(-> $ret:ty)?)? {
        $($(#[$fm:meta])* $field:ident: $t:ty),* $(,)?
    } $($rest:tt)*) => {
        $(
            #[doc = concat!("Signature of the `", stringify!($entry), "` entry; takes [`", stringify!($name), "`].")]
            pub type $entry = unsafe extern "C" fn(args: *mut $name) -> c_ret!($($ret)?);
        )?
        $(#[$m])*
        $(#[doc = concat!("Arguments of [`", stringify!($entry), "`].")])?
        #[repr(C)]
        #[derive(Clone, Copy)]
        pub $kw $name {
            $($(#[$fm])* #[allow(missing_docs)] pub $field: $t,)*
        }
        c_api!(@size [$($sized $(($sf: $st))?)?] $name [$($field: $t,)*]);
        c_api!(@item $f [$($acc)* c_facts!($kw $name [$($field: $t,)*] $($sized $(($sf))?)?),] $($rest)*);
    };
    // NAME_STRUCT_SIZE: the end of the named field, or of the last one.
    (@size [] $name:ident [$($field:ident: $t:ty,)*]) => {};
    (@size [sized ($sf:ident: $st:ty)] $name:ident [$($field:ident: $t:ty,)*]) => {
        c_api!(@size_const $name (::core::mem::offset_of!($name, $sf) + ::core::mem::size_of::<$st>()));
    };
    (@size [sized] $name:ident [$($field:ident: $t:ty,)*]) => {
        c_api!(@size_const $name ({
            let mut end = 0;
            $(
                let e = ::core::mem::offset_of!($name, $field) + ::core::mem::size_of::<$t>();
                if e > end {
                    end = e;
                }
            )*
            end
        }));
    };
    (@size_const $name:ident ($e:expr)) => {
        pastey::paste! {
            #[doc = concat!("Size a caller puts in `struct_size` for [`", stringify!($name), "`].")]
            pub const [<$name _STRUCT_SIZE>]: usize = $e;
        }
    };
}

/// The return type of an entry declared with `=> ENTRY [-> TYPE]`.
macro_rules! c_ret {
    () => { *mut PJRT_Error };
    ($t:ty) => { $t };
}

/// The facts of one struct or union (a `&[AbiFact]` expression): size and
/// alignment, each field's offset and size, the field count and, if sized,
/// `NAME_STRUCT_SIZE`.
macro_rules! c_facts {
    (@type $name:ident) => {
        $crate::abi_fact("type", stringify!($name), "-", ::core::mem::size_of::<$name>() as i128, None, "")
    };
    ($kw:ident $name:ident [$($field:ident: $t:ty,)*] $($sized:ident $(($sf:ident))?)?) => {
        &[
            $crate::abi_fact("struct", stringify!($name), "-", ::core::mem::size_of::<$name>() as i128,
                Some(::core::mem::align_of::<$name>() as i128), stringify!($kw)),
            $($crate::abi_fact("field", stringify!($name), stringify!($field),
                ::core::mem::offset_of!($name, $field) as i128,
                Some(::core::mem::size_of::<$t>() as i128), stringify!($t)),)*
            $crate::abi_fact("fieldcount", stringify!($name), "-", [$(stringify!($field)),*].len() as i128, None, ""),
            $($crate::abi_fact("struct_size", stringify!($name), "-", c_facts!(@size $sized $name) as i128, None, stringify!($($sf)?)),)?
        ]
    };
    (@size sized $name:ident) => {
        pastey::paste!([<$name _STRUCT_SIZE>])
    };
}

/// Declares [`PJRT_Api`] from its slots in order (`ENTRY = MINOR`, the minor
/// version that added the slot), plus `PJRT_Api_STRUCT_SIZE`,
/// [`PJRT_API_ENTRIES`] and the table's facts (each slot's index).
macro_rules! api_table {
    ($($entry:ident = $since:literal,)*) => {
        /// The function table a plugin returns from `GetPjrtApi`. Function `i`
        /// sits at byte `40 + 8*i`; only slots below `struct_size` exist in a
        /// given plugin.
        #[repr(C)]
        #[derive(Clone, Copy)]
        pub struct PJRT_Api {
            /// Size of the table as the plugin knows it; slots past it must not be read.
            pub struct_size: usize,
            /// Head of the plugin's extension chain, or null.
            pub extension_start: *mut PJRT_Extension_Base,
            /// Version the plugin implements.
            pub pjrt_api_version: PJRT_Api_Version,
            $(
                #[doc = concat!("Slot for [`", stringify!($entry), "`] (since 0.", stringify!($since), ").")]
                pub $entry: Option<$entry>,
            )*
        }

        /// Size a caller puts in `struct_size` for [`PJRT_Api`]: all slots.
        pub const PJRT_Api_STRUCT_SIZE: usize = ::core::mem::size_of::<PJRT_Api>();

        /// Every [`PJRT_Api`] slot in order; slot `i` is at byte `40 + 8*i`.
        ///
        /// Provenance of `since_minor`: 57 is the floor (the table was reordered at
        /// 0.56/0.57, so every entry present at 0.57 is recorded as 57, even those
        /// added earlier). Slots 101-117 were dated from the header history of the
        /// `zml/xla` fork (the commit where each slot first appeared at its final
        /// position, cross-checked with the upstream changelog); slots 118-137 come
        /// from the upstream changelog (0.82-0.110). A 0.81 plugin has 118 slots.
        pub const PJRT_API_ENTRIES: [PjrtEntry; [$(stringify!($entry)),*].len()] = [
            $(PjrtEntry { name: stringify!($entry), since_minor: $since },)*
        ];

        #[doc(hidden)]
        pub const PJRT_API_FACTS: &[&[$crate::AbiFact]] = &[
            c_facts!(struct PJRT_Api [
                struct_size: usize,
                extension_start: *mut PJRT_Extension_Base,
                pjrt_api_version: PJRT_Api_Version,
                $($entry: Option<$entry>,)*
            ] sized),
            &[$($crate::abi_fact(
                "slot",
                "PJRT_Api",
                stringify!($entry),
                ((::core::mem::offset_of!(PJRT_Api, $entry) - 40) / 8) as i128,
                None,
                "",
            ),)*],
        ];
    };
}

pub mod ext;
pub mod ffi;
pub mod pjrt;

pub use ext::*;
pub use ffi::*;
pub use pjrt::*;

/// Every declared item's layout facts, one slice per header section.
#[doc(hidden)]
pub const ABI_FACTS: &[&[&[AbiFact]]] = &[
    pjrt::PJRT_FACTS,
    pjrt::PJRT_API_FACTS,
    ext::FFI_FACTS,
    ext::GPU_FACTS,
    ext::LAYOUTS_FACTS,
    ext::MEMORY_DESCRIPTIONS_FACTS,
    ext::PHASE_COMPILE_FACTS,
    ext::SHARDINGS_FACTS,
    ext::TRITON_FACTS,
    ffi::XLA_FFI_FACTS,
];
