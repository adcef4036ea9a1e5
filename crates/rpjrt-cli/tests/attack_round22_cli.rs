//! Round 22 (command line) of the CLI's attack tests: the platform is guessed from whole
//! words of meaningful names, never from the directories a library sits in; a verb's child
//! that cannot start rpjrt is said to be that, not a plugin's `exit()`; `cache info` reads
//! an entry's header before its body; `conform` sees its child's exit apart from its
//! output (a helper process holding the pipe); `--json` paths that are not UTF-8 come with
//! their bytes (`_hex`); `run` prints empty arrays with their shape; `conform --list`
//! honours `--json` and refuses `--html`; tables escape control characters; `compile
//! --cache-dir` survives a cache entry removed under it; and the small messages (a `/proc`
//! file, duplicate attributes, `--plugin-timeout` twice, a directory or FIFO named as a
//! plugin).

use std::ffi::OsString;
use std::io::Read as _;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

mod common;

use common::{fake, new, rpjrt, run, tmpdir};

fn json_of(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// A program adding its argument to itself, f32[3], in `dir`.
fn add3(dir: &Path) -> PathBuf {
    let p = dir.join("add3.mlir");
    std::fs::write(
        &p,
        "func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {\n  \
         %0 = stablehlo.add %x, %x : tensor<3xf32>\n  return %0 : tensor<3xf32>\n}\n",
    )
    .unwrap();
    p
}

/// `lib` linked (or copied) to `to`, its directories made.
fn place(lib: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    if std::fs::hard_link(lib, to).is_err() {
        std::fs::copy(lib, to).unwrap();
    }
}

/// The rows of `rpjrt plugins --json`, run with `env`.
fn plugins_json(env: &[(&str, OsString)]) -> Vec<serde_json::Value> {
    let mut c = rpjrt();
    c.arg("plugins").arg("--json");
    for (k, v) in env {
        c.env(k, v);
    }
    let (code, out, err) = run(&mut c);
    assert_eq!(code, 0, "{err}");
    json_of(&out)["plugins"].as_array().unwrap().clone()
}

// --- 2: the platform comes from names, not from any substring of the path -------------

#[test]
fn a_plugin_in_an_output_directory_is_no_tpu_plugin() {
    let d = tmpdir("r22-platform");
    for (dir, file) in [
        ("output", "libmine.so"),
        ("throughput", "libmine.so"),
        ("tpu", "libmine.so"),
        ("cuda-builds/host", "libplugin.so"),
    ] {
        let lib = d.join(dir).join(file);
        place(&new(), &lib);
        let mut spec = OsString::from("mine:");
        spec.push(&lib);
        let rows = plugins_json(&[("PJRT_NAMES_AND_LIBRARY_PATHS", spec)]);
        let row = rows
            .iter()
            .find(|r| r["name"] == "mine")
            .unwrap_or_else(|| panic!("{rows:?}"));
        assert_eq!(row["platform"], serde_json::Value::Null, "{dir}: {row}");
        // Asking for a TPU does not get it.
        let mut spec = OsString::from("mine:");
        spec.push(&lib);
        let (code, _, err) = run(rpjrt()
            .args(["info", "tpu"])
            .env("PJRT_NAMES_AND_LIBRARY_PATHS", spec));
        assert_eq!(code, 2, "{dir}: {err}");
        assert!(err.contains("no PJRT plugin matching \"tpu\""), "{err}");
    }
    // The library's own name still says it.
    let lib = d.join("output/libtpu_fake.so");
    place(&fake(), &lib);
    let mut spec = OsString::from("x:");
    spec.push(&lib);
    let rows = plugins_json(&[("PJRT_NAMES_AND_LIBRARY_PATHS", spec)]);
    let row = rows.iter().find(|r| r["name"] == "x").unwrap();
    assert_eq!(row["platform"], "tpu", "{row}");
    // /proc/cpuinfo is no CPU plugin.
    let rows = plugins_json(&[("RPJRT_PLUGIN", "/proc/cpuinfo".into())]);
    let row = rows.iter().find(|r| r["path"] == "/proc/cpuinfo").unwrap();
    assert_eq!(row["platform"], serde_json::Value::Null, "{row}");
}

// --- 3: a child that cannot start rpjrt -------------------------------------------------

#[test]
fn a_verb_child_that_cannot_start_rpjrt_is_not_blamed_on_the_plugin() {
    // The command that runs the CLI again fails before rpjrt runs (as an interpreter that
    // cannot import rpjrt does).
    let self_cmd = r#"["/bin/sh", "-c", "echo 'No module named rpjrt' >&2; exit 1", "sh"]"#;
    let (code, _, err) = run(rpjrt()
        .arg("info")
        .arg(fake())
        .env("RPJRT_CLI_SELF", self_cmd));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("No module named rpjrt"), "{err}");
    assert!(err.contains("before rpjrt started in it"), "{err}");
    assert!(err.contains("RPJRT_CLI_SELF"), "{err}");
    assert!(!err.contains("called exit()"), "{err}");
    // A plugin that calls exit() while loading is still said to be that.
    let (code, _, err) = run(rpjrt()
        .arg("info")
        .arg(fake())
        .env("RPJRT_FAKE_EXIT_ON", "GetPjrtApi"));
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("called exit()"), "{err}");
}

