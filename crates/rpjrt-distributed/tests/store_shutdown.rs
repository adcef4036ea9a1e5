//! A store's `shutdown()` ends every call waiting in it, on the host as on a peer, with the
//! same error; a shut-down store refuses every later call, `get` included; and the entry
//! size limit's message adds up.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rpjrt::Code;
use rpjrt_distributed::{KvStore, Rendezvous, TcpStore, MAX_ENTRY_BYTES};

const T: Duration = Duration::from_secs(10);
/// How soon a call cut by a shutdown must end (the waits it is in are of a minute or more).
const PROMPT: Duration = Duration::from_secs(3);

fn host_and_peer() -> (Arc<TcpStore>, Arc<TcpStore>) {
    let host = TcpStore::host("127.0.0.1:0", "tok").unwrap();
    let peer = TcpStore::connect(&host.address().to_string(), "tok", 1, T).unwrap();
    (Arc::new(host), Arc::new(peer))
}

type Waiting = JoinHandle<(String, rpjrt::Result<()>, Instant)>;

/// Starts, in threads of their own, a `get` of a key no one sets (with a minute's and an
/// endless timeout) and a barrier no one else reaches, all on `store` as process `pid`.
fn wait_in_every_call(store: &Arc<TcpStore>, pid: usize) -> Vec<Waiting> {
    let mut calls: Vec<Waiting> = Vec::new();
    for (what, timeout) in [
        ("get 60s", Duration::from_secs(60)),
        ("get forever", Duration::MAX),
    ] {
        let s = Arc::clone(store);
        calls.push(std::thread::spawn(move || {
            let r = s.get(&format!("never-{what}"), timeout).map(drop);
            (what.to_string(), r, Instant::now())
        }));
    }
    let s = Arc::clone(store);
    calls.push(std::thread::spawn(move || {
        let r = s.barrier("nobody-else", pid, 2, Duration::from_secs(60));
        ("barrier".to_string(), r, Instant::now())
    }));
    // Several gets at once on one peer: each holds a connection of its own.
    for i in 0..4 {
        let s = Arc::clone(store);
        calls.push(std::thread::spawn(move || {
            let r = s
                .get(&format!("never-{i}"), Duration::from_secs(60))
                .map(drop);
            (format!("get #{i}"), r, Instant::now())
        }));
    }
    calls
}

/// Checks that every call ended soon after `shut_at` with the shutdown's error.
fn all_ended_by_the_shutdown(who: &str, calls: Vec<Waiting>, shut_at: Instant) {
    for c in calls {
        let (what, r, ended) = c.join().unwrap();
        let e = r.expect_err("a call no one answers cannot succeed");
        let after = ended.saturating_duration_since(shut_at);
        assert!(
            after < PROMPT,
            "{who} {what}: ended {after:?} after the shutdown: {e}"
        );
        assert_eq!(e.code(), Code::FailedPrecondition, "{who} {what}: {e}");
        assert!(
            e.to_string().contains("the key-value store was shut down"),
            "{who} {what}: {e}"
        );
    }
}

#[test]
fn a_peers_shutdown_ends_the_calls_other_threads_wait_in() {
    // The peer's shutdown only closed its idle pooled connections: a get waiting in
    // another thread ran its whole timeout (for ever with an endless one) and then
    // blamed the key, or reported a lost connection when the host went away.
    let (host, peer) = host_and_peer();
    let calls = wait_in_every_call(&peer, 1);
    std::thread::sleep(Duration::from_millis(500));
    let shut_at = Instant::now();
    peer.shutdown();
    assert!(
        shut_at.elapsed() < PROMPT,
        "shutdown took {:?}",
        shut_at.elapsed()
    );
    all_ended_by_the_shutdown("peer", calls, shut_at);
    // The goodbye still reached the host, and the host is unharmed.
    assert_eq!(host.get("rpjrt:goodbye:1", T).unwrap(), b"");
    host.set("after", b"1").unwrap();
    // Later calls are refused the same way, and shutting down again changes nothing.
    peer.shutdown();
    for r in [
        peer.get("after", T).map(drop),
        peer.try_get("after").map(drop),
        peer.set("x", b"1"),
        peer.barrier("b", 1, 2, T),
    ] {
        let e = r.unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "{e}");
        assert!(
            e.to_string().contains("the key-value store was shut down"),
            "{e}"
        );
    }
}

#[test]
fn a_hosts_shutdown_ends_the_calls_other_threads_wait_in() {
    let (host, _peer) = host_and_peer();
    let calls = wait_in_every_call(&host, 0);
    std::thread::sleep(Duration::from_millis(500));
    let shut_at = Instant::now();
    host.shutdown();
    all_ended_by_the_shutdown("host", calls, shut_at);
}

