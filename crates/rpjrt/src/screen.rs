//! Programs a plugin's compiler is known to abort on, refused before they are compiled.
//!
//! Some programs make XLA stop the whole process (a failed `CHECK`, an "unhandled
//! primitive type") instead of returning a compile error. No error code can come back from
//! that, so rpjrt reads what the program uses (`crate::mlir`) and refuses these cases with
//! an error naming the element type and the operation. Found by compiling one-operation
//! programs of every element type on the two CPU plugins (PJRT 0.81 and 0.115):
//!
//! - an element type newer than the plugin's PJRT version (the float6 types on 0.81):
//!   several operations abort on it, the rest fail;
//! - the float6 types (`f6E2M3FN`, `f6E3M2FN`): a tensor with no elements (of any other
//!   sub-byte or narrow float type, `i2` to `f8E8M0FNU`, zero-size tensors compile and run
//!   on both; only float6 ends the process on 0.115; in a program that uses float6, any
//!   shape with a zero is refused, since text may name the element type through an
//!   alias), a constant,
//!   `concatenate` and `sort` abort. Only operations seen to compile or fail cleanly with
//!   float6 operands are let through (`F6_OPERATIONS`), so an untried operation is refused
//!   rather than risked;
//! - the 2-bit integers (`i2`, `ui2`): `concatenate` aborts; `sort`, `chlo.top_k` and a
//!   `TopK` custom call return wrong values (refused too).
//! - a function result given an unreduced sharding in MLIR text (`-> (tensor<f32>
//!   {mhlo.sharding = "{unreduced}"})`): the SPMD partitioner of the 0.115 plugin fails a
//!   check that a result sharding is tiled; the 0.81 plugin compiles it. Refused on
//!   plugins newer than 0.81.
//! - a custom call to a target XLA interprets itself, in a form that aborts (TopK not in
//!   its one-operand, two-result form, SliceToDynamic with a static result, PadToStatic
//!   with one result, `__onednn$` calls; on plugins newer than 0.81 an
//!   `xla.sdy.FuncResultSharding` without a sharding on a known mesh); from bytecode and
//!   HLO only the names are read (docs/custom-calls.md).
//!
//! The rules apply to every plugin: they come from XLA code shared by its back ends. MLIR
//! text is read line by line (a constant is refused only when its own line names a float6
//! type); bytecode is read as a whole (any constant in a program that uses a float6 type
//! is refused); a serialized HLO module is read instruction by instruction.

use crate::dtype::ElementType;
use crate::error::{Error, Result};
use crate::mlir::{self, Uses};
use crate::program::Program;
use crate::raw::ffi as raw;

/// Operations seen to compile, or to fail with an error, when their operands are float6.
const F6_OPERATIONS: &[&str] = &[
    "abs",
    "add",
    "and",
    "bitcast_convert",
    "broadcast_in_dim",
    "call",
    "case",
    "clamp",
    "compare",
    "convert",
    "divide",
    "dot_general",
    "dynamic_slice",
    "dynamic_update_slice",
    "func",
    "gather",
    "get_tuple_element",
    "if",
    "iota",
    "maximum",
    "minimum",
    "module",
    "multiply",
    "negate",
    "not",
    "optimization_barrier",
    "or",
    "pad",
    "popcnt",
    "power",
    "reduce",
    "reduce_window",
    "remainder",
    "reshape",
    "return",
    "reverse",
    "scatter",
    "select",
    "shift_left",
    "sign",
    "slice",
    "subtract",
    "transpose",
    "tuple",
    "while",
    "xor",
];

const FLOAT6: [ElementType; 2] = [ElementType::F6E2M3FN, ElementType::F6E3M2FN];
const INT2: [ElementType; 2] = [ElementType::S2, ElementType::U2];

fn refuse(ty: ElementType, what: &str) -> Error {
    Error::invalid(format!(
        "the program uses {ty} {what}, which the plugin's compiler is known to abort the \
         process on instead of reporting an error; rpjrt refuses it before compiling \
         (convert those values to a wider type, such as bf16 or int8, around it)"
    ))
}

/// The operation's name without its dialect, for the dialects whose operations the rules
/// are about, with an HLO opcode given its StableHLO name; `None` for other dialects.
fn hlo_op(name: &str) -> Option<&str> {
    let (dialect, op) = name.split_once('.')?;
    if dialect == "hlo" {
        return Some(match op {
            "parameter" => "func",
            "broadcast" => "broadcast_in_dim",
            "dot" => "dot_general",
            "conditional" => "case",
            "get-tuple-element" => "get_tuple_element",
            "dynamic-slice" => "dynamic_slice",
            "dynamic-update-slice" => "dynamic_update_slice",
            "bitcast-convert" => "bitcast_convert",
            "reduce-window" => "reduce_window",
            "opt-barrier" => "optimization_barrier",
            "shift-left" => "shift_left",
            "population-count" => "popcnt",
            other => other,
        });
    }
    matches!(dialect, "stablehlo" | "mhlo" | "chlo" | "func" | "builtin").then_some(op)
}

