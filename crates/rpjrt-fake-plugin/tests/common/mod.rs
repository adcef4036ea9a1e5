//! Raw-call helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::{Mutex, MutexGuard};

use rpjrt_sys as sys;

/// Tests in one file share the process-wide configuration and live-handle registry.
static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A zeroed args struct with `struct_size` set.
pub fn new_args<T: Copy>(size: usize) -> T {
    // SAFETY: every PJRT args struct is made of integers, raw pointers, bools, unions of
    // those and Options of function pointers, all valid as zero bytes.
    let mut t: T = unsafe { std::mem::zeroed() };
    // SAFETY: every args struct starts with `size_t struct_size`.
    unsafe { (&mut t as *mut T).cast::<usize>().write(size) };
    t
}

#[derive(Clone, Copy)]
pub struct Api(pub &'static sys::PJRT_Api);

/// An error as (code, message).
pub type CallResult<T> = Result<T, (sys::PJRT_Error_Code, String)>;

impl Api {
    pub fn new(ptr: *const sys::PJRT_Api) -> Api {
        assert!(!ptr.is_null(), "GetPjrtApi returned null");
        // SAFETY: the fake's tables are never freed.
        Api(unsafe { &*ptr })
    }

    /// Reads and destroys an error.
    pub fn take(&self, err: *mut sys::PJRT_Error) -> CallResult<()> {
        if err.is_null() {
            return Ok(());
        }
        let mut code: sys::PJRT_Error_GetCode_Args =
            new_args(sys::PJRT_Error_GetCode_Args_STRUCT_SIZE);
        code.error = err;
        // SAFETY: a valid args struct for this entry.
        let e2 = unsafe { (self.0.PJRT_Error_GetCode.unwrap())(&mut code) };
        assert!(e2.is_null());
        let mut msg: sys::PJRT_Error_Message_Args =
            new_args(sys::PJRT_Error_Message_Args_STRUCT_SIZE);
        msg.error = err;
        // SAFETY: as above.
        unsafe { (self.0.PJRT_Error_Message.unwrap())(&mut msg) };
        // SAFETY: the message is valid while the error lives.
        let text =
            unsafe { std::slice::from_raw_parts(msg.message.cast::<u8>(), msg.message_size) };
        let text = String::from_utf8_lossy(text).into_owned();
        let mut d: sys::PJRT_Error_Destroy_Args =
            new_args(sys::PJRT_Error_Destroy_Args_STRUCT_SIZE);
        d.error = err;
        // SAFETY: as above.
        unsafe { (self.0.PJRT_Error_Destroy.unwrap())(&mut d) };
        Err((code.code, text))
    }
}

/// Calls an entry of the table with a mutable args struct; yields `CallResult<()>`.
#[macro_export]
macro_rules! call {
    ($api:expr, $name:ident, $args:expr) => {{
        let api: $crate::common::Api = $api;
        let f = api
            .0
            .$name
            .expect(concat!(stringify!($name), " slot is null"));
        let args = &mut $args;
        // SAFETY: the args struct was built with new_args and filled per the C API.
        let err = unsafe { f(args) };
        api.take(err)
    }};
}

pub fn str_of(ptr: *const std::os::raw::c_char, len: usize) -> String {
    if len == 0 {
        return String::new();
    }
    // SAFETY: the plugin returned len bytes at ptr.
    let s = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    String::from_utf8_lossy(s).into_owned()
}

pub fn nv_int(name: &'static str, v: i64) -> sys::PJRT_NamedValue {
    let mut nv: sys::PJRT_NamedValue = new_args(sys::PJRT_NamedValue_STRUCT_SIZE);
    nv.name = name.as_ptr().cast();
    nv.name_size = name.len();
    nv.r#type = sys::PJRT_NamedValue_kInt64;
    nv.value = sys::PJRT_NamedValue_Union { int64_value: v };
    nv.value_size = 1;
    nv
}

pub fn nv_bool(name: &'static str, v: bool) -> sys::PJRT_NamedValue {
    let mut nv = nv_int(name, 0);
    nv.r#type = sys::PJRT_NamedValue_kBool;
    nv.value = sys::PJRT_NamedValue_Union { bool_value: v };
    nv
}

pub fn nv_str(name: &'static str, v: &'static str) -> sys::PJRT_NamedValue {
    let mut nv = nv_int(name, 0);
    nv.r#type = sys::PJRT_NamedValue_kString;
    nv.value = sys::PJRT_NamedValue_Union {
        string_value: v.as_ptr().cast(),
    };
    nv.value_size = v.len();
    nv
}

pub fn create_client(
    api: Api,
    options: &[sys::PJRT_NamedValue],
) -> CallResult<*mut sys::PJRT_Client> {
    let mut a: sys::PJRT_Client_Create_Args = new_args(sys::PJRT_Client_Create_Args_STRUCT_SIZE);
    a.create_options = options.as_ptr();
    a.num_options = options.len();
    call!(api, PJRT_Client_Create, a)?;
    Ok(a.client)
}

pub fn destroy_client(api: Api, client: *mut sys::PJRT_Client) {
    let mut a: sys::PJRT_Client_Destroy_Args = new_args(sys::PJRT_Client_Destroy_Args_STRUCT_SIZE);
    a.client = client;
    call!(api, PJRT_Client_Destroy, a).unwrap();
}

pub fn devices(api: Api, client: *mut sys::PJRT_Client) -> Vec<*mut sys::PJRT_Device> {
    let mut a: sys::PJRT_Client_AddressableDevices_Args =
        new_args(sys::PJRT_Client_AddressableDevices_Args_STRUCT_SIZE);
    a.client = client;
    call!(api, PJRT_Client_AddressableDevices, a).unwrap();
    // SAFETY: the plugin returned that many device pointers.
    unsafe { std::slice::from_raw_parts(a.addressable_devices, a.num_addressable_devices) }.to_vec()
}

pub fn destroy_event(api: Api, event: *mut sys::PJRT_Event) {
    let mut a: sys::PJRT_Event_Destroy_Args = new_args(sys::PJRT_Event_Destroy_Args_STRUCT_SIZE);
    a.event = event;
    call!(api, PJRT_Event_Destroy, a).unwrap();
}

pub fn await_event(api: Api, event: *mut sys::PJRT_Event) -> CallResult<()> {
    let mut a: sys::PJRT_Event_Await_Args = new_args(sys::PJRT_Event_Await_Args_STRUCT_SIZE);
    a.event = event;
    let r = call!(api, PJRT_Event_Await, a);
    destroy_event(api, event);
    r
}

pub fn put_f32(
    api: Api,
    client: *mut sys::PJRT_Client,
    device: *mut sys::PJRT_Device,
    data: &[f32],
    dims: &[i64],
) -> CallResult<*mut sys::PJRT_Buffer> {
    let mut a: sys::PJRT_Client_BufferFromHostBuffer_Args =
        new_args(sys::PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE);
    a.client = client;
    a.data = data.as_ptr().cast();
    a.r#type = sys::PJRT_Buffer_Type_F32;
    a.dims = dims.as_ptr();
    a.num_dims = dims.len();
    a.host_buffer_semantics = sys::PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
    a.device = device;
    call!(api, PJRT_Client_BufferFromHostBuffer, a)?;
    await_event(api, a.done_with_host_buffer)?;
    Ok(a.buffer)
}

pub fn to_host(api: Api, buffer: *mut sys::PJRT_Buffer) -> CallResult<Vec<u8>> {
    let mut a: sys::PJRT_Buffer_ToHostBuffer_Args =
        new_args(sys::PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE);
    a.src = buffer;
    call!(api, PJRT_Buffer_ToHostBuffer, a)?;
    let mut out = vec![0u8; a.dst_size];
    a.dst = out.as_mut_ptr().cast();
    call!(api, PJRT_Buffer_ToHostBuffer, a)?;
    await_event(api, a.event)?;
    Ok(out)
}

pub fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

pub fn destroy_buffer(api: Api, buffer: *mut sys::PJRT_Buffer) {
    let mut a: sys::PJRT_Buffer_Destroy_Args = new_args(sys::PJRT_Buffer_Destroy_Args_STRUCT_SIZE);
    a.buffer = buffer;
    call!(api, PJRT_Buffer_Destroy, a).unwrap();
}

/// A serialized CompileOptionsProto with the given counts and device_ordinal -1.
pub fn compile_options(replicas: u8, partitions: u8) -> Vec<u8> {
    let mut build = vec![0x08];
    build.extend_from_slice(&[0xff; 9]);
    build.push(0x01);
    build.extend_from_slice(&[0x20, replicas, 0x28, partitions]);
    let mut out = vec![0x1a, build.len() as u8];
    out.extend_from_slice(&build);
    out
}

pub const ADD_ONE: &str = r#"module @jit_add_one {
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>) {
    %0 = stablehlo.constant dense<1.0> : tensor<4xf32>
    %1 = stablehlo.add %arg0, %0 : tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}"#;