#[test]
fn a_peer_waiting_when_its_own_shutdown_races_its_calls_never_hangs() {
    // Shutdowns landing at every moment of a call (before its connection is taken,
    // while it is sent, while it waits): each call ends promptly, with a value or an
    // error, and the store refuses everything afterwards.
    let host = Arc::new(TcpStore::host("127.0.0.1:0", "t").unwrap());
    host.set("there", b"v").unwrap();
    let addr = host.address().to_string();
    for round in 0..20u64 {
        let peer = Arc::new(TcpStore::connect(&addr, "t", 1, T).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let p = Arc::clone(&peer);
                std::thread::spawn(move || {
                    let started = Instant::now();
                    let r = match i % 2 {
                        0 => p.get("there", T).map(drop),
                        _ => p.get("never", Duration::from_secs(60)).map(drop),
                    };
                    (r, started.elapsed())
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(round % 5));
        peer.shutdown();
        for t in threads {
            let (r, took) = t.join().unwrap();
            assert!(took < PROMPT, "round {round}: a call took {took:?}: {r:?}");
            if let Err(e) = r {
                assert_eq!(e.code(), Code::FailedPrecondition, "round {round}: {e}");
            }
        }
        assert_eq!(
            peer.get("there", T).unwrap_err().code(),
            Code::FailedPrecondition
        );
    }
}

#[test]
fn a_shut_down_host_refuses_get_like_every_other_call() {
    // The host's `get` still answered a key it held after `shutdown()`, while `set` and
    // `barrier` refused; a peer's `get` refused.
    let host = TcpStore::host("127.0.0.1:0", "t").unwrap();
    host.set("late", b"L").unwrap();
    host.shutdown();
    for (op, r) in [
        ("get", host.get("late", Duration::from_secs(1)).map(drop)),
        ("get of nothing", host.get("none", Duration::ZERO).map(drop)),
        ("try_get", host.try_get("late").map(drop)),
        ("set", host.set("x", b"1")),
        ("barrier", host.barrier("b", 0, 1, T)),
    ] {
        let e = r.unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "{op}: {e}");
        assert!(
            e.to_string().contains("the key-value store was shut down"),
            "{op}: {e}"
        );
    }
}

#[test]
fn the_entry_limit_message_adds_key_and_value_up() {
    // "key "big" with a value of 67108858 bytes exceeds the TCP store's limit of
    // 67108859 bytes of key and value": the value shown was below the limit shown.
    let (host, peer) = host_and_peer();
    let value = vec![0u8; MAX_ENTRY_BYTES - 1];
    let total = MAX_ENTRY_BYTES + 2;
    for (who, s) in [("host", &host), ("peer", &peer)] {
        let e = s.set("big", &value).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{who}: {e}");
        let m = e.to_string();
        for part in [
            format!("take {total} bytes"),
            "3 of key".to_string(),
            format!("{} of value", MAX_ENTRY_BYTES - 1),
            format!("limit of {MAX_ENTRY_BYTES} bytes of key and value"),
        ] {
            assert!(m.contains(&part), "{who}: no {part:?} in {m}");
        }
        // Two bytes of key fewer, the entry fits exactly.
        s.set("b", &value).unwrap();
    }
}

#[test]
fn short_timeouts_are_shown_in_milliseconds_not_as_zero() {
    let (host, peer) = host_and_peer();
    for (who, s) in [("host", &host), ("peer", &peer)] {
        let e = s.get("never", Duration::from_millis(1)).unwrap_err();
        assert_eq!(e.code(), Code::DeadlineExceeded, "{who}: {e}");
        assert!(e.to_string().contains("within 1ms"), "{who}: {e}");
        let e = s.get("never", Duration::from_millis(500)).unwrap_err();
        assert!(e.to_string().contains("within 0.5s"), "{who}: {e}");
    }
    let e = host
        .barrier("b", 0, 2, Duration::from_millis(20))
        .unwrap_err();
    assert!(e.to_string().contains("within 20ms"), "{e}");
}

#[test]
fn a_timed_out_barrier_still_counts_its_arrival() {
    // Documented behaviour: the arrival stays, so a peer arriving later passes that
    // generation at once, and a retry by both meets in the next one.
    let (host, peer) = host_and_peer();
    let e = host
        .barrier("sync", 0, 2, Duration::from_millis(200))
        .unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    let t = Instant::now();
    peer.barrier("sync", 1, 2, T).unwrap();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let h = Arc::clone(&host);
    let again = std::thread::spawn(move || h.barrier("sync", 0, 2, T));
    peer.barrier("sync", 1, 2, T).unwrap();
    again.join().unwrap().unwrap();
}
