//! Custom-call attributes: the `backend_config = {...}` dictionary of an
//! `api_version = 4` custom call, decoded.

use std::fmt;

use super::FfiError;
use crate::error::Code;
use crate::raw::ffi::RawAttr;

/// One attribute value.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum AttrValue {
    /// `i1` / boolean.
    Bool(bool),
    /// `i8`.
    I8(i8),
    /// `i16`.
    I16(i16),
    /// `i32`.
    I32(i32),
    /// `i64`.
    I64(i64),
    /// `ui8`.
    U8(u8),
    /// `ui16`.
    U16(u16),
    /// `ui32`.
    U32(u32),
    /// `ui64`.
    U64(u64),
    /// `f16`, as its bit pattern.
    F16Bits(u16),
    /// `bf16`, as its bit pattern.
    BF16Bits(u16),
    /// `f32`.
    F32(f32),
    /// `f64`.
    F64(f64),
    /// A string.
    Str(String),
    /// A dense array (`array<i64: 1, 2>`).
    Array(AttrArray),
    /// A nested dictionary.
    Dict(Attrs),
}

/// An array attribute's elements.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum AttrArray {
    /// Booleans.
    Bool(Vec<bool>),
    /// `i8` elements.
    I8(Vec<i8>),
    /// `i16` elements.
    I16(Vec<i16>),
    /// `i32` elements.
    I32(Vec<i32>),
    /// `i64` elements.
    I64(Vec<i64>),
    /// `ui8` elements.
    U8(Vec<u8>),
    /// `ui16` elements.
    U16(Vec<u16>),
    /// `ui32` elements.
    U32(Vec<u32>),
    /// `ui64` elements.
    U64(Vec<u64>),
    /// `f32` elements.
    F32(Vec<f32>),
    /// `f64` elements.
    F64(Vec<f64>),
}

/// `x` as an `f64`, exactly, whatever the thread's floating-point mode: handlers run on
/// XLA's CPU threads with denormals-are-zero set, where the hardware widening (`x.into()`)
/// reads a subnormal `f32` attribute as 0. A subnormal is rebuilt from its bits instead
/// (an integer times 2^-149, both normal in `f64`, so the product is exact and unflushed).
fn widen(x: f32) -> f64 {
    if x.is_subnormal() {
        let bits = x.to_bits();
        let magnitude = f64::from(bits & 0x007f_ffff) * f64::powi(2.0, -149);
        if bits >> 31 == 1 {
            -magnitude
        } else {
            magnitude
        }
    } else {
        f64::from(x)
    }
}

impl AttrValue {
    /// A short name of the value's type, for error messages (`i32`, `string`, `array<f32>`).
    pub fn type_name(&self) -> &'static str {
        match self {
            AttrValue::Bool(_) => "bool",
            AttrValue::I8(_) => "i8",
            AttrValue::I16(_) => "i16",
            AttrValue::I32(_) => "i32",
            AttrValue::I64(_) => "i64",
            AttrValue::U8(_) => "u8",
            AttrValue::U16(_) => "u16",
            AttrValue::U32(_) => "u32",
            AttrValue::U64(_) => "u64",
            AttrValue::F16Bits(_) => "f16",
            AttrValue::BF16Bits(_) => "bf16",
            AttrValue::F32(_) => "f32",
            AttrValue::F64(_) => "f64",
            AttrValue::Str(_) => "string",
            AttrValue::Array(a) => a.type_name(),
            AttrValue::Dict(_) => "dictionary",
        }
    }

    /// The value as an `i64` if it is an integer (or bool) that fits.
    pub fn as_i64(&self) -> Option<i64> {
        Some(match *self {
            AttrValue::Bool(b) => b as i64,
            AttrValue::I8(v) => v.into(),
            AttrValue::I16(v) => v.into(),
            AttrValue::I32(v) => v.into(),
            AttrValue::I64(v) => v,
            AttrValue::U8(v) => v.into(),
            AttrValue::U16(v) => v.into(),
            AttrValue::U32(v) => v.into(),
            AttrValue::U64(v) => i64::try_from(v).ok()?,
            _ => return None,
        })
    }

    /// The value as an `f64` if it is a number that converts to one exactly (an integer
    /// past 2^53 may not).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            AttrValue::F32(v) => Some(widen(v)),
            AttrValue::F64(v) => Some(v),
            AttrValue::F16Bits(b) => Some(half::f16::from_bits(b).to_f64()),
            AttrValue::BF16Bits(b) => Some(half::bf16::from_bits(b).to_f64()),
            AttrValue::U64(v) => exact_u64(v),
            _ => self.as_i64().and_then(exact_i64),
        }
    }
}

