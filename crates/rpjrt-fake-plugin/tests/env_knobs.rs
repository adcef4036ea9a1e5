//! The knobs read from the environment at the first `GetPjrtApi` call. This file holds a
//! single test because the configuration is cached per process (each integration test
//! file is its own process).

use rpjrt_fake_plugin as fake;
use rpjrt_sys as sys;

#[test]
fn environment_is_read_once_at_first_call() {
    std::env::set_var(fake::knobs::VERSION, "0.90");
    std::env::set_var(fake::knobs::NULL_SLOTS, "PJRT_Buffer_Delete");
    std::env::set_var(fake::knobs::EXTENSIONS, "FFI");
    let ptr = fake::GetPjrtApi();
    assert!(!ptr.is_null());
    // SAFETY: the fake's tables live for the whole process.
    let api = unsafe { &*ptr };
    assert_eq!(api.pjrt_api_version.minor_version, 90);
    // 0.90 has the entries up to PJRT_Event_Set (slot 127).
    assert_eq!(api.struct_size, 40 + 8 * 128);
    assert!(api.PJRT_Buffer_Delete.is_none());
    assert!(!api.extension_start.is_null());
    // SAFETY: as above.
    let ext = unsafe { &*api.extension_start };
    assert_eq!(
        (ext.r#type, ext.struct_size),
        (sys::PJRT_Extension_Type_FFI, 48)
    );
    assert!(ext.next.is_null());

    // Later changes to the environment are not seen.
    std::env::set_var(fake::knobs::VERSION, "0.70");
    // SAFETY: as above.
    let again = unsafe { &*fake::GetPjrtApi() };
    assert_eq!(again.pjrt_api_version.minor_version, 90);
}
