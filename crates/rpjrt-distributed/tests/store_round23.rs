//! Round 23 of the outside probe: process ids used twice, a host on port 0, a host that
//! stops answering, odd reply codes, and `RPJRT_COORDINATOR` over a launcher's coordinator.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use rpjrt::Code;
use rpjrt_distributed::{KvStore, LaunchEnv, TcpStore, PROTOCOL_MAGIC};

const T: Duration = Duration::from_secs(5);

#[test]
fn a_peer_cannot_connect_as_process_0() {
    let host = TcpStore::host("127.0.0.1:0", "t").unwrap();
    let e = TcpStore::connect(&host.address().to_string(), "t", 0, T).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(
        e.to_string().contains("process 0 is the store's host"),
        "{e}"
    );
    // The host refuses a hello as process 0 too (a client that skips the check).
    let mut s = TcpStream::connect(host.address()).unwrap();
    let mut hello = vec![0x01];
    hello.extend_from_slice(PROTOCOL_MAGIC);
    hello.extend_from_slice(&0u32.to_be_bytes());
    hello.extend_from_slice(b"t");
    s.write_all(&(hello.len() as u32).to_be_bytes()).unwrap();
    s.write_all(&hello).unwrap();
    let reply = read_frame(&mut s);
    assert_eq!(reply[0], 0x03, "not refused");
    let text = String::from_utf8_lossy(&reply[1..]);
    assert!(
        text.contains("process id 0 is used by more than one process"),
        "{text}"
    );
}

fn read_frame(s: &mut TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(T)).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    body
}

/// The child of [`two_live_processes_cannot_share_a_process_id`]: connects as process 1
/// to the store at `ROUND23_CHILD_ADDR`, says so, and holds on until killed.
#[test]
fn child_holding_process_1() {
    let Ok(addr) = std::env::var("ROUND23_CHILD_ADDR") else {
        return; // Run only as the child.
    };
    let _s = TcpStore::connect(&addr, "t", 1, T).unwrap();
    println!("ROUND23 connected");
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn two_live_processes_cannot_share_a_process_id() {
    let host = TcpStore::host("127.0.0.1:0", "t").unwrap();
    let addr = host.address().to_string();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_holding_process_1", "--nocapture"])
        .env("ROUND23_CHILD_ADDR", &addr)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ROUND23 connected") {
        line.clear();
        let n = std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        assert!(n > 0, "the child ended before connecting");
    }
    let start = Instant::now();
    let e = TcpStore::connect(&addr, "t", 1, T).unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "not refused at once"
    );
    assert_eq!(e.code(), Code::AlreadyExists, "{e}");
    assert!(
        e.to_string()
            .contains("process id 1 is used by more than one process"),
        "{e}"
    );
    // Another id is fine; one process may hold two clients of its id; and once the other
    // process has gone, its id is free again.
    let other = TcpStore::connect(&addr, "t", 2, T).unwrap();
    let _second = TcpStore::connect(&addr, "t", 2, T).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + T;
    let again = loop {
        match TcpStore::connect(&addr, "t", 1, T) {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline && e.code() == Code::AlreadyExists => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("{e}"),
        }
    };
    again.set("k", b"v").unwrap();
    assert_eq!(other.get("k", T).unwrap(), b"v");
}

#[test]
fn from_env_names_a_duplicate_id_with_the_job_size() {
    let port = free_port();
    let coordinator = format!("127.0.0.1:{port}");
    let env = |p| LaunchEnv::explicit(p, 3, Some(coordinator.clone()), Some("t".into())).unwrap();
    let (e0, e1) = (env(0), env(1));
    let host = std::thread::spawn(move || TcpStore::from_env(&e0, Duration::from_secs(10)));
    let first = std::thread::spawn(move || TcpStore::from_env(&e1, Duration::from_secs(10)));
    std::thread::sleep(Duration::from_millis(500));
    let e = TcpStore::from_env(&env(1), Duration::from_secs(2)).unwrap_err();
    assert!(
        e.to_string()
            .contains("process id 1 of 3 is used by more than one process"),
        "{e}"
    );
    // Process 2 never comes: the others fail their join naming it.
    assert!(first.join().unwrap().is_err());
    assert!(host.join().unwrap().is_err());
}

