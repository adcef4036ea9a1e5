//! The PJRT C API, laid out as at version 0.114.
//!
//! Declared by hand from the upstream header's structure; see the crate docs
//! for the naming rules. Nothing here is callable without a loaded plugin.

use core::ffi::{c_char, c_int, c_void};

/// Major version of the PJRT C API layout declared here.
pub const PJRT_API_MAJOR: c_int = 0;

/// Minor version of the PJRT C API layout declared here (0.114).
pub const PJRT_API_MINOR: c_int = 114;

/// Tag saying which extension struct a [`PJRT_Extension_Base`] heads.
pub type PJRT_Extension_Type = i32;
/// Extension tag: GPU custom-call registration.
pub const PJRT_Extension_Type_Gpu_Custom_Call: PJRT_Extension_Type = 0;
/// Value `Profiler` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_Profiler: PJRT_Extension_Type = 1;
/// Value `Custom_Partitioner` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_Custom_Partitioner: PJRT_Extension_Type = 2;
/// Value `Stream` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_Stream: PJRT_Extension_Type = 3;
/// Value `Layouts` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_Layouts: PJRT_Extension_Type = 4;
/// Value `FFI` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_FFI: PJRT_Extension_Type = 5;
/// Value `MemoryDescriptions` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_MemoryDescriptions: PJRT_Extension_Type = 6;
/// Value `Triton` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_Triton: PJRT_Extension_Type = 7;
/// Value `RawBuffer` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_RawBuffer: PJRT_Extension_Type = 8;
/// Value `PhaseCompile` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_PhaseCompile: PJRT_Extension_Type = 9;
/// Value `Example` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_Example: PJRT_Extension_Type = 10;
/// Value `Unknown` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_Unknown: PJRT_Extension_Type = 11;
/// Value `CrossHostTransfers` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_CrossHostTransfers: PJRT_Extension_Type = 12;
/// Value `ExecutableMetadata` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_ExecutableMetadata: PJRT_Extension_Type = 13;
/// Value `Callback` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_Callback: PJRT_Extension_Type = 14;
/// Value `HostAllocator` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_HostAllocator: PJRT_Extension_Type = 15;
/// Value `TpuTopology` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_TpuTopology: PJRT_Extension_Type = 16;
/// Value `TpuExecutable` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_TpuExecutable: PJRT_Extension_Type = 17;
/// Value `Megascale` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_Megascale: PJRT_Extension_Type = 18;
/// Value `Shardings` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_Shardings: PJRT_Extension_Type = 19;
/// Value `AbiVersion` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_AbiVersion: PJRT_Extension_Type = 20;
/// Value `Collectives` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_Collectives: PJRT_Extension_Type = 21;
/// Value `MultiSlice` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_MultiSlice: PJRT_Extension_Type = 22;
/// Value `HostMemoryAllocator` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_HostMemoryAllocator: PJRT_Extension_Type = 23;
/// Value `XlaTransform` of `PJRT_Extension_Type`.
pub const PJRT_Extension_Type_XlaTransform: PJRT_Extension_Type = 24;

/// Common header of every extension struct; extensions form a singly linked list.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Extension_Base {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Which extension this is (a `PJRT_Extension_Type_*` value).
    pub r#type: PJRT_Extension_Type,
    /// Next extension in the chain, or null.
    pub next: *mut PJRT_Extension_Base,
}

struct_size!(PJRT_Extension_Base_STRUCT_SIZE = PJRT_Extension_Base, next: *mut PJRT_Extension_Base);

/// Version pair reported by a plugin inside [`PJRT_Api`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Api_Version {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Major version of the plugin's API.
    pub major_version: c_int,
    /// Minor version of the plugin's API.
    pub minor_version: c_int,
}

struct_size!(PJRT_Api_Version_STRUCT_SIZE = PJRT_Api_Version, minor_version: c_int);

/// Arguments of [`PJRT_Error_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Error_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Error.
    pub error: *mut PJRT_Error,
}

struct_size!(PJRT_Error_Destroy_Args_STRUCT_SIZE = PJRT_Error_Destroy_Args, error: *mut PJRT_Error);

/// Signature of the `PJRT_Error_Destroy` entry; takes [`PJRT_Error_Destroy_Args`].
pub type PJRT_Error_Destroy = unsafe extern "C" fn(args: *mut PJRT_Error_Destroy_Args);

/// Arguments of [`PJRT_Error_Message`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Error_Message_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Error.
    pub error: *const PJRT_Error,
    /// Out: message.
    pub message: *const c_char,
    /// Out: length of `message` in bytes or elements.
    pub message_size: usize,
}

struct_size!(PJRT_Error_Message_Args_STRUCT_SIZE = PJRT_Error_Message_Args, message_size: usize);

/// Signature of the `PJRT_Error_Message` entry; takes [`PJRT_Error_Message_Args`].
pub type PJRT_Error_Message = unsafe extern "C" fn(args: *mut PJRT_Error_Message_Args);

/// Status code of a [`PJRT_Error`] (same numbering as absl status codes).
pub type PJRT_Error_Code = i32;
/// Value `OK` of `PJRT_Error_Code`.
pub const PJRT_Error_Code_OK: PJRT_Error_Code = 0;
/// Value `CANCELLED` of `PJRT_Error_Code`.
pub const PJRT_Error_Code_CANCELLED: PJRT_Error_Code = 1;
/// Value `UNKNOWN` of `PJRT_Error_Code`.
pub const PJRT_Error_Code_UNKNOWN: PJRT_Error_Code = 2;
/// Value `INVALID_ARGUMENT` of `PJRT_Error_Code`.
pub const PJRT_Error_Code_INVALID_ARGUMENT: PJRT_Error_Code = 3;
/// Value `DEADLINE_EXCEEDED` of `PJRT_Error_Code`.
pub const PJRT_Error_Code_DEADLINE_EXCEEDED: PJRT_Error_Code = 4;
/// Value `NOT_FOUND` of `PJRT_Error_Code`.
pub const PJRT_Error_Code_NOT_FOUND: PJRT_Error_Code = 5;
/// Value `ALREADY_EXISTS` of `PJRT_Error_Code`.
pub const PJRT_Error_Code_ALREADY_EXISTS: PJRT_Error_Code = 6;
/// Value `PERMISSION_DENIED` of `PJRT_Error_Code`.
pub const PJRT_Error_Code_PERMISSION_DENIED: PJRT_Error_Code = 7;
/// Value `RESOURCE_EXHAUSTED` of `PJRT_Error_Code`.
pub const PJRT_Error_Code_RESOURCE_EXHAUSTED: PJRT_Error_Code = 8;
/// Value `FAILED_PRECONDITION` of `PJRT_Error_Code`.
pub const PJRT_Error_Code_FAILED_PRECONDITION: PJRT_Error_Code = 9;
/// Value `ABORTED` of `PJRT_Error_Code`.
pub const PJRT_Error_Code_ABORTED: PJRT_Error_Code = 10;
/// Value `OUT_OF_RANGE` of `PJRT_Error_Code`.
pub const PJRT_Error_Code_OUT_OF_RANGE: PJRT_Error_Code = 11;
/// Value `UNIMPLEMENTED` of `PJRT_Error_Code`.
pub const PJRT_Error_Code_UNIMPLEMENTED: PJRT_Error_Code = 12;
/// Value `INTERNAL` of `PJRT_Error_Code`.
pub const PJRT_Error_Code_INTERNAL: PJRT_Error_Code = 13;
/// Value `UNAVAILABLE` of `PJRT_Error_Code`.
pub const PJRT_Error_Code_UNAVAILABLE: PJRT_Error_Code = 14;
/// Value `DATA_LOSS` of `PJRT_Error_Code`.
pub const PJRT_Error_Code_DATA_LOSS: PJRT_Error_Code = 15;
/// Value `UNAUTHENTICATED` of `PJRT_Error_Code`.
pub const PJRT_Error_Code_UNAUTHENTICATED: PJRT_Error_Code = 16;

/// Visitor called once per (key, value) payload pair of an error.
pub type PJRT_Error_PayloadVisitor = unsafe extern "C" fn(
    key: *const c_char,
    key_size: usize,
    value: *const c_char,
    value_size: usize,
    user_arg: *mut c_void,
);

/// Per-error vtable that plugins at 0.107+ place at the start of [`PJRT_Error`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Error_FunctionTable {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Size of the error object that carries this vtable.
    pub instance_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Frees the error.
    pub destroy: Option<unsafe extern "C" fn(error: *mut PJRT_Error)>,
    /// Returns the message pointer and length (borrowed from the error).
    pub message: Option<
        unsafe extern "C" fn(
            error: *const PJRT_Error,
            message: *mut *const c_char,
            message_size: *mut usize,
        ),
    >,
    /// Returns the status code.
    pub get_code: Option<unsafe extern "C" fn(error: *const PJRT_Error) -> PJRT_Error_Code>,
    /// Calls the visitor for each payload entry.
    pub for_each_payload: Option<
        unsafe extern "C" fn(
            error: *const PJRT_Error,
            visitor: Option<PJRT_Error_PayloadVisitor>,
            user_arg: *mut c_void,
        ),
    >,
}

struct_size!(PJRT_Error_FunctionTable_STRUCT_SIZE = PJRT_Error_FunctionTable, for_each_payload: Option<unsafe extern "C" fn(error: *const PJRT_Error, visitor: Option<PJRT_Error_PayloadVisitor>, user_arg: *mut c_void)>);

/// An error returned by a PJRT call. Plugins at 0.107+ start it with a vtable pointer; older ones do not, so treat it as opaque and use the `PJRT_Error_*` table entries.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Error {
    /// Vtable (0.107+ plugins only; never read it on older plugins).
    pub vtable: *const PJRT_Error_FunctionTable,
}

struct_size!(PJRT_Error_STRUCT_SIZE = PJRT_Error, vtable: *const PJRT_Error_FunctionTable);

/// Arguments of [`PJRT_Error_GetCode`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Error_GetCode_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Error.
    pub error: *const PJRT_Error,
    /// Out: code.
    pub code: PJRT_Error_Code,
}

struct_size!(PJRT_Error_GetCode_Args_STRUCT_SIZE = PJRT_Error_GetCode_Args, code: PJRT_Error_Code);

/// Signature of the `PJRT_Error_GetCode` entry; takes [`PJRT_Error_GetCode_Args`].
pub type PJRT_Error_GetCode =
    unsafe extern "C" fn(args: *mut PJRT_Error_GetCode_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Error_ForEachPayload`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Error_ForEachPayload_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Error.
    pub error: *const PJRT_Error,
    /// Visitor callback (may be null).
    pub visitor: Option<PJRT_Error_PayloadVisitor>,
    /// User arg.
    pub user_arg: *mut c_void,
}

struct_size!(PJRT_Error_ForEachPayload_Args_STRUCT_SIZE = PJRT_Error_ForEachPayload_Args, user_arg: *mut c_void);

/// Signature of the `PJRT_Error_ForEachPayload` entry; takes [`PJRT_Error_ForEachPayload_Args`].
pub type PJRT_Error_ForEachPayload =
    unsafe extern "C" fn(args: *mut PJRT_Error_ForEachPayload_Args) -> *mut PJRT_Error;

/// Callback a plugin hands to a client callback so the client can build a [`PJRT_Error`].
pub type PJRT_CallbackError = unsafe extern "C" fn(
    code: PJRT_Error_Code,
    message: *const c_char,
    message_size: usize,
) -> *mut PJRT_Error;

/// Which member of a [`PJRT_NamedValue`] union is set.
pub type PJRT_NamedValue_Type = i32;
/// Value `PJRT_NamedValue_kString` of `PJRT_NamedValue_Type`.
pub const PJRT_NamedValue_kString: PJRT_NamedValue_Type = 0;
/// Value `PJRT_NamedValue_kInt64` of `PJRT_NamedValue_Type`.
pub const PJRT_NamedValue_kInt64: PJRT_NamedValue_Type = 1;
/// Value `PJRT_NamedValue_kInt64List` of `PJRT_NamedValue_Type`.
pub const PJRT_NamedValue_kInt64List: PJRT_NamedValue_Type = 2;
/// Value `PJRT_NamedValue_kFloat` of `PJRT_NamedValue_Type`.
pub const PJRT_NamedValue_kFloat: PJRT_NamedValue_Type = 3;
/// Value `PJRT_NamedValue_kBool` of `PJRT_NamedValue_Type`.
pub const PJRT_NamedValue_kBool: PJRT_NamedValue_Type = 4;

/// Value storage of a [`PJRT_NamedValue`] (anonymous union in C).
#[repr(C)]
#[derive(Clone, Copy)]
pub union PJRT_NamedValue_Union {
    /// String bytes (not NUL-terminated), for `kString`.
    pub string_value: *const c_char,
    /// Integer, for `kInt64`.
    pub int64_value: i64,
    /// Pointer to integers, for `kInt64List`.
    pub int64_array_value: *const i64,
    /// Float, for `kFloat`.
    pub float_value: f32,
    /// Boolean, for `kBool`.
    pub bool_value: bool,
}

/// A named, typed value: used for create options, attributes and cost properties.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_NamedValue {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Name bytes (not NUL-terminated).
    pub name: *const c_char,
    /// Length of `name` in bytes.
    pub name_size: usize,
    /// Which union member is set (a `PJRT_NamedValue_k*` value).
    pub r#type: PJRT_NamedValue_Type,
    /// The value; the member to read is given by `type` (C: anonymous union).
    pub value: PJRT_NamedValue_Union,
    /// String length in bytes, list length, or 1 for scalars.
    pub value_size: usize,
}

struct_size!(PJRT_NamedValue_STRUCT_SIZE = PJRT_NamedValue, value_size: usize);

/// Arguments of [`PJRT_Plugin_Initialize`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Plugin_Initialize_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
}

struct_size!(PJRT_Plugin_Initialize_Args_STRUCT_SIZE = PJRT_Plugin_Initialize_Args, extension_start: *mut PJRT_Extension_Base);

/// Signature of the `PJRT_Plugin_Initialize` entry; takes [`PJRT_Plugin_Initialize_Args`].
pub type PJRT_Plugin_Initialize =
    unsafe extern "C" fn(args: *mut PJRT_Plugin_Initialize_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Plugin_Attributes`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Plugin_Attributes_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Out: attributes.
    pub attributes: *const PJRT_NamedValue,
    /// Out: number of entries in `attributes`.
    pub num_attributes: usize,
}

struct_size!(PJRT_Plugin_Attributes_Args_STRUCT_SIZE = PJRT_Plugin_Attributes_Args, num_attributes: usize);

/// Signature of the `PJRT_Plugin_Attributes` entry; takes [`PJRT_Plugin_Attributes_Args`].
pub type PJRT_Plugin_Attributes =
    unsafe extern "C" fn(args: *mut PJRT_Plugin_Attributes_Args) -> *mut PJRT_Error;

/// Opaque `PJRT_Event` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Event {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_Event_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Event_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Event.
    pub event: *mut PJRT_Event,
}

struct_size!(PJRT_Event_Destroy_Args_STRUCT_SIZE = PJRT_Event_Destroy_Args, event: *mut PJRT_Event);

/// Signature of the `PJRT_Event_Destroy` entry; takes [`PJRT_Event_Destroy_Args`].
pub type PJRT_Event_Destroy =
    unsafe extern "C" fn(args: *mut PJRT_Event_Destroy_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Event_IsReady`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Event_IsReady_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Event.
    pub event: *mut PJRT_Event,
    /// Out: is ready.
    pub is_ready: bool,
}

struct_size!(PJRT_Event_IsReady_Args_STRUCT_SIZE = PJRT_Event_IsReady_Args, is_ready: bool);

/// Signature of the `PJRT_Event_IsReady` entry; takes [`PJRT_Event_IsReady_Args`].
pub type PJRT_Event_IsReady =
    unsafe extern "C" fn(args: *mut PJRT_Event_IsReady_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Event_Error`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Event_Error_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Event.
    pub event: *mut PJRT_Event,
}

struct_size!(PJRT_Event_Error_Args_STRUCT_SIZE = PJRT_Event_Error_Args, event: *mut PJRT_Event);

/// Signature of the `PJRT_Event_Error` entry; takes [`PJRT_Event_Error_Args`].
pub type PJRT_Event_Error =
    unsafe extern "C" fn(args: *mut PJRT_Event_Error_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Event_Await`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Event_Await_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Event.
    pub event: *mut PJRT_Event,
}

struct_size!(PJRT_Event_Await_Args_STRUCT_SIZE = PJRT_Event_Await_Args, event: *mut PJRT_Event);

/// Signature of the `PJRT_Event_Await` entry; takes [`PJRT_Event_Await_Args`].
pub type PJRT_Event_Await =
    unsafe extern "C" fn(args: *mut PJRT_Event_Await_Args) -> *mut PJRT_Error;

/// Called once when an event completes; receives the error (or null) and the user argument.
pub type PJRT_Event_OnReadyCallback =
    unsafe extern "C" fn(error: *mut PJRT_Error, user_arg: *mut c_void);

/// Arguments of [`PJRT_Event_OnReady`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Event_OnReady_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Event.
    pub event: *mut PJRT_Event,
    /// Callback callback (may be null).
    pub callback: Option<PJRT_Event_OnReadyCallback>,
    /// User arg.
    pub user_arg: *mut c_void,
}

struct_size!(PJRT_Event_OnReady_Args_STRUCT_SIZE = PJRT_Event_OnReady_Args, user_arg: *mut c_void);

/// Signature of the `PJRT_Event_OnReady` entry; takes [`PJRT_Event_OnReady_Args`].
pub type PJRT_Event_OnReady =
    unsafe extern "C" fn(args: *mut PJRT_Event_OnReady_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Event_Create`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Event_Create_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Out: event.
    pub event: *mut PJRT_Event,
}

struct_size!(PJRT_Event_Create_Args_STRUCT_SIZE = PJRT_Event_Create_Args, event: *mut PJRT_Event);

/// Signature of the `PJRT_Event_Create` entry; takes [`PJRT_Event_Create_Args`].
pub type PJRT_Event_Create =
    unsafe extern "C" fn(args: *mut PJRT_Event_Create_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Event_Set`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Event_Set_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Event.
    pub event: *mut PJRT_Event,
    /// Error code.
    pub error_code: PJRT_Error_Code,
    /// Error message.
    pub error_message: *const c_char,
    /// Length of `error_message` in bytes or elements.
    pub error_message_size: usize,
}

struct_size!(PJRT_Event_Set_Args_STRUCT_SIZE = PJRT_Event_Set_Args, error_message_size: usize);

/// Signature of the `PJRT_Event_Set` entry; takes [`PJRT_Event_Set_Args`].
pub type PJRT_Event_Set = unsafe extern "C" fn(args: *mut PJRT_Event_Set_Args) -> *mut PJRT_Error;

/// Opaque `PJRT_Client` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Client {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_Device` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Device {
    _opaque: [u8; 0],
}

/// Per-memory vtable that plugins at 0.105+ place at the start of [`PJRT_Memory`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Memory_FunctionTable {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Size of the memory object that carries this vtable.
    pub instance_struct_size: usize,
    /// Looks up client data attached to the memory under `key`.
    pub get_user_data:
        Option<unsafe extern "C" fn(memory: *mut PJRT_Memory, key: *const c_void) -> *mut c_void>,
    /// Attaches client data (with a destructor) to the memory under `key`.
    pub set_user_data: Option<
        unsafe extern "C" fn(
            memory: *mut PJRT_Memory,
            key: *const c_void,
            data: *mut c_void,
            dtor: Option<unsafe extern "C" fn(arg0: *mut c_void)>,
        ),
    >,
}

struct_size!(PJRT_Memory_FunctionTable_STRUCT_SIZE = PJRT_Memory_FunctionTable, set_user_data: Option<unsafe extern "C" fn(memory: *mut PJRT_Memory, key: *const c_void, data: *mut c_void, dtor: Option<unsafe extern "C" fn(arg0: *mut c_void)>)>);

/// A memory space of a device. Plugins at 0.105+ start it with a vtable pointer; treat it as opaque on older ones.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Memory {
    /// Vtable (0.105+ plugins only).
    pub vtable: *const PJRT_Memory_FunctionTable,
}

struct_size!(PJRT_Memory_STRUCT_SIZE = PJRT_Memory, vtable: *const PJRT_Memory_FunctionTable);

/// Opaque `PJRT_DeviceDescription` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_DeviceDescription {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_TopologyDescription` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_TopologyDescription {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_Executable` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Executable {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_LoadedExecutable` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_LoadedExecutable {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_Buffer` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Buffer {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_FulfillAliasBufferCallback` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_FulfillAliasBufferCallback {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_AsyncHostToDeviceTransferManager` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_AsyncHostToDeviceTransferManager {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_PhaseCompiler` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_PhaseCompiler {
    _opaque: [u8; 0],
}

/// Frees a value returned by a key-value get callback.
pub type PJRT_KeyValueGetCallback_ValueDeleter = unsafe extern "C" fn(value: *mut c_char);

/// Arguments passed to a [`PJRT_KeyValueGetCallback`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_KeyValueGetCallback_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Key.
    pub key: *const c_char,
    /// Length of `key` in bytes or elements.
    pub key_size: usize,
    /// Timeout in ms.
    pub timeout_in_ms: c_int,
    /// Callback error.
    pub callback_error: *mut Option<PJRT_CallbackError>,
    /// User arg.
    pub user_arg: *mut c_void,
    /// Out: value.
    pub value: *mut c_char,
    /// Out: length of `value` in bytes or elements.
    pub value_size: usize,
    /// Out: value deleter callback callback (may be null).
    pub value_deleter_callback: Option<PJRT_KeyValueGetCallback_ValueDeleter>,
}

