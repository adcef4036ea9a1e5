//! DLPack, both ways, independent of any capsule or language binding.
//!
//! **Export**: [`export`] / [`export_versioned`] turn a [`Buffer`] into an owning Rust value,
//! [`ManagedTensor`] (`DLManagedTensor`, pre-1.0) or [`ManagedTensorVersioned`]
//! (`DLManagedTensorVersioned`, DLPack 1.x, flagged read-only). It pins the buffer's memory
//! (an [`ExternalReference`](crate::ExternalReference), so the buffer can be neither
//! deleted nor donated meanwhile) until its deleter runs: dropping the value runs it, and
//! [`Exported::into_raw`] hands the C struct to a consumer, who calls the deleter once.
//!
//! ```no_run
//! # fn main() -> rpjrt::Result<()> {
//! # let client = rpjrt::Client::from_path("plugin.so")?;
//! let buffer = client.buffer_from_slice(&[1.0f32, 2.0, 3.0], &[3], &client.default_device()?)?;
//! let tensor = rpjrt::dlpack::export_versioned(&buffer)?;
//! assert_eq!(tensor.shape(), &[3]);
//! let for_c: *mut rpjrt::dlpack::DlManagedTensorVersioned = tensor.into_raw();
//! // ... a C consumer reads it and calls (*for_c).deleter(for_c) once.
//! # let _ = for_c; Ok(()) }
//! ```
//!
//! **Import**: a producer's managed tensor pointer becomes an [`ImportedTensor`] through
//! its `unsafe` constructors ([`ImportedTensor::from_versioned`],
//! [`ImportedTensor::from_legacy`]), whose contract says what the pointer must be; from then
//! on rpjrt owns it and calls its deleter exactly once. [`import`] checks the description
//! ([`PlanImport::plan_import`]) and makes a buffer with [`Client::put`], in place where
//! the memory and the plugin allow it (the buffer then keeps the tensor alive).

use std::any::Any;
use std::sync::Arc;

use crate::client::buffer::Buffer;
use crate::client::{Client, Device};
use crate::dtype::ElementType;
use crate::error::{Error, Result};
use crate::host::{extent, CopyMode, HostArray};

pub use crate::raw::dlpack::{
    delete_managed, host_readable, minor_version_for, DlDataType, DlDevice, DlManagedTensor,
    DlManagedTensorVersioned, DlPackVersion, DlTensor, DlTensorDesc, Exported, ImportedTensor,
    Managed, DEVICE_CPU, DEVICE_CUDA_HOST, FLAG_IS_COPIED, FLAG_READ_ONLY,
};

/// A buffer exported as a pre-1.0 `DLManagedTensor` (see [`export`]).
pub type ManagedTensor = Exported<DlManagedTensor>;
/// A buffer exported as a DLPack 1.x `DLManagedTensorVersioned` (see [`export_versioned`]).
pub type ManagedTensorVersioned = Exported<DlManagedTensorVersioned>;

/// `kDLCUDA`.
pub const DEVICE_CUDA: i32 = 2;
/// `kDLROCM`.
pub const DEVICE_ROCM: i32 = 10;

/// The DLPack `(device_type, device_id)` of a device of a PJRT platform; `Unsupported`-style
/// `InvalidArgument` for a platform DLPack has no device type for.
pub fn device_for_platform(platform: &str, local_hardware_id: i32) -> Result<(i32, i32)> {
    match platform {
        "cpu" | "host" => Ok((DEVICE_CPU, 0)),
        "cuda" | "gpu" => Ok((DEVICE_CUDA, local_hardware_id.max(0))),
        "rocm" => Ok((DEVICE_ROCM, local_hardware_id.max(0))),
        other => Err(Error::invalid(format!(
            "DLPack has no device type for platform {other:?}"
        ))),
    }
}

