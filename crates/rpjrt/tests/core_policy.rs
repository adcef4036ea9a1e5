//! Policy that lives in the core so every front end shares it: compile shorthands, target
//! resolution, the export pin, cheap buffer clones, waits with a timeout.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{compile_with, expect_err, for_each_plugin, is_old, mul_add};
use rpjrt::{CompileOptions, DeviceChoice, MemoryChoice};

#[test]
fn compile_shorthands_check_and_fill_in() {
    let o = CompileOptions::for_mesh(2, 1).unwrap();
    assert_eq!((o.num_replicas, o.num_partitions), (2, 1));
    assert!(!o.use_spmd_partitioning);
    assert!(
        CompileOptions::for_mesh(1, 2)
            .unwrap()
            .use_spmd_partitioning
    );
    expect_err(
        CompileOptions::for_mesh(0, 1),
        &["at least 1 and at most 4294967295", "got 0 and 1"],
    );
    // A count too large is told the upper bound too, not only "at least 1".
    expect_err(
        CompileOptions::for_mesh(1, 1 << 40),
        &["at most 4294967295", "got 1 and 1099511627776"],
    );
    let pinned = CompileOptions::default().on_device(3).unwrap();
    assert_eq!(pinned.device_assignment, Some(vec![vec![3]]));
    expect_err(pinned.on_device(1), &["either device or device_assignment"]);
    expect_err(
        CompileOptions::for_mesh(2, 1).unwrap().on_device(0),
        &["single-device programs"],
    );
}

#[test]
fn programs_are_named_by_format() {
    assert_eq!(
        rpjrt::Program::with_format("mlir", "x").unwrap(),
        rpjrt::Program::mlir("x")
    );
    assert_eq!(
        rpjrt::Program::with_format("hlo", vec![1u8]).unwrap(),
        rpjrt::Program::hlo(vec![1u8])
    );
    expect_err(
        rpjrt::Program::with_format("onnx", "x"),
        &["format must be \"mlir\" or \"hlo\", not \"onnx\""],
    );
}

#[test]
fn on_device_compiles_for_that_device() {
    for_each_plugin(|_, c| {
        let dev = c.addressable_devices().unwrap()[1].clone();
        let opts = CompileOptions::default()
            .on_device(i64::from(dev.id()))
            .unwrap();
        let exe = compile_with(c, &mul_add(), &opts);
        assert_eq!(exe.addressable_devices().unwrap(), vec![dev.clone()]);
        assert_eq!(exe.default_device().unwrap(), dev);
        // A portable executable has no device of its own: the client's default.
        let portable = CompileOptions {
            portable: true,
            ..Default::default()
        };
        let exe = compile_with(c, &mul_add(), &portable);
        assert_eq!(exe.default_device().unwrap(), c.default_device().unwrap());
    });
}

#[test]
fn targets_resolve_in_the_core() {
    for_each_plugin(|_, c| {
        let devs = c.addressable_devices().unwrap();
        assert_eq!(c.resolve_device(&DeviceChoice::Default).unwrap(), devs[0]);
        assert_eq!(c.resolve_device(&DeviceChoice::Index(2)).unwrap(), devs[2]);
        let d1 = DeviceChoice::Device(devs[1].clone());
        assert_eq!(c.resolve_device(&d1).unwrap(), devs[1]);
        expect_err(
            c.resolve_device(&DeviceChoice::Index(99)),
            &["device index 99 is out of range", "4 addressable devices"],
        );
        expect_err(
            c.resolve_device(&DeviceChoice::Index(-1)),
            &["out of range"],
        );
        // A memory named alone picks its device.
        let pinned = devs[2].memory_by_kind("pinned_host").unwrap();
        let (d, m) = c
            .resolve_target(
                &DeviceChoice::Default,
                &MemoryChoice::Memory(pinned.clone()),
            )
            .unwrap();
        assert!(pinned.addressable_by_devices().unwrap().contains(&d));
        assert_eq!(m, Some(pinned));
        // A kind is looked up on the chosen device.
        let kind = MemoryChoice::Kind("pinned_host".into());
        let (d, m) = c.resolve_target(&d1, &kind).unwrap();
        assert_eq!(d, devs[1]);
        assert_eq!(m.unwrap().kind(), "pinned_host");
        expect_err(
            c.resolve_target(&d1, &MemoryChoice::Kind("nope".into())),
            &["no memory of kind \"nope\""],
        );
        let (_, none) = c
            .resolve_target(&DeviceChoice::Default, &MemoryChoice::Default)
            .unwrap();
        assert!(none.is_none());
    });
}

