//! The XLA FFI C API, version 0.3: what a custom-call handler sees.
//!
//! A handler is an [`XLA_FFI_Handler`]; it receives an [`XLA_FFI_CallFrame`]
//! whose `api` points at the runtime's [`XLA_FFI_Api`]. Data type numbers
//! here are XLA's, not PJRT's buffer type numbers.
//!
//! Four header STRUCT_SIZE values stop before the real last field and are kept
//! as the header has them: [`XLA_FFI_CallFrame_STRUCT_SIZE`] (excludes
//! `future`; the runtime demands exactly this value),
//! [`XLA_FFI_Metadata_STRUCT_SIZE`] (excludes `state_type_id`),
//! [`XLA_FFI_Type_Register_Args_STRUCT_SIZE`] (excludes `type_info`) and
//! [`XLA_FFI_Future_Create_Args_STRUCT_SIZE`] (stops at `extension_start`).

use core::ffi::{c_char, c_int, c_void};

/// Major version of the XLA FFI API declared here.
pub const XLA_FFI_API_MAJOR: c_int = 0;

/// Minor version of the XLA FFI API declared here (0.3).
pub const XLA_FFI_API_MINOR: c_int = 3;

/// Opaque XLA-internal function table.
#[repr(C)]
pub struct XLA_FFI_InternalApi {
    _opaque: [u8; 0],
}

/// Tag of an FFI extension struct.
pub type XLA_FFI_Extension_Type = i32;
/// Value `XLA_FFI_Extension_Metadata` of `XLA_FFI_Extension_Type`.
pub const XLA_FFI_Extension_Metadata: XLA_FFI_Extension_Type = 1;

/// Common header of FFI extension structs; they form a linked list.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Extension_Base {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Which extension this is.
    pub r#type: XLA_FFI_Extension_Type,
    /// Next extension in the chain, or null.
    pub next: *mut XLA_FFI_Extension_Base,
}

struct_size!(XLA_FFI_Extension_Base_STRUCT_SIZE = XLA_FFI_Extension_Base, next: *mut XLA_FFI_Extension_Base);

/// An FFI version pair (runtime's in [`XLA_FFI_Api`], handler's in [`XLA_FFI_Metadata`]).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Api_Version {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// Major version.
    pub major_version: c_int,
    /// Minor version.
    pub minor_version: c_int,
}

struct_size!(XLA_FFI_Api_Version_STRUCT_SIZE = XLA_FFI_Api_Version, minor_version: c_int);

/// Opaque error object created by the FFI runtime.
#[repr(C)]
pub struct XLA_FFI_Error {
    _opaque: [u8; 0],
}

/// Status code of an FFI error (absl numbering).
pub type XLA_FFI_Error_Code = i32;
/// Value `OK` of `XLA_FFI_Error_Code`.
pub const XLA_FFI_Error_Code_OK: XLA_FFI_Error_Code = 0;
/// Value `CANCELLED` of `XLA_FFI_Error_Code`.
pub const XLA_FFI_Error_Code_CANCELLED: XLA_FFI_Error_Code = 1;
/// Value `UNKNOWN` of `XLA_FFI_Error_Code`.
pub const XLA_FFI_Error_Code_UNKNOWN: XLA_FFI_Error_Code = 2;
/// Value `INVALID_ARGUMENT` of `XLA_FFI_Error_Code`.
pub const XLA_FFI_Error_Code_INVALID_ARGUMENT: XLA_FFI_Error_Code = 3;
/// Value `DEADLINE_EXCEEDED` of `XLA_FFI_Error_Code`.
pub const XLA_FFI_Error_Code_DEADLINE_EXCEEDED: XLA_FFI_Error_Code = 4;
/// Value `NOT_FOUND` of `XLA_FFI_Error_Code`.
pub const XLA_FFI_Error_Code_NOT_FOUND: XLA_FFI_Error_Code = 5;
/// Value `ALREADY_EXISTS` of `XLA_FFI_Error_Code`.
pub const XLA_FFI_Error_Code_ALREADY_EXISTS: XLA_FFI_Error_Code = 6;
/// Value `PERMISSION_DENIED` of `XLA_FFI_Error_Code`.
pub const XLA_FFI_Error_Code_PERMISSION_DENIED: XLA_FFI_Error_Code = 7;
/// Value `RESOURCE_EXHAUSTED` of `XLA_FFI_Error_Code`.
pub const XLA_FFI_Error_Code_RESOURCE_EXHAUSTED: XLA_FFI_Error_Code = 8;
/// Value `FAILED_PRECONDITION` of `XLA_FFI_Error_Code`.
pub const XLA_FFI_Error_Code_FAILED_PRECONDITION: XLA_FFI_Error_Code = 9;
/// Value `ABORTED` of `XLA_FFI_Error_Code`.
pub const XLA_FFI_Error_Code_ABORTED: XLA_FFI_Error_Code = 10;
/// Value `OUT_OF_RANGE` of `XLA_FFI_Error_Code`.
pub const XLA_FFI_Error_Code_OUT_OF_RANGE: XLA_FFI_Error_Code = 11;
/// Value `UNIMPLEMENTED` of `XLA_FFI_Error_Code`.
pub const XLA_FFI_Error_Code_UNIMPLEMENTED: XLA_FFI_Error_Code = 12;
/// Value `INTERNAL` of `XLA_FFI_Error_Code`.
pub const XLA_FFI_Error_Code_INTERNAL: XLA_FFI_Error_Code = 13;
/// Value `UNAVAILABLE` of `XLA_FFI_Error_Code`.
pub const XLA_FFI_Error_Code_UNAVAILABLE: XLA_FFI_Error_Code = 14;
/// Value `DATA_LOSS` of `XLA_FFI_Error_Code`.
pub const XLA_FFI_Error_Code_DATA_LOSS: XLA_FFI_Error_Code = 15;
/// Value `UNAUTHENTICATED` of `XLA_FFI_Error_Code`.
pub const XLA_FFI_Error_Code_UNAUTHENTICATED: XLA_FFI_Error_Code = 16;

