//! Round 20 of the CLI's attack tests: a create option the plugin refuses is exit 2 in
//! every verb; no install hint after a plugin that was found and loaded (and what to say
//! when another process holds libtpu's lock); `-` as an output file means stdout, or is
//! refused, for every output option; arguments that are not UTF-8 (file names taken,
//! plugin names that match nothing said as such, text options named); and wording: an
//! artifact given with `--format`, `compile` of an artifact, the `plugins` table's
//! columns and the version of a wheel found through a namespace package.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

use common::{fake, new, old, rpjrt, run, tmpdir};

/// A program adding its one argument to itself, f32[3], written into `dir`.
fn add_program(dir: &Path) -> PathBuf {
    let p = dir.join("add.mlir");
    std::fs::write(
        &p,
        "func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {\n  \
         %0 = stablehlo.add %x, %x : tensor<3xf32>\n  return %0 : tensor<3xf32>\n}\n",
    )
    .unwrap();
    p
}

/// `rendezvous` of one process, with a plugin.
fn rendezvous_args() -> Vec<&'static str> {
    vec![
        "rendezvous",
        "--process-id",
        "0",
        "--num-processes",
        "1",
        "--coordinator",
        "127.0.0.1:0",
        "--timeout",
        "20",
        "--plugin",
    ]
}

