//! Properties of the core's readers of bytes it did not write in this process: rpjrt
//! artifacts (compile-cache entries, `Client::load`), program files and what the compile
//! screen reads of them (MLIR text and bytecode, HLO protos), serialized `OpSharding`s and
//! layouts from a plugin, and StableHLO versions. Valid inputs round-trip; random, mutated
//! (bit flips, truncations, extensions, length fields set to 0, huge or just past the end)
//! and adversarial ones give an error naming the problem (or, for the analysers, no
//! answer), never a panic, a hang or an allocation larger than the input justifies.

mod common;

use std::time::Duration;

use proptest::prelude::*;
use rpjrt::{
    Artifact, ArtifactTarget, DeviceLayout, Error, OpSharding, Program, ProgramFile,
    StablehloVersion,
};
use sha2::{Digest, Sha256};

#[path = "support/alloc_cap.rs"]
mod alloc_cap;

use alloc_cap::largest_alloc;
use common::{fixture, plugin, Which};

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x7061_7273),
        ..ProptestConfig::default()
    }
}

/// One way of damaging bytes.
#[derive(Clone, Debug)]
enum Mutation {
    /// Flip one bit (at a position taken modulo the length).
    Flip(usize, u8),
    /// Keep only the first bytes (a fraction of the length, in 1/256ths).
    Truncate(u8),
    /// Append bytes.
    Extend(Vec<u8>),
    /// Overwrite a 1-, 4- or 8-byte little-endian field with a value.
    Field(usize, u8, u64),
}

/// Values a length field is set to: 0, 1, small, huge and near the type limits.
fn length_value() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(0x7f),
        Just(u32::MAX as u64),
        Just(u32::MAX as u64 + 1),
        Just(i64::MAX as u64),
        Just(u64::MAX),
        0u64..512,
        any::<u64>(),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<usize>(), 0u8..8).prop_map(|(i, b)| Mutation::Flip(i, b)),
        1 => any::<u8>().prop_map(Mutation::Truncate),
        1 => proptest::collection::vec(any::<u8>(), 1..32).prop_map(Mutation::Extend),
        2 => (any::<usize>(), prop_oneof![Just(1u8), Just(4), Just(8)], length_value())
            .prop_map(|(i, w, v)| Mutation::Field(i, w, v)),
    ]
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    proptest::collection::vec(mutation(), 1..4)
}

/// `bytes` with `ms` applied in turn, each past the first `keep` bytes.
fn apply(bytes: &[u8], ms: &[Mutation], keep: usize) -> Vec<u8> {
    let mut b = bytes.to_vec();
    for m in ms {
        let room = b.len().saturating_sub(keep).max(1);
        match m {
            Mutation::Flip(i, bit) => {
                if b.len() > keep {
                    b[keep + i % room] ^= 1 << bit;
                }
            }
            Mutation::Truncate(f) => b.truncate(keep + room * usize::from(*f) / 256),
            Mutation::Extend(more) => b.extend_from_slice(more),
            Mutation::Field(i, w, v) => {
                let (at, w) = (keep + i % room, usize::from(*w));
                if at + w <= b.len() {
                    b[at..at + w].copy_from_slice(&v.to_le_bytes()[..w]);
                }
            }
        }
    }
    b
}

/// Runs `f` on another thread and fails if it has not returned within a few seconds (a
/// hang), or panicked.
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(v) => v,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("{what}: no answer in 10 s"),
        Err(_) => panic!("{what}: panicked"),
    }
}

// ------------------------------------------------------------------------------ artifacts

fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z0-9_.,]{0,12}", "\\PC{0,6}"]
}