struct_size!(PJRT_KeyValueGetCallback_Args_STRUCT_SIZE = PJRT_KeyValueGetCallback_Args, value_deleter_callback: Option<PJRT_KeyValueGetCallback_ValueDeleter>);

/// Blocking key-value store lookup supplied by the client (used for multi-process setup).
pub type PJRT_KeyValueGetCallback =
    unsafe extern "C" fn(args: *mut PJRT_KeyValueGetCallback_Args) -> *mut PJRT_Error;

/// Frees a value returned by a key-value try-get callback.
pub type PJRT_KeyValueTryGetCallback_ValueDeleter = unsafe extern "C" fn(value: *mut c_char);

/// Arguments passed to a [`PJRT_KeyValueTryGetCallback`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_KeyValueTryGetCallback_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Key.
    pub key: *const c_char,
    /// Length of `key` in bytes or elements.
    pub key_size: usize,
    /// Callback error.
    pub callback_error: *mut Option<PJRT_CallbackError>,
    /// User arg.
    pub user_arg: *mut c_void,
    /// Out: value.
    pub value: *mut c_char,
    /// Out: length of `value` in bytes or elements.
    pub value_size: usize,
    /// Out: value deleter callback callback (may be null).
    pub value_deleter_callback: Option<PJRT_KeyValueTryGetCallback_ValueDeleter>,
}

struct_size!(PJRT_KeyValueTryGetCallback_Args_STRUCT_SIZE = PJRT_KeyValueTryGetCallback_Args, value_deleter_callback: Option<PJRT_KeyValueTryGetCallback_ValueDeleter>);

/// Non-blocking key-value store lookup supplied by the client.
pub type PJRT_KeyValueTryGetCallback =
    unsafe extern "C" fn(args: *mut PJRT_KeyValueTryGetCallback_Args) -> *mut PJRT_Error;

/// Arguments passed to a [`PJRT_KeyValuePutCallback`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_KeyValuePutCallback_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Key.
    pub key: *const c_char,
    /// Length of `key` in bytes or elements.
    pub key_size: usize,
    /// Value.
    pub value: *const c_char,
    /// Length of `value` in bytes or elements.
    pub value_size: usize,
    /// Callback error.
    pub callback_error: *mut Option<PJRT_CallbackError>,
    /// User arg.
    pub user_arg: *mut c_void,
}

struct_size!(PJRT_KeyValuePutCallback_Args_STRUCT_SIZE = PJRT_KeyValuePutCallback_Args, user_arg: *mut c_void);

/// Key-value store write supplied by the client.
pub type PJRT_KeyValuePutCallback =
    unsafe extern "C" fn(args: *mut PJRT_KeyValuePutCallback_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_Create`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_Create_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Create options.
    pub create_options: *const PJRT_NamedValue,
    /// Number of options.
    pub num_options: usize,
    /// Kv get callback callback (may be null).
    pub kv_get_callback: Option<PJRT_KeyValueGetCallback>,
    /// Kv get user arg.
    pub kv_get_user_arg: *mut c_void,
    /// Kv put callback callback (may be null).
    pub kv_put_callback: Option<PJRT_KeyValuePutCallback>,
    /// Kv put user arg.
    pub kv_put_user_arg: *mut c_void,
    /// Out: client.
    pub client: *mut PJRT_Client,
    /// Kv try get callback callback (may be null).
    pub kv_try_get_callback: Option<PJRT_KeyValueTryGetCallback>,
    /// Kv try get user arg.
    pub kv_try_get_user_arg: *mut c_void,
}

struct_size!(PJRT_Client_Create_Args_STRUCT_SIZE = PJRT_Client_Create_Args, kv_try_get_user_arg: *mut c_void);

/// Signature of the `PJRT_Client_Create` entry; takes [`PJRT_Client_Create_Args`].
pub type PJRT_Client_Create =
    unsafe extern "C" fn(args: *mut PJRT_Client_Create_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
}

struct_size!(PJRT_Client_Destroy_Args_STRUCT_SIZE = PJRT_Client_Destroy_Args, client: *mut PJRT_Client);

/// Signature of the `PJRT_Client_Destroy` entry; takes [`PJRT_Client_Destroy_Args`].
pub type PJRT_Client_Destroy =
    unsafe extern "C" fn(args: *mut PJRT_Client_Destroy_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_PlatformName`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_PlatformName_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Out: platform name.
    pub platform_name: *const c_char,
    /// Out: length of `platform_name` in bytes or elements.
    pub platform_name_size: usize,
}

struct_size!(PJRT_Client_PlatformName_Args_STRUCT_SIZE = PJRT_Client_PlatformName_Args, platform_name_size: usize);

/// Signature of the `PJRT_Client_PlatformName` entry; takes [`PJRT_Client_PlatformName_Args`].
pub type PJRT_Client_PlatformName =
    unsafe extern "C" fn(args: *mut PJRT_Client_PlatformName_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_ProcessIndex`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_ProcessIndex_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Out: process index.
    pub process_index: c_int,
}

struct_size!(PJRT_Client_ProcessIndex_Args_STRUCT_SIZE = PJRT_Client_ProcessIndex_Args, process_index: c_int);

/// Signature of the `PJRT_Client_ProcessIndex` entry; takes [`PJRT_Client_ProcessIndex_Args`].
pub type PJRT_Client_ProcessIndex =
    unsafe extern "C" fn(args: *mut PJRT_Client_ProcessIndex_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_PlatformVersion`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_PlatformVersion_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Out: platform version.
    pub platform_version: *const c_char,
    /// Out: length of `platform_version` in bytes or elements.
    pub platform_version_size: usize,
}

struct_size!(PJRT_Client_PlatformVersion_Args_STRUCT_SIZE = PJRT_Client_PlatformVersion_Args, platform_version_size: usize);

/// Signature of the `PJRT_Client_PlatformVersion` entry; takes [`PJRT_Client_PlatformVersion_Args`].
pub type PJRT_Client_PlatformVersion =
    unsafe extern "C" fn(args: *mut PJRT_Client_PlatformVersion_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_TopologyDescription`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_TopologyDescription_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Out: topology.
    pub topology: *mut PJRT_TopologyDescription,
}

struct_size!(PJRT_Client_TopologyDescription_Args_STRUCT_SIZE = PJRT_Client_TopologyDescription_Args, topology: *mut PJRT_TopologyDescription);

/// Signature of the `PJRT_Client_TopologyDescription` entry; takes [`PJRT_Client_TopologyDescription_Args`].
pub type PJRT_Client_TopologyDescription =
    unsafe extern "C" fn(args: *mut PJRT_Client_TopologyDescription_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_Devices`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_Devices_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Out: devices.
    pub devices: *const *mut PJRT_Device,
    /// Out: number of entries in `devices`.
    pub num_devices: usize,
}

struct_size!(PJRT_Client_Devices_Args_STRUCT_SIZE = PJRT_Client_Devices_Args, num_devices: usize);

/// Signature of the `PJRT_Client_Devices` entry; takes [`PJRT_Client_Devices_Args`].
pub type PJRT_Client_Devices =
    unsafe extern "C" fn(args: *mut PJRT_Client_Devices_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_AddressableDevices`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_AddressableDevices_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Out: addressable devices.
    pub addressable_devices: *const *mut PJRT_Device,
    /// Out: number of entries in `addressable_devices`.
    pub num_addressable_devices: usize,
}

struct_size!(PJRT_Client_AddressableDevices_Args_STRUCT_SIZE = PJRT_Client_AddressableDevices_Args, num_addressable_devices: usize);

/// Signature of the `PJRT_Client_AddressableDevices` entry; takes [`PJRT_Client_AddressableDevices_Args`].
pub type PJRT_Client_AddressableDevices =
    unsafe extern "C" fn(args: *mut PJRT_Client_AddressableDevices_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_LookupDevice`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_LookupDevice_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Id.
    pub id: c_int,
    /// Out: device.
    pub device: *mut PJRT_Device,
}

struct_size!(PJRT_Client_LookupDevice_Args_STRUCT_SIZE = PJRT_Client_LookupDevice_Args, device: *mut PJRT_Device);

/// Signature of the `PJRT_Client_LookupDevice` entry; takes [`PJRT_Client_LookupDevice_Args`].
pub type PJRT_Client_LookupDevice =
    unsafe extern "C" fn(args: *mut PJRT_Client_LookupDevice_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_LookupAddressableDevice`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_LookupAddressableDevice_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Local hardware id.
    pub local_hardware_id: c_int,
    /// Out: addressable device.
    pub addressable_device: *mut PJRT_Device,
}

struct_size!(PJRT_Client_LookupAddressableDevice_Args_STRUCT_SIZE = PJRT_Client_LookupAddressableDevice_Args, addressable_device: *mut PJRT_Device);

/// Signature of the `PJRT_Client_LookupAddressableDevice` entry; takes [`PJRT_Client_LookupAddressableDevice_Args`].
pub type PJRT_Client_LookupAddressableDevice =
    unsafe extern "C" fn(args: *mut PJRT_Client_LookupAddressableDevice_Args) -> *mut PJRT_Error;

/// State of a process in a multi-process job.
pub type PJRT_ProcessState = i32;
/// Value `kUnspecified` of `PJRT_ProcessState`.
pub const PJRT_ProcessState_kUnspecified: PJRT_ProcessState = 0;
/// Value `kUninitialized` of `PJRT_ProcessState`.
pub const PJRT_ProcessState_kUninitialized: PJRT_ProcessState = 1;
/// Value `kDisconnected` of `PJRT_ProcessState`.
pub const PJRT_ProcessState_kDisconnected: PJRT_ProcessState = 2;
/// Value `kConnected` of `PJRT_ProcessState`.
pub const PJRT_ProcessState_kConnected: PJRT_ProcessState = 3;
/// Value `kError` of `PJRT_ProcessState`.
pub const PJRT_ProcessState_kError: PJRT_ProcessState = 4;

/// Description of one process, passed to `PJRT_Client_UpdateGlobalProcessInfo`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_ProcessInfo {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Task id.
    pub task_id: c_int,
    /// Incarnation id.
    pub incarnation_id: u64,
    /// State.
    pub state: PJRT_ProcessState,
    /// Error code.
    pub error_code: c_int,
    /// Error message.
    pub error_message: *const c_char,
    /// Length of `error_message` in bytes or elements.
    pub error_message_size: usize,
}

struct_size!(PJRT_ProcessInfo_STRUCT_SIZE = PJRT_ProcessInfo, error_message_size: usize);

/// Arguments of [`PJRT_Client_UpdateGlobalProcessInfo`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_UpdateGlobalProcessInfo_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Process infos.
    pub process_infos: *mut PJRT_ProcessInfo,
    /// Number of entries in `process_infos`.
    pub num_process_infos: usize,
}

struct_size!(PJRT_Client_UpdateGlobalProcessInfo_Args_STRUCT_SIZE = PJRT_Client_UpdateGlobalProcessInfo_Args, num_process_infos: usize);

/// Signature of the `PJRT_Client_UpdateGlobalProcessInfo` entry; takes [`PJRT_Client_UpdateGlobalProcessInfo_Args`].
pub type PJRT_Client_UpdateGlobalProcessInfo =
    unsafe extern "C" fn(args: *mut PJRT_Client_UpdateGlobalProcessInfo_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_AddressableMemories`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_AddressableMemories_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Out: addressable memories.
    pub addressable_memories: *const *mut PJRT_Memory,
    /// Out: number of entries in `addressable_memories`.
    pub num_addressable_memories: usize,
}

struct_size!(PJRT_Client_AddressableMemories_Args_STRUCT_SIZE = PJRT_Client_AddressableMemories_Args, num_addressable_memories: usize);

/// Signature of the `PJRT_Client_AddressableMemories` entry; takes [`PJRT_Client_AddressableMemories_Args`].
pub type PJRT_Client_AddressableMemories =
    unsafe extern "C" fn(args: *mut PJRT_Client_AddressableMemories_Args) -> *mut PJRT_Error;

/// A program to compile: code bytes plus a format name such as `"mlir"` or `"hlo"`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Program {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Program bytes (input for compile; filled in by `OptimizedProgram`).
    pub code: *mut c_char,
    /// Length of `code` in bytes.
    pub code_size: usize,
    /// Format name bytes, e.g. `mlir` or `hlo` (not NUL-terminated).
    pub format: *const c_char,
    /// Length of `format` in bytes.
    pub format_size: usize,
}

struct_size!(PJRT_Program_STRUCT_SIZE = PJRT_Program, format_size: usize);

/// Arguments of [`PJRT_Client_Compile`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_Compile_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Program.
    pub program: *const PJRT_Program,
    /// Compile options.
    pub compile_options: *const c_char,
    /// Length of `compile_options` in bytes or elements.
    pub compile_options_size: usize,
    /// Out: executable.
    pub executable: *mut PJRT_LoadedExecutable,
}

struct_size!(PJRT_Client_Compile_Args_STRUCT_SIZE = PJRT_Client_Compile_Args, executable: *mut PJRT_LoadedExecutable);

/// Signature of the `PJRT_Client_Compile` entry; takes [`PJRT_Client_Compile_Args`].
pub type PJRT_Client_Compile =
    unsafe extern "C" fn(args: *mut PJRT_Client_Compile_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_Load`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_Load_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Executable.
    pub executable: *mut PJRT_Executable,
    /// Compile options.
    pub compile_options: *const c_char,
    /// Length of `compile_options` in bytes or elements.
    pub compile_options_size: usize,
    /// Out: loaded executable.
    pub loaded_executable: *mut PJRT_LoadedExecutable,
}

struct_size!(PJRT_Client_Load_Args_STRUCT_SIZE = PJRT_Client_Load_Args, loaded_executable: *mut PJRT_LoadedExecutable);

/// Signature of the `PJRT_Client_Load` entry; takes [`PJRT_Client_Load_Args`].
pub type PJRT_Client_Load =
    unsafe extern "C" fn(args: *mut PJRT_Client_Load_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_DefaultDeviceAssignment`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_DefaultDeviceAssignment_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Number of replicas.
    pub num_replicas: c_int,
    /// Number of partitions.
    pub num_partitions: c_int,
    /// Default assignment size.
    pub default_assignment_size: usize,
    /// Default assignment.
    pub default_assignment: *mut c_int,
}

struct_size!(PJRT_Client_DefaultDeviceAssignment_Args_STRUCT_SIZE = PJRT_Client_DefaultDeviceAssignment_Args, default_assignment: *mut c_int);

/// Signature of the `PJRT_Client_DefaultDeviceAssignment` entry; takes [`PJRT_Client_DefaultDeviceAssignment_Args`].
pub type PJRT_Client_DefaultDeviceAssignment =
    unsafe extern "C" fn(args: *mut PJRT_Client_DefaultDeviceAssignment_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_DmaMap`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_DmaMap_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Data.
    pub data: *mut c_void,
    /// Size.
    pub size: usize,
}

struct_size!(PJRT_Client_DmaMap_Args_STRUCT_SIZE = PJRT_Client_DmaMap_Args, size: usize);

/// Signature of the `PJRT_Client_DmaMap` entry; takes [`PJRT_Client_DmaMap_Args`].
pub type PJRT_Client_DmaMap =
    unsafe extern "C" fn(args: *mut PJRT_Client_DmaMap_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_DmaUnmap`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_DmaUnmap_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Data.
    pub data: *mut c_void,
}

struct_size!(PJRT_Client_DmaUnmap_Args_STRUCT_SIZE = PJRT_Client_DmaUnmap_Args, data: *mut c_void);

/// Signature of the `PJRT_Client_DmaUnmap` entry; takes [`PJRT_Client_DmaUnmap_Args`].
pub type PJRT_Client_DmaUnmap =
    unsafe extern "C" fn(args: *mut PJRT_Client_DmaUnmap_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_AsyncHostToDeviceTransferManager_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_AsyncHostToDeviceTransferManager_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Transfer manager.
    pub transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
}

struct_size!(PJRT_AsyncHostToDeviceTransferManager_Destroy_Args_STRUCT_SIZE = PJRT_AsyncHostToDeviceTransferManager_Destroy_Args, transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager);

/// Signature of the `PJRT_AsyncHostToDeviceTransferManager_Destroy` entry; takes [`PJRT_AsyncHostToDeviceTransferManager_Destroy_Args`].
pub type PJRT_AsyncHostToDeviceTransferManager_Destroy = unsafe extern "C" fn(
    args: *mut PJRT_AsyncHostToDeviceTransferManager_Destroy_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_AsyncHostToDeviceTransferManager_TransferData`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_AsyncHostToDeviceTransferManager_TransferData_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Transfer manager.
    pub transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
    /// Buffer index.
    pub buffer_index: c_int,
    /// Data.
    pub data: *const c_void,
    /// Offset.
    pub offset: i64,
    /// Transfer size.
    pub transfer_size: i64,
    /// Is last transfer.
    pub is_last_transfer: bool,
    /// Out: done with h2d transfer.
    pub done_with_h2d_transfer: *mut PJRT_Event,
}

struct_size!(PJRT_AsyncHostToDeviceTransferManager_TransferData_Args_STRUCT_SIZE = PJRT_AsyncHostToDeviceTransferManager_TransferData_Args, done_with_h2d_transfer: *mut PJRT_Event);

/// Signature of the `PJRT_AsyncHostToDeviceTransferManager_TransferData` entry; takes [`PJRT_AsyncHostToDeviceTransferManager_TransferData_Args`].
pub type PJRT_AsyncHostToDeviceTransferManager_TransferData =
    unsafe extern "C" fn(
        args: *mut PJRT_AsyncHostToDeviceTransferManager_TransferData_Args,
    ) -> *mut PJRT_Error;

/// Arguments of [`PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Transfer manager.
    pub transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
    /// Buffer index.
    pub buffer_index: c_int,
    /// Out: buffer out.
    pub buffer_out: *mut PJRT_Buffer,
}

struct_size!(PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args_STRUCT_SIZE = PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args, buffer_out: *mut PJRT_Buffer);

/// Signature of the `PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer` entry; takes [`PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args`].
pub type PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer =
    unsafe extern "C" fn(
        args: *mut PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args,
    ) -> *mut PJRT_Error;

/// Arguments of [`PJRT_AsyncHostToDeviceTransferManager_Device`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_AsyncHostToDeviceTransferManager_Device_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Transfer manager.
    pub transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
    /// Out: device out.
    pub device_out: *mut PJRT_Device,
}

struct_size!(PJRT_AsyncHostToDeviceTransferManager_Device_Args_STRUCT_SIZE = PJRT_AsyncHostToDeviceTransferManager_Device_Args, device_out: *mut PJRT_Device);

