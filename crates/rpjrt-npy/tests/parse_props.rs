//! Properties of the readers of `.npy` and `.npz` bytes that rpjrt did not write: valid
//! files round-trip, and random, mutated (bit flips, truncations, extensions, length fields
//! set to 0, huge or just past the end) and adversarial inputs give an error naming the
//! problem, never a panic, a hang or an allocation larger than the input justifies.

use proptest::prelude::*;
use rpjrt::{ElementType, Error};
use rpjrt_npy::npy::{read_header, write_npy_raw, MAX_HEADER};
use rpjrt_npy::{load, read_npy, save_npz, type_of_descr, write_npy, Array};

#[path = "../../rpjrt/tests/support/alloc_cap.rs"]
mod alloc_cap;

use alloc_cap::largest_alloc;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 192,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x6e70_7921),
        ..ProptestConfig::default()
    }
}

/// The element types `.npy` files carry under a type string of their own.
fn npy_types() -> Vec<ElementType> {
    ElementType::ALL
        .iter()
        .copied()
        .filter(|&t| rpjrt_npy::descr_of(t).is_ok())
        .collect()
}

/// A valid array of a type `.npy` carries: small dims, random bytes.
fn array() -> impl Strategy<Value = Array> {
    (
        proptest::sample::select(npy_types()),
        proptest::collection::vec(0i64..4, 0..4),
    )
        .prop_flat_map(|(t, dims)| {
            let n: usize = dims.iter().map(|&d| d as usize).product();
            let bytes = n * t.byte_width().unwrap();
            proptest::collection::vec(any::<u8>(), bytes).prop_map(move |mut data| {
                if t == ElementType::Pred {
                    data.iter_mut().for_each(|b| *b &= 1);
                }
                Array::new(t, dims.clone(), data).unwrap()
            })
        })
}

/// One way of damaging a file.
#[derive(Clone, Debug)]
enum Mutation {
    /// Flip one bit (at a position taken modulo the length).
    Flip(usize, u8),
    /// Keep only the first bytes.
    Truncate(usize),
    /// Append bytes.
    Extend(Vec<u8>),
    /// Overwrite a 2-, 4- or 8-byte little-endian field with a value.
    Field(usize, u8, u64),
    /// Overwrite a run of bytes with text that header parsers trip on.
    Splice(usize, String),
}

/// Values a length field is set to: 0, 1, huge, just past the end and near type limits.
fn length_value(len: usize) -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(len as u64),
        Just(len as u64 + 1),
        Just(u16::MAX as u64),
        Just(u32::MAX as u64),
        Just(i64::MAX as u64),
        Just(u64::MAX),
        any::<u64>(),
    ]
}

/// Snippets of header text that a dict scanner may mishandle.
fn snippet() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("'descr': 'é4'".to_string()),
        Just("'descr': '☃'".to_string()),
        Just("'descr': ''".to_string()),
        Just("'descr': '<U99999999999999999999'".to_string()),
        Just("'shape': (99999999999, 99999999999, 99999999999)".to_string()),
        Just("'shape': (-1,)".to_string()),
        Just("'shape': (".to_string()),
        Just("'fortran_order': Tru".to_string()),
        Just("'descr': [('a', '<f4')]".to_string()),
        "[ -~]{0,24}",
        "\\PC{0,8}",
    ]
}

fn mutation(len: usize) -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (0..len.max(1)).prop_map(Mutation::Truncate),
        proptest::collection::vec(any::<u8>(), 1..64).prop_map(Mutation::Extend),
        (
            any::<usize>(),
            prop_oneof![Just(2u8), Just(4), Just(8)],
            length_value(len)
        )
            .prop_map(|(i, w, v)| Mutation::Field(i, w, v)),
        (any::<usize>(), snippet()).prop_map(|(i, s)| Mutation::Splice(i, s)),
    ]
}

