//! Element types of PJRT buffers: the one table every other name or code derives from.
//!
//! Each [`ElementType`] carries, in one row of one table: its PJRT buffer type code, its
//! numpy / ml_dtypes name, its true bit width, the bits it occupies in rpjrt's dense host
//! form, its kind, its buffer-protocol (PEP 3118) format where one exists, its DLPack
//! `(code, bits, lanes)`, its XLA FFI `DataType` number (which differs from the PJRT code
//! for several types) and the aliases [`ElementType::from_name`] accepts. The Python
//! package builds its dtype objects from this table (`_rpjrt._element_types()`).
//!
//! # Names
//!
//! [`ElementType::from_name`] accepts:
//! - numpy / ml_dtypes names (`float32`, `bfloat16`, `int4`, `float8_e4m3fn`) and numpy's
//!   spelled-out aliases with numpy's meaning (`float` and `double` = float64, `single` =
//!   float32, `half` = float16, `complex` = complex128, `bool_`), in any case (`Float32`,
//!   `BFloat16`);
//! - numpy type codes with numpy's meaning, case-sensitively as numpy reads them: a kind
//!   letter and a size in **bytes** (`i1`, `i2`, `i4`, `i8` = int8/16/32/64, `f2`/`f4`/`f8`,
//!   `c8`/`c16`, `b1`), the one-letter codes (`?`, `b`, `B`, `h`, `H`, `i`, `I`, `q`, `Q`,
//!   `e`, `f`, `d`, `F`, `D`), and the same with numpy's byte-order prefix (`<i8`, `=f4`,
//!   `|u1`; `>` only for one-byte types, since buffers hold native little-endian data);
//! - XLA / PJRT spellings, where the size is in **bits**: `pred`, `s8` … `s64`, `u16` …
//!   `u64`, `f16`, `f32`, `f64`, `bf16`, `c64`, `c128`, `s1`, `s2`, `s4`, `f8e4m3fn`, …,
//!   and, where numpy reads no other meaning into it, the same in upper case (`F32`,
//!   `BF16`, `PRED`, `C64`).
//!
//! Where numpy and XLA read the same short name differently (`u1`, `u2`, `u4`, `u8`: bytes
//! to numpy, bits to XLA; `f16`: a 16-byte float to numpy, float16 to XLA) the name is
//! refused as ambiguous, with both readings in the message; write the long name. Rust's
//! own spellings `i16`, `i32`, `i64` are refused too, since numpy's `i8` is int64. numpy's
//! string codes (`S8`, `a8`, `|S8`: bytes of 8 characters; `U16`, `<U16`: unicode of 16
//! characters; `c`: one byte) are refused as strings, which rpjrt has no type for, though
//! their lower case is an XLA spelling (`s8` is int8, `u16` uint16); so are numpy's byte
//! size codes in another case (`I8`, `F4`), which numpy does not read.

use std::fmt;

use crate::error::{Error, Result};

/// What kind of value an element type holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ElementKind {
    /// `bool` (PRED).
    Bool,
    /// Signed integers.
    Signed,
    /// Unsigned integers.
    Unsigned,
    /// Real floating point.
    Float,
    /// Complex floating point.
    Complex,
    /// The XLA token (no data).
    Token,
}

impl ElementKind {
    /// numpy's kind character: `b`, `i`, `u`, `f`, `c`, or `V` for the token.
    pub const fn numpy_char(self) -> char {
        match self {
            ElementKind::Bool => 'b',
            ElementKind::Signed => 'i',
            ElementKind::Unsigned => 'u',
            ElementKind::Float => 'f',
            ElementKind::Complex => 'c',
            ElementKind::Token => 'V',
        }
    }
}

pub use crate::dlpack::DlDataType;

macro_rules! element_types {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal, $name:literal, bits $bits:literal,
        host $host:literal, $kind:ident, fmt $fmt:expr, dl $dl:expr, ffi $ffi:expr,
        [$($alias:literal),*]; )*) => {
        /// The element type of a buffer, as PJRT numbers it.
        ///
        /// `name()` gives the name numpy or ml_dtypes uses for the same type. See the
        /// module documentation for the names [`ElementType::from_name`] accepts.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ElementType {
            $( $(#[$doc])* $variant, )*
        }

        impl ElementType {
            /// Every element type rpjrt knows, in PJRT code order.
            pub const ALL: &'static [ElementType] = &[$(ElementType::$variant),*];

            /// The PJRT buffer type code.
            pub const fn code(self) -> i32 {
                match self { $(ElementType::$variant => $code,)* }
            }

            /// The type for a PJRT buffer type code, or an error naming the unknown code.
            pub fn from_code(code: i32) -> Result<ElementType> {
                match code {
                    $($code => Ok(ElementType::$variant),)*
                    _ => Err(Error::invalid(format!(
                        "unknown PJRT element type code {code} (known codes are 1..=33)"
                    ))),
                }
            }

            /// The name numpy / ml_dtypes use, e.g. `float32`, `bfloat16`, `int4`.
            pub const fn name(self) -> &'static str {
                match self { $(ElementType::$variant => $name,)* }
            }

            /// The true width of one element in bits (4 for int4, 6 for the float6 types,
            /// 8 for bool, 0 for the token).
            pub const fn bit_width(self) -> usize {
                match self { $(ElementType::$variant => $bits,)* }
            }

            /// Bits one element occupies in rpjrt's dense host form: the 1-, 2- and 4-bit
            /// types are packed several to a byte, everything else (the float6 types
            /// included) takes whole bytes.
            pub const fn storage_bits(self) -> usize {
                match self { $(ElementType::$variant => $host,)* }
            }

            /// What kind of value the type holds.
            pub const fn kind(self) -> ElementKind {
                match self { $(ElementType::$variant => ElementKind::$kind,)* }
            }

            /// The buffer-protocol (PEP 3118 / `struct`) format of one element, where the
            /// format language has one (not for bfloat16, the float8/6/4 types, the sub-byte
            /// integers or the token).
            pub const fn buffer_format(self) -> Option<&'static str> {
                match self { $(ElementType::$variant => $fmt,)* }
            }

            /// The DLPack data type, where DLPack has one.
            pub const fn dlpack(self) -> Option<DlDataType> {
                match self { $(ElementType::$variant => $dl,)* }
            }

            /// The XLA FFI `XLA_FFI_DataType` number (differs from [`ElementType::code`] for
            /// bf16, the complex types, the token and the float8/4 types); `None` for the
            /// float6 types, which the FFI does not number.
            pub const fn ffi_code(self) -> Option<i32> {
                match self { $(ElementType::$variant => $ffi,)* }
            }

            /// The other names [`ElementType::from_name`] accepts for this type, exactly.
            pub const fn aliases(self) -> &'static [&'static str] {
                match self { $(ElementType::$variant => &[$($alias),*],)* }
            }
        }
    };
}

/// Each XLA FFI data type number's element type, made at compile time from
/// [`ElementType::ffi_code`] (which fails to compile if a number outgrows the table).
const BY_FFI_CODE: [Option<ElementType>; 64] = {
    let mut table = [None; 64];
    let mut i = 0;
    while i < ElementType::ALL.len() {
        let t = ElementType::ALL[i];
        if let Some(c) = t.ffi_code() {
            assert!(c >= 0 && (c as usize) < table.len() && table[c as usize].is_none());
            table[c as usize] = Some(t);
        }
        i += 1;
    }
    table
};

const fn dl(code: u8, bits: u8) -> Option<DlDataType> {
    Some(DlDataType {
        code,
        bits,
        lanes: 1,
    })
}

