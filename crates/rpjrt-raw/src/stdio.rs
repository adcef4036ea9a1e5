//! File-descriptor plumbing for plugins that write to the process's stdout and stderr.
//!
//! A plugin writes to descriptors 1 and 2 directly (C `printf`, absl logging), so only the
//! descriptors themselves can be moved: [`Diverted`] points descriptor 1 or 2 somewhere
//! else and puts the original back on drop; [`write_saved`] writes to a descriptor kept
//! aside (the real stderr while it is captured).

use std::fs::File;
use std::io::{self, Write};
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// A new descriptor for the same open file as `fd` (close-on-exec, numbered above 2).
pub fn duplicate(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a descriptor the caller holds open (a BorrowedFd)
    // touches no memory of ours.
    let r = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `r` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(r) })
}

/// Which standard descriptor to move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Std {
    /// Descriptor 1.
    Out,
    /// Descriptor 2.
    Err,
}

impl Std {
    fn fd(self) -> RawFd {
        match self {
            Std::Out => 1,
            Std::Err => 2,
        }
    }

    /// The standard descriptor, borrowed. It is open for the life of the process in any
    /// program that writes output (we only ever replace it, never close it).
    fn borrowed(self) -> BorrowedFd<'static> {
        // SAFETY: descriptors 1 and 2 are never closed by rpjrt: `Diverted` replaces them
        // with dup2, which is atomic, so they stay open.
        unsafe { BorrowedFd::borrow_raw(self.fd()) }
    }
}

/// Points a standard descriptor at another file until dropped, then puts the original back.
pub struct Diverted {
    which: Std,
    saved: OwnedFd,
}

fn flush(which: Std) {
    // Rust's own buffered stdout must reach the file it was written for.
    match which {
        Std::Out => drop(io::stdout().flush()),
        Std::Err => drop(io::stderr().flush()),
    }
}

fn redirect(from: BorrowedFd<'_>, which: Std) -> io::Result<()> {
    // SAFETY: dup2 atomically makes the standard descriptor `which` refer to the open file
    // of `from` (held open by the caller); no memory is involved.
    if unsafe { libc::dup2(from.as_raw_fd(), which.fd()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Diverted {
    /// Points `which` at `to`'s open file.
    pub fn new(which: Std, to: BorrowedFd<'_>) -> io::Result<Diverted> {
        flush(which);
        let saved = duplicate(which.borrowed())?;
        redirect(to, which)?;
        Ok(Diverted { which, saved })
    }

    /// A new descriptor for the original file (to write to it while diverted).
    pub fn original(&self) -> io::Result<OwnedFd> {
        use std::os::fd::AsFd;
        duplicate(self.saved.as_fd())
    }
}

impl Drop for Diverted {
    fn drop(&mut self) {
        use std::os::fd::AsFd;
        flush(self.which);
        // Nothing sensible is left to do if this fails: the descriptor stays diverted.
        let _ = redirect(self.saved.as_fd(), self.which);
    }
}

/// The standard descriptor `which`, borrowed (for diverting one onto the other).
pub fn standard(which: Std) -> BorrowedFd<'static> {
    which.borrowed()
}

/// Writes all of `bytes` to `fd` without taking ownership of it.
pub fn write_saved(fd: BorrowedFd<'_>, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: the descriptor is open for the duration of the borrow; ManuallyDrop keeps the
    // temporary File from closing it.
    let mut f = ManuallyDrop::new(unsafe { File::from_raw_fd(fd.as_raw_fd()) });
    f.write_all(bytes)
}

/// Whether descriptor 1 was closed when the process started (`cmd >&-`), as
/// [`check_stdout_at_start`] found it before Rust's runtime ran: the runtime reopens a
/// closed descriptor 0, 1 or 2 on `/dev/null`, after which a closed stdout and `>/dev/null`
/// look alike and every write "succeeds".
static STDOUT_CLOSED_AT_START: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Runs [`check_stdout_at_start`] as an initializer: the loader runs `.init_array` entries
/// before `main` (for a program) or when the library is loaded (for a Python extension).
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static CHECK_STDOUT_AT_START: extern "C" fn() = check_stdout_at_start;

/// Records whether descriptor 1 is closed now (see [`stdout_closed_at_start`]). Does no
/// more than one system call: it runs before Rust's runtime is set up.
#[cfg(target_os = "linux")]
extern "C" fn check_stdout_at_start() {
    // SAFETY: fcntl(F_GETFD) only reads the descriptor table entry of descriptor 1; it
    // touches no memory of ours. Errno is read right after, on this same thread.
    let closed = unsafe { libc::fcntl(1, libc::F_GETFD) } < 0
        // SAFETY: __errno_location returns this thread's errno, always valid to read.
        && unsafe { *libc::__errno_location() } == libc::EBADF;
    STDOUT_CLOSED_AT_START.store(closed, std::sync::atomic::Ordering::Relaxed);
}

/// True when descriptor 1 was closed as the process started (`cmd >&-`), before Rust's
/// runtime put `/dev/null` there. Known on Linux only (false elsewhere). A program whose
/// output is its purpose can then fail instead of discarding it silently.
pub fn stdout_closed_at_start() -> bool {
    STDOUT_CLOSED_AT_START.load(std::sync::atomic::Ordering::Relaxed)
}
