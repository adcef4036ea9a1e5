//! XLA FFI data type codes and rpjrt element types.
//!
//! The FFI numbers element types as XLA's `PrimitiveType` does, which differs from PJRT's
//! buffer type codes from BF16 on (BF16 is 16 in the FFI and 13 in PJRT; C64 is 15 and 14).

use crate::dtype::ElementType;

/// `(FFI code, element type)` for every type both sides know.
const TABLE: &[(i32, ElementType)] = &[
    (1, ElementType::Pred),
    (2, ElementType::S8),
    (3, ElementType::S16),
    (4, ElementType::S32),
    (5, ElementType::S64),
    (6, ElementType::U8),
    (7, ElementType::U16),
    (8, ElementType::U32),
    (9, ElementType::U64),
    (10, ElementType::F16),
    (11, ElementType::F32),
    (12, ElementType::F64),
    (15, ElementType::C64),
    (16, ElementType::BF16),
    (17, ElementType::Token),
    (18, ElementType::C128),
    (19, ElementType::F8E5M2),
    (20, ElementType::F8E4M3FN),
    (21, ElementType::S4),
    (22, ElementType::U4),
    (23, ElementType::F8E4M3B11FNUZ),
    (24, ElementType::F8E5M2FNUZ),
    (25, ElementType::F8E4M3FNUZ),
    (26, ElementType::S2),
    (27, ElementType::U2),
    (28, ElementType::F8E4M3),
    (29, ElementType::F8E3M4),
    (30, ElementType::S1),
    (31, ElementType::U1),
    (32, ElementType::F4E2M1FN),
    (33, ElementType::F8E8M0FNU),
];

/// The rpjrt element type of an XLA FFI data type code; `None` for codes with no
/// counterpart (0 = invalid, and codes newer than this table).
pub fn ffi_element_type(code: i32) -> Option<ElementType> {
    TABLE.iter().find(|(c, _)| *c == code).map(|(_, t)| *t)
}

/// The XLA FFI data type code of an element type; `None` where the FFI has no code for it
/// (the 6-bit float types).
pub fn ffi_code(ty: ElementType) -> Option<i32> {
    TABLE.iter().find(|(_, t)| *t == ty).map(|(c, _)| *c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_differ_from_pjrt_where_expected() {
        for &(code, ty) in TABLE {
            assert_eq!(ffi_element_type(code), Some(ty));
            assert_eq!(ffi_code(ty), Some(code));
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
