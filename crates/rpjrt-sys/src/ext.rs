//! PJRT extension structs, laid out as at PJRT 0.114.
//!
//! A plugin advertises extensions as a linked list of structs starting at
//! `PJRT_Api::extension_start`; each begins with a [`PJRT_Extension_Base`]
//! whose `type` is one of the `PJRT_Extension_Type_*` tags. The layout of an
//! extension follows the plugin's PJRT minor, not the extension's own version
//! constant.
//!
//! Also declares the profiler plugin API (`PLUGIN_Profiler_*`) used by the
//! profiler extension and the device-event types used by the raw-buffer one.
//! The last two sections (CrossHostTransfers, ExecutableMetadata) come from
//! headers outside the vendored set and are not checked by the ABI probe.

use crate::pjrt::*;
use core::ffi::{c_char, c_int, c_void};

// ==== profiler_c_api.h ====

/// Version of the profiler plugin API declared here.
pub const PLUGIN_PROFILER_VERSION: c_int = 1;

/// Opaque `PLUGIN_Profiler` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PLUGIN_Profiler {
    _opaque: [u8; 0],
}

/// Opaque `PLUGIN_Profiler_Error` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PLUGIN_Profiler_Error {
    _opaque: [u8; 0],
}

/// Opaque `PLUGIN_Profiler_ConsumeResult` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PLUGIN_Profiler_ConsumeResult {
    _opaque: [u8; 0],
}

/// Arguments of [`PLUGIN_Profiler_Error_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PLUGIN_Profiler_Error_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Priv.
    pub r#priv: *mut c_void,
    /// The [`PLUGIN_Profiler_Error`] to use.
    pub error: *mut PLUGIN_Profiler_Error,
}

struct_size!(PLUGIN_Profiler_Error_Destroy_Args_STRUCT_SIZE = PLUGIN_Profiler_Error_Destroy_Args, error: *mut PLUGIN_Profiler_Error);

/// Signature of the `PLUGIN_Profiler_Error_Destroy` entry; takes [`PLUGIN_Profiler_Error_Destroy_Args`].
pub type PLUGIN_Profiler_Error_Destroy =
    unsafe extern "C" fn(args: *mut PLUGIN_Profiler_Error_Destroy_Args);

/// Arguments of [`PLUGIN_Profiler_Error_Message`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PLUGIN_Profiler_Error_Message_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Priv.
    pub r#priv: *mut c_void,
    /// The [`PLUGIN_Profiler_Error`] to use.
    pub error: *const PLUGIN_Profiler_Error,
    /// Out: message bytes (not NUL-terminated; length in `message_size`).
    pub message: *const c_char,
    /// Out: length of `message` in bytes or elements.
    pub message_size: usize,
}

struct_size!(PLUGIN_Profiler_Error_Message_Args_STRUCT_SIZE = PLUGIN_Profiler_Error_Message_Args, message_size: usize);

/// Signature of the `PLUGIN_Profiler_Error_Message` entry; takes [`PLUGIN_Profiler_Error_Message_Args`].
pub type PLUGIN_Profiler_Error_Message =
    unsafe extern "C" fn(args: *mut PLUGIN_Profiler_Error_Message_Args);

/// Arguments of [`PLUGIN_Profiler_Error_GetCode`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PLUGIN_Profiler_Error_GetCode_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Priv.
    pub r#priv: *mut c_void,
    /// The [`PLUGIN_Profiler_Error`] to use.
    pub error: *const PLUGIN_Profiler_Error,
    /// Out: code.
    pub code: c_int,
}

struct_size!(PLUGIN_Profiler_Error_GetCode_Args_STRUCT_SIZE = PLUGIN_Profiler_Error_GetCode_Args, code: c_int);

/// Signature of the `PLUGIN_Profiler_Error_GetCode` entry; takes [`PLUGIN_Profiler_Error_GetCode_Args`].
pub type PLUGIN_Profiler_Error_GetCode = unsafe extern "C" fn(
    args: *mut PLUGIN_Profiler_Error_GetCode_Args,
) -> *mut PLUGIN_Profiler_Error;

/// Arguments of [`PLUGIN_Profiler_Create`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PLUGIN_Profiler_Create_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Options bytes (not NUL-terminated; length in `options_size`).
    pub options: *const c_char,
    /// Length of `options` in bytes or elements.
    pub options_size: usize,
    /// Out: the resulting [`PLUGIN_Profiler`].
    pub profiler: *mut PLUGIN_Profiler,
}

struct_size!(PLUGIN_Profiler_Create_Args_STRUCT_SIZE = PLUGIN_Profiler_Create_Args, profiler: *mut PLUGIN_Profiler);

/// Signature of the `PLUGIN_Profiler_Create` entry; takes [`PLUGIN_Profiler_Create_Args`].
pub type PLUGIN_Profiler_Create =
    unsafe extern "C" fn(args: *mut PLUGIN_Profiler_Create_Args) -> *mut PLUGIN_Profiler_Error;

/// Arguments of [`PLUGIN_Profiler_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PLUGIN_Profiler_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PLUGIN_Profiler`] to use.
    pub profiler: *mut PLUGIN_Profiler,
}

struct_size!(PLUGIN_Profiler_Destroy_Args_STRUCT_SIZE = PLUGIN_Profiler_Destroy_Args, profiler: *mut PLUGIN_Profiler);

/// Signature of the `PLUGIN_Profiler_Destroy` entry; takes [`PLUGIN_Profiler_Destroy_Args`].
pub type PLUGIN_Profiler_Destroy =
    unsafe extern "C" fn(args: *mut PLUGIN_Profiler_Destroy_Args) -> *mut PLUGIN_Profiler_Error;

/// Arguments of [`PLUGIN_Profiler_Start`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PLUGIN_Profiler_Start_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PLUGIN_Profiler`] to use.
    pub profiler: *mut PLUGIN_Profiler,
}

struct_size!(PLUGIN_Profiler_Start_Args_STRUCT_SIZE = PLUGIN_Profiler_Start_Args, profiler: *mut PLUGIN_Profiler);

/// Signature of the `PLUGIN_Profiler_Start` entry; takes [`PLUGIN_Profiler_Start_Args`].
pub type PLUGIN_Profiler_Start =
    unsafe extern "C" fn(args: *mut PLUGIN_Profiler_Start_Args) -> *mut PLUGIN_Profiler_Error;

/// Arguments of [`PLUGIN_Profiler_Stop`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PLUGIN_Profiler_Stop_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PLUGIN_Profiler`] to use.
    pub profiler: *mut PLUGIN_Profiler,
}

struct_size!(PLUGIN_Profiler_Stop_Args_STRUCT_SIZE = PLUGIN_Profiler_Stop_Args, profiler: *mut PLUGIN_Profiler);

/// Signature of the `PLUGIN_Profiler_Stop` entry; takes [`PLUGIN_Profiler_Stop_Args`].
pub type PLUGIN_Profiler_Stop =
    unsafe extern "C" fn(args: *mut PLUGIN_Profiler_Stop_Args) -> *mut PLUGIN_Profiler_Error;

/// Arguments of [`PLUGIN_Profiler_CollectData`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PLUGIN_Profiler_CollectData_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PLUGIN_Profiler`] to use.
    pub profiler: *mut PLUGIN_Profiler,
    /// In/out: buffer.
    pub buffer: *mut u8,
    /// Out: buffer size in bytes.
    pub buffer_size_in_bytes: usize,
}

struct_size!(PLUGIN_Profiler_CollectData_Args_STRUCT_SIZE = PLUGIN_Profiler_CollectData_Args, buffer_size_in_bytes: usize);

/// Signature of the `PLUGIN_Profiler_CollectData` entry; takes [`PLUGIN_Profiler_CollectData_Args`].
pub type PLUGIN_Profiler_CollectData =
    unsafe extern "C" fn(args: *mut PLUGIN_Profiler_CollectData_Args) -> *mut PLUGIN_Profiler_Error;

/// Arguments of [`PLUGIN_Profiler_Consume`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PLUGIN_Profiler_Consume_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PLUGIN_Profiler`] to use.
    pub profiler: *mut PLUGIN_Profiler,
    /// Out: the resulting [`PLUGIN_Profiler_ConsumeResult`].
    pub result: *mut PLUGIN_Profiler_ConsumeResult,
}

struct_size!(PLUGIN_Profiler_Consume_Args_STRUCT_SIZE = PLUGIN_Profiler_Consume_Args, result: *mut PLUGIN_Profiler_ConsumeResult);

/// Signature of the `PLUGIN_Profiler_Consume` entry; takes [`PLUGIN_Profiler_Consume_Args`].
pub type PLUGIN_Profiler_Consume =
    unsafe extern "C" fn(args: *mut PLUGIN_Profiler_Consume_Args) -> *mut PLUGIN_Profiler_Error;

/// Arguments of [`PLUGIN_Profiler_ConsumeResult_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PLUGIN_Profiler_ConsumeResult_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PLUGIN_Profiler_ConsumeResult`] to use.
    pub consume_result: *mut PLUGIN_Profiler_ConsumeResult,
}

struct_size!(PLUGIN_Profiler_ConsumeResult_Destroy_Args_STRUCT_SIZE = PLUGIN_Profiler_ConsumeResult_Destroy_Args, consume_result: *mut PLUGIN_Profiler_ConsumeResult);

/// Signature of the `PLUGIN_Profiler_ConsumeResult_Destroy` entry; takes [`PLUGIN_Profiler_ConsumeResult_Destroy_Args`].
pub type PLUGIN_Profiler_ConsumeResult_Destroy =
    unsafe extern "C" fn(args: *mut PLUGIN_Profiler_ConsumeResult_Destroy_Args);

/// Arguments of [`PLUGIN_Profiler_Serialize`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PLUGIN_Profiler_Serialize_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PLUGIN_Profiler`] to use.
    pub profiler: *mut PLUGIN_Profiler,
    /// The [`PLUGIN_Profiler_ConsumeResult`] to use.
    pub consume_result: *mut PLUGIN_Profiler_ConsumeResult,
    /// Out: serialized bytes.
    pub serialized_bytes: *const u8,
    /// Out: serialized size.
    pub serialized_size: usize,
}

struct_size!(PLUGIN_Profiler_Serialize_Args_STRUCT_SIZE = PLUGIN_Profiler_Serialize_Args, serialized_size: usize);

/// Signature of the `PLUGIN_Profiler_Serialize` entry; takes [`PLUGIN_Profiler_Serialize_Args`].
pub type PLUGIN_Profiler_Serialize =
    unsafe extern "C" fn(args: *mut PLUGIN_Profiler_Serialize_Args) -> *mut PLUGIN_Profiler_Error;

/// Function table of a plugin's profiler (reached through [`PJRT_Profiler_Extension`]).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PLUGIN_Profiler_Api {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Reserved; null.
    pub r#priv: *mut c_void,
    /// Error destroy callback (may be null).
    pub error_destroy: Option<PLUGIN_Profiler_Error_Destroy>,
    /// Error message callback (may be null).
    pub error_message: Option<PLUGIN_Profiler_Error_Message>,
    /// Error get code callback (may be null).
    pub error_get_code: Option<PLUGIN_Profiler_Error_GetCode>,
    /// Create callback (may be null).
    pub create: Option<PLUGIN_Profiler_Create>,
    /// Destroy callback (may be null).
    pub destroy: Option<PLUGIN_Profiler_Destroy>,
    /// Start callback (may be null).
    pub start: Option<PLUGIN_Profiler_Start>,
    /// Stop callback (may be null).
    pub stop: Option<PLUGIN_Profiler_Stop>,
    /// Collect data callback (may be null).
    pub collect_data: Option<PLUGIN_Profiler_CollectData>,
    /// Consume callback (may be null).
    pub consume: Option<PLUGIN_Profiler_Consume>,
    /// Consume result destroy callback (may be null).
    pub consume_result_destroy: Option<PLUGIN_Profiler_ConsumeResult_Destroy>,
    /// Serialize callback (may be null).
    pub serialize: Option<PLUGIN_Profiler_Serialize>,
}

struct_size!(PLUGIN_Profiler_Api_STRUCT_SIZE = PLUGIN_Profiler_Api, serialize: Option<PLUGIN_Profiler_Serialize>);

// ==== pjrt_c_api_abi_version_extension.h ====

/// Header constant `PJRT_API_ABI_VERSION_EXTENSION_VERSION`.
pub const PJRT_API_ABI_VERSION_EXTENSION_VERSION: c_int = 1;

/// Opaque `PJRT_RuntimeAbiVersion` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_RuntimeAbiVersion {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_ExecutableAbiVersion` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_ExecutableAbiVersion {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_SerializedProto` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_SerializedProto {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_Client_RuntimeAbiVersion`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_RuntimeAbiVersion_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Client`] to use.
    pub client: *mut PJRT_Client,
    /// Out: the resulting [`PJRT_RuntimeAbiVersion`].
    pub abi_version: *mut PJRT_RuntimeAbiVersion,
}

struct_size!(PJRT_Client_RuntimeAbiVersion_Args_STRUCT_SIZE = PJRT_Client_RuntimeAbiVersion_Args, abi_version: *mut PJRT_RuntimeAbiVersion);

/// Signature of the `PJRT_Client_RuntimeAbiVersion` entry; takes [`PJRT_Client_RuntimeAbiVersion_Args`].
pub type PJRT_Client_RuntimeAbiVersion =
    unsafe extern "C" fn(args: *mut PJRT_Client_RuntimeAbiVersion_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Executable_GetAbiVersion`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Executable_GetAbiVersion_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Executable`] to use.
    pub executable: *mut PJRT_Executable,
    /// Out: the resulting [`PJRT_ExecutableAbiVersion`].
    pub abi_version: *mut PJRT_ExecutableAbiVersion,
}

struct_size!(PJRT_Executable_GetAbiVersion_Args_STRUCT_SIZE = PJRT_Executable_GetAbiVersion_Args, abi_version: *mut PJRT_ExecutableAbiVersion);

/// Signature of the `PJRT_Executable_GetAbiVersion` entry; takes [`PJRT_Executable_GetAbiVersion_Args`].
pub type PJRT_Executable_GetAbiVersion =
    unsafe extern "C" fn(args: *mut PJRT_Executable_GetAbiVersion_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_RuntimeAbiVersion_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_RuntimeAbiVersion_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_RuntimeAbiVersion`] to use.
    pub abi_version: *mut PJRT_RuntimeAbiVersion,
}

struct_size!(PJRT_RuntimeAbiVersion_Destroy_Args_STRUCT_SIZE = PJRT_RuntimeAbiVersion_Destroy_Args, abi_version: *mut PJRT_RuntimeAbiVersion);

/// Signature of the `PJRT_RuntimeAbiVersion_Destroy` entry; takes [`PJRT_RuntimeAbiVersion_Destroy_Args`].
pub type PJRT_RuntimeAbiVersion_Destroy =
    unsafe extern "C" fn(args: *mut PJRT_RuntimeAbiVersion_Destroy_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_RuntimeAbiVersion_IsCompatibleWithRuntime`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_RuntimeAbiVersion_IsCompatibleWithRuntime_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_RuntimeAbiVersion`] to use.
    pub abi_version: *const PJRT_RuntimeAbiVersion,
    /// The [`PJRT_RuntimeAbiVersion`] to use.
    pub other_abi_version: *const PJRT_RuntimeAbiVersion,
}

struct_size!(PJRT_RuntimeAbiVersion_IsCompatibleWithRuntime_Args_STRUCT_SIZE = PJRT_RuntimeAbiVersion_IsCompatibleWithRuntime_Args, other_abi_version: *const PJRT_RuntimeAbiVersion);

/// Signature of the `PJRT_RuntimeAbiVersion_IsCompatibleWithRuntime` entry; takes [`PJRT_RuntimeAbiVersion_IsCompatibleWithRuntime_Args`].
pub type PJRT_RuntimeAbiVersion_IsCompatibleWithRuntime = unsafe extern "C" fn(
    args: *mut PJRT_RuntimeAbiVersion_IsCompatibleWithRuntime_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_RuntimeAbiVersion_IsCompatibleWithExecutable`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_RuntimeAbiVersion_IsCompatibleWithExecutable_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_RuntimeAbiVersion`] to use.
    pub abi_version: *const PJRT_RuntimeAbiVersion,
    /// The [`PJRT_ExecutableAbiVersion`] to use.
    pub executable_abi_version: *const PJRT_ExecutableAbiVersion,
}

struct_size!(PJRT_RuntimeAbiVersion_IsCompatibleWithExecutable_Args_STRUCT_SIZE = PJRT_RuntimeAbiVersion_IsCompatibleWithExecutable_Args, executable_abi_version: *const PJRT_ExecutableAbiVersion);

/// Signature of the `PJRT_RuntimeAbiVersion_IsCompatibleWithExecutable` entry; takes [`PJRT_RuntimeAbiVersion_IsCompatibleWithExecutable_Args`].
pub type PJRT_RuntimeAbiVersion_IsCompatibleWithExecutable =
    unsafe extern "C" fn(
        args: *mut PJRT_RuntimeAbiVersion_IsCompatibleWithExecutable_Args,
    ) -> *mut PJRT_Error;

/// Arguments of [`PJRT_RuntimeAbiVersion_ToProto`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_RuntimeAbiVersion_ToProto_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_RuntimeAbiVersion`] to use.
    pub abi_version: *const PJRT_RuntimeAbiVersion,
    /// Out: serialized proto bytes (not NUL-terminated; length in `serialized_proto_size`).
    pub serialized_proto: *const c_char,
    /// Out: length of `serialized_proto` in bytes or elements.
    pub serialized_proto_size: usize,
    /// Out: the resulting [`PJRT_SerializedProto`].
    pub serialized_proto_holder: *mut PJRT_SerializedProto,
    /// Out: serialized proto deleter callback (may be null).
    pub serialized_proto_deleter: Option<unsafe extern "C" fn(holder: *mut PJRT_SerializedProto)>,
}

struct_size!(PJRT_RuntimeAbiVersion_ToProto_Args_STRUCT_SIZE = PJRT_RuntimeAbiVersion_ToProto_Args, serialized_proto_deleter: Option<unsafe extern "C" fn(holder: *mut PJRT_SerializedProto)>);

/// Signature of the `PJRT_RuntimeAbiVersion_ToProto` entry; takes [`PJRT_RuntimeAbiVersion_ToProto_Args`].
pub type PJRT_RuntimeAbiVersion_ToProto =
    unsafe extern "C" fn(args: *mut PJRT_RuntimeAbiVersion_ToProto_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_RuntimeAbiVersion_PlatformId`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_RuntimeAbiVersion_PlatformId_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_RuntimeAbiVersion`] to use.
    pub abi_version: *const PJRT_RuntimeAbiVersion,
    /// Out: platform id.
    pub platform_id: u64,
}

struct_size!(PJRT_RuntimeAbiVersion_PlatformId_Args_STRUCT_SIZE = PJRT_RuntimeAbiVersion_PlatformId_Args, platform_id: u64);

/// Signature of the `PJRT_RuntimeAbiVersion_PlatformId` entry; takes [`PJRT_RuntimeAbiVersion_PlatformId_Args`].
pub type PJRT_RuntimeAbiVersion_PlatformId =
    unsafe extern "C" fn(args: *mut PJRT_RuntimeAbiVersion_PlatformId_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_ExecutableAbiVersion_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_ExecutableAbiVersion_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_ExecutableAbiVersion`] to use.
    pub abi_version: *mut PJRT_ExecutableAbiVersion,
}

struct_size!(PJRT_ExecutableAbiVersion_Destroy_Args_STRUCT_SIZE = PJRT_ExecutableAbiVersion_Destroy_Args, abi_version: *mut PJRT_ExecutableAbiVersion);

/// Signature of the `PJRT_ExecutableAbiVersion_Destroy` entry; takes [`PJRT_ExecutableAbiVersion_Destroy_Args`].
pub type PJRT_ExecutableAbiVersion_Destroy =
    unsafe extern "C" fn(args: *mut PJRT_ExecutableAbiVersion_Destroy_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_ExecutableAbiVersion_ToProto`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_ExecutableAbiVersion_ToProto_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_ExecutableAbiVersion`] to use.
    pub abi_version: *const PJRT_ExecutableAbiVersion,
    /// Out: serialized proto bytes (not NUL-terminated; length in `serialized_proto_size`).
    pub serialized_proto: *const c_char,
    /// Out: length of `serialized_proto` in bytes or elements.
    pub serialized_proto_size: usize,
    /// Out: the resulting [`PJRT_SerializedProto`].
    pub serialized_proto_holder: *mut PJRT_SerializedProto,
    /// Out: serialized proto deleter callback (may be null).
    pub serialized_proto_deleter: Option<unsafe extern "C" fn(holder: *mut PJRT_SerializedProto)>,
}

struct_size!(PJRT_ExecutableAbiVersion_ToProto_Args_STRUCT_SIZE = PJRT_ExecutableAbiVersion_ToProto_Args, serialized_proto_deleter: Option<unsafe extern "C" fn(holder: *mut PJRT_SerializedProto)>);

/// Signature of the `PJRT_ExecutableAbiVersion_ToProto` entry; takes [`PJRT_ExecutableAbiVersion_ToProto_Args`].
pub type PJRT_ExecutableAbiVersion_ToProto =
    unsafe extern "C" fn(args: *mut PJRT_ExecutableAbiVersion_ToProto_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_ExecutableAbiVersion_PlatformId`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_ExecutableAbiVersion_PlatformId_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_ExecutableAbiVersion`] to use.
    pub abi_version: *const PJRT_ExecutableAbiVersion,
    /// Out: platform id.
    pub platform_id: u64,
}

struct_size!(PJRT_ExecutableAbiVersion_PlatformId_Args_STRUCT_SIZE = PJRT_ExecutableAbiVersion_PlatformId_Args, platform_id: u64);

/// Signature of the `PJRT_ExecutableAbiVersion_PlatformId` entry; takes [`PJRT_ExecutableAbiVersion_PlatformId_Args`].
pub type PJRT_ExecutableAbiVersion_PlatformId =
    unsafe extern "C" fn(args: *mut PJRT_ExecutableAbiVersion_PlatformId_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_RuntimeAbiVersion_FromProto`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_RuntimeAbiVersion_FromProto_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Serialized proto bytes (not NUL-terminated; length in `serialized_proto_size`).
    pub serialized_proto: *const c_char,
    /// Length of `serialized_proto` in bytes or elements.
    pub serialized_proto_size: usize,
    /// Out: the resulting [`PJRT_RuntimeAbiVersion`].
    pub abi_version: *mut PJRT_RuntimeAbiVersion,
}

struct_size!(PJRT_RuntimeAbiVersion_FromProto_Args_STRUCT_SIZE = PJRT_RuntimeAbiVersion_FromProto_Args, abi_version: *mut PJRT_RuntimeAbiVersion);

