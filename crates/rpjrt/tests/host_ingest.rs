//! Host ingest through `Client::put`: strides (zero, negative, permuted), byte order, bool
//! normalisation, copy modes, huge broadcasts and a lying `HostBytes`, on both CPU
//! plugins; and property tests of the host-array logic against a naive reference.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{compile, expect_err, for_each_plugin};
use proptest::prelude::*;
use rpjrt::{
    extent, gather, ByteOrder, CopyMode, ElementType, Error, HostArray, HostBytes, HostData,
};

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

/// Breaks the `HostBytes` contract on purpose: the full bytes on the first call, a single
/// byte afterwards. rpjrt reads an owner once, so the plugin never sees the short slice.
struct Liar {
    calls: AtomicUsize,
    data: Vec<u8>,
}

// SAFETY: (deliberately broken for this test) the memory is valid and unchanged while
// `self` lives, but later calls return a shorter slice than the first.
unsafe impl HostBytes for Liar {
    fn bytes(&self) -> &[u8] {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            &self.data
        } else {
            &self.data[..1]
        }
    }
}

#[test]
fn a_lying_host_bytes_is_read_once() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let values: Vec<f32> = (0..1024).map(|i| i as f32).collect();
        // Through the owned-buffer entry...
        let liar = Arc::new(Liar {
            calls: AtomicUsize::new(0),
            data: f32_bytes(&values),
        });
        let b = c
            .buffer_from_host_owned(liar.clone(), ElementType::F32, &[1024], None, &d, None)
            .unwrap();
        assert_eq!(b.to_vec_of::<f32>().unwrap(), values);
        assert_eq!(liar.calls.load(Ordering::SeqCst), 1);
        // ... and through put, in every copy mode.
        for mode in [CopyMode::Always, CopyMode::IfNeeded, CopyMode::Never] {
            let liar = Arc::new(Liar {
                calls: AtomicUsize::new(0),
                data: f32_bytes(&values),
            });
            let a = HostArray::from_owner(liar.clone(), ElementType::F32, &[1024]);
            match c.put(&a, &d, None, mode) {
                Ok(b) => assert_eq!(b.to_vec_of::<f32>().unwrap(), values, "{mode:?}"),
                // Never may fail when the plugin copies (alignment); never out of bounds.
                Err(e) => assert_eq!(mode, CopyMode::Never, "{e}"),
            }
        }
    });
}

#[test]
fn put_reads_negative_zero_and_permuted_strides() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let src: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let bytes = f32_bytes(&src);
        // Reversed rows of a 3x4 array.
        let a = HostArray::from_slice(&bytes, ElementType::F32, &[3, 4])
            .with_byte_strides(&[-16, 4], 32);
        let got = c.put(&a, &d, None, CopyMode::IfNeeded).unwrap();
        let want: Vec<f32> = [8., 9., 10., 11., 4., 5., 6., 7., 0., 1., 2., 3.].to_vec();
        assert_eq!(got.to_vec_of::<f32>().unwrap(), want);
        // Broadcast of one row.
        let a =
            HostArray::from_slice(&bytes, ElementType::F32, &[2, 4]).with_byte_strides(&[0, 4], 0);
        let got = c.put(&a, &d, None, CopyMode::Always).unwrap();
        assert_eq!(
            got.to_vec_of::<f32>().unwrap(),
            vec![0., 1., 2., 3., 0., 1., 2., 3.]
        );
        // Fortran order (plugin-side strides).
        let a =
            HostArray::from_slice(&bytes, ElementType::F32, &[4, 3]).with_byte_strides(&[4, 16], 0);
        let got = c.put(&a, &d, None, CopyMode::Always).unwrap();
        let want: Vec<f32> = (0..4)
            .flat_map(|i| (0..3).map(move |j| (i + 4 * j) as f32))
            .collect();
        assert_eq!(got.to_vec_of::<f32>().unwrap(), want);
        // Out of bounds descriptions are refused before the plugin sees them.
        let a = HostArray::from_slice(&bytes, ElementType::F32, &[4]).with_byte_strides(&[-4], 8);
        expect_err(
            c.put(&a, &d, None, CopyMode::Always),
            &["addresses bytes -4"],
        );
    });
}

