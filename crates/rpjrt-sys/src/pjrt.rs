//! The PJRT C API, laid out as at version 0.114.
//!
//! Declared by hand from the upstream header's structure; see the crate docs
//! for the naming rules. Nothing here is callable without a loaded plugin.

use core::ffi::{c_char, c_int, c_void};

/// Visitor called once per (key, value) payload pair of an error.
pub type PJRT_Error_PayloadVisitor = unsafe extern "C" fn(
    key: *const c_char,
    key_size: usize,
    value: *const c_char,
    value_size: usize,
    user_arg: *mut c_void,
);

/// Callback a plugin hands to a client callback so the client can build a [`PJRT_Error`].
pub type PJRT_CallbackError = unsafe extern "C" fn(
    code: PJRT_Error_Code,
    message: *const c_char,
    message_size: usize,
) -> *mut PJRT_Error;

/// Called once when an event completes; receives the error (or null) and the user argument.
pub type PJRT_Event_OnReadyCallback =
    unsafe extern "C" fn(error: *mut PJRT_Error, user_arg: *mut c_void);

/// Frees a value returned by a key-value get callback.
pub type PJRT_KeyValueGetCallback_ValueDeleter = unsafe extern "C" fn(value: *mut c_char);

/// Frees a value returned by a key-value try-get callback.
pub type PJRT_KeyValueTryGetCallback_ValueDeleter = unsafe extern "C" fn(value: *mut c_char);

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

