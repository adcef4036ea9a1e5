//! `rpjrt compile` and `rpjrt cache` on both real CPU plugins (paths from the environment
//! or `.deps/plugins.env`, as `scripts/setup.sh` writes them; missing plugins fail).

use std::process::Command;

mod common;

use common::{fixtures, plugin as plugin_path};

fn rpjrt(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rpjrt"))
        .args(args)
        .env_remove("RPJRT_CACHE_DIR")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn compile_writes_a_loadable_artifact_and_cache_lists_it() {
    let program = fixtures().join("mlp_train_step.mlir");
    for var in ["RPJRT_TEST_PLUGIN_OLD", "RPJRT_TEST_PLUGIN_NEW"] {
        let plugin = plugin_path(var);
        let dir = std::env::temp_dir().join(format!("rpjrt-cli-aot-{}-{var}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = dir.join("cache");
        let artifact = dir.join("mlp.rpjrt");
        std::fs::create_dir_all(&dir).unwrap();
        let (p, a, c) = (
            plugin.to_str().unwrap(),
            artifact.to_str().unwrap(),
            cache.to_str().unwrap(),
        );
        let (ok, out, err) = rpjrt(&[
            "compile",
            program.to_str().unwrap(),
            "-o",
            a,
            "--plugin",
            p,
            "--cache-dir",
            c,
            "--json",
        ]);
        assert!(ok, "{out}{err}");
        let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(doc["target"]["platform_name"], "cpu");

        // The artifact loads in the library on the same plugin and refuses the other one.
        let bytes = std::fs::read(&artifact).unwrap();
        let client = rpjrt::Client::from_path(&plugin).unwrap();
        assert_eq!(client.load(&bytes, None).unwrap().num_outputs(), 5);

        let (ok, out, err) = rpjrt(&["cache", "ls", "--dir", c, "--json"]);
        assert!(ok, "{out}{err}");
        let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
        let entries = doc["entries"].as_array().unwrap();
        assert_eq!(entries.len(), 1);
        let key = entries[0]["key"].as_str().unwrap().to_string();
        let (ok, out, _) = rpjrt(&["cache", "info", &key[..10], "--dir", c]);
        assert!(
            ok && out.contains(&key) && out.contains("pjrt_version"),
            "{out}"
        );
        let (ok, out, _) = rpjrt(&["cache", "clear", "--dir", c, "--json"]);
        assert!(ok && out.contains("\"removed\": 1"), "{out}");
        let (ok, _, err) = rpjrt(&["cache", "info", "abc", "--dir", c]);
        assert!(!ok && err.contains("no entry"), "{err}");
        let (ok, _, err) = rpjrt(&["cache", "ls"]);
        assert!(!ok && err.contains("RPJRT_CACHE_DIR"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn compile_describe_shows_shardings_or_why_not() {
    let program = fixtures().join("shardy_sin.mlir");
    for var in ["RPJRT_TEST_PLUGIN_OLD", "RPJRT_TEST_PLUGIN_NEW"] {
        let plugin = plugin_path(var);
        let dir =
            std::env::temp_dir().join(format!("rpjrt-cli-describe-{}-{var}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let artifact = dir.join("sin.rpjrt");
        let args = [
            "compile",
            program.to_str().unwrap(),
            "-o",
            artifact.to_str().unwrap(),
            "--plugin",
            plugin.to_str().unwrap(),
            "--num-partitions",
            "2",
            "--describe",
        ];
        let (ok, out, err) = rpjrt(&[&args[..], &["--json"]].concat());
        assert!(ok, "{out}{err}");
        let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
        let exe = &doc["executable"];
        // A layout's minor_to_major is a list of numbers in JSON, not its text.
        assert_eq!(exe["output_layouts"], serde_json::json!([[1, 0]]), "{out}");
        let (ok, text, err) = rpjrt(&args);
        assert!(ok, "{text}{err}");
        // Both plugins (0.81 from the compiled module, lacking the Shardings extension).
        for k in ["parameter_shardings", "output_shardings"] {
            assert_eq!(
                exe[k],
                serde_json::json!(["{devices=[2,1]<=[2]}"]),
                "{var}: {out}"
            );
        }
        assert!(
            text.contains("parameter_shardings: {devices=[2,1]<=[2]}"),
            "{var}: {text}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// `rpjrt ARGS` with a deadline: (exit code, stdout + stderr). A verb that blocks (a FIFO
/// read) is killed and fails the test instead of hanging it.
fn rpjrt_within(args: &[&str], secs: u64) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rpjrt"))
        .args(args)
        .env_remove("RPJRT_CACHE_DIR")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rpjrt {args:?} still running after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// The rows of `crates/rpjrt/tests/fixtures/program-formats.tsv`: (file, format, kind).
fn format_table() -> Vec<(String, Option<String>, String)> {
    let text = std::fs::read_to_string(fixtures().join("program-formats.tsv")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 3, "bad table row {l:?}");
            let format = Some(f[1].to_string()).filter(|s| s != "-");
            (f[0].to_string(), format, f[2].to_string())
        })
        .collect()
}

#[test]
fn compile_and_run_take_the_formats_of_the_one_table() {
    let plugin = plugin_path("RPJRT_TEST_PLUGIN_NEW");
    let p = plugin.to_str().unwrap();
    let dir = std::env::temp_dir().join(format!("rpjrt-cli-formats-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let artifact = dir.join("mul_add.rpjrt");
    let fifo = dir.join("pipe.mlir");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let mul_add = fixtures().join("mul_add.mlir");
    let (code, out) = rpjrt_within(
        &[
            "compile",
            mul_add.to_str().unwrap(),
            "-o",
            artifact.to_str().unwrap(),
            "--plugin",
            p,
        ],
        120,
    );
    assert_eq!(code, 0, "{out}");
    // A bare serialized executable: the plugin's own bytes, made through the library (no
    // verb writes one).
    let bare = dir.join("mul_add.pjrt-executable");
    {
        let client = rpjrt::Client::from_path(&plugin).unwrap();
        let program = rpjrt::Program::read(&mul_add, None).unwrap();
        let exe = client
            .compile(&program, &rpjrt::CompileOptions::default())
            .unwrap();
        std::fs::write(&bare, exe.serialize_bare().unwrap()).unwrap();
    }
    let out_path = dir.join("out.rpjrt");
    for (file, format, kind) in format_table() {
        let path = match file.as_str() {
            "@artifact" => artifact.clone(),
            "@bare" => bare.clone(),
            "@fifo" => fifo.clone(),
            name => fixtures().join(name),
        };
        let path = path.to_str().unwrap();
        let fmt: Vec<&str> = match &format {
            Some(f) => vec!["--format", f],
            None => vec![],
        };
        let what = format!("{file} {fmt:?} ({kind})");
        let o = out_path.to_str().unwrap();
        let compile = [&["compile", path, "-o", o, "--plugin", p][..], &fmt].concat();
        let (code, out) = rpjrt_within(&compile, 120);
        let want = if kind == "mlir" || kind == "hlo" {
            0
        } else {
            2
        };
        assert_eq!(code, want, "compile {what}: {out}");
        let run = [&["run", path, "--random", "--plugin", p][..], &fmt].concat();
        let (code, out) = rpjrt_within(&run, 120);
        let want = if kind == "error" { 2 } else { 0 };
        assert_eq!(code, want, "run {what}: {out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compile_checks_the_mesh_and_partitions_with_spmd() {
    let plugin = plugin_path("RPJRT_TEST_PLUGIN_NEW");
    let p = plugin.to_str().unwrap();
    let dir = std::env::temp_dir().join(format!("rpjrt-cli-mesh-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let artifact = dir.join("sin.rpjrt");
    let a = artifact.to_str().unwrap();
    let sin = fixtures().join("shardy_sin.mlir");
    let sin = sin.to_str().unwrap();
    for bad in [["--num-partitions", "0"], ["--num-replicas", "0"]] {
        let args = [&["compile", sin, "-o", a, "--plugin", p][..], &bad[..]].concat();
        let (code, out) = rpjrt_within(&args, 60);
        assert_eq!(code, 2, "{bad:?}: {out}");
        assert!(out.contains("at least 1"), "{bad:?}: {out}");
    }
    let args = [
        "compile",
        sin,
        "-o",
        a,
        "--plugin",
        p,
        "--num-partitions",
        "2",
        "--client-option",
        "cpu_device_count=2",
    ];
    let (code, out) = rpjrt_within(&args, 120);
    assert_eq!(code, 0, "{out}");
    // The artifact runs on two devices, one shard of f32[8,4] each.
    let options = rpjrt::ClientOptions::new().set("cpu_device_count", 2i64);
    let client = rpjrt::Client::new(&rpjrt::Plugin::load(&plugin).unwrap(), &options).unwrap();
    let exe = client
        .load(&std::fs::read(&artifact).unwrap(), None)
        .unwrap();
    assert_eq!(exe.num_partitions(), 2);
    let devices = exe.addressable_devices().unwrap();
    assert_eq!(devices.len(), 2);
    let args: Vec<Vec<rpjrt::Buffer>> = devices
        .iter()
        .map(|d| vec![client.buffer_from_slice(&[0.5f32; 16], &[4, 4], d).unwrap()])
        .collect();
    let refs: Vec<Vec<&rpjrt::Buffer>> = args.iter().map(|a| a.iter().collect()).collect();
    let outs = exe.execute_sharded(&refs).unwrap();
    assert_eq!(outs.len(), 2);
    for o in &outs {
        let v = o[0].to_vec_of::<f32>().unwrap();
        assert_eq!(v.len(), 16);
        assert!(
            v.iter().all(|x| (x - 2.0 * 0.5f32.sin()).abs() < 1e-5),
            "{v:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