/// Signature of the `PJRT_RuntimeAbiVersion_FromProto` entry; takes [`PJRT_RuntimeAbiVersion_FromProto_Args`].
pub type PJRT_RuntimeAbiVersion_FromProto =
    unsafe extern "C" fn(args: *mut PJRT_RuntimeAbiVersion_FromProto_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_ExecutableAbiVersion_FromProto`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_ExecutableAbiVersion_FromProto_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Serialized proto bytes (not NUL-terminated; length in `serialized_proto_size`).
    pub serialized_proto: *const c_char,
    /// Length of `serialized_proto` in bytes or elements.
    pub serialized_proto_size: usize,
    /// Out: the resulting [`PJRT_ExecutableAbiVersion`].
    pub abi_version: *mut PJRT_ExecutableAbiVersion,
}

struct_size!(PJRT_ExecutableAbiVersion_FromProto_Args_STRUCT_SIZE = PJRT_ExecutableAbiVersion_FromProto_Args, abi_version: *mut PJRT_ExecutableAbiVersion);

/// Signature of the `PJRT_ExecutableAbiVersion_FromProto` entry; takes [`PJRT_ExecutableAbiVersion_FromProto_Args`].
pub type PJRT_ExecutableAbiVersion_FromProto =
    unsafe extern "C" fn(args: *mut PJRT_ExecutableAbiVersion_FromProto_Args) -> *mut PJRT_Error;

/// Extension (`PJRT_Extension_Type_AbiVersion`): runtime and executable ABI version objects and their compatibility checks.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_AbiVersion_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Client runtime abi version callback (may be null).
    pub client_runtime_abi_version: Option<PJRT_Client_RuntimeAbiVersion>,
    /// Executable get abi version callback (may be null).
    pub executable_get_abi_version: Option<PJRT_Executable_GetAbiVersion>,
    /// Runtime abi version destroy callback (may be null).
    pub runtime_abi_version_destroy: Option<PJRT_RuntimeAbiVersion_Destroy>,
    /// Runtime abi version is compatible with runtime callback (may be null).
    pub runtime_abi_version_is_compatible_with_runtime:
        Option<PJRT_RuntimeAbiVersion_IsCompatibleWithRuntime>,
    /// Runtime abi version is compatible with executable callback (may be null).
    pub runtime_abi_version_is_compatible_with_executable:
        Option<PJRT_RuntimeAbiVersion_IsCompatibleWithExecutable>,
    /// Runtime abi version to proto callback (may be null).
    pub runtime_abi_version_to_proto: Option<PJRT_RuntimeAbiVersion_ToProto>,
    /// Runtime abi version platform id callback (may be null).
    pub runtime_abi_version_platform_id: Option<PJRT_RuntimeAbiVersion_PlatformId>,
    /// Executable abi version destroy callback (may be null).
    pub executable_abi_version_destroy: Option<PJRT_ExecutableAbiVersion_Destroy>,
    /// Executable abi version to proto callback (may be null).
    pub executable_abi_version_to_proto: Option<PJRT_ExecutableAbiVersion_ToProto>,
    /// Executable abi version platform id callback (may be null).
    pub executable_abi_version_platform_id: Option<PJRT_ExecutableAbiVersion_PlatformId>,
    /// Runtime abi version from proto callback (may be null).
    pub runtime_abi_version_from_proto: Option<PJRT_RuntimeAbiVersion_FromProto>,
    /// Executable abi version from proto callback (may be null).
    pub executable_abi_version_from_proto: Option<PJRT_ExecutableAbiVersion_FromProto>,
}

struct_size!(PJRT_AbiVersion_Extension_STRUCT_SIZE = PJRT_AbiVersion_Extension, executable_abi_version_from_proto: Option<PJRT_ExecutableAbiVersion_FromProto>);

// ==== pjrt_c_api_callback_extension.h ====

/// Header constant `PJRT_API_CALLBACK_EXTENSION_VERSION`.
pub const PJRT_API_CALLBACK_EXTENSION_VERSION: c_int = 1;

/// Kind of callback in [`PJRT_Callback_Extension`].
pub type PJRT_Callback_Type = i32;
/// Value `Unknown` of `PJRT_Callback_Type`.
pub const PJRT_Callback_Type_Unknown: PJRT_Callback_Type = 0;
/// Value `Tpu_SliceBuilder` of `PJRT_Callback_Type`.
pub const PJRT_Callback_Type_Tpu_SliceBuilder: PJRT_Callback_Type = 1;
/// Value `Prefatal` of `PJRT_Callback_Type`.
pub const PJRT_Callback_Type_Prefatal: PJRT_Callback_Type = 2;

/// Why a TPU slice failed (payload of the slice-builder callback).
pub type PJRT_Callback_Tpu_SliceFailureType = i32;
/// Value `SLICE_FAILURE_UNKNOWN` of `PJRT_Callback_Tpu_SliceFailureType`.
pub const SLICE_FAILURE_UNKNOWN: PJRT_Callback_Tpu_SliceFailureType = 0;
/// Value `SLICE_FAILURE_INIT_ERROR` of `PJRT_Callback_Tpu_SliceFailureType`.
pub const SLICE_FAILURE_INIT_ERROR: PJRT_Callback_Tpu_SliceFailureType = 1;
/// Value `SLICE_FAILURE_WORKER_UNAVAILABLE` of `PJRT_Callback_Tpu_SliceFailureType`.
pub const SLICE_FAILURE_WORKER_UNAVAILABLE: PJRT_Callback_Tpu_SliceFailureType = 2;
/// Value `SLICE_FAILURE_FLAPPING_TASK_ERROR` of `PJRT_Callback_Tpu_SliceFailureType`.
pub const SLICE_FAILURE_FLAPPING_TASK_ERROR: PJRT_Callback_Tpu_SliceFailureType = 3;
/// Value `SLICE_FAILURE_SW_INJECT_ERROR` of `PJRT_Callback_Tpu_SliceFailureType`.
pub const SLICE_FAILURE_SW_INJECT_ERROR: PJRT_Callback_Tpu_SliceFailureType = 4;
/// Value `SLICE_FAILURE_CHIP_DRIVER_ERROR` of `PJRT_Callback_Tpu_SliceFailureType`.
pub const SLICE_FAILURE_CHIP_DRIVER_ERROR: PJRT_Callback_Tpu_SliceFailureType = 5;

/// Payload handed to a TPU slice-builder callback.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Callback_Tpu_SliceBuilderArgs {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Failure type.
    pub failure_type: PJRT_Callback_Tpu_SliceFailureType,
}

struct_size!(PJRT_Callback_Tpu_SliceBuilderArgs_STRUCT_SIZE = PJRT_Callback_Tpu_SliceBuilderArgs, failure_type: PJRT_Callback_Tpu_SliceFailureType);

/// Payload handed to a pre-fatal-error callback.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Callback_PrefatalArgs {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Error code.
    pub error_code: PJRT_Error_Code,
    /// Error message bytes (not NUL-terminated; length in `error_message_size`).
    pub error_message: *const c_char,
    /// Length of `error_message` in bytes or elements.
    pub error_message_size: usize,
}

struct_size!(PJRT_Callback_PrefatalArgs_STRUCT_SIZE = PJRT_Callback_PrefatalArgs, error_message_size: usize);

/// A client callback registered through [`PJRT_Callback_Extension`]; `args` points at the payload for its type.
pub type PJRT_Callback_Function = unsafe extern "C" fn(args: *mut c_void, user_arg: *mut c_void);

/// Arguments of [`PJRT_Register_Callback`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Callback_RegisterCallback_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Client`] to use.
    pub client: *mut PJRT_Client,
    /// Type.
    pub r#type: PJRT_Callback_Type,
    /// Callback callback (may be null).
    pub callback: Option<PJRT_Callback_Function>,
    /// Opaque pointer handed back to the matching callback.
    pub user_arg: *mut c_void,
}

struct_size!(PJRT_Callback_RegisterCallback_Args_STRUCT_SIZE = PJRT_Callback_RegisterCallback_Args, user_arg: *mut c_void);

/// Registers a client callback for one callback type.
pub type PJRT_Register_Callback =
    unsafe extern "C" fn(args: *mut PJRT_Callback_RegisterCallback_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Callback_InvokeCallback`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Callback_InvokeCallback_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Client`] to use.
    pub client: *mut PJRT_Client,
    /// Type.
    pub r#type: PJRT_Callback_Type,
    /// Args.
    pub args: *mut c_void,
}

struct_size!(PJRT_Callback_InvokeCallback_Args_STRUCT_SIZE = PJRT_Callback_InvokeCallback_Args, args: *mut c_void);

/// Signature of the `PJRT_Callback_InvokeCallback` entry; takes [`PJRT_Callback_InvokeCallback_Args`].
pub type PJRT_Callback_InvokeCallback =
    unsafe extern "C" fn(args: *mut PJRT_Callback_InvokeCallback_Args) -> *mut PJRT_Error;

/// Extension (`PJRT_Extension_Type_Callback`): register and invoke client callbacks.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Callback_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Register callback (may be null).
    pub register_callback: Option<PJRT_Register_Callback>,
    /// Invoke callback (may be null).
    pub invoke_callback: Option<PJRT_Callback_InvokeCallback>,
}

struct_size!(PJRT_Callback_Extension_STRUCT_SIZE = PJRT_Callback_Extension, invoke_callback: Option<PJRT_Callback_InvokeCallback>);

// ==== pjrt_c_api_collectives_extension.h ====

/// Header constant `PJRT_API_COLLECTIVES_EXTENSION_VERSION`.
pub const PJRT_API_COLLECTIVES_EXTENSION_VERSION: c_int = 1;

/// Opaque `PJRT_Collectives` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Collectives {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_Collectives_Communicator` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Collectives_Communicator {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_Collectives_Communicators` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Collectives_Communicators {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_Collectives_ToString_Holder` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Collectives_ToString_Holder {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_Collectives_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Collectives_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Collectives`] to use.
    pub collectives: *mut PJRT_Collectives,
}

struct_size!(PJRT_Collectives_Destroy_Args_STRUCT_SIZE = PJRT_Collectives_Destroy_Args, collectives: *mut PJRT_Collectives);

/// Signature of the `PJRT_Collectives_Destroy` entry; takes [`PJRT_Collectives_Destroy_Args`].
pub type PJRT_Collectives_Destroy =
    unsafe extern "C" fn(args: *mut PJRT_Collectives_Destroy_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Collectives_CreateCommunicators`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Collectives_CreateCommunicators_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Collectives`] to use.
    pub collectives: *mut PJRT_Collectives,
    /// Device ids.
    pub device_ids: *const i64,
    /// Number of entries in `device_ids`.
    pub num_device_ids: usize,
    /// Clique ids.
    pub clique_ids: *mut *const c_char,
    /// Clique id sizes.
    pub clique_id_sizes: *const usize,
    /// Number of entries in `clique_ids`.
    pub num_clique_ids: usize,
    /// Rank ids.
    pub rank_ids: *mut i64,
    /// Number of device ranks.
    pub num_device_ranks: usize,
    /// Out: communicators.
    pub communicators: *mut *mut PJRT_Collectives_Communicator,
    /// Out: number of entries in `communicators`.
    pub num_communicators: usize,
    /// Out: the resulting [`PJRT_Collectives_Communicators`].
    pub communicators_holder: *mut PJRT_Collectives_Communicators,
    /// Out: communicators holder deleter callback (may be null).
    pub communicators_holder_deleter:
        Option<unsafe extern "C" fn(ptr: *mut PJRT_Collectives_Communicators)>,
}

struct_size!(PJRT_Collectives_CreateCommunicators_Args_STRUCT_SIZE = PJRT_Collectives_CreateCommunicators_Args, communicators_holder_deleter: Option<unsafe extern "C" fn(ptr: *mut PJRT_Collectives_Communicators)>);

/// Signature of the `PJRT_Collectives_CreateCommunicators` entry; takes [`PJRT_Collectives_CreateCommunicators_Args`].
pub type PJRT_Collectives_CreateCommunicators =
    unsafe extern "C" fn(args: *mut PJRT_Collectives_CreateCommunicators_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Collectives_Communicator_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Collectives_Communicator_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Collectives_Communicator`] to use.
    pub communicator: *mut PJRT_Collectives_Communicator,
}

struct_size!(PJRT_Collectives_Communicator_Destroy_Args_STRUCT_SIZE = PJRT_Collectives_Communicator_Destroy_Args, communicator: *mut PJRT_Collectives_Communicator);

/// Signature of the `PJRT_Collectives_Communicator_Destroy` entry; takes [`PJRT_Collectives_Communicator_Destroy_Args`].
pub type PJRT_Collectives_Communicator_Destroy =
    unsafe extern "C" fn(args: *mut PJRT_Collectives_Communicator_Destroy_Args) -> *mut PJRT_Error;

/// C enum `PJRT_Collectives_ReductionKind`, carried as a plain integer; values are the consts below.
pub type PJRT_Collectives_ReductionKind = i32;
/// Value `PJRT_COLLECTIVES_REDUCTION_SUM` of `PJRT_Collectives_ReductionKind`.
pub const PJRT_COLLECTIVES_REDUCTION_SUM: PJRT_Collectives_ReductionKind = 0;
/// Value `PJRT_COLLECTIVES_REDUCTION_PRODUCT` of `PJRT_Collectives_ReductionKind`.
pub const PJRT_COLLECTIVES_REDUCTION_PRODUCT: PJRT_Collectives_ReductionKind = 1;
/// Value `PJRT_COLLECTIVES_REDUCTION_MIN` of `PJRT_Collectives_ReductionKind`.
pub const PJRT_COLLECTIVES_REDUCTION_MIN: PJRT_Collectives_ReductionKind = 2;
/// Value `PJRT_COLLECTIVES_REDUCTION_MAX` of `PJRT_Collectives_ReductionKind`.
pub const PJRT_COLLECTIVES_REDUCTION_MAX: PJRT_Collectives_ReductionKind = 3;

/// C enum `PJRT_Collectives_CollectiveOpKind`, carried as a plain integer; values are the consts below.
pub type PJRT_Collectives_CollectiveOpKind = i32;
/// Value `PJRT_COLLECTIVES_COLLECTIVE_OP_KIND_CROSS_MODULE` of `PJRT_Collectives_CollectiveOpKind`.
pub const PJRT_COLLECTIVES_COLLECTIVE_OP_KIND_CROSS_MODULE: PJRT_Collectives_CollectiveOpKind = 0;
/// Value `PJRT_COLLECTIVES_COLLECTIVE_OP_KIND_CROSS_REPLICA` of `PJRT_Collectives_CollectiveOpKind`.
pub const PJRT_COLLECTIVES_COLLECTIVE_OP_KIND_CROSS_REPLICA: PJRT_Collectives_CollectiveOpKind = 1;

/// CPU executor handle passed to collective operations.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Collectives_CpuExecutor {
    /// Run id.
    pub run_id: i64,
    /// Global device ids.
    pub global_device_ids: *mut i64,
    /// Number of entries in `global_device_ids`.
    pub num_global_device_ids: usize,
    /// Number of local participants.
    pub num_local_participants: i32,
    /// Collective op kind.
    pub collective_op_kind: PJRT_Collectives_CollectiveOpKind,
    /// Op id.
    pub op_id: i64,
    /// Timeout in ns.
    pub timeout_in_ns: i64,
}

/// Arguments of [`PJRT_Collectives_Communicator_AllReduce`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Collectives_Communicator_AllReduce_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Collectives_Communicator`] to use.
    pub communicator: *mut PJRT_Collectives_Communicator,
    /// Send buffer ptr.
    pub send_buffer_ptr: *mut c_void,
    /// Send buffer size.
    pub send_buffer_size: usize,
    /// Recv buffer ptr.
    pub recv_buffer_ptr: *mut c_void,
    /// Recv buffer size.
    pub recv_buffer_size: usize,
    /// Primitive type.
    pub primitive_type: PJRT_Buffer_Type,
    /// Count.
    pub count: usize,
    /// Reduction kind.
    pub reduction_kind: PJRT_Collectives_ReductionKind,
    /// Cpu executor.
    pub cpu_executor: *mut PJRT_Collectives_CpuExecutor,
    /// Out: the resulting [`PJRT_Event`].
    pub event: *mut PJRT_Event,
}

struct_size!(PJRT_Collectives_Communicator_AllReduce_Args_STRUCT_SIZE = PJRT_Collectives_Communicator_AllReduce_Args, event: *mut PJRT_Event);

/// Signature of the `PJRT_Collectives_Communicator_AllReduce` entry; takes [`PJRT_Collectives_Communicator_AllReduce_Args`].
pub type PJRT_Collectives_Communicator_AllReduce = unsafe extern "C" fn(
    args: *mut PJRT_Collectives_Communicator_AllReduce_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Collectives_Communicator_ReduceScatter`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Collectives_Communicator_ReduceScatter_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Collectives_Communicator`] to use.
    pub communicator: *mut PJRT_Collectives_Communicator,
    /// Send buffer ptr.
    pub send_buffer_ptr: *mut c_void,
    /// Send buffer size.
    pub send_buffer_size: usize,
    /// Recv buffer ptr.
    pub recv_buffer_ptr: *mut c_void,
    /// Recv buffer size.
    pub recv_buffer_size: usize,
    /// Primitive type.
    pub primitive_type: PJRT_Buffer_Type,
    /// Count.
    pub count: usize,
    /// Reduction kind.
    pub reduction_kind: PJRT_Collectives_ReductionKind,
    /// Cpu executor.
    pub cpu_executor: *mut PJRT_Collectives_CpuExecutor,
    /// Out: the resulting [`PJRT_Event`].
    pub event: *mut PJRT_Event,
}

struct_size!(PJRT_Collectives_Communicator_ReduceScatter_Args_STRUCT_SIZE = PJRT_Collectives_Communicator_ReduceScatter_Args, event: *mut PJRT_Event);

/// Signature of the `PJRT_Collectives_Communicator_ReduceScatter` entry; takes [`PJRT_Collectives_Communicator_ReduceScatter_Args`].
pub type PJRT_Collectives_Communicator_ReduceScatter = unsafe extern "C" fn(
    args: *mut PJRT_Collectives_Communicator_ReduceScatter_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Collectives_Communicator_AllGather`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Collectives_Communicator_AllGather_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Collectives_Communicator`] to use.
    pub communicator: *mut PJRT_Collectives_Communicator,
    /// Send buffer ptr.
    pub send_buffer_ptr: *mut c_void,
    /// Send buffer size.
    pub send_buffer_size: usize,
    /// Recv buffer ptr.
    pub recv_buffer_ptr: *mut c_void,
    /// Recv buffer size.
    pub recv_buffer_size: usize,
    /// Primitive type.
    pub primitive_type: PJRT_Buffer_Type,
    /// Count.
    pub count: usize,
    /// Cpu executor.
    pub cpu_executor: *mut PJRT_Collectives_CpuExecutor,
    /// Out: the resulting [`PJRT_Event`].
    pub event: *mut PJRT_Event,
}

struct_size!(PJRT_Collectives_Communicator_AllGather_Args_STRUCT_SIZE = PJRT_Collectives_Communicator_AllGather_Args, event: *mut PJRT_Event);

/// Signature of the `PJRT_Collectives_Communicator_AllGather` entry; takes [`PJRT_Collectives_Communicator_AllGather_Args`].
pub type PJRT_Collectives_Communicator_AllGather = unsafe extern "C" fn(
    args: *mut PJRT_Collectives_Communicator_AllGather_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Collectives_Communicator_CollectivePermute`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Collectives_Communicator_CollectivePermute_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Collectives_Communicator`] to use.
    pub communicator: *mut PJRT_Collectives_Communicator,
    /// Send buffer ptr.
    pub send_buffer_ptr: *mut c_void,
    /// Send buffer size.
    pub send_buffer_size: usize,
    /// Recv buffer ptr.
    pub recv_buffer_ptr: *mut c_void,
    /// Recv buffer size.
    pub recv_buffer_size: usize,
    /// Primitive type.
    pub primitive_type: PJRT_Buffer_Type,
    /// Count.
    pub count: usize,
    /// Whether has source rank.
    pub has_source_rank: bool,
    /// Source rank.
    pub source_rank: i64,
    /// Target ranks.
    pub target_ranks: *mut i64,
    /// Number of entries in `target_ranks`.
    pub num_target_ranks: usize,
    /// Cpu executor.
    pub cpu_executor: *mut PJRT_Collectives_CpuExecutor,
    /// Out: the resulting [`PJRT_Event`].
    pub event: *mut PJRT_Event,
}

struct_size!(PJRT_Collectives_Communicator_CollectivePermute_Args_STRUCT_SIZE = PJRT_Collectives_Communicator_CollectivePermute_Args, event: *mut PJRT_Event);

/// Signature of the `PJRT_Collectives_Communicator_CollectivePermute` entry; takes [`PJRT_Collectives_Communicator_CollectivePermute_Args`].
pub type PJRT_Collectives_Communicator_CollectivePermute = unsafe extern "C" fn(
    args: *mut PJRT_Collectives_Communicator_CollectivePermute_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Collectives_Communicator_AllToAll`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Collectives_Communicator_AllToAll_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Collectives_Communicator`] to use.
    pub communicator: *mut PJRT_Collectives_Communicator,
    /// Send buffers ptrs.
    pub send_buffers_ptrs: *mut *mut c_void,
    /// Send buffers sizes.
    pub send_buffers_sizes: *const usize,
    /// Number of send buffers.
    pub num_send_buffers: usize,
    /// Recv buffers ptrs.
    pub recv_buffers_ptrs: *mut *mut c_void,
    /// Recv buffers sizes.
    pub recv_buffers_sizes: *const usize,
    /// Number of recv buffers.
    pub num_recv_buffers: usize,
    /// Primitive type.
    pub primitive_type: PJRT_Buffer_Type,
    /// Count.
    pub count: usize,
    /// Cpu executor.
    pub cpu_executor: *mut PJRT_Collectives_CpuExecutor,
    /// Out: the resulting [`PJRT_Event`].
    pub event: *mut PJRT_Event,
}

struct_size!(PJRT_Collectives_Communicator_AllToAll_Args_STRUCT_SIZE = PJRT_Collectives_Communicator_AllToAll_Args, event: *mut PJRT_Event);

/// Signature of the `PJRT_Collectives_Communicator_AllToAll` entry; takes [`PJRT_Collectives_Communicator_AllToAll_Args`].
pub type PJRT_Collectives_Communicator_AllToAll =
    unsafe extern "C" fn(args: *mut PJRT_Collectives_Communicator_AllToAll_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Collectives_Communicator_ToString`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Collectives_Communicator_ToString_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Collectives_Communicator`] to use.
    pub communicator: *mut PJRT_Collectives_Communicator,
    /// Out: str bytes (not NUL-terminated; length in `str_size`).
    pub str: *const c_char,
    /// Out: length of `str` in bytes or elements.
    pub str_size: usize,
    /// Out: the resulting [`PJRT_Collectives_ToString_Holder`].
    pub str_holder: *mut PJRT_Collectives_ToString_Holder,
    /// Out: str holder deleter callback (may be null).
    pub str_holder_deleter:
        Option<unsafe extern "C" fn(ptr: *mut PJRT_Collectives_ToString_Holder)>,
}

struct_size!(PJRT_Collectives_Communicator_ToString_Args_STRUCT_SIZE = PJRT_Collectives_Communicator_ToString_Args, str_holder_deleter: Option<unsafe extern "C" fn(ptr: *mut PJRT_Collectives_ToString_Holder)>);

/// Signature of the `PJRT_Collectives_Communicator_ToString` entry; takes [`PJRT_Collectives_Communicator_ToString_Args`].
pub type PJRT_Collectives_Communicator_ToString =
    unsafe extern "C" fn(args: *mut PJRT_Collectives_Communicator_ToString_Args) -> *mut PJRT_Error;

/// Extension (`PJRT_Extension_Type_Collectives`): create communicators and run collectives.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Collectives_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Collectives destroy callback (may be null).
    pub collectives_destroy: Option<PJRT_Collectives_Destroy>,
    /// Collectives create communicators callback (may be null).
    pub collectives_create_communicators: Option<PJRT_Collectives_CreateCommunicators>,
    /// Communicator destroy callback (may be null).
    pub communicator_destroy: Option<PJRT_Collectives_Communicator_Destroy>,
    /// Communicator all reduce callback (may be null).
    pub communicator_all_reduce: Option<PJRT_Collectives_Communicator_AllReduce>,
    /// Communicator reduce scatter callback (may be null).
    pub communicator_reduce_scatter: Option<PJRT_Collectives_Communicator_ReduceScatter>,
    /// Communicator all gather callback (may be null).
    pub communicator_all_gather: Option<PJRT_Collectives_Communicator_AllGather>,
    /// Communicator collective permute callback (may be null).
    pub communicator_collective_permute: Option<PJRT_Collectives_Communicator_CollectivePermute>,
    /// Communicator all to all callback (may be null).
    pub communicator_all_to_all: Option<PJRT_Collectives_Communicator_AllToAll>,
    /// Communicator to string callback (may be null).
    pub communicator_to_string: Option<PJRT_Collectives_Communicator_ToString>,
}

struct_size!(PJRT_Collectives_Extension_STRUCT_SIZE = PJRT_Collectives_Extension, communicator_to_string: Option<PJRT_Collectives_Communicator_ToString>);

// ==== pjrt_c_api_custom_partitioner_extension.h ====

/// Header constant `PJRT_API_CUSTOM_PARTITIONER_EXTENSION_VERSION`.
pub const PJRT_API_CUSTOM_PARTITIONER_EXTENSION_VERSION: c_int = 1;

/// A borrowed byte string (pointer and length).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct JAX_CustomCallPartitioner_string {
    /// Data (C string).
    pub data: *const c_char,
    /// Size.
    pub size: usize,
}

/// An abstract value: a serialized shape plus an optional sharding.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct JAX_CustomCallPartitioner_aval {
    /// Shape.
    pub shape: JAX_CustomCallPartitioner_string,
    /// Whether has sharding.
    pub has_sharding: bool,
    /// Sharding.
    pub sharding: JAX_CustomCallPartitioner_string,
}

/// Common header of the partitioner callbacks: API version plus an error slot.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct JAX_CustomCallPartitioner_version_and_error {
    /// Api version.
    pub api_version: i64,
    /// Out: data.
    pub data: *mut c_void,
    /// Out: cleanup fn callback (may be null).
    pub cleanup_fn: Option<unsafe extern "C" fn(data: *mut c_void)>,
    /// Whether has error.
    pub has_error: bool,
    /// Out: code.
    pub code: PJRT_Error_Code,
    /// Out: error msg.
    pub error_msg: JAX_CustomCallPartitioner_string,
}

/// Arguments of the custom-call `partition` callback.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct JAX_CustomCallPartitioner_Partition_Args {
    /// Header.
    pub header: JAX_CustomCallPartitioner_version_and_error,
    /// Number of args.
    pub num_args: usize,
    /// Op args.
    pub op_args: *mut JAX_CustomCallPartitioner_aval,
    /// Op result.
    pub op_result: JAX_CustomCallPartitioner_aval,
    /// Backend config.
    pub backend_config: JAX_CustomCallPartitioner_string,
    /// Mlir module.
    pub mlir_module: JAX_CustomCallPartitioner_string,
    /// Args sharding.
    pub args_sharding: *mut JAX_CustomCallPartitioner_string,
    /// Result sharding.
    pub result_sharding: JAX_CustomCallPartitioner_string,
}

/// Arguments of the custom-call sharding-inference callback.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct JAX_CustomCallPartitioner_InferShardingFromOperands_Args {
    /// Header.
    pub header: JAX_CustomCallPartitioner_version_and_error,
    /// Number of args.
    pub num_args: usize,
    /// Op args.
    pub op_args: *mut JAX_CustomCallPartitioner_aval,
    /// Result shape.
    pub result_shape: JAX_CustomCallPartitioner_string,
    /// Backend config.
    pub backend_config: JAX_CustomCallPartitioner_string,
    /// Whether has result sharding.
    pub has_result_sharding: bool,
    /// Result sharding.
    pub result_sharding: JAX_CustomCallPartitioner_string,
}

