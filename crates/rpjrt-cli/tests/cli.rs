//! The real `rpjrt` binary, run as a user would: both CPU plugins and the fake plugin,
//! checking output and exit codes (0 ok, 1 defect/failure, 2 usage or bad input).
//!
//! The CPU plugins come from `RPJRT_TEST_PLUGIN_OLD`/`_NEW` or `.deps/plugins.env`
//! (written by `scripts/setup.sh`); the fake plugin from `RPJRT_FAKE_PLUGIN` or
//! `target/debug` (`cargo build -p rpjrt-fake-plugin`, which `scripts/test.sh` runs).
//! Missing plugins fail the tests; nothing is skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;

mod common;

use common::{fake, fixture, new, old, plugin, rpjrt, run, tmpdir};

/// The site-packages directory holding a plugin wheel (for discovery tests).
fn site_of(plugin: &Path) -> PathBuf {
    plugin
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "site-packages"))
        .expect("the test plugins are installed in a site-packages directory")
        .to_path_buf()
}

/// The result of check `name` in a conform JSON report; panics with the report when absent.
fn check_result(report: &Json, name: &str) -> Json {
    report["results"]
        .as_array()
        .and_then(|r| r.iter().find(|x| x["name"] == name))
        .unwrap_or_else(|| panic!("no result for {name} in {report}"))
        .clone()
}

/// `rpjrt run mul_add.mlir` on the fake plugin with two `f32[8]` inputs, the plugin scripted
/// by the environment variable `var=value`: the exit code and stderr.
fn mul_add_on_fake(var: &str, value: &str) -> (i32, String) {
    let (code, _, err) = run(rpjrt()
        .arg("run")
        .arg(fixture("mul_add.mlir"))
        .arg("--plugin")
        .arg(fake())
        .args(["-i", "[1,2,3,4,5,6,7,8]:f32", "-i", "[1,2,3,4,5,6,7,8]:f32"])
        .env(var, value));
    (code, err)
}

#[test]
fn plugins_lists_both_wheels_with_their_sources() {
    let site = site_of(&old());
    let (code, out, err) = run(rpjrt()
        .args(["plugins", "--json"])
        .env("RPJRT_PLUGIN_PATH", &site));
    assert_eq!(code, 0, "{err}");
    let v: Json = serde_json::from_str(&out).unwrap();
    let list = v["plugins"].as_array().unwrap();
    let find = |name: &str| {
        list.iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {out}"))
    };
    let o = find("xla_cpu_pjrt");
    assert_eq!(o["source"], "entry point xla_plugins:xla_cpu_pjrt");
    assert_eq!(o["pjrt_version"], "0.81");
    assert_eq!(o["version"], "0.0.1");
    let n = find("lammps_jax_pjrt_cpu");
    assert_eq!(n["source"], "package lammps-jax-pjrt-cpu");
    assert_eq!(n["pjrt_version"], "0.115");
    // The table form names the same plugins.
    let (code, out, _) = run(rpjrt().arg("plugins").env("RPJRT_PLUGIN_PATH", &site));
    assert_eq!(code, 0);
    assert!(
        out.contains("xla_cpu_pjrt") && out.contains("package lammps-jax-pjrt-cpu"),
        "{out}"
    );
    assert!(
        !out.contains('\x1b'),
        "no colour with NO_COLOR or off a terminal"
    );
}

#[test]
fn info_by_platform_and_by_wheel_name() {
    let site = site_of(&old());
    let (code, out, err) = run(rpjrt()
        .args(["info", "cpu", "--json"])
        .env("RPJRT_PLUGIN_PATH", &site));
    assert_eq!(code, 0, "{err}");
    let v: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(v["platform"], "cpu");
    // Both CPU plugins leave PJRT_Device_MemoryStats unimplemented, and info says so.
    let stats = v["devices"][0]["memory_stats"]["unavailable"]
        .as_str()
        .unwrap();
    assert!(stats.contains("UNIMPLEMENTED"), "{stats}");
    let (code, out, err) = run(rpjrt()
        .args(["info", "lammps-jax-pjrt-cpu"])
        .env("RPJRT_PLUGIN_PATH", &site));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("0.115"), "{out}");
    // VIRTUAL_ENV is searched too.
    let venv = site.ancestors().nth(3).unwrap().to_path_buf();
    let (code, out, err) = run(rpjrt()
        .args(["info", "xla_cpu_pjrt"])
        .env("VIRTUAL_ENV", &venv));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("0.81"), "{out}");
}

#[test]
fn unknown_plugin_names_what_was_searched_and_what_to_install() {
    let (code, _, err) = run(rpjrt().args(["info", "cuda"]));
    assert_eq!(code, 2);
    assert!(err.contains("no PJRT plugin matching \"cuda\""), "{err}");
    assert!(err.contains("pip install jax-cuda12-pjrt"), "{err}");
    assert_eq!(err.lines().filter(|l| l.starts_with("rpjrt:")).count(), 1);
    let (code, _, err) = run(rpjrt().args(["info", "/nonexistent/plugin.so"]));
    assert_eq!(code, 1);
    assert!(
        err.contains("/nonexistent/plugin.so") && err.contains("cannot be read"),
        "{err}"
    );
    assert!(err.contains("pip install"), "says what to install: {err}");
    let (code, _, _) = run(rpjrt().arg("no-such-verb"));
    assert_eq!(code, 2);
}

#[test]
fn run_text_bytecode_portable_and_hlo_on_both_plugins() {
    for p in [old(), new()] {
        for f in [
            "mul_add.mlir",
            "mul_add.mlirbc",
            "mul_add.jax_export.mlirbc",
            "mul_add.hlo.pb",
        ] {
            let (code, out, err) = run(rpjrt()
                .arg("run")
                .arg(fixture(f))
                .arg("--plugin")
                .arg(&p)
                .args(["-i", "0=[1,2,3,4,5,6,7,8]", "-i", "1=[2,2,2,2,2,2,2,2]:f32"]));
            assert_eq!(code, 0, "{f} on {}: {err}", p.display());
            assert!(
                out.contains("out0: array([3., 5., 7., 9., 11., 13., 15., 17.], dtype=float32)"),
                "{f}: {out}"
            );
            assert!(
                out.contains("execute") && out.contains("compile"),
                "timings: {out}"
            );
        }
    }
}

