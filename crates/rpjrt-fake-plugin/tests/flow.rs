//! The fake's default behaviour, end to end, through the function table.

mod common;

use common::*;
use rpjrt_fake_plugin as fake;
use rpjrt_sys as sys;

fn default_api() -> Api {
    Api::new(fake::configure(fake::Config::default()).unwrap())
}

#[test]
fn create_put_compile_execute_read_destroy() {
    let _g = serial();
    let api = default_api();
    let before = fake::live_handle_count();

    let mut init: sys::PJRT_Plugin_Initialize_Args =
        new_args(sys::PJRT_Plugin_Initialize_Args_STRUCT_SIZE);
    call!(api, PJRT_Plugin_Initialize, init).unwrap();

    let client = create_client(api, &[]).unwrap();
    let devs = devices(api, client);
    assert_eq!(devs.len(), fake::DEFAULT_DEVICE_COUNT);

    let mut name: sys::PJRT_Client_PlatformName_Args =
        new_args(sys::PJRT_Client_PlatformName_Args_STRUCT_SIZE);
    name.client = client;
    call!(api, PJRT_Client_PlatformName, name).unwrap();
    assert_eq!(str_of(name.platform_name, name.platform_name_size), "fake");

    let x = put_f32(api, client, devs[0], &[1.0, 2.0, 3.0, 4.0], &[4]).unwrap();
    let exe = compile(api, client, ADD_ONE, &compile_options(1, 1)).unwrap();

    let mut get: sys::PJRT_LoadedExecutable_GetExecutable_Args =
        new_args(sys::PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE);
    get.loaded_executable = exe;
    call!(api, PJRT_LoadedExecutable_GetExecutable, get).unwrap();
    let mut n: sys::PJRT_Executable_Name_Args =
        new_args(sys::PJRT_Executable_Name_Args_STRUCT_SIZE);
    n.executable = get.executable;
    call!(api, PJRT_Executable_Name, n).unwrap();
    assert_eq!(
        str_of(n.executable_name, n.executable_name_size),
        "jit_add_one"
    );
    let mut no: sys::PJRT_Executable_NumOutputs_Args =
        new_args(sys::PJRT_Executable_NumOutputs_Args_STRUCT_SIZE);
    no.executable = get.executable;
    call!(api, PJRT_Executable_NumOutputs, no).unwrap();
    assert_eq!(no.num_outputs, 1);
    let mut dims: sys::PJRT_Executable_OutputDimensions_Args =
        new_args(sys::PJRT_Executable_OutputDimensions_Args_STRUCT_SIZE);
    dims.executable = get.executable;
    call!(api, PJRT_Executable_OutputDimensions, dims).unwrap();
    assert_eq!(dims.num_outputs, 1);
    // SAFETY: one output with dim_sizes[0] dimensions.
    let (nd, d0) = unsafe { (*dims.dim_sizes, *dims.dims) };
    assert_eq!((nd, d0), (1, 4));
    let mut ty: sys::PJRT_Executable_OutputElementTypes_Args =
        new_args(sys::PJRT_Executable_OutputElementTypes_Args_STRUCT_SIZE);
    ty.executable = get.executable;
    call!(api, PJRT_Executable_OutputElementTypes, ty).unwrap();
    // SAFETY: one output type.
    assert_eq!(unsafe { *ty.output_types }, sys::PJRT_Buffer_Type_F32);
    let mut ed: sys::PJRT_Executable_Destroy_Args =
        new_args(sys::PJRT_Executable_Destroy_Args_STRUCT_SIZE);
    ed.executable = get.executable;
    call!(api, PJRT_Executable_Destroy, ed).unwrap();

    let outs = execute(api, exe, &[vec![x]]).unwrap();
    assert_eq!(outs.len(), 1);
    let bytes = to_host(api, outs[0]).unwrap();
    assert_eq!(
        f32s(&bytes),
        vec![1.0, 2.0, 3.0, 4.0],
        "output is a copy of argument 0"
    );

    let mut dev: sys::PJRT_Buffer_Device_Args = new_args(sys::PJRT_Buffer_Device_Args_STRUCT_SIZE);
    dev.buffer = outs[0];
    call!(api, PJRT_Buffer_Device, dev).unwrap();
    assert_eq!(dev.device, devs[0]);

    destroy_buffer(api, outs[0]);
    destroy_buffer(api, x);
    destroy_loaded(api, exe);
    destroy_client(api, client);
    assert_eq!(
        fake::live_handle_count(),
        before,
        "{:?}",
        fake::live_handles()
    );
}

