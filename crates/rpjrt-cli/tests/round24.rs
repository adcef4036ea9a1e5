//! Round 24 (command line) of the CLI's regression tests: the plugin profile `run --trace`
//! writes beside the trace is an output checked before the run; `rendezvous` with explicit
//! ids takes `RPJRT_COORDINATOR` as `rpjrt launch` sets it; `-i NAME=` takes JAX's pytree
//! parameter names (`p['w']`); a non-UTF-8 `RPJRT_PLUGIN_TIMEOUT` is refused, not taken for
//! unset; half-precision and float8 outputs print at their own precision; and the small
//! messages (`cache info KEY.rpjrtexe`, a plugin too old for rpjrt told to upgrade its
//! wheel).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

mod common;

use common::{build_so, fake, free_port, new, rpjrt, run, tmpdir};

const ADD: &str = "func.func @main(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {\n  \
                   %0 = stablehlo.add %a, %b : tensor<3xf32>\n  return %0 : tensor<3xf32>\n}\n";

/// A `.npy` of float32 `values` (a 1-D array).
fn npy_f32(path: &Path, values: &[f32]) {
    let header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}",
        values.len()
    );
    let mut h = header.into_bytes();
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(b' ');
    }
    h.push(b'\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(h.len() as u16).to_le_bytes());
    bytes.extend_from_slice(&h);
    for v in values {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

// --- 2: the plugin profile beside `--trace` -------------------------------------------------

/// `run --trace` on the fake plugin with its Profiler extension (as CUDA and libtpu have).
fn traced_run(dir: &Path) -> std::process::Command {
    let mut c = rpjrt();
    c.current_dir(dir)
        .env("RPJRT_FAKE_EXTENSIONS", "Layouts,FFI,Profiler")
        .arg("run")
        .arg("add.mlir")
        .arg("--plugin")
        .arg(fake());
    c
}

/// A directory where the profile would go was found only after the work (exit 1), and the
/// trace itself was lost with it; now it is refused before anything runs (exit 2), naming
/// the profile's path, and nothing is written.
#[test]
fn a_directory_at_the_profile_path_is_refused_before_the_run() {
    let dir = tmpdir("r24-profile-dir");
    std::fs::write(dir.join("add.mlir"), ADD).unwrap();
    std::fs::create_dir(dir.join("t.plugin.xspace.pb")).unwrap();
    let (code, out, err) = run(traced_run(&dir)
        .args(["-i", "[1,2,3]:f32", "-i", "[1,2,3]:f32"])
        .args(["--trace", "t.json"]));
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(out.is_empty(), "the run went ahead: {out}");
    assert!(
        err.contains("--trace t.json: the plugin's profile") && err.contains("t.plugin.xspace.pb"),
        "{err}"
    );
    assert!(err.contains("directory"), "{err}");
    assert!(!dir.join("t.json").exists());
    assert!(dir.join("t.plugin.xspace.pb").is_dir());
    // Without the directory: both files, the trace naming the profile beside it.
    std::fs::remove_dir(dir.join("t.plugin.xspace.pb")).unwrap();
    let (code, out, err) = run(traced_run(&dir)
        .args(["-i", "[1,2,3]:f32", "-i", "[1,2,3]:f32"])
        .args(["--trace", "t.json"]));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("and t.plugin.xspace.pb"), "{err}");
    assert!(dir.join("t.plugin.xspace.pb").is_file());
    let trace: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("t.json")).unwrap()).unwrap();
    assert_eq!(
        trace["otherData"]["plugin_profile_file"], "t.plugin.xspace.pb",
        "{trace}"
    );
}

