//! Files read and written whole: a regular file read without blocking on a FIFO or a
//! device, a file replaced atomically (a temporary file renamed over it), and the removal
//! of temporary files that writers killed mid-write left behind. Plain safe code shared by
//! every crate above this one (the client, its trace recorder, the `.npy` reader, the
//! CLI); `rpjrt` re-exports the readers and writers at its root.

use crate::error::{Error, Result};

/// The bytes of a regular file. A FIFO, a directory or a device is refused without being
/// read (reading a FIFO blocks until a writer comes; `/dev/zero` never ends), and every
/// error names the path. A file larger than [`MAX_READ_BYTES`] (or the bound set in
/// [`MAX_READ_ENV`]) is refused before anything is allocated for it, and one that is not
/// larger but does not fit in memory is an out-of-memory error: see
/// [`read_regular_file_at_most`].
///
/// ```
/// let e = rpjrt_raw::files::read_regular_file("/dev/zero").unwrap_err();
/// assert_eq!(e.to_string(), "invalid argument: /dev/zero: not a regular file");
/// ```
pub fn read_regular_file(path: impl AsRef<std::path::Path>) -> Result<Vec<u8>> {
    read_regular_file_at_most(path, MAX_READ_BYTES, "a file")
}

/// The most bytes [`read_regular_file`] reads whole from one file (programs, artifacts,
/// bare executables) unless [`MAX_READ_ENV`] says otherwise: 4 GiB.
pub const MAX_READ_BYTES: u64 = 4 << 30;

/// The environment variable that replaces the default bound on the bytes read whole from
/// one user-named file (every kind's: programs, artifacts, traces, reports, ...): a number
/// of bytes, with an optional suffix `K`, `M`, `G` or `T` (powers of 1024).
pub const MAX_READ_ENV: &str = "RPJRT_MAX_FILE_BYTES";

/// The bound on the bytes read whole from one file of a kind whose own bound is `default`:
/// [`MAX_READ_ENV`] when set, else `default`. A value that is no number of bytes is an
/// error naming it.
pub fn max_read_bytes(default: u64) -> Result<u64> {
    let Some(v) = std::env::var_os(MAX_READ_ENV).filter(|v| !v.is_empty()) else {
        return Ok(default);
    };
    let text = v.to_string_lossy();
    let t = text.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => 64,
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    digits
        .parse::<u64>()
        .ok()
        .filter(|_| shift < 64)
        .and_then(|n| n.checked_mul(1u64 << shift))
        .ok_or_else(|| {
            Error::invalid(format!(
                "{MAX_READ_ENV}={text:?} is not a number of bytes (e.g. 8589934592 or 8G)"
            ))
        })
}

/// A size in bytes for a message: `N bytes`, with the GiB/MiB/KiB it makes from 1 KiB up.
pub fn size_text(n: u64) -> String {
    let (unit, div) = match n {
        n if n >= 1 << 30 => ("GiB", (1u64 << 30) as f64),
        n if n >= 1 << 20 => ("MiB", (1u64 << 20) as f64),
        n if n >= 1 << 10 => ("KiB", 1024.0),
        _ => return format!("{n} bytes"),
    };
    format!("{n} bytes ({:.1} {unit})", n as f64 / div)
}

/// The bound on reading `len` bytes of `path` whole, `what` (a kind of file, as a message
/// names it: "a trace", "a compile cache entry"): [`max_read_bytes`]`(default)`, or an error
/// naming the file, its size, the bound and [`MAX_READ_ENV`] when `len` is larger. The one
/// check of every whole read of a file (a program, an artifact, a cache entry, a report),
/// so that one read of a file cannot pass where another read of it is refused.
pub fn read_bound(path: &std::path::Path, len: u64, default: u64, what: &str) -> Result<u64> {
    let max = max_read_bytes(default)?;
    if len > max {
        return Err(Error::invalid(format!(
            "{}: {}, larger than the {} rpjrt reads whole from {what}; set {MAX_READ_ENV} \
             to a larger number of bytes to read it",
            path.display(),
            size_text(len),
            size_text(max)
        )));
    }
    Ok(max)
}

