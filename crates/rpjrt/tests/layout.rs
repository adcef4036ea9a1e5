//! Layouts through the Layouts extension (read within the plugin's struct size), byte
//! strides, and copies into a caller's strided destination, on both CPU plugins.

mod common;

use common::{expect_err, for_each_plugin, is_old};
use rpjrt::ElementType;

#[test]
fn layouts_extension_is_read_within_its_size() {
    for_each_plugin(|p, c| {
        let size = c.layouts_extension_size().unwrap();
        assert_eq!(size, if is_old(p) { 72 } else { 80 });
        let d = c.default_device().unwrap();
        let b = c
            .buffer_from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], &d)
            .unwrap();
        let l = b.device_layout().unwrap();
        assert_eq!(l.minor_to_major, vec![1, 0]);
        assert!(l.is_row_major(), "{l:?}");
        assert_eq!(l.byte_strides(&[2, 3], 4), Some(vec![12, 4]));
        assert_eq!(
            c.default_layout(ElementType::F32, &[2, 3])
                .unwrap()
                .minor_to_major,
            vec![1, 0]
        );
        let l4 = c.default_layout(ElementType::S8, &[2, 1, 3, 4]).unwrap();
        assert_eq!(l4.minor_to_major, vec![3, 2, 1, 0]);
        assert_eq!(b.byte_strides().unwrap(), vec![12, 4]);
        let s = c.buffer_from_slice(&[7i64], &[], &d).unwrap();
        assert_eq!(s.byte_strides().unwrap(), Vec::<i64>::new());
    });
}

#[test]
fn copies_into_strided_destinations() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let v: Vec<i32> = (0..6).collect();
        let b = c.buffer_from_slice(&v, &[2, 3], &d).unwrap();
        // Fortran order: element [i, j] at 4*i + 8*j.
        let mut dst = vec![0u8; 24];
        b.copy_to_host_strided(&mut dst, &[4, 8], 0).unwrap();
        let got: Vec<i32> = dst
            .chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, vec![0, 3, 1, 4, 2, 5]);
        // Negative strides from the last element: reversed in both dimensions.
        let mut dst = vec![0u8; 24];
        b.copy_to_host_strided(&mut dst, &[-12, -4], 20).unwrap();
        let got: Vec<i32> = dst
            .chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, vec![5, 4, 3, 2, 1, 0]);
        // Gaps are fine and left untouched.
        let mut dst = vec![0xAAu8; 48];
        b.copy_to_host_strided(&mut dst, &[24, 8], 0).unwrap();
        assert_eq!(&dst[8..12], &1i32.to_ne_bytes());
        assert_eq!(&dst[4..8], &[0xAA; 4]);
        expect_err(
            b.copy_to_host_strided(&mut [0u8; 24], &[4, 4], 0),
            &["overlap"],
        );
        expect_err(
            b.copy_to_host_strided(&mut [0u8; 24], &[0, 4], 0),
            &["overlap"],
        );
        expect_err(
            b.copy_to_host_strided(&mut [0u8; 20], &[12, 4], 0),
            &["outside", "20 bytes"],
        );
        expect_err(
            b.copy_to_host_strided(&mut [0u8; 24], &[-12, -4], 0),
            &["outside"],
        );
        expect_err(
            b.copy_to_host_strided(&mut [0u8; 24], &[4], 0),
            &["1 byte strides", "rank-2"],
        );
    });
}
