//! Raw calls for compile-once work: serializing and loading executables, introspection of a
//! compiled executable (cost analysis, memory stats, memory kinds, compile options, the
//! Layouts and Shardings extensions) and topology descriptions.
//!
//! Self-contained on purpose: it uses only the call helper (`pjrt!`), the `Args` trait and
//! the handle types of `calls`. Every struct that grew between PJRT versions is sized for
//! the plugin's version here, and every extension slot is read only when the plugin's
//! extension struct is long enough to hold it.

// C `int`/`size_t` fields are cast explicitly so the code stays right where they differ.
#![allow(clippy::unnecessary_cast)]

use std::ffi::{c_char, c_void};
use std::mem::{offset_of, size_of};
use std::ptr::null_mut;

use rpjrt_sys as sys;

use std::sync::Arc;

use super::client::Client as RawClient;
use super::executable::Loaded;
use super::util::{read_named_values, NamedValue};
use super::{args_types, pjrt, Api, Args};
use crate::error::{Code, Error, Result};

args_types! {
    PJRT_Executable_Serialize_Args => PJRT_Executable_Serialize_Args_STRUCT_SIZE,
    PJRT_Executable_DeserializeAndLoad_Args => PJRT_Executable_DeserializeAndLoad_Args_STRUCT_SIZE,
    PJRT_Executable_GetCompileOptions_Args => PJRT_Executable_GetCompileOptions_Args_STRUCT_SIZE,
    PJRT_Executable_GetCostAnalysis_Args => PJRT_Executable_GetCostAnalysis_Args_STRUCT_SIZE,
    PJRT_Executable_GetCompiledMemoryStats_Args => PJRT_Executable_GetCompiledMemoryStats_Args_STRUCT_SIZE,
    PJRT_Executable_OutputMemoryKinds_Args => PJRT_Executable_OutputMemoryKinds_Args_STRUCT_SIZE,
    PJRT_Client_TopologyDescription_Args => PJRT_Client_TopologyDescription_Args_STRUCT_SIZE,
    PJRT_TopologyDescription_Create_Args => PJRT_TopologyDescription_Create_Args_STRUCT_SIZE,
    PJRT_TopologyDescription_Destroy_Args => PJRT_TopologyDescription_Destroy_Args_STRUCT_SIZE,
    PJRT_TopologyDescription_PlatformName_Args => PJRT_TopologyDescription_PlatformName_Args_STRUCT_SIZE,
    PJRT_TopologyDescription_PlatformVersion_Args => PJRT_TopologyDescription_PlatformVersion_Args_STRUCT_SIZE,
    PJRT_TopologyDescription_GetDeviceDescriptions_Args => PJRT_TopologyDescription_GetDeviceDescriptions_Args_STRUCT_SIZE,
    PJRT_TopologyDescription_Serialize_Args => PJRT_TopologyDescription_Serialize_Args_STRUCT_SIZE,
    PJRT_TopologyDescription_Fingerprint_Args => PJRT_TopologyDescription_Fingerprint_Args_STRUCT_SIZE,
    PJRT_Compile_Args => PJRT_Compile_Args_STRUCT_SIZE,
    PJRT_Layouts_MemoryLayout_Serialize_Args => PJRT_Layouts_MemoryLayout_Serialize_Args_STRUCT_SIZE,
    PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args => PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args_STRUCT_SIZE,
    PJRT_Layouts_PJRT_Executable_GetParameterLayouts_Args => PJRT_Layouts_PJRT_Executable_GetParameterLayouts_Args_STRUCT_SIZE,
    PJRT_Shardings_PJRT_Executable_ParameterShardings_Args => PJRT_Shardings_PJRT_Executable_ParameterShardings_Args_STRUCT_SIZE,
    PJRT_Shardings_PJRT_Executable_OutputShardings_Args => PJRT_Shardings_PJRT_Executable_OutputShardings_Args_STRUCT_SIZE,
}

