//! Safe wrappers over the individual C API entries rpjrt uses.
//!
//! Each function builds its args struct, calls through `pjrt!` and copies results out
//! into owned Rust values. Handle types are thin `Copy` wrappers around the C pointers;
//! the owning types in the rest of the crate decide when `*_destroy` is called.

// C `int`/`size_t` fields are cast explicitly so the code stays right where they differ.
#![allow(clippy::unnecessary_cast)]

use std::ffi::{c_char, c_void};
use std::ptr::null_mut;

use rpjrt_sys as sys;

use super::{args_types, pjrt, Api, Args};
use crate::error::{Error, Result};
use crate::value::Value;

args_types! {
    PJRT_Client_Create_Args => PJRT_Client_Create_Args_STRUCT_SIZE,
    PJRT_Client_Destroy_Args => PJRT_Client_Destroy_Args_STRUCT_SIZE,
    PJRT_Client_PlatformName_Args => PJRT_Client_PlatformName_Args_STRUCT_SIZE,
    PJRT_Client_PlatformVersion_Args => PJRT_Client_PlatformVersion_Args_STRUCT_SIZE,
    PJRT_Client_ProcessIndex_Args => PJRT_Client_ProcessIndex_Args_STRUCT_SIZE,
    PJRT_Client_Devices_Args => PJRT_Client_Devices_Args_STRUCT_SIZE,
    PJRT_Client_AddressableDevices_Args => PJRT_Client_AddressableDevices_Args_STRUCT_SIZE,
    PJRT_Client_LookupDevice_Args => PJRT_Client_LookupDevice_Args_STRUCT_SIZE,
    PJRT_Client_AddressableMemories_Args => PJRT_Client_AddressableMemories_Args_STRUCT_SIZE,
    PJRT_Client_Compile_Args => PJRT_Client_Compile_Args_STRUCT_SIZE,
    PJRT_Client_BufferFromHostBuffer_Args => PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE,
    PJRT_Program => PJRT_Program_STRUCT_SIZE,
    PJRT_Device_GetDescription_Args => PJRT_Device_GetDescription_Args_STRUCT_SIZE,
    PJRT_Device_IsAddressable_Args => PJRT_Device_IsAddressable_Args_STRUCT_SIZE,
    PJRT_Device_LocalHardwareId_Args => PJRT_Device_LocalHardwareId_Args_STRUCT_SIZE,
    PJRT_Device_AddressableMemories_Args => PJRT_Device_AddressableMemories_Args_STRUCT_SIZE,
    PJRT_Device_DefaultMemory_Args => PJRT_Device_DefaultMemory_Args_STRUCT_SIZE,
    PJRT_DeviceDescription_Id_Args => PJRT_DeviceDescription_Id_Args_STRUCT_SIZE,
    PJRT_DeviceDescription_ProcessIndex_Args => PJRT_DeviceDescription_ProcessIndex_Args_STRUCT_SIZE,
    PJRT_DeviceDescription_Attributes_Args => PJRT_DeviceDescription_Attributes_Args_STRUCT_SIZE,
    PJRT_DeviceDescription_Kind_Args => PJRT_DeviceDescription_Kind_Args_STRUCT_SIZE,
    PJRT_DeviceDescription_DebugString_Args => PJRT_DeviceDescription_DebugString_Args_STRUCT_SIZE,
    PJRT_DeviceDescription_ToString_Args => PJRT_DeviceDescription_ToString_Args_STRUCT_SIZE,
    PJRT_Memory_Id_Args => PJRT_Memory_Id_Args_STRUCT_SIZE,
    PJRT_Memory_Kind_Args => PJRT_Memory_Kind_Args_STRUCT_SIZE,
    PJRT_Memory_Kind_Id_Args => PJRT_Memory_Kind_Id_Args_STRUCT_SIZE,
    PJRT_Memory_DebugString_Args => PJRT_Memory_DebugString_Args_STRUCT_SIZE,
    PJRT_Memory_ToString_Args => PJRT_Memory_ToString_Args_STRUCT_SIZE,
    PJRT_Memory_AddressableByDevices_Args => PJRT_Memory_AddressableByDevices_Args_STRUCT_SIZE,
    PJRT_LoadedExecutable_Destroy_Args => PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE,
    PJRT_LoadedExecutable_GetExecutable_Args => PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE,
    PJRT_LoadedExecutable_AddressableDevices_Args => PJRT_LoadedExecutable_AddressableDevices_Args_STRUCT_SIZE,
    PJRT_LoadedExecutable_Delete_Args => PJRT_LoadedExecutable_Delete_Args_STRUCT_SIZE,
    PJRT_LoadedExecutable_Execute_Args => PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE,
    PJRT_ExecuteOptions => PJRT_ExecuteOptions_STRUCT_SIZE,
    PJRT_Executable_Destroy_Args => PJRT_Executable_Destroy_Args_STRUCT_SIZE,
    PJRT_Executable_Name_Args => PJRT_Executable_Name_Args_STRUCT_SIZE,
    PJRT_Executable_NumReplicas_Args => PJRT_Executable_NumReplicas_Args_STRUCT_SIZE,
    PJRT_Executable_NumPartitions_Args => PJRT_Executable_NumPartitions_Args_STRUCT_SIZE,
    PJRT_Executable_NumOutputs_Args => PJRT_Executable_NumOutputs_Args_STRUCT_SIZE,
    PJRT_Executable_OutputElementTypes_Args => PJRT_Executable_OutputElementTypes_Args_STRUCT_SIZE,
    PJRT_Executable_OutputDimensions_Args => PJRT_Executable_OutputDimensions_Args_STRUCT_SIZE,
    PJRT_Executable_Fingerprint_Args => PJRT_Executable_Fingerprint_Args_STRUCT_SIZE,
    PJRT_Executable_OptimizedProgram_Args => PJRT_Executable_OptimizedProgram_Args_STRUCT_SIZE,
    PJRT_Buffer_Destroy_Args => PJRT_Buffer_Destroy_Args_STRUCT_SIZE,
    PJRT_Buffer_ElementType_Args => PJRT_Buffer_ElementType_Args_STRUCT_SIZE,
    PJRT_Buffer_Dimensions_Args => PJRT_Buffer_Dimensions_Args_STRUCT_SIZE,
    PJRT_Buffer_OnDeviceSizeInBytes_Args => PJRT_Buffer_OnDeviceSizeInBytes_Args_STRUCT_SIZE,
    PJRT_Buffer_Device_Args => PJRT_Buffer_Device_Args_STRUCT_SIZE,
    PJRT_Buffer_Memory_Args => PJRT_Buffer_Memory_Args_STRUCT_SIZE,
    PJRT_Buffer_Delete_Args => PJRT_Buffer_Delete_Args_STRUCT_SIZE,
    PJRT_Buffer_IsDeleted_Args => PJRT_Buffer_IsDeleted_Args_STRUCT_SIZE,
    PJRT_Buffer_IsOnCpu_Args => PJRT_Buffer_IsOnCpu_Args_STRUCT_SIZE,
    PJRT_Buffer_ToHostBuffer_Args => PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE,
    PJRT_Buffer_ReadyEvent_Args => PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE,
    PJRT_Buffer_CopyToDevice_Args => PJRT_Buffer_CopyToDevice_Args_STRUCT_SIZE,
    PJRT_Buffer_CopyToMemory_Args => PJRT_Buffer_CopyToMemory_Args_STRUCT_SIZE,
    PJRT_Buffer_UnsafePointer_Args => PJRT_Buffer_UnsafePointer_Args_STRUCT_SIZE,
    PJRT_Buffer_GetMemoryLayout_Args => PJRT_Buffer_GetMemoryLayout_Args_STRUCT_SIZE,
    PJRT_Buffer_IncreaseExternalReferenceCount_Args => PJRT_Buffer_IncreaseExternalReferenceCount_Args_STRUCT_SIZE,
    PJRT_Buffer_DecreaseExternalReferenceCount_Args => PJRT_Buffer_DecreaseExternalReferenceCount_Args_STRUCT_SIZE,
    PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args => PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args_STRUCT_SIZE,
    PJRT_Event_Destroy_Args => PJRT_Event_Destroy_Args_STRUCT_SIZE,
    PJRT_Event_IsReady_Args => PJRT_Event_IsReady_Args_STRUCT_SIZE,
    PJRT_Event_Error_Args => PJRT_Event_Error_Args_STRUCT_SIZE,
    PJRT_Event_Await_Args => PJRT_Event_Await_Args_STRUCT_SIZE,
    PJRT_Event_OnReady_Args => PJRT_Event_OnReady_Args_STRUCT_SIZE,
}

