//! Copying plugin-owned strings, arrays and named values into owned Rust values, and
//! building named values for a call.

use std::ffi::c_char;

use rpjrt_sys as sys;

use super::Args;

/// One PJRT named value, owned. The safe layer converts it to and from `Value`.
#[derive(Clone, Debug, PartialEq)]
pub enum NamedValue {
    /// A string.
    String(String),
    /// A 64-bit integer.
    Int64(i64),
    /// A list of 64-bit integers.
    Int64List(Vec<i64>),
    /// A 32-bit float.
    Float(f32),
    /// A boolean.
    Bool(bool),
}

/// Copies a (pointer, length) string out of the plugin.
pub(crate) fn string(ptr: *const c_char, len: usize) -> String {
    if ptr.is_null() || len == 0 {
        return String::new();
    }
    // SAFETY: the plugin handed out this pointer/length pair; it stays valid at least until
    // the owning object is destroyed, which cannot happen during this copy (callers hold the
    // owning handle).
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    String::from_utf8_lossy(bytes).into_owned()
}

/// Copies a (pointer, length) array out of the plugin.
pub(crate) fn array<T: Copy>(ptr: *const T, len: usize) -> Vec<T> {
    if ptr.is_null() || len == 0 {
        return Vec::new();
    }
    // SAFETY: as in `string`: a live array owned by the plugin, read before any destroy.
    unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec()
}

/// Converts the plugin's named values into owned pairs.
pub fn read_named_values(
    ptr: *const sys::PJRT_NamedValue,
    len: usize,
) -> Vec<(String, NamedValue)> {
    let mut out = Vec::with_capacity(len);
    for nv in array(ptr, len) {
        let name = string(nv.name, nv.name_size);
        // SAFETY: `type` says which union member is live; array members point to
        // `value_size` elements owned by the plugin.
        let value = unsafe {
            match nv.r#type {
                sys::PJRT_NamedValue_kString => {
                    NamedValue::String(string(nv.value.string_value, nv.value_size))
                }
                sys::PJRT_NamedValue_kInt64 => NamedValue::Int64(nv.value.int64_value),
                sys::PJRT_NamedValue_kInt64List => {
                    NamedValue::Int64List(array(nv.value.int64_array_value, nv.value_size))
                }
                sys::PJRT_NamedValue_kFloat => NamedValue::Float(nv.value.float_value),
                sys::PJRT_NamedValue_kBool => NamedValue::Bool(nv.value.bool_value),
                other => NamedValue::String(format!("<unknown value kind {other}>")),
            }
        };
        out.push((name, value));
    }
    out
}

/// C named values that borrow from `options`: the lifetime ties them to it.
pub struct NamedValues<'a> {
    values: Vec<sys::PJRT_NamedValue>,
    _borrow: std::marker::PhantomData<&'a [(String, NamedValue)]>,
}