/// An input file at the profile's path was silently replaced by the profile; now the run
/// is refused (exit 2) as any output naming an input is, and the input is left as it was.
#[test]
fn an_input_at_the_profile_path_is_not_overwritten() {
    let dir = tmpdir("r24-profile-input");
    std::fs::write(dir.join("add.mlir"), ADD).unwrap();
    npy_f32(&dir.join("t.plugin.xspace.pb"), &[1.0, 2.0, 3.0]);
    npy_f32(&dir.join("x.npy"), &[1.0, 2.0, 3.0]);
    let before = std::fs::read(dir.join("t.plugin.xspace.pb")).unwrap();
    let (code, out, err) = run(traced_run(&dir)
        .args(["-i", "0=t.plugin.xspace.pb", "-i", "1=x.npy"])
        .args(["--trace", "t.json"]));
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("that is the input file"), "{err}");
    assert_eq!(
        std::fs::read(dir.join("t.plugin.xspace.pb")).unwrap(),
        before
    );
    assert!(!dir.join("t.json").exists());
    // Through a symbolic link named so, to another input (the program): refused too.
    std::fs::remove_file(dir.join("t.plugin.xspace.pb")).unwrap();
    std::os::unix::fs::symlink("add.mlir", dir.join("t.plugin.xspace.pb")).unwrap();
    let (code, _, err) = run(traced_run(&dir)
        .args(["-i", "[1,2,3]:f32", "-i", "[1,2,3]:f32"])
        .args(["--trace", "t.json"]));
    assert_eq!(code, 2, "{err}");
    assert_eq!(std::fs::read_to_string(dir.join("add.mlir")).unwrap(), ADD);
}

// --- 3: rendezvous with explicit ids and RPJRT_COORDINATOR ---------------------------------

