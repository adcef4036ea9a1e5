//! rpjrt against the two real CPU plugins: xla-cpu-pjrt (PJRT 0.81) and lammps-jax-pjrt-cpu
//! (PJRT 0.115). Every test runs on both; a failure names the plugin it failed on.
//!
//! `scripts/setup.sh` installs the plugins; without them these tests fail (they never skip).

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use rpjrt::{
    pack_sub_byte, ApiVersion, ArraySpec, Client, ClientOptions, CompileOptions, ElementType,
    Error, ExecuteOptions, HostBytes, Plugin, Program, Value,
};

const ADD: &str = "func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}
";

const TWO_OUTPUTS: &str =
    "func.func public @main(%a: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<i32>) {
  %0 = stablehlo.negate %a : tensor<2x3xf32>
  %1 = stablehlo.constant dense<7> : tensor<i32>
  return %0, %1 : tensor<2x3xf32>, tensor<i32>
}
";

const SCALAR_ADD: &str = "func.func public @main(%a: tensor<f64>, %b: tensor<f64>) -> tensor<f64> {
  %0 = stablehlo.add %a, %b : tensor<f64>
  return %0 : tensor<f64>
}
";

const EMPTY_ADD: &str = "func.func public @main(%a: tensor<3x0xf32>) -> tensor<3x0xf32> {
  %0 = stablehlo.add %a, %a : tensor<3x0xf32>
  return %0 : tensor<3x0xf32>
}
";

fn v(minor: i32) -> ApiVersion {
    ApiVersion { major: 0, minor }
}

fn eight() -> Vec<f32> {
    (0..8).map(|i| i as f32).collect()
}

/// `a * b + 1`, what mul_add.mlir computes.
fn mul_add_expected(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.iter().zip(b).map(|(x, y)| x * y + 1.0).collect()
}

// ------------------------------------------------------------------------------- plugin

#[test]
fn plugin_version_and_table_size() {
    for_each_plugin_only(|p| {
        let (version, size, slots) = if is_old(p) {
            (v(81), 984, 118)
        } else {
            (v(115), 1144, 138)
        };
        assert_eq!(p.version(), version);
        assert_eq!(p.table_size(), size);
        assert_eq!(p.table_slots(), slots);
        assert_eq!(Plugin::rpjrt_layout_version(), v(114));
        let dbg = format!("{p:?}");
        assert!(
            dbg.contains(&format!("PJRT {version}")) && dbg.contains(&format!("{slots} slots")),
            "{dbg}"
        );
    });
}

#[test]
fn plugin_attributes() {
    for_each_plugin_only(|p| {
        assert_eq!(p.xla_version(), Some(2));
        let current = if is_old(p) { [1, 13, 3] } else { [1, 20, 0] };
        assert_eq!(p.stablehlo_current_version(), Some(current.to_vec()));
        assert_eq!(p.stablehlo_minimum_version(), Some(vec![0, 9, 0]));
        assert_eq!(p.attribute("xla_version"), Some(&Value::Int64(2)));
        assert_eq!(p.attribute("no_such_attribute"), None);
        let names: Vec<&str> = p.attributes().iter().map(|(n, _)| n.as_str()).collect();
        for n in [
            "xla_version",
            "stablehlo_current_version",
            "stablehlo_minimum_version",
        ] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
    });
}

#[test]
fn plugin_extensions() {
    for_each_plugin_only(|p| {
        let ext = p.extensions();
        let ffi = ext.ffi().expect("FFI extension");
        assert_eq!((ffi.type_id, ffi.name.as_str()), (5, "FFI"));
        let layouts = ext.layouts().expect("Layouts extension");
        assert_eq!(layouts.name, "Layouts");
        assert_eq!(layouts.struct_size, if is_old(p) { 72 } else { 80 });
        let md = ext.memory_descriptions().expect("MemoryDescriptions");
        assert_eq!(md.name, "MemoryDescriptions");
        assert!(ext.phase_compile().is_some());
        // Only the newer plugin has these two.
        assert_eq!(ext.shardings().is_some(), !is_old(p));
        assert_eq!(ext.xla_transform().is_some(), !is_old(p));
        assert!(ext.gpu_custom_call().is_none() && ext.triton().is_none());
        assert_eq!(ext.all().len(), if is_old(p) { 4 } else { 6 });
        assert_eq!(ext.get(5), Some(ffi));
        assert!(ext.all().iter().all(|e| e.struct_size > 0));
    });
}

#[test]
fn plugin_load_twice_returns_the_same_plugin() {
    for which in Which::BOTH {
        let path = plugin_path(which);
        let a = Plugin::load(&path).unwrap();
        let b = Plugin::load(&path).unwrap();
        // A different spelling of the same file is the same library too.
        let dir = path.parent().unwrap();
        let spelled = dir.join(".").join(path.file_name().unwrap());
        let c = Plugin::load(&spelled).unwrap();
        assert_eq!(a.path(), b.path());
        assert_eq!(a.path(), c.path());
        assert_eq!(a.path(), std::fs::canonicalize(&path).unwrap());
        assert_eq!(format!("{a:?}"), format!("{c:?}"));
        // Clients of either handle work side by side.
        let c1 = Client::new(&a, &ClientOptions::new()).unwrap();
        let c2 = Client::new(&c, &ClientOptions::new()).unwrap();
        assert_eq!(c1.devices().unwrap().len(), c2.devices().unwrap().len());
    }
}

#[test]
fn plugin_has_entry_follows_the_version() {
    for_each_plugin_only(|p| {
        assert!(p.has_entry("PJRT_Client_Compile"));
        assert!(p.has_entry("PJRT_Buffer_CopyToMemory"));
        // Added after 0.81.
        assert_eq!(
            p.has_entry("PJRT_Executable_ParameterMemoryKinds"),
            !is_old(p)
        );
        assert!(!p.has_entry("PJRT_No_Such_Entry"));
    });
}

// ------------------------------------------------------------------------------- client

