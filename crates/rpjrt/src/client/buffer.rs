//! Device buffers.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use crate::client::event::Event;
use crate::client::{ClientCore, Device, Memory};
use crate::dtype::{element_count, try_pack_sub_byte, ElementType, NativeType};
use crate::error::{Error, Result};
use crate::raw;
use crate::raw::buffer::StateError;
use crate::raw::inline::Inline;

/// Shapes of up to this rank are stored inline in a `Buffer` (no allocation).
const INLINE_RANK: usize = 6;

/// Host copies of at most this many bytes count as quick
/// ([`Buffer::host_copy_is_quick`]): a memcpy of 64 KiB takes a few microseconds, about what
/// handing an interpreter lock to another thread and back costs.
pub const QUICK_COPY_BYTES: usize = 64 << 10;

pub(crate) use crate::raw::hostmem::HostBytes;

/// Adapts an owner of host bytes to the raw layer's zero-copy contract.
pub(crate) struct Owner(pub(crate) Arc<dyn HostBytes>);

impl raw::buffer::HostMemory for Owner {
    fn host_bytes(&self) -> &[u8] {
        self.0.bytes()
    }

    fn is_private(&self) -> bool {
        self.0.is_private()
    }
}

/// What the safe layer keeps with each raw buffer.
pub(crate) struct BufferMeta {
    pub(in crate::client) core: Arc<ClientCore>,
    element_type: ElementType,
    dims: Inline<i64, INLINE_RANK>,
    /// The device layout was asked to differ from the default (row-major) one
    /// ([`Client::put_with_layout`](crate::Client::put_with_layout)); programs take the
    /// default layout, so execute refuses such a buffer.
    pub(in crate::client) non_default_layout: bool,
    /// The buffer's contents, or its error, are what the program chose (an alias buffer, an
    /// error buffer): an error it reports is the program's words, never an allocation that
    /// failed, and gets no out-of-memory report.
    chosen: bool,
}

impl BufferMeta {
    /// Marks a buffer made with a caller-chosen (not the default) device layout.
    pub(crate) fn set_non_default_layout(&mut self, yes: bool) {
        self.non_default_layout = yes;
    }

    /// Marks a buffer whose contents or error the program gives (see `chosen`).
    pub(crate) fn set_chosen(&mut self) {
        self.chosen = true;
    }

    /// Whether the buffer was made with a caller-chosen device layout.
    pub(crate) fn non_default_layout(&self) -> bool {
        self.non_default_layout
    }

    pub(crate) fn new(core: &Arc<ClientCore>, element_type: ElementType, dims: &[i64]) -> Self {
        BufferMeta {
            core: Arc::clone(core),
            element_type,
            dims: Inline::from_slice(dims),
            non_default_layout: false,
            chosen: false,
        }
    }

    /// Rewrites the metadata in place for another array of the same client (an output
    /// handle being reused): no reference count changes, no allocation for small ranks.
    pub(crate) fn refill(
        &mut self,
        core: &Arc<ClientCore>,
        element_type: ElementType,
        dims: &[i64],
    ) {
        if !Arc::ptr_eq(&self.core, core) {
            self.core = Arc::clone(core);
        }
        self.element_type = element_type;
        if !super::executable::same_dims(&self.dims, dims) {
            self.dims = Inline::from_slice(dims);
        }
        self.non_default_layout = false;
        self.chosen = false;
    }
}

/// An array in a device's memory. Cheap to clone: clones share the one device buffer,
/// which is freed when the last clone is dropped.
///
/// `delete()` frees the memory early (for every clone) and reports errors; deleting again
/// does nothing. A deleted (or donated) buffer refuses further use with a clear error.
#[derive(Clone)]
pub struct Buffer {
    pub(in crate::client) raw: raw::buffer::Buffer<BufferMeta>,
}

impl Buffer {
    pub(crate) fn from_raw(raw: raw::buffer::Buffer<BufferMeta>) -> Buffer {
        Buffer { raw }
    }

