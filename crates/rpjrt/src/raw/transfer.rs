//! Raw pieces of transfers: huge-page staging memory for full-speed host copies, buffers
//! without host data (uninitialised, error), partial raw reads, and the async host-to-device
//! transfer manager.
//!
//! Every entry here may be missing from a plugin's table; the `pjrt!` call helper turns a
//! missing one into `Error::Unsupported` naming it.

// C `int`/`size_t` fields are cast explicitly so the code stays right where they differ.
#![allow(clippy::unnecessary_cast)]

use std::ffi::c_void;
use std::ptr::null_mut;

use rpjrt_sys as sys;

use super::calls::{BufferPtr, ClientPtr, DevicePtr, EventPtr, MemoryPtr};
use super::hostmem::HostBytes;
use super::{args_types, pjrt, Api, Args};
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
const HUGE_PAGE: usize = 2 << 20;

/// Anonymous host memory mapped for this transfer and advised to use transparent huge
/// pages (`madvise(MADV_HUGEPAGE)`), so that first touching it costs one fault per 2 MiB
/// instead of one per 4 KiB. It is filled once through [`Staging::as_mut`] and then lent
/// to the plugin read-only (it implements [`HostBytes`]); unmapped on drop.
///
/// Only this memory is advised; process-wide malloc settings are untouched.
pub(crate) struct Staging {
    map: *mut c_void,
    map_len: usize,
    data: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned exclusively by this value; moving it to another thread or
// sharing `&Staging` (which only reads) is as safe as for a `Box<[u8]>`.
unsafe impl Send for Staging {}
// SAFETY: see `Send`; `&Staging` gives read access only.
unsafe impl Sync for Staging {}

impl Staging {
    /// Maps `len` bytes (at least one page) starting on a 2 MiB boundary. Errors with
    /// `ResourceExhausted` when the kernel refuses the mapping.
    pub(crate) fn new(len: usize) -> Result<Staging> {
        let want = len
            .checked_next_multiple_of(HUGE_PAGE)
            .and_then(|n| n.checked_add(HUGE_PAGE))
            .ok_or_else(|| Error::ResourceExhausted(format!("{len} bytes of staging memory")))?;
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
        // SAFETY: `data` is less than HUGE_PAGE bytes into a mapping of `want >= len +
        // HUGE_PAGE` bytes, so it and the `len` bytes after it lie inside the mapping.
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
            len,
        })
    }

    /// The memory, for filling it before it is lent.
    pub(crate) fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: `data..data+len` lies in our live mapping (see `new`), which is readable
        // and writable, zero-filled by the kernel on first touch, and reachable only through
        // `self`, borrowed mutably here.
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
}

// ----------------------------------------------------------------- buffers without data

/// `PJRT_Client_CreateUninitializedBuffer`: a dense buffer whose contents are unspecified.
pub(crate) fn create_uninitialized_buffer(
    api: &Api,
    c: ClientPtr,
    ty: i32,
    dims: &[i64],
    device: DevicePtr,
    memory: Option<MemoryPtr>,
) -> Result<BufferPtr> {
    let mut a = sys::PJRT_Client_CreateUninitializedBuffer_Args::new();
    a.client = c.0;
    a.shape_dims = dims.as_ptr();
    a.shape_num_dims = dims.len();
    a.shape_element_type = ty as sys::PJRT_Buffer_Type;
    a.device = device.0;
    a.memory = memory.map_or(null_mut(), |m| m.0);
    // SAFETY: live client/device/memory of that client (the caller's `Client` checked);
    // `dims` outlives the call; the layout pointer is null (the default layout).
    unsafe { pjrt!(api, PJRT_Client_CreateUninitializedBuffer, &mut a) }?;
    if a.buffer.is_null() {
        return Err(Error::invalid(
            "PJRT_Client_CreateUninitializedBuffer returned no buffer",
        ));
    }
    Ok(BufferPtr(a.buffer))
}

