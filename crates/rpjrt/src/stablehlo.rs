//! StableHLO version windows: which portable artifacts a plugin can compile.
//!
//! A plugin reports the newest and the oldest StableHLO version it reads (attributes
//! `stablehlo_current_version` and `stablehlo_minimum_version`). A portable artifact
//! (`jax.export` output, VHLO bytecode) is MLIR bytecode whose producer string is
//! `StableHLO_vX.Y.Z`: the version it was written for. Text and plain MLIR bytecode carry
//! no version and are not checked.
//!
//! What rpjrt refuses before compiling: an artifact older than the plugin's minimum, or of
//! a newer major version than the plugin's current one. An artifact of the same major
//! version but a newer minor or patch is outside the window ([`StablehloFit::fits`] is
//! false) yet is still handed to the plugin: StableHLO's reader accepts it when none of its
//! operations is newer than what the plugin knows (the 0.81 CPU plugin, current 1.13.3,
//! compiles JAX's 1.15.0 artifacts). If the plugin then fails, the error names both
//! versions.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::plugin::Plugin;
use crate::program::Program;

/// A StableHLO version `major.minor.patch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StablehloVersion {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Patch version.
    pub patch: u32,
}

impl fmt::Display for StablehloVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl FromStr for StablehloVersion {
    type Err = Error;
    fn from_str(s: &str) -> Result<StablehloVersion> {
        let parts: Vec<&str> = s.trim().split('.').collect();
        let bad = || Error::invalid(format!("{s:?} is not a StableHLO version (X.Y.Z)"));
        if parts.len() != 3 {
            return Err(bad());
        }
        let n = |p: &str| p.parse::<u32>().map_err(|_| bad());
        Ok(StablehloVersion {
            major: n(parts[0])?,
            minor: n(parts[1])?,
            patch: n(parts[2])?,
        })
    }
}

impl StablehloVersion {
    fn from_list(v: &[i64]) -> Option<StablehloVersion> {
        match v {
            [a, b, c] => Some(StablehloVersion {
                major: u32::try_from(*a).ok()?,
                minor: u32::try_from(*b).ok()?,
                patch: u32::try_from(*c).ok()?,
            }),
            _ => None,
        }
    }
}

/// The MLIR bytecode magic.
const MLIR_MAGIC: &[u8] = b"ML\xefR";
const PRODUCER_PREFIX: &[u8] = b"StableHLO_v";

/// The StableHLO version a portable artifact was written for, read from its producer
/// string; `None` for text, non-StableHLO bytecode, or anything else.
pub fn artifact_version(program: &[u8]) -> Option<StablehloVersion> {
    if !program.starts_with(MLIR_MAGIC) {
        return None;
    }
    // Magic, a small varint (the bytecode version), then the NUL-terminated producer.
    let head = &program[MLIR_MAGIC.len()..program.len().min(96)];
    let start = head
        .windows(PRODUCER_PREFIX.len())
        .position(|w| w == PRODUCER_PREFIX)?;
    let rest = &head[start + PRODUCER_PREFIX.len()..];
    let end = rest.iter().position(|&b| b == 0)?;
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

/// Whether a program fits a plugin's StableHLO window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StablehloFit {
    /// The version the artifact was written for (`None`: unversioned text or bytecode).
    pub artifact: Option<StablehloVersion>,
    /// The plugin's oldest accepted version, if it reports one.
    pub minimum: Option<StablehloVersion>,
    /// The plugin's newest accepted version, if it reports one.
    pub current: Option<StablehloVersion>,
    /// Whether it lies inside the plugin's window (true when nothing is known to the
    /// contrary).
    pub fits: bool,
    /// Whether rpjrt refuses to compile it (older than the minimum, or a newer major
    /// version than the current one).
    pub refused: bool,
}

