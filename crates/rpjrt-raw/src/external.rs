//! Memory that crosses the plugin boundary outside a buffer's own allocation: host regions
//! mapped for DMA (`PJRT_Client_DmaMap`/`DmaUnmap`) and buffers that view device memory
//! someone else owns (`PJRT_Client_CreateViewOfDeviceBuffer`).

use std::alloc::Layout;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

use rpjrt_sys as sys;

use super::buffer::Buffer;
use super::callback;
use super::client::Client;
use super::device::MemoryRef;
use super::{args_types, pjrt, Args};
use crate::error::{Error, Result};

args_types! {
    PJRT_Client_DmaMap_Args => PJRT_Client_DmaMap_Args_STRUCT_SIZE,
    PJRT_Client_DmaUnmap_Args => PJRT_Client_DmaUnmap_Args_STRUCT_SIZE,
    PJRT_Client_CreateViewOfDeviceBuffer_Args => PJRT_Client_CreateViewOfDeviceBuffer_Args_STRUCT_SIZE,
}

/// Alignment of a DMA region: a page, which is what pinning works in.
const DMA_ALIGN: usize = 4096;

/// Zeroed, page-aligned host memory that rpjrt allocated and the plugin mapped for DMA
/// (`PJRT_Client_DmaMap`). Dropping it unmaps it (`PJRT_Client_DmaUnmap`) and then frees
/// it; if the unmap fails the memory is leaked rather than freed under the device.
pub struct DmaRegion {
    client: Arc<Client>,
    ptr: NonNull<u8>,
    layout: Layout,
    mapped: bool,
}

// SAFETY: the region is plain bytes owned by this value alone (reached only through &self
// or &mut self); the client is Send + Sync and the C API is thread-safe.
unsafe impl Send for DmaRegion {}
// SAFETY: shared access only reads the bytes.
unsafe impl Sync for DmaRegion {}

impl DmaRegion {
    /// Allocates `len` zeroed bytes (at least one) aligned to a page and maps them.
    pub fn map(client: &Arc<Client>, len: usize) -> Result<DmaRegion> {
        if len == 0 {
            return Err(Error::invalid("a DMA region needs at least one byte"));
        }
        let layout = Layout::from_size_align(len, DMA_ALIGN)
            .map_err(|_| Error::invalid(format!("a DMA region of {len} bytes is too large")))?;
        // SAFETY: the layout has a non-zero size (checked above).
        let ptr = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }).ok_or_else(|| {
            Error::ResourceExhausted(format!(
                "could not allocate {len} bytes of host memory for a DMA region"
            ))
        })?;
        let mut region = DmaRegion {
            client: Arc::clone(client),
            ptr,
            layout,
            mapped: false,
        };
        let mut a = sys::PJRT_Client_DmaMap_Args::new();
        a.client = client.ptr();
        a.data = ptr.as_ptr().cast();
        a.size = len;
        // SAFETY: live client; the range is allocated and stays so until it is unmapped
        // (Drop unmaps before it frees, and leaks it when the unmap fails).
        unsafe { pjrt!(client.api(), PJRT_Client_DmaMap, &mut a) }?;
        region.mapped = true;
        Ok(region)
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `layout.size()` initialised bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }

    /// The bytes, for writing.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `bytes`, with exclusive access through &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }

    /// Unmaps the region (`PJRT_Client_DmaUnmap`); on success the drop frees it. A second
    /// call is a no-op.
    pub fn unmap(&mut self) -> Result<()> {
        if !self.mapped {
            return Ok(());
        }
        let mut a = sys::PJRT_Client_DmaUnmap_Args::new();
        a.client = self.client.ptr();
        a.data = self.ptr.as_ptr().cast();
        // SAFETY: live client; `data` is the start of a range this client mapped.
        unsafe { pjrt!(self.client.api(), PJRT_Client_DmaUnmap, &mut a) }?;
        self.mapped = false;
        Ok(())
    }
}

impl Drop for DmaRegion {
    fn drop(&mut self) {
        if self.unmap().is_ok() {
            // SAFETY: allocated in `map` with this layout, no longer mapped, freed once.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
        }
        // Still mapped: the device may write it, so the memory is leaked, never freed.
    }
}

/// The address of device memory that someone other than the plugin allocated (a CUDA
/// allocation, another framework's tensor), for `Client::view_of_device_buffer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceAddress(usize);

impl DeviceAddress {
    /// Wraps `address`.
    ///
    /// # Safety
    /// `address` must be the start of device memory, on the device of the memory the view
    /// is made in, holding at least the view's bytes in the plugin's default layout for its
    /// element type and dimensions, and it must stay allocated until the view's buffer is
    /// gone (its `on_delete` runs, for a view made with one). rpjrt cannot check any of
    /// this: the plugin reads and writes that memory as the buffer's contents.
    pub unsafe fn new(address: usize) -> DeviceAddress {
        DeviceAddress(address)
    }

    /// The address.
    pub fn address(&self) -> usize {
        self.0
    }
}

/// What runs once the plugin no longer uses a view's memory.
type OnDelete = Box<dyn FnOnce() + Send + 'static>;

