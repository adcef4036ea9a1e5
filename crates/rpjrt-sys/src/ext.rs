//! PJRT extension structs, laid out as at PJRT 0.114.
//!
//! A plugin advertises extensions as a linked list of structs starting at
//! `PJRT_Api::extension_start`; each begins with a [`PJRT_Extension_Base`]
//! whose `type` is one of the `PJRT_Extension_Type_*` tags. The layout of an
//! extension follows the plugin's PJRT minor, not the extension's own version
//! constant.
//!
//! Only the extensions rpjrt uses or is about to use are declared: FFI, GPU
//! custom calls, Layouts, MemoryDescriptions, PhaseCompile, Shardings, Triton,
//! CrossHostTransfers and Profiler. The last two come from headers outside the
//! measured set and are declared `@unchecked`. Every extension type tag is still in
//! `PJRT_Extension_Type`, so an unknown extension can be named and skipped.

use crate::pjrt::*;

use core::ffi::{c_char, c_int, c_void};

// ==== pjrt_c_api_ffi_extension.h ====

c_api! {
    facts FFI_FACTS;
    /// Header constant `PJRT_API_FFI_EXTENSION_VERSION`.
    const PJRT_API_FFI_EXTENSION_VERSION: c_int = 3;
    /// Type information for a user type registered with the FFI extension.
    struct PJRT_FFI_Type_Info {
        /// Frees an object of this type (may be null).
        deleter: Option<unsafe extern "C" fn(object: *mut c_void)>,
        /// Reserved for future use; leave null.
        serialize: Option<unsafe extern "C" fn()>,
        /// Reserved for future use; leave null.
        deserialize: Option<unsafe extern "C" fn()>,
    }
    args PJRT_FFI_Type_Register_Args sized => PJRT_FFI_Type_Register {
        /// Type name bytes (not NUL-terminated; length in `type_name_size`).
        type_name: *const c_char,
        type_name_size: usize,
        type_id: i64,
        type_info: *mut PJRT_FFI_Type_Info,
    }
    /// A typed user-data pointer added to an execute context.
    struct PJRT_FFI_UserData {
        /// Type id returned by type registration.
        type_id: i64,
        /// The user data pointer.
        data: *mut c_void,
    }
    args PJRT_FFI_UserData_Add_Args sized => PJRT_FFI_UserData_Add {
        context: *mut PJRT_ExecuteContext,
        user_data: PJRT_FFI_UserData,
    }
    /// Bit flags describing an FFI handler.
    enum PJRT_FFI_Handler_TraitsBits: i32 {
        PJRT_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE = 1,
    }
    struct PJRT_FFI_Register_Handler_Args sized => PJRT_FFI_Register_Handler {
        struct_size: usize,
        /// Custom-call target name (not NUL-terminated).
        target_name: *const c_char,
        target_name_size: usize,
        /// The handler: an `XLA_FFI_Handler` function pointer for typed calls.
        handler: *mut c_void,
        /// Platform the handler is for, e.g. `cpu` or `cuda` (not NUL-terminated).
        platform_name: *const c_char,
        platform_name_size: usize,
        traits: PJRT_FFI_Handler_TraitsBits,
    }
    /// Typedef name the header gives [`PJRT_FFI_Extension`].
    type PJRT_FFI = PJRT_FFI_Extension;
    /// Extension (`PJRT_Extension_Type_FFI`): register XLA FFI handlers and types, attach user data.
    struct PJRT_FFI_Extension sized {
        /// Extension header; `type` says which extension this is.
        base: PJRT_Extension_Base,
        /// Type register callback (may be null).
        type_register: Option<PJRT_FFI_Type_Register>,
        /// User data add callback (may be null).
        user_data_add: Option<PJRT_FFI_UserData_Add>,
        /// Register handler callback (may be null).
        register_handler: Option<PJRT_FFI_Register_Handler>,
    }
}

// ==== pjrt_c_api_gpu_extension.h ====