/// `bytes` with `m` applied; `fields` are the offsets of length fields a `Field` mutation
/// picks from (besides any offset).
fn apply(bytes: &[u8], m: &Mutation, fields: &[usize]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    match m {
        Mutation::Flip(i, bit) if !b.is_empty() => {
            let n = b.len();
            b[i % n] ^= 1 << bit;
        }
        Mutation::Flip(..) => {}
        Mutation::Truncate(n) => b.truncate(*n),
        Mutation::Extend(more) => b.extend_from_slice(more),
        Mutation::Field(i, w, v) => {
            let w = usize::from(*w);
            let at = if i % 2 == 0 && !fields.is_empty() {
                fields[(i / 2) % fields.len()]
            } else {
                i % b.len().max(1)
            };
            if at + w <= b.len() {
                b[at..at + w].copy_from_slice(&v.to_le_bytes()[..w]);
            }
        }
        Mutation::Splice(i, s) => {
            let at = i % b.len().max(1);
            let end = (at + s.len()).min(b.len());
            b.splice(at..end, s.bytes());
        }
    }
    b
}

/// Whether an error from reading untrusted bytes is one of ours that names a problem.
fn names_a_problem(e: &Error) -> bool {
    let text = e.to_string();
    let named = [
        "npy",
        "npz",
        "archive",
        "member",
        "header",
        "shape",
        "type",
        "data",
        "bytes",
        "element",
        "dimension",
        "zip",
    ]
    .iter()
    .any(|w| text.contains(w));
    matches!(e, Error::InvalidArgument(_) | Error::ResourceExhausted(_)) && named
}

/// The most a reader may allocate at once for `len` input bytes: the header bound, and a
/// few times the input (one copy of the data, string and vector growth).
fn npy_cap(len: usize) -> usize {
    2 * MAX_HEADER + 4 * len + 4096
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn npy_round_trips(a in array(), big in any::<bool>()) {
        prop_assert_eq!(&read_npy(&write_npy(&a).unwrap()).unwrap(), &a);
        // The same array written big-endian reads back the same values.
        let t = a.element_type;
        if big && t.byte_width().unwrap() > 1 {
            let descr = format!(">{}", &rpjrt_npy::descr_of(t).unwrap()[1..]);
            let mut data = a.data.clone();
            let part = if t.name().starts_with("complex") {
                t.byte_width().unwrap() / 2
            } else {
                t.byte_width().unwrap()
            };
            data.chunks_exact_mut(part).for_each(<[u8]>::reverse);
            let file = write_npy_raw(&descr, &a.dims, &data);
            prop_assert_eq!(&read_npy(&file).unwrap(), &a);
        }
    }

    #[test]
    fn damaged_npy_is_an_error_naming_it(
        (a, ms) in array().prop_flat_map(|a| {
            let len = write_npy(&a).unwrap().len();
            (Just(a), proptest::collection::vec(mutation(len), 1..4))
        })
    ) {
        let good = write_npy(&a).unwrap();
        // The header length (v1: a u16 at 8) and the bytes around the header's end.
        let fields = [8usize, 6, good.len().saturating_sub(a.data.len() + 4)];
        let mut bad = good.clone();
        for m in &ms {
            bad = apply(&bad, m, &fields);
        }
        let (got, largest) = largest_alloc(|| read_npy(&bad));
        prop_assert!(largest <= npy_cap(bad.len()), "{} bytes allocated for {}", largest, bad.len());
        match got {
            Ok(back) => {
                // Anything accepted is self-consistent.
                prop_assert_eq!(back.data.len(), back.element_type.dense_byte_size(back.len()).unwrap());
            }
            Err(e) => prop_assert!(names_a_problem(&e), "{}", e),
        }
    }

    #[test]
    fn random_bytes_after_the_magic_are_an_error(
        version in prop_oneof![Just(1u8), Just(2), Just(3), any::<u8>()],
        len in length_value(64),
        rest in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let mut bytes = b"\x93NUMPY".to_vec();
        bytes.push(version);
        bytes.push(0);
        bytes.extend_from_slice(&len.to_le_bytes()[..if version == 1 { 2 } else { 4 }]);
        bytes.extend_from_slice(&rest);
        let (got, largest) = largest_alloc(|| read_npy(&bytes));
        prop_assert!(largest <= npy_cap(bytes.len()), "{} bytes allocated", largest);
        if let Err(e) = got {
            prop_assert!(names_a_problem(&e), "{}", e);
        }
    }

    #[test]
    fn adversarial_headers_are_an_error(
        descr in prop_oneof![
            "[<>|=]?[a-zA-Z]{0,2}[0-9]{0,3}".prop_map(String::from),
            "\\PC{0,6}".prop_map(String::from),
            Just("é4".to_string()),
        ],
        fortran in prop_oneof![Just("False"), Just("True"), Just("Maybe"), Just("")],
        shape in prop_oneof![
            proptest::collection::vec(any::<i64>(), 0..6)
                .prop_map(|d| format!("({})", d.iter().map(i64::to_string).collect::<Vec<_>>().join(", "))),
            "\\PC{0,12}".prop_map(String::from),
        ],
        data in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let header = format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}\n");
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&data);
        let (got, largest) = largest_alloc(|| read_npy(&bytes));
        prop_assert!(largest <= npy_cap(bytes.len()), "{} bytes allocated", largest);
        if let Err(e) = got {
            prop_assert!(names_a_problem(&e), "{}", e);
        }
    }

    #[test]
    fn any_type_string_is_read_or_refused(descr in "\\PC{0,6}") {
        if let Err(e) = type_of_descr(&descr) {
            prop_assert!(e.to_string().contains(".npy type"), "{}", e);
        }
    }

    #[test]
    fn headers_are_read_from_a_stream_within_their_bound(
        len in length_value(128),
        v2 in any::<bool>(),
    ) {
        // A stream that never ends: the reader stops at the header's bound.
        let mut head = b"\x93NUMPY".to_vec();
        head.extend_from_slice(if v2 { b"\x02\x00" } else { b"\x01\x00" });
        head.extend_from_slice(&len.to_le_bytes()[..if v2 { 4 } else { 2 }]);
        let mut stream = std::io::Read::chain(head.as_slice(), std::io::repeat(b' '));
        let (got, largest) = largest_alloc(|| read_header(&mut stream));
        prop_assert!(largest <= 2 * MAX_HEADER + 4096, "{} bytes allocated", largest);
        prop_assert!(got.is_err());
    }
}

