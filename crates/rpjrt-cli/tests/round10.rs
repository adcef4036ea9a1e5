//! Round-10 audit of the command line (docs, exit codes, messages): every verb that takes
//! a plugin gives exit code 2 for a name nothing matches; a refused create option is exit 2
//! with no install hint; `compile -o NAME=VALUE` is refused; compile-cache hits say so and
//! the JSON's numbers are numbers; malformed literals say where; messages name no
//! Python-only remedy; `info` on a CUDA plugin without a GPU names the plugin and the
//! driver; and docs/cli.md documents every option `--help` lists, with its default.

use std::collections::BTreeSet;

use serde_json::Value as Json;

mod common;

use common::{fixture, old, plugin, rpjrt, run, tmpdir};

/// The site-packages directory holding a plugin wheel (for discovery by platform).
fn site_of(plugin: &std::path::Path) -> std::path::PathBuf {
    plugin
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "site-packages"))
        .expect("the test plugins are installed in a site-packages directory")
        .to_path_buf()
}

/// The "no plugin matching" message, said the same way by every verb.
fn assert_no_match(code: i32, err: &str, what: &str) {
    assert_eq!(code, 2, "{what}: {err}");
    let first = err.lines().next().unwrap_or("");
    assert_eq!(
        first, "rpjrt: no PJRT plugin matching \"nosuchplugin\" found. Searched:",
        "{what}: {err}"
    );
    assert_eq!(
        err.lines().filter(|l| l.starts_with("rpjrt:")).count(),
        1,
        "{what}: one message: {err}"
    );
    assert!(!err.contains("cannot load PJRT plugin"), "{what}: {err}");
}

#[test]
fn every_verb_gives_exit_2_for_an_unknown_plugin_name() {
    let d = tmpdir("unknown-plugin");
    let prog = fixture("mul_add.mlir");
    let prog = prog.to_str().unwrap();
    let out = d.join("x.rpjrt");
    let out = out.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["info", "nosuchplugin"],
        vec!["conform", "nosuchplugin", "--only", "api.*"],
        vec!["run", prog, "--random", "--plugin", "nosuchplugin"],
        vec!["compile", prog, "-o", out, "--plugin", "nosuchplugin"],
        vec![
            "rendezvous",
            "--process-id",
            "0",
            "--num-processes",
            "1",
            "--coordinator",
            "127.0.0.1:0",
            "--timeout",
            "5",
            "--plugin",
            "nosuchplugin",
        ],
    ];
    for args in cases {
        let (code, _, err) = run(rpjrt().args(&args));
        let what = args.join(" ");
        if args[0] == "rendezvous" {
            // Each process says which it is.
            assert_eq!(code, 2, "{what}: {err}");
            assert!(
                err.starts_with(
                    "rpjrt: process 0 of 1: no PJRT plugin matching \"nosuchplugin\" found."
                ),
                "{what}: {err}"
            );
        } else {
            assert_no_match(code, &err, &what);
        }
    }
    assert!(!d.join("x.rpjrt").exists());
}

#[test]
fn a_refused_create_option_is_exit_2_without_an_install_hint() {
    let prog = fixture("mul_add.mlir");
    let d = tmpdir("bad-option");
    for args in [
        vec!["run", prog.to_str().unwrap(), "--random"],
        vec!["info"],
        vec![
            "compile",
            prog.to_str().unwrap(),
            "-o",
            d.join("x.rpjrt").to_str().unwrap(),
        ],
    ] {
        // By platform (every CPU plugin tried), and by path (one plugin).
        for plugin_spec in ["cpu", old().to_str().unwrap()] {
            let mut c = rpjrt();
            c.args(&args);
            c.env("RPJRT_PLUGIN_PATH", site_of(&old()));
            if args[0] == "info" {
                c.arg(plugin_spec);
            } else {
                c.args(["--plugin", plugin_spec]);
            }
            let flag = if args[0] == "compile" {
                "--client-option"
            } else {
                "-o"
            };
            c.args([flag, "cpu_device_count=0"]);
            let (code, _, err) = run(&mut c);
            let what = format!("{args:?} {plugin_spec}");
            assert_eq!(code, 2, "{what}: {err}");
            assert!(err.contains("cpu_device_count"), "{what}: {err}");
            assert!(
                !err.contains("pip install"),
                "{what}: no install hint: {err}"
            );
            assert!(!err.contains("to get a working plugin"), "{what}: {err}");
        }
    }
}

