//! DLPack, independent of any capsule or language binding: device mapping, the tensor
//! description a producer hands over, the import plan (element type, byte strides, the
//! byte range to keep alive) and the strides of an export.
//!
//! A binding reads a producer's `DLTensor` into a [`DlTensorDesc`], asks it for an
//! [`ImportPlan`], keeps the planned byte range alive with the producer's deleter, and
//! passes a [`crate::HostArray`] built from the plan to [`crate::Client::put`].

use crate::dtype::{DlDataType, ElementType};
use crate::error::{Error, Result};
use crate::host::extent;

/// `kDLCPU`.
pub const DEVICE_CPU: i32 = 1;
/// `kDLCUDA`.
pub const DEVICE_CUDA: i32 = 2;
/// `kDLCUDAHost` (pinned host memory, readable by the CPU).
pub const DEVICE_CUDA_HOST: i32 = 3;
/// `kDLROCM`.
pub const DEVICE_ROCM: i32 = 10;
/// `DLPACK_FLAG_BITMASK_READ_ONLY` of a versioned tensor.
pub const FLAG_READ_ONLY: u64 = 1;

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

/// Whether memory on a DLPack device type can be read by the host CPU.
pub const fn host_readable(device_type: i32) -> bool {
    device_type == DEVICE_CPU || device_type == DEVICE_CUDA_HOST
}

/// What a producer's `DLTensor` says, read out of the C struct by the caller.
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

impl DlTensorDesc {
    /// Checks the description and plans the import: a host-readable device, a dtype rpjrt
    /// knows with whole-byte elements and one lane, non-negative dims, strides whose byte
    /// sizes and extent do not overflow.
    pub fn plan_import(&self) -> Result<ImportPlan> {
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
    let order: Vec<usize> = match minor_to_major {
        Some(m) if m.len() == n && m.iter().all(|&d| d >= 0 && (d as usize) < n) => {
            m.iter().map(|&d| d as usize).collect()
        }
        _ => (0..n).rev().collect(),
    };
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

    fn desc(shape: &[i64], strides: Option<&[i64]>) -> DlTensorDesc {
        DlTensorDesc {
            device_type: DEVICE_CPU,
            device_id: 0,
            dtype: ElementType::F32.dlpack().unwrap(),
            shape: shape.to_vec(),
            strides: strides.map(|s| s.to_vec()),
            byte_offset: 0,
            readonly: false,
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