#[test]
fn client_create_with_typed_options() {
    let opts = ClientOptions::new().set("cpu_device_count", 2);
    assert_eq!(
        opts.entries(),
        &[("cpu_device_count".to_string(), Value::Int64(2))]
    );
    for_each_plugin_with(&opts, |_, c| {
        assert_eq!(c.devices().unwrap().len(), 2);
        assert_eq!(c.addressable_devices().unwrap().len(), 2);
        assert_eq!(c.addressable_memories().unwrap().len(), 6);
    });
    // Setting an option twice keeps the last value.
    let opts: ClientOptions = [("cpu_device_count", 1), ("cpu_device_count", 3)]
        .into_iter()
        .collect();
    for_each_plugin_with(&opts, |_, c| assert_eq!(c.devices().unwrap().len(), 3));
}

#[test]
fn client_unknown_option() {
    for_each_plugin_only(|p| {
        let r = Client::new(p, &ClientOptions::new().set("bogus_option", 3));
        if is_old(p) {
            // The 0.81 plugin ignores options it does not know.
            let c = r.expect("the 0.81 plugin accepts unknown options");
            assert_eq!(c.devices().unwrap().len(), 4);
        } else {
            let e = expect_err(
                r,
                &[
                    "PJRT_Client_Create",
                    "INVALID_ARGUMENT",
                    "Unexpected option name",
                    "bogus_option",
                ],
            );
            assert_eq!(e.code(), rpjrt::Code::InvalidArgument);
            assert_eq!(e.entry(), Some("PJRT_Client_Create"));
        }
    });
}

#[test]
fn client_platform_and_process() {
    for_each_plugin(|p, c| {
        assert_eq!(c.platform_name().unwrap(), "cpu");
        assert!(!c.platform_version().unwrap().is_empty());
        assert_eq!(c.process_index().unwrap(), 0);
        assert_eq!(c.plugin().path(), p.path());
        assert!(!c.is_closed());
        let dbg = format!("{c:?}");
        assert!(
            dbg.contains("platform=cpu") && dbg.contains("devices=4"),
            "{dbg}"
        );
        // Client::from_path is load + new with default options.
        let c2 = Client::from_path(p.path()).unwrap();
        assert_eq!(c2.devices().unwrap().len(), 4);
    });
}

#[test]
fn client_devices() {
    for_each_plugin(|p, c| {
        let devices = c.devices().unwrap();
        assert_eq!(devices.len(), 4);
        assert_eq!(c.addressable_devices().unwrap(), devices);
        assert_eq!(c.default_device().unwrap(), devices[0]);
        for (i, d) in devices.iter().enumerate() {
            let i = i as i32;
            assert_eq!(d.id(), i);
            assert_eq!(d.kind(), "cpu");
            assert_eq!(d.process_index(), 0);
            assert_eq!(d.local_hardware_id(), i);
            assert!(d.is_addressable());
            // Neither CPU plugin reports device attributes.
            assert!(d.attributes().is_empty(), "{:?}", d.attributes());
            let dbg = if is_old(p) {
                format!("TFRT_CPU_{i}")
            } else {
                format!("cpu:{i}")
            };
            assert_eq!(d.debug_string(), dbg);
            assert_eq!(d.description(), format!("CpuDevice(id={i})"));
            assert_eq!(d.to_string(), d.description());
            assert_eq!(
                format!("{d:?}"),
                format!("Device(id={i}, kind=\"cpu\", process=0)")
            );
        }
        assert_ne!(devices[0], devices[1]);
        assert_eq!(devices[2], devices[2].clone());
    });
}

#[test]
fn client_memories() {
    for_each_plugin(|_, c| {
        let all = c.addressable_memories().unwrap();
        assert_eq!(all.len(), 12);
        for d in c.devices().unwrap() {
            let mems = d.addressable_memories().unwrap();
            let kinds: Vec<&str> = mems.iter().map(|m| m.kind()).collect();
            assert_eq!(kinds, ["device", "pinned_host", "unpinned_host"]);
            let default = d.default_memory().unwrap();
            assert_eq!(default.kind(), "device");
            assert_eq!(default, mems[0]);
            assert_eq!(d.memory_by_kind("pinned_host").unwrap(), mems[1]);
            for m in &mems {
                assert_eq!(m.addressable_by_devices().unwrap(), vec![d.clone()]);
                assert_eq!(c.lookup_memory(m.id()).unwrap(), *m);
                assert!(all.contains(m));
                assert!(!m.debug_string().is_empty());
                assert_eq!(m.to_string(), m.description());
                assert_eq!(
                    format!("{m:?}"),
                    format!("Memory(id={}, kind={:?})", m.id(), m.kind())
                );
            }
            assert!(mems[0].debug_string().contains("CpuDeviceMemory"));
            assert!(mems[1].debug_string().contains("PinnedHostMemory"));
            assert_ne!(mems[0].kind_id(), mems[1].kind_id());
            expect_err(
                d.memory_by_kind("hbm"),
                &["no memory of kind \"hbm\"", "pinned_host"],
            );
        }
        // Kind ids are per kind, not per memory.
        let d0 = c.lookup_device(0).unwrap().default_memory().unwrap();
        let d1 = c.lookup_device(1).unwrap().default_memory().unwrap();
        assert_ne!(d0, d1);
        assert_eq!(d0.kind_id(), d1.kind_id());
        expect_err(c.lookup_memory(999), &["no memory with id 999"]);
    });
}

#[test]
fn client_lookup_device() {
    for_each_plugin(|_, c| {
        let d = c.lookup_device(2).unwrap();
        assert_eq!(d.id(), 2);
        let e = expect_err(
            c.lookup_device(99),
            &["no device with id 99", "[0, 1, 2, 3]"],
        );
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        expect_err(c.lookup_device(-1), &["no device with id -1"]);
    });
}

// ------------------------------------------------------------------------------ compile

