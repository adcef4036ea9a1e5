//! Host arrays in numpy's `.npy` / `.npz` files, and typed literals such as `[1,2,3]:f32`.
//!
//! The `.npy` format (version 1.0-3.0) is small enough to read and write here: a magic
//! string, a header length, a Python-literal header dict (`descr`, `fortran_order`,
//! `shape`) and the raw C-order data. `.npz` files are zip archives of `.npy` members
//! (stored by `np.savez`, deflated by `np.savez_compressed`); the `zip` crate reads and
//! writes them. numpy is never needed.
//!
//! Types: every numpy type PJRT has (bool, int8..int64, uint8..uint64, float16/32/64,
//! complex64/128). ml_dtypes types (bfloat16, float8...) are stored by numpy as raw void
//! (`|V2`), which names no type: such files are refused with a message saying so. Type
//! strings are built from the one element-type table (`crate::dtype`): numpy's kind letter
//! and the byte size, for the types that have a buffer-protocol format.

use std::io::{Read, Seek, Write};
use std::path::Path;

use crate::dtype::{element_count, ElementType};
use crate::error::{Error, Result};
use crate::scalars;

/// A dense, row-major host array: element type, dimensions and little-endian bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    /// Element type.
    pub element_type: ElementType,
    /// Dimensions (empty for a 0-d array).
    pub dims: Vec<i64>,
    /// The elements, row-major, little-endian, one byte per `bool`.
    pub data: Vec<u8>,
}

impl Array {
    /// An array, checking that `data` has exactly the bytes `dims` and the type need.
    pub fn new(element_type: ElementType, dims: Vec<i64>, data: Vec<u8>) -> Result<Array> {
        let want = element_type.dense_byte_size(element_count(&dims)?)?;
        if data.len() != want {
            return Err(Error::invalid(format!(
                "{} data for shape {:?} needs {want} bytes, got {}",
                element_type,
                dims,
                data.len()
            )));
        }
        Ok(Array {
            element_type,
            dims,
            data,
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.dims.iter().map(|&d| d.max(0) as usize).product()
    }

    /// True when the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` (row-major) as a [`Scalar`].
    pub fn get(&self, i: usize) -> Option<Scalar> {
        let size = self.element_type.byte_width()?;
        let b = self.data.get(i * size..(i + 1) * size)?;
        let arr = |n: usize| -> [u8; 8] {
            let mut a = [0u8; 8];
            a[..n].copy_from_slice(&b[..n]);
            a
        };
        use ElementType as T;
        Some(match self.element_type {
            T::Pred => Scalar::Bool(b[0] != 0),
            T::S8 => Scalar::Int(b[0] as i8 as i64),
            T::S16 => Scalar::Int(i16::from_le_bytes([b[0], b[1]]) as i64),
            T::S32 => Scalar::Int(i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64),
            T::S64 => Scalar::Int(i64::from_le_bytes(arr(8))),
            T::U8 => Scalar::UInt(b[0] as u64),
            T::U16 => Scalar::UInt(u16::from_le_bytes([b[0], b[1]]) as u64),
            T::U32 => Scalar::UInt(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64),
            T::U64 => Scalar::UInt(u64::from_le_bytes(arr(8))),
            T::F16 => Scalar::Float(f16_to_f32(u16::from_le_bytes([b[0], b[1]])) as f64),
            T::BF16 => Scalar::Float(
                f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16) as f64,
            ),
            T::F32 => Scalar::Float(f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64),
            T::F64 => Scalar::Float(f64::from_le_bytes(arr(8))),
            T::C64 => Scalar::Complex(
                f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                f32::from_le_bytes([b[4], b[5], b[6], b[7]]) as f64,
            ),
            T::C128 => {
                let mut re = [0u8; 8];
                let mut im = [0u8; 8];
                re.copy_from_slice(&b[..8]);
                im.copy_from_slice(&b[8..16]);
                Scalar::Complex(f64::from_le_bytes(re), f64::from_le_bytes(im))
            }
            _ => return None,
        })
    }
}

/// One element's value, wide enough for every type [`Array::get`] reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// bool.
    Bool(bool),
    /// Signed integers.
    Int(i64),
    /// Unsigned integers.
    UInt(u64),
    /// Floating point.
    Float(f64),
    /// Complex (real, imaginary).
    Complex(f64, f64),
}

