//! The `rpjrt` command line: argument parsing and rendering only.
//!
//! Exposed as a library so the Python package's `rpjrt` console script runs the very same
//! code as the Rust binary.

#![forbid(unsafe_code)]

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use rpjrt::{Client, ClientOptions, Plugin, Value};
use serde_json::{json, Value as Json};

/// Command-line interface of rpjrt.
#[derive(Parser, Debug)]
#[command(name = "rpjrt", version, about = "Inspect and drive PJRT plugins")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show a plugin's version, attributes, extensions, devices and memories.
    Info {
        /// Path to the plugin library; defaults to $RPJRT_PLUGIN.
        plugin: Option<PathBuf>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Create options for the client, as NAME=VALUE (integers, true/false, or text).
        #[arg(long = "option", short = 'o', value_name = "NAME=VALUE")]
        options: Vec<String>,
    },
}

/// Runs the CLI on `args` (including the program name) and returns the exit code.
pub fn run_from_args(args: Vec<String>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    match run(cli) {
        Ok(()) => 0,
        Err(msg) => {
            eprintln!("rpjrt: {msg}");
            1
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Info {
            plugin,
            json,
            options,
        } => info(plugin, json, &options),
    }
}

fn plugin_path(arg: Option<PathBuf>) -> Result<PathBuf, String> {
    if let Some(p) = arg {
        return Ok(p);
    }
    match std::env::var_os("RPJRT_PLUGIN") {
        Some(p) if !p.is_empty() => Ok(PathBuf::from(p)),
        _ => Err(
            "no plugin given: pass a path to a PJRT plugin (.so) or set RPJRT_PLUGIN \
                  (pip install xla-cpu-pjrt gives a CPU plugin)"
                .into(),
        ),
    }
}

fn parse_option(s: &str) -> Result<(String, Value), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("option {s:?} is not NAME=VALUE"))?;
    let value = if let Ok(i) = value.parse::<i64>() {
        Value::Int64(i)
    } else if value == "true" || value == "false" {
        Value::Bool(value == "true")
    } else if let Ok(f) = value.parse::<f32>() {
        Value::Float(f)
    } else {
        Value::String(value.to_string())
    };
    Ok((name.to_string(), value))
}

fn value_json(v: &Value) -> Json {
    match v {
        Value::String(s) => json!(s),
        Value::Int64(i) => json!(i),
        Value::Int64List(l) => json!(l),
        Value::Float(f) => json!(f),
        Value::Bool(b) => json!(b),
    }
}

fn info(plugin: Option<PathBuf>, as_json: bool, options: &[String]) -> Result<(), String> {
    let path = plugin_path(plugin)?;
    let plugin = Plugin::load(&path).map_err(|e| e.to_string())?;
    let options: ClientOptions = options
        .iter()
        .map(|o| parse_option(o))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .collect();
    let client = Client::new(&plugin, &options).map_err(|e| e.to_string())?;
    let devices = client.devices().map_err(|e| e.to_string())?;
    let memories = client.addressable_memories().map_err(|e| e.to_string())?;
    let platform = client.platform_name().map_err(|e| e.to_string())?;
    let platform_version = client.platform_version().map_err(|e| e.to_string())?;

    let attributes: serde_json::Map<String, Json> = plugin
        .attributes()
        .iter()
        .map(|(k, v)| (k.clone(), value_json(v)))
        .collect();
    let extensions: Vec<Json> = plugin
        .extensions()
        .all()
        .iter()
        .map(|e| json!({"name": e.name, "type_id": e.type_id, "struct_size": e.struct_size}))
        .collect();
    let device_rows: Vec<Json> = devices
        .iter()
        .map(|d| {
            let default = d.default_memory().ok().map(|m| m.kind().to_string());
            let attrs: serde_json::Map<String, Json> = d
                .attributes()
                .iter()
                .map(|(k, v)| (k.clone(), value_json(v)))
                .collect();
            json!({
                "id": d.id(), "kind": d.kind(), "process_index": d.process_index(),
                "local_hardware_id": d.local_hardware_id(), "addressable": d.is_addressable(),
                "description": d.description(), "default_memory": default, "attributes": attrs,
            })
        })
        .collect();
    let memory_rows: Vec<Json> = memories
        .iter()
        .map(|m| {
            let by: Vec<i32> = m
                .addressable_by_devices()
                .unwrap_or_default()
                .iter()
                .map(|d| d.id())
                .collect();
            json!({"id": m.id(), "kind": m.kind(), "kind_id": m.kind_id(), "devices": by})
        })
        .collect();

    if as_json {
        let doc = json!({
            "path": plugin.path().display().to_string(),
            "pjrt_version": plugin.version().to_string(),
            "table_size": plugin.table_size(),
            "table_slots": plugin.table_slots(),
            "platform": platform,
            "platform_version": platform_version,
            "attributes": attributes,
            "extensions": extensions,
            "devices": device_rows,
            "memories": memory_rows,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
        return Ok(());
    }

    println!("plugin      {}", plugin.path().display());
    println!(
        "PJRT        {} ({} bytes, {} slots; rpjrt layout {})",
        plugin.version(),
        plugin.table_size(),
        plugin.table_slots(),
        Plugin::rpjrt_layout_version()
    );
    println!("platform    {platform} {platform_version}");
    println!("\nattributes");
    for (k, v) in plugin.attributes() {
        println!("  {k:<28} {v}");
    }
    println!("\nextensions");
    for e in plugin.extensions().all() {
        println!(
            "  {:<28} type {:<3} {} bytes",
            e.name, e.type_id, e.struct_size
        );
    }
    println!("\ndevices");
    println!(
        "  {:<4} {:<8} {:<8} {:<6} {:<16} description",
        "id", "kind", "process", "hw id", "default memory"
    );
    for d in &devices {
        let default = d
            .default_memory()
            .map(|m| m.kind().to_string())
            .unwrap_or_else(|_| "-".into());
        println!(
            "  {:<4} {:<8} {:<8} {:<6} {:<16} {}",
            d.id(),
            d.kind(),
            d.process_index(),
            d.local_hardware_id(),
            default,
            d.description()
        );
    }
    println!("\nmemories");
    println!("  {:<4} {:<16} {:<8} devices", "id", "kind", "kind id");
    for m in &memories {
        let by: Vec<String> = m
            .addressable_by_devices()
            .unwrap_or_default()
            .iter()
            .map(|d| d.id().to_string())
            .collect();
        println!(
            "  {:<4} {:<16} {:<8} {}",
            m.id(),
            m.kind(),
            m.kind_id(),
            by.join(",")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_typed() {
        assert_eq!(parse_option("a=3").unwrap().1, Value::Int64(3));
        assert_eq!(parse_option("a=true").unwrap().1, Value::Bool(true));
        assert_eq!(parse_option("a=0.5").unwrap().1, Value::Float(0.5));
        assert_eq!(parse_option("a=x").unwrap().1, Value::String("x".into()));
        assert!(parse_option("novalue").is_err());
    }
}