#[test]
fn arguments_that_are_not_utf8_are_paths_or_usage_errors_never_a_panic() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tmpdir("non-utf8");
    // A file name that is not UTF-8 is a valid path on Linux: the program runs from it.
    let program = dir.join(OsStr::from_bytes(b"prog-\xff\xfe.mlir"));
    std::fs::copy(fixture("mul_add.mlir"), &program).unwrap();
    let out_file = dir.join(OsStr::from_bytes(b"out-\xff.npz"));
    let (code, out, err) = run(rpjrt()
        .arg("run")
        .arg(&program)
        .arg("--plugin")
        .arg(new())
        .args(["-i", "0=[1,2,3,4,5,6,7,8]", "-i", "1=[2,2,2,2,2,2,2,2]:f32"])
        .arg("--out")
        .arg(&out_file));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out_file.exists(), "{out}");
    // A missing one is reported as missing.
    let (code, _, err) = run(rpjrt()
        .arg("run")
        .arg(dir.join(OsStr::from_bytes(b"missing-\xff.mlir")))
        .arg("--plugin")
        .arg(new()));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("missing-") && !err.contains("panicked"),
        "{err}"
    );
    // A plugin named by bytes that are not UTF-8 can only be a path: this one is missing.
    let (code, _, err) = run(rpjrt()
        .arg("info")
        .arg(OsStr::from_bytes(b"/nonexistent/cpu\xff")));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("cannot load PJRT plugin /nonexistent/cpu"),
        "{err}"
    );
    // A plugin at such a path loads.
    let link = dir.join(OsStr::from_bytes(b"plug-\xff.so"));
    std::os::unix::fs::symlink(new(), &link).unwrap();
    let (code, out, err) = run(rpjrt().arg("info").arg(&link));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("0.115"), "{out}");
    // Where only text makes sense, the parser refuses it with a usage error.
    let (code, _, err) = run(rpjrt()
        .args(["info", "-o"])
        .arg(OsStr::from_bytes(b"\xff=1")));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("UTF-8") && !err.contains("panicked"), "{err}");
}

#[test]
fn run_with_npy_inputs_writes_npz_outputs() {
    let dir = tmpdir("npz");
    let a = rpjrt_npy::literal::parse_literal("[1,2,3,4,5,6,7,8]:f32", None).unwrap();
    let b = rpjrt_npy::literal::parse_literal("[0.5,0.5,0.5,0.5,2,2,2,2]:f32", None).unwrap();
    rpjrt_npy::save_npy(dir.join("a.npy"), &a).unwrap();
    rpjrt_npy::save_npz(dir.join("in.npz"), &[("arg1".into(), b)]).unwrap();
    for p in [old(), new()] {
        let out_file = dir.join("out.npz");
        let (code, _, err) = run(rpjrt()
            .arg("run")
            .arg(fixture("mul_add.jax_export.mlirbc"))
            .arg("--plugin")
            .arg(&p)
            .arg("-i")
            .arg(format!("0={}", dir.join("a.npy").display()))
            .arg("-i")
            .arg(dir.join("in.npz"))
            .arg("--out")
            .arg(&out_file)
            .args(["--repeat", "3"]));
        assert_eq!(code, 0, "{err}");
        let got = rpjrt_npy::load(&out_file).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, "out0");
        let want =
            rpjrt_npy::literal::parse_literal("[1.5,2,2.5,3,11,13,15,17]:f32", None).unwrap();
        assert_eq!(got[0].1, want);
    }
}

/// A program that returns a token (as JAX's ordered effects do) ran, then failed while
/// printing with the usage exit code; --json failed the same way, and --out pointed at it.
#[test]
fn run_shows_token_outputs_and_saves_the_others() {
    let dir = tmpdir("token-out");
    let prog = dir.join("tok.mlir");
    std::fs::write(
        &prog,
        "func.func public @main(%x: tensor<f32>) -> (tensor<f32>, !stablehlo.token) {\n  \
         %t = stablehlo.create_token : !stablehlo.token\n  \
         return %x, %t : tensor<f32>, !stablehlo.token\n}\n",
    )
    .unwrap();
    for p in [old(), new()] {
        let base = || {
            let mut c = rpjrt();
            c.arg("run")
                .arg(&prog)
                .arg("--plugin")
                .arg(&p)
                .args(["-i", "2.5"]);
            c
        };
        let (code, out, err) = run(&mut base());
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("out1: token"), "{out}");
        let (code, out, err) = run(base().arg("--json"));
        assert_eq!(code, 0, "{err}");
        let v: Json = serde_json::from_str(&out).unwrap();
        assert_eq!(v["outputs"][1]["dtype"], "token");
        assert!(v["outputs"][1]["data"].is_null());
        assert_eq!(v["outputs"][0]["data"], 2.5);
        let out_file = dir.join("out.npz");
        let (code, _, err) = run(base().arg("--out").arg(&out_file));
        assert_eq!(code, 0, "{err}");
        let got = rpjrt_npy::load(&out_file).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, "out0");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_json_and_random_inputs() {
    let (code, out, err) = run(rpjrt()
        .arg("run")
        .arg(fixture("mul_add.mlir"))
        .arg("--plugin")
        .arg(new())
        .args(["--random", "--json", "--repeat", "2"]));
    assert_eq!(code, 0, "{err}");
    let v: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(v["outputs"][0]["shape"], serde_json::json!([8]));
    assert_eq!(v["outputs"][0]["dtype"], "float32");
    assert_eq!(v["timings"]["execute"]["n"], 2);
}

#[test]
fn run_bad_inputs_are_one_line_errors_with_exit_2() {
    let dir = tmpdir("bad");
    let wrong = rpjrt_npy::literal::parse_literal("[1,2,3]:f32", None).unwrap();
    rpjrt_npy::save_npy(dir.join("wrong.npy"), &wrong).unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "-i".into(),
                format!("0={}", dir.join("wrong.npy").display()),
                "--random".into(),
            ],
            "shape [8]",
        ),
        (
            vec!["-i".into(), "0=/no/such/file.npy".into(), "--random".into()],
            "/no/such/file.npy",
        ),
        (
            vec![
                "-i".into(),
                "0=[1,2,3,4,5,6,7,8]:int32".into(),
                "--random".into(),
            ],
            "int32[8]",
        ),
        (
            vec!["-i".into(), "0=[1,2".into(), "--random".into()],
            "unbalanced",
        ),
        (vec!["-i".into(), "[1,2,3,4,5,6,7,8]".into()], "argument 1"),
        (vec!["-i".into(), "7=1".into()], "takes 2 argument"),
        (
            vec![
                "--random".into(),
                "--out".into(),
                dir.join("x.txt").display().to_string(),
            ],
            ".npz",
        ),
    ];
    for (args, needle) in cases {
        let (code, out, err) = run(rpjrt()
            .arg("run")
            .arg(fixture("mul_add.mlir"))
            .arg("--plugin")
            .arg(old())
            .args(&args));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: nothing on stdout: {out}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let (code, _, err) = run(rpjrt()
        .arg("run")
        .arg(dir.join("missing.mlir"))
        .arg("--plugin")
        .arg(old()));
    assert_eq!(code, 2, "{err}");
}

#[test]
fn compile_errors_keep_the_compiler_diagnostics() {
    let dir = tmpdir("compile");
    let bad = dir.join("bad.mlir");
    std::fs::write(
        &bad,
        "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.add %a, %nope : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n",
    )
    .unwrap();
    for p in [old(), new()] {
        let (code, _, err) = run(rpjrt()
            .arg("run")
            .arg(&bad)
            .arg("--plugin")
            .arg(&p)
            .arg("--random"));
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains("compile failed") && err.contains("2:"),
            "location kept: {err}"
        );
        assert!(err.contains("nope") || err.contains("undeclared"), "{err}");
    }
}