/// Arguments of [`XLA_FFI_Error_Create`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Error_Create_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// NUL-terminated message; copied by the runtime.
    pub message: *const c_char,
    /// Error code.
    pub errc: XLA_FFI_Error_Code,
}

struct_size!(XLA_FFI_Error_Create_Args_STRUCT_SIZE = XLA_FFI_Error_Create_Args, errc: XLA_FFI_Error_Code);

/// Signature of the `XLA_FFI_Error_Create` entry; takes [`XLA_FFI_Error_Create_Args`].
pub type XLA_FFI_Error_Create =
    unsafe extern "C" fn(args: *mut XLA_FFI_Error_Create_Args) -> *mut XLA_FFI_Error;

/// Arguments of [`XLA_FFI_Error_GetMessage`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Error_GetMessage_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// The [`XLA_FFI_Error`] to use.
    pub error: *mut XLA_FFI_Error,
    /// Out: message (C string).
    pub message: *const c_char,
}

struct_size!(XLA_FFI_Error_GetMessage_Args_STRUCT_SIZE = XLA_FFI_Error_GetMessage_Args, message: *const c_char);

/// Signature of the `XLA_FFI_Error_GetMessage` entry; takes [`XLA_FFI_Error_GetMessage_Args`].
pub type XLA_FFI_Error_GetMessage = unsafe extern "C" fn(args: *mut XLA_FFI_Error_GetMessage_Args);

/// Arguments of [`XLA_FFI_Error_Destroy`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Error_Destroy_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// The [`XLA_FFI_Error`] to use.
    pub error: *mut XLA_FFI_Error,
}

struct_size!(XLA_FFI_Error_Destroy_Args_STRUCT_SIZE = XLA_FFI_Error_Destroy_Args, error: *mut XLA_FFI_Error);

/// Signature of the `XLA_FFI_Error_Destroy` entry; takes [`XLA_FFI_Error_Destroy_Args`].
pub type XLA_FFI_Error_Destroy = unsafe extern "C" fn(args: *mut XLA_FFI_Error_Destroy_Args);

