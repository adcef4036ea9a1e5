//! Round 22, finding 1: an alias buffer that failed, or is still pending and fails later,
//! given NOT donated to a parameter the program aliases to an output (`tf.aliasing_output`,
//! what JAX's `donate_argnums` lowers to) aborted the process inside both CPU plugins
//! ("Check failed: src_buffers[i].IsConcrete()"): the plugin copies such an input at once
//! and cannot copy one without memory. Every execute path (execute, execute_into,
//! execute_with with events, execute_on, execute_sharded, prepare, a Session program that
//! does not donate) must raise the alias's own error instead, with the process alive.
//!
//! Each case runs in a child process (the test binary itself, test `child_case`), so that a
//! regression fails the test instead of killing the test runner.

mod common;

use std::process::Command;

use common::{compile, compile_with, plugin_path, replicas, Which};
use rpjrt::{
    Buffer, Client, ClientOptions, Code, CompileOptions, ElementType, Error, ExecuteOptions,
    Session, SlotValue,
};

const CASE_VAR: &str = "RPJRT_ALIAS22_CASE";
const PLUGIN_VAR: &str = "RPJRT_ALIAS22_PLUGIN";

/// `2 * a`, whose output may alias its parameter.
const ALIASED: &str =
    "func.func public @main(%a: tensor<8xf32> {tf.aliasing_output = 0 : i32}) -> tensor<8xf32> {
  %0 = stablehlo.add %a, %a : tensor<8xf32>
  return %0 : tensor<8xf32>
}";

/// [`ALIASED`] with a second, non-aliased parameter: `2 * a + b`.
const ALIASED_TWO: &str = "func.func public @main(%a: tensor<8xf32> {tf.aliasing_output = 0 : i32}, %b: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.add %a, %a : tensor<8xf32>
  %1 = stablehlo.add %0, %b : tensor<8xf32>
  return %1 : tensor<8xf32>
}";

/// Parameter 1 aliased to output 1: `(x, 2 * a)`.
const ALIASED_SECOND: &str = "func.func public @main(%x: tensor<8xf32>, %a: tensor<8xf32> {tf.aliasing_output = 1 : i32}) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = stablehlo.add %a, %a : tensor<8xf32>
  return %x, %0 : tensor<8xf32>, tensor<8xf32>
}";

/// What one child prints: the outcome of waiting for `out`, then that it survived.
fn report(out: Result<Vec<Buffer>, Error>) {
    match out.and_then(|o| o[0].to_vec_of::<f32>()) {
        Ok(v) => println!("\n@RESULT {v:?}"),
        Err(e) => println!("\n@RAISED {:?} {e}", e.code()),
    }
}

