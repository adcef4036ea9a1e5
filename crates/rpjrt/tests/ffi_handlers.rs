//! Custom calls served by Rust handlers, on both real CPU plugins (FFI runtime 0.2 on the
//! PJRT 0.81 plugin, 0.4 on the 0.115 plugin).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;
use rpjrt::ffi::{
    self, AttrArray, AttrValue, Attrs, CallFrame, FfiError, FromAttrs, RegisterOptions,
};
use rpjrt::{Code, ExecuteOptions};

fn scale_program(target: &str, offset: &str) -> String {
    format!(
        "func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32, backend_config = {{offset = {offset} : f32}}}} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}}
"
    )
}

/// A per-plugin unique target name (both plugins live in one process).
fn name(client: &rpjrt::Client, base: &str) -> String {
    let tag = if is_old(client.plugin()) {
        "old"
    } else {
        "new"
    };
    format!("{base}_{tag}")
}

fn scale(call: &mut CallFrame<'_>) -> Result<(), FfiError> {
    let offset: f32 = call.attrs()?.get_as("offset")?;
    // The execution context answers on both runtimes (CPU: device 0, no stream).
    assert_eq!(call.device_ordinal(), Some(0));
    let _ = call.run_id();
    assert_eq!(call.stream(), 0);
    let (args, rets) = call.split();
    let x = args[0].as_slice::<f32>()?;
    let y = rets[0].as_mut_slice::<f32>()?;
    for (y, x) in y.iter_mut().zip(x) {
        *y = 2.0 * x + offset;
    }
    Ok(())
}

fn run8(client: &rpjrt::Client, program: &str) -> rpjrt::Result<Vec<f32>> {
    let exe = compile(client, program);
    let x: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let b = client.buffer_from_slice(&x, &[8], &client.default_device()?)?;
    let out = exe.execute(&[&b])?;
    out[0].to_vec_of::<f32>()
}

#[test]
fn rust_handler_computes_two_x_plus_attr_on_both_runtimes() {
    for_each_plugin(|p, client| {
        let target = name(client, "rs_scale");
        let reg = ffi::register(client, &target, scale).unwrap();
        assert_eq!(reg.platform, "host");
        let expected_rt = if is_old(p) { (0, 2) } else { (0, 4) };
        assert_eq!(reg.runtime_version, expected_rt, "{}", label(p));
        assert_eq!(
            reg.handler_version,
            ffi::rpjrt_ffi_version().min(expected_rt)
        );
        assert_eq!(ffi::runtime_version(p).unwrap(), expected_rt);
        let y = run8(client, &scale_program(&target, "1.5")).unwrap();
        let want: Vec<f32> = (0..8).map(|i| 2.0 * i as f32 + 1.5).collect();
        assert_eq!(y, want, "{}", label(p));
    });
}

#[test]
fn registering_twice_needs_replace_and_rebinding_takes_effect() {
    for_each_plugin(|_, client| {
        let target = name(client, "rs_rebind");
        ffi::register(client, &target, scale).unwrap();
        let e = ffi::register(client, &target, scale).unwrap_err();
        assert_eq!(e.code(), Code::AlreadyExists);
        assert!(e.to_string().contains(&target), "{e}");
        let exe = compile(client, &scale_program(&target, "0.0"));
        let opts = RegisterOptions {
            replace: true,
            ..Default::default()
        };
        ffi::register_with(client, &target, &opts, |call: &mut CallFrame<'_>| {
            call.ret(0)?.as_mut_slice::<f32>()?.fill(7.0);
            Ok(())
        })
        .unwrap();
        let b = client
            .buffer_from_slice(&[0f32; 8], &[8], &client.default_device().unwrap())
            .unwrap();
        let y = exe.execute(&[&b]).unwrap()[0].to_vec_of::<f32>().unwrap();
        assert_eq!(y, vec![7.0; 8]);
        let plat = client.platform_name().unwrap();
        assert!(ffi::unregister(client.plugin(), &plat, &target).unwrap());
        let err = exe
            .execute(&[&b])
            .and_then(|o| o[0].to_vec_of::<f32>())
            .unwrap_err();
        assert!(err.to_string().contains("removed"), "{err}");
        // Removed names can be registered again without `replace`.
        ffi::register(client, &target, scale).unwrap();
        let y = exe.execute(&[&b]).unwrap()[0].to_vec_of::<f32>().unwrap();
        assert_eq!(y, vec![0.0; 8]);
    });
}

