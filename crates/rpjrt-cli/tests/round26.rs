//! Round 26 (the CLI and compile-once) of the CLI's regression tests: a huge file named as
//! a program, executable, trace or report is refused before it is read (it aborted the
//! process); a symbolic link at the plugin-build memo of a cache is never written through;
//! the store host says it ran out of file descriptors instead of blaming its peers, and
//! raises its soft limit; a file-size limit (`ulimit -f`) makes writes fail cleanly; a hit
//! records its use; an output that is the cache directory is refused up front; and the
//! small messages (`-o -` into a full stdout, an entry larger than the cache's bound,
//! `run`'s cache warnings, a stray connection to the store).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{finish, free_port, rpjrt, run, tmpdir};

const ADD: &str = "func.func @main(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {\n  \
                   %0 = stablehlo.add %a, %b : tensor<3xf32>\n  return %0 : tensor<3xf32>\n}\n";

/// A sparse file of `len` bytes at `path` (no disk used).
fn sparse(path: &std::path::Path, len: u64) {
    std::fs::File::create(path).unwrap().set_len(len).unwrap();
}

fn new_plugin() -> String {
    common::new().to_str().unwrap().to_string()
}

/// The names of the files in `dir`.
fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

// --- 1: huge files ------------------------------------------------------------------------

#[test]
fn a_huge_file_is_refused_before_it_is_read_by_every_verb() {
    // `memory allocation of 107374182400 bytes failed`, SIGABRT, and the CLI blamed the
    // plugin.
    let dir = tmpdir("r26-huge");
    for name in ["big.mlir", "big.bin", "big.json"] {
        sparse(&dir.join(name), 100 << 30);
    }
    let p = |n: &str| dir.join(n).to_str().unwrap().to_string();
    let plugin = new_plugin();
    let out = p("o.rpjrt");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["compile".into(), p("big.mlir"), "-o".into(), out.clone()],
            "a file",
        ),
        (vec!["run".into(), p("big.mlir")], "a file"),
        (
            vec![
                "run".into(),
                p("big.bin"),
                "--format".into(),
                "executable".into(),
            ],
            "a file",
        ),
        (
            vec!["trace".into(), "view".into(), p("big.json")],
            "a trace",
        ),
        (
            vec![
                "conform".into(),
                "--diff".into(),
                p("big.json"),
                p("big.json"),
            ],
            "a conformance report",
        ),
    ];
    for (args, what) in cases {
        let t = Instant::now();
        let mut c = rpjrt();
        c.args(&args).args(["--plugin", &plugin]);
        if args[0] != "compile" && args[0] != "run" {
            c = rpjrt();
            c.args(&args);
        }
        let (code, stdout, err) = run(&mut c);
        assert_eq!(code, 2, "{args:?}: {stdout}{err}");
        assert!(
            err.contains("107374182400 bytes (100.0 GiB)"),
            "{args:?}: {err}"
        );
        assert!(
            err.contains(&format!("reads whole from {what}")),
            "{args:?}: {err}"
        );
        assert!(err.contains("RPJRT_MAX_FILE_BYTES"), "{args:?}: {err}");
        assert!(
            !err.contains("SIGABRT") && !err.contains("crashed"),
            "{err}"
        );
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{args:?}: {:?}",
            t.elapsed()
        );
    }
    assert!(!dir.join("o.rpjrt").exists());
}

#[test]
fn the_bound_on_files_read_whole_is_set_by_the_environment() {
    let dir = tmpdir("r26-bound-env");
    let program = dir.join("add.mlir");
    std::fs::write(&program, ADD).unwrap();
    let compile = |bound: &str| {
        let mut c = rpjrt();
        c.args(["compile", program.to_str().unwrap(), "-o"])
            .arg(dir.join("a.rpjrt"))
            .args(["--plugin", &new_plugin()])
            .env("RPJRT_MAX_FILE_BYTES", bound)
            .env_remove("RPJRT_CACHE_DIR");
        run(&mut c)
    };
    let (code, out, err) = compile("100");
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains(&format!("{} bytes, larger than the 100 bytes", ADD.len())),
        "{err}"
    );
    let (code, out, err) = compile("lots");
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("RPJRT_MAX_FILE_BYTES=\"lots\" is not a number"),
        "{err}"
    );
    let (code, out, err) = compile("1K");
    assert_eq!(code, 0, "{out}{err}");
    assert!(dir.join("a.rpjrt").exists());
}

