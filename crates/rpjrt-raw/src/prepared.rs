//! Prepared executions: the argument pointer lists of `PJRT_LoadedExecutable_Execute` built
//! once and reused by every call with the same arguments.
//!
//! [`PreparedArgs`] owns a clone of every argument buffer, so the pointers it hands the plugin
//! stay valid for as long as it lives; a buffer deleted or donated meanwhile is refused before
//! the call (and the plugin refuses one deleted by another thread during the call: its handle is
//! still alive, only its memory is gone). A call builds only the output lists (on the stack for
//! small executions).

use std::ptr::null_mut;

use rpjrt_sys as sys;

use super::buffer::{Buffer, Recycler, StateError};
use super::executable::Loaded;
use super::execute::{Donation, ExecuteContext, ExecuteSink};
use super::inline::Inline;
use super::{pjrt, Args};
use crate::error::{Error, Result};

/// Output lists up to this long stay on the stack.
const INLINE: usize = 64;

/// The arguments of repeated executions, as the C call takes them: one pointer list per device.
pub struct PreparedArgs<M> {
    /// Every argument, device-major; owning them keeps `ptrs` valid.
    buffers: Box<[Buffer<M>]>,
    /// `buffers[i].ptr()`, in the same order; read only by the plugin, through `lists`.
    #[allow(dead_code)]
    ptrs: Box<[*mut sys::PJRT_Buffer]>,
    /// `ptrs[d * num_args..]` for each device `d`.
    lists: Box<[*const *mut sys::PJRT_Buffer]>,
    /// The positions that are not donated.
    non_donatable: Box<[i64]>,
    /// The donated positions, ascending, without repeats.
    donate: Box<[usize]>,
    num_args: usize,
}

// SAFETY: the pointers address buffers this value owns (PJRT buffers are thread-safe by the C
// API's contract) and its own heap arrays, which are never written after construction.
unsafe impl<M: Send + Sync> Send for PreparedArgs<M> {}
// SAFETY: as for Send; every method takes `&self` and writes nothing shared.
unsafe impl<M: Send + Sync> Sync for PreparedArgs<M> {}

impl<M> PreparedArgs<M> {
    /// Builds the lists: `lists[d]` are device `d`'s arguments, all of one length, all of
    /// `client`'s executable `exe` (checked), live at this point (checked); `donate` are
    /// argument positions (checked against the length).
    pub fn new<B>(
        exe: &Loaded,
        lists: &[&[&B]],
        raw: fn(&B) -> &Buffer<M>,
        donate: &[usize],
    ) -> Result<PreparedArgs<M>> {
        let num_args = lists.first().map_or(0, |l| l.len());
        let client = exe.client();
        let mut buffers = Vec::with_capacity(lists.len() * num_args);
        for (d, list) in lists.iter().enumerate() {
            if list.len() != num_args {
                return Err(Error::invalid("argument lists differ in length"));
            }
            for (i, b) in list.iter().enumerate() {
                let r = raw(b);
                if !r.belongs_to(client) {
                    return Err(Error::invalid(format!(
                        "argument {i} of device list {d} belongs to another client"
                    )));
                }
                if r.is_deleted() {
                    return Err(Error::Deleted(format!(
                        "argument {i} of device list {d} was deleted or donated and cannot be used"
                    )));
                }
                buffers.push(r.clone());
            }
        }
        let mut donated: Vec<usize> = donate.to_vec();
        donated.sort_unstable();
        donated.dedup();
        if let Some(&i) = donated.iter().find(|&&i| i >= num_args) {
            return Err(Error::invalid(format!(
                "donate index {i} is out of range for {num_args} arguments"
            )));
        }
        // Host memory the plugin reads in place (see `borrows_host`) is consumed by a
        // donation but never handed to the plugin to write.
        let reads_host =
            |i: usize| (0..lists.len()).any(|d| buffers[d * num_args + i].borrows_host());
        let non_donatable: Box<[i64]> = (0..num_args)
            .filter(|&i| donated.binary_search(&i).is_err() || reads_host(i))
            .map(|i| i as i64)
            .collect();
        let buffers = buffers.into_boxed_slice();
        let ptrs: Box<[*mut sys::PJRT_Buffer]> = buffers.iter().map(|b| b.ptr()).collect();
        let base = ptrs.as_ptr();
        // In bounds: `ptrs` has `lists.len() * num_args` items (the heap array never moves).
        let lists = (0..lists.len())
            .map(|d| base.wrapping_add(d * num_args))
            .collect();
        Ok(PreparedArgs {
            buffers,
            ptrs,
            lists,
            non_donatable,
            donate: donated.into_boxed_slice(),
            num_args,
        })
    }

    /// Number of device lists.
    pub fn num_devices(&self) -> usize {
        self.lists.len()
    }

    /// Number of arguments per device.
    pub fn num_args(&self) -> usize {
        self.num_args
    }

    /// The argument buffers, device-major.
    pub fn buffers(&self) -> &[Buffer<M>] {
        &self.buffers
    }

    /// The donated positions, ascending, without repeats.
    pub fn donated(&self) -> &[usize] {
        &self.donate
    }

    /// The first argument that is deleted or donated, as `(device, position)`.
    pub fn first_deleted(&self) -> Option<(usize, usize)> {
        let n = self.num_args.max(1);
        self.buffers
            .iter()
            .position(|b| b.is_deleted())
            .map(|k| (k / n, k % n))
    }
}

/// The first `entered` undonated arguments of `args` were recorded with `enter_launch`;
/// each is left on drop.
struct PreparedLaunch<'a, M> {
    args: &'a PreparedArgs<M>,
    entered: usize,
}

