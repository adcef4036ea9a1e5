//! Clients, devices, device descriptions and memories.

use std::collections::BTreeSet;
use std::ffi::c_void;
use std::panic::catch_unwind;
use std::sync::{Arc, Mutex};

use rpjrt_sys as sys;

use crate::config::{AttrValue, Attribute};
use crate::error::{self, invalid, Fail};
use crate::named::{read_named_values, NamedValues};
use crate::registry::{self, Kind};
use crate::state::State;

/// The platform name every fake client reports.
pub const PLATFORM_NAME: &str = "fake";
/// The device kind every fake device reports.
pub const DEVICE_KIND: &str = "fake";
/// Memory kinds of every device, in order; the first is the default. Their kind ids are
/// their positions.
pub const MEMORY_KINDS: [&str; 3] = ["device", "pinned_host", "unpinned_host"];
/// Devices a client has unless the `fake_device_count` create option says otherwise.
pub const DEFAULT_DEVICE_COUNT: usize = 2;

pub(crate) struct FakeDevice {
    pub id: i32,
    /// Accounting of this device's `device` memory.
    pub memory: Arc<crate::memory::DeviceMemory>,
    pub local_hardware_id: i32,
    pub addressable: bool,
    description: Box<FakeDescription>,
    memories: Vec<*mut sys::PJRT_Memory>,
    default_memory: *mut sys::PJRT_Memory,
}

pub(crate) struct FakeDescription {
    id: i32,
    process_index: i32,
    debug_string: String,
    to_string: String,
    attributes: NamedValues,
}

#[repr(C)]
pub(crate) struct FakeMemory {
    vtable: *const sys::PJRT_Memory_FunctionTable,
    pub id: i32,
    pub kind: &'static str,
    pub kind_id: i32,
    /// Index of the device that owns this memory.
    pub device: usize,
    debug_string: String,
    to_string: String,
    devices: Vec<*mut sys::PJRT_Device>,
    user_data: Mutex<Vec<UserData>>,
}

struct UserData {
    key: usize,
    data: usize,
    dtor: Option<unsafe extern "C" fn(*mut c_void)>,
}

/// What a client is; kept alive by the client handle and by every buffer and executable
/// made from it, so their device and memory pointers stay valid.
pub(crate) struct ClientInner {
    pub devices: Vec<FakeDevice>,
    pub memories: Vec<FakeMemory>,
    device_ptrs: Vec<*mut sys::PJRT_Device>,
    addressable_ptrs: Vec<*mut sys::PJRT_Device>,
    addressable_memory_ptrs: Vec<*mut sys::PJRT_Memory>,
    pub process_index: i32,
    platform_version: String,
}

// SAFETY: the raw pointers point into the boxes this struct owns (devices, memories),
// which never move and are only mutated through the Mutex in FakeMemory.
unsafe impl Send for ClientInner {}
// SAFETY: as above.
unsafe impl Sync for ClientInner {}

pub(crate) struct FakeClient {
    pub inner: Arc<ClientInner>,
}

struct SyncMemoryTable(sys::PJRT_Memory_FunctionTable);

// SAFETY: immutable; its only data pointer (extension_start) is null.
unsafe impl Sync for SyncMemoryTable {}

static MEMORY_VTABLE: SyncMemoryTable = SyncMemoryTable(sys::PJRT_Memory_FunctionTable {
    struct_size: sys::PJRT_Memory_FunctionTable_STRUCT_SIZE,
    extension_start: std::ptr::null_mut(),
    instance_struct_size: sys::PJRT_Memory_STRUCT_SIZE,
    get_user_data: Some(memory_get_user_data),
    set_user_data: Some(memory_set_user_data),
});

