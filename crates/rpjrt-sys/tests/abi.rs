//! Checks the hand-written ABI against facts measured from the upstream
//! headers (`abi/pjrt-0.114.tsv`, produced by `tools/abi-probe`).
//!
//! Three layers:
//! - `facts_match_declarations`: one generated check per fact row (offset,
//!   size, alignment, STRUCT_SIZE, slot, constant value, counts), and every
//!   row must have been checked;
//! - `declarations_and_facts_cover_each_other`: scans our sources, so a
//!   struct, field, handle or constant added or removed on either side
//!   without re-running the probe fails here;
//! - `pinned_facts`: numbers measured against real plugins (docs/PJRT-FACTS.md), kept
//!   independent of the table.

use rpjrt_sys::*;
use std::collections::{BTreeMap, BTreeSet};
use std::mem::{align_of, offset_of, size_of};

const TSV: &str = include_str!("../abi/pjrt-0.114.tsv");
const SOURCES: [&str; 3] = [
    include_str!("../src/pjrt.rs"),
    include_str!("../src/ext.rs"),
    include_str!("../src/ffi.rs"),
];
/// Items below this line in `ext.rs` come from headers outside the vendored
/// set and have no facts.
const NOT_VENDORED_MARKER: &str = "// abi-probe: not-vendored";
/// Rust-only helpers that mirror no C item.
const RUST_ONLY: [&str; 2] = ["PjrtEntry", "PJRT_API_ENTRIES"];

type Key = (String, String, String);

struct Facts {
    rows: BTreeMap<Key, (String, String)>,
    checked: BTreeSet<Key>,
    errors: Vec<String>,
}

impl Facts {
    fn load() -> Self {
        let mut rows = BTreeMap::new();
        for (n, line) in TSV.lines().enumerate().skip(1) {
            if line.trim().is_empty() {
                continue;
            }
            let c: Vec<&str> = line.split('\t').collect();
            assert_eq!(c.len(), 5, "line {}: {line:?}", n + 1);
            let key = (c[0].to_string(), c[1].to_string(), c[2].to_string());
            let prev = rows.insert(key, (c[3].to_string(), c[4].to_string()));
            assert!(prev.is_none(), "duplicate row at line {}: {line:?}", n + 1);
        }
        Facts {
            rows,
            checked: BTreeSet::new(),
            errors: Vec::new(),
        }
    }

    fn row(&mut self, kind: &str, name: &str, member: &str) -> Option<(String, String)> {
        let key = (kind.to_string(), name.to_string(), member.to_string());
        let r = self.rows.get(&key).cloned();
        if r.is_none() {
            self.errors
                .push(format!("no fact for {kind} {name} {member}"));
        }
        self.checked.insert(key);
        r
    }

    fn expect(&mut self, kind: &str, name: &str, member: &str, value: i128, extra: Option<i128>) {
        let Some((v, e)) = self.row(kind, name, member) else {
            return;
        };
        if v.parse::<i128>().ok() != Some(value) {
            self.errors.push(format!(
                "{kind} {name} {member}: header says {v}, Rust says {value}"
            ));
        }
        if let Some(x) = extra {
            if e.parse::<i128>().ok() != Some(x) {
                self.errors.push(format!(
                    "{kind} {name} {member} (size/align): header says {e}, Rust says {x}"
                ));
            }
        }
    }
}

/// Size of a field's type, named through a projection that is never called.
fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

fn raw(name: &str) -> &str {
    name.trim_start_matches("r#")
}