/// [`read_regular_file`] with the bound of `what` (a kind of file, for the message:
/// "a trace", "a conformance report"): a file larger than [`max_read_bytes`]`(default)` is
/// refused before anything is allocated or read ([`read_bound`]). The buffer is reserved
/// with `try_reserve_exact`, so a file within the bound that does not fit in memory is
/// [`Error::ResourceExhausted`], never an abort; the read itself is bounded by the size
/// found, so a file that grows meanwhile is refused too, not read on without end. A file
/// whose size says 0 but that has contents (a `/proc` or `/sys` file, made as it is read)
/// is read up to the bound (`read_generated`).
pub fn read_regular_file_at_most(
    path: impl AsRef<std::path::Path>,
    default: u64,
    what: &str,
) -> Result<Vec<u8>> {
    use std::io::Read as _;
    let path = path.as_ref();
    let (mut file, len) = open_regular_file(path)?;
    let max = read_bound(path, len, default, what)?;
    if len == 0 {
        return read_generated(&mut file, path, max, what);
    }
    let mut bytes = Vec::new();
    usize::try_from(len)
        .ok()
        .and_then(|n| bytes.try_reserve_exact(n).ok())
        .ok_or_else(|| {
            Error::ResourceExhausted(format!(
                "{}: {}, too large to read into memory",
                path.display(),
                size_text(len)
            ))
        })?;
    let fail = |e: &dyn std::fmt::Display| Error::invalid(format!("{}: {e}", path.display()));
    // At most the size found: the reserved buffer never grows (an allocation failure
    // there would abort the process).
    (&mut file)
        .take(len)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(&e))?;
    let mut more = [0u8; 1];
    match file.read(&mut more) {
        Ok(0) => Ok(bytes),
        Ok(_) => Err(fail(&format_args!(
            "it grew past the {len} bytes it had when opened while being read; read it \
             again once it is written"
        ))),
        Err(e) => Err(fail(&e)),
    }
}

/// The contents of `file` (`path`), a regular file whose size says 0: empty, or a file
/// made as it is read (`/proc/cpuinfo`, a `/sys` attribute), read to its end in pieces, at
/// most `max` bytes (the bound of `what`, [`read_bound`]). The buffer grows with
/// `try_reserve`, so memory running out is [`Error::ResourceExhausted`], never an abort.
fn read_generated(
    file: &mut std::fs::File,
    path: &std::path::Path,
    max: u64,
    what: &str,
) -> Result<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes: Vec<u8> = Vec::new();
    let mut piece = vec![0u8; 64 << 10];
    loop {
        let n = match file.read(&mut piece) {
            Ok(0) => return Ok(bytes),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::invalid(format!("{}: {e}", path.display()))),
        };
        if (bytes.len() + n) as u64 > max {
            return Err(Error::invalid(format!(
                "{}: a special file (its size says 0, as /proc's and /sys's files do, and its \
                 contents are made as it is read) with more than the {} rpjrt reads whole \
                 from {what}; set {MAX_READ_ENV} to a larger number of bytes to read it",
                path.display(),
                size_text(max)
            )));
        }
        bytes.try_reserve(n).map_err(|_| {
            Error::ResourceExhausted(format!(
                "{}: {}, too large to read into memory",
                path.display(),
                size_text((bytes.len() + n) as u64)
            ))
        })?;
        bytes.extend_from_slice(&piece[..n]);
    }
}

/// Makes a write past the process's file-size limit (`ulimit -f`, `RLIMIT_FSIZE`) fail
/// with `EFBIG` ("File too large"), which the writers here report naming the file and
/// clean up after (the temporary file removed), instead of ending the process with
/// `SIGXFSZ` in mid-write. CPython ignores the signal the same way at start-up; the CLI
/// calls this first of all. The disposition is inherited by the processes it starts.
pub fn ignore_file_size_signal() {
    #[cfg(unix)]
    // SAFETY: sets SIGXFSZ's disposition to "ignore"; no handler code of ours runs, and
    // `signal` with SIG_IGN has no other effect.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// This process's `RLIMIT_NOFILE` (soft and hard); `None` when it cannot be read.
#[cfg(unix)]
fn nofile() -> Option<libc::rlimit> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the one rlimit struct it is given, alive for the call.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0).then_some(r)
}

