//! Error paths against the two real CPU plugins (and against files that are not plugins).
//!
//! Every misuse here must come back as an `Err` with a message that says what went wrong;
//! none may crash the process. Plugin-facing tests run on both plugins.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::*;
use rpjrt::{
    ApiVersion, Client, ClientOptions, Code, CompileOptions, ElementType, Error, HostBytes, Plugin,
    Program,
};

/// A fresh path under the temporary directory, unique to this process and `name`.
fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rpjrt-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

// ----------------------------------------------------------------------------- loading

#[test]
fn missing_plugin_path() {
    let path = "/nonexistent/dir/libpjrt_nope.so";
    let e = expect_err(
        Plugin::load(path),
        &[
            "cannot load PJRT plugin /nonexistent/dir/libpjrt_nope.so",
            "the file cannot be read",
        ],
    );
    match &e {
        Error::PluginLoad { path: p, .. } => assert_eq!(p, &PathBuf::from(path)),
        other => panic!("expected PluginLoad, got {other:?}"),
    }
    assert_eq!(e.code(), Code::NotFound);
    assert_eq!(e.entry(), None);
    expect_err(Client::from_path(path), &["the file cannot be read"]);
}

#[test]
fn directory_is_not_a_plugin() {
    let dir = std::env::temp_dir();
    expect_err(
        Plugin::load(&dir),
        &["it is a directory, not a shared library"],
    );
}

#[test]
fn text_file_is_not_a_shared_library() {
    let path = temp_path("not_a_library.so");
    std::fs::write(&path, "this is a text file, not an ELF shared object\n").unwrap();
    let e = expect_err(
        Plugin::load(&path),
        &[
            "cannot load PJRT plugin",
            "it is not a loadable shared library",
        ],
    );
    assert!(matches!(e, Error::PluginLoad { .. }), "{e:?}");
    // An empty file as well.
    let empty = temp_path("empty.so");
    std::fs::write(&empty, b"").unwrap();
    expect_err(
        Plugin::load(&empty),
        &["it is not a loadable shared library"],
    );
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[test]
fn shared_library_without_get_pjrt_api() {
    // libm is on every glibc system; it is a real shared library with no PJRT entry point.
    let candidates = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/aarch64-linux-gnu/libm.so.6",
        "/usr/lib/aarch64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6",
        "/usr/lib64/libm.so.6",
        "/usr/lib/libm.so.6",
        "/lib/libm.so.6",
    ];
    let libm = candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("no libm.so.6 in any of {candidates:?}"));
    let e = expect_err(
        Plugin::load(&libm),
        &["does not export GetPjrtApi, so it is not a PJRT plugin"],
    );
    assert!(matches!(e, Error::PluginLoad { .. }), "{e:?}");
    // Asking again gives the same answer (a failed load is not remembered as a plugin).
    expect_err(Plugin::load(&libm), &["does not export GetPjrtApi"]);
}

// ---------------------------------------------------------------------- versions/entries

#[test]
fn entries_absent_on_the_old_plugin() {
    for_each_plugin(|p, c| {
        // PJRT_Executable_ParameterMemoryKinds arrived after 0.81.
        assert_eq!(
            p.has_entry("PJRT_Executable_ParameterMemoryKinds"),
            !is_old(p)
        );
        // No rpjrt method calls a post-0.81 entry yet; the element types added after 0.81
        // are the version-gated request rpjrt has: refused up front, as Unsupported.
        let d = c.default_device().unwrap();
        let r = c.buffer_from_host(&[0u8; 1], ElementType::U1, &[8], None, &d, None);
        if is_old(p) {
            let e = expect_err(
                r,
                &["element type uint1 is not available: it needs PJRT 0.94, and this plugin implements PJRT 0.81"],
            );
            assert!(
                matches!(
                    e,
                    Error::Unsupported {
                        needs: ApiVersion {
                            major: 0,
                            minor: 94
                        },
                        plugin: ApiVersion {
                            major: 0,
                            minor: 81
                        },
                        missing_slot: false,
                        ..
                    }
                ),
                "{e:?}"
            );
            assert_eq!(e.code(), Code::Unimplemented);
        } else {
            assert_eq!(r.unwrap().to_vec().unwrap(), [0]);
        }
    });
}

