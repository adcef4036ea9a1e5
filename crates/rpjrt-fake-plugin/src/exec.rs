//! Compilation and executables. The fake executable's semantics: as many outputs as
//! `@main` declares results (one when unreadable), each a copy of its first argument (same
//! type, shape and bytes), on each device it runs on.

use std::os::raw::c_char;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rpjrt_sys as sys;

use crate::buffer::{entry_event, DELETED_MESSAGE};
use crate::client::ClientInner;
use crate::error::{invalid, unimplemented, Fail};
use crate::mlir::{parse_signature, TensorType};
use crate::named::{out_slice, out_str, read_str, slice};
use crate::proto::parse_compile_options;
use crate::registry::{self, get, Handle};

/// Text that makes `PJRT_Client_Compile` fail with INVALID_ARGUMENT.
pub const COMPILE_ERROR_MARKER: &str = "FAKE_COMPILE_ERROR";

/// Leading bytes of a serialized fake executable.
pub const SERIALIZED_MAGIC: &[u8] = b"RPJRT-FAKE-EXECUTABLE\x01";

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
    /// How many outputs each execution makes (copies of the first argument).
    num_outputs: usize,
    output_types: Vec<sys::PJRT_Buffer_Type>,
    output_dim_sizes: Vec<usize>,
    /// Every output's dimensions, one after another.
    output_dims: Vec<i64>,
    /// Memory kinds of the outputs and the parameters, with their sizes.
    kinds: Vec<*const c_char>,
    kind_sizes: Vec<usize>,
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

/// The object behind a `PJRT_ExecuteContext*` (the fake ignores its contents).
pub(crate) struct FakeExecuteContext;

/// A byte blob handed to the caller with a deleter (serialized executables and
/// serialized compile options).
pub(crate) struct FakeBlob(Vec<u8>);

handles! {
    PJRT_LoadedExecutable => FakeLoadedExecutable,
    PJRT_Executable => FakeExecutable,
    PJRT_ExecuteContext => FakeExecuteContext,
    PJRT_SerializedExecutable => FakeBlob,
    PJRT_SerializedCompileOptions => FakeBlob,
}

/// 64-bit FNV-1a.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let step = |h: u64, b: u8| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    let part = |h, p: &&[u8]| step(p.iter().fold(h, |h, b| step(h, *b)), 0xff);
    parts.iter().fold(0xcbf2_9ce4_8422_2325, part)
}

fn line_col(text: &[u8], at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    (
        line,
        at - before
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |p| p + 1)
            + 1,
    )
}

entry!(PJRT_Client_Compile, |a, state| {
    let client = get(a.client)?;
    let program = nested!(state, a.program, PJRT_Program)?;
    let program = program.ok_or_else(|| invalid("fake plugin: null PJRT_Program"))?;
    // SAFETY: per the C API, format, code and compile_options point at their sizes' bytes.
    let (format, code, options) = unsafe {
        (
            read_str(program.format, program.format_size),
            slice(program.code.cast::<u8>(), program.code_size, "program code")?,
            slice(
                a.compile_options.cast::<u8>(),
                a.compile_options_size,
                "compile_options",
            )?,
        )
    };
    a.executable = build(&client.inner, &format, code.to_vec(), options)?;
});

