//! Raw pieces of transfers: huge-page staging memory for full-speed host copies, buffers
//! without host data (uninitialised, error), partial raw reads, and the async host-to-device
//! transfer manager.
//!
//! Every entry here may be missing from a plugin's table; the `pjrt!` call helper turns a
//! missing one into `Error::Unsupported` naming it.

// C `int`/`size_t` fields are cast explicitly so the code stays right where they differ.
#![allow(clippy::unnecessary_cast)]

use std::ffi::c_void;
use std::ptr::{null_mut, NonNull};
use std::sync::Arc;

use rpjrt_sys as sys;

use super::buffer::Buffer;
use super::client::Client;
use super::device::{DeviceRef, MemoryRef};
use super::event::Event;
use super::hostmem::HostBytes;
use super::{args_types, pjrt, Args};
use crate::error::{Error, Result};

args_types! {
    PJRT_Client_CreateUninitializedBuffer_Args => PJRT_Client_CreateUninitializedBuffer_Args_STRUCT_SIZE,
    PJRT_Client_CreateErrorBuffer_Args => PJRT_Client_CreateErrorBuffer_Args_STRUCT_SIZE,
    PJRT_Buffer_CopyRawToHost_Args => PJRT_Buffer_CopyRawToHost_Args_STRUCT_SIZE,
    PJRT_ShapeSpec => PJRT_ShapeSpec_STRUCT_SIZE,
    PJRT_Client_CreateBuffersForAsyncHostToDevice_Args => PJRT_Client_CreateBuffersForAsyncHostToDevice_Args_STRUCT_SIZE,
    PJRT_AsyncHostToDeviceTransferManager_Destroy_Args => PJRT_AsyncHostToDeviceTransferManager_Destroy_Args_STRUCT_SIZE,
    PJRT_AsyncHostToDeviceTransferManager_TransferData_Args => PJRT_AsyncHostToDeviceTransferManager_TransferData_Args_STRUCT_SIZE,
    PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args => PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args_STRUCT_SIZE,
    PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args => PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args_STRUCT_SIZE,
    PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args => PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args_STRUCT_SIZE,
}

// ---------------------------------------------------------------------- huge-page staging

/// Size of a transparent huge page on x86-64 and most aarch64 kernels.
pub const HUGE_PAGE: usize = 2 << 20;

/// Anonymous host memory mapped for transfers and advised to use transparent huge pages
/// (`madvise(MADV_HUGEPAGE)`), so that first touching it costs one fault per 2 MiB instead
/// of one per 4 KiB. Its data starts on a 2 MiB boundary (so 64-byte aligned, which XLA's
/// CPU plugins need to use host memory in place). A block has a capacity (whole huge pages)
/// and a length, the bytes it currently lends; it is filled through [`Staging::as_mut`]
/// and then lent to the plugin read-only (it implements [`HostBytes`]); unmapped on drop.
/// A pool may keep a block after its use and lend it again ([`Leased`]), with its pages
/// already faulted in.
///
/// Only this memory is advised; process-wide malloc settings are untouched.
pub struct Staging {
    map: *mut c_void,
    map_len: usize,
    data: *mut u8,
    cap: usize,
    len: usize,
}

// SAFETY: the mapping is owned exclusively by this value; moving it to another thread or
// sharing `&Staging` (which only reads) is as safe as for a `Box<[u8]>`.
unsafe impl Send for Staging {}
// SAFETY: see `Send`; `&Staging` gives read access only.
unsafe impl Sync for Staging {}

