//! A program's result does not depend on whether XLA computed it while compiling (constant
//! folding, on the thread that calls compile) or at run time (on the plugin's threads, which
//! flush subnormals to zero): rpjrt compiles under the runtime's floating-point mode and
//! gives the caller's thread its own mode back. Both CPU plugins; JAX gives 0 for ceil and
//! -0 for floor of these inputs (the Python tests compare every value with JAX directly).

mod common;

use std::hint::black_box;

use common::*;
use rpjrt::{Buffer, Client, CompileOptions, ElementType, Executable, Program};

/// (MLIR type, element type, the subnormal written in the program, its bytes).
fn cases() -> Vec<(&'static str, ElementType, &'static str, Vec<u8>)> {
    vec![
        // bfloat16 0x0001 is 9.18e-41, what the text 1.0e-40 rounds to.
        (
            "bf16",
            ElementType::BF16,
            "1.0e-40",
            1u16.to_ne_bytes().to_vec(),
        ),
        (
            "f32",
            ElementType::F32,
            "1.0e-40",
            1e-40f32.to_ne_bytes().to_vec(),
        ),
        (
            "f64",
            ElementType::F64,
            "1.0e-310",
            1e-310f64.to_ne_bytes().to_vec(),
        ),
    ]
}

/// `ceil(x), floor(-x), tanh(x)` of a constant `x` (folded by the compiler) or of the
/// argument (computed at run time).
fn program(ty: &str, value: Option<&str>) -> String {
    let (params, x) = match value {
        Some(v) => (
            String::new(),
            format!("%x = stablehlo.constant dense<{v}> : tensor<{ty}>\n  "),
        ),
        None => (format!("%x: tensor<{ty}>"), String::new()),
    };
    format!(
        "func.func public @main({params}) -> (tensor<{ty}>, tensor<{ty}>, tensor<{ty}>) {{
  {x}%n = stablehlo.negate %x : tensor<{ty}>
  %0 = stablehlo.ceil %x : tensor<{ty}>
  %1 = stablehlo.floor %n : tensor<{ty}>
  %2 = stablehlo.tanh %x : tensor<{ty}>
  return %0, %1, %2 : tensor<{ty}>, tensor<{ty}>, tensor<{ty}>
}}
"
    )
}

/// The three results as f64 (bf16 widened exactly).
fn values(out: &[Buffer], et: ElementType) -> Vec<f64> {
    out.iter()
        .map(|b| {
            let bytes = b.to_vec().unwrap();
            match et {
                ElementType::BF16 => {
                    let bits = u16::from_ne_bytes([bytes[0], bytes[1]]);
                    f64::from(f32::from_bits(u32::from(bits) << 16))
                }
                ElementType::F32 => f64::from(f32::from_ne_bytes(bytes[..4].try_into().unwrap())),
                _ => f64::from_ne_bytes(bytes[..8].try_into().unwrap()),
            }
        })
        .collect()
}

/// The caller's thread still keeps subnormals (IEEE mode, what a Rust thread starts with).
#[track_caller]
fn assert_caller_keeps_subnormals(what: &str) {
    assert!(
        black_box(black_box(1e-310f64) * 1.0) > 0.0,
        "{what} left the calling thread flushing f64 subnormals"
    );
    assert!(
        black_box(black_box(1e-40f32) * 1.0) > 0.0,
        "{what} left the calling thread flushing f32 subnormals"
    );
}

fn check(label: &str, folded: &Executable, runtime: &Executable, arg: &Buffer, et: ElementType) {
    let f = values(&folded.execute(&[]).unwrap(), et);
    let r = values(&runtime.execute(&[arg]).unwrap(), et);
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(&f),
        bits(&r),
        "{label}: ceil, floor(-x), tanh of a subnormal: folded {f:?}, at run time {r:?}"
    );
    // What JAX gives: ceil and floor flush the subnormal input (0 and -0, where IEEE
    // arithmetic gives 1 and -1).
    assert_eq!(
        f[0].to_bits(),
        0.0f64.to_bits(),
        "{label}: ceil gave {}",
        f[0]
    );
    assert_eq!(
        f[1].to_bits(),
        (-0.0f64).to_bits(),
        "{label}: floor gave {}",
        f[1]
    );
}

#[test]
fn folded_and_runtime_subnormals_agree_on_both_plugins() {
    assert_caller_keeps_subnormals("the test harness");
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        for (ty, et, text, bytes) in cases() {
            let folded = compile(c, &program(ty, Some(text)));
            assert_caller_keeps_subnormals("Client::compile");
            let runtime = compile(c, &program(ty, None));
            let arg = c.buffer_from_host(&bytes, et, &[], None, &d, None).unwrap();
            check(ty, &folded, &runtime, &arg, et);

            // Loading a serialized executable goes through the same guard.
            let blob = folded.serialize().unwrap();
            let loaded = c.load(&blob, None).unwrap();
            assert_caller_keeps_subnormals("Client::load");
            check(&format!("{ty} loaded"), &loaded, &runtime, &arg, et);
        }
    });
}

#[test]
fn topology_compile_folds_under_the_runtime_mode() {
    for_each_plugin(|p, c| {
        if is_old(p) {
            // The 0.81 plugin has no compiler for topology compiles (an Unsupported error).
            return;
        }
        let topo = c.topology().unwrap();
        let d = c.default_device().unwrap();
        for (ty, et, text, bytes) in cases() {
            let blob = topo
                .compile(
                    &Program::mlir(program(ty, Some(text))),
                    &CompileOptions::default(),
                )
                .unwrap();
            assert_caller_keeps_subnormals("Topology::compile");
            let folded = c.load(&blob, None).unwrap();
            let runtime = compile(c, &program(ty, None));
            let arg = c.buffer_from_host(&bytes, et, &[], None, &d, None).unwrap();
            check(&format!("{ty} topology"), &folded, &runtime, &arg, et);
        }
    });
}

#[test]
fn compile_from_another_thread_leaves_each_thread_its_mode() {
    let p = plugin(Which::New);
    let c = Client::new(&p, &Default::default()).unwrap();
    let text = program("f64", Some("1.0e-310"));
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..3 {
                    let exe = compile(&c, &text);
                    assert_caller_keeps_subnormals("Client::compile on a second thread");
                    let v = values(&exe.execute(&[]).unwrap(), ElementType::F64);
                    assert_eq!(v[0], 0.0, "ceil(1e-310) compiled on a second thread");
                }
            });
        }
    });
    assert_caller_keeps_subnormals("compiles on other threads");
}
