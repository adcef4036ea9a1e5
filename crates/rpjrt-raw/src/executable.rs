//! The owning handles of a compiled program: `PJRT_LoadedExecutable` and the
//! `PJRT_Executable` it exposes.

// C `int`/`size_t` fields are cast explicitly so the code stays right where they differ.
#![allow(clippy::unnecessary_cast)]

use std::ptr::NonNull;
use std::sync::Arc;

use rpjrt_sys as sys;

use super::client::Client;
use super::device::DeviceRef;
use super::util::{array, string};
use super::{args_types, pjrt, Args};
use crate::error::{Error, Result};

args_types! {
    PJRT_LoadedExecutable_Destroy_Args => PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE,
    PJRT_LoadedExecutable_GetExecutable_Args => PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE,
    PJRT_LoadedExecutable_AddressableDevices_Args => PJRT_LoadedExecutable_AddressableDevices_Args_STRUCT_SIZE,
    PJRT_LoadedExecutable_Delete_Args => PJRT_LoadedExecutable_Delete_Args_STRUCT_SIZE,
    PJRT_Executable_Destroy_Args => PJRT_Executable_Destroy_Args_STRUCT_SIZE,
    PJRT_Executable_Name_Args => PJRT_Executable_Name_Args_STRUCT_SIZE,
    PJRT_Executable_NumReplicas_Args => PJRT_Executable_NumReplicas_Args_STRUCT_SIZE,
    PJRT_Executable_NumPartitions_Args => PJRT_Executable_NumPartitions_Args_STRUCT_SIZE,
    PJRT_Executable_NumOutputs_Args => PJRT_Executable_NumOutputs_Args_STRUCT_SIZE,
    PJRT_Executable_OutputElementTypes_Args => PJRT_Executable_OutputElementTypes_Args_STRUCT_SIZE,
    PJRT_Executable_OutputDimensions_Args => PJRT_Executable_OutputDimensions_Args_STRUCT_SIZE,
    PJRT_Executable_Fingerprint_Args => PJRT_Executable_Fingerprint_Args_STRUCT_SIZE,
    PJRT_Executable_OptimizedProgram_Args => PJRT_Executable_OptimizedProgram_Args_STRUCT_SIZE,
}

/// An owned `PJRT_Executable`, destroyed on drop.
pub struct Executable {
    client: Arc<Client>,
    ptr: NonNull<sys::PJRT_Executable>,
}

// SAFETY: PJRT executables are thread-safe by the C API's contract.
unsafe impl Send for Executable {}
// SAFETY: as for Send.
unsafe impl Sync for Executable {}

impl Drop for Executable {
    fn drop(&mut self) {
        let client = Arc::clone(&self.client);
        let ptr = super::client::SendPtr(self.ptr);
        super::callback::destroy_outside_callbacks(move || {
            let ptr = ptr;
            let mut a = sys::PJRT_Executable_Destroy_Args::new();
            a.executable = ptr.0.as_ptr();
            // SAFETY: live executable owned by us, destroyed exactly once; `client` keeps
            // its client alive.
            let _ = unsafe { pjrt!(client.api(), PJRT_Executable_Destroy, &mut a) };
        });
    }
}

/// Facts about a compiled executable, read once after compiling.
#[derive(Clone, Debug)]
pub struct ExeFacts {
    /// The executable's name.
    pub name: String,
    /// The number of replicas it was compiled for.
    pub num_replicas: usize,
    /// The number of partitions it was compiled for.
    pub num_partitions: usize,
    /// The number of outputs per device.
    pub num_outputs: usize,
    /// Each output's element type (`PJRT_Buffer_Type`).
    pub output_types: Vec<i32>,
    /// Each output's dims.
    pub output_dims: Vec<Vec<i64>>,
}

impl Executable {
    pub(super) fn ptr(&self) -> *mut sys::PJRT_Executable {
        self.ptr.as_ptr()
    }

