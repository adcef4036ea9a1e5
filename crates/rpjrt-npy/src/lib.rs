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
    let path = path.as_ref();
    if let Some(mut npz) = npz::NpzReader::open(path)? {
        let mut out = Vec::with_capacity(npz.names().len());
        for i in 0..npz.names().len() {
            let member = npz.member(i)?;
            let name = member.name().to_string();
            let (t, big, want) = npy::array_layout(member.header())
                .map_err(|e| npz::io_err(path, format!("member {name:?}: {}", npz::bare(&e))))?;
            let dims = member.header().dims.clone();
            let mut data = member.read_data(want)?;
            if big {
                npy::swap_to_little(t, &mut data);
            }
            out.push((name, Array::new(t, dims, data)?));
        }
        return Ok(out);
    }
    let bytes = rpjrt::read_regular_file(path)?;
    let a = read_npy(&bytes).map_err(|e| npz::io_err(path, npz::bare(&e)))?;
    Ok(vec![(String::new(), a)])
}

/// Writes one array as a `.npy` file.
pub fn save_npy(path: impl AsRef<Path>, array: &Array) -> Result<()> {
    let path = path.as_ref();
    std::fs::write(path, write_npy(array)?).map_err(|e| npz::io_err(path, e))
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
}
