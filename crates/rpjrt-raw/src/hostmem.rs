//! Host memory lent to buffers: the [`HostBytes`] contract, its `unsafe impl`s and the
//! read-once slice.

use std::sync::Arc;

use crate::error::{Error, Result};

/// Host memory that a zero-copy buffer may use in place.
///
/// # Safety
///
/// An implementation promises, for as long as the value lives:
/// - every call of [`HostBytes::bytes`] returns the same slice (same address, same length);
/// - the bytes of that slice stay allocated and are not written by anyone.
///
/// rpjrt reads `bytes()` once per buffer it makes and lends that range to the plugin
/// until the buffer (and the plugin's use of the memory) is gone, keeping the owner alive
/// meanwhile; an implementation that breaks the promise makes the plugin read freed or
/// changing memory. `Vec<u8>`, `Box<[u8]>` and `Arc<[u8]>` implement it.
///
/// (Declared next to the `unsafe impl`s; the public path is `rpjrt::HostBytes`.)
pub unsafe trait HostBytes: Send + Sync + 'static {
    /// The bytes.
    fn bytes(&self) -> &[u8];

    /// Whether only rpjrt reaches these bytes (its own staging memory), so that nothing
    /// changes them once the buffer is consumed; `false` (the default) for memory a caller
    /// also holds, which a donation must not hand over.
    fn is_private(&self) -> bool {
        false
    }
}

// SAFETY: a `Vec<u8>` reached through `&self` cannot be mutated, moved or freed while the
// borrow lasts, and nothing else can reach it while `HostBytes` holds it (it is owned by
// the `Arc` the caller hands over), so every call returns the same unchanging slice.
unsafe impl HostBytes for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

// SAFETY: as for `Vec<u8>`: an owned boxed slice only changes through `&mut`.
unsafe impl HostBytes for Box<[u8]> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

// SAFETY: the shared slice of an `Arc<[u8]>` is immutable and lives as long as any clone.
unsafe impl HostBytes for Arc<[u8]> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

/// `len` bytes at `addr`, taken from ONE call of an owner's [`HostBytes::bytes`], with the
/// owner kept alive. Everything that lends host memory to the plugin goes through this, so
/// the range that was checked is the range the plugin reads, whatever the owner's later
/// calls would return.
pub struct LentBytes {
    _owner: Arc<dyn HostBytes>,
    addr: usize,
    len: usize,
}

impl LentBytes {
    /// Calls `owner.bytes()` once and keeps `start..start + len` of what it returned.
    pub fn capture(owner: Arc<dyn HostBytes>, start: usize, len: usize) -> Result<Self> {
        let s = owner.bytes();
        let end = start
            .checked_add(len)
            .filter(|&e| e <= s.len())
            .ok_or_else(|| {
                Error::invalid(format!(
                    "host range {start}..{start}+{len} lies outside the owner's {} bytes",
                    s.len()
                ))
            })?;
        let addr = s[start..end].as_ptr() as usize;
        Ok(LentBytes {
            _owner: owner,
            addr,
            len,
        })
    }

    /// The whole of one `owner.bytes()` call.
    pub fn capture_all(owner: Arc<dyn HostBytes>) -> Self {
        let s = owner.bytes();
        let (addr, len) = (s.as_ptr() as usize, s.len());
        LentBytes {
            _owner: owner,
            addr,
            len,
        }
    }
}

// SAFETY: the range came from one `bytes()` call of an owner whose `HostBytes` contract
// says that memory stays valid and unchanged while the owner lives; `_owner` keeps it
// alive as long as `self`, and the range never changes after `capture`.
unsafe impl HostBytes for LentBytes {
    fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: see the impl's comment: `addr..addr + len` is inside the owner's memory,
        // valid and unchanged while `_owner` (held by `self`) lives.
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Breaks the `HostBytes` contract on purpose: long the first time, short afterwards.
    struct Liar {
        calls: AtomicUsize,
        long: Vec<u8>,
    }

    // SAFETY: (deliberately false, for the test) the memory is valid while `self` lives,
    // but the length changes between calls; `LentBytes` must only ever use the first call.
    unsafe impl HostBytes for Liar {
        fn bytes(&self) -> &[u8] {
            if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
                &self.long
            } else {
                &self.long[..1]
            }
        }
    }

    #[test]
    fn lent_bytes_read_the_owner_once() {
        let liar = Arc::new(Liar {
            calls: AtomicUsize::new(0),
            long: (0..64).collect(),
        });
        let lent = LentBytes::capture(liar.clone(), 8, 16).unwrap();
        assert_eq!(lent.bytes(), &(8..24).collect::<Vec<u8>>()[..]);
        assert_eq!(lent.bytes().len(), 16);
        assert_eq!(liar.calls.load(Ordering::SeqCst), 1);
        assert!(LentBytes::capture(liar, 60, 16).is_err());
    }
}
