//! Round 27 (the CLI and compile-once) of the CLI's regression tests: a stdout that is one
//! of the verb's own input files (`>> INPUT`, `1<> INPUT`) is refused as a named output is;
//! a compile-cache entry above `RPJRT_MAX_FILE_BYTES` is a miss (never a hit whose
//! serialization then fails) and the fallback names the real reason; `conform --diff`
//! escapes the values it prints; `run --random` floats stay below 1 once rounded to their
//! type; and a `/proc` file (size 0, contents made as read) is read, not called "grown".

use std::process::{Command, Stdio};

mod common;

use common::{rpjrt, run, tmpdir};

const ADD: &str = "func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {\n  \
                   %0 = stablehlo.add %x, %x : tensor<3xf32>\n  return %0 : tensor<3xf32>\n}\n";

fn old_plugin() -> String {
    common::old().to_str().unwrap().to_string()
}

/// Runs `c` with stdout on `file` (opened for appending, or read-write at its start with
/// `append` false, as `1<> FILE` does): (exit code, stderr).
fn with_stdout_on(c: &mut Command, file: &std::path::Path, append: bool) -> (i32, String) {
    let f = std::fs::File::options()
        .read(!append)
        .write(true)
        .append(append)
        .create(append)
        .open(file)
        .unwrap();
    let out = c
        .stdout(Stdio::from(f))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// --- 1: stdout that is an input ------------------------------------------------------------

#[test]
fn a_stdout_that_is_an_input_file_is_refused_by_every_verb() {
    // `compile prog.mlir -o - >> prog.mlir` appended the artifact to the program, exit 0
    // (and `trace view`, `conform --diff --json -`, `conform --html -` the same).
    let dir = tmpdir("r27-stdout");
    let plugin = old_plugin();
    let p = |n: &str| dir.join(n);
    std::fs::write(p("prog.mlir"), ADD).unwrap();
    let (rc, _, err) = run(rpjrt().current_dir(&*dir).args([
        "run",
        "prog.mlir",
        "--plugin",
        &plugin,
        "-i",
        "[1,2,3]",
        "--trace",
        "tr.json",
    ]));
    assert_eq!(rc, 0, "{err}");
    let (rc, _, err) = run(rpjrt().current_dir(&*dir).args([
        "conform",
        &plugin,
        "--only",
        "api.version",
        "--json",
        "rep.json",
    ]));
    assert_eq!(rc, 0, "{err}");
    std::fs::copy(p("rep.json"), p("rep2.json")).unwrap();
    std::fs::write(p("x.npy"), {
        // A 3-element float32 .npy.
        let mut h = b"\x93NUMPY\x01\x00".to_vec();
        let mut dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }".to_string();
        while !(10 + dict.len() + 1).is_multiple_of(64) {
            dict.push(' ');
        }
        dict.push('\n');
        h.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        h.extend_from_slice(dict.as_bytes());
        for v in [1f32, 2.0, 3.0] {
            h.extend_from_slice(&v.to_le_bytes());
        }
        h
    })
    .unwrap();
    // A small copy of a plugin library (the fake plugin), never the real one.
    std::fs::copy(common::fake(), p("lib.so")).unwrap();
    let cases: Vec<(&str, Vec<&str>, bool)> = vec![
        (
            "prog.mlir",
            vec!["compile", "prog.mlir", "-o", "-", "--plugin", &plugin],
            true,
        ),
        (
            "prog.mlir",
            vec!["compile", "prog.mlir", "-o", "o.rpjrt", "--plugin", &plugin],
            true,
        ),
        (
            "prog.mlir",
            vec!["run", "prog.mlir", "--plugin", &plugin, "-i", "[1,2,3]"],
            true,
        ),
        (
            "x.npy",
            vec!["run", "prog.mlir", "--plugin", &plugin, "-i", "x.npy"],
            false,
        ),
        ("tr.json", vec!["trace", "view", "tr.json", "-o", "-"], true),
        (
            "tr.json",
            vec!["trace", "view", "tr.json", "-o", "-"],
            false,
        ),
        (
            "rep.json",
            vec!["conform", "--diff", "rep.json", "rep2.json", "--json", "-"],
            true,
        ),
        (
            "rep.json",
            vec!["conform", "--diff", "rep.json", "rep2.json"],
            true,
        ),
        (
            "rep2.json",
            vec!["conform", "--html", "-", "rep2.json"],
            true,
        ),
        ("lib.so", vec!["info", "./lib.so"], true),
    ];
    for (input, args, append) in cases {
        let before = std::fs::read(p(input)).unwrap();
        let (rc, err) = with_stdout_on(rpjrt().current_dir(&*dir).args(&args), &p(input), append);
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert!(err.contains("stdout is the input file"), "{args:?}: {err}");
        assert_eq!(
            std::fs::read(p(input)).unwrap(),
            before,
            "{args:?} changed {input}"
        );
    }
    // Any other file takes stdout as before.
    let (rc, err) = with_stdout_on(
        rpjrt()
            .current_dir(&*dir)
            .args(["trace", "view", "tr.json", "-o", "-"]),
        &p("page.html"),
        true,
    );
    assert_eq!(rc, 0, "{err}");
    assert!(std::fs::read_to_string(p("page.html"))
        .unwrap()
        .contains("<html"));
}