/// Explicit ids ignored `RPJRT_COORDINATOR` and then asked for it to be set; now it is
/// used (process 1 tries to reach it: exit 1 naming the address).
#[test]
fn rendezvous_with_explicit_ids_takes_the_coordinator_from_the_environment() {
    let port = free_port();
    let (code, out, err) = run(rpjrt()
        .env("RPJRT_COORDINATOR", format!("127.0.0.1:{port}"))
        .args(["rendezvous", "--timeout", "1"])
        .args(["--process-id", "1", "--num-processes", "2"]));
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(!err.contains("names no coordinator"), "{err}");
    // Neither --coordinator nor RPJRT_COORDINATOR: a usage error saying how to give one.
    let (code, _, err) = run(rpjrt()
        .env_remove("RPJRT_COORDINATOR")
        .args(["rendezvous", "--timeout", "1"])
        .args(["--process-id", "1", "--num-processes", "2"]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--coordinator") && err.contains("RPJRT_COORDINATOR"),
        "{err}"
    );
}

/// Under `rpjrt launch`, which sets `RPJRT_COORDINATOR` for every process, explicit ids
/// meet (every process failed before).
#[test]
fn rendezvous_with_explicit_ids_meets_under_launch() {
    let exe = env!("CARGO_BIN_EXE_rpjrt");
    let (code, out, err) = run(rpjrt()
        .args(["launch", "-n", "2", "--timeout", "60", "--", "sh", "-c"])
        .arg(format!(
            "exec '{exe}' rendezvous --timeout 20 --num-processes 2 --process-id \
             \"$RPJRT_PROCESS_ID\""
        )));
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(
        out.matches("rendezvous ok, 2 processes").count(),
        2,
        "{out}"
    );
}

// --- 4: JAX pytree parameter names with -i NAME= -------------------------------------------

const PYTREE: &str = "func.func public @main(%arg0: tensor<3xf32> loc(\"p['b']\"), \
    %arg1: tensor<3xf32> loc(\"p['w']\"), %arg2: tensor<3xf32> loc(\"x/y\")) -> tensor<3xf32> {\n  \
    %0 = stablehlo.multiply %arg1, %arg2 : tensor<3xf32>\n  \
    %1 = stablehlo.subtract %0, %arg0 : tensor<3xf32>\n  return %1 : tensor<3xf32>\n}\n";

fn pytree_run(dir: &Path) -> std::process::Command {
    let mut c = rpjrt();
    c.current_dir(dir)
        .args(["run", "p.mlir", "--plugin"])
        .arg(new());
    c
}

/// Names holding `[`, quotes and `/` are keys when the program has them: by file and by
/// literal (before, a missing file or a malformed literal).
#[test]
fn pytree_names_are_keys() {
    let dir = tmpdir("r24-pytree");
    std::fs::write(dir.join("p.mlir"), PYTREE).unwrap();
    npy_f32(&dir.join("w.npy"), &[2.0; 3]);
    let (code, out, err) = run(pytree_run(&dir).args([
        "-i",
        "p['w']=w.npy",
        "-i",
        "p['b']=[1,1,1]",
        "-i",
        "x/y=[5,5,5]",
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("array([9., 9., 9.], dtype=float32)"),
        "{out}\n{err}"
    );
    // In another order, keys and positions mixed: each name fills its own parameter.
    let (code, out, err) = run(pytree_run(&dir).args([
        "-i",
        "x/y=[5,5,5]",
        "-i",
        "p['w']=[2,2,2]",
        "-i",
        "0=[1,1,1]",
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("array([9., 9., 9.]"), "{out}");
}

/// A key that is no parameter name (a typo of one) is said as such, with the parameters,
/// not as a missing file or a malformed literal.
#[test]
fn an_unknown_pytree_key_is_named() {
    let dir = tmpdir("r24-pytree-bad");
    std::fs::write(dir.join("p.mlir"), PYTREE).unwrap();
    for spec in ["p['v']=[1,1,1]", "p['v']=w.npy", "args[0]=1.5"] {
        let (code, _, err) = run(pytree_run(&dir).args(["-i", spec]));
        assert_eq!(code, 2, "{spec}: {err}");
        let key = spec.split('=').next().unwrap();
        assert!(
            err.contains(&format!("{key:?}")) && err.contains("names no parameter"),
            "{spec}: {err}"
        );
        assert!(
            err.contains("its parameters are \"p['b']\""),
            "{spec}: {err}"
        );
        assert!(!err.contains("malformed literal"), "{spec}: {err}");
    }
    // A file whose path holds `=` still needs no key.
    std::fs::create_dir(dir.join("d")).unwrap();
    npy_f32(&dir.join("d/a=b.npy"), &[1.0; 3]);
    let (code, out, err) =
        run(pytree_run(&dir).args(["-i", "./d/a=b.npy", "-i", "[2,2,2]", "-i", "[5,5,5]"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("array([9., 9., 9.]"), "{out}");
}

// --- 5: RPJRT_PLUGIN_TIMEOUT that is not UTF-8 -----------------------------------------------

/// It was taken for unset (no limit: a hanging plugin waited for ever); now it is refused
/// at once (exit 2) naming the variable.
#[test]
fn a_non_utf8_plugin_timeout_is_refused() {
    let start = Instant::now();
    let (code, _, err) = run(rpjrt()
        .env("RPJRT_PLUGIN_TIMEOUT", OsStr::from_bytes(b"1\xff"))
        .env("RPJRT_FAKE_HANG_ON", "GetPjrtApi")
        .arg("info")
        .arg(fake()));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("RPJRT_PLUGIN_TIMEOUT must be a number of seconds") && err.contains("UTF-8"),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(20));
}

// --- 6: float16, bfloat16 and float8 outputs at their own precision -------------------------

/// They printed every binary digit of the value (`0.0999755859375`); now the shortest
/// decimal that reads back as the same value of the type, as numpy prints.
#[test]
fn narrow_floats_print_at_their_own_precision() {
    let dir = tmpdir("r24-half");
    for (mlir, name, want) in [
        (
            "f16",
            "float16",
            "array([0.1, 0.3, 1.024e+03, 6.104e-05], dtype=float16)",
        ),
        (
            "bf16",
            "bfloat16",
            "array([0.1, 0.3, 1024., 6.1e-05], dtype=bfloat16)",
        ),
        (
            "f8E4M3FN",
            "float8_e4m3fn",
            "array([0.1, 0.3, 448., 0.002], dtype=float8_e4m3fn)",
        ),
    ] {
        let prog = dir.join(format!("id_{mlir}.mlir"));
        std::fs::write(
            &prog,
            format!("func.func @main(%a: tensor<4x{mlir}>) -> tensor<4x{mlir}> {{\n  return %a : tensor<4x{mlir}>\n}}\n"),
        )
        .unwrap();
        // Values of each type (float8_e4m3fn's 0.1 is 0.1015625, its 0.3 is 0.3125).
        let values = match mlir {
            "f16" => "[0.0999755859375, 0.300048828125, 1024, 6.103515625e-05]",
            "bf16" => "[0.10009765625, 0.30078125, 1024, 6.103515625e-05]",
            _ => "[0.1015625, 0.3125, 448, 0.001953125]",
        };
        let (code, out, err) = run(rpjrt()
            .arg("run")
            .arg(&prog)
            .arg("--plugin")
            .arg(new())
            .arg("-i")
            .arg(format!("{values}:{name}")));
        assert_eq!(code, 0, "{name}: {err}");
        assert!(out.contains(want), "{name}: {out}");
    }
}

// --- 7: small messages ------------------------------------------------------------------------

/// `cache info` takes an entry's file name as `ls DIR` shows it (`KEY.rpjrtexe`).
#[test]
fn cache_info_takes_the_entry_file_name() {
    let dir = tmpdir("r24-cache");
    std::fs::write(dir.join("add.mlir"), ADD).unwrap();
    let cache = dir.join("cache");
    let (code, _, err) = run(rpjrt()
        .current_dir(&*dir)
        .args(["compile", "add.mlir", "-o", "./a.rpjrt", "--plugin"])
        .arg(new())
        .arg("--cache-dir")
        .arg(&cache));
    assert_eq!(code, 0, "{err}");
    let file = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with(".rpjrtexe"))
        .expect("an entry");
    let key = file.strip_suffix(".rpjrtexe").unwrap();
    let (code, out, err) = run(rpjrt().args(["cache", "info", &file, "--dir"]).arg(&cache));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("key          {key}")), "{out}");
}

/// A plugin implementing PJRT 0.54 (`GetPjrtApi` returns only a version).
const OLD_PLUGIN: &str = "#include <stddef.h>\n\
    struct V { size_t size; void* ext; int major; int minor; };\n\
    struct A { size_t size; void* ext; struct V version; void* entries[3]; };\n\
    static struct A api = { sizeof(struct A), 0, { sizeof(struct V), 0, 0, 54 }, { 0, 0, 0 } };\n\
    const void* GetPjrtApi(void) { return &api; }\n";

/// A library too old for rpjrt got the CPU plugin's install hint; now the advice is to
/// upgrade the wheel that installed it (named from its `.dist-info` record), or a newer
/// release of the plugin when no wheel lists it.
#[test]
fn a_plugin_too_old_is_told_to_upgrade_its_wheel() {
    let dir = tmpdir("r24-old");
    let pkg = dir.join("site/jax_plugins/old_gpu");
    std::fs::create_dir_all(&pkg).unwrap();
    let so = build_so(&pkg, "old_plugin", OLD_PLUGIN);
    let info = dir.join("site/jax_old_gpu_pjrt-0.4.31.dist-info");
    std::fs::create_dir_all(&info).unwrap();
    std::fs::write(
        info.join("METADATA"),
        "Metadata-Version: 2.1\nName: jax-old-gpu-pjrt\nVersion: 0.4.31\n\nA plugin.\n",
    )
    .unwrap();
    std::fs::write(
        info.join("RECORD"),
        "jax_plugins/old_gpu/old_plugin.so,sha256=x,1\njax_old_gpu_pjrt-0.4.31.dist-info/RECORD,,\n",
    )
    .unwrap();
    let (code, _, err) = run(rpjrt().arg("info").arg(&so));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("rpjrt needs PJRT 0.57 or newer"), "{err}");
    assert!(
        err.contains("pip install -U jax-old-gpu-pjrt (version 0.4.31 is installed"),
        "{err}"
    );
    assert!(!err.contains("rpjrt[cpu]"), "{err}");
    // No wheel lists it: a newer release of the plugin, still no CPU hint.
    std::fs::remove_dir_all(&info).unwrap();
    let (code, _, err) = run(rpjrt().arg("info").arg(&so));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("install a newer release of this plugin"),
        "{err}"
    );
    assert!(!err.contains("rpjrt[cpu]"), "{err}");
}
