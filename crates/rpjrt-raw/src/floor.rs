//! The raw C floor of an execution, for benchmarks.
//!
//! [`execute_floor`] is what a C programmer would write to run a loaded executable in a loop
//! and wait for each run: every struct is prepared once, the plugin's function pointers are
//! looked up once, and each iteration is `PJRT_LoadedExecutable_Execute`, a wait, the event's
//! destruction and the destruction of the outputs, each by a direct call through the
//! function pointer with a check of the returned error. Nothing else: no allocation, no
//! bookkeeping. rpjrt's own execute path is measured against it.

use std::ptr::null_mut;
use std::time::{Duration, Instant};

use rpjrt_sys as sys;

use super::buffer::Buffer;
use super::executable::Loaded;
use super::{pjrt_fn, Args};
use crate::error::{Error, Result};

/// How each iteration of the floor waits for the computation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorWait {
    /// Ask `Execute` for the device's completion event and await it.
    CompletionEvent,
    /// Ask for no completion event; await the first output's `PJRT_Buffer_ReadyEvent`
    /// (what `execute` followed by `block_until_ready` on an output does).
    OutputReady,
    /// No wait: the outputs are destroyed right after `Execute` returns (the execute half
    /// of an iteration alone, to split rpjrt's overhead between the call and the wait).
    None,
}

/// The largest argument and output counts the floor handles (its arrays live on the stack).
pub const FLOOR_MAX: usize = 64;

/// Runs `iters` executions of `e` on `args` and returns the wall time of the whole loop.
///
/// Every argument is declared non-donatable, as the buffers are reused by each iteration.
/// The arguments are checked as the execute marshaller checks them (live buffers of the
/// executable's client, not deleted) and stay borrowed for the whole loop.
pub fn execute_floor<M>(
    e: &Loaded,
    args: &[&Buffer<M>],
    iters: usize,
    wait: FloorWait,
) -> Result<Duration> {
    let num_outputs = e.num_outputs();
    if args.len() > FLOOR_MAX || num_outputs > FLOOR_MAX || num_outputs == 0 {
        return Err(Error::invalid(format!(
            "the floor handles 1..={FLOOR_MAX} outputs and up to {FLOOR_MAX} arguments"
        )));
    }
    for b in args {
        if !b.belongs_to(e.client()) || b.is_deleted() {
            return Err(Error::invalid(
                "floor arguments must be live buffers of the executable's client",
            ));
        }
    }
    let api = e.client().api();
    let execute = pjrt_fn!(api, PJRT_LoadedExecutable_Execute)?;
    let await_event = pjrt_fn!(api, PJRT_Event_Await)?;
    let destroy_event = pjrt_fn!(api, PJRT_Event_Destroy)?;
    let destroy_buffer = pjrt_fn!(api, PJRT_Buffer_Destroy)?;
    let ready_event = pjrt_fn!(api, PJRT_Buffer_ReadyEvent)?;

    let mut arg_list = [null_mut::<sys::PJRT_Buffer>(); FLOOR_MAX];
    for (slot, b) in arg_list.iter_mut().zip(args) {
        *slot = b.ptr();
    }
    let arg_lists = [arg_list.as_ptr() as *const *mut sys::PJRT_Buffer];
    let mut non_donatable = [0i64; FLOOR_MAX];
    for (i, slot) in non_donatable.iter_mut().enumerate() {
        *slot = i as i64;
    }
    let mut outputs = [null_mut::<sys::PJRT_Buffer>(); FLOOR_MAX];
    let output_lists = [outputs.as_mut_ptr()];
    let mut event: *mut sys::PJRT_Event = null_mut();

    let mut options = sys::PJRT_ExecuteOptions::new();
    options.non_donatable_input_indices = non_donatable.as_ptr();
    options.num_non_donatable_input_indices = args.len();
    let mut a = sys::PJRT_LoadedExecutable_Execute_Args::new();
    a.executable = e.ptr();
    a.options = &mut options;
    a.argument_lists = arg_lists.as_ptr();
    a.num_devices = 1;
    a.num_args = args.len();
    a.output_lists = output_lists.as_ptr();
    if wait == FloorWait::CompletionEvent {
        a.device_complete_events = &mut event;
    }
    let mut aw = sys::PJRT_Event_Await_Args::new();
    let mut ed = sys::PJRT_Event_Destroy_Args::new();
    let mut bd = sys::PJRT_Buffer_Destroy_Args::new();
    let mut re = sys::PJRT_Buffer_ReadyEvent_Args::new();

    // Awaits `ev`, then destroys it (also when the wait failed).
    let mut wait_and_destroy = |ev: *mut sys::PJRT_Event| -> Result<()> {
        aw.event = ev;
        // SAFETY: `ev` is a live event owned by us.
        let err = unsafe { await_event(&mut aw) };
        let awaited = match err.is_null() {
            true => Ok(()),
            false => Err(api.take_error(err, "PJRT_Event_Await")),
        };
        ed.event = ev;
        // SAFETY: `ev` is live and destroyed exactly once, here.
        let err = unsafe { destroy_event(&mut ed) };
        if !err.is_null() {
            awaited.clone()?;
            return Err(api.take_error(err, "PJRT_Event_Destroy"));
        }
        awaited
    };

    let start = Instant::now();
    for _ in 0..iters {
        // SAFETY: the structs above live across the loop and point at arrays that do too;
        // the arrays have room for `num_args` arguments and `num_outputs` outputs; the
        // argument buffers are live buffers of this client (checked above, borrowed).
        let err = unsafe { execute(&mut a) };
        if !err.is_null() {
            return Err(api.take_error(err, "PJRT_LoadedExecutable_Execute"));
        }
        let waited = match wait {
            FloorWait::CompletionEvent => wait_and_destroy(event),
            FloorWait::OutputReady => {
                re.buffer = outputs[0];
                // SAFETY: `outputs[0]` is a live buffer the execution just returned.
                let err = unsafe { ready_event(&mut re) };
                if err.is_null() {
                    wait_and_destroy(re.event)
                } else {
                    Err(api.take_error(err, "PJRT_Buffer_ReadyEvent"))
                }
            }
            FloorWait::None => Ok(()),
        };
        let mut destroyed = Ok(());
        for &o in &outputs[..num_outputs] {
            bd.buffer = o;
            // SAFETY: each output is a live buffer owned by us, destroyed exactly once.
            let err = unsafe { destroy_buffer(&mut bd) };
            if !err.is_null() && destroyed.is_ok() {
                destroyed = Err(api.take_error(err, "PJRT_Buffer_Destroy"));
            }
        }
        waited.and(destroyed)?;
    }
    Ok(start.elapsed())
}
