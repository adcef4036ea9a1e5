//! Buffers (host memory standing in for device memory) and events (always complete).

use std::sync::{Arc, Mutex, MutexGuard};

use rpjrt_sys as sys;

use crate::client::{client_ref, ClientInner};
use crate::config::ForcedError;
use crate::error::{invalid, unimplemented, Fail};
use crate::registry::{self, Kind};
use crate::state::{self, check_size, State};

/// Bytes per element of a PJRT buffer type, or None for types a buffer cannot hold
/// (INVALID, TOKEN, unknown codes). Sub-byte types take one byte per element, which is
/// how XLA lays them out on the host by default.
pub fn element_size(ty: sys::PJRT_Buffer_Type) -> Option<usize> {
    ELEMENT_SIZES
        .iter()
        .find(|(t, _)| *t == ty)
        .map(|(_, size)| *size)
}

const ELEMENT_SIZES: [(sys::PJRT_Buffer_Type, usize); 32] = [
    (sys::PJRT_Buffer_Type_PRED, 1),
    (sys::PJRT_Buffer_Type_S8, 1),
    (sys::PJRT_Buffer_Type_S16, 2),
    (sys::PJRT_Buffer_Type_S32, 4),
    (sys::PJRT_Buffer_Type_S64, 8),
    (sys::PJRT_Buffer_Type_U8, 1),
    (sys::PJRT_Buffer_Type_U16, 2),
    (sys::PJRT_Buffer_Type_U32, 4),
    (sys::PJRT_Buffer_Type_U64, 8),
    (sys::PJRT_Buffer_Type_F16, 2),
    (sys::PJRT_Buffer_Type_F32, 4),
    (sys::PJRT_Buffer_Type_F64, 8),
    (sys::PJRT_Buffer_Type_BF16, 2),
    (sys::PJRT_Buffer_Type_C64, 8),
    (sys::PJRT_Buffer_Type_C128, 16),
    (sys::PJRT_Buffer_Type_F8E5M2, 1),
    (sys::PJRT_Buffer_Type_F8E4M3FN, 1),
    (sys::PJRT_Buffer_Type_F8E4M3B11FNUZ, 1),
    (sys::PJRT_Buffer_Type_F8E5M2FNUZ, 1),
    (sys::PJRT_Buffer_Type_F8E4M3FNUZ, 1),
    (sys::PJRT_Buffer_Type_S4, 1),
    (sys::PJRT_Buffer_Type_U4, 1),
    (sys::PJRT_Buffer_Type_S2, 1),
    (sys::PJRT_Buffer_Type_U2, 1),
    (sys::PJRT_Buffer_Type_F8E4M3, 1),
    (sys::PJRT_Buffer_Type_F8E3M4, 1),
    (sys::PJRT_Buffer_Type_F8E8M0FNU, 1),
    (sys::PJRT_Buffer_Type_F4E2M1FN, 1),
    (sys::PJRT_Buffer_Type_S1, 1),
    (sys::PJRT_Buffer_Type_U1, 1),
    (sys::PJRT_Buffer_Type_F6E2M3FN, 1),
    (sys::PJRT_Buffer_Type_F6E3M2FN, 1),
];

/// Byte size of an array, with every overflow and negative dimension reported.
pub(crate) fn byte_size(ty: sys::PJRT_Buffer_Type, dims: &[i64]) -> Result<usize, Fail> {
    let elem = element_size(ty)
        .ok_or_else(|| invalid(format!("fake plugin: unsupported buffer element type {ty}")))?;
    let mut n = elem;
    for &d in dims {
        let d = usize::try_from(d)
            .map_err(|_| invalid(format!("fake plugin: negative dimension in {dims:?}")))?;
        n = n
            .checked_mul(d)
            .ok_or_else(|| invalid(format!("fake plugin: array {dims:?} is too large")))?;
    }
    Ok(n)
}

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Chunk([u8; 64]);