    #[inline]
    /// The raw buffer handle and its metadata.
    pub(crate) fn raw(&self) -> &raw::buffer::Buffer<BufferMeta> {
        &self.raw
    }

    pub(crate) fn core(&self) -> &Arc<ClientCore> {
        &self.raw.meta().core
    }

    /// Errors if the client was closed or the buffer deleted.
    #[inline]
    pub(crate) fn check(&self) -> Result<()> {
        self.core().check("buffer")?;
        if self.raw.is_deleted() {
            return Err(self.deleted_error());
        }
        Ok(())
    }

    /// Refuses operations that need array data on a token buffer: the plugins have no
    /// data to move for it, and some abort on the attempt (copying a token on PJRT 0.81).
    fn check_array(&self, what: &str) -> Result<()> {
        if self.element_type() == ElementType::Token {
            return Err(Error::invalid(format!(
                "a token buffer has no data and cannot be {what}; tokens only order effects \
                 between executions"
            )));
        }
        Ok(())
    }

    fn deleted_error(&self) -> Error {
        Error::Deleted(format!(
            "buffer {}{:?} was deleted or donated and cannot be used",
            self.element_type(),
            self.dims()
        ))
    }

    /// A plugin's error for an operation on this buffer, or the deleted-buffer error when
    /// another thread deleted (or donated) it meanwhile: the plugin's own complaint about
    /// a "deleted or donated buffer" is that race, checked before the call and lost after.
    fn or_deleted(&self, e: Error) -> Error {
        if self.raw.is_deleted() && !matches!(e, Error::Deleted(_)) {
            self.deleted_error()
        } else {
            e
        }
    }

    pub(crate) fn state_error(&self, e: StateError, what: &str) -> Error {
        match e {
            StateError::Deleted => self.deleted_error(),
            StateError::Pinned(pins) => Error::invalid(format!(
                "buffer {}{:?} cannot be {what} while {pins} host view(s) or external \
                 reference(s) of it exist (such as arrays sharing its memory through DLPack); \
                 drop them first",
                self.element_type(),
                self.dims()
            )),
            StateError::Launching => Error::invalid(format!(
                "buffer {}{:?} cannot be {what} from a custom-call handler while an \
                 execution is being launched with it",
                self.element_type(),
                self.dims()
            )),
        }
    }

    /// Whether that memory is also the caller's (not only rpjrt's staging memory).
    pub(crate) fn shares_callers_memory(&self) -> bool {
        self.raw.borrows_callers_memory()
    }

    /// Whether the buffer was made over host memory that it keeps alive (a zero-copy put or
    /// DLPack import): dropping it may wait until the plugin is done with that memory.
    pub fn borrows_host(&self) -> bool {
        self.raw.borrows_host()
    }

    /// The dimensions.
    pub fn dims(&self) -> &[i64] {
        self.raw.meta().dims.as_slice()
    }

    /// The element type.
    pub fn element_type(&self) -> ElementType {
        self.raw.meta().element_type
    }

    /// Number of elements.
    pub fn element_count(&self) -> usize {
        element_count(self.dims()).unwrap_or(0)
    }

    /// Bytes of the dense row-major host representation.
    pub fn host_size(&self) -> usize {
        self.element_type()
            .dense_byte_size(self.element_count())
            .unwrap_or(usize::MAX)
    }

    /// Bytes the buffer occupies on its device.
    pub fn on_device_size(&self) -> Result<usize> {
        self.check()?;
        self.raw.on_device_size()
    }

    /// The device holding the buffer.
    pub fn device(&self) -> Result<Device> {
        self.check()?;
        self.core().device(self.raw.device()?)
    }

    /// The plugin's handle of the device holding the buffer (for placement checks).
    pub(crate) fn raw_device(&self) -> Result<crate::raw::device::DeviceRef> {
        self.raw.device()
    }