unsafe extern "C" fn memory_get_user_data(
    memory: *mut sys::PJRT_Memory,
    key: *const c_void,
) -> *mut c_void {
    catch_unwind(|| {
        let Ok(m) = memory_ref(memory) else {
            return std::ptr::null_mut();
        };
        let list = m.user_data.lock().unwrap_or_else(|e| e.into_inner());
        list.iter()
            .find(|u| u.key == key as usize)
            .map(|u| u.data as *mut c_void)
            .unwrap_or(std::ptr::null_mut())
    })
    .unwrap_or(std::ptr::null_mut())
}

unsafe extern "C" fn memory_set_user_data(
    memory: *mut sys::PJRT_Memory,
    key: *const c_void,
    data: *mut c_void,
    dtor: Option<unsafe extern "C" fn(*mut c_void)>,
) {
    let _ = catch_unwind(|| {
        let Ok(m) = memory_ref(memory) else {
            return;
        };
        let old = {
            let mut list = m.user_data.lock().unwrap_or_else(|e| e.into_inner());
            let old = list
                .iter()
                .position(|u| u.key == key as usize)
                .map(|i| list.remove(i));
            list.push(UserData {
                key: key as usize,
                data: data as usize,
                dtor,
            });
            old
        };
        if let Some(old) = old {
            run_dtor(old);
        }
    });
}

fn run_dtor(u: UserData) {
    if let Some(d) = u.dtor {
        // SAFETY: the caller attached `data` with this destructor and handed ownership of
        // it to the memory; it is run exactly once, when replaced or when the memory dies.
        unsafe { d(u.data as *mut c_void) };
    }
}

impl Drop for FakeMemory {
    fn drop(&mut self) {
        let list = std::mem::take(self.user_data.get_mut().unwrap_or_else(|e| e.into_inner()));
        for u in list {
            run_dtor(u);
        }
    }
}

impl ClientInner {
    /// A client of `process_index` over devices owned by the processes in `procs` (one
    /// entry per device); the devices of `process_index` are addressable.
    fn new(
        procs: &[i32],
        process_index: i32,
        options: Vec<Attribute>,
        memory_limit: Option<u64>,
    ) -> Arc<ClientInner> {
        let mut local = 0;
        let mut devices: Vec<FakeDevice> = (0..procs.len())
            .map(|i| {
                let pi = procs[i];
                let addressable = pi == process_index;
                let id = i as i32;
                let local_hardware_id = if addressable {
                    local += 1;
                    local - 1
                } else {
                    -1
                };
                let attrs = vec![
                    Attribute::new("fake_device_index", AttrValue::Int64(i as i64)),
                    Attribute::new("coords", AttrValue::Int64List(vec![i as i64, 0, 0])),
                ];
                FakeDevice {
                    id,
                    memory: crate::memory::DeviceMemory::new(i, memory_limit),
                    local_hardware_id,
                    addressable,
                    description: Box::new(FakeDescription {
                        id,
                        process_index: pi,
                        debug_string: format!("FakeDevice(id={id}, process_index={pi})"),
                        to_string: format!("FakeDevice(id={id})"),
                        attributes: NamedValues::new(&attrs),
                    }),
                    memories: Vec::new(),
                    default_memory: std::ptr::null_mut(),
                }
            })
            .collect();
        let device_ptrs: Vec<*mut sys::PJRT_Device> = devices
            .iter_mut()
            .map(|d| (d as *mut FakeDevice).cast())
            .collect();
        let mut memories = Vec::new();
        for (i, dev) in device_ptrs.iter().enumerate() {
            for (k, kind) in MEMORY_KINDS.iter().enumerate() {
                let id = (i * MEMORY_KINDS.len() + k) as i32;
                memories.push(FakeMemory {
                    vtable: &MEMORY_VTABLE.0,
                    id,
                    kind,
                    kind_id: k as i32,
                    device: i,
                    debug_string: format!("FakeMemory(id={id}, kind={kind}, device={i})"),
                    to_string: format!("FakeMemory(id={id}, kind={kind})"),
                    devices: vec![*dev],
                    user_data: Mutex::new(Vec::new()),
                });
            }
        }
        for (i, dev) in devices.iter_mut().enumerate() {
            let first = i * MEMORY_KINDS.len();
            dev.memories = memories[first..first + MEMORY_KINDS.len()]
                .iter_mut()
                .map(|m| (m as *mut FakeMemory).cast())
                .collect();
            dev.default_memory = dev.memories[0];
        }
        let addressable_ptrs: Vec<*mut sys::PJRT_Device> = device_ptrs
            .iter()
            .zip(&devices)
            .filter(|(_, d)| d.addressable)
            .map(|(p, _)| *p)
            .collect();
        let addressable_memory_ptrs: Vec<*mut sys::PJRT_Memory> = memories
            .iter_mut()
            .filter(|m| procs[m.device] == process_index)
            .map(|m| (m as *mut FakeMemory).cast())
            .collect();
        for d in &devices {
            registry::register(d, Kind::Device);
            registry::register(&*d.description, Kind::DeviceDescription);
        }
        for m in &memories {
            registry::register(m, Kind::Memory);
        }
        let mut platform_version = format!("fake {}", env!("CARGO_PKG_VERSION"));
        if !options.is_empty() {
            let shown: Vec<String> = options
                .iter()
                .map(|o| format!("{}={}", o.name, o.value))
                .collect();
            platform_version.push_str("; create options: ");
            platform_version.push_str(&shown.join(", "));
        }
        Arc::new(ClientInner {
            devices,
            memories,
            device_ptrs,
            addressable_ptrs,
            addressable_memory_ptrs,
            process_index,
            platform_version,
        })
    }

