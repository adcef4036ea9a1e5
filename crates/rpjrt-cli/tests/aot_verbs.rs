//! `rpjrt compile` and `rpjrt cache` on both real CPU plugins (paths from the environment
//! or `.deps/plugins.env`, as `scripts/setup.sh` writes them; missing plugins fail).

use std::path::{Path, PathBuf};
use std::process::Command;

fn plugin_path(var: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    let env = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.deps/plugins.env");
    let text = std::fs::read_to_string(&env)
        .unwrap_or_else(|e| panic!("{var} unset and {} unreadable ({e})", env.display()));
    text.lines()
        .find_map(|l| l.strip_prefix(var)?.strip_prefix('='))
        .map(|v| PathBuf::from(v.trim().trim_matches('"')))
        .unwrap_or_else(|| panic!("no {var} in {}", env.display()))
}

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
    let program =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../rpjrt/tests/fixtures/mlp_train_step.mlir");
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
    let program =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../rpjrt/tests/fixtures/shardy_sin.mlir");
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
        assert_eq!(
            exe["output_layouts"],
            serde_json::json!(["[1, 0]"]),
            "{out}"
        );
        let (ok, text, err) = rpjrt(&args);
        assert!(ok, "{text}{err}");
        if var.ends_with("NEW") {
            for k in ["parameter_shardings", "output_shardings"] {
                assert_eq!(exe[k], serde_json::json!(["{devices=[2,1]<=[2]}"]), "{out}");
            }
            assert!(
                text.contains("parameter_shardings: {devices=[2,1]<=[2]}"),
                "{text}"
            );
        } else {
            let why = exe["parameter_shardings"]["unsupported"].as_str().unwrap();
            assert!(why.contains("Shardings"), "{out}");
            assert!(
                text.contains("parameter_shardings: not available ("),
                "{text}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
