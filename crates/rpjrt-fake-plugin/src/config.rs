//! The fake plugin's configuration: what the knobs say, parsed once.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use rpjrt_sys as sys;

macro_rules! knobs {
    ($($(#[$m:meta])* $name:ident,)*) => {
        /// Names of the configuration knobs (see the crate docs for what each does).
        /// Each is an environment variable read at the first `GetPjrtApi` call of a
        /// process, and also a `NAME=VALUE` line for [`crate::configure_from_spec`] and
        /// the exported `rpjrt_fake_configure`.
        pub mod knobs {
            $($(#[$m])* pub const $name: &str = concat!("RPJRT_FAKE_", stringify!($name));)*
            /// Every knob, in the order above.
            pub const ALL: &[&str] = &[$($name),*];
        }
    };
}

knobs! {
    /// `MAJOR.MINOR` put in `PJRT_Api.pjrt_api_version` (default `0.114`).
    VERSION,
    /// Number of function slots exposed (default: those that existed at the version).
    TABLE_SLOTS,
    /// Entry names whose slots are null.
    NULL_SLOTS,
    /// `ENTRY:CODE:message;...`: that entry returns an error with that code and message.
    FAIL,
    /// `STRUCT:SIZE,...`: a smaller `struct_size` of that struct is INVALID_ARGUMENT.
    MIN_STRUCT_SIZE,
    /// Extension type ids or names on the chain, `ID:SIZE` to force a size.
    EXTENSIONS,
    /// `name=kind:value;...` plugin attributes.
    ATTRIBUTES,
    /// `ENTRY:CODE:message;...`: events handed out by that entry complete with that error.
    EVENT_ERROR,
    /// Create-option names accepted besides the `fake_*` ones (others are rejected).
    ALLOWED_OPTIONS,
    /// `1`: `GetPjrtApi` returns null.
    NULL_API,
    /// Entry names: calling that entry raises SIGSEGV (a real crash).
    CRASH_ON,
    /// Entry names: calling that entry ends the process with `exit(0)`, as a plugin that
    /// gives up in its own way does.
    EXIT_ON,
    /// Entry names: calling that entry sleeps forever.
    HANG_ON,
    /// Entry names: calling that entry first prints a line to stdout and one to stderr,
    /// as plugins that print banners and logs do.
    PRINT_ON,
    /// `ok` (default), `refuse` or `drop`: what the FFI extension's `register_handler` does.
    FFI,
    /// `MAJOR.MINOR`, the XLA FFI API version the fake implements (default `0.4`).
    FFI_VERSION,
    /// `1`: client create with `num_nodes`/`node_id` exchanges device counts over KV.
    KV,
    /// `BYTES`: each device's `device` memory holds at most that many buffer bytes.
    MEMORY_LIMIT,
    /// `BYTES` put in `pjrt_api_version.struct_size` (default: the struct's real size).
    VERSION_STRUCT_SIZE,
    /// `1` or `2`: the Triton extension's args layout the fake writes (default `2`).
    TRITON_VERSION,
    /// Text `PRINT_ON` writes on stdout instead of its hello line, as it is (newlines and
    /// control characters included): a plugin printing what a harness reads.
    PRINT_TEXT,
    /// `BYTES` put in `PJRT_Api.struct_size` whatever the slots exposed: a plugin whose
    /// table claims more than its version has. The slots past those exposed then hold a
    /// function that aborts the process (what lies past a real plugin's table is no
    /// function to call).
    API_STRUCT_SIZE,
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
    pub exit_on: BTreeSet<String>,
    /// Entry names that never return.
    pub hang_on: BTreeSet<String>,
    /// Entry names that print to stdout and stderr when called.
    pub print_on: BTreeSet<String>,
    /// What FFI handler registration does.
    pub ffi: FfiMode,
    /// `(major, minor)` of the XLA FFI API the fake implements.
    pub ffi_version: (i32, i32),
    /// Exchange device counts through the KV callbacks at client create.
    pub kv: bool,
    /// Bytes each device's `device` memory holds; `None`: unlimited.
    pub memory_limit: Option<u64>,
    /// The `struct_size` reported in `pjrt_api_version`.
    pub version_struct_size: usize,
    /// Version of the Triton extension's args layout (1: cluster dims, 2: output path).
    pub triton_version: i32,
    /// What `PRINT_ON` prints on stdout; `None`: its hello line.
    pub print_text: Option<String>,
    /// `PJRT_Api.struct_size` to report instead of the exposed slots' size.
    pub api_struct_size: Option<usize>,
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
            extensions: [
                sys::PJRT_Extension_Type_Layouts,
                sys::PJRT_Extension_Type_FFI,
            ]
            .map(|type_id| ExtensionSpec {
                type_id,
                struct_size: None,
            })
            .to_vec(),
            attributes: vec![
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
            ],
            allowed_options: None,
            crash_on: BTreeSet::new(),
            exit_on: BTreeSet::new(),
            hang_on: BTreeSet::new(),
            print_on: BTreeSet::new(),
            ffi: FfiMode::Ok,
            ffi_version: (0, 4),
            kv: false,
            memory_limit: None,
            version_struct_size: sys::PJRT_Api_Version_STRUCT_SIZE,
            triton_version: 2,
            print_text: None,
            api_struct_size: None,
        }
    }
}

/// `(name, value)` for the constants `$prefix$name` of rpjrt-sys.
macro_rules! names {
    ($prefix:ident: $($name:ident)*) => {
        pastey::paste!(&[$((stringify!($name), sys::[<$prefix $name>]),)*])
    };
}

/// Error-code names accepted by the knobs, with their values.
const ERROR_CODE_NAMES: &[(&str, sys::PJRT_Error_Code)] = names! { PJRT_Error_Code_:
    OK CANCELLED UNKNOWN INVALID_ARGUMENT DEADLINE_EXCEEDED NOT_FOUND ALREADY_EXISTS
    PERMISSION_DENIED RESOURCE_EXHAUSTED FAILED_PRECONDITION ABORTED OUT_OF_RANGE
    UNIMPLEMENTED INTERNAL UNAVAILABLE DATA_LOSS UNAUTHENTICATED
};

/// Extension type names accepted by the `EXTENSIONS` knob, with their ids.
const EXTENSION_TYPE_NAMES: &[(&str, sys::PJRT_Extension_Type)] = names! { PJRT_Extension_Type_:
    Gpu_Custom_Call Profiler Custom_Partitioner Stream Layouts FFI MemoryDescriptions Triton
    RawBuffer PhaseCompile Example Unknown CrossHostTransfers ExecutableMetadata Callback
    HostAllocator TpuTopology TpuExecutable Megascale Shardings AbiVersion Collectives
    MultiSlice HostMemoryAllocator XlaTransform
};

/// A value from `table` by name (case-insensitive, `prefix` optional) or by number.
fn by_name<T: Copy + FromStr>(table: &[(&str, T)], prefix: &str, text: &str) -> Option<T> {
    let t = text.trim();
    let t = t.strip_prefix(prefix).unwrap_or(t);
    let found = table.iter().find(|(n, _)| n.eq_ignore_ascii_case(t));
    found.map(|(_, v)| *v).or_else(|| t.parse().ok())
}

/// Parses a number-like knob value, or says what `knob` expected.
fn parse<T: FromStr>(knob: &str, v: &str, what: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("{knob}: expected {what}, got {v:?}"))
}

/// The non-blank items of a list separated by any of `seps`.
fn items<'a>(text: &'a str, seps: &'a [char]) -> impl Iterator<Item = &'a str> {
    text.split(seps).filter(|i| !i.trim().is_empty())
}

fn parse_names(text: &str) -> BTreeSet<String> {
    items(text, &[',', ';'])
        .map(|s| s.trim().to_string())
        .collect()
}

fn parse_forced(knob: &str, text: &str) -> Result<BTreeMap<String, ForcedError>, String> {
    let mut out = BTreeMap::new();
    for item in items(text, &[';']) {
        let (entry, rest) = (item.split_once(':'))
            .ok_or_else(|| format!("{knob}: expected ENTRY:CODE:message, got {item:?}"))?;
        let (code, message) = rest.split_once(':').unwrap_or((rest, ""));
        let code = by_name(ERROR_CODE_NAMES, "PJRT_Error_Code_", code)
            .ok_or_else(|| format!("{knob}: unknown error code {code:?} in {item:?}"))?;
        let entry = entry.trim();
        if entry.is_empty() {
            return Err(format!("{knob}: missing entry name in {item:?}"));
        }
        let message = match message {
            "" => {
                let name = ERROR_CODE_NAMES.iter().find(|(_, c)| *c == code);
                let name = name.map_or_else(|| code.to_string(), |(n, _)| n.to_string());
                format!("fake plugin: forced {name} from {entry}")
            }
            m => m.to_string(),
        };
        out.insert(entry.to_string(), ForcedError { code, message });
    }
    Ok(out)
}

/// `NAME:SIZE` (split at the last colon), the size parsed.
fn name_size<'a>(knob: &str, item: &'a str, what: &str) -> Result<(&'a str, usize), String> {
    let (name, size) = (item.rsplit_once(':'))
        .ok_or_else(|| format!("{knob}: expected {what}:SIZE, got {item:?}"))?;
    let size = (size.trim().parse()).map_err(|_| format!("{knob}: bad size in {item:?}"))?;
    Ok((name.trim(), size))
}

