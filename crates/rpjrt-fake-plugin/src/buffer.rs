//! Buffers (host memory standing in for device memory) and events (always complete).

use std::sync::{Arc, Mutex, MutexGuard};

use rpjrt_sys as sys;

use crate::client::ClientInner;
use crate::config::ForcedError;
use crate::error::{invalid, unimplemented, Fail};
use crate::named::{out_slice, slice};
use crate::registry::{self, get};
use crate::state::{self, State};

/// `(type, MLIR name, bytes per element)` for the `PJRT_Buffer_Type_$ty` constants.
macro_rules! element_types {
    ($($ty:ident $mlir:literal $size:literal,)*) => {
        pastey::paste!(&[$((sys::[<PJRT_Buffer_Type_ $ty>], $mlir, $size),)*])
    };
}

/// Every element type a buffer can hold, with its MLIR name (as in `tensor<2xf32>`;
/// empty for none) and bytes per element. Sub-byte types take one byte per element,
/// which is how XLA lays them out on the host by default.
const ELEMENT_TYPES: &[(sys::PJRT_Buffer_Type, &str, usize)] = element_types! {
    PRED "i1" 1, S8 "i8" 1, S16 "i16" 2, S32 "i32" 4, S64 "i64" 8,
    U8 "ui8" 1, U16 "ui16" 2, U32 "ui32" 4, U64 "ui64" 8,
    F16 "f16" 2, F32 "f32" 4, F64 "f64" 8, BF16 "bf16" 2,
    C64 "complex<f32>" 8, C128 "complex<f64>" 16,
    F8E5M2 "f8E5M2" 1, F8E4M3FN "f8E4M3FN" 1, F8E4M3B11FNUZ "f8E4M3B11FNUZ" 1,
    F8E5M2FNUZ "f8E5M2FNUZ" 1, F8E4M3FNUZ "f8E4M3FNUZ" 1, F8E4M3 "f8E4M3" 1,
    F8E3M4 "f8E3M4" 1, F8E8M0FNU "f8E8M0FNU" 1, F4E2M1FN "f4E2M1FN" 1,
    F6E2M3FN "f6E2M3FN" 1, F6E3M2FN "f6E3M2FN" 1,
    S4 "i4" 1, U4 "ui4" 1, S2 "i2" 1, U2 "ui2" 1, S1 "" 1, U1 "" 1,
};

/// Bytes per element of a PJRT buffer type, or None for types a buffer cannot hold
/// (INVALID, TOKEN, unknown codes).
pub(crate) fn element_size(ty: sys::PJRT_Buffer_Type) -> Result<usize, Fail> {
    let found = ELEMENT_TYPES.iter().find(|t| t.0 == ty).map(|t| t.2);
    found.ok_or_else(|| invalid!("fake plugin: unsupported buffer element type {ty}"))
}

/// The buffer type of an MLIR element type name (`f32`, `si8`, `complex<f32>`).
pub(crate) fn mlir_element_type(name: &str) -> Option<sys::PJRT_Buffer_Type> {
    let name = match name.strip_prefix('s') {
        Some(signless) if signless.starts_with('i') && signless != "i1" => signless,
        _ => name,
    };
    ELEMENT_TYPES
        .iter()
        .find(|t| !name.is_empty() && t.1 == name)
        .map(|t| t.0)
}

