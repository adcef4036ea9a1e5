//! Round 21 of outside testing, the many-process side: a wait given up on (Python's Ctrl-C,
//! here a [`Cancel`]) ends and lets go of what it held, on every store; a barrier keeps
//! the store's size bounded however often it is met; a peer's `get` answers its timeout
//! when the host does not answer; a live peer whose connection was dropped is not taken for
//! gone; every store can delete a key; and a process that left a store is told so.

use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rpjrt::Code;
use rpjrt_distributed::{Cancel, InMemoryStore, KvStore, LaunchEnv, Rendezvous, TcpStore};

const T: Duration = Duration::from_secs(10);
/// How soon a cancelled call must end (its own wait is endless).
const PROMPT: Duration = Duration::from_secs(2);

fn host_and_peer() -> (Arc<TcpStore>, Arc<TcpStore>) {
    let host = TcpStore::host("127.0.0.1:0", "tok").unwrap();
    let peer = TcpStore::connect(&host.address().to_string(), "tok", 1, T).unwrap();
    (Arc::new(host), Arc::new(peer))
}

/// A store under test: its name, the handle process 0 uses, the one process 1 uses.
type Case = (&'static str, Arc<dyn Rendezvous>, Arc<dyn Rendezvous>);

/// Every kind of store, each new, as (name, the store process 0 uses, the store process 1
/// uses).
fn every_store() -> Vec<Case> {
    let mem = Arc::new(InMemoryStore::new());
    let (host, peer) = host_and_peer();
    let (host2, peer2) = host_and_peer();
    vec![
        ("in-memory", mem.clone(), mem),
        ("tcp host and peer", host, peer),
        ("tcp peer and host", peer2, host2),
    ]
}

/// Runs `call` inside a new token on a thread; returns the token and the thread.
fn cancellable<T: Send + 'static>(
    call: impl FnOnce() -> T + Send + 'static,
) -> (Cancel, JoinHandle<(T, Instant)>) {
    let cancel = Cancel::new();
    let token = cancel.clone();
    let t = std::thread::spawn(move || {
        let r = token.run(call);
        (r, Instant::now())
    });
    (cancel, t)
}

/// Cancels after `after`, and returns the call's result and how long after the cancel it
/// ended.
fn cancel_after<T>(cancel: Cancel, t: JoinHandle<(T, Instant)>, after: Duration) -> (T, Duration) {
    std::thread::sleep(after);
    let at = Instant::now();
    cancel.cancel();
    let (r, ended) = t.join().unwrap();
    (r, ended.saturating_duration_since(at))
}

#[test]
fn a_cancelled_get_ends_at_once_on_every_store() {
    for (name, store, _) in every_store() {
        let s = Arc::clone(&store);
        let (cancel, t) = cancellable(move || s.get("never", Duration::MAX).map(drop));
        let (r, took) = cancel_after(cancel, t, Duration::from_millis(200));
        let e = r.unwrap_err();
        assert_eq!(e.code(), Code::Cancelled, "{name}: {e}");
        assert!(took < PROMPT, "{name}: ended {took:?} after the cancel");
        // The store works on, and a later call is not cancelled.
        store.set("after", b"1").unwrap();
        assert_eq!(store.get("after", T).unwrap(), b"1", "{name}");
    }
}

#[test]
fn a_cancelled_barrier_gives_its_place_back_and_a_retry_meets_the_others() {
    // The given-up barrier went on in the background: its retry was refused ("another
    // thread ... is already waiting") and its generation was used up, so the retry waited
    // in the next generation for a peer that had already passed the first.
    for (name, s0, s1) in every_store() {
        let s = Arc::clone(&s0);
        let (cancel, t) = cancellable(move || s.barrier("ready", 0, 2, Duration::MAX));
        let (r, took) = cancel_after(cancel, t, Duration::from_millis(300));
        assert_eq!(r.unwrap_err().code(), Code::Cancelled, "{name}");
        assert!(took < PROMPT, "{name}: ended {took:?} after the cancel");
        // The arrival was taken back and the use given back.
        assert_eq!(
            s0.try_get("rpjrt:barrier:ready:0:0").unwrap(),
            None,
            "{name}"
        );
        assert_eq!(
            s0.try_get("rpjrt:barrier-uses:ready:0").unwrap(),
            None,
            "{name}"
        );
        // The retry meets process 1, which arrives later; the next round lines up too.
        for round in 0..2 {
            let s = Arc::clone(&s0);
            let retry = std::thread::spawn(move || s.barrier("ready", 0, 2, T));
            std::thread::sleep(Duration::from_millis(200));
            s1.barrier("ready", 1, 2, T)
                .unwrap_or_else(|e| panic!("{name} round {round}: {e}"));
            retry
                .join()
                .unwrap()
                .unwrap_or_else(|e| panic!("{name} round {round}: {e}"));
        }
    }
}

