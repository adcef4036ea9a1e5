//! The conformance checks, as data: name, group, description, function.

use serde_json::json;

use super::{Check, CheckFn, Ctx, Verdict};
use rpjrt::{
    ArraySpec, Buffer, ClientOptions, CompileOptions, ElementType, ExecuteOptions, Program, Result,
    Value,
};

// Copies of rpjrt's test fixtures (crates/rpjrt/tests/fixtures), kept inside this package so
// that it builds on its own once published; tests/programs.rs checks that they match.
const MUL_ADD_TEXT: &[u8] = include_bytes!("../programs/mul_add.mlir");
const MUL_ADD_BYTECODE: &[u8] = include_bytes!("../programs/mul_add.mlirbc");
const MUL_ADD_PORTABLE: &[u8] = include_bytes!("../programs/mul_add.jax_export.mlirbc");
const MUL_ADD_HLO: &[u8] = include_bytes!("../programs/mul_add.hlo.pb");

const BAD_PROGRAM: &str = "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  \
    %0 = stablehlo.add %a, %undefined_value : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n";

fn check(name: &str, description: &str, run: CheckFn) -> Check {
    Check {
        name: name.to_string(),
        group: name.split('.').next().unwrap_or(name).to_string(),
        description: description.to_string(),
        run,
    }
}

/// Every check, in run order.
pub fn all() -> Vec<Check> {
    let mut v = vec![
        check(
            "api.version",
            "the PJRT version is one rpjrt can talk to (0.57 or newer)",
            api_version,
        ),
        check(
            "api.table_size",
            "PJRT_Api's size matches the entries of its version",
            api_table_size,
        ),
        check(
            crate::NULL_ENTRIES_CHECK,
            "which entries inside the table are left null",
            api_null_entries,
        ),
        check(
            "api.attributes",
            "plugin attributes are readable and well-formed",
            api_attributes,
        ),
        check(
            "api.extensions",
            "the extension chain is walkable and each has a sane size",
            api_extensions,
        ),
        check(
            "client.create",
            "a client is created with no options",
            client_create,
        ),
        check(
            "client.struct_sizes",
            "the plugin accepts rpjrt's (newest-layout) argument structs",
            client_struct_sizes,
        ),
        check(
            "client.create_options",
            "typed create options are accepted or refused with an error",
            client_create_options,
        ),
        check(
            "client.platform",
            "platform name and version are non-empty",
            client_platform,
        ),
        check(
            "devices.list",
            "devices exist, with unique ids; addressable ones are listed",
            devices_list,
        ),
        check(
            "devices.attributes",
            "each device has a description, kind and attributes",
            devices_attributes,
        ),
        check(
            "devices.memories",
            "each device has a default memory among its memories",
            devices_memories,
        ),
        check(
            "devices.memory_stats",
            "PJRT_Device_MemoryStats reports allocator figures",
            devices_memory_stats,
        ),
        check(
            "compile.text",
            "StableHLO text compiles and computes a*b+1",
            compile_text,
        ),
        check(
            "compile.bytecode",
            "MLIR bytecode compiles and computes a*b+1",
            compile_bytecode,
        ),
        check(
            "compile.portable",
            "a jax.export portable artifact compiles and computes a*b+1",
            compile_portable,
        ),
        check(
            "compile.hlo",
            "a serialized HloModuleProto compiles and computes a*b+1",
            compile_hlo,
        ),
        check(
            "compile.diagnostics",
            "a broken program is refused with a message, not a crash",
            compile_diagnostics,
        ),
        check(
            "buffers.zero_size",
            "buffers with a zero dimension round-trip",
            buffers_zero_size,
        ),
        check("buffers.scalar", "0-d buffers round-trip", buffers_scalar),
        check(
            "buffers.layout",
            "a buffer reports its memory layout",
            buffers_layout,
        ),
        check(
            "buffers.events",
            "ready events complete and report readiness",
            buffers_events,
        ),
        check(
            "buffers.copy_to_device",
            "a buffer copies to another device",
            buffers_copy_to_device,
        ),
        check(
            "buffers.memory_kinds",
            "buffers can be placed in each memory of a device",
            buffers_memory_kinds,
        ),
        check(
            "buffers.delete",
            "a deleted buffer is refused, not a crash",
            buffers_delete,
        ),
        check(
            "execute.single",
            "one device: outputs have the declared types and values",
            execute_single,
        ),
        check(
            "execute.multi_device",
            "two replicas on two devices run together",
            execute_multi_device,
        ),
        check(
            "execute.donation",
            "a donated input is consumed and the result is right",
            execute_donation,
        ),
        check(
            "execute.events",
            "completion events complete",
            execute_events,
        ),
        check(
            "execute.wrong_arguments",
            "a wrong argument is refused, not a crash",
            execute_wrong_arguments,
        ),
        check(
            "executable.fingerprint",
            "an executable reports a fingerprint",
            executable_fingerprint,
        ),
        check(
            "executable.signature",
            "the optimized program gives the parameter types",
            executable_signature,
        ),
        check(
            "executable.serialize",
            "an executable serializes and loads back",
            executable_serialize,
        ),
        check(
            "executable.cost_analysis",
            "an executable reports its cost analysis",
            executable_cost_analysis,
        ),
        check(
            "executable.memory_stats",
            "an executable reports its compiled memory statistics",
            executable_memory_stats,
        ),
        check(
            "topology.describe",
            "the plugin describes its topology",
            topology_describe,
        ),
        check(
            "ext.layouts",
            "the Layouts extension is present",
            ext_layouts,
        ),
        check(
            "ext.memory_descriptions",
            "the MemoryDescriptions extension is present",
            ext_memory_descriptions,
        ),
        check(
            "ext.phase_compile",
            "the PhaseCompile extension's functions are present",
            ext_phase_compile,
        ),
        check(
            "ext.ffi",
            "the FFI extension is present and takes a handler registration",
            ext_ffi,
        ),
    ];
    for &t in ElementType::ALL {
        if t.bit_width() == 0 {
            continue; // token: no host data
        }
        v.push(Check {
            name: format!("buffers.roundtrip.{}", t.name()),
            group: "buffers".into(),
            description: format!(
                "{} data goes to the device and comes back unchanged",
                t.name()
            ),
            run: roundtrip_fn(t),
        });
    }
    v
}