    /// Index of `device` among this client's devices.
    pub fn device_index(&self, device: *mut sys::PJRT_Device) -> Option<usize> {
        self.device_ptrs.iter().position(|d| *d == device)
    }

    /// Index of `memory` among this client's memories.
    pub fn memory_index(&self, memory: *mut sys::PJRT_Memory) -> Option<usize> {
        self.memories
            .iter()
            .position(|m| std::ptr::eq(m, memory.cast::<FakeMemory>()))
    }

    pub fn device_ptr(&self, index: usize) -> *mut sys::PJRT_Device {
        self.device_ptrs[index]
    }

    pub fn memory_ptr(&self, index: usize) -> *mut sys::PJRT_Memory {
        let m: &FakeMemory = &self.memories[index];
        (m as *const FakeMemory).cast_mut().cast()
    }

    /// Index of the default memory of device `index`.
    pub fn default_memory_index(&self, device: usize) -> usize {
        device * MEMORY_KINDS.len()
    }

    /// Whether the device at `index` is addressable.
    pub fn addressable(&self, index: usize) -> bool {
        self.devices[index].addressable
    }

    pub fn addressable_count(&self) -> usize {
        self.addressable_ptrs.len()
    }

    pub fn device_name(&self, index: usize) -> &str {
        &self.devices[index].description.to_string
    }
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        for d in &self.devices {
            registry::unregister(d, Kind::Device);
            registry::unregister(&*d.description, Kind::DeviceDescription);
        }
        for m in &self.memories {
            registry::unregister(m, Kind::Memory);
        }
    }
}

/// The live client behind `client`.
pub(crate) fn client_ref<'a>(client: *mut sys::PJRT_Client) -> Result<&'a FakeClient, Fail> {
    // SAFETY: handles of this kind are registered from Box::into_raw in client_create and
    // unregistered before they are freed; the caller keeps this one alive for the call.
    unsafe { registry::live_ref(client, Kind::Client) }
}

pub(crate) fn device_ref<'a>(device: *mut sys::PJRT_Device) -> Result<&'a FakeDevice, Fail> {
    // SAFETY: registered devices are boxes owned by a live ClientInner, unregistered
    // before they are freed; the caller keeps their client alive during the call.
    unsafe { registry::live_ref(device, Kind::Device) }
}

