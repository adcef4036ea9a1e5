//! `.npz` archives: zip files of `.npy` members (stored by `np.savez`, deflated by
//! `np.savez_compressed`), read one member at a time and written atomically.
//!
//! A member's name is its array's name plus `.npy` (exactly one suffix is removed on
//! reading, so `w.npy` and `w` stay apart). Reading checks before it inflates: the
//! archive's names (a name stored twice is refused, naming it; each member's local header
//! must agree with the central directory), then each member's `.npy`
//! header (a few hundred bytes) against what the caller expects and against the size the
//! archive declares; only then is the data read, never more than the header describes.

use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use rpjrt::{Error, Result};

use crate::invalid;
use crate::npy::{read_header, Header};

/// `path: why`, as an invalid-argument error.
pub(crate) fn io_err(path: &Path, e: impl std::fmt::Display) -> Error {
    invalid(format!("{}: {e}", path.display()))
}

/// An `.npz` archive open for reading.
pub struct NpzReader {
    path: PathBuf,
    zip: zip::ZipArchive<std::io::BufReader<std::fs::File>>,
    names: Vec<String>,
    total: u64,
}

/// The most a deflated member can expand: deflate's best ratio is about 1032 to 1, so a
/// member declaring more than that many times the archive's size is damaged (or hostile).
const MAX_RATIO: u64 = 1032;

/// A file opened by [`NpzReader::open_any`]: an archive, or (not starting with a zip
/// header) the open file itself with its size, for the caller to read as something else.
pub(crate) enum Opened {
    /// A zip archive, its directory checked.
    Npz(NpzReader),
    /// Not a zip archive: the file, at its start, and its size (of this open file).
    Other(std::fs::File, u64),
}

/// `path` opened for reading once, refused unless it is a regular file, with its size
/// ([`rpjrt::open_regular_file`]: everything said about the file comes from the one open
/// handle, so a file an atomic save renames over it is read whole, old or new; and a FIFO
/// swapped in just before the open is opened without waiting for a writer, then refused).
pub(crate) fn open_regular(path: &Path) -> Result<(std::fs::File, u64)> {
    rpjrt::open_regular_file(path)
}

impl NpzReader {
    /// Opens `path`, which must be a regular file: `None` when it does not start with a zip
    /// header (a `.npy` file, say); an error naming the file when it is not a readable
    /// archive, when a member name is stored twice (or twice once `.npy` is removed), or
    /// when a name is empty. The file is opened once: its size, its directory and its
    /// members are all read from that one open file, so a file replaced meanwhile (an
    /// atomic save renaming a new file over it) is read whole, old or new, never a mix.
    pub fn open(path: &Path) -> Result<Option<NpzReader>> {
        Ok(match Self::open_any(path)? {
            Opened::Npz(reader) => Some(reader),
            Opened::Other(..) => None,
        })
    }

