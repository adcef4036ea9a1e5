//! Sharded arrays on both CPU plugins: host arrays split by a spec, run as SPMD programs,
//! put back together, and specs checked against the shardings the program was compiled
//! with.

#[path = "../../rpjrt/tests/common/mod.rs"]
mod common;

use common::*;
use rpjrt::{ClientOptions, CompileOptions, ElementType, Program};
use rpjrt_mesh::{assemble, check_spec, split, HostShard, Mesh, PartitionSpec};

/// The sine of 32 values, doubled: the input and what `shardy_sin` gives for it.
fn sin2_halves() -> (Vec<f32>, Vec<f32>) {
    let a: Vec<f32> = (0..32).map(|i| i as f32 * 0.1).collect();
    let want = a.iter().map(|v| v.sin() * 2.0).collect();
    (a, want)
}

/// Splits the f32 array `a` of `dims` by `spec`, runs `exe` (one argument, one output of
/// the same global shape) on each mesh position's shard, and assembles the output.
fn run_split(
    client: &rpjrt::Client,
    exe: &rpjrt::Executable,
    mesh: &Mesh,
    spec: &PartitionSpec,
    a: &[f32],
    dims: &[i64],
) -> Vec<f32> {
    let (shards, shard_dims) = split(&f32_bytes(a), ElementType::F32, dims, mesh, spec).unwrap();
    let devices = exe.addressable_devices().unwrap();
    assert_eq!(devices.len(), shards.len());
    let bufs: Vec<rpjrt::Buffer> = shards
        .iter()
        .zip(&devices)
        .map(|(s, d)| {
            client
                .buffer_from_host(s, ElementType::F32, &shard_dims, None, d, None)
                .unwrap()
        })
        .collect();
    let outs = exe
        .execute_sharded(&bufs.iter().map(|b| vec![b]).collect::<Vec<_>>())
        .unwrap();
    let host: Vec<Vec<u8>> = outs.iter().map(|o| o[0].to_vec().unwrap()).collect();
    let refs: Vec<HostShard> = host
        .iter()
        .map(|h| HostShard::new(h, ElementType::F32, &shard_dims))
        .collect();
    let full = assemble(&refs, ElementType::F32, dims, mesh, spec).unwrap();
    full.chunks(4)
        .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn shardy_module_runs_with_only_num_partitions_set() {
    let options = ClientOptions::new().set("cpu_device_count", 4);
    for_each_plugin_with(&options, |_, client| {
        let (a, want) = sin2_halves();
        let mesh = Mesh::new(&[("x", 2)], &[0, 1]).unwrap();
        let spec = vec![vec!["x".to_string()]];
        for name in [
            "shardy_sin.mlir",
            "shardy_sin.mlirbc",
            "shardy_sin.jax_export.mlirbc",
        ] {
            let exe = client
                .compile(
                    &Program::mlir(fixture(name)),
                    &CompileOptions {
                        num_partitions: 2,
                        ..Default::default()
                    },
                )
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(exe.addressable_devices().unwrap().len(), 2);
            let got = run_split(client, &exe, &mesh, &spec, &a, &[8, 4]);
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-5, "{name}: {got:?} vs {want:?}");
            }
        }
    });
}

/// `x * 2` over an 8 x 4 array whose rows are split along the first axis of a 2 x 2 mesh
/// and replicated along the second, for its argument and its result.
const ROWS_OVER_X: &str = r#"
func.func @main(%a: tensor<8x4xf32> {mhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"})
    -> (tensor<8x4xf32> {mhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"}) {
  %two = stablehlo.constant dense<2.0> : tensor<8x4xf32>
  %0 = stablehlo.multiply %a, %two : tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}"#;

fn spec(v: &[&[&str]]) -> PartitionSpec {
    v.iter()
        .map(|a| a.iter().map(|s| s.to_string()).collect())
        .collect()
}

#[test]
fn specs_are_checked_against_the_compiled_shardings() {
    let options = ClientOptions::new().set("cpu_device_count", 4);
    for_each_plugin_with(&options, |_, client| {
        let exe = client
            .compile(
                &Program::mlir(ROWS_OVER_X),
                &CompileOptions {
                    num_partitions: 4,
                    use_spmd_partitioning: true,
                    ..Default::default()
                },
            )
            .unwrap();
        // From the Shardings extension (0.115), or from the compiled module (0.81).
        let params = exe.parameter_shardings().unwrap();
        let outputs = exe.output_shardings().unwrap();
        assert_eq!((params.len(), outputs.len()), (1, 1));
        let mesh = Mesh::new(&[("x", 2), ("y", 2)], &[0, 1, 2, 3]).unwrap();
        for sharding in [&params[0], &outputs[0]] {
            check_spec(&mesh, &spec(&[&["x"]]), 2, sharding).unwrap();
            check_spec(&mesh, &spec(&[&["x"], &[]]), 2, sharding).unwrap();
            // The same shard shape, other blocks: partition 1 would read rows 4..8.
            let e = check_spec(&mesh, &spec(&[&["y"]]), 2, sharding).unwrap_err();
            assert!(
                e.to_string()
                    .contains("mesh position 1 (device 1) block [1, 0]"),
                "{e}"
            );
            // Not split at all, or split along both axes: the block counts differ.
            let e = check_spec(&mesh, &spec(&[]), 2, sharding).unwrap_err();
            assert!(
                e.to_string().contains("cuts dimension 0 into 1 block,"),
                "{e}"
            );
            let e = check_spec(&mesh, &spec(&[&["x", "y"]]), 2, sharding).unwrap_err();
            assert!(e.to_string().contains("into 4 blocks"), "{e}");
            let e = check_spec(&mesh, &spec(&[&[], &["x"]]), 2, sharding).unwrap_err();
            assert!(e.to_string().contains("dimension 0 into 1 block"), "{e}");
            // A value of another rank is named as such.
            let e = check_spec(&mesh, &spec(&[&["x"]]), 3, sharding).unwrap_err();
            assert!(
                e.to_string().contains("2 dimensions, but this one has 3"),
                "{e}"
            );
        }
        // The spec that passes is the one that gives the right answer.
        let a: Vec<f32> = (0..32).map(|i| i as f32).collect();
        let sp = spec(&[&["x"]]);
        let got = run_split(client, &exe, &mesh, &sp, &a, &[8, 4]);
        assert_eq!(got, a.iter().map(|v| v * 2.0).collect::<Vec<_>>());
    });
}
