//! Round 21 (outside test of custom calls), on both CPU plugins (FFI runtime 0.2 on the PJRT
//! 0.81 plugin, 0.4 on the 0.115 plugin).
//!
//! 1. Results that share memory (two results aliasing one operand through
//!    `output_operand_aliases`) are refused before the handler runs, naming the target, the
//!    results and the operand: safe code got two `&mut` slices over the same bytes.
//! 2. User code run from a plugin callback never unwinds into the plugin: a per-instance
//!    state whose `Drop` panics, and a panic whose payload's `Drop` panics (in a handler,
//!    in a view's `on_delete`), no longer abort the process.
//! 5. The layout check accepts every layout that is row-major in memory (size-1 dimensions
//!    anywhere, zero-size shapes) and still refuses the others.
//! 6. `CallFrame::device_ordinal` is `None` where the runtime names no device (-1 at the
//!    instantiate stage), and `run_id` is `None` at that stage (no execution; the runtime
//!    said 0).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use rpjrt::ffi::{self, CallFrame, FfiError, RegisterOptions};
use rpjrt::{Code, DeviceAddress, ElementType};

/// A per-plugin target name (both plugins live in one process).
fn name(client: &rpjrt::Client, base: &str) -> String {
    let tag = if is_old(client.plugin()) {
        "old"
    } else {
        "new"
    };
    format!("r21_{base}_{tag}")
}

const T4: &str = "tensor<4xf32>";

fn alias(result: usize, operand: usize) -> String {
    format!(
        "#stablehlo.output_operand_alias<output_tuple_indices = [{result}], operand_index = \
         {operand}, operand_tuple_indices = []>"
    )
}

/// `%x, %y -> (r0, r1)` through one custom call with these aliases.
fn two_results(target: &str, aliases: &[String]) -> String {
    format!(
        "func.func public @main(%x: {T4}, %y: {T4}) -> ({T4}, {T4}) {{
  %0:2 = stablehlo.custom_call @{target}(%x, %y) {{api_version = 4 : i32,
      output_operand_aliases = [{}]}} : ({T4}, {T4}) -> ({T4}, {T4})
  return %0#0, %0#1 : {T4}, {T4}
}}",
        aliases.join(", ")
    )
}

fn one_call(target: &str, ty: &str, layouts: &str) -> String {
    format!(
        "func.func public @main(%x: {ty}) -> {ty} {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32{layouts}}} : ({ty}) -> {ty}
  return %0 : {ty}
}}"
    )
}

fn put(client: &rpjrt::Client, v: &[f32], dims: &[i64]) -> rpjrt::Buffer {
    client
        .buffer_from_slice(v, dims, &client.default_device().unwrap())
        .unwrap()
}

/// Adds 10 to result 0 and 100 to result 1 (each starts with its aliased operand's values).
fn add_10_and_100(call: &mut CallFrame<'_>) -> Result<(), FfiError> {
    let rets = call.rets();
    let (a, b) = rets.split_at_mut(1);
    let (s0, s1) = (a[0].as_mut_slice::<f32>()?, b[0].as_mut_slice::<f32>()?);
    assert_ne!(s0.as_ptr(), s1.as_ptr(), "two &mut slices over one memory");
    s0.iter_mut().for_each(|v| *v += 10.0);
    s1.iter_mut().for_each(|v| *v += 100.0);
    Ok(())
}