/// Signature of the `PJRT_AsyncHostToDeviceTransferManager_Device` entry; takes [`PJRT_AsyncHostToDeviceTransferManager_Device_Args`].
pub type PJRT_AsyncHostToDeviceTransferManager_Device = unsafe extern "C" fn(
    args: *mut PJRT_AsyncHostToDeviceTransferManager_Device_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_AsyncHostToDeviceTransferManager_BufferCount`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Transfer manager.
    pub transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
    /// Out: buffer count.
    pub buffer_count: usize,
}

struct_size!(PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args_STRUCT_SIZE = PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args, buffer_count: usize);

/// Signature of the `PJRT_AsyncHostToDeviceTransferManager_BufferCount` entry; takes [`PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args`].
pub type PJRT_AsyncHostToDeviceTransferManager_BufferCount =
    unsafe extern "C" fn(
        args: *mut PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args,
    ) -> *mut PJRT_Error;

/// Arguments of [`PJRT_AsyncHostToDeviceTransferManager_BufferSize`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Transfer manager.
    pub transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
    /// Buffer index.
    pub buffer_index: c_int,
    /// Out: buffer size.
    pub buffer_size: usize,
}

struct_size!(PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args_STRUCT_SIZE = PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args, buffer_size: usize);

/// Signature of the `PJRT_AsyncHostToDeviceTransferManager_BufferSize` entry; takes [`PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args`].
pub type PJRT_AsyncHostToDeviceTransferManager_BufferSize = unsafe extern "C" fn(
    args: *mut PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args,
)
    -> *mut PJRT_Error;

/// Arguments of [`PJRT_AsyncHostToDeviceTransferManager_SetBufferError`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Transfer manager.
    pub transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
    /// Buffer index.
    pub buffer_index: c_int,
    /// Error code.
    pub error_code: PJRT_Error_Code,
    /// Error message.
    pub error_message: *const c_char,
    /// Length of `error_message` in bytes or elements.
    pub error_message_size: usize,
}

struct_size!(PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args_STRUCT_SIZE = PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args, error_message_size: usize);

/// Signature of the `PJRT_AsyncHostToDeviceTransferManager_SetBufferError` entry; takes [`PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args`].
pub type PJRT_AsyncHostToDeviceTransferManager_SetBufferError =
    unsafe extern "C" fn(
        args: *mut PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args,
    ) -> *mut PJRT_Error;

/// Arguments of [`PJRT_AsyncHostToDeviceTransferManager_AddMetadata`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Transfer manager.
    pub transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
    /// Transfer metadata.
    pub transfer_metadata: *const PJRT_NamedValue,
    /// Number of metadata.
    pub num_metadata: usize,
}

struct_size!(PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args_STRUCT_SIZE = PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args, num_metadata: usize);

/// Signature of the `PJRT_AsyncHostToDeviceTransferManager_AddMetadata` entry; takes [`PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args`].
pub type PJRT_AsyncHostToDeviceTransferManager_AddMetadata =
    unsafe extern "C" fn(
        args: *mut PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args,
    ) -> *mut PJRT_Error;

/// Element type of a buffer (PJRT numbering; differs from XLA FFI's).
pub type PJRT_Buffer_Type = i32;
/// Value `INVALID` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_INVALID: PJRT_Buffer_Type = 0;
/// Value `PRED` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_PRED: PJRT_Buffer_Type = 1;
/// Value `S8` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_S8: PJRT_Buffer_Type = 2;
/// Value `S16` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_S16: PJRT_Buffer_Type = 3;
/// Value `S32` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_S32: PJRT_Buffer_Type = 4;
/// Value `S64` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_S64: PJRT_Buffer_Type = 5;
/// Value `U8` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_U8: PJRT_Buffer_Type = 6;
/// Value `U16` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_U16: PJRT_Buffer_Type = 7;
/// Value `U32` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_U32: PJRT_Buffer_Type = 8;
/// Value `U64` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_U64: PJRT_Buffer_Type = 9;
/// Value `F16` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_F16: PJRT_Buffer_Type = 10;
/// Value `F32` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_F32: PJRT_Buffer_Type = 11;
/// Value `F64` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_F64: PJRT_Buffer_Type = 12;
/// Value `BF16` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_BF16: PJRT_Buffer_Type = 13;
/// Value `C64` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_C64: PJRT_Buffer_Type = 14;
/// Value `C128` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_C128: PJRT_Buffer_Type = 15;
/// Value `F8E5M2` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_F8E5M2: PJRT_Buffer_Type = 16;
/// Value `F8E4M3FN` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_F8E4M3FN: PJRT_Buffer_Type = 17;
/// Value `F8E4M3B11FNUZ` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_F8E4M3B11FNUZ: PJRT_Buffer_Type = 18;
/// Value `F8E5M2FNUZ` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_F8E5M2FNUZ: PJRT_Buffer_Type = 19;
/// Value `F8E4M3FNUZ` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_F8E4M3FNUZ: PJRT_Buffer_Type = 20;
/// Value `S4` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_S4: PJRT_Buffer_Type = 21;
/// Value `U4` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_U4: PJRT_Buffer_Type = 22;
/// Value `TOKEN` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_TOKEN: PJRT_Buffer_Type = 23;
/// Value `S2` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_S2: PJRT_Buffer_Type = 24;
/// Value `U2` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_U2: PJRT_Buffer_Type = 25;
/// Value `F8E4M3` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_F8E4M3: PJRT_Buffer_Type = 26;
/// Value `F8E3M4` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_F8E3M4: PJRT_Buffer_Type = 27;
/// Value `F8E8M0FNU` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_F8E8M0FNU: PJRT_Buffer_Type = 28;
/// Value `F4E2M1FN` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_F4E2M1FN: PJRT_Buffer_Type = 29;
/// Value `S1` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_S1: PJRT_Buffer_Type = 30;
/// Value `U1` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_U1: PJRT_Buffer_Type = 31;
/// Value `F6E2M3FN` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_F6E2M3FN: PJRT_Buffer_Type = 32;
/// Value `F6E3M2FN` of `PJRT_Buffer_Type`.
pub const PJRT_Buffer_Type_F6E3M2FN: PJRT_Buffer_Type = 33;

/// How long the host memory passed to `BufferFromHostBuffer` must stay valid and unchanged.
pub type PJRT_HostBufferSemantics = i32;
/// Value `kImmutableOnlyDuringCall` of `PJRT_HostBufferSemantics`.
pub const PJRT_HostBufferSemantics_kImmutableOnlyDuringCall: PJRT_HostBufferSemantics = 0;
/// Value `kImmutableUntilTransferCompletes` of `PJRT_HostBufferSemantics`.
pub const PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes: PJRT_HostBufferSemantics = 1;
/// Value `kImmutableZeroCopy` of `PJRT_HostBufferSemantics`.
pub const PJRT_HostBufferSemantics_kImmutableZeroCopy: PJRT_HostBufferSemantics = 2;
/// Value `kMutableZeroCopy` of `PJRT_HostBufferSemantics`.
pub const PJRT_HostBufferSemantics_kMutableZeroCopy: PJRT_HostBufferSemantics = 3;

/// Which member of the [`PJRT_Buffer_MemoryLayout`] union is set.
pub type PJRT_Buffer_MemoryLayout_Type = i32;
/// Value `Tiled` of `PJRT_Buffer_MemoryLayout_Type`.
pub const PJRT_Buffer_MemoryLayout_Type_Tiled: PJRT_Buffer_MemoryLayout_Type = 0;
/// Value `Strides` of `PJRT_Buffer_MemoryLayout_Type`.
pub const PJRT_Buffer_MemoryLayout_Type_Strides: PJRT_Buffer_MemoryLayout_Type = 1;

/// Tiled layout: minor-to-major order plus optional tiles.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_MemoryLayout_Tiled {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Minor to major.
    pub minor_to_major: *const i64,
    /// Length of `minor_to_major` in bytes or elements.
    pub minor_to_major_size: usize,
    /// Tile dims.
    pub tile_dims: *const i64,
    /// Tile dim sizes.
    pub tile_dim_sizes: *const usize,
    /// Number of tiles.
    pub num_tiles: usize,
}

struct_size!(PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE = PJRT_Buffer_MemoryLayout_Tiled, num_tiles: usize);

/// Strided layout: one byte stride per dimension.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_MemoryLayout_Strides {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Byte strides.
    pub byte_strides: *const i64,
    /// Number of entries in `byte_strides`.
    pub num_byte_strides: usize,
}

struct_size!(PJRT_Buffer_MemoryLayout_Strides_STRUCT_SIZE = PJRT_Buffer_MemoryLayout_Strides, num_byte_strides: usize);

/// Storage of a [`PJRT_Buffer_MemoryLayout`] (anonymous union in C).
#[repr(C)]
#[derive(Clone, Copy)]
pub union PJRT_Buffer_MemoryLayout_Union {
    /// Tiled layout.
    pub tiled: PJRT_Buffer_MemoryLayout_Tiled,
    /// Strided layout.
    pub strides: PJRT_Buffer_MemoryLayout_Strides,
}

/// A buffer layout, either tiled or strided.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_MemoryLayout {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// The layout itself; the member to read is given by `type` (C: anonymous union).
    pub layout: PJRT_Buffer_MemoryLayout_Union,
    /// Which union member is set.
    pub r#type: PJRT_Buffer_MemoryLayout_Type,
}

struct_size!(PJRT_Buffer_MemoryLayout_STRUCT_SIZE = PJRT_Buffer_MemoryLayout, r#type: PJRT_Buffer_MemoryLayout_Type);

/// Arguments of [`PJRT_AsyncHostToDeviceTransferManager_TransferLiteral`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Transfer manager.
    pub transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
    /// Buffer index.
    pub buffer_index: c_int,
    /// Data.
    pub data: *const c_void,
    /// Shape dims.
    pub shape_dims: *const i64,
    /// Shape num dims.
    pub shape_num_dims: usize,
    /// Shape element type.
    pub shape_element_type: PJRT_Buffer_Type,
    /// Shape layout.
    pub shape_layout: *mut PJRT_Buffer_MemoryLayout,
    /// Out: done with h2d transfer.
    pub done_with_h2d_transfer: *mut PJRT_Event,
}

struct_size!(PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args_STRUCT_SIZE = PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args, done_with_h2d_transfer: *mut PJRT_Event);

/// Signature of the `PJRT_AsyncHostToDeviceTransferManager_TransferLiteral` entry; takes [`PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args`].
pub type PJRT_AsyncHostToDeviceTransferManager_TransferLiteral =
    unsafe extern "C" fn(
        args: *mut PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args,
    ) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_CreateUninitializedBuffer`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_CreateUninitializedBuffer_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Shape dims.
    pub shape_dims: *const i64,
    /// Shape num dims.
    pub shape_num_dims: usize,
    /// Shape element type.
    pub shape_element_type: PJRT_Buffer_Type,
    /// Shape layout.
    pub shape_layout: *mut PJRT_Buffer_MemoryLayout,
    /// Device.
    pub device: *mut PJRT_Device,
    /// Memory.
    pub memory: *mut PJRT_Memory,
    /// Out: buffer.
    pub buffer: *mut PJRT_Buffer,
}

struct_size!(PJRT_Client_CreateUninitializedBuffer_Args_STRUCT_SIZE = PJRT_Client_CreateUninitializedBuffer_Args, buffer: *mut PJRT_Buffer);

/// Signature of the `PJRT_Client_CreateUninitializedBuffer` entry; takes [`PJRT_Client_CreateUninitializedBuffer_Args`].
pub type PJRT_Client_CreateUninitializedBuffer =
    unsafe extern "C" fn(args: *mut PJRT_Client_CreateUninitializedBuffer_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_CreateErrorBuffer`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_CreateErrorBuffer_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Error code.
    pub error_code: PJRT_Error_Code,
    /// Error message.
    pub error_message: *const c_char,
    /// Length of `error_message` in bytes or elements.
    pub error_message_size: usize,
    /// Shape dims.
    pub shape_dims: *const i64,
    /// Shape num dims.
    pub shape_num_dims: usize,
    /// Shape element type.
    pub shape_element_type: PJRT_Buffer_Type,
    /// Shape layout.
    pub shape_layout: *mut PJRT_Buffer_MemoryLayout,
    /// Memory.
    pub memory: *mut PJRT_Memory,
    /// Out: buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Payload.
    pub payload: *const PJRT_NamedValue,
    /// Number of entries in `payload`.
    pub num_payload: usize,
}

struct_size!(PJRT_Client_CreateErrorBuffer_Args_STRUCT_SIZE = PJRT_Client_CreateErrorBuffer_Args, num_payload: usize);

/// Signature of the `PJRT_Client_CreateErrorBuffer` entry; takes [`PJRT_Client_CreateErrorBuffer_Args`].
pub type PJRT_Client_CreateErrorBuffer =
    unsafe extern "C" fn(args: *mut PJRT_Client_CreateErrorBuffer_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_CreateAliasBuffer`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_CreateAliasBuffer_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Memory.
    pub memory: *mut PJRT_Memory,
    /// Shape dims.
    pub shape_dims: *const i64,
    /// Shape num dims.
    pub shape_num_dims: usize,
    /// Shape element type.
    pub shape_element_type: PJRT_Buffer_Type,
    /// Shape layout.
    pub shape_layout: *mut PJRT_Buffer_MemoryLayout,
    /// Out: alias buffer.
    pub alias_buffer: *mut PJRT_Buffer,
    /// Out: fulfill alias buffer cb.
    pub fulfill_alias_buffer_cb: *mut PJRT_FulfillAliasBufferCallback,
}

struct_size!(PJRT_Client_CreateAliasBuffer_Args_STRUCT_SIZE = PJRT_Client_CreateAliasBuffer_Args, fulfill_alias_buffer_cb: *mut PJRT_FulfillAliasBufferCallback);

/// Signature of the `PJRT_Client_CreateAliasBuffer` entry; takes [`PJRT_Client_CreateAliasBuffer_Args`].
pub type PJRT_Client_CreateAliasBuffer =
    unsafe extern "C" fn(args: *mut PJRT_Client_CreateAliasBuffer_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_FulfillAliasBuffer`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_FulfillAliasBuffer_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Status code.
    pub status_code: PJRT_Error_Code,
    /// Error message.
    pub error_message: *const c_char,
    /// Length of `error_message` in bytes or elements.
    pub error_message_size: usize,
    /// Fulfill alias buffer cb.
    pub fulfill_alias_buffer_cb: *mut PJRT_FulfillAliasBufferCallback,
}

struct_size!(PJRT_Client_FulfillAliasBuffer_Args_STRUCT_SIZE = PJRT_Client_FulfillAliasBuffer_Args, fulfill_alias_buffer_cb: *mut PJRT_FulfillAliasBufferCallback);

/// Signature of the `PJRT_Client_FulfillAliasBuffer` entry; takes [`PJRT_Client_FulfillAliasBuffer_Args`].
pub type PJRT_Client_FulfillAliasBuffer =
    unsafe extern "C" fn(args: *mut PJRT_Client_FulfillAliasBuffer_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_BufferFromHostBuffer`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_BufferFromHostBuffer_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Data.
    pub data: *const c_void,
    /// Type.
    pub r#type: PJRT_Buffer_Type,
    /// Dims.
    pub dims: *const i64,
    /// Number of entries in `dims`.
    pub num_dims: usize,
    /// Byte strides.
    pub byte_strides: *const i64,
    /// Number of entries in `byte_strides`.
    pub num_byte_strides: usize,
    /// Host buffer semantics.
    pub host_buffer_semantics: PJRT_HostBufferSemantics,
    /// Device.
    pub device: *mut PJRT_Device,
    /// Memory.
    pub memory: *mut PJRT_Memory,
    /// Device layout.
    pub device_layout: *mut PJRT_Buffer_MemoryLayout,
    /// Out: done with host buffer.
    pub done_with_host_buffer: *mut PJRT_Event,
    /// Out: buffer.
    pub buffer: *mut PJRT_Buffer,
}

struct_size!(PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE = PJRT_Client_BufferFromHostBuffer_Args, buffer: *mut PJRT_Buffer);

/// Signature of the `PJRT_Client_BufferFromHostBuffer` entry; takes [`PJRT_Client_BufferFromHostBuffer_Args`].
pub type PJRT_Client_BufferFromHostBuffer =
    unsafe extern "C" fn(args: *mut PJRT_Client_BufferFromHostBuffer_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Client_CreateViewOfDeviceBuffer`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_CreateViewOfDeviceBuffer_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Device buffer ptr.
    pub device_buffer_ptr: *mut c_void,
    /// Dims.
    pub dims: *const i64,
    /// Number of entries in `dims`.
    pub num_dims: usize,
    /// Element type.
    pub element_type: PJRT_Buffer_Type,
    /// Layout.
    pub layout: *mut PJRT_Buffer_MemoryLayout,
    /// Device.
    pub device: *mut PJRT_Device,
    /// On delete callback callback (may be null).
    pub on_delete_callback:
        Option<unsafe extern "C" fn(device_buffer_ptr: *mut c_void, user_arg: *mut c_void)>,
    /// On delete callback arg.
    pub on_delete_callback_arg: *mut c_void,
    /// Stream.
    pub stream: isize,
    /// Out: buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Memory.
    pub memory: *mut PJRT_Memory,
}

struct_size!(PJRT_Client_CreateViewOfDeviceBuffer_Args_STRUCT_SIZE = PJRT_Client_CreateViewOfDeviceBuffer_Args, memory: *mut PJRT_Memory);

/// Signature of the `PJRT_Client_CreateViewOfDeviceBuffer` entry; takes [`PJRT_Client_CreateViewOfDeviceBuffer_Args`].
pub type PJRT_Client_CreateViewOfDeviceBuffer =
    unsafe extern "C" fn(args: *mut PJRT_Client_CreateViewOfDeviceBuffer_Args) -> *mut PJRT_Error;

/// Dimensions and element type of one buffer to create.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_ShapeSpec {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Dims.
    pub dims: *const i64,
    /// Number of entries in `dims`.
    pub num_dims: usize,
    /// Element type.
    pub element_type: PJRT_Buffer_Type,
}

struct_size!(PJRT_ShapeSpec_STRUCT_SIZE = PJRT_ShapeSpec, element_type: PJRT_Buffer_Type);

/// Arguments of [`PJRT_Client_CreateBuffersForAsyncHostToDevice`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Client_CreateBuffersForAsyncHostToDevice_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Shape specs.
    pub shape_specs: *mut PJRT_ShapeSpec,
    /// Number of entries in `shape_specs`.
    pub num_shape_specs: usize,
    /// Device layouts.
    pub device_layouts: *mut *mut PJRT_Buffer_MemoryLayout,
    /// Number of entries in `device_layouts`.
    pub num_device_layouts: usize,
    /// Memory.
    pub memory: *mut PJRT_Memory,
    /// Out: transfer manager.
    pub transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
}

struct_size!(PJRT_Client_CreateBuffersForAsyncHostToDevice_Args_STRUCT_SIZE = PJRT_Client_CreateBuffersForAsyncHostToDevice_Args, transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager);

/// Signature of the `PJRT_Client_CreateBuffersForAsyncHostToDevice` entry; takes [`PJRT_Client_CreateBuffersForAsyncHostToDevice_Args`].
pub type PJRT_Client_CreateBuffersForAsyncHostToDevice = unsafe extern "C" fn(
    args: *mut PJRT_Client_CreateBuffersForAsyncHostToDevice_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_DeviceDescription_Id`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_DeviceDescription_Id_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Device description.
    pub device_description: *mut PJRT_DeviceDescription,
    /// Out: id.
    pub id: c_int,
}

struct_size!(PJRT_DeviceDescription_Id_Args_STRUCT_SIZE = PJRT_DeviceDescription_Id_Args, id: c_int);

/// Signature of the `PJRT_DeviceDescription_Id` entry; takes [`PJRT_DeviceDescription_Id_Args`].
pub type PJRT_DeviceDescription_Id =
    unsafe extern "C" fn(args: *mut PJRT_DeviceDescription_Id_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_DeviceDescription_ProcessIndex`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_DeviceDescription_ProcessIndex_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Device description.
    pub device_description: *mut PJRT_DeviceDescription,
    /// Out: process index.
    pub process_index: c_int,
}

struct_size!(PJRT_DeviceDescription_ProcessIndex_Args_STRUCT_SIZE = PJRT_DeviceDescription_ProcessIndex_Args, process_index: c_int);

/// Signature of the `PJRT_DeviceDescription_ProcessIndex` entry; takes [`PJRT_DeviceDescription_ProcessIndex_Args`].
pub type PJRT_DeviceDescription_ProcessIndex =
    unsafe extern "C" fn(args: *mut PJRT_DeviceDescription_ProcessIndex_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_DeviceDescription_Attributes`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_DeviceDescription_Attributes_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Device description.
    pub device_description: *mut PJRT_DeviceDescription,
    /// Out: number of attributes.
    pub num_attributes: usize,
    /// Out: attributes.
    pub attributes: *const PJRT_NamedValue,
}

struct_size!(PJRT_DeviceDescription_Attributes_Args_STRUCT_SIZE = PJRT_DeviceDescription_Attributes_Args, attributes: *const PJRT_NamedValue);

/// Signature of the `PJRT_DeviceDescription_Attributes` entry; takes [`PJRT_DeviceDescription_Attributes_Args`].
pub type PJRT_DeviceDescription_Attributes =
    unsafe extern "C" fn(args: *mut PJRT_DeviceDescription_Attributes_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_DeviceDescription_Kind`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_DeviceDescription_Kind_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Device description.
    pub device_description: *mut PJRT_DeviceDescription,
    /// Out: device kind.
    pub device_kind: *const c_char,
    /// Out: length of `device_kind` in bytes or elements.
    pub device_kind_size: usize,
}

struct_size!(PJRT_DeviceDescription_Kind_Args_STRUCT_SIZE = PJRT_DeviceDescription_Kind_Args, device_kind_size: usize);

/// Signature of the `PJRT_DeviceDescription_Kind` entry; takes [`PJRT_DeviceDescription_Kind_Args`].
pub type PJRT_DeviceDescription_Kind =
    unsafe extern "C" fn(args: *mut PJRT_DeviceDescription_Kind_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_DeviceDescription_DebugString`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_DeviceDescription_DebugString_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Device description.
    pub device_description: *mut PJRT_DeviceDescription,
    /// Out: debug string.
    pub debug_string: *const c_char,
    /// Out: length of `debug_string` in bytes or elements.
    pub debug_string_size: usize,
}

struct_size!(PJRT_DeviceDescription_DebugString_Args_STRUCT_SIZE = PJRT_DeviceDescription_DebugString_Args, debug_string_size: usize);

/// Signature of the `PJRT_DeviceDescription_DebugString` entry; takes [`PJRT_DeviceDescription_DebugString_Args`].
pub type PJRT_DeviceDescription_DebugString =
    unsafe extern "C" fn(args: *mut PJRT_DeviceDescription_DebugString_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_DeviceDescription_ToString`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_DeviceDescription_ToString_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Device description.
    pub device_description: *mut PJRT_DeviceDescription,
    /// Out: to string.
    pub to_string: *const c_char,
    /// Out: length of `to_string` in bytes or elements.
    pub to_string_size: usize,
}

struct_size!(PJRT_DeviceDescription_ToString_Args_STRUCT_SIZE = PJRT_DeviceDescription_ToString_Args, to_string_size: usize);

/// Signature of the `PJRT_DeviceDescription_ToString` entry; takes [`PJRT_DeviceDescription_ToString_Args`].
pub type PJRT_DeviceDescription_ToString =
    unsafe extern "C" fn(args: *mut PJRT_DeviceDescription_ToString_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Device_GetDescription`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Device_GetDescription_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Device.
    pub device: *mut PJRT_Device,
    /// Out: device description.
    pub device_description: *mut PJRT_DeviceDescription,
}

struct_size!(PJRT_Device_GetDescription_Args_STRUCT_SIZE = PJRT_Device_GetDescription_Args, device_description: *mut PJRT_DeviceDescription);

/// Signature of the `PJRT_Device_GetDescription` entry; takes [`PJRT_Device_GetDescription_Args`].
pub type PJRT_Device_GetDescription =
    unsafe extern "C" fn(args: *mut PJRT_Device_GetDescription_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Device_IsAddressable`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Device_IsAddressable_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Device.
    pub device: *mut PJRT_Device,
    /// Out: is addressable.
    pub is_addressable: bool,
}

struct_size!(PJRT_Device_IsAddressable_Args_STRUCT_SIZE = PJRT_Device_IsAddressable_Args, is_addressable: bool);

/// Signature of the `PJRT_Device_IsAddressable` entry; takes [`PJRT_Device_IsAddressable_Args`].
pub type PJRT_Device_IsAddressable =
    unsafe extern "C" fn(args: *mut PJRT_Device_IsAddressable_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Device_LocalHardwareId`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Device_LocalHardwareId_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Device.
    pub device: *mut PJRT_Device,
    /// Out: local hardware id.
    pub local_hardware_id: c_int,
}

