//! Keeping a plugin's own output out of a program's output.
//!
//! Plugins write to the process's descriptors 1 and 2 directly: log lines from absl and
//! the CUDA stubs, banners on stdout (jax-tt-plugin prints 14 lines when it loads), and
//! libtpu's start-up report. A tool whose stdout is machine-readable, or which wants a
//! quiet stderr, moves the descriptors themselves:
//!
//! - [`divert_stdout`] sends descriptor 1 to stderr for as long as the guard lives and
//!   hands out the original stdout for the tool's own output;
//! - [`capture`] sends descriptors 1 and 2 into a temporary file for as long as the guard
//!   lives; [`Capture::finish`] returns what was written, so it can be shown when
//!   something failed and dropped otherwise;
//! - [`notice`] writes a line to the real stderr even while a capture is active, and
//!   [`watch`] uses it to say what a call is waiting on when it takes long.
//!
//! Descriptors are process-wide: while a guard lives, every thread's writes move with them.
//! Guards are meant for a command-line tool's main thread; the library itself never
//! creates one.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::stdio::{self as raw_stdio, Diverted, Std};

fn io_error(what: &str, e: std::io::Error) -> Error {
    Error::invalid(format!("cannot {what}: {e}"))
}

/// Descriptor 1 sent to stderr until dropped (see [`divert_stdout`]).
pub struct StdoutDiverted {
    inner: Diverted,
}

impl StdoutDiverted {
    /// The original stdout, as a file to write the program's own output to.
    pub fn original(&self) -> Result<File> {
        self.inner
            .original()
            .map(File::from)
            .map_err(|e| io_error("reopen stdout", e))
    }
}

/// Sends everything written to descriptor 1 (by any thread, and by a plugin's C code) to
/// stderr until the guard is dropped; [`StdoutDiverted::original`] still reaches the real
/// stdout.
pub fn divert_stdout() -> Result<StdoutDiverted> {
    Diverted::new(Std::Out, raw_stdio::standard(Std::Err))
        .map(|inner| StdoutDiverted { inner })
        .map_err(|e| io_error("divert stdout to stderr", e))
}

/// How much of a capture [`Capture::finish`] returns: the last 64 KiB.
pub const CAPTURE_KEEP: u64 = 64 << 10;

/// The real stderr while a [`Capture`] is active (for [`notice`]).
static REAL_STDERR: Mutex<Option<OwnedFd>> = Mutex::new(None);

/// A capture's file is replaced by a fresh one once it holds this much, so that a plugin
/// that writes without end (a retry loop logging each try while its load hangs) fills
/// the disk with at most about twice this, plus what it writes between two checks (every
/// 20 ms): only the last [`CAPTURE_KEEP`] bytes are ever shown.
pub const CAPTURE_ROTATE_AT: u64 = 4 * CAPTURE_KEEP;

/// How often a capture checks the size of its file (see [`CAPTURE_ROTATE_AT`]).
const ROTATE_EVERY: Duration = Duration::from_millis(20);

/// One file of a capture, removed (its name, when it has one) when dropped.
struct Segment {
    file: File,
    name: Option<std::path::PathBuf>,
}

