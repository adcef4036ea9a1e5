//! Programs as data: what a program file holds and how its format is told, the array
//! specs of parameters and results, and which partitioner a module needs. Pure: nothing
//! here owns a handle or calls a plugin, so the analysers (`screen`, `stablehlo`, `hlo`,
//! `sharding`, `options`) can take a [`Program`] without depending on the client.

use std::fmt;
use std::path::Path;

use crate::dtype::ElementType;
use crate::error::{Error, Result};
use crate::mlir::BYTECODE_MAGIC;

/// The first eight bytes of an rpjrt artifact (what `Executable::serialize` writes).
pub const ENVELOPE_MAGIC: &[u8; 8] = b"RPJRTEXE";

/// True when `bytes` start like an rpjrt artifact (the envelope's magic).
pub fn is_artifact(bytes: &[u8]) -> bool {
    bytes.starts_with(ENVELOPE_MAGIC)
}

/// A program to compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Program {
    /// StableHLO / MHLO: text, MLIR bytecode, or a versioned portable artifact.
    Mlir(Vec<u8>),
    /// A serialized `HloModuleProto`.
    Hlo(Vec<u8>),
}

/// What a program file holds: a program to compile, or an rpjrt artifact to load
/// (`Client::load`). [`ProgramFile::read`] is the one reader every face uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProgramFile {
    /// StableHLO (text, bytecode, portable artifact) or an HLO module.
    Program(Program),
    /// A compiled rpjrt artifact, as its bytes.
    Artifact(Vec<u8>),
    /// A plugin's own serialized executable without rpjrt's envelope (the bytes
    /// `PJRT_Executable_Serialize` gives, `Executable::serialize_bare`): loaded with
    /// `Client::load_bare`, unchecked. Never told from the bytes alone (they carry no
    /// magic): only format [`EXECUTABLE_FORMAT`] says it.
    Executable(Vec<u8>),
}

/// The format name of a plugin's bare serialized executable ([`ProgramFile::Executable`]).
pub const EXECUTABLE_FORMAT: &str = "executable";

/// The format names [`Program::with_format`] and [`ProgramFile::detect`] accept.
pub const PROGRAM_FORMATS: [&str; 2] = ["mlir", "hlo"];

/// File name endings that mean a serialized `HloModuleProto`.
const HLO_SUFFIXES: [&str; 3] = [".pb", ".hlo", ".hlopb"];

impl ProgramFile {
    /// Reads a user-named file (through [`crate::read_regular_file`]: a FIFO or a device is
    /// refused at once) and tells what it holds with [`ProgramFile::detect`].
    pub fn read(path: impl AsRef<Path>, format: Option<&str>) -> Result<ProgramFile> {
        let path = path.as_ref();
        let bytes = crate::read_regular_file(path)?;
        let name = path.to_string_lossy();
        classify(bytes, Some(&name), format)
            .map_err(|e| Error::invalid(format!("{}: {e}", path.display())))
    }

    /// Tells what `bytes` hold; the one rule for every face:
    ///
    /// - `format` `"mlir"` or `"hlo"` says it (an rpjrt artifact is still refused for it:
    ///   load it instead); `"executable"` says the bytes are a plugin's bare serialized
    ///   executable (an rpjrt artifact, MLIR bytecode or program text is refused for it);
    ///   any other name is an error;
    /// - else an rpjrt artifact (its magic `RPJRTEXE`) is an artifact;
    /// - HLO text (`HloModule ...`) is refused, naming the formats to give instead (also
    ///   for format `"hlo"`);
    /// - MLIR bytecode (also a portable artifact, magic `ML\xefR`) is MLIR;
    /// - a `name` ending in `.pb`, `.hlo` or `.hlopb` is an HLO module;
    /// - UTF-8 text is StableHLO text;
    /// - anything else (no bytes at all included) is an error naming what is wrong.
    pub fn detect(bytes: Vec<u8>, name: Option<&str>, format: Option<&str>) -> Result<ProgramFile> {
        classify(bytes, name, format).map_err(Error::invalid)
    }

    /// The parameter names the file carries ([`Program::parameter_names`]; compiled
    /// executables carry none).
    pub fn parameter_names(&self) -> Option<Vec<String>> {
        match self {
            ProgramFile::Program(p) => p.parameter_names(),
            ProgramFile::Artifact(_) | ProgramFile::Executable(_) => None,
        }
    }

