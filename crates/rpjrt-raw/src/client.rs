//! The owning client handle and the calls made on a client.

// C `int`/`size_t` fields are cast explicitly so the code stays right where they differ.
#![allow(clippy::unnecessary_cast)]

use std::ffi::c_char;
use std::ptr::NonNull;
use std::sync::Arc;

use rpjrt_sys as sys;

use super::buffer::{Buffer, HostMemory};
use super::device::{DeviceRef, MemoryRef};
use super::event::Event;
use super::executable::Loaded;
use super::util::{array, host_extent, string, NamedValue, NamedValues};
use super::{args_types, pjrt, Api, Args};
use crate::error::{Error, Result};

args_types! {
    PJRT_Client_Create_Args => PJRT_Client_Create_Args_STRUCT_SIZE,
    PJRT_Client_Destroy_Args => PJRT_Client_Destroy_Args_STRUCT_SIZE,
    PJRT_Client_PlatformName_Args => PJRT_Client_PlatformName_Args_STRUCT_SIZE,
    PJRT_Client_PlatformVersion_Args => PJRT_Client_PlatformVersion_Args_STRUCT_SIZE,
    PJRT_Client_ProcessIndex_Args => PJRT_Client_ProcessIndex_Args_STRUCT_SIZE,
    PJRT_Client_Devices_Args => PJRT_Client_Devices_Args_STRUCT_SIZE,
    PJRT_Client_AddressableDevices_Args => PJRT_Client_AddressableDevices_Args_STRUCT_SIZE,
    PJRT_Client_AddressableMemories_Args => PJRT_Client_AddressableMemories_Args_STRUCT_SIZE,
    PJRT_Client_Compile_Args => PJRT_Client_Compile_Args_STRUCT_SIZE,
    PJRT_Client_BufferFromHostBuffer_Args => PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE,
    PJRT_Program => PJRT_Program_STRUCT_SIZE,
}

/// An owned `PJRT_Client`, destroyed on drop.
///
/// Every handle made from a client (buffers, executables, events) holds an `Arc` of it, so
/// the C client outlives them all: a call on an object of a destroyed client aborts some
/// plugins, and this ordering makes that impossible.
pub struct Client {
    api: &'static Api,
    ptr: NonNull<sys::PJRT_Client>,
    /// Unique for the life of the process (never reused, unlike addresses): device and
    /// memory views carry it, so a view can only ever be used with the client that listed it.
    id: u64,
    /// The key-value store the plugin's callbacks reach, for a multi-process client.
    /// Dropped with the fields, after `Drop::drop` destroyed the C client.
    _kv: Option<Arc<super::kv::KvUserData>>,
    /// Whether the plugin's runtime flushes subnormals (read from the platform name on
    /// first use; see [`super::fpmode`]).
    flushes: std::sync::OnceLock<bool>,
}

/// A host array to put on a device, besides its bytes: its PJRT type code, dims and byte
/// strides (row-major when `None`), and where it goes (`memory` when given, else `device`;
/// both must belong to the client that puts it).
#[derive(Clone, Copy, Debug)]
pub struct HostPut<'a> {
    /// The PJRT element type code.
    pub ty: i32,
    /// The dims.
    pub dims: &'a [i64],
    /// Byte strides, one per dim, or `None` for row-major.
    pub byte_strides: Option<&'a [i64]>,
    /// The target device (used when `memory` is `None`).
    pub device: DeviceRef,
    /// The target memory, if any.
    pub memory: Option<MemoryRef>,
}

/// A C handle moved to the reaper thread for destruction.
pub struct SendPtr<T>(pub NonNull<T>);

// SAFETY: PJRT objects are thread-safe by the C API's contract; the pointer is only used to
// destroy the object, once.
unsafe impl<T> Send for SendPtr<T> {}

/// The source of client ids.
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

// SAFETY: PJRT clients are thread-safe by the C API's contract; the handle is an address
// plus the immutable table.
unsafe impl Send for Client {}
// SAFETY: as for Send.
unsafe impl Sync for Client {}