/// Maps an element type to its round-trip check (a fn pointer per type).
fn roundtrip_fn(t: ElementType) -> CheckFn {
    macro_rules! table {
        ($($v:ident),*) => {
            match t {
                $(ElementType::$v => |ctx| roundtrip(ctx, ElementType::$v),)*
                _ => |_ctx| Ok(Verdict::unsupported_in_rpjrt("no round-trip check for this type")),
            }
        };
    }
    table!(
        Pred,
        S8,
        S16,
        S32,
        S64,
        U8,
        U16,
        U32,
        U64,
        F16,
        F32,
        F64,
        BF16,
        C64,
        C128,
        F8E5M2,
        F8E4M3FN,
        F8E4M3B11FNUZ,
        F8E5M2FNUZ,
        F8E4M3FNUZ,
        S4,
        U4,
        S2,
        U2,
        F8E4M3,
        F8E3M4,
        F8E8M0FNU,
        F4E2M1FN,
        S1,
        U1,
        F6E2M3FN,
        F6E3M2FN
    )
}

fn bytes_of(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn mul_add_expected(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.iter().zip(b).map(|(x, y)| x * y + 1.0).collect()
}

fn run_mul_add(ctx: &mut Ctx, program: Program) -> Result<Verdict> {
    let client = ctx.client()?;
    let exe = client.compile(&program, &CompileOptions::default())?;
    let dev = client.default_device()?;
    let a: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..8).map(|i| 0.5 * i as f32 - 1.0).collect();
    let x = client.buffer_from_slice(&a, &[8], &dev)?;
    let y = client.buffer_from_slice(&b, &[8], &dev)?;
    let out = exe.execute(&[&x, &y])?;
    if out.len() != 1 {
        return Ok(Verdict::fail(format!("{} outputs, expected 1", out.len())));
    }
    let got = out[0].to_vec_of::<f32>()?;
    let want = mul_add_expected(&a, &b);
    if got != want {
        return Ok(Verdict::fail(format!("got {got:?}, expected {want:?}")));
    }
    Ok(Verdict::pass().fact(
        "outputs",
        json!(exe
            .outputs()
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()),
    ))
}

fn api_version(ctx: &mut Ctx) -> Result<Verdict> {
    let v = ctx.plugin.version();
    // The version is read from a PJRT_Api_Version struct whose own size must say it holds
    // the version fields; a plugin that leaves it 0 (or short) has not filled it in.
    let size = ctx.plugin.version_struct_size();
    let want = rpjrt_sys::PJRT_Api_Version_STRUCT_SIZE;
    let verdict = if size < want {
        Verdict::fail(format!(
            "pjrt_api_version.struct_size is {size}, less than the {want} bytes of a \
             PJRT_Api_Version: the version it reports ({v}) is not vouched for"
        ))
    } else {
        Verdict::pass()
    };
    Ok(verdict
        .fact("pjrt_version", v.to_string())
        .fact("version_struct_size", size)
        .fact(
            "newer_than_rpjrt_layout",
            v > rpjrt::Plugin::rpjrt_layout_version(),
        ))
}

fn api_table_size(ctx: &mut Ctx) -> Result<Verdict> {
    let p = &ctx.plugin;
    let minor = p.version().minor;
    let expected = rpjrt_sys::PJRT_API_ENTRIES
        .iter()
        .filter(|e| (e.since_minor as i32) <= minor)
        .count();
    let slots = p.table_slots();
    let last = rpjrt_sys::PJRT_API_ENTRIES
        .get(slots.wrapping_sub(1))
        .map_or("(beyond rpjrt's table)", |e| e.name);
    // What the plugin's struct_size said: rpjrt's loader clamps it to the slots of the
    // plugin's version (table_size), so the claim is read from the loader's record.
    let claimed = rpjrt_raw::table_claim(p.path()).map_or(p.table_size(), |c| c.claimed);
    let v = Verdict::pass()
        .fact("last_entry", last)
        .fact("table_size", p.table_size())
        .fact("claimed_table_size", claimed)
        .fact("table_slots", slots)
        .fact("expected_slots_at_version", expected);
    let header = std::mem::offset_of!(rpjrt_sys::PJRT_Api, PJRT_Error_Destroy);
    let slot = std::mem::size_of::<usize>();
    if claimed < header || !(claimed - header).is_multiple_of(slot) {
        return Ok(v.into_fail(format!(
            "the table claims {claimed} bytes (PJRT_Api.struct_size), which is not the \
                 {header}-byte header plus whole {slot}-byte slots"
        )));
    }
    let claimed_slots = (claimed - header) / slot;
    // A table of a newer version than rpjrt knows is longer than rpjrt's list, and right;
    // one longer than its own version's is not: its extra slots hold no functions.
    let newer = minor > rpjrt::Plugin::rpjrt_layout_version().minor;
    if claimed_slots > expected && !newer {
        return Ok(v.into_fail(format!(
            "the table claims {claimed} bytes ({claimed_slots} slots), but PJRT {} has \
             {expected} slots ({} bytes): calling past them would jump to whatever follows \
             the table (rpjrt uses only the first {expected})",
            p.version(),
            header + expected * slot
        )));
    }
    if slots < expected {
        return Ok(Verdict::fail(format!(
            "PJRT {} has {expected} entries, but the table holds only {slots}",
            p.version()
        ))
        .fact("table_slots", slots));
    }
    Ok(v)
}