#[test]
fn errors_and_panics_fail_the_execution_with_their_message() {
    for_each_plugin(|p, client| {
        let t_err = name(client, "rs_fails");
        let t_panic = name(client, "rs_panics");
        ffi::register(client, &t_err, |_: &mut CallFrame<'_>| {
            Err(FfiError::new(Code::OutOfRange, "value 42 is too large"))
        })
        .unwrap();
        ffi::register(
            client,
            &t_panic,
            |_: &mut CallFrame<'_>| -> Result<(), FfiError> { panic!("handler went wrong") },
        )
        .unwrap();
        let e = run8(client, &scale_program(&t_err, "0.0")).unwrap_err();
        assert!(
            e.to_string().contains("value 42 is too large"),
            "{}: {e}",
            label(p)
        );
        let e = run8(client, &scale_program(&t_panic, "0.0")).unwrap_err();
        assert!(
            e.to_string().contains("handler went wrong"),
            "{}: {e}",
            label(p)
        );
        assert!(e.to_string().contains("panicked"), "{}: {e}", label(p));
        // The process and the client are fine afterwards.
        let t_ok = name(client, "rs_after_panic");
        ffi::register(client, &t_ok, scale).unwrap();
        assert_eq!(run8(client, &scale_program(&t_ok, "1.0")).unwrap()[1], 3.0);
    });
}

const ALL_ATTRS: &str = r#"func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.custom_call @TARGET(%x) {api_version = 4 : i32, backend_config = {
    b = true, i8v = -8 : i8, i16v = -16 : i16, i32v = -32 : i32, i64v = -64 : i64,
    u8v = 8 : ui8, u16v = 16 : ui16, u32v = 32 : ui32, u64v = 64 : ui64,
    f32v = 1.5 : f32, f64v = 2.25 : f64, s = "hello",
    ai32 = array<i32: 1, 2, 3>, ai64 = array<i64: -4, 5>, af32 = array<f32: 0.5, 1.5>,
    af64 = array<f64: 2.5>, d = {inner = 9 : i64, name = "in", deeper = {z = false}}}}
    : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
"#;

struct Deep {
    z: bool,
}
impl FromAttrs for Deep {
    fn from_attrs(a: &Attrs) -> Result<Self, FfiError> {
        Ok(Deep { z: a.get_as("z")? })
    }
}
struct Config {
    i32v: i32,
    u64v: u64,
    f64v: f64,
    s: String,
    ai64: Vec<i64>,
    inner: i64,
    deep: Deep,
}
impl FromAttrs for Config {
    fn from_attrs(a: &Attrs) -> Result<Self, FfiError> {
        let d: Attrs = a.get_as("d")?;
        Ok(Config {
            i32v: a.get_as("i32v")?,
            u64v: a.get_as("u64v")?,
            f64v: a.get_as("f64v")?,
            s: a.get_as("s")?,
            ai64: a.get_as("ai64")?,
            inner: d.get_as("inner")?,
            deep: d.get_as::<Attrs>("deeper")?.parse()?,
        })
    }
}