/// Whether `.npy` files can carry `t` under a type code of its own: numpy's built-in types,
/// the ones with a buffer-protocol format in the element-type table. (ml_dtypes types such
/// as bfloat16 share a kind letter and size with a built-in one, so numpy writes them as
/// raw bytes.)
fn has_descr(t: ElementType) -> bool {
    t.buffer_format().is_some() && t.byte_width().is_some()
}

/// Bytes per element of the types `.npy` files carry; `None` for the others.
fn byte_size(t: ElementType) -> Option<usize> {
    t.byte_width().filter(|_| has_descr(t))
}

/// numpy's type string for `t`, built from the element-type table: byte order (`|` for
/// one-byte types, else `<`), numpy's kind letter and the size in bytes (`<f4`, `|b1`).
pub fn descr_of(t: ElementType) -> Result<String> {
    match byte_size(t) {
        Some(size) => {
            let order = if size == 1 { '|' } else { '<' };
            Ok(format!("{order}{}{size}", t.kind().numpy_char()))
        }
        None => Err(Error::invalid(format!(
            "{t} has no .npy type (numpy stores it as raw bytes); convert it to a numpy type first"
        ))),
    }
}

/// The element type of a numpy type string and whether it is big-endian; raw-byte types
/// (`|V2`) and types PJRT lacks are refused with a message naming the type string.
pub fn type_of_descr(descr: &str) -> Result<(ElementType, bool)> {
    let (order, code) = descr.split_at(descr.len().min(1));
    let big = match order {
        "<" | "|" | "=" => false,
        ">" => true,
        _ => return Err(Error::invalid(format!("unknown .npy type {descr:?}"))),
    };
    if code.starts_with('V') {
        return Err(Error::invalid(format!(
            "the .npy type {descr:?} is raw bytes (how numpy saves bfloat16, float8 and \
             other ml_dtypes types): it names no element type; save as float32 instead"
        )));
    }
    let mut chars = code.chars();
    let kind = chars.next();
    let size = chars.as_str().parse::<usize>().ok();
    ElementType::ALL
        .iter()
        .copied()
        .find(|&t| has_descr(t) && Some(t.kind().numpy_char()) == kind && byte_size(t) == size)
        .map(|t| (t, big))
        .ok_or_else(|| Error::invalid(format!("the .npy type {descr:?} has no PJRT element type")))
}

/// A `.npy` member split into its header fields and data, before its type is read.
pub(crate) struct RawNpy<'a> {
    /// numpy's type string (`<f4`, `|V2`, `<U12`).
    pub descr: String,
    /// Whether the data is column-major.
    pub fortran: bool,
    /// Dimensions.
    pub dims: Vec<i64>,
    /// The bytes after the header.
    pub data: &'a [u8],
}

/// Splits a `.npy` file's bytes into header fields and data (no type checks).
pub(crate) fn parse_npy(bytes: &[u8]) -> Result<RawNpy<'_>> {
    let bad = |why: &str| Error::invalid(format!("not a valid .npy file: {why}"));
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("it does not start with the .npy magic bytes"));
    }
    let major = bytes[6];
    let (header_len, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(bad("truncated header"));
            }
            (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            )
        }
        v => return Err(bad(&format!("unknown format version {v}"))),
    };
    let header = bytes
        .get(start..start + header_len)
        .ok_or_else(|| bad("truncated header"))?;
    let header = std::str::from_utf8(header).map_err(|_| bad("the header is not text"))?;
    let descr = dict_field(header, "descr")
        .and_then(|v| v.strip_prefix('\'').and_then(|v| v.split('\'').next()))
        .ok_or_else(|| {
            if header.contains("'descr': [") {
                bad("structured (record) arrays are not supported")
            } else {
                bad("no 'descr' in the header")
            }
        })?;
    let fortran = dict_field(header, "fortran_order").ok_or_else(|| bad("no 'fortran_order'"))?;
    let fortran = if fortran.starts_with("True") {
        true
    } else if fortran.starts_with("False") {
        false
    } else {
        return Err(bad("'fortran_order' is neither True nor False"));
    };
    let shape = dict_field(header, "shape").ok_or_else(|| bad("no 'shape'"))?;
    let inner = shape
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| bad("the shape is not a tuple"))?;
    let dims = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim_end_matches('L')
                .parse::<i64>()
                .ok()
                .filter(|&d| d >= 0)
                .ok_or_else(|| bad("a dimension is not a non-negative integer"))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RawNpy {
        descr: descr.to_string(),
        fortran,
        dims,
        data: &bytes[start + header_len..],
    })
}

