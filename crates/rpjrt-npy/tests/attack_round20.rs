//! Round-20 attacks on reading `.npy`/`.npz` files and checkpoints: a file replaced
//! atomically while it is read (the reader opened the path twice, and took the size from
//! a separate look at the path, so an intact file read as "damaged"), and an archive after
//! other bytes (the zip reader's directory offset counted those bytes twice).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use std::time::{Duration, Instant};

use rpjrt::Session;
use rpjrt_npy::literal::parse_literal;
use rpjrt_npy::{checkpoint, Array};

#[path = "../../rpjrt/tests/common/mod.rs"]
mod common;

use common::{expect_err, f32_slot, for_each_plugin};

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rpjrt-atk20-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn lit(text: &str) -> Array {
    parse_literal(text, None).unwrap()
}

/// Runs `replace(k)` in a loop on another thread (k counting up) while `read` runs on
/// this one for about `for_at_least` (and at least `min_reads` times); returns how many
/// reads there were. The reads panic on their own when wrong.
fn while_replaced(
    for_at_least: Duration,
    min_reads: usize,
    replace: impl Fn(usize) + Send + Sync,
    mut read: impl FnMut(),
) -> usize {
    let stop = AtomicBool::new(false);
    let mut reads = 0;
    std::thread::scope(|scope| {
        let stop = &stop;
        let replace = &replace;
        scope.spawn(move || {
            let mut k = 0;
            while !stop.load(Ordering::Relaxed) {
                replace(k);
                k += 1;
            }
        });
        let start = Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            while reads < min_reads || start.elapsed() < for_at_least {
                read();
                reads += 1;
            }
        }));
        stop.store(true, Ordering::Relaxed);
        if let Err(p) = result {
            std::panic::resume_unwind(p);
        }
    });
    reads
}