    /// The format's name: `"mlir"`, `"hlo"`, `"artifact"` or `"executable"`.
    pub fn kind(&self) -> &'static str {
        match self {
            ProgramFile::Program(p) => p.format(),
            ProgramFile::Artifact(_) => "artifact",
            ProgramFile::Executable(_) => EXECUTABLE_FORMAT,
        }
    }
}

fn format_error(format: &str) -> String {
    format!("format must be \"mlir\", \"hlo\" or \"executable\", not {format:?}")
}

/// Why `bytes` given as a bare serialized executable are not one, if they are plainly
/// something else (the blob itself has no magic to check).
fn not_an_executable(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(BYTECODE_MAGIC) {
        return Some("MLIR bytecode, a program to compile, not a serialized executable");
    }
    let text = std::str::from_utf8(bytes).ok()?;
    ["func.func", "module", "HloModule", "stablehlo.", "mhlo."]
        .iter()
        .any(|w| text.contains(w))
        .then_some("program text to compile, not a serialized executable")
}

/// Whether `bytes` are HLO text (`HloModule name ...`, what XLA's dumps and `as_hlo_text`
/// write): a format no PJRT plugin compiles, which would otherwise reach the plugin as a
/// proto that does not parse, or as StableHLO text with a misleading parse error.
fn is_hlo_text(bytes: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    // Comment lines (`//`, `#`) may come first in a dump.
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with('#'));
    first.is_some_and(|l| {
        l.strip_prefix("HloModule")
            .is_some_and(|rest| rest.starts_with(char::is_whitespace))
    })
}

const HLO_TEXT: &str = "HLO text (HloModule ...), which PJRT plugins do not compile: give \
    StableHLO (jax.jit(f).lower(...).as_text(), or jax.export) or a serialized HloModuleProto \
    (the bytes of HloModuleProto.SerializeToString(), e.g. from \
    xla_computation.as_serialized_hlo_module_proto())";

/// [`ProgramFile::detect`], its error as a sentence without the "invalid argument" prefix.
fn classify(
    bytes: Vec<u8>,
    name: Option<&str>,
    format: Option<&str>,
) -> std::result::Result<ProgramFile, String> {
    if bytes.is_empty() {
        return Err("the program is empty".to_string());
    }
    if is_artifact(&bytes) {
        return match format {
            None => Ok(ProgramFile::Artifact(bytes)),
            Some(f) => Err(format!(
                "an rpjrt artifact (a compiled program), not {} {f} program: load it \
                 (client.load / Client::load) instead of compiling it",
                if f.to_string().starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                }
            )),
        };
    }
    if let Some(f) = format {
        return match f {
            "mlir" => Ok(ProgramFile::Program(Program::Mlir(bytes))),
            "hlo" if is_hlo_text(&bytes) => Err(HLO_TEXT.to_string()),
            "hlo" => Ok(ProgramFile::Program(Program::Hlo(bytes))),
            EXECUTABLE_FORMAT => match not_an_executable(&bytes) {
                Some(why) => Err(why.to_string()),
                None => Ok(ProgramFile::Executable(bytes)),
            },
            other => Err(format_error(other)),
        };
    }
    let hlo_name = name.is_some_and(|n| HLO_SUFFIXES.iter().any(|s| n.ends_with(s)));
    if is_hlo_text(&bytes) {
        Err(HLO_TEXT.to_string())
    } else if bytes.starts_with(BYTECODE_MAGIC) {
        Ok(ProgramFile::Program(Program::Mlir(bytes)))
    } else if hlo_name {
        Ok(ProgramFile::Program(Program::Hlo(bytes)))
    } else if std::str::from_utf8(&bytes).is_ok() {
        Ok(ProgramFile::Program(Program::Mlir(bytes)))
    } else {
        Err(
            "not StableHLO text, MLIR bytecode, an HloModuleProto (.pb, .hlo, .hlopb) \
             or an rpjrt artifact (a plugin's own serialized executable is never guessed: \
             say format \"executable\")"
                .to_string(),
        )
    }
}

impl Program {
    /// A StableHLO program (text, bytecode or portable artifact).
    pub fn mlir(code: impl Into<Vec<u8>>) -> Program {
        Program::Mlir(code.into())
    }

    /// A serialized HLO module.
    pub fn hlo(proto: impl Into<Vec<u8>>) -> Program {
        Program::Hlo(proto.into())
    }

