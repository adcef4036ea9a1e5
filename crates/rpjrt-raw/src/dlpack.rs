//! DLPack at the C level: the structs of dlpack.h 1.x (and the pre-1.0 `DLManagedTensor`
//! that older consumers and producers still use), the deleter of the tensors rpjrt
//! exports, and ownership of the tensors it imports.
//!
//! The safe side is `crate::dlpack`: which buffer to export and how to describe it, and
//! how an imported tensor becomes a buffer. Nothing here knows buffers or clients: an
//! export is a description (plain numbers and vectors) plus a value to keep alive until
//! the consumer calls the deleter; an import is a pointer whose deleter this module calls
//! exactly once, and the host bytes it addresses.

use std::any::Any;
use std::ffi::c_void;
use std::ptr::NonNull;

use super::callback::guard;
use super::hostmem::HostBytes;
use super::util::extent;
use crate::error::{Error, Result};

/// `DLDevice`: where a tensor's memory is (`device_type` is a `DLDeviceType` number).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DlDevice {
    /// `DLDeviceType` (1 CPU, 2 CUDA, 3 CUDA host, 10 ROCm, ...).
    pub device_type: i32,
    /// The device's ordinal within its type.
    pub device_id: i32,
}

/// A DLPack data type: `(code, bits, lanes)` as `DLDataType` holds them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DlDataType {
    /// `DLDataTypeCode` (0 int, 1 uint, 2 float, 4 bfloat, 5 complex, 6 bool, 7.. float8/6/4).
    pub code: u8,
    /// Bits per element (per lane).
    pub bits: u8,
    /// Vector lanes; rpjrt uses 1 only.
    pub lanes: u16,
}

/// `DLTensor`: the description of a tensor's memory.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DlTensor {
    /// The data's address (device memory for device tensors).
    pub data: *mut c_void,
    /// Where the memory is.
    pub device: DlDevice,
    /// Number of dimensions.
    pub ndim: i32,
    /// Element type.
    pub dtype: DlDataType,
    /// `ndim` dimensions.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or null for row-major.
    pub strides: *mut i64,
    /// Bytes from `data` to element `[0, ...]`.
    pub byte_offset: u64,
}

/// `DLManagedTensor`: the pre-1.0 owning form (capsule name `"dltensor"`).
#[repr(C)]
#[derive(Debug)]
pub struct DlManagedTensor {
    /// The tensor.
    pub dl_tensor: DlTensor,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Frees the tensor; called once by its owner.
    pub deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// `DLPackVersion`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DlPackVersion {
    /// Major version (1 for every layout rpjrt reads).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// `DLManagedTensorVersioned`: the DLPack 1.x owning form (capsule name
/// `"dltensor_versioned"`).
#[repr(C)]
#[derive(Debug)]
pub struct DlManagedTensorVersioned {
    /// The DLPack version the producer speaks; the fields up to `deleter` keep their place
    /// in every version, so a consumer can free a tensor whose major version it refuses.
    pub version: DlPackVersion,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Frees the tensor; called once by its owner.
    pub deleter: Option<unsafe extern "C" fn(*mut DlManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*` bits.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DlTensor,
}

/// `DLPACK_FLAG_BITMASK_READ_ONLY`: the consumer must not write the memory.
pub const FLAG_READ_ONLY: u64 = 1;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`: the memory is a copy made for this consumer, which no
/// one else reads or writes.
pub const FLAG_IS_COPIED: u64 = 1 << 1;
/// `DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED` (DLPack 1.1): each element of a type
/// narrower than a byte takes a whole byte; without it such elements are packed.
pub const FLAG_SUBBYTE_PADDED: u64 = 1 << 2;

/// The first type code of DLPack 1.1 (the float8 types; float6 and float4 follow).
pub const FIRST_V1_1_CODE: u8 = 7;

/// The DLPack 1.x minor version a tensor of type code `code` with `flags` needs: 1 for the
/// float8, float6 and float4 codes and the padded flag, which 1.1 added; 0 otherwise.
pub fn minor_version_for(code: u8, flags: u64) -> u32 {
    u32::from(code >= FIRST_V1_1_CODE || flags & FLAG_SUBBYTE_PADDED != 0)
}

/// `kDLCPU`.
pub const DEVICE_CPU: i32 = 1;
/// `kDLCUDAHost` (pinned host memory, readable by the CPU).
pub const DEVICE_CUDA_HOST: i32 = 3;

/// Whether memory on a DLPack device type can be read by the host CPU.
pub const fn host_readable(device_type: i32) -> bool {
    device_type == DEVICE_CPU || device_type == DEVICE_CUDA_HOST
}

mod sealed {
    use std::ffi::c_void;

    use super::DlTensor;

    /// Seals [`super::Managed`] (only the two DLPack structs implement it) and carries the
    /// accessors rpjrt needs inside.
    pub trait Sealed: Sized {
        fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)>;
        fn build(tensor: DlTensor, flags: u64) -> Self;
        fn tensor_mut(&mut self) -> &mut DlTensor;
        fn set_context(&mut self, ctx: *mut c_void);
        fn context(&self) -> *mut c_void;
    }
}

/// The two owning DLPack structs, [`DlManagedTensor`] and [`DlManagedTensorVersioned`].
pub trait Managed: sealed::Sealed + Sized + 'static {
    /// Whether this is the versioned (DLPack 1.x) form.
    const VERSIONED: bool;