/// `PJRT_Client_CreateErrorBuffer`: a buffer that carries an error instead of data.
pub(crate) fn create_error_buffer(
    api: &Api,
    c: ClientPtr,
    code: i32,
    message: &str,
    ty: i32,
    dims: &[i64],
    memory: MemoryPtr,
) -> Result<BufferPtr> {
    let mut a = sys::PJRT_Client_CreateErrorBuffer_Args::new();
    a.client = c.0;
    a.error_code = code as sys::PJRT_Error_Code;
    a.error_message = message.as_ptr().cast();
    a.error_message_size = message.len();
    a.shape_dims = dims.as_ptr();
    a.shape_num_dims = dims.len();
    a.shape_element_type = ty as sys::PJRT_Buffer_Type;
    a.memory = memory.0;
    // SAFETY: live client and memory; message and dims outlive the call (the plugin copies
    // the message); no payload and the default layout.
    unsafe { pjrt!(api, PJRT_Client_CreateErrorBuffer, &mut a) }?;
    if a.buffer.is_null() {
        return Err(Error::invalid(
            "PJRT_Client_CreateErrorBuffer returned no buffer",
        ));
    }
    Ok(BufferPtr(a.buffer))
}

/// `PJRT_Buffer_CopyRawToHost` of `dst.len()` bytes from byte `offset` of the buffer's
/// on-device representation, waiting for the copy to finish.
///
/// The caller has checked `offset + dst.len()` against the buffer's on-device size.
pub(crate) fn copy_raw_to_host_blocking(
    api: &Api,
    b: BufferPtr,
    offset: usize,
    dst: &mut [u8],
) -> Result<()> {
    let mut a = sys::PJRT_Buffer_CopyRawToHost_Args::new();
    a.buffer = b.0;
    a.dst = dst.as_mut_ptr().cast();
    a.offset = offset as i64;
    a.transfer_size = dst.len() as i64;
    // SAFETY: live buffer; `dst` is exclusively borrowed for the whole function and we wait
    // for the copy's event before returning, so the plugin's writes end inside the borrow.
    unsafe { pjrt!(api, PJRT_Buffer_CopyRawToHost, &mut a) }?;
    if !a.event.is_null() {
        let ev = EventPtr(a.event);
        let r = super::event::event_await(api, ev);
        let _ = super::event::event_destroy(api, ev);
        r?;
    }
    Ok(())
}

// ------------------------------------------------------------------- transfer manager

/// An owned `PJRT_AsyncHostToDeviceTransferManager*`, destroyed on drop.
pub(crate) struct TransferManager {
    api: &'static Api,
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
    pub(crate) fn create(
        api: &'static Api,
        c: ClientPtr,
        shapes: &[(i32, Vec<i64>)],
        memory: MemoryPtr,
    ) -> Result<TransferManager> {
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
        a.client = c.0;
        a.shape_specs = specs.as_mut_ptr();
        a.num_shape_specs = specs.len();
        a.memory = memory.0;
        // SAFETY: live client and memory; the specs and the dims they point to outlive the
        // call; no device layouts.
        unsafe { pjrt!(api, PJRT_Client_CreateBuffersForAsyncHostToDevice, &mut a) }?;
        if a.transfer_manager.is_null() {
            return Err(Error::invalid(
                "PJRT_Client_CreateBuffersForAsyncHostToDevice returned no transfer manager",
            ));
        }
        Ok(TransferManager {
            api,
            ptr: a.transfer_manager,
        })
    }

    /// `PJRT_AsyncHostToDeviceTransferManager_BufferCount`.
    pub(crate) fn buffer_count(&self) -> Result<usize> {
        let mut a = sys::PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args::new();
        a.transfer_manager = self.ptr;
        // SAFETY: live manager.
        unsafe {
            pjrt!(
                self.api,
                PJRT_AsyncHostToDeviceTransferManager_BufferCount,
                &mut a
            )
        }?;
        Ok(a.buffer_count)
    }

    /// `PJRT_AsyncHostToDeviceTransferManager_BufferSize`: on-device bytes of buffer `index`.
    pub(crate) fn buffer_size(&self, index: usize) -> Result<usize> {
        let mut a = sys::PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args::new();
        a.transfer_manager = self.ptr;
        a.buffer_index = index as i32;
        // SAFETY: live manager; the index was checked against the count by the caller (the
        // plugin checks too).
        unsafe {
            pjrt!(
                self.api,
                PJRT_AsyncHostToDeviceTransferManager_BufferSize,
                &mut a
            )
        }?;
        Ok(a.buffer_size)
    }

