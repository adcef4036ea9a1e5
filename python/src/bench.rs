//! Hidden support for rpjrt's benchmarks (bench/): the raw C floor of an execution, run in
//! this process so that bench/b_execute.py can interleave it with the Python variants.
//! Not part of the API (private name). Compiled only with the `bench` feature (which
//! scripts/bench.sh enables); otherwise `_bench_c_floor` exists but raises.

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
    let wait = match wait {
        "event" => FloorWait::CompletionEvent,
        "ready" => FloorWait::OutputReady,
        other => {
            return Err(invalid(format!(
                "wait must be \"event\" or \"ready\", not {other:?}"
            )))
        }
    };
    let exe = exe.get().rexe();
    let refs: Vec<&rpjrt::Buffer> = args.iter().map(|b| b.get().rb()).collect();
    let t = py
        .detach(|| c_floor_execute(exe, &refs, iters, wait))
        .pyerr()?;
    Ok(t.as_secs_f64())
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
