//! Shared helpers of rpjrt's integration tests: finding the two real CPU plugins and running
//! a test body on each.
//!
//! The plugins are installed by `scripts/setup.sh`, which records their paths in
//! `.deps/plugins.env`; the environment variables `RPJRT_TEST_PLUGIN_OLD` and
//! `RPJRT_TEST_PLUGIN_NEW` take precedence. A missing plugin is a test failure, never a skip.

#![allow(dead_code)]

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use rpjrt::{
    ApiVersion, Buffer, Client, ClientOptions, Code, CompileOptions, Device, Error, Event,
    Executable, ExecuteOptions, Plugin, Program,
};

/// Which of the two test plugins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// xla-cpu-pjrt, PJRT 0.81.
    Old,
    /// lammps-jax-pjrt-cpu, PJRT 0.115.
    New,
}

impl Which {
    /// Both, old first.
    pub const BOTH: [Which; 2] = [Which::Old, Which::New];

    /// The environment variable (and `plugins.env` key) naming this plugin.
    pub fn var(self) -> &'static str {
        match self {
            Which::Old => "RPJRT_TEST_PLUGIN_OLD",
            Which::New => "RPJRT_TEST_PLUGIN_NEW",
        }
    }
}

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A file under `crates/rpjrt/tests/fixtures/`.
pub fn fixture_path(name: &str) -> PathBuf {
    workspace_root()
        .join("crates/rpjrt/tests/fixtures")
        .join(name)
}

/// The bytes of a fixture file.
pub fn fixture(name: &str) -> Vec<u8> {
    let p = fixture_path(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("cannot read fixture {}: {e}", p.display()))
}

/// The path of one test plugin. Panics (never skips) when it cannot be found.
pub fn plugin_path(which: Which) -> PathBuf {
    plugin_path_of(which.var())
}

/// The path of the plugin the variable `var` names, from the environment or
/// `.deps/plugins.env`. Panics (never skips) when it cannot be found.
pub fn plugin_path_of(var: &str) -> PathBuf {
    let from_env = std::env::var_os(var).filter(|v| !v.is_empty());
    let path = match from_env {
        Some(p) => PathBuf::from(p),
        None => {
            let env_file = workspace_root().join(".deps/plugins.env");
            let text = std::fs::read_to_string(&env_file).unwrap_or_else(|e| {
                panic!(
                    "{var} is not set and {} cannot be read ({e}): run scripts/setup.sh",
                    env_file.display()
                )
            });
            let value = text
                .lines()
                .filter_map(|l| l.trim().strip_prefix(var)?.strip_prefix('='))
                .next_back()
                .unwrap_or_else(|| {
                    panic!(
                        "{} has no {var}= line: run scripts/setup.sh",
                        env_file.display()
                    )
                });
            PathBuf::from(value.trim().trim_matches('"'))
        }
    };
    assert!(
        path.is_file(),
        "test plugin {var} = {} does not exist: run scripts/setup.sh",
        path.display()
    );
    path
}

/// Loads a fresh copy of the fake plugin with `knobs` set (environment variables it reads
/// when it loads) and every name in `all` cleared before and after; each knob must be one
/// of `all`. Loads are serialized within the test binary (the environment is process-wide);
/// each copy is a library of its own, so the knobs it read stay its own.
pub fn load_fake(knobs: &[(&str, &str)], all: &[&str]) -> rpjrt::Result<Plugin> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let dir = std::env::temp_dir().join(format!("rpjrt-fake-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let copy = dir.join(format!("fake-{n}.so"));
    std::fs::copy(fake_plugin_library(), &copy).unwrap();
    for k in all {
        std::env::remove_var(k);
    }
    for (k, v) in knobs {
        assert!(all.contains(k), "unknown knob {k}");
        std::env::set_var(k, v);
    }
    let r = Plugin::load(&copy);
    // The library stays mapped (never unloaded); the copy on disk is not needed again.
    let _ = std::fs::remove_file(&copy);
    for k in all {
        std::env::remove_var(k);
    }
    r
}

/// Loads one test plugin (once per process; later calls return the same plugin).
pub fn plugin(which: Which) -> Plugin {
    let path = plugin_path(which);
    Plugin::load(&path).unwrap_or_else(|e| panic!("loading {}: {e}", path.display()))
}

/// A short label for failure messages, e.g. `PJRT 0.81 (xla_cpu_pjrt.so)`.
pub fn label(plugin: &Plugin) -> String {
    let file = plugin
        .path()
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("PJRT {} ({file})", plugin.version())
}

/// Whether this is the old (0.81) plugin.
pub fn is_old(plugin: &Plugin) -> bool {
    plugin.version()
        < ApiVersion {
            major: 0,
            minor: 100,
        }
}

fn panic_text(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic)".to_string()
    }
}

