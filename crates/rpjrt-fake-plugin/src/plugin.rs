//! `PJRT_Error_*` and `PJRT_Plugin_*` entries.

use std::panic::catch_unwind;
use std::sync::atomic::{AtomicUsize, Ordering};

use rpjrt_sys as sys;

use crate::error::{self, invalid};
use crate::state;

/// Whether a void entry's args are usable: non-null and big enough.
fn void_args_ok<A>(name: &str, args: *mut A, reads: usize) -> bool {
    if args.is_null() {
        return false;
    }
    // SAFETY: non-null args start with `size_t struct_size`.
    let actual = unsafe { args.cast::<usize>().read() };
    let state = state::current_or_default();
    let expected = state::min_size(&state, &format!("{name}_Args"), reads);
    if actual < expected {
        eprintln!(
            "rpjrt-fake-plugin: {name}: Unexpected {name}_Args size: expected {expected}, got {actual}"
        );
        return false;
    }
    true
}

pub(crate) unsafe extern "C" fn error_destroy(args: *mut sys::PJRT_Error_Destroy_Args) {
    let _ = catch_unwind(|| {
        if void_args_ok(
            "PJRT_Error_Destroy",
            args,
            sys::PJRT_Error_Destroy_Args_STRUCT_SIZE,
        ) {
            // SAFETY: checked non-null and large enough.
            let err = unsafe { (*args).error };
            error::destroy_error(err);
        }
    });
}

pub(crate) unsafe extern "C" fn error_message(args: *mut sys::PJRT_Error_Message_Args) {
    let _ = catch_unwind(|| {
        if !void_args_ok(
            "PJRT_Error_Message",
            args,
            sys::PJRT_Error_Message_Args_STRUCT_SIZE,
        ) {
            return;
        }
        // SAFETY: checked non-null and large enough for every field.
        let a = unsafe { &mut *args };
        match error::lookup(a.error) {
            Some(e) => {
                a.message = e.message.as_ptr().cast();
                a.message_size = e.message.len();
            }
            None => {
                let text = "fake plugin: not a live PJRT_Error";
                a.message = text.as_ptr().cast();
                a.message_size = text.len();
            }
        }
    });
}

entry_fn!(error_get_code, PJRT_Error_GetCode, |a, _| {
    let e = error::lookup(a.error)
        .ok_or_else(|| invalid("fake plugin: PJRT_Error_GetCode: not a live PJRT_Error"))?;
    a.code = e.code;
    Ok(())
});

entry_fn!(error_for_each_payload, PJRT_Error_ForEachPayload, |a, _| {
    error::lookup(a.error)
        .ok_or_else(|| invalid("fake plugin: PJRT_Error_ForEachPayload: not a live PJRT_Error"))?;
    // Fake errors carry no payloads: the visitor is never called.
    Ok(())
});

static INITIALIZE_CALLS: AtomicUsize = AtomicUsize::new(0);

/// How many times `PJRT_Plugin_Initialize` has succeeded in this process.
pub fn initialize_calls() -> usize {
    INITIALIZE_CALLS.load(Ordering::SeqCst)
}

entry_fn!(plugin_initialize, PJRT_Plugin_Initialize, |_, _| {
    INITIALIZE_CALLS.fetch_add(1, Ordering::SeqCst);
    Ok(())
});

entry_fn!(plugin_attributes, PJRT_Plugin_Attributes, |a, state| {
    // The state is never freed, so the attributes live as long as the process.
    a.attributes = state.attributes.as_ptr();
    a.num_attributes = state.attributes.len();
    Ok(())
});