extern "C" fn on_delete_trampoline(_device_buffer_ptr: *mut c_void, user: *mut c_void) {
    // SAFETY: `user` came from `callback::leak::<OnDelete>` in `view_of_device_buffer`, and
    // the plugin calls this once, when the view is destroyed.
    let f = unsafe { callback::reclaim::<OnDelete>(user) };
    // A panic is caught: it must not unwind into C.
    let _ = callback::guard(f);
}

/// `PJRT_Client_CreateViewOfDeviceBuffer`: a buffer of element type `ty` and `dims` over the
/// device memory at `address`, in `memory`, without a copy. `on_delete` runs (on whatever
/// thread the plugin destroys the buffer) once the plugin is done with the memory.
pub fn view_of_device_buffer<M>(
    client: &Arc<Client>,
    address: DeviceAddress,
    ty: i32,
    dims: &[i64],
    memory: MemoryRef,
    on_delete: Option<OnDelete>,
    meta: M,
) -> Result<Buffer<M>> {
    if !memory.belongs_to(client) {
        return Err(Error::invalid("the memory belongs to another client"));
    }
    if address.0 == 0 {
        return Err(Error::invalid(
            "a device buffer view needs a non-null address",
        ));
    }
    // Always a callback, even a no-op: XLA's C wrapper calls whatever it was given when the
    // view is destroyed, and a null one aborts the process (measured on PJRT 0.81).
    let on_delete: OnDelete = on_delete.unwrap_or_else(|| Box::new(|| ()));
    let user = callback::leak::<OnDelete>(on_delete);
    let mut a = sys::PJRT_Client_CreateViewOfDeviceBuffer_Args::new();
    a.client = client.ptr();
    a.device_buffer_ptr = address.0 as *mut c_void;
    a.dims = dims.as_ptr();
    a.num_dims = dims.len();
    a.element_type = ty as sys::PJRT_Buffer_Type;
    a.memory = memory.ptr();
    a.on_delete_callback = Some(on_delete_trampoline);
    a.on_delete_callback_arg = user;
    // SAFETY: live client and a memory it listed; dims outlive the call; the address's
    // validity is the `DeviceAddress::new` promise; the trampoline matches the callback type,
    // never unwinds and reclaims `user` once.
    let r = unsafe { pjrt!(client.api(), PJRT_Client_CreateViewOfDeviceBuffer, &mut a) };
    let ptr = match r.and_then(|()| {
        NonNull::new(a.buffer).ok_or_else(|| {
            Error::invalid("PJRT_Client_CreateViewOfDeviceBuffer returned no buffer")
        })
    }) {
        Ok(p) => p,
        Err(e) => {
            // SAFETY: no view exists, so the plugin will never call the trampoline; the
            // callback is still ours and is dropped here, unrun, exactly once.
            drop(unsafe { callback::reclaim::<OnDelete>(user) });
            return Err(e);
        }
    };
    Ok(Buffer::new(client, ptr, meta, None, None))
}

/// A raw copy to host in flight (`PJRT_Buffer_CopyRawToHost` without the wait): owns the
/// destination, which the plugin writes until the copy's event completes, and keeps the
/// source buffer alive. Dropping it before [`RawCopy::wait`] waits for the copy first, so
/// the destination is never freed under the plugin.
pub struct RawCopy<M> {
    _source: Buffer<M>,
    event: Option<super::event::Event>,
    dst: Vec<u8>,
}

impl<M> RawCopy<M> {
    /// Starts copying `dst.len()` bytes from byte `offset` of `source`'s on-device form into
    /// `dst`. The caller has checked the range against the on-device size.
    pub fn start(source: &Buffer<M>, offset: usize, mut dst: Vec<u8>) -> Result<Self> {
        if dst.is_empty() {
            // Nothing to copy: no call, and no event to wait for.
            return Ok(RawCopy {
                _source: source.clone(),
                event: None,
                dst,
            });
        }
        let mut a = sys::PJRT_Buffer_CopyRawToHost_Args::new();
        a.buffer = source.ptr();
        a.dst = dst.as_mut_ptr().cast();
        a.offset = offset as i64;
        a.transfer_size = dst.len() as i64;
        // SAFETY: live buffer; `dst`'s heap block does not move when the Vec is moved into
        // the returned value, which neither reads nor frees it before the event completes.
        unsafe { pjrt!(source.client().api(), PJRT_Buffer_CopyRawToHost, &mut a) }?;
        let event = super::event::Event::new(source.client(), a.event);
        Ok(RawCopy {
            _source: source.clone(),
            event,
            dst,
        })
    }

    /// Whether the copy has finished (successfully or not).
    pub fn is_ready(&self) -> Result<bool> {
        match &self.event {
            Some(e) => e.is_ready(),
            None => Ok(true),
        }
    }

    /// Waits for the copy and returns the bytes.
    pub fn wait(mut self) -> Result<Vec<u8>> {
        if let Some(e) = self.event.take() {
            e.wait()?;
        }
        Ok(std::mem::take(&mut self.dst))
    }
}

impl<M> Drop for RawCopy<M> {
    fn drop(&mut self) {
        if let Some(e) = self.event.take() {
            // The plugin may still be writing `dst`: wait before it is freed. Whatever the
            // outcome, the plugin is done with the memory once the event completes.
            let _ = e.wait();
        }
    }
}
