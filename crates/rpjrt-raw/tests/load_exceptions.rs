//! A plugin library that throws a C++ exception while it is being loaded: from
//! `GetPjrtApi` the load fails with an error carrying the exception's text; from a static
//! initialiser (which runs inside the C library's loader, holding its lock) the process
//! ends at once with a message saying what happened, instead of aborting in the unwinder
//! without one or hanging at the next library load.
//!
//! The test libraries are compiled here with the system's C++ compiler, which building
//! rpjrt-raw (its exception guard) needs anyway.

use std::path::{Path, PathBuf};
use std::process::Command;

fn compile(dir: &Path, name: &str, source: &str) -> PathBuf {
    let src = dir.join(format!("{name}.cpp"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(format!("{name}.so"));
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let st = Command::new(&cxx)
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("running the C++ compiler {cxx:?}: {e}"));
    assert!(st.success(), "{cxx} failed on {}", src.display());
    out
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rpjrt-load-exc-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

const THROW_IN_GET_API: &str = r#"
#include <stdexcept>
extern "C" const void* GetPjrtApi() { throw std::runtime_error("no device table today"); }
"#;

const THROW_IN_INITIALISER: &str = r#"
#include <stdexcept>
struct Boom { Boom() { throw std::runtime_error("cannot create directory /tmp/assets"); } };
static Boom boom;
extern "C" const void* GetPjrtApi() { return nullptr; }
"#;

#[test]
fn get_pjrt_api_throwing_is_an_error_naming_the_exception() {
    let dir = scratch("api");
    let lib = compile(&dir, "throwapi", THROW_IN_GET_API);
    let e = rpjrt_raw::load(&lib)
        .err()
        .expect("the load must fail")
        .to_string();
    assert!(e.contains("GetPjrtApi threw a C++ exception"), "{e}");
    assert!(e.contains("no device table today"), "{e}");
    assert!(e.contains(&lib.display().to_string()), "{e}");
    // The process goes on: another load works as before (and fails as a non-plugin).
    let e = rpjrt_raw::load(Path::new("/definitely/not/there.so"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("there.so"), "{e}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Loads a library whose initialiser throws in a child (this test, run again with
/// `RPJRT_LOAD_EXC_CHILD` naming the library) and checks how the child ended.
#[test]
fn initialiser_throwing_ends_the_process_saying_why() {
    if let Some(p) = std::env::var_os("RPJRT_LOAD_EXC_CHILD") {
        let r = rpjrt_raw::load(Path::new(&p));
        println!("load returned: {:?}", r.err().map(|e| e.to_string()));
        return;
    }
    let dir = scratch("init");
    let lib = compile(&dir, "throwinit", THROW_IN_INITIALISER);
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "initialiser_throwing_ends_the_process_saying_why",
            "--nocapture",
        ])
        .env("RPJRT_LOAD_EXC_CHILD", &lib)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(6),
        "{:?}\n{stdout}\n{stderr}",
        out.status
    );
    assert!(!stdout.contains("load returned"), "{stdout}");
    assert!(
        stderr.contains("threw a C++ exception from its library initialisers"),
        "{stderr}"
    );
    assert!(
        stderr.contains("cannot create directory /tmp/assets"),
        "{stderr}"
    );
    assert!(stderr.contains(&lib.display().to_string()), "{stderr}");
    assert!(
        !stderr.contains("Rust cannot catch foreign exceptions"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A library that is no plugin (here its entry point is exported under a C++-mangled name)
/// but started a thread while it loaded: the load fails with an error, and the library
/// stays mapped, so the thread goes on running its code. Unloading it after the error made
/// the process crash a moment later, in the thread, with no message.
const NO_PLUGIN_WITH_A_THREAD: &str = r#"
#include <pthread.h>
#include <unistd.h>
static void* worker(void*) { for (;;) { usleep(1000); } return nullptr; }
struct Start { Start() { pthread_t t; pthread_create(&t, nullptr, worker, nullptr); pthread_detach(t); } };
static Start start;
const void* GetPjrtApi() { return nullptr; }
"#;

#[test]
fn a_library_that_is_no_plugin_is_not_unloaded_under_its_threads() {
    let dir = scratch("thread");
    let lib = compile(&dir, "notplugin", NO_PLUGIN_WITH_A_THREAD);
    for _ in 0..2 {
        let e = rpjrt_raw::load(&lib)
            .err()
            .expect("the load must fail")
            .to_string();
        assert!(e.contains("does not export GetPjrtApi"), "{e}");
    }
    // The thread's code is still mapped: the process lives on while it runs.
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::remove_dir_all(&dir).unwrap();
}