fn api_null_entries(ctx: &mut Ctx) -> Result<Verdict> {
    let p = &ctx.plugin;
    let n = p.table_slots().min(rpjrt_sys::PJRT_API_ENTRIES.len());
    let nulls: Vec<&str> = rpjrt_sys::PJRT_API_ENTRIES[..n]
        .iter()
        .filter(|e| !p.has_entry(e.name))
        .map(|e| e.name)
        .collect();
    // The entries every plugin needs may not be left out: not null, and inside the table.
    let missing: Vec<&str> = super::REQUIRED_ENTRIES
        .iter()
        .copied()
        .filter(|name| !p.has_entry(name))
        .collect();
    let v = if missing.is_empty() {
        Verdict::pass().detail(format!("{} of {n} entries are null", nulls.len()))
    } else {
        Verdict::fail(format!(
            "{} {} required of every PJRT plugin, but the plugin's function table leaves {} \
             out",
            missing.join(", "),
            if missing.len() == 1 { "is" } else { "are" },
            if missing.len() == 1 { "it" } else { "them" },
        ))
        .fact("missing_required_entries", json!(missing))
    };
    Ok(v.fact("null_entries", json!(nulls)))
}

fn api_attributes(ctx: &mut Ctx) -> Result<Verdict> {
    let p = &ctx.plugin;
    if let Some(e) = p.attributes_error() {
        // No attributes because the call failed is a defect, not a plugin without any.
        return Ok(Verdict::fail(format!("the attributes cannot be read: {e}")));
    }
    let mut v = Verdict::pass().fact("count", p.attributes().len());
    for (k, val) in p.attributes() {
        if k.is_empty() {
            return Ok(Verdict::fail("an attribute has an empty name"));
        }
        v = v.fact(&format!("attr.{k}"), val.to_string());
    }
    if let (Some(cur), Some(min)) = (p.stablehlo_current_version(), p.stablehlo_minimum_version()) {
        if cur < min {
            return Ok(Verdict::fail(format!(
                "stablehlo_current_version {cur:?} is older than stablehlo_minimum_version {min:?}"
            )));
        }
    }
    Ok(v)
}

fn api_extensions(ctx: &mut Ctx) -> Result<Verdict> {
    let exts = ctx.plugin.extensions().all();
    let mut names = Vec::new();
    for e in exts {
        if e.struct_size < 24 {
            return Ok(Verdict::fail(format!(
                "extension {} reports {} bytes, less than the 24-byte base",
                e.name, e.struct_size
            )));
        }
        names.push(format!("{}:{}", e.name, e.struct_size));
    }
    names.sort();
    Ok(Verdict::pass().fact("extensions", json!(names)))
}

fn client_create(ctx: &mut Ctx) -> Result<Verdict> {
    let client = ctx.client()?;
    Ok(Verdict::pass().fact("process_index", client.process_index()?))
}

fn client_struct_sizes(ctx: &mut Ctx) -> Result<Verdict> {
    // rpjrt always sends its newest struct sizes; a plugin must read the prefix it knows.
    let ours = rpjrt::Plugin::rpjrt_layout_version();
    let theirs = ctx.plugin.version();
    let client = ctx.client()?;
    client.devices()?;
    let d = client.default_device()?;
    let b = client.buffer_from_slice(&[1.0f32, 2.0], &[2], &d)?;
    b.to_vec()?;
    let relation = if theirs < ours {
        "older plugin reads the prefix of larger structs"
    } else if theirs > ours {
        "newer plugin accepts rpjrt's smaller structs"
    } else {
        "same layout"
    };
    Ok(Verdict::pass().detail(relation).fact("relation", relation))
}

fn client_create_options(ctx: &mut Ctx) -> Result<Verdict> {
    // The default client first: without one, this check is blocked, not a failure.
    let platform = ctx.client()?.platform_name()?;
    let opts = ClientOptions::new().set("rpjrt_conform_unknown_option", Value::Int64(1));
    let unknown = match rpjrt::Client::new(&ctx.plugin, &opts) {
        Ok(_) => "accepted silently",
        Err(e)
            if e.code() == rpjrt::Code::InvalidArgument
                || e.code() == rpjrt::Code::NotFound
                || e.code() == rpjrt::Code::Unimplemented =>
        {
            "refused"
        }
        Err(e) => {
            return Ok(Verdict::fail(format!(
                "an unknown option gave an unexpected error: {e}"
            )))
        }
    };
    let mut v = Verdict::pass().fact("unknown_option", unknown);
    if platform == "cpu" {
        let o = ClientOptions::new().set("cpu_device_count", Value::Int64(2));
        let c = rpjrt::Client::new(&ctx.plugin, &o)?;
        let n = c.devices()?.len();
        if n != 2 {
            return Ok(Verdict::fail(format!(
                "cpu_device_count=2 gave {n} devices"
            )));
        }
        v = v.fact("cpu_device_count", "honoured");
    }
    Ok(v)
}

fn client_platform(ctx: &mut Ctx) -> Result<Verdict> {
    let c = ctx.client()?;
    let (name, version) = (c.platform_name()?, c.platform_version()?);
    if name.is_empty() {
        return Ok(Verdict::fail("empty platform name"));
    }
    Ok(Verdict::pass()
        .fact("platform", name)
        .fact("platform_version", version))
}