/// PJRT minor that added the compile-option overrides to DeserializeAndLoad's args.
pub const OVERRIDES_SINCE: i32 = 71;
/// PJRT minor that added `load_options` to DeserializeAndLoad's args.
const LOAD_OPTIONS_SINCE: i32 = 111;
/// PJRT minor that added `peak_memory_in_bytes` to the compiled memory stats.
const PEAK_MEMORY_SINCE: i32 = 72;
/// The newest layout we declare; the memory-stats fields after `peak_memory_in_bytes` are
/// trusted only from plugins at least this new (and only when the plugin wrote them).
const TOTALS_SINCE: i32 = 114;
/// Written into fields a plugin may not know, to tell "not written" from a real value.
const UNWRITTEN: i64 = i64::MIN + 0x5eed;

/// A `PJRT_TopologyDescription*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopologyPtr(pub *mut sys::PJRT_TopologyDescription);
// SAFETY: PJRT objects are thread-safe by the C API's contract; this is only the address.
unsafe impl Send for TopologyPtr {}
// SAFETY: as for Send.
unsafe impl Sync for TopologyPtr {}

/// A `PJRT_Executable*` (borrowed from a `Loaded`, or owned by the caller).
#[derive(Clone, Copy)]
struct ExePtr(*mut sys::PJRT_Executable);

fn parts(l: &Loaded) -> (&'static Api, ExePtr) {
    (l.client().api(), ExePtr(l.executable().ptr()))
}

/// Copies a (pointer, length) byte string out of the plugin.
fn bytes(ptr: *const c_char, len: usize) -> Vec<u8> {
    if ptr.is_null() || len == 0 {
        return Vec::new();
    }
    // SAFETY: the plugin handed out this pointer/length pair, valid until its owner is
    // destroyed, which happens only after this copy.
    unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }.to_vec()
}

fn string(ptr: *const c_char, len: usize) -> String {
    String::from_utf8_lossy(&bytes(ptr, len)).into_owned()
}

fn array<T: Copy>(ptr: *const T, len: usize) -> Vec<T> {
    if ptr.is_null() || len == 0 {
        return Vec::new();
    }
    // SAFETY: a live array of `len` elements owned by the plugin, copied before release.
    unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec()
}

/// An `Unsupported` error for a call the plugin has but answers with UNIMPLEMENTED.
pub fn unimplemented_as_unsupported(api: &Api, e: Error, what: &str) -> Error {
    match e {
        Error::Pjrt {
            code: Code::Unimplemented,
            message,
            entry,
        } => Error::Unsupported {
            what: format!("{what} ({entry}: the plugin says UNIMPLEMENTED: {message})"),
            needs: api.version(),
            plugin: api.version(),
            missing_slot: true,
        },
        other => other,
    }
}

// ---------------------------------------------------------------------------- serialize

/// `PJRT_Executable_Serialize`: the plugin's bytes for this executable.
pub fn exe_serialize(l: &Loaded) -> Result<Vec<u8>> {
    let (api, e) = parts(l);
    serialize_ptr(api, e)
}

fn serialize_ptr(api: &Api, e: ExePtr) -> Result<Vec<u8>> {
    let mut a = sys::PJRT_Executable_Serialize_Args::new();
    a.executable = e.0;
    // SAFETY: live executable; outputs are copied below, then released with the deleter.
    unsafe { pjrt!(api, PJRT_Executable_Serialize, &mut a) }?;
    let out = bytes(a.serialized_bytes, a.serialized_bytes_size);
    if let (Some(del), false) = (
        a.serialized_executable_deleter,
        a.serialized_executable.is_null(),
    ) {
        // SAFETY: the deleter the plugin gave for this object, called once after the copy.
        unsafe { del(a.serialized_executable) };
    }
    Ok(out)
}

