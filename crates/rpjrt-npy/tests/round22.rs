//! Regressions from attack round 22 (numbers), on both CPU plugins where a session is
//! needed:
//!
//! - F-2: `checkpoint::restore` read a raw-byte member in big-endian order (`>V2`, which
//!   `np.savez` writes for a big-endian bfloat16 array) as native order: the slot silently
//!   got byte-swapped values. The order a type string states is now honoured for raw
//!   elements too, per element of the slot's (or the type table's) type.
//! - `<f1` (how numpy saves ml_dtypes' float8_e5m2) was refused as "has no PJRT element
//!   type" only; the refusal now names the likely type and what to do.
//! - A structured `.npy` was called "not a valid .npy file"; it is a valid file whose dtype
//!   (named) is not supported.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rpjrt::{ElementType, HostArray, Session, SlotValue};
use rpjrt_npy::checkpoint;
use rpjrt_npy::npy::write_npy_raw;

/// The core's test helpers: plugins, fixtures, compiling, error checks.
#[path = "../../rpjrt/tests/common/mod.rs"]
mod common;
mod npy_file;
use npy_file::npy;

use common::{expect_err, for_each_plugin};

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rpjrt-r22-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The bfloat16 bit patterns of `values` (exact for the values used here).
fn bf16_bits(values: &[f32]) -> Vec<u16> {
    values.iter().map(|v| (v.to_bits() >> 16) as u16).collect()
}

fn typed(t: ElementType, bytes: Vec<u8>, dims: &[i64]) -> SlotValue {
    SlotValue::Host(HostArray::from_owner(Arc::new(bytes), t, dims.to_vec()))
}

fn write(path: &Path, members: &[(&str, Vec<u8>)]) {
    let members: Vec<(String, Vec<u8>)> = members
        .iter()
        .map(|(n, b)| (n.to_string(), b.clone()))
        .collect();
    rpjrt_npy::npz::write_members(path, &members).unwrap();
}

/// A checkpoint's type table member naming `table` (JSON text).
fn table(json: &str) -> (&'static str, Vec<u8>) {
    let data: Vec<u8> = json
        .chars()
        .flat_map(|c| (c as u32).to_le_bytes())
        .collect();
    (
        checkpoint::DTYPES_KEY,
        write_npy_raw(&format!("<U{}", json.chars().count()), &[], &data),
    )
}

/// The slot's element type and its bytes (native order) as 16-bit words.
fn words(session: &Session, name: &str) -> (ElementType, Vec<i64>, Vec<u16>) {
    let b = session.fetch(name).unwrap();
    let bytes = b.to_vec().unwrap();
    (
        b.element_type(),
        b.dims().to_vec(),
        bytes
            .chunks_exact(2)
            .map(|c| u16::from_ne_bytes([c[0], c[1]]))
            .collect(),
    )
}

