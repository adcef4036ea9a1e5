//! Progress on long work, drawn on one line of stderr: which conform check runs and how
//! many are left, and a spinner with the elapsed time when plugin loading, client creation
//! or a compile takes longer than a second.
//!
//! Shown only when stderr is a terminal, and never for `--json` output (the verbs pass
//! their flag to [`Progress::new`]). Under `NO_COLOR` the line is plain text; otherwise it
//! is dim. The line is drawn on the stderr this process started with ([`init`] keeps a
//! copy), so it still reaches the terminal while a plugin's own output is captured.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::os::fd::AsFd;
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::common::{paint_stderr, Style};

/// How long work runs before the spinner appears.
pub const SPINNER_AFTER: Duration = Duration::from_secs(1);

/// How often the spinner redraws.
const TICK: Duration = Duration::from_millis(100);

/// The stderr this process started with (a duplicate of descriptor 2), or `None` when it
/// is not a terminal.
static TERMINAL: OnceLock<Option<Mutex<File>>> = OnceLock::new();

/// Keeps a copy of stderr for the progress line, if it is a terminal. Called once at
/// start-up, before anything redirects descriptor 2; later calls change nothing.
pub fn init() {
    TERMINAL.get_or_init(|| {
        let err = std::io::stderr();
        if !err.is_terminal() {
            return None;
        }
        err.as_fd()
            .try_clone_to_owned()
            .ok()
            .map(|fd| Mutex::new(File::from(fd)))
    });
}

fn terminal() -> Option<&'static Mutex<File>> {
    init();
    TERMINAL.get().and_then(Option::as_ref)
}

fn draw(text: &str) {
    if let Some(t) = terminal() {
        let mut f = t.lock().unwrap_or_else(|p| p.into_inner());
        let _ = write!(f, "\r\x1b[K{}", paint_stderr(text, Style::Dim));
        let _ = f.flush();
    }
}

fn clear() {
    if let Some(t) = terminal() {
        let mut f = t.lock().unwrap_or_else(|p| p.into_inner());
        let _ = write!(f, "\r\x1b[K");
        let _ = f.flush();
    }
}

/// Whether a verb shows progress: a terminal on stderr and no `--json`.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    on: bool,
}

impl Progress {
    /// Progress for a verb; `json` is whether it was asked for JSON output.
    pub fn new(json: bool) -> Progress {
        Progress {
            on: !json && terminal().is_some(),
        }
    }

    /// True when progress is drawn.
    pub fn is_on(self) -> bool {
        self.on
    }

    /// Shows that item `index` (0-based) of `total`, `name`, is running.
    pub fn step(self, index: usize, total: usize, name: &str) {
        if self.on {
            draw(&step_text(index, total, name));
        }
    }

    /// Removes the progress line (before a result is printed in its place).
    pub fn clear(self) {
        if self.on {
            clear();
        }
    }

    /// Starts a spinner for `what` (`compiling model.mlir`): it appears after
    /// [`SPINNER_AFTER`] and goes when the returned guard drops.
    pub fn spinner(self, what: &str) -> Spinner {
        if !self.on {
            return Spinner {
                stop: None,
                thread: None,
            };
        }
        let what = what.to_string();
        let (stop, rx) = mpsc::channel::<()>();
        let started = Instant::now();
        let thread = std::thread::Builder::new()
            .name("rpjrt-progress".into())
            .spawn(move || {
                if rx.recv_timeout(SPINNER_AFTER) != Err(mpsc::RecvTimeoutError::Timeout) {
                    return;
                }
                let mut frame = 0;
                loop {
                    draw(&spinner_text(frame, &what, started.elapsed()));
                    frame += 1;
                    if rx.recv_timeout(TICK) != Err(mpsc::RecvTimeoutError::Timeout) {
                        break;
                    }
                }
                clear();
            })
            .ok();
        Spinner {
            stop: Some(stop),
            thread,
        }
    }
}

/// A running spinner (see [`Progress::spinner`]); dropping it stops it and clears its line.
pub struct Spinner {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn step_text(index: usize, total: usize, name: &str) -> String {
    let left = total.saturating_sub(index + 1);
    format!("[{}/{total}] {name} ... ({left} left)", index + 1)
}

fn spinner_text(frame: usize, what: &str, elapsed: Duration) -> String {
    const FRAMES: [char; 4] = ['|', '/', '-', '\\'];
    format!(
        "{} {what} ({:.1}s)",
        FRAMES[frame % FRAMES.len()],
        elapsed.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts() {
        assert_eq!(
            step_text(11, 72, "exec.basic"),
            "[12/72] exec.basic ... (60 left)"
        );
        assert_eq!(step_text(0, 1, "a.b"), "[1/1] a.b ... (0 left)");
        assert_eq!(
            spinner_text(5, "compiling x.mlir", Duration::from_millis(1300)),
            "/ compiling x.mlir (1.3s)"
        );
    }

    #[test]
    fn off_for_json() {
        assert!(!Progress::new(true).is_on());
        // Dropping a spinner that never drew returns at once.
        let t = Instant::now();
        drop(Progress::new(true).spinner("x"));
        drop(Progress { on: true }.spinner("y"));
        assert!(t.elapsed() < SPINNER_AFTER);
    }
}