impl Staging {
    /// Maps `len` bytes rounded up to whole huge pages (at least one) starting on a 2 MiB
    /// boundary. Errors with `ResourceExhausted` when the kernel refuses the mapping.
    pub fn new(len: usize) -> Result<Staging> {
        let too_big = || Error::ResourceExhausted(format!("{len} bytes of staging memory"));
        let cap = len
            .max(1)
            .checked_next_multiple_of(HUGE_PAGE)
            .ok_or_else(too_big)?;
        let want = cap.checked_add(HUGE_PAGE).ok_or_else(too_big)?;
        // SAFETY: an anonymous private mapping with no address hint; the kernel picks the
        // address and the call has no other effect on existing memory.
        let map = unsafe {
            libc::mmap(
                null_mut(),
                want,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(Error::ResourceExhausted(format!(
                "mapping {want} bytes of staging memory failed: {}",
                std::io::Error::last_os_error()
            )));
        }
        let start = (map as usize).next_multiple_of(HUGE_PAGE);
        let data = (start - map as usize) as isize;
        // SAFETY: `data` is less than HUGE_PAGE bytes into a mapping of `want = cap +
        // HUGE_PAGE` bytes, so it and the `cap` bytes after it lie inside the mapping.
        let data = unsafe { map.cast::<u8>().offset(data) };
        // SAFETY: advising our own fresh mapping; failure (no THP support) only means the
        // memory uses normal pages, so the result is ignored.
        unsafe {
            libc::madvise(map, want, libc::MADV_HUGEPAGE);
        }
        Ok(Staging {
            map,
            map_len: want,
            data,
            cap,
            len,
        })
    }
}

impl Staging {
    /// The bytes this block can hold (whole huge pages).
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Sets the length of the block's data (the bytes `as_mut` and
    /// [`HostBytes::bytes`] give); `None` when `len` exceeds the capacity.
    pub fn with_len(mut self, len: usize) -> Option<Staging> {
        if len > self.cap {
            return None;
        }
        self.len = len;
        Some(self)
    }
}

/// The memory, for filling it before it is lent.
impl AsMut<[u8]> for Staging {
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: `data..data+len` lies in our live mapping (`len <= cap`, see `new`), which
        // is readable and writable, zero-filled by the kernel on first touch, and reachable
        // only through `self`, borrowed mutably here.
        unsafe { std::slice::from_raw_parts_mut(self.data, self.len) }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping `new` created, once; no slice of it outlives
        // `self` (they all borrow it).
        unsafe {
            libc::munmap(self.map, self.map_len);
        }
    }
}

// SAFETY: the slice is always the same range of a mapping owned by `self`; after the value
// is shared (behind an `Arc`) it can no longer be reached mutably, so nobody but the plugin
// it is lent to touches it, and it stays mapped until `self` is dropped.
unsafe impl HostBytes for Staging {
    fn bytes(&self) -> &[u8] {
        // SAFETY: as in `as_mut`, for shared access.
        unsafe { std::slice::from_raw_parts(self.data, self.len) }
    }

    fn is_private(&self) -> bool {
        true
    }
}

/// Where a [`Leased`] block goes when its last user is gone (a pool keeps or unmaps it).
pub trait Reclaim: Send + Sync + 'static {
    /// Takes the block back. Called exactly once per lease, from whichever thread dropped
    /// the last user (a buffer's destruction, possibly on the reaper thread); it must not
    /// call into a plugin.
    fn reclaim(&self, block: Staging);
}

/// A staging block lent by a pool: it lends the block's bytes like [`Staging`] and, when
/// dropped, hands the block to its [`Reclaim`] instead of unmapping it. A buffer drops its
/// host owner only after the plugin has said it is done with the memory (the buffer is
/// destroyed and its done-with-host-buffer event has fired), so a block returns to the pool
/// only once nothing reads it any more.
pub struct Leased {
    block: Option<Staging>,
    pool: Arc<dyn Reclaim>,
}

impl Leased {
    /// Lends `block` (already filled) on behalf of `pool`.
    pub fn new(block: Staging, pool: Arc<dyn Reclaim>) -> Leased {
        Leased {
            block: Some(block),
            pool,
        }
    }
}

impl Drop for Leased {
    fn drop(&mut self) {
        if let Some(b) = self.block.take() {
            self.pool.reclaim(b);
        }
    }
}

// SAFETY: as for `Staging`: the slice is the same range of the block on every call, the
// block is reachable only through `&self` until `drop` moves it back to its pool (after
// every borrow of `self` has ended), and it stays mapped while it is held here.
unsafe impl HostBytes for Leased {
    fn bytes(&self) -> &[u8] {
        match &self.block {
            Some(b) => b.bytes(),
            None => &[],
        }
    }

    fn is_private(&self) -> bool {
        true
    }
}

// ----------------------------------------------------------------- buffers without data

fn check_views(
    client: &Client,
    device: Option<DeviceRef>,
    memory: Option<MemoryRef>,
) -> Result<()> {
    if device.is_some_and(|d| !d.belongs_to(client))
        || memory.is_some_and(|m| !m.belongs_to(client))
    {
        return Err(Error::invalid(
            "the device or memory belongs to another client",
        ));
    }
    Ok(())
}

