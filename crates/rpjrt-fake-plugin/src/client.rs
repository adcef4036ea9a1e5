//! Clients, devices, device descriptions and memories.

use std::collections::BTreeSet;
use std::sync::Arc;

use rpjrt_sys as sys;

use crate::config::{AttrValue, Attribute};
use crate::error::{self, invalid, Fail};
use crate::named::{out_slice, out_str, read_named_values, read_str, NamedValues};
use crate::registry::{self, get};

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
}

pub(crate) struct FakeDescription {
    id: i32,
    process_index: i32,
    debug_string: String,
    to_string: String,
    attributes: NamedValues,
}

pub(crate) struct FakeMemory {
    pub id: i32,
    pub kind: &'static str,
    pub kind_id: i32,
    /// Index of the device that owns this memory.
    pub device: usize,
    debug_string: String,
    to_string: String,
    devices: Vec<*mut sys::PJRT_Device>,
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
// which never move and are not mutated after creation.
unsafe impl Send for ClientInner {}
// SAFETY: as above.
unsafe impl Sync for ClientInner {}

pub(crate) struct FakeClient {
    pub inner: Arc<ClientInner>,
}

handles! {
    PJRT_Client => FakeClient,
    PJRT_Device => FakeDevice,
    PJRT_DeviceDescription => FakeDescription,
    PJRT_Memory => FakeMemory,
}

impl ClientInner {
    /// A client of `process_index` over devices owned by the processes in `procs` (one
    /// entry per device); the devices of `process_index` are addressable.
    fn new(
        procs: &[i32],
        process_index: i32,
        options: Vec<Attribute>,
        limit: Option<u64>,
    ) -> Arc<ClientInner> {
        let mut local = 0..;
        let mut devices: Vec<FakeDevice> = (procs.iter().enumerate())
            .map(|(i, &pi)| {
                let (id, addressable) = (i as i32, pi == process_index);
                let attrs = [
                    Attribute::new("fake_device_index", AttrValue::Int64(i as i64)),
                    Attribute::new("coords", AttrValue::Int64List(vec![i as i64, 0, 0])),
                ];
                FakeDevice {
                    id,
                    memory: crate::memory::DeviceMemory::new(i, limit),
                    local_hardware_id: if addressable {
                        local.next().unwrap_or(0)
                    } else {
                        -1
                    },
                    addressable,
                    description: Box::new(FakeDescription {
                        id,
                        process_index: pi,
                        debug_string: format!("FakeDevice(id={id}, process_index={pi})"),
                        to_string: format!("FakeDevice(id={id})"),
                        attributes: NamedValues::new(&attrs),
                    }),
                    memories: Vec::new(),
                }
            })
            .collect();
        let device_ptrs: Vec<*mut sys::PJRT_Device> = devices
            .iter_mut()
            .map(|d| (d as *mut FakeDevice).cast())
            .collect();
        let mut memories: Vec<FakeMemory> = (0..devices.len() * MEMORY_KINDS.len())
            .map(|id| {
                let (device, kind_id) = (id / MEMORY_KINDS.len(), id % MEMORY_KINDS.len());
                let kind = MEMORY_KINDS[kind_id];
                FakeMemory {
                    id: id as i32,
                    kind,
                    kind_id: kind_id as i32,
                    device,
                    debug_string: format!("FakeMemory(id={id}, kind={kind}, device={device})"),
                    to_string: format!("FakeMemory(id={id}, kind={kind})"),
                    devices: vec![device_ptrs[device]],
                }
            })
            .collect();
        let memory_ptrs: Vec<*mut sys::PJRT_Memory> = memories
            .iter_mut()
            .map(|m| (m as *mut FakeMemory).cast())
            .collect();
        for (d, mems) in devices
            .iter_mut()
            .zip(memory_ptrs.chunks(MEMORY_KINDS.len()))
        {
            d.memories = mems.to_vec();
        }
        let addressable = |d: &usize| devices[*d].addressable;
        let addressable_ptrs = (0..devices.len())
            .filter(addressable)
            .map(|d| device_ptrs[d])
            .collect();
        let addressable_memory_ptrs = (0..memories.len())
            .filter(|m| addressable(&memories[*m].device))
            .map(|m| memory_ptrs[m])
            .collect();
        for d in &devices {
            // SAFETY: the devices, descriptions (boxed) and memories stay where they are
            // until ClientInner drops, which unregisters them first.
            unsafe {
                registry::register_in_place::<sys::PJRT_Device>(d);
                registry::register_in_place::<sys::PJRT_DeviceDescription>(&d.description);
            }
        }
        for m in &memories {
            // SAFETY: as above.
            unsafe { registry::register_in_place::<sys::PJRT_Memory>(m) };
        }
        let mut platform_version = format!("fake {}", env!("CARGO_PKG_VERSION"));
        if !options.is_empty() {
            let shown: Vec<String> = options
                .iter()
                .map(|o| format!("{}={}", o.name, o.value))
                .collect();
            platform_version += &format!("; create options: {}", shown.join(", "));
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
        (&self.memories[index] as *const FakeMemory)
            .cast_mut()
            .cast()
    }

    /// Index of the default memory of device `index`.
    pub fn default_memory_index(&self, device: usize) -> usize {
        device * MEMORY_KINDS.len()
    }

    /// Index of device `device`, if it is addressable; else INVALID_ARGUMENT.
    pub fn check_addressable(&self, device: usize) -> Result<usize, Fail> {
        match self.devices[device].addressable {
            true => Ok(device),
            false => Err(invalid!(
                "fake plugin: device {} is not addressable",
                self.device_name(device)
            )),
        }
    }

    pub fn device_name(&self, index: usize) -> &str {
        &self.devices[index].description.to_string
    }
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        for d in &self.devices {
            registry::unregister_in_place::<sys::PJRT_Device>(d);
            registry::unregister_in_place::<sys::PJRT_DeviceDescription>(&d.description);
        }
        self.memories
            .iter()
            .for_each(registry::unregister_in_place::<sys::PJRT_Memory>);
    }
}

fn option<T>(opt: &Attribute, kind: &str, value: Option<T>) -> Result<T, Fail> {
    value.ok_or_else(|| {
        invalid!(
            "fake plugin: create option {:?} must be {kind}, got {}",
            opt.name,
            opt.value
        )
    })
}

fn int(opt: &Attribute) -> Result<i64, Fail> {
    let value = match opt.value {
        AttrValue::Int64(v) => Some(v),
        _ => None,
    };
    option(opt, "an int64", value)
}

const KV_KEY: &str = "rpjrt_fake/roundtrip";
const KV_VALUE: &str = "rpjrt-fake-value";
/// How long the fake waits for another process's key.
const KV_TIMEOUT_MS: i32 = 10_000;

/// Puts `key` = `value` through the caller's KV put callback.
fn kv_put(a: &sys::PJRT_Client_Create_Args, key: &str, value: &str) -> Result<(), Fail> {
    let put = (a.kv_put_callback)
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
    match unsafe { put(&mut args) } {
        err if err.is_null() => Ok(()),
        err => Err(error::take_callback_error(err, "kv_put_callback failed")),
    }
}

/// Calls a KV get or try-get callback of `a` for `key` (`$field: $value` adds get's
/// timeout) and returns the value it hands out, freed with its deleter.
macro_rules! kv_get {
    ($a:ident.$cb:ident($user:ident), $args:ident, $key:expr $(, $field:ident: $value:expr)?) => {{
        let what = stringify!($cb);
        let get = ($a.$cb).ok_or_else(|| invalid!("fake plugin: the KV exchange needs {what}"))?;
        let mut cb: Option<sys::PJRT_CallbackError> = Some(error::callback_error);
        let key: &str = $key;
        let mut args = sys::$args {
            struct_size: pastey::paste!(sys::[<$args _STRUCT_SIZE>]),
            extension_start: std::ptr::null_mut(),
            key: key.as_ptr().cast(),
            key_size: key.len(),
            $($field: $value,)?
            callback_error: &mut cb,
            user_arg: $a.$user,
            value: std::ptr::null_mut(),
            value_size: 0,
            value_deleter_callback: None,
        };
        // SAFETY: as for kv_put.
        let err = unsafe { get(&mut args) };
        if !err.is_null() {
            return Err(error::take_callback_error(err, &format!("{what} failed")));
        }
        // SAFETY: on success the callback returns `value_size` bytes at `value`.
        let got = unsafe { read_str(args.value, args.value_size) };
        if let (Some(del), false) = (args.value_deleter_callback, args.value.is_null()) {
            // SAFETY: the callback handed us the value together with its deleter.
            unsafe { del(args.value) };
        }
        got
    }};
}

/// Gets `key` through the caller's KV get callback (blocking up to `timeout_ms`).
fn kv_get(a: &sys::PJRT_Client_Create_Args, key: &str, timeout_ms: i32) -> Result<String, Fail> {
    Ok(kv_get!(
        a.kv_get_callback(kv_get_user_arg), PJRT_KeyValueGetCallback_Args, key,
        timeout_in_ms: timeout_ms
    ))
}

/// The `fake_kv_roundtrip` option: put a value through the caller's KV callbacks and read
/// it back with get (and try_get when given).
fn kv_roundtrip(a: &sys::PJRT_Client_Create_Args) -> Result<(), Fail> {
    kv_put(a, KV_KEY, KV_VALUE)?;
    let mut got = vec![("kv_get_callback", kv_get(a, KV_KEY, 5000)?)];
    if a.kv_try_get_callback.is_some() {
        let value = kv_get!(
            a.kv_try_get_callback(kv_try_get_user_arg),
            PJRT_KeyValueTryGetCallback_Args,
            KV_KEY
        );
        got.push(("kv_try_get_callback", value));
    }
    match got.into_iter().find(|(_, v)| v != KV_VALUE) {
        Some((what, v)) => Err(invalid!(
            "fake plugin: {what} returned {v:?}, expected {KV_VALUE:?}"
        )),
        None => Ok(()),
    }
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
        bail!(
            "fake plugin: need 0 <= node_id < num_nodes <= 1024, \
             got node_id {node_id}, num_nodes {num_nodes}"
        );
    }
    kv_put(a, &format!("fake:device:{node_id}"), &local.to_string())?;
    let mut procs = Vec::new();
    for node in 0..num_nodes {
        let count = if node == node_id {
            local
        } else {
            let key = format!("fake:device:{node}");
            let text = kv_get(a, &key, KV_TIMEOUT_MS).map_err(|f| {
                f.context(format!(
                    "fake plugin: waiting for process {node} (key {key})"
                ))
            })?;
            let count = text
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|n| (1..=4096).contains(n));
            count.ok_or_else(|| {
                invalid!("fake plugin: process {node} published a bad device count {text:?}")
            })?
        };
        procs.resize(procs.len() + count as usize, node as i32);
    }
    Ok(procs)
}