#[test]
fn compile_refuses_a_create_option_given_as_its_output() {
    let d = tmpdir("compile-dash-o");
    let prog = fixture("mul_add.mlir");
    for bad in ["cpu_device_count=2", "x=1", "_a9=[0,1]", "num_nodes="] {
        let (code, out, err) = run(rpjrt()
            .current_dir(&*d)
            .arg("compile")
            .arg(&prog)
            .args(["-o", bad, "--plugin"])
            .arg(old()));
        assert_eq!(code, 2, "{bad}: {out}{err}");
        assert!(err.contains("--client-option"), "{bad}: {err}");
        assert!(err.contains(&format!("./{bad}")), "{bad}: {err}");
        assert!(!d.join(bad).exists(), "{bad} was written");
    }
    // With a directory part, or not of the form IDENT=VALUE, it is a file name.
    for ok in ["./cpu_device_count=2", "1x=2", "a-b=2", "plain.rpjrt"] {
        let (code, _, err) = run(rpjrt()
            .current_dir(&*d)
            .arg("compile")
            .arg(&prog)
            .args(["-o", ok, "--plugin"])
            .arg(old()));
        assert_eq!(code, 0, "{ok}: {err}");
        assert!(d.join(ok).is_file(), "{ok}");
    }
    // --option is --client-option's other spelling (as for run and info).
    let (code, _, err) = run(rpjrt()
        .current_dir(&*d)
        .arg("compile")
        .arg(&prog)
        .args([
            "-o",
            "y.rpjrt",
            "--option",
            "cpu_device_count=2",
            "--plugin",
        ])
        .arg(old()));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn compile_says_when_it_loaded_from_the_cache_and_its_json_numbers_are_numbers() {
    let d = tmpdir("compile-cache");
    let prog = fixture("mul_add.mlir");
    let cache = d.join("cache");
    let compile = |json: bool| {
        let mut c = rpjrt();
        c.arg("compile")
            .arg(&prog)
            .arg("-o")
            .arg(d.join("a.rpjrt"))
            .arg("--cache-dir")
            .arg(&cache)
            .arg("--plugin")
            .arg(old());
        if json {
            c.arg("--json");
        }
        run(&mut c)
    };
    let (code, out, err) = compile(false);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("compiled in"), "{out}");
    assert!(out.contains("stored in the compile cache"), "{out}");
    let (code, out, err) = compile(false);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("loaded from the compile cache"), "{out}");
    assert!(
        !out.contains("compiled in"),
        "a hit is not a compile: {out}"
    );
    let (code, out, err) = compile(true);
    assert_eq!(code, 0, "{err}");
    let doc: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["from_cache"], Json::Bool(true), "{doc}");
    assert_eq!(doc["cache_dir"], cache.display().to_string());
    assert!(doc["target"]["device_count"].is_u64(), "{doc}");
    assert!(doc["bytes"].is_u64() && doc["compile_ms"].is_f64(), "{doc}");
    // Without a cache: a compile, and no cache.
    let (code, out, err) = run(rpjrt()
        .arg("compile")
        .arg(&prog)
        .arg("-o")
        .arg(d.join("b.rpjrt"))
        .args(["--json", "--describe", "--plugin"])
        .arg(old())
        .env_remove("RPJRT_CACHE_DIR"));
    assert_eq!(code, 0, "{err}");
    let doc: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["from_cache"], Json::Bool(false), "{doc}");
    assert!(doc["cache_dir"].is_null(), "{doc}");
    assert!(doc["target"]["device_count"].is_u64(), "{doc}");
    // A layout is a list of numbers, not its text.
    for k in ["parameter_layouts", "output_layouts"] {
        if let Some(list) = doc["executable"][k].as_array() {
            for l in list {
                assert!(l.is_array() || l.is_string(), "{k}: {l}");
                if let Some(dims) = l.as_array() {
                    assert!(dims.iter().all(Json::is_i64), "{k}: {l}");
                }
            }
        }
    }
    // The cache's own listing and entry: device_count a number too.
    let (code, out, err) = run(rpjrt().args(["cache", "ls", "--json", "--dir"]).arg(&cache));
    assert_eq!(code, 0, "{err}");
    let doc: Json = serde_json::from_str(&out).unwrap();
    let entry = &doc["entries"][0];
    assert!(entry["target"]["device_count"].is_u64(), "{doc}");
    let key = entry["key"].as_str().unwrap();
    let (code, out, err) = run(rpjrt()
        .args(["cache", "info", key, "--json", "--dir"])
        .arg(&cache));
    assert_eq!(code, 0, "{err}");
    let doc: Json = serde_json::from_str(&out).unwrap();
    assert!(doc["target"]["device_count"].is_u64(), "{doc}");
}