#[test]
fn devices_descriptions_and_memories() {
    let _g = serial();
    let api = default_api();
    let opts = [
        nv_int("fake_device_count", 4),
        nv_int("fake_addressable_device_count", 3),
    ];
    let client = create_client(api, &opts).unwrap();
    let mut all: sys::PJRT_Client_Devices_Args =
        new_args(sys::PJRT_Client_Devices_Args_STRUCT_SIZE);
    all.client = client;
    call!(api, PJRT_Client_Devices, all).unwrap();
    assert_eq!(all.num_devices, 4);
    let addressable = devices(api, client);
    assert_eq!(addressable.len(), 3);
    // SAFETY: num_devices pointers.
    let last = unsafe { *all.devices.add(3) };
    let mut ia: sys::PJRT_Device_IsAddressable_Args =
        new_args(sys::PJRT_Device_IsAddressable_Args_STRUCT_SIZE);
    ia.device = last;
    call!(api, PJRT_Device_IsAddressable, ia).unwrap();
    assert!(!ia.is_addressable);

    let mut gd: sys::PJRT_Device_GetDescription_Args =
        new_args(sys::PJRT_Device_GetDescription_Args_STRUCT_SIZE);
    gd.device = addressable[1];
    call!(api, PJRT_Device_GetDescription, gd).unwrap();
    let mut id: sys::PJRT_DeviceDescription_Id_Args =
        new_args(sys::PJRT_DeviceDescription_Id_Args_STRUCT_SIZE);
    id.device_description = gd.device_description;
    call!(api, PJRT_DeviceDescription_Id, id).unwrap();
    assert_eq!(id.id, 1);
    let mut kind: sys::PJRT_DeviceDescription_Kind_Args =
        new_args(sys::PJRT_DeviceDescription_Kind_Args_STRUCT_SIZE);
    kind.device_description = gd.device_description;
    call!(api, PJRT_DeviceDescription_Kind, kind).unwrap();
    assert_eq!(str_of(kind.device_kind, kind.device_kind_size), "fake");
    let mut attrs: sys::PJRT_DeviceDescription_Attributes_Args =
        new_args(sys::PJRT_DeviceDescription_Attributes_Args_STRUCT_SIZE);
    attrs.device_description = gd.device_description;
    call!(api, PJRT_DeviceDescription_Attributes, attrs).unwrap();
    assert!(attrs.num_attributes >= 1);

    let mut lk: sys::PJRT_Client_LookupDevice_Args =
        new_args(sys::PJRT_Client_LookupDevice_Args_STRUCT_SIZE);
    lk.client = client;
    lk.id = 2;
    call!(api, PJRT_Client_LookupDevice, lk).unwrap();
    assert_eq!(lk.device, addressable[2]);
    lk.id = 99;
    let (code, _) = call!(api, PJRT_Client_LookupDevice, lk).unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_INVALID_ARGUMENT);

    let mut dm: sys::PJRT_Device_DefaultMemory_Args =
        new_args(sys::PJRT_Device_DefaultMemory_Args_STRUCT_SIZE);
    dm.device = addressable[0];
    call!(api, PJRT_Device_DefaultMemory, dm).unwrap();
    let mut mk: sys::PJRT_Memory_Kind_Args = new_args(sys::PJRT_Memory_Kind_Args_STRUCT_SIZE);
    mk.memory = dm.memory;
    call!(api, PJRT_Memory_Kind, mk).unwrap();
    assert_eq!(str_of(mk.kind, mk.kind_size), "device");
    let mut by: sys::PJRT_Memory_AddressableByDevices_Args =
        new_args(sys::PJRT_Memory_AddressableByDevices_Args_STRUCT_SIZE);
    by.memory = dm.memory;
    call!(api, PJRT_Memory_AddressableByDevices, by).unwrap();
    assert_eq!(by.num_devices, 1);
    let mut am: sys::PJRT_Device_AddressableMemories_Args =
        new_args(sys::PJRT_Device_AddressableMemories_Args_STRUCT_SIZE);
    am.device = addressable[0];
    call!(api, PJRT_Device_AddressableMemories, am).unwrap();
    assert_eq!(am.num_memories, fake::MEMORY_KINDS.len());
    let mut cm: sys::PJRT_Client_AddressableMemories_Args =
        new_args(sys::PJRT_Client_AddressableMemories_Args_STRUCT_SIZE);
    cm.client = client;
    call!(api, PJRT_Client_AddressableMemories, cm).unwrap();
    assert_eq!(cm.num_addressable_memories, 3 * fake::MEMORY_KINDS.len());

    // A buffer in the pinned_host memory, then copied back to device memory.
    // SAFETY: num_memories pointers.
    let pinned = unsafe { *am.memories.add(1) };
    let data = [5.0f32, 6.0];
    let dims = [2i64];
    let mut a: sys::PJRT_Client_BufferFromHostBuffer_Args =
        new_args(sys::PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE);
    a.client = client;
    a.data = data.as_ptr().cast();
    a.r#type = sys::PJRT_Buffer_Type_F32;
    a.dims = dims.as_ptr();
    a.num_dims = 1;
    a.memory = pinned;
    call!(api, PJRT_Client_BufferFromHostBuffer, a).unwrap();
    destroy_event(api, a.done_with_host_buffer);
    let mut cp: sys::PJRT_Buffer_CopyToMemory_Args =
        new_args(sys::PJRT_Buffer_CopyToMemory_Args_STRUCT_SIZE);
    cp.buffer = a.buffer;
    cp.dst_memory = pinned;
    assert!(
        call!(api, PJRT_Buffer_CopyToMemory, cp).is_err(),
        "already there"
    );
    cp.dst_memory = dm.memory;
    call!(api, PJRT_Buffer_CopyToMemory, cp).unwrap();
    assert_eq!(f32s(&to_host(api, cp.dst_buffer).unwrap()), vec![5.0, 6.0]);
    let mut cd: sys::PJRT_Buffer_CopyToDevice_Args =
        new_args(sys::PJRT_Buffer_CopyToDevice_Args_STRUCT_SIZE);
    cd.buffer = a.buffer;
    cd.dst_device = addressable[2];
    call!(api, PJRT_Buffer_CopyToDevice, cd).unwrap();
    let mut bd: sys::PJRT_Buffer_Device_Args = new_args(sys::PJRT_Buffer_Device_Args_STRUCT_SIZE);
    bd.buffer = cd.dst_buffer;
    call!(api, PJRT_Buffer_Device, bd).unwrap();
    assert_eq!(bd.device, addressable[2]);
    for b in [a.buffer, cp.dst_buffer, cd.dst_buffer] {
        destroy_buffer(api, b);
    }
    destroy_client(api, client);
    assert_eq!(fake::live_handle_count(), 0, "{:?}", fake::live_handles());
}