/// A byte array aligned to 64 bytes (so views of it suit any element type).
pub(crate) struct Bytes {
    chunks: Vec<Chunk>,
    len: usize,
    /// Device memory these bytes hold, if they back a buffer in `device` memory.
    charge: Option<crate::memory::Charge>,
}

impl Bytes {
    pub fn zeroed(len: usize) -> Bytes {
        Bytes {
            chunks: vec![Chunk([0; 64]); len.div_ceil(64)],
            len,
            charge: None,
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the chunks hold at least `len` initialised bytes; an empty vector's
        // pointer is dangling but aligned, which is fine for a zero-length slice.
        unsafe { std::slice::from_raw_parts(self.chunks.as_ptr().cast::<u8>(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as for as_slice, with unique access through &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.chunks.as_mut_ptr().cast::<u8>(), self.len) }
    }

    pub fn from_slice(bytes: &[u8]) -> Bytes {
        let mut b = Bytes::zeroed(bytes.len());
        b.as_mut_slice().copy_from_slice(bytes);
        b
    }
}

struct BufState {
    data: Option<Bytes>,
    deleted: bool,
    external_refs: usize,
}

/// The object behind a `PJRT_Buffer*`.
pub(crate) struct FakeBuffer {
    pub client: Arc<ClientInner>,
    pub device: usize,
    pub memory: usize,
    pub ty: sys::PJRT_Buffer_Type,
    pub dims: Vec<i64>,
    pub size: usize,
    state: Mutex<BufState>,
}

pub(crate) const DELETED_MESSAGE: &str = "Buffer has been deleted or donated.";

impl FakeBuffer {
    fn lock(&self) -> MutexGuard<'_, BufState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn is_deleted(&self) -> bool {
        self.lock().deleted
    }

    /// A copy of the contents, or an error if the buffer was deleted.
    pub fn read(&self) -> Result<Bytes, Fail> {
        let st = self.lock();
        match (&st.data, st.deleted) {
            (Some(d), false) => Ok(Bytes::from_slice(d.as_slice())),
            _ => Err(invalid(DELETED_MESSAGE)),
        }
    }

    /// Runs `f` on the contents, or fails if the buffer was deleted.
    fn with_data<R>(&self, f: impl FnOnce(&Bytes) -> R) -> Result<R, Fail> {
        let st = self.lock();
        match (&st.data, st.deleted) {
            (Some(d), false) => Ok(f(d)),
            _ => Err(invalid(DELETED_MESSAGE)),
        }
    }
}

/// Makes a caller-owned buffer; data in a `device` memory counts against the device's
/// limit (RESOURCE_EXHAUSTED past it).
pub(crate) fn new_buffer(
    client: Arc<ClientInner>,
    memory: usize,
    ty: sys::PJRT_Buffer_Type,
    dims: Vec<i64>,
    mut data: Bytes,
) -> Result<*mut sys::PJRT_Buffer, Fail> {
    let device = client.memories[memory].device;
    if client.memories[memory].kind_id == 0 {
        data.charge = Some(client.devices[device].memory.charge(data.len)?);
    }
    let raw = Box::into_raw(Box::new(FakeBuffer {
        client,
        device,
        memory,
        ty,
        dims,
        size: data.len,
        state: Mutex::new(BufState {
            data: Some(data),
            deleted: false,
            external_refs: 0,
        }),
    }));
    registry::register(raw, Kind::Buffer);
    Ok(raw.cast())
}

/// Frees a buffer made by `new_buffer` that was never handed to a caller.
pub(crate) fn free_buffer(buffer: *mut sys::PJRT_Buffer) {
    if registry::unregister(buffer.cast::<FakeBuffer>(), Kind::Buffer) {
        // SAFETY: it was live, so it came from Box::into_raw in new_buffer; now
        // unregistered, so this is the only free.
        drop(unsafe { Box::from_raw(buffer.cast::<FakeBuffer>()) });
    }
}

/// The live buffer behind `buffer`.
pub(crate) fn buffer_ref<'a>(buffer: *mut sys::PJRT_Buffer) -> Result<&'a FakeBuffer, Fail> {
    // SAFETY: handles of this kind are registered from Box::into_raw in new_buffer and
    // unregistered before they are freed; the caller keeps this one alive for the call.
    unsafe { registry::live_ref(buffer, Kind::Buffer) }
}

// ------------------------------------------------------------------- events

/// The object behind a `PJRT_Event*`: always complete, maybe with an error.
pub(crate) struct FakeEvent {
    error: Option<ForcedError>,
}

/// Makes a caller-owned, complete event.
pub(crate) fn new_event(error: Option<ForcedError>) -> *mut sys::PJRT_Event {
    let raw = Box::into_raw(Box::new(FakeEvent { error }));
    registry::register(raw, Kind::Event);
    raw.cast()
}

/// An event for `entry`, complete with the error the `EVENT_ERROR` knob gives it.
pub(crate) fn entry_event(state: &State, entry: &str) -> *mut sys::PJRT_Event {
    new_event(state::event_error(state, entry))
}

fn event_ref<'a>(event: *mut sys::PJRT_Event) -> Result<&'a FakeEvent, Fail> {
    // SAFETY: handles of this kind are registered from Box::into_raw in new_event and
    // unregistered before they are freed; the caller keeps this one alive for the call.
    unsafe { registry::live_ref(event, Kind::Event) }
}

entry_fn!(event_destroy, PJRT_Event_Destroy, |a, _| {
    let event = a.event;
    if event.is_null() {
        return Ok(());
    }
    if !registry::unregister(event.cast::<FakeEvent>(), Kind::Event) {
        return Err(invalid(format!(
            "fake plugin: PJRT_Event_Destroy: {event:p} is not a live PJRT_Event"
        )));
    }
    // SAFETY: it was live, so it came from Box::into_raw in new_event; now
    // unregistered, so this is the only free.
    drop(unsafe { Box::from_raw(event.cast::<FakeEvent>()) });
    Ok(())
});

entry_fn!(event_is_ready, PJRT_Event_IsReady, |a, _| {
    let event = a.event;
    event_ref(event)?;
    a.is_ready = true;
    Ok(())
});

entry_fn!(event_error, PJRT_Event_Error, |a, _| {
    let e = event_ref(a.event)?;
    match &e.error {
        Some(err) => Err(Fail::from(err)),
        None => Ok(()),
    }
});

entry_fn!(event_await, PJRT_Event_Await, |a, _| {
    let e = event_ref(a.event)?;
    match &e.error {
        Some(err) => Err(Fail::from(err)),
        None => Ok(()),
    }
});

entry_fn!(event_on_ready, PJRT_Event_OnReady, |a, _| {
    let e = event_ref(a.event)?;
    let callback = a
        .callback
        .ok_or_else(|| invalid("fake plugin: PJRT_Event_OnReady with a null callback"))?;
    let err = e
        .error
        .as_ref()
        .map(|f| Fail::from(f).into_raw())
        .unwrap_or(std::ptr::null_mut());
    // The event is complete, so the callback runs now, on this thread; it owns
    // `err`.
    // SAFETY: the caller registered this callback with this user_arg.
    unsafe { callback(err, a.user_arg) };
    Ok(())
});

// ------------------------------------------------------------------ layouts

fn dense_strides(elem: usize, dims: &[i64]) -> Vec<i64> {
    let mut strides = vec![0i64; dims.len()];
    let mut acc = elem as i64;
    for i in (0..dims.len()).rev() {
        strides[i] = acc;
        acc = acc.saturating_mul(dims[i].max(1));
    }
    strides
}

/// Accepts a layout only if it is the dense major-to-minor one.
///
/// # Safety
/// `layout` must be null or point at a layout valid up to its struct_size, whose
/// arrays are valid for their sizes.
unsafe fn check_dense_layout(
    state: &State,
    layout: *const sys::PJRT_Buffer_MemoryLayout,
    elem: usize,
    dims: &[i64],
    what: &str,
) -> Result<(), Fail> {
    if layout.is_null() {
        return Ok(());
    }
    // SAFETY: non-null layout starts with struct_size.
    let actual = unsafe { (*layout).struct_size };
    check_size(
        state,
        "PJRT_Buffer_MemoryLayout",
        actual,
        sys::PJRT_Buffer_MemoryLayout_STRUCT_SIZE,
    )?;
    // SAFETY: its struct_size covers every field (checked).
    let l = unsafe { &*layout };
    let n = dims.len();
    let dense = match l.r#type {
        sys::PJRT_Buffer_MemoryLayout_Type_Tiled => {
            // SAFETY: type Tiled says `tiled` is the member set.
            let t = unsafe { &l.layout.tiled };
            let m2m: Vec<i64> = if t.minor_to_major_size == 0 {
                Vec::new()
            } else if t.minor_to_major.is_null() {
                return Err(invalid("fake plugin: null minor_to_major"));
            } else {
                // SAFETY: minor_to_major has minor_to_major_size elements.
                unsafe { std::slice::from_raw_parts(t.minor_to_major, t.minor_to_major_size) }
                    .to_vec()
            };
            let want: Vec<i64> = (0..n as i64).rev().collect();
            m2m == want && t.num_tiles == 0
        }
        sys::PJRT_Buffer_MemoryLayout_Type_Strides => {
            // SAFETY: type Strides says `strides` is the member set.
            let s = unsafe { &l.layout.strides };
            if s.num_byte_strides != n {
                return Err(invalid(format!(
                    "fake plugin: {what} has {} strides for {n} dimensions",
                    s.num_byte_strides
                )));
            }
            let got: &[i64] = if n == 0 {
                &[]
            } else if s.byte_strides.is_null() {
                return Err(invalid("fake plugin: null byte_strides"));
            } else {
                // SAFETY: byte_strides has num_byte_strides elements.
                unsafe { std::slice::from_raw_parts(s.byte_strides, n) }
            };
            got == dense_strides(elem, dims).as_slice()
        }
        other => {
            return Err(invalid(format!(
                "fake plugin: unknown memory layout type {other}"
            )))
        }
    };
    if dense {
        Ok(())
    } else {
        Err(unimplemented(format!(
            "fake plugin: only the dense major-to-minor {what} is supported"
        )))
    }
}

