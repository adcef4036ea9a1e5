//! The function table: which entries the fake implements, and a stub for the rest.
use std::ffi::c_void;

use rpjrt_sys as sys;

use crate::{buffer, client, exec, memory, plugin};

/// A stub slot's function type before it is cast to the slot's own type.
type StubFn = unsafe extern "C" fn(*mut c_void) -> *mut sys::PJRT_Error;

macro_rules! table {
    (
        implemented { $($iname:ident => $f:path),* $(,)? }
        stubbed { $($sname:ident),* $(,)? }
    ) => {
        /// Every entry name the fake knows, implemented ones first.
        pub(crate) const ENTRY_NAMES: &[&str] = &[
            $(stringify!($iname),)* $(stringify!($sname),)*
        ];

        /// The slot index of an entry, from its offset in `PJRT_Api`.
        pub(crate) fn slot_index(name: &str) -> Option<usize> {
            let offset = match name {
                $(stringify!($iname) => std::mem::offset_of!(sys::PJRT_Api, $iname),)*
                $(stringify!($sname) => std::mem::offset_of!(sys::PJRT_Api, $sname),)*
                _ => return None,
            };
            Some((offset - crate::state::FIRST_SLOT) / std::mem::size_of::<usize>())
        }

        /// Whether the fake has a real implementation of `name`.
        pub(crate) fn is_implemented(name: &str) -> bool {
            matches!(name, $(stringify!($iname))|*)
        }

        /// Fills every slot.
        pub(crate) fn fill(api: &mut sys::PJRT_Api) {
            $(api.$iname = Some($f);)*
            $({
                unsafe extern "C" fn stub(_args: *mut c_void) -> *mut sys::PJRT_Error {
                    crate::state::stub(stringify!($sname))
                }
                // SAFETY: the slot's type and StubFn differ only in the pointee type of
                // their single pointer argument and both return PJRT_Error*; the C ABI
                // passes and returns every data pointer the same way, and the stub never
                // reads its argument.
                api.$sname = Some(unsafe { std::mem::transmute::<StubFn, sys::$sname>(stub) });
            })*
        }
    };
}

