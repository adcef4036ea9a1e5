//! The fake plugin's configuration: what the knobs say, parsed once.

use std::collections::{BTreeMap, BTreeSet};

use rpjrt_sys as sys;

/// Names of the configuration knobs. Each is an environment variable read at the first
/// `GetPjrtApi` call of a process, and also a `NAME=VALUE` line for
/// [`crate::configure_from_spec`] and the exported `rpjrt_fake_configure`.
pub mod knobs {
    /// `MAJOR.MINOR`, the version put in `PJRT_Api.pjrt_api_version` (default `0.114`).
    pub const VERSION: &str = "RPJRT_FAKE_VERSION";
    /// Number of function slots exposed; `PJRT_Api.struct_size` becomes `40 + 8 * N`.
    /// Default: the number of entries that existed at the configured minor version
    /// (138 at 0.114).
    pub const TABLE_SLOTS: &str = "RPJRT_FAKE_TABLE_SLOTS";
    /// Comma-separated entry names (`PJRT_Client_Create,PJRT_Buffer_Delete`) whose slots
    /// are null.
    pub const NULL_SLOTS: &str = "RPJRT_FAKE_NULL_SLOTS";
    /// `ENTRY:CODE:message;...`: that entry returns an error with that code and message.
    /// CODE is a PJRT error code name (`INVALID_ARGUMENT`) or number.
    pub const FAIL: &str = "RPJRT_FAKE_FAIL";
    /// `STRUCT:SIZE,...` (for example `PJRT_Client_Create_Args:200`): the entry taking that
    /// struct rejects a `struct_size` below SIZE with INVALID_ARGUMENT, like a newer
    /// plugin would. Also accepts `PJRT_NamedValue`, `PJRT_Program` and
    /// `PJRT_ExecuteOptions`.
    pub const MIN_STRUCT_SIZE: &str = "RPJRT_FAKE_MIN_STRUCT_SIZE";
    /// Comma-separated extension type ids or names on the `PJRT_Api.extension_start`
    /// chain; `ID:SIZE` forces a struct size. Default `Layouts,FFI`; empty means none.
    pub const EXTENSIONS: &str = "RPJRT_FAKE_EXTENSIONS";
    /// `name=kind:value;...` plugin attributes, kind one of `string`, `int64`,
    /// `int64list` (comma-separated), `float`, `bool`. Empty means none.
    pub const ATTRIBUTES: &str = "RPJRT_FAKE_ATTRIBUTES";
    /// `ENTRY:CODE:message;...`: events handed out by that entry complete with that error
    /// (the entry itself succeeds).
    pub const EVENT_ERROR: &str = "RPJRT_FAKE_EVENT_ERROR";
    /// Comma-separated create-option names `PJRT_Client_Create` accepts besides the
    /// `fake_*` ones; when set, any other option is rejected like real plugins do.
    pub const ALLOWED_OPTIONS: &str = "RPJRT_FAKE_ALLOWED_OPTIONS";
    /// `1`: `GetPjrtApi` returns null.
    pub const NULL_API: &str = "RPJRT_FAKE_NULL_API";
    /// Comma-separated entry names: calling that entry raises SIGSEGV (a real crash).
    pub const CRASH_ON: &str = "RPJRT_FAKE_CRASH_ON";
    /// Comma-separated entry names: calling that entry sleeps forever.
    pub const HANG_ON: &str = "RPJRT_FAKE_HANG_ON";
    /// `ok` (default), `refuse` or `drop`: what the FFI extension's `register_handler`
    /// does (`ok`: query the handler's metadata like XLA and record it; `refuse`: return
    /// an error; `drop`: succeed and record nothing).
    pub const FFI: &str = "RPJRT_FAKE_FFI";
    /// `MAJOR.MINOR`, the XLA FFI API version the fake implements (default `0.4`); a
    /// handler reporting a newer one is dropped silently.
    pub const FFI_VERSION: &str = "RPJRT_FAKE_FFI_VERSION";
    /// `1`: client create with `num_nodes`/`node_id` and KV callbacks exchanges device
    /// counts through the KV store and builds a multi-process device list.
    pub const KV: &str = "RPJRT_FAKE_KV";
    /// `BYTES`: each device's `device` memory holds at most that many buffer bytes;
    /// allocating more fails with RESOURCE_EXHAUSTED.
    pub const MEMORY_LIMIT: &str = "RPJRT_FAKE_MEMORY_LIMIT";

