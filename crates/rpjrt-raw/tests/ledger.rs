//! The ledger of C entries (`ledger.tsv`) against the declared table and the raw layer.
//!
//! Every slot of `PJRT_Api` that rpjrt-sys declares has one row, in table order, with the
//! minor version that added it. A `called` row names the raw function that calls it, and
//! the raw layer must call that entry (a `pjrt!`/`pjrt_fn!` call or a read of the slot);
//! a `not-called` row gives the reason, and the raw layer must not call it. So declaring a
//! slot, binding one, or dropping a binding fails here until the ledger says so.

use std::collections::BTreeMap;
use std::path::Path;

use rpjrt_sys::PJRT_API_ENTRIES;

/// One row of the ledger.
struct Row {
    line: usize,
    slot: usize,
    entry: String,
    since: String,
    called: bool,
    note: String,
}

fn ledger() -> Vec<Row> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("ledger.tsv");
    let text = std::fs::read_to_string(&path).expect("crates/rpjrt-raw/ledger.tsv is readable");
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(
            cols.len(),
            5,
            "ledger.tsv line {line_no}: want 5 tab-separated columns (slot, entry, since, \
             status, where or reason), got {}: {line:?}",
            cols.len()
        );
        let called = match cols[3] {
            "called" => true,
            "not-called" => false,
            other => panic!(
                "ledger.tsv line {line_no}: status {other:?} is neither `called` nor `not-called`"
            ),
        };
        rows.push(Row {
            line: line_no,
            slot: cols[0]
                .parse()
                .unwrap_or_else(|_| panic!("ledger.tsv line {line_no}: slot {:?}", cols[0])),
            entry: cols[1].to_string(),
            since: cols[2].to_string(),
            called,
            note: cols[4].trim().to_string(),
        });
    }
    rows
}

/// `src/*.rs` (the raw layer, this crate) with `//` comments removed, per file.
fn raw_sources() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).expect("src is listable") {
        let path = e.expect("a directory entry").path();
        if path.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a raw source file is readable");
        let code: Vec<&str> = text
            .lines()
            .map(|l| l.find("//").map_or(l, |i| &l[..i]))
            .collect();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        out.push((name, code.join("\n")));
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifier that starts at the beginning of `s` (after whitespace).
fn leading_ident(s: &str) -> &str {
    let s = s.trim_start();
    &s[..s.find(|c| !is_ident(c)).unwrap_or(s.len())]
}

/// Every entry the raw layer calls: the second argument of `pjrt!(api, ENTRY, ...)` and
/// `pjrt_fn!(api, ENTRY)`, and slots read directly as `(*table).ENTRY`. Maps entry to the
/// files that call it.
fn called_in_raw() -> BTreeMap<String, Vec<String>> {
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (file, code) in raw_sources() {
        let mut add = |name: &str| {
            if name.starts_with("PJRT_") {
                let files = found.entry(name.to_string()).or_default();
                if !files.contains(&file) {
                    files.push(file.clone());
                }
            }
        };
        for mac in ["pjrt!(", "pjrt_fn!("] {
            for (at, _) in code.match_indices(mac) {
                // A macro's own definition or an unrelated identifier ending in the name.
                if code[..at].ends_with(is_ident) {
                    continue;
                }
                let args = &code[at + mac.len()..];
                if let Some(comma) = args.find(',') {
                    add(leading_ident(&args[comma + 1..]));
                }
            }
        }
        for (at, _) in code.match_indices(").PJRT_") {
            add(leading_ident(&code[at + 2..]));
        }
    }
    found
}

#[test]
fn ledger_lists_every_declared_slot_in_order() {
    let rows = ledger();
    let names: Vec<&str> = rows.iter().map(|r| r.entry.as_str()).collect();
    for (i, e) in PJRT_API_ENTRIES.iter().enumerate() {
        let Some(row) = rows.get(i) else {
            panic!(
                "ledger.tsv stops at {} rows; slot {i} ({}, since 0.{}) and later are missing",
                rows.len(),
                e.name,
                e.since_minor
            );
        };
        assert_eq!(
            (row.slot, row.entry.as_str()),
            (i, e.name),
            "ledger.tsv line {}: slot {i} of the declared table is {} (since 0.{})",
            row.line,
            e.name,
            e.since_minor
        );
        assert_eq!(
            row.since,
            format!("0.{}", e.since_minor),
            "ledger.tsv line {}: {} was added at 0.{}",
            row.line,
            e.name,
            e.since_minor
        );
    }
    assert_eq!(
        rows.len(),
        PJRT_API_ENTRIES.len(),
        "ledger.tsv has rows past the declared table: {:?}",
        &names[PJRT_API_ENTRIES.len().min(names.len())..]
    );
}

#[test]
fn ledger_status_matches_the_raw_layer() {
    let called = called_in_raw();
    let mut wrong = Vec::new();
    for row in ledger() {
        let files = called.get(&row.entry);
        match (row.called, files) {
            (true, None) => wrong.push(format!(
                "line {}: {} is `called` but no pjrt!/pjrt_fn! call or slot read in src/*.rs \
                 names it (mark it not-called with a reason)",
                row.line, row.entry
            )),
            (false, Some(f)) => wrong.push(format!(
                "line {}: {} is `not-called` but src/*.rs calls it in {} (mark it called and \
                 name the function)",
                row.line,
                row.entry,
                f.join(", ")
            )),
            (true, Some(f)) => {
                // The named place must be one of the files that call it.
                let named = row.note.split(", ").all(|w| {
                    w.strip_prefix("raw/")
                        .and_then(|w| w.split_once(':'))
                        .is_some_and(|(file, func)| f.iter().any(|x| x == file) && !func.is_empty())
                });
                if !named {
                    wrong.push(format!(
                        "line {}: {} is called in {}; the where column {:?} must name \
                         raw/FILE:function places among them",
                        row.line,
                        row.entry,
                        f.join(", "),
                        row.note
                    ));
                }
            }
            (false, None) => {
                if row.note.len() < 20 {
                    wrong.push(format!(
                        "line {}: {} is not called; give the reason (got {:?})",
                        row.line, row.entry, row.note
                    ));
                }
            }
        }
    }
    let declared: Vec<&str> = PJRT_API_ENTRIES.iter().map(|e| e.name).collect();
    for (entry, files) in &called {
        if !declared.contains(&entry.as_str()) {
            wrong.push(format!(
                "src/*.rs ({}) calls {entry}, which is not a declared slot",
                files.join(", ")
            ));
        }
    }
    assert!(wrong.is_empty(), "ledger.tsv:\n{}", wrong.join("\n"));
}

#[test]
fn the_scanner_sees_calls_and_ignores_comments() {
    // The scan the ledger relies on: a known call is found, and a slot named only in a doc
    // comment or an args type is not taken for a call.
    let called = called_in_raw();
    assert!(called.contains_key("PJRT_Client_Compile"));
    assert!(
        called.contains_key("PJRT_Error_Destroy"),
        "a direct slot read"
    );
    assert!(called.contains_key("PJRT_Buffer_CopyRawToHost"));
    assert!(
        !called.contains_key("PJRT_Buffer_CopyRawToHostFuture"),
        "only named in comments and ledger reasons"
    );
    assert!(!called.keys().any(|k| k.ends_with("_Args")));
}