/// `PJRT_Executable_DeserializeAndLoad` of a plugin blob, with optional serialized
/// compile-option overrides. The struct size sent is the one of the plugin's version.
pub fn deserialize_and_load(
    client: &Arc<RawClient>,
    blob: &[u8],
    overrides: Option<&[u8]>,
) -> Result<Loaded> {
    let api = client.api();
    let v = api.version().minor;
    if overrides.is_some() {
        api.require(
            "compile-option overrides when loading an executable",
            OVERRIDES_SINCE,
        )?;
    }
    let mut a = sys::PJRT_Executable_DeserializeAndLoad_Args::new();
    a.struct_size = if v >= LOAD_OPTIONS_SINCE {
        sys::PJRT_Executable_DeserializeAndLoad_Args_STRUCT_SIZE
    } else if v >= OVERRIDES_SINCE {
        offset_of!(sys::PJRT_Executable_DeserializeAndLoad_Args, load_options)
    } else {
        offset_of!(
            sys::PJRT_Executable_DeserializeAndLoad_Args,
            overridden_serialized_compile_options
        )
    };
    a.client = client.ptr();
    a.serialized_executable = blob.as_ptr().cast();
    a.serialized_executable_size = blob.len();
    if let Some(o) = overrides {
        a.overridden_serialized_compile_options = o.as_ptr().cast();
        a.overridden_serialized_compile_options_size = o.len();
    }
    // Loading may compile (a plugin whose blob is a program): under the runtime's mode.
    let long = super::callback::LongCall::enter("PJRT_Executable_DeserializeAndLoad")?;
    let fp = super::fpmode::FlushDenormals::enter_if(client.runtime_flushes());
    // Rebuilding a program from its protos is allocator-bound: without glibc's fast bins
    // (see `malloc`) the CPU plugins load a large program in ~0.85x the CPU time.
    let bins = super::malloc::NoFastBins::enter();
    // SAFETY: blob and overrides outlive the call; the plugin reads only the prefix that
    // `struct_size` announces, and every field inside it is set.
    let r = unsafe { pjrt!(api, PJRT_Executable_DeserializeAndLoad, &mut a) };
    drop(bins);
    drop(fp);
    drop(long);
    r?;
    Loaded::new(client, a.loaded_executable).unwrap_or_else(|| {
        Err(Error::invalid(
            "PJRT_Executable_DeserializeAndLoad returned no executable",
        ))
    })
}

// ---------------------------------------------------------------------------- introspection

/// `PJRT_Executable_GetCompileOptions`: the serialized `CompileOptionsProto`.
pub fn exe_compile_options(l: &Loaded) -> Result<Vec<u8>> {
    let (api, e) = parts(l);
    let mut a = sys::PJRT_Executable_GetCompileOptions_Args::new();
    a.executable = e.0;
    // SAFETY: live executable; outputs copied, then released with the deleter.
    unsafe { pjrt!(api, PJRT_Executable_GetCompileOptions, &mut a) }?;
    let out = bytes(a.serialized_bytes, a.serialized_bytes_size);
    if let (Some(del), false) = (
        a.serialized_compile_options_deleter,
        a.serialized_compile_options.is_null(),
    ) {
        // SAFETY: the plugin's deleter for this object, called once after the copy.
        unsafe { del(a.serialized_compile_options) };
    }
    Ok(out)
}

/// `PJRT_Executable_GetCostAnalysis`: named values.
pub fn exe_cost_analysis(l: &Loaded) -> Result<Vec<(String, NamedValue)>> {
    let (api, e) = parts(l);
    let mut a = sys::PJRT_Executable_GetCostAnalysis_Args::new();
    a.executable = e.0;
    // SAFETY: live executable; the properties live as long as it and are copied below.
    unsafe { pjrt!(api, PJRT_Executable_GetCostAnalysis, &mut a) }?;
    Ok(read_named_values(a.properties, a.num_properties))
}

/// The compiled memory stats; `None` for fields the plugin's version does not have.
#[derive(Clone, Debug, Default)]
pub struct RawMemoryStats {
    /// Device bytes: generated code, arguments, outputs, aliased, temporaries.
    pub device: [i64; 5],
    /// The same five figures for host memory.
    pub host: [i64; 5],
    /// The peak memory in bytes, from the version that reports it.
    pub peak_memory: Option<i64>,
    /// Total size, total allocation bytes, indefinite allocations and peak unpadded heap
    /// bytes, when the plugin's version has and set all four.
    pub totals: Option<[i64; 4]>,
}

