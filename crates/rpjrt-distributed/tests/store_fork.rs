//! A TCP store used in a process forked after it was made: every call is refused there,
//! naming the fork, and its shutdown and drop do nothing harmful (no join of threads that
//! do not exist in the child, no goodbye on the parent's connection), so the parent's
//! stores go on working.

use std::time::Duration;

use rpjrt::{Code, Result};
use rpjrt_distributed::{KvStore, Rendezvous, TcpStore};

const T: Duration = Duration::from_secs(10);

extern "C" {
    // POSIX, in libc (which every Rust program on Linux links).
    fn fork() -> i32;
    fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
    fn _exit(status: i32) -> !;
}

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