    /// `PJRT_AsyncHostToDeviceTransferManager_TransferData` of `data` at byte `offset` of
    /// buffer `index`; waits until the plugin is done with `data` before returning.
    pub(crate) fn transfer_blocking(
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
                self.api,
                PJRT_AsyncHostToDeviceTransferManager_TransferData,
                &mut a
            )
        }?;
        if !a.done_with_h2d_transfer.is_null() {
            let ev = EventPtr(a.done_with_h2d_transfer);
            let r = super::event::event_await(self.api, ev);
            let _ = super::event::event_destroy(self.api, ev);
            r?;
        }
        Ok(())
    }

    /// `PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer`: the caller owns the result.
    pub(crate) fn retrieve(&self, index: usize) -> Result<BufferPtr> {
        let mut a = sys::PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args::new();
        a.transfer_manager = self.ptr;
        a.buffer_index = index as i32;
        // SAFETY: live manager; each index is retrieved once by the caller.
        unsafe {
            pjrt!(
                self.api,
                PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer,
                &mut a
            )
        }?;
        if a.buffer_out.is_null() {
            return Err(Error::invalid(
                "PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer returned no buffer",
            ));
        }
        Ok(BufferPtr(a.buffer_out))
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
                self.api,
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
pub(crate) struct AliasCallback(*mut sys::PJRT_FulfillAliasBufferCallback);

// SAFETY: an opaque plugin object handed back to the plugin exactly once; the C API does
// not tie it to a thread.
unsafe impl Send for AliasCallback {}
// SAFETY: see `Send`; it is only read through `&mut`/by value.
unsafe impl Sync for AliasCallback {}

/// `PJRT_Client_CreateAliasBuffer`: a buffer in `memory` whose contents come later from
/// another buffer (or an error) through [`fulfill_alias_buffer`].
pub(crate) fn create_alias_buffer(
    api: &Api,
    c: ClientPtr,
    memory: MemoryPtr,
    ty: i32,
    dims: &[i64],
) -> Result<(BufferPtr, AliasCallback)> {
    let mut a = sys::PJRT_Client_CreateAliasBuffer_Args::new();
    a.client = c.0;
    a.memory = memory.0;
    a.shape_dims = dims.as_ptr();
    a.shape_num_dims = dims.len();
    a.shape_element_type = ty as sys::PJRT_Buffer_Type;
    // Some plugins need an explicit layout here: dense row-major.
    let m2m: Vec<i64> = (0..dims.len() as i64).rev().collect();
    // SAFETY: both are C API structs starting with `struct_size`, valid when zeroed.
    let mut layout: sys::PJRT_Buffer_MemoryLayout =
        unsafe { zeroed_args(sys::PJRT_Buffer_MemoryLayout_STRUCT_SIZE) };
    layout.r#type = sys::PJRT_Buffer_MemoryLayout_Type_Tiled;
    // SAFETY: as above.
    let mut tiled: sys::PJRT_Buffer_MemoryLayout_Tiled =
        unsafe { zeroed_args(sys::PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE) };
    tiled.minor_to_major = m2m.as_ptr();
    tiled.minor_to_major_size = m2m.len();
    layout.layout.tiled = tiled;
    a.shape_layout = &mut layout;
    // SAFETY: live client and memory; dims, the layout and its minor-to-major array
    // outlive the call.
    unsafe { pjrt!(api, PJRT_Client_CreateAliasBuffer, &mut a) }?;
    if a.alias_buffer.is_null() || a.fulfill_alias_buffer_cb.is_null() {
        return Err(Error::invalid(
            "PJRT_Client_CreateAliasBuffer returned no buffer or no fulfil callback",
        ));
    }
    Ok((
        BufferPtr(a.alias_buffer),
        AliasCallback(a.fulfill_alias_buffer_cb),
    ))
}

/// `PJRT_Client_FulfillAliasBuffer`: completes an alias buffer with `target`'s contents, or
/// with the error `code`/`message` when `target` is `None`.
pub(crate) fn fulfill_alias_buffer(
    api: &Api,
    c: ClientPtr,
    cb: AliasCallback,
    target: Option<BufferPtr>,
    code: i32,
    message: &str,
) -> Result<()> {
    let mut a = sys::PJRT_Client_FulfillAliasBuffer_Args::new();
    a.client = c.0;
    a.buffer = target.map_or(null_mut(), |b| b.0);
    a.status_code = if target.is_some() { 0 } else { code } as sys::PJRT_Error_Code;
    a.error_message = message.as_ptr().cast();
    a.error_message_size = message.len();
    a.fulfill_alias_buffer_cb = cb.0;
    // SAFETY: live client; the callback came from create_alias_buffer of this client and is
    // consumed here exactly once (taken by value); the target buffer is live.
    unsafe { pjrt!(api, PJRT_Client_FulfillAliasBuffer, &mut a) }
}

/// A zeroed C API struct with `struct_size` set, for types whose crate-wide `Args` impl
/// another raw module may declare (two impls of the trait for one type would not compile).
///
/// # Safety
/// `T` must be a `#[repr(C)]` C API struct whose first field is `size_t struct_size` and
/// for which all-zero bytes are a valid value.
pub(crate) unsafe fn zeroed_args<T>(struct_size: usize) -> T {
    let mut v = std::mem::MaybeUninit::<T>::zeroed();
    // SAFETY: per the contract, the struct starts with a `usize` and zero is valid.
    unsafe {
        v.as_mut_ptr().cast::<usize>().write(struct_size);
        v.assume_init()
    }
}

// ------------------------------------------------------------- put with a device layout

/// `PJRT_Client_BufferFromHostBuffer` of dense row-major `data`, copied during the call,
/// asking for a device layout with the given minor-to-major order.
///
/// The caller has checked that `data` holds exactly the dense array of `ty[dims]` and that
/// `minor_to_major` is a permutation of the dimensions.
#[allow(clippy::too_many_arguments)]
pub(crate) fn buffer_from_host_with_layout(
    api: &Api,
    c: ClientPtr,
    data: &[u8],
    ty: i32,
    dims: &[i64],
    minor_to_major: &[i64],
    device: DevicePtr,
    memory: Option<MemoryPtr>,
) -> Result<BufferPtr> {
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
    let mut a = sys::PJRT_Client_BufferFromHostBuffer_Args::new();
    a.client = c.0;
    a.data = data.as_ptr().cast();
    a.r#type = ty as sys::PJRT_Buffer_Type;
    a.dims = dims.as_ptr();
    a.num_dims = dims.len();
    a.host_buffer_semantics = sys::PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
    a.device = device.0;
    a.memory = memory.map_or(null_mut(), |m| m.0);
    a.device_layout = &mut layout;
    // SAFETY: `data` covers the dense array (checked by the caller) and is copied during the
    // call; dims, the layout and its minor-to-major array outlive the call.
    unsafe { pjrt!(api, PJRT_Client_BufferFromHostBuffer, &mut a) }?;
    if !a.done_with_host_buffer.is_null() {
        let _ = super::event::event_destroy(api, EventPtr(a.done_with_host_buffer));
    }
    if a.buffer.is_null() {
        return Err(Error::invalid(
            "PJRT_Client_BufferFromHostBuffer returned no buffer",
        ));
    }
    Ok(BufferPtr(a.buffer))
}

/// `PJRT_Buffer_ToHostBuffer` into `dst` with an explicit dense row-major host layout,
/// waiting for the copy. Without a host layout some plugins (0.115) copy the device
/// layout's bytes as they are, which for a non-default device layout is not row-major.
pub(crate) fn buffer_to_host_row_major_blocking(
    api: &Api,
    b: BufferPtr,
    rank: usize,
    dst: &mut [u8],
) -> Result<()> {
    let m2m: Vec<i64> = (0..rank as i64).rev().collect();
    // SAFETY: C API structs starting with `struct_size`, valid when zeroed.
    let mut layout: sys::PJRT_Buffer_MemoryLayout =
        unsafe { zeroed_args(sys::PJRT_Buffer_MemoryLayout_STRUCT_SIZE) };
    layout.r#type = sys::PJRT_Buffer_MemoryLayout_Type_Tiled;
    // SAFETY: as above.
    let mut tiled: sys::PJRT_Buffer_MemoryLayout_Tiled =
        unsafe { zeroed_args(sys::PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE) };
    tiled.minor_to_major = m2m.as_ptr();
    tiled.minor_to_major_size = m2m.len();
    layout.layout.tiled = tiled;
    let mut a = sys::PJRT_Buffer_ToHostBuffer_Args::new();
    a.src = b.0;
    a.host_layout = &mut layout;
    a.dst = dst.as_mut_ptr().cast();
    a.dst_size = dst.len();
    // SAFETY: live buffer; `dst` is exclusively borrowed for the whole function and we wait
    // for the event before returning; the layout outlives the call.
    unsafe { pjrt!(api, PJRT_Buffer_ToHostBuffer, &mut a) }?;
    if !a.event.is_null() {
        let ev = EventPtr(a.event);
        let r = super::event::event_await(api, ev);
        let _ = super::event::event_destroy(api, ev);
        r?;
    }
    Ok(())
}