/// The DLPack `(device_type, device_id)` of a buffer: host memory (as the plugin says,
/// whatever the platform) is `kDLCPU`, or `kDLCUDAHost` on a CUDA platform; device memory
/// goes by the platform ([`device_for_platform`]).
pub fn device_of(buffer: &Buffer) -> Result<(i32, i32)> {
    buffer.check()?;
    let platform = buffer.core().platform_name();
    if buffer.is_on_cpu()? {
        return Ok(match platform {
            "cuda" | "gpu" => (DEVICE_CUDA_HOST, 0),
            _ => (DEVICE_CPU, 0),
        });
    }
    let dev = buffer.device()?;
    device_for_platform(platform, dev.local_hardware_id())
}

/// Exports `buffer` as a pre-1.0 `DLManagedTensor` (for consumers that do not speak
/// DLPack 1.x; it cannot carry the read-only flag).
pub fn export(buffer: &Buffer) -> Result<ManagedTensor> {
    export_with(buffer, Box::new(()))
}

/// Exports `buffer` as a DLPack 1.x `DLManagedTensorVersioned`, flagged read-only (PJRT
/// buffers are immutable).
pub fn export_versioned(buffer: &Buffer) -> Result<ManagedTensorVersioned> {
    export_with(buffer, Box::new(()))
}

/// Exports `buffer` in either form, also keeping `keep_alive` until the consumer's deleter
/// runs (a binding's own bookkeeping, e.g. an owner object to release).
///
/// Waits until the buffer is ready (the consumer reads at once). Errors for a deleted
/// buffer, a platform DLPack has no device type for, and element types DLPack cannot carry
/// (the token).
pub fn export_with<M: Managed>(
    buffer: &Buffer,
    keep_alive: Box<dyn Any + Send>,
) -> Result<Exported<M>> {
    export_flagged(buffer, keep_alive, FLAG_READ_ONLY)
}

/// As [`export_with`], for a buffer made for this consumer alone (a copy asked for with
/// `copy=True`) that no one else can reach: the consumer may write to it, so the tensor is
/// flagged as a copy, not read-only. Never pass a buffer anything else still holds: its
/// readers would see the consumer's writes.
pub fn export_copy_with<M: Managed>(
    buffer: Buffer,
    keep_alive: Box<dyn Any + Send>,
) -> Result<Exported<M>> {
    export_flagged(&buffer, keep_alive, FLAG_IS_COPIED)
}

fn export_flagged<M: Managed>(
    buffer: &Buffer,
    keep_alive: Box<dyn Any + Send>,
    versioned_flags: u64,
) -> Result<Exported<M>> {
    let (device_type, device_id) = device_of(buffer)?;
    let t = buffer.element_type();
    let dtype = t
        .dlpack()
        .ok_or_else(|| Error::invalid(format!("DLPack cannot carry {t} buffers")))?;
    // A type narrower than a byte whose elements take a byte each (float6): DLPack 1.1's
    // padded flag says so; the legacy form has no flags, and its readers would take the
    // bytes as packed elements.
    let padded = dtype.bits < 8 && t.byte_width().is_some();
    if padded && !M::VERSIONED {
        return Err(Error::invalid(format!(
            "{t} elements take a byte each, which only versioned DLPack (1.1 and newer, its \
             padded flag) can say: ask for max_version (1, 1) or newer"
        )));
    }
    // The CPU plugins disagree on such a buffer: one reports the layout asked for but holds
    // row-major bytes, so strides made from the layout would read other elements.
    if buffer.raw().meta().non_default_layout() {
        return Err(Error::invalid(
            "a buffer put with a non-default device layout (or a copy of one) cannot be \
             exported through DLPack: plugins disagree on how its bytes are laid out; read \
             it with to_host/to_numpy, or put the data with the default layout",
        ));
    }
    let pin = Arc::new(buffer.clone()).external_reference()?;
    let shape = buffer.dims().to_vec();
    let layout = match buffer.layout() {
        Ok(l) => l,
        // A plugin that cannot tell the layout holds the default (row-major) one.
        Err(e) if e.code() == crate::Code::Unimplemented => None,
        Err(e) => return Err(e),
    };
    let strides = export_strides(&shape, layout.as_deref());
    let spec = crate::raw::dlpack::ExportSpec {
        data: pin.data_ptr(),
        device: DlDevice {
            device_type,
            device_id,
        },
        dtype,
        shape,
        strides,
        flags: match (M::VERSIONED, padded) {
            (false, _) => 0,
            (true, false) => versioned_flags,
            (true, true) => versioned_flags | crate::raw::dlpack::FLAG_SUBBYTE_PADDED,
        },
    };
    Ok(Exported::new(spec, Box::new((pin, keep_alive))))
}