fn artifact() -> impl Strategy<Value = Artifact> {
    (
        proptest::collection::vec(text(), 8),
        any::<u16>(),
        proptest::collection::vec(any::<u8>(), 0..64),
        proptest::collection::vec(any::<u8>(), 0..256),
        proptest::collection::vec(("[a-z_]{1,10}", text()), 0..4),
    )
        .prop_map(|(t, count, compile_options, blob, extra)| Artifact {
            target: ArtifactTarget {
                platform_name: t[0].clone(),
                platform_version: t[1].clone(),
                pjrt_version: t[2].clone(),
                xla_version: t[3].clone(),
                stablehlo_current_version: t[4].clone(),
                stablehlo_minimum_version: t[5].clone(),
                plugin_build: t[7].clone(),
                device_kind: t[6].clone(),
                device_count: usize::from(count),
            },
            compile_options,
            blob,
            // Informational fields never shadow a target field.
            extra: extra
                .into_iter()
                .map(|(k, v)| (format!("x_{k}"), v))
                .collect(),
        })
}

/// `bytes` with their length field and checksum made right again, so that a mutation of
/// the body reaches the field parser instead of failing the checksum.
fn reseal(mut bytes: Vec<u8>) -> Vec<u8> {
    if bytes.len() < 20 + 32 {
        return bytes;
    }
    let body = bytes.len() - 32;
    let total = bytes.len() as u64;
    bytes[12..20].copy_from_slice(&total.to_le_bytes());
    let sum = Sha256::digest(&bytes[..body]);
    bytes[body..].copy_from_slice(&sum);
    bytes
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn artifacts_round_trip(a in artifact()) {
        prop_assert_eq!(Artifact::decode(&a.encode()).unwrap(), a);
    }

    #[test]
    fn damaged_artifacts_are_refused_naming_the_artifact(
        a in artifact(),
        ms in mutations(),
        resealed in any::<bool>(),
    ) {
        let good = a.encode();
        // Past the magic (whose absence is its own error), the checksum made right again
        // or not: the field parser sees any body.
        let mut bad = apply(&good, &ms, 8);
        if resealed {
            bad = reseal(bad);
        }
        let (got, largest) = largest_alloc(|| Artifact::decode(&bad));
        prop_assert!(largest <= 2 * bad.len() + 4096, "{} bytes allocated for {}", largest, bad.len());
        match got {
            Ok(back) => prop_assert_eq!(Artifact::decode(&back.encode()).unwrap(), back),
            Err(e) => {
                prop_assert!(matches!(e, Error::InvalidArgument(_)), "{:?}", e);
                prop_assert!(e.to_string().contains("artifact"), "{}", e);
            }
        }
    }

    #[test]
    fn any_bytes_are_told_apart_or_refused(
        bytes in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..64),
            "\\PC{0,32}".prop_map(String::into_bytes),
        ],
        prefix in prop_oneof![
            Just(&b""[..]), Just(&b"RPJRTEXE"[..]), Just(&b"ML\xefR"[..]), Just(&b"HloModule "[..]),
        ],
        name in proptest::option::of(prop_oneof![Just("m.pb"), Just("m.mlir"), Just("x")]),
        format in proptest::option::of(prop_oneof![
            Just("mlir"), Just("hlo"), Just("executable"), Just("onnx"), Just(""),
        ]),
    ) {
        let bytes = [prefix, &bytes].concat();
        match ProgramFile::detect(bytes, name, format) {
            Ok(f) => prop_assert!(["mlir", "hlo", "artifact", "executable"].contains(&f.kind())),
            Err(e) => prop_assert!(matches!(e, Error::InvalidArgument(ref m) if !m.is_empty()), "{:?}", e),
        }
    }
}

// ----------------------------------------------------------- programs and the compile screen

/// The program fixtures the analysers read: MLIR text, plain bytecode, portable artifacts
/// and an HLO module proto.
const PROGRAMS: [&str; 8] = [
    "mul_add.mlir",
    "shardy_sin.mlir",
    "mul_add.mlirbc",
    "shardy_sin.mlirbc",
    "mul_add.jax_export.mlirbc",
    "shardy_sin.jax_export.mlirbc",
    "two_funcs.jax_export.mlirbc",
    "mul_add.hlo.pb",
];

/// Everything rpjrt reads of a program before compiling it, on both plugins' versions.
fn analyse(program: Program) -> (Option<Vec<String>>, bool, Vec<rpjrt::Result<()>>) {
    let names = program.parameter_names();
    let shardy = rpjrt::sharding::uses_shardy(&program);
    let screened = Which::BOTH
        .iter()
        .map(|&w| plugin(w).check_program(&program))
        .collect();
    (names, shardy, screened)
}