macro_rules! handle {
    ($($(#[$doc:meta])* $name:ident($t:ident);)*) => {$(
        $(#[$doc])*
        ///
        /// `repr(transparent)`: a slice of these is an array of the C pointers.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(transparent)]
        pub(crate) struct $name(pub(crate) *mut sys::$t);
        impl Default for $name {
            /// The null handle (only ever a placeholder the plugin overwrites).
            fn default() -> Self {
                $name(null_mut())
            }
        }
        // SAFETY: PJRT handles are thread-safe objects by the C API's contract; this wrapper
        // is just the address and does not own anything by itself.
        unsafe impl Send for $name {}
        // SAFETY: as for Send.
        unsafe impl Sync for $name {}
    )*};
}

handle! {
    /// A `PJRT_Client*`.
    ClientPtr(PJRT_Client);
    /// A `PJRT_Device*` (owned by its client).
    DevicePtr(PJRT_Device);
    /// A `PJRT_Memory*` (owned by its client).
    MemoryPtr(PJRT_Memory);
    /// A `PJRT_Buffer*`.
    BufferPtr(PJRT_Buffer);
    /// A `PJRT_LoadedExecutable*`.
    LoadedPtr(PJRT_LoadedExecutable);
    /// A `PJRT_Executable*`.
    ExePtr(PJRT_Executable);
    /// A `PJRT_Event*`.
    EventPtr(PJRT_Event);
}

/// Copies a (pointer, length) string out of the plugin.
fn string(ptr: *const c_char, len: usize) -> String {
    if ptr.is_null() || len == 0 {
        return String::new();
    }
    // SAFETY: the plugin handed out this pointer/length pair; it stays valid at least until
    // the owning object is destroyed, which cannot happen during this copy.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    String::from_utf8_lossy(bytes).into_owned()
}

/// Copies a (pointer, length) array out of the plugin.
fn array<T: Copy>(ptr: *const T, len: usize) -> Vec<T> {
    if ptr.is_null() || len == 0 {
        return Vec::new();
    }
    // SAFETY: as in `string`: a live array owned by the plugin, read before any destroy.
    unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec()
}

/// Converts the plugin's named values into owned pairs.
fn read_named_values(ptr: *const sys::PJRT_NamedValue, len: usize) -> Vec<(String, Value)> {
    let mut out = Vec::with_capacity(len);
    for nv in array(ptr, len) {
        let name = string(nv.name, nv.name_size);
        // SAFETY: `type_` says which union member is live; array members point to
        // `value_size` elements owned by the plugin.
        let value = unsafe {
            match nv.r#type {
                sys::PJRT_NamedValue_kString => {
                    Value::String(string(nv.value.string_value, nv.value_size))
                }
                sys::PJRT_NamedValue_kInt64 => Value::Int64(nv.value.int64_value),
                sys::PJRT_NamedValue_kInt64List => {
                    Value::Int64List(array(nv.value.int64_array_value, nv.value_size))
                }
                sys::PJRT_NamedValue_kFloat => Value::Float(nv.value.float_value),
                sys::PJRT_NamedValue_kBool => Value::Bool(nv.value.bool_value),
                other => Value::String(format!("<unknown value kind {other}>")),
            }
        };
        out.push((name, value));
    }
    out
}

/// Named values prepared for a call: the structs plus the storage they point into.
pub(crate) struct NamedValues {
    values: Vec<sys::PJRT_NamedValue>,
    _strings: Vec<Vec<u8>>,
}

impl NamedValues {
    /// Builds C named values that borrow from `options` (which must outlive the result).
    pub(crate) fn new(options: &[(String, Value)]) -> NamedValues {
        let mut values = Vec::with_capacity(options.len());
        for (name, value) in options {
            let mut nv = sys::PJRT_NamedValue::new();
            nv.name = name.as_ptr().cast();
            nv.name_size = name.len();
            match value {
                Value::String(s) => {
                    nv.r#type = sys::PJRT_NamedValue_kString;
                    nv.value.string_value = s.as_ptr().cast();
                    nv.value_size = s.len();
                }
                Value::Int64(v) => {
                    nv.r#type = sys::PJRT_NamedValue_kInt64;
                    nv.value.int64_value = *v;
                    nv.value_size = 1;
                }
                Value::Int64List(v) => {
                    nv.r#type = sys::PJRT_NamedValue_kInt64List;
                    nv.value.int64_array_value = v.as_ptr();
                    nv.value_size = v.len();
                }
                Value::Float(v) => {
                    nv.r#type = sys::PJRT_NamedValue_kFloat;
                    nv.value.float_value = *v;
                    nv.value_size = 1;
                }
                Value::Bool(v) => {
                    nv.r#type = sys::PJRT_NamedValue_kBool;
                    nv.value.bool_value = *v;
                    nv.value_size = 1;
                }
            }
            values.push(nv);
        }
        NamedValues {
            values,
            _strings: Vec::new(),
        }
    }
}

// ---------------------------------------------------------------------------------- plugin

/// `PJRT_Plugin_Initialize`.
pub(crate) fn plugin_initialize(api: &Api) -> Result<()> {
    let mut a = sys::PJRT_Plugin_Initialize_Args::new();
    // SAFETY: no pointers in the args.
    unsafe { pjrt!(api, PJRT_Plugin_Initialize, &mut a) }
}

/// `PJRT_Plugin_Attributes`.
pub(crate) fn plugin_attributes(api: &Api) -> Result<Vec<(String, Value)>> {
    let mut a = sys::PJRT_Plugin_Attributes_Args::new();
    // SAFETY: out-parameters only.
    unsafe { pjrt!(api, PJRT_Plugin_Attributes, &mut a) }?;
    Ok(read_named_values(a.attributes, a.num_attributes))
}

// ---------------------------------------------------------------------------------- client

/// `PJRT_Client_Create` with the given create options and no KV store.
pub(crate) fn client_create(api: &Api, options: &[(String, Value)]) -> Result<ClientPtr> {
    let nvs = NamedValues::new(options);
    let mut a = sys::PJRT_Client_Create_Args::new();
    a.create_options = nvs.values.as_ptr();
    a.num_options = nvs.values.len();
    // SAFETY: the named values and the strings they point to live until after the call.
    unsafe { pjrt!(api, PJRT_Client_Create, &mut a) }?;
    if a.client.is_null() {
        return Err(Error::invalid("PJRT_Client_Create returned no client"));
    }
    Ok(ClientPtr(a.client))
}

/// `PJRT_Client_Destroy`.
pub(crate) fn client_destroy(api: &Api, c: ClientPtr) -> Result<()> {
    let mut a = sys::PJRT_Client_Destroy_Args::new();
    a.client = c.0;
    // SAFETY: `c` is live and every object of this client was destroyed before (ownership
    // by Arc parents guarantees it).
    unsafe { pjrt!(api, PJRT_Client_Destroy, &mut a) }
}

/// `PJRT_Client_PlatformName`.
pub(crate) fn client_platform_name(api: &Api, c: ClientPtr) -> Result<String> {
    let mut a = sys::PJRT_Client_PlatformName_Args::new();
    a.client = c.0;
    // SAFETY: live client.
    unsafe { pjrt!(api, PJRT_Client_PlatformName, &mut a) }?;
    Ok(string(a.platform_name, a.platform_name_size))
}

/// `PJRT_Client_PlatformVersion`.
pub(crate) fn client_platform_version(api: &Api, c: ClientPtr) -> Result<String> {
    let mut a = sys::PJRT_Client_PlatformVersion_Args::new();
    a.client = c.0;
    // SAFETY: live client.
    unsafe { pjrt!(api, PJRT_Client_PlatformVersion, &mut a) }?;
    Ok(string(a.platform_version, a.platform_version_size))
}

/// `PJRT_Client_ProcessIndex`.
pub(crate) fn client_process_index(api: &Api, c: ClientPtr) -> Result<i32> {
    let mut a = sys::PJRT_Client_ProcessIndex_Args::new();
    a.client = c.0;
    // SAFETY: live client.
    unsafe { pjrt!(api, PJRT_Client_ProcessIndex, &mut a) }?;
    Ok(a.process_index as i32)
}

/// `PJRT_Client_Devices`.
pub(crate) fn client_devices(api: &Api, c: ClientPtr) -> Result<Vec<DevicePtr>> {
    let mut a = sys::PJRT_Client_Devices_Args::new();
    a.client = c.0;
    // SAFETY: live client.
    unsafe { pjrt!(api, PJRT_Client_Devices, &mut a) }?;
    Ok(array(a.devices, a.num_devices)
        .into_iter()
        .map(DevicePtr)
        .collect())
}

/// `PJRT_Client_AddressableDevices`.
pub(crate) fn client_addressable_devices(api: &Api, c: ClientPtr) -> Result<Vec<DevicePtr>> {
    let mut a = sys::PJRT_Client_AddressableDevices_Args::new();
    a.client = c.0;
    // SAFETY: live client.
    unsafe { pjrt!(api, PJRT_Client_AddressableDevices, &mut a) }?;
    Ok(array(a.addressable_devices, a.num_addressable_devices)
        .into_iter()
        .map(DevicePtr)
        .collect())
}

/// `PJRT_Client_AddressableMemories`.
pub(crate) fn client_addressable_memories(api: &Api, c: ClientPtr) -> Result<Vec<MemoryPtr>> {
    let mut a = sys::PJRT_Client_AddressableMemories_Args::new();
    a.client = c.0;
    // SAFETY: live client.
    unsafe { pjrt!(api, PJRT_Client_AddressableMemories, &mut a) }?;
    Ok(array(a.addressable_memories, a.num_addressable_memories)
        .into_iter()
        .map(MemoryPtr)
        .collect())
}

/// `PJRT_Client_Compile` of `code` in `format` ("mlir" or "hlo").
pub(crate) fn client_compile(
    api: &Api,
    c: ClientPtr,
    code: &[u8],
    format: &str,
    options: &[u8],
) -> Result<LoadedPtr> {
    let mut program = sys::PJRT_Program::new();
    program.code = code.as_ptr() as *mut c_char;
    program.code_size = code.len();
    program.format = format.as_ptr().cast();
    program.format_size = format.len();
    let mut a = sys::PJRT_Client_Compile_Args::new();
    a.client = c.0;
    a.program = &program;
    a.compile_options = options.as_ptr().cast();
    a.compile_options_size = options.len();
    // SAFETY: program, code, format and options outlive the call; the plugin only reads code.
    unsafe { pjrt!(api, PJRT_Client_Compile, &mut a) }?;
    if a.executable.is_null() {
        return Err(Error::invalid("PJRT_Client_Compile returned no executable"));
    }
    Ok(LoadedPtr(a.executable))
}

/// How the plugin may use host memory passed to `buffer_from_host`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HostSemantics {
    /// Copied before the call returns.
    CopyDuringCall,
    /// Used in place; must stay alive and unchanged until the buffer is gone.
    ZeroCopy,
}