    /// Every knob, in the order above.
    pub const ALL: [&str; 16] = [
        VERSION,
        TABLE_SLOTS,
        NULL_SLOTS,
        FAIL,
        MIN_STRUCT_SIZE,
        EXTENSIONS,
        ATTRIBUTES,
        EVENT_ERROR,
        ALLOWED_OPTIONS,
        NULL_API,
        CRASH_ON,
        HANG_ON,
        FFI,
        FFI_VERSION,
        KV,
        MEMORY_LIMIT,
    ];
}

/// What the FFI extension's `register_handler` does ([`knobs::FFI`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FfiMode {
    /// Query the handler's metadata and record it (drop it if its version is newer).
    Ok,
    /// Return an error.
    Refuse,
    /// Return success and record nothing.
    Drop,
}

/// An error the configuration forces an entry (or its events) to report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForcedError {
    /// A `PJRT_Error_Code` value.
    pub code: sys::PJRT_Error_Code,
    /// The message the error carries.
    pub message: String,
}

/// One extension struct on the chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtensionSpec {
    /// A `PJRT_Extension_Type` value.
    pub type_id: sys::PJRT_Extension_Type,
    /// The `struct_size` to report; `None` picks the size that extension has at the
    /// configured minor version (just the base, 24 bytes, for types the fake does not
    /// know). Every function slot in it returns UNIMPLEMENTED.
    pub struct_size: Option<usize>,
}

/// The value of a named value (plugin attribute, device attribute, create option).
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    /// `PJRT_NamedValue_kString`.
    String(String),
    /// `PJRT_NamedValue_kInt64`.
    Int64(i64),
    /// `PJRT_NamedValue_kInt64List`.
    Int64List(Vec<i64>),
    /// `PJRT_NamedValue_kFloat`.
    Float(f32),
    /// `PJRT_NamedValue_kBool`.
    Bool(bool),
}

impl std::fmt::Display for AttrValue {
    /// Writes the value in the knob syntax: `int64:2`, `int64list:1,9,0`, ...
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttrValue::String(s) => write!(f, "string:{s}"),
            AttrValue::Int64(v) => write!(f, "int64:{v}"),
            AttrValue::Int64List(v) => {
                let parts: Vec<String> = v.iter().map(|x| x.to_string()).collect();
                write!(f, "int64list:{}", parts.join(","))
            }
            AttrValue::Float(v) => write!(f, "float:{v}"),
            AttrValue::Bool(v) => write!(f, "bool:{v}"),
        }
    }
}

/// A named attribute.
#[derive(Clone, Debug, PartialEq)]
pub struct Attribute {
    /// The name.
    pub name: String,
    /// The value.
    pub value: AttrValue,
}

impl Attribute {
    /// Builds an attribute.
    pub fn new(name: &str, value: AttrValue) -> Attribute {
        Attribute {
            name: name.to_string(),
            value,
        }
    }
}