/// Arguments of the custom-call user-sharding propagation callback.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct JAX_CustomCallPartitioner_PropagateUserSharding_Args {
    /// Header.
    pub header: JAX_CustomCallPartitioner_version_and_error,
    /// Backend config.
    pub backend_config: JAX_CustomCallPartitioner_string,
    /// Result shape.
    pub result_shape: JAX_CustomCallPartitioner_string,
    /// In/out: result sharding.
    pub result_sharding: JAX_CustomCallPartitioner_string,
}

/// The set of callbacks that implement a custom-call partitioner.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct JAX_CustomCallPartitioner_Callbacks {
    /// Version.
    pub version: i64,
    /// Private data.
    pub private_data: *mut c_void,
    /// Dtor callback (may be null).
    pub dtor: Option<unsafe extern "C" fn(data: *mut JAX_CustomCallPartitioner_Callbacks)>,
    /// Partition callback (may be null).
    pub partition: Option<
        unsafe extern "C" fn(
            data: *mut JAX_CustomCallPartitioner_Callbacks,
            args: *mut JAX_CustomCallPartitioner_Partition_Args,
        ),
    >,
    /// Infer sharding callback (may be null).
    pub infer_sharding: Option<
        unsafe extern "C" fn(
            data: *mut JAX_CustomCallPartitioner_Callbacks,
            args: *mut JAX_CustomCallPartitioner_InferShardingFromOperands_Args,
        ),
    >,
    /// Propagate user sharding callback (may be null).
    pub propagate_user_sharding: Option<
        unsafe extern "C" fn(
            data: *mut JAX_CustomCallPartitioner_Callbacks,
            args: *mut JAX_CustomCallPartitioner_PropagateUserSharding_Args,
        ),
    >,
    /// Whether can side effecting have replicated sharding.
    pub can_side_effecting_have_replicated_sharding: bool,
}

/// Arguments of [`PJRT_Register_Custom_Partitioner`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Register_Custom_Partitioner_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Name bytes (not NUL-terminated; length in `name_size`).
    pub name: *const c_char,
    /// Length of `name` in bytes or elements.
    pub name_size: usize,
    /// Callbacks.
    pub callbacks: *mut JAX_CustomCallPartitioner_Callbacks,
}

struct_size!(PJRT_Register_Custom_Partitioner_Args_STRUCT_SIZE = PJRT_Register_Custom_Partitioner_Args, callbacks: *mut JAX_CustomCallPartitioner_Callbacks);

/// Signature of the `PJRT_Register_Custom_Partitioner` entry; takes [`PJRT_Register_Custom_Partitioner_Args`].
pub type PJRT_Register_Custom_Partitioner =
    unsafe extern "C" fn(args: *mut PJRT_Register_Custom_Partitioner_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Register_Batch_Partitionable`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Register_Batch_Partitionable_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Name bytes (not NUL-terminated; length in `name_size`).
    pub name: *const c_char,
    /// Length of `name` in bytes or elements.
    pub name_size: usize,
}

struct_size!(PJRT_Register_Batch_Partitionable_Args_STRUCT_SIZE = PJRT_Register_Batch_Partitionable_Args, name_size: usize);

/// Signature of the `PJRT_Register_Batch_Partitionable` entry; takes [`PJRT_Register_Batch_Partitionable_Args`].
pub type PJRT_Register_Batch_Partitionable =
    unsafe extern "C" fn(args: *mut PJRT_Register_Batch_Partitionable_Args) -> *mut PJRT_Error;

/// Extension (`PJRT_Extension_Type_Custom_Partitioner`): register custom-call partitioners.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Custom_Partitioner_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Register custom partitioner callback (may be null).
    pub register_custom_partitioner: Option<PJRT_Register_Custom_Partitioner>,
    /// Register batch partitionable callback (may be null).
    pub register_batch_partitionable: Option<PJRT_Register_Batch_Partitionable>,
}

struct_size!(PJRT_Custom_Partitioner_Extension_STRUCT_SIZE = PJRT_Custom_Partitioner_Extension, register_batch_partitionable: Option<PJRT_Register_Batch_Partitionable>);

// ==== pjrt_c_api_ffi_extension.h ====

/// Header constant `PJRT_API_FFI_EXTENSION_VERSION`.
pub const PJRT_API_FFI_EXTENSION_VERSION: c_int = 3;

/// Type information for a user type registered with the FFI extension.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_FFI_Type_Info {
    /// Frees an object of this type (may be null).
    pub deleter: Option<unsafe extern "C" fn(object: *mut c_void)>,
    /// Reserved for future use; leave null.
    pub serialize: Option<unsafe extern "C" fn()>,
    /// Reserved for future use; leave null.
    pub deserialize: Option<unsafe extern "C" fn()>,
}

/// Arguments of [`PJRT_FFI_Type_Register`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_FFI_Type_Register_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Type name bytes (not NUL-terminated; length in `type_name_size`).
    pub type_name: *const c_char,
    /// Length of `type_name` in bytes or elements.
    pub type_name_size: usize,
    /// In/out: type id.
    pub type_id: i64,
    /// Type info.
    pub type_info: *mut PJRT_FFI_Type_Info,
}

struct_size!(PJRT_FFI_Type_Register_Args_STRUCT_SIZE = PJRT_FFI_Type_Register_Args, type_info: *mut PJRT_FFI_Type_Info);

/// Signature of the `PJRT_FFI_Type_Register` entry; takes [`PJRT_FFI_Type_Register_Args`].
pub type PJRT_FFI_Type_Register =
    unsafe extern "C" fn(args: *mut PJRT_FFI_Type_Register_Args) -> *mut PJRT_Error;

/// A typed user-data pointer added to an execute context.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_FFI_UserData {
    /// Type id returned by type registration.
    pub type_id: i64,
    /// The user data pointer.
    pub data: *mut c_void,
}

/// Arguments of [`PJRT_FFI_UserData_Add`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_FFI_UserData_Add_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_ExecuteContext`] to use.
    pub context: *mut PJRT_ExecuteContext,
    /// User data.
    pub user_data: PJRT_FFI_UserData,
}

struct_size!(PJRT_FFI_UserData_Add_Args_STRUCT_SIZE = PJRT_FFI_UserData_Add_Args, user_data: PJRT_FFI_UserData);

/// Signature of the `PJRT_FFI_UserData_Add` entry; takes [`PJRT_FFI_UserData_Add_Args`].
pub type PJRT_FFI_UserData_Add =
    unsafe extern "C" fn(args: *mut PJRT_FFI_UserData_Add_Args) -> *mut PJRT_Error;

/// Bit flags describing an FFI handler.
pub type PJRT_FFI_Handler_TraitsBits = i32;
/// Value `PJRT_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE` of `PJRT_FFI_Handler_TraitsBits`.
pub const PJRT_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE: PJRT_FFI_Handler_TraitsBits = 1;

/// Arguments of [`PJRT_FFI_Register_Handler`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_FFI_Register_Handler_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Custom-call target name (not NUL-terminated).
    pub target_name: *const c_char,
    /// Length of `target_name` in bytes or elements.
    pub target_name_size: usize,
    /// The handler: an `XLA_FFI_Handler` function pointer for typed calls.
    pub handler: *mut c_void,
    /// Platform the handler is for, e.g. `cpu` or `cuda` (not NUL-terminated).
    pub platform_name: *const c_char,
    /// Length of `platform_name` in bytes or elements.
    pub platform_name_size: usize,
    /// Traits.
    pub traits: PJRT_FFI_Handler_TraitsBits,
}

struct_size!(PJRT_FFI_Register_Handler_Args_STRUCT_SIZE = PJRT_FFI_Register_Handler_Args, traits: PJRT_FFI_Handler_TraitsBits);

/// Signature of the `PJRT_FFI_Register_Handler` entry; takes [`PJRT_FFI_Register_Handler_Args`].
pub type PJRT_FFI_Register_Handler =
    unsafe extern "C" fn(args: *mut PJRT_FFI_Register_Handler_Args) -> *mut PJRT_Error;

/// Typedef name the header gives [`PJRT_FFI_Extension`].
pub type PJRT_FFI = PJRT_FFI_Extension;

/// Extension (`PJRT_Extension_Type_FFI`): register XLA FFI handlers and types, attach user data.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_FFI_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Type register callback (may be null).
    pub type_register: Option<PJRT_FFI_Type_Register>,
    /// User data add callback (may be null).
    pub user_data_add: Option<PJRT_FFI_UserData_Add>,
    /// Register handler callback (may be null).
    pub register_handler: Option<PJRT_FFI_Register_Handler>,
}

struct_size!(PJRT_FFI_Extension_STRUCT_SIZE = PJRT_FFI_Extension, register_handler: Option<PJRT_FFI_Register_Handler>);

// ==== pjrt_c_api_gpu_extension.h ====

/// Header constant `PJRT_API_GPU_EXTENSION_VERSION`.
pub const PJRT_API_GPU_EXTENSION_VERSION: c_int = 2;

/// Arguments of [`PJRT_Gpu_Register_Custom_Call`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Gpu_Register_Custom_Call_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Function name bytes (not NUL-terminated; length in `function_name_size`).
    pub function_name: *const c_char,
    /// Length of `function_name` in bytes or elements.
    pub function_name_size: usize,
    /// Api version.
    pub api_version: c_int,
    /// Handler instantiate.
    pub handler_instantiate: *mut c_void,
    /// Handler prepare.
    pub handler_prepare: *mut c_void,
    /// Handler initialize.
    pub handler_initialize: *mut c_void,
    /// Handler execute.
    pub handler_execute: *mut c_void,
}

struct_size!(PJRT_Gpu_Register_Custom_Call_Args_STRUCT_SIZE = PJRT_Gpu_Register_Custom_Call_Args, handler_execute: *mut c_void);

/// Signature of the `PJRT_Gpu_Register_Custom_Call` entry; takes [`PJRT_Gpu_Register_Custom_Call_Args`].
pub type PJRT_Gpu_Register_Custom_Call =
    unsafe extern "C" fn(args: *mut PJRT_Gpu_Register_Custom_Call_Args) -> *mut PJRT_Error;

/// Extension (`PJRT_Extension_Type_Gpu_Custom_Call`): register GPU custom calls.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Gpu_Custom_Call {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Custom call callback (may be null).
    pub custom_call: Option<PJRT_Gpu_Register_Custom_Call>,
}

struct_size!(PJRT_Gpu_Custom_Call_STRUCT_SIZE = PJRT_Gpu_Custom_Call, custom_call: Option<PJRT_Gpu_Register_Custom_Call>);

// ==== pjrt_c_api_layouts_extension.h ====

/// Header constant `PJRT_API_LAYOUTS_EXTENSION_VERSION`.
pub const PJRT_API_LAYOUTS_EXTENSION_VERSION: c_int = 4;

/// Opaque `PJRT_Layouts_MemoryLayout` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Layouts_MemoryLayout {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_Layouts_SerializedLayout` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Layouts_SerializedLayout {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_Layouts_MemoryLayout_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Layouts_MemoryLayout_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_Layouts_MemoryLayout`] to use.
    pub layout: *mut PJRT_Layouts_MemoryLayout,
}

struct_size!(PJRT_Layouts_MemoryLayout_Destroy_Args_STRUCT_SIZE = PJRT_Layouts_MemoryLayout_Destroy_Args, layout: *mut PJRT_Layouts_MemoryLayout);

/// Signature of the `PJRT_Layouts_MemoryLayout_Destroy` entry; takes [`PJRT_Layouts_MemoryLayout_Destroy_Args`].
pub type PJRT_Layouts_MemoryLayout_Destroy =
    unsafe extern "C" fn(args: *mut PJRT_Layouts_MemoryLayout_Destroy_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Layouts_MemoryLayout_Serialize`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Layouts_MemoryLayout_Serialize_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_Layouts_MemoryLayout`] to use.
    pub layout: *mut PJRT_Layouts_MemoryLayout,
    /// Out: serialized bytes bytes (not NUL-terminated; length in `serialized_bytes_size`).
    pub serialized_bytes: *const c_char,
    /// Out: length of `serialized_bytes` in bytes or elements.
    pub serialized_bytes_size: usize,
    /// The [`PJRT_Layouts_SerializedLayout`] to use.
    pub serialized_layout: *mut PJRT_Layouts_SerializedLayout,
    /// Out: serialized layout deleter callback (may be null).
    pub serialized_layout_deleter:
        Option<unsafe extern "C" fn(s_layout: *mut PJRT_Layouts_SerializedLayout)>,
}

struct_size!(PJRT_Layouts_MemoryLayout_Serialize_Args_STRUCT_SIZE = PJRT_Layouts_MemoryLayout_Serialize_Args, serialized_layout_deleter: Option<unsafe extern "C" fn(s_layout: *mut PJRT_Layouts_SerializedLayout)>);

/// Signature of the `PJRT_Layouts_MemoryLayout_Serialize` entry; takes [`PJRT_Layouts_MemoryLayout_Serialize_Args`].
pub type PJRT_Layouts_MemoryLayout_Serialize =
    unsafe extern "C" fn(args: *mut PJRT_Layouts_MemoryLayout_Serialize_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Layouts_PJRT_Buffer_MemoryLayout`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_Buffer`] to use.
    pub buffer: *mut PJRT_Buffer,
    /// Out: the resulting [`PJRT_Layouts_MemoryLayout`].
    pub layout: *mut PJRT_Layouts_MemoryLayout,
}

struct_size!(PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args_STRUCT_SIZE = PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args, layout: *mut PJRT_Layouts_MemoryLayout);

/// Signature of the `PJRT_Layouts_PJRT_Buffer_MemoryLayout` entry; takes [`PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args`].
pub type PJRT_Layouts_PJRT_Buffer_MemoryLayout =
    unsafe extern "C" fn(args: *mut PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Layouts_PJRT_Client_GetDefaultLayout`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_Client`] to use.
    pub client: *mut PJRT_Client,
    /// Type.
    pub r#type: PJRT_Buffer_Type,
    /// Dims.
    pub dims: *const i64,
    /// Number of entries in `dims`.
    pub num_dims: usize,
    /// Out: the resulting [`PJRT_Layouts_MemoryLayout`].
    pub layout: *mut PJRT_Layouts_MemoryLayout,
}

struct_size!(PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args_STRUCT_SIZE = PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args, layout: *mut PJRT_Layouts_MemoryLayout);

/// Signature of the `PJRT_Layouts_PJRT_Client_GetDefaultLayout` entry; takes [`PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args`].
pub type PJRT_Layouts_PJRT_Client_GetDefaultLayout = unsafe extern "C" fn(
    args: *mut PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Layouts_PJRT_Topology_GetDefaultLayout`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology_description: *mut PJRT_TopologyDescription,
    /// Type.
    pub r#type: PJRT_Buffer_Type,
    /// Dims.
    pub dims: *const i64,
    /// Number of entries in `dims`.
    pub num_dims: usize,
    /// Out: the resulting [`PJRT_Layouts_MemoryLayout`].
    pub layout: *mut PJRT_Layouts_MemoryLayout,
}

struct_size!(PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args_STRUCT_SIZE = PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args, layout: *mut PJRT_Layouts_MemoryLayout);

/// Signature of the `PJRT_Layouts_PJRT_Topology_GetDefaultLayout` entry; takes [`PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args`].
pub type PJRT_Layouts_PJRT_Topology_GetDefaultLayout = unsafe extern "C" fn(
    args: *mut PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Layouts_PJRT_Executable_GetOutputLayouts`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_Executable`] to use.
    pub executable: *mut PJRT_Executable,
    /// Out: number of outputs.
    pub num_outputs: usize,
    /// Out: layouts.
    pub layouts: *mut *mut PJRT_Layouts_MemoryLayout,
}

struct_size!(PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args_STRUCT_SIZE = PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args, layouts: *mut *mut PJRT_Layouts_MemoryLayout);

/// Signature of the `PJRT_Layouts_PJRT_Executable_GetOutputLayouts` entry; takes [`PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args`].
pub type PJRT_Layouts_PJRT_Executable_GetOutputLayouts = unsafe extern "C" fn(
    args: *mut PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Layouts_PJRT_Executable_GetParameterLayouts`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Layouts_PJRT_Executable_GetParameterLayouts_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_Executable`] to use.
    pub executable: *mut PJRT_Executable,
    /// Out: number of parameters.
    pub num_parameters: usize,
    /// Out: layouts.
    pub layouts: *mut *mut PJRT_Layouts_MemoryLayout,
}

struct_size!(PJRT_Layouts_PJRT_Executable_GetParameterLayouts_Args_STRUCT_SIZE = PJRT_Layouts_PJRT_Executable_GetParameterLayouts_Args, layouts: *mut *mut PJRT_Layouts_MemoryLayout);

/// Signature of the `PJRT_Layouts_PJRT_Executable_GetParameterLayouts` entry; takes [`PJRT_Layouts_PJRT_Executable_GetParameterLayouts_Args`].
pub type PJRT_Layouts_PJRT_Executable_GetParameterLayouts = unsafe extern "C" fn(
    args: *mut PJRT_Layouts_PJRT_Executable_GetParameterLayouts_Args,
)
    -> *mut PJRT_Error;

/// Extension (`PJRT_Extension_Type_Layouts`): query and serialize buffer and executable layouts.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Layouts_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Function table slot for [`PJRT_Layouts_MemoryLayout_Destroy`].
    pub PJRT_Layouts_MemoryLayout_Destroy: Option<PJRT_Layouts_MemoryLayout_Destroy>,
    /// Function table slot for [`PJRT_Layouts_MemoryLayout_Serialize`].
    pub PJRT_Layouts_MemoryLayout_Serialize: Option<PJRT_Layouts_MemoryLayout_Serialize>,
    /// Function table slot for [`PJRT_Layouts_PJRT_Client_GetDefaultLayout`].
    pub PJRT_Layouts_PJRT_Client_GetDefaultLayout:
        Option<PJRT_Layouts_PJRT_Client_GetDefaultLayout>,
    /// Function table slot for [`PJRT_Layouts_PJRT_Buffer_MemoryLayout`].
    pub PJRT_Layouts_PJRT_Buffer_MemoryLayout: Option<PJRT_Layouts_PJRT_Buffer_MemoryLayout>,
    /// Function table slot for [`PJRT_Layouts_PJRT_Topology_GetDefaultLayout`].
    pub PJRT_Layouts_PJRT_Topology_GetDefaultLayout:
        Option<PJRT_Layouts_PJRT_Topology_GetDefaultLayout>,
    /// Function table slot for [`PJRT_Layouts_PJRT_Executable_GetOutputLayouts`].
    pub PJRT_Layouts_PJRT_Executable_GetOutputLayouts:
        Option<PJRT_Layouts_PJRT_Executable_GetOutputLayouts>,
    /// Function table slot for [`PJRT_Layouts_PJRT_Executable_GetParameterLayouts`].
    pub PJRT_Layouts_PJRT_Executable_GetParameterLayouts:
        Option<PJRT_Layouts_PJRT_Executable_GetParameterLayouts>,
}

struct_size!(PJRT_Layouts_Extension_STRUCT_SIZE = PJRT_Layouts_Extension, PJRT_Layouts_PJRT_Executable_GetParameterLayouts: Option<PJRT_Layouts_PJRT_Executable_GetParameterLayouts>);

// ==== pjrt_c_api_megascale_extension.h ====

/// Header constant `PJRT_API_MEGASCALE_EXTENSION_VERSION`.
pub const PJRT_API_MEGASCALE_EXTENSION_VERSION: c_int = 1;

/// Opaque `PJRT_Megascale_ClientContext` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Megascale_ClientContext {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_Megascale_NumDevicesPerSlice` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Megascale_NumDevicesPerSlice {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_Megascale_SerializedConfig` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Megascale_SerializedConfig {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_Megascale_CreateClientContextFromPjRtClient`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_CreateClientContextFromPjRtClient_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Client`] to use.
    pub client: *mut PJRT_Client,
    /// Out: the resulting [`PJRT_Megascale_ClientContext`].
    pub client_context: *mut PJRT_Megascale_ClientContext,
}

struct_size!(PJRT_Megascale_CreateClientContextFromPjRtClient_Args_STRUCT_SIZE = PJRT_Megascale_CreateClientContextFromPjRtClient_Args, client_context: *mut PJRT_Megascale_ClientContext);

/// Signature of the `PJRT_Megascale_CreateClientContextFromPjRtClient` entry; takes [`PJRT_Megascale_CreateClientContextFromPjRtClient_Args`].
pub type PJRT_Megascale_CreateClientContextFromPjRtClient = unsafe extern "C" fn(
    args: *mut PJRT_Megascale_CreateClientContextFromPjRtClient_Args,
)
    -> *mut PJRT_Error;

/// Arguments of [`PJRT_Megascale_CreateDefaultClientContext`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_CreateDefaultClientContext_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Out: the resulting [`PJRT_Megascale_ClientContext`].
    pub client_context: *mut PJRT_Megascale_ClientContext,
}

struct_size!(PJRT_Megascale_CreateDefaultClientContext_Args_STRUCT_SIZE = PJRT_Megascale_CreateDefaultClientContext_Args, client_context: *mut PJRT_Megascale_ClientContext);

/// Signature of the `PJRT_Megascale_CreateDefaultClientContext` entry; takes [`PJRT_Megascale_CreateDefaultClientContext_Args`].
pub type PJRT_Megascale_CreateDefaultClientContext = unsafe extern "C" fn(
    args: *mut PJRT_Megascale_CreateDefaultClientContext_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Megascale_DeleteClientContext`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_DeleteClientContext_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Megascale_ClientContext`] to use.
    pub client_context: *mut PJRT_Megascale_ClientContext,
}

struct_size!(PJRT_Megascale_DeleteClientContext_Args_STRUCT_SIZE = PJRT_Megascale_DeleteClientContext_Args, client_context: *mut PJRT_Megascale_ClientContext);

/// Signature of the `PJRT_Megascale_DeleteClientContext` entry; takes [`PJRT_Megascale_DeleteClientContext_Args`].
pub type PJRT_Megascale_DeleteClientContext =
    unsafe extern "C" fn(args: *mut PJRT_Megascale_DeleteClientContext_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Megascale_CreateAoTConfig`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_CreateAoTConfig_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Number of slices.
    pub num_slices: i32,
    /// Out: the resulting [`PJRT_MultiSlice_Config`].
    pub multi_slice_config: *mut PJRT_MultiSlice_Config,
}

struct_size!(PJRT_Megascale_CreateAoTConfig_Args_STRUCT_SIZE = PJRT_Megascale_CreateAoTConfig_Args, multi_slice_config: *mut PJRT_MultiSlice_Config);

/// Signature of the `PJRT_Megascale_CreateAoTConfig` entry; takes [`PJRT_Megascale_CreateAoTConfig_Args`].
pub type PJRT_Megascale_CreateAoTConfig =
    unsafe extern "C" fn(args: *mut PJRT_Megascale_CreateAoTConfig_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Megascale_CreateMultiSliceConfig`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_CreateMultiSliceConfig_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Number of slices.
    pub num_slices: i32,
    /// Local slice id.
    pub local_slice_id: i32,
    /// Local host id.
    pub local_host_id: i32,
    /// Endpoint addresses bytes (not NUL-terminated; length in `endpoint_addresses_size`).
    pub endpoint_addresses: *const c_char,
    /// Length of `endpoint_addresses` in bytes or elements.
    pub endpoint_addresses_size: i32,
    /// Dcn topology bytes (not NUL-terminated; length in `dcn_topology_size`).
    pub dcn_topology: *const c_char,
    /// Length of `dcn_topology` in bytes or elements.
    pub dcn_topology_size: i32,
    /// The [`PJRT_Megascale_ClientContext`] to use.
    pub client_context: *mut PJRT_Megascale_ClientContext,
    /// Out: the resulting [`PJRT_MultiSlice_Config`].
    pub multi_slice_config: *mut PJRT_MultiSlice_Config,
}

struct_size!(PJRT_Megascale_CreateMultiSliceConfig_Args_STRUCT_SIZE = PJRT_Megascale_CreateMultiSliceConfig_Args, multi_slice_config: *mut PJRT_MultiSlice_Config);

/// Signature of the `PJRT_Megascale_CreateMultiSliceConfig` entry; takes [`PJRT_Megascale_CreateMultiSliceConfig_Args`].
pub type PJRT_Megascale_CreateMultiSliceConfig =
    unsafe extern "C" fn(args: *mut PJRT_Megascale_CreateMultiSliceConfig_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Megascale_ClientContext_Initialize`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_ClientContext_Initialize_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Megascale_ClientContext`] to use.
    pub client_context: *mut PJRT_Megascale_ClientContext,
}

struct_size!(PJRT_Megascale_ClientContext_Initialize_Args_STRUCT_SIZE = PJRT_Megascale_ClientContext_Initialize_Args, client_context: *mut PJRT_Megascale_ClientContext);

/// Signature of the `PJRT_Megascale_ClientContext_Initialize` entry; takes [`PJRT_Megascale_ClientContext_Initialize_Args`].
pub type PJRT_Megascale_ClientContext_Initialize = unsafe extern "C" fn(
    args: *mut PJRT_Megascale_ClientContext_Initialize_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Megascale_ClientContext_UnblockPendingWork`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_ClientContext_UnblockPendingWork_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Megascale_ClientContext`] to use.
    pub client_context: *mut PJRT_Megascale_ClientContext,
    /// Launch id.
    pub launch_id: i32,
    /// Expire after ms.
    pub expire_after_ms: i64,
}

struct_size!(PJRT_Megascale_ClientContext_UnblockPendingWork_Args_STRUCT_SIZE = PJRT_Megascale_ClientContext_UnblockPendingWork_Args, expire_after_ms: i64);

/// Signature of the `PJRT_Megascale_ClientContext_UnblockPendingWork` entry; takes [`PJRT_Megascale_ClientContext_UnblockPendingWork_Args`].
pub type PJRT_Megascale_ClientContext_UnblockPendingWork = unsafe extern "C" fn(
    args: *mut PJRT_Megascale_ClientContext_UnblockPendingWork_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Megascale_ClientContext_MegascalePort`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_ClientContext_MegascalePort_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Megascale_ClientContext`] to use.
    pub client_context: *mut PJRT_Megascale_ClientContext,
    /// Out: port.
    pub port: i32,
}

struct_size!(PJRT_Megascale_ClientContext_MegascalePort_Args_STRUCT_SIZE = PJRT_Megascale_ClientContext_MegascalePort_Args, port: i32);

/// Signature of the `PJRT_Megascale_ClientContext_MegascalePort` entry; takes [`PJRT_Megascale_ClientContext_MegascalePort_Args`].
pub type PJRT_Megascale_ClientContext_MegascalePort = unsafe extern "C" fn(
    args: *mut PJRT_Megascale_ClientContext_MegascalePort_Args,
) -> *mut PJRT_Error;

/// Addresses and ids of the processes of a multi-slice job.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_ProcessesInfo {
    /// Addresses.
    pub addresses: *mut *const c_char,
    /// Address sizes.
    pub address_sizes: *mut usize,
    /// Number of entries in `addresses`.
    pub num_addresses: usize,
    /// Slice indexes.
    pub slice_indexes: *mut i32,
    /// Number of entries in `slice_indexes`.
    pub num_slice_indexes: usize,
    /// Per slice indexes.
    pub per_slice_indexes: *mut i32,
    /// Number of entries in `per_slice_indexes`.
    pub num_per_slice_indexes: usize,
    /// Number of devices per process.
    pub num_devices_per_process: i32,
}

/// Arguments of [`PJRT_Megascale_CreateMegascaleCollectives`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_CreateMegascaleCollectives_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Megascale_ClientContext`] to use.
    pub client_context: *mut PJRT_Megascale_ClientContext,
    /// Processes info.
    pub processes_info: *mut PJRT_Megascale_ProcessesInfo,
    /// Dcn topology bytes (not NUL-terminated; length in `dcn_topology_size`).
    pub dcn_topology: *const c_char,
    /// Length of `dcn_topology` in bytes or elements.
    pub dcn_topology_size: usize,
    /// Out: the resulting [`PJRT_Collectives`].
    pub collectives: *mut PJRT_Collectives,
}

