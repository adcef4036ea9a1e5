//! Compilation and executables. The fake executable's semantics: one output, a copy of
//! its first argument (same type, shape and bytes), on each device it runs on.

use std::os::raw::c_char;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rpjrt_sys as sys;

use crate::buffer::{buffer_ref, entry_event, new_buffer, DELETED_MESSAGE};
use crate::client::{client_ref, ClientInner};
use crate::error::{failed_precondition, invalid, unimplemented, Fail};
use crate::mlir::{parse_signature, TensorType};
use crate::named::read_str;
use crate::proto::parse_compile_options;
use crate::registry::{self, Kind};
use crate::state::{check_size, State};

/// Text that makes `PJRT_Client_Compile` fail with INVALID_ARGUMENT.
pub const COMPILE_ERROR_MARKER: &str = "FAKE_COMPILE_ERROR";

/// Memory kind reported for every parameter and output.
const MEMORY_KIND: &str = "device";

pub(crate) struct ExecInner {
    name: String,
    code: Vec<u8>,
    format: String,
    options: Vec<u8>,
    num_replicas: usize,
    num_partitions: usize,
    params: Option<Vec<Option<TensorType>>>,
    output: Option<TensorType>,
    output_types: Vec<sys::PJRT_Buffer_Type>,
    output_dim_sizes: Vec<usize>,
    output_kinds: Vec<*const c_char>,
    output_kind_sizes: Vec<usize>,
    param_kinds: Vec<*const c_char>,
    param_kind_sizes: Vec<usize>,
    fingerprint: String,
}

// SAFETY: the raw pointers point at a 'static string; nothing is mutated after creation.
unsafe impl Send for ExecInner {}
// SAFETY: as above.
unsafe impl Sync for ExecInner {}

pub(crate) struct FakeLoadedExecutable {
    client: Arc<ClientInner>,
    inner: Arc<ExecInner>,
    /// Indices of the devices it runs on, replica-major.
    device_indices: Vec<usize>,
    device_ptrs: Vec<*mut sys::PJRT_Device>,
    deleted: AtomicBool,
}

// SAFETY: device_ptrs point at devices owned by `client`, which this keeps alive.
unsafe impl Send for FakeLoadedExecutable {}
// SAFETY: as above; the only mutable state is atomic.
unsafe impl Sync for FakeLoadedExecutable {}

pub(crate) struct FakeExecutable {
    inner: Arc<ExecInner>,
}

/// 64-bit FNV-1a.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in *part {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn loaded_ref<'a>(exe: *mut sys::PJRT_LoadedExecutable) -> Result<&'a FakeLoadedExecutable, Fail> {
    // SAFETY: handles of this kind are registered from Box::into_raw in compile and
    // unregistered before they are freed; the caller keeps this one alive for the call.
    unsafe { registry::live_ref(exe, Kind::LoadedExecutable) }
}

fn executable_ref<'a>(exe: *mut sys::PJRT_Executable) -> Result<&'a FakeExecutable, Fail> {
    // SAFETY: handles of this kind are registered from Box::into_raw in get_executable and
    // unregistered before they are freed; the caller keeps this one alive for the call.
    unsafe { registry::live_ref(exe, Kind::Executable) }
}

fn line_col(text: &[u8], at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let col = at
        - before
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |p| p + 1)
        + 1;
    (line, col)
}

fn compile(a: &mut sys::PJRT_Client_Compile_Args, state: &State) -> Result<(), Fail> {
    let client = client_ref(a.client)?;
    let inner = &client.inner;
    if a.program.is_null() {
        return Err(invalid("fake plugin: null PJRT_Program"));
    }
    // SAFETY: non-null program starts with struct_size.
    let actual = unsafe { (*a.program).struct_size };
    check_size(state, "PJRT_Program", actual, sys::PJRT_Program_STRUCT_SIZE)?;
    // SAFETY: its struct_size covers every field (checked).
    let program = unsafe { &*a.program };
    // SAFETY: format points at format_size bytes per the C API.
    let format = unsafe { read_str(program.format, program.format_size) };
    let code: Vec<u8> = if program.code_size == 0 {
        Vec::new()
    } else if program.code.is_null() {
        return Err(invalid("fake plugin: null program code"));
    } else {
        // SAFETY: code points at code_size bytes per the C API.
        unsafe { std::slice::from_raw_parts(program.code.cast::<u8>(), program.code_size) }.to_vec()
    };
    let options: &[u8] = if a.compile_options_size == 0 {
        &[]
    } else if a.compile_options.is_null() {
        return Err(invalid("fake plugin: null compile_options"));
    } else {
        // SAFETY: compile_options points at compile_options_size bytes per the C API.
        unsafe {
            std::slice::from_raw_parts(a.compile_options.cast::<u8>(), a.compile_options_size)
        }
    };
    a.executable = build(inner, &format, code, options)?;
    Ok(())
}

