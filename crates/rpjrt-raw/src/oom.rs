//! What an out-of-memory error carries: the device allocator's figures
//! ([`MemoryStats`]), the client's create options that bound memory, and a hint
//! ([`OomReport`]). Plain data, importing nothing: the client handles fill it in where a
//! plugin's allocation fails (`ClientCore::with_memory_context`), and
//! [`crate::error::Error::OutOfMemory`] carries it to every face.

use std::fmt;

/// A device allocator's figures, as `PJRT_Device_MemoryStats` reports them. Figures the
/// plugin leaves unset are `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes allocated now.
    pub bytes_in_use: i64,
    /// The most bytes ever allocated at once.
    pub peak_bytes_in_use: Option<i64>,
    /// Number of allocations made.
    pub num_allocs: Option<i64>,
    /// The largest single allocation made.
    pub largest_alloc_size: Option<i64>,
    /// The allocator's limit.
    pub bytes_limit: Option<i64>,
    /// The largest block that could be allocated now.
    pub largest_free_block_bytes: Option<i64>,
}

impl fmt::Display for MemoryStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: Option<i64>| v.map_or_else(|| "not reported".to_string(), human_bytes);
        write!(
            f,
            "in use {}, limit {}, largest free block {}, peak {}, allocations {}",
            human_bytes(self.bytes_in_use),
            show(self.bytes_limit),
            show(self.largest_free_block_bytes),
            show(self.peak_bytes_in_use),
            self.num_allocs
                .map_or_else(|| "not reported".to_string(), |n| n.to_string())
        )
    }
}

/// `12345678` → `11.8 MiB (12345678 bytes)`.
pub fn human_bytes(n: i64) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v.abs() >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} bytes")
    } else {
        format!("{v:.1} {} ({n} bytes)", units[u])
    }
}

/// The create-option names that bound a client's device memory (the CUDA and ROCm
/// plugins read them; see `rpjrt_cuda::CudaOptions`).
pub const MEMORY_OPTIONS: &[&str] = &["memory_fraction", "preallocate", "allocator"];

/// One device's allocator figures in an [`OomReport`], or why there are none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceFigures {
    /// The device's id.
    pub device: i32,
    /// The figures, or the plugin's answer when it reports none (e.g. `UNIMPLEMENTED`).
    pub stats: std::result::Result<MemoryStats, String>,
}

/// What an out-of-memory error carries besides the plugin's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OomReport {
    /// What was being allocated (`float32[8], 32 bytes, on device 0`), when known.
    pub request: Option<String>,
    /// The size of the request in bytes, when known.
    pub request_bytes: Option<u64>,
    /// The allocator figures of the devices involved.
    pub devices: Vec<DeviceFigures>,
    /// The client's create options that bound memory (name, value as text), in the order
    /// given; empty when none was set.
    pub options: Vec<(String, String)>,
}

impl OomReport {
    /// The figures of the first device that reported them.
    pub fn stats(&self) -> Option<&MemoryStats> {
        self.devices.iter().find_map(|d| d.stats.as_ref().ok())
    }

    /// What to change: whether the client's memory is capped, and what to try.
    pub fn hint(&self) -> String {
        let option = |n: &str| {
            self.options
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.as_str())
        };
        let mut parts = Vec::new();
        if let (Some(s), Some(req)) = (self.stats(), self.request_bytes) {
            let req = i64::try_from(req).unwrap_or(i64::MAX);
            match (s.bytes_limit, s.largest_free_block_bytes) {
                (Some(limit), _) if req > limit => parts.push(format!(
                    "the request alone ({}) is larger than the device's limit: split it \
                     (smaller batches, sharding over more devices)",
                    human_bytes(req)
                )),
                (Some(limit), Some(free))
                    if req <= limit.saturating_sub(s.bytes_in_use) && req > free =>
                {
                    parts.push(
                        "enough bytes are free but not in one block (fragmentation): free or \
                         reorder long-lived buffers"
                            .to_string(),
                    )
                }
                _ => {}
            }
        }
        match option("memory_fraction") {
            Some(f) => parts.push(format!(
                "the client is capped at memory_fraction={f}: raise it (at most 1.0) if the \
                 device has room to spare"
            )),
            None if option("allocator") == Some("platform") => parts.push(
                "the client allocates on demand (allocator=platform): memory is bounded only by \
                 the device and other processes on it"
                    .to_string(),
            ),
            None => parts.push(
                "the client sets no memory cap (memory_fraction, preallocate and allocator \
                 are the plugin's defaults)"
                    .to_string(),
            ),
        }
        if option("preallocate") == Some("true") {
            parts.push(
                "preallocate=true reserves the whole share at client creation: set \
                 preallocate=false when other processes share the device"
                    .to_string(),
            );
        }
        parts.push(
            "free buffers you no longer need (delete or drop them), donate inputs, or use \
             smaller batches"
                .to_string(),
        );
        parts.join("; ")
    }
}

impl fmt::Display for OomReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(r) = &self.request {
            writeln!(f, "request: {r}")?;
        }
        if self.devices.is_empty() {
            writeln!(f, "no device was named, so no allocator figures")?;
        }
        for d in &self.devices {
            match &d.stats {
                Ok(s) => writeln!(f, "device {} allocator: {s}", d.device)?,
                Err(why) => writeln!(
                    f,
                    "device {}: the plugin reports no allocator figures ({why})",
                    d.device
                )?,
            }
        }
        if self.options.is_empty() {
            writeln!(f, "client memory options: none set")?;
        } else {
            let set: Vec<String> = self
                .options
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            writeln!(f, "client memory options: {}", set.join(", "))?;
        }
        write!(f, "hint: {}", self.hint())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(limit: i64, in_use: i64, free: i64, req: u64, options: &[(&str, &str)]) -> OomReport {
        OomReport {
            request: Some("a request".into()),
            request_bytes: Some(req),
            devices: vec![DeviceFigures {
                device: 0,
                stats: Ok(MemoryStats {
                    bytes_in_use: in_use,
                    bytes_limit: Some(limit),
                    largest_free_block_bytes: Some(free),
                    ..Default::default()
                }),
            }],
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn bytes_read_well() {
        assert_eq!(human_bytes(512), "512 bytes");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB (3145728 bytes)");
        let s = MemoryStats {
            bytes_in_use: 10,
            ..Default::default()
        };
        assert!(s.to_string().contains("limit not reported"));
    }

    #[test]
    fn hints_say_whether_memory_is_capped_and_what_to_change() {
        let r = report(100, 10, 90, 500, &[]).to_string();
        assert!(r.contains("larger than the device's limit"), "{r}");
        assert!(r.contains("no memory cap"), "{r}");
        assert!(r.contains("client memory options: none set"), "{r}");
        assert!(r.contains("in use 10 bytes, limit 100 bytes"), "{r}");
        let r = report(100, 10, 20, 50, &[("memory_fraction", "0.5")]).to_string();
        assert!(r.contains("fragmentation"), "{r}");
        assert!(r.contains("capped at memory_fraction=0.5"), "{r}");
        assert!(
            r.contains("client memory options: memory_fraction=0.5"),
            "{r}"
        );
        let r = report(100, 90, 10, 50, &[("preallocate", "true")]).to_string();
        assert!(
            !r.contains("fragmentation") && !r.contains("larger than"),
            "{r}"
        );
        assert!(r.contains("preallocate=false"), "{r}");
        let r = report(100, 90, 10, 50, &[("allocator", "platform")]).hint();
        assert!(r.contains("on demand"), "{r}");
    }
}
