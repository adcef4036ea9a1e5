//! Regressions of an outside attack (issue 8) on both real CPU plugins: each of these used
//! to abort the process or skip checks; now each is a clear error before the plugin is
//! called (or the right result).

mod common;

use common::*;
use rpjrt::{Client, ClientOptions, CompileOptions, ElementType, OptionOverride};

const TUPLE_PARAM: &str =
    "func.func public @main(%t: tuple<tensor<2xf32>, tensor<2xf32>>) -> tensor<2xf32> {
  %a = stablehlo.get_tuple_element %t[0] : (tuple<tensor<2xf32>, tensor<2xf32>>) -> tensor<2xf32>
  return %a : tensor<2xf32>
}
";

const TOKEN_OUT: &str = "func.func public @main() -> !stablehlo.token {
  %t = stablehlo.create_token : !stablehlo.token
  return %t : !stablehlo.token
}
";

#[test]
fn tuple_parameters_refuse_execution_instead_of_skipping_checks() {
    for_each_plugin(|_, c| {
        let exe = compile(c, TUPLE_PARAM);
        assert_eq!(exe.parameters(), None);
        let why = exe.parameters_unknown_reason().unwrap();
        assert!(why.contains("parameter 0 is a tuple"), "{why}");
        let x = c
            .buffer_from_slice(&[1f32, 2.], &[2], &c.default_device().unwrap())
            .unwrap();
        for args in [vec![&x, &x], vec![&x], vec![]] {
            expect_err(exe.execute(&args), &["cannot be executed", "is a tuple"]);
        }
    });
}

#[test]
fn token_buffers_refuse_copies_and_host_reads() {
    for_each_plugin(|_, c| {
        let out = compile(c, TOKEN_OUT).execute(&[]).unwrap();
        let tk = &out[0];
        assert_eq!(tk.element_type(), ElementType::Token);
        let devs = c.addressable_devices().unwrap();
        expect_err(tk.copy_to_device(&devs[1]), &["token"]);
        expect_err(tk.copy_to_device(&devs[0]), &["token"]);
        let pinned = devs[0].memory_by_kind("pinned_host").unwrap();
        expect_err(tk.copy_to_memory(&pinned), &["token"]);
        expect_err(tk.to_vec(), &["token"]);
        // Metadata calls that reach the plugin work (and never ask it for a layout, which
        // aborts both plugins for a token).
        assert_eq!(tk.layout().unwrap(), None);
        assert!(!tk.has_host_view().unwrap());
        expect_err(tk.host_view(), &["no host view"]);
        assert!(tk.is_on_cpu().unwrap());
        assert!(tk.is_ready().unwrap());
        tk.ready_event().unwrap().wait().unwrap();
        tk.unsafe_pointer().unwrap();
        // A token passes where the program takes one.
        let pass = compile(
            c,
            "func.func public @main(%t: !stablehlo.token) -> !stablehlo.token {\n  return %t : !stablehlo.token\n}\n",
        );
        assert_eq!(pass.execute(&[tk]).unwrap().len(), 1);
        expect_err(
            std::sync::Arc::new(compile(c, TOKEN_OUT).execute(&[]).unwrap().remove(0))
                .external_reference(),
            &["token"],
        );
        tk.block_until_ready().unwrap();
    });
}

#[test]
fn out_of_range_overrides_are_refused_before_compiling() {
    for_each_plugin(|_, c| {
        for bad in [-1i64, 0, i64::from(i32::MAX), 1 << 40] {
            let opts = CompileOptions {
                env_option_overrides: [(
                    "xla_cpu_parallel_codegen_split_count".to_string(),
                    OptionOverride::Int(bad),
                )]
                .into_iter()
                .collect(),
                ..Default::default()
            };
            expect_err(
                c.compile(&rpjrt::Program::mlir(mul_add()), &opts),
                &["out of range"],
            );
        }
    });
}