struct_size!(PJRT_Megascale_CreateMegascaleCollectives_Args_STRUCT_SIZE = PJRT_Megascale_CreateMegascaleCollectives_Args, collectives: *mut PJRT_Collectives);

/// Signature of the `PJRT_Megascale_CreateMegascaleCollectives` entry; takes [`PJRT_Megascale_CreateMegascaleCollectives_Args`].
pub type PJRT_Megascale_CreateMegascaleCollectives = unsafe extern "C" fn(
    args: *mut PJRT_Megascale_CreateMegascaleCollectives_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Megascale_DeviceId_To_MegascaleId`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_DeviceId_To_MegascaleId_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Slice id.
    pub slice_id: i32,
    /// Per slice device id.
    pub per_slice_device_id: i32,
    /// Out: megascale id.
    pub megascale_id: i64,
}

struct_size!(PJRT_Megascale_DeviceId_To_MegascaleId_Args_STRUCT_SIZE = PJRT_Megascale_DeviceId_To_MegascaleId_Args, megascale_id: i64);

/// Signature of the `PJRT_Megascale_DeviceId_To_MegascaleId` entry; takes [`PJRT_Megascale_DeviceId_To_MegascaleId_Args`].
pub type PJRT_Megascale_DeviceId_To_MegascaleId =
    unsafe extern "C" fn(args: *mut PJRT_Megascale_DeviceId_To_MegascaleId_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Megascale_MegascaleId_To_DeviceId`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_MegascaleId_To_DeviceId_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Megascale id.
    pub megascale_id: i64,
    /// Out: slice id.
    pub slice_id: i32,
    /// Out: per slice device id.
    pub per_slice_device_id: i32,
}

struct_size!(PJRT_Megascale_MegascaleId_To_DeviceId_Args_STRUCT_SIZE = PJRT_Megascale_MegascaleId_To_DeviceId_Args, per_slice_device_id: i32);

/// Signature of the `PJRT_Megascale_MegascaleId_To_DeviceId` entry; takes [`PJRT_Megascale_MegascaleId_To_DeviceId_Args`].
pub type PJRT_Megascale_MegascaleId_To_DeviceId =
    unsafe extern "C" fn(args: *mut PJRT_Megascale_MegascaleId_To_DeviceId_Args) -> *mut PJRT_Error;

/// Called with a serialized error from the Megascale runtime.
pub type PJRT_Megascale_ErrorHandler = unsafe extern "C" fn(
    serialized_error: *const c_char,
    serialized_error_size: usize,
    user_data: *mut c_void,
);

/// Arguments of [`PJRT_Megascale_RegisterErrorHandler`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_RegisterErrorHandler_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Handler name bytes (not NUL-terminated; length in `handler_name_size`).
    pub handler_name: *const c_char,
    /// Length of `handler_name` in bytes or elements.
    pub handler_name_size: usize,
    /// Handler callback (may be null).
    pub handler: Option<PJRT_Megascale_ErrorHandler>,
    /// User data.
    pub user_data: *mut c_void,
}

struct_size!(PJRT_Megascale_RegisterErrorHandler_Args_STRUCT_SIZE = PJRT_Megascale_RegisterErrorHandler_Args, user_data: *mut c_void);

/// Signature of the `PJRT_Megascale_RegisterErrorHandler` entry; takes [`PJRT_Megascale_RegisterErrorHandler_Args`].
pub type PJRT_Megascale_RegisterErrorHandler =
    unsafe extern "C" fn(args: *mut PJRT_Megascale_RegisterErrorHandler_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Megascale_UnregisterErrorHandler`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_UnregisterErrorHandler_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Handler name bytes (not NUL-terminated; length in `handler_name_size`).
    pub handler_name: *const c_char,
    /// Length of `handler_name` in bytes or elements.
    pub handler_name_size: usize,
}

struct_size!(PJRT_Megascale_UnregisterErrorHandler_Args_STRUCT_SIZE = PJRT_Megascale_UnregisterErrorHandler_Args, handler_name_size: usize);

/// Signature of the `PJRT_Megascale_UnregisterErrorHandler` entry; takes [`PJRT_Megascale_UnregisterErrorHandler_Args`].
pub type PJRT_Megascale_UnregisterErrorHandler =
    unsafe extern "C" fn(args: *mut PJRT_Megascale_UnregisterErrorHandler_Args) -> *mut PJRT_Error;

/// Opaque `PJRT_Megascale_ErrorAggregator` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Megascale_ErrorAggregator {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_Megascale_ErrorDigest` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Megascale_ErrorDigest {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_Megascale_ErrorAggregator_Create`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_ErrorAggregator_Create_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// App type bytes (not NUL-terminated; length in `app_type_size`).
    pub app_type: *const c_char,
    /// Length of `app_type` in bytes or elements.
    pub app_type_size: usize,
    /// Out: the resulting [`PJRT_Megascale_ErrorAggregator`].
    pub aggregator: *mut PJRT_Megascale_ErrorAggregator,
}

struct_size!(PJRT_Megascale_ErrorAggregator_Create_Args_STRUCT_SIZE = PJRT_Megascale_ErrorAggregator_Create_Args, aggregator: *mut PJRT_Megascale_ErrorAggregator);

/// Signature of the `PJRT_Megascale_ErrorAggregator_Create` entry; takes [`PJRT_Megascale_ErrorAggregator_Create_Args`].
pub type PJRT_Megascale_ErrorAggregator_Create =
    unsafe extern "C" fn(args: *mut PJRT_Megascale_ErrorAggregator_Create_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Megascale_ErrorAggregator_Delete`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_ErrorAggregator_Delete_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Megascale_ErrorAggregator`] to use.
    pub aggregator: *mut PJRT_Megascale_ErrorAggregator,
}

struct_size!(PJRT_Megascale_ErrorAggregator_Delete_Args_STRUCT_SIZE = PJRT_Megascale_ErrorAggregator_Delete_Args, aggregator: *mut PJRT_Megascale_ErrorAggregator);

/// Signature of the `PJRT_Megascale_ErrorAggregator_Delete` entry; takes [`PJRT_Megascale_ErrorAggregator_Delete_Args`].
pub type PJRT_Megascale_ErrorAggregator_Delete =
    unsafe extern "C" fn(args: *mut PJRT_Megascale_ErrorAggregator_Delete_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Megascale_ErrorDigest_Delete`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_ErrorDigest_Delete_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Megascale_ErrorDigest`] to use.
    pub digest: *mut PJRT_Megascale_ErrorDigest,
}

struct_size!(PJRT_Megascale_ErrorDigest_Delete_Args_STRUCT_SIZE = PJRT_Megascale_ErrorDigest_Delete_Args, digest: *mut PJRT_Megascale_ErrorDigest);

/// Signature of the `PJRT_Megascale_ErrorDigest_Delete` entry; takes [`PJRT_Megascale_ErrorDigest_Delete_Args`].
pub type PJRT_Megascale_ErrorDigest_Delete =
    unsafe extern "C" fn(args: *mut PJRT_Megascale_ErrorDigest_Delete_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Megascale_ErrorAggregator_AddError`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_ErrorAggregator_AddError_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Megascale_ErrorAggregator`] to use.
    pub aggregator: *mut PJRT_Megascale_ErrorAggregator,
    /// Worker id bytes (not NUL-terminated; length in `worker_id_size`).
    pub worker_id: *const c_char,
    /// Length of `worker_id` in bytes or elements.
    pub worker_id_size: usize,
    /// Serialized error bytes (not NUL-terminated; length in `serialized_error_size`).
    pub serialized_error: *const c_char,
    /// Length of `serialized_error` in bytes or elements.
    pub serialized_error_size: usize,
}

struct_size!(PJRT_Megascale_ErrorAggregator_AddError_Args_STRUCT_SIZE = PJRT_Megascale_ErrorAggregator_AddError_Args, serialized_error_size: usize);

/// Signature of the `PJRT_Megascale_ErrorAggregator_AddError` entry; takes [`PJRT_Megascale_ErrorAggregator_AddError_Args`].
pub type PJRT_Megascale_ErrorAggregator_AddError = unsafe extern "C" fn(
    args: *mut PJRT_Megascale_ErrorAggregator_AddError_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Megascale_ErrorAggregator_ProcessAndShutdown`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_ErrorAggregator_ProcessAndShutdown_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Megascale_ErrorAggregator`] to use.
    pub aggregator: *mut PJRT_Megascale_ErrorAggregator,
    /// Out: the resulting [`PJRT_Megascale_ErrorDigest`].
    pub digest: *mut PJRT_Megascale_ErrorDigest,
}

struct_size!(PJRT_Megascale_ErrorAggregator_ProcessAndShutdown_Args_STRUCT_SIZE = PJRT_Megascale_ErrorAggregator_ProcessAndShutdown_Args, digest: *mut PJRT_Megascale_ErrorDigest);

/// Signature of the `PJRT_Megascale_ErrorAggregator_ProcessAndShutdown` entry; takes [`PJRT_Megascale_ErrorAggregator_ProcessAndShutdown_Args`].
pub type PJRT_Megascale_ErrorAggregator_ProcessAndShutdown =
    unsafe extern "C" fn(
        args: *mut PJRT_Megascale_ErrorAggregator_ProcessAndShutdown_Args,
    ) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Megascale_ErrorAggregator_LogErrorDigest`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_ErrorAggregator_LogErrorDigest_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Megascale_ErrorAggregator`] to use.
    pub aggregator: *mut PJRT_Megascale_ErrorAggregator,
    /// The [`PJRT_Megascale_ErrorDigest`] to use.
    pub digest: *mut PJRT_Megascale_ErrorDigest,
}

struct_size!(PJRT_Megascale_ErrorAggregator_LogErrorDigest_Args_STRUCT_SIZE = PJRT_Megascale_ErrorAggregator_LogErrorDigest_Args, digest: *mut PJRT_Megascale_ErrorDigest);

/// Signature of the `PJRT_Megascale_ErrorAggregator_LogErrorDigest` entry; takes [`PJRT_Megascale_ErrorAggregator_LogErrorDigest_Args`].
pub type PJRT_Megascale_ErrorAggregator_LogErrorDigest = unsafe extern "C" fn(
    args: *mut PJRT_Megascale_ErrorAggregator_LogErrorDigest_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Megascale_ErrorAggregator_Size`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_ErrorAggregator_Size_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Megascale_ErrorAggregator`] to use.
    pub aggregator: *mut PJRT_Megascale_ErrorAggregator,
    /// Out: size.
    pub size: usize,
}

struct_size!(PJRT_Megascale_ErrorAggregator_Size_Args_STRUCT_SIZE = PJRT_Megascale_ErrorAggregator_Size_Args, size: usize);

/// Signature of the `PJRT_Megascale_ErrorAggregator_Size` entry; takes [`PJRT_Megascale_ErrorAggregator_Size_Args`].
pub type PJRT_Megascale_ErrorAggregator_Size =
    unsafe extern "C" fn(args: *mut PJRT_Megascale_ErrorAggregator_Size_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Megascale_ErrorAggregator_Active`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_ErrorAggregator_Active_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Megascale_ErrorAggregator`] to use.
    pub aggregator: *mut PJRT_Megascale_ErrorAggregator,
    /// Out: whether active.
    pub active: bool,
}

struct_size!(PJRT_Megascale_ErrorAggregator_Active_Args_STRUCT_SIZE = PJRT_Megascale_ErrorAggregator_Active_Args, active: bool);

/// Signature of the `PJRT_Megascale_ErrorAggregator_Active` entry; takes [`PJRT_Megascale_ErrorAggregator_Active_Args`].
pub type PJRT_Megascale_ErrorAggregator_Active =
    unsafe extern "C" fn(args: *mut PJRT_Megascale_ErrorAggregator_Active_Args) -> *mut PJRT_Error;

/// Opaque `PJRT_Megascale_SerializedAddresses` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Megascale_SerializedAddresses {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_Megascale_GetInterfaceAddressesHelper`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_GetInterfaceAddressesHelper_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Megascale port name bytes (not NUL-terminated; length in `megascale_port_name_size`).
    pub megascale_port_name: *const c_char,
    /// Length of `megascale_port_name` in bytes or elements.
    pub megascale_port_name_size: usize,
    /// Megascale port.
    pub megascale_port: i32,
    /// Interface prefixes.
    pub interface_prefixes: *mut *const c_char,
    /// Interface prefixes sizes.
    pub interface_prefixes_sizes: *const usize,
    /// Number of entries in `interface_prefixes`.
    pub num_interface_prefixes: usize,
    /// Whether use all interfaces.
    pub use_all_interfaces: bool,
    /// Whether limit to process numa local interfaces.
    pub limit_to_process_numa_local_interfaces: bool,
    /// Out: serialized addresses.
    pub serialized_addresses: *mut *const c_char,
    /// Out: serialized addresses sizes.
    pub serialized_addresses_sizes: *mut usize,
    /// Out: number of addresses.
    pub num_addresses: usize,
    /// Out: the resulting [`PJRT_Megascale_SerializedAddresses`].
    pub addresses: *mut PJRT_Megascale_SerializedAddresses,
    /// Out: addresses deleter callback (may be null).
    pub addresses_deleter:
        Option<unsafe extern "C" fn(ptr: *mut PJRT_Megascale_SerializedAddresses)>,
}

struct_size!(PJRT_Megascale_GetInterfaceAddressesHelper_Args_STRUCT_SIZE = PJRT_Megascale_GetInterfaceAddressesHelper_Args, addresses_deleter: Option<unsafe extern "C" fn(ptr: *mut PJRT_Megascale_SerializedAddresses)>);

/// Signature of the `PJRT_Megascale_GetInterfaceAddressesHelper` entry; takes [`PJRT_Megascale_GetInterfaceAddressesHelper_Args`].
pub type PJRT_Megascale_GetInterfaceAddressesHelper = unsafe extern "C" fn(
    args: *mut PJRT_Megascale_GetInterfaceAddressesHelper_Args,
) -> *mut PJRT_Error;

/// Opaque `PJRT_Megascale_SerializedError` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Megascale_SerializedError {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_Megascale_GetOrCreateRuntimeError`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_GetOrCreateRuntimeError_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Error type.
    pub error_type: i32,
    /// Start time nanos.
    pub start_time_nanos: i64,
    /// Status code.
    pub status_code: i32,
    /// Status message bytes (not NUL-terminated; length in `status_message_size`).
    pub status_message: *const c_char,
    /// Length of `status_message` in bytes or elements.
    pub status_message_size: usize,
    /// Launch id.
    pub launch_id: i32,
    /// Whether has unrecoverable error type.
    pub has_unrecoverable_error_type: bool,
    /// Unrecoverable error type.
    pub unrecoverable_error_type: i32,
    /// Out: serialized error bytes (not NUL-terminated; length in `serialized_error_size`).
    pub serialized_error: *const c_char,
    /// Out: length of `serialized_error` in bytes or elements.
    pub serialized_error_size: usize,
    /// Out: whether is new error.
    pub is_new_error: bool,
    /// Out: the resulting [`PJRT_Megascale_SerializedError`].
    pub error: *mut PJRT_Megascale_SerializedError,
    /// Out: error deleter callback (may be null).
    pub error_deleter: Option<unsafe extern "C" fn(ptr: *mut PJRT_Megascale_SerializedError)>,
}

struct_size!(PJRT_Megascale_GetOrCreateRuntimeError_Args_STRUCT_SIZE = PJRT_Megascale_GetOrCreateRuntimeError_Args, error_deleter: Option<unsafe extern "C" fn(ptr: *mut PJRT_Megascale_SerializedError)>);

/// Signature of the `PJRT_Megascale_GetOrCreateRuntimeError` entry; takes [`PJRT_Megascale_GetOrCreateRuntimeError_Args`].
pub type PJRT_Megascale_GetOrCreateRuntimeError =
    unsafe extern "C" fn(args: *mut PJRT_Megascale_GetOrCreateRuntimeError_Args) -> *mut PJRT_Error;

/// Extension (`PJRT_Extension_Type_Megascale`): multi-slice (DCN) runtime control.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Megascale_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Create client context from pjrt client callback (may be null).
    pub create_client_context_from_pjrt_client:
        Option<PJRT_Megascale_CreateClientContextFromPjRtClient>,
    /// Create default client context callback (may be null).
    pub create_default_client_context: Option<PJRT_Megascale_CreateDefaultClientContext>,
    /// Delete client context callback (may be null).
    pub delete_client_context: Option<PJRT_Megascale_DeleteClientContext>,
    /// Create aot config callback (may be null).
    pub create_aot_config: Option<PJRT_Megascale_CreateAoTConfig>,
    /// Create multi slice config callback (may be null).
    pub create_multi_slice_config: Option<PJRT_Megascale_CreateMultiSliceConfig>,
    /// Delete multi slice config.
    pub delete_multi_slice_config: *mut c_void,
    /// Multi slice config num slices.
    pub multi_slice_config_num_slices: *mut c_void,
    /// Multi slice config slice id.
    pub multi_slice_config_slice_id: *mut c_void,
    /// Multi slice config get num devices per slice.
    pub multi_slice_config_get_num_devices_per_slice: *mut c_void,
    /// Multi slice config serialize.
    pub multi_slice_config_serialize: *mut c_void,
    /// Client context initialize callback (may be null).
    pub client_context_initialize: Option<PJRT_Megascale_ClientContext_Initialize>,
    /// Client context unblock pending work callback (may be null).
    pub client_context_unblock_pending_work:
        Option<PJRT_Megascale_ClientContext_UnblockPendingWork>,
    /// Client context megascale port callback (may be null).
    pub client_context_megascale_port: Option<PJRT_Megascale_ClientContext_MegascalePort>,
    /// Create megascale collectives callback (may be null).
    pub create_megascale_collectives: Option<PJRT_Megascale_CreateMegascaleCollectives>,
    /// Device id to megascale id callback (may be null).
    pub device_id_to_megascale_id: Option<PJRT_Megascale_DeviceId_To_MegascaleId>,
    /// Megascale id to device id callback (may be null).
    pub megascale_id_to_device_id: Option<PJRT_Megascale_MegascaleId_To_DeviceId>,
    /// Register megascale error handler callback (may be null).
    pub register_megascale_error_handler: Option<PJRT_Megascale_RegisterErrorHandler>,
    /// Unregister megascale error handler callback (may be null).
    pub unregister_megascale_error_handler: Option<PJRT_Megascale_UnregisterErrorHandler>,
    /// Error aggregator create callback (may be null).
    pub error_aggregator_create: Option<PJRT_Megascale_ErrorAggregator_Create>,
    /// Error aggregator delete callback (may be null).
    pub error_aggregator_delete: Option<PJRT_Megascale_ErrorAggregator_Delete>,
    /// Error digest delete callback (may be null).
    pub error_digest_delete: Option<PJRT_Megascale_ErrorDigest_Delete>,
    /// Error aggregator add error callback (may be null).
    pub error_aggregator_add_error: Option<PJRT_Megascale_ErrorAggregator_AddError>,
    /// Error aggregator process and shutdown callback (may be null).
    pub error_aggregator_process_and_shutdown:
        Option<PJRT_Megascale_ErrorAggregator_ProcessAndShutdown>,
    /// Error aggregator log error digest callback (may be null).
    pub error_aggregator_log_error_digest: Option<PJRT_Megascale_ErrorAggregator_LogErrorDigest>,
    /// Error aggregator size callback (may be null).
    pub error_aggregator_size: Option<PJRT_Megascale_ErrorAggregator_Size>,
    /// Error aggregator active callback (may be null).
    pub error_aggregator_active: Option<PJRT_Megascale_ErrorAggregator_Active>,
    /// Get interface addresses helper callback (may be null).
    pub get_interface_addresses_helper: Option<PJRT_Megascale_GetInterfaceAddressesHelper>,
    /// Get or create runtime error callback (may be null).
    pub get_or_create_runtime_error: Option<PJRT_Megascale_GetOrCreateRuntimeError>,
}

struct_size!(PJRT_Megascale_Extension_STRUCT_SIZE = PJRT_Megascale_Extension, get_or_create_runtime_error: Option<PJRT_Megascale_GetOrCreateRuntimeError>);

// ==== pjrt_c_api_memory_descriptions_extension.h ====

/// Header constant `PJRT_API_MEMORY_DESCRIPTIONS_EXTENSION_VERSION`.
pub const PJRT_API_MEMORY_DESCRIPTIONS_EXTENSION_VERSION: c_int = 1;

/// Opaque `PJRT_MemoryDescription` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_MemoryDescription {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_DeviceDescription_MemoryDescriptions`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_DeviceDescription_MemoryDescriptions_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_DeviceDescription`] to use.
    pub device_description: *mut PJRT_DeviceDescription,
    /// Out: memory descriptions.
    pub memory_descriptions: *const *const PJRT_MemoryDescription,
    /// Out: number of entries in `memory_descriptions`.
    pub num_memory_descriptions: usize,
    /// Out: default memory index.
    pub default_memory_index: usize,
}

struct_size!(PJRT_DeviceDescription_MemoryDescriptions_Args_STRUCT_SIZE = PJRT_DeviceDescription_MemoryDescriptions_Args, default_memory_index: usize);

/// Signature of the `PJRT_DeviceDescription_MemoryDescriptions` entry; takes [`PJRT_DeviceDescription_MemoryDescriptions_Args`].
pub type PJRT_DeviceDescription_MemoryDescriptions = unsafe extern "C" fn(
    args: *mut PJRT_DeviceDescription_MemoryDescriptions_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_MemoryDescription_Kind`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_MemoryDescription_Kind_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_MemoryDescription`] to use.
    pub memory_description: *const PJRT_MemoryDescription,
    /// Out: kind bytes (not NUL-terminated; length in `kind_size`).
    pub kind: *const c_char,
    /// Out: length of `kind` in bytes or elements.
    pub kind_size: usize,
    /// Out: kind id.
    pub kind_id: c_int,
}

struct_size!(PJRT_MemoryDescription_Kind_Args_STRUCT_SIZE = PJRT_MemoryDescription_Kind_Args, kind_id: c_int);

/// Signature of the `PJRT_MemoryDescription_Kind` entry; takes [`PJRT_MemoryDescription_Kind_Args`].
pub type PJRT_MemoryDescription_Kind =
    unsafe extern "C" fn(args: *mut PJRT_MemoryDescription_Kind_Args) -> *mut PJRT_Error;