impl<'a> NamedValues<'a> {
    /// Builds C named values pointing into `options`.
    pub fn new(options: &'a [(String, NamedValue)]) -> NamedValues<'a> {
        let mut values = Vec::with_capacity(options.len());
        for (name, value) in options {
            let mut nv = sys::PJRT_NamedValue::new();
            nv.name = name.as_ptr().cast();
            nv.name_size = name.len();
            match value {
                NamedValue::String(s) => {
                    nv.r#type = sys::PJRT_NamedValue_kString;
                    nv.value.string_value = s.as_ptr().cast();
                    nv.value_size = s.len();
                }
                NamedValue::Int64(v) => {
                    nv.r#type = sys::PJRT_NamedValue_kInt64;
                    nv.value.int64_value = *v;
                    nv.value_size = 1;
                }
                NamedValue::Int64List(v) => {
                    nv.r#type = sys::PJRT_NamedValue_kInt64List;
                    nv.value.int64_array_value = v.as_ptr();
                    nv.value_size = v.len();
                }
                NamedValue::Float(v) => {
                    nv.r#type = sys::PJRT_NamedValue_kFloat;
                    nv.value.float_value = *v;
                    nv.value_size = 1;
                }
                NamedValue::Bool(v) => {
                    nv.r#type = sys::PJRT_NamedValue_kBool;
                    nv.value.bool_value = *v;
                    nv.value_size = 1;
                }
            }
            values.push(nv);
        }
        NamedValues {
            values,
            _borrow: std::marker::PhantomData,
        }
    }

    /// The C array.
    pub fn as_slice(&self) -> &[sys::PJRT_NamedValue] {
        &self.values
    }
}

/// Bytes per element the plugins take for a PJRT buffer type code on the host (sub-byte
/// types one element per byte); `None` for TOKEN and codes rpjrt does not know.
pub fn host_element_bytes(code: i32) -> Option<usize> {
    Some(match code {
        1 | 2 | 6 | 16..=22 | 24..=33 => 1,
        3 | 7 | 10 | 13 => 2,
        4 | 8 | 11 => 4,
        5 | 9 | 12 | 14 => 8,
        15 => 16,
        _ => return None,
    })
}

/// The number of bytes a host array of `dims` elements of type `code`, laid out per
/// `byte_strides` (dense row-major when `None`), reaches from its first byte. Errors name
/// what is wrong.
pub fn host_extent(code: i32, dims: &[i64], byte_strides: Option<&[i64]>) -> Result<usize, String> {
    let width = host_element_bytes(code)
        .ok_or_else(|| format!("element type code {code} has no host representation"))?;
    let mut n: u128 = 1;
    for &d in dims {
        if d < 0 {
            return Err(format!("negative dimension in {dims:?}"));
        }
        n = n.saturating_mul(d as u128);
    }
    if n == 0 {
        return Ok(0);
    }
    let end: u128 = match byte_strides {
        None => n.saturating_mul(width as u128),
        Some(s) => {
            if s.len() != dims.len() {
                return Err(format!(
                    "byte_strides has {} entries for {} dimensions",
                    s.len(),
                    dims.len()
                ));
            }
            let mut last: u128 = 0;
            for (&d, &st) in dims.iter().zip(s) {
                if st < 0 {
                    return Err("negative byte strides are not supported".into());
                }
                last = last.saturating_add((d as u128 - 1).saturating_mul(st as u128));
            }
            last.saturating_add(width as u128)
        }
    };
    usize::try_from(end).map_err(|_| format!("the array {dims:?} is too large"))
}

/// Bits one element of an XLA FFI `DataType` occupies in a dense buffer (sub-byte types
/// packed), or `None` for codes rpjrt does not know.
///
/// `raw` keeps this small table itself because a frame's host slices are sized from it
/// (`raw` imports nothing from the safe layer); a test in `dtype.rs` checks it against the
/// element-type table for every code.
pub const fn ffi_storage_bits(code: i32) -> Option<usize> {
    Some(match code {
        1 | 2 | 6 | 19 | 20 | 23 | 24 | 25 | 28 | 29 | 33 => 8,
        3 | 7 | 10 | 16 => 16,
        4 | 8 | 11 => 32,
        5 | 9 | 12 | 15 => 64,
        18 => 128,
        21 | 22 | 32 => 4,
        26 | 27 => 2,
        30 | 31 => 1,
        17 => 0,
        _ => return None,
    })
}

/// Bytes of a dense buffer of `dims` elements of XLA FFI type `code`; `None` for an
/// unknown type, a negative dimension or an overflow.
pub fn ffi_dense_bytes(code: i32, dims: &[i64]) -> Option<usize> {
    let bits = ffi_storage_bits(code)?;
    let mut n: usize = 1;
    for &d in dims {
        n = n.checked_mul(usize::try_from(d).ok()?)?;
    }
    Some(n.checked_mul(bits)?.div_ceil(8))
}

/// The byte range that `dims`/`byte_strides` of `itemsize`-byte elements address, relative
/// to element `[0, ...]`: `(lowest, end)` with `end` one past the last byte; `None` for an
/// empty array. Errors name a negative dimension or a rank mismatch.
///
/// Lives in `raw` because raw's DLPack import sizes the host slice it hands out with it;
/// the public path is `rpjrt::host::extent`.
pub fn extent(
    dims: &[i64],
    byte_strides: &[i64],
    itemsize: usize,
) -> Result<Option<(i128, i128)>, crate::error::Error> {
    use crate::error::Error;
    if dims.len() != byte_strides.len() {
        return Err(Error::invalid(format!(
            "{} byte strides for {} dimensions",
            byte_strides.len(),
            dims.len()
        )));
    }
    let mut lo: i128 = 0;
    let mut hi: i128 = 0;
    for (i, (&d, &s)) in dims.iter().zip(byte_strides).enumerate() {
        if d < 0 {
            return Err(Error::invalid(format!("dimension {i} is negative ({d})")));
        }
        if d == 0 {
            return Ok(None);
        }
        let reach = i128::from(d - 1) * i128::from(s);
        if reach < 0 {
            lo += reach;
        } else {
            hi += reach;
        }
    }
    Ok(Some((lo, hi + itemsize as i128)))
}

/// Rust scalars whose slices may be viewed as host bytes, and built from them.
///
/// # Safety
/// Implementors are primitive scalars without padding (every byte of a value is
/// initialised), valid for every bit pattern of their size except `bool` (only 0 and 1,
/// which `IS_BOOL` marks). Implemented only here, for the types listed below; being a `pub`
/// trait in a private module, it also seals every public trait that requires it.
pub unsafe trait HostScalar: Copy + Send + Sync + 'static {
    /// `true` only for `bool`, whose bytes must be 0 or 1.
    const IS_BOOL: bool = false;
}