fn description_ref<'a>(
    desc: *mut sys::PJRT_DeviceDescription,
) -> Result<&'a FakeDescription, Fail> {
    // SAFETY: as for devices: owned by a live ClientInner, unregistered before freed.
    unsafe { registry::live_ref(desc, Kind::DeviceDescription) }
}

pub(crate) fn memory_ref<'a>(memory: *mut sys::PJRT_Memory) -> Result<&'a FakeMemory, Fail> {
    // SAFETY: as for devices: owned by a live ClientInner, unregistered before freed.
    unsafe { registry::live_ref(memory, Kind::Memory) }
}

fn option_int(opt: &Attribute) -> Result<i64, Fail> {
    match opt.value {
        AttrValue::Int64(v) => Ok(v),
        _ => Err(invalid(format!(
            "fake plugin: create option {:?} must be an int64, got {}",
            opt.name, opt.value
        ))),
    }
}

fn option_bool(opt: &Attribute) -> Result<bool, Fail> {
    match opt.value {
        AttrValue::Bool(v) => Ok(v),
        _ => Err(invalid(format!(
            "fake plugin: create option {:?} must be a bool, got {}",
            opt.name, opt.value
        ))),
    }
}

const KV_KEY: &str = "rpjrt_fake/roundtrip";
const KV_VALUE: &str = "rpjrt-fake-value";
/// How long the fake waits for another process's key.
const KV_TIMEOUT_MS: i32 = 10_000;

/// Puts `key` = `value` through the caller's KV put callback.
fn kv_put(a: &sys::PJRT_Client_Create_Args, key: &str, value: &str) -> Result<(), Fail> {
    let put = a
        .kv_put_callback
        .ok_or_else(|| invalid("fake plugin: the KV exchange needs kv_put_callback"))?;
    let mut cb: Option<sys::PJRT_CallbackError> = Some(error::callback_error);
    let mut args = sys::PJRT_KeyValuePutCallback_Args {
        struct_size: sys::PJRT_KeyValuePutCallback_Args_STRUCT_SIZE,
        extension_start: std::ptr::null_mut(),
        key: key.as_ptr().cast(),
        key_size: key.len(),
        value: value.as_ptr().cast(),
        value_size: value.len(),
        callback_error: &mut cb,
        user_arg: a.kv_put_user_arg,
    };
    // SAFETY: the caller supplied this callback for exactly this call shape; the args
    // and the strings they point at outlive the call.
    let err = unsafe { put(&mut args) };
    if !err.is_null() {
        return Err(error::take_callback_error(err, "kv_put_callback failed"));
    }
    Ok(())
}

/// Reads a value the callback handed out, then frees it with its deleter.
fn take_value(
    value: *mut std::ffi::c_char,
    size: usize,
    deleter: Option<unsafe extern "C" fn(*mut std::ffi::c_char)>,
) -> String {
    // SAFETY: on success the callback returns `size` bytes at `value`.
    let got = unsafe { crate::named::read_str(value, size) };
    if let (Some(del), false) = (deleter, value.is_null()) {
        // SAFETY: the callback handed us the value together with its deleter.
        unsafe { del(value) };
    }
    got
}

/// Gets `key` through the caller's KV get callback (blocking up to `timeout_ms`).
fn kv_get(a: &sys::PJRT_Client_Create_Args, key: &str, timeout_ms: i32) -> Result<String, Fail> {
    let get = a
        .kv_get_callback
        .ok_or_else(|| invalid("fake plugin: the KV exchange needs kv_get_callback"))?;
    let mut cb: Option<sys::PJRT_CallbackError> = Some(error::callback_error);
    let mut args = sys::PJRT_KeyValueGetCallback_Args {
        struct_size: sys::PJRT_KeyValueGetCallback_Args_STRUCT_SIZE,
        extension_start: std::ptr::null_mut(),
        key: key.as_ptr().cast(),
        key_size: key.len(),
        timeout_in_ms: timeout_ms,
        callback_error: &mut cb,
        user_arg: a.kv_get_user_arg,
        value: std::ptr::null_mut(),
        value_size: 0,
        value_deleter_callback: None,
    };
    // SAFETY: as for kv_put.
    let err = unsafe { get(&mut args) };
    if !err.is_null() {
        return Err(error::take_callback_error(err, "kv_get_callback failed"));
    }
    Ok(take_value(
        args.value,
        args.value_size,
        args.value_deleter_callback,
    ))
}

