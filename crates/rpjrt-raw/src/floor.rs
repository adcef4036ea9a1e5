//! The raw C floor of an execution, for benchmarks.
//!
//! [`Floor`] is what a C programmer would write to run a loaded executable in a loop
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
use super::{pjrt_fn, Api, Args};
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

/// The floor's prepared state: every struct and array an iteration needs, built once, for
/// a loaded executable and one argument list per device. [`Floor::run`] then runs
/// iterations of `Execute` (all devices in one call), the waits and the destructions.
///
/// A floor borrows the executable and holds clones of the argument buffers, so everything
/// its raw pointers name stays alive while it does.
pub struct Floor<'a, M> {
    _loaded: &'a Loaded,
    _keep: Vec<Buffer<M>>,
    api: &'static Api,
    execute: PjrtFn<sys::PJRT_LoadedExecutable_Execute_Args>,
    await_event: PjrtFn<sys::PJRT_Event_Await_Args>,
    destroy_event: PjrtFn<sys::PJRT_Event_Destroy_Args>,
    destroy_buffer: PjrtFn<sys::PJRT_Buffer_Destroy_Args>,
    ready_event: PjrtFn<sys::PJRT_Buffer_ReadyEvent_Args>,
    wait: FloorWait,
    num_outputs: usize,
    // Heap arrays: `args` points into them, and their addresses do not change when the
    // floor moves. `_arg_ptrs` and `_non_donatable` are only read by the plugin.
    _arg_ptrs: Box<[*mut sys::PJRT_Buffer]>,
    _arg_lists: Box<[*const *mut sys::PJRT_Buffer]>,
    outputs: Box<[*mut sys::PJRT_Buffer]>,
    _output_lists: Box<[*mut *mut sys::PJRT_Buffer]>,
    events: Box<[*mut sys::PJRT_Event]>,
    _non_donatable: Box<[i64]>,
    _options: Box<sys::PJRT_ExecuteOptions>,
    args: sys::PJRT_LoadedExecutable_Execute_Args,
}

/// A plugin entry point, as the table holds it.
type PjrtFn<A> = unsafe extern "C" fn(*mut A) -> *mut sys::PJRT_Error;

// SAFETY: the raw pointers are the floor's own heap arrays and PJRT objects, which the C
// API lets any thread use; a floor is used by one thread at a time (`run` takes `&mut`).
// The buffers it keeps are sent with it, hence the bound.
unsafe impl<M: Send + Sync> Send for Floor<'_, M> {}

impl<'a, M> Floor<'a, M> {
    /// Prepares the floor of `e` on `lists` (one argument list per device, in the order of
    /// the executable's devices; every list of the same length). The buffers must not be
    /// deleted while the floor runs: like the C loop it stands for, it does not check them
    /// again per iteration.
    pub fn new(e: &'a Loaded, lists: &[&[&Buffer<M>]], wait: FloorWait) -> Result<Self> {
        let num_devices = lists.len();
        let num_args = lists.first().map_or(0, |l| l.len());
        let num_outputs = e.num_outputs();
        if num_devices == 0
            || num_devices > FLOOR_MAX
            || num_args > FLOOR_MAX
            || num_outputs > FLOOR_MAX
            || num_outputs == 0
        {
            return Err(Error::invalid(format!(
                "the floor handles 1..={FLOOR_MAX} devices, 1..={FLOOR_MAX} outputs and up to \
                 {FLOOR_MAX} arguments"
            )));
        }
        for list in lists {
            if list.len() != num_args {
                return Err(Error::invalid(
                    "floor argument lists must all have the same length",
                ));
            }
            for b in list.iter() {
                if !b.belongs_to(e.client()) || b.is_deleted() {
                    return Err(Error::invalid(
                        "floor arguments must be live buffers of the executable's client",
                    ));
                }
            }
        }
        let api = e.client().api();
        let arg_ptrs: Box<[_]> = lists
            .iter()
            .flat_map(|l| l.iter().map(|b| b.ptr()))
            .collect();
        let arg_lists: Box<[_]> = (0..num_devices)
            .map(|d| arg_ptrs[d * num_args..].as_ptr() as *const *mut sys::PJRT_Buffer)
            .collect();
        let mut outputs: Box<[_]> = vec![null_mut(); num_devices * num_outputs].into();
        let output_lists: Box<[_]> = (0..num_devices)
            .map(|d| outputs[d * num_outputs..].as_mut_ptr())
            .collect();
        let mut events: Box<[_]> = vec![null_mut(); num_devices].into();
        let non_donatable: Box<[i64]> = (0..num_args as i64).collect();
        let mut options = Box::new(sys::PJRT_ExecuteOptions::new());
        options.non_donatable_input_indices = non_donatable.as_ptr();
        options.num_non_donatable_input_indices = num_args;
        let mut a = sys::PJRT_LoadedExecutable_Execute_Args::new();
        a.executable = e.ptr();
        a.options = &mut *options;
        a.argument_lists = arg_lists.as_ptr();
        a.num_devices = num_devices;
        a.num_args = num_args;
        a.output_lists = output_lists.as_ptr();
        if wait == FloorWait::CompletionEvent {
            a.device_complete_events = events.as_mut_ptr();
        }
        Ok(Floor {
            _loaded: e,
            _keep: lists
                .iter()
                .flat_map(|l| l.iter().map(|&b| b.clone()))
                .collect(),
            api,
            execute: pjrt_fn!(api, PJRT_LoadedExecutable_Execute)?,
            await_event: pjrt_fn!(api, PJRT_Event_Await)?,
            destroy_event: pjrt_fn!(api, PJRT_Event_Destroy)?,
            destroy_buffer: pjrt_fn!(api, PJRT_Buffer_Destroy)?,
            ready_event: pjrt_fn!(api, PJRT_Buffer_ReadyEvent)?,
            wait,
            num_outputs,
            _arg_ptrs: arg_ptrs,
            _arg_lists: arg_lists,
            outputs,
            _output_lists: output_lists,
            events,
            _non_donatable: non_donatable,
            _options: options,
            args: a,
        })
    }