/// Checks `uses` against the rules for a plugin implementing PJRT 0.`minor`.
pub(crate) fn check_uses(uses: &Uses, minor: i32) -> Result<()> {
    if let Some(what) = &uses.oversize {
        // XLA's size wraps: the plugin would allocate too little and the program write
        // past it (a crash), or its compiler fail a check.
        return Err(Error::invalid(format!(
            "the program has a tensor type {what}; rpjrt refuses it before compiling"
        )));
    }
    for &(ty, zero_size) in &uses.types {
        let since = ty.since_pjrt_minor();
        if since > minor {
            return Err(Error::invalid(format!(
                "the program uses element type {ty}, which needs PJRT 0.{since}; this plugin \
                 implements PJRT 0.{minor} and its compiler cannot handle it (some programs \
                 using it abort the process), so rpjrt refuses it before compiling"
            )));
        }
        if FLOAT6.contains(&ty) {
            // A zero anywhere in a shape counts: the element type of `tensor<0x3x!e>` is
            // an alias the reader does not resolve.
            if zero_size || uses.any_zero_size {
                return Err(refuse(ty, "in a tensor with no elements"));
            }
            let constant = match &uses.constant_types {
                Some(types) => types.contains(&ty),
                None => uses.ops.iter().any(|o| hlo_op(o) == Some("constant")),
            };
            if constant {
                return Err(refuse(ty, "with a constant operation"));
            }
            let untried: Vec<&str> = uses
                .ops
                .iter()
                .filter(|o| match hlo_op(o) {
                    Some("constant") => false,
                    Some(op) => !F6_OPERATIONS.contains(&op) || o.starts_with("chlo."),
                    None => !o.starts_with("sdy."),
                })
                .map(String::as_str)
                .collect();
            if !untried.is_empty() {
                return Err(refuse(
                    ty,
                    &format!(
                        "together with {} (some operations abort on float6 operands; only \
                         those known not to are allowed in a program that uses float6)",
                        untried.join(", ")
                    ),
                ));
            }
        }
        if INT2.contains(&ty) {
            if let Some(op) = uses.ops.iter().find(|o| hlo_op(o) == Some("concatenate")) {
                return Err(refuse(ty, &format!("together with {op}")));
            }
            let sorts = |o: &&String| matches!(hlo_op(o), Some("sort" | "top_k" | "topk"));
            if let Some(op) = uses.ops.iter().find(sorts) {
                return Err(Error::invalid(format!(
                    "the program uses {ty} together with {op}: the plugin's compiler sorts \
                     2-bit integers wrongly (it returns values that are not the sorted input, \
                     differing between runs), so rpjrt refuses it before compiling (convert \
                     those values to a wider type, such as int8, before sorting)"
                )));
            }
        }
    }
    Ok(())
}

/// Refuses `program` if it is one a plugin implementing PJRT 0.`minor` is known to abort
/// on. Bytecode or a module that cannot be read is passed through (the plugin reports it).
pub(crate) fn check(program: &Program, minor: i32) -> Result<()> {
    let (mut uses, configs) = match program {
        Program::Mlir(code) => (mlir::uses(code), custom_call_configs(code)),
        Program::Hlo(module) => (
            crate::hlo::program_uses(module),
            crate::hlo::ffi_backend_configs(module).unwrap_or_default(),
        ),
    };
    // A TopK custom call or a `chlo.top_k` composite sorts too (the 2-bit integer rule).
    let (Program::Mlir(bytes) | Program::Hlo(bytes)) = program;
    if ["TopK", "chlo.top_k", "mhlo.topk"]
        .iter()
        .any(|t| memchr::memmem::find(bytes, t.as_bytes()).is_some())
    {
        uses.iter_mut()
            .for_each(|u| _ = u.ops.insert("chlo.top_k".into()));
    }
    if let Some((target, _)) = configs.iter().find(|(_, dict)| has_index_attribute(dict)) {
        return Err(Error::invalid(format!(
            "the custom call to {target} has an index-typed attribute in its backend_config; \
             the plugin's compiler crashes the process decoding FFI attributes of type index \
             instead of reporting an error, so rpjrt refuses it before compiling (give the \
             attribute an integer type such as i64)"
        )));
    }
    if let (Program::Mlir(_), Some(u)) = (program, &uses) {
        // Bytecode's attribute dictionaries are not followed to their operations: an
        // integer attribute of type index anywhere, with a custom call, is refused as a
        // possible FFI attribute (index tensors, such as jax's operand layouts, pass).
        if u.index_attribute && u.ops.contains("stablehlo.custom_call") {
            return Err(Error::invalid(
                "the program is MLIR bytecode with a custom call and an integer attribute of \
                 type index; an index-typed attribute in a custom call's backend_config \
                 crashes the plugin's compiler instead of being reported, and rpjrt does not \
                 read from bytecode which operation holds it, so it refuses the program \
                 before compiling (give such attributes an integer type such as i64, or pass \
                 the program as text)",
            ));
        }
    }
    if let Program::Mlir(code) = program {
        if minor > 81 && unreduced_result(code) {
            return Err(Error::invalid(
                "a function result has an unreduced sharding (\"{unreduced}\"): this \
                 plugin's partitioner stops the process on it instead of reporting an error, \
                 so rpjrt refuses it before compiling (finish the reduction inside the \
                 program, or give the result a tiled or replicated sharding)",
            ));
        }
    }
    if let Some((target, why)) = own_call(program, minor) {
        return Err(Error::invalid(format!(
            "the custom call to {target} names a target XLA interprets itself ({why}); \
             in this form the plugin's compiler stops the process instead of reporting an \
             error, so rpjrt refuses it before compiling (give a handler a name of your own, \
             or write the operation with StableHLO ops)"
        )));
    }
    let nested = match program {
        Program::Mlir(c) if c.starts_with(mlir::BYTECODE_MAGIC) => {
            mlir::bytecode_call_nesting(c).and_then(|n| raw::walked_region_custom_call(&n))
        }
        Program::Mlir(c) => raw::text_region_custom_call(&String::from_utf8_lossy(c)),
        Program::Hlo(m) => crate::hlo::custom_call_called_by(m),
    };
    if let Some(r) = nested {
        return Err(Error::invalid(r.to_string()));
    }
    match uses {
        Some(uses) => check_uses(&uses, minor),
        None => Ok(()),
    }
}

