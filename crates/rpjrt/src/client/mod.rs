//! The handle types and what is bound to them: the client, its devices and memories
//! (this file), buffers, events, executables, topologies, artifacts (serialize and load)
//! and the compile cache. They hold each other (a buffer holds its client's core, a
//! client makes buffers), so they are one module; everything else in the crate depends on
//! this one way.

pub(crate) mod alias;
pub(crate) mod aot;
pub(crate) mod buffer;
pub(crate) mod cache;
pub(crate) mod event;
pub(crate) mod executable;
pub(crate) mod topology;

pub use aot::{Artifact, ArtifactTarget, ENVELOPE_VERSION};
pub use buffer::{Buffer, ExternalReference, HostView, QUICK_COPY_BYTES};
pub use cache::{Cache, CacheEntry, CacheStats};
pub use event::{set_wait_spin, wait_spin, Event, MAX_WAIT_SPIN};
pub use executable::{CallOutputs, Executable, ExecuteOptions, Execution, PreparedCall};
pub use topology::Topology;

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::client::buffer::{BufferMeta, HostBytes};
use crate::dtype::{element_count, try_unpack_sub_byte, ElementType, NativeType};
use crate::error::{Error, Result};
use crate::oom::{DeviceFigures, MemoryStats, OomReport};
use crate::options::CompileOptions;
use crate::plugin::Plugin;
use crate::program::Program;
use crate::raw::device::{DeviceFacts, DeviceRef, MemoryFacts, MemoryRef};
use crate::raw::value::{from_raw_list, ClientOptions, Value};
use crate::raw::{self, Api};

pub(crate) struct DeviceData {
    pub(in crate::client) raw: DeviceRef,
    pub(in crate::client) facts: DeviceFacts,
    pub(in crate::client) attributes: Vec<(String, Value)>,
    pub(in crate::client) default_memory: Option<MemoryRef>,
    pub(in crate::client) memories: Vec<MemoryRef>,
}

pub(crate) struct MemoryData {
    pub(in crate::client) raw: MemoryRef,
    pub(in crate::client) facts: MemoryFacts,
    pub(in crate::client) devices: Vec<DeviceRef>,
}

/// The shared core of a client: every object made from it holds an `Arc` to this (and the
/// raw handles hold the raw client), so the C client is destroyed only after the last of
/// them.
pub(crate) struct ClientCore {
    pub(in crate::client) api: &'static Api,
    pub(in crate::client) plugin: Plugin,
    pub(in crate::client) raw: Arc<raw::client::Client>,
    closed: AtomicBool,
    pub(in crate::client) platform_name: String,
    pub(in crate::client) platform_version: String,
    pub(in crate::client) process_index: i32,
    pub(in crate::client) devices: Vec<Arc<DeviceData>>,
    pub(in crate::client) addressable: Vec<usize>,
    pub(in crate::client) memories: Vec<Arc<MemoryData>>,
    /// The persistent compile cache `compile` uses, if any (see `cache.rs`).
    pub(in crate::client) cache: std::sync::RwLock<Option<crate::client::cache::Cache>>,
    /// The create options that bound device memory (`oom::MEMORY_OPTIONS`), as text.
    memory_options: Vec<(String, String)>,
    /// Events with asynchronous waiters (`.await`, done callbacks, timed waits), which
    /// `close` ends: nothing else would wake them while what they wait for never comes.
    pub(in crate::client) waited_events: crate::client::event::Waited,
}

impl ClientCore {
    /// The plugin's function table.
    pub(crate) fn api(&self) -> &'static Api {
        self.api
    }

    /// The raw client handle.
    pub(crate) fn raw(&self) -> &Arc<raw::client::Client> {
        &self.raw
    }

    /// The platform's name, as the client reported it at creation.
    pub(crate) fn platform_name(&self) -> &str {
        &self.platform_name
    }

    /// Errors with `Closed` if `close()` was called.
    #[inline]
    pub(crate) fn check(&self, what: &'static str) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed(what))
        } else if self.api.is_forked() {
            // Refused before anything of rpjrt's own (a lock another thread of the parent
            // held at the fork, a value it was computing) is touched, not only at the plugin.
            Err(self.api.forked_error("use of a plugin object"))
        } else {
            Ok(())
        }
    }

    pub(crate) fn device_data(&self, raw: DeviceRef) -> Option<&Arc<DeviceData>> {
        self.devices.iter().find(|d| d.raw == raw)
    }

    pub(crate) fn memory_data(&self, raw: MemoryRef) -> Option<&Arc<MemoryData>> {
        self.memories.iter().find(|m| m.raw == raw)
    }

    /// The public `Device` for a device the plugin named: the one place device values are
    /// built.
    pub(crate) fn device(self: &Arc<Self>, raw: DeviceRef) -> Result<Device> {
        let data = self
            .device_data(raw)
            .ok_or_else(|| Error::invalid("the plugin named a device it did not list"))?;
        Ok(Device {
            core: Arc::clone(self),
            data: Arc::clone(data),
        })
    }

    /// The public `Memory` for a memory the plugin named: the one place memory values are
    /// built.
    pub(crate) fn memory(self: &Arc<Self>, raw: MemoryRef) -> Result<Memory> {
        let data = self
            .memory_data(raw)
            .ok_or_else(|| Error::invalid("the plugin named a memory it did not list"))?;
        Ok(Memory {
            core: Arc::clone(self),
            data: Arc::clone(data),
        })
    }

    /// A device's allocator figures (`PJRT_Device_MemoryStats`), or the plugin's answer.
    pub(crate) fn memory_stats(&self, device: DeviceRef) -> Result<MemoryStats> {
        self.check("device")?;
        raw::memstats::device_memory_stats(&self.raw, device)
    }

    /// What an out-of-memory error on `devices` carries: each device's allocator figures
    /// (at most [`MAX_REPORTED_DEVICES`]), the client's memory options, and the request.
    pub(crate) fn memory_report(
        &self,
        devices: &[DeviceRef],
        request: Option<(String, Option<u64>)>,
    ) -> OomReport {
        let devices = devices
            .iter()
            .take(MAX_REPORTED_DEVICES)
            .filter_map(|&d| {
                let id = self.device_data(d)?.facts.id;
                let stats = self.memory_stats(d).map_err(|e| e.to_string());
                Some(DeviceFigures { device: id, stats })
            })
            .collect();
        let (request, request_bytes) = match request {
            Some((what, bytes)) => (Some(what), bytes),
            None => (None, None),
        };
        OomReport {
            request,
            request_bytes,
            devices,
            options: self.memory_options.clone(),
        }
    }

    /// The one step that explains a failed allocating call (put, execute, compile, copy,
    /// transfer): a plugin's out-of-memory error ([`Error::is_out_of_memory`]) becomes
    /// [`Error::OutOfMemory`] with the figures of `devices`, the client's memory options
    /// and a hint; any other error passes unchanged. `request` (what was being allocated
    /// and its size) is asked for only when the error is kept.
    ///
    /// Two `RESOURCE_EXHAUSTED` errors get no report: rpjrt's refusal of runaway custom-call
    /// nesting (a limit, not memory: [`raw::ffi::is_nesting_refusal`]), and an error that
    /// carries a report already (an allocation failed in a program a custom-call handler
    /// ran, and the handler's error came back through this call: the report of the
    /// allocation that failed is the one that says what to change).
    pub(crate) fn with_memory_context(
        &self,
        e: Error,
        devices: &[DeviceRef],
        request: impl FnOnce() -> Option<(String, Option<u64>)>,
    ) -> Error {
        if !matches!(e, Error::Pjrt { .. }) || !e.is_out_of_memory() {
            return e;
        }
        if let Error::Pjrt { message, .. } = &e {
            if raw::ffi::is_nesting_refusal(message)
                || raw::ffi::is_handler_exhaustion(message)
                || carries_oom_report(message)
            {
                return e;
            }
        }
        let report = self.memory_report(devices, request());
        Error::OutOfMemory {
            error: Box::new(e),
            report: Box::new(report),
        }
    }

    /// The addressable devices' handles (where a compile may allocate).
    pub(crate) fn addressable_refs(&self) -> Vec<DeviceRef> {
        self.addressable
            .iter()
            .map(|&i| self.devices[i].raw)
            .collect()
    }

    /// The request line of an out-of-memory report for an array of `ty` and `dims` put
    /// on `device`: `float32[8], 32 bytes, on device 0`, and its size.
    pub(crate) fn array_request(
        &self,
        ty: ElementType,
        dims: &[i64],
        device: DeviceRef,
    ) -> Option<(String, Option<u64>)> {
        let bytes = element_count(dims)
            .and_then(|n| ty.dense_byte_size(n))
            .ok()
            .map(|b| b as u64);
        let size = bytes.map_or_else(String::new, |b| format!(", {b} bytes"));
        let on = self
            .device_data(device)
            .map_or_else(String::new, |d| format!(", on device {}", d.facts.id));
        Some((format!("{ty}{dims:?}{size}{on}"), bytes))
    }

    /// Devices for a list the plugin returned (unknown ones left out).
    pub(crate) fn devices_of(self: &Arc<Self>, raws: &[DeviceRef]) -> Vec<Device> {
        raws.iter().filter_map(|&d| self.device(d).ok()).collect()
    }
}