#[test]
fn every_attribute_kind_arrives_with_value_and_type() {
    for_each_plugin(|p, client| {
        let target = name(client, "rs_attrs");
        let seen: Arc<std::sync::Mutex<Option<Attrs>>> = Arc::default();
        let parsed = Arc::new(AtomicUsize::new(0));
        let (s2, p2) = (seen.clone(), parsed.clone());
        ffi::register(client, &target, move |call: &mut CallFrame<'_>| {
            *s2.lock().unwrap() = Some(call.attrs()?.clone());
            let c: Config = call.parse_attrs()?;
            assert_eq!(
                (c.i32v, c.u64v, c.f64v, c.s.as_str(), c.inner, c.deep.z),
                (-32, 64, 2.25, "hello", 9, false)
            );
            assert_eq!(c.ai64, vec![-4, 5]);
            p2.fetch_add(1, Ordering::SeqCst);
            call.ret(0)?.as_mut_slice::<f32>()?.fill(0.0);
            Ok(())
        })
        .unwrap();
        run8(client, &ALL_ATTRS.replace("TARGET", &target)).unwrap();
        assert_eq!(parsed.load(Ordering::SeqCst), 1, "{}", label(p));
        let a = seen.lock().unwrap().take().unwrap();
        let get = |n: &str| a.get(n).cloned().unwrap();
        assert_eq!(get("b"), AttrValue::Bool(true));
        assert_eq!(get("i8v"), AttrValue::I8(-8));
        assert_eq!(get("i16v"), AttrValue::I16(-16));
        assert_eq!(get("i32v"), AttrValue::I32(-32));
        assert_eq!(get("i64v"), AttrValue::I64(-64));
        assert_eq!(get("u8v"), AttrValue::U8(8));
        assert_eq!(get("u16v"), AttrValue::U16(16));
        assert_eq!(get("u32v"), AttrValue::U32(32));
        assert_eq!(get("u64v"), AttrValue::U64(64));
        assert_eq!(get("f32v"), AttrValue::F32(1.5));
        assert_eq!(get("f64v"), AttrValue::F64(2.25));
        assert_eq!(get("s"), AttrValue::Str("hello".into()));
        assert_eq!(get("ai32"), AttrValue::Array(AttrArray::I32(vec![1, 2, 3])));
        assert_eq!(get("ai64"), AttrValue::Array(AttrArray::I64(vec![-4, 5])));
        assert_eq!(
            get("af32"),
            AttrValue::Array(AttrArray::F32(vec![0.5, 1.5]))
        );
        assert_eq!(get("af64"), AttrValue::Array(AttrArray::F64(vec![2.5])));
        let AttrValue::Dict(d) = get("d") else {
            panic!("d is not a dictionary")
        };
        assert_eq!(d.get("inner"), Some(&AttrValue::I64(9)));
        assert_eq!(d.get("name"), Some(&AttrValue::Str("in".into())));
        let AttrValue::Dict(deeper) = d.get("deeper").unwrap().clone() else {
            panic!("deeper is not a dictionary")
        };
        assert_eq!(deeper.get("z"), Some(&AttrValue::Bool(false)));
    });
}

#[test]
fn user_data_arrives_per_execute() {
    for_each_plugin(|p, client| {
        let target = name(client, "rs_user_data");
        ffi::register(client, &target, |call: &mut CallFrame<'_>| {
            let k = call
                .user_data::<f32>()
                .copied()
                .ok_or_else(|| FfiError::invalid("no user data"))?;
            let (args, rets) = call.split();
            let x = args[0].as_slice::<f32>()?;
            for (y, x) in rets[0].as_mut_slice::<f32>()?.iter_mut().zip(x) {
                *y = k * x;
            }
            Ok(())
        })
        .unwrap();
        let exe = compile(client, &scale_program(&target, "0.0"));
        let x: Vec<f32> = (0..8).map(|i| i as f32).collect();
        let b = client
            .buffer_from_slice(&x, &[8], &client.default_device().unwrap())
            .unwrap();
        for k in [3.0f32, -1.0] {
            let ctx = ffi::ExecuteContext::with_user_data(client, k).unwrap();
            let opts = ExecuteOptions {
                ffi_context: Some(Arc::new(ctx)),
                ..Default::default()
            };
            let out = exe.execute_with(&[vec![&b]], &opts).unwrap();
            let y = out.outputs[0][0].to_vec_of::<f32>().unwrap();
            assert_eq!(
                y,
                x.iter().map(|v| k * v).collect::<Vec<_>>(),
                "{}",
                label(p)
            );
        }
        // Without a context the handler sees no user data and says so.
        let e = exe
            .execute(&[&b])
            .and_then(|o| o[0].to_vec_of::<f32>())
            .unwrap_err();
        assert!(e.to_string().contains("no user data"), "{e}");
    });
}

#[test]
fn many_handlers_have_no_small_limit() {
    for_each_plugin(|_, client| {
        let n = 300;
        let calls = Arc::new(AtomicUsize::new(0));
        for i in 0..n {
            let c = calls.clone();
            ffi::register(
                client,
                &name(client, &format!("rs_many_{i}")),
                move |call: &mut CallFrame<'_>| {
                    c.fetch_add(1, Ordering::SeqCst);
                    call.ret(0)?.as_mut_slice::<f32>()?.fill(i as f32);
                    Ok(())
                },
            )
            .unwrap();
        }
        for i in [0, 129, n - 1] {
            let y = run8(
                client,
                &scale_program(&name(client, &format!("rs_many_{i}")), "0.0"),
            )
            .unwrap();
            assert_eq!(y, vec![i as f32; 8]);
        }
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    });
}

