//! Checks the declarations against facts measured from the upstream headers
//! (`abi/pjrt-0.114.tsv`, produced by `tools/abi-probe`).
//!
//! The `c_api!` macro that declares each item also lists its facts
//! (`rpjrt_sys::ABI_FACTS`): every struct's size and alignment, every field's
//! offset and size, field counts, `*_STRUCT_SIZE` values, `PJRT_Api` slot
//! indices, enumerator and constant values and enumerator counts. The table
//! and the declarations must match row for row: a row on one side only fails,
//! as does any value that differs. `pinned_facts` keeps a few numbers measured
//! against real plugins, independent of the table.

use rpjrt_sys::*;
use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};

const TSV: &str = include_str!("../abi/pjrt-0.114.tsv");

type Key = (String, String, String);

/// The table: (kind, name, member) -> (value, extra).
fn table() -> BTreeMap<Key, (String, String)> {
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
    rows
}

fn declared() -> Vec<AbiFact> {
    ABI_FACTS
        .iter()
        .flat_map(|section| section.iter())
        .flat_map(|item| item.iter())
        .copied()
        .collect()
}

fn key(f: &AbiFact) -> Key {
    (f.kind.to_string(), f.name.to_string(), f.member.to_string())
}

/// Compares one declared fact with its row; `None` if they agree.
fn mismatch(f: &AbiFact, value: &str, extra: &str) -> Option<String> {
    let what = format!("{} {} {}", f.kind, f.name, f.member);
    match f.kind {
        // The header only says the handle exists (we declare it zero-sized).
        "opaque" => None,
        _ if value.parse::<i128>().ok() != Some(f.value) => Some(format!(
            "{what}: header says {value}, Rust says {}",
            f.value
        )),
        // `struct_size` rows name the designated last field in `extra`.
        "struct_size" => None,
        _ => {
            let theirs = extra.parse::<i128>().ok();
            (theirs != f.extra).then(|| {
                format!(
                    "{what} (size/alignment): header says {extra}, Rust says {:?}",
                    f.extra
                )
            })
        }
    }
}

#[test]
fn declarations_match_header_facts() {
    let rows = table();
    let facts = declared();
    let mut errors = Vec::new();
    let mut seen = BTreeMap::new();
    for f in &facts {
        let k = key(f);
        if seen.insert(k.clone(), *f).is_some() {
            errors.push(format!("declared twice: {k:?}"));
        }
        match rows.get(&k) {
            None => errors.push(format!("declared but not in the table: {k:?}")),
            Some((v, e)) => errors.extend(mismatch(f, v, e)),
        }
    }
    for k in rows.keys() {
        if !seen.contains_key(k) {
            errors.push(format!("in the table but not declared: {k:?}"));
        }
    }
    // Fields are declared in header order (offsets increase within a struct).
    let mut last: BTreeMap<&str, i128> = BTreeMap::new();
    for f in facts.iter().filter(|f| f.kind == "field") {
        if f.name.ends_with("_Union") {
            continue;
        }
        if let Some(prev) = last.insert(f.name, f.value) {
            if f.value <= prev {
                errors.push(format!("{}.{} is out of header order", f.name, f.member));
            }
        }
    }
    assert!(
        errors.is_empty(),
        "{} mismatch(es) (after an intended change, re-run tools/abi-probe):\n{}",
        errors.len(),
        errors.join("\n")
    );
    // Guard against an empty or truncated list passing vacuously.
    assert!(facts.len() > 1000, "only {} facts declared", facts.len());
}

#[test]
fn entry_list_matches_table_slots() {
    for (i, e) in PJRT_API_ENTRIES.iter().enumerate() {
        let slot = declared()
            .into_iter()
            .find(|f| f.kind == "slot" && f.member == e.name)
            .unwrap_or_else(|| panic!("no slot fact for {}", e.name));
        assert_eq!(slot.value, i as i128, "{}", e.name);
    }
}

/// With `RPJRT_ABI_PRINT=1` (and `--nocapture`), prints the declared rows (kind,
/// name, member, Rust-side hint) for `tools/abi-probe`, which measures exactly these
/// in the headers; otherwise does nothing.
#[test]
fn print_declared() {
    if std::env::var_os("RPJRT_ABI_PRINT").is_none() {
        return;
    }
    println!("abi-probe-begin");
    for f in declared() {
        println!("{}\t{}\t{}\t{}", f.kind, f.name, f.member, f.ty);
    }
    println!("abi-probe-end");
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
    let names: std::collections::BTreeSet<&str> = PJRT_API_ENTRIES.iter().map(|e| e.name).collect();
    assert_eq!(names.len(), 138, "duplicate entry names");

    // Sizes plugins insist on.
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