/// Runs `c`, keeping stdout as bytes: (exit code, stdout, stderr).
fn run_bytes(c: &mut Command) -> (i32, Vec<u8>, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = c.output().expect("the rpjrt binary runs");
    (
        status.code().unwrap_or(-1),
        stdout,
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

// ---- 3: a create option the plugin refuses -------------------------------------------

/// The PJRT 0.115 CPU plugin refuses an option name it does not know with INVALID_ARGUMENT
/// from PJRT_Client_Create: every verb that creates a client exits 2 (a usage error, as
/// docs/cli.md says), names the option, says what to do and gives no install hint. The
/// exit code was 1, the code of a broken plugin.
#[test]
fn a_create_option_the_plugin_refuses_is_exit_2_in_every_verb() {
    let d = tmpdir("r20-refused-option");
    let prog = add_program(&d);
    let plugin = new();
    let art = d.join("x.rpjrt");
    let mut cases: Vec<Command> = Vec::new();
    for option in ["bogus=1", "num_nodes=2"] {
        let mut c = rpjrt();
        c.arg("info").arg(&plugin).args(["-o", option]);
        cases.push(c);
    }
    let mut c = rpjrt();
    c.arg("info").arg(&plugin).args(["--json", "-o", "bogus=1"]);
    cases.push(c);
    let mut c = rpjrt();
    c.arg("run")
        .arg(&prog)
        .args(["--random", "-o", "bogus=1", "--plugin"])
        .arg(&plugin);
    cases.push(c);
    let mut c = rpjrt();
    c.arg("compile")
        .arg(&prog)
        .arg("-o")
        .arg(&art)
        .args(["--client-option", "bogus=1", "--plugin"])
        .arg(&plugin);
    cases.push(c);
    let mut c = rpjrt();
    c.args(rendezvous_args())
        .arg(&plugin)
        .args(["-o", "bogus=1"]);
    cases.push(c);
    for mut c in cases {
        let what = format!("{c:?}");
        let (code, out, err) = run(&mut c);
        assert_eq!(code, 2, "{what}\nstdout: {out}\nstderr: {err}");
        assert!(err.contains("INVALID_ARGUMENT"), "{what}: {err}");
        assert!(
            err.contains("the plugin refused the client create options given"),
            "{what}: {err}"
        );
        assert!(
            !err.contains("to get a working plugin") && !err.contains("pip install"),
            "{what}: no install hint: {err}"
        );
        assert!(!out.contains("rendezvous ok"), "{what}: {out}");
    }
    assert!(!art.exists(), "no artifact for a refused option");
}

/// The same rule with the fake plugin scripted to refuse unknown option names (what CI
/// always has), and among several candidates: a library that does not load says nothing
/// about the options, so the refusal of the one that loaded decides (exit 2). An
/// INVALID_ARGUMENT from PJRT_Client_Create when no option was given is the plugin's own
/// failure (exit 1): no option of the user's was refused.
#[test]
fn a_refused_option_among_candidates_is_exit_2_and_without_options_exit_1() {
    let d = tmpdir("r20-refused-candidates");
    let names = format!(
        "missing:{},fake:{}",
        d.join("libmissing.so").display(),
        fake().display()
    );
    // No plugin named: both candidates tried, the missing one first.
    let (code, out, err) = run(rpjrt()
        .args(["info", "-o", "bogus=1"])
        .env("PJRT_NAMES_AND_LIBRARY_PATHS", &names)
        .env("RPJRT_FAKE_ALLOWED_OPTIONS", "cpu_device_count"));
    assert_eq!(code, 2, "stdout: {out}\nstderr: {err}");
    assert!(err.contains("bogus"), "{err}");
    assert!(err.contains("libmissing.so"), "{err}");
    assert!(!err.contains("to get a working plugin"), "{err}");
    // The plugin's INVALID_ARGUMENT with no option given: a failure.
    let (code, _, err) = run(rpjrt().arg("info").arg(fake()).env(
        "RPJRT_FAKE_FAIL",
        "PJRT_Client_Create:INVALID_ARGUMENT:bad device configuration",
    ));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("bad device configuration"), "{err}");
    assert!(!err.contains("create options given"), "{err}");
    // An accepted option still works.
    let (code, _, err) = run(rpjrt()
        .arg("info")
        .arg(fake())
        .args(["-o", "cpu_device_count=2"])
        .env("RPJRT_FAKE_ALLOWED_OPTIONS", "cpu_device_count"));
    assert_eq!(code, 0, "{err}");
}

// ---- 5: the install hint only where no plugin library loaded -------------------------

/// A plugin that was found and loaded, then failed in PJRT_Plugin_Initialize or in client
/// creation, is installed: `to get a working plugin: pip install 'rpjrt[cpu]'` after it
/// was wrong (it came after libtpu's lock refusal). Only a library that cannot be loaded
/// (here: missing) still gets the hint.
#[test]
fn no_install_hint_after_a_plugin_that_loaded() {
    let d = tmpdir("r20-hint");
    let prog = add_program(&d);
    let init = (
        "RPJRT_FAKE_FAIL",
        "PJRT_Plugin_Initialize:ABORTED:init refused",
    );
    let create = (
        "RPJRT_FAKE_FAIL",
        "PJRT_Client_Create:INTERNAL:create refused",
    );
    let mut cases: Vec<(Command, &str)> = Vec::new();
    for (k, v) in [init, create] {
        let mut c = rpjrt();
        c.arg("info").arg(fake()).env(k, v);
        cases.push((c, v));
        let mut c = rpjrt();
        c.arg("run")
            .arg(&prog)
            .args(["--random", "--plugin"])
            .arg(fake())
            .env(k, v);
        cases.push((c, v));
        let mut c = rpjrt();
        c.arg("compile")
            .arg(&prog)
            .arg("-o")
            .arg(d.join("x.rpjrt"))
            .arg("--plugin")
            .arg(fake())
            .env(k, v);
        cases.push((c, v));
        let mut c = rpjrt();
        c.args(rendezvous_args()).arg(fake()).env(k, v);
        cases.push((c, v));
    }
    // Among several candidates, one of which does not load: one did load.
    let mut c = rpjrt();
    c.arg("info")
        .env(
            "PJRT_NAMES_AND_LIBRARY_PATHS",
            format!(
                "missing:{},fake:{}",
                d.join("libmissing.so").display(),
                fake().display()
            ),
        )
        .env(init.0, init.1);
    cases.push((c, init.1));
    for (mut c, says) in cases {
        let what = format!("{c:?}");
        let (code, _, err) = run(&mut c);
        assert_eq!(code, 1, "{what}: {err}");
        let reason = says.rsplit(':').next().unwrap();
        assert!(err.contains(reason), "{what}: {err}");
        assert!(
            !err.contains("to get a working plugin"),
            "{what}: no install hint after a plugin that loaded: {err}"
        );
    }
    // A library that cannot be loaded: the hint is there.
    for mut c in [
        {
            let mut c = rpjrt();
            c.arg("info").arg(d.join("libmissing.so"));
            c
        },
        {
            let mut c = rpjrt();
            c.args(rendezvous_args()).arg(d.join("libmissing.so"));
            c
        },
    ] {
        let what = format!("{c:?}");
        let (code, _, err) = run(&mut c);
        assert_eq!(code, 1, "{what}: {err}");
        // The install hint, or the loader's own hint saying what to install.
        assert!(err.contains("pip install"), "{what}: {err}");
    }
}

/// libtpu refuses to initialise while another process holds its lock file, and advises
/// `sudo rm /tmp/libtpu_lockfile`, which is wrong while that process runs. The CLI says
/// that another process probably uses the TPU, names the process holding the lock (from
/// /proc/locks: here, this test), warns against deleting the file, and gives no install
/// hint. The fake plugin plays libtpu's refusal, word for word.
#[test]
fn libtpus_lock_refusal_names_the_holder_and_warns_against_deleting_the_lock() {
    let d = tmpdir("r20-libtpu-lock");
    let lock_path = d.join("libtpu_lockfile");
    let lock = std::fs::File::create(&lock_path).unwrap();
    lock.lock().expect("flock on the lock file");
    let message = format!(
        "PJRT_Plugin_Initialize:ABORTED:Internal error when accessing libtpu multi-process \
         lockfile. Run \"$ sudo rm {}\".",
        lock_path.display()
    );
    for mut c in [
        {
            let mut c = rpjrt();
            c.arg("info").arg(fake());
            c
        },
        {
            let mut c = rpjrt();
            c.args(rendezvous_args()).arg(fake());
            c
        },
    ] {
        let what = format!("{c:?}");
        let (code, _, err) = run(c.env("RPJRT_FAKE_FAIL", &message));
        assert_eq!(code, 1, "{what}: {err}");
        assert!(err.contains("libtpu multi-process lockfile"), "{err}");
        assert!(
            err.contains("another process is probably using the TPU"),
            "{err}"
        );
        assert!(
            err.contains(&format!("process {} holds it now", std::process::id())),
            "the holder is named: {err}"
        );
        assert!(
            err.contains(&format!("do not delete {}", lock_path.display())),
            "{err}"
        );
        assert!(!err.contains("to get a working plugin"), "{err}");
    }
    drop(lock);
    // Nobody holds it: the hint stays, without a holder.
    let (code, _, err) = run(rpjrt()
        .arg("info")
        .arg(fake())
        .env("RPJRT_FAKE_FAIL", &message));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("another process is probably"), "{err}");
    assert!(!err.contains("holds it now"), "{err}");
}

