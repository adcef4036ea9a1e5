//! Support for rpjrt's benchmarks (the `bench` feature); not part of the API and not
//! covered by semver.

use std::time::Duration;

use crate::client::buffer::{Buffer, BufferMeta};
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
    Floor::new(exe, &[args], wait)?.run(iters)
}

/// The C floor prepared once and run on demand: [`Floor::run`] does what
/// [`c_floor_execute`] does per iteration, for one device or for every device of a
/// multi-device executable (one `Execute` for all of them, then a wait per device). It can
/// be run one iteration at a time (the floor of a call from Python).
pub struct Floor<'a> {
    raw: floor::Floor<'a, BufferMeta>,
}

impl<'a> Floor<'a> {
    /// Prepares the floor of `exe` on `lists`, one argument list per device of the
    /// executable (one list for a single-device executable), checked like
    /// [`Executable::execute_sharded`] checks them. The floor keeps clones of the buffers.
    pub fn new(exe: &'a Executable, lists: &[&[&Buffer]], wait: FloorWait) -> Result<Floor<'a>> {
        let loaded = exe.floor_parts(lists)?;
        let raws: Vec<Vec<_>> = lists
            .iter()
            .map(|l| l.iter().map(|b| b.raw()).collect())
            .collect();
        let raw_lists: Vec<&[_]> = raws.iter().map(|l| l.as_slice()).collect();
        Ok(Floor {
            raw: floor::Floor::new(loaded, &raw_lists, wait)?,
        })
    }

    /// Runs `iters` iterations and returns their wall time.
    pub fn run(&mut self, iters: usize) -> Result<Duration> {
        self.raw.run(iters)
    }
}