#[test]
fn a_barrier_cancelled_before_it_starts_touches_nothing() {
    let s = InMemoryStore::new();
    let c = Cancel::new();
    c.cancel();
    let e = c.run(|| s.barrier("b", 0, 2, T)).unwrap_err();
    assert_eq!(e.code(), Code::Cancelled, "{e}");
    assert!(s.is_empty());
}

/// A free port on 127.0.0.1, as an address.
fn free_addr() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

fn env(p: usize, n: usize, addr: &str) -> LaunchEnv {
    LaunchEnv::explicit(p, n, Some(addr.to_string()), Some("j".into())).unwrap()
}

#[test]
fn a_cancelled_join_stops_the_host_it_started_and_frees_its_port() {
    // The given-up join went on hosting: a retry on the same address failed with "Address
    // already in use", and a peer starting then joined the abandoned host.
    let addr = free_addr();
    let a = addr.clone();
    let (cancel, t) =
        cancellable(move || TcpStore::from_env(&env(0, 2, &a), Duration::from_secs(60)));
    let (r, took) = cancel_after(cancel, t, Duration::from_millis(300));
    assert_eq!(r.err().map(|e| e.code()), Some(Code::Cancelled));
    assert!(took < PROMPT, "ended {took:?} after the cancel");
    assert!(TcpStream::connect(&addr).is_err(), "still listening");
    // A retry hosts on the same address, and a peer joins it.
    let a = addr.clone();
    let host = std::thread::spawn(move || TcpStore::from_env(&env(0, 2, &a), T));
    let peer = TcpStore::from_env(&env(1, 2, &addr), T).unwrap();
    let host = host.join().unwrap().unwrap();
    drop(peer);
    assert!(host.shutdown_after(T));
}

#[test]
fn a_cancelled_connect_or_join_of_a_peer_ends_at_once() {
    let addr = free_addr(); // nothing listens: the connect retries
    for join in [false, true] {
        let a = addr.clone();
        let (cancel, t) = cancellable(move || {
            let long = Duration::from_secs(60);
            if join {
                TcpStore::from_env(&env(1, 2, &a), long).map(drop)
            } else {
                TcpStore::connect(&a, "j", 1, long).map(drop)
            }
        });
        let (r, took) = cancel_after(cancel, t, Duration::from_millis(300));
        assert_eq!(r.unwrap_err().code(), Code::Cancelled, "join {join}");
        assert!(
            took < PROMPT,
            "join {join}: ended {took:?} after the cancel"
        );
    }
}

/// A "host" that takes every hello and then answers no request (as one paused with
/// `SIGSTOP`); returns its address.
fn silent_host() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut held = Vec::new();
        while let Ok((mut s, _)) = listener.accept() {
            let mut head = [0u8; 4];
            if s.read_exact(&mut head).is_err() {
                continue;
            }
            let mut hello = vec![0u8; u32::from_be_bytes(head) as usize];
            let _ = s.read_exact(&mut hello);
            let _ = s.write_all(&[0, 0, 0, 1, 0]);
            held.push(s);
        }
    });
    addr
}