element_types! {
    /// Boolean, one byte per element.
    Pred = 1, "bool", bits 8, host 8, Bool, fmt Some("?"), dl dl(6, 8), ffi Some(1),
        ["pred", "bool_", "b1", "?"];
    /// Signed 8-bit integer.
    S8 = 2, "int8", bits 8, host 8, Signed, fmt Some("b"), dl dl(0, 8), ffi Some(2),
        ["s8", "i1", "b"];
    /// Signed 16-bit integer.
    S16 = 3, "int16", bits 16, host 16, Signed, fmt Some("h"), dl dl(0, 16), ffi Some(3),
        ["s16", "i2", "h"];
    /// Signed 32-bit integer.
    S32 = 4, "int32", bits 32, host 32, Signed, fmt Some("i"), dl dl(0, 32), ffi Some(4),
        ["s32", "i4", "i"];
    /// Signed 64-bit integer.
    S64 = 5, "int64", bits 64, host 64, Signed, fmt Some("q"), dl dl(0, 64), ffi Some(5),
        ["s64", "i8", "q", "l", "p", "int", "int_", "intp"];
    /// Unsigned 8-bit integer.
    U8 = 6, "uint8", bits 8, host 8, Unsigned, fmt Some("B"), dl dl(1, 8), ffi Some(6),
        ["B"];
    /// Unsigned 16-bit integer.
    U16 = 7, "uint16", bits 16, host 16, Unsigned, fmt Some("H"), dl dl(1, 16), ffi Some(7),
        ["u16", "H"];
    /// Unsigned 32-bit integer.
    U32 = 8, "uint32", bits 32, host 32, Unsigned, fmt Some("I"), dl dl(1, 32), ffi Some(8),
        ["u32", "I"];
    /// Unsigned 64-bit integer.
    U64 = 9, "uint64", bits 64, host 64, Unsigned, fmt Some("Q"), dl dl(1, 64), ffi Some(9),
        ["u64", "Q", "L", "P", "uint", "uintp"];
    /// IEEE half precision.
    F16 = 10, "float16", bits 16, host 16, Float, fmt Some("e"), dl dl(2, 16), ffi Some(10),
        ["f2", "half", "e"];
    /// IEEE single precision.
    F32 = 11, "float32", bits 32, host 32, Float, fmt Some("f"), dl dl(2, 32), ffi Some(11),
        ["f32", "f4", "single", "f"];
    /// IEEE double precision.
    F64 = 12, "float64", bits 64, host 64, Float, fmt Some("d"), dl dl(2, 64), ffi Some(12),
        ["f64", "f8", "double", "d", "float"];
    /// bfloat16.
    BF16 = 13, "bfloat16", bits 16, host 16, Float, fmt None, dl dl(4, 16), ffi Some(16),
        ["bf16"];
    /// Complex of two f32.
    C64 = 14, "complex64", bits 64, host 64, Complex, fmt Some("Zf"), dl dl(5, 64),
        ffi Some(15), ["c64", "c8", "F"];
    /// Complex of two f64.
    C128 = 15, "complex128", bits 128, host 128, Complex, fmt Some("Zd"), dl dl(5, 128),
        ffi Some(18), ["c128", "c16", "D", "complex"];
    /// 8-bit float, 5 exponent bits, 2 mantissa bits.
    F8E5M2 = 16, "float8_e5m2", bits 8, host 8, Float, fmt None, dl dl(12, 8), ffi Some(19),
        ["f8e5m2"];
    /// 8-bit float, 4 exponent bits, 3 mantissa bits, finite only.
    F8E4M3FN = 17, "float8_e4m3fn", bits 8, host 8, Float, fmt None, dl dl(10, 8),
        ffi Some(20), ["f8e4m3fn"];
    /// 8-bit float, 4 exponent bits, bias 11, finite, unsigned zero.
    F8E4M3B11FNUZ = 18, "float8_e4m3b11fnuz", bits 8, host 8, Float, fmt None, dl dl(9, 8),
        ffi Some(23), ["f8e4m3b11fnuz"];
    /// 8-bit float, 5 exponent bits, finite, unsigned zero.
    F8E5M2FNUZ = 19, "float8_e5m2fnuz", bits 8, host 8, Float, fmt None, dl dl(13, 8),
        ffi Some(24), ["f8e5m2fnuz"];
    /// 8-bit float, 4 exponent bits, finite, unsigned zero.
    F8E4M3FNUZ = 20, "float8_e4m3fnuz", bits 8, host 8, Float, fmt None, dl dl(11, 8),
        ffi Some(25), ["f8e4m3fnuz"];
    /// Signed 4-bit integer, two per byte.
    S4 = 21, "int4", bits 4, host 4, Signed, fmt None, dl dl(0, 4), ffi Some(21), ["s4"];
    /// Unsigned 4-bit integer, two per byte.
    U4 = 22, "uint4", bits 4, host 4, Unsigned, fmt None, dl dl(1, 4), ffi Some(22), [];
    /// XLA token (no data).
    Token = 23, "token", bits 0, host 0, Token, fmt None, dl None, ffi Some(17), [];
    /// Signed 2-bit integer, four per byte.
    S2 = 24, "int2", bits 2, host 2, Signed, fmt None, dl dl(0, 2), ffi Some(26), ["s2"];
    /// Unsigned 2-bit integer, four per byte.
    U2 = 25, "uint2", bits 2, host 2, Unsigned, fmt None, dl dl(1, 2), ffi Some(27), [];
    /// 8-bit float, IEEE-like with 4 exponent bits.
    F8E4M3 = 26, "float8_e4m3", bits 8, host 8, Float, fmt None, dl dl(8, 8), ffi Some(28),
        ["f8e4m3"];
    /// 8-bit float, 3 exponent bits, 4 mantissa bits.
    F8E3M4 = 27, "float8_e3m4", bits 8, host 8, Float, fmt None, dl dl(7, 8), ffi Some(29),
        ["f8e3m4"];
    /// 8-bit exponent-only scale type.
    F8E8M0FNU = 28, "float8_e8m0fnu", bits 8, host 8, Float, fmt None, dl dl(14, 8),
        ffi Some(33), ["f8e8m0fnu"];
    /// 4-bit float, two per byte.
    F4E2M1FN = 29, "float4_e2m1fn", bits 4, host 4, Float, fmt None, dl dl(17, 4),
        ffi Some(32), ["f4e2m1fn"];
    /// Signed 1-bit integer, eight per byte.
    S1 = 30, "int1", bits 1, host 1, Signed, fmt None, dl dl(0, 1), ffi Some(30), ["s1"];
    /// Unsigned 1-bit integer, eight per byte.
    U1 = 31, "uint1", bits 1, host 1, Unsigned, fmt None, dl dl(1, 1), ffi Some(31), [];
    /// 6-bit float (2 exponent bits), one per byte in host memory.
    F6E2M3FN = 32, "float6_e2m3fn", bits 6, host 8, Float, fmt None, dl dl(15, 6), ffi None,
        ["f6e2m3fn"];
    /// 6-bit float (3 exponent bits), one per byte in host memory.
    F6E3M2FN = 33, "float6_e3m2fn", bits 6, host 8, Float, fmt None, dl dl(16, 6), ffi None,
        ["f6e3m2fn"];
}

/// Short names that numpy (size in bytes) and XLA (size in bits) read differently:
/// (name, numpy's reading, XLA's reading).
const AMBIGUOUS: &[(&str, &str, &str)] = &[
    ("u1", "uint8", "uint1"),
    ("u2", "uint16", "uint2"),
    ("u4", "uint32", "uint4"),
    ("u8", "uint64", "uint8"),
    ("f16", "float128 (which PJRT lacks)", "float16"),
];