// ------------------------------------------------------------------------------ compile

#[test]
fn invalid_compile_options() {
    for_each_plugin(|_, c| {
        let program = Program::mlir(mul_add());
        let cases: Vec<(CompileOptions, &str)> = vec![
            (
                CompileOptions {
                    num_replicas: 0,
                    ..Default::default()
                },
                "num_replicas must be at least 1",
            ),
            (
                CompileOptions {
                    num_partitions: 0,
                    ..Default::default()
                },
                "num_partitions must be at least 1",
            ),
            (
                CompileOptions {
                    num_replicas: 2,
                    device_assignment: Some(vec![vec![1], vec![1]]),
                    ..Default::default()
                },
                "device_assignment names device 1 more than once",
            ),
            (
                CompileOptions {
                    device_assignment: Some(vec![vec![7]]),
                    ..Default::default()
                },
                "device_assignment names device 7, which this client does not have",
            ),
            (
                CompileOptions {
                    num_replicas: 2,
                    device_assignment: Some(vec![vec![0]]),
                    ..Default::default()
                },
                "device_assignment has 1 rows but num_replicas is 2",
            ),
            (
                CompileOptions {
                    num_partitions: 2,
                    device_assignment: Some(vec![vec![0]]),
                    ..Default::default()
                },
                "device_assignment row 0 has 1 entries but num_partitions is 2",
            ),
            (
                CompileOptions {
                    num_replicas: 5,
                    ..Default::default()
                },
                "5 replicas x 1 partitions need 5 devices, but the client has 4",
            ),
            (
                CompileOptions {
                    device_ordinal: 9,
                    ..Default::default()
                },
                "device_ordinal 9 is not a device of this client",
            ),
        ];
        for (opts, needle) in cases {
            let e = expect_err(c.compile(&program, &opts).map(|_| ()), &[needle]);
            assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
            assert_eq!(e.code(), Code::InvalidArgument);
        }
        // The client is still fine afterwards.
        compile(c, &mul_add());
    });
}

#[test]
fn malformed_programs_carry_the_compiler_message() {
    for_each_plugin(|p, c| {
        let opts = CompileOptions::default();
        // Does not parse.
        let e = expect_err(
            c.compile(&Program::mlir("func.func @main( garbage"), &opts)
                .map(|_| ()),
            &[
                "PJRT_Client_Compile failed",
                "error: expected non-function type",
            ],
        );
        match &e {
            Error::Pjrt { entry, message, .. } => {
                assert_eq!(*entry, "PJRT_Client_Compile");
                let v = p.stablehlo_current_version().unwrap();
                let parser = format!("StableHLO v{}.{}.{}", v[0], v[1], v[2]);
                assert!(message.contains(&parser), "{message}");
            }
            other => panic!("expected a Pjrt error, got {other:?}"),
        }
        // Parses, but does not verify: the operand types disagree.
        let bad_types =
            "func.func public @main(%a: tensor<4xf32>, %b: tensor<4xi32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}";
        let e = expect_err(
            c.compile(&Program::mlir(bad_types), &opts).map(|_| ()),
            &["PJRT_Client_Compile failed", "error:"],
        );
        assert!(matches!(e, Error::Pjrt { .. }), "{e:?}");
        // An operation nobody knows.
        expect_err(
            c.compile(
                &Program::mlir(
                    "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.frobnicate %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}",
                ),
                &opts,
            )
            .map(|_| ()),
            &["PJRT_Client_Compile failed", "stablehlo.frobnicate"],
        );
        // Bytes that are not an HloModuleProto.
        let e = expect_err(
            c.compile(&Program::hlo(vec![0xff, 0x01, 0x02, 0x03]), &opts)
                .map(|_| ()),
            &["failed to deserialize HloModuleProto"],
        );
        assert_eq!(e.code(), Code::InvalidArgument);
        // Text given as HLO, and the HLO fixture given as MLIR.
        expect_err(
            c.compile(&Program::hlo(mul_add()), &opts).map(|_| ()),
            &["PJRT_Client_Compile failed"],
        );
        expect_err(
            c.compile(&Program::mlir(fixture("mul_add.hlo.pb")), &opts)
                .map(|_| ()),
            &["PJRT_Client_Compile failed"],
        );
        // Nothing at all.
        expect_err(
            c.compile(&Program::mlir(Vec::new()), &opts).map(|_| ()),
            &["the program is empty"],
        );
        expect_err(
            c.compile(&Program::hlo(Vec::new()), &opts).map(|_| ()),
            &["the program is empty"],
        );
    });
}