/// A scratch directory of this test binary.
fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("rpjrt-npy-props-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The offsets of the length fields of a zip file's local and central headers and of its
/// end record (sizes, name and extra lengths, entry counts, directory size and offset).
fn zip_fields(bytes: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    for (sig, offs) in [
        (&b"PK\x03\x04"[..], &[8usize, 18, 22, 26, 28][..]),
        (b"PK\x01\x02", &[10, 20, 24, 28, 30, 32, 42]),
        (b"PK\x05\x06", &[8, 10, 12, 16, 20]),
    ] {
        for at in bytes
            .windows(4)
            .enumerate()
            .filter(|(_, w)| *w == sig)
            .map(|(i, _)| i)
        {
            out.extend(offs.iter().map(|o| at + o));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..config() })]

    #[test]
    fn npz_round_trips_and_damage_is_an_error_naming_the_file(
        arrays in proptest::collection::vec(array(), 1..4),
        ms in proptest::collection::vec(mutation(512), 1..4),
    ) {
        let dir = temp_dir("npz");
        let path = dir.join("a.npz");
        let named: Vec<(String, Array)> = arrays
            .into_iter()
            .enumerate()
            .map(|(i, a)| (format!("a{i}"), a))
            .collect();
        save_npz(&path, &named).unwrap();
        prop_assert_eq!(&load(&path).unwrap(), &named);
        let good = std::fs::read(&path).unwrap();
        let fields = zip_fields(&good);
        let mut bad = good.clone();
        for m in &ms {
            bad = apply(&bad, m, &fields);
        }
        std::fs::write(&path, &bad).unwrap();
        // A deflated member may expand up to deflate's ratio: that much is justified.
        let (got, largest) = largest_alloc(|| load(&path));
        prop_assert!(
            largest <= 1032 * bad.len() + npy_cap(bad.len()),
            "{} bytes allocated for a {}-byte file", largest, bad.len()
        );
        if let Err(e) = got {
            prop_assert!(names_a_problem(&e), "{}", e);
            // A file that is no zip is read as a .npy file; either way the path is named.
            prop_assert!(e.to_string().contains("a.npz"), "{}", e);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_hand_built_array_of_a_huge_shape_has_no_elements_to_get() {
    // The fields are public: a shape whose count overflows is no panic.
    let a = Array {
        element_type: ElementType::F32,
        dims: vec![1 << 40, 1 << 40, 1 << 40],
        data: Vec::new(),
    };
    assert_eq!(a.len(), usize::MAX);
    assert!(a.get(5).is_none());
}
