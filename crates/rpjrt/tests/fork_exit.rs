//! `rpjrt::skip_plugin_exit_handlers_in_forked_child`: a child forked after a plugin was
//! loaded ends with its exit status, without running the exit handlers registered before
//! (which stand for the plugin's static destructors that wait for the parent's threads).
//! It forks the test process, so it has a test binary of its own with one test.

mod common;

use std::time::{Duration, Instant};

extern "C" {
    // POSIX declarations (libc, which every Rust program on Linux links).
    fn fork() -> i32;
    fn getpid() -> i32;
    fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
    fn kill(pid: i32, sig: i32) -> i32;
    fn atexit(f: extern "C" fn()) -> i32;
    fn pause() -> i32;
}

const WNOHANG: i32 = 1;
const SIGKILL: i32 = 9;

static PARENT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// An exit handler that never returns in a forked child.
extern "C" fn wait_for_parent_threads() {
    // SAFETY: plain libc calls without pointers.
    if unsafe { getpid() } != PARENT.load(std::sync::atomic::Ordering::SeqCst) {
        loop {
            // SAFETY: as above.
            unsafe { pause() };
        }
    }
}

#[test]
fn a_forked_child_ends_without_older_exit_handlers() {
    assert!(
        !rpjrt::skip_plugin_exit_handlers_in_forked_child(),
        "applies only in a forked child"
    );
    let _plugin = common::plugin(common::Which::New);
    // SAFETY: plain libc calls; the handler is a function of this program.
    unsafe {
        PARENT.store(getpid(), std::sync::atomic::Ordering::SeqCst);
        assert_eq!(atexit(wait_for_parent_threads), 0);
    }
    // SAFETY: the child only calls the function under test and `exit`.
    let pid = unsafe { fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let applied = rpjrt::skip_plugin_exit_handlers_in_forked_child();
        std::process::exit(if applied { 7 } else { 9 });
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut status = 0;
    loop {
        // SAFETY: `status` is a live i32.
        let done = unsafe { waitpid(pid, &mut status, WNOHANG) };
        if done == pid {
            break;
        }
        if Instant::now() > deadline {
            // SAFETY: the child is ours.
            unsafe {
                kill(pid, SIGKILL);
                waitpid(pid, &mut status, 0);
            }
            panic!("the forked child ran the exit handler registered before it and hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // WEXITSTATUS on Linux: normal exit, status in bits 8..16.
    assert_eq!(status & 0x7f, 0, "child ended by signal: {status:#x}");
    assert_eq!((status >> 8) & 0xff, 7, "child's status: {status:#x}");
}