/// `PJRT_Client_BufferFromHostBuffer`. Returns the buffer and the done-with-host event.
///
/// # Safety
/// `data` must point to a host buffer that holds every byte `dims`, `ty` and `strides`
/// address, alive for as long as `semantics` requires.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn buffer_from_host(
    api: &Api,
    c: ClientPtr,
    data: *const u8,
    ty: i32,
    dims: &[i64],
    byte_strides: Option<&[i64]>,
    semantics: HostSemantics,
    device: DevicePtr,
    memory: Option<MemoryPtr>,
) -> Result<(BufferPtr, Option<EventPtr>)> {
    let mut a = sys::PJRT_Client_BufferFromHostBuffer_Args::new();
    a.client = c.0;
    a.data = data.cast();
    a.r#type = ty as _;
    a.dims = dims.as_ptr();
    a.num_dims = dims.len();
    if let Some(s) = byte_strides {
        a.byte_strides = s.as_ptr();
        a.num_byte_strides = s.len();
    }
    a.host_buffer_semantics = match semantics {
        HostSemantics::CopyDuringCall => sys::PJRT_HostBufferSemantics_kImmutableOnlyDuringCall,
        HostSemantics::ZeroCopy => sys::PJRT_HostBufferSemantics_kImmutableZeroCopy,
    };
    match memory {
        Some(m) => a.memory = m.0,
        None => a.device = device.0,
    }
    // SAFETY: forwarded to the caller's contract; dims/strides outlive the call.
    unsafe { pjrt!(api, PJRT_Client_BufferFromHostBuffer, &mut a) }?;
    let done = (!a.done_with_host_buffer.is_null()).then_some(EventPtr(a.done_with_host_buffer));
    Ok((BufferPtr(a.buffer), done))
}

