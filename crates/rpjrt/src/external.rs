//! Memory outside a buffer's own allocation: host regions mapped for DMA
//! ([`Client::dma_map`]), buffers viewing device memory someone else owns
//! ([`Client::view_of_device_buffer`]), and raw copies to host that run while the caller
//! does other work ([`Buffer::copy_raw_to_host_async`]).
//!
//! A plugin without an entry gives [`Error::Unsupported`](crate::Error::Unsupported) naming it and the PJRT version
//! that added it.

use std::ops::{Deref, DerefMut};

use crate::client::buffer::{Buffer, BufferMeta};
use crate::client::{Client, Device, Memory};
use crate::dtype::ElementType;
use crate::error::Result;
use crate::raw;

pub use crate::raw::external::DeviceAddress;

/// Zeroed, page-aligned host memory mapped for DMA by the plugin (`PJRT_Client_DmaMap`,
/// PJRT 0.67): on plugins that pin it (GPU), copies from it to the device skip the staging
/// copy. Reads and writes as a byte slice; `put` from it like from any host array.
///
/// Dropping it unmaps it (`PJRT_Client_DmaUnmap`) and frees it; [`DmaRegion::unmap`] does
/// the same and reports a failure. Memory whose unmap fails is leaked, never freed while
/// the device may still use it. Buffers made from the region without a copy must be gone
/// before it is dropped; a copying `put` may finish first.
pub struct DmaRegion {
    raw: raw::external::DmaRegion,
}

impl std::fmt::Debug for DmaRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DmaRegion({} bytes)", self.raw.bytes().len())
    }
}

impl Deref for DmaRegion {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.raw.bytes()
    }
}

impl DerefMut for DmaRegion {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.raw.bytes_mut()
    }
}

impl DmaRegion {
    /// Unmaps and frees the region, reporting a failed unmap (the memory is then leaked).
    pub fn unmap(mut self) -> Result<()> {
        self.raw.unmap()
    }
}

impl Client {
    /// Allocates `len` zeroed bytes of page-aligned host memory and maps them for DMA
    /// (`PJRT_Client_DmaMap`); the returned region unmaps them when dropped. `len` must be
    /// at least 1.
    pub fn dma_map(&self, len: usize) -> Result<DmaRegion> {
        self.core().check("client")?;
        let raw = raw::external::DmaRegion::map(self.core().raw(), len)?;
        Ok(DmaRegion { raw })
    }

    /// A buffer of `element_type[dims]` whose contents are the device memory at `address`,
    /// without a copy (`PJRT_Client_CreateViewOfDeviceBuffer`): memory another library
    /// allocated, adopted as it is. The view lives in `memory` (default: `device`'s default
    /// memory). `on_delete`, if given, runs once the plugin no longer uses the memory (when
    /// the buffer is destroyed), on whatever thread destroys it, and must not block; use it
    /// to release the owner. If the view cannot be made, `on_delete` is dropped without
    /// running.
    ///
    /// Making the [`DeviceAddress`] is where the memory's size, device and lifetime are
    /// promised.
    pub fn view_of_device_buffer(
        &self,
        address: DeviceAddress,
        element_type: ElementType,
        dims: &[i64],
        device: &Device,
        memory: Option<&Memory>,
        on_delete: Option<Box<dyn FnOnce() + Send + 'static>>,
    ) -> Result<Buffer> {
        self.check_put_target(element_type, dims, device, memory)?;
        let mem = match memory {
            Some(m) => m.clone(),
            None => device.default_memory()?,
        };
        let raw = raw::external::view_of_device_buffer(
            self.core().raw(),
            address,
            element_type.code(),
            dims,
            mem.raw_ref(),
            on_delete,
            BufferMeta::new(self.core(), element_type, dims),
        )?;
        Ok(Buffer::from_raw(raw))
    }
}

/// A raw copy to host in flight, from [`Buffer::copy_raw_to_host_async`]. Dropping it
/// before [`RawCopy::wait`] blocks until the copy is over (the plugin is writing into
/// memory this value owns).
pub struct RawCopy {
    raw: raw::external::RawCopy<BufferMeta>,
}

impl std::fmt::Debug for RawCopy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.raw.is_ready() {
            Ok(true) => "done",
            Ok(false) => "pending",
            Err(_) => "unknown",
        };
        write!(f, "RawCopy({state})")
    }
}

impl RawCopy {
    /// Whether the copy has finished (successfully or not).
    pub fn is_ready(&self) -> Result<bool> {
        self.raw.is_ready()
    }

    /// Waits for the copy and returns the bytes, or the copy's error.
    pub fn wait(self) -> Result<Vec<u8>> {
        self.raw.wait()
    }
}

impl Buffer {
    /// Starts copying `len` bytes from byte `offset` of the buffer's on-device form to host
    /// memory (`PJRT_Buffer_CopyRawToHost`) and returns at once; [`RawCopy::wait`] gives the
    /// bytes. The range is checked against the on-device size first. The synchronous form is
    /// [`Buffer::copy_raw_to_host`].
    pub fn copy_raw_to_host_async(&self, offset: usize, len: usize) -> Result<RawCopy> {
        self.check_raw_read(offset, len)?;
        let mut dst = crate::dtype::try_alloc(len, "the raw copy's destination")?;
        // Reserved above, so this does not allocate again.
        dst.resize(len, 0);
        let raw = raw::external::RawCopy::start(self.raw(), offset, dst)?;
        Ok(RawCopy { raw })
    }
}
