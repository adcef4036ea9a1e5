//! StableHLO text an older plugin's parser cannot read: the 0.81 CPU plugin (StableHLO
//! 1.13.3) refuses an i1 constant in hex with one byte per element, the form today's MLIR
//! printer writes for boolean constants of more than 100 elements. The error names the
//! plugin's StableHLO version and the way out, and keeps the plugin's own message; the same
//! module as a portable artifact for 1.13.3 (what JAX hands that plugin) runs.

mod common;

use common::*;
use rpjrt::{is_text_parse_refusal, CompileOptions, Program};

/// What i1_hex.mlir computes: 1 where the flat index is a multiple of 3, as i8.
fn expected() -> Vec<i8> {
    (0..16).map(|i| i8::from(i % 3 == 0)).collect()
}

#[test]
fn hex_i1_text_runs_or_names_the_version_and_the_way_out() {
    for_each_plugin(|p, c| {
        let text = Program::mlir(String::from_utf8(fixture("i1_hex.mlir")).unwrap());
        let r = c.compile(&text, &CompileOptions::default());
        if is_old(p) {
            let e = expect_err(
                r,
                &[
                    "parses StableHLO text as StableHLO 1.13.3",
                    "portable artifact serialized for 1.13.3",
                    "serialize_portable_artifact_str(text, \"1.13.3\")",
                    "stablehlo-translate --serialize --target=1.13.3",
                    // The plugin's own words are kept.
                    "elements hex data size is invalid",
                    "Failed to parse using StableHLO v1.13.3",
                ],
            );
            assert!(is_text_parse_refusal(&text, &e));
            // The way out works: the portable artifact for the plugin's version.
            assert_eq!(p.stablehlo_target().as_deref(), Some("1.13.3"));
            let artifact = Program::mlir(fixture("i1_hex.v1_13_3.mlirbc"));
            let exe = c
                .compile(&artifact, &CompileOptions::default())
                .unwrap_or_else(|e| panic!("the 1.13.3 artifact: {e}"));
            assert_eq!(
                exe.execute(&[]).unwrap()[0].to_vec_of::<i8>().unwrap(),
                expected()
            );
        } else {
            let exe = r.unwrap_or_else(|e| panic!("the newer plugin parses the text: {e}"));
            assert_eq!(
                exe.execute(&[]).unwrap()[0].to_vec_of::<i8>().unwrap(),
                expected()
            );
        }
    });
}

#[test]
fn cache_compile_gives_the_same_explanation() {
    let p = plugin(Which::Old);
    let c = rpjrt::Client::new(&p, &Default::default()).unwrap();
    let dir = std::env::temp_dir().join(format!("rpjrt-stablehlo-text-{}", std::process::id()));
    let cache = rpjrt::Cache::new(&dir, None).unwrap();
    let text = Program::mlir(fixture("i1_hex.mlir"));
    expect_err(
        c.compile_with_cache(&text, &CompileOptions::default(), &cache),
        &[
            "StableHLO 1.13.3",
            "stablehlo-translate",
            "elements hex data size",
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_mistake_in_the_text_is_named_before_the_version_advice() {
    // The parser refuses a plain mistake with the same words as a newer printer's syntax;
    // the error led with "probably written by a newer StableHLO printer" and buried the
    // parser's own line at the end.
    let text = "func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @t(%x) {api_version = 4 : i32, backend_config = {a = 1 : i32, a = 2 : i32}} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
";
    for_each_plugin(|_, c| {
        let e = expect_err(
            c.compile(&Program::mlir(text), &CompileOptions::default()),
            &[
                "cannot read this program's text: ",
                "duplicate key",
                "Either the text has that mistake",
            ],
        );
        let m = e.to_string();
        assert!(
            m.find("duplicate key") < m.find("Either the text"),
            "the parser's line comes first: {m}"
        );
    });
}
