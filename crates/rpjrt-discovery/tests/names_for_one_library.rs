//! Two names in `PJRT_NAMES_AND_LIBRARY_PATHS` for one library (two JAX backends on one
//! plugin, each with its own create options) are both found, each with its own options.
//! Nothing is loaded: the library only has to be a file.

use rpjrt_discovery::Discovery;

#[test]
fn each_name_for_one_library_is_found_with_its_own_options() {
    let dir = std::env::temp_dir().join(format!("rpjrt-two-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("libshared_pjrt.so");
    std::fs::write(&lib, b"not loaded").unwrap();
    let config = |count: u32| {
        let path = dir.join(format!("cpu{count}.json"));
        let text = serde_json::json!({
            "library_path": lib.display().to_string(),
            "create_options": {"cpu_device_count": count},
        });
        std::fs::write(&path, text.to_string()).unwrap();
        path
    };
    let (two, three) = (config(2), config(3));
    // This test is alone in its process: the variables are its own.
    std::env::remove_var("RPJRT_PLUGIN");
    std::env::set_var(
        "PJRT_NAMES_AND_LIBRARY_PATHS",
        format!(
            "cputwo:{},cputhree:{},alpha:{lib},beta:{lib},alpha:{lib}",
            two.display(),
            three.display(),
            lib = lib.display()
        ),
    );
    let found = Discovery::from_env().plugins().unwrap();
    let named: Vec<_> = found
        .iter()
        .filter(|p| p.source == "PJRT_NAMES_AND_LIBRARY_PATHS")
        .collect();
    let names: Vec<&str> = named.iter().map(|p| p.name.as_str()).collect();
    // The repeated `alpha` is one entry.
    assert_eq!(names, ["cputwo", "cputhree", "alpha", "beta"], "{found:?}");
    let count = |name: &str| {
        let p = named.iter().find(|p| p.name == name).unwrap();
        p.options
            .as_ref()
            .and_then(|o| o.entries().iter().find(|(k, _)| k == "cpu_device_count"))
            .map(|(_, v)| format!("{v:?}"))
    };
    assert!(
        count("cputwo").unwrap().contains('2'),
        "{:?}",
        count("cputwo")
    );
    assert!(
        count("cputhree").unwrap().contains('3'),
        "{:?}",
        count("cputhree")
    );
    let d = Discovery::from_env();
    for name in ["cputhree", "beta"] {
        let c = d.candidates(Some(name)).unwrap();
        assert_eq!(c[0].name, name, "{c:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