c_api! {
    facts GPU_FACTS;
    /// Header constant `PJRT_API_GPU_EXTENSION_VERSION`.
    const PJRT_API_GPU_EXTENSION_VERSION: c_int = 2;
    struct PJRT_Gpu_Register_Custom_Call_Args sized => PJRT_Gpu_Register_Custom_Call {
        struct_size: usize,
        /// Function name bytes (not NUL-terminated; length in `function_name_size`).
        function_name: *const c_char,
        function_name_size: usize,
        api_version: c_int,
        handler_instantiate: *mut c_void,
        handler_prepare: *mut c_void,
        handler_initialize: *mut c_void,
        handler_execute: *mut c_void,
    }
    /// Extension (`PJRT_Extension_Type_Gpu_Custom_Call`): register GPU custom calls.
    struct PJRT_Gpu_Custom_Call sized {
        /// Extension header; `type` says which extension this is.
        base: PJRT_Extension_Base,
        /// Custom call callback (may be null).
        custom_call: Option<PJRT_Gpu_Register_Custom_Call>,
    }
}

// ==== pjrt_c_api_layouts_extension.h ====

c_api! {
    facts LAYOUTS_FACTS;
    /// Header constant `PJRT_API_LAYOUTS_EXTENSION_VERSION`.
    const PJRT_API_LAYOUTS_EXTENSION_VERSION: c_int = 4;
    opaque PJRT_Layouts_MemoryLayout;
    opaque PJRT_Layouts_SerializedLayout;
    args PJRT_Layouts_MemoryLayout_Destroy_Args sized => PJRT_Layouts_MemoryLayout_Destroy {
        layout: *mut PJRT_Layouts_MemoryLayout,
    }
    args PJRT_Layouts_MemoryLayout_Serialize_Args sized => PJRT_Layouts_MemoryLayout_Serialize {
        layout: *mut PJRT_Layouts_MemoryLayout,
        /// Out: serialized bytes bytes (not NUL-terminated; length in `serialized_bytes_size`).
        serialized_bytes: *const c_char,
        serialized_bytes_size: usize,
        serialized_layout: *mut PJRT_Layouts_SerializedLayout,
        /// Out: serialized layout deleter callback (may be null).
        serialized_layout_deleter: Option<unsafe extern "C" fn(s_layout: *mut PJRT_Layouts_SerializedLayout)>,
    }
    args PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args sized => PJRT_Layouts_PJRT_Buffer_MemoryLayout {
        buffer: *mut PJRT_Buffer,
        /// Out: the resulting [`PJRT_Layouts_MemoryLayout`].
        layout: *mut PJRT_Layouts_MemoryLayout,
    }
    args PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args sized => PJRT_Layouts_PJRT_Client_GetDefaultLayout {
        client: *mut PJRT_Client,
        r#type: PJRT_Buffer_Type,
        dims: *const i64,
        num_dims: usize,
        /// Out: the resulting [`PJRT_Layouts_MemoryLayout`].
        layout: *mut PJRT_Layouts_MemoryLayout,
    }
    args PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args sized => PJRT_Layouts_PJRT_Topology_GetDefaultLayout {
        topology_description: *mut PJRT_TopologyDescription,
        r#type: PJRT_Buffer_Type,
        dims: *const i64,
        num_dims: usize,
        /// Out: the resulting [`PJRT_Layouts_MemoryLayout`].
        layout: *mut PJRT_Layouts_MemoryLayout,
    }
    args PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args sized => PJRT_Layouts_PJRT_Executable_GetOutputLayouts {
        executable: *mut PJRT_Executable,
        /// Out: number of outputs.
        num_outputs: usize,
        layouts: *mut *mut PJRT_Layouts_MemoryLayout,
    }
    args PJRT_Layouts_PJRT_Executable_GetParameterLayouts_Args sized => PJRT_Layouts_PJRT_Executable_GetParameterLayouts {
        executable: *mut PJRT_Executable,
        /// Out: number of parameters.
        num_parameters: usize,
        layouts: *mut *mut PJRT_Layouts_MemoryLayout,
    }
    /// Extension (`PJRT_Extension_Type_Layouts`): query and serialize buffer and executable layouts.
    struct PJRT_Layouts_Extension sized {
        /// Extension header; `type` says which extension this is.
        base: PJRT_Extension_Base,
        PJRT_Layouts_MemoryLayout_Destroy: Option<PJRT_Layouts_MemoryLayout_Destroy>,
        PJRT_Layouts_MemoryLayout_Serialize: Option<PJRT_Layouts_MemoryLayout_Serialize>,
        PJRT_Layouts_PJRT_Client_GetDefaultLayout: Option<PJRT_Layouts_PJRT_Client_GetDefaultLayout>,
        PJRT_Layouts_PJRT_Buffer_MemoryLayout: Option<PJRT_Layouts_PJRT_Buffer_MemoryLayout>,
        PJRT_Layouts_PJRT_Topology_GetDefaultLayout: Option<PJRT_Layouts_PJRT_Topology_GetDefaultLayout>,
        PJRT_Layouts_PJRT_Executable_GetOutputLayouts: Option<PJRT_Layouts_PJRT_Executable_GetOutputLayouts>,
        PJRT_Layouts_PJRT_Executable_GetParameterLayouts: Option<PJRT_Layouts_PJRT_Executable_GetParameterLayouts>,
    }
}