/// Extension (`PJRT_Extension_Type_MemoryDescriptions`): memory kinds of a device description.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_MemoryDescriptions_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Function table slot for [`PJRT_DeviceDescription_MemoryDescriptions`].
    pub PJRT_DeviceDescription_MemoryDescriptions:
        Option<PJRT_DeviceDescription_MemoryDescriptions>,
    /// Function table slot for [`PJRT_MemoryDescription_Kind`].
    pub PJRT_MemoryDescription_Kind: Option<PJRT_MemoryDescription_Kind>,
}

struct_size!(PJRT_MemoryDescriptions_Extension_STRUCT_SIZE = PJRT_MemoryDescriptions_Extension, PJRT_MemoryDescription_Kind: Option<PJRT_MemoryDescription_Kind>);

// ==== pjrt_c_api_multi_slice_extension.h ====

/// Header constant `PJRT_API_MULTI_SLICE_EXTENSION_VERSION`.
pub const PJRT_API_MULTI_SLICE_EXTENSION_VERSION: c_int = 1;

/// Opaque `PJRT_MultiSlice_NumDevicesPerSlice` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_MultiSlice_NumDevicesPerSlice {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_MultiSlice_SerializedConfig` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_MultiSlice_SerializedConfig {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_MultiSlice_Config_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_MultiSlice_Config_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_MultiSlice_Config`] to use.
    pub config: *mut PJRT_MultiSlice_Config,
}

struct_size!(PJRT_MultiSlice_Config_Destroy_Args_STRUCT_SIZE = PJRT_MultiSlice_Config_Destroy_Args, config: *mut PJRT_MultiSlice_Config);

/// Signature of the `PJRT_MultiSlice_Config_Destroy` entry; takes [`PJRT_MultiSlice_Config_Destroy_Args`].
pub type PJRT_MultiSlice_Config_Destroy =
    unsafe extern "C" fn(args: *mut PJRT_MultiSlice_Config_Destroy_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_MultiSlice_Config_NumSlices`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_MultiSlice_Config_NumSlices_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_MultiSlice_Config`] to use.
    pub config: *mut PJRT_MultiSlice_Config,
    /// Out: number of slices.
    pub num_slices: i32,
}

struct_size!(PJRT_MultiSlice_Config_NumSlices_Args_STRUCT_SIZE = PJRT_MultiSlice_Config_NumSlices_Args, num_slices: i32);

/// Signature of the `PJRT_MultiSlice_Config_NumSlices` entry; takes [`PJRT_MultiSlice_Config_NumSlices_Args`].
pub type PJRT_MultiSlice_Config_NumSlices =
    unsafe extern "C" fn(args: *mut PJRT_MultiSlice_Config_NumSlices_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_MultiSlice_Config_SliceId`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_MultiSlice_Config_SliceId_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_MultiSlice_Config`] to use.
    pub config: *mut PJRT_MultiSlice_Config,
    /// Out: slice id.
    pub slice_id: i32,
}

struct_size!(PJRT_MultiSlice_Config_SliceId_Args_STRUCT_SIZE = PJRT_MultiSlice_Config_SliceId_Args, slice_id: i32);

/// Signature of the `PJRT_MultiSlice_Config_SliceId` entry; takes [`PJRT_MultiSlice_Config_SliceId_Args`].
pub type PJRT_MultiSlice_Config_SliceId =
    unsafe extern "C" fn(args: *mut PJRT_MultiSlice_Config_SliceId_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_MultiSlice_Config_NumDevicesPerSlice`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_MultiSlice_Config_NumDevicesPerSlice_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_MultiSlice_Config`] to use.
    pub config: *mut PJRT_MultiSlice_Config,
    /// Out: number of devices per slice map.
    pub num_devices_per_slice_map: usize,
    /// Out: slice ids.
    pub slice_ids: *const i32,
    /// Out: number of devices.
    pub num_devices: *const i32,
    /// Out: the resulting [`PJRT_MultiSlice_NumDevicesPerSlice`].
    pub devices_per_slice_map: *mut PJRT_MultiSlice_NumDevicesPerSlice,
    /// Out: devices per slice map deleter callback (may be null).
    pub devices_per_slice_map_deleter:
        Option<unsafe extern "C" fn(ptr: *mut PJRT_MultiSlice_NumDevicesPerSlice)>,
}

struct_size!(PJRT_MultiSlice_Config_NumDevicesPerSlice_Args_STRUCT_SIZE = PJRT_MultiSlice_Config_NumDevicesPerSlice_Args, devices_per_slice_map_deleter: Option<unsafe extern "C" fn(ptr: *mut PJRT_MultiSlice_NumDevicesPerSlice)>);

/// Signature of the `PJRT_MultiSlice_Config_NumDevicesPerSlice` entry; takes [`PJRT_MultiSlice_Config_NumDevicesPerSlice_Args`].
pub type PJRT_MultiSlice_Config_NumDevicesPerSlice = unsafe extern "C" fn(
    args: *mut PJRT_MultiSlice_Config_NumDevicesPerSlice_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_MultiSlice_Config_Serialize`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_MultiSlice_Config_Serialize_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_MultiSlice_Config`] to use.
    pub config: *mut PJRT_MultiSlice_Config,
    /// Out: serialized (C string).
    pub serialized: *const c_char,
    /// Out: size.
    pub size: usize,
    /// Out: the resulting [`PJRT_MultiSlice_SerializedConfig`].
    pub serialized_config: *mut PJRT_MultiSlice_SerializedConfig,
    /// Out: serialized config deleter callback (may be null).
    pub serialized_config_deleter:
        Option<unsafe extern "C" fn(ptr: *mut PJRT_MultiSlice_SerializedConfig)>,
}

struct_size!(PJRT_MultiSlice_Config_Serialize_Args_STRUCT_SIZE = PJRT_MultiSlice_Config_Serialize_Args, serialized_config_deleter: Option<unsafe extern "C" fn(ptr: *mut PJRT_MultiSlice_SerializedConfig)>);

/// Signature of the `PJRT_MultiSlice_Config_Serialize` entry; takes [`PJRT_MultiSlice_Config_Serialize_Args`].
pub type PJRT_MultiSlice_Config_Serialize =
    unsafe extern "C" fn(args: *mut PJRT_MultiSlice_Config_Serialize_Args) -> *mut PJRT_Error;

/// Extension (`PJRT_Extension_Type_MultiSlice`): inspect and serialize multi-slice configs.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_MultiSlice_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Config destroy callback (may be null).
    pub config_destroy: Option<PJRT_MultiSlice_Config_Destroy>,
    /// Config num slices callback (may be null).
    pub config_num_slices: Option<PJRT_MultiSlice_Config_NumSlices>,
    /// Config slice id callback (may be null).
    pub config_slice_id: Option<PJRT_MultiSlice_Config_SliceId>,
    /// Config num devices per slice callback (may be null).
    pub config_num_devices_per_slice: Option<PJRT_MultiSlice_Config_NumDevicesPerSlice>,
    /// Config serialize callback (may be null).
    pub config_serialize: Option<PJRT_MultiSlice_Config_Serialize>,
}

struct_size!(PJRT_MultiSlice_Extension_STRUCT_SIZE = PJRT_MultiSlice_Extension, config_serialize: Option<PJRT_MultiSlice_Config_Serialize>);

// ==== pjrt_c_api_phase_compile_extension.h ====

/// Header constant `PJRT_API_PHASE_COMPILE_EXTENSION_VERSION`.
pub const PJRT_API_PHASE_COMPILE_EXTENSION_VERSION: c_int = 1;

/// Arguments of [`PJRT_PhaseCompile_Get_Compiler`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_PhaseCompile_Get_Compiler_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Out: the resulting [`PJRT_PhaseCompiler`].
    pub phase_compiler: *const PJRT_PhaseCompiler,
}

struct_size!(PJRT_PhaseCompile_Get_Compiler_Args_STRUCT_SIZE = PJRT_PhaseCompile_Get_Compiler_Args, phase_compiler: *const PJRT_PhaseCompiler);

/// Signature of the `PJRT_PhaseCompile_Get_Compiler` entry; takes [`PJRT_PhaseCompile_Get_Compiler_Args`].
pub type PJRT_PhaseCompile_Get_Compiler =
    unsafe extern "C" fn(args: *mut PJRT_PhaseCompile_Get_Compiler_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_PhaseCompile_Destroy_Compiler`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_PhaseCompile_Destroy_Compiler_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_PhaseCompiler`] to use.
    pub phase_compiler: *const PJRT_PhaseCompiler,
}

struct_size!(PJRT_PhaseCompile_Destroy_Compiler_Args_STRUCT_SIZE = PJRT_PhaseCompile_Destroy_Compiler_Args, phase_compiler: *const PJRT_PhaseCompiler);

/// Signature of the `PJRT_PhaseCompile_Destroy_Compiler` entry; takes [`PJRT_PhaseCompile_Destroy_Compiler_Args`].
pub type PJRT_PhaseCompile_Destroy_Compiler =
    unsafe extern "C" fn(args: *mut PJRT_PhaseCompile_Destroy_Compiler_Args);

/// Arguments of [`PJRT_PhaseCompile_Run_Phase`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_PhaseCompile_Run_Phase_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_PhaseCompiler`] to use.
    pub phase_compiler: *const PJRT_PhaseCompiler,
    /// Input programs.
    pub input_programs: *mut *const c_char,
    /// Input programs sizes.
    pub input_programs_sizes: *const usize,
    /// Number of entries in `input_programs`.
    pub num_input_programs: usize,
    /// Phases to run.
    pub phases_to_run: *mut *const c_char,
    /// Phases to run sizes.
    pub phases_to_run_sizes: *const usize,
    /// Number of entries in `phases_to_run`.
    pub num_phases_to_run: usize,
    /// Compile options bytes (not NUL-terminated; length in `compile_options_size`).
    pub compile_options: *const c_char,
    /// Length of `compile_options` in bytes or elements.
    pub compile_options_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *mut PJRT_TopologyDescription,
    /// Out: output programs.
    pub output_programs: *mut *const c_char,
    /// Out: output programs sizes.
    pub output_programs_sizes: *const usize,
    /// Out: number of entries in `output_programs`.
    pub num_output_programs: usize,
}

struct_size!(PJRT_PhaseCompile_Run_Phase_Args_STRUCT_SIZE = PJRT_PhaseCompile_Run_Phase_Args, num_output_programs: usize);

/// Signature of the `PJRT_PhaseCompile_Run_Phase` entry; takes [`PJRT_PhaseCompile_Run_Phase_Args`].
pub type PJRT_PhaseCompile_Run_Phase =
    unsafe extern "C" fn(args: *mut PJRT_PhaseCompile_Run_Phase_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_PhaseCompile_Get_PhaseNames`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_PhaseCompile_Get_PhaseNames_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_PhaseCompiler`] to use.
    pub phase_compiler: *const PJRT_PhaseCompiler,
    /// Out: phase names.
    pub phase_names: *mut *const c_char,
    /// Out: phase names sizes.
    pub phase_names_sizes: *const usize,
    /// Out: number of entries in `phase_names`.
    pub num_phase_names: usize,
}

struct_size!(PJRT_PhaseCompile_Get_PhaseNames_Args_STRUCT_SIZE = PJRT_PhaseCompile_Get_PhaseNames_Args, num_phase_names: usize);

/// Signature of the `PJRT_PhaseCompile_Get_PhaseNames` entry; takes [`PJRT_PhaseCompile_Get_PhaseNames_Args`].
pub type PJRT_PhaseCompile_Get_PhaseNames =
    unsafe extern "C" fn(args: *mut PJRT_PhaseCompile_Get_PhaseNames_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_PhaseCompile_C_Buffers_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_PhaseCompile_C_Buffers_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Char buffers.
    pub char_buffers: *mut *const c_char,
    /// Char buffer sizes.
    pub char_buffer_sizes: *const usize,
    /// Number of entries in `char_buffers`.
    pub num_char_buffers: usize,
}

struct_size!(PJRT_PhaseCompile_C_Buffers_Destroy_Args_STRUCT_SIZE = PJRT_PhaseCompile_C_Buffers_Destroy_Args, num_char_buffers: usize);

/// Signature of the `PJRT_PhaseCompile_C_Buffers_Destroy` entry; takes [`PJRT_PhaseCompile_C_Buffers_Destroy_Args`].
pub type PJRT_PhaseCompile_C_Buffers_Destroy =
    unsafe extern "C" fn(args: *mut PJRT_PhaseCompile_C_Buffers_Destroy_Args);

/// Extension (`PJRT_Extension_Type_PhaseCompile`): run compilation phase by phase.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_PhaseCompile_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Phase compile get compiler callback (may be null).
    pub phase_compile_get_compiler: Option<PJRT_PhaseCompile_Get_Compiler>,
    /// Phase compile destroy compiler callback (may be null).
    pub phase_compile_destroy_compiler: Option<PJRT_PhaseCompile_Destroy_Compiler>,
    /// Phase compile run phases callback (may be null).
    pub phase_compile_run_phases: Option<PJRT_PhaseCompile_Run_Phase>,
    /// Phase compile get phase names callback (may be null).
    pub phase_compile_get_phase_names: Option<PJRT_PhaseCompile_Get_PhaseNames>,
    /// Phase compile c buffers destroy callback (may be null).
    pub phase_compile_c_buffers_destroy: Option<PJRT_PhaseCompile_C_Buffers_Destroy>,
}

struct_size!(PJRT_PhaseCompile_Extension_STRUCT_SIZE = PJRT_PhaseCompile_Extension, phase_compile_c_buffers_destroy: Option<PJRT_PhaseCompile_C_Buffers_Destroy>);

// ==== pjrt_c_api_profiler_extension.h ====

/// Header constant `PJRT_API_PROFILER_EXTENSION_VERSION`.
pub const PJRT_API_PROFILER_EXTENSION_VERSION: c_int = 1;

/// Extension (`PJRT_Extension_Type_Profiler`): the plugin's profiler API.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Profiler_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Profiler function table, or null.
    pub profiler_api: *mut PLUGIN_Profiler_Api,
    /// Trace context id to correlate client and plugin traces.
    pub traceme_context_id: i64,
}

struct_size!(PJRT_Profiler_Extension_STRUCT_SIZE = PJRT_Profiler_Extension, traceme_context_id: i64);

// ==== pjrt_c_api_raw_buffer_extension.h ====

/// Header constant `PJRT_API_RAW_BUFFER_EXTENSION_VERSION`.
pub const PJRT_API_RAW_BUFFER_EXTENSION_VERSION: c_int = 2;

/// Per-object vtable of a [`PJRT_RawBuffer`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_RawBuffer_FunctionTable {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Instance size.
    pub instance_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Inc ref callback (may be null).
    pub inc_ref: Option<unsafe extern "C" fn(raw_buffer: *mut PJRT_RawBuffer)>,
    /// Dec ref callback (may be null).
    pub dec_ref: Option<unsafe extern "C" fn(raw_buffer: *mut PJRT_RawBuffer)>,
    /// Get on device size in bytes callback (may be null).
    pub get_on_device_size_in_bytes:
        Option<unsafe extern "C" fn(raw_buffer: *const PJRT_RawBuffer) -> usize>,
    /// Get memory space callback (may be null).
    pub get_memory_space:
        Option<unsafe extern "C" fn(raw_buffer: *const PJRT_RawBuffer) -> *mut PJRT_Memory>,
    /// Get host pointer callback (may be null).
    pub get_host_pointer:
        Option<unsafe extern "C" fn(raw_buffer: *const PJRT_RawBuffer) -> *mut c_void>,
    /// Copy raw host to device and return event callback (may be null).
    pub copy_raw_host_to_device_and_return_event: Option<
        unsafe extern "C" fn(
            raw_buffer: *mut PJRT_RawBuffer,
            src: *const c_void,
            offset: i64,
            transfer_size: i64,
            dependencies: *mut PJRT_DeviceEventVector,
            event: *mut PJRT_DeviceEvent,
        ) -> *mut PJRT_Error,
    >,
    /// Copy raw device to host and return event callback (may be null).
    pub copy_raw_device_to_host_and_return_event: Option<
        unsafe extern "C" fn(
            raw_buffer: *mut PJRT_RawBuffer,
            dst: *mut c_void,
            offset: i64,
            transfer_size: i64,
            dependencies: *mut PJRT_DeviceEventVector,
            event: *mut PJRT_DeviceEvent,
        ) -> *mut PJRT_Error,
    >,
    /// Opaque device memory data pointer callback (may be null).
    pub opaque_device_memory_data_pointer:
        Option<unsafe extern "C" fn(raw_buffer: *const PJRT_RawBuffer) -> *mut c_void>,
    /// Make allocation ready event callback (may be null).
    pub make_allocation_ready_event: Option<
        unsafe extern "C" fn(
            raw_buffer: *mut PJRT_RawBuffer,
            event: *mut PJRT_DeviceEvent,
        ) -> *mut PJRT_Error,
    >,
    /// Get raw buffer async value callback (may be null).
    pub get_raw_buffer_async_value: Option<
        unsafe extern "C" fn(
            raw_buffer: *mut PJRT_RawBuffer,
            event: *mut PJRT_DeviceEvent,
        ) -> *mut PJRT_Error,
    >,
    /// Is mutable callback (may be null).
    pub is_mutable: Option<unsafe extern "C" fn(raw_buffer: *const PJRT_RawBuffer) -> bool>,
    /// Slice callback (may be null).
    pub slice: Option<
        unsafe extern "C" fn(
            raw_buffer: *mut PJRT_RawBuffer,
            offset: i64,
            slice_size: i64,
            sliced_buffer: *mut *mut PJRT_RawBuffer,
        ) -> *mut PJRT_Error,
    >,
    /// Schedule copy to callback (may be null).
    pub schedule_copy_to: Option<
        unsafe extern "C" fn(
            src_buffer: *mut PJRT_RawBuffer,
            transfer_dependency_events: *mut PJRT_DeviceEventVector,
            dst_buffer: *mut PJRT_RawBuffer,
            definition_event_promise: *mut PJRT_DeviceEventPromise,
            src_usage_event_promise: *mut PJRT_DeviceEventPromise,
            allocation_event_callback: Option<
                unsafe extern "C" fn(status: *mut PJRT_Error, user_data: *mut c_void),
            >,
            allocation_event_user_data: *mut c_void,
        ),
    >,
}

/// A raw device allocation behind a buffer; starts with a vtable pointer.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_RawBuffer {
    /// Vtable.
    pub vtable: *const PJRT_RawBuffer_FunctionTable,
}

struct_size!(PJRT_RawBuffer_FunctionTable_STRUCT_SIZE = PJRT_RawBuffer_FunctionTable, schedule_copy_to: Option<unsafe extern "C" fn(src_buffer: *mut PJRT_RawBuffer, transfer_dependency_events: *mut PJRT_DeviceEventVector, dst_buffer: *mut PJRT_RawBuffer, definition_event_promise: *mut PJRT_DeviceEventPromise, src_usage_event_promise: *mut PJRT_DeviceEventPromise, allocation_event_callback: Option<unsafe extern "C" fn(status: *mut PJRT_Error, user_data: *mut c_void)>, allocation_event_user_data: *mut c_void)>);

struct_size!(PJRT_RawBuffer_STRUCT_SIZE = PJRT_RawBuffer, vtable: *const PJRT_RawBuffer_FunctionTable);

/// Arguments of [`PJRT_RawBuffer_CreateRawAliasOfBuffer`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_RawBuffer_CreateRawAliasOfBuffer_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_Buffer`] to use.
    pub buffer: *mut PJRT_Buffer,
    /// Out: raw buffer.
    pub raw_buffer: *mut PJRT_RawBuffer,
}

struct_size!(PJRT_RawBuffer_CreateRawAliasOfBuffer_Args_STRUCT_SIZE = PJRT_RawBuffer_CreateRawAliasOfBuffer_Args, raw_buffer: *mut PJRT_RawBuffer);

/// Signature of the `PJRT_RawBuffer_CreateRawAliasOfBuffer` entry; takes [`PJRT_RawBuffer_CreateRawAliasOfBuffer_Args`].
pub type PJRT_RawBuffer_CreateRawAliasOfBuffer =
    unsafe extern "C" fn(args: *mut PJRT_RawBuffer_CreateRawAliasOfBuffer_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_RawBuffer_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_RawBuffer_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_RawBuffer,
}

struct_size!(PJRT_RawBuffer_Destroy_Args_STRUCT_SIZE = PJRT_RawBuffer_Destroy_Args, buffer: *mut PJRT_RawBuffer);

/// Signature of the `PJRT_RawBuffer_Destroy` entry; takes [`PJRT_RawBuffer_Destroy_Args`].
pub type PJRT_RawBuffer_Destroy =
    unsafe extern "C" fn(args: *mut PJRT_RawBuffer_Destroy_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_RawBuffer_GetHostPointer`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_RawBuffer_GetHostPointer_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_RawBuffer,
    /// Out: host pointer.
    pub host_pointer: *mut c_void,
}

struct_size!(PJRT_RawBuffer_GetHostPointer_Args_STRUCT_SIZE = PJRT_RawBuffer_GetHostPointer_Args, host_pointer: *mut c_void);

/// Signature of the `PJRT_RawBuffer_GetHostPointer` entry; takes [`PJRT_RawBuffer_GetHostPointer_Args`].
pub type PJRT_RawBuffer_GetHostPointer =
    unsafe extern "C" fn(args: *mut PJRT_RawBuffer_GetHostPointer_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_RawBuffer_GetOnDeviceSizeInBytes`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_RawBuffer_GetOnDeviceSizeInBytes_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_RawBuffer,
    /// Out: on device size in bytes.
    pub on_device_size_in_bytes: usize,
}

struct_size!(PJRT_RawBuffer_GetOnDeviceSizeInBytes_Args_STRUCT_SIZE = PJRT_RawBuffer_GetOnDeviceSizeInBytes_Args, on_device_size_in_bytes: usize);

/// Signature of the `PJRT_RawBuffer_GetOnDeviceSizeInBytes` entry; takes [`PJRT_RawBuffer_GetOnDeviceSizeInBytes_Args`].
pub type PJRT_RawBuffer_GetOnDeviceSizeInBytes =
    unsafe extern "C" fn(args: *mut PJRT_RawBuffer_GetOnDeviceSizeInBytes_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_RawBuffer_GetMemorySpace`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_RawBuffer_GetMemorySpace_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_RawBuffer,
    /// Out: the resulting [`PJRT_Memory`].
    pub memory_space: *mut PJRT_Memory,
}

struct_size!(PJRT_RawBuffer_GetMemorySpace_Args_STRUCT_SIZE = PJRT_RawBuffer_GetMemorySpace_Args, memory_space: *mut PJRT_Memory);

/// Signature of the `PJRT_RawBuffer_GetMemorySpace` entry; takes [`PJRT_RawBuffer_GetMemorySpace_Args`].
pub type PJRT_RawBuffer_GetMemorySpace =
    unsafe extern "C" fn(args: *mut PJRT_RawBuffer_GetMemorySpace_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_RawBuffer_CopyRawDeviceToHost`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_RawBuffer_CopyRawDeviceToHost_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_RawBuffer,
    /// Dst.
    pub dst: *mut c_void,
    /// Offset.
    pub offset: i64,
    /// Transfer size.
    pub transfer_size: i64,
    /// Out: the resulting [`PJRT_Event`].
    pub event: *mut PJRT_Event,
}

struct_size!(PJRT_RawBuffer_CopyRawDeviceToHost_Args_STRUCT_SIZE = PJRT_RawBuffer_CopyRawDeviceToHost_Args, event: *mut PJRT_Event);

/// Signature of the `PJRT_RawBuffer_CopyRawDeviceToHost` entry; takes [`PJRT_RawBuffer_CopyRawDeviceToHost_Args`].
pub type PJRT_RawBuffer_CopyRawDeviceToHost =
    unsafe extern "C" fn(args: *mut PJRT_RawBuffer_CopyRawDeviceToHost_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_RawBuffer_CopyRawHostToDevice`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_RawBuffer_CopyRawHostToDevice_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_RawBuffer,
    /// Src.
    pub src: *const c_void,
    /// Offset.
    pub offset: i64,
    /// Transfer size.
    pub transfer_size: i64,
    /// Out: the resulting [`PJRT_Event`].
    pub event: *mut PJRT_Event,
}

struct_size!(PJRT_RawBuffer_CopyRawHostToDevice_Args_STRUCT_SIZE = PJRT_RawBuffer_CopyRawHostToDevice_Args, event: *mut PJRT_Event);

/// Signature of the `PJRT_RawBuffer_CopyRawHostToDevice` entry; takes [`PJRT_RawBuffer_CopyRawHostToDevice_Args`].
pub type PJRT_RawBuffer_CopyRawHostToDevice =
    unsafe extern "C" fn(args: *mut PJRT_RawBuffer_CopyRawHostToDevice_Args) -> *mut PJRT_Error;

/// Extension (`PJRT_Extension_Type_RawBuffer`): access the raw allocation behind a buffer.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_RawBuffer_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Function table slot for [`PJRT_RawBuffer_CreateRawAliasOfBuffer`].
    pub PJRT_RawBuffer_CreateRawAliasOfBuffer: Option<PJRT_RawBuffer_CreateRawAliasOfBuffer>,
    /// Function table slot for [`PJRT_RawBuffer_Destroy`].
    pub PJRT_RawBuffer_Destroy: Option<PJRT_RawBuffer_Destroy>,
    /// Function table slot for [`PJRT_RawBuffer_GetOnDeviceSizeInBytes`].
    pub PJRT_RawBuffer_GetOnDeviceSizeInBytes: Option<PJRT_RawBuffer_GetOnDeviceSizeInBytes>,
    /// Function table slot for [`PJRT_RawBuffer_GetMemorySpace`].
    pub PJRT_RawBuffer_GetMemorySpace: Option<PJRT_RawBuffer_GetMemorySpace>,
    /// Function table slot for [`PJRT_RawBuffer_CopyRawHostToDevice`].
    pub PJRT_RawBuffer_CopyRawHostToDevice: Option<PJRT_RawBuffer_CopyRawHostToDevice>,
    /// Function table slot for [`PJRT_RawBuffer_CopyRawDeviceToHost`].
    pub PJRT_RawBuffer_CopyRawDeviceToHost: Option<PJRT_RawBuffer_CopyRawDeviceToHost>,
    /// Function table slot for [`PJRT_RawBuffer_GetHostPointer`].
    pub PJRT_RawBuffer_GetHostPointer: Option<PJRT_RawBuffer_GetHostPointer>,
}

struct_size!(PJRT_RawBuffer_Extension_STRUCT_SIZE = PJRT_RawBuffer_Extension, PJRT_RawBuffer_GetHostPointer: Option<PJRT_RawBuffer_GetHostPointer>);

// ==== pjrt_c_api_shardings_extension.h ====

/// Header constant `PJRT_API_SHARDINGS_EXTENSION_VERSION`.
pub const PJRT_API_SHARDINGS_EXTENSION_VERSION: c_int = 1;

/// Arguments of [`PJRT_Shardings_PJRT_Executable_ParameterShardings`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Shardings_PJRT_Executable_ParameterShardings_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_Executable`] to use.
    pub executable: *mut PJRT_Executable,
    /// Out: number of parameters.
    pub num_parameters: usize,
    /// Out: shardings.
    pub shardings: *const *const c_char,
    /// Out: sharding sizes.
    pub sharding_sizes: *const usize,
}