/// Copies a host array, honouring any byte strides (negative ones too).
///
/// # Safety
/// `data` must be valid for every byte the strides reach (all of `size` bytes when
/// `strides` is None).
unsafe fn gather(
    data: *const u8,
    elem: usize,
    dims: &[i64],
    strides: Option<&[i64]>,
    size: usize,
) -> Bytes {
    let mut out = Bytes::zeroed(size);
    if size == 0 {
        return out;
    }
    let dense = dense_strides(elem, dims);
    match strides {
        Some(s) if s != dense.as_slice() => {
            let dst = out.as_mut_slice();
            let mut index = vec![0i64; dims.len()];
            let mut pos = 0;
            loop {
                let offset: isize = index
                    .iter()
                    .zip(s)
                    .map(|(i, st)| (*i as isize) * (*st as isize))
                    .sum();
                // SAFETY: the caller promises every strided element is readable.
                let src = unsafe { std::slice::from_raw_parts(data.offset(offset), elem) };
                dst[pos..pos + elem].copy_from_slice(src);
                pos += elem;
                // Advance the multi-index, last dimension fastest.
                let mut k = dims.len();
                loop {
                    if k == 0 {
                        return out;
                    }
                    k -= 1;
                    index[k] += 1;
                    if index[k] < dims[k] {
                        break;
                    }
                    index[k] = 0;
                }
            }
        }
        _ => {
            // SAFETY: dense data: `size` readable bytes.
            let src = unsafe { std::slice::from_raw_parts(data, size) };
            out.as_mut_slice().copy_from_slice(src);
            out
        }
    }
}