#[test]
fn bad_names_and_types_are_clear_errors() {
    for_each_plugin(|_, client| {
        let e = ffi::register(client, "", scale).unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
        let target = name(client, "rs_wrong_type");
        ffi::register(client, &target, |call: &mut CallFrame<'_>| {
            call.arg(0)?.as_slice::<i32>()?;
            Ok(())
        })
        .unwrap();
        let e = run8(client, &scale_program(&target, "0.0")).unwrap_err();
        assert!(
            e.to_string().contains("float32") && e.to_string().contains("int32"),
            "{e}"
        );
    });
}

#[path = "../examples/ffi_custom_call.rs"]
mod example;

#[test]
fn ffi_example_runs() {
    for which in [Which::Old, Which::New] {
        let path = plugin_path(which);
        let out = example::run(path.to_str().unwrap()).unwrap();
        assert!(out.contains("10x + 1.5 = [1.5, 11.5,"), "{out}");
        assert!(out.ends_with("ok\n"), "{out}");
    }
}

#[test]
fn instantiate_stage_gives_per_instance_state() {
    for_each_plugin(|p, client| {
        let target = name(client, "rs_stateful");
        let instances = Arc::new(AtomicUsize::new(0));
        let i2 = instances.clone();
        let r = ffi::register_with_state(
            client,
            &target,
            &RegisterOptions::default(),
            move |call: &mut CallFrame<'_>| {
                // No execution exists at this stage: user data is absent (asking XLA's
                // runtime for it then dereferenced the missing execution context).
                assert!(call.user_data_any().is_none());
                let _ = (call.stream(), call.device_ordinal());
                // The state is computed once per compiled instance, from the attributes.
                let offset: f32 = call.attrs()?.get_as("offset")?;
                let n = i2.fetch_add(1, Ordering::SeqCst);
                Ok((offset * 10.0, n))
            },
            |call: &mut CallFrame<'_>, state: &(f32, usize)| {
                call.ret(0)?
                    .as_mut_slice::<f32>()?
                    .fill(state.0 + state.1 as f32);
                Ok(())
            },
        );
        if is_old(p) {
            let e = r.unwrap_err();
            assert_eq!(e.code(), Code::Unimplemented, "{e}");
            assert!(e.to_string().contains("0.2"), "{e}");
            return;
        }
        r.unwrap();
        let a = compile(client, &scale_program(&target, "1.0"));
        let b = compile(client, &scale_program(&target, "2.0"));
        assert_eq!(
            instances.load(Ordering::SeqCst),
            2,
            "one instantiate per instance"
        );
        let x = client
            .buffer_from_slice(&[0f32; 8], &[8], &client.default_device().unwrap())
            .unwrap();
        for _ in 0..3 {
            let ya = a.execute(&[&x]).unwrap()[0].to_vec_of::<f32>().unwrap();
            let yb = b.execute(&[&x]).unwrap()[0].to_vec_of::<f32>().unwrap();
            assert_eq!(ya, vec![10.0; 8]);
            assert_eq!(yb, vec![21.0; 8]);
        }
        assert_eq!(instances.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn user_type_ids_are_stable_per_name() {
    for_each_plugin(|p, _| {
        let a = ffi::register_type(p, "rpjrt.test.TypeA").unwrap();
        let b = ffi::register_type(p, "rpjrt.test.TypeB").unwrap();
        assert_ne!(a, b);
        assert_eq!(ffi::register_type(p, "rpjrt.test.TypeA").unwrap(), a);
    });
}

// ------------------------------------------------------------ issue 21: hardening

/// Runs `body` on a thread and fails if it has not finished within `secs` (a hang fails
/// the test instead of freezing the runner; the stuck thread is left behind).
fn within<T: Send + 'static>(secs: u64, body: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)));
    });
    match rx.recv_timeout(std::time::Duration::from_secs(secs)) {
        Ok(Ok(v)) => v,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("did not finish within {secs} s (hang)"),
    }
}

