//! The one marshaller of `PJRT_LoadedExecutable_Execute`.
//!
//! One device is the N = 1 case of many. Argument and output pointer lists, completion
//! events and non-donatable indices stay on the stack for small calls, and output handles
//! come from the caller's recycler: a steady loop allocates nothing besides what the
//! caller's sink does with the outputs. The request has room for what
//! later features pass to the same call: per-device completion events (today), an execute
//! context carrying FFI user data, and send/recv callbacks.

use std::ptr::null_mut;
use std::sync::Arc;

use rpjrt_sys as sys;

use super::buffer::{Buffer, Recycler, StateError};
use super::client::Client;
use super::device::DeviceRef;
use super::event::Event;
use super::executable::Loaded;
use super::inline::Inline;
use super::{args_types, pjrt, Args};
use crate::error::{Error, Result};

args_types! {
    PJRT_LoadedExecutable_Execute_Args => PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE,
    PJRT_ExecuteOptions => PJRT_ExecuteOptions_STRUCT_SIZE,
}

/// Lists up to this long stay on the stack.
const INLINE: usize = 16;

/// `0, 1, 2, ...`: the non-donatable indices of a call that donates nothing.
static ALL_INDICES: [i64; 64] = {
    let mut a = [0i64; 64];
    let mut i = 0;
    while i < a.len() {
        a[i] = i as i64;
        i += 1;
    }
    a
};

/// An execute context (`PJRT_ExecuteContext`), carrying user data to FFI handlers. Made
/// and owned by the FFI support; the marshaller passes it through.
pub struct ExecuteContext {
    pub(super) ptr: std::ptr::NonNull<sys::PJRT_ExecuteContext>,
}

/// Send/recv callbacks of host transfers inside a program (not supported yet: a request
/// with them is refused).
pub struct SendRecv {
    _reserved: (),
}

/// Where the marshaller puts what an execution returns.
pub trait ExecuteSink<M> {
    /// Metadata of output `output` of device `device`, made before it is wrapped.
    fn meta(&mut self, device: usize, output: usize) -> M;
    /// Rewrites `meta`, which an earlier output of the same producer held (its allocation is
    /// being reused), into the metadata of output `output` of device `device`. The default
    /// makes it anew; a sink can keep what all outputs of the producer share.
    fn refill(&mut self, device: usize, output: usize, meta: &mut M) {
        *meta = self.meta(device, output);
    }
    /// Output buffers, in device order, then output order.
    fn output(&mut self, device: usize, buffer: Buffer<M>);
    /// The completion event of `device`, when asked for and the plugin gave one.
    fn event(&mut self, device: usize, event: Event);
}

/// One call of `PJRT_LoadedExecutable_Execute`.
pub struct ExecuteRequest<'a, B, M> {
    /// One argument list per device, all of the same length.
    pub lists: &'a [&'a [&'a B]],
    /// The raw buffer of an argument.
    pub raw: fn(&B) -> &Buffer<M>,
    /// Argument positions the execution may consume (marked deleted when it runs).
    pub donate: &'a [usize],
    /// The device to run a portable executable on.
    pub device: Option<DeviceRef>,
    /// Whether to ask for per-device completion events.
    pub want_events: bool,
    /// An execute context for FFI user data.
    pub context: Option<&'a ExecuteContext>,
    /// Send/recv callbacks (reserved).
    pub send_recv: Option<&'a SendRecv>,
    /// Where the outputs' handle allocations come from and go back to (none: fresh ones).
    pub recycle: Option<&'a Recycler<M>>,
}

