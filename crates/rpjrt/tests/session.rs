//! Sessions (named slots, feedback, donation, lazy loading) and Shardy detection on both
//! CPU plugins.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;
use rpjrt::sharding;
use rpjrt::{ClientOptions, ElementType, Error, HostArray, Program, Session, SlotState, SlotValue};

/// The SGD step (`sgd_step.mlir`, given as `text`) compiled on `client`, a new session, and
/// the step as its program `(w, x, y) -> (w, loss)`.
fn sgd_session(
    client: &rpjrt::Client,
    text: &str,
) -> (rpjrt::Executable, Session, rpjrt::SessionProgram) {
    let exe = compile(client, text);
    let session = Session::new(client).unwrap();
    let step = session
        .program(&exe, &["w", "x", "y"], &["w", "loss"])
        .unwrap();
    (exe, session, step)
}

fn host(values: &[f32], dims: &[i64]) -> SlotValue {
    SlotValue::Host(HostArray::from_owner(
        std::sync::Arc::new(f32_bytes(values)),
        ElementType::F32,
        dims.to_vec(),
    ))
}

/// The fixture's step in plain Rust: w -= 0.1 * d/dw mean((x @ w - y)^2); returns the loss.
fn reference_step(w: &mut [f32], x: &[f32], y: &[f32]) -> f32 {
    let mut r = [0f32; 16];
    for i in 0..8 {
        for j in 0..2 {
            let mut s = 0f32;
            for k in 0..4 {
                s += x[i * 4 + k] * w[k * 2 + j];
            }
            r[i * 2 + j] = s - y[i * 2 + j];
        }
    }
    let loss = r.iter().map(|v| v * v).sum::<f32>() / 16.0;
    for k in 0..4 {
        for j in 0..2 {
            let g: f32 = (0..8)
                .map(|i| 2.0 * r[i * 2 + j] * x[i * 4 + k])
                .sum::<f32>()
                / 16.0;
            w[k * 2 + j] -= 0.1 * g;
        }
    }
    loss
}