/// The most files this process may have open (the soft `RLIMIT_NOFILE`, what `ulimit -n`
/// shows); `None` when unlimited or unknown.
pub fn open_files_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let r = nofile()?;
        (r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur as u64)
    }
    #[cfg(not(unix))]
    None
}

/// Raises this process's soft limit on open files to its hard limit (what an unprivileged
/// process may do; Go's runtime does the same at start-up), for a process that serves many
/// connections (the host of a job's key-value store: 4 descriptors per peer). Returns the
/// soft limit in force afterwards; `None` when unknown.
pub fn raise_open_files_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut r = nofile()?;
        if r.rlim_cur < r.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: r.rlim_max,
                rlim_max: r.rlim_max,
            };
            // SAFETY: setrlimit reads the one rlimit struct it is given; a refusal leaves
            // the limits as they were.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                r.rlim_cur = r.rlim_max;
            }
        }
        (r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur as u64)
    }
    #[cfg(not(unix))]
    None
}

/// A regular file opened for reading, with its size: what [`read_regular_file`] reads,
/// for a caller that looks at its first bytes before reading the rest. Refuses what
/// [`read_regular_file`] refuses, with the same errors, without blocking and without
/// reading from it.
///
/// The file is opened once, and everything said about it comes from that open file: its
/// kind and its size are the open handle's (`fstat`), not another look at `path`, which
/// another process may have replaced in between (an atomic save renames a new file over
/// the old one: the size of one and the bytes of the other would make an intact file look
/// truncated). A `path` that is already a FIFO, a directory or a device is refused before
/// it is opened; one swapped for a FIFO just before the open is opened without blocking
/// (`O_NONBLOCK`, cleared again for a regular file) and then refused.
pub fn open_regular_file(path: impl AsRef<std::path::Path>) -> Result<(std::fs::File, u64)> {
    let path = path.as_ref();
    let fail = |e: &dyn std::fmt::Display| Error::invalid(format!("{}: {e}", path.display()));
    // Not opened at all when it is plainly no regular file (opening some devices acts).
    if !std::fs::metadata(path).map_err(|e| fail(&e))?.is_file() {
        return Err(fail(&"not a regular file"));
    }
    let (file, meta) = open_for_reading(path).map_err(|e| fail(&e))?;
    // What was opened decides, whatever `path` names now or named a moment ago.
    if !meta.is_file() {
        return Err(fail(&"not a regular file"));
    }
    Ok((file, meta.len()))
}

/// `path` opened for reading without ever waiting for a FIFO's writer, with the metadata
/// of what was opened (`fstat`), for the caller to check (`is_file`) before reading: a
/// regular file reads as usual, anything else keeps `O_NONBLOCK` and is not to be read.
/// For a caller that handles its own errors (a missing file is `NotFound`); see
/// [`open_regular_file`].
pub fn open_for_reading(
    path: impl AsRef<std::path::Path>,
) -> std::io::Result<(std::fs::File, std::fs::Metadata)> {
    let file = open_nonblocking(path.as_ref())?;
    let meta = file.metadata()?;
    if meta.is_file() {
        set_blocking(&file)?;
    }
    Ok((file, meta))
}

