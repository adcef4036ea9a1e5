//! Device and memory views: owned by their client, identified by address, queried through
//! the client (which proves it is alive). A view carries its client's process-unique id and
//! every call checks it against the client it is given, so a view can never reach a
//! destroyed client's objects.

// C `int`/`size_t` fields are cast explicitly so the code stays right where they differ.
#![allow(clippy::unnecessary_cast)]

use std::ptr::NonNull;

use rpjrt_sys as sys;

use super::client::Client;
use super::util::{array, read_named_values, string, NamedValue};
use super::{args_types, pjrt, Args};
use crate::error::{Error, Result};

args_types! {
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
}

macro_rules! view {
    ($(#[$doc:meta])* $name:ident($t:ident)) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub struct $name {
            ptr: NonNull<sys::$t>,
            client: u64,
        }
        // SAFETY: an address and its client's id; PJRT objects are thread-safe and nothing
        // is dereferenced without the live `Client` of that id in hand.
        unsafe impl Send for $name {}
        // SAFETY: as for Send.
        unsafe impl Sync for $name {}
        impl $name {
            pub(super) fn new(client: &Client, ptr: *mut sys::$t) -> Option<$name> {
                Some($name {
                    ptr: NonNull::new(ptr)?,
                    client: client.id(),
                })
            }
            pub(super) fn ptr(self) -> *mut sys::$t {
                self.ptr.as_ptr()
            }
            /// Whether this view was listed by `client`.
            pub fn belongs_to(self, client: &Client) -> bool {
                self.client == client.id()
            }
            fn check(self, client: &Client) -> Result<()> {
                if self.belongs_to(client) {
                    Ok(())
                } else {
                    Err(Error::invalid(concat!(
                        stringify!($name),
                        " used with another client"
                    )))
                }
            }
        }
    };
}

view! {
    /// A `PJRT_Device*` of a client.
    DeviceRef(PJRT_Device)
}
view! {
    /// A `PJRT_Memory*` of a client.
    MemoryRef(PJRT_Memory)
}

/// Everything a device describes about itself, read once.
#[derive(Clone, Debug)]
pub struct DeviceFacts {
    /// The device or memory id.
    pub id: i32,
    /// The process that owns the device.
    pub process_index: i32,
    /// The kind text (a device kind like `cpu`, or a memory kind like `device`).
    pub kind: String,
    /// The long description the plugin gives for debugging.
    pub debug_string: String,
    /// The short description the plugin gives for display.
    pub to_string: String,
    /// The device's named attributes.
    pub attributes: Vec<(String, NamedValue)>,
    /// Whether this process can address the device.
    pub is_addressable: bool,
    /// The local hardware id (for addressable devices; -1 otherwise).
    pub local_hardware_id: i32,
}

/// Everything a memory space describes about itself, read once.
#[derive(Clone, Debug)]
pub struct MemoryFacts {
    /// The device or memory id.
    pub id: i32,
    /// The kind text (a device kind like `cpu`, or a memory kind like `device`).
    pub kind: String,
    /// The plugin's id of the memory kind.
    pub kind_id: i32,
    /// The long description the plugin gives for debugging.
    pub debug_string: String,
    /// The short description the plugin gives for display.
    pub to_string: String,
}

impl DeviceRef {
    /// Reads the device's description and properties.
    pub fn facts(self, client: &Client) -> Result<DeviceFacts> {
        self.check(client)?;
        let api = client.api();
        let mut gd = sys::PJRT_Device_GetDescription_Args::new();
        gd.device = self.ptr();
        // SAFETY: a device of this live client.
        unsafe { pjrt!(api, PJRT_Device_GetDescription, &mut gd) }?;
        let desc = gd.device_description;
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
        addr.device = self.ptr();
        // SAFETY: `desc` and the device are live (owned by the client); outputs are read
        // below while they stay live.
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
            hw.device = self.ptr();
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
    pub fn memories(self, client: &Client) -> Result<Vec<MemoryRef>> {
        self.check(client)?;
        let mut a = sys::PJRT_Device_AddressableMemories_Args::new();
        a.device = self.ptr();
        // SAFETY: a device of this live client.
        unsafe { pjrt!(client.api(), PJRT_Device_AddressableMemories, &mut a) }?;
        Ok(client.memory_refs(array(a.memories, a.num_memories)))
    }

    /// `PJRT_Device_DefaultMemory`.
    pub fn default_memory(self, client: &Client) -> Result<Option<MemoryRef>> {
        self.check(client)?;
        let mut a = sys::PJRT_Device_DefaultMemory_Args::new();
        a.device = self.ptr();
        // SAFETY: a device of this live client.
        unsafe { pjrt!(client.api(), PJRT_Device_DefaultMemory, &mut a) }?;
        Ok(MemoryRef::new(client, a.memory))
    }
}

impl MemoryRef {
    /// Reads the memory space's properties.
    pub fn facts(self, client: &Client) -> Result<MemoryFacts> {
        self.check(client)?;
        let api = client.api();
        let mut id = sys::PJRT_Memory_Id_Args::new();
        id.memory = self.ptr();
        let mut kind = sys::PJRT_Memory_Kind_Args::new();
        kind.memory = self.ptr();
        let mut kid = sys::PJRT_Memory_Kind_Id_Args::new();
        kid.memory = self.ptr();
        let mut dbg = sys::PJRT_Memory_DebugString_Args::new();
        dbg.memory = self.ptr();
        let mut ts = sys::PJRT_Memory_ToString_Args::new();
        ts.memory = self.ptr();
        // SAFETY: a memory of this live client.
        unsafe {
            pjrt!(api, PJRT_Memory_Id, &mut id)?;
            pjrt!(api, PJRT_Memory_Kind, &mut kind)?;
            pjrt!(api, PJRT_Memory_DebugString, &mut dbg)?;
            pjrt!(api, PJRT_Memory_ToString, &mut ts)?;
        }
        // Kind ids arrived after the other memory entries; -1 where the plugin lacks them.
        // SAFETY: live memory.
        let kind_id = match unsafe { pjrt!(api, PJRT_Memory_Kind_Id, &mut kid) } {
            Ok(()) => kid.kind_id as i32,
            Err(_) => -1,
        };
        Ok(MemoryFacts {
            id: id.id as i32,
            kind: string(kind.kind, kind.kind_size),
            kind_id,
            debug_string: string(dbg.debug_string, dbg.debug_string_size),
            to_string: string(ts.to_string, ts.to_string_size),
        })
    }

    /// `PJRT_Memory_AddressableByDevices`.
    pub fn devices(self, client: &Client) -> Result<Vec<DeviceRef>> {
        self.check(client)?;
        let mut a = sys::PJRT_Memory_AddressableByDevices_Args::new();
        a.memory = self.ptr();
        // SAFETY: a memory of this live client.
        unsafe { pjrt!(client.api(), PJRT_Memory_AddressableByDevices, &mut a) }?;
        Ok(client.device_refs(array(a.devices, a.num_devices)))
    }
}