// ---------------------------------------------------------------------------------- device

fn description(api: &Api, d: DevicePtr) -> Result<*mut sys::PJRT_DeviceDescription> {
    let mut a = sys::PJRT_Device_GetDescription_Args::new();
    a.device = d.0;
    // SAFETY: live device of a live client.
    unsafe { pjrt!(api, PJRT_Device_GetDescription, &mut a) }?;
    Ok(a.device_description)
}

/// Everything a device describes about itself, read once.
#[derive(Clone, Debug)]
pub(crate) struct DeviceFacts {
    pub id: i32,
    pub process_index: i32,
    pub kind: String,
    pub debug_string: String,
    pub to_string: String,
    pub attributes: Vec<(String, Value)>,
    pub is_addressable: bool,
    pub local_hardware_id: i32,
}

/// Reads a device's description and properties.
pub(crate) fn device_facts(api: &Api, d: DevicePtr) -> Result<DeviceFacts> {
    let desc = description(api, d)?;
    let mut id = sys::PJRT_DeviceDescription_Id_Args::new();
    id.device_description = desc;
    let mut pi = sys::PJRT_DeviceDescription_ProcessIndex_Args::new();
    pi.device_description = desc;
    let mut kind = sys::PJRT_DeviceDescription_Kind_Args::new();
    kind.device_description = desc;
    let mut dbg = sys::PJRT_DeviceDescription_DebugString_Args::new();
    dbg.device_description = desc;
    let mut ts = sys::PJRT_DeviceDescription_ToString_Args::new();
    ts.device_description = desc;
    let mut at = sys::PJRT_DeviceDescription_Attributes_Args::new();
    at.device_description = desc;
    let mut addr = sys::PJRT_Device_IsAddressable_Args::new();
    addr.device = d.0;
    // SAFETY: `desc` and `d` are live; outputs are read below while they stay live.
    unsafe {
        pjrt!(api, PJRT_DeviceDescription_Id, &mut id)?;
        pjrt!(api, PJRT_DeviceDescription_ProcessIndex, &mut pi)?;
        pjrt!(api, PJRT_DeviceDescription_Kind, &mut kind)?;
        pjrt!(api, PJRT_DeviceDescription_DebugString, &mut dbg)?;
        pjrt!(api, PJRT_DeviceDescription_ToString, &mut ts)?;
        pjrt!(api, PJRT_DeviceDescription_Attributes, &mut at)?;
        pjrt!(api, PJRT_Device_IsAddressable, &mut addr)?;
    }
    let local_hardware_id = if addr.is_addressable {
        let mut hw = sys::PJRT_Device_LocalHardwareId_Args::new();
        hw.device = d.0;
        // SAFETY: live device.
        unsafe { pjrt!(api, PJRT_Device_LocalHardwareId, &mut hw) }
            .map(|()| hw.local_hardware_id as i32)
            .unwrap_or(-1)
    } else {
        -1
    };
    Ok(DeviceFacts {
        id: id.id as i32,
        process_index: pi.process_index as i32,
        kind: string(kind.device_kind, kind.device_kind_size),
        debug_string: string(dbg.debug_string, dbg.debug_string_size),
        to_string: string(ts.to_string, ts.to_string_size),
        attributes: read_named_values(at.attributes, at.num_attributes),
        is_addressable: addr.is_addressable,
        local_hardware_id,
    })
}

/// `PJRT_Device_AddressableMemories`.
pub(crate) fn device_memories(api: &Api, d: DevicePtr) -> Result<Vec<MemoryPtr>> {
    let mut a = sys::PJRT_Device_AddressableMemories_Args::new();
    a.device = d.0;
    // SAFETY: live device.
    unsafe { pjrt!(api, PJRT_Device_AddressableMemories, &mut a) }?;
    Ok(array(a.memories, a.num_memories)
        .into_iter()
        .map(MemoryPtr)
        .collect())
}

/// `PJRT_Device_DefaultMemory`.
pub(crate) fn device_default_memory(api: &Api, d: DevicePtr) -> Result<MemoryPtr> {
    let mut a = sys::PJRT_Device_DefaultMemory_Args::new();
    a.device = d.0;
    // SAFETY: live device.
    unsafe { pjrt!(api, PJRT_Device_DefaultMemory, &mut a) }?;
    Ok(MemoryPtr(a.memory))
}

// ---------------------------------------------------------------------------------- memory

/// Everything a memory space describes about itself, read once.
#[derive(Clone, Debug)]
pub(crate) struct MemoryFacts {
    pub id: i32,
    pub kind: String,
    pub kind_id: i32,
    pub debug_string: String,
    pub to_string: String,
}

/// Reads a memory space's properties.
pub(crate) fn memory_facts(api: &Api, m: MemoryPtr) -> Result<MemoryFacts> {
    let mut id = sys::PJRT_Memory_Id_Args::new();
    id.memory = m.0;
    let mut kind = sys::PJRT_Memory_Kind_Args::new();
    kind.memory = m.0;
    let mut kid = sys::PJRT_Memory_Kind_Id_Args::new();
    kid.memory = m.0;
    let mut dbg = sys::PJRT_Memory_DebugString_Args::new();
    dbg.memory = m.0;
    let mut ts = sys::PJRT_Memory_ToString_Args::new();
    ts.memory = m.0;
    // SAFETY: live memory of a live client.
    unsafe {
        pjrt!(api, PJRT_Memory_Id, &mut id)?;
        pjrt!(api, PJRT_Memory_Kind, &mut kind)?;
        pjrt!(api, PJRT_Memory_DebugString, &mut dbg)?;
        pjrt!(api, PJRT_Memory_ToString, &mut ts)?;
    }
    Ok(MemoryFacts {
        id: id.id as i32,
        kind: string(kind.kind, kind.kind_size),
        // Kind ids arrived after the other memory entries; -1 where the plugin lacks them.
        // SAFETY: live memory.
        kind_id: match unsafe { pjrt!(api, PJRT_Memory_Kind_Id, &mut kid) } {
            Ok(()) => kid.kind_id as i32,
            Err(_) => -1,
        },
        debug_string: string(dbg.debug_string, dbg.debug_string_size),
        to_string: string(ts.to_string, ts.to_string_size),
    })
}

