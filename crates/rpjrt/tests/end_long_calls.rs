//! `rpjrt::end_long_plugin_calls`, which a process about to end calls: compiles already
//! running are waited for (and counted when they outlast the limit), and new compiles and
//! client creations are refused before they reach the plugin. It changes the whole
//! process, so it has a test binary of its own with one test.

mod common;

use std::time::{Duration, Instant};

use rpjrt::{Client, ClientOptions, Code, CompileOptions, Program};

const KNOBS: [&str; 1] = ["RPJRT_FAKE_HANG_ON"];

const PROGRAM: &str = "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}\n";

#[test]
fn ending_waits_for_running_compiles_and_refuses_new_ones() {
    // A copy of the fake whose compile never returns, on a thread of its own.
    let hanging = common::load_fake(&[("RPJRT_FAKE_HANG_ON", "PJRT_Client_Compile")], &KNOBS)
        .expect("fake plugin loads");
    let hc = Client::new(&hanging, &ClientOptions::new()).expect("client");
    std::thread::spawn(move || {
        let _ = hc.compile(&Program::mlir(PROGRAM), &CompileOptions::default());
    });
    // A second copy that compiles normally.
    let p = common::load_fake(&[], &KNOBS).expect("fake plugin loads");
    let c = Client::new(&p, &ClientOptions::new()).expect("client");
    c.compile(&Program::mlir(PROGRAM), &CompileOptions::default())
        .expect("compiles before the end");
    std::thread::sleep(Duration::from_millis(200));

    let mut told = None;
    let start = Instant::now();
    let left = rpjrt::end_long_plugin_calls(Duration::from_millis(300), |n| told = Some(n));
    assert_eq!(left, 1, "the hanging compile is still running");
    assert_eq!(told, Some(1), "the wait was announced with the count");
    assert!(start.elapsed() >= Duration::from_millis(300));

    let e = c
        .compile(&Program::mlir(PROGRAM), &CompileOptions::default())
        .unwrap_err();
    assert_eq!(e.code(), Code::Cancelled, "{e}");
    assert!(e.to_string().contains("process is ending"), "{e}");
    assert_eq!(e.entry(), Some("PJRT_Client_Compile"), "{e}");
    let e = Client::new(&p, &ClientOptions::new()).unwrap_err();
    assert_eq!(e.code(), Code::Cancelled, "{e}");
}
