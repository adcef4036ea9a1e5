//! The calling thread's floating-point mode: flush-to-zero (FTZ) and denormals-are-zero
//! (DAZ).
//!
//! XLA's CPU runtime computes with subnormal inputs and results flushed to zero. XLA also
//! evaluates constant expressions while it compiles, on the thread that called compile,
//! under whatever mode that thread has; a Rust (or Python) thread starts with FTZ and DAZ
//! off, so a folded `ceil(1e-40)` kept the subnormal and gave 1 where the same operation on
//! a runtime argument gave 0. [`FlushDenormals`] sets the runtime's mode for the length of
//! a plugin call that can evaluate a program (compile, topology compile, load of a
//! serialized executable) and restores the caller's mode afterwards. It is not used on the
//! execute path: the plugin's own threads run programs under the runtime's mode already.
//!
//! Only the CPU runtime is known to flush ([`runtime_flushes`]): XLA's GPU runtime keeps
//! subnormals unless `xla_gpu_ftz` is set (off by default), so on other platforms the
//! caller's mode is left as it is (what it was before this guard existed).
//!
//! The bits: MXCSR FTZ (bit 15) and DAZ (bit 6) on x86-64; FPCR FZ (bit 24, which flushes
//! inputs and outputs alike) on aarch64. Other architectures have no guard (no mode is
//! changed there).

use std::marker::PhantomData;

/// MXCSR: flush-to-zero (bit 15) and denormals-are-zero (bit 6).
#[cfg(target_arch = "x86_64")]
const FLUSH_BITS: u64 = (1 << 15) | (1 << 6);
/// FPCR: FZ (bit 24).
#[cfg(target_arch = "aarch64")]
const FLUSH_BITS: u64 = 1 << 24;

/// The control register that holds the mode, widened to 64 bits.
#[cfg(target_arch = "x86_64")]
fn read_control() -> u64 {
    let mut csr: u32 = 0;
    // SAFETY: `stmxcsr` stores the 32-bit MXCSR of the current thread into `csr`, a live
    // local; it changes no state (SSE is part of the x86-64 baseline).
    unsafe {
        std::arch::asm!(
            "stmxcsr [{p}]",
            p = in(reg) std::ptr::addr_of_mut!(csr),
            options(nostack, preserves_flags)
        );
    }
    u64::from(csr)
}

#[cfg(target_arch = "x86_64")]
fn write_control(value: u64) {
    // Only values read by `read_control` (with FTZ/DAZ changed) reach here: 32 bits.
    let csr = value as u32;
    // SAFETY: `ldmxcsr` loads a value read from MXCSR on this thread with only the FTZ and
    // DAZ bits changed, so no reserved bit is set (which would fault); it changes only this
    // thread's rounding/flush mode, which the guard restores.
    unsafe {
        std::arch::asm!(
            "ldmxcsr [{p}]",
            p = in(reg) std::ptr::addr_of!(csr),
            options(nostack, readonly, preserves_flags)
        );
    }
}

#[cfg(target_arch = "aarch64")]
fn read_control() -> u64 {
    let fpcr: u64;
    // SAFETY: reading FPCR is allowed at EL0 and changes no state.
    unsafe {
        std::arch::asm!("mrs {}, fpcr", out(reg) fpcr, options(nomem, nostack, preserves_flags));
    }
    fpcr
}

#[cfg(target_arch = "aarch64")]
fn write_control(value: u64) {
    // SAFETY: writes back a value read from FPCR on this thread with only FZ changed; FPCR
    // is writable at EL0 and governs only this thread's floating-point mode, which the
    // guard restores.
    unsafe {
        std::arch::asm!("msr fpcr, {}", in(reg) value, options(nomem, nostack, preserves_flags));
    }
}

/// Whether the calling thread flushes subnormals to zero (on x86-64: both FTZ and DAZ set;
/// on aarch64: FZ set; elsewhere always false).
#[cfg(test)]
fn flushing() -> bool {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        read_control() & FLUSH_BITS == FLUSH_BITS
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// Sets (`true`) or clears (`false`) the calling thread's flush mode; returns the previous
/// control value for [`FlushDenormals`]'s restore.
fn set_flushing(on: bool) -> Option<u64> {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        let old = read_control();
        let new = if on {
            old | FLUSH_BITS
        } else {
            old & !FLUSH_BITS
        };
        if new != old {
            write_control(new);
        }
        Some(old)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = on;
        None
    }
}

/// Whether XLA's runtime for `platform` (a PJRT platform name) flushes subnormals: true
/// for `cpu` only.
pub fn runtime_flushes(platform: &str) -> bool {
    platform.eq_ignore_ascii_case("cpu")
}

/// Sets the calling thread's mode to flush subnormals (XLA's runtime mode) while it lives,
/// and puts the previous mode back on drop. Not `Send`: the mode belongs to a thread.
pub struct FlushDenormals {
    saved: Option<u64>,
    _thread: PhantomData<*const ()>,
}

impl FlushDenormals {
    /// Enters the flushing mode (one register read, and a write only when it changes).
    #[inline]
    pub fn enter() -> FlushDenormals {
        FlushDenormals {
            saved: set_flushing(true),
            _thread: PhantomData,
        }
    }

    /// [`FlushDenormals::enter`] when `flush`, else a guard that changes nothing.
    #[inline]
    pub fn enter_if(flush: bool) -> FlushDenormals {
        if flush {
            FlushDenormals::enter()
        } else {
            FlushDenormals {
                saved: None,
                _thread: PhantomData,
            }
        }
    }

    /// Enters the non-flushing mode instead (what a fresh thread has, and what Python's
    /// float arithmetic assumes), putting the previous mode back on drop: for code that
    /// runs on a runtime thread but is not part of the runtime's arithmetic (a Python
    /// custom-call handler).
    pub fn enter_ieee() -> FlushDenormals {
        FlushDenormals {
            saved: set_flushing(false),
            _thread: PhantomData,
        }
    }
}

impl Drop for FlushDenormals {
    fn drop(&mut self) {
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        if let Some(old) = self.saved {
            if read_control() != old {
                write_control(old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn sets_and_restores_on_this_thread() {
        std::thread::spawn(|| {
            assert!(!flushing(), "a fresh thread starts with IEEE subnormals");
            let before = read_control();
            {
                let _g = FlushDenormals::enter();
                assert!(flushing());
                // Nested: entering again and leaving keeps the outer mode.
                {
                    let _h = FlushDenormals::enter_ieee();
                    assert!(!flushing());
                }
                assert!(flushing());
                // A subnormal product is flushed while the guard lives.
                let tiny = std::hint::black_box(1e-310f64);
                assert_eq!(std::hint::black_box(tiny * 1.0), 0.0);
            }
            assert_eq!(read_control(), before);
            let tiny = std::hint::black_box(1e-310f64);
            assert!(std::hint::black_box(tiny * 1.0) > 0.0);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn only_the_cpu_runtime_flushes() {
        assert!(runtime_flushes("cpu"));
        assert!(!runtime_flushes("cuda"));
        assert!(!runtime_flushes("rocm"));
        std::thread::spawn(|| {
            let _g = FlushDenormals::enter_if(false);
            assert!(!flushing());
        })
        .join()
        .unwrap();
    }
}
