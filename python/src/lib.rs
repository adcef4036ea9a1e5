//! `rpjrt._rpjrt`: the Python bindings of rpjrt.
//!
//! A thin layer: conversion between Python and rpjrt values, the GIL released around every
//! plugin call that can block, and one error-mapping point (`errors::to_py`). Discovery,
//! dtypes, the exception classes and the numpy side of host conversions live in Python.

mod aot;
mod bench;
mod buffer;
mod client;
mod convert;
mod cuda;
mod detach;
mod discovery;
mod distributed;
mod dlpack;
mod errors;
mod event;
mod executable;
mod external;
mod ffi;
mod notify;
mod npy;
mod prepared;
mod put;
mod pybuf;
mod session;
mod sharding;
mod slow;
mod staging;
mod trace;
mod transfer;
mod triton;

use crate::detach::Detach;
use pyo3::prelude::*;

/// `copy.copy` and `copy.deepcopy` of a handle give the handle itself: it names one plugin
/// object (a client, a device, a compiled program ...) that copying cannot duplicate. So a
/// structure holding handles and buffers deep-copies, the buffers into new device buffers.
macro_rules! copy_is_identity {
    ($($ty:ty),* $(,)?) => {$(
        #[pymethods]
        impl $ty {
            fn __copy__(slf: Py<Self>) -> Py<Self> {
                slf
            }
            fn __deepcopy__(slf: Py<Self>, _memo: &Bound<'_, PyAny>) -> Py<Self> {
                slf
            }
        }
    )*};
}

copy_is_identity!(
    client::PyPlugin,
    client::PyClient,
    client::PyDevice,
    client::PyMemory,
    executable::PyExecutable,
    aot::PyCache,
    aot::PyTopology,
    session::PySessionProgram,
    event::PyEvent,
    prepared::PyPreparedCall,
    prepared::PyCallOutputs,
);