// ==== pjrt_c_api_memory_descriptions_extension.h ====

c_api! {
    facts MEMORY_DESCRIPTIONS_FACTS;
    /// Header constant `PJRT_API_MEMORY_DESCRIPTIONS_EXTENSION_VERSION`.
    const PJRT_API_MEMORY_DESCRIPTIONS_EXTENSION_VERSION: c_int = 1;
    opaque PJRT_MemoryDescription;
    args PJRT_DeviceDescription_MemoryDescriptions_Args sized => PJRT_DeviceDescription_MemoryDescriptions {
        device_description: *mut PJRT_DeviceDescription,
        memory_descriptions: *const *const PJRT_MemoryDescription,
        num_memory_descriptions: usize,
        default_memory_index: usize,
    }
    args PJRT_MemoryDescription_Kind_Args sized => PJRT_MemoryDescription_Kind {
        memory_description: *const PJRT_MemoryDescription,
        /// Out: kind bytes (not NUL-terminated; length in `kind_size`).
        kind: *const c_char,
        kind_size: usize,
        kind_id: c_int,
    }
    /// Extension (`PJRT_Extension_Type_MemoryDescriptions`): memory kinds of a device description.
    struct PJRT_MemoryDescriptions_Extension sized {
        /// Extension header; `type` says which extension this is.
        base: PJRT_Extension_Base,
        PJRT_DeviceDescription_MemoryDescriptions: Option<PJRT_DeviceDescription_MemoryDescriptions>,
        PJRT_MemoryDescription_Kind: Option<PJRT_MemoryDescription_Kind>,
    }
}

// ==== pjrt_c_api_phase_compile_extension.h ====

