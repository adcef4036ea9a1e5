//! Round 23 (state) of the CLI: `rpjrt compile --cache-dir` says what the compile cache
//! reported. With `XLA_FLAGS` naming a pipe (whose flags rpjrt cannot read without taking
//! them from the plugin) the cache is not used, and the verb says so on stderr and in
//! `--json` as `cache_warnings`; without a warning, `cache_warnings` is an empty list.

use std::io::Write;
use std::process::Stdio;

mod common;

use common::{new, rpjrt, tmpdir};

const SUB: &str = "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.subtract %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}";

/// `rpjrt compile` of `SUB` into `dir` with a cache there, `flags` (if any) on stdin as
/// `XLA_FLAGS=/dev/stdin`: (exit code, stdout, stderr).
fn compile(dir: &std::path::Path, flags: Option<&str>, json: bool) -> (i32, String, String) {
    let program = dir.join("sub.mlir");
    std::fs::write(&program, SUB).unwrap();
    let mut c = rpjrt();
    c.arg("compile")
        .arg(&program)
        .arg("-o")
        .arg(dir.join("sub.rpjrt"))
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .arg("--plugin")
        .arg(new())
        .env_remove("XLA_FLAGS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if json {
        c.arg("--json");
    }
    if flags.is_some() {
        c.env("XLA_FLAGS", "/dev/stdin");
    }
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(flags.unwrap_or("").as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn compile_says_why_the_cache_was_not_used() {
    let dir = tmpdir("r23-cache-warnings");
    let fast = Some("--xla_cpu_enable_fast_math=true\n");
    let (code, out, err) = compile(&dir, fast, false);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("did not store it"), "{out}");
    assert!(
        err.contains(
            "rpjrt: warning: compile cache: not used: XLA_FLAGS names the file /dev/stdin"
        ),
        "{err}"
    );
    let (code, out, err) = compile(&dir, fast, true);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let warnings = v["cache_warnings"].as_array().expect("a list");
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("XLA_FLAGS")),
        "{out}"
    );
    assert_eq!(v["from_cache"], false);
    // Nothing was stored: a run without flags compiles, and its list is empty.
    let (code, out, err) = compile(&dir, None, true);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["from_cache"], false, "{out}");
    assert_eq!(v["cache_warnings"], serde_json::json!([]), "{out}");
}