/// Compiles `code` for `inner`'s devices: everything after reading the arguments, shared
/// by `PJRT_Client_Compile` and `PJRT_Executable_DeserializeAndLoad`.
fn build(
    inner: &Arc<ClientInner>,
    format: &str,
    code: Vec<u8>,
    options: &[u8],
) -> Result<*mut sys::PJRT_LoadedExecutable, Fail> {
    if format != "mlir" {
        return Err(invalid(format!(
            "fake plugin: unsupported program format {format:?}; only \"mlir\" is accepted"
        )));
    }
    if let Some(at) = code
        .windows(COMPILE_ERROR_MARKER.len())
        .position(|w| w == COMPILE_ERROR_MARKER.as_bytes())
    {
        let (line, col) = line_col(&code, at);
        return Err(invalid(format!(
            "program.mlir:{line}:{col}: error: {COMPILE_ERROR_MARKER}: compilation failed as requested"
        )));
    }
    if !code.windows(4).any(|w| w == b"func") {
        return Err(invalid(
            "fake plugin: the program has no func; expected a StableHLO module",
        ));
    }
    let opts = parse_compile_options(options)
        .map_err(|e| invalid(format!("fake plugin: bad CompileOptionsProto: {e}")))?;
    if opts.num_replicas == 0 || opts.num_partitions == 0 {
        return Err(invalid(format!(
            "fake plugin: num_replicas ({}) and num_partitions ({}) must be at least 1 \
             (real plugins abort the process on this)",
            opts.num_replicas, opts.num_partitions
        )));
    }
    let (replicas, partitions) = (opts.num_replicas as usize, opts.num_partitions as usize);
    let needed = replicas
        .checked_mul(partitions)
        .ok_or_else(|| invalid("fake plugin: too many replicas x partitions"))?;
    let device_indices: Vec<usize> = match &opts.device_assignment {
        Some(da) => {
            if da.len() != partitions || da.iter().any(|c| c.len() != replicas) {
                return Err(invalid(format!(
                    "fake plugin: device assignment is not {replicas} replicas x {partitions} partitions"
                )));
            }
            let mut out = Vec::with_capacity(needed);
            for r in 0..replicas {
                for comp in da {
                    let id = comp[r];
                    let i = inner
                        .devices
                        .iter()
                        .position(|d| i64::from(d.id) == id)
                        .ok_or_else(|| {
                            invalid(format!(
                                "fake plugin: device assignment names unknown device {id}"
                            ))
                        })?;
                    if out.contains(&i) {
                        return Err(invalid(format!(
                            "fake plugin: device assignment names device {id} twice \
                             (some real plugins abort the process on this)"
                        )));
                    }
                    out.push(i);
                }
            }
            out
        }
        None => (0..needed).collect(),
    };
    if device_indices.len() > inner.devices.len()
        || device_indices.iter().any(|i| *i >= inner.devices.len())
    {
        return Err(invalid(format!(
            "fake plugin: {needed} devices needed, the client has {}",
            inner.devices.len()
        )));
    }
    if let Some(i) = device_indices.iter().find(|i| !inner.addressable(**i)) {
        return Err(invalid(format!(
            "fake plugin: device {} is not addressable",
            inner.device_name(*i)
        )));
    }
    let sig = parse_signature(&code);
    let output = sig
        .params
        .as_ref()
        .and_then(|p| p.first().cloned())
        .flatten();
    let num_params = sig.params.as_ref().map_or(0, Vec::len);
    let exe = ExecInner {
        name: sig
            .module_name
            .clone()
            .unwrap_or_else(|| "fake_executable".to_string()),
        fingerprint: format!("{:016x}", fnv1a(&[format.as_bytes(), &code, options])),
        num_replicas: replicas,
        num_partitions: partitions,
        output_types: output.iter().map(|t| t.ty).collect(),
        output_dim_sizes: output.iter().map(|t| t.dims.len()).collect(),
        output,
        output_kinds: vec![MEMORY_KIND.as_ptr().cast()],
        output_kind_sizes: vec![MEMORY_KIND.len()],
        param_kinds: vec![MEMORY_KIND.as_ptr().cast(); num_params],
        param_kind_sizes: vec![MEMORY_KIND.len(); num_params],
        params: sig.params,
        code,
        format: format.to_string(),
        options: options.to_vec(),
    };
    let device_ptrs = device_indices
        .iter()
        .map(|i| inner.device_ptr(*i))
        .collect();
    let raw = Box::into_raw(Box::new(FakeLoadedExecutable {
        client: inner.clone(),
        inner: Arc::new(exe),
        device_indices,
        device_ptrs,
        deleted: AtomicBool::new(false),
    }));
    registry::register(raw, Kind::LoadedExecutable);
    Ok(raw.cast())
}

