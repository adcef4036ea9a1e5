//! The program-format table (`fixtures/program-formats.tsv`), read by the core: what
//! `ProgramFile::read` makes of each file, and that what it accepts compiles (or loads) on
//! both CPU plugins. The CLI and Python tests read the same table.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use rpjrt::{CompileOptions, Program, ProgramFile};

/// One row of the table: file, format, kind.
pub struct Row {
    file: String,
    format: Option<String>,
    kind: String,
}

fn rows() -> Vec<Row> {
    let text = String::from_utf8(fixture("program-formats.tsv")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 3, "bad table row {l:?}");
            Row {
                file: f[0].to_string(),
                format: Some(f[1].to_string()).filter(|s| s != "-"),
                kind: f[2].to_string(),
            }
        })
        .collect()
}

/// The path a row names, made when it is one of the `@` entries.
fn materialise(row: &Row, dir: &Path, artifact: &[u8], bare: &[u8]) -> PathBuf {
    match row.file.as_str() {
        "@artifact" => {
            let p = dir.join("mul_add.rpjrt");
            std::fs::write(&p, artifact).unwrap();
            p
        }
        "@bare" => {
            let p = dir.join("mul_add.pjrt-executable");
            std::fs::write(&p, bare).unwrap();
            p
        }
        "@fifo" => {
            let p = dir.join("pipe.mlir");
            if !p.exists() {
                let ok = std::process::Command::new("mkfifo")
                    .arg(&p)
                    .status()
                    .unwrap()
                    .success();
                assert!(ok, "mkfifo failed");
            }
            p
        }
        name => fixture_path(name),
    }
}

#[test]
fn every_row_reads_as_the_table_says_and_what_is_accepted_runs() {
    let table = rows();
    assert!(table.len() >= 8);
    for_each_plugin(|p, c| {
        let dir = std::env::temp_dir().join(format!(
            "rpjrt-formats-{}-{}",
            std::process::id(),
            label(p).replace(['/', ' '], "_")
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let exe = compile(c, &mul_add());
        let artifact = exe.serialize().unwrap();
        let bare = exe.serialize_bare().unwrap();
        for row in &table {
            let path = materialise(row, &dir, &artifact, &bare);
            let what = format!("{} --format {:?}", row.file, row.format);
            let read = ProgramFile::read(&path, row.format.as_deref());
            match (row.kind.as_str(), read) {
                ("error", Ok(got)) => panic!("{what}: read as {}", got.kind()),
                ("error", Err(e)) => {
                    assert_eq!(e.code(), rpjrt::Code::InvalidArgument, "{what}: {e}");
                    assert!(
                        e.to_string().contains(path.to_str().unwrap()),
                        "{what}: {e}"
                    );
                }
                (kind, Err(e)) => panic!("{what}: expected {kind}, got {e}"),
                (kind, Ok(got)) => {
                    assert_eq!(got.kind(), kind, "{what}");
                    // The one path from a file to an executable (what `rpjrt run` takes).
                    let exe = c.open_program(&got, None).unwrap();
                    assert_eq!(exe.num_outputs(), 1, "{what}");
                    // Its input specs come from the executable, whatever the format.
                    let params = exe.parameters().expect("parameter specs");
                    assert_eq!(params.len(), 2, "{what}");
                    assert_eq!(params[0].dims, vec![8], "{what}");
                    if let ProgramFile::Program(prog) = &got {
                        let again = c.compile(prog, &CompileOptions::default()).unwrap();
                        assert_eq!(again.num_outputs(), 1, "{what}");
                    }
                }
            }
            // Program::read is the same rule, with artifacts refused (load them instead).
            let as_program = Program::read(&path, row.format.as_deref());
            assert_eq!(
                as_program.is_ok(),
                matches!(row.kind.as_str(), "mlir" | "hlo"),
                "{what}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    });
}

#[test]
fn compile_options_refuse_what_cannot_compile() {
    for (r, p) in [(0, 1), (1, 0), (-1, 1), (1, i64::from(u32::MAX) + 1)] {
        expect_err(CompileOptions::for_mesh(r, p), &["at least 1"]);
    }
    let o = CompileOptions::for_mesh(1, 2).unwrap();
    assert!(o.use_spmd_partitioning);
    expect_err(o.on_device(0), &["single-device"]);
}