/// Whether an error message already holds an out-of-memory report ([`OomReport`]'s
/// lines, as `Error::OutOfMemory` shows them), e.g. a nested execution's that a custom-call
/// handler's error carried back.
fn carries_oom_report(message: &str) -> bool {
    message.contains("\nclient memory options: ") && message.contains("\nhint: ")
}

/// The most devices whose allocator figures an out-of-memory error lists.
const MAX_REPORTED_DEVICES: usize = 8;

/// The create options that bound memory, as text (strings unquoted).
fn memory_options(options: &ClientOptions) -> Vec<(String, String)> {
    options
        .entries()
        .iter()
        .filter(|(k, _)| crate::oom::MEMORY_OPTIONS.contains(&k.as_str()))
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), text)
        })
        .collect()
}

/// A PJRT client: the entry point for devices, compilation and buffers. Cheap to clone.
///
/// `close()` makes the client and everything made from it refuse further use; the C client
/// itself is destroyed when the last object that belongs to it is dropped.
#[derive(Clone)]
pub struct Client {
    pub(in crate::client) core: Arc<ClientCore>,
}

impl Client {
    /// The shared core every object made from this client holds.
    pub(crate) fn core(&self) -> &Arc<ClientCore> {
        &self.core
    }

    /// Creates a client on `plugin` with the given create options.
    pub fn new(plugin: &Plugin, options: &ClientOptions) -> Result<Client> {
        check_known_options(options)?;
        let cache = crate::client::cache::Cache::for_client(options)?;
        let _span = crate::trace::span(crate::trace::Category::Load, "client_create");
        // XLA reads its flags as its first client is created: so does the cache's key.
        let flags = plugin.client_attempt();
        let rc = raw::client::Client::create(plugin.inner.api, &to_named(options))
            .map_err(|e| explain_option_type(e, options))?;
        Client::finish_create(plugin, rc, cache, options, flags)
    }

    /// Creates a client that is one process of a multi-process job: the plugin gets the
    /// store's callbacks (`kv_get`, `kv_put`, and `kv_try_get` where its PJRT version has
    /// the field, 0.61 on) and the create options that name this process.
    ///
    /// The options sent are `node_id` and `num_nodes` (what XLA's GPU and TPU plugins
    /// read). A plugin that refuses them as unknown names gets `process_id` instead (the
    /// 0.115 CPU plugin's name), and one that refuses that too gets neither. Options the
    /// caller set explicitly are sent as given. Whether the plugin formed a multi-process
    /// client shows in [`Client::process_index`] and each device's
    /// [`Device::process_index`] and [`Device::is_addressable`]; see docs/distributed.md
    /// for what each CPU plugin does.
    pub fn new_distributed(
        plugin: &Plugin,
        options: &ClientOptions,
        dist: &crate::DistributedOptions,
    ) -> Result<Client> {
        check_known_options(options)?;
        let cache = crate::client::cache::Cache::for_client(options)?;
        let flags = plugin.client_attempt(); // As in `Client::new`.
        let api = plugin.inner.api;
        let kv = Arc::new(crate::raw::kv::KvUserData::new(Arc::new(
            crate::kv::Backend(Arc::clone(&dist.store)),
        )));
        let given = |n: &str| options.entries().iter().any(|(k, _)| k == n);
        let explicit = given("node_id") || given("num_nodes") || given("process_id");
        if explicit {
            check_explicit_process_options(options, dist)?;
        }
        let attempts: Vec<Vec<(&str, i64)>> = if explicit {
            vec![vec![]]
        } else {
            vec![
                vec![
                    ("node_id", dist.process_id as i64),
                    ("num_nodes", dist.num_processes as i64),
                ],
                vec![("process_id", dist.process_id as i64)],
                vec![],
            ]
        };
        let mut last = None;
        for extra in &attempts {
            let mut o = options.clone();
            for (k, v) in extra {
                o = o.set(*k, *v);
            }
            match raw::client::Client::create_with_kv(api, &to_named(&o), &kv) {
                Ok(rc) => {
                    let client = Client::finish_create(plugin, rc, cache, &o, flags)?;
                    check_created_process(&client, &o, dist)?;
                    return Ok(client);
                }
                Err(e) if refuses_option_name(&e, extra) => last = Some(e),
                Err(e) => return Err(explain_option_type(e, &o)),
            }
        }
        Err(last.unwrap_or_else(|| Error::invalid("client creation made no attempt")))
    }

    /// The keys that a plugin is waiting for in a store given to
    /// [`Client::new_distributed`] now (its `kv_get` callback in progress; during creation,
    /// typically another process's key, set as that process joins), of the waits that
    /// began at or after `since`, oldest first. A caller that gave up on a creation names
    /// with it what the creation was waiting for.
    pub fn kv_keys_waited_for(since: std::time::Instant) -> Vec<String> {
        raw::kv::waiting_keys(since)
    }