impl Drop for Client {
    fn drop(&mut self) {
        let api = self.api;
        let ptr = SendPtr(self.ptr);
        let kv = self._kv.take();
        super::callback::destroy_outside_callbacks(move || {
            let ptr = ptr;
            let mut a = sys::PJRT_Client_Destroy_Args::new();
            a.client = ptr.0.as_ptr();
            // SAFETY: the client is live and owned by us; every object made from it holds an
            // Arc of this handle, so all of them are gone.
            let _ = unsafe { pjrt!(api, PJRT_Client_Destroy, &mut a) };
            // The key-value store outlives the C client that calls it.
            drop(kv);
        });
    }
}

impl Client {
    /// `PJRT_Client_Create` with the given create options and no KV store.
    pub fn create(api: &'static Api, options: &[(String, NamedValue)]) -> Result<Client> {
        Self::create_inner(api, options, None)
    }

    /// `PJRT_Client_Create` with the key-value callbacks over `kv` (see [`super::kv`]);
    /// the client keeps `kv` alive until it is destroyed.
    pub fn create_with_kv(
        api: &'static Api,
        options: &[(String, NamedValue)],
        kv: &Arc<super::kv::KvUserData>,
    ) -> Result<Client> {
        Self::create_inner(api, options, Some(kv))
    }