/// `v` as `f64` when it converts exactly (integers past 2^53 may not).
fn exact_i64(v: i64) -> Option<f64> {
    let f = v as f64;
    // `f as i128` saturates nowhere for these magnitudes (|f| <= 2^63).
    (f as i128 == i128::from(v)).then_some(f)
}

/// `v` as `f64` when it converts exactly.
fn exact_u64(v: u64) -> Option<f64> {
    let f = v as f64;
    (f as u128 == u128::from(v)).then_some(f)
}

/// `x` as `f32` when it converts exactly (NaN stays NaN, infinities stay infinite): not
/// out of `f32`'s range, not rounded, not flushed to zero. Compared by bits: handlers run
/// on threads that may treat subnormals as zero, where `==` would call 1e-320 and 0 equal.
fn exact_f32(x: f64) -> Option<f32> {
    let y = x as f32;
    (x.is_nan() || f64::from(y).to_bits() == x.to_bits()).then_some(y)
}

impl AttrArray {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            AttrArray::Bool(v) => v.len(),
            AttrArray::I8(v) => v.len(),
            AttrArray::I16(v) => v.len(),
            AttrArray::I32(v) => v.len(),
            AttrArray::I64(v) => v.len(),
            AttrArray::U8(v) => v.len(),
            AttrArray::U16(v) => v.len(),
            AttrArray::U32(v) => v.len(),
            AttrArray::U64(v) => v.len(),
            AttrArray::F32(v) => v.len(),
            AttrArray::F64(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A short name of the array's type, e.g. `array<i64>`.
    pub fn type_name(&self) -> &'static str {
        match self {
            AttrArray::Bool(_) => "array<bool>",
            AttrArray::I8(_) => "array<i8>",
            AttrArray::I16(_) => "array<i16>",
            AttrArray::I32(_) => "array<i32>",
            AttrArray::I64(_) => "array<i64>",
            AttrArray::U8(_) => "array<u8>",
            AttrArray::U16(_) => "array<u16>",
            AttrArray::U32(_) => "array<u32>",
            AttrArray::U64(_) => "array<u64>",
            AttrArray::F32(_) => "array<f32>",
            AttrArray::F64(_) => "array<f64>",
        }
    }

    /// The elements as `i64` when they are integers.
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        Some(match self {
            AttrArray::Bool(v) => v.iter().map(|&b| b as i64).collect(),
            AttrArray::I8(v) => v.iter().map(|&x| x.into()).collect(),
            AttrArray::I16(v) => v.iter().map(|&x| x.into()).collect(),
            AttrArray::I32(v) => v.iter().map(|&x| x.into()).collect(),
            AttrArray::I64(v) => v.clone(),
            AttrArray::U8(v) => v.iter().map(|&x| x.into()).collect(),
            AttrArray::U16(v) => v.iter().map(|&x| x.into()).collect(),
            AttrArray::U32(v) => v.iter().map(|&x| x.into()).collect(),
            AttrArray::U64(v) => v
                .iter()
                .map(|&x| i64::try_from(x).ok())
                .collect::<Option<_>>()?,
            _ => return None,
        })
    }

    /// The elements as `f64` when every one converts exactly (any numeric array).
    pub fn to_exact_f64_vec(&self) -> Option<Vec<f64>> {
        match self {
            AttrArray::F32(v) => Some(v.iter().map(|&x| widen(x)).collect()),
            AttrArray::F64(v) => Some(v.clone()),
            AttrArray::U64(v) => v.iter().map(|&x| exact_u64(x)).collect(),
            other => other.to_i64_vec()?.into_iter().map(exact_i64).collect(),
        }
    }

    /// The elements as `f64` (any numeric array; integers past 2^53 are rounded, see
    /// [`AttrArray::to_exact_f64_vec`]).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self {
            AttrArray::F32(v) => v.iter().map(|&x| widen(x)).collect(),
            AttrArray::F64(v) => v.clone(),
            AttrArray::U64(v) => v.iter().map(|&x| x as f64).collect(),
            other => other
                .to_i64_vec()
                .unwrap_or_default()
                .into_iter()
                .map(|x| x as f64)
                .collect(),
        }
    }
}