/// Rust's type spellings, refused because numpy's `i8` is int64: (name, long name).
const RUST_SPELLINGS: &[(&str, &str)] = &[("i16", "int16"), ("i32", "int32"), ("i64", "int64")];

/// numpy's type codes that count bytes (a kind letter and a size), case-sensitive as numpy
/// reads them, with the type numpy means.
const NUMPY_SIZED_CODES: &[(&str, ElementType)] = &[
    ("b1", ElementType::Pred),
    ("i1", ElementType::S8),
    ("i2", ElementType::S16),
    ("i4", ElementType::S32),
    ("i8", ElementType::S64),
    ("u1", ElementType::U8),
    ("u2", ElementType::U16),
    ("u4", ElementType::U32),
    ("u8", ElementType::U64),
    ("f2", ElementType::F16),
    ("f4", ElementType::F32),
    ("f8", ElementType::F64),
    ("c8", ElementType::C64),
    ("c16", ElementType::C128),
];

/// numpy's reading of `name` when it is one of numpy's string type codes: `S`, `a` (bytes)
/// or `U` (unicode) and a count of characters (none for 0), or `c` (one byte), each with
/// an optional byte-order prefix; `None` for any other name.
fn numpy_string_code(name: &str) -> Option<String> {
    let code = name.strip_prefix(['<', '>', '=', '|']).unwrap_or(name);
    if code == "c" {
        return Some("a bytes string of 1 character (numpy.bytes_, 'S1')".into());
    }
    let (kind, count) = code.split_at_checked(1)?;
    if !count.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = count.trim_start_matches('0');
    let n = if n.is_empty() { "0" } else { n };
    let plural = if n == "1" { "" } else { "s" };
    match kind {
        "S" | "a" => Some(format!(
            "a bytes string of {n} character{plural} (numpy.bytes_, 'S{n}')"
        )),
        "U" => Some(format!(
            "a unicode string of {n} character{plural} (numpy.str_, 'U{n}')"
        )),
        _ => None,
    }
}

impl ElementType {
    /// True for the types packed several to a byte (`int4`, `uint2`, `float4_e2m1fn`, ...).
    pub const fn is_sub_byte(self) -> bool {
        self.storage_bits() < 8 && self.storage_bits() > 0
    }

    /// Bytes of a dense host buffer with `elements` elements of this type.
    pub fn dense_byte_size(self, elements: usize) -> Result<usize> {
        elements
            .checked_mul(self.storage_bits())
            .map(|bits| bits.div_ceil(8))
            .ok_or_else(|| {
                Error::ResourceExhausted(format!(
                    "{elements} elements of {self} overflow the address space"
                ))
            })
    }

    /// The PJRT minor version that added this buffer type code (57, rpjrt's floor, for the
    /// older ones). A plugin older than that crashes on the code instead of refusing it.
    pub const fn since_pjrt_minor(self) -> i32 {
        match self {
            ElementType::F8E8M0FNU | ElementType::F4E2M1FN => 63,
            ElementType::S1 | ElementType::U1 => 94,
            ElementType::F6E2M3FN | ElementType::F6E3M2FN => 114,
            _ => 57,
        }
    }

    /// Bytes per element in rpjrt's dense host form for types stored in whole bytes;
    /// `None` for the packed sub-byte types and the token.
    pub const fn byte_width(self) -> Option<usize> {
        if self.storage_bits() >= 8 {
            Some(self.storage_bits() / 8)
        } else {
            None
        }
    }

    /// Bytes per element in an unpacked host array as numpy / ml_dtypes store it: the byte
    /// width, 1 for the sub-byte types (one element per byte), 0 for the token.
    pub const fn host_itemsize(self) -> usize {
        match self.byte_width() {
            Some(w) => w,
            None if self.is_sub_byte() => 1,
            None => 0,
        }
    }

    /// The type with a DLPack data type, if rpjrt has one (lanes must be 1).
    pub fn from_dlpack(dt: DlDataType) -> Option<ElementType> {
        ElementType::ALL
            .iter()
            .copied()
            .find(|t| t.dlpack() == Some(dt))
    }

    /// The type with an XLA FFI `DataType` number, if rpjrt has one (a table lookup: custom
    /// calls ask this for every buffer of every call).
    pub fn from_ffi_code(code: i32) -> Option<ElementType> {
        usize::try_from(code)
            .ok()
            .and_then(|c| BY_FFI_CODE.get(c).copied().flatten())
    }

    /// The type a name denotes; see the module documentation for the rule. Errors name
    /// both readings of an ambiguous name, or list the known names.
    pub fn from_name(name: &str) -> Result<ElementType> {
        if let Some(t) = Self::exact_name(name) {
            return Ok(t);
        }
        let lower = name.to_ascii_lowercase();
        if let Some(numpy) = numpy_string_code(name) {
            // Its lower case may be an XLA spelling ('S8' and s8): say how to write that.
            let xla = match AMBIGUOUS.iter().find(|(n, _, _)| *n == lower) {
                Some(&(_, _, xla)) => Some(format!("; for XLA's {lower} ({xla}) write {xla:?}")),
                None => Self::exact_name(&lower).map(|t| {
                    format!(
                        "; for XLA's {lower} ({t}) write {lower:?} or {:?}",
                        t.name()
                    )
                }),
            };
            return Err(Error::invalid(format!(
                "element type name {name:?} is numpy's type code for {numpy}; rpjrt has no \
                 string types{}",
                xla.unwrap_or_default()
            )));
        }
        if let Some(t) = Self::numpy_typestr(name)? {
            return Ok(t);
        }
        if let Some(&(_, np, xla)) = AMBIGUOUS.iter().find(|(n, _, _)| *n == lower) {
            return Err(Error::invalid(format!(
                "element type name {name:?} is ambiguous: numpy reads {lower:?} as {np}, XLA \
                 as {xla}; write the full name"
            )));
        }
        if let Some(&(_, long)) = RUST_SPELLINGS.iter().find(|(n, _)| *n == lower) {
            return Err(Error::invalid(format!(
                "element type name {name:?} is not accepted: numpy's short codes count bytes \
                 ('i8' is int64), so write {long:?} (or XLA's 's{}')",
                &lower[1..]
            )));
        }
        if let Some(&(code, t)) = NUMPY_SIZED_CODES.iter().find(|(n, _)| *n == lower) {
            // Only the exact case is numpy's ('F' alone is complex64, 'I' uint32).
            return Err(Error::invalid(format!(
                "element type name {name:?} is not accepted: numpy's type codes are \
                 case-sensitive and numpy does not read {name:?} (its {code:?} is {t}); write \
                 {code:?} or {:?}",
                t.name()
            )));
        }
        // Case-insensitive match of the multi-letter names and XLA spellings (one-letter
        // codes are case-sensitive: 'f' is float32, 'F' complex64; so are numpy's sized
        // codes, refused above).
        for &t in ElementType::ALL {
            if t.name() == lower || t.aliases().iter().any(|a| a.len() > 1 && *a == lower) {
                return Ok(t);
            }
        }
        let known: Vec<&str> = ElementType::ALL.iter().map(|t| t.name()).collect();
        Err(Error::invalid(format!(
            "unknown element type name {name:?}: it is not a dtype rpjrt knows; known: {}",
            known.join(", ")
        )))
    }