c_api! {
    facts PJRT_FACTS;
    /// Major version of the PJRT C API layout declared here.
    const PJRT_API_MAJOR: c_int = 0;
    /// Minor version of the PJRT C API layout declared here (0.114).
    const PJRT_API_MINOR: c_int = 114;
    /// Tag saying which extension struct a [`PJRT_Extension_Base`] heads.
    enum PJRT_Extension_Type: i32 {
        /// Extension tag: GPU custom-call registration.
        PJRT_Extension_Type_Gpu_Custom_Call = 0,
        PJRT_Extension_Type_Profiler = 1,
        PJRT_Extension_Type_Custom_Partitioner = 2,
        PJRT_Extension_Type_Stream = 3,
        PJRT_Extension_Type_Layouts = 4,
        PJRT_Extension_Type_FFI = 5,
        PJRT_Extension_Type_MemoryDescriptions = 6,
        PJRT_Extension_Type_Triton = 7,
        PJRT_Extension_Type_RawBuffer = 8,
        PJRT_Extension_Type_PhaseCompile = 9,
        PJRT_Extension_Type_Example = 10,
        PJRT_Extension_Type_Unknown = 11,
        PJRT_Extension_Type_CrossHostTransfers = 12,
        PJRT_Extension_Type_ExecutableMetadata = 13,
        PJRT_Extension_Type_Callback = 14,
        PJRT_Extension_Type_HostAllocator = 15,
        PJRT_Extension_Type_TpuTopology = 16,
        PJRT_Extension_Type_TpuExecutable = 17,
        PJRT_Extension_Type_Megascale = 18,
        PJRT_Extension_Type_Shardings = 19,
        PJRT_Extension_Type_AbiVersion = 20,
        PJRT_Extension_Type_Collectives = 21,
        PJRT_Extension_Type_MultiSlice = 22,
        PJRT_Extension_Type_HostMemoryAllocator = 23,
        PJRT_Extension_Type_XlaTransform = 24,
    }
    /// Common header of every extension struct; extensions form a singly linked list.
    struct PJRT_Extension_Base sized {
        struct_size: usize,
        /// Which extension this is (a `PJRT_Extension_Type_*` value).
        r#type: PJRT_Extension_Type,
        /// Next extension in the chain, or null.
        next: *mut PJRT_Extension_Base,
    }
    /// Version pair reported by a plugin inside [`PJRT_Api`].
    args PJRT_Api_Version sized {
        /// Major version of the plugin's API.
        major_version: c_int,
        /// Minor version of the plugin's API.
        minor_version: c_int,
    }
    args PJRT_Error_Destroy_Args sized => PJRT_Error_Destroy -> () {
        error: *mut PJRT_Error,
    }
    args PJRT_Error_Message_Args sized => PJRT_Error_Message -> () {
        error: *const PJRT_Error,
        message: *const c_char,
        message_size: usize,
    }
    /// Status code of a [`PJRT_Error`] (same numbering as absl status codes).
    enum PJRT_Error_Code: i32 {
        PJRT_Error_Code_OK = 0,
        PJRT_Error_Code_CANCELLED = 1,
        PJRT_Error_Code_UNKNOWN = 2,
        PJRT_Error_Code_INVALID_ARGUMENT = 3,
        PJRT_Error_Code_DEADLINE_EXCEEDED = 4,
        PJRT_Error_Code_NOT_FOUND = 5,
        PJRT_Error_Code_ALREADY_EXISTS = 6,
        PJRT_Error_Code_PERMISSION_DENIED = 7,
        PJRT_Error_Code_RESOURCE_EXHAUSTED = 8,
        PJRT_Error_Code_FAILED_PRECONDITION = 9,
        PJRT_Error_Code_ABORTED = 10,
        PJRT_Error_Code_OUT_OF_RANGE = 11,
        PJRT_Error_Code_UNIMPLEMENTED = 12,
        PJRT_Error_Code_INTERNAL = 13,
        PJRT_Error_Code_UNAVAILABLE = 14,
        PJRT_Error_Code_DATA_LOSS = 15,
        PJRT_Error_Code_UNAUTHENTICATED = 16,
    }
    /// Per-error vtable that plugins at 0.107+ place at the start of [`PJRT_Error`].
    struct PJRT_Error_FunctionTable sized {
        struct_size: usize,
        /// Size of the error object that carries this vtable.
        instance_size: usize,
        extension_start: *mut PJRT_Extension_Base,
        /// Frees the error.
        destroy: Option<unsafe extern "C" fn(error: *mut PJRT_Error)>,
        /// Returns the message pointer and length (borrowed from the error).
        message: Option< unsafe extern "C" fn(error: *const PJRT_Error, message: *mut *const c_char, message_size: *mut usize), >,
        /// Returns the status code.
        get_code: Option<unsafe extern "C" fn(error: *const PJRT_Error) -> PJRT_Error_Code>,
        /// Calls the visitor for each payload entry.
        for_each_payload: Option< unsafe extern "C" fn(error: *const PJRT_Error, visitor: Option<PJRT_Error_PayloadVisitor>, user_arg: *mut c_void), >,
    }
    /// An error returned by a PJRT call. Plugins at 0.107+ start it with a vtable pointer; older ones do not, so treat it as opaque and use the `PJRT_Error_*` table entries.
    struct PJRT_Error sized {
        /// Vtable (0.107+ plugins only; never read it on older plugins).
        vtable: *const PJRT_Error_FunctionTable,
    }
    args PJRT_Error_GetCode_Args sized => PJRT_Error_GetCode {
        error: *const PJRT_Error,
        code: PJRT_Error_Code,
    }
    args PJRT_Error_ForEachPayload_Args sized => PJRT_Error_ForEachPayload {
        error: *const PJRT_Error,
        /// Visitor callback (may be null).
        visitor: Option<PJRT_Error_PayloadVisitor>,
        user_arg: *mut c_void,
    }
    /// Which member of a [`PJRT_NamedValue`] union is set.
    enum PJRT_NamedValue_Type: i32 {
        PJRT_NamedValue_kString = 0,
        PJRT_NamedValue_kInt64 = 1,
        PJRT_NamedValue_kInt64List = 2,
        PJRT_NamedValue_kFloat = 3,
        PJRT_NamedValue_kBool = 4,
    }
    /// Value storage of a [`PJRT_NamedValue`] (anonymous union in C).
    union PJRT_NamedValue_Union {
        /// String bytes (not NUL-terminated), for `kString`.
        string_value: *const c_char,
        /// Integer, for `kInt64`.
        int64_value: i64,
        /// Pointer to integers, for `kInt64List`.
        int64_array_value: *const i64,
        /// Float, for `kFloat`.
        float_value: f32,
        /// Boolean, for `kBool`.
        bool_value: bool,
    }
    /// A named, typed value: used for create options, attributes and cost properties.
    args PJRT_NamedValue sized {
        /// Name bytes (not NUL-terminated).
        name: *const c_char,
        name_size: usize,
        /// Which union member is set (a `PJRT_NamedValue_k*` value).
        r#type: PJRT_NamedValue_Type,
        /// The value; the member to read is given by `type` (C: anonymous union).
        value: PJRT_NamedValue_Union,
        /// String length in bytes, list length, or 1 for scalars.
        value_size: usize,
    }
    args PJRT_Plugin_Initialize_Args sized => PJRT_Plugin_Initialize {
    }
    args PJRT_Plugin_Attributes_Args sized => PJRT_Plugin_Attributes {
        attributes: *const PJRT_NamedValue,
        num_attributes: usize,
    }
    opaque PJRT_Event;
    args PJRT_Event_Destroy_Args sized => PJRT_Event_Destroy {
        event: *mut PJRT_Event,
    }
    args PJRT_Event_IsReady_Args sized => PJRT_Event_IsReady {
        event: *mut PJRT_Event,
        is_ready: bool,
    }
    args PJRT_Event_Error_Args sized => PJRT_Event_Error {
        event: *mut PJRT_Event,
    }
    args PJRT_Event_Await_Args sized => PJRT_Event_Await {
        event: *mut PJRT_Event,
    }
    args PJRT_Event_OnReady_Args sized => PJRT_Event_OnReady {
        event: *mut PJRT_Event,
        /// Callback callback (may be null).
        callback: Option<PJRT_Event_OnReadyCallback>,
        user_arg: *mut c_void,
    }
    args PJRT_Event_Create_Args sized => PJRT_Event_Create {
        event: *mut PJRT_Event,
    }
    args PJRT_Event_Set_Args sized => PJRT_Event_Set {
        event: *mut PJRT_Event,
        error_code: PJRT_Error_Code,
        error_message: *const c_char,
        error_message_size: usize,
    }
    opaque PJRT_Client;
    opaque PJRT_Device;
    /// Per-memory vtable that plugins at 0.105+ place at the start of [`PJRT_Memory`].
    args PJRT_Memory_FunctionTable sized {
        /// Size of the memory object that carries this vtable.
        instance_struct_size: usize,
        /// Looks up client data attached to the memory under `key`.
        get_user_data: Option<unsafe extern "C" fn(memory: *mut PJRT_Memory, key: *const c_void) -> *mut c_void>,
        /// Attaches client data (with a destructor) to the memory under `key`.
        set_user_data: Option< unsafe extern "C" fn(memory: *mut PJRT_Memory, key: *const c_void, data: *mut c_void, dtor: Option<unsafe extern "C" fn(arg0: *mut c_void)>), >,
    }
    /// A memory space of a device. Plugins at 0.105+ start it with a vtable pointer; treat it as opaque on older ones.
    struct PJRT_Memory sized {
        /// Vtable (0.105+ plugins only).
        vtable: *const PJRT_Memory_FunctionTable,
    }
    opaque PJRT_DeviceDescription;
    opaque PJRT_TopologyDescription;
    opaque PJRT_Executable;
    opaque PJRT_LoadedExecutable;
    opaque PJRT_Buffer;
    opaque PJRT_FulfillAliasBufferCallback;
    opaque PJRT_AsyncHostToDeviceTransferManager;
    opaque PJRT_PhaseCompiler;
    /// Arguments passed to a [`PJRT_KeyValueGetCallback`].
    args PJRT_KeyValueGetCallback_Args sized => PJRT_KeyValueGetCallback {
        key: *const c_char,
        key_size: usize,
        timeout_in_ms: c_int,
        callback_error: *mut Option<PJRT_CallbackError>,
        user_arg: *mut c_void,
        value: *mut c_char,
        value_size: usize,
        /// Out: value deleter callback callback (may be null).
        value_deleter_callback: Option<PJRT_KeyValueGetCallback_ValueDeleter>,
    }
    /// Arguments passed to a [`PJRT_KeyValueTryGetCallback`].
    args PJRT_KeyValueTryGetCallback_Args sized => PJRT_KeyValueTryGetCallback {
        key: *const c_char,
        key_size: usize,
        callback_error: *mut Option<PJRT_CallbackError>,
        user_arg: *mut c_void,
        value: *mut c_char,
        value_size: usize,
        /// Out: value deleter callback callback (may be null).
        value_deleter_callback: Option<PJRT_KeyValueTryGetCallback_ValueDeleter>,
    }
    /// Arguments passed to a [`PJRT_KeyValuePutCallback`].
    args PJRT_KeyValuePutCallback_Args sized => PJRT_KeyValuePutCallback {
        key: *const c_char,
        key_size: usize,
        value: *const c_char,
        value_size: usize,
        callback_error: *mut Option<PJRT_CallbackError>,
        user_arg: *mut c_void,
    }
    args PJRT_Client_Create_Args sized => PJRT_Client_Create {
        create_options: *const PJRT_NamedValue,
        /// Number of options.
        num_options: usize,
        /// Kv get callback callback (may be null).
        kv_get_callback: Option<PJRT_KeyValueGetCallback>,
        kv_get_user_arg: *mut c_void,
        /// Kv put callback callback (may be null).
        kv_put_callback: Option<PJRT_KeyValuePutCallback>,
        kv_put_user_arg: *mut c_void,
        client: *mut PJRT_Client,
        /// Kv try get callback callback (may be null).
        kv_try_get_callback: Option<PJRT_KeyValueTryGetCallback>,
        kv_try_get_user_arg: *mut c_void,
    }
    args PJRT_Client_Destroy_Args sized => PJRT_Client_Destroy {
        client: *mut PJRT_Client,
    }
    args PJRT_Client_PlatformName_Args sized => PJRT_Client_PlatformName {
        client: *mut PJRT_Client,
        platform_name: *const c_char,
        platform_name_size: usize,
    }
    args PJRT_Client_ProcessIndex_Args sized => PJRT_Client_ProcessIndex {
        client: *mut PJRT_Client,
        process_index: c_int,
    }
    args PJRT_Client_PlatformVersion_Args sized => PJRT_Client_PlatformVersion {
        client: *mut PJRT_Client,
        platform_version: *const c_char,
        platform_version_size: usize,
    }
    args PJRT_Client_TopologyDescription_Args sized => PJRT_Client_TopologyDescription {
        client: *mut PJRT_Client,
        topology: *mut PJRT_TopologyDescription,
    }
    args PJRT_Client_Devices_Args sized => PJRT_Client_Devices {
        client: *mut PJRT_Client,
        devices: *const *mut PJRT_Device,
        num_devices: usize,
    }
    args PJRT_Client_AddressableDevices_Args sized => PJRT_Client_AddressableDevices {
        client: *mut PJRT_Client,
        addressable_devices: *const *mut PJRT_Device,
        num_addressable_devices: usize,
    }
    args PJRT_Client_LookupDevice_Args sized => PJRT_Client_LookupDevice {
        client: *mut PJRT_Client,
        id: c_int,
        device: *mut PJRT_Device,
    }
    args PJRT_Client_LookupAddressableDevice_Args sized => PJRT_Client_LookupAddressableDevice {
        client: *mut PJRT_Client,
        local_hardware_id: c_int,
        addressable_device: *mut PJRT_Device,
    }
    /// State of a process in a multi-process job.
    enum PJRT_ProcessState: i32 {
        PJRT_ProcessState_kUnspecified = 0,
        PJRT_ProcessState_kUninitialized = 1,
        PJRT_ProcessState_kDisconnected = 2,
        PJRT_ProcessState_kConnected = 3,
        PJRT_ProcessState_kError = 4,
    }
    /// Description of one process, passed to `PJRT_Client_UpdateGlobalProcessInfo`.
    struct PJRT_ProcessInfo sized {
        struct_size: usize,
        task_id: c_int,
        incarnation_id: u64,
        state: PJRT_ProcessState,
        error_code: c_int,
        error_message: *const c_char,
        error_message_size: usize,
    }
    args PJRT_Client_UpdateGlobalProcessInfo_Args sized => PJRT_Client_UpdateGlobalProcessInfo {
        client: *mut PJRT_Client,
        process_infos: *mut PJRT_ProcessInfo,
        num_process_infos: usize,
    }
    args PJRT_Client_AddressableMemories_Args sized => PJRT_Client_AddressableMemories {
        client: *mut PJRT_Client,
        addressable_memories: *const *mut PJRT_Memory,
        num_addressable_memories: usize,
    }
    /// A program to compile: code bytes plus a format name such as `"mlir"` or `"hlo"`.
    args PJRT_Program sized {
        /// Program bytes (input for compile; filled in by `OptimizedProgram`).
        code: *mut c_char,
        code_size: usize,
        /// Format name bytes, e.g. `mlir` or `hlo` (not NUL-terminated).
        format: *const c_char,
        format_size: usize,
    }
    args PJRT_Client_Compile_Args sized => PJRT_Client_Compile {
        client: *mut PJRT_Client,
        program: *const PJRT_Program,
        compile_options: *const c_char,
        compile_options_size: usize,
        executable: *mut PJRT_LoadedExecutable,
    }
    args PJRT_Client_Load_Args sized => PJRT_Client_Load {
        client: *mut PJRT_Client,
        executable: *mut PJRT_Executable,
        compile_options: *const c_char,
        compile_options_size: usize,
        loaded_executable: *mut PJRT_LoadedExecutable,
    }
    args PJRT_Client_DefaultDeviceAssignment_Args sized => PJRT_Client_DefaultDeviceAssignment {
        client: *mut PJRT_Client,
        /// Number of replicas.
        num_replicas: c_int,
        /// Number of partitions.
        num_partitions: c_int,
        default_assignment_size: usize,
        default_assignment: *mut c_int,
    }
    args PJRT_Client_DmaMap_Args sized => PJRT_Client_DmaMap {
        client: *mut PJRT_Client,
        data: *mut c_void,
        size: usize,
    }
    args PJRT_Client_DmaUnmap_Args sized => PJRT_Client_DmaUnmap {
        client: *mut PJRT_Client,
        data: *mut c_void,
    }
    args PJRT_AsyncHostToDeviceTransferManager_Destroy_Args sized => PJRT_AsyncHostToDeviceTransferManager_Destroy {
        transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
    }
    args PJRT_AsyncHostToDeviceTransferManager_TransferData_Args sized => PJRT_AsyncHostToDeviceTransferManager_TransferData {
        transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
        buffer_index: c_int,
        data: *const c_void,
        offset: i64,
        transfer_size: i64,
        is_last_transfer: bool,
        done_with_h2d_transfer: *mut PJRT_Event,
    }
    args PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args sized => PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer {
        transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
        buffer_index: c_int,
        buffer_out: *mut PJRT_Buffer,
    }
    args PJRT_AsyncHostToDeviceTransferManager_Device_Args sized => PJRT_AsyncHostToDeviceTransferManager_Device {
        transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
        device_out: *mut PJRT_Device,
    }
    args PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args sized => PJRT_AsyncHostToDeviceTransferManager_BufferCount {
        transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
        buffer_count: usize,
    }
    args PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args sized => PJRT_AsyncHostToDeviceTransferManager_BufferSize {
        transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
        buffer_index: c_int,
        buffer_size: usize,
    }
    args PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args sized => PJRT_AsyncHostToDeviceTransferManager_SetBufferError {
        transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
        buffer_index: c_int,
        error_code: PJRT_Error_Code,
        error_message: *const c_char,
        error_message_size: usize,
    }
    args PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args sized => PJRT_AsyncHostToDeviceTransferManager_AddMetadata {
        transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
        transfer_metadata: *const PJRT_NamedValue,
        /// Number of metadata.
        num_metadata: usize,
    }
    /// Element type of a buffer (PJRT numbering; differs from XLA FFI's).
    enum PJRT_Buffer_Type: i32 {
        PJRT_Buffer_Type_INVALID = 0,
        PJRT_Buffer_Type_PRED = 1,
        PJRT_Buffer_Type_S8 = 2,
        PJRT_Buffer_Type_S16 = 3,
        PJRT_Buffer_Type_S32 = 4,
        PJRT_Buffer_Type_S64 = 5,
        PJRT_Buffer_Type_U8 = 6,
        PJRT_Buffer_Type_U16 = 7,
        PJRT_Buffer_Type_U32 = 8,
        PJRT_Buffer_Type_U64 = 9,
        PJRT_Buffer_Type_F16 = 10,
        PJRT_Buffer_Type_F32 = 11,
        PJRT_Buffer_Type_F64 = 12,
        PJRT_Buffer_Type_BF16 = 13,
        PJRT_Buffer_Type_C64 = 14,
        PJRT_Buffer_Type_C128 = 15,
        PJRT_Buffer_Type_F8E5M2 = 16,
        PJRT_Buffer_Type_F8E4M3FN = 17,
        PJRT_Buffer_Type_F8E4M3B11FNUZ = 18,
        PJRT_Buffer_Type_F8E5M2FNUZ = 19,
        PJRT_Buffer_Type_F8E4M3FNUZ = 20,
        PJRT_Buffer_Type_S4 = 21,
        PJRT_Buffer_Type_U4 = 22,
        PJRT_Buffer_Type_TOKEN = 23,
        PJRT_Buffer_Type_S2 = 24,
        PJRT_Buffer_Type_U2 = 25,
        PJRT_Buffer_Type_F8E4M3 = 26,
        PJRT_Buffer_Type_F8E3M4 = 27,
        PJRT_Buffer_Type_F8E8M0FNU = 28,
        PJRT_Buffer_Type_F4E2M1FN = 29,
        PJRT_Buffer_Type_S1 = 30,
        PJRT_Buffer_Type_U1 = 31,
        PJRT_Buffer_Type_F6E2M3FN = 32,
        PJRT_Buffer_Type_F6E3M2FN = 33,
    }
    /// How long the host memory passed to `BufferFromHostBuffer` must stay valid and unchanged.
    enum PJRT_HostBufferSemantics: i32 {
        PJRT_HostBufferSemantics_kImmutableOnlyDuringCall = 0,
        PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes = 1,
        PJRT_HostBufferSemantics_kImmutableZeroCopy = 2,
        PJRT_HostBufferSemantics_kMutableZeroCopy = 3,
    }
    /// Which member of the [`PJRT_Buffer_MemoryLayout`] union is set.
    enum PJRT_Buffer_MemoryLayout_Type: i32 {
        PJRT_Buffer_MemoryLayout_Type_Tiled = 0,
        PJRT_Buffer_MemoryLayout_Type_Strides = 1,
    }
    /// Tiled layout: minor-to-major order plus optional tiles.
    args PJRT_Buffer_MemoryLayout_Tiled sized {
        minor_to_major: *const i64,
        minor_to_major_size: usize,
        tile_dims: *const i64,
        tile_dim_sizes: *const usize,
        /// Number of tiles.
        num_tiles: usize,
    }
    /// Strided layout: one byte stride per dimension.
    args PJRT_Buffer_MemoryLayout_Strides sized {
        byte_strides: *const i64,
        num_byte_strides: usize,
    }
    /// Storage of a [`PJRT_Buffer_MemoryLayout`] (anonymous union in C).
    union PJRT_Buffer_MemoryLayout_Union {
        /// Tiled layout.
        tiled: PJRT_Buffer_MemoryLayout_Tiled,
        /// Strided layout.
        strides: PJRT_Buffer_MemoryLayout_Strides,
    }
    /// A buffer layout, either tiled or strided.
    args PJRT_Buffer_MemoryLayout sized {
        /// The layout itself; the member to read is given by `type` (C: anonymous union).
        layout: PJRT_Buffer_MemoryLayout_Union,
        /// Which union member is set.
        r#type: PJRT_Buffer_MemoryLayout_Type,
    }
    args PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args sized => PJRT_AsyncHostToDeviceTransferManager_TransferLiteral {
        transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
        buffer_index: c_int,
        data: *const c_void,
        shape_dims: *const i64,
        shape_num_dims: usize,
        shape_element_type: PJRT_Buffer_Type,
        shape_layout: *mut PJRT_Buffer_MemoryLayout,
        done_with_h2d_transfer: *mut PJRT_Event,
    }
    args PJRT_Client_CreateUninitializedBuffer_Args sized => PJRT_Client_CreateUninitializedBuffer {
        client: *mut PJRT_Client,
        shape_dims: *const i64,
        shape_num_dims: usize,
        shape_element_type: PJRT_Buffer_Type,
        shape_layout: *mut PJRT_Buffer_MemoryLayout,
        device: *mut PJRT_Device,
        memory: *mut PJRT_Memory,
        buffer: *mut PJRT_Buffer,
    }
    args PJRT_Client_CreateErrorBuffer_Args sized => PJRT_Client_CreateErrorBuffer {
        client: *mut PJRT_Client,
        error_code: PJRT_Error_Code,
        error_message: *const c_char,
        error_message_size: usize,
        shape_dims: *const i64,
        shape_num_dims: usize,
        shape_element_type: PJRT_Buffer_Type,
        shape_layout: *mut PJRT_Buffer_MemoryLayout,
        memory: *mut PJRT_Memory,
        buffer: *mut PJRT_Buffer,
        payload: *const PJRT_NamedValue,
        num_payload: usize,
    }
    args PJRT_Client_CreateAliasBuffer_Args sized => PJRT_Client_CreateAliasBuffer {
        client: *mut PJRT_Client,
        memory: *mut PJRT_Memory,
        shape_dims: *const i64,
        shape_num_dims: usize,
        shape_element_type: PJRT_Buffer_Type,
        shape_layout: *mut PJRT_Buffer_MemoryLayout,
        alias_buffer: *mut PJRT_Buffer,
        fulfill_alias_buffer_cb: *mut PJRT_FulfillAliasBufferCallback,
    }
    args PJRT_Client_FulfillAliasBuffer_Args sized => PJRT_Client_FulfillAliasBuffer {
        client: *mut PJRT_Client,
        buffer: *mut PJRT_Buffer,
        status_code: PJRT_Error_Code,
        error_message: *const c_char,
        error_message_size: usize,
        fulfill_alias_buffer_cb: *mut PJRT_FulfillAliasBufferCallback,
    }
    args PJRT_Client_BufferFromHostBuffer_Args sized => PJRT_Client_BufferFromHostBuffer {
        client: *mut PJRT_Client,
        data: *const c_void,
        r#type: PJRT_Buffer_Type,
        dims: *const i64,
        num_dims: usize,
        byte_strides: *const i64,
        num_byte_strides: usize,
        host_buffer_semantics: PJRT_HostBufferSemantics,
        device: *mut PJRT_Device,
        memory: *mut PJRT_Memory,
        device_layout: *mut PJRT_Buffer_MemoryLayout,
        done_with_host_buffer: *mut PJRT_Event,
        buffer: *mut PJRT_Buffer,
    }
    args PJRT_Client_CreateViewOfDeviceBuffer_Args sized => PJRT_Client_CreateViewOfDeviceBuffer {
        client: *mut PJRT_Client,
        device_buffer_ptr: *mut c_void,
        dims: *const i64,
        num_dims: usize,
        element_type: PJRT_Buffer_Type,
        layout: *mut PJRT_Buffer_MemoryLayout,
        device: *mut PJRT_Device,
        /// On delete callback callback (may be null).
        on_delete_callback: Option<unsafe extern "C" fn(device_buffer_ptr: *mut c_void, user_arg: *mut c_void)>,
        on_delete_callback_arg: *mut c_void,
        stream: isize,
        buffer: *mut PJRT_Buffer,
        memory: *mut PJRT_Memory,
    }
    /// Dimensions and element type of one buffer to create.
    args PJRT_ShapeSpec sized {
        dims: *const i64,
        num_dims: usize,
        element_type: PJRT_Buffer_Type,
    }
    args PJRT_Client_CreateBuffersForAsyncHostToDevice_Args sized => PJRT_Client_CreateBuffersForAsyncHostToDevice {
        client: *mut PJRT_Client,
        shape_specs: *mut PJRT_ShapeSpec,
        num_shape_specs: usize,
        device_layouts: *mut *mut PJRT_Buffer_MemoryLayout,
        num_device_layouts: usize,
        memory: *mut PJRT_Memory,
        transfer_manager: *mut PJRT_AsyncHostToDeviceTransferManager,
    }
    args PJRT_DeviceDescription_Id_Args sized => PJRT_DeviceDescription_Id {
        device_description: *mut PJRT_DeviceDescription,
        id: c_int,
    }
    args PJRT_DeviceDescription_ProcessIndex_Args sized => PJRT_DeviceDescription_ProcessIndex {
        device_description: *mut PJRT_DeviceDescription,
        process_index: c_int,
    }
    args PJRT_DeviceDescription_Attributes_Args sized => PJRT_DeviceDescription_Attributes {
        device_description: *mut PJRT_DeviceDescription,
        /// Out: number of attributes.
        num_attributes: usize,
        attributes: *const PJRT_NamedValue,
    }
    args PJRT_DeviceDescription_Kind_Args sized => PJRT_DeviceDescription_Kind {
        device_description: *mut PJRT_DeviceDescription,
        device_kind: *const c_char,
        device_kind_size: usize,
    }
    args PJRT_DeviceDescription_DebugString_Args sized => PJRT_DeviceDescription_DebugString {
        device_description: *mut PJRT_DeviceDescription,
        debug_string: *const c_char,
        debug_string_size: usize,
    }
    args PJRT_DeviceDescription_ToString_Args sized => PJRT_DeviceDescription_ToString {
        device_description: *mut PJRT_DeviceDescription,
        to_string: *const c_char,
        to_string_size: usize,
    }
    args PJRT_Device_GetDescription_Args sized => PJRT_Device_GetDescription {
        device: *mut PJRT_Device,
        device_description: *mut PJRT_DeviceDescription,
    }
    args PJRT_Device_IsAddressable_Args sized => PJRT_Device_IsAddressable {
        device: *mut PJRT_Device,
        is_addressable: bool,
    }
    args PJRT_Device_LocalHardwareId_Args sized => PJRT_Device_LocalHardwareId {
        device: *mut PJRT_Device,
        local_hardware_id: c_int,
    }
    args PJRT_Device_AddressableMemories_Args sized => PJRT_Device_AddressableMemories {
        device: *mut PJRT_Device,
        memories: *const *mut PJRT_Memory,
        num_memories: usize,
    }
    args PJRT_Device_DefaultMemory_Args sized => PJRT_Device_DefaultMemory {
        device: *mut PJRT_Device,
        memory: *mut PJRT_Memory,
    }
    args PJRT_Device_MemoryStats_Args sized => PJRT_Device_MemoryStats {
        device: *mut PJRT_Device,
        bytes_in_use: i64,
        peak_bytes_in_use: i64,
        peak_bytes_in_use_is_set: bool,
        /// Out: number of allocs.
        num_allocs: i64,
        /// Out: number of allocs is set.
        num_allocs_is_set: bool,
        largest_alloc_size: i64,
        largest_alloc_size_is_set: bool,
        bytes_limit: i64,
        bytes_limit_is_set: bool,
        bytes_reserved: i64,
        bytes_reserved_is_set: bool,
        peak_bytes_reserved: i64,
        peak_bytes_reserved_is_set: bool,
        bytes_reservable_limit: i64,
        bytes_reservable_limit_is_set: bool,
        largest_free_block_bytes: i64,
        largest_free_block_bytes_is_set: bool,
        pool_bytes: i64,
        pool_bytes_is_set: bool,
        peak_pool_bytes: i64,
        peak_pool_bytes_is_set: bool,
        peak_allocated_bytes: i64,
        peak_allocated_bytes_is_set: bool,
    }
    args PJRT_Device_ClearMemoryStats_Args sized => PJRT_Device_ClearMemoryStats {
        device: *mut PJRT_Device,
    }
    args PJRT_Device_PoisonExecution_Args sized => PJRT_Device_PoisonExecution {
        device: *mut PJRT_Device,
        launch_id: i32,
        error_code: PJRT_Error_Code,
        error_message: *const c_char,
        error_message_size: usize,
        poisoned: bool,
        payload: *const PJRT_NamedValue,
        num_payload: usize,
    }
    opaque PJRT_Device_Attributes;
    args PJRT_Device_GetAttributes_Args sized => PJRT_Device_GetAttributes {
        device: *mut PJRT_Device,
        attributes: *const PJRT_NamedValue,
        num_attributes: usize,
        device_attributes: *mut PJRT_Device_Attributes,
        /// Out: attributes deleter callback (may be null).
        attributes_deleter: Option<unsafe extern "C" fn(device_attributes: *mut PJRT_Device_Attributes)>,
    }
    opaque PJRT_AsyncTrackingEvent;
    args PJRT_Device_CreateAsyncTrackingEvent_Args sized => PJRT_Device_CreateAsyncTrackingEvent {
        device: *mut PJRT_Device,
        description: *const c_char,
        description_size: usize,
        event: *mut PJRT_AsyncTrackingEvent,
    }
    args PJRT_AsyncTrackingEvent_Destroy_Args sized => PJRT_AsyncTrackingEvent_Destroy {
        event: *mut PJRT_AsyncTrackingEvent,
    }
    args PJRT_Memory_Id_Args sized => PJRT_Memory_Id {
        memory: *mut PJRT_Memory,
        id: c_int,
    }
    args PJRT_Memory_Kind_Args sized => PJRT_Memory_Kind {
        memory: *mut PJRT_Memory,
        kind: *const c_char,
        kind_size: usize,
    }
    args PJRT_Memory_Kind_Id_Args sized => PJRT_Memory_Kind_Id {
        memory: *mut PJRT_Memory,
        kind_id: c_int,
    }
    args PJRT_Memory_DebugString_Args sized => PJRT_Memory_DebugString {
        memory: *mut PJRT_Memory,
        debug_string: *const c_char,
        debug_string_size: usize,
    }
    args PJRT_Memory_ToString_Args sized => PJRT_Memory_ToString {
        memory: *mut PJRT_Memory,
        to_string: *const c_char,
        to_string_size: usize,
    }
    args PJRT_Memory_AddressableByDevices_Args sized => PJRT_Memory_AddressableByDevices {
        memory: *mut PJRT_Memory,
        devices: *const *mut PJRT_Device,
        num_devices: usize,
    }
    opaque PJRT_ExecuteContext;
    args PJRT_ExecuteContext_Create_Args sized => PJRT_ExecuteContext_Create {
        context: *mut PJRT_ExecuteContext,
    }
    args PJRT_ExecuteContext_Destroy_Args sized => PJRT_ExecuteContext_Destroy {
        context: *mut PJRT_ExecuteContext,
    }
    args PJRT_Executable_Destroy_Args sized => PJRT_Executable_Destroy {
        executable: *mut PJRT_Executable,
    }
    args PJRT_LoadedExecutable_Destroy_Args sized => PJRT_LoadedExecutable_Destroy {
        executable: *mut PJRT_LoadedExecutable,
    }
    args PJRT_LoadedExecutable_GetExecutable_Args sized => PJRT_LoadedExecutable_GetExecutable {
        loaded_executable: *mut PJRT_LoadedExecutable,
        executable: *mut PJRT_Executable,
    }
    opaque PJRT_DeviceAssignmentSerialized;
    args PJRT_LoadedExecutable_GetDeviceAssignment_Args sized => PJRT_LoadedExecutable_GetDeviceAssignment {
        executable: *mut PJRT_LoadedExecutable,
        serialized_bytes: *const c_char,
        serialized_bytes_size: usize,
        serialized_device_assignment: *mut PJRT_DeviceAssignmentSerialized,
        /// Out: serialized device assignment deleter callback (may be null).
        serialized_device_assignment_deleter: Option<unsafe extern "C" fn(da: *mut PJRT_DeviceAssignmentSerialized)>,
    }
    args PJRT_Executable_Name_Args sized => PJRT_Executable_Name {
        executable: *mut PJRT_Executable,
        executable_name: *const c_char,
        executable_name_size: usize,
    }
    args PJRT_Executable_NumReplicas_Args sized => PJRT_Executable_NumReplicas {
        executable: *mut PJRT_Executable,
        /// Out: number of replicas.
        num_replicas: usize,
    }
    args PJRT_Executable_NumPartitions_Args sized => PJRT_Executable_NumPartitions {
        executable: *mut PJRT_Executable,
        /// Out: number of partitions.
        num_partitions: usize,
    }
    /// Replica and partition of one addressable device of an executable.
    struct PJRT_LogicalDeviceIds {
        replica: c_int,
        partition: c_int,
    }
    args PJRT_LoadedExecutable_AddressableDevices_Args sized => PJRT_LoadedExecutable_AddressableDevices {
        executable: *mut PJRT_LoadedExecutable,
        addressable_devices: *const *mut PJRT_Device,
        num_addressable_devices: usize,
    }
    args PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args sized => PJRT_LoadedExecutable_AddressableDeviceLogicalIds {
        executable: *mut PJRT_LoadedExecutable,
        addressable_device_logical_ids: *mut PJRT_LogicalDeviceIds,
        num_addressable_device_logical_ids: usize,
    }
    args PJRT_Executable_OptimizedProgram_Args sized => PJRT_Executable_OptimizedProgram {
        executable: *mut PJRT_Executable,
        program: *mut PJRT_Program,
    }
    args PJRT_LoadedExecutable_Delete_Args sized => PJRT_LoadedExecutable_Delete {
        executable: *mut PJRT_LoadedExecutable,
    }
    args PJRT_LoadedExecutable_IsDeleted_Args sized => PJRT_LoadedExecutable_IsDeleted {
        executable: *mut PJRT_LoadedExecutable,
        is_deleted: bool,
    }
    /// A block of bytes with its own deleter, used by send/recv callbacks.
    struct PJRT_Chunk {
        data: *mut c_void,
        size: usize,
        /// Deleter callback (may be null).
        deleter: Option<unsafe extern "C" fn(data: *mut c_void, deleter_arg: *mut c_void)>,
        deleter_arg: *mut c_void,
    }
    opaque PJRT_CopyToDeviceStream;
    /// A send callback bound to a channel id.
    struct PJRT_SendCallbackInfo sized {
        channel_id: i64,
        user_arg: *mut c_void,
        /// Send callback callback (may be null).
        send_callback: Option<PJRT_SendCallback>,
    }
    /// A receive callback bound to a channel id.
    struct PJRT_RecvCallbackInfo sized {
        channel_id: i64,
        user_arg: *mut c_void,
        /// Recv callback callback (may be null).
        recv_callback: Option<PJRT_RecvCallback>,
    }
    /// An HLO output callback with its id and operand count.
    struct PJRT_HloOutputCallbackInfo sized {
        user_arg: *mut c_void,
        /// Callback callback (may be null).
        callback: Option<PJRT_HloOutputCallback>,
        callback_id: i64,
        /// Number of operands.
        num_operands: usize,
    }
    opaque PJRT_MultiSlice_Config;
    /// Options for one execution (callbacks, launch id, donation limits, context, ...).
    args PJRT_ExecuteOptions sized {
        send_callbacks: *mut *mut PJRT_SendCallbackInfo,
        recv_callbacks: *mut *mut PJRT_RecvCallbackInfo,
        /// Number of send ops.
        num_send_ops: usize,
        /// Number of recv ops.
        num_recv_ops: usize,
        launch_id: c_int,
        non_donatable_input_indices: *const i64,
        num_non_donatable_input_indices: usize,
        context: *mut PJRT_ExecuteContext,
        call_location: *const c_char,
        /// Number of tasks.
        num_tasks: usize,
        task_ids: *mut c_int,
        incarnation_ids: *mut i64,
        multi_slice_config: *mut PJRT_MultiSlice_Config,
        use_major_to_minor_data_layout_for_callbacks: bool,
        hlo_output_callbacks: *mut PJRT_HloOutputCallbackInfo,
        num_hlo_output_callbacks: usize,
    }
    args PJRT_LoadedExecutable_Execute_Args sized => PJRT_LoadedExecutable_Execute {
        executable: *mut PJRT_LoadedExecutable,
        options: *mut PJRT_ExecuteOptions,
        argument_lists: *const *const *mut PJRT_Buffer,
        /// Number of devices.
        num_devices: usize,
        /// Number of args.
        num_args: usize,
        output_lists: *const *mut *mut PJRT_Buffer,
        device_complete_events: *mut *mut PJRT_Event,
        execute_device: *mut PJRT_Device,
    }
    args PJRT_Executable_NumOutputs_Args sized => PJRT_Executable_NumOutputs {
        executable: *mut PJRT_Executable,
        /// Out: number of outputs.
        num_outputs: usize,
    }
    args PJRT_Executable_SizeOfGeneratedCodeInBytes_Args sized => PJRT_Executable_SizeOfGeneratedCodeInBytes {
        executable: *mut PJRT_Executable,
        size_in_bytes: i64,
    }
    args PJRT_Executable_Fingerprint_Args sized => PJRT_Executable_Fingerprint {
        executable: *mut PJRT_Executable,
        executable_fingerprint: *const c_char,
        executable_fingerprint_size: usize,
    }
    args PJRT_Executable_GetCostAnalysis_Args sized => PJRT_Executable_GetCostAnalysis {
        executable: *mut PJRT_Executable,
        /// Out: number of properties.
        num_properties: usize,
        properties: *const PJRT_NamedValue,
    }
    args PJRT_Executable_GetCompiledMemoryStats_Args sized => PJRT_Executable_GetCompiledMemoryStats {
        executable: *mut PJRT_Executable,
        generated_code_size_in_bytes: i64,
        argument_size_in_bytes: i64,
        output_size_in_bytes: i64,
        alias_size_in_bytes: i64,
        temp_size_in_bytes: i64,
        host_generated_code_size_in_bytes: i64,
        host_argument_size_in_bytes: i64,
        host_output_size_in_bytes: i64,
        host_alias_size_in_bytes: i64,
        host_temp_size_in_bytes: i64,
        peak_memory_in_bytes: i64,
        total_size_in_bytes: i64,
        total_allocation_bytes: i64,
        indefinite_allocations: i64,
        peak_unpadded_heap_bytes: i64,
    }
    args PJRT_Executable_OutputElementTypes_Args sized => PJRT_Executable_OutputElementTypes {
        executable: *mut PJRT_Executable,
        output_types: *mut PJRT_Buffer_Type,
        num_output_types: usize,
    }
    args PJRT_Executable_OutputDimensions_Args sized => PJRT_Executable_OutputDimensions {
        executable: *mut PJRT_Executable,
        /// Number of outputs.
        num_outputs: usize,
        dims: *const i64,
        dim_sizes: *const usize,
    }
    args PJRT_Executable_ParameterMemoryKinds_Args sized => PJRT_Executable_ParameterMemoryKinds {
        executable: *mut PJRT_Executable,
        /// Number of parameters.
        num_parameters: usize,
        memory_kinds: *const *const c_char,
        memory_kind_sizes: *const usize,
    }
    args PJRT_Executable_OutputMemoryKinds_Args sized => PJRT_Executable_OutputMemoryKinds {
        executable: *mut PJRT_Executable,
        /// Number of outputs.
        num_outputs: usize,
        memory_kinds: *const *const c_char,
        memory_kind_sizes: *const usize,
    }
    opaque PJRT_SerializedExecutable;
    opaque PJRT_SerializedCompileOptions;
    args PJRT_Executable_Serialize_Args sized => PJRT_Executable_Serialize {
        executable: *const PJRT_Executable,
        serialized_bytes: *const c_char,
        serialized_bytes_size: usize,
        serialized_executable: *mut PJRT_SerializedExecutable,
        /// Out: serialized executable deleter callback (may be null).
        serialized_executable_deleter: Option<unsafe extern "C" fn(exec: *mut PJRT_SerializedExecutable)>,
    }
    args PJRT_Executable_GetCompileOptions_Args sized => PJRT_Executable_GetCompileOptions {
        executable: *mut PJRT_Executable,
        serialized_bytes: *const c_char,
        serialized_bytes_size: usize,
        serialized_compile_options: *mut PJRT_SerializedCompileOptions,
        /// Out: serialized compile options deleter callback (may be null).
        serialized_compile_options_deleter: Option<unsafe extern "C" fn(options: *mut PJRT_SerializedCompileOptions)>,
    }
    /// Extra options when loading a serialized executable (0.111+).
    struct PJRT_LoadOptions sized {
        struct_size: usize,
        computation_origin: *const i32,
        computation_origin_size: usize,
        multi_slice_config: *mut PJRT_MultiSlice_Config,
    }
    args PJRT_Executable_DeserializeAndLoad_Args sized => PJRT_Executable_DeserializeAndLoad {
        client: *mut PJRT_Client,
        serialized_executable: *const c_char,
        serialized_executable_size: usize,
        loaded_executable: *mut PJRT_LoadedExecutable,
        overridden_serialized_compile_options: *const c_char,
        overridden_serialized_compile_options_size: usize,
        load_options: *mut PJRT_LoadOptions,
    }
    args PJRT_LoadedExecutable_Fingerprint_Args sized => PJRT_LoadedExecutable_Fingerprint {
        executable: *mut PJRT_LoadedExecutable,
        executable_fingerprint: *const c_char,
        executable_fingerprint_size: usize,
    }
    args PJRT_Buffer_Destroy_Args sized => PJRT_Buffer_Destroy {
        buffer: *mut PJRT_Buffer,
    }
    args PJRT_Buffer_ElementType_Args sized => PJRT_Buffer_ElementType {
        buffer: *mut PJRT_Buffer,
        r#type: PJRT_Buffer_Type,
    }
    args PJRT_Buffer_Dimensions_Args sized => PJRT_Buffer_Dimensions {
        buffer: *mut PJRT_Buffer,
        dims: *const i64,
        num_dims: usize,
    }
    args PJRT_Buffer_UnpaddedDimensions_Args sized => PJRT_Buffer_UnpaddedDimensions {
        buffer: *mut PJRT_Buffer,
        unpadded_dims: *const i64,
        /// Out: number of dims.
        num_dims: usize,
    }
    args PJRT_Buffer_DynamicDimensionIndices_Args sized => PJRT_Buffer_DynamicDimensionIndices {
        buffer: *mut PJRT_Buffer,
        dynamic_dim_indices: *const usize,
        /// Out: number of dynamic dims.
        num_dynamic_dims: usize,
    }
    args PJRT_Buffer_GetMemoryLayout_Args sized => PJRT_Buffer_GetMemoryLayout {
        buffer: *mut PJRT_Buffer,
        layout: PJRT_Buffer_MemoryLayout,
    }
    args PJRT_Buffer_ToHostBuffer_Args sized => PJRT_Buffer_ToHostBuffer {
        src: *mut PJRT_Buffer,
        host_layout: *mut PJRT_Buffer_MemoryLayout,
        dst: *mut c_void,
        /// In/out: length of `dst` in bytes or elements.
        dst_size: usize,
        event: *mut PJRT_Event,
    }
    args PJRT_Buffer_OnDeviceSizeInBytes_Args sized => PJRT_Buffer_OnDeviceSizeInBytes {
        buffer: *mut PJRT_Buffer,
        on_device_size_in_bytes: usize,
    }
    args PJRT_Buffer_Delete_Args sized => PJRT_Buffer_Delete {
        buffer: *mut PJRT_Buffer,
    }
    args PJRT_Buffer_IsDeleted_Args sized => PJRT_Buffer_IsDeleted {
        buffer: *mut PJRT_Buffer,
        is_deleted: bool,
    }
    args PJRT_Buffer_CopyRawToHost_Args sized => PJRT_Buffer_CopyRawToHost {
        buffer: *mut PJRT_Buffer,
        dst: *mut c_void,
        offset: i64,
        transfer_size: i64,
        event: *mut PJRT_Event,
    }
    /// Arguments of the ready callback returned by `PJRT_Buffer_CopyRawToHostFuture`.
    struct PJRT_Buffer_CopyRawToHostFuture_Callback_Args sized {
        struct_size: usize,
        callback_data: *mut c_void,
        error_code: PJRT_Error_Code,
        error_message: *const c_char,
        error_message_size: usize,
        dst: *mut c_void,
    }
    args PJRT_Buffer_CopyRawToHostFuture_Args sized => PJRT_Buffer_CopyRawToHostFuture {
        buffer: *mut PJRT_Buffer,
        offset: i64,
        transfer_size: i64,
        event: *mut PJRT_Event,
        callback_data: *mut c_void,
        /// Out: future ready callback callback (may be null).
        future_ready_callback: Option<unsafe extern "C" fn(args: *mut PJRT_Buffer_CopyRawToHostFuture_Callback_Args)>,
    }
    args PJRT_Buffer_CopyToDevice_Args sized => PJRT_Buffer_CopyToDevice {
        buffer: *mut PJRT_Buffer,
        dst_device: *mut PJRT_Device,
        dst_buffer: *mut PJRT_Buffer,
    }
    args PJRT_Buffer_CopyToMemory_Args sized => PJRT_Buffer_CopyToMemory {
        buffer: *mut PJRT_Buffer,
        dst_memory: *mut PJRT_Memory,
        dst_buffer: *mut PJRT_Buffer,
    }
    args PJRT_Buffer_Bitcast_Args sized => PJRT_Buffer_Bitcast {
        buffer: *mut PJRT_Buffer,
        element_type: PJRT_Buffer_Type,
        dims: *const i64,
        num_dims: usize,
        device_layout: *mut PJRT_Buffer_MemoryLayout,
        out_buffer: *mut PJRT_Buffer,
    }
    args PJRT_Buffer_IsOnCpu_Args sized => PJRT_Buffer_IsOnCpu {
        buffer: *mut PJRT_Buffer,
        is_on_cpu: bool,
    }
    args PJRT_Buffer_Device_Args sized => PJRT_Buffer_Device {
        buffer: *mut PJRT_Buffer,
        device: *mut PJRT_Device,
    }
    args PJRT_Buffer_Memory_Args sized => PJRT_Buffer_Memory {
        buffer: *mut PJRT_Buffer,
        memory: *mut PJRT_Memory,
    }
    args PJRT_Buffer_ReadyEvent_Args sized => PJRT_Buffer_ReadyEvent {
        buffer: *mut PJRT_Buffer,
        event: *mut PJRT_Event,
    }
    args PJRT_Buffer_UnsafePointer_Args sized => PJRT_Buffer_UnsafePointer {
        buffer: *mut PJRT_Buffer,
        buffer_pointer: usize,
    }
    args PJRT_Buffer_IncreaseExternalReferenceCount_Args sized => PJRT_Buffer_IncreaseExternalReferenceCount {
        buffer: *mut PJRT_Buffer,
    }
    args PJRT_Buffer_DecreaseExternalReferenceCount_Args sized => PJRT_Buffer_DecreaseExternalReferenceCount {
        buffer: *mut PJRT_Buffer,
    }
    args PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args sized => PJRT_Buffer_OpaqueDeviceMemoryDataPointer {
        buffer: *mut PJRT_Buffer,
        device_memory_ptr: *mut c_void,
    }
    /// Arguments of the dependency callback returned by `PJRT_Buffer_DonateWithControlDependency`.
    struct PJRT_Buffer_DonateWithControlDependency_Callback_Args sized {
        struct_size: usize,
        callback_data: *mut c_void,
        error_code: PJRT_Error_Code,
        error_message: *const c_char,
        error_message_size: usize,
    }
    args PJRT_Buffer_DonateWithControlDependency_Args sized => PJRT_Buffer_DonateWithControlDependency {
        buffer: *mut PJRT_Buffer,
        callback_data: *mut c_void,
        /// Out: dependency ready callback callback (may be null).
        dependency_ready_callback: Option< unsafe extern "C" fn(args: *mut PJRT_Buffer_DonateWithControlDependency_Callback_Args), >,
        out_buffer: *mut PJRT_Buffer,
    }
    args PJRT_CopyToDeviceStream_Destroy_Args sized => PJRT_CopyToDeviceStream_Destroy {
        stream: *mut PJRT_CopyToDeviceStream,
    }
    args PJRT_CopyToDeviceStream_AddChunk_Args sized => PJRT_CopyToDeviceStream_AddChunk {
        stream: *mut PJRT_CopyToDeviceStream,
        chunk: *mut PJRT_Chunk,
        transfer_complete: *mut PJRT_Event,
    }
    args PJRT_CopyToDeviceStream_TotalBytes_Args sized => PJRT_CopyToDeviceStream_TotalBytes {
        stream: *mut PJRT_CopyToDeviceStream,
        total_bytes: i64,
    }
    args PJRT_CopyToDeviceStream_GranuleSize_Args sized => PJRT_CopyToDeviceStream_GranuleSize {
        stream: *mut PJRT_CopyToDeviceStream,
        granule_size_in_bytes: i64,
    }
    args PJRT_CopyToDeviceStream_CurrentBytes_Args sized => PJRT_CopyToDeviceStream_CurrentBytes {
        stream: *mut PJRT_CopyToDeviceStream,
        current_bytes: i64,
    }
    args PJRT_TopologyDescription_Create_Args sized => PJRT_TopologyDescription_Create {
        topology_name: *const c_char,
        topology_name_size: usize,
        create_options: *const PJRT_NamedValue,
        /// Number of options.
        num_options: usize,
        topology: *mut PJRT_TopologyDescription,
    }
    args PJRT_TopologyDescription_Destroy_Args sized => PJRT_TopologyDescription_Destroy {
        topology: *mut PJRT_TopologyDescription,
    }
    args PJRT_TopologyDescription_PlatformVersion_Args sized => PJRT_TopologyDescription_PlatformVersion {
        topology: *mut PJRT_TopologyDescription,
        platform_version: *const c_char,
        platform_version_size: usize,
    }
    args PJRT_TopologyDescription_PlatformName_Args sized => PJRT_TopologyDescription_PlatformName {
        topology: *const PJRT_TopologyDescription,
        platform_name: *const c_char,
        platform_name_size: usize,
    }
    args PJRT_TopologyDescription_GetDeviceDescriptions_Args sized => PJRT_TopologyDescription_GetDeviceDescriptions {
        topology: *const PJRT_TopologyDescription,
        descriptions: *const *mut PJRT_DeviceDescription,
        num_descriptions: usize,
    }
    opaque PJRT_SerializedTopology;
    args PJRT_TopologyDescription_Serialize_Args sized => PJRT_TopologyDescription_Serialize {
        topology: *mut PJRT_TopologyDescription,
        serialized_bytes: *const c_char,
        serialized_bytes_size: usize,
        serialized_topology: *mut PJRT_SerializedTopology,
        /// Out: serialized topology deleter callback (may be null).
        serialized_topology_deleter: Option<unsafe extern "C" fn(serialized_topology: *mut PJRT_SerializedTopology)>,
    }
    args PJRT_TopologyDescription_Deserialize_Args sized => PJRT_TopologyDescription_Deserialize {
        serialized_topology: *const c_char,
        serialized_topology_size: usize,
        topology: *mut PJRT_TopologyDescription,
    }
    args PJRT_TopologyDescription_Attributes_Args sized => PJRT_TopologyDescription_Attributes {
        topology: *mut PJRT_TopologyDescription,
        attributes: *const PJRT_NamedValue,
        num_attributes: usize,
    }
    args PJRT_TopologyDescription_Fingerprint_Args sized => PJRT_TopologyDescription_Fingerprint {
        topology: *const PJRT_TopologyDescription,
        fingerprint: u64,
    }
    args PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args sized => PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace {
        topology: *const PJRT_TopologyDescription,
        memory_space_kind_id: c_int,
        dims: *const i64,
        num_dims: usize,
        element_type: PJRT_Buffer_Type,
        layout: *const PJRT_Buffer_MemoryLayout,
        serialized_shape: *const c_char,
        serialized_shape_size: usize,
        /// Out: serialized shape deleter callback (may be null).
        serialized_shape_deleter: Option<unsafe extern "C" fn(arg0: *const c_char)>,
    }
    args PJRT_TopologyDescription_GetMemorySpaceKindIds_Args sized => PJRT_TopologyDescription_GetMemorySpaceKindIds {
        topology: *const PJRT_TopologyDescription,
        memory_space_kind_ids: *const c_int,
        num_memory_space_kind_ids: usize,
    }
    args PJRT_Compile_Args sized => PJRT_Compile {
        topology: *const PJRT_TopologyDescription,
        program: *const PJRT_Program,
        compile_options: *const c_char,
        compile_options_size: usize,
        client: *mut PJRT_Client,
        executable: *mut PJRT_Executable,
    }
}