/// The attributes of one call (or a nested dictionary), sorted by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Attrs {
    items: Vec<(String, AttrValue)>,
}

impl Attrs {
    /// Attributes from `(name, value)` pairs; sorts them by name.
    pub fn new(mut items: Vec<(String, AttrValue)>) -> Attrs {
        items.sort_by(|a, b| a.0.cmp(&b.0));
        Attrs { items }
    }

    /// Types the attributes raw copied out of a call frame; errors name an attribute of a
    /// kind or element type rpjrt does not decode.
    pub(crate) fn from_raw(items: Vec<(String, RawAttr)>) -> Result<Attrs, (Code, String)> {
        let mut out = Vec::with_capacity(items.len());
        for (name, raw) in items {
            let v = match raw {
                RawAttr::Scalar { dtype, bytes } => scalar(dtype, &bytes).ok_or_else(|| {
                    unimplemented(format!(
                        "attribute {name:?} has scalar FFI type {dtype}, which rpjrt does not \
                         decode"
                    ))
                })?,
                RawAttr::Array { dtype, len, bytes } => {
                    AttrValue::Array(array(dtype, len, &bytes).ok_or_else(|| {
                        unimplemented(format!(
                            "attribute {name:?} is an array of FFI type {dtype}, which rpjrt \
                             does not decode"
                        ))
                    })?)
                }
                RawAttr::Str(s) => AttrValue::Str(String::from_utf8(s).map_err(|e| {
                    (
                        Code::InvalidArgument,
                        format!(
                            "attribute {name:?} is a string that is not valid UTF-8 (bad byte \
                             at offset {}); rpjrt passes string attributes as text only",
                            e.utf8_error().valid_up_to()
                        ),
                    )
                })?),
                RawAttr::Dict(d) => AttrValue::Dict(Attrs::from_raw(d)?),
                RawAttr::Other(kind) => {
                    return Err(unimplemented(format!(
                        "attribute {name:?} is of FFI kind {kind}, which rpjrt does not decode"
                    )))
                }
            };
            out.push((name, v));
        }
        Ok(Attrs::new(out))
    }

    /// The value of attribute `name`.
    pub fn get(&self, name: &str) -> Option<&AttrValue> {
        self.items
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| &self.items[i].1)
    }

    /// Attribute `name` converted to `T`; errors name the attribute and what was wrong.
    pub fn get_as<T: FromAttr>(&self, name: &str) -> Result<T, FfiError> {
        let v = self.get(name).ok_or_else(|| {
            FfiError::invalid(format!(
                "the custom call has no attribute {name:?} (it has: {})",
                self.names().collect::<Vec<_>>().join(", ")
            ))
        })?;
        T::from_attr(v).ok_or_else(|| {
            FfiError::invalid(format!(
                "attribute {name:?} is {} ({}), which does not convert to {}",
                v.type_name(),
                Short(v),
                T::EXPECTED
            ))
        })
    }

    /// Attribute `name` converted to `T`, or `None` when absent.
    pub fn get_opt<T: FromAttr>(&self, name: &str) -> Result<Option<T>, FfiError> {
        match self.get(name) {
            None => Ok(None),
            Some(_) => self.get_as(name).map(Some),
        }
    }

    /// Decodes all attributes into a user type.
    pub fn parse<T: FromAttrs>(&self) -> Result<T, FfiError> {
        T::from_attrs(self)
    }

    /// Attribute names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.items.iter().map(|(n, _)| n.as_str())
    }

    /// `(name, value)` pairs, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &AttrValue)> {
        self.items.iter().map(|(n, v)| (n.as_str(), v))
    }

    /// Number of attributes.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