    fn exact_name(name: &str) -> Option<ElementType> {
        ElementType::ALL
            .iter()
            .copied()
            .find(|t| t.name() == name || t.aliases().contains(&name))
    }

    /// numpy's typestr / type code reading of `s` with a byte-order prefix (`<i8`, `|b1`,
    /// `=f`), or `None` when `s` has no such prefix.
    fn numpy_typestr(s: &str) -> Result<Option<ElementType>> {
        let Some(order) = s.chars().next().filter(|c| "<>=|@".contains(*c)) else {
            return Ok(None);
        };
        let rest = &s[1..];
        let t = match NUMPY_SIZED_CODES.iter().find(|(n, _)| *n == rest) {
            Some(&(_, t)) => Some(t),
            None => ElementType::ALL
                .iter()
                .copied()
                .find(|t| t.buffer_format() == Some(rest) && rest.len() == 1),
        };
        let Some(t) = t else {
            return Err(Error::invalid(format!(
                "{s:?} is not a numpy type string for an element type rpjrt knows"
            )));
        };
        let big_endian_host = cfg!(target_endian = "big");
        let foreign = match order {
            '<' => big_endian_host,
            '>' => !big_endian_host,
            _ => false,
        };
        if foreign && t.host_itemsize() > 1 {
            return Err(Error::invalid(format!(
                "{s:?} names {t} in non-native byte order; device buffers hold native-order \
                 data (byte-swap the host data first)"
            )));
        }
        Ok(Some(t))
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    /// The private supertrait that seals [`super::NativeType`]: only rpjrt implements it.
    ///
    /// Requires raw's `HostScalar` (the same types): their slices may be viewed as bytes.
    pub trait Sealed: Sized + crate::util::HostScalar {
        /// Values read from the dense host bytes of a buffer of the matching type (native
        /// byte order; a trailing partial element is ignored). Never builds an invalid value:
        /// `bool` is read as "byte != 0".
        fn from_host_bytes(bytes: &[u8]) -> Vec<Self>;
    }
}

/// Rust scalar types that map to one element type, for typed host transfers.
///
/// Sealed: rpjrt implements it for `bool`, the integer types `i8` … `u64`, `f32` and `f64`,
/// and nothing else can, since values are built from raw buffer bytes. An implementation
/// outside rpjrt does not compile:
///
/// ```compile_fail,E0277
/// // A reference type would let `to_vec_of` hand out dangling references.
/// impl rpjrt_raw::dtype::NativeType for &'static u8 {
///     const ELEMENT_TYPE: rpjrt_raw::dtype::ElementType = rpjrt_raw::dtype::ElementType::U8;
/// }
/// ```
///
/// ```compile_fail,E0277
/// #[derive(Clone, Copy)]
/// struct Mine(u8);
/// impl rpjrt_raw::dtype::NativeType for Mine {
///     const ELEMENT_TYPE: rpjrt_raw::dtype::ElementType = rpjrt_raw::dtype::ElementType::U8;
/// }
/// ```
///
/// The failure is the missing private supertrait, not anything else in the code: the same
/// shape against a trait without one compiles.
///
/// ```
/// trait Open: Copy + Send + Sync + 'static {
///     const ELEMENT_TYPE: rpjrt_raw::dtype::ElementType;
/// }
/// impl Open for &'static u8 {
///     const ELEMENT_TYPE: rpjrt_raw::dtype::ElementType = rpjrt_raw::dtype::ElementType::U8;
/// }
/// ```
pub trait NativeType: sealed::Sealed + Copy + Send + Sync + 'static {
    /// The element type of this Rust type.
    const ELEMENT_TYPE: ElementType;
}

/// Reads native-order values of a numeric type from bytes (safe code: `from_ne_bytes`).
macro_rules! native {
    ($($t:ty => $e:ident),* $(,)?) => {
        $(
            impl sealed::Sealed for $t {
                fn from_host_bytes(bytes: &[u8]) -> Vec<$t> {
                    const N: usize = std::mem::size_of::<$t>();
                    bytes
                        .chunks_exact(N)
                        .map(|c| {
                            let mut a = [0u8; N];
                            a.copy_from_slice(c);
                            <$t>::from_ne_bytes(a)
                        })
                        .collect()
                }
            }
            impl NativeType for $t { const ELEMENT_TYPE: ElementType = ElementType::$e; }
        )*
    };
}
native!(i8 => S8, i16 => S16, i32 => S32, i64 => S64, u8 => U8, u16 => U16,
        u32 => U32, u64 => U64, f32 => F32, f64 => F64);

impl sealed::Sealed for bool {
    fn from_host_bytes(bytes: &[u8]) -> Vec<bool> {
        // PRED is one byte; anything but 0 is true (a plugin or a host view over other
        // bytes may hold 2, which must never become an invalid `bool`).
        bytes.iter().map(|&b| b != 0).collect()
    }
}
impl NativeType for bool {
    const ELEMENT_TYPE: ElementType = ElementType::Pred;
}

/// Views a slice of native scalars as bytes (no copy).
pub fn as_bytes<T: NativeType>(data: &[T]) -> &[u8] {
    crate::util::as_bytes(data)
}

/// Values of `T` from dense host bytes of `T`'s element type (see [`NativeType`]).
pub fn values_from_bytes<T: NativeType>(bytes: &[u8]) -> Vec<T> {
    T::from_host_bytes(bytes)
}

/// The first byte of `unpacked` (one element of `ty` per byte, `ty` narrower than a byte)
/// that holds no element of `ty`, and its index: one whose bits above the element's are
/// neither clear (ml_dtypes' form: int4 -2 is `0x0e`) nor, for a signed type, copies of
/// its sign (the plugins' `0xfe`). Packing keeps only the low bits: it would change value.
pub fn first_foreign_byte(ty: ElementType, unpacked: &[u8]) -> Option<(usize, u8)> {
    let (w, signed) = (ty.bit_width(), ty.kind() == ElementKind::Signed);
    if w >= 8 || w == 0 || ty.kind() == ElementKind::Token {
        return None;
    }
    let fits = |b: u8| b >> w == 0 || signed && (b as i8) >> (w - 1) == -1;
    let i = unpacked.iter().position(|&b| !fits(b))?;
    Some((i, unpacked[i]))
}

/// Why [`first_foreign_byte`] refused element `index`, the byte `byte`.
pub fn foreign_byte_text(ty: ElementType, index: usize, byte: u8) -> String {
    let ext = if ty.kind() == ElementKind::Signed {
        ", or those sign-extended"
    } else {
        ""
    };
    format!(
        "element {index} is the byte {byte:#04x}, which is no {ty} value ({} bits{ext})",
        ty.bit_width()
    )
}

/// Packs one-element-per-byte values of a sub-byte type into the dense form: element `i`
/// goes to bits `(i * w) % 8` of byte `i * w / 8` (lowest bits first), `w` the bit width.
/// Aborts if the result cannot be allocated: for sizes that come from a buffer or a caller,
/// use [`try_pack_sub_byte`].
pub fn pack_sub_byte(ty: ElementType, unpacked: &[u8]) -> Vec<u8> {
    if !ty.is_sub_byte() {
        return unpacked.to_vec();
    }
    let mut out = vec![0u8; (unpacked.len() * ty.storage_bits()).div_ceil(8)];
    pack_into(ty, unpacked, &mut out);
    out
}

