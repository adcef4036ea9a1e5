//! `rpjrt info`: a plugin's version, attributes, extensions, devices and memories.

use rpjrt::Plugin;
use serde_json::{json, Value as Json};

use crate::common::{self, paint, value_json, CliError, Style, EXIT_DEFECT, EXIT_OK, EXIT_USAGE};

/// Arguments of `rpjrt info`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The plugin: a path, a plugin or wheel name, or a platform (`cpu`); defaults to
    /// $RPJRT_PLUGIN, then the first plugin found (see `rpjrt plugins`).
    pub plugin: Option<std::ffi::OsString>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[arg(
        long = "option",
        short = 'o',
        value_name = "NAME=VALUE",
        help = "Create options for the client, as NAME=VALUE: a decimal integer is an int64, \
                true/false a bool, [0,1,2] an int64 list ([] an empty one), another number a \
                float, anything else text; a name given twice is refused"
    )]
    pub options: Vec<String>,
}

/// Runs `rpjrt info`.
pub fn run(args: Args) -> Result<i32, CliError> {
    let options = common::parse_options(&args.options)?;
    // Never printed into the plugin library it reads (`rpjrt info lib.so >> lib.so`).
    if common::stdout_is_a_file() {
        let plugins = common::plugin_paths(args.plugin.as_deref());
        let inputs: Vec<common::NamedPath<'_>> = plugins
            .iter()
            .map(|p| ("the plugin library", p.as_path()))
            .collect();
        common::check_stdout(&inputs)?;
    }
    // The first plugin that can serve here; when none can, the first that loads is shown
    // anyway: its own facts need no client, so a plugin whose client cannot be created (a
    // GPU plugin on a machine without a GPU) still shows its version, attributes and
    // extensions, followed by why the client failed (exit 1).
    let (client, plugin) = match common::open_client(args.plugin.as_deref(), &options) {
        Ok((client, plugin, _)) => (client, plugin),
        // A refused option or setting is the user's mistake (exit 2), whatever the plugin.
        Err(open_err) if open_err.exit_code == EXIT_USAGE => return Err(open_err),
        Err(open_err) => {
            let (plugin, _) = common::load_plugin(args.plugin.as_deref())?;
            let quiet = common::Quiet::start("creating a client");
            // As `open_client` creates it: a CUDA plugin's error names the plugin file and
            // what loading the CUDA driver found.
            let created = rpjrt_cuda::create_client(&plugin, &options);
            let log = quiet.finish();
            match created {
                Ok(client) => {
                    // Not destroyed: a plugin hanging there must not hide the error.
                    common::work_done();
                    drop(client);
                    return Err(open_err);
                }
                Err(e) => return plugin_only(&plugin, e, &options, &log, args.json),
            }
        }
    };
    let _leak_client = common::LeakClientOnReturn;
    let devices = client.devices()?;
    let memories = client.addressable_memories()?;
    let platform = client.platform_name()?;
    let platform_version = client.platform_version()?;

    let (attributes, repeated, extensions) = plugin_json(&plugin);
    let device_rows: Vec<Json> = devices
        .iter()
        .map(|d| {
            let default = d.default_memory().ok().map(|m| m.kind().to_string());
            let (attrs, repeated) = attributes_json(d.attributes());
            let stats = if d.is_addressable() {
                match rpjrt::diagnostics::memory_stats(d) {
                    Ok(s) => json!({
                        "bytes_in_use": s.bytes_in_use, "peak_bytes_in_use": s.peak_bytes_in_use,
                        "num_allocs": s.num_allocs, "largest_alloc_size": s.largest_alloc_size,
                        "bytes_limit": s.bytes_limit,
                        "largest_free_block_bytes": s.largest_free_block_bytes,
                    }),
                    Err(e) => json!({"unavailable": e.to_string()}),
                }
            } else {
                Json::Null
            };
            let mut row = json!({
                "memory_stats": stats,
                "id": d.id(), "kind": d.kind(), "process_index": d.process_index(),
                "local_hardware_id": d.local_hardware_id(), "addressable": d.is_addressable(),
                "description": d.description(), "default_memory": default, "attributes": attrs,
            });
            if !repeated.is_empty() {
                row["duplicate_attributes"] = Json::Object(repeated);
            }
            row
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

    if args.json {
        let mut doc = json!({
            "pjrt_version": plugin.version().to_string(),
            "table_size": plugin.table_size(),
            "claimed_table_size": claimed_table_size(&plugin),
            "table_slots": plugin.table_slots(),
            "platform": platform,
            "platform_version": platform_version,
            "attributes": attributes,
            "attributes_error": plugin.attributes_error(),
            "extensions": extensions,
            "devices": device_rows,
            "memories": memory_rows,
        });
        common::set_path_json(&mut doc, "path", plugin.path());
        if !repeated.is_empty() {
            doc["duplicate_attributes"] = Json::Object(repeated);
        }
        common::print_json(&doc)?;
        crate::common::work_done();
        return Ok(EXIT_OK);
    }

    print_plugin(&plugin, Some(&format!("{platform} {platform_version}")));
    crate::outln!("\n{}", paint("devices", Style::Bold));
    crate::outln!(
        "  {:<4} {:<8} {:<8} {:<6} {:<16} description",
        "id",
        "kind",
        "process",
        "hw id",
        "default memory"
    );
    for d in &devices {
        let default = d
            .default_memory()
            .map(|m| m.kind().to_string())
            .unwrap_or_else(|_| "-".into());
        crate::outln!(
            "  {:<4} {:<8} {:<8} {:<6} {:<16} {}",
            d.id(),
            common::printable(d.kind()),
            d.process_index(),
            d.local_hardware_id(),
            common::printable(&default),
            common::printable(d.description())
        );
    }
    crate::outln!(
        "\n{}",
        paint("allocator (PJRT_Device_MemoryStats)", Style::Bold)
    );
    for d in devices.iter().filter(|d| d.is_addressable()) {
        match rpjrt::diagnostics::memory_stats(d) {
            Ok(s) => crate::outln!("  device {:<4} {s}", d.id()),
            Err(e) => crate::outln!("  device {:<4} not reported ({})", d.id(), e.code()),
        }
    }
    crate::outln!("\n{}", paint("memories", Style::Bold));
    crate::outln!("  {:<4} {:<16} {:<8} devices", "id", "kind", "kind id");
    for m in &memories {
        let by: Vec<String> = m
            .addressable_by_devices()
            .unwrap_or_default()
            .iter()
            .map(|d| d.id().to_string())
            .collect();
        crate::outln!(
            "  {:<4} {:<16} {:<8} {}",
            m.id(),
            common::printable(m.kind()),
            m.kind_id(),
            by.join(",")
        );
    }
    crate::common::work_done();
    Ok(EXIT_OK)
}

/// `PJRT_Api.struct_size` as the plugin reported it (the loader uses at most the slots of
/// the plugin's version: [`Plugin::table_size`]).
fn claimed_table_size(plugin: &Plugin) -> usize {
    rpjrt_raw::table_claim(plugin.path()).map_or(plugin.table_size(), |c| c.claimed)
}

/// Attributes as a JSON object, and the names given more than once with every value they
/// were given, in order (empty when none is). The object holds a repeated name's first
/// value, the one `Plugin::attribute` answers; docs/cli.md documents
/// `duplicate_attributes`.
fn attributes_json(
    attributes: &[(String, rpjrt::Value)],
) -> (serde_json::Map<String, Json>, serde_json::Map<String, Json>) {
    let mut first = serde_json::Map::new();
    let mut repeated = serde_json::Map::new();
    for (k, v) in attributes {
        if first.contains_key(k) {
            continue;
        }
        first.insert(k.clone(), value_json(v));
        let all: Vec<Json> = attributes
            .iter()
            .filter(|(n, _)| n == k)
            .map(|(_, v)| value_json(v))
            .collect();
        if all.len() > 1 {
            repeated.insert(k.clone(), Json::Array(all));
        }
    }
    (first, repeated)
}

/// The plugin's attributes (with those given more than once: [`attributes_json`]) and
/// extensions as JSON.
fn plugin_json(
    plugin: &Plugin,
) -> (
    serde_json::Map<String, Json>,
    serde_json::Map<String, Json>,
    Vec<Json>,
) {
    let (attributes, repeated) = attributes_json(plugin.attributes());
    let extensions = plugin
        .extensions()
        .all()
        .iter()
        .map(|e| json!({"name": e.name, "type_id": e.type_id, "struct_size": e.struct_size}))
        .collect();
    (attributes, repeated, extensions)
}

/// The plugin's path, version, attributes and extensions as a table.
fn print_plugin(plugin: &Plugin, platform: Option<&str>) {
    crate::outln!("plugin      {}", common::printable_path(plugin.path()));
    let claimed = claimed_table_size(plugin);
    if claimed == plugin.table_size() {
        crate::outln!(
            "PJRT        {} ({} bytes, {} slots; rpjrt layout {})",
            plugin.version(),
            plugin.table_size(),
            plugin.table_slots(),
            Plugin::rpjrt_layout_version()
        );
    } else {
        // The loader clamped the table: say what the plugin claimed and what is used.
        crate::outln!(
            "PJRT        {} (the plugin's table claims {claimed} bytes; rpjrt uses {} bytes, \
             {} slots, what PJRT {} has; rpjrt layout {})",
            plugin.version(),
            plugin.table_size(),
            plugin.table_slots(),
            plugin.version(),
            Plugin::rpjrt_layout_version()
        );
    }
    if let Some(p) = platform {
        crate::outln!("platform    {}", common::printable(p));
    }
    crate::outln!("\n{}", paint("attributes", Style::Bold));
    if let Some(e) = plugin.attributes_error() {
        crate::outln!(
            "  {}",
            paint(
                &format!("unavailable: {}", common::printable(e)),
                Style::Red
            )
        );
    }
    for (k, v) in plugin.attributes() {
        let k = common::printable(k);
        crate::outln!("  {k:<28} {}", common::printable(&v.to_string()));
    }
    crate::outln!("\n{}", paint("extensions", Style::Bold));
    for e in plugin.extensions().all() {
        crate::outln!(
            "  {:<28} type {:<3} {} bytes",
            common::printable(&e.name),
            e.type_id,
            e.struct_size
        );
    }
}

/// What `info` shows when the plugin loads but its client cannot be created: the plugin's
/// own facts on stdout (with `client_error` in JSON), then the error on stderr as every
/// failure is reported: exit 1, or 2 where the create options were refused
/// ([`common::refuses_options`]).
fn plugin_only(
    plugin: &Plugin,
    err: rpjrt::Error,
    options: &rpjrt::ClientOptions,
    log: &str,
    json: bool,
) -> Result<i32, CliError> {
    if json {
        let (attributes, repeated, extensions) = plugin_json(plugin);
        let mut doc = json!({
            "pjrt_version": plugin.version().to_string(),
            "table_size": plugin.table_size(),
            "claimed_table_size": claimed_table_size(plugin),
            "table_slots": plugin.table_slots(),
            "attributes": attributes,
            "attributes_error": plugin.attributes_error(),
            "extensions": extensions,
            "client_error": common::explain(&err, None),
        });
        common::set_path_json(&mut doc, "path", plugin.path());
        if !repeated.is_empty() {
            doc["duplicate_attributes"] = Json::Object(repeated);
        }
        common::print_json(&doc)?;
    } else {
        print_plugin(plugin, None);
    }
    // A refused option stays the user's mistake (exit 2); anything else is a failure.
    let refused = common::refuses_options(&err, options);
    let note = if refused {
        common::option_refusal_note(&err, options)
    } else {
        String::new()
    };
    let message = common::with_log(
        format!("the plugin loaded, but its client could not be created: {err}{note}"),
        log,
    );
    Err(CliError {
        message,
        exit_code: if refused { EXIT_USAGE } else { EXIT_DEFECT },
    })
}