#[test]
fn facts_match_declarations() {
    let mut f = Facts::load();
    let mut counts: Vec<(String, String)> = Vec::new();

    macro_rules! check_struct {
        ($t:ident) => {
            f.expect(
                "struct",
                stringify!($t),
                "-",
                size_of::<$t>() as i128,
                Some(align_of::<$t>() as i128),
            )
        };
    }
    macro_rules! check_field {
        ($t:ident, $m:ident) => {
            f.expect(
                "field",
                stringify!($t),
                raw(stringify!($m)),
                offset_of!($t, $m) as i128,
                Some(field_size(|s: &$t| &s.$m) as i128),
            )
        };
    }
    macro_rules! check_union_field {
        ($t:ident, $m:ident) => {
            f.expect(
                "field",
                stringify!($t),
                raw(stringify!($m)),
                offset_of!($t, $m) as i128,
                // A union member's size would need an unsafe field access; the
                // union's own size and each member's offset are still checked.
                None,
            )
        };
    }
    macro_rules! check_slot {
        ($m:ident) => {{
            let name = stringify!($m);
            if let Some((v, _)) = f.row("slot", "PJRT_Api", name) {
                let i: usize = v.parse().unwrap();
                if offset_of!(PJRT_Api, $m) != 40 + 8 * i {
                    f.errors.push(format!(
                        "slot {name}: header index {i}, Rust offset {}",
                        offset_of!(PJRT_Api, $m)
                    ));
                }
                if PJRT_API_ENTRIES.get(i).map(|e| e.name) != Some(name) {
                    f.errors
                        .push(format!("PJRT_API_ENTRIES[{i}] is not {name}"));
                }
            }
        }};
    }
    macro_rules! check_struct_size {
        ($t:ident, $c:ident) => {
            f.expect("struct_size", stringify!($t), "-", $c as i128, None)
        };
    }
    macro_rules! check_opaque {
        ($t:ident) => {{
            f.row("opaque", stringify!($t), "-");
            if size_of::<$t>() != 0 {
                f.errors
                    .push(format!("{} should be an opaque handle", stringify!($t)));
            }
        }};
    }
    macro_rules! check_const {
        ($c:ident) => {
            f.expect("const", stringify!($c), "-", $c as i128, None)
        };
    }
    macro_rules! check_type {
        ($t:ident) => {
            f.expect("type", stringify!($t), "-", size_of::<$t>() as i128, None)
        };
    }
    macro_rules! check_count {
        ($kind:ident, $name:literal) => {{
            f.row(stringify!($kind), $name, "-");
            counts.push((stringify!($kind).to_string(), $name.to_string()));
        }};
    }

    include!("generated/abi_checks.rs");

    // Counted facts are compared with our sources in the other test; here we
    // only require that every row of the table was visited by a check.
    let _ = counts;
    let unchecked: Vec<_> = f
        .rows
        .keys()
        .filter(|k| !f.checked.contains(*k))
        .map(|k| format!("{k:?}"))
        .collect();
    assert!(
        unchecked.is_empty(),
        "facts with no check (re-run tools/abi-probe): {unchecked:#?}"
    );
    assert!(
        f.errors.is_empty(),
        "{} mismatch(es):\n{}",
        f.errors.len(),
        f.errors.join("\n")
    );
}

/// What our sources declare, found by scanning the rustfmt-formatted text.
#[derive(Default)]
struct Declared {
    /// struct or union name -> field names.
    records: BTreeMap<String, Vec<String>>,
    opaque: BTreeSet<String>,
    /// constant name -> declared type.
    consts: BTreeMap<String, String>,
}

fn scan_sources() -> Declared {
    let mut d = Declared::default();
    for src in SOURCES {
        let src = src.split(NOT_VENDORED_MARKER).next().unwrap();
        let mut current: Option<(String, Vec<String>)> = None;
        for line in src.lines() {
            if let Some((name, fields)) = current.as_mut() {
                if line == "}" {
                    let (name, fields) = (name.clone(), fields.clone());
                    if fields == ["_opaque"] {
                        d.opaque.insert(name);
                    } else {
                        d.records.insert(name, fields);
                    }
                    current = None;
                } else if let Some(rest) = line.strip_prefix("    ") {
                    if rest.starts_with(' ') || rest.starts_with("//") || rest.starts_with('#') {
                        continue;
                    }
                    let rest = rest.strip_prefix("pub ").unwrap_or(rest);
                    if let Some((field, _)) = rest.split_once(':') {
                        fields.push(raw(field.trim()).to_string());
                    }
                }
                continue;
            }
            let head = line
                .strip_prefix("pub struct ")
                .or_else(|| line.strip_prefix("pub union "));
            if let Some(head) = head {
                if let Some(name) = head.strip_suffix(" {") {
                    if !RUST_ONLY.contains(&name) {
                        current = Some((name.to_string(), Vec::new()));
                    }
                }
            } else if let Some(rest) = line.strip_prefix("pub const ") {
                let (name, rest) = rest.split_once(':').unwrap();
                let ty = rest.split('=').next().unwrap().trim();
                if !name.ends_with("_STRUCT_SIZE") && !RUST_ONLY.contains(&name) {
                    d.consts.insert(name.to_string(), ty.to_string());
                }
            }
        }
        assert!(current.is_none(), "unterminated struct in sources");
    }
    d
}