entry_fn!(client_compile, PJRT_Client_Compile, |a, state| {
    compile(a, state)
});

fn describe(t: &TensorType) -> String {
    format!("type {} {:?}", t.ty, t.dims)
}

fn execute(a: &mut sys::PJRT_LoadedExecutable_Execute_Args, state: &State) -> Result<(), Fail> {
    let exe = loaded_ref(a.executable)?;
    if exe.deleted.load(Ordering::SeqCst) {
        return Err(failed_precondition(
            "fake plugin: the executable has been deleted",
        ));
    }
    if !a.options.is_null() {
        // SAFETY: non-null options start with struct_size.
        let actual = unsafe { (*a.options).struct_size };
        check_size(
            state,
            "PJRT_ExecuteOptions",
            actual,
            sys::PJRT_ExecuteOptions_STRUCT_SIZE,
        )?;
    }
    let run_on: Vec<usize> = if a.execute_device.is_null() {
        exe.device_indices.clone()
    } else {
        let d = exe
            .client
            .device_index(a.execute_device)
            .filter(|d| exe.device_indices.contains(d))
            .ok_or_else(|| {
                invalid("fake plugin: execute_device is not one of the executable's devices")
            })?;
        vec![d]
    };
    if a.num_devices != run_on.len() {
        return Err(invalid(format!(
            "Attempted to execute with {} argument lists when local device count is {} \
             (total replica count: {}, partition count: {})",
            a.num_devices,
            run_on.len(),
            exe.inner.num_replicas,
            exe.inner.num_partitions
        )));
    }
    if let Some(params) = &exe.inner.params {
        if a.num_args != params.len() {
            return Err(invalid(format!(
                "Execution supplied {} buffers but compiled program expected {} buffers",
                a.num_args,
                params.len()
            )));
        }
    }
    if a.num_args == 0 {
        return Err(invalid(
            "fake plugin: the fake executable returns a copy of its first argument, so it needs at least one",
        ));
    }
    if a.argument_lists.is_null() || a.output_lists.is_null() {
        return Err(invalid("fake plugin: null argument_lists or output_lists"));
    }
    // Check every argument before producing anything.
    let mut firsts = Vec::with_capacity(run_on.len());
    for (slot, &device) in run_on.iter().enumerate() {
        // SAFETY: argument_lists has num_devices lists of num_args buffers.
        let list = unsafe { *a.argument_lists.add(slot) };
        if list.is_null() {
            return Err(invalid(format!(
                "fake plugin: argument list {slot} is null"
            )));
        }
        for i in 0..a.num_args {
            // SAFETY: as above.
            let b = buffer_ref(unsafe { *list.add(i) })?;
            if b.is_deleted() {
                return Err(invalid(format!(
                    "Argument {i} to replica {slot}: {DELETED_MESSAGE}"
                )));
            }
            if !Arc::ptr_eq(&b.client, &exe.client) {
                return Err(invalid(format!(
                    "fake plugin: argument {i} belongs to another client"
                )));
            }
            if b.device != device {
                return Err(invalid(format!(
                    "Buffer passed to Execute() as argument {i} to replica {slot} is on device {}, \
                     but replica is assigned to device {}.",
                    exe.client.device_name(b.device),
                    exe.client.device_name(device)
                )));
            }
            if let Some(Some(want)) = exe.inner.params.as_ref().and_then(|p| p.get(i)) {
                if want.ty != b.ty || want.dims != b.dims {
                    return Err(invalid(format!(
                        "Argument does not match host shape or layout of computation parameter {i}: \
                         want {}, got {}",
                        describe(want),
                        describe(&TensorType {
                            ty: b.ty,
                            dims: b.dims.clone()
                        })
                    )));
                }
            }
            if i == 0 {
                firsts.push(b);
            }
        }
        // SAFETY: output_lists has num_devices lists.
        if unsafe { *a.output_lists.add(slot) }.is_null() {
            return Err(invalid(format!("fake plugin: output list {slot} is null")));
        }
    }
    // Make every output before handing any out, so a failed allocation leaks nothing.
    let mut outs = Vec::with_capacity(run_on.len());
    for (&device, first) in run_on.iter().zip(firsts) {
        let made = first.read().and_then(|data| {
            new_buffer(
                exe.client.clone(),
                exe.client.default_memory_index(device),
                first.ty,
                first.dims.clone(),
                data,
            )
        });
        match made {
            Ok(out) => outs.push(out),
            Err(e) => {
                outs.into_iter().for_each(crate::buffer::free_buffer);
                return Err(e);
            }
        }
    }
    for (slot, out) in outs.into_iter().enumerate() {
        // SAFETY: output_lists[slot] has room for the executable's 1 output.
        unsafe { *(*a.output_lists.add(slot)) = out };
        if !a.device_complete_events.is_null() {
            // SAFETY: device_complete_events has num_devices slots when non-null.
            unsafe {
                *a.device_complete_events.add(slot) =
                    entry_event(state, "PJRT_LoadedExecutable_Execute")
            };
        }
    }
    Ok(())
}

