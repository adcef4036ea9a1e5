//! `PJRT_Device_MemoryStats`: a device allocator's figures.

use rpjrt_sys as sys;

use super::client::Client;
use super::device::DeviceRef;
use super::{args_types, pjrt, Args};
use crate::error::{Error, Result};
use crate::oom::MemoryStats;

args_types! {
    PJRT_Device_MemoryStats_Args => PJRT_Device_MemoryStats_Args_STRUCT_SIZE,
}

/// Calls `PJRT_Device_MemoryStats` on a device of this live client; `None` for a figure
/// the plugin did not set.
pub fn device_memory_stats(client: &Client, d: DeviceRef) -> Result<MemoryStats> {
    if !d.belongs_to(client) {
        return Err(Error::invalid("the device belongs to another client"));
    }
    let mut a = sys::PJRT_Device_MemoryStats_Args::new();
    a.device = d.ptr();
    // SAFETY: `d` is a device of this live client; the args struct is zeroed and sized.
    unsafe { pjrt!(client.api(), PJRT_Device_MemoryStats, &mut a) }?;
    let opt = |set: bool, v: i64| set.then_some(v);
    Ok(MemoryStats {
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
