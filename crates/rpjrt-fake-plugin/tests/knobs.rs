//! Every knob, set through `configure`/`configure_from_spec` (same parser as the
//! environment).

mod common;

use std::ffi::c_void;

use common::*;
use rpjrt_fake_plugin as fake;
use rpjrt_sys as sys;

fn api_from(spec: &str) -> Api {
    Api::new(fake::configure_from_spec(spec).unwrap())
}

fn ext_chain(api: Api) -> Vec<(i32, usize, *mut sys::PJRT_Extension_Base)> {
    let mut out = Vec::new();
    let mut p = api.0.extension_start;
    while !p.is_null() {
        // SAFETY: the fake's extension chain lives as long as its table.
        let base = unsafe { &*p };
        out.push((base.r#type, base.struct_size, p));
        p = base.next;
    }
    out
}

#[test]
fn version_sets_minor_slots_and_extension_sizes() {
    let _g = serial();
    let api = api_from("RPJRT_FAKE_VERSION=0.81");
    assert_eq!(api.0.pjrt_api_version.major_version, 0);
    assert_eq!(api.0.pjrt_api_version.minor_version, 81);
    assert_eq!(api.0.struct_size, 40 + 8 * 118);
    assert!(api.0.PJRT_Client_CreateErrorBuffer.is_none());
    assert!(api.0.PJRT_LoadedExecutable_GetDeviceAssignment.is_some());
    let chain = ext_chain(api);
    assert_eq!(
        chain.iter().map(|(t, s, _)| (*t, *s)).collect::<Vec<_>>(),
        vec![
            (sys::PJRT_Extension_Type_Layouts, 72),
            (sys::PJRT_Extension_Type_FFI, 48)
        ]
    );

    let api = api_from("");
    assert_eq!(api.0.pjrt_api_version.minor_version, 114);
    assert_eq!(api.0.struct_size, sys::PJRT_Api_STRUCT_SIZE);
    assert_eq!(ext_chain(api)[0].1, 80);
}

#[test]
fn table_slots_and_null_slots() {
    let _g = serial();
    let api = api_from(
        "RPJRT_FAKE_TABLE_SLOTS=20\nRPJRT_FAKE_NULL_SLOTS=PJRT_Client_Destroy,PJRT_Event_Await",
    );
    assert_eq!(api.0.struct_size, 40 + 8 * 20);
    assert!(
        api.0.PJRT_Client_Compile.is_none(),
        "slot 20 is past the table"
    );
    assert!(
        api.0.PJRT_Client_AddressableMemories.is_some(),
        "slot 19 is in it"
    );
    assert!(api.0.PJRT_Client_Destroy.is_none());
    assert!(api.0.PJRT_Event_Await.is_none());
    assert!(api.0.PJRT_Client_Create.is_some());
}

#[test]
fn fail_forces_errors_on_any_entry() {
    let _g = serial();
    let api = api_from(
        "RPJRT_FAKE_FAIL=PJRT_Client_Compile:INVALID_ARGUMENT:no compiling today;\
         PJRT_Device_MemoryStats:RESOURCE_EXHAUSTED:out of memory;PJRT_Plugin_Initialize:13:",
    );
    let client = create_client(api, &[]).unwrap();
    let (code, msg) = compile(api, client, ADD_ONE, &compile_options(1, 1)).unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_INVALID_ARGUMENT);
    assert_eq!(msg, "no compiling today");
    let mut ms: sys::PJRT_Device_MemoryStats_Args =
        new_args(sys::PJRT_Device_MemoryStats_Args_STRUCT_SIZE);
    let (code, msg) = call!(api, PJRT_Device_MemoryStats, ms).unwrap_err();
    assert_eq!(
        (code, msg.as_str()),
        (sys::PJRT_Error_Code_RESOURCE_EXHAUSTED, "out of memory")
    );
    let mut init: sys::PJRT_Plugin_Initialize_Args =
        new_args(sys::PJRT_Plugin_Initialize_Args_STRUCT_SIZE);
    let (code, msg) = call!(api, PJRT_Plugin_Initialize, init).unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_INTERNAL);
    assert_eq!(
        msg,
        "fake plugin: forced INTERNAL from PJRT_Plugin_Initialize"
    );
    destroy_client(api, client);
    assert_eq!(fake::live_handle_count(), 0, "{:?}", fake::live_handles());
}

