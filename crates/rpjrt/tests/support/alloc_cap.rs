//! The largest single allocation a stretch of code makes on the calling thread, for
//! properties of the form "a parser never allocates more than its input justifies".
//!
//! A test binary that includes this file (`#[path] mod alloc_cap;`) installs the counting
//! allocator for the whole binary; [`largest_alloc`] measures one closure. Only the calling
//! thread is measured, so other tests running in parallel do not show up.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, remembering the largest request of a marked stretch of a thread.
pub struct Tracking;

thread_local! {
    /// Whether this thread is inside a measured stretch.
    static ON: Cell<bool> = const { Cell::new(false) };
    /// The largest allocation (or reallocation's new size) seen while measuring.
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: the allocator also runs while thread-locals are torn down.
    let _ = ON.try_with(|on| {
        if on.get() {
            let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
        }
    });
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract holds as it does for `System`; the bookkeeping touches only
// const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded unchanged (the caller's contract is `System`'s).
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static TRACKING: Tracking = Tracking;

/// Runs `f` and returns its value with the largest single allocation it made on this
/// thread, in bytes.
pub fn largest_alloc<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|l| l.set(0));
    ON.with(|on| on.set(true));
    let out = f();
    ON.with(|on| on.set(false));
    (out, LARGEST.with(Cell::get))
}
