//! Compile-once error paths on the scriptable fake plugin: old versions, short extension
//! structs, empty slots and failing loads. (Each test loads its own copy of the fake, with
//! knobs set under a lock, as in `fake_plugin.rs`.)

mod common;

use std::path::PathBuf;

use rpjrt::{
    Artifact, ArtifactTarget, Cache, Client, ClientOptions, CompileOptions, Error, Program,
};

const KNOBS: [&str; 4] = [
    "RPJRT_FAKE_VERSION",
    "RPJRT_FAKE_NULL_SLOTS",
    "RPJRT_FAKE_FAIL",
    "RPJRT_FAKE_EXTENSIONS",
];

const PROGRAM: &str = "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}\n";

fn client(knobs: &[(&str, &str)]) -> Client {
    let p = common::load_fake(knobs, &KNOBS).expect("fake plugin loads");
    Client::new(&p, &ClientOptions::new()).expect("client")
}

fn run(c: &Client, exe: &rpjrt::Executable) -> Vec<f32> {
    let d = c.default_device().unwrap();
    let x = c
        .buffer_from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4], &d)
        .unwrap();
    exe.execute(&[&x]).unwrap()[0].to_vec_of::<f32>().unwrap()
}

fn program() -> Program {
    Program::mlir(PROGRAM)
}