#[test]
fn put_swaps_foreign_byte_order_and_normalises_bools() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let be: Vec<u8> = [1i32, -2, 3].iter().flat_map(|x| x.to_be_bytes()).collect();
        let a = HostArray::from_slice(&be, ElementType::S32, &[3]).with_byte_order(ByteOrder::Big);
        let b = c.put(&a, &d, None, CopyMode::IfNeeded).unwrap();
        assert_eq!(b.to_vec_of::<i32>().unwrap(), vec![1, -2, 3]);
        expect_err(c.put(&a, &d, None, CopyMode::Never), &["converted"]);

        let raw = vec![0u8, 1, 2, 255];
        let owner: Arc<dyn HostBytes> = Arc::new(raw.clone());
        let a = HostArray::from_owner(owner, ElementType::Pred, &[4]);
        let b = c.put(&a, &d, None, CopyMode::IfNeeded).unwrap();
        assert_eq!(b.to_vec().unwrap(), vec![0, 1, 1, 1]);
        assert_eq!(
            b.to_vec_of::<bool>().unwrap(),
            vec![false, true, true, true]
        );
        // The older entries normalise too.
        let b = c
            .buffer_from_host(&raw, ElementType::Pred, &[4], None, &d, None)
            .unwrap();
        assert_eq!(b.to_vec().unwrap(), vec![0, 1, 1, 1]);
        let owner: Arc<dyn HostBytes> = Arc::new(raw.clone());
        let b = c
            .buffer_from_host_owned(owner, ElementType::Pred, &[4], None, &d, None)
            .unwrap();
        assert_eq!(b.to_vec().unwrap(), vec![0, 1, 1, 1]);
        let exe = compile(
            c,
            "func.func public @main(%a: tensor<4xi1>) -> tensor<4xi1> {
  %t = stablehlo.constant dense<true> : tensor<4xi1>
  %0 = stablehlo.and %a, %t : tensor<4xi1>
  return %0 : tensor<4xi1>
}",
        );
        let out = exe.execute(&[&b]).unwrap();
        assert_eq!(
            out[0].to_vec_of::<bool>().unwrap(),
            vec![false, true, true, true]
        );
    });
}

#[test]
fn huge_broadcasts_are_resource_exhausted() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let one = f32_bytes(&[1.0]);
        let a =
            HostArray::from_slice(&one, ElementType::F32, &[1 << 40]).with_byte_strides(&[0], 0);
        let e = c.put(&a, &d, None, CopyMode::IfNeeded).unwrap_err();
        assert!(matches!(e, Error::ResourceExhausted(_)), "{e}");
        assert_eq!(e.code(), rpjrt::Code::ResourceExhausted);
    });
}

#[test]
fn copy_never_uses_aligned_owned_memory_in_place() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        // A Vec<f32> of 4096 values: glibc returns 16-byte aligned memory; find a 64-byte
        // aligned window inside a larger allocation instead.
        let big: Arc<dyn HostBytes> = Arc::new(vec![7u8; 64 * 1024 + 64]);
        let addr = big.bytes().as_ptr() as usize;
        let off = (64 - addr % 64) % 64;
        let a = HostArray::new(HostData::Owned(big), ElementType::U8, &[64 * 1024])
            .with_byte_strides(&[1], off);
        let b = c.put(&a, &d, None, CopyMode::Never).unwrap();
        assert!(b.borrows_host());
        assert_eq!(b.unsafe_pointer().unwrap(), addr + off);
        let borrowed = [1u8; 64];
        let a = HostArray::from_slice(&borrowed, ElementType::U8, &[64]);
        expect_err(c.put(&a, &d, None, CopyMode::Never), &["only borrowed"]);
    });
}

/// The value at `index` of a strided array, read the naive way.
fn naive(src: &[u8], offset: usize, dims: &[i64], strides: &[i64], item: usize) -> Vec<u8> {
    let n: i64 = dims.iter().product();
    let mut out = Vec::new();
    for flat in 0..n {
        let mut rem = flat;
        let mut at = offset as i64;
        for k in (0..dims.len()).rev() {
            at += (rem % dims[k]) * strides[k];
            rem /= dims[k];
        }
        out.extend_from_slice(&src[at as usize..at as usize + item]);
    }
    out
}

