//! [`Array`]: a dense host array as `.npy` files hold it.

use rpjrt::scalars::Scalar;
use rpjrt::{element_count, ElementType, Result};

use crate::invalid;

/// A dense, row-major host array: element type, dimensions and little-endian bytes
/// (sub-byte types packed, as [`rpjrt::pack_sub_byte`] packs them).
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    /// Element type.
    pub element_type: ElementType,
    /// Dimensions (empty for a 0-d array).
    pub dims: Vec<i64>,
    /// The elements, row-major, little-endian, one byte per `bool`.
    pub data: Vec<u8>,
}

impl Array {
    /// An array, checking that `data` has exactly the bytes `dims` and the type need.
    pub fn new(element_type: ElementType, dims: Vec<i64>, data: Vec<u8>) -> Result<Array> {
        let want = element_type.dense_byte_size(element_count(&dims)?)?;
        if data.len() != want {
            return Err(invalid(format!(
                "{} data for shape {:?} needs {want} bytes, got {}",
                element_type,
                dims,
                data.len()
            )));
        }
        Ok(Array {
            element_type,
            dims,
            data,
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.dims.iter().map(|&d| d.max(0) as usize).product()
    }

    /// True when the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` (row-major) as the core's [`Scalar`], for the types numpy has (bool,
    /// the integers, float16/32/64, bfloat16, complex64/128); `None` past the end or for
    /// the other types.
    pub fn get(&self, i: usize) -> Option<Scalar> {
        let size = self.element_type.byte_width()?;
        let b = self.data.get(i * size..(i + 1) * size)?;
        let le = |n: usize| -> [u8; 8] {
            let mut a = [0u8; 8];
            a[..n].copy_from_slice(&b[..n]);
            a
        };
        let uint = |n: usize| u64::from_le_bytes(le(n));
        // Sign-extends the low n bytes.
        let int = |n: usize| ((uint(n) << (64 - 8 * n)) as i64) >> (64 - 8 * n);
        let f32_at = |at: usize| f32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let f64_at = |at: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[at..at + 8]);
            f64::from_le_bytes(a)
        };
        use ElementType as T;
        Some(match self.element_type {
            T::Pred => Scalar::Bool(b[0] != 0),
            T::S8 | T::S16 | T::S32 | T::S64 => Scalar::Int(int(size).into()),
            T::U8 | T::U16 | T::U32 | T::U64 => Scalar::Int(uint(size).into()),
            T::F16 => Scalar::Float(half::f16::from_bits(uint(2) as u16).to_f64()),
            T::BF16 => Scalar::Float(half::bf16::from_bits(uint(2) as u16).to_f64()),
            T::F32 => Scalar::Float(f32_at(0).into()),
            T::F64 => Scalar::Float(f64_at(0)),
            T::C64 => Scalar::Complex(f32_at(0).into(), f32_at(4).into()),
            T::C128 => Scalar::Complex(f64_at(0), f64_at(8)),
            _ => return None,
        })
    }
}