impl Loaded {
    /// Executes: checks every argument (same client, not deleted), reserves donated
    /// buffers (restored if the call fails), calls the plugin once and hands every output
    /// and event to `sink`, wrapped once.
    pub fn execute<B, M>(
        &self,
        req: &ExecuteRequest<'_, B, M>,
        sink: &mut impl ExecuteSink<M>,
    ) -> Result<()> {
        if req.send_recv.is_some() {
            return Err(Error::invalid("send/recv callbacks are not supported yet"));
        }
        // Kept until the plugin's call returned (see `check_nested_execute`).
        let _launch_mark = super::ffi::check_nested_execute(self, req.device)?;
        let num_devices = req.lists.len();
        let num_args = req.lists.first().map_or(0, |l| l.len());
        let num_outputs = self.num_outputs();
        let client = self.client();
        // Every argument must be a live buffer of this client: the plugin would crash on a
        // buffer of another client.
        let mut arg_store: Inline<*mut sys::PJRT_Buffer, INLINE> =
            Inline::filled(num_devices * num_args, null_mut());
        // Each list is taken as a slice once (not matched again at every use).
        let arg_ptrs = arg_store.as_mut_slice();
        let mut slots = arg_ptrs.iter_mut();
        // Each undonated argument is recorded as launching until the plugin's call returns,
        // so that a donation on another thread waits for it (see `reserve_donation`):
        // here when nothing is donated, else once the donations are reserved (below).
        let mut launch = Launch {
            lists: req.lists,
            raw: req.raw,
            donate: req.donate,
            entered: 0,
        };
        let enter_now = req.donate.is_empty();
        for list in req.lists {
            if list.len() != num_args {
                return Err(Error::invalid("argument lists differ in length"));
            }
            for (i, b) in list.iter().enumerate() {
                let raw = (req.raw)(b);
                if !raw.belongs_to(client) {
                    return Err(Error::invalid(format!(
                        "argument {i} belongs to another client"
                    )));
                }
                let live = if enter_now {
                    let entered = raw.enter_launch();
                    launch.entered += usize::from(entered);
                    entered
                } else {
                    !raw.is_deleted()
                };
                if !live {
                    return Err(Error::Deleted(format!(
                        "argument {i} was deleted or donated and cannot be used"
                    )));
                }
                if let Some(slot) = slots.next() {
                    *slot = raw.ptr();
                }
            }
        }
        if let Some(d) = req.device {
            if !d.belongs_to(client) {
                return Err(Error::invalid("the device belongs to another client"));
            }
        }
        // Donation: reserve first (so no host view can be taken meanwhile), undo on failure.
        let owned_indices;
        let non_donatable: &[i64] = if req.donate.is_empty() && num_args <= ALL_INDICES.len() {
            &ALL_INDICES[..num_args]
        } else {
            let mut v: Vec<i64> = (0..num_args as i64).collect();
            for &i in req.donate {
                if i >= num_args {
                    return Err(Error::invalid(format!(
                        "donate index {i} is out of range for {num_args} arguments"
                    )));
                }
                // Host memory the plugin reads in place (a zero-copy or staged put, a
                // DLPack import) is the caller's, not the plugin's to write: such an argument
                // is consumed by the donation (reserved below) but passed as not donatable.
                if !req.lists.iter().any(|l| (req.raw)(l[i]).borrows_host()) {
                    v.retain(|&x| x != i as i64);
                }
            }
            owned_indices = v;
            &owned_indices
        };
        // One buffer in two donated positions would be handed to the plugin to consume
        // twice (XLA's own clients refuse it too).
        for list in req.lists {
            for (k, &i) in req.donate.iter().enumerate() {
                let here = (req.raw)(list[i]);
                let first = req.donate[..k]
                    .iter()
                    .find(|&&j| j != i && (req.raw)(list[j]).same(here));
                if let Some(&j) = first {
                    return Err(donated_twice(&format!(
                        "arguments {} and {}",
                        j.min(i),
                        j.max(i)
                    )));
                }
            }
        }
        let mut donation = Donation {
            reserved: Vec::new(),
        };
        for &i in req.donate {
            for list in req.lists {
                let raw = (req.raw)(list[i]);
                if donation.reserved.iter().any(|r| r.same(raw)) {
                    continue;
                }
                match raw.reserve_donation() {
                    Ok(()) => donation.reserved.push(raw),
                    Err(StateError::Deleted) => {
                        return Err(Error::Deleted(format!(
                            "argument {i} was deleted or donated and cannot be used"
                        )))
                    }
                    Err(StateError::Pinned(n)) => {
                        return Err(Error::invalid(format!(
                            "argument {i} cannot be donated while {n} host view(s) or external reference(s) of it exist"
                        )))
                    }
                    Err(StateError::Launching) => return Err(launching_refusal(i)),
                }
            }
        }
        for list in req.lists.iter().filter(|_| !enter_now) {
            for (i, b) in list.iter().enumerate() {
                if req.donate.contains(&i) {
                    continue;
                }
                let raw = (req.raw)(b);
                if !raw.enter_launch() {
                    return Err(match donation.reserved.iter().any(|r| r.same(raw)) {
                        true => also_donated(&format!("argument {i}"), None),
                        false => Error::Deleted(format!(
                            "argument {i} was deleted or donated and cannot be used"
                        )),
                    });
                }
                launch.entered += 1;
            }
        }

        let mut arg_list_store: Inline<*const *mut sys::PJRT_Buffer, 4> =
            Inline::filled(num_devices, std::ptr::null());
        let arg_lists = arg_list_store.as_mut_slice();
        let arg_base = arg_ptrs.as_ptr();
        for (d, slot) in arg_lists.iter_mut().enumerate() {
            // In bounds: `arg_ptrs` has `num_devices * num_args` slots.
            *slot = arg_base.wrapping_add(d * num_args);
        }
        let mut out_store: Inline<*mut sys::PJRT_Buffer, INLINE> =
            Inline::filled(num_devices * num_outputs, null_mut());
        let outs = out_store.as_mut_slice();
        let mut output_list_store: Inline<*mut *mut sys::PJRT_Buffer, 4> =
            Inline::filled(num_devices, null_mut());
        let output_lists = output_list_store.as_mut_slice();
        let base = outs.as_mut_ptr();
        for (d, slot) in output_lists.iter_mut().enumerate() {
            // In bounds: `outs` has `num_devices * num_outputs` slots.
            *slot = base.wrapping_add(d * num_outputs);
        }
        // Room for events only when they are asked for.
        let mut event_store: Inline<*mut sys::PJRT_Event, 4> =
            Inline::filled(if req.want_events { num_devices } else { 0 }, null_mut());
        let events = event_store.as_mut_slice();

        let mut options = sys::PJRT_ExecuteOptions::new();
        options.non_donatable_input_indices = non_donatable.as_ptr();
        options.num_non_donatable_input_indices = non_donatable.len();
        if let Some(ctx) = req.context {
            options.context = ctx.ptr.as_ptr();
        }
        let mut a = sys::PJRT_LoadedExecutable_Execute_Args::new();
        a.executable = self.ptr();
        a.options = &mut options;
        a.argument_lists = arg_lists.as_ptr();
        a.num_devices = num_devices;
        a.num_args = num_args;
        a.output_lists = output_lists.as_ptr();
        if req.want_events {
            a.device_complete_events = events.as_mut_ptr();
        }
        a.execute_device = req.device.map_or(null_mut(), |d| d.ptr());
        // The devices whose queues the outputs wait for besides their own (only while a
        // worker-thread handler runs anywhere).
        let upstream = super::buffer::upstream_of(
            req.lists
                .iter()
                .flat_map(|l| l.iter().map(|b| (req.raw)(b))),
        );
        // SAFETY: every array lives until after the call and has the length given; the
        // output lists have room for the executable's outputs; the argument buffers are live
        // buffers of this client (checked above, and borrowed for the call).
        let r = unsafe { pjrt!(client.api(), PJRT_LoadedExecutable_Execute, &mut a) };
        drop(launch);
        if r.is_err() {
            donation.failed();
        }
        r?;
        donation.reserved.clear();
        let events = req.want_events.then_some(&events[..]);
        hand_out(
            client,
            outs,
            num_outputs,
            events,
            req.recycle,
            upstream.as_ref(),
            sink,
        );
        Ok(())
    }
}

