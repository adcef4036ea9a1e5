//! Plugin calls that may never return: loading a library and creating a client.
//!
//! Some plugins wait at load or client creation on a device, a driver or a network service,
//! sometimes forever. Such a call cannot be cancelled inside a process, but the caller need
//! not be stuck with it: the call runs on a thread of its own, and the Python thread waits
//! for it in short slices, with the GIL released, checking for Ctrl-C between slices and
//! giving up at the timeout. A call given up on goes on in the background; whatever it
//! returns later is dropped there.

use crate::detach::Detach;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// How often a waiting caller checks for Ctrl-C.
const SLICE: Duration = Duration::from_millis(100);

/// The stack of the calling thread: a plugin's initialization may recurse deeply, and a
/// spawned thread's default stack (2 MiB) is smaller than a main thread's.
const STACK: usize = 16 << 20;

/// The environment variable that sets the timeout when the call does not (as for the CLI).
pub(crate) const TIMEOUT_ENV: &str = "RPJRT_PLUGIN_TIMEOUT";

/// A timeout in seconds from Python (`None`: the environment's, else none), read by the
/// package's one rule for seconds (`convert::secs_arg`: a number, not a bool; NaN and
/// negative refused; infinity as long as a `Duration` can wait), and above zero.
pub(crate) fn timeout_from_py(timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
    // The CLI's rule for its --plugin-timeout, in its words: a positive number of seconds,
    // at least 1 µs (a shorter limit cannot be measured).
    let limit = |s: f64, what: &str| {
        rpjrt_cli::common::positive_seconds(s, what).map_err(|e| crate::errors::invalid(e.message))
    };
    match timeout.filter(|t| !t.is_none()) {
        Some(t) => limit(crate::convert::secs_value(t, "timeout")?, "timeout").map(Some),
        // Read as bytes: a value that is not UTF-8 is refused as a bad value (as the CLI
        // refuses it), never taken for unset, which would mean no limit at all.
        None => match std::env::var_os(TIMEOUT_ENV) {
            Some(raw) => match raw.to_str() {
                Some(v) if v.trim().is_empty() => Ok(None),
                Some(v) => {
                    let s: f64 = v.trim().parse().map_err(|_| {
                        crate::errors::invalid(format!(
                            "{TIMEOUT_ENV} must be a number of seconds, got {v:?}"
                        ))
                    })?;
                    limit(s, TIMEOUT_ENV).map(Some)
                }
                None => Err(crate::errors::invalid(format!(
                    "{TIMEOUT_ENV} must be a number of seconds, got {:?} (not UTF-8 text)",
                    raw.to_string_lossy()
                ))),
            },
            None => Ok(None),
        },
    }
}

/// `RPJRT_PLUGIN_TIMEOUT` in seconds by the rule `Plugin(..., timeout=)` follows (`None`
/// when unset, `inf` for no limit), for the plugin listing's own waits.
#[pyfunction]
pub fn _plugin_timeout_env() -> PyResult<Option<f64>> {
    Ok(timeout_from_py(None)?.map(|d| d.as_secs_f64()))
}

/// Runs `call` on a thread of its own and waits for it: interruptibly (Ctrl-C raises
/// `KeyboardInterrupt` at once) and, with a timeout, for at most that long (then
/// `DeadlineExceededError` naming `what`). Either way a call given up on is left running.
/// Set once a load or client creation has been given up on (timeout or Ctrl-C) while its
/// call goes on in the background.
static ABANDONED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The `atexit` hook: when a call given up on is still inside the system's library loader,
/// a normal exit would wait for the loader's lock forever (the C runtime takes it to run
/// the libraries' finalizers), so the process ends here instead, with status 1, after
/// saying why on stderr. Registered at import, so it runs after every later hook.
#[pyfunction]
pub fn _exit_if_loader_stuck(py: Python<'_>) {
    use std::io::Write as _;
    if !ABANDONED.load(std::sync::atomic::Ordering::SeqCst) || rpjrt::Plugin::loads_in_loader() == 0
    {
        return;
    }
    flush_python_streams(py);
    rpjrt::stdio::notice(
        "rpjrt: a plugin load that was given up on is still inside the system's library \
         loader and holds its lock, so a normal exit would wait forever; ending the process \
         now (status 1)",
    );
    let _ = std::io::stderr().flush();
    rpjrt::stdio::exit_now(1);
}

/// Flushes Python's `sys.stdout` and `sys.stderr`, for a process about to end without its
/// exit handlers (`rpjrt::stdio::exit_now`).
pub(crate) fn flush_python_streams(py: Python<'_>) {
    for stream in ["stdout", "stderr"] {
        if let Ok(s) = py.import("sys").and_then(|sys| sys.getattr(stream)) {
            let _ = s.call_method0("flush");
        }
    }
}

/// Whether a plugin load or client creation was given up on in this process (its call may
/// never return).
pub(crate) fn abandoned() -> bool {
    ABANDONED.load(std::sync::atomic::Ordering::SeqCst)
}