fn wrap<M>(
    client: &Arc<Client>,
    ptr: *mut sys::PJRT_Buffer,
    entry: &str,
    meta: M,
) -> Result<Buffer<M>> {
    let ptr =
        NonNull::new(ptr).ok_or_else(|| Error::invalid(format!("{entry} returned no buffer")))?;
    Ok(Buffer::new(client, ptr, meta, None, None))
}

/// `PJRT_Client_CreateUninitializedBuffer`: a dense buffer whose contents are unspecified.
pub fn create_uninitialized_buffer<M>(
    client: &Arc<Client>,
    ty: i32,
    dims: &[i64],
    device: DeviceRef,
    memory: Option<MemoryRef>,
    meta: M,
) -> Result<Buffer<M>> {
    check_views(client, Some(device), memory)?;
    let mut a = sys::PJRT_Client_CreateUninitializedBuffer_Args::new();
    a.client = client.ptr();
    a.shape_dims = dims.as_ptr();
    a.shape_num_dims = dims.len();
    a.shape_element_type = ty as sys::PJRT_Buffer_Type;
    a.device = device.ptr();
    a.memory = memory.map_or(null_mut(), |m| m.ptr());
    // SAFETY: live client, and a device/memory it listed (checked above); `dims` outlives
    // the call; the layout pointer is null (the default layout).
    unsafe { pjrt!(client.api(), PJRT_Client_CreateUninitializedBuffer, &mut a) }?;
    wrap(
        client,
        a.buffer,
        "PJRT_Client_CreateUninitializedBuffer",
        meta,
    )
}

/// `PJRT_Client_CreateErrorBuffer`: a buffer that carries an error instead of data.
#[allow(clippy::too_many_arguments)]
pub fn create_error_buffer<M>(
    client: &Arc<Client>,
    code: i32,
    message: &str,
    ty: i32,
    dims: &[i64],
    memory: MemoryRef,
    meta: M,
) -> Result<Buffer<M>> {
    check_views(client, None, Some(memory))?;
    let mut a = sys::PJRT_Client_CreateErrorBuffer_Args::new();
    a.client = client.ptr();
    a.error_code = code as sys::PJRT_Error_Code;
    a.error_message = message.as_ptr().cast();
    a.error_message_size = message.len();
    a.shape_dims = dims.as_ptr();
    a.shape_num_dims = dims.len();
    a.shape_element_type = ty as sys::PJRT_Buffer_Type;
    a.memory = memory.ptr();
    // SAFETY: live client and a memory it listed; message and dims outlive the call (the
    // plugin copies the message); no payload and the default layout.
    unsafe { pjrt!(client.api(), PJRT_Client_CreateErrorBuffer, &mut a) }?;
    wrap(client, a.buffer, "PJRT_Client_CreateErrorBuffer", meta)
}

impl<M> Buffer<M> {
    /// `PJRT_Buffer_CopyRawToHost` of `dst.len()` bytes from byte `offset` of the buffer's
    /// on-device representation, waiting for the copy to finish. The caller has checked the
    /// range against the on-device size.
    pub fn copy_raw_to_host(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        let mut a = sys::PJRT_Buffer_CopyRawToHost_Args::new();
        a.buffer = self.ptr();
        a.dst = dst.as_mut_ptr().cast();
        a.offset = offset as i64;
        a.transfer_size = dst.len() as i64;
        // SAFETY: live buffer; `dst` is exclusively borrowed for the whole function and we
        // wait for the copy's event before returning.
        unsafe { pjrt!(self.client().api(), PJRT_Buffer_CopyRawToHost, &mut a) }?;
        match Event::new(self.client(), a.event) {
            Some(ev) => ev.wait(),
            None => Ok(()),
        }
    }

    /// Whether the device layout is dense row-major (no tiles, `[rank-1, ..., 0]`).
    pub fn layout_is_row_major(&self) -> Result<bool> {
        Ok(match self.layout()? {
            Some(m2m) => {
                let n = m2m.len() as i64;
                m2m.iter().enumerate().all(|(i, &d)| d == n - 1 - i as i64)
            }
            None => false,
        })
    }