fn run_mul_add(c: &Client, program: &Program) {
    let exe = c
        .compile(program, &CompileOptions::default())
        .unwrap_or_else(|e| panic!("compiling {program:?}: {e}"));
    let d = c.default_device().unwrap();
    let a = eight();
    let b: Vec<f32> = (0..8).map(|i| 0.5 * i as f32 - 1.0).collect();
    let xa = c.buffer_from_slice(&a, &[8], &d).unwrap();
    let xb = c.buffer_from_slice(&b, &[8], &d).unwrap();
    let out = exe.execute(&[&xa, &xb]).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].to_vec_of::<f32>().unwrap(), mul_add_expected(&a, &b));
}

#[test]
fn compile_stablehlo_text() {
    for_each_plugin(|_, c| run_mul_add(c, &Program::mlir(mul_add())));
}

#[test]
fn compile_mlir_bytecode() {
    for_each_plugin(|_, c| run_mul_add(c, &Program::mlir(fixture("mul_add.mlirbc"))));
}

#[test]
fn compile_portable_artifact() {
    let bytes = fixture("mul_add.jax_export.mlirbc");
    assert!(
        bytes.windows(9).any(|w| w == b"StableHLO"),
        "not a portable artifact"
    );
    for_each_plugin(|_, c| run_mul_add(c, &Program::mlir(bytes.clone())));
}

#[test]
fn compile_hlo_proto() {
    for_each_plugin(|_, c| run_mul_add(c, &Program::hlo(fixture("mul_add.hlo.pb"))));
}

#[test]
fn executable_metadata() {
    for_each_plugin(|_, c| {
        let exe = compile(c, &mul_add());
        let f32_8 = ArraySpec {
            element_type: ElementType::F32,
            dims: vec![8],
        };
        assert_eq!(exe.name(), "main");
        assert_eq!(exe.num_outputs(), 1);
        assert_eq!(exe.outputs(), std::slice::from_ref(&f32_8));
        assert_eq!(exe.output_element_types(), vec![ElementType::F32]);
        assert_eq!(exe.output_dimensions(), vec![vec![8]]);
        assert_eq!((exe.num_replicas(), exe.num_partitions()), (1, 1));
        assert_eq!(exe.parameters(), Some(&[f32_8.clone(), f32_8][..]));
        assert_eq!(
            exe.addressable_devices().unwrap(),
            vec![c.default_device().unwrap()]
        );
        assert_eq!(
            format!("{exe:?}"),
            "Executable(main: (float32[8], float32[8]) -> (float32[8]), replicas=1, partitions=1)"
        );
        // Both plugins have fingerprints, stable for the same program; a plugin without
        // one must answer with an error, which this would report.
        match exe.fingerprint() {
            Ok(fp) => {
                assert!(!fp.is_empty());
                assert_eq!(compile(c, &mul_add()).fingerprint().unwrap(), fp);
                assert_ne!(compile(c, ADD).fingerprint().unwrap(), fp);
            }
            Err(e) => assert!(
                matches!(e.code(), rpjrt::Code::Unimplemented | rpjrt::Code::Unknown),
                "{e}"
            ),
        }

        let two = compile(c, TWO_OUTPUTS);
        assert_eq!(two.num_outputs(), 2);
        assert_eq!(
            two.output_element_types(),
            vec![ElementType::F32, ElementType::S32]
        );
        assert_eq!(two.output_dimensions(), vec![vec![2, 3], vec![]]);
        let d = c.default_device().unwrap();
        let x = c
            .buffer_from_slice(&[1f32, 2., 3., 4., 5., 6.], &[2, 3], &d)
            .unwrap();
        let out = two.execute(&[&x]).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(
            out[0].to_vec_of::<f32>().unwrap(),
            [-1., -2., -3., -4., -5., -6.]
        );
        assert_eq!(out[1].to_vec_of::<i32>().unwrap(), [7]);
        assert_eq!(out[1].dims(), &[] as &[i64]);
    });
}

// ------------------------------------------------------------------------------ buffers

/// Element types this plugin takes buffers of: all but the token and codes newer than it.
fn accepted_types(p: &Plugin) -> Vec<ElementType> {
    ElementType::ALL
        .iter()
        .copied()
        .filter(|t| *t != ElementType::Token && t.since_pjrt_minor() <= p.version().minor)
        .collect()
}

/// Host data of `n` elements of `ty` with a distinct, valid pattern.
fn sample(ty: ElementType, n: usize) -> Vec<u8> {
    if ty.is_sub_byte() {
        let max = 1usize << ty.bit_width();
        let vals: Vec<u8> = (0..n).map(|i| ((i * 5 + 1) % max) as u8).collect();
        return pack_sub_byte(ty, &vals);
    }
    let bytes = ty.dense_byte_size(n).unwrap();
    (0..bytes)
        .map(|i| match ty {
            ElementType::Pred => (i % 2) as u8,
            // Six meaningful bits, stored one per byte.
            ElementType::F6E2M3FN | ElementType::F6E3M2FN => (i * 7 % 64) as u8,
            _ => (i * 37 + 11) as u8,
        })
        .collect()
}

#[test]
fn buffer_round_trip_every_element_type() {
    for_each_plugin(|p, c| {
        let types = accepted_types(p);
        assert_eq!(types.len(), if is_old(p) { 28 } else { 32 });
        let d = c.default_device().unwrap();
        for ty in types {
            for dims in [&[2i64, 3][..], &[5], &[]] {
                let n = rpjrt::element_count(dims).unwrap();
                let data = sample(ty, n);
                let b = c
                    .buffer_from_host(&data, ty, dims, None, &d, None)
                    .unwrap_or_else(|e| panic!("{ty}{dims:?}: {e}"));
                assert_eq!(b.element_type(), ty);
                assert_eq!(b.dims(), dims);
                assert_eq!(b.element_count(), n);
                assert_eq!(b.host_size(), data.len(), "{ty}");
                let back = b.to_vec().unwrap_or_else(|e| panic!("{ty}{dims:?}: {e}"));
                assert_eq!(back, data, "{ty}{dims:?} round trip");
                if let Some(w) = ty.byte_width() {
                    assert_eq!(b.on_device_size().unwrap(), n * w, "{ty}");
                }
            }
        }
    });
}

