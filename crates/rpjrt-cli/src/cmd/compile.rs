//! `rpjrt compile PROGRAM -o ARTIFACT`: compile once, write an rpjrt artifact.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use rpjrt::{Artifact, Cache, ClientOptions, CompileOptions, Program};
use serde_json::json;

use crate::common::CliError;
use crate::progress::Progress;

/// Arguments of `rpjrt compile`.
#[derive(Args, Debug)]
pub struct CompileArgs {
    /// The program: StableHLO text or bytecode, a portable artifact, or (with a .pb,
    /// .hlo or .hlopb extension or --format hlo) a serialized HloModuleProto.
    pub program: PathBuf,
    /// Where to write the artifact (load it with `client.load`).
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// The plugin: a path, a plugin or wheel name, or a platform (`cpu`); defaults to
    /// $RPJRT_PLUGIN, then the first plugin found (see `rpjrt plugins`).
    #[arg(long)]
    pub plugin: Option<std::ffi::OsString>,
    /// Program format: mlir or hlo (default: told from the file, as `rpjrt run` does).
    #[arg(long)]
    pub format: Option<String>,
    /// Number of replicas (at least 1).
    #[arg(long, default_value_t = 1)]
    pub num_replicas: i64,
    /// Number of partitions (at least 1; more than one partitions with SPMD).
    #[arg(long, default_value_t = 1)]
    pub num_partitions: i64,
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

/// Runs `rpjrt compile`. The program is read and the options built by the core
/// ([`Program::read`], [`CompileOptions::for_mesh`]): a FIFO, an unknown format or zero
/// partitions are usage errors (exit 2) found before the plugin is loaded.
pub fn run(a: CompileArgs) -> Result<(), CliError> {
    let program = Program::read(&a.program, a.format.as_deref())?;
    let opts = CompileOptions::for_mesh(a.num_replicas, a.num_partitions).map_err(|e| {
        CliError::usage(format!(
            "--num-replicas/--num-partitions: {}",
            crate::common::bare(e)
        ))
    })?;
    let options: ClientOptions = crate::common::parse_options(&a.options)?;
    // The artifact is never written over the program nor over the plugin library (both
    // read by this command).
    let plugins = crate::common::plugin_paths(a.plugin.as_deref());
    let mut inputs: Vec<crate::common::NamedPath<'_>> = vec![("the program", &a.program)];
    inputs.extend(plugins.iter().map(|p| ("the plugin library", p.as_path())));
    crate::common::check_outputs(&[("--output", &a.output)], &inputs)?;
    let progress = Progress::new(a.json);
    let spinner = progress.spinner("loading the plugin and creating a client");
    let (client, _, _) = crate::common::open_client(a.plugin.as_deref(), &options)?;
    drop(spinner);
    let t0 = Instant::now();
    let spinner = progress.spinner(&format!("compiling {}", a.program.display()));
    let watch = crate::common::watch_plugin(&format!("compile of {}", a.program.display()));
    let exe = match &a.cache_dir {
        Some(d) => {
            // A cache directory that cannot be used is the user's input: exit 2.
            let cache = Cache::new(d, None).map_err(CliError::from)?;
            client.compile_with_cache(&program, &opts, &cache)
        }
        None => client.compile(&program, &opts),
    }
    // rpjrt's own refusals (more devices than the client has) are bad input, exit 2; what
    // the plugin reports is a failure, exit 1.
    .map_err(CliError::from)?;
    drop(watch);
    drop(spinner);
    let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
    let bytes = exe
        .serialize()
        .map_err(|e| CliError::failed(e.to_string()))?;
    crate::common::write_output(&a.output, "--output", &bytes)?;
    let target = Artifact::decode(&bytes)
        .map_err(|e| CliError::failed(e.to_string()))?
        .target;
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
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| CliError::failed(e.to_string()))?
        );
    } else {
        crate::outln!(
            "wrote {} ({} bytes, compiled in {compile_ms:.1} ms) for {target}",
            a.output.display(),
            bytes.len()
        );
        for (k, v) in &described {
            match v {
                Ok(list) => crate::outln!("  {k}: {}", list.join(" ")),
                Err(why) => crate::outln!("  {k}: not available ({why})"),
            }
        }
    }
    Ok(())
}
