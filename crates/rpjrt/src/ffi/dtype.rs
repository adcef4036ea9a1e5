//! XLA FFI data type codes and rpjrt element types.
//!
//! The FFI numbers element types as XLA's `PrimitiveType` does, which differs from PJRT's
//! buffer type codes from BF16 on (BF16 is 16 in the FFI and 13 in PJRT; C64 is 15 and 14).
//! The numbers live in the crate's one element-type table (`dtype.rs`); these are the
//! FFI-side names for its lookups.

use crate::dtype::ElementType;

/// The rpjrt element type of an XLA FFI data type code; `None` for codes with no
/// counterpart (0 = invalid, and codes newer than rpjrt's element-type table).
pub fn ffi_element_type(code: i32) -> Option<ElementType> {
    ElementType::from_ffi_code(code)
}

/// The XLA FFI data type code of an element type; `None` where the FFI has no code for it
/// (the 6-bit float types).
pub fn ffi_code(ty: ElementType) -> Option<i32> {
    ty.ffi_code()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_differ_from_pjrt_where_expected() {
        for &ty in ElementType::ALL {
            if let Some(code) = ffi_code(ty) {
                assert_eq!(ffi_element_type(code), Some(ty));
            }
        }
        assert_eq!(ffi_code(ElementType::BF16), Some(16));
        assert_eq!(ElementType::BF16.code(), 13);
        assert_eq!(ffi_code(ElementType::C64), Some(15));
        assert_eq!(ffi_code(ElementType::C128), Some(18));
        assert_eq!(ffi_element_type(0), None);
        assert_eq!(ffi_element_type(99), None);
        // Every element type but the 6-bit floats has an FFI code.
        let missing: Vec<_> = ElementType::ALL
            .iter()
            .filter(|t| ffi_code(**t).is_none())
            .collect();
        assert_eq!(
            missing,
            vec![&ElementType::F6E2M3FN, &ElementType::F6E3M2FN]
        );
    }
}
