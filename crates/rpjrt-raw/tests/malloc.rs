//! `NoFastBins` really keeps freed small blocks out of glibc's fast bins, and gives them back
//! when the last guard ends. One test in its own binary: the setting is the process's, and
//! another test's frees would blur the counts.

#![cfg(all(target_os = "linux", target_env = "gnu"))]

use rpjrt_raw::malloc::{allowed, NoFastBins};

/// Bytes held in fast bins, all arenas (glibc's `mallinfo2().fsmblks`).
fn fast_bin_bytes() -> usize {
    // SAFETY: mallinfo2 only reads the allocator's counters and returns them by value.
    unsafe { libc::mallinfo2() }.fsmblks
}

/// Allocates `n` small blocks, frees them, and returns how much the fast bins grew. The
/// first few of each size go to the thread's cache; the rest are freed to the arena.
fn free_small_blocks(n: usize) -> isize {
    let blocks: Vec<Box<[u8; 40]>> = (0..n).map(|i| Box::new([i as u8; 40])).collect();
    let before = fast_bin_bytes();
    drop(std::hint::black_box(blocks));
    fast_bin_bytes() as isize - before as isize
}

#[test]
fn fast_bins_are_off_while_a_guard_lives() {
    let tunables = std::env::var("GLIBC_TUNABLES").ok();
    let keep = std::env::var("RPJRT_KEEP_FASTBINS").ok();
    if !allowed(tunables.as_deref(), keep.as_deref()) {
        // Told to leave the setting alone: a guard does nothing.
        assert!(!NoFastBins::enter().active());
        return;
    }
    assert!(
        free_small_blocks(1000) > 0,
        "glibc's fast bins should take freed small blocks"
    );
    {
        let outer = NoFastBins::enter();
        assert!(outer.active());
        let inner = NoFastBins::enter();
        assert!(
            free_small_blocks(1000) <= 0,
            "a guard must keep fast bins off"
        );
        drop(outer);
        // The inner guard still holds the setting.
        assert!(
            free_small_blocks(1000) <= 0,
            "fast bins came back while a guard lived"
        );
        drop(inner);
    }
    assert!(
        free_small_blocks(1000) > 0,
        "the last guard must give fast bins back"
    );
}
