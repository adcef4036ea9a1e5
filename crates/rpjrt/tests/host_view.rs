//! Host-visible buffers: the direct `to_host` path, zero-copy host views, and what a view
//! forbids (deletion, donation) while it lives. On both CPU plugins.

mod common;

use std::sync::Arc;

use common::{compile, expect_err, for_each_plugin, mul_add};
use rpjrt::{Buffer, ElementType, ExecuteOptions, HostBytes, HostView};

const TRANSPOSE: &str = "
func.func public @main(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = stablehlo.transpose %a, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}";

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn outputs_read_directly_match_the_computation() {
    for_each_plugin(|_, client| {
        let dev = client.default_device().unwrap();
        let exe = compile(client, &mul_add());
        let data: Vec<f32> = (0..8).map(|i| i as f32 - 3.5).collect();
        let x = client.buffer_from_slice(&data, &[8], &dev).unwrap();
        let want: Vec<f32> = data.iter().map(|v| v * v + 1.0).collect();
        for _ in 0..50 {
            let out = exe.execute(&[&x, &x]).unwrap();
            // Not waited for: to_host must wait for the ready event itself.
            assert_eq!(out[0].to_vec_of::<f32>().unwrap(), want);
        }
        let out = exe.execute(&[&x, &x]).unwrap();
        assert!(out[0].is_on_cpu().unwrap());
        assert!(out[0].is_on_cpu().unwrap(), "cached answer is the same");
        assert!(out[0].has_host_view().unwrap());
        let view = out[0].host_view().unwrap();
        assert_eq!(f32s(&view), want);
        assert_eq!(view.len(), 32);
        assert_eq!(view.as_ptr() as usize, out[0].unsafe_pointer().unwrap());
        assert!(format!("{view:?}").contains("float32[8]"));
    });
}

#[test]
fn two_dimensional_results_are_row_major() {
    for_each_plugin(|_, client| {
        let dev = client.default_device().unwrap();
        let exe = compile(client, TRANSPOSE);
        let a = client
            .buffer_from_slice(&[1f32, 2., 3., 4., 5., 6.], &[2, 3], &dev)
            .unwrap();
        let out = exe.execute(&[&a]).unwrap();
        assert_eq!(out[0].dims(), &[3, 2]);
        let want = vec![1f32, 4., 2., 5., 3., 6.];
        assert_eq!(out[0].to_vec_of::<f32>().unwrap(), want);
        if out[0].has_host_view().unwrap() {
            assert_eq!(f32s(&out[0].host_view().unwrap()), want);
        }
        // Inputs put from the host read back the same way.
        assert_eq!(
            a.to_vec_of::<f32>().unwrap(),
            vec![1f32, 2., 3., 4., 5., 6.]
        );
    });
}

#[test]
fn every_whole_byte_type_round_trips() {
    for_each_plugin(|_, client| {
        let dev = client.default_device().unwrap();
        let b = client
            .buffer_from_slice(&[true, false, true], &[3], &dev)
            .unwrap();
        assert_eq!(b.to_vec_of::<bool>().unwrap(), vec![true, false, true]);
        let b = client
            .buffer_from_slice(&[-1i8, 7, 127], &[3], &dev)
            .unwrap();
        assert_eq!(b.to_vec_of::<i8>().unwrap(), vec![-1, 7, 127]);
        let b = client
            .buffer_from_slice(&[1.5f64, -2.25], &[2], &dev)
            .unwrap();
        assert_eq!(b.to_vec_of::<f64>().unwrap(), vec![1.5, -2.25]);
        let b = client
            .buffer_from_slice(&[u64::MAX, 3], &[2, 1], &dev)
            .unwrap();
        assert_eq!(b.to_vec_of::<u64>().unwrap(), vec![u64::MAX, 3]);
        // A scalar.
        let b = client.buffer_from_slice(&[42i32], &[], &dev).unwrap();
        assert_eq!(b.to_vec_of::<i32>().unwrap(), vec![42]);
        // Empty arrays have no host view but copy (nothing) fine.
        let b = client.buffer_from_slice::<f32>(&[], &[0, 4], &dev).unwrap();
        assert!(!b.has_host_view().unwrap());
        expect_err(b.host_view(), &["has no host view"]);
        assert_eq!(b.to_vec().unwrap(), Vec::<u8>::new());
    });
}