#[test]
fn buffer_typed_slices() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        macro_rules! round_trip {
            ($($t:ty => $vals:expr),* $(,)?) => {$({
                let vals: Vec<$t> = $vals;
                let b = c.buffer_from_slice(&vals, &[vals.len() as i64], &d).unwrap();
                assert_eq!(b.to_vec_of::<$t>().unwrap(), vals, stringify!($t));
            })*};
        }
        round_trip!(
            bool => vec![true, false, false, true],
            i8 => vec![-128, -1, 0, 127],
            i16 => vec![i16::MIN, -1, 0, i16::MAX],
            i32 => vec![i32::MIN, -1, 0, i32::MAX],
            i64 => vec![i64::MIN, -1, 0, i64::MAX],
            u8 => vec![0, 1, 254, 255],
            u16 => vec![0, 1, u16::MAX - 1, u16::MAX],
            u32 => vec![0, 1, u32::MAX - 1, u32::MAX],
            u64 => vec![0, 1, u64::MAX - 1, u64::MAX],
            f32 => vec![-0.0, 1.5, f32::INFINITY, f32::MIN_POSITIVE],
            f64 => vec![-0.0, 1.5, f64::NEG_INFINITY, f64::EPSILON],
        );
        let b = c.buffer_from_slice(&[1f32, 2.0], &[2], &d).unwrap();
        expect_err(b.to_vec_of::<i32>(), &["buffer holds float32, not int32"]);
    });
}

/// Sub-byte host data is packed (lowest bits first); a program sees the intended values.
#[test]
fn buffer_sub_byte_values_reach_programs() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let cases = [
            (ElementType::S4, "i4", [0i8, 3, 6, -7, -4, -1, 2, 5]),
            (ElementType::U4, "ui4", [0, 3, 6, 9, 12, 15, 2, 5]),
            (ElementType::S2, "i2", [0, -1, -2, 1, 0, -1, -2, 1]),
            (ElementType::U2, "ui2", [0, 3, 2, 1, 0, 3, 2, 1]),
        ];
        for (ty, mlir, expected) in cases {
            let widen = format!(
                "func.func public @main(%a: tensor<8x{mlir}>) -> tensor<8xi8> {{
  %0 = stablehlo.convert %a : (tensor<8x{mlir}>) -> tensor<8xi8>
  return %0 : tensor<8xi8>
}}"
            );
            let exe = compile(c, &widen);
            let raw: Vec<u8> = (0..8u8).map(|i| i * 3).collect();
            let packed = pack_sub_byte(ty, &raw);
            assert_eq!(packed.len(), ty.dense_byte_size(8).unwrap());
            let x = c
                .buffer_from_host(&packed, ty, &[8], None, &d, None)
                .unwrap();
            let out = exe.execute(&[&x]).unwrap();
            assert_eq!(out[0].to_vec_of::<i8>().unwrap(), expected, "{ty} in");

            let narrow = format!(
                "func.func public @main(%a: tensor<8xi8>) -> tensor<8x{mlir}> {{
  %0 = stablehlo.convert %a : (tensor<8xi8>) -> tensor<8x{mlir}>
  return %0 : tensor<8x{mlir}>
}}"
            );
            let exe = compile(c, &narrow);
            let x = c.buffer_from_slice(&expected, &[8], &d).unwrap();
            let out = exe.execute(&[&x]).unwrap();
            assert_eq!(out[0].element_type(), ty);
            let unsigned: Vec<u8> = expected.iter().map(|v| *v as u8).collect();
            assert_eq!(
                out[0].to_vec().unwrap(),
                pack_sub_byte(ty, &unsigned),
                "{ty} out"
            );
        }
    });
}

#[test]
fn buffer_scalar_and_zero_size_shapes() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let s = c.buffer_from_slice(&[2.5f64], &[], &d).unwrap();
        assert_eq!(s.element_count(), 1);
        assert_eq!(s.to_vec_of::<f64>().unwrap(), [2.5]);
        assert_eq!(s.layout().unwrap(), Some(vec![]));
        let exe = compile(c, SCALAR_ADD);
        let out = exe.execute(&[&s, &s]).unwrap();
        assert_eq!(out[0].dims(), &[] as &[i64]);
        assert_eq!(out[0].to_vec_of::<f64>().unwrap(), [5.0]);

        for dims in [&[0i64][..], &[3, 0], &[0, 4, 2]] {
            let z = c
                .buffer_from_host(&[], ElementType::F32, dims, None, &d, None)
                .unwrap();
            assert_eq!(z.element_count(), 0);
            assert_eq!(z.host_size(), 0);
            assert!(z.to_vec().unwrap().is_empty());
            assert_eq!(z.on_device_size().unwrap(), 0);
            assert!(z.to_vec_of::<f32>().unwrap().is_empty());
        }
        let z = c
            .buffer_from_host(&[], ElementType::F32, &[3, 0], None, &d, None)
            .unwrap();
        let out = compile(c, EMPTY_ADD).execute(&[&z]).unwrap();
        assert_eq!(out[0].dims(), &[3, 0]);
        assert!(out[0].to_vec().unwrap().is_empty());
    });
}

