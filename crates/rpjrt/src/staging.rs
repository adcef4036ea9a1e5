//! The staging pool: warm host memory for large copies to a device.
//!
//! A large dense `put` copies the caller's bytes into a staging block (huge-page memory
//! rpjrt maps itself, see [`crate::transfer`]) that the plugin then uses in place. A fresh
//! mapping costs the kernel a page fault and a page clear for every page the copy touches,
//! which makes a 64 MiB put about a third slower than a `memcpy` into memory that is already
//! faulted in. The pool keeps blocks whose buffers are gone and lends them again, so a
//! loop that puts an array of the same size each step (a data loader, the previous batch
//! freed in between) copies into warm pages at `memcpy` speed. A compile-cache hit reads a
//! large entry into a block of the pool too, for the same reason, and gives it back once
//! the plugin has deserialized it.
//!
//! **When a block comes back.** A buffer keeps its block until the buffer is destroyed and
//! the plugin's done-with-host-buffer event has fired; only then does the block return to
//! the pool, so a block is never rewritten while a plugin may read it.
//!
//! **Bounds.** The pool holds at most [`limit`] bytes of blocks that no buffer uses
//! (default [`DEFAULT_LIMIT`], or `RPJRT_STAGING_POOL_BYTES` read once at first use; 0
//! disables pooling). Blocks in use by live buffers belong to those buffers and are not
//! counted. A returning block that does not fit evicts the least recently returned ones,
//! and a block larger than the limit is unmapped. [`release_pooled_memory`] unmaps every
//! idle block at once (and runs by itself when a new mapping fails, before the one retry).
//!
//! **Which block.** A request of `n` bytes takes the smallest idle block that holds `n`
//! bytes and is at most twice `n` rounded up to a huge page, so a small array never pins a
//! large block; anything else maps a new block of `n` rounded up to whole 2 MiB pages.
//!
//! The pool is one per process, shared by every client (it is plain host memory) and by
//! every thread; its lock is held only to pick or return a block, never across a copy,
//! a mapping or a plugin call.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::error::{Error, Result};
use crate::raw::transfer::{Leased, Reclaim, Staging, HUGE_PAGE};

/// Default bound on idle pooled memory: 256 MiB.
pub const DEFAULT_LIMIT: usize = 256 << 20;

/// The environment variable that sets the bound in bytes at first use (a plain integer,
/// or with a `K`, `M` or `G` suffix for KiB, MiB, GiB; 0 disables pooling).
pub const LIMIT_ENV: &str = "RPJRT_STAGING_POOL_BYTES";

/// What the staging pool holds and has done, from [`stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StagingStats {
    /// The bound on idle pooled bytes.
    pub limit: usize,
    /// Bytes of idle blocks held for reuse.
    pub pooled_bytes: usize,
    /// Number of idle blocks held for reuse.
    pub pooled_blocks: usize,
    /// Bytes of blocks lent to live buffers.
    pub in_use_bytes: usize,
    /// Number of blocks lent to live buffers.
    pub in_use_blocks: usize,
    /// Requests served by an idle block (warm memory).
    pub hits: u64,
    /// Requests that mapped a new block.
    pub misses: u64,
    /// Bytes unmapped so far: evicted by the bound or released on demand.
    pub released_bytes: u64,
}

#[derive(Default)]
struct State {
    limit: usize,
    /// Idle blocks, least recently returned first.
    idle: Vec<Staging>,
    idle_bytes: usize,
    in_use_bytes: usize,
    in_use_blocks: usize,
    hits: u64,
    misses: u64,
    released_bytes: u64,
}

/// One pool of staging blocks (the process has one, [`global`]; tests make their own).
pub(crate) struct Pool {
    state: Mutex<State>,
}