/// Reads `len` i64 values at `ptr` (null allowed when len is 0).
///
/// # Safety
/// `ptr` must point at `len` readable values when len > 0.
pub(crate) unsafe fn read_i64s(ptr: *const i64, len: usize, what: &str) -> Result<Vec<i64>, Fail> {
    if len == 0 {
        return Ok(Vec::new());
    }
    if ptr.is_null() {
        return Err(invalid(format!(
            "fake plugin: null {what} with {len} elements"
        )));
    }
    // SAFETY: the caller promises len values.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec())
}

// ------------------------------------------------------------------ entries

fn from_host(
    a: &mut sys::PJRT_Client_BufferFromHostBuffer_Args,
    state: &State,
) -> Result<(), Fail> {
    let client = client_ref(a.client)?;
    let inner = &client.inner;
    let ty = a.r#type;
    let elem = element_size(ty)
        .ok_or_else(|| invalid(format!("fake plugin: unsupported buffer element type {ty}")))?;
    // SAFETY: dims has num_dims values per the C API.
    let dims = unsafe { read_i64s(a.dims, a.num_dims, "dims") }?;
    let size = byte_size(ty, &dims)?;
    let strides = if a.num_byte_strides == 0 {
        None
    } else {
        if a.num_byte_strides != dims.len() {
            return Err(invalid(format!(
                "fake plugin: {} byte_strides for {} dimensions",
                a.num_byte_strides,
                dims.len()
            )));
        }
        // SAFETY: byte_strides has num_byte_strides values per the C API.
        Some(unsafe { read_i64s(a.byte_strides, a.num_byte_strides, "byte_strides") }?)
    };
    // SAFETY: device_layout is null or valid per the C API.
    unsafe { check_dense_layout(state, a.device_layout, elem, &dims, "device_layout") }?;
    let memory = if !a.memory.is_null() {
        let m = inner.memory_index(a.memory).ok_or_else(|| {
            invalid(format!(
                "fake plugin: {:p} is not a memory of this client",
                a.memory
            ))
        })?;
        if !a.device.is_null() && inner.device_index(a.device) != Some(inner.memories[m].device) {
            return Err(invalid(
                "fake plugin: device and memory given do not belong together",
            ));
        }
        m
    } else if !a.device.is_null() {
        let d = inner.device_index(a.device).ok_or_else(|| {
            invalid(format!(
                "fake plugin: {:p} is not a device of this client",
                a.device
            ))
        })?;
        inner.default_memory_index(d)
    } else {
        return Err(invalid(
            "fake plugin: PJRT_Client_BufferFromHostBuffer needs a device or a memory",
        ));
    };
    let device = inner.memories[memory].device;
    if !inner.addressable(device) {
        return Err(invalid(format!(
            "fake plugin: device {} is not addressable",
            inner.device_name(device)
        )));
    }
    if a.data.is_null() && size > 0 {
        return Err(invalid("fake plugin: null host data"));
    }
    // SAFETY: the caller promises `data` holds the array described by dims, type and
    // strides for the duration of the call.
    let bytes = unsafe { gather(a.data.cast(), elem, &dims, strides.as_deref(), size) };
    a.buffer = new_buffer(inner.clone(), memory, ty, dims, bytes)?;
    a.done_with_host_buffer = entry_event(state, "PJRT_Client_BufferFromHostBuffer");
    Ok(())
}

