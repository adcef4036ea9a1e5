//! Prepared calls (`Executable::prepare`, `PreparedCall`) on both CPU plugins: the same
//! results as a plain call, every check at prepare time, a clear error (never a dangling
//! pointer) once a bound buffer is deleted or donated, and many threads on one call.

mod common;

use common::*;
use rpjrt::{Buffer, Client, CompileOptions, Error, Executable, ExecuteOptions, PreparedCall};

fn mul_add_expected(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.iter().zip(b).map(|(x, y)| x * y + 1.0).collect()
}

fn inputs(r: usize) -> Vec<f32> {
    (0..8).map(|i| (i + 10 * r) as f32).collect()
}

/// mul_add over two replicas on devices 1 and 3, and one argument per device.
fn two_devices(c: &Client) -> (Executable, Vec<Buffer>) {
    let opts = CompileOptions {
        num_replicas: 2,
        device_assignment: Some(vec![vec![1], vec![3]]),
        ..Default::default()
    };
    let exe = compile_with(c, &mul_add(), &opts);
    let bufs = exe
        .addressable_devices()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(r, d)| c.buffer_from_slice(&inputs(r), &[8], d).unwrap())
        .collect();
    (exe, bufs)
}

#[test]
fn prepared_call_gives_what_execute_sharded_gives() {
    for_each_plugin(|_, c| {
        let (exe, b) = two_devices(c);
        let lists = vec![vec![&b[0], &b[0]], vec![&b[1], &b[1]]];
        let plain = exe.execute_sharded(&lists).unwrap();
        let call = exe.prepare(&lists, &[]).unwrap();
        assert_eq!((call.num_devices(), call.num_args()), (2, 2));
        let devices = exe.addressable_devices().unwrap();
        for round in 0..3 {
            let outs = if round == 1 {
                let o = call.call().unwrap();
                o.block_until_ready().unwrap();
                o
            } else {
                call.call_and_wait().unwrap()
            };
            assert_eq!((outs.num_devices(), outs.num_outputs()), (2, 1));
            for d in 0..2 {
                let got = &outs.device(d)[0];
                // Waited once for the whole execution: the outputs know they are ready.
                assert!(got.is_ready().unwrap());
                assert_eq!(got.device().unwrap(), devices[d]);
                assert_eq!(
                    got.to_vec_of::<f32>().unwrap(),
                    plain[d][0].to_vec_of::<f32>().unwrap()
                );
                assert_eq!(
                    got.to_vec_of::<f32>().unwrap(),
                    mul_add_expected(&inputs(d), &inputs(d))
                );
            }
            let shards = outs.output(0).unwrap();
            assert_eq!(shards.len(), 2);
            assert!(outs.output(1).is_none());
            assert!(outs.device(2).is_empty());
            // Indexes whose products wrap around (2 * 2^63 = 0) are out of range too.
            for huge in [1usize << 63, usize::MAX, (usize::MAX / 2) + 1] {
                assert!(outs.device(huge).is_empty(), "device({huge})");
                assert!(call.argument(huge, 0).is_none(), "argument({huge}, 0)");
                assert!(call.argument(0, huge).is_none(), "argument(0, {huge})");
            }
            let lists = outs.into_lists();
            assert_eq!(lists.len(), 2);
            assert_eq!(lists[1].len(), 1);
        }
    });
}

#[test]
fn prepared_single_device_call_matches_execute() {
    for_each_plugin(|_, c| {
        let exe = compile(c, &mul_add());
        let d = exe.default_device().unwrap();
        let x = c.buffer_from_slice(&inputs(2), &[8], &d).unwrap();
        let plain = exe.execute(&[&x, &x]).unwrap();
        let call = exe.prepare(&[vec![&x, &x]], &[]).unwrap();
        let outs = call.call_and_wait().unwrap();
        assert_eq!(outs.buffers().len(), 1);
        assert_eq!(
            outs.buffers()[0].to_vec_of::<f32>().unwrap(),
            plain[0].to_vec_of::<f32>().unwrap()
        );
        // The bound arguments are the caller's buffers, not copies.
        let bound = call.argument(0, 1).unwrap();
        bound.delete().unwrap();
        assert!(x.is_deleted());
        assert!(call.argument(0, 2).is_none());
        assert!(call.argument(1, 0).is_none());
    });
}