pub(crate) fn run_abandonable<T: Send + 'static>(
    py: Python<'_>,
    what: &str,
    timeout: Option<Duration>,
    call: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    wait_for(py, what, timeout, true, None, call)
}

/// How long an interrupted call's end is waited for once `on_interrupt` asked it to end
/// ([`run_interruptible`]), before `KeyboardInterrupt` is raised all the same.
const ENDING_WAIT: Duration = Duration::from_secs(5);

/// Runs `call` (a wait that is not the plugin's: a key-value store's `get`, a barrier) on a
/// thread of its own and waits for it with Ctrl-C answered at once. On Ctrl-C,
/// `on_interrupt` runs (it asks the call to end: a store call's cancel), and the call's
/// end is waited for (with the GIL released, at most [`ENDING_WAIT`]) before
/// `KeyboardInterrupt` is raised, so that what the call held (a thread, a connection, a
/// place at a barrier, a port) is let go of by then and a retry finds it free.
pub(crate) fn run_interruptible<T: Send + 'static>(
    py: Python<'_>,
    what: &str,
    on_interrupt: impl FnOnce() + Send + 'static,
    call: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    wait_for(py, what, None, false, Some(Box::new(on_interrupt)), call)
}

/// [`run_abandonable`] and [`run_interruptible`]: `plugin` marks a call given up on as a
/// plugin load or creation (see `_exit_if_loader_stuck`); `on_interrupt` (when given)
/// asks the call to end on Ctrl-C, and its end is then waited for.
fn wait_for<T: Send + 'static>(
    py: Python<'_>,
    what: &str,
    timeout: Option<Duration>,
    plugin: bool,
    on_interrupt: Option<Box<dyn FnOnce() + Send>>,
    call: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    let (tx, mut rx) = mpsc::sync_channel(1);
    let worker = std::thread::Builder::new()
        .name(
            if plugin {
                "rpjrt-plugin-load"
            } else {
                "rpjrt-wait"
            }
            .into(),
        )
        .stack_size(STACK)
        .spawn(move || {
            // A caller that gave up has dropped the receiver: the result is dropped here.
            let _ = tx.send(call());
        })
        .map_err(|e| PyRuntimeError::new_err(format!("{what}: cannot start a thread: {e}")))?;
    // Dropping the handle detaches the thread; its id names the step it is in at a timeout.
    let worker = worker.thread().id();
    let start = Instant::now();
    loop {
        let slice = match timeout {
            Some(t) => t.saturating_sub(start.elapsed()).min(SLICE),
            None => SLICE,
        };
        // The receiver goes into the GIL-free closure and comes back (it is Send, not Sync).
        let (got, back) = py.detach_call(move || (rx.recv_timeout(slice), rx));
        rx = back;
        match got {
            Ok(v) => return Ok(v),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(PyRuntimeError::new_err(format!(
                    "{what}: the call panicked (a bug in rpjrt; please report it)"
                )))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if let Err(e) = py.check_signals() {
            ABANDONED.fetch_or(plugin, std::sync::atomic::Ordering::SeqCst);
            if let Some(end) = on_interrupt {
                end();
                // The call ends soon once asked: its result (an error saying so) is
                // dropped. The receiver is moved in and dropped there.
                py.detach_call(move || {
                    let _ = rx.recv_timeout(ENDING_WAIT);
                });
            }
            return Err(e);
        }
        if let Some(t) = timeout {
            if start.elapsed() >= t {
                ABANDONED.store(true, std::sync::atomic::Ordering::SeqCst);
                let step = match plugin {
                    true => rpjrt::Plugin::current_step(worker).or_else(loader_held),
                    false => None,
                };
                let step = step.map_or_else(String::new, |s| format!("; it was in {s}"));
                return Err(crate::errors::make_err(
                    py,
                    "DEADLINE_EXCEEDED",
                    "Timeout",
                    format!(
                        "{what}: the plugin did not return within {} s (timeout, or \
                         {TIMEOUT_ENV}){step}. Its call goes on in the background and cannot be \
                         stopped inside this process: restart the process before using this \
                         plugin again. A plugin may wait on a device, a driver or a network \
                         service; its log on stderr may say which",
                        fmt_secs(t)
                    ),
                    None,
                ));
            }
        }
    }
}

/// For a load given up on before it reached a step of its own: the system's library
/// loader, when another plugin load is inside it (a library initializer that never
/// returns holds its lock, which a thread's start needs too), naming those loads.
fn loader_held() -> Option<String> {
    let others = rpjrt::Plugin::loads_in_progress();
    (rpjrt::Plugin::loads_in_loader() > 0 && !others.is_empty()).then(|| {
        let names: Vec<String> = others.iter().map(|p| p.display().to_string()).collect();
        format!(
            "a wait for the system's library loader (before a step of its own), which \
             another plugin load holds: {} (a library initializer that never returns \
             holds it for every load)",
            names.join(", ")
        )
    })
}

/// Seconds as a short number (`0.5`, `30`).
fn fmt_secs(t: Duration) -> String {
    let s = t.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s}")
    }
}
