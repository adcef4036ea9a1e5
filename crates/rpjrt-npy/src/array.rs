//! [`Array`]: a dense host array as `.npy` files hold it.

use crate::scalars::{decode_float, Scalar};
use rpjrt::{element_count, ElementKind, ElementType, Result};

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
        // Saturating: the fields are public, so the dims need not fit the data.
        self.dims
            .iter()
            .fold(1usize, |n, &d| n.saturating_mul(d.max(0) as usize))
    }

    /// True when the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` (row-major) as the core's [`Scalar`], for every type with values (the
    /// packed sub-byte types and the float8/float6/float4 types included); `None` past the
    /// end or for the token.
    pub fn get(&self, i: usize) -> Option<Scalar> {
        use ElementKind as K;
        let t = self.element_type;
        if i >= self.len() {
            return None;
        }
        let bits = t.storage_bits();
        // The element's bits, zero-extended: packed lowest bits first for the sub-byte
        // types (rpjrt::pack_sub_byte), little-endian bytes for the others.
        let (raw, width) = if t.is_sub_byte() {
            let at = i * bits;
            let byte = *self.data.get(at / 8)?;
            (
                u64::from((byte >> (at % 8)) & ((1u16 << bits) - 1) as u8),
                bits,
            )
        } else {
            let size = t.byte_width()?;
            let b = self.data.get(i * size..(i + 1) * size)?;
            if t.kind() == K::Complex {
                let half = size / 2;
                let part = |b: &[u8]| {
                    let mut a = [0u8; 8];
                    a[..half].copy_from_slice(b);
                    u64::from_le_bytes(a)
                };
                let real = if half == 4 {
                    ElementType::F32
                } else {
                    ElementType::F64
                };
                return Some(Scalar::Complex(
                    decode_float(part(&b[..half]), real)?,
                    decode_float(part(&b[half..]), real)?,
                ));
            }
            let mut a = [0u8; 8];
            a[..size].copy_from_slice(b);
            (u64::from_le_bytes(a), 8 * size)
        };
        Some(match t.kind() {
            K::Bool => Scalar::Bool(raw != 0),
            // Sign-extends from the element's width (the packed value's own width for
            // the sub-byte types: a plugin may store them sign-extended or not).
            K::Signed => {
                let w = if t.is_sub_byte() {
                    t.bit_width()
                } else {
                    width
                };
                let shift = 64 - w as u32;
                Scalar::Int(i128::from(((raw << shift) as i64) >> shift))
            }
            K::Unsigned => {
                let w = if t.is_sub_byte() {
                    t.bit_width()
                } else {
                    width
                };
                Scalar::Int(i128::from(raw & (u64::MAX >> (64 - w as u32))))
            }
            K::Float => Scalar::Float(decode_float(raw, t)?),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::literal::parse_literal;

    #[test]
    fn every_type_with_values_reads_back_its_elements() {
        for &t in ElementType::ALL {
            let (text, want): (&str, Vec<Scalar>) = match t.kind() {
                ElementKind::Bool => (
                    "[false, true, false]",
                    vec![false.into(), true.into(), false.into()],
                ),
                ElementKind::Signed => {
                    ("[0, -1, 0]", vec![0i64.into(), (-1i64).into(), 0i64.into()])
                }
                ElementKind::Unsigned => ("[0, 1, 0]", vec![0i64.into(), 1i64.into(), 0i64.into()]),
                ElementKind::Float => ("[0.5, 1, 2]", vec![0.5.into(), 1.0.into(), 2.0.into()]),
                ElementKind::Complex => (
                    "[0.5, 1, 2]",
                    vec![
                        Scalar::Complex(0.5, 0.0),
                        Scalar::Complex(1.0, 0.0),
                        Scalar::Complex(2.0, 0.0),
                    ],
                ),
                _ => continue, // the token: no values
            };
            let a = parse_literal(text, Some(t)).unwrap();
            let got: Vec<Option<Scalar>> = (0..3).map(|i| a.get(i)).collect();
            let want: Vec<Option<Scalar>> = want.into_iter().map(Some).collect();
            assert_eq!(got, want, "{t}");
            assert_eq!(a.get(3), None, "{t}");
        }
        // Signed sub-byte values stored sign-extended (as the CPU plugins hand them
        // back) read the same as packed ones.
        let a = Array::new(ElementType::S4, vec![2], vec![0xE1]).unwrap();
        assert_eq!(a.get(0), Some(Scalar::Int(1)));
        assert_eq!(a.get(1), Some(Scalar::Int(-2)));
        let nan = Array::new(ElementType::F8E4M3FN, vec![1], vec![0x7F]).unwrap();
        assert!(matches!(nan.get(0), Some(Scalar::Float(x)) if x.is_nan()));
    }
}