/// A tensor type: its dimensions (`-1` for a dynamic one) and element type.
type Ty = (Vec<i64>, String);

/// Why a custom call to a target XLA interprets itself, with these operand and result
/// types, is refused: the forms seen to stop the process on both CPU plugins.
fn own_call_abort(target: &str, ops: &[Ty], res: &[Ty]) -> Option<&'static str> {
    let topk = || match (ops, res) {
        ([(o, oe)], [(v, ve), (i, ie)]) if (1..=2).contains(&o.len()) && v.len() == o.len() => {
            let n = o.len() - 1;
            v == i && ve == oe && ie == "i32" && o[..n] == v[..n] && (0..=o[n]).contains(&v[n])
        }
        _ => false,
    };
    Some(match target {
        "TopK" if !topk() => "it takes one operand of rank 1 or 2 and returns its k largest \
                              values (same type, k at most the last dimension) and their i32 indices",
        "SliceToDynamic" if !res.iter().any(|r| r.0.contains(&-1)) => "it must return a dynamic shape",
        "PadToStatic" if res.len() < 2 => "it must return the padded tensor and its sizes",
        t if t.starts_with("__onednn$") => "XLA's own oneDNN calls crash or misread in any form",
        _ => return None,
    })
}

/// The first custom call [`own_call_abort`] refuses, or on plugins newer than 0.81 an
/// `xla.sdy.FuncResultSharding` with no `xla.sdy.sharding` on a mesh the module defines:
/// `(target, why)`. Text is read line by line; bytecode and serialized HLO by the target
/// names they hold, refusing those that abort in some form (their shapes are not read).
fn own_call(program: &Program, minor: i32) -> Option<(String, &'static str)> {
    let (frs, no_mesh) = (
        "xla.sdy.FuncResultSharding",
        "it needs an xla.sdy.sharding on a mesh that the module's xla.sdy.meshes defines",
    );
    let text = match program {
        Program::Mlir(code) if !code.starts_with(mlir::BYTECODE_MAGIC) => {
            String::from_utf8_lossy(code)
        }
        Program::Mlir(code) => {
            let strings = mlir::bytecode_strings(code).unwrap_or_default();
            return names_abort(
                |t| {
                    strings
                        .iter()
                        .any(|s| s == t || (t.ends_with('$') && s.starts_with(t)))
                },
                minor,
            );
        }
        // A custom_call_target field (28) holding the name, or starting with a prefix.
        Program::Hlo(m) => {
            return names_abort(
                |t| {
                    m.windows(t.len() + 3).any(|w| {
                        w[..2] == [0xe2, 1]
                            && *t.as_bytes() == w[3..]
                            && (t.ends_with('$') || usize::from(w[2]) == t.len())
                    }) || (t.starts_with("xla.sdy.")
                        && t.as_bytes()[8].is_ascii_lowercase()
                        && m.windows(t.len()).any(|w| *t.as_bytes() == *w))
                },
                minor,
            )
        }
    };
    for line in text.lines().filter(|l| l.contains("custom_call")) {
        let call = &line[line.find("custom_call").unwrap_or(0)..];
        let target = match call
            .trim_start_matches(['c', 'u', 's', 't', 'o', 'm', '_', 'a', 'l', '"', ' '])
            .strip_prefix('@')
        {
            Some(t) => t.trim_start_matches('"'),
            None => line
                .split_once("call_target_name = \"")
                .map_or("", |(_, t)| t),
        };
        let target = &target[..target
            .find(['(', '"', ' ', '{', ','])
            .unwrap_or(target.len())];
        let Some((ops, res)) = line
            .rsplit_once(" : (")
            .and_then(|(_, sig)| sig.split_once(") -> "))
        else {
            continue;
        };
        if let Some(why) = own_call_abort(target, &tensors(ops), &tensors(res)) {
            return Some((format!("@{target}"), why));
        }
        let sharding = line
            .split_once("xla.sdy.sharding = \"#sdy.sharding")
            .and_then(|(_, s)| s.split_once("<@"));
        let mesh = sharding.map(|(_, m)| &m[..m.find([',', '>']).unwrap_or(0)]);
        if minor > 81
            && target == frs
            && !mesh.is_some_and(|m| text.contains(&format!("{m} = #sdy.mesh")))
        {
            return Some((format!("@{frs}"), no_mesh));
        }
    }
    None
}