#[test]
fn declarations_and_facts_cover_each_other() {
    let f = Facts::load();
    let d = scan_sources();
    let mut errors = Vec::new();

    let names = |kind: &str| -> BTreeSet<String> {
        f.rows
            .keys()
            .filter(|k| k.0 == kind)
            .map(|k| k.1.clone())
            .collect()
    };
    let value = |kind: &str, name: &str| -> Option<usize> {
        f.rows
            .get(&(kind.to_string(), name.to_string(), "-".to_string()))
            .and_then(|(v, _)| v.parse().ok())
    };

    // Every struct/union we declare is measured, and nothing else is.
    let ours: BTreeSet<String> = d.records.keys().cloned().collect();
    if ours != names("struct") {
        errors.push(format!(
            "structs only in Rust: {:?}; only in facts: {:?}",
            ours.difference(&names("struct")).collect::<Vec<_>>(),
            names("struct").difference(&ours).collect::<Vec<_>>()
        ));
    }
    if d.opaque != names("opaque") {
        errors.push(format!(
            "opaque handles differ: Rust {:?} vs facts {:?}",
            d.opaque
                .symmetric_difference(&names("opaque"))
                .collect::<Vec<_>>(),
            ""
        ));
    }
    let consts: BTreeSet<String> = d.consts.keys().cloned().collect();
    if consts != names("const") {
        errors.push(format!(
            "constants differ: {:?}",
            consts
                .symmetric_difference(&names("const"))
                .collect::<Vec<_>>()
        ));
    }

    // Field lists: same names in the same order as the measured rows, and
    // the same count as the header's own struct body.
    for (name, fields) in &d.records {
        let measured: BTreeSet<String> = f
            .rows
            .keys()
            .filter(|k| k.0 == "field" && &k.1 == name)
            .map(|k| k.2.clone())
            .collect();
        let ours: BTreeSet<String> = fields.iter().cloned().collect();
        if ours != measured || ours.len() != fields.len() {
            errors.push(format!(
                "{name}: field names differ: {:?}",
                ours.symmetric_difference(&measured).collect::<Vec<_>>()
            ));
        }
        match value("fieldcount", name) {
            Some(n) if n == fields.len() => {}
            other => errors.push(format!(
                "{name}: header has {other:?} fields, Rust has {}",
                fields.len()
            )),
        }
        let mut offsets: Vec<usize> = Vec::new();
        for field in fields {
            let key = ("field".to_string(), name.clone(), field.clone());
            if let Some((v, _)) = f.rows.get(&key) {
                offsets.push(v.parse().unwrap());
            }
        }
        if d.records.contains_key(name)
            && !name.ends_with("_Union")
            && !offsets.windows(2).all(|w| w[0] < w[1])
        {
            errors.push(format!(
                "{name}: fields are not in header order ({offsets:?})"
            ));
        }
    }

    // Enumerators: as many constants of each enum type as the header lists.
    for (kind, enum_name, _) in f.rows.keys().filter(|k| k.0 == "enumcount") {
        let _ = kind;
        let ours = d.consts.values().filter(|t| *t == enum_name).count();
        if Some(ours) != value("enumcount", enum_name) {
            errors.push(format!(
                "{enum_name}: header has {:?} enumerators, Rust has {ours}",
                value("enumcount", enum_name)
            ));
        }
    }

    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn pinned_facts() {
    // PJRT_Api: 138 slots at 0.114/0.115, function i at byte 40 + 8*i.
    assert_eq!(PJRT_API_ENTRIES.len(), 138);
    assert_eq!(PJRT_Api_STRUCT_SIZE, 1144);
    assert_eq!(size_of::<PJRT_Api>(), 1144);
    assert_eq!(offset_of!(PJRT_Api, pjrt_api_version), 16);
    assert_eq!(offset_of!(PJRT_Api, PJRT_Error_Destroy), 40);
    assert_eq!(
        offset_of!(PJRT_Api, PJRT_TopologyDescription_GetMemorySpaceKindIds),
        40 + 8 * 137
    );
    assert_eq!(offset_of!(PJRT_Api_Version, major_version), 16);
    assert_eq!(offset_of!(PJRT_Api, pjrt_api_version) + 16, 32);
    assert_eq!((PJRT_API_MAJOR, PJRT_API_MINOR), (0, 114));

    // The 0.81 plugin's table is 984 bytes = 118 slots: exactly the entries
    // dated 0.81 or earlier, and they come first.
    let old = PJRT_API_ENTRIES
        .iter()
        .filter(|e| e.since_minor <= 81)
        .count();
    assert_eq!(old, 118);
    assert_eq!(40 + 8 * old, 984);
    assert!(PJRT_API_ENTRIES[..118].iter().all(|e| e.since_minor <= 81));
    assert!(PJRT_API_ENTRIES[118..].iter().all(|e| e.since_minor > 81));
    assert!(PJRT_API_ENTRIES
        .iter()
        .all(|e| (57..=PJRT_API_MINOR as u32).contains(&e.since_minor)));
    let names: BTreeSet<&str> = PJRT_API_ENTRIES.iter().map(|e| e.name).collect();
    assert_eq!(names.len(), 138, "duplicate entry names");

    // Sizes plugins insist on (docs/PJRT-FACTS.md).
    assert_eq!(PJRT_Client_Create_Args_STRUCT_SIZE, 88);

    // XLA FFI call frame on x86-64 / aarch64 (LP64).
    assert_eq!(offset_of!(XLA_FFI_CallFrame, api), 16);
    assert_eq!(offset_of!(XLA_FFI_CallFrame, ctx), 24);
    assert_eq!(offset_of!(XLA_FFI_CallFrame, stage), 32);
    assert_eq!(offset_of!(XLA_FFI_CallFrame, args), 40);
    assert_eq!(offset_of!(XLA_FFI_CallFrame, rets), 80);
    assert_eq!(offset_of!(XLA_FFI_CallFrame, attrs), 120);
    assert_eq!(XLA_FFI_CallFrame_STRUCT_SIZE, 168);
    assert_eq!((XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR), (0, 3));

    // Type codes differ between PJRT and XLA FFI.
    assert_eq!(PJRT_Buffer_Type_BF16, 13);
    assert_eq!(XLA_FFI_DataType_BF16, 16);
    assert_eq!(PJRT_Buffer_Type_F6E3M2FN, 33);
}