struct Short<'a>(&'a AttrValue);

impl fmt::Display for Short<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = format!("{:?}", self.0);
        if s.chars().count() > 60 {
            write!(f, "{}...", s.chars().take(57).collect::<String>())
        } else {
            f.write_str(&s)
        }
    }
}

/// Converts one attribute value into a Rust value (numbers convert when they fit exactly).
pub trait FromAttr: Sized {
    /// What the conversion expects, for error messages.
    const EXPECTED: &'static str;
    /// The converted value, or `None` when the attribute does not fit.
    fn from_attr(v: &AttrValue) -> Option<Self>;
}

macro_rules! int_from_attr {
    ($($t:ty),*) => {$(
        impl FromAttr for $t {
            const EXPECTED: &'static str = stringify!($t);
            fn from_attr(v: &AttrValue) -> Option<Self> {
                match v {
                    AttrValue::Bool(_) => None,
                    AttrValue::U64(x) => <$t>::try_from(*x).ok(),
                    _ => <$t>::try_from(v.as_i64()?).ok(),
                }
            }
        }
    )*};
}
int_from_attr!(i8, i16, i32, i64, u8, u16, u32, u64, usize, isize);

impl FromAttr for bool {
    const EXPECTED: &'static str = "bool";
    fn from_attr(v: &AttrValue) -> Option<Self> {
        match v {
            AttrValue::Bool(b) => Some(*b),
            _ => None,
        }
    }
}

impl FromAttr for f64 {
    const EXPECTED: &'static str = "f64";
    fn from_attr(v: &AttrValue) -> Option<Self> {
        match v {
            AttrValue::Bool(_) | AttrValue::Str(_) | AttrValue::Array(_) | AttrValue::Dict(_) => {
                None
            }
            _ => v.as_f64(),
        }
    }
}

impl FromAttr for f32 {
    const EXPECTED: &'static str = "f32";
    fn from_attr(v: &AttrValue) -> Option<Self> {
        match v {
            AttrValue::F32(x) => Some(*x),
            _ => f64::from_attr(v).and_then(exact_f32),
        }
    }
}

impl FromAttr for String {
    const EXPECTED: &'static str = "string";
    fn from_attr(v: &AttrValue) -> Option<Self> {
        match v {
            AttrValue::Str(s) => Some(s.clone()),
            _ => None,
        }
    }
}

impl FromAttr for Vec<i64> {
    const EXPECTED: &'static str = "array of integers";
    fn from_attr(v: &AttrValue) -> Option<Self> {
        match v {
            AttrValue::Array(a) => a.to_i64_vec(),
            _ => None,
        }
    }
}

impl FromAttr for Vec<f64> {
    const EXPECTED: &'static str = "array of numbers";
    fn from_attr(v: &AttrValue) -> Option<Self> {
        match v {
            AttrValue::Array(a) => a.to_exact_f64_vec(),
            _ => None,
        }
    }
}

impl FromAttr for Vec<f32> {
    const EXPECTED: &'static str = "array of numbers";
    fn from_attr(v: &AttrValue) -> Option<Self> {
        match v {
            AttrValue::Array(AttrArray::F32(x)) => Some(x.clone()),
            AttrValue::Array(a) => a.to_exact_f64_vec()?.into_iter().map(exact_f32).collect(),
            _ => None,
        }
    }
}

impl FromAttr for Attrs {
    const EXPECTED: &'static str = "dictionary";
    fn from_attr(v: &AttrValue) -> Option<Self> {
        match v {
            AttrValue::Dict(d) => Some(d.clone()),
            _ => None,
        }
    }
}

impl FromAttr for AttrValue {
    const EXPECTED: &'static str = "any attribute";
    fn from_attr(v: &AttrValue) -> Option<Self> {
        Some(v.clone())
    }
}

