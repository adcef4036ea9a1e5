//! What a compiled executable says about itself: optimized program, cost analysis, memory
//! stats, memory kinds, shardings, layouts, fingerprint and compile options.
//!
//! Every query returns [`Error::Unsupported`] where the plugin lacks it (an old PJRT
//! version, an empty slot, a missing or too-short extension struct, or the plugin answering
//! UNIMPLEMENTED), never a read past what the plugin provides.

use crate::client::executable::Executable;
use crate::error::{Error, Result};
use crate::raw::aot as raw;
use crate::raw::value::Value;
use rpjrt_xla::{OpSharding, ShardingType};

/// Compiled memory statistics of an executable, in bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompiledMemoryStats {
    /// Generated code, device memory.
    pub generated_code_size_in_bytes: i64,
    /// Arguments, device memory.
    pub argument_size_in_bytes: i64,
    /// Outputs, device memory.
    pub output_size_in_bytes: i64,
    /// Arguments reused for outputs, device memory.
    pub alias_size_in_bytes: i64,
    /// Temporaries, device memory.
    pub temp_size_in_bytes: i64,
    /// Generated code, host memory.
    pub host_generated_code_size_in_bytes: i64,
    /// Arguments, host memory.
    pub host_argument_size_in_bytes: i64,
    /// Outputs, host memory.
    pub host_output_size_in_bytes: i64,
    /// Arguments reused for outputs, host memory.
    pub host_alias_size_in_bytes: i64,
    /// Temporaries, host memory.
    pub host_temp_size_in_bytes: i64,
    /// Peak device memory (PJRT 0.72 and newer).
    pub peak_memory_in_bytes: Option<i64>,
    /// Total device memory (newest plugins only).
    pub total_size_in_bytes: Option<i64>,
}

impl CompiledMemoryStats {
    /// `(name, value)` of every field the plugin reported.
    pub fn fields(&self) -> Vec<(&'static str, i64)> {
        let mut v = vec![
            (
                "generated_code_size_in_bytes",
                self.generated_code_size_in_bytes,
            ),
            ("argument_size_in_bytes", self.argument_size_in_bytes),
            ("output_size_in_bytes", self.output_size_in_bytes),
            ("alias_size_in_bytes", self.alias_size_in_bytes),
            ("temp_size_in_bytes", self.temp_size_in_bytes),
            (
                "host_generated_code_size_in_bytes",
                self.host_generated_code_size_in_bytes,
            ),
            (
                "host_argument_size_in_bytes",
                self.host_argument_size_in_bytes,
            ),
            ("host_output_size_in_bytes", self.host_output_size_in_bytes),
            ("host_alias_size_in_bytes", self.host_alias_size_in_bytes),
            ("host_temp_size_in_bytes", self.host_temp_size_in_bytes),
        ];
        if let Some(p) = self.peak_memory_in_bytes {
            v.push(("peak_memory_in_bytes", p));
        }
        if let Some(t) = self.total_size_in_bytes {
            v.push(("total_size_in_bytes", t));
        }
        v
    }
}

/// A layout of one parameter or output as the plugin serializes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompiledLayout {
    /// Dimension order from minor to major, when the serialized form could be read.
    pub minor_to_major: Option<Vec<i64>>,
    /// The plugin's serialized layout (XLA's layout text, e.g. `{1,0}`).
    pub serialized: Vec<u8>,
}

/// Reads `minor_to_major` from the layout text XLA serializes (`{1,0}`, optionally followed
/// by tiling and memory-space details after a `:`).
fn parse_minor_to_major(serialized: &[u8]) -> Option<Vec<i64>> {
    let text = std::str::from_utf8(serialized).ok()?.trim();
    let inner = text.strip_prefix('{')?;
    let end = inner.find([':', '}'])?;
    let dims = inner[..end].trim();
    if dims.is_empty() {
        return Some(Vec::new());
    }
    dims.split(',').map(|d| d.trim().parse().ok()).collect()
}

fn decode_all(all: Vec<Vec<u8>>, what: &str) -> Result<Vec<OpSharding>> {
    all.iter()
        .enumerate()
        .map(|(i, b)| {
            OpSharding::decode(b)
                .map_err(|e| Error::invalid(format!("the plugin's sharding of {what} {i}: {e}")))
        })
        .collect()
}