entry!(PJRT_Client_Create, |a, state| {
    // SAFETY: per the C API, create_options points at num_options named values.
    let options = unsafe { read_named_values(state, a.create_options, a.num_options) }?;
    let (mut device_count, mut addressable) = (DEFAULT_DEVICE_COUNT as i64, None);
    let (mut process_index, mut roundtrip, mut num_nodes, mut node_id) = (0, false, None, None);
    let mut seen = BTreeSet::new();
    for opt in &options {
        if !seen.insert(opt.name.as_str()) {
            bail!("fake plugin: create option {:?} given twice", opt.name);
        }
        let kv = state.config.kv;
        match opt.name.as_str() {
            "fake_device_count" => device_count = int(opt)?,
            "fake_addressable_device_count" => addressable = Some(int(opt)?),
            "fake_process_index" => process_index = int(opt)?,
            "fake_kv_roundtrip" => {
                let value = match opt.value {
                    AttrValue::Bool(v) => Some(v),
                    _ => None,
                };
                roundtrip = option(opt, "a bool", value)?
            }
            "num_nodes" if kv => num_nodes = Some(int(opt)?),
            "node_id" if kv => node_id = Some(int(opt)?),
            name => match &state.config.allowed_options {
                Some(allowed) if !allowed.contains(name) => {
                    bail!("fake plugin: unsupported create option {name:?}")
                }
                _ => {}
            },
        }
    }
    if !(1..=4096).contains(&device_count) {
        bail!("fake plugin: fake_device_count must be in 1..=4096, got {device_count}");
    }
    let addressable = addressable.unwrap_or(device_count);
    if !(1..=device_count).contains(&addressable) {
        bail!(
            "fake plugin: fake_addressable_device_count must be in 1..={device_count}, \
             got {addressable}"
        );
    }
    if !(0..=i64::from(i32::MAX - 1)).contains(&process_index) {
        bail!("fake plugin: fake_process_index out of range: {process_index}");
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
            (
                (0..device_count)
                    .map(|i| if i < addressable { pi } else { pi + 1 })
                    .collect(),
                pi,
            )
        }
    };
    let inner = ClientInner::new(&procs, process_index, options, state.config.memory_limit);
    a.client = registry::new(FakeClient { inner });
});