#[test]
fn malformed_literals_say_where_and_hints_are_for_the_command_line() {
    let prog = fixture("mul_add.mlir");
    let lit = |value: &str| {
        run(rpjrt()
            .arg("run")
            .arg(&prog)
            .args(["--random", "--plugin"])
            .arg(old())
            .args(["-i", &format!("0={value}")]))
    };
    for (value, says) in [
        ("[1,,2]", "an empty element at character 4"),
        ("[", "the \"[\" at character 1 is never closed"),
        ("]", "character 1"),
        ("[1 2]", "separated by a space at character 3"),
        ("nan nan", "separated by a space at character 4"),
        ("[1,2]]", "the \"]\" at character 6 closes no \"[\""),
        ("[1][2]", "character 4"),
        ("1,2", "outside brackets"),
        ("[,]", "an empty element at character 2"),
        ("", "it is empty"),
        ("[1,é]", "the element at character 4"),
        ("[[1],2]", "character 6"),
    ] {
        let (code, _, err) = lit(value);
        assert_eq!(code, 2, "{value}: {err}");
        assert!(err.contains(says), "{value}: {err}");
        assert!(!err.contains("near \"\""), "{value}: {err}");
    }
    for (value, says) in [
        ("300:int8", "give a value in the type's range"),
        ("[1,2,3,4,5,6,7,8.5]:int32", "write whole numbers"),
        ("[1,2,3,4,5,6,7,1e39]:f32", "within the type's range"),
    ] {
        let (code, _, err) = lit(value);
        assert_eq!(code, 2, "{value}: {err}");
        assert!(err.contains(says), "{value}: {err}");
        assert!(
            !err.contains("Python") && !err.contains("cast=True"),
            "{value}: no Python-only remedy: {err}"
        );
    }
}

#[test]
fn info_on_a_cuda_plugin_without_a_gpu_names_the_plugin_and_the_driver() {
    let cuda = plugin("RPJRT_TEST_PLUGIN_CUDA");
    if rpjrt_cuda::driver_summary().contains("loaded") {
        // A machine with a driver: the plugin may well work; nothing to check here.
        return;
    }
    let (code, _, err) = run(rpjrt().arg("info").arg(&cuda));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("could not be created"), "{err}");
    assert!(
        err.contains(&format!("plugin {}", cuda.display())),
        "names the plugin file: {err}"
    );
    assert!(
        err.contains("CUDA driver: "),
        "says what the driver gave: {err}"
    );
    // The same context as `run` gives.
    let (_, _, run_err) = run(rpjrt()
        .arg("run")
        .arg(fixture("mul_add.mlir"))
        .arg("--random")
        .arg("--plugin")
        .arg(&cuda));
    assert!(run_err.contains("CUDA driver: "), "{run_err}");
}