/// `PJRT_Executable_GetCompiledMemoryStats`, sized by the plugin's version.
pub fn exe_memory_stats(l: &Loaded) -> Result<RawMemoryStats> {
    let (api, e) = parts(l);
    type M = sys::PJRT_Executable_GetCompiledMemoryStats_Args;
    let v = api.version().minor;
    let mut a = M::new();
    a.struct_size = if v >= TOTALS_SINCE {
        sys::PJRT_Executable_GetCompiledMemoryStats_Args_STRUCT_SIZE
    } else if v >= PEAK_MEMORY_SINCE {
        offset_of!(M, peak_memory_in_bytes) + size_of::<i64>()
    } else {
        offset_of!(M, host_temp_size_in_bytes) + size_of::<i64>()
    };
    a.executable = e.0;
    a.peak_memory_in_bytes = UNWRITTEN;
    a.total_size_in_bytes = UNWRITTEN;
    a.total_allocation_bytes = UNWRITTEN;
    a.indefinite_allocations = UNWRITTEN;
    a.peak_unpadded_heap_bytes = UNWRITTEN;
    // SAFETY: live executable; the struct is as large as we say, and the plugin writes at
    // most the fields of its own (announced-or-smaller) size.
    unsafe { pjrt!(api, PJRT_Executable_GetCompiledMemoryStats, &mut a) }?;
    let known = |x: i64| (x != UNWRITTEN).then_some(x);
    let totals = [
        a.total_size_in_bytes,
        a.total_allocation_bytes,
        a.indefinite_allocations,
        a.peak_unpadded_heap_bytes,
    ];
    Ok(RawMemoryStats {
        device: [
            a.generated_code_size_in_bytes,
            a.argument_size_in_bytes,
            a.output_size_in_bytes,
            a.alias_size_in_bytes,
            a.temp_size_in_bytes,
        ],
        host: [
            a.host_generated_code_size_in_bytes,
            a.host_argument_size_in_bytes,
            a.host_output_size_in_bytes,
            a.host_alias_size_in_bytes,
            a.host_temp_size_in_bytes,
        ],
        peak_memory: if v >= PEAK_MEMORY_SINCE {
            known(a.peak_memory_in_bytes)
        } else {
            None
        },
        totals: (v >= TOTALS_SINCE && totals.iter().all(|&x| x != UNWRITTEN)).then_some(totals),
    })
}

/// `PJRT_Executable_OutputMemoryKinds`.
pub fn exe_output_memory_kinds(l: &Loaded) -> Result<Vec<String>> {
    let (api, e) = parts(l);
    let mut a = sys::PJRT_Executable_OutputMemoryKinds_Args::new();
    a.executable = e.0;
    // SAFETY: live executable; the arrays live as long as it and are copied below.
    unsafe { pjrt!(api, PJRT_Executable_OutputMemoryKinds, &mut a) }?;
    let ptrs = array(a.memory_kinds, a.num_outputs);
    let sizes = array(a.memory_kind_sizes, a.num_outputs);
    Ok(ptrs
        .into_iter()
        .zip(sizes)
        .map(|(p, n)| string(p, n))
        .collect())
}

// ---------------------------------------------------------------------------- extensions

/// The plugin's extension struct of `type_id`: its address and the size it declares.
fn find_extension(api: &Api, type_id: i32) -> Option<(*const u8, usize)> {
    // SAFETY: the table is at least as large as its header (checked at load).
    let mut cur = unsafe { std::ptr::addr_of!((*api.ptr).extension_start).read() };
    let mut n = 0;
    while !cur.is_null() && n < 64 {
        // SAFETY: each extension starts with a PJRT_Extension_Base; the chain is immutable
        // and lives as long as the library.
        let base = unsafe { cur.read() };
        if base.r#type as i32 == type_id {
            return Some((cur.cast::<u8>(), base.struct_size));
        }
        cur = base.next;
        n += 1;
    }
    None
}