entry!(PJRT_Client_Destroy, |a, _| registry::destroy(a.client)?);

entry!(PJRT_Client_PlatformName, |a, _| {
    get(a.client)?;
    (a.platform_name, a.platform_name_size) = out_str(PLATFORM_NAME);
});

entry!(PJRT_Client_ProcessIndex, |a, _| {
    a.process_index = get(a.client)?.inner.process_index;
});

entry!(PJRT_Client_PlatformVersion, |a, _| {
    let c = get(a.client)?;
    (a.platform_version, a.platform_version_size) = out_str(&c.inner.platform_version);
});

entry!(PJRT_Client_Devices, |a, _| {
    (a.devices, a.num_devices) = out_slice(&get(a.client)?.inner.device_ptrs);
});

entry!(PJRT_Client_AddressableDevices, |a, _| {
    let c = get(a.client)?;
    (a.addressable_devices, a.num_addressable_devices) = out_slice(&c.inner.addressable_ptrs);
});

entry!(PJRT_Client_LookupDevice, |a, _| {
    let c = &get(a.client)?.inner;
    let i = c.devices.iter().position(|d| d.id == a.id);
    a.device = c.device_ptr(i.ok_or_else(|| invalid!("fake plugin: no device with id {}", a.id))?);
});

entry!(PJRT_Client_AddressableMemories, |a, _| {
    let c = get(a.client)?;
    (a.addressable_memories, a.num_addressable_memories) =
        out_slice(&c.inner.addressable_memory_ptrs);
});