/// Everything the knobs can set. `Config::default()` is what an empty environment gives.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `GetPjrtApi` returns null.
    pub null_api: bool,
    /// `(major, minor)` reported in `pjrt_api_version`.
    pub version: (i32, i32),
    /// Slots exposed; `None` derives it from `version`.
    pub table_slots: Option<usize>,
    /// Entry names whose slots are null.
    pub null_slots: BTreeSet<String>,
    /// Entry name to the error it returns.
    pub fail: BTreeMap<String, ForcedError>,
    /// Entry name to the error its events complete with.
    pub event_error: BTreeMap<String, ForcedError>,
    /// Struct name (`PJRT_Client_Create_Args`) to the smallest `struct_size` accepted.
    pub min_struct_size: BTreeMap<String, usize>,
    /// The extension chain, in order.
    pub extensions: Vec<ExtensionSpec>,
    /// What `PJRT_Plugin_Attributes` returns.
    pub attributes: Vec<Attribute>,
    /// If set, create options allowed besides the `fake_*` ones.
    pub allowed_options: Option<BTreeSet<String>>,
    /// Entry names that crash the process.
    pub crash_on: BTreeSet<String>,
    /// Entry names that never return.
    pub hang_on: BTreeSet<String>,
    /// What FFI handler registration does.
    pub ffi: FfiMode,
    /// `(major, minor)` of the XLA FFI API the fake implements.
    pub ffi_version: (i32, i32),
    /// Exchange device counts through the KV callbacks at client create.
    pub kv: bool,
    /// Bytes each device's `device` memory holds; `None`: unlimited.
    pub memory_limit: Option<u64>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            null_api: false,
            version: (0, 114),
            table_slots: None,
            null_slots: BTreeSet::new(),
            fail: BTreeMap::new(),
            event_error: BTreeMap::new(),
            min_struct_size: BTreeMap::new(),
            extensions: default_extensions(),
            attributes: default_attributes(),
            allowed_options: None,
            crash_on: BTreeSet::new(),
            hang_on: BTreeSet::new(),
            ffi: FfiMode::Ok,
            ffi_version: (0, 4),
            kv: false,
            memory_limit: None,
        }
    }
}

/// The default extension chain: Layouts, then FFI.
pub fn default_extensions() -> Vec<ExtensionSpec> {
    vec![
        ExtensionSpec {
            type_id: sys::PJRT_Extension_Type_Layouts,
            struct_size: None,
        },
        ExtensionSpec {
            type_id: sys::PJRT_Extension_Type_FFI,
            struct_size: None,
        },
    ]
}

/// The default plugin attributes: one of each `PJRT_NamedValue` kind.
pub fn default_attributes() -> Vec<Attribute> {
    vec![
        Attribute::new("xla_version", AttrValue::Int64(2)),
        Attribute::new(
            "stablehlo_current_version",
            AttrValue::Int64List(vec![1, 9, 0]),
        ),
        Attribute::new(
            "stablehlo_minimum_version",
            AttrValue::Int64List(vec![0, 9, 0]),
        ),
        Attribute::new("fake_plugin_name", AttrValue::String("rpjrt-fake".into())),
        Attribute::new("fake_is_fake", AttrValue::Bool(true)),
        Attribute::new("fake_ratio", AttrValue::Float(0.5)),
    ]
}

/// Error-code names accepted by the knobs, with their values.
pub const ERROR_CODE_NAMES: [(&str, sys::PJRT_Error_Code); 17] = [
    ("OK", sys::PJRT_Error_Code_OK),
    ("CANCELLED", sys::PJRT_Error_Code_CANCELLED),
    ("UNKNOWN", sys::PJRT_Error_Code_UNKNOWN),
    ("INVALID_ARGUMENT", sys::PJRT_Error_Code_INVALID_ARGUMENT),
    ("DEADLINE_EXCEEDED", sys::PJRT_Error_Code_DEADLINE_EXCEEDED),
    ("NOT_FOUND", sys::PJRT_Error_Code_NOT_FOUND),
    ("ALREADY_EXISTS", sys::PJRT_Error_Code_ALREADY_EXISTS),
    ("PERMISSION_DENIED", sys::PJRT_Error_Code_PERMISSION_DENIED),
    (
        "RESOURCE_EXHAUSTED",
        sys::PJRT_Error_Code_RESOURCE_EXHAUSTED,
    ),
    (
        "FAILED_PRECONDITION",
        sys::PJRT_Error_Code_FAILED_PRECONDITION,
    ),
    ("ABORTED", sys::PJRT_Error_Code_ABORTED),
    ("OUT_OF_RANGE", sys::PJRT_Error_Code_OUT_OF_RANGE),
    ("UNIMPLEMENTED", sys::PJRT_Error_Code_UNIMPLEMENTED),
    ("INTERNAL", sys::PJRT_Error_Code_INTERNAL),
    ("UNAVAILABLE", sys::PJRT_Error_Code_UNAVAILABLE),
    ("DATA_LOSS", sys::PJRT_Error_Code_DATA_LOSS),
    ("UNAUTHENTICATED", sys::PJRT_Error_Code_UNAUTHENTICATED),
];