proptest! {
    #![proptest_config(config(160))]

    #[test]
    fn damaged_programs_are_read_or_passed_on(
        which in 0..PROGRAMS.len(),
        ms in mutations(),
    ) {
        let name = PROGRAMS[which];
        let good = fixture(name);
        // Past the bytecode magic, so that damaged bytecode is still read as bytecode.
        let keep = if good.starts_with(b"ML\xefR") { 4 } else { 0 };
        let bad = apply(&good, &ms, keep);
        let program = if name.ends_with(".pb") { Program::hlo(bad.clone()) } else { Program::mlir(bad.clone()) };
        let len = bad.len();
        let ((_, _, screened), largest) =
            bounded(name, move || largest_alloc(|| analyse(program)));
        prop_assert!(largest <= 8 * len + 65536, "{} bytes allocated for {}", largest, len);
        for r in screened {
            if let Err(e) = r {
                prop_assert!(matches!(e, Error::InvalidArgument(_)), "{:?}", e);
                prop_assert!(e.to_string().contains("the program"), "{}", e);
            }
        }
    }
}

/// A varint of MLIR bytecode (the prefix encoding).
fn varint(v: u64) -> Vec<u8> {
    if v < 1 << 7 {
        vec![(v << 1) as u8 | 1]
    } else {
        let mut out = vec![0u8];
        out.extend_from_slice(&v.to_le_bytes());
        out
    }
}

/// A section of MLIR bytecode.
fn section(id: u8, data: &[u8]) -> Vec<u8> {
    [vec![id], varint(data.len() as u64), data.to_vec()].concat()
}

/// Bytecode (version 6) of a module holding two functions of no parameters, both with the
/// attribute dictionary `dict` (the bytes of attribute 0, a builtin attribute).
fn two_functions(dict: &[u8]) -> Vec<u8> {
    let strings = ["builtin", "func", "module"];
    let mut s = varint(strings.len() as u64);
    for t in strings.iter().rev() {
        s.extend(varint(t.len() as u64 + 1));
    }
    for t in strings {
        s.extend_from_slice(t.as_bytes());
        s.push(0);
    }
    // Dialects builtin and func (no versions); ops builtin.module and func.func.
    let dialects = [
        varint(2),
        varint(0 << 1),
        varint(1 << 1),
        varint(2),
        varint(0),
        varint(1),
        varint(2 << 1),
        varint(1),
        varint(1),
        varint(1 << 1),
    ]
    .concat();
    let offsets = [
        varint(1),
        varint(0),
        varint(0),
        varint(1),
        varint((dict.len() as u64) << 1 | 1),
    ]
    .concat();
    // The module op (one region, one block of two ops), then two func.func ops with
    // attribute 0 and an empty body.
    let func = [
        varint(1),
        vec![0x11],
        varint(0),
        varint(0),
        varint(1 << 1),
        varint(1),
        varint(0),
        varint(0),
    ]
    .concat();
    let ir = [
        varint(1 << 1),
        varint(0),
        vec![0x10],
        varint(0),
        varint(1 << 1),
        varint(1),
        varint(0),
        varint(2 << 1),
        func.clone(),
        func,
    ]
    .concat();
    [
        b"ML\xefR".to_vec(),
        varint(6),
        b"test\0".to_vec(),
        section(0, &s),
        section(1, &dialects),
        section(2, dict),
        section(3, &offsets),
        section(4, &ir),
    ]
    .concat()
}

#[test]
fn an_attribute_dictionary_claiming_a_huge_count_is_not_walked() {
    // A dictionary (builtin code 1) that says it holds 2^62 entries and holds none: the
    // entry function's name is looked for in at most the entries present.
    for count in [0u64, 1, 1 << 20, 1 << 62, u64::MAX] {
        let code = two_functions(&[varint(1), varint(count)].concat());
        let names = bounded("parameter names", move || {
            Program::mlir(code).parameter_names()
        });
        assert_eq!(names, None, "count {count}");
    }
}