impl Plugin {
    /// The plugin's `(current, minimum)` StableHLO versions, when it reports them.
    pub fn stablehlo_versions(&self) -> Option<(StablehloVersion, StablehloVersion)> {
        let cur = StablehloVersion::from_list(&self.stablehlo_current_version()?)?;
        let min = StablehloVersion::from_list(&self.stablehlo_minimum_version()?)?;
        Some((cur, min))
    }

    /// The version a producer should serialize portable artifacts to for this plugin
    /// (its current version), e.g. `"1.13.3"`.
    pub fn stablehlo_target(&self) -> Option<String> {
        self.stablehlo_versions().map(|(cur, _)| cur.to_string())
    }

    /// Says which version a program was written for and whether this plugin takes it.
    pub fn stablehlo_fit(&self, program: &[u8]) -> StablehloFit {
        let artifact = artifact_version(program);
        let (current, minimum) = match self.stablehlo_versions() {
            Some((c, m)) => (Some(c), Some(m)),
            None => (None, None),
        };
        let (fits, refused) = match (artifact, current, minimum) {
            (Some(a), Some(c), Some(m)) => (a >= m && a <= c, a < m || a.major > c.major),
            _ => (true, false),
        };
        StablehloFit {
            artifact,
            minimum,
            current,
            fits,
            refused,
        }
    }

    /// Everything rpjrt checks about a program before handing it to this plugin's compiler:
    /// the StableHLO window ([`Plugin::check_stablehlo`]) and the programs the compiler is
    /// known to abort the process on (an element type newer than the plugin, and the
    /// float6 and 2-bit integer cases listed in the architecture notes), each refused
    /// with an `InvalidArgument` error naming what was wrong.
    pub fn check_program(&self, program: &Program) -> Result<()> {
        self.check_stablehlo(program)?;
        crate::screen::check(program, self.version().minor)
    }

    /// Refuses a portable artifact outside the plugin's window, naming both versions.
    pub fn check_stablehlo(&self, program: &Program) -> Result<()> {
        let Program::Mlir(code) = program else {
            return Ok(());
        };
        let fit = self.stablehlo_fit(code);
        if !fit.refused {
            return Ok(());
        }
        let (a, c, m) = (
            fit.artifact.expect("set when refused"),
            fit.current.expect("set when refused"),
            fit.minimum.expect("set when refused"),
        );
        let hint = if a > c {
            format!("re-export it targeting {c} (plugin.stablehlo_target())")
        } else {
            "re-export it with a newer producer".to_string()
        };
        Err(Error::invalid(format!(
            "the program is a StableHLO portable artifact written for StableHLO {a}, but this \
             plugin accepts {m} to {c}: {hint}"
        )))
    }
}

/// What XLA-based plugins say when their StableHLO parser refuses a program.
const PARSE_REFUSAL: &str = "Failed to parse using StableHLO";

/// Whether `err`, returned by compiling `program`, is the plugin's StableHLO parser refusing
/// the program's text (not bytecode): text written by a newer StableHLO printer than the
/// plugin's. Such text compiles when handed over as a portable artifact serialized for the
/// plugin's version ([`Plugin::stablehlo_target`]); rpjrt's Python package does that itself
/// when jaxlib is installed.
pub fn is_text_parse_refusal(program: &Program, err: &Error) -> bool {
    let Program::Mlir(code) = program else {
        return false;
    };
    !code.starts_with(MLIR_MAGIC)
        && matches!(err, Error::Pjrt { message, .. } if message.contains(PARSE_REFUSAL))
}