#[test]
fn sub_byte_buffers_have_no_view_and_still_copy() {
    for_each_plugin(|_, client| {
        let dev = client.default_device().unwrap();
        // Four int4 values, packed two per byte, low nibble first.
        let packed = [0x21u8, 0x43];
        let b = client
            .buffer_from_host(&packed, ElementType::S4, &[4], None, &dev, None)
            .unwrap();
        assert!(!b.has_host_view().unwrap());
        expect_err(b.host_view(), &["has no host view", "int4[4]"]);
        assert_eq!(b.to_vec().unwrap(), packed.to_vec());
    });
}

#[test]
fn host_memory_kinds_and_zero_copy_buffers_read_directly() {
    for_each_plugin(|_, client| {
        let dev = client.default_device().unwrap();
        let x = client
            .buffer_from_slice(&[1f32, 2., 3., 4.], &[4], &dev)
            .unwrap();
        for kind in ["pinned_host", "unpinned_host"] {
            let Ok(mem) = dev.memory_by_kind(kind) else {
                continue;
            };
            let y = x.copy_to_memory(&mem).unwrap();
            assert_eq!(
                y.to_vec_of::<f32>().unwrap(),
                vec![1., 2., 3., 4.],
                "{kind}"
            );
            if y.has_host_view().unwrap() {
                assert_eq!(
                    f32s(&y.host_view().unwrap()),
                    vec![1., 2., 3., 4.],
                    "{kind}"
                );
            }
        }
        let owner: Arc<dyn HostBytes> = Arc::new(common::f32_bytes(&[9., 8., 7., 6.]));
        let z = client
            .buffer_from_host_owned(owner, ElementType::F32, &[4], None, &dev, None)
            .unwrap();
        assert_eq!(z.to_vec_of::<f32>().unwrap(), vec![9., 8., 7., 6.]);
        assert_eq!(f32s(&z.host_view().unwrap()), vec![9., 8., 7., 6.]);
    });
}

#[test]
fn a_view_blocks_delete_and_donation_until_dropped() {
    for_each_plugin(|_, client| {
        let dev = client.default_device().unwrap();
        let exe = compile(client, &mul_add());
        let x = client.buffer_from_slice(&[2f32; 8], &[8], &dev).unwrap();
        let y = client.buffer_from_slice(&[3f32; 8], &[8], &dev).unwrap();

        let view = x.host_view().unwrap();
        let second = x.host_view().unwrap();
        expect_err(x.delete(), &["cannot be deleted", "2 host view(s)"]);
        assert!(!x.is_deleted());
        let donate = ExecuteOptions {
            donate: vec![0],
            ..Default::default()
        };
        expect_err(
            exe.execute_with(&[vec![&x, &y]], &donate),
            &["cannot be donated", "host view"],
        );
        assert!(
            !x.is_deleted(),
            "a refused donation leaves the buffer usable"
        );
        // Reading and executing (without donation) are fine while viewed.
        let out = exe.execute(&[&x, &y]).unwrap();
        assert_eq!(out[0].to_vec_of::<f32>().unwrap(), vec![7.0; 8]);
        assert_eq!(f32s(&view), vec![2.0; 8]);
        drop(view);
        expect_err(x.delete(), &["1 host view(s)"]);
        drop(second);

        // Without views, donation and deletion work as before.
        let run = exe.execute_with(&[vec![&x, &y]], &donate).unwrap();
        assert_eq!(run.outputs[0][0].to_vec_of::<f32>().unwrap(), vec![7.0; 8]);
        assert!(x.is_deleted());
        expect_err(x.host_view(), &["deleted or donated"]);
        y.delete().unwrap();
        expect_err(y.host_view(), &["deleted or donated"]);
    });
}

#[test]
fn a_failed_execution_gives_donated_buffers_back() {
    for_each_plugin(|_, client| {
        let dev = client.default_device().unwrap();
        let exe = compile(client, &mul_add());
        let x = client.buffer_from_slice(&[2f32; 8], &[8], &dev).unwrap();
        let y = client.buffer_from_slice(&[3f32; 8], &[8], &dev).unwrap();
        y.delete().unwrap();
        let donate = ExecuteOptions {
            donate: vec![0],
            ..Default::default()
        };
        // Refused before the call (argument 1 is deleted): x is untouched.
        expect_err(exe.execute_with(&[vec![&x, &y]], &donate), &["argument 1"]);
        assert!(!x.is_deleted());
        // The same buffer donated at two positions is consumed once.
        let run = exe.execute_with(
            &[vec![&x, &x]],
            &ExecuteOptions {
                donate: vec![0, 1],
                ..Default::default()
            },
        );
        if let Ok(run) = run {
            assert_eq!(run.outputs[0][0].to_vec_of::<f32>().unwrap(), vec![5.0; 8]);
            assert!(x.is_deleted());
        } else {
            assert!(!x.is_deleted(), "a failed execution gives the buffer back");
        }
    });
}