/// What [`a_second_host_is_told_another_process_hosts_this_jobs_store`] runs in another
/// process (this test binary, run again): with `RPJRT_TEST_OTHER_HOST` set to a token,
/// hosts a store with it on a free port, prints `ADDR=<address>` (after the test harness's
/// `test ... ` on the same line) and holds it until its
/// stdin closes. Without the variable (a plain test run) it does nothing.
#[test]
fn other_process_host_helper() {
    let Ok(token) = std::env::var("RPJRT_TEST_OTHER_HOST") else {
        return;
    };
    let host = TcpStore::host("127.0.0.1:0", &token).unwrap();
    println!("ADDR={}", host.address());
    std::io::stdout().flush().unwrap();
    let _ = std::io::stdin().read(&mut [0u8; 1]);
}

/// A store of this job hosted by another process (the test binary run again).
fn host_in_another_process(token: &str) -> (std::process::Child, String) {
    use std::io::BufRead as _;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["other_process_host_helper", "--exact", "--nocapture"])
        .args(["--test-threads", "1"])
        .env("RPJRT_TEST_OTHER_HOST", token)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(out).lines();
    let addr = lines
        .by_ref()
        .map_while(|l| l.ok())
        .find_map(|l| l.split_once("ADDR=").map(|(_, a)| a.trim().to_string()))
        .expect("the helper hosts a store");
    // The rest of its output is read (to its end), so that the helper's harness does not
    // write into a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (child, addr)
}

#[test]
fn a_second_host_is_told_another_process_hosts_this_jobs_store() {
    let (mut other, addr) = host_in_another_process("job-a");
    let e = TcpStore::host(&addr, "job-a").err().unwrap().to_string();
    assert!(e.contains("Address already in use"), "{e}");
    assert!(
        e.contains("another process hosts this job's store")
            && e.contains("process id 0 is used by more than one process"),
        "{e}"
    );
    let e = TcpStore::host(&addr, "job-b").err().unwrap().to_string();
    assert!(e.contains("another job"), "{e}");
    drop(other.stdin.take());
    let _ = other.wait();
    // A second store where this same process hosts one (a second `initialize` as process
    // 0) is not "another process": it is said to be this one's, with what to do.
    let host = TcpStore::host("127.0.0.1:0", "job-a").unwrap();
    let addr = host.address().to_string();
    let e = TcpStore::host(&addr, "job-a").err().unwrap().to_string();
    assert!(e.contains("Address already in use"), "{e}");
    assert!(
        e.contains("this process hosts a store there already") && e.contains("shut"),
        "{e}"
    );
    assert!(!e.contains("another process hosts"), "{e}");
    // Shut down, it no longer counts, and the address is free for the next store.
    host.shutdown();
    drop(host);
    let again = TcpStore::host(&addr, "job-a").unwrap();
    drop(again);
    // Something that is not a store.
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = other.local_addr().unwrap().to_string();
    let e = TcpStore::host(&addr, "job-a").err().unwrap().to_string();
    assert!(e.contains("something else listens there"), "{e}");
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn a_host_on_port_0_with_peers_to_come_is_refused_at_once() {
    let env = LaunchEnv::explicit(0, 2, Some("127.0.0.1:0".into()), Some("t".into())).unwrap();
    let start = Instant::now();
    let e = TcpStore::from_env(&env, Duration::from_secs(10)).unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(1), "not at once");
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.to_string().contains("port 0"), "{e}");
    // One process alone may host on any port.
    let env = LaunchEnv::explicit(0, 1, Some("127.0.0.1:0".into()), Some("t".into())).unwrap();
    let s = TcpStore::from_env(&env, T).unwrap();
    assert_ne!(s.address().port(), 0);
}