    /// [`NpzReader::open`], handing back the open file when it is no zip archive, so that
    /// the caller reads the very file looked at, not whatever `path` names by then.
    pub(crate) fn open_any(path: &Path) -> Result<Opened> {
        let (mut file, total) = open_regular(path)?;
        let mut magic = Vec::with_capacity(2);
        (&mut file)
            .take(2)
            .read_to_end(&mut magic)
            .and_then(|_| file.seek(std::io::SeekFrom::Start(0)))
            .map_err(|e| io_err(path, e))?;
        if magic != b"PK" {
            return Ok(Opened::Other(file, total));
        }
        // A second handle on the same open file (not a second open of `path`), for the
        // central directory; read at positions, so the zip reader's offset is not moved.
        let directory = file.try_clone().map_err(|e| io_err(path, e))?;
        let zip = zip::ZipArchive::new(std::io::BufReader::new(file))
            .map_err(|e| io_err(path, format!("not a valid .npz archive ({e})")))?;
        let mut reader = NpzReader {
            path: path.to_path_buf(),
            zip,
            names: Vec::new(),
            total,
        };
        // The zip reader takes the member count from the end record and keeps one entry
        // per name: the central directory itself says what the archive holds.
        let raw = central_directory_names(path, &directory, &reader.zip)?;
        // An archive of no members is its 22-byte end record and comment, nothing more
        // (after the bytes before the archive, if any: a self-extracting stub's).
        let empty_size = reader
            .zip
            .offset()
            .saturating_add(22 + reader.zip.comment().len() as u64);
        if reader.zip.is_empty() && reader.total > empty_size {
            return Err(io_err(
                path,
                format!(
                    "damaged .npz archive: its end record counts no members, but it holds {} \
                     bytes",
                    reader.total
                ),
            ));
        }
        if raw.len() != reader.zip.len() && !reader.zip.has_duplicate_names() {
            return Err(io_err(
                path,
                format!(
                    "damaged .npz archive: its end record counts {} members, its central \
                     directory lists {}",
                    reader.zip.len(),
                    raw.len()
                ),
            ));
        }
        if reader.zip.has_duplicate_names() {
            // Find the name the zip reader merged.
            let mut seen = std::collections::HashSet::new();
            let dup = raw.into_iter().find(|n| !seen.insert(n.clone()));
            return Err(io_err(
                path,
                format!(
                    "the archive stores member {:?} more than once",
                    dup.unwrap_or_default()
                ),
            ));
        }
        let mut seen = std::collections::HashMap::new();
        for i in 0..reader.zip.len() {
            let raw = match reader.zip.name_for_index(i) {
                Some(Ok(n)) => n.into_owned(),
                Some(Err(e)) => return Err(io_err(path, format!("damaged .npz archive ({e})"))),
                None => return Err(io_err(path, format!("the archive has no member {i}"))),
            };
            let name = array_name(&raw).to_string();
            if name.is_empty() {
                return Err(io_err(path, format!("member {raw:?} has an empty name")));
            }
            if let Some(first) = seen.insert(name.clone(), raw.clone()) {
                return Err(io_err(
                    path,
                    format!("members {first:?} and {raw:?} both hold the array {name:?}"),
                ));
            }
            reader.names.push(name);
        }
        Ok(Opened::Npz(reader))
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The array names (member names without `.npy`), in archive order; no two alike.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Opens member `i` and reads its `.npy` header (nothing of its data).
    pub fn member(&mut self, i: usize) -> Result<Member<'_>> {
        let path = &self.path;
        let name = self
            .names
            .get(i)
            .cloned()
            .ok_or_else(|| io_err(path, format!("the archive has no member {i}")))?;
        // The local header must agree with the central directory (name, method, sizes,
        // CRC), as Python's zipfile demands: a name damaged in either would otherwise
        // restore the array into another slot.
        let consistent = zip::ZipReadOptions::new().enforce_header_consistency(true);
        let mut file = self
            .zip
            .by_index_with_options(i, consistent)
            .map_err(|e| io_err(path, format!("member {name:?}: damaged .npz archive ({e})")))?;
        // np.savez stores, np.savez_compressed deflates; nothing else is read (and the
        // zip reader's own error would otherwise surface as a bad .npy header).
        let method = file.compression();
        if !matches!(
            method,
            zip::CompressionMethod::Stored | zip::CompressionMethod::Deflated
        ) {
            return Err(io_err(
                path,
                format!(
                    "member {name:?} is compressed with {}, which rpjrt does not read: numpy \
                     writes stored (np.savez) or deflated (np.savez_compressed) members",
                    method_name(method)
                ),
            ));
        }
        let declared = file.size();
        if declared > self.total.saturating_mul(MAX_RATIO) {
            return Err(io_err(
                path,
                format!("member {name:?} claims {declared} bytes: the archive is damaged"),
            ));
        }
        let header = read_header(&mut file)
            .map_err(|e| io_err(path, format!("member {name:?}: {}", bare(&e))))?;
        if header.dims.len() > MAX_NUMPY_DIMS {
            return Err(io_err(
                path,
                format!(
                    "member {name:?} has {} dimensions, but numpy holds at most \
                     {MAX_NUMPY_DIMS} (numpy.load refuses it too): the array could never be \
                     read back as a numpy array",
                    header.dims.len()
                ),
            ));
        }
        Ok(Member {
            path,
            name,
            declared,
            header,
            file,
        })
    }
}