#[test]
fn out_of_memory_says_the_plugin_reports_no_allocator_figures() {
    // Both CPU plugins answer PJRT_Device_MemoryStats with UNIMPLEMENTED (see
    // info_by_platform_and_by_wheel_name); the fake plugin scripted to fail allocation and
    // to answer like them stands in for the out-of-memory error itself.
    let (code, err) = mul_add_on_fake(
        "RPJRT_FAKE_FAIL",
        "PJRT_Client_BufferFromHostBuffer:RESOURCE_EXHAUSTED:out of memory while allocating;\
             PJRT_Device_MemoryStats:UNIMPLEMENTED:GetAllocatorStats is not supported",
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("RESOURCE_EXHAUSTED"), "{err}");
    assert!(err.contains("input 0: "), "{err}");
    assert!(
        err.contains("request: float32[8], 32 bytes, on device 0"),
        "{err}"
    );
    assert!(
        err.contains("reports no allocator figures (PJRT_Device_MemoryStats failed with UNIMPLEMENTED: GetAllocatorStats is not supported)"),
        "{err}"
    );
    assert!(err.contains("hint:"), "{err}");
    // Without parameter types from the plugin, --random cannot guess the inputs.
    let (code, _, err) = run(rpjrt()
        .arg("run")
        .arg(fixture("mul_add.mlir"))
        .arg("--plugin")
        .arg(fake())
        .arg("--random"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("give every input"), "{err}");
}

fn conform_json(plugin: &Path, file: &Path) -> Json {
    let (code, out, err) = run(rpjrt().arg("conform").arg(plugin).arg("--json").arg(file));
    assert_eq!(code, 0, "conform on {}: {out}\n{err}", plugin.display());
    assert!(out.contains(" fail, "), "summary line: {out}");
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

#[test]
fn conform_on_both_cpu_plugins_and_diff() {
    let dir = tmpdir("conform");
    let (a, b) = (dir.join("old.json"), dir.join("new.json"));
    let ra = conform_json(&old(), &a);
    let rb = conform_json(&new(), &b);
    for r in [&ra, &rb] {
        assert_eq!(r["schema"], "rpjrt-conform");
        assert_eq!(r["schema_version"], 2);
        assert_eq!(r["summary"]["fail"], 0);
        assert_eq!(r["summary"]["crash"], 0);
        let results = r["results"].as_array().unwrap();
        assert!(results.len() > 60);
        let by = |n: &str| check_result(r, n);
        assert_eq!(by("compile.portable")["outcome"], "pass");
        assert_eq!(by("execute.multi_device")["outcome"], "pass");
        assert_eq!(by("devices.memory_stats")["outcome"], "unsupported");
        assert_eq!(by("devices.memory_stats")["unsupported_by"], "plugin");
        // Capabilities exercised through the library, not just looked up.
        assert_eq!(by("executable.serialize")["outcome"], "pass");
        assert_eq!(by("ext.ffi")["outcome"], "pass", "{}", by("ext.ffi"));
    }
    let ffi_of = |r: &Json| {
        r["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == "ext.ffi")
            .unwrap()["facts"]["runtime_version"]
            .clone()
    };
    assert_eq!(ffi_of(&ra), "0.2");
    assert_eq!(ffi_of(&rb), "0.4");
    let (code, out, err) = run(rpjrt().args(["conform", "--diff"]).arg(&a).arg(&b));
    assert_eq!(code, 0, "{err}");
    for needle in [
        "plugin.table_size",
        "984",
        "1144",
        "plugin.extensions",
        "XlaTransform",
        "buffers.roundtrip.int1: outcome",
        "client.create_options: unknown_option",
        "ext.ffi: runtime_version",
    ] {
        assert!(out.contains(needle), "diff names {needle}: {out}");
    }
    let (code, out, _) = run(rpjrt().args(["conform", "--diff"]).arg(&a).arg(&a));
    assert_eq!(code, 0);
    assert!(out.contains("no differences"), "{out}");
    let (code, _, err) = run(rpjrt()
        .args(["conform", "--diff"])
        .arg(&a)
        .arg(dir.join("missing.json")));
    assert_eq!(code, 2, "{err}");
}

#[test]
fn conform_html_of_a_run_and_of_saved_reports() {
    let dir = tmpdir("conform-html");
    let only = "api.*,buffers.roundtrip.int1,buffers.scalar";
    let (a, b) = (dir.join("old.json"), dir.join("new.json"));
    let page = dir.join("old.html");
    // A run writes its page alongside its JSON report.
    let (code, out, err) = run(rpjrt()
        .arg("conform")
        .arg(old())
        .args(["--only", only, "--json"])
        .arg(&a)
        .arg("--html")
        .arg(&page));
    assert_eq!(code, 0, "{out}\n{err}");
    let html = std::fs::read_to_string(&page).unwrap();
    let report: Json = serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    assert!(
        html.contains("<h1>Conformance of xla_cpu_pjrt.so</h1>"),
        "{html}"
    );
    for r in report["results"].as_array().unwrap() {
        let row = format!(
            "<tr data-check=\"{}\"><th class=\"sticky\" scope=\"row\"><code>{}</code></th>\
             <td class=\"cell o-{o}\" data-outcome=\"{o}\">",
            r["name"].as_str().unwrap(),
            r["name"].as_str().unwrap(),
            o = r["outcome"].as_str().unwrap()
        );
        assert!(html.contains(&row), "{row} in {html}");
    }
    let (code, _, err) = run(rpjrt()
        .arg("conform")
        .arg(new())
        .args(["--only", only, "--json"])
        .arg(&b));
    assert_eq!(code, 0, "{err}");
    // Saved reports render without running anything: a matrix, int1 differing.
    let matrix = dir.join("m.html");
    let (code, out, err) = run(rpjrt()
        .args(["conform", "--html"])
        .arg(&matrix)
        .arg(&a)
        .arg(&b));
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    let html = std::fs::read_to_string(&matrix).unwrap();
    assert!(html.contains("<tr class=\"diff\" data-check=\"buffers.roundtrip.int1\">"));
    assert!(html.contains("<tr class=\"same\" data-check=\"api.version\">"));
    assert!(html.contains("only differences (1 of "), "{html}");
    // To stdout, and a schema version 1 report is read too.
    let mut v1 = report.clone();
    v1["schema_version"] = serde_json::json!(1);
    let v1_file = dir.join("v1.json");
    std::fs::write(&v1_file, v1.to_string()).unwrap();
    let (code, out, err) = run(rpjrt().args(["conform", "--html", "-"]).arg(&v1_file));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("<!DOCTYPE html>") && out.contains("(schema 1)"),
        "{out}"
    );
    // --only selects the rows of saved reports too.
    let (code, out, err) = run(rpjrt()
        .args(["conform", "--only", "api.version", "--html", "-"])
        .arg(&a)
        .arg(&b));
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.matches("<tr class=\"same\" data-check=").count(),
        1,
        "{out}"
    );
    let (code, _, err) = run(rpjrt()
        .args(["conform", "--only", "nothing.like.this", "--html", "-"])
        .arg(&a));
    assert_eq!(code, 2);
    assert!(err.contains("no check in these reports matches"), "{err}");
    // Bad inputs: exit 2, naming the file or what was wrong.
    let missing = dir.join("missing.json");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{ not json").unwrap();
    let future = dir.join("future.json");
    let mut f = report.clone();
    f["schema_version"] = serde_json::json!(99);
    std::fs::write(&future, f.to_string()).unwrap();
    for (file, says) in [
        (&missing, "missing.json"),
        (&bad, "bad.json: not JSON"),
        (&future, "future.json: conform report schema version 99"),
    ] {
        let (code, _, err) = run(rpjrt()
            .args(["conform", "--html"])
            .arg(dir.join("x.html"))
            .arg(&a)
            .arg(file));
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(says), "{says}: {err}");
    }
    assert!(!dir.join("x.html").exists());
    let (code, _, err) = run(rpjrt().arg("conform").arg(&a));
    assert_eq!(code, 2);
    assert!(
        err.contains("is a saved report") && err.contains("--html"),
        "{err}"
    );
    let (code, _, err) = run(rpjrt()
        .arg("conform")
        .arg(old())
        .arg(&a)
        .arg("--html")
        .arg(&matrix));
    assert_eq!(code, 2);
    assert!(err.contains("not both"), "{err}");
    let (code, _, err) = run(rpjrt()
        .args(["conform", "--json", "-", "--html", "-"])
        .arg(old()));
    assert_eq!(code, 2);
    assert!(err.contains("both want stdout"), "{err}");
}

#[test]
fn conform_json_to_stdout_and_only() {
    let (code, out, err) = run(rpjrt()
        .arg("conform")
        .arg(old())
        .args(["--only", "api.*", "--json", "-"]));
    assert_eq!(code, 0, "{err}");
    let v: Json = serde_json::from_str(&out).expect("stdout is only the JSON document");
    let names: Vec<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        !names.is_empty() && names.iter().all(|n| n.starts_with("api.")),
        "{names:?}"
    );
    assert!(err.is_empty(), "no progress line off a terminal: {err}");
    let (code, _, _) = run(rpjrt()
        .arg("conform")
        .arg(old())
        .args(["--only", "no-such-check"]));
    assert_eq!(code, 2);
}