struct_size!(PJRT_Shardings_PJRT_Executable_ParameterShardings_Args_STRUCT_SIZE = PJRT_Shardings_PJRT_Executable_ParameterShardings_Args, sharding_sizes: *const usize);

/// Signature of the `PJRT_Shardings_PJRT_Executable_ParameterShardings` entry; takes [`PJRT_Shardings_PJRT_Executable_ParameterShardings_Args`].
pub type PJRT_Shardings_PJRT_Executable_ParameterShardings =
    unsafe extern "C" fn(
        args: *mut PJRT_Shardings_PJRT_Executable_ParameterShardings_Args,
    ) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Shardings_PJRT_Executable_OutputShardings`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Shardings_PJRT_Executable_OutputShardings_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_Executable`] to use.
    pub executable: *mut PJRT_Executable,
    /// Out: number of outputs.
    pub num_outputs: usize,
    /// Out: shardings.
    pub shardings: *const *const c_char,
    /// Out: sharding sizes.
    pub sharding_sizes: *const usize,
}

struct_size!(PJRT_Shardings_PJRT_Executable_OutputShardings_Args_STRUCT_SIZE = PJRT_Shardings_PJRT_Executable_OutputShardings_Args, sharding_sizes: *const usize);

/// Signature of the `PJRT_Shardings_PJRT_Executable_OutputShardings` entry; takes [`PJRT_Shardings_PJRT_Executable_OutputShardings_Args`].
pub type PJRT_Shardings_PJRT_Executable_OutputShardings = unsafe extern "C" fn(
    args: *mut PJRT_Shardings_PJRT_Executable_OutputShardings_Args,
) -> *mut PJRT_Error;

/// Extension (`PJRT_Extension_Type_Shardings`): parameter and output shardings of an executable.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Shardings_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Function table slot for [`PJRT_Shardings_PJRT_Executable_ParameterShardings`].
    pub PJRT_Shardings_PJRT_Executable_ParameterShardings:
        Option<PJRT_Shardings_PJRT_Executable_ParameterShardings>,
    /// Function table slot for [`PJRT_Shardings_PJRT_Executable_OutputShardings`].
    pub PJRT_Shardings_PJRT_Executable_OutputShardings:
        Option<PJRT_Shardings_PJRT_Executable_OutputShardings>,
}

struct_size!(PJRT_Shardings_Extension_STRUCT_SIZE = PJRT_Shardings_Extension, PJRT_Shardings_PJRT_Executable_OutputShardings: Option<PJRT_Shardings_PJRT_Executable_OutputShardings>);

// ==== pjrt_c_api_stream_extension.h ====

/// Header constant `PJRT_API_STREAM_EXTENSION_VERSION`.
pub const PJRT_API_STREAM_EXTENSION_VERSION: c_int = 0;

/// Arguments of [`PJRT_Get_Stream_For_External_Ready_Events`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Get_Stream_For_External_Ready_Events_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_Device`] to use.
    pub device: *mut PJRT_Device,
    /// Out: stream.
    pub stream: isize,
}

struct_size!(PJRT_Get_Stream_For_External_Ready_Events_Args_STRUCT_SIZE = PJRT_Get_Stream_For_External_Ready_Events_Args, stream: isize);

/// Signature of the `PJRT_Get_Stream_For_External_Ready_Events` entry; takes [`PJRT_Get_Stream_For_External_Ready_Events_Args`].
pub type PJRT_Get_Stream_For_External_Ready_Events = unsafe extern "C" fn(
    args: *mut PJRT_Get_Stream_For_External_Ready_Events_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Wait_Until_Buffer_Ready_On_Stream`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Wait_Until_Buffer_Ready_On_Stream_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Stream.
    pub stream: isize,
    /// The [`PJRT_Buffer`] to use.
    pub buffer: *mut PJRT_Buffer,
}

struct_size!(PJRT_Wait_Until_Buffer_Ready_On_Stream_Args_STRUCT_SIZE = PJRT_Wait_Until_Buffer_Ready_On_Stream_Args, buffer: *mut PJRT_Buffer);

/// Signature of the `PJRT_Wait_Until_Buffer_Ready_On_Stream` entry; takes [`PJRT_Wait_Until_Buffer_Ready_On_Stream_Args`].
pub type PJRT_Wait_Until_Buffer_Ready_On_Stream =
    unsafe extern "C" fn(args: *mut PJRT_Wait_Until_Buffer_Ready_On_Stream_Args) -> *mut PJRT_Error;

/// Extension (`PJRT_Extension_Type_Stream`): interoperate with external device streams.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Stream_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Get stream callback (may be null).
    pub get_stream: Option<PJRT_Get_Stream_For_External_Ready_Events>,
    /// Wait stream callback (may be null).
    pub wait_stream: Option<PJRT_Wait_Until_Buffer_Ready_On_Stream>,
}

struct_size!(PJRT_Stream_Extension_STRUCT_SIZE = PJRT_Stream_Extension, wait_stream: Option<PJRT_Wait_Until_Buffer_Ready_On_Stream>);

// ==== pjrt_c_api_tpu_executable_extension.h ====

/// Header constant `PJRT_API_TPU_EXECUTABLE_EXTENSION_VERSION`.
pub const PJRT_API_TPU_EXECUTABLE_EXTENSION_VERSION: c_int = 1;

/// Opaque `PJRT_TpuExecutable_TargetArguments` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_TpuExecutable_TargetArguments {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_TpuExecutable_CompiledMemoryStats` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_TpuExecutable_CompiledMemoryStats {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_TpuExecutable_CompilationEnvironments` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_TpuExecutable_CompilationEnvironments {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_TpuExecutable_CostAnalysisResult` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_TpuExecutable_CostAnalysisResult {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_TpuExecutable_GetTargetArguments`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuExecutable_GetTargetArguments_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Serialized executable bytes (not NUL-terminated; length in `serialized_executable_size`).
    pub serialized_executable: *const c_char,
    /// Length of `serialized_executable` in bytes or elements.
    pub serialized_executable_size: usize,
    /// Out: target arguments bytes (not NUL-terminated; length in `target_arguments_size`).
    pub target_arguments: *const c_char,
    /// Out: length of `target_arguments` in bytes or elements.
    pub target_arguments_size: usize,
    /// Out: the resulting [`PJRT_TpuExecutable_TargetArguments`].
    pub target_arguments_ptr: *mut PJRT_TpuExecutable_TargetArguments,
    /// Out: target arguments deleter callback (may be null).
    pub target_arguments_deleter:
        Option<unsafe extern "C" fn(args: *mut PJRT_TpuExecutable_TargetArguments)>,
}

struct_size!(PJRT_TpuExecutable_GetTargetArguments_Args_STRUCT_SIZE = PJRT_TpuExecutable_GetTargetArguments_Args, target_arguments_deleter: Option<unsafe extern "C" fn(args: *mut PJRT_TpuExecutable_TargetArguments)>);

/// Signature of the `PJRT_TpuExecutable_GetTargetArguments` entry; takes [`PJRT_TpuExecutable_GetTargetArguments_Args`].
pub type PJRT_TpuExecutable_GetTargetArguments =
    unsafe extern "C" fn(args: *mut PJRT_TpuExecutable_GetTargetArguments_Args) -> *mut PJRT_Error;

/// Opaque `PJRT_TpuExecutable_HloModuleWithConfig` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_TpuExecutable_HloModuleWithConfig {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_TpuExecutable_GetHloModuleWithConfig`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuExecutable_GetHloModuleWithConfig_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Serialized executable bytes (not NUL-terminated; length in `serialized_executable_size`).
    pub serialized_executable: *const c_char,
    /// Length of `serialized_executable` in bytes or elements.
    pub serialized_executable_size: usize,
    /// Out: hlo module with config bytes (not NUL-terminated; length in `hlo_module_with_config_size`).
    pub hlo_module_with_config: *const c_char,
    /// Out: length of `hlo_module_with_config` in bytes or elements.
    pub hlo_module_with_config_size: usize,
    /// Out: the resulting [`PJRT_TpuExecutable_HloModuleWithConfig`].
    pub hlo_module_with_config_ptr: *mut PJRT_TpuExecutable_HloModuleWithConfig,
    /// Out: hlo module with config deleter callback (may be null).
    pub hlo_module_with_config_deleter:
        Option<unsafe extern "C" fn(module: *mut PJRT_TpuExecutable_HloModuleWithConfig)>,
}

struct_size!(PJRT_TpuExecutable_GetHloModuleWithConfig_Args_STRUCT_SIZE = PJRT_TpuExecutable_GetHloModuleWithConfig_Args, hlo_module_with_config_deleter: Option<unsafe extern "C" fn(module: *mut PJRT_TpuExecutable_HloModuleWithConfig)>);

/// Signature of the `PJRT_TpuExecutable_GetHloModuleWithConfig` entry; takes [`PJRT_TpuExecutable_GetHloModuleWithConfig_Args`].
pub type PJRT_TpuExecutable_GetHloModuleWithConfig = unsafe extern "C" fn(
    args: *mut PJRT_TpuExecutable_GetHloModuleWithConfig_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuExecutable_RunHloCostAnalysis`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuExecutable_RunHloCostAnalysis_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Target arguments bytes (not NUL-terminated; length in `target_arguments_size`).
    pub target_arguments: *const c_char,
    /// Length of `target_arguments` in bytes or elements.
    pub target_arguments_size: usize,
    /// Hlo module.
    pub hlo_module: *mut *const c_char,
    /// Length of `hlo_module` in bytes or elements.
    pub hlo_module_size: *mut usize,
    /// Number of hlo modules.
    pub num_hlo_modules: usize,
    /// Out: analysis results.
    pub analysis_results: *const PJRT_NamedValue,
    /// Out: number of entries in `analysis_results`.
    pub num_analysis_results: usize,
    /// Out: the resulting [`PJRT_TpuExecutable_CostAnalysisResult`].
    pub analysis_results_ptr: *mut PJRT_TpuExecutable_CostAnalysisResult,
    /// Out: analysis results deleter callback (may be null).
    pub analysis_results_deleter:
        Option<unsafe extern "C" fn(results: *mut PJRT_TpuExecutable_CostAnalysisResult)>,
}

struct_size!(PJRT_TpuExecutable_RunHloCostAnalysis_Args_STRUCT_SIZE = PJRT_TpuExecutable_RunHloCostAnalysis_Args, analysis_results_deleter: Option<unsafe extern "C" fn(results: *mut PJRT_TpuExecutable_CostAnalysisResult)>);

/// Signature of the `PJRT_TpuExecutable_RunHloCostAnalysis` entry; takes [`PJRT_TpuExecutable_RunHloCostAnalysis_Args`].
pub type PJRT_TpuExecutable_RunHloCostAnalysis =
    unsafe extern "C" fn(args: *mut PJRT_TpuExecutable_RunHloCostAnalysis_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuExecutable_GetCompiledMemoryStats`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuExecutable_GetCompiledMemoryStats_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Serialized executable bytes (not NUL-terminated; length in `serialized_executable_size`).
    pub serialized_executable: *const c_char,
    /// Length of `serialized_executable` in bytes or elements.
    pub serialized_executable_size: usize,
    /// Out: compiled memory stats bytes (not NUL-terminated; length in `compiled_memory_stats_size`).
    pub compiled_memory_stats: *const c_char,
    /// Out: length of `compiled_memory_stats` in bytes or elements.
    pub compiled_memory_stats_size: usize,
    /// Out: the resulting [`PJRT_TpuExecutable_CompiledMemoryStats`].
    pub compiled_memory_stats_ptr: *mut PJRT_TpuExecutable_CompiledMemoryStats,
    /// Out: compiled memory stats deleter callback (may be null).
    pub compiled_memory_stats_deleter:
        Option<unsafe extern "C" fn(stats: *mut PJRT_TpuExecutable_CompiledMemoryStats)>,
}

struct_size!(PJRT_TpuExecutable_GetCompiledMemoryStats_Args_STRUCT_SIZE = PJRT_TpuExecutable_GetCompiledMemoryStats_Args, compiled_memory_stats_deleter: Option<unsafe extern "C" fn(stats: *mut PJRT_TpuExecutable_CompiledMemoryStats)>);

/// Signature of the `PJRT_TpuExecutable_GetCompiledMemoryStats` entry; takes [`PJRT_TpuExecutable_GetCompiledMemoryStats_Args`].
pub type PJRT_TpuExecutable_GetCompiledMemoryStats = unsafe extern "C" fn(
    args: *mut PJRT_TpuExecutable_GetCompiledMemoryStats_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuExecutable_SetTpuCompilationEnv`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuExecutable_SetTpuCompilationEnv_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Serialized compilation environments bytes (not NUL-terminated; length in `serialized_compilation_environments_size`).
    pub serialized_compilation_environments: *const c_char,
    /// Length of `serialized_compilation_environments` in bytes or elements.
    pub serialized_compilation_environments_size: usize,
    /// Out: result compilation environments bytes (not NUL-terminated; length in `result_compilation_environments_size`).
    pub result_compilation_environments: *const c_char,
    /// Out: length of `result_compilation_environments` in bytes or elements.
    pub result_compilation_environments_size: usize,
    /// Out: the resulting [`PJRT_TpuExecutable_CompilationEnvironments`].
    pub result_compilation_environments_ptr: *mut PJRT_TpuExecutable_CompilationEnvironments,
    /// Out: result compilation environments deleter callback (may be null).
    pub result_compilation_environments_deleter:
        Option<unsafe extern "C" fn(envs: *mut PJRT_TpuExecutable_CompilationEnvironments)>,
}

struct_size!(PJRT_TpuExecutable_SetTpuCompilationEnv_Args_STRUCT_SIZE = PJRT_TpuExecutable_SetTpuCompilationEnv_Args, result_compilation_environments_deleter: Option<unsafe extern "C" fn(envs: *mut PJRT_TpuExecutable_CompilationEnvironments)>);

/// Signature of the `PJRT_TpuExecutable_SetTpuCompilationEnv` entry; takes [`PJRT_TpuExecutable_SetTpuCompilationEnv_Args`].
pub type PJRT_TpuExecutable_SetTpuCompilationEnv = unsafe extern "C" fn(
    args: *mut PJRT_TpuExecutable_SetTpuCompilationEnv_Args,
) -> *mut PJRT_Error;

/// Opaque `PJRT_TpuExecutable_FieldValue` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_TpuExecutable_FieldValue {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_TpuExecutable_GetTpuCompilationEnvFieldAsString`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuExecutable_GetTpuCompilationEnvFieldAsString_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Serialized compilation environments bytes (not NUL-terminated; length in `serialized_compilation_environments_size`).
    pub serialized_compilation_environments: *const c_char,
    /// Length of `serialized_compilation_environments` in bytes or elements.
    pub serialized_compilation_environments_size: usize,
    /// Field name bytes (not NUL-terminated; length in `field_name_size`).
    pub field_name: *const c_char,
    /// Length of `field_name` in bytes or elements.
    pub field_name_size: usize,
    /// Out: field value bytes (not NUL-terminated; length in `field_value_size`).
    pub field_value: *const c_char,
    /// Out: length of `field_value` in bytes or elements.
    pub field_value_size: usize,
    /// Out: the resulting [`PJRT_TpuExecutable_FieldValue`].
    pub field_value_ptr: *mut PJRT_TpuExecutable_FieldValue,
    /// Out: field value deleter callback (may be null).
    pub field_value_deleter:
        Option<unsafe extern "C" fn(value: *mut PJRT_TpuExecutable_FieldValue)>,
}

struct_size!(PJRT_TpuExecutable_GetTpuCompilationEnvFieldAsString_Args_STRUCT_SIZE = PJRT_TpuExecutable_GetTpuCompilationEnvFieldAsString_Args, field_value_deleter: Option<unsafe extern "C" fn(value: *mut PJRT_TpuExecutable_FieldValue)>);

/// Signature of the `PJRT_TpuExecutable_GetTpuCompilationEnvFieldAsString` entry; takes [`PJRT_TpuExecutable_GetTpuCompilationEnvFieldAsString_Args`].
pub type PJRT_TpuExecutable_GetTpuCompilationEnvFieldAsString =
    unsafe extern "C" fn(
        args: *mut PJRT_TpuExecutable_GetTpuCompilationEnvFieldAsString_Args,
    ) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuExecutable_IsTpuPredeterminedError`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuExecutable_IsTpuPredeterminedError_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Serialized status bytes (not NUL-terminated; length in `serialized_status_size`).
    pub serialized_status: *const c_char,
    /// Length of `serialized_status` in bytes or elements.
    pub serialized_status_size: usize,
    /// Out: whether is predetermined.
    pub is_predetermined: bool,
}

struct_size!(PJRT_TpuExecutable_IsTpuPredeterminedError_Args_STRUCT_SIZE = PJRT_TpuExecutable_IsTpuPredeterminedError_Args, is_predetermined: bool);

/// Signature of the `PJRT_TpuExecutable_IsTpuPredeterminedError` entry; takes [`PJRT_TpuExecutable_IsTpuPredeterminedError_Args`].
pub type PJRT_TpuExecutable_IsTpuPredeterminedError = unsafe extern "C" fn(
    args: *mut PJRT_TpuExecutable_IsTpuPredeterminedError_Args,
) -> *mut PJRT_Error;

/// Extension (`PJRT_Extension_Type_TpuExecutable`): TPU-specific executable queries.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuExecutable_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Get target arguments callback (may be null).
    pub get_target_arguments: Option<PJRT_TpuExecutable_GetTargetArguments>,
    /// Get hlo module with config callback (may be null).
    pub get_hlo_module_with_config: Option<PJRT_TpuExecutable_GetHloModuleWithConfig>,
    /// Get core program abi version.
    pub get_core_program_abi_version: *mut c_void,
    /// Get compiled memory stats callback (may be null).
    pub get_compiled_memory_stats: Option<PJRT_TpuExecutable_GetCompiledMemoryStats>,
    /// Run hlo cost analysis callback (may be null).
    pub run_hlo_cost_analysis: Option<PJRT_TpuExecutable_RunHloCostAnalysis>,
    /// Set tpu compilation env callback (may be null).
    pub set_tpu_compilation_env: Option<PJRT_TpuExecutable_SetTpuCompilationEnv>,
    /// Get tpu compilation env field as string callback (may be null).
    pub get_tpu_compilation_env_field_as_string:
        Option<PJRT_TpuExecutable_GetTpuCompilationEnvFieldAsString>,
    /// Is tpu predetermined error callback (may be null).
    pub is_tpu_predetermined_error: Option<PJRT_TpuExecutable_IsTpuPredeterminedError>,
}

struct_size!(PJRT_TpuExecutable_Extension_STRUCT_SIZE = PJRT_TpuExecutable_Extension, is_tpu_predetermined_error: Option<PJRT_TpuExecutable_IsTpuPredeterminedError>);

// ==== pjrt_c_api_tpu_topology_extension.h ====

/// Header constant `PJRT_API_TPU_TOPOLOGY_EXTENSION_VERSION`.
pub const PJRT_API_TPU_TOPOLOGY_EXTENSION_VERSION: c_int = 1;

/// Arguments of [`PJRT_TpuTopology_Subslice`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_Subslice_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Chips per host bounds.
    pub chips_per_host_bounds: *const i32,
    /// Chips per host bounds num dims.
    pub chips_per_host_bounds_num_dims: usize,
    /// Host bounds.
    pub host_bounds: *const i32,
    /// Host bounds num dims.
    pub host_bounds_num_dims: usize,
    /// Out: the resulting [`PJRT_TopologyDescription`].
    pub subslice_topology: *mut PJRT_TopologyDescription,
}

struct_size!(PJRT_TpuTopology_Subslice_Args_STRUCT_SIZE = PJRT_TpuTopology_Subslice_Args, subslice_topology: *mut PJRT_TopologyDescription);

/// Signature of the `PJRT_TpuTopology_Subslice` entry; takes [`PJRT_TpuTopology_Subslice_Args`].
pub type PJRT_TpuTopology_Subslice =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_Subslice_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_IsSubsliceTopology`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_IsSubsliceTopology_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Out: whether is subslice topology.
    pub is_subslice_topology: bool,
}

struct_size!(PJRT_TpuTopology_IsSubsliceTopology_Args_STRUCT_SIZE = PJRT_TpuTopology_IsSubsliceTopology_Args, is_subslice_topology: bool);

/// Signature of the `PJRT_TpuTopology_IsSubsliceTopology` entry; takes [`PJRT_TpuTopology_IsSubsliceTopology_Args`].
pub type PJRT_TpuTopology_IsSubsliceTopology =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_IsSubsliceTopology_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_SubsliceDeviceIdFromFullDeviceId`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_SubsliceDeviceIdFromFullDeviceId_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub client_topology: *const PJRT_TopologyDescription,
    /// The [`PJRT_TopologyDescription`] to use.
    pub subslice_topology: *const PJRT_TopologyDescription,
    /// Subslice origin.
    pub subslice_origin: *const i32,
    /// Subslice origin dim num.
    pub subslice_origin_dim_num: usize,
    /// Full device id.
    pub full_device_id: i32,
    /// Out: subslice device id.
    pub subslice_device_id: i32,
}

struct_size!(PJRT_TpuTopology_SubsliceDeviceIdFromFullDeviceId_Args_STRUCT_SIZE = PJRT_TpuTopology_SubsliceDeviceIdFromFullDeviceId_Args, subslice_device_id: i32);

/// Signature of the `PJRT_TpuTopology_SubsliceDeviceIdFromFullDeviceId` entry; takes [`PJRT_TpuTopology_SubsliceDeviceIdFromFullDeviceId_Args`].
pub type PJRT_TpuTopology_SubsliceDeviceIdFromFullDeviceId =
    unsafe extern "C" fn(
        args: *mut PJRT_TpuTopology_SubsliceDeviceIdFromFullDeviceId_Args,
    ) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_ReplaceHostBounds`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_ReplaceHostBounds_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Host bounds.
    pub host_bounds: *const i32,
    /// Host bounds dim num.
    pub host_bounds_dim_num: usize,
    /// Out: the resulting [`PJRT_TopologyDescription`].
    pub new_topology: *mut PJRT_TopologyDescription,
}

struct_size!(PJRT_TpuTopology_ReplaceHostBounds_Args_STRUCT_SIZE = PJRT_TpuTopology_ReplaceHostBounds_Args, new_topology: *mut PJRT_TopologyDescription);

/// Signature of the `PJRT_TpuTopology_ReplaceHostBounds` entry; takes [`PJRT_TpuTopology_ReplaceHostBounds_Args`].
pub type PJRT_TpuTopology_ReplaceHostBounds =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_ReplaceHostBounds_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_IsEnhancedBarrierEnabled`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_IsEnhancedBarrierEnabled_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Out: whether is enhanced barrier enabled.
    pub is_enhanced_barrier_enabled: bool,
}

struct_size!(PJRT_TpuTopology_IsEnhancedBarrierEnabled_Args_STRUCT_SIZE = PJRT_TpuTopology_IsEnhancedBarrierEnabled_Args, is_enhanced_barrier_enabled: bool);

/// Signature of the `PJRT_TpuTopology_IsEnhancedBarrierEnabled` entry; takes [`PJRT_TpuTopology_IsEnhancedBarrierEnabled_Args`].
pub type PJRT_TpuTopology_IsEnhancedBarrierEnabled = unsafe extern "C" fn(
    args: *mut PJRT_TpuTopology_IsEnhancedBarrierEnabled_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_HasLimitedIciConnectivity`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_HasLimitedIciConnectivity_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Out: whether has limited ici connectivity.
    pub has_limited_ici_connectivity: bool,
}