entry_fn!(loaded_execute, PJRT_LoadedExecutable_Execute, |a, state| {
    execute(a, state)
});

entry_fn!(loaded_destroy, PJRT_LoadedExecutable_Destroy, |a, _| {
    let exe = a.executable;
    if exe.is_null() {
        return Ok(());
    }
    if !registry::unregister(exe.cast::<FakeLoadedExecutable>(), Kind::LoadedExecutable) {
        return Err(invalid(format!(
                "fake plugin: PJRT_LoadedExecutable_Destroy: {exe:p} is not a live PJRT_LoadedExecutable"
            )));
    }
    // SAFETY: it was live, so it came from Box::into_raw in compile; now
    // unregistered, so this is the only free.
    drop(unsafe { Box::from_raw(exe.cast::<FakeLoadedExecutable>()) });
    Ok(())
});

entry_fn!(
    loaded_get_executable,
    PJRT_LoadedExecutable_GetExecutable,
    |a, _| {
        let exe = loaded_ref(a.loaded_executable)?;
        let raw = Box::into_raw(Box::new(FakeExecutable {
            inner: exe.inner.clone(),
        }));
        registry::register(raw, Kind::Executable);
        a.executable = raw.cast();
        Ok(())
    }
);

entry_fn!(
    loaded_addressable_devices,
    PJRT_LoadedExecutable_AddressableDevices,
    |a, _| {
        let exe = loaded_ref(a.executable)?;
        a.addressable_devices = exe.device_ptrs.as_ptr();
        a.num_addressable_devices = exe.device_ptrs.len();
        Ok(())
    }
);

entry_fn!(loaded_delete, PJRT_LoadedExecutable_Delete, |a, _| {
    let exe = loaded_ref(a.executable)?;
    exe.deleted.store(true, Ordering::SeqCst);
    Ok(())
});