#[test]
fn session_feeds_back_donates_and_loads_lazily() {
    let text = String::from_utf8(fixture("sgd_step.mlir")).unwrap();
    for_each_plugin(|_, client| {
        let exe = compile(client, &text);
        assert_eq!(exe.input_output_aliases().unwrap(), Some(vec![(0, 0)]));
        let session = Session::new(client).unwrap();
        let step = session
            .program(&exe, &["w", "x", "y"], &["w", "loss"])
            .unwrap();
        assert_eq!(step.donated(), vec!["w".to_string()]);
        assert!(format!("{step:?}").contains("(w, x, y) -> (w, loss), donates=[w]"));
        let w0: Vec<f32> = (0..8).map(|i| 0.1 * i as f32).collect();
        let x: Vec<f32> = (0..32).map(|i| ((i * 7) % 5) as f32 / 5.0).collect();
        let y: Vec<f32> = (0..16).map(|i| ((i * 3) % 4) as f32 / 4.0).collect();
        let device = client.default_device().unwrap();
        let w_buf = client.buffer_from_slice(&w0, &[4, 2], &device).unwrap();
        session.bind("w", SlotValue::Buffer(w_buf.clone())).unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let (c, xv) = (Arc::clone(&calls), x.clone());
        session
            .bind_lazy(
                "x",
                Arc::new(move || {
                    c.fetch_add(1, Ordering::SeqCst);
                    Ok(host(&xv, &[8, 4]))
                }),
            )
            .unwrap();
        session.bind("y", host(&y, &[8, 2])).unwrap();
        let unused = Arc::new(AtomicUsize::new(0));
        let u = Arc::clone(&unused);
        session
            .bind_lazy(
                "unused",
                Arc::new(move || {
                    u.fetch_add(1, Ordering::SeqCst);
                    Ok(host(&[0.0], &[1]))
                }),
            )
            .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        let mut w_ref = w0.clone();
        for _ in 0..20 {
            step.call().unwrap();
            let want = reference_step(&mut w_ref, &x, &y);
            let got = session.fetch("loss").unwrap().to_vec_of::<f32>().unwrap()[0];
            assert!(
                (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                "{got} vs {want}"
            );
        }
        let w = session.fetch("w").unwrap().to_vec_of::<f32>().unwrap();
        for (a, b) in w.iter().zip(&w_ref) {
            assert!((a - b).abs() < 1e-5, "{w:?} vs {w_ref:?}");
        }
        // The loader ran once; the unused slot was never loaded; uploads: x and y.
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(unused.load(Ordering::SeqCst), 0);
        assert_eq!((session.uploads(), session.loads()), (2, 1));
        // The caller's w was donated to the first step; x and y stay usable.
        assert!(w_buf.is_deleted());
        expect_err(w_buf.to_vec(), &["donated"]);
        assert!(!session.fetch("x").unwrap().is_deleted());
        let states: Vec<(String, SlotState)> = session
            .slots()
            .into_iter()
            .map(|s| (s.name, s.state))
            .collect();
        assert!(states.contains(&("unused".into(), SlotState::Pending)));
        assert!(format!("{session:?}").contains("w: float32[4, 2] ready"));
    });
}

#[test]
fn session_refuses_mismatches_naming_the_slot() {
    let text = String::from_utf8(fixture("sgd_step.mlir")).unwrap();
    for_each_plugin(|_, client| {
        let (exe, session, step) = sgd_session(client, &text);
        let e = expect_err(
            session.bind("w", host(&[0.0; 6], &[3, 2])),
            &["slot \"w\"", "float32[4, 2]", "float32[3, 2]"],
        );
        assert!(matches!(e, Error::InvalidArgument(_)));
        expect_err(step.call(), &["slot \"w\" has no value"]);
        expect_err(
            session.program(&exe, &["w", "x"], &["w", "loss"]),
            &["3 argument(s)", "2 input slot"],
        );
        // A slot that means two different things in two programs.
        expect_err(
            session.program(&exe, &["x", "w", "y"], &["w", "loss"]),
            &["slot \"x\" holds float32[8, 4]", "argument 0"],
        );
        // A lazy value of the wrong shape fails when loaded, naming the slot.
        session.bind("w", host(&[0.0; 8], &[4, 2])).unwrap();
        session.bind("y", host(&[0.0; 16], &[8, 2])).unwrap();
        session
            .bind_lazy("x", Arc::new(|| Ok(host(&[0.0; 4], &[4]))))
            .unwrap();
        expect_err(step.call(), &["slot \"x\"", "float32[8, 4]", "float32[4]"]);
        // Without donation the bound buffer stays valid.
        let keep = session
            .program_with(&exe, &["w", "x", "y"], &["w", "loss"], false)
            .unwrap();
        assert!(keep.donated().is_empty());
        expect_err(session.fetch("nope"), &["no slot \"nope\""]);
        // fetch_loaded never runs a loader.
        expect_err(session.fetch_loaded("nope"), &["no slot \"nope\""]);
        let loads = session.loads();
        assert!(
            session.fetch_loaded("x").unwrap().is_none(),
            "x is still lazy"
        );
        assert_eq!(session.loads(), loads, "no loader ran");
        let w = session.fetch_loaded("w").unwrap().expect("w is bound");
        assert_eq!(w.dims(), &[4, 2]);
        expect_err(
            session.fetch_loaded("loss"),
            &["slot \"loss\" has no value yet"],
        );
        w.delete().unwrap();
        expect_err(session.fetch_loaded("w"), &["slot \"w\"", "deleted"]);
    });
}

#[test]
fn shardy_modules_are_detected_in_text_and_bytecode() {
    for name in [
        "shardy_sin.mlir",
        "shardy_sin.mlirbc",
        "shardy_sin.jax_export.mlirbc",
    ] {
        assert!(
            sharding::uses_shardy(&Program::mlir(fixture(name))),
            "{name}"
        );
    }
    let dialects = sharding::bytecode_dialects(&fixture("shardy_sin.mlirbc")).unwrap();
    assert!(dialects.contains(&"sdy".to_string()), "{dialects:?}");
    assert!(dialects.contains(&"stablehlo".to_string()), "{dialects:?}");
    for name in [
        "mul_add.mlir",
        "mul_add.mlirbc",
        "mul_add.jax_export.mlirbc",
    ] {
        assert!(
            !sharding::uses_shardy(&Program::mlir(fixture(name))),
            "{name}"
        );
    }
    let plain = sharding::bytecode_dialects(&fixture("mul_add.mlirbc")).unwrap();
    assert!(!plain.contains(&"sdy".to_string()), "{plain:?}");
}

#[test]
fn bind_all_is_all_or_nothing() {
    for_each_plugin(|_, client| {
        let session = Session::new(client).unwrap();
        session.bind("a", host(&[1.0; 2], &[2])).unwrap();
        // One value of the wrong shape: nothing changes, and the slot is named.
        let e = session
            .bind_all(vec![
                ("b".into(), host(&[2.0; 3], &[3])),
                ("a".into(), host(&[3.0; 4], &[4])),
            ])
            .unwrap_err();
        assert!(e.to_string().contains("slot \"a\" holds float32[2]"), "{e}");
        assert_eq!(session.slots().len(), 1);
        assert_eq!(
            session.fetch("a").unwrap().to_vec_of::<f32>().unwrap(),
            [1.0; 2]
        );
        // A name given twice is refused by name; an empty name too.
        let twice = vec![
            ("c".into(), host(&[0.0], &[1])),
            ("c".into(), host(&[1.0], &[1])),
        ];
        expect_err(
            session.bind_all(twice),
            &["slot \"c\" is given more than one value"],
        );
        expect_err(
            session.bind_all(vec![(String::new(), host(&[0.0], &[1]))]),
            &["a slot name is empty"],
        );
        // All good: every slot changes, each upload counted.
        let uploads = session.uploads();
        session
            .bind_all(vec![
                ("a".into(), host(&[5.0; 2], &[2])),
                ("b".into(), host(&[6.0; 3], &[3])),
            ])
            .unwrap();
        assert_eq!(session.uploads(), uploads + 2);
        assert_eq!(
            session.fetch("a").unwrap().to_vec_of::<f32>().unwrap(),
            [5.0; 2]
        );
        assert_eq!(
            session.fetch("b").unwrap().to_vec_of::<f32>().unwrap(),
            [6.0; 3]
        );
    });
}

/// The body of the custom-call handlers below: `ret[0] = arg[0] + 1` on `f32[4]`.
fn add_one(call: &mut rpjrt::ffi::CallFrame<'_>) -> Result<(), rpjrt::ffi::FfiError> {
    let (args, rets) = call.split();
    let x = args[0].as_slice::<f32>()?;
    for (y, x) in rets[0].as_mut_slice::<f32>()?.iter_mut().zip(x) {
        *y = x + 1.0;
    }
    Ok(())
}

/// `f32[4] -> f32[4]` through the custom call `target`.
fn custom_call_program(target: &str) -> String {
    format!(
        "func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}}"
    )
}

/// A custom-call handler of a session's program uses that session (reads, binds, and a
/// nested call of the program): the reads and binds work, the nested call is refused with
/// "session is stepping", and nothing hangs (the session's lock is never held across
/// execute; the CPU plugins run custom calls on the calling thread).
#[test]
fn handler_touching_its_session_does_not_deadlock() {
    use std::sync::Mutex;
    static SESSION: Mutex<Option<(Session, rpjrt::SessionProgram)>> = Mutex::new(None);
    static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
    for_each_plugin_only(|p| {
        let p = p.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let client = rpjrt::Client::new(&p, &ClientOptions::new()).unwrap();
                let target = format!("session_touch_{}", if is_old(&p) { "old" } else { "new" });
                rpjrt::ffi::register(&client, &target, |call| {
                    let (s, prog) = SESSION.lock().unwrap().clone().expect("session set");
                    let mut seen = SEEN.lock().unwrap();
                    seen.push(format!("slots {}", s.slots().len()));
                    seen.push(format!("fetch {}", s.fetch("w").is_ok()));
                    seen.push(format!(
                        "bind {}",
                        s.bind("other", host(&[1.0], &[1])).is_ok()
                    ));
                    seen.push(match prog.call() {
                        Ok(()) => "nested ran".into(),
                        Err(e) => e.to_string(),
                    });
                    add_one(call)
                })
                .unwrap();
                let exe = compile(&client, &custom_call_program(&target));
                let s = Session::new(&client).unwrap();
                let prog = s.program(&exe, &["w"], &["w"]).unwrap();
                s.bind("w", host(&[0.0; 4], &[4])).unwrap();
                *SESSION.lock().unwrap() = Some((s.clone(), prog.clone()));
                SEEN.lock().unwrap().clear();
                prog.call().unwrap();
                let w = s.fetch("w").unwrap().to_vec_of::<f32>().unwrap();
                *SESSION.lock().unwrap() = None;
                (w, SEEN.lock().unwrap().clone())
            }));
            let _ = tx.send(r);
        });
        let (w, seen) = match rx.recv_timeout(std::time::Duration::from_secs(120)) {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => std::panic::resume_unwind(e),
            Err(_) => panic!("a handler using its session hung"),
        };
        assert_eq!(w, vec![1.0; 4]);
        assert_eq!(
            &seen[..3],
            &["slots 1", "fetch true", "bind true"],
            "{seen:?}"
        );
        assert!(seen[3].contains("session is stepping"), "{seen:?}");
    });
}

