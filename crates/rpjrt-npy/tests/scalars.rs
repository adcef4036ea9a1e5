//! Python-style numbers (`rpjrt_npy::scalars`) on the device, on both CPU plugins.

use rpjrt::{CopyMode, ElementType, Error};
use rpjrt_npy::scalars::{to_host, Nested, Scalar};

/// The core's test helpers: plugins, fixtures, compiling, error checks.
#[path = "../../rpjrt/tests/common/mod.rs"]
mod common;
use common::for_each_plugin;

/// Python-style numbers through the one rule (`rpjrt_npy::scalars`) and `Client::put`: the
/// device holds the values, sub-byte types packed, on both plugins.
#[test]
fn nested_numbers_reach_the_device() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let tree = Nested::from(vec![vec![1i64, -2], vec![3, 7]]);
        let a = to_host(&tree, Some(ElementType::S4))
            .unwrap()
            .into_host_array();
        let b = c.put(&a, &d, None, CopyMode::IfNeeded).unwrap();
        assert_eq!(b.dims(), &[2, 2]);
        let host = b.to_vec().unwrap();
        assert_eq!(
            rpjrt::unpack_sub_byte(ElementType::S4, &host, 4),
            vec![1, 0xFE, 3, 7]
        );
        let tree = Nested::from(vec![1.5f64, -2.0, 1e-3]);
        let a = to_host(&tree, Some(ElementType::F32))
            .unwrap()
            .into_host_array();
        let b = c.put(&a, &d, None, CopyMode::Always).unwrap();
        assert_eq!(b.to_vec_of::<f32>().unwrap(), vec![1.5, -2.0, 1e-3]);
        let tree = Nested::from(vec![Scalar::Bool(true), Scalar::Int(0)]);
        let a = to_host(&tree, Some(ElementType::Pred))
            .unwrap()
            .into_host_array();
        let b = c.put(&a, &d, None, CopyMode::IfNeeded).unwrap();
        assert_eq!(b.to_vec_of::<bool>().unwrap(), vec![true, false]);
        let e = to_host(&Nested::from(vec![1e6f64]), Some(ElementType::F8E4M3FN)).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    });
}