/// Makes a buffer on `device` from an imported DLPack tensor through [`Client::put`]:
/// checks the description ([`PlanImport::plan_import`]), then uses the memory in place
/// where `mode` and the plugin allow it (host platforms only; the buffer keeps the tensor,
/// and so the producer's memory, alive) or copies it. The tensor's deleter runs when
/// neither the tensor nor a buffer over its memory is left, also on error.
pub fn import(
    client: &Client,
    tensor: ImportedTensor,
    device: &Device,
    mode: CopyMode,
) -> Result<Buffer> {
    let plan = tensor.desc().plan_import()?;
    let host_platform = matches!(client.platform_name()?.as_str(), "cpu" | "host");
    let mode = match mode {
        // Only host platforms can use host memory in place; others copy.
        CopyMode::IfNeeded if !host_platform => CopyMode::Always,
        m => m,
    };
    let first = tensor.first_element_offset();
    let array = HostArray::from_owner(Arc::new(tensor), plan.element_type, &plan.dims)
        .with_byte_strides(&plan.byte_strides, first);
    client.put(&array, device, None, mode)
}

/// How to read an imported DLPack tensor as a host array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportPlan {
    /// The element type.
    pub element_type: ElementType,
    /// The dims.
    pub dims: Vec<i64>,
    /// Byte strides (may be zero or negative).
    pub byte_strides: Vec<i64>,
    /// Where the addressed bytes start, relative to `data + byte_offset` (0 or negative).
    pub lo: i128,
    /// How many bytes are addressed, from `data + byte_offset + lo`.
    pub len: usize,
}

impl ImportPlan {
    /// The offset of element `[0, ...]` inside the addressed range.
    pub fn offset(&self) -> usize {
        (-self.lo) as usize
    }
}

/// The import check of a [`DlTensorDesc`]. The type lives with the C structs in the unsafe
/// layer (`rpjrt-raw`); its checks are safe code and live here, as this trait's one method.
pub trait PlanImport {
    /// Checks the description and plans the import: a host-readable device, a dtype rpjrt
    /// knows with whole-byte elements and one lane, non-negative dims, strides whose byte
    /// sizes and extent do not overflow.
    fn plan_import(&self) -> Result<ImportPlan>;
}

impl PlanImport for DlTensorDesc {
    fn plan_import(&self) -> Result<ImportPlan> {
        if !host_readable(self.device_type) {
            return Err(Error::invalid(format!(
                "importing DLPack device type {} memory is not supported: rpjrt reads DLPack \
                 tensors from host memory (kDLCPU, kDLCUDAHost); copy it to the host first",
                self.device_type
            )));
        }
        let d = self.dtype;
        let t = ElementType::from_dlpack(d).ok_or_else(|| {
            Error::invalid(format!(
                "DLPack dtype (code {}, bits {}, lanes {}) has no PJRT equivalent rpjrt supports",
                d.code, d.bits, d.lanes
            ))
        })?;
        let itemsize = t.byte_width().ok_or_else(|| {
            Error::invalid(format!("DLPack import of packed {t} data is not supported"))
        })?;
        // A type narrower than a byte that PJRT keeps a byte per element (float6): DLPack
        // packs it unless the producer says otherwise.
        if d.bits < 8 && !self.subbyte_padded {
            return Err(Error::invalid(format!(
                "the DLPack tensor's {t} elements are packed ({} bits each; the producer did \
                 not set DLPack 1.1's padded flag), and rpjrt reads {t} one byte per element",
                d.bits
            )));
        }
        let rank = self.shape.len();
        let byte_strides: Vec<i64> = match &self.strides {
            None => crate::host::c_strides(&self.shape, itemsize),
            Some(s) if s.len() == rank => s
                .iter()
                .map(|&x| {
                    x.checked_mul(itemsize as i64)
                        .ok_or_else(|| Error::invalid(format!("DLPack stride {x} overflows")))
                })
                .collect::<Result<_>>()?,
            Some(s) => {
                return Err(Error::invalid(format!(
                    "DLPack tensor has {} strides for {rank} dimensions",
                    s.len()
                )))
            }
        };
        let (lo, end) = extent(&self.shape, &byte_strides, itemsize)?.unwrap_or((0, 0));
        let len = usize::try_from(end - lo)
            .map_err(|_| Error::invalid("the DLPack tensor's extent overflows"))?;
        if i128::from(self.byte_offset) + lo < 0 && len > 0 && self.strides.is_none() {
            // Unreachable for row-major strides (lo is 0); kept as a guard.
            return Err(Error::invalid("the DLPack tensor starts before its data"));
        }
        Ok(ImportPlan {
            element_type: t,
            dims: self.shape.clone(),
            byte_strides,
            lo,
            len,
        })
    }
}