#[test]
fn conform_isolates_a_crash_and_a_hang() {
    // The conform child aborts (a real signal) before one check and sleeps forever in
    // another, as a crashing or hanging plugin would; every other check still runs.
    let (code, out, err) = run(rpjrt()
        .arg("conform")
        .arg(new())
        .args([
            "--only",
            "api.version,buffers.scalar,execute.*",
            "--timeout",
            "3",
            "--json",
            "-",
        ])
        .env("RPJRT_CONFORM_TEST_CRASH", "buffers.scalar")
        .env("RPJRT_CONFORM_TEST_HANG", "execute.events"));
    assert_eq!(code, 1, "defects found: {err}");
    let v: Json = serde_json::from_str(&out).unwrap();
    let by = |n: &str| check_result(&v, n);
    assert_eq!(by("buffers.scalar")["outcome"], "crash");
    assert!(by("buffers.scalar")["detail"]
        .as_str()
        .unwrap()
        .contains("SIGABRT"));
    assert_eq!(by("execute.events")["outcome"], "timeout");
    for n in [
        "api.version",
        "execute.single",
        "execute.donation",
        "execute.wrong_arguments",
    ] {
        assert_eq!(by(n)["outcome"], "pass", "{n}");
    }
    assert_eq!(v["summary"]["crash"], 1);
    assert_eq!(v["summary"]["timeout"], 1);
}

#[test]
fn conform_on_the_fake_plugin_reports_its_defects() {
    // The fake plugin's compiler is a toy: conform finds wrong results, and says so.
    let (code, out, err) = run(rpjrt()
        .arg("conform")
        .arg(fake())
        .args(["--only", "compile.text,api.*"]));
    assert_eq!(code, 1, "{err}");
    assert!(
        out.contains("fail") && out.contains("compile.text"),
        "{out}"
    );
    // A plugin that fails one entry: that check fails, the rest complete.
    let (code, out, err) = run(rpjrt()
        .arg("conform")
        .arg(fake())
        .args(["--only", "buffers.scalar,api.version", "--json", "-"])
        .env(
            "RPJRT_FAKE_FAIL",
            "PJRT_Buffer_ToHostBuffer:INTERNAL:broken",
        ));
    assert_eq!(code, 1, "{err}");
    let v: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(v["summary"]["fail"], 1);
    assert_eq!(v["summary"]["pass"], 1);
}

#[test]
fn conform_fails_a_plugin_that_cannot_compile() {
    // PJRT_Client_Compile answers UNIMPLEMENTED: conform exited 0, with a green
    // compile.diagnostics (the broken program was "refused") and the rest unsupported.
    let (code, out, err) = run(rpjrt()
        .arg("conform")
        .arg(fake())
        .args(["--only", "compile.*,execute.single"])
        .env(
            "RPJRT_FAKE_FAIL",
            "PJRT_Client_Compile:UNIMPLEMENTED:;PJRT_LoadedExecutable_Execute:UNIMPLEMENTED:",
        ));
    assert_eq!(code, 1, "{out}{err}");
    for line in out
        .lines()
        .filter(|l| l.contains("compile.") || l.contains("execute."))
    {
        assert!(line.starts_with("fail"), "{out}");
        assert!(
            line.contains("PJRT_Client_Compile is required of every PJRT plugin"),
            "{out}"
        );
    }
    assert!(out.contains("0 pass, 6 fail"), "{out}");
}