    fn finish_create(
        plugin: &Plugin,
        rc: raw::client::Client,
        cache: Option<crate::client::cache::Cache>,
        options: &ClientOptions,
        flags: crate::plugin::XlaFlags,
    ) -> Result<Client> {
        plugin.client_created(flags);
        crate::client::event::wait_spin_from_env()?;
        let api = plugin.inner.api;
        let rc = Arc::new(rc);
        let addressable = rc.addressable_devices()?;
        let mut devices = Vec::new();
        for d in rc.devices()? {
            let facts = d.facts(&rc)?;
            let (default_memory, memories) = if facts.is_addressable {
                (
                    d.default_memory(&rc).ok().flatten(),
                    d.memories(&rc).unwrap_or_default(),
                )
            } else {
                (None, Vec::new())
            };
            let attributes = from_raw_list(facts.attributes.clone());
            devices.push(Arc::new(DeviceData {
                raw: d,
                facts,
                attributes,
                default_memory,
                memories,
            }));
        }
        let addressable = addressable
            .iter()
            .filter_map(|a| devices.iter().position(|d| d.raw == *a))
            .collect();
        let mut memories = Vec::new();
        for m in rc.addressable_memories().unwrap_or_default() {
            let facts = m.facts(&rc)?;
            let devices = m.devices(&rc).unwrap_or_default();
            memories.push(Arc::new(MemoryData {
                raw: m,
                facts,
                devices,
            }));
        }
        let core = ClientCore {
            api,
            plugin: plugin.clone(),
            platform_name: rc.platform_name()?,
            platform_version: rc.platform_version()?,
            process_index: rc.process_index()?,
            raw: rc,
            closed: AtomicBool::new(false),
            waited_events: Default::default(),
            devices,
            addressable,
            memories,
            cache: std::sync::RwLock::new(cache),
            memory_options: memory_options(options),
        };
        Ok(Client {
            core: Arc::new(core),
        })
    }

    /// Loads the plugin at `path` and creates a client with default options.
    pub fn from_path(path: impl AsRef<std::path::Path>) -> Result<Client> {
        Client::new(&Plugin::load(path)?, &ClientOptions::new())
    }

    /// The plugin this client runs on.
    pub fn plugin(&self) -> &Plugin {
        &self.core.plugin
    }

    /// The platform name, e.g. `cpu`, `cuda`.
    pub fn platform_name(&self) -> Result<String> {
        self.core.check("client")?;
        Ok(self.core.platform_name.clone())
    }

    /// The platform version string.
    pub fn platform_version(&self) -> Result<String> {
        self.core.check("client")?;
        Ok(self.core.platform_version.clone())
    }

    /// The index of this process among the processes of a multi-process job.
    pub fn process_index(&self) -> Result<i32> {
        self.core.check("client")?;
        Ok(self.core.process_index)
    }

    /// Every device, addressable or not.
    pub fn devices(&self) -> Result<Vec<Device>> {
        self.core.check("client")?;
        Ok(self.core.devices.iter().map(|d| self.device(d)).collect())
    }

    /// The devices this process can use.
    pub fn addressable_devices(&self) -> Result<Vec<Device>> {
        self.core.check("client")?;
        Ok(self
            .core
            .addressable
            .iter()
            .map(|&i| self.device(&self.core.devices[i]))
            .collect())
    }

    /// The device with this id.
    pub fn lookup_device(&self, id: i32) -> Result<Device> {
        self.core.check("client")?;
        self.core
            .devices
            .iter()
            .find(|d| d.facts.id == id)
            .map(|d| self.device(d))
            .ok_or_else(|| {
                let ids: Vec<i32> = self.core.devices.iter().map(|d| d.facts.id).collect();
                Error::invalid(format!("no device with id {id}; the client has {ids:?}"))
            })
    }

    /// The memory spaces this process can use.
    pub fn addressable_memories(&self) -> Result<Vec<Memory>> {
        self.core.check("client")?;
        Ok(self.core.memories.iter().map(|m| self.memory(m)).collect())
    }

    /// The memory with this id.
    pub fn lookup_memory(&self, id: i32) -> Result<Memory> {
        self.core.check("client")?;
        self.core
            .memories
            .iter()
            .find(|m| m.facts.id == id)
            .map(|m| self.memory(m))
            .ok_or_else(|| Error::invalid(format!("no memory with id {id}")))
    }

    fn device(&self, d: &Arc<DeviceData>) -> Device {
        Device {
            core: Arc::clone(&self.core),
            data: Arc::clone(d),
        }
    }

    fn memory(&self, m: &Arc<MemoryData>) -> Memory {
        Memory {
            core: Arc::clone(&self.core),
            data: Arc::clone(m),
        }
    }

    /// The first addressable device (where single-device work goes by default).
    pub fn default_device(&self) -> Result<Device> {
        self.addressable_devices()?
            .into_iter()
            .next()
            .ok_or_else(|| Error::invalid("the client has no addressable device"))
    }

    /// Marks the client closed: it and every object made from it refuse further use with a
    /// clear error. The C client is destroyed once the last such object is dropped.
    ///
    /// Waits still pending end with that error too: blocking ones (which look at the mark
    /// as they wait) and asynchronous ones (`.await` of an event, its done callbacks), which
    /// are woken here. In a process forked from the one that made the client it does
    /// nothing (every use there is refused, and the parent's waiters are the parent's).
    pub fn close(&self) -> Result<()> {
        // In a forked child the parent's waiters are the parent's: nothing runs them here,
        // and the close (a `with` block the child leaves) does nothing.
        if self.core.api.is_forked() {
            return Ok(());
        }
        self.core.closed.store(true, Ordering::Release);
        self.core.waited_events.close_all(|| Error::Closed("event"));
        Ok(())
    }

    /// Whether this process is a fork of the one that made the client, where every use of
    /// it is refused and `close()` does nothing.
    pub fn is_forked(&self) -> bool {
        self.core.api.is_forked()
    }

    /// Whether `close()` was called.
    pub fn is_closed(&self) -> bool {
        self.core.closed.load(Ordering::Acquire)
    }

    /// Compiles a program (through the client's compile cache when it has one). A
    /// StableHLO portable artifact outside the plugin's version window is refused first.
    pub fn compile(&self, program: &Program, options: &CompileOptions) -> Result<Executable> {
        self.core.check("client")?;
        if let Some(cache) = self.cache() {
            return cache.compile(self, program, options);
        }
        self.core.plugin.check_program(program)?;
        let ids: Vec<i64> = self
            .core
            .devices
            .iter()
            .map(|d| d.facts.id.into())
            .collect();
        // Shardy modules get the Shardy partitioner; CPU compiles keep NaNs in max/min.
        let encoded = options
            .effective(program, &self.core.platform_name)
            .encode(&ids)?;
        Executable::compile(&self.core, program, &encoded)
            .map_err(|e| crate::stablehlo::explain(&self.core.plugin, program, e))
    }

    /// Refuses a buffer type code the plugin's PJRT version predates (it would crash on it).
    fn check_element_type(&self, ty: ElementType) -> Result<()> {
        self.core
            .api
            .require(&format!("element type {ty}"), ty.since_pjrt_minor())
    }

    fn check_target(&self, device: &Device, memory: Option<&Memory>) -> Result<()> {
        self.core.check("client")?;
        if !Arc::ptr_eq(&device.core, &self.core) {
            return Err(Error::invalid(format!(
                "{device} belongs to another client"
            )));
        }
        if !device.data.facts.is_addressable {
            return Err(Error::invalid(format!(
                "{device} is not addressable from this process"
            )));
        }
        if let Some(m) = memory {
            if !Arc::ptr_eq(&m.core, &self.core) {
                return Err(Error::invalid(format!("{m} belongs to another client")));
            }
        }
        Ok(())
    }