/// Byte size of an array, with every overflow and negative dimension reported.
pub(crate) fn byte_size(ty: sys::PJRT_Buffer_Type, dims: &[i64]) -> Result<usize, Fail> {
    dims.iter().try_fold(element_size(ty)?, |n, &d| {
        let d = usize::try_from(d)
            .map_err(|_| invalid!("fake plugin: negative dimension in {dims:?}"))?;
        n.checked_mul(d)
            .ok_or_else(|| invalid!("fake plugin: array {dims:?} is too large"))
    })
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
        let chunks = vec![Chunk([0; 64]); len.div_ceil(64)];
        Bytes {
            chunks,
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

handles! { PJRT_Buffer => FakeBuffer, }

pub(crate) const DELETED_MESSAGE: &str = "Buffer has been deleted or donated.";

impl FakeBuffer {
    fn lock(&self) -> MutexGuard<'_, BufState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn is_deleted(&self) -> bool {
        self.lock().deleted
    }

    /// Runs `f` on the contents, or fails if the buffer was deleted.
    fn with_data<R>(&self, f: impl FnOnce(&mut Bytes) -> R) -> Result<R, Fail> {
        match &mut *self.lock() {
            BufState {
                data: Some(d),
                deleted: false,
                ..
            } => Ok(f(d)),
            _ => Err(invalid(DELETED_MESSAGE)),
        }
    }

    /// A copy of this buffer in `memory` of its client.
    pub fn copy_to(&self, memory: usize) -> Result<*mut sys::PJRT_Buffer, Fail> {
        let data = self.with_data(|d| d.as_slice().to_vec())?;
        let mut bytes = Bytes::zeroed(data.len());
        bytes.as_mut_slice().copy_from_slice(&data);
        new_buffer(
            self.client.clone(),
            memory,
            self.ty,
            self.dims.clone(),
            bytes,
        )
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
    let (size, state) = (
        data.len,
        BufState {
            data: Some(data),
            deleted: false,
            external_refs: 0,
        },
    );
    let state = Mutex::new(state);
    Ok(registry::new(FakeBuffer {
        client,
        device,
        memory,
        ty,
        dims,
        size,
        state,
    }))
}

// ------------------------------------------------------------------- events

/// The object behind a `PJRT_Event*`: always complete, maybe with an error.
pub(crate) struct FakeEvent {
    error: Option<ForcedError>,
    /// For an event made by `PJRT_Event_Create`: pending until `PJRT_Event_Set`.
    pub user: Option<crate::external::UserEvent>,
}

handles! { PJRT_Event => FakeEvent, }

impl FakeEvent {
    fn result(&self) -> Result<(), Fail> {
        if let Some(u) = &self.user {
            return u.wait();
        }
        self.error.as_ref().map_or(Ok(()), |e| Err(e.into()))
    }
}

/// Makes a caller-owned, complete event.
pub(crate) fn new_event(error: Option<ForcedError>) -> *mut sys::PJRT_Event {
    registry::new(FakeEvent { error, user: None })
}

/// Makes a caller-owned event that is pending until `PJRT_Event_Set`.
pub(crate) fn new_user_event() -> *mut sys::PJRT_Event {
    let user = Some(crate::external::UserEvent::default());
    registry::new(FakeEvent { error: None, user })
}

/// An event for `entry`, complete with the error the `EVENT_ERROR` knob gives it.
pub(crate) fn entry_event(state: &State, entry: &str) -> *mut sys::PJRT_Event {
    new_event(state::event_error(state, entry))
}

entry!(PJRT_Event_Destroy, |a, _| registry::destroy(a.event)?);

entry!(PJRT_Event_IsReady, |a, _| {
    a.is_ready = get(a.event)?.user.as_ref().is_none_or(|u| u.is_set());
});

entry!(PJRT_Event_Error, |a, _| get(a.event)?.result()?);

entry!(PJRT_Event_Await, |a, _| get(a.event)?.result()?);

entry!(PJRT_Event_OnReady, |a, _| {
    let e = get(a.event)?;
    let callback = a
        .callback
        .ok_or_else(|| invalid("fake plugin: PJRT_Event_OnReady with a null callback"))?;
    if let Some(u) = &e.user {
        u.on_ready(callback, a.user_arg);
        return Ok(());
    }
    let err = e
        .result()
        .err()
        .map_or(std::ptr::null_mut(), Fail::into_raw);
    // The event is complete, so the callback runs now, on this thread; it owns `err`.
    // SAFETY: the caller registered this callback with this user_arg.
    unsafe { callback(err, a.user_arg) };
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

/// Accepts a layout only if it is the dense major-to-minor one (or null).
fn check_dense_layout(
    state: &State,
    layout: *const sys::PJRT_Buffer_MemoryLayout,
    elem: usize,
    dims: &[i64],
    what: &str,
) -> Result<(), Fail> {
    let Some(l) = nested!(state, layout, PJRT_Buffer_MemoryLayout)? else {
        return Ok(());
    };
    let n = dims.len();
    let dense = match l.r#type {
        sys::PJRT_Buffer_MemoryLayout_Type_Tiled => {
            // SAFETY: type Tiled says `tiled` is the member set; minor_to_major has
            // minor_to_major_size elements.
            let m2m = unsafe {
                slice(
                    l.layout.tiled.minor_to_major,
                    l.layout.tiled.minor_to_major_size,
                    "minor_to_major",
                )
            }?;
            // SAFETY: as above.
            m2m.iter().copied().eq((0..n as i64).rev()) && unsafe { l.layout.tiled.num_tiles } == 0
        }
        sys::PJRT_Buffer_MemoryLayout_Type_Strides => {
            // SAFETY: type Strides says `strides` is the member set.
            let s = unsafe { &l.layout.strides };
            if s.num_byte_strides != n {
                bail!(
                    "fake plugin: {what} has {} strides for {n} dimensions",
                    s.num_byte_strides
                );
            }
            // SAFETY: byte_strides has num_byte_strides elements.
            unsafe { slice(s.byte_strides, n, "byte_strides") }?
                == dense_strides(elem, dims).as_slice()
        }
        other => {
            bail!("fake plugin: unknown memory layout type {other}")
        }
    };
    match dense {
        true => Ok(()),
        false => Err(unimplemented(format!(
            "fake plugin: only the dense major-to-minor {what} is supported"
        ))),
    }
}

/// Copies a host array, honouring byte strides (negative ones too).
///
/// # Safety
/// `data` must be valid for every byte the strides reach.
unsafe fn gather(
    data: *const u8,
    elem: usize,
    dims: &[i64],
    strides: &[i64],
    size: usize,
) -> Bytes {
    let mut out = Bytes::zeroed(size);
    if strides == dense_strides(elem, dims) && size > 0 {
        // SAFETY: dense data: `size` readable bytes.
        out.as_mut_slice()
            .copy_from_slice(unsafe { std::slice::from_raw_parts(data, size) });
        return out;
    }
    let mut index = vec![0i64; dims.len()];
    for dst in out.as_mut_slice().chunks_exact_mut(elem) {
        let offset: isize = index
            .iter()
            .zip(strides)
            .map(|(i, st)| (*i * *st) as isize)
            .sum();
        // SAFETY: the caller promises every strided element is readable.
        dst.copy_from_slice(unsafe { std::slice::from_raw_parts(data.offset(offset), elem) });
        // Advance the multi-index, last dimension fastest.
        for k in (0..dims.len()).rev() {
            index[k] += 1;
            if index[k] < dims[k] {
                break;
            }
            index[k] = 0;
        }
    }
    out
}

// ------------------------------------------------------------------ entries

entry!(PJRT_Client_BufferFromHostBuffer, |a, state| {
    let inner = &get(a.client)?.inner;
    let (ty, elem) = (a.r#type, element_size(a.r#type)?);
    // SAFETY: dims has num_dims values per the C API.
    let dims = unsafe { slice(a.dims, a.num_dims, "dims") }?.to_vec();
    let size = byte_size(ty, &dims)?;
    if a.num_byte_strides != 0 && a.num_byte_strides != dims.len() {
        bail!(
            "fake plugin: {} byte_strides for {} dimensions",
            a.num_byte_strides,
            dims.len()
        );
    }
    // SAFETY: byte_strides has num_byte_strides values per the C API.
    let strides = unsafe { slice(a.byte_strides, a.num_byte_strides, "byte_strides") }?;
    check_dense_layout(state, a.device_layout, elem, &dims, "device_layout")?;
    let device_index = |d| {
        let index = inner.device_index(d);
        index.ok_or_else(|| invalid!("fake plugin: {d:p} is not a device of this client"))
    };
    let memory = match (a.memory.is_null(), a.device.is_null()) {
        (false, device_null) => {
            let m = inner.memory_index(a.memory).ok_or_else(|| {
                invalid!("fake plugin: {:p} is not a memory of this client", a.memory)
            })?;
            if !device_null && inner.device_index(a.device) != Some(inner.memories[m].device) {
                bail!("fake plugin: device and memory given do not belong together");
            }
            m
        }
        (true, false) => inner.default_memory_index(device_index(a.device)?),
        (true, true) => {
            bail!("fake plugin: PJRT_Client_BufferFromHostBuffer needs a device or a memory")
        }
    };
    inner.check_addressable(inner.memories[memory].device)?;
    if a.data.is_null() && size > 0 {
        bail!("fake plugin: null host data");
    }
    let dense = dense_strides(elem, &dims);
    let strides = if strides.is_empty() { &dense } else { strides };
    // SAFETY: the caller promises `data` holds the array described by dims, type and
    // strides for the duration of the call.
    let bytes = unsafe { gather(a.data.cast(), elem, &dims, strides, size) };
    a.buffer = new_buffer(inner.clone(), memory, ty, dims, bytes)?;
    a.done_with_host_buffer = entry_event(state, "PJRT_Client_BufferFromHostBuffer");
});

entry!(PJRT_Buffer_Destroy, |a, _| registry::destroy(a.buffer)?);

entry!(PJRT_Buffer_ElementType, |a, _| a.r#type = get(a.buffer)?.ty);

entry!(PJRT_Buffer_Dimensions, |a, _| {
    (a.dims, a.num_dims) = out_slice(&get(a.buffer)?.dims);
});

entry!(PJRT_Buffer_OnDeviceSizeInBytes, |a, _| a
    .on_device_size_in_bytes =
    get(a.buffer)?.size);

entry!(PJRT_Buffer_Device, |a, _| {
    let b = get(a.buffer)?;
    a.device = b.client.device_ptr(b.device);
});

entry!(PJRT_Buffer_Memory, |a, _| {
    let b = get(a.buffer)?;
    a.memory = b.client.memory_ptr(b.memory);
});

entry!(PJRT_Buffer_Delete, |a, _| {
    let mut st = get(a.buffer)?.lock();
    st.deleted = true;
    if st.external_refs == 0 {
        st.data = None;
    }
});

entry!(PJRT_Buffer_IsDeleted, |a, _| {
    a.is_deleted = get(a.buffer)?.is_deleted();
});

entry!(PJRT_Buffer_IsOnCpu, |a, _| {
    get(a.buffer)?;
    a.is_on_cpu = true;
});

entry!(PJRT_Buffer_ToHostBuffer, |a, state| {
    let b = get(a.src)?;
    check_dense_layout(
        state,
        a.host_layout,
        element_size(b.ty)?,
        &b.dims,
        "host_layout",
    )?;
    if b.is_deleted() {
        return Err(invalid(DELETED_MESSAGE));
    }
    if a.dst.is_null() {
        (a.dst_size, a.event) = (b.size, std::ptr::null_mut());
        return Ok(());
    }
    if a.dst_size < b.size {
        bail!(
            "fake plugin: dst_size {} is smaller than the buffer's {} bytes",
            a.dst_size,
            b.size
        );
    }
    let event_error = state::event_error(state, "PJRT_Buffer_ToHostBuffer");
    if event_error.is_none() {
        let dst = a.dst.cast::<u8>();
        // SAFETY: the caller provides dst_size >= size writable bytes at dst, which
        // cannot overlap our own allocation.
        b.with_data(|d| unsafe {
            std::ptr::copy_nonoverlapping(d.as_slice().as_ptr(), dst, b.size)
        })?;
    }
    a.event = new_event(event_error);
});

entry!(PJRT_Buffer_ReadyEvent, |a, state| {
    a.event = if get(a.buffer)?.is_deleted() {
        let code = sys::PJRT_Error_Code_INVALID_ARGUMENT;
        new_event(Some(ForcedError {
            code,
            message: DELETED_MESSAGE.to_string(),
        }))
    } else {
        entry_event(state, "PJRT_Buffer_ReadyEvent")
    };
});

entry!(PJRT_Buffer_CopyToDevice, |a, _| {
    let b = get(a.buffer)?;
    let d = b.client.device_index(a.dst_device).ok_or_else(|| {
        invalid!(
            "fake plugin: {:p} is not a device of this buffer's client",
            a.dst_device
        )
    })?;
    if d == b.device {
        let name = b.client.device_name(d);
        bail!("fake plugin: buffer is already on device {name}");
    }
    a.dst_buffer = b.copy_to(
        b.client
            .default_memory_index(b.client.check_addressable(d)?),
    )?;
});

entry!(PJRT_Buffer_CopyToMemory, |a, _| {
    let b = get(a.buffer)?;
    let m = b.client.memory_index(a.dst_memory).ok_or_else(|| {
        invalid!(
            "fake plugin: {:p} is not a memory of this buffer's client",
            a.dst_memory
        )
    })?;
    if m == b.memory {
        bail!("fake plugin: buffer is already in that memory");
    }
    if !b.client.devices[b.client.memories[m].device].addressable {
        bail!("fake plugin: that memory is not addressable");
    }
    a.dst_buffer = b.copy_to(m)?;
});

fn data_pointer(b: &FakeBuffer) -> Result<*mut u8, Fail> {
    b.with_data(|d| d.as_mut_slice().as_mut_ptr())
}

entry!(PJRT_Buffer_UnsafePointer, |a, _| {
    a.buffer_pointer = data_pointer(get(a.buffer)?)? as usize;
});

entry!(PJRT_Buffer_OpaqueDeviceMemoryDataPointer, |a, _| {
    a.device_memory_ptr = data_pointer(get(a.buffer)?)?.cast();
});

entry!(PJRT_Buffer_IncreaseExternalReferenceCount, |a, _| {
    let mut st = get(a.buffer)?.lock();
    if st.deleted {
        return Err(invalid(DELETED_MESSAGE));
    }
    st.external_refs += 1;
});

entry!(PJRT_Buffer_DecreaseExternalReferenceCount, |a, _| {
    let mut st = get(a.buffer)?.lock();
    if st.external_refs == 0 {
        bail!("fake plugin: external reference count is already zero");
    }
    st.external_refs -= 1;
    if st.external_refs == 0 && st.deleted {
        st.data = None;
    }
});
