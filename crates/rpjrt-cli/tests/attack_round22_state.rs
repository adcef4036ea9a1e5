//! Round 22 (state) of the CLI's attack tests: `rpjrt run ARTIFACT` runs a single-device
//! artifact on the device it was compiled for when `--device` is not given (it put the
//! inputs on the first device and failed with advice a CLI user cannot follow), moves it
//! where `--device` says, and runs a portable one on `--device` or the first device.

use std::path::{Path, PathBuf};

mod common;

use common::{new, old, rpjrt, run, tmpdir};
use rpjrt::{Client, ClientOptions, CompileOptions, Plugin, Program};

const ADD: &str = "func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}";

/// Writes `ADD` compiled with `options` on a four-device client of `plugin` into `dir`.
fn artifact(plugin: &Path, options: &CompileOptions, dir: &Path, name: &str) -> PathBuf {
    let p = Plugin::load(plugin).unwrap();
    let c = Client::new(&p, &ClientOptions::new().set("cpu_device_count", 4i64)).unwrap();
    let exe = c.compile(&Program::mlir(ADD), options).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, exe.serialize().unwrap()).unwrap();
    path
}

/// `rpjrt run ART --json` on a four-device client with `extra` arguments: the exit code,
/// and the device and output of a successful run (else the error text).
fn run_artifact(plugin: &Path, art: &Path, extra: &[&str]) -> (i32, Result<(i64, String), String>) {
    let (code, out, err) = run(rpjrt()
        .arg("run")
        .arg(art)
        .arg("--plugin")
        .arg(plugin)
        .args([
            "-o",
            "cpu_device_count=4",
            "-i",
            "0=[0,1,2,3]:f32",
            "-i",
            "1=[1,1,1,1]:f32",
        ])
        .arg("--json")
        .args(extra)
        // The cache directory remembers the plugin's build: one process hashes the library.
        .env("RPJRT_CACHE_DIR", art.with_file_name("cache")));
    if code != 0 {
        return (code, Err(err));
    }
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let device = v["device"].as_i64().unwrap();
    (code, Ok((device, v["outputs"][0]["data"].to_string())))
}

#[test]
fn an_artifact_runs_on_its_own_device_unless_told_otherwise() {
    let dir = tmpdir("r22-artifact-device");
    for plugin in [old(), new()] {
        let on2 = CompileOptions::default().on_device(2).unwrap();
        let art = artifact(&plugin, &on2, &dir, "dev2.rpjrt");
        let sum = "[1.0,2.0,3.0,4.0]".to_string();
        // No --device: the artifact's own device, where the inputs now go.
        assert_eq!(
            run_artifact(&plugin, &art, &[]),
            (0, Ok((2, sum.clone()))),
            "{}",
            plugin.display()
        );
        assert_eq!(
            run_artifact(&plugin, &art, &["--device", "2"]),
            (0, Ok((2, sum.clone())))
        );
        // Another device: the artifact is placed there at load.
        for d in ["0", "1", "3"] {
            let got = run_artifact(&plugin, &art, &["--device", d]);
            assert_eq!(
                got,
                (0, Ok((d.parse().unwrap(), sum.clone()))),
                "--device {d}"
            );
        }
        // A device the client lacks is refused as before.
        let (code, got) = run_artifact(&plugin, &art, &["--device", "7"]);
        assert_eq!(code, 2, "{got:?}");
        assert!(got.unwrap_err().contains("--device 7"));

        // A portable artifact: --device, or the first device.
        let portable = CompileOptions {
            portable: true,
            ..Default::default()
        };
        let art = artifact(&plugin, &portable, &dir, "portable.rpjrt");
        assert_eq!(run_artifact(&plugin, &art, &[]), (0, Ok((0, sum.clone()))));
        assert_eq!(
            run_artifact(&plugin, &art, &["--device", "3"]),
            (0, Ok((3, sum.clone())))
        );

        // One compiled for two devices is refused as `rpjrt run` refuses it without
        // --device, not with the load overrides --device made.
        let art = artifact(
            &plugin,
            &CompileOptions::for_mesh(2, 1).unwrap(),
            &dir,
            "two.rpjrt",
        );
        for extra in [&[][..], &["--device", "1"][..]] {
            let (code, got) = run_artifact(&plugin, &art, extra);
            let err = got.unwrap_err();
            assert_eq!(code, 2, "{extra:?}: {err}");
            assert!(err.contains("runs on 2 devices"), "{extra:?}: {err}");
            assert!(!err.contains("overrides"), "{extra:?}: {err}");
        }

        // One compiled for the first device stays there.
        let art = artifact(&plugin, &CompileOptions::default(), &dir, "default.rpjrt");
        assert_eq!(run_artifact(&plugin, &art, &[]), (0, Ok((0, sum.clone()))));
    }
}