/// `PJRT_Memory_AddressableByDevices`.
pub(crate) fn memory_devices(api: &Api, m: MemoryPtr) -> Result<Vec<DevicePtr>> {
    let mut a = sys::PJRT_Memory_AddressableByDevices_Args::new();
    a.memory = m.0;
    // SAFETY: live memory.
    unsafe { pjrt!(api, PJRT_Memory_AddressableByDevices, &mut a) }?;
    Ok(array(a.devices, a.num_devices)
        .into_iter()
        .map(DevicePtr)
        .collect())
}

// ---------------------------------------------------------------------------------- executable

/// `PJRT_LoadedExecutable_Destroy`.
pub(crate) fn loaded_destroy(api: &Api, e: LoadedPtr) -> Result<()> {
    let mut a = sys::PJRT_LoadedExecutable_Destroy_Args::new();
    a.executable = e.0;
    // SAFETY: live executable, destroyed once by its owner.
    unsafe { pjrt!(api, PJRT_LoadedExecutable_Destroy, &mut a) }
}

/// `PJRT_LoadedExecutable_Delete`.
pub(crate) fn loaded_delete(api: &Api, e: LoadedPtr) -> Result<()> {
    let mut a = sys::PJRT_LoadedExecutable_Delete_Args::new();
    a.executable = e.0;
    // SAFETY: live executable.
    unsafe { pjrt!(api, PJRT_LoadedExecutable_Delete, &mut a) }
}

/// `PJRT_LoadedExecutable_GetExecutable`.
pub(crate) fn loaded_get_executable(api: &Api, e: LoadedPtr) -> Result<ExePtr> {
    let mut a = sys::PJRT_LoadedExecutable_GetExecutable_Args::new();
    a.loaded_executable = e.0;
    // SAFETY: live executable.
    unsafe { pjrt!(api, PJRT_LoadedExecutable_GetExecutable, &mut a) }?;
    Ok(ExePtr(a.executable))
}

/// `PJRT_LoadedExecutable_AddressableDevices`.
pub(crate) fn loaded_devices(api: &Api, e: LoadedPtr) -> Result<Vec<DevicePtr>> {
    let mut a = sys::PJRT_LoadedExecutable_AddressableDevices_Args::new();
    a.executable = e.0;
    // SAFETY: live executable.
    unsafe { pjrt!(api, PJRT_LoadedExecutable_AddressableDevices, &mut a) }?;
    Ok(array(a.addressable_devices, a.num_addressable_devices)
        .into_iter()
        .map(DevicePtr)
        .collect())
}

/// `PJRT_Executable_Destroy`.
pub(crate) fn exe_destroy(api: &Api, e: ExePtr) -> Result<()> {
    let mut a = sys::PJRT_Executable_Destroy_Args::new();
    a.executable = e.0;
    // SAFETY: live executable, destroyed once by its owner.
    unsafe { pjrt!(api, PJRT_Executable_Destroy, &mut a) }
}

/// Facts about a compiled executable, read once after compiling.
#[derive(Clone, Debug)]
pub(crate) struct ExeFacts {
    pub name: String,
    pub num_replicas: usize,
    pub num_partitions: usize,
    pub num_outputs: usize,
    pub output_types: Vec<i32>,
    pub output_dims: Vec<Vec<i64>>,
}

/// Reads name, replica/partition/output counts and output types and shapes.
pub(crate) fn exe_facts(api: &Api, e: ExePtr) -> Result<ExeFacts> {
    let mut name = sys::PJRT_Executable_Name_Args::new();
    name.executable = e.0;
    let mut nr = sys::PJRT_Executable_NumReplicas_Args::new();
    nr.executable = e.0;
    let mut np = sys::PJRT_Executable_NumPartitions_Args::new();
    np.executable = e.0;
    let mut no = sys::PJRT_Executable_NumOutputs_Args::new();
    no.executable = e.0;
    // SAFETY: live executable; outputs copied out below.
    unsafe {
        pjrt!(api, PJRT_Executable_Name, &mut name)?;
        pjrt!(api, PJRT_Executable_NumReplicas, &mut nr)?;
        pjrt!(api, PJRT_Executable_NumPartitions, &mut np)?;
        pjrt!(api, PJRT_Executable_NumOutputs, &mut no)?;
    }
    let mut ty = sys::PJRT_Executable_OutputElementTypes_Args::new();
    ty.executable = e.0;
    // SAFETY: live executable.
    unsafe { pjrt!(api, PJRT_Executable_OutputElementTypes, &mut ty) }?;
    let output_types: Vec<i32> = array(ty.output_types, ty.num_output_types)
        .into_iter()
        .map(|t| t as i32)
        .collect();
    let mut dims = sys::PJRT_Executable_OutputDimensions_Args::new();
    dims.executable = e.0;
    // SAFETY: live executable.
    unsafe { pjrt!(api, PJRT_Executable_OutputDimensions, &mut dims) }?;
    let ranks = array(dims.dim_sizes, dims.num_outputs);
    let total: usize = ranks.iter().sum();
    let flat = array(dims.dims, total);
    let mut output_dims = Vec::with_capacity(ranks.len());
    let mut at = 0;
    for r in ranks {
        output_dims.push(flat[at..at + r].to_vec());
        at += r;
    }
    Ok(ExeFacts {
        name: string(name.executable_name, name.executable_name_size),
        num_replicas: nr.num_replicas,
        num_partitions: np.num_partitions,
        num_outputs: no.num_outputs,
        output_types,
        output_dims,
    })
}

/// `PJRT_Executable_Fingerprint`.
pub(crate) fn exe_fingerprint(api: &Api, e: ExePtr) -> Result<String> {
    let mut a = sys::PJRT_Executable_Fingerprint_Args::new();
    a.executable = e.0;
    // SAFETY: live executable.
    unsafe { pjrt!(api, PJRT_Executable_Fingerprint, &mut a) }?;
    Ok(string(
        a.executable_fingerprint,
        a.executable_fingerprint_size,
    ))
}

