//! Support for rpjrt's benchmarks (the `bench` feature); not part of the API and not
//! covered by semver.

use std::time::Duration;

use crate::client::buffer::Buffer;
use crate::client::executable::Executable;
use crate::error::Result;
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
    let loaded = exe.floor_parts(args)?;
    let raws: Vec<_> = args.iter().map(|b| b.raw()).collect();
    floor::execute_floor(loaded, &raws, iters, wait)
}