/// A zip compression method as a message names it: `bzip2 (zip method 12)`.
fn method_name(m: zip::CompressionMethod) -> String {
    let debug = format!("{m:?}");
    let code = debug
        .strip_prefix("Unsupported(")
        .and_then(|c| c.strip_suffix(')'))
        .and_then(|c| c.parse::<u16>().ok());
    let known = |c: u16| match c {
        9 => Some("deflate64"),
        12 => Some("bzip2"),
        14 => Some("LZMA"),
        93 => Some("zstd"),
        95 => Some("xz"),
        98 => Some("PPMd"),
        _ => None,
    };
    match code {
        Some(c) => format!(
            "{} (zip method {c})",
            known(c).unwrap_or("an unknown method")
        ),
        None => debug,
    }
}

/// The message of an invalid-argument error without its code prefix.
pub(crate) fn bare(e: &Error) -> String {
    match e {
        Error::InvalidArgument(m) => m.clone(),
        other => other.to_string(),
    }
}

/// The most dimensions an array of an `.npz` archive has: numpy's limit (`NPY_MAXDIMS`,
/// 64 since numpy 2), past which `numpy.load` refuses a member. Archives with more are
/// refused on reading, and a checkpoint is not written with more.
pub const MAX_NUMPY_DIMS: usize = 64;

/// The array name of a member name: without one trailing `.npy`.
fn array_name(member: &str) -> &str {
    member.strip_suffix(".npy").unwrap_or(member)
}

/// One member of an archive, its header read, its data not yet.
pub struct Member<'a> {
    path: &'a Path,
    name: String,
    declared: u64,
    header: Header,
    file: zip::read::ZipFile<'a, std::io::BufReader<std::fs::File>>,
}

impl Member<'_> {
    /// The array name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The member's `.npy` header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Reads the data, which must be exactly `want` bytes: the archive's declared size of
    /// the member is checked against the header plus `want` before anything is inflated,
    /// at most `want` bytes are kept, and the member's CRC-32 is checked at its end.
    pub fn read_data(mut self, want: usize) -> Result<Vec<u8>> {
        let path = self.path;
        let name = &self.name;
        let expected = (self.header.len as u64).checked_add(want as u64);
        if expected != Some(self.declared) {
            let described = self.header.len as u128 + want as u128;
            let why = match u128::from(self.declared) > described {
                // numpy.load reads the array and ignores the rest; a restore refuses a
                // member whose size says something else than its header.
                true => "the bytes after the array's data are not part of any array",
                false => "the member is shorter than its array: the archive is damaged",
            };
            return Err(io_err(
                path,
                format!(
                    "member {name:?} is {} bytes, but its .npy header describes {described} \
                     ({why})",
                    self.declared,
                ),
            ));
        }
        let mut data = Vec::new();
        data.try_reserve_exact(want)
            .map_err(|_| Error::ResourceExhausted(format!("{want} bytes for member {name:?}")))?;
        let damaged = |e: std::io::Error| io_err(path, format!("member {name:?} is damaged ({e})"));
        (&mut self.file)
            .take(want as u64)
            .read_to_end(&mut data)
            .map_err(damaged)?;
        if data.len() != want {
            return Err(io_err(
                path,
                format!(
                    "member {name:?} is damaged (truncated: {} of {want} data bytes)",
                    data.len()
                ),
            ));
        }
        // One read past the end: the zip reader checks the CRC-32 when it reaches it.
        let mut extra = [0u8; 1];
        if self.file.read(&mut extra).map_err(damaged)? != 0 {
            return Err(io_err(
                path,
                format!("member {name:?} is damaged (longer than its header says)"),
            ));
        }
        Ok(data)
    }
}

/// Every member name as the central directory lists it, duplicates included (the zip
/// reader merges them). Reads `file` (the archive's own open file, never `path` opened
/// again) from the directory's start only.
fn central_directory_names(
    path: &Path,
    file: &std::fs::File,
    zip: &zip::ZipArchive<std::io::BufReader<std::fs::File>>,
) -> Result<Vec<String>> {
    // Where the directory starts in the file: the zip reader's figure already counts any
    // bytes before the archive (`offset()`, a self-extracting stub), so it is not added
    // again.
    let start = zip.central_directory_start();
    let bytes = read_from(file, start).map_err(|e| io_err(path, e))?;
    let mut at = 0usize;
    let mut names = Vec::new();
    while bytes.get(at..at + 4) == Some(b"PK\x01\x02".as_slice()) {
        let field = |o: usize| -> Option<usize> {
            let b = bytes.get(at + o..at + o + 2)?;
            Some(usize::from(u16::from_le_bytes([b[0], b[1]])))
        };
        let (Some(n), Some(extra), Some(comment)) = (field(28), field(30), field(32)) else {
            break;
        };
        let Some(name) = bytes.get(at + 46..at + 46 + n) else {
            break;
        };
        names.push(String::from_utf8_lossy(name).into_owned());
        at += 46 + n + extra + comment;
    }
    Ok(names)
}