    /// The tensor description.
    fn tensor(&self) -> &DlTensor;

    /// The flags (0 for the legacy form, which has none).
    fn flags(&self) -> u64;

    /// The version (`None` for the legacy form).
    fn version(&self) -> Option<DlPackVersion>;
}

impl Managed for DlManagedTensor {
    const VERSIONED: bool = false;
    fn tensor(&self) -> &DlTensor {
        &self.dl_tensor
    }
    fn flags(&self) -> u64 {
        0
    }
    fn version(&self) -> Option<DlPackVersion> {
        None
    }
}

impl sealed::Sealed for DlManagedTensor {
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
    fn build(tensor: DlTensor, _flags: u64) -> Self {
        DlManagedTensor {
            dl_tensor: tensor,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(export_deleter::<DlManagedTensor>),
        }
    }
    fn tensor_mut(&mut self) -> &mut DlTensor {
        &mut self.dl_tensor
    }
    fn set_context(&mut self, ctx: *mut c_void) {
        self.manager_ctx = ctx;
    }
    fn context(&self) -> *mut c_void {
        self.manager_ctx
    }
}

impl Managed for DlManagedTensorVersioned {
    const VERSIONED: bool = true;
    fn tensor(&self) -> &DlTensor {
        &self.dl_tensor
    }
    fn flags(&self) -> u64 {
        self.flags
    }
    fn version(&self) -> Option<DlPackVersion> {
        Some(self.version)
    }
}

impl sealed::Sealed for DlManagedTensorVersioned {
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
    fn build(tensor: DlTensor, flags: u64) -> Self {
        DlManagedTensorVersioned {
            version: DlPackVersion {
                major: 1,
                minor: minor_version_for(tensor.dtype.code, flags),
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(export_deleter::<DlManagedTensorVersioned>),
            flags,
            dl_tensor: tensor,
        }
    }
    fn tensor_mut(&mut self) -> &mut DlTensor {
        &mut self.dl_tensor
    }
    fn set_context(&mut self, ctx: *mut c_void) {
        self.manager_ctx = ctx;
    }
    fn context(&self) -> *mut c_void {
        self.manager_ctx
    }
}

// ------------------------------------------------------------------------------- export

/// What an export describes: plain values, checked by the safe layer.
pub struct ExportSpec {
    /// The data's address (pinned by whatever `keep` holds).
    pub data: usize,
    /// Where it is.
    pub device: DlDevice,
    /// Element type.
    pub dtype: DlDataType,
    /// Dimensions.
    pub shape: Vec<i64>,
    /// Strides in elements (same length as `shape`).
    pub strides: Vec<i64>,
    /// Flags of the versioned form.
    pub flags: u64,
}

/// The heap block behind an exported managed tensor; `manager_ctx` points at it.
#[repr(C)]
struct ExportBox<M> {
    managed: M,
    shape: Vec<i64>,
    strides: Vec<i64>,
    keep: Box<dyn Any + Send>,
}

/// The deleter of every tensor rpjrt exports: frees the block and drops what it keeps
/// alive (releasing the buffer's pin). A panic while dropping is caught, never unwinding
/// into the consumer.
unsafe extern "C" fn export_deleter<M: Managed>(m: *mut M) {
    if m.is_null() {
        return;
    }
    // SAFETY: rpjrt sets this deleter only on the `managed` field of a leaked
    // `Box<ExportBox<M>>` whose `manager_ctx` points at the box (`Exported::new`); DLPack's
    // owner calls the deleter once, so the box is still live and reclaimed once.
    let block = unsafe { Box::from_raw((*m).context().cast::<ExportBox<M>>()) };
    guard(move || drop(block));
}

/// An exported DLPack managed tensor that has not been handed to a consumer yet: owns the
/// heap block (and through it, whatever keeps the memory valid). Dropping it runs the
/// deleter; [`Exported::into_raw`] hands the block to a consumer, who must call the
/// deleter once.
pub struct Exported<M: Managed> {
    ptr: NonNull<M>,
}

// SAFETY: the block is owned by this value alone; what it keeps alive is `Send`, and the
// description is plain data.
unsafe impl<M: Managed> Send for Exported<M> {}
// SAFETY: `&Exported` only reads the immutable description; the kept value is never
// reached through it.
unsafe impl<M: Managed> Sync for Exported<M> {}

impl<M: Managed> Exported<M> {
    /// Builds the managed tensor for `spec`, keeping `keep` alive until the deleter runs.
    pub fn new(spec: ExportSpec, keep: Box<dyn Any + Send>) -> Exported<M> {
        let ExportSpec {
            data,
            device,
            dtype,
            shape,
            strides,
            flags,
        } = spec;
        debug_assert_eq!(shape.len(), strides.len());
        let mut block = Box::new(ExportBox {
            managed: M::build(
                DlTensor {
                    data: data as *mut c_void,
                    device,
                    ndim: i32::try_from(shape.len()).unwrap_or(i32::MAX),
                    dtype,
                    shape: std::ptr::null_mut(),
                    strides: std::ptr::null_mut(),
                    byte_offset: 0,
                },
                flags,
            ),
            shape,
            strides,
            keep,
        });
        // The vectors' heap memory does not move when the box is leaked.
        let shape_ptr = block.shape.as_mut_ptr();
        let strides_ptr = block.strides.as_mut_ptr();
        let raw = Box::into_raw(block);
        // SAFETY: `raw` is the live box just leaked; no other reference to it exists.
        let managed = unsafe { &mut (*raw).managed };
        managed.set_context(raw.cast());
        let t = managed.tensor_mut();
        t.shape = shape_ptr;
        t.strides = strides_ptr;
        Exported {
            // SAFETY: a field of a live heap block is never null.
            ptr: unsafe { NonNull::new_unchecked(std::ptr::addr_of_mut!((*raw).managed)) },
        }
    }