    /// Copies host data into a new buffer on `device` (or in `memory`).
    ///
    /// `data` holds the elements in row-major order, or as `byte_strides` describe. The size
    /// and strides are checked against `dims` and `element_type` before the plugin sees them.
    /// The data is copied before this returns.
    pub fn buffer_from_host(
        &self,
        data: &[u8],
        element_type: ElementType,
        dims: &[i64],
        byte_strides: Option<&[i64]>,
        device: &Device,
        memory: Option<&Memory>,
    ) -> Result<Buffer> {
        self.check_host_put(data.len(), element_type, dims, byte_strides, device, memory)?;
        // PJRT assumes bool bytes are 0 or 1 (and some plugins compute wrong answers with
        // others): read anything else as true, in a copy.
        let normalised;
        let data = if crate::dtype::needs_bool_normalising(element_type, data) {
            normalised = crate::dtype::normalised_bools(data)?;
            normalised.as_slice()
        } else {
            data
        };
        // The plugins take sub-byte types one element per byte; our host form is packed.
        let unpacked;
        let data = if element_type.is_sub_byte() {
            unpacked = try_unpack_sub_byte(element_type, data, element_count(dims)?)?;
            unpacked.as_slice()
        } else {
            data
        };
        let _span = crate::trace::span(crate::trace::Category::Transfer, "put")
            .bytes(data.len())
            .device(device.id().into());
        let put = host_put(element_type, dims, byte_strides, device, memory);
        let meta = BufferMeta::new(&self.core, element_type, dims);
        let raw = self.core.raw.buffer_from_host(data, put, meta);
        self.put_result(raw, element_type, dims, device)
    }

    /// A new buffer from a host put, or the plugin's error with the device's allocator figures
    /// attached when it ran out of memory (every put path ends here).
    fn put_result(
        &self,
        raw: Result<raw::buffer::Buffer<BufferMeta>>,
        element_type: ElementType,
        dims: &[i64],
        device: &Device,
    ) -> Result<Buffer> {
        let d = device.data.raw;
        let raw = raw.map_err(|e| {
            (self.core)
                .with_memory_context(e, &[d], || self.core.array_request(element_type, dims, d))
        })?;
        Ok(Buffer::from_raw(raw))
    }

    /// The checks of every host-to-device put, before the plugin sees anything: the target
    /// belongs to this client, the element type can be put, and `len` bytes hold
    /// `element_type[dims]` as `byte_strides` describe.
    fn check_host_put(
        &self,
        len: usize,
        element_type: ElementType,
        dims: &[i64],
        byte_strides: Option<&[i64]>,
        device: &Device,
        memory: Option<&Memory>,
    ) -> Result<()> {
        self.check_target(device, memory)?;
        self.check_element_type(element_type)?;
        check_host_layout(len, element_type, dims, byte_strides)
    }

    /// Creates a buffer that uses `owner`'s bytes in place where the plugin can (host-visible
    /// memory), keeping `owner` alive as long as the buffer lives. Plugins that cannot alias
    /// host memory copy instead.
    pub fn buffer_from_host_owned(
        &self,
        owner: Arc<dyn HostBytes>,
        element_type: ElementType,
        dims: &[i64],
        byte_strides: Option<&[i64]>,
        device: &Device,
        memory: Option<&Memory>,
    ) -> Result<Buffer> {
        // One read of the owner's bytes: the range checked below is the range lent.
        let owner: Arc<dyn HostBytes> =
            Arc::new(crate::raw::hostmem::LentBytes::capture_all(owner));
        self.buffer_from_lent_strided(owner, element_type, dims, byte_strides, device, memory)
    }

    /// [`Client::buffer_from_host_owned`] for an owner whose `bytes()` is known to return
    /// the same slice every time (a `LentBytes`, or one of rpjrt's own impls).
    pub(crate) fn buffer_from_lent_strided(
        &self,
        owner: Arc<dyn HostBytes>,
        element_type: ElementType,
        dims: &[i64],
        byte_strides: Option<&[i64]>,
        device: &Device,
        memory: Option<&Memory>,
    ) -> Result<Buffer> {
        if element_type.is_sub_byte()
            || crate::dtype::needs_bool_normalising(element_type, owner.bytes())
        {
            // Packed host data is unpacked, and bools other than 0/1 normalised, into a
            // copy, so there is nothing to borrow.
            return self.buffer_from_host(
                owner.bytes(),
                element_type,
                dims,
                byte_strides,
                device,
                memory,
            );
        }
        self.check_host_put(
            owner.bytes().len(),
            element_type,
            dims,
            byte_strides,
            device,
            memory,
        )?;
        let _span = crate::trace::span(crate::trace::Category::Transfer, "put")
            .bytes(owner.bytes().len())
            .device(device.id().into());
        let put = host_put(element_type, dims, byte_strides, device, memory);
        let meta = BufferMeta::new(&self.core, element_type, dims);
        let owner = crate::client::buffer::Owner(owner);
        let raw = self.core.raw.buffer_from_host_owned(owner, put, meta);
        self.put_result(raw, element_type, dims, device)
    }

    /// Copies a typed slice into a new row-major buffer on `device`. The slice must hold
    /// exactly the elements `dims` describe (more is refused as surely as fewer).
    pub fn buffer_from_slice<T: NativeType>(
        &self,
        data: &[T],
        dims: &[i64],
        device: &Device,
    ) -> Result<Buffer> {
        let n = element_count(dims)?;
        if data.len() != n {
            // Longer is as wrong as shorter: the dims are not the data's.
            return Err(Error::invalid(format!(
                "{} elements for dims {dims:?}, which hold {n}",
                data.len()
            )));
        }
        let bytes = crate::dtype::as_bytes(data);
        self.buffer_from_host(bytes, T::ELEMENT_TYPE, dims, None, device, None)
    }
}

/// The raw layer's description of a host put.
fn host_put<'a>(
    element_type: ElementType,
    dims: &'a [i64],
    byte_strides: Option<&'a [i64]>,
    device: &Device,
    memory: Option<&Memory>,
) -> raw::client::HostPut<'a> {
    raw::client::HostPut {
        ty: element_type.code(),
        dims,
        byte_strides,
        device: device.data.raw,
        memory: memory.map(|m| m.data.raw),
    }
}

/// The most CPU devices a client may ask for. The CPU plugins' client creation time grows
/// faster than linearly with the count (measured: about 1.5 s for 1024 devices, 6 to 13 s
/// for 4096), so 65536 never returns in practice; 1024 is far beyond any real use.
pub const MAX_CPU_DEVICE_COUNT: i64 = 1024;

/// The largest process id + 1 the 0.115 CPU plugin can number devices for: it numbers a
/// process's devices from `process_id << 11` in a 32-bit int, so from 2^20 on its device
/// ids wrap (negative, or the same as another process's).
const CPU_PLUGIN_PROCESS_ID_LIMIT: usize = 1 << 20;

/// For [`Client::new_distributed`]: the create options that name this process
/// (`process_id`, `node_id`, `num_nodes`), set explicitly, must agree with the
/// distributed options' id and count, and must not leave a job of several processes
/// without a multi-process client (`node_id` without `num_nodes`, or the reverse).
fn check_explicit_process_options(
    options: &ClientOptions,
    dist: &crate::DistributedOptions,
) -> Result<()> {
    let value = |n: &str| {
        options
            .entries()
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.clone())
    };
    let wanted = [
        ("process_id", dist.process_id, "process_id"),
        ("node_id", dist.process_id, "process_id"),
        ("num_nodes", dist.num_processes, "num_processes"),
    ];
    for (name, want, arg) in wanted {
        if let Some(v) = value(name) {
            let agrees = matches!(v, Value::Int64(i) if i >= 0 && i as u64 == want as u64);
            if !agrees {
                return Err(Error::invalid(format!(
                    "create option {name}={v} contradicts {arg}={want} (this process is \
                     process {} of {}); leave {name} out of the options, or give it the \
                     same value",
                    dist.process_id, dist.num_processes
                )));
            }
        }
    }
    if dist.num_processes > 1 {
        match (value("node_id").is_some(), value("num_nodes").is_some()) {
            (true, false) => {
                return Err(Error::invalid(format!(
                    "create option node_id is set but num_nodes is not: the plugin would \
                     make a single-process client, not process {} of {}; set num_nodes={} \
                     too, or leave both out",
                    dist.process_id, dist.num_processes, dist.num_processes
                )))
            }
            (false, true) => {
                return Err(Error::invalid(format!(
                    "create option num_nodes is set but node_id is not: the plugin would \
                     take this process for node 0, not process {} of {}; set node_id={} \
                     too, or leave both out",
                    dist.process_id, dist.num_processes, dist.process_id
                )))
            }
            _ => {}
        }
    }
    Ok(())
}