#[test]
fn call_outputs_returns_this_steps_outputs_including_discarded_ones() {
    let text = String::from_utf8(fixture("sgd_step.mlir")).unwrap();
    for_each_plugin(|_, client| {
        let exe = compile(client, &text);
        let session = Session::new(client).unwrap();
        // The loss is discarded: it is still returned, and no slot holds it.
        let step = session.program(&exe, &["w", "x", "y"], &["w", ""]).unwrap();
        let w0: Vec<f32> = (0..8).map(|i| 0.1 * i as f32).collect();
        let x: Vec<f32> = (0..32).map(|i| ((i * 7) % 5) as f32 / 5.0).collect();
        let y: Vec<f32> = (0..16).map(|i| ((i * 3) % 4) as f32 / 4.0).collect();
        session.bind("w", host(&w0, &[4, 2])).unwrap();
        session.bind("x", host(&x, &[8, 4])).unwrap();
        session.bind("y", host(&y, &[8, 2])).unwrap();
        let mut w_ref = w0.clone();
        for _ in 0..3 {
            let outs = step.call_outputs().unwrap();
            let want = reference_step(&mut w_ref, &x, &y);
            assert_eq!(outs.len(), 2);
            let loss = outs[1].to_vec_of::<f32>().unwrap()[0];
            assert!(
                (loss - want).abs() <= 1e-5 * want.abs().max(1.0),
                "{loss} vs {want}"
            );
            // The output stored in slot w is the slot's buffer: equal contents.
            let w = outs[0].to_vec_of::<f32>().unwrap();
            assert_eq!(w, session.fetch("w").unwrap().to_vec_of::<f32>().unwrap());
            for (a, b) in w.iter().zip(&w_ref) {
                assert!((a - b).abs() < 1e-5, "{w:?} vs {w_ref:?}");
            }
        }
        // The returned w is shared with the slot: the next step donates it.
        let outs = step.call_outputs().unwrap();
        step.call().unwrap();
        assert!(outs[0].is_deleted());
        assert!(!outs[1].is_deleted());
        assert_eq!(
            session
                .slots()
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>(),
            vec!["w", "x", "y"]
        );
    });
}

