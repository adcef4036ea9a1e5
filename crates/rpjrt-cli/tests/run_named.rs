//! `rpjrt run` of what was compiled (issue 22 item 8) on both CPU plugins: a plugin's bare
//! serialized executable (`--format executable`, input specs from the executable), and
//! inputs bound by parameter name where the program carries names (StableHLO text, and
//! jax.export's portable artifact), with unknown, repeated and missing names refused
//! (exit 2) by a message that lists the parameters.

mod common;

use std::path::{Path, PathBuf};

use common::{fixture, new, old, rpjrt, run, tmpdir};
use serde_json::Value;

const A: &str = "[1,2,3,4,5,6,7,8]:f32";
const B: &str = "[2,2,2,2,0,0,0,0]:f32";
/// `a * b + 1` for A and B.
const WANT: [f64; 8] = [3.0, 5.0, 7.0, 9.0, 1.0, 1.0, 1.0, 1.0];

/// The text jax.export writes for `f(x, y) = x * y + 1`: generic SSA names, the Python
/// argument names as locations.
const JAX_TEXT: &str = r#"#loc1 = loc("x")
#loc2 = loc("y")
module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8xf32> loc("x"), %arg1: tensor<8xf32> loc("y")) -> (tensor<8xf32> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<8xf32> loc(#loc)
    %0 = stablehlo.multiply %arg0, %arg1 : tensor<8xf32> loc(#loc)
    %1 = stablehlo.add %0, %cst : tensor<8xf32> loc(#loc)
    return %1 : tensor<8xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
"#;

fn plugins() -> [(&'static str, PathBuf); 2] {
    [("old", old()), ("new", new())]
}

/// `rpjrt run PROGRAM ARGS --plugin P --json`: (exit code, the outputs' values or the
/// error text).
fn run_program(program: &Path, plugin: &Path, args: &[&str]) -> (i32, Result<Vec<f64>, String>) {
    let mut c = rpjrt();
    c.arg("run")
        .arg(program)
        .args(args)
        .arg("--plugin")
        .arg(plugin);
    c.arg("--json");
    let (code, out, err) = run(&mut c);
    if code != 0 {
        return (code, Err(format!("{out}{err}")));
    }
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let data = v["outputs"][0]["data"]
        .as_array()
        .unwrap_or_else(|| panic!("no outputs: {out}"))
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    (code, Ok(data))
}

fn ok(r: (i32, Result<Vec<f64>, String>), what: &str) -> Vec<f64> {
    match r {
        (0, Ok(v)) => v,
        (code, e) => panic!("{what}: exit {code}: {e:?}"),
    }
}

fn usage_error(r: (i32, Result<Vec<f64>, String>), what: &str) -> String {
    match r {
        (2, Err(text)) => text,
        (code, got) => panic!("{what}: expected exit 2, got {code}: {got:?}"),
    }
}

#[test]
fn runs_a_bare_serialized_executable_with_specs_from_the_executable() {
    for (label, plugin) in plugins() {
        let dir = tmpdir(&format!("bare-{label}"));
        let client = rpjrt::Client::from_path(&plugin).unwrap();
        let program = rpjrt::Program::read(fixture("mul_add.mlir"), None).unwrap();
        let exe = client
            .compile(&program, &rpjrt::CompileOptions::default())
            .unwrap();
        let blob = dir.join("mul_add.bin");
        std::fs::write(&blob, exe.serialize_bare().unwrap()).unwrap();
        drop(exe);
        drop(client);

        let what = format!("{label}: bare executable");
        let got = ok(
            run_program(
                &blob,
                &plugin,
                &["--format", "executable", "-i", A, "-i", B],
            ),
            &what,
        );
        assert_eq!(got, WANT, "{what}");
        // The input specs are the executable's own: --random fills them, a wrong shape is
        // refused naming the parameter's spec.
        ok(
            run_program(&blob, &plugin, &["--format", "executable", "--random"]),
            &what,
        );
        let text = usage_error(
            run_program(
                &blob,
                &plugin,
                &["--format", "executable", "-i", "[1,2]:f32", "-i", B],
            ),
            &what,
        );
        assert!(text.contains("float32[8]"), "{what}: {text}");
        // Never guessed from the bytes: without --format the file is refused, saying how.
        let text = usage_error(run_program(&blob, &plugin, &["--random"]), &what);
        assert!(text.contains("executable"), "{what}: {text}");
        // A bare executable carries no parameter names: a name is refused, the indices listed.
        let text = usage_error(
            run_program(
                &blob,
                &plugin,
                &[
                    "--format",
                    "executable",
                    "-i",
                    &format!("a={A}"),
                    "--random",
                ],
            ),
            &what,
        );
        assert!(
            text.contains("carries no parameter names"),
            "{what}: {text}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn inputs_bind_by_parameter_name() {
    for (label, plugin) in plugins() {
        let dir = tmpdir(&format!("named-{label}"));
        let jax = dir.join("f.jax_export.mlir");
        std::fs::write(&jax, JAX_TEXT).unwrap();
        // Hand-written text names its parameters %a and %b; jax.export text and its
        // portable artifact (bytecode) by location.
        for (program, first, second) in [
            (fixture("mul_add.mlir"), "a", "b"),
            (jax.clone(), "x", "y"),
            (fixture("mul_add.jax_export.mlirbc"), "a", "b"),
        ] {
            let what = format!("{label}: {}", program.display());
            // Given in the other order, by name.
            let got = ok(
                run_program(
                    &program,
                    &plugin,
                    &[
                        "-i",
                        &format!("{second}={B}"),
                        "-i",
                        &format!("{first}={A}"),
                    ],
                ),
                &what,
            );
            assert_eq!(got, WANT, "{what}");
            // Names and indices mix; .npy files bind by name too.
            let npy = dir.join("b.npy");
            let b = rpjrt_npy::literal::parse_literal(B, None).unwrap();
            rpjrt_npy::save_npy(&npy, &b).unwrap();
            let got = ok(
                run_program(
                    &program,
                    &plugin,
                    &[
                        "-i",
                        &format!("{second}={}", npy.display()),
                        "-i",
                        &format!("0={A}"),
                    ],
                ),
                &what,
            );
            assert_eq!(got, WANT, "{what}");

            let listed = |text: &str| {
                assert!(
                    text.contains(&format!("\"{first}\" (float32[8])"))
                        && text.contains(&format!("\"{second}\" (float32[8])")),
                    "{what}: the message lists the parameters: {text}"
                );
            };
            let text = usage_error(
                run_program(&program, &plugin, &["-i", &format!("z={A}"), "--random"]),
                &what,
            );
            assert!(
                text.contains("\"z\"") && text.contains("no parameter"),
                "{what}: {text}"
            );
            listed(&text);
            let text = usage_error(
                run_program(
                    &program,
                    &plugin,
                    &["-i", &format!("{first}={A}"), "-i", &format!("0={B}")],
                ),
                &what,
            );
            assert!(text.contains("given twice"), "{what}: {text}");
            listed(&text);
            let text = usage_error(
                run_program(&program, &plugin, &["-i", &format!("{first}={A}")]),
                &what,
            );
            assert!(
                text.contains(&format!("\"{second}\"")) && text.contains("was not given"),
                "{what}: {text}"
            );
            listed(&text);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