/// Reads the function-pointer slot at `offset` of an extension struct, only if the
/// plugin's struct is long enough to hold it.
fn ext_slot<F: Copy>(
    api: &Api,
    type_id: i32,
    ext_name: &str,
    offset: usize,
    entry: &str,
) -> Result<F> {
    assert_eq!(size_of::<F>(), size_of::<*const c_void>());
    let unsupported = |missing_slot: bool, why: String| Error::Unsupported {
        what: format!("{entry} ({why})"),
        needs: api.version(),
        plugin: api.version(),
        missing_slot,
    };
    let Some((base, size)) = find_extension(api, type_id) else {
        return Err(unsupported(
            true,
            format!("the plugin has no {ext_name} extension"),
        ));
    };
    if offset + size_of::<usize>() > size {
        return Err(unsupported(
            true,
            format!("the plugin's {ext_name} extension is {size} bytes, too short for it"),
        ));
    }
    // SAFETY: the slot lies inside the plugin's extension struct (checked above); it is a
    // nullable function pointer, read as a raw pointer first.
    let raw = unsafe { base.add(offset).cast::<*const c_void>().read() };
    if raw.is_null() {
        return Err(unsupported(
            true,
            format!("the {ext_name} extension leaves it empty"),
        ));
    }
    // SAFETY: `F` is the pointer-sized function type of this slot (asserted above), and the
    // value is non-null.
    Ok(unsafe { std::mem::transmute_copy::<*const c_void, F>(&raw) })
}

fn ext_call<T>(
    api: &Api,
    f: unsafe extern "C" fn(*mut T) -> *mut sys::PJRT_Error,
    args: &mut T,
    entry: &'static str,
) -> Result<()> {
    // SAFETY: `f` is the plugin's implementation of `entry`; callers pass args whose pointers
    // are valid for the call.
    let err = unsafe { super::call_guarded(entry, f, args) }?;
    if err.is_null() {
        Ok(())
    } else {
        Err(api.take_error(err, entry))
    }
}

const LAYOUTS: i32 = sys::PJRT_Extension_Type_Layouts as i32;
const SHARDINGS: i32 = sys::PJRT_Extension_Type_Shardings as i32;

fn serialize_layout(api: &Api, layout: *mut sys::PJRT_Layouts_MemoryLayout) -> Result<Vec<u8>> {
    let f: sys::PJRT_Layouts_MemoryLayout_Serialize = ext_slot(
        api,
        LAYOUTS,
        "Layouts",
        offset_of!(
            sys::PJRT_Layouts_Extension,
            PJRT_Layouts_MemoryLayout_Serialize
        ),
        "PJRT_Layouts_MemoryLayout_Serialize",
    )?;
    let mut a = sys::PJRT_Layouts_MemoryLayout_Serialize_Args::new();
    a.layout = layout;
    ext_call(api, f, &mut a, "PJRT_Layouts_MemoryLayout_Serialize")?;
    let out = bytes(a.serialized_bytes, a.serialized_bytes_size);
    if let (Some(del), false) = (a.serialized_layout_deleter, a.serialized_layout.is_null()) {
        // SAFETY: the plugin's deleter for this object, called once after the copy.
        unsafe { del(a.serialized_layout) };
    }
    Ok(out)
}

/// Serialized layouts of an executable's outputs (`parameters == false`) or parameters,
/// through the Layouts extension.
pub fn exe_layouts(l: &Loaded, parameters: bool) -> Result<Vec<Vec<u8>>> {
    let (api, e) = parts(l);
    let (ptrs, n) = if parameters {
        let f: sys::PJRT_Layouts_PJRT_Executable_GetParameterLayouts = ext_slot(
            api,
            LAYOUTS,
            "Layouts",
            offset_of!(
                sys::PJRT_Layouts_Extension,
                PJRT_Layouts_PJRT_Executable_GetParameterLayouts
            ),
            "PJRT_Layouts_PJRT_Executable_GetParameterLayouts",
        )?;
        let mut a = sys::PJRT_Layouts_PJRT_Executable_GetParameterLayouts_Args::new();
        a.executable = e.0;
        ext_call(
            api,
            f,
            &mut a,
            "PJRT_Layouts_PJRT_Executable_GetParameterLayouts",
        )?;
        (a.layouts, a.num_parameters)
    } else {
        let f: sys::PJRT_Layouts_PJRT_Executable_GetOutputLayouts = ext_slot(
            api,
            LAYOUTS,
            "Layouts",
            offset_of!(
                sys::PJRT_Layouts_Extension,
                PJRT_Layouts_PJRT_Executable_GetOutputLayouts
            ),
            "PJRT_Layouts_PJRT_Executable_GetOutputLayouts",
        )?;
        let mut a = sys::PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args::new();
        a.executable = e.0;
        ext_call(
            api,
            f,
            &mut a,
            "PJRT_Layouts_PJRT_Executable_GetOutputLayouts",
        )?;
        (a.layouts, a.num_outputs)
    };
    // The layouts are owned by the executable: serialize each, destroy none.
    array(ptrs.cast_const(), n)
        .into_iter()
        .map(|l| serialize_layout(api, l))
        .collect()
}

