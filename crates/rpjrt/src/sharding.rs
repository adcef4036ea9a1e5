//! Which partitioner a sharded module needs: whether it uses the Shardy dialect, and the
//! compile options that follow from that.
//!
//! Splitting host arrays into per-device shards along a device mesh, putting them back
//! together, and checking partition specs against an executable's own shardings are host
//! work that needs no plugin: they live in the `rpjrt-mesh` crate.

pub use crate::options::options_for;
pub use crate::program::uses_shardy;

/// The dialect names listed in an MLIR bytecode file's dialect section, or `None` when the
/// file cannot be read that far.
pub fn bytecode_dialects(code: &[u8]) -> Option<Vec<String>> {
    crate::mlir::bytecode_dialects(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::CompileOptions;
    use crate::program::Program;

    #[test]
    fn text_detection() {
        assert!(uses_shardy(&Program::mlir(
            "sdy.mesh @mesh = <[\"x\"=2]>\nfunc.func @main()"
        )));
        assert!(uses_shardy(&Program::mlir(
            "{mhlo.frontend_attributes = {xla.sdy.sharding = \"\"}}"
        )));
        assert!(!uses_shardy(&Program::mlir(
            "func.func @main() { %0 = stablehlo.add }"
        )));
        assert!(!uses_shardy(&Program::mlir("%busdy.x")));
        assert!(!uses_shardy(&Program::mlir("%a_sdy.x sdy")));
        // Text that is not UTF-8 is searched all the same, with the same word rule.
        assert!(uses_shardy(&Program::mlir(b"\xff\xfe(sdy.mesh".to_vec())));
        assert!(!uses_shardy(&Program::mlir(b"\xff\xfe9sdy.mesh".to_vec())));
        assert!(!uses_shardy(&Program::hlo(b"sdy.mesh".to_vec())));
    }

    #[test]
    fn bad_bytecode_is_not_shardy() {
        assert_eq!(bytecode_dialects(b"ML\xefR"), None);
        assert_eq!(bytecode_dialects(b"ML\xefR\x03prod"), None);
        assert!(!uses_shardy(&Program::mlir(
            b"ML\xefR\x03x\x00\x01\xff".to_vec()
        )));
    }

    #[test]
    fn options_switch_shardy_on() {
        let p = Program::mlir("sdy.mesh @m = <[\"x\"=2]>");
        let o = CompileOptions {
            num_partitions: 2,
            ..Default::default()
        };
        let got = options_for(&p, &o).unwrap();
        assert!(got.use_shardy_partitioner && got.use_spmd_partitioning);
        assert!(options_for(&Program::mlir("func.func"), &o).is_none());
    }
}