/// A zero-size operand next to a non-empty one (XLA skips a custom call whose results are
/// all empty): host memory of no bytes on both runtimes (PJRT 0.81 gives it a null
/// address).
#[test]
fn zero_size_operands_are_host_memory() {
    for_each_plugin(|p, client| {
        let target = name(client, "rs_empty");
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s2 = Arc::clone(&seen);
        ffi::register(client, &target, move |call: &mut CallFrame<'_>| {
            let (args, rets) = call.split();
            s2.lock().unwrap().push((
                args[0].is_host(),
                args[0].host_bytes().map(<[u8]>::len),
                args[0].as_slice::<f32>()?.len(),
                rets[0].as_mut_slice::<f32>()?.len(),
            ));
            let k = args[1].as_slice::<f32>()?.to_vec();
            rets[1].as_mut_slice::<f32>()?.copy_from_slice(&k);
            Ok(())
        })
        .unwrap();
        let prog = format!(
            "func.func public @main(%x: tensor<0x3xf32>, %k: tensor<2xf32>) -> (tensor<0x3xf32>, tensor<2xf32>) {{
  %0:2 = stablehlo.custom_call @{target}(%x, %k) {{api_version = 4 : i32}} : (tensor<0x3xf32>, tensor<2xf32>) -> (tensor<0x3xf32>, tensor<2xf32>)
  return %0#0, %0#1 : tensor<0x3xf32>, tensor<2xf32>
}}"
        );
        let exe = compile(client, &prog);
        let dev = client.default_device().unwrap();
        let b = client.buffer_from_slice::<f32>(&[], &[0, 3], &dev).unwrap();
        let k = client
            .buffer_from_slice::<f32>(&[4.0, 5.0], &[2], &dev)
            .unwrap();
        let out = exe.execute(&[&b, &k]).unwrap();
        assert_eq!(out[0].dims(), &[0, 3]);
        assert_eq!(out[1].to_vec_of::<f32>().unwrap(), vec![4.0, 5.0]);
        assert_eq!(
            *seen.lock().unwrap(),
            vec![(true, Some(0), 0, 0)],
            "{}",
            label(p)
        );
    });
}

#[test]
fn non_utf8_string_attribute_is_an_error_naming_it() {
    for_each_plugin(|_, client| {
        let target = name(client, "rs_utf8");
        ffi::register(client, &target, |call: &mut CallFrame<'_>| {
            call.attrs()?;
            Ok(())
        })
        .unwrap();
        let prog = format!(
            "func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32, backend_config = {{bad = \"a\\FFb\"}}}} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}}"
        );
        let err = run8(client, &prog).unwrap_err();
        assert!(
            err.to_string()
                .contains("attribute \"bad\" is a string that is not valid UTF-8"),
            "{err}"
        );
    });
}

/// Where a handler parks the handles whose last reference it drops.
static DROPPED_IN_HANDLER: std::sync::Mutex<
    Vec<(rpjrt::Client, rpjrt::Executable, rpjrt::Buffer)>,
> = std::sync::Mutex::new(Vec::new());

#[test]
fn last_references_dropped_inside_a_handler_do_not_hang() {
    for asynchronous in [false, true] {
        for_each_plugin_only(|p| {
            let p = p.clone();
            within(60, move || {
                let client = rpjrt::Client::new(
                    &p,
                    &rpjrt::ClientOptions::new().set("asynchronous", asynchronous),
                )
                .unwrap();
                let tag = if is_old(&p) { "old" } else { "new" };
                let target = format!("rs_dropper_{tag}_{asynchronous}");
                let ran = Arc::new(AtomicUsize::new(0));
                let r2 = Arc::clone(&ran);
                ffi::register(&client, &target, move |call: &mut CallFrame<'_>| {
                    for y in call.rets()[0].as_mut_slice::<f32>()? {
                        *y = 1.0;
                    }
                    // The last client, executable and buffer references go here.
                    DROPPED_IN_HANDLER.lock().unwrap().clear();
                    r2.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
                .unwrap();
                // Large enough that the plugin runs it (and the handler) on a worker thread,
                // after execute returned.
                const N: usize = 4 << 20;
                let exe = compile(
                    &client,
                    &format!(
                        "func.func public @main(%x: tensor<{N}xf32>) -> tensor<{N}xf32> {{
  %t = stablehlo.multiply %x, %x : tensor<{N}xf32>
  %0 = stablehlo.custom_call @{target}(%t) {{api_version = 4 : i32}} : (tensor<{N}xf32>) -> tensor<{N}xf32>
  return %0 : tensor<{N}xf32>
}}"
                    ),
                );
                let x: Vec<f32> = vec![1.0; N];
                let b = client
                    .buffer_from_slice(&x, &[N as i64], &client.default_device().unwrap())
                    .unwrap();
                let run = exe.clone();
                let arg = b.clone();
                DROPPED_IN_HANDLER.lock().unwrap().push((client, exe, b));
                drop(run.execute(&[&arg]).unwrap());
                drop((run, arg));
                let t0 = std::time::Instant::now();
                while ran.load(Ordering::SeqCst) == 0 {
                    assert!(t0.elapsed().as_secs() < 60, "the handler never ran");
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            });
        });
    }
}