/// Compiles `code` for `inner`'s devices: everything after reading the arguments, shared
/// by `PJRT_Client_Compile` and `PJRT_Executable_DeserializeAndLoad`.
fn build(
    inner: &Arc<ClientInner>,
    format: &str,
    code: Vec<u8>,
    options: &[u8],
) -> Result<*mut sys::PJRT_LoadedExecutable, Fail> {
    if format != "mlir" {
        bail!("fake plugin: unsupported program format {format:?}; only \"mlir\" is accepted");
    }
    let marker = COMPILE_ERROR_MARKER.as_bytes();
    if let Some(at) = code.windows(marker.len()).position(|w| w == marker) {
        let (line, col) = line_col(&code, at);
        let what = "compilation failed as requested";
        bail!("program.mlir:{line}:{col}: error: {COMPILE_ERROR_MARKER}: {what}");
    }
    if !code.windows(4).any(|w| w == b"func") {
        bail!("fake plugin: the program has no func; expected a StableHLO module");
    }
    let opts = parse_compile_options(options)
        .map_err(|e| invalid!("fake plugin: bad CompileOptionsProto: {e}"))?;
    if opts.num_replicas == 0 || opts.num_partitions == 0 {
        bail!(
            "fake plugin: num_replicas ({}) and num_partitions ({}) must be at least 1 \
             (real plugins abort the process on this)",
            opts.num_replicas,
            opts.num_partitions
        );
    }
    let (replicas, partitions) = (opts.num_replicas as usize, opts.num_partitions as usize);
    let needed = (replicas.checked_mul(partitions))
        .ok_or_else(|| invalid("fake plugin: too many replicas x partitions"))?;
    let device_indices: Vec<usize> = match &opts.device_assignment {
        Some(da) => {
            if da.len() != partitions || da.iter().any(|c| c.len() != replicas) {
                bail!(
                    "fake plugin: device assignment is not \
                     {replicas} replicas x {partitions} partitions"
                );
            }
            let mut out = Vec::with_capacity(needed);
            for id in (0..replicas).flat_map(|r| da.iter().map(move |comp| comp[r])) {
                let i = inner
                    .devices
                    .iter()
                    .position(|d| i64::from(d.id) == id)
                    .ok_or_else(|| {
                        invalid!("fake plugin: device assignment names unknown device {id}")
                    })?;
                if out.contains(&i) {
                    bail!(
                        "fake plugin: device assignment names device {id} twice \
                         (some real plugins abort the process on this)"
                    );
                }
                out.push(i);
            }
            out
        }
        None if needed > inner.devices.len() => {
            bail!(
                "fake plugin: {needed} devices needed, the client has {}",
                inner.devices.len()
            )
        }
        None => (0..needed).collect(),
    };
    for i in &device_indices {
        inner.check_addressable(*i)?;
    }
    let sig = parse_signature(&code);
    let output = sig
        .params
        .as_ref()
        .and_then(|p| p.first().cloned())
        .flatten();
    let num_params = sig.params.as_ref().map_or(0, Vec::len);
    let num_outputs = sig.num_results.unwrap_or(1).clamp(1, 64);
    let exe = ExecInner {
        name: sig
            .module_name
            .clone()
            .unwrap_or_else(|| "fake_executable".to_string()),
        fingerprint: format!("{:016x}", fnv1a(&[format.as_bytes(), &code, options])),
        num_replicas: replicas,
        num_partitions: partitions,
        output_types: output
            .iter()
            .flat_map(|t| vec![t.ty; num_outputs])
            .collect(),
        output_dim_sizes: output
            .iter()
            .flat_map(|t| vec![t.dims.len(); num_outputs])
            .collect(),
        output_dims: output
            .iter()
            .flat_map(|t| t.dims.repeat(num_outputs))
            .collect(),
        output,
        num_outputs,
        kinds: vec![out_str(MEMORY_KIND).0; num_outputs + num_params],
        kind_sizes: vec![MEMORY_KIND.len(); num_outputs + num_params],
        params: sig.params,
        code,
        format: format.to_string(),
        options: options.to_vec(),
    };
    Ok(registry::new(FakeLoadedExecutable {
        device_ptrs: device_indices
            .iter()
            .map(|i| inner.device_ptr(*i))
            .collect(),
        client: inner.clone(),
        inner: Arc::new(exe),
        device_indices,
        deleted: AtomicBool::new(false),
    }))
}

fn describe(ty: sys::PJRT_Buffer_Type, dims: &[i64]) -> String {
    format!("type {ty} {dims:?}")
}

