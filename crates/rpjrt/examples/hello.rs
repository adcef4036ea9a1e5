//! Compiles a StableHLO program, runs it on CPU device 0 and prints the result.
//!
//! Usage: `cargo run -p rpjrt --example hello -- [PLUGIN.so]`. Without an argument the
//! plugin path comes from `RPJRT_PLUGIN`, then from `.deps/plugins.env` (written by
//! `scripts/setup.sh`).

use rpjrt::{Client, ClientOptions, CompileOptions, Plugin, Program};

const PROGRAM: &str = include_str!("../tests/fixtures/mul_add.mlir");

fn plugin_path() -> Option<String> {
    if let Some(p) = std::env::args().nth(1) {
        return Some(p);
    }
    if let Ok(p) = std::env::var("RPJRT_PLUGIN") {
        return Some(p);
    }
    let env = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.deps/plugins.env");
    let text = std::fs::read_to_string(env).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("RPJRT_TEST_PLUGIN_NEW="))
        .map(str::to_string)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path =
        plugin_path().ok_or("give a plugin path, set RPJRT_PLUGIN, or run scripts/setup.sh")?;
    let plugin = Plugin::load(&path)?;
    println!(
        "plugin: {} (PJRT {})",
        plugin.path().display(),
        plugin.version()
    );
    let client = Client::new(&plugin, &ClientOptions::new())?;
    let device = client.lookup_device(0)?;
    println!("device: {device}");
    let exe = client.compile(&Program::mlir(PROGRAM), &CompileOptions::default())?;
    let a: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let b = vec![2.0f32; 8];
    let xa = client.buffer_from_slice(&a, &[8], &device)?;
    let xb = client.buffer_from_slice(&b, &[8], &device)?;
    let out = exe.execute(&[&xa, &xb])?;
    let result: Vec<f32> = out[0].to_vec_of()?;
    println!("a * b + 1 = {result:?}");
    Ok(())
}
