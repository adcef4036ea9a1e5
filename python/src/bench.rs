//! Hidden support for rpjrt's benchmarks (bench/): the raw C floor of an execution, run in
//! this process so that bench/b_execute.py can interleave it with the Python variants.
//! Not part of the API (private name, absent from the stubs).

use pyo3::prelude::*;
use rpjrt::__bench::{c_floor_execute, FloorWait};

use crate::buffer::PyBuffer;
use crate::errors::{invalid, PyErrExt};
use crate::executable::PyExecutable;

/// `_bench_c_floor(exe, args, iters, wait)`: runs `iters` executions of `exe` on the Buffers
/// `args` through the plugin's function pointers directly (rpjrt::__bench::c_floor_execute),
/// with the GIL released; `wait` is "event" (completion event) or "ready" (the first
/// output's ready event). Returns the seconds the loop took.
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
