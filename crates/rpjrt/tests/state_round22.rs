//! Round 22 (state): the compile-cache key covers the XLA flags the plugin's compiler ran
//! with (taken when its first client is created, a flags file's contents included, never
//! the environment at compile time); the plugin build fingerprint covers every byte of the
//! library, is computed lazily and remembered per cache directory (a memo that is damaged
//! or describes another file is never trusted); and load overrides that choose devices are
//! not mixed with the devices the artifact recorded.
//!
//! Cross-process tests run this test binary again as a child (`child_main`, which does
//! nothing unless `RPJRT_R22_CHILD` is set).

mod common;

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use rpjrt::{Artifact, ArtifactTarget, Cache, Client, ClientOptions, CompileOptions, Program};
use sha2::{Digest, Sha256};

/// `a - a`: `[NaN, NaN, 0, 0]` for `[NaN, inf, -1, 2]`, but `[0, 0, 0, 0]` under fast math
/// without NaN and infinity handling.
const PROBE: &str = "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.subtract %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}";

/// The fast-math flags, one per line as a flags file holds them.
const FAST: &str = "--xla_cpu_enable_fast_math=true\n--xla_cpu_fast_math_honor_nans=false\n\
                    --xla_cpu_fast_math_honor_infs=false\n";

fn fast_inline() -> String {
    FAST.trim().replace('\n', " ")
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rpjrt-r22-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// The compile-cache key as rpjrt has always made it without XLA flags (key v1), with
/// `extra` parts (length-prefixed) after the target fields.
fn key_v1(program: &[u8], options: &[u8], target: &ArtifactTarget, extra: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    h.update(b"rpjrt compile cache key v1\0");
    let mut part = |b: &[u8]| {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    };
    part(b"mlir");
    part(program);
    part(options);
    for (k, v) in target.fields() {
        part(k.as_bytes());
        part(v.as_bytes());
    }
    extra.iter().for_each(|e| part(e));
    hex(&h.finalize())
}

/// Not a test of its own: the body of the child processes below. Loads the plugin
/// `RPJRT_R22_PLUGIN`, creates a client with the cache `RPJRT_R22_DIR`, then sets (or with
/// `remove`, removes) `XLA_FLAGS` to `RPJRT_R22_AFTER` when that is given, and prints one
/// line starting `R22 `.
#[test]
fn child_main() {
    let Ok(mode) = std::env::var("RPJRT_R22_CHILD") else {
        return;
    };
    let plugin = rpjrt::Plugin::load(std::env::var("RPJRT_R22_PLUGIN").unwrap()).unwrap();
    let dir = std::env::var("RPJRT_R22_DIR").unwrap();
    if let Ok(flags) = std::env::var("RPJRT_R22_FAIL_FIRST") {
        // A first client the plugin refuses (an option name it does not know), then the
        // flags set, then the client that works.
        let refused = ClientOptions::new().set("rpjrt_r23_no_such_option", 1i64);
        assert!(Client::new(&plugin, &refused).is_err());
        std::env::set_var("XLA_FLAGS", flags);
    }
    let client = Client::new(&plugin, &ClientOptions::new().cache_dir(&dir)).unwrap();
    match std::env::var("RPJRT_R22_AFTER").as_deref() {
        Ok("remove") => std::env::remove_var("XLA_FLAGS"),
        Ok(flags) => std::env::set_var("XLA_FLAGS", flags),
        Err(_) => {}
    }
    if mode == "build" {
        let t = ArtifactTarget::of_client(&client).unwrap();
        println!("R22 build={}", t.plugin_build);
        return;
    }
    let program = Program::mlir(PROBE);
    let exe = client
        .compile(&program, &CompileOptions::default())
        .unwrap();
    let d = client.default_device().unwrap();
    let x = client
        .buffer_from_slice(&[f32::NAN, f32::INFINITY, -1.0, 2.0], &[4], &d)
        .unwrap();
    let out = exe.execute(&[&x]).unwrap()[0].to_vec_of::<f32>().unwrap();
    let s = client.cache().unwrap().stats();
    let warned = client
        .cache()
        .unwrap()
        .take_warnings()
        .iter()
        .any(|w| w.contains("XLA_FLAGS"));
    // The key of the entry this compile used, and the key without flags.
    let ids: Vec<i64> = client
        .devices()
        .unwrap()
        .iter()
        .map(|d| i64::from(d.id()))
        .collect();
    let encoded = CompileOptions::default()
        .effective(&program, "cpu")
        .encode(&ids)
        .unwrap();
    let target = ArtifactTarget::of_client(&client).unwrap();
    let key = Cache::key(&program, &encoded, &target, &plugin);
    let plain = key_v1(PROBE.as_bytes(), &encoded, &target, &[]);
    let inline = key_v1(
        PROBE.as_bytes(),
        &encoded,
        &target,
        &[b"XLA_FLAGS", fast_inline().as_bytes()],
    );
    println!(
        "R22 nans={} hits={} misses={} plain_key={} inline_key={} warned={warned} stored={}",
        out.iter().filter(|v| v.is_nan()).count(),
        s.hits,
        s.misses,
        key == plain,
        key == inline,
        Path::new(&dir).join(format!("{key}.rpjrtexe")).is_file()
    );
}

/// Runs `child_main` in a child process with `mode`, the plugin at `plugin`, the cache
/// `dir` and `env`; returns its `R22 ` line.
fn child(plugin: &Path, dir: &Path, mode: &str, env: &[(&str, &str)]) -> String {
    child_fed(plugin, dir, mode, env, None)
}

/// [`child`], with `stdin` (when given) written to the child's standard input, a pipe.
fn child_fed(
    plugin: &Path,
    dir: &Path,
    mode: &str,
    env: &[(&str, &str)],
    stdin: Option<&str>,
) -> String {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["child_main", "--exact", "--nocapture", "--test-threads=1"])
        .env("RPJRT_R22_CHILD", mode)
        .env("RPJRT_R22_PLUGIN", plugin)
        .env("RPJRT_R22_DIR", dir)
        .env_remove("XLA_FLAGS")
        .env_remove("RPJRT_R22_AFTER")
        .env_remove("RPJRT_R22_FAIL_FIRST")
        .env_remove("RPJRT_CACHE_DIR");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = match stdin {
        None => c.output().unwrap(),
        Some(text) => {
            let mut running = c
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            running
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
            running.wait_with_output().unwrap()
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child {mode} {env:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| Some(l.split_once("R22 ")?.1))
        .unwrap_or_else(|| panic!("child {mode} {env:?} printed no result:\n{stdout}"))
        .to_string()
}

/// `XLA_FLAGS` naming a file: the key covers what the file says. Emptying the file used to
/// keep the key (the path's text), and the next process was served the fast-math build.
#[test]
fn a_flags_file_is_keyed_by_its_contents() {
    for which in Which::BOTH {
        let dir = temp_dir(&format!("flagfile-{which:?}"));
        let cache = dir.join("cache");
        let flags = dir.join("xla.flags");
        let flags_env = flags.to_str().unwrap();
        let probe = |contents: &str| {
            std::fs::write(&flags, contents).unwrap();
            child(
                &plugin_path(which),
                &cache,
                "probe",
                &[("XLA_FLAGS", flags_env)],
            )
        };
        let first = probe(FAST);
        assert!(
            first.starts_with("nans=0 hits=0 misses=1 "),
            "{which:?}: {first}"
        );
        let emptied = probe("");
        assert!(
            emptied.starts_with("nans=2 hits=0 misses=1 "),
            "{which:?}: an emptied flags file must not hit the fast-math entry: {emptied}"
        );
        assert!(emptied.ends_with("stored=true"), "{which:?}: {emptied}");
        let again = probe(FAST);
        assert!(
            again.starts_with("nans=0 hits=1 misses=0 "),
            "{which:?}: {again}"
        );
        // The same flags given inline are another key (the value differs), never the file's.
        let inline = child(
            &plugin_path(which),
            &cache,
            "probe",
            &[("XLA_FLAGS", &fast_inline())],
        );
        assert!(
            inline.starts_with("nans=0 hits=0 misses=1 ") && inline.contains("inline_key=true"),
            "{which:?}: {inline}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The flags are those in force when the plugin's first client was created, which XLA
/// read: removing them afterwards (a library restoring the environment) or setting them
/// afterwards changes neither what XLA compiles with nor the key.
#[test]
fn flags_changed_after_the_first_client_do_not_move_the_key() {
    let fast = fast_inline();
    for which in Which::BOTH {
        let cache = temp_dir(&format!("midprocess-{which:?}"));
        let p = plugin_path(which);
        let removed = child(
            &p,
            &cache,
            "probe",
            &[("XLA_FLAGS", &fast), ("RPJRT_R22_AFTER", "remove")],
        );
        assert!(
            removed.starts_with("nans=0 hits=0 misses=1 ")
                && removed.contains("inline_key=true")
                && removed.ends_with("stored=true"),
            "{which:?}: compiled under the flags, keyed under them: {removed}"
        );
        let clean = child(&p, &cache, "probe", &[]);
        assert!(
            clean.starts_with("nans=2 hits=0 misses=1 ") && clean.contains("plain_key=true"),
            "{which:?}: a process without flags must not get the fast-math build: {clean}"
        );
        let set_late = child(&p, &cache, "probe", &[("RPJRT_R22_AFTER", &fast)]);
        assert!(
            set_late.starts_with("nans=2 hits=1 misses=0 ") && set_late.contains("plain_key=true"),
            "{which:?}: flags set after the client are not XLA's, nor the key's: {set_late}"
        );
        let _ = std::fs::remove_dir_all(&cache);
    }
}

/// The file ranges of an ELF64 library's loaded segments end here: bytes after it are
/// never mapped (debug sections, symbol tables), so changing one leaves the library
/// working.
fn end_of_loaded_segments(lib: &[u8]) -> usize {
    let u16_at = |o: usize| u16::from_le_bytes(lib[o..o + 2].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(lib[o..o + 8].try_into().unwrap()) as usize;
    assert_eq!(&lib[..5], b"\x7fELF\x02", "an ELF64 library");
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    (0..phnum)
        .map(|i| phoff + i * phentsize)
        .filter(|&ph| u32::from_le_bytes(lib[ph..ph + 4].try_into().unwrap()) == 1)
        .map(|ph| u64_at(ph + 8) + u64_at(ph + 0x20))
        .max()
        .unwrap()
}

/// The offset of a byte in the middle of the library's unmapped part, at least 64 KiB from
/// both ends (outside what the earlier fingerprint read).
fn unmapped_middle(lib: &[u8]) -> usize {
    let at = (end_of_loaded_segments(lib) + lib.len()) / 2;
    assert!(
        at > 64 << 10 && at + (64 << 10) < lib.len(),
        "the fake plugin library ({} bytes) has room to change a byte far from its ends",
        lib.len()
    );
    at
}

/// The earlier rpjrt's fingerprint of the file at `path`: SHA-256 over its size and its
/// first and last 64 KiB.
fn sampled_fingerprint(path: &Path) -> String {
    let mut f = std::fs::File::open(path).unwrap();
    let len = f.metadata().unwrap().len();
    let mut h = Sha256::new();
    h.update(len.to_le_bytes());
    for start in [0, len.saturating_sub(64 << 10)] {
        let mut part = Vec::new();
        f.seek(SeekFrom::Start(start)).unwrap();
        (&mut f).take(64 << 10).read_to_end(&mut part).unwrap();
        h.update(&part);
    }
    hex(&h.finalize()[..8])
}

/// Flips one byte of the file at `path` in place (same size, same inode).
fn flip_byte(path: &Path, at: usize) {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8];
    f.seek(SeekFrom::Start(at as u64)).unwrap();
    f.read_exact(&mut b).unwrap();
    f.seek(SeekFrom::Start(at as u64)).unwrap();
    f.write_all(&[b[0] ^ 0x20]).unwrap();
    f.sync_all().unwrap();
}

/// Two builds of the same size that differ only in the middle have different
/// fingerprints (they shared one: only the ends were hashed); copies of one build agree.
#[test]
fn the_build_covers_the_whole_library() {
    let dir = temp_dir("whole");
    let lib = std::fs::read(fake_plugin_library()).unwrap();
    let at = unmapped_middle(&lib);
    let mut changed = lib.clone();
    changed[at] ^= 0x20;
    let (a, b, c) = (dir.join("a.so"), dir.join("b.so"), dir.join("c.so"));
    std::fs::write(&a, &lib).unwrap();
    std::fs::write(&b, &changed).unwrap();
    std::fs::write(&c, &lib).unwrap();
    assert_eq!(sampled_fingerprint(&a), sampled_fingerprint(&b));
    let build = |p: &Path| rpjrt::Plugin::load(p).unwrap().build().to_string();
    let (ba, bb, bc) = (build(&a), build(&b), build(&c));
    assert_eq!(ba.len(), 16, "{ba:?}");
    assert!(ba.bytes().all(|x| x.is_ascii_hexdigit()), "{ba:?}");
    assert_ne!(ba, bb, "builds differing in the middle must differ");
    assert_eq!(ba, bc, "copies of one build agree");
    assert_ne!(ba, sampled_fingerprint(&a), "not the earlier fingerprint");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The memo file of the build in `cache` (there must be exactly one) and the identity it
/// is filed under.
fn memo_of(cache: &Path) -> (PathBuf, String) {
    let memos: Vec<PathBuf> = std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with(".rpjrt-build-")
        })
        .collect();
    assert_eq!(memos.len(), 1, "{memos:?}");
    let name = memos[0].file_name().unwrap().to_str().unwrap();
    let id = name.strip_prefix(".rpjrt-build-").unwrap().to_string();
    (memos[0].clone(), id)
}

/// A memo line for `build` with a valid check.
fn memo_line(id: &str, build: &str) -> String {
    let check = hex(&Sha256::digest(format!("{id} {build}"))[..8]);
    format!("{build} {check}\n")
}

/// A later process takes the build from the cache directory's memo instead of hashing the
/// library (a planted memo with a valid check is believed, which shows nothing was
/// hashed); a damaged memo is ignored and rewritten; and a memo of the library before it
/// changed is never used for it.
#[test]
fn the_build_is_remembered_per_cache_directory() {
    let dir = temp_dir("memo");
    let cache = dir.join("cache");
    let lib = dir.join("fake.so");
    let bytes = std::fs::read(fake_plugin_library()).unwrap();
    std::fs::write(&lib, &bytes).unwrap();
    let build = || child(&lib, &cache, "build", &[]);
    let real = build();
    assert_eq!(real.len(), "build=".len() + 16, "{real}");
    let (memo, id) = memo_of(&cache);
    let real_build = real.strip_prefix("build=").unwrap();
    assert_eq!(
        std::fs::read_to_string(&memo).unwrap(),
        memo_line(&id, real_build)
    );
    // Believed: no hash was made.
    std::fs::write(&memo, memo_line(&id, "0123456789abcdef")).unwrap();
    assert_eq!(build(), "build=0123456789abcdef");
    // Damaged in several ways: ignored, the library hashed, the memo rewritten.
    for damaged in [
        "0123456789abcdef 0000000000000000\n".to_string(),
        memo_line(&id, "0123456789abcdef")[..20].to_string(),
        String::new(),
        "\u{0}\u{1}garbage".to_string(),
        memo_line(&id, "0123456789abcde"),
    ] {
        std::fs::write(&memo, &damaged).unwrap();
        assert_eq!(build(), real, "{damaged:?}");
        assert_eq!(
            std::fs::read_to_string(&memo).unwrap(),
            memo_line(&id, real_build),
            "{damaged:?}"
        );
    }
    // A memo that is no regular file is not waited on.
    std::fs::remove_file(&memo).unwrap();
    assert!(Command::new("mkfifo")
        .arg(&memo)
        .status()
        .unwrap()
        .success());
    assert_eq!(build(), real);
    std::fs::remove_file(&memo).unwrap();
    // The library changes in place (same size, same inode): the planted memo of its old
    // identity is not used, and the new build differs.
    std::fs::write(&memo, memo_line(&id, "0123456789abcdef")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    flip_byte(&lib, unmapped_middle(&bytes));
    let changed = build();
    assert_ne!(changed, real);
    assert_ne!(changed, "build=0123456789abcdef");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An artifact written with the earlier fingerprint (size and ends only) is refused as
/// another build's, as before, naming the field.
#[test]
fn an_artifact_with_the_earlier_fingerprint_is_refused_as_another_build() {
    for_each_plugin(|p, c| {
        let old = sampled_fingerprint(p.path());
        assert_ne!(
            old,
            p.build(),
            "the fingerprint covers more than the ends now"
        );
        let exe = compile(c, &mul_add());
        let mut a = Artifact::decode(&exe.serialize().unwrap()).unwrap();
        assert_eq!(a.target.plugin_build, p.build());
        a.target.plugin_build = old;
        let e = expect_err(
            c.load(&a.encode(), None),
            &["plugin_build", "another build"],
        );
        assert!(e.to_string().contains(p.build()), "{e}");
    });
}

/// A client of four CPU devices.
fn four_devices(p: &rpjrt::Plugin) -> Client {
    Client::new(p, &ClientOptions::new().set("cpu_device_count", 4i64)).unwrap()
}

/// Runs `a * b + 1` on eight 2s (5s come out), on `device` when the executable is
/// portable; returns the output's device id.
fn run_mul_add(c: &Client, exe: &rpjrt::Executable, device: i32) -> i32 {
    let d = c.lookup_device(device).unwrap();
    let x = c.buffer_from_slice(&[2.0f32; 8], &[8], &d).unwrap();
    let out = if exe.addressable_devices().unwrap().is_empty() {
        exe.execute_on(&d, &[&x, &x]).unwrap()
    } else {
        exe.execute(&[&x, &x]).unwrap()
    };
    assert_eq!(out[0].to_vec_of::<f32>().unwrap(), vec![5.0; 8]);
    out[0].device().unwrap().id()
}

/// `portable` at load is never combined with the device assignment the artifact recorded
/// (the plugins refused every such load with a message about an assignment the caller
/// never gave); each override that places the program works or is refused in rpjrt's own
/// words.
#[test]
fn load_overrides_that_place_the_program_are_not_mixed_with_the_recorded_devices() {
    for_each_plugin_only(|p| {
        let c = four_devices(p);
        let program = Program::mlir(mul_add());
        let on3 = CompileOptions::default().on_device(3).unwrap();
        let portable = CompileOptions {
            portable: true,
            ..Default::default()
        };
        let artifacts = [
            (
                "device 3",
                c.compile(&program, &on3).unwrap().serialize().unwrap(),
            ),
            (
                "portable",
                c.compile(&program, &portable).unwrap().serialize().unwrap(),
            ),
            (
                "default",
                c.compile(&program, &CompileOptions::default())
                    .unwrap()
                    .serialize()
                    .unwrap(),
            ),
        ];
        for (what, art) in &artifacts {
            // Portable at load: no device of its own, runs where it is told.
            let exe = c
                .load(art, Some(&portable))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(exe.addressable_devices().unwrap().is_empty(), "{what}");
            for d in [1, 2] {
                assert_eq!(run_mul_add(&c, &exe, d), d, "{what}");
            }
            // A device ordinal moves it.
            let to1 = CompileOptions {
                device_ordinal: 1,
                ..Default::default()
            };
            let exe = c.load(art, Some(&to1)).unwrap();
            assert_eq!(run_mul_add(&c, &exe, 1), 1, "{what}");
            // Contradictions are refused before the plugin sees them.
            let both = CompileOptions {
                device_ordinal: 2,
                ..portable.clone()
            };
            expect_err(
                c.load(art, Some(&both)),
                &["portable=true and device_ordinal 2", "contradict"],
            );
            let assigned = CompileOptions {
                device_assignment: Some(vec![vec![2]]),
                ..portable.clone()
            };
            expect_err(
                c.load(art, Some(&assigned)),
                &[
                    "portable=true and the device assignment [[2]]",
                    "contradict",
                ],
            );
            let disagree = CompileOptions {
                device_ordinal: 1,
                device_assignment: Some(vec![vec![2]]),
                ..Default::default()
            };
            expect_err(
                c.load(art, Some(&disagree)),
                &["device_ordinal 1 and the device assignment [[2]]"],
            );
            // Other counts are refused naming the compiled counts, not a recorded
            // assignment's rows.
            for (r, pt) in [(2, 1), (1, 2)] {
                let counts = CompileOptions {
                    num_replicas: r,
                    num_partitions: pt,
                    ..Default::default()
                };
                let e = expect_err(
                    c.load(art, Some(&counts)),
                    &[
                        "compiled for 1 replica(s) x 1 partition(s)",
                        &format!("say {r} x {pt}"),
                    ],
                );
                assert!(
                    !e.to_string().contains("device_assignment has"),
                    "{what}: {e}"
                );
            }
        }
        // Without a placing override the recorded device stays.
        let exe = c
            .load(&artifacts[0].1, Some(&CompileOptions::default()))
            .unwrap();
        assert_eq!(run_mul_add(&c, &exe, 3), 3);
        let exe = c.load(&artifacts[0].1, None).unwrap();
        assert_eq!(run_mul_add(&c, &exe, 3), 3);
    });
}

/// How the entry takes its parameters (`parameter_is_tupled_arguments`) is the compiled
/// program's: a loaded artifact compiled with tupled parameters takes them the same way,
/// with or without overrides, and from the compile cache (a load read it from the
/// overrides alone, so every load of such an artifact, and every cache hit, was refused as
/// taking a tuple).
#[test]
fn a_tupled_artifact_loads_with_and_without_overrides() {
    for_each_plugin_only(|p| {
        let c = four_devices(p);
        let tupled = CompileOptions {
            parameter_is_tupled_arguments: true,
            ..Default::default()
        };
        let exe = c.compile(&Program::mlir(mul_add()), &tupled).unwrap();
        assert_eq!(run_mul_add(&c, &exe, 0), 0);
        // A compile-cache hit is such a load too.
        let dir = temp_dir(&format!("tupled-{}", p.version()));
        let cache = Cache::new(&dir, None).unwrap();
        for _ in 0..2 {
            let hit = c.compile_with_cache(&Program::mlir(mul_add()), &tupled, &cache);
            assert_eq!(run_mul_add(&c, &hit.unwrap(), 0), 0);
        }
        assert_eq!(cache.stats().hits, 1);
        let _ = std::fs::remove_dir_all(&dir);
        let art = exe.serialize().unwrap();
        let portable = CompileOptions {
            portable: true,
            ..Default::default()
        };
        let to2 = CompileOptions {
            device_ordinal: 2,
            ..Default::default()
        };
        let loads = [
            ("no overrides", None, 0),
            ("default overrides", Some(CompileOptions::default()), 0),
            ("portable", Some(portable), 3),
            ("device_ordinal 2", Some(to2), 2),
        ];
        for (what, overrides, device) in loads {
            let exe = c.load(&art, overrides.as_ref()).unwrap();
            assert_eq!(exe.parameters().map(|p| p.len()), Some(2), "{what}");
            assert_eq!(run_mul_add(&c, &exe, device), device, "{what}");
            // And what it serializes to loads the same way again.
            let again = c.load(&exe.serialize().unwrap(), None).unwrap();
            assert_eq!(run_mul_add(&c, &again, device), device, "{what}, again");
        }
    });
}

/// `Cache::info` (what `rpjrt cache info` shows) reads an entry's header before the rest:
/// a huge file whose header records no key is described as unusable after a few hundred
/// bytes, not read whole first (2 GiB of memory for a 2 GiB file before).
#[test]
fn cache_info_reads_the_header_first() {
    // The plugins' build fingerprints read whole libraries once per process: taken first,
    // so that this thread's count covers the entry alone.
    for_each_plugin_only(|p| assert_eq!(p.build().len(), 16));
    let dir = temp_dir("info-head");
    let cache = Cache::new(&dir, None).unwrap();
    let key = "ab".repeat(32);
    let entry = cache.entry_path(&key);
    sparse_cache_entry(&entry, 4 << 30);
    let before = thread_bytes_read();
    let info = cache.info(&key).unwrap();
    let read = thread_bytes_read() - before;
    assert!(read < 1 << 20, "read {read} bytes of a 4 GiB entry");
    assert!(info.error.is_some(), "{info:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Round 23: flags rpjrt cannot read without taking them from the plugin (a pipe, as
/// `XLA_FLAGS=/dev/stdin` or bash's `<(...)` give) turn the cache off in that process, with
/// a warning naming `XLA_FLAGS`. They were keyed by a fixed marker, so a later process
/// without flags was served the fast-math build stored under it.
#[test]
fn flags_from_a_pipe_turn_the_cache_off() {
    for which in Which::BOTH {
        let cache = temp_dir(&format!("pipe-{which:?}"));
        let p = plugin_path(which);
        for _ in 0..2 {
            let piped = child_fed(
                &p,
                &cache,
                "probe",
                &[("XLA_FLAGS", "/dev/stdin")],
                Some(FAST),
            );
            assert!(
                piped.contains("hits=0 misses=1 ") && piped.ends_with("warned=true stored=false"),
                "{which:?}: flags read from a pipe cannot be keyed: {piped}"
            );
        }
        let clean = child(&p, &cache, "probe", &[]);
        assert!(
            clean.starts_with("nans=2 hits=0 misses=1 "),
            "{which:?}: a process without flags must not get the fast-math build: {clean}"
        );
        let _ = std::fs::remove_dir_all(&cache);
    }
}

/// Round 23: a flags file of any size is keyed by its contents (one over 1 MiB was keyed
/// by the same marker as an unreadable one, whatever it said).
#[test]
fn a_large_flags_file_is_keyed_by_its_contents() {
    let dir = temp_dir("bigflags");
    let (cache, flags) = (dir.join("cache"), dir.join("xla.flags"));
    let padding = " ".repeat(3 << 20);
    let probe = |contents: String| {
        std::fs::write(&flags, contents).unwrap();
        child(
            &plugin_path(Which::New),
            &cache,
            "probe",
            &[("XLA_FLAGS", flags.to_str().unwrap())],
        )
    };
    let fast = probe(format!("{FAST}{padding}"));
    assert!(
        fast.starts_with("nans=0 hits=0 misses=1 ") && fast.ends_with("stored=true"),
        "{fast}"
    );
    let plain = probe(format!("{padding}\n{}", " ".repeat(FAST.len() - 1)));
    assert!(
        plain.starts_with("nans=2 hits=0 misses=1 "),
        "another large file must be another key: {plain}"
    );
    let again = probe(format!("{FAST}{padding}"));
    assert!(again.starts_with("nans=0 hits=1 misses=0 "), "{again}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Round 23: the flags are settled by the first client the plugin creates, not by an
/// attempt it refused. Flags set between a refused attempt and the first client are what
/// XLA reads; the cache does not know which, so it stays off in that process (it keyed the
/// build by the refused attempt's flags, and a later process without flags got it).
#[test]
fn flags_changed_after_a_refused_client_turn_the_cache_off() {
    let cache = temp_dir("refused-first");
    let p = plugin_path(Which::New);
    let fast = fast_inline();
    let after = child(&p, &cache, "probe", &[("RPJRT_R22_FAIL_FIRST", &fast)]);
    assert!(
        after.contains("hits=0 misses=1 ") && after.ends_with("warned=true stored=false"),
        "{after}"
    );
    let clean = child(&p, &cache, "probe", &[]);
    assert!(
        clean.starts_with("nans=2 hits=0 misses=1 "),
        "a process without flags must not get the fast-math build: {clean}"
    );
    let _ = std::fs::remove_dir_all(&cache);
}