c_api! {
    facts PHASE_COMPILE_FACTS;
    /// Header constant `PJRT_API_PHASE_COMPILE_EXTENSION_VERSION`.
    const PJRT_API_PHASE_COMPILE_EXTENSION_VERSION: c_int = 1;
    args PJRT_PhaseCompile_Get_Compiler_Args sized => PJRT_PhaseCompile_Get_Compiler {
        /// Out: the resulting [`PJRT_PhaseCompiler`].
        phase_compiler: *const PJRT_PhaseCompiler,
    }
    args PJRT_PhaseCompile_Destroy_Compiler_Args sized => PJRT_PhaseCompile_Destroy_Compiler -> () {
        phase_compiler: *const PJRT_PhaseCompiler,
    }
    args PJRT_PhaseCompile_Run_Phase_Args sized => PJRT_PhaseCompile_Run_Phase {
        phase_compiler: *const PJRT_PhaseCompiler,
        input_programs: *mut *const c_char,
        input_programs_sizes: *const usize,
        num_input_programs: usize,
        phases_to_run: *mut *const c_char,
        phases_to_run_sizes: *const usize,
        num_phases_to_run: usize,
        /// Compile options bytes (not NUL-terminated; length in `compile_options_size`).
        compile_options: *const c_char,
        compile_options_size: usize,
        topology: *mut PJRT_TopologyDescription,
        output_programs: *mut *const c_char,
        output_programs_sizes: *const usize,
        num_output_programs: usize,
    }
    args PJRT_PhaseCompile_Get_PhaseNames_Args sized => PJRT_PhaseCompile_Get_PhaseNames {
        phase_compiler: *const PJRT_PhaseCompiler,
        phase_names: *mut *const c_char,
        phase_names_sizes: *const usize,
        num_phase_names: usize,
    }
    args PJRT_PhaseCompile_C_Buffers_Destroy_Args sized => PJRT_PhaseCompile_C_Buffers_Destroy -> () {
        char_buffers: *mut *const c_char,
        char_buffer_sizes: *const usize,
        num_char_buffers: usize,
    }
    /// Extension (`PJRT_Extension_Type_PhaseCompile`): run compilation phase by phase.
    struct PJRT_PhaseCompile_Extension sized {
        /// Extension header; `type` says which extension this is.
        base: PJRT_Extension_Base,
        /// Phase compile get compiler callback (may be null).
        phase_compile_get_compiler: Option<PJRT_PhaseCompile_Get_Compiler>,
        /// Phase compile destroy compiler callback (may be null).
        phase_compile_destroy_compiler: Option<PJRT_PhaseCompile_Destroy_Compiler>,
        /// Phase compile run phases callback (may be null).
        phase_compile_run_phases: Option<PJRT_PhaseCompile_Run_Phase>,
        /// Phase compile get phase names callback (may be null).
        phase_compile_get_phase_names: Option<PJRT_PhaseCompile_Get_PhaseNames>,
        /// Phase compile c buffers destroy callback (may be null).
        phase_compile_c_buffers_destroy: Option<PJRT_PhaseCompile_C_Buffers_Destroy>,
    }
}

// ==== pjrt_c_api_shardings_extension.h ====

c_api! {
    facts SHARDINGS_FACTS;
    /// Header constant `PJRT_API_SHARDINGS_EXTENSION_VERSION`.
    const PJRT_API_SHARDINGS_EXTENSION_VERSION: c_int = 1;
    args PJRT_Shardings_PJRT_Executable_ParameterShardings_Args sized => PJRT_Shardings_PJRT_Executable_ParameterShardings {
        executable: *mut PJRT_Executable,
        /// Out: number of parameters.
        num_parameters: usize,
        shardings: *const *const c_char,
        sharding_sizes: *const usize,
    }
    args PJRT_Shardings_PJRT_Executable_OutputShardings_Args sized => PJRT_Shardings_PJRT_Executable_OutputShardings {
        executable: *mut PJRT_Executable,
        /// Out: number of outputs.
        num_outputs: usize,
        shardings: *const *const c_char,
        sharding_sizes: *const usize,
    }
    /// Extension (`PJRT_Extension_Type_Shardings`): parameter and output shardings of an executable.
    struct PJRT_Shardings_Extension sized {
        /// Extension header; `type` says which extension this is.
        base: PJRT_Extension_Base,
        PJRT_Shardings_PJRT_Executable_ParameterShardings: Option<PJRT_Shardings_PJRT_Executable_ParameterShardings>,
        PJRT_Shardings_PJRT_Executable_OutputShardings: Option<PJRT_Shardings_PJRT_Executable_OutputShardings>,
    }
}

// ==== pjrt_c_api_triton_extension.h ====

