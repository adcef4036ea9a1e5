//! Prepared calls: an executable bound to its arguments once, then called many times.
//!
//! Every check of an execution request (argument count, types and shapes, one client, device
//! placement, donation) runs once, in [`Executable::prepare`], which also builds the per-device
//! argument pointer lists the plugin takes. A call then only checks that the executable and
//! its client are alive and that no argument was deleted or donated since, and calls the
//! plugin once. Its outputs carry the execution's completion events, so that waiting for them
//! ([`CallOutputs::block_until_ready`]) is one wait for every device instead of one per output
//! (`raw::event::AllReady`: a callback on each pending event, the last one wakes the caller).

use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

use super::{
    ffi_context, output_meta, refill_output_meta, ExeState, Executable, ExecuteOptions, NO_OPTIONS,
};
use crate::client::buffer::{Buffer, BufferMeta};
use crate::error::{Error, Result};
use crate::raw;
use crate::raw::execute::ExecuteSink;
use crate::raw::prepared::PreparedArgs;

/// An executable with its arguments bound, ready to run again and again (made by
/// [`Executable::prepare`]).
///
/// It holds its argument buffers alive. Deleting one of them, or donating it to another
/// execution, makes later calls fail with [`Error::Deleted`] naming the argument (prepare
/// again with live buffers); a call that donates its own arguments can therefore run once.
/// `Send + Sync`: threads may call one prepared call at the same time (each call gets its
/// own outputs).
pub struct PreparedCall {
    exe: Executable,
    args: PreparedArgs<BufferMeta>,
}

/// What one [`PreparedCall`] execution returns: every output of every device, device-major,
/// in one list, and the execution's completion event on each device.
pub struct CallOutputs {
    /// The client, whose close ends a wait (with outputs, their buffers would say so; a
    /// call without outputs has none).
    core: std::sync::Arc<crate::client::ClientCore>,
    buffers: Vec<Buffer>,
    events: Vec<raw::event::Event>,
    /// The one wait on `events`, made by the first wait.
    all: OnceLock<raw::event::AllReady>,
    /// Every failed device's error, once a wait has seen all of them finish.
    errors: OnceLock<Vec<(usize, Error)>>,
    num_devices: usize,
    num_outputs: usize,
    /// For a program without outputs: the devices it ran on (with outputs, their devices
    /// say so, and nothing is kept here).
    devices: Vec<raw::device::DeviceRef>,
}

impl CallOutputs {
    /// Number of devices the execution ran on.
    pub fn num_devices(&self) -> usize {
        self.num_devices
    }

    /// Number of outputs per device.
    pub fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    /// The outputs of device `device` (in the order of
    /// [`Executable::addressable_devices`]); empty for a device out of range.
    pub fn device(&self, device: usize) -> &[Buffer] {
        if device >= self.num_devices {
            return &[];
        }
        let n = self.num_outputs;
        self.buffers
            .get(device * n..(device + 1) * n)
            .unwrap_or_default()
    }

    /// The shards of output `output`, one per device, in device order; `None` for an output
    /// out of range.
    pub fn output(&self, output: usize) -> Option<Vec<&Buffer>> {
        if output >= self.num_outputs {
            return None;
        }
        Some(
            (0..self.num_devices)
                .map(|d| &self.buffers[d * self.num_outputs + output])
                .collect(),
        )
    }

    /// Every output, device-major (device 0's outputs, then device 1's, ...).
    pub fn buffers(&self) -> &[Buffer] {
        &self.buffers
    }

    /// One output list per device, as [`Executable::execute_sharded`] returns them.
    pub fn into_lists(self) -> Vec<Vec<Buffer>> {
        let n = self.num_outputs;
        let mut it = self.buffers.into_iter();
        (0..self.num_devices)
            .map(|_| it.by_ref().take(n).collect())
            .collect()
    }