mod frames {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum A {
        I(i64),
        F(f32),
        S(String),
        B(bool),
    }

    fn attr() -> impl Strategy<Value = A> {
        prop_oneof![
            any::<i64>().prop_map(A::I),
            (-1.0e6f32..1.0e6).prop_map(A::F),
            "[a-z0-9 _]{0,12}".prop_map(A::S),
            any::<bool>().prop_map(A::B),
        ]
    }

    const TYPES: [(&str, usize); 6] = [
        ("f32", 4),
        ("f64", 8),
        ("i32", 4),
        ("i8", 1),
        ("ui16", 2),
        ("i64", 8),
    ];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
        /// Random element types and shapes (zero-size included) and random attribute
        /// dictionaries: the handler sees each attribute with its value, and the bytes it
        /// copies from argument to result come back unchanged.
        #[test]
        fn random_frames_round_trip(
            ty in 0usize..TYPES.len(),
            dims in proptest::collection::vec(0i64..4, 0..4),
            attrs in proptest::collection::btree_map("a_[a-z0-9_]{0,6}", attr(), 0..6),
            seed in any::<u8>(),
        ) {
            let (mlir_ty, width) = TYPES[ty];
            let shape = if dims.is_empty() {
                format!("tensor<{mlir_ty}>")
            } else {
                format!(
                    "tensor<{}x{mlir_ty}>",
                    dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")
                )
            };
            let cfg: Vec<String> = attrs
                .iter()
                .map(|(k, v)| match v {
                    A::I(i) => format!("{k} = {i} : i64"),
                    A::F(f) => format!("{k} = 0x{:08X} : f32", f.to_bits()),
                    A::S(s) => format!("{k} = \"{s}\""),
                    A::B(b) => format!("{k} = {b}"),
                })
                .collect();
            let count: usize = dims.iter().map(|&d| d as usize).product();
            let bytes: Vec<u8> = (0..count * width)
                .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
                .collect();
            for_each_plugin(|p, client| {
                let target = format!("{}_{}", name(client, "rs_prop"), seed);
                let got = Arc::new(std::sync::Mutex::new(None));
                let g2 = Arc::clone(&got);
                ffi::register_with(
                    client,
                    &target,
                    &RegisterOptions { replace: true, ..Default::default() },
                    move |call: &mut CallFrame<'_>| {
                        let attrs = call.attrs()?.clone();
                        let (args, rets) = call.split();
                        for i in 0..2 {
                            let src = args[i].host_bytes().expect("host").to_vec();
                            rets[i].host_bytes_mut().expect("host").copy_from_slice(&src);
                        }
                        *g2.lock().unwrap() = Some(attrs);
                        Ok(())
                    },
                )
                .unwrap();
                let prog = format!(
                    "func.func public @main(%x: {shape}, %k: tensor<2xf32>) -> ({shape}, tensor<2xf32>) {{
  %0:2 = stablehlo.custom_call @{target}(%x, %k) {{api_version = 4 : i32, backend_config = {{{}}}}} : ({shape}, tensor<2xf32>) -> ({shape}, tensor<2xf32>)
  return %0#0, %0#1 : {shape}, tensor<2xf32>
}}",
                    cfg.join(", ")
                );
                let exe = compile(client, &prog);
                let et = exe.parameters().unwrap()[0].element_type;
                let host = rpjrt::HostArray::from_owner(Arc::new(bytes.clone()), et, dims.clone());
                let b = client
                    .put(&host, &client.default_device().unwrap(), None, rpjrt::CopyMode::Always)
                    .unwrap();
                let k = client
                    .buffer_from_slice::<f32>(&[1.0, 2.0], &[2], &client.default_device().unwrap())
                    .unwrap();
                let out = exe.execute(&[&b, &k]).unwrap();
                assert_eq!(out[0].to_vec().unwrap(), bytes, "{}", label(p));
                assert_eq!(out[1].to_vec_of::<f32>().unwrap(), vec![1.0, 2.0]);
                let seen = got.lock().unwrap().take().expect("handler ran");
                for (k, v) in &attrs {
                    let have = seen.get(k).unwrap_or_else(|| panic!("attribute {k} missing"));
                    match (v, have) {
                        (A::I(i), h) => assert_eq!(h.as_i64(), Some(*i), "{k}"),
                        (A::F(f), AttrValue::F32(h)) => assert_eq!(h, f, "{k}"),
                        (A::S(s), AttrValue::Str(h)) => assert_eq!(h, s, "{k}"),
                        (A::B(b), AttrValue::Bool(h)) => assert_eq!(h, b, "{k}"),
                        (v, h) => panic!("{k}: sent {v:?}, got {h:?}"),
                    }
                }
            });
        }
    }
}