/// Extension type names accepted by the `EXTENSIONS` knob, with their ids.
pub const EXTENSION_TYPE_NAMES: [(&str, sys::PJRT_Extension_Type); 25] = [
    ("Gpu_Custom_Call", sys::PJRT_Extension_Type_Gpu_Custom_Call),
    ("Profiler", sys::PJRT_Extension_Type_Profiler),
    (
        "Custom_Partitioner",
        sys::PJRT_Extension_Type_Custom_Partitioner,
    ),
    ("Stream", sys::PJRT_Extension_Type_Stream),
    ("Layouts", sys::PJRT_Extension_Type_Layouts),
    ("FFI", sys::PJRT_Extension_Type_FFI),
    (
        "MemoryDescriptions",
        sys::PJRT_Extension_Type_MemoryDescriptions,
    ),
    ("Triton", sys::PJRT_Extension_Type_Triton),
    ("RawBuffer", sys::PJRT_Extension_Type_RawBuffer),
    ("PhaseCompile", sys::PJRT_Extension_Type_PhaseCompile),
    ("Example", sys::PJRT_Extension_Type_Example),
    ("Unknown", sys::PJRT_Extension_Type_Unknown),
    (
        "CrossHostTransfers",
        sys::PJRT_Extension_Type_CrossHostTransfers,
    ),
    (
        "ExecutableMetadata",
        sys::PJRT_Extension_Type_ExecutableMetadata,
    ),
    ("Callback", sys::PJRT_Extension_Type_Callback),
    ("HostAllocator", sys::PJRT_Extension_Type_HostAllocator),
    ("TpuTopology", sys::PJRT_Extension_Type_TpuTopology),
    ("TpuExecutable", sys::PJRT_Extension_Type_TpuExecutable),
    ("Megascale", sys::PJRT_Extension_Type_Megascale),
    ("Shardings", sys::PJRT_Extension_Type_Shardings),
    ("AbiVersion", sys::PJRT_Extension_Type_AbiVersion),
    ("Collectives", sys::PJRT_Extension_Type_Collectives),
    ("MultiSlice", sys::PJRT_Extension_Type_MultiSlice),
    (
        "HostMemoryAllocator",
        sys::PJRT_Extension_Type_HostMemoryAllocator,
    ),
    ("XlaTransform", sys::PJRT_Extension_Type_XlaTransform),
];

/// The name of an error code, or its number as text.
pub fn error_code_name(code: sys::PJRT_Error_Code) -> String {
    ERROR_CODE_NAMES
        .iter()
        .find(|(_, c)| *c == code)
        .map(|(n, _)| n.to_string())
        .unwrap_or_else(|| code.to_string())
}

fn parse_code(text: &str) -> Result<sys::PJRT_Error_Code, String> {
    let t = text.trim();
    let t = t.strip_prefix("PJRT_Error_Code_").unwrap_or(t);
    if let Some((_, c)) = ERROR_CODE_NAMES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(t))
    {
        return Ok(*c);
    }
    t.parse::<sys::PJRT_Error_Code>()
        .map_err(|_| format!("unknown error code {text:?}"))
}

fn parse_forced(knob: &str, text: &str) -> Result<BTreeMap<String, ForcedError>, String> {
    let mut out = BTreeMap::new();
    for item in text.split(';') {
        if item.trim().is_empty() {
            continue;
        }
        let mut parts = item.splitn(3, ':');
        let entry = parts.next().unwrap_or("").trim();
        let code = parts.next();
        let message = parts.next().unwrap_or("").to_string();
        let code = match code {
            Some(c) => parse_code(c).map_err(|e| format!("{knob}: {e} in {item:?}"))?,
            None => return Err(format!("{knob}: expected ENTRY:CODE:message, got {item:?}")),
        };
        if entry.is_empty() {
            return Err(format!("{knob}: missing entry name in {item:?}"));
        }
        let message = if message.is_empty() {
            format!("fake plugin: forced {} from {entry}", error_code_name(code))
        } else {
            message
        };
        out.insert(entry.to_string(), ForcedError { code, message });
    }
    Ok(out)
}

