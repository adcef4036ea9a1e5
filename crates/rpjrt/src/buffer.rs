//! Device buffers.

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::client::{ClientCore, Device, Memory};
use crate::dtype::{element_count, pack_sub_byte, ElementType, NativeType};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::inline::Inline;
use crate::raw::calls::{self, BufferPtr, EventPtr, HostSlice};
use crate::raw::event as rev;

/// Shapes of up to this rank are stored inline in a `Buffer` (no allocation).
const INLINE_RANK: usize = 6;

/// `Buffer::state`: set once the buffer is deleted or donated (or being donated).
const DELETED: usize = 1;
/// `Buffer::state`: one pin (a host view or a direct host read in progress).
const PIN: usize = 2;

/// `Buffer::is_on_cpu` / `Buffer::host_direct` caches: not asked yet, no, yes.
const UNKNOWN: u8 = 0;
const NO: u8 = 1;
const YES: u8 = 2;

pub(crate) use crate::host::HostBytes;

/// An array in a device's memory.
///
/// Dropping a buffer frees it. `delete()` frees the memory early and reports errors; a
/// deleted (or donated) buffer refuses further use with a clear error.
pub struct Buffer {
    pub(crate) core: Arc<ClientCore>,
    pub(crate) ptr: BufferPtr,
    /// `DELETED` bit plus `PIN` times the number of live pins.
    state: AtomicUsize,
    element_type: ElementType,
    dims: Inline<i64, INLINE_RANK>,
    owner: Option<Arc<dyn HostBytes>>,
    host_done: Mutex<Option<EventPtr>>,
    /// Cached `PJRT_Buffer_IsOnCpu`.
    on_cpu: AtomicU8,
    /// Cached: host-visible and dense row-major, so readable in place.
    host_direct: AtomicU8,
    /// Set once the contents are known to be ready and the producer succeeded; a buffer's
    /// contents never change afterwards, so later waits need no call into the plugin.
    ready_ok: AtomicBool,
}

impl Buffer {
    pub(crate) fn from_raw(
        core: &Arc<ClientCore>,
        ptr: BufferPtr,
        element_type: ElementType,
        dims: impl AsRef<[i64]>,
        owner: Option<Arc<dyn HostBytes>>,
    ) -> Buffer {
        Buffer {
            core: Arc::clone(core),
            ptr,
            state: AtomicUsize::new(0),
            element_type,
            dims: Inline::from_slice(dims.as_ref()),
            owner,
            host_done: Mutex::new(None),
            on_cpu: AtomicU8::new(UNKNOWN),
            host_direct: AtomicU8::new(UNKNOWN),
            ready_ok: AtomicBool::new(false),
        }
    }

    pub(crate) fn set_host_done(&self, ev: EventPtr) {
        *self.host_done.lock().unwrap_or_else(|p| p.into_inner()) = Some(ev);
    }

    /// Errors if the client was closed or the buffer deleted.
    #[inline]
    pub(crate) fn check(&self) -> Result<()> {
        self.core.check("buffer")?;
        if self.state.load(Ordering::Acquire) & DELETED != 0 {
            return Err(self.deleted_error());
        }
        Ok(())
    }

    fn deleted_error(&self) -> Error {
        Error::Deleted(format!(
            "buffer {}{:?} was deleted or donated and cannot be used",
            self.element_type, &*self.dims
        ))
    }

    fn pinned_error(&self, pins: usize, what: &str) -> Error {
        Error::invalid(format!(
            "buffer {}{:?} cannot be {what} while {pins} host view(s) of it exist",
            self.element_type, &*self.dims
        ))
    }