#[test]
fn loader_cycles_are_refused_instead_of_recursing() {
    let text = String::from_utf8(fixture("sgd_step.mlir")).unwrap();
    for_each_plugin(|_, client| {
        let (_exe, session, step) = sgd_session(client, &text);
        // x's loader asks for x: before, this recursed until the stack ran out.
        let s = session.clone();
        session
            .bind_lazy("x", Arc::new(move || s.fetch("x").map(SlotValue::Buffer)))
            .unwrap();
        expect_err(session.fetch("x"), &["loader cycle", "\"x\" -> \"x\""]);
        // Through another slot: y's loader needs x, whose loader needs y.
        let s = session.clone();
        session
            .bind_lazy("x", Arc::new(move || s.fetch("y").map(SlotValue::Buffer)))
            .unwrap();
        let s = session.clone();
        session
            .bind_lazy("y", Arc::new(move || s.fetch("x").map(SlotValue::Buffer)))
            .unwrap();
        expect_err(
            session.fetch("y"),
            &["loader cycle", "\"y\" -> \"x\" -> \"y\""],
        );
        // A loader that calls a program reading its own slot.
        session.bind("w", host(&[0.0; 8], &[4, 2])).unwrap();
        session.bind("y", host(&[0.0; 16], &[8, 2])).unwrap();
        let (s, p) = (session.clone(), step.clone());
        session
            .bind_lazy(
                "x",
                Arc::new(move || {
                    p.call()?;
                    s.fetch("y").map(|_| host(&[0.0; 32], &[8, 4]))
                }),
            )
            .unwrap();
        expect_err(step.call(), &["loader cycle", "\"x\""]);
        // Nothing is left marked: a loader that does not cycle then runs, and so does the step.
        session
            .bind_lazy("x", Arc::new(|| Ok(host(&[0.0; 32], &[8, 4]))))
            .unwrap();
        step.call().unwrap();
        assert_eq!(session.fetch("x").unwrap().dims(), &[8, 4]);
    });
}