// ---- 6: `-` as an output file -----------------------------------------------------------

/// Every output option of every verb, given `-`: text (a trace's HTML page, conform's JSON
/// and HTML) goes to stdout; an artifact goes to stdout when that is not a terminal;
/// `run --out -` and `run --trace -` are refused (stdout carries `run`'s own results).
/// Never is a file named `-` written (`compile -o -`, `run --trace -` and `trace view -o
/// -` each wrote one, replacing the one before, and exited 0 with nothing on stdout);
/// `./-` still names such a file.
#[test]
fn dash_is_stdout_or_refused_for_every_output_option() {
    let d = tmpdir("r20-dash");
    let prog = add_program(&d);
    let dash = d.join("-");
    let in_dir = |c: &mut Command| {
        c.current_dir(&*d);
    };
    // compile -o -: the artifact on stdout, the line about it on stderr.
    let mut c = rpjrt();
    in_dir(&mut c);
    let (code, out, err) = run_bytes(
        c.arg("compile")
            .arg(&prog)
            .args(["-o", "-", "--plugin"])
            .arg(old()),
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with(b"RPJRTEXE"), "an artifact on stdout");
    assert!(err.contains("wrote the artifact to stdout"), "{err}");
    assert!(!dash.exists());
    // It is the artifact: saved and run, it computes.
    let art = d.join("a.rpjrt");
    std::fs::write(&art, &out).unwrap();
    let (code, text, err) = run(rpjrt()
        .arg("run")
        .arg(&art)
        .args(["-i", "[1,2,3]", "--plugin"])
        .arg(old()));
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("array([2., 4., 6.], dtype=float32)"),
        "{text}"
    );
    // compile -o - --json: both want stdout.
    let mut c = rpjrt();
    in_dir(&mut c);
    let (code, _, err) = run(c
        .arg("compile")
        .arg(&prog)
        .args(["-o", "-", "--json", "--plugin"])
        .arg(old()));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--json"), "{err}");
    // run --trace FILE, for trace view below.
    let trace = d.join("t.json");
    let (code, _, err) = run(rpjrt()
        .arg("run")
        .arg(&prog)
        .args(["--random", "--plugin"])
        .arg(old())
        .arg("--trace")
        .arg(&trace));
    assert_eq!(code, 0, "{err}");
    // run --trace - and run --out -: refused, naming the option and stdout.
    for (option, extra) in [
        ("--trace", None),
        ("--out", None),
        ("--out", Some("--json")),
    ] {
        let mut c = rpjrt();
        in_dir(&mut c);
        c.arg("run")
            .arg(&prog)
            .args(["--random", option, "-", "--plugin"])
            .arg(old());
        if let Some(x) = extra {
            c.arg(x);
        }
        let (code, out, err) = run(&mut c);
        assert_eq!(code, 2, "{option}: {out}{err}");
        assert!(
            err.contains(&format!("{option} -: stdout cannot take it")),
            "{option}: {err}"
        );
        assert!(err.contains("./-"), "{option}: {err}");
        assert!(out.is_empty(), "{option}: {out}");
    }
    // trace view -o -: the page on stdout.
    let mut c = rpjrt();
    in_dir(&mut c);
    let (code, out, err) = run(c.args(["trace", "view", "t.json", "-o", "-"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("<html") && out.contains("</html>"), "{out}");
    // conform --json - and --html -: the report on stdout (as before).
    let mut c = rpjrt();
    in_dir(&mut c);
    let (code, out, err) =
        run(c
            .arg("conform")
            .arg(fake())
            .args(["--only", "api.version", "--json", "-"]));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["summary"]["pass"], 1, "{v}");
    let mut c = rpjrt();
    in_dir(&mut c);
    let (code, out, err) =
        run(c
            .arg("conform")
            .arg(fake())
            .args(["--only", "api.version", "--html", "-"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("<html"), "{out}");
    assert!(!dash.exists(), "no file named -");
    // ./- is a file of that name, written as any other.
    let mut c = rpjrt();
    in_dir(&mut c);
    let (code, out, err) = run(c.args(["trace", "view", "t.json", "-o", "./-"]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "./-");
    assert!(std::fs::read_to_string(&dash).unwrap().contains("<html"));
}

/// `compile -o -` with stdout on a terminal is refused: the artifact's bytes would garble
/// it (run under util-linux's `script`, a pseudo-terminal).
#[test]
fn a_binary_output_to_a_terminal_is_refused() {
    let d = tmpdir("r20-dash-tty");
    let prog = add_program(&d);
    let quote = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', "'\\''"));
    let line = format!(
        "{} compile {} -o - --plugin {}",
        quote(Path::new(env!("CARGO_BIN_EXE_rpjrt"))),
        quote(&prog),
        quote(&old())
    );
    let mut c = Command::new("timeout");
    c.args(["60", "script", "-qec"])
        .arg(&line)
        .arg("/dev/null")
        .current_dir(&*d)
        .env("NO_COLOR", "1");
    let (code, out, err) = run(&mut c);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        out.contains("--output -: the output is binary and stdout is a terminal"),
        "{out}"
    );
    assert!(!out.contains("RPJRTEXE"), "{out}");
    assert!(!d.join("-").exists());
}

// ---- 7: arguments that are not UTF-8 ------------------------------------------------

/// `run -i` takes file names of any bytes (clap refused them, "invalid UTF-8 was detected
/// in one or more arguments", naming no argument), as KEY=FILE and as FILE; a literal or
/// a key that is not UTF-8 is refused naming the input.
#[test]
fn run_inputs_may_be_files_whose_names_are_not_utf8() {
    let d = tmpdir("r20-nonutf8-input");
    let prog = add_program(&d);
    // An .npy written by the CLI, then given a name that is not UTF-8.
    let plain = d.join("x.npy");
    let (code, _, err) = run(rpjrt()
        .arg("run")
        .arg(&prog)
        .args(["-i", "[0,1,2]:f32", "--out"])
        .arg(&plain)
        .arg("--plugin")
        .arg(old()));
    assert_eq!(code, 0, "{err}");
    let odd = d.join(OsStr::from_bytes(b"x\xfe.npy"));
    std::fs::rename(&plain, &odd).unwrap();
    let keyed = {
        let mut v = b"0=".to_vec();
        v.extend_from_slice(odd.as_os_str().as_bytes());
        OsString::from_vec(v)
    };
    for input in [keyed, odd.clone().into_os_string()] {
        let (code, out, err) = run(rpjrt()
            .arg("run")
            .arg(&prog)
            .arg("-i")
            .arg(&input)
            .arg("--plugin")
            .arg(old()));
        assert_eq!(code, 0, "{input:?}: {err}");
        // The file holds [0, 2, 4]; added to itself.
        assert!(out.contains("array([0., 4., 8.], dtype=float32)"), "{out}");
    }
    // A literal that is not UTF-8.
    let (code, _, err) = run(rpjrt()
        .arg("run")
        .arg(&prog)
        .arg("-i")
        .arg(OsStr::from_bytes(b"[1,2,\xff]"))
        .arg("--plugin")
        .arg(old()));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(r#"input 0: "[1,2,\xFF]" is neither a .npy or .npz file name nor a literal"#),
        "{err}"
    );
    // A key that is not UTF-8.
    let (code, _, err) = run(rpjrt()
        .arg("run")
        .arg(&prog)
        .arg("-i")
        .arg(OsStr::from_bytes(b"x\xff=[1,2,3]"))
        .arg("--plugin")
        .arg(old()));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(r#"its key "x\xFF" is not valid UTF-8"#),
        "{err}"
    );
    assert!(!err.contains("invalid UTF-8 was detected"), "{err}");
}

/// A plugin named with bytes that are not UTF-8 and do not name a file matches no plugin,
/// said as for any other unknown name (exit 2, `no PJRT plugin matching ... Searched:`),
/// from the argument or from RPJRT_PLUGIN; it was taken for a relative path ("cannot load
/// PJRT plugin /cwd/nonexistent\u{fffd}: the file cannot be read", exit 1). A path (a `/`
/// in it, or a file that exists) is still loaded as one.
#[test]
fn a_plugin_name_that_is_not_utf8_matches_nothing_like_any_unknown_name() {
    let d = tmpdir("r20-nonutf8-plugin");
    let name = OsStr::from_bytes(b"nonexistent\xff");
    let (code, _, err) = run(rpjrt().arg("info").arg(name).current_dir(&*d));
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err.lines().next().unwrap_or(""),
        r#"rpjrt: no PJRT plugin matching "nonexistent\xFF" found. Searched:"#,
        "{err}"
    );
    assert!(!err.contains("cannot load PJRT plugin"), "{err}");
    let prog = add_program(&d);
    for mut c in [
        {
            let mut c = rpjrt();
            c.arg("run")
                .arg(&prog)
                .args(["--random", "--plugin"])
                .arg(name);
            c
        },
        {
            let mut c = rpjrt();
            c.args(["conform", "--only", "api.version"]).arg(name);
            c
        },
        {
            let mut c = rpjrt();
            c.args(rendezvous_args()).arg(name);
            c
        },
        {
            let mut c = rpjrt();
            c.arg("info").env("RPJRT_PLUGIN", name);
            c
        },
    ] {
        let what = format!("{c:?}");
        let (code, _, err) = run(c.current_dir(&*d));
        assert_eq!(code, 2, "{what}: {err}");
        assert!(
            err.contains(r#"no PJRT plugin matching "nonexistent\xFF""#),
            "{what}: {err}"
        );
    }
    let (_, _, err) = run(rpjrt()
        .arg("info")
        .env("RPJRT_PLUGIN", name)
        .current_dir(&*d));
    assert!(err.contains("(from RPJRT_PLUGIN) found"), "{err}");
    // A path with a `/` is a path: loading it fails (exit 1), naming it.
    let (code, _, err) = run(rpjrt()
        .arg("info")
        .arg(OsStr::from_bytes(b"./nonexistent\xff"))
        .current_dir(&*d));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot load PJRT plugin"), "{err}");
    // A file of that name in the current directory is loaded.
    std::os::unix::fs::symlink(fake(), d.join(OsStr::from_bytes(b"fak\xe9"))).unwrap();
    let (code, out, err) = run(rpjrt()
        .arg("info")
        .arg(OsStr::from_bytes(b"fak\xe9"))
        .current_dir(&*d));
    assert_eq!(code, 0, "{out}{err}");
}

/// An argument that is not UTF-8 where text is read (a create option, a format) is named,
/// with the option that took it; clap said only "invalid UTF-8 was detected in one or
/// more arguments".
#[test]
fn a_text_argument_that_is_not_utf8_is_named() {
    let d = tmpdir("r20-nonutf8-text");
    let prog = add_program(&d);
    let (code, _, err) = run(rpjrt()
        .arg("info")
        .arg("-o")
        .arg(OsStr::from_bytes(b"a=\xff")));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.starts_with(r#"rpjrt: the value of -o, "a=\xFF", is not valid UTF-8"#),
        "{err}"
    );
    let (code, _, err) = run(rpjrt()
        .arg("run")
        .arg(&prog)
        .arg(OsStr::from_bytes(b"--format=\xff")));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.starts_with(r#"rpjrt: the value of --format, "\xFF", is not valid UTF-8"#),
        "{err}"
    );
}

// ---- 8: wording and the plugins table ---------------------------------------------

/// `run ART --format F` on an rpjrt artifact said "an rpjrt artifact, not a executable
/// program: load it instead of compiling it": wrong article, and advice that does not
/// apply to `run` (which loads artifacts). It now says to leave --format out; `compile`
/// of an artifact says to run it with `rpjrt run`, and `compile --format executable` that
/// an executable is compiled already.
#[test]
fn an_artifact_given_with_a_format_says_what_to_do() {
    let d = tmpdir("r20-wording");
    let prog = add_program(&d);
    let art = d.join("a.rpjrt");
    let (code, _, err) = run(rpjrt()
        .arg("compile")
        .arg(&prog)
        .arg("-o")
        .arg(&art)
        .arg("--plugin")
        .arg(old()));
    assert_eq!(code, 0, "{err}");
    for f in ["executable", "mlir", "hlo"] {
        let (code, _, err) = run(rpjrt()
            .arg("run")
            .arg(&art)
            .args(["--random", "--format", f, "--plugin"])
            .arg(old()));
        assert_eq!(code, 2, "{f}: {err}");
        assert!(
            err.contains(&format!("not a program in format {f}")),
            "{f}: {err}"
        );
        assert!(err.contains("leave --format out"), "{f}: {err}");
        assert!(
            !err.contains("a executable") && !err.contains("instead of compiling"),
            "{err}"
        );
    }
    let (code, _, err) = run(rpjrt()
        .arg("compile")
        .arg(&art)
        .arg("-o")
        .arg(d.join("b.rpjrt"))
        .arg("--plugin")
        .arg(old()));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("run it with `rpjrt run"), "{err}");
    let (code, _, err) = run(rpjrt()
        .arg("compile")
        .arg(&prog)
        .args(["--format", "executable", "-o"])
        .arg(d.join("b.rpjrt"))
        .arg("--plugin")
        .arg(old()));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("compiled already"), "{err}");
    assert!(!d.join("b.rpjrt").exists());
}