c_api! {
    facts TRITON_FACTS;
    /// Header constant `PJRT_API_TRITON_EXTENSION_VERSION`.
    const PJRT_API_TRITON_EXTENSION_VERSION: c_int = 2;
    /// Args of `PJRT_Triton_Compile`, version 2 of the extension. Version 1 had three
    /// `c_int` cluster dimensions where `out_path` and `out_path_size` are (92 bytes);
    /// version 3 appends an output format and a binary. The output strings are the
    /// caller's, allocated by the plugin with C++ `new[]`.
    struct PJRT_Triton_Compile_Args sized => PJRT_Triton_Compile {
        struct_size: usize,
        /// Module bytes (not NUL-terminated; length in `module_size`).
        module: *const c_char,
        module_size: usize,
        /// Arch name bytes (not NUL-terminated; length in `arch_name_size`).
        arch_name: *const c_char,
        arch_name_size: usize,
        /// Number of warps.
        num_warps: c_int,
        /// Number of ctas.
        num_ctas: c_int,
        /// Number of stages.
        num_stages: c_int,
        /// Out asm bytes (not NUL-terminated; length in `out_asm_size`).
        out_asm: *const c_char,
        out_asm_size: usize,
        out_smem_bytes: i64,
        /// Out path bytes (not NUL-terminated; length in `out_path_size`).
        out_path: *const c_char,
        out_path_size: usize,
    }
    /// Typedef name the header gives [`PJRT_Triton_Extension`].
    type PJRT_Triton = PJRT_Triton_Extension;
    /// Extension (`PJRT_Extension_Type_Triton`): compile Triton kernels.
    struct PJRT_Triton_Extension sized {
        /// Extension header; `type` says which extension this is.
        base: PJRT_Extension_Base,
        /// Compile callback (may be null).
        compile: Option<PJRT_Triton_Compile>,
    }
}

// ==== CrossHostTransfers (pjrt_c_api_cross_host_transfers_extension.h, not vendored) ====

/// Header constant `PJRT_API_CROSS_HOST_TRANSFERS_EXTENSION_VERSION`.
pub const PJRT_API_CROSS_HOST_TRANSFERS_EXTENSION_VERSION: c_int = 5;

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

/// Called when a remote send completes or fails.
pub type PJRT_Transfers_CrossHostRemoteSendCallback =
    unsafe extern "C" fn(error: *mut PJRT_Error, sends_were_enqueued: bool, user_arg: *mut c_void);

/// Sends a buffer to a receive buffer on another host (older cross-host API).
pub type PJRT_Buffer_CopyToRemoteDevice =
    unsafe extern "C" fn(args: *mut PJRT_Transfers_PJRT_Buffer_CopyToRemoteDevice_Args);

