//! Element types of PJRT buffers.

use std::fmt;

use crate::error::{Error, Result};

macro_rules! element_types {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal, $name:literal, $bits:literal; )*) => {
        /// The element type of a buffer, as PJRT numbers it.
        ///
        /// `name()` gives the name numpy or ml_dtypes uses for the same type.
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

            /// Bits one element occupies in a host buffer (sub-byte types are packed).
            pub const fn bit_width(self) -> usize {
                match self { $(ElementType::$variant => $bits,)* }
            }

            /// The type with the given numpy / ml_dtypes name (also accepts `bool` and PJRT
            /// spellings such as `f32`, `bf16`, `s4`, `pred`).
            pub fn from_name(name: &str) -> Result<ElementType> {
                let lower = name.to_ascii_lowercase();
                $( if lower == $name { return Ok(ElementType::$variant); } )*
                let alias = match lower.as_str() {
                    "pred" => Some(ElementType::Pred),
                    "f16" | "half" => Some(ElementType::F16),
                    "f32" | "float" => Some(ElementType::F32),
                    "f64" | "double" => Some(ElementType::F64),
                    "bf16" => Some(ElementType::BF16),
                    "c64" => Some(ElementType::C64),
                    "c128" => Some(ElementType::C128),
                    "s8" | "i8" => Some(ElementType::S8),
                    "s16" | "i16" => Some(ElementType::S16),
                    "s32" | "i32" => Some(ElementType::S32),
                    "s64" | "i64" => Some(ElementType::S64),
                    "u8" => Some(ElementType::U8),
                    "u16" => Some(ElementType::U16),
                    "u32" => Some(ElementType::U32),
                    "u64" => Some(ElementType::U64),
                    "s4" | "i4" => Some(ElementType::S4),
                    "u4" => Some(ElementType::U4),
                    "s2" | "i2" => Some(ElementType::S2),
                    "u2" => Some(ElementType::U2),
                    _ => None,
                };
                alias.ok_or_else(|| Error::invalid(format!("unknown element type name {name:?}")))
            }
        }
    };
}

element_types! {
    /// Boolean, one byte per element.
    Pred = 1, "bool", 8;
    /// Signed 8-bit integer.
    S8 = 2, "int8", 8;
    /// Signed 16-bit integer.
    S16 = 3, "int16", 16;
    /// Signed 32-bit integer.
    S32 = 4, "int32", 32;
    /// Signed 64-bit integer.
    S64 = 5, "int64", 64;
    /// Unsigned 8-bit integer.
    U8 = 6, "uint8", 8;
    /// Unsigned 16-bit integer.
    U16 = 7, "uint16", 16;
    /// Unsigned 32-bit integer.
    U32 = 8, "uint32", 32;
    /// Unsigned 64-bit integer.
    U64 = 9, "uint64", 64;
    /// IEEE half precision.
    F16 = 10, "float16", 16;
    /// IEEE single precision.
    F32 = 11, "float32", 32;
    /// IEEE double precision.
    F64 = 12, "float64", 64;
    /// bfloat16.
    BF16 = 13, "bfloat16", 16;
    /// Complex of two f32.
    C64 = 14, "complex64", 64;
    /// Complex of two f64.
    C128 = 15, "complex128", 128;
    /// 8-bit float, 5 exponent bits, 2 mantissa bits.
    F8E5M2 = 16, "float8_e5m2", 8;
    /// 8-bit float, 4 exponent bits, 3 mantissa bits, finite only.
    F8E4M3FN = 17, "float8_e4m3fn", 8;
    /// 8-bit float, 4 exponent bits, bias 11, finite, unsigned zero.
    F8E4M3B11FNUZ = 18, "float8_e4m3b11fnuz", 8;
    /// 8-bit float, 5 exponent bits, finite, unsigned zero.
    F8E5M2FNUZ = 19, "float8_e5m2fnuz", 8;
    /// 8-bit float, 4 exponent bits, finite, unsigned zero.
    F8E4M3FNUZ = 20, "float8_e4m3fnuz", 8;
    /// Signed 4-bit integer, two per byte.
    S4 = 21, "int4", 4;
    /// Unsigned 4-bit integer, two per byte.
    U4 = 22, "uint4", 4;
    /// XLA token (no data).
    Token = 23, "token", 0;
    /// Signed 2-bit integer, four per byte.
    S2 = 24, "int2", 2;
    /// Unsigned 2-bit integer, four per byte.
    U2 = 25, "uint2", 2;
    /// 8-bit float, IEEE-like with 4 exponent bits.
    F8E4M3 = 26, "float8_e4m3", 8;
    /// 8-bit float, 3 exponent bits, 4 mantissa bits.
    F8E3M4 = 27, "float8_e3m4", 8;
    /// 8-bit exponent-only scale type.
    F8E8M0FNU = 28, "float8_e8m0fnu", 8;
    /// 4-bit float, two per byte.
    F4E2M1FN = 29, "float4_e2m1fn", 4;
    /// Signed 1-bit integer, eight per byte.
    S1 = 30, "int1", 1;
    /// Unsigned 1-bit integer, eight per byte.
    U1 = 31, "uint1", 1;
    /// 6-bit float (2 exponent bits), one per byte.
    F6E2M3FN = 32, "float6_e2m3fn", 8;
    /// 6-bit float (3 exponent bits), one per byte.
    F6E3M2FN = 33, "float6_e3m2fn", 8;
}