/// For [`Client::new_distributed`]: the client the plugin made is the process it was told
/// to be. A plugin that reports another process index than the id given (other than 0:
/// a plugin that ignores the options makes a single-process client, as documented), or
/// numbers this process's devices with negative ids, wrapped the id; the 0.115 CPU plugin
/// (which took `process_id`) cannot number the devices of a process id from 2^20 on.
fn check_created_process(
    client: &Client,
    sent: &ClientOptions,
    dist: &crate::DistributedOptions,
) -> Result<()> {
    let p = dist.process_id;
    let took_process_id = sent.entries().iter().any(|(k, _)| k == "process_id");
    let cpu = client.core.platform_name.eq_ignore_ascii_case("cpu");
    if took_process_id && cpu && p >= CPU_PLUGIN_PROCESS_ID_LIMIT {
        return Err(Error::invalid(format!(
            "process_id {p} is too large for this CPU plugin: it numbers a process's \
             devices from process_id << 11 in 32 bits, so it takes process ids below 2^20 \
             ({CPU_PLUGIN_PROCESS_ID_LIMIT}); its devices for process {p} would have wrapped \
             ids (see docs/distributed.md)"
        )));
    }
    let index = client.core.process_index;
    if index != 0 && i64::from(index) != p as i64 {
        return Err(Error::invalid(format!(
            "the plugin made a client with process index {index} for process_id {p}: it \
             cannot represent process ids this large (its process index is a 32-bit int{})",
            if took_process_id && cpu {
                "; this CPU plugin takes process ids below 2^20"
            } else {
                ""
            }
        )));
    }
    if index != 0 {
        if let Some(d) = client
            .core
            .addressable
            .iter()
            .map(|&i| &client.core.devices[i])
            .find(|d| d.facts.id < 0)
        {
            return Err(Error::invalid(format!(
                "the plugin numbered a device of process_id {p} with the negative id {}: \
                 its device ids wrapped, so it cannot represent process ids this large",
                d.facts.id
            )));
        }
    }
    Ok(())
}

/// Whether `e` is a plugin's refusal of one of the option names in `extra` as unknown
/// ("Unexpected option name passed to PJRT_Client_Create: num_nodes").
fn refuses_option_name(e: &Error, extra: &[(&str, i64)]) -> bool {
    match e {
        Error::Pjrt { code, message, .. } => {
            *code == crate::error::Code::InvalidArgument
                && message.contains("option")
                && extra.iter().any(|(k, _)| message.contains(k))
        }
        _ => false,
    }
}

/// The options as the raw layer's named values.
fn to_named(options: &ClientOptions) -> Vec<(String, raw::util::NamedValue)> {
    options
        .entries()
        .iter()
        .map(|(n, v)| (n.clone(), v.to_raw()))
        .collect()
}

/// A create option's value type, as PJRT names the types (`PJRT_NamedValue_Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OptionKind {
    Text,
    Int64,
    Int64List,
    Float,
    Bool,
}

impl OptionKind {
    /// The kind `PJRT_NamedValue_Type` numbers `i` (kString 0, kInt64 1, kInt64List 2,
    /// kFloat 3, kBool 4): how XLA's plugins number the type they expect.
    fn from_pjrt_type(i: u64) -> Option<OptionKind> {
        use OptionKind::*;
        [Text, Int64, Int64List, Float, Bool]
            .get(usize::try_from(i).ok()?)
            .copied()
    }

    /// The kind XLA's `PjRtValueType` variant numbers `i` (string 0, bool 1, int64 2,
    /// int64 list 3, float 4): how XLA's plugins number the type they received.
    fn from_xla_variant(i: u64) -> Option<OptionKind> {
        use OptionKind::*;
        [Text, Bool, Int64, Int64List, Float]
            .get(usize::try_from(i).ok()?)
            .copied()
    }

    /// The kind of `v`.
    fn of(v: &Value) -> OptionKind {
        match v {
            Value::String(_) => OptionKind::Text,
            Value::Int64(_) => OptionKind::Int64,
            Value::Int64List(_) => OptionKind::Int64List,
            Value::Float(_) => OptionKind::Float,
            Value::Bool(_) => OptionKind::Bool,
        }
    }

    /// The kind in words, with its article ("a list of int64s").
    fn words(self) -> &'static str {
        match self {
            OptionKind::Text => "text (a string)",
            OptionKind::Int64 => "an int64",
            OptionKind::Int64List => "a list of int64s",
            OptionKind::Float => "a float",
            OptionKind::Bool => "a bool",
        }
    }

    /// A value of this kind, for an example.
    fn example(self) -> Value {
        match self {
            OptionKind::Text => Value::String("NAME".into()),
            OptionKind::Int64 => Value::Int64(1),
            OptionKind::Int64List => Value::Int64List(vec![0]),
            OptionKind::Float => Value::Float(1.0),
            OptionKind::Bool => Value::Bool(true),
        }
    }
}

/// `given` written as `want` where the meaning is plain (`0` as the list `[0]`, `1` as the
/// float `1.0`, `1` as `true`, `"2"` as the int64 `2`); `None` where it is not.
fn convert_option(given: &Value, want: OptionKind) -> Option<Value> {
    let integral = |f: f32| (f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64);
    match (given, want) {
        (v, OptionKind::Text) => Some(Value::String(match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })),
        (Value::Int64(n), OptionKind::Int64List) => Some(Value::Int64List(vec![*n])),
        (Value::Float(f), OptionKind::Int64List) => integral(*f).map(|n| Value::Int64List(vec![n])),
        (Value::Int64(n), OptionKind::Float) => Some(Value::Float(*n as f32)),
        (Value::String(s), OptionKind::Float) => s
            .trim()
            .parse::<f32>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Value::Float),
        (Value::Float(f), OptionKind::Int64) => integral(*f).map(Value::Int64),
        (Value::String(s), OptionKind::Int64) => s.trim().parse().ok().map(Value::Int64),
        (Value::Int64List(l), OptionKind::Int64) if l.len() == 1 => Some(Value::Int64(l[0])),
        (Value::Int64(n @ (0 | 1)), OptionKind::Bool) => Some(Value::Bool(*n == 1)),
        (Value::String(s), OptionKind::Bool) => match s.trim() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        _ => None,
    }
}

/// `v` as `rpjrt -o NAME=VALUE` reads it back (`[0,1]`, `1.0`, `true`); `None` for text
/// the command line would read as another type (`3`, `true`, `[1]`).
fn cli_spelling(v: &Value) -> Option<String> {
    Some(match v {
        Value::Int64List(l) => format!(
            "[{}]",
            l.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
        ),
        Value::String(s) => {
            let (_, read) = ClientOptions::parse_assignment(&format!("x={s}")).ok()?;
            let listy = s.starts_with('[') && s.ends_with(']');
            if !matches!(read, Value::String(_)) || listy || s.is_empty() {
                return None;
            }
            s.clone()
        }
        other => other.to_string(),
    })
}

