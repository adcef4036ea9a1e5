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

const TABLE_KNOBS: &[&str] = &["RPJRT_FAKE_VERSION", "RPJRT_FAKE_API_STRUCT_SIZE"];

/// A plugin whose `PJRT_Api.struct_size` claims more slots than its version has (here a
/// 0.81 table claiming 0.114's, and one claiming the whole address space): rpjrt used the
/// claimed size, so entries added after 0.81 looked present and calling one ran whatever
/// lay past the table (the fake puts a function there that aborts the process).
#[test]
fn a_table_longer_than_its_version_is_cut_to_the_version() {
    let full = (40 + 8 * rpjrt_sys::PJRT_API_ENTRIES.len()).to_string();
    let newer = rpjrt_sys::PJRT_API_ENTRIES
        .iter()
        .find(|e| e.since_minor > 81)
        .unwrap()
        .name;
    for size in [full.as_str(), "18446744073709551615"] {
        let p = load_fake(
            &[
                ("RPJRT_FAKE_VERSION", "0.81"),
                ("RPJRT_FAKE_API_STRUCT_SIZE", size),
            ],
            TABLE_KNOBS,
        )
        .unwrap();
        assert_eq!(p.table_slots(), 118, "struct_size {size}");
        assert!(!p.has_entry(newer), "{newer} with struct_size {size}");
        let c = Client::new(&p, &rpjrt::ClientOptions::new()).unwrap();
        let exe = c
            .compile(
                &rpjrt::Program::mlir(
                    "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  \
                     return %a : tensor<4xf32>\n}\n",
                ),
                &rpjrt::CompileOptions::default(),
            )
            .unwrap();
        let d = c.default_device().unwrap();
        let x = c.buffer_from_slice(&[1f32; 4], &[4], &d).unwrap();
        let out = exe.execute(&[&x]).unwrap();
        assert_eq!(out[0].to_vec_of::<f32>().unwrap(), vec![1f32; 4]);
        // Every entry the safe layer may probe is answered without calling past the table.
        let _ = exe.fingerprint();
        let _ = c.topology();
        let _ = out[0].on_device_size();
    }
}
