//! The set of live handles, by address, so that a stale or wrong pointer gets an error
//! value instead of undefined behaviour, and so that tests can count leaks.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use crate::error::Fail;

/// A C handle type (`sys::PJRT_Buffer`) and the fake's object behind it: a handle is the
/// address of its object.
pub(crate) trait Handle: Sized + 'static {
    /// The object behind the handle.
    type Obj: 'static;
    /// The C type name, used in messages and by `live_handles`.
    const NAME: &'static str;
}

/// Implements [`Handle`] for C handle types: `PJRT_Buffer => FakeBuffer, ...`.
macro_rules! handles {
    ($($c:ident => $obj:ty,)*) => {$(
        impl $crate::registry::Handle for sys::$c {
            type Obj = $obj;
            const NAME: &'static str = stringify!($c);
        }
    )*};
}

/// Address to (C type name, whether the caller owns it: made by [`new`], not
/// registered in place by its owner).
type Live = BTreeMap<usize, (&'static str, bool)>;
static LIVE: Mutex<Live> = Mutex::new(BTreeMap::new());

fn live() -> MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Boxes `obj` as a caller-owned handle (freed by [`take`], counted as a leak until).
pub(crate) fn new<H: Handle>(obj: H::Obj) -> *mut H {
    let raw = Box::into_raw(Box::new(obj));
    live().insert(raw as usize, (H::NAME, true));
    raw.cast()
}

/// Registers an object its owner keeps in place (devices and memories of a client).
///
/// # Safety
/// `obj` must stay alive at its address until [`unregister_in_place`] is called on it.
pub(crate) unsafe fn register_in_place<H: Handle>(obj: &H::Obj) {
    live().insert(obj as *const H::Obj as usize, (H::NAME, false));
}

/// Undoes [`register_in_place`].
pub(crate) fn unregister_in_place<H: Handle>(obj: &H::Obj) {
    live().remove(&(obj as *const H::Obj as usize));
}

/// Takes back a handle made by [`new`]: `None` if `h` is not a live caller-owned `H`.
pub(crate) fn take<H: Handle>(h: *mut H) -> Option<Box<H::Obj>> {
    let mut map = live();
    if map.get(&(h as usize)) != Some(&(H::NAME, true)) {
        return None;
    }
    map.remove(&(h as usize));
    // SAFETY: it was registered by `new` (boxed, caller-owned) and not yet taken, so it
    // came from Box::into_raw; removing it first makes this the only free.
    Some(unsafe { Box::from_raw(h.cast::<H::Obj>()) })
}

/// A destroy entry: frees a handle made by [`new`]; null is a no-op.
pub(crate) fn destroy<H: Handle>(h: *mut H) -> Result<(), Fail> {
    match h.is_null() || take(h).is_some() {
        true => Ok(()),
        false => Err(invalid!("fake plugin: {h:p} is not a live {}", H::NAME)),
    }
}

/// The object behind `h`: INVALID_ARGUMENT for a null pointer or one that is not a live
/// `H` (stale, foreign or of another type).
pub(crate) fn get<'a, H: Handle>(h: *mut H) -> Result<&'a H::Obj, Fail> {
    if h.is_null() {
        bail!("fake plugin: null {}", H::NAME);
    }
    if live().get(&(h as usize)).map(|e| e.0) != Some(H::NAME) {
        bail!("fake plugin: {h:p} is not a live {}", H::NAME);
    }
    // SAFETY: registered as an H (by `new`, or in place by an owner that unregisters it
    // before it moves or dies) and not yet unregistered, so a live H::Obj. Per the C API
    // the caller keeps the handle (and its client) alive while the call uses it.
    Ok(unsafe { &*h.cast::<H::Obj>() })
}

/// How many caller-owned handles are live, by C type name.
pub fn live_counts() -> BTreeMap<&'static str, usize> {
    let mut out = BTreeMap::new();
    for (name, _) in live().values().filter(|e| e.1) {
        *out.entry(*name).or_insert(0) += 1;
    }
    out
}