entry_fn!(
    loaded_is_deleted,
    PJRT_LoadedExecutable_IsDeleted,
    |a, _| {
        let exe = loaded_ref(a.executable)?;
        let deleted = exe.deleted.load(Ordering::SeqCst);
        a.is_deleted = deleted;
        Ok(())
    }
);

entry_fn!(
    loaded_fingerprint,
    PJRT_LoadedExecutable_Fingerprint,
    |a, _| {
        let exe = loaded_ref(a.executable)?;
        a.executable_fingerprint = exe.inner.fingerprint.as_ptr().cast();
        a.executable_fingerprint_size = exe.inner.fingerprint.len();
        Ok(())
    }
);

entry_fn!(executable_destroy, PJRT_Executable_Destroy, |a, _| {
    let exe = a.executable;
    if exe.is_null() {
        return Ok(());
    }
    if !registry::unregister(exe.cast::<FakeExecutable>(), Kind::Executable) {
        return Err(invalid(format!(
            "fake plugin: PJRT_Executable_Destroy: {exe:p} is not a live PJRT_Executable"
        )));
    }
    // SAFETY: it was live, so it came from Box::into_raw in get_executable; now
    // unregistered, so this is the only free.
    drop(unsafe { Box::from_raw(exe.cast::<FakeExecutable>()) });
    Ok(())
});

entry_fn!(executable_name, PJRT_Executable_Name, |a, _| {
    let exe = executable_ref(a.executable)?;
    a.executable_name = exe.inner.name.as_ptr().cast();
    a.executable_name_size = exe.inner.name.len();
    Ok(())
});

entry_fn!(
    executable_num_replicas,
    PJRT_Executable_NumReplicas,
    |a, _| {
        a.num_replicas = executable_ref(a.executable)?.inner.num_replicas;
        Ok(())
    }
);

entry_fn!(
    executable_num_partitions,
    PJRT_Executable_NumPartitions,
    |a, _| {
        a.num_partitions = executable_ref(a.executable)?.inner.num_partitions;
        Ok(())
    }
);

entry_fn!(
    executable_num_outputs,
    PJRT_Executable_NumOutputs,
    |a, _| {
        executable_ref(a.executable)?;
        a.num_outputs = 1;
        Ok(())
    }
);

entry_fn!(
    executable_size_of_generated_code,
    PJRT_Executable_SizeOfGeneratedCodeInBytes,
    |a, _| {
        a.size_in_bytes = executable_ref(a.executable)?.inner.code.len() as i64;
        Ok(())
    }
);

fn known_output(exe: &FakeExecutable) -> Result<&TensorType, Fail> {
    exe.inner.output.as_ref().ok_or_else(|| {
        unimplemented("fake plugin: output shape unknown (the @main signature could not be read)")
    })
}

entry_fn!(
    executable_output_element_types,
    PJRT_Executable_OutputElementTypes,
    |a, _| {
        let exe = executable_ref(a.executable)?;
        known_output(exe)?;
        // The caller only reads through this pointer (it has the executable's
        // lifetime); the C type is non-const.
        a.output_types = exe.inner.output_types.as_ptr().cast_mut();
        a.num_output_types = exe.inner.output_types.len();
        Ok(())
    }
);

entry_fn!(
    executable_output_dimensions,
    PJRT_Executable_OutputDimensions,
    |a, _| {
        let exe = executable_ref(a.executable)?;
        let out = known_output(exe)?;
        a.num_outputs = 1;
        a.dims = out.dims.as_ptr();
        a.dim_sizes = exe.inner.output_dim_sizes.as_ptr();
        Ok(())
    }
);

entry_fn!(
    executable_output_memory_kinds,
    PJRT_Executable_OutputMemoryKinds,
    |a, _| {
        let exe = executable_ref(a.executable)?;
        a.num_outputs = exe.inner.output_kinds.len();
        a.memory_kinds = exe.inner.output_kinds.as_ptr();
        a.memory_kind_sizes = exe.inner.output_kind_sizes.as_ptr();
        Ok(())
    }
);