/// A plugin found through a namespace package with a long name (as
/// `intel_extension_for_openxla`, 27 characters): its row's columns shifted, and its
/// wheel's version showed as `-` although the wheel's RECORD lists the library. The
/// columns now widen to their widest cell, and the version (and wheel) are read from the
/// RECORD that lists the library.
#[test]
fn the_plugins_table_stays_aligned_and_shows_a_namespace_wheels_version() {
    let d = tmpdir("r20-plugins-table");
    let site = d.join("site");
    let name = "a_namespace_plugin_with_a_long_name";
    let module = site.join("jax_plugins").join(name);
    std::fs::create_dir_all(&module).unwrap();
    // A copy: discovery resolves a symlink to its target, which no RECORD lists.
    std::fs::copy(fake(), module.join("pjrt_plugin_fake.so")).unwrap();
    let info = site.join("long_wheel-1.2.3.dist-info");
    std::fs::create_dir_all(&info).unwrap();
    std::fs::write(
        info.join("METADATA"),
        "Metadata-Version: 2.1\nName: long-wheel\nVersion: 1.2.3\n\n",
    )
    .unwrap();
    std::fs::write(
        info.join("RECORD"),
        format!(
            "jax_plugins/{name}/__init__.py,,\njax_plugins/{name}/pjrt_plugin_fake.so,sha256=x,1\n\
             long_wheel-1.2.3.dist-info/RECORD,,\n"
        ),
    )
    .unwrap();
    let (code, out, err) = run(rpjrt().arg("plugins").env("RPJRT_PLUGIN_PATH", &site));
    assert_eq!(code, 0, "{err}");
    let mut lines = out.lines();
    let heading = lines.next().unwrap();
    let row = lines
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("no row for {name}: {out}"));
    // Every column starts where its heading does.
    for (col, value) in [
        ("pjrt", "0.114"),
        ("version", "1.2.3"),
        ("found by", "namespace package"),
    ] {
        let at = heading.find(col).unwrap();
        assert_eq!(
            row.get(at..at + value.len()),
            Some(value),
            "{col}:\n{heading}\n{row}"
        );
    }
    let (code, out, err) = run(rpjrt()
        .args(["plugins", "--json"])
        .env("RPJRT_PLUGIN_PATH", &site));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = v["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(row["version"], "1.2.3", "{row}");
    assert_eq!(row["package"], "long-wheel", "{row}");
}
