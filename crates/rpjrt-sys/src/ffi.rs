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

/// An FFI handler: called with a call frame, returns null on success or an error.
pub type XLA_FFI_Handler =
    unsafe extern "C" fn(call_frame: *mut XLA_FFI_CallFrame) -> *mut XLA_FFI_Error;

/// A task for the runtime's thread pool.
pub type XLA_FFI_Task = unsafe extern "C" fn(data: *mut c_void);

c_api! {
    facts XLA_FFI_FACTS;
    /// Major version of the XLA FFI API declared here.
    const XLA_FFI_API_MAJOR: c_int = 0;
    /// Minor version of the XLA FFI API declared here (0.3).
    const XLA_FFI_API_MINOR: c_int = 3;
    /// Opaque XLA-internal function table.
    opaque XLA_FFI_InternalApi;
    /// Tag of an FFI extension struct.
    enum XLA_FFI_Extension_Type: i32 {
        XLA_FFI_Extension_Metadata = 1,
    }
    /// Common header of FFI extension structs; they form a linked list.
    struct XLA_FFI_Extension_Base sized {
        struct_size: usize,
        /// Which extension this is.
        r#type: XLA_FFI_Extension_Type,
        /// Next extension in the chain, or null.
        next: *mut XLA_FFI_Extension_Base,
    }
    /// An FFI version pair (runtime's in [`XLA_FFI_Api`], handler's in [`XLA_FFI_Metadata`]).
    struct XLA_FFI_Api_Version sized {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        major_version: c_int,
        minor_version: c_int,
    }
    /// Opaque error object created by the FFI runtime.
    opaque XLA_FFI_Error;
    /// Status code of an FFI error (absl numbering).
    enum XLA_FFI_Error_Code: i32 {
        XLA_FFI_Error_Code_OK = 0,
        XLA_FFI_Error_Code_CANCELLED = 1,
        XLA_FFI_Error_Code_UNKNOWN = 2,
        XLA_FFI_Error_Code_INVALID_ARGUMENT = 3,
        XLA_FFI_Error_Code_DEADLINE_EXCEEDED = 4,
        XLA_FFI_Error_Code_NOT_FOUND = 5,
        XLA_FFI_Error_Code_ALREADY_EXISTS = 6,
        XLA_FFI_Error_Code_PERMISSION_DENIED = 7,
        XLA_FFI_Error_Code_RESOURCE_EXHAUSTED = 8,
        XLA_FFI_Error_Code_FAILED_PRECONDITION = 9,
        XLA_FFI_Error_Code_ABORTED = 10,
        XLA_FFI_Error_Code_OUT_OF_RANGE = 11,
        XLA_FFI_Error_Code_UNIMPLEMENTED = 12,
        XLA_FFI_Error_Code_INTERNAL = 13,
        XLA_FFI_Error_Code_UNAVAILABLE = 14,
        XLA_FFI_Error_Code_DATA_LOSS = 15,
        XLA_FFI_Error_Code_UNAUTHENTICATED = 16,
    }
    struct XLA_FFI_Error_Create_Args sized => XLA_FFI_Error_Create -> *mut XLA_FFI_Error {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        /// NUL-terminated message; copied by the runtime.
        message: *const c_char,
        /// Error code.
        errc: XLA_FFI_Error_Code,
    }
    struct XLA_FFI_Error_GetMessage_Args sized => XLA_FFI_Error_GetMessage -> () {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        error: *mut XLA_FFI_Error,
        /// Out: message (C string).
        message: *const c_char,
    }
    struct XLA_FFI_Error_Destroy_Args sized => XLA_FFI_Error_Destroy -> () {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        error: *mut XLA_FFI_Error,
    }
    /// Element type of an FFI buffer or attribute. Numbering differs from `PJRT_Buffer_Type` (e.g. BF16 is 16 here).
    enum XLA_FFI_DataType: i32 {
        XLA_FFI_DataType_INVALID = 0,
        XLA_FFI_DataType_PRED = 1,
        XLA_FFI_DataType_S1 = 30,
        XLA_FFI_DataType_S2 = 26,
        XLA_FFI_DataType_S4 = 21,
        XLA_FFI_DataType_S8 = 2,
        XLA_FFI_DataType_S16 = 3,
        XLA_FFI_DataType_S32 = 4,
        XLA_FFI_DataType_S64 = 5,
        XLA_FFI_DataType_U1 = 31,
        XLA_FFI_DataType_U2 = 27,
        XLA_FFI_DataType_U4 = 22,
        XLA_FFI_DataType_U8 = 6,
        XLA_FFI_DataType_U16 = 7,
        XLA_FFI_DataType_U32 = 8,
        XLA_FFI_DataType_U64 = 9,
        XLA_FFI_DataType_F16 = 10,
        XLA_FFI_DataType_F32 = 11,
        XLA_FFI_DataType_F64 = 12,
        XLA_FFI_DataType_BF16 = 16,
        XLA_FFI_DataType_C64 = 15,
        XLA_FFI_DataType_C128 = 18,
        XLA_FFI_DataType_TOKEN = 17,
        XLA_FFI_DataType_F8E5M2 = 19,
        XLA_FFI_DataType_F8E3M4 = 29,
        XLA_FFI_DataType_F8E4M3 = 28,
        XLA_FFI_DataType_F8E4M3FN = 20,
        XLA_FFI_DataType_F8E4M3B11FNUZ = 23,
        XLA_FFI_DataType_F8E5M2FNUZ = 24,
        XLA_FFI_DataType_F8E4M3FNUZ = 25,
        XLA_FFI_DataType_F4E2M1FN = 32,
        XLA_FFI_DataType_F8E8M0FNU = 33,
    }
    /// A device buffer argument or result of a handler.
    struct XLA_FFI_Buffer sized {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        /// Element type.
        dtype: XLA_FFI_DataType,
        /// Pointer to the data.
        data: *mut c_void,
        /// Number of dimensions.
        rank: i64,
        /// Dimensions, `rank` entries.
        dims: *mut i64,
    }
    /// Kind of a handler argument.
    enum XLA_FFI_ArgType: i32 {
        XLA_FFI_ArgType_BUFFER = 1,
    }
    /// Kind of a handler result.
    enum XLA_FFI_RetType: i32 {
        XLA_FFI_RetType_BUFFER = 1,
    }
    /// Kind of a handler attribute.
    enum XLA_FFI_AttrType: i32 {
        XLA_FFI_AttrType_ARRAY = 1,
        XLA_FFI_AttrType_DICTIONARY = 2,
        XLA_FFI_AttrType_SCALAR = 3,
        XLA_FFI_AttrType_STRING = 4,
    }
    /// Opaque per-call execution context.
    opaque XLA_FFI_ExecutionContext;
    /// A borrowed byte string (not NUL-terminated).
    struct XLA_FFI_ByteSpan {
        /// First byte.
        ptr: *const c_char,
        /// Length in bytes.
        len: usize,
    }
    /// A scalar attribute.
    struct XLA_FFI_Scalar {
        /// Type of the value.
        dtype: XLA_FFI_DataType,
        /// Pointer to the value.
        value: *mut c_void,
    }
    /// An array attribute.
    struct XLA_FFI_Array {
        /// Element type.
        dtype: XLA_FFI_DataType,
        /// Number of elements.
        size: usize,
        /// Pointer to the elements.
        data: *mut c_void,
    }
    /// Id of a user type registered with the runtime.
    struct XLA_FFI_TypeId {
        /// The id (0 means unknown / not yet assigned).
        type_id: i64,
    }
    /// Type information for a registered user type.
    struct XLA_FFI_TypeInfo sized {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        /// Frees an object of the type (may be null).
        deleter: Option<unsafe extern "C" fn(object: *mut c_void)>,
    }
    /// Opaque future a handler can return for asynchronous completion.
    opaque XLA_FFI_Future;
    /// Arguments of [`XLA_FFI_Future_Create`]. Note: the header's STRUCT_SIZE stops at `extension_start`.
    struct XLA_FFI_Future_Create_Args sized(extension_start: *mut XLA_FFI_Extension_Base) => XLA_FFI_Future_Create -> *mut XLA_FFI_Error {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        /// Out: the resulting [`XLA_FFI_Future`].
        future: *mut XLA_FFI_Future,
    }
    struct XLA_FFI_Future_SetAvailable_Args sized => XLA_FFI_Future_SetAvailable -> *mut XLA_FFI_Error {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        future: *mut XLA_FFI_Future,
    }
    struct XLA_FFI_Future_SetError_Args sized => XLA_FFI_Future_SetError -> *mut XLA_FFI_Error {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        future: *mut XLA_FFI_Future,
        error: *mut XLA_FFI_Error,
    }
    /// Stage at which a handler is called.
    enum XLA_FFI_ExecutionStage: i32 {
        XLA_FFI_ExecutionStage_INSTANTIATE = 0,
        XLA_FFI_ExecutionStage_PREPARE = 1,
        XLA_FFI_ExecutionStage_INITIALIZE = 2,
        XLA_FFI_ExecutionStage_EXECUTE = 3,
    }
    /// Arguments of a handler call.
    struct XLA_FFI_Args sized {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        /// Number of arguments.
        size: i64,
        /// Kind of each argument, `size` entries.
        types: *mut XLA_FFI_ArgType,
        /// Pointer to each argument (an [`XLA_FFI_Buffer`] for buffers), `size` entries.
        args: *mut *mut c_void,
    }
    /// Results of a handler call.
    struct XLA_FFI_Rets sized {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        /// Number of results.
        size: i64,
        /// Kind of each result, `size` entries.
        types: *mut XLA_FFI_RetType,
        /// Pointer to each result, `size` entries.
        rets: *mut *mut c_void,
    }
    /// Attributes of a handler call, sorted by name.
    struct XLA_FFI_Attrs sized {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        /// Number of attributes.
        size: i64,
        /// Kind of each attribute, `size` entries.
        types: *mut XLA_FFI_AttrType,
        /// Name of each attribute, `size` entries.
        names: *mut *mut XLA_FFI_ByteSpan,
        /// Pointer to each attribute value, `size` entries.
        attrs: *mut *mut c_void,
    }
    /// Everything a handler receives for one call. Its size is checked strictly by the runtime.
    struct XLA_FFI_CallFrame sized(attrs: XLA_FFI_Attrs) {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        /// The FFI function table.
        api: *const XLA_FFI_Api,
        /// Execution context of this call.
        ctx: *mut XLA_FFI_ExecutionContext,
        /// Which stage this call is for.
        stage: XLA_FFI_ExecutionStage,
        /// Arguments.
        args: XLA_FFI_Args,
        /// Results.
        rets: XLA_FFI_Rets,
        /// Attributes.
        attrs: XLA_FFI_Attrs,
        /// Out: a future for asynchronous completion, or null. Not covered by the header's STRUCT_SIZE.
        future: *mut XLA_FFI_Future,
    }
    /// Handlers for each execution stage; only `execute` is required.
    struct XLA_FFI_Handler_Bundle {
        /// Handler for the instantiate stage (may be null).
        instantiate: Option<XLA_FFI_Handler>,
        /// Handler for the prepare stage (may be null).
        prepare: Option<XLA_FFI_Handler>,
        /// Handler for the initialize stage (may be null).
        initialize: Option<XLA_FFI_Handler>,
        /// Handler for the execute stage.
        execute: Option<XLA_FFI_Handler>,
    }
    /// Bit flags for [`XLA_FFI_Handler_Traits`].
    enum XLA_FFI_Handler_TraitsBits: i32 {
        XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE = 1,
    }
    /// Handler trait bits (see `XLA_FFI_HANDLER_TRAITS_*`).
    type XLA_FFI_Handler_Traits = u32;
    struct XLA_FFI_Handler_Register_Args sized => XLA_FFI_Handler_Register -> *mut XLA_FFI_Error {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        name: XLA_FFI_ByteSpan,
        platform: XLA_FFI_ByteSpan,
        bundle: XLA_FFI_Handler_Bundle,
        traits: XLA_FFI_Handler_Traits,
    }
    struct XLA_FFI_Type_Register_Args sized(type_id: *mut XLA_FFI_TypeId) => XLA_FFI_Type_Register -> *mut XLA_FFI_Error {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        name: XLA_FFI_ByteSpan,
        type_id: *mut XLA_FFI_TypeId,
        type_info: *const XLA_FFI_TypeInfo,
    }
    struct XLA_FFI_ExecutionContext_Get_Args sized => XLA_FFI_ExecutionContext_Get -> *mut XLA_FFI_Error {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        ctx: *mut XLA_FFI_ExecutionContext,
        type_id: *mut XLA_FFI_TypeId,
        data: *mut c_void,
    }
    struct XLA_FFI_State_Set_Args sized => XLA_FFI_State_Set -> *mut XLA_FFI_Error {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        ctx: *mut XLA_FFI_ExecutionContext,
        stage: XLA_FFI_ExecutionStage,
        type_id: *mut XLA_FFI_TypeId,
        state: *mut c_void,
    }
    struct XLA_FFI_State_Get_Args sized => XLA_FFI_State_Get -> *mut XLA_FFI_Error {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        ctx: *mut XLA_FFI_ExecutionContext,
        stage: XLA_FFI_ExecutionStage,
        type_id: *mut XLA_FFI_TypeId,
        state: *mut c_void,
    }
    struct XLA_FFI_Stream_Get_Args sized => XLA_FFI_Stream_Get -> *mut XLA_FFI_Error {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        ctx: *mut XLA_FFI_ExecutionContext,
        stream: *mut c_void,
    }
    struct XLA_FFI_DeviceMemory_Allocate_Args sized => XLA_FFI_DeviceMemory_Allocate -> *mut XLA_FFI_Error {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        ctx: *mut XLA_FFI_ExecutionContext,
        size: usize,
        alignment: usize,
        data: *mut c_void,
    }
    struct XLA_FFI_DeviceMemory_Free_Args sized => XLA_FFI_DeviceMemory_Free -> *mut XLA_FFI_Error {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        ctx: *mut XLA_FFI_ExecutionContext,
        size: usize,
        data: *mut c_void,
    }
    struct XLA_FFI_ThreadPool_Schedule_Args sized => XLA_FFI_ThreadPool_Schedule -> *mut XLA_FFI_Error {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        ctx: *mut XLA_FFI_ExecutionContext,
        /// Task callback (may be null).
        task: Option<XLA_FFI_Task>,
        data: *mut c_void,
    }
    struct XLA_FFI_ThreadPool_NumThreads_Args sized => XLA_FFI_ThreadPool_NumThreads -> *mut XLA_FFI_Error {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        ctx: *mut XLA_FFI_ExecutionContext,
        /// Out: number of threads.
        num_threads: *mut i64,
    }
    struct XLA_FFI_RunId_Get_Args sized => XLA_FFI_RunId_Get -> *mut XLA_FFI_Error {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        ctx: *mut XLA_FFI_ExecutionContext,
        run_id: i64,
    }
    struct XLA_FFI_DeviceOrdinal_Get_Args sized => XLA_FFI_DeviceOrdinal_Get -> *mut XLA_FFI_Error {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        ctx: *mut XLA_FFI_ExecutionContext,
        device_ordinal: i32,
    }
    /// What a handler reports about itself when called with the metadata extension.
    struct XLA_FFI_Metadata sized(traits: XLA_FFI_Handler_Traits) {
        struct_size: usize,
        /// FFI version the handler was built for.
        api_version: XLA_FFI_Api_Version,
        /// Handler traits.
        traits: XLA_FFI_Handler_Traits,
        /// Type id of the handler's state, if any. Not covered by the header's STRUCT_SIZE.
        state_type_id: XLA_FFI_TypeId,
    }
    /// Extension passed in a call frame to ask a handler for its metadata instead of running.
    struct XLA_FFI_Metadata_Extension sized {
        /// Extension header (`type` is `XLA_FFI_Extension_Metadata`).
        extension_base: XLA_FFI_Extension_Base,
        /// Where the handler writes its metadata.
        metadata: *mut XLA_FFI_Metadata,
    }
    /// The XLA FFI function table, reached from a call frame's `api`.
    struct XLA_FFI_Api sized {
        struct_size: usize,
        extension_start: *mut XLA_FFI_Extension_Base,
        /// FFI version of the runtime.
        api_version: XLA_FFI_Api_Version,
        /// XLA-internal table; never used by clients.
        internal_api: *const XLA_FFI_InternalApi,
        XLA_FFI_Error_Create: Option<XLA_FFI_Error_Create>,
        XLA_FFI_Error_GetMessage: Option<XLA_FFI_Error_GetMessage>,
        XLA_FFI_Error_Destroy: Option<XLA_FFI_Error_Destroy>,
        XLA_FFI_Handler_Register: Option<XLA_FFI_Handler_Register>,
        XLA_FFI_Stream_Get: Option<XLA_FFI_Stream_Get>,
        XLA_FFI_Type_Register: Option<XLA_FFI_Type_Register>,
        XLA_FFI_ExecutionContext_Get: Option<XLA_FFI_ExecutionContext_Get>,
        XLA_FFI_State_Set: Option<XLA_FFI_State_Set>,
        XLA_FFI_State_Get: Option<XLA_FFI_State_Get>,
        XLA_FFI_DeviceMemory_Allocate: Option<XLA_FFI_DeviceMemory_Allocate>,
        XLA_FFI_DeviceMemory_Free: Option<XLA_FFI_DeviceMemory_Free>,
        XLA_FFI_ThreadPool_Schedule: Option<XLA_FFI_ThreadPool_Schedule>,
        XLA_FFI_ThreadPool_NumThreads: Option<XLA_FFI_ThreadPool_NumThreads>,
        XLA_FFI_Future_Create: Option<XLA_FFI_Future_Create>,
        XLA_FFI_Future_SetAvailable: Option<XLA_FFI_Future_SetAvailable>,
        XLA_FFI_Future_SetError: Option<XLA_FFI_Future_SetError>,
        XLA_FFI_RunId_Get: Option<XLA_FFI_RunId_Get>,
        XLA_FFI_DeviceOrdinal_Get: Option<XLA_FFI_DeviceOrdinal_Get>,
    }
}