/// A raw 2-byte member in either stated byte order (`>V2` big-endian, `<V2` little,
/// `|V2`/`V2` native), C or Fortran order, restores the same bfloat16 values, whether its
/// type comes from the slot or from a checkpoint's type table. `>V2` was read as native.
#[test]
fn raw_void_members_honour_their_byte_order() {
    let values = [1.5f32, -2.0, 3.0, 0.5, -0.25, 96.0];
    let want = bf16_bits(&values);
    // Row-major [[1.5, -2, 3], [0.5, -0.25, 96]] and its column-major order.
    let column = [0usize, 3, 1, 4, 2, 5];
    for_each_plugin(|plugin, client| {
        let dir = temp_dir(&format!("void{}", plugin.version().minor));
        let path = dir.join("w.npz");
        for (descr, big) in [
            (">V2", true),
            ("<V2", false),
            ("|V2", false),
            ("V2", cfg!(target_endian = "big")),
        ] {
            let enc = |w: u16| {
                if big {
                    w.to_be_bytes()
                } else {
                    w.to_le_bytes()
                }
            };
            let c_data: Vec<u8> = want.iter().flat_map(|&w| enc(w)).collect();
            let f_data: Vec<u8> = column.iter().flat_map(|&i| enc(want[i])).collect();
            // From the slot's type (a bind), as np.savez writes the file.
            write(
                &path,
                &[
                    ("c", npy(descr, false, "(2, 3)", &c_data)),
                    ("f", npy(descr, true, "(2, 3)", &f_data)),
                ],
            );
            let session = Session::new(client).unwrap();
            for slot in ["c", "f"] {
                session
                    .bind(slot, typed(ElementType::BF16, vec![0; 12], &[2, 3]))
                    .unwrap();
            }
            checkpoint::restore(&session, &path).unwrap();
            for slot in ["c", "f"] {
                assert_eq!(
                    words(&session, slot),
                    (ElementType::BF16, vec![2, 3], want.clone()),
                    "{descr} member {slot}"
                );
            }
            // From a checkpoint's type table, into a fresh session (no slots).
            write(
                &path,
                &[
                    ("c", npy(descr, false, "(2, 3)", &c_data)),
                    ("f", npy(descr, true, "(2, 3)", &f_data)),
                    table(r#"{"c": "bfloat16", "f": "bfloat16"}"#),
                ],
            );
            let session = Session::new(client).unwrap();
            checkpoint::restore(&session, &path).unwrap();
            for slot in ["c", "f"] {
                assert_eq!(
                    words(&session, slot),
                    (ElementType::BF16, vec![2, 3], want.clone()),
                    "{descr} member {slot} with a type table"
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    });
}

/// One-byte raw elements have no byte order to honour: `>V1` and `<V1` restore the bytes
/// as they are (float8, int4 slots), and a numpy-named type in big-endian order is still
/// swapped (`>f2`, `>c8`).
#[test]
fn one_byte_raw_members_and_numpy_types_keep_their_values() {
    for_each_plugin(|plugin, client| {
        let dir = temp_dir(&format!("one{}", plugin.version().minor));
        let path = dir.join("w.npz");
        let f16_big: Vec<u8> = [0x3e00u16, 0xc000, 0x4200]
            .iter()
            .flat_map(|w| w.to_be_bytes())
            .collect();
        let c8_big: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        write(
            &path,
            &[
                ("e", npy(">V1", false, "(3,)", &[0x3e, 0xc0, 0x42])),
                ("i", npy("<V1", false, "(3,)", &[1, 0x0e, 7])),
                ("h", npy(">f2", false, "(3,)", &f16_big)),
                ("z", npy(">c8", false, "(1,)", &c8_big)),
            ],
        );
        let session = Session::new(client).unwrap();
        session
            .bind("e", typed(ElementType::F8E5M2, vec![0; 3], &[3]))
            .unwrap();
        session
            .bind("i", typed(ElementType::S4, vec![0; 2], &[3]))
            .unwrap();
        checkpoint::restore(&session, &path).unwrap();
        let e = session.fetch("e").unwrap();
        assert_eq!(
            (e.element_type(), e.to_vec().unwrap()),
            (ElementType::F8E5M2, vec![0x3e, 0xc0, 0x42])
        );
        let i = session.fetch("i").unwrap();
        assert_eq!(
            rpjrt::unpack_sub_byte(ElementType::S4, &i.to_vec().unwrap(), 3),
            [1, 0xfe, 7]
        );
        assert_eq!(
            words(&session, "h"),
            (ElementType::F16, vec![3], vec![0x3e00, 0xc000, 0x4200])
        );
        let z: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        assert_eq!(session.fetch("z").unwrap().to_vec().unwrap(), z);
        let _ = std::fs::remove_dir_all(&dir);
    });
}

/// `<f1` (numpy's type string for ml_dtypes' float8_e5m2, in any byte order spelling) is
/// refused naming the likely type and the forms that restore (raw bytes, a checkpoint);
/// the raw-bytes form it recommends then restores exactly. `<c4` (ml_dtypes' complex32)
/// names that type. Nothing changes in the session.
#[test]
fn one_byte_float_members_are_refused_naming_float8_e5m2() {
    for_each_plugin(|plugin, client| {
        let dir = temp_dir(&format!("f1{}", plugin.version().minor));
        let path = dir.join("w.npz");
        let bytes = vec![0x3e, 0xc0, 0x42];
        for descr in ["<f1", "|f1", ">f1", "f1"] {
            write(&path, &[("w", npy(descr, false, "(3,)", &bytes))]);
            // No slot yet: the type to give it is named.
            let session = Session::new(client).unwrap();
            expect_err(
                checkpoint::restore(&session, &path),
                &[
                    "slot \"w\"",
                    "no PJRT element type",
                    "float8_e5m2",
                    "raw bytes",
                    "view(\"V1\")",
                    "Session.save",
                    "give it the type float8_e5m2",
                ],
            );
            assert!(session.slots().is_empty());
            // A float8_e5m2 slot: still refused (the type string does not say which
            // float8 type), the slot's type named and left as it was.
            session
                .bind("w", typed(ElementType::F8E5M2, vec![0; 3], &[3]))
                .unwrap();
            expect_err(
                checkpoint::restore(&session, &path),
                &["slot \"w\" is float8_e5m2", "raw bytes", "view(\"V1\")"],
            );
            assert_eq!(session.fetch("w").unwrap().to_vec().unwrap(), vec![0; 3]);
            // What the message recommends restores the bytes exactly.
            write(&path, &[("w", npy("|V1", false, "(3,)", &bytes))]);
            checkpoint::restore(&session, &path).unwrap();
            assert_eq!(session.fetch("w").unwrap().to_vec().unwrap(), bytes);
        }
        write(&path, &[("z", npy("<c4", false, "(1,)", &[0, 0x3c, 0, 0]))]);
        let session = Session::new(client).unwrap();
        expect_err(
            checkpoint::restore(&session, &path),
            &["slot \"z\"", "\"<c4\"", "no PJRT element type", "complex32"],
        );
        let _ = std::fs::remove_dir_all(&dir);
    });
}

/// The plain reader (`rpjrt run -i`, `load`) says the same of `<f1` and `<c4`; another
/// type string PJRT lacks keeps the plain refusal.
#[test]
fn npy_reader_names_ml_dtypes_type_strings() {
    for (descr, needles) in [
        (
            "<f1",
            &[
                "\"<f1\"",
                "no PJRT element type",
                "float8_e5m2",
                "astype(numpy.float32)",
                "view(\"V1\")",
            ][..],
        ),
        (">f1", &["float8_e5m2"]),
        ("<c4", &["\"<c4\"", "complex32", "astype(numpy.complex64)"]),
    ] {
        expect_err(
            rpjrt_npy::read_npy(&npy(descr, false, "(4,)", &[0; 16])),
            needles,
        );
    }
    // PJRT has no complex32: no raw-bytes form is offered for it.
    let e = rpjrt_npy::read_npy(&npy("<c4", false, "(1,)", &[0; 4]))
        .unwrap_err()
        .to_string();
    assert!(!e.contains("view("), "{e}");
    let e = rpjrt_npy::read_npy(&npy("<f16", false, "(1,)", &[0; 16]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("has no PJRT element type") && !e.contains("ml_dtypes"),
        "{e}"
    );
}

/// A structured `.npy` (numpy's list of fields as `descr`) is a valid file whose dtype is
/// not supported: the refusal says so and names the dtype, for `.npy` files and `.npz`
/// members alike. A header that is damaged besides is still "not a valid .npy file".
#[test]
fn structured_npy_files_are_valid_files_of_an_unsupported_dtype() {
    let dir = temp_dir("structured");
    for fields in [
        "[('a', '<f4'), ('b', '<i4')]",
        "[('a', '<f4', (2,))]",
        "[('x]', '<f8'), (\"y'\", [('z', '|u1')])]",
    ] {
        let dict = format!("{{'descr': {fields}, 'fortran_order': False, 'shape': (3,), }}");
        let mut h = dict.clone();
        h.push_str(&" ".repeat((64 - (10 + h.len() + 1) % 64) % 64));
        h.push('\n');
        let mut file = b"\x93NUMPY\x01\x00".to_vec();
        file.extend_from_slice(&(h.len() as u16).to_le_bytes());
        file.extend_from_slice(h.as_bytes());
        file.extend_from_slice(&[0; 48]);
        let needles = ["a valid .npy file", fields, "structured", "not support"];
        let e = expect_err(rpjrt_npy::read_npy(&file), &needles).to_string();
        assert!(!e.contains("not a valid"), "{e}");
        let path = dir.join("s.npy");
        std::fs::write(&path, &file).unwrap();
        let e = expect_err(rpjrt_npy::load(&path), &needles).to_string();
        assert!(!e.contains("not a valid") && e.contains("s.npy"), "{e}");
        let npz = dir.join("s.npz");
        write(&npz, &[("rec", file.clone())]);
        let e = expect_err(rpjrt_npy::load(&npz), &needles).to_string();
        assert!(!e.contains("not a valid") && e.contains("rec"), "{e}");
    }
    for dict in [
        // No shape: a damaged header, whatever its dtype.
        "{'descr': [('a', '<f4')], 'fortran_order': False}",
        // The list is never closed.
        "{'descr': [('a', '<f4'), 'fortran_order': False, 'shape': (3,)}",
        // Two descr keys.
        "{'descr': [('a', '<f4')], 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}",
    ] {
        let mut h = dict.to_string();
        h.push('\n');
        let mut file = b"\x93NUMPY\x01\x00".to_vec();
        file.extend_from_slice(&(h.len() as u16).to_le_bytes());
        file.extend_from_slice(h.as_bytes());
        expect_err(rpjrt_npy::read_npy(&file), &["not a valid .npy file"]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A slot whose value lives in host memory (`pinned_host`) is restored into that memory; a
/// slot in the device's default memory stays there. (Restore used to put every value into
/// the default memory, moving a host-memory slot to the device.)
#[test]
fn restore_keeps_each_slots_memory() {
    for_each_plugin(|_, c| {
        let session = Session::new(c).unwrap();
        let dev = session.device().clone();
        // Both CPU plugins have host memories.
        let pinned = dev.memory_by_kind("pinned_host").unwrap();
        let values: Vec<u8> = [1.5f32, -2.0, 3.25]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        let host = HostArray::from_owner(Arc::new(values.clone()), ElementType::F32, vec![3]);
        let in_host = c
            .put(&host, &dev, Some(&pinned), rpjrt::CopyMode::Always)
            .unwrap();
        assert_eq!(in_host.memory().unwrap(), pinned);
        session.bind("h", SlotValue::Uploaded(in_host)).unwrap();
        session
            .bind("d", typed(ElementType::F32, values.clone(), &[3]))
            .unwrap();
        let dir = temp_dir("memory");
        let path = dir.join("ck.npz");
        checkpoint::save(&session, &path).unwrap();
        // Other values in the slots, then the checkpoint back.
        let zeros = vec![0u8; 12];
        let other = HostArray::from_owner(Arc::new(zeros.clone()), ElementType::F32, vec![3]);
        let other = c
            .put(&other, &dev, Some(&pinned), rpjrt::CopyMode::Always)
            .unwrap();
        session.bind("h", SlotValue::Uploaded(other)).unwrap();
        session
            .bind("d", typed(ElementType::F32, zeros, &[3]))
            .unwrap();
        checkpoint::restore(&session, &path).unwrap();
        let h = session.fetch("h").unwrap();
        assert_eq!(h.memory().unwrap(), pinned, "the host-memory slot moved");
        assert_eq!(h.to_vec().unwrap(), values);
        let d = session.fetch("d").unwrap();
        assert_eq!(d.memory().unwrap(), dev.default_memory().unwrap());
        assert_eq!(d.to_vec().unwrap(), values);
        std::fs::remove_dir_all(&dir).ok();
    });
}