/// Element type of an FFI buffer or attribute. Numbering differs from `PJRT_Buffer_Type` (e.g. BF16 is 16 here).
pub type XLA_FFI_DataType = i32;
/// Value `INVALID` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_INVALID: XLA_FFI_DataType = 0;
/// Value `PRED` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_PRED: XLA_FFI_DataType = 1;
/// Value `S1` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_S1: XLA_FFI_DataType = 30;
/// Value `S2` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_S2: XLA_FFI_DataType = 26;
/// Value `S4` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_S4: XLA_FFI_DataType = 21;
/// Value `S8` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_S8: XLA_FFI_DataType = 2;
/// Value `S16` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_S16: XLA_FFI_DataType = 3;
/// Value `S32` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_S32: XLA_FFI_DataType = 4;
/// Value `S64` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_S64: XLA_FFI_DataType = 5;
/// Value `U1` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_U1: XLA_FFI_DataType = 31;
/// Value `U2` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_U2: XLA_FFI_DataType = 27;
/// Value `U4` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_U4: XLA_FFI_DataType = 22;
/// Value `U8` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_U8: XLA_FFI_DataType = 6;
/// Value `U16` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_U16: XLA_FFI_DataType = 7;
/// Value `U32` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_U32: XLA_FFI_DataType = 8;
/// Value `U64` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_U64: XLA_FFI_DataType = 9;
/// Value `F16` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_F16: XLA_FFI_DataType = 10;
/// Value `F32` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_F32: XLA_FFI_DataType = 11;
/// Value `F64` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_F64: XLA_FFI_DataType = 12;
/// Value `BF16` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_BF16: XLA_FFI_DataType = 16;
/// Value `C64` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_C64: XLA_FFI_DataType = 15;
/// Value `C128` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_C128: XLA_FFI_DataType = 18;
/// Value `TOKEN` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_TOKEN: XLA_FFI_DataType = 17;
/// Value `F8E5M2` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_F8E5M2: XLA_FFI_DataType = 19;
/// Value `F8E3M4` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_F8E3M4: XLA_FFI_DataType = 29;
/// Value `F8E4M3` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_F8E4M3: XLA_FFI_DataType = 28;
/// Value `F8E4M3FN` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_F8E4M3FN: XLA_FFI_DataType = 20;
/// Value `F8E4M3B11FNUZ` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_F8E4M3B11FNUZ: XLA_FFI_DataType = 23;
/// Value `F8E5M2FNUZ` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_F8E5M2FNUZ: XLA_FFI_DataType = 24;
/// Value `F8E4M3FNUZ` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_F8E4M3FNUZ: XLA_FFI_DataType = 25;
/// Value `F4E2M1FN` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_F4E2M1FN: XLA_FFI_DataType = 32;
/// Value `F8E8M0FNU` of `XLA_FFI_DataType`.
pub const XLA_FFI_DataType_F8E8M0FNU: XLA_FFI_DataType = 33;

/// A device buffer argument or result of a handler.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Buffer {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// Element type.
    pub dtype: XLA_FFI_DataType,
    /// Pointer to the data.
    pub data: *mut c_void,
    /// Number of dimensions.
    pub rank: i64,
    /// Dimensions, `rank` entries.
    pub dims: *mut i64,
}

struct_size!(XLA_FFI_Buffer_STRUCT_SIZE = XLA_FFI_Buffer, dims: *mut i64);

/// Kind of a handler argument.
pub type XLA_FFI_ArgType = i32;
/// Value `BUFFER` of `XLA_FFI_ArgType`.
pub const XLA_FFI_ArgType_BUFFER: XLA_FFI_ArgType = 1;

/// Kind of a handler result.
pub type XLA_FFI_RetType = i32;
/// Value `BUFFER` of `XLA_FFI_RetType`.
pub const XLA_FFI_RetType_BUFFER: XLA_FFI_RetType = 1;

/// Kind of a handler attribute.
pub type XLA_FFI_AttrType = i32;
/// Value `ARRAY` of `XLA_FFI_AttrType`.
pub const XLA_FFI_AttrType_ARRAY: XLA_FFI_AttrType = 1;
/// Value `DICTIONARY` of `XLA_FFI_AttrType`.
pub const XLA_FFI_AttrType_DICTIONARY: XLA_FFI_AttrType = 2;
/// Value `SCALAR` of `XLA_FFI_AttrType`.
pub const XLA_FFI_AttrType_SCALAR: XLA_FFI_AttrType = 3;
/// Value `STRING` of `XLA_FFI_AttrType`.
pub const XLA_FFI_AttrType_STRING: XLA_FFI_AttrType = 4;

/// Opaque per-call execution context.
#[repr(C)]
pub struct XLA_FFI_ExecutionContext {
    _opaque: [u8; 0],
}

/// A borrowed byte string (not NUL-terminated).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_ByteSpan {
    /// First byte.
    pub ptr: *const c_char,
    /// Length in bytes.
    pub len: usize,
}

/// A scalar attribute.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Scalar {
    /// Type of the value.
    pub dtype: XLA_FFI_DataType,
    /// Pointer to the value.
    pub value: *mut c_void,
}

/// An array attribute.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Array {
    /// Element type.
    pub dtype: XLA_FFI_DataType,
    /// Number of elements.
    pub size: usize,
    /// Pointer to the elements.
    pub data: *mut c_void,
}

/// Id of a user type registered with the runtime.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_TypeId {
    /// The id (0 means unknown / not yet assigned).
    pub type_id: i64,
}