    /// A program in the named PJRT format: `"mlir"` (StableHLO text, bytecode or portable
    /// artifact) or `"hlo"` (a serialized HLO module); any other name is an error.
    pub fn with_format(format: &str, code: impl Into<Vec<u8>>) -> Result<Program> {
        match format {
            "mlir" => Ok(Program::mlir(code)),
            "hlo" => Ok(Program::hlo(code)),
            EXECUTABLE_FORMAT => Err(Error::invalid(
                "a serialized executable is loaded (load_bare), not compiled",
            )),
            other => Err(Error::invalid(format!(
                "format must be \"mlir\" or \"hlo\", not {other:?}"
            ))),
        }
    }

    /// Reads a program file ([`ProgramFile::read`]); an rpjrt artifact is refused with an
    /// error saying to load it.
    pub fn read(path: impl AsRef<Path>, format: Option<&str>) -> Result<Program> {
        let path = path.as_ref();
        match ProgramFile::read(path, format)? {
            ProgramFile::Program(p) => Ok(p),
            ProgramFile::Artifact(_) => Err(Error::invalid(format!(
                "{}: an rpjrt artifact, not a program: load it instead of compiling it",
                path.display()
            ))),
            ProgramFile::Executable(_) => Err(Error::invalid(format!(
                "{}: a serialized executable, not a program: load it (load_bare) instead of \
                 compiling it",
                path.display()
            ))),
        }
    }

    /// The names of the entry function's parameters, in order, where the program carries
    /// them: in StableHLO text a `jax.arg_info` attribute, a location name (`loc("x")`:
    /// the Python argument names jax.export writes) or an SSA name the author chose (`%x`,
    /// not `%arg0`); in MLIR bytecode and jax.export's portable artifacts the parameters'
    /// location names. `None` when any parameter has none, when the entry function cannot
    /// be told, and for HLO modules (not read for names).
    pub fn parameter_names(&self) -> Option<Vec<String>> {
        match self {
            Program::Mlir(code) => crate::mlir::entry_parameter_names(code),
            Program::Hlo(_) => None,
        }
    }

    /// The PJRT format name: `"mlir"` or `"hlo"`.
    pub fn format(&self) -> &'static str {
        self.parts().1
    }

    /// The program's bytes.
    pub fn code(&self) -> &[u8] {
        self.parts().0
    }

    pub(crate) fn parts(&self) -> (&[u8], &'static str) {
        match self {
            Program::Mlir(c) => (c, "mlir"),
            Program::Hlo(c) => (c, "hlo"),
        }
    }
}

/// False only when `code` surely holds no custom call: its bytes name no `custom_call`
/// operation (StableHLO, MHLO or VHLO, as text or bytecode, whose string table holds each
/// operation's name) and no `custom-call` instruction (HLO, text or proto).
pub(crate) fn may_hold_custom_calls(code: &[u8]) -> bool {
    memchr::memmem::find(code, b"custom_call").is_some()
        || memchr::memmem::find(code, b"custom-call").is_some()
}

/// True when the module uses the Shardy (`sdy`) dialect: its shardings are for the Shardy
/// partitioner, which XLA uses only when `use_shardy_partitioner` is set.
///
/// Text is searched for `sdy.` operations and attributes (`sdy.mesh`, `#sdy.sharding`,
/// `sdy.sharding_constraint`, and the `xla.sdy.*` attributes of a round-tripped module);
/// bytecode (including portable artifacts) is read up to its dialect section, which names
/// every dialect the module uses, and searched for `xla.sdy.` (a round-tripped module). HLO protos are never Shardy modules.
pub fn uses_shardy(program: &Program) -> bool {
    match program {
        Program::Hlo(_) => false,
        Program::Mlir(code) => {
            if code.starts_with(BYTECODE_MAGIC) {
                // A round-tripped module lists no `sdy` dialect but holds `xla.sdy.*` names.
                crate::mlir::bytecode_dialects(code).is_some_and(|d| d.iter().any(|n| n == "sdy"))
                    || memchr::memmem::find(code, b"xla.sdy.").is_some()
            } else {
                text_uses_shardy(code)
            }
        }
    }
}

fn text_uses_shardy(code: &[u8]) -> bool {
    let starts_word =
        |i: usize| i == 0 || !code[i - 1].is_ascii_alphanumeric() && code[i - 1] != b'_';
    // A vectorized substring search: this runs on every compile-cache hit, over the whole
    // program (0.1 ms for a 119 KB module with std's `match_indices`, a tenth of that here).
    memchr::memmem::find_iter(code, b"sdy.").any(starts_word)
}