// --- 3: the plugin-build memo -------------------------------------------------------------

#[test]
fn a_link_at_the_build_memo_is_replaced_not_written_through() {
    let dir = tmpdir("r26-memo");
    let program = dir.join("add.mlir");
    std::fs::write(&program, ADD).unwrap();
    let cache = dir.join("cache");
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "keep me\n").unwrap();
    let compile = || {
        let mut c = rpjrt();
        c.args(["compile", program.to_str().unwrap(), "-o"])
            .arg(dir.join("a.rpjrt"))
            .args(["--plugin", &new_plugin(), "--cache-dir"])
            .arg(&cache)
            .env_remove("RPJRT_CACHE_DIR")
            .env_remove("RPJRT_CACHE_MAX_BYTES");
        run(&mut c)
    };
    let (code, out, err) = compile();
    assert_eq!(code, 0, "{out}{err}");
    let memo = names(&cache)
        .into_iter()
        .find(|n| n.starts_with(".rpjrt-build-"))
        .map(|n| cache.join(n))
        .expect("a memo");
    for target in ["../victim.txt", "../made.txt"] {
        std::fs::remove_file(&memo).unwrap();
        std::os::unix::fs::symlink(target, &memo).unwrap();
        let (code, out, err) = compile();
        assert_eq!(code, 0, "{out}{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me\n");
        assert!(
            !dir.join("made.txt").exists(),
            "a dangling link made its target"
        );
        let m = std::fs::symlink_metadata(&memo).unwrap();
        assert!(m.is_file(), "the link was replaced by the memo");
    }
}

// --- 4 and 8d: the store host -------------------------------------------------------------

