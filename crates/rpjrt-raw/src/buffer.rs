//! The owning buffer handle: a `PJRT_Buffer` plus the state that makes reading its memory
//! in place sound (deleted / pinned), shared by cheap clones.

// C `int`/`size_t` fields are cast explicitly so the code stays right where they differ.
#![allow(clippy::unnecessary_cast)]

use std::ffi::c_void;
use std::mem::ManuallyDrop;
use std::ptr::{null_mut, NonNull};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use rpjrt_sys as sys;

use super::client::Client;
use super::device::{DeviceRef, MemoryRef};
use super::event::Event;
use super::util::array;
use super::{args_types, pjrt, Args};
use crate::error::{Error, Result};

args_types! {
    PJRT_Buffer_Destroy_Args => PJRT_Buffer_Destroy_Args_STRUCT_SIZE,
    PJRT_Buffer_OnDeviceSizeInBytes_Args => PJRT_Buffer_OnDeviceSizeInBytes_Args_STRUCT_SIZE,
    PJRT_Buffer_Device_Args => PJRT_Buffer_Device_Args_STRUCT_SIZE,
    PJRT_Buffer_Memory_Args => PJRT_Buffer_Memory_Args_STRUCT_SIZE,
    PJRT_Buffer_Delete_Args => PJRT_Buffer_Delete_Args_STRUCT_SIZE,
    PJRT_Buffer_IsDeleted_Args => PJRT_Buffer_IsDeleted_Args_STRUCT_SIZE,
    PJRT_Buffer_IsOnCpu_Args => PJRT_Buffer_IsOnCpu_Args_STRUCT_SIZE,
    PJRT_Buffer_ToHostBuffer_Args => PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE,
    PJRT_Buffer_ReadyEvent_Args => PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE,
    PJRT_Buffer_CopyToDevice_Args => PJRT_Buffer_CopyToDevice_Args_STRUCT_SIZE,
    PJRT_Buffer_CopyToMemory_Args => PJRT_Buffer_CopyToMemory_Args_STRUCT_SIZE,
    PJRT_Buffer_UnsafePointer_Args => PJRT_Buffer_UnsafePointer_Args_STRUCT_SIZE,
    PJRT_Buffer_GetMemoryLayout_Args => PJRT_Buffer_GetMemoryLayout_Args_STRUCT_SIZE,
    PJRT_Buffer_IncreaseExternalReferenceCount_Args => PJRT_Buffer_IncreaseExternalReferenceCount_Args_STRUCT_SIZE,
    PJRT_Buffer_DecreaseExternalReferenceCount_Args => PJRT_Buffer_DecreaseExternalReferenceCount_Args_STRUCT_SIZE,
    PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args => PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args_STRUCT_SIZE,
}

/// Host memory that a zero-copy buffer uses in place. The bytes must not change while the
/// owner lives (the buffer keeps it alive until the plugin is done with them).
pub trait HostMemory: Send + Sync + 'static {
    /// The bytes.
    fn host_bytes(&self) -> &[u8];

    /// Whether only rpjrt reaches the bytes (see `HostBytes::is_private`).
    fn is_private(&self) -> bool {
        false
    }
}

/// `state`: set once the buffer is deleted or donated (or being donated).
const DELETED: usize = 1;
/// `state`: one pin (a host view, a direct host read in progress).
const PIN: usize = 2;

/// Tri-state caches: not asked yet, no, yes.
const UNKNOWN: u8 = 0;
const NO: u8 = 1;
const YES: u8 = 2;

/// Why a buffer refused a state change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateError {
    /// Deleted or donated already.
    Deleted,
    /// This many pins (host views) exist.
    Pinned(usize),
    /// An execution is being launched with the buffer, and this thread (a plugin callback,
    /// perhaps of that very execution) cannot wait for it.
    Launching,
}

struct Shared<M> {
    client: Arc<Client>,
    ptr: NonNull<sys::PJRT_Buffer>,
    /// `DELETED` bit plus `PIN` times the number of live pins.
    state: AtomicUsize,
    /// Executions being launched with this buffer as an argument it does not donate, on
    /// any thread (see [`Buffer::enter_launch`]).
    launching: AtomicUsize,
    /// Cached `PJRT_Buffer_IsOnCpu`.
    on_cpu: AtomicU8,
    /// Cached: host-visible, dense row-major and exactly `direct_len` bytes.
    host_direct: AtomicU8,
    /// The length `host_direct` was established for.
    direct_len: AtomicUsize,
    /// The contents are known to be ready and their producer succeeded.
    ready_ok: AtomicBool,
    /// Devices besides its own whose queues produce the contents: for a copy of a buffer
    /// that was not known ready, the source's device and the source's own upstream.
    upstream: Option<Arc<[DeviceRef]>>,
    /// Filled from the host (an alias buffer, an asynchronous transfer's buffer), not by a
    /// device's queue of executions.
    host_filled: bool,
    /// Fires when the plugin no longer reads `owner`'s bytes.
    host_done: Option<Event>,
    /// Host memory the buffer uses in place (dropped after the buffer and `host_done`).
    owner: Option<Box<dyn HostMemory>>,
    /// Where this allocation goes back when the last handle drops (execution outputs). A
    /// spare keeps it, and its `client`, so that reuse touches no reference count.
    recycler: Option<Arc<Pool<M>>>,
    /// The C buffer was destroyed already and this allocation waits in a recycler.
    released: bool,
    meta: M,
}