#[test]
fn a_file_replaced_atomically_while_loaded_is_read_whole_old_or_new() {
    // Three files saved in turn over one path (each save renames a new file over it): a
    // three-member archive, a one-member archive, and a .npy file. The reader opened the
    // path a second time for the central directory ("its end record counts 3 members, its
    // central directory lists 0"), a third time for a .npy file (after the first open saw
    // no zip), and took the size from a look at the path of its own.
    let dir = temp_dir("replace");
    let path = dir.join("x.npz");
    let three = vec![
        ("a".to_string(), lit("[1,2,3]:f32")),
        ("b".to_string(), lit("[[1,2],[3,4]]:int64")),
        ("c".to_string(), lit("7.5:float64")),
    ];
    let one = vec![("w".to_string(), lit("[9,8,7,6,5,4,3,2,1]:int32"))];
    let npy = lit("[1.5,2.5]:f32");
    let as_npy = vec![(String::new(), npy.clone())];
    rpjrt_npy::save_npz(&path, &three).unwrap();
    let reads = while_replaced(
        Duration::from_millis(1500),
        200,
        |k| match k % 3 {
            0 => rpjrt_npy::save_npz(&path, &three).unwrap(),
            1 => rpjrt_npy::save_npz(&path, &one).unwrap(),
            _ => rpjrt_npy::save_npy(&path, &npy).unwrap(),
        },
        || {
            let got = rpjrt_npy::load(&path)
                .unwrap_or_else(|e| panic!("a whole file, old or new, was refused: {e}"));
            assert!(
                [&three, &one, &as_npy].iter().any(|w| **w == got),
                "neither file: {got:?}"
            );
        },
    );
    assert!(reads >= 200);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_checkpoint_saved_while_it_is_restored_restores_whole() {
    // A trainer saving checkpoints while an evaluator restores the latest: about one
    // restore in a thousand was refused as "damaged .npz archive".
    for_each_plugin(|plugin, client| {
        let dir = temp_dir(&format!("ckpt{}", plugin.version().minor));
        let path = dir.join("latest.npz");
        let small = Session::new(client).unwrap();
        small.bind("w", f32_slot(&[1.0; 4])).unwrap();
        let big = Session::new(client).unwrap();
        for (k, name) in ["w", "b", "m", "v", "step"].iter().enumerate() {
            big.bind(name, f32_slot(&vec![k as f32 + 2.0; 64])).unwrap();
        }
        checkpoint::save(&small, &path).unwrap();
        let (small, big) = (&small, &big);
        while_replaced(
            Duration::from_millis(1000),
            100,
            |k| checkpoint::save(if k.is_multiple_of(2) { big } else { small }, &path).unwrap(),
            || {
                let back = Session::new(client).unwrap();
                checkpoint::restore(&back, &path)
                    .unwrap_or_else(|e| panic!("a whole checkpoint was refused: {e}"));
                let w = back.fetch("w").unwrap().to_vec_of::<f32>().unwrap();
                let n = back.slots().len();
                assert!(
                    (n == 1 && w == [1.0; 4]) || (n == 5 && w == [2.0; 64]),
                    "{n} slots, w = {w:?}"
                );
            },
        );
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

/// An archive holding `(member name, bytes)` stored, written with the zip writer.
fn zip_of(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut cursor = std::io::Cursor::new(Vec::new());
    {
        let mut zip = zip::ZipWriter::new(&mut cursor);
        for (name, bytes) in members {
            zip.start_file(
                *name,
                zip::write::SimpleFileOptions::default()
                    .compression_method(zip::CompressionMethod::Deflated),
            )
            .unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap();
    }
    cursor.into_inner()
}

/// What numpy reads as an archive after other bytes: a stub starting with a zip header
/// (numpy.load looks at the first four bytes), and others starting with `PK`.
fn prefixes() -> Vec<Vec<u8>> {
    let mut stub = b"PK\x03\x04".to_vec();
    stub.extend([0u8; 60]);
    let mut long = b"PK\x03\x04".to_vec();
    long.extend((0..5000u32).map(|i| (i * 7 % 251) as u8));
    vec![stub, b"PKjunkjunkjunkjunk".to_vec(), b"PK".to_vec(), long]
}

fn write(path: &Path, parts: &[&[u8]]) {
    std::fs::write(path, parts.concat()).unwrap();
}

#[test]
fn an_archive_after_other_bytes_is_read_as_numpy_reads_it() {
    // The directory was looked for at the zip reader's offset plus its directory start,
    // which already counts the bytes before the archive: "its end record counts 1
    // members, its central directory lists 0".
    let dir = temp_dir("prefix");
    let plain = dir.join("plain.npz");
    let path = dir.join("prefixed.npz");
    let arrays = vec![
        ("w".to_string(), lit("[0,1,2,3]:f32")),
        ("b".to_string(), lit("[[1,2],[3,4]]:int64")),
    ];
    rpjrt_npy::save_npz(&plain, &arrays).unwrap();
    let archive = std::fs::read(&plain).unwrap();
    let deflated = zip_of(&[
        ("w.npy", rpjrt_npy::write_npy(&arrays[0].1).unwrap()),
        ("b.npy", rpjrt_npy::write_npy(&arrays[1].1).unwrap()),
    ]);
    // An archive of no members (np.savez with no arrays).
    let empty = dir.join("empty.npz");
    rpjrt_npy::save_npz(&empty, &[]).unwrap();
    let empty = std::fs::read(&empty).unwrap();
    for prefix in prefixes() {
        for zip in [&archive, &deflated] {
            write(&path, &[&prefix, zip]);
            let got = rpjrt_npy::load(&path)
                .unwrap_or_else(|e| panic!("{} bytes before: {e}", prefix.len()));
            assert_eq!(got, arrays, "{} bytes before", prefix.len());
        }
        write(&path, &[&prefix, &empty]);
        let got = rpjrt_npy::load(&path)
            .unwrap_or_else(|e| panic!("empty, {} bytes before: {e}", prefix.len()));
        assert!(got.is_empty());
    }
    // Checks that read the directory still hold after other bytes: a member count lowered
    // in the end record is refused, not read as fewer members.
    let end = archive
        .windows(4)
        .rposition(|w| w == b"PK\x05\x06")
        .unwrap();
    let mut fewer = archive.clone();
    for at in [end + 8, end + 10] {
        fewer[at..at + 2].copy_from_slice(&1u16.to_le_bytes());
    }
    for prefix in prefixes() {
        write(&path, &[&prefix, &fewer]);
        expect_err(
            rpjrt_npy::load(&path),
            &[
                "damaged .npz archive",
                "end record counts 1 members, its central directory lists 2",
            ],
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_name_stored_twice_after_other_bytes_is_named() {
    // The duplicate's message named "" (no name was found where the directory was looked
    // for).
    let dir = temp_dir("dupprefix");
    let path = dir.join("dup.npz");
    let npy = rpjrt_npy::write_npy(&lit("[1]:f32")).unwrap();
    // Distinct names of one length, the third renamed in both its headers to the first.
    let mut zip = zip_of(&[
        ("w.npy", npy.clone()),
        ("v.npy", npy.clone()),
        ("x.npy", npy),
    ]);
    let mut from = 0;
    while let Some(at) = zip[from..].windows(5).position(|w| w == b"x.npy") {
        zip[from + at] = b'w';
        from += at + 1;
    }
    for prefix in prefixes() {
        write(&path, &[&prefix, &zip]);
        expect_err(
            rpjrt_npy::load(&path),
            &["dup.npz", "stores member \"w.npy\" more than once"],
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_prefixed_checkpoint_restores() {
    for_each_plugin(|plugin, client| {
        let dir = temp_dir(&format!("ckptprefix{}", plugin.version().minor));
        let path = dir.join("ckpt.npz");
        let session = Session::new(client).unwrap();
        session.bind("w", f32_slot(&[0.0, 1.0, 2.0, 3.0])).unwrap();
        checkpoint::save(&session, &path).unwrap();
        let saved = std::fs::read(&path).unwrap();
        for prefix in prefixes() {
            write(&path, &[&prefix, &saved]);
            let back = Session::new(client).unwrap();
            checkpoint::restore(&back, &path)
                .unwrap_or_else(|e| panic!("{} bytes before: {e}", prefix.len()));
            let w = back.fetch("w").unwrap().to_vec_of::<f32>().unwrap();
            assert_eq!(w, [0.0, 1.0, 2.0, 3.0]);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

#[test]
fn what_is_no_regular_file_is_refused_as_before() {
    use std::os::unix::fs::FileTypeExt as _;
    let dir = temp_dir("kinds");
    // A directory, a device, a FIFO (never opened: opening it would wait for a writer).
    let fifo = dir.join("pipe.npz");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    for p in [dir.as_path(), Path::new("/dev/zero"), fifo.as_path()] {
        let e = expect_err(rpjrt_npy::load(p), &["not a regular file"]);
        assert!(e.to_string().contains(&p.display().to_string()), "{e}");
        expect_err(
            rpjrt_npy::npz::NpzReader::open(p).map(|r| r.is_some()),
            &["not a regular file"],
        );
    }
    expect_err(
        rpjrt_npy::load(dir.join("missing.npz")),
        &["missing.npz", "No such file"],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