/// Serialized `OpSharding`s of an executable's parameters or outputs, through the
/// Shardings extension.
pub fn exe_shardings(l: &Loaded, parameters: bool) -> Result<Vec<Vec<u8>>> {
    let (api, e) = parts(l);
    let (ptrs, sizes, n) = if parameters {
        let f: sys::PJRT_Shardings_PJRT_Executable_ParameterShardings = ext_slot(
            api,
            SHARDINGS,
            "Shardings",
            offset_of!(
                sys::PJRT_Shardings_Extension,
                PJRT_Shardings_PJRT_Executable_ParameterShardings
            ),
            "PJRT_Shardings_PJRT_Executable_ParameterShardings",
        )?;
        let mut a = sys::PJRT_Shardings_PJRT_Executable_ParameterShardings_Args::new();
        a.executable = e.0;
        ext_call(
            api,
            f,
            &mut a,
            "PJRT_Shardings_PJRT_Executable_ParameterShardings",
        )?;
        (a.shardings, a.sharding_sizes, a.num_parameters)
    } else {
        let f: sys::PJRT_Shardings_PJRT_Executable_OutputShardings = ext_slot(
            api,
            SHARDINGS,
            "Shardings",
            offset_of!(
                sys::PJRT_Shardings_Extension,
                PJRT_Shardings_PJRT_Executable_OutputShardings
            ),
            "PJRT_Shardings_PJRT_Executable_OutputShardings",
        )?;
        let mut a = sys::PJRT_Shardings_PJRT_Executable_OutputShardings_Args::new();
        a.executable = e.0;
        ext_call(
            api,
            f,
            &mut a,
            "PJRT_Shardings_PJRT_Executable_OutputShardings",
        )?;
        (a.shardings, a.sharding_sizes, a.num_outputs)
    };
    let ptrs = array(ptrs, n);
    let sizes = array(sizes, n);
    Ok(ptrs
        .into_iter()
        .zip(sizes)
        .map(|(p, s)| bytes(p, s))
        .collect())
}

// ---------------------------------------------------------------------------- topology

/// `PJRT_Client_TopologyDescription` (owned by the client: never destroyed by us).
pub fn client_topology(client: &RawClient) -> Result<TopologyPtr> {
    let api = client.api();
    let mut a = sys::PJRT_Client_TopologyDescription_Args::new();
    a.client = client.ptr();
    // SAFETY: live client.
    unsafe { pjrt!(api, PJRT_Client_TopologyDescription, &mut a) }
        .map_err(|e| unimplemented_as_unsupported(api, e, "a topology description"))?;
    if a.topology.is_null() {
        return Err(Error::invalid(
            "PJRT_Client_TopologyDescription returned no topology",
        ));
    }
    Ok(TopologyPtr(a.topology))
}

