//! The persistent compile cache on both real CPU plugins: hits across processes, corrupt
//! entries, concurrent writers, eviction, counters, and listing.
//!
//! Cross-process tests run this test binary again as a child (`child_compiles_the_mlp`,
//! which does nothing unless `RPJRT_CACHE_TEST_CHILD` is set).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use rpjrt::{Artifact, Cache, Client, ClientOptions, CompileOptions, Executable, Program};

fn mlp() -> Program {
    Program::mlir(fixture("mlp_train_step.mlir"))
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rpjrt-cache-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn entry_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        // Entries only (not the plugin-build memo the cache keeps beside them).
        .filter(|p| p.extension().is_some_and(|e| e == "rpjrtexe"))
        .collect();
    v.sort();
    v
}

/// One SGD step of the MLP fixture on fixed inputs; returns the loss and the new `b2`.
fn run_mlp(exe: &Executable, c: &Client) -> Vec<f32> {
    let d = c.default_device().unwrap();
    let shapes: [&[i64]; 6] = [&[16, 32], &[32], &[32, 4], &[4], &[8, 16], &[8, 4]];
    let bufs: Vec<_> = shapes
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let n: i64 = s.iter().product();
            let v: Vec<f32> = (0..n)
                .map(|i| ((i * 7 + k as i64 * 3) % 11) as f32 / 11.0 - 0.5)
                .collect();
            c.buffer_from_slice(&v, s, &d).unwrap()
        })
        .collect();
    let refs: Vec<_> = bufs.iter().collect();
    let out = exe.execute(&refs).unwrap();
    assert_eq!(out.len(), 5);
    let mut r = out[3].to_vec_of::<f32>().unwrap();
    r.extend(out[4].to_vec_of::<f32>().unwrap());
    r
}

fn which_name(w: Which) -> &'static str {
    match w {
        Which::Old => "old",
        Which::New => "new",
    }
}

/// Not a test of its own: the body of a child process in the tests below.
#[test]
fn child_compiles_the_mlp() {
    let Ok(mode) = std::env::var("RPJRT_CACHE_TEST_CHILD") else {
        return;
    };
    let which = match std::env::var("RPJRT_CACHE_TEST_PLUGIN").as_deref() {
        Ok("old") => Which::Old,
        _ => Which::New,
    };
    let options = if mode == "option" {
        // RPJRT_CACHE_DIR names another directory: the option wins over it.
        ClientOptions::new().cache_dir(std::env::var("RPJRT_CACHE_TEST_DIR").unwrap())
    } else {
        ClientOptions::new()
    };
    let client = Client::new(&plugin(which), &options).unwrap();
    let (exe, stats) = if mode == "env" || mode == "option" {
        // RPJRT_CACHE_DIR is set for this process (or the option): the client picks the cache
        // up itself.
        let cache = client
            .cache()
            .expect("cache from RPJRT_CACHE_DIR or cache_dir");
        assert_eq!(
            cache.dir(),
            Path::new(&std::env::var("RPJRT_CACHE_TEST_DIR").unwrap())
        );
        let exe = client.compile(&mlp(), &CompileOptions::default()).unwrap();
        (exe, cache.stats())
    } else {
        let cache = Cache::new(std::env::var("RPJRT_CACHE_TEST_DIR").unwrap(), None).unwrap();
        let exe = client
            .compile_with_cache(&mlp(), &CompileOptions::default(), &cache)
            .unwrap();
        (exe, cache.stats())
    };
    let result: Vec<String> = run_mlp(&exe, &client)
        .iter()
        .map(|x| x.to_bits().to_string())
        .collect();
    println!(
        "CHILD hits={} misses={} result={}",
        stats.hits,
        stats.misses,
        result.join(",")
    );
}

