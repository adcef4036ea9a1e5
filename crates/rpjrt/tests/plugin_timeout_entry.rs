//! `Plugin::current_step` names the entry a plugin load is stuck in, which the Python and
//! command-line timeouts (`RPJRT_PLUGIN_TIMEOUT`, `--plugin-timeout`) put in their message.
//! One test: the hanging load keeps the fake plugin's knobs set and its thread stuck for
//! the rest of this process.

mod common;

use std::time::{Duration, Instant};

use rpjrt::Plugin;

const KNOBS: [&str; 1] = ["RPJRT_FAKE_HANG_ON"];

fn wait_for_step(thread: std::thread::ThreadId, want: &str) -> String {
    let start = Instant::now();
    loop {
        let step = Plugin::current_step(thread);
        if step.as_deref().is_some_and(|s| s.contains(want)) {
            return step.unwrap();
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no step naming {want} after 30 s; last: {step:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_step_a_load_is_stuck_in_is_named() {
    // Nothing is known about a thread that never loaded a plugin.
    assert_eq!(Plugin::current_step(std::thread::current().id()), None);

    // After a load returns, the thread is past it: what follows is the client's creation.
    common::load_fake(&[], &KNOBS).expect("fake plugin loads");
    let after = Plugin::current_step(std::thread::current().id()).expect("a mark");
    assert!(after.contains("PJRT_Client_Create"), "{after}");

    // A load stuck in an entry names it. The stuck thread is left behind (it cannot be
    // stopped), holding the harness's load lock: so one hang per process.
    let stuck = std::thread::spawn(|| {
        let _ = common::load_fake(&[("RPJRT_FAKE_HANG_ON", "PJRT_Plugin_Initialize")], &KNOBS);
    });
    let step = wait_for_step(stuck.thread().id(), "PJRT_Plugin_Initialize");
    assert_eq!(step, "PJRT_Plugin_Initialize");
}