#[test]
fn buffer_byte_strides() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        // [[1, 2, 3], [4, 5, 6]] stored column-major (Fortran order).
        let fortran = f32_bytes(&[1., 4., 2., 5., 3., 6.]);
        let b = c
            .buffer_from_host(&fortran, ElementType::F32, &[2, 3], Some(&[4, 8]), &d, None)
            .unwrap();
        assert_eq!(b.to_vec_of::<f32>().unwrap(), [1., 2., 3., 4., 5., 6.]);
        assert_eq!(b.layout().unwrap(), Some(vec![1, 0]));
        // Rows padded to 16 bytes.
        let padded = f32_bytes(&[1., 2., 3., -9., 4., 5., 6., -9.]);
        let b = c
            .buffer_from_host(&padded, ElementType::F32, &[2, 3], Some(&[16, 4]), &d, None)
            .unwrap();
        assert_eq!(b.to_vec_of::<f32>().unwrap(), [1., 2., 3., 4., 5., 6.]);
        // The transpose of a 3x2 row-major i16 matrix, read through strides.
        let m: Vec<u8> = [1i16, 2, 3, 4, 5, 6]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        let t = c
            .buffer_from_host(&m, ElementType::S16, &[2, 3], Some(&[2, 4]), &d, None)
            .unwrap();
        assert_eq!(t.to_vec_of::<i16>().unwrap(), [1, 3, 5, 2, 4, 6]);
        // Row-major strides are the same as none.
        let r = c
            .buffer_from_host(&m, ElementType::S16, &[3, 2], Some(&[4, 2]), &d, None)
            .unwrap();
        assert_eq!(r.to_vec_of::<i16>().unwrap(), [1, 2, 3, 4, 5, 6]);
        // A strided computation input gives the right result.
        let exe = compile(c, TWO_OUTPUTS);
        let x = c
            .buffer_from_host(&fortran, ElementType::F32, &[2, 3], Some(&[4, 8]), &d, None)
            .unwrap();
        let out = exe.execute(&[&x]).unwrap();
        assert_eq!(
            out[0].to_vec_of::<f32>().unwrap(),
            [-1., -2., -3., -4., -5., -6.]
        );
    });
}

#[test]
fn buffer_to_host_into_a_slice() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let b = c.buffer_from_slice(&eight(), &[8], &d).unwrap();
        let mut dst = vec![0u8; 32];
        b.to_host(&mut dst).unwrap();
        assert_eq!(dst, f32_bytes(&eight()));
        assert_eq!(b.to_vec().unwrap(), dst);
        let mut short = [0u8; 3];
        expect_err(
            b.to_host(&mut short),
            &["destination has 3 bytes", "float32[8] needs 32"],
        );
        let mut long = [0u8; 40];
        expect_err(b.to_host(&mut long), &["destination has 40 bytes"]);
    });
}

#[test]
fn buffer_queries() {
    for_each_plugin(|_, c| {
        let d = c.lookup_device(1).unwrap();
        let b = c.buffer_from_slice(&eight(), &[8], &d).unwrap();
        assert_eq!(b.device().unwrap(), d);
        assert_eq!(b.memory().unwrap(), d.default_memory().unwrap());
        assert!(b.is_on_cpu().unwrap());
        assert_eq!(b.layout().unwrap(), Some(vec![0]));
        assert_eq!(b.on_device_size().unwrap(), 32);
        assert!(!b.is_deleted());
        b.block_until_ready().unwrap();
        assert!(b.is_ready().unwrap());
        b.ready_event().unwrap().wait().unwrap();
        assert_eq!(format!("{b:?}"), "Buffer(float32[8])");
        let m = c.buffer_from_slice(&[0u8; 24], &[2, 3, 4], &d).unwrap();
        assert_eq!(m.layout().unwrap(), Some(vec![2, 1, 0]));
    });
}

#[test]
fn buffer_in_a_chosen_memory() {
    for_each_plugin(|_, c| {
        let d = c.lookup_device(3).unwrap();
        for kind in ["device", "pinned_host", "unpinned_host"] {
            let m = d.memory_by_kind(kind).unwrap();
            let data = f32_bytes(&eight());
            let b = c
                .buffer_from_host(&data, ElementType::F32, &[8], None, &d, Some(&m))
                .unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(b.memory().unwrap(), m, "{kind}");
            assert_eq!(b.device().unwrap(), d);
            assert_eq!(b.to_vec().unwrap(), data, "{kind}");
        }
    });
}

#[test]
fn buffer_delete_twice() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let b = c.buffer_from_slice(&eight(), &[8], &d).unwrap();
        b.delete().unwrap();
        assert!(b.is_deleted());
        // Deleting again is a no-op, like JAX's delete and like close().
        b.delete().unwrap();
        let e = expect_err(b.to_vec(), &["deleted or donated"]);
        assert!(matches!(e, Error::Deleted(_)), "{e:?}");
        assert_eq!(e.code(), rpjrt::Code::FailedPrecondition);
        expect_err(b.device(), &["deleted"]);
        expect_err(b.memory(), &["deleted"]);
        expect_err(b.on_device_size(), &["deleted"]);
        expect_err(b.ready_event().map(|_| ()), &["deleted"]);
        expect_err(b.copy_to_device(&d).map(|_| ()), &["deleted"]);
        assert_eq!(format!("{b:?}"), "Buffer(float32[8], deleted)");
        // A deleted buffer as an argument names its position.
        let x = c.buffer_from_slice(&eight(), &[8], &d).unwrap();
        let exe = compile(c, &mul_add());
        expect_err(exe.execute(&[&x, &b]), &["argument 1", "deleted"]);
        // Executables, too.
        exe.delete().unwrap();
        exe.delete().unwrap();
        expect_err(exe.execute(&[&x, &x]), &["executable was deleted"]);
        expect_err(exe.fingerprint(), &["executable was deleted"]);
    });
}

#[test]
fn buffer_copy_to_device() {
    for_each_plugin(|_, c| {
        let d0 = c.lookup_device(0).unwrap();
        let d3 = c.lookup_device(3).unwrap();
        let b = c.buffer_from_slice(&eight(), &[8], &d0).unwrap();
        let copy = b.copy_to_device(&d3).unwrap();
        assert_eq!(copy.device().unwrap(), d3);
        assert_eq!(copy.memory().unwrap(), d3.default_memory().unwrap());
        assert_eq!(copy.to_vec_of::<f32>().unwrap(), eight());
        assert_eq!(b.device().unwrap(), d0);
        assert_eq!(b.to_vec_of::<f32>().unwrap(), eight());
        // Deleting the copy leaves the original alone.
        copy.delete().unwrap();
        assert_eq!(b.to_vec_of::<f32>().unwrap(), eight());
    });
}