entry!(PJRT_LoadedExecutable_Execute, |a, state| {
    let exe = get(a.executable)?;
    if exe.deleted.load(Ordering::SeqCst) {
        let code = sys::PJRT_Error_Code_FAILED_PRECONDITION;
        return Err(Fail::new(
            code,
            "fake plugin: the executable has been deleted",
        ));
    }
    nested!(state, a.options, PJRT_ExecuteOptions)?;
    let run_on: Vec<usize> = if a.execute_device.is_null() {
        exe.device_indices.clone()
    } else {
        let d = exe
            .client
            .device_index(a.execute_device)
            .filter(|d| exe.device_indices.contains(d));
        vec![d.ok_or_else(|| {
            invalid("fake plugin: execute_device is not one of the executable's devices")
        })?]
    };
    if a.num_devices != run_on.len() {
        bail!(
            "Attempted to execute with {} argument lists when local device count is {} \
             (total replica count: {}, partition count: {})",
            a.num_devices,
            run_on.len(),
            exe.inner.num_replicas,
            exe.inner.num_partitions
        );
    }
    if let Some(params) = exe.inner.params.as_ref().filter(|p| p.len() != a.num_args) {
        bail!(
            "Execution supplied {} buffers but compiled program expected {} buffers",
            a.num_args,
            params.len()
        );
    }
    if a.num_args == 0 {
        bail!(
            "fake plugin: the fake executable returns a copy of its first argument, \
             so it needs at least one"
        );
    }
    if a.argument_lists.is_null() || a.output_lists.is_null() {
        bail!("fake plugin: null argument_lists or output_lists");
    }
    // Check every argument before producing anything.
    let mut firsts = Vec::with_capacity(run_on.len());
    for (slot, &device) in run_on.iter().enumerate() {
        // SAFETY: argument_lists and output_lists have num_devices lists (checked to be
        // run_on.len()), each argument list num_args buffers.
        let (list, out) = unsafe { (*a.argument_lists.add(slot), *a.output_lists.add(slot)) };
        if list.is_null() {
            bail!("fake plugin: argument list {slot} is null");
        }
        // SAFETY: as above.
        let args = unsafe { std::slice::from_raw_parts(list, a.num_args) };
        for (i, &arg) in args.iter().enumerate() {
            let b = get(arg)?;
            if b.is_deleted() {
                bail!("Argument {i} to replica {slot}: {DELETED_MESSAGE}");
            }
            if !Arc::ptr_eq(&b.client, &exe.client) {
                bail!("fake plugin: argument {i} belongs to another client");
            }
            if b.device != device {
                let (on, want) = (
                    exe.client.device_name(b.device),
                    exe.client.device_name(device),
                );
                bail!(
                    "Buffer passed to Execute() as argument {i} to replica {slot} is on device \
                     {on}, but replica is assigned to device {want}."
                );
            }
            if let Some(Some(want)) = exe.inner.params.as_ref().and_then(|p| p.get(i)) {
                if want.ty != b.ty || want.dims != b.dims {
                    let (want, got) = (describe(want.ty, &want.dims), describe(b.ty, &b.dims));
                    bail!(
                        "Argument does not match host shape or layout of computation \
                         parameter {i}: want {want}, got {got}"
                    );
                }
            }
        }
        if out.is_null() {
            bail!("fake plugin: output list {slot} is null");
        }
        firsts.push(get(args[0])?);
    }
    // Make every output before handing any out, so a failed allocation leaks nothing.
    let n = exe.inner.num_outputs;
    let mut outs = Vec::with_capacity(run_on.len() * n);
    for (&device, first) in run_on.iter().zip(firsts) {
        for _ in 0..n {
            match first.copy_to(exe.client.default_memory_index(device)) {
                Ok(out) => outs.push(out),
                Err(e) => {
                    outs.into_iter().for_each(|b| drop(registry::take(b)));
                    return Err(e);
                }
            }
        }
    }
    for (i, out) in outs.into_iter().enumerate() {
        let (slot, k) = (i / n, i % n);
        // SAFETY: output_lists[slot] has room for the executable's n outputs.
        unsafe { *(*a.output_lists.add(slot)).add(k) = out };
        if k + 1 < n {
            continue;
        }
        if !a.device_complete_events.is_null() {
            let event = entry_event(state, "PJRT_LoadedExecutable_Execute");
            // SAFETY: device_complete_events has num_devices slots when non-null.
            unsafe { *a.device_complete_events.add(slot) = event };
        }
    }
});