/// Handlers run on XLA's CPU threads with denormals-are-zero set: a subnormal `f32`
/// attribute read as `f64` (`get_as::<f64>`, `as_f64`, `to_f64_vec`) came out 0, the
/// hardware widening flushing it. It now arrives exactly, in a handler as outside one.
#[test]
fn subnormal_f32_attributes_arrive_exactly_as_f64() {
    let tiny = 1.0e-45f32; // rounds to 2^-149, the smallest subnormal
    let small = -1.0e-40f32;
    assert!(tiny.is_subnormal() && small.is_subnormal());
    for_each_plugin(|p, client| {
        let target = name(client, "rs_subnormal_attr");
        let seen: Arc<std::sync::Mutex<Vec<f64>>> = Arc::default();
        let s2 = seen.clone();
        ffi::register(client, &target, move |call: &mut CallFrame<'_>| {
            let a = call.attrs()?;
            let one: f64 = a.get_as("t")?;
            let arr: Vec<f64> = a.get_as("arr")?;
            let mut got = s2.lock().unwrap();
            got.push(one);
            got.extend(arr);
            call.ret(0)?.as_mut_slice::<f32>()?.fill(0.0);
            Ok(())
        })
        .unwrap();
        let program = format!(
            "func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32,
      backend_config = {{t = 1.0e-45 : f32, arr = array<f32: 1.0e-45, -1.0e-40>}}}}
      : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}}
"
        );
        run8(client, &program).unwrap();
        let want = vec![f64::from(tiny), f64::from(tiny), f64::from(small)];
        assert_eq!(*seen.lock().unwrap(), want, "{}", label(p));
    });
}

/// A handler without state replacing one with state kept the runtime's instantiate stage,
/// which then called the stateless handler with no buffers (its first `ret(0)` failed the
/// compile); and a handler with state replacing one registered without it was accepted,
/// though its instantiate function could never run, so every execution failed. The first
/// now compiles and runs; the second is refused at registration, naming what to do.
#[test]
fn replacing_across_stateful_and_stateless_handlers() {
    for_each_plugin(|p, client| {
        if is_old(p) {
            // No instantiate stage on FFI 0.2 (refused at registration, tested above).
            return;
        }
        let fill = |v: f32| {
            move |call: &mut CallFrame<'_>| -> Result<(), FfiError> {
                call.ret(0)?.as_mut_slice::<f32>()?.fill(v);
                Ok(())
            }
        };
        let stateful = |v: f32| {
            (
                move |_: &mut CallFrame<'_>| -> Result<f32, FfiError> { Ok(v) },
                |call: &mut CallFrame<'_>, s: &f32| -> Result<(), FfiError> {
                    call.ret(0)?.as_mut_slice::<f32>()?.fill(*s);
                    Ok(())
                },
            )
        };
        let replace = RegisterOptions {
            replace: true,
            ..RegisterOptions::default()
        };
        // Stateful first, then stateless: new programs compile and run the new handler.
        let target = name(client, "rs_state_then_plain");
        let (i, e) = stateful(5.0);
        ffi::register_with_state(client, &target, &RegisterOptions::default(), i, e).unwrap();
        assert_eq!(
            run8(client, &scale_program(&target, "1.0")).unwrap(),
            [5.0; 8]
        );
        ffi::register_with(client, &target, &replace, fill(3.0)).unwrap();
        assert_eq!(
            run8(client, &scale_program(&target, "1.0")).unwrap(),
            [3.0; 8]
        );
        // Stateless first, then stateful: refused, the stateless handler still bound.
        let target = name(client, "rs_plain_then_state");
        ffi::register(client, &target, fill(2.0)).unwrap();
        let (i, e) = stateful(9.0);
        let err = ffi::register_with_state(client, &target, &replace, i, e).unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition, "{err}");
        assert!(
            err.to_string()
                .contains("without per-instance state, so the runtime never runs"),
            "{err}"
        );
        assert!(err.to_string().contains("new target name"), "{err}");
        assert_eq!(
            run8(client, &scale_program(&target, "1.0")).unwrap(),
            [2.0; 8]
        );
    });
}