// --- 4: cache info reads the header first ---------------------------------------------

#[test]
fn cache_info_refuses_an_overlong_entry_from_its_header() {
    let d = tmpdir("r22-cache-info");
    let prog = add3(&d);
    let cache = d.join("cache");
    let (code, _, err) = run(rpjrt()
        .arg("compile")
        .arg(&prog)
        .arg("--plugin")
        .arg(new())
        .arg("-o")
        .arg(d.join("a.rpjrt"))
        .arg("--cache-dir")
        .arg(&cache));
    assert_eq!(code, 0, "{err}");
    let entry = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "rpjrtexe"))
        .unwrap();
    // 4 GiB, sparse: no disk used. Read whole, it would not fit under the memory limit.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&entry)
        .unwrap()
        .set_len(4 << 30)
        .unwrap();
    let key = entry.file_stem().unwrap().to_str().unwrap()[..8].to_string();
    let t = Instant::now();
    let bin = env!("CARGO_BIN_EXE_rpjrt");
    // Under a limit of 1 GiB of address space.
    let (code, out, err) = run(std::process::Command::new("/bin/sh")
        .env_clear()
        .env("NO_COLOR", "1")
        .env("PATH", "/usr/bin:/bin")
        .arg("-c")
        .arg("ulimit -v 1048576; exec \"$0\" cache info \"$1\" --dir \"$2\"")
        .arg(bin)
        .arg(&key)
        .arg(&cache));
    let _ = std::fs::remove_file(&entry);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("its header says"), "{out}");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
}

// --- 7: conform and a helper process that holds the child's output ----------------------

#[test]
fn conform_sees_its_child_exit_while_a_helper_holds_the_pipe() {
    let d = tmpdir("r22-conform-helper");
    let pids = d.join("helper.pid");
    // The conform child leaves a process behind that inherited its stdout and stderr, as a
    // plugin starting a daemon does; then it runs as ever.
    let self_cmd = serde_json::to_string(&[
        "/bin/sh",
        "-c",
        "sleep 120 & echo $! >> \"$HELPER_PIDS\"; exec \"$0\" \"$@\"",
        env!("CARGO_BIN_EXE_rpjrt"),
    ])
    .unwrap();
    let t = Instant::now();
    let (code, out, err) = run(rpjrt()
        .arg("conform")
        .arg(fake())
        .args(["--only", "api.version", "--timeout", "30"])
        .env("RPJRT_CLI_SELF", self_cmd)
        .env("HELPER_PIDS", &pids));
    let took = t.elapsed();
    for pid in std::fs::read_to_string(&pids)
        .unwrap_or_default()
        .split_whitespace()
    {
        let _ = std::process::Command::new("kill")
            .args(["-9", pid])
            .status();
    }
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("pass") && out.contains("api.version"), "{out}");
    // Not the whole --timeout: the child's exit is seen.
    assert!(took < Duration::from_secs(20), "{took:?}: {err}");
    assert!(err.contains("but its output stayed open"), "{err}");
    assert!(err.contains("still holds it"), "{err}");
    assert!(!err.contains("was killed"), "{err}");
}