struct_size!(PJRT_Device_LocalHardwareId_Args_STRUCT_SIZE = PJRT_Device_LocalHardwareId_Args, local_hardware_id: c_int);

/// Signature of the `PJRT_Device_LocalHardwareId` entry; takes [`PJRT_Device_LocalHardwareId_Args`].
pub type PJRT_Device_LocalHardwareId =
    unsafe extern "C" fn(args: *mut PJRT_Device_LocalHardwareId_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Device_AddressableMemories`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Device_AddressableMemories_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Device.
    pub device: *mut PJRT_Device,
    /// Out: memories.
    pub memories: *const *mut PJRT_Memory,
    /// Out: number of entries in `memories`.
    pub num_memories: usize,
}

struct_size!(PJRT_Device_AddressableMemories_Args_STRUCT_SIZE = PJRT_Device_AddressableMemories_Args, num_memories: usize);

/// Signature of the `PJRT_Device_AddressableMemories` entry; takes [`PJRT_Device_AddressableMemories_Args`].
pub type PJRT_Device_AddressableMemories =
    unsafe extern "C" fn(args: *mut PJRT_Device_AddressableMemories_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Device_DefaultMemory`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Device_DefaultMemory_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Device.
    pub device: *mut PJRT_Device,
    /// Out: memory.
    pub memory: *mut PJRT_Memory,
}

struct_size!(PJRT_Device_DefaultMemory_Args_STRUCT_SIZE = PJRT_Device_DefaultMemory_Args, memory: *mut PJRT_Memory);

/// Signature of the `PJRT_Device_DefaultMemory` entry; takes [`PJRT_Device_DefaultMemory_Args`].
pub type PJRT_Device_DefaultMemory =
    unsafe extern "C" fn(args: *mut PJRT_Device_DefaultMemory_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Device_MemoryStats`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Device_MemoryStats_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Device.
    pub device: *mut PJRT_Device,
    /// Out: bytes in use.
    pub bytes_in_use: i64,
    /// Out: peak bytes in use.
    pub peak_bytes_in_use: i64,
    /// Out: peak bytes in use is set.
    pub peak_bytes_in_use_is_set: bool,
    /// Out: number of allocs.
    pub num_allocs: i64,
    /// Out: number of allocs is set.
    pub num_allocs_is_set: bool,
    /// Out: largest alloc size.
    pub largest_alloc_size: i64,
    /// Out: largest alloc size is set.
    pub largest_alloc_size_is_set: bool,
    /// Out: bytes limit.
    pub bytes_limit: i64,
    /// Out: bytes limit is set.
    pub bytes_limit_is_set: bool,
    /// Out: bytes reserved.
    pub bytes_reserved: i64,
    /// Out: bytes reserved is set.
    pub bytes_reserved_is_set: bool,
    /// Out: peak bytes reserved.
    pub peak_bytes_reserved: i64,
    /// Out: peak bytes reserved is set.
    pub peak_bytes_reserved_is_set: bool,
    /// Out: bytes reservable limit.
    pub bytes_reservable_limit: i64,
    /// Out: bytes reservable limit is set.
    pub bytes_reservable_limit_is_set: bool,
    /// Out: largest free block bytes.
    pub largest_free_block_bytes: i64,
    /// Out: largest free block bytes is set.
    pub largest_free_block_bytes_is_set: bool,
    /// Out: pool bytes.
    pub pool_bytes: i64,
    /// Out: pool bytes is set.
    pub pool_bytes_is_set: bool,
    /// Out: peak pool bytes.
    pub peak_pool_bytes: i64,
    /// Out: peak pool bytes is set.
    pub peak_pool_bytes_is_set: bool,
    /// Out: peak allocated bytes.
    pub peak_allocated_bytes: i64,
    /// Out: peak allocated bytes is set.
    pub peak_allocated_bytes_is_set: bool,
}

struct_size!(PJRT_Device_MemoryStats_Args_STRUCT_SIZE = PJRT_Device_MemoryStats_Args, peak_allocated_bytes_is_set: bool);

/// Signature of the `PJRT_Device_MemoryStats` entry; takes [`PJRT_Device_MemoryStats_Args`].
pub type PJRT_Device_MemoryStats =
    unsafe extern "C" fn(args: *mut PJRT_Device_MemoryStats_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Device_ClearMemoryStats`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Device_ClearMemoryStats_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Device.
    pub device: *mut PJRT_Device,
}

struct_size!(PJRT_Device_ClearMemoryStats_Args_STRUCT_SIZE = PJRT_Device_ClearMemoryStats_Args, device: *mut PJRT_Device);

/// Signature of the `PJRT_Device_ClearMemoryStats` entry; takes [`PJRT_Device_ClearMemoryStats_Args`].
pub type PJRT_Device_ClearMemoryStats =
    unsafe extern "C" fn(args: *mut PJRT_Device_ClearMemoryStats_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Device_PoisonExecution`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Device_PoisonExecution_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Device.
    pub device: *mut PJRT_Device,
    /// Launch id.
    pub launch_id: i32,
    /// Error code.
    pub error_code: PJRT_Error_Code,
    /// Error message.
    pub error_message: *const c_char,
    /// Length of `error_message` in bytes or elements.
    pub error_message_size: usize,
    /// Out: poisoned.
    pub poisoned: bool,
    /// Payload.
    pub payload: *const PJRT_NamedValue,
    /// Number of entries in `payload`.
    pub num_payload: usize,
}

struct_size!(PJRT_Device_PoisonExecution_Args_STRUCT_SIZE = PJRT_Device_PoisonExecution_Args, num_payload: usize);

/// Signature of the `PJRT_Device_PoisonExecution` entry; takes [`PJRT_Device_PoisonExecution_Args`].
pub type PJRT_Device_PoisonExecution =
    unsafe extern "C" fn(args: *mut PJRT_Device_PoisonExecution_Args) -> *mut PJRT_Error;

/// Opaque `PJRT_Device_Attributes` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_Device_Attributes {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_Device_GetAttributes`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Device_GetAttributes_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Device.
    pub device: *mut PJRT_Device,
    /// Out: attributes.
    pub attributes: *const PJRT_NamedValue,
    /// Out: number of entries in `attributes`.
    pub num_attributes: usize,
    /// Out: device attributes.
    pub device_attributes: *mut PJRT_Device_Attributes,
    /// Out: attributes deleter callback (may be null).
    pub attributes_deleter:
        Option<unsafe extern "C" fn(device_attributes: *mut PJRT_Device_Attributes)>,
}

struct_size!(PJRT_Device_GetAttributes_Args_STRUCT_SIZE = PJRT_Device_GetAttributes_Args, attributes_deleter: Option<unsafe extern "C" fn(device_attributes: *mut PJRT_Device_Attributes)>);

/// Signature of the `PJRT_Device_GetAttributes` entry; takes [`PJRT_Device_GetAttributes_Args`].
pub type PJRT_Device_GetAttributes =
    unsafe extern "C" fn(args: *mut PJRT_Device_GetAttributes_Args) -> *mut PJRT_Error;

/// Opaque `PJRT_AsyncTrackingEvent` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_AsyncTrackingEvent {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_Device_CreateAsyncTrackingEvent`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Device_CreateAsyncTrackingEvent_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Device.
    pub device: *mut PJRT_Device,
    /// Description.
    pub description: *const c_char,
    /// Length of `description` in bytes or elements.
    pub description_size: usize,
    /// Out: event.
    pub event: *mut PJRT_AsyncTrackingEvent,
}

struct_size!(PJRT_Device_CreateAsyncTrackingEvent_Args_STRUCT_SIZE = PJRT_Device_CreateAsyncTrackingEvent_Args, event: *mut PJRT_AsyncTrackingEvent);

/// Signature of the `PJRT_Device_CreateAsyncTrackingEvent` entry; takes [`PJRT_Device_CreateAsyncTrackingEvent_Args`].
pub type PJRT_Device_CreateAsyncTrackingEvent =
    unsafe extern "C" fn(args: *mut PJRT_Device_CreateAsyncTrackingEvent_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_AsyncTrackingEvent_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_AsyncTrackingEvent_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Event.
    pub event: *mut PJRT_AsyncTrackingEvent,
}

struct_size!(PJRT_AsyncTrackingEvent_Destroy_Args_STRUCT_SIZE = PJRT_AsyncTrackingEvent_Destroy_Args, event: *mut PJRT_AsyncTrackingEvent);

/// Signature of the `PJRT_AsyncTrackingEvent_Destroy` entry; takes [`PJRT_AsyncTrackingEvent_Destroy_Args`].
pub type PJRT_AsyncTrackingEvent_Destroy =
    unsafe extern "C" fn(args: *mut PJRT_AsyncTrackingEvent_Destroy_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Memory_Id`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Memory_Id_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Memory.
    pub memory: *mut PJRT_Memory,
    /// Out: id.
    pub id: c_int,
}

struct_size!(PJRT_Memory_Id_Args_STRUCT_SIZE = PJRT_Memory_Id_Args, id: c_int);

/// Signature of the `PJRT_Memory_Id` entry; takes [`PJRT_Memory_Id_Args`].
pub type PJRT_Memory_Id = unsafe extern "C" fn(args: *mut PJRT_Memory_Id_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Memory_Kind`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Memory_Kind_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Memory.
    pub memory: *mut PJRT_Memory,
    /// Out: kind.
    pub kind: *const c_char,
    /// Out: length of `kind` in bytes or elements.
    pub kind_size: usize,
}

struct_size!(PJRT_Memory_Kind_Args_STRUCT_SIZE = PJRT_Memory_Kind_Args, kind_size: usize);

/// Signature of the `PJRT_Memory_Kind` entry; takes [`PJRT_Memory_Kind_Args`].
pub type PJRT_Memory_Kind =
    unsafe extern "C" fn(args: *mut PJRT_Memory_Kind_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Memory_Kind_Id`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Memory_Kind_Id_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Memory.
    pub memory: *mut PJRT_Memory,
    /// Out: kind id.
    pub kind_id: c_int,
}

struct_size!(PJRT_Memory_Kind_Id_Args_STRUCT_SIZE = PJRT_Memory_Kind_Id_Args, kind_id: c_int);

/// Signature of the `PJRT_Memory_Kind_Id` entry; takes [`PJRT_Memory_Kind_Id_Args`].
pub type PJRT_Memory_Kind_Id =
    unsafe extern "C" fn(args: *mut PJRT_Memory_Kind_Id_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Memory_DebugString`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Memory_DebugString_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Memory.
    pub memory: *mut PJRT_Memory,
    /// Out: debug string.
    pub debug_string: *const c_char,
    /// Out: length of `debug_string` in bytes or elements.
    pub debug_string_size: usize,
}

struct_size!(PJRT_Memory_DebugString_Args_STRUCT_SIZE = PJRT_Memory_DebugString_Args, debug_string_size: usize);

/// Signature of the `PJRT_Memory_DebugString` entry; takes [`PJRT_Memory_DebugString_Args`].
pub type PJRT_Memory_DebugString =
    unsafe extern "C" fn(args: *mut PJRT_Memory_DebugString_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Memory_ToString`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Memory_ToString_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Memory.
    pub memory: *mut PJRT_Memory,
    /// Out: to string.
    pub to_string: *const c_char,
    /// Out: length of `to_string` in bytes or elements.
    pub to_string_size: usize,
}

struct_size!(PJRT_Memory_ToString_Args_STRUCT_SIZE = PJRT_Memory_ToString_Args, to_string_size: usize);

/// Signature of the `PJRT_Memory_ToString` entry; takes [`PJRT_Memory_ToString_Args`].
pub type PJRT_Memory_ToString =
    unsafe extern "C" fn(args: *mut PJRT_Memory_ToString_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Memory_AddressableByDevices`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Memory_AddressableByDevices_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Memory.
    pub memory: *mut PJRT_Memory,
    /// Out: devices.
    pub devices: *const *mut PJRT_Device,
    /// Out: number of entries in `devices`.
    pub num_devices: usize,
}

struct_size!(PJRT_Memory_AddressableByDevices_Args_STRUCT_SIZE = PJRT_Memory_AddressableByDevices_Args, num_devices: usize);

/// Signature of the `PJRT_Memory_AddressableByDevices` entry; takes [`PJRT_Memory_AddressableByDevices_Args`].
pub type PJRT_Memory_AddressableByDevices =
    unsafe extern "C" fn(args: *mut PJRT_Memory_AddressableByDevices_Args) -> *mut PJRT_Error;

/// Opaque `PJRT_ExecuteContext` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_ExecuteContext {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_ExecuteContext_Create`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_ExecuteContext_Create_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Out: context.
    pub context: *mut PJRT_ExecuteContext,
}

struct_size!(PJRT_ExecuteContext_Create_Args_STRUCT_SIZE = PJRT_ExecuteContext_Create_Args, context: *mut PJRT_ExecuteContext);

/// Signature of the `PJRT_ExecuteContext_Create` entry; takes [`PJRT_ExecuteContext_Create_Args`].
pub type PJRT_ExecuteContext_Create =
    unsafe extern "C" fn(args: *mut PJRT_ExecuteContext_Create_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_ExecuteContext_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_ExecuteContext_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Context.
    pub context: *mut PJRT_ExecuteContext,
}

struct_size!(PJRT_ExecuteContext_Destroy_Args_STRUCT_SIZE = PJRT_ExecuteContext_Destroy_Args, context: *mut PJRT_ExecuteContext);

/// Signature of the `PJRT_ExecuteContext_Destroy` entry; takes [`PJRT_ExecuteContext_Destroy_Args`].
pub type PJRT_ExecuteContext_Destroy =
    unsafe extern "C" fn(args: *mut PJRT_ExecuteContext_Destroy_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Executable_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Executable_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_Executable,
}

struct_size!(PJRT_Executable_Destroy_Args_STRUCT_SIZE = PJRT_Executable_Destroy_Args, executable: *mut PJRT_Executable);

/// Signature of the `PJRT_Executable_Destroy` entry; takes [`PJRT_Executable_Destroy_Args`].
pub type PJRT_Executable_Destroy =
    unsafe extern "C" fn(args: *mut PJRT_Executable_Destroy_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_LoadedExecutable_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_LoadedExecutable_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_LoadedExecutable,
}

struct_size!(PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE = PJRT_LoadedExecutable_Destroy_Args, executable: *mut PJRT_LoadedExecutable);

/// Signature of the `PJRT_LoadedExecutable_Destroy` entry; takes [`PJRT_LoadedExecutable_Destroy_Args`].
pub type PJRT_LoadedExecutable_Destroy =
    unsafe extern "C" fn(args: *mut PJRT_LoadedExecutable_Destroy_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_LoadedExecutable_GetExecutable`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_LoadedExecutable_GetExecutable_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Loaded executable.
    pub loaded_executable: *mut PJRT_LoadedExecutable,
    /// Out: executable.
    pub executable: *mut PJRT_Executable,
}

struct_size!(PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE = PJRT_LoadedExecutable_GetExecutable_Args, executable: *mut PJRT_Executable);

/// Signature of the `PJRT_LoadedExecutable_GetExecutable` entry; takes [`PJRT_LoadedExecutable_GetExecutable_Args`].
pub type PJRT_LoadedExecutable_GetExecutable =
    unsafe extern "C" fn(args: *mut PJRT_LoadedExecutable_GetExecutable_Args) -> *mut PJRT_Error;

/// Opaque `PJRT_DeviceAssignmentSerialized` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_DeviceAssignmentSerialized {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_LoadedExecutable_GetDeviceAssignment`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_LoadedExecutable_GetDeviceAssignment_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_LoadedExecutable,
    /// Out: serialized bytes.
    pub serialized_bytes: *const c_char,
    /// Out: length of `serialized_bytes` in bytes or elements.
    pub serialized_bytes_size: usize,
    /// Serialized device assignment.
    pub serialized_device_assignment: *mut PJRT_DeviceAssignmentSerialized,
    /// Out: serialized device assignment deleter callback (may be null).
    pub serialized_device_assignment_deleter:
        Option<unsafe extern "C" fn(da: *mut PJRT_DeviceAssignmentSerialized)>,
}

struct_size!(PJRT_LoadedExecutable_GetDeviceAssignment_Args_STRUCT_SIZE = PJRT_LoadedExecutable_GetDeviceAssignment_Args, serialized_device_assignment_deleter: Option<unsafe extern "C" fn(da: *mut PJRT_DeviceAssignmentSerialized)>);

/// Signature of the `PJRT_LoadedExecutable_GetDeviceAssignment` entry; takes [`PJRT_LoadedExecutable_GetDeviceAssignment_Args`].
pub type PJRT_LoadedExecutable_GetDeviceAssignment = unsafe extern "C" fn(
    args: *mut PJRT_LoadedExecutable_GetDeviceAssignment_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Executable_Name`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Executable_Name_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_Executable,
    /// Out: executable name.
    pub executable_name: *const c_char,
    /// Out: length of `executable_name` in bytes or elements.
    pub executable_name_size: usize,
}

struct_size!(PJRT_Executable_Name_Args_STRUCT_SIZE = PJRT_Executable_Name_Args, executable_name_size: usize);

/// Signature of the `PJRT_Executable_Name` entry; takes [`PJRT_Executable_Name_Args`].
pub type PJRT_Executable_Name =
    unsafe extern "C" fn(args: *mut PJRT_Executable_Name_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Executable_NumReplicas`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Executable_NumReplicas_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_Executable,
    /// Out: number of replicas.
    pub num_replicas: usize,
}

struct_size!(PJRT_Executable_NumReplicas_Args_STRUCT_SIZE = PJRT_Executable_NumReplicas_Args, num_replicas: usize);

/// Signature of the `PJRT_Executable_NumReplicas` entry; takes [`PJRT_Executable_NumReplicas_Args`].
pub type PJRT_Executable_NumReplicas =
    unsafe extern "C" fn(args: *mut PJRT_Executable_NumReplicas_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Executable_NumPartitions`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Executable_NumPartitions_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_Executable,
    /// Out: number of partitions.
    pub num_partitions: usize,
}

struct_size!(PJRT_Executable_NumPartitions_Args_STRUCT_SIZE = PJRT_Executable_NumPartitions_Args, num_partitions: usize);

/// Signature of the `PJRT_Executable_NumPartitions` entry; takes [`PJRT_Executable_NumPartitions_Args`].
pub type PJRT_Executable_NumPartitions =
    unsafe extern "C" fn(args: *mut PJRT_Executable_NumPartitions_Args) -> *mut PJRT_Error;

/// Replica and partition of one addressable device of an executable.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_LogicalDeviceIds {
    /// Replica.
    pub replica: c_int,
    /// Partition.
    pub partition: c_int,
}

/// Arguments of [`PJRT_LoadedExecutable_AddressableDevices`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_LoadedExecutable_AddressableDevices_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_LoadedExecutable,
    /// Out: addressable devices.
    pub addressable_devices: *const *mut PJRT_Device,
    /// Out: number of entries in `addressable_devices`.
    pub num_addressable_devices: usize,
}

struct_size!(PJRT_LoadedExecutable_AddressableDevices_Args_STRUCT_SIZE = PJRT_LoadedExecutable_AddressableDevices_Args, num_addressable_devices: usize);

/// Signature of the `PJRT_LoadedExecutable_AddressableDevices` entry; takes [`PJRT_LoadedExecutable_AddressableDevices_Args`].
pub type PJRT_LoadedExecutable_AddressableDevices = unsafe extern "C" fn(
    args: *mut PJRT_LoadedExecutable_AddressableDevices_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_LoadedExecutable_AddressableDeviceLogicalIds`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_LoadedExecutable,
    /// Out: addressable device logical ids.
    pub addressable_device_logical_ids: *mut PJRT_LogicalDeviceIds,
    /// Out: number of entries in `addressable_device_logical_ids`.
    pub num_addressable_device_logical_ids: usize,
}

struct_size!(PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args_STRUCT_SIZE = PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args, num_addressable_device_logical_ids: usize);

/// Signature of the `PJRT_LoadedExecutable_AddressableDeviceLogicalIds` entry; takes [`PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args`].
pub type PJRT_LoadedExecutable_AddressableDeviceLogicalIds =
    unsafe extern "C" fn(
        args: *mut PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args,
    ) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Executable_OptimizedProgram`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Executable_OptimizedProgram_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_Executable,
    /// Out: program.
    pub program: *mut PJRT_Program,
}

struct_size!(PJRT_Executable_OptimizedProgram_Args_STRUCT_SIZE = PJRT_Executable_OptimizedProgram_Args, program: *mut PJRT_Program);

/// Signature of the `PJRT_Executable_OptimizedProgram` entry; takes [`PJRT_Executable_OptimizedProgram_Args`].
pub type PJRT_Executable_OptimizedProgram =
    unsafe extern "C" fn(args: *mut PJRT_Executable_OptimizedProgram_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_LoadedExecutable_Delete`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_LoadedExecutable_Delete_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_LoadedExecutable,
}

struct_size!(PJRT_LoadedExecutable_Delete_Args_STRUCT_SIZE = PJRT_LoadedExecutable_Delete_Args, executable: *mut PJRT_LoadedExecutable);