/// The long options a `--help` text lists (`--name`, and the aliases it shows), with each
/// one's default, if any.
fn long_options(help: &str) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    let mut in_options = false;
    // The options of the option line last seen (its description may span lines).
    let mut current: Vec<usize> = Vec::new();
    let names = |text: &str| -> Vec<String> {
        text.match_indices("--")
            .map(|(i, _)| {
                let name: String = text[i + 2..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                format!("--{name}")
            })
            .filter(|n| n.len() > 2)
            .collect()
    };
    for line in help.lines() {
        if line.starts_with("Options:") {
            in_options = true;
            continue;
        }
        if !line.starts_with(' ') && !line.is_empty() {
            in_options = false;
        }
        if !in_options {
            continue;
        }
        let t = line.trim_start();
        if t.starts_with('-') {
            let spec = t.split("  ").next().unwrap_or(t);
            current = names(spec)
                .into_iter()
                .map(|n| {
                    out.push((n, None));
                    out.len() - 1
                })
                .collect();
        }
        if let Some(d) = line.find("[default: ") {
            let value = line[d + "[default: ".len()..]
                .split(']')
                .next()
                .unwrap_or("");
            for &i in &current {
                out[i].1 = Some(value.to_string());
            }
        }
        if let Some(a) = line.find("[aliases: ") {
            let aliases = line[a..].split(']').next().unwrap_or("");
            for n in names(aliases) {
                out.push((n, None));
            }
        }
    }
    out
}

#[test]
fn docs_cli_md_documents_every_verb_and_option_that_help_lists() {
    let docs = std::fs::read_to_string(common::root().join("docs/cli.md")).unwrap();
    let verbs: Vec<Vec<&str>> = vec![
        vec![],
        vec!["info"],
        vec!["plugins"],
        vec!["conform"],
        vec!["run"],
        vec!["launch"],
        vec!["rendezvous"],
        vec!["compile"],
        vec!["cache"],
        vec!["cache", "ls"],
        vec!["cache", "info"],
        vec!["cache", "clear"],
        vec!["trace"],
        vec!["trace", "view"],
    ];
    // Every verb `rpjrt --help` lists has its own section.
    let (_, top, _) = run(rpjrt().arg("--help"));
    let listed: BTreeSet<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|v| v != "help")
        .collect();
    for v in &listed {
        assert!(
            verbs.iter().any(|x| x.first() == Some(&v.as_str())),
            "the test does not know the verb {v}"
        );
        assert!(
            docs.contains(&format!("## `rpjrt {v}")),
            "docs/cli.md has no section for `rpjrt {v}`"
        );
    }
    let mut missing = Vec::new();
    for verb in &verbs {
        let (code, help, err) = run(rpjrt().args(verb).arg("--help"));
        assert_eq!(code, 0, "{verb:?}: {err}");
        let options = long_options(&help);
        assert!(
            options.iter().any(|(n, _)| n == "--help"),
            "{verb:?}: parsed no options from {help}"
        );
        for (name, default) in options {
            if ["--help", "--version"].contains(&name.as_str()) {
                continue;
            }
            // The option, as `--name` followed by something other than a name character.
            let lines: Vec<&str> = docs
                .lines()
                .filter(|l| {
                    l.match_indices(name.as_str()).any(|(i, _)| {
                        l[i + name.len()..]
                            .chars()
                            .next()
                            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-'))
                    })
                })
                .collect();
            if lines.is_empty() {
                missing.push(format!("rpjrt {} {name}", verb.join(" ")));
                continue;
            }
            if let Some(d) = default {
                if !lines
                    .iter()
                    .any(|l| l.contains("default") && l.contains(&d))
                {
                    missing.push(format!(
                        "rpjrt {} {name}: its default {d} (a line naming the option should \
                         say `default ... {d}`)",
                        verb.join(" ")
                    ));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/cli.md does not document:\n  {}",
        missing.join("\n  ")
    );
}
