//! `PJRT_Error_*` and `PJRT_Plugin_*` entries.

use std::panic::catch_unwind;

use rpjrt_sys as sys;

use crate::error::{self, invalid};
use crate::state;

/// The args of a void entry (which cannot report an error), if usable: non-null and big
/// enough (else the problem goes to stderr).
///
/// # Safety
/// `args` must be null or point at an args struct valid up to its `struct_size`.
unsafe fn void_args<'a, A>(name: &str, args: *mut A, reads: usize) -> Option<&'a mut A> {
    if args.is_null() {
        return None;
    }
    // SAFETY: non-null args start with `size_t struct_size` (contract).
    let actual = unsafe { args.cast::<usize>().read() };
    let state = state::current_or_default();
    if let Err(e) = state::check_size(state, &format!("{name}_Args"), actual, reads) {
        eprintln!("rpjrt-fake-plugin: {name}: {}", e.message);
        return None;
    }
    // SAFETY: its struct_size covers every field (checked).
    Some(unsafe { &mut *args })
}

#[allow(non_snake_case)]
pub(crate) unsafe extern "C" fn PJRT_Error_Destroy(args: *mut sys::PJRT_Error_Destroy_Args) {
    let size = sys::PJRT_Error_Destroy_Args_STRUCT_SIZE;
    let _ = catch_unwind(|| {
        // SAFETY: per the C API, args is null or a valid args struct.
        if let Some(a) = unsafe { void_args("PJRT_Error_Destroy", args, size) } {
            error::destroy_error(a.error);
        }
    });
}

#[allow(non_snake_case)]
pub(crate) unsafe extern "C" fn PJRT_Error_Message(args: *mut sys::PJRT_Error_Message_Args) {
    let size = sys::PJRT_Error_Message_Args_STRUCT_SIZE;
    let _ = catch_unwind(|| {
        // SAFETY: per the C API, args is null or a valid args struct.
        if let Some(a) = unsafe { void_args("PJRT_Error_Message", args, size) } {
            let text =
                error::lookup(a.error).map_or("fake plugin: not a live PJRT_Error", |e| &e.message);
            (a.message, a.message_size) = crate::named::out_str(text);
        }
    });
}

entry!(PJRT_Error_GetCode, |a, _| {
    let e = error::lookup(a.error);
    a.code = e
        .ok_or_else(|| invalid("fake plugin: PJRT_Error_GetCode: not a live PJRT_Error"))?
        .code;
});

entry!(PJRT_Plugin_Initialize, |_, _| {});

entry!(PJRT_Plugin_Attributes, |a, state| {
    // The state is never freed, so the attributes live as long as the process.
    (a.attributes, a.num_attributes) = state.attributes.out();
});