/// `PJRT_Executable_OptimizedProgram`: the compiled module and its format.
pub(crate) fn exe_optimized_program(api: &Api, e: ExePtr) -> Result<(Vec<u8>, String)> {
    let mut program = sys::PJRT_Program::new();
    let mut a = sys::PJRT_Executable_OptimizedProgram_Args::new();
    a.executable = e.0;
    a.program = &mut program;
    // SAFETY: first call with a null code pointer asks only for the size.
    unsafe { pjrt!(api, PJRT_Executable_OptimizedProgram, &mut a) }?;
    let mut code = vec![0u8; program.code_size];
    program.code = code.as_mut_ptr().cast();
    // SAFETY: second call writes `code_size` bytes into our buffer of that size.
    unsafe { pjrt!(api, PJRT_Executable_OptimizedProgram, &mut a) }?;
    let format = string(program.format, program.format_size);
    code.truncate(program.code_size);
    Ok((code, format))
}

/// Execute-call inputs prepared by the caller: one argument list per device.
pub(crate) struct ExecuteRequest<'a> {
    pub args: &'a [Vec<BufferPtr>],
    pub non_donatable: &'a [i64],
    pub device: Option<DevicePtr>,
    pub num_outputs: usize,
    pub want_events: bool,
    /// `PJRT_ExecuteOptions.context` (custom-call user data); null for none.
    pub context: *mut c_void,
}

/// `PJRT_LoadedExecutable_Execute`: returns per-device outputs and completion events.
///
/// # Safety
/// Every buffer in `req.args` must be live and not deleted.
pub(crate) unsafe fn execute(
    api: &Api,
    e: LoadedPtr,
    req: &ExecuteRequest<'_>,
) -> Result<(Vec<Vec<BufferPtr>>, Vec<EventPtr>)> {
    let num_devices = req.args.len();
    let num_args = req.args.first().map_or(0, |a| a.len());
    let arg_lists: Vec<*const *mut sys::PJRT_Buffer> =
        req.args.iter().map(|l| l.as_ptr().cast()).collect();
    let mut outputs: Vec<Vec<*mut sys::PJRT_Buffer>> = (0..num_devices)
        .map(|_| vec![null_mut(); req.num_outputs])
        .collect();
    let output_lists: Vec<*mut *mut sys::PJRT_Buffer> =
        outputs.iter_mut().map(|o| o.as_mut_ptr()).collect();
    let mut events: Vec<*mut sys::PJRT_Event> = vec![null_mut(); num_devices];
    let mut options = sys::PJRT_ExecuteOptions::new();
    options.non_donatable_input_indices = req.non_donatable.as_ptr();
    options.num_non_donatable_input_indices = req.non_donatable.len();
    options.context = req.context.cast();
    let mut a = sys::PJRT_LoadedExecutable_Execute_Args::new();
    a.executable = e.0;
    a.options = &mut options;
    a.argument_lists = arg_lists.as_ptr();
    a.num_devices = num_devices;
    a.num_args = num_args;
    a.output_lists = output_lists.as_ptr();
    if req.want_events {
        a.device_complete_events = events.as_mut_ptr();
    }
    a.execute_device = req.device.map_or(null_mut(), |d| d.0);
    // SAFETY: all arrays live until after the call and have the sizes given; buffers are
    // live per the caller's contract; output arrays have room for `num_outputs` each.
    unsafe { pjrt!(api, PJRT_LoadedExecutable_Execute, &mut a) }?;
    let outs = outputs
        .into_iter()
        .map(|o| o.into_iter().map(BufferPtr).collect())
        .collect();
    let evs = events
        .into_iter()
        .filter(|e| !e.is_null())
        .map(EventPtr)
        .collect();
    Ok((outs, evs))
}

/// `execute` for arguments the caller has checked: every buffer belongs to this client,
/// is not deleted, and the client is open (the public `Executable` checks all three).
pub(crate) fn execute_checked(
    api: &Api,
    e: LoadedPtr,
    req: &ExecuteRequest<'_>,
) -> Result<(Vec<Vec<BufferPtr>>, Vec<EventPtr>)> {
    // SAFETY: the caller checked that each buffer is live and not deleted; the owning
    // `Buffer`s are borrowed for the duration of this call.
    unsafe { execute(api, e, req) }
}

/// Inputs of a single-device execution, prepared by the caller without allocating.
pub(crate) struct ExecuteOne<'a> {
    /// The argument buffers.
    pub args: &'a [BufferPtr],
    /// Argument positions the execution must not consume.
    pub non_donatable: &'a [i64],
    /// The device to run a portable executable on; `None` for the executable's own.
    pub device: Option<DevicePtr>,
    /// Receives the outputs; its length is the executable's output count.
    pub outputs: &'a mut [BufferPtr],
    /// Whether to ask for the completion event.
    pub want_event: bool,
    /// `PJRT_ExecuteOptions.context` (custom-call user data); null for none.
    pub context: *mut c_void,
}

/// `PJRT_LoadedExecutable_Execute` on one device, writing the outputs into `req.outputs`;
/// returns the completion event when asked for and the plugin gave one.
///
/// Same contract as [`execute_checked`]: the caller has checked that every buffer belongs to
/// this client, is not deleted, and that the client is open, and borrows the owning
/// `Buffer`s for the duration of this call.
pub(crate) fn execute_one_checked(
    api: &Api,
    e: LoadedPtr,
    req: &mut ExecuteOne<'_>,
) -> Result<Option<EventPtr>> {
    let arg_list: *const *mut sys::PJRT_Buffer = req.args.as_ptr().cast();
    let output_list: *mut *mut sys::PJRT_Buffer = req.outputs.as_mut_ptr().cast();
    let mut event: *mut sys::PJRT_Event = null_mut();
    let mut options = sys::PJRT_ExecuteOptions::new();
    options.non_donatable_input_indices = req.non_donatable.as_ptr();
    options.num_non_donatable_input_indices = req.non_donatable.len();
    options.context = req.context.cast();
    let mut a = sys::PJRT_LoadedExecutable_Execute_Args::new();
    a.executable = e.0;
    a.options = &mut options;
    a.argument_lists = &arg_list;
    a.num_devices = 1;
    a.num_args = req.args.len();
    a.output_lists = &output_list;
    if req.want_event {
        a.device_complete_events = &mut event;
    }
    a.execute_device = req.device.map_or(null_mut(), |d| d.0);
    // SAFETY: `BufferPtr` is `repr(transparent)` over the C pointer, so the slices are C
    // arrays of the stated lengths; all of them and `options` outlive the call; the output
    // array has room for the executable's outputs; the argument buffers are live and not
    // deleted, as the caller checked, and stay borrowed for the call.
    unsafe { pjrt!(api, PJRT_LoadedExecutable_Execute, &mut a) }?;
    Ok((!event.is_null()).then_some(EventPtr(event)))
}

// ---------------------------------------------------------------------------------- buffer

/// `PJRT_Buffer_Destroy`.
pub(crate) fn buffer_destroy(api: &Api, b: BufferPtr) -> Result<()> {
    let mut a = sys::PJRT_Buffer_Destroy_Args::new();
    a.buffer = b.0;
    // SAFETY: live buffer, destroyed once by its owner.
    unsafe { pjrt!(api, PJRT_Buffer_Destroy, &mut a) }
}

