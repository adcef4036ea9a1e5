//! Compile once, on both real CPU plugins: serialized executables in rpjrt's envelope,
//! refusals of foreign, damaged and truncated artifacts, introspection, StableHLO version
//! windows and topologies. The compile cache has its own file (`compile_cache.rs`).

mod common;

use common::*;
use rpjrt::{
    artifact_version, Artifact, Client, ClientOptions, CompileOptions, Error, Plugin, Program,
    StablehloVersion,
};

fn run_mul_add_on(exe: &rpjrt::Executable, c: &Client) -> Vec<f32> {
    let d = c.default_device().unwrap();
    let a: Vec<f32> = (0..8).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..8).map(|i| 3.0 - i as f32).collect();
    let xa = c.buffer_from_slice(&a, &[8], &d).unwrap();
    let xb = c.buffer_from_slice(&b, &[8], &d).unwrap();
    exe.execute(&[&xa, &xb]).unwrap()[0]
        .to_vec_of::<f32>()
        .unwrap()
}

fn serialized_mul_add(c: &Client) -> Vec<u8> {
    compile(c, &mul_add()).serialize().unwrap()
}

#[test]
fn serialize_then_load_gives_identical_results() {
    for_each_plugin(|p, c| {
        let exe = compile(c, &mul_add());
        let expected = run_mul_add_on(&exe, c);
        let bytes = exe.serialize().unwrap();
        assert!(rpjrt::is_artifact(&bytes));
        let art = Artifact::decode(&bytes).unwrap();
        assert_eq!(art.target.pjrt_version, p.version().to_string());
        assert_eq!(art.target.platform_name, "cpu");
        assert_eq!(art.target.device_kind, "cpu");
        assert_eq!(art.target.device_count, c.devices().unwrap().len());
        assert!(!art.compile_options.is_empty());
        let loaded = c.load(&bytes, None).unwrap();
        assert_eq!(run_mul_add_on(&loaded, c), expected);
        assert_eq!(loaded.outputs(), exe.outputs());
        // Parameter types are read from the plugin (at first need), and checked as usual.
        assert_eq!(loaded.parameters(), exe.parameters());
        assert!(loaded.parameters().is_some());
        let d = c.default_device().unwrap();
        let short = c.buffer_from_slice(&[1.0f32; 4], &[4], &d).unwrap();
        expect_err(loaded.execute(&[&short, &short]), &["expects float32[8]"]);
        // A second client of the same plugin is the same target.
        let c2 = Client::new(p, &ClientOptions::new()).unwrap();
        assert_eq!(
            run_mul_add_on(&c2.load(&bytes, None).unwrap(), &c2),
            expected
        );
    });
}

#[test]
fn bare_blobs_load_explicitly() {
    for_each_plugin(|_, c| {
        let exe = compile(c, &mul_add());
        let expected = run_mul_add_on(&exe, c);
        let bare = exe.serialize_bare().unwrap();
        assert!(!rpjrt::is_artifact(&bare));
        let loaded = c.load_bare(&bare).unwrap();
        assert_eq!(run_mul_add_on(&loaded, c), expected);
        // The envelope-checking loader refuses bare blobs, and the other way round.
        expect_err(c.load(&bare, None), &["not an rpjrt artifact", "load_bare"]);
        expect_err(c.load_bare(&exe.serialize().unwrap()), &["load()"]);
        expect_err(c.load_bare(&[]), &["empty"]);
    });
}

#[test]
fn loading_with_compile_option_overrides() {
    for_each_plugin(|_, c| {
        let bytes = serialized_mul_add(c);
        let exe = c.load(&bytes, Some(&CompileOptions::default())).unwrap();
        let fresh = compile(c, &mul_add());
        assert_eq!(run_mul_add_on(&exe, c), run_mul_add_on(&fresh, c));
        // Overrides are checked like compile options before the plugin sees them.
        let bad = CompileOptions {
            num_replicas: 0,
            ..Default::default()
        };
        expect_err(c.load(&bytes, Some(&bad)), &["num_replicas"]);
    });
}

#[test]
fn a_loaded_executable_serializes_to_what_runs_again() {
    // A CPU plugin's own serialization of a loaded executable leaves out the compiled code:
    // the artifact loaded and then failed at its first run. Every way of loading keeps the
    // bytes it loaded from, and every way of serializing gives bytes that run.
    for_each_plugin(|_, c| {
        let exe = compile(c, &mul_add());
        let expected = run_mul_add_on(&exe, c);
        let first = exe.serialize().unwrap();
        let blob = Artifact::decode(&first).unwrap().blob;
        let loads: Vec<(&str, rpjrt::Executable)> = vec![
            ("load", c.load(&first, None).unwrap()),
            (
                "load with overrides",
                c.load(&first, Some(&CompileOptions::default())).unwrap(),
            ),
            ("load_bare", c.load_bare(&blob).unwrap()),
        ];
        for (how, loaded) in loads {
            assert!(loaded.serialize_bare().unwrap() == blob, "{how}");
            let mut again = loaded;
            // Three generations: each loads what the previous one serialized.
            for generation in 0..3 {
                let bytes = again.serialize().unwrap();
                again = c.load(&bytes, None).unwrap();
                assert_eq!(run_mul_add_on(&again, c), expected, "{how}, {generation}");
                let bare = c.load_bare(&again.serialize_bare().unwrap()).unwrap();
                assert_eq!(run_mul_add_on(&bare, c), expected, "{how}, {generation}");
            }
        }
    });
}