fn layout_of(serialized: Vec<u8>) -> CompiledLayout {
    CompiledLayout {
        minor_to_major: parse_minor_to_major(&serialized),
        serialized,
    }
}

impl Executable {
    /// The optimized program the plugin compiled: `(format, bytes)`, e.g.
    /// `("hlo_with_config", <HloModuleProtoWithConfig>)`.
    pub fn optimized_program(&self) -> Result<(String, Vec<u8>)> {
        let (core, loaded) = self.raw_parts()?;
        let (code, format) = loaded
            .executable()
            .optimized_program()
            .map_err(|e| raw::unimplemented_as_unsupported(core.api(), e, "optimized program"))?;
        Ok((format, code))
    }

    /// The optimized HLO as text, where the plugin hands out a textual form. The CPU
    /// plugins give only a binary `HloModuleProto`: `Unsupported` there.
    pub fn optimized_hlo_text(&self) -> Result<String> {
        let (format, code) = self.optimized_program()?;
        match std::str::from_utf8(&code) {
            Ok(text) if format == "hlo_text" || format == "mlir" || format == "text" => {
                Ok(text.to_string())
            }
            _ => {
                let (core, _) = self.raw_parts()?;
                Err(Error::Unsupported {
                    what: format!(
                        "optimized HLO text (the plugin gives the optimized program only as \
                         binary {format:?}; see optimized_program())"
                    ),
                    needs: core.api().version(),
                    plugin: core.api().version(),
                    missing_slot: true,
                })
            }
        }
    }

    /// The plugin's cost analysis (`flops`, `bytes accessed`, ...).
    pub fn cost_analysis(&self) -> Result<Vec<(String, Value)>> {
        let (core, loaded) = self.raw_parts()?;
        let values = raw::exe_cost_analysis(loaded)
            .map_err(|e| raw::unimplemented_as_unsupported(core.api(), e, "cost analysis"))?;
        Ok(values
            .into_iter()
            .map(|(k, v)| (k, Value::from(v)))
            .collect())
    }

    /// Compiled memory statistics, with the fields the plugin's version has.
    pub fn compiled_memory_stats(&self) -> Result<CompiledMemoryStats> {
        let (core, loaded) = self.raw_parts()?;
        let m = raw::exe_memory_stats(loaded).map_err(|e| {
            raw::unimplemented_as_unsupported(core.api(), e, "compiled memory stats")
        })?;
        Ok(CompiledMemoryStats {
            generated_code_size_in_bytes: m.device[0],
            argument_size_in_bytes: m.device[1],
            output_size_in_bytes: m.device[2],
            alias_size_in_bytes: m.device[3],
            temp_size_in_bytes: m.device[4],
            host_generated_code_size_in_bytes: m.host[0],
            host_argument_size_in_bytes: m.host[1],
            host_output_size_in_bytes: m.host[2],
            host_alias_size_in_bytes: m.host[3],
            host_temp_size_in_bytes: m.host[4],
            peak_memory_in_bytes: m.peak_memory,
            total_size_in_bytes: m.totals.map(|t| t[0]),
        })
    }

    /// The memory kind of each output (`device`, `pinned_host`, ...).
    pub fn output_memory_kinds(&self) -> Result<Vec<String>> {
        let (core, loaded) = self.raw_parts()?;
        raw::exe_output_memory_kinds(loaded)
            .map_err(|e| raw::unimplemented_as_unsupported(core.api(), e, "output memory kinds"))
    }

    /// The sharding of each parameter, decoded: the plugin's answer (Shardings extension),
    /// or without the extension, what the SPMD partitioner recorded in the compiled module.
    /// Empty for a program compiled without partitioning, as the extension answers;
    /// `Unsupported` when neither the plugin nor the module can tell.
    pub fn parameter_shardings(&self) -> Result<Vec<OpSharding>> {
        match self.parameter_shardings_bytes() {
            Ok(b) => decode_all(b, "parameter"),
            Err(e) => self.compiled_shardings(true, e),
        }
    }