#[test]
fn values_and_programs_of_another_client_are_named_as_such() {
    let text = String::from_utf8(fixture("sgd_step.mlir")).unwrap();
    for_each_plugin(|plugin, client| {
        // Both clients' first devices print as the same name: the error must say which
        // client, not "on CpuDevice(id=0), but the session runs on CpuDevice(id=0)".
        let other = rpjrt::Client::new(plugin, &ClientOptions::new()).unwrap();
        let session = Session::new(client).unwrap();
        let foreign = other
            .buffer_from_slice(&[0f32; 8], &[4, 2], &other.default_device().unwrap())
            .unwrap();
        expect_err(
            session.bind("w", SlotValue::Buffer(foreign)),
            &["slot \"w\"", "of another client"],
        );
        expect_err(
            session.program(&compile(&other, &text), &["w", "x", "y"], &["w", "loss"]),
            &["of another client", "session's client"],
        );
        // The same device of the same client is not "another client".
        let mine = client
            .buffer_from_slice(&[0f32; 8], &[4, 2], &client.default_device().unwrap())
            .unwrap();
        session.bind("w", SlotValue::Buffer(mine)).unwrap();
    });
}

/// Binds and fetches from another thread while a step runs wait for that step: a bind of
/// the step's output slot is not overwritten by the step (a lost update), and a fetch of a
/// slot the step replaces returns the step's output, never the input it is donating.
#[test]
fn binds_and_fetches_from_other_threads_wait_for_the_running_step() {
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};
    static ENTERED: AtomicBool = AtomicBool::new(false);
    static GO: AtomicBool = AtomicBool::new(false);
    for_each_plugin(|p, client| {
        let target = format!("session_hold_{}", if is_old(p) { "old" } else { "new" });
        rpjrt::ffi::register(client, &target, |call| {
            ENTERED.store(true, Ordering::SeqCst);
            let t0 = Instant::now();
            while !GO.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(1));
            }
            add_one(call)
        })
        .unwrap();
        let exe = compile(client, &custom_call_program(&target));
        let s = Session::new(client).unwrap();
        let prog = s.program(&exe, &["w"], &["w"]).unwrap();
        s.bind("w", host(&[0.0; 4], &[4])).unwrap();
        // Runs one step on its own thread while `during` runs on another one, started once
        // the step is inside its handler; `during` must still be waiting 200 ms later.
        let step_with = |during: Box<dyn FnOnce() -> Vec<f32> + Send>| -> Vec<f32> {
            ENTERED.store(false, Ordering::SeqCst);
            GO.store(false, Ordering::SeqCst);
            std::thread::scope(|sc| {
                let stepper = sc.spawn(|| prog.call().unwrap());
                while !ENTERED.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                let done = Arc::new(AtomicBool::new(false));
                let d = Arc::clone(&done);
                let other = sc.spawn(move || {
                    let v = during();
                    d.store(true, Ordering::SeqCst);
                    v
                });
                std::thread::sleep(Duration::from_millis(200));
                let waited = !done.load(Ordering::SeqCst);
                GO.store(true, Ordering::SeqCst);
                stepper.join().unwrap();
                let v = other.join().unwrap();
                assert!(
                    waited,
                    "{}: the other thread did not wait for the step",
                    label(p)
                );
                v
            })
        };
        let s2 = s.clone();
        let fetched = step_with(Box::new(move || {
            s2.fetch("w").unwrap().to_vec_of::<f32>().unwrap()
        }));
        assert_eq!(fetched, vec![1.0; 4], "{}: fetch mid-step", label(p));
        let s3 = s.clone();
        step_with(Box::new(move || {
            s3.bind("w", host(&[5.0; 4], &[4])).unwrap();
            vec![]
        }));
        let w = s.fetch("w").unwrap().to_vec_of::<f32>().unwrap();
        assert_eq!(
            w,
            vec![5.0; 4],
            "{}: a bind made mid-step was lost",
            label(p)
        );
    });
}