/// `path` opened for reading without waiting for a FIFO's writer.
#[cfg(unix)]
fn open_nonblocking(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// Clears the `O_NONBLOCK` that [`open_nonblocking`] set, so that the caller's reads are
/// plain reads (Linux ignores the flag for regular files; other systems need not).
#[cfg(unix)]
fn set_blocking(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd as _;
    let fd = file.as_raw_fd();
    // SAFETY: `fd` is the open descriptor `file` owns, alive for this call; F_GETFL takes
    // no argument and only reads the descriptor's status flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if flags & libc::O_NONBLOCK != 0 {
        // SAFETY: as above; F_SETFL takes an int of status flags and changes only this
        // descriptor's file status flags (O_NONBLOCK cleared, the rest as they were).
        if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn set_blocking(_file: &std::fs::File) -> std::io::Result<()> {
    Ok(())
}

/// What a file that is not a regular file is, in words for a message ("a directory", "a
/// FIFO (named pipe)", "a character device", ...); `None` for a regular file.
pub fn kind_of(meta: &std::fs::Metadata) -> Option<&'static str> {
    #[cfg(unix)]
    use std::os::unix::fs::FileTypeExt as _;
    let t = meta.file_type();
    Some(match t {
        t if t.is_file() => return None,
        t if t.is_dir() => "a directory",
        #[cfg(unix)]
        t if t.is_fifo() => "a FIFO (named pipe)",
        #[cfg(unix)]
        t if t.is_char_device() => "a character device",
        #[cfg(unix)]
        t if t.is_block_device() => "a block device",
        #[cfg(unix)]
        t if t.is_socket() => "a socket",
        _ => "not a plain file",
    })
}

/// Checks that a file can be written at `path` by replacing it: nothing there yet, or a
/// regular file. A FIFO, a device, a socket or a directory is refused: writing to a FIFO
/// blocks until a reader comes, and renaming a new file over a device node (as
/// [`write_regular_file`] does) would replace the node itself.
///
/// ```
/// let e = rpjrt_raw::files::check_regular_output("/dev/null").unwrap_err();
/// assert!(e.to_string().contains("/dev/null: a character device, not a regular file"));
/// ```
pub fn check_regular_output(path: impl AsRef<std::path::Path>) -> Result<()> {
    let path = path.as_ref();
    let kind = match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::invalid(format!("{}: {e}", path.display()))),
        Ok(m) => match kind_of(&m) {
            None => return Ok(()),
            Some(kind) => kind,
        },
    };
    Err(Error::invalid(format!(
        "{}: {kind}, not a regular file; give a file name to write",
        path.display()
    )))
}

/// The file a symbolic link at `path` leads to (following links in turn, as opening it
/// would), or `path` itself when it is no link. The target need not exist.
fn follow_links(path: &std::path::Path) -> Result<std::path::PathBuf> {
    let mut p = path.to_path_buf();
    // Linux's own bound on links followed in one path lookup.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p)
                    .map_err(|e| Error::invalid(format!("{}: {e}", p.display())))?;
                p = match p.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(Error::invalid(format!(
        "{}: too many levels of symbolic links",
        path.display()
    )))
}

/// Writes the file at `path` whole or not at all: `write` fills a new temporary file in the
/// same directory (a name of its own, never an existing file), which then replaces `path`.
/// A `path` that exists and is not a regular file is refused untouched
/// ([`check_regular_output`]); on any error the temporary file is removed. Errors name
/// `path`. A symbolic link at `path` is followed: the file it leads to is replaced (in
/// that file's directory) and the link stays, as writing through the link would do;
/// replacing the link itself would leave its target holding the old contents.
/// A file that is replaced keeps its permission bits (a read-only 0444 file stays
/// read-only); being a new file, it gets this process's owner and is no longer
/// hard-linked to the old file's other names.
pub fn write_regular_file(
    path: impl AsRef<std::path::Path>,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> Result<()> {
    let given = path.as_ref();
    check_regular_output(given)?;
    let target = follow_links(given)?;
    write_over(given, &target, write)
}

/// [`write_regular_file`] that never follows a symbolic link at `path`: the link itself is
/// replaced by the new file (renamed over the name), and the file it led to is left as it
/// was. For files rpjrt keeps for itself in a shared directory (the plugin-build memo of a
/// compile cache), where a planted link must not make rpjrt overwrite, or create, a file
/// elsewhere.
pub fn replace_regular_file(
    path: impl AsRef<std::path::Path>,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> Result<()> {
    let given = path.as_ref();
    let link = std::fs::symlink_metadata(given).is_ok_and(|m| m.file_type().is_symlink());
    if !link {
        check_regular_output(given)?;
    }
    write_over(given, given, write)
}

/// Writes a temporary file beside `path` (no link: the file to replace, or a new name) and
/// renames it over `path`; errors name `given`, the name the caller was given.
fn write_over(
    given: &std::path::Path,
    path: &std::path::Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> Result<()> {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let fail = |e: &dyn std::fmt::Display| Error::invalid(format!("{}: {e}", given.display()));
    let name = path.file_name().ok_or_else(|| fail(&"not a file name"))?;
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let suffix = format!(".{}-{n}.tmp", std::process::id());
    // Within the 255 bytes a file name may have: a long name is shortened in the temporary.
    let keep = 255 - 1 - suffix.len();
    let mut tmp_name = std::ffi::OsString::from(".");
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt as _;
        let b = name.as_bytes();
        tmp_name.push(std::ffi::OsStr::from_bytes(&b[..b.len().min(keep)]));
    }
    #[cfg(not(unix))]
    tmp_name.push(name);
    tmp_name.push(suffix);
    let tmp = path.with_file_name(tmp_name);
    let mut file = std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| {
            Error::io(
                format_args!(
                    "{}: cannot create the temporary file {}",
                    given.display(),
                    tmp.display()
                ),
                &e,
            )
        })?;
    // The file replaced keeps its mode: the new one would otherwise get the default.
    let keep_mode = std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.permissions());
    let result = write(&mut file)
        .and_then(|()| keep_mode.map_or(Ok(()), |mode| file.set_permissions(mode)))
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(given.display(), &e));
    }
    // Temporaries of earlier writers of this file that were killed mid-write: named as
    // above, the whole name or (a long one) its first `keep` bytes.
    if let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        remove_orphaned_temps(dir, 2, |t| {
            let rest = t.strip_prefix('.')?.strip_suffix(".tmp")?;
            let (written, numbers) = rest.rsplit_once('.')?;
            let cut = 255usize.checked_sub(numbers.len() + ".tmp".len() + 2) == Some(written.len());
            (written == name || (cut && name.starts_with(written))).then_some(numbers)
        });
    }
    Ok(())
}