/// One slot of [`PJRT_Api`]: its C name and the minor version that added it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PjrtEntry {
    /// C name of the entry (also the field name in [`PJRT_Api`]).
    pub name: &'static str,
    /// PJRT minor version that introduced the entry at this slot.
    pub since_minor: u32,
}

api_table! {
    PJRT_Error_Destroy = 57,
    PJRT_Error_Message = 57,
    PJRT_Error_GetCode = 57,
    PJRT_Plugin_Initialize = 57,
    PJRT_Plugin_Attributes = 57,
    PJRT_Event_Destroy = 57,
    PJRT_Event_IsReady = 57,
    PJRT_Event_Error = 57,
    PJRT_Event_Await = 57,
    PJRT_Event_OnReady = 57,
    PJRT_Client_Create = 57,
    PJRT_Client_Destroy = 57,
    PJRT_Client_PlatformName = 57,
    PJRT_Client_ProcessIndex = 57,
    PJRT_Client_PlatformVersion = 57,
    PJRT_Client_Devices = 57,
    PJRT_Client_AddressableDevices = 57,
    PJRT_Client_LookupDevice = 57,
    PJRT_Client_LookupAddressableDevice = 57,
    PJRT_Client_AddressableMemories = 57,
    PJRT_Client_Compile = 57,
    PJRT_Client_DefaultDeviceAssignment = 57,
    PJRT_Client_BufferFromHostBuffer = 57,
    PJRT_DeviceDescription_Id = 57,
    PJRT_DeviceDescription_ProcessIndex = 57,
    PJRT_DeviceDescription_Attributes = 57,
    PJRT_DeviceDescription_Kind = 57,
    PJRT_DeviceDescription_DebugString = 57,
    PJRT_DeviceDescription_ToString = 57,
    PJRT_Device_GetDescription = 57,
    PJRT_Device_IsAddressable = 57,
    PJRT_Device_LocalHardwareId = 57,
    PJRT_Device_AddressableMemories = 57,
    PJRT_Device_DefaultMemory = 57,
    PJRT_Device_MemoryStats = 57,
    PJRT_Memory_Id = 57,
    PJRT_Memory_Kind = 57,
    PJRT_Memory_DebugString = 57,
    PJRT_Memory_ToString = 57,
    PJRT_Memory_AddressableByDevices = 57,
    PJRT_Executable_Destroy = 57,
    PJRT_Executable_Name = 57,
    PJRT_Executable_NumReplicas = 57,
    PJRT_Executable_NumPartitions = 57,
    PJRT_Executable_NumOutputs = 57,
    PJRT_Executable_SizeOfGeneratedCodeInBytes = 57,
    PJRT_Executable_GetCostAnalysis = 57,
    PJRT_Executable_OutputMemoryKinds = 57,
    PJRT_Executable_OptimizedProgram = 57,
    PJRT_Executable_Serialize = 57,
    PJRT_LoadedExecutable_Destroy = 57,
    PJRT_LoadedExecutable_GetExecutable = 57,
    PJRT_LoadedExecutable_AddressableDevices = 57,
    PJRT_LoadedExecutable_Delete = 57,
    PJRT_LoadedExecutable_IsDeleted = 57,
    PJRT_LoadedExecutable_Execute = 57,
    PJRT_Executable_DeserializeAndLoad = 57,
    PJRT_LoadedExecutable_Fingerprint = 57,
    PJRT_Buffer_Destroy = 57,
    PJRT_Buffer_ElementType = 57,
    PJRT_Buffer_Dimensions = 57,
    PJRT_Buffer_UnpaddedDimensions = 57,
    PJRT_Buffer_DynamicDimensionIndices = 57,
    PJRT_Buffer_GetMemoryLayout = 57,
    PJRT_Buffer_OnDeviceSizeInBytes = 57,
    PJRT_Buffer_Device = 57,
    PJRT_Buffer_Memory = 57,
    PJRT_Buffer_Delete = 57,
    PJRT_Buffer_IsDeleted = 57,
    PJRT_Buffer_CopyToDevice = 57,
    PJRT_Buffer_ToHostBuffer = 57,
    PJRT_Buffer_IsOnCpu = 57,
    PJRT_Buffer_ReadyEvent = 57,
    PJRT_Buffer_UnsafePointer = 57,
    PJRT_Buffer_IncreaseExternalReferenceCount = 57,
    PJRT_Buffer_DecreaseExternalReferenceCount = 57,
    PJRT_Buffer_OpaqueDeviceMemoryDataPointer = 57,
    PJRT_CopyToDeviceStream_Destroy = 57,
    PJRT_CopyToDeviceStream_AddChunk = 57,
    PJRT_CopyToDeviceStream_TotalBytes = 57,
    PJRT_CopyToDeviceStream_GranuleSize = 57,
    PJRT_CopyToDeviceStream_CurrentBytes = 57,
    PJRT_TopologyDescription_Create = 57,
    PJRT_TopologyDescription_Destroy = 57,
    PJRT_TopologyDescription_PlatformName = 57,
    PJRT_TopologyDescription_PlatformVersion = 57,
    PJRT_TopologyDescription_GetDeviceDescriptions = 57,
    PJRT_TopologyDescription_Serialize = 57,
    PJRT_TopologyDescription_Attributes = 57,
    PJRT_Compile = 57,
    PJRT_Executable_OutputElementTypes = 57,
    PJRT_Executable_OutputDimensions = 57,
    PJRT_Buffer_CopyToMemory = 57,
    PJRT_Client_CreateViewOfDeviceBuffer = 57,
    PJRT_Executable_Fingerprint = 57,
    PJRT_Client_TopologyDescription = 57,
    PJRT_Executable_GetCompiledMemoryStats = 57,
    PJRT_Memory_Kind_Id = 57,
    PJRT_ExecuteContext_Create = 57,
    PJRT_ExecuteContext_Destroy = 57,
    PJRT_Buffer_CopyRawToHost = 57,
    PJRT_AsyncHostToDeviceTransferManager_Destroy = 60,
    PJRT_AsyncHostToDeviceTransferManager_TransferData = 60,
    PJRT_Client_CreateBuffersForAsyncHostToDevice = 60,
    PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer = 62,
    PJRT_AsyncHostToDeviceTransferManager_Device = 62,
    PJRT_AsyncHostToDeviceTransferManager_BufferCount = 62,
    PJRT_AsyncHostToDeviceTransferManager_BufferSize = 62,
    PJRT_AsyncHostToDeviceTransferManager_SetBufferError = 62,
    PJRT_AsyncHostToDeviceTransferManager_AddMetadata = 62,
    PJRT_Client_DmaMap = 67,
    PJRT_Client_DmaUnmap = 67,
    PJRT_Client_CreateUninitializedBuffer = 69,
    PJRT_Client_UpdateGlobalProcessInfo = 73,
    PJRT_TopologyDescription_Deserialize = 75,
    PJRT_Client_CreateAliasBuffer = 77,
    PJRT_Client_FulfillAliasBuffer = 77,
    PJRT_LoadedExecutable_GetDeviceAssignment = 79,
    PJRT_Client_CreateErrorBuffer = 82,
    PJRT_AsyncHostToDeviceTransferManager_TransferLiteral = 83,
    PJRT_Buffer_CopyRawToHostFuture = 84,
    PJRT_Device_PoisonExecution = 85,
    PJRT_Device_CreateAsyncTrackingEvent = 86,
    PJRT_AsyncTrackingEvent_Destroy = 86,
    PJRT_Executable_GetCompileOptions = 87,
    PJRT_Buffer_DonateWithControlDependency = 88,
    PJRT_Event_Create = 89,
    PJRT_Event_Set = 89,
    PJRT_Device_GetAttributes = 92,
    PJRT_Client_Load = 95,
    PJRT_LoadedExecutable_AddressableDeviceLogicalIds = 96,
    PJRT_Buffer_Bitcast = 98,
    PJRT_Error_ForEachPayload = 99,
    PJRT_TopologyDescription_Fingerprint = 101,
    PJRT_Executable_ParameterMemoryKinds = 102,
    PJRT_Device_ClearMemoryStats = 106,
    PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace = 109,
    PJRT_TopologyDescription_GetMemorySpaceKindIds = 110,
}