/// For an execution launched while a custom-call handler runs on a plugin worker thread
/// somewhere: the devices whose queues produce those of `args` not known ready (their own,
/// and their upstream), which the outputs then wait for too. `None` otherwise (nothing is
/// looked at: one atomic load).
pub(crate) fn upstream_of<'a, M: 'a>(
    args: impl Iterator<Item = &'a Buffer<M>>,
) -> Option<Arc<[DeviceRef]>> {
    if !super::ffi::worker_handlers_running() {
        return None;
    }
    let mut v: Vec<DeviceRef> = Vec::new();
    let pending = |b: &Buffer<M>| {
        !b.0.ready_ok.load(Ordering::Acquire)
            && !b
                .ready_event_here()
                .and_then(|e| e.is_ready())
                .unwrap_or(false)
    };
    for b in args.filter(|b| pending(b)) {
        for d in b.wait_devices() {
            if !v.contains(&d) {
                v.push(d);
            }
        }
    }
    (!v.is_empty()).then(|| v.into())
}

/// Marks a slot of a closed pool: nothing may be put there any more. Never a real
/// allocation (`Arc::into_raw` points past the reference counts of a heap block).
fn closed_slot<M>() -> *mut Shared<M> {
    NonNull::dangling().as_ptr()
}

/// The spare allocations of one [`Recycler`]: a fixed row of slots, each empty (null), a
/// spare (`Arc::into_raw` of a released `Shared` that nothing else references) or closed.
/// Taking and giving back are one compare-and-swap each, with no lock: the steady loop of
/// one thread executing and dropping outputs touches no other shared counter.
struct Pool<M> {
    slots: Box<[AtomicPtr<Shared<M>>]>,
    /// Slots below this index may hold a spare (a hint, only ever raised; takers scan below
    /// it, so an executable whose outputs are all kept scans nothing).
    used: AtomicUsize,
}

impl<M> Pool<M> {
    /// Takes a spare, if there is one below the hint.
    fn take(&self) -> Option<Arc<Shared<M>>> {
        let used = self.used.load(Ordering::Relaxed).min(self.slots.len());
        for slot in &self.slots[..used] {
            let p = slot.load(Ordering::Relaxed);
            if p.is_null() || p == closed_slot() {
                continue;
            }
            if slot
                .compare_exchange(p, null_mut(), Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                // SAFETY: `p` came from `Arc::into_raw` in `give` and the slot held its only
                // reference, which this exchange moved to us.
                return Some(unsafe { Arc::from_raw(p) });
            }
        }
        None
    }

    /// Puts `spare` (released, with no other reference) into a free slot of its own pool (its
    /// `recycler`); when every slot is taken or the pool is closed, drops it, which destroys
    /// nothing (it was released) and may drop the pool (the spare kept it alive until then).
    fn give(spare: Arc<Shared<M>>) {
        let p = Arc::into_raw(spare) as *mut Shared<M>;
        // SAFETY: `p` is the live allocation just leaked above; it stays alive until it is
        // either placed in a slot or reclaimed below, after the last use of `pool`.
        let pool = unsafe { &*p }.recycler.as_deref();
        if let Some(pool) = pool {
            for (i, slot) in pool.slots.iter().enumerate() {
                if !slot.load(Ordering::Relaxed).is_null() {
                    continue;
                }
                if slot
                    .compare_exchange(null_mut(), p, Ordering::Release, Ordering::Relaxed)
                    .is_ok()
                {
                    if i >= pool.used.load(Ordering::Relaxed) {
                        pool.used.fetch_max(i + 1, Ordering::Relaxed);
                    }
                    return;
                }
            }
        }
        // SAFETY: `p` came from `Arc::into_raw` above and was placed nowhere.
        drop(unsafe { Arc::from_raw(p) });
    }

    /// Closes every slot and drops the spares they held.
    fn close(&self) {
        for slot in self.slots.iter() {
            let p = slot.swap(closed_slot(), Ordering::AcqRel);
            if !p.is_null() && p != closed_slot() {
                // SAFETY: a spare placed by `give`, whose only reference was the slot.
                drop(unsafe { Arc::from_raw(p) });
            }
        }
    }
}

/// Spare handle allocations of one producer (an executable), so that a steady loop of
/// executions allocates no handle and updates no reference count: an output whose last
/// handle drops destroys its C buffer and leaves its allocation here (up to a fixed number),
/// and the next output the producer wraps reuses it. No lock is taken, and nothing here
/// calls the plugin. Dropping the recycler drops its spares; outputs still alive then are
/// freed as usual when they go.
pub struct Recycler<M> {
    pool: Arc<Pool<M>>,
}

impl<M> Recycler<M> {
    /// A recycler that keeps at most `cap` spare allocations.
    pub fn new(cap: usize) -> Recycler<M> {
        Recycler {
            pool: Arc::new(Pool {
                slots: (0..cap).map(|_| AtomicPtr::new(null_mut())).collect(),
                used: AtomicUsize::new(0),
            }),
        }
    }

    /// A spare allocation to wrap the next output in, if one is free.
    pub(super) fn take(&self) -> Option<Spare<M>> {
        self.pool.take().map(Spare)
    }
}

impl<M> Drop for Recycler<M> {
    fn drop(&mut self) {
        // The spares reference the pool: closing breaks that cycle.
        self.pool.close();
    }
}

/// A spare allocation taken from a [`Recycler`], about to become an output's handle.
pub(super) struct Spare<M>(Arc<Shared<M>>);

impl<M> Spare<M> {
    /// The metadata it held: the caller rewrites it for the new output.
    pub(super) fn meta_mut(&mut self) -> &mut M {
        &mut unique(&mut self.0).meta
    }