#[test]
fn a_peers_get_answers_its_timeout_when_the_host_does_not_answer() {
    // With a 30 s connect timeout, `get(k, 0.3 s)` on a paused host waited 30.3 s.
    let addr = silent_host();
    let peer = Arc::new(TcpStore::connect(&addr, "t", 1, Duration::from_secs(30)).unwrap());
    let start = Instant::now();
    let e = peer.get("k", Duration::from_millis(300)).unwrap_err();
    let took = start.elapsed();
    assert!(took < Duration::from_secs(3), "{took:?}: {e}");
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    assert!(e.to_string().contains("did not answer within"), "{e}");
    // And every call on it (set, try_get, delete), bounded only by the I/O timeout,
    // ends at once when cancelled.
    for op in ["set", "try_get", "delete"] {
        let p = Arc::clone(&peer);
        let (cancel, t) = cancellable(move || match op {
            "set" => p.set("k", b"v"),
            "try_get" => p.try_get("k").map(drop),
            _ => p.delete("k").map(drop),
        });
        let (r, took) = cancel_after(cancel, t, Duration::from_millis(200));
        assert_eq!(r.unwrap_err().code(), Code::Cancelled, "{op}");
        assert!(took < PROMPT, "{op}: ended {took:?} after the cancel");
    }
}

#[test]
fn a_live_peer_whose_connection_was_dropped_is_not_taken_for_gone() {
    // A peer's call that ends without its answer (a timeout, a cancel) drops its
    // connection. When that was its only one, the host counted the live process as gone,
    // and a barrier failed for the others: "process 1 of 2 lost its connection to the
    // store (it exited or crashed)".
    let (host, peer) = host_and_peer();
    let p = Arc::clone(&peer);
    let (cancel, t) = cancellable(move || p.get("never", Duration::MAX).map(drop));
    let (r, _) = cancel_after(cancel, t, Duration::from_millis(200));
    assert_eq!(r.unwrap_err().code(), Code::Cancelled);
    // The host has seen the dropped connection close by now.
    std::thread::sleep(Duration::from_millis(300));
    let p = Arc::clone(&peer);
    let late = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        p.barrier("ready", 1, 2, T)
    });
    host.barrier("ready", 0, 2, T).unwrap();
    late.join().unwrap().unwrap();
}

#[test]
fn every_store_deletes_a_key() {
    for (name, s0, s1) in every_store() {
        s0.set("k", b"v").unwrap();
        assert!(s1.delete("k").unwrap(), "{name}");
        assert_eq!(s0.try_get("k").unwrap(), None, "{name}");
        assert!(!s1.delete("k").unwrap(), "{name}");
        assert!(!s0.delete("never set").unwrap(), "{name}");
        // A get waits for a deleted key again.
        let e = s0.get("k", Duration::from_millis(50)).unwrap_err();
        assert_eq!(e.code(), Code::DeadlineExceeded, "{name}: {e}");
    }
    // The TCP store's key limit and shutdown hold for delete as for every call.
    let (host, peer) = host_and_peer();
    let long = "k".repeat(rpjrt_distributed::MAX_KEY_BYTES + 1);
    for s in [&host, &peer] {
        assert_eq!(s.delete(&long).unwrap_err().code(), Code::InvalidArgument);
    }
    peer.shutdown();
    host.shutdown();
    for s in [&host, &peer] {
        let e = s.delete("k").unwrap_err();
        assert!(e.to_string().contains("shut down"), "{e}");
    }
}

#[test]
fn a_barrier_met_at_every_step_keeps_the_store_bounded() {
    // Every use left one key per process for ever: a job meeting at every step grew the
    // host's memory without bound.
    let s = Arc::new(InMemoryStore::new());
    let ts: Vec<_> = (0..4)
        .map(|p| {
            let s = Arc::clone(&s);
            std::thread::spawn(move || {
                for _ in 0..200 {
                    s.barrier("step", p, 4, T).unwrap();
                }
            })
        })
        .collect();
    for t in ts {
        t.join().unwrap();
    }
    // Per process: the count of uses and the latest arrival.
    assert_eq!(s.len(), 8);
    assert_eq!(
        s.try_get("rpjrt:barrier:step:199:3").unwrap().as_deref(),
        Some(&b"4"[..])
    );
    assert_eq!(s.try_get("rpjrt:barrier:step:198:3").unwrap(), None);

    let (host, peer) = host_and_peer();
    let p = Arc::clone(&peer);
    let t = std::thread::spawn(move || {
        for _ in 0..100 {
            p.barrier("step", 1, 2, T).unwrap();
        }
    });
    for _ in 0..100 {
        host.barrier("step", 0, 2, T).unwrap();
    }
    t.join().unwrap();
    for g in [0, 50, 98] {
        for p in 0..2 {
            let k = format!("rpjrt:barrier:step:{g}:{p}");
            assert_eq!(host.try_get(&k).unwrap(), None, "{k}");
        }
    }
    assert!(host.try_get("rpjrt:barrier:step:99:1").unwrap().is_some());
}