#[test]
fn a_cache_listing_is_not_written_into_an_entry() {
    let dir = tmpdir("r27-stdout-cache");
    std::fs::write(dir.join("prog.mlir"), ADD).unwrap();
    let (rc, _, err) = run(rpjrt().current_dir(&*dir).args([
        "compile",
        "prog.mlir",
        "-o",
        "a.rpjrt",
        "--cache-dir",
        "c",
        "--plugin",
        &old_plugin(),
    ]));
    assert_eq!(rc, 0, "{err}");
    let entry = std::fs::read_dir(dir.join("c"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "rpjrtexe"))
        .unwrap();
    let before = std::fs::read(&entry).unwrap();
    let key = entry.file_name().unwrap().to_str().unwrap().to_string();
    for args in [
        vec!["cache", "ls", "--dir", "c"],
        vec!["cache", "info", &key, "--dir", "c"],
    ] {
        let (rc, err) = with_stdout_on(rpjrt().current_dir(&*dir).args(&args), &entry, true);
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert!(err.contains("a compile cache entry"), "{err}");
        assert_eq!(std::fs::read(&entry).unwrap(), before);
    }
}

// --- 2: a cache entry above the read bound -------------------------------------------------

#[test]
fn an_entry_above_the_read_bound_is_a_miss_not_a_hit_that_fails() {
    // With RPJRT_CACHE_DIR every later `compile -o` failed (exit 1) while the entry stayed;
    // with --cache-dir it said the entry "was removed (by another process)", which it was
    // not.
    let dir = tmpdir("r27-bound");
    let plugin = old_plugin();
    std::fs::write(dir.join("prog.mlir"), ADD).unwrap();
    let cache = dir.join("c");
    let compile = |out: &str, bound: Option<&str>, env_cache: bool| {
        let mut c = rpjrt();
        c.current_dir(&*dir)
            .args(["compile", "prog.mlir", "-o", out, "--plugin", &plugin]);
        if env_cache {
            c.env("RPJRT_CACHE_DIR", &cache);
        } else {
            c.arg("--cache-dir").arg(&cache);
        }
        if let Some(b) = bound {
            c.env("RPJRT_MAX_FILE_BYTES", b);
        }
        run(&mut c)
    };
    // Stored under the default bound.
    let (rc, out, err) = compile("a.rpjrt", None, true);
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("stored in the compile cache"), "{out}");
    let entries = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "rpjrtexe"))
            .collect()
    };
    let [entry] = &entries()[..] else {
        panic!("{:?}", entries())
    };
    let kept = std::fs::read(entry).unwrap();
    for env_cache in [true, false] {
        for _ in 0..2 {
            let (rc, out, err) = compile("b.rpjrt", Some("1K"), env_cache);
            assert_eq!(rc, 0, "{out}{err}");
            assert!(!out.contains("removed"), "{out}");
            assert!(!out.contains("loaded from the compile cache"), "{out}");
            assert!(err.contains("not reading an entry"), "{err}");
            assert!(err.contains("RPJRT_MAX_FILE_BYTES"), "{err}");
            assert_eq!(std::fs::read(entry).unwrap(), kept, "the entry is kept");
            assert_eq!(
                std::fs::read(dir.join("b.rpjrt")).unwrap().len(),
                std::fs::read(dir.join("a.rpjrt")).unwrap().len()
            );
        }
    }
    // The listing and `cache info` say what a compile does with it.
    for args in [vec!["ls"], vec!["info", "0"]] {
        let key;
        let mut args = args;
        if args[0] == "info" {
            key = entry.file_name().unwrap().to_str().unwrap().to_string();
            args[1] = &key;
        }
        let (rc, out, err) = run(rpjrt()
            .arg("cache")
            .args(&args)
            .arg("--dir")
            .arg(&cache)
            .env("RPJRT_MAX_FILE_BYTES", "1K"));
        assert_eq!(rc, 0, "{err}");
        assert!(out.contains("unusable"), "{out}");
        assert!(out.contains("larger than the 1024 bytes"), "{out}");
    }
    // The default bound: a hit again.
    let (rc, out, err) = compile("c.rpjrt", None, false);
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("loaded from the compile cache"), "{out}");
    // Under the small bound nothing new is stored (it would never be read).
    std::fs::remove_dir_all(&cache).unwrap();
    let (rc, out, err) = compile("d.rpjrt", Some("1K"), true);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("it is not kept"), "{err}");
    assert!(out.contains("did not store it"), "{out}");
    assert!(entries().is_empty(), "{:?}", entries());
}