// ------------------------------------------------------------------------------ execute

#[test]
fn wrong_argument_count() {
    for_each_plugin(|_, c| {
        let (exe, _, x) = mul_add_with_input(c, &[1.0; 8]);
        let e = expect_err(
            exe.execute(&[&x]),
            &["main takes 2 argument(s), but 1 were given"],
        );
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        expect_err(
            exe.execute(&[&x, &x, &x]),
            &["main takes 2 argument(s), but 3 were given"],
        );
        expect_err(exe.execute(&[]), &["but 0 were given"]);
        // Argument lists must match the executable's devices.
        expect_err(
            exe.execute_sharded(&[vec![&x, &x], vec![&x, &x]]),
            &["2 argument list(s) given, but the executable runs on 1 device(s)"],
        );
        let two = compile_with(c, &mul_add(), &replicas(2));
        expect_err(
            two.execute_sharded(&[vec![&x, &x]]),
            &["1 argument list(s) given, but the executable runs on 2 device(s)"],
        );
        expect_err(
            two.execute_sharded(&[vec![&x, &x], vec![&x]]),
            &["argument list 1 has 1 buffers, list 0 has 2"],
        );
    });
}

#[test]
fn wrong_argument_dtype_or_shape() {
    for_each_plugin(|_, c| {
        let (exe, d, x) = mul_add_with_input(c, &[1.0; 8]);
        // Same byte size, other type: the plugin would take it; rpjrt refuses it.
        let i = c.buffer_from_slice(&[1i32; 8], &[8], &d).unwrap();
        let e = expect_err(
            exe.execute(&[&x, &i]),
            &["argument 1 is int32[8], but main expects float32[8]"],
        );
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        let f64s = c.buffer_from_slice(&[1f64; 8], &[8], &d).unwrap();
        expect_err(
            exe.execute(&[&f64s, &x]),
            &["argument 0 is float64[8], but main expects float32[8]"],
        );
        // Same element count, other shape.
        let m = c.buffer_from_slice(&[1f32; 8], &[2, 4], &d).unwrap();
        expect_err(
            exe.execute(&[&x, &m]),
            &["argument 1 is float32[2, 4], but main expects float32[8]"],
        );
        let short = c.buffer_from_slice(&[1f32; 4], &[4], &d).unwrap();
        expect_err(
            exe.execute(&[&short, &x]),
            &["argument 0 is float32[4], but main expects float32[8]"],
        );
        // In a replicated program the message names the device list.
        let two = compile_with(c, &mul_add(), &replicas(2));
        let devs = two.addressable_devices().unwrap();
        let a = c.buffer_from_slice(&[1f32; 8], &[8], &devs[0]).unwrap();
        let b = c.buffer_from_slice(&[1i32; 8], &[8], &devs[1]).unwrap();
        expect_err(
            two.execute_sharded(&[vec![&a, &a], vec![&b, &b]]),
            &["argument 0 of device list 1 is int32[8]"],
        );
        // An argument on the wrong device is the plugin's to refuse; the refusal is
        // explained naming the argument and both devices.
        let elsewhere = c
            .buffer_from_slice(&[1f32; 8], &[8], &c.lookup_device(3).unwrap())
            .unwrap();
        let e = expect_err(
            exe.execute(&[&x, &elsewhere]),
            &[
                "argument 1 is on device 3",
                "runs on device 0",
                "copy it there first",
            ],
        );
        assert_eq!(e.code(), Code::InvalidArgument);
    });
}