/// Wraps what an execution returned and hands it to `sink`: `outs` device-major (each
/// output's handle from `recycle`'s spares where it has one), then each device's completion
/// event (`events`, when asked for).
pub(super) fn hand_out<M>(
    client: &Arc<Client>,
    outs: &[*mut sys::PJRT_Buffer],
    num_outputs: usize,
    events: Option<&[*mut sys::PJRT_Event]>,
    recycle: Option<&Recycler<M>>,
    upstream: Option<&Arc<[super::device::DeviceRef]>>,
    sink: &mut impl ExecuteSink<M>,
) {
    // Device by device, output by output (no division per output on the hot path).
    let per_device = outs.chunks(num_outputs.max(1));
    let each = per_device
        .enumerate()
        .flat_map(|(d, l)| l.iter().enumerate().map(move |(o, &p)| (d, o, p)));
    for (d, o, p) in each {
        // A null output would be a plugin bug; skip it rather than own a null.
        if let Some(p) = std::ptr::NonNull::new(p) {
            let buffer = match recycle {
                Some(r) => match r.take() {
                    Some(mut spare) => {
                        sink.refill(d, o, spare.meta_mut());
                        spare.into_buffer(client, p)
                    }
                    None => Buffer::recyclable(r, client, p, sink.meta(d, o)),
                },
                None => Buffer::new(client, p, sink.meta(d, o), None, None),
            };
            let mut buffer = buffer;
            if let Some(u) = upstream {
                buffer.set_upstream(u);
            }
            sink.output(d, buffer);
        }
    }
    for (d, &e) in events.unwrap_or_default().iter().enumerate() {
        if let Some(ev) = Event::new(client, e) {
            sink.event(d, ev);
        }
    }
}