/// Signature of the `PJRT_LoadedExecutable_Delete` entry; takes [`PJRT_LoadedExecutable_Delete_Args`].
pub type PJRT_LoadedExecutable_Delete =
    unsafe extern "C" fn(args: *mut PJRT_LoadedExecutable_Delete_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_LoadedExecutable_IsDeleted`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_LoadedExecutable_IsDeleted_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_LoadedExecutable,
    /// Out: is deleted.
    pub is_deleted: bool,
}

struct_size!(PJRT_LoadedExecutable_IsDeleted_Args_STRUCT_SIZE = PJRT_LoadedExecutable_IsDeleted_Args, is_deleted: bool);

/// Signature of the `PJRT_LoadedExecutable_IsDeleted` entry; takes [`PJRT_LoadedExecutable_IsDeleted_Args`].
pub type PJRT_LoadedExecutable_IsDeleted =
    unsafe extern "C" fn(args: *mut PJRT_LoadedExecutable_IsDeleted_Args) -> *mut PJRT_Error;

/// A block of bytes with its own deleter, used by send/recv callbacks.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Chunk {
    /// Data.
    pub data: *mut c_void,
    /// Size.
    pub size: usize,
    /// Deleter callback (may be null).
    pub deleter: Option<unsafe extern "C" fn(data: *mut c_void, deleter_arg: *mut c_void)>,
    /// Deleter arg.
    pub deleter_arg: *mut c_void,
}

/// Opaque `PJRT_CopyToDeviceStream` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_CopyToDeviceStream {
    _opaque: [u8; 0],
}

/// Called by the plugin with each chunk an executable sends to the host.
pub type PJRT_SendCallback = unsafe extern "C" fn(
    chunk: *mut PJRT_Chunk,
    callback_error: *mut Option<PJRT_CallbackError>,
    total_size_in_bytes: usize,
    done: bool,
    user_arg: *mut c_void,
) -> *mut PJRT_Error;

/// Called by the plugin when an executable wants data from the host.
pub type PJRT_RecvCallback =
    unsafe extern "C" fn(stream: *mut PJRT_CopyToDeviceStream, user_arg: *mut c_void);

/// A send callback bound to a channel id.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_SendCallbackInfo {
    /// Channel id.
    pub channel_id: i64,
    /// User arg.
    pub user_arg: *mut c_void,
    /// Send callback callback (may be null).
    pub send_callback: Option<PJRT_SendCallback>,
}

struct_size!(PJRT_SendCallbackInfo_STRUCT_SIZE = PJRT_SendCallbackInfo, send_callback: Option<PJRT_SendCallback>);

/// A receive callback bound to a channel id.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_RecvCallbackInfo {
    /// Channel id.
    pub channel_id: i64,
    /// User arg.
    pub user_arg: *mut c_void,
    /// Recv callback callback (may be null).
    pub recv_callback: Option<PJRT_RecvCallback>,
}

struct_size!(PJRT_RecvCallbackInfo_STRUCT_SIZE = PJRT_RecvCallbackInfo, recv_callback: Option<PJRT_RecvCallback>);

/// Called with the host copy of an HLO value that the program asked to output.
pub type PJRT_HloOutputCallback = unsafe extern "C" fn(
    replica_id: i64,
    partition_id: i64,
    data: *const c_void,
    shape_dims: *const i64,
    shape_num_dims: usize,
    shape_element_type: PJRT_Buffer_Type,
    operand_index: i64,
    user_arg: *mut c_void,
);

/// An HLO output callback with its id and operand count.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_HloOutputCallbackInfo {
    /// User arg.
    pub user_arg: *mut c_void,
    /// Callback callback (may be null).
    pub callback: Option<PJRT_HloOutputCallback>,
    /// Callback id.
    pub callback_id: i64,
    /// Number of operands.
    pub num_operands: usize,
}

struct_size!(PJRT_HloOutputCallbackInfo_STRUCT_SIZE = PJRT_HloOutputCallbackInfo, num_operands: usize);

/// Opaque `PJRT_MultiSlice_Config` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_MultiSlice_Config {
    _opaque: [u8; 0],
}

/// Options for one execution (callbacks, launch id, donation limits, context, ...).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_ExecuteOptions {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Send callbacks.
    pub send_callbacks: *mut *mut PJRT_SendCallbackInfo,
    /// Recv callbacks.
    pub recv_callbacks: *mut *mut PJRT_RecvCallbackInfo,
    /// Number of send ops.
    pub num_send_ops: usize,
    /// Number of recv ops.
    pub num_recv_ops: usize,
    /// Launch id.
    pub launch_id: c_int,
    /// Non donatable input indices.
    pub non_donatable_input_indices: *const i64,
    /// Number of entries in `non_donatable_input_indices`.
    pub num_non_donatable_input_indices: usize,
    /// Context.
    pub context: *mut PJRT_ExecuteContext,
    /// Call location.
    pub call_location: *const c_char,
    /// Number of tasks.
    pub num_tasks: usize,
    /// Task ids.
    pub task_ids: *mut c_int,
    /// Incarnation ids.
    pub incarnation_ids: *mut i64,
    /// Multi slice config.
    pub multi_slice_config: *mut PJRT_MultiSlice_Config,
    /// Use major to minor data layout for callbacks.
    pub use_major_to_minor_data_layout_for_callbacks: bool,
    /// Hlo output callbacks.
    pub hlo_output_callbacks: *mut PJRT_HloOutputCallbackInfo,
    /// Number of entries in `hlo_output_callbacks`.
    pub num_hlo_output_callbacks: usize,
}

struct_size!(PJRT_ExecuteOptions_STRUCT_SIZE = PJRT_ExecuteOptions, num_hlo_output_callbacks: usize);

/// Arguments of [`PJRT_LoadedExecutable_Execute`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_LoadedExecutable_Execute_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_LoadedExecutable,
    /// Options.
    pub options: *mut PJRT_ExecuteOptions,
    /// Argument lists.
    pub argument_lists: *const *const *mut PJRT_Buffer,
    /// Number of devices.
    pub num_devices: usize,
    /// Number of args.
    pub num_args: usize,
    /// In/out: output lists.
    pub output_lists: *const *mut *mut PJRT_Buffer,
    /// In/out: device complete events.
    pub device_complete_events: *mut *mut PJRT_Event,
    /// Execute device.
    pub execute_device: *mut PJRT_Device,
}

struct_size!(PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE = PJRT_LoadedExecutable_Execute_Args, execute_device: *mut PJRT_Device);

/// Signature of the `PJRT_LoadedExecutable_Execute` entry; takes [`PJRT_LoadedExecutable_Execute_Args`].
pub type PJRT_LoadedExecutable_Execute =
    unsafe extern "C" fn(args: *mut PJRT_LoadedExecutable_Execute_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Executable_NumOutputs`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Executable_NumOutputs_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_Executable,
    /// Out: number of outputs.
    pub num_outputs: usize,
}

struct_size!(PJRT_Executable_NumOutputs_Args_STRUCT_SIZE = PJRT_Executable_NumOutputs_Args, num_outputs: usize);

/// Signature of the `PJRT_Executable_NumOutputs` entry; takes [`PJRT_Executable_NumOutputs_Args`].
pub type PJRT_Executable_NumOutputs =
    unsafe extern "C" fn(args: *mut PJRT_Executable_NumOutputs_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Executable_SizeOfGeneratedCodeInBytes`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Executable_SizeOfGeneratedCodeInBytes_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_Executable,
    /// Out: size in bytes.
    pub size_in_bytes: i64,
}

struct_size!(PJRT_Executable_SizeOfGeneratedCodeInBytes_Args_STRUCT_SIZE = PJRT_Executable_SizeOfGeneratedCodeInBytes_Args, size_in_bytes: i64);

/// Signature of the `PJRT_Executable_SizeOfGeneratedCodeInBytes` entry; takes [`PJRT_Executable_SizeOfGeneratedCodeInBytes_Args`].
pub type PJRT_Executable_SizeOfGeneratedCodeInBytes = unsafe extern "C" fn(
    args: *mut PJRT_Executable_SizeOfGeneratedCodeInBytes_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Executable_Fingerprint`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Executable_Fingerprint_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_Executable,
    /// Out: executable fingerprint.
    pub executable_fingerprint: *const c_char,
    /// Out: length of `executable_fingerprint` in bytes or elements.
    pub executable_fingerprint_size: usize,
}

struct_size!(PJRT_Executable_Fingerprint_Args_STRUCT_SIZE = PJRT_Executable_Fingerprint_Args, executable_fingerprint_size: usize);

/// Signature of the `PJRT_Executable_Fingerprint` entry; takes [`PJRT_Executable_Fingerprint_Args`].
pub type PJRT_Executable_Fingerprint =
    unsafe extern "C" fn(args: *mut PJRT_Executable_Fingerprint_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Executable_GetCostAnalysis`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Executable_GetCostAnalysis_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_Executable,
    /// Out: number of properties.
    pub num_properties: usize,
    /// Out: properties.
    pub properties: *const PJRT_NamedValue,
}

struct_size!(PJRT_Executable_GetCostAnalysis_Args_STRUCT_SIZE = PJRT_Executable_GetCostAnalysis_Args, properties: *const PJRT_NamedValue);

/// Signature of the `PJRT_Executable_GetCostAnalysis` entry; takes [`PJRT_Executable_GetCostAnalysis_Args`].
pub type PJRT_Executable_GetCostAnalysis =
    unsafe extern "C" fn(args: *mut PJRT_Executable_GetCostAnalysis_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Executable_GetCompiledMemoryStats`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Executable_GetCompiledMemoryStats_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_Executable,
    /// Out: generated code size in bytes.
    pub generated_code_size_in_bytes: i64,
    /// Out: argument size in bytes.
    pub argument_size_in_bytes: i64,
    /// Out: output size in bytes.
    pub output_size_in_bytes: i64,
    /// Out: alias size in bytes.
    pub alias_size_in_bytes: i64,
    /// Out: temp size in bytes.
    pub temp_size_in_bytes: i64,
    /// Out: host generated code size in bytes.
    pub host_generated_code_size_in_bytes: i64,
    /// Out: host argument size in bytes.
    pub host_argument_size_in_bytes: i64,
    /// Out: host output size in bytes.
    pub host_output_size_in_bytes: i64,
    /// Out: host alias size in bytes.
    pub host_alias_size_in_bytes: i64,
    /// Out: host temp size in bytes.
    pub host_temp_size_in_bytes: i64,
    /// Out: peak memory in bytes.
    pub peak_memory_in_bytes: i64,
    /// Out: total size in bytes.
    pub total_size_in_bytes: i64,
    /// Out: total allocation bytes.
    pub total_allocation_bytes: i64,
    /// Out: indefinite allocations.
    pub indefinite_allocations: i64,
    /// Out: peak unpadded heap bytes.
    pub peak_unpadded_heap_bytes: i64,
}

struct_size!(PJRT_Executable_GetCompiledMemoryStats_Args_STRUCT_SIZE = PJRT_Executable_GetCompiledMemoryStats_Args, peak_unpadded_heap_bytes: i64);

/// Signature of the `PJRT_Executable_GetCompiledMemoryStats` entry; takes [`PJRT_Executable_GetCompiledMemoryStats_Args`].
pub type PJRT_Executable_GetCompiledMemoryStats =
    unsafe extern "C" fn(args: *mut PJRT_Executable_GetCompiledMemoryStats_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Executable_OutputElementTypes`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Executable_OutputElementTypes_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_Executable,
    /// Out: output types.
    pub output_types: *mut PJRT_Buffer_Type,
    /// Out: number of entries in `output_types`.
    pub num_output_types: usize,
}

struct_size!(PJRT_Executable_OutputElementTypes_Args_STRUCT_SIZE = PJRT_Executable_OutputElementTypes_Args, num_output_types: usize);

/// Signature of the `PJRT_Executable_OutputElementTypes` entry; takes [`PJRT_Executable_OutputElementTypes_Args`].
pub type PJRT_Executable_OutputElementTypes =
    unsafe extern "C" fn(args: *mut PJRT_Executable_OutputElementTypes_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Executable_OutputDimensions`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Executable_OutputDimensions_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_Executable,
    /// Number of outputs.
    pub num_outputs: usize,
    /// Out: dims.
    pub dims: *const i64,
    /// Out: dim sizes.
    pub dim_sizes: *const usize,
}

struct_size!(PJRT_Executable_OutputDimensions_Args_STRUCT_SIZE = PJRT_Executable_OutputDimensions_Args, dim_sizes: *const usize);

/// Signature of the `PJRT_Executable_OutputDimensions` entry; takes [`PJRT_Executable_OutputDimensions_Args`].
pub type PJRT_Executable_OutputDimensions =
    unsafe extern "C" fn(args: *mut PJRT_Executable_OutputDimensions_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Executable_ParameterMemoryKinds`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Executable_ParameterMemoryKinds_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_Executable,
    /// Number of parameters.
    pub num_parameters: usize,
    /// Out: memory kinds.
    pub memory_kinds: *const *const c_char,
    /// Out: memory kind sizes.
    pub memory_kind_sizes: *const usize,
}

struct_size!(PJRT_Executable_ParameterMemoryKinds_Args_STRUCT_SIZE = PJRT_Executable_ParameterMemoryKinds_Args, memory_kind_sizes: *const usize);

/// Signature of the `PJRT_Executable_ParameterMemoryKinds` entry; takes [`PJRT_Executable_ParameterMemoryKinds_Args`].
pub type PJRT_Executable_ParameterMemoryKinds =
    unsafe extern "C" fn(args: *mut PJRT_Executable_ParameterMemoryKinds_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Executable_OutputMemoryKinds`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Executable_OutputMemoryKinds_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_Executable,
    /// Number of outputs.
    pub num_outputs: usize,
    /// Out: memory kinds.
    pub memory_kinds: *const *const c_char,
    /// Out: memory kind sizes.
    pub memory_kind_sizes: *const usize,
}

struct_size!(PJRT_Executable_OutputMemoryKinds_Args_STRUCT_SIZE = PJRT_Executable_OutputMemoryKinds_Args, memory_kind_sizes: *const usize);

/// Signature of the `PJRT_Executable_OutputMemoryKinds` entry; takes [`PJRT_Executable_OutputMemoryKinds_Args`].
pub type PJRT_Executable_OutputMemoryKinds =
    unsafe extern "C" fn(args: *mut PJRT_Executable_OutputMemoryKinds_Args) -> *mut PJRT_Error;

/// Opaque `PJRT_SerializedExecutable` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_SerializedExecutable {
    _opaque: [u8; 0],
}

/// Opaque `PJRT_SerializedCompileOptions` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_SerializedCompileOptions {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_Executable_Serialize`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Executable_Serialize_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *const PJRT_Executable,
    /// Out: serialized bytes.
    pub serialized_bytes: *const c_char,
    /// Out: length of `serialized_bytes` in bytes or elements.
    pub serialized_bytes_size: usize,
    /// Serialized executable.
    pub serialized_executable: *mut PJRT_SerializedExecutable,
    /// Out: serialized executable deleter callback (may be null).
    pub serialized_executable_deleter:
        Option<unsafe extern "C" fn(exec: *mut PJRT_SerializedExecutable)>,
}

struct_size!(PJRT_Executable_Serialize_Args_STRUCT_SIZE = PJRT_Executable_Serialize_Args, serialized_executable_deleter: Option<unsafe extern "C" fn(exec: *mut PJRT_SerializedExecutable)>);

/// Signature of the `PJRT_Executable_Serialize` entry; takes [`PJRT_Executable_Serialize_Args`].
pub type PJRT_Executable_Serialize =
    unsafe extern "C" fn(args: *mut PJRT_Executable_Serialize_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Executable_GetCompileOptions`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Executable_GetCompileOptions_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_Executable,
    /// Out: serialized bytes.
    pub serialized_bytes: *const c_char,
    /// Out: length of `serialized_bytes` in bytes or elements.
    pub serialized_bytes_size: usize,
    /// Serialized compile options.
    pub serialized_compile_options: *mut PJRT_SerializedCompileOptions,
    /// Out: serialized compile options deleter callback (may be null).
    pub serialized_compile_options_deleter:
        Option<unsafe extern "C" fn(options: *mut PJRT_SerializedCompileOptions)>,
}

struct_size!(PJRT_Executable_GetCompileOptions_Args_STRUCT_SIZE = PJRT_Executable_GetCompileOptions_Args, serialized_compile_options_deleter: Option<unsafe extern "C" fn(options: *mut PJRT_SerializedCompileOptions)>);

/// Signature of the `PJRT_Executable_GetCompileOptions` entry; takes [`PJRT_Executable_GetCompileOptions_Args`].
pub type PJRT_Executable_GetCompileOptions =
    unsafe extern "C" fn(args: *mut PJRT_Executable_GetCompileOptions_Args) -> *mut PJRT_Error;

/// Extra options when loading a serialized executable (0.111+).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_LoadOptions {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Computation origin.
    pub computation_origin: *const i32,
    /// Length of `computation_origin` in bytes or elements.
    pub computation_origin_size: usize,
    /// Multi slice config.
    pub multi_slice_config: *mut PJRT_MultiSlice_Config,
}

struct_size!(PJRT_LoadOptions_STRUCT_SIZE = PJRT_LoadOptions, multi_slice_config: *mut PJRT_MultiSlice_Config);

/// Arguments of [`PJRT_Executable_DeserializeAndLoad`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Executable_DeserializeAndLoad_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Serialized executable.
    pub serialized_executable: *const c_char,
    /// Length of `serialized_executable` in bytes or elements.
    pub serialized_executable_size: usize,
    /// Out: loaded executable.
    pub loaded_executable: *mut PJRT_LoadedExecutable,
    /// Overridden serialized compile options.
    pub overridden_serialized_compile_options: *const c_char,
    /// Length of `overridden_serialized_compile_options` in bytes or elements.
    pub overridden_serialized_compile_options_size: usize,
    /// Load options.
    pub load_options: *mut PJRT_LoadOptions,
}

struct_size!(PJRT_Executable_DeserializeAndLoad_Args_STRUCT_SIZE = PJRT_Executable_DeserializeAndLoad_Args, load_options: *mut PJRT_LoadOptions);

/// Signature of the `PJRT_Executable_DeserializeAndLoad` entry; takes [`PJRT_Executable_DeserializeAndLoad_Args`].
pub type PJRT_Executable_DeserializeAndLoad =
    unsafe extern "C" fn(args: *mut PJRT_Executable_DeserializeAndLoad_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_LoadedExecutable_Fingerprint`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_LoadedExecutable_Fingerprint_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Executable.
    pub executable: *mut PJRT_LoadedExecutable,
    /// Out: executable fingerprint.
    pub executable_fingerprint: *const c_char,
    /// Out: length of `executable_fingerprint` in bytes or elements.
    pub executable_fingerprint_size: usize,
}

struct_size!(PJRT_LoadedExecutable_Fingerprint_Args_STRUCT_SIZE = PJRT_LoadedExecutable_Fingerprint_Args, executable_fingerprint_size: usize);

/// Signature of the `PJRT_LoadedExecutable_Fingerprint` entry; takes [`PJRT_LoadedExecutable_Fingerprint_Args`].
pub type PJRT_LoadedExecutable_Fingerprint =
    unsafe extern "C" fn(args: *mut PJRT_LoadedExecutable_Fingerprint_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
}

struct_size!(PJRT_Buffer_Destroy_Args_STRUCT_SIZE = PJRT_Buffer_Destroy_Args, buffer: *mut PJRT_Buffer);

/// Signature of the `PJRT_Buffer_Destroy` entry; takes [`PJRT_Buffer_Destroy_Args`].
pub type PJRT_Buffer_Destroy =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_Destroy_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_ElementType`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_ElementType_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Out: type.
    pub r#type: PJRT_Buffer_Type,
}

struct_size!(PJRT_Buffer_ElementType_Args_STRUCT_SIZE = PJRT_Buffer_ElementType_Args, r#type: PJRT_Buffer_Type);

/// Signature of the `PJRT_Buffer_ElementType` entry; takes [`PJRT_Buffer_ElementType_Args`].
pub type PJRT_Buffer_ElementType =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_ElementType_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_Dimensions`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_Dimensions_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Out: dims.
    pub dims: *const i64,
    /// Out: number of entries in `dims`.
    pub num_dims: usize,
}

struct_size!(PJRT_Buffer_Dimensions_Args_STRUCT_SIZE = PJRT_Buffer_Dimensions_Args, num_dims: usize);

/// Signature of the `PJRT_Buffer_Dimensions` entry; takes [`PJRT_Buffer_Dimensions_Args`].
pub type PJRT_Buffer_Dimensions =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_Dimensions_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_UnpaddedDimensions`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_UnpaddedDimensions_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Out: unpadded dims.
    pub unpadded_dims: *const i64,
    /// Out: number of dims.
    pub num_dims: usize,
}

struct_size!(PJRT_Buffer_UnpaddedDimensions_Args_STRUCT_SIZE = PJRT_Buffer_UnpaddedDimensions_Args, num_dims: usize);

/// Signature of the `PJRT_Buffer_UnpaddedDimensions` entry; takes [`PJRT_Buffer_UnpaddedDimensions_Args`].
pub type PJRT_Buffer_UnpaddedDimensions =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_UnpaddedDimensions_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_DynamicDimensionIndices`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_DynamicDimensionIndices_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Out: dynamic dim indices.
    pub dynamic_dim_indices: *const usize,
    /// Out: number of dynamic dims.
    pub num_dynamic_dims: usize,
}

struct_size!(PJRT_Buffer_DynamicDimensionIndices_Args_STRUCT_SIZE = PJRT_Buffer_DynamicDimensionIndices_Args, num_dynamic_dims: usize);