// ------------------------------------------------------------------ plugin-provided data

/// A small `OpSharding` proto, valid or nearly so, written field by field.
fn sharding_proto() -> impl Strategy<Value = Vec<u8>> {
    fn field(tag: u32, wire: u32) -> Vec<u8> {
        leb(u64::from(tag << 3 | wire))
    }
    fn leb(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }
    fn packed(tag: u32, values: &[i64]) -> Vec<u8> {
        let body: Vec<u8> = values.iter().flat_map(|&v| leb(v as u64)).collect();
        [field(tag, 2), leb(body.len() as u64), body].concat()
    }
    (
        0i64..8,
        proptest::collection::vec(prop_oneof![0i64..5, Just(-1), Just(1 << 40)], 0..4),
        proptest::collection::vec(0i64..8, 0..6),
        proptest::collection::vec(prop_oneof![0i64..5, Just(1 << 30)], 0..4),
        proptest::collection::vec(-1i64..5, 0..4),
        proptest::collection::vec(0i64..8, 0..3),
    )
        .prop_map(|(kind, dims, devices, iota, perm, last)| {
            [
                field(1, 0),
                leb(kind as u64),
                packed(3, &dims),
                packed(4, &devices),
                packed(8, &last),
                packed(9, &iota),
                packed(10, &perm),
            ]
            .concat()
        })
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn shardings_decode_consistently_or_name_the_problem(
        proto in sharding_proto(),
        ms in proptest::collection::vec(mutation(), 0..3),
    ) {
        let bytes = apply(&proto, &ms, 0);
        let (got, largest) = largest_alloc(|| OpSharding::decode(&bytes));
        prop_assert!(largest <= 16 * bytes.len() + 4096, "{} bytes allocated for {}", largest, bytes.len());
        match got {
            Ok(s) => {
                // What decodes is consistent: the devices fill the tile grid.
                if s.kind == rpjrt::ShardingType::Other {
                    let n: i64 = s.tile_assignment_dimensions.iter().product();
                    prop_assert_eq!(s.devices().len() as i64, n);
                }
                let _ = s.to_string();
            }
            Err(e) => prop_assert!(e.to_string().contains("not a valid serialized OpSharding"), "{}", e),
        }
    }

    #[test]
    fn layout_strides_address_each_element_once(
        dims in proptest::collection::vec(1i64..5, 0..5),
        m2m in proptest::collection::vec(-1i64..6, 0..5),
    ) {
        // Whatever order the plugin reports, the strides rpjrt derives from it (for a
        // DLPack export, or a buffer's byte strides) address each element of the dense
        // buffer exactly once: a bad order is refused or replaced, never trusted.
        let n: i64 = dims.iter().product();
        let reach = |strides: &[i64]| -> Vec<i64> {
            let mut offsets = vec![0i64];
            for (&d, &s) in dims.iter().zip(strides) {
                offsets = offsets
                    .iter()
                    .flat_map(|&o| (0..d).map(move |i| o + i * s))
                    .collect();
            }
            offsets.sort();
            offsets
        };
        let all: Vec<i64> = (0..n).collect();
        let exported = rpjrt::dlpack::export_strides(&dims, Some(&m2m));
        prop_assert_eq!(reach(&exported), all.clone(), "export strides {:?}", exported);
        let layout = DeviceLayout {
            minor_to_major: m2m.clone(),
            tiles: Vec::new(),
            element_size_bits: 0,
            memory_space: 0,
            serialized: Vec::new(),
        };
        if let Some(bytes) = layout.byte_strides(&dims, 4) {
            let elements: Vec<i64> = bytes.iter().map(|s| s / 4).collect();
            prop_assert_eq!(reach(&elements), all, "byte strides {:?}", bytes);
        }
    }

    #[test]
    fn stablehlo_versions_parse_or_are_refused(
        text in prop_oneof![
            "[0-9]{1,12}\\.[0-9]{1,12}\\.[0-9]{1,12}",
            "\\PC{0,12}",
        ],
        head in proptest::collection::vec(any::<u8>(), 0..100),
    ) {
        match text.parse::<StablehloVersion>() {
            Ok(v) => prop_assert_eq!(v.to_string().parse::<StablehloVersion>().unwrap(), v),
            Err(e) => prop_assert!(e.to_string().contains("is not a StableHLO version"), "{}", e),
        }
        let mut program = b"ML\xefR\x0dStableHLO_v".to_vec();
        program.extend_from_slice(text.as_bytes());
        program.extend_from_slice(&head);
        let _ = rpjrt::artifact_version(&program);
        let _ = rpjrt::artifact_version(&head);
    }
}