#[test]
fn arguments_from_another_client_are_refused() {
    for_each_plugin(|p, c| {
        let other = Client::new(p, &ClientOptions::new()).unwrap();
        let exe = compile(c, &mul_add());
        let d = c.default_device().unwrap();
        let od = other.default_device().unwrap();
        let x = c.buffer_from_slice(&[1f32; 8], &[8], &d).unwrap();
        let y = other.buffer_from_slice(&[1f32; 8], &[8], &od).unwrap();
        expect_err(
            exe.execute(&[&x, &y]),
            &["argument 1 belongs to another client"],
        );
        expect_err(
            c.buffer_from_slice(&[1f32; 8], &[8], &od).map(|_| ()),
            &["belongs to another client"],
        );
        expect_err(
            x.copy_to_device(&od).map(|_| ()),
            &["belongs to another client"],
        );
        expect_err(
            x.copy_to_memory(&od.default_memory().unwrap()).map(|_| ()),
            &["belongs to another client"],
        );
        let portable = compile_with(
            c,
            &mul_add(),
            &CompileOptions {
                portable: true,
                ..Default::default()
            },
        );
        expect_err(
            portable.execute_on(&od, &[&x, &x]),
            &["belongs to another client"],
        );
    });
}

#[test]
fn host_data_shorter_than_its_shape() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let f = ElementType::F32;
        let e = expect_err(
            c.buffer_from_host(&[0u8; 31], f, &[8], None, &d, None),
            &["host data has 31 bytes, but float32[8] needs 32"],
        );
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        expect_err(
            c.buffer_from_slice(&[1f32; 7], &[8], &d),
            &["7 elements for dims [8], which hold 8"],
        );
        expect_err(
            c.buffer_from_host(&[], f, &[], None, &d, None),
            &["host data has 0 bytes, but float32[] needs 4"],
        );
        // Packed sub-byte data: 5 int4 need 3 bytes.
        expect_err(
            c.buffer_from_host(&[0u8; 2], ElementType::S4, &[5], None, &d, None),
            &["host data has 2 bytes, but int4[5] needs 3"],
        );
        let owned: Arc<dyn HostBytes> = Arc::new(vec![0u8; 8]);
        expect_err(
            c.buffer_from_host_owned(owned, f, &[4], None, &d, None),
            &["host data has 8 bytes, but float32[4] needs 16"],
        );
        // Strides that reach past the data.
        expect_err(
            c.buffer_from_host(&[0u8; 23], f, &[2, 3], Some(&[4, 8]), &d, None),
            &["byte_strides [4, 8] for float32[2, 3] reach byte 24, but the host data has 23"],
        );
        expect_err(
            c.buffer_from_host(&[0u8; 64], f, &[2, 3], Some(&[4]), &d, None),
            &["byte_strides has 1 entries for 2 dimensions"],
        );
        expect_err(
            c.buffer_from_host(&[0u8; 64], f, &[2, 3], Some(&[-4, 8]), &d, None),
            &["negative byte strides are not supported"],
        );
        expect_err(
            c.buffer_from_host(
                &[0u8; 64],
                ElementType::S4,
                &[2, 3],
                Some(&[1, 2]),
                &d,
                None,
            ),
            &["byte strides are not supported for the packed type int4"],
        );
        // Shapes that cannot exist.
        expect_err(
            c.buffer_from_host(&[0u8; 64], f, &[2, -3], None, &d, None),
            &["dimension 1 is negative (-3)"],
        );
        expect_err(
            c.buffer_from_host(&[0u8; 64], f, &[i64::MAX, i64::MAX], None, &d, None),
            &["has too many elements"],
        );
        expect_err(
            c.buffer_from_host(&[0u8; 64], f, &[i64::MAX / 2], None, &d, None),
            &["overflow"],
        );
        expect_err(
            c.buffer_from_host(&[0u8; 8], ElementType::Token, &[], None, &d, None),
            &["a token has no host data"],
        );
    });
}