impl Segment {
    /// A new empty file in `dir`, keeping its name when `named` (else it lives on only
    /// through the descriptor).
    fn create(dir: &std::path::Path, named: bool) -> Result<Segment> {
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = dir.join(format!(
            ".rpjrt-capture-{}-{nanos}-{}",
            std::process::id(),
            SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&name)
            .map_err(|e| io_error(&format!("create {}", name.display()), e))?;
        let name = if named {
            Some(name)
        } else {
            let _ = std::fs::remove_file(&name);
            None
        };
        Ok(Segment { file, name })
    }

    fn len(&self) -> u64 {
        self.file.metadata().map_or(0, |m| m.len())
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if let Some(name) = self.name.take() {
            let _ = std::fs::remove_file(name);
        }
    }
}

/// The files of a capture: the one descriptors 1 and 2 write to now, the one before it
/// (its end may be all of what is shown), and how many bytes went into older ones, which
/// are gone.
struct Segments {
    dir: std::path::PathBuf,
    named: bool,
    prev: Option<Segment>,
    cur: Segment,
    dropped: u64,
}

impl Segments {
    /// Starts a new file when the current one holds [`CAPTURE_ROTATE_AT`] bytes or more:
    /// descriptors 1 and 2 move to it, and the file before the current one is removed.
    fn rotate_if_full(&mut self) {
        if self.cur.len() < CAPTURE_ROTATE_AT {
            return;
        }
        let Ok(next) = Segment::create(&self.dir, self.named) else {
            return;
        };
        use std::os::fd::AsRawFd;
        for fd in [2, 1] {
            // SAFETY: dup2 atomically makes descriptor 1 or 2 refer to the open file of
            // `next`, which is held open here; no memory is involved. A write in flight
            // on another thread completes on the file it started on, which is kept.
            if unsafe { libc::dup2(next.file.as_raw_fd(), fd) } < 0 {
                // Nothing moved for this descriptor: keep writing where it writes now.
                // (Descriptor 2 moved and 1 did not: both files are kept below.)
                if fd == 2 {
                    return;
                }
            }
        }
        let old = std::mem::replace(&mut self.cur, next);
        if let Some(gone) = self.prev.replace(old) {
            self.dropped += gone.len();
        }
    }

    /// The last [`CAPTURE_KEEP`] bytes written, as lossy UTF-8 from a whole line, with a
    /// note of what was left out. Reads at offsets: no descriptor's position is used.
    fn tail(&self) -> String {
        use std::os::unix::fs::FileExt;
        let mut parts: Vec<&Segment> = self.prev.iter().collect();
        parts.push(&self.cur);
        let lens: Vec<u64> = parts.iter().map(|s| s.len()).collect();
        let total: u64 = lens.iter().sum();
        let want = total.min(CAPTURE_KEEP);
        let from = self.dropped + (total - want);
        // Skip the first `total - want` bytes across the files, read the rest in order.
        let mut skip = total - want;
        let mut text = Vec::with_capacity(want as usize);
        for (seg, len) in parts.iter().zip(lens) {
            let start = skip.min(len);
            skip -= start;
            let mut buf = vec![0u8; (len - start) as usize];
            let mut got = 0;
            while got < buf.len() {
                match seg.file.read_at(&mut buf[got..], start + got as u64) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
            }
            buf.truncate(got);
            text.extend_from_slice(&buf);
        }
        let text = String::from_utf8_lossy(&text).into_owned();
        if from > 0 {
            // Start at a whole line.
            let rest = text.split_once('\n').map_or("", |(_, r)| r);
            format!("({from} earlier bytes left out)\n{rest}")
        } else {
            text
        }
    }
}

fn lock(segments: &Mutex<Segments>) -> std::sync::MutexGuard<'_, Segments> {
    segments.lock().unwrap_or_else(|p| p.into_inner())
}