#[test]
fn prepare_makes_every_check_of_a_call() {
    for_each_plugin(|_, c| {
        let (exe, b) = two_devices(c);
        // Wrong number of device lists.
        expect_err(
            exe.prepare(&[vec![&b[0], &b[0]]], &[]),
            &["1 argument list(s) given", "2 device(s)"],
        );
        // Lists swapped: each argument is on the other list's device.
        expect_err(
            exe.prepare(&[vec![&b[1], &b[1]], vec![&b[0], &b[0]]], &[]),
            &[
                "argument 0 of device list 0 is on device 3",
                "copy it there first",
            ],
        );
        // Wrong argument count and type.
        expect_err(
            exe.prepare(&[vec![&b[0]], vec![&b[1]]], &[]),
            &["takes 2 argument(s), but 1 were given"],
        );
        let d0 = &exe.addressable_devices().unwrap()[0];
        let ints = c.buffer_from_slice(&[1i32; 8], &[8], d0).unwrap();
        expect_err(
            exe.prepare(&[vec![&ints, &b[0]], vec![&b[1], &b[1]]], &[]),
            &[
                "argument 0 of device list 0 is int32[8]",
                "expects float32[8]",
            ],
        );
        // Donation out of range.
        expect_err(
            exe.prepare(&[vec![&b[0], &b[0]], vec![&b[1], &b[1]]], &[2]),
            &["donate index 2 is out of range for 2 arguments"],
        );
        // A deleted buffer is refused at prepare time.
        let gone = c.buffer_from_slice(&inputs(0), &[8], d0).unwrap();
        gone.delete().unwrap();
        let e = expect_err(
            exe.prepare(&[vec![&gone, &b[0]], vec![&b[1], &b[1]]], &[]),
            &["argument 0"],
        );
        assert!(matches!(e, Error::Deleted(_)), "{e:?}");
        // A portable executable has no device list of its own.
        let portable = compile_with(
            c,
            &mul_add(),
            &CompileOptions {
                portable: true,
                ..Default::default()
            },
        );
        expect_err(portable.prepare(&[vec![&b[0], &b[0]]], &[]), &["portable"]);
    });
}

#[test]
fn deleting_a_bound_buffer_makes_the_call_fail_clearly() {
    for_each_plugin(|_, c| {
        let (exe, b) = two_devices(c);
        let call = exe
            .prepare(&[vec![&b[0], &b[0]], vec![&b[1], &b[1]]], &[])
            .unwrap();
        call.call_and_wait().unwrap();
        // The caller drops its own handles: the prepared call keeps the buffers alive.
        let second = b[1].clone();
        drop(b);
        call.call_and_wait().unwrap();
        second.delete().unwrap();
        for _ in 0..2 {
            let e = expect_err(
                call.call(),
                &[
                    "argument 0 of device list 1",
                    "deleted or donated",
                    "prepare it again",
                ],
            );
            assert!(matches!(e, Error::Deleted(_)), "{e:?}");
        }
    });
}