/// Signature of the `PJRT_Buffer_DynamicDimensionIndices` entry; takes [`PJRT_Buffer_DynamicDimensionIndices_Args`].
pub type PJRT_Buffer_DynamicDimensionIndices =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_DynamicDimensionIndices_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_GetMemoryLayout`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_GetMemoryLayout_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Out: layout.
    pub layout: PJRT_Buffer_MemoryLayout,
}

struct_size!(PJRT_Buffer_GetMemoryLayout_Args_STRUCT_SIZE = PJRT_Buffer_GetMemoryLayout_Args, layout: PJRT_Buffer_MemoryLayout);

/// Signature of the `PJRT_Buffer_GetMemoryLayout` entry; takes [`PJRT_Buffer_GetMemoryLayout_Args`].
pub type PJRT_Buffer_GetMemoryLayout =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_GetMemoryLayout_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_ToHostBuffer`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_ToHostBuffer_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Src.
    pub src: *mut PJRT_Buffer,
    /// Host layout.
    pub host_layout: *mut PJRT_Buffer_MemoryLayout,
    /// In/out: dst.
    pub dst: *mut c_void,
    /// In/out: length of `dst` in bytes or elements.
    pub dst_size: usize,
    /// Out: event.
    pub event: *mut PJRT_Event,
}

struct_size!(PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE = PJRT_Buffer_ToHostBuffer_Args, event: *mut PJRT_Event);

/// Signature of the `PJRT_Buffer_ToHostBuffer` entry; takes [`PJRT_Buffer_ToHostBuffer_Args`].
pub type PJRT_Buffer_ToHostBuffer =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_ToHostBuffer_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_OnDeviceSizeInBytes`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_OnDeviceSizeInBytes_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Out: on device size in bytes.
    pub on_device_size_in_bytes: usize,
}

struct_size!(PJRT_Buffer_OnDeviceSizeInBytes_Args_STRUCT_SIZE = PJRT_Buffer_OnDeviceSizeInBytes_Args, on_device_size_in_bytes: usize);

/// Signature of the `PJRT_Buffer_OnDeviceSizeInBytes` entry; takes [`PJRT_Buffer_OnDeviceSizeInBytes_Args`].
pub type PJRT_Buffer_OnDeviceSizeInBytes =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_OnDeviceSizeInBytes_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_Delete`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_Delete_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
}

struct_size!(PJRT_Buffer_Delete_Args_STRUCT_SIZE = PJRT_Buffer_Delete_Args, buffer: *mut PJRT_Buffer);

/// Signature of the `PJRT_Buffer_Delete` entry; takes [`PJRT_Buffer_Delete_Args`].
pub type PJRT_Buffer_Delete =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_Delete_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_IsDeleted`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_IsDeleted_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Out: is deleted.
    pub is_deleted: bool,
}

struct_size!(PJRT_Buffer_IsDeleted_Args_STRUCT_SIZE = PJRT_Buffer_IsDeleted_Args, is_deleted: bool);

/// Signature of the `PJRT_Buffer_IsDeleted` entry; takes [`PJRT_Buffer_IsDeleted_Args`].
pub type PJRT_Buffer_IsDeleted =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_IsDeleted_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_CopyRawToHost`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_CopyRawToHost_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Dst.
    pub dst: *mut c_void,
    /// Offset.
    pub offset: i64,
    /// Transfer size.
    pub transfer_size: i64,
    /// Out: event.
    pub event: *mut PJRT_Event,
}

struct_size!(PJRT_Buffer_CopyRawToHost_Args_STRUCT_SIZE = PJRT_Buffer_CopyRawToHost_Args, event: *mut PJRT_Event);

/// Signature of the `PJRT_Buffer_CopyRawToHost` entry; takes [`PJRT_Buffer_CopyRawToHost_Args`].
pub type PJRT_Buffer_CopyRawToHost =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_CopyRawToHost_Args) -> *mut PJRT_Error;

/// Arguments of the ready callback returned by `PJRT_Buffer_CopyRawToHostFuture`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_CopyRawToHostFuture_Callback_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Callback data.
    pub callback_data: *mut c_void,
    /// Error code.
    pub error_code: PJRT_Error_Code,
    /// Error message.
    pub error_message: *const c_char,
    /// Length of `error_message` in bytes or elements.
    pub error_message_size: usize,
    /// Dst.
    pub dst: *mut c_void,
}

struct_size!(PJRT_Buffer_CopyRawToHostFuture_Callback_Args_STRUCT_SIZE = PJRT_Buffer_CopyRawToHostFuture_Callback_Args, dst: *mut c_void);

/// Arguments of [`PJRT_Buffer_CopyRawToHostFuture`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_CopyRawToHostFuture_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Offset.
    pub offset: i64,
    /// Transfer size.
    pub transfer_size: i64,
    /// Out: event.
    pub event: *mut PJRT_Event,
    /// Out: callback data.
    pub callback_data: *mut c_void,
    /// Out: future ready callback callback (may be null).
    pub future_ready_callback:
        Option<unsafe extern "C" fn(args: *mut PJRT_Buffer_CopyRawToHostFuture_Callback_Args)>,
}

struct_size!(PJRT_Buffer_CopyRawToHostFuture_Args_STRUCT_SIZE = PJRT_Buffer_CopyRawToHostFuture_Args, future_ready_callback: Option<unsafe extern "C" fn(args: *mut PJRT_Buffer_CopyRawToHostFuture_Callback_Args)>);

/// Signature of the `PJRT_Buffer_CopyRawToHostFuture` entry; takes [`PJRT_Buffer_CopyRawToHostFuture_Args`].
pub type PJRT_Buffer_CopyRawToHostFuture =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_CopyRawToHostFuture_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_CopyToDevice`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_CopyToDevice_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Dst device.
    pub dst_device: *mut PJRT_Device,
    /// Out: dst buffer.
    pub dst_buffer: *mut PJRT_Buffer,
}

struct_size!(PJRT_Buffer_CopyToDevice_Args_STRUCT_SIZE = PJRT_Buffer_CopyToDevice_Args, dst_buffer: *mut PJRT_Buffer);

/// Signature of the `PJRT_Buffer_CopyToDevice` entry; takes [`PJRT_Buffer_CopyToDevice_Args`].
pub type PJRT_Buffer_CopyToDevice =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_CopyToDevice_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_CopyToMemory`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_CopyToMemory_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Dst memory.
    pub dst_memory: *mut PJRT_Memory,
    /// Out: dst buffer.
    pub dst_buffer: *mut PJRT_Buffer,
}

struct_size!(PJRT_Buffer_CopyToMemory_Args_STRUCT_SIZE = PJRT_Buffer_CopyToMemory_Args, dst_buffer: *mut PJRT_Buffer);

/// Signature of the `PJRT_Buffer_CopyToMemory` entry; takes [`PJRT_Buffer_CopyToMemory_Args`].
pub type PJRT_Buffer_CopyToMemory =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_CopyToMemory_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_Bitcast`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_Bitcast_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Element type.
    pub element_type: PJRT_Buffer_Type,
    /// Dims.
    pub dims: *const i64,
    /// Number of entries in `dims`.
    pub num_dims: usize,
    /// Device layout.
    pub device_layout: *mut PJRT_Buffer_MemoryLayout,
    /// Out: out buffer.
    pub out_buffer: *mut PJRT_Buffer,
}

struct_size!(PJRT_Buffer_Bitcast_Args_STRUCT_SIZE = PJRT_Buffer_Bitcast_Args, out_buffer: *mut PJRT_Buffer);

/// Signature of the `PJRT_Buffer_Bitcast` entry; takes [`PJRT_Buffer_Bitcast_Args`].
pub type PJRT_Buffer_Bitcast =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_Bitcast_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_IsOnCpu`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_IsOnCpu_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Out: is on cpu.
    pub is_on_cpu: bool,
}

struct_size!(PJRT_Buffer_IsOnCpu_Args_STRUCT_SIZE = PJRT_Buffer_IsOnCpu_Args, is_on_cpu: bool);

/// Signature of the `PJRT_Buffer_IsOnCpu` entry; takes [`PJRT_Buffer_IsOnCpu_Args`].
pub type PJRT_Buffer_IsOnCpu =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_IsOnCpu_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_Device`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_Device_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Out: device.
    pub device: *mut PJRT_Device,
}

struct_size!(PJRT_Buffer_Device_Args_STRUCT_SIZE = PJRT_Buffer_Device_Args, device: *mut PJRT_Device);

/// Signature of the `PJRT_Buffer_Device` entry; takes [`PJRT_Buffer_Device_Args`].
pub type PJRT_Buffer_Device =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_Device_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_Memory`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_Memory_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Out: memory.
    pub memory: *mut PJRT_Memory,
}

struct_size!(PJRT_Buffer_Memory_Args_STRUCT_SIZE = PJRT_Buffer_Memory_Args, memory: *mut PJRT_Memory);

/// Signature of the `PJRT_Buffer_Memory` entry; takes [`PJRT_Buffer_Memory_Args`].
pub type PJRT_Buffer_Memory =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_Memory_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_ReadyEvent`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_ReadyEvent_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Out: event.
    pub event: *mut PJRT_Event,
}

struct_size!(PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE = PJRT_Buffer_ReadyEvent_Args, event: *mut PJRT_Event);

/// Signature of the `PJRT_Buffer_ReadyEvent` entry; takes [`PJRT_Buffer_ReadyEvent_Args`].
pub type PJRT_Buffer_ReadyEvent =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_ReadyEvent_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_UnsafePointer`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_UnsafePointer_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Out: buffer pointer.
    pub buffer_pointer: usize,
}

struct_size!(PJRT_Buffer_UnsafePointer_Args_STRUCT_SIZE = PJRT_Buffer_UnsafePointer_Args, buffer_pointer: usize);

/// Signature of the `PJRT_Buffer_UnsafePointer` entry; takes [`PJRT_Buffer_UnsafePointer_Args`].
pub type PJRT_Buffer_UnsafePointer =
    unsafe extern "C" fn(args: *mut PJRT_Buffer_UnsafePointer_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_IncreaseExternalReferenceCount`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_IncreaseExternalReferenceCount_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
}

struct_size!(PJRT_Buffer_IncreaseExternalReferenceCount_Args_STRUCT_SIZE = PJRT_Buffer_IncreaseExternalReferenceCount_Args, buffer: *mut PJRT_Buffer);

/// Signature of the `PJRT_Buffer_IncreaseExternalReferenceCount` entry; takes [`PJRT_Buffer_IncreaseExternalReferenceCount_Args`].
pub type PJRT_Buffer_IncreaseExternalReferenceCount = unsafe extern "C" fn(
    args: *mut PJRT_Buffer_IncreaseExternalReferenceCount_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_DecreaseExternalReferenceCount`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_DecreaseExternalReferenceCount_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
}

struct_size!(PJRT_Buffer_DecreaseExternalReferenceCount_Args_STRUCT_SIZE = PJRT_Buffer_DecreaseExternalReferenceCount_Args, buffer: *mut PJRT_Buffer);

/// Signature of the `PJRT_Buffer_DecreaseExternalReferenceCount` entry; takes [`PJRT_Buffer_DecreaseExternalReferenceCount_Args`].
pub type PJRT_Buffer_DecreaseExternalReferenceCount = unsafe extern "C" fn(
    args: *mut PJRT_Buffer_DecreaseExternalReferenceCount_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Buffer_OpaqueDeviceMemoryDataPointer`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Out: device memory ptr.
    pub device_memory_ptr: *mut c_void,
}

struct_size!(PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args_STRUCT_SIZE = PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args, device_memory_ptr: *mut c_void);

/// Signature of the `PJRT_Buffer_OpaqueDeviceMemoryDataPointer` entry; takes [`PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args`].
pub type PJRT_Buffer_OpaqueDeviceMemoryDataPointer = unsafe extern "C" fn(
    args: *mut PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args,
) -> *mut PJRT_Error;

/// Arguments of the dependency callback returned by `PJRT_Buffer_DonateWithControlDependency`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_DonateWithControlDependency_Callback_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Callback data.
    pub callback_data: *mut c_void,
    /// Error code.
    pub error_code: PJRT_Error_Code,
    /// Error message.
    pub error_message: *const c_char,
    /// Length of `error_message` in bytes or elements.
    pub error_message_size: usize,
}

struct_size!(PJRT_Buffer_DonateWithControlDependency_Callback_Args_STRUCT_SIZE = PJRT_Buffer_DonateWithControlDependency_Callback_Args, error_message_size: usize);

/// Arguments of [`PJRT_Buffer_DonateWithControlDependency`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Buffer_DonateWithControlDependency_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Buffer.
    pub buffer: *mut PJRT_Buffer,
    /// Out: callback data.
    pub callback_data: *mut c_void,
    /// Out: dependency ready callback callback (may be null).
    pub dependency_ready_callback: Option<
        unsafe extern "C" fn(args: *mut PJRT_Buffer_DonateWithControlDependency_Callback_Args),
    >,
    /// Out: out buffer.
    pub out_buffer: *mut PJRT_Buffer,
}

struct_size!(PJRT_Buffer_DonateWithControlDependency_Args_STRUCT_SIZE = PJRT_Buffer_DonateWithControlDependency_Args, out_buffer: *mut PJRT_Buffer);

/// Signature of the `PJRT_Buffer_DonateWithControlDependency` entry; takes [`PJRT_Buffer_DonateWithControlDependency_Args`].
pub type PJRT_Buffer_DonateWithControlDependency = unsafe extern "C" fn(
    args: *mut PJRT_Buffer_DonateWithControlDependency_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_CopyToDeviceStream_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_CopyToDeviceStream_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Stream.
    pub stream: *mut PJRT_CopyToDeviceStream,
}

struct_size!(PJRT_CopyToDeviceStream_Destroy_Args_STRUCT_SIZE = PJRT_CopyToDeviceStream_Destroy_Args, stream: *mut PJRT_CopyToDeviceStream);

/// Signature of the `PJRT_CopyToDeviceStream_Destroy` entry; takes [`PJRT_CopyToDeviceStream_Destroy_Args`].
pub type PJRT_CopyToDeviceStream_Destroy =
    unsafe extern "C" fn(args: *mut PJRT_CopyToDeviceStream_Destroy_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_CopyToDeviceStream_AddChunk`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_CopyToDeviceStream_AddChunk_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Stream.
    pub stream: *mut PJRT_CopyToDeviceStream,
    /// Chunk.
    pub chunk: *mut PJRT_Chunk,
    /// Out: transfer complete.
    pub transfer_complete: *mut PJRT_Event,
}

struct_size!(PJRT_CopyToDeviceStream_AddChunk_Args_STRUCT_SIZE = PJRT_CopyToDeviceStream_AddChunk_Args, transfer_complete: *mut PJRT_Event);

/// Signature of the `PJRT_CopyToDeviceStream_AddChunk` entry; takes [`PJRT_CopyToDeviceStream_AddChunk_Args`].
pub type PJRT_CopyToDeviceStream_AddChunk =
    unsafe extern "C" fn(args: *mut PJRT_CopyToDeviceStream_AddChunk_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_CopyToDeviceStream_TotalBytes`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_CopyToDeviceStream_TotalBytes_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Stream.
    pub stream: *mut PJRT_CopyToDeviceStream,
    /// Out: total bytes.
    pub total_bytes: i64,
}

struct_size!(PJRT_CopyToDeviceStream_TotalBytes_Args_STRUCT_SIZE = PJRT_CopyToDeviceStream_TotalBytes_Args, total_bytes: i64);

/// Signature of the `PJRT_CopyToDeviceStream_TotalBytes` entry; takes [`PJRT_CopyToDeviceStream_TotalBytes_Args`].
pub type PJRT_CopyToDeviceStream_TotalBytes =
    unsafe extern "C" fn(args: *mut PJRT_CopyToDeviceStream_TotalBytes_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_CopyToDeviceStream_GranuleSize`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_CopyToDeviceStream_GranuleSize_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Stream.
    pub stream: *mut PJRT_CopyToDeviceStream,
    /// Out: granule size in bytes.
    pub granule_size_in_bytes: i64,
}

struct_size!(PJRT_CopyToDeviceStream_GranuleSize_Args_STRUCT_SIZE = PJRT_CopyToDeviceStream_GranuleSize_Args, granule_size_in_bytes: i64);

/// Signature of the `PJRT_CopyToDeviceStream_GranuleSize` entry; takes [`PJRT_CopyToDeviceStream_GranuleSize_Args`].
pub type PJRT_CopyToDeviceStream_GranuleSize =
    unsafe extern "C" fn(args: *mut PJRT_CopyToDeviceStream_GranuleSize_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_CopyToDeviceStream_CurrentBytes`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_CopyToDeviceStream_CurrentBytes_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Stream.
    pub stream: *mut PJRT_CopyToDeviceStream,
    /// Out: current bytes.
    pub current_bytes: i64,
}

struct_size!(PJRT_CopyToDeviceStream_CurrentBytes_Args_STRUCT_SIZE = PJRT_CopyToDeviceStream_CurrentBytes_Args, current_bytes: i64);

/// Signature of the `PJRT_CopyToDeviceStream_CurrentBytes` entry; takes [`PJRT_CopyToDeviceStream_CurrentBytes_Args`].
pub type PJRT_CopyToDeviceStream_CurrentBytes =
    unsafe extern "C" fn(args: *mut PJRT_CopyToDeviceStream_CurrentBytes_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TopologyDescription_Create`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TopologyDescription_Create_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Topology name.
    pub topology_name: *const c_char,
    /// Length of `topology_name` in bytes or elements.
    pub topology_name_size: usize,
    /// Create options.
    pub create_options: *const PJRT_NamedValue,
    /// Number of options.
    pub num_options: usize,
    /// Out: topology.
    pub topology: *mut PJRT_TopologyDescription,
}

struct_size!(PJRT_TopologyDescription_Create_Args_STRUCT_SIZE = PJRT_TopologyDescription_Create_Args, topology: *mut PJRT_TopologyDescription);

/// Signature of the `PJRT_TopologyDescription_Create` entry; takes [`PJRT_TopologyDescription_Create_Args`].
pub type PJRT_TopologyDescription_Create =
    unsafe extern "C" fn(args: *mut PJRT_TopologyDescription_Create_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TopologyDescription_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TopologyDescription_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Topology.
    pub topology: *mut PJRT_TopologyDescription,
}

struct_size!(PJRT_TopologyDescription_Destroy_Args_STRUCT_SIZE = PJRT_TopologyDescription_Destroy_Args, topology: *mut PJRT_TopologyDescription);

/// Signature of the `PJRT_TopologyDescription_Destroy` entry; takes [`PJRT_TopologyDescription_Destroy_Args`].
pub type PJRT_TopologyDescription_Destroy =
    unsafe extern "C" fn(args: *mut PJRT_TopologyDescription_Destroy_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TopologyDescription_PlatformVersion`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TopologyDescription_PlatformVersion_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Topology.
    pub topology: *mut PJRT_TopologyDescription,
    /// Out: platform version.
    pub platform_version: *const c_char,
    /// Out: length of `platform_version` in bytes or elements.
    pub platform_version_size: usize,
}

struct_size!(PJRT_TopologyDescription_PlatformVersion_Args_STRUCT_SIZE = PJRT_TopologyDescription_PlatformVersion_Args, platform_version_size: usize);

/// Signature of the `PJRT_TopologyDescription_PlatformVersion` entry; takes [`PJRT_TopologyDescription_PlatformVersion_Args`].
pub type PJRT_TopologyDescription_PlatformVersion = unsafe extern "C" fn(
    args: *mut PJRT_TopologyDescription_PlatformVersion_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TopologyDescription_PlatformName`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TopologyDescription_PlatformName_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Topology.
    pub topology: *const PJRT_TopologyDescription,
    /// Out: platform name.
    pub platform_name: *const c_char,
    /// Out: length of `platform_name` in bytes or elements.
    pub platform_name_size: usize,
}

struct_size!(PJRT_TopologyDescription_PlatformName_Args_STRUCT_SIZE = PJRT_TopologyDescription_PlatformName_Args, platform_name_size: usize);

/// Signature of the `PJRT_TopologyDescription_PlatformName` entry; takes [`PJRT_TopologyDescription_PlatformName_Args`].
pub type PJRT_TopologyDescription_PlatformName =
    unsafe extern "C" fn(args: *mut PJRT_TopologyDescription_PlatformName_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TopologyDescription_GetDeviceDescriptions`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TopologyDescription_GetDeviceDescriptions_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Topology.
    pub topology: *const PJRT_TopologyDescription,
    /// Out: descriptions.
    pub descriptions: *const *mut PJRT_DeviceDescription,
    /// Out: number of entries in `descriptions`.
    pub num_descriptions: usize,
}

struct_size!(PJRT_TopologyDescription_GetDeviceDescriptions_Args_STRUCT_SIZE = PJRT_TopologyDescription_GetDeviceDescriptions_Args, num_descriptions: usize);

/// Signature of the `PJRT_TopologyDescription_GetDeviceDescriptions` entry; takes [`PJRT_TopologyDescription_GetDeviceDescriptions_Args`].
pub type PJRT_TopologyDescription_GetDeviceDescriptions = unsafe extern "C" fn(
    args: *mut PJRT_TopologyDescription_GetDeviceDescriptions_Args,
) -> *mut PJRT_Error;

/// Opaque `PJRT_SerializedTopology` handle; only ever used behind a pointer.
#[repr(C)]
pub struct PJRT_SerializedTopology {
    _opaque: [u8; 0],
}

/// Arguments of [`PJRT_TopologyDescription_Serialize`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TopologyDescription_Serialize_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Topology.
    pub topology: *mut PJRT_TopologyDescription,
    /// Out: serialized bytes.
    pub serialized_bytes: *const c_char,
    /// Out: length of `serialized_bytes` in bytes or elements.
    pub serialized_bytes_size: usize,
    /// Out: serialized topology.
    pub serialized_topology: *mut PJRT_SerializedTopology,
    /// Out: serialized topology deleter callback (may be null).
    pub serialized_topology_deleter:
        Option<unsafe extern "C" fn(serialized_topology: *mut PJRT_SerializedTopology)>,
}

struct_size!(PJRT_TopologyDescription_Serialize_Args_STRUCT_SIZE = PJRT_TopologyDescription_Serialize_Args, serialized_topology_deleter: Option<unsafe extern "C" fn(serialized_topology: *mut PJRT_SerializedTopology)>);

/// Signature of the `PJRT_TopologyDescription_Serialize` entry; takes [`PJRT_TopologyDescription_Serialize_Args`].
pub type PJRT_TopologyDescription_Serialize =
    unsafe extern "C" fn(args: *mut PJRT_TopologyDescription_Serialize_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TopologyDescription_Deserialize`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TopologyDescription_Deserialize_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Serialized topology.
    pub serialized_topology: *const c_char,
    /// Length of `serialized_topology` in bytes or elements.
    pub serialized_topology_size: usize,
    /// Out: topology.
    pub topology: *mut PJRT_TopologyDescription,
}