entry_fn!(
    executable_parameter_memory_kinds,
    PJRT_Executable_ParameterMemoryKinds,
    |a, _| {
        let exe = executable_ref(a.executable)?;
        if exe.inner.params.is_none() {
            return Err(unimplemented(
                "fake plugin: parameters unknown (the @main signature could not be read)",
            ));
        }
        a.num_parameters = exe.inner.param_kinds.len();
        a.memory_kinds = exe.inner.param_kinds.as_ptr();
        a.memory_kind_sizes = exe.inner.param_kind_sizes.as_ptr();
        Ok(())
    }
);

entry_fn!(
    executable_fingerprint,
    PJRT_Executable_Fingerprint,
    |a, _| {
        let exe = executable_ref(a.executable)?;
        a.executable_fingerprint = exe.inner.fingerprint.as_ptr().cast();
        a.executable_fingerprint_size = exe.inner.fingerprint.len();
        Ok(())
    }
);

/// The format `PJRT_Executable_OptimizedProgram` reports: the fake "optimizes" nothing
/// and hands back the program text it compiled.
const OPTIMIZED_FORMAT: &str = "mlir";

entry_fn!(
    executable_optimized_program,
    PJRT_Executable_OptimizedProgram,
    |a, state| {
        let exe = executable_ref(a.executable)?;
        if a.program.is_null() {
            return Err(invalid("fake plugin: null PJRT_Program"));
        }
        // SAFETY: non-null program starts with struct_size.
        let actual = unsafe { (*a.program).struct_size };
        check_size(state, "PJRT_Program", actual, sys::PJRT_Program_STRUCT_SIZE)?;
        // SAFETY: its struct_size covers every field (checked).
        let p = unsafe { &mut *a.program };
        let code = &exe.inner.code;
        p.format = OPTIMIZED_FORMAT.as_ptr().cast();
        p.format_size = OPTIMIZED_FORMAT.len();
        if p.code.is_null() {
            p.code_size = code.len();
            return Ok(());
        }
        if p.code_size < code.len() {
            return Err(invalid(format!(
                "fake plugin: code buffer holds {} bytes, the program needs {}",
                p.code_size,
                code.len()
            )));
        }
        // SAFETY: the caller provides code_size >= len writable bytes at code.
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), p.code.cast::<u8>(), code.len()) };
        p.code_size = code.len();
        Ok(())
    }
);

/// The object behind a `PJRT_ExecuteContext*` (the fake ignores its contents).
struct FakeExecuteContext {
    _unused: u8,
}

entry_fn!(
    execute_context_create,
    PJRT_ExecuteContext_Create,
    |a, _| {
        let raw = Box::into_raw(Box::new(FakeExecuteContext { _unused: 0 }));
        registry::register(raw, Kind::ExecuteContext);
        a.context = raw.cast();
        Ok(())
    }
);

entry_fn!(
    execute_context_destroy,
    PJRT_ExecuteContext_Destroy,
    |a, _| {
        let ctx = a.context;
        if ctx.is_null() {
            return Ok(());
        }
        if !registry::unregister(ctx.cast::<FakeExecuteContext>(), Kind::ExecuteContext) {
            return Err(invalid(format!(
                "fake plugin: {ctx:p} is not a live PJRT_ExecuteContext"
            )));
        }
        // SAFETY: it was live, so it came from Box::into_raw in create; now
        // unregistered, so this is the only free.
        drop(unsafe { Box::from_raw(ctx.cast::<FakeExecuteContext>()) });
        Ok(())
    }
);

/// Leading bytes of a serialized fake executable.
pub const SERIALIZED_MAGIC: &[u8] = b"RPJRT-FAKE-EXECUTABLE\x01";

/// A byte blob handed to the caller with a deleter (serialized executables and
/// serialized compile options).
struct FakeBlob {
    bytes: Vec<u8>,
}

fn new_blob(bytes: Vec<u8>) -> *mut FakeBlob {
    let raw = Box::into_raw(Box::new(FakeBlob { bytes }));
    registry::register(raw, Kind::Blob);
    raw
}