fn devices_list(ctx: &mut Ctx) -> Result<Verdict> {
    let c = ctx.client()?;
    let all = c.devices()?;
    let addr = c.addressable_devices()?;
    if all.is_empty() || addr.is_empty() {
        return Ok(Verdict::fail("no devices"));
    }
    let mut ids: Vec<i32> = all.iter().map(|d| d.id()).collect();
    ids.sort();
    ids.dedup();
    if ids.len() != all.len() {
        return Ok(Verdict::fail("two devices share an id"));
    }
    if addr.iter().any(|d| !d.is_addressable()) {
        return Ok(Verdict::fail(
            "an addressable device says it is not addressable",
        ));
    }
    Ok(Verdict::pass()
        .fact("devices", all.len())
        .fact("addressable", addr.len()))
}

fn devices_attributes(ctx: &mut Ctx) -> Result<Verdict> {
    let c = ctx.client()?;
    let mut kinds = Vec::new();
    let mut attrs = Vec::new();
    for d in c.devices()? {
        if d.kind().is_empty() {
            return Ok(Verdict::fail(format!(
                "device {} has an empty kind",
                d.id()
            )));
        }
        kinds.push(d.kind().to_string());
        for (k, _) in d.attributes() {
            attrs.push(k.clone());
        }
    }
    kinds.sort();
    kinds.dedup();
    attrs.sort();
    attrs.dedup();
    Ok(Verdict::pass()
        .fact("kinds", json!(kinds))
        .fact("attribute_names", json!(attrs)))
}

fn devices_memories(ctx: &mut Ctx) -> Result<Verdict> {
    let c = ctx.client()?;
    let mut kinds = Vec::new();
    for d in c.addressable_devices()? {
        let default = d.default_memory()?;
        let mems = d.addressable_memories()?;
        if !mems.contains(&default) {
            return Ok(Verdict::fail(format!(
                "device {}'s default memory is not among its memories",
                d.id()
            )));
        }
        for m in mems {
            kinds.push(m.kind().to_string());
        }
    }
    kinds.sort();
    kinds.dedup();
    Ok(Verdict::pass().fact("memory_kinds", json!(kinds)))
}

fn devices_memory_stats(ctx: &mut Ctx) -> Result<Verdict> {
    let d = ctx.client()?.default_device()?;
    let s = rpjrt::diagnostics::memory_stats(&d)?;
    Ok(Verdict::pass()
        .detail(s.to_string())
        .fact("limit_reported", s.bytes_limit.is_some())
        .fact("peak_reported", s.peak_bytes_in_use.is_some()))
}

fn compile_text(ctx: &mut Ctx) -> Result<Verdict> {
    run_mul_add(ctx, Program::mlir(MUL_ADD_TEXT))
}

fn compile_bytecode(ctx: &mut Ctx) -> Result<Verdict> {
    run_mul_add(ctx, Program::mlir(MUL_ADD_BYTECODE))
}

fn compile_portable(ctx: &mut Ctx) -> Result<Verdict> {
    run_mul_add(ctx, Program::mlir(MUL_ADD_PORTABLE))
}

fn compile_hlo(ctx: &mut Ctx) -> Result<Verdict> {
    run_mul_add(ctx, Program::hlo(MUL_ADD_HLO))
}

fn compile_diagnostics(ctx: &mut Ctx) -> Result<Verdict> {
    let c = ctx.client()?;
    // The control: the same kind of program without the mistake compiles. A plugin that
    // refuses every program (UNIMPLEMENTED, or broken) proves nothing by refusing this one.
    if let Err(e) = c.compile(&Program::mlir(MUL_ADD_TEXT), &CompileOptions::default()) {
        let v = Verdict::from_error(&e);
        let required = v.facts.contains_key("missing_required_entry");
        return Ok(if v.outcome == Some(super::Outcome::Fail) && !required {
            Verdict::fail(format!("a correct program does not compile either: {e}"))
        } else {
            v
        });
    }
    match c.compile(&Program::mlir(BAD_PROGRAM), &CompileOptions::default()) {
        Ok(_) => Ok(Verdict::fail("a program using an undefined value compiled")),
        Err(e) => Ok(diagnostic_verdict(&e)),
    }
}

/// The verdict on the error that refused [`BAD_PROGRAM`]: a pass only for a compile
/// diagnostic, an error that says the program is invalid (INVALID_ARGUMENT) or whose
/// message points at the mistake (its line, or the undefined value). An UNIMPLEMENTED
/// answer is no diagnostic ([`Verdict::from_error`]: unsupported, or a failure for a
/// required entry), nor is any other error that does not mention the program.
fn diagnostic_verdict(e: &rpjrt::Error) -> Verdict {
    if e.code() == rpjrt::Code::Unimplemented {
        return Verdict::from_error(e);
    }
    let msg = e.to_string();
    let located = msg.contains("undefined_value")
        || msg.contains("undeclared")
        || msg.contains("loc(")
        || msg.contains(":2:");
    let first_line = msg.lines().next().unwrap_or("").to_string();
    if e.code() != rpjrt::Code::InvalidArgument && !located {
        return Verdict::fail(format!(
            "the broken program was refused with {}, not INVALID_ARGUMENT, and the message \
             does not point at the mistake: {first_line}",
            e.code().name()
        ))
        .fact("code", e.code().name());
    }
    Verdict::pass()
        .detail(first_line)
        .fact("code", e.code().name())
        .fact("message_has_location", located)
}

/// The elements of the round-trip checks: a 4x4 array.
const ROUNDTRIP_DIMS: [i64; 2] = [4, 4];

