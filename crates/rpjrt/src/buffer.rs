//! Device buffers.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::client::{ClientCore, Device, Memory};
use crate::dtype::{element_count, pack_sub_byte, ElementType, NativeType};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::raw::calls::{self, BufferPtr, EventPtr};
use crate::raw::event as rev;

/// Host memory that a zero-copy buffer may use in place.
///
/// The bytes must not change while any buffer made from them lives; rpjrt keeps the owner
/// alive until the plugin is done with them.
pub trait HostBytes: Send + Sync + 'static {
    /// The bytes.
    fn bytes(&self) -> &[u8];
}

impl HostBytes for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

impl HostBytes for Box<[u8]> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

/// An array in a device's memory.
///
/// Dropping a buffer frees it. `delete()` frees the memory early and reports errors; a
/// deleted (or donated) buffer refuses further use with a clear error.
pub struct Buffer {
    pub(crate) core: Arc<ClientCore>,
    pub(crate) ptr: BufferPtr,
    deleted: AtomicBool,
    element_type: ElementType,
    dims: Vec<i64>,
    owner: Option<Arc<dyn HostBytes>>,
    host_done: Mutex<Option<EventPtr>>,
}

impl Buffer {
    pub(crate) fn from_raw(
        core: &Arc<ClientCore>,
        ptr: BufferPtr,
        element_type: ElementType,
        dims: Vec<i64>,
        owner: Option<Arc<dyn HostBytes>>,
    ) -> Buffer {
        Buffer {
            core: Arc::clone(core),
            ptr,
            deleted: AtomicBool::new(false),
            element_type,
            dims,
            owner,
            host_done: Mutex::new(None),
        }
    }

    pub(crate) fn set_host_done(&self, ev: EventPtr) {
        *self.host_done.lock().unwrap_or_else(|p| p.into_inner()) = Some(ev);
    }

    /// Errors if the client was closed or the buffer deleted.
    #[inline]
    pub(crate) fn check(&self) -> Result<()> {
        self.core.check("buffer")?;
        if self.deleted.load(Ordering::Acquire) {
            return Err(Error::Deleted(format!(
                "buffer {}{:?} was deleted or donated and cannot be used",
                self.element_type, self.dims
            )));
        }
        Ok(())
    }

    /// Marks the buffer deleted because an execution consumed it.
    pub(crate) fn mark_donated(&self) {
        self.deleted.store(true, Ordering::Release);
    }

    /// Whether this buffer borrows host memory kept alive by an owner.
    pub(crate) fn is_zero_copy(&self) -> bool {
        self.owner.is_some()
    }

    /// The dimensions.
    pub fn dims(&self) -> &[i64] {
        &self.dims
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

    /// Whether the buffer lives in host memory.
    pub fn is_on_cpu(&self) -> Result<bool> {
        self.check()?;
        calls::buffer_is_on_cpu(self.core.api, self.ptr)
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
        self.deleted.load(Ordering::Acquire)
    }

    /// Frees the device memory now. Deleting twice is an error.
    pub fn delete(&self) -> Result<()> {
        self.core.check("buffer")?;
        if self.deleted.swap(true, Ordering::AcqRel) {
            return Err(Error::Deleted("buffer was already deleted".into()));
        }
        calls::buffer_delete(self.core.api, self.ptr)
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
        let ev = calls::buffer_ready_event(self.core.api, self.ptr)?;
        let r = rev::event_await(self.core.api, ev);
        let _ = rev::event_destroy(self.core.api, ev);
        r
    }

    /// Whether the buffer's contents are ready, without blocking.
    pub fn is_ready(&self) -> Result<bool> {
        self.check()?;
        let ev = calls::buffer_ready_event(self.core.api, self.ptr)?;
        let r = rev::event_is_ready(self.core.api, ev);
        let _ = rev::event_destroy(self.core.api, ev);
        r
    }

    /// Copies the buffer into `dst` (dense, row-major) and waits for the copy.
    ///
    /// `dst` must be exactly [`Buffer::host_size`] bytes.
    pub fn to_host(&self, dst: &mut [u8]) -> Result<()> {
        self.check()?;
        let need = self.host_size();
        if dst.len() != need {
            return Err(Error::invalid(format!(
                "destination has {} bytes, but {}{:?} needs {need}",
                dst.len(),
                self.element_type,
                self.dims
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
        Ok(calls::from_bytes(&self.to_vec()?))
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
            self.dims.clone(),
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
            self.dims.clone(),
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
        write!(f, "Buffer({}{:?}", self.element_type, self.dims)?;
        if self.is_deleted() {
            write!(f, ", deleted")?;
        }
        write!(f, ")")
    }
}