    /// Hands the managed tensor to a consumer (C code, a capsule): from now on the consumer
    /// owns it and must call its `deleter` exactly once.
    pub fn into_raw(self) -> *mut M {
        let p = self.ptr.as_ptr();
        std::mem::forget(self);
        p
    }

    /// Takes back a tensor handed out with [`Exported::into_raw`] (for a consumer that
    /// could not take it after all).
    ///
    /// # Safety
    /// `ptr` must come from `into_raw` of an `Exported<M>`, and its deleter must not have
    /// run: ownership passes back to the result.
    pub unsafe fn from_raw(ptr: *mut M) -> Exported<M> {
        Exported {
            // SAFETY: per the contract, `ptr` came from `into_raw` and is not null.
            ptr: unsafe { NonNull::new_unchecked(ptr) },
        }
    }

    fn managed(&self) -> &M {
        // SAFETY: the block is live and owned by `self` until it drops or is handed out.
        unsafe { self.ptr.as_ref() }
    }

    fn block(&self) -> *const ExportBox<M> {
        self.managed().context().cast::<ExportBox<M>>()
    }

    /// The `DLTensor` a consumer will see.
    pub fn tensor(&self) -> &DlTensor {
        self.managed().tensor()
    }

    /// The address of the data.
    pub fn data_ptr(&self) -> usize {
        self.tensor().data as usize
    }