fn free_blob(blob: *mut FakeBlob) {
    if registry::unregister(blob, Kind::Blob) {
        // SAFETY: it was live, so it came from Box::into_raw in new_blob; now
        // unregistered, so this is the only free.
        drop(unsafe { Box::from_raw(blob) });
    } else {
        eprintln!("rpjrt-fake-plugin: blob deleter called on {blob:p}, which is not live");
    }
}

unsafe extern "C" fn serialized_executable_deleter(exec: *mut sys::PJRT_SerializedExecutable) {
    let _ = std::panic::catch_unwind(|| free_blob(exec.cast()));
}

unsafe extern "C" fn serialized_options_deleter(options: *mut sys::PJRT_SerializedCompileOptions) {
    let _ = std::panic::catch_unwind(|| free_blob(options.cast()));
}

fn push_part(out: &mut Vec<u8>, part: &[u8]) {
    out.extend_from_slice(&(part.len() as u64).to_le_bytes());
    out.extend_from_slice(part);
}

fn take_part<'a>(bytes: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    let len = usize::try_from(len).ok()?;
    let part = bytes.get(8..8usize.checked_add(len)?)?;
    *bytes = &bytes[8 + len..];
    Some(part)
}

entry_fn!(executable_serialize, PJRT_Executable_Serialize, |a, _| {
    let exe = executable_ref(a.executable.cast_mut())?;
    let mut bytes = SERIALIZED_MAGIC.to_vec();
    push_part(&mut bytes, exe.inner.format.as_bytes());
    push_part(&mut bytes, &exe.inner.options);
    push_part(&mut bytes, &exe.inner.code);
    let blob = new_blob(bytes);
    // SAFETY: just made; lives until the caller runs the deleter.
    let b = unsafe { &*blob };
    a.serialized_bytes = b.bytes.as_ptr().cast();
    a.serialized_bytes_size = b.bytes.len();
    a.serialized_executable = blob.cast();
    a.serialized_executable_deleter = Some(serialized_executable_deleter);
    Ok(())
});

entry_fn!(
    executable_get_compile_options,
    PJRT_Executable_GetCompileOptions,
    |a, _| {
        let exe = executable_ref(a.executable)?;
        let blob = new_blob(exe.inner.options.clone());
        // SAFETY: just made; lives until the caller runs the deleter.
        let b = unsafe { &*blob };
        a.serialized_bytes = b.bytes.as_ptr().cast();
        a.serialized_bytes_size = b.bytes.len();
        a.serialized_compile_options = blob.cast();
        a.serialized_compile_options_deleter = Some(serialized_options_deleter);
        Ok(())
    }
);

entry_fn!(
    executable_deserialize_and_load,
    PJRT_Executable_DeserializeAndLoad,
    |a, _| {
        let client = client_ref(a.client)?;
        let bytes: &[u8] = if a.serialized_executable_size == 0 {
            &[]
        } else if a.serialized_executable.is_null() {
            return Err(invalid("fake plugin: null serialized_executable"));
        } else {
            // SAFETY: serialized_executable_size bytes per the C API.
            unsafe {
                std::slice::from_raw_parts(
                    a.serialized_executable.cast::<u8>(),
                    a.serialized_executable_size,
                )
            }
        };
        let not_ours = || invalid("fake plugin: not a serialized fake executable");
        let mut rest = bytes.strip_prefix(SERIALIZED_MAGIC).ok_or_else(not_ours)?;
        let format = take_part(&mut rest).ok_or_else(not_ours)?;
        let options = take_part(&mut rest).ok_or_else(not_ours)?;
        let code = take_part(&mut rest).ok_or_else(not_ours)?;
        if !rest.is_empty() {
            return Err(not_ours());
        }
        let options: &[u8] = if a.overridden_serialized_compile_options.is_null()
            || a.overridden_serialized_compile_options_size == 0
        {
            options
        } else {
            // SAFETY: the overriding options have the given size per the C API.
            unsafe {
                std::slice::from_raw_parts(
                    a.overridden_serialized_compile_options.cast::<u8>(),
                    a.overridden_serialized_compile_options_size,
                )
            }
        };
        let format = String::from_utf8_lossy(format).into_owned();
        a.loaded_executable = build(&client.inner, &format, code.to_vec(), options)?;
        Ok(())
    }
);