#[test]
fn buffers_strides_delete_and_metadata() {
    let _g = serial();
    let api = default_api();
    let client = create_client(api, &[]).unwrap();
    let devs = devices(api, client);

    // A 2x3 array given column-major through byte strides.
    let col_major = [1.0f32, 4.0, 2.0, 5.0, 3.0, 6.0];
    let dims = [2i64, 3];
    let strides = [4i64, 8];
    let mut a: sys::PJRT_Client_BufferFromHostBuffer_Args =
        new_args(sys::PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE);
    a.client = client;
    a.data = col_major.as_ptr().cast();
    a.r#type = sys::PJRT_Buffer_Type_F32;
    a.dims = dims.as_ptr();
    a.num_dims = 2;
    a.byte_strides = strides.as_ptr();
    a.num_byte_strides = 2;
    a.device = devs[1];
    call!(api, PJRT_Client_BufferFromHostBuffer, a).unwrap();
    destroy_event(api, a.done_with_host_buffer);
    let b = a.buffer;
    assert_eq!(
        f32s(&to_host(api, b).unwrap()),
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );

    let mut d: sys::PJRT_Buffer_Dimensions_Args =
        new_args(sys::PJRT_Buffer_Dimensions_Args_STRUCT_SIZE);
    d.buffer = b;
    call!(api, PJRT_Buffer_Dimensions, d).unwrap();
    // SAFETY: num_dims values.
    let got = unsafe { std::slice::from_raw_parts(d.dims, d.num_dims) };
    assert_eq!(got, &[2, 3]);
    let mut sz: sys::PJRT_Buffer_OnDeviceSizeInBytes_Args =
        new_args(sys::PJRT_Buffer_OnDeviceSizeInBytes_Args_STRUCT_SIZE);
    sz.buffer = b;
    call!(api, PJRT_Buffer_OnDeviceSizeInBytes, sz).unwrap();
    assert_eq!(sz.on_device_size_in_bytes, 24);
    let mut et: sys::PJRT_Buffer_ElementType_Args =
        new_args(sys::PJRT_Buffer_ElementType_Args_STRUCT_SIZE);
    et.buffer = b;
    call!(api, PJRT_Buffer_ElementType, et).unwrap();
    assert_eq!(et.r#type, sys::PJRT_Buffer_Type_F32);

    // A too-small destination is refused.
    let mut small = [0u8; 4];
    let mut th: sys::PJRT_Buffer_ToHostBuffer_Args =
        new_args(sys::PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE);
    th.src = b;
    th.dst = small.as_mut_ptr().cast();
    th.dst_size = small.len();
    let (code, _) = call!(api, PJRT_Buffer_ToHostBuffer, th).unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_INVALID_ARGUMENT);

    let mut del: sys::PJRT_Buffer_Delete_Args = new_args(sys::PJRT_Buffer_Delete_Args_STRUCT_SIZE);
    del.buffer = b;
    call!(api, PJRT_Buffer_Delete, del).unwrap();
    let mut isd: sys::PJRT_Buffer_IsDeleted_Args =
        new_args(sys::PJRT_Buffer_IsDeleted_Args_STRUCT_SIZE);
    isd.buffer = b;
    call!(api, PJRT_Buffer_IsDeleted, isd).unwrap();
    assert!(isd.is_deleted);
    let (code, msg) = to_host(api, b).unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_INVALID_ARGUMENT);
    assert!(msg.contains("deleted"), "{msg}");
    let mut re: sys::PJRT_Buffer_ReadyEvent_Args =
        new_args(sys::PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE);
    re.buffer = b;
    call!(api, PJRT_Buffer_ReadyEvent, re).unwrap();
    assert!(await_event(api, re.event).is_err());
    destroy_buffer(api, b);

    // A stale handle is an error value, not a crash.
    let (code, msg) = to_host(api, b).unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_INVALID_ARGUMENT);
    assert!(msg.contains("not a live PJRT_Buffer"), "{msg}");

    // Unsupported element types are refused.
    let mut bad: sys::PJRT_Client_BufferFromHostBuffer_Args =
        new_args(sys::PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE);
    bad.client = client;
    bad.data = col_major.as_ptr().cast();
    bad.r#type = sys::PJRT_Buffer_Type_TOKEN;
    bad.device = devs[0];
    assert!(call!(api, PJRT_Client_BufferFromHostBuffer, bad).is_err());

    destroy_client(api, client);
    assert_eq!(fake::live_handle_count(), 0, "{:?}", fake::live_handles());
}

