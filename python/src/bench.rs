//! Hidden support for rpjrt's benchmarks (bench/): the raw C floor of an execution, run in
//! this process so that bench/b_execute.py can interleave it with the Python variants.
//! Not part of the API (private name). Compiled only with the `bench` feature (which
//! scripts/bench.sh enables); otherwise `_bench_c_floor` exists but raises.

use crate::detach::Detach;
use pyo3::prelude::*;
#[cfg(feature = "bench")]
use rpjrt::__bench::{c_floor_execute, FloorWait};

use crate::buffer::PyBuffer;
use crate::errors::invalid;
#[cfg(feature = "bench")]
use crate::errors::PyErrExt;
use crate::executable::PyExecutable;

/// `_bench_c_floor(exe, args, iters, wait)`: runs `iters` executions of `exe` on the Buffers
/// `args` through the plugin's function pointers directly (rpjrt::__bench::c_floor_execute),
/// with the GIL released; `wait` is "event" (completion event) or "ready" (the first
/// output's ready event). Returns the seconds the loop took.
#[cfg(feature = "bench")]
#[pyfunction]
pub fn _bench_c_floor(
    py: Python<'_>,
    exe: &Bound<'_, PyExecutable>,
    args: Vec<Bound<'_, PyBuffer>>,
    iters: usize,
    wait: &str,
) -> PyResult<f64> {
    let wait = floor_wait(wait)?;
    let exe = exe.get().rexe();
    let refs: Vec<&rpjrt::Buffer> = args.iter().map(|b| b.get().rb()).collect();
    let t = py
        .detach_call(|| c_floor_execute(exe, &refs, iters, wait))
        .pyerr()?;
    Ok(t.as_secs_f64())
}

/// The floor's wait from its Python name: "event", "ready" or "none".
#[cfg(feature = "bench")]
fn floor_wait(wait: &str) -> PyResult<FloorWait> {
    match wait {
        "event" => Ok(FloorWait::CompletionEvent),
        "ready" => Ok(FloorWait::OutputReady),
        "none" => Ok(FloorWait::None),
        other => Err(invalid(format!(
            "wait must be \"event\", \"ready\" or \"none\", not {other:?}"
        ))),
    }
}

/// `_BenchFloor(exe, lists, wait)`: the C floor prepared once (rpjrt::__bench::Floor), on
/// one argument list per device of `exe`; `floor(*ignored)` runs one iteration with the
/// GIL released, so a Python loop calling it measures the least a Python call of the
/// plugin can cost (bench/b_execute.py, bench/b_spmd.py). The positional arguments are
/// accepted and ignored (the floor's arguments are fixed), so that a call passes what
/// `exe(x, x)` passes. It keeps its executable alive until the process ends.
#[pyclass(frozen, name = "_BenchFloor", module = "rpjrt._rpjrt")]
pub struct PyBenchFloor {
    #[cfg(feature = "bench")]
    inner: std::sync::Mutex<rpjrt::__bench::Floor<'static>>,
}

#[pymethods]
impl PyBenchFloor {
    #[new]
    fn new(
        exe: &Bound<'_, PyExecutable>,
        lists: Vec<Vec<Bound<'_, PyBuffer>>>,
        wait: &str,
    ) -> PyResult<Self> {
        #[cfg(feature = "bench")]
        {
            let wait = floor_wait(wait)?;
            // Leaked on purpose: the floor borrows the executable for as long as the
            // Python object lives, which Rust cannot bound; a benchmark makes a few.
            let exe: &'static rpjrt::Executable = Box::leak(Box::new(exe.get().rexe().clone()));
            let refs: Vec<Vec<&rpjrt::Buffer>> = lists
                .iter()
                .map(|l| l.iter().map(|b| b.get().rb()).collect())
                .collect();
            let lists: Vec<&[&rpjrt::Buffer]> = refs.iter().map(|l| l.as_slice()).collect();
            let floor = rpjrt::__bench::Floor::new(exe, &lists, wait).pyerr()?;
            Ok(PyBenchFloor {
                inner: std::sync::Mutex::new(floor),
            })
        }
        #[cfg(not(feature = "bench"))]
        {
            let _ = (exe, lists, wait);
            Err(invalid(
                "this build of rpjrt has no benchmark support (build it with --features bench)",
            ))
        }
    }