/// The PJRT version a plugin library reports, read without initialising it.
#[pyfunction]
fn _probe_pjrt_version(py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<String> {
    // Extracted here: a path's `__fspath__` is Python code (`detach::extract_arg`).
    let path: std::path::PathBuf = detach::extract_arg(path, "path")?;
    py.detach_call(|| rpjrt::Plugin::probe_version(&path))
        .map(|v| v.to_string())
        .map_err(errors::to_py)
}

/// Set how long a blocking wait (``block_until_ready``, reading a buffer still being
/// computed) polls for completion before it sleeps; 0 sleeps at once. Process-wide;
/// default 100 µs (or ``RPJRT_WAIT_SPIN_US`` at the first client's creation). Polling
/// trades CPU for latency: waking a sleeping thread costs tens of microseconds.
#[pyfunction]
fn set_wait_spin(seconds: &Bound<'_, PyAny>) -> PyResult<()> {
    // Extracted here: an object's `__float__` is Python code (`detach::extract_arg`).
    let seconds: f64 = detach::extract_arg(seconds, "seconds")?;
    let max = rpjrt::MAX_WAIT_SPIN.as_secs_f64();
    if !(0.0..=max).contains(&seconds) {
        return Err(errors::invalid(format!(
            "set_wait_spin takes seconds from 0 to {max}, not {seconds}"
        )));
    }
    rpjrt::set_wait_spin(std::time::Duration::from_secs_f64(seconds));
    Ok(())
}

/// How long, in seconds, a blocking wait polls before it sleeps (`rpjrt::wait_spin`).
#[pyfunction]
fn wait_spin() -> f64 {
    rpjrt::wait_spin().as_secs_f64()
}

/// Runs the rpjrt command-line tool (the `rpjrt` console script) with `args` as argv.
/// Arguments are OS strings: a file name that is not UTF-8 (which Python holds with
/// surrogate escapes) reaches the tool as the same bytes.
#[pyfunction]
fn _run_cli(py: Python<'_>, args: Vec<std::ffi::OsString>) -> i32 {
    py.detach_call(|| rpjrt_cli::run_from_args(args))
}

/// Refuses to load in a subinterpreter. The module keeps per-process state that holds
/// objects of the interpreter that first imported it (exception classes, dtype objects,
/// callbacks): shared with another interpreter they give wrong answers or crash.
fn only_in_main_interpreter() -> PyResult<()> {
    // SAFETY: both functions are in the limited API and need only an attached thread,
    // which a module's initialisation has; `PyInterpreterState_Get` never returns null
    // then (it aborts instead).
    let id = unsafe { pyo3::ffi::PyInterpreterState_GetID(pyo3::ffi::PyInterpreterState_Get()) };
    if id != 0 {
        return Err(pyo3::exceptions::PyImportError::new_err(format!(
            "rpjrt cannot be imported in a subinterpreter (this is interpreter {id}): its \
             native module keeps process-wide state tied to the main interpreter. Use rpjrt \
             from the main interpreter, or from another process"
        )));
    }
    Ok(())
}

/// When the exit hook says that it waits for compiles and loads on other threads.
const EXIT_LONG_CALL_NOTICE: std::time::Duration = std::time::Duration::from_secs(3);

/// How long the exit hook leaves the GIL to other threads (when there are any), so that one
/// whose rpjrt call just returned takes it back before the interpreter finalizes.
const EXIT_RETURNING_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// How long the exit hook waits for a client destroy already running on another thread.
const EXIT_DESTROY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The last exit hook: the process is ending, so clients, executables and buffers dropped
/// from here on (module globals, objects freed while the interpreter finalizes) are leaked
/// instead of destroyed in the plugin, as the CLI does once its work is done: the system
/// reclaims their memory, and a plugin that hangs in a destroy entry (PJRT_Client_Destroy)
/// cannot keep the process from ending. A client destroy already running on another
/// thread is waited for (without the GIL) for at most two seconds, then named on stderr.
/// Before that, compiles and loads are refused from now on, and those running on other
/// threads are waited for (see `rpjrt::end_long_plugin_calls`), as Python waits for its
/// non-daemon threads: ending the process under them would crash it and lose its exit
/// status. Ctrl-C during that wait ends the process at once with status 130; another
/// exception a signal handler raises then ends it at once too, with the status CPython
/// gives that exception (`end_for_signal_handler_error`).
#[pyfunction]
fn _leak_at_exit(py: Python<'_>) {
    use std::sync::atomic::Ordering;
    // From here on a daemon thread whose rpjrt call returns parks instead of taking the
    // GIL back while the interpreter finalizes (which would end the process with status
    // 134); one on its way back already gets the GIL first (see `detach`).
    detach::let_returning_threads_in(py, EXIT_RETURNING_WAIT);
    // In a child forked from a process with a plugin, the plugin's static destructors (C
    // exit handlers, after Python's finalization) would wait for the parent's threads.
    rpjrt::skip_plugin_exit_handlers_in_forked_child();
    // A compile or load still running on another thread (a daemon thread's) when the
    // process ends would have the plugin's global state torn down under it: new ones are
    // refused and running ones waited for, without the GIL (not when a load or creation
    // was given up on: that call may never return).
    let slice = if slow::abandoned() {
        std::time::Duration::ZERO
    } else {
        std::time::Duration::from_millis(100)
    };
    let start = std::time::Instant::now();
    let mut told = false;
    loop {
        let left = py.detach(|| rpjrt::end_long_plugin_calls(slice, |_| {}));
        if left == 0 || slice.is_zero() {
            break;
        }
        if !told && start.elapsed() >= EXIT_LONG_CALL_NOTICE {
            told = true;
            rpjrt::stdio::notice(&format!(
                "rpjrt: waiting for {left} compile(s) or load(s) still running on other \
                 threads before the process ends (ending under them would crash it); \
                 Ctrl-C ends it now"
            ));
        }
        if let Err(e) = py.check_signals() {
            end_for_signal_handler_error(py, e, left);
        }
    }
    rpjrt::set_leak_on_drop(true);
    if client::DESTROYS_IN_FLIGHT.load(Ordering::SeqCst) == 0 {
        return;
    }
    let start = std::time::Instant::now();
    let left = py.detach(|| {
        while start.elapsed() < EXIT_DESTROY_WAIT {
            if client::DESTROYS_IN_FLIGHT.load(Ordering::SeqCst) == 0 {
                return 0;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        client::DESTROYS_IN_FLIGHT.load(Ordering::SeqCst)
    });
    if left > 0 {
        rpjrt::stdio::notice(&format!(
            "rpjrt: {left} plugin call(s) of PJRT_Client_Destroy started before exit did not \
             return within {} s; exiting without waiting for them",
            EXIT_DESTROY_WAIT.as_secs()
        ));
    }
}

/// Ends the process for the exception `e` that a signal handler raised while the exit hook
/// waited for `left` compiles or loads on other threads, with the status CPython gives that
/// exception when it escapes the main module: a `SystemExit` its code (`None` 0, an int
/// that int, anything else printed to stderr and 1), a `KeyboardInterrupt` 130 (Ctrl-C),
/// anything else printed as an unhandled exception (through `sys.excepthook`) and 1. The
/// process ends at once, without its remaining exit handlers: finalizing under the
/// running compiles would crash it.
fn end_for_signal_handler_error(py: Python<'_>, e: PyErr, left: usize) -> ! {
    use pyo3::exceptions::{PyKeyboardInterrupt, PySystemExit};
    let (status, why) = if e.is_instance_of::<PySystemExit>(py) {
        let status = system_exit_status(py, &e);
        (
            status,
            format!("a signal handler raised SystemExit (status {status})"),
        )
    } else if e.is_instance_of::<PyKeyboardInterrupt>(py) {
        (130, "interrupted".to_string())
    } else {
        let name = e
            .get_type(py)
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "an exception".into());
        // What CPython prints for an unhandled exception (sys.excepthook); `e` is not a
        // SystemExit, so this prints and never exits.
        e.print(py);
        (1, format!("a signal handler raised {name} (status 1)"))
    };
    rpjrt::stdio::notice(&format!(
        "rpjrt: {why} while waiting for {left} compile(s) or load(s) on other threads: \
         ending the process now (status {status}), without its exit handlers"
    ));
    slow::flush_python_streams(py);
    let _ = std::io::Write::flush(&mut std::io::stderr());
    rpjrt::stdio::exit_now(status);
}

/// The exit status CPython gives a `SystemExit` that ends the process
/// (`_Py_HandleSystemExit`): `None` is 0, an int (a bool too) is that int cut to a C int
/// (-1 when it does not fit a C long long), anything else is written to `sys.stderr` (as
/// `str`, with a newline) and gives 1.
fn system_exit_status(py: Python<'_>, e: &PyErr) -> i32 {
    let code = match e.value(py).getattr("code") {
        Ok(c) => c,
        Err(_) => return 0,
    };
    if code.is_none() {
        return 0;
    }
    if code.is_instance_of::<pyo3::types::PyInt>() {
        return match code.extract::<i64>() {
            // Cut to a C int as CPython's `(int)` cast does.
            Ok(n) => n as i32,
            Err(_) => -1,
        };
    }
    let text = code
        .str()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "<unprintable exit code>".into());
    let written = py
        .import("sys")
        .and_then(|sys| sys.getattr("stderr"))
        .and_then(|err| {
            if err.is_none() {
                return Err(pyo3::exceptions::PyRuntimeError::new_err("no sys.stderr"));
            }
            err.call_method1("write", (format!("{text}\n"),)).map(drop)
        });
    if written.is_err() {
        eprintln!("{text}");
    }
    1
}

/// The `os.register_at_fork(before=...)` hook: waits (without the GIL, at most
/// `FORK_LOAD_WAIT`) for a plugin load on another thread, and sees to it that a child of
/// this fork ends before the plugin's static destructors (`rpjrt::before_fork`).
#[pyfunction]
fn _before_fork(py: Python<'_>) {
    // A load given up on may never return: no fork waits for it.
    let limit = match slow::abandoned() {
        true => std::time::Duration::ZERO,
        false => FORK_LOAD_WAIT,
    };
    py.detach(|| rpjrt::before_fork(limit));
}

/// The `os.register_at_fork(after_in_parent=..., after_in_child=...)` hook.
#[pyfunction]
fn _after_fork() {
    rpjrt::after_fork();
}

/// The longest an `os.fork()` waits for a plugin load in progress on another thread.
const FORK_LOAD_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

#[pymodule]
fn _rpjrt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    only_in_main_interpreter()?;
    // A child forked during a client's destroy does not run it: its exit hook must not
    // wait for it.
    rpjrt::reset_after_fork(&client::DESTROYS_IN_FLIGHT);
    // Nor the handlers another thread was running: the exit hook waits for those.
    rpjrt::reset_after_fork(&ffi::IN_FLIGHT);
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // First registered, so last run: after every other exit hook (see the functions).
    m.add_function(wrap_pyfunction!(_leak_at_exit, m)?)?;
    m.add_function(wrap_pyfunction!(npy::_import_failed, m)?)?;
    m.add_function(wrap_pyfunction!(slow::_exit_if_loader_stuck, m)?)?;
    m.add_function(wrap_pyfunction!(slow::_plugin_timeout_env, m)?)?;
    m.add_function(wrap_pyfunction!(notify::_stop_notifiers, m)?)?;
    let atexit = m.py().import("atexit")?;
    atexit.call_method1("register", (m.getattr("_leak_at_exit")?,))?;
    atexit.call_method1("register", (m.getattr("_exit_if_loader_stuck")?,))?;
    // Registered after it, so run before it: the notifier threads end before finalizing.
    atexit.call_method1("register", (m.getattr("_stop_notifiers")?,))?;
    m.add_function(wrap_pyfunction!(detach::_on_rpjrt_thread, m)?)?;
    m.add_function(wrap_pyfunction!(_before_fork, m)?)?;
    m.add_function(wrap_pyfunction!(_after_fork, m)?)?;
    let os = m.py().import("os")?;
    if os.hasattr("register_at_fork")? {
        let kw = pyo3::types::PyDict::new(m.py());
        kw.set_item("before", m.getattr("_before_fork")?)?;
        kw.set_item("after_in_parent", m.getattr("_after_fork")?)?;
        kw.set_item("after_in_child", m.getattr("_after_fork")?)?;
        os.call_method("register_at_fork", (), Some(&kw))?;
    }
    m.add_class::<client::PyPlugin>()?;
    m.add_class::<client::PyClient>()?;
    m.add_class::<client::PyDevice>()?;
    m.add_class::<client::PyMemory>()?;
    m.add_class::<executable::PyExecutable>()?;
    m.add_class::<buffer::PyBuffer>()?;
    m.add_class::<prepared::PyPreparedCall>()?;
    m.add_class::<prepared::PyCallOutputs>()?;
    m.add_class::<buffer::PyWaiter>()?;
    m.add_class::<event::PyEvent>()?;
    m.add_class::<aot::PyCache>()?;
    m.add_class::<aot::PyTopology>()?;
    m.add_class::<aot::PyOpSharding>()?;
    m.add_function(wrap_pyfunction!(aot::artifact_stablehlo_version, m)?)?;
    m.add_function(wrap_pyfunction!(aot::inspect_artifact, m)?)?;
    m.add_class::<session::PySession>()?;
    m.add_class::<session::PySessionProgram>()?;
    m.add_function(wrap_pyfunction!(_run_cli, m)?)?;
    m.add_function(wrap_pyfunction!(set_wait_spin, m)?)?;
    m.add_function(wrap_pyfunction!(wait_spin, m)?)?;
    m.add_function(wrap_pyfunction!(staging::release_pooled_memory, m)?)?;
    m.add_function(wrap_pyfunction!(staging::pooled_memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(staging::set_pooled_memory_limit, m)?)?;
    m.add_class::<distributed::PyInMemoryStore>()?;
    m.add_class::<distributed::PyTcpStore>()?;
    m.add_function(wrap_pyfunction!(distributed::_detect_launch_env, m)?)?;
    m.add_function(wrap_pyfunction!(distributed::_initialize, m)?)?;
    m.add_function(wrap_pyfunction!(distributed::_first_host, m)?)?;
    m.add("_MAX_PROCESSES", rpjrt_distributed::MAX_PROCESSES)?;
    m.add_function(wrap_pyfunction!(sharding::_uses_shardy, m)?)?;
    m.add_function(wrap_pyfunction!(sharding::_shard_split, m)?)?;
    m.add_function(wrap_pyfunction!(sharding::_shard_assemble, m)?)?;
    m.add_function(wrap_pyfunction!(sharding::_shard_global_dims, m)?)?;
    m.add_function(wrap_pyfunction!(sharding::_global_signature, m)?)?;
    m.add_function(wrap_pyfunction!(sharding::_shard_check, m)?)?;
    m.add_function(wrap_pyfunction!(_probe_pjrt_version, m)?)?;
    m.add_function(wrap_pyfunction!(discovery::_discover, m)?)?;
    m.add_function(wrap_pyfunction!(discovery::_candidates, m)?)?;
    m.add_function(wrap_pyfunction!(discovery::_pick_library, m)?)?;
    m.add_function(wrap_pyfunction!(discovery::_discovery_tables, m)?)?;
    m.add_function(wrap_pyfunction!(convert::_element_types, m)?)?;
    m.add_function(wrap_pyfunction!(convert::_element_type_from_name, m)?)?;
    m.add_function(wrap_pyfunction!(put::_python_to_host, m)?)?;
    m.add_function(wrap_pyfunction!(put::_convert_host, m)?)?;
    m.add_function(wrap_pyfunction!(put::_python_shape, m)?)?;
    m.add_function(wrap_pyfunction!(bench::_bench_c_floor, m)?)?;
    m.add_class::<bench::PyBenchFloor>()?;
    m.add_function(wrap_pyfunction!(bench::_bench_hold_gil, m)?)?;
    m.add_function(wrap_pyfunction!(bench::_bench_rust_loop, m)?)?;
    ffi::add(m)?;
    m.add_function(wrap_pyfunction!(transfer::_put_streaming, m)?)?;
    m.add_function(wrap_pyfunction!(transfer::_copy_raw_to_host, m)?)?;
    m.add_function(wrap_pyfunction!(transfer::_create_uninitialized_buffer, m)?)?;
    m.add_function(wrap_pyfunction!(transfer::_create_error_buffer, m)?)?;
    m.add_class::<transfer::PyAliasFulfiller>()?;
    m.add_function(wrap_pyfunction!(external::_copy_raw_to_host_async, m)?)?;
    m.add_class::<external::PyRawCopy>()?;
    m.add_function(wrap_pyfunction!(transfer::_device_layout, m)?)?;
    m.add_function(wrap_pyfunction!(transfer::_default_layout, m)?)?;
    m.add_function(wrap_pyfunction!(transfer::_byte_strides, m)?)?;
    m.add_function(wrap_pyfunction!(transfer::_layouts_extension_size, m)?)?;
    cuda::register(m)?;
    triton::register(m)?;
    trace::add(m)?;
    Ok(())
}