// --- 8: JSON paths that are not UTF-8 ---------------------------------------------------

/// `doc[key]`'s path, exactly: from `KEY_hex` where the path is not UTF-8.
fn path_of(doc: &serde_json::Value, key: &str) -> PathBuf {
    match doc[format!("{key}_hex")].as_str() {
        Some(hex) => {
            let bytes: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            PathBuf::from(OsString::from_vec(bytes))
        }
        None => PathBuf::from(doc[key].as_str().unwrap()),
    }
}

#[test]
fn json_paths_that_are_not_utf8_come_with_their_bytes() {
    let d = tmpdir("r22-json-bytes");
    let odd = |name: &[u8]| d.join(std::ffi::OsStr::from_bytes(name));
    let lib = odd(b"lib\xff").join("libpjrt_x.so");
    place(&new(), &lib);
    let mut spec = OsString::from("odd:");
    spec.push(&lib);
    let rows = plugins_json(&[("PJRT_NAMES_AND_LIBRARY_PATHS", spec)]);
    let row = rows.iter().find(|r| r["name"] == "odd").unwrap();
    assert!(row["path"].as_str().unwrap().contains('\u{fffd}'), "{row}");
    assert_eq!(path_of(row, "path"), lib, "{row}");
    // A UTF-8 path has no _hex field.
    assert!(rows
        .iter()
        .filter(|r| r["name"] != "odd")
        .all(|r| r.get("path_hex").is_none()));

    let prog = odd(b"prog\xfe.mlir");
    std::fs::copy(add3(&d), &prog).unwrap();
    let art = odd(b"a\xff.rpjrt");
    let (code, out, err) = run(rpjrt()
        .arg("compile")
        .arg(&prog)
        .arg("--plugin")
        .arg(new())
        .arg("-o")
        .arg(&art)
        .arg("--json"));
    assert_eq!(code, 0, "{err}");
    let doc = json_of(&out);
    assert_eq!(path_of(&doc, "artifact"), art, "{doc}");
    assert!(art.exists());
    let (code, out, err) = run(rpjrt()
        .arg("run")
        .arg(&prog)
        .arg("--plugin")
        .arg(new())
        .args(["--random", "--json"]));
    assert_eq!(code, 0, "{err}");
    let doc = json_of(&out);
    assert_eq!(path_of(&doc, "program"), prog, "{doc}");
    // In text, the byte shows as \xNN.
    let (code, out, err) = run(rpjrt()
        .arg("compile")
        .arg(&prog)
        .arg("--plugin")
        .arg(new())
        .arg("-o")
        .arg(&art));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("a\\xff.rpjrt"), "{out}");
}

// --- 9: empty arrays print with their shape -----------------------------------------

#[test]
fn empty_outputs_print_with_their_shape_as_numpy_does() {
    let d = tmpdir("r22-empty");
    let prog = d.join("e.mlir");
    std::fs::write(
        &prog,
        "func.func @main(%x: tensor<f32>) -> (tensor<0x3xf32>, tensor<2x0xi32>, tensor<0xf32>) {\n  \
         %0 = stablehlo.constant dense<> : tensor<0x3xf32>\n  \
         %1 = stablehlo.constant dense<> : tensor<2x0xi32>\n  \
         %2 = stablehlo.constant dense<> : tensor<0xf32>\n  \
         return %0, %1, %2 : tensor<0x3xf32>, tensor<2x0xi32>, tensor<0xf32>\n}\n",
    )
    .unwrap();
    let (code, out, err) = run(rpjrt()
        .arg("run")
        .arg(&prog)
        .arg("--plugin")
        .arg(new())
        .args(["-i", "1"]));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("out0: array([], shape=(0, 3), dtype=float32)"),
        "{out}"
    );
    assert!(
        out.contains("out1: array([], shape=(2, 0), dtype=int32)"),
        "{out}"
    );
    // 1-D: no shape, as numpy.
    assert!(out.contains("out2: array([], dtype=float32)"), "{out}");
}