c_api! {
    @unchecked
    args PJRT_Transfers_PJRT_Client_CrossHostSendBuffers_Args sized => PJRT_Transfers_PJRT_Client_CrossHostSendBuffers {
        client: *mut PJRT_Client,
        /// Number of buffers.
        num_buffers: usize,
        buffers: *mut *mut PJRT_Buffer,
        dst_global_device_ids: *const i32,
        transfer_keys: *const i64,
        send_events: *mut *mut PJRT_Event,
    }
    args PJRT_Transfers_PJRT_Client_CrossHostReceiveBuffers_Args sized => PJRT_Transfers_PJRT_Client_CrossHostReceiveBuffers {
        client: *mut PJRT_Client,
        /// Number of shapes.
        num_shapes: usize,
        shape_num_dims: *mut usize,
        /// Number of dims.
        num_dims: *mut *const i64,
        element_types: *mut PJRT_Buffer_Type,
        layouts: *mut *mut PJRT_Buffer_MemoryLayout,
        device: *mut PJRT_Device,
        src_global_device_ids: *const i32,
        transfer_keys: *const i64,
        buffers: *mut *mut PJRT_Buffer,
    }
    /// A receive notifier with its user argument.
    struct PJRT_Transfers_CrossHostRecvNotifierInfo sized {
        /// Opaque pointer handed back to the matching callback.
        user_arg: *mut c_void,
        /// Notifier callback (may be null).
        notifier: Option<PJRT_Transfers_CrossHostRecvNotifier>,
    }
    args PJRT_Transfers_PJRT_Client_MakeCrossHostReceiveBuffers_Args sized => PJRT_Transfers_PJRT_Client_MakeCrossHostReceiveBuffers {
        client: *mut PJRT_Client,
        /// Number of shapes.
        num_shapes: usize,
        shape_num_dims: *mut usize,
        /// Number of dims.
        num_dims: *mut *const i64,
        element_types: *mut PJRT_Buffer_Type,
        layouts: *mut *mut PJRT_Buffer_MemoryLayout,
        device: *mut PJRT_Device,
        notifier: PJRT_Transfers_CrossHostRecvNotifierInfo,
        buffers: *mut *mut PJRT_Buffer,
        num_buffers: usize,
    }
    /// A remote-send callback with its user argument.
    struct PJRT_Transfers_CrossHostRemoteSendCallbackInfo sized {
        /// Opaque pointer handed back to the matching callback.
        user_arg: *mut c_void,
        /// On done callback (may be null).
        on_done: Option<PJRT_Transfers_CrossHostRemoteSendCallback>,
    }
    /// Arguments of [`PJRT_Buffer_CopyToRemoteDevice`].
    args PJRT_Transfers_PJRT_Buffer_CopyToRemoteDevice_Args sized {
        buffer: *mut PJRT_Buffer,
        event: *mut PJRT_Event,
        serialized_descriptor: *mut *mut c_char,
        serialized_descriptor_size: *mut usize,
        on_done: PJRT_Transfers_CrossHostRemoteSendCallbackInfo,
    }
    /// Extension (`PJRT_Extension_Type_CrossHostTransfers`): move buffers between hosts.
    struct PJRT_CrossHostTransfers_Extension sized {
        /// Extension header; `type` says which extension this is.
        base: PJRT_Extension_Base,
        PJRT_Transfers_PJRT_Client_MakeCrossHostReceiveBuffers: Option<PJRT_Transfers_PJRT_Client_MakeCrossHostReceiveBuffers>,
        /// PJRT Transfers PJRT Buffer CopyToRemoteDevice callback (may be null).
        PJRT_Transfers_PJRT_Buffer_CopyToRemoteDevice: Option<PJRT_Buffer_CopyToRemoteDevice>,
        PJRT_Transfers_PJRT_Client_CrossHostReceiveBuffers: Option<PJRT_Transfers_PJRT_Client_CrossHostReceiveBuffers>,
        PJRT_Transfers_PJRT_Client_CrossHostSendBuffers: Option<PJRT_Transfers_PJRT_Client_CrossHostSendBuffers>,
    }
}

// ==== pjrt_c_api_profiler_extension.h and the profiler plugin API it points to ====
//
// Declared from the headers, not measured by `tools/abi-probe` (the profiler API's header
// is outside the measured set): `@unchecked`, with the sizes checked by hand in
// `tests/profiler_abi.rs`.