    /// Reads name, replica/partition/output counts and output types and shapes.
    pub fn facts(&self) -> Result<ExeFacts> {
        let api = self.client.api();
        let mut name = sys::PJRT_Executable_Name_Args::new();
        name.executable = self.ptr();
        let mut nr = sys::PJRT_Executable_NumReplicas_Args::new();
        nr.executable = self.ptr();
        let mut np = sys::PJRT_Executable_NumPartitions_Args::new();
        np.executable = self.ptr();
        let mut no = sys::PJRT_Executable_NumOutputs_Args::new();
        no.executable = self.ptr();
        let mut ty = sys::PJRT_Executable_OutputElementTypes_Args::new();
        ty.executable = self.ptr();
        let mut dims = sys::PJRT_Executable_OutputDimensions_Args::new();
        dims.executable = self.ptr();
        // SAFETY: live executable; outputs are copied out below while it lives.
        unsafe {
            pjrt!(api, PJRT_Executable_Name, &mut name)?;
            pjrt!(api, PJRT_Executable_NumReplicas, &mut nr)?;
            pjrt!(api, PJRT_Executable_NumPartitions, &mut np)?;
            pjrt!(api, PJRT_Executable_NumOutputs, &mut no)?;
            pjrt!(api, PJRT_Executable_OutputElementTypes, &mut ty)?;
            pjrt!(api, PJRT_Executable_OutputDimensions, &mut dims)?;
        }
        let output_types: Vec<i32> = array(ty.output_types, ty.num_output_types)
            .into_iter()
            .map(|t| t as i32)
            .collect();
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
    pub fn fingerprint(&self) -> Result<String> {
        let mut a = sys::PJRT_Executable_Fingerprint_Args::new();
        a.executable = self.ptr();
        // SAFETY: live executable.
        unsafe { pjrt!(self.client.api(), PJRT_Executable_Fingerprint, &mut a) }?;
        Ok(string(
            a.executable_fingerprint,
            a.executable_fingerprint_size,
        ))
    }

    /// `PJRT_Executable_OptimizedProgram`: the compiled module and its format.
    pub fn optimized_program(&self) -> Result<(Vec<u8>, String)> {
        let api = self.client.api();
        let mut program = sys::PJRT_Program::new();
        let mut a = sys::PJRT_Executable_OptimizedProgram_Args::new();
        a.executable = self.ptr();
        a.program = &mut program;
        // SAFETY: the first call, with a null code pointer, asks only for the size.
        unsafe { pjrt!(api, PJRT_Executable_OptimizedProgram, &mut a) }?;
        let mut code = vec![0u8; program.code_size];
        program.code = code.as_mut_ptr().cast();
        // SAFETY: the second call writes `code_size` bytes into our buffer of that size.
        unsafe { pjrt!(api, PJRT_Executable_OptimizedProgram, &mut a) }?;
        let format = string(program.format, program.format_size);
        code.truncate(program.code_size);
        Ok((code, format))
    }
}

/// An owned `PJRT_LoadedExecutable` (destroyed on drop) with its `PJRT_Executable`.
pub struct Loaded {
    client: Arc<Client>,
    ptr: NonNull<sys::PJRT_LoadedExecutable>,
    exe: Option<Executable>,
    num_outputs: usize,
}

// SAFETY: PJRT executables are thread-safe by the C API's contract.
unsafe impl Send for Loaded {}
// SAFETY: as for Send.
unsafe impl Sync for Loaded {}

impl Drop for Loaded {
    fn drop(&mut self) {
        // The executable view first, then the loaded executable.
        drop(self.exe.take());
        let client = Arc::clone(&self.client);
        let ptr = super::client::SendPtr(self.ptr);
        super::callback::destroy_outside_callbacks(move || {
            let ptr = ptr;
            let mut a = sys::PJRT_LoadedExecutable_Destroy_Args::new();
            a.executable = ptr.0.as_ptr();
            // SAFETY: live executable owned by us, destroyed exactly once (its executable
            // view went first, in order on the same thread); `client` keeps the client alive.
            let _ = unsafe { pjrt!(client.api(), PJRT_LoadedExecutable_Destroy, &mut a) };
        });
    }
}

impl Loaded {
    /// Takes ownership of a loaded executable the plugin returned; `None` for null. Also
    /// fetches its `PJRT_Executable` and output count (an error destroys what was made).
    pub(super) fn new(
        client: &Arc<Client>,
        ptr: *mut sys::PJRT_LoadedExecutable,
    ) -> Option<Result<Loaded>> {
        let mut loaded = Loaded {
            client: Arc::clone(client),
            ptr: NonNull::new(ptr)?,
            exe: None,
            num_outputs: 0,
        };
        Some((|| {
            let mut a = sys::PJRT_LoadedExecutable_GetExecutable_Args::new();
            a.loaded_executable = loaded.ptr();
            // SAFETY: live executable.
            unsafe { pjrt!(client.api(), PJRT_LoadedExecutable_GetExecutable, &mut a) }?;
            let exe = Executable {
                client: Arc::clone(client),
                ptr: NonNull::new(a.executable).ok_or_else(|| {
                    Error::invalid("PJRT_LoadedExecutable_GetExecutable returned null")
                })?,
            };
            let mut no = sys::PJRT_Executable_NumOutputs_Args::new();
            no.executable = exe.ptr();
            // SAFETY: live executable.
            unsafe { pjrt!(client.api(), PJRT_Executable_NumOutputs, &mut no) }?;
            loaded.num_outputs = no.num_outputs;
            loaded.exe = Some(exe);
            Ok(loaded)
        })())
    }

    pub(super) fn ptr(&self) -> *mut sys::PJRT_LoadedExecutable {
        self.ptr.as_ptr()
    }

    pub(super) fn client(&self) -> &Arc<Client> {
        &self.client
    }

    /// The output count per device, as the plugin reported it.
    pub fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    /// The `PJRT_Executable` of this loaded executable.
    pub fn executable(&self) -> &Executable {
        self.exe
            .as_ref()
            .expect("set by Loaded::new and taken only in drop")
    }

    /// `PJRT_LoadedExecutable_AddressableDevices`.
    pub fn devices(&self) -> Result<Vec<DeviceRef>> {
        let mut a = sys::PJRT_LoadedExecutable_AddressableDevices_Args::new();
        a.executable = self.ptr();
        // SAFETY: live executable.
        unsafe {
            pjrt!(
                self.client.api(),
                PJRT_LoadedExecutable_AddressableDevices,
                &mut a
            )
        }?;
        Ok(self
            .client
            .device_refs(array(a.addressable_devices, a.num_addressable_devices)))
    }

    /// `PJRT_LoadedExecutable_Delete`: frees its device resources now.
    pub fn delete(&self) -> Result<()> {
        let mut a = sys::PJRT_LoadedExecutable_Delete_Args::new();
        a.executable = self.ptr();
        // SAFETY: live executable.
        unsafe { pjrt!(self.client.api(), PJRT_LoadedExecutable_Delete, &mut a) }
    }
}
