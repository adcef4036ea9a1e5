//! A custom call served by a Rust closure: `y = 2·x + offset`, with `offset` taken from the
//! call's attributes and a per-execute scale passed as user data.
//!
//! Usage: `cargo run -p rpjrt --example ffi_custom_call -- [PLUGIN.so]`. Without an argument
//! the plugin path comes from `RPJRT_PLUGIN`, then from `.deps/plugins.env` (written by
//! `scripts/setup.sh`). Runs on the PJRT 0.81 plugin (FFI runtime 0.2) and the 0.115 plugin
//! (FFI 0.4) alike; the test `ffi_example_runs` in tests/ffi_handlers.rs runs `run` on both.

use std::sync::Arc;

use rpjrt::ffi::{self, Attrs, CallFrame, ExecuteContext, FfiError, FromAttrs};
use rpjrt::{Client, ClientOptions, CompileOptions, ExecuteOptions, Plugin, Program};

const PROGRAM: &str = r#"func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.custom_call @rpjrt_example_scale(%x) {api_version = 4 : i32,
      backend_config = {offset = 1.5 : f32, label = "demo"}} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
"#;

/// The attributes, decoded without a derive macro.
struct Config {
    offset: f32,
    label: String,
}

impl FromAttrs for Config {
    fn from_attrs(a: &Attrs) -> Result<Self, FfiError> {
        Ok(Config {
            offset: a.get_as("offset")?,
            label: a.get_as("label")?,
        })
    }
}

#[allow(dead_code)]
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

#[allow(dead_code)] // the test that includes this file calls `run` directly
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path =
        plugin_path().ok_or("give a plugin path, set RPJRT_PLUGIN, or run scripts/setup.sh")?;
    print!("{}", run(&path)?);
    Ok(())
}

/// Registers the handler, runs the program twice and returns what it would print.
pub fn run(path: &str) -> Result<String, Box<dyn std::error::Error>> {
    use std::fmt::Write as _;
    let mut out = String::new();
    let plugin = Plugin::load(path)?;
    let client = Client::new(&plugin, &ClientOptions::new())?;

    let reg = ffi::register(
        &client,
        "rpjrt_example_scale",
        |call: &mut CallFrame<'_>| {
            let cfg: Config = call.parse_attrs()?;
            // Optional per-execute scale; 2.0 when the execute call attached none.
            let scale = call.user_data::<f32>().copied().unwrap_or(2.0);
            let (args, rets) = call.split();
            let x = args[0].as_slice::<f32>()?;
            let y = rets[0].as_mut_slice::<f32>()?;
            for (y, x) in y.iter_mut().zip(x) {
                *y = scale * x + cfg.offset;
            }
            if cfg.label.is_empty() {
                return Err(FfiError::invalid("label must not be empty"));
            }
            Ok(())
        },
    )?;
    writeln!(
        out,
        "registered {} for {} (runtime FFI {}.{}, handler FFI {}.{})",
        reg.target,
        reg.platform,
        reg.runtime_version.0,
        reg.runtime_version.1,
        reg.handler_version.0,
        reg.handler_version.1
    )?;

    let exe = client.compile(&Program::mlir(PROGRAM), &CompileOptions::default())?;
    let x: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let xb = client.buffer_from_slice(&x, &[8], &client.default_device()?)?;

    let y = exe.execute(&[&xb])?[0].to_vec_of::<f32>()?;
    writeln!(out, "2x + 1.5 = {y:?}")?;
    let want: Vec<f32> = x.iter().map(|v| 2.0 * v + 1.5).collect();
    assert_eq!(y, want);

    let options = ExecuteOptions {
        ffi_context: Some(Arc::new(ExecuteContext::with_user_data(&client, 10.0f32)?)),
        ..Default::default()
    };
    let run2 = exe.execute_with(&[vec![&xb]], &options)?;
    let y = run2.outputs[0][0].to_vec_of::<f32>()?;
    writeln!(out, "10x + 1.5 = {y:?}")?;
    assert_eq!(y, x.iter().map(|v| 10.0 * v + 1.5).collect::<Vec<_>>());
    writeln!(out, "ok")?;
    Ok(out)
}