struct_size!(PJRT_TopologyDescription_Deserialize_Args_STRUCT_SIZE = PJRT_TopologyDescription_Deserialize_Args, topology: *mut PJRT_TopologyDescription);

/// Signature of the `PJRT_TopologyDescription_Deserialize` entry; takes [`PJRT_TopologyDescription_Deserialize_Args`].
pub type PJRT_TopologyDescription_Deserialize =
    unsafe extern "C" fn(args: *mut PJRT_TopologyDescription_Deserialize_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TopologyDescription_Attributes`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TopologyDescription_Attributes_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Topology.
    pub topology: *mut PJRT_TopologyDescription,
    /// Out: attributes.
    pub attributes: *const PJRT_NamedValue,
    /// Out: number of entries in `attributes`.
    pub num_attributes: usize,
}

struct_size!(PJRT_TopologyDescription_Attributes_Args_STRUCT_SIZE = PJRT_TopologyDescription_Attributes_Args, num_attributes: usize);

/// Signature of the `PJRT_TopologyDescription_Attributes` entry; takes [`PJRT_TopologyDescription_Attributes_Args`].
pub type PJRT_TopologyDescription_Attributes =
    unsafe extern "C" fn(args: *mut PJRT_TopologyDescription_Attributes_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TopologyDescription_Fingerprint`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TopologyDescription_Fingerprint_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Topology.
    pub topology: *const PJRT_TopologyDescription,
    /// Out: fingerprint.
    pub fingerprint: u64,
}

struct_size!(PJRT_TopologyDescription_Fingerprint_Args_STRUCT_SIZE = PJRT_TopologyDescription_Fingerprint_Args, fingerprint: u64);

/// Signature of the `PJRT_TopologyDescription_Fingerprint` entry; takes [`PJRT_TopologyDescription_Fingerprint_Args`].
pub type PJRT_TopologyDescription_Fingerprint =
    unsafe extern "C" fn(args: *mut PJRT_TopologyDescription_Fingerprint_Args) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Topology.
    pub topology: *const PJRT_TopologyDescription,
    /// Memory space kind id.
    pub memory_space_kind_id: c_int,
    /// Dims.
    pub dims: *const i64,
    /// Number of entries in `dims`.
    pub num_dims: usize,
    /// Element type.
    pub element_type: PJRT_Buffer_Type,
    /// Layout.
    pub layout: *const PJRT_Buffer_MemoryLayout,
    /// Out: serialized shape.
    pub serialized_shape: *const c_char,
    /// Out: length of `serialized_shape` in bytes or elements.
    pub serialized_shape_size: usize,
    /// Out: serialized shape deleter callback (may be null).
    pub serialized_shape_deleter: Option<unsafe extern "C" fn(arg0: *const c_char)>,
}

struct_size!(PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args_STRUCT_SIZE = PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args, serialized_shape_deleter: Option<unsafe extern "C" fn(arg0: *const c_char)>);

/// Signature of the `PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace` entry; takes [`PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args`].
pub type PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace =
    unsafe extern "C" fn(
        args: *mut PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args,
    ) -> *mut PJRT_Error;

/// Arguments of [`PJRT_TopologyDescription_GetMemorySpaceKindIds`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_TopologyDescription_GetMemorySpaceKindIds_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Topology.
    pub topology: *const PJRT_TopologyDescription,
    /// Out: memory space kind ids.
    pub memory_space_kind_ids: *const c_int,
    /// Out: number of entries in `memory_space_kind_ids`.
    pub num_memory_space_kind_ids: usize,
}

struct_size!(PJRT_TopologyDescription_GetMemorySpaceKindIds_Args_STRUCT_SIZE = PJRT_TopologyDescription_GetMemorySpaceKindIds_Args, num_memory_space_kind_ids: usize);

/// Signature of the `PJRT_TopologyDescription_GetMemorySpaceKindIds` entry; takes [`PJRT_TopologyDescription_GetMemorySpaceKindIds_Args`].
pub type PJRT_TopologyDescription_GetMemorySpaceKindIds = unsafe extern "C" fn(
    args: *mut PJRT_TopologyDescription_GetMemorySpaceKindIds_Args,
) -> *mut PJRT_Error;

/// Arguments of [`PJRT_Compile`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Compile_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Topology.
    pub topology: *const PJRT_TopologyDescription,
    /// Program.
    pub program: *const PJRT_Program,
    /// Compile options.
    pub compile_options: *const c_char,
    /// Length of `compile_options` in bytes or elements.
    pub compile_options_size: usize,
    /// Client.
    pub client: *mut PJRT_Client,
    /// Out: executable.
    pub executable: *mut PJRT_Executable,
}

struct_size!(PJRT_Compile_Args_STRUCT_SIZE = PJRT_Compile_Args, executable: *mut PJRT_Executable);

/// Signature of the `PJRT_Compile` entry; takes [`PJRT_Compile_Args`].
pub type PJRT_Compile = unsafe extern "C" fn(args: *mut PJRT_Compile_Args) -> *mut PJRT_Error;

/// The function table a plugin returns from `GetPjrtApi`. Function `i` sits at byte `40 + 8*i`; only slots below `struct_size` exist in a given plugin.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PJRT_Api {
    /// Size of the table as the plugin knows it; slots past it must not be read.
    pub struct_size: usize,
    /// Head of the plugin's extension chain, or null.
    pub extension_start: *mut PJRT_Extension_Base,
    /// Version the plugin implements.
    pub pjrt_api_version: PJRT_Api_Version,
    /// Slot 0 (since 0.57): [`PJRT_Error_Destroy`].
    pub PJRT_Error_Destroy: Option<PJRT_Error_Destroy>,
    /// Slot 1 (since 0.57): [`PJRT_Error_Message`].
    pub PJRT_Error_Message: Option<PJRT_Error_Message>,
    /// Slot 2 (since 0.57): [`PJRT_Error_GetCode`].
    pub PJRT_Error_GetCode: Option<PJRT_Error_GetCode>,
    /// Slot 3 (since 0.57): [`PJRT_Plugin_Initialize`].
    pub PJRT_Plugin_Initialize: Option<PJRT_Plugin_Initialize>,
    /// Slot 4 (since 0.57): [`PJRT_Plugin_Attributes`].
    pub PJRT_Plugin_Attributes: Option<PJRT_Plugin_Attributes>,
    /// Slot 5 (since 0.57): [`PJRT_Event_Destroy`].
    pub PJRT_Event_Destroy: Option<PJRT_Event_Destroy>,
    /// Slot 6 (since 0.57): [`PJRT_Event_IsReady`].
    pub PJRT_Event_IsReady: Option<PJRT_Event_IsReady>,
    /// Slot 7 (since 0.57): [`PJRT_Event_Error`].
    pub PJRT_Event_Error: Option<PJRT_Event_Error>,
    /// Slot 8 (since 0.57): [`PJRT_Event_Await`].
    pub PJRT_Event_Await: Option<PJRT_Event_Await>,
    /// Slot 9 (since 0.57): [`PJRT_Event_OnReady`].
    pub PJRT_Event_OnReady: Option<PJRT_Event_OnReady>,
    /// Slot 10 (since 0.57): [`PJRT_Client_Create`].
    pub PJRT_Client_Create: Option<PJRT_Client_Create>,
    /// Slot 11 (since 0.57): [`PJRT_Client_Destroy`].
    pub PJRT_Client_Destroy: Option<PJRT_Client_Destroy>,
    /// Slot 12 (since 0.57): [`PJRT_Client_PlatformName`].
    pub PJRT_Client_PlatformName: Option<PJRT_Client_PlatformName>,
    /// Slot 13 (since 0.57): [`PJRT_Client_ProcessIndex`].
    pub PJRT_Client_ProcessIndex: Option<PJRT_Client_ProcessIndex>,
    /// Slot 14 (since 0.57): [`PJRT_Client_PlatformVersion`].
    pub PJRT_Client_PlatformVersion: Option<PJRT_Client_PlatformVersion>,
    /// Slot 15 (since 0.57): [`PJRT_Client_Devices`].
    pub PJRT_Client_Devices: Option<PJRT_Client_Devices>,
    /// Slot 16 (since 0.57): [`PJRT_Client_AddressableDevices`].
    pub PJRT_Client_AddressableDevices: Option<PJRT_Client_AddressableDevices>,
    /// Slot 17 (since 0.57): [`PJRT_Client_LookupDevice`].
    pub PJRT_Client_LookupDevice: Option<PJRT_Client_LookupDevice>,
    /// Slot 18 (since 0.57): [`PJRT_Client_LookupAddressableDevice`].
    pub PJRT_Client_LookupAddressableDevice: Option<PJRT_Client_LookupAddressableDevice>,
    /// Slot 19 (since 0.57): [`PJRT_Client_AddressableMemories`].
    pub PJRT_Client_AddressableMemories: Option<PJRT_Client_AddressableMemories>,
    /// Slot 20 (since 0.57): [`PJRT_Client_Compile`].
    pub PJRT_Client_Compile: Option<PJRT_Client_Compile>,
    /// Slot 21 (since 0.57): [`PJRT_Client_DefaultDeviceAssignment`].
    pub PJRT_Client_DefaultDeviceAssignment: Option<PJRT_Client_DefaultDeviceAssignment>,
    /// Slot 22 (since 0.57): [`PJRT_Client_BufferFromHostBuffer`].
    pub PJRT_Client_BufferFromHostBuffer: Option<PJRT_Client_BufferFromHostBuffer>,
    /// Slot 23 (since 0.57): [`PJRT_DeviceDescription_Id`].
    pub PJRT_DeviceDescription_Id: Option<PJRT_DeviceDescription_Id>,
    /// Slot 24 (since 0.57): [`PJRT_DeviceDescription_ProcessIndex`].
    pub PJRT_DeviceDescription_ProcessIndex: Option<PJRT_DeviceDescription_ProcessIndex>,
    /// Slot 25 (since 0.57): [`PJRT_DeviceDescription_Attributes`].
    pub PJRT_DeviceDescription_Attributes: Option<PJRT_DeviceDescription_Attributes>,
    /// Slot 26 (since 0.57): [`PJRT_DeviceDescription_Kind`].
    pub PJRT_DeviceDescription_Kind: Option<PJRT_DeviceDescription_Kind>,
    /// Slot 27 (since 0.57): [`PJRT_DeviceDescription_DebugString`].
    pub PJRT_DeviceDescription_DebugString: Option<PJRT_DeviceDescription_DebugString>,
    /// Slot 28 (since 0.57): [`PJRT_DeviceDescription_ToString`].
    pub PJRT_DeviceDescription_ToString: Option<PJRT_DeviceDescription_ToString>,
    /// Slot 29 (since 0.57): [`PJRT_Device_GetDescription`].
    pub PJRT_Device_GetDescription: Option<PJRT_Device_GetDescription>,
    /// Slot 30 (since 0.57): [`PJRT_Device_IsAddressable`].
    pub PJRT_Device_IsAddressable: Option<PJRT_Device_IsAddressable>,
    /// Slot 31 (since 0.57): [`PJRT_Device_LocalHardwareId`].
    pub PJRT_Device_LocalHardwareId: Option<PJRT_Device_LocalHardwareId>,
    /// Slot 32 (since 0.57): [`PJRT_Device_AddressableMemories`].
    pub PJRT_Device_AddressableMemories: Option<PJRT_Device_AddressableMemories>,
    /// Slot 33 (since 0.57): [`PJRT_Device_DefaultMemory`].
    pub PJRT_Device_DefaultMemory: Option<PJRT_Device_DefaultMemory>,
    /// Slot 34 (since 0.57): [`PJRT_Device_MemoryStats`].
    pub PJRT_Device_MemoryStats: Option<PJRT_Device_MemoryStats>,
    /// Slot 35 (since 0.57): [`PJRT_Memory_Id`].
    pub PJRT_Memory_Id: Option<PJRT_Memory_Id>,
    /// Slot 36 (since 0.57): [`PJRT_Memory_Kind`].
    pub PJRT_Memory_Kind: Option<PJRT_Memory_Kind>,
    /// Slot 37 (since 0.57): [`PJRT_Memory_DebugString`].
    pub PJRT_Memory_DebugString: Option<PJRT_Memory_DebugString>,
    /// Slot 38 (since 0.57): [`PJRT_Memory_ToString`].
    pub PJRT_Memory_ToString: Option<PJRT_Memory_ToString>,
    /// Slot 39 (since 0.57): [`PJRT_Memory_AddressableByDevices`].
    pub PJRT_Memory_AddressableByDevices: Option<PJRT_Memory_AddressableByDevices>,
    /// Slot 40 (since 0.57): [`PJRT_Executable_Destroy`].
    pub PJRT_Executable_Destroy: Option<PJRT_Executable_Destroy>,
    /// Slot 41 (since 0.57): [`PJRT_Executable_Name`].
    pub PJRT_Executable_Name: Option<PJRT_Executable_Name>,
    /// Slot 42 (since 0.57): [`PJRT_Executable_NumReplicas`].
    pub PJRT_Executable_NumReplicas: Option<PJRT_Executable_NumReplicas>,
    /// Slot 43 (since 0.57): [`PJRT_Executable_NumPartitions`].
    pub PJRT_Executable_NumPartitions: Option<PJRT_Executable_NumPartitions>,
    /// Slot 44 (since 0.57): [`PJRT_Executable_NumOutputs`].
    pub PJRT_Executable_NumOutputs: Option<PJRT_Executable_NumOutputs>,
    /// Slot 45 (since 0.57): [`PJRT_Executable_SizeOfGeneratedCodeInBytes`].
    pub PJRT_Executable_SizeOfGeneratedCodeInBytes:
        Option<PJRT_Executable_SizeOfGeneratedCodeInBytes>,
    /// Slot 46 (since 0.57): [`PJRT_Executable_GetCostAnalysis`].
    pub PJRT_Executable_GetCostAnalysis: Option<PJRT_Executable_GetCostAnalysis>,
    /// Slot 47 (since 0.57): [`PJRT_Executable_OutputMemoryKinds`].
    pub PJRT_Executable_OutputMemoryKinds: Option<PJRT_Executable_OutputMemoryKinds>,
    /// Slot 48 (since 0.57): [`PJRT_Executable_OptimizedProgram`].
    pub PJRT_Executable_OptimizedProgram: Option<PJRT_Executable_OptimizedProgram>,
    /// Slot 49 (since 0.57): [`PJRT_Executable_Serialize`].
    pub PJRT_Executable_Serialize: Option<PJRT_Executable_Serialize>,
    /// Slot 50 (since 0.57): [`PJRT_LoadedExecutable_Destroy`].
    pub PJRT_LoadedExecutable_Destroy: Option<PJRT_LoadedExecutable_Destroy>,
    /// Slot 51 (since 0.57): [`PJRT_LoadedExecutable_GetExecutable`].
    pub PJRT_LoadedExecutable_GetExecutable: Option<PJRT_LoadedExecutable_GetExecutable>,
    /// Slot 52 (since 0.57): [`PJRT_LoadedExecutable_AddressableDevices`].
    pub PJRT_LoadedExecutable_AddressableDevices: Option<PJRT_LoadedExecutable_AddressableDevices>,
    /// Slot 53 (since 0.57): [`PJRT_LoadedExecutable_Delete`].
    pub PJRT_LoadedExecutable_Delete: Option<PJRT_LoadedExecutable_Delete>,
    /// Slot 54 (since 0.57): [`PJRT_LoadedExecutable_IsDeleted`].
    pub PJRT_LoadedExecutable_IsDeleted: Option<PJRT_LoadedExecutable_IsDeleted>,
    /// Slot 55 (since 0.57): [`PJRT_LoadedExecutable_Execute`].
    pub PJRT_LoadedExecutable_Execute: Option<PJRT_LoadedExecutable_Execute>,
    /// Slot 56 (since 0.57): [`PJRT_Executable_DeserializeAndLoad`].
    pub PJRT_Executable_DeserializeAndLoad: Option<PJRT_Executable_DeserializeAndLoad>,
    /// Slot 57 (since 0.57): [`PJRT_LoadedExecutable_Fingerprint`].
    pub PJRT_LoadedExecutable_Fingerprint: Option<PJRT_LoadedExecutable_Fingerprint>,
    /// Slot 58 (since 0.57): [`PJRT_Buffer_Destroy`].
    pub PJRT_Buffer_Destroy: Option<PJRT_Buffer_Destroy>,
    /// Slot 59 (since 0.57): [`PJRT_Buffer_ElementType`].
    pub PJRT_Buffer_ElementType: Option<PJRT_Buffer_ElementType>,
    /// Slot 60 (since 0.57): [`PJRT_Buffer_Dimensions`].
    pub PJRT_Buffer_Dimensions: Option<PJRT_Buffer_Dimensions>,
    /// Slot 61 (since 0.57): [`PJRT_Buffer_UnpaddedDimensions`].
    pub PJRT_Buffer_UnpaddedDimensions: Option<PJRT_Buffer_UnpaddedDimensions>,
    /// Slot 62 (since 0.57): [`PJRT_Buffer_DynamicDimensionIndices`].
    pub PJRT_Buffer_DynamicDimensionIndices: Option<PJRT_Buffer_DynamicDimensionIndices>,
    /// Slot 63 (since 0.57): [`PJRT_Buffer_GetMemoryLayout`].
    pub PJRT_Buffer_GetMemoryLayout: Option<PJRT_Buffer_GetMemoryLayout>,
    /// Slot 64 (since 0.57): [`PJRT_Buffer_OnDeviceSizeInBytes`].
    pub PJRT_Buffer_OnDeviceSizeInBytes: Option<PJRT_Buffer_OnDeviceSizeInBytes>,
    /// Slot 65 (since 0.57): [`PJRT_Buffer_Device`].
    pub PJRT_Buffer_Device: Option<PJRT_Buffer_Device>,
    /// Slot 66 (since 0.57): [`PJRT_Buffer_Memory`].
    pub PJRT_Buffer_Memory: Option<PJRT_Buffer_Memory>,
    /// Slot 67 (since 0.57): [`PJRT_Buffer_Delete`].
    pub PJRT_Buffer_Delete: Option<PJRT_Buffer_Delete>,
    /// Slot 68 (since 0.57): [`PJRT_Buffer_IsDeleted`].
    pub PJRT_Buffer_IsDeleted: Option<PJRT_Buffer_IsDeleted>,
    /// Slot 69 (since 0.57): [`PJRT_Buffer_CopyToDevice`].
    pub PJRT_Buffer_CopyToDevice: Option<PJRT_Buffer_CopyToDevice>,
    /// Slot 70 (since 0.57): [`PJRT_Buffer_ToHostBuffer`].
    pub PJRT_Buffer_ToHostBuffer: Option<PJRT_Buffer_ToHostBuffer>,
    /// Slot 71 (since 0.57): [`PJRT_Buffer_IsOnCpu`].
    pub PJRT_Buffer_IsOnCpu: Option<PJRT_Buffer_IsOnCpu>,
    /// Slot 72 (since 0.57): [`PJRT_Buffer_ReadyEvent`].
    pub PJRT_Buffer_ReadyEvent: Option<PJRT_Buffer_ReadyEvent>,
    /// Slot 73 (since 0.57): [`PJRT_Buffer_UnsafePointer`].
    pub PJRT_Buffer_UnsafePointer: Option<PJRT_Buffer_UnsafePointer>,
    /// Slot 74 (since 0.57): [`PJRT_Buffer_IncreaseExternalReferenceCount`].
    pub PJRT_Buffer_IncreaseExternalReferenceCount:
        Option<PJRT_Buffer_IncreaseExternalReferenceCount>,
    /// Slot 75 (since 0.57): [`PJRT_Buffer_DecreaseExternalReferenceCount`].
    pub PJRT_Buffer_DecreaseExternalReferenceCount:
        Option<PJRT_Buffer_DecreaseExternalReferenceCount>,
    /// Slot 76 (since 0.57): [`PJRT_Buffer_OpaqueDeviceMemoryDataPointer`].
    pub PJRT_Buffer_OpaqueDeviceMemoryDataPointer:
        Option<PJRT_Buffer_OpaqueDeviceMemoryDataPointer>,
    /// Slot 77 (since 0.57): [`PJRT_CopyToDeviceStream_Destroy`].
    pub PJRT_CopyToDeviceStream_Destroy: Option<PJRT_CopyToDeviceStream_Destroy>,
    /// Slot 78 (since 0.57): [`PJRT_CopyToDeviceStream_AddChunk`].
    pub PJRT_CopyToDeviceStream_AddChunk: Option<PJRT_CopyToDeviceStream_AddChunk>,
    /// Slot 79 (since 0.57): [`PJRT_CopyToDeviceStream_TotalBytes`].
    pub PJRT_CopyToDeviceStream_TotalBytes: Option<PJRT_CopyToDeviceStream_TotalBytes>,
    /// Slot 80 (since 0.57): [`PJRT_CopyToDeviceStream_GranuleSize`].
    pub PJRT_CopyToDeviceStream_GranuleSize: Option<PJRT_CopyToDeviceStream_GranuleSize>,
    /// Slot 81 (since 0.57): [`PJRT_CopyToDeviceStream_CurrentBytes`].
    pub PJRT_CopyToDeviceStream_CurrentBytes: Option<PJRT_CopyToDeviceStream_CurrentBytes>,
    /// Slot 82 (since 0.57): [`PJRT_TopologyDescription_Create`].
    pub PJRT_TopologyDescription_Create: Option<PJRT_TopologyDescription_Create>,
    /// Slot 83 (since 0.57): [`PJRT_TopologyDescription_Destroy`].
    pub PJRT_TopologyDescription_Destroy: Option<PJRT_TopologyDescription_Destroy>,
    /// Slot 84 (since 0.57): [`PJRT_TopologyDescription_PlatformName`].
    pub PJRT_TopologyDescription_PlatformName: Option<PJRT_TopologyDescription_PlatformName>,
    /// Slot 85 (since 0.57): [`PJRT_TopologyDescription_PlatformVersion`].
    pub PJRT_TopologyDescription_PlatformVersion: Option<PJRT_TopologyDescription_PlatformVersion>,
    /// Slot 86 (since 0.57): [`PJRT_TopologyDescription_GetDeviceDescriptions`].
    pub PJRT_TopologyDescription_GetDeviceDescriptions:
        Option<PJRT_TopologyDescription_GetDeviceDescriptions>,
    /// Slot 87 (since 0.57): [`PJRT_TopologyDescription_Serialize`].
    pub PJRT_TopologyDescription_Serialize: Option<PJRT_TopologyDescription_Serialize>,
    /// Slot 88 (since 0.57): [`PJRT_TopologyDescription_Attributes`].
    pub PJRT_TopologyDescription_Attributes: Option<PJRT_TopologyDescription_Attributes>,
    /// Slot 89 (since 0.57): [`PJRT_Compile`].
    pub PJRT_Compile: Option<PJRT_Compile>,
    /// Slot 90 (since 0.57): [`PJRT_Executable_OutputElementTypes`].
    pub PJRT_Executable_OutputElementTypes: Option<PJRT_Executable_OutputElementTypes>,
    /// Slot 91 (since 0.57): [`PJRT_Executable_OutputDimensions`].
    pub PJRT_Executable_OutputDimensions: Option<PJRT_Executable_OutputDimensions>,
    /// Slot 92 (since 0.57): [`PJRT_Buffer_CopyToMemory`].
    pub PJRT_Buffer_CopyToMemory: Option<PJRT_Buffer_CopyToMemory>,
    /// Slot 93 (since 0.57): [`PJRT_Client_CreateViewOfDeviceBuffer`].
    pub PJRT_Client_CreateViewOfDeviceBuffer: Option<PJRT_Client_CreateViewOfDeviceBuffer>,
    /// Slot 94 (since 0.57): [`PJRT_Executable_Fingerprint`].
    pub PJRT_Executable_Fingerprint: Option<PJRT_Executable_Fingerprint>,
    /// Slot 95 (since 0.57): [`PJRT_Client_TopologyDescription`].
    pub PJRT_Client_TopologyDescription: Option<PJRT_Client_TopologyDescription>,
    /// Slot 96 (since 0.57): [`PJRT_Executable_GetCompiledMemoryStats`].
    pub PJRT_Executable_GetCompiledMemoryStats: Option<PJRT_Executable_GetCompiledMemoryStats>,
    /// Slot 97 (since 0.57): [`PJRT_Memory_Kind_Id`].
    pub PJRT_Memory_Kind_Id: Option<PJRT_Memory_Kind_Id>,
    /// Slot 98 (since 0.57): [`PJRT_ExecuteContext_Create`].
    pub PJRT_ExecuteContext_Create: Option<PJRT_ExecuteContext_Create>,
    /// Slot 99 (since 0.57): [`PJRT_ExecuteContext_Destroy`].
    pub PJRT_ExecuteContext_Destroy: Option<PJRT_ExecuteContext_Destroy>,
    /// Slot 100 (since 0.57): [`PJRT_Buffer_CopyRawToHost`].
    pub PJRT_Buffer_CopyRawToHost: Option<PJRT_Buffer_CopyRawToHost>,
    /// Slot 101 (since 0.60): [`PJRT_AsyncHostToDeviceTransferManager_Destroy`].
    pub PJRT_AsyncHostToDeviceTransferManager_Destroy:
        Option<PJRT_AsyncHostToDeviceTransferManager_Destroy>,
    /// Slot 102 (since 0.60): [`PJRT_AsyncHostToDeviceTransferManager_TransferData`].
    pub PJRT_AsyncHostToDeviceTransferManager_TransferData:
        Option<PJRT_AsyncHostToDeviceTransferManager_TransferData>,
    /// Slot 103 (since 0.60): [`PJRT_Client_CreateBuffersForAsyncHostToDevice`].
    pub PJRT_Client_CreateBuffersForAsyncHostToDevice:
        Option<PJRT_Client_CreateBuffersForAsyncHostToDevice>,
    /// Slot 104 (since 0.62): [`PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer`].
    pub PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer:
        Option<PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer>,
    /// Slot 105 (since 0.62): [`PJRT_AsyncHostToDeviceTransferManager_Device`].
    pub PJRT_AsyncHostToDeviceTransferManager_Device:
        Option<PJRT_AsyncHostToDeviceTransferManager_Device>,
    /// Slot 106 (since 0.62): [`PJRT_AsyncHostToDeviceTransferManager_BufferCount`].
    pub PJRT_AsyncHostToDeviceTransferManager_BufferCount:
        Option<PJRT_AsyncHostToDeviceTransferManager_BufferCount>,
    /// Slot 107 (since 0.62): [`PJRT_AsyncHostToDeviceTransferManager_BufferSize`].
    pub PJRT_AsyncHostToDeviceTransferManager_BufferSize:
        Option<PJRT_AsyncHostToDeviceTransferManager_BufferSize>,
    /// Slot 108 (since 0.62): [`PJRT_AsyncHostToDeviceTransferManager_SetBufferError`].
    pub PJRT_AsyncHostToDeviceTransferManager_SetBufferError:
        Option<PJRT_AsyncHostToDeviceTransferManager_SetBufferError>,
    /// Slot 109 (since 0.62): [`PJRT_AsyncHostToDeviceTransferManager_AddMetadata`].
    pub PJRT_AsyncHostToDeviceTransferManager_AddMetadata:
        Option<PJRT_AsyncHostToDeviceTransferManager_AddMetadata>,
    /// Slot 110 (since 0.67): [`PJRT_Client_DmaMap`].
    pub PJRT_Client_DmaMap: Option<PJRT_Client_DmaMap>,
    /// Slot 111 (since 0.67): [`PJRT_Client_DmaUnmap`].
    pub PJRT_Client_DmaUnmap: Option<PJRT_Client_DmaUnmap>,
    /// Slot 112 (since 0.69): [`PJRT_Client_CreateUninitializedBuffer`].
    pub PJRT_Client_CreateUninitializedBuffer: Option<PJRT_Client_CreateUninitializedBuffer>,
    /// Slot 113 (since 0.73): [`PJRT_Client_UpdateGlobalProcessInfo`].
    pub PJRT_Client_UpdateGlobalProcessInfo: Option<PJRT_Client_UpdateGlobalProcessInfo>,
    /// Slot 114 (since 0.75): [`PJRT_TopologyDescription_Deserialize`].
    pub PJRT_TopologyDescription_Deserialize: Option<PJRT_TopologyDescription_Deserialize>,
    /// Slot 115 (since 0.77): [`PJRT_Client_CreateAliasBuffer`].
    pub PJRT_Client_CreateAliasBuffer: Option<PJRT_Client_CreateAliasBuffer>,
    /// Slot 116 (since 0.77): [`PJRT_Client_FulfillAliasBuffer`].
    pub PJRT_Client_FulfillAliasBuffer: Option<PJRT_Client_FulfillAliasBuffer>,
    /// Slot 117 (since 0.79): [`PJRT_LoadedExecutable_GetDeviceAssignment`].
    pub PJRT_LoadedExecutable_GetDeviceAssignment:
        Option<PJRT_LoadedExecutable_GetDeviceAssignment>,
    /// Slot 118 (since 0.82): [`PJRT_Client_CreateErrorBuffer`].
    pub PJRT_Client_CreateErrorBuffer: Option<PJRT_Client_CreateErrorBuffer>,
    /// Slot 119 (since 0.83): [`PJRT_AsyncHostToDeviceTransferManager_TransferLiteral`].
    pub PJRT_AsyncHostToDeviceTransferManager_TransferLiteral:
        Option<PJRT_AsyncHostToDeviceTransferManager_TransferLiteral>,
    /// Slot 120 (since 0.84): [`PJRT_Buffer_CopyRawToHostFuture`].
    pub PJRT_Buffer_CopyRawToHostFuture: Option<PJRT_Buffer_CopyRawToHostFuture>,
    /// Slot 121 (since 0.85): [`PJRT_Device_PoisonExecution`].
    pub PJRT_Device_PoisonExecution: Option<PJRT_Device_PoisonExecution>,
    /// Slot 122 (since 0.86): [`PJRT_Device_CreateAsyncTrackingEvent`].
    pub PJRT_Device_CreateAsyncTrackingEvent: Option<PJRT_Device_CreateAsyncTrackingEvent>,
    /// Slot 123 (since 0.86): [`PJRT_AsyncTrackingEvent_Destroy`].
    pub PJRT_AsyncTrackingEvent_Destroy: Option<PJRT_AsyncTrackingEvent_Destroy>,
    /// Slot 124 (since 0.87): [`PJRT_Executable_GetCompileOptions`].
    pub PJRT_Executable_GetCompileOptions: Option<PJRT_Executable_GetCompileOptions>,
    /// Slot 125 (since 0.88): [`PJRT_Buffer_DonateWithControlDependency`].
    pub PJRT_Buffer_DonateWithControlDependency: Option<PJRT_Buffer_DonateWithControlDependency>,
    /// Slot 126 (since 0.89): [`PJRT_Event_Create`].
    pub PJRT_Event_Create: Option<PJRT_Event_Create>,
    /// Slot 127 (since 0.89): [`PJRT_Event_Set`].
    pub PJRT_Event_Set: Option<PJRT_Event_Set>,
    /// Slot 128 (since 0.92): [`PJRT_Device_GetAttributes`].
    pub PJRT_Device_GetAttributes: Option<PJRT_Device_GetAttributes>,
    /// Slot 129 (since 0.95): [`PJRT_Client_Load`].
    pub PJRT_Client_Load: Option<PJRT_Client_Load>,
    /// Slot 130 (since 0.96): [`PJRT_LoadedExecutable_AddressableDeviceLogicalIds`].
    pub PJRT_LoadedExecutable_AddressableDeviceLogicalIds:
        Option<PJRT_LoadedExecutable_AddressableDeviceLogicalIds>,
    /// Slot 131 (since 0.98): [`PJRT_Buffer_Bitcast`].
    pub PJRT_Buffer_Bitcast: Option<PJRT_Buffer_Bitcast>,
    /// Slot 132 (since 0.99): [`PJRT_Error_ForEachPayload`].
    pub PJRT_Error_ForEachPayload: Option<PJRT_Error_ForEachPayload>,
    /// Slot 133 (since 0.101): [`PJRT_TopologyDescription_Fingerprint`].
    pub PJRT_TopologyDescription_Fingerprint: Option<PJRT_TopologyDescription_Fingerprint>,
    /// Slot 134 (since 0.102): [`PJRT_Executable_ParameterMemoryKinds`].
    pub PJRT_Executable_ParameterMemoryKinds: Option<PJRT_Executable_ParameterMemoryKinds>,
    /// Slot 135 (since 0.106): [`PJRT_Device_ClearMemoryStats`].
    pub PJRT_Device_ClearMemoryStats: Option<PJRT_Device_ClearMemoryStats>,
    /// Slot 136 (since 0.109): [`PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace`].
    pub PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace:
        Option<PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace>,
    /// Slot 137 (since 0.110): [`PJRT_TopologyDescription_GetMemorySpaceKindIds`].
    pub PJRT_TopologyDescription_GetMemorySpaceKindIds:
        Option<PJRT_TopologyDescription_GetMemorySpaceKindIds>,
}