c_api! {
    @unchecked
    /// Header constant `PJRT_API_PROFILER_EXTENSION_VERSION`.
    const PJRT_API_PROFILER_EXTENSION_VERSION: c_int = 1;
    /// Header constant `PLUGIN_PROFILER_VERSION` (the profiler plugin API's version).
    const PLUGIN_PROFILER_VERSION: c_int = 1;
    opaque PLUGIN_Profiler;
    opaque PLUGIN_Profiler_Error;
    /// Frees a profiler error (the error may be null).
    struct PLUGIN_Profiler_Error_Destroy_Args sized => PLUGIN_Profiler_Error_Destroy -> () {
        struct_size: usize,
        /// Reserved; null.
        priv_: *mut c_void,
        error: *mut PLUGIN_Profiler_Error,
    }
    /// Reads a profiler error's text; the text lives as long as the error.
    struct PLUGIN_Profiler_Error_Message_Args sized => PLUGIN_Profiler_Error_Message -> () {
        struct_size: usize,
        /// Reserved; null.
        priv_: *mut c_void,
        error: *const PLUGIN_Profiler_Error,
        /// Out: message bytes (not NUL-terminated; length in `message_size`).
        message: *const c_char,
        message_size: usize,
    }
    /// Reads a profiler error's status code (the `PJRT_Error_Code` numbers).
    struct PLUGIN_Profiler_Error_GetCode_Args sized => PLUGIN_Profiler_Error_GetCode -> *mut PLUGIN_Profiler_Error {
        struct_size: usize,
        /// Reserved; null.
        priv_: *mut c_void,
        error: *const PLUGIN_Profiler_Error,
        /// Out: the code.
        code: c_int,
    }
    /// Creates a profiler from serialized options (a `ProfileOptions` proto; may be empty).
    struct PLUGIN_Profiler_Create_Args sized => PLUGIN_Profiler_Create -> *mut PLUGIN_Profiler_Error {
        struct_size: usize,
        /// Serialized options bytes (length in `options_size`).
        options: *const c_char,
        options_size: usize,
        /// Out: the new profiler.
        profiler: *mut PLUGIN_Profiler,
    }
    /// Destroys a profiler.
    struct PLUGIN_Profiler_Destroy_Args sized => PLUGIN_Profiler_Destroy -> *mut PLUGIN_Profiler_Error {
        struct_size: usize,
        profiler: *mut PLUGIN_Profiler,
    }
    /// Starts collecting.
    struct PLUGIN_Profiler_Start_Args sized => PLUGIN_Profiler_Start -> *mut PLUGIN_Profiler_Error {
        struct_size: usize,
        profiler: *mut PLUGIN_Profiler,
    }
    /// Stops collecting.
    struct PLUGIN_Profiler_Stop_Args sized => PLUGIN_Profiler_Stop -> *mut PLUGIN_Profiler_Error {
        struct_size: usize,
        profiler: *mut PLUGIN_Profiler,
    }
    /// Hands over what was collected, a serialized `XSpace` proto. The header asks for two
    /// calls (sizes with `buffer` null, then the bytes into the caller's buffer); XLA's
    /// own implementations instead point `buffer` at their copy on the first call.
    struct PLUGIN_Profiler_CollectData_Args sized => PLUGIN_Profiler_CollectData -> *mut PLUGIN_Profiler_Error {
        struct_size: usize,
        profiler: *mut PLUGIN_Profiler,
        /// In/out: the bytes.
        buffer: *mut u8,
        /// Out: their length.
        buffer_size_in_bytes: usize,
    }
    /// The profiler plugin API: a table of the entries above.
    struct PLUGIN_Profiler_Api sized {
        struct_size: usize,
        /// Reserved; null.
        priv_: *mut c_void,
        error_destroy: Option<PLUGIN_Profiler_Error_Destroy>,
        error_message: Option<PLUGIN_Profiler_Error_Message>,
        error_get_code: Option<PLUGIN_Profiler_Error_GetCode>,
        create: Option<PLUGIN_Profiler_Create>,
        destroy: Option<PLUGIN_Profiler_Destroy>,
        start: Option<PLUGIN_Profiler_Start>,
        stop: Option<PLUGIN_Profiler_Stop>,
        collect_data: Option<PLUGIN_Profiler_CollectData>,
    }
    /// Extension (`PJRT_Extension_Type_Profiler`): the plugin's own profiler.
    struct PJRT_Profiler_Extension sized {
        /// Extension header; `type` says which extension this is.
        base: PJRT_Extension_Base,
        /// The profiler API (null when the struct is used as an argument extension).
        profiler_api: *mut PLUGIN_Profiler_Api,
        /// A trace context id, only meaningful as an argument extension.
        traceme_context_id: i64,
    }
}