#[test]
fn conform_without_a_client_reports_one_failure_and_the_blocked_checks() {
    // A plugin that cannot create a client (a GPU plugin without a GPU).
    let no_client = (
        "RPJRT_FAKE_FAIL",
        "PJRT_Client_Create:FAILED_PRECONDITION:no GPU",
    );
    let only = ["--only", "api.version,client.*,buffers.scalar,devices.list"];
    let (code, out, err) = run(rpjrt()
        .arg("conform")
        .arg(fake())
        .args(only)
        .env(no_client.0, no_client.1));
    assert_eq!(code, 1, "blocked checks did not run: {out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    let line = |name: &str| {
        *lines
            .iter()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_else(|| panic!("no line for {name}: {out}"))
    };
    assert!(line("client.create").starts_with("fail"), "{out}");
    assert!(line("client.create").contains("no GPU"), "{out}");
    for name in ["client.platform", "buffers.scalar", "devices.list"] {
        let l = line(name);
        assert!(l.starts_with("blocked"), "{out}");
        // The cause is named; its error is on the cause's line, not repeated.
        assert!(l.ends_with("blocked by client.create"), "{l}");
    }
    assert!(line("api.version").starts_with("pass"), "{out}");
    assert!(out.contains("1 fail") && out.contains("5 blocked"), "{out}");
    // --diff against a run that had a client: the blocked checks are listed together,
    // without their (absent) facts.
    let dir = tmpdir("conform-blocked");
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    let (code, _, err) = run(rpjrt()
        .arg("conform")
        .arg(fake())
        .args(only)
        .arg("--json")
        .arg(&a));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(rpjrt()
        .arg("conform")
        .arg(fake())
        .args(only)
        .arg("--json")
        .arg(&b)
        .env(no_client.0, no_client.1));
    assert_eq!(code, 1, "{err}");
    let (code, out, _) = run(rpjrt().args(["conform", "--diff"]).arg(&a).arg(&b));
    assert_eq!(code, 0);
    assert!(
        out.contains(
            "5 checks blocked in B by client.create: buffers.scalar, client.create_options"
        ),
        "{out}"
    );
    assert!(
        !out.contains("check devices.list: devices"),
        "no fact rows: {out}"
    );
    assert!(out.contains("check client.create: outcome"), "{out}");
    let (_, out, _) = run(rpjrt()
        .args(["conform", "--diff"])
        .arg(&a)
        .arg(&b)
        .args(["--json", "-"]));
    let v: Json = serde_json::from_str(&out).unwrap();
    let blocked_rows = v["differences"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["b"] == "blocked")
        .count();
    assert_eq!(blocked_rows, 5, "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn plugin_log_lines_are_kept_out_unless_asked_for() {
    for p in [old(), new()] {
        // Both plugins log an INFO line when cpu_device_count is given.
        let (code, _, err) = run(rpjrt()
            .arg("info")
            .arg(&p)
            .args(["-o", "cpu_device_count=2"]));
        assert_eq!(code, 0, "{err}");
        assert!(err.is_empty(), "quiet by default: {err}");
        let (code, _, err) =
            run(rpjrt()
                .arg("info")
                .arg(&p)
                .args(["-o", "cpu_device_count=2", "--plugin-log"]));
        assert_eq!(code, 0);
        assert!(err.contains("cpu_device_count"), "shown on request: {err}");
        let (_, _, err) = run(rpjrt()
            .arg("info")
            .arg(&p)
            .args(["-o", "cpu_device_count=2"])
            .env("RPJRT_PLUGIN_LOG", "1"));
        assert!(err.contains("cpu_device_count"), "{err}");
    }
    // conform keeps them per check in the report instead.
    let (code, out, _) = run(rpjrt().arg("conform").arg(old()).args([
        "--only",
        "client.create_options",
        "--json",
        "-",
    ]));
    assert_eq!(code, 0);
    let v: Json = serde_json::from_str(&out).unwrap();
    assert!(v["results"][0]["stderr"]
        .as_str()
        .unwrap()
        .contains("cpu_device_count"));
}

#[test]
fn conform_on_a_plugin_that_does_not_load_says_why() {
    let (code, out, err) = run(rpjrt().args(["conform", "/nonexistent/plugin.so"]));
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("/nonexistent/plugin.so") && err.contains("cannot be read"),
        "{err}"
    );
    let (code, _, err) = run(rpjrt()
        .arg("conform")
        .arg(fake())
        .env("RPJRT_FAKE_NULL_API", "1"));
    assert_eq!(code, 1);
    assert!(err.contains("GetPjrtApi returned a null table"), "{err}");
}

#[test]
fn plugins_never_opens_a_fifo_named_by_the_environment() {
    let dir = tmpdir("fifo");
    let fifo = dir.join("libfifo_pjrt.so");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let (code, out, err) = run(rpjrt()
        .args(["plugins", "--json"])
        .env("RPJRT_PLUGIN", &fifo));
    assert_eq!(code, 0, "{err}");
    let v: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(v["plugins"][0]["source"], "RPJRT_PLUGIN");
    assert!(v["plugins"][0]["pjrt_version"].is_null());
}

#[test]
fn conform_on_the_fake_plugin_scripted_to_segfault_and_hang() {
    // The fake plugin raises SIGSEGV in one entry and sleeps forever in another: conform
    // reports those checks as crash and timeout and completes all the others.
    let (code, out, err) = run(rpjrt()
        .arg("conform")
        .arg(fake())
        .args(["--timeout", "3", "--json", "-"])
        .args([
            "--only",
            "api.*,devices.*,buffers.scalar,buffers.zero_size,buffers.events",
        ])
        .env("RPJRT_FAKE_CRASH_ON", "PJRT_Device_MemoryStats")
        .env("RPJRT_FAKE_HANG_ON", "PJRT_Buffer_ReadyEvent"));
    assert_eq!(code, 1, "{err}");
    let v: Json = serde_json::from_str(&out).unwrap();
    let results = v["results"].as_array().unwrap();
    let by = |n: &str| check_result(&v, n);
    let crashed = by("devices.memory_stats");
    assert_eq!(crashed["outcome"], "crash");
    assert!(
        crashed["detail"].as_str().unwrap().contains("SIGSEGV"),
        "{crashed}"
    );
    assert!(crashed["stderr"]
        .as_str()
        .unwrap()
        .contains("PJRT_Device_MemoryStats: crashing"));
    assert_eq!(by("buffers.events")["outcome"], "timeout");
    let others: Vec<&Json> = results
        .iter()
        .filter(|r| r["name"] != "devices.memory_stats" && r["name"] != "buffers.events")
        .collect();
    assert!(others.len() >= 9, "{out}");
    for r in others {
        assert_eq!(r["outcome"], "pass", "{r}");
    }
}

#[test]
fn out_of_memory_shows_the_allocator_figures_the_plugin_reports() {
    // Under RPJRT_FAKE_MEMORY_LIMIT the fake plugin fails allocation with
    // RESOURCE_EXHAUSTED and reports its allocator through PJRT_Device_MemoryStats.
    let (code, err) = mul_add_on_fake("RPJRT_FAKE_MEMORY_LIMIT", "40");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("RESOURCE_EXHAUSTED"), "{err}");
    assert!(err.contains("input 1: "), "{err}");
    assert!(
        err.contains("request: float32[8], 32 bytes, on device 0"),
        "{err}"
    );
    assert!(
        err.contains("device 0 allocator: in use 32 bytes, limit 40 bytes"),
        "{err}"
    );
    assert!(err.contains("largest free block 8 bytes"), "{err}");
    assert!(err.contains("client memory options: none set"), "{err}");
    assert!(err.contains("hint: "), "{err}");
    // Said once: the CLI does not add the figures a second time.
    assert_eq!(err.matches("allocator:").count(), 1, "{err}");
}