    /// Blocks until the execution has finished on every device and returns its error if it
    /// failed: the error of the first device that failed, in device order (every failed
    /// device's error is then in [`CallOutputs::device_errors`]).
    ///
    /// One wait covers every device: the completion events that are not complete yet get a
    /// callback each, the last of which wakes the caller, so a caller that has to sleep
    /// wakes once per call, not once per device; before sleeping it polls for up to the wait
    /// poll time ([`crate::set_wait_spin`]) without calling the plugin. Where the plugin
    /// gave no events it waits on every output instead. Afterwards the outputs are known to
    /// be ready, so waiting again, here or on an output, is free.
    pub fn block_until_ready(&self) -> Result<()> {
        // Without a timeout the wait ends only once every device has finished.
        self.wait_for(None).map(|_| ())
    }

    /// [`CallOutputs::block_until_ready`] for at most `timeout`: `Ok(true)` when every device
    /// has finished without error, `Ok(false)` when some device is still running then (the
    /// callbacks stay registered: wait again), the execution's error if it failed. Polls
    /// first as [`CallOutputs::block_until_ready`] does, for at most the timeout. For waits
    /// that must wake up now and then (to check for an interrupt).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<bool> {
        self.wait_for(Some(timeout))
    }

    /// The devices whose computation failed, with their errors, in device order; empty
    /// before a wait has seen every device finish, and after success.
    pub fn device_errors(&self) -> Vec<(usize, Error)> {
        self.errors.get().cloned().unwrap_or_default()
    }

    fn wait_for(&self, timeout: Option<Duration>) -> Result<bool> {
        self.core.check("buffer")?;
        if let Some((_, e)) = self.errors.get().and_then(|errors| errors.first()) {
            return Err(e.clone());
        }
        // A call without outputs has only its completion events to wait for (they carry a
        // failing custom call's error).
        if !self.buffers.is_empty() && self.buffers.iter().all(|b| b.raw.is_ready_cached()) {
            return Ok(true);
        }
        if self.events.len() != self.num_devices {
            return super::wait_all(self.buffers.iter()).map(|()| true);
        }
        let _waiting = self.refuse_wait_in_worker_handler()?;
        let _span = crate::trace::span(crate::trace::Category::Wait, "block_until_ready")
            .int("devices", self.num_devices as i64);
        let all = self
            .all
            .get_or_init(|| raw::event::AllReady::register(&self.events));
        let errors = match timeout {
            None => all.wait(&self.events),
            Some(t) => match all.wait_timeout(&self.events, t) {
                Some(errors) => errors,
                None => return Ok(false),
            },
        };
        let errors = self.errors.get_or_init(|| errors);
        if let Some((d, e)) = errors.first() {
            // The device's outputs' own wait explains an out-of-memory error with the
            // device's figures.
            return Err(super::wait_all(self.device(*d).iter())
                .err()
                .unwrap_or_else(|| e.clone()));
        }
        for b in &self.buffers {
            b.raw.mark_ready();
        }
        Ok(true)
    }
}

impl CallOutputs {
    /// Refuses a wait that would never end: from a custom-call handler on a plugin worker
    /// thread, for an execution queued behind that handler's own (on its device). One
    /// atomic load while no such handler runs anywhere.
    fn refuse_wait_in_worker_handler(&self) -> Result<raw::ffi::WorkerWait> {
        if !raw::ffi::worker_handlers_running() {
            return Ok(raw::ffi::WorkerWait::none());
        }
        let Some(first) = self.events.first() else {
            return Ok(raw::ffi::WorkerWait::none());
        };
        let devices: Vec<raw::device::DeviceRef> = match self.buffers.is_empty() {
            true => self.devices.clone(),
            false => self
                .buffers
                .iter()
                .filter_map(|b| b.raw.device().ok())
                .collect(),
        };
        raw::ffi::refuse_event_wait_in_worker_handler(first.client(), &devices, || {
            self.events.iter().all(|e| e.is_ready().unwrap_or(true))
        })
    }
}

impl fmt::Debug for CallOutputs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CallOutputs({} device(s) x {} output(s))",
            self.num_devices, self.num_outputs
        )
    }
}