#[test]
fn unknown_element_type_code_and_name() {
    let e = expect_err(
        ElementType::from_code(99),
        &["unknown PJRT element type code 99 (known codes are 1..=33)"],
    );
    assert_eq!(e.code(), Code::InvalidArgument);
    expect_err(
        ElementType::from_code(0),
        &["unknown PJRT element type code 0"],
    );
    expect_err(ElementType::from_code(-1), &["code -1"]);
    expect_err(
        ElementType::from_name("float7"),
        &["unknown element type name \"float7\""],
    );
    for &t in ElementType::ALL {
        assert_eq!(ElementType::from_code(t.code()).unwrap(), t);
    }
}

// ------------------------------------------------------------------------------ closing

#[test]
fn use_after_close_is_an_error() {
    for_each_plugin(|_, c| {
        let (exe, d, x) = mul_add_with_input(c, &[1.0; 8]);
        let m = d.default_memory().unwrap();
        let (out, ev) = run_with_event(&exe, &x);
        let ready = out.ready_event().unwrap();
        let other_handle = c.clone();

        c.close().unwrap();
        assert!(c.is_closed());
        assert!(other_handle.is_closed(), "clones share the closed state");
        c.close().unwrap();

        let closed = |what: &str| match what {
            "client" => "the client was closed and cannot be used".to_string(),
            _ => format!("{what} cannot be used: its client was closed"),
        };
        let e = expect_err(c.devices(), &[&closed("client")]);
        assert!(matches!(e, Error::Closed("client")), "{e:?}");
        assert_eq!(e.code(), Code::FailedPrecondition);
        expect_err(c.platform_name(), &[&closed("client")]);
        expect_err(c.lookup_device(0), &[&closed("client")]);
        expect_err(c.default_device(), &[&closed("client")]);
        expect_err(c.addressable_memories(), &[&closed("client")]);
        expect_err(
            c.compile(&Program::mlir(mul_add()), &CompileOptions::default())
                .map(|_| ()),
            &[&closed("client")],
        );
        expect_err(c.buffer_from_slice(&[1f32], &[1], &d), &[&closed("client")]);

        expect_err(x.to_vec(), &[&closed("buffer")]);
        expect_err(out.to_vec(), &[&closed("buffer")]);
        expect_err(x.device(), &[&closed("buffer")]);
        expect_err(x.delete(), &[&closed("buffer")]);
        expect_err(x.block_until_ready(), &[&closed("buffer")]);
        expect_err(x.copy_to_device(&d).map(|_| ()), &[&closed("buffer")]);
        let e = expect_err(exe.execute(&[&x, &x]), &[&closed("executable")]);
        assert!(matches!(e, Error::Closed("executable")), "{e:?}");
        expect_err(exe.addressable_devices(), &[&closed("executable")]);
        expect_err(exe.delete(), &[&closed("executable")]);
        expect_err(ev.wait(), &[&closed("event")]);
        expect_err(ev.is_ready(), &[&closed("event")]);
        assert!(ev.error().is_none());
        assert_eq!(format!("{ev:?}"), "Event(closed)");
        expect_err(block_on(ready), &[&closed("event")]);
        expect_err(d.default_memory(), &[&closed("device")]);
        expect_err(d.addressable_memories(), &[&closed("device")]);
        expect_err(m.addressable_by_devices(), &[&closed("memory")]);
        // Facts read at creation stay readable.
        assert_eq!(d.id(), 0);
        assert_eq!(m.kind(), "device");
        assert_eq!(exe.name(), "main");
        assert!(format!("{c:?}").contains("closed"));
    });
}

#[test]
fn objects_outlive_the_client_value() {
    for_each_plugin(|p, _| {
        let c = Client::new(p, &ClientOptions::new()).unwrap();
        let exe = compile(&c, &mul_add());
        let d = c.lookup_device(1).unwrap();
        let x = c
            .buffer_from_slice(&[2f32; 8], &[8], &c.default_device().unwrap())
            .unwrap();
        let ev = x.ready_event().unwrap();
        drop(c);
        // Everything made from the client keeps it alive.
        assert_eq!(x.to_vec_of::<f32>().unwrap(), vec![2.0; 8]);
        ev.wait().unwrap();
        let out = exe.execute(&[&x, &x]).unwrap();
        assert_eq!(out[0].to_vec_of::<f32>().unwrap(), vec![5.0; 8]);
        let moved = out[0].copy_to_device(&d).unwrap();
        assert_eq!(moved.device().unwrap(), d);
        assert_eq!(d.default_memory().unwrap().kind(), "device");
        drop(exe);
        drop(out);
        assert_eq!(moved.to_vec_of::<f32>().unwrap(), vec![5.0; 8]);
        // The last object to go, on another thread, takes the C client with it.
        std::thread::spawn(move || {
            assert_eq!(moved.to_vec_of::<f32>().unwrap(), vec![5.0; 8]);
            drop((moved, x, ev, d));
        })
        .join()
        .unwrap();
    });
}