/// Parses a `.npy` file's bytes.
pub fn read_npy(bytes: &[u8]) -> Result<Array> {
    let bad = |why: &str| Error::invalid(format!("not a valid .npy file: {why}"));
    let raw = parse_npy(bytes)?;
    let (element_type, big) = type_of_descr(&raw.descr)?;
    if raw.fortran {
        return Err(Error::invalid(
            "the .npy array is in Fortran order; save it with np.ascontiguousarray(a)",
        ));
    }
    let dims = raw.dims;
    let mut data = raw.data.to_vec();
    let want = element_type.dense_byte_size(element_count(&dims)?)?;
    if data.len() != want {
        return Err(bad(&format!(
            "shape {dims:?} of {element_type} needs {want} data bytes, the file has {}",
            data.len()
        )));
    }
    if big {
        swap_to_little(element_type, &mut data);
    }
    Array::new(element_type, dims, data)
}

/// Reverses each element's bytes (each half's, for complex types) in place.
pub(crate) fn swap_to_little(t: ElementType, data: &mut [u8]) {
    let size = t.byte_width().unwrap_or(1);
    let part = if t.kind() == crate::dtype::ElementKind::Complex {
        size / 2
    } else {
        size
    };
    for chunk in data.chunks_exact_mut(part.max(1)) {
        chunk.reverse();
    }
}