    /// The dimensions.
    pub fn shape(&self) -> &[i64] {
        // SAFETY: `manager_ctx` points at the live block (set in `new`), whose vectors are
        // never changed; only this field is borrowed, not the kept value.
        unsafe { &*std::ptr::addr_of!((*self.block()).shape) }
    }

    /// The strides, in elements.
    pub fn strides(&self) -> &[i64] {
        // SAFETY: as in `shape`.
        unsafe { &*std::ptr::addr_of!((*self.block()).strides) }
    }

    /// The flags (always 0 for the legacy form).
    pub fn flags(&self) -> u64 {
        self.managed().flags()
    }

    /// Whether the consumer is told not to write the memory (versioned form only; the
    /// legacy form cannot say).
    pub fn is_read_only(&self) -> bool {
        self.flags() & FLAG_READ_ONLY != 0
    }
}

impl<M: Managed> Drop for Exported<M> {
    fn drop(&mut self) {
        // SAFETY: the tensor is still ours (not handed out), so its deleter runs once here.
        unsafe { delete_managed(self.ptr.as_ptr()) }
    }
}

impl<M: Managed> std::fmt::Debug for Exported<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = self.tensor();
        f.debug_struct(if M::VERSIONED {
            "DlManagedTensorVersioned"
        } else {
            "DlManagedTensor"
        })
        .field("data", &format_args!("{:#x}", self.data_ptr()))
        .field("device", &t.device)
        .field("dtype", &t.dtype)
        .field("shape", &self.shape())
        .field("strides", &self.strides())
        .field("flags", &self.flags())
        .finish()
    }
}

/// Calls a managed tensor's deleter (if it has one).
///
/// # Safety
/// `ptr` must be null or a live managed tensor owned by the caller, who gives it up: the
/// deleter runs here, once, and the tensor must not be used afterwards.
pub unsafe fn delete_managed<M: Managed>(ptr: *mut M) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: a live managed tensor per the contract.
    if let Some(d) = unsafe { (*ptr).deleter() } {
        // SAFETY: its owner calls the deleter once, as DLPack requires.
        unsafe { d(ptr) };
    }
}

// ------------------------------------------------------------------------------- import

/// What a producer's `DLTensor` says, copied out of the C struct.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DlTensorDesc {
    /// `device.device_type`.
    pub device_type: i32,
    /// `device.device_id`.
    pub device_id: i32,
    /// `dtype`.
    pub dtype: DlDataType,
    /// `shape` (`ndim` entries).
    pub shape: Vec<i64>,
    /// `strides` in elements, or `None` for a null pointer (row-major).
    pub strides: Option<Vec<i64>>,
    /// `byte_offset`.
    pub byte_offset: u64,
    /// The versioned tensor's read-only flag (rpjrt only reads imported memory).
    pub readonly: bool,
    /// The versioned tensor's flag that a type narrower than a byte takes a byte per
    /// element (`false`: packed, as DLPack has it by default, and always for the legacy
    /// form).
    pub subbyte_padded: bool,
}

/// The most dimensions an imported tensor may have (numpy's limit): its shape and strides
/// are read only within it.
pub const MAX_IMPORT_NDIM: usize = 64;

/// A producer's DLPack managed tensor that rpjrt owns: its deleter runs exactly once, when
/// this (and every buffer made over its memory) is gone. For host-readable tensors it
/// implements [`HostBytes`] over the bytes the tensor addresses.
pub struct ImportedTensor {
    managed: NonNull<c_void>,
    versioned: bool,
    desc: DlTensorDesc,
    /// The addressed bytes: from `data + byte_offset + lo`, `len` long (0 when the memory
    /// is not host-readable or the tensor is empty).
    addr: usize,
    len: usize,
    /// How far element `[0, ...]` lies inside the addressed bytes.
    first: usize,
}

// SAFETY: the tensor is owned by this value alone; DLPack deleters may run on any thread,
// and the described memory is only read.
unsafe impl Send for ImportedTensor {}
// SAFETY: `&ImportedTensor` only reads the copied description and the immutable bytes.
unsafe impl Sync for ImportedTensor {}