#[test]
fn round_trip_on_the_fake() {
    let c = client(&[]);
    let exe = c.compile(&program(), &CompileOptions::default()).unwrap();
    let loaded = c.load(&exe.serialize().unwrap(), None).unwrap();
    assert_eq!(run(&c, &loaded), vec![1.0, 2.0, 3.0, 4.0]);
    let with = c
        .load(&exe.serialize().unwrap(), Some(&CompileOptions::default()))
        .unwrap();
    assert_eq!(run(&c, &with), vec![1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn overrides_are_refused_before_pjrt_0_71() {
    let c = client(&[("RPJRT_FAKE_VERSION", "0.70")]);
    let artifact = Artifact {
        target: ArtifactTarget::of_client(&c).unwrap(),
        compile_options: Vec::new(),
        blob: b"never reaches the plugin".to_vec(),
        extra: Vec::new(),
    }
    .encode();
    let e = c
        .load(&artifact, Some(&CompileOptions::default()))
        .unwrap_err();
    match &e {
        Error::Unsupported {
            what,
            needs,
            plugin,
            ..
        } => {
            assert!(what.contains("overrides"), "{what}");
            assert_eq!((needs.minor, plugin.minor), (71, 70));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn short_and_unimplemented_extensions_are_unsupported() {
    // A Layouts struct of 64 bytes ends before the output-layouts slot (offset 64).
    let c = client(&[("RPJRT_FAKE_EXTENSIONS", "4:64")]);
    let exe = c.compile(&program(), &CompileOptions::default()).unwrap();
    match exe.output_layouts().unwrap_err() {
        Error::Unsupported { what, .. } => assert!(what.contains("64 bytes"), "{what}"),
        other => panic!("{other:?}"),
    }
    // No Shardings extension at all.
    match exe.output_shardings().unwrap_err() {
        Error::Unsupported { what, .. } => assert!(what.contains("no Shardings"), "{what}"),
        other => panic!("{other:?}"),
    }
    // Full-size extension whose slots answer UNIMPLEMENTED.
    let c = client(&[("RPJRT_FAKE_EXTENSIONS", "Layouts")]);
    let exe = c.compile(&program(), &CompileOptions::default()).unwrap();
    match exe.parameter_layouts().unwrap_err() {
        Error::Unsupported { what, .. } => assert!(what.contains("UNIMPLEMENTED"), "{what}"),
        other => panic!("{other:?}"),
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rpjrt-aot-fake-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn a_plugin_that_cannot_serialize_still_compiles_with_a_cache() {
    let c = client(&[("RPJRT_FAKE_NULL_SLOTS", "PJRT_Executable_Serialize")]);
    let dir = temp_dir("noserialize");
    let cache = Cache::new(&dir, None).unwrap();
    for _ in 0..3 {
        let exe = c
            .compile_with_cache(&program(), &CompileOptions::default(), &cache)
            .unwrap();
        assert_eq!(run(&c, &exe), vec![1.0, 2.0, 3.0, 4.0]);
    }
    let w = cache.take_warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("cannot serialize"), "{w:?}");
    assert_eq!(cache.stats().misses, 3);
    assert!(cache.entries().unwrap().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_entry_the_plugin_refuses_is_reported_and_recompiled() {
    let dir = temp_dir("refused");
    let good = client(&[]);
    let writer = Cache::new(&dir, None).unwrap();
    good.compile_with_cache(&program(), &CompileOptions::default(), &writer)
        .unwrap();
    assert_eq!(writer.entries().unwrap().len(), 1);

    let failing = client(&[(
        "RPJRT_FAKE_FAIL",
        "PJRT_Executable_DeserializeAndLoad:INTERNAL:cannot load this",
    )]);
    let cache = Cache::new(&dir, None).unwrap();
    for _ in 0..2 {
        let exe = failing
            .compile_with_cache(&program(), &CompileOptions::default(), &cache)
            .unwrap();
        assert_eq!(run(&failing, &exe), vec![1.0, 2.0, 3.0, 4.0]);
    }
    let s = cache.stats();
    assert_eq!((s.hits, s.misses, s.corrupt), (0, 2, 2), "{s:?}");
    let w = cache.take_warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("cannot load this"), "{w:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_entry_refused_for_what_this_process_lacks_is_kept() {
    let dir = temp_dir("kept");
    let good = client(&[]);
    let writer = Cache::new(&dir, None).unwrap();
    good.compile_with_cache(&program(), &CompileOptions::default(), &writer)
        .unwrap();
    // What a plugin says when a custom-call handler is registered in the writing process
    // but not in this one: the entry is fine for the others sharing the directory.
    let lacking = client(&[(
        "RPJRT_FAKE_FAIL",
        "PJRT_Executable_DeserializeAndLoad:NOT_FOUND:No FFI handler registered for h",
    )]);
    let cache = Cache::new(&dir, None).unwrap();
    let exe = lacking
        .compile_with_cache(&program(), &CompileOptions::default(), &cache)
        .unwrap();
    assert_eq!(run(&lacking, &exe), vec![1.0, 2.0, 3.0, 4.0]);
    let s = cache.stats();
    assert_eq!((s.hits, s.misses, s.corrupt), (0, 1, 0), "{s:?}");
    let w = cache.take_warnings();
    assert!(
        w.len() == 1 && w[0].contains("No FFI handler") && w[0].contains("kept"),
        "{w:?}"
    );
    assert_eq!(writer.entries().unwrap().len(), 1);
    // The writer still hits it.
    good.compile_with_cache(&program(), &CompileOptions::default(), &writer)
        .unwrap();
    assert_eq!(writer.stats().hits, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cache_directory_removed_meanwhile_is_made_again() {
    let dir = temp_dir("removed");
    let c = client(&[]);
    let cache = Cache::new(&dir, None).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    c.compile_with_cache(&program(), &CompileOptions::default(), &cache)
        .unwrap();
    assert_eq!(cache.stats().writes, 1, "{:?}", cache.take_warnings());
    assert_eq!(cache.entries().unwrap().len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn artifacts_record_the_plugin_build() {
    let c = client(&[]);
    let t = ArtifactTarget::of_client(&c).unwrap();
    assert_eq!(t.plugin_build.len(), 16, "{t:?}");
    assert_eq!(t.plugin_build, c.plugin().build());
    let exe = c.compile(&program(), &CompileOptions::default()).unwrap();
    let bytes = exe.serialize().unwrap();
    let mut other = Artifact::decode(&bytes).unwrap();
    other.target.plugin_build = "0123456789abcdef".into();
    let e = c.load(&other.encode(), None).unwrap_err().to_string();
    assert!(
        e.contains("plugin_build") && e.contains("another build"),
        "{e}"
    );
    // Only the build differs, which the one-line summary leaves out: it is said once, not
    // as "built for X but this client is X".
    let summary = t.to_string();
    assert_eq!(e.matches(&summary).count(), 1, "{e}");
    assert!(e.contains("are both"), "{e}");
    // An artifact from before the field (read as an unknown build) still decodes, for
    // inspection, and is refused for loading with the reason.
    other.target.plugin_build = String::new();
    let old = Artifact::decode(&other.encode()).unwrap();
    assert_eq!(old.target.plugin_build, "");
    let e = c.load(&other.encode(), None).unwrap_err().to_string();
    assert!(e.contains("does not record the plugin build"), "{e}");
}