/// Descriptors 1 and 2 captured into a temporary file (see [`capture`]).
pub struct Capture {
    // Dropped in this order: stderr is restored before stdout, then the file closes.
    err: Option<Diverted>,
    out: Option<Diverted>,
    segments: std::sync::Arc<Mutex<Segments>>,
    /// The thread that keeps the capture's size bounded (see [`CAPTURE_ROTATE_AT`]), and
    /// the sender whose drop stops it.
    rotator: Option<(mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
}

/// Sends what is written to descriptors 2 and 1 into a temporary file until
/// [`Capture::finish`] (or drop). Lines written with [`notice`] meanwhile still reach the
/// real stderr. Captures do not nest: a second one while one is active is refused.
pub fn capture() -> Result<Capture> {
    capture_in(None)
}

/// As [`capture`]; with `keep_in`, the file is made in that directory and keeps its name
/// until the capture ends (it is removed then), so that a process watching this one can
/// read what a plugin wrote before it crashed the process. The capture's files on disk
/// stay bounded whatever the plugin writes: once a file holds [`CAPTURE_ROTATE_AT`]
/// bytes, the descriptors move to a new one and the one before is removed (in `keep_in`
/// there are then two files; the end of the older, then the newer, is the end of the log).
pub fn capture_in(keep_in: Option<&std::path::Path>) -> Result<Capture> {
    let mut real = REAL_STDERR.lock().unwrap_or_else(|p| p.into_inner());
    if real.is_some() {
        return Err(Error::invalid(
            "stdout and stderr are already being captured (captures do not nest)",
        ));
    }
    let dir = keep_in.map_or_else(std::env::temp_dir, |d| d.to_path_buf());
    let first = Segment::create(&dir, keep_in.is_some())?;
    let saved = raw_stdio::duplicate(raw_stdio::standard(Std::Err))
        .map_err(|e| io_error("duplicate stderr", e))?;
    let err =
        Diverted::new(Std::Err, first.file.as_fd()).map_err(|e| io_error("capture stderr", e))?;
    let out =
        Diverted::new(Std::Out, first.file.as_fd()).map_err(|e| io_error("capture stdout", e))?;
    let segments = std::sync::Arc::new(Mutex::new(Segments {
        dir,
        named: keep_in.is_some(),
        prev: None,
        cur: first,
        dropped: 0,
    }));
    let rotator = start_rotator(std::sync::Arc::clone(&segments));
    *real = Some(saved);
    Ok(Capture {
        err: Some(err),
        out: Some(out),
        segments,
        rotator,
    })
}

/// Starts the thread that checks a capture's size every [`ROTATE_EVERY`] (none when a
/// thread cannot be started: the capture then works unbounded, as before).
fn start_rotator(
    segments: std::sync::Arc<Mutex<Segments>>,
) -> Option<(mpsc::Sender<()>, std::thread::JoinHandle<()>)> {
    let (stop, rx) = mpsc::channel::<()>();
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("rpjrt-capture".into())
        .spawn(move || {
            // As in `watch_until`: the thread's first uses of thread-locals happen before
            // the caller goes on into a call (a `dlopen`) that may hold the loader's lock.
            let _ = rx.recv_timeout(Duration::from_millis(1));
            let _ = std::thread::current();
            let _ = ready_tx.send(());
            while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(ROTATE_EVERY) {
                lock(&segments).rotate_if_full();
            }
        })
        .ok()?;
    let _ = ready_rx.recv_timeout(Duration::from_secs(1));
    Some((stop, thread))
}

/// What a capture holds so far, readable from another thread while it goes on (see
/// [`Capture::log`]).
pub struct CaptureLog(std::sync::Arc<Mutex<Segments>>);

impl CaptureLog {
    /// What was captured up to now, cut as [`Capture::finish`] cuts it.
    pub fn read(&self) -> String {
        lock(&self.0).tail()
    }
}

impl Capture {
    /// Puts descriptors 1 and 2 back and returns what was written meanwhile (lossy UTF-8;
    /// the last [`CAPTURE_KEEP`] bytes when more was written).
    pub fn finish(mut self) -> String {
        self.put_back();
        let text = lock(&self.segments).tail();
        self.restore();
        text
    }

    /// A reader of what this capture holds so far, for another thread (e.g. to show a
    /// plugin's log when giving up on a call that does not return).
    pub fn log(&self) -> Option<CaptureLog> {
        Some(CaptureLog(std::sync::Arc::clone(&self.segments)))
    }

    /// Stops the size checks; the descriptors then stay on the current file.
    fn stop_rotator(&mut self) {
        if let Some((stop, thread)) = self.rotator.take() {
            drop(stop);
            let _ = thread.join();
        }
    }