#[test]
fn results_aliasing_one_operand_are_refused_before_the_handler_runs() {
    for_each_plugin(|p, client| {
        let target = name(client, "alias2");
        let runs = Arc::new(AtomicUsize::new(0));
        let r2 = runs.clone();
        ffi::register(client, &target, move |call: &mut CallFrame<'_>| {
            r2.fetch_add(1, Ordering::SeqCst);
            add_10_and_100(call)
        })
        .unwrap();
        let (x, y) = (
            put(client, &[1., 2., 3., 4.], &[4]),
            put(client, &[0.; 4], &[4]),
        );
        for operand in [0, 1] {
            let exe = compile(
                client,
                &two_results(&target, &[alias(0, operand), alias(1, operand)]),
            );
            let e = exe.execute(&[&x, &y]).map(|_| ()).unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{}: {e}", label(p));
            let m = e.to_string();
            assert!(m.contains(&format!("{target:?}")), "{m}");
            assert!(
                m.contains(&format!("results 0 and 1 both alias operand {operand}")),
                "{m}"
            );
        }
        assert_eq!(runs.load(Ordering::SeqCst), 0, "the handler never ran");
        // One operand per result, crossed or not, still works in place.
        for (a0, a1) in [(0, 1), (1, 0)] {
            let exe = compile(client, &two_results(&target, &[alias(0, a0), alias(1, a1)]));
            let out = exe.execute(&[&x, &y]).unwrap();
            let got: Vec<Vec<f32>> = out.iter().map(|o| o.to_vec_of().unwrap()).collect();
            let (vx, vy) = (vec![1f32, 2., 3., 4.], vec![0f32; 4]);
            let start = |k| if k == 0 { vx.clone() } else { vy.clone() };
            let want0: Vec<f32> = start(a0).iter().map(|v| v + 10.0).collect();
            let want1: Vec<f32> = start(a1).iter().map(|v| v + 100.0).collect();
            assert_eq!(got, vec![want0, want1], "{}", label(p));
        }
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    });
}

/// Sixteen floats on a 64-byte boundary, as XLA's CPU runtime wants its arrays.
#[repr(C, align(64))]
struct Aligned([f32; 16]);

/// A value whose `Drop` panics.
struct PanicOnDrop(f32);

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("PanicOnDrop's drop panics on purpose");
    }
}

#[test]
fn a_state_whose_drop_panics_does_not_abort_the_process() {
    for_each_plugin(|p, client| {
        let target = name(client, "drop_panics");
        let r = ffi::register_with_state(
            client,
            &target,
            &RegisterOptions::default(),
            |_: &mut CallFrame<'_>| Ok(PanicOnDrop(1.0)),
            |call: &mut CallFrame<'_>, s: &PanicOnDrop| {
                let v = s.0;
                call.ret(0)?.as_mut_slice::<f32>()?.fill(v);
                Ok(())
            },
        );
        if is_old(p) {
            assert_eq!(r.unwrap_err().code(), Code::Unimplemented);
            return;
        }
        r.unwrap();
        let x = put(client, &[0.; 4], &[4]);
        for _ in 0..2 {
            let exe = compile(client, &one_call(&target, T4, ""));
            let out = exe.execute(&[&x]).unwrap();
            assert_eq!(out[0].to_vec_of::<f32>().unwrap(), vec![1.0; 4]);
            // The runtime runs the state's deleter as the executable is destroyed: the
            // panic there is caught (the process used to abort here).
            drop(exe);
        }
    });
}

#[test]
fn a_panic_whose_payload_panics_when_dropped_is_still_caught() {
    for_each_plugin(|p, client| {
        // In a handler: the execution fails with the panic's error.
        let target = name(client, "payload");
        ffi::register(client, &target, |_: &mut CallFrame<'_>| {
            std::panic::panic_any(PanicOnDrop(0.0))
        })
        .unwrap();
        let x = put(client, &[0.; 4], &[4]);
        let exe = compile(client, &one_call(&target, T4, ""));
        let e = exe.execute(&[&x]).map(|_| ()).unwrap_err();
        assert!(e.to_string().contains("panicked"), "{}: {e}", label(p));
        // In a view's on_delete, run by the plugin's destroy callback.
        let mem = Box::new(Aligned([0f32; 16]));
        // SAFETY: `mem` holds 16 aligned floats and outlives the view, which is dropped
        // first.
        let addr = unsafe { DeviceAddress::new(mem.0.as_ptr() as usize) };
        let d = client.default_device().unwrap();
        let view = client
            .view_of_device_buffer(
                addr,
                ElementType::F32,
                &[4],
                &d,
                None,
                Some(Box::new(|| std::panic::panic_any(PanicOnDrop(0.0)))),
            )
            .unwrap();
        drop(view);
        drop(mem);
    });
    // The raw guard every callback trampoline runs in.
    assert!(rpjrt_raw::callback::guard(|| std::panic::panic_any(PanicOnDrop(0.0))).is_none());
}