/// [`own_call`] for a program read by the names it holds (`named`).
fn names_abort(named: impl Fn(&str) -> bool, minor: i32) -> Option<(String, &'static str)> {
    let (frs, sdy) = (
        "xla.sdy.FuncResultSharding",
        ["xla.sdy.sharding", "xla.sdy.meshes"],
    );
    if let Some(t) = ["TopK", "SliceToDynamic", "PadToStatic", "__onednn$"]
        .into_iter()
        .find(|t| named(t))
    {
        return Some((format!("@{t}"), "some forms of it abort, and rpjrt does not read shapes from bytecode or HLO: pass the program as MLIR text"));
    }
    let bare = minor > 81 && named(frs) && !sdy.iter().all(|s| named(s));
    bare.then(|| {
        (
            format!("@{frs}"),
            "it needs xla.sdy.sharding and xla.sdy.meshes frontend attributes",
        )
    })
}

/// The tensor types written in `s` (`tensor<2x?xf32, #bounds>`).
fn tensors(s: &str) -> Vec<Ty> {
    let ty = |t: &str| {
        let mut rest = t[..t.find([',', '>']).unwrap_or(t.len())].trim();
        let mut dims = Vec::new();
        while let Some((d, r)) = rest
            .split_once('x')
            .filter(|(d, _)| *d == "?" || d.parse::<i64>().is_ok())
        {
            dims.push(d.parse().unwrap_or(-1));
            rest = r;
        }
        (dims, rest.to_string())
    };
    s.split("tensor<").skip(1).map(ty).collect()
}

/// Whether MLIR text gives a function result an unreduced sharding: the result list after
/// a function's parameters (`-> (...)`) holds `"{unreduced`. Bytecode is not read.
fn unreduced_result(code: &[u8]) -> bool {
    if code.starts_with(mlir::BYTECODE_MAGIC) {
        return false;
    }
    let text = String::from_utf8_lossy(code);
    let mut rest: &str = &text;
    while let Some(at) = rest.find("func.func") {
        let after = &rest[at + "func.func".len()..];
        let Some(open) = after.find('(') else { break };
        let params = balanced_in(&after[open..], '(', ')');
        let tail = after[open + params.len()..].trim_start();
        if let Some(results) = tail.strip_prefix("->") {
            let results = results.trim_start();
            if results.starts_with('(') && balanced_in(results, '(', ')').contains("\"{unreduced") {
                return true;
            }
        }
        rest = &after[open + params.len()..];
    }
    false
}

/// The attribute dictionaries of the typed-FFI custom calls of MLIR text (`backend_config =
/// {...}`), each with its target as written (`@name`, or `a custom call` when the generic
/// form hides it). Bytecode is not read.
fn custom_call_configs(code: &[u8]) -> Vec<(String, String)> {
    if code.starts_with(mlir::BYTECODE_MAGIC) {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(code);
    let mut out = Vec::new();
    let mut rest: &str = &text;
    while let Some(at) = rest.find("custom_call") {
        rest = &rest[at + "custom_call".len()..];
        let next_call = rest.find("custom_call").unwrap_or(rest.len());
        let target = rest
            .trim_start()
            .strip_prefix('@')
            .map(|t| {
                let end = t
                    .find(|c: char| !(c.is_alphanumeric() || "_.$-\"".contains(c)))
                    .unwrap_or(t.len());
                format!("@{}", &t[..end])
            })
            .unwrap_or_else(|| "a custom call".to_string());
        let Some(cfg) = rest[..next_call].find("backend_config") else {
            continue;
        };
        let after = rest[cfg + "backend_config".len()..].trim_start();
        let Some(after) = after.strip_prefix('=').map(str::trim_start) else {
            continue;
        };
        if after.starts_with('{') {
            out.push((target, balanced(after).to_string()));
        }
    }
    out
}

/// The characters of `s` outside double-quoted string literals (with backslash escapes),
/// with their byte offsets.
fn outside_strings(s: &str) -> impl Iterator<Item = (usize, char)> + '_ {
    let (mut in_str, mut escaped) = (false, false);
    s.char_indices().filter(move |&(_, c)| {
        if in_str {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_str = false,
                _ => {}
            }
            return false;
        }
        in_str = c == '"';
        !in_str
    })
}

/// The text of the brace group `s` starts with (all of `s` when it never closes), skipping
/// braces inside string literals.
fn balanced(s: &str) -> &str {
    balanced_in(s, '{', '}')
}

/// The text of the `open`..`close` group `s` starts with (all of `s` when it never
/// closes), skipping those characters inside string literals.
fn balanced_in(s: &str, open: char, close: char) -> &str {
    let mut depth = 0usize;
    for (i, c) in outside_strings(s) {
        if c == open {
            depth += 1;
        } else if c == close {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                return &s[..i + c.len_utf8()];
            }
        }
    }
    s
}