    /// The memory space holding the buffer.
    pub fn memory(&self) -> Result<Memory> {
        self.check()?;
        self.core().memory(self.raw.memory()?)
    }

    /// Whether the buffer lives in host memory. Asked once per buffer, then remembered.
    pub fn is_on_cpu(&self) -> Result<bool> {
        self.check()?;
        self.raw.is_on_cpu()
    }

    /// The minor-to-major dimension order of the buffer's layout, where the plugin says.
    /// `None` for a token, which has no layout (the plugins abort when asked for one).
    pub fn layout(&self) -> Result<Option<Vec<i64>>> {
        self.check()?;
        if self.element_type() == ElementType::Token {
            return Ok(None);
        }
        self.raw.layout()
    }

    /// The address of the buffer's data on its device (`PJRT_Buffer_UnsafePointer`), for
    /// identity checks and DLPack export. The memory stays valid only while the buffer lives
    /// and is not deleted or donated.
    pub fn unsafe_pointer(&self) -> Result<usize> {
        self.check()?;
        self.raw.unsafe_pointer()
    }

    /// Whether `delete()` was called or an execution consumed the buffer.
    pub fn is_deleted(&self) -> bool {
        self.raw.is_deleted()
    }

    /// Frees the device memory now (for every clone). Deleting a deleted (or donated)
    /// buffer does nothing, as `close()` on a closed client; deleting while a [`HostView`]
    /// of the buffer exists (or a direct host read is in progress) is an error. A buffer
    /// that reads host memory in place (a zero-copy put, a DLPack import) returns once the
    /// plugin is done with that memory (executions and copies queued on it have read it),
    /// so the caller may write it again; inside a plugin callback, which cannot wait, the
    /// delete is finished on another thread.
    pub fn delete(&self) -> Result<()> {
        self.core().check("buffer")?;
        match self.raw.delete()? {
            Ok(_) => {
                super::alias::deleted(self.raw.handle_id());
                Ok(())
            }
            Err(e) => Err(self.state_error(e, "deleted")),
        }
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
        Ok(self
            .direct_len()
            .is_some_and(|len| self.raw.has_direct_host(len)))
    }

    /// The length to read in place: whole-byte element types only.
    fn direct_len(&self) -> Option<usize> {
        self.element_type().byte_width()?;
        Some(self.host_size())
    }

    /// The buffer's memory, pinned and ready, when it can be read in place.
    fn direct_slice(&self) -> Result<Option<raw::buffer::PinnedSlice<BufferMeta>>> {
        self.core().check("buffer")?;
        let Some(len) = self.direct_len() else {
            return Ok(None);
        };
        self.raw
            .pinned_host(len)?
            .map_err(|e| self.state_error(e, "read"))
    }

    /// An event that completes when the buffer's contents are ready.
    pub fn ready_event(&self) -> Result<Event> {
        self.check()?;
        let raw = self.raw.ready_event()?;
        Ok(Event::of_buffer_on(
            self.core(),
            raw,
            self.raw.wait_devices(),
        ))
    }

    /// For a caller about to wait for the contents in a way of its own (polling an async
    /// ready event, say): refuses, as [`Buffer::block_until_ready`] does, a wait that could
    /// never end (from a custom-call handler on a plugin worker thread, for a buffer queued
    /// behind that handler's own execution), and while the returned guard lives records the
    /// wait, so that a handler on the buffer's device waiting back for this one is refused.
    /// Keep the guard until the wait ends.
    pub fn begin_wait(&self) -> Result<crate::WorkerWait> {
        self.check()?;
        self.raw.refuse_wait_in_worker_handler()
    }

    /// Blocks until the buffer's contents are ready; returns the error of a failed producer.
    pub fn block_until_ready(&self) -> Result<()> {
        self.check()?;
        let _span = crate::trace::span(crate::trace::Category::Wait, "block_until_ready");
        self.raw
            .wait_ready()
            .map_err(|e| self.with_memory_context(e))
    }