fn parse_names(text: &str) -> BTreeSet<String> {
    text.split([',', ';'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn parse_min_sizes(text: &str) -> Result<BTreeMap<String, usize>, String> {
    let mut out = BTreeMap::new();
    for item in text.split([',', ';']) {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let (name, size) = item.rsplit_once(':').ok_or_else(|| {
            format!(
                "{}: expected STRUCT:SIZE, got {item:?}",
                knobs::MIN_STRUCT_SIZE
            )
        })?;
        let size: usize = size
            .trim()
            .parse()
            .map_err(|_| format!("{}: bad size in {item:?}", knobs::MIN_STRUCT_SIZE))?;
        out.insert(name.trim().to_string(), size);
    }
    Ok(out)
}

fn parse_extensions(text: &str) -> Result<Vec<ExtensionSpec>, String> {
    let mut out = Vec::new();
    for item in text.split([',', ';']) {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let (id, size) = match item.split_once(':') {
            Some((id, size)) => {
                let size: usize = size
                    .trim()
                    .parse()
                    .map_err(|_| format!("{}: bad size in {item:?}", knobs::EXTENSIONS))?;
                if size < sys::PJRT_Extension_Base_STRUCT_SIZE {
                    return Err(format!(
                        "{}: size {size} is smaller than PJRT_Extension_Base",
                        knobs::EXTENSIONS
                    ));
                }
                (id.trim(), Some(size))
            }
            None => (item, None),
        };
        let id = id.strip_prefix("PJRT_Extension_Type_").unwrap_or(id);
        let type_id = match EXTENSION_TYPE_NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(id))
        {
            Some((_, t)) => *t,
            None => id
                .parse::<sys::PJRT_Extension_Type>()
                .map_err(|_| format!("{}: unknown extension type {id:?}", knobs::EXTENSIONS))?,
        };
        out.push(ExtensionSpec {
            type_id,
            struct_size: size,
        });
    }
    Ok(out)
}

fn parse_version(knob: &str, v: &str) -> Result<(i32, i32), String> {
    let (major, minor) = v
        .trim()
        .split_once('.')
        .ok_or_else(|| format!("{knob}: expected MAJOR.MINOR, got {v:?}"))?;
    let major: i32 = major
        .parse()
        .map_err(|_| format!("{knob}: bad major in {v:?}"))?;
    let minor: i32 = minor
        .parse()
        .map_err(|_| format!("{knob}: bad minor in {v:?}"))?;
    Ok((major, minor))
}

fn parse_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" | "" => Some(false),
        _ => None,
    }
}

/// Parses one value in the knob syntax (`int64:2`, `string:abc`, `int64list:1,9,0`,
/// `float:0.5`, `bool:true`).
pub fn parse_attr_value(text: &str) -> Result<AttrValue, String> {
    let (kind, value) = text
        .split_once(':')
        .ok_or_else(|| format!("expected kind:value, got {text:?}"))?;
    let bad = || format!("bad {kind} value {value:?}");
    Ok(match kind.trim().to_ascii_lowercase().as_str() {
        "string" | "str" => AttrValue::String(value.to_string()),
        "int64" | "int" => AttrValue::Int64(value.trim().parse().map_err(|_| bad())?),
        "int64list" | "list" => {
            let mut v = Vec::new();
            for part in value.split(',') {
                if part.trim().is_empty() {
                    continue;
                }
                v.push(part.trim().parse().map_err(|_| bad())?);
            }
            AttrValue::Int64List(v)
        }
        "float" => AttrValue::Float(value.trim().parse().map_err(|_| bad())?),
        "bool" => AttrValue::Bool(parse_bool(value).ok_or_else(bad)?),
        other => return Err(format!("unknown value kind {other:?}")),
    })
}

fn parse_attributes(text: &str) -> Result<Vec<Attribute>, String> {
    let mut out = Vec::new();
    for item in text.split(';') {
        if item.trim().is_empty() {
            continue;
        }
        let (name, value) = item.split_once('=').ok_or_else(|| {
            format!(
                "{}: expected name=kind:value, got {item:?}",
                knobs::ATTRIBUTES
            )
        })?;
        let value = parse_attr_value(value).map_err(|e| format!("{}: {e}", knobs::ATTRIBUTES))?;
        out.push(Attribute::new(name.trim(), value));
    }
    Ok(out)
}

