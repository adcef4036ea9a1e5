//! glibc's fast bins, switched off while a plugin deserializes an executable.
//!
//! Loading a serialized executable on XLA's CPU plugins rebuilds the program from protocol
//! buffers: hundreds of thousands of small allocations and frees, interleaved with larger
//! ones. glibc keeps freed small blocks (up to 128 bytes on 64-bit) in "fast bins", unmerged,
//! and every later request of 1 KiB or more first walks and merges all of them
//! (`malloc_consolidate`). With that pattern the walks touch memory all over the heap: a
//! load of a 12-layer transformer spent 28 % of its instructions in glibc's allocator, and
//! with fast bins off it took 0.80-0.91x the CPU time (interleaved, in one process and in
//! fresh ones; the busier the machine, the larger the saving; 0.84-0.87x in fresh processes
//! at a load of 2 on 2 cores). The instruction count falls only 1.2 %: the saving is in memory access (the
//! walks jump between blocks all over the heap; callgrind's cache model counts 13 % fewer
//! first-level read misses, and it does not model the TLB). [`NoFastBins`] turns them
//! off (`mallopt(M_MXFAST, 0)`) for the length of the call and puts glibc's default back
//! afterwards; small blocks still go through glibc's per-thread cache first.
//!
//! The setting is the process's, not the thread's: while a guard lives, every thread
//! allocates without fast bins (slower or faster, never wrong: the blocks already in fast
//! bins stay valid and are merged on the next walk). Guards on several threads share one
//! count, so the default comes back when the last one ends.
//!
//! Left alone (no guard does anything) when the process is not on glibc, when
//! `GLIBC_TUNABLES` sets `glibc.malloc.mxfast` (the user chose a size, which `mallopt` has
//! no way to read back and restore), or when `RPJRT_KEEP_FASTBINS` is set to anything but
//! `0` or empty. A program that calls `mallopt(M_MXFAST, ..)` itself should set
//! `RPJRT_KEEP_FASTBINS=1`: a guard restores glibc's default, not the program's value.

use std::sync::{Mutex, OnceLock};

/// How many guards are alive (the setting is switched on the first and back on the last).
static ACTIVE: Mutex<usize> = Mutex::new(0);

/// glibc's default fast-bin limit, `64 * sizeof(size_t) / 4`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const DEFAULT_MXFAST: libc::c_int = (64 * std::mem::size_of::<usize>() / 4) as libc::c_int;

/// Whether guards may change the setting, from the two environment variables' values
/// (`GLIBC_TUNABLES`, `RPJRT_KEEP_FASTBINS`); read once per process by [`NoFastBins`].
pub fn allowed(glibc_tunables: Option<&str>, keep_fastbins: Option<&str>) -> bool {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return false;
    }
    if keep_fastbins.is_some_and(|v| !v.is_empty() && v != "0") {
        return false;
    }
    // GLIBC_TUNABLES=name=value:name=value...; only an mxfast setting matters here.
    !glibc_tunables.is_some_and(|t| {
        t.split(':')
            .any(|kv| kv.split('=').next() == Some("glibc.malloc.mxfast"))
    })
}

fn allowed_here() -> bool {
    static ALLOWED: OnceLock<bool> = OnceLock::new();
    *ALLOWED.get_or_init(|| {
        let tunables = std::env::var_os("GLIBC_TUNABLES");
        let keep = std::env::var_os("RPJRT_KEEP_FASTBINS");
        allowed(
            tunables.as_deref().and_then(|v| v.to_str()),
            keep.as_deref().map(|v| v.to_str().unwrap_or("1")),
        )
    })
}

/// Sets glibc's fast-bin limit; false if glibc refused (or this is not glibc).
fn set_mxfast(on: bool) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let value = if on { DEFAULT_MXFAST } else { 0 };
        // SAFETY: mallopt takes the main arena's lock, merges its fast bins and stores the
        // new limit; glibc allows it at any time, from any thread. Blocks already in
        // another arena's fast bins stay valid (they are merged on that arena's next walk,
        // whatever the limit). 0 and the default are within the documented range.
        unsafe { libc::mallopt(libc::M_MXFAST, value) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = on;
        false
    }
}

fn lock() -> std::sync::MutexGuard<'static, usize> {
    ACTIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Keeps glibc's fast bins off while it lives (see the module documentation); a guard that
/// is not allowed to change anything does nothing.
pub struct NoFastBins {
    counted: bool,
}

impl NoFastBins {
    /// Turns fast bins off (if allowed, and if no other guard already has).
    pub fn enter() -> NoFastBins {
        if !allowed_here() {
            return NoFastBins { counted: false };
        }
        let mut n = lock();
        if *n == 0 && !set_mxfast(false) {
            return NoFastBins { counted: false };
        }
        *n += 1;
        NoFastBins { counted: true }
    }

    /// Whether this guard holds fast bins off (false where it is not allowed to).
    pub fn active(&self) -> bool {
        self.counted
    }
}

impl Drop for NoFastBins {
    fn drop(&mut self) {
        if !self.counted {
            return;
        }
        let mut n = lock();
        *n -= 1;
        if *n == 0 {
            set_mxfast(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::allowed;

    #[test]
    fn allowed_on_glibc_unless_the_user_chose() {
        let glibc = cfg!(all(target_os = "linux", target_env = "gnu"));
        assert_eq!(allowed(None, None), glibc);
        assert_eq!(allowed(Some("glibc.malloc.hugetlb=1"), Some("0")), glibc);
        assert_eq!(allowed(None, Some("")), glibc);
        assert!(!allowed(None, Some("1")));
        assert!(!allowed(Some("glibc.malloc.mxfast=0"), None));
        assert!(!allowed(
            Some("glibc.malloc.hugetlb=1:glibc.malloc.mxfast=64"),
            None
        ));
    }
}