impl Executable {
    /// Binds `args` (one argument list per device, in the order of
    /// [`Executable::addressable_devices`], as for [`Executable::execute_sharded`]; one list
    /// for a single-device executable) for repeated calls. `donate` lists argument positions
    /// the execution may consume, as in [`ExecuteOptions::donate`].
    ///
    /// Every check a call would make runs here, with the same messages; a portable executable
    /// (no device of its own) is refused.
    pub fn prepare(&self, args: &[Vec<&Buffer>], donate: &[usize]) -> Result<PreparedCall> {
        let lists: Vec<&[&Buffer]> = args.iter().map(|l| l.as_slice()).collect();
        let options = ExecuteOptions {
            donate: donate.to_vec(),
            ..Default::default()
        };
        self.validate(&lists, &options)?;
        // Placement is checked once here for a single device too (a plain call leaves that
        // to the plugin, to keep a query per argument off every call).
        if lists.len() == 1 {
            self.check_placement(&lists)?;
        }
        // A plain call refuses these at each launch; a prepared one, here, once.
        check_donated_once(&lists, donate)?;
        // A pending or failed alias buffer is bound as a copy (see `concrete_args`).
        let copies = self.concrete_args(&lists, donate)?;
        let refs: Vec<Vec<&Buffer>> = copies.iter().map(|l| l.iter().collect()).collect();
        let fixed: Vec<&[&Buffer]> = refs.iter().map(Vec::as_slice).collect();
        let lists = if fixed.is_empty() { lists } else { fixed };
        let prepared =
            PreparedArgs::new(&self.state.loaded, &lists, super::raw_of, &options.donate)?;
        Ok(PreparedCall {
            exe: self.clone(),
            args: prepared,
        })
    }
}

/// Refuses a buffer that a call would hand to the plugin to consume and also use: given in
/// two donated positions (it would be consumed twice), or in a donated position and in one
/// not donated (read after it is consumed). Positions are named as `argument i of device
/// list d`, in the words of a plain call's refusals. Runs once per [`Executable::prepare`],
/// in time linear in the number of arguments (the buffers are grouped by their plugin
/// handle; [`raw::buffer::Buffer::same`] decides).
fn check_donated_once(lists: &[&[&Buffer]], donate: &[usize]) -> Result<()> {
    let mut donated: Vec<usize> = donate.to_vec();
    donated.sort_unstable();
    donated.dedup();
    if donated.is_empty() {
        return Ok(());
    }
    let at = |d: usize, i: usize| format!("argument {i} of device list {d}");
    let raw = |d: usize, i: usize| &lists[d][i].raw;
    // The donated positions (device list, argument), grouped by their buffer's handle.
    let mut donors: std::collections::HashMap<usize, Vec<(usize, usize)>> =
        std::collections::HashMap::new();
    // Donated twice: reported first, as a plain call does.
    for (d, list) in lists.iter().enumerate() {
        for &i in donated.iter().filter(|&&i| i < list.len()) {
            let here = raw(d, i);
            let seen = donors.entry(here.handle_id()).or_default();
            if let Some(&(e, j)) = seen.iter().find(|&&(e, j)| raw(e, j).same(here)) {
                let what = if e == d {
                    format!("arguments {j} and {i} of device list {d}")
                } else {
                    format!("{} and {}", at(e, j), at(d, i))
                };
                return Err(raw::execute::donated_twice(&what));
            }
            seen.push((d, i));
        }
    }
    for (d, list) in lists.iter().enumerate() {
        for (i, b) in list.iter().enumerate() {
            if donated.binary_search(&i).is_ok() {
                continue;
            }
            let here = &b.raw;
            let also = donors
                .get(&here.handle_id())
                .and_then(|seen| seen.iter().find(|&&(e, j)| raw(e, j).same(here)));
            if let Some(&(e, j)) = also {
                return Err(raw::execute::also_donated(&at(d, i), Some(&at(e, j))));
            }
        }
    }
    Ok(())
}

/// Collects every output of a prepared execution in one device-major list, and the
/// per-device completion events.
struct Flat<'a> {
    state: &'a ExeState,
    buffers: Vec<Buffer>,
    events: Vec<raw::event::Event>,
}