pub fn compile(
    api: Api,
    client: *mut sys::PJRT_Client,
    code: &str,
    options: &[u8],
) -> CallResult<*mut sys::PJRT_LoadedExecutable> {
    let mut program: sys::PJRT_Program = new_args(sys::PJRT_Program_STRUCT_SIZE);
    program.code = code.as_ptr().cast_mut().cast();
    program.code_size = code.len();
    program.format = c"mlir".as_ptr();
    program.format_size = 4;
    let mut a: sys::PJRT_Client_Compile_Args = new_args(sys::PJRT_Client_Compile_Args_STRUCT_SIZE);
    a.client = client;
    a.program = &program;
    a.compile_options = options.as_ptr().cast();
    a.compile_options_size = options.len();
    call!(api, PJRT_Client_Compile, a)?;
    Ok(a.executable)
}

pub fn destroy_loaded(api: Api, exe: *mut sys::PJRT_LoadedExecutable) {
    let mut a: sys::PJRT_LoadedExecutable_Destroy_Args =
        new_args(sys::PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE);
    a.executable = exe;
    call!(api, PJRT_LoadedExecutable_Destroy, a).unwrap();
}

/// Executes with one argument list per device; returns the outputs (one per device).
pub fn execute(
    api: Api,
    exe: *mut sys::PJRT_LoadedExecutable,
    args: &[Vec<*mut sys::PJRT_Buffer>],
) -> CallResult<Vec<*mut sys::PJRT_Buffer>> {
    let mut options: sys::PJRT_ExecuteOptions = new_args(sys::PJRT_ExecuteOptions_STRUCT_SIZE);
    let lists: Vec<*const *mut sys::PJRT_Buffer> = args.iter().map(|l| l.as_ptr()).collect();
    let mut outs: Vec<[*mut sys::PJRT_Buffer; 1]> = vec![[std::ptr::null_mut()]; args.len()];
    let out_lists: Vec<*mut *mut sys::PJRT_Buffer> =
        outs.iter_mut().map(|o| o.as_mut_ptr()).collect();
    let mut events: Vec<*mut sys::PJRT_Event> = vec![std::ptr::null_mut(); args.len()];
    let mut a: sys::PJRT_LoadedExecutable_Execute_Args =
        new_args(sys::PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE);
    a.executable = exe;
    a.options = &mut options;
    a.argument_lists = lists.as_ptr();
    a.num_devices = args.len();
    a.num_args = args.first().map_or(0, Vec::len);
    a.output_lists = out_lists.as_ptr();
    a.device_complete_events = events.as_mut_ptr();
    call!(api, PJRT_LoadedExecutable_Execute, a)?;
    let mut first_err = Ok(());
    for e in events {
        let r = await_event(api, e);
        if first_err.is_ok() {
            first_err = r;
        }
    }
    let outs: Vec<*mut sys::PJRT_Buffer> = outs.into_iter().map(|o| o[0]).collect();
    if let Err(e) = first_err {
        for o in outs {
            destroy_buffer(api, o);
        }
        return Err(e);
    }
    Ok(outs)
}