entry_fn!(
    client_buffer_from_host_buffer,
    PJRT_Client_BufferFromHostBuffer,
    |a, state| { from_host(a, state) }
);

entry_fn!(buffer_destroy, PJRT_Buffer_Destroy, |a, _| {
    let buffer = a.buffer;
    if buffer.is_null() {
        return Ok(());
    }
    if !registry::unregister(buffer.cast::<FakeBuffer>(), Kind::Buffer) {
        return Err(invalid(format!(
            "fake plugin: PJRT_Buffer_Destroy: {buffer:p} is not a live PJRT_Buffer"
        )));
    }
    // SAFETY: it was live, so it came from Box::into_raw in new_buffer; now
    // unregistered, so this is the only free.
    drop(unsafe { Box::from_raw(buffer.cast::<FakeBuffer>()) });
    Ok(())
});

entry_fn!(buffer_element_type, PJRT_Buffer_ElementType, |a, _| {
    a.r#type = buffer_ref(a.buffer)?.ty;
    Ok(())
});

entry_fn!(buffer_dimensions, PJRT_Buffer_Dimensions, |a, _| {
    let b = buffer_ref(a.buffer)?;
    a.dims = b.dims.as_ptr();
    a.num_dims = b.dims.len();
    Ok(())
});

entry_fn!(
    buffer_unpadded_dimensions,
    PJRT_Buffer_UnpaddedDimensions,
    |a, _| {
        let b = buffer_ref(a.buffer)?;
        a.unpadded_dims = b.dims.as_ptr();
        a.num_dims = b.dims.len();
        Ok(())
    }
);

