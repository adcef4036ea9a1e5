//! Builds the C++ guard that catches exceptions escaping from plugin entries
//! (src/guard.cpp; see src/guard.rs).
//!
//! The guard must share the C++ runtime of the plugins whose exceptions it catches, and
//! PJRT plugins are built with GCC's libstdc++. When the configured C++ compiler is zig's
//! (`maturin build --zig`, which links against an old glibc for a `manylinux_2_28` wheel),
//! it would compile and link the guard against LLVM's libc++ instead, and catching a
//! libstdc++ exception there crashes the process (measured: SIGSEGV). So with zig the guard
//! is compiled by the system's GCC (`RPJRT_GUARD_CXX`, else `g++`) and linked to the system
//! `libstdc++.so.6` by file name, which zig then leaves alone. The symbol versions that the
//! guard needs from libstdc++ (GLIBCXX_3.4.21, CXXABI_1.3.7) are within manylinux_2_28.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/guard.cpp");
    println!("cargo:rerun-if-env-changed=RPJRT_GUARD_CXX");
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .file("src/guard.cpp")
        .flag_if_supported("-std=c++17")
        .warnings(true);
    let configured = build.get_compiler();
    if configured.path().to_string_lossy().contains("zig") {
        let gxx = std::env::var("RPJRT_GUARD_CXX").unwrap_or_else(|_| "g++".to_string());
        let lib = gcc_libstdcxx(&gxx);
        let dir = lib.parent().expect("a file path has a parent");
        build.compiler(&gxx).cpp_link_stdlib(None);
        build.compile("rpjrt_guard");
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-lib=dylib:+verbatim=libstdc++.so.6");
    } else {
        build.compile("rpjrt_guard");
    }
}

/// The `libstdc++.so.6` that `gxx` links against, found by asking it.
fn gcc_libstdcxx(gxx: &str) -> std::path::PathBuf {
    let out = Command::new(gxx)
        .arg("-print-file-name=libstdc++.so.6")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "the C++ compiler is zig's, so the exception guard is built with GCC ({gxx}, \
                 set RPJRT_GUARD_CXX to choose another) to share the plugins' libstdc++, \
                 but running it failed: {e}"
            )
        });
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let path = Path::new(&path);
    assert!(
        out.status.success() && path.is_absolute() && path.is_file(),
        "{gxx} -print-file-name=libstdc++.so.6 did not name a file (got {:?}); the exception \
         guard needs GCC's libstdc++ (install g++)",
        path
    );
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}
