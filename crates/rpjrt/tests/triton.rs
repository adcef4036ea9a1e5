//! Triton kernels compiled by the plugin (`rpjrt::triton`): on the fake plugin with the
//! Triton extension (both args layouts it can play), and `Unsupported` naming the
//! extension on the CPU plugins, which have none.

mod common;

use rpjrt::triton::{self, TritonCompileOptions};
use rpjrt::{Client, ClientOptions, Code, Error, Plugin};

const KNOBS: &[&str] = &[
    "RPJRT_FAKE_EXTENSIONS",
    "RPJRT_FAKE_TRITON_VERSION",
    "RPJRT_FAKE_FAIL",
];

const MODULE: &str =
    "module {\n  tt.func public @add_kernel(%arg0: !tt.ptr<f32>) {\n    tt.return\n  }\n}\n";

fn fake(version: &str) -> Plugin {
    common::load_fake(
        &[
            ("RPJRT_FAKE_EXTENSIONS", "Layouts,FFI,Triton"),
            ("RPJRT_FAKE_TRITON_VERSION", version),
        ],
        KNOBS,
    )
    .unwrap()
}

/// The fake's FNV-1a 64 of `bytes` (what its output names).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[test]
fn fake_compiles_to_deterministic_ptx() {
    let p = fake("2");
    assert!(triton::is_available(&p));
    let client = Client::new(&p, &ClientOptions::new()).unwrap();
    let opts = TritonCompileOptions::new("sm_90")
        .unwrap()
        .num_warps(8)
        .unwrap()
        .num_stages(2)
        .unwrap();
    let k = client.triton_compile(MODULE.as_bytes(), &opts).unwrap();
    let text = k.asm_text().expect("PTX is text");
    let hash = format!("{:016x}", fnv1a(MODULE.as_bytes()));
    // The arch went through as 9.0 (the fake's target is the arch's letters and digits).
    assert!(text.contains(".target sm_90\n"), "{text}");
    assert!(text.contains(&format!("fnv1a64 {hash}")), "{text}");
    assert!(
        text.contains("num_warps=8 num_ctas=1 num_stages=2"),
        "{text}"
    );
    assert!(text.contains(".maxntid 256, 1, 1"), "{text}");
    assert_eq!(k.entry_name(), Some(format!("fake_triton_{hash}").as_str()));
    assert_eq!(k.shared_mem_bytes, 1024 * 2 * 8);
    // Version 2 reports no cluster dims, and no path for assembly.
    assert_eq!((k.cluster_dims, k.path.as_deref()), (None, None));
    // Same input, same output; another module, another hash.
    let again = triton::compile(&p, MODULE.as_bytes(), &opts).unwrap();
    assert_eq!(again, k);
    let other = triton::compile(&p, b"module { tt.func @g() { tt.return } }", &opts).unwrap();
    assert_ne!(other.asm, k.asm);
}

#[test]
fn version1_layout_gives_cluster_dims() {
    let p = fake("1");
    let opts = TritonCompileOptions::new("9.0")
        .unwrap()
        .num_ctas(2)
        .unwrap();
    let k = triton::compile(&p, MODULE.as_bytes(), &opts).unwrap();
    assert_eq!(k.cluster_dims, Some([2, 1, 1]));
    assert_eq!(k.path, None);
    assert_eq!(k.shared_mem_bytes, 1024 * 3 * 4);
    assert!(k.asm_text().unwrap().contains("num_ctas=2"));
}

#[test]
fn version2_path_output_is_read() {
    let p = fake("2");
    let opts = TritonCompileOptions::new("gfx942").unwrap();
    let k = triton::compile(&p, MODULE.as_bytes(), &opts).unwrap();
    assert!(k.asm.is_empty());
    let want = format!(
        "/nonexistent/rpjrt-fake-triton-{:016x}.hsaco",
        fnv1a(MODULE.as_bytes())
    );
    assert_eq!(k.path.as_deref(), Some(want.as_str()));
    assert_eq!(k.cluster_dims, None);
}

#[test]
fn bad_input_is_refused_with_its_name() {
    let p = fake("2");
    let opts = TritonCompileOptions::new("sm_80").unwrap();
    let e = triton::compile(&p, b"", &opts).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    assert!(e.to_string().contains("module is empty"), "{e}");
    // The plugin's compiler error comes back with its entry and message.
    let e = triton::compile(&p, b"module { tt.bad }", &opts).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("PJRT_Triton_Compile") && text.contains("tt.bad"),
        "{text}"
    );
    // A closed client refuses.
    let client = Client::new(&p, &ClientOptions::new()).unwrap();
    client.close().unwrap();
    let e = client.triton_compile(MODULE.as_bytes(), &opts).unwrap_err();
    assert!(matches!(e, Error::Closed(_)), "{e:?}");
}

#[test]
fn forced_plugin_error_is_reported() {
    let p = common::load_fake(
        &[
            ("RPJRT_FAKE_EXTENSIONS", "Triton"),
            (
                "RPJRT_FAKE_FAIL",
                "PJRT_Triton_Compile:RESOURCE_EXHAUSTED:no registers left",
            ),
        ],
        KNOBS,
    )
    .unwrap();
    let opts = TritonCompileOptions::new("9.0").unwrap();
    let e = triton::compile(&p, MODULE.as_bytes(), &opts).unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.to_string().contains("no registers left"), "{e}");
}

#[test]
fn fake_without_the_extension_is_unsupported() {
    let p = common::load_fake(&[("RPJRT_FAKE_EXTENSIONS", "Layouts,FFI")], KNOBS).unwrap();
    assert!(!triton::is_available(&p));
    let e = triton::compile(
        &p,
        MODULE.as_bytes(),
        &TritonCompileOptions::new("9.0").unwrap(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("PJRT_Triton_Compile") && text.contains("Triton extension"),
        "{text}"
    );
}

#[test]
fn cpu_plugins_have_no_triton_extension() {
    common::for_each_plugin(|plugin, client| {
        // A CPU device has no compute capability to take the architecture from.
        let dev = client.default_device().unwrap();
        let e = TritonCompileOptions::for_device(&dev)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("compute_capability") && e.contains("sm_90"),
            "{e}"
        );
        assert!(!triton::is_available(plugin));
        let opts = TritonCompileOptions::new("sm_90").unwrap();
        let e = client.triton_compile(MODULE.as_bytes(), &opts).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
        assert_eq!(e.code(), Code::Unimplemented);
        let text = e.to_string();
        assert!(
            text.contains("PJRT_Triton_Compile") && text.contains("PJRT_Triton_Extension"),
            "{text}"
        );
    });
}