#[test]
fn events_and_on_ready() {
    let _g = serial();
    let api = default_api();
    let client = create_client(api, &[]).unwrap();
    let devs = devices(api, client);
    let b = put_f32(api, client, devs[0], &[1.0], &[1]).unwrap();
    let mut re: sys::PJRT_Buffer_ReadyEvent_Args =
        new_args(sys::PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE);
    re.buffer = b;
    call!(api, PJRT_Buffer_ReadyEvent, re).unwrap();
    let mut ir: sys::PJRT_Event_IsReady_Args = new_args(sys::PJRT_Event_IsReady_Args_STRUCT_SIZE);
    ir.event = re.event;
    call!(api, PJRT_Event_IsReady, ir).unwrap();
    assert!(ir.is_ready);

    unsafe extern "C" fn on_ready(err: *mut sys::PJRT_Error, user: *mut std::ffi::c_void) {
        // SAFETY: user is the &mut i32 below.
        unsafe { *user.cast::<i32>() = if err.is_null() { 1 } else { 2 } };
    }
    let mut seen = 0i32;
    let mut or: sys::PJRT_Event_OnReady_Args = new_args(sys::PJRT_Event_OnReady_Args_STRUCT_SIZE);
    or.event = re.event;
    or.callback = Some(on_ready);
    or.user_arg = (&mut seen as *mut i32).cast();
    call!(api, PJRT_Event_OnReady, or).unwrap();
    assert_eq!(seen, 1);
    destroy_event(api, re.event);
    destroy_buffer(api, b);
    destroy_client(api, client);
    assert_eq!(fake::live_handle_count(), 0, "{:?}", fake::live_handles());
}