/// The dense host bytes a round trip of `t` sends: 16 elements of valid values, not all
/// zero. A sub-byte type gets every value it can represent (element `i` holds bit
/// pattern `i mod 2^bits`: all 16 of a 4-bit type, each of a 2- or 1-bit one 4 or 8
/// times), packed as rpjrt packs (`pack_sub_byte`), so that a plugin that drops, reorders
/// or zeroes the packed elements is caught.
fn roundtrip_data(t: ElementType) -> Result<Vec<u8>> {
    let n = ROUNDTRIP_DIMS.iter().product::<i64>() as usize;
    if t.is_sub_byte() {
        let values = 1usize << t.bit_width();
        let unpacked: Vec<u8> = (0..n).map(|i| (i % values) as u8).collect();
        return Ok(rpjrt::pack_sub_byte(t, &unpacked));
    }
    let bytes = t.dense_byte_size(n)?;
    // A pattern of valid values: for bool, stay inside its range.
    Ok((0..bytes)
        .map(|i| match t {
            ElementType::Pred => (i % 2) as u8,
            _ => (i * 7 % 61) as u8,
        })
        .collect())
}

/// What differs between the bytes sent and those that came back, element by element
/// (unpacked, for a sub-byte type).
fn roundtrip_difference(t: ElementType, sent: &[u8], back: &[u8]) -> String {
    if sent.len() != back.len() {
        return format!(
            "{} bytes came back where {} were sent",
            back.len(),
            sent.len()
        );
    }
    let (width, n) = match t.byte_width() {
        Some(w) => (w, sent.len() / w.max(1)),
        None => (1, ROUNDTRIP_DIMS.iter().product::<i64>() as usize),
    };
    let elements = |bytes: &[u8]| -> Vec<Vec<u8>> {
        if t.is_sub_byte() {
            rpjrt::unpack_sub_byte(t, bytes, n)
                .into_iter()
                .map(|b| vec![b])
                .collect()
        } else {
            bytes.chunks(width).map(<[u8]>::to_vec).collect()
        }
    };
    let (a, b) = (elements(sent), elements(back));
    let differ: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
    match differ.first() {
        Some(&i) => format!(
            "{} of {} elements came back changed; the first, element {i}, was sent as {:02x?} \
             and came back as {:02x?}",
            differ.len(),
            a.len(),
            a[i],
            b[i]
        ),
        None => "the bytes that came back differ".into(),
    }
}

fn roundtrip(ctx: &mut Ctx, t: ElementType) -> Result<Verdict> {
    let c = ctx.client()?;
    let d = c.default_device()?;
    let data = roundtrip_data(t)?;
    let b = c.buffer_from_host(&data, t, &ROUNDTRIP_DIMS, None, &d, None)?;
    let back = b.to_vec()?;
    if back != data {
        return Ok(Verdict::fail(roundtrip_difference(t, &data, &back)));
    }
    if b.element_type() != t || b.dims() != ROUNDTRIP_DIMS {
        return Ok(Verdict::fail(format!(
            "the buffer says {}{:?}",
            b.element_type(),
            b.dims()
        )));
    }
    Ok(Verdict::pass())
}

fn buffers_zero_size(ctx: &mut Ctx) -> Result<Verdict> {
    let c = ctx.client()?;
    let d = c.default_device()?;
    for dims in [&[0i64][..], &[2, 0, 3]] {
        let b = c.buffer_from_host(&[], ElementType::F32, dims, None, &d, None)?;
        if !b.to_vec()?.is_empty() || b.dims() != dims {
            return Ok(Verdict::fail(format!("zero-size {dims:?} came back wrong")));
        }
    }
    Ok(Verdict::pass())
}

fn buffers_scalar(ctx: &mut Ctx) -> Result<Verdict> {
    let c = ctx.client()?;
    let d = c.default_device()?;
    let b = c.buffer_from_slice(&[42i32], &[], &d)?;
    if b.to_vec_of::<i32>()? != [42] || !b.dims().is_empty() {
        return Ok(Verdict::fail("a 0-d buffer came back wrong"));
    }
    Ok(Verdict::pass())
}

fn buffers_layout(ctx: &mut Ctx) -> Result<Verdict> {
    let c = ctx.client()?;
    let d = c.default_device()?;
    let b = c.buffer_from_slice(&[0f32; 6], &[2, 3], &d)?;
    match b.layout()? {
        Some(l) => Ok(Verdict::pass().fact("minor_to_major_2d", json!(l))),
        None => Ok(Verdict::unsupported("the plugin reports no layout")),
    }
}

fn buffers_events(ctx: &mut Ctx) -> Result<Verdict> {
    let c = ctx.client()?;
    let d = c.default_device()?;
    let b = c.buffer_from_slice(&[1f32; 4], &[4], &d)?;
    let e = b.ready_event()?;
    e.wait()?;
    if !e.is_ready()? || !b.is_ready()? {
        return Ok(Verdict::fail("a waited-for event is not ready"));
    }
    Ok(Verdict::pass())
}

fn buffers_copy_to_device(ctx: &mut Ctx) -> Result<Verdict> {
    let c = ctx.client()?;
    let devs = c.addressable_devices()?;
    if devs.len() < 2 {
        return Ok(Verdict::unsupported("only one addressable device"));
    }
    let b = c.buffer_from_slice(&[1f32, 2.0, 3.0], &[3], &devs[0])?;
    let moved = b.copy_to_device(&devs[1])?;
    if moved.device()? != devs[1] || moved.to_vec_of::<f32>()? != [1.0, 2.0, 3.0] {
        return Ok(Verdict::fail(
            "the copy is on the wrong device or has other data",
        ));
    }
    Ok(Verdict::pass())
}