    /// Marks the buffer deleted ahead of an execution that will consume it. Fails if it is
    /// deleted already or pinned by a host view (whose memory the execution could reuse).
    /// Undo with [`Buffer::cancel_donation`] if the execution does not happen.
    pub(crate) fn reserve_donation(&self) -> Result<()> {
        let mut cur = self.state.load(Ordering::Acquire);
        loop {
            if cur & DELETED != 0 {
                return Err(self.deleted_error());
            }
            if cur >= PIN {
                return Err(self.pinned_error(cur / PIN, "donated"));
            }
            match self.state.compare_exchange_weak(
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

    /// Undoes [`Buffer::reserve_donation`] after a failed execution.
    pub(crate) fn cancel_donation(&self) {
        self.state.fetch_and(!DELETED, Ordering::AcqRel);
    }

    /// Takes a pin: the buffer cannot be deleted or donated until [`Buffer::unpin`].
    fn pin(&self) -> Result<()> {
        self.core.check("buffer")?;
        let mut cur = self.state.load(Ordering::Acquire);
        loop {
            if cur & DELETED != 0 {
                return Err(self.deleted_error());
            }
            let next = cur
                .checked_add(PIN)
                .ok_or_else(|| Error::invalid("too many host views of one buffer"))?;
            match self
                .state
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(()),
                Err(now) => cur = now,
            }
        }
    }

    fn unpin(&self) {
        self.state.fetch_sub(PIN, Ordering::AcqRel);
    }

    /// The buffer's host-visible memory as a slice, if it can be read in place: the buffer
    /// is on the CPU, has a dense row-major layout of a whole-byte type and occupies exactly
    /// its host size. Waits until the contents are ready. The caller holds a pin.
    fn direct_slice(&self) -> Result<Option<HostSlice>> {
        let len = self.host_size();
        match self.host_direct.load(Ordering::Relaxed) {
            NO => return Ok(None),
            YES => {}
            _ => {
                let ok = len > 0 && self.direct_candidate(len);
                self.host_direct
                    .store(if ok { YES } else { NO }, Ordering::Relaxed);
                if !ok {
                    return Ok(None);
                }
            }
        }
        self.wait_ready()?;
        // The pin held by the caller stops deletion and donation (the only ways the memory
        // is freed or rewritten while the buffer lives); the contents are ready, so no
        // computation still writes them; `direct_candidate` checked that the buffer is
        // host-visible and occupies exactly `len` dense bytes.
        match calls::pinned_host_slice(self.core.api, self.ptr, len) {
            Ok(Some(slice)) => Ok(Some(slice)),
            // No address after all (e.g. the plugin lacks PJRT_Buffer_UnsafePointer): copy
            // through the plugin from now on.
            Ok(None) | Err(_) => {
                self.host_direct.store(NO, Ordering::Relaxed);
                Ok(None)
            }
        }
    }

    fn direct_candidate(&self, len: usize) -> bool {
        let api = self.core.api;
        self.element_type.byte_width().is_some()
            && self.is_on_cpu().unwrap_or(false)
            && calls::buffer_layout_is_row_major(api, self.ptr).unwrap_or(false)
            && calls::buffer_on_device_size(api, self.ptr).is_ok_and(|n| n == len)
    }

    fn wait_ready(&self) -> Result<()> {
        if self.ready_ok.load(Ordering::Acquire) {
            return Ok(());
        }
        let ev = calls::buffer_ready_event(self.core.api, self.ptr)?;
        let r = rev::event_await(self.core.api, ev);
        let _ = rev::event_destroy(self.core.api, ev);
        if r.is_ok() {
            self.ready_ok.store(true, Ordering::Release);
        }
        r
    }

    /// Whether this buffer borrows host memory kept alive by an owner.
    pub(crate) fn is_zero_copy(&self) -> bool {
        self.owner.is_some()
    }

    /// Whether the buffer was made over host memory that it keeps alive (a zero-copy put or
    /// DLPack import): dropping it may wait until the plugin is done with that memory.
    pub fn borrows_host(&self) -> bool {
        self.owner.is_some()
    }

    /// The dimensions.
    pub fn dims(&self) -> &[i64] {
        self.dims.as_slice()
    }

    /// The element type.
    pub fn element_type(&self) -> ElementType {
        self.element_type
    }

    /// Number of elements.
    pub fn element_count(&self) -> usize {
        element_count(&self.dims).unwrap_or(0)
    }

    /// Bytes of the dense row-major host representation.
    pub fn host_size(&self) -> usize {
        self.element_type
            .dense_byte_size(self.element_count())
            .unwrap_or(0)
    }

    /// Bytes the buffer occupies on its device.
    pub fn on_device_size(&self) -> Result<usize> {
        self.check()?;
        calls::buffer_on_device_size(self.core.api, self.ptr)
    }

    /// The device holding the buffer.
    pub fn device(&self) -> Result<Device> {
        self.check()?;
        let ptr = calls::buffer_device(self.core.api, self.ptr)?;
        let data = self
            .core
            .device_data(ptr)
            .ok_or_else(|| Error::invalid("the plugin returned a device it did not list"))?;
        Ok(Device {
            core: Arc::clone(&self.core),
            data: Arc::clone(data),
        })
    }

    /// The memory space holding the buffer.
    pub fn memory(&self) -> Result<Memory> {
        self.check()?;
        let ptr = calls::buffer_memory(self.core.api, self.ptr)?;
        let data = self
            .core
            .memory_data(ptr)
            .ok_or_else(|| Error::invalid("the plugin returned a memory it did not list"))?;
        Ok(Memory {
            core: Arc::clone(&self.core),
            data: Arc::clone(data),
        })
    }

    /// Whether the buffer lives in host memory. Asked once per buffer, then remembered.
    pub fn is_on_cpu(&self) -> Result<bool> {
        self.check()?;
        match self.on_cpu.load(Ordering::Relaxed) {
            YES => Ok(true),
            NO => Ok(false),
            _ => {
                let on = calls::buffer_is_on_cpu(self.core.api, self.ptr)?;
                self.on_cpu
                    .store(if on { YES } else { NO }, Ordering::Relaxed);
                Ok(on)
            }
        }
    }

    /// The minor-to-major dimension order of the buffer's layout, where the plugin says.
    pub fn layout(&self) -> Result<Option<Vec<i64>>> {
        self.check()?;
        calls::buffer_layout(self.core.api, self.ptr)
    }

    /// The address of the buffer's data on its device (`PJRT_Buffer_UnsafePointer`), for
    /// identity checks and DLPack export. The memory stays valid only while the buffer lives
    /// and is not deleted or donated.
    pub fn unsafe_pointer(&self) -> Result<usize> {
        self.check()?;
        calls::buffer_unsafe_pointer(self.core.api, self.ptr)
    }

    /// Whether `delete()` was called or an execution consumed the buffer.
    pub fn is_deleted(&self) -> bool {
        self.state.load(Ordering::Acquire) & DELETED != 0
    }

    /// Frees the device memory now. Deleting twice is an error, and so is deleting while a
    /// [`HostView`] of the buffer exists (or a direct host read is in progress).
    pub fn delete(&self) -> Result<()> {
        self.core.check("buffer")?;
        let mut cur = self.state.load(Ordering::Acquire);
        loop {
            if cur & DELETED != 0 {
                return Err(Error::Deleted("buffer was already deleted".into()));
            }
            if cur >= PIN {
                return Err(self.pinned_error(cur / PIN, "deleted"));
            }
            match self.state.compare_exchange_weak(
                cur,
                cur | DELETED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
        calls::buffer_delete(self.core.api, self.ptr)
    }

    /// A zero-copy, read-only view of the buffer's bytes in host memory (dense, row-major).
    ///
    /// Works when the buffer's memory is host-visible (CPU devices; host memory kinds)
    /// with a dense row-major layout of a whole-byte element type; otherwise it is an
    /// `InvalidArgument` error and [`Buffer::to_host`] copies instead. Waits until the
    /// contents are ready. While the view lives, `delete()` and donating the buffer to an
    /// execution fail. See [`HostView`] for an owned variant.
    pub fn host_view(&self) -> Result<HostView<&Buffer>> {
        HostView::new(self)
    }

    /// Whether [`Buffer::host_view`] can work for this buffer (without waiting for it to
    /// be ready). Asked once per buffer, then remembered.
    pub fn has_host_view(&self) -> Result<bool> {
        self.check()?;
        Ok(match self.host_direct.load(Ordering::Relaxed) {
            YES => true,
            NO => false,
            _ => {
                let len = self.host_size();
                let ok = len > 0 && self.direct_candidate(len);
                self.host_direct
                    .store(if ok { YES } else { NO }, Ordering::Relaxed);
                ok
            }
        })
    }

    /// An event that completes when the buffer's contents are ready.
    pub fn ready_event(&self) -> Result<Event> {
        self.check()?;
        let ev = calls::buffer_ready_event(self.core.api, self.ptr)?;
        Ok(Event::from_raw(&self.core, ev))
    }

    /// Blocks until the buffer's contents are ready; returns the error of a failed producer.
    pub fn block_until_ready(&self) -> Result<()> {
        self.check()?;
        self.wait_ready()
    }

    /// Whether the buffer's contents are ready (also when their computation failed; then
    /// [`Buffer::block_until_ready`] returns the error), without blocking.
    pub fn is_ready(&self) -> Result<bool> {
        self.check()?;
        if self.ready_ok.load(Ordering::Acquire) {
            return Ok(true);
        }
        let ev = calls::buffer_ready_event(self.core.api, self.ptr)?;
        let r = rev::event_is_ready(self.core.api, ev);
        if let Ok(true) = r {
            // Remember a successful producer, so that the wait that usually follows is free.
            if rev::event_status(self.core.api, ev).is_ok() {
                self.ready_ok.store(true, Ordering::Release);
            }
        }
        let _ = rev::event_destroy(self.core.api, ev);
        r
    }

    /// Copies the buffer into `dst` (dense, row-major) and waits for the copy.
    ///
    /// `dst` must be exactly [`Buffer::host_size`] bytes. Host-visible buffers with a dense
    /// row-major layout are copied directly from their memory once ready; others go through
    /// the plugin's `PJRT_Buffer_ToHostBuffer`.
    pub fn to_host(&self, dst: &mut [u8]) -> Result<()> {
        self.check()?;
        let need = self.host_size();
        if dst.len() != need {
            return Err(Error::invalid(format!(
                "destination has {} bytes, but {}{:?} needs {need}",
                dst.len(),
                self.element_type,
                &*self.dims
            )));
        }
        if need == 0 {
            return Ok(());
        }
        if self.element_type.is_sub_byte() {
            // The plugins write one element per byte; pack into the caller's dense form.
            let mut unpacked = vec![0u8; self.element_count()];
            calls::buffer_to_host_blocking(self.core.api, self.ptr, &mut unpacked)?;
            dst.copy_from_slice(&pack_sub_byte(self.element_type, &unpacked));
            return Ok(());
        }
        if self.host_direct.load(Ordering::Relaxed) != NO {
            self.pin()?;
            let direct = self.direct_slice();
            let done = match &direct {
                Ok(Some(src)) => {
                    dst.copy_from_slice(src.bytes());
                    true
                }
                _ => false,
            };
            drop(direct);
            self.unpin();
            if done {
                return Ok(());
            }
        }
        if self.dims.len() >= 2 && !calls::buffer_layout_is_row_major(self.core.api, self.ptr)? {
            // A non-default device layout (e.g. `Client::put_with_layout`): ask for row-major
            // explicitly; some plugins (0.115) otherwise copy the device order as it is.
            return crate::raw::transfer::buffer_to_host_row_major_blocking(
                self.core.api,
                self.ptr,
                self.dims.len(),
                dst,
            );
        }
        calls::buffer_to_host_blocking(self.core.api, self.ptr, dst)
    }

    /// Copies the buffer into a new vector of bytes.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut v = vec![0u8; self.host_size()];
        self.to_host(&mut v)?;
        Ok(v)
    }

    /// Copies the buffer into a vector of `T`, which must match the element type.
    pub fn to_vec_of<T: NativeType>(&self) -> Result<Vec<T>> {
        if T::ELEMENT_TYPE != self.element_type {
            return Err(Error::invalid(format!(
                "buffer holds {}, not {}",
                self.element_type,
                T::ELEMENT_TYPE
            )));
        }
        Ok(crate::dtype::values_from_bytes(&self.to_vec()?))
    }

    /// Copies the buffer to another device of the same client.
    pub fn copy_to_device(&self, device: &Device) -> Result<Buffer> {
        self.check()?;
        if !Arc::ptr_eq(&device.core, &self.core) {
            return Err(Error::invalid(format!(
                "{device} belongs to another client"
            )));
        }
        let p = calls::buffer_copy_to_device(self.core.api, self.ptr, device.data.ptr)?;
        Ok(Buffer::from_raw(
            &self.core,
            p,
            self.element_type,
            self.dims(),
            None,
        ))
    }

    /// Copies the buffer into another memory space (e.g. `pinned_host`).
    pub fn copy_to_memory(&self, memory: &Memory) -> Result<Buffer> {
        self.check()?;
        if !Arc::ptr_eq(&memory.core, &self.core) {
            return Err(Error::invalid(format!(
                "{memory} belongs to another client"
            )));
        }
        let p = calls::buffer_copy_to_memory(self.core.api, self.ptr, memory.data.ptr)?;
        Ok(Buffer::from_raw(
            &self.core,
            p,
            self.element_type,
            self.dims(),
            None,
        ))
    }
}

/// A counted external reference to a buffer's device memory (for DLPack export and other
/// foreign owners). While it lives, the memory stays allocated and in place; it keeps the
/// buffer itself alive through an `Arc`.
pub struct ExternalReference {
    buffer: Arc<Buffer>,
    data: usize,
}

impl ExternalReference {
    /// The address of the data on the device (a host address on CPU plugins).
    pub fn data_ptr(&self) -> usize {
        self.data
    }

    /// The buffer this reference pins.
    pub fn buffer(&self) -> &Arc<Buffer> {
        &self.buffer
    }
}

impl Drop for ExternalReference {
    fn drop(&mut self) {
        let _ = calls::buffer_decrease_external_ref(self.buffer.core.api, self.buffer.ptr);
    }
}

impl fmt::Debug for ExternalReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ExternalReference({:?} at {:#x})",
            self.buffer, self.data
        )
    }
}

impl Buffer {
    /// Pins the buffer's memory for a foreign owner and returns its address. Waits until the
    /// buffer is ready first, so the memory holds the final contents.
    pub fn external_reference(self: &Arc<Buffer>) -> Result<ExternalReference> {
        self.block_until_ready()?;
        calls::buffer_increase_external_ref(self.core.api, self.ptr)?;
        let data = match calls::buffer_device_pointer(self.core.api, self.ptr) {
            Ok(p) => Ok(p),
            Err(_) => calls::buffer_unsafe_pointer(self.core.api, self.ptr),
        };
        match data {
            Ok(data) => Ok(ExternalReference {
                buffer: Arc::clone(self),
                data,
            }),
            Err(e) => {
                let _ = calls::buffer_decrease_external_ref(self.core.api, self.ptr);
                Err(e)
            }
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        let _ = calls::buffer_destroy(self.core.api, self.ptr);
        let done = self.host_done.get_mut().map(|d| d.take()).unwrap_or(None);
        if let Some(ev) = done {
            // The plugin may still read the owner's bytes until this fires; for zero-copy
            // buffers it fires once the buffer is gone, which it now is.
            let _ = rev::event_await(self.core.api, ev);
            let _ = rev::event_destroy(self.core.api, ev);
        }
        // `owner` drops after this, once the plugin no longer uses its memory.
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Buffer({}{:?}", self.element_type, &*self.dims)?;
        if self.is_deleted() {
            write!(f, ", deleted")?;
        }
        write!(f, ")")
    }
}

/// A zero-copy, read-only view of a buffer's bytes in host memory; derefs to `[u8]`.
///
/// Made by [`Buffer::host_view`] (borrowing) or [`HostView::new`] with any owner of a
/// buffer, e.g. `HostView::new(Arc::clone(&buffer))` for a view that is `'static`,
/// `Send` and `Sync` and may be kept as long as needed. The bytes are the dense row-major
/// representation (the same as [`Buffer::to_host`] writes) and do not change while the view
/// lives: deleting the buffer or donating it to an execution fails until the view is
/// dropped.
pub struct HostView<B: Deref<Target = Buffer>> {
    // Valid while the pin taken in `new` is held; `drop` releases it, and nothing reads
    // the slice after that.
    slice: HostSlice,
    buffer: B,
}

impl<B: Deref<Target = Buffer>> HostView<B> {
    /// A view of `buffer`'s host memory; waits until its contents are ready.
    ///
    /// An `InvalidArgument` error when the buffer is not host-visible, not dense row-major,
    /// of a sub-byte element type, or empty ([`Buffer::has_host_view`] tells beforehand).
    pub fn new(buffer: B) -> Result<HostView<B>> {
        buffer.pin()?;
        match buffer.direct_slice() {
            Ok(Some(slice)) => Ok(HostView { slice, buffer }),
            Ok(None) => {
                buffer.unpin();
                Err(Error::invalid(format!(
                    "buffer {}{:?} has no host view: its memory is not host-visible with a \
                     dense row-major layout (or it is empty); copy it with to_host instead",
                    buffer.element_type,
                    buffer.dims()
                )))
            }
            Err(e) => {
                buffer.unpin();
                Err(e)
            }
        }
    }

    /// The bytes (also what the view derefs to).
    pub fn bytes(&self) -> &[u8] {
        self.slice.bytes()
    }

    /// The address of the first byte, for handing the memory to another array library
    /// (numpy's `__array_interface__`, DLPack). Valid while the view lives.
    pub fn as_ptr(&self) -> *const u8 {
        self.slice.addr() as *const u8
    }

    /// The buffer the view belongs to.
    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }
}

impl<B: Deref<Target = Buffer>> Deref for HostView<B> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.slice.bytes()
    }
}

impl<B: Deref<Target = Buffer>> Drop for HostView<B> {
    fn drop(&mut self) {
        self.buffer.unpin();
    }
}

impl<B: Deref<Target = Buffer>> fmt::Debug for HostView<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "HostView({}{:?}, {} bytes)",
            self.buffer.element_type,
            self.buffer.dims(),
            self.slice.bytes().len()
        )
    }
}