/// `PJRT_Buffer_Delete`.
pub(crate) fn buffer_delete(api: &Api, b: BufferPtr) -> Result<()> {
    let mut a = sys::PJRT_Buffer_Delete_Args::new();
    a.buffer = b.0;
    // SAFETY: live buffer.
    unsafe { pjrt!(api, PJRT_Buffer_Delete, &mut a) }
}

/// `PJRT_Buffer_OnDeviceSizeInBytes`.
pub(crate) fn buffer_on_device_size(api: &Api, b: BufferPtr) -> Result<usize> {
    let mut a = sys::PJRT_Buffer_OnDeviceSizeInBytes_Args::new();
    a.buffer = b.0;
    // SAFETY: live buffer.
    unsafe { pjrt!(api, PJRT_Buffer_OnDeviceSizeInBytes, &mut a) }?;
    Ok(a.on_device_size_in_bytes)
}

/// `PJRT_Buffer_Device`.
pub(crate) fn buffer_device(api: &Api, b: BufferPtr) -> Result<DevicePtr> {
    let mut a = sys::PJRT_Buffer_Device_Args::new();
    a.buffer = b.0;
    // SAFETY: live buffer.
    unsafe { pjrt!(api, PJRT_Buffer_Device, &mut a) }?;
    Ok(DevicePtr(a.device))
}

/// `PJRT_Buffer_Memory`.
pub(crate) fn buffer_memory(api: &Api, b: BufferPtr) -> Result<MemoryPtr> {
    let mut a = sys::PJRT_Buffer_Memory_Args::new();
    a.buffer = b.0;
    // SAFETY: live buffer.
    unsafe { pjrt!(api, PJRT_Buffer_Memory, &mut a) }?;
    Ok(MemoryPtr(a.memory))
}

/// `PJRT_Buffer_IsOnCpu`.
pub(crate) fn buffer_is_on_cpu(api: &Api, b: BufferPtr) -> Result<bool> {
    let mut a = sys::PJRT_Buffer_IsOnCpu_Args::new();
    a.buffer = b.0;
    // SAFETY: live buffer.
    unsafe { pjrt!(api, PJRT_Buffer_IsOnCpu, &mut a) }?;
    Ok(a.is_on_cpu)
}

/// `PJRT_Buffer_UnsafePointer`: the address of the buffer's storage.
pub(crate) fn buffer_unsafe_pointer(api: &Api, b: BufferPtr) -> Result<usize> {
    let mut a = sys::PJRT_Buffer_UnsafePointer_Args::new();
    a.buffer = b.0;
    // SAFETY: live buffer.
    unsafe { pjrt!(api, PJRT_Buffer_UnsafePointer, &mut a) }?;
    Ok(a.buffer_pointer as usize)
}

/// `PJRT_Buffer_IncreaseExternalReferenceCount`.
pub(crate) fn buffer_increase_external_ref(api: &Api, b: BufferPtr) -> Result<()> {
    let mut a = sys::PJRT_Buffer_IncreaseExternalReferenceCount_Args::new();
    a.buffer = b.0;
    // SAFETY: live buffer.
    unsafe { pjrt!(api, PJRT_Buffer_IncreaseExternalReferenceCount, &mut a) }
}

/// `PJRT_Buffer_DecreaseExternalReferenceCount`.
pub(crate) fn buffer_decrease_external_ref(api: &Api, b: BufferPtr) -> Result<()> {
    let mut a = sys::PJRT_Buffer_DecreaseExternalReferenceCount_Args::new();
    a.buffer = b.0;
    // SAFETY: live buffer whose count we raised before.
    unsafe { pjrt!(api, PJRT_Buffer_DecreaseExternalReferenceCount, &mut a) }
}

/// `PJRT_Buffer_OpaqueDeviceMemoryDataPointer`.
pub(crate) fn buffer_device_pointer(api: &Api, b: BufferPtr) -> Result<usize> {
    let mut a = sys::PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args::new();
    a.buffer = b.0;
    // SAFETY: live buffer.
    unsafe { pjrt!(api, PJRT_Buffer_OpaqueDeviceMemoryDataPointer, &mut a) }?;
    Ok(a.device_memory_ptr as usize)
}

/// Minor-to-major order of a buffer's dense layout, when the plugin reports a tiled layout.
pub(crate) fn buffer_layout(api: &Api, b: BufferPtr) -> Result<Option<Vec<i64>>> {
    let mut a = sys::PJRT_Buffer_GetMemoryLayout_Args::new();
    a.buffer = b.0;
    // SAFETY: live buffer; the returned layout points into plugin storage owned by the buffer.
    unsafe { pjrt!(api, PJRT_Buffer_GetMemoryLayout, &mut a) }?;
    if a.layout.r#type != sys::PJRT_Buffer_MemoryLayout_Type_Tiled {
        return Ok(None);
    }
    // SAFETY: `type_` says the tiled member is live.
    let tiled = unsafe { a.layout.layout.tiled };
    Ok(Some(array(tiled.minor_to_major, tiled.minor_to_major_size)))
}

/// Whether a buffer's layout is dense row-major: not tiled, and `minor_to_major` is
/// `[rank-1, ..., 1, 0]`. `Ok(false)` for strided, tiled or other layouts.
pub(crate) fn buffer_layout_is_row_major(api: &Api, b: BufferPtr) -> Result<bool> {
    let mut a = sys::PJRT_Buffer_GetMemoryLayout_Args::new();
    a.buffer = b.0;
    // SAFETY: live buffer; the returned layout points into plugin storage owned by the
    // buffer, read below while the buffer is alive.
    unsafe { pjrt!(api, PJRT_Buffer_GetMemoryLayout, &mut a) }?;
    if a.layout.r#type != sys::PJRT_Buffer_MemoryLayout_Type_Tiled {
        return Ok(false);
    }
    // SAFETY: `type_` says the tiled member is live.
    let tiled = unsafe { a.layout.layout.tiled };
    if tiled.num_tiles != 0 {
        return Ok(false);
    }
    let m2m = array(tiled.minor_to_major, tiled.minor_to_major_size);
    let n = m2m.len() as i64;
    Ok(m2m.iter().enumerate().all(|(i, &d)| d == n - 1 - i as i64))
}

/// `PJRT_Buffer_ToHostBuffer` into `dst`; returns the completion event.
///
/// # Safety
/// `dst` must stay alive and unaliased until the returned event completes.
pub(crate) unsafe fn buffer_to_host(
    api: &Api,
    b: BufferPtr,
    dst: *mut u8,
    dst_size: usize,
) -> Result<Option<EventPtr>> {
    let mut a = sys::PJRT_Buffer_ToHostBuffer_Args::new();
    a.src = b.0;
    a.dst = dst.cast::<c_void>();
    a.dst_size = dst_size;
    // SAFETY: forwarded to the caller.
    unsafe { pjrt!(api, PJRT_Buffer_ToHostBuffer, &mut a) }?;
    Ok((!a.event.is_null()).then_some(EventPtr(a.event)))
}