/// Removes the temporary files in `dir` that writers killed mid-write left: regular files
/// whose name `numbers_of` recognises, giving its numbers part (`fields` numbers joined by
/// `-`, the first the writer's process id, each written as a plain decimal), untouched for
/// at least [`ORPHAN_AGE`], whose process no longer runs. The age guards a writer this
/// process cannot see (another PID namespace, another host sharing the directory). Only
/// where `/proc` tells which processes run (Linux); elsewhere nothing is removed.
pub fn remove_orphaned_temps(
    dir: &std::path::Path,
    fields: usize,
    numbers_of: impl Fn(&str) -> Option<&str>,
) {
    let proc = std::path::Path::new("/proc");
    if !proc.join("self").exists() {
        return;
    }
    let dir = if dir.as_os_str().is_empty() {
        std::path::Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let me = std::process::id();
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(&numbers_of) else {
            continue;
        };
        let numbers: Vec<u64> = rest
            .split('-')
            .map_while(|f| f.parse::<u64>().ok().filter(|v| v.to_string() == f))
            .collect();
        let pid = match numbers.as_slice() {
            [pid, ..] if numbers.len() == fields && rest.split('-').count() == fields => *pid,
            _ => continue,
        };
        let old = entry
            .metadata()
            .ok()
            .filter(|m| m.file_type().is_file())
            .and_then(|m| m.modified().ok())
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age >= ORPHAN_AGE);
        if old && pid != u64::from(me) && pid != 0 && !proc.join(pid.to_string()).exists() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// How long a temporary file must sit untouched before [`remove_orphaned_temps`] may
/// judge it left behind.
pub const ORPHAN_AGE: std::time::Duration = std::time::Duration::from_secs(600);

/// The identity of `file`, open at `path`, as text: the path, device, inode, size, and
/// modification and change times in nanoseconds. Any write to a file moves its change
/// time, which no call can set back, so changed contents never keep an identity. `None`
/// where the platform has no such fields or `fstat` fails.
pub fn identity(path: &std::path::Path, file: &std::fs::File) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        let m = file.metadata().ok()?;
        let times = [m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec()];
        Some(format!(
            "{path:?} {} {} {} {times:?}",
            m.dev(),
            m.ino(),
            m.size()
        ))
    }
    #[cfg(not(unix))]
    {
        let _ = (path, file);
        None
    }
}

/// Sets the open `file`'s access and modification times to now (`futimens` with
/// `UTIME_NOW`), as a use of it (the compile cache's LRU order). Unlike setting a given
/// time (`File::set_modified`), which only the file's owner may do, this needs only write
/// permission on the file (a group-writable entry of a cache shared by users), and a
/// descriptor opened for reading will do.
pub fn touch(file: &std::fs::File) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::io::AsRawFd as _;
        let now = libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        };
        let times = [now, now];
        // SAFETY: the descriptor is `file`'s, open for this call; `times` points to the
        // two timespecs futimens reads, alive for the call.
        if unsafe { libc::futimens(file.as_raw_fd(), times.as_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(unix))]
    file.set_modified(std::time::SystemTime::now())
}