    /// The sharding of each output, decoded, from the plugin or the compiled module as
    /// [`Executable::parameter_shardings`] says: a root tuple's one sharding stands for its
    /// elements, and a program with no outputs has none (plugins report the empty tuple's).
    pub fn output_shardings(&self) -> Result<Vec<OpSharding>> {
        let mut all = match self.output_shardings_bytes() {
            Ok(b) => decode_all(b, "output")?,
            Err(e) => self.compiled_shardings(false, e)?,
        };
        match all.as_slice() {
            _ if self.num_outputs() == 0 => Ok(Vec::new()),
            [one] if one.kind == ShardingType::Tuple => Ok(all.remove(0).tuple_shardings),
            _ => Ok(all),
        }
    }

    /// The shardings the compiled module records, where the plugin refused to tell them
    /// with `refused` (returned unchanged unless it is `Unsupported` and the module has
    /// them). The module gives the outputs as one sharding, a tuple's for several.
    fn compiled_shardings(&self, parameters: bool, refused: Error) -> Result<Vec<OpSharding>> {
        if !matches!(refused, Error::Unsupported { .. }) {
            return Err(refused);
        }
        let recorded = self
            .optimized_program()
            .ok()
            .and_then(|(format, code)| crate::hlo::spmd_shardings(&code, &format, parameters));
        let Some(recorded) = recorded else {
            return Err(refused);
        };
        decode_all(recorded, if parameters { "parameter" } else { "output" })
    }

    /// The serialized `OpSharding` of each parameter, as the plugin hands it out.
    pub fn parameter_shardings_bytes(&self) -> Result<Vec<Vec<u8>>> {
        let (core, loaded) = self.raw_parts()?;
        raw::exe_shardings(loaded, true)
            .map_err(|e| raw::unimplemented_as_unsupported(core.api(), e, "parameter shardings"))
    }

    /// The serialized `OpSharding` of each output, as the plugin hands it out.
    pub fn output_shardings_bytes(&self) -> Result<Vec<Vec<u8>>> {
        let (core, loaded) = self.raw_parts()?;
        raw::exe_shardings(loaded, false)
            .map_err(|e| raw::unimplemented_as_unsupported(core.api(), e, "output shardings"))
    }

    /// The layout of each parameter (Layouts extension).
    pub fn parameter_layouts(&self) -> Result<Vec<CompiledLayout>> {
        let (core, loaded) = self.raw_parts()?;
        let l = raw::exe_layouts(loaded, true)
            .map_err(|e| raw::unimplemented_as_unsupported(core.api(), e, "parameter layouts"))?;
        Ok(l.into_iter().map(layout_of).collect())
    }

    /// The layout of each output (Layouts extension).
    pub fn output_layouts(&self) -> Result<Vec<CompiledLayout>> {
        let (core, loaded) = self.raw_parts()?;
        let l = raw::exe_layouts(loaded, false)
            .map_err(|e| raw::unimplemented_as_unsupported(core.api(), e, "output layouts"))?;
        Ok(l.into_iter().map(layout_of).collect())
    }

    /// The encoded `CompileOptionsProto` the executable was built with: the plugin's answer
    /// where it has `PJRT_Executable_GetCompileOptions` (0.87+), else what rpjrt recorded
    /// when compiling or loading it; `Unsupported` when neither is known.
    pub fn compile_options_bytes(&self) -> Result<Vec<u8>> {
        let (core, loaded) = self.raw_parts()?;
        match raw::exe_compile_options(loaded) {
            Ok(b) => Ok(b),
            Err(e) => match self.recorded_options() {
                Some(o) => Ok(o.to_vec()),
                None => Err(raw::unimplemented_as_unsupported(
                    core.api(),
                    e,
                    "compile options",
                )),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_minor_to_major;

    #[test]
    fn layout_text_is_read() {
        assert_eq!(parse_minor_to_major(b"{1,0}"), Some(vec![1, 0]));
        assert_eq!(parse_minor_to_major(b"{0:T(8,128)}"), Some(vec![0]));
        assert_eq!(parse_minor_to_major(b"{}"), Some(vec![]));
        assert_eq!(parse_minor_to_major(b"\x08\x01"), None);
    }
}