#[test]
fn buffers_are_cheap_clones_and_delete_is_idempotent() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let x = c.buffer_from_slice(&[1.0f32, 2.0], &[2], &d).unwrap();
        let y = x.clone();
        assert_eq!(y.to_vec_of::<f32>().unwrap(), vec![1.0, 2.0]);
        y.delete().unwrap();
        assert!(x.is_deleted(), "clones share one device buffer");
        x.delete().unwrap();
        expect_err(x.to_vec(), &["deleted or donated"]);
    });
}

#[test]
fn an_external_reference_pins_the_buffer() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let x = Arc::new(c.buffer_from_slice(&[7u8; 8], &[8], &d).unwrap());
        let r = x.external_reference().unwrap();
        assert_ne!(r.data_ptr(), 0);
        expect_err(x.delete(), &["cannot be deleted", "external reference"]);
        drop(r);
        x.delete().unwrap();
        expect_err(x.external_reference(), &["deleted"]);
    });
}

#[test]
fn wait_timeout_reports_completion() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let x = c.buffer_from_slice(&[1.0f32; 8], &[8], &d).unwrap();
        let ev = x.ready_event().unwrap();
        assert!(ev.wait_timeout(Duration::from_secs(60)).unwrap());
        // Again: the state is remembered.
        assert!(ev.wait_timeout(Duration::ZERO).unwrap());
        assert!(ev.wait_timeout(Duration::MAX).unwrap());
    });
}

#[test]
fn pred_reads_any_nonzero_byte_as_true() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let x = c
            .buffer_from_host(
                &[0, 1, 2, 255],
                rpjrt::ElementType::Pred,
                &[4],
                None,
                &d,
                None,
            )
            .unwrap();
        assert_eq!(
            x.to_vec_of::<bool>().unwrap(),
            vec![false, true, true, true]
        );
    });
}

#[test]
fn waits_poll_then_sleep_and_still_report_errors() {
    let before = rpjrt::wait_spin();
    assert!(before <= Duration::from_secs(1));
    for spin in [
        Duration::ZERO,
        Duration::from_micros(50),
        Duration::from_millis(5),
    ] {
        rpjrt::set_wait_spin(spin);
        assert_eq!(rpjrt::wait_spin(), spin);
        for_each_plugin(|p, c| {
            let d = c.default_device().unwrap();
            let exe = compile_with(c, &mul_add(), &Default::default());
            let x = c.buffer_from_slice(&[2.0f32; 8], &[8], &d).unwrap();
            let out = exe.execute(&[&x, &x]).unwrap();
            out[0].block_until_ready().unwrap();
            assert_eq!(out[0].to_vec_of::<f32>().unwrap(), vec![5.0f32; 8]);
            if !is_old(p) {
                // A failed producer is reported whether the wait polled or slept.
                let e = c
                    .create_error_buffer(
                        rpjrt::Code::Internal,
                        "producer failed",
                        rpjrt::ElementType::F32,
                        &[2],
                        &d,
                        None,
                    )
                    .unwrap();
                expect_err(e.block_until_ready(), &["producer failed"]);
                expect_err(e.ready_event().unwrap().wait(), &["producer failed"]);
                expect_err(
                    e.ready_event()
                        .unwrap()
                        .wait_timeout(Duration::from_secs(60)),
                    &["producer failed"],
                );
            }
        });
    }
    rpjrt::set_wait_spin(Duration::MAX);
    assert_eq!(rpjrt::wait_spin(), rpjrt::MAX_WAIT_SPIN);
    rpjrt::set_wait_spin(before);
}

/// The one writer of whole files takes every name the file system does: a name near the
/// 255-byte limit made its temporary name too long ("File name too long", naming the
/// temporary), so `compile -o`, `run --out`, `trace view -o` and checkpoints failed.
#[test]
fn whole_file_writes_take_names_up_to_the_limit() {
    use std::io::Write as _;
    let dir = std::env::temp_dir().join(format!("rpjrt-longname-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for len in [1, 200, 243, 255] {
        let path = dir.join("n".repeat(len));
        rpjrt::write_regular_file(&path, |f| f.write_all(b"data")).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"data", "{len}");
        // Replacing it goes through a temporary again.
        rpjrt::write_regular_file(&path, |f| f.write_all(b"again")).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"again", "{len}");
    }
    // Nothing but the files themselves is left.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 4);
    let _ = std::fs::remove_dir_all(&dir);
}
