//! Round 23 of the outside probe (many processes): a process 0 whose own step failed ends
//! the rendezvous at once, and `Client::new_distributed` refuses create options that
//! contradict the process it was told to be.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rpjrt::{Client, ClientOptions, Code, DistributedOptions, KvStore, Plugin};

mod common;

use common::{fake, free_port};

const RPJRT: &str = env!("CARGO_BIN_EXE_rpjrt");

/// Waits for `child` at most `limit`, killing it after; its output and how long it took.
fn finish(child: std::process::Child, limit: Duration) -> (std::process::Output, Duration) {
    let start = Instant::now();
    let id = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => (out.unwrap(), start.elapsed()),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &id.to_string()]).status();
            panic!("the process did not end within {limit:?}");
        }
    }
}

fn rendezvous(p: usize, port: u16, option: &str) -> std::process::Child {
    Command::new(RPJRT)
        .args([
            "rendezvous",
            "--timeout",
            "30",
            "--process-id",
            &p.to_string(),
            "--num-processes",
            "2",
            "--coordinator",
            &format!("127.0.0.1:{port}"),
            "--plugin",
            fake().to_str().unwrap(),
            "-o",
            option,
        ])
        .env("RPJRT_FAKE_KV", "1")
        .env("RPJRT_TOKEN", "round23")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_host_whose_own_client_failed_ends_the_job_at_once_with_its_error() {
    let port = free_port();
    // Only process 0's option is bad: its client creation is refused at once, while
    // process 1's plugin waits in the store for process 0's key.
    let host = rendezvous(0, port, "fake_addressable_device_count=9");
    std::thread::sleep(Duration::from_millis(300));
    let peer = rendezvous(1, port, "fake_device_count=2");
    let (peer_out, peer_took) = finish(peer, Duration::from_secs(60));
    let (host_out, host_took) = finish(host, Duration::from_secs(60));
    let peer_err = String::from_utf8_lossy(&peer_out.stderr);
    let host_err = String::from_utf8_lossy(&host_out.stderr);
    assert!(!host_out.status.success(), "{host_err}");
    assert!(!peer_out.status.success(), "{peer_err}");
    // Both well within the 30 s timeout that the host used to serve for.
    assert!(
        host_took < Duration::from_secs(15),
        "host took {host_took:?}: {host_err}"
    );
    assert!(
        peer_took < Duration::from_secs(15),
        "peer took {peer_took:?}: {peer_err}"
    );
    // The peer is told process 0's own error.
    assert!(
        peer_err.contains("another process failed") && peer_err.contains("process 0 of 2"),
        "{peer_err}"
    );
    assert!(
        peer_err.contains("fake_addressable_device_count"),
        "{peer_err}"
    );
}

#[test]
fn launch_stops_soon_when_process_0_fails_its_own_step() {
    let fake = fake();
    let script = format!(
        "if [ \"$RPJRT_PROCESS_ID\" = 0 ]; then opt=fake_addressable_device_count=9; \
         else opt=fake_device_count=2; fi; exec {RPJRT} rendezvous --timeout 30 --plugin {} \
         -o $opt",
        fake.display()
    );
    let child = Command::new(RPJRT)
        .args(["launch", "-n", "2", "--", "sh", "-c", &script])
        .env("RPJRT_FAKE_KV", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, took) = finish(child, Duration::from_secs(90));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(took < Duration::from_secs(15), "took {took:?}: {err}");
    assert!(err.contains("fake_addressable_device_count"), "{err}");
}

/// A store for the in-process client tests.
fn store() -> Arc<dyn KvStore> {
    Arc::new(rpjrt_distributed::InMemoryStore::new())
}

fn fake_kv_plugin() -> Plugin {
    // The plugin reads it as it loads (once per process): every load here sets it first.
    std::env::set_var("RPJRT_FAKE_KV", "1");
    Plugin::load(fake()).unwrap()
}

#[test]
fn explicit_process_options_that_contradict_the_process_are_refused() {
    let plugin = fake_kv_plugin();
    let dist = DistributedOptions::new(store(), 1, 2).unwrap();
    for (name, value, arg) in [
        ("process_id", 5i64, "process_id=1"),
        ("node_id", 0, "process_id=1"),
        ("num_nodes", 3, "num_processes=2"),
    ] {
        let mut o = ClientOptions::new().set(name, value);
        // The partner option agrees, so only the contradiction is refused.
        if name == "node_id" {
            o = o.set("num_nodes", 2i64);
        } else if name == "num_nodes" {
            o = o.set("node_id", 1i64);
        }
        let e = Client::new_distributed(&plugin, &o, &dist)
            .err()
            .unwrap_or_else(|| panic!("{name}={value} was accepted"));
        let m = e.to_string();
        assert_eq!(e.code(), Code::InvalidArgument, "{m}");
        assert!(
            m.contains(&format!("{name}={value} contradicts {arg}")),
            "{m}"
        );
    }
}

#[test]
fn a_partial_set_of_process_options_is_refused() {
    let plugin = fake_kv_plugin();
    let dist = DistributedOptions::new(store(), 1, 2).unwrap();
    let o = ClientOptions::new().set("node_id", 1i64);
    let m = Client::new_distributed(&plugin, &o, &dist)
        .expect_err("node_id without num_nodes was accepted")
        .to_string();
    assert!(
        m.contains("num_nodes is not") && m.contains("num_nodes=2"),
        "{m}"
    );
    let o = ClientOptions::new().set("num_nodes", 2i64);
    let m = Client::new_distributed(&plugin, &o, &dist)
        .expect_err("num_nodes without node_id was accepted")
        .to_string();
    assert!(
        m.contains("node_id is not") && m.contains("node_id=1"),
        "{m}"
    );
}

#[test]
fn explicit_process_options_that_agree_are_sent() {
    let plugin = fake_kv_plugin();
    let s = store();
    // Process 0's key, as its plugin would have set it.
    s.set("fake:device:0", b"2").unwrap();
    let dist = DistributedOptions::new(s, 1, 2).unwrap();
    let o = ClientOptions::new()
        .set("node_id", 1i64)
        .set("num_nodes", 2i64)
        .set("fake_device_count", 2i64);
    let c = Client::new_distributed(&plugin, &o, &dist).unwrap();
    assert_eq!(c.process_index().unwrap(), 1);
}

#[test]
fn a_plugin_that_wraps_a_large_process_id_is_refused_naming_its_limit() {
    let Ok(path) = std::env::var("RPJRT_TEST_PLUGIN_NEW") else {
        panic!("RPJRT_TEST_PLUGIN_NEW must name the 0.115 CPU plugin for this test");
    };
    let plugin = Plugin::load(path).unwrap();
    for p in [1usize << 20, 1 << 21, 1 << 31, (1 << 32) - 2] {
        let dist = DistributedOptions::new(store(), p, p + 1).unwrap();
        let m = Client::new_distributed(&plugin, &ClientOptions::new(), &dist)
            .err()
            .unwrap_or_else(|| panic!("process_id {p} was accepted"))
            .to_string();
        assert!(
            m.contains(&format!("process_id {p}")) && m.contains("2^20"),
            "{m}"
        );
    }
    // Below the limit, the process index is the id.
    let p = (1usize << 20) - 1;
    let dist = DistributedOptions::new(store(), p, p + 1).unwrap();
    let c = Client::new_distributed(&plugin, &ClientOptions::new(), &dist).unwrap();
    assert_eq!(c.process_index().unwrap() as usize, p);
}