/// Decodes a whole attribute dictionary into a user struct, without a derive macro:
///
/// ```
/// use rpjrt::ffi::{Attrs, FfiError, FromAttrs};
///
/// struct Scale {
///     factor: f32,
///     offset: i64,
///     label: Option<String>,
/// }
///
/// impl FromAttrs for Scale {
///     fn from_attrs(a: &Attrs) -> Result<Self, FfiError> {
///         Ok(Scale {
///             factor: a.get_as("factor")?,
///             offset: a.get_as("offset")?,
///             label: a.get_opt("label")?,
///         })
///     }
/// }
/// ```
///
/// Nested dictionaries decode the same way: `Inner::from_attrs(&a.get_as::<Attrs>("inner")?)`.
pub trait FromAttrs: Sized {
    /// Builds the value from the call's attributes.
    fn from_attrs(attrs: &Attrs) -> Result<Self, FfiError>;
}

impl FromAttrs for Attrs {
    fn from_attrs(attrs: &Attrs) -> Result<Self, FfiError> {
        Ok(attrs.clone())
    }
}

fn unimplemented(message: String) -> (Code, String) {
    (Code::Unimplemented, message)
}

/// Native-order values of `N` bytes each (a trailing partial value is ignored).
fn values<const N: usize, T>(bytes: &[u8], from: fn([u8; N]) -> T) -> Vec<T> {
    bytes
        .chunks_exact(N)
        .map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            from(a)
        })
        .collect()
}

/// One scalar of XLA FFI type `dtype` from its bytes; `None` for types rpjrt does not
/// decode (or bytes of the wrong length).
fn scalar(dtype: i32, bytes: &[u8]) -> Option<AttrValue> {
    use super::dtype::ffi_element_type;
    use crate::dtype::ElementType as T;
    let t = ffi_element_type(dtype)?;
    if t.byte_width() != Some(bytes.len()) {
        return None;
    }
    macro_rules! one {
        ($n:literal, $ty:ty) => {{
            let mut a = [0u8; $n];
            a.copy_from_slice(bytes);
            <$ty>::from_ne_bytes(a)
        }};
    }
    Some(match t {
        T::Pred => AttrValue::Bool(bytes[0] != 0),
        T::S8 => AttrValue::I8(one!(1, i8)),
        T::S16 => AttrValue::I16(one!(2, i16)),
        T::S32 => AttrValue::I32(one!(4, i32)),
        T::S64 => AttrValue::I64(one!(8, i64)),
        T::U8 => AttrValue::U8(bytes[0]),
        T::U16 => AttrValue::U16(one!(2, u16)),
        T::U32 => AttrValue::U32(one!(4, u32)),
        T::U64 => AttrValue::U64(one!(8, u64)),
        T::F16 => AttrValue::F16Bits(one!(2, u16)),
        T::BF16 => AttrValue::BF16Bits(one!(2, u16)),
        T::F32 => AttrValue::F32(one!(4, f32)),
        T::F64 => AttrValue::F64(one!(8, f64)),
        _ => return None,
    })
}