/// A custom call whose result aliases its argument (`output_operand_aliases`) gets one
/// buffer for both: the frame handed out a shared slice of the argument and a mutable
/// slice of the result over the same bytes (aliasing `&` and `&mut`, undefined behaviour,
/// and an in-place reversal read values it had already overwritten). The argument now
/// names the result it shares, and the handler works in place through the result.
#[test]
fn an_argument_aliased_by_its_result_is_read_through_the_result() {
    for_each_plugin(|p, client| {
        let target = name(client, "rs_aliased");
        let seen: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
        let s2 = seen.clone();
        ffi::register(client, &target, move |call: &mut CallFrame<'_>| {
            let arg = call.arg(0)?;
            let mut notes = s2.lock().unwrap();
            notes.push(format!("{:?} {}", arg.aliased_result(), arg.is_host()));
            match arg.as_slice::<f32>() {
                Ok(_) => notes.push("a slice".into()),
                Err(e) => notes.push(e.message),
            }
            call.ret(0)?.as_mut_slice::<f32>()?.reverse();
            Ok(())
        })
        .unwrap();
        let program = format!(
            "func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32,
      output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [],
        operand_index = 0, operand_tuple_indices = []>]}} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}}
"
        );
        let y = run8(client, &program).unwrap();
        let want: Vec<f32> = (0..8).rev().map(|i| i as f32).collect();
        assert_eq!(y, want, "{}", label(p));
        let notes = seen.lock().unwrap();
        assert_eq!(notes[0], "Some(0) true", "{}", label(p));
        assert!(
            notes[1].contains("shares its memory with result 0"),
            "{}: {notes:?}",
            label(p)
        );
    });
}

/// A host result the handler never asks to write is zeros once it returns, as a Python
/// handler's unviewed result is; before, it held whatever the runtime's memory held (in
/// this program, on both plugins, what looked like heap addresses). A result that shares an
/// argument's memory keeps the argument's values instead.
#[test]
fn a_result_the_handler_never_writes_is_zeros() {
    for_each_plugin(|p, client| {
        let fill = name(client, "rs_fill7");
        let lazy = name(client, "rs_lazy");
        let keep = name(client, "rs_keep");
        ffi::register(client, &fill, |call: &mut CallFrame<'_>| {
            call.ret(0)?.as_mut_slice::<f32>()?.fill(7.0);
            Ok(())
        })
        .unwrap();
        ffi::register(client, &lazy, |call: &mut CallFrame<'_>| {
            // Writes result 0 only; result 1 is never asked for.
            call.ret(0)?.as_mut_slice::<f32>()?.fill(1.0);
            Ok(())
        })
        .unwrap();
        ffi::register(client, &keep, |_: &mut CallFrame<'_>| Ok(())).unwrap();
        let program = format!(
            "func.func public @main(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {{
  %a = stablehlo.custom_call @{fill}(%x) {{api_version = 4 : i32}} : (tensor<8xf32>) -> tensor<8xf32>
  %b = stablehlo.add %a, %a : tensor<8xf32>
  %c:2 = stablehlo.custom_call @{lazy}(%b) {{api_version = 4 : i32}} : (tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  %d = stablehlo.add %c#0, %b : tensor<8xf32>
  %e = stablehlo.custom_call @{keep}(%d) {{api_version = 4 : i32,
      output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [],
        operand_index = 0, operand_tuple_indices = []>]}} : (tensor<8xf32>) -> tensor<8xf32>
  return %c#0, %c#1, %e : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}}
"
        );
        let exe = compile(client, &program);
        let x = client
            .buffer_from_slice(&[0f32; 8], &[8], &client.default_device().unwrap())
            .unwrap();
        for _ in 0..3 {
            let out = exe.execute(&[&x]).unwrap();
            let got: Vec<Vec<f32>> = out.iter().map(|o| o.to_vec_of::<f32>().unwrap()).collect();
            assert_eq!(got[0], vec![1.0; 8], "{}", label(p));
            assert_eq!(got[1], vec![0.0; 8], "{}: the unwritten result", label(p));
            assert_eq!(got[2], vec![15.0; 8], "{}: the in-place result", label(p));
        }
    });
}