/// The `fake_kv_roundtrip` option: put a value through the caller's KV callbacks and read
/// it back with get (and try_get when given).
fn kv_roundtrip(a: &sys::PJRT_Client_Create_Args) -> Result<(), Fail> {
    if a.kv_put_callback.is_none() {
        return Err(invalid(
            "fake plugin: fake_kv_roundtrip needs kv_put_callback",
        ));
    }
    if a.kv_get_callback.is_none() {
        return Err(invalid(
            "fake plugin: fake_kv_roundtrip needs kv_get_callback",
        ));
    }
    kv_put(a, KV_KEY, KV_VALUE)?;
    let got = kv_get(a, KV_KEY, 5000)?;
    if got != KV_VALUE {
        return Err(invalid(format!(
            "fake plugin: kv_get_callback returned {got:?}, expected {KV_VALUE:?}"
        )));
    }
    if let Some(try_get) = a.kv_try_get_callback {
        let mut cb: Option<sys::PJRT_CallbackError> = Some(error::callback_error);
        let mut args = sys::PJRT_KeyValueTryGetCallback_Args {
            struct_size: sys::PJRT_KeyValueTryGetCallback_Args_STRUCT_SIZE,
            extension_start: std::ptr::null_mut(),
            key: KV_KEY.as_ptr().cast(),
            key_size: KV_KEY.len(),
            callback_error: &mut cb,
            user_arg: a.kv_try_get_user_arg,
            value: std::ptr::null_mut(),
            value_size: 0,
            value_deleter_callback: None,
        };
        // SAFETY: as for kv_put.
        let err = unsafe { try_get(&mut args) };
        if !err.is_null() {
            return Err(error::take_callback_error(
                err,
                "kv_try_get_callback failed",
            ));
        }
        let got = take_value(args.value, args.value_size, args.value_deleter_callback);
        if got != KV_VALUE {
            return Err(invalid(format!(
                "fake plugin: kv_try_get_callback returned {got:?}, expected {KV_VALUE:?}"
            )));
        }
    }
    Ok(())
}

/// The `RPJRT_FAKE_KV` exchange: publish this process's device count under
/// `fake:device:<node_id>` and read every other process's, giving the process index of
/// each device of the global list (process-major).
fn kv_exchange(
    a: &sys::PJRT_Client_Create_Args,
    num_nodes: i64,
    node_id: i64,
    local: i64,
) -> Result<Vec<i32>, Fail> {
    if !(1..=1024).contains(&num_nodes) || !(0..num_nodes).contains(&node_id) {
        return Err(invalid(format!(
            "fake plugin: need 0 <= node_id < num_nodes <= 1024, got node_id {node_id}, num_nodes {num_nodes}"
        )));
    }
    kv_put(a, &format!("fake:device:{node_id}"), &local.to_string())?;
    let mut procs = Vec::new();
    for node in 0..num_nodes {
        let count = if node == node_id {
            local
        } else {
            let key = format!("fake:device:{node}");
            let text = kv_get(a, &key, KV_TIMEOUT_MS).map_err(|f| {
                Fail::new(
                    f.code,
                    format!(
                        "fake plugin: waiting for process {node} (key {key}): {}",
                        f.message
                    ),
                )
            })?;
            text.trim()
                .parse::<i64>()
                .ok()
                .filter(|n| (1..=4096).contains(n))
                .ok_or_else(|| {
                    invalid(format!(
                        "fake plugin: process {node} published a bad device count {text:?}"
                    ))
                })?
        };
        procs.resize(procs.len() + count as usize, node as i32);
    }
    Ok(procs)
}