/// `v` as Python writes it (`[0, 1]`, `1.0`, `True`, `"bfc"`).
fn python_spelling(v: &Value) -> String {
    match v {
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        other => other.to_string(),
    }
}

/// The option name and the two type numbers of XLA's refusal of a wrongly typed create
/// option: "Option passed to PJRT_Client_Create with name NAME has type index GOT but
/// expected type index is WANT".
fn option_type_refusal(message: &str) -> Option<(&str, u64, u64)> {
    let rest = &message[message.find("with name ")? + "with name ".len()..];
    let (name, rest) = rest.split_once(" has type index ")?;
    let (got, rest) = rest.split_once(" but expected type index is ")?;
    let digits = |t: &str| -> Option<u64> {
        let end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        t[..end].parse().ok()
    };
    Some((name, digits(got.trim())?, digits(rest.trim())?))
}

/// XLA's refusal of a wrongly typed create option, in words: XLA numbers the type it got
/// by its own `PjRtValueType` variant and the type it wants by `PJRT_NamedValue_Type`, so
/// "visible_devices has type index 2 but expected type index is 2" means "an int64 was
/// given where a list of int64s is wanted". The rewording names the option, the type it
/// takes and the one it was given (what `options` sent, which is certain; XLA's number
/// where the option is not among them), and what to write instead, on the command line
/// and in Python; the plugin's own words follow. `None` when `message` is not that refusal
/// or does not add up.
fn explain_option_type_message(message: &str, options: &ClientOptions) -> Option<String> {
    let (name, got, want) = option_type_refusal(message)?;
    let want = OptionKind::from_pjrt_type(want)?;
    let sent = options
        .entries()
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v);
    let given = match sent {
        Some(v) => OptionKind::of(v),
        None => OptionKind::from_xla_variant(got)?,
    };
    if given == want {
        // Another numbering than the one known: say nothing rather than something wrong.
        return None;
    }
    let given_text = match sent {
        Some(v) => format!("{} ({v})", given.words()),
        None => given.words().to_string(),
    };
    let value = sent
        .and_then(|v| convert_option(v, want))
        .unwrap_or_else(|| want.example());
    let python = format!("options={{{name:?}: {}}}", python_spelling(&value));
    let advice = match cli_spelling(&value) {
        Some(cli) => format!("write -o {name}={cli} on the command line, {python} in Python"),
        None => format!(
            "write {python} in Python (the command line cannot give this text: -o reads it \
             as a number, a bool or a list)"
        ),
    };
    Some(format!(
        "create option {name} takes {}, but was given {given_text}: {advice} (the plugin \
         said: \"{}\", numbering the type it got and the type it wants differently)",
        want.words(),
        message.trim()
    ))
}

/// `e` with XLA's refusal of a wrongly typed create option explained
/// ([`explain_option_type_message`]); any other error as it is.
fn explain_option_type(e: Error, options: &ClientOptions) -> Error {
    match e {
        Error::Pjrt {
            entry,
            code: code @ crate::error::Code::InvalidArgument,
            message,
        } => {
            let message = explain_option_type_message(&message, options).unwrap_or(message);
            Error::Pjrt {
                entry,
                code,
                message,
            }
        }
        other => other,
    }
}

/// Which device an operation targets, as a caller names it.
#[derive(Clone, Debug, Default)]
pub enum DeviceChoice {
    /// The client's default device.
    #[default]
    Default,
    /// This device.
    Device(Device),
    /// The device at this index of [`Client::addressable_devices`] (not a device id: in a
    /// job of several processes, index 0 of process 1 is not device 0; name a device by its
    /// id with [`Client::lookup_device`]).
    Index(i64),
}

/// Which memory an operation targets, as a caller names it.
#[derive(Clone, Debug, Default)]
pub enum MemoryChoice {
    /// The device's default memory (no memory named).
    #[default]
    Default,
    /// This memory.
    Memory(Memory),
    /// The memory of this kind (e.g. `pinned_host`) of the target device.
    Kind(String),
}

impl Client {
    /// The device `choice` names: the default device, a device, or an index into
    /// [`Client::addressable_devices`] (checked).
    pub fn resolve_device(&self, choice: &DeviceChoice) -> Result<Device> {
        match choice {
            DeviceChoice::Default => self.default_device(),
            DeviceChoice::Device(d) => {
                if !Arc::ptr_eq(&d.core, &self.core) {
                    return Err(Error::invalid(format!("{d} belongs to another client")));
                }
                Ok(d.clone())
            }
            DeviceChoice::Index(i) => {
                let devs = self.addressable_devices()?;
                if let Some(d) = usize::try_from(*i).ok().and_then(|i| devs.get(i)) {
                    return Ok(d.clone());
                }
                Err(Error::invalid(self.index_out_of_range(*i, devs.len())))
            }
        }
    }

    /// Why device index `i` names no device: the count is of this process's devices (in a
    /// job of several processes the client has more), and a number that is some device's
    /// id is pointed to the lookup by id, which is what its caller may have meant.
    fn index_out_of_range(&self, i: i64, addressable: usize) -> String {
        let all = self.devices().unwrap_or_default();
        let of = if all.len() > addressable {
            format!(" (of the job's {})", all.len())
        } else {
            String::new()
        };
        let by_id = i32::try_from(i)
            .ok()
            .and_then(|id| all.iter().find(|d| d.id() == id))
            .map_or_else(String::new, |d| {
                format!(
                    "; {d} has id {i}: name it by its id with Client::lookup_device (Python: \
                     client.device({i})) and pass the device"
                )
            });
        format!(
            "device index {i} is out of range: this process has {addressable} addressable \
             device{}{of}, and a number names a device by its place in \
             addressable_devices(), not by its id{by_id}",
            if addressable == 1 { "" } else { "s" }
        )
    }

    /// Device and memory of a transfer: a memory named alone picks its first device (or the
    /// default device); a kind is looked up on the chosen device.
    pub fn resolve_target(
        &self,
        device: &DeviceChoice,
        memory: &MemoryChoice,
    ) -> Result<(Device, Option<Memory>)> {
        if let (DeviceChoice::Default, MemoryChoice::Memory(m)) = (device, memory) {
            let dev = match m.addressable_by_devices()?.into_iter().next() {
                Some(d) => d,
                None => self.default_device()?,
            };
            return Ok((dev, Some(m.clone())));
        }
        let dev = self.resolve_device(device)?;
        let mem = match memory {
            MemoryChoice::Default => None,
            // Both named: they must agree (entries would otherwise each honour one of them).
            MemoryChoice::Memory(m) if !m.addressable_by_devices()?.contains(&dev) => {
                return Err(Error::invalid(format!(
                    "{m} is not addressable by {dev}: give a memory of that device, or only \
                     the memory (its device is then the one it belongs to)"
                )));
            }
            MemoryChoice::Memory(m) => Some(m.clone()),
            MemoryChoice::Kind(kind) => Some(dev.memory_by_kind(kind)?),
        };
        Ok((dev, mem))
    }
}

/// Checks the create options whose meaning is known across plugins. The CPU plugins throw
/// a C++ exception (which aborts the process) on a wrongly typed or negative device count,
/// so these are refused before the call.
fn check_known_options(options: &ClientOptions) -> Result<()> {
    for (name, value) in options.entries() {
        ClientOptions::check_name(name)?;
        let ok = match name.as_str() {
            "cpu_device_count" => {
                matches!(value, Value::Int64(n) if *n >= 1 && *n <= MAX_CPU_DEVICE_COUNT)
            }
            "process_id" | "node_id" | "num_nodes" => matches!(value, Value::Int64(n) if *n >= 0),
            "asynchronous" | "preallocate" => matches!(value, Value::Bool(_)),
            _ => true,
        };
        if !ok {
            return Err(Error::invalid(format!(
                "create option {name} = {value} is out of range or of the wrong type \
                 (cpu_device_count is an integer from 1 to {MAX_CPU_DEVICE_COUNT}, ids integers \
                 >= 0, flags booleans)"
            )));
        }
    }
    Ok(())
}