/// Type information for a registered user type.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_TypeInfo {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// Frees an object of the type (may be null).
    pub deleter: Option<unsafe extern "C" fn(object: *mut c_void)>,
}

struct_size!(XLA_FFI_TypeInfo_STRUCT_SIZE = XLA_FFI_TypeInfo, deleter: Option<unsafe extern "C" fn(object: *mut c_void)>);

/// Opaque future a handler can return for asynchronous completion.
#[repr(C)]
pub struct XLA_FFI_Future {
    _opaque: [u8; 0],
}

/// Arguments of [`XLA_FFI_Future_Create`]. Note: the header's STRUCT_SIZE stops at `extension_start`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Future_Create_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// Out: the resulting [`XLA_FFI_Future`].
    pub future: *mut XLA_FFI_Future,
}

struct_size!(XLA_FFI_Future_Create_Args_STRUCT_SIZE = XLA_FFI_Future_Create_Args, extension_start: *mut XLA_FFI_Extension_Base);

/// Signature of the `XLA_FFI_Future_Create` entry; takes [`XLA_FFI_Future_Create_Args`].
pub type XLA_FFI_Future_Create =
    unsafe extern "C" fn(args: *mut XLA_FFI_Future_Create_Args) -> *mut XLA_FFI_Error;

/// Arguments of [`XLA_FFI_Future_SetAvailable`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Future_SetAvailable_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// The [`XLA_FFI_Future`] to use.
    pub future: *mut XLA_FFI_Future,
}

struct_size!(XLA_FFI_Future_SetAvailable_Args_STRUCT_SIZE = XLA_FFI_Future_SetAvailable_Args, future: *mut XLA_FFI_Future);

/// Signature of the `XLA_FFI_Future_SetAvailable` entry; takes [`XLA_FFI_Future_SetAvailable_Args`].
pub type XLA_FFI_Future_SetAvailable =
    unsafe extern "C" fn(args: *mut XLA_FFI_Future_SetAvailable_Args) -> *mut XLA_FFI_Error;

/// Arguments of [`XLA_FFI_Future_SetError`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Future_SetError_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// The [`XLA_FFI_Future`] to use.
    pub future: *mut XLA_FFI_Future,
    /// The [`XLA_FFI_Error`] to use.
    pub error: *mut XLA_FFI_Error,
}

struct_size!(XLA_FFI_Future_SetError_Args_STRUCT_SIZE = XLA_FFI_Future_SetError_Args, error: *mut XLA_FFI_Error);

/// Signature of the `XLA_FFI_Future_SetError` entry; takes [`XLA_FFI_Future_SetError_Args`].
pub type XLA_FFI_Future_SetError =
    unsafe extern "C" fn(args: *mut XLA_FFI_Future_SetError_Args) -> *mut XLA_FFI_Error;

/// Stage at which a handler is called.
pub type XLA_FFI_ExecutionStage = i32;
/// Value `INSTANTIATE` of `XLA_FFI_ExecutionStage`.
pub const XLA_FFI_ExecutionStage_INSTANTIATE: XLA_FFI_ExecutionStage = 0;
/// Value `PREPARE` of `XLA_FFI_ExecutionStage`.
pub const XLA_FFI_ExecutionStage_PREPARE: XLA_FFI_ExecutionStage = 1;
/// Value `INITIALIZE` of `XLA_FFI_ExecutionStage`.
pub const XLA_FFI_ExecutionStage_INITIALIZE: XLA_FFI_ExecutionStage = 2;
/// Value `EXECUTE` of `XLA_FFI_ExecutionStage`.
pub const XLA_FFI_ExecutionStage_EXECUTE: XLA_FFI_ExecutionStage = 3;

/// Arguments of a handler call.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// Number of arguments.
    pub size: i64,
    /// Kind of each argument, `size` entries.
    pub types: *mut XLA_FFI_ArgType,
    /// Pointer to each argument (an [`XLA_FFI_Buffer`] for buffers), `size` entries.
    pub args: *mut *mut c_void,
}

struct_size!(XLA_FFI_Args_STRUCT_SIZE = XLA_FFI_Args, args: *mut *mut c_void);

/// Results of a handler call.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Rets {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// Number of results.
    pub size: i64,
    /// Kind of each result, `size` entries.
    pub types: *mut XLA_FFI_RetType,
    /// Pointer to each result, `size` entries.
    pub rets: *mut *mut c_void,
}

struct_size!(XLA_FFI_Rets_STRUCT_SIZE = XLA_FFI_Rets, rets: *mut *mut c_void);