    /// Puts descriptors 1 and 2 back (Rust's buffered output flushed into the capture
    /// first).
    fn put_back(&mut self) {
        // No rotation may move the descriptors after they are put back.
        self.stop_rotator();
        let mut real = REAL_STDERR.lock().unwrap_or_else(|p| p.into_inner());
        self.err.take();
        self.out.take();
        *real = None;
    }

    fn restore(&mut self) {
        self.put_back();
        let mut segments = lock(&self.segments);
        segments.prev.take();
        // The current file's name goes now; its descriptor closes with the last reader.
        if let Some(name) = segments.cur.name.take() {
            let _ = std::fs::remove_file(name);
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.restore();
    }
}

pub use crate::process::{die_with_parent, exit_now, wait_until, Reaped};

/// Writes `line` and a newline to the real stderr, even while a [`Capture`] is active.
pub fn notice(line: &str) {
    let real = REAL_STDERR.lock().unwrap_or_else(|p| p.into_inner());
    let text = format!("{line}\n");
    match real.as_ref() {
        Some(fd) => drop(raw_stdio::write_saved(fd.as_fd(), text.as_bytes())),
        // Never a panic when stderr cannot be written (a full disk): the line is lost.
        None => drop(std::io::Write::write_all(
            &mut std::io::stderr().lock(),
            text.as_bytes(),
        )),
    }
}

/// Says on the real stderr what a slow call is waiting on (see [`watch`]); stops when
/// dropped.
pub struct Watch {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Starts a watch on a call that may block: if it is still running after `first`, a line
/// `rpjrt: still waiting after Ns: {what}` goes to the real stderr, then one every 30 s.
/// Dropping the watch (when the call returns) stops it.
pub fn watch(what: impl Into<String>, first: Duration) -> Watch {
    watch_until(what, first, None)
}

/// What a [`watch_until`] does when its call is still running at the deadline: it is given
/// how long the call ran. Meant to end the process (see [`exit_now`]): the call cannot be
/// taken back from the plugin.
pub type OnDeadline = Box<dyn FnOnce(Duration) + Send>;

/// As [`watch`], and when the call is still running after `deadline.0`, the watch calls
/// `deadline.1` (and stops noting).
pub fn watch_until(
    what: impl Into<String>,
    first: Duration,
    deadline: Option<(Duration, OnDeadline)>,
) -> Watch {
    let what = what.into();
    let (stop, rx) = mpsc::channel::<()>();
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let started = Instant::now();
    let thread = std::thread::Builder::new()
        .name("rpjrt-watch".into())
        .spawn(move || {
            // A new thread's first uses of thread-locals with destructors register them
            // under the dynamic loader's lock. The watched call may be a `dlopen` that
            // never returns, holding that lock: the watch would then block on it and
            // never give up. So those uses happen here, before the caller goes on (the
            // thread's own set-up, the channel's waiting, the thread's handle).
            let _ = rx.recv_timeout(Duration::from_millis(1));
            let _ = std::thread::current();
            let _ = ready_tx.send(());
            let (limit, mut on_deadline) = match deadline {
                Some((d, f)) => (Some(d), Some(f)),
                None => (None, None),
            };
            let mut next_note = first;
            loop {
                let elapsed = started.elapsed();
                let until_note = next_note.saturating_sub(elapsed);
                let wait = match limit {
                    Some(l) => until_note.min(l.saturating_sub(elapsed)),
                    None => until_note,
                };
                match rx.recv_timeout(wait) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    _ => return,
                }
                let elapsed = started.elapsed();
                if limit.is_some_and(|l| elapsed >= l) {
                    if let Some(f) = on_deadline.take() {
                        f(elapsed);
                    }
                    return;
                }
                if elapsed >= next_note {
                    notice(&format!(
                        "rpjrt: still waiting after {}s: {what}",
                        elapsed.as_secs()
                    ));
                    next_note = elapsed + Duration::from_secs(30);
                }
            }
        })
        .ok();
    if thread.is_some() {
        // Bounded: a thread that cannot start its work soon still watches, later.
        let _ = ready_rx.recv_timeout(Duration::from_secs(1));
    }
    Watch {
        stop: Some(stop),
        thread,
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A captured plugin log cut to what a reader needs: at most `max_lines` lines, the last
/// ones (where a failure is explained), with a note of how many were left out.
pub fn summarize_log(text: &str, max_lines: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() <= max_lines {
        return lines.join("\n");
    }
    let skipped = lines.len() - max_lines;
    format!(
        "({skipped} earlier lines left out)\n{}",
        lines[skipped..].join("\n")
    )
}

/// `d` rounded to the nearest multiple of `unit` (half up), for a measured duration in a
/// message: [`duration_text`] then shows it exactly, without the noise of the last digits.
/// A zero `unit` leaves `d` as it is.
///
/// ```
/// use std::time::Duration;
/// use rpjrt_raw::capture::rounded_to;
/// let ms = Duration::from_millis(1);
/// assert_eq!(rounded_to(Duration::from_micros(1_499), ms), ms);
/// assert_eq!(rounded_to(Duration::from_micros(1_500), ms), 2 * ms);
/// ```
pub fn rounded_to(d: std::time::Duration, unit: std::time::Duration) -> std::time::Duration {
    let unit = unit.as_nanos();
    if unit == 0 {
        return d;
    }
    let ns = (d.as_nanos() + unit / 2) / unit * unit;
    std::time::Duration::new(
        u64::try_from(ns / 1_000_000_000).unwrap_or(u64::MAX),
        (ns % 1_000_000_000) as u32,
    )
}

/// A duration for a message, exactly as it is (to the nanosecond), in a short form:
/// seconds with at least one decimal and as many more as it takes (`2.5s`, `1.96s`,
/// `0.5s`, `0.0s` for none) for a second or more or a whole number of tenths, else
/// milliseconds (`1ms`, `250ms`, `0.5ms`, `0.001ms`), else nanoseconds (`900ns`): a
/// timeout of a millisecond is not shown as `0.0s`, nor one of 1.96 s as `2.0s`.
///
/// ```
/// use std::time::Duration;
/// use rpjrt_raw::capture::duration_text;
/// assert_eq!(duration_text(Duration::from_millis(1)), "1ms");
/// assert_eq!(duration_text(Duration::from_millis(250)), "250ms");
/// assert_eq!(duration_text(Duration::from_micros(500)), "0.5ms");
/// assert_eq!(duration_text(Duration::from_millis(500)), "0.5s");
/// assert_eq!(duration_text(Duration::from_millis(2500)), "2.5s");
/// assert_eq!(duration_text(Duration::from_millis(1960)), "1.96s");
/// assert_eq!(duration_text(Duration::from_micros(1)), "0.001ms");
/// assert_eq!(duration_text(Duration::ZERO), "0.0s");
/// ```
pub fn duration_text(d: std::time::Duration) -> String {
    /// `whole.frac` with `frac` (of `digits` digits) written without its trailing zeros,
    /// and at least `min` of them.
    fn decimal(whole: u128, frac: u128, digits: usize, min: usize) -> String {
        let frac = format!("{frac:0digits$}");
        let kept = frac.trim_end_matches('0').len().max(min);
        format!("{whole}.{}", &frac[..kept])
    }
    let ns = d.as_nanos();
    if ns == 0 || d >= std::time::Duration::from_secs(1) || ns.is_multiple_of(100_000_000) {
        return format!("{}s", decimal(ns / 1_000_000_000, ns % 1_000_000_000, 9, 1));
    }
    if ns.is_multiple_of(1_000_000) {
        return format!("{}ms", ns / 1_000_000);
    }
    if ns < 1_000 {
        return format!("{ns}ns");
    }
    format!("{}ms", decimal(ns / 1_000_000, ns % 1_000_000, 6, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captures are process-wide and do not nest: their tests take turns.
    static CAPTURES: Mutex<()> = Mutex::new(());

    #[test]
    fn a_watch_calls_its_deadline_once_and_a_dropped_one_never() {
        let (tx, rx) = mpsc::channel();
        let t = tx.clone();
        let w = watch_until(
            "a test call",
            Duration::from_secs(60),
            Some((
                Duration::from_millis(50),
                Box::new(move |ran| t.send(ran).unwrap()),
            )),
        );
        let ran = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(ran >= Duration::from_millis(50), "{ran:?}");
        drop(w);
        let w = watch_until(
            "a quick call",
            Duration::from_secs(60),
            Some((
                Duration::from_millis(300),
                Box::new(move |ran| tx.send(ran).unwrap()),
            )),
        );
        drop(w);
        assert!(rx.recv_timeout(Duration::from_millis(600)).is_err());
    }

    #[test]
    fn a_kept_capture_has_a_name_until_it_ends() {
        use std::io::Write as _;
        let _turn = CAPTURES.lock().unwrap_or_else(|p| p.into_inner());
        let dir = std::env::temp_dir().join(format!("rpjrt-kept-capture-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let c = capture_in(Some(&dir)).unwrap();
        // Written to descriptor 2 directly (the test harness only intercepts eprint!).
        let mut err = std::io::stderr();
        err.write_all(b"a line before a crash\n").unwrap();
        err.flush().unwrap();
        let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(files.len(), 1);
        let on_disk = std::fs::read_to_string(files[0].path()).unwrap();
        assert!(on_disk.contains("a line before a crash"), "{on_disk}");
        let text = c.finish();
        assert!(text.contains("a line before a crash"), "{text}");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "removed at the end"
        );
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn a_capture_of_endless_output_stays_bounded_on_disk_and_keeps_its_end() {
        use std::io::Write as _;
        let _turn = CAPTURES.lock().unwrap_or_else(|p| p.into_inner());
        let dir =
            std::env::temp_dir().join(format!("rpjrt-bounded-capture-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let c = capture_in(Some(&dir)).unwrap();
        let log = c.log().unwrap();
        let line = [b'x'; 1023];
        let mut most = 0;
        // 8 MiB in all, written directly to descriptor 2, with pauses for the size checks.
        for i in 0..8 * 1024 {
            let mut err = std::io::stderr();
            err.write_all(&line).unwrap();
            err.write_all(b"\n").unwrap();
            if i % 256 == 255 {
                std::thread::sleep(ROTATE_EVERY * 2);
                let on_disk: u64 = std::fs::read_dir(&dir)
                    .unwrap()
                    .flatten()
                    .map(|e| e.metadata().map_or(0, |m| m.len()))
                    .sum();
                most = most.max(on_disk);
            }
        }
        std::io::stderr().write_all(b"the last line\n").unwrap();
        let so_far = log.read();
        assert!(
            so_far.ends_with("the last line\n"),
            "{}",
            &so_far[so_far.len() - 100..]
        );
        let text = c.finish();
        assert!(
            most <= 3 * CAPTURE_ROTATE_AT,
            "{most} bytes on disk at one time"
        );
        assert!(text.starts_with('('), "{}", &text[..100]);
        assert!(text.contains("earlier bytes left out"), "{}", &text[..100]);
        assert!(
            text.ends_with("x\nthe last line\n"),
            "{}",
            &text[text.len() - 100..]
        );
        // The whole of what is kept: 64 KiB less the partial first line.
        assert!(text.len() as u64 > CAPTURE_KEEP - 2048, "{}", text.len());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn long_logs_keep_their_last_lines() {
        let log: String = (0..30).map(|i| format!("line {i}\n\n")).collect();
        let s = summarize_log(&log, 5);
        assert!(s.starts_with("(25 earlier lines left out)\n"), "{s}");
        assert!(
            s.ends_with("line 25\nline 26\nline 27\nline 28\nline 29"),
            "{s}"
        );
        assert_eq!(summarize_log("a\nb\n", 5), "a\nb");
    }
}