/// An unknown slot's error names at most 16 of the session's slots, then how many more.
#[test]
fn missing_slot_error_names_a_bounded_number_of_slots() {
    for_each_plugin(|p, client| {
        let s = Session::new(client).unwrap();
        for i in 0..40 {
            s.bind(&format!("slot{i}"), host(&[i as f32], &[1]))
                .unwrap();
        }
        let e = s.fetch("nope").unwrap_err().to_string();
        assert!(
            e.contains("\"nope\"") && e.contains("\"slot15\""),
            "{}: {e}",
            label(p)
        );
        assert!(
            !e.contains("\"slot16\"") && e.contains("and 24 more"),
            "{}: {e}",
            label(p)
        );
    });
}

#[test]
fn one_buffer_in_two_slots_is_not_donated_from_under_the_other() {
    // Two clones of one buffer bound to two slots slipped past the check (it compared the
    // handles, not the buffer): every call of a program donating one failed.
    let step_text = "func.func public @main(%a: tensor<4xf32> {tf.aliasing_output = 0 : i32}, %b: tensor<4xf32>) -> tensor<4xf32> {
  %r = stablehlo.add %a, %b : tensor<4xf32>
  return %r : tensor<4xf32>
}";
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let exe = compile(c, step_text);
        let s = Session::new(c).unwrap();
        let b = c.buffer_from_slice(&[1f32; 4], &[4], &d).unwrap();
        s.bind("theta", SlotValue::Buffer(b.clone())).unwrap();
        s.bind("x", SlotValue::Buffer(b)).unwrap();
        let step = s.program(&exe, &["theta", "x"], &["theta"]).unwrap();
        step.call().unwrap();
        step.call().unwrap();
        assert_eq!(
            s.fetch("theta").unwrap().to_vec_of::<f32>().unwrap(),
            [3.0; 4]
        );
        assert_eq!(s.fetch("x").unwrap().to_vec_of::<f32>().unwrap(), [1.0; 4]);
    });
}

