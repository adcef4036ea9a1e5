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
}

#[derive(Clone, PartialEq, prost::Message)]
struct ShapeProto {
    #[prost(int32, tag = "2")]
    element_type: i32,
    #[prost(int64, repeated, tag = "3")]
    dimensions: Vec<i64>,
    #[prost(message, repeated, tag = "4")]
    tuple_shapes: Vec<ShapeProto>,
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
        _ => return None,
    })
}

/// The parameters of the entry computation as `(type, dims)`, or `None` when the module
/// cannot be read or uses shapes rpjrt does not check (tuples, unknown types).
///
/// `format` is what the plugin reported: `hlo` (an `HloModuleProto`) or `hlo_with_config`
/// (the module wrapped with its configuration).
pub(crate) fn entry_parameters(
    module: &[u8],
    format: &str,
) -> Option<Vec<(ElementType, Vec<i64>)>> {
    let m = match format {
        "hlo_with_config" => HloModuleProtoWithConfig::decode(module).ok()?.hlo_module?,
        "hlo" | "" => HloModuleProto::decode(module).ok()?,
        _ => return None,
    };
    let shape = m.host_program_shape?;
    shape
        .parameters
        .iter()
        .map(|p| {
            if !p.tuple_shapes.is_empty() {
                return None;
            }
            Some((from_primitive(p.element_type)?, p.dimensions.clone()))
        })
        .collect()
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
    let m = match format {
        "hlo_with_config" => {
            HloModuleAliasingWithConfig::decode(module)
                .ok()?
                .hlo_module?
        }
        "hlo" | "" => HloModuleAliasing::decode(module).ok()?,
        _ => return None,
    };
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
