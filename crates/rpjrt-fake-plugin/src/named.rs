//! `PJRT_NamedValue` arrays: building ones the fake hands out, reading ones it is given.

use rpjrt_sys as sys;

use crate::config::{AttrValue, Attribute};
use crate::error::{invalid, Fail};
use crate::state::{check_size, State};

/// An owned array of `PJRT_NamedValue` with the storage its pointers point into.
pub(crate) struct NamedValues {
    values: Vec<sys::PJRT_NamedValue>,
    _names: Vec<String>,
    _strings: Vec<String>,
    _lists: Vec<Vec<i64>>,
}

// SAFETY: the raw pointers in `values` point into the heap buffers of `_names`,
// `_strings` and `_lists`, which are owned here and never mutated after `new`.
unsafe impl Send for NamedValues {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for NamedValues {}

impl NamedValues {
    pub fn new(attrs: &[Attribute]) -> NamedValues {
        let names: Vec<String> = attrs.iter().map(|a| a.name.clone()).collect();
        let mut strings = Vec::new();
        let mut lists = Vec::new();
        let mut values = Vec::with_capacity(attrs.len());
        for (attr, name) in attrs.iter().zip(&names) {
            let (ty, value, size) = match &attr.value {
                AttrValue::String(s) => {
                    let s = s.clone();
                    let v = sys::PJRT_NamedValue_Union {
                        string_value: s.as_ptr().cast(),
                    };
                    let n = s.len();
                    strings.push(s);
                    (sys::PJRT_NamedValue_kString, v, n)
                }
                AttrValue::Int64(i) => (
                    sys::PJRT_NamedValue_kInt64,
                    sys::PJRT_NamedValue_Union { int64_value: *i },
                    1,
                ),
                AttrValue::Int64List(l) => {
                    let l = l.clone();
                    let v = sys::PJRT_NamedValue_Union {
                        int64_array_value: l.as_ptr(),
                    };
                    let n = l.len();
                    lists.push(l);
                    (sys::PJRT_NamedValue_kInt64List, v, n)
                }
                AttrValue::Float(f) => (
                    sys::PJRT_NamedValue_kFloat,
                    sys::PJRT_NamedValue_Union { float_value: *f },
                    1,
                ),
                AttrValue::Bool(b) => (
                    sys::PJRT_NamedValue_kBool,
                    sys::PJRT_NamedValue_Union { bool_value: *b },
                    1,
                ),
            };
            values.push(sys::PJRT_NamedValue {
                struct_size: sys::PJRT_NamedValue_STRUCT_SIZE,
                extension_start: std::ptr::null_mut(),
                name: name.as_ptr().cast(),
                name_size: name.len(),
                r#type: ty,
                value,
                value_size: size,
            });
        }
        NamedValues {
            values,
            _names: names,
            _strings: strings,
            _lists: lists,
        }
    }

    pub fn as_ptr(&self) -> *const sys::PJRT_NamedValue {
        if self.values.is_empty() {
            std::ptr::null()
        } else {
            self.values.as_ptr()
        }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }
}

/// Copies `len` bytes at `ptr` into a String (lossy UTF-8); null or empty gives "".
///
/// # Safety
/// `ptr` must be null or point at `len` readable bytes.
pub(crate) unsafe fn read_str(ptr: *const std::os::raw::c_char, len: usize) -> String {
    if ptr.is_null() || len == 0 {
        return String::new();
    }
    // SAFETY: the caller promises `len` readable bytes at `ptr`.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    String::from_utf8_lossy(bytes).into_owned()
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
    if len == 0 {
        return Ok(Vec::new());
    }
    if ptr.is_null() {
        return Err(invalid(format!(
            "fake plugin: {len} named values at a null pointer"
        )));
    }
    let mut out = Vec::with_capacity(len);
    for i in 0..len {
        // SAFETY: the caller promises `len` elements at `ptr`; each starts with
        // struct_size.
        let actual = unsafe { (*ptr.add(i)).struct_size };
        check_size(
            state,
            "PJRT_NamedValue",
            actual,
            sys::PJRT_NamedValue_STRUCT_SIZE,
        )?;
        // SAFETY: element i exists and its struct_size covers every field (checked).
        let nv = unsafe { &*ptr.add(i) };
        // SAFETY: name points at name_size bytes per the C API.
        let name = unsafe { read_str(nv.name, nv.name_size) };
        let value = match nv.r#type {
            sys::PJRT_NamedValue_kString => {
                // SAFETY: kString: string_value is the member set, with value_size bytes.
                AttrValue::String(unsafe { read_str(nv.value.string_value, nv.value_size) })
            }
            // SAFETY: kInt64: int64_value is the member set.
            sys::PJRT_NamedValue_kInt64 => AttrValue::Int64(unsafe { nv.value.int64_value }),
            sys::PJRT_NamedValue_kInt64List => {
                // SAFETY: kInt64List: int64_array_value is the member set.
                let p = unsafe { nv.value.int64_array_value };
                if nv.value_size == 0 {
                    AttrValue::Int64List(Vec::new())
                } else if p.is_null() {
                    return Err(invalid(format!(
                        "fake plugin: named value {name:?} has a null list"
                    )));
                } else {
                    // SAFETY: the list has value_size elements per the C API.
                    AttrValue::Int64List(
                        unsafe { std::slice::from_raw_parts(p, nv.value_size) }.to_vec(),
                    )
                }
            }
            // SAFETY: kFloat: float_value is the member set.
            sys::PJRT_NamedValue_kFloat => AttrValue::Float(unsafe { nv.value.float_value }),
            sys::PJRT_NamedValue_kBool => {
                // SAFETY: kBool: the member set is a C bool; read its byte rather than
                // trusting it to be 0 or 1.
                let byte = unsafe { *std::ptr::addr_of!(nv.value).cast::<u8>() };
                AttrValue::Bool(byte != 0)
            }
            other => {
                return Err(invalid(format!(
                    "fake plugin: named value {name:?} has unknown type {other}"
                )))
            }
        };
        out.push(Attribute { name, value });
    }
    Ok(out)
}