    /// The handle of the output `ptr` of `client`, in this allocation.
    pub(super) fn into_buffer(
        mut self,
        client: &Arc<Client>,
        ptr: NonNull<sys::PJRT_Buffer>,
    ) -> Buffer<M> {
        let s = unique(&mut self.0);
        if !Arc::ptr_eq(&s.client, client) {
            // A recycler serves one producer of one client; never wrong all the same.
            s.client = Arc::clone(client);
        }
        s.ptr = ptr;
        *s.state.get_mut() = 0;
        *s.on_cpu.get_mut() = UNKNOWN;
        *s.host_direct.get_mut() = UNKNOWN;
        *s.direct_len.get_mut() = 0;
        *s.ready_ok.get_mut() = false;
        s.upstream = None;
        s.host_filled = false;
        s.released = false;
        Buffer(ManuallyDrop::new(self.0))
    }
}

/// The contents of a handle allocation that has no other reference.
///
/// Every caller holds the only strong reference: the allocation came out of a recycler
/// slot, or its strong count was seen to be one (with an acquire fence after). No `Weak`
/// of a `Shared` is ever made, so nothing can revive another reference meanwhile.
fn unique<M>(arc: &mut Arc<Shared<M>>) -> &mut Shared<M> {
    debug_assert_eq!(Arc::strong_count(arc), 1);
    // SAFETY: the only reference (see above), borrowed mutably for the result's lifetime;
    // the pointer comes from the Arc's own allocation. This spares `Arc::get_mut`'s atomic
    // update of the weak count, which guards against weak references that never exist here.
    unsafe { &mut *(Arc::as_ptr(arc) as *mut Shared<M>) }
}

// SAFETY: PJRT buffers are thread-safe by the C API's contract; the rest is atomics, an
// event (Send + Sync), `HostMemory` (Send + Sync), the pool (atomic slots of such handles)
// and `M`, required to be Send + Sync.
unsafe impl<M: Send + Sync> Send for Shared<M> {}
// SAFETY: as for Send.
unsafe impl<M: Send + Sync> Sync for Shared<M> {}

#[cold]
fn no_ready_event() -> Error {
    Error::invalid("PJRT_Buffer_ReadyEvent returned no event")
}

impl<M> Shared<M> {
    /// Destroys the C buffer now, for an allocation about to be kept for reuse (only for
    /// buffers without host memory of their own; never inside a plugin callback).
    fn release(&mut self) {
        debug_assert!(self.host_done.is_none() && self.owner.is_none());
        self.released = true;
        if super::callback::leaking() {
            return;
        }
        let mut a = sys::PJRT_Buffer_Destroy_Args::new();
        a.buffer = self.ptr.as_ptr();
        // SAFETY: live buffer (not released yet), destroyed exactly once: the caller holds
        // the only handle, and `released` keeps `Drop` from destroying it again.
        let _ = unsafe { pjrt!(self.client.api(), PJRT_Buffer_Destroy, &mut a) };
    }
}

impl<M> Drop for Shared<M> {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let client = Arc::clone(&self.client);
        let ptr = super::client::SendPtr(self.ptr);
        let host_done = self.host_done.take();
        let owner = self.owner.take();
        super::callback::destroy_outside_callbacks(move || {
            let ptr = ptr;
            let mut a = sys::PJRT_Buffer_Destroy_Args::new();
            a.buffer = ptr.0.as_ptr();
            // SAFETY: live buffer, destroyed exactly once (the last clone is gone, and every
            // pin and external reference holds a clone); its client is alive (`client`).
            let _ = unsafe { pjrt!(client.api(), PJRT_Buffer_Destroy, &mut a) };
            if let Some(done) = host_done {
                // The plugin may read the owner's bytes until this fires; for zero-copy
                // buffers it fires once the buffer is gone, which it now is.
                let _ = done.wait();
            }
            // `owner` drops after this, once the plugin no longer uses its memory.
            drop(owner);
            drop(client);
        });
    }
}

/// An owned `PJRT_Buffer` (destroyed when the last clone goes) with metadata `M` chosen by
/// the safe layer. Cheap to clone.
pub struct Buffer<M>(ManuallyDrop<Arc<Shared<M>>>);

impl<M> Drop for Buffer<M> {
    fn drop(&mut self) {
        // SAFETY: taken exactly once, here; `self.0` is not used afterwards.
        let mut arc = unsafe { ManuallyDrop::take(&mut self.0) };
        if arc.recycler.is_none() || Arc::strong_count(&arc) != 1 {
            return;
        }
        // Pairs with the release decrements of the other handles that went before.
        std::sync::atomic::fence(Ordering::Acquire);
        let shared = unique(&mut arc);
        if shared.released || shared.host_done.is_some() || shared.owner.is_some() {
            return;
        }
        // Inside a plugin callback the destruction goes to the reaper thread instead
        // (`Shared`'s own drop).
        if super::callback::in_callback() {
            return;
        }
        shared.release();
        Pool::give(arc);
    }
}

impl<M> Clone for Buffer<M> {
    fn clone(&self) -> Self {
        Buffer(ManuallyDrop::new(Arc::clone(&self.0)))
    }
}

impl<M> Buffer<M> {
    pub(super) fn new(
        client: &Arc<Client>,
        ptr: NonNull<sys::PJRT_Buffer>,
        meta: M,
        host_done: Option<Event>,
        owner: Option<Box<dyn HostMemory>>,
    ) -> Buffer<M> {
        Self::with_recycler(client, ptr, meta, host_done, owner, None)
    }

