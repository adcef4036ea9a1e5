//! `rpjrt run --trace` and `rpjrt trace view`: the trace of `rpjrt run --repeat 10` holds
//! ten execute spans and the other phases, is written even when the run fails, and its
//! viewer page, loaded in a real headless Chromium, renders the phases (a screenshot is
//! kept under `target/test-artifacts/`).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn spans<'a>(v: &'a Value, cat: &str) -> Vec<&'a Value> {
    v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == cat)
        .collect()
}

/// `rpjrt run mul_add.mlir --random --repeat 10 --trace DIR/run.json` on `plugin`.
fn traced_run(plugin: &Path, dir: &Path) -> PathBuf {
    let trace = dir.join("run.json");
    let (code, out, err) = run(rpjrt()
        .arg("run")
        .arg(fixture("mul_add.mlir"))
        .arg("--plugin")
        .arg(plugin)
        .args(["--random", "--repeat", "10", "--trace"])
        .arg(&trace));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        err.contains(&format!("trace: {}", trace.display())),
        "{err}"
    );
    trace
}

#[test]
fn run_trace_with_repeat_10_has_every_phase_on_both_plugins() {
    for (which, plugin) in [("old", old()), ("new", new())] {
        let dir = tmpdir(&format!("trace-run-{which}"));
        let v = read_json(&traced_run(&plugin, &dir));
        assert_eq!(v["displayTimeUnit"], "ms");
        assert_eq!(spans(&v, "execute").len(), 10, "{which}");
        assert_eq!(spans(&v, "fetch").len(), 10, "{which}");
        // mul_add takes two arguments: two puts per step.
        assert_eq!(spans(&v, "transfer").len(), 20, "{which}");
        assert_eq!(spans(&v, "compile").len(), 1, "{which}");
        assert!(spans(&v, "wait").len() >= 10, "{which}");
        let load: Vec<&str> = spans(&v, "load")
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(load, ["plugin_load", "client_create"], "{which}");
        for e in spans(&v, "execute") {
            assert!(e["ts"].as_f64().unwrap() >= 0.0 && e["dur"].as_f64().unwrap() >= 0.0);
            assert!(e["pid"].is_u64() && e["tid"].is_u64());
            assert_eq!(e["args"]["devices"], 1);
        }
        let other = &v["otherData"];
        assert_eq!(other["command"], "rpjrt run");
        assert_eq!(other["outcome"], "exit code 0");
        let note = other["plugin_profile"].as_str().unwrap();
        assert!(
            note.starts_with("none: ") && note.contains("Profiler extension"),
            "{note}"
        );
        assert!(!dir.join("run.plugin.xspace.pb").exists());
    }
}

#[test]
fn a_run_that_fails_midway_still_writes_its_trace() {
    let dir = tmpdir("trace-fail");
    let trace = dir.join("failed.json");
    // The input has the wrong type: found after the plugin loaded and compiled.
    let (code, _, err) = run(rpjrt()
        .arg("run")
        .arg(fixture("mul_add.mlir"))
        .arg("--plugin")
        .arg(new())
        .args(["-i", "0=[1,2]:i32", "--random", "--trace"])
        .arg(&trace));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("input 0"), "{err}");
    let v = read_json(&trace);
    assert_eq!(spans(&v, "compile").len(), 1);
    assert!(spans(&v, "execute").is_empty());
    let outcome = v["otherData"]["outcome"].as_str().unwrap();
    assert!(
        outcome.starts_with("failed (exit code 2): input 0"),
        "{outcome}"
    );
}

#[test]
fn trace_view_refuses_what_is_not_a_trace() {
    let dir = tmpdir("trace-view-bad");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"events\": []}").unwrap();
    let (code, _, err) = run(rpjrt().args(["trace", "view"]).arg(&bad));
    assert_eq!(code, 2);
    assert!(
        err.contains("bad.json") && err.contains("traceEvents"),
        "{err}"
    );
    let (code, _, err) = run(rpjrt()
        .args(["trace", "view"])
        .arg(dir.join("missing.json")));
    assert_eq!(code, 2);
    assert!(err.contains("missing.json"), "{err}");
}