entry_fn!(
    buffer_dynamic_dimension_indices,
    PJRT_Buffer_DynamicDimensionIndices,
    |a, _| {
        buffer_ref(a.buffer)?;
        static NONE: [usize; 0] = [];
        a.dynamic_dim_indices = NONE.as_ptr();
        a.num_dynamic_dims = 0;
        Ok(())
    }
);

entry_fn!(
    buffer_on_device_size,
    PJRT_Buffer_OnDeviceSizeInBytes,
    |a, _| {
        a.on_device_size_in_bytes = buffer_ref(a.buffer)?.size;
        Ok(())
    }
);

entry_fn!(buffer_device, PJRT_Buffer_Device, |a, _| {
    let b = buffer_ref(a.buffer)?;
    a.device = b.client.device_ptr(b.device);
    Ok(())
});

entry_fn!(buffer_memory, PJRT_Buffer_Memory, |a, _| {
    let b = buffer_ref(a.buffer)?;
    a.memory = b.client.memory_ptr(b.memory);
    Ok(())
});

entry_fn!(buffer_delete, PJRT_Buffer_Delete, |a, _| {
    let b = buffer_ref(a.buffer)?;
    let mut st = b.lock();
    st.deleted = true;
    if st.external_refs == 0 {
        st.data = None;
    }
    Ok(())
});

entry_fn!(buffer_is_deleted, PJRT_Buffer_IsDeleted, |a, _| {
    let b = buffer_ref(a.buffer)?;
    let deleted = b.is_deleted();
    a.is_deleted = deleted;
    Ok(())
});

entry_fn!(buffer_is_on_cpu, PJRT_Buffer_IsOnCpu, |a, _| {
    buffer_ref(a.buffer)?;
    a.is_on_cpu = true;
    Ok(())
});

entry_fn!(
    buffer_to_host_buffer,
    PJRT_Buffer_ToHostBuffer,
    |a, state| {
        let b = buffer_ref(a.src)?;
        let elem = element_size(b.ty).unwrap_or(1);
        // SAFETY: host_layout is null or valid per the C API.
        unsafe { check_dense_layout(state, a.host_layout, elem, &b.dims, "host_layout") }?;
        if b.is_deleted() {
            return Err(invalid(DELETED_MESSAGE));
        }
        if a.dst.is_null() {
            a.dst_size = b.size;
            a.event = std::ptr::null_mut();
            return Ok(());
        }
        if a.dst_size < b.size {
            return Err(invalid(format!(
                "fake plugin: dst_size {} is smaller than the buffer's {} bytes",
                a.dst_size, b.size
            )));
        }
        let event_error = state::event_error(state, "PJRT_Buffer_ToHostBuffer");
        if event_error.is_none() {
            let dst = a.dst.cast::<u8>();
            b.with_data(|d| {
                // SAFETY: the caller provides dst_size >= size writable bytes at dst,
                // which cannot overlap our own allocation.
                unsafe { std::ptr::copy_nonoverlapping(d.as_slice().as_ptr(), dst, b.size) };
            })?;
        }
        a.event = new_event(event_error);
        Ok(())
    }
);