/// [`pack_sub_byte`], with [`Error::ResourceExhausted`] when the result cannot be allocated.
pub fn try_pack_sub_byte(ty: ElementType, unpacked: &[u8]) -> Result<Vec<u8>> {
    let what = format!("packing {} {ty} elements", unpacked.len());
    if !ty.is_sub_byte() {
        let mut v = try_alloc(unpacked.len(), &what)?;
        v.extend_from_slice(unpacked);
        return Ok(v);
    }
    let len = unpacked.len().saturating_mul(ty.storage_bits()).div_ceil(8);
    let mut out = try_zeroed(len, &what)?;
    pack_into(ty, unpacked, &mut out);
    Ok(out)
}

fn pack_into(ty: ElementType, unpacked: &[u8], out: &mut [u8]) {
    let w = ty.storage_bits();
    let mask = ((1u16 << w) - 1) as u8;
    for (i, &v) in unpacked.iter().enumerate() {
        let bit = i * w;
        out[bit / 8] |= (v & mask) << (bit % 8);
    }
}

/// Unpacks `count` elements of a sub-byte type from the dense form (see [`pack_sub_byte`])
/// into one byte each; signed types are sign-extended, as PJRT's CPU plugins store them.
/// Aborts if the result cannot be allocated: for sizes that come from a buffer or a caller,
/// use [`try_unpack_sub_byte`].
pub fn unpack_sub_byte(ty: ElementType, packed: &[u8], count: usize) -> Vec<u8> {
    if !ty.is_sub_byte() {
        return packed.to_vec();
    }
    let mut out = Vec::with_capacity(count);
    unpack_into(ty, packed, count, &mut out);
    out
}

/// [`unpack_sub_byte`], with [`Error::ResourceExhausted`] when the result cannot be
/// allocated.
pub fn try_unpack_sub_byte(ty: ElementType, packed: &[u8], count: usize) -> Result<Vec<u8>> {
    let what = format!("unpacking {count} {ty} elements");
    if !ty.is_sub_byte() {
        let mut v = try_alloc(packed.len(), &what)?;
        v.extend_from_slice(packed);
        return Ok(v);
    }
    let mut out = try_alloc(count, &what)?;
    unpack_into(ty, packed, count, &mut out);
    Ok(out)
}

fn unpack_into(ty: ElementType, packed: &[u8], count: usize, out: &mut Vec<u8>) {
    let w = ty.storage_bits();
    let signed = matches!(ty, ElementType::S4 | ElementType::S2 | ElementType::S1);
    let mask = ((1u16 << w) - 1) as u8;
    out.extend((0..count).map(|i| {
        let bit = i * w;
        let v = (packed[bit / 8] >> (bit % 8)) & mask;
        if signed && v & (1 << (w - 1)) != 0 {
            v | !mask
        } else {
            v
        }
    }));
}

/// Number of elements in a shape, with a clear error for negative or overflowing dims.
pub fn element_count(dims: &[i64]) -> Result<usize> {
    // One pass in the common case (every dropped Python buffer asks), the refusals apart.
    let n = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?));
    n.map_or_else(|| element_count_slow(dims), Ok)
}

/// [`element_count`] of a shape with a negative dimension or a product past `usize`.
#[cold]
fn element_count_slow(dims: &[i64]) -> Result<usize> {
    let mut n = Some(1usize);
    for (i, &d) in dims.iter().enumerate() {
        let d = usize::try_from(d)
            .map_err(|_| Error::invalid(format!("dimension {i} is negative ({d})")))?;
        n = n.and_then(|n| n.checked_mul(d));
    }
    // A zero dimension empties the shape, however large the others (numpy makes these).
    n.or(dims.contains(&0).then_some(0))
        .ok_or_else(|| Error::invalid(format!("shape {dims:?} has too many elements")))
}

/// The largest size in bits of an XLA array: XLA computes an array's size in bits (for the
/// sub-byte types) in a signed 64-bit integer, so a larger one wraps (int4[2**31, 2**31] is
/// 2**64 bits, which wraps to 0, and the plugin allocates nothing for it).
pub const MAX_ARRAY_BITS: u128 = i64::MAX as u128;

/// Whether an array of `dims` with elements `bits` wide holds more than [`MAX_ARRAY_BITS`]
/// bits. Dynamic (negative) dimensions are left out; a zero dimension empties the array.
pub fn exceeds_array_bits(dims: &[i64], bits: usize) -> bool {
    if dims.contains(&0) {
        return false;
    }
    let total = dims
        .iter()
        .filter(|&&d| d > 0)
        .fold(bits as u128, |n, &d| n.saturating_mul(d as u128));
    total > MAX_ARRAY_BITS
}

/// Why `ty[dims]` is refused when [`exceeds_array_bits`] says so.
pub fn array_bits_text(ty: impl fmt::Display, dims: &[i64], bits: usize) -> String {
    format!(
        "{ty}{dims:?} is more than 2**63 - 1 bits ({bits} bits per element), which no XLA \
         array can hold (XLA counts array sizes in bits in a signed 64-bit integer)"
    )
}

/// Bytes of a dense `ty[dims]`, refused naming the shape when a dimension is negative or
/// the size passes 2**63 - 1 bits, which XLA's shapes cannot hold (the plugins throw on
/// such shapes, or for the sub-byte types wrap the size and allocate nothing, instead of
/// returning an error).
pub fn array_bytes(ty: ElementType, dims: &[i64]) -> Result<usize> {
    let bits = element_count(dims)? as u128 * ty.storage_bits() as u128;
    match usize::try_from(bits.div_ceil(8)) {
        Ok(b) if bits <= MAX_ARRAY_BITS => Ok(b),
        _ if bits.div_ceil(8) > MAX_ARRAY_BITS => Err(Error::invalid(format!(
            "{ty}{dims:?} is more than 2**63 - 1 bytes, which no XLA array can hold"
        ))),
        _ => Err(Error::invalid(array_bits_text(ty, dims, ty.storage_bits()))),
    }
}

/// Whether `data` of `ty` holds bool bytes other than 0 and 1.
pub fn needs_bool_normalising(ty: ElementType, data: &[u8]) -> bool {
    ty == ElementType::Pred && data.iter().any(|&b| b > 1)
}

/// `data` with every nonzero byte made 1 (fallibly allocated).
pub fn normalised_bools(data: &[u8]) -> Result<Vec<u8>> {
    let mut v = try_alloc(data.len(), "normalising bool bytes")?;
    v.extend(data.iter().map(|&b| u8::from(b != 0)));
    Ok(v)
}

/// An empty vector with room for `len` bytes, or [`Error::ResourceExhausted`] naming
/// `what` (never an abort).
pub fn try_alloc(len: usize, what: &str) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        Error::ResourceExhausted(format!(
            "{what} needs a host allocation of {len} bytes, which cannot be made"
        ))
    })?;
    Ok(v)
}