#[test]
fn an_execute_that_runs_out_of_memory_shows_the_figures_and_the_options() {
    // Two 32-byte inputs fit in 80 bytes; the 32-byte output does not.
    let (code, err) = mul_add_on_fake("RPJRT_FAKE_MEMORY_LIMIT", "80");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("PJRT_LoadedExecutable_Execute"), "{err}");
    assert!(err.contains("RESOURCE_EXHAUSTED"), "{err}");
    assert!(err.contains("request: executing"), "{err}");
    assert!(
        err.contains("device 0 allocator: in use 64 bytes, limit 80 bytes"),
        "{err}"
    );
    assert_eq!(err.matches("allocator:").count(), 1, "{err}");
}

/// A plugin that loads but whose client cannot be created here (the CUDA plugin on a machine
/// without a GPU): `info` still shows its version, attributes and extensions, then why the
/// client failed, and exits 1.
#[test]
fn info_on_a_plugin_whose_client_fails_shows_the_plugin_then_the_error() {
    let cuda = plugin("RPJRT_TEST_PLUGIN_CUDA");
    let (code, out, err) = run(rpjrt().arg("info").arg(&cuda));
    assert_eq!(code, 1, "stdout: {out}\nstderr: {err}");
    assert!(out.contains("PJRT        0."), "{out}");
    assert!(out.contains("cuda_version"), "{out}");
    assert!(out.contains("Layouts"), "{out}");
    assert!(err.contains("client could not be created"), "{err}");
    assert!(err.contains("FAILED_PRECONDITION"), "{err}");

    let (code, out, err) = run(rpjrt().arg("info").arg(&cuda).arg("--json"));
    assert_eq!(code, 1, "stderr: {err}");
    let doc: Json = serde_json::from_str(&out).expect("JSON on stdout");
    assert!(doc["pjrt_version"].as_str().unwrap().starts_with("0."));
    assert!(doc["attributes"]["cuda_version"].is_i64(), "{doc}");
    assert!(!doc["extensions"].as_array().unwrap().is_empty());
    assert!(!doc["client_error"].as_str().unwrap().is_empty());
}

/// With no plugin named, discovery ranks an accelerator plugin before the CPU plugin. When
/// the accelerator's client cannot be created here (the CUDA plugin without a GPU), the
/// verbs go on to the CPU plugin and say on stderr what they skipped, as `rpjrt.Client()`
/// does in Python.
#[test]
fn a_plugin_that_loads_but_cannot_serve_is_skipped() {
    let cuda = plugin("RPJRT_TEST_PLUGIN_CUDA");
    let cpu = plugin("RPJRT_TEST_PLUGIN_NEW");
    let names = format!("cuda:{},cpu:{}", cuda.display(), cpu.display());
    let (code, out, err) = run(rpjrt()
        .arg("run")
        .arg(fixture("mul_add.mlir"))
        .args(["-i", "0=[1,1,1,1,1,1,1,1]", "-i", "1=[2,2,2,2,2,2,2,2]"])
        .env("PJRT_NAMES_AND_LIBRARY_PATHS", &names)
        .env("RPJRT_PLUGIN_PATH", "/nonexistent"));
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert!(out.contains('3'), "{out}");
    assert!(err.contains("skipped plugin cuda"), "{err}");

    let (code, out, err) = run(rpjrt()
        .arg("info")
        .env("PJRT_NAMES_AND_LIBRARY_PATHS", &names)
        .env("RPJRT_PLUGIN_PATH", "/nonexistent"));
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert!(out.contains("cpu"), "{out}");
}