impl ImportedTensor {
    /// Takes ownership of a pre-1.0 `DLManagedTensor`.
    ///
    /// # Safety
    /// `managed` must point at a live `DLManagedTensor` that the caller owns and hands over:
    /// from this call on only rpjrt calls its deleter (exactly once; also when this call
    /// fails). Its `dl_tensor` must describe memory that stays allocated and unchanged until
    /// the deleter runs: `ndim` shape entries, `ndim` strides or null, and for host device
    /// types (`kDLCPU`, `kDLCUDAHost`) every byte the shape, strides, dtype and
    /// `byte_offset` address readable at `data`.
    pub unsafe fn from_legacy(managed: *mut DlManagedTensor) -> Result<ImportedTensor> {
        let p = NonNull::new(managed)
            .ok_or_else(|| Error::invalid("the DLPack managed tensor pointer is null"))?;
        // SAFETY: a live managed tensor per the contract; the description is copied.
        let tensor = unsafe { p.as_ref() }.dl_tensor;
        // SAFETY: forwarded contract.
        unsafe { ImportedTensor::own(p.cast(), false, tensor, 0) }
    }

    /// Takes ownership of a DLPack 1.x `DLManagedTensorVersioned`; refuses (and frees) a
    /// tensor of another major version.
    ///
    /// # Safety
    /// As for [`ImportedTensor::from_legacy`], for the versioned struct.
    pub unsafe fn from_versioned(managed: *mut DlManagedTensorVersioned) -> Result<ImportedTensor> {
        let p = NonNull::new(managed)
            .ok_or_else(|| Error::invalid("the DLPack managed tensor pointer is null"))?;
        // SAFETY: the version and deleter fields keep their place in every DLPack version.
        let version = unsafe { p.as_ref() }.version;
        if version.major != 1 {
            // SAFETY: ours to free per the contract; the deleter's place is stable.
            unsafe { delete_managed(p.as_ptr()) };
            return Err(Error::invalid(format!(
                "the producer speaks DLPack {}.{}; rpjrt reads major version 1",
                version.major, version.minor
            )));
        }
        // SAFETY: a live major-1 tensor per the contract; the description is copied.
        let (tensor, flags) = unsafe { (p.as_ref().dl_tensor, p.as_ref().flags) };
        // SAFETY: forwarded contract.
        unsafe { ImportedTensor::own(p.cast(), true, tensor, flags) }
    }

    /// # Safety
    /// `managed` is the live, owned struct (`versioned` says which), `tensor` its copy and
    /// `flags` its flags (0 for the legacy form).
    unsafe fn own(
        managed: NonNull<c_void>,
        versioned: bool,
        tensor: DlTensor,
        flags: u64,
    ) -> Result<ImportedTensor> {
        let ndim = usize::try_from(tensor.ndim).unwrap_or(0);
        let read = |p: *mut i64| -> Option<Vec<i64>> {
            // A larger ndim is refused below, before any of it is read: a producer that
            // claims millions of dimensions would have its shape read far past its end.
            if p.is_null() || ndim == 0 || ndim > MAX_IMPORT_NDIM {
                return None;
            }
            // SAFETY: DLPack guarantees `ndim` entries at a non-null shape or strides.
            Some(unsafe { std::slice::from_raw_parts(p, ndim) }.to_vec())
        };
        let mut t = ImportedTensor {
            managed,
            versioned,
            desc: DlTensorDesc {
                device_type: tensor.device.device_type,
                device_id: tensor.device.device_id,
                dtype: tensor.dtype,
                shape: read(tensor.shape).unwrap_or_default(),
                strides: read(tensor.strides),
                byte_offset: tensor.byte_offset,
                readonly: flags & FLAG_READ_ONLY != 0,
                subbyte_padded: flags & FLAG_SUBBYTE_PADDED != 0,
            },
            addr: 0,
            len: 0,
            first: 0,
        };
        // From here on `t` owns the tensor: an error drops it, which runs the deleter.
        if ndim > MAX_IMPORT_NDIM {
            return Err(Error::invalid(format!(
                "the DLPack tensor claims {ndim} dimensions; rpjrt reads at most \
                 {MAX_IMPORT_NDIM} (numpy's limit), so its shape was not read"
            )));
        }
        if tensor.ndim < 0 || (ndim > 0 && tensor.shape.is_null()) {
            return Err(Error::invalid(format!(
                "the DLPack tensor has ndim {} and {} shape",
                tensor.ndim,
                if tensor.shape.is_null() {
                    "a null"
                } else {
                    "a"
                }
            )));
        }
        if host_readable(t.desc.device_type) {
            let (addr, len, first) = addressed(&t.desc, tensor.data as usize)?;
            (t.addr, t.len, t.first) = (addr, len, first);
        }
        Ok(t)
    }