#[test]
fn owned_views_outlive_their_scope_and_cross_threads() {
    fn is_static_send_sync<T: Send + Sync + 'static>(_: &T) {}
    for_each_plugin(|_, client| {
        let dev = client.default_device().unwrap();
        let exe = compile(client, &mul_add());
        let x = client.buffer_from_slice(&[1f32; 8], &[8], &dev).unwrap();
        let out: Arc<Buffer> = Arc::new(exe.execute(&[&x, &x]).unwrap().remove(0));
        let view = HostView::new(Arc::clone(&out)).unwrap();
        is_static_send_sync(&view);
        let got = std::thread::spawn(move || {
            let v = f32s(view.bytes());
            assert_eq!(view.buffer().dims(), &[8]);
            v
        })
        .join()
        .unwrap();
        assert_eq!(got, vec![2.0; 8]);
        // The thread dropped the view: the buffer can be deleted now.
        out.delete().unwrap();
    });
}

#[test]
fn views_refuse_closed_clients() {
    for_each_plugin(|_, client| {
        let dev = client.default_device().unwrap();
        let x = client.buffer_from_slice(&[1f32; 8], &[8], &dev).unwrap();
        let view = x.host_view().unwrap();
        client.close().unwrap();
        // A view taken before close stays readable: the memory is still owned.
        assert_eq!(f32s(&view), vec![1.0; 8]);
        drop(view);
        expect_err(x.host_view(), &["client was closed"]);
        expect_err(x.to_vec(), &["client was closed"]);
    });
}

#[test]
fn host_array_form_is_one_byte_per_sub_byte_element() {
    for_each_plugin(|_, client| {
        let dev = client.default_device().unwrap();
        // int4 values 1, -2, 3, -8, packed two per byte, low nibble first.
        let packed = [0xE1u8, 0x83];
        let b = client
            .buffer_from_host(&packed, ElementType::S4, &[4], None, &dev, None)
            .unwrap();
        assert_eq!(b.host_array_size(), 4);
        let mut dst = [0xFFu8; 4];
        b.to_host_array(&mut dst).unwrap();
        // numpy / ml_dtypes' int4: the low four bits, not sign-extended.
        assert_eq!(dst, [0x1, 0xE, 0x3, 0x8]);
        expect_err(
            b.to_host_array(&mut [0u8; 2]),
            &["destination has 2 bytes", "needs 4"],
        );
        assert!(
            !b.host_copy_is_quick(),
            "no in-place read for sub-byte types"
        );

        // Whole-byte types: the same bytes as to_host.
        let x = client
            .buffer_from_slice(&[1f32, -2.5, 3.0], &[3], &dev)
            .unwrap();
        assert_eq!(x.host_array_size(), x.host_size());
        let mut a = [0u8; 12];
        x.to_host_array(&mut a).unwrap();
        assert_eq!(f32s(&a), [1.0, -2.5, 3.0]);
    });
}

#[test]
fn quick_host_copies_are_small_ready_and_read_in_place() {
    for_each_plugin(|_, client| {
        let dev = client.default_device().unwrap();
        let exe = compile(client, &mul_add());
        let x = client.buffer_from_slice(&[1f32; 8], &[8], &dev).unwrap();
        let out = exe.execute(&[&x, &x]).unwrap();
        out[0].block_until_ready().unwrap();
        assert!(out[0].host_copy_is_quick());
        let n = rpjrt::QUICK_COPY_BYTES / 4 + 1;
        let big = client
            .buffer_from_slice(&vec![0f32; n], &[n as i64], &dev)
            .unwrap();
        big.block_until_ready().unwrap();
        assert!(!big.host_copy_is_quick(), "above QUICK_COPY_BYTES");
        out[0].delete().unwrap();
        assert!(!out[0].host_copy_is_quick(), "deleted");
    });
}
