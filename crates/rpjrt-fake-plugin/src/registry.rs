//! The set of live handles, by address, so that a stale or wrong pointer gets an error
//! value instead of undefined behaviour, and so that tests can count leaks.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use crate::error::{invalid, Fail};

/// An object the fake hands out behind a C handle.
pub(crate) trait Handle: Sized + 'static {
    /// The C handle type (`sys::PJRT_Buffer`).
    type C;
    /// The C type name, used in messages and by `live_handles`.
    const NAME: &'static str;
}

/// Address to (C type name, whether the caller owns it: made by [`new`], not
/// registered in place by its owner).
static LIVE: Mutex<BTreeMap<usize, (&'static str, bool)>> = Mutex::new(BTreeMap::new());

fn live() -> MutexGuard<'static, BTreeMap<usize, (&'static str, bool)>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Boxes `value` as a caller-owned handle (freed by [`take`], counted as a leak until).
pub(crate) fn new<T: Handle>(value: T) -> *mut T::C {
    let raw = Box::into_raw(Box::new(value));
    live().insert(raw as usize, (T::NAME, true));
    raw.cast()
}

/// Registers an object its owner keeps in place (devices and memories of a client).
///
/// # Safety
/// `obj` must stay alive at its address until [`unregister_in_place`] is called on it.
pub(crate) unsafe fn register_in_place<T: Handle>(obj: &T) {
    live().insert(obj as *const T as usize, (T::NAME, false));
}

/// Undoes [`register_in_place`].
pub(crate) fn unregister_in_place<T: Handle>(obj: &T) {
    live().remove(&(obj as *const T as usize));
}

/// Takes back a handle made by [`new`]: `None` if `h` is not a live caller-owned `T`.
pub(crate) fn take<T: Handle>(h: *mut T::C) -> Option<Box<T>> {
    let mut map = live();
    if map.get(&(h as usize)) != Some(&(T::NAME, true)) {
        return None;
    }
    map.remove(&(h as usize));
    // SAFETY: it was registered by `new` (boxed, caller-owned) and not yet taken, so it
    // came from Box::into_raw; removing it first makes this the only free.
    Some(unsafe { Box::from_raw(h.cast::<T>()) })
}

/// A destroy entry: frees a handle made by [`new`]; null is a no-op.
pub(crate) fn destroy<T: Handle>(h: *mut T::C) -> Result<(), Fail> {
    if !h.is_null() && take::<T>(h).is_none() {
        return Err(invalid(format!(
            "fake plugin: {h:p} is not a live {}",
            T::NAME
        )));
    }
    Ok(())
}

/// The live `T` behind `h`: INVALID_ARGUMENT for a null pointer or one that is not a
/// live `T` (stale, foreign or of another type).
pub(crate) fn get<'a, T: Handle>(h: *mut T::C) -> Result<&'a T, Fail> {
    if h.is_null() {
        return Err(invalid(format!("fake plugin: null {}", T::NAME)));
    }
    if live().get(&(h as usize)).map(|e| e.0) != Some(T::NAME) {
        return Err(invalid(format!(
            "fake plugin: {h:p} is not a live {}",
            T::NAME
        )));
    }
    // SAFETY: registered as a T (by `new`, or in place by an owner that unregisters it
    // before it moves or dies) and not yet unregistered, so a live T. Per the C API the
    // caller keeps the handle (and its client) alive while the call uses it.
    Ok(unsafe { &*h.cast::<T>() })
}

/// How many caller-owned handles are live, by C type name.
pub fn live_counts() -> BTreeMap<&'static str, usize> {
    let mut out = BTreeMap::new();
    for (name, _) in live().values().filter(|e| e.1) {
        *out.entry(*name).or_insert(0) += 1;
    }
    out
}
