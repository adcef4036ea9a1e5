//! The function table: which entries the fake implements (each module defines its own
//! with `entry!`, named as the entry), and a stub for the rest.
use std::ffi::c_void;

use rpjrt_sys as sys;

/// A stub slot's function type before it is cast to the slot's own type.
type StubFn = unsafe extern "C" fn(*mut c_void) -> *mut sys::PJRT_Error;

macro_rules! table {
    (implemented { $($module:ident: $($entry:ident)*;)* } stubbed { $($stub:ident)* }) => {
        /// Every entry with a real implementation.
        pub(crate) const IMPLEMENTED: &[&str] = &[$($(stringify!($entry),)*)*];

        /// Fills every slot.
        pub(crate) fn fill(api: &mut sys::PJRT_Api) {
            $($(api.$entry = Some(crate::$module::$entry);)*)*
            $({
                unsafe extern "C" fn stub(_args: *mut c_void) -> *mut sys::PJRT_Error {
                    crate::state::stub(stringify!($stub))
                }
                // SAFETY: the slot's type and StubFn differ only in the pointee type of
                // their single pointer argument and both return PJRT_Error*; the C ABI
                // passes and returns every data pointer the same way, and the stub never
                // reads its argument.
                api.$stub = Some(unsafe { std::mem::transmute::<StubFn, sys::$stub>(stub) });
            })*
        }
    };
}