/// The bytes of `file` from `start` to its end, read at positions (`pread`): the offset of
/// the file, shared with its clones, is left where it was.
#[cfg(unix)]
fn read_from(file: &std::fs::File, start: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt as _;
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let at = start.saturating_add(bytes.len() as u64);
        match file.read_at(&mut chunk, at) {
            Ok(0) => return Ok(bytes),
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The bytes of `file` from `start` to its end. Without positional reads the offset it
/// shares with the zip reader's handle moves; harmless, as the zip reader seeks to a
/// member's absolute position before reading it.
#[cfg(not(unix))]
fn read_from(mut file: &std::fs::File, start: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.seek(std::io::SeekFrom::Start(start))?;
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Writes `(name, .npy bytes)` members as a stored (uncompressed) zip archive, each member
/// named `name.npy`, atomically: into a temporary file next to `path`, flushed to disk,
/// then renamed over `path`, so a crash or a full disk leaves either the old file or the
/// new one, never half of one. Names must be unique and non-empty.
pub fn write_members(path: &Path, members: &[(String, Vec<u8>)]) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for (name, _) in members {
        if name.is_empty() {
            return Err(io_err(path, "an array name is empty"));
        }
        if !seen.insert(name.as_str()) {
            return Err(io_err(path, format!("the array {name:?} is given twice")));
        }
    }
    // One writer of whole files for the workspace: a unique temporary name, and a FIFO or
    // device at `path` refused instead of replaced.
    rpjrt::write_regular_file(path, |file| {
        let mut zip = zip::ZipWriter::new(Latch::new(std::io::BufWriter::new(file)));
        for (name, bytes) in members {
            let opts = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Stored)
                .large_file(bytes.len() > u32::MAX as usize / 2);
            zip.start_file(format!("{name}.npy"), opts)
                .map_err(|e| std::io::Error::other(format!("member {name:?}: {e}")))?;
            zip.write_all(bytes)?;
        }
        zip.finish()
            .map_err(std::io::Error::other)?
            .inner
            .into_inner()
            .map_err(|e| e.into_error())?;
        Ok(())
    })
}

/// A writer that, once a write or seek has failed (a full disk, a file-size limit), goes on
/// without the file: it counts positions as if the bytes were written and drops them. The
/// error has gone to the caller and the file is removed; the zip writer, dropped
/// unfinished, then finalizes without a second failure (which it would print to stderr).
struct Latch<W> {
    inner: W,
    failed: bool,
    /// The position, and the end, of what was written (or would have been).
    pos: u64,
    end: u64,
}

impl<W> Latch<W> {
    fn new(inner: W) -> Latch<W> {
        Latch {
            inner,
            failed: false,
            pos: 0,
            end: 0,
        }
    }
}

impl<W: std::io::Write> std::io::Write for Latch<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = if self.failed {
            buf.len()
        } else {
            self.inner.write(buf).inspect_err(|_| self.failed = true)?
        };
        self.pos += n as u64;
        self.end = self.end.max(self.pos);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        if self.failed {
            return Ok(());
        }
        self.inner.flush().inspect_err(|_| self.failed = true)
    }
}

impl<W: std::io::Seek> std::io::Seek for Latch<W> {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        use std::io::SeekFrom;
        if !self.failed {
            self.pos = self.inner.seek(to).inspect_err(|_| self.failed = true)?;
            return Ok(self.pos);
        }
        let (base, delta) = match to {
            SeekFrom::Start(n) => (n, 0),
            SeekFrom::Current(d) => (self.pos, d),
            SeekFrom::End(d) => (self.end, d),
        };
        self.pos = base.checked_add_signed(delta).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek out of range")
        })?;
        Ok(self.pos)
    }
}