fn buffers_memory_kinds(ctx: &mut Ctx) -> Result<Verdict> {
    let c = ctx.client()?;
    let d = c.default_device()?;
    let mut ok = Vec::new();
    let mut refused = Vec::new();
    let mut first_error = None;
    for m in d.addressable_memories()? {
        match c.buffer_from_host(
            &bytes_of(&[1.0, 2.0]),
            ElementType::F32,
            &[2],
            None,
            &d,
            Some(&m),
        ) {
            Ok(b) => {
                if b.to_vec()? != bytes_of(&[1.0, 2.0]) {
                    return Ok(Verdict::fail(format!(
                        "data in memory {} came back wrong",
                        m.kind()
                    )));
                }
                ok.push(m.kind().to_string());
            }
            Err(e) => {
                refused.push(m.kind().to_string());
                first_error.get_or_insert(e);
            }
        }
    }
    if ok.is_empty() {
        return Ok(match first_error {
            // Say why: a plugin that cannot put host data anywhere (UNIMPLEMENTED) is
            // named as such, and fails as lacking a required entry.
            Some(e) if e.code() == rpjrt::Code::Unimplemented => Verdict::from_error(&e),
            Some(e) => Verdict::fail(format!(
                "no memory of the default device takes a buffer: {e}"
            )),
            None => Verdict::fail("no memory of the default device takes a buffer"),
        });
    }
    Ok(Verdict::pass()
        .fact("placed", json!(ok))
        .fact("refused", json!(refused)))
}

fn buffers_delete(ctx: &mut Ctx) -> Result<Verdict> {
    let c = ctx.client()?;
    let d = c.default_device()?;
    let b = c.buffer_from_slice(&[1f32; 2], &[2], &d)?;
    // The control: the buffer reads before it is deleted, so that a refusal afterwards
    // is about the deletion, not a plugin that cannot read any buffer.
    b.to_vec()?;
    b.delete()?;
    match b.to_vec() {
        Ok(_) => Ok(Verdict::fail("a deleted buffer could still be read")),
        // An entry that is missing now worked a moment ago: not a refusal of the deletion.
        Err(e) if e.code() == rpjrt::Code::Unimplemented => Ok(Verdict::fail(format!(
            "reading a deleted buffer answered UNIMPLEMENTED, though reading it worked before \
             the deletion: {e}"
        ))),
        Err(_) => Ok(Verdict::pass()),
    }
}

fn compiled(ctx: &mut Ctx) -> Result<(rpjrt::Executable, Buffer, Buffer)> {
    let c = ctx.client()?;
    let exe = c.compile(&Program::mlir(MUL_ADD_TEXT), &CompileOptions::default())?;
    let d = c.default_device()?;
    let x = c.buffer_from_slice(&[2f32; 8], &[8], &d)?;
    let y = c.buffer_from_slice(&[3f32; 8], &[8], &d)?;
    Ok((exe, x, y))
}

fn execute_single(ctx: &mut Ctx) -> Result<Verdict> {
    let (exe, x, y) = compiled(ctx)?;
    let out = exe.execute(&[&x, &y])?;
    let spec = ArraySpec {
        element_type: ElementType::F32,
        dims: vec![8],
    };
    if exe.outputs() != [spec] {
        return Ok(Verdict::fail(format!(
            "declared outputs {:?}",
            exe.outputs()
        )));
    }
    if out[0].to_vec_of::<f32>()? != [7.0; 8] {
        return Ok(Verdict::fail("wrong result"));
    }
    Ok(Verdict::pass())
}

fn execute_multi_device(ctx: &mut Ctx) -> Result<Verdict> {
    let c = ctx.client()?;
    let devs = c.addressable_devices()?;
    if devs.len() < 2 {
        return Ok(Verdict::unsupported("only one addressable device"));
    }
    let opts = CompileOptions {
        num_replicas: 2,
        device_assignment: Some(vec![vec![devs[0].id() as i64], vec![devs[1].id() as i64]]),
        ..CompileOptions::default()
    };
    let exe = c.compile(&Program::mlir(MUL_ADD_TEXT), &opts)?;
    let order = exe.addressable_devices()?;
    let mut args = Vec::new();
    for (i, d) in order.iter().enumerate() {
        let v = (i + 1) as f32;
        args.push((
            c.buffer_from_slice(&[v; 8], &[8], d)?,
            c.buffer_from_slice(&[v; 8], &[8], d)?,
        ));
    }
    let lists: Vec<Vec<&Buffer>> = args.iter().map(|(a, b)| vec![a, b]).collect();
    let outs = exe.execute_sharded(&lists)?;
    for (i, o) in outs.iter().enumerate() {
        let v = (i + 1) as f32;
        if o[0].to_vec_of::<f32>()? != [v * v + 1.0; 8] {
            return Ok(Verdict::fail(format!(
                "replica {i} computed the wrong result"
            )));
        }
    }
    Ok(Verdict::pass().fact("replicas", outs.len()))
}

fn execute_donation(ctx: &mut Ctx) -> Result<Verdict> {
    let (exe, x, y) = compiled(ctx)?;
    let opts = ExecuteOptions {
        donate: vec![0],
        ..ExecuteOptions::default()
    };
    let out = exe.execute_with(&[vec![&x, &y]], &opts)?;
    if out.outputs[0][0].to_vec_of::<f32>()? != [7.0; 8] {
        return Ok(Verdict::fail("wrong result with a donated input"));
    }
    if !x.is_deleted() {
        return Ok(Verdict::fail("the donated input is still usable"));
    }
    Ok(Verdict::pass())
}

fn execute_events(ctx: &mut Ctx) -> Result<Verdict> {
    let (exe, x, y) = compiled(ctx)?;
    let opts = ExecuteOptions {
        completion_events: true,
        ..ExecuteOptions::default()
    };
    let out = exe.execute_with(&[vec![&x, &y]], &opts)?;
    if out.events.is_empty() {
        return Ok(Verdict::unsupported("no completion event was returned"));
    }
    for e in &out.events {
        e.wait()?;
    }
    Ok(Verdict::pass())
}