table! {
    implemented {
        plugin: PJRT_Error_Destroy PJRT_Error_Message PJRT_Error_GetCode PJRT_Plugin_Initialize
            PJRT_Plugin_Attributes;
        buffer: PJRT_Event_Destroy PJRT_Event_IsReady PJRT_Event_Error PJRT_Event_Await
            PJRT_Event_OnReady PJRT_Client_BufferFromHostBuffer PJRT_Buffer_Destroy
            PJRT_Buffer_ElementType PJRT_Buffer_Dimensions PJRT_Buffer_OnDeviceSizeInBytes
            PJRT_Buffer_Device PJRT_Buffer_Memory PJRT_Buffer_Delete PJRT_Buffer_IsDeleted
            PJRT_Buffer_CopyToDevice PJRT_Buffer_CopyToMemory PJRT_Buffer_ToHostBuffer
            PJRT_Buffer_IsOnCpu PJRT_Buffer_ReadyEvent PJRT_Buffer_UnsafePointer
            PJRT_Buffer_IncreaseExternalReferenceCount PJRT_Buffer_DecreaseExternalReferenceCount
            PJRT_Buffer_OpaqueDeviceMemoryDataPointer;
        client: PJRT_Client_Create PJRT_Client_Destroy PJRT_Client_PlatformName
            PJRT_Client_ProcessIndex PJRT_Client_PlatformVersion PJRT_Client_Devices
            PJRT_Client_AddressableDevices PJRT_Client_LookupDevice PJRT_Client_AddressableMemories
            PJRT_DeviceDescription_Id PJRT_DeviceDescription_ProcessIndex
            PJRT_DeviceDescription_Attributes PJRT_DeviceDescription_Kind
            PJRT_DeviceDescription_DebugString PJRT_DeviceDescription_ToString
            PJRT_Device_GetDescription PJRT_Device_IsAddressable PJRT_Device_LocalHardwareId
            PJRT_Device_AddressableMemories PJRT_Device_DefaultMemory PJRT_Memory_Id
            PJRT_Memory_Kind PJRT_Memory_Kind_Id PJRT_Memory_DebugString PJRT_Memory_ToString
            PJRT_Memory_AddressableByDevices;
        exec: PJRT_Client_Compile PJRT_Executable_Destroy PJRT_Executable_Name
            PJRT_Executable_NumReplicas PJRT_Executable_NumPartitions PJRT_Executable_NumOutputs
            PJRT_Executable_OutputMemoryKinds PJRT_Executable_ParameterMemoryKinds
            PJRT_Executable_OutputElementTypes PJRT_Executable_OutputDimensions
            PJRT_Executable_Fingerprint PJRT_Executable_OptimizedProgram PJRT_Executable_Serialize
            PJRT_Executable_GetCompileOptions PJRT_Executable_DeserializeAndLoad
            PJRT_LoadedExecutable_Destroy PJRT_LoadedExecutable_GetExecutable
            PJRT_LoadedExecutable_AddressableDevices PJRT_LoadedExecutable_Delete
            PJRT_LoadedExecutable_Execute PJRT_LoadedExecutable_Fingerprint
            PJRT_ExecuteContext_Create PJRT_ExecuteContext_Destroy;
        memory: PJRT_Device_MemoryStats;
        external: PJRT_Event_Create PJRT_Event_Set PJRT_Client_DmaMap PJRT_Client_DmaUnmap;
    }
    stubbed {
        PJRT_Error_ForEachPayload PJRT_Client_LookupAddressableDevice
        PJRT_Client_DefaultDeviceAssignment PJRT_Buffer_UnpaddedDimensions
        PJRT_Buffer_DynamicDimensionIndices PJRT_Executable_SizeOfGeneratedCodeInBytes
        PJRT_LoadedExecutable_IsDeleted
        PJRT_Executable_GetCostAnalysis PJRT_Buffer_GetMemoryLayout PJRT_CopyToDeviceStream_Destroy
        PJRT_CopyToDeviceStream_AddChunk PJRT_CopyToDeviceStream_TotalBytes
        PJRT_CopyToDeviceStream_GranuleSize PJRT_CopyToDeviceStream_CurrentBytes
        PJRT_TopologyDescription_Create PJRT_TopologyDescription_Destroy
        PJRT_TopologyDescription_PlatformName PJRT_TopologyDescription_PlatformVersion
        PJRT_TopologyDescription_GetDeviceDescriptions PJRT_TopologyDescription_Serialize
        PJRT_TopologyDescription_Attributes PJRT_Compile PJRT_Client_CreateViewOfDeviceBuffer
        PJRT_Client_TopologyDescription PJRT_Executable_GetCompiledMemoryStats
        PJRT_Buffer_CopyRawToHost PJRT_AsyncHostToDeviceTransferManager_Destroy
        PJRT_AsyncHostToDeviceTransferManager_TransferData
        PJRT_Client_CreateBuffersForAsyncHostToDevice
        PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer
        PJRT_AsyncHostToDeviceTransferManager_Device
        PJRT_AsyncHostToDeviceTransferManager_BufferCount
        PJRT_AsyncHostToDeviceTransferManager_BufferSize
        PJRT_AsyncHostToDeviceTransferManager_SetBufferError
        PJRT_AsyncHostToDeviceTransferManager_AddMetadata
        PJRT_Client_CreateUninitializedBuffer PJRT_Client_UpdateGlobalProcessInfo
        PJRT_TopologyDescription_Deserialize PJRT_Client_CreateAliasBuffer
        PJRT_Client_FulfillAliasBuffer PJRT_LoadedExecutable_GetDeviceAssignment
        PJRT_Client_CreateErrorBuffer PJRT_AsyncHostToDeviceTransferManager_TransferLiteral
        PJRT_Buffer_CopyRawToHostFuture PJRT_Device_PoisonExecution
        PJRT_Device_CreateAsyncTrackingEvent PJRT_AsyncTrackingEvent_Destroy
        PJRT_Buffer_DonateWithControlDependency
        PJRT_Device_GetAttributes PJRT_Client_Load PJRT_LoadedExecutable_AddressableDeviceLogicalIds
        PJRT_Buffer_Bitcast PJRT_TopologyDescription_Fingerprint PJRT_Device_ClearMemoryStats
        PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace
        PJRT_TopologyDescription_GetMemorySpaceKindIds
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_slot_is_filled() {
        // SAFETY: all-zero is a valid PJRT_Api (integers, pointers, None).
        let mut api: super::sys::PJRT_Api = unsafe { std::mem::zeroed() };
        super::fill(&mut api);
        let first = crate::state::FIRST_SLOT / 8;
        let words = (&api as *const super::sys::PJRT_Api).cast::<usize>();
        for (i, e) in super::sys::PJRT_API_ENTRIES.iter().enumerate() {
            // SAFETY: slot i is word first + i of the table.
            assert_ne!(unsafe { words.add(first + i).read() }, 0, "{}", e.name);
        }
    }
}
