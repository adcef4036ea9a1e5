//! `rpjrt compile PROGRAM -o ARTIFACT`: compile once, write an rpjrt artifact.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use rpjrt::{Artifact, Cache, ClientOptions, CompileOptions, Program, ProgramFile};
use serde_json::json;

use crate::common::CliError;
use crate::progress::Progress;

/// Arguments of `rpjrt compile`.
#[derive(Args, Debug)]
pub struct CompileArgs {
    /// The program: StableHLO text or bytecode, a portable artifact, or (with a .pb,
    /// .hlo or .hlopb extension or --format hlo) a serialized HloModuleProto.
    pub program: PathBuf,
    /// Where to write the artifact (load it with `client.load`). Unlike `run`'s and
    /// `info`'s `-o` (a create option), `-o` is the output here: a bare NAME=VALUE
    /// (`-o cpu_device_count=2`) is refused as a misplaced create option (give it with
    /// --client-option; `./NAME=VALUE` names such a file).
    #[arg(short = 'o', long = "output", value_name = "ARTIFACT")]
    pub output: PathBuf,
    /// The plugin: a path, a plugin or wheel name, or a platform (`cpu`); defaults to
    /// $RPJRT_PLUGIN, then the first plugin found (see `rpjrt plugins`).
    #[arg(long)]
    pub plugin: Option<std::ffi::OsString>,
    /// Program format: mlir or hlo (default: told from the file, as `rpjrt run` does).
    #[arg(long)]
    pub format: Option<String>,
    /// Number of replicas (at least 1).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub num_replicas: i64,
    /// Number of partitions (at least 1; more than one partitions with SPMD).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub num_partitions: i64,
    /// Compile through the compile cache in this directory: a program compiled before
    /// for the same plugin and options is loaded from it instead (the output says so).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Create options for the client, as NAME=VALUE (as for `rpjrt run -o`; also
    /// spelled --option).
    #[arg(
        long = "client-option",
        visible_alias = "option",
        value_name = "NAME=VALUE"
    )]
    pub options: Vec<String>,
    /// Also show what the compiled executable says about itself: parameter and output
    /// shardings and layouts (or why the plugin cannot say).
    #[arg(long)]
    pub describe: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One introspection item: its values (as JSON: a layout's `minor_to_major` is a list of
/// numbers, the rest text), or why the plugin cannot give it.
fn item<T>(
    r: rpjrt::Result<Vec<T>>,
    show: impl Fn(&T) -> serde_json::Value,
) -> Result<Vec<serde_json::Value>, String> {
    r.map(|v| v.iter().map(show).collect())
        .map_err(|e| e.to_string())
}

/// A `--describe` value as text: a string as it is, anything else as JSON (`[0, 1]`).
fn item_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What one `--describe` item gave.
type Described = Result<Vec<serde_json::Value>, String>;

/// The `--describe` items of `exe`, in a fixed order.
fn describe(exe: &rpjrt::Executable) -> Vec<(&'static str, Described)> {
    let layout = |l: &rpjrt::CompiledLayout| match &l.minor_to_major {
        Some(m) => json!(m),
        None => json!(String::from_utf8_lossy(&l.serialized)),
    };
    vec![
        (
            "parameter_shardings",
            item(exe.parameter_shardings(), |s| json!(s.to_string())),
        ),
        (
            "output_shardings",
            item(exe.output_shardings(), |s| json!(s.to_string())),
        ),
        ("parameter_layouts", item(exe.parameter_layouts(), layout)),
        ("output_layouts", item(exe.output_layouts(), layout)),
    ]
}

/// Refuses an output that is a create option given to the wrong `-o`: a bare file name of
/// the form `IDENT=VALUE` (`cpu_device_count=2`), with no directory part. For `run`,
/// `info` and `rendezvous`, `-o` is `--option NAME=VALUE`; here it is `--output`, and such
/// a command would silently write an artifact named after the option. `./NAME=VALUE`
/// still names that file.
pub fn check_not_an_option(output: &std::path::Path) -> Result<(), CliError> {
    let text = output.as_os_str().to_string_lossy();
    let Some((name, value)) = text.split_once('=') else {
        return Ok(());
    };
    let ident = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ident || text.contains(std::path::MAIN_SEPARATOR) || text.contains('/') {
        return Ok(());
    }
    Err(CliError::usage(format!(
        "-o {text}: for `rpjrt compile`, -o is --output, the artifact's file name, and \
         {text} looks like a client create option (NAME=VALUE); give create options with \
         --client-option {name}={value}, and the artifact with -o FILE (write \
         ./{text} to name a file so)"
    )))
}

/// Reads the program to compile ([`crate::common::read_program_file`]); a file that is
/// compiled already (an rpjrt artifact, or a plugin's executable named by
/// `--format executable`) is refused with how to run it instead.
fn read_program(path: &std::path::Path, format: Option<&str>) -> Result<Program, CliError> {
    let shown = crate::common::printable_path(path);
    if format == Some(rpjrt::EXECUTABLE_FORMAT) {
        return Err(executable_refused(path));
    }
    let run_it = format!("it is compiled already: run it with `rpjrt run {shown}`");
    match crate::common::read_program_file(path, format, &run_it)? {
        ProgramFile::Program(p) => Ok(p),
        ProgramFile::Artifact(_) => Err(CliError::usage(format!(
            "{shown}: an rpjrt artifact (what `rpjrt compile` writes): {run_it}; \
             `rpjrt compile` takes a program (StableHLO text or bytecode, or HLO)"
        ))),
        ProgramFile::Executable(_) => Err(CliError::usage(format!(
            "{shown}: --format executable names a plugin's own serialized executable, which \
             is compiled already: run it with `rpjrt run {shown} --format executable`; \
             `rpjrt compile` takes a program (--format mlir or hlo)"
        ))),
    }
}

/// The refusal of `--format executable`, which names a plugin's own serialized executable
/// (compiled already), with advice that fits what the file is: a program (StableHLO or
/// HLO, which `compile` compiles once `--format executable` is left out), an rpjrt
/// artifact (run it), or bytes that may be an executable (run it with `--format
/// executable`). A file that cannot be read says why.
fn executable_refused(path: &std::path::Path) -> CliError {
    let shown = crate::common::printable_path(path);
    let lead = "--format executable names a plugin's own serialized executable, which is \
                compiled already, and `rpjrt compile` compiles programs";
    let bytes = match rpjrt::read_regular_file(path) {
        Ok(b) => b,
        Err(e) => return CliError::usage(crate::common::bare(e)),
    };
    if rpjrt::is_artifact(&bytes) {
        return CliError::usage(format!(
            "{lead}; {shown} is an rpjrt artifact (compiled already): run it with `rpjrt run \
             {shown}`"
        ));
    }
    let name = path.to_string_lossy();
    match ProgramFile::detect(bytes, Some(&name), Some(rpjrt::EXECUTABLE_FORMAT)) {
        // The bytes are plainly a program (text or bytecode): compile it as one.
        Err(e) => CliError::usage(format!(
            "{lead}; {shown} is {}: leave --format out to compile it (or give --format mlir \
             or hlo)",
            crate::common::bare(e)
        )),
        Ok(_) => CliError::usage(format!(
            "{lead} (--format mlir or hlo); run a plugin's executable with `rpjrt run {shown} \
             --format executable`"
        )),
    }
}

/// Runs `rpjrt compile`. The program is read and the options built by the core
/// ([`Program::read`], [`CompileOptions::for_mesh`]): a FIFO, an unknown format or zero
/// partitions are usage errors (exit 2) found before the plugin is loaded.
pub fn run(a: CompileArgs) -> Result<(), CliError> {
    check_not_an_option(&a.output)?;
    // `-o -` writes the artifact to stdout (a pipe or a file, never a terminal); the line
    // saying what was written then goes to stderr, and --json, which wants stdout, is
    // refused with it.
    let to_stdout =
        crate::common::output_is_stdout(&a.output, "--output", crate::common::Dash::Binary)?;
    if to_stdout && a.json {
        return Err(CliError::usage(
            "--output - writes the artifact to stdout, where --json would print too; give \
             the artifact a file name with --json, or leave --json out",
        ));
    }
    let program = read_program(&a.program, a.format.as_deref())?;
    let opts = CompileOptions::for_mesh(a.num_replicas, a.num_partitions).map_err(|e| {
        CliError::usage(format!(
            "--num-replicas/--num-partitions: {}",
            crate::common::bare(e)
        ))
    })?;
    let options: ClientOptions = crate::common::parse_options_for(&a.options, "--client-option")?;
    // The artifact is never written over the program nor over the plugin library (both
    // read by this command).
    let plugins = crate::common::plugin_paths(a.plugin.as_deref());
    let mut inputs: Vec<crate::common::NamedPath<'_>> = vec![("the program", &a.program)];
    inputs.extend(plugins.iter().map(|p| ("the plugin library", p.as_path())));
    crate::common::check_outputs(&[("--output", &a.output)], &inputs)?;
    let cache_in_use = crate::common::cache_dir_in_use(a.cache_dir.as_deref(), &options);
    crate::common::check_outputs_outside_cache(
        &[("--output", &a.output)],
        cache_in_use.as_ref().map(|(n, d)| (*n, d.as_path())),
    )?;
    let progress = Progress::new(a.json);
    let spinner = progress.spinner("loading the plugin and creating a client");
    let (client, _, _) = crate::common::open_client(a.plugin.as_deref(), &options)?;
    let _leak_client = crate::common::LeakClientOnReturn;
    drop(spinner);
    let t0 = Instant::now();
    let spinner = progress.spinner(&format!(
        "compiling {}",
        crate::common::printable_path(&a.program)
    ));
    let watch = crate::common::watch_plugin(&format!(
        "compile of {}",
        crate::common::printable_path(&a.program)
    ));
    // The cache compiled through: --cache-dir, else the client's own (RPJRT_CACHE_DIR).
    let cache = match &a.cache_dir {
        // A cache directory that cannot be used is the user's input: exit 2.
        Some(d) => Some(Cache::at(d).map_err(CliError::from)?),
        None => client.cache(),
    };
    let exe = match (&a.cache_dir, &cache) {
        (Some(_), Some(cache)) => client.compile_with_cache(&program, &opts, cache),
        _ => client.compile(&program, &opts),
    }
    // rpjrt's own refusals (more devices than the client has) are bad input, exit 2; what
    // the plugin reports is a failure, exit 1.
    .map_err(CliError::from)?;
    drop(watch);
    drop(spinner);
    let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
    // Whether the executable came from the cache (a hit compiles nothing), or was stored.
    let (from_cache, stored) = cache.as_ref().map_or((false, false), |c| {
        let stats = c.stats();
        (stats.hits > 0, stats.writes > 0)
    });
    let cache_dir = cache.as_ref().map(|c| c.dir().to_path_buf());
    // What the cache had to say (why it did not store the executable, an entry it could
    // not read ...): on stderr, and in `--json` as `cache_warnings`.
    let cache_warnings = cache
        .as_ref()
        .map(|c| c.take_warnings())
        .unwrap_or_default();
    // An executable from a cache hit is serialized from its entry, read again: another
    // process (`rpjrt cache clear`, an eviction, a copy over it) may have removed or
    // changed it since the hit. The verb's only job is the artifact, so it compiles the
    // program again rather than fail, without the cache (whose entry just failed: through
    // the client's own cache it would be hit and fail again).
    let (exe, bytes, from_cache, recompiled) = match exe.serialize() {
        Ok(bytes) => (exe, bytes, from_cache, None),
        Err(e) if from_cache => {
            let spinner = progress.spinner(&format!(
                "compiling {} (its compile cache entry could not be read back)",
                crate::common::printable_path(&a.program)
            ));
            let t1 = Instant::now();
            client.set_cache(None);
            let again = client.compile(&program, &opts).map_err(CliError::from)?;
            let bytes = again
                .serialize()
                .map_err(|e| CliError::failed(e.to_string()))?;
            drop(spinner);
            let why = crate::common::bare(e);
            (
                again,
                bytes,
                false,
                Some((t1.elapsed().as_secs_f64() * 1e3, why)),
            )
        }
        Err(e) => return Err(CliError::failed(e.to_string())),
    };
    if to_stdout {
        crate::common::write_out_bytes(&bytes);
        // The artifact must have reached stdout whole before any line says it was written.
        if let Some(e) = crate::common::take_output_error() {
            return Err(e);
        }
    } else {
        crate::common::write_output(&a.output, "--output", &bytes)?;
    }
    let target = Artifact::decode(&bytes)
        .map_err(|e| CliError::failed(e.to_string()))?
        .target;
    let described = if a.describe {
        describe(&exe)
    } else {
        Vec::new()
    };
    let compile_ms = compile_ms + recompiled.as_ref().map_or(0.0, |(ms, _)| *ms);
    if a.json {
        let mut doc = json!({
            "bytes": bytes.len(),
            "compile_ms": compile_ms,
            "from_cache": from_cache,
            "cache_dir": null,
            "target": crate::common::target_json(&target),
        });
        crate::common::set_path_json(&mut doc, "artifact", &a.output);
        if let Some(d) = &cache_dir {
            crate::common::set_path_json(&mut doc, "cache_dir", d);
            doc["cache_warnings"] = json!(cache_warnings);
        }
        if let Some((_, why)) = &recompiled {
            doc["cache_entry_lost"] = json!(why);
        }
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
        let how = match (&cache_dir, from_cache) {
            (Some(d), _) if recompiled.is_some() => format!(
                "compiled in {compile_ms:.1} ms: the compile cache in {} had it, but its \
                 entry could not be read back ({})",
                crate::common::printable_path(d),
                crate::common::printable(recompiled.as_ref().map_or("", |(_, w)| w.as_str()))
            ),
            (Some(d), true) => format!(
                "loaded from the compile cache in {} in {compile_ms:.1} ms, not compiled",
                crate::common::printable_path(d)
            ),
            (Some(d), false) if stored => format!(
                "compiled in {compile_ms:.1} ms, and stored in the compile cache in {}",
                crate::common::printable_path(d)
            ),
            (Some(d), false) => format!(
                "compiled in {compile_ms:.1} ms; the compile cache in {} did not store it",
                crate::common::printable_path(d)
            ),
            (None, _) => format!("compiled in {compile_ms:.1} ms"),
        };
        // With the artifact on stdout, what is said about it goes to stderr.
        let say = |line: String| {
            if to_stdout {
                crate::errln!("{line}");
            } else {
                crate::outln!("{line}");
            }
        };
        let written = if to_stdout {
            "the artifact to stdout".to_string()
        } else {
            crate::common::printable_path(&a.output)
        };
        say(format!(
            "wrote {written} ({} bytes, {how}) for {}",
            bytes.len(),
            crate::common::printable(&target.to_string())
        ));
        for w in &cache_warnings {
            crate::errln!("rpjrt: warning: {}", crate::common::printable_lines(w));
        }
        for (k, v) in &described {
            match v {
                Ok(list) => say(format!(
                    "  {k}: {}",
                    crate::common::printable(
                        &list.iter().map(item_text).collect::<Vec<_>>().join(" ")
                    )
                )),
                Err(why) => say(format!(
                    "  {k}: not available ({})",
                    crate::common::printable(why)
                )),
            }
        }
    }
    crate::common::work_done();
    Ok(())
}