    /// `PJRT_Buffer_ToHostBuffer` into `dst` with an explicit dense row-major host layout,
    /// waiting for the copy. Without a host layout some plugins (0.115) copy the device
    /// layout's bytes as they are, which for a non-default device layout is not row-major.
    pub fn to_host_row_major(&self, rank: usize, dst: &mut [u8]) -> Result<()> {
        let m2m: Vec<i64> = (0..rank as i64).rev().collect();
        let mut layout = dense_layout(&m2m);
        let mut a = sys::PJRT_Buffer_ToHostBuffer_Args::new();
        a.src = self.ptr();
        a.host_layout = &mut layout.0;
        a.dst = dst.as_mut_ptr().cast();
        a.dst_size = dst.len();
        // SAFETY: live buffer; `dst` is exclusively borrowed for the whole function and we
        // wait for the event before returning; the layout and `m2m` outlive the call.
        unsafe { pjrt!(self.client().api(), PJRT_Buffer_ToHostBuffer, &mut a) }?;
        match Event::new(self.client(), a.event) {
            Some(ev) => ev.wait(),
            None => Ok(()),
        }
    }
}

/// A `PJRT_Buffer_MemoryLayout` of the tiled kind with no tiles and the given
/// minor-to-major order (which must outlive every use of the layout).
struct DenseLayout(sys::PJRT_Buffer_MemoryLayout);

fn dense_layout(minor_to_major: &[i64]) -> DenseLayout {
    // SAFETY: C API structs starting with `struct_size`, valid when zeroed.
    let mut layout: sys::PJRT_Buffer_MemoryLayout =
        unsafe { zeroed_args(sys::PJRT_Buffer_MemoryLayout_STRUCT_SIZE) };
    layout.r#type = sys::PJRT_Buffer_MemoryLayout_Type_Tiled;
    // SAFETY: as above.
    let mut tiled: sys::PJRT_Buffer_MemoryLayout_Tiled =
        unsafe { zeroed_args(sys::PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE) };
    tiled.minor_to_major = minor_to_major.as_ptr();
    tiled.minor_to_major_size = minor_to_major.len();
    layout.layout.tiled = tiled;
    DenseLayout(layout)
}

// ------------------------------------------------------------------- transfer manager

/// An owned `PJRT_AsyncHostToDeviceTransferManager*`, destroyed on drop.
pub struct TransferManager {
    client: Arc<Client>,
    ptr: *mut sys::PJRT_AsyncHostToDeviceTransferManager,
}

// SAFETY: the manager is a thread-safe plugin object by the C API's contract; this owner
// destroys it once, and `&self` methods are plain C calls.
unsafe impl Send for TransferManager {}
// SAFETY: see `Send`.
unsafe impl Sync for TransferManager {}

impl TransferManager {
    /// `PJRT_Client_CreateBuffersForAsyncHostToDevice` for buffers of `(type code, dims)`
    /// in `memory`, with default layouts.
    pub fn create(
        client: &Arc<Client>,
        shapes: &[(i32, Vec<i64>)],
        memory: MemoryRef,
    ) -> Result<TransferManager> {
        check_views(client, None, Some(memory))?;
        let mut specs: Vec<sys::PJRT_ShapeSpec> = shapes
            .iter()
            .map(|(ty, dims)| {
                let mut s = sys::PJRT_ShapeSpec::new();
                s.dims = dims.as_ptr();
                s.num_dims = dims.len();
                s.element_type = *ty as sys::PJRT_Buffer_Type;
                s
            })
            .collect();
        let mut a = sys::PJRT_Client_CreateBuffersForAsyncHostToDevice_Args::new();
        a.client = client.ptr();
        a.shape_specs = specs.as_mut_ptr();
        a.num_shape_specs = specs.len();
        a.memory = memory.ptr();
        // SAFETY: live client and a memory it listed; the specs and the dims they point to
        // outlive the call; no device layouts.
        unsafe {
            pjrt!(
                client.api(),
                PJRT_Client_CreateBuffersForAsyncHostToDevice,
                &mut a
            )
        }?;
        if a.transfer_manager.is_null() {
            return Err(Error::invalid(
                "PJRT_Client_CreateBuffersForAsyncHostToDevice returned no transfer manager",
            ));
        }
        Ok(TransferManager {
            client: Arc::clone(client),
            ptr: a.transfer_manager,
        })
    }

    /// `PJRT_AsyncHostToDeviceTransferManager_BufferCount`.
    pub fn buffer_count(&self) -> Result<usize> {
        let mut a = sys::PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args::new();
        a.transfer_manager = self.ptr;
        // SAFETY: live manager.
        unsafe {
            pjrt!(
                self.client.api(),
                PJRT_AsyncHostToDeviceTransferManager_BufferCount,
                &mut a
            )
        }?;
        Ok(a.buffer_count)
    }