fn create(a: &sys::PJRT_Client_Create_Args, state: &State) -> Result<*mut FakeClient, Fail> {
    // SAFETY: per the C API, create_options points at num_options named values.
    let options = unsafe { read_named_values(state, a.create_options, a.num_options) }?;
    let mut device_count = DEFAULT_DEVICE_COUNT as i64;
    let mut addressable: Option<i64> = None;
    let mut process_index = 0i64;
    let mut roundtrip = false;
    let mut num_nodes: Option<i64> = None;
    let mut node_id: Option<i64> = None;
    let mut seen = BTreeSet::new();
    for opt in &options {
        if !seen.insert(opt.name.as_str()) {
            return Err(invalid(format!(
                "fake plugin: create option {:?} given twice",
                opt.name
            )));
        }
        match opt.name.as_str() {
            "fake_device_count" => device_count = option_int(opt)?,
            "fake_addressable_device_count" => addressable = Some(option_int(opt)?),
            "fake_process_index" => process_index = option_int(opt)?,
            "fake_kv_roundtrip" => roundtrip = option_bool(opt)?,
            "num_nodes" if state.config.kv => num_nodes = Some(option_int(opt)?),
            "node_id" if state.config.kv => node_id = Some(option_int(opt)?),
            name => {
                if let Some(allowed) = &state.config.allowed_options {
                    if !allowed.contains(name) {
                        return Err(invalid(format!(
                            "fake plugin: unsupported create option {name:?}"
                        )));
                    }
                }
            }
        }
    }
    if !(1..=4096).contains(&device_count) {
        return Err(invalid(format!(
            "fake plugin: fake_device_count must be in 1..=4096, got {device_count}"
        )));
    }
    let addressable = addressable.unwrap_or(device_count);
    if !(1..=device_count).contains(&addressable) {
        return Err(invalid(format!(
            "fake plugin: fake_addressable_device_count must be in 1..={device_count}, got {addressable}"
        )));
    }
    if !(0..=i64::from(i32::MAX - 1)).contains(&process_index) {
        return Err(invalid(format!(
            "fake plugin: fake_process_index out of range: {process_index}"
        )));
    }
    if roundtrip {
        kv_roundtrip(a)?;
    }
    let kv = state.config.kv && a.kv_put_callback.is_some() && a.kv_get_callback.is_some();
    let (procs, process_index) = match (num_nodes, kv) {
        (Some(nodes), true) => {
            let node = node_id.unwrap_or(0);
            (kv_exchange(a, nodes, node, addressable)?, node as i32)
        }
        _ => {
            let pi = process_index as i32;
            let procs = (0..device_count)
                .map(|i| if i < addressable { pi } else { pi + 1 })
                .collect();
            (procs, pi)
        }
    };
    let inner = ClientInner::new(&procs, process_index, options, state.config.memory_limit);
    let raw = Box::into_raw(Box::new(FakeClient { inner }));
    registry::register(raw, Kind::Client);
    Ok(raw)
}

entry_fn!(client_create, PJRT_Client_Create, |a, state| {
    a.client = create(a, state)?.cast();
    Ok(())
});

entry_fn!(client_destroy, PJRT_Client_Destroy, |a, _| {
    let client = a.client;
    if client.is_null() {
        return Ok(());
    }
    if !registry::unregister(client.cast::<FakeClient>(), Kind::Client) {
        return Err(invalid(format!(
            "fake plugin: PJRT_Client_Destroy: {client:p} is not a live PJRT_Client"
        )));
    }
    // SAFETY: it was live, so it came from Box::into_raw in `create`; it is now
    // unregistered, so this is the only free.
    drop(unsafe { Box::from_raw(client.cast::<FakeClient>()) });
    Ok(())
});