/// Checks that `len` bytes hold an array of `dims` elements laid out per `byte_strides`.
pub(crate) fn check_host_layout(
    len: usize,
    ty: ElementType,
    dims: &[i64],
    byte_strides: Option<&[i64]>,
) -> Result<()> {
    if ty == ElementType::Token {
        return Err(Error::invalid("a token has no host data"));
    }
    let n = element_count(dims)?;
    match byte_strides {
        None => {
            let need = ty.dense_byte_size(n)?;
            if len < need {
                return Err(Error::invalid(format!(
                    "host data has {len} bytes, but {ty}{dims:?} needs {need}"
                )));
            }
        }
        Some(strides) => {
            if strides.len() != dims.len() {
                return Err(Error::invalid(format!(
                    "byte_strides has {} entries for {} dimensions",
                    strides.len(),
                    dims.len()
                )));
            }
            let Some(width) = ty.byte_width() else {
                return Err(Error::invalid(format!(
                    "byte strides are not supported for the packed type {ty}"
                )));
            };
            if n == 0 {
                return Ok(());
            }
            // The furthest byte any element touches must lie inside the data.
            let mut last: i128 = 0;
            for (&d, &s) in dims.iter().zip(strides) {
                if s < 0 {
                    return Err(Error::invalid("negative byte strides are not supported"));
                }
                last += (d as i128 - 1) * s as i128;
            }
            let end = last + width as i128;
            if end > len as i128 {
                return Err(Error::invalid(format!(
                    "byte_strides {strides:?} for {ty}{dims:?} reach byte {end}, but the host \
                     data has {len}"
                )));
            }
        }
    }
    Ok(())
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Client(platform={}, devices={}, plugin={}{})",
            self.core.platform_name,
            self.core.devices.len(),
            self.core.plugin.path().display(),
            if self.is_closed() { ", closed" } else { "" }
        )
    }
}

/// A view of one entry of a client's device or memory table: the struct, its identity
/// (same client, same raw view), the facts both kinds have, and `Display` (the plugin's
/// short description, or `kind:id` where it gives none).
macro_rules! client_view {
    ($(#[$doc:meta])* $name:ident, $data:ident, $raw:ident, $noun:literal, $kind_eg:literal) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name {
            pub(in crate::client) core: Arc<ClientCore>,
            pub(in crate::client) data: Arc<$data>,
        }

        impl $name {
            #[doc = concat!("The core of the client this ", $noun, " belongs to.")]
            pub(crate) fn core(&self) -> &Arc<ClientCore> {
                &self.core
            }
            #[doc = concat!("The raw ", $noun, " view.")]
            pub(crate) fn raw_ref(&self) -> $raw {
                self.data.raw
            }
            #[doc = concat!("The ", $noun, " id, unique within the client.")]
            pub fn id(&self) -> i32 {
                self.data.facts.id
            }
            #[doc = concat!("The ", $noun, " kind, e.g. `", $kind_eg, "`.")]
            pub fn kind(&self) -> &str {
                &self.data.facts.kind
            }
            /// The plugin's verbose description.
            pub fn debug_string(&self) -> &str {
                &self.data.facts.debug_string
            }
            /// The plugin's short description (also what `Display` prints).
            pub fn description(&self) -> &str {
                &self.data.facts.to_string
            }
        }

        impl PartialEq for $name {
            fn eq(&self, other: &$name) -> bool {
                Arc::ptr_eq(&self.core, &other.core) && self.data.raw == other.data.raw
            }
        }
        impl Eq for $name {}

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                if self.data.facts.to_string.is_empty() {
                    write!(f, "{}:{}", self.kind(), self.id())
                } else {
                    f.write_str(&self.data.facts.to_string)
                }
            }
        }
    };
}

client_view!(
    /// A device of a client.
    Device,
    DeviceData,
    DeviceRef,
    "device",
    "cpu"
);

impl Device {
    /// The device allocator's figures (`PJRT_Device_MemoryStats`: bytes in use, limit,
    /// largest free block, peak, number of allocations), or the plugin's answer when it
    /// reports none (both CPU plugins answer `UNIMPLEMENTED`; a plugin before the entry
    /// existed answers `Unsupported`).
    pub fn memory_stats(&self) -> Result<MemoryStats> {
        self.core.memory_stats(self.data.raw)
    }

    /// What an out-of-memory error on this device would carry now: its figures, the
    /// client's memory options, a hint; `request` names what was being allocated.
    pub fn memory_report(&self, request: Option<(String, Option<u64>)>) -> OomReport {
        self.core.memory_report(&[self.data.raw], request)
    }

    /// The process that owns the device.
    pub fn process_index(&self) -> i32 {
        self.data.facts.process_index
    }
    /// The hardware id local to its process; -1 where unknown.
    pub fn local_hardware_id(&self) -> i32 {
        self.data.facts.local_hardware_id
    }
    /// Vendor attributes of the device.
    pub fn attributes(&self) -> &[(String, Value)] {
        &self.data.attributes
    }
    /// Whether this process can use the device.
    pub fn is_addressable(&self) -> bool {
        self.data.facts.is_addressable
    }
    /// The device's default memory.
    pub fn default_memory(&self) -> Result<Memory> {
        self.core.check("device")?;
        let ptr = self
            .data
            .default_memory
            .ok_or_else(|| Error::invalid(format!("{self} has no default memory")))?;
        self.memory_of(ptr)
    }
    /// The memories this device can address.
    pub fn addressable_memories(&self) -> Result<Vec<Memory>> {
        self.core.check("device")?;
        self.data
            .memories
            .iter()
            .map(|&m| self.memory_of(m))
            .collect()
    }
    /// The addressable memory of this device whose kind is `kind` (e.g. `pinned_host`).
    pub fn memory_by_kind(&self, kind: &str) -> Result<Memory> {
        let all = self.addressable_memories()?;
        let kinds: Vec<String> = all.iter().map(|m| m.kind().to_string()).collect();
        all.into_iter().find(|m| m.kind() == kind).ok_or_else(|| {
            Error::invalid(format!(
                "{self} has no memory of kind {kind:?} (it has {kinds:?})"
            ))
        })
    }
    fn memory_of(&self, raw: MemoryRef) -> Result<Memory> {
        self.core.memory(raw)
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Device(id={}, kind={:?}, process={})",
            self.id(),
            self.kind(),
            self.process_index()
        )
    }
}

client_view!(
    /// A memory space (device memory, pinned host memory, ...).
    Memory,
    MemoryData,
    MemoryRef,
    "memory",
    "pinned_host"
);

impl Memory {
    /// The platform-specific number of the kind.
    pub fn kind_id(&self) -> i32 {
        self.data.facts.kind_id
    }
    /// The devices that can address this memory.
    pub fn addressable_by_devices(&self) -> Result<Vec<Device>> {
        self.core.check("memory")?;
        Ok(self.core.devices_of(&self.data.devices))
    }
}

impl fmt::Debug for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Memory(id={}, kind={:?})", self.id(), self.kind())
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn check<T: Send + Sync + 'static>() {}
    check::<Client>();
    check::<Device>();
    check::<Memory>();
}

