//! Session checkpoints (`rpjrt_npy::checkpoint`) on both CPU plugins: round trips of every
//! kind of slot, plain `np.savez` files, damaged files, and the checkpoint defects of
//! issue 21 (names that changed across a round trip, duplicate members merged silently,
//! members inflated before their header was checked).

use std::io::Write;
use std::sync::Arc;

use proptest::prelude::*;
use rpjrt::{Client, ClientOptions, ElementType, HostArray, Session, SlotValue};
use rpjrt_npy::checkpoint;

/// The core's test helpers: plugins, fixtures, compiling, error checks.
#[path = "../../rpjrt/tests/common/mod.rs"]
mod common;
mod npy_file;
use npy_file::npy;

use common::{compile, expect_err, fixture, for_each_plugin};

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

fn host(values: &[f32], dims: &[i64]) -> SlotValue {
    typed(ElementType::F32, f32_bytes(values), dims)
}

fn typed(t: ElementType, bytes: Vec<u8>, dims: &[i64]) -> SlotValue {
    SlotValue::Host(HostArray::from_owner(Arc::new(bytes), t, dims.to_vec()))
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("rpjrt-ckpt-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn session_saves_and_restores_checkpoints() {
    let text = String::from_utf8(fixture("sgd_step.mlir")).unwrap();
    for_each_plugin(|plugin, client| {
        let dir = temp_dir(&format!("rt{}", plugin.version().minor));
        let path = dir.join("ckpt.npz");
        let exe = compile(client, &text);
        let session = Session::new(client).unwrap();
        let step = session
            .program(&exe, &["w", "x", "y"], &["w", "loss"])
            .unwrap();
        let w0: Vec<f32> = (0..8).map(|i| 0.1 * i as f32).collect();
        session.bind("w", host(&w0, &[4, 2])).unwrap();
        session.bind("x", host(&[0.5; 32], &[8, 4])).unwrap();
        session
            .bind_lazy("y", Arc::new(|| Ok(host(&[0.25; 16], &[8, 2]))))
            .unwrap();
        // Types numpy has no type string for, a sub-byte one, a 0-d and a zero-size array.
        session
            .bind(
                "bf",
                typed(ElementType::BF16, vec![0x80, 0x3f, 0x00, 0xc0], &[2]),
            )
            .unwrap();
        session
            .bind("i4", typed(ElementType::S4, vec![0x21, 0x0f], &[3]))
            .unwrap();
        session
            .bind(
                "s",
                typed(ElementType::S64, 7i64.to_le_bytes().to_vec(), &[]),
            )
            .unwrap();
        session
            .bind("z", typed(ElementType::F32, Vec::new(), &[0, 3]))
            .unwrap();
        step.call().unwrap();
        checkpoint::save(&session, &path).unwrap();
        // The temporary file is gone; the member names are the slots.
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
        let saved: Vec<(String, Vec<u8>)> = ["w", "x", "y", "loss", "bf", "i4", "s", "z"]
            .iter()
            .map(|n| (n.to_string(), session.fetch(n).unwrap().to_vec().unwrap()))
            .collect();
        step.call().unwrap();
        step.call().unwrap();

        // Into a fresh session (slots are created) and back into the same one.
        let other = Session::new(client).unwrap();
        checkpoint::restore(&other, &path).unwrap();
        let uploads = session.uploads();
        checkpoint::restore(&session, &path).unwrap();
        assert_eq!(session.uploads(), uploads + saved.len());
        for (n, want) in &saved {
            assert_eq!(&session.fetch(n).unwrap().to_vec().unwrap(), want, "{n}");
            assert_eq!(&other.fetch(n).unwrap().to_vec().unwrap(), want, "{n}");
        }
        assert_eq!(other.fetch("bf").unwrap().element_type(), ElementType::BF16);
        assert_eq!(other.fetch("i4").unwrap().dims(), &[3]);
        // The restored session runs.
        let again = other
            .program(&exe, &["w", "x", "y"], &["w", "loss"])
            .unwrap();
        again.call().unwrap();

        // A slot whose shape differs is named, and nothing changes.
        let small = Session::new(client).unwrap();
        small.bind("x", host(&[1.0; 4], &[4])).unwrap();
        expect_err(
            checkpoint::restore(&small, &path),
            &["slot \"x\" holds float32[4]", "float32[8, 4]", "ckpt.npz"],
        );
        assert_eq!(small.slots().len(), 1);
        let typed_slot = Session::new(client).unwrap();
        typed_slot
            .bind("s", typed(ElementType::S32, vec![0; 4], &[]))
            .unwrap();
        expect_err(
            checkpoint::restore(&typed_slot, &path),
            &["slot \"s\"", "int32", "int64"],
        );

        // Damaged files: truncated, a flipped data byte (CRC), not a zip, missing.
        let good = std::fs::read(&path).unwrap();
        let bad = dir.join("bad.npz");
        for cut in [10, good.len() / 2, good.len() - 1] {
            std::fs::write(&bad, &good[..cut]).unwrap();
            let e = checkpoint::restore(&other, &bad).unwrap_err();
            assert!(e.to_string().contains("bad.npz"), "{cut}: {e}");
        }
        let mut flipped = good.clone();
        let at = good.windows(6).position(|w| w == b"\x93NUMPY").unwrap() + 130;
        flipped[at] ^= 0xff;
        std::fs::write(&bad, &flipped).unwrap();
        expect_err(checkpoint::restore(&other, &bad), &["bad.npz", "damaged"]);
        // Single-byte flips and truncations across the file (every 11th byte, to keep the
        // debug-build test short): an error or (where the byte is one no reader checks,
        // such as a timestamp) a clean restore, never a panic.
        for at in (0..good.len()).step_by(11) {
            let mut f = good.clone();
            f[at] ^= 0x5a;
            std::fs::write(&bad, &f).unwrap();
            let _ = checkpoint::restore(&Session::new(client).unwrap(), &bad);
            std::fs::write(&bad, &good[..at]).unwrap();
            assert!(
                checkpoint::restore(&Session::new(client).unwrap(), &bad).is_err(),
                "cut at {at}"
            );
        }
        std::fs::write(&bad, b"\x93NUMPY not a zip").unwrap();
        expect_err(checkpoint::restore(&other, &bad), &["not an .npz archive"]);
        expect_err(
            checkpoint::restore(&other, dir.join("missing.npz")),
            &["missing.npz"],
        );
        expect_err(checkpoint::restore(&other, &dir), &["not a regular file"]);

        // A deleted slot is named, and the old file is left as it was.
        session.fetch("x").unwrap().delete().unwrap();
        expect_err(checkpoint::save(&session, &path), &["slot \"x\""]);
        assert_eq!(std::fs::read(&path).unwrap(), good);
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

#[test]
fn session_restores_plain_npz_files() {
    // What np.savez writes: C- and Fortran-order members, big-endian, and bfloat16 as raw
    // bytes (|V2), which takes its slot's type.
    for_each_plugin(|plugin, client| {
        let dir = temp_dir(&format!("np{}", plugin.version().minor));
        let path = dir.join("plain.npz");
        let f32s = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
        let members = [
            (
                "c",
                npy("<f4", false, "(2, 3)", &f32s(&[0., 1., 2., 3., 4., 5.])),
            ),
            // Column-major [[0, 1, 2], [3, 4, 5]].
            (
                "f",
                npy("<f4", true, "(2, 3)", &f32s(&[0., 3., 1., 4., 2., 5.])),
            ),
            (
                "b",
                npy(">i4", false, "(2,)", &[0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe]),
            ),
            ("h", npy("|V2", false, "(2,)", &[0x80, 0x3f, 0x00, 0xc0])),
        ];
        {
            use std::io::Write;
            let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
            for (name, bytes) in &members {
                zip.start_file(
                    format!("{name}.npy"),
                    zip::write::SimpleFileOptions::default()
                        .compression_method(zip::CompressionMethod::Stored),
                )
                .unwrap();
                zip.write_all(bytes).unwrap();
            }
            zip.finish().unwrap();
        }
        let session = Session::new(client).unwrap();
        // Without a type for "h" the raw bytes name nothing.
        expect_err(
            checkpoint::restore(&session, &path),
            &["slot \"h\"", "raw 2-byte", "|V2"],
        );
        assert!(session.slots().is_empty());
        session
            .bind("h", typed(ElementType::BF16, vec![0; 4], &[2]))
            .unwrap();
        checkpoint::restore(&session, &path).unwrap();
        let want = f32s(&[0., 1., 2., 3., 4., 5.]);
        assert_eq!(session.fetch("c").unwrap().to_vec().unwrap(), want);
        assert_eq!(session.fetch("f").unwrap().to_vec().unwrap(), want);
        assert_eq!(
            session.fetch("b").unwrap().to_vec_of::<i32>().unwrap(),
            vec![258, -2]
        );
        assert_eq!(
            session.fetch("h").unwrap().to_vec().unwrap(),
            vec![0x80, 0x3f, 0x00, 0xc0]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

/// Every slot's name and bytes, sorted by name.
fn contents(session: &Session) -> Vec<(String, ElementType, Vec<i64>, Vec<u8>)> {
    let mut out: Vec<_> = session
        .slots()
        .into_iter()
        .map(|s| {
            let b = session.fetch(&s.name).unwrap();
            (
                s.name,
                b.element_type(),
                b.dims().to_vec(),
                b.to_vec().unwrap(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn slot_names_round_trip_exactly() {
    // Issue 21: `w.npy` came back as `w`, and a session holding `w` and `w.npy` wrote a
    // checkpoint that restore refused. (Round 27: `w` beside `w.npy` is refused at save,
    // as numpy.load gives slot `w` under both keys; see checkpoint.rs's unit tests.)
    for_each_plugin(|plugin, client| {
        let dir = temp_dir(&format!("names{}", plugin.version().minor));
        let path = dir.join("names.npz");
        let session = Session::new(client).unwrap();
        let names = [
            "w",
            "w.npy.npy",
            ".npy",
            "a/b",
            "../up",
            "x y",
            "ünï ☃",
            "npy",
            "__x__",
        ];
        for (k, n) in names.iter().enumerate() {
            session.bind(n, host(&[k as f32, -1.0], &[2])).unwrap();
        }
        checkpoint::save(&session, &path).unwrap();
        let back = Session::new(client).unwrap();
        checkpoint::restore(&back, &path).unwrap();
        assert_eq!(contents(&back), contents(&session));
        // What np.load sees: the member names are the slot names plus `.npy`.
        let arrays = rpjrt_npy::load(&path);
        // (The type table is a numpy string, which a plain load refuses.)
        expect_err(arrays, &["__rpjrt_dtypes__", "<U"]);
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

#[test]
fn slot_names_with_nul_are_refused_at_save() {
    // numpy reads member "a\0b.npy" as "a": saved beside a slot "a", np.load gave the
    // other slot's values under "a".
    for_each_plugin(|plugin, client| {
        let dir = temp_dir(&format!("nul{}", plugin.version().minor));
        let path = dir.join("nul.npz");
        let session = Session::new(client).unwrap();
        session.bind("a", host(&[0.0, 0.0], &[2])).unwrap();
        session.bind("a\0b", host(&[1.0, 1.0], &[2])).unwrap();
        expect_err(
            checkpoint::save(&session, &path),
            &["\"a\\0b\"", "NUL", "load as \"a\""],
        );
        assert!(!path.exists(), "nothing is written");
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

/// A stored zip of `(member name, bytes)` written without the zip writer's duplicate check:
/// built with distinct placeholder names of the same length, then renamed in place (names
/// are outside the CRC).
fn zip_with_names(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut cursor = std::io::Cursor::new(Vec::new());
    let placeholders: Vec<String> = members
        .iter()
        .enumerate()
        .map(|(k, (n, _))| ((b'A' + k as u8) as char).to_string().repeat(n.len()))
        .collect();
    {
        let mut zip = zip::ZipWriter::new(&mut cursor);
        for ((_, bytes), p) in members.iter().zip(&placeholders) {
            zip.start_file(
                p.as_str(),
                zip::write::SimpleFileOptions::default()
                    .compression_method(zip::CompressionMethod::Stored),
            )
            .unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap();
    }
    let mut out = cursor.into_inner();
    for ((name, _), p) in members.iter().zip(&placeholders) {
        let mut from = 0;
        while let Some(at) = out[from..]
            .windows(p.len())
            .position(|w| w == p.as_bytes())
            .map(|i| i + from)
        {
            // Only the name fields: preceded by a local (30-byte) or central (46-byte) header.
            let sig = |o: usize| at >= o && out[at - o..at - o + 4].starts_with(b"PK");
            if sig(30) || sig(46) {
                out[at..at + p.len()].copy_from_slice(name.as_bytes());
            }
            from = at + 1;
        }
    }
    out
}

#[test]
fn duplicate_members_are_refused_by_name() {
    let npy = |v: f32| rpjrt_npy::npy::write_npy_raw("<f4", &[1], &v.to_le_bytes());
    for_each_plugin(|plugin, client| {
        let dir = temp_dir(&format!("dup{}", plugin.version().minor));
        let path = dir.join("dup.npz");
        // The same member name twice: the zip reader would keep only the last.
        std::fs::write(
            &path,
            zip_with_names(&[
                ("w.npy", npy(1.0)),
                ("v.npy", npy(3.0)),
                ("w.npy", npy(2.0)),
            ]),
        )
        .unwrap();
        let session = Session::new(client).unwrap();
        expect_err(
            checkpoint::restore(&session, &path),
            &["dup.npz", "stores member \"w.npy\" more than once"],
        );
        assert!(session.slots().is_empty());
        expect_err(rpjrt_npy::load(&path), &["\"w.npy\" more than once"]);
        // Two members that name one array (`w` and `w.npy`, as np.load reads them).
        std::fs::write(
            &path,
            zip_with_names(&[("w.npy", npy(1.0)), ("w", npy(2.0))]),
        )
        .unwrap();
        expect_err(
            checkpoint::restore(&session, &path),
            &["members \"w.npy\" and \"w\" both hold the array \"w\""],
        );
        assert!(session.slots().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

/// `bytes` (a one-member zip) with the member's declared uncompressed size set to `size`,
/// in the local and the central header.
fn declare_size(mut bytes: Vec<u8>, size: u32) -> Vec<u8> {
    let local = bytes.windows(4).position(|w| w == b"PK\x03\x04").unwrap();
    let central = bytes.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
    bytes[local + 22..local + 26].copy_from_slice(&size.to_le_bytes());
    bytes[central + 24..central + 28].copy_from_slice(&size.to_le_bytes());
    bytes
}

fn deflated_zip(name: &str, bytes: &[u8]) -> Vec<u8> {
    let mut cursor = std::io::Cursor::new(Vec::new());
    let mut zip = zip::ZipWriter::new(&mut cursor);
    zip.start_file(
        name,
        zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated),
    )
    .unwrap();
    zip.write_all(bytes).unwrap();
    zip.finish().unwrap();
    cursor.into_inner()
}

#[test]
fn members_are_checked_before_they_are_inflated() {
    // Issue 21: a small archive whose member inflates to far more than its slot holds was
    // inflated in full before its header was compared with the slot.
    let n = 4 << 20; // 16 MiB of float32 zeros, about 16 KiB deflated
    let mut member = rpjrt_npy::npy::write_npy_raw("<f4", &[n], &[]);
    member.resize(member.len() + 4 * n as usize, 0);
    let good = deflated_zip("w.npy", &member);
    // Damage the end of the deflated stream: whoever inflates the data fails.
    let mut bomb = good.clone();
    let central = bomb.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
    bomb[central - 3] ^= 0xff;
    for_each_plugin(|plugin, client| {
        let dir = temp_dir(&format!("bomb{}", plugin.version().minor));
        let path = dir.join("bomb.npz");
        std::fs::write(&path, &bomb).unwrap();
        // Without a slot the data is read, and the damage found.
        expect_err(
            checkpoint::restore(&Session::new(client).unwrap(), &path),
            &["bomb.npz", "damaged"],
        );
        // With a slot of another shape the header alone refuses it: the error is the
        // mismatch, not the damage, so the data was never inflated.
        let session = Session::new(client).unwrap();
        session.bind("w", host(&[0.0; 4], &[4])).unwrap();
        expect_err(
            checkpoint::restore(&session, &path),
            &[
                "slot \"w\" holds float32[4]",
                "float32[4194304]",
                "bomb.npz",
            ],
        );
        // A declared size that disagrees with the header is refused before inflating; a
        // stream longer than its header says is cut off after one byte too many (the zip
        // reader, which stops at the declared size, reports it first).
        let small = rpjrt_npy::npy::write_npy_raw("<f4", &[4], &[0; 16]);
        let declared = |size| declare_size(deflated_zip("w.npy", &small), size);
        std::fs::write(&path, declared(400 << 20)).unwrap();
        expect_err(
            checkpoint::restore(&session, &path),
            &["member \"w\" claims 419430400 bytes: the archive is damaged"],
        );
        std::fs::write(&path, declared(1000)).unwrap();
        expect_err(
            checkpoint::restore(&session, &path),
            &["member \"w\" is 1000 bytes, but its .npy header describes 144"],
        );
        let mut long = small.clone();
        long.resize(small.len() + (8 << 20), 0);
        let lying = declare_size(deflated_zip("w.npy", &long), small.len() as u32);
        std::fs::write(&path, lying).unwrap();
        expect_err(
            checkpoint::restore(&session, &path),
            &["member \"w\" is damaged"],
        );
        assert_eq!(
            session.fetch("w").unwrap().to_vec().unwrap(),
            f32_bytes(&[0.0; 4])
        );
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

/// A slot name: any non-empty string but the reserved type-table name.
fn slot_name() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z]{1,6}", "[a-z]{1,4}(\\.npy){1,2}", "\\PC{1,12}",]
        .prop_filter("reserved", |n| n != checkpoint::DTYPES_KEY)
}

/// A slot value: a type (numpy's and ml_dtypes'), a shape of up to rank 3 and random bytes.
fn slot_value() -> impl Strategy<Value = (ElementType, Vec<i64>, Vec<u8>)> {
    use ElementType as T;
    let types = prop::sample::select(vec![
        T::Pred,
        T::S8,
        T::S32,
        T::U16,
        T::U64,
        T::F16,
        T::BF16,
        T::F32,
        T::F64,
        T::C64,
        T::S4,
        T::U2,
        T::F8E4M3FN,
        T::F8E5M2,
    ]);
    (types, prop::collection::vec(0i64..4, 0..=3)).prop_flat_map(|(t, dims)| {
        let n = dims.iter().product::<i64>() as usize;
        // Sub-byte types as one element per byte (unpacked).
        let len = n * t.host_itemsize();
        (Just(t), Just(dims), prop::collection::vec(any::<u8>(), len))
    })
}

/// Valid elements only: bools 0 or 1, sub-byte values in the low bits of their byte.
fn sanitize(t: ElementType, data: &mut [u8]) {
    if t == ElementType::Pred {
        data.iter_mut().for_each(|b| *b &= 1);
    } else if t.is_sub_byte() {
        let mask = (1u8 << t.bit_width()) - 1;
        data.iter_mut().for_each(|b| *b &= mask);
    }
}

#[test]
fn checkpoints_round_trip_any_slots() {
    let plugin = common::plugin(common::Which::New);
    let client = Client::new(&plugin, &ClientOptions::new()).unwrap();
    let dir = temp_dir("prop");
    let path = dir.join("p.npz");
    let config = ProptestConfig {
        cases: 24,
        ..ProptestConfig::default()
    };
    proptest!(config, |(slots in prop::collection::btree_map(slot_name(), slot_value(), 1..6))| {
        let session = Session::new(&client).unwrap();
        for (name, (t, dims, data)) in &slots {
            let mut data = data.clone();
            sanitize(*t, &mut data);
            let mut h = HostArray::from_owner(Arc::new(data), *t, dims.clone());
            if t.is_sub_byte() {
                h = h.unpacked();
            }
            session.bind(name, SlotValue::Host(h)).unwrap();
        }
        checkpoint::save(&session, &path).unwrap();
        let back = Session::new(&client).unwrap();
        checkpoint::restore(&back, &path).unwrap();
        prop_assert_eq!(contents(&back), contents(&session));
        // Restoring into the session it came from changes nothing.
        checkpoint::restore(&session, &path).unwrap();
        prop_assert_eq!(contents(&back), contents(&session));
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn threads_saving_to_one_path_each_write_a_whole_file() {
    // The temporary file was named after the process only: two threads saving to one path
    // shared it, and about half the saves failed ("No such file or directory") when the
    // other thread's rename had taken it.
    for_each_plugin(|plugin, client| {
        let dir = temp_dir(&format!("threads{}", plugin.version().minor));
        let path = dir.join("shared.npz");
        let sessions: Vec<Session> = (0..4)
            .map(|k| {
                let s = Session::new(client).unwrap();
                s.bind("w", host(&vec![k as f32; 50_000], &[50_000]))
                    .unwrap();
                s
            })
            .collect();
        std::thread::scope(|scope| {
            for s in &sessions {
                let path = &path;
                scope.spawn(move || {
                    for _ in 0..20 {
                        checkpoint::save(s, path).unwrap();
                    }
                });
            }
        });
        let back = Session::new(client).unwrap();
        checkpoint::restore(&back, &path).unwrap();
        let w = back.fetch("w").unwrap().to_vec_of::<f32>().unwrap();
        assert!(w.iter().all(|v| *v == w[0]), "one session's values, whole");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

/// A byte that is no value of a narrow type (int4 0x7f: not sign-extended from 4 bits) is
/// refused naming the slot; it was packed to its low bits and restored as another value.
#[test]
fn narrow_type_bytes_out_of_range_are_refused() {
    let text_npy = |text: &str| {
        let data: Vec<u8> = text
            .chars()
            .flat_map(|c| (c as u32).to_le_bytes())
            .collect();
        rpjrt_npy::npy::write_npy_raw(&format!("<U{}", text.chars().count()), &[], &data)
    };
    for_each_plugin(|plugin, client| {
        let dir = temp_dir(&format!("narrow{}", plugin.version().minor));
        let path = dir.join("ck.npz");
        let write = |bytes: &[u8], ty: &str| {
            rpjrt_npy::npz::write_members(
                &path,
                &[
                    (
                        "w".to_string(),
                        rpjrt_npy::npy::write_npy_raw("|u1", &[3, 1], bytes),
                    ),
                    (
                        checkpoint::DTYPES_KEY.to_string(),
                        text_npy(&format!("{{\"w\": \"{ty}\"}}")),
                    ),
                ],
            )
            .unwrap()
        };
        let session = Session::new(client).unwrap();
        // Valid: -2 sign-extended (0xfe, as rpjrt writes it) or as its own 4 bits (0x0e,
        // as ml_dtypes holds it).
        for bytes in [[1u8, 0xfe, 3], [1, 0x0e, 3]] {
            write(&bytes, "int4");
            checkpoint::restore(&session, &path).unwrap();
            let b = session.fetch("w").unwrap();
            assert_eq!(
                rpjrt::unpack_sub_byte(ElementType::S4, &b.to_vec().unwrap(), 3),
                [1, 0xfe, 3]
            );
        }
        for (bytes, ty, byte) in [
            (&[1u8, 0x7f, 3][..], "int4", "0x7f"),
            (&[1, 0x80, 3], "int4", "0x80"),
            (&[1, 16, 3], "uint4", "0x10"),
            (&[1, 2, 4], "uint2", "0x04"),
            (&[1, 64, 3], "float6_e2m3fn", "0x40"),
        ] {
            write(bytes, ty);
            let fresh = Session::new(client).unwrap();
            let e = checkpoint::restore(&fresh, &path).unwrap_err().to_string();
            assert!(e.contains("slot \"w\"") && e.contains(byte), "{ty}: {e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    });
}

#[test]
fn damaged_checkpoints_are_refused_naming_the_file_and_change_nothing() {
    // A checkpoint with a type table (bfloat16 and int4 slots) and plain slots, damaged:
    // bit flips anywhere, truncations, appended bytes, and the zip headers' size, length
    // and count fields set to 0, huge or just past the end. Restoring it is an error
    // naming the file (or the slot), never a panic, and the session is left as it was.
    let plugin = common::plugin(common::Which::New);
    let client = Client::new(&plugin, &ClientOptions::new()).unwrap();
    let dir = temp_dir("damaged");
    let path = dir.join("c.npz");
    let session = Session::new(&client).unwrap();
    session.bind("w", host(&[1.0, 2.0, 3.0], &[3])).unwrap();
    session
        .bind(
            "b",
            typed(ElementType::BF16, vec![0x80, 0x3f, 0, 0x40], &[2]),
        )
        .unwrap();
    session
        .bind(
            "q",
            SlotValue::Host(
                HostArray::from_owner(Arc::new(vec![1u8, 0x0e, 7]), ElementType::S4, vec![3])
                    .unpacked(),
            ),
        )
        .unwrap();
    checkpoint::save(&session, &path).unwrap();
    let good = std::fs::read(&path).unwrap();
    // Offsets of the zip headers' length fields.
    let mut fields = Vec::new();
    for (sig, offs) in [
        (&b"PK\x03\x04"[..], &[18usize, 22, 26, 28][..]),
        (b"PK\x01\x02", &[20, 24, 28, 30, 32, 42]),
        (b"PK\x05\x06", &[8, 10, 12, 16]),
    ] {
        for (at, _) in good.windows(4).enumerate().filter(|(_, w)| *w == sig) {
            fields.extend(offs.iter().map(|o| at + o));
        }
    }
    let config = ProptestConfig {
        cases: 64,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0xc4ec),
        ..ProptestConfig::default()
    };
    let values = prop_oneof![Just(0u32), Just(1), Just(u32::MAX), any::<u32>()];
    let damage = (0u8..4, any::<usize>(), 0u8..8, values);
    proptest!(config, |(ds in prop::collection::vec(damage, 1..3))| {
        let mut bad = good.clone();
        for (kind, at, bit, v) in &ds {
            let n = bad.len();
            match kind {
                0 => bad[at % n] ^= 1 << bit,
                1 => bad.truncate(at % n),
                2 => bad.extend_from_slice(&v.to_le_bytes()),
                _ => {
                    let o = fields[at % fields.len()];
                    if o + 4 <= n {
                        bad[o..o + 4].copy_from_slice(&(v.wrapping_add(u32::from(*bit))).to_le_bytes());
                    }
                }
            }
        }
        std::fs::write(&path, &bad).unwrap();
        let fresh = Session::new(&client).unwrap();
        fresh.bind("w", host(&[9.0, 9.0, 9.0], &[3])).unwrap();
        let before = contents(&fresh);
        match checkpoint::restore(&fresh, &path) {
            Ok(()) => prop_assert_eq!(contents(&fresh).len(), 3),
            Err(e) => {
                let text = e.to_string();
                prop_assert!(text.contains("c.npz") || text.contains("slot"), "{}", text);
                prop_assert_eq!(contents(&fresh), before);
            }
        }
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A save from another thread while a step runs waits for the step and writes its outputs:
/// a checkpoint is one state of the session, never slots from two steps (it fetched slot by
/// slot, so a step landing between two fetches mixed them).
#[test]
fn a_save_during_a_step_writes_one_state() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};
    static ENTERED: AtomicBool = AtomicBool::new(false);
    static GO: AtomicBool = AtomicBool::new(false);
    for_each_plugin(|p, client| {
        let target = format!(
            "ckpt_hold_{}",
            if common::is_old(p) { "old" } else { "new" }
        );
        rpjrt::ffi::register(client, &target, |call| {
            ENTERED.store(true, Ordering::SeqCst);
            let t0 = Instant::now();
            while !GO.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(1));
            }
            let (args, rets) = call.split();
            let x = args[0].as_slice::<f32>()?;
            for (y, x) in rets[0].as_mut_slice::<f32>()?.iter_mut().zip(x) {
                *y = x + 1.0;
            }
            Ok(())
        })
        .unwrap();
        let exe = compile(
            client,
            &format!(
                "func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}}"
            ),
        );
        let s = Session::new(client).unwrap();
        let step = s.program(&exe, &["w"], &["w"]).unwrap();
        s.bind("w", host(&[0.0; 4], &[4])).unwrap();
        let path = temp_dir(&format!("during-step-{}", p.version())).join("ckpt.npz");
        ENTERED.store(false, Ordering::SeqCst);
        GO.store(false, Ordering::SeqCst);
        std::thread::scope(|sc| {
            let stepper = sc.spawn(|| step.call().unwrap());
            while !ENTERED.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            let saver = sc.spawn(|| checkpoint::save(&s, &path).unwrap());
            std::thread::sleep(Duration::from_millis(200));
            let waited = !saver.is_finished();
            GO.store(true, Ordering::SeqCst);
            stepper.join().unwrap();
            saver.join().unwrap();
            assert!(
                waited,
                "{}: the save did not wait for the step",
                common::label(p)
            );
        });
        let restored = Session::new(client).unwrap();
        checkpoint::restore(&restored, &path).unwrap();
        let w = restored.fetch("w").unwrap().to_vec_of::<f32>().unwrap();
        assert_eq!(w, vec![1.0; 4], "{}", common::label(p));
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    });
}

/// A checkpoint is taken at one moment even when taking it runs code: here slot `b`'s
/// loader (run by the save) steps the session, and the file holds the state after that
/// step, not `a` from before it beside `b` from after.
#[test]
fn a_checkpoint_does_not_mix_slots_from_before_and_after_a_step() {
    for_each_plugin(|p, client| {
        let exe = compile(
            client,
            "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<1.0> : tensor<4xf32>
  %0 = stablehlo.add %a, %c : tensor<4xf32>
  return %0 : tensor<4xf32>
}",
        );
        let s = Session::new(client).unwrap();
        let step = s.program(&exe, &["a"], &["a"]).unwrap();
        s.bind("a", host(&[0.0; 4], &[4])).unwrap();
        let stepper = step.clone();
        s.bind_lazy(
            "b",
            Arc::new(move || {
                let st = stepper.clone();
                std::thread::spawn(move || st.call()).join().unwrap()?;
                Ok(host(&[7.0; 4], &[4]))
            }),
        )
        .unwrap();
        let path = temp_dir(&format!("one-moment-{}", p.version())).join("ckpt.npz");
        checkpoint::save(&s, &path).unwrap();
        let restored = Session::new(client).unwrap();
        checkpoint::restore(&restored, &path).unwrap();
        let a = restored.fetch("a").unwrap().to_vec_of::<f32>().unwrap();
        let b = restored.fetch("b").unwrap().to_vec_of::<f32>().unwrap();
        assert_eq!((a, b), (vec![1.0; 4], vec![7.0; 4]), "{}", common::label(p));
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    });
}

#[test]
fn save_errors_keep_their_kind() {
    // r13: a save after client.close() was an InvalidArgument error (Python's
    // InvalidArgumentError); it is the closed client's error, as every other call gives.
    for_each_plugin(|p, client| {
        let dir = temp_dir(&format!("kind{}", p.version().minor));
        let path = dir.join("kind.npz");
        let session = Session::new(client).unwrap();
        session.bind("w", host(&[1.0, 2.0], &[2])).unwrap();
        client.close().unwrap();
        let e = checkpoint::save(&session, &path).unwrap_err();
        assert!(
            matches!(e, rpjrt::Error::Closed(_)),
            "{}: {e:?}",
            common::label(p)
        );
        assert_eq!(e.code(), rpjrt::Code::FailedPrecondition);
        assert!(!path.exists(), "nothing is written");
        let _ = std::fs::remove_dir_all(&dir);
    });
}