    /// An out-of-memory error of this buffer's producer explained with its device's
    /// figures (see `ClientCore::with_memory_context`).
    pub(crate) fn with_memory_context(&self, e: Error) -> Error {
        if self.raw.meta().chosen {
            return e;
        }
        match self.raw_device() {
            Ok(d) => (self.core()).with_memory_context(e, &[d], || {
                self.core()
                    .array_request(self.element_type(), self.dims(), d)
            }),
            Err(_) => e,
        }
    }

    /// Whether an earlier wait or readiness check saw the contents ready and their
    /// computation succeeded; then [`Buffer::block_until_ready`] makes no plugin call.
    /// Never calls the plugin (`false` says only that it is not known yet).
    pub fn is_known_ready(&self) -> bool {
        self.raw.is_ready_cached()
    }

    /// Polls, for up to the wait poll time ([`crate::set_wait_spin`]), until the contents
    /// are ready; whether they are (also when their computation failed; a success is
    /// remembered, so [`Buffer::block_until_ready`] afterwards makes no plugin call). For
    /// waits that must sleep their own way afterwards (Python's interruptible wait);
    /// [`Buffer::block_until_ready`] already polls first.
    pub fn poll_ready(&self) -> Result<bool> {
        self.check()?;
        self.raw.poll_ready()
    }

    /// Whether the buffer's contents are ready (also when their computation failed; then
    /// [`Buffer::block_until_ready`] returns the error), without blocking.
    pub fn is_ready(&self) -> Result<bool> {
        self.check()?;
        self.raw.is_ready()
    }

    /// Copies the buffer into `dst` (dense, row-major) and waits for the copy.
    ///
    /// `dst` must be exactly [`Buffer::host_size`] bytes. Host-visible buffers with a dense
    /// row-major layout are copied directly from their memory once ready; others go through
    /// the plugin's `PJRT_Buffer_ToHostBuffer`.
    pub fn to_host(&self, dst: &mut [u8]) -> Result<()> {
        self.check()?;
        self.check_array("copied to the host")?;
        let need = self.host_size();
        if dst.len() != need {
            return Err(Error::invalid(format!(
                "destination has {} bytes, but {}{:?} needs {need}",
                dst.len(),
                self.element_type(),
                self.dims()
            )));
        }
        if need == 0 {
            return Ok(());
        }
        let _span = crate::trace::span(crate::trace::Category::Fetch, "to_host").bytes(need);
        let ty = self.element_type();
        if ty.is_sub_byte() {
            // The plugins write one element per byte; pack into the caller's dense form.
            let what = self.host_copy_text("an unpacked host copy");
            let mut unpacked = crate::dtype::try_zeroed(self.element_count(), &what)?;
            self.raw.to_host(&mut unpacked)?;
            dst.copy_from_slice(&try_pack_sub_byte(ty, &unpacked)?);
            return Ok(());
        }
        if let Some(src) = self.direct_slice()? {
            dst.copy_from_slice(src.bytes());
            return Ok(());
        }
        if self.dims().len() >= 2 && !self.raw.layout_is_row_major()? {
            // A non-default device layout (e.g. `Client::put_with_layout`): ask for row-major
            // explicitly; some plugins (0.115) otherwise copy the device order as it is.
            return self.raw.to_host_row_major(self.dims().len(), dst);
        }
        self.raw.to_host(dst)
    }

    /// Bytes of the host-array form that [`Buffer::to_host_array`] writes:
    /// [`ElementType::host_itemsize`] per element.
    pub fn host_array_size(&self) -> usize {
        (self.element_count()).saturating_mul(self.element_type().host_itemsize())
    }

    /// What a host copy of this buffer is called where its allocation fails.
    pub(crate) fn host_copy_text(&self, what: &str) -> String {
        format!("{what} of {}{:?}", self.element_type(), self.dims())
    }

