//! Device memory accounting: the `RPJRT_FAKE_MEMORY_LIMIT` knob and
//! `PJRT_Device_MemoryStats`.

use std::sync::{Arc, Mutex};

use rpjrt_sys as sys;

use crate::error::Fail;

#[derive(Default)]
struct Stats {
    in_use: u64,
    peak: u64,
    num_allocs: u64,
    largest_alloc: u64,
}

/// One device's `device` memory: what is in use, against an optional limit.
pub(crate) struct DeviceMemory {
    device: usize,
    limit: Option<u64>,
    stats: Mutex<Stats>,
}

impl DeviceMemory {
    pub fn new(device: usize, limit: Option<u64>) -> Arc<DeviceMemory> {
        Arc::new(DeviceMemory {
            device,
            limit,
            stats: Mutex::new(Stats::default()),
        })
    }

    fn stats(&self) -> std::sync::MutexGuard<'_, Stats> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reserves `bytes`, or fails with RESOURCE_EXHAUSTED past the limit. The
    /// reservation is returned when the charge is dropped (with the buffer's data).
    pub fn charge(self: &Arc<Self>, bytes: usize) -> Result<Charge, Fail> {
        let bytes = bytes as u64;
        let mut st = self.stats();
        if let Some(limit) = self.limit {
            if st.in_use.saturating_add(bytes) > limit {
                return Err(Fail::new(
                    sys::PJRT_Error_Code_RESOURCE_EXHAUSTED,
                    format!(
                        "fake plugin: out of memory on device {}: allocating {bytes} bytes \
                         with {} of {limit} in use (RPJRT_FAKE_MEMORY_LIMIT)",
                        self.device, st.in_use
                    ),
                ));
            }
        }
        st.in_use += bytes;
        st.peak = st.peak.max(st.in_use);
        st.num_allocs += 1;
        st.largest_alloc = st.largest_alloc.max(bytes);
        Ok(Charge {
            memory: self.clone(),
            bytes,
        })
    }
}

/// Bytes reserved on a device, given back on drop.
pub(crate) struct Charge {
    memory: Arc<DeviceMemory>,
    bytes: u64,
}

impl Drop for Charge {
    fn drop(&mut self) {
        let mut st = self.memory.stats();
        st.in_use = st.in_use.saturating_sub(self.bytes);
    }
}

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

entry!(PJRT_Device_MemoryStats, |a, _| {
    let mem = &crate::registry::get(a.device)?.memory;
    let st = mem.stats();
    let limit = mem.limit.unwrap_or(0);
    (a.bytes_in_use, a.peak_bytes_in_use, a.num_allocs) =
        (int(st.in_use), int(st.peak), int(st.num_allocs));
    a.largest_alloc_size = int(st.largest_alloc);
    (
        a.peak_bytes_in_use_is_set,
        a.num_allocs_is_set,
        a.largest_alloc_size_is_set,
    ) = (true, true, true);
    (a.bytes_limit, a.largest_free_block_bytes) =
        (int(limit), int(limit.saturating_sub(st.in_use)));
    (a.bytes_limit_is_set, a.largest_free_block_bytes_is_set) =
        (mem.limit.is_some(), mem.limit.is_some());
});
