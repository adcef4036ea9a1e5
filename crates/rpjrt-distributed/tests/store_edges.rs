//! Edges of the stores found by outside testers: the TCP host kept the socket of every
//! closed connection until the next one arrived, and two threads entering a barrier with
//! one process id took one generation between them (the timeout blamed the wrong process
//! and later rounds stayed out of step).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rpjrt::Code;
use rpjrt_distributed::{InMemoryStore, KvStore, Rendezvous, TcpStore};

/// How many file descriptors this process holds (Linux).
#[cfg(target_os = "linux")]
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[cfg(target_os = "linux")]
#[test]
fn the_tcp_host_closes_ended_connections_without_a_new_accept() {
    let host = TcpStore::host("127.0.0.1:0", "tok").unwrap();
    let addr = host.address();
    let before = open_fds();
    for _ in 0..200 {
        let c = std::net::TcpStream::connect(addr).unwrap();
        drop(c);
    }
    // The host's connection threads see the close (EOF before the hello) and end; their
    // kept clones must go too, with no further connection to trigger it.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = open_fds();
        if now <= before + 5 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the host still holds {now} fds, {before} before 200 closed connections"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The store still works after.
    let peer = TcpStore::connect(&addr.to_string(), "tok", 1, Duration::from_secs(10)).unwrap();
    peer.set("k", b"v").unwrap();
    assert_eq!(host.get("k", Duration::from_secs(5)).unwrap(), b"v");
}

/// Two threads as process 0 and one process 1 at barrier "b" of 2: the second entry for
/// process 0 is refused at once, naming the id, and the other two meet; the next round
/// lines up.
fn a_repeated_process_id_is_refused<S: Rendezvous + Send + Sync + 'static>(s0: Arc<S>, s1: Arc<S>) {
    let t = Duration::from_secs(5);
    let a = {
        let s0 = Arc::clone(&s0);
        std::thread::spawn(move || s0.barrier("b", 0, 2, t))
    };
    // Let the first entry be waiting.
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let e = s0.barrier("b", 0, 2, t).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "{e}");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("barrier \"b\": process id 0 is already waiting at this barrier"),
        "{msg}"
    );
    s1.barrier("b", 1, 2, t).unwrap();
    a.join().unwrap().unwrap();
    // Next round: every process once, in step.
    let a = {
        let s0 = Arc::clone(&s0);
        std::thread::spawn(move || s0.barrier("b", 0, 2, t))
    };
    s1.barrier("b", 1, 2, t).unwrap();
    a.join().unwrap().unwrap();
    // The same id at another barrier name, or after the first ended, is fine.
    let a = {
        let s0 = Arc::clone(&s0);
        std::thread::spawn(move || s0.barrier("c", 0, 2, t))
    };
    s1.barrier("c", 1, 2, t).unwrap();
    a.join().unwrap().unwrap();
}

#[test]
fn a_repeated_process_id_at_a_barrier_is_refused_in_memory() {
    let s = Arc::new(InMemoryStore::new());
    a_repeated_process_id_is_refused(Arc::clone(&s), s);
}

#[test]
fn a_repeated_process_id_at_a_barrier_is_refused_over_tcp() {
    let host = TcpStore::host("127.0.0.1:0", "tok").unwrap();
    let peer = TcpStore::connect(
        &host.address().to_string(),
        "tok",
        1,
        Duration::from_secs(10),
    )
    .unwrap();
    a_repeated_process_id_is_refused(Arc::new(host), Arc::new(peer));
}

/// Many threads each with their own id meet as before (the entry check costs nothing).
#[test]
fn distinct_ids_in_threads_still_meet() {
    let s = Arc::new(InMemoryStore::new());
    let hs: Vec<_> = (0..8)
        .map(|p| {
            let s = Arc::clone(&s);
            std::thread::spawn(move || {
                for _ in 0..5 {
                    s.barrier("m", p, 8, Duration::from_secs(10)).unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
}
