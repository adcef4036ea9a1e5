//! Reads the entry signature out of a compiled module (`HloModuleProto`), so arguments can
//! be checked before an execute call.

use prost::Message;

use crate::dtype::ElementType;

/// `HloModuleProtoWithConfig`: the module plus its compile configuration.
#[derive(Clone, PartialEq, prost::Message)]
struct HloModuleProtoWithConfig {
    #[prost(message, optional, tag = "1")]
    hlo_module: Option<HloModuleProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct HloModuleProto {
    #[prost(message, optional, tag = "4")]
    host_program_shape: Option<ProgramShapeProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ProgramShapeProto {
    #[prost(message, repeated, tag = "1")]
    parameters: Vec<ShapeProto>,
    #[prost(message, optional, tag = "2")]
    result: Option<ShapeProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ShapeProto {
    #[prost(int32, tag = "2")]
    element_type: i32,
    #[prost(int64, repeated, tag = "3")]
    dimensions: Vec<i64>,
    #[prost(message, repeated, tag = "4")]
    tuple_shapes: Vec<ShapeProto>,
    #[prost(message, optional, tag = "5")]
    layout: Option<LayoutProto>,
    #[prost(bool, repeated, tag = "6")]
    is_dynamic_dimension: Vec<bool>,
}

impl ShapeProto {
    /// Why rpjrt cannot pass or read an array of this shape (`what`: "parameter 0"): a
    /// layout other than row-major (rpjrt's buffers are row-major, and the plugins neither
    /// convert an argument nor, all of them, an output they read back), or a dynamic
    /// dimension (read back at its bound, the padding included).
    fn unusable(&self, what: &str) -> Option<String> {
        let rank = self.dimensions.len() as i64;
        let row_major = (0..rank).rev().collect::<Vec<_>>();
        // Only dimensions longer than 1 order the bytes: [1, 4]{0,1} is row-major memory,
        // and an empty array has none.
        let order = |m2m: &[i64]| -> Vec<i64> {
            let len = |d: i64| usize::try_from(d).ok().and_then(|d| self.dimensions.get(d));
            m2m.iter()
                .copied()
                .filter(|&d| len(d).is_none_or(|&n| n > 1))
                .collect()
        };
        let empty = self.dimensions.contains(&0);
        let m2m = self.layout.as_ref().map(|l| &l.minor_to_major);
        if let Some(m2m) = m2m.filter(|m| !empty && order(m) != order(&row_major)) {
            return Some(format!(
                "{what} ({}) is laid out minor_to_major {m2m:?} in the compiled program, not \
                 row-major {row_major:?}; rpjrt passes and reads arrays row-major, so the \
                 numbers would be transposed: compile it without the layout constraint \
                 (mhlo.layout_mode, or a non-default Layout in jax)",
                describe(self)
            ));
        }
        if self.is_dynamic_dimension.iter().any(|&d| d) {
            return Some(format!(
                "{what} ({}) has a dynamic dimension (bounded); rpjrt reads arrays at their \
                 static shape, which would include the padding: slice to a static size in \
                 the program instead",
                describe(self)
            ));
        }
        None
    }
}

/// The parts of an `HloModuleProto` the compile screen reads: every instruction's opcode and
/// shape.
#[derive(Clone, PartialEq, prost::Message)]
struct ScreenModule {
    #[prost(message, repeated, tag = "3")]
    computations: Vec<ScreenComputation>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ScreenComputation {
    #[prost(message, repeated, tag = "2")]
    instructions: Vec<ScreenInstruction>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ScreenInstruction {
    #[prost(string, tag = "2")]
    opcode: String,
    #[prost(message, optional, tag = "3")]
    shape: Option<ShapeProto>,
}

/// What a serialized `HloModuleProto` uses, for the compile screen: each opcode as
/// `hlo.<opcode>`, the element types of every instruction's shape (tuple leaves included)
/// with whether one has no elements, and the element types of `constant` instructions.
/// `None` when the bytes are not a module.
pub(crate) fn program_uses(module: &[u8]) -> Option<crate::mlir::Uses> {
    fn leaves<'a>(s: &'a ShapeProto, depth: usize, out: &mut Vec<(ElementType, bool, &'a [i64])>) {
        if depth > 64 {
            return;
        }
        for t in &s.tuple_shapes {
            leaves(t, depth + 1, out);
        }
        if let Some(ty) = from_primitive(s.element_type) {
            out.push((ty, s.dimensions.contains(&0), &s.dimensions));
        }
    }
    let m = ScreenModule::decode(module).ok()?;
    let mut uses = crate::mlir::Uses {
        constant_types: Some(Vec::new()),
        ..Default::default()
    };
    for c in &m.computations {
        for i in &c.instructions {
            uses.ops.insert(format!("hlo.{}", i.opcode));
            let mut found = Vec::new();
            if let Some(shape) = &i.shape {
                leaves(shape, 0, &mut found);
            }
            for (ty, zero, dims) in found {
                uses.note(ty, zero);
                uses.size(ty, dims, ty.storage_bits());
                if i.opcode == "constant" {
                    let c = uses.constant_types.get_or_insert_with(Vec::new);
                    if !c.contains(&ty) {
                        c.push(ty);
                    }
                }
            }
        }
    }
    Some(uses)
}

/// The parts of a module [`custom_call_layouts`] reads: typed-FFI custom calls' targets,
/// their result shapes and their constrained operand shapes, with layouts.
#[derive(Clone, PartialEq, prost::Message)]
struct CallsWithConfig {
    #[prost(message, optional, tag = "1")]
    hlo_module: Option<CallsModule>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct CallsModule {
    #[prost(message, repeated, tag = "3")]
    computations: Vec<CallsComputation>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct CallsComputation {
    #[prost(message, repeated, tag = "2")]
    instructions: Vec<CallInstruction>,
    #[prost(int64, tag = "5")]
    id: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct CallInstruction {
    #[prost(string, tag = "2")]
    opcode: String,
    #[prost(message, optional, tag = "3")]
    shape: Option<LaidOutShape>,
    #[prost(string, tag = "28")]
    custom_call_target: String,
    #[prost(message, repeated, tag = "57")]
    operand_shapes_with_layout: Vec<LaidOutShape>,
    #[prost(int32, tag = "77")]
    custom_call_api_version: i32,
    #[prost(bytes = "vec", tag = "43")]
    backend_config: Vec<u8>,
    #[prost(int64, repeated, tag = "38")]
    called_computation_ids: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct LaidOutShape {
    #[prost(int64, repeated, tag = "3")]
    dimensions: Vec<i64>,
    #[prost(message, repeated, tag = "4")]
    tuple_shapes: Vec<LaidOutShape>,
    #[prost(message, optional, tag = "5")]
    layout: Option<LayoutProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct LayoutProto {
    #[prost(int64, repeated, tag = "1")]
    minor_to_major: Vec<i64>,
}

/// A typed-FFI custom call whose operand or result is not row-major: `(target, "operand
/// k" or "result k", minor_to_major)`.
pub(crate) type OddLayout = (String, String, Vec<i64>);

/// Every typed-FFI (`api_version = 4`) custom call of a compiled module whose result, or
/// constrained operand, has a layout other than row-major (`operand_layouts` /
/// `result_layouts`). `None` when the module cannot be read.
/// The backend_config text of each typed-FFI custom call of a serialized HloModuleProto,
/// with its target (`None` when the bytes are not such a module).
pub(crate) fn ffi_backend_configs(module: &[u8]) -> Option<Vec<(String, String)>> {
    let m = CallsModule::decode(module).ok()?;
    let calls = m.computations.iter().flat_map(|c| &c.instructions);
    Some(
        calls
            .filter(|i| i.opcode == "custom-call" && i.custom_call_api_version == 4)
            .map(|i| {
                (
                    format!("{:?}", i.custom_call_target),
                    String::from_utf8_lossy(&i.backend_config).into_owned(),
                )
            })
            .collect(),
    )
}

/// A custom call in a computation (at any depth) that an instruction of an opcode barring
/// them calls, in a serialized HloModuleProto (`screen`).
pub(crate) fn custom_call_called_by(module: &[u8]) -> Option<rpjrt_raw::ffi::RegionCustomCall> {
    let m = CallsModule::decode(module).ok()?;
    // The computations holding a custom call, directly or in those they call: its target.
    let mut holds = std::collections::HashMap::new();
    for _ in 0..=m.computations.len() {
        let before = holds.len();
        for c in &m.computations {
            let t = c.instructions.iter().find_map(|j| match j.opcode.as_str() {
                "custom-call" => Some(j.custom_call_target.as_str()),
                _ => j
                    .called_computation_ids
                    .iter()
                    .find_map(|i| holds.get(i).copied()),
            });
            if let Some(t) = t {
                holds.entry(c.id).or_insert(t);
            }
        }
        if holds.len() == before {
            break;
        }
    }
    let mut calls = m.computations.iter().flat_map(|c| &c.instructions);
    calls.find_map(|i| {
        let target = i.called_computation_ids.iter().find_map(|c| holds.get(c))?;
        rpjrt_raw::ffi::RegionCustomCall::in_hlo(&i.opcode, target)
    })
}

pub(crate) fn custom_call_layouts(module: &[u8], format: &str) -> Option<Vec<OddLayout>> {
    fn leaves<'a>(s: &'a LaidOutShape, depth: usize, out: &mut Vec<&'a LaidOutShape>) {
        match s.tuple_shapes.is_empty() {
            true => out.push(s),
            false if depth < 64 => s
                .tuple_shapes
                .iter()
                .for_each(|t| leaves(t, depth + 1, out)),
            false => {}
        }
    }
    let m = match format {
        "hlo_with_config" => CallsWithConfig::decode(module).ok()?.hlo_module?,
        "hlo" | "" => CallsModule::decode(module).ok()?,
        _ => return None,
    };
    let mut odd = Vec::new();
    let calls = m.computations.iter().flat_map(|c| &c.instructions);
    for i in calls.filter(|i| i.opcode == "custom-call" && i.custom_call_api_version == 4) {
        let mut check = |what: &str, shapes: Vec<&LaidOutShape>| {
            for (k, s) in shapes.into_iter().enumerate() {
                let m2m = s
                    .layout
                    .as_ref()
                    .map(|l| l.minor_to_major.clone())
                    .unwrap_or_default();
                if !row_major_in_memory(&s.dimensions, &m2m) {
                    odd.push((i.custom_call_target.clone(), format!("{what} {k}"), m2m));
                }
            }
        };
        let mut results = Vec::new();
        if let Some(s) = &i.shape {
            leaves(s, 0, &mut results);
        }
        check("result", results);
        check("operand", i.operand_shapes_with_layout.iter().collect());
    }
    Some(odd)
}

/// Whether elements laid out with `minor_to_major` (empty: the default) lie in memory in
/// row-major order: the dimensions other than those of size 1 (which do not change the
/// order) go from major to minor in order, and a shape with no elements has no order.
fn row_major_in_memory(dims: &[i64], m2m: &[i64]) -> bool {
    let rank = dims.len() as i64;
    let mut sorted = m2m.to_vec();
    sorted.sort_unstable();
    let big = |d: &i64| usize::try_from(*d).is_ok_and(|d| dims.get(d) != Some(&1));
    m2m.is_empty()
        || dims.contains(&0)
        || (sorted.into_iter().eq(0..rank)
            && m2m
                .iter()
                .copied()
                .filter(big)
                .eq((0..rank).rev().filter(big)))
}

/// XLA's `PrimitiveType` numbering (differs from PJRT's buffer type codes).
fn from_primitive(code: i32) -> Option<ElementType> {
    use ElementType::*;
    Some(match code {
        1 => Pred,
        2 => S8,
        3 => S16,
        4 => S32,
        5 => S64,
        6 => U8,
        7 => U16,
        8 => U32,
        9 => U64,
        10 => F16,
        11 => F32,
        12 => F64,
        15 => C64,
        16 => BF16,
        17 => Token,
        18 => C128,
        19 => F8E5M2,
        20 => F8E4M3FN,
        21 => S4,
        22 => U4,
        23 => F8E4M3B11FNUZ,
        24 => F8E5M2FNUZ,
        25 => F8E4M3FNUZ,
        26 => S2,
        27 => U2,
        28 => F8E4M3,
        29 => F8E3M4,
        30 => S1,
        31 => U1,
        32 => F4E2M1FN,
        33 => F8E8M0FNU,
        // Read off the 0.115 plugin's compiled modules (the FFI header has no float6 codes).
        35 => F6E3M2FN,
        36 => F6E2M3FN,
        _ => return None,
    })
}

/// What the entry computation's parameter list says about the arguments an execution needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Signature {
    /// Every argument is an array of this type and shape, in order.
    Arrays(Vec<(ElementType, Vec<i64>)>),
    /// The executable takes parameters that PJRT cannot pass as a list of array buffers
    /// (a tuple parameter, a type rpjrt does not know): why, in words. Executing it is
    /// refused, since the plugins abort on such calls instead of returning an error.
    Unsupported(String),
}

/// Reads the entry computation's parameters, or `None` when the module cannot be read
/// (an unknown format, a malformed proto, no program shape).
///
/// `format` is what the plugin reported: `hlo` (an `HloModuleProto`) or `hlo_with_config`
/// (the module wrapped with its configuration). `tupled_arguments` is the compile option
/// `parameter_is_tupled_arguments`: the entry then takes one tuple, whose leaves are what
/// the caller passes.
pub(crate) fn entry_signature(
    module: &[u8],
    format: &str,
    tupled_arguments: bool,
) -> Option<Signature> {
    let m = match format {
        "hlo_with_config" => HloModuleProtoWithConfig::decode(module).ok()?.hlo_module?,
        "hlo" | "" => HloModuleProto::decode(module).ok()?,
        _ => return None,
    };
    let shape = m.host_program_shape?;
    let params = shape.parameters;
    let flat: Vec<&ShapeProto> = match params.as_slice() {
        [one] if tupled_arguments && one.element_type == TUPLE => one.tuple_shapes.iter().collect(),
        _ => params.iter().collect(),
    };
    let mut out = Vec::with_capacity(flat.len());
    for (i, p) in flat.iter().enumerate() {
        if p.element_type == TUPLE || !p.tuple_shapes.is_empty() {
            return Some(Signature::Unsupported(format!(
                "parameter {i} is a tuple ({}); PJRT passes only arrays, so such a program \
                 cannot be called (give the entry function one parameter per array, or compile \
                 a single tuple parameter with parameter_is_tupled_arguments)",
                describe(p)
            )));
        }
        if let Some(why) = p.unusable(&format!("parameter {i}")) {
            return Some(Signature::Unsupported(why));
        }
        match from_primitive(p.element_type) {
            Some(t) => out.push((t, p.dimensions.clone())),
            None => {
                return Some(Signature::Unsupported(format!(
                    "parameter {i} has XLA element type {}, which rpjrt does not know",
                    p.element_type
                )))
            }
        }
    }
    let results: Vec<&ShapeProto> = match &shape.result {
        Some(r) if r.element_type == TUPLE => r.tuple_shapes.iter().collect(),
        Some(r) => vec![r],
        None => Vec::new(),
    };
    for (k, r) in results.iter().enumerate() {
        if let Some(why) = r.unusable(&format!("output {k}")) {
            return Some(Signature::Unsupported(why));
        }
    }
    Some(Signature::Arrays(out))
}

/// XLA's `PrimitiveType::TUPLE`.
const TUPLE: i32 = 13;

/// A short readable form of a shape, e.g. `(f32[2], f32[2])`.
fn describe(s: &ShapeProto) -> String {
    if s.element_type == TUPLE || !s.tuple_shapes.is_empty() {
        let parts: Vec<String> = s.tuple_shapes.iter().map(describe).collect();
        return format!("({})", parts.join(", "));
    }
    match from_primitive(s.element_type) {
        Some(t) => format!("{t}{:?}", s.dimensions),
        None => format!("type{}{:?}", s.element_type, s.dimensions),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_row_major_in_memory_pass_and_others_are_odd() {
        let ok = |dims: &[i64], m2m: &[i64]| row_major_in_memory(dims, m2m);
        // Row-major, the default, and size-1 dimensions placed anywhere.
        assert!(ok(&[2, 3], &[1, 0]) && ok(&[2, 3], &[]));
        assert!(ok(&[1, 4], &[0, 1]) && ok(&[2, 1, 3], &[2, 0, 1]));
        assert!(ok(&[2, 1, 3], &[1, 2, 0]) && ok(&[1, 1], &[0, 1]) && ok(&[5], &[0]));
        assert!(ok(&[4, 1, 1, 3], &[3, 2, 0, 1]) && ok(&[], &[]));
        // No elements: no order to get wrong.
        assert!(ok(&[0, 3], &[0, 1]) && ok(&[3, 0, 2], &[0, 1, 2]));
        // Column-major and other orders of dimensions bigger than 1; malformed layouts.
        assert!(!ok(&[2, 3], &[0, 1]) && !ok(&[2, 1, 3], &[0, 2, 1]));
        assert!(!ok(&[2, 3, 4], &[1, 2, 0]) && !ok(&[2, 3], &[1]) && !ok(&[2, 3], &[1, 1]));
        assert!(!ok(&[2, 3], &[2, 0]) && !ok(&[2, 3], &[-1, 0]) && !ok(&[1, 3], &[1, 0, 2]));
    }

    fn module(params: Vec<ShapeProto>) -> Vec<u8> {
        HloModuleProto {
            host_program_shape: Some(ProgramShapeProto {
                parameters: params,
                result: None,
            }),
        }
        .encode_to_vec()
    }

    fn array(t: i32, dims: &[i64]) -> ShapeProto {
        ShapeProto {
            element_type: t,
            dimensions: dims.to_vec(),
            ..Default::default()
        }
    }

    fn tuple(parts: Vec<ShapeProto>) -> ShapeProto {
        ShapeProto {
            element_type: TUPLE,
            tuple_shapes: parts,
            ..Default::default()
        }
    }

    fn screened(instructions: &[(&str, i32, &[i64])]) -> crate::error::Result<()> {
        let module = ScreenModule {
            computations: vec![ScreenComputation {
                instructions: instructions
                    .iter()
                    .map(|(op, t, dims)| ScreenInstruction {
                        opcode: op.to_string(),
                        shape: Some(array(*t, dims)),
                    })
                    .collect(),
            }],
        };
        let program = crate::program::Program::hlo(module.encode_to_vec());
        crate::screen::check(&program, 115)
    }

    #[test]
    fn hlo_modules_are_screened() {
        // 36 is F6E2M3FN, 26 is S2, 11 is F32.
        assert!(screened(&[("parameter", 36, &[2]), ("reshape", 36, &[2, 1])]).is_ok());
        let e = screened(&[("parameter", 36, &[2]), ("concatenate", 36, &[4])]).unwrap_err();
        assert!(e.to_string().contains("hlo.concatenate"), "{e}");
        let e = screened(&[("parameter", 36, &[0, 2])]).unwrap_err();
        assert!(e.to_string().contains("no elements"), "{e}");
        let e = screened(&[("constant", 36, &[2])]).unwrap_err();
        assert!(e.to_string().contains("constant"), "{e}");
        assert!(screened(&[("parameter", 36, &[2]), ("constant", 11, &[])]).is_ok());
        let e = screened(&[("parameter", 26, &[2]), ("concatenate", 26, &[4])]).unwrap_err();
        assert!(e.to_string().contains("int2"), "{e}");
        assert!(
            crate::screen::check(&crate::program::Program::hlo(b"\xff\xff".to_vec()), 115).is_ok()
        );
    }

    #[test]
    fn arrays_are_read() {
        let m = module(vec![array(11, &[2]), array(4, &[])]);
        assert_eq!(
            entry_signature(&m, "hlo", false),
            Some(Signature::Arrays(vec![
                (ElementType::F32, vec![2]),
                (ElementType::S32, vec![])
            ]))
        );
    }

    #[test]
    fn layouts_other_than_row_major_and_dynamic_outputs_are_unsupported() {
        let laid_out = |m2m: &[i64]| ShapeProto {
            layout: Some(LayoutProto {
                minor_to_major: m2m.to_vec(),
            }),
            ..array(11, &[3, 4])
        };
        let with = |params: Vec<ShapeProto>, result: Option<ShapeProto>| {
            let m = HloModuleProto {
                host_program_shape: Some(ProgramShapeProto {
                    parameters: params,
                    result,
                }),
            };
            entry_signature(&m.encode_to_vec(), "hlo", false)
        };
        let row_major = with(vec![laid_out(&[1, 0])], Some(laid_out(&[1, 0])));
        assert_eq!(
            row_major,
            Some(Signature::Arrays(vec![(ElementType::F32, vec![3, 4])]))
        );
        let Some(Signature::Unsupported(why)) = with(vec![laid_out(&[0, 1])], None) else {
            panic!("a column-major parameter was accepted")
        };
        // Size-1 and size-0 dimensions do not order the bytes.
        for dims in [[1, 4], [4, 1], [1, 1], [0, 3]] {
            let same_memory = ShapeProto {
                dimensions: dims.to_vec(),
                ..laid_out(&[0, 1])
            };
            let got = with(vec![same_memory], None);
            assert!(
                matches!(got, Some(Signature::Arrays(_))),
                "{dims:?}: {got:?}"
            );
        }
        assert!(
            why.contains("parameter 0 (float32[3, 4])") && why.contains("[0, 1]"),
            "{why}"
        );
        let outputs = tuple(vec![array(11, &[2]), laid_out(&[0, 1])]);
        let Some(Signature::Unsupported(why)) = with(vec![], Some(outputs)) else {
            panic!("a column-major output was accepted")
        };
        assert!(why.starts_with("output 1 "), "{why}");
        let dynamic = ShapeProto {
            is_dynamic_dimension: vec![true],
            ..array(11, &[8])
        };
        let Some(Signature::Unsupported(why)) = with(vec![], Some(dynamic)) else {
            panic!("a dynamic output was accepted")
        };
        assert!(why.contains("dynamic dimension"), "{why}");
    }

    #[test]
    fn tuple_parameters_are_unsupported_not_unknown() {
        let m = module(vec![tuple(vec![array(11, &[2]), array(11, &[2])])]);
        match entry_signature(&m, "hlo", false) {
            Some(Signature::Unsupported(why)) => {
                assert!(
                    why.contains("parameter 0 is a tuple ((float32[2], float32[2]))"),
                    "{why}"
                )
            }
            other => panic!("{other:?}"),
        }
        // An empty tuple is a tuple too.
        let m = module(vec![array(11, &[2]), tuple(vec![])]);
        assert!(matches!(
            entry_signature(&m, "hlo", false),
            Some(Signature::Unsupported(_))
        ));
        // Nested tuples inside a tupled argument list stay unsupported.
        let m = module(vec![tuple(vec![tuple(vec![array(11, &[2])])])]);
        assert!(matches!(
            entry_signature(&m, "hlo", true),
            Some(Signature::Unsupported(_))
        ));
    }

    #[test]
    fn tupled_arguments_are_flattened() {
        let m = module(vec![tuple(vec![array(11, &[2]), array(12, &[3])])]);
        assert_eq!(
            entry_signature(&m, "hlo", true),
            Some(Signature::Arrays(vec![
                (ElementType::F32, vec![2]),
                (ElementType::F64, vec![3])
            ]))
        );
    }

    #[test]
    fn unknown_types_and_unreadable_modules() {
        let m = module(vec![array(999, &[2])]);
        assert!(matches!(
            entry_signature(&m, "hlo", false),
            Some(Signature::Unsupported(_))
        ));
        assert_eq!(entry_signature(b"\xff\xff\xff", "hlo", false), None);
        assert_eq!(entry_signature(&m, "mlir", false), None);
    }
}

/// `HloModuleProto` fields read for the entry's input/output aliasing.
#[derive(Clone, PartialEq, prost::Message)]
struct HloModuleAliasing {
    #[prost(message, optional, tag = "8")]
    input_output_alias: Option<HloInputOutputAliasProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct HloModuleAliasingWithConfig {
    #[prost(message, optional, tag = "1")]
    hlo_module: Option<HloModuleAliasing>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct HloInputOutputAliasProto {
    #[prost(message, repeated, tag = "1")]
    entries: Vec<AliasEntryProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct AliasEntryProto {
    #[prost(int64, repeated, tag = "1")]
    output_shape_index: Vec<i64>,
    #[prost(int64, tag = "2")]
    parameter_number: i64,
    #[prost(int64, repeated, tag = "3")]
    parameter_shape_index: Vec<i64>,
}

/// The compiled module's input/output aliases as `(output, parameter)` pairs: output
/// `output` (an index into the flat result list) may reuse parameter `parameter`'s buffer
/// when that argument is donated. `None` when the module cannot be read; aliases of tuple
/// elements inside a parameter are left out.
pub(crate) fn entry_aliases(module: &[u8], format: &str) -> Option<Vec<(usize, usize)>> {
    let m = read_module(module, format, |w: HloModuleAliasingWithConfig| {
        w.hlo_module
    })?;
    let Some(aliases) = m.input_output_alias else {
        return Some(Vec::new());
    };
    Some(
        aliases
            .entries
            .iter()
            .filter(|e| e.parameter_shape_index.is_empty() && e.output_shape_index.len() <= 1)
            .filter_map(|e| {
                let out = e.output_shape_index.first().copied().unwrap_or(0);
                Some((
                    usize::try_from(out).ok()?,
                    usize::try_from(e.parameter_number).ok()?,
                ))
            })
            .collect(),
    )
}

/// The part `M` of a compiled module given as `format`: an `HloModuleProto` ("hlo"), or
/// one wrapped with its configuration (`W`, "hlo_with_config"), unwrapped by `inner`.
fn read_module<M: Message + Default, W: Message + Default>(
    module: &[u8],
    format: &str,
    inner: impl FnOnce(W) -> Option<M>,
) -> Option<M> {
    match format {
        "hlo_with_config" => inner(W::decode(module).ok()?),
        "hlo" | "" => M::decode(module).ok(),
        _ => None,
    }
}

/// `HloModuleProto` fields read for the shardings the SPMD partitioner gave the entry.
#[derive(Clone, PartialEq, prost::Message)]
struct HloModuleShardings {
    #[prost(bytes = "vec", optional, tag = "12")]
    spmd_output_sharding: Option<Vec<u8>>,
    #[prost(bytes = "vec", repeated, tag = "14")]
    spmd_parameters_shardings: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct HloModuleShardingsWithConfig {
    #[prost(message, optional, tag = "1")]
    hlo_module: Option<HloModuleShardings>,
}

/// The serialized `OpSharding`s the SPMD partitioner recorded in a compiled module: one
/// per parameter, or (`parameters` false) the output's, a tuple's when there are several
/// outputs. Empty for a module compiled without partitioning; `None` when the module
/// cannot be read.
pub(crate) fn spmd_shardings(
    module: &[u8],
    format: &str,
    parameters: bool,
) -> Option<Vec<Vec<u8>>> {
    let m = read_module(module, format, |w: HloModuleShardingsWithConfig| {
        w.hlo_module
    })?;
    Some(if parameters {
        m.spmd_parameters_shardings
    } else {
        m.spmd_output_sharding.into_iter().collect()
    })
}