/// The bytes of the regular file `path` when it holds at most `max` of them (opened
/// without waiting on a FIFO); `None` when it cannot be read or is larger.
pub fn read_small(path: &std::path::Path, max: u64) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let (f, m) = open_for_reading(path).ok()?;
    (m.is_file() && m.len() <= max).then_some(())?;
    let mut b = Vec::new();
    f.take(max + 1).read_to_end(&mut b).ok()?;
    (b.len() as u64 <= max).then_some(b)
}

/// A value kept in the memo file `memo` as one line `<value> <check>`: read from there
/// when `check(value)` is `Some` of the line's check, else made by `make` and written
/// there (atomically; a failed write only costs the next process the work). `check` says
/// `None` for a value of the wrong form, which is neither believed nor written. A damaged,
/// foreign or unreadable memo is never trusted. Without a memo, `make` runs.
pub fn memoized(
    memo: Option<&std::path::Path>,
    check: impl Fn(&str) -> Option<String>,
    make: impl FnOnce() -> String,
) -> String {
    // A symbolic link under the memo's name is neither read through nor written through:
    // the memo written replaces the link itself (`replace_regular_file`), so a link planted
    // in a shared cache directory cannot make this process overwrite a file elsewhere.
    let memo_file = memo.filter(|p| !std::fs::symlink_metadata(p).is_ok_and(|m| m.is_symlink()));
    let text = memo_file
        .and_then(|p| read_small(p, 4096))
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let kept = text.strip_suffix('\n').and_then(|t| t.split_once(' '));
    if let Some((value, _)) = kept.filter(|(v, c)| check(v).as_deref() == Some(*c)) {
        return value.to_string();
    }
    let value = make();
    if let (Some(p), Some(c)) = (memo, check(&value)) {
        let line = format!("{value} {c}\n");
        let _ = replace_regular_file(p, |f| std::io::Write::write_all(f, line.as_bytes()));
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("rpjrt-files-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn mkfifo(path: &std::path::Path) {
        let made = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(made.success());
    }

    /// Runs `f` on another thread and fails (instead of hanging) if it has not returned
    /// within 10 seconds.
    fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("blocked (on a FIFO?)")
    }

    #[test]
    fn a_file_replaced_atomically_while_read_is_read_whole_old_or_new() {
        // The size came from a look at the path, the bytes from an open made after it: a
        // file renamed over the path in between made an intact file look truncated (or
        // longer than its header said) to Artifact::read_file.
        let dir = temp_dir("replace");
        let path = dir.join("f.bin");
        let small = vec![1u8; 5306];
        let large = vec![2u8; 7331];
        write_regular_file(&path, |f| std::io::Write::write_all(f, &small)).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let mut k = 0usize;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let bytes = if k.is_multiple_of(2) { &large } else { &small };
                    write_regular_file(&path, |f| std::io::Write::write_all(f, bytes)).unwrap();
                    k += 1;
                }
            });
            let start = std::time::Instant::now();
            let mut reads = 0;
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                while reads < 300 || start.elapsed() < std::time::Duration::from_millis(1500) {
                    let (mut file, len) = open_regular_file(&path).unwrap();
                    let mut bytes = Vec::new();
                    std::io::Read::read_to_end(&mut file, &mut bytes).unwrap();
                    assert_eq!(bytes.len() as u64, len, "the size is the open file's");
                    assert!(bytes == small || bytes == large);
                    let whole = read_regular_file(&path).unwrap();
                    assert!(whole == small || whole == large);
                    reads += 1;
                }
            }));
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            if let Err(p) = result {
                std::panic::resume_unwind(p);
            }
        });
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn what_is_no_regular_file_is_refused_without_blocking() {
        let dir = temp_dir("kinds");
        let fifo = dir.join("pipe");
        mkfifo(&fifo);
        let fifo_text = fifo.display().to_string();
        let dir_text = dir.display().to_string();
        for (p, text) in [
            (fifo.clone(), fifo_text),
            (dir.clone(), dir_text),
            ("/dev/zero".into(), "/dev/zero".to_string()),
        ] {
            let e = within_10s(move || open_regular_file(&p).map(|(_, n)| n)).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("invalid argument: {text}: not a regular file")
            );
        }
        let e = read_regular_file(dir.join("missing")).unwrap_err();
        assert!(e.to_string().contains("missing: No such file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_fifo_that_replaced_a_file_after_the_first_look_is_opened_without_blocking() {
        // The path is looked at first (so a FIFO is usually never opened); one put there
        // just after that look is opened here, which must not wait for a writer, and the
        // open handle then says what it is.
        let dir = temp_dir("fifoswap");
        let fifo = dir.join("pipe");
        mkfifo(&fifo);
        let meta = within_10s(move || {
            let file = open_nonblocking(&fifo).unwrap();
            file.metadata().unwrap()
        });
        assert!(!meta.is_file());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_over_the_bound_is_refused_before_anything_is_allocated() {
        // A 100 GiB sparse file was given to Vec::with_capacity: the allocation failure
        // aborted the process.
        let dir = temp_dir("huge");
        let path = dir.join("big.mlir");
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(100 << 30).unwrap();
        let e = read_regular_file(&path).unwrap_err().to_string();
        assert!(
            e.contains("big.mlir: 107374182400 bytes (100.0 GiB)"),
            "{e}"
        );
        assert!(e.contains("4294967296 bytes (4.0 GiB)"), "{e}");
        assert!(e.contains(MAX_READ_ENV), "{e}");
        f.set_len(5000).unwrap();
        let e = read_regular_file_at_most(&path, 4096, "a report").unwrap_err();
        assert!(e.to_string().contains("reads whole from a report"), "{e}");
        assert_eq!(
            read_regular_file_at_most(&path, 5000, "x").unwrap().len(),
            5000
        );
        assert_eq!(read_regular_file(&path).unwrap(), vec![0u8; 5000]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_link_under_a_memo_name_is_replaced_not_written_through() {
        let dir = temp_dir("memolink");
        let victim = dir.join("victim.txt");
        std::fs::write(&victim, b"keep me").unwrap();
        let cache = dir.join("cache");
        std::fs::create_dir(&cache).unwrap();
        let memo = cache.join(".memo");
        std::os::unix::fs::symlink("../victim.txt", &memo).unwrap();
        let check = |v: &str| Some(format!("c{v}"));
        assert_eq!(memoized(Some(&memo), check, || "v1".into()), "v1");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
        assert!(!std::fs::symlink_metadata(&memo).unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(&memo).unwrap(), "v1 cv1\n");
        // A dangling link creates nothing where it leads.
        std::fs::remove_file(&memo).unwrap();
        std::os::unix::fs::symlink("../made.txt", &memo).unwrap();
        assert_eq!(memoized(Some(&memo), check, || "v2".into()), "v2");
        assert!(!dir.join("made.txt").exists());
        assert_eq!(std::fs::read_to_string(&memo).unwrap(), "v2 cv2\n");
        // The memo itself still works.
        assert_eq!(memoized(Some(&memo), check, || unreachable!()), "v2");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn touch_moves_the_times_of_a_file_open_for_reading() {
        let dir = temp_dir("touch");
        let path = dir.join("f");
        std::fs::write(&path, b"abc").unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let (file, _) = open_regular_file(&path).unwrap();
        touch(&file).unwrap();
        let m = std::fs::metadata(&path).unwrap().modified().unwrap();
        assert!(
            m.elapsed().unwrap() < std::time::Duration::from_secs(60),
            "{m:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_file_handed_back_reads_as_a_plain_blocking_file() {
        use std::os::unix::io::AsRawFd as _;
        let dir = temp_dir("flags");
        let path = dir.join("f");
        std::fs::write(&path, b"abc").unwrap();
        let (file, len) = open_regular_file(&path).unwrap();
        assert_eq!(len, 3);
        // SAFETY: the descriptor is `file`'s, open for this call; F_GETFL only reads its
        // status flags.
        let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
        assert!(flags >= 0);
        assert_eq!(flags & libc::O_NONBLOCK, 0, "O_NONBLOCK is cleared");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