#[test]
fn struct_sizes_are_checked() {
    let _g = serial();
    let api = api_from("RPJRT_FAKE_MIN_STRUCT_SIZE=PJRT_Client_Create_Args:200");
    let (code, msg) = create_client(api, &[]).unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_INVALID_ARGUMENT);
    assert_eq!(
        msg,
        "Unexpected PJRT_Client_Create_Args size: expected 200, got 88"
    );

    // Without the knob, a struct smaller than the 0.114 one is refused the same way.
    let api = api_from("");
    let mut a: sys::PJRT_Client_Create_Args = new_args(72);
    let (_, msg) = call!(api, PJRT_Client_Create, a).unwrap_err();
    assert_eq!(
        msg,
        "Unexpected PJRT_Client_Create_Args size: expected 88, got 72"
    );
    // ... and so is a nested named value.
    let mut opt = nv_int("fake_device_count", 3);
    opt.struct_size = 16;
    let (_, msg) = create_client(api, &[opt]).unwrap_err();
    assert!(msg.starts_with("Unexpected PJRT_NamedValue size"), "{msg}");
    // A larger struct is fine.
    let mut big: sys::PJRT_Client_Create_Args = new_args(200);
    call!(api, PJRT_Client_Create, big).unwrap();
    destroy_client(api, big.client);
    assert_eq!(fake::live_handle_count(), 0, "{:?}", fake::live_handles());
}

#[test]
fn extensions_knob() {
    let _g = serial();
    let api = api_from("RPJRT_FAKE_EXTENSIONS=MemoryDescriptions,24:40,99");
    let chain = ext_chain(api);
    assert_eq!(
        chain.iter().map(|(t, s, _)| (*t, *s)).collect::<Vec<_>>(),
        vec![
            (sys::PJRT_Extension_Type_MemoryDescriptions, 40),
            (sys::PJRT_Extension_Type_XlaTransform, 40),
            (99, 24)
        ]
    );
    // Every function slot of an extension answers UNIMPLEMENTED.
    let first = chain[0].2;
    type Slot = Option<unsafe extern "C" fn(*mut c_void) -> *mut sys::PJRT_Error>;
    // SAFETY: the extension is 40 bytes: the base, then two function pointers.
    let slot: Slot = unsafe { first.cast::<u8>().add(24).cast::<Slot>().read() };
    // SAFETY: the stub never reads its argument.
    let err = unsafe { (slot.unwrap())(std::ptr::null_mut()) };
    let (code, _) = api.take(err).unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_UNIMPLEMENTED);

    let api = api_from("RPJRT_FAKE_EXTENSIONS=");
    assert!(api.0.extension_start.is_null());
}

#[test]
fn attributes_knob() {
    let _g = serial();
    let api = api_from("RPJRT_FAKE_ATTRIBUTES=xla_version=int64:3;name=string:a b;v=int64list:1,2");
    let mut a: sys::PJRT_Plugin_Attributes_Args =
        new_args(sys::PJRT_Plugin_Attributes_Args_STRUCT_SIZE);
    call!(api, PJRT_Plugin_Attributes, a).unwrap();
    assert_eq!(a.num_attributes, 3);
    // SAFETY: three attributes.
    let attrs = unsafe { std::slice::from_raw_parts(a.attributes, 3) };
    assert_eq!(str_of(attrs[1].name, attrs[1].name_size), "name");
    // SAFETY: kString.
    let value = unsafe { attrs[1].value.string_value };
    assert_eq!(str_of(value, attrs[1].value_size), "a b");

    let api = api_from("RPJRT_FAKE_ATTRIBUTES=");
    let mut a: sys::PJRT_Plugin_Attributes_Args =
        new_args(sys::PJRT_Plugin_Attributes_Args_STRUCT_SIZE);
    call!(api, PJRT_Plugin_Attributes, a).unwrap();
    assert_eq!(a.num_attributes, 0);
}

#[test]
fn event_error_knob() {
    let _g = serial();
    let api = api_from("RPJRT_FAKE_EVENT_ERROR=PJRT_Buffer_ToHostBuffer:DATA_LOSS:bits fell out");
    let client = create_client(api, &[]).unwrap();
    let devs = devices(api, client);
    let b = put_f32(api, client, devs[0], &[1.0, 2.0], &[2]).unwrap();
    let (code, msg) = to_host(api, b).unwrap_err();
    assert_eq!(
        (code, msg.as_str()),
        (sys::PJRT_Error_Code_DATA_LOSS, "bits fell out")
    );
    destroy_buffer(api, b);
    destroy_client(api, client);
    assert_eq!(fake::live_handle_count(), 0, "{:?}", fake::live_handles());
}

#[test]
fn create_options_are_recorded_and_can_be_restricted() {
    let _g = serial();
    let api = api_from("RPJRT_FAKE_ALLOWED_OPTIONS=cpu_device_count");
    let (code, msg) = create_client(api, &[nv_str("bogus", "x")]).unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_INVALID_ARGUMENT);
    assert!(msg.contains("bogus"), "{msg}");
    let opts = [
        nv_int("cpu_device_count", 8),
        nv_int("fake_device_count", 3),
        nv_bool("fake_kv_roundtrip", false),
    ];
    let client = create_client(api, &opts).unwrap();
    assert_eq!(devices(api, client).len(), 3);
    let mut v: sys::PJRT_Client_PlatformVersion_Args =
        new_args(sys::PJRT_Client_PlatformVersion_Args_STRUCT_SIZE);
    v.client = client;
    call!(api, PJRT_Client_PlatformVersion, v).unwrap();
    let text = str_of(v.platform_version, v.platform_version_size);
    assert!(
        text.ends_with(
            "create options: cpu_device_count=int64:8, fake_device_count=int64:3, fake_kv_roundtrip=bool:false"
        ),
        "{text}"
    );
    destroy_client(api, client);
    let (_, msg) = create_client(api, &[nv_str("fake_device_count", "3")]).unwrap_err();
    assert!(msg.contains("must be an int64"), "{msg}");
}