    /// What the tensor says.
    pub fn desc(&self) -> &DlTensorDesc {
        &self.desc
    }

    /// Whether it came as the versioned struct.
    pub fn is_versioned(&self) -> bool {
        self.versioned
    }

    /// How far element `[0, ...]` lies inside [`HostBytes::bytes`].
    pub fn first_element_offset(&self) -> usize {
        self.first
    }
}

/// The host bytes `desc` addresses from `data`: `(address, length, offset of element
/// [0, ...])`. Errors for sizes that overflow or memory before address 0.
fn addressed(desc: &DlTensorDesc, data: usize) -> Result<(usize, usize, usize)> {
    let d = desc.dtype;
    let itemsize = (usize::from(d.bits) * usize::from(d.lanes)).div_ceil(8);
    let byte_strides: Vec<i64> = match &desc.strides {
        None => {
            let mut s = vec![0i64; desc.shape.len()];
            let mut acc = i64::try_from(itemsize).unwrap_or(i64::MAX);
            for i in (0..s.len()).rev() {
                s[i] = acc;
                acc = acc.saturating_mul(desc.shape[i].max(1));
            }
            s
        }
        Some(s) => s
            .iter()
            .map(|&x| {
                x.checked_mul(itemsize as i64)
                    .ok_or_else(|| Error::invalid(format!("DLPack stride {x} overflows")))
            })
            .collect::<Result<_>>()?,
    };
    let Some((lo, end)) = extent(&desc.shape, &byte_strides, itemsize)? else {
        return Ok((0, 0, 0));
    };
    let start = data as i128 + i128::from(desc.byte_offset) + lo;
    let len = end - lo;
    if data == 0 || start < 0 || start + len > usize::MAX as i128 {
        return Err(Error::invalid(format!(
            "the DLPack tensor's memory ({len} bytes from {data:#x} + {} + {lo}) is not a \
             valid address range",
            desc.byte_offset
        )));
    }
    let len =
        usize::try_from(len).map_err(|_| Error::invalid("the DLPack tensor's extent overflows"))?;
    Ok((start as usize, len, (-lo) as usize))
}

impl Drop for ImportedTensor {
    fn drop(&mut self) {
        let p = self.managed.as_ptr();
        if self.versioned {
            // SAFETY: we own the tensor (per `from_versioned`'s contract); it is freed once.
            unsafe { delete_managed(p.cast::<DlManagedTensorVersioned>()) }
        } else {
            // SAFETY: as above, for the legacy struct.
            unsafe { delete_managed(p.cast::<DlManagedTensor>()) }
        }
    }
}

// SAFETY: `bytes` returns the same range every time, fixed at creation: the bytes the
// tensor addresses, which (per the constructors' contract) stay allocated and unchanged
// until the deleter runs, which happens only when this value drops. rpjrt never writes
// them.
unsafe impl HostBytes for ImportedTensor {
    fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: see the impl's comment.
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }
}

impl std::fmt::Debug for ImportedTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImportedTensor")
            .field("versioned", &self.versioned)
            .field("desc", &self.desc)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_dlpack_h() {
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<DlDataType>(), 4);
        assert_eq!(size_of::<DlTensor>(), 48);
        assert_eq!(offset_of!(DlTensor, shape), 24);
        assert_eq!(size_of::<DlManagedTensor>(), 64);
        assert_eq!(offset_of!(DlManagedTensorVersioned, deleter), 16);
        assert_eq!(offset_of!(DlManagedTensorVersioned, dl_tensor), 32);
        assert_eq!(size_of::<DlManagedTensorVersioned>(), 80);
    }
}
