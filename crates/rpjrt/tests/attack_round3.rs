//! Third-round attacks: crafted artifacts with a valid envelope and lying fields, and
//! plugins that confuse the loader.

mod common;

use common::*;
use rpjrt::{Artifact, Client};

/// Re-encodes an artifact after `edit` (the checksum is recomputed, so every envelope check
/// passes and only the fields lie).
fn forge(bytes: &[u8], edit: impl FnOnce(&mut Artifact)) -> Vec<u8> {
    let mut a = Artifact::decode(bytes).unwrap();
    edit(&mut a);
    a.encode()
}

fn set_extra(a: &mut Artifact, k: &str, v: &str) {
    a.extra.retain(|(n, _)| n != k);
    a.extra.push((k.to_string(), v.to_string()));
}

/// The parameter types that arguments are checked against come from the plugin, not from
/// the artifact's header: a header rewritten (with its checksum) to say `s32[8]` for the
/// `f32[8]` parameters let integers run as floats and answered 1.0 without an error.
#[test]
fn lying_parameter_header_is_not_trusted() {
    for_each_plugin(|_, c| {
        let bytes = compile(c, &mul_add()).serialize().unwrap();
        let d = c.default_device().unwrap();
        let ints = c.buffer_from_slice(&[1i32; 8], &[8], &d).unwrap();
        let short = c.buffer_from_slice(&[1f32; 4], &[4], &d).unwrap();
        for lie in [
            "4:8;4:8",
            "11:4;11:4",
            "11:8",
            "",
            "11:8;11:8;11:8",
            "garbage",
        ] {
            let forged = forge(&bytes, |a| set_extra(a, "parameters", lie));
            let loaded = c.load(&forged, None).unwrap();
            assert_eq!(
                loaded.parameters().map(|p| p.len()),
                Some(2),
                "header {lie:?}"
            );
            expect_err(loaded.execute(&[&ints, &ints]), &["expects float32[8]"]);
            expect_err(loaded.execute(&[&short, &short]), &["expects float32[8]"]);
            expect_err(loaded.execute(&[&short]), &["2 argument(s)"]);
        }
    });
}