    /// One iteration, with the GIL released; the arguments are ignored.
    #[pyo3(signature = (*_args))]
    fn __call__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
        self.run(py, 1).map(|_| ())
    }

    /// `iters` iterations with the GIL released; returns their seconds.
    fn run(&self, py: Python<'_>, iters: usize) -> PyResult<f64> {
        #[cfg(feature = "bench")]
        {
            let t = py
                .detach_call(|| {
                    let mut floor = self.inner.lock().unwrap_or_else(|p| p.into_inner());
                    floor.run(iters)
                })
                .pyerr()?;
            Ok(t.as_secs_f64())
        }
        #[cfg(not(feature = "bench"))]
        {
            let _ = (py, iters);
            Err(invalid("this build of rpjrt has no benchmark support"))
        }
    }
}

/// Without the `bench` feature: the C floor is not compiled in.
#[cfg(not(feature = "bench"))]
#[pyfunction]
pub fn _bench_c_floor(
    exe: &Bound<'_, PyExecutable>,
    args: Vec<Bound<'_, PyBuffer>>,
    iters: usize,
    wait: &str,
) -> PyResult<f64> {
    let _ = (exe, args, iters, wait);
    Err(invalid(
        "this build of rpjrt has no benchmark support (build it with --features bench)",
    ))
}

/// Whether `Executable.__call__` keeps the GIL around a plain execute (an experiment of
/// bench/b_process.py's thread figures; off unless `_bench_hold_gil(True)` was called).
#[cfg(feature = "bench")]
static HOLD_GIL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether a plain execute keeps the GIL (see `_bench_hold_gil`).
#[cfg(feature = "bench")]
pub fn hold_gil() -> bool {
    HOLD_GIL.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether a plain execute keeps the GIL: never without the `bench` feature.
#[cfg(not(feature = "bench"))]
#[inline(always)]
pub fn hold_gil() -> bool {
    false
}

/// `_bench_hold_gil(flag)`: makes `Executable.__call__` keep (True) or release (False, the
/// default) the GIL around a plain execute, so that bench/b_process.py can measure both in
/// one process. Raises without the `bench` feature.
#[pyfunction]
pub fn _bench_hold_gil(flag: bool) -> PyResult<()> {
    #[cfg(feature = "bench")]
    {
        HOLD_GIL.store(flag, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
    #[cfg(not(feature = "bench"))]
    {
        let _ = flag;
        Err(invalid(
            "_bench_hold_gil needs the extension built with the `bench` feature",
        ))
    }
}

/// `_bench_rust_loop(exe, lists, iters)`: the Rust execute loop that bench/b_exec_threads.py
/// compares Python threads with, in this process: one thread per argument list in `lists`
/// (the calling thread when there is one list), each running `iters` times
/// `Executable::execute_into` + `block_until_ready` on every output, with the GIL released.
/// Returns the seconds until every thread finished. Uses only rpjrt's public API.
#[pyfunction]
pub fn _bench_rust_loop(
    py: Python<'_>,
    exe: &Bound<'_, PyExecutable>,
    lists: Vec<Vec<Bound<'_, PyBuffer>>>,
    iters: usize,
) -> PyResult<f64> {
    let exe = exe.get().rexe();
    let refs: Vec<Vec<&rpjrt::Buffer>> = lists
        .iter()
        .map(|l| l.iter().map(|b| b.get().rb()).collect())
        .collect();
    let body = |args: &[&rpjrt::Buffer]| -> rpjrt::Result<()> {
        let mut outs = Vec::new();
        for _ in 0..iters {
            exe.execute_into(args, &mut outs)?;
            for o in &outs {
                o.block_until_ready()?;
            }
        }
        Ok(())
    };
    let elapsed = py.detach_call(|| -> rpjrt::Result<std::time::Duration> {
        let start = std::time::Instant::now();
        match refs.as_slice() {
            [] => {}
            [one] => body(one)?,
            many => std::thread::scope(|s| {
                let body = &body;
                let workers: Vec<_> = many.iter().map(|l| s.spawn(move || body(l))).collect();
                // The scope joins any worker left when one failed.
                workers
                    .into_iter()
                    .try_for_each(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            })?,
        }
        Ok(start.elapsed())
    });
    Ok(elapsed.map_err(crate::errors::to_py)?.as_secs_f64())
}