/// Element strides of an exported buffer from its layout (minor-to-major dimension
/// order), or row-major when the layout is unknown or not a permutation.
pub fn export_strides(dims: &[i64], minor_to_major: Option<&[i64]>) -> Vec<i64> {
    let n = dims.len();
    let mut s = vec![0i64; n];
    let order = minor_to_major
        .and_then(|m| crate::layout::dimension_order(m, n))
        .unwrap_or_else(|| (0..n).rev().collect());
    let mut acc = 1i64;
    for &d in &order {
        s[d] = acc;
        acc = acc.saturating_mul(dims[d].max(1));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DlDataType;

    fn desc(shape: &[i64], strides: Option<&[i64]>) -> DlTensorDesc {
        DlTensorDesc {
            device_type: DEVICE_CPU,
            device_id: 0,
            dtype: ElementType::F32.dlpack().unwrap(),
            shape: shape.to_vec(),
            strides: strides.map(|s| s.to_vec()),
            byte_offset: 0,
            readonly: false,
            subbyte_padded: false,
        }
    }

    #[test]
    fn plans_row_major_negative_and_broadcast_tensors() {
        let p = desc(&[2, 3], None).plan_import().unwrap();
        assert_eq!((p.byte_strides.clone(), p.lo, p.len), (vec![12, 4], 0, 24));
        let p = desc(&[3], Some(&[-1])).plan_import().unwrap();
        assert_eq!((p.lo, p.len, p.offset()), (-8, 12, 8));
        let p = desc(&[1 << 40], Some(&[0])).plan_import().unwrap();
        assert_eq!(p.len, 4);
        assert!(desc(&[2], Some(&[i64::MAX])).plan_import().is_err());
        assert!(desc(&[2], Some(&[1, 1])).plan_import().is_err());
    }

    #[test]
    fn refuses_device_memory_and_unknown_dtypes() {
        let mut d = desc(&[2], None);
        d.device_type = DEVICE_CUDA;
        assert!(d
            .plan_import()
            .unwrap_err()
            .to_string()
            .contains("device type 2"));
        let mut d = desc(&[2], None);
        d.dtype = DlDataType {
            code: 2,
            bits: 32,
            lanes: 4,
        };
        assert!(d.plan_import().unwrap_err().to_string().contains("lanes 4"));
        let mut d = desc(&[2], None);
        d.dtype = ElementType::S4.dlpack().unwrap();
        assert!(d.plan_import().is_err());
    }

    #[test]
    fn export_strides_follow_the_layout() {
        assert_eq!(export_strides(&[2, 3], None), vec![3, 1]);
        assert_eq!(export_strides(&[2, 3], Some(&[0, 1])), vec![1, 2]);
        assert_eq!(export_strides(&[2, 3], Some(&[5, 1])), vec![3, 1]);
        assert_eq!(device_for_platform("cpu", 3).unwrap(), (DEVICE_CPU, 0));
        assert_eq!(device_for_platform("cuda", 1).unwrap(), (DEVICE_CUDA, 1));
        assert!(device_for_platform("tpu", 0).is_err());
    }
}