impl<'a, M> PreparedLaunch<'a, M> {
    /// The arguments not donated, device by device, in order.
    fn undonated(&self) -> impl Iterator<Item = &'a Buffer<M>> + 'a {
        let args = self.args;
        let n = args.num_args.max(1);
        (args.buffers.iter().enumerate())
            .filter(move |(k, _)| args.donate.binary_search(&(k % n)).is_err())
            .map(|(_, b)| b)
    }
}

impl<M> Drop for PreparedLaunch<'_, M> {
    fn drop(&mut self) {
        for b in self.undonated().take(self.entered) {
            b.leave_launch();
        }
    }
}

impl Loaded {
    /// Executes with prepared arguments (made for this executable): refuses a deleted or
    /// donated argument, reserves the donated ones (restored if the call fails), calls the
    /// plugin once and hands every output and, when `want_events`, each device's completion
    /// event to `sink`. Output handles come from `recycle`'s spares where it has them.
    pub fn execute_prepared<M>(
        &self,
        args: &PreparedArgs<M>,
        want_events: bool,
        context: Option<&ExecuteContext>,
        recycle: Option<&Recycler<M>>,
        sink: &mut impl ExecuteSink<M>,
    ) -> Result<()> {
        // Kept until the plugin's call returned (see `check_nested_execute`).
        let _launch_mark = super::ffi::check_nested_execute(self, None)?;
        let client = self.client();
        if let Some(b) = args.buffers.first() {
            if !b.belongs_to(client) {
                return Err(Error::invalid(
                    "the prepared arguments were made for another client",
                ));
            }
        }
        if let Some((d, i)) = args.first_deleted() {
            return Err(Error::Deleted(format!(
                "argument {i} of device list {d} was deleted or donated since the call was \
                 prepared; prepare it again with live buffers"
            )));
        }
        let mut donation = Donation {
            reserved: Vec::new(),
        };
        if !args.donate.is_empty() {
            let n = args.num_args;
            for (d, list) in args.buffers.chunks(n.max(1)).enumerate() {
                for &i in args.donate.iter() {
                    let b = &list[i];
                    if donation.reserved.iter().any(|r| r.same(b)) {
                        continue;
                    }
                    match b.reserve_donation() {
                        Ok(()) => donation.reserved.push(b),
                        Err(StateError::Deleted) => {
                            return Err(Error::Deleted(format!(
                                "argument {i} of device list {d} was deleted or donated since \
                                 the call was prepared; prepare it again with live buffers"
                            )))
                        }
                        Err(StateError::Pinned(k)) => {
                            return Err(Error::invalid(format!(
                                "argument {i} of device list {d} cannot be donated while {k} \
                                 host view(s) or external reference(s) of it exist"
                            )))
                        }
                        Err(StateError::Launching) => {
                            return Err(super::execute::launching_refusal(i))
                        }
                    }
                }
            }
        }
        // The other arguments are launching until the plugin's call returns (see
        // `Buffer::reserve_donation`).
        let mut launch = PreparedLaunch { args, entered: 0 };
        for b in launch.undonated() {
            if !b.enter_launch() {
                let also_donated = donation.reserved.iter().any(|r| r.same(b));
                return Err(if also_donated {
                    super::execute::also_donated("an argument", None)
                } else {
                    Error::Deleted(
                        "an argument was deleted or donated since the call was prepared; \
                         prepare it again with live buffers"
                            .into(),
                    )
                });
            }
            launch.entered += 1;
        }

        let num_devices = args.num_devices();
        let num_outputs = self.num_outputs();
        let mut outs: Inline<*mut sys::PJRT_Buffer, INLINE> =
            Inline::filled(num_devices * num_outputs, null_mut());
        let mut output_lists: Inline<*mut *mut sys::PJRT_Buffer, 8> =
            Inline::filled(num_devices, null_mut());
        let base = outs.as_mut_slice().as_mut_ptr();
        for (d, slot) in output_lists.as_mut_slice().iter_mut().enumerate() {
            // In bounds: `outs` has `num_devices * num_outputs` slots.
            *slot = base.wrapping_add(d * num_outputs);
        }
        let mut events: Inline<*mut sys::PJRT_Event, 8> = Inline::filled(num_devices, null_mut());

        let mut options = sys::PJRT_ExecuteOptions::new();
        options.non_donatable_input_indices = args.non_donatable.as_ptr();
        options.num_non_donatable_input_indices = args.non_donatable.len();
        if let Some(ctx) = context {
            options.context = ctx.ptr.as_ptr();
        }
        let mut a = sys::PJRT_LoadedExecutable_Execute_Args::new();
        a.executable = self.ptr();
        a.options = &mut options;
        a.argument_lists = args.lists.as_ptr();
        a.num_devices = num_devices;
        a.num_args = args.num_args;
        a.output_lists = output_lists.as_ptr();
        if want_events {
            a.device_complete_events = events.as_mut_slice().as_mut_ptr();
        }
        a.execute_device = null_mut();
        // The devices whose queues the outputs wait for besides their own (only while a
        // worker-thread handler runs anywhere).
        let upstream = super::buffer::upstream_of(args.buffers().iter());
        // SAFETY: the argument lists point at buffers `args` owns (alive for the call, none
        // deleted when checked above; the plugin refuses one deleted meanwhile), each list
        // `num_args` long; the output lists have room for the executable's outputs on each
        // device; the event array has one slot per device; all live until after the call.
        let r = unsafe { pjrt!(client.api(), PJRT_LoadedExecutable_Execute, &mut a) };
        drop(launch);
        if r.is_err() {
            donation.failed();
        }
        r?;
        donation.reserved.clear();
        let events = want_events.then_some(&events[..]);
        super::execute::hand_out(
            client,
            &outs,
            num_outputs,
            events,
            recycle,
            upstream.as_ref(),
            sink,
        );
        Ok(())
    }
}