    /// `PJRT_AsyncHostToDeviceTransferManager_BufferSize`: on-device bytes of buffer `index`.
    pub fn buffer_size(&self, index: usize) -> Result<usize> {
        let mut a = sys::PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args::new();
        a.transfer_manager = self.ptr;
        a.buffer_index = index as i32;
        // SAFETY: live manager; the index was checked against the count by the caller.
        unsafe {
            pjrt!(
                self.client.api(),
                PJRT_AsyncHostToDeviceTransferManager_BufferSize,
                &mut a
            )
        }?;
        Ok(a.buffer_size)
    }

    /// `PJRT_AsyncHostToDeviceTransferManager_TransferData` of `data` at byte `offset` of
    /// buffer `index`; waits until the plugin is done with `data` before returning.
    pub fn transfer_blocking(
        &self,
        index: usize,
        data: &[u8],
        offset: usize,
        is_last: bool,
    ) -> Result<()> {
        let mut a = sys::PJRT_AsyncHostToDeviceTransferManager_TransferData_Args::new();
        a.transfer_manager = self.ptr;
        a.buffer_index = index as i32;
        a.data = data.as_ptr().cast();
        a.offset = offset as i64;
        a.transfer_size = data.len() as i64;
        a.is_last_transfer = is_last;
        // SAFETY: live manager; `data` is borrowed for the whole function and we wait for
        // the done event before returning, so the plugin's reads end inside the borrow.
        unsafe {
            pjrt!(
                self.client.api(),
                PJRT_AsyncHostToDeviceTransferManager_TransferData,
                &mut a
            )
        }?;
        match Event::new(&self.client, a.done_with_h2d_transfer) {
            Some(ev) => ev.wait(),
            None => Ok(()),
        }
    }

    /// `PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer`.
    pub fn retrieve<M>(&self, index: usize, meta: M) -> Result<Buffer<M>> {
        let mut a = sys::PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args::new();
        a.transfer_manager = self.ptr;
        a.buffer_index = index as i32;
        // SAFETY: live manager; each index is retrieved once by the caller.
        unsafe {
            pjrt!(
                self.client.api(),
                PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer,
                &mut a
            )
        }?;
        let mut b = wrap(
            &self.client,
            a.buffer_out,
            "PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer",
            meta,
        )?;
        b.mark_host_filled();
        Ok(b)
    }
}

impl Drop for TransferManager {
    fn drop(&mut self) {
        let mut a = sys::PJRT_AsyncHostToDeviceTransferManager_Destroy_Args::new();
        a.transfer_manager = self.ptr;
        // SAFETY: live manager owned by `self`, destroyed once; retrieved buffers are owned
        // separately and survive it.
        let _ = unsafe {
            pjrt!(
                self.client.api(),
                PJRT_AsyncHostToDeviceTransferManager_Destroy,
                &mut a
            )
        };
    }
}

// ------------------------------------------------------------------------ alias buffers

args_types! {
    PJRT_Client_CreateAliasBuffer_Args => PJRT_Client_CreateAliasBuffer_Args_STRUCT_SIZE,
    PJRT_Client_FulfillAliasBuffer_Args => PJRT_Client_FulfillAliasBuffer_Args_STRUCT_SIZE,
}

/// The plugin's promise to fulfil an alias buffer, consumed by [`fulfill_alias_buffer`].
pub struct AliasCallback(*mut sys::PJRT_FulfillAliasBufferCallback);

// SAFETY: an opaque plugin object handed back to the plugin exactly once; the C API does
// not tie it to a thread.
unsafe impl Send for AliasCallback {}
// SAFETY: see `Send`; it is only used by value.
unsafe impl Sync for AliasCallback {}

