//! Discovery against a real plugin wheel: the CUDA plugin that `scripts/setup.sh` installs
//! into its own directory (no GPU needed: nothing is loaded). The wheel's path comes from
//! `RPJRT_TEST_PLUGIN_CUDA`, which `scripts/test.sh` sets from `.deps/plugins.env`.

use std::path::PathBuf;

use rpjrt_discovery::{Discovery, SearchPath};

#[test]
fn discovery_finds_the_cuda_wheel() {
    let plugin = PathBuf::from(std::env::var_os("RPJRT_TEST_PLUGIN_CUDA").expect(
        "RPJRT_TEST_PLUGIN_CUDA is not set: source .deps/plugins.env (scripts/setup.sh writes it)",
    ));
    // The library sits three levels below its site directory
    // (site/jax_plugins/xla_cudaNN/lib.so); the dist-info beside it makes it a candidate.
    let site = plugin.ancestors().nth(3).unwrap().to_path_buf();
    let found = Discovery::new(SearchPath::new([site]))
        .candidates(Some("cuda"))
        .expect("discovery finds the CUDA wheel");
    let first = &found[0];
    assert_eq!(first.platform.as_deref(), Some("cuda"), "{first:?}");
    assert_eq!(
        std::fs::canonicalize(&first.path).unwrap(),
        std::fs::canonicalize(&plugin).unwrap()
    );
}