#[test]
fn arrivals_kept_by_timed_out_uses_go_once_a_use_passes() {
    // Process 0 times out three times (its arrivals stand, as documented), then both meet
    // twice: every arrival of the first four generations is gone.
    let s = Arc::new(InMemoryStore::new());
    for _ in 0..3 {
        let e = s.barrier("b", 0, 2, Duration::from_millis(30)).unwrap_err();
        assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    }
    // Process 1 passes the three generations at once, then both meet in the fourth and
    // fifth.
    for _ in 0..3 {
        s.barrier("b", 1, 2, T).unwrap();
    }
    for _ in 0..2 {
        let s1 = Arc::clone(&s);
        let t = std::thread::spawn(move || s1.barrier("b", 1, 2, T));
        s.barrier("b", 0, 2, T).unwrap();
        t.join().unwrap().unwrap();
    }
    for g in 0..4 {
        for p in 0..2 {
            let k = format!("rpjrt:barrier:b:{g}:{p}");
            assert_eq!(s.try_get(&k).unwrap(), None, "{k}");
        }
    }
    assert_eq!(s.len(), 4);
}

#[test]
fn a_process_that_left_a_store_still_up_is_told_so_not_that_it_restarted() {
    let addr = free_addr();
    let a = addr.clone();
    let host = std::thread::spawn(move || TcpStore::from_env(&env(0, 2, &a), T));
    let peer = TcpStore::from_env(&env(1, 2, &addr), T).unwrap();
    let host = host.join().unwrap().unwrap();
    peer.shutdown();
    // Joining again while that store stays up: retried for the timeout, then refused,
    // saying what happened.
    let start = Instant::now();
    let e = TcpStore::from_env(&env(1, 2, &addr), Duration::from_millis(800)).unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(e.code(), Code::FailedPrecondition, "{e}");
    let m = e.to_string();
    assert!(
        m.contains("already joined the job's store") && m.contains("left it"),
        "{m}"
    );
    assert!(!m.contains("exited or was killed"), "{m}");
    assert!(host.shutdown_after(T));
}

#[test]
fn a_job_that_joins_again_reaches_the_next_store_not_the_one_shutting_down() {
    // Each process: join, leave, join again. Process 1 joined again while process 0's
    // store waited in its shutdown for process 2: it reached that store and was refused
    // as a process that "exited or was killed".
    let addr = free_addr();
    let join = |p: usize| {
        let a = addr.clone();
        std::thread::spawn(move || TcpStore::from_env(&env(p, 3, &a), Duration::from_secs(20)))
    };
    let (h, p1, p2) = (join(0), join(1), join(2));
    let (h, p1, p2) = (
        h.join().unwrap().unwrap(),
        p1.join().unwrap().unwrap(),
        p2.join().unwrap().unwrap(),
    );
    p1.shutdown();
    let closing = std::thread::spawn(move || h.shutdown_after(Duration::from_secs(20)));
    std::thread::sleep(Duration::from_millis(300));
    // Process 1 joins again while the host waits for process 2.
    let again1 = join(1);
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        !again1.is_finished(),
        "process 1 did not wait for the next store"
    );
    p2.shutdown();
    assert!(
        closing.join().unwrap(),
        "the first store did not end cleanly"
    );
    let (h, p2) = (join(0), join(2));
    let h = h.join().unwrap().unwrap();
    let p1 = again1.join().unwrap().unwrap();
    let p2 = p2.join().unwrap().unwrap();
    drop((p1, p2));
    assert!(h.shutdown_after(T));
}
