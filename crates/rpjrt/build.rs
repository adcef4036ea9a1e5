//! Builds the C++ guard that catches exceptions escaping from plugin entries
//! (src/raw/guard.cpp; see src/raw/guard.rs).

fn main() {
    println!("cargo:rerun-if-changed=src/raw/guard.cpp");
    cc::Build::new()
        .cpp(true)
        .file("src/raw/guard.cpp")
        .flag_if_supported("-std=c++17")
        .warnings(true)
        .compile("rpjrt_guard");
}
