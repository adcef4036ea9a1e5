//! `PJRT_Device_MemoryStats`: a device allocator's figures.

use rpjrt_sys as sys;

use super::calls::DevicePtr;
use super::{args_types, pjrt, Api, Args};
use crate::error::Result;

args_types! {
    PJRT_Device_MemoryStats_Args => PJRT_Device_MemoryStats_Args_STRUCT_SIZE,
}

/// What the plugin filled in; `None` for a figure it did not set.
#[derive(Clone, Debug, Default)]
pub(crate) struct RawMemoryStats {
    pub bytes_in_use: i64,
    pub peak_bytes_in_use: Option<i64>,
    pub num_allocs: Option<i64>,
    pub largest_alloc_size: Option<i64>,
    pub bytes_limit: Option<i64>,
    pub largest_free_block_bytes: Option<i64>,
}

/// Calls `PJRT_Device_MemoryStats` on a live device.
pub(crate) fn device_memory_stats(api: &Api, d: DevicePtr) -> Result<RawMemoryStats> {
    let mut a = sys::PJRT_Device_MemoryStats_Args::new();
    a.device = d.0;
    // SAFETY: `d` is a live device of this plugin; the args struct is zeroed and sized.
    unsafe { pjrt!(api, PJRT_Device_MemoryStats, &mut a) }?;
    let opt = |set: bool, v: i64| set.then_some(v);
    Ok(RawMemoryStats {
        bytes_in_use: a.bytes_in_use,
        peak_bytes_in_use: opt(a.peak_bytes_in_use_is_set, a.peak_bytes_in_use),
        num_allocs: opt(a.num_allocs_is_set, a.num_allocs),
        largest_alloc_size: opt(a.largest_alloc_size_is_set, a.largest_alloc_size),
        bytes_limit: opt(a.bytes_limit_is_set, a.bytes_limit),
        largest_free_block_bytes: opt(
            a.largest_free_block_bytes_is_set,
            a.largest_free_block_bytes,
        ),
    })
}