#[test]
fn buffer_duplicate_is_independent_and_a_clone_is_not() {
    for_each_plugin(|_, c| {
        let d3 = c.lookup_device(3).unwrap();
        let b = c.buffer_from_slice(&eight(), &[8], &d3).unwrap();
        let dup = b.duplicate().unwrap();
        assert_eq!(dup.device().unwrap(), d3);
        assert_eq!(dup.memory().unwrap(), b.memory().unwrap());
        assert_eq!(dup.to_vec_of::<f32>().unwrap(), eight());
        let clone = b.clone();
        b.delete().unwrap();
        assert!(clone.is_deleted(), "a clone shares the device buffer");
        assert_eq!(dup.to_vec_of::<f32>().unwrap(), eight());
        expect_err(b.duplicate(), &["deleted"]);
    });
}

#[test]
fn buffer_copy_to_memory() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let b = c.buffer_from_slice(&eight(), &[8], &d).unwrap();
        // Works on both plugins, 0.81 included.
        for kind in ["pinned_host", "unpinned_host", "device"] {
            let m = d.memory_by_kind(kind).unwrap();
            let moved = b
                .copy_to_memory(&m)
                .unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(moved.memory().unwrap(), m);
            assert_eq!(moved.memory().unwrap().kind(), kind);
            assert_eq!(moved.to_vec_of::<f32>().unwrap(), eight());
        }
        // Into another device's memory.
        let other = c.lookup_device(2).unwrap().default_memory().unwrap();
        let moved = b.copy_to_memory(&other).unwrap();
        assert_eq!(moved.device().unwrap().id(), 2);
        assert_eq!(moved.to_vec_of::<f32>().unwrap(), eight());
    });
}

#[test]
fn buffer_from_owned_host_bytes() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let owner: Arc<dyn HostBytes> = Arc::new(f32_bytes(&eight()));
        let b = c
            .buffer_from_host_owned(owner.clone(), ElementType::F32, &[8], None, &d, None)
            .unwrap();
        assert_eq!(b.to_vec_of::<f32>().unwrap(), eight());
        let exe = compile(c, &mul_add());
        let out = exe.execute(&[&b, &b]).unwrap();
        assert_eq!(
            out[0].to_vec_of::<f32>().unwrap(),
            mul_add_expected(&eight(), &eight())
        );
        // Host memory the caller shares cannot be donated: the plugin reads it until the
        // execution ends, while the caller, told it was consumed, could change it.
        let opts = ExecuteOptions {
            donate: vec![0],
            ..Default::default()
        };
        expect_err(
            exe.execute_with(&[vec![&b, &b]], &opts).map(|_| ()),
            &["argument 0 cannot be donated", "donate a copy"],
        );
        drop(b);
        drop(out);
        // The owner is released once the buffer is gone.
        assert_eq!(Arc::strong_count(&owner), 1);
        // Sub-byte data is unpacked into a copy, so packed bytes work here too.
        let s4: Arc<dyn HostBytes> = Arc::new(vec![0x21u8, 0x43]);
        let b = c
            .buffer_from_host_owned(s4, ElementType::S4, &[4], None, &d, None)
            .unwrap();
        assert_eq!(b.to_vec().unwrap(), [0x21, 0x43]);
    });
}

// ------------------------------------------------------------------------------ execute

#[test]
fn execute_single_device() {
    for_each_plugin(|_, c| {
        let exe = compile(c, &mul_add());
        let d = c.default_device().unwrap();
        let a = eight();
        let b = vec![2.0f32; 8];
        let xa = c.buffer_from_slice(&a, &[8], &d).unwrap();
        let xb = c.buffer_from_slice(&b, &[8], &d).unwrap();
        let out = exe.execute(&[&xa, &xb]).unwrap();
        assert_eq!(out[0].device().unwrap(), d);
        assert_eq!(out[0].element_type(), ElementType::F32);
        assert_eq!(out[0].dims(), &[8]);
        assert_eq!(out[0].to_vec_of::<f32>().unwrap(), mul_add_expected(&a, &b));
        // Inputs are not donated by default and stay usable.
        assert!(!xa.is_deleted() && !xb.is_deleted());
        assert_eq!(xa.to_vec_of::<f32>().unwrap(), a);
        let again = exe.execute(&[&out[0], &xb]).unwrap();
        let expected = mul_add_expected(&mul_add_expected(&a, &b), &b);
        assert_eq!(again[0].to_vec_of::<f32>().unwrap(), expected);
    });
}

#[test]
fn execute_from_many_threads() {
    for_each_plugin(|_, c| {
        let exe = compile(c, &mul_add());
        let d = c.default_device().unwrap();
        std::thread::scope(|s| {
            for t in 0..4 {
                let (exe, c, d) = (exe.clone(), c.clone(), d.clone());
                s.spawn(move || {
                    for i in 0..5 {
                        let a = vec![t as f32; 8];
                        let b = vec![i as f32; 8];
                        let xa = c.buffer_from_slice(&a, &[8], &d).unwrap();
                        let xb = c.buffer_from_slice(&b, &[8], &d).unwrap();
                        let out = exe.execute(&[&xa, &xb]).unwrap();
                        assert_eq!(out[0].to_vec_of::<f32>().unwrap(), mul_add_expected(&a, &b));
                    }
                });
            }
        });
    });
}

#[test]
fn execute_on_another_device() {
    for_each_plugin(|_, c| {
        let portable = CompileOptions {
            portable: true,
            ..Default::default()
        };
        let exe = compile_with(c, &mul_add(), &portable);
        for id in [2, 0] {
            let d = c.lookup_device(id).unwrap();
            let a = vec![3.0f32; 8];
            let x = c.buffer_from_slice(&a, &[8], &d).unwrap();
            let out = exe.execute_on(&d, &[&x, &x]).unwrap();
            assert_eq!(out[0].device().unwrap(), d);
            assert_eq!(out[0].to_vec_of::<f32>().unwrap(), vec![10.0; 8]);
        }
        // A portable executable has no devices of its own.
        assert!(exe.addressable_devices().unwrap().is_empty());
        // A non-portable one is bound to its device: refused before the plugin, whose own
        // message calls the device "not addressable".
        let fixed = compile(c, &mul_add());
        let d2 = c.lookup_device(2).unwrap();
        let x = c.buffer_from_slice(&[1f32; 8], &[8], &d2).unwrap();
        expect_err(
            fixed.execute_on(&d2, &[&x, &x]),
            &["was compiled for", "id=2", "compile it portable"],
        );
    });
}