/// Overrides that the plugins abort the process on (a failed XLA CHECK for a
/// `device_ordinal` below -1) or that name what the client does not have: every one must
/// be refused by the same validation compile options get.
fn bad_overrides() -> Vec<(&'static str, CompileOptions)> {
    let with = |f: &dyn Fn(&mut CompileOptions)| {
        let mut o = CompileOptions::default();
        f(&mut o);
        o
    };
    vec![
        ("ordinal -2", with(&|o| o.device_ordinal = -2)),
        ("ordinal min", with(&|o| o.device_ordinal = i64::MIN)),
        ("ordinal 99", with(&|o| o.device_ordinal = 99)),
        ("replicas 0", with(&|o| o.num_replicas = 0)),
        ("partitions 0", with(&|o| o.num_partitions = 0)),
        ("replicas 1000", with(&|o| o.num_replicas = 1000)),
        (
            "assignment 7",
            with(&|o| o.device_assignment = Some(vec![vec![7]])),
        ),
        (
            "assignment shape",
            with(&|o| o.device_assignment = Some(vec![vec![0], vec![0]])),
        ),
    ]
}

const OVERRIDE_CHILD: &str = "RPJRT_AOT_OVERRIDE_CHILD";

/// The child of `bad_overrides_are_refused_not_aborted` (does nothing unless
/// `RPJRT_AOT_OVERRIDE_CHILD` names a plugin): loads with each bad override and prints
/// what happened, so that an abort kills only this process.
#[test]
fn override_child() {
    let Ok(which) = std::env::var(OVERRIDE_CHILD) else {
        return;
    };
    let w = if which == "old" {
        Which::Old
    } else {
        Which::New
    };
    let c = Client::new(&plugin(w), &ClientOptions::new()).unwrap();
    let bytes = serialized_mul_add(&c);
    for (label, o) in bad_overrides() {
        match c.load(&bytes, Some(&o)) {
            Ok(_) => println!("{label}: loaded"),
            Err(e) => println!("{label}: refused: {e}"),
        }
    }
}

#[test]
fn bad_overrides_are_refused_not_aborted() {
    for which in ["old", "new"] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "override_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(OVERRIDE_CHILD, which)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{which}: the child died ({:?}): {text}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        for (label, _) in bad_overrides() {
            assert!(
                text.contains(&format!("{label}: refused: invalid argument")),
                "{which}: {label}: {text}"
            );
        }
        assert!(
            text.contains("ordinal -2: refused: invalid argument: device_ordinal -2"),
            "{text}"
        );
    }
}

#[test]
fn artifacts_from_the_other_plugin_are_refused_naming_both_sides() {
    let old = Client::new(&plugin(Which::Old), &ClientOptions::new()).unwrap();
    let new = Client::new(&plugin(Which::New), &ClientOptions::new()).unwrap();
    let from_old = serialized_mul_add(&old);
    let from_new = serialized_mul_add(&new);
    let (ov, nv) = (
        old.plugin().version().to_string(),
        new.plugin().version().to_string(),
    );
    let e = expect_err(new.load(&from_old, None), &["pjrt_version", &ov, &nv]);
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    expect_err(old.load(&from_new, None), &["pjrt_version", &nv, &ov]);
    // Same plugin, different device count: also another target.
    let opts = ClientOptions::new().set("cpu_device_count", 2i64);
    let two = Client::new(&plugin(Which::New), &opts).unwrap();
    expect_err(two.load(&from_new, None), &["device_count", "2"]);
}

#[test]
fn damaged_and_truncated_artifacts_are_refused_before_the_plugin() {
    for_each_plugin(|_, c| {
        let bytes = serialized_mul_add(c);
        // A flipped byte anywhere: in the blob, in the header, in the checksum.
        for at in [bytes.len() / 2, 30, bytes.len() - 1] {
            let mut b = bytes.clone();
            b[at] ^= 0x40;
            expect_err(c.load(&b, None), &["corrupt", "checksum"]);
        }
        // Truncated at several points.
        for len in [bytes.len() - 1, bytes.len() / 2, 40, 9] {
            expect_err(c.load(&bytes[..len], None), &["truncated"]);
        }
        let mut longer = bytes.clone();
        longer.push(0);
        expect_err(c.load(&longer, None), &["trailing"]);
        let mut b = bytes.clone();
        b[8] = 9;
        expect_err(c.load(&b, None), &["envelope version 9"]);
        expect_err(c.load(b"RPJ", None), &["not an rpjrt artifact"]);
        expect_err(c.load(&[], None), &["not an rpjrt artifact"]);
    });
}