    fn with_recycler(
        client: &Arc<Client>,
        ptr: NonNull<sys::PJRT_Buffer>,
        meta: M,
        host_done: Option<Event>,
        owner: Option<Box<dyn HostMemory>>,
        recycler: Option<Arc<Pool<M>>>,
    ) -> Buffer<M> {
        Buffer(ManuallyDrop::new(Arc::new(Shared {
            client: Arc::clone(client),
            ptr,
            state: AtomicUsize::new(0),
            launching: AtomicUsize::new(0),
            on_cpu: AtomicU8::new(UNKNOWN),
            host_direct: AtomicU8::new(UNKNOWN),
            direct_len: AtomicUsize::new(0),
            ready_ok: AtomicBool::new(false),
            upstream: None,
            host_filled: false,
            host_done,
            owner,
            recycler,
            released: false,
            meta,
        })))
    }

    /// Wraps an output of a producer in a fresh allocation that goes to `recycler` when its
    /// last handle drops (see [`Recycler::take`] for reusing one).
    pub(super) fn recyclable(
        recycler: &Recycler<M>,
        client: &Arc<Client>,
        ptr: NonNull<sys::PJRT_Buffer>,
        meta: M,
    ) -> Buffer<M> {
        let pool = Some(Arc::clone(&recycler.pool));
        Self::with_recycler(client, ptr, meta, None, None, pool)
    }

    /// The plugin's handle as a number: the buffer's identity while it lives.
    pub fn handle_id(&self) -> usize {
        self.ptr() as usize
    }

    pub(super) fn ptr(&self) -> *mut sys::PJRT_Buffer {
        self.0.ptr.as_ptr()
    }

    pub(super) fn client(&self) -> &Arc<Client> {
        &self.0.client
    }

    /// The safe layer's metadata.
    #[inline]
    pub fn meta(&self) -> &M {
        &self.0.meta
    }

    /// Whether both are clones of one buffer.
    pub fn same(&self, other: &Buffer<M>) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Whether the buffer uses host memory kept alive by an owner (zero copy).
    pub fn borrows_host(&self) -> bool {
        self.0.owner.is_some()
    }

    /// Whether the host memory the buffer uses in place is also the caller's (a zero-copy
    /// put, a DLPack import), not only rpjrt's own staging memory.
    pub fn borrows_callers_memory(&self) -> bool {
        self.0.owner.as_ref().is_some_and(|o| !o.is_private())
    }

    /// Whether the buffer belongs to `client`.
    pub fn belongs_to(&self, client: &Arc<Client>) -> bool {
        Arc::ptr_eq(&self.0.client, client)
    }

    /// Whether `delete()` was called or an execution consumed the buffer.
    #[inline]
    pub fn is_deleted(&self) -> bool {
        self.0.state.load(Ordering::Acquire) & DELETED != 0
    }

    /// Sets the deleted bit unless deleted or pinned already.
    fn mark_deleted(&self) -> std::result::Result<(), StateError> {
        let state = &self.0.state;
        let mut cur = state.load(Ordering::Acquire);
        loop {
            if cur & DELETED != 0 {
                return Err(StateError::Deleted);
            }
            if cur >= PIN {
                return Err(StateError::Pinned(cur / PIN));
            }
            match state.compare_exchange_weak(
                cur,
                cur | DELETED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
                Err(now) => cur = now,
            }
        }
    }

    /// `PJRT_Buffer_Delete`: frees the memory now (inside a plugin callback: marks it
    /// deleted now and frees it on the reaper thread). `Ok(false)` when it was deleted (or
    /// donated) already; `StateError::Pinned` while host views exist.
    pub fn delete(&self) -> Result<std::result::Result<bool, StateError>>
    where
        M: Send + Sync + 'static,
    {
        match self.mark_deleted() {
            Ok(()) => {}
            Err(StateError::Deleted) => return Ok(Ok(false)),
            Err(e) => return Ok(Err(e)),
        }
        if super::callback::in_callback() {
            // A plugin callback (a custom-call handler) may be part of an execution that
            // reads this buffer, and a plugin's delete can wait for that execution: the
            // buffer is refused from now on, and its memory is freed on the reaper thread.
            let keep = Buffer(ManuallyDrop::new(Arc::clone(&self.0)));
            super::callback::destroy_outside_callbacks(move || {
                let _ = keep.delete_now();
            });
            return Ok(Ok(true));
        }
        self.delete_now()?;
        Ok(Ok(true))
    }

    /// The plugin's delete of a buffer already marked deleted.
    fn delete_now(&self) -> Result<()> {
        let mut a = sys::PJRT_Buffer_Delete_Args::new();
        a.buffer = self.ptr();
        // SAFETY: live buffer (this handle keeps it), marked deleted and not pinned (checked
        // atomically by the caller), so nobody reads its memory in place.
        unsafe { pjrt!(self.0.client.api(), PJRT_Buffer_Delete, &mut a) }?;
        // Host memory the plugin reads in place stays in use by executions and copies
        // already queued on the buffer: the delete returns once the plugin is done with it,
        // so that the caller may write its array again (as the buffer's release does).
        if let (Some(done), Some(_)) = (&self.0.host_done, &self.0.owner) {
            let _ = done.wait();
        }
        Ok(())
    }