#[test]
fn execute_sharded_over_two_replicas() {
    for_each_plugin(|_, c| {
        let opts = CompileOptions {
            num_replicas: 2,
            device_assignment: Some(vec![vec![1], vec![3]]),
            ..Default::default()
        };
        let exe = compile_with(c, &mul_add(), &opts);
        assert_eq!(exe.num_replicas(), 2);
        let devices = exe.addressable_devices().unwrap();
        let ids: Vec<i32> = devices.iter().map(|d| d.id()).collect();
        assert_eq!(ids, [1, 3]);
        let inputs: Vec<Vec<f32>> = (0..2)
            .map(|r| (0..8).map(|i| (i + 10 * r) as f32).collect())
            .collect();
        let bufs: Vec<_> = devices
            .iter()
            .zip(&inputs)
            .map(|(d, v)| c.buffer_from_slice(v, &[8], d).unwrap())
            .collect();
        let out = exe
            .execute_sharded(&[vec![&bufs[0], &bufs[0]], vec![&bufs[1], &bufs[1]]])
            .unwrap();
        assert_eq!(out.len(), 2);
        for (r, outs) in out.iter().enumerate() {
            assert_eq!(outs.len(), 1);
            assert_eq!(outs[0].device().unwrap(), devices[r]);
            assert_eq!(
                outs[0].to_vec_of::<f32>().unwrap(),
                mul_add_expected(&inputs[r], &inputs[r])
            );
        }
        // Without an explicit assignment the plugin picks two devices.
        let exe = compile_with(c, &mul_add(), &replicas(2));
        assert_eq!(exe.addressable_devices().unwrap().len(), 2);
    });
}

#[test]
fn execute_all_reduce_over_two_devices() {
    for_each_plugin(|_, c| {
        let (exe, devices, a, b) = all_reduce_with_inputs(c);
        let out = exe.execute_sharded(&[vec![&a], vec![&b]]).unwrap();
        for (r, o) in out.iter().enumerate() {
            assert_eq!(o[0].device().unwrap(), devices[r]);
            assert_eq!(o[0].to_vec_of::<f32>().unwrap(), [11., 22., 33., 44.]);
        }
    });
}

#[test]
fn execute_donation_is_opt_in() {
    for_each_plugin(|_, c| {
        let exe = compile(c, &mul_add());
        let d = c.default_device().unwrap();
        let x = c.buffer_from_slice(&[1f32; 8], &[8], &d).unwrap();
        let y = c.buffer_from_slice(&[2f32; 8], &[8], &d).unwrap();
        let opts = ExecuteOptions {
            donate: vec![0],
            ..Default::default()
        };
        let run = exe.execute_with(&[vec![&x, &y]], &opts).unwrap();
        assert!(run.events.is_empty());
        assert_eq!(run.outputs[0][0].to_vec_of::<f32>().unwrap(), vec![3.0; 8]);
        assert!(x.is_deleted(), "the donated input is consumed");
        assert!(!y.is_deleted(), "the other input is not");
        assert_eq!(y.to_vec_of::<f32>().unwrap(), vec![2.0; 8]);
        expect_err(x.to_vec(), &["deleted or donated"]);
        expect_err(exe.execute(&[&x, &y]), &["argument 0", "donated"]);
        // A donation index out of range is refused and consumes nothing.
        let z = c.buffer_from_slice(&[1f32; 8], &[8], &d).unwrap();
        let bad = ExecuteOptions {
            donate: vec![2],
            ..Default::default()
        };
        expect_err(
            exe.execute_with(&[vec![&z, &y]], &bad).map(|_| ()),
            &["donate index 2 is out of range for 2 arguments"],
        );
        assert!(!z.is_deleted());
    });
}

#[test]
fn execute_completion_events() {
    for_each_plugin(|_, c| {
        let (exe, _, x) = mul_add_with_input(c, &eight());
        let opts = with_events();
        let run = exe.execute_with(&[vec![&x, &x]], &opts).unwrap();
        assert_eq!(run.events.len(), 1);
        let ev = &run.events[0];
        ev.wait().unwrap();
        assert!(ev.is_ready().unwrap());
        assert!(ev.error().is_none());
        assert_eq!(format!("{ev:?}"), "Event(ready)");
        assert_eq!(
            run.outputs[0][0].to_vec_of::<f32>().unwrap(),
            mul_add_expected(&eight(), &eight())
        );

        // One event per device for a replicated program.
        let two = compile_with(c, &mul_add(), &replicas(2));
        let devs = two.addressable_devices().unwrap();
        let a = c.buffer_from_slice(&eight(), &[8], &devs[0]).unwrap();
        let b = c.buffer_from_slice(&eight(), &[8], &devs[1]).unwrap();
        let run = two
            .execute_with(&[vec![&a, &a], vec![&b, &b]], &opts)
            .unwrap();
        assert_eq!(run.events.len(), 2);
        for ev in run.events {
            block_on(ev).unwrap();
        }
    });
}