    /// Copies the buffer into `dst` in the form numpy and ml_dtypes hold arrays: dense,
    /// row-major, [`ElementType::host_itemsize`] bytes per element. For whole-byte types
    /// these are the bytes of [`Buffer::to_host`]; a sub-byte type (int4, float4 ...) takes
    /// one byte per element holding the value's low bits (not sign-extended).
    ///
    /// `dst` must be exactly [`Buffer::host_array_size`] bytes.
    pub fn to_host_array(&self, dst: &mut [u8]) -> Result<()> {
        let ty = self.element_type();
        if !ty.is_sub_byte() {
            return self.to_host(dst);
        }
        self.check()?;
        let need = self.host_array_size();
        if dst.len() != need {
            return Err(Error::invalid(format!(
                "destination has {} bytes, but {}{:?} needs {need} (one byte per element)",
                dst.len(),
                ty,
                self.dims()
            )));
        }
        if need == 0 {
            return Ok(());
        }
        // The plugins write one element per byte (signed types sign-extended); numpy and
        // ml_dtypes keep only the low bits.
        let _span = crate::trace::span(crate::trace::Category::Fetch, "to_host").bytes(need);
        self.raw.to_host(dst)?;
        let mask = ((1u16 << ty.bit_width()) - 1) as u8;
        dst.iter_mut().for_each(|x| *x &= mask);
        Ok(())
    }

    /// Whether a host copy of this buffer ([`Buffer::to_host`], [`Buffer::to_host_array`])
    /// is quick right now: the contents are known to be ready, the memory is read in place
    /// (see [`Buffer::has_host_view`]) and it is at most [`QUICK_COPY_BYTES`] long. Bindings
    /// use it to skip releasing their interpreter lock around copies that take less time
    /// than the release and the reacquisition. Never blocks.
    pub fn host_copy_is_quick(&self) -> bool {
        self.host_size() <= QUICK_COPY_BYTES
            && self.raw.is_ready_cached()
            && self.has_host_view().unwrap_or(false)
    }

    /// Copies the buffer into a new vector of bytes.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let what = self.host_copy_text("a host copy");
        let mut v = crate::dtype::try_zeroed(self.host_size(), &what)?;
        self.to_host(&mut v)?;
        Ok(v)
    }

    /// Copies the buffer into a vector of `T`, which must match the element type. PRED
    /// elements read as `true` for any non-zero byte.
    pub fn to_vec_of<T: NativeType>(&self) -> Result<Vec<T>> {
        if T::ELEMENT_TYPE != self.element_type() {
            return Err(Error::invalid(format!(
                "buffer holds {}, not {}",
                self.element_type(),
                T::ELEMENT_TYPE
            )));
        }
        Ok(crate::dtype::values_from_bytes(&self.to_vec()?))
    }

    /// The metadata of a copy: a copy keeps the device layout (one CPU plugin's copies
    /// do), so one of a buffer put with a non-default layout is marked as it is.
    fn copy_meta(&self) -> BufferMeta {
        let mut meta = BufferMeta::new(self.core(), self.element_type(), self.dims());
        meta.non_default_layout = self.raw.meta().non_default_layout;
        meta
    }

    /// Copies the buffer to another device of the same client.
    pub fn copy_to_device(&self, device: &Device) -> Result<Buffer> {
        self.check()?;
        self.check_array("copied")?;
        if !Arc::ptr_eq(&device.core, self.core()) {
            return Err(Error::invalid(format!(
                "{device} belongs to another client than this buffer (copies between clients \
                 go through the host)"
            )));
        }
        let meta = self.copy_meta();
        let d = device.data.raw;
        let raw = self.raw.copy_to_device(d, meta).map_err(|e| {
            let e = self.or_deleted(e);
            (self.core()).with_memory_context(e, &[d], || {
                self.core()
                    .array_request(self.element_type(), self.dims(), d)
            })
        })?;
        Ok(Buffer::from_raw(raw))
    }

    /// An independent copy of the contents, in the same memory space (on the same device
    /// where the plugin has no memory spaces). A [`Clone`] shares the one device buffer, so
    /// deleting or donating one deletes all; this is a new buffer.
    pub fn duplicate(&self) -> Result<Buffer> {
        match self.memory() {
            Ok(m) => self.copy_to_memory(&m),
            Err(Error::Unsupported { .. }) => self.copy_to_device(&self.device()?),
            Err(e) => Err(e),
        }
    }

    /// Copies the buffer into another memory space (e.g. `pinned_host`).
    pub fn copy_to_memory(&self, memory: &Memory) -> Result<Buffer> {
        self.check()?;
        self.check_array("copied")?;
        if !Arc::ptr_eq(&memory.core, self.core()) {
            return Err(Error::invalid(format!(
                "{memory} belongs to another client than this buffer (copies between clients \
                 go through the host)"
            )));
        }
        let meta = self.copy_meta();
        let raw = self
            .raw
            .copy_to_memory(memory.data.raw, meta)
            .map_err(|e| {
                let e = self.or_deleted(e);
                let devices = memory.data.devices.clone();
                (self.core()).with_memory_context(e, &devices, || {
                    let d = devices.first().copied()?;
                    let (what, bytes) =
                        self.core()
                            .array_request(self.element_type(), self.dims(), d)?;
                    Some((format!("{what} (memory {})", memory.kind()), bytes))
                })
            })?;
        Ok(Buffer::from_raw(raw))
    }
}