    /// Awaits `ev`, then destroys it (also when the wait failed).
    #[inline(always)]
    fn wait_and_destroy(&self, ev: *mut sys::PJRT_Event) -> Result<()> {
        let mut aw = sys::PJRT_Event_Await_Args::new();
        aw.event = ev;
        // SAFETY: `ev` is a live event owned by us.
        let err = unsafe { (self.await_event)(&mut aw) };
        let awaited = match err.is_null() {
            true => Ok(()),
            false => Err(self.api.take_error(err, "PJRT_Event_Await")),
        };
        let mut ed = sys::PJRT_Event_Destroy_Args::new();
        ed.event = ev;
        // SAFETY: `ev` is live and destroyed exactly once, here.
        let err = unsafe { (self.destroy_event)(&mut ed) };
        if !err.is_null() {
            awaited.clone()?;
            return Err(self.api.take_error(err, "PJRT_Event_Destroy"));
        }
        awaited
    }

    /// Runs `iters` iterations and returns their wall time. An iteration is one `Execute`
    /// on every device, then per device the wait of [`FloorWait`], then the destruction of
    /// every output.
    pub fn run(&mut self, iters: usize) -> Result<Duration> {
        let start = Instant::now();
        for _ in 0..iters {
            // SAFETY: the args struct points at the floor's own heap arrays, sized for its
            // devices, arguments and outputs; the executable and argument buffers are alive
            // (the contract of `new`).
            let err = unsafe { (self.execute)(&mut self.args) };
            if !err.is_null() {
                return Err(self.api.take_error(err, "PJRT_LoadedExecutable_Execute"));
            }
            let mut waited = Ok(());
            for d in 0..self.events.len() {
                let w = match self.wait {
                    FloorWait::CompletionEvent => self.wait_and_destroy(self.events[d]),
                    FloorWait::OutputReady => {
                        let mut re = sys::PJRT_Buffer_ReadyEvent_Args::new();
                        re.buffer = self.outputs[d * self.num_outputs];
                        // SAFETY: a live buffer the execution just returned.
                        let err = unsafe { (self.ready_event)(&mut re) };
                        if err.is_null() {
                            self.wait_and_destroy(re.event)
                        } else {
                            Err(self.api.take_error(err, "PJRT_Buffer_ReadyEvent"))
                        }
                    }
                    FloorWait::None => Ok(()),
                };
                waited = waited.and(w);
            }
            let mut destroyed = Ok(());
            for &o in self.outputs.iter() {
                let mut bd = sys::PJRT_Buffer_Destroy_Args::new();
                bd.buffer = o;
                // SAFETY: each output is a live buffer owned by us, destroyed exactly once.
                let err = unsafe { (self.destroy_buffer)(&mut bd) };
                if !err.is_null() && destroyed.is_ok() {
                    destroyed = Err(self.api.take_error(err, "PJRT_Buffer_Destroy"));
                }
            }
            waited.and(destroyed)?;
        }
        Ok(start.elapsed())
    }
}