#[test]
fn events_can_be_awaited() {
    for_each_plugin(|_, c| {
        let (exe, _, x) = mul_add_with_input(c, &eight());
        let opts = with_events();
        for _ in 0..10 {
            let mut run = exe.execute_with(&[vec![&x, &x]], &opts).unwrap();
            let out = run.outputs.pop().unwrap().pop().unwrap();
            // Await the buffer's readiness before or after the completion event.
            block_on(out.ready_event().unwrap()).unwrap();
            block_on(run.events.pop().unwrap()).unwrap();
            // An event that is already complete resolves on its first poll.
            let ready = out.ready_event().unwrap();
            ready.wait().unwrap();
            block_on(ready).unwrap();
            assert_eq!(
                out.to_vec_of::<f32>().unwrap(),
                mul_add_expected(&eight(), &eight())
            );
        }
        // Done callbacks, added before and after completion, each run once with the result.
        let (tx, rx) = std::sync::mpsc::channel();
        let mut run = exe.execute_with(&[vec![&x, &x]], &opts).unwrap();
        let ev = run.events.pop().unwrap();
        let early = tx.clone();
        ev.add_done_callback(move |r| early.send(("early", r.is_ok())).unwrap());
        ev.wait().unwrap();
        ev.add_done_callback(move |r| tx.send(("late", r.is_ok())).unwrap());
        let mut got: Vec<_> = rx.iter().collect();
        got.sort();
        assert_eq!(got, [("early", true), ("late", true)]);
        // An event awaited on another thread.
        let out = exe.execute(&[&x, &x]).unwrap().pop().unwrap();
        let ev = out.ready_event().unwrap();
        std::thread::spawn(move || block_on(ev))
            .join()
            .unwrap()
            .unwrap();
    });
}

#[test]
fn element_types_the_plugin_predates_are_refused() {
    for_each_plugin(|p, c| {
        let d = c.default_device().unwrap();
        for ty in [
            ElementType::S1,
            ElementType::U1,
            ElementType::F6E2M3FN,
            ElementType::F6E3M2FN,
        ] {
            let data = sample(ty, 8);
            let r = c.buffer_from_host(&data, ty, &[8], None, &d, None);
            if is_old(p) {
                let e = expect_err(
                    r,
                    &[
                        &format!("element type {ty} is not available"),
                        &format!("needs PJRT 0.{}", ty.since_pjrt_minor()),
                        "this plugin implements PJRT 0.81",
                    ],
                );
                match e {
                    Error::Unsupported {
                        needs,
                        plugin,
                        missing_slot,
                        ..
                    } => {
                        assert_eq!(needs, v(ty.since_pjrt_minor()));
                        assert_eq!(plugin, v(81));
                        assert!(!missing_slot);
                    }
                    other => panic!("expected Unsupported, got {other:?}"),
                }
                assert_eq!(e.code(), rpjrt::Code::Unimplemented);
                let owned: Arc<dyn HostBytes> = Arc::new(data);
                expect_err(
                    c.buffer_from_host_owned(owned, ty, &[8], None, &d, None),
                    &["is not available"],
                );
            } else {
                assert_eq!(r.unwrap().to_vec().unwrap(), data, "{ty}");
            }
        }
    });
}

#[test]
fn both_plugins_offer_ffi_registration() {
    common::for_each_plugin_only(|p| assert!(p.has_ffi_registration().unwrap()));
}

const MAX_MIN: &str = r#"
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = stablehlo.maximum %a, %b : tensor<4xf32>
  %1 = stablehlo.minimum %a, %b : tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}
"#;

/// max/min of (NaN, 1), (1, NaN), (2, 3), (NaN, NaN), rendered so NaN compares equal.
fn max_min(c: &Client, options: &CompileOptions) -> Vec<Vec<String>> {
    let exe = compile_with(c, MAX_MIN, options);
    let d = c.default_device().unwrap();
    let a = c
        .buffer_from_slice(&[f32::NAN, 1.0, 2.0, f32::NAN], &[4], &d)
        .unwrap();
    let b = c
        .buffer_from_slice(&[1.0, f32::NAN, 3.0, f32::NAN], &[4], &d)
        .unwrap();
    exe.execute(&[&a, &b])
        .unwrap()
        .iter()
        .map(|o| {
            o.to_vec_of::<f32>()
                .unwrap()
                .iter()
                .map(|x| x.to_string())
                .collect()
        })
        .collect()
}

#[test]
fn maximum_and_minimum_keep_nans_on_cpu_unless_asked_otherwise() {
    for_each_plugin(|_, c| {
        // StableHLO (and JAX) semantics: a NaN operand gives NaN. The CPU plugins' own
        // default (fast min/max) would answer 1 for max(NaN, 1)... rpjrt turns it off.
        let nan = |v: [&str; 4]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            max_min(c, &CompileOptions::default()),
            vec![
                nan(["NaN", "NaN", "3", "NaN"]),
                nan(["NaN", "NaN", "2", "NaN"])
            ]
        );
        // ... unless the caller sets the option: then the plugin's fast path is used.
        let mut fast = CompileOptions::default();
        fast.env_option_overrides.insert(
            rpjrt::CPU_FAST_MIN_MAX.to_string(),
            rpjrt::OptionOverride::Bool(true),
        );
        let got = max_min(c, &fast);
        assert_eq!(got[0][1], "1", "{got:?}");
        assert_eq!(got[0][2], "3", "{got:?}");
    });
}

#[test]
fn a_hard_link_to_a_loaded_plugin_is_the_same_plugin() {
    // The loader maps a file once whatever name reaches it: a second name must not give a
    // second `Plugin` initialised twice over the same library.
    let original = plugin_path(Which::New);
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("hardlink-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("same_plugin.so");
    let _ = std::fs::remove_file(&link);
    std::fs::hard_link(&original, &link).unwrap_or_else(|e| {
        panic!(
            "cannot hard-link {} into {}: {e}",
            original.display(),
            dir.display()
        )
    });
    let first = Plugin::load(&original).unwrap();
    let second = Plugin::load(&link).unwrap();
    assert_eq!(
        second.path(),
        first.path(),
        "a second Plugin for the same library"
    );
    let client = Client::new(&second, &ClientOptions::default()).unwrap();
    let exe = compile(&client, ADD);
    let d = &client.devices().unwrap()[0];
    let x = client
        .buffer_from_slice(&[1f32, 2., 3., 4.], &[4], d)
        .unwrap();
    let out = exe.execute(&[&x, &x]).unwrap().remove(0);
    assert_eq!(out.to_vec_of::<f32>().unwrap(), [2., 4., 6., 8.]);
    std::fs::remove_dir_all(&dir).unwrap();
}