#[test]
fn introspection_reports_values_or_unsupported() {
    for_each_plugin(|p, c| {
        let exe = compile(c, &mul_add());
        let old = is_old(p);
        let unsupported = |r: Result<String, Error>, what: &str| match r {
            Err(Error::Unsupported { .. }) => {}
            other => panic!("{what}: expected Unsupported, got {other:?}"),
        };

        let (format, program) = exe.optimized_program().unwrap();
        assert!(!program.is_empty() && !format.is_empty());
        unsupported(exe.optimized_hlo_text(), "optimized_hlo_text");

        if old {
            // a * b + 1 over f32[8]: 16 floating-point operations.
            let cost = exe.cost_analysis().unwrap();
            let flops = cost
                .iter()
                .find(|(k, _)| k == "flops")
                .map(|(_, v)| v.clone());
            assert_eq!(flops, Some(rpjrt::Value::Float(16.0)), "{cost:?}");
        } else {
            // The 0.115 plugin answers UNIMPLEMENTED.
            unsupported(exe.cost_analysis().map(|_| String::new()), "cost_analysis");
        }

        let stats = exe.compiled_memory_stats().unwrap();
        assert_eq!(stats.argument_size_in_bytes, 64, "{stats:?}");
        assert_eq!(stats.output_size_in_bytes, 32, "{stats:?}");
        assert!(stats.peak_memory_in_bytes.is_some());
        assert_eq!(stats.total_size_in_bytes.is_some(), !old, "{stats:?}");

        if old {
            // The 0.81 plugin answers UNIMPLEMENTED.
            unsupported(
                exe.output_memory_kinds().map(|k| k.join(",")),
                "output_memory_kinds",
            );
        } else {
            assert_eq!(exe.output_memory_kinds().unwrap(), vec!["device"]);
        }

        let out_layouts = exe.output_layouts().unwrap();
        assert_eq!(out_layouts.len(), 1);
        assert_eq!(out_layouts[0].minor_to_major, Some(vec![0]));
        if old {
            // The 0.81 Layouts extension is 72 bytes: it ends before the parameter slot.
            let e = exe.parameter_layouts().unwrap_err();
            assert!(
                matches!(&e, Error::Unsupported { what, .. } if what.contains("72 bytes")),
                "{e:?}"
            );
        } else {
            let pl = exe.parameter_layouts().unwrap();
            assert_eq!(pl.len(), 2);
            assert_eq!(pl[0].minor_to_major, Some(vec![0]));
        }
        // An unsharded single-device program has no shardings: the 0.115 plugin's
        // extension returns empty lists, and the 0.81 plugin's compiled module records
        // none (see the SPMD test for real ones).
        assert_eq!(exe.parameter_shardings().unwrap(), vec![]);
        assert_eq!(exe.output_shardings().unwrap(), vec![]);

        assert!(!exe.fingerprint().unwrap().is_empty());
        // Compile options: the plugin's (0.87+) or the ones rpjrt recorded.
        let opts = exe.compile_options_bytes().unwrap();
        assert!(!opts.is_empty());
        let loaded = c.load(&exe.serialize().unwrap(), None).unwrap();
        assert!(!loaded.compile_options_bytes().unwrap().is_empty());
    });
}

#[test]
fn shardings_of_a_two_device_spmd_program_are_decoded() {
    // shardy_sin.mlir: JAX-lowered sin(x) * 2 over f32[8,4], split along its first axis over
    // a 2-device mesh; parameter and result carry that sharding.
    let options = ClientOptions::new().set("cpu_device_count", 4);
    for_each_plugin_with(&options, |p, c| {
        let exe = c
            .compile(
                &Program::mlir(fixture("shardy_sin.mlir")),
                &CompileOptions::for_mesh(1, 2).unwrap(),
            )
            .unwrap();
        // The 0.81 plugin has no Shardings extension: its answers come from the compiled
        // module's record, and are the same.
        let params = exe.parameter_shardings().unwrap();
        let outs = exe.output_shardings().unwrap();
        assert_eq!(params.len(), 1, "{params:?}");
        assert_eq!(outs.len(), 1, "{outs:?}");
        for s in params.iter().chain(&outs) {
            assert_eq!(s.kind, rpjrt::ShardingType::Other, "{s:?}");
            assert_eq!(s.tile_assignment_dimensions, vec![2, 1], "{s:?}");
            assert_eq!(s.devices(), vec![0, 1], "{s:?}");
            assert_eq!(s.to_string(), "{devices=[2,1]<=[2]}");
            assert!(!s.is_replicated());
        }
        // The plugin's raw bytes (0.115), where it has them, decode to the same value.
        if !is_old(p) {
            let raw = exe.parameter_shardings_bytes().unwrap();
            assert_eq!(rpjrt::OpSharding::decode(&raw[0]).unwrap(), params[0]);
        } else {
            let e = exe.parameter_shardings_bytes().unwrap_err();
            assert!(
                matches!(&e, Error::Unsupported { what, .. } if what.contains("Shardings")),
                "{e:?}"
            );
        }
    });
}

