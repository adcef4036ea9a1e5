//! The set of live handles, by address, so that a stale or wrong pointer gets an error
//! value instead of undefined behaviour, and so that tests can count leaks.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use crate::error::{invalid, Fail};

/// What a registered address is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// `PJRT_Error` (caller-owned).
    Error,
    /// `PJRT_Client` (caller-owned).
    Client,
    /// `PJRT_Device` (client-owned).
    Device,
    /// `PJRT_DeviceDescription` (client-owned).
    DeviceDescription,
    /// `PJRT_Memory` (client-owned).
    Memory,
    /// `PJRT_Buffer` (caller-owned).
    Buffer,
    /// `PJRT_Event` (caller-owned).
    Event,
    /// `PJRT_LoadedExecutable` (caller-owned).
    LoadedExecutable,
    /// `PJRT_Executable` (caller-owned).
    Executable,
    /// `PJRT_ExecuteContext` (caller-owned).
    ExecuteContext,
    /// `PJRT_SerializedExecutable` or `PJRT_SerializedCompileOptions` (caller-owned,
    /// freed through the deleter handed out with it).
    Blob,
}

impl Kind {
    /// Whether the caller must destroy handles of this kind (so a live one at the end of
    /// a test is a leak).
    pub fn caller_owned(self) -> bool {
        !matches!(self, Kind::Device | Kind::DeviceDescription | Kind::Memory)
    }

    /// The C type name.
    pub fn c_name(self) -> &'static str {
        match self {
            Kind::Error => "PJRT_Error",
            Kind::Client => "PJRT_Client",
            Kind::Device => "PJRT_Device",
            Kind::DeviceDescription => "PJRT_DeviceDescription",
            Kind::Memory => "PJRT_Memory",
            Kind::Buffer => "PJRT_Buffer",
            Kind::Event => "PJRT_Event",
            Kind::LoadedExecutable => "PJRT_LoadedExecutable",
            Kind::Executable => "PJRT_Executable",
            Kind::ExecuteContext => "PJRT_ExecuteContext",
            Kind::Blob => "PJRT_SerializedExecutable/CompileOptions",
        }
    }
}

static LIVE: Mutex<BTreeMap<usize, Kind>> = Mutex::new(BTreeMap::new());

fn live() -> MutexGuard<'static, BTreeMap<usize, Kind>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records `addr` as a live handle of `kind`.
pub fn register<T>(addr: *const T, kind: Kind) {
    live().insert(addr as usize, kind);
}

/// Forgets `addr`; true if it was live with that kind.
pub fn unregister<T>(addr: *const T, kind: Kind) -> bool {
    let mut map = live();
    match map.get(&(addr as usize)) {
        Some(k) if *k == kind => {
            map.remove(&(addr as usize));
            true
        }
        _ => false,
    }
}

/// Whether `addr` is a live handle of `kind`.
pub fn is_live<T>(addr: *const T, kind: Kind) -> bool {
    live().get(&(addr as usize)) == Some(&kind)
}

/// How many caller-owned handles are live, by C type name.
pub fn live_counts() -> BTreeMap<&'static str, usize> {
    let mut out = BTreeMap::new();
    for kind in live().values() {
        if kind.caller_owned() {
            *out.entry(kind.c_name()).or_insert(0) += 1;
        }
    }
    out
}

/// How many caller-owned handles are live in total.
pub fn live_count() -> usize {
    live().values().filter(|k| k.caller_owned()).count()
}

/// The live object of `kind` behind `handle`: INVALID_ARGUMENT for a null pointer or one
/// that is not a live handle of that kind (stale, foreign or of another kind).
///
/// # Safety
/// Every address registered as `kind` must point at a live `T` until it is unregistered
/// (registered from `Box::into_raw`, or a box owned by a live client), and the caller
/// keeps the handle alive for `'a`.
pub(crate) unsafe fn live_ref<'a, T, H>(handle: *mut H, kind: Kind) -> Result<&'a T, Fail> {
    if handle.is_null() {
        return Err(invalid(format!("fake plugin: null {}", kind.c_name())));
    }
    if !is_live(handle.cast::<T>(), kind) {
        return Err(invalid(format!(
            "fake plugin: {handle:p} is not a live {}",
            kind.c_name()
        )));
    }
    // SAFETY: registered as `kind` and not yet unregistered, so a live T (contract).
    Ok(unsafe { &*handle.cast::<T>() })
}