/// `PJRT_Client_CreateAliasBuffer`: a buffer in `memory` whose contents come later from
/// another buffer (or an error) through [`fulfill_alias_buffer`].
pub fn create_alias_buffer<M>(
    client: &Arc<Client>,
    memory: MemoryRef,
    ty: i32,
    dims: &[i64],
    meta: M,
) -> Result<(Buffer<M>, AliasCallback)> {
    check_views(client, None, Some(memory))?;
    let mut a = sys::PJRT_Client_CreateAliasBuffer_Args::new();
    a.client = client.ptr();
    a.memory = memory.ptr();
    a.shape_dims = dims.as_ptr();
    a.shape_num_dims = dims.len();
    a.shape_element_type = ty as sys::PJRT_Buffer_Type;
    // Some plugins (0.115) need an explicit layout here: dense row-major.
    let m2m: Vec<i64> = (0..dims.len() as i64).rev().collect();
    let mut layout = dense_layout(&m2m);
    a.shape_layout = &mut layout.0;
    // SAFETY: live client and a memory it listed; dims, the layout and its minor-to-major
    // array outlive the call.
    unsafe { pjrt!(client.api(), PJRT_Client_CreateAliasBuffer, &mut a) }?;
    if a.fulfill_alias_buffer_cb.is_null() {
        return Err(Error::invalid(
            "PJRT_Client_CreateAliasBuffer returned no fulfil callback",
        ));
    }
    let cb = AliasCallback(a.fulfill_alias_buffer_cb);
    let mut b = wrap(
        client,
        a.alias_buffer,
        "PJRT_Client_CreateAliasBuffer",
        meta,
    )?;
    b.mark_host_filled();
    Ok((b, cb))
}

/// `PJRT_Client_FulfillAliasBuffer`: completes an alias buffer with `target`'s contents, or
/// with the error `code`/`message` when `target` is `None`.
pub fn fulfill_alias_buffer<M>(
    client: &Arc<Client>,
    cb: AliasCallback,
    target: Option<&Buffer<M>>,
    code: i32,
    message: &str,
) -> Result<()> {
    let mut a = sys::PJRT_Client_FulfillAliasBuffer_Args::new();
    a.client = client.ptr();
    a.buffer = target.map_or(null_mut(), |b| b.ptr());
    a.status_code = if target.is_some() { 0 } else { code } as sys::PJRT_Error_Code;
    a.error_message = message.as_ptr().cast();
    a.error_message_size = message.len();
    a.fulfill_alias_buffer_cb = cb.0;
    // SAFETY: live client; the callback came from create_alias_buffer of this client and is
    // consumed here exactly once (taken by value); the target buffer is live.
    unsafe { pjrt!(client.api(), PJRT_Client_FulfillAliasBuffer, &mut a) }
}

// ------------------------------------------------------------- put with a device layout

/// `PJRT_Client_BufferFromHostBuffer` of dense row-major `data`, copied during the call,
/// asking for a device layout with the given minor-to-major order.
///
/// The caller has checked that `data` holds exactly the dense array of `ty[dims]` and that
/// `minor_to_major` is a permutation of the dimensions.
#[allow(clippy::too_many_arguments)]
pub fn buffer_from_host_with_layout<M>(
    client: &Arc<Client>,
    data: &[u8],
    ty: i32,
    dims: &[i64],
    minor_to_major: &[i64],
    device: DeviceRef,
    memory: Option<MemoryRef>,
    meta: M,
) -> Result<Buffer<M>> {
    check_views(client, Some(device), memory)?;
    let mut layout = dense_layout(minor_to_major);
    let mut a = sys::PJRT_Client_BufferFromHostBuffer_Args::new();
    a.client = client.ptr();
    a.data = data.as_ptr().cast();
    a.r#type = ty as sys::PJRT_Buffer_Type;
    a.dims = dims.as_ptr();
    a.num_dims = dims.len();
    a.host_buffer_semantics = sys::PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
    a.device = device.ptr();
    a.memory = memory.map_or(null_mut(), |m| m.ptr());
    a.device_layout = &mut layout.0;
    // SAFETY: `data` covers the dense array (checked by the caller) and is copied during the
    // call; dims, the layout and its minor-to-major array outlive the call.
    unsafe { pjrt!(client.api(), PJRT_Client_BufferFromHostBuffer, &mut a) }?;
    drop(Event::new(client, a.done_with_host_buffer));
    wrap(client, a.buffer, "PJRT_Client_BufferFromHostBuffer", meta)
}

/// A zeroed C API struct with `struct_size` set, for types whose crate-wide `Args` impl
/// another raw module may declare (two impls of the trait for one type would not compile).
///
/// # Safety
/// `T` must be a `#[repr(C)]` C API struct whose first field is `size_t struct_size` and
/// for which all-zero bytes are a valid value.
pub unsafe fn zeroed_args<T>(struct_size: usize) -> T {
    let mut v = std::mem::MaybeUninit::<T>::zeroed();
    // SAFETY: per the contract, the struct starts with a `usize` and zero is valid.
    unsafe {
        v.as_mut_ptr().cast::<usize>().write(struct_size);
        v.assume_init()
    }
}