fn parse_extensions(text: &str) -> Result<Vec<ExtensionSpec>, String> {
    let knob = knobs::EXTENSIONS;
    let mut out = Vec::new();
    for item in items(text, &[',', ';']).map(str::trim) {
        let (id, struct_size) = match item.contains(':') {
            true => name_size(knob, item, "ID").map(|(id, size)| (id, Some(size)))?,
            false => (item, None),
        };
        if let Some(size) = struct_size.filter(|s| *s < sys::PJRT_Extension_Base_STRUCT_SIZE) {
            return Err(format!(
                "{knob}: size {size} is smaller than PJRT_Extension_Base"
            ));
        }
        let type_id = by_name(EXTENSION_TYPE_NAMES, "PJRT_Extension_Type_", id)
            .ok_or_else(|| format!("{knob}: unknown extension type {id:?}"))?;
        out.push(ExtensionSpec {
            type_id,
            struct_size,
        });
    }
    Ok(out)
}

fn parse_version(knob: &str, v: &str) -> Result<(i32, i32), String> {
    let (major, minor) = (v.trim().split_once('.'))
        .ok_or_else(|| format!("{knob}: expected MAJOR.MINOR, got {v:?}"))?;
    let major = major
        .parse()
        .map_err(|_| format!("{knob}: bad major in {v:?}"))?;
    Ok((
        major,
        minor
            .parse()
            .map_err(|_| format!("{knob}: bad minor in {v:?}"))?,
    ))
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
fn parse_attr_value(text: &str) -> Result<AttrValue, String> {
    let (kind, value) =
        (text.split_once(':')).ok_or_else(|| format!("expected kind:value, got {text:?}"))?;
    let bad = || format!("bad {kind} value {value:?}");
    let num = |v: &str| v.trim().parse().map_err(|_| bad());
    Ok(match kind.trim().to_ascii_lowercase().as_str() {
        "string" | "str" => AttrValue::String(value.to_string()),
        "int64" | "int" => AttrValue::Int64(num(value)?),
        "int64list" | "list" => {
            AttrValue::Int64List(items(value, &[',']).map(num).collect::<Result<_, _>>()?)
        }
        "float" => AttrValue::Float(value.trim().parse().map_err(|_| bad())?),
        "bool" => AttrValue::Bool(parse_bool(value).ok_or_else(bad)?),
        other => return Err(format!("unknown value kind {other:?}")),
    })
}

fn parse_attributes(text: &str) -> Result<Vec<Attribute>, String> {
    let knob = knobs::ATTRIBUTES;
    let attribute = |item: &str| {
        let (name, value) = (item.split_once('='))
            .ok_or_else(|| format!("{knob}: expected name=kind:value, got {item:?}"))?;
        let value = parse_attr_value(value).map_err(|e| format!("{knob}: {e}"))?;
        Ok(Attribute::new(name.trim(), value))
    };
    items(text, &[';']).map(attribute).collect()
}

impl Config {
    /// Builds a configuration from a lookup of knob values (`None`: knob not set).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
        let mut c = Config::default();
        for &knob in knobs::ALL {
            let Some(v) = lookup(knob) else {
                continue;
            };
            let flag = |v: &str| {
                parse_bool(v).ok_or_else(|| format!("{knob}: expected 0 or 1, got {v:?}"))
            };
            match knob {
                knobs::VERSION => c.version = parse_version(knob, &v)?,
                knobs::TABLE_SLOTS => c.table_slots = Some(parse(knob, &v, "a number")?),
                knobs::NULL_SLOTS => c.null_slots = parse_names(&v),
                knobs::FAIL => c.fail = parse_forced(knob, &v)?,
                knobs::MIN_STRUCT_SIZE => {
                    let size = |i: &str| {
                        name_size(knob, i.trim(), "STRUCT").map(|(n, s)| (n.to_string(), s))
                    };
                    c.min_struct_size =
                        items(&v, &[',', ';']).map(size).collect::<Result<_, _>>()?;
                }
                knobs::EXTENSIONS => c.extensions = parse_extensions(&v)?,
                knobs::ATTRIBUTES => c.attributes = parse_attributes(&v)?,
                knobs::EVENT_ERROR => c.event_error = parse_forced(knob, &v)?,
                knobs::ALLOWED_OPTIONS => c.allowed_options = Some(parse_names(&v)),
                knobs::NULL_API => c.null_api = flag(&v)?,
                knobs::CRASH_ON => c.crash_on = parse_names(&v),
                knobs::EXIT_ON => c.exit_on = parse_names(&v),
                knobs::HANG_ON => c.hang_on = parse_names(&v),
                knobs::PRINT_ON => c.print_on = parse_names(&v),
                knobs::PRINT_TEXT => c.print_text = Some(v.clone()),
                knobs::API_STRUCT_SIZE => {
                    c.api_struct_size = Some(parse(knob, &v, "a byte count")?)
                }
                knobs::FFI => {
                    c.ffi = match v.trim() {
                        "ok" => FfiMode::Ok,
                        "refuse" => FfiMode::Refuse,
                        "drop" => FfiMode::Drop,
                        _ => return Err(format!("{knob}: expected ok, refuse or drop, got {v:?}")),
                    }
                }
                knobs::FFI_VERSION => c.ffi_version = parse_version(knob, &v)?,
                knobs::KV => c.kv = flag(&v)?,
                knobs::MEMORY_LIMIT => c.memory_limit = Some(parse(knob, &v, "a byte count")?),
                knobs::VERSION_STRUCT_SIZE => {
                    c.version_struct_size = parse(knob, &v, "a byte count")?
                }
                knobs::TRITON_VERSION => {
                    c.triton_version = match v.trim() {
                        "1" => 1,
                        "2" => 2,
                        _ => return Err(format!("{knob}: expected 1 or 2, got {v:?}")),
                    }
                }
                _ => unreachable!("every knob is handled"),
            }
        }
        Ok(c)
    }

    /// Reads the knobs from the process environment.
    pub fn from_env() -> Result<Config, String> {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the knobs from `NAME=VALUE` lines (the names of [`knobs`]); blank lines and
    /// lines starting with `#` are skipped.
    pub fn from_spec(spec: &str) -> Result<Config, String> {
        let mut map = BTreeMap::new();
        for line in spec.lines().map(str::trim_start) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, value) = (line.split_once('='))
                .ok_or_else(|| format!("expected NAME=VALUE, got {line:?}"))?;
            if !knobs::ALL.contains(&name.trim()) {
                return Err(format!("unknown knob {:?}", name.trim()));
            }
            map.insert(name.trim().to_string(), value.to_string());
        }
        Config::from_lookup(|name| map.get(name).cloned())
    }
}
