//! `rpjrt compile PROGRAM -o ARTIFACT`: compile once, write an rpjrt artifact.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use rpjrt::{Artifact, Cache, ClientOptions, CompileOptions, Program};
use serde_json::json;

use crate::progress::Progress;

/// Arguments of `rpjrt compile`.
#[derive(Args, Debug)]
pub struct CompileArgs {
    /// The program: StableHLO text or bytecode, a portable artifact, or (with a .pb
    /// extension or --format hlo) a serialized HloModuleProto.
    pub program: PathBuf,
    /// Where to write the artifact (load it with `client.load`).
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// The plugin: a path, a plugin or wheel name, or a platform (`cpu`); defaults to
    /// $RPJRT_PLUGIN, then the first plugin found (see `rpjrt plugins`).
    #[arg(long)]
    pub plugin: Option<std::ffi::OsString>,
    /// Program format: mlir or hlo (default: hlo for .pb files, else mlir).
    #[arg(long)]
    pub format: Option<String>,
    /// Number of replicas.
    #[arg(long, default_value_t = 1)]
    pub num_replicas: u32,
    /// Number of partitions.
    #[arg(long, default_value_t = 1)]
    pub num_partitions: u32,
    /// Compile through the compile cache in this directory.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Create options for the client, as NAME=VALUE.
    #[arg(long = "client-option", value_name = "NAME=VALUE")]
    pub options: Vec<String>,
    /// Also show what the compiled executable says about itself: parameter and output
    /// shardings and layouts (or why the plugin cannot say).
    #[arg(long)]
    pub describe: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One introspection item: its values as text, or why the plugin cannot give it.
fn item<T>(r: rpjrt::Result<Vec<T>>, show: impl Fn(&T) -> String) -> Result<Vec<String>, String> {
    r.map(|v| v.iter().map(show).collect())
        .map_err(|e| e.to_string())
}

/// The `--describe` items of `exe`, in a fixed order.
fn describe(exe: &rpjrt::Executable) -> Vec<(&'static str, Result<Vec<String>, String>)> {
    let layout = |l: &rpjrt::CompiledLayout| match &l.minor_to_major {
        Some(m) => format!("{m:?}"),
        None => String::from_utf8_lossy(&l.serialized).into_owned(),
    };
    vec![
        (
            "parameter_shardings",
            item(exe.parameter_shardings(), |s| s.to_string()),
        ),
        (
            "output_shardings",
            item(exe.output_shardings(), |s| s.to_string()),
        ),
        ("parameter_layouts", item(exe.parameter_layouts(), layout)),
        ("output_layouts", item(exe.output_layouts(), layout)),
    ]
}

/// Runs `rpjrt compile`.
pub fn run(a: CompileArgs) -> Result<(), String> {
    let options: ClientOptions = crate::common::parse_options(&a.options).map_err(|e| e.message)?;
    let progress = Progress::new(a.json);
    let spinner = progress.spinner("loading the plugin and creating a client");
    let (client, _, _) =
        crate::common::open_client(a.plugin.as_deref(), &options).map_err(|e| e.message)?;
    drop(spinner);
    let code = std::fs::read(&a.program)
        .map_err(|e| format!("cannot read {}: {e}", a.program.display()))?;
    let format =
        a.format
            .clone()
            .unwrap_or_else(|| match a.program.extension().and_then(|e| e.to_str()) {
                Some("pb") => "hlo".into(),
                _ => "mlir".into(),
            });
    let program = match format.as_str() {
        "mlir" => Program::mlir(code),
        "hlo" => Program::hlo(code),
        other => return Err(format!("unknown program format {other:?} (mlir or hlo)")),
    };
    let opts = CompileOptions {
        num_replicas: a.num_replicas,
        num_partitions: a.num_partitions,
        ..Default::default()
    };
    let t0 = Instant::now();
    let spinner = progress.spinner(&format!("compiling {}", a.program.display()));
    let exe = match &a.cache_dir {
        Some(d) => {
            let cache = Cache::new(d, None).map_err(|e| e.to_string())?;
            client.compile_with_cache(&program, &opts, &cache)
        }
        None => client.compile(&program, &opts),
    }
    .map_err(|e| e.to_string())?;
    drop(spinner);
    let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
    let bytes = exe.serialize().map_err(|e| e.to_string())?;
    let tmp = a.output.with_extension("rpjrt-partial");
    std::fs::write(&tmp, &bytes)
        .and_then(|()| std::fs::rename(&tmp, &a.output))
        .map_err(|e| format!("cannot write {}: {e}", a.output.display()))?;
    let target = Artifact::decode(&bytes).map_err(|e| e.to_string())?.target;
    let described = if a.describe {
        describe(&exe)
    } else {
        Vec::new()
    };
    if a.json {
        let fields: serde_json::Map<String, serde_json::Value> = target
            .fields()
            .into_iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        let mut doc = json!({
            "artifact": a.output.display().to_string(),
            "bytes": bytes.len(),
            "compile_ms": compile_ms,
            "target": fields,
        });
        if a.describe {
            let items: serde_json::Map<String, serde_json::Value> = described
                .iter()
                .map(|(k, v)| {
                    let v = match v {
                        Ok(list) => json!(list),
                        Err(why) => json!({ "unsupported": why }),
                    };
                    (k.to_string(), v)
                })
                .collect();
            doc["executable"] = serde_json::Value::Object(items);
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
    } else {
        println!(
            "wrote {} ({} bytes, compiled in {compile_ms:.1} ms) for {target}",
            a.output.display(),
            bytes.len()
        );
        for (k, v) in &described {
            match v {
                Ok(list) => println!("  {k}: {}", list.join(" ")),
                Err(why) => println!("  {k}: not available ({why})"),
            }
        }
    }
    Ok(())
}