/// Whether an attribute dictionary's text holds a value of type `index` (`3 : index`, at
/// any depth), outside string literals.
fn has_index_attribute(dict: &str) -> bool {
    outside_strings(dict).any(|(i, c)| {
        c == ':'
            && dict[i + 1..]
                .trim_start()
                .strip_prefix("index")
                .is_some_and(|tail| !tail.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
    })
}

/// Custom-call targets XLA interprets itself (docs/custom-calls.md): exact names, and
/// prefixes (ending in `.` or `$`). Each was seen on the CPU plugins never to reach a
/// registered handler, or to stop the compile.
pub(crate) const XLA_OWN_TARGETS: &str = "Sharding SPMDFullToShardShape SPMDShardToFullShape \
    LayoutConstraint ShardBarrierFrom ShardBarrierTo SetBound TopK SliceToDynamic PadToStatic \
    MoveToHost MoveToDevice annotate_device_placement CreateBuffer Unpin xla.sdy. __onednn$";

/// Whether XLA interprets custom calls to `name` itself ([`XLA_OWN_TARGETS`]).
pub(crate) fn xla_own_target(name: &str) -> bool {
    let prefix = |t: &str| t.ends_with(['.', '$']) && name.starts_with(t);
    XLA_OWN_TARGETS
        .split_whitespace()
        .any(|t| t == name || prefix(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(src: &str, minor: i32) -> Result<()> {
        check(&Program::mlir(src), minor)
    }

    fn one(op: &str, ty: &str, shape: &str) -> String {
        let t = format!("tensor<{shape}{ty}>");
        format!(
            "func.func public @main(%a: {t}) -> {t} {{\n  %r = stablehlo.{op} %a, %a : {t}\n  \
             return %r : {t}\n}}"
        )
    }

    #[test]
    fn index_attributes_of_ffi_calls_are_refused_at_any_depth() {
        let call = |cfg: &str| {
            format!(
                "func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {{\n  %0 = \
                 stablehlo.custom_call @tgt.v2(%x) {{api_version = 4 : i32, backend_config = \
                 {cfg}}} : (tensor<8xf32>) -> tensor<8xf32>\n  return %0 : tensor<8xf32>\n}}"
            )
        };
        for bad in [
            "{v = 3 : index}",
            "{d = {a = 3 : index}}",
            "{s = \"}\", v = 3 :index, w = 1 : i64}",
            "{a = [1 : i64, 2 : index]}",
        ] {
            let e = text(&call(bad), 115).unwrap_err().to_string();
            assert!(e.contains("@tgt.v2") && e.contains("index"), "{bad}: {e}");
        }
        for good in [
            "{v = 3 : i64}",
            "{name = \"x : index\"}",
            "{v = dense<[1, 2]> : tensor<2xi64>, indexed = 1 : i32}",
            "{v = 3 : index_like}",
        ] {
            assert!(text(&call(good), 115).is_ok(), "{good}");
        }
        // A backend_config that is a string (older custom-call API versions) is not read.
        let old = call("{}").replace("backend_config = {}", "backend_config = \"3 : index\"");
        assert!(text(&old, 115).is_ok());
    }

    /// `stablehlo.custom_call @h(%a) {api_version = 4 : i32, backend_config = {a = 5 :
    /// T}}` on f32[2], as jaxlib 0.10 writes it: a portable artifact with T = index and
    /// T = i64, and plain bytecode with T = index.
    const INDEX_PORTABLE: &str = "4d4cef520d537461626c65484c4f5f76312e31372e300001190501050901030b03070f131703392109010d0b131313131303150b0b0b0b0b130b0f0b0b0309131707070271050d170103031701050717010527170107151701090b030123031d0f1d110b090d03191b1d131307151d1505012903090511030103010913044d050150030107043d0301050350050307042903050b03030700054609050301030107040b03030603010501009b170505030b05151f110f0b116275696c74696e0076686c6f006d6f64756c650066756e635f763100637573746f6d5f63616c6c5f76310072657475726e5f7631002d006d61696e0000610068000827070501010b0d0f0d11131115171d0d1f0d0d0d";
    const I64_PORTABLE: &str = "4d4cef520d537461626c65484c4f5f76312e31372e300001190501050901030b03070f131703392109010d0b131313131303150b0b0b0b0b130b0f0b0b0309131707070271050d170103031701050717010527170107151701090b030123031d0f1d110b090d03191b1d131307151d150501290309051103010301091d044d050150030107043d0301050350050307042903050b03030700054609050301030107040b03030603010501009b170505030b05151f110f0b116275696c74696e0076686c6f006d6f64756c650066756e635f763100637573746f6d5f63616c6c5f76310072657475726e5f7631002d006d61696e0000610068000827070501010b0d0f0d11131115171d0d1f0d0d0d";
    const INDEX_PLAIN: &str = "4d4cef520d4d4c495232332e302e3067697400011f070105090901030f0305071305031703311b0b011b0b130b0b13130f130b0f0b1313010b1317070f07026d050d170101010d03050f1701030317010323110711030311130511110915051317010511170107071b03090505030103010b01020203044d050150030107043d0301050350090307042903050b03030b00074617050301030105041903030603010501008f1505050b05190f0f150b116275696c74696e0066756e6300737461626c65686c6f006d6f64756c650072657475726e00637573746f6d5f63616c6c002d006d61696e00610068000829070501010d010501010701111b1f150101010101";

    /// The same with `a = dense<[1, 2]> : tensor<2xindex>` (an index tensor, as jax's
    /// operand layouts are; the plugin refuses it in a backend_config with an error).
    const DENSE_INDEX_PORTABLE: &str = "4d4cef520d537461626c65484c4f5f76312e31372e300001190501050901030b03070f1317033b210b010d0b131313131303150b0b0b0b0b130b4f0b0b030b13170713070299050d170103031701050717010527170107151701090b030123031d0f1d110b090d03191b1d131f0721010000000000000002000000000000001d150501290309051103010301092903090913044d050150030107043d0301050350050307042903050b03030700054609050301030107040b03030603010501009b170505030b05151f110f0b116275696c74696e0076686c6f006d6f64756c650066756e635f763100637573746f6d5f63616c6c5f76310072657475726e5f7631002d006d61696e0000610068000827070501010b0d0f0d11131115171d0d1f0d0d0d";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn index_attributes_with_custom_calls_in_bytecode_are_refused() {
        for (hex, bad) in [
            (INDEX_PORTABLE, true),
            (INDEX_PLAIN, true),
            (I64_PORTABLE, false),
            (DENSE_INDEX_PORTABLE, false),
        ] {
            let r = check(&Program::mlir(unhex(hex)), 115);
            assert_eq!(r.is_err(), bad, "{r:?}");
            if let Err(e) = r {
                assert!(e.to_string().contains("bytecode with a custom call"), "{e}");
            }
        }
    }

    #[test]
    fn float6_rules() {
        for ty in ["f6E2M3FN", "f6E3M2FN"] {
            assert!(text(&one("maximum", ty, "4x"), 115).is_ok());
            let e = text(&one("maximum", ty, "0x4x"), 115)
                .unwrap_err()
                .to_string();
            assert!(e.contains("float6") && e.contains("no elements"), "{e}");
            let e = text(&one("concatenate", ty, "4x"), 115)
                .unwrap_err()
                .to_string();
            assert!(e.contains("stablehlo.concatenate"), "{e}");
            let e = text(&one("sort", ty, "4x"), 115).unwrap_err().to_string();
            assert!(e.contains("stablehlo.sort"), "{e}");
            let c = format!(
                "func.func public @main() -> tensor<2x{ty}> {{\n %c = stablehlo.constant \
                 dense<1.0> : tensor<2x{ty}>\n return %c : tensor<2x{ty}>\n}}"
            );
            let e = text(&c, 115).unwrap_err().to_string();
            assert!(e.contains("constant"), "{e}");
            // Too new for a PJRT 0.81 plugin, whatever the operation.
            let e = text(&one("maximum", ty, "4x"), 81).unwrap_err().to_string();
            assert!(e.contains("needs PJRT 0.114") && e.contains("0.81"), "{e}");
        }
        // Spellings that hid the zero-size tensor from the reader (the process ended).
        for src in [
            "!e = f6E2M3FN\nfunc.func public @main(%a: tensor<0x3x!e>) -> tensor<0x3x!e> {\n \
             return %a : tensor<0x3x!e>\n}",
            "func.func public @main(%a: tensor<0 x 3 x f6E3M2FN>) -> tensor<0 x 3 x f6E3M2FN> \
             {\n return %a : tensor<0 x 3 x f6E3M2FN>\n}",
        ] {
            let e = text(src, 115).unwrap_err().to_string();
            assert!(e.contains("no elements"), "{e}");
        }
        // Zero-size tensors of the other narrow types are fine.
        for ty in ["i2", "ui4", "f4E2M1FN", "f8E8M0FNU"] {
            assert!(text(&one("add", ty, "0x3x"), 115).is_ok(), "{ty}");
        }
        // A constant of another type next to float6 values is fine in text.
        let mixed = "func.func public @main(%a: tensor<2xf6E2M3FN>) -> tensor<2xf6E2M3FN> {\n \
                     %c = stablehlo.constant dense<1.0> : tensor<2xf32>\n \
                     return %a : tensor<2xf6E2M3FN>\n}";
        assert!(text(mixed, 115).is_ok());
    }

    #[test]
    fn int2_rules() {
        for ty in ["i2", "ui2"] {
            assert!(text(&one("add", ty, "4x"), 81).is_ok());
            let e = text(&one("concatenate", ty, "2x3x"), 81)
                .unwrap_err()
                .to_string();
            assert!(e.contains("int2") && e.contains("concatenate"), "{e}");
            // Sorts of 2-bit integers give wrong answers: sort, chlo.top_k, a TopK call.
            let t = format!("tensor<4x{ty}>");
            for op in [
                format!("%r = \"stablehlo.sort\"(%a) ({{}}) : ({t}) -> {t}"),
                format!("%r, %i = chlo.top_k(%a, k = 4) : {t} -> ({t}, tensor<4xi32>)"),
                format!("%r, %i = stablehlo.custom_call @TopK(%a) : ({t}) -> ({t}, tensor<4xi32>)"),
            ] {
                let prog = format!(
                    "func.func public @main(%a: {t}) -> {t} {{\n {op}\n return %r : {t}\n}}"
                );
                let e = text(&prog, 115).unwrap_err().to_string();
                assert!(
                    e.contains("int2") && e.contains("sorts 2-bit integers"),
                    "{e}"
                );
                assert!(text(&prog.replace(ty, "i4"), 115).is_ok());
            }
        }
        assert!(text(&one("concatenate", "i4", "4x"), 115).is_ok());
    }

    #[test]
    fn unreduced_results_are_refused_after_081() {
        let out = |attr: &str| {
            format!(
                "func.func public @main(%a: tensor<8xf32> {{mhlo.sharding = \"{{devices=[4]<=[4]}}\"}}) \
                 -> (tensor<f32> {{mhlo.sharding = \"{attr}\"}}) {{ return }}"
            )
        };
        let e = text(&out("{unreduced}"), 115).unwrap_err().to_string();
        assert!(e.contains("unreduced sharding"), "{e}");
        assert!(text(&out("{unreduced}"), 81).is_ok());
        assert!(text(&out("{replicated}"), 115).is_ok());
        // An unreduced parameter, or an unreduced value inside the body, compiles.
        let inner = "func.func @main(%a: tensor<8xf32> {mhlo.sharding = \"{unreduced}\"}) \
                     -> (tensor<8xf32>) { %0 = stablehlo.custom_call @Sharding(%a) \
                     {mhlo.sharding = \"{unreduced}\"} : (tensor<8xf32>) -> tensor<8xf32> }";
        assert!(text(inner, 115).is_ok());
    }

    #[test]
    fn custom_calls_xla_interprets_are_refused_in_the_forms_that_abort() {
        let call = |t: &str, sig: &str| {
            format!("func.func @main(%x: tensor<4xf32>) {{\n %0 = stablehlo.custom_call @{t}(%x) {{api_version = 4 : i32}} : {sig}\n}}")
        };
        let one = "(tensor<4xf32>) -> tensor<4xf32>";
        let topk = "(tensor<1x4xf32>) -> (tensor<1x2xf32>, tensor<1x2xi32>)";
        for (t, sig, minor) in [
            ("TopK", one, 81),
            ("SliceToDynamic", one, 81),
            ("PadToStatic", one, 115),
            ("__onednn$matmul", one, 81),
            ("xla.sdy.FuncResultSharding", one, 115),
            (
                "TopK",
                "(tensor<4xf32>) -> (tensor<8xf32>, tensor<8xi32>)",
                115,
            ),
        ] {
            let e = text(&call(t, sig), minor).unwrap_err().to_string();
            assert!(
                e.contains(&format!("@{t}")) && e.contains("interprets itself"),
                "{e}"
            );
        }
        let dynamic = "(tensor<4xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<4>>";
        for (t, sig, minor) in [
            ("TopK", topk, 115),
            ("SliceToDynamic", dynamic, 115),
            ("xla.sdy.FuncResultSharding", one, 81),
            ("Sharding", one, 115),
            ("my_TopK", one, 115),
        ] {
            assert!(text(&call(t, sig), minor).is_ok(), "{t} {sig}");
        }
        // Serialized HLO: a custom_call_target field (28) naming TopK.
        let hlo = [&[0x1a, 9, 0x12, 7, 0xe2, 1, 4][..], b"TopK"].concat();
        assert!(check(&Program::Hlo(hlo.clone()), 115)
            .unwrap_err()
            .to_string()
            .contains("@TopK"));
        assert!(xla_own_target("xla.sdy.X") && xla_own_target("TopK"));
        assert!(!xla_own_target("xla.sdyX") && !xla_own_target("lapack_sgetrf_ffi"));
    }

    #[test]
    fn tensors_past_2_pow_63_bits_are_refused() {
        let n = 1u64 << 31;
        for (ty, shape) in [
            ("i4", format!("{n}x{n}x")),
            ("ui2", format!("{}x", i64::MAX)),
            ("f4E2M1FN", format!("{n}x{n}x")),
            ("f32", format!("{}x", 1u64 << 59)),
        ] {
            let e = text(&one("abs", ty, &shape), 115).unwrap_err().to_string();
            assert!(e.contains("2**63 - 1 bits") && e.contains(ty), "{ty}: {e}");
        }
        // Only the output: a broadcast of a scalar.
        let out = format!(
            "func.func public @main(%a: tensor<i4>) -> tensor<{n}x{n}xi4> {{\n  %0 = \
             stablehlo.broadcast_in_dim %a, dims = [] : (tensor<i4>) -> tensor<{n} x {n} x \
             i4>\n  return %0 : tensor<{n}x{n}xi4>\n}}"
        );
        assert!(text(&out, 115)
            .unwrap_err()
            .to_string()
            .contains("i4[2147483648, 2147483648]"));
        // Under the limit, empty, or dynamic: the plugin decides.
        assert!(text(&one("abs", "i4", &format!("{}x", 1u64 << 60)), 115).is_ok());
        assert!(text(&one("abs", "i4", &format!("{n}x{n}x0x")), 115).is_ok());
        assert!(text(&one("abs", "i4", &format!("?x{n}x")), 115).is_ok());
        assert!(text(&one("abs", "i8", "0x7Fx"), 115).is_ok());
    }

    /// `stablehlo.reduce` whose body is `custom_call @cc2(%a, %b)`, as a portable artifact
    /// and as a serialized HloModuleProto; the same call in a `while` body (artifact).
    const REDUCE_CC_PORTABLE: &str = "4d4cef520d537461626c65484c4f5f76312e31302e3000011d0501050d01030b030b0f13171b1f03472b0d01170b1313131313131313131303150b0b0b0b1f2f0b0b0b0b030d0f130717130702bd051117010303170105071701053517010719170109351701130b17010b1d17010b4517010d1917010f0f030123071d131d151f0109000000001f091100000000000000000b090d011d170501290105290321050911030303012903050b1d048f050150030107047f0301050550050307046b03070f0307070007420905030109560b07030105010307042f03070b05030f0311000b4613090301050103030415030503040d0305060301050100d519090f0b051f151911150f0b116275696c74696e0076686c6f006d6f64756c650072657475726e5f76310066756e635f763100636f6e7374616e745f7631007265647563655f763100637573746f6d5f63616c6c5f7631002d006d61696e007075626c69630063633200082f0b0501010b1719171b1d031f0321112325271729171717";
    const REDUCE_CC_HLO: &str = "0a046d61696e12066d61696e2e321a88020a0a726567696f6e5f302e31122c0a074172675f302e321209706172616d657465721a07100b2a038001013a0098028180808010a20400920500122e0a074172675f312e311209706172616d657465721a07100b2a038001013a00480198028280808010a2040092050012650a0d637573746f6d2d63616c6c2e31120b637573746f6d2d63616c6c1a07100b2a038001013a0e1a012d200488010490010a98010ae2010363633298028380808010a2020a818080801082808080109003019a03040a020000d00301a20400e80404920500222d0a07100b2a038001010a07100b2a038001011207100b2a038001011a074172675f302e321a074172675f312e3128013083808080101afc010a066d61696e2e3212350a074172675f302e331209706172616d657465721a10100b1a01082a060a01008001013201003a0098028180808020a20400920500123f0a0a636f6e7374616e742e311208636f6e7374616e741a07100b2a038001013a00420f0a07100b2a0380010142040000000098028280808020a20400920500124c0a087265647563652e3112067265647563651a07100b2a038001013a0e1a012d200388010390010898010872010098028380808020a2020a81808080208280808020b2020101a2040092050022240a10100b1a01082a060a01008001013201001207100b2a038001011a074172675f302e332802308380808020221f0a10100b1a01082a060a01008001013201001207100b2a038001011a027030300242009201009a0100";
    const WHILE_CC_PORTABLE: &str = "4d4cef520d537461626c65484c4f5f76312e31302e300001210501051101030b030f0f13171b1f232703593b0f01210b131313131313131313131313131313031b0b0b0b0b1f1f0b0b0b0b1f0b0b030f0f0f1707070f0702f105151701093917010957170103031701050717010535170107151701091917011f0b1701151d170117191701191917011b0f17010d1d17010f191701110f030123051d171d191f0109000000001f0109010000000b090d011d1b05011f0109030000000901070b2901092901071103030303091b29010d0104e705015007010704d7030105075009030704c303090f03070b0003420d05030109160f0501030503010b048703090f05030307050003421b0703010f461d09030b05010505041f0307030b130503030705000342130b03010b061503010501050d46170d03030503030504190507090504110307060301050100fb1d090f0b05171f0f131115190f0b116275696c74696e0076686c6f006d6f64756c6500636f6e7374616e745f76310072657475726e5f76310066756e635f7631007768696c655f7631006164645f763100637573746f6d5f63616c6c5f763100636f6d706172655f7631002d006d61696e007075626c6963006363320008390f0501010b212321252703290335053739032b112d2f312133212121";

    #[test]
    fn custom_calls_in_reducer_regions_are_refused_from_bytecode_and_hlo() {
        for program in [
            Program::mlir(unhex(REDUCE_CC_PORTABLE)),
            Program::Hlo(unhex(REDUCE_CC_HLO)),
        ] {
            let e = check(&program, 115).unwrap_err().to_string();
            assert!(e.contains("a region of stablehlo.reduce"), "{e}");
        }
        assert!(check(&Program::mlir(unhex(WHILE_CC_PORTABLE)), 115).is_ok());
        // Text: named with its target.
        let src = "func.func public @main(%x: tensor<8xf32>) -> tensor<f32> {\n %z = \
                   stablehlo.constant dense<0.0> : tensor<f32>\n %r = \"stablehlo.reduce\"(%x, \
                   %z) ({\n ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n %s = \
                   stablehlo.custom_call @t(%a, %b) : (tensor<f32>, tensor<f32>) -> \
                   tensor<f32>\n stablehlo.return %s : tensor<f32>\n }) {dimensions = \
                   array<i64: 0>} : (tensor<8xf32>, tensor<f32>) -> tensor<f32>\n return %r : \
                   tensor<f32>\n}";
        let e = text(src, 81).unwrap_err().to_string();
        assert!(
            e.contains("custom call to @t sits in a region of stablehlo.reduce"),
            "{e}"
        );
    }

    #[test]
    fn other_programs_pass() {
        assert!(text(&one("concatenate", "f32", "4x"), 81).is_ok());
        assert!(text("not mlir at all", 81).is_ok());
        assert!(check(&Program::mlir(b"ML\xefR\x03".to_vec()), 81).is_ok());
    }
}