// SAFETY: primitive integers, floats and `bool`: one value is its bytes, no padding.
unsafe impl HostScalar for i8 {}
// SAFETY: as above.
unsafe impl HostScalar for i16 {}
// SAFETY: as above.
unsafe impl HostScalar for i32 {}
// SAFETY: as above.
unsafe impl HostScalar for i64 {}
// SAFETY: as above.
unsafe impl HostScalar for u8 {}
// SAFETY: as above.
unsafe impl HostScalar for u16 {}
// SAFETY: as above.
unsafe impl HostScalar for u32 {}
// SAFETY: as above.
unsafe impl HostScalar for u64 {}
// SAFETY: as above.
unsafe impl HostScalar for f32 {}
// SAFETY: as above.
unsafe impl HostScalar for f64 {}
// SAFETY: as above (one byte); `IS_BOOL` makes `cast_elements` check for 0 and 1.
unsafe impl HostScalar for bool {
    const IS_BOOL: bool = true;
}

/// Views a slice of host scalars as bytes.
pub fn as_bytes<T: HostScalar>(data: &[T]) -> &[u8] {
    // SAFETY: `HostScalar` types have no padding, so every byte of the slice is initialised;
    // the length is the slice's size in bytes and the borrow is carried over.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// Host bytes as elements of `T`: `None` when they are not aligned for `T`, or, for
/// `bool`, when a byte is neither 0 nor 1 (which would not be a valid `bool`).
pub fn cast_elements<T: HostScalar>(bytes: &[u8]) -> Option<&[T]> {
    if T::IS_BOOL && bytes.iter().any(|&b| b > 1) {
        return None;
    }
    // SAFETY: every `HostScalar` but `bool` is a plain number type valid for all bit
    // patterns; for `bool` every byte was checked to be 0 or 1 above.
    let (head, mid, tail) = unsafe { bytes.align_to::<T>() };
    (head.is_empty() && tail.is_empty()).then_some(mid)
}

/// Mutable [`cast_elements`]; for `bool`, bytes other than 0 and 1 (a result buffer is not
/// initialised before a handler runs) are first normalised to 0 or 1.
pub fn cast_elements_mut<T: HostScalar>(bytes: &mut [u8]) -> Option<&mut [T]> {
    if T::IS_BOOL {
        for b in bytes.iter_mut() {
            *b = u8::from(*b != 0);
        }
    }
    // SAFETY: as for `cast_elements`; `bool` bytes are all 0 or 1 after the loop above.
    let (head, mid, tail) = unsafe { bytes.align_to_mut::<T>() };
    (head.is_empty() && tail.is_empty()).then_some(mid)
}