/// Attributes of a handler call, sorted by name.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Attrs {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// Number of attributes.
    pub size: i64,
    /// Kind of each attribute, `size` entries.
    pub types: *mut XLA_FFI_AttrType,
    /// Name of each attribute, `size` entries.
    pub names: *mut *mut XLA_FFI_ByteSpan,
    /// Pointer to each attribute value, `size` entries.
    pub attrs: *mut *mut c_void,
}

struct_size!(XLA_FFI_Attrs_STRUCT_SIZE = XLA_FFI_Attrs, attrs: *mut *mut c_void);

/// Everything a handler receives for one call. Its size is checked strictly by the runtime.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_CallFrame {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// The FFI function table.
    pub api: *const XLA_FFI_Api,
    /// Execution context of this call.
    pub ctx: *mut XLA_FFI_ExecutionContext,
    /// Which stage this call is for.
    pub stage: XLA_FFI_ExecutionStage,
    /// Arguments.
    pub args: XLA_FFI_Args,
    /// Results.
    pub rets: XLA_FFI_Rets,
    /// Attributes.
    pub attrs: XLA_FFI_Attrs,
    /// Out: a future for asynchronous completion, or null. Not covered by the header's STRUCT_SIZE.
    pub future: *mut XLA_FFI_Future,
}

struct_size!(XLA_FFI_CallFrame_STRUCT_SIZE = XLA_FFI_CallFrame, attrs: XLA_FFI_Attrs);

/// An FFI handler: called with a call frame, returns null on success or an error.
pub type XLA_FFI_Handler =
    unsafe extern "C" fn(call_frame: *mut XLA_FFI_CallFrame) -> *mut XLA_FFI_Error;

/// Handlers for each execution stage; only `execute` is required.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Handler_Bundle {
    /// Handler for the instantiate stage (may be null).
    pub instantiate: Option<XLA_FFI_Handler>,
    /// Handler for the prepare stage (may be null).
    pub prepare: Option<XLA_FFI_Handler>,
    /// Handler for the initialize stage (may be null).
    pub initialize: Option<XLA_FFI_Handler>,
    /// Handler for the execute stage.
    pub execute: Option<XLA_FFI_Handler>,
}

/// Bit flags for [`XLA_FFI_Handler_Traits`].
pub type XLA_FFI_Handler_TraitsBits = i32;
/// Value `XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE` of `XLA_FFI_Handler_TraitsBits`.
pub const XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE: XLA_FFI_Handler_TraitsBits = 1;

/// Handler trait bits (see `XLA_FFI_HANDLER_TRAITS_*`).
pub type XLA_FFI_Handler_Traits = u32;

/// Arguments of [`XLA_FFI_Handler_Register`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Handler_Register_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// Name.
    pub name: XLA_FFI_ByteSpan,
    /// Platform.
    pub platform: XLA_FFI_ByteSpan,
    /// Bundle.
    pub bundle: XLA_FFI_Handler_Bundle,
    /// Traits.
    pub traits: XLA_FFI_Handler_Traits,
}

struct_size!(XLA_FFI_Handler_Register_Args_STRUCT_SIZE = XLA_FFI_Handler_Register_Args, traits: XLA_FFI_Handler_Traits);

/// Signature of the `XLA_FFI_Handler_Register` entry; takes [`XLA_FFI_Handler_Register_Args`].
pub type XLA_FFI_Handler_Register =
    unsafe extern "C" fn(args: *mut XLA_FFI_Handler_Register_Args) -> *mut XLA_FFI_Error;

/// Arguments of [`XLA_FFI_Type_Register`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Type_Register_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// Name.
    pub name: XLA_FFI_ByteSpan,
    /// In/out: type id.
    pub type_id: *mut XLA_FFI_TypeId,
    /// Type info.
    pub type_info: *const XLA_FFI_TypeInfo,
}

struct_size!(XLA_FFI_Type_Register_Args_STRUCT_SIZE = XLA_FFI_Type_Register_Args, type_id: *mut XLA_FFI_TypeId);

/// Signature of the `XLA_FFI_Type_Register` entry; takes [`XLA_FFI_Type_Register_Args`].
pub type XLA_FFI_Type_Register =
    unsafe extern "C" fn(args: *mut XLA_FFI_Type_Register_Args) -> *mut XLA_FFI_Error;