#[test]
fn layouts_row_major_in_memory_are_accepted_and_others_refused() {
    for_each_plugin(|p, client| {
        let target = name(client, "layouts");
        ffi::register(client, &target, |call: &mut CallFrame<'_>| {
            let (args, rets) = call.split();
            let x = args[0].as_slice::<f32>()?;
            rets[0].as_mut_slice::<f32>()?.copy_from_slice(x);
            Ok(())
        })
        .unwrap();
        let lay = |l: &str| {
            format!(", operand_layouts = [dense<{l}> : tensor<{}xindex>], result_layouts = [dense<{l}> : tensor<{}xindex>]", l.matches(',').count() + 1, l.matches(',').count() + 1)
        };
        let ok = [
            ("tensor<1x4xf32>", "[0, 1]", vec![1i64, 4]),
            ("tensor<2x1x3xf32>", "[2, 0, 1]", vec![2, 1, 3]),
            ("tensor<2x1x3xf32>", "[1, 2, 0]", vec![2, 1, 3]),
            ("tensor<4x1x1xf32>", "[1, 2, 0]", vec![4, 1, 1]),
            ("tensor<2x3xf32>", "[1, 0]", vec![2, 3]),
        ];
        for (ty, l, dims) in ok {
            let n: i64 = dims.iter().product();
            let v: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let exe = client
                .compile(
                    &rpjrt::Program::mlir(one_call(&target, ty, &lay(l)).into_bytes()),
                    &rpjrt::CompileOptions::default(),
                )
                .unwrap_or_else(|e| panic!("{}: {ty} {l}: {e}", label(p)));
            let out = exe.execute(&[&put(client, &v, &dims)]).unwrap();
            assert_eq!(out[0].to_vec_of::<f32>().unwrap(), v, "{ty} {l}");
        }
        for (ty, l) in [
            ("tensor<2x3xf32>", "[0, 1]"),
            ("tensor<2x1x3xf32>", "[0, 1, 2]"),
        ] {
            let r = client.compile(
                &rpjrt::Program::mlir(one_call(&target, ty, &lay(l)).into_bytes()),
                &rpjrt::CompileOptions::default(),
            );
            let e = r.map(|_| ()).unwrap_err();
            assert!(
                e.to_string().contains("wrong order"),
                "{}: {ty} {l}: {e}",
                label(p)
            );
        }
    });
}

/// The stage, device ordinal and stream a handler saw.
type Seen = (&'static str, Option<i32>, usize);

#[test]
fn device_ordinal_is_none_where_the_runtime_names_no_device() {
    for_each_plugin(|p, client| {
        let target = name(client, "ordinal");
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let (s1, s2) = (seen.clone(), seen.clone());
        let r = ffi::register_with_state(
            client,
            &target,
            &RegisterOptions::default(),
            move |call: &mut CallFrame<'_>| {
                let stream = call.stream();
                assert_eq!(call.run_id(), None, "no execution at the instantiate stage");
                s1.lock()
                    .unwrap()
                    .push(("instantiate", call.device_ordinal(), stream));
                Ok(())
            },
            move |call: &mut CallFrame<'_>, _: &()| {
                let stream = call.stream();
                assert!(call.run_id().is_some());
                s2.lock()
                    .unwrap()
                    .push(("execute", call.device_ordinal(), stream));
                call.ret(0)?.as_mut_slice::<f32>()?.fill(1.0);
                Ok(())
            },
        );
        if is_old(p) {
            assert_eq!(r.unwrap_err().code(), Code::Unimplemented);
            return;
        }
        r.unwrap();
        let exe = compile(client, &one_call(&target, T4, ""));
        exe.execute(&[&put(client, &[0.; 4], &[4])]).unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(
            *seen,
            vec![("instantiate", None, 0), ("execute", Some(0), 0)],
            "{}",
            label(p)
        );
    });
}