/// `len` elements of XLA FFI type `dtype` from their bytes; `None` for types rpjrt does
/// not decode (or bytes of the wrong length).
fn array(dtype: i32, len: usize, bytes: &[u8]) -> Option<AttrArray> {
    use super::dtype::ffi_element_type;
    use crate::dtype::ElementType as T;
    let t = ffi_element_type(dtype)?;
    if t.byte_width()?.checked_mul(len) != Some(bytes.len()) {
        return None;
    }
    Some(match t {
        T::Pred => AttrArray::Bool(bytes.iter().map(|&b| b != 0).collect()),
        T::S8 => AttrArray::I8(values(bytes, i8::from_ne_bytes)),
        T::S16 => AttrArray::I16(values(bytes, i16::from_ne_bytes)),
        T::S32 => AttrArray::I32(values(bytes, i32::from_ne_bytes)),
        T::S64 => AttrArray::I64(values(bytes, i64::from_ne_bytes)),
        T::U8 => AttrArray::U8(bytes.to_vec()),
        T::U16 => AttrArray::U16(values(bytes, u16::from_ne_bytes)),
        T::U32 => AttrArray::U32(values(bytes, u32::from_ne_bytes)),
        T::U64 => AttrArray::U64(values(bytes, u64::from_ne_bytes)),
        T::F32 => AttrArray::F32(values(bytes, f32::from_ne_bytes)),
        T::F64 => AttrArray::F64(values(bytes, f64::from_ne_bytes)),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_attributes_are_typed_by_their_ffi_code() {
        let raw = vec![
            (
                "b".to_string(),
                RawAttr::Scalar {
                    dtype: 11,
                    bytes: 1.5f32.to_ne_bytes().to_vec(),
                },
            ),
            (
                "a".to_string(),
                RawAttr::Array {
                    dtype: 5,
                    len: 2,
                    bytes: [7i64.to_ne_bytes(), (-1i64).to_ne_bytes()].concat(),
                },
            ),
            (
                "d".to_string(),
                RawAttr::Dict(vec![(
                    "p".to_string(),
                    RawAttr::Scalar {
                        dtype: 1,
                        bytes: vec![2],
                    },
                )]),
            ),
            ("s".to_string(), RawAttr::Str(b"x".to_vec())),
            (
                "e".to_string(),
                RawAttr::Array {
                    dtype: 1,
                    len: 0,
                    bytes: vec![],
                },
            ),
        ];
        let a = Attrs::from_raw(raw).unwrap();
        assert_eq!(a.names().collect::<Vec<_>>(), ["a", "b", "d", "e", "s"]);
        assert_eq!(a.get("b"), Some(&AttrValue::F32(1.5)));
        assert_eq!(
            a.get("a"),
            Some(&AttrValue::Array(AttrArray::I64(vec![7, -1])))
        );
        let d = Attrs::new(vec![("p".into(), AttrValue::Bool(true))]);
        assert_eq!(a.get("d"), Some(&AttrValue::Dict(d)));
        assert_eq!(a.get("e"), Some(&AttrValue::Array(AttrArray::Bool(vec![]))));
        // Types and kinds rpjrt does not decode are named in the error.
        let c64 = vec![(
            "z".to_string(),
            RawAttr::Scalar {
                dtype: 15,
                bytes: vec![0; 8],
            },
        )];
        let e = Attrs::from_raw(c64).unwrap_err();
        assert_eq!(e.0, Code::Unimplemented);
        assert!(
            e.1.contains("\"z\"") && e.1.contains("FFI type 15"),
            "{}",
            e.1
        );
        let unknown_width = vec![(
            "q".to_string(),
            RawAttr::Array {
                dtype: 99,
                len: 3,
                bytes: vec![],
            },
        )];
        assert!(Attrs::from_raw(unknown_width)
            .unwrap_err()
            .1
            .contains("FFI type 99"));
        let kind = vec![("k".to_string(), RawAttr::Other(7))];
        assert!(Attrs::from_raw(kind).unwrap_err().1.contains("FFI kind 7"));
    }

    struct S {
        a: i32,
        b: f32,
        name: String,
        dims: Vec<i64>,
        inner: Inner,
    }
    struct Inner {
        flag: bool,
    }
    impl FromAttrs for Inner {
        fn from_attrs(a: &Attrs) -> Result<Self, FfiError> {
            Ok(Inner {
                flag: a.get_as("flag")?,
            })
        }
    }
    impl FromAttrs for S {
        fn from_attrs(a: &Attrs) -> Result<Self, FfiError> {
            Ok(S {
                a: a.get_as("a")?,
                b: a.get_as("b")?,
                name: a.get_as("name")?,
                dims: a.get_as("dims")?,
                inner: a.get_as::<Attrs>("inner")?.parse()?,
            })
        }
    }

    fn sample() -> Attrs {
        Attrs::new(vec![
            ("name".into(), AttrValue::Str("x".into())),
            ("a".into(), AttrValue::I64(7)),
            ("b".into(), AttrValue::F64(0.5)),
            ("dims".into(), AttrValue::Array(AttrArray::I32(vec![1, 2]))),
            (
                "inner".into(),
                AttrValue::Dict(Attrs::new(vec![("flag".into(), AttrValue::Bool(true))])),
            ),
        ])
    }

    #[test]
    fn user_structs_decode_with_conversions() {
        let s: S = sample().parse().unwrap();
        assert_eq!((s.a, s.b, s.name.as_str()), (7, 0.5, "x"));
        assert_eq!(s.dims, vec![1, 2]);
        assert!(s.inner.flag);
        assert_eq!(
            sample().names().collect::<Vec<_>>(),
            ["a", "b", "dims", "inner", "name"]
        );
    }

    #[test]
    fn wrong_or_missing_attributes_say_which() {
        let e = sample().get_as::<i64>("nope").unwrap_err();
        assert!(
            e.message.contains("\"nope\"") && e.message.contains("a, b, dims"),
            "{e}"
        );
        let e = sample().get_as::<i64>("name").unwrap_err();
        assert!(
            e.message.contains("string") && e.message.contains("i64"),
            "{e}"
        );
        let big = Attrs::new(vec![("v".into(), AttrValue::I64(300))]);
        assert!(big.get_as::<u8>("v").is_err());
        assert_eq!(big.get_as::<u16>("v").unwrap(), 300);
        assert_eq!(AttrValue::F16Bits(0x3c00).as_f64(), Some(1.0));
        assert_eq!(AttrValue::BF16Bits(0x3f80).as_f64(), Some(1.0));
    }

    #[test]
    fn numbers_convert_only_when_they_fit_exactly() {
        let one = |v: AttrValue| Attrs::new(vec![("v".to_string(), v)]);
        // f32 from f64: out of range, flushed to zero, rounded: refused, naming the name.
        for x in [1.0e300, 1.0e-320, 0.1] {
            let e = one(AttrValue::F64(x)).get_as::<f32>("v").unwrap_err();
            assert!(
                e.message.contains("\"v\"") && e.message.contains("f32"),
                "{e:?}"
            );
        }
        assert_eq!(one(AttrValue::F64(0.5)).get_as::<f32>("v").unwrap(), 0.5);
        assert!(one(AttrValue::F64(f64::NAN))
            .get_as::<f32>("v")
            .unwrap()
            .is_nan());
        assert_eq!(
            one(AttrValue::F64(f64::NEG_INFINITY))
                .get_as::<f32>("v")
                .unwrap(),
            f32::NEG_INFINITY
        );
        // f32 and f64 from integers past their mantissa.
        assert!(one(AttrValue::I64(16_777_217)).get_as::<f32>("v").is_err());
        assert_eq!(
            one(AttrValue::I64(16_777_216)).get_as::<f32>("v").unwrap(),
            16_777_216.0
        );
        assert!(one(AttrValue::I64(i64::MAX)).get_as::<f64>("v").is_err());
        assert_eq!(
            one(AttrValue::I64(i64::MIN)).get_as::<f64>("v").unwrap(),
            -(2f64.powi(63))
        );
        assert!(one(AttrValue::U64(u64::MAX)).get_as::<f64>("v").is_err());
        assert_eq!(
            one(AttrValue::U64(1 << 63)).get_as::<f64>("v").unwrap(),
            2f64.powi(63)
        );
        assert_eq!(AttrValue::U64(1 << 63).as_f64(), Some(2f64.powi(63)));
        assert_eq!(AttrValue::I64((1 << 53) + 1).as_f64(), None);
        // Arrays: one inexact element refuses the whole array.
        let arr = |a: AttrArray| one(AttrValue::Array(a));
        assert!(arr(AttrArray::F64(vec![1.0, 1.0e300]))
            .get_as::<Vec<f32>>("v")
            .is_err());
        assert!(arr(AttrArray::I64(vec![1, (1 << 53) + 1]))
            .get_as::<Vec<f64>>("v")
            .is_err());
        assert_eq!(
            arr(AttrArray::I64(vec![1, 2]))
                .get_as::<Vec<f32>>("v")
                .unwrap(),
            vec![1.0, 2.0]
        );
        // Integers of every width: out of range refused; bool is not an integer.
        assert!(one(AttrValue::I64(300)).get_as::<u8>("v").is_err());
        assert!(one(AttrValue::I64(-1)).get_as::<u64>("v").is_err());
        assert!(one(AttrValue::U64(u64::MAX)).get_as::<i64>("v").is_err());
        assert!(one(AttrValue::F64(3.0)).get_as::<i32>("v").is_err());
        assert!(one(AttrValue::Bool(true)).get_as::<i32>("v").is_err());
        assert!(one(AttrValue::I32(1)).get_as::<bool>("v").is_err());
    }
}
