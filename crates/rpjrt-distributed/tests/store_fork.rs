//! A TCP store used in a process forked after it was made: every call is refused there,
//! naming the fork, and its shutdown and drop do nothing harmful (no join of threads that
//! do not exist in the child, no goodbye on the parent's connection), so the parent's
//! stores go on working.

use std::time::Duration;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use rpjrt::{Code, Result};
use rpjrt_distributed::{InMemoryStore, KvStore, Rendezvous, TcpStore};

const T: Duration = Duration::from_secs(10);

extern "C" {
    // POSIX, in libc (which every Rust program on Linux links).
    fn fork() -> i32;
    fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
    fn kill(pid: i32, sig: i32) -> i32;
    fn _exit(status: i32) -> !;
}

/// `waitpid`'s option not to wait.
const WNOHANG: i32 = 1;
/// `SIGKILL`.
const SIGKILL: i32 = 9;

/// Whether `r` is the refusal of a store used in a forked child.
fn refused_as_forked<T>(r: Result<T>) -> bool {
    match r {
        Ok(_) => false,
        Err(e) => {
            let m = e.to_string();
            e.code() == Code::FailedPrecondition
                && m.contains("is a fork of it")
                && m.contains(&format!("pid {}", std::process::id()))
        }
    }
}

/// What the child checks on each of its parent's stores: how many checks failed.
fn child_checks(stores: [&TcpStore; 2]) -> i32 {
    let mut bad = 0;
    for s in stores {
        bad += i32::from(!refused_as_forked(s.get("k", T)));
        bad += i32::from(!refused_as_forked(s.set("c", b"child")));
        bad += i32::from(!refused_as_forked(s.try_get("k")));
        bad += i32::from(!refused_as_forked(s.barrier("b", 1, 2, T)));
        bad += i32::from(s.shutdown_after(T));
        s.shutdown();
    }
    bad
}

#[test]
fn a_forked_child_is_refused_its_parents_stores_and_their_drop_leaves_the_parent_working() {
    let host = TcpStore::host("127.0.0.1:0", "t").unwrap();
    let peer = TcpStore::connect(&host.address().to_string(), "t", 1, T).unwrap();
    host.set("k", b"v").unwrap();
    assert_eq!(peer.get("k", T).unwrap(), b"v");
    // SAFETY: plain fork(); the child only uses the stores (taking no lock another thread
    // of this test binary may hold at the fork: it neither prints nor panics) and ends
    // with `_exit`.
    let pid = unsafe { fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let bad = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let bad = child_checks([&host, &peer]);
            // Dropping the parent's stores here neither joins the host's threads (which
            // the child does not have: std's join would panic) nor says goodbye.
            drop(peer);
            drop(host);
            bad
        }));
        // SAFETY: ends the child at once, running nothing of the parent's.
        unsafe { _exit(bad.unwrap_or(100)) }
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above; `status` is a valid int.
    assert_eq!(unsafe { waitpid(pid, &mut status, 0) }, pid);
    // Exit code 100: a panic in the child; 1 to 10: that many checks failed.
    assert_eq!(
        status,
        0,
        "child status {status:#x} (exit code {})",
        status >> 8
    );
    // The parent's stores work on: no goodbye was said on the peer's connection, and the
    // host's map has nothing of the child's.
    host.check_not_forked().unwrap();
    peer.check_not_forked().unwrap();
    assert_eq!(peer.get("k", T).unwrap(), b"v");
    peer.set("p", b"parent").unwrap();
    assert_eq!(host.get("p", T).unwrap(), b"parent");
    assert_eq!(host.try_get("c").unwrap(), None);
    assert_eq!(host.try_get("rpjrt:goodbye:1").unwrap(), None);
    // A barrier between the two (the host's check that process 1 is connected included).
    std::thread::scope(|s| {
        let t = s.spawn(|| peer.barrier("after", 1, 2, T));
        host.barrier("after", 0, 2, T).unwrap();
        t.join().unwrap().unwrap();
    });
    peer.shutdown();
    assert!(host.shutdown_after(T));
}

#[test]
fn an_in_memory_store_is_refused_in_a_fork_even_while_another_thread_writes_to_it() {
    // A thread setting a large value held the store's lock while it copied the value; a
    // fork then left the child a lock no thread of its would release, and the child's
    // first call on the store never returned.
    let store = Arc::new(InMemoryStore::new());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (s, stop) = (Arc::clone(&store), Arc::clone(&stop));
        std::thread::spawn(move || {
            let big = vec![7u8; 64 << 20];
            while !stop.load(Ordering::Relaxed) {
                s.set("big", &big).unwrap();
            }
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..3 {
        // SAFETY: plain fork(); the child only calls the store (whose refusal takes no
        // lock of the store's: it reads the fork generation and formats a message) and
        // ends with `_exit`.
        let pid = unsafe { fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let bad = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let s = &*store;
                let mut bad = 0;
                bad += i32::from(!refused_as_forked(s.try_get("small")));
                bad += i32::from(!refused_as_forked(s.get("small", T)));
                bad += i32::from(!refused_as_forked(s.set("small", b"x")));
                bad += i32::from(!refused_as_forked(s.delete("big")));
                bad += i32::from(!refused_as_forked(s.barrier("b", 0, 2, T)));
                bad += i32::from(!refused_as_forked(s.check_not_forked()));
                bad += i32::from(!s.is_empty());
                bad
            }));
            // SAFETY: ends the child at once, running nothing of the parent's.
            unsafe { _exit(bad.unwrap_or(100)) }
        }
        let until = Instant::now() + Duration::from_secs(10);
        let mut status = 0;
        loop {
            // SAFETY: polls the child forked above; `status` is a valid int.
            let r = unsafe { waitpid(pid, &mut status, WNOHANG) };
            if r == pid {
                break;
            }
            if Instant::now() >= until {
                // SAFETY: kills and reaps the child forked above, which hangs.
                unsafe {
                    kill(pid, SIGKILL);
                    waitpid(pid, &mut status, 0);
                }
                stop.store(true, Ordering::Relaxed);
                panic!("the forked child hung on the in-memory store");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(status, 0, "child exit code {} (checks failed)", status >> 8);
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    // The parent's store works on.
    store.check_not_forked().unwrap();
    store.set("k", b"v").unwrap();
    assert_eq!(store.get("k", T).unwrap(), b"v");
    assert!(store.delete("big").unwrap());
}