impl Pool {
    /// An empty pool holding at most `limit` idle bytes.
    pub(crate) fn new(limit: usize) -> Arc<Pool> {
        Arc::new(Pool {
            state: Mutex::new(State {
                limit,
                ..State::default()
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing under the lock panics midway through an update; a poisoned lock still
        // holds consistent counts.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A block of `len` bytes for the caller to fill, from the idle blocks or newly mapped.
    pub(crate) fn take(&self, len: usize) -> Result<Staging> {
        let want = len
            .max(1)
            .checked_next_multiple_of(HUGE_PAGE)
            .ok_or_else(|| Error::ResourceExhausted(format!("{len} bytes of staging memory")))?;
        let reused = {
            let mut s = self.lock();
            let best = (s.idle.iter().enumerate())
                .filter(|(_, b)| b.capacity() >= want && b.capacity() / 2 <= want)
                .min_by_key(|(_, b)| b.capacity())
                .map(|(i, _)| i);
            match best {
                Some(i) => {
                    let b = s.idle.remove(i);
                    s.idle_bytes -= b.capacity();
                    s.hits += 1;
                    s.in_use_bytes += b.capacity();
                    s.in_use_blocks += 1;
                    Some(b)
                }
                None => {
                    s.misses += 1;
                    None
                }
            }
        };
        let block = match reused {
            Some(b) => b,
            None => {
                let b = match Staging::new(len) {
                    Ok(b) => b,
                    // The kernel refused: give back what the pool holds and try once more.
                    Err(_) => {
                        self.release();
                        Staging::new(len)?
                    }
                };
                let mut s = self.lock();
                s.in_use_bytes += b.capacity();
                s.in_use_blocks += 1;
                b
            }
        };
        Ok(block
            .with_len(len)
            .expect("a block chosen or mapped for `len` bytes holds them"))
    }

    /// Unmaps every idle block; returns the bytes released.
    pub(crate) fn release(&self) -> usize {
        let idle = {
            let mut s = self.lock();
            let n = s.idle_bytes;
            s.idle_bytes = 0;
            s.released_bytes += n as u64;
            std::mem::take(&mut s.idle)
        };
        let n = idle.iter().map(Staging::capacity).sum();
        drop(idle); // unmapped outside the lock
        n
    }

    /// Sets the bound, evicting idle blocks (least recently returned first) above it.
    pub(crate) fn set_limit(&self, limit: usize) {
        let evicted = {
            let mut s = self.lock();
            s.limit = limit;
            evict_to(&mut s, limit)
        };
        drop(evicted);
    }

    pub(crate) fn stats(&self) -> StagingStats {
        let s = self.lock();
        StagingStats {
            limit: s.limit,
            pooled_bytes: s.idle_bytes,
            pooled_blocks: s.idle.len(),
            in_use_bytes: s.in_use_bytes,
            in_use_blocks: s.in_use_blocks,
            hits: s.hits,
            misses: s.misses,
            released_bytes: s.released_bytes,
        }
    }
}

/// Removes idle blocks, oldest first, until at most `room` idle bytes remain; returns them
/// so that the caller unmaps them after unlocking.
fn evict_to(s: &mut State, room: usize) -> Vec<Staging> {
    let mut n = 0;
    let mut bytes = s.idle_bytes;
    while n < s.idle.len() && bytes > room {
        bytes -= s.idle[n].capacity();
        n += 1;
    }
    let out: Vec<Staging> = s.idle.drain(..n).collect();
    let freed = s.idle_bytes - bytes;
    s.idle_bytes = bytes;
    s.released_bytes += freed as u64;
    out
}

impl Reclaim for Pool {
    fn reclaim(&self, block: Staging) {
        let cap = block.capacity();
        let unmap = {
            let mut s = self.lock();
            s.in_use_bytes -= cap;
            s.in_use_blocks -= 1;
            if cap > s.limit {
                s.released_bytes += cap as u64;
                vec![block]
            } else {
                let room = s.limit - cap;
                let evicted = evict_to(&mut s, room);
                s.idle_bytes += cap;
                s.idle.push(block);
                evicted
            }
        };
        drop(unmap); // outside the lock
    }
}

/// Copies `data` into a block of `pool` and returns it ready to lend: the block goes back
/// to `pool` when the returned owner is dropped.
pub(crate) fn stage(pool: &Arc<Pool>, data: &[u8]) -> Result<Leased> {
    fill(pool, data.len(), |block| {
        block.copy_from_slice(data);
        Ok(())
    })
}

/// A block of `len` bytes from `pool`, filled by `write`, ready to lend: it goes back to
/// `pool` when the returned owner is dropped (also when `write` fails).
pub(crate) fn fill(
    pool: &Arc<Pool>,
    len: usize,
    write: impl FnOnce(&mut [u8]) -> Result<()>,
) -> Result<Leased> {
    let mut block = pool.take(len)?;
    let written = write(block.as_mut());
    let reclaim: Arc<dyn Reclaim> = Arc::clone(pool) as Arc<dyn Reclaim>;
    let leased = Leased::new(block, reclaim);
    written.map(|()| leased)
}

/// Parses a byte count with an optional `K`, `M` or `G` suffix (powers of 1024).
fn parse_bytes(text: &str) -> Option<usize> {
    let t = text.trim();
    let (num, shift) = match t.as_bytes().last()? {
        b'K' | b'k' => (&t[..t.len() - 1], 10),
        b'M' | b'm' => (&t[..t.len() - 1], 20),
        b'G' | b'g' => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    num.trim()
        .parse::<usize>()
        .ok()?
        .checked_mul(1usize << shift)
}

/// The process's pool (created at first use, bounded by [`LIMIT_ENV`] or
/// [`DEFAULT_LIMIT`]; an unreadable value of the variable is reported once on stderr and
/// the default used).
pub(crate) fn global() -> &'static Arc<Pool> {
    static POOL: OnceLock<Arc<Pool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let limit = match std::env::var(LIMIT_ENV) {
            Ok(v) => parse_bytes(&v).unwrap_or_else(|| {
                // `notice`, not `eprintln!`: a stderr that cannot be written is no panic.
                crate::stdio::notice(&format!(
                    "rpjrt: {LIMIT_ENV}={v:?} is not a byte count (e.g. 268435456 or 256M); \
                     using {DEFAULT_LIMIT}"
                ));
                DEFAULT_LIMIT
            }),
            Err(_) => DEFAULT_LIMIT,
        };
        Pool::new(limit)
    })
}

/// What the process's staging pool holds and has done.
pub fn stats() -> StagingStats {
    global().stats()
}

/// The bound on idle pooled bytes.
pub fn limit() -> usize {
    global().stats().limit
}

/// Sets the bound on idle pooled bytes (0 disables pooling); idle blocks above the new
/// bound are unmapped at once. Blocks in use by live buffers are unaffected.
pub fn set_limit(bytes: usize) {
    global().set_limit(bytes)
}

/// Unmaps every idle block of the staging pool and returns the bytes released. Blocks in
/// use by live buffers return to the pool (within its bound) when their buffers are gone.
pub fn release_pooled_memory() -> usize {
    global().release()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::hostmem::HostBytes;

    const MIB: usize = 1 << 20;

    #[test]
    fn a_returned_block_is_lent_again_with_its_data_replaced() {
        let pool = Pool::new(64 * MIB);
        let a = stage(&pool, &[7u8; 3 * MIB]).unwrap();
        assert_eq!(a.bytes().len(), 3 * MIB);
        assert!(a.bytes().iter().all(|&b| b == 7));
        let addr = a.bytes().as_ptr() as usize;
        assert_eq!(addr % HUGE_PAGE, 0, "blocks start on a huge page");
        let s = pool.stats();
        assert_eq!((s.in_use_blocks, s.in_use_bytes, s.misses), (1, 4 * MIB, 1));
        drop(a);
        let s = pool.stats();
        assert_eq!(
            (s.in_use_blocks, s.pooled_blocks, s.pooled_bytes),
            (0, 1, 4 * MIB)
        );
        let b = stage(&pool, &[9u8; 4 * MIB]).unwrap();
        assert_eq!(b.bytes().as_ptr() as usize, addr, "the same block, reused");
        assert!(b.bytes().iter().all(|&x| x == 9));
        assert_eq!((pool.stats().hits, pool.stats().pooled_blocks), (1, 0));
    }

    #[test]
    fn a_small_request_does_not_take_a_large_block() {
        let pool = Pool::new(64 * MIB);
        drop(stage(&pool, &vec![1u8; 16 * MIB]).unwrap());
        let small = stage(&pool, &[2u8; 100]).unwrap();
        assert_eq!(small.bytes().len(), 100);
        let s = pool.stats();
        assert_eq!((s.hits, s.misses, s.pooled_blocks), (0, 2, 1));
        drop(small);
        let mid = stage(&pool, &vec![3u8; 6 * MIB]).unwrap();
        assert_eq!(pool.stats().hits, 0, "16 MiB is more than twice 6 MiB");
        drop(mid);
        let fits = stage(&pool, &vec![3u8; 8 * MIB]).unwrap();
        assert_eq!(pool.stats().hits, 1);
        drop(fits);
    }

    #[test]
    fn idle_memory_stays_within_the_limit() {
        let pool = Pool::new(10 * MIB);
        let a = stage(&pool, &[1u8; 4 * MIB]).unwrap();
        let b = stage(&pool, &[1u8; 4 * MIB]).unwrap();
        let c = stage(&pool, &[1u8; 4 * MIB]).unwrap();
        let first = a.bytes().as_ptr() as usize;
        assert_eq!(pool.stats().in_use_bytes, 12 * MIB);
        drop(a);
        drop(b);
        drop(c);
        let s = pool.stats();
        assert_eq!((s.pooled_blocks, s.pooled_bytes), (2, 8 * MIB));
        assert_eq!(s.released_bytes, 4 * MIB as u64, "the oldest was evicted");
        // The block of `a`, returned first, is the one that went.
        let again: Vec<Leased> = (0..2)
            .map(|_| stage(&pool, &[0u8; 4 * MIB]).unwrap())
            .collect();
        assert!(again.iter().all(|l| l.bytes().as_ptr() as usize != first));
        drop(again);
        // A block larger than the limit is never kept.
        drop(stage(&pool, &vec![0u8; 12 * MIB]).unwrap());
        assert_eq!(pool.stats().pooled_bytes, 8 * MIB);
        pool.set_limit(4 * MIB);
        assert_eq!(pool.stats().pooled_bytes, 4 * MIB);
        pool.set_limit(0);
        assert_eq!(pool.stats().pooled_blocks, 0);
        drop(stage(&pool, &[0u8; 10]).unwrap());
        assert_eq!(pool.stats().pooled_blocks, 0, "limit 0 pools nothing");
    }

    #[test]
    fn release_unmaps_idle_blocks_only() {
        let pool = Pool::new(64 * MIB);
        let live = stage(&pool, &[5u8; MIB]).unwrap();
        drop(stage(&pool, &[6u8; MIB]).unwrap());
        drop(stage(&pool, &[6u8; 5 * MIB]).unwrap());
        assert_eq!(pool.stats().pooled_bytes, 2 * MIB + 6 * MIB);
        assert_eq!(pool.release(), 8 * MIB);
        let s = pool.stats();
        assert_eq!((s.pooled_blocks, s.in_use_blocks), (0, 1));
        assert!(
            live.bytes().iter().all(|&b| b == 5),
            "a lent block is untouched"
        );
        drop(live);
        assert_eq!(pool.stats().pooled_blocks, 1);
    }

    #[test]
    fn threads_share_one_pool() {
        let pool = Pool::new(256 * MIB);
        std::thread::scope(|sc| {
            for t in 0..4u8 {
                let pool = &pool;
                sc.spawn(move || {
                    for i in 0..20u8 {
                        let v = t.wrapping_mul(31).wrapping_add(i);
                        let l = stage(pool, &vec![v; 3 * MIB]).unwrap();
                        assert!(l.bytes().iter().all(|&b| b == v));
                    }
                });
            }
        });
        let s = pool.stats();
        assert_eq!(s.in_use_blocks, 0);
        assert_eq!(s.hits + s.misses, 80);
        assert!(s.pooled_blocks <= 4, "{s:?}");
    }

    #[test]
    fn byte_counts_parse_with_suffixes() {
        assert_eq!(parse_bytes("0"), Some(0));
        assert_eq!(parse_bytes("4096"), Some(4096));
        assert_eq!(parse_bytes("256M"), Some(256 * MIB));
        assert_eq!(parse_bytes(" 2g "), Some(2 << 30));
        assert_eq!(parse_bytes("8k"), Some(8192));
        assert_eq!(parse_bytes("lots"), None);
        assert_eq!(parse_bytes("-1"), None);
        assert_eq!(parse_bytes(""), None);
    }
}