/// Starts `child_compiles_the_mlp` in a new process (see `child_result`).
fn spawn_child(which: Which, dir: &Path, mode: &str) -> std::process::Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "child_compiles_the_mlp",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("RPJRT_CACHE_TEST_CHILD", mode)
    .env("RPJRT_CACHE_TEST_PLUGIN", which_name(which))
    .env("RPJRT_CACHE_TEST_DIR", dir)
    .env(which.var(), plugin_path(which))
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    if mode == "env" {
        cmd.env("RPJRT_CACHE_DIR", dir);
    } else if mode == "option" {
        cmd.env("RPJRT_CACHE_DIR", dir.join("not-this-one"));
    } else {
        cmd.env_remove("RPJRT_CACHE_DIR");
    }
    cmd.spawn().unwrap()
}

fn child_result(child: std::process::Child) -> (u64, u64, String) {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("CHILD ").map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("no CHILD line in {stdout}"));
    let mut hits = 0;
    let mut misses = 0;
    let mut result = String::new();
    for part in line.split(' ') {
        match part.split_once('=') {
            Some(("hits", v)) => hits = v.parse().unwrap(),
            Some(("misses", v)) => misses = v.parse().unwrap(),
            Some(("result", v)) => result = v.to_string(),
            _ => {}
        }
    }
    (hits, misses, result)
}