    /// Marks the buffer deleted ahead of an execution that will consume it; undone by
    /// [`Buffer::cancel_donation`] if the execution does not happen.
    ///
    /// An execution that another thread is launching with this buffer (not donated) is
    /// waited for first: the plugins deadlock when a donation and another launch take the
    /// same buffer at once. Inside a plugin callback that launch may be the one running
    /// the callback, so there the donation is refused instead (`StateError::Launching`).
    pub fn reserve_donation(&self) -> std::result::Result<(), StateError> {
        self.mark_deleted()?;
        let mut spins = 0u32;
        while self.0.launching.load(Ordering::SeqCst) > 0 {
            if super::callback::in_callback() {
                self.cancel_donation();
                return Err(StateError::Launching);
            }
            spins += 1;
            if spins < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
        Ok(())
    }

    /// Records that an execution is being launched with this buffer as an argument it
    /// does not donate; `false` (nothing recorded) when the buffer is deleted or reserved
    /// for a donation. [`Buffer::reserve_donation`] waits until every launch recorded here
    /// has called [`Buffer::leave_launch`].
    #[inline]
    pub fn enter_launch(&self) -> bool {
        self.0.launching.fetch_add(1, Ordering::SeqCst);
        if self.0.state.load(Ordering::SeqCst) & DELETED != 0 {
            self.0.launching.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Ends what [`Buffer::enter_launch`] recorded (the plugin's launch call returned).
    #[inline]
    pub fn leave_launch(&self) {
        self.0.launching.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether the plugin itself holds this buffer deleted (`PJRT_Buffer_IsDeleted`);
    /// `false` when it cannot say. After a failed execution that donated the buffer, this
    /// tells a buffer the plugin consumed before failing from one it left alone.
    pub fn deleted_by_plugin(&self) -> bool {
        let mut a = sys::PJRT_Buffer_IsDeleted_Args::new();
        a.buffer = self.ptr();
        // SAFETY: live buffer (this handle keeps it); the entry only reads its state.
        let r = unsafe { pjrt!(self.0.client.api(), PJRT_Buffer_IsDeleted, &mut a) };
        r.is_ok() && a.is_deleted
    }

    /// Undoes [`Buffer::reserve_donation`].
    pub fn cancel_donation(&self) {
        self.0.state.fetch_and(!DELETED, Ordering::AcqRel);
    }

    /// Takes a pin: the buffer cannot be deleted or donated until it is released.
    fn pin(&self) -> std::result::Result<(), StateError> {
        let state = &self.0.state;
        let mut cur = state.load(Ordering::Acquire);
        loop {
            if cur & DELETED != 0 {
                return Err(StateError::Deleted);
            }
            let Some(next) = cur.checked_add(PIN) else {
                return Err(StateError::Pinned(cur / PIN));
            };
            match state.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(()),
                Err(now) => cur = now,
            }
        }
    }

    fn unpin(&self) {
        self.0.state.fetch_sub(PIN, Ordering::AcqRel);
    }

    /// `PJRT_Buffer_OnDeviceSizeInBytes`.
    pub fn on_device_size(&self) -> Result<usize> {
        let mut a = sys::PJRT_Buffer_OnDeviceSizeInBytes_Args::new();
        a.buffer = self.ptr();
        // SAFETY: live buffer (the plugin reports deleted ones as errors).
        unsafe { pjrt!(self.0.client.api(), PJRT_Buffer_OnDeviceSizeInBytes, &mut a) }?;
        Ok(a.on_device_size_in_bytes)
    }

    /// `PJRT_Buffer_Device`.
    pub fn device(&self) -> Result<DeviceRef> {
        let mut a = sys::PJRT_Buffer_Device_Args::new();
        a.buffer = self.ptr();
        // SAFETY: live buffer.
        unsafe { pjrt!(self.0.client.api(), PJRT_Buffer_Device, &mut a) }?;
        DeviceRef::new(&self.0.client, a.device)
            .ok_or_else(|| Error::invalid("PJRT_Buffer_Device returned no device"))
    }

    /// `PJRT_Buffer_Memory`.
    pub fn memory(&self) -> Result<MemoryRef> {
        let mut a = sys::PJRT_Buffer_Memory_Args::new();
        a.buffer = self.ptr();
        // SAFETY: live buffer.
        unsafe { pjrt!(self.0.client.api(), PJRT_Buffer_Memory, &mut a) }?;
        MemoryRef::new(&self.0.client, a.memory)
            .ok_or_else(|| Error::invalid("PJRT_Buffer_Memory returned no memory"))
    }

    /// `PJRT_Buffer_IsOnCpu`, asked once and remembered.
    pub fn is_on_cpu(&self) -> Result<bool> {
        match self.0.on_cpu.load(Ordering::Relaxed) {
            YES => return Ok(true),
            NO => return Ok(false),
            _ => {}
        }
        let mut a = sys::PJRT_Buffer_IsOnCpu_Args::new();
        a.buffer = self.ptr();
        // SAFETY: live buffer.
        unsafe { pjrt!(self.0.client.api(), PJRT_Buffer_IsOnCpu, &mut a) }?;
        let v = if a.is_on_cpu { YES } else { NO };
        self.0.on_cpu.store(v, Ordering::Relaxed);
        Ok(a.is_on_cpu)
    }

    /// `PJRT_Buffer_UnsafePointer`: the address of the buffer's storage.
    pub fn unsafe_pointer(&self) -> Result<usize> {
        let mut a = sys::PJRT_Buffer_UnsafePointer_Args::new();
        a.buffer = self.ptr();
        // SAFETY: live buffer.
        unsafe { pjrt!(self.0.client.api(), PJRT_Buffer_UnsafePointer, &mut a) }?;
        Ok(a.buffer_pointer as usize)
    }

    /// `PJRT_Buffer_OpaqueDeviceMemoryDataPointer`.
    fn device_pointer(&self) -> Result<usize> {
        let mut a = sys::PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args::new();
        a.buffer = self.ptr();
        // SAFETY: live buffer.
        unsafe {
            pjrt!(
                self.0.client.api(),
                PJRT_Buffer_OpaqueDeviceMemoryDataPointer,
                &mut a
            )
        }?;
        Ok(a.device_memory_ptr as usize)
    }

    /// The buffer's layout: `Some(minor_to_major)` and the tile count when tiled.
    fn tiled_layout(&self) -> Result<Option<(Vec<i64>, usize)>> {
        let mut a = sys::PJRT_Buffer_GetMemoryLayout_Args::new();
        a.buffer = self.ptr();
        // SAFETY: live buffer; the layout points into storage the buffer owns, read below
        // while it is alive.
        unsafe { pjrt!(self.0.client.api(), PJRT_Buffer_GetMemoryLayout, &mut a) }?;
        if a.layout.r#type != sys::PJRT_Buffer_MemoryLayout_Type_Tiled {
            return Ok(None);
        }
        // SAFETY: `type` says the tiled member is live.
        let tiled = unsafe { a.layout.layout.tiled };
        Ok(Some((
            array(tiled.minor_to_major, tiled.minor_to_major_size),
            tiled.num_tiles as usize,
        )))
    }

    /// Minor-to-major order of the buffer's layout, where the plugin reports a tiled one.
    pub fn layout(&self) -> Result<Option<Vec<i64>>> {
        Ok(self.tiled_layout()?.map(|(m2m, _)| m2m))
    }

    /// Whether the layout is dense row-major (`[rank-1, ..., 0]`, no tiles).
    fn is_row_major(&self) -> Result<bool> {
        Ok(match self.tiled_layout()? {
            Some((m2m, 0)) => {
                let n = m2m.len() as i64;
                m2m.iter().enumerate().all(|(i, &d)| d == n - 1 - i as i64)
            }
            _ => false,
        })
    }

    /// `PJRT_Buffer_ReadyEvent`.
    pub fn ready_event(&self) -> Result<Event> {
        let ev = self.ready_event_ptr()?;
        Event::new(&self.0.client, ev).ok_or_else(no_ready_event)
    }

    /// The ready event for a wait or check inside one call (borrows the client).
    fn ready_event_here(&self) -> Result<Event<&Client>> {
        let ev = self.ready_event_ptr()?;
        Event::borrowing(&self.0.client, ev).ok_or_else(no_ready_event)
    }

    /// `PJRT_Buffer_ReadyEvent`: a new event the caller must own.
    fn ready_event_ptr(&self) -> Result<*mut sys::PJRT_Event> {
        let mut a = sys::PJRT_Buffer_ReadyEvent_Args::new();
        a.buffer = self.ptr();
        // SAFETY: live buffer.
        unsafe { pjrt!(self.0.client.api(), PJRT_Buffer_ReadyEvent, &mut a) }?;
        Ok(a.event)
    }

    /// Blocks until the contents are ready; remembers success, so later waits are free.
    pub fn wait_ready(&self) -> Result<()> {
        if self.0.ready_ok.load(Ordering::Acquire) {
            return Ok(());
        }
        let _waiting = self.refuse_wait_in_worker_handler()?;
        self.ready_event_here()?.wait()?;
        self.0.ready_ok.store(true, Ordering::Release);
        Ok(())
    }

    /// Polls the contents' readiness for up to the wait poll time (`raw::event::spin_for`:
    /// a check at once, then checks between yields); whether they became ready (also when
    /// their producer failed). Success is remembered, so a wait afterwards is free.
    pub fn poll_ready(&self) -> Result<bool> {
        if self.0.ready_ok.load(Ordering::Acquire) {
            return Ok(true);
        }
        let _waiting = self.refuse_wait_in_worker_handler()?;
        let budget = std::time::Duration::from_nanos(super::event::spin_nanos());
        if budget.is_zero() {
            return Ok(false);
        }
        let ev = self.ready_event_here()?;
        let ready = super::event::spin_for(budget, || ev.is_ready().unwrap_or(true));
        if ready && ev.status().is_ok() {
            self.0.ready_ok.store(true, Ordering::Release);
        }
        Ok(ready)
    }

    /// Refuses (instead of waiting for ever) a wait from a custom-call handler that runs on
    /// a plugin worker thread for a buffer that is not ready on the device of the handler's
    /// own execution (`raw::ffi::check_worker_wait`). One atomic load while no such
    /// handler runs anywhere.
    pub fn refuse_wait_in_worker_handler(&self) -> Result<super::ffi::WorkerWait> {
        if !super::ffi::worker_handlers_running() || self.0.ready_ok.load(Ordering::Acquire) {
            return Ok(super::ffi::WorkerWait::none());
        }
        super::ffi::check_worker_wait(
            &self.0.client,
            || self.wait_devices(),
            || {
                self.ready_event_here()
                    .and_then(|e| e.is_ready())
                    .unwrap_or(true)
            },
        )
    }

    /// Whether the plugin may hold no memory for the contents yet, or ever: a buffer the
    /// host fills (an alias buffer) not seen ready and successful, polled once more here. The
    /// CPU plugins abort copying such a buffer into a non-donated aliased parameter.
    pub fn may_lack_memory(&self) -> bool {
        self.0.host_filled && !self.is_ready_cached() && {
            let _ = self.is_ready();
            !self.is_ready_cached()
        }
    }

    /// Marks a buffer just made (no other handle yet) as filled from the host (see
    /// [`Buffer::wait_devices`]).
    pub(crate) fn mark_host_filled(&mut self) {
        unique(&mut self.0).host_filled = true;
    }

    /// Records, on an execution's output just made (no other handle yet), the devices
    /// besides its own whose queues produce its inputs (see [`upstream_of`]).
    pub(crate) fn set_upstream(&mut self, upstream: &Arc<[DeviceRef]>) {
        unique(&mut self.0).upstream = Some(Arc::clone(upstream));
    }

    /// Records that the contents are ready and their producer succeeded, for a caller that
    /// saw the execution that produced them complete without error (its completion event),
    /// so that later waits are free.
    pub fn mark_ready(&self) {
        self.0.ready_ok.store(true, Ordering::Release);
    }

    /// Whether an earlier wait or readiness check saw the contents ready and their producer
    /// succeeded (no plugin call).
    pub fn is_ready_cached(&self) -> bool {
        self.0.ready_ok.load(Ordering::Acquire)
    }

    /// Whether the contents are ready (also when their producer failed), without blocking.
    pub fn is_ready(&self) -> Result<bool> {
        if self.0.ready_ok.load(Ordering::Acquire) {
            return Ok(true);
        }
        let ev = self.ready_event_here()?;
        let ready = ev.is_ready()?;
        if ready && ev.status().is_ok() {
            self.0.ready_ok.store(true, Ordering::Release);
        }
        Ok(ready)
    }

    /// `PJRT_Buffer_CopyToDevice`.
    pub fn copy_to_device<N>(&self, device: DeviceRef, meta: N) -> Result<Buffer<N>> {
        if !device.belongs_to(&self.0.client) {
            return Err(Error::invalid("the device belongs to another client"));
        }
        let mut a = sys::PJRT_Buffer_CopyToDevice_Args::new();
        a.buffer = self.ptr();
        a.dst_device = device.ptr();
        // SAFETY: live buffer and a device of the same client.
        unsafe { pjrt!(self.0.client.api(), PJRT_Buffer_CopyToDevice, &mut a) }?;
        self.wrap_copy(a.dst_buffer, meta)
    }

    /// `PJRT_Buffer_CopyToMemory`.
    pub fn copy_to_memory<N>(&self, memory: MemoryRef, meta: N) -> Result<Buffer<N>> {
        if !memory.belongs_to(&self.0.client) {
            return Err(Error::invalid("the memory belongs to another client"));
        }
        let mut a = sys::PJRT_Buffer_CopyToMemory_Args::new();
        a.buffer = self.ptr();
        a.dst_memory = memory.ptr();
        // SAFETY: live buffer and a memory of the same client.
        unsafe { pjrt!(self.0.client.api(), PJRT_Buffer_CopyToMemory, &mut a) }?;
        self.wrap_copy(a.dst_buffer, meta)
    }

    fn wrap_copy<N>(&self, ptr: *mut sys::PJRT_Buffer, meta: N) -> Result<Buffer<N>> {
        let ptr = NonNull::new(ptr).ok_or_else(|| Error::invalid("the copy returned no buffer"))?;
        let mut copy = Buffer::new(&self.0.client, ptr, meta, None, None);
        // A copy of contents still being produced is ready only after its source: a wait for
        // it from a worker-thread handler blocks on the source's device too.
        if !self.0.ready_ok.load(Ordering::Acquire) {
            let mut devices = self.0.upstream.as_deref().unwrap_or_default().to_vec();
            if let Ok(d) = self.device() {
                if !devices.contains(&d) {
                    devices.push(d);
                }
            }
            if !devices.is_empty() {
                unique(&mut copy.0).upstream = Some(devices.into());
            }
        }
        Ok(copy)
    }

    /// The devices whose queues produce this buffer's contents: its own, then those of the
    /// sources it was copied (or computed) from while they were not known ready; none for a
    /// buffer the host fills (an alias buffer, an asynchronous transfer's).
    pub fn wait_devices(&self) -> Vec<DeviceRef> {
        if self.0.host_filled {
            return Vec::new();
        }
        let mut v: Vec<DeviceRef> = self.device().into_iter().collect();
        v.extend(self.0.upstream.iter().flat_map(|u| u.iter().copied()));
        v
    }

    /// `PJRT_Buffer_ToHostBuffer` into `dst` (which must be exactly the size the plugin
    /// asks for, checked first), waiting for the copy to finish.
    pub fn to_host(&self, dst: &mut [u8]) -> Result<()> {
        let _waiting = self.refuse_wait_in_worker_handler()?;
        let api = self.0.client.api();
        let mut q = sys::PJRT_Buffer_ToHostBuffer_Args::new();
        q.src = self.ptr();
        q.dst = null_mut();
        // SAFETY: a null destination asks only for the size.
        unsafe { pjrt!(api, PJRT_Buffer_ToHostBuffer, &mut q) }?;
        drop(Event::new(&self.0.client, q.event));
        if q.dst_size != dst.len() {
            return Err(Error::invalid(format!(
                "destination has {} bytes, but the plugin writes {}",
                dst.len(),
                q.dst_size
            )));
        }
        let mut a = sys::PJRT_Buffer_ToHostBuffer_Args::new();
        a.src = self.ptr();
        a.dst = dst.as_mut_ptr().cast::<c_void>();
        a.dst_size = dst.len();
        // SAFETY: `dst` has exactly the size the plugin writes and stays exclusively borrowed
        // until the copy's event has completed, waited for below.
        unsafe { pjrt!(api, PJRT_Buffer_ToHostBuffer, &mut a) }?;
        match Event::new(&self.0.client, a.event) {
            Some(ev) => ev.wait(),
            None => Ok(()),
        }
    }

    /// Whether the buffer's memory can be read in place as `len` dense row-major bytes:
    /// on the CPU, dense row-major, exactly `len` bytes on the device. Asked once.
    pub fn has_direct_host(&self, len: usize) -> bool {
        match self.0.host_direct.load(Ordering::Acquire) {
            YES => self.0.direct_len.load(Ordering::Relaxed) == len,
            NO => false,
            _ => {
                let ok = len > 0
                    && self.is_on_cpu().unwrap_or(false)
                    && self.is_row_major().unwrap_or(false)
                    && self.on_device_size().is_ok_and(|n| n == len);
                if ok {
                    self.0.direct_len.store(len, Ordering::Relaxed);
                }
                let v = if ok { YES } else { NO };
                self.0.host_direct.store(v, Ordering::Release);
                ok
            }
        }
    }

    /// The buffer's memory as `len` host bytes, read in place, when [`has_direct_host`]
    /// holds: pins the buffer (no delete or donation while the slice lives) and waits until
    /// its contents are ready. `Ok(None)` when it cannot be read in place; `Err` for a
    /// deleted buffer or a failed producer.
    ///
    /// [`has_direct_host`]: Buffer::has_direct_host
    pub fn pinned_host(&self, len: usize) -> Result<Result2<PinnedSlice<M>>> {
        if let Err(e) = self.pin() {
            return Ok(Err(e));
        }
        // Unpins on every early return.
        let pinned = PinnedSlice {
            buffer: self.clone(),
            addr: 0,
            len: 0,
        };
        if !self.has_direct_host(len) {
            return Ok(Ok(None));
        }
        self.wait_ready()?;
        let mut pinned = pinned;
        match self.unsafe_pointer() {
            Ok(addr) if addr != 0 => {
                pinned.addr = addr;
                pinned.len = len;
                Ok(Ok(Some(pinned)))
            }
            _ => {
                // No address after all (e.g. the plugin lacks the entry): copy from now on.
                self.0.host_direct.store(NO, Ordering::Relaxed);
                Ok(Ok(None))
            }
        }
    }

    /// Counts an external reference to the buffer's memory and returns its address; the
    /// memory stays allocated and in place while the returned guard lives.
    ///
    /// The reference also pins the buffer: while it lives, the buffer cannot be deleted or
    /// donated (the foreign owner reads its memory). `Ok(Err)` when the buffer's state
    /// refuses (deleted).
    pub fn external_ref(&self) -> Result<std::result::Result<ExternalRef<M>, StateError>> {
        if let Err(e) = self.pin() {
            return Ok(Err(e));
        }
        let pin = PinnedSlice {
            buffer: self.clone(),
            addr: 0,
            len: 0,
        };
        let api = self.0.client.api();
        let mut a = sys::PJRT_Buffer_IncreaseExternalReferenceCount_Args::new();
        a.buffer = self.ptr();
        let counting = external_counts();
        // SAFETY: live buffer.
        unsafe { pjrt!(api, PJRT_Buffer_IncreaseExternalReferenceCount, &mut a) }?;
        drop(counting);
        // From here the guard owns the count and gives it back on drop.
        let mut guard = ExternalRef {
            buffer: self.clone(),
            addr: 0,
            _pin: pin,
        };
        guard.addr = match self.device_pointer() {
            Ok(p) => p,
            Err(_) => self.unsafe_pointer()?,
        };
        Ok(Ok(guard))
    }
}

/// `Ok(Some)`, `Ok(None)` when not applicable, `Err` when the buffer's state refused.
pub type Result2<T> = std::result::Result<Option<T>, StateError>;

/// Host-visible memory of a buffer, read in place while a pin is held (released on drop).
pub struct PinnedSlice<M> {
    buffer: Buffer<M>,
    addr: usize,
    len: usize,
}

impl<M> PinnedSlice<M> {
    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: made by `Buffer::pinned_host` only after checking that the buffer is
        // host-visible, dense row-major and `len` bytes on the device, and that its contents
        // are ready; the pin stops deletion and donation (the only ways the memory is freed
        // or rewritten while the buffer lives) and the clone keeps the buffer alive.
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }

    /// The address of the first byte.
    pub fn addr(&self) -> usize {
        self.addr
    }
}

impl<M> Drop for PinnedSlice<M> {
    fn drop(&mut self) {
        self.buffer.unpin();
    }
}

/// Held around every change of a buffer's external reference count. The CPU plugins keep
/// a buffer's external references in a list without a lock of their own: two threads
/// counting on one buffer at once (two DLPack exports) lost an update, and the plugin
/// aborted when it destroyed the buffer with a reference still counted. These calls call
/// nothing back and take no time, so one lock for the process costs nothing measurable.
fn external_counts() -> std::sync::MutexGuard<'static, ()> {
    static COUNTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    COUNTING.lock().unwrap_or_else(|p| p.into_inner())
}

/// A counted external reference to a buffer's memory, given back on drop, with a pin
/// (released after the count).
pub struct ExternalRef<M> {
    buffer: Buffer<M>,
    addr: usize,
    _pin: PinnedSlice<M>,
}

impl<M> ExternalRef<M> {
    /// The address of the data on the device (a host address on CPU plugins).
    pub fn addr(&self) -> usize {
        self.addr
    }
}

impl<M> Drop for ExternalRef<M> {
    fn drop(&mut self) {
        let mut a = sys::PJRT_Buffer_DecreaseExternalReferenceCount_Args::new();
        a.buffer = self.buffer.ptr();
        let _counting = external_counts();
        // SAFETY: the buffer is alive (our clone) and we raised its count once, in
        // `external_ref`; this gives that one count back.
        let _ = unsafe {
            pjrt!(
                self.buffer.client().api(),
                PJRT_Buffer_DecreaseExternalReferenceCount,
                &mut a
            )
        };
    }
}
