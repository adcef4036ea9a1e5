//! What the C++ exception guard (every plugin call goes through it) costs per call, and
//! what that is relative to one execution of the tiny program.
//!
//! Usage: `cargo run --release -p rpjrt --features bench --example bench_guard -- [--plugin PATH]`. The
//! plugin defaults to `RPJRT_PLUGIN`, then `RPJRT_TEST_PLUGIN_NEW`. Figures are the best of
//! 21 interleaved rounds; the ratio compares the guard's cost on the plugin calls one
//! `execute + block_until_ready + drop` makes with that iteration's time, both measured
//! in this run.

use std::time::Instant;

use rpjrt::__bench::guard_overhead_ns;
use rpjrt::{Client, ClientOptions, CompileOptions, Plugin, Program};

const PROGRAM: &str = include_str!("../tests/fixtures/mul_add.mlir");
/// Plugin calls per iteration below: Execute, Buffer_ReadyEvent, Event_Await,
/// Event_Destroy, Buffer_Destroy (the output).
const CALLS_PER_ITERATION: f64 = 5.0;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut plugin = None;
    while let Some(a) = args.next() {
        if a == "--plugin" {
            plugin = args.next();
        }
    }
    let (direct, guarded) = guard_overhead_ns(2_000_000);
    let delta = (guarded - direct).max(0.0);
    println!("trivial C call: direct {direct:.2} ns, through the guard {guarded:.2} ns, guard adds {delta:.2} ns per call");
    let Some(path) = plugin
        .or_else(|| std::env::var("RPJRT_PLUGIN").ok())
        .or_else(|| std::env::var("RPJRT_TEST_PLUGIN_NEW").ok())
    else {
        println!("(no plugin given: set RPJRT_TEST_PLUGIN_NEW for the per-execution ratio)");
        return;
    };
    let plugin = Plugin::load(&path).expect("plugin");
    let client = Client::new(&plugin, &ClientOptions::new()).expect("client");
    let exe = client
        .compile(&Program::mlir(PROGRAM), &CompileOptions::default())
        .expect("compile");
    let dev = client.default_device().expect("device");
    let x = client
        .buffer_from_slice(&[1f32; 8], &[8], &dev)
        .expect("buffer");
    let iters = 4000;
    let mut best = f64::MAX;
    for _ in 0..21 {
        let t = Instant::now();
        for _ in 0..iters {
            let out = exe.execute(&[&x, &x]).expect("execute");
            out[0].block_until_ready().expect("ready");
        }
        best = best.min(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    println!(
        "execute + block_until_ready + drop: {best:.0} ns; the guard on its {CALLS_PER_ITERATION} plugin calls: {:.1} ns = {:.2} % of it",
        CALLS_PER_ITERATION * delta,
        100.0 * CALLS_PER_ITERATION * delta / best
    );
}
