//! Support for rpjrt's benchmarks; not part of the API and not covered by semver.

use std::time::Duration;

use crate::buffer::Buffer;
use crate::error::Result;
use crate::executable::Executable;
use crate::raw::floor;

pub use crate::raw::floor::FloorWait;

/// Runs `iters` executions of `exe` on `args` the way a C programmer would with the PJRT C
/// API: structs prepared once, function pointers called directly, and per iteration
/// `Execute`, one wait (see [`FloorWait`]), the event's destruction and the outputs'
/// destruction. Returns the wall time of the loop.
///
/// The arguments are checked like [`Executable::execute`] checks them; the buffers stay
/// borrowed (so alive) for the whole loop.
pub fn c_floor_execute(
    exe: &Executable,
    args: &[&Buffer],
    iters: usize,
    wait: FloorWait,
) -> Result<Duration> {
    let (api, loaded, num_outputs) = exe.floor_parts(args)?;
    let mut ptrs = [crate::raw::calls::BufferPtr(std::ptr::null_mut()); floor::FLOOR_MAX];
    for (p, b) in ptrs.iter_mut().zip(args) {
        *p = b.ptr;
    }
    let n = args.len().min(floor::FLOOR_MAX);
    floor::execute_floor_checked(api, loaded, &ptrs[..n], num_outputs, iters, wait)
}