fn execute_wrong_arguments(ctx: &mut Ctx) -> Result<Verdict> {
    let (exe, x, y) = compiled(ctx)?;
    // The control: the right arguments run, so that a refusal of the wrong ones is about
    // them, not a plugin that cannot execute at all.
    exe.execute(&[&x, &y])?;
    match exe.execute(&[&x]) {
        Ok(_) => Ok(Verdict::fail(
            "one argument was accepted where two are needed",
        )),
        Err(e) if e.code() == rpjrt::Code::Unimplemented => Ok(Verdict::fail(format!(
            "a wrong argument list was answered with UNIMPLEMENTED, though the right one ran: \
             {e}"
        ))),
        Err(e) => Ok(Verdict::pass().fact(
            "refused_by",
            if matches!(e, rpjrt::Error::InvalidArgument(_)) {
                "rpjrt"
            } else {
                "plugin"
            },
        )),
    }
}

fn executable_fingerprint(ctx: &mut Ctx) -> Result<Verdict> {
    let (exe, _, _) = compiled(ctx)?;
    let f = exe.fingerprint()?;
    Ok(Verdict::pass().fact("has_fingerprint", !f.is_empty()))
}

fn executable_signature(ctx: &mut Ctx) -> Result<Verdict> {
    let (exe, _, _) = compiled(ctx)?;
    match exe.parameters() {
        Some(p) if p.len() == 2 => Ok(Verdict::pass()),
        Some(p) => Ok(Verdict::fail(format!("{} parameters, expected 2", p.len()))),
        None => Ok(Verdict::unsupported(
            "the optimized program gives no signature",
        )),
    }
}

fn executable_serialize(ctx: &mut Ctx) -> Result<Verdict> {
    let (exe, x, y) = compiled(ctx)?;
    let artifact = match exe.serialize() {
        Ok(a) => a,
        Err(e) => return Ok(Verdict::from_error(&e)),
    };
    let c = ctx.client()?;
    let loaded = match c.load(&artifact, None) {
        Ok(l) => l,
        Err(e) => return Ok(Verdict::from_error(&e)),
    };
    let out = loaded.execute(&[&x, &y])?;
    if out[0].to_vec_of::<f32>()? != [7.0; 8] {
        return Ok(Verdict::fail(
            "the loaded executable computes a wrong result",
        ));
    }
    // A damaged artifact is refused by rpjrt's checks, never handed to the plugin.
    let mut bad = artifact.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x40;
    if c.load(&bad, None).is_ok() {
        return Ok(Verdict::fail("a damaged artifact was loaded"));
    }
    Ok(Verdict::pass().fact("artifact_bytes", artifact.len()))
}

fn executable_cost_analysis(ctx: &mut Ctx) -> Result<Verdict> {
    let (exe, _, _) = compiled(ctx)?;
    match exe.cost_analysis() {
        Ok(props) => {
            let names: Vec<&str> = props.iter().map(|(k, _)| k.as_str()).collect();
            Ok(Verdict::pass().fact("properties", json!(names)))
        }
        Err(e) => Ok(Verdict::from_error(&e)),
    }
}

fn executable_memory_stats(ctx: &mut Ctx) -> Result<Verdict> {
    let (exe, _, _) = compiled(ctx)?;
    match exe.compiled_memory_stats() {
        Ok(m) => Ok(Verdict::pass().fact("stats", format!("{m:?}"))),
        Err(e) => Ok(Verdict::from_error(&e)),
    }
}

fn topology_describe(ctx: &mut Ctx) -> Result<Verdict> {
    let c = ctx.client()?;
    match c.topology() {
        Ok(t) => Ok(Verdict::pass()
            .fact("platform", t.platform_name())
            .fact("platform_version", t.platform_version())),
        Err(e) => Ok(Verdict::from_error(&e)),
    }
}

fn ext_present(ctx: &Ctx, name: &str) -> Verdict {
    match ctx
        .plugin
        .extensions()
        .all()
        .iter()
        .find(|e| e.name == name)
    {
        Some(e) => Verdict::pass().fact("struct_size", e.struct_size),
        None => Verdict::unsupported(format!("no {name} extension")),
    }
}

fn ext_layouts(ctx: &mut Ctx) -> Result<Verdict> {
    Ok(ext_present(ctx, "Layouts"))
}

fn ext_memory_descriptions(ctx: &mut Ctx) -> Result<Verdict> {
    Ok(ext_present(ctx, "MemoryDescriptions"))
}

fn ext_phase_compile(ctx: &mut Ctx) -> Result<Verdict> {
    let v = ext_present(ctx, "PhaseCompile");
    if v.outcome == Some(super::Outcome::Pass) {
        return Ok(Verdict::unsupported_in_rpjrt(
            "the extension is present; rpjrt does not call its functions yet",
        )
        .fact("present", true));
    }
    Ok(v)
}