/// The type and shape of one array argument or result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArraySpec {
    /// Element type.
    pub element_type: ElementType,
    /// Dimensions.
    pub dims: Vec<i64>,
}

impl fmt::Display for ArraySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{:?}", self.element_type, self.dims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_calls_are_found_in_every_program_form() {
        let fixture = |name: &str| {
            std::fs::read(format!(
                "{}/tests/fixtures/{name}",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap()
        };
        // Programs with none, as text, bytecode, a jax.export artifact and an HLO proto.
        for name in [
            "mul_add.mlir",
            "mul_add.mlirbc",
            "mul_add.jax_export.mlirbc",
            "mul_add.hlo.pb",
        ] {
            assert!(!may_hold_custom_calls(&fixture(name)), "{name}");
        }
        for code in [
            &b"%0 = stablehlo.custom_call @t(%x) : (tensor<f32>) -> tensor<f32>"[..],
            b"%0 = \"stablehlo.custom_call\"(%x) {call_target_name = \"t\"}",
            b"vhlo.custom_call_v1",
            b"%c = f32[8] custom-call(f32[8] %x), custom_call_target=\"t\"",
            b"\x0acustom-call\x12\x01t",
        ] {
            assert!(
                may_hold_custom_calls(code),
                "{}",
                String::from_utf8_lossy(code)
            );
        }
    }

    #[test]
    fn shardy_text_detection_needs_a_word_start_in_utf8_and_other_bytes() {
        for (text, want) in [
            (&b"sdy.mesh @m = <[\"x\"=2]>"[..], true),
            (b"  %0 = sdy.sharding_constraint", true),
            (b"xsdy.foo a_sdy.bar 9sdy.baz", false),
            (b"no shardings here", false),
            (b"\xff\xfe bytes that are not UTF-8 sdy.mesh", true),
            (b"\xff\xfe bytes that are not UTF-8 _sdy.mesh", false),
        ] {
            assert_eq!(
                text_uses_shardy(text),
                want,
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn detection_rule() {
        let d = |b: &[u8], n: Option<&str>, f: Option<&str>| {
            ProgramFile::detect(b.to_vec(), n, f).map(|p| p.kind())
        };
        assert_eq!(
            d(b"func.func @main() { return }", None, None).unwrap(),
            "mlir"
        );
        assert_eq!(d(b"\x08\x01", Some("m.pb"), None).unwrap(), "hlo");
        // HLO text is refused by name, whatever the file is called.
        let hlo_text = b"// dumped\nHloModule m\nENTRY main { ROOT a = f32[] parameter(0) }\n";
        for (n, f) in [
            (Some("m.hlo"), None),
            (Some("m.txt"), None),
            (None, Some("hlo")),
        ] {
            let e = d(hlo_text, n, f).unwrap_err().to_string();
            assert!(e.contains("HLO text"), "{n:?} {f:?}: {e}");
        }
        assert_eq!(d(b"ML\xefR\x00", Some("m.pb"), None).unwrap(), "mlir");
        assert_eq!(d(b"RPJRTEXE....", None, None).unwrap(), "artifact");
        assert_eq!(d(b"\xff\xfe", None, Some("hlo")).unwrap(), "hlo");
        assert!(d(b"\xff\xfe", None, None)
            .unwrap_err()
            .to_string()
            .contains("HloModuleProto"));
        assert!(d(b"", None, Some("hlo"))
            .unwrap_err()
            .to_string()
            .contains("empty"));
        assert!(d(b"x", None, Some("onnx"))
            .unwrap_err()
            .to_string()
            .contains("onnx"));
        assert_eq!(
            d(b"\x08\x01\xff", None, Some("executable")).unwrap(),
            "executable"
        );
        for not_exe in [
            &b"ML\xefR\x00"[..],
            b"func.func @main() { return }",
            b"RPJRTEXE",
        ] {
            assert!(d(not_exe, None, Some("executable")).is_err());
        }
        assert!(d(b"\xff\xfe", None, None)
            .unwrap_err()
            .to_string()
            .contains("executable"));
        assert!(d(b"RPJRTEXE", None, Some("mlir"))
            .unwrap_err()
            .to_string()
            .contains("load it"));
    }
}