/// Arguments of [`XLA_FFI_ExecutionContext_Get`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_ExecutionContext_Get_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// The [`XLA_FFI_ExecutionContext`] to use.
    pub ctx: *mut XLA_FFI_ExecutionContext,
    /// Type id.
    pub type_id: *mut XLA_FFI_TypeId,
    /// Out: data.
    pub data: *mut c_void,
}

struct_size!(XLA_FFI_ExecutionContext_Get_Args_STRUCT_SIZE = XLA_FFI_ExecutionContext_Get_Args, data: *mut c_void);

/// Signature of the `XLA_FFI_ExecutionContext_Get` entry; takes [`XLA_FFI_ExecutionContext_Get_Args`].
pub type XLA_FFI_ExecutionContext_Get =
    unsafe extern "C" fn(args: *mut XLA_FFI_ExecutionContext_Get_Args) -> *mut XLA_FFI_Error;

/// Arguments of [`XLA_FFI_State_Set`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_State_Set_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// The [`XLA_FFI_ExecutionContext`] to use.
    pub ctx: *mut XLA_FFI_ExecutionContext,
    /// Stage.
    pub stage: XLA_FFI_ExecutionStage,
    /// Type id.
    pub type_id: *mut XLA_FFI_TypeId,
    /// State.
    pub state: *mut c_void,
}

struct_size!(XLA_FFI_State_Set_Args_STRUCT_SIZE = XLA_FFI_State_Set_Args, state: *mut c_void);

/// Signature of the `XLA_FFI_State_Set` entry; takes [`XLA_FFI_State_Set_Args`].
pub type XLA_FFI_State_Set =
    unsafe extern "C" fn(args: *mut XLA_FFI_State_Set_Args) -> *mut XLA_FFI_Error;

/// Arguments of [`XLA_FFI_State_Get`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_State_Get_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// The [`XLA_FFI_ExecutionContext`] to use.
    pub ctx: *mut XLA_FFI_ExecutionContext,
    /// Stage.
    pub stage: XLA_FFI_ExecutionStage,
    /// Type id.
    pub type_id: *mut XLA_FFI_TypeId,
    /// Out: state.
    pub state: *mut c_void,
}

struct_size!(XLA_FFI_State_Get_Args_STRUCT_SIZE = XLA_FFI_State_Get_Args, state: *mut c_void);

/// Signature of the `XLA_FFI_State_Get` entry; takes [`XLA_FFI_State_Get_Args`].
pub type XLA_FFI_State_Get =
    unsafe extern "C" fn(args: *mut XLA_FFI_State_Get_Args) -> *mut XLA_FFI_Error;

/// Arguments of [`XLA_FFI_Stream_Get`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Stream_Get_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// The [`XLA_FFI_ExecutionContext`] to use.
    pub ctx: *mut XLA_FFI_ExecutionContext,
    /// Out: stream.
    pub stream: *mut c_void,
}

struct_size!(XLA_FFI_Stream_Get_Args_STRUCT_SIZE = XLA_FFI_Stream_Get_Args, stream: *mut c_void);

/// Signature of the `XLA_FFI_Stream_Get` entry; takes [`XLA_FFI_Stream_Get_Args`].
pub type XLA_FFI_Stream_Get =
    unsafe extern "C" fn(args: *mut XLA_FFI_Stream_Get_Args) -> *mut XLA_FFI_Error;

/// Arguments of [`XLA_FFI_DeviceMemory_Allocate`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_DeviceMemory_Allocate_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// The [`XLA_FFI_ExecutionContext`] to use.
    pub ctx: *mut XLA_FFI_ExecutionContext,
    /// Size.
    pub size: usize,
    /// Alignment.
    pub alignment: usize,
    /// Out: data.
    pub data: *mut c_void,
}

struct_size!(XLA_FFI_DeviceMemory_Allocate_Args_STRUCT_SIZE = XLA_FFI_DeviceMemory_Allocate_Args, data: *mut c_void);

/// Signature of the `XLA_FFI_DeviceMemory_Allocate` entry; takes [`XLA_FFI_DeviceMemory_Allocate_Args`].
pub type XLA_FFI_DeviceMemory_Allocate =
    unsafe extern "C" fn(args: *mut XLA_FFI_DeviceMemory_Allocate_Args) -> *mut XLA_FFI_Error;

/// Arguments of [`XLA_FFI_DeviceMemory_Free`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_DeviceMemory_Free_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// The [`XLA_FFI_ExecutionContext`] to use.
    pub ctx: *mut XLA_FFI_ExecutionContext,
    /// Size.
    pub size: usize,
    /// Data.
    pub data: *mut c_void,
}