#[test]
fn parameter_names_of_text_take_linear_time() {
    // Many `func.func` words before the first parenthesis: each must not search the rest.
    let text = format!("{}(%x: tensor<f32>)", "func.func ".repeat(200_000));
    let t0 = std::time::Instant::now();
    let names = bounded("parameter names", move || {
        Program::mlir(text).parameter_names()
    });
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    let _ = names;
}

#[test]
fn a_hand_built_iota_out_of_range_names_no_devices() {
    // The fields are public: what decode refuses, devices() must not index or overflow on.
    let mut s = OpSharding::decode(&[]).unwrap();
    s.kind = rpjrt::ShardingType::Other;
    s.tile_assignment_dimensions = vec![2];
    for (iota, perm) in [
        (vec![2], vec![5]),
        (vec![2, 2], vec![0, 0]),
        (vec![1 << 40, 1 << 40], vec![]),
        (vec![-2], vec![]),
    ] {
        s.iota_reshape_dims = iota;
        s.iota_transpose_perm = perm;
        assert_eq!(s.devices(), Vec::<i64>::new(), "{s:?}");
    }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn dlpack_imports_address_only_the_planned_bytes(
        shape in proptest::collection::vec(prop_oneof![0i64..4, Just(-1), Just(1 << 40), Just(i64::MAX)], 0..4),
        strides in proptest::option::of(proptest::collection::vec(
            prop_oneof![-4i64..5, Just(i64::MAX), Just(i64::MIN), Just(1 << 40)], 0..4)),
        offset in prop_oneof![Just(0u64), 0u64..64, Just(u64::MAX)],
        code in 0u8..6,
        bits in prop_oneof![Just(1u8), Just(4), Just(8), Just(16), Just(32), Just(64), Just(128)],
        lanes in prop_oneof![Just(1u16), Just(0), Just(4)],
    ) {
        use rpjrt::dlpack::{DlDataType, DlTensorDesc, PlanImport, DEVICE_CPU};
        let desc = DlTensorDesc {
            device_type: DEVICE_CPU,
            device_id: 0,
            dtype: DlDataType { code, bits, lanes },
            shape: shape.clone(),
            strides: strides.clone(),
            byte_offset: offset,
            readonly: true,
            subbyte_padded: bits < 8,
        };
        let (got, largest) = largest_alloc(|| desc.plan_import());
        prop_assert!(largest <= 4096, "{} bytes allocated", largest);
        match got {
            Ok(plan) => {
                let item = plan.element_type.byte_width().unwrap() as i128;
                // Every element (of a shape small enough to list) lies inside the plan.
                if shape.iter().all(|&d| d < 4) && !shape.contains(&0) {
                    let mut offsets = vec![0i128];
                    for (&d, &s) in shape.iter().zip(&plan.byte_strides) {
                        offsets = offsets
                            .iter()
                            .flat_map(|&o| (0..d).map(move |i| o + i128::from(i) * i128::from(s)))
                            .collect();
                    }
                    for o in offsets {
                        prop_assert!(o >= plan.lo && o + item <= plan.lo + plan.len as i128,
                            "offset {} outside {}..+{}", o, plan.lo, plan.len);
                    }
                }
            }
            Err(e) => {
                let text = e.to_string();
                prop_assert!(
                    ["DLPack", "dimension", "stride", "shape", "extent", "overflow"]
                        .iter()
                        .any(|w| text.contains(w)),
                    "{}", text
                );
            }
        }
    }
}