/// Runs `body` on each plugin, even when an earlier one failed, and then fails with every
/// failure labelled by the plugin's version.
pub fn for_each_plugin_only(body: impl Fn(&Plugin)) {
    // Find both first, so that a missing plugin fails before any body runs.
    let plugins = Which::BOTH.map(plugin);
    let mut failures = Vec::new();
    for plugin in &plugins {
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| body(plugin))) {
            failures.push(format!("on {}: {}", label(plugin), panic_text(&*p)));
        }
    }
    if !failures.is_empty() {
        panic!("{}", failures.join("\n"));
    }
}

/// Runs `body` on each plugin with a fresh client made with default options.
pub fn for_each_plugin(body: impl Fn(&Plugin, &Client)) {
    for_each_plugin_with(&ClientOptions::new(), body)
}

/// Runs `body` on each plugin with a fresh client made with `options`.
pub fn for_each_plugin_with(options: &ClientOptions, body: impl Fn(&Plugin, &Client)) {
    for_each_plugin_only(|plugin| {
        let client = Client::new(plugin, options)
            .unwrap_or_else(|e| panic!("creating a client with {options:?}: {e}"));
        body(plugin, &client)
    })
}

/// Compiles StableHLO text with default options, panicking with the error.
pub fn compile(client: &Client, text: &str) -> Executable {
    compile_with(client, text, &CompileOptions::default())
}

/// Compiles StableHLO text with `options`, panicking with the error.
pub fn compile_with(client: &Client, text: &str, options: &CompileOptions) -> Executable {
    client
        .compile(&Program::mlir(text), options)
        .unwrap_or_else(|e| panic!("compiling\n{text}\nfailed: {e}"))
}

/// The `mul_add.mlir` fixture: `a * b + 1` over `f32[8]`.
pub fn mul_add() -> String {
    String::from_utf8(fixture("mul_add.mlir")).expect("mul_add.mlir is UTF-8")
}

/// What most execute tests start from: `mul_add` compiled on `client`, the client's default
/// device, and `values` (eight of them) there as an input.
pub fn mul_add_with_input(client: &Client, values: &[f32]) -> (Executable, Device, Buffer) {
    let exe = compile(client, &mul_add());
    let device = client.default_device().unwrap();
    let x = client.buffer_from_slice(values, &[8], &device).unwrap();
    (exe, device, x)
}

/// Compile options for `n` replicas of one partition.
pub fn replicas(n: u32) -> CompileOptions {
    CompileOptions {
        num_replicas: n,
        ..Default::default()
    }
}

/// Execute options asking for completion events.
pub fn with_events() -> ExecuteOptions {
    ExecuteOptions {
        completion_events: true,
        ..Default::default()
    }
}

/// Runs `exe` (one device) on `(x, x)` with a completion event: the output and the event.
pub fn run_with_event(exe: &Executable, x: &Buffer) -> (Buffer, Event) {
    let mut run = exe.execute_with(&[vec![x, x]], &with_events()).unwrap();
    (
        run.outputs.pop().unwrap().pop().unwrap(),
        run.events.pop().unwrap(),
    )
}

/// A two-replica program summing its input over both replicas.
pub const ALL_REDUCE: &str = "module @all_reduce attributes {mhlo.num_replicas = 2 : i32} {
  func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = \"stablehlo.all_reduce\"(%a) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
";

/// [`ALL_REDUCE`] compiled on `client`, its two devices, and an input on each:
/// `[1, 2, 3, 4]` on the first, `[10, 20, 30, 40]` on the second.
pub fn all_reduce_with_inputs(client: &Client) -> (Executable, Vec<Device>, Buffer, Buffer) {
    let exe = compile_with(client, ALL_REDUCE, &replicas(2));
    let devices = exe.addressable_devices().unwrap();
    assert_eq!(devices.len(), 2);
    let put = |v: [f32; 4], d: &Device| client.buffer_from_slice(&v, &[4], d).unwrap();
    let a = put([1., 2., 3., 4.], &devices[0]);
    let b = put([10., 20., 30., 40.], &devices[1]);
    (exe, devices, a, b)
}