#[test]
fn execute_sharded_checks_placement_of_every_list_before_launch() {
    for_each_plugin(|_, c| {
        let (exe, devs, a, b) = all_reduce_with_inputs(c);
        let i = c
            .buffer_from_slice(&[1i32, 2, 3, 4], &[4], &devs[1])
            .unwrap();
        expect_err(
            exe.execute_sharded(&[vec![&a], vec![&a]]),
            &[
                "argument 0 of device list 1 is on device",
                "nothing was launched",
            ],
        );
        expect_err(
            exe.execute_sharded(&[vec![&b], vec![&b]]),
            &["device list 0"],
        );
        expect_err(
            exe.execute_sharded(&[vec![&a], vec![&i]]),
            &["argument 0 of device list 1"],
        );
        // Nothing ran on replica 0: a correct call completes (no all-reduce left waiting).
        let out = exe.execute_sharded(&[vec![&a], vec![&b]]).unwrap();
        for o in &out {
            assert_eq!(o[0].to_vec_of::<f32>().unwrap(), [11., 22., 33., 44.]);
        }
    });
}

#[test]
fn unreasonable_cpu_device_counts_are_refused() {
    for_each_plugin_only(|p| {
        for n in [0i64, -1, rpjrt::MAX_CPU_DEVICE_COUNT + 1, 65536] {
            expect_err(
                Client::new(p, &ClientOptions::new().set("cpu_device_count", n)),
                &["cpu_device_count", "1024"],
            );
        }
    });
}

/// The fake plugin hands back its program as MLIR text, which rpjrt does not parse: its
/// executables have no readable signature, so they get the conservative checks.
fn fake_client() -> Client {
    let path = std::env::var_os("RPJRT_FAKE_PLUGIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| workspace_root().join("target"));
            target.join("debug").join("librpjrt_fake_plugin.so")
        });
    assert!(
        path.exists(),
        "{} is missing: cargo build -p rpjrt-fake-plugin",
        path.display()
    );
    Client::from_path(&path).expect("fake client")
}

const FAKE_IDENTITY: &str = "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}\n";

#[test]
fn unreadable_signatures_still_check_every_device_list() {
    let c = fake_client();
    let opts = replicas(2);
    let exe = c
        .compile(&rpjrt::Program::mlir(FAKE_IDENTITY), &opts)
        .unwrap();
    assert_eq!(exe.parameters(), None);
    let why = exe.parameters_unknown_reason().unwrap();
    assert!(why.contains("cannot read the parameter list"), "{why}");
    let devs = exe.addressable_devices().unwrap();
    assert_eq!(devs.len(), 2);
    let a = c.buffer_from_slice(&[1f32; 4], &[4], &devs[0]).unwrap();
    let b = c.buffer_from_slice(&[1f32; 4], &[4], &devs[1]).unwrap();
    let i = c.buffer_from_slice(&[1i32; 4], &[4], &devs[1]).unwrap();
    let short = c.buffer_from_slice(&[1f32; 3], &[3], &devs[1]).unwrap();
    expect_err(
        exe.execute_sharded(&[vec![&a], vec![&i]]),
        &["argument 0 of device list 1 is int32[4], but in list 0 it is float32[4]"],
    );
    expect_err(
        exe.execute_sharded(&[vec![&a], vec![&short]]),
        &["device list 1"],
    );
    expect_err(
        exe.execute_sharded(&[vec![&a], vec![&a]]),
        &["is on device"],
    );
    expect_err(exe.execute_sharded(&[vec![&a], vec![&b, &b]]), &["buffers"]);
    exe.execute_sharded(&[vec![&a], vec![&b]]).unwrap();
}

#[test]
fn tupled_arguments_are_checked_leaf_by_leaf() {
    const TWO: &str =
        "func.func public @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
  return %b : tensor<2xf32>
}
";
    for_each_plugin(|_, c| {
        let opts = CompileOptions {
            parameter_is_tupled_arguments: true,
            ..Default::default()
        };
        // The plugin tuples the two parameters into one; the caller still passes two arrays.
        let exe = compile_with(c, TWO, &opts);
        let params = exe
            .parameters()
            .expect("the leaves of the tupled parameter");
        assert_eq!(params.len(), 2);
        let d = c.default_device().unwrap();
        let x = c.buffer_from_slice(&[1f32, 2.], &[2], &d).unwrap();
        let y = c.buffer_from_slice(&[3f32, 4.], &[2], &d).unwrap();
        let out = exe.execute(&[&x, &y]).unwrap();
        assert_eq!(out[0].to_vec_of::<f32>().unwrap(), [3., 4.]);
        expect_err(
            exe.execute(&[&x]),
            &["takes 2 argument(s), but 1 were given"],
        );
        let i = c.buffer_from_slice(&[1i32, 2], &[2], &d).unwrap();
        expect_err(exe.execute(&[&x, &i]), &["argument 1"]);
    });
}