struct_size!(PJRT_Api_STRUCT_SIZE = PJRT_Api, PJRT_TopologyDescription_GetMemorySpaceKindIds: Option<PJRT_TopologyDescription_GetMemorySpaceKindIds>);

/// One slot of [`PJRT_Api`]: its C name and the minor version that added it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PjrtEntry {
    /// C name of the entry (also the field name in [`PJRT_Api`]).
    pub name: &'static str,
    /// PJRT minor version that introduced the entry at this slot.
    pub since_minor: u32,
}

/// Every [`PJRT_Api`] slot in order; slot `i` is at byte `40 + 8*i`.
///
/// Provenance of `since_minor`: 57 is the floor (the table was reordered at
/// 0.56/0.57, so every entry present at 0.57 is recorded as 57, even those
/// added earlier). Slots 101-117 were dated from the header history of the
/// `zml/xla` fork (the commit where each slot first appeared at its final
/// position, cross-checked with the upstream changelog); slots 118-137 come
/// from the upstream changelog (0.82-0.110). A 0.81 plugin has 118 slots.
pub const PJRT_API_ENTRIES: [PjrtEntry; 138] = [
    PjrtEntry {
        name: "PJRT_Error_Destroy",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Error_Message",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Error_GetCode",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Plugin_Initialize",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Plugin_Attributes",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Event_Destroy",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Event_IsReady",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Event_Error",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Event_Await",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Event_OnReady",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Client_Create",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Client_Destroy",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Client_PlatformName",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Client_ProcessIndex",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Client_PlatformVersion",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Client_Devices",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Client_AddressableDevices",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Client_LookupDevice",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Client_LookupAddressableDevice",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Client_AddressableMemories",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Client_Compile",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Client_DefaultDeviceAssignment",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Client_BufferFromHostBuffer",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_DeviceDescription_Id",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_DeviceDescription_ProcessIndex",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_DeviceDescription_Attributes",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_DeviceDescription_Kind",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_DeviceDescription_DebugString",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_DeviceDescription_ToString",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Device_GetDescription",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Device_IsAddressable",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Device_LocalHardwareId",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Device_AddressableMemories",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Device_DefaultMemory",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Device_MemoryStats",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Memory_Id",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Memory_Kind",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Memory_DebugString",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Memory_ToString",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Memory_AddressableByDevices",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Executable_Destroy",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Executable_Name",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Executable_NumReplicas",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Executable_NumPartitions",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Executable_NumOutputs",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Executable_SizeOfGeneratedCodeInBytes",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Executable_GetCostAnalysis",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Executable_OutputMemoryKinds",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Executable_OptimizedProgram",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Executable_Serialize",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_LoadedExecutable_Destroy",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_LoadedExecutable_GetExecutable",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_LoadedExecutable_AddressableDevices",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_LoadedExecutable_Delete",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_LoadedExecutable_IsDeleted",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_LoadedExecutable_Execute",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Executable_DeserializeAndLoad",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_LoadedExecutable_Fingerprint",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_Destroy",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_ElementType",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_Dimensions",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_UnpaddedDimensions",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_DynamicDimensionIndices",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_GetMemoryLayout",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_OnDeviceSizeInBytes",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_Device",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_Memory",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_Delete",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_IsDeleted",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_CopyToDevice",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_ToHostBuffer",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_IsOnCpu",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_ReadyEvent",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_UnsafePointer",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_IncreaseExternalReferenceCount",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_DecreaseExternalReferenceCount",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_OpaqueDeviceMemoryDataPointer",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_CopyToDeviceStream_Destroy",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_CopyToDeviceStream_AddChunk",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_CopyToDeviceStream_TotalBytes",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_CopyToDeviceStream_GranuleSize",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_CopyToDeviceStream_CurrentBytes",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_TopologyDescription_Create",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_TopologyDescription_Destroy",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_TopologyDescription_PlatformName",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_TopologyDescription_PlatformVersion",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_TopologyDescription_GetDeviceDescriptions",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_TopologyDescription_Serialize",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_TopologyDescription_Attributes",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Compile",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Executable_OutputElementTypes",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Executable_OutputDimensions",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_CopyToMemory",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Client_CreateViewOfDeviceBuffer",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Executable_Fingerprint",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Client_TopologyDescription",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Executable_GetCompiledMemoryStats",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Memory_Kind_Id",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_ExecuteContext_Create",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_ExecuteContext_Destroy",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_Buffer_CopyRawToHost",
        since_minor: 57,
    },
    PjrtEntry {
        name: "PJRT_AsyncHostToDeviceTransferManager_Destroy",
        since_minor: 60,
    },
    PjrtEntry {
        name: "PJRT_AsyncHostToDeviceTransferManager_TransferData",
        since_minor: 60,
    },
    PjrtEntry {
        name: "PJRT_Client_CreateBuffersForAsyncHostToDevice",
        since_minor: 60,
    },
    PjrtEntry {
        name: "PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer",
        since_minor: 62,
    },
    PjrtEntry {
        name: "PJRT_AsyncHostToDeviceTransferManager_Device",
        since_minor: 62,
    },
    PjrtEntry {
        name: "PJRT_AsyncHostToDeviceTransferManager_BufferCount",
        since_minor: 62,
    },
    PjrtEntry {
        name: "PJRT_AsyncHostToDeviceTransferManager_BufferSize",
        since_minor: 62,
    },
    PjrtEntry {
        name: "PJRT_AsyncHostToDeviceTransferManager_SetBufferError",
        since_minor: 62,
    },
    PjrtEntry {
        name: "PJRT_AsyncHostToDeviceTransferManager_AddMetadata",
        since_minor: 62,
    },
    PjrtEntry {
        name: "PJRT_Client_DmaMap",
        since_minor: 67,
    },
    PjrtEntry {
        name: "PJRT_Client_DmaUnmap",
        since_minor: 67,
    },
    PjrtEntry {
        name: "PJRT_Client_CreateUninitializedBuffer",
        since_minor: 69,
    },
    PjrtEntry {
        name: "PJRT_Client_UpdateGlobalProcessInfo",
        since_minor: 73,
    },
    PjrtEntry {
        name: "PJRT_TopologyDescription_Deserialize",
        since_minor: 75,
    },
    PjrtEntry {
        name: "PJRT_Client_CreateAliasBuffer",
        since_minor: 77,
    },
    PjrtEntry {
        name: "PJRT_Client_FulfillAliasBuffer",
        since_minor: 77,
    },
    PjrtEntry {
        name: "PJRT_LoadedExecutable_GetDeviceAssignment",
        since_minor: 79,
    },
    PjrtEntry {
        name: "PJRT_Client_CreateErrorBuffer",
        since_minor: 82,
    },
    PjrtEntry {
        name: "PJRT_AsyncHostToDeviceTransferManager_TransferLiteral",
        since_minor: 83,
    },
    PjrtEntry {
        name: "PJRT_Buffer_CopyRawToHostFuture",
        since_minor: 84,
    },
    PjrtEntry {
        name: "PJRT_Device_PoisonExecution",
        since_minor: 85,
    },
    PjrtEntry {
        name: "PJRT_Device_CreateAsyncTrackingEvent",
        since_minor: 86,
    },
    PjrtEntry {
        name: "PJRT_AsyncTrackingEvent_Destroy",
        since_minor: 86,
    },
    PjrtEntry {
        name: "PJRT_Executable_GetCompileOptions",
        since_minor: 87,
    },
    PjrtEntry {
        name: "PJRT_Buffer_DonateWithControlDependency",
        since_minor: 88,
    },
    PjrtEntry {
        name: "PJRT_Event_Create",
        since_minor: 89,
    },
    PjrtEntry {
        name: "PJRT_Event_Set",
        since_minor: 89,
    },
    PjrtEntry {
        name: "PJRT_Device_GetAttributes",
        since_minor: 92,
    },
    PjrtEntry {
        name: "PJRT_Client_Load",
        since_minor: 95,
    },
    PjrtEntry {
        name: "PJRT_LoadedExecutable_AddressableDeviceLogicalIds",
        since_minor: 96,
    },
    PjrtEntry {
        name: "PJRT_Buffer_Bitcast",
        since_minor: 98,
    },
    PjrtEntry {
        name: "PJRT_Error_ForEachPayload",
        since_minor: 99,
    },
    PjrtEntry {
        name: "PJRT_TopologyDescription_Fingerprint",
        since_minor: 101,
    },
    PjrtEntry {
        name: "PJRT_Executable_ParameterMemoryKinds",
        since_minor: 102,
    },
    PjrtEntry {
        name: "PJRT_Device_ClearMemoryStats",
        since_minor: 106,
    },
    PjrtEntry {
        name: "PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace",
        since_minor: 109,
    },
    PjrtEntry {
        name: "PJRT_TopologyDescription_GetMemorySpaceKindIds",
        since_minor: 110,
    },
];