struct_size!(XLA_FFI_DeviceMemory_Free_Args_STRUCT_SIZE = XLA_FFI_DeviceMemory_Free_Args, data: *mut c_void);

/// Signature of the `XLA_FFI_DeviceMemory_Free` entry; takes [`XLA_FFI_DeviceMemory_Free_Args`].
pub type XLA_FFI_DeviceMemory_Free =
    unsafe extern "C" fn(args: *mut XLA_FFI_DeviceMemory_Free_Args) -> *mut XLA_FFI_Error;

/// A task for the runtime's thread pool.
pub type XLA_FFI_Task = unsafe extern "C" fn(data: *mut c_void);

/// Arguments of [`XLA_FFI_ThreadPool_Schedule`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_ThreadPool_Schedule_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// The [`XLA_FFI_ExecutionContext`] to use.
    pub ctx: *mut XLA_FFI_ExecutionContext,
    /// Task callback (may be null).
    pub task: Option<XLA_FFI_Task>,
    /// Data.
    pub data: *mut c_void,
}

struct_size!(XLA_FFI_ThreadPool_Schedule_Args_STRUCT_SIZE = XLA_FFI_ThreadPool_Schedule_Args, data: *mut c_void);

/// Signature of the `XLA_FFI_ThreadPool_Schedule` entry; takes [`XLA_FFI_ThreadPool_Schedule_Args`].
pub type XLA_FFI_ThreadPool_Schedule =
    unsafe extern "C" fn(args: *mut XLA_FFI_ThreadPool_Schedule_Args) -> *mut XLA_FFI_Error;

/// Arguments of [`XLA_FFI_ThreadPool_NumThreads`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_ThreadPool_NumThreads_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// The [`XLA_FFI_ExecutionContext`] to use.
    pub ctx: *mut XLA_FFI_ExecutionContext,
    /// Out: number of threads.
    pub num_threads: *mut i64,
}

struct_size!(XLA_FFI_ThreadPool_NumThreads_Args_STRUCT_SIZE = XLA_FFI_ThreadPool_NumThreads_Args, num_threads: *mut i64);

/// Signature of the `XLA_FFI_ThreadPool_NumThreads` entry; takes [`XLA_FFI_ThreadPool_NumThreads_Args`].
pub type XLA_FFI_ThreadPool_NumThreads =
    unsafe extern "C" fn(args: *mut XLA_FFI_ThreadPool_NumThreads_Args) -> *mut XLA_FFI_Error;

/// Arguments of [`XLA_FFI_RunId_Get`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_RunId_Get_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// The [`XLA_FFI_ExecutionContext`] to use.
    pub ctx: *mut XLA_FFI_ExecutionContext,
    /// Out: run id.
    pub run_id: i64,
}

struct_size!(XLA_FFI_RunId_Get_Args_STRUCT_SIZE = XLA_FFI_RunId_Get_Args, run_id: i64);

/// Signature of the `XLA_FFI_RunId_Get` entry; takes [`XLA_FFI_RunId_Get_Args`].
pub type XLA_FFI_RunId_Get =
    unsafe extern "C" fn(args: *mut XLA_FFI_RunId_Get_Args) -> *mut XLA_FFI_Error;

/// Arguments of [`XLA_FFI_DeviceOrdinal_Get`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_DeviceOrdinal_Get_Args {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// The [`XLA_FFI_ExecutionContext`] to use.
    pub ctx: *mut XLA_FFI_ExecutionContext,
    /// Out: device ordinal.
    pub device_ordinal: i32,
}

struct_size!(XLA_FFI_DeviceOrdinal_Get_Args_STRUCT_SIZE = XLA_FFI_DeviceOrdinal_Get_Args, device_ordinal: i32);

/// Signature of the `XLA_FFI_DeviceOrdinal_Get` entry; takes [`XLA_FFI_DeviceOrdinal_Get_Args`].
pub type XLA_FFI_DeviceOrdinal_Get =
    unsafe extern "C" fn(args: *mut XLA_FFI_DeviceOrdinal_Get_Args) -> *mut XLA_FFI_Error;

/// What a handler reports about itself when called with the metadata extension.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Metadata {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// FFI version the handler was built for.
    pub api_version: XLA_FFI_Api_Version,
    /// Handler traits.
    pub traits: XLA_FFI_Handler_Traits,
    /// Type id of the handler's state, if any. Not covered by the header's STRUCT_SIZE.
    pub state_type_id: XLA_FFI_TypeId,
}

struct_size!(XLA_FFI_Metadata_STRUCT_SIZE = XLA_FFI_Metadata, traits: XLA_FFI_Handler_Traits);