#[test]
fn compile_and_execute_errors() {
    let _g = serial();
    let api = default_api();
    let client = create_client(api, &[]).unwrap();
    let devs = devices(api, client);

    let (code, msg) = compile(
        api,
        client,
        "func.func @main() { FAKE_COMPILE_ERROR }",
        &compile_options(1, 1),
    )
    .unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_INVALID_ARGUMENT);
    assert!(msg.contains("program.mlir:1:21: error"), "{msg}");
    let (code, _) = compile(api, client, "not a program", &compile_options(1, 1)).unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_INVALID_ARGUMENT);
    let (_, msg) = compile(api, client, ADD_ONE, &[]).unwrap_err();
    assert!(msg.contains("num_replicas"), "{msg}");
    let (_, msg) = compile(api, client, ADD_ONE, &compile_options(3, 1)).unwrap_err();
    assert!(msg.contains("devices needed"), "{msg}");

    // Two replicas run on devices 0 and 1.
    let exe = compile(api, client, ADD_ONE, &compile_options(2, 1)).unwrap();
    let x0 = put_f32(api, client, devs[0], &[1.0, 2.0, 3.0, 4.0], &[4]).unwrap();
    let x1 = put_f32(api, client, devs[1], &[5.0, 6.0, 7.0, 8.0], &[4]).unwrap();
    let outs = execute(api, exe, &[vec![x0], vec![x1]]).unwrap();
    assert_eq!(
        f32s(&to_host(api, outs[1]).unwrap()),
        vec![5.0, 6.0, 7.0, 8.0]
    );
    for o in outs {
        destroy_buffer(api, o);
    }
    // Wrong device, wrong count, wrong shape.
    let (_, msg) = execute(api, exe, &[vec![x1], vec![x0]]).unwrap_err();
    assert!(msg.contains("is on device"), "{msg}");
    let (_, msg) = execute(api, exe, &[vec![x0]]).unwrap_err();
    assert!(msg.contains("argument lists"), "{msg}");
    let (_, msg) = execute(api, exe, &[vec![x0, x0], vec![x1, x1]]).unwrap_err();
    assert!(msg.contains("expected 1 buffers"), "{msg}");
    let short = put_f32(api, client, devs[0], &[1.0], &[1]).unwrap();
    let (_, msg) = execute(api, exe, &[vec![short], vec![x1]]).unwrap_err();
    assert!(msg.contains("does not match"), "{msg}");

    // Deleted executables refuse to run.
    let mut del: sys::PJRT_LoadedExecutable_Delete_Args =
        new_args(sys::PJRT_LoadedExecutable_Delete_Args_STRUCT_SIZE);
    del.executable = exe;
    call!(api, PJRT_LoadedExecutable_Delete, del).unwrap();
    let (code, _) = execute(api, exe, &[vec![x0], vec![x1]]).unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_FAILED_PRECONDITION);

    for b in [x0, x1, short] {
        destroy_buffer(api, b);
    }
    destroy_loaded(api, exe);
    destroy_client(api, client);
    assert_eq!(fake::live_handle_count(), 0, "{:?}", fake::live_handles());
}