/// Runs headless Chromium on `page` with `flags`; its stdout. Fails the test (with
/// Chromium's stderr) if it does not finish within two minutes.
fn chromium(page: &Path, flags: &[String]) -> String {
    let profile = page.with_extension("chromium-profile");
    let mut child = Command::new("chromium")
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(flags)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium runs (scripts/setup.sh installs Debian's chromium)");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within 120 s on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The text of the first `<tr data-cat="CAT">` row's cell of class `class`.
fn summary_cell(dom: &str, cat: &str, class: &str) -> Option<String> {
    let row_start = dom.find(&format!("<tr data-cat=\"{cat}\">"))?;
    let row = &dom[row_start..row_start + dom[row_start..].find("</tr>")?];
    let cell = row.find(&format!("class=\"{class}\">"))? + class.len() + 9;
    Some(row[cell..cell + row[cell..].find('<')?].to_string())
}

#[test]
fn the_viewer_page_of_a_repeat_10_run_renders_the_phases_in_chromium() {
    let dir = tmpdir("trace-view");
    let trace = traced_run(&new(), &dir);
    let html = dir.join("run.html");
    let (code, out, err) = run(rpjrt()
        .args(["trace", "view"])
        .arg(&trace)
        .arg("-o")
        .arg(&html));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), html.display().to_string());
    let page = std::fs::read_to_string(&html).unwrap();
    // No network: the only URL is the SVG namespace.
    assert_eq!(
        page.matches("http").count(),
        page.matches("http://www.w3.org/2000/svg").count()
    );
    assert!(
        !page.contains("<script src") && !page.contains("<link"),
        "no external resources"
    );

    let dom = chromium(&html, &["--dump-dom".to_string()]);
    // The script ran: the body says how many spans it drew, and every one is in the SVG.
    let v = read_json(&trace);
    let n = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .count();
    assert!(
        dom.contains(&format!("data-rendered=\"{n}\"")),
        "page did not render"
    );
    assert_eq!(
        summary_cell(&dom, "execute", "count").as_deref(),
        Some("10")
    );
    assert_eq!(summary_cell(&dom, "fetch", "count").as_deref(), Some("10"));
    assert_eq!(
        summary_cell(&dom, "transfer", "count").as_deref(),
        Some("20")
    );
    assert_eq!(summary_cell(&dom, "compile", "count").as_deref(), Some("1"));
    let full_svg = &dom[dom.find("id=\"timeline-svg\"").expect("the timeline")..];
    let full_svg = &full_svg[..full_svg.find("</svg>").unwrap()];
    assert_eq!(
        full_svg
            .matches("class=\"span\" data-cat=\"execute\"")
            .count(),
        10
    );
    assert!(full_svg.matches("class=\"span\"").count() == n);
    // The steps are drawn again on their own, after loading and compiling.
    assert!(dom.contains("id=\"steps-svg\""));
    for cat in [
        "load",
        "compile",
        "transfer",
        "execute",
        "wait",
        "fetch",
        "custom_call",
    ] {
        assert!(
            dom.contains(&format!("class=\"legend-item\" data-cat=\"{cat}\"")),
            "legend lacks {cat}"
        );
    }

    let artifacts = std::env::var_os("RPJRT_TEST_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/test-artifacts"));
    std::fs::create_dir_all(&artifacts).unwrap();
    let artifacts = artifacts.canonicalize().unwrap();
    let shot = artifacts.join("trace-view.png");
    let _ = std::fs::remove_file(&shot);
    chromium(
        &html,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1200,800".to_string(),
        ],
    );
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
    println!("screenshot of the trace viewer: {}", shot.display());
    eprintln!("screenshot of the trace viewer: {}", shot.display());
}