impl ElementType {
    /// True for the types packed several to a byte (`int4`, `uint2`, `float4_e2m1fn`, ...).
    pub const fn is_sub_byte(self) -> bool {
        self.bit_width() < 8 && self.bit_width() > 0
    }

    /// Bytes of a dense host buffer with `elements` elements of this type.
    pub fn dense_byte_size(self, elements: usize) -> Result<usize> {
        elements
            .checked_mul(self.bit_width())
            .map(|bits| bits.div_ceil(8))
            .ok_or_else(|| Error::invalid(format!("{elements} elements of {self} overflow usize")))
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

    /// Bytes per element for types of at least one byte; `None` for sub-byte types and tokens.
    pub const fn byte_width(self) -> Option<usize> {
        if self.bit_width() >= 8 {
            Some(self.bit_width() / 8)
        } else {
            None
        }
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Rust scalar types that map to one element type, for typed host transfers.
///
/// Sealed: implemented by rpjrt for `bool`, the integer types, `f32` and `f64` only (its
/// supertrait lives in a private module), because typed reads reinterpret buffer bytes.
///
/// ```compile_fail
/// #[derive(Clone, Copy)]
/// struct Mine;
/// impl rpjrt::NativeType for Mine {
///     const ELEMENT_TYPE: rpjrt::ElementType = rpjrt::ElementType::U8;
/// }
/// ```
pub trait NativeType: crate::raw::util::HostScalar {
    /// The element type of this Rust type.
    const ELEMENT_TYPE: ElementType;
}

macro_rules! native {
    ($($t:ty => $e:ident),* $(,)?) => {
        $(impl NativeType for $t { const ELEMENT_TYPE: ElementType = ElementType::$e; })*
    };
}
native!(bool => Pred, i8 => S8, i16 => S16, i32 => S32, i64 => S64, u8 => U8, u16 => U16,
        u32 => U32, u64 => U64, f32 => F32, f64 => F64);

/// Views a slice of native scalars as bytes.
pub(crate) fn as_bytes<T: NativeType>(data: &[T]) -> &[u8] {
    crate::raw::util::as_bytes(data)
}

/// Packs one-element-per-byte values of a sub-byte type into the dense form: element `i`
/// goes to bits `(i * w) % 8` of byte `i * w / 8` (lowest bits first), `w` the bit width.
pub fn pack_sub_byte(ty: ElementType, unpacked: &[u8]) -> Vec<u8> {
    let w = ty.bit_width();
    if !ty.is_sub_byte() {
        return unpacked.to_vec();
    }
    let mask = ((1u16 << w) - 1) as u8;
    let mut out = vec![0u8; (unpacked.len() * w).div_ceil(8)];
    for (i, &v) in unpacked.iter().enumerate() {
        let bit = i * w;
        out[bit / 8] |= (v & mask) << (bit % 8);
    }
    out
}

/// Unpacks `count` elements of a sub-byte type from the dense form (see [`pack_sub_byte`])
/// into one byte each; signed types are sign-extended, as PJRT's CPU plugins store them.
pub fn unpack_sub_byte(ty: ElementType, packed: &[u8], count: usize) -> Vec<u8> {
    let w = ty.bit_width();
    if !ty.is_sub_byte() {
        return packed.to_vec();
    }
    let signed = matches!(ty, ElementType::S4 | ElementType::S2 | ElementType::S1);
    let mask = ((1u16 << w) - 1) as u8;
    (0..count)
        .map(|i| {
            let bit = i * w;
            let v = (packed[bit / 8] >> (bit % 8)) & mask;
            if signed && v & (1 << (w - 1)) != 0 {
                v | !mask
            } else {
                v
            }
        })
        .collect()
}

/// Number of elements in a shape, with a clear error for negative or overflowing dims.
pub fn element_count(dims: &[i64]) -> Result<usize> {
    let mut n: usize = 1;
    for (i, &d) in dims.iter().enumerate() {
        let d = usize::try_from(d)
            .map_err(|_| Error::invalid(format!("dimension {i} is negative ({d})")))?;
        n = n
            .checked_mul(d)
            .ok_or_else(|| Error::invalid(format!("shape {dims:?} has too many elements")))?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_names_are_unique() {
        let mut names = std::collections::HashSet::new();
        for &t in ElementType::ALL {
            assert_eq!(ElementType::from_code(t.code()).unwrap(), t);
            assert_eq!(ElementType::from_name(t.name()).unwrap(), t);
            assert!(names.insert(t.name()));
        }
        assert_eq!(ElementType::ALL.len(), 33);
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
    fn element_count_rejects_negative_and_overflow() {
        assert_eq!(element_count(&[]).unwrap(), 1);
        assert_eq!(element_count(&[2, 0, 3]).unwrap(), 0);
        assert!(element_count(&[2, -1]).is_err());
        assert!(element_count(&[i64::MAX, i64::MAX]).is_err());
    }
}
