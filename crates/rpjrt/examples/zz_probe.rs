#![allow(clippy::all, unsafe_op_in_unsafe_fn)]
use rpjrt_sys as sys;
use std::ptr::null_mut;

unsafe fn msg(api: &sys::PJRT_Api, e: *mut sys::PJRT_Error) -> String {
    if e.is_null() { return "ok".into(); }
    let mut m: sys::PJRT_Error_Message_Args = std::mem::zeroed();
    m.struct_size = sys::PJRT_Error_Message_Args_STRUCT_SIZE;
    m.error = e;
    (api.PJRT_Error_Message.unwrap())(&mut m);
    String::from_utf8_lossy(std::slice::from_raw_parts(m.message as *const u8, m.message_size)).into_owned()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = &args[1];
    let code: i32 = args[2].parse().unwrap();
    let n: i64 = args[3].parse().unwrap();
    unsafe {
        let lib = libloading::Library::new(path).unwrap();
        let get: libloading::Symbol<unsafe extern "C" fn() -> *const sys::PJRT_Api> = lib.get(b"GetPjrtApi\0").unwrap();
        let api = &*get(); let get = *get; std::mem::forget(lib); let _ = get;
        let mut ia: sys::PJRT_Plugin_Initialize_Args = std::mem::zeroed();
        ia.struct_size = sys::PJRT_Plugin_Initialize_Args_STRUCT_SIZE;
        (api.PJRT_Plugin_Initialize.unwrap())(&mut ia);
        let mut ca: sys::PJRT_Client_Create_Args = std::mem::zeroed();
        ca.struct_size = sys::PJRT_Client_Create_Args_STRUCT_SIZE;
        let e = (api.PJRT_Client_Create.unwrap())(&mut ca);
        assert!(e.is_null(), "{}", msg(api, e));
        let mut da: sys::PJRT_Client_AddressableDevices_Args = std::mem::zeroed();
        da.struct_size = sys::PJRT_Client_AddressableDevices_Args_STRUCT_SIZE;
        da.client = ca.client;
        (api.PJRT_Client_AddressableDevices.unwrap())(&mut da);
        let dev = *da.addressable_devices;
        let data: Vec<u8> = (0..64u8).map(|i| if i < n as u8 {(i % 7) + 1} else {0x55}).collect();
        let dims = [n];
        let mut b: sys::PJRT_Client_BufferFromHostBuffer_Args = std::mem::zeroed();
        b.struct_size = sys::PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
        b.client = ca.client;
        b.data = data.as_ptr().cast();
        b.r#type = code as _;
        b.dims = dims.as_ptr();
        b.num_dims = 1;
        b.host_buffer_semantics = sys::PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
        b.device = dev;
        let e = (api.PJRT_Client_BufferFromHostBuffer.unwrap())(&mut b);
        println!("from_host: {}", msg(api, e));
        if !e.is_null() { return; }
        let mut os: sys::PJRT_Buffer_OnDeviceSizeInBytes_Args = std::mem::zeroed();
        os.struct_size = sys::PJRT_Buffer_OnDeviceSizeInBytes_Args_STRUCT_SIZE;
        os.buffer = b.buffer;
        let e = (api.PJRT_Buffer_OnDeviceSizeInBytes.unwrap())(&mut os);
        println!("on_device_size: {} {}", os.on_device_size_in_bytes, msg(api, e));
        let mut th: sys::PJRT_Buffer_ToHostBuffer_Args = std::mem::zeroed();
        th.struct_size = sys::PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
        th.src = b.buffer;
        let e = (api.PJRT_Buffer_ToHostBuffer.unwrap())(&mut th);
        println!("to_host size query: dst_size={} {}", th.dst_size, msg(api, e));
        let need = th.dst_size;
        // too-small dst
        if need > 1 {
            let mut small = vec![0xAAu8; 64];
            let mut th2: sys::PJRT_Buffer_ToHostBuffer_Args = std::mem::zeroed();
            th2.struct_size = sys::PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
            th2.src = b.buffer;
            th2.dst = small.as_mut_ptr().cast();
            th2.dst_size = need - 1;
            let e = (api.PJRT_Buffer_ToHostBuffer.unwrap())(&mut th2);
            println!("to_host with dst_size={}: {}", need - 1, msg(api, e));
            if e.is_null() && !th2.event.is_null() {
                let mut aw: sys::PJRT_Event_Await_Args = std::mem::zeroed();
                aw.struct_size = sys::PJRT_Event_Await_Args_STRUCT_SIZE;
                aw.event = th2.event;
                let e = (api.PJRT_Event_Await.unwrap())(&mut aw);
                println!("  await {} bytes={:?}", msg(api, e), &small[..16]);
            }
        }
        let mut dst = vec![0xAAu8; 64];
        let mut th3: sys::PJRT_Buffer_ToHostBuffer_Args = std::mem::zeroed();
        th3.struct_size = sys::PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
        th3.src = b.buffer;
        th3.dst = dst.as_mut_ptr().cast();
        th3.dst_size = 64;
        let e = (api.PJRT_Buffer_ToHostBuffer.unwrap())(&mut th3);
        if !th3.event.is_null() {
            let mut aw: sys::PJRT_Event_Await_Args = std::mem::zeroed();
            aw.struct_size = sys::PJRT_Event_Await_Args_STRUCT_SIZE;
            aw.event = th3.event;
            (api.PJRT_Event_Await.unwrap())(&mut aw);
        }
        println!("to_host(64): {} bytes={:?}", msg(api, e), &dst[..16]);
    }
}
