//! numpy's `.npy` and `.npz` files for rpjrt: host arrays ([`Array`]), the command line's
//! typed literals ([`literal::parse_literal`]) and [`rpjrt::Session`] checkpoints
//! ([`checkpoint::save`], [`checkpoint::restore`]). Built on rpjrt's public API only; numpy
//! is never needed.
//!
//! Types: every numpy type PJRT has (bool, int8..int64, uint8..uint64, float16/32/64,
//! complex64/128), in either byte order. ml_dtypes types (bfloat16, float8, int4 ...) have
//! no numpy type string: numpy stores them as raw void (`|V2`), so a plain [`load`] refuses
//! them with a message saying so, while a checkpoint records them in a type table of its
//! own and [`checkpoint::restore`] also takes raw void members from a slot of known type.
//! Type strings come from the core's one element-type table.
//!
//! ```
//! # fn main() -> rpjrt::Result<()> {
//! use rpjrt::ElementType;
//! use rpjrt_npy::{literal::parse_literal, read_npy, write_npy};
//!
//! let a = parse_literal("[[1, 2], [3, 4]]:f32", None)?;
//! assert_eq!((a.element_type, a.dims.clone()), (ElementType::F32, vec![2, 2]));
//! let bytes = write_npy(&a)?; // what np.save writes
//! assert_eq!(read_npy(&bytes)?, a);
//!
//! let dir = std::env::temp_dir().join(format!("rpjrt-npy-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("arrays.npz");
//! rpjrt_npy::save_npz(&path, &[("a".into(), a.clone())])?; // as np.savez(path, a=a)
//! assert_eq!(rpjrt_npy::load(&path)?, vec![("a".to_string(), a)]);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod array;
pub mod checkpoint;
pub mod literal;
pub mod npy;
pub mod npz;
pub mod scalars;

use std::path::Path;

pub use array::Array;
pub use npy::{descr_of, read_npy, type_of_descr, write_npy};
use rpjrt::{Error, Result};

/// An invalid-argument error.
pub(crate) fn invalid(msg: impl Into<String>) -> Error {
    Error::InvalidArgument(msg.into())
}

/// Reads a `.npy` file (one array, named `""`) or a `.npz` file (its arrays by name, in
/// archive order). Only regular files are opened. An `.npz` member's header is checked
/// against the size the archive declares before its data is inflated.
pub fn load(path: impl AsRef<Path>) -> Result<Vec<(String, Array)>> {
    load_checked(path, |_, _, _| Ok(()))
}

/// [`load`], with `check(name, element_type, dims)` called on each array's header before
/// any of its data is read or inflated: an error from it ends the load, so an array the
/// caller cannot use (a wrong type or shape, a huge one) costs a header read, not its data.
pub fn load_checked(
    path: impl AsRef<Path>,
    mut check: impl FnMut(&str, rpjrt::ElementType, &[i64]) -> Result<()>,
) -> Result<Vec<(String, Array)>> {
    let path = path.as_ref();
    // Opened once: the .npy reading below reads the very file this looked at.
    let (file, len) = match npz::NpzReader::open_any(path)? {
        npz::Opened::Npz(npz) => return load_members(path, npz, check),
        npz::Opened::Other(file, len) => (file, len),
    };
    // A .npy file: its header first, its size that of the file open (not another look at
    // `path`, which an atomic save may have replaced since).
    let fail = |e: &dyn std::fmt::Display| npz::io_err(path, e);
    let mut file = std::io::BufReader::new(file);
    let h = npy::read_header(&mut file).map_err(|e| fail(&npz::bare(&e)))?;
    let (t, big, want) = npy::array_layout(&h).map_err(|e| fail(&npz::bare(&e)))?;
    let have = len.saturating_sub(h.len as u64);
    if have != want as u64 {
        return Err(fail(&format!(
            "not a valid .npy file: shape {:?} of {t} needs {want} data bytes, the file has \
             {have}",
            h.dims
        )));
    }
    check("", t, &h.dims)?;
    let mut data = Vec::new();
    data.try_reserve_exact(want).map_err(|_| {
        rpjrt::Error::ResourceExhausted(format!("{want} bytes for {}", path.display()))
    })?;
    std::io::Read::read_to_end(&mut std::io::Read::take(&mut file, want as u64), &mut data)
        .map_err(|e| fail(&e))?;
    if data.len() != want {
        return Err(fail(&format!(
            "not a valid .npy file: shape {:?} of {t} needs {want} data bytes, the file has {}",
            h.dims,
            data.len()
        )));
    }
    if big {
        npy::swap_to_little(t, &mut data);
    }
    if h.fortran {
        data = npy::c_order(t.host_itemsize(), &h.dims, data)?;
    }
    Ok(vec![(String::new(), Array::new(t, h.dims, data)?)])
}