impl ExecuteSink<BufferMeta> for Flat<'_> {
    fn meta(&mut self, _device: usize, output: usize) -> BufferMeta {
        output_meta(self.state, output)
    }
    fn refill(&mut self, _device: usize, output: usize, meta: &mut BufferMeta) {
        refill_output_meta(self.state, output, meta)
    }
    fn output(&mut self, _device: usize, buffer: raw::buffer::Buffer<BufferMeta>) {
        self.buffers.push(Buffer::from_raw(buffer));
    }
    fn event(&mut self, _device: usize, event: raw::event::Event) {
        self.events.push(event);
    }
}

impl PreparedCall {
    /// The executable it runs.
    pub fn executable(&self) -> &Executable {
        &self.exe
    }

    /// Number of device lists.
    pub fn num_devices(&self) -> usize {
        self.args.num_devices()
    }

    /// Number of arguments per device.
    pub fn num_args(&self) -> usize {
        self.args.num_args()
    }

    /// Argument `position` of device list `device`, as bound.
    pub fn argument(&self, device: usize, position: usize) -> Option<Buffer> {
        if position >= self.args.num_args() || device >= self.args.num_devices() {
            return None;
        }
        self.args
            .buffers()
            .get(device * self.args.num_args() + position)
            .map(|b| Buffer::from_raw(b.clone()))
    }

    /// Runs once with the bound arguments. Returns without waiting; the outputs become ready
    /// when the computation finishes ([`CallOutputs::block_until_ready`] waits for that).
    pub fn call(&self) -> Result<CallOutputs> {
        self.exe.check()?;
        let st = &*self.exe.state;
        let num_devices = self.args.num_devices();
        let mut sink = Flat {
            state: st,
            buffers: Vec::with_capacity(num_devices * st.outputs.len()),
            events: Vec::with_capacity(num_devices),
        };
        let context = ffi_context(&NO_OPTIONS, st);
        st.loaded
            .execute_prepared(&self.args, true, context, Some(&st.spare), &mut sink)
            .map_err(|e| self.launch_error(e))?;
        Ok(CallOutputs {
            core: std::sync::Arc::clone(&st.core),
            buffers: sink.buffers,
            events: sink.events,
            all: OnceLock::new(),
            errors: OnceLock::new(),
            num_devices,
            num_outputs: st.outputs.len(),
            devices: match st.outputs.is_empty() {
                true => st.devices.clone(),
                false => Vec::new(),
            },
        })
    }

    /// [`PreparedCall::call`], then [`CallOutputs::block_until_ready`]: a failed execution is
    /// this call's error.
    pub fn call_and_wait(&self) -> Result<CallOutputs> {
        let out = self.call()?;
        out.block_until_ready()?;
        Ok(out)
    }

    /// The error of a refused launch, with the memory figures of an out-of-memory one.
    fn launch_error(&self, e: Error) -> Error {
        let ran = super::plugin_ran(&e);
        let st = &*self.exe.state;
        if matches!(e, Error::Deleted(_)) {
            return e;
        }
        let e = st.core.with_memory_context(e, &st.devices, || {
            let outs: Vec<String> = st.outputs.iter().map(|o| o.to_string()).collect();
            Some((
                format!("executing {} (outputs {})", st.name, outs.join(", ")),
                None,
            ))
        });
        // Another thread may delete an argument between the check and the plugin's own; a
        // donated one the plugin consumed before it failed is this call's doing.
        let donated = self.args.donated();
        let n = self.args.num_args().max(1);
        let buffers = self.args.buffers();
        let deleted = (buffers.iter().enumerate())
            .find(|(k, b)| b.is_deleted() && donated.binary_search(&(k % n)).is_err());
        let e = match deleted {
            Some((k, _)) => {
                return Error::Deleted(format!(
                    "argument {} of device list {} was deleted while the execution was being \
                     launched ({e})",
                    k % n,
                    k / n
                ))
            }
            None => e,
        };
        let consumed = donated
            .iter()
            .copied()
            .filter(|&i| (0..self.args.num_devices()).any(|d| buffers[d * n + i].is_deleted()));
        super::with_consumed(e, ran, consumed)
    }
}

impl fmt::Debug for PreparedCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PreparedCall({}, {} device(s) x {} argument(s))",
            self.exe.name(),
            self.args.num_devices(),
            self.args.num_args()
        )
    }
}