// --- 10: conform --list with --json / --html ---------------------------------------------

#[test]
fn conform_list_honours_json_and_refuses_html() {
    let d = tmpdir("r22-list");
    let (code, out, err) = run(rpjrt().args(["conform", "--list", "--json", "-"]));
    assert_eq!(code, 0, "{err}");
    let doc = json_of(&out);
    let checks = doc["checks"].as_array().unwrap();
    assert!(checks.iter().any(|c| c["name"] == "api.version"), "{doc}");
    assert!(checks
        .iter()
        .all(|c| c["description"].is_string() && c["group"].is_string()));
    let file = d.join("list.json");
    let (code, out, err) = run(rpjrt()
        .args(["conform", "--list", "--only", "api.*", "--json"])
        .arg(&file));
    assert_eq!(code, 0, "{err}");
    assert!(out.is_empty(), "{out}");
    let doc = json_of(&std::fs::read_to_string(&file).unwrap());
    assert!(doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["name"].as_str().unwrap().starts_with("api.")));
    let page = d.join("list.html");
    let (code, _, err) = run(rpjrt().args(["conform", "--list", "--html"]).arg(&page));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--list") && err.contains("--html"), "{err}");
    assert!(!page.exists());
}

// --- 11: control characters in tables ------------------------------------------------

#[test]
fn the_plugins_table_escapes_control_characters() {
    let d = tmpdir("r22-escapes");
    for name in ["esc\u{1b}[31mRED\u{1b}[0m", "nl\nname", "bidi\u{202e}txt"] {
        place(
            &fake(),
            &d.join("jax_plugins").join(name).join("libpjrt_a.so"),
        );
    }
    let (code, out, err) = run(rpjrt().arg("plugins").env("RPJRT_PLUGIN_PATH", &*d));
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.contains('\u{1b}') && !out.contains('\u{202e}'),
        "{out:?}"
    );
    assert!(out.contains("esc\\e[31mRED\\e[0m"), "{out}");
    assert!(out.contains("nl\\nname"), "{out}");
    assert!(out.contains("bidi\\u{202e}txt"), "{out}");
    // One line per plugin, and the heading.
    let ours = out.lines().filter(|l| l.contains("jax_plugins.")).count();
    assert_eq!(ours, 3, "{out}");
    // The one helper every text output uses.
    use rpjrt_cli::common::{printable, printable_lines, printable_os};
    assert_eq!(
        printable("a\u{1b}b\tc\r\u{7f}\u{85}"),
        "a\\eb\\tc\\r\\x7f\\x85"
    );
    assert_eq!(printable("plain /x/é.so"), "plain /x/é.so");
    assert_eq!(printable_lines("a\nb\t\u{1b}"), "a\nb\t\\e");
    assert_eq!(
        printable_os(std::ffi::OsStr::from_bytes(b"/x/\xff\n.so")),
        "/x/\\xff\\n.so"
    );
}

// --- 12: compile --cache-dir and an entry removed under it -------------------------------