entry!(PJRT_LoadedExecutable_Destroy, |a, _| {
    registry::destroy(a.executable)?
});

entry!(PJRT_LoadedExecutable_GetExecutable, |a, _| {
    let inner = get(a.loaded_executable)?.inner.clone();
    a.executable = registry::new(FakeExecutable { inner });
});

entry!(PJRT_LoadedExecutable_AddressableDevices, |a, _| {
    let exe = get(a.executable)?;
    (a.addressable_devices, a.num_addressable_devices) = out_slice(&exe.device_ptrs);
});

entry!(PJRT_LoadedExecutable_Delete, |a, _| {
    get(a.executable)?.deleted.store(true, Ordering::SeqCst);
});

entry!(PJRT_LoadedExecutable_Fingerprint, |a, _| {
    let exe = &get(a.executable)?.inner;
    (a.executable_fingerprint, a.executable_fingerprint_size) = out_str(&exe.fingerprint);
});

/// The compiled executable behind `exe`.
fn exec<'a>(exe: *const sys::PJRT_Executable) -> Result<&'a ExecInner, Fail> {
    Ok(&get(exe.cast_mut())?.inner)
}

entry!(PJRT_Executable_Destroy, |a, _| registry::destroy(
    a.executable
)?);

entry!(PJRT_Executable_Name, |a, _| {
    (a.executable_name, a.executable_name_size) = out_str(&exec(a.executable)?.name);
});

entry!(PJRT_Executable_NumReplicas, |a, _| {
    a.num_replicas = exec(a.executable)?.num_replicas;
});

entry!(PJRT_Executable_NumPartitions, |a, _| {
    a.num_partitions = exec(a.executable)?.num_partitions;
});

entry!(PJRT_Executable_NumOutputs, |a, _| {
    a.num_outputs = exec(a.executable)?.num_outputs;
});

fn known_output(exe: &ExecInner) -> Result<&TensorType, Fail> {
    (exe.output.as_ref()).ok_or_else(|| {
        unimplemented("fake plugin: output shape unknown (the @main signature could not be read)")
    })
}

entry!(PJRT_Executable_OutputElementTypes, |a, _| {
    let exe = exec(a.executable)?;
    known_output(exe)?;
    // The caller only reads through this pointer (it has the executable's lifetime); the
    // C type is non-const.
    a.output_types = exe.output_types.as_ptr().cast_mut();
    a.num_output_types = exe.output_types.len();
});

entry!(PJRT_Executable_OutputDimensions, |a, _| {
    let exe = exec(a.executable)?;
    known_output(exe)?;
    (a.num_outputs, a.dims, a.dim_sizes) = (
        exe.num_outputs,
        exe.output_dims.as_ptr(),
        exe.output_dim_sizes.as_ptr(),
    );
});

entry!(PJRT_Executable_OutputMemoryKinds, |a, _| {
    let exe = exec(a.executable)?;
    (a.memory_kinds, a.num_outputs) = out_slice(&exe.kinds[..exe.num_outputs]);
    a.memory_kind_sizes = exe.kind_sizes.as_ptr();
});

entry!(PJRT_Executable_ParameterMemoryKinds, |a, _| {
    let exe = exec(a.executable)?;
    if exe.params.is_none() {
        return Err(unimplemented(
            "fake plugin: parameters unknown (the @main signature could not be read)",
        ));
    }
    (a.memory_kinds, a.num_parameters) = out_slice(&exe.kinds[exe.num_outputs..]);
    a.memory_kind_sizes = exe.kind_sizes[exe.num_outputs..].as_ptr();
});

entry!(PJRT_Executable_Fingerprint, |a, _| {
    let exe = exec(a.executable)?;
    (a.executable_fingerprint, a.executable_fingerprint_size) = out_str(&exe.fingerprint);
});