/// `w <- w + 1` on f32[8], with `w` aliased to the output (donated in a session).
const DONATE_STEP: &str =
    "func.func public @main(%a: tensor<8xf32> {tf.aliasing_output = 0 : i32}) -> tensor<8xf32> {
  %one = stablehlo.constant dense<1.0> : tensor<8xf32>
  %r = stablehlo.add %a, %one : tensor<8xf32>
  return %r : tensor<8xf32>
}";

#[test]
fn a_buffer_another_slot_holds_is_not_donated_by_a_step() {
    // A snapshot kept in another slot (a step's output bound as it is) was donated from
    // under it by the next step through "w", and then blamed on "outside this session".
    for_each_plugin(|_, c| {
        let exe = compile(c, DONATE_STEP);
        let s = Session::new(c).unwrap();
        let step = s.program(&exe, &["w"], &["w"]).unwrap();
        assert_eq!(step.donated(), vec!["w".to_string()]);
        s.bind("w", host(&[0.0; 8], &[8])).unwrap();
        let out = step.call_outputs().unwrap();
        s.bind("snap", SlotValue::Buffer(out[0].clone())).unwrap();
        step.call().unwrap();
        step.call().unwrap();
        assert_eq!(s.fetch("w").unwrap().to_vec_of::<f32>().unwrap(), [3.0; 8]);
        assert_eq!(
            s.fetch("snap").unwrap().to_vec_of::<f32>().unwrap(),
            [1.0; 8]
        );
        assert!(!out[0].is_deleted());
        // Once the snapshot holds a buffer of its own, the step donates again.
        s.bind("snap", host(&[9.0; 8], &[8])).unwrap();
        let before = s.fetch("w").unwrap();
        step.call().unwrap();
        assert!(before.is_deleted(), "the step no longer donates \"w\"");
        // The donated slot itself bound from a buffer another slot holds: kept too.
        let shared = s.fetch("w").unwrap();
        s.bind("keep", SlotValue::Buffer(shared.clone())).unwrap();
        step.call().unwrap();
        assert!(!shared.is_deleted());
        assert_eq!(
            s.fetch("keep").unwrap().to_vec_of::<f32>().unwrap(),
            [4.0; 8]
        );
        assert_eq!(s.fetch("w").unwrap().to_vec_of::<f32>().unwrap(), [5.0; 8]);
    });
}

#[test]
fn a_step_refused_for_a_host_view_names_the_slot_and_the_way_out() {
    let text = "func.func public @main(%x: tensor<8xf32>, %a: tensor<8xf32> {tf.aliasing_output = 0 : i32}) -> tensor<8xf32> {
  %r = stablehlo.add %a, %x : tensor<8xf32>
  return %r : tensor<8xf32>
}";
    for_each_plugin(|_, c| {
        let exe = compile(c, text);
        let s = Session::new(c).unwrap();
        let step = s.program(&exe, &["x", "w"], &["w"]).unwrap();
        assert_eq!(step.donated(), vec!["w".to_string()]);
        s.bind("x", host(&[1.0; 8], &[8])).unwrap();
        s.bind("w", host(&[0.0; 8], &[8])).unwrap();
        let w = s.fetch("w").unwrap();
        let view = w.external_reference().unwrap();
        let e = expect_err(
            step.call(),
            &[
                "slot \"w\" (argument 1) cannot be donated",
                "donate=False",
                "drop the host views",
            ],
        );
        assert!(!e.to_string().contains("argument 1 cannot"), "{e}");
        assert!(!e.to_string().contains("\"x\""), "{e}");
        drop(view);
        step.call().unwrap();
        assert_eq!(s.fetch("w").unwrap().to_vec_of::<f32>().unwrap(), [1.0; 8]);
    });
}