/// `PJRT_TopologyDescription_Create` for a named topology (owned by the caller).
pub fn topology_create(api: &Api, name: &str) -> Result<TopologyPtr> {
    let mut a = sys::PJRT_TopologyDescription_Create_Args::new();
    a.topology_name = name.as_ptr().cast();
    a.topology_name_size = name.len();
    // SAFETY: the name outlives the call; no create options.
    unsafe { pjrt!(api, PJRT_TopologyDescription_Create, &mut a) }
        .map_err(|e| unimplemented_as_unsupported(api, e, "creating a topology"))?;
    if a.topology.is_null() {
        return Err(Error::invalid(
            "PJRT_TopologyDescription_Create returned no topology",
        ));
    }
    Ok(TopologyPtr(a.topology))
}

/// `PJRT_TopologyDescription_Destroy` for a topology we created.
pub fn topology_destroy(api: &Api, t: TopologyPtr) -> Result<()> {
    let mut a = sys::PJRT_TopologyDescription_Destroy_Args::new();
    a.topology = t.0;
    // SAFETY: a topology created by `topology_create`, destroyed once by its owner.
    unsafe { pjrt!(api, PJRT_TopologyDescription_Destroy, &mut a) }
}

/// What a topology says about itself.
#[derive(Clone, Debug)]
pub struct TopologyFacts {
    /// The platform's name (`cpu`, `cuda`, ...).
    pub platform_name: String,
    /// The platform's version text.
    pub platform_version: String,
    /// Each device description's (id, kind), in the topology's order.
    pub device_kinds: Vec<(i32, String)>,
    /// The topology's fingerprint, when the plugin gives one.
    pub fingerprint: Option<u64>,
}

/// Reads a topology's platform, devices and fingerprint.
pub fn topology_facts(api: &Api, t: TopologyPtr) -> Result<TopologyFacts> {
    let mut name = sys::PJRT_TopologyDescription_PlatformName_Args::new();
    name.topology = t.0;
    let mut ver = sys::PJRT_TopologyDescription_PlatformVersion_Args::new();
    ver.topology = t.0;
    let mut devs = sys::PJRT_TopologyDescription_GetDeviceDescriptions_Args::new();
    devs.topology = t.0;
    // SAFETY: live topology; outputs are copied below while it lives.
    unsafe {
        pjrt!(api, PJRT_TopologyDescription_PlatformName, &mut name)?;
        pjrt!(api, PJRT_TopologyDescription_PlatformVersion, &mut ver)?;
        pjrt!(
            api,
            PJRT_TopologyDescription_GetDeviceDescriptions,
            &mut devs
        )?;
    }
    let mut device_kinds = Vec::new();
    for d in array(devs.descriptions, devs.num_descriptions) {
        let mut id = sys::PJRT_DeviceDescription_Id_Args::new();
        id.device_description = d;
        let mut kind = sys::PJRT_DeviceDescription_Kind_Args::new();
        kind.device_description = d;
        // SAFETY: a description owned by the live topology.
        unsafe {
            pjrt!(api, PJRT_DeviceDescription_Id, &mut id)?;
            pjrt!(api, PJRT_DeviceDescription_Kind, &mut kind)?;
        }
        device_kinds.push((
            id.id as i32,
            string(kind.device_kind, kind.device_kind_size),
        ));
    }
    let mut fp = sys::PJRT_TopologyDescription_Fingerprint_Args::new();
    fp.topology = t.0;
    // SAFETY: live topology.
    let fingerprint = unsafe { pjrt!(api, PJRT_TopologyDescription_Fingerprint, &mut fp) }
        .ok()
        .map(|()| fp.fingerprint);
    Ok(TopologyFacts {
        platform_name: string(name.platform_name, name.platform_name_size),
        platform_version: string(ver.platform_version, ver.platform_version_size),
        device_kinds,
        fingerprint,
    })
}

/// `PJRT_TopologyDescription_Serialize`.
pub fn topology_serialize(api: &Api, t: TopologyPtr) -> Result<Vec<u8>> {
    let mut a = sys::PJRT_TopologyDescription_Serialize_Args::new();
    a.topology = t.0;
    // SAFETY: live topology; output copied, then released with the deleter.
    unsafe { pjrt!(api, PJRT_TopologyDescription_Serialize, &mut a) }
        .map_err(|e| unimplemented_as_unsupported(api, e, "serializing a topology"))?;
    let out = bytes(a.serialized_bytes, a.serialized_bytes_size);
    if let (Some(del), false) = (
        a.serialized_topology_deleter,
        a.serialized_topology.is_null(),
    ) {
        // SAFETY: the plugin's deleter for this object, called once after the copy.
        unsafe { del(a.serialized_topology) };
    }
    Ok(out)
}