#[test]
fn stablehlo_versions_and_targets() {
    for_each_plugin_only(|p| {
        let (cur, min) = p
            .stablehlo_versions()
            .expect("both plugins report versions");
        assert!(min < cur);
        let listed = p.stablehlo_current_version().unwrap();
        assert_eq!(
            cur.to_string(),
            listed
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(".")
        );
        assert_eq!(p.stablehlo_target(), Some(cur.to_string()));

        let exported = fixture("mul_add.jax_export.mlirbc");
        let written: StablehloVersion = artifact_version(&exported).unwrap();
        let fit = p.stablehlo_fit(&exported);
        assert_eq!(fit.artifact, Some(written));
        assert_eq!(fit.fits, written >= min && written <= cur);
        // Newer minor versions of the same major still go to the plugin, which reads them.
        assert!(!fit.refused);
        // Text has no version and always fits.
        let text_fit = p.stablehlo_fit(mul_add().as_bytes());
        assert_eq!(text_fit.artifact, None);
        assert!(text_fit.fits);
    });
}

/// A portable-artifact header claiming `version`, followed by bytes no plugin could parse:
/// if rpjrt did not refuse it first, the error would be the plugin's parse error.
fn fake_artifact(version: &str) -> Vec<u8> {
    let mut b = b"ML\xefR\x0dStableHLO_v".to_vec();
    b.extend_from_slice(version.as_bytes());
    b.push(0);
    b.extend_from_slice(&[0xff; 32]);
    b
}

#[test]
fn programs_outside_the_window_are_refused_before_compile() {
    for_each_plugin(|p, c| {
        let (cur, min) = p.stablehlo_versions().unwrap();
        let e = expect_err(
            c.compile(&Program::mlir(fake_artifact("0.1.0")), &Default::default()),
            &["0.1.0", &min.to_string(), &cur.to_string()],
        );
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        expect_err(
            c.compile(&Program::mlir(fake_artifact("99.0.0")), &Default::default()),
            &["99.0.0", &cur.to_string(), "stablehlo_target"],
        );
    });
}

#[test]
fn topologies_and_compiling_without_devices() {
    for_each_plugin(|p, c| {
        // Both CPU plugins describe their client's devices.
        let t = c.topology().unwrap();
        assert_eq!(t.platform_name(), "cpu");
        let ids: Vec<i32> = c.devices().unwrap().iter().map(|d| d.id()).collect();
        assert_eq!(t.devices().iter().map(|d| d.0).collect::<Vec<_>>(), ids);
        assert!(t.devices().iter().all(|d| d.1 == "cpu"));
        assert!(!t.serialize().unwrap().is_empty());
        assert_eq!(t.target(), rpjrt::ArtifactTarget::of_client(c).unwrap());
        // Compiling for the topology: the 0.115 plugin does it (and a client loads the
        // artifact later); the 0.81 plugin has no compiler behind the entry.
        let program = Program::mlir(mul_add());
        match t.compile(&program, &CompileOptions::default()) {
            Ok(artifact) => {
                assert!(!is_old(p));
                let exe = c.load(&artifact, None).unwrap();
                assert_eq!(
                    run_mul_add_on(&exe, c),
                    run_mul_add_on(&compile(c, &mul_add()), c)
                );
            }
            Err(Error::Unsupported { what, .. }) => {
                assert!(is_old(p), "{what}");
                assert!(what.contains("compiling for a topology"), "{what}");
            }
            Err(e) => panic!("topology compile: {e:?}"),
        }
        // Neither creates a topology without a client.
        match Plugin::topology(p, "cpu") {
            Err(Error::Unsupported { what, .. }) => {
                assert!(what.contains("UNIMPLEMENTED"), "{what}")
            }
            other => panic!("plugin topology: {other:?}"),
        }
        // A client's topology follows the client's close(), as every object made from it.
        c.close().unwrap();
        for e in [
            t.compile(&program, &CompileOptions::default()).unwrap_err(),
            t.serialize().unwrap_err(),
        ] {
            assert!(matches!(e, Error::Closed("topology")), "{e:?}");
        }
    });
}