entry_fn!(buffer_ready_event, PJRT_Buffer_ReadyEvent, |a, state| {
    let b = buffer_ref(a.buffer)?;
    a.event = if b.is_deleted() {
        new_event(Some(ForcedError {
            code: sys::PJRT_Error_Code_INVALID_ARGUMENT,
            message: DELETED_MESSAGE.to_string(),
        }))
    } else {
        entry_event(state, "PJRT_Buffer_ReadyEvent")
    };
    Ok(())
});

fn copy_buffer(b: &FakeBuffer, memory: usize) -> Result<*mut sys::PJRT_Buffer, Fail> {
    let data = b.read()?;
    new_buffer(b.client.clone(), memory, b.ty, b.dims.clone(), data)
}

entry_fn!(buffer_copy_to_device, PJRT_Buffer_CopyToDevice, |a, _| {
    let b = buffer_ref(a.buffer)?;
    let d = b.client.device_index(a.dst_device).ok_or_else(|| {
        invalid(format!(
            "fake plugin: {:p} is not a device of this buffer's client",
            a.dst_device
        ))
    })?;
    if d == b.device {
        return Err(invalid(format!(
            "fake plugin: buffer is already on device {}",
            b.client.device_name(d)
        )));
    }
    if !b.client.addressable(d) {
        return Err(invalid(format!(
            "fake plugin: device {} is not addressable",
            b.client.device_name(d)
        )));
    }
    a.dst_buffer = copy_buffer(b, b.client.default_memory_index(d))?;
    Ok(())
});

entry_fn!(buffer_copy_to_memory, PJRT_Buffer_CopyToMemory, |a, _| {
    let b = buffer_ref(a.buffer)?;
    let m = b.client.memory_index(a.dst_memory).ok_or_else(|| {
        invalid(format!(
            "fake plugin: {:p} is not a memory of this buffer's client",
            a.dst_memory
        ))
    })?;
    if m == b.memory {
        return Err(invalid("fake plugin: buffer is already in that memory"));
    }
    if !b.client.addressable(b.client.memories[m].device) {
        return Err(invalid("fake plugin: that memory is not addressable"));
    }
    a.dst_buffer = copy_buffer(b, m)?;
    Ok(())
});

fn data_pointer(b: &FakeBuffer) -> Result<*mut u8, Fail> {
    let mut st = b.lock();
    if st.deleted {
        return Err(invalid(DELETED_MESSAGE));
    }
    match st.data.as_mut() {
        Some(d) => Ok(d.as_mut_slice().as_mut_ptr()),
        None => Err(invalid(DELETED_MESSAGE)),
    }
}

entry_fn!(buffer_unsafe_pointer, PJRT_Buffer_UnsafePointer, |a, _| {
    a.buffer_pointer = data_pointer(buffer_ref(a.buffer)?)? as usize;
    Ok(())
});

entry_fn!(
    buffer_opaque_pointer,
    PJRT_Buffer_OpaqueDeviceMemoryDataPointer,
    |a, _| {
        a.device_memory_ptr = data_pointer(buffer_ref(a.buffer)?)?.cast();
        Ok(())
    }
);

entry_fn!(
    buffer_increase_ref,
    PJRT_Buffer_IncreaseExternalReferenceCount,
    |a, _| {
        let b = buffer_ref(a.buffer)?;
        let mut st = b.lock();
        if st.deleted {
            return Err(invalid(DELETED_MESSAGE));
        }
        st.external_refs += 1;
        Ok(())
    }
);

entry_fn!(
    buffer_decrease_ref,
    PJRT_Buffer_DecreaseExternalReferenceCount,
    |a, _| {
        let b = buffer_ref(a.buffer)?;
        let mut st = b.lock();
        if st.external_refs == 0 {
            return Err(invalid(
                "fake plugin: external reference count is already zero",
            ));
        }
        st.external_refs -= 1;
        if st.external_refs == 0 && st.deleted {
            st.data = None;
        }
        Ok(())
    }
);
