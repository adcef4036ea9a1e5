//! C data in and out: strings, arrays and `PJRT_NamedValue` arrays, both the ones the
//! fake hands out and the ones it is given.

use std::os::raw::c_char;

use rpjrt_sys as sys;

use crate::config::{AttrValue, Attribute};
use crate::error::Fail;
use crate::state::{check_size, State};

/// A string handed out as (pointer, size) fields.
pub(crate) fn out_str(s: &str) -> (*const c_char, usize) {
    (s.as_ptr().cast(), s.len())
}

/// An array handed out as (pointer, count) fields.
pub(crate) fn out_slice<T>(v: &[T]) -> (*const T, usize) {
    (v.as_ptr(), v.len())
}

/// Copies `len` bytes at `ptr` into a String (lossy UTF-8); null or empty gives "".
///
/// # Safety
/// `ptr` must be null or point at `len` readable bytes.
pub(crate) unsafe fn read_str(ptr: *const c_char, len: usize) -> String {
    // SAFETY: the caller promises `len` readable bytes at a non-null `ptr`.
    let bytes = unsafe { slice(ptr.cast::<u8>(), len, "string") }.unwrap_or(&[]);
    String::from_utf8_lossy(bytes).into_owned()
}

/// The caller's array of `len` values at `ptr`: empty for `len` 0 (any pointer),
/// INVALID_ARGUMENT naming `what` for a null pointer with a non-zero length.
///
/// # Safety
/// `ptr` must be null or point at `len` readable values that outlive `'a`.
pub(crate) unsafe fn slice<'a, T>(ptr: *const T, len: usize, what: &str) -> Result<&'a [T], Fail> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        bail!("fake plugin: null {what} with {len} elements");
    }
    // SAFETY: non-null with `len` values (contract).
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// An owned array of `PJRT_NamedValue` with the storage its pointers point into.
pub(crate) struct NamedValues {
    values: Vec<sys::PJRT_NamedValue>,
    _attrs: Vec<Attribute>,
}

// SAFETY: the raw pointers in `values` point into the heap buffers of `_attrs`, which
// are owned here and never mutated after `new`.
unsafe impl Send for NamedValues {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for NamedValues {}

impl NamedValues {
    pub fn new(attrs: &[Attribute]) -> NamedValues {
        let attrs = attrs.to_vec();
        let values = attrs.iter().map(|attr| {
            use sys::PJRT_NamedValue_Union as U;
            let (ty, value, size) = match &attr.value {
                AttrValue::String(s) => (
                    sys::PJRT_NamedValue_kString,
                    U {
                        string_value: s.as_ptr().cast(),
                    },
                    s.len(),
                ),
                AttrValue::Int64(i) => (sys::PJRT_NamedValue_kInt64, U { int64_value: *i }, 1),
                AttrValue::Int64List(l) => (
                    sys::PJRT_NamedValue_kInt64List,
                    U {
                        int64_array_value: l.as_ptr(),
                    },
                    l.len(),
                ),
                AttrValue::Float(f) => (sys::PJRT_NamedValue_kFloat, U { float_value: *f }, 1),
                AttrValue::Bool(b) => (sys::PJRT_NamedValue_kBool, U { bool_value: *b }, 1),
            };
            sys::PJRT_NamedValue {
                struct_size: sys::PJRT_NamedValue_STRUCT_SIZE,
                extension_start: std::ptr::null_mut(),
                name: attr.name.as_ptr().cast(),
                name_size: attr.name.len(),
                r#type: ty,
                value,
                value_size: size,
            }
        });
        NamedValues {
            values: values.collect(),
            _attrs: attrs,
        }
    }

    /// The array as (pointer, count) fields; null when empty.
    pub fn out(&self) -> (*const sys::PJRT_NamedValue, usize) {
        match self.values.is_empty() {
            true => (std::ptr::null(), 0),
            false => out_slice(&self.values),
        }
    }
}

/// Reads a caller's array of named values.
///
/// # Safety
/// `ptr` must be null (with `len` 0) or point at `len` named values, each valid up to
/// its own `struct_size` and with name/value pointers valid for their sizes.
pub(crate) unsafe fn read_named_values(
    state: &State,
    ptr: *const sys::PJRT_NamedValue,
    len: usize,
) -> Result<Vec<Attribute>, Fail> {
    // SAFETY: `len` elements at `ptr` (contract).
    let all = unsafe { slice(ptr, len, "named values") }?;
    let mut out = Vec::with_capacity(len);
    for nv in all {
        let reads = sys::PJRT_NamedValue_STRUCT_SIZE;
        check_size(state, "PJRT_NamedValue", nv.struct_size, reads)?;
        // SAFETY: name points at name_size bytes per the C API.
        let name = unsafe { read_str(nv.name, nv.name_size) };
        // SAFETY (every arm): the type tag says which union member is set, and its
        // pointers are valid for value_size per the C API.
        let value = match nv.r#type {
            sys::PJRT_NamedValue_kString => {
                // SAFETY: as above.
                AttrValue::String(unsafe { read_str(nv.value.string_value, nv.value_size) })
            }
            // SAFETY: as above.
            sys::PJRT_NamedValue_kInt64 => AttrValue::Int64(unsafe { nv.value.int64_value }),
            sys::PJRT_NamedValue_kInt64List => {
                // SAFETY: as above.
                let list = unsafe { slice(nv.value.int64_array_value, nv.value_size, "list") };
                AttrValue::Int64List(
                    list.map_err(|e| e.context(format!("named value {name:?}")))?
                        .to_vec(),
                )
            }
            // SAFETY: as above.
            sys::PJRT_NamedValue_kFloat => AttrValue::Float(unsafe { nv.value.float_value }),
            sys::PJRT_NamedValue_kBool => {
                // SAFETY: as above; read the C bool's byte rather than trusting it to be
                // 0 or 1.
                AttrValue::Bool(unsafe { *std::ptr::addr_of!(nv.value).cast::<u8>() } != 0)
            }
            other => {
                bail!("fake plugin: named value {name:?} has unknown type {other}")
            }
        };
        out.push(Attribute { name, value });
    }
    Ok(out)
}