/// `PJRT_Compile` for a topology (no devices needed): an unloaded executable, serialized
/// and destroyed before returning.
pub fn topology_compile_serialized(
    api: &Api,
    t: TopologyPtr,
    code: &[u8],
    format: &str,
    options: &[u8],
) -> Result<Vec<u8>> {
    let code = super::client::nul_terminated(code);
    let mut program = sys::PJRT_Program::new();
    program.code = code.as_ptr() as *mut c_char;
    program.code_size = code.len() - 1;
    program.format = format.as_ptr().cast();
    program.format_size = format.len();
    let mut a = sys::PJRT_Compile_Args::new();
    a.topology = t.0;
    a.program = &program;
    a.compile_options = options.as_ptr().cast();
    a.compile_options_size = options.len();
    a.client = null_mut();
    // XLA folds constants on this thread while compiling: under the runtime's mode.
    let mut name = sys::PJRT_TopologyDescription_PlatformName_Args::new();
    name.topology = t.0;
    // SAFETY: live topology; the name is read while it lives.
    let flushes = unsafe { pjrt!(api, PJRT_TopologyDescription_PlatformName, &mut name) }
        .is_ok_and(|()| {
            super::fpmode::runtime_flushes(&string(name.platform_name, name.platform_name_size))
        });
    let long = super::callback::LongCall::enter("PJRT_Compile")?;
    let fp = super::fpmode::FlushDenormals::enter_if(flushes);
    // SAFETY: program, code, format and options outlive the call; the plugin only reads them.
    let r = unsafe { pjrt!(api, PJRT_Compile, &mut a) };
    drop(fp);
    drop(long);
    r.map_err(|e| match e {
        // The 0.81 CPU plugin has the entry but no compiler behind it.
        Error::Pjrt {
            code: Code::NotFound,
            message,
            entry,
        } if message.contains("No compiler registered") => Error::Unsupported {
            what: format!("compiling for a topology ({entry}: {message})"),
            needs: api.version(),
            plugin: api.version(),
            missing_slot: true,
        },
        e => unimplemented_as_unsupported(api, e, "compiling for a topology"),
    })?;
    if a.executable.is_null() {
        return Err(Error::invalid("PJRT_Compile returned no executable"));
    }
    let exe = ExePtr(a.executable);
    let out = serialize_ptr(api, exe);
    let mut d = sys::PJRT_Executable_Destroy_Args::new();
    d.executable = exe.0;
    // SAFETY: the unloaded executable PJRT_Compile returned is ours, destroyed once here.
    let _ = unsafe { pjrt!(api, PJRT_Executable_Destroy, &mut d) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_struct_prefixes_match_the_0_81_header() {
        // 0.81's DeserializeAndLoad args end with the override size (64 bytes); before
        // 0.71 they end at loaded_executable (48).
        type D = sys::PJRT_Executable_DeserializeAndLoad_Args;
        assert_eq!(offset_of!(D, load_options), 64);
        assert_eq!(offset_of!(D, overridden_serialized_compile_options), 48);
        // 0.81's compiled memory stats end with peak_memory_in_bytes (112 bytes).
        type M = sys::PJRT_Executable_GetCompiledMemoryStats_Args;
        assert_eq!(offset_of!(M, peak_memory_in_bytes) + size_of::<i64>(), 112);
        // The 0.81 Layouts extension (72 bytes) ends before the parameter-layouts slot.
        type L = sys::PJRT_Layouts_Extension;
        assert_eq!(
            offset_of!(L, PJRT_Layouts_PJRT_Executable_GetOutputLayouts),
            64
        );
        assert_eq!(
            offset_of!(L, PJRT_Layouts_PJRT_Executable_GetParameterLayouts),
            72
        );
    }
}