impl Config {
    /// Builds a configuration from a lookup of knob values (`None`: knob not set).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
        let mut cfg = Config::default();
        if let Some(v) = lookup(knobs::NULL_API) {
            cfg.null_api = parse_bool(&v)
                .ok_or_else(|| format!("{}: expected 0 or 1, got {v:?}", knobs::NULL_API))?;
        }
        if let Some(v) = lookup(knobs::VERSION) {
            cfg.version = parse_version(knobs::VERSION, &v)?;
        }
        if let Some(v) = lookup(knobs::TABLE_SLOTS) {
            let n: usize = v
                .trim()
                .parse()
                .map_err(|_| format!("{}: expected a number, got {v:?}", knobs::TABLE_SLOTS))?;
            if n > sys::PJRT_API_ENTRIES.len() {
                return Err(format!(
                    "{}: {n} is more than the {} slots of PJRT 0.114",
                    knobs::TABLE_SLOTS,
                    sys::PJRT_API_ENTRIES.len()
                ));
            }
            cfg.table_slots = Some(n);
        }
        if let Some(v) = lookup(knobs::NULL_SLOTS) {
            cfg.null_slots = parse_names(&v);
        }
        if let Some(v) = lookup(knobs::FAIL) {
            cfg.fail = parse_forced(knobs::FAIL, &v)?;
        }
        if let Some(v) = lookup(knobs::EVENT_ERROR) {
            cfg.event_error = parse_forced(knobs::EVENT_ERROR, &v)?;
        }
        if let Some(v) = lookup(knobs::MIN_STRUCT_SIZE) {
            cfg.min_struct_size = parse_min_sizes(&v)?;
        }
        if let Some(v) = lookup(knobs::EXTENSIONS) {
            cfg.extensions = parse_extensions(&v)?;
        }
        if let Some(v) = lookup(knobs::ATTRIBUTES) {
            cfg.attributes = parse_attributes(&v)?;
        }
        if let Some(v) = lookup(knobs::ALLOWED_OPTIONS) {
            cfg.allowed_options = Some(parse_names(&v));
        }
        if let Some(v) = lookup(knobs::CRASH_ON) {
            cfg.crash_on = parse_names(&v);
        }
        if let Some(v) = lookup(knobs::HANG_ON) {
            cfg.hang_on = parse_names(&v);
        }
        if let Some(v) = lookup(knobs::FFI) {
            cfg.ffi = match v.trim() {
                "ok" => FfiMode::Ok,
                "refuse" => FfiMode::Refuse,
                "drop" => FfiMode::Drop,
                _ => {
                    return Err(format!(
                        "{}: expected ok, refuse or drop, got {v:?}",
                        knobs::FFI
                    ))
                }
            };
        }
        if let Some(v) = lookup(knobs::FFI_VERSION) {
            cfg.ffi_version = parse_version(knobs::FFI_VERSION, &v)?;
        }
        if let Some(v) = lookup(knobs::KV) {
            cfg.kv = parse_bool(&v)
                .ok_or_else(|| format!("{}: expected 0 or 1, got {v:?}", knobs::KV))?;
        }
        if let Some(v) = lookup(knobs::MEMORY_LIMIT) {
            let n: u64 = v.trim().parse().map_err(|_| {
                format!("{}: expected a byte count, got {v:?}", knobs::MEMORY_LIMIT)
            })?;
            cfg.memory_limit = Some(n);
        }
        Ok(cfg)
    }

    /// Reads the knobs from the process environment.
    pub fn from_env() -> Result<Config, String> {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the knobs from `NAME=VALUE` lines (the names of [`knobs`]); blank lines and
    /// lines starting with `#` are skipped.
    pub fn from_spec(spec: &str) -> Result<Config, String> {
        let mut map = BTreeMap::new();
        for line in spec.lines() {
            let line = line.trim_start();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, value) = line
                .split_once('=')
                .ok_or_else(|| format!("expected NAME=VALUE, got {line:?}"))?;
            let name = name.trim();
            if !knobs::ALL.contains(&name) {
                return Err(format!("unknown knob {name:?}"));
            }
            map.insert(name.to_string(), value.to_string());
        }
        Config::from_lookup(|name| map.get(name).cloned())
    }
}