entry!(PJRT_DeviceDescription_Id, |a, _| {
    a.id = get(a.device_description)?.id;
});

entry!(PJRT_DeviceDescription_ProcessIndex, |a, _| {
    a.process_index = get(a.device_description)?.process_index;
});

entry!(PJRT_DeviceDescription_Attributes, |a, _| {
    let d = get(a.device_description)?;
    (a.attributes, a.num_attributes) = d.attributes.out();
});

entry!(PJRT_DeviceDescription_Kind, |a, _| {
    get(a.device_description)?;
    (a.device_kind, a.device_kind_size) = out_str(DEVICE_KIND);
});

entry!(PJRT_DeviceDescription_DebugString, |a, _| {
    let d = get(a.device_description)?;
    (a.debug_string, a.debug_string_size) = out_str(&d.debug_string);
});

entry!(PJRT_DeviceDescription_ToString, |a, _| {
    let d = get(a.device_description)?;
    (a.to_string, a.to_string_size) = out_str(&d.to_string);
});

entry!(PJRT_Device_GetDescription, |a, _| {
    let desc: &FakeDescription = &get(a.device)?.description;
    a.device_description = (desc as *const FakeDescription).cast_mut().cast();
});

entry!(PJRT_Device_IsAddressable, |a, _| {
    a.is_addressable = get(a.device)?.addressable;
});

entry!(PJRT_Device_LocalHardwareId, |a, _| {
    a.local_hardware_id = get(a.device)?.local_hardware_id;
});

entry!(PJRT_Device_AddressableMemories, |a, _| {
    (a.memories, a.num_memories) = out_slice(&get(a.device)?.memories);
});

entry!(PJRT_Device_DefaultMemory, |a, _| {
    a.memory = get(a.device)?.memories[0];
});

entry!(PJRT_Memory_Id, |a, _| a.id = get(a.memory)?.id);

entry!(PJRT_Memory_Kind, |a, _| {
    (a.kind, a.kind_size) = out_str(get(a.memory)?.kind);
});

entry!(PJRT_Memory_Kind_Id, |a, _| {
    a.kind_id = get(a.memory)?.kind_id;
});

entry!(PJRT_Memory_DebugString, |a, _| {
    let m = get(a.memory)?;
    (a.debug_string, a.debug_string_size) = out_str(&m.debug_string);
});

entry!(PJRT_Memory_ToString, |a, _| {
    (a.to_string, a.to_string_size) = out_str(&get(a.memory)?.to_string);
});

entry!(PJRT_Memory_AddressableByDevices, |a, _| {
    (a.devices, a.num_devices) = out_slice(&get(a.memory)?.devices);
});