#[test]
fn delete_twice() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let x = c.buffer_from_slice(&[1u8; 4], &[4], &d).unwrap();
        x.delete().unwrap();
        // A second delete does nothing (as in JAX), for buffers and executables alike.
        x.delete().unwrap();
        let e = expect_err(x.to_vec(), &["was deleted or donated"]);
        assert!(matches!(e, Error::Deleted(_)), "{e:?}");
        let exe = compile(c, &mul_add());
        assert!(!exe.is_deleted());
        exe.delete().unwrap();
        exe.delete().unwrap();
        assert!(exe.is_deleted());
        assert!(format!("{exe:?}").ends_with(", deleted)"), "{exe:?}");
        // A clone of the executable shares its state: deleted for it too.
        let clone = exe.clone();
        clone.delete().unwrap();
        let e = expect_err(clone.execute(&[&x, &x]), &["executable was deleted"]);
        assert!(matches!(e, Error::Deleted(_)), "{e:?}");
    });
}

/// Builds a client with an executable, input and output buffers, an event, a device and a
/// memory, and drops them in the order `order` gives (indices into that list).
fn build_and_drop(p: &Plugin, order: &[usize], on_thread: bool) {
    let c = Client::new(p, &ClientOptions::new()).unwrap();
    let (exe, d, x) = mul_add_with_input(&c, &[1.0; 8]);
    let m = d.default_memory().unwrap();
    let (out, ev) = run_with_event(&exe, &x);
    let mut items: Vec<Option<Box<dyn Send>>> = vec![
        Some(Box::new(c)),
        Some(Box::new(exe)),
        Some(Box::new(x)),
        Some(Box::new(out)),
        Some(Box::new(ev)),
        Some(Box::new(d)),
        Some(Box::new(m)),
    ];
    assert_eq!(order.len(), items.len());
    let mut drop_all = move || {
        for &i in order {
            drop(items[i].take().expect("each item dropped once"));
        }
    };
    if on_thread {
        std::thread::scope(|s| {
            s.spawn(drop_all);
        });
    } else {
        drop_all();
    }
}

#[test]
fn drop_in_every_order_without_crash() {
    // Every order of client, executable and input buffer; the rest interleaved.
    let orders: [[usize; 7]; 8] = [
        [0, 1, 2, 3, 4, 5, 6],
        [0, 2, 1, 4, 3, 6, 5],
        [1, 0, 2, 5, 6, 3, 4],
        [1, 2, 0, 3, 5, 4, 6],
        [2, 0, 1, 6, 4, 5, 3],
        [2, 1, 0, 4, 6, 3, 5],
        [6, 5, 4, 3, 2, 1, 0],
        [3, 4, 5, 6, 0, 1, 2],
    ];
    for_each_plugin_only(|p| {
        for (n, order) in orders.iter().enumerate() {
            build_and_drop(p, order, n % 2 == 1);
        }
        // Closing first, then dropping, is fine too.
        let c = Client::new(p, &ClientOptions::new()).unwrap();
        let exe = compile(&c, &mul_add());
        let x = c
            .buffer_from_slice(&[1f32; 8], &[8], &c.default_device().unwrap())
            .unwrap();
        let out = exe.execute(&[&x, &x]).unwrap();
        c.close().unwrap();
        drop(c);
        drop(x);
        drop(exe);
        drop(out);
        // And the plugin still makes working clients afterwards.
        let c = Client::new(p, &ClientOptions::new()).unwrap();
        assert_eq!(c.devices().unwrap().len(), 4);
    });
}