/// The body of one case, run in a child process (see the module docs).
fn run_case(case: &str, c: &Client) {
    let d = c.default_device().unwrap();
    let exe = compile(c, ALIASED);
    let ones = || c.buffer_from_slice(&[1.0f32; 8], &[8], &d).unwrap();
    let (al, ful) = c
        .create_alias_buffer(ElementType::F32, &[8], &d, None)
        .unwrap();
    let fail = |f: rpjrt::AliasFulfiller| f.fail(Code::DataLoss, "no data").unwrap();
    match case {
        "failed" => {
            fail(ful);
            report(exe.execute(&[&al]));
        }
        "failed_donated" => {
            fail(ful);
            let donate = ExecuteOptions {
                donate: vec![0],
                ..Default::default()
            };
            report(
                exe.execute_with(&[vec![&al]], &donate)
                    .map(|mut r| r.outputs.remove(0)),
            );
        }
        "failed_unaliased" => {
            fail(ful);
            let plain = compile(c, &ALIASED.replace(" {tf.aliasing_output = 0 : i32}", ""));
            report(plain.execute(&[&al]));
        }
        "dropped" => {
            drop(ful);
            report(exe.execute(&[&al]));
        }
        "pending_then_fail" => {
            let out = exe.execute(&[&al]);
            fail(ful);
            report(out);
        }
        "pending_then_drop" => {
            let mut out = Vec::new();
            let r = exe.execute_into(&[&al], &mut out);
            drop(ful);
            report(r.map(|()| out));
        }
        "pending_then_fulfill" => {
            let out = exe.execute(&[&al]);
            ful.fulfill(&ones()).unwrap();
            report(out);
        }
        "fulfilled" => {
            ful.fulfill(&ones()).unwrap();
            report(exe.execute(&[&al]));
            // Known ready now: passed as it is, and still right.
            al.block_until_ready().unwrap();
            report(exe.execute(&[&al]));
        }
        "alias_of_failed" => {
            // An alias fulfilled with a failed alias has no memory either.
            fail(ful);
            let (al2, ful2) = c
                .create_alias_buffer(ElementType::F32, &[8], &d, None)
                .unwrap();
            ful2.fulfill(&al).unwrap();
            report(exe.execute(&[&al2]));
        }
        "every_memory" => {
            // An alias in each memory of the device, given to parameter 1 (aliased there).
            let exe = compile(c, ALIASED_SECOND);
            for m in d.addressable_memories().unwrap() {
                let (al, ful) = c
                    .create_alias_buffer(ElementType::F32, &[8], &d, Some(&m))
                    .unwrap();
                let out = exe.execute(&[&ones(), &al]);
                fail(ful);
                report(out.map(|mut o| vec![o.remove(1)]));
            }
        }
        "second_param" => {
            // Only the aliased parameter needs a copy; the same alias elsewhere is fine.
            let two = compile(c, ALIASED_TWO);
            let out = two.execute(&[&al, &al]);
            fail(ful);
            report(out);
        }
        "with_events" => {
            let opts = ExecuteOptions {
                completion_events: true,
                ..Default::default()
            };
            let out = exe.execute_with(&[vec![&al]], &opts);
            fail(ful);
            report(out.map(|mut r| r.outputs.remove(0)));
        }
        "execute_on" => {
            let portable = CompileOptions {
                portable: true,
                ..Default::default()
            };
            let exe = compile_with(c, ALIASED, &portable);
            let out = exe.execute_on(&d, &[&al]);
            fail(ful);
            report(out);
        }
        "sharded" => {
            let exe = compile_with(c, ALIASED, &replicas(2));
            let devs = exe.addressable_devices().unwrap();
            let other = c.buffer_from_slice(&[1.0f32; 8], &[8], &devs[1]).unwrap();
            let out = exe.execute_sharded(&[vec![&al], vec![&other]]);
            fail(ful);
            report(out.map(|mut lists| lists.remove(0)));
        }
        "prepared_failed" => {
            fail(ful);
            let p = exe.prepare(&[vec![&al]], &[]).unwrap();
            report(p.call_and_wait().map(|o| o.buffers().to_vec()));
        }
        "prepared_pending" => {
            let p = exe.prepare(&[vec![&al]], &[]).unwrap();
            let first = p.call();
            fail(ful);
            report(first.map(|o| o.buffers().to_vec()));
            report(p.call_and_wait().map(|o| o.buffers().to_vec()));
        }
        "prepared_pending_fulfill" => {
            let p = exe.prepare(&[vec![&al]], &[]).unwrap();
            ful.fulfill(&ones()).unwrap();
            report(p.call_and_wait().map(|o| o.buffers().to_vec()));
        }
        "session_nodonate" => {
            let s = Session::new(c).unwrap();
            s.bind("w", SlotValue::Buffer(al.clone())).unwrap();
            let prog = s.program_with(&exe, &["w"], &["v"], false).unwrap();
            let stepped = prog.call();
            fail(ful);
            report(stepped.and_then(|()| s.fetch("v")).map(|b| vec![b]));
        }
        other => panic!("unknown case {other}"),
    }
    println!("\n@SURVIVED");
}