#[test]
fn compile_survives_its_cache_entry_being_removed_after_the_hit() {
    let d = tmpdir("r22-cache-race");
    let prog = add3(&d);
    let cache = d.join("cache");
    let compile = |out: &str| {
        let mut c = rpjrt();
        c.arg("compile")
            .arg(&prog)
            .arg("--plugin")
            .arg(fake())
            .arg("-o")
            .arg(d.join(out))
            .arg("--cache-dir")
            .arg(&cache)
            .arg("--json");
        c
    };
    let (code, _, err) = run(&mut compile("a1.rpjrt"));
    assert_eq!(code, 0, "{err}");
    // The hit loads the executable (PJRT_Executable_DeserializeAndLoad), which then writes
    // more than a pipe holds to a stderr nobody reads yet: the compile stops there, after
    // the hit and before the artifact is serialized, until the entry is gone.
    let mut child = compile("a2.rpjrt")
        .env("RPJRT_FAKE_PRINT_ON", "PJRT_Executable_DeserializeAndLoad")
        .env("RPJRT_FAKE_PRINT_TEXT", "x".repeat(120_000))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the compile did not wait"
    );
    for e in std::fs::read_dir(&cache).unwrap().flatten() {
        std::fs::remove_file(e.path()).unwrap();
    }
    let mut err = Vec::new();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let _ = stderr.read_to_end(&mut err);
        err
    });
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = child.wait().unwrap();
    let err = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
    let tail = &err[err.len().saturating_sub(2000)..];
    assert!(status.success(), "{tail}");
    let doc = json_of(&out);
    assert_eq!(doc["from_cache"], false, "{doc}");
    assert!(doc["cache_entry_lost"].is_string(), "{doc}");
    let bytes = std::fs::read(d.join("a2.rpjrt")).unwrap();
    assert!(rpjrt::is_artifact(&bytes));
}

// --- 13: small messages ---------------------------------------------------------------

#[test]
fn a_proc_file_named_as_a_plugin_is_no_empty_file() {
    for verb in [&["info"][..], &["conform", "--only", "api.version"][..]] {
        let (code, _, err) = run(rpjrt().args(verb).arg("/proc/cpuinfo"));
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("special file"), "{err}");
        assert!(!err.contains("the file is empty"), "{err}");
    }
}

#[test]
fn duplicate_attribute_names_are_all_kept_in_json() {
    let (code, out, err) = run(rpjrt()
        .arg("info")
        .arg(fake())
        .arg("--json")
        .env("RPJRT_FAKE_ATTRIBUTES", "a=int64:1;a=string:x;b=int64:2"));
    assert_eq!(code, 0, "{err}");
    let doc = json_of(&out);
    assert_eq!(doc["attributes"]["a"], 1, "{doc}");
    assert_eq!(
        doc["duplicate_attributes"]["a"],
        serde_json::json!([1, "x"]),
        "{doc}"
    );
    assert!(doc["duplicate_attributes"].get("b").is_none(), "{doc}");
    // None repeated: no such field.
    let (code, out, err) = run(rpjrt().arg("info").arg(fake()).arg("--json"));
    assert_eq!(code, 0, "{err}");
    assert!(json_of(&out).get("duplicate_attributes").is_none());
}

#[test]
fn an_option_of_every_verb_given_before_and_after_the_verb_is_refused() {
    for args in [
        &["--plugin-timeout", "0.5", "info", "--plugin-timeout", "1.5"][..],
        &["--plugin-timeout=0.5", "info", "--plugin-timeout=1.5"][..],
        &["--plugin-log", "info", "--plugin-log"][..],
    ] {
        let (code, _, err) = run(rpjrt().args(args).arg(fake()));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("cannot be used multiple times"), "{err}");
    }
    // Once, on either side, is fine.
    for args in [
        &["--plugin-timeout", "5", "info"][..],
        &["info", "--plugin-timeout", "5"][..],
        &["--plugin-log", "info", "--plugin-timeout", "5"][..],
    ] {
        let (code, _, err) = run(rpjrt().args(args).arg(fake()));
        assert_eq!(code, 0, "{args:?}: {err}");
    }
}

#[test]
fn a_directory_or_fifo_named_as_a_plugin_is_said_to_be_one() {
    let d = tmpdir("r22-not-a-file");
    std::fs::create_dir(d.join("cdir")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(d.join("fifo"))
        .status()
        .unwrap();
    assert!(made.success());
    for (name, kind) in [("cdir", "is a directory"), ("fifo", "is a FIFO")] {
        let (code, _, err) = run(rpjrt().current_dir(&*d).args(["info", name]));
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(kind), "{err}");
        assert!(err.contains("not a plugin library"), "{err}");
    }
}