/// The arrays of an open `.npz` archive, in archive order ([`load_checked`]).
fn load_members(
    path: &Path,
    mut npz: npz::NpzReader,
    mut check: impl FnMut(&str, rpjrt::ElementType, &[i64]) -> Result<()>,
) -> Result<Vec<(String, Array)>> {
    let mut out = Vec::with_capacity(npz.names().len());
    for i in 0..npz.names().len() {
        let member = npz.member(i)?;
        let name = member.name().to_string();
        let (t, big, want) = npy::array_layout(member.header())
            .map_err(|e| npz::io_err(path, format!("member {name:?}: {}", npz::bare(&e))))?;
        let dims = member.header().dims.clone();
        let fortran = member.header().fortran;
        check(&name, t, &dims)?;
        let mut data = member.read_data(want)?;
        if big {
            npy::swap_to_little(t, &mut data);
        }
        if fortran {
            data = npy::c_order(t.host_itemsize(), &dims, data)?;
        }
        out.push((name, Array::new(t, dims, data)?));
    }
    Ok(out)
}

/// Writes one array as a `.npy` file, whole or not at all (`rpjrt::write_regular_file`).
pub fn save_npy(path: impl AsRef<Path>, array: &Array) -> Result<()> {
    let path = path.as_ref();
    let bytes = write_npy(array)?;
    rpjrt::write_regular_file(path, |f| std::io::Write::write_all(f, &bytes))
}

