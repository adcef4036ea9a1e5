//! Round 23 (command line) of the CLI's attack tests: `conform`'s child dies with its
//! runner even while the plugin hangs inside `dlopen`; `conform` keeps its channel on a
//! private copy of stdout (a plugin muting descriptor 1 is tested like any other) and says
//! that a channel was cut rather than blaming a crash or its own kill; several candidate
//! plugins that all fail are each said by how far they got; a null `PJRT_Error_*` entry
//! fails `api.null_entries` once and blocks the checks that could not read an error; a
//! verb's child that never starts rpjrt is bounded and noted by its parent; a non-blocking
//! stdout gets the whole output; and the small messages (an untyped literal without
//! parameter types, `/dev/stdin` in `conform`, an empty option name in a plugin config, a
//! `still waiting` note for `conform`'s load and for `PJRT_Buffer_Destroy`).

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{alive, build_so, children_of, fake, new, rpjrt, run, signal, tmpdir, wait_for};

fn json_of(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// A started process, killed (SIGKILL) and reaped when dropped, with any processes left
/// in `strays` (checked to be gone by the test; killed here whatever happened).
struct Running {
    child: Child,
    strays: Vec<u32>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for &pid in &self.strays {
            if alive(pid) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        }
    }
}

/// Starts `c` with stderr written to `err` (a file, read while it runs) and stdout dropped.
fn start(mut c: Command, err: &Path) -> Running {
    let file = std::fs::File::create(err).unwrap();
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .unwrap();
    Running {
        child,
        strays: Vec::new(),
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// A program adding its two f32[3] arguments, in `dir`.
fn add3(dir: &Path) -> PathBuf {
    let p = dir.join("add.mlir");
    std::fs::write(
        &p,
        "func.func @main(%x: tensor<3xf32>, %y: tensor<3xf32>) -> tensor<3xf32> {\n  \
         %0 = stablehlo.add %x, %y : tensor<3xf32>\n  return %0 : tensor<3xf32>\n}\n",
    )
    .unwrap();
    p
}

// --- 1: conform's child dies with its runner, even inside a hung dlopen ---------------

/// `rpjrt conform` on the fake plugin hanging in its library initializer, ended from
/// outside by `sig` once its child runs: the child must not stay behind. With `note`, the
/// runner is first seen to say what it waits on (the `still waiting` note of every verb).
fn conform_child_dies_with_its_runner(sig: &str, note: bool) {
    let d = tmpdir(&format!("r23-orphan-{sig}"));
    let err = d.join("err");
    let mut c = rpjrt();
    c.arg("conform")
        .arg(fake())
        .args(["--only", "api.version", "--timeout", "2"])
        .env("RPJRT_FAKE_HANG_ON", "dlopen");
    let mut r = start(c, &err);
    let pid = r.child.id();
    assert!(
        wait_for(Duration::from_secs(30), || !children_of(pid).is_empty()),
        "conform started no child"
    );
    let kids = children_of(pid);
    r.strays.extend(&kids);
    if note {
        assert!(
            wait_for(Duration::from_secs(30), || read(&err).contains(
                "still waiting after 5s: loading the plugin in conform's child"
            )),
            "no note while the load hangs: {}",
            read(&err)
        );
        let text = read(&err);
        assert!(text.contains("--plugin-timeout"), "{text}");
    } else {
        // Well inside the hung dlopen.
        std::thread::sleep(Duration::from_millis(1500));
    }
    signal(pid, sig);
    let _ = r.child.wait();
    for k in kids {
        assert!(
            wait_for(Duration::from_secs(10), || !alive(k)),
            "conform's child {k} outlived its runner (SIG{sig})"
        );
    }
}

#[test]
fn conform_child_dies_with_a_killed_runner_while_the_plugin_hangs_in_dlopen() {
    conform_child_dies_with_its_runner("KILL", true);
}

#[test]
fn conform_child_dies_with_a_terminated_runner_while_the_plugin_hangs_in_dlopen() {
    conform_child_dies_with_its_runner("TERM", false);
}

// --- 2: conform's channel is its own ---------------------------------------------------

/// A plugin that points descriptor 1 at /dev/null or closes it (MUTE_AT=api: in
/// GetPjrtApi; delay: from a thread MUTE_MS after load), then forwards to a real plugin.
const MUTE_PLUGIN: &str = r#"
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static void mute(void) {
    const char *how = getenv("MUTE_HOW");
    if (how && !strcmp(how, "close")) { close(1); return; }
    int fd = open("/dev/null", O_WRONLY); dup2(fd, 1); close(fd);
}
static void *later(void *a) {
    (void)a; const char *ms = getenv("MUTE_MS");
    usleep((ms ? atoi(ms) : 100) * 1000); mute(); return 0;
}
__attribute__((constructor)) static void init(void) {
    const char *at = getenv("MUTE_AT");
    if (at && !strcmp(at, "delay")) { pthread_t t; pthread_create(&t, 0, later, 0); pthread_detach(t); }
}
void *GetPjrtApi(void) {
    static void *(*real)(void);
    const char *at = getenv("MUTE_AT"); if (at && !strcmp(at, "api")) mute();
    if (!real) {
        void *h = dlopen(getenv("REAL_PJRT_PLUGIN"), RTLD_NOW | RTLD_LOCAL);
        if (!h) return 0;
        real = (void *(*)(void))dlsym(h, "GetPjrtApi");
    }
    return real ? real() : 0;
}
"#;

#[test]
fn conform_tests_a_plugin_that_mutes_or_closes_stdout() {
    let d = tmpdir("r23-mute");
    let lib = build_so(&d, "libmute_pjrt", MUTE_PLUGIN);
    for (at, how, only) in [
        ("api", "null", "api.version,client.create"),
        ("api", "close", "api.version,client.create"),
        ("delay", "null", "api.*,client.*,buffers.roundtrip.f*"),
    ] {
        let (code, out, err) = run(rpjrt()
            .arg("conform")
            .arg(&lib)
            .args(["--only", only, "--json", "-"])
            .env("REAL_PJRT_PLUGIN", new())
            .env("MUTE_AT", at)
            .env("MUTE_HOW", how)
            .env("MUTE_MS", "100"));
        let doc = json_of(&out);
        assert!(
            doc["plugin"].get("load_error").is_none(),
            "{at}/{how}: {doc}"
        );
        assert!(!err.contains("SIGKILL"), "{at}/{how}: {err}");
        let results = doc["results"].as_array().unwrap();
        assert!(!results.is_empty(), "{at}/{how}: {doc}");
        for r in results {
            assert_ne!(r["outcome"], "crash", "{at}/{how}: {r}");
            assert_ne!(r["outcome"], "fail", "{at}/{how}: {r}");
        }
        assert_eq!(code, 0, "{at}/{how}: {err}");
    }
}

/// A plugin that closes every descriptor of the process's stdout pipe (descriptor 1 and
/// any copy of it), as a library closing descriptors it does not own would (CUT_AT=api: in
/// GetPjrtApi; create: in PJRT_Client_Create, slot 10 of the table, after the header's 40
/// bytes; with CUT_HANG set it then never returns), and otherwise forwards to a real
/// plugin.
const CUT_PLUGIN: &str = r#"
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static void cut(void) {
    struct stat one, st;
    if (fstat(1, &one) != 0) return;
    for (int fd = 3; fd < 1024; fd++)
        if (fstat(fd, &st) == 0 && st.st_dev == one.st_dev && st.st_ino == one.st_ino) close(fd);
    close(1);
}
typedef void *(*entry_fn)(void *);
static entry_fn real_create;
static void *create(void *args) {
    cut();
    if (getenv("CUT_HANG")) for (;;) pause();
    return real_create(args);
}
void *GetPjrtApi(void) {
    static char *table;
    const char *at = getenv("CUT_AT");
    if (at && !strcmp(at, "api")) cut();
    if (!table) {
        void *h = dlopen(getenv("REAL_PJRT_PLUGIN"), RTLD_NOW | RTLD_LOCAL);
        if (!h) return 0;
        void *(*real)(void) = (void *(*)(void))dlsym(h, "GetPjrtApi");
        char *api = real ? real() : 0;
        if (!api) return 0;
        size_t size = *(size_t *)api;
        table = malloc(size);
        memcpy(table, api, size);
        if (at && !strcmp(at, "create")) {
            entry_fn *slot = (entry_fn *)(table + 40) + 10;
            real_create = *slot;
            *slot = create;
        }
    }
    return table;
}
"#;

#[test]
fn a_channel_cut_under_the_child_is_said_as_such_not_as_a_crash_or_a_kill() {
    let d = tmpdir("r23-cut");
    let lib = build_so(&d, "libcut_pjrt", CUT_PLUGIN);
    // While loading: the load error says what happened.
    let (code, out, err) = run(rpjrt()
        .arg("conform")
        .arg(&lib)
        .args(["--only", "api.version", "--json", "-"])
        .env("REAL_PJRT_PLUGIN", new())
        .env("CUT_AT", "api"));
    assert_eq!(code, 1, "{err}");
    let doc = json_of(&out);
    let why = doc["plugin"]["load_error"]
        .as_str()
        .unwrap_or_else(|| panic!("{doc}"));
    assert!(why.contains("output channel"), "{why}");
    assert!(why.contains("closed or redirected"), "{why}");
    assert!(why.contains("while the plugin was loading"), "{why}");
    assert!(
        !why.contains("SIGKILL") && !err.contains("SIGKILL"),
        "{why}\n{err}"
    );
    // While a check runs (creating the client): that check's result is lost to the cut,
    // said as such; it is not called a crash, and a fresh child goes on with the next.
    let (code, out, err) = run(rpjrt()
        .arg("conform")
        .arg(&lib)
        .args([
            "--only",
            "api.version,client.create,api.null_entries",
            "--json",
            "-",
        ])
        .env("REAL_PJRT_PLUGIN", new())
        .env("CUT_AT", "create"));
    assert_eq!(code, 1, "{err}");
    let doc = json_of(&out);
    let results = doc["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{doc}\n{err}"));
    let get = |n: &str| {
        results
            .iter()
            .find(|r| r["name"] == n)
            .unwrap_or_else(|| panic!("{n}: {doc}"))
    };
    assert_eq!(get("api.version")["outcome"], "pass", "{doc}");
    assert_eq!(get("api.null_entries")["outcome"], "pass", "{doc}");
    let cut = get("client.create");
    assert_eq!(cut["outcome"], "fail", "{cut}");
    let detail = cut["detail"].as_str().unwrap();
    assert!(detail.contains("output channel"), "{detail}");
    assert!(detail.contains("during this check"), "{detail}");
    assert!(!detail.contains("SIGKILL"), "{detail}");
    assert!(!detail.contains("exited with code"), "{detail}");
    // The child's own line about it is not shown as the plugin's stderr.
    assert!(
        !cut["stderr"].as_str().unwrap().contains("lost-channel"),
        "{cut}"
    );
    // A child that goes on running (here: hung) once its channel is cut is ended by
    // conform, which says so.
    let started = Instant::now();
    let (code, out, err) = run(rpjrt()
        .arg("conform")
        .arg(&lib)
        .args(["--only", "client.create", "--json", "-", "--timeout", "30"])
        .env("REAL_PJRT_PLUGIN", new())
        .env("CUT_AT", "create")
        .env("CUT_HANG", "1"));
    assert_eq!(code, 1, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "waited for --timeout"
    );
    let doc = json_of(&out);
    let r = &doc["results"][0];
    assert_eq!(r["outcome"], "fail", "{doc}");
    let detail = r["detail"].as_str().unwrap();
    assert!(detail.contains("output channel"), "{detail}");
    assert!(
        detail.contains("the process was still running, and conform ended it"),
        "{detail}"
    );
    assert!(!detail.contains("SIGKILL"), "{detail}");
}

// --- 3: several candidates, each said by how far it got --------------------------------

#[test]
fn several_failing_candidates_are_each_said_by_how_far_they_got() {
    let d = tmpdir("r23-candidates");
    let (a, b) = (d.join("a.so"), d.join("b.so"));
    std::fs::copy(fake(), &a).unwrap();
    std::fs::copy(fake(), &b).unwrap();
    let prog = add3(&d);
    let missing = d.join("missing.so");
    for (second, lead) in [
        (
            &b,
            "no plugin could be used: every plugin tried loaded, but none could create a client",
        ),
        (&missing, "no plugin could be used;"),
    ] {
        let spec = format!("one:{},two:{}", a.display(), second.display());
        let (code, _, err) = run(rpjrt()
            .arg("compile")
            .arg(&prog)
            .arg("-o")
            .arg(d.join("x.rpjrt"))
            .env("PJRT_NAMES_AND_LIBRARY_PATHS", &spec)
            .env(
                "RPJRT_FAKE_FAIL",
                "PJRT_Client_Create:FAILED_PRECONDITION:no device here",
            ));
        assert_eq!(code, 1, "{err}");
        assert!(err.contains(lead), "{err}");
        // The first plugin loaded: it is never called unloadable.
        assert!(
            !err.contains(&format!("cannot load PJRT plugin {}", a.display())),
            "{err}"
        );
        assert!(
            err.contains("the plugin loaded, but its client could not be created"),
            "{err}"
        );
        if second == &missing {
            assert!(
                err.contains(&format!("cannot load PJRT plugin {}", missing.display())),
                "{err}"
            );
        }
    }
}

// --- 4: a null PJRT_Error_* entry fails api.null_entries once --------------------------

#[test]
fn a_null_error_entry_fails_null_entries_once_and_blocks_what_could_not_be_read() {
    for entry in [
        "PJRT_Error_GetCode",
        "PJRT_Error_Message",
        "PJRT_Error_Destroy",
    ] {
        let (_, out, err) = run(rpjrt()
            .arg("conform")
            .arg(fake())
            .args([
                "--only",
                // Each unsupported by the plugin as it is (an UNIMPLEMENTED answer).
                "api.null_entries,buffers.roundtrip.bool,buffers.layout,executable.cost_analysis",
                "--json",
                "-",
                "--timeout",
                "20",
            ])
            .env("RPJRT_FAKE_NULL_SLOTS", entry));
        let doc = json_of(&out);
        let results = doc["results"].as_array().unwrap_or_else(|| panic!("{err}"));
        let get = |n: &str| {
            results
                .iter()
                .find(|r| r["name"] == n)
                .unwrap_or_else(|| panic!("{n}: {doc}"))
        };
        let nulls = get("api.null_entries");
        assert_eq!(nulls["outcome"], "fail", "{entry}: {nulls}");
        assert!(
            nulls["detail"].as_str().unwrap().contains(entry),
            "{entry}: {nulls}"
        );
        // No other check fails blaming its own entry for an error it could not read.
        for r in results.iter().filter(|r| r["name"] != "api.null_entries") {
            assert_ne!(r["outcome"], "fail", "{entry}: {r}");
            if r["outcome"] == "blocked" {
                assert_eq!(r["blocked_by"], "api.null_entries", "{entry}: {r}");
                assert!(
                    r["detail"].as_str().unwrap().contains(entry),
                    "{entry}: {r}"
                );
            }
        }
        // Without GetCode an UNIMPLEMENTED cannot be read: blocked, not failed. The
        // message alone missing, or the destroy, leaves the code readable: unsupported.
        let want = match entry {
            "PJRT_Error_GetCode" => "blocked",
            _ => "unsupported",
        };
        assert_eq!(
            get("buffers.roundtrip.bool")["outcome"],
            want,
            "{entry}: {doc}"
        );
    }
}

// --- 6: a verb's child that never starts rpjrt -----------------------------------------

#[test]
fn a_child_that_never_starts_rpjrt_is_noted_and_bounded_by_its_parent() {
    let d = tmpdir("r23-selfcmd");
    let err = d.join("err");
    // A shell that never gets to rpjrt, with a child of its own (`sleep`, not exec'd).
    let marker = format!("sleep {}", 900 + std::process::id() % 97);
    let mut c = rpjrt();
    c.arg("info")
        .arg(fake())
        .args(["--plugin-timeout", "1"])
        .env(
            "RPJRT_CLI_SELF",
            format!(r#"["/bin/sh", "-c", "{marker}; true", "x"]"#),
        );
    let started = Instant::now();
    let mut r = start(c, &err);
    let pid = r.child.id();
    assert!(
        wait_for(Duration::from_secs(10), || !children_of(pid).is_empty()),
        "no child"
    );
    let shells = children_of(pid);
    r.strays.extend(&shells);
    for s in &shells {
        r.strays.extend(children_of(*s));
    }
    let status = loop {
        if let Some(s) = r.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(40),
            "still waiting silently: {}",
            read(&err)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = read(&err);
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(
        text.contains("still waiting after 5s: the child process that runs `rpjrt info` has not started rpjrt yet"),
        "{text}"
    );
    assert!(text.contains("had not started rpjrt after"), "{text}");
    assert!(text.contains("RPJRT_CLI_SELF"), "{text}");
    assert!(text.contains("no plugin was loaded"), "{text}");
    // The child and what it started are gone.
    for &p in &r.strays {
        assert!(
            wait_for(Duration::from_secs(5), || !alive(p)),
            "process {p} left running"
        );
    }
}

// --- 7: a non-blocking stdout ----------------------------------------------------------

#[test]
fn a_non_blocking_stdout_pipe_gets_the_whole_output() {
    let d = tmpdir("r23-nonblock");
    let prog = d.join("big.mlir");
    std::fs::write(
        &prog,
        "func.func @main(%x: tensor<20000xf32>) -> tensor<20000xf32> {\n  \
         %0 = stablehlo.add %x, %x : tensor<20000xf32>\n  return %0 : tensor<20000xf32>\n}\n",
    )
    .unwrap();
    // The pipe's write end is O_NONBLOCK (as node.js leaves it), and its reader is slow.
    let script = r#"
import fcntl, json, os, subprocess, sys, time
r, w = os.pipe()
fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
p = subprocess.Popen(sys.argv[1:], stdout=w, stderr=subprocess.PIPE)
os.close(w)
time.sleep(2)
data = b""
while True:
    b = os.read(r, 1 << 16)
    if not b:
        break
    data += b
err = p.stderr.read().decode()
rc = p.wait(timeout=120)
doc = json.loads(data)
print("rc", rc, "bytes", len(data), "outputs", len(doc["outputs"][0]["data"]))
print(err, file=sys.stderr)
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_rpjrt"))
        .arg("run")
        .arg(&prog)
        .arg("--plugin")
        .arg(new())
        .args(["--random", "--json"])
        .env("NO_COLOR", "1")
        .env("RPJRT_PYTHON", "")
        .output()
        .expect("python3 runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.starts_with("rc 0 bytes "), "{stdout}{stderr}");
    assert!(stdout.trim_end().ends_with("outputs 20000"), "{stdout}");
    assert!(
        !stderr.contains("Resource temporarily unavailable"),
        "{stderr}"
    );
}

// --- 8: the small messages -------------------------------------------------------------

#[test]
fn an_untyped_literal_without_parameter_types_is_refused_asking_for_a_type() {
    let d = tmpdir("r23-untyped");
    let prog = add3(&d);
    // The fake plugin reports no parameter types.
    let (code, out, err) = run(rpjrt()
        .arg("run")
        .arg(&prog)
        .arg("--plugin")
        .arg(fake())
        .args(["-i", "[1,2,3]", "-i", "[1,1,1]"]));
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("input 0: the literal \"[1,2,3]\" has no type"),
        "{err}"
    );
    assert!(err.contains("give its type with a suffix"), "{err}");
    // Typed, it runs.
    let (code, out, err) = run(rpjrt()
        .arg("run")
        .arg(&prog)
        .arg("--plugin")
        .arg(fake())
        .args(["-i", "[1,2,3]:f32", "-i", "[1,1,1]:f32"]));
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn conform_names_dev_stdin_as_info_does() {
    let mut words = Vec::new();
    for verb in ["info", "conform"] {
        let (code, _, err) = run(rpjrt().arg(verb).arg("/dev/stdin").stdin(Stdio::null()));
        assert_eq!(code, 1, "{verb}: {err}");
        assert!(
            err.contains("cannot load PJRT plugin /dev/stdin: it is a character device"),
            "{verb}: {err}"
        );
        assert!(!err.contains("FIFO"), "{verb}: {err}");
        words.push(err.lines().next().unwrap_or("").to_string());
    }
    assert_eq!(words[0], words[1]);
}

#[test]
fn a_plugin_config_with_an_empty_option_name_names_the_config() {
    let d = tmpdir("r23-config");
    let cfg = d.join("ce.json");
    std::fs::write(
        &cfg,
        format!(
            r#"{{"library_path": "{}", "create_options": {{"": 1}}}}"#,
            fake().display()
        ),
    )
    .unwrap();
    let (code, _, err) = run(rpjrt().args(["info", "ce"]).env(
        "PJRT_NAMES_AND_LIBRARY_PATHS",
        format!("ce:{}", cfg.display()),
    ));
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains(&format!("the PJRT plugin config {}", cfg.display())),
        "{err}"
    );
    assert!(err.contains("a create option has an empty name"), "{err}");
}

#[test]
fn a_hang_in_buffer_destroy_during_run_is_noted() {
    let d = tmpdir("r23-destroy");
    let prog = add3(&d);
    let err = d.join("err");
    let mut c = rpjrt();
    c.arg("run")
        .arg(&prog)
        .arg("--plugin")
        .arg(fake())
        .args(["-i", "[1,2,3]:f32", "-i", "[1,1,1]:f32"])
        .env("RPJRT_FAKE_HANG_ON", "PJRT_Buffer_Destroy");
    let mut r = start(c, &err);
    let pid = r.child.id();
    let noted = wait_for(Duration::from_secs(40), || {
        read(&err).contains("still waiting after 5s: the plugin's release of the round's buffers")
    });
    let kids = children_of(pid);
    r.strays.extend(&kids);
    let text = read(&err);
    assert!(noted, "no note: {text}");
    assert!(text.contains("PJRT_Buffer_Destroy"), "{text}");
    r.child.kill().unwrap();
    let _ = r.child.wait();
    for k in kids {
        assert!(wait_for(Duration::from_secs(10), || !alive(k)), "{k} left");
    }
    let mut rest = String::new();
    let _ = std::fs::File::open(&err).map(|mut f| f.read_to_string(&mut rest));
}

/// Finding 5: `launch --timeout` whose job writes more than a pipe holds while the
/// launcher's own stdout is read late. No other process holds the job's output, and the job
/// was killed by the timeout: the message said "after every process had exited" and "a
/// process it started keeps it open and was left running", both false.
#[test]
fn a_launch_timed_out_while_writing_blames_no_process_left_running() {
    let mut child = rpjrt()
        .args(["launch", "-n", "1", "--timeout", "1", "--", "sh", "-c"])
        .arg("head -c 3000000 /dev/zero | tr '\\0' a; echo")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The launcher's stdout is taken only after its timeout ran out.
    std::thread::sleep(Duration::from_secs(3));
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(124), "{err}");
    assert!(err.contains("the launch timed out after 1.0s"), "{err}");
    assert!(!err.contains("after every process had exited"), "{err}");
    assert!(!err.contains("left running"), "{err}");
    assert!(err.contains("no other process holds it"), "{err}");
}