/// Runs the case named by `RPJRT_ALIAS22_CASE` on the plugin `RPJRT_ALIAS22_PLUGIN` names;
/// does nothing when the variable is not set (in the ordinary test run).
#[test]
fn child_case() {
    let Ok(case) = std::env::var(CASE_VAR) else {
        return;
    };
    let which = match std::env::var(PLUGIN_VAR).as_deref() {
        Ok("old") => Which::Old,
        _ => Which::New,
    };
    let client = Client::new(&common::plugin(which), &ClientOptions::new()).unwrap();
    run_case(&case, &client);
}

/// Runs `case` in a child on each plugin: its stdout, after checking it exited normally.
fn each_plugin(case: &str) -> Vec<String> {
    Which::BOTH
        .iter()
        .map(|&which| {
            let out = Command::new(std::env::current_exe().unwrap())
                .args(["child_case", "--exact", "--nocapture", "--test-threads=1"])
                .env(CASE_VAR, case)
                .env(PLUGIN_VAR, if which == Which::Old { "old" } else { "new" })
                .env(which.var(), plugin_path(which))
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                out.status.success() && stdout.contains("@SURVIVED"),
                "case {case} on {which:?}: {}\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            stdout
        })
        .collect()
}

/// Every outcome line of `case` is the alias's own error (its code and message).
fn raises_the_alias_error(case: &str) {
    for out in each_plugin(case) {
        let lines = outcomes(&out);
        assert!(!lines.is_empty(), "case {case}: no outcome\n{out}");
        for l in lines {
            assert!(l.starts_with("@RAISED"), "case {case}: {l}");
            assert!(
                l.contains("no data") || l.contains("dropped unfulfilled"),
                "case {case}: not the alias's error: {l}"
            );
        }
    }
}

#[test]
fn a_failed_alias_given_to_an_aliased_parameter_raises() {
    raises_the_alias_error("failed");
    raises_the_alias_error("dropped");
}

#[test]
fn a_pending_alias_that_fails_later_raises() {
    raises_the_alias_error("pending_then_fail");
    raises_the_alias_error("pending_then_drop");
    raises_the_alias_error("second_param");
    raises_the_alias_error("alias_of_failed");
    raises_the_alias_error("every_memory");
}

#[test]
fn every_execute_path_raises() {
    for case in ["with_events", "execute_on", "sharded", "session_nodonate"] {
        raises_the_alias_error(case);
    }
}

#[test]
fn a_prepared_call_raises() {
    raises_the_alias_error("prepared_failed");
    raises_the_alias_error("prepared_pending");
}

/// The outcome lines of `out`.
fn outcomes(out: &str) -> Vec<&str> {
    let outcome = |l: &&str| l.starts_with("@RAISED") || l.starts_with("@RESULT");
    out.lines().filter(outcome).collect()
}

/// The error is the one the same alias gives donated, or to a program without aliases
/// (the plugins report either as INTERNAL, with the alias's message).
#[test]
fn the_error_is_the_one_a_donated_call_gives() {
    let failed = each_plugin("failed");
    let donated = each_plugin("failed_donated");
    let unaliased = each_plugin("failed_unaliased");
    for ((f, d), u) in failed.iter().zip(&donated).zip(&unaliased) {
        assert_eq!(outcomes(f), outcomes(d));
        assert_eq!(outcomes(f), outcomes(u));
    }
}

#[test]
fn fulfilled_aliases_still_compute() {
    for case in [
        "pending_then_fulfill",
        "fulfilled",
        "prepared_pending_fulfill",
    ] {
        for out in each_plugin(case) {
            let results = outcomes(&out);
            assert!(!results.is_empty(), "case {case}\n{out}");
            for l in results {
                assert!(
                    l.contains("[2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0]"),
                    "{case}: {l}"
                );
            }
        }
    }
}