entry_fn!(client_platform_name, PJRT_Client_PlatformName, |a, _| {
    client_ref(a.client)?;
    a.platform_name = PLATFORM_NAME.as_ptr().cast();
    a.platform_name_size = PLATFORM_NAME.len();
    Ok(())
});

entry_fn!(client_process_index, PJRT_Client_ProcessIndex, |a, _| {
    a.process_index = client_ref(a.client)?.inner.process_index;
    Ok(())
});

entry_fn!(
    client_platform_version,
    PJRT_Client_PlatformVersion,
    |a, _| {
        let c = client_ref(a.client)?;
        a.platform_version = c.inner.platform_version.as_ptr().cast();
        a.platform_version_size = c.inner.platform_version.len();
        Ok(())
    }
);

entry_fn!(client_devices, PJRT_Client_Devices, |a, _| {
    let c = client_ref(a.client)?;
    a.devices = c.inner.device_ptrs.as_ptr();
    a.num_devices = c.inner.device_ptrs.len();
    Ok(())
});

entry_fn!(
    client_addressable_devices,
    PJRT_Client_AddressableDevices,
    |a, _| {
        let c = client_ref(a.client)?;
        a.addressable_devices = c.inner.addressable_ptrs.as_ptr();
        a.num_addressable_devices = c.inner.addressable_ptrs.len();
        Ok(())
    }
);

entry_fn!(client_lookup_device, PJRT_Client_LookupDevice, |a, _| {
    let c = client_ref(a.client)?;
    let i = c
        .inner
        .devices
        .iter()
        .position(|d| d.id == a.id)
        .ok_or_else(|| invalid(format!("fake plugin: no device with id {}", a.id)))?;
    a.device = c.inner.device_ptr(i);
    Ok(())
});

entry_fn!(
    client_lookup_addressable_device,
    PJRT_Client_LookupAddressableDevice,
    |a, _| {
        let c = client_ref(a.client)?;
        let i = c
            .inner
            .devices
            .iter()
            .position(|d| d.addressable && d.local_hardware_id == a.local_hardware_id)
            .ok_or_else(|| {
                invalid(format!(
                    "fake plugin: no addressable device with local_hardware_id {}",
                    a.local_hardware_id
                ))
            })?;
        a.addressable_device = c.inner.device_ptr(i);
        Ok(())
    }
);

entry_fn!(
    client_addressable_memories,
    PJRT_Client_AddressableMemories,
    |a, _| {
        let c = client_ref(a.client)?;
        a.addressable_memories = c.inner.addressable_memory_ptrs.as_ptr();
        a.num_addressable_memories = c.inner.addressable_memory_ptrs.len();
        Ok(())
    }
);

entry_fn!(
    client_default_device_assignment,
    PJRT_Client_DefaultDeviceAssignment,
    |a, _| {
        let c = client_ref(a.client)?;
        if a.num_replicas < 1 || a.num_partitions < 1 {
            return Err(invalid(format!(
                "fake plugin: bad replica/partition counts {}x{}",
                a.num_replicas, a.num_partitions
            )));
        }
        let n = a.num_replicas as usize * a.num_partitions as usize;
        if n > c.inner.addressable_count() {
            return Err(invalid(format!(
                "fake plugin: {n} devices requested, the client has {} addressable",
                c.inner.addressable_count()
            )));
        }
        if a.default_assignment_size < n || a.default_assignment.is_null() {
            return Err(invalid(format!(
                "fake plugin: default_assignment holds {}, needs {n}",
                a.default_assignment_size
            )));
        }
        for i in 0..n {
            // SAFETY: the caller provides default_assignment_size >= n ints.
            unsafe { *a.default_assignment.add(i) = c.inner.devices[i].id };
        }
        Ok(())
    }
);

entry_fn!(description_id, PJRT_DeviceDescription_Id, |a, _| {
    a.id = description_ref(a.device_description)?.id;
    Ok(())
});