#[test]
fn native_handler_addresses_must_be_code() {
    extern "C" fn some_code() {}
    static SOME_DATA: [u8; 64] = [7; 64];
    rpjrt::ffi::check_code_address(some_code as *const () as usize).unwrap();
    let e = rpjrt::ffi::check_code_address(SOME_DATA.as_ptr() as usize).unwrap_err();
    assert!(e.to_string().contains("holds no code"), "{e}");
    for stray in [1usize, 0x1000, usize::MAX - 7] {
        let e = rpjrt::ffi::check_code_address(stray).unwrap_err();
        assert!(e.to_string().contains("not mapped"), "{e}");
    }
}

#[test]
fn ffi_names_with_nul_or_an_empty_platform_are_refused() {
    for_each_plugin(|_, c| {
        let h: std::sync::Arc<rpjrt::ffi::HandlerFn> = std::sync::Arc::new(|_| Ok(()));
        let e = rpjrt::ffi::register_on(c.plugin(), "cpu", "a\0b", false, h.clone()).unwrap_err();
        assert!(e.to_string().contains("NUL"), "{e}");
        let e = rpjrt::ffi::register_on(c.plugin(), "", "nul_probe", false, h).unwrap_err();
        assert!(e.to_string().contains("platform name"), "{e}");
    });
}

#[test]
fn handlers_nested_past_the_plugins_in_flight_bound_fail_instead_of_hanging() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, OnceLock};
    // The handler runs its own program again, `limit` levels deep. Each level holds one of
    // the plugin's executions in flight (32 on the CPU plugins): level 33 used to wait for
    // the enclosing ones forever.
    let text = "func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @nest_again(%x) {api_version = 4 : i32} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
";
    for_each_plugin(|_, c| {
        let exe: Arc<OnceLock<rpjrt::Executable>> = Arc::new(OnceLock::new());
        let (limit, depth) = (Arc::new(AtomicUsize::new(3)), Arc::new(AtomicUsize::new(0)));
        let (e, l, d) = (Arc::clone(&exe), Arc::clone(&limit), Arc::clone(&depth));
        let client = c.clone();
        let options = rpjrt::ffi::RegisterOptions {
            platform: None,
            replace: true,
        };
        rpjrt::ffi::register_with(c, "nest_again", &options, move |call| {
            let level = d.fetch_add(1, Ordering::SeqCst) + 1;
            let (args, rets) = call.split();
            let x = args[0].as_slice::<f32>()?.to_vec();
            let y = if level < l.load(Ordering::SeqCst) {
                let exe = e.get().expect("compiled");
                let run = || -> rpjrt::Result<Vec<f32>> {
                    let b = client.buffer_from_slice(&x, &[4], &client.default_device()?)?;
                    exe.execute(&[&b])?[0].to_vec_of::<f32>()
                };
                run()?
            } else {
                x
            };
            for (r, v) in rets[0].as_mut_slice::<f32>()?.iter_mut().zip(y) {
                *r = v + 1.0;
            }
            Ok(())
        })
        .unwrap();
        let _ = exe.set(compile(c, text));
        let x = c
            .buffer_from_slice(&[0f32; 4], &[4], &c.default_device().unwrap())
            .unwrap();
        let exe = exe.get().unwrap();
        let y = exe.execute(&[&x]).unwrap()[0].to_vec_of::<f32>().unwrap();
        assert_eq!(y, vec![3.0; 4], "three levels of nesting work");
        limit.store(usize::MAX, Ordering::SeqCst);
        depth.store(0, Ordering::SeqCst);
        let e = exe
            .execute(&[&x])
            .and_then(|o| o[0].to_vec_of::<f32>())
            .unwrap_err();
        assert!(e.to_string().contains("nested"), "{e}");
        assert!(
            depth.load(Ordering::SeqCst) <= 17,
            "{}",
            depth.load(Ordering::SeqCst)
        );
    });
}