/// Explains a compile error by the plugin's StableHLO version: text its parser refused (say
/// which version parses it and how to produce a portable artifact for it), or an artifact
/// newer than the plugin's current StableHLO version (the likely cause). The plugin's own
/// message is kept.
pub(crate) fn explain(plugin: &Plugin, program: &Program, err: Error) -> Error {
    let Program::Mlir(code) = program else {
        return err;
    };
    let fit = plugin.stablehlo_fit(code);
    let text_refused = is_text_parse_refusal(program, &err);
    match (err, fit.artifact, fit.current) {
        (
            Error::Pjrt {
                entry,
                code: _,
                message,
            },
            _,
            current,
        ) if text_refused => {
            // The parser's own first complaint ("-:2:93: error: duplicate key ..."), which
            // a plain mistake in the text gives as well as a newer printer's syntax.
            let diagnostic = message
                .lines()
                .find(|l| l.contains("error:") && !l.contains(PARSE_REFUSAL))
                .map(|l| format!(": {}", l.trim()))
                .unwrap_or_default();
            let (version, target) = match current {
                Some(c) => (format!("StableHLO {c}"), c.to_string()),
                None => (
                    "an older StableHLO".to_string(),
                    "the plugin's StableHLO version".to_string(),
                ),
            };
            // Text the parser refuses is the caller's input, whatever code the plugin chose
            // (UNKNOWN on the XLA plugins): an invalid argument.
            Error::Pjrt {
                entry,
                code: crate::Code::InvalidArgument,
                message: format!(
                    "this plugin parses StableHLO text as {version} and cannot read this \
                     program's text{diagnostic}. Either the text has that mistake, or it was \
                     written by a newer StableHLO printer (the text syntax changes between \
                     versions, e.g. i1 constants in hex with one byte per element); for the \
                     latter, hand it a portable artifact serialized for {target} \
                     instead: serialize_portable_artifact_str(text, \"{target}\") from \
                     jaxlib.mlir.dialects.stablehlo in Python (rpjrt's Python package does \
                     this itself when jaxlib is installed), `stablehlo-translate --serialize \
                     --target={target}`, or jax.export for that version. The plugin said: \
                     {message}"
                ),
            }
        }
        (
            Error::Pjrt {
                entry,
                code,
                message,
            },
            Some(a),
            Some(c),
        ) if a > c => Error::Pjrt {
            entry,
            code,
            message: format!(
                "{message} (note: the program is a StableHLO {a} artifact and this plugin's \
                 newest StableHLO is {c}; re-export it targeting {c})"
            ),
        },
        (err, _, _) => err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_producer_version() {
        let mut b = b"ML\xefR\x0dStableHLO_v1.15.0\x00\x01\x1f".to_vec();
        assert_eq!(
            artifact_version(&b),
            Some(StablehloVersion {
                major: 1,
                minor: 15,
                patch: 0
            })
        );
        b[0] = b'X';
        assert_eq!(artifact_version(&b), None);
        assert_eq!(artifact_version(b"module @m {}"), None);
        assert_eq!(artifact_version(b"ML\xefR\x0dMLIR19\x00"), None);
    }

    #[test]
    fn a_parse_refusal_is_recognised_only_for_text() {
        let refusal = |m: &str| Error::Pjrt {
            entry: "PJRT_Client_Compile",
            code: crate::error::Code::Unknown,
            message: m.to_string(),
        };
        let said = "-:2:27: error: elements hex data size is invalid\nerror: Failed to parse \
                    using StableHLO v1.13.3, this could indicate forward incompatibility";
        let text = Program::Mlir(b"func.func @main() { return }".to_vec());
        let bytecode = Program::Mlir(b"ML\xefR\x0dStableHLO_v1.13.3\x00".to_vec());
        assert!(is_text_parse_refusal(&text, &refusal(said)));
        assert!(!is_text_parse_refusal(&bytecode, &refusal(said)));
        assert!(!is_text_parse_refusal(&text, &refusal("out of memory")));
        assert!(!is_text_parse_refusal(&text, &Error::invalid(said)));
    }

    #[test]
    fn versions_order_numerically() {
        let a: StablehloVersion = "1.9.0".parse().unwrap();
        let b: StablehloVersion = "1.13.3".parse().unwrap();
        assert!(a < b);
        assert!("1.2".parse::<StablehloVersion>().is_err());
    }
}