entry_fn!(
    description_process_index,
    PJRT_DeviceDescription_ProcessIndex,
    |a, _| {
        a.process_index = description_ref(a.device_description)?.process_index;
        Ok(())
    }
);

entry_fn!(
    description_attributes,
    PJRT_DeviceDescription_Attributes,
    |a, _| {
        let d = description_ref(a.device_description)?;
        a.attributes = d.attributes.as_ptr();
        a.num_attributes = d.attributes.len();
        Ok(())
    }
);

entry_fn!(description_kind, PJRT_DeviceDescription_Kind, |a, _| {
    description_ref(a.device_description)?;
    a.device_kind = DEVICE_KIND.as_ptr().cast();
    a.device_kind_size = DEVICE_KIND.len();
    Ok(())
});

entry_fn!(
    description_debug_string,
    PJRT_DeviceDescription_DebugString,
    |a, _| {
        let d = description_ref(a.device_description)?;
        a.debug_string = d.debug_string.as_ptr().cast();
        a.debug_string_size = d.debug_string.len();
        Ok(())
    }
);

entry_fn!(
    description_to_string,
    PJRT_DeviceDescription_ToString,
    |a, _| {
        let d = description_ref(a.device_description)?;
        a.to_string = d.to_string.as_ptr().cast();
        a.to_string_size = d.to_string.len();
        Ok(())
    }
);

entry_fn!(
    device_get_description,
    PJRT_Device_GetDescription,
    |a, _| {
        let d = device_ref(a.device)?;
        let desc: &FakeDescription = &d.description;
        a.device_description = (desc as *const FakeDescription).cast_mut().cast();
        Ok(())
    }
);

entry_fn!(device_is_addressable, PJRT_Device_IsAddressable, |a, _| {
    // place, never read.
    let device = a.device;
    let d = device_ref(device)?;
    a.is_addressable = d.addressable;
    Ok(())
});

entry_fn!(
    device_local_hardware_id,
    PJRT_Device_LocalHardwareId,
    |a, _| {
        a.local_hardware_id = device_ref(a.device)?.local_hardware_id;
        Ok(())
    }
);

entry_fn!(
    device_addressable_memories,
    PJRT_Device_AddressableMemories,
    |a, _| {
        let d = device_ref(a.device)?;
        a.memories = d.memories.as_ptr();
        a.num_memories = d.memories.len();
        Ok(())
    }
);

entry_fn!(device_default_memory, PJRT_Device_DefaultMemory, |a, _| {
    a.memory = device_ref(a.device)?.default_memory;
    Ok(())
});

entry_fn!(memory_id, PJRT_Memory_Id, |a, _| {
    a.id = memory_ref(a.memory)?.id;
    Ok(())
});

entry_fn!(memory_kind, PJRT_Memory_Kind, |a, _| {
    let m = memory_ref(a.memory)?;
    a.kind = m.kind.as_ptr().cast();
    a.kind_size = m.kind.len();
    Ok(())
});

entry_fn!(memory_kind_id, PJRT_Memory_Kind_Id, |a, _| {
    a.kind_id = memory_ref(a.memory)?.kind_id;
    Ok(())
});

entry_fn!(memory_debug_string, PJRT_Memory_DebugString, |a, _| {
    let m = memory_ref(a.memory)?;
    a.debug_string = m.debug_string.as_ptr().cast();
    a.debug_string_size = m.debug_string.len();
    Ok(())
});

entry_fn!(memory_to_string, PJRT_Memory_ToString, |a, _| {
    let m = memory_ref(a.memory)?;
    a.to_string = m.to_string.as_ptr().cast();
    a.to_string_size = m.to_string.len();
    Ok(())
});

entry_fn!(
    memory_addressable_by_devices,
    PJRT_Memory_AddressableByDevices,
    |a, _| {
        let m = memory_ref(a.memory)?;
        a.devices = m.devices.as_ptr();
        a.num_devices = m.devices.len();
        Ok(())
    }
);