/// Waits for the user event `ev` on another thread, sets it to a `code` error with
/// `message` from this one, and checks that the waiter woke with that error.
pub fn set_error_wakes_a_waiter(ev: &std::sync::Arc<Event>, code: Code, message: &str) {
    let waiter = {
        let ev = std::sync::Arc::clone(ev);
        std::thread::spawn(move || ev.wait())
    };
    std::thread::sleep(std::time::Duration::from_millis(20));
    ev.set(Err(Error::Pjrt {
        entry: "user",
        code,
        message: message.into(),
    }))
    .unwrap();
    let e = waiter.join().unwrap().unwrap_err();
    assert_eq!(e.code(), code, "{e:?}");
    assert!(e.to_string().contains(message), "{e}");
}

/// Asserts that `r` is an error whose message contains every one of `needles`, and returns
/// the error.
#[track_caller]
pub fn expect_err<T: std::fmt::Debug>(r: rpjrt::Result<T>, needles: &[&str]) -> rpjrt::Error {
    let e = match r {
        Ok(v) => panic!("expected an error containing {needles:?}, got Ok({v:?})"),
        Err(e) => e,
    };
    let text = e.to_string();
    for n in needles {
        assert!(
            text.contains(n),
            "error {text:?} does not contain {n:?} ({e:?})"
        );
    }
    e
}

/// The bytes of a slice of `f32` in native order.
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

struct ThreadWaker(std::thread::Thread);

impl std::task::Wake for ThreadWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

/// Drives a future to completion on this thread (a waker that unparks it), failing the test
/// if it takes longer than 60 seconds.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    use std::task::{Context, Poll, Waker};
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let waker = Waker::from(std::sync::Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        let now = std::time::Instant::now();
        assert!(now < deadline, "future did not complete within 60 s");
        std::thread::park_timeout(deadline - now);
    }
}

/// `target/<profile>/`, found from this test binary (at `target/<profile>/deps/`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("test binaries live in target/<profile>/deps")
        .to_path_buf()
}

/// The fake plugin's library (`RPJRT_FAKE_PLUGIN`, else `target/<profile>/`), built with
/// `cargo build -p rpjrt-fake-plugin` in the same profile once per test binary, so that
/// `cargo test --workspace` works on a fresh checkout with no other step and never tests a
/// stale copy (`cargo test` builds the cdylib under `deps/` but does not copy it up to
/// `target/<profile>/`; the build is a quick no-op when it is current).
pub fn fake_plugin_library() -> PathBuf {
    if let Some(p) = std::env::var_os("RPJRT_FAKE_PLUGIN") {
        return PathBuf::from(p);
    }
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = profile_dir();
            let lib = dir.join("librpjrt_fake_plugin.so");
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let mut cmd = std::process::Command::new(cargo);
            cmd.current_dir(workspace_root())
                .args(["build", "--quiet", "-p", "rpjrt-fake-plugin"]);
            if dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            if let Some(target) = dir.parent() {
                cmd.env("CARGO_TARGET_DIR", target);
            }
            let status = cmd
                .status()
                .unwrap_or_else(|e| panic!("running cargo to build the fake plugin: {e}"));
            assert!(
                status.success() && lib.is_file(),
                "`cargo build -p rpjrt-fake-plugin` did not produce {} ({status})",
                lib.display()
            );
            lib
        })
        .clone()
}

/// `values` as one f32 slot's host value (a session bind).
pub fn f32_slot(values: &[f32]) -> rpjrt::SlotValue {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
    rpjrt::SlotValue::Host(rpjrt::HostArray::from_owner(
        std::sync::Arc::new(bytes),
        rpjrt::ElementType::F32,
        vec![values.len() as i64],
    ))
}

/// The bytes this thread has read so far (`rchar` of /proc/thread-self/io): this thread's
/// reads only, as tests beside it read files too (a plugin's build fingerprint hashes its
/// whole library).
pub fn thread_bytes_read() -> u64 {
    std::fs::read_to_string("/proc/thread-self/io")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Writes at `path` a compile-cache entry head declaring a body of `size` bytes and no
/// header fields, the file made that long (sparse): what a reader must not read whole.
pub fn sparse_cache_entry(path: &Path, size: u64) {
    use std::io::Write as _;
    let mut f = std::fs::File::create(path).unwrap();
    let mut head = b"RPJRTEXE".to_vec();
    head.extend_from_slice(&1u32.to_le_bytes());
    head.extend_from_slice(&size.to_le_bytes());
    head.extend_from_slice(&0u32.to_le_bytes()); // no header fields
    f.write_all(&head).unwrap();
    f.set_len(size).unwrap();
}