    fn create_inner(
        api: &'static Api,
        options: &[(String, NamedValue)],
        kv: Option<&Arc<super::kv::KvUserData>>,
    ) -> Result<Client> {
        let nvs = NamedValues::new(options);
        let mut a = sys::PJRT_Client_Create_Args::new();
        a.create_options = nvs.as_slice().as_ptr();
        a.num_options = nvs.as_slice().len();
        if let Some(kv) = kv {
            super::kv::set_callbacks(api, &mut a, kv);
        }
        // An exit() inside the plugin's creation is reported before the exit handlers that
        // its loading registered run (see `guard::watch_exit`, which `invoke` arms).
        super::guard::arm_exit_watch();
        let long = super::callback::LongCall::enter("PJRT_Client_Create")?;
        // SAFETY: the named values and their strings live until after the call; the KV user
        // data, if any, outlives the call (the caller holds `kv`) and then lives in the
        // client.
        unsafe { pjrt!(api, PJRT_Client_Create, &mut a) }?;
        drop(long);
        let ptr = NonNull::new(a.client)
            .ok_or_else(|| Error::invalid("PJRT_Client_Create returned no client"))?;
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Client {
            api,
            ptr,
            id,
            _kv: kv.map(Arc::clone),
            flushes: std::sync::OnceLock::new(),
        })
    }

    /// Whether XLA's runtime on this client flushes subnormals: compiles and loads run
    /// under that mode ([`super::fpmode`]).
    pub fn runtime_flushes(&self) -> bool {
        *self.flushes.get_or_init(|| {
            self.platform_name()
                .is_ok_and(|p| super::fpmode::runtime_flushes(&p))
        })
    }

    /// The plugin's table.
    pub fn api(&self) -> &'static Api {
        self.api
    }

    pub(super) fn ptr(&self) -> *mut sys::PJRT_Client {
        self.ptr.as_ptr()
    }

    pub(super) fn id(&self) -> u64 {
        self.id
    }

    /// `PJRT_Client_PlatformName`.
    pub fn platform_name(&self) -> Result<String> {
        let mut a = sys::PJRT_Client_PlatformName_Args::new();
        a.client = self.ptr();
        // SAFETY: live client.
        unsafe { pjrt!(self.api, PJRT_Client_PlatformName, &mut a) }?;
        Ok(string(a.platform_name, a.platform_name_size))
    }

    /// `PJRT_Client_PlatformVersion`.
    pub fn platform_version(&self) -> Result<String> {
        let mut a = sys::PJRT_Client_PlatformVersion_Args::new();
        a.client = self.ptr();
        // SAFETY: live client.
        unsafe { pjrt!(self.api, PJRT_Client_PlatformVersion, &mut a) }?;
        Ok(string(a.platform_version, a.platform_version_size))
    }

    /// `PJRT_Client_ProcessIndex`.
    pub fn process_index(&self) -> Result<i32> {
        let mut a = sys::PJRT_Client_ProcessIndex_Args::new();
        a.client = self.ptr();
        // SAFETY: live client.
        unsafe { pjrt!(self.api, PJRT_Client_ProcessIndex, &mut a) }?;
        Ok(a.process_index as i32)
    }

    /// `PJRT_Client_Devices`.
    pub fn devices(&self) -> Result<Vec<DeviceRef>> {
        let mut a = sys::PJRT_Client_Devices_Args::new();
        a.client = self.ptr();
        // SAFETY: live client.
        unsafe { pjrt!(self.api, PJRT_Client_Devices, &mut a) }?;
        Ok(self.device_refs(array(a.devices, a.num_devices)))
    }

    /// `PJRT_Client_AddressableDevices`.
    pub fn addressable_devices(&self) -> Result<Vec<DeviceRef>> {
        let mut a = sys::PJRT_Client_AddressableDevices_Args::new();
        a.client = self.ptr();
        // SAFETY: live client.
        unsafe { pjrt!(self.api, PJRT_Client_AddressableDevices, &mut a) }?;
        Ok(self.device_refs(array(a.addressable_devices, a.num_addressable_devices)))
    }

    /// `PJRT_Client_AddressableMemories`.
    pub fn addressable_memories(&self) -> Result<Vec<MemoryRef>> {
        let mut a = sys::PJRT_Client_AddressableMemories_Args::new();
        a.client = self.ptr();
        // SAFETY: live client.
        unsafe { pjrt!(self.api, PJRT_Client_AddressableMemories, &mut a) }?;
        Ok(self.memory_refs(array(a.addressable_memories, a.num_addressable_memories)))
    }

    pub(super) fn device_refs(&self, ptrs: Vec<*mut sys::PJRT_Device>) -> Vec<DeviceRef> {
        ptrs.into_iter()
            .filter_map(|p| DeviceRef::new(self, p))
            .collect()
    }

    pub(super) fn memory_refs(&self, ptrs: Vec<*mut sys::PJRT_Memory>) -> Vec<MemoryRef> {
        ptrs.into_iter()
            .filter_map(|p| MemoryRef::new(self, p))
            .collect()
    }

    /// `PJRT_Client_Compile` of `code` in `format` ("mlir" or "hlo") with a serialized
    /// `CompileOptionsProto`.
    pub fn compile(
        self: &Arc<Client>,
        code: &[u8],
        format: &str,
        options: &[u8],
    ) -> Result<Loaded> {
        let code = nul_terminated(code);
        let mut program = sys::PJRT_Program::new();
        program.code = code.as_ptr() as *mut c_char;
        program.code_size = code.len() - 1;
        program.format = format.as_ptr().cast();
        program.format_size = format.len();
        let mut a = sys::PJRT_Client_Compile_Args::new();
        a.client = self.ptr();
        a.program = &program;
        a.compile_options = options.as_ptr().cast();
        a.compile_options_size = options.len();
        // XLA folds constants on this thread while compiling: under the runtime's mode.
        let long = super::callback::LongCall::enter("PJRT_Client_Compile")?;
        let fp = super::fpmode::FlushDenormals::enter_if(self.runtime_flushes());
        // SAFETY: program, code (NUL-terminated past code_size), format and options outlive
        // the call; the plugin only reads the code.
        let r = unsafe { pjrt!(self.api, PJRT_Client_Compile, &mut a) };
        drop(fp);
        drop(long);
        r?;
        Loaded::new(self, a.executable)
            .ok_or_else(|| Error::invalid("PJRT_Client_Compile returned no executable"))?
    }

    /// `PJRT_Client_BufferFromHostBuffer` copying `data` during the call. `data` must hold
    /// every byte that `put` addresses, which is checked here.
    pub fn buffer_from_host<M>(
        self: &Arc<Client>,
        data: &[u8],
        put: HostPut<'_>,
        meta: M,
    ) -> Result<Buffer<M>> {
        self.check_host_data(data.len(), &put)?;
        let copy = sys::PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
        // SAFETY: `data` covers every addressed byte (checked above) and the plugin copies
        // it before returning under ImmutableOnlyDuringCall.
        let (ptr, done) = unsafe { self.from_host_raw(data.as_ptr(), &put, copy) }?;
        // The copy is complete; the done event carries nothing more.
        drop(done);
        Ok(Buffer::new(self, ptr, meta, None, None))
    }

    /// `PJRT_Client_BufferFromHostBuffer` using `owner`'s bytes in place where the plugin
    /// can (zero copy). The buffer keeps `owner` alive until the plugin is done with its
    /// bytes (after the buffer is destroyed and the done event fired).
    pub fn buffer_from_host_owned<M, O: HostMemory>(
        self: &Arc<Client>,
        owner: O,
        put: HostPut<'_>,
        meta: M,
    ) -> Result<Buffer<M>> {
        let owner: Box<dyn HostMemory> = Box::new(owner);
        let data = owner.host_bytes();
        self.check_host_data(data.len(), &put)?;
        let in_place = sys::PJRT_HostBufferSemantics_kImmutableZeroCopy;
        // SAFETY: the bytes cover the array (checked above); they belong to `owner`, which
        // the buffer keeps (boxed, so at a fixed address) until after it is destroyed and its
        // done event has fired, and `HostMemory` promises they do not change meanwhile.
        let (ptr, done) = unsafe { self.from_host_raw(data.as_ptr(), &put, in_place) }?;
        Ok(Buffer::new(self, ptr, meta, done, Some(owner)))
    }

    fn check_host_data(&self, len: usize, put: &HostPut<'_>) -> Result<()> {
        let HostPut { device, memory, .. } = *put;
        let need = host_extent(put.ty, put.dims, put.byte_strides).map_err(Error::invalid)?;
        if len < need {
            return Err(Error::invalid(format!(
                "host data has {len} bytes, but the array needs {need}"
            )));
        }
        if !device.belongs_to(self) || memory.is_some_and(|m| !m.belongs_to(self)) {
            return Err(Error::invalid("the target belongs to another client"));
        }
        Ok(())
    }

    /// # Safety
    /// `data` must point to host memory holding every byte `put` addresses, alive and
    /// unchanged for as long as `semantics` requires.
    unsafe fn from_host_raw(
        self: &Arc<Client>,
        data: *const u8,
        put: &HostPut<'_>,
        semantics: sys::PJRT_HostBufferSemantics,
    ) -> Result<(NonNull<sys::PJRT_Buffer>, Option<Event>)> {
        let mut a = sys::PJRT_Client_BufferFromHostBuffer_Args::new();
        a.client = self.ptr();
        a.data = data.cast();
        a.r#type = put.ty as _;
        a.dims = put.dims.as_ptr();
        a.num_dims = put.dims.len();
        if let Some(s) = put.byte_strides {
            a.byte_strides = s.as_ptr();
            a.num_byte_strides = s.len();
        }
        a.host_buffer_semantics = semantics;
        match put.memory {
            Some(m) => a.memory = m.ptr(),
            None => a.device = put.device.ptr(),
        }
        // SAFETY: forwarded to the caller's contract; dims and strides outlive the call;
        // device and memory belong to this live client.
        unsafe { pjrt!(self.api, PJRT_Client_BufferFromHostBuffer, &mut a) }?;
        let done = Event::new(self, a.done_with_host_buffer);
        match NonNull::new(a.buffer) {
            Some(p) => Ok((p, done)),
            None => Err(Error::invalid(
                "PJRT_Client_BufferFromHostBuffer returned no buffer",
            )),
        }
    }
}

/// `code` followed by a NUL byte, which a program's `code_size` does not count. The
/// plugins' MLIR text parser reads the byte after the text, as LLVM's buffers end in a NUL
/// it may rely on: valgrind shows the 0.115 plugin reading one byte past a 4-byte program,
/// and where that byte was not 0 a malformed program's parse ran on into other memory and
/// crashed the process. Copying costs a program's size, against a compile.
pub(crate) fn nul_terminated(code: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(code.len() + 1);
    v.extend_from_slice(code);
    v.push(0);
    v
}