/// Extension passed in a call frame to ask a handler for its metadata instead of running.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Metadata_Extension {
    /// Extension header (`type` is `XLA_FFI_Extension_Metadata`).
    pub extension_base: XLA_FFI_Extension_Base,
    /// Where the handler writes its metadata.
    pub metadata: *mut XLA_FFI_Metadata,
}

struct_size!(XLA_FFI_Metadata_Extension_STRUCT_SIZE = XLA_FFI_Metadata_Extension, metadata: *mut XLA_FFI_Metadata);

/// The XLA FFI function table, reached from a call frame's `api`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XLA_FFI_Api {
    /// Size of this struct as the caller knows it (the `_STRUCT_SIZE` constant).
    pub struct_size: usize,
    /// Head of an optional extension chain; null for none.
    pub extension_start: *mut XLA_FFI_Extension_Base,
    /// FFI version of the runtime.
    pub api_version: XLA_FFI_Api_Version,
    /// XLA-internal table; never used by clients.
    pub internal_api: *const XLA_FFI_InternalApi,
    /// Function table slot for [`XLA_FFI_Error_Create`].
    pub XLA_FFI_Error_Create: Option<XLA_FFI_Error_Create>,
    /// Function table slot for [`XLA_FFI_Error_GetMessage`].
    pub XLA_FFI_Error_GetMessage: Option<XLA_FFI_Error_GetMessage>,
    /// Function table slot for [`XLA_FFI_Error_Destroy`].
    pub XLA_FFI_Error_Destroy: Option<XLA_FFI_Error_Destroy>,
    /// Function table slot for [`XLA_FFI_Handler_Register`].
    pub XLA_FFI_Handler_Register: Option<XLA_FFI_Handler_Register>,
    /// Function table slot for [`XLA_FFI_Stream_Get`].
    pub XLA_FFI_Stream_Get: Option<XLA_FFI_Stream_Get>,
    /// Function table slot for [`XLA_FFI_Type_Register`].
    pub XLA_FFI_Type_Register: Option<XLA_FFI_Type_Register>,
    /// Function table slot for [`XLA_FFI_ExecutionContext_Get`].
    pub XLA_FFI_ExecutionContext_Get: Option<XLA_FFI_ExecutionContext_Get>,
    /// Function table slot for [`XLA_FFI_State_Set`].
    pub XLA_FFI_State_Set: Option<XLA_FFI_State_Set>,
    /// Function table slot for [`XLA_FFI_State_Get`].
    pub XLA_FFI_State_Get: Option<XLA_FFI_State_Get>,
    /// Function table slot for [`XLA_FFI_DeviceMemory_Allocate`].
    pub XLA_FFI_DeviceMemory_Allocate: Option<XLA_FFI_DeviceMemory_Allocate>,
    /// Function table slot for [`XLA_FFI_DeviceMemory_Free`].
    pub XLA_FFI_DeviceMemory_Free: Option<XLA_FFI_DeviceMemory_Free>,
    /// Function table slot for [`XLA_FFI_ThreadPool_Schedule`].
    pub XLA_FFI_ThreadPool_Schedule: Option<XLA_FFI_ThreadPool_Schedule>,
    /// Function table slot for [`XLA_FFI_ThreadPool_NumThreads`].
    pub XLA_FFI_ThreadPool_NumThreads: Option<XLA_FFI_ThreadPool_NumThreads>,
    /// Function table slot for [`XLA_FFI_Future_Create`].
    pub XLA_FFI_Future_Create: Option<XLA_FFI_Future_Create>,
    /// Function table slot for [`XLA_FFI_Future_SetAvailable`].
    pub XLA_FFI_Future_SetAvailable: Option<XLA_FFI_Future_SetAvailable>,
    /// Function table slot for [`XLA_FFI_Future_SetError`].
    pub XLA_FFI_Future_SetError: Option<XLA_FFI_Future_SetError>,
    /// Function table slot for [`XLA_FFI_RunId_Get`].
    pub XLA_FFI_RunId_Get: Option<XLA_FFI_RunId_Get>,
    /// Function table slot for [`XLA_FFI_DeviceOrdinal_Get`].
    pub XLA_FFI_DeviceOrdinal_Get: Option<XLA_FFI_DeviceOrdinal_Get>,
}

struct_size!(XLA_FFI_Api_STRUCT_SIZE = XLA_FFI_Api, XLA_FFI_DeviceOrdinal_Get: Option<XLA_FFI_DeviceOrdinal_Get>);