#[cfg(test)]
mod memory_context_tests {
    use super::*;
    use crate::error::Code;

    fn pjrt(message: &str) -> Error {
        Error::Pjrt {
            entry: "PJRT_LoadedExecutable_Execute",
            code: Code::ResourceExhausted,
            message: message.to_string(),
        }
    }

    #[test]
    fn a_message_holding_a_report_is_told_by_the_reports_own_lines() {
        let report = OomReport {
            request: Some("float32[8], 32 bytes, on device 0".into()),
            request_bytes: Some(32),
            devices: vec![DeviceFigures {
                device: 0,
                stats: Err("UNIMPLEMENTED".into()),
            }],
            options: Vec::new(),
        };
        let with = Error::OutOfMemory {
            error: Box::new(pjrt("Out of memory allocating 32 bytes")),
            report: Box::new(report),
        };
        // What a handler's error carries back: the nested execution's error, as text.
        let carried = format!("Python handler for \"h\" raised ResourceExhaustedError: {with}");
        assert!(carries_oom_report(&carried), "{carried}");
        assert!(!carries_oom_report(
            "Out of memory allocating 32 bytes; hint: none"
        ));
    }

    #[test]
    fn the_nesting_refusal_is_a_limit_not_an_allocation_failure() {
        let e = pjrt(&format!(
            "Python handler for \"rec\" raised ResourceExhaustedError: not started: ... at {} \
             of 16",
            raw::ffi::NESTING_LIMIT
        ));
        // RESOURCE_EXHAUSTED by code, but a limit of depth: not out of memory, and
        // with_memory_context adds no report to it.
        assert_eq!(e.code(), crate::Code::ResourceExhausted);
        assert!(!e.is_out_of_memory());
        let Error::Pjrt { message, .. } = &e else {
            unreachable!()
        };
        assert!(raw::ffi::is_nesting_refusal(message));
    }
}

#[cfg(test)]
mod option_type_tests {
    use super::*;
    use crate::error::Code;

    /// XLA's message, as the CUDA plugin (jax-cuda13-pjrt 0.12.1) gives it.
    fn xla(name: &str, got: u64, want: u64) -> String {
        format!(
            "Option passed to PJRT_Client_Create with name {name} has type index {got} but \
             expected type index is {want}"
        )
    }

    fn explained(name: &str, got: u64, want: u64, value: impl Into<Value>) -> String {
        let options = ClientOptions::new().set(name, value);
        explain_option_type_message(&xla(name, got, want), &options)
            .unwrap_or_else(|| panic!("{name}: not explained"))
    }

    #[test]
    fn an_int_for_a_list_says_write_a_list() {
        // `-o visible_devices=0`: "type index 2 but expected type index is 2".
        let m = explained("visible_devices", 2, 2, 0i64);
        assert!(
            m.starts_with(
                "create option visible_devices takes a list of int64s, but was given an int64 (0)"
            ),
            "{m}"
        );
        assert!(m.contains("-o visible_devices=[0]"), "{m}");
        assert!(m.contains(r#"options={"visible_devices": [0]}"#), "{m}");
        // The plugin's words stay, for searches.
        assert!(m.contains(&xla("visible_devices", 2, 2)), "{m}");
    }

    #[test]
    fn an_int_for_a_float_says_write_a_float() {
        // `-o memory_fraction=1`: "type index 2 but expected type index is 3".
        let m = explained("memory_fraction", 2, 3, 1i64);
        assert!(
            m.starts_with(
                "create option memory_fraction takes a float, but was given an int64 (1)"
            ),
            "{m}"
        );
        assert!(m.contains("-o memory_fraction=1.0"), "{m}");
        assert!(m.contains(r#"options={"memory_fraction": 1.0}"#), "{m}");
    }

    #[test]
    fn an_int_for_text_says_the_command_line_reads_it_as_a_number() {
        // `-o allocator=3`: "type index 2 but expected type index is 0".
        let m = explained("allocator", 2, 0, 3i64);
        assert!(
            m.starts_with(
                "create option allocator takes text (a string), but was given an int64 (3)"
            ),
            "{m}"
        );
        assert!(m.contains(r#"options={"allocator": "3"}"#), "{m}");
        assert!(m.contains("-o reads it as a number"), "{m}");
    }

    #[test]
    fn other_kinds_are_converted_where_the_meaning_is_plain() {
        let m = explained("preallocate", 2, 4, 1i64);
        assert!(m.contains("-o preallocate=true"), "{m}");
        assert!(m.contains(r#"options={"preallocate": True}"#), "{m}");
        let m = explained("node_id", 0, 1, "2");
        assert!(m.contains("was given text (a string) (\"2\")"), "{m}");
        assert!(m.contains("-o node_id=2"), "{m}");
        let m = explained("visible_devices", 4, 2, 1.0f32);
        assert!(m.contains("-o visible_devices=[1]"), "{m}");
        // No plain meaning: an example of the kind.
        let m = explained("memory_fraction", 0, 3, "most");
        assert!(m.contains("-o memory_fraction=1.0"), "{m}");
        // Text the command line cannot give: Python only.
        let m = explained("allocator", 1, 0, true);
        assert!(
            m.contains(r#"options={"allocator": "true"} in Python (the command"#),
            "{m}"
        );
        let m = explained("allocator", 3, 0, vec![0i64]);
        assert!(
            m.contains(r#"options={"allocator": "[0]"} in Python (the command"#),
            "{m}"
        );
        let options = ClientOptions::new();
        let m = explain_option_type_message(&xla("allocator", 2, 0), &options).unwrap();
        assert!(m.contains("-o allocator=NAME on the command line"), "{m}");
    }

    #[test]
    fn an_option_rpjrt_did_not_send_is_read_by_xlas_numbering() {
        let m = explain_option_type_message(&xla("memory_fraction", 2, 3), &ClientOptions::new())
            .unwrap();
        assert!(
            m.starts_with("create option memory_fraction takes a float, but was given an int64:"),
            "{m}"
        );
        assert!(m.contains("-o memory_fraction=1.0"), "{m}");
    }

    #[test]
    fn other_messages_are_left_alone() {
        let o = ClientOptions::new().set("bogus", 1i64);
        for m in [
            "Unexpected option name passed to PJRT_Client_Create: bogus".to_string(),
            // What rpjrt sent is what the plugin wants: another numbering, not explained.
            xla("bogus", 2, 1),
            // Out of range.
            xla("bogus", 2, 9),
            "Option passed to PJRT_Client_Create with name bogus has type index x".into(),
        ] {
            assert_eq!(explain_option_type_message(&m, &o), None, "{m}");
        }
    }

    #[test]
    fn the_error_keeps_its_code_and_entry() {
        let options = ClientOptions::new().set("visible_devices", 0i64);
        let e = explain_option_type(
            Error::Pjrt {
                entry: "PJRT_Client_Create",
                code: Code::InvalidArgument,
                message: xla("visible_devices", 2, 2),
            },
            &options,
        );
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(e.entry(), Some("PJRT_Client_Create"));
        let text = e.to_string();
        assert!(
            text.starts_with(
                "PJRT_Client_Create failed with INVALID_ARGUMENT: create option visible_devices"
            ),
            "{text}"
        );
        // Another code: untouched.
        let e = explain_option_type(
            Error::Pjrt {
                entry: "PJRT_Client_Create",
                code: Code::Internal,
                message: xla("visible_devices", 2, 2),
            },
            &options,
        );
        assert!(e.to_string().ends_with("expected type index is 2"), "{e}");
    }
}