/// A fake host: answers hellos and claims with OK, and each other request as `answer`
/// says (`None`: never).
fn fake_host(answer: Option<Vec<u8>>) -> (String, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    // Set: hellos get no answer any more (the host is "paused").
    let paused = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let p = paused.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let answer = answer.clone();
            let paused = p.load(std::sync::atomic::Ordering::SeqCst);
            std::thread::spawn(move || loop {
                let mut len = [0u8; 4];
                if s.read_exact(&mut len).is_err() {
                    return;
                }
                let mut req = vec![0u8; u32::from_be_bytes(len) as usize];
                if s.read_exact(&mut req).is_err() {
                    return;
                }
                let reply: Vec<u8> = match req[0] {
                    0x01 | 0x07 if !paused => vec![0x00],
                    0x01 | 0x07 => continue,
                    _ => match &answer {
                        Some(a) => a.clone(),
                        None => continue,
                    },
                };
                let _ = s.write_all(&(reply.len() as u32).to_be_bytes());
                let _ = s.write_all(&reply);
            });
        }
    });
    (addr, paused)
}

#[test]
fn a_host_that_stopped_answering_is_named_so_on_every_later_call() {
    let (addr, paused) = fake_host(None);
    let peer = TcpStore::connect(&addr, "t", 1, Duration::from_secs(1)).unwrap();
    paused.store(true, std::sync::atomic::Ordering::SeqCst);
    for round in 0..3 {
        let e = peer.try_get("k").unwrap_err();
        let m = e.to_string();
        assert_eq!(e.code(), Code::DeadlineExceeded, "call {round}: {m}");
        assert!(
            m.contains("did not answer within")
                && m.contains("(it may be paused, overloaded or unreachable)"),
            "call {round}: {m}"
        );
        assert!(!m.contains("is an rpjrt key-value store listening"), "{m}");
    }
    let e = peer.set("k", b"v").unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    assert!(e.to_string().contains("may be paused"), "{e}");
}

#[test]
fn an_unexpected_reply_code_is_named() {
    // A `timeout` reply to a try_get, with no text.
    let (addr, _) = fake_host(Some(vec![0x02]));
    let peer = TcpStore::connect(&addr, "t", 1, T).unwrap();
    let m = peer.try_get("k").unwrap_err().to_string();
    assert!(
        m.contains("reply code 0x02 (timeout)") && m.contains("no text"),
        "{m}"
    );
    let m = peer.set("k", b"v").unwrap_err().to_string();
    assert!(m.contains("reply code 0x02 (timeout)"), "{m}");
    // A `closing` reply with text.
    let (addr, _) = fake_host(Some(b"\x05bye".to_vec()));
    let peer = TcpStore::connect(&addr, "t", 1, T).unwrap();
    let m = peer.try_get("k").unwrap_err().to_string();
    assert!(
        m.contains("reply code 0x05 (closing)") && m.contains("\"bye\""),
        "{m}"
    );
}

fn detect(vars: &[(&str, &str)]) -> rpjrt::Result<LaunchEnv> {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    LaunchEnv::detect_from(move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
}

#[test]
fn rpjrt_coordinator_overrides_a_launcher_coordinator_rpjrt_cannot_use() {
    let torch = [
        ("RANK", "0"),
        ("WORLD_SIZE", "2"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "65535"),
        ("TORCHELASTIC_RUN_ID", "r"),
    ];
    let e = detect(&torch).unwrap_err().to_string();
    assert!(
        e.contains("MASTER_PORT+1") && e.contains("set RPJRT_COORDINATOR"),
        "{e}"
    );
    let mut with = torch.to_vec();
    with.push(("RPJRT_COORDINATOR", "127.0.0.1:40000"));
    let env = detect(&with).unwrap();
    assert_eq!(env.coordinator.as_deref(), Some("127.0.0.1:40000"));
    let slurm = [
        ("SLURM_PROCID", "0"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_JOB_ID", "7"),
        ("SLURM_JOB_NODELIST", "node[01-"),
    ];
    assert!(detect(&slurm).is_err());
    let mut with = slurm.to_vec();
    with.push(("RPJRT_COORDINATOR", "10.0.0.1:40000"));
    let env = detect(&with).unwrap();
    assert_eq!(env.coordinator.as_deref(), Some("10.0.0.1:40000"));
}