/// Bad arguments of every verb, each a usage error: exit 2 and a message naming what was
/// wrong (on stderr; nothing on stdout). `{P}` is replaced by each CPU plugin in turn,
/// `{M}` by a program, `{D}` by an empty directory.
#[test]
fn bad_arguments_of_every_verb_exit_2_with_a_message() {
    let dir = tmpdir("usage");
    let program = fixture("mul_add.mlir").display().to_string();
    let eight = |x: &str| format!("0=[{x},0,0,0,0,0,0,0]:f32");
    let cases: Vec<(Vec<String>, &str)> = [
        // info
        (vec!["info", "{P}", "-o", "="], "empty name"),
        (vec!["info", "{P}", "-o", "a b=1"], "\"a b\""),
        (vec!["info", "{P}", "-o", "novalue"], "NAME=VALUE"),
        (vec!["info", "--bogus"], "--bogus"),
        // plugins
        (vec!["plugins", "extra"], "extra"),
        // conform
        (vec!["conform", "{P}", "--timeout", "0"], "--timeout"),
        (
            vec!["conform", "{P}", "--only", "nosuchcheck"],
            "nosuchcheck",
        ),
        (
            vec!["conform", "--diff", "/no/such/a.json", "/no/such/b.json"],
            "/no/such/a.json",
        ),
        // run
        (
            vec!["run", "{M}", "--plugin", "{P}", "--random", "-o", "="],
            "empty name",
        ),
        (
            vec!["run", "{M}", "--plugin", "{P}", "--random", "-o", "=1"],
            "empty name",
        ),
        (
            vec!["run", "{M}", "--plugin", "{P}", "--random", "-o", "a\tb=1"],
            "create option name",
        ),
        (
            vec!["run", "{M}", "--plugin", "{P}", "-i", "{1e400}", "--random"],
            "1e400 is out of range",
        ),
        (
            vec!["run", "{M}", "--plugin", "{P}", "-i", "{1e39}", "--random"],
            "overflows float32",
        ),
        (
            vec!["run", "{M}", "--plugin", "{P}", "--random", "--repeat", "0"],
            "--repeat",
        ),
        (
            vec!["run", "{M}", "--plugin", "{P}", "--random", "--seed", "abc"],
            "--seed",
        ),
        (
            vec![
                "run", "{M}", "--plugin", "{P}", "--random", "--device", "99",
            ],
            "99",
        ),
        (
            vec![
                "run", "{M}", "--plugin", "{P}", "--random", "--format", "bogus",
            ],
            "bogus",
        ),
        // launch
        (
            vec!["launch", "-n", "0", "--", "true"],
            "at least one process",
        ),
        (vec!["launch", "-n", "-1", "--", "true"], "-1"),
        (
            vec!["launch", "-n", "2", "--timeout", "0", "--", "true"],
            "--timeout",
        ),
        (vec!["launch", "-n", "2"], "<CMD>"),
        // rendezvous
        (
            vec![
                "rendezvous",
                "--process-id",
                "3",
                "--num-processes",
                "2",
                "--coordinator",
                "127.0.0.1:1",
            ],
            "process id 3",
        ),
        (
            vec![
                "rendezvous",
                "--process-id",
                "0",
                "--num-processes",
                "1",
                "--coordinator",
                "nohostport",
            ],
            "nohostport",
        ),
        (vec!["rendezvous", "--process-id", "0"], "--num-processes"),
        (vec!["rendezvous", "--timeout", "0"], "--timeout"),
        // compile
        (
            vec![
                "compile",
                "{M}",
                "--plugin",
                "{P}",
                "-o",
                "{D}/x",
                "--num-replicas",
                "0",
            ],
            "num_replicas",
        ),
        (
            vec![
                "compile", "{M}", "--plugin", "{P}", "-o", "{D}/x", "--format", "bogus",
            ],
            "bogus",
        ),
        (
            vec![
                "compile",
                "{M}",
                "--plugin",
                "{P}",
                "-o",
                "{D}/x",
                "--client-option",
                "=1",
            ],
            "empty name",
        ),
        (
            vec!["compile", "/no/such.mlir", "--plugin", "{P}", "-o", "{D}/x"],
            "/no/such.mlir",
        ),
        // cache
        (
            vec!["cache", "ls", "--dir", "/no/such/cache"],
            "not a cache directory",
        ),
        (vec!["cache", "ls"], "no cache directory"),
        (vec!["cache", "info", "--dir", "{D}", "zzzz"], "zzzz"),
        (
            vec!["cache", "clear", "--dir", "/no/such/cache"],
            "not a cache directory",
        ),
        (vec!["cache", "bogus"], "bogus"),
    ]
    .into_iter()
    .map(|(a, n)| (a.into_iter().map(String::from).collect(), n))
    .collect();
    for (args, needle) in &cases {
        let plugins = if args.iter().any(|a| a == "{P}") {
            vec![old(), new()]
        } else {
            vec![old()]
        };
        for p in plugins {
            let args: Vec<String> = args
                .iter()
                .map(|a| match a.as_str() {
                    "{P}" => p.display().to_string(),
                    "{M}" => program.clone(),
                    "{1e400}" => eight("1e400"),
                    "{1e39}" => eight("1e39"),
                    other => other.replace("{D}", &dir.display().to_string()),
                })
                .collect();
            let (code, out, err) = run(rpjrt()
                .args(&args)
                .env_remove("RPJRT_CACHE_DIR")
                .env_remove("RPJRT_PROCESS_ID")
                .env_remove("RPJRT_NUM_PROCESSES")
                .env_remove("RPJRT_COORDINATOR"));
            assert_eq!(code, 2, "{args:?}: exit {code}: {err}");
            assert!(err.contains(needle), "{args:?}: {needle:?} not in {err}");
            assert!(out.is_empty(), "{args:?}: nothing on stdout: {out}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A plugin that calls exit(0) while loading or running ends `info`, `run` and `compile`
/// with a message and exit code 1: the child's status 0 was passed off as success, with no
/// output and no artifact written.
#[test]
fn a_plugin_that_exits_is_not_taken_for_success() {
    let dir = tmpdir("exit-compile");
    let out_file = dir.join("out.rpjrtexe");
    for (entry, verb) in [
        ("GetPjrtApi", "info"),
        ("PJRT_Client_Create", "info"),
        ("PJRT_Client_Compile", "compile"),
        ("PJRT_LoadedExecutable_Execute", "run"),
    ] {
        let mut cmd = rpjrt();
        cmd.arg(verb);
        match verb {
            "info" => cmd.arg(fake()),
            _ => cmd.arg(fixture("mul_add.mlir")).arg("--plugin").arg(fake()),
        };
        if verb == "compile" {
            cmd.arg("-o").arg(&out_file);
        }
        if verb == "run" {
            for _ in 0..2 {
                cmd.args(["-i", "[1,2,3,4,5,6,7,8]:f32"]);
            }
        }
        let (code, out, err) = run(cmd.env("RPJRT_FAKE_EXIT_ON", entry));
        assert_eq!(code, 1, "{entry} {verb}\nstdout: {out}\nstderr: {err}");
        assert!(err.contains("before it finished"), "{entry} {verb}: {err}");
        assert!(err.contains("called exit()"), "{entry} {verb}: {err}");
        assert!(!out_file.exists(), "{entry} {verb}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A plugin that crashes the process ends `info`, `run` and `compile` with a message and
/// exit code 1 (they run in a child of the CLI), never with the signal.
#[test]
fn a_plugin_crash_in_info_run_or_compile_is_reported_not_suffered() {
    let cases: [(&str, &[&str]); 3] = [
        ("PJRT_Client_Create", &["info"]),
        (
            "PJRT_LoadedExecutable_Execute",
            &[
                "run",
                "-i",
                "[1,2,3,4,5,6,7,8]:f32",
                "-i",
                "[1,2,3,4,5,6,7,8]:f32",
            ],
        ),
        ("PJRT_Client_Compile", &["compile"]),
    ];
    let dir = tmpdir("crash-compile");
    for (entry, verb) in cases {
        let mut cmd = rpjrt();
        cmd.arg(verb[0]);
        if verb[0] != "info" {
            cmd.arg(fixture("mul_add.mlir"));
        }
        if verb[0] == "compile" {
            cmd.arg("-o").arg(dir.join("out.rpjrtexe"));
        }
        cmd.args(&verb[1..]);
        if verb[0] == "info" {
            cmd.arg(fake());
        } else {
            cmd.arg("--plugin").arg(fake());
        }
        cmd.env("RPJRT_FAKE_CRASH_ON", entry);
        let (code, out, err) = run(&mut cmd);
        assert_eq!(code, 1, "{verb:?}\nstdout: {out}\nstderr: {err}");
        assert!(err.contains("SIGSEGV"), "{verb:?}: {err}");
        assert!(err.contains("the plugin crashed"), "{verb:?}: {err}");
        // The plugin's last words are there: written straight to stderr (an execution), or
        // captured by the child (loading, client creation) and shown after the crash.
        assert!(
            err.contains(&format!("{entry}: crashing")),
            "{verb:?}: {err}"
        );
        if verb[0] == "info" {
            assert!(err.contains("the plugin's log"), "{verb:?}: {err}");
        }
        // With --plugin-log it goes straight through.
        let (code, _, err) = run(cmd.arg("--plugin-log"));
        assert_eq!(code, 1, "{verb:?}: {err}");
        assert!(
            err.contains(&format!("{entry}: crashing")),
            "{verb:?}: {err}"
        );
    }
    // A child ended from outside is not called a plugin crash.
    let mut cmd = rpjrt();
    cmd.arg("info")
        .arg(fake())
        .env("RPJRT_FAKE_HANG_ON", "PJRT_Client_Create")
        .stderr(std::process::Stdio::piped());
    let parent = cmd.spawn().unwrap();
    let mut child_pid = None;
    for _ in 0..500 {
        child_pid = child_of(parent.id());
        if child_pid.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let child_pid = child_pid.expect("the supervised child started");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(Command::new("kill")
        .args(["-TERM", &child_pid])
        .status()
        .unwrap()
        .success());
    let out = parent.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + 15), "{err}");
    assert!(err.contains("ended by signal 15"), "{err}");
    assert!(!err.contains("crashed"), "{err}");
    // Supervision off (the child's own marker set by hand): the signal ends the CLI.
    let (code, _, _) = run(rpjrt()
        .arg("info")
        .arg(fake())
        .env("RPJRT_FAKE_CRASH_ON", "PJRT_Client_Create")
        .env("RPJRT_CLI_SUPERVISED", "1"));
    assert_ne!(code, 1);
    assert_ne!(code, 0);
}

/// A process whose parent is `parent`, from /proc.
fn child_of(parent: u32) -> Option<String> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        // pid (comm) state ppid ...: the command may hold spaces and parentheses.
        let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?;
        (ppid == parent.to_string()).then(|| e.file_name().to_string_lossy().into_owned())
    })
}

/// The child runs the verb as before: its output, exit code and stdin are the verb's own.
#[test]
fn supervised_verbs_keep_their_output_and_exit_codes() {
    let (code, out, err) = run(rpjrt()
        .arg("run")
        .arg(fixture("mul_add.mlir"))
        .arg("--plugin")
        .arg(fake())
        .args([
            "-i",
            "[1,2,3,4,5,6,7,8]:f32",
            "-i",
            "[1,2,3,4,5,6,7,8]:f32",
            "--json",
        ]));
    assert_eq!(code, 0, "{err}");
    let v: Json = serde_json::from_str(&out).expect("JSON on stdout");
    assert_eq!(
        v["outputs"][0]["data"].as_array().map(Vec::len),
        Some(8),
        "{out}"
    );
    // A bad input is still a usage error (2) from the child.
    let (code, _, err) = run(rpjrt()
        .arg("run")
        .arg(fixture("mul_add.mlir"))
        .arg("--plugin")
        .arg(fake())
        .args(["-i", "[1,2:f32", "-i", "[1]:f32"]));
    assert_eq!(code, 2, "{err}");
}

/// `plugins` reads each library's version in a child: a library that crashes or hangs
/// while loading gets a row saying so, and the other rows are there.
#[test]
fn plugins_survives_a_library_that_crashes_or_hangs_while_loading() {
    for (knob, word) in [
        ("RPJRT_FAKE_CRASH_ON", "crashed"),
        ("RPJRT_FAKE_HANG_ON", "did not finish"),
    ] {
        let site = site_of(&old());
        let (code, out, err) = run(rpjrt()
            .args(["--plugin-timeout", "5", "plugins", "--json"])
            .env("RPJRT_PLUGIN_PATH", &site)
            .env("RPJRT_PLUGIN", fake())
            .env(knob, "GetPjrtApi"));
        assert_eq!(code, 0, "{knob}: {err}");
        let v: Json = serde_json::from_str(&out).unwrap();
        let list = v["plugins"].as_array().unwrap();
        let broken = list
            .iter()
            .find(|p| p["source"] == "RPJRT_PLUGIN")
            .unwrap_or_else(|| panic!("{out}"));
        assert!(broken["pjrt_version"].is_null(), "{broken}");
        assert!(
            broken["problem"].as_str().unwrap_or("").contains(word),
            "{knob}: {broken}"
        );
        let good = list
            .iter()
            .find(|p| p["name"] == "lammps_jax_pjrt_cpu")
            .unwrap_or_else(|| panic!("{out}"));
        assert_eq!(good["pjrt_version"], "0.115", "{out}");
        // The table names the problem under the row.
        let (code, out, _) = run(rpjrt()
            .args(["--plugin-timeout", "5", "plugins"])
            .env("RPJRT_PLUGIN", fake())
            .env(knob, "GetPjrtApi"));
        assert_eq!(code, 0);
        assert!(out.contains(&format!("^ loading it {word}")), "{out}");
    }
}

#[test]
fn top_level_help_describes_every_verb_and_hides_the_internal_ones() {
    let (code, out, err) = run(rpjrt().arg("--help"));
    assert_eq!(code, 0, "{out}{err}");
    let verbs: Vec<(&str, &str)> = out
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.trim().split_once(char::is_whitespace))
        .map(|(v, d)| (v, d.trim()))
        .collect();
    let names: Vec<&str> = verbs.iter().map(|(v, _)| *v).collect();
    for want in [
        "info", "plugins", "conform", "run", "compile", "cache", "launch",
    ] {
        assert!(names.contains(&want), "{want} missing from --help:\n{out}");
    }
    for hidden in ["probe-version", "conform-child"] {
        assert!(!names.contains(&hidden), "{hidden} is internal:\n{out}");
    }
    for (verb, what) in &verbs {
        // A verb's line is its own summary, not the doc comment of a neighbour or a struct.
        assert!(
            !what.is_empty() && !what.starts_with("Arguments of") && !what.contains("(internal)"),
            "{verb}: {what:?}\n{out}"
        );
    }
    let run_line = verbs.iter().find(|(v, _)| *v == "run").unwrap().1;
    assert!(run_line.contains("run a program"), "{run_line}");
}

/// A `.json` config in `PJRT_NAMES_AND_LIBRARY_PATHS` that is missing or bad costs only
/// its own row (it used to fail the whole listing), and every row without a version says
/// why: a device such as /dev/zero, a missing library, a file that is not one.
#[test]
fn plugins_lists_bad_entries_as_rows_with_their_problem() {
    let dir = tmpdir("plugins-bad");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{").unwrap();
    let text = dir.join("text.so");
    std::fs::write(&text, "not a library").unwrap();
    let entries = [
        format!("bad:{}", bad.display()),
        format!("missing:{}", dir.join("missing.json").display()),
        "zero:/dev/zero".to_string(),
        format!("nolib:{}", dir.join("nolib.so").display()),
        format!("text:{}", text.display()),
        format!("good:{}", old().display()),
    ];
    let (code, out, err) = run(rpjrt()
        .args(["plugins", "--json"])
        .env("PJRT_NAMES_AND_LIBRARY_PATHS", entries.join(",")));
    assert_eq!(code, 0, "{err}");
    let v: Json = serde_json::from_str(&out).unwrap();
    let list = v["plugins"].as_array().unwrap();
    let row = |name: &str| {
        list.iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no row {name}: {out}"))
            .clone()
    };
    assert_eq!(row("good")["pjrt_version"], "0.81", "{out}");
    assert!(row("good")["problem"].is_null(), "{out}");
    for (name, word) in [
        ("bad", "bad.json"),
        ("missing", "does not exist"),
        ("zero", "not a regular file"),
        ("nolib", "No such file"),
        ("text", "not a loadable shared library"),
    ] {
        let r = row(name);
        assert!(r["pjrt_version"].is_null(), "{r}");
        let problem = r["problem"].as_str().unwrap_or("");
        assert!(problem.contains(word), "{name}: {r}");
    }
    // The table shows the good plugin and names each problem under its row.
    let (code, out, err) = run(rpjrt()
        .arg("plugins")
        .env("PJRT_NAMES_AND_LIBRARY_PATHS", entries.join(",")));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("^ not a regular file"), "{out}");
    assert!(out.contains("0.81"), "{out}");
}