fn layout() -> impl Strategy<Value = (Vec<i64>, Vec<i64>, usize)> {
    (
        1usize..=4,
        prop_oneof![Just(1usize), Just(2), Just(4), Just(8)],
    )
        .prop_flat_map(|(rank, item)| {
            (
                proptest::collection::vec(0i64..5, rank),
                proptest::collection::vec(-3i64..=3, rank),
                Just(item),
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed),
        ..ProptestConfig::default()
    })]

    /// `extent` bounds every element, `gather` reads what the naive reader reads, and
    /// `plan` refuses exactly the descriptions that leave their bytes.
    #[test]
    fn gather_matches_a_naive_reader((dims, units, item) in layout(), pad in 0usize..16) {
        let strides: Vec<i64> = units.iter().map(|u| u * item as i64).collect();
        let ext = extent(&dims, &strides, item).unwrap();
        let Some((lo, end)) = ext else {
            prop_assert!(dims.contains(&0));
            return Ok(());
        };
        let offset = (-lo) as usize + pad;
        let len = (end - lo) as usize + pad;
        let src: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        let got = gather(&src, offset, &dims, &strides, item).unwrap();
        prop_assert_eq!(&got, &naive(&src, offset, &dims, &strides, item));
        let ty = match item { 1 => ElementType::U8, 2 => ElementType::U16, 4 => ElementType::U32, _ => ElementType::U64 };
        let ok = HostArray::from_slice(&src, ty, &dims).with_byte_strides(&strides, offset);
        prop_assert!(ok.plan().is_ok());
        if len > 0 {
            let short = HostArray::from_slice(&src[..len - 1], ty, &dims)
                .with_byte_strides(&strides, offset);
            prop_assert!(short.plan().is_err());
        }
    }
}

/// The fake plugin's library (built by `scripts/test.sh`, or named by `RPJRT_FAKE_PLUGIN`).
/// The fake plugin's library, built by the shared test harness when needed.
fn fake_library() -> std::path::PathBuf {
    common::fake_plugin_library()
}

/// A device allocation the plugin refuses is `ResourceExhausted` too (the fake plugin with a
/// memory limit), in every copy mode, and the client stays usable.
#[test]
fn plugin_side_exhaustion_is_resource_exhausted() {
    let lib = fake_library();
    assert!(
        lib.exists(),
        "{} is missing: cargo build -p rpjrt-fake-plugin",
        lib.display()
    );
    // This is the only test in this binary that loads the fake, so the knob cannot leak.
    let copy = std::env::temp_dir().join(format!("rpjrt-fake-ingest-{}.so", std::process::id()));
    std::fs::copy(&lib, &copy).unwrap();
    std::env::set_var("RPJRT_FAKE_MEMORY_LIMIT", "4096");
    let plugin = rpjrt::Plugin::load(&copy).unwrap();
    let c = rpjrt::Client::new(&plugin, &rpjrt::ClientOptions::new()).unwrap();
    std::env::remove_var("RPJRT_FAKE_MEMORY_LIMIT");
    let _ = std::fs::remove_file(&copy);
    let d = c.default_device().unwrap();
    let big = vec![0u8; 8192];
    for mode in [CopyMode::Always, CopyMode::IfNeeded] {
        let a = HostArray::from_slice(&big, ElementType::U8, &[8192]);
        let e = c.put(&a, &d, None, mode).unwrap_err();
        assert_eq!(e.code(), rpjrt::Code::ResourceExhausted, "{mode:?}: {e}");
    }
    let small = [1u8; 16];
    let a = HostArray::from_slice(&small, ElementType::U8, &[16]);
    let b = c.put(&a, &d, None, CopyMode::Always).unwrap();
    assert_eq!(b.to_vec().unwrap(), small.to_vec());
}

#[test]
fn a_slice_longer_than_its_dims_and_bytes_no_sub_byte_element_are_refused() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        // Eight floats for dims [3] were taken; the dims were not the data's.
        expect_err(
            c.buffer_from_slice(&[0f32; 8], &[3], &d),
            &["8 elements for dims [3], which hold 3"],
        );
        expect_err(c.buffer_from_slice(&[0f32; 2], &[3], &d), &["2 elements"]);
        let b = c.buffer_from_slice(&[1f32, 2., 3.], &[3], &d).unwrap();
        assert_eq!(b.to_vec_of::<f32>().unwrap(), vec![1., 2., 3.]);
        // Unpacked int4 bytes: both forms of -2 are -2; 0x7f is no int4.
        let a = HostArray::from_slice(&[0x0e, 0xfe, 0x07], ElementType::S4, &[3]).unpacked();
        let b = c.put(&a, &d, None, CopyMode::IfNeeded).unwrap();
        let mut back = [0u8; 3];
        b.to_host_array(&mut back).unwrap();
        assert_eq!(back, [0x0e, 0x0e, 0x07]);
        let a = HostArray::from_slice(&[0x01, 0x7f], ElementType::S4, &[2]).unpacked();
        expect_err(
            c.put(&a, &d, None, CopyMode::IfNeeded),
            &["element 1 is the byte 0x7f, which is no int4 value"],
        );
    });
}