table! {
    implemented {
        PJRT_Executable_GetCompileOptions => exec::executable_get_compile_options,
        PJRT_Executable_DeserializeAndLoad => exec::executable_deserialize_and_load,
        PJRT_Executable_Serialize => exec::executable_serialize,
        PJRT_Error_Destroy => plugin::error_destroy,
        PJRT_Error_Message => plugin::error_message,
        PJRT_Error_GetCode => plugin::error_get_code,
        PJRT_Plugin_Initialize => plugin::plugin_initialize,
        PJRT_Plugin_Attributes => plugin::plugin_attributes,
        PJRT_Event_Destroy => buffer::event_destroy,
        PJRT_Event_IsReady => buffer::event_is_ready,
        PJRT_Event_Error => buffer::event_error,
        PJRT_Event_Await => buffer::event_await,
        PJRT_Event_OnReady => buffer::event_on_ready,
        PJRT_Client_Create => client::client_create,
        PJRT_Client_Destroy => client::client_destroy,
        PJRT_Client_PlatformName => client::client_platform_name,
        PJRT_Client_ProcessIndex => client::client_process_index,
        PJRT_Client_PlatformVersion => client::client_platform_version,
        PJRT_Client_Devices => client::client_devices,
        PJRT_Client_AddressableDevices => client::client_addressable_devices,
        PJRT_Client_LookupDevice => client::client_lookup_device,
        PJRT_Client_LookupAddressableDevice => client::client_lookup_addressable_device,
        PJRT_Client_AddressableMemories => client::client_addressable_memories,
        PJRT_Client_Compile => exec::client_compile,
        PJRT_Client_DefaultDeviceAssignment => client::client_default_device_assignment,
        PJRT_Client_BufferFromHostBuffer => buffer::client_buffer_from_host_buffer,
        PJRT_DeviceDescription_Id => client::description_id,
        PJRT_DeviceDescription_ProcessIndex => client::description_process_index,
        PJRT_DeviceDescription_Attributes => client::description_attributes,
        PJRT_DeviceDescription_Kind => client::description_kind,
        PJRT_DeviceDescription_DebugString => client::description_debug_string,
        PJRT_DeviceDescription_ToString => client::description_to_string,
        PJRT_Device_GetDescription => client::device_get_description,
        PJRT_Device_IsAddressable => client::device_is_addressable,
        PJRT_Device_LocalHardwareId => client::device_local_hardware_id,
        PJRT_Device_AddressableMemories => client::device_addressable_memories,
        PJRT_Device_DefaultMemory => client::device_default_memory,
        PJRT_Device_MemoryStats => memory::device_memory_stats,
        PJRT_Memory_Id => client::memory_id,
        PJRT_Memory_Kind => client::memory_kind,
        PJRT_Memory_DebugString => client::memory_debug_string,
        PJRT_Memory_ToString => client::memory_to_string,
        PJRT_Memory_AddressableByDevices => client::memory_addressable_by_devices,
        PJRT_Executable_Destroy => exec::executable_destroy,
        PJRT_Executable_Name => exec::executable_name,
        PJRT_Executable_NumReplicas => exec::executable_num_replicas,
        PJRT_Executable_NumPartitions => exec::executable_num_partitions,
        PJRT_Executable_NumOutputs => exec::executable_num_outputs,
        PJRT_Executable_SizeOfGeneratedCodeInBytes => exec::executable_size_of_generated_code,
        PJRT_Executable_OutputMemoryKinds => exec::executable_output_memory_kinds,
        PJRT_Executable_OptimizedProgram => exec::executable_optimized_program,
        PJRT_LoadedExecutable_Destroy => exec::loaded_destroy,
        PJRT_LoadedExecutable_GetExecutable => exec::loaded_get_executable,
        PJRT_LoadedExecutable_AddressableDevices => exec::loaded_addressable_devices,
        PJRT_LoadedExecutable_Delete => exec::loaded_delete,
        PJRT_LoadedExecutable_IsDeleted => exec::loaded_is_deleted,
        PJRT_LoadedExecutable_Execute => exec::loaded_execute,
        PJRT_LoadedExecutable_Fingerprint => exec::loaded_fingerprint,
        PJRT_Buffer_Destroy => buffer::buffer_destroy,
        PJRT_Buffer_ElementType => buffer::buffer_element_type,
        PJRT_Buffer_Dimensions => buffer::buffer_dimensions,
        PJRT_Buffer_UnpaddedDimensions => buffer::buffer_unpadded_dimensions,
        PJRT_Buffer_DynamicDimensionIndices => buffer::buffer_dynamic_dimension_indices,
        PJRT_Buffer_OnDeviceSizeInBytes => buffer::buffer_on_device_size,
        PJRT_Buffer_Device => buffer::buffer_device,
        PJRT_Buffer_Memory => buffer::buffer_memory,
        PJRT_Buffer_Delete => buffer::buffer_delete,
        PJRT_Buffer_IsDeleted => buffer::buffer_is_deleted,
        PJRT_Buffer_CopyToDevice => buffer::buffer_copy_to_device,
        PJRT_Buffer_ToHostBuffer => buffer::buffer_to_host_buffer,
        PJRT_Buffer_IsOnCpu => buffer::buffer_is_on_cpu,
        PJRT_Buffer_ReadyEvent => buffer::buffer_ready_event,
        PJRT_Buffer_UnsafePointer => buffer::buffer_unsafe_pointer,
        PJRT_Buffer_IncreaseExternalReferenceCount => buffer::buffer_increase_ref,
        PJRT_Buffer_DecreaseExternalReferenceCount => buffer::buffer_decrease_ref,
        PJRT_Buffer_OpaqueDeviceMemoryDataPointer => buffer::buffer_opaque_pointer,
        PJRT_Executable_OutputElementTypes => exec::executable_output_element_types,
        PJRT_Executable_OutputDimensions => exec::executable_output_dimensions,
        PJRT_Buffer_CopyToMemory => buffer::buffer_copy_to_memory,
        PJRT_Executable_Fingerprint => exec::executable_fingerprint,
        PJRT_Memory_Kind_Id => client::memory_kind_id,
        PJRT_ExecuteContext_Create => exec::execute_context_create,
        PJRT_ExecuteContext_Destroy => exec::execute_context_destroy,
        PJRT_Error_ForEachPayload => plugin::error_for_each_payload,
        PJRT_Executable_ParameterMemoryKinds => exec::executable_parameter_memory_kinds,
    }
    stubbed {
        PJRT_Executable_GetCostAnalysis,
        PJRT_Buffer_GetMemoryLayout,
        PJRT_CopyToDeviceStream_Destroy,
        PJRT_CopyToDeviceStream_AddChunk,
        PJRT_CopyToDeviceStream_TotalBytes,
        PJRT_CopyToDeviceStream_GranuleSize,
        PJRT_CopyToDeviceStream_CurrentBytes,
        PJRT_TopologyDescription_Create,
        PJRT_TopologyDescription_Destroy,
        PJRT_TopologyDescription_PlatformName,
        PJRT_TopologyDescription_PlatformVersion,
        PJRT_TopologyDescription_GetDeviceDescriptions,
        PJRT_TopologyDescription_Serialize,
        PJRT_TopologyDescription_Attributes,
        PJRT_Compile,
        PJRT_Client_CreateViewOfDeviceBuffer,
        PJRT_Client_TopologyDescription,
        PJRT_Executable_GetCompiledMemoryStats,
        PJRT_Buffer_CopyRawToHost,
        PJRT_AsyncHostToDeviceTransferManager_Destroy,
        PJRT_AsyncHostToDeviceTransferManager_TransferData,
        PJRT_Client_CreateBuffersForAsyncHostToDevice,
        PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer,
        PJRT_AsyncHostToDeviceTransferManager_Device,
        PJRT_AsyncHostToDeviceTransferManager_BufferCount,
        PJRT_AsyncHostToDeviceTransferManager_BufferSize,
        PJRT_AsyncHostToDeviceTransferManager_SetBufferError,
        PJRT_AsyncHostToDeviceTransferManager_AddMetadata,
        PJRT_Client_DmaMap,
        PJRT_Client_DmaUnmap,
        PJRT_Client_CreateUninitializedBuffer,
        PJRT_Client_UpdateGlobalProcessInfo,
        PJRT_TopologyDescription_Deserialize,
        PJRT_Client_CreateAliasBuffer,
        PJRT_Client_FulfillAliasBuffer,
        PJRT_LoadedExecutable_GetDeviceAssignment,
        PJRT_Client_CreateErrorBuffer,
        PJRT_AsyncHostToDeviceTransferManager_TransferLiteral,
        PJRT_Buffer_CopyRawToHostFuture,
        PJRT_Device_PoisonExecution,
        PJRT_Device_CreateAsyncTrackingEvent,
        PJRT_AsyncTrackingEvent_Destroy,
        PJRT_Buffer_DonateWithControlDependency,
        PJRT_Event_Create,
        PJRT_Event_Set,
        PJRT_Device_GetAttributes,
        PJRT_Client_Load,
        PJRT_LoadedExecutable_AddressableDeviceLogicalIds,
        PJRT_Buffer_Bitcast,
        PJRT_TopologyDescription_Fingerprint,
        PJRT_Device_ClearMemoryStats,
        PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace,
        PJRT_TopologyDescription_GetMemorySpaceKindIds,
    }
}