/// `PJRT_Buffer_ReadyEvent`.
pub(crate) fn buffer_ready_event(api: &Api, b: BufferPtr) -> Result<EventPtr> {
    let mut a = sys::PJRT_Buffer_ReadyEvent_Args::new();
    a.buffer = b.0;
    // SAFETY: live buffer.
    unsafe { pjrt!(api, PJRT_Buffer_ReadyEvent, &mut a) }?;
    Ok(EventPtr(a.event))
}

/// `PJRT_Buffer_CopyToDevice`.
pub(crate) fn buffer_copy_to_device(api: &Api, b: BufferPtr, d: DevicePtr) -> Result<BufferPtr> {
    let mut a = sys::PJRT_Buffer_CopyToDevice_Args::new();
    a.buffer = b.0;
    a.dst_device = d.0;
    // SAFETY: live buffer and device of the same client.
    unsafe { pjrt!(api, PJRT_Buffer_CopyToDevice, &mut a) }?;
    Ok(BufferPtr(a.dst_buffer))
}

/// `PJRT_Buffer_CopyToMemory`.
pub(crate) fn buffer_copy_to_memory(api: &Api, b: BufferPtr, m: MemoryPtr) -> Result<BufferPtr> {
    let mut a = sys::PJRT_Buffer_CopyToMemory_Args::new();
    a.buffer = b.0;
    a.dst_memory = m.0;
    // SAFETY: live buffer and memory of the same client.
    unsafe { pjrt!(api, PJRT_Buffer_CopyToMemory, &mut a) }?;
    Ok(BufferPtr(a.dst_buffer))
}

/// `buffer_from_host` with copy-during-call semantics over a checked slice.
///
/// The caller has checked (with `check_host_layout`) that `data` covers every byte that
/// `dims`, `ty` and `byte_strides` address.
#[allow(clippy::too_many_arguments)]
pub(crate) fn buffer_from_host_checked(
    api: &Api,
    c: ClientPtr,
    data: &[u8],
    ty: i32,
    dims: &[i64],
    byte_strides: Option<&[i64]>,
    device: DevicePtr,
    memory: Option<MemoryPtr>,
) -> Result<(BufferPtr, Option<EventPtr>)> {
    // SAFETY: the slice covers every addressed byte (checked by the caller) and the plugin
    // copies it before returning under CopyDuringCall.
    unsafe {
        buffer_from_host(
            api,
            c,
            data.as_ptr(),
            ty,
            dims,
            byte_strides,
            HostSemantics::CopyDuringCall,
            device,
            memory,
        )
    }
}

/// `buffer_from_host` with zero-copy semantics over memory that `owner` keeps alive.
///
/// The returned buffer must keep `owner` alive until it is destroyed and its done event
/// has fired (the `Buffer` type does this).
#[allow(clippy::too_many_arguments)]
pub(crate) fn buffer_from_host_owned(
    api: &Api,
    c: ClientPtr,
    owner: &std::sync::Arc<dyn crate::buffer::HostBytes>,
    ty: i32,
    dims: &[i64],
    byte_strides: Option<&[i64]>,
    device: DevicePtr,
    memory: Option<MemoryPtr>,
) -> Result<(BufferPtr, Option<EventPtr>)> {
    let data = owner.bytes();
    // SAFETY: the bytes are checked to cover the array by the caller, are immutable through
    // `HostBytes`, and stay alive because the buffer owns `owner` until after destruction.
    unsafe {
        buffer_from_host(
            api,
            c,
            data.as_ptr(),
            ty,
            dims,
            byte_strides,
            HostSemantics::ZeroCopy,
            device,
            memory,
        )
    }
}

/// Views a slice of plain scalars as bytes.
pub(crate) fn as_bytes<T: crate::dtype::NativeType>(data: &[T]) -> &[u8] {
    // SAFETY: every NativeType is a primitive scalar without padding, so each byte of the
    // slice is initialised; the length is the slice's size in bytes.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// Host-visible memory of a buffer, as a byte slice that its owner keeps valid.
///
/// Holds only the address and length; `Buffer`'s host views and fast host reads create it
/// while they hold a pin that stops the buffer from being deleted or donated, and after its
/// contents are ready, and drop it before releasing the pin.
#[derive(Debug)]
pub(crate) struct HostSlice {
    addr: usize,
    len: usize,
}

impl HostSlice {
    /// # Safety
    /// `addr..addr+len` must be readable host memory that nobody writes to, and that stays
    /// allocated, for as long as the returned value lives.
    pub(crate) unsafe fn new(addr: usize, len: usize) -> HostSlice {
        HostSlice { addr, len }
    }

    /// The bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `new`'s contract: readable, unchanging and allocated while `self` lives.
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }

    /// The address of the first byte.
    pub(crate) fn addr(&self) -> usize {
        self.addr
    }
}

/// The host memory of a buffer, read in place: `PJRT_Buffer_UnsafePointer`, then a
/// [`HostSlice`] of `len` bytes there; `None` if the plugin gives a null address.
///
/// For callers that have made sure (as `Buffer` does) that the buffer is host-visible
/// (`PJRT_Buffer_IsOnCpu`), dense row-major and exactly `len` bytes on the device; that its
/// contents are ready; and that it cannot be deleted, donated or destroyed while the slice
/// lives (a pin on the owning `Buffer`, which is borrowed).
pub(crate) fn pinned_host_slice(api: &Api, b: BufferPtr, len: usize) -> Result<Option<HostSlice>> {
    let addr = buffer_unsafe_pointer(api, b)?;
    if addr == 0 {
        return Ok(None);
    }
    // SAFETY: per this function's contract, `addr` is the buffer's host-visible storage of
    // `len` bytes, nothing writes it (ready; not donatable while pinned) and it stays
    // allocated (not deletable while pinned, and the owner is borrowed) while the slice lives.
    Ok(Some(unsafe { HostSlice::new(addr, len) }))
}

/// Copies a buffer to host memory and waits for the copy to finish.
pub(crate) fn buffer_to_host_blocking(api: &Api, b: BufferPtr, dst: &mut [u8]) -> Result<()> {
    // SAFETY: `dst` is exclusively borrowed for the whole function, and we wait for the
    // transfer's event before returning, so the plugin's writes end inside the borrow.
    let ev = unsafe { buffer_to_host(api, b, dst.as_mut_ptr(), dst.len()) }?;
    if let Some(ev) = ev {
        let r = super::event::event_await(api, ev);
        let _ = super::event::event_destroy(api, ev);
        r?;
    }
    Ok(())
}