// --- 3: conform --diff escapes its values --------------------------------------------------

#[test]
fn conform_diff_text_escapes_the_values_it_prints() {
    let dir = tmpdir("r27-diff");
    let a = dir.join("a.json");
    let (rc, _, err) = run(rpjrt()
        .args(["conform", &old_plugin(), "--only", "api.version", "--json"])
        .arg(&a));
    assert_eq!(rc, 0, "{err}");
    let text = std::fs::read_to_string(&a).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["plugin"]["attributes"]["x\u{202e}\u{9b}31m"] = "v\u{85}\u{9b}2J\u{202e}".into();
    doc["results"][0]["facts"]["pjrt_version"] = "0.81\u{202e}\u{9b}31m\u{85}".into();
    let b = dir.join("b.json");
    std::fs::write(&b, serde_json::to_string(&doc).unwrap()).unwrap();
    let (rc, out, err) = run(rpjrt().args(["conform", "--diff"]).arg(&a).arg(&b));
    assert_eq!(rc, 0, "{err}");
    let raw: Vec<char> = out
        .chars()
        .filter(|c| matches!(c, '\u{202e}' | '\u{9b}' | '\u{85}'))
        .collect();
    assert!(raw.is_empty(), "raw {raw:?} in {out:?}");
    assert!(out.contains("\\u{202e}"), "{out}");
    assert!(out.contains("  B: \"0.81\\u{202e}\\x9b31m\\x85\""), "{out}");
}

// --- 4: run --random stays below 1 ----------------------------------------------------------

#[test]
fn random_half_floats_never_reach_one() {
    let dir = tmpdir("r27-random");
    let prog = dir.join("max.mlir");
    std::fs::write(
        &prog,
        "func.func @main(%a: tensor<200000xf16>, %b: tensor<200000xbf16>) -> (tensor<f16>, tensor<bf16>) {
  %ninf = stablehlo.constant dense<0xFC00> : tensor<f16>
  %m = stablehlo.reduce(%a init: %ninf) applies stablehlo.maximum across dimensions = [0] : (tensor<200000xf16>, tensor<f16>) -> tensor<f16>
  %ninfb = stablehlo.constant dense<0xFF80> : tensor<bf16>
  %mb = stablehlo.reduce(%b init: %ninfb) applies stablehlo.maximum across dimensions = [0] : (tensor<200000xbf16>, tensor<bf16>) -> tensor<bf16>
  return %m, %mb : tensor<f16>, tensor<bf16>
}
",
    )
    .unwrap();
    for seed in ["0", "1", "2"] {
        let (rc, out, err) = run(rpjrt().arg("run").arg(&prog).args([
            "--plugin",
            &old_plugin(),
            "--random",
            "--seed",
            seed,
            "--json",
        ]));
        assert_eq!(rc, 0, "{err}");
        let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
        let maxes: Vec<f64> = doc["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["data"].as_f64().unwrap())
            .collect();
        // The largest value below 1 of each type: still reached, never passed.
        assert_eq!(
            maxes,
            vec![1.0 - 2f64.powi(-11), 1.0 - 2f64.powi(-8)],
            "{out}"
        );
    }
}

// --- 5: /proc files ---------------------------------------------------------------------------

#[test]
fn a_proc_file_is_read_not_called_grown() {
    let plugin = old_plugin();
    let dir = tmpdir("r27-proc");
    let out = dir.join("o.rpjrt");
    let out = out.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", "/proc/cpuinfo", "--plugin", &plugin], ""),
        (
            vec![
                "compile",
                "/proc/self/status",
                "-o",
                out,
                "--plugin",
                &plugin,
            ],
            "",
        ),
        (
            vec!["trace", "view", "/proc/self/status", "-o", "-"],
            "not JSON",
        ),
        (
            vec![
                "conform",
                "--diff",
                "/proc/self/status",
                "/proc/self/status",
            ],
            "not JSON",
        ),
    ];
    for (args, says) in cases {
        let (rc, _, err) = run(rpjrt().args(&args));
        assert_ne!(rc, 0, "{args:?}");
        assert!(!err.contains("grew past"), "{args:?}: {err}");
        assert!(!err.contains("once it is written"), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // Read up to the bound, and past it refused as what it is.
    let (rc, _, err) = run(rpjrt()
        .args(["trace", "view", "/proc/self/status", "-o", "-"])
        .env("RPJRT_MAX_FILE_BYTES", "16"));
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("a special file"), "{err}");
    assert!(err.contains("/proc"), "{err}");
}