entry!(PJRT_Executable_OptimizedProgram, |a, state| {
    // The fake "optimizes" nothing and hands back the program text it compiled.
    let code = &exec(a.executable)?.code;
    nested!(state, a.program, PJRT_Program)?
        .ok_or_else(|| invalid("fake plugin: null PJRT_Program"))?;
    // SAFETY: non-null, and its struct_size covers every field (checked).
    let p = unsafe { &mut *a.program };
    (p.format, p.format_size) = out_str("mlir");
    if !p.code.is_null() && p.code_size < code.len() {
        bail!(
            "fake plugin: code buffer holds {} bytes, the program needs {}",
            p.code_size,
            code.len()
        );
    }
    if !p.code.is_null() {
        // SAFETY: the caller provides code_size >= len writable bytes at code.
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), p.code.cast::<u8>(), code.len()) };
    }
    p.code_size = code.len();
});

entry!(PJRT_ExecuteContext_Create, |a, _| {
    a.context = registry::new(FakeExecuteContext);
});

entry!(PJRT_ExecuteContext_Destroy, |a, _| {
    registry::destroy(a.context)?
});

/// Hands `bytes` out as a blob, returning (bytes, size, blob) for the args.
fn new_blob<H: Handle<Obj = FakeBlob>>(bytes: Vec<u8>) -> (*const c_char, usize, *mut H) {
    let blob = registry::new::<H>(FakeBlob(bytes));
    // SAFETY: just made; it lives until the caller runs the deleter.
    let (ptr, len) = out_slice(unsafe { &(*blob.cast::<FakeBlob>()).0 });
    (ptr.cast(), len, blob)
}

unsafe extern "C" fn free_blob<H: Handle<Obj = FakeBlob>>(blob: *mut H) {
    let addr = blob as usize;
    let _ = std::panic::catch_unwind(|| {
        if registry::take(addr as *mut H).is_none() {
            eprintln!("rpjrt-fake-plugin: blob deleter called on {addr:#x}, which is not live");
        }
    });
}

entry!(PJRT_Executable_Serialize, |a, _| {
    let exe = exec(a.executable)?;
    let mut bytes = SERIALIZED_MAGIC.to_vec();
    for part in [exe.format.as_bytes(), &exe.options, &exe.code] {
        bytes.extend_from_slice(&(part.len() as u64).to_le_bytes());
        bytes.extend_from_slice(part);
    }
    (
        a.serialized_bytes,
        a.serialized_bytes_size,
        a.serialized_executable,
    ) = new_blob(bytes);
    a.serialized_executable_deleter = Some(free_blob);
});

entry!(PJRT_Executable_GetCompileOptions, |a, _| {
    let options = exec(a.executable)?.options.clone();
    (
        a.serialized_bytes,
        a.serialized_bytes_size,
        a.serialized_compile_options,
    ) = new_blob(options);
    a.serialized_compile_options_deleter = Some(free_blob);
});

fn take_part<'a>(bytes: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = usize::try_from(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)).ok()?;
    let part = bytes.get(8..8usize.checked_add(len)?)?;
    *bytes = &bytes[8 + len..];
    Some(part)
}

entry!(PJRT_Executable_DeserializeAndLoad, |a, _| {
    let client = get(a.client)?;
    let (ptr, len) = (
        a.serialized_executable.cast::<u8>(),
        a.serialized_executable_size,
    );
    // SAFETY: serialized_executable_size bytes per the C API.
    let bytes = unsafe { slice(ptr, len, "serialized_executable") }?;
    let not_ours = || invalid("fake plugin: not a serialized fake executable");
    let mut rest = bytes.strip_prefix(SERIALIZED_MAGIC).ok_or_else(not_ours)?;
    let parts: Vec<&[u8]> = (0..3).map_while(|_| take_part(&mut rest)).collect();
    let [format, options, code] = parts[..] else {
        return Err(not_ours());
    };
    if !rest.is_empty() {
        return Err(not_ours());
    }
    let (ptr, len) = (
        a.overridden_serialized_compile_options,
        a.overridden_serialized_compile_options_size,
    );
    let options = match ptr.is_null() || len == 0 {
        true => options,
        // SAFETY: the overriding options have the given size per the C API.
        false => unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) },
    };
    a.loaded_executable = build(
        &client.inner,
        &String::from_utf8_lossy(format),
        code.to_vec(),
        options,
    )?;
});