/// A vector of `len` zero bytes, or [`Error::ResourceExhausted`] naming `what` (never an
/// abort). The zeroed memory comes from the allocator's zeroed allocation (`calloc`): large
/// ones are fresh pages, not written here.
pub fn try_zeroed(len: usize, what: &str) -> Result<Vec<u8>> {
    if len == 0 {
        return Ok(Vec::new());
    }
    let failed = || {
        Error::ResourceExhausted(format!(
            "{what} needs a host allocation of {len} bytes, which cannot be made"
        ))
    };
    let layout = std::alloc::Layout::array::<u8>(len).map_err(|_| failed())?;
    // SAFETY: the layout's size is not zero (`len > 0`).
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        return Err(failed());
    }
    // SAFETY: `p` was allocated by the global allocator with the layout of `[u8; len]`
    // (the layout `Vec<u8>` uses for capacity `len`), and all `len` bytes are initialised
    // (zero).
    Ok(unsafe { Vec::from_raw_parts(p, len, len) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `raw` keeps the two width tables it sizes memory with (it imports nothing from the
    /// safe layer); they must agree with this table for every code.
    #[test]
    fn raw_width_tables_agree_with_the_element_type_table() {
        for code in -2..80 {
            let by_table = ElementType::from_ffi_code(code).map(|t| t.storage_bits());
            assert_eq!(
                crate::util::ffi_storage_bits(code),
                by_table,
                "FFI code {code}"
            );
            let host = ElementType::from_code(code)
                .ok()
                .map(|t| t.host_itemsize())
                .filter(|&n| n > 0);
            assert_eq!(
                crate::util::host_element_bytes(code),
                host,
                "PJRT code {code}"
            );
        }
    }

    #[test]
    fn codes_round_trip_and_names_are_unique() {
        let mut names = std::collections::HashSet::new();
        for &t in ElementType::ALL {
            assert_eq!(ElementType::from_code(t.code()).unwrap(), t);
            assert_eq!(ElementType::from_name(t.name()).unwrap(), t);
            assert!(names.insert(t.name()));
            for a in t.aliases() {
                assert_eq!(ElementType::from_name(a).unwrap(), t, "alias {a}");
                assert!(names.insert(a), "alias {a} used twice");
            }
        }
        assert_eq!(ElementType::ALL.len(), 33);
    }

    /// The one table against independent sources: rpjrt-sys's PJRT and XLA FFI constants
    /// (declared from the C headers) and DLPack's published codes.
    #[test]
    #[allow(clippy::type_complexity)]
    fn table_agrees_with_pjrt_ffi_and_dlpack() {
        use rpjrt_sys as s;
        let rows: &[(ElementType, i32, Option<i32>, Option<(u8, u8)>, usize)] = &[
            (
                ElementType::Pred,
                s::PJRT_Buffer_Type_PRED,
                Some(s::XLA_FFI_DataType_PRED),
                Some((6, 8)),
                8,
            ),
            (
                ElementType::S8,
                s::PJRT_Buffer_Type_S8,
                Some(s::XLA_FFI_DataType_S8),
                Some((0, 8)),
                8,
            ),
            (
                ElementType::S16,
                s::PJRT_Buffer_Type_S16,
                Some(s::XLA_FFI_DataType_S16),
                Some((0, 16)),
                16,
            ),
            (
                ElementType::S32,
                s::PJRT_Buffer_Type_S32,
                Some(s::XLA_FFI_DataType_S32),
                Some((0, 32)),
                32,
            ),
            (
                ElementType::S64,
                s::PJRT_Buffer_Type_S64,
                Some(s::XLA_FFI_DataType_S64),
                Some((0, 64)),
                64,
            ),
            (
                ElementType::U8,
                s::PJRT_Buffer_Type_U8,
                Some(s::XLA_FFI_DataType_U8),
                Some((1, 8)),
                8,
            ),
            (
                ElementType::U16,
                s::PJRT_Buffer_Type_U16,
                Some(s::XLA_FFI_DataType_U16),
                Some((1, 16)),
                16,
            ),
            (
                ElementType::U32,
                s::PJRT_Buffer_Type_U32,
                Some(s::XLA_FFI_DataType_U32),
                Some((1, 32)),
                32,
            ),
            (
                ElementType::U64,
                s::PJRT_Buffer_Type_U64,
                Some(s::XLA_FFI_DataType_U64),
                Some((1, 64)),
                64,
            ),
            (
                ElementType::F16,
                s::PJRT_Buffer_Type_F16,
                Some(s::XLA_FFI_DataType_F16),
                Some((2, 16)),
                16,
            ),
            (
                ElementType::F32,
                s::PJRT_Buffer_Type_F32,
                Some(s::XLA_FFI_DataType_F32),
                Some((2, 32)),
                32,
            ),
            (
                ElementType::F64,
                s::PJRT_Buffer_Type_F64,
                Some(s::XLA_FFI_DataType_F64),
                Some((2, 64)),
                64,
            ),
            (
                ElementType::BF16,
                s::PJRT_Buffer_Type_BF16,
                Some(s::XLA_FFI_DataType_BF16),
                Some((4, 16)),
                16,
            ),
            (
                ElementType::C64,
                s::PJRT_Buffer_Type_C64,
                Some(s::XLA_FFI_DataType_C64),
                Some((5, 64)),
                64,
            ),
            (
                ElementType::C128,
                s::PJRT_Buffer_Type_C128,
                Some(s::XLA_FFI_DataType_C128),
                Some((5, 128)),
                128,
            ),
            (
                ElementType::F8E5M2,
                s::PJRT_Buffer_Type_F8E5M2,
                Some(s::XLA_FFI_DataType_F8E5M2),
                Some((12, 8)),
                8,
            ),
            (
                ElementType::F8E4M3FN,
                s::PJRT_Buffer_Type_F8E4M3FN,
                Some(s::XLA_FFI_DataType_F8E4M3FN),
                Some((10, 8)),
                8,
            ),
            (
                ElementType::F8E4M3B11FNUZ,
                s::PJRT_Buffer_Type_F8E4M3B11FNUZ,
                Some(s::XLA_FFI_DataType_F8E4M3B11FNUZ),
                Some((9, 8)),
                8,
            ),
            (
                ElementType::F8E5M2FNUZ,
                s::PJRT_Buffer_Type_F8E5M2FNUZ,
                Some(s::XLA_FFI_DataType_F8E5M2FNUZ),
                Some((13, 8)),
                8,
            ),
            (
                ElementType::F8E4M3FNUZ,
                s::PJRT_Buffer_Type_F8E4M3FNUZ,
                Some(s::XLA_FFI_DataType_F8E4M3FNUZ),
                Some((11, 8)),
                8,
            ),
            (
                ElementType::S4,
                s::PJRT_Buffer_Type_S4,
                Some(s::XLA_FFI_DataType_S4),
                Some((0, 4)),
                4,
            ),
            (
                ElementType::U4,
                s::PJRT_Buffer_Type_U4,
                Some(s::XLA_FFI_DataType_U4),
                Some((1, 4)),
                4,
            ),
            (
                ElementType::Token,
                s::PJRT_Buffer_Type_TOKEN,
                Some(s::XLA_FFI_DataType_TOKEN),
                None,
                0,
            ),
            (
                ElementType::S2,
                s::PJRT_Buffer_Type_S2,
                Some(s::XLA_FFI_DataType_S2),
                Some((0, 2)),
                2,
            ),
            (
                ElementType::U2,
                s::PJRT_Buffer_Type_U2,
                Some(s::XLA_FFI_DataType_U2),
                Some((1, 2)),
                2,
            ),
            (
                ElementType::F8E4M3,
                s::PJRT_Buffer_Type_F8E4M3,
                Some(s::XLA_FFI_DataType_F8E4M3),
                Some((8, 8)),
                8,
            ),
            (
                ElementType::F8E3M4,
                s::PJRT_Buffer_Type_F8E3M4,
                Some(s::XLA_FFI_DataType_F8E3M4),
                Some((7, 8)),
                8,
            ),
            (
                ElementType::F8E8M0FNU,
                s::PJRT_Buffer_Type_F8E8M0FNU,
                Some(s::XLA_FFI_DataType_F8E8M0FNU),
                Some((14, 8)),
                8,
            ),
            (
                ElementType::F4E2M1FN,
                s::PJRT_Buffer_Type_F4E2M1FN,
                Some(s::XLA_FFI_DataType_F4E2M1FN),
                Some((17, 4)),
                4,
            ),
            (
                ElementType::S1,
                s::PJRT_Buffer_Type_S1,
                Some(s::XLA_FFI_DataType_S1),
                Some((0, 1)),
                1,
            ),
            (
                ElementType::U1,
                s::PJRT_Buffer_Type_U1,
                Some(s::XLA_FFI_DataType_U1),
                Some((1, 1)),
                1,
            ),
            (
                ElementType::F6E2M3FN,
                s::PJRT_Buffer_Type_F6E2M3FN,
                None,
                Some((15, 6)),
                6,
            ),
            (
                ElementType::F6E3M2FN,
                s::PJRT_Buffer_Type_F6E3M2FN,
                None,
                Some((16, 6)),
                6,
            ),
        ];
        assert_eq!(rows.len(), ElementType::ALL.len());
        for &(t, pjrt, ffi, dl, bits) in rows {
            assert_eq!(t.code(), pjrt, "{t} PJRT code");
            assert_eq!(t.ffi_code(), ffi, "{t} FFI code");
            if let Some(f) = ffi {
                assert_eq!(ElementType::from_ffi_code(f), Some(t));
            }
            let dl = dl.map(|(code, bits)| DlDataType {
                code,
                bits,
                lanes: 1,
            });
            assert_eq!(t.dlpack(), dl, "{t} DLPack");
            if let Some(d) = dl {
                assert_eq!(ElementType::from_dlpack(d), Some(t));
                assert_eq!(usize::from(d.bits), t.bit_width(), "{t} DLPack bits");
            }
            assert_eq!(t.bit_width(), bits, "{t} bits");
        }
        assert_eq!(ElementType::from_ffi_code(0), None);
        assert_eq!(
            ElementType::from_dlpack(DlDataType {
                code: 2,
                bits: 32,
                lanes: 4
            }),
            None
        );
    }

    #[test]
    fn names_follow_numpy_for_numpy_codes_and_refuse_ambiguity() {
        let ok = |n: &str, t: ElementType| assert_eq!(ElementType::from_name(n).unwrap(), t, "{n}");
        ok("i8", ElementType::S64);
        ok("<i8", ElementType::S64);
        ok("i4", ElementType::S32);
        ok("i1", ElementType::S8);
        ok("s8", ElementType::S8);
        ok("int8", ElementType::S8);
        ok("s4", ElementType::S4);
        ok("float", ElementType::F64);
        ok("f8", ElementType::F64);
        ok("F32", ElementType::F32);
        ok("f", ElementType::F32);
        ok("F", ElementType::C64);
        ok("|b1", ElementType::Pred);
        ok("|u1", ElementType::U8);
        ok("<u8", ElementType::U64);
        ok("=f4", ElementType::F32);
        ok(">i1", ElementType::S8);
        ok("BFloat16", ElementType::BF16);
        for n in ["u1", "u2", "u4", "u8", "f16", "F16"] {
            let e = ElementType::from_name(n).unwrap_err().to_string();
            assert!(e.contains("ambiguous"), "{n}: {e}");
        }
        let e = ElementType::from_name("F16").unwrap_err().to_string();
        assert!(e.contains("numpy reads \"f16\" as float128"), "{e}");
        for n in ["i16", "i32", "i64"] {
            let e = ElementType::from_name(n).unwrap_err().to_string();
            assert!(e.contains("'i8' is int64"), "{n}: {e}");
        }
        let e = ElementType::from_name(">f4").unwrap_err().to_string();
        assert!(e.contains("byte order"), "{e}");
        assert!(ElementType::from_name("float7").is_err());
        assert!(ElementType::from_name("<x9").is_err());
        assert!(ElementType::from_name("").is_err());
    }

    #[test]
    fn numpy_string_codes_are_refused_as_strings() {
        let err = |n: &str| ElementType::from_name(n).unwrap_err().to_string();
        // numpy reads these as strings; their lower case is XLA's (s8 is int8).
        for (n, numpy) in [
            ("S1", "a bytes string of 1 character (numpy.bytes_, 'S1')"),
            ("S8", "a bytes string of 8 characters (numpy.bytes_, 'S8')"),
            ("S16", "a bytes string of 16 characters"),
            ("S32", "a bytes string of 32 characters"),
            ("S64", "a bytes string of 64 characters"),
            ("S2", "a bytes string of 2 characters"),
            ("S4", "a bytes string of 4 characters"),
            ("S0", "a bytes string of 0 characters"),
            ("S", "a bytes string of 0 characters"),
            ("S08", "a bytes string of 8 characters"),
            ("a8", "a bytes string of 8 characters (numpy.bytes_, 'S8')"),
            ("|S8", "a bytes string of 8 characters"),
            ("<a4", "a bytes string of 4 characters"),
            ("c", "a bytes string of 1 character (numpy.bytes_, 'S1')"),
            ("|c", "a bytes string of 1 character"),
            ("U1", "a unicode string of 1 character (numpy.str_, 'U1')"),
            ("U2", "a unicode string of 2 characters"),
            ("U4", "a unicode string of 4 characters"),
            ("U8", "a unicode string of 8 characters (numpy.str_, 'U8')"),
            ("U16", "a unicode string of 16 characters"),
            ("U32", "a unicode string of 32 characters"),
            ("U64", "a unicode string of 64 characters"),
            ("U", "a unicode string of 0 characters"),
            ("<U16", "a unicode string of 16 characters"),
            (">U8", "a unicode string of 8 characters"),
            ("=U3", "a unicode string of 3 characters"),
        ] {
            let e = err(n);
            assert!(
                e.contains(&format!("{n:?} is numpy's type code for {numpy}")),
                "{n}: {e}"
            );
            assert!(e.contains("rpjrt has no string types"), "{n}: {e}");
            assert!(!e.contains("uint8, XLA"), "{n}: {e}");
        }
        // The message names XLA's reading of the lower case, and how to write it.
        assert!(err("S8").contains("for XLA's s8 (int8) write \"s8\" or \"int8\""));
        assert!(err("U16").contains("for XLA's u16 (uint16) write \"u16\" or \"uint16\""));
        assert!(err("U1").contains("for XLA's u1 (uint1) write \"uint1\""));
        assert!(err("U8").contains("for XLA's u8 (uint8) write \"uint8\""));
        // The XLA spellings themselves, and other cases, keep their meaning.
        let ok = |n: &str, t: ElementType| assert_eq!(ElementType::from_name(n).unwrap(), t, "{n}");
        ok("s8", ElementType::S8);
        ok("s1", ElementType::S1);
        ok("s16", ElementType::S16);
        ok("u16", ElementType::U16);
        ok("u64", ElementType::U64);
        ok("BF16", ElementType::BF16);
        ok("PRED", ElementType::Pred);
        ok("C64", ElementType::C64);
        ok("F64", ElementType::F64);
        ok("Int8", ElementType::S8);
        ok("UINT16", ElementType::U16);
        ok("Complex", ElementType::C128);
        ok("F8E4M3FN", ElementType::F8E4M3FN);
        // numpy's byte-size codes are case-sensitive: 'I8' and 'F8' are not numpy's, and
        // its 'F' is complex64, so they are refused rather than read as 'i8' and 'f8'.
        for (n, code) in [
            ("I8", "i8"),
            ("F8", "f8"),
            ("F4", "f4"),
            ("B1", "b1"),
            ("C16", "c16"),
        ] {
            let e = err(n);
            assert!(
                e.contains("case-sensitive") && e.contains(&format!("write {code:?}")),
                "{e}"
            );
        }
        // Names that merely start with the letters are not string codes.
        assert!(err("Sx").contains("unknown element type name"));
        assert!(err("a").contains("bytes string of 0"));
        assert!(err("A8").contains("unknown element type name"));
    }

    #[test]
    fn float6_is_six_bits_stored_in_a_byte() {
        for t in [ElementType::F6E2M3FN, ElementType::F6E3M2FN] {
            assert_eq!(t.bit_width(), 6);
            assert_eq!(t.storage_bits(), 8);
            assert!(!t.is_sub_byte());
            assert_eq!(t.byte_width(), Some(1));
            assert_eq!(t.dense_byte_size(3).unwrap(), 3);
        }
    }

    #[test]
    fn pred_reads_nonzero_as_true() {
        assert_eq!(
            values_from_bytes::<bool>(&[0, 1, 2, 255]),
            vec![false, true, true, true]
        );
        assert_eq!(values_from_bytes::<u16>(&1u16.to_ne_bytes()), vec![1u16]);
        assert_eq!(values_from_bytes::<f32>(&[0, 0, 128, 63, 9]), vec![1.0f32]);
    }

    #[test]
    fn unknown_code_is_an_error() {
        let e = ElementType::from_code(99).unwrap_err();
        assert!(
            e.to_string().contains("unknown PJRT element type code 99"),
            "{e}"
        );
        assert!(ElementType::from_code(0).is_err());
    }

    #[test]
    fn sub_byte_sizes_are_packed() {
        assert_eq!(ElementType::S4.dense_byte_size(3).unwrap(), 2);
        assert_eq!(ElementType::U2.dense_byte_size(5).unwrap(), 2);
        assert_eq!(ElementType::F32.dense_byte_size(3).unwrap(), 12);
        assert_eq!(ElementType::Pred.dense_byte_size(0).unwrap(), 0);
    }

    #[test]
    fn sub_byte_pack_round_trips() {
        let vals: Vec<u8> = vec![0x01, 0xFF, 0x07, 0xF8, 0x00];
        let packed = pack_sub_byte(ElementType::S4, &vals);
        assert_eq!(packed, vec![0xF1, 0x87, 0x00]);
        assert_eq!(unpack_sub_byte(ElementType::S4, &packed, 5), vals);
        let u2 = vec![3u8, 0, 1, 2, 3];
        let p = pack_sub_byte(ElementType::U2, &u2);
        assert_eq!(p, vec![0b1001_0011, 0b11]);
        assert_eq!(unpack_sub_byte(ElementType::U2, &p, 5), u2);
    }

    #[test]
    fn fallible_pack_and_unpack_agree_and_refuse_impossible_sizes() {
        let vals: Vec<u8> = vec![0x01, 0xFF, 0x07, 0xF8, 0x00];
        let packed = try_pack_sub_byte(ElementType::S4, &vals).unwrap();
        assert_eq!(packed, pack_sub_byte(ElementType::S4, &vals));
        assert_eq!(
            try_unpack_sub_byte(ElementType::S4, &packed, 5).unwrap(),
            vals
        );
        assert_eq!(
            try_pack_sub_byte(ElementType::U8, &vals).unwrap(),
            vals.clone()
        );
        let e = try_unpack_sub_byte(ElementType::S4, &packed, usize::MAX).unwrap_err();
        assert!(matches!(e, Error::ResourceExhausted(_)), "{e}");
        assert!(e.to_string().contains("unpacking"), "{e}");
        let z = try_zeroed(4096, "a test").unwrap();
        assert_eq!(z.len(), 4096);
        assert!(z.iter().all(|&b| b == 0));
        assert!(try_zeroed(0, "a test").unwrap().is_empty());
        for len in [usize::MAX, isize::MAX as usize, 1 << 62] {
            let e = try_zeroed(len, "a host copy of x").unwrap_err();
            assert!(matches!(e, Error::ResourceExhausted(_)), "{e}");
            assert!(e.to_string().contains("a host copy of x"), "{e}");
        }
    }

    #[test]
    fn array_sizes_are_limited_in_bits_as_xla_counts_them() {
        let n = 1i64 << 31;
        // 2**62 int4 elements are 2**61 bytes but 2**64 bits: XLA's int64 wraps to 0.
        for (t, dims) in [
            (ElementType::S4, vec![n, n]),
            (ElementType::F4E2M1FN, vec![n, n]),
            (ElementType::U2, vec![i64::MAX]),
            (ElementType::S1, vec![i64::MAX, 2]),
            (ElementType::U8, vec![1 << 61]),
            (ElementType::F32, vec![1 << 59]),
        ] {
            let e = array_bytes(t, &dims).unwrap_err().to_string();
            assert!(
                e.contains("is more than 2**63 - 1 b") && e.contains(t.name()),
                "{e}"
            );
            if t.is_sub_byte() {
                assert!(
                    e.contains("2**63 - 1 bits") && e.contains("signed 64-bit"),
                    "{e}"
                );
            }
            assert!(exceeds_array_bits(&dims, t.storage_bits()), "{t}{dims:?}");
        }
        // Just under the limit: accepted (the plugin may still refuse to allocate them).
        assert_eq!(array_bytes(ElementType::S4, &[1 << 60]).unwrap(), 1 << 59);
        assert_eq!(
            array_bytes(ElementType::S1, &[i64::MAX]).unwrap(),
            1usize << 60
        );
        assert_eq!(array_bytes(ElementType::S4, &[n, n, 0]).unwrap(), 0);
        assert!(!exceeds_array_bits(&[n, n, 0], 4));
        assert!(!exceeds_array_bits(&[n, -1, n], 1));
        assert!(exceeds_array_bits(&[n, -1, n], 2));
    }

    #[test]
    fn element_count_rejects_negative_and_overflow() {
        assert_eq!(element_count(&[]).unwrap(), 1);
        assert_eq!(element_count(&[2, 0, 3]).unwrap(), 0);
        assert!(element_count(&[2, -1]).is_err());
        assert!(element_count(&[i64::MAX, i64::MAX]).is_err());
        // Empty whatever the other dims: numpy makes such arrays.
        assert_eq!(element_count(&[1 << 32, 1 << 32, 0]).unwrap(), 0);
        assert_eq!(element_count(&[0, i64::MAX, i64::MAX]).unwrap(), 0);
        assert!(element_count(&[0, -1]).is_err());
    }

    #[test]
    fn a_byte_is_a_sub_byte_element_in_either_form_and_nothing_else() {
        let t = ElementType::S4;
        assert_eq!(first_foreign_byte(t, &[0x0e, 0xfe, 0x07, 0xf8, 0x08]), None);
        assert_eq!(first_foreign_byte(t, &[0x01, 0x7f]), Some((1, 0x7f)));
        assert_eq!(first_foreign_byte(t, &[0x10]), Some((0, 0x10)));
        assert_eq!(
            first_foreign_byte(ElementType::U4, &[0x0f, 0xff]),
            Some((1, 0xff))
        );
        assert_eq!(
            first_foreign_byte(ElementType::F4E2M1FN, &[0x0f, 0x11]),
            Some((1, 0x11))
        );
        assert_eq!(
            first_foreign_byte(ElementType::S2, &[0x01, 0xfe, 0x02, 0xfc]),
            Some((3, 0xfc))
        );
        assert_eq!(first_foreign_byte(ElementType::U8, &[0xff]), None);
        let why = foreign_byte_text(t, 1, 0x7f);
        assert_eq!(
            why,
            "element 1 is the byte 0x7f, which is no int4 value (4 bits, or those sign-extended)"
        );
    }
}