fn ext_ffi(ctx: &mut Ctx) -> Result<Verdict> {
    let v = ext_present(ctx, "FFI");
    if v.outcome != Some(super::Outcome::Pass) {
        return Ok(v);
    }
    let (major, minor) = match rpjrt::ffi::runtime_version(&ctx.plugin) {
        Ok(rv) => rv,
        Err(e) => return Ok(Verdict::from_error(&e)),
    };
    let c = ctx.client()?;
    // A registration is checked when it happens (the runtime's metadata call must come and
    // accept the handler's version), so success here means the runtime took the handler.
    let options = rpjrt::ffi::RegisterOptions {
        replace: true,
        ..Default::default()
    };
    match rpjrt::ffi::register_with(c, "rpjrt_conform_probe", &options, |_| Ok(())) {
        Ok(r) => Ok(Verdict::pass()
            .fact("runtime_version", format!("{major}.{minor}"))
            .fact(
                "handler_version",
                format!("{}.{}", r.handler_version.0, r.handler_version.1),
            )),
        Err(e) => Ok(Verdict::from_error(&e).fact("runtime_version", format!("{major}.{minor}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Outcome;
    use rpjrt::{Code, Error};

    fn unimplemented(entry: &'static str) -> Error {
        Error::Pjrt {
            entry,
            code: Code::Unimplemented,
            message: "not here".into(),
        }
    }

    #[test]
    fn only_a_compile_diagnostic_passes_compile_diagnostics() {
        // UNIMPLEMENTED is no diagnostic: it passed, so a plugin that cannot compile at
        // all got a green compile.diagnostics.
        let v = diagnostic_verdict(&unimplemented("PJRT_Client_Compile"));
        assert_eq!(v.outcome, Some(Outcome::Fail), "{}", v.detail);
        assert!(
            v.detail
                .starts_with("PJRT_Client_Compile is required of every PJRT plugin"),
            "{}",
            v.detail
        );
        // A missing slot reads the same.
        let null_slot = Error::Unsupported {
            what: "PJRT_Client_Compile".into(),
            needs: rpjrt::ApiVersion {
                major: 0,
                minor: 57,
            },
            plugin: rpjrt::ApiVersion {
                major: 0,
                minor: 81,
            },
            missing_slot: true,
        };
        let v = diagnostic_verdict(&null_slot);
        assert_eq!(v.outcome, Some(Outcome::Fail), "{}", v.detail);
        assert!(v.detail.contains("slot"), "{}", v.detail);
        // An error that neither says INVALID_ARGUMENT nor points at the program.
        let internal = Error::Pjrt {
            entry: "PJRT_Client_Compile",
            code: Code::Internal,
            message: "out of compiler threads".into(),
        };
        let v = diagnostic_verdict(&internal);
        assert_eq!(v.outcome, Some(Outcome::Fail), "{}", v.detail);
        assert!(v.detail.contains("INTERNAL"), "{}", v.detail);
        // What the CPU plugins say (UNKNOWN, with the line and column), and a plain
        // INVALID_ARGUMENT, are diagnostics.
        let located = Error::Pjrt {
            entry: "PJRT_Client_Compile",
            code: Code::Unknown,
            message: "-:2:26: error: use of undeclared SSA value name".into(),
        };
        assert_eq!(diagnostic_verdict(&located).outcome, Some(Outcome::Pass));
        let invalid = Error::Pjrt {
            entry: "PJRT_Client_Compile",
            code: Code::InvalidArgument,
            message: "bad program".into(),
        };
        let v = diagnostic_verdict(&invalid);
        assert_eq!(v.outcome, Some(Outcome::Pass), "{}", v.detail);
        assert_eq!(v.facts["message_has_location"], false);
    }

    #[test]
    fn a_missing_required_entry_is_a_failure() {
        for &entry in crate::REQUIRED_ENTRIES {
            assert!(
                rpjrt_sys::PJRT_API_ENTRIES.iter().any(|e| e.name == entry),
                "{entry} is no PJRT entry"
            );
            let entry: &'static str = entry;
            let v = Verdict::from_error(&unimplemented(entry));
            assert_eq!(v.outcome, Some(Outcome::Fail), "{entry}");
            assert_eq!(
                v.detail,
                format!(
                    "{entry} is required of every PJRT plugin, but the plugin answered \
                     UNIMPLEMENTED for {entry}: not here"
                )
            );
            assert_eq!(v.facts["missing_required_entry"], entry);
        }
        // Folded into `Unsupported` by the safe layer, it still names the entry.
        let folded = Error::Unsupported {
            what: "executing (PJRT_LoadedExecutable_Execute: the plugin says UNIMPLEMENTED: \
                   no)"
            .into(),
            needs: rpjrt::ApiVersion {
                major: 0,
                minor: 81,
            },
            plugin: rpjrt::ApiVersion {
                major: 0,
                minor: 81,
            },
            missing_slot: true,
        };
        let v = Verdict::from_error(&folded);
        assert_eq!(v.outcome, Some(Outcome::Fail), "{}", v.detail);
        assert!(
            v.detail
                .starts_with("PJRT_LoadedExecutable_Execute is required"),
            "{}",
            v.detail
        );
        // Any other entry stays unsupported.
        let v = Verdict::from_error(&unimplemented("PJRT_Executable_Serialize"));
        assert_eq!(v.outcome, Some(Outcome::Unsupported), "{}", v.detail);
    }

    #[test]
    fn sub_byte_round_trips_send_every_value_of_the_type() {
        let n = ROUNDTRIP_DIMS.iter().product::<i64>() as usize;
        for &t in ElementType::ALL {
            if t.bit_width() == 0 {
                continue;
            }
            let data = roundtrip_data(t).unwrap();
            assert_eq!(data.len(), t.dense_byte_size(n).unwrap(), "{t}");
            assert!(data.iter().any(|&b| b != 0), "{t}: all zero");
            if !t.is_sub_byte() {
                continue;
            }
            // Unpacked (without sign extension), the elements take every bit pattern of
            // the type, and they pack back to the same bytes.
            let mask = (1u8 << t.bit_width()) - 1;
            let elements: Vec<u8> = rpjrt::unpack_sub_byte(t, &data, n)
                .into_iter()
                .map(|v| v & mask)
                .collect();
            let mut seen = elements.clone();
            seen.sort();
            seen.dedup();
            assert_eq!(seen, (0..=mask).collect::<Vec<u8>>(), "{t}");
            assert_eq!(rpjrt::pack_sub_byte(t, &elements), data, "{t}");
        }
        // A plugin that gives back zeros is caught, and told which element differs.
        let sent = roundtrip_data(ElementType::S4).unwrap();
        let d = roundtrip_difference(ElementType::S4, &sent, &vec![0; sent.len()]);
        assert!(
            d.starts_with("15 of 16 elements came back changed; the first, element 1,"),
            "{d}"
        );
    }
}