#[test]
fn donating_a_bound_buffer_elsewhere_makes_the_call_fail_clearly() {
    for_each_plugin(|_, c| {
        let exe = compile(c, &mul_add());
        let d = exe.default_device().unwrap();
        let x = c.buffer_from_slice(&inputs(0), &[8], &d).unwrap();
        let y = c.buffer_from_slice(&inputs(1), &[8], &d).unwrap();
        let call = exe.prepare(&[vec![&x, &y]], &[]).unwrap();
        call.call_and_wait().unwrap();
        let opts = ExecuteOptions {
            donate: vec![1],
            ..Default::default()
        };
        let out = exe.execute_with(&[vec![&x, &y]], &opts).unwrap();
        out.outputs[0][0].block_until_ready().unwrap();
        assert!(y.is_deleted());
        let e = expect_err(
            call.call_and_wait(),
            &["argument 1 of device list 0", "deleted or donated"],
        );
        assert!(matches!(e, Error::Deleted(_)), "{e:?}");
    });
}

#[test]
fn a_call_that_donates_its_arguments_runs_once() {
    for_each_plugin(|_, c| {
        let exe = compile(c, &mul_add());
        let d = exe.default_device().unwrap();
        let x = c.buffer_from_slice(&inputs(0), &[8], &d).unwrap();
        let y = c.buffer_from_slice(&inputs(1), &[8], &d).unwrap();
        let call = exe.prepare(&[vec![&x, &y]], &[1]).unwrap();
        let outs = call.call_and_wait().unwrap();
        assert_eq!(
            outs.buffers()[0].to_vec_of::<f32>().unwrap(),
            mul_add_expected(&inputs(0), &inputs(1))
        );
        assert!(y.is_deleted());
        assert!(!x.is_deleted());
        let e = expect_err(
            call.call(),
            &["argument 1 of device list 0", "deleted or donated"],
        );
        assert!(matches!(e, Error::Deleted(_)), "{e:?}");
        // A refused call reserved nothing: the other argument is still usable.
        assert!(!x.is_deleted());
        exe.execute(&[&x, &x]).unwrap()[0]
            .block_until_ready()
            .unwrap();
    });
}

#[test]
fn a_deleted_executable_or_closed_client_refuses_the_call() {
    for_each_plugin(|_, c| {
        let (exe, b) = two_devices(c);
        let call = exe
            .prepare(&[vec![&b[0], &b[0]], vec![&b[1], &b[1]]], &[])
            .unwrap();
        exe.delete().unwrap();
        let e = expect_err(call.call(), &["executable was deleted"]);
        assert!(matches!(e, Error::Deleted(_)), "{e:?}");
    });
    for_each_plugin(|_, c| {
        let (exe, b) = two_devices(c);
        let call = exe
            .prepare(&[vec![&b[0], &b[0]], vec![&b[1], &b[1]]], &[])
            .unwrap();
        let outs = call.call().unwrap();
        c.close().unwrap();
        assert!(call.call().is_err());
        assert!(outs.block_until_ready().is_err());
        // Outputs of a closed client refuse too, rather than touch freed memory.
        assert!(outs.device(0)[0].to_vec_of::<f32>().is_err());
    });
}

#[test]
fn threads_share_one_prepared_call() {
    fn is_send_sync<T: Send + Sync + 'static>() {}
    is_send_sync::<PreparedCall>();
    is_send_sync::<rpjrt::CallOutputs>();
    for_each_plugin(|_, c| {
        let (exe, b) = two_devices(c);
        let call = exe
            .prepare(&[vec![&b[0], &b[0]], vec![&b[1], &b[1]]], &[])
            .unwrap();
        let want: Vec<Vec<f32>> = (0..2)
            .map(|r| mul_add_expected(&inputs(r), &inputs(r)))
            .collect();
        std::thread::scope(|s| {
            for t in 0..4 {
                let (call, want) = (&call, &want);
                s.spawn(move || {
                    for i in 0..25 {
                        let outs = if (t + i) % 2 == 0 {
                            call.call_and_wait().unwrap()
                        } else {
                            call.call().unwrap()
                        };
                        for (d, w) in want.iter().enumerate() {
                            assert_eq!(&outs.device(d)[0].to_vec_of::<f32>().unwrap(), w);
                        }
                    }
                });
            }
        });
    });
}