#[test]
fn plugin_attributes_have_every_kind() {
    let _g = serial();
    let api = default_api();
    let mut a: sys::PJRT_Plugin_Attributes_Args =
        new_args(sys::PJRT_Plugin_Attributes_Args_STRUCT_SIZE);
    call!(api, PJRT_Plugin_Attributes, a).unwrap();
    // SAFETY: num_attributes values living as long as the process.
    let attrs = unsafe { std::slice::from_raw_parts(a.attributes, a.num_attributes) };
    let mut kinds: Vec<i32> = attrs.iter().map(|v| v.r#type).collect();
    kinds.sort();
    kinds.dedup();
    assert_eq!(kinds, vec![0, 1, 2, 3, 4]);
    let xla = attrs
        .iter()
        .find(|v| str_of(v.name, v.name_size) == "xla_version")
        .unwrap();
    // SAFETY: kInt64.
    assert_eq!(unsafe { xla.value.int64_value }, 2);
    let cur = attrs
        .iter()
        .find(|v| str_of(v.name, v.name_size) == "stablehlo_current_version")
        .unwrap();
    // SAFETY: kInt64List with value_size elements.
    let list = unsafe { std::slice::from_raw_parts(cur.value.int64_array_value, cur.value_size) };
    assert_eq!(list, &[1, 9, 0]);
}

#[test]
fn unimplemented_entries_say_so() {
    let _g = serial();
    let api = default_api();
    let mut a: sys::PJRT_Client_TopologyDescription_Args =
        new_args(sys::PJRT_Client_TopologyDescription_Args_STRUCT_SIZE);
    let (code, msg) = call!(api, PJRT_Client_TopologyDescription, a).unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_UNIMPLEMENTED);
    assert_eq!(
        msg,
        "fake plugin: PJRT_Client_TopologyDescription is not implemented"
    );
    assert!(fake::implemented_entries().contains(&"PJRT_Client_Compile"));
    assert_eq!(fake::slot_index("PJRT_Client_Create"), Some(10));
}

#[test]
fn errors_carry_the_vtable() {
    let _g = serial();
    let api = default_api();
    let mut a: sys::PJRT_Client_LookupDevice_Args =
        new_args(sys::PJRT_Client_LookupDevice_Args_STRUCT_SIZE);
    let f = api.0.PJRT_Client_LookupDevice.unwrap();
    // SAFETY: valid args (a null client is reported as an error).
    let err = unsafe { f(&mut a) };
    assert!(!err.is_null());
    // SAFETY: the fake's errors start with a vtable (PJRT 0.107+ layout).
    let vt = unsafe { &*(*err).vtable };
    // SAFETY: vtable functions take the error.
    let code = unsafe { (vt.get_code.unwrap())(err) };
    assert_eq!(code, sys::PJRT_Error_Code_INVALID_ARGUMENT);
    // SAFETY: as above; destroys it.
    unsafe { (vt.destroy.unwrap())(err) };
    assert_eq!(fake::live_handle_count(), 0);
}