/// The refusal of `what` (an argument) passed undonated while the same call donates it
/// (`donated_as`, the donated position, where the caller names it).
pub fn also_donated(what: &str, donated_as: Option<&str>) -> Error {
    let as_ = donated_as.map_or_else(String::new, |d| format!(" (as {d})"));
    Error::invalid(format!(
        "{what} is a buffer this call also donates{as_}; pass a donated buffer only in its \
         donated position"
    ))
}

/// The refusal of one buffer donated in two positions of one call (`what`: `arguments 0
/// and 1`).
pub fn donated_twice(what: &str) -> Error {
    Error::invalid(format!(
        "{what} are the same buffer, and both are donated: a buffer can be given up once per \
         call; donate one of them and pass a copy (or nothing) for the other"
    ))
}

/// The refusal of a donation from a plugin callback while another launch holds the buffer.
pub(super) fn launching_refusal(i: usize) -> Error {
    Error::invalid(format!(
        "argument {i} cannot be donated from a custom-call handler while an execution is \
         being launched with it (perhaps the one running the handler)"
    ))
}

/// The non-donated arguments of a launch, recorded with `enter_launch` (the first
/// `entered` of them, lists in order); each is left when this drops.
struct Launch<'a, B, M> {
    lists: &'a [&'a [&'a B]],
    raw: fn(&B) -> &Buffer<M>,
    donate: &'a [usize],
    entered: usize,
}

impl<B, M> Drop for Launch<'_, B, M> {
    fn drop(&mut self) {
        let mut left = self.entered;
        for list in self.lists {
            for (i, b) in list.iter().enumerate() {
                if left == 0 {
                    return;
                }
                if !self.donate.contains(&i) {
                    (self.raw)(b).leave_launch();
                    left -= 1;
                }
            }
        }
    }
}

/// Donated buffers marked deleted before the call, restored on drop unless cleared.
pub(super) struct Donation<'a, M> {
    pub(super) reserved: Vec<&'a Buffer<M>>,
}

impl<M> Donation<'_, M> {
    /// The plugin refused the call. A buffer it consumed before failing (XLA does so with
    /// an input its program aliases to an output) stays deleted; the others are restored
    /// when this drops, as if the call had not happened.
    pub(super) fn failed(&mut self) {
        self.reserved.retain(|b| !b.deleted_by_plugin());
    }
}

impl<M> Drop for Donation<'_, M> {
    fn drop(&mut self) {
        for b in &self.reserved {
            b.cancel_donation();
        }
    }
}