/// Writes named arrays as an (uncompressed) `.npz` file, like `np.savez`; atomically
/// (a temporary file in the same directory, renamed over `path` once complete). Names must
/// be unique and non-empty.
pub fn save_npz(path: impl AsRef<Path>, arrays: &[(String, Array)]) -> Result<()> {
    let members = arrays
        .iter()
        .map(|(name, a)| Ok((name.clone(), write_npy(a)?)))
        .collect::<Result<Vec<_>>>()?;
    npz::write_members(path.as_ref(), &members)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::literal::parse_literal;

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("rpjrt-npy-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn npz_round_trip() {
        let dir = temp_dir("rt");
        let p = dir.join("x.npz");
        let a = parse_literal("[1,2,3]:int64", None).unwrap();
        let b = parse_literal("1.5:float64", None).unwrap();
        // Names keep their own `.npy`: `b` and `b.npy` are two arrays.
        let arrays = vec![
            ("a".to_string(), a.clone()),
            ("b".to_string(), b.clone()),
            ("b.npy".to_string(), a.clone()),
        ];
        save_npz(&p, &arrays).unwrap();
        assert_eq!(load(&p).unwrap(), arrays);
        assert!(load(&dir)
            .unwrap_err()
            .to_string()
            .contains("not a regular file"));
        let e = save_npz(&p, &[("a".into(), b.clone()), ("a".into(), b)]).unwrap_err();
        assert!(e.to_string().contains("\"a\" is given twice"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn saving_over_a_fifo_refuses_and_leaves_it() {
        // save_npz renamed its temporary file over whatever was there (a FIFO, or a
        // device node such as /dev/full for root), and save_npy blocked opening a FIFO.
        let dir = temp_dir("fifo");
        let p = dir.join("x.npz");
        let _ = std::fs::remove_file(&p);
        let made = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap();
        assert!(made.success());
        let a = parse_literal("[1,2]:f32", None).unwrap();
        let npz = save_npz(&p, &[("a".into(), a.clone())]).unwrap_err();
        let npy = save_npy(&p, &a).unwrap_err();
        for e in [npz, npy] {
            assert_eq!(e.code(), rpjrt::Code::InvalidArgument, "{e}");
            assert!(
                e.to_string()
                    .contains("x.npz: a FIFO (named pipe), not a regular file"),
                "{e}"
            );
        }
        use std::os::unix::fs::FileTypeExt as _;
        assert!(std::fs::metadata(&p).unwrap().file_type().is_fifo());
        // Nothing else is left in the folder: no temporary file.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn archive_faults_are_not_reported_as_bad_npy_headers() {
        let dir = temp_dir("faults");
        let p = dir.join("x.npz");
        let a = parse_literal("[1,2,3]:f32", None).unwrap();
        save_npz(&p, &[("a".into(), a)]).unwrap();
        let good = std::fs::read(&p).unwrap();
        // The member's method says bzip2 (12), in the local and the central header.
        let mut bz = good.clone();
        for (sig, at) in [(b"PK\x03\x04", 8), (b"PK\x01\x02", 10)] {
            let i = bz.windows(4).position(|w| w == sig).unwrap();
            bz[i + at..i + at + 2].copy_from_slice(&12u16.to_le_bytes());
        }
        std::fs::write(&p, &bz).unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("compressed with bzip2 (zip method 12)"), "{e}");
        assert!(!e.contains("not a valid .npy"), "{e}");
        // Both sizes of the member say 10 bytes: reading its header runs past them.
        let mut short = good.clone();
        for (sig, at) in [(b"PK\x03\x04", 22), (b"PK\x01\x02", 24)] {
            let i = short.windows(4).position(|w| w == sig).unwrap();
            short[i + at..i + at + 4].copy_from_slice(&10u32.to_le_bytes());
        }
        std::fs::write(&p, &short).unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("member \"a\""), "{e}");
        assert!(!e.contains("not a valid .npy"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_damaged_directory_is_not_read_as_fewer_or_renamed_members() {
        let dir = temp_dir("directory");
        let p = dir.join("x.npz");
        let a = parse_literal("[1,2,3]:f32", None).unwrap();
        let arrays: Vec<(String, Array)> = ["a", "b", "c"]
            .iter()
            .map(|n| (n.to_string(), a.clone()))
            .collect();
        save_npz(&p, &arrays).unwrap();
        let good = std::fs::read(&p).unwrap();
        let end = good.windows(4).rposition(|w| w == b"PK\x05\x06").unwrap();
        // The end record's member counts lowered: the zip reader listed fewer members
        // (at 0, none) and the rest were silently left out.
        for n in [0u16, 1, 2] {
            let mut bad = good.clone();
            for at in [end + 8, end + 10] {
                bad[at..at + 2].copy_from_slice(&n.to_le_bytes());
            }
            std::fs::write(&p, &bad).unwrap();
            let e = load(&p).unwrap_err().to_string();
            assert!(
                e.contains("damaged .npz archive") && e.contains("end record"),
                "{n}: {e}"
            );
        }
        // A name changed in the central directory only: member "b" is not a new array "d".
        let mut bad = good.clone();
        let cd = bad.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
        let at = cd + bad[cd..].windows(5).position(|w| w == b"b.npy").unwrap();
        bad[at] = b'd';
        std::fs::write(&p, &bad).unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(
            e.contains("member \"d\": damaged .npz archive") && e.contains("header"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