#[test]
fn serialize_deserialize_and_compile_options() {
    let _g = serial();
    let api = default_api();
    let client = create_client(api, &[]).unwrap();
    let devs = devices(api, client);
    let options = compile_options(1, 1);
    let exe = compile(api, client, ADD_ONE, &options).unwrap();
    let mut get: sys::PJRT_LoadedExecutable_GetExecutable_Args =
        new_args(sys::PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE);
    get.loaded_executable = exe;
    call!(api, PJRT_LoadedExecutable_GetExecutable, get).unwrap();

    let mut ser: sys::PJRT_Executable_Serialize_Args =
        new_args(sys::PJRT_Executable_Serialize_Args_STRUCT_SIZE);
    ser.executable = get.executable;
    call!(api, PJRT_Executable_Serialize, ser).unwrap();
    // SAFETY: bytes live until the deleter runs.
    let bytes = unsafe {
        std::slice::from_raw_parts(ser.serialized_bytes.cast::<u8>(), ser.serialized_bytes_size)
    }
    .to_vec();
    // SAFETY: the deleter frees what Serialize handed out, once.
    unsafe { (ser.serialized_executable_deleter.unwrap())(ser.serialized_executable) };

    let mut co: sys::PJRT_Executable_GetCompileOptions_Args =
        new_args(sys::PJRT_Executable_GetCompileOptions_Args_STRUCT_SIZE);
    co.executable = get.executable;
    call!(api, PJRT_Executable_GetCompileOptions, co).unwrap();
    // SAFETY: as above.
    let got = unsafe {
        std::slice::from_raw_parts(co.serialized_bytes.cast::<u8>(), co.serialized_bytes_size)
    }
    .to_vec();
    assert_eq!(got, options);
    // SAFETY: as above.
    unsafe { (co.serialized_compile_options_deleter.unwrap())(co.serialized_compile_options) };

    let mut de: sys::PJRT_Executable_DeserializeAndLoad_Args =
        new_args(sys::PJRT_Executable_DeserializeAndLoad_Args_STRUCT_SIZE);
    de.client = client;
    de.serialized_executable = bytes.as_ptr().cast();
    de.serialized_executable_size = bytes.len();
    call!(api, PJRT_Executable_DeserializeAndLoad, de).unwrap();
    let x = put_f32(api, client, devs[0], &[9.0, 8.0, 7.0, 6.0], &[4]).unwrap();
    let outs = execute(api, de.loaded_executable, &[vec![x]]).unwrap();
    assert_eq!(
        f32s(&to_host(api, outs[0]).unwrap()),
        vec![9.0, 8.0, 7.0, 6.0]
    );

    let fp = |e: *mut sys::PJRT_LoadedExecutable| {
        let mut f: sys::PJRT_LoadedExecutable_Fingerprint_Args =
            new_args(sys::PJRT_LoadedExecutable_Fingerprint_Args_STRUCT_SIZE);
        f.executable = e;
        call!(api, PJRT_LoadedExecutable_Fingerprint, f).unwrap();
        str_of(f.executable_fingerprint, f.executable_fingerprint_size)
    };
    assert_eq!(fp(exe), fp(de.loaded_executable));

    de.serialized_executable = b"junk".as_ptr().cast();
    de.serialized_executable_size = 4;
    let (code, _) = call!(api, PJRT_Executable_DeserializeAndLoad, de).unwrap_err();
    assert_eq!(code, sys::PJRT_Error_Code_INVALID_ARGUMENT);

    let mut ed: sys::PJRT_Executable_Destroy_Args =
        new_args(sys::PJRT_Executable_Destroy_Args_STRUCT_SIZE);
    ed.executable = get.executable;
    call!(api, PJRT_Executable_Destroy, ed).unwrap();
    destroy_buffer(api, outs[0]);
    destroy_buffer(api, x);
    destroy_loaded(api, exe);
    destroy_loaded(api, de.loaded_executable);
    destroy_client(api, client);
    assert_eq!(fake::live_handle_count(), 0, "{:?}", fake::live_handles());
}