/// A counted external reference to a buffer's device memory (for DLPack export and other
/// foreign owners): the export pin. While it lives, the memory stays allocated and in place,
/// the buffer itself stays alive, and deleting or donating the buffer fails (the foreign
/// owner may still read it).
pub struct ExternalReference {
    buffer: Buffer,
    guard: raw::buffer::ExternalRef<BufferMeta>,
}

impl ExternalReference {
    /// The address of the data on the device (a host address on CPU plugins).
    pub fn data_ptr(&self) -> usize {
        self.guard.addr()
    }

    /// The buffer this reference pins.
    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }
}

impl fmt::Debug for ExternalReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ExternalReference({:?} at {:#x})",
            self.buffer,
            self.data_ptr()
        )
    }
}

impl Buffer {
    /// Pins the buffer's memory for a foreign owner and returns its address. Waits until the
    /// buffer is ready first, so the memory holds the final contents.
    pub fn external_reference(&self) -> Result<ExternalReference> {
        self.block_until_ready()?;
        self.check_array("shared")?;
        let guard = self
            .raw
            .external_ref()?
            .map_err(|e| self.state_error(e, "exported"))?;
        Ok(ExternalReference {
            buffer: self.clone(),
            guard,
        })
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Buffer({}{:?}", self.element_type(), self.dims())?;
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
    // Holds a pin (released on drop) and a clone of the raw buffer.
    slice: raw::buffer::PinnedSlice<BufferMeta>,
    buffer: B,
}

impl<B: Deref<Target = Buffer>> HostView<B> {
    /// A view of `buffer`'s host memory; waits until its contents are ready.
    ///
    /// An `InvalidArgument` error when the buffer is not host-visible, not dense row-major,
    /// of a sub-byte element type, or empty ([`Buffer::has_host_view`] tells beforehand).
    pub fn new(buffer: B) -> Result<HostView<B>> {
        match buffer.direct_slice()? {
            Some(slice) => Ok(HostView { slice, buffer }),
            None => Err(Error::invalid(format!(
                "buffer {}{:?} has no host view: its memory is not host-visible with a \
                 dense row-major layout (or it is empty); copy it with to_host instead",
                buffer.element_type(),
                buffer.dims()
            ))),
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

impl<B: Deref<Target = Buffer>> fmt::Debug for HostView<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "HostView({}{:?}, {} bytes)",
            self.buffer.element_type(),
            self.buffer.dims(),
            self.slice.bytes().len()
        )
    }
}