struct_size!(PJRT_TpuTopology_HasLimitedIciConnectivity_Args_STRUCT_SIZE = PJRT_TpuTopology_HasLimitedIciConnectivity_Args, has_limited_ici_connectivity: bool);

/// Signature of the `PJRT_TpuTopology_HasLimitedIciConnectivity` entry; takes [`PJRT_TpuTopology_HasLimitedIciConnectivity_Args`].
pub type PJRT_TpuTopology_HasLimitedIciConnectivity = unsafe extern "C" fn(
    args: *mut PJRT_TpuTopology_HasLimitedIciConnectivity_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_IsReachableOverLimitedIci`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_IsReachableOverLimitedIci_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Source chip id.
    pub source_chip_id: i32,
    /// Dest chip id.
    pub dest_chip_id: i32,
    /// Out: whether is reachable over limited ici.
    pub is_reachable_over_limited_ici: bool,
}

struct_size!(PJRT_TpuTopology_IsReachableOverLimitedIci_Args_STRUCT_SIZE = PJRT_TpuTopology_IsReachableOverLimitedIci_Args, is_reachable_over_limited_ici: bool);

/// Signature of the `PJRT_TpuTopology_IsReachableOverLimitedIci` entry; takes [`PJRT_TpuTopology_IsReachableOverLimitedIci_Args`].
pub type PJRT_TpuTopology_IsReachableOverLimitedIci = unsafe extern "C" fn(
    args: *mut PJRT_TpuTopology_IsReachableOverLimitedIci_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_ProcessCount`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_ProcessCount_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Out: process count.
    pub process_count: i32,
}

struct_size!(PJRT_TpuTopology_ProcessCount_Args_STRUCT_SIZE = PJRT_TpuTopology_ProcessCount_Args, process_count: i32);

/// Signature of the `PJRT_TpuTopology_ProcessCount` entry; takes [`PJRT_TpuTopology_ProcessCount_Args`].
pub type PJRT_TpuTopology_ProcessCount =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_ProcessCount_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_ChipsPerProcess`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_ChipsPerProcess_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Out: chips per process.
    pub chips_per_process: i32,
}

struct_size!(PJRT_TpuTopology_ChipsPerProcess_Args_STRUCT_SIZE = PJRT_TpuTopology_ChipsPerProcess_Args, chips_per_process: i32);

/// Signature of the `PJRT_TpuTopology_ChipsPerProcess` entry; takes [`PJRT_TpuTopology_ChipsPerProcess_Args`].
pub type PJRT_TpuTopology_ChipsPerProcess =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_ChipsPerProcess_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_CoreCountPerChip`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_CoreCountPerChip_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Out: core count of default type per chip.
    pub core_count_of_default_type_per_chip: i32,
}

struct_size!(PJRT_TpuTopology_CoreCountPerChip_Args_STRUCT_SIZE = PJRT_TpuTopology_CoreCountPerChip_Args, core_count_of_default_type_per_chip: i32);

/// Signature of the `PJRT_TpuTopology_CoreCountPerChip` entry; takes [`PJRT_TpuTopology_CoreCountPerChip_Args`].
pub type PJRT_TpuTopology_CoreCountPerChip =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_CoreCountPerChip_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_ChipCount`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_ChipCount_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Out: chip count.
    pub chip_count: i32,
}

struct_size!(PJRT_TpuTopology_ChipCount_Args_STRUCT_SIZE = PJRT_TpuTopology_ChipCount_Args, chip_count: i32);

/// Signature of the `PJRT_TpuTopology_ChipCount` entry; takes [`PJRT_TpuTopology_ChipCount_Args`].
pub type PJRT_TpuTopology_ChipCount =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_ChipCount_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_CoreCount`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_CoreCount_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Out: core count of default type.
    pub core_count_of_default_type: i32,
}

struct_size!(PJRT_TpuTopology_CoreCount_Args_STRUCT_SIZE = PJRT_TpuTopology_CoreCount_Args, core_count_of_default_type: i32);

/// Signature of the `PJRT_TpuTopology_CoreCount` entry; takes [`PJRT_TpuTopology_CoreCount_Args`].
pub type PJRT_TpuTopology_CoreCount =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_CoreCount_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_LogiDeviceCount`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_LogiDeviceCount_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Out: logical device count of default type.
    pub logical_device_count_of_default_type: i32,
}

struct_size!(PJRT_TpuTopology_LogiDeviceCount_Args_STRUCT_SIZE = PJRT_TpuTopology_LogiDeviceCount_Args, logical_device_count_of_default_type: i32);

/// Signature of the `PJRT_TpuTopology_LogiDeviceCount` entry; takes [`PJRT_TpuTopology_LogiDeviceCount_Args`].
pub type PJRT_TpuTopology_LogiDeviceCount =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_LogiDeviceCount_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_LogiDeviceCountPerProcess`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_LogiDeviceCountPerProcess_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Out: logical device count of default type per process.
    pub logical_device_count_of_default_type_per_process: i32,
}

struct_size!(PJRT_TpuTopology_LogiDeviceCountPerProcess_Args_STRUCT_SIZE = PJRT_TpuTopology_LogiDeviceCountPerProcess_Args, logical_device_count_of_default_type_per_process: i32);

/// Signature of the `PJRT_TpuTopology_LogiDeviceCountPerProcess` entry; takes [`PJRT_TpuTopology_LogiDeviceCountPerProcess_Args`].
pub type PJRT_TpuTopology_LogiDeviceCountPerProcess = unsafe extern "C" fn(
    args: *mut PJRT_TpuTopology_LogiDeviceCountPerProcess_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_LogiDeviceCountPerChip`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_LogiDeviceCountPerChip_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Out: logical device count of default type per chip.
    pub logical_device_count_of_default_type_per_chip: i32,
}

struct_size!(PJRT_TpuTopology_LogiDeviceCountPerChip_Args_STRUCT_SIZE = PJRT_TpuTopology_LogiDeviceCountPerChip_Args, logical_device_count_of_default_type_per_chip: i32);

/// Signature of the `PJRT_TpuTopology_LogiDeviceCountPerChip` entry; takes [`PJRT_TpuTopology_LogiDeviceCountPerChip_Args`].
pub type PJRT_TpuTopology_LogiDeviceCountPerChip = unsafe extern "C" fn(
    args: *mut PJRT_TpuTopology_LogiDeviceCountPerChip_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_CoreCountPerProcess`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_CoreCountPerProcess_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Out: core count of default type per process.
    pub core_count_of_default_type_per_process: i32,
}

struct_size!(PJRT_TpuTopology_CoreCountPerProcess_Args_STRUCT_SIZE = PJRT_TpuTopology_CoreCountPerProcess_Args, core_count_of_default_type_per_process: i32);

/// Signature of the `PJRT_TpuTopology_CoreCountPerProcess` entry; takes [`PJRT_TpuTopology_CoreCountPerProcess_Args`].
pub type PJRT_TpuTopology_CoreCountPerProcess =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_CoreCountPerProcess_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_ProcessIds`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_ProcessIds_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Max process ids.
    pub max_process_ids: i32,
    /// Process ids.
    pub process_ids: *mut i32,
    /// Out: number of entries in `process_ids`.
    pub num_process_ids: usize,
}

struct_size!(PJRT_TpuTopology_ProcessIds_Args_STRUCT_SIZE = PJRT_TpuTopology_ProcessIds_Args, num_process_ids: usize);

/// Signature of the `PJRT_TpuTopology_ProcessIds` entry; takes [`PJRT_TpuTopology_ProcessIds_Args`].
pub type PJRT_TpuTopology_ProcessIds =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_ProcessIds_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_LogiDeviceIdsOnProcess`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_LogiDeviceIdsOnProcess_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Process id.
    pub process_id: i32,
    /// Max logical device ids.
    pub max_logical_device_ids: i32,
    /// Logical device of default type ids.
    pub logical_device_of_default_type_ids: *mut i32,
    /// Out: number of logical device ids.
    pub num_logical_device_ids: usize,
}

struct_size!(PJRT_TpuTopology_LogiDeviceIdsOnProcess_Args_STRUCT_SIZE = PJRT_TpuTopology_LogiDeviceIdsOnProcess_Args, num_logical_device_ids: usize);

/// Signature of the `PJRT_TpuTopology_LogiDeviceIdsOnProcess` entry; takes [`PJRT_TpuTopology_LogiDeviceIdsOnProcess_Args`].
pub type PJRT_TpuTopology_LogiDeviceIdsOnProcess = unsafe extern "C" fn(
    args: *mut PJRT_TpuTopology_LogiDeviceIdsOnProcess_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_ProcIdAndIdxOnProcForChip`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_ProcIdAndIdxOnProcForChip_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Chip id.
    pub chip_id: i32,
    /// Out: process id.
    pub process_id: i32,
    /// Out: index on process.
    pub index_on_process: i32,
}

struct_size!(PJRT_TpuTopology_ProcIdAndIdxOnProcForChip_Args_STRUCT_SIZE = PJRT_TpuTopology_ProcIdAndIdxOnProcForChip_Args, index_on_process: i32);

/// Signature of the `PJRT_TpuTopology_ProcIdAndIdxOnProcForChip` entry; takes [`PJRT_TpuTopology_ProcIdAndIdxOnProcForChip_Args`].
pub type PJRT_TpuTopology_ProcIdAndIdxOnProcForChip = unsafe extern "C" fn(
    args: *mut PJRT_TpuTopology_ProcIdAndIdxOnProcForChip_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_ProcIdAndIdxOnProcForLogiDevice`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_ProcIdAndIdxOnProcForLogiDevice_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Device id.
    pub device_id: i32,
    /// Out: process id.
    pub process_id: i32,
    /// Out: index on process.
    pub index_on_process: i32,
}

struct_size!(PJRT_TpuTopology_ProcIdAndIdxOnProcForLogiDevice_Args_STRUCT_SIZE = PJRT_TpuTopology_ProcIdAndIdxOnProcForLogiDevice_Args, index_on_process: i32);

/// Signature of the `PJRT_TpuTopology_ProcIdAndIdxOnProcForLogiDevice` entry; takes [`PJRT_TpuTopology_ProcIdAndIdxOnProcForLogiDevice_Args`].
pub type PJRT_TpuTopology_ProcIdAndIdxOnProcForLogiDevice = unsafe extern "C" fn(
    args: *mut PJRT_TpuTopology_ProcIdAndIdxOnProcForLogiDevice_Args,
)
    -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_ProcessCoordFromId`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_ProcessCoordFromId_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Process id.
    pub process_id: i32,
    /// Coords max dims.
    pub coords_max_dims: usize,
    /// Coords.
    pub coords: *mut i32,
    /// Out: coords num dims.
    pub coords_num_dims: usize,
}

struct_size!(PJRT_TpuTopology_ProcessCoordFromId_Args_STRUCT_SIZE = PJRT_TpuTopology_ProcessCoordFromId_Args, coords_num_dims: usize);

/// Signature of the `PJRT_TpuTopology_ProcessCoordFromId` entry; takes [`PJRT_TpuTopology_ProcessCoordFromId_Args`].
pub type PJRT_TpuTopology_ProcessCoordFromId =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_ProcessCoordFromId_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_ChipIdFromCoord`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_ChipIdFromCoord_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Coords.
    pub coords: *const i32,
    /// Coords num dims.
    pub coords_num_dims: usize,
    /// Out: chip id.
    pub chip_id: i32,
}

struct_size!(PJRT_TpuTopology_ChipIdFromCoord_Args_STRUCT_SIZE = PJRT_TpuTopology_ChipIdFromCoord_Args, chip_id: i32);

/// Signature of the `PJRT_TpuTopology_ChipIdFromCoord` entry; takes [`PJRT_TpuTopology_ChipIdFromCoord_Args`].
pub type PJRT_TpuTopology_ChipIdFromCoord =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_ChipIdFromCoord_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_LogiDeviceIdFromChipCoordAndIdx`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_LogiDeviceIdFromChipCoordAndIdx_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Chip coords.
    pub chip_coords: *const i32,
    /// Chip coords num dims.
    pub chip_coords_num_dims: usize,
    /// Logical device index on chip.
    pub logical_device_index_on_chip: i32,
    /// Out: logical device of default type id.
    pub logical_device_of_default_type_id: i32,
}

struct_size!(PJRT_TpuTopology_LogiDeviceIdFromChipCoordAndIdx_Args_STRUCT_SIZE = PJRT_TpuTopology_LogiDeviceIdFromChipCoordAndIdx_Args, logical_device_of_default_type_id: i32);

/// Signature of the `PJRT_TpuTopology_LogiDeviceIdFromChipCoordAndIdx` entry; takes [`PJRT_TpuTopology_LogiDeviceIdFromChipCoordAndIdx_Args`].
pub type PJRT_TpuTopology_LogiDeviceIdFromChipCoordAndIdx = unsafe extern "C" fn(
    args: *mut PJRT_TpuTopology_LogiDeviceIdFromChipCoordAndIdx_Args,
)
    -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_ChipCoordAndIdxForLogiDevice`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_ChipCoordAndIdxForLogiDevice_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Device id.
    pub device_id: i32,
    /// Chip coords max dims.
    pub chip_coords_max_dims: usize,
    /// Chip coords.
    pub chip_coords: *mut i32,
    /// Out: chip coords num dims.
    pub chip_coords_num_dims: usize,
    /// Out: device index on chip.
    pub device_index_on_chip: i32,
}

struct_size!(PJRT_TpuTopology_ChipCoordAndIdxForLogiDevice_Args_STRUCT_SIZE = PJRT_TpuTopology_ChipCoordAndIdxForLogiDevice_Args, device_index_on_chip: i32);

/// Signature of the `PJRT_TpuTopology_ChipCoordAndIdxForLogiDevice` entry; takes [`PJRT_TpuTopology_ChipCoordAndIdxForLogiDevice_Args`].
pub type PJRT_TpuTopology_ChipCoordAndIdxForLogiDevice = unsafe extern "C" fn(
    args: *mut PJRT_TpuTopology_ChipCoordAndIdxForLogiDevice_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_ChipsPerProcessBounds`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_ChipsPerProcessBounds_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Chip per process bounds max dims.
    pub chip_per_process_bounds_max_dims: usize,
    /// Chip per process bounds.
    pub chip_per_process_bounds: *mut i32,
    /// Out: chip per process bounds num dims.
    pub chip_per_process_bounds_num_dims: usize,
}

struct_size!(PJRT_TpuTopology_ChipsPerProcessBounds_Args_STRUCT_SIZE = PJRT_TpuTopology_ChipsPerProcessBounds_Args, chip_per_process_bounds_num_dims: usize);

/// Signature of the `PJRT_TpuTopology_ChipsPerProcessBounds` entry; takes [`PJRT_TpuTopology_ChipsPerProcessBounds_Args`].
pub type PJRT_TpuTopology_ChipsPerProcessBounds =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_ChipsPerProcessBounds_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_ChipBounds`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_ChipBounds_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Chip bounds max dims.
    pub chip_bounds_max_dims: usize,
    /// Chip bounds.
    pub chip_bounds: *mut i32,
    /// Out: chip bounds num dims.
    pub chip_bounds_num_dims: usize,
}

struct_size!(PJRT_TpuTopology_ChipBounds_Args_STRUCT_SIZE = PJRT_TpuTopology_ChipBounds_Args, chip_bounds_num_dims: usize);

/// Signature of the `PJRT_TpuTopology_ChipBounds` entry; takes [`PJRT_TpuTopology_ChipBounds_Args`].
pub type PJRT_TpuTopology_ChipBounds =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_ChipBounds_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_ProcessBounds`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_ProcessBounds_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Process bounds max dims.
    pub process_bounds_max_dims: usize,
    /// Process bounds.
    pub process_bounds: *mut i32,
    /// Out: process bounds num dims.
    pub process_bounds_num_dims: usize,
}

struct_size!(PJRT_TpuTopology_ProcessBounds_Args_STRUCT_SIZE = PJRT_TpuTopology_ProcessBounds_Args, process_bounds_num_dims: usize);

/// Signature of the `PJRT_TpuTopology_ProcessBounds` entry; takes [`PJRT_TpuTopology_ProcessBounds_Args`].
pub type PJRT_TpuTopology_ProcessBounds =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_ProcessBounds_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_GetRoutingStrategy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_GetRoutingStrategy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// The [`PJRT_TopologyDescription`] to use.
    pub topology: *const PJRT_TopologyDescription,
    /// Routing strategy bytes (not NUL-terminated; length in `routing_strategy_len`).
    pub routing_strategy: *mut c_char,
    /// Routing strategy len.
    pub routing_strategy_len: usize,
}

struct_size!(PJRT_TpuTopology_GetRoutingStrategy_Args_STRUCT_SIZE = PJRT_TpuTopology_GetRoutingStrategy_Args, routing_strategy_len: usize);

/// Signature of the `PJRT_TpuTopology_GetRoutingStrategy` entry; takes [`PJRT_TpuTopology_GetRoutingStrategy_Args`].
pub type PJRT_TpuTopology_GetRoutingStrategy =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_GetRoutingStrategy_Args) -> *mut PJRT_Error;

/// Shape of a TPU slice: dimensions and wrap-around flags.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_SliceConfig {
    /// Dim size.
    pub dim_size: usize,
    /// Dimensions.
    pub dimensions: [i32; 4],
    /// Wrap.
    pub wrap: [bool; 4],
    /// Whether twist.
    pub twist: bool,
}

struct_size!(PJRT_TpuTopology_SliceConfig_STRUCT_SIZE = PJRT_TpuTopology_SliceConfig, twist: bool);

/// Arguments of [`PJRT_TpuTopology_GetSliceConfig`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_GetSliceConfig_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Platform type name bytes (not NUL-terminated; length in `platform_type_name_len`).
    pub platform_type_name: *const c_char,
    /// Platform type name len.
    pub platform_type_name_len: usize,
    /// Slice name bytes (not NUL-terminated; length in `slice_name_len`).
    pub slice_name: *const c_char,
    /// Slice name len.
    pub slice_name_len: usize,
    /// Slice config.
    pub slice_config: *mut PJRT_TpuTopology_SliceConfig,
}

struct_size!(PJRT_TpuTopology_GetSliceConfig_Args_STRUCT_SIZE = PJRT_TpuTopology_GetSliceConfig_Args, slice_config: *mut PJRT_TpuTopology_SliceConfig);

/// Signature of the `PJRT_TpuTopology_GetSliceConfig` entry; takes [`PJRT_TpuTopology_GetSliceConfig_Args`].
pub type PJRT_TpuTopology_GetSliceConfig =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_GetSliceConfig_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_GetSliceConfigs`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_GetSliceConfigs_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Platform type name bytes (not NUL-terminated; length in `platform_type_name_len`).
    pub platform_type_name: *const c_char,
    /// Platform type name len.
    pub platform_type_name_len: usize,
    /// Slice configs.
    pub slice_configs: *mut PJRT_TpuTopology_SliceConfig,
    /// Max slice configs.
    pub max_slice_configs: usize,
    /// Out: number of entries in `slice_configs`.
    pub num_slice_configs: usize,
}

struct_size!(PJRT_TpuTopology_GetSliceConfigs_Args_STRUCT_SIZE = PJRT_TpuTopology_GetSliceConfigs_Args, num_slice_configs: usize);

/// Signature of the `PJRT_TpuTopology_GetSliceConfigs` entry; takes [`PJRT_TpuTopology_GetSliceConfigs_Args`].
pub type PJRT_TpuTopology_GetSliceConfigs =
    unsafe extern "C" fn(args: *mut PJRT_TpuTopology_GetSliceConfigs_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TpuTopology_GetDefaultPlatformConfig`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_GetDefaultPlatformConfig_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Platform type name bytes (not NUL-terminated; length in `platform_type_name_len`).
    pub platform_type_name: *const c_char,
    /// Platform type name len.
    pub platform_type_name_len: usize,
    /// Out: number of chips per tray.
    pub num_chips_per_tray: i64,
    /// Out: number of trays.
    pub num_trays: i64,
}

struct_size!(PJRT_TpuTopology_GetDefaultPlatformConfig_Args_STRUCT_SIZE = PJRT_TpuTopology_GetDefaultPlatformConfig_Args, num_trays: i64);

/// Signature of the `PJRT_TpuTopology_GetDefaultPlatformConfig` entry; takes [`PJRT_TpuTopology_GetDefaultPlatformConfig_Args`].
pub type PJRT_TpuTopology_GetDefaultPlatformConfig = unsafe extern "C" fn(
    args: *mut PJRT_TpuTopology_GetDefaultPlatformConfig_Args,
) -> *mut PJRT_Error;

/// Extension (`PJRT_Extension_Type_TpuTopology`): TPU topology queries.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TpuTopology_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Subslice callback (may be null).
    pub subslice: Option<PJRT_TpuTopology_Subslice>,
    /// Is subslice topology callback (may be null).
    pub is_subslice_topology: Option<PJRT_TpuTopology_IsSubsliceTopology>,
    /// Subslice device id from full device id callback (may be null).
    pub subslice_device_id_from_full_device_id:
        Option<PJRT_TpuTopology_SubsliceDeviceIdFromFullDeviceId>,
    /// Replace host bounds callback (may be null).
    pub replace_host_bounds: Option<PJRT_TpuTopology_ReplaceHostBounds>,
    /// Is enhanced barrier enabled callback (may be null).
    pub is_enhanced_barrier_enabled: Option<PJRT_TpuTopology_IsEnhancedBarrierEnabled>,
    /// Has limited ici connectivity callback (may be null).
    pub has_limited_ici_connectivity: Option<PJRT_TpuTopology_HasLimitedIciConnectivity>,
    /// Is reachable over limited ici callback (may be null).
    pub is_reachable_over_limited_ici: Option<PJRT_TpuTopology_IsReachableOverLimitedIci>,
    /// Process count callback (may be null).
    pub process_count: Option<PJRT_TpuTopology_ProcessCount>,
    /// Chips per process callback (may be null).
    pub chips_per_process: Option<PJRT_TpuTopology_ChipsPerProcess>,
    /// Core count per chip callback (may be null).
    pub core_count_per_chip: Option<PJRT_TpuTopology_CoreCountPerChip>,
    /// Chip count callback (may be null).
    pub chip_count: Option<PJRT_TpuTopology_ChipCount>,
    /// Core count callback (may be null).
    pub core_count: Option<PJRT_TpuTopology_CoreCount>,
    /// Logical device count per process callback (may be null).
    pub logical_device_count_per_process: Option<PJRT_TpuTopology_LogiDeviceCountPerProcess>,
    /// Logical device count callback (may be null).
    pub logical_device_count: Option<PJRT_TpuTopology_LogiDeviceCount>,
    /// Logical device count per chip callback (may be null).
    pub logical_device_count_per_chip: Option<PJRT_TpuTopology_LogiDeviceCountPerChip>,
    /// Core count per process callback (may be null).
    pub core_count_per_process: Option<PJRT_TpuTopology_CoreCountPerProcess>,
    /// Process ids callback (may be null).
    pub process_ids: Option<PJRT_TpuTopology_ProcessIds>,
    /// Logical device ids on process callback (may be null).
    pub logical_device_ids_on_process: Option<PJRT_TpuTopology_LogiDeviceIdsOnProcess>,
    /// Proc id and idx on proc for chip callback (may be null).
    pub proc_id_and_idx_on_proc_for_chip: Option<PJRT_TpuTopology_ProcIdAndIdxOnProcForChip>,
    /// Proc id and idx on proc for logi device callback (may be null).
    pub proc_id_and_idx_on_proc_for_logi_device:
        Option<PJRT_TpuTopology_ProcIdAndIdxOnProcForLogiDevice>,
    /// Process coord from id callback (may be null).
    pub process_coord_from_id: Option<PJRT_TpuTopology_ProcessCoordFromId>,
    /// Chip id from coord callback (may be null).
    pub chip_id_from_coord: Option<PJRT_TpuTopology_ChipIdFromCoord>,
    /// Logical device id from chip coord and idx callback (may be null).
    pub logical_device_id_from_chip_coord_and_idx:
        Option<PJRT_TpuTopology_LogiDeviceIdFromChipCoordAndIdx>,
    /// Chip coord and idx for logi device callback (may be null).
    pub chip_coord_and_idx_for_logi_device: Option<PJRT_TpuTopology_ChipCoordAndIdxForLogiDevice>,
    /// Chips per process bounds callback (may be null).
    pub chips_per_process_bounds: Option<PJRT_TpuTopology_ChipsPerProcessBounds>,
    /// Chip bounds callback (may be null).
    pub chip_bounds: Option<PJRT_TpuTopology_ChipBounds>,
    /// Process bounds callback (may be null).
    pub process_bounds: Option<PJRT_TpuTopology_ProcessBounds>,
    /// Get routing strategy callback (may be null).
    pub get_routing_strategy: Option<PJRT_TpuTopology_GetRoutingStrategy>,
    /// Get slice config callback (may be null).
    pub get_slice_config: Option<PJRT_TpuTopology_GetSliceConfig>,
    /// Get slice configs callback (may be null).
    pub get_slice_configs: Option<PJRT_TpuTopology_GetSliceConfigs>,
    /// Get default platform config callback (may be null).
    pub get_default_platform_config: Option<PJRT_TpuTopology_GetDefaultPlatformConfig>,
}

struct_size!(PJRT_TpuTopology_Extension_STRUCT_SIZE = PJRT_TpuTopology_Extension, get_default_platform_config: Option<PJRT_TpuTopology_GetDefaultPlatformConfig>);

// ==== pjrt_c_api_triton_extension.h ====

/// Header constant `PJRT_API_TRITON_EXTENSION_VERSION`.
pub const PJRT_API_TRITON_EXTENSION_VERSION: c_int = 2;

/// Arguments of [`PJRT_Triton_Compile`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Triton_Compile_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Module bytes (not NUL-terminated; length in `module_size`).
    pub module: *const c_char,
    /// Length of `module` in bytes or elements.
    pub module_size: usize,
    /// Arch name bytes (not NUL-terminated; length in `arch_name_size`).
    pub arch_name: *const c_char,
    /// Length of `arch_name` in bytes or elements.
    pub arch_name_size: usize,
    /// Number of warps.
    pub num_warps: c_int,
    /// Number of ctas.
    pub num_ctas: c_int,
    /// Number of stages.
    pub num_stages: c_int,
    /// Out asm bytes (not NUL-terminated; length in `out_asm_size`).
    pub out_asm: *const c_char,
    /// Length of `out_asm` in bytes or elements.
    pub out_asm_size: usize,
    /// Out smem bytes.
    pub out_smem_bytes: i64,
    /// Out path bytes (not NUL-terminated; length in `out_path_size`).
    pub out_path: *const c_char,
    /// Length of `out_path` in bytes or elements.
    pub out_path_size: usize,
}

struct_size!(PJRT_Triton_Compile_Args_STRUCT_SIZE = PJRT_Triton_Compile_Args, out_path_size: usize);

/// Signature of the `PJRT_Triton_Compile` entry; takes [`PJRT_Triton_Compile_Args`].
pub type PJRT_Triton_Compile =
    unsafe extern "C" fn(args: *mut PJRT_Triton_Compile_Args) -> *mut PJRT_Error;

/// Typedef name the header gives [`PJRT_Triton_Extension`].
pub type PJRT_Triton = PJRT_Triton_Extension;

/// Extension (`PJRT_Extension_Type_Triton`): compile Triton kernels.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Triton_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Compile callback (may be null).
    pub compile: Option<PJRT_Triton_Compile>,
}

struct_size!(PJRT_Triton_Extension_STRUCT_SIZE = PJRT_Triton_Extension, compile: Option<PJRT_Triton_Compile>);

// ==== pjrt_c_api_xla_transform_extension.h ====

/// Header constant `PJRT_API_XLA_TRANSFORM_EXTENSION_VERSION`.
pub const PJRT_API_XLA_TRANSFORM_EXTENSION_VERSION: c_int = 1;

/// A borrowed byte string (pointer and length).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_XlaTransform_string {
    /// Data (C string).
    pub data: *const c_char,
    /// Size.
    pub size: usize,
}

/// Common header of the transform callbacks: API version plus an error slot.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_XlaTransform_version_and_error {
    /// Api version.
    pub api_version: i64,
    /// Out: data.
    pub data: *mut c_void,
    /// Out: cleanup fn callback (may be null).
    pub cleanup_fn: Option<unsafe extern "C" fn(data: *mut c_void)>,
    /// Out: whether has error.
    pub has_error: bool,
    /// Out: code.
    pub code: PJRT_Error_Code,
    /// Out: error msg.
    pub error_msg: PJRT_XlaTransform_string,
}

/// Arguments of an XLA transform callback.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_XlaTransform_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Header.
    pub header: PJRT_XlaTransform_version_and_error,
    /// Hlo module.
    pub hlo_module: PJRT_XlaTransform_string,
    /// Transformed hlo module.
    pub transformed_hlo_module: PJRT_XlaTransform_string,
    /// Out: whether changed.
    pub changed: bool,
}

struct_size!(PJRT_XlaTransform_Args_STRUCT_SIZE = PJRT_XlaTransform_Args, changed: bool);

/// The callbacks that implement a registered XLA transform.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_XlaTransform_Callbacks {
    /// Version.
    pub version: i64,
    /// Dtor callback (may be null).
    pub dtor: Option<unsafe extern "C" fn(data: *mut PJRT_XlaTransform_Callbacks)>,
    /// Transform hlo module callback (may be null).
    pub transform_hlo_module: Option<
        unsafe extern "C" fn(
            data: *mut PJRT_XlaTransform_Callbacks,
            args: *mut PJRT_XlaTransform_Args,
        ),
    >,
}

/// C enum `PJRT_XlaTransform_PipelineStage`, carried as a plain integer; values are the consts below.
pub type PJRT_XlaTransform_PipelineStage = i32;
/// Value `kPreScheduler` of `PJRT_XlaTransform_PipelineStage`.
pub const PJRT_XlaTransform_PipelineStage_kPreScheduler: PJRT_XlaTransform_PipelineStage = 0;
/// Value `kPostScheduler` of `PJRT_XlaTransform_PipelineStage`.
pub const PJRT_XlaTransform_PipelineStage_kPostScheduler: PJRT_XlaTransform_PipelineStage = 1;

/// Arguments of [`PJRT_Register_Xla_Transform_Fn`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Register_Xla_Transform_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Name bytes (not NUL-terminated; length in `name_size`).
    pub name: *const c_char,
    /// Length of `name` in bytes or elements.
    pub name_size: usize,
    /// Stage.
    pub stage: PJRT_XlaTransform_PipelineStage,
    /// Callbacks.
    pub callbacks: *mut PJRT_XlaTransform_Callbacks,
}

struct_size!(PJRT_Register_Xla_Transform_Args_STRUCT_SIZE = PJRT_Register_Xla_Transform_Args, callbacks: *mut PJRT_XlaTransform_Callbacks);

/// Registers an XLA transform.
pub type PJRT_Register_Xla_Transform_Fn =
    unsafe extern "C" fn(args: *mut PJRT_Register_Xla_Transform_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Clear_Xla_Transform_Fn`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Clear_Xla_Transform_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Stage.
    pub stage: PJRT_XlaTransform_PipelineStage,
    /// Name bytes (not NUL-terminated; length in `name_size`).
    pub name: *const c_char,
    /// Length of `name` in bytes or elements.
    pub name_size: usize,
    /// Callbacks.
    pub callbacks: *mut PJRT_XlaTransform_Callbacks,
    /// Out: whether cleared.
    pub cleared: bool,
}