#[test]
fn dropped_loaders_release_what_they_hold_and_read_deleted() {
    for_each_plugin(|_, c| {
        let s = Session::new(c).unwrap();
        let captured = Arc::new(());
        let held = Arc::clone(&captured);
        s.bind_lazy(
            "x",
            Arc::new(move || {
                let _ = &held;
                Ok(host(&[1.0; 8], &[8]))
            }),
        )
        .unwrap();
        s.bind("y", host(&[2.0; 8], &[8])).unwrap();
        assert_eq!(Arc::strong_count(&captured), 2);
        assert_eq!(s.drop_loaders(), 1);
        assert_eq!(
            Arc::strong_count(&captured),
            1,
            "the loader was not released"
        );
        assert_eq!(s.drop_loaders(), 0);
        let states: Vec<SlotState> = s.slots().into_iter().map(|i| i.state).collect();
        assert_eq!(states, [SlotState::Deleted, SlotState::Ready]);
        expect_err(
            s.fetch("x"),
            &["slot \"x\"", "loader was dropped", "bind it again"],
        );
        s.bind("x", host(&[3.0; 8], &[8])).unwrap();
        assert_eq!(s.fetch("x").unwrap().to_vec_of::<f32>().unwrap(), [3.0; 8]);
    });
}

#[test]
fn slots_read_deleted_once_the_client_closed() {
    for_each_plugin_only(|plugin| {
        let c = rpjrt::Client::new(plugin, &ClientOptions::new()).unwrap();
        let s = Session::new(&c).unwrap();
        s.bind("w", host(&[0.0; 8], &[8])).unwrap();
        s.bind_lazy("l", Arc::new(|| Ok(host(&[1.0; 8], &[8]))))
            .unwrap();
        let exe = compile(&c, DONATE_STEP);
        let _step = s.program(&exe, &["w"], &["out"]).unwrap();
        c.close().unwrap();
        let states: Vec<(String, SlotState)> =
            s.slots().into_iter().map(|i| (i.name, i.state)).collect();
        assert_eq!(
            states,
            [
                ("w".to_string(), SlotState::Deleted),
                ("l".to_string(), SlotState::Deleted),
                ("out".to_string(), SlotState::Empty),
            ]
        );
        assert!(format!("{s:?}").contains("w: float32[8] deleted"), "{s:?}");
    });
}

#[test]
fn call_with_binds_and_steps_in_one_hold_and_read_slot_copies_the_value() {
    // a + b, donating nothing: the step's keyword-style values are bound by `call_with`,
    // a name that is not an input is refused before anything changes, and `read_slot`
    // hands the slot's buffer to its reader.
    let text =
        "func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {\n  \
                %0 = stablehlo.add %a, %b : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}";
    for_each_plugin(|_, client| {
        let exe = compile(client, text);
        let session = Session::new(client).unwrap();
        let step = session.program(&exe, &["a", "b"], &["c"]).unwrap();
        session.bind("b", host(&[10.0; 4], &[4])).unwrap();
        let outs = step
            .call_with(vec![("a".into(), host(&[1.0, 2.0, 3.0, 4.0], &[4]))])
            .unwrap();
        assert_eq!(
            outs[0].to_vec_of::<f32>().unwrap(),
            vec![11.0, 12.0, 13.0, 14.0]
        );
        let e = step
            .call_with(vec![("z".into(), host(&[0.0; 4], &[4]))])
            .unwrap_err();
        assert!(e.to_string().contains("no input slot \"z\""), "{e}");
        let read = session.read_slot("c", |b| b.to_vec_of::<f32>()).unwrap();
        assert_eq!(read, vec![11.0, 12.0, 13.0, 14.0]);
        assert!(session.read_slot("nope", |_| Ok(())).is_err());
    });
}
