//! A shared library that is not a PJRT plugin: it exports no `GetPjrtApi`, so tests
//! can check how a client reports a library without the entry point.

/// Some exported symbol, so the library is not empty.
#[no_mangle]
pub extern "C" fn rpjrt_not_a_plugin() -> i32 {
    42
}