struct_size!(PJRT_Clear_Xla_Transform_Args_STRUCT_SIZE = PJRT_Clear_Xla_Transform_Args, cleared: bool);

/// Removes registered XLA transforms.
pub type PJRT_Clear_Xla_Transform_Fn =
    unsafe extern "C" fn(args: *mut PJRT_Clear_Xla_Transform_Args) -> *mut PJRT_Error;

/// Extension (`PJRT_Extension_Type_XlaTransform`): register transforms applied to XLA programs.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Xla_Transform_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Register xla transform callback (may be null).
    pub register_xla_transform: Option<PJRT_Register_Xla_Transform_Fn>,
    /// Clear xla transform callback (may be null).
    pub clear_xla_transform: Option<PJRT_Clear_Xla_Transform_Fn>,
}

struct_size!(PJRT_Xla_Transform_Extension_STRUCT_SIZE = PJRT_Xla_Transform_Extension, clear_xla_transform: Option<PJRT_Clear_Xla_Transform_Fn>);

// ==== pjrt_c_api_device_event.h ====

/// Continuation run when a device event completes.
pub type PJRT_DeviceEvent_AndThen = unsafe extern "C" fn(user_arg: *mut c_void);

/// State of a device event.
pub type PJRT_DeviceEvent_State = i32;
/// Value `Unavailable` of `PJRT_DeviceEvent_State`.
pub const PJRT_DeviceEvent_State_Unavailable: PJRT_DeviceEvent_State = 0;
/// Value `Ready` of `PJRT_DeviceEvent_State`.
pub const PJRT_DeviceEvent_State_Ready: PJRT_DeviceEvent_State = 1;
/// Value `Error` of `PJRT_DeviceEvent_State`.
pub const PJRT_DeviceEvent_State_Error: PJRT_DeviceEvent_State = 2;

/// Vtable of a [`PJRT_DeviceEvent`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_DeviceEvent_FunctionTable {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Inc ref callback (may be null).
    pub inc_ref: Option<unsafe extern "C" fn(device_event: *mut c_void)>,
    /// Dec ref callback (may be null).
    pub dec_ref: Option<unsafe extern "C" fn(device_event: *mut c_void)>,
    /// And then callback (may be null).
    pub and_then: Option<
        unsafe extern "C" fn(
            device_event: *mut c_void,
            callback: Option<PJRT_DeviceEvent_AndThen>,
            user_arg: *mut c_void,
        ),
    >,
    /// Get error if present callback (may be null).
    pub get_error_if_present: Option<
        unsafe extern "C" fn(
            device_event: *mut c_void,
            code: *mut PJRT_Error_Code,
            message: *mut *const c_char,
            message_size: *mut usize,
        ) -> c_int,
    >,
    /// Parent.
    pub parent: *const PJRT_DeviceEvent_FunctionTable,
    /// Get state callback (may be null).
    pub get_state:
        Option<unsafe extern "C" fn(device_event: *mut c_void) -> PJRT_DeviceEvent_State>,
    /// Get definition stream callback (may be null).
    pub get_definition_stream:
        Option<unsafe extern "C" fn(device_event: *mut c_void, sequence_number: *mut u64) -> isize>,
}

struct_size!(PJRT_DeviceEvent_FunctionTable_STRUCT_SIZE = PJRT_DeviceEvent_FunctionTable, get_definition_stream: Option<unsafe extern "C" fn(device_event: *mut c_void, sequence_number: *mut u64) -> isize>);

/// A device event: vtable plus the plugin's event object.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_DeviceEvent {
    /// Vtable.
    pub vtable: *const PJRT_DeviceEvent_FunctionTable,
    /// Device event.
    pub device_event: *mut c_void,
}

/// A plugin-owned array of device events with its own destructor.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_DeviceEventVector {
    /// Data.
    pub data: *mut PJRT_DeviceEvent,
    /// Size.
    pub size: usize,
    /// Capacity.
    pub capacity: usize,
    /// Destroy callback (may be null).
    pub destroy: Option<unsafe extern "C" fn(data: *mut PJRT_DeviceEvent)>,
}

/// Vtable of a [`PJRT_DeviceEventPromise`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_DeviceEventPromise_FunctionTable {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Instance size.
    pub instance_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Inc ref callback (may be null).
    pub inc_ref: Option<unsafe extern "C" fn(promise: *mut PJRT_DeviceEventPromise)>,
    /// Dec ref callback (may be null).
    pub dec_ref: Option<unsafe extern "C" fn(promise: *mut PJRT_DeviceEventPromise)>,
    /// Event callback (may be null).
    pub event:
        Option<unsafe extern "C" fn(promise: *mut PJRT_DeviceEventPromise) -> PJRT_DeviceEvent>,
    /// Set callback (may be null).
    pub set: Option<
        unsafe extern "C" fn(promise: *mut PJRT_DeviceEventPromise, event: PJRT_DeviceEvent),
    >,
    /// Set error callback (may be null).
    pub set_error:
        Option<unsafe extern "C" fn(promise: *mut PJRT_DeviceEventPromise, error: *mut PJRT_Error)>,
    /// Set ready callback (may be null).
    pub set_ready: Option<unsafe extern "C" fn(promise: *mut PJRT_DeviceEventPromise)>,
}

/// A promise that fulfils a device event; starts with a vtable pointer.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_DeviceEventPromise {
    /// Vtable.
    pub vtable: *const PJRT_DeviceEventPromise_FunctionTable,
}

struct_size!(PJRT_DeviceEventPromise_FunctionTable_STRUCT_SIZE = PJRT_DeviceEventPromise_FunctionTable, set_ready: Option<unsafe extern "C" fn(promise: *mut PJRT_DeviceEventPromise)>);

struct_size!(PJRT_DeviceEventPromise_STRUCT_SIZE = PJRT_DeviceEventPromise, vtable: *const PJRT_DeviceEventPromise_FunctionTable);

// abi-probe: not-vendored
// Everything below comes from upstream headers that include XLA C++ headers
// and so are not in the vendored set; the ABI probe cannot check it.
// (`xla::GlobalDeviceId` is a 32-bit and `xla::CrossHostTransferKey` a 64-bit
// integer; both appear only behind pointers here.)

// ==== CrossHostTransfers (pjrt_c_api_cross_host_transfers_extension.h, not vendored) ====

/// Header constant `PJRT_API_CROSS_HOST_TRANSFERS_EXTENSION_VERSION`.
pub const PJRT_API_CROSS_HOST_TRANSFERS_EXTENSION_VERSION: c_int = 5;

/// Arguments of [`PJRT_Transfers_PJRT_Client_CrossHostSendBuffers`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Transfers_PJRT_Client_CrossHostSendBuffers_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_Client`] to use.
    pub client: *mut PJRT_Client,
    /// Number of buffers.
    pub num_buffers: usize,
    /// Buffers.
    pub buffers: *mut *mut PJRT_Buffer,
    /// Dst global device ids.
    pub dst_global_device_ids: *const i32,
    /// Transfer keys.
    pub transfer_keys: *const i64,
    /// Out: send events.
    pub send_events: *mut *mut PJRT_Event,
}

struct_size!(PJRT_Transfers_PJRT_Client_CrossHostSendBuffers_Args_STRUCT_SIZE = PJRT_Transfers_PJRT_Client_CrossHostSendBuffers_Args, send_events: *mut *mut PJRT_Event);

/// Signature of the `PJRT_Transfers_PJRT_Client_CrossHostSendBuffers` entry; takes [`PJRT_Transfers_PJRT_Client_CrossHostSendBuffers_Args`].
pub type PJRT_Transfers_PJRT_Client_CrossHostSendBuffers = unsafe extern "C" fn(
    args: *mut PJRT_Transfers_PJRT_Client_CrossHostSendBuffers_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Transfers_PJRT_Client_CrossHostReceiveBuffers`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Transfers_PJRT_Client_CrossHostReceiveBuffers_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_Client`] to use.
    pub client: *mut PJRT_Client,
    /// Number of shapes.
    pub num_shapes: usize,
    /// Shape num dims.
    pub shape_num_dims: *mut usize,
    /// Number of dims.
    pub num_dims: *mut *const i64,
    /// Element types.
    pub element_types: *mut PJRT_Buffer_Type,
    /// Layouts.
    pub layouts: *mut *mut PJRT_Buffer_MemoryLayout,
    /// The [`PJRT_Device`] to use.
    pub device: *mut PJRT_Device,
    /// Src global device ids.
    pub src_global_device_ids: *const i32,
    /// Transfer keys.
    pub transfer_keys: *const i64,
    /// Out: buffers.
    pub buffers: *mut *mut PJRT_Buffer,
}

struct_size!(PJRT_Transfers_PJRT_Client_CrossHostReceiveBuffers_Args_STRUCT_SIZE = PJRT_Transfers_PJRT_Client_CrossHostReceiveBuffers_Args, buffers: *mut *mut PJRT_Buffer);

/// Signature of the `PJRT_Transfers_PJRT_Client_CrossHostReceiveBuffers` entry; takes [`PJRT_Transfers_PJRT_Client_CrossHostReceiveBuffers_Args`].
pub type PJRT_Transfers_PJRT_Client_CrossHostReceiveBuffers =
    unsafe extern "C" fn(
        args: *mut PJRT_Transfers_PJRT_Client_CrossHostReceiveBuffers_Args,
    ) -> *mut PJRT_Error;

/// Called when a cancelled cross-host send has been torn down.
pub type PJRT_Transfers_CrossHostOnCanceledCallback =
    unsafe extern "C" fn(error: *mut PJRT_Error, user_arg: *mut c_void);

/// Cancels a pending cross-host send identified by its descriptor.
pub type PJRT_Transfers_CrossHostSendCancelNotifier = unsafe extern "C" fn(
    serialized_descriptor: *const c_char,
    serialized_descriptor_size: usize,
    reason: PJRT_Error_Code,
    error_message: *const c_char,
    error_message_size: usize,
    on_canceled: Option<PJRT_Transfers_CrossHostOnCanceledCallback>,
    on_canceled_user_arg: *mut c_void,
    user_arg: *mut c_void,
);

/// Called with the descriptors of receive buffers, to be sent to the sending host.
pub type PJRT_Transfers_CrossHostRecvNotifier = unsafe extern "C" fn(
    error: *mut PJRT_Error,
    serialized_descriptors: *mut *const c_char,
    descriptors_sizes: *mut usize,
    num_descriptors: usize,
    user_arg: *mut c_void,
    cancel_notifier: Option<PJRT_Transfers_CrossHostSendCancelNotifier>,
    cancel_notifier_user_arg: *mut c_void,
);

/// A receive notifier with its user argument.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Transfers_CrossHostRecvNotifierInfo {
    /// Opaque pointer handed back to the matching callback.
    pub user_arg: *mut c_void,
    /// Notifier callback (may be null).
    pub notifier: Option<PJRT_Transfers_CrossHostRecvNotifier>,
}

struct_size!(PJRT_Transfers_CrossHostRecvNotifierInfo_STRUCT_SIZE = PJRT_Transfers_CrossHostRecvNotifierInfo, notifier: Option<PJRT_Transfers_CrossHostRecvNotifier>);

/// Arguments of [`PJRT_Transfers_PJRT_Client_MakeCrossHostReceiveBuffers`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Transfers_PJRT_Client_MakeCrossHostReceiveBuffers_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_Client`] to use.
    pub client: *mut PJRT_Client,
    /// Number of shapes.
    pub num_shapes: usize,
    /// Shape num dims.
    pub shape_num_dims: *mut usize,
    /// Number of dims.
    pub num_dims: *mut *const i64,
    /// Element types.
    pub element_types: *mut PJRT_Buffer_Type,
    /// Layouts.
    pub layouts: *mut *mut PJRT_Buffer_MemoryLayout,
    /// The [`PJRT_Device`] to use.
    pub device: *mut PJRT_Device,
    /// Notifier.
    pub notifier: PJRT_Transfers_CrossHostRecvNotifierInfo,
    /// Out: buffers.
    pub buffers: *mut *mut PJRT_Buffer,
    /// Out: number of entries in `buffers`.
    pub num_buffers: usize,
}

struct_size!(PJRT_Transfers_PJRT_Client_MakeCrossHostReceiveBuffers_Args_STRUCT_SIZE = PJRT_Transfers_PJRT_Client_MakeCrossHostReceiveBuffers_Args, num_buffers: usize);

/// Signature of the `PJRT_Transfers_PJRT_Client_MakeCrossHostReceiveBuffers` entry; takes [`PJRT_Transfers_PJRT_Client_MakeCrossHostReceiveBuffers_Args`].
pub type PJRT_Transfers_PJRT_Client_MakeCrossHostReceiveBuffers =
    unsafe extern "C" fn(
        args: *mut PJRT_Transfers_PJRT_Client_MakeCrossHostReceiveBuffers_Args,
    ) -> *mut PJRT_Error;

/// Called when a remote send completes or fails.
pub type PJRT_Transfers_CrossHostRemoteSendCallback =
    unsafe extern "C" fn(error: *mut PJRT_Error, sends_were_enqueued: bool, user_arg: *mut c_void);

/// A remote-send callback with its user argument.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Transfers_CrossHostRemoteSendCallbackInfo {
    /// Opaque pointer handed back to the matching callback.
    pub user_arg: *mut c_void,
    /// On done callback (may be null).
    pub on_done: Option<PJRT_Transfers_CrossHostRemoteSendCallback>,
}

struct_size!(PJRT_Transfers_CrossHostRemoteSendCallbackInfo_STRUCT_SIZE = PJRT_Transfers_CrossHostRemoteSendCallbackInfo, on_done: Option<PJRT_Transfers_CrossHostRemoteSendCallback>);

/// Arguments of [`PJRT_Buffer_CopyToRemoteDevice`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Transfers_PJRT_Buffer_CopyToRemoteDevice_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The [`PJRT_Buffer`] to use.
    pub buffer: *mut PJRT_Buffer,
    /// The [`PJRT_Event`] to use.
    pub event: *mut PJRT_Event,
    /// Serialized descriptor.
    pub serialized_descriptor: *mut *mut c_char,
    /// Length of `serialized_descriptor` in bytes or elements.
    pub serialized_descriptor_size: *mut usize,
    /// On done.
    pub on_done: PJRT_Transfers_CrossHostRemoteSendCallbackInfo,
}

struct_size!(PJRT_Transfers_PJRT_Buffer_CopyToRemoteDevice_Args_STRUCT_SIZE = PJRT_Transfers_PJRT_Buffer_CopyToRemoteDevice_Args, on_done: PJRT_Transfers_CrossHostRemoteSendCallbackInfo);

/// Sends a buffer to a receive buffer on another host (older cross-host API).
pub type PJRT_Buffer_CopyToRemoteDevice =
    unsafe extern "C" fn(args: *mut PJRT_Transfers_PJRT_Buffer_CopyToRemoteDevice_Args);

/// Extension (`PJRT_Extension_Type_CrossHostTransfers`): move buffers between hosts.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_CrossHostTransfers_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Function table slot for [`PJRT_Transfers_PJRT_Client_MakeCrossHostReceiveBuffers`].
    pub PJRT_Transfers_PJRT_Client_MakeCrossHostReceiveBuffers:
        Option<PJRT_Transfers_PJRT_Client_MakeCrossHostReceiveBuffers>,
    /// PJRT Transfers PJRT Buffer CopyToRemoteDevice callback (may be null).
    pub PJRT_Transfers_PJRT_Buffer_CopyToRemoteDevice: Option<PJRT_Buffer_CopyToRemoteDevice>,
    /// Function table slot for [`PJRT_Transfers_PJRT_Client_CrossHostReceiveBuffers`].
    pub PJRT_Transfers_PJRT_Client_CrossHostReceiveBuffers:
        Option<PJRT_Transfers_PJRT_Client_CrossHostReceiveBuffers>,
    /// Function table slot for [`PJRT_Transfers_PJRT_Client_CrossHostSendBuffers`].
    pub PJRT_Transfers_PJRT_Client_CrossHostSendBuffers:
        Option<PJRT_Transfers_PJRT_Client_CrossHostSendBuffers>,
}

struct_size!(PJRT_CrossHostTransfers_Extension_STRUCT_SIZE = PJRT_CrossHostTransfers_Extension, PJRT_Transfers_PJRT_Client_CrossHostSendBuffers: Option<PJRT_Transfers_PJRT_Client_CrossHostSendBuffers>);

// ==== ExecutableMetadata (executable_metadata_extension.h, not vendored) ====

/// Header constant `PJRT_API_EXECUTABLE_METADATA_EXTENSION_VERSION`.
pub const PJRT_API_EXECUTABLE_METADATA_EXTENSION_VERSION: c_int = 1;

/// Serialized executable metadata owned by the plugin.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_ExecutableMetadata {
    /// Serialized metadata bytes (not NUL-terminated; length in `serialized_metadata_size`).
    pub serialized_metadata: *const c_char,
    /// Length of `serialized_metadata` in bytes or elements.
    pub serialized_metadata_size: usize,
}

/// Arguments of [`PJRT_ExecutableMetadata_GetExecutableMetadata`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_ExecutableMetadata_GetExecutableMetadata_Args {
    /// The [`PJRT_Executable`] to use.
    pub executable: *mut PJRT_Executable,
    /// Out: metadata.
    pub metadata: *mut PJRT_ExecutableMetadata,
}

struct_size!(PJRT_ExecutableMetadata_GetExecutableMetadata_Args_STRUCT_SIZE = PJRT_ExecutableMetadata_GetExecutableMetadata_Args, metadata: *mut PJRT_ExecutableMetadata);

/// Returns serialized metadata (fingerprint and more) of an executable.
pub type PJRT_ExecutableMetadata_GetExecutableMetadata = unsafe extern "C" fn(
    args: *mut PJRT_ExecutableMetadata_GetExecutableMetadata_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_ExecutableMetadata_DestroySerializedMetadata`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_ExecutableMetadata_DestroySerializedMetadata_Args {
    /// Metadata.
    pub metadata: *mut PJRT_ExecutableMetadata,
}

struct_size!(PJRT_ExecutableMetadata_DestroySerializedMetadata_Args_STRUCT_SIZE = PJRT_ExecutableMetadata_DestroySerializedMetadata_Args, metadata: *mut PJRT_ExecutableMetadata);

/// Frees metadata returned by [`PJRT_ExecutableMetadata_GetExecutableMetadata`].
pub type PJRT_ExecutableMetadata_DestroySerializedMetadata =
    unsafe extern "C" fn(args: *mut PJRT_ExecutableMetadata_DestroySerializedMetadata_Args);

/// Extension (`PJRT_Extension_Type_ExecutableMetadata`): executable metadata.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_ExecutableMetadata_Extension {
    /// Extension header; `type` says which extension this is.
    pub base: PJRT_Extension_Base,
    /// Get executable metadata callback (may be null).
    pub get_executable_metadata: Option<PJRT_ExecutableMetadata_GetExecutableMetadata>,
    /// Destroy serialized metadata callback (may be null).
    pub destroy_serialized_metadata: Option<PJRT_ExecutableMetadata_DestroySerializedMetadata>,
}

struct_size!(PJRT_ExecutableMetadata_Extension_STRUCT_SIZE = PJRT_ExecutableMetadata_Extension, destroy_serialized_metadata: Option<PJRT_ExecutableMetadata_DestroySerializedMetadata>);