/// `rpjrt rendezvous` as process `p` of `n` on `port` (a 20 s timeout), run by `sh -c` with
/// `limit` (a `ulimit` command) first when given.
fn rendezvous(p: usize, n: usize, port: u16, limit: Option<&str>) -> Child {
    let mut c = match limit {
        Some(l) => {
            let mut c = Command::new("sh");
            c.args(["-c", &format!("{l} && exec \"$0\" \"$@\"")])
                .arg(env!("CARGO_BIN_EXE_rpjrt"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_rpjrt")),
    };
    c.args(["rendezvous", "--timeout", "20"])
        .args(["--process-id", &p.to_string()])
        .args(["--num-processes", &n.to_string()])
        .args(["--coordinator", &format!("127.0.0.1:{port}")])
        .env("RPJRT_TOKEN", "round26")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

#[test]
fn a_store_host_out_of_descriptors_says_so_at_once() {
    // 12 peers need 48 of the host's descriptors: a hard limit of 40 cannot be raised.
    // The host waited its whole timeout and blamed the peers as "did not join".
    let port = free_port();
    let host = rendezvous(0, 13, port, Some("ulimit -n 40"));
    std::thread::sleep(Duration::from_millis(300));
    let peers: Vec<Child> = (1..13).map(|p| rendezvous(p, 13, port, None)).collect();
    let (code, out, err, took) = finish(host, Duration::from_secs(30), "host");
    for c in peers {
        let _ = finish(c, Duration::from_secs(30), "peer");
    }
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        err.contains("could not accept connections") && err.contains("Too many open files"),
        "{err}"
    );
    assert!(err.contains("ulimit -n"), "{err}");
    assert!(!err.contains("did not join"), "{err}");
    assert!(took < Duration::from_secs(15), "it waited {took:?}: {err}");
}

#[test]
fn a_store_host_raises_its_soft_descriptor_limit() {
    // Only the soft limit is low (as a default of 1024 is, beside a hard one far higher):
    // the host raises it and every process joins.
    let port = free_port();
    let host = rendezvous(0, 13, port, Some("ulimit -Sn 40"));
    std::thread::sleep(Duration::from_millis(300));
    let peers: Vec<Child> = (1..13).map(|p| rendezvous(p, 13, port, None)).collect();
    let (code, out, err, _) = finish(host, Duration::from_secs(30), "host");
    assert_eq!(code, 0, "{out}{err}");
    for c in peers {
        let (code, out, err, _) = finish(c, Duration::from_secs(30), "peer");
        assert_eq!(code, 0, "{out}{err}");
    }
}

/// A hello of the store's protocol as process `pid` with an empty token.
fn hello(pid: u32) -> Vec<u8> {
    let mut body = b"\x01RPJRTKV1".to_vec();
    body.extend_from_slice(&pid.to_be_bytes());
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend(body);
    frame
}

#[test]
fn a_stray_connection_is_not_taken_for_a_process() {
    // A connection that said hello as process 1 and hung up made the host fail at once:
    // "process 1 of 2 lost its connection", though process 1 had not started.
    use std::io::{Read as _, Write as _};
    for garbage in [false, true] {
        let port = free_port();
        let mut c = rpjrt();
        c.args(["rendezvous", "--timeout", "15", "--process-id", "0"])
            .args(["--num-processes", "2", "--coordinator"])
            .arg(format!("127.0.0.1:{port}"))
            .env_remove("RPJRT_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let host = c.spawn().unwrap();
        let mut s = None;
        for _ in 0..100 {
            match std::net::TcpStream::connect(("127.0.0.1", port)) {
                Ok(c) => {
                    s = Some(c);
                    break;
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        let mut s = s.expect("the host listens");
        s.write_all(&hello(1)).unwrap();
        let mut reply = [0u8; 5];
        s.read_exact(&mut reply).unwrap();
        assert_eq!(reply, [0, 0, 0, 1, 0], "the hello was taken");
        if garbage {
            s.write_all(&[0, 0, 0, 3, 0xee, 1, 2]).unwrap();
        }
        drop(s);
        std::thread::sleep(Duration::from_millis(700));
        let mut c = rpjrt();
        c.args(["rendezvous", "--timeout", "15", "--process-id", "1"])
            .args(["--num-processes", "2", "--coordinator"])
            .arg(format!("127.0.0.1:{port}"))
            .env_remove("RPJRT_TOKEN");
        let (code, out, err) = run(&mut c);
        assert_eq!(code, 0, "process 1: {out}{err}");
        let (code, out, err, _) = finish(host, Duration::from_secs(30), "host");
        assert_eq!(code, 0, "host (garbage {garbage}): {out}{err}");
        assert!(!err.contains("lost its connection"), "{err}");
    }
}

// --- 5: a file-size limit -----------------------------------------------------------------

/// `rpjrt` run by `sh -c` under `ulimit -f 4` (4 KiB; an artifact of ADD is about 5.5 KB).
fn under_file_limit(args: &[&str]) -> Command {
    let mut c = Command::new("sh");
    c.args(["-c", "ulimit -f 4 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_rpjrt"))
        .args(args)
        .env_remove("RPJRT_CACHE_DIR")
        .env_remove("RPJRT_CACHE_MAX_BYTES")
        .env("NO_COLOR", "1");
    c
}

#[test]
fn a_file_size_limit_fails_the_write_cleanly() {
    // SIGXFSZ ended the CLI mid-write ("ended by signal 25 from outside rpjrt"), leaving
    // its temporary files.
    let dir = tmpdir("r26-fsize");
    let program = dir.join("add.mlir");
    std::fs::write(&program, ADD).unwrap();
    let out = dir.join("a.rpjrt");
    let plugin = new_plugin();
    let (code, stdout, err) = run(&mut under_file_limit(&[
        "compile",
        program.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--plugin",
        &plugin,
    ]));
    assert_eq!(code, 1, "{stdout}{err}");
    assert!(err.contains("File too large"), "{err}");
    assert!(err.contains("a.rpjrt"), "{err}");
    assert!(!err.contains("signal"), "{err}");
    assert_eq!(
        names(&dir),
        vec!["add.mlir".to_string()],
        "nothing left behind"
    );
    // Through a cache: the entry cannot be stored (said), the artifact goes to stdout.
    let cache = dir.join("cache");
    let mut c = under_file_limit(&[
        "compile",
        program.to_str().unwrap(),
        "-o",
        "-",
        "--plugin",
        &plugin,
        "--cache-dir",
        cache.to_str().unwrap(),
    ]);
    let o = c.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(o.stdout.starts_with(b"RPJRT"), "an artifact on stdout");
    assert!(
        err.contains("could not store an entry") && err.contains("File too large"),
        "{err}"
    );
    assert!(
        names(&cache)
            .iter()
            .all(|n| !n.starts_with(".tmp-rpjrtexe-")),
        "{:?}",
        names(&cache)
    );
}

// --- 6: a hit records its use -------------------------------------------------------------

#[test]
fn a_hit_records_its_use_for_the_lru_order() {
    let dir = tmpdir("r26-lru");
    let program = dir.join("add.mlir");
    std::fs::write(&program, ADD).unwrap();
    let cache = dir.join("cache");
    let compile = || {
        let mut c = rpjrt();
        c.args(["compile", program.to_str().unwrap(), "-o", "-", "--plugin"])
            .arg(new_plugin())
            .arg("--cache-dir")
            .arg(&cache)
            .env_remove("RPJRT_CACHE_DIR")
            .env_remove("RPJRT_CACHE_MAX_BYTES")
            .stdout(Stdio::null());
        run(&mut c)
    };
    let (code, _, err) = compile();
    assert_eq!(code, 0, "{err}");
    let entry = names(&cache)
        .into_iter()
        .find(|n| n.ends_with(".rpjrtexe"))
        .map(|n| cache.join(n))
        .unwrap();
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    let set_old = || {
        std::fs::File::options()
            .write(true)
            .open(&entry)
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
    };
    set_old();
    let (code, _, err) = compile();
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("loaded from the compile cache"), "{err}");
    let age = std::fs::metadata(&entry).unwrap().modified().unwrap();
    assert!(
        age.elapsed().unwrap() < Duration::from_secs(600),
        "the hit was not recorded"
    );
    // Another user with write permission on the entry (a group-writable shared cache)
    // records the use too: `set_modified` needed ownership and failed silently.
    let other = std::process::Command::new("id").arg("-u").output().unwrap();
    if String::from_utf8_lossy(&other.stdout).trim() == "0" {
        use std::os::unix::fs::PermissionsExt as _;
        for p in [dir.to_path_buf(), cache.clone(), program.clone()] {
            let mode = if p.is_dir() { 0o777 } else { 0o666 };
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let as_nobody = |mode: u32| {
            std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(mode)).unwrap();
            set_old();
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .arg(env!("CARGO_BIN_EXE_rpjrt"))
                .args(["compile", program.to_str().unwrap(), "-o", "-", "--plugin"])
                .arg(new_plugin())
                .arg("--cache-dir")
                .arg(&cache)
                .env("NO_COLOR", "1")
                .env("HOME", "/tmp")
                .env_remove("RPJRT_CACHE_DIR")
                .env_remove("RPJRT_CACHE_MAX_BYTES")
                .stdout(Stdio::null());
            let (code, _, err) = run(&mut c);
            assert_eq!(code, 0, "{err}");
            assert!(err.contains("loaded from the compile cache"), "{err}");
            let t = std::fs::metadata(&entry).unwrap().modified().unwrap();
            (t.elapsed().unwrap() < Duration::from_secs(600), err)
        };
        let (recorded, err) = as_nobody(0o666);
        assert!(recorded, "a writable entry's use by another user: {err}");
        let (recorded, err) = as_nobody(0o644);
        assert!(!recorded);
        assert!(err.contains("cannot record the use of"), "{err}");
    }
}

// --- 7: an output that is the cache directory ---------------------------------------------

#[test]
fn an_output_that_is_the_cache_directory_is_refused_up_front() {
    let dir = tmpdir("r26-out-cache");
    let program = dir.join("add.mlir");
    std::fs::write(&program, ADD).unwrap();
    let x = dir.join("x");
    let key = format!("{}.rpjrtexe", "ab".repeat(32));
    let compile = |out: &std::path::Path, flag: bool| {
        let mut c = rpjrt();
        c.args(["compile", program.to_str().unwrap(), "-o"])
            .arg(out)
            .args(["--plugin", &new_plugin()])
            .env_remove("RPJRT_CACHE_MAX_BYTES");
        if flag {
            c.arg("--cache-dir").arg(&x).env_remove("RPJRT_CACHE_DIR");
        } else {
            c.env("RPJRT_CACHE_DIR", &x);
        }
        run(&mut c)
    };
    for (out, flag, named) in [
        (x.clone(), true, "--cache-dir"),
        (x.clone(), false, "RPJRT_CACHE_DIR"),
        (x.join(&key), true, "--cache-dir"),
    ] {
        if out != x {
            std::fs::create_dir_all(&x).unwrap();
        }
        let t = Instant::now();
        let (code, stdout, err) = compile(&out, flag);
        assert_eq!(code, 2, "{stdout}{err}");
        assert!(
            err.contains(&format!("--output {}", out.display())),
            "{err}"
        );
        assert!(err.contains(&format!("{named} {}", x.display())), "{err}");
        assert!(out != x || !x.exists(), "nothing was made");
        assert!(!out.exists() || out == x);
        assert!(t.elapsed() < Duration::from_secs(20));
    }
    std::fs::remove_dir_all(&x).unwrap();
    // The cache under the output's path.
    let mut c = rpjrt();
    c.args(["compile", program.to_str().unwrap(), "-o"])
        .arg(&x)
        .args(["--plugin", &new_plugin(), "--cache-dir"])
        .arg(x.join("c"))
        .env_remove("RPJRT_CACHE_DIR");
    let (code, stdout, err) = run(&mut c);
    assert_eq!(code, 2, "{stdout}{err}");
    assert!(err.contains("lies under the output's path"), "{err}");
    assert!(!x.exists());
    // Another file in the cache directory is fine.
    std::fs::create_dir_all(&x).unwrap();
    let (code, stdout, err) = compile(&x.join("a.rpjrt"), true);
    assert_eq!(code, 0, "{stdout}{err}");
    assert!(x.join("a.rpjrt").is_file());
    // `run --out` against RPJRT_CACHE_DIR.
    let mut c = rpjrt();
    c.args(["run", program.to_str().unwrap(), "--out"])
        .arg(dir.join("o.npz"))
        .args(["--plugin", &new_plugin()])
        .env("RPJRT_CACHE_DIR", dir.join("o.npz"));
    let (code, stdout, err) = run(&mut c);
    assert_eq!(code, 2, "{stdout}{err}");
    assert!(err.contains("RPJRT_CACHE_DIR"), "{err}");
}

// --- 8: small messages --------------------------------------------------------------------

#[test]
fn an_artifact_into_a_full_stdout_is_not_said_to_be_written() {
    let dir = tmpdir("r26-full");
    let program = dir.join("add.mlir");
    std::fs::write(&program, ADD).unwrap();
    let full = std::fs::File::options()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let mut c = rpjrt();
    c.args(["compile", program.to_str().unwrap(), "-o", "-", "--plugin"])
        .arg(new_plugin())
        .env_remove("RPJRT_CACHE_DIR")
        .stdout(full);
    let (code, out, err) = run(&mut c);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(!err.contains("wrote the artifact"), "{err}");
}

#[test]
fn an_entry_larger_than_the_bound_is_said_not_to_be_stored() {
    let dir = tmpdir("r26-too-large");
    let program = dir.join("add.mlir");
    std::fs::write(&program, ADD).unwrap();
    let cache = dir.join("cache");
    let mut c = rpjrt();
    c.args(["compile", program.to_str().unwrap(), "-o"])
        .arg(dir.join("a.rpjrt"))
        .args(["--plugin", &new_plugin(), "--cache-dir"])
        .arg(&cache)
        .env("RPJRT_CACHE_MAX_BYTES", "1000")
        .env_remove("RPJRT_CACHE_DIR");
    let (code, out, err) = run(&mut c);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("stored in the compile cache"), "{out}");
    assert!(out.contains("did not store it"), "{out}");
    assert!(
        err.contains("is larger than the cache's bound (1000 bytes"),
        "{err}"
    );
    assert!(names(&cache).iter().all(|n| !n.ends_with(".rpjrtexe")));
}

#[test]
fn run_prints_the_warnings_of_the_cache_it_compiles_through() {
    // A truncated entry was removed and recompiled without a word.
    let dir = tmpdir("r26-run-warn");
    let program = dir.join("add.mlir");
    std::fs::write(&program, ADD).unwrap();
    let cache = dir.join("cache");
    let go = || {
        let mut c = rpjrt();
        c.args(["run", program.to_str().unwrap(), "--plugin", &new_plugin()])
            .args(["-i", "0=[1,2,3]", "-i", "1=[1,1,1]"])
            .env("RPJRT_CACHE_DIR", &cache)
            .env_remove("RPJRT_CACHE_MAX_BYTES");
        run(&mut c)
    };
    let (code, out, err) = go();
    assert_eq!(code, 0, "{out}{err}");
    let entry = names(&cache)
        .into_iter()
        .find(|n| n.ends_with(".rpjrtexe"))
        .map(|n| cache.join(n))
        .expect("run stored an entry");
    let len = std::fs::metadata(&entry).unwrap().len();
    std::fs::File::options()
        .write(true)
        .open(&entry)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let (code, out, err) = go();
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("out0: array([2., 3., 4.]"), "{out}");
    assert!(
        err.contains("warning: compile cache: entry") && err.contains("is unusable"),
        "{err}"
    );
}