/// The bytes of a `.npy` file (format 1.0, or 2.0 when the header needs it) with the given
/// type string, C-order dimensions and data.
pub(crate) fn write_npy_raw(descr: &str, dims: &[i64], data: &[u8]) -> Vec<u8> {
    let shape = match dims.len() {
        0 => "()".to_string(),
        1 => format!("({},)", dims[0]),
        _ => format!(
            "({})",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Pad so that the data starts at a multiple of 64 bytes, ending with a newline.
    // The padded header (up to 64 bytes more) must fit version 1.0's 16-bit length.
    let v1 = header.len() + 64 <= u16::MAX as usize;
    let prefix = if v1 { 10 } else { 12 };
    let unpadded = prefix + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(prefix + header.len() + data.len());
    if v1 {
        out.extend_from_slice(b"\x93NUMPY\x01\x00");
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(b"\x93NUMPY\x02\x00");
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// A `.npy` file holding one 0-d numpy string (`<U…`, UTF-32), as `np.array("text")`.
pub(crate) fn write_npy_text(text: &str) -> Vec<u8> {
    let chars: Vec<char> = text.chars().collect();
    let mut data = Vec::with_capacity(chars.len() * 4);
    for c in &chars {
        data.extend_from_slice(&(*c as u32).to_le_bytes());
    }
    write_npy_raw(&format!("<U{}", chars.len().max(1)), &[], &{
        if data.is_empty() {
            vec![0; 4]
        } else {
            data
        }
    })
}

/// The text of a 0-d numpy string member (`<U…`); trailing NULs are numpy's padding.
pub(crate) fn read_npy_text(raw: &RawNpy<'_>) -> Result<String> {
    let n = raw
        .descr
        .strip_prefix(['<', '='])
        .and_then(|d| d.strip_prefix('U'))
        .and_then(|n| n.parse::<usize>().ok())
        .ok_or_else(|| {
            Error::invalid(format!(
                "expected a numpy string (<U…), found type {:?}",
                raw.descr
            ))
        })?;
    if !raw.dims.is_empty() || n.checked_mul(4) != Some(raw.data.len()) {
        return Err(Error::invalid(format!(
            "expected one string of {n} characters, found shape {:?} with {} bytes",
            raw.dims,
            raw.data.len()
        )));
    }
    let mut s = String::with_capacity(n);
    for c in raw.data.chunks_exact(4) {
        let u = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        if u == 0 {
            break;
        }
        s.push(
            char::from_u32(u)
                .ok_or_else(|| Error::invalid(format!("{u:#x} is not a character")))?,
        );
    }
    Ok(s)
}

/// The text after `'key':` in a header dict, trimmed at the start.
fn dict_field<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("'{key}':");
    let at = header.find(&pat)?;
    Some(header[at + pat.len()..].trim_start())
}

/// The bytes of a `.npy` file (format 1.0) holding `array`.
pub fn write_npy(array: &Array) -> Result<Vec<u8>> {
    Ok(write_npy_raw(
        &descr_of(array.element_type)?,
        &array.dims,
        &array.data,
    ))
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::invalid(format!("{}: {e}", path.display()))
}

/// Reads a `.npy` file (one array, named `""`) or a `.npz` file (its arrays by name, in
/// archive order). Only regular files are opened.
pub fn load(path: impl AsRef<Path>) -> Result<Vec<(String, Array)>> {
    let path = path.as_ref();
    if let Some(mut npz) = NpzReader::open(path)? {
        let mut out = Vec::with_capacity(npz.len());
        for i in 0..npz.len() {
            let (name, member) = npz.read(i)?;
            let a = read_npy(&member).map_err(|e| io_err(path, format!("member {name}: {e}")))?;
            out.push((name, a));
        }
        return Ok(out);
    }
    let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
    let a = read_npy(&bytes).map_err(|e| io_err(path, e))?;
    Ok(vec![(String::new(), a)])
}

/// An `.npz` archive read one member at a time, so a reader holds at most one member's
/// bytes however large the file is. Members are checked against their CRC-32 as they are
/// read.
pub(crate) struct NpzReader {
    path: std::path::PathBuf,
    zip: zip::ZipArchive<std::io::BufReader<std::fs::File>>,
    total: u64,
}

impl NpzReader {
    /// Opens `path`, which must be a regular file: `None` when it does not start with a zip
    /// header (a `.npy` file, say), an error naming the file when it is not a readable
    /// archive.
    pub(crate) fn open(path: &Path) -> Result<Option<NpzReader>> {
        let meta = std::fs::metadata(path).map_err(|e| io_err(path, e))?;
        if !meta.is_file() {
            return Err(io_err(path, "not a regular file"));
        }
        let mut file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
        let mut magic = [0u8; 2];
        let n = file.read(&mut magic).map_err(|e| io_err(path, e))?;
        if &magic[..n] != b"PK" {
            return Ok(None);
        }
        file.seek(std::io::SeekFrom::Start(0))
            .map_err(|e| io_err(path, e))?;
        let zip = zip::ZipArchive::new(std::io::BufReader::new(file))
            .map_err(|e| io_err(path, format!("not a valid .npz archive ({e})")))?;
        Ok(Some(NpzReader {
            path: path.to_path_buf(),
            zip,
            total: meta.len(),
        }))
    }

    /// Number of members.
    pub(crate) fn len(&self) -> usize {
        self.zip.len()
    }

    /// Member `i`'s name, without `.npy`.
    pub(crate) fn name(&self, i: usize) -> Result<String> {
        match self.zip.name_for_index(i) {
            Some(Ok(n)) => Ok(n.trim_end_matches(".npy").to_string()),
            Some(Err(e)) => Err(io_err(&self.path, format!("damaged .npz archive ({e})"))),
            None => Err(io_err(&self.path, format!("the archive has no member {i}"))),
        }
    }

    /// Member `i`: its name (without `.npy`) and bytes.
    pub(crate) fn read(&mut self, i: usize) -> Result<(String, Vec<u8>)> {
        let path = &self.path;
        let mut f = self
            .zip
            .by_index(i)
            .map_err(|e| io_err(path, format!("damaged .npz archive ({e})")))?;
        let name = f
            .name()
            .map_err(|e| io_err(path, e))?
            .trim_end_matches(".npy")
            .to_string();
        // A stored member is no larger than the archive; a deflated one may be larger, but
        // a declared size far past any real ratio is a damaged (or hostile) header.
        let declared = f.size();
        if declared > self.total.saturating_mul(1032) {
            return Err(io_err(
                path,
                format!("member {name} claims {declared} bytes: the archive is damaged"),
            ));
        }
        let mut member = Vec::new();
        member
            .try_reserve_exact(declared.min(self.total) as usize)
            .map_err(|_| Error::ResourceExhausted(format!("{declared} bytes for member {name}")))?;
        f.read_to_end(&mut member)
            .map_err(|e| io_err(path, format!("member {name} is damaged ({e})")))?;
        Ok((name, member))
    }
}

/// Writes one array as a `.npy` file.
pub fn save_npy(path: impl AsRef<Path>, array: &Array) -> Result<()> {
    let path = path.as_ref();
    std::fs::write(path, write_npy(array)?).map_err(|e| io_err(path, e))
}

/// Writes named arrays as an (uncompressed) `.npz` file, like `np.savez`; atomically
/// (a temporary file in the same directory, renamed over `path` once complete).
pub fn save_npz(path: impl AsRef<Path>, arrays: &[(String, Array)]) -> Result<()> {
    let members = arrays
        .iter()
        .map(|(name, a)| Ok((name.clone(), write_npy(a)?)))
        .collect::<Result<Vec<_>>>()?;
    write_npz_members(path.as_ref(), &members)
}

/// Writes `(name, .npy bytes)` members as a stored (uncompressed) zip archive, atomically:
/// into a temporary file next to `path`, flushed to disk, then renamed over `path`, so a
/// crash or a full disk leaves either the old file or the new one, never half of one.
pub(crate) fn write_npz_members(path: &Path, members: &[(String, Vec<u8>)]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .ok_or_else(|| io_err(path, "not a file name"))?
        .to_string_lossy()
        .into_owned();
    let tmp = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
    let result = (|| -> Result<()> {
        let file = std::fs::File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
        let mut zip = zip::ZipWriter::new(std::io::BufWriter::new(file));
        for (name, bytes) in members {
            let opts = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Stored)
                .large_file(bytes.len() > u32::MAX as usize / 2);
            zip.start_file(format!("{name}.npy"), opts)
                .map_err(|e| io_err(path, e))?;
            zip.write_all(bytes).map_err(|e| io_err(path, e))?;
        }
        let file = zip
            .finish()
            .map_err(|e| io_err(path, e))?
            .into_inner()
            .map_err(|e| io_err(path, e.error()))?;
        file.sync_all().map_err(|e| io_err(path, e))?;
        std::fs::rename(&tmp, path).map_err(|e| io_err(path, e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Parses a literal: a number (`1.5`, `-3`, `true`) or nested lists (`[[1,2],[3,4]]`),
/// with an optional `:TYPE` suffix (`[1,2,3]:f32`, `7:int8`). Without a suffix the type is
/// `default` when given, else float32 for numbers with a `.`/`e`, int32 for integers and
/// bool for `true`/`false`. Values follow the one rule for numbers
/// ([`crate::scalars::to_host`]): in range, no float into an integer type, no overflow.
pub fn parse_literal(text: &str, default: Option<ElementType>) -> Result<Array> {
    let text = text.trim();
    let (body, ty) = match text.rsplit_once(':') {
        Some((b, t)) if !t.contains(']') => (b, Some(ElementType::from_name(t.trim())?)),
        _ => (text, None),
    };
    let mut dims = Vec::new();
    let mut values = Vec::new();
    parse_nested(body.trim(), 0, &mut dims, &mut values)?;
    let leaves = values
        .iter()
        .map(|v| token_scalar(v))
        .collect::<Result<Vec<_>>>()?;
    let ty = match ty.or(default) {
        Some(t) => t,
        None => {
            if values.iter().all(|v| v == "true" || v == "false") && !values.is_empty() {
                ElementType::Pred
            } else if leaves
                .iter()
                .any(|s| matches!(s, scalars::Scalar::Float(_)))
            {
                ElementType::F32
            } else {
                ElementType::S32
            }
        }
    };
    dense_array(&leaves, dims, ty)
}

/// One literal token as a scalar: `true`/`false`, an integer (any size), or a float
/// (`nan`, `inf` and `-inf` included).
fn token_scalar(v: &str) -> Result<scalars::Scalar> {
    use scalars::Scalar as S;
    Ok(match v {
        "true" => S::Bool(true),
        "false" => S::Bool(false),
        "nan" => S::Float(f64::NAN),
        "inf" | "+inf" => S::Float(f64::INFINITY),
        "-inf" => S::Float(f64::NEG_INFINITY),
        _ => {
            if let Ok(i) = v.parse::<i128>() {
                S::Int(i)
            } else if !v.is_empty()
                && v.trim_start_matches(['-', '+'])
                    .bytes()
                    .all(|b| b.is_ascii_digit())
                && v.len() > 1
            {
                S::BigInt(v.trim_start_matches('+').into())
            } else {
                S::Float(
                    v.parse::<f64>()
                        .map_err(|_| Error::invalid(format!("{v:?} is not a number")))?,
                )
            }
        }
    })
}

/// The [`Array`] of scalars under the one rule for numbers (sub-byte types packed,
/// little-endian).
fn dense_array(leaves: &[scalars::Scalar], dims: Vec<i64>, ty: ElementType) -> Result<Array> {
    let v = scalars::values_to_host(leaves, dims.clone(), Some(ty))?;
    let mut data = if ty.is_sub_byte() {
        crate::dtype::pack_sub_byte(ty, &v.bytes)
    } else {
        v.bytes
    };
    if cfg!(target_endian = "big") {
        let unit = match ty.kind() {
            crate::dtype::ElementKind::Complex => ty.host_itemsize() / 2,
            _ => ty.host_itemsize(),
        };
        data.chunks_exact_mut(unit.max(1)).for_each(|c| c.reverse());
    }
    Array::new(ty, dims, data)
}

fn parse_nested(s: &str, depth: usize, dims: &mut Vec<i64>, out: &mut Vec<String>) -> Result<()> {
    // Bounded before it recurses: deep brackets would otherwise overflow the stack.
    if depth > scalars::MAX_DEPTH {
        return Err(Error::invalid(format!(
            "the literal is nested deeper than {} levels (rpjrt's highest rank)",
            scalars::MAX_DEPTH
        )));
    }
    let s = s.trim();
    let Some(inner) = s.strip_prefix('[') else {
        if s.is_empty() || s.contains([',', ']']) {
            return Err(Error::invalid(format!("malformed literal near {s:?}")));
        }
        if dims.len() > depth {
            return Err(Error::invalid(
                "ragged literal: nesting depth differs between elements",
            ));
        }
        out.push(s.to_string());
        return Ok(());
    };
    let inner = inner
        .strip_suffix(']')
        .ok_or_else(|| Error::invalid(format!("unbalanced brackets in {s:?}")))?;
    // Split at top-level commas.
    let mut parts = Vec::new();
    let (mut level, mut start) = (0i32, 0usize);
    for (i, c) in inner.char_indices() {
        match c {
            '[' => level += 1,
            ']' => level -= 1,
            ',' if level == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if level < 0 {
            return Err(Error::invalid(format!("unbalanced brackets in {s:?}")));
        }
    }
    let last = inner[start..].trim();
    if !last.is_empty() {
        parts.push(last);
    } else if !parts.is_empty() {
        // trailing comma: fine
    }
    let n = parts.len() as i64;
    if dims.len() == depth {
        dims.push(n);
    } else if dims[depth] != n {
        return Err(Error::invalid(format!(
            "ragged literal: {n} elements where {} were expected",
            dims[depth]
        )));
    }
    for p in parts {
        parse_nested(p, depth + 1, dims, out)?;
    }
    Ok(())
}

/// Random values of a type and shape: floats in [-1, 1), integers in [0, 10), random
/// bools, from a small deterministic generator seeded by `seed`.
pub fn random(ty: ElementType, dims: &[i64], seed: u64) -> Result<Array> {
    let n = element_count(dims)?;
    let mut state = seed ^ 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        // splitmix64
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    use crate::dtype::ElementKind as K;
    use scalars::Scalar as S;
    let (_, hi) = scalars::int_range(ty);
    let mut leaves = Vec::new();
    leaves
        .try_reserve_exact(n)
        .map_err(|_| Error::ResourceExhausted(format!("{n} random values")))?;
    for _ in 0..n {
        let r = next();
        leaves.push(match ty.kind() {
            K::Bool => S::Bool(r & 1 == 1),
            K::Float | K::Complex if ty == ElementType::F8E8M0FNU => {
                S::Float(2f64.powi((r % 8) as i32 - 4))
            }
            K::Float | K::Complex => S::Float((r >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0),
            _ => S::Int(i128::from(r % 10) % (hi + 1).max(1)),
        });
    }
    dense_array(&leaves, dims.to_vec(), ty)
}

/// IEEE half to single precision.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let frac = (h & 0x3ff) as u32;
    let bits = match (exp, frac) {
        (0, 0) => sign,
        (0, f) => {
            // subnormal: normalise
            let mut e = 127 - 15 + 1;
            let mut f = f;
            while f & 0x400 == 0 {
                f <<= 1;
                e -= 1;
            }
            sign | ((e as u32) << 23) | ((f & 0x3ff) << 13)
        }
        (0x1f, f) => sign | 0x7f80_0000 | (f << 13),
        (e, f) => sign | ((e + 127 - 15) << 23) | (f << 13),
    };
    f32::from_bits(bits)
}

/// Single to half precision, rounding to nearest even.
pub fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let frac = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if frac != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = frac | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1 << shift) - 1);
        let mut v = m >> shift;
        if rest > half || (rest == half && v & 1 == 1) {
            v += 1;
        }
        return sign | v as u16;
    }
    let mut v = ((e as u32) << 10) | (frac >> 13);
    let rest = frac & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && v & 1 == 1) {
        v += 1;
    }
    sign | v as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_round_trip_every_type() {
        for &t in ElementType::ALL {
            if descr_of(t).is_err() {
                continue;
            }
            let a = random(t, &[2, 3], 7).unwrap();
            let back = read_npy(&write_npy(&a).unwrap()).unwrap();
            assert_eq!(back, a, "{t}");
            let bytes = write_npy(&a).unwrap();
            let header_end = 10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
            assert_eq!(header_end % 64, 0);
        }
        let scalar = parse_literal("2.5", None).unwrap();
        assert_eq!(scalar.dims, Vec::<i64>::new());
        assert_eq!(read_npy(&write_npy(&scalar).unwrap()).unwrap(), scalar);
        let empty = parse_literal("[]:f32", None).unwrap();
        assert_eq!(empty.dims, vec![0]);
        assert_eq!(read_npy(&write_npy(&empty).unwrap()).unwrap(), empty);
    }

    #[test]
    fn type_strings_come_from_the_element_table() {
        use ElementType as T;
        let want = [
            (T::Pred, "|b1"),
            (T::S8, "|i1"),
            (T::S16, "<i2"),
            (T::S32, "<i4"),
            (T::S64, "<i8"),
            (T::U8, "|u1"),
            (T::U16, "<u2"),
            (T::U32, "<u4"),
            (T::U64, "<u8"),
            (T::F16, "<f2"),
            (T::F32, "<f4"),
            (T::F64, "<f8"),
            (T::C64, "<c8"),
            (T::C128, "<c16"),
        ];
        for &t in ElementType::ALL {
            match want.iter().find(|(w, _)| *w == t) {
                Some((_, d)) => {
                    assert_eq!(descr_of(t).unwrap(), *d);
                    assert_eq!(type_of_descr(d).unwrap(), (t, false));
                    let big = format!(">{}", &d[1..]);
                    assert_eq!(type_of_descr(&big).unwrap(), (t, true));
                }
                None => assert!(descr_of(t).unwrap_err().to_string().contains("raw bytes")),
            }
        }
        // bfloat16 shares float16's kind and size: never read as one another.
        assert_eq!(type_of_descr("<f2").unwrap().0, T::F16);
        assert!(type_of_descr("<f16").is_err());
        assert!(type_of_descr("<U5").is_err());
        assert!(type_of_descr("|V2")
            .unwrap_err()
            .to_string()
            .contains("raw bytes"));
    }

    #[test]
    fn random_values_for_every_type() {
        for &t in ElementType::ALL {
            if t == ElementType::Token {
                continue;
            }
            let a = random(t, &[3, 5], 1).unwrap();
            assert_eq!(a.data.len(), t.dense_byte_size(15).unwrap(), "{t}");
        }
    }

    #[test]
    fn literal_nesting_is_bounded_not_a_stack_overflow() {
        let nested = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let a = parse_literal(&nested(scalars::MAX_DEPTH), None).unwrap();
        assert_eq!(a.dims, vec![1; scalars::MAX_DEPTH]);
        for n in [scalars::MAX_DEPTH + 1, 100_000] {
            let e = parse_literal(&nested(n), None).unwrap_err().to_string();
            assert!(e.contains("nested deeper than 64"), "{e}");
        }
    }

    #[test]
    fn literals() {
        let a = parse_literal("[[1, 2], [3, 4]]:f32", None).unwrap();
        assert_eq!(a.element_type, ElementType::F32);
        assert_eq!(a.dims, vec![2, 2]);
        assert_eq!(a.get(3), Some(Scalar::Float(4.0)));
        assert_eq!(
            parse_literal("3", None).unwrap().element_type,
            ElementType::S32
        );
        assert_eq!(
            parse_literal("3", Some(ElementType::F64)).unwrap().get(0),
            Some(Scalar::Float(3.0))
        );
        assert_eq!(
            parse_literal("[true,false]", None).unwrap().element_type,
            ElementType::Pred
        );
        assert!(parse_literal("[[1,2],[3]]", None)
            .unwrap_err()
            .to_string()
            .contains("ragged"));
        assert!(parse_literal("300:uint8", None)
            .unwrap_err()
            .to_string()
            .contains("does not fit"));
        // The one rule for numbers: no float into an integer type, no overflow, and the
        // types numpy lacks (packed when sub-byte).
        let e = parse_literal("[1, 2.0]:int8", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("without rounding"), "{e}");
        let e = parse_literal("1e300:float16", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("overflows float16"), "{e}");
        let a = parse_literal("[1, -2, 7]:int4", None).unwrap();
        assert_eq!(a.data, vec![0xE1, 0x07]);
        let a = parse_literal("[1.5, 448]:f8e4m3fn", None).unwrap();
        assert_eq!(a.data, vec![0x3C, 0x7E]);
        let a = parse_literal("[1, 0.5]", Some(ElementType::BF16)).unwrap();
        assert_eq!(a.data, [0x3F80u16, 0x3F00].map(u16::to_le_bytes).concat());
        let e = parse_literal("123456789012345678901234567890123456789012", None).unwrap_err();
        assert!(e.to_string().contains("does not fit in int32"), "{e}");
        assert!(parse_literal("[1, x]", None)
            .unwrap_err()
            .to_string()
            .contains("\"x\" is not a number"));
        assert_eq!(
            parse_literal("[nan, -inf]", None).unwrap().element_type,
            ElementType::F32
        );
        assert!(parse_literal("[1,2", None).is_err());
        assert!(parse_literal("x:f32", None).is_err());
        assert!(parse_literal("1:nosuchtype", None).is_err());
    }

    #[test]
    fn half_precision() {
        for x in [0.0f32, 1.0, -2.5, 65504.0, 6.1035156e-5, 5.9604645e-8] {
            assert_eq!(f16_to_f32(f32_to_f16(x)), x);
        }
        assert_eq!(f32_to_f16(1e6), 0x7c00);
    }

    #[test]
    fn bad_files_are_errors() {
        assert!(read_npy(b"hello").is_err());
        let a = parse_literal("[1,2,3]:f32", None).unwrap();
        let mut bytes = write_npy(&a).unwrap();
        bytes.pop();
        assert!(read_npy(&bytes)
            .unwrap_err()
            .to_string()
            .contains("needs 12 data bytes"));
        let mut v2 = write_npy(&a).unwrap();
        let at = v2.windows(3).position(|w| w == b"<f4").unwrap();
        v2[at..at + 3].copy_from_slice(b"|V4");
        assert!(read_npy(&v2).unwrap_err().to_string().contains("raw bytes"));
    }

    #[test]
    fn npz_round_trip() {
        let dir = std::env::temp_dir().join(format!("rpjrt-npz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.npz");
        let a = parse_literal("[1,2,3]:int64", None).unwrap();
        let b = parse_literal("1.5:float64", None).unwrap();
        save_npz(&p, &[("a".into(), a.clone()), ("b".into(), b.clone())]).unwrap();
        let got = load(&p).unwrap();
        assert_eq!(got, vec![("a".to_string(), a), ("b".to_string(), b)]);
        assert!(load(&dir)
            .unwrap_err()
            .to_string()
            .contains("not a regular file"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