#[test]
fn a_second_process_gets_a_hit() {
    for which in Which::BOTH {
        for mode in ["explicit", "env", "option"] {
            let dir = temp_dir(&format!("second-{}-{mode}", which_name(which)));
            let first = child_result(spawn_child(which, &dir, mode));
            let second = child_result(spawn_child(which, &dir, mode));
            assert_eq!(
                (first.0, first.1),
                (0, 1),
                "{which:?} {mode}: first process"
            );
            assert_eq!(
                (second.0, second.1),
                (1, 0),
                "{which:?} {mode}: second process"
            );
            assert_eq!(first.2, second.2, "loaded executable computes the same");
            assert_eq!(entry_files(&dir).len(), 1);
            assert!(!dir.join("not-this-one").exists(), "{mode}");
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

#[test]
fn four_processes_writing_the_same_key_leave_one_valid_entry() {
    for which in Which::BOTH {
        let dir = temp_dir(&format!("four-{}", which_name(which)));
        std::fs::create_dir_all(&dir).unwrap();
        let children: Vec<_> = (0..4)
            .map(|_| spawn_child(which, &dir, "explicit"))
            .collect();
        let results: Vec<_> = children.into_iter().map(child_result).collect();
        for r in &results {
            assert_eq!(r.2, results[0].2);
        }
        let files = entry_files(&dir);
        assert_eq!(files.len(), 1, "{files:?}");
        Artifact::decode(&std::fs::read(&files[0]).unwrap()).unwrap();
        // And it is a hit for the next process.
        assert_eq!(child_result(spawn_child(which, &dir, "explicit")).0, 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn corrupt_and_truncated_entries_are_reported_once_and_recompiled() {
    for_each_plugin(|p, c| {
        let dir = temp_dir(&format!("corrupt-{}", p.version()));
        let cache = Cache::new(&dir, None).unwrap();
        let reported = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let sink = reported.clone();
        cache.set_warning_handler(move |m| sink.lock().unwrap().push(m.to_string()));
        let opts = CompileOptions::default();
        let expected = run_mlp(&c.compile_with_cache(&mlp(), &opts, &cache).unwrap(), c);
        let files = entry_files(&dir);
        assert_eq!(files.len(), 1);
        let good = std::fs::read(&files[0]).unwrap();

        // A flipped byte in the middle of the stored executable.
        let mut bad = good.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x01;
        std::fs::write(&files[0], &bad).unwrap();
        let exe = c.compile_with_cache(&mlp(), &opts, &cache).unwrap();
        assert_eq!(run_mlp(&exe, c), expected);
        let s = cache.stats();
        assert_eq!((s.hits, s.misses, s.corrupt), (0, 2, 1), "{s:?}");
        let warnings = cache.take_warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("checksum"), "{warnings:?}");
        assert_eq!(*reported.lock().unwrap(), warnings);
        // Recompiled and rewritten: a valid entry again, so the next compile hits.
        Artifact::decode(&std::fs::read(&files[0]).unwrap()).unwrap();
        c.compile_with_cache(&mlp(), &opts, &cache).unwrap();
        assert_eq!(cache.stats().hits, 1);

        // Truncated: the same again, and the same problem is not reported twice.
        std::fs::write(&files[0], &good[..good.len() / 3]).unwrap();
        let exe = c.compile_with_cache(&mlp(), &opts, &cache).unwrap();
        assert_eq!(run_mlp(&exe, c), expected);
        assert_eq!(cache.stats().corrupt, 2);
        assert!(cache.take_warnings().is_empty());
        assert_eq!(reported.lock().unwrap().len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    });
}

#[test]
fn a_fifo_under_an_entry_name_is_skipped_not_read() {
    for_each_plugin(|p, c| {
        let dir = temp_dir(&format!("fifo-{}", p.version()));
        let cache = Cache::new(&dir, None).unwrap();
        let opts = CompileOptions::default();
        let expected = run_mlp(&c.compile_with_cache(&mlp(), &opts, &cache).unwrap(), c);
        let files = entry_files(&dir);
        assert_eq!(files.len(), 1);
        // Reading a FIFO blocks until a writer comes: the lookup must not open it.
        std::fs::remove_file(&files[0]).unwrap();
        let made = Command::new("mkfifo").arg(&files[0]).status().unwrap();
        assert!(made.success(), "mkfifo");
        assert!(
            cache.entries().unwrap().is_empty(),
            "a FIFO is not an entry"
        );
        let exe = c.compile_with_cache(&mlp(), &opts, &cache).unwrap();
        assert_eq!(run_mlp(&exe, c), expected);
        let warnings = cache.take_warnings();
        assert!(
            warnings.iter().any(|w| w.contains("not a regular file")),
            "{warnings:?}"
        );
        // The recompiled entry replaced the FIFO: the next compile hits.
        assert!(std::fs::metadata(&files[0]).unwrap().is_file());
        let hits = cache.stats().hits;
        c.compile_with_cache(&mlp(), &opts, &cache).unwrap();
        assert_eq!(cache.stats().hits, hits + 1);
        let _ = std::fs::remove_dir_all(&dir);
    });
}

/// `a * b + k` over f32[8]: a different program (and cache key) for each `k`.
fn variant(k: u32) -> Program {
    Program::mlir(mul_add().replace("1.0", &format!("{k}.0")))
}

#[test]
fn swapped_entries_are_not_each_others_programs() {
    for_each_plugin(|p, c| {
        let dir = temp_dir(&format!("swap-{}", p.version()));
        let cache = Cache::new(&dir, None).unwrap();
        let opts = CompileOptions::default();
        // a * b + k with a = b = 1: k + 1 tells which program ran.
        let run = |exe: &Executable| -> Vec<f32> {
            let d = c.default_device().unwrap();
            let x = c.buffer_from_slice(&[1.0f32; 8], &[8], &d).unwrap();
            let out = exe.execute(&[&x, &x]).unwrap();
            out[0].to_vec_of::<f32>().unwrap()
        };
        c.compile_with_cache(&variant(1), &opts, &cache).unwrap();
        let one = entry_files(&dir);
        c.compile_with_cache(&variant(2), &opts, &cache).unwrap();
        let both = entry_files(&dir);
        let two: Vec<_> = both.iter().filter(|f| !one.contains(f)).cloned().collect();
        let (f1, f2) = (&one[0], &two[0]);
        // Swap the two valid entries by renaming.
        let tmp = dir.join("swap.tmp");
        std::fs::rename(f1, &tmp).unwrap();
        std::fs::rename(f2, f1).unwrap();
        std::fs::rename(&tmp, f2).unwrap();
        assert!(
            cache.entries().unwrap().iter().all(|e| e.error.is_some()),
            "a listing marks both entries unusable"
        );
        // Each lookup finds the other's program under its key: a corrupt entry, recompiled.
        let exe = c.compile_with_cache(&variant(1), &opts, &cache).unwrap();
        assert_eq!(run(&exe), vec![2.0; 8]);
        let exe = c.compile_with_cache(&variant(2), &opts, &cache).unwrap();
        assert_eq!(run(&exe), vec![3.0; 8]);
        let s = cache.stats();
        assert_eq!((s.hits, s.corrupt), (0, 2), "{s:?}");
        let w = cache.take_warnings();
        assert!(w.iter().all(|m| m.contains("renamed or copied")), "{w:?}");
        // Replaced by correct entries: the next lookups hit.
        c.compile_with_cache(&variant(1), &opts, &cache).unwrap();
        c.compile_with_cache(&variant(2), &opts, &cache).unwrap();
        assert_eq!(cache.stats().hits, 2);
        let _ = std::fs::remove_dir_all(&dir);
    });
}

#[test]
fn eviction_keeps_the_directory_under_its_bound() {
    for_each_plugin(|p, c| {
        let opts = CompileOptions::default();
        // Measure one entry, then allow room for two and a half.
        let probe_dir = temp_dir(&format!("probe-{}", p.version()));
        let probe = Cache::new(&probe_dir, None).unwrap();
        c.compile_with_cache(&variant(100), &opts, &probe).unwrap();
        let one = probe.total_bytes().unwrap();
        let bound = one * 5 / 2;
        let _ = std::fs::remove_dir_all(&probe_dir);

        let dir = temp_dir(&format!("evict-{}", p.version()));
        let cache = Cache::new(&dir, Some(bound)).unwrap();
        let pause = || std::thread::sleep(std::time::Duration::from_millis(20));
        c.compile_with_cache(&variant(1), &opts, &cache).unwrap();
        pause();
        c.compile_with_cache(&variant(2), &opts, &cache).unwrap();
        pause();
        // A hit on 1 makes 2 the least recently used.
        c.compile_with_cache(&variant(1), &opts, &cache).unwrap();
        assert_eq!(cache.stats().hits, 1);
        pause();
        c.compile_with_cache(&variant(3), &opts, &cache).unwrap();
        assert!(cache.total_bytes().unwrap() <= bound);
        assert_eq!(cache.stats().evictions, 1);
        // 2 went; 1 and 3 hit.
        c.compile_with_cache(&variant(1), &opts, &cache).unwrap();
        c.compile_with_cache(&variant(3), &opts, &cache).unwrap();
        assert_eq!(cache.stats().hits, 3);
        for k in 4..8 {
            pause();
            c.compile_with_cache(&variant(k), &opts, &cache).unwrap();
            assert!(cache.total_bytes().unwrap() <= bound);
        }
        assert_eq!(cache.entries().unwrap().len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    });
}

#[test]
fn client_options_cache_dir_turns_the_cache_on() {
    for_each_plugin_only(|p| {
        let dir = temp_dir(&format!("option-{}", p.version()));
        let options = ClientOptions::new().cache_dir(&dir);
        assert_eq!(options.cache_dir_path(), Some(dir.as_path()));
        let c = Client::new(p, &options).unwrap();
        let cache = c.cache().expect("cache_dir turns the cache on");
        assert_eq!(cache.dir(), dir.as_path());
        assert_eq!(cache.max_bytes(), None);
        let first = c.compile(&mlp(), &CompileOptions::default()).unwrap();
        let again = c.compile(&mlp(), &CompileOptions::default()).unwrap();
        assert_eq!(run_mlp(&first, &c), run_mlp(&again, &c));
        let s = cache.stats();
        assert_eq!((s.hits, s.misses, s.writes), (1, 1, 1), "{s:?}");
        // A second client with the same option shares the directory: a hit.
        let c2 = Client::new(p, &options).unwrap();
        c2.compile(&mlp(), &CompileOptions::default()).unwrap();
        assert_eq!(c2.cache().unwrap().stats().hits, 1);
        assert_eq!(entry_files(&dir).len(), 1);
        // A cache directory that cannot be one is refused before a client is made.
        let file = dir.join("plain-file");
        std::fs::write(&file, b"x").unwrap();
        let e = match Client::new(p, &ClientOptions::new().cache_dir(&file)) {
            Err(e) => e,
            Ok(_) => panic!("a file is not a cache directory"),
        };
        assert!(e.to_string().contains("plain-file"), "{e}");
        for (path, says) in [
            (file.as_path(), "plain-file exists and is not a directory"),
            (
                Path::new("/dev/null"),
                "/dev/null exists and is not a directory",
            ),
            (Path::new(""), "the directory's name is empty"),
        ] {
            let e = Cache::new(path, None).map(|_| ()).unwrap_err();
            assert!(e.to_string().contains(says), "{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    });
}

#[test]
fn stats_listing_and_clearing() {
    for_each_plugin(|p, c| {
        let dir = temp_dir(&format!("stats-{}", p.version()));
        let cache = Cache::new(&dir, None).unwrap();
        let opts = CompileOptions::default();
        c.compile_with_cache(&variant(1), &opts, &cache).unwrap();
        c.compile_with_cache(&variant(2), &opts, &cache).unwrap();
        for _ in 0..3 {
            c.compile_with_cache(&variant(1), &opts, &cache).unwrap();
        }
        let s = cache.stats();
        let total = cache.total_bytes().unwrap();
        assert_eq!(
            (s.hits, s.misses, s.writes, s.corrupt),
            (3, 2, 2, 0),
            "{s:?}"
        );
        assert_eq!(s.bytes_written, total);
        let entries = cache.entries().unwrap();
        assert_eq!(entries.len(), 2);
        let e1 = entries
            .iter()
            .find(|e| e.target.is_some() && e.size > 0)
            .unwrap();
        assert_eq!(
            e1.target.as_ref().unwrap().pjrt_version,
            p.version().to_string()
        );
        assert!(e1.compile_ms.unwrap() > 0.0);
        assert!(e1.error.is_none());
        let v1_size = std::fs::metadata(&e1.path).unwrap().len();
        assert_eq!(
            s.bytes_read,
            3 * if entries[0].key == e1.key {
                v1_size
            } else {
                entries[1].size
            }
        );
        assert_eq!(cache.info(&e1.key[..12]).unwrap().key, e1.key);
        assert!(cache.info("zzzz").is_err());
        // Different options are a different key.
        let two = CompileOptions {
            device_ordinal: 1,
            ..Default::default()
        };
        c.compile_with_cache(&variant(1), &two, &cache).unwrap();
        assert_eq!(cache.stats().misses, 3);
        // Files that are not entries of ours, though named like them (the directory may be
        // any directory a user names), are neither listed nor removed.
        let foreign = dir.join("notes.rpjrtexe");
        let hidden = dir.join(".tmp-mine");
        std::fs::write(&foreign, b"my own notes").unwrap();
        std::fs::write(&hidden, b"mine too").unwrap();
        // Nor is an artifact the user saved there (`rpjrt compile -o my_model.rpjrtexe`):
        // the magic bytes of an entry, but not an entry's name.
        let model = dir.join("my_model.rpjrtexe");
        let saved = c.compile(&variant(3), &opts).unwrap().serialize().unwrap();
        std::fs::write(&model, &saved).unwrap();
        std::fs::write(dir.join(format!("{}.rpjrtexe", "A".repeat(64))), &saved).unwrap();
        assert_eq!(cache.entries().unwrap().len(), 3);
        assert_eq!(cache.clear().unwrap(), 3);
        assert!(cache.entries().unwrap().is_empty());
        assert_eq!(std::fs::read(&foreign).unwrap(), b"my own notes");
        assert_eq!(std::fs::read(&hidden).unwrap(), b"mine too");
        assert_eq!(std::fs::read(&model).unwrap(), saved);
        // Eviction to a bound smaller than the artifact leaves it too.
        let small = Cache::new(&dir, Some(1)).unwrap();
        small.compile(c, &variant(1), &opts).unwrap();
        assert_eq!(std::fs::read(&model).unwrap(), saved);
        assert_eq!(small.entries().unwrap().len(), 0);
        std::fs::remove_file(&model).unwrap();
        cache.reset_stats();
        assert_eq!(cache.stats(), Default::default());
        // A client with a cache uses it for plain compile().
        c.set_cache(Some(cache.clone()));
        c.compile(&variant(9), &opts).unwrap();
        c.compile(&variant(9), &opts).unwrap();
        assert_eq!((cache.stats().hits, cache.stats().misses), (1, 1));
        c.set_cache(None);
        c.compile(&variant(9), &opts).unwrap();
        assert_eq!(cache.stats().hits, 1);
        let _ = std::fs::remove_dir_all(&dir);
    });
}

#[test]
fn hits_record_their_time_and_the_plugins_share_of_it() {
    for_each_plugin(|_, c| {
        let dir = temp_dir(&format!("hit-time-{}", label(c.plugin())));
        let cache = Cache::new(&dir, None).unwrap();
        let first = cache
            .compile(c, &mlp(), &CompileOptions::default())
            .unwrap();
        let s = cache.stats();
        assert_eq!((s.misses, s.hits), (1, 0));
        assert!(s.hit_time.is_zero() && s.hit_plugin_time.is_zero(), "{s:?}");
        let again = cache
            .compile(c, &mlp(), &CompileOptions::default())
            .unwrap();
        let s = cache.stats();
        assert_eq!(s.hits, 1);
        // The plugin's deserialization is part of the hit, and a hit takes some time.
        assert!(!s.hit_plugin_time.is_zero(), "{s:?}");
        assert!(s.hit_plugin_time <= s.hit_time, "{s:?}");
        assert_eq!(run_mlp(&again, c), run_mlp(&first, c));
        let _ = std::fs::remove_dir_all(&dir);
    });
}

#[test]
fn a_cache_hit_serializes_to_an_artifact_that_runs() {
    // The executable of a hit keeps no copy of its program: serializing it reads the entry
    // again (the plugin's own serialization of a loaded executable leaves out its code).
    for_each_plugin(|p, c| {
        let dir = temp_dir(&format!("reserialize-{}", p.version()));
        let cache = Cache::new(&dir, None).unwrap();
        let opts = CompileOptions::default();
        let expected = run_mlp(&c.compile_with_cache(&mlp(), &opts, &cache).unwrap(), c);
        let hit = c.compile_with_cache(&mlp(), &opts, &cache).unwrap();
        assert_eq!(cache.stats().hits, 1);
        let stored = Artifact::decode(&std::fs::read(&entry_files(&dir)[0]).unwrap()).unwrap();
        assert!(hit.serialize_bare().unwrap() == stored.blob);
        let again = c.load(&hit.serialize().unwrap(), None).unwrap();
        assert_eq!(run_mlp(&again, c), expected);
        // With the entry gone, serializing says so instead of writing what cannot run.
        assert_eq!(cache.clear().unwrap(), 1);
        let e = hit.serialize().unwrap_err().to_string();
        assert!(
            e.contains("compile cache entry")
                && e.contains("compile the program again")
                && !e.contains("  "),
            "{e}"
        );
        assert_eq!(run_mlp(&hit, c), expected);
        let _ = std::fs::remove_dir_all(&dir);
    });
}

/// A hit's executable serializes by reading its entry again; an entry replaced since by
/// another program's (copied over it) is refused instead of written out as this one.
#[test]
fn serializing_a_hit_whose_entry_was_replaced_is_refused() {
    for_each_plugin(|p, c| {
        let dir = temp_dir(&format!("replaced-{}", p.version()));
        let cache = Cache::new(&dir, None).unwrap();
        let opts = CompileOptions::default();
        c.compile_with_cache(&variant(1), &opts, &cache).unwrap();
        let one = entry_files(&dir);
        let hit = c.compile_with_cache(&variant(1), &opts, &cache).unwrap();
        assert_eq!(cache.stats().hits, 1);
        c.compile_with_cache(&variant(2), &opts, &cache).unwrap();
        let two: Vec<_> = entry_files(&dir)
            .into_iter()
            .filter(|f| !one.contains(f))
            .collect();
        std::fs::copy(&two[0], &one[0]).unwrap();
        let e = hit.serialize().unwrap_err().to_string();
        assert!(
            e.contains("no longer holds that entry") && e.contains("renamed or copied"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    });
}

/// A symbolic link under an entry's name is not served: the listings, eviction and
/// `clear` see only files, so a hit through a link came from a cache that called itself
/// empty. It is reported, recompiled and replaced by a file.
#[test]
fn a_symlink_under_an_entry_name_is_not_served() {
    for_each_plugin(|p, c| {
        let dir = temp_dir(&format!("symlink-{}", p.version()));
        let cache = Cache::new(&dir, None).unwrap();
        let opts = CompileOptions::default();
        let expected = run_mlp(&c.compile_with_cache(&mlp(), &opts, &cache).unwrap(), c);
        let entry = entry_files(&dir).remove(0);
        let elsewhere = dir.with_extension("saved");
        std::fs::rename(&entry, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &entry).unwrap();
        assert!(cache.entries().unwrap().is_empty());
        let exe = c.compile_with_cache(&mlp(), &opts, &cache).unwrap();
        assert_eq!(run_mlp(&exe, c), expected);
        assert_eq!(cache.stats().hits, 0);
        let w = cache.take_warnings();
        assert!(w.iter().any(|m| m.contains("not a regular file")), "{w:?}");
        assert!(std::fs::symlink_metadata(&entry).unwrap().is_file());
        let _ = std::fs::remove_file(&elsewhere);
        let _ = std::fs::remove_dir_all(&dir);
    });
}

/// An entry is judged by its header before its body is read: a huge file whose header
/// records no key (here 3 GiB, sparse, with a well-formed fixed head: under the 4 GiB read
/// bound, which a larger entry meets first) is refused after a few hundred bytes. Before,
/// a hit read (and hashed) the whole file first.
#[test]
fn a_huge_entry_with_a_foreign_header_is_refused_unread() {
    // Each plugin's build fingerprint reads its whole library once per process: taken
    // first, so that this thread's count covers the entry alone.
    common::for_each_plugin_only(|p| assert_eq!(p.build().len(), 16));
    for_each_plugin(|p, c| {
        let dir = temp_dir(&format!("huge-{}", p.version()));
        let cache = Cache::new(&dir, None).unwrap();
        let opts = CompileOptions::default();
        let expected = run_mlp(&c.compile_with_cache(&mlp(), &opts, &cache).unwrap(), c);
        let entry = entry_files(&dir).remove(0);
        sparse_cache_entry(&entry, 3 << 30);
        let before = thread_bytes_read();
        let exe = c.compile_with_cache(&mlp(), &opts, &cache).unwrap();
        let read = thread_bytes_read() - before;
        assert!(read < 1 << 20, "read {read} bytes of a 3 GiB entry");
        assert_eq!(run_mlp(&exe, c), expected);
        assert_eq!(cache.stats().corrupt, 1);
        let w = cache.take_warnings();
        assert!(w.iter().any(|m| m.contains("unusable")), "{w:?}");
        let _ = std::fs::remove_dir_all(&dir);
    });
}