#[test]
fn null_api_and_bad_specs() {
    let _g = serial();
    assert!(fake::configure_from_spec("RPJRT_FAKE_NULL_API=1")
        .unwrap()
        .is_null());
    assert!(fake::configure_from_spec("RPJRT_FAKE_NOPE=1").is_err());
    assert!(fake::configure_from_spec("RPJRT_FAKE_NULL_SLOTS=PJRT_Client_Creat").is_err());
    assert!(fake::configure_from_spec("RPJRT_FAKE_FAIL=PJRT_Client_Create:NOT_A_CODE:x").is_err());
    assert!(fake::configure_from_spec("RPJRT_FAKE_VERSION=114").is_err());
    assert!(fake::configure_from_spec("RPJRT_FAKE_TABLE_SLOTS=139").is_err());
    assert!(fake::configure_from_spec("RPJRT_FAKE_ATTRIBUTES=a=weird:1").is_err());
    assert!(!fake::configure_from_spec("").unwrap().is_null());
}

struct Store {
    entries: Vec<(String, String)>,
    puts: usize,
}

unsafe extern "C" fn kv_put(args: *mut sys::PJRT_KeyValuePutCallback_Args) -> *mut sys::PJRT_Error {
    // SAFETY: the plugin passes valid args whose user_arg is our Store.
    let a = unsafe { &*args };
    // SAFETY: as above.
    let store = unsafe { &mut *a.user_arg.cast::<Store>() };
    store.puts += 1;
    store
        .entries
        .push((str_of(a.key, a.key_size), str_of(a.value, a.value_size)));
    std::ptr::null_mut()
}

unsafe extern "C" fn free_value(value: *mut std::os::raw::c_char) {
    // SAFETY: made by CString::into_raw in kv_get.
    drop(unsafe { std::ffi::CString::from_raw(value) });
}

unsafe extern "C" fn kv_get(args: *mut sys::PJRT_KeyValueGetCallback_Args) -> *mut sys::PJRT_Error {
    // SAFETY: the plugin passes valid args whose user_arg is our Store.
    let a = unsafe { &mut *args };
    // SAFETY: as above.
    let store = unsafe { &*a.user_arg.cast::<Store>() };
    let key = str_of(a.key, a.key_size);
    match store.entries.iter().find(|(k, _)| *k == key) {
        Some((_, v)) => {
            let c = std::ffi::CString::new(v.as_str()).unwrap();
            a.value_size = v.len();
            a.value = c.into_raw();
            a.value_deleter_callback = Some(free_value);
            std::ptr::null_mut()
        }
        None => {
            // SAFETY: the plugin passes a valid PJRT_CallbackError.
            let make = unsafe { (*a.callback_error).unwrap() };
            let msg = "no such key";
            // SAFETY: message bytes valid for the call.
            unsafe {
                make(
                    sys::PJRT_Error_Code_NOT_FOUND,
                    msg.as_ptr().cast(),
                    msg.len(),
                )
            }
        }
    }
}

#[test]
fn kv_roundtrip_option_uses_the_callbacks() {
    let _g = serial();
    let api = api_from("");
    let mut store = Store {
        entries: Vec::new(),
        puts: 0,
    };
    let opts = [nv_bool("fake_kv_roundtrip", true)];
    let mut a: sys::PJRT_Client_Create_Args = new_args(sys::PJRT_Client_Create_Args_STRUCT_SIZE);
    a.create_options = opts.as_ptr();
    a.num_options = 1;
    let (_, msg) = call!(api, PJRT_Client_Create, a).unwrap_err();
    assert!(msg.contains("needs kv_put_callback"), "{msg}");
    a.kv_put_callback = Some(kv_put);
    a.kv_put_user_arg = (&mut store as *mut Store).cast();
    a.kv_get_callback = Some(kv_get);
    a.kv_get_user_arg = (&mut store as *mut Store).cast();
    call!(api, PJRT_Client_Create, a).unwrap();
    assert_eq!(store.puts, 1);
    destroy_client(api, a.client);

    // A callback error surfaces as the create error, with its code.
    unsafe extern "C" fn forgetful_put(
        _args: *mut sys::PJRT_KeyValuePutCallback_Args,
    ) -> *mut sys::PJRT_Error {
        std::ptr::null_mut()
    }
    a.kv_put_callback = Some(forgetful_put);
    store.entries.clear();
    let (code, msg) = call!(api, PJRT_Client_Create, a).unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_NOT_FOUND);
    assert_eq!(msg, "kv_get_callback failed: no such key");
    assert_eq!(fake::live_handle_count(), 0, "{:?}", fake::live_handles());
}
