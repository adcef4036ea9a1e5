//! A launcher stopped by SIGINT, SIGTERM or SIGHUP stops its whole job, processes that
//! ignore SIGTERM included, and exits with 128 + the signal; a launcher killed outright
//! takes its processes with it.
//!
//! Each test runs the launcher in a child process: this test binary again, running only
//! [`launcher_child`], which launches the job that `LAUNCH_CHILD_ENV` describes and exits
//! with the launcher's exit code. The test then signals that child, as a user or a batch
//! system signals `rpjrt launch`.
#![cfg(target_os = "linux")]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rpjrt_distributed::{Launcher, STOP_GRACE};

/// Set in the child when the test ignores a signal in it on purpose (see
/// [`launcher_child`]).
const KEEP_IGNORED_ENV: &str = "RPJRT_TEST_KEEP_IGNORED";

/// Set in the child: the workers' shell script (`DIR` names the scratch directory).
const LAUNCH_CHILD_ENV: &str = "RPJRT_TEST_LAUNCH_CHILD";

/// Workers that ignore every stop signal, as a script that checkpoints on SIGTERM and then
/// hangs, or one blocked in native code, does; `exec` keeps the signals ignored.
const IGNORING: &str = "trap '' TERM INT HUP; echo $$ > \"$DIR/pid.$RPJRT_PROCESS_ID\"; \
                        exec sleep 60";
/// Workers that die on SIGTERM.
const OBEYING: &str = "echo $$ > \"$DIR/pid.$RPJRT_PROCESS_ID\"; exec sleep 60";

/// Not a test of its own: the launcher of the other tests, when run as their child.
#[test]
fn launcher_child() {
    let Ok(script) = std::env::var(LAUNCH_CHILD_ENV) else {
        return;
    };
    // The test harness may itself run with SIGINT ignored (a script's background job, as
    // CI runs it), and an ignored signal stays ignored across exec: a launcher started
    // from a terminal takes the stop signals, so this one does too, unless the test
    // ignores one on purpose.
    if std::env::var_os(KEEP_IGNORED_ENV).is_none() {
        rpjrt_raw::process::default_stop_signals().unwrap();
    }
    let launcher = Launcher {
        num_processes: 2,
        command: vec!["sh".into(), "-c".into(), script.into()],
        port: None,
        timeout: Some(Duration::from_secs(120)),
    };
    let outcome = launcher.run(Arc::new(|_, _, _| {})).unwrap();
    let dir = std::env::var("DIR").unwrap();
    std::fs::write(Path::new(&dir).join("outcome"), format!("{outcome:?}")).unwrap();
    std::process::exit(outcome.exit_code());
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "rpjrt-launch-signals-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts the launcher child; returns it and its workers' pids once both are running.
fn start_job(dir: &Path, script: &str) -> (Child, Vec<u32>) {
    start_job_ignoring(dir, script, None)
}

/// [`start_job`], the launcher started with signal `ignored` (a name, `HUP`) ignored, as
/// `nohup` starts a program.
// The child is returned, and every caller waits for it (`wait_code`).
#[allow(clippy::zombie_processes)]
fn start_job_ignoring(dir: &Path, script: &str, ignored: Option<&str>) -> (Child, Vec<u32>) {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = match ignored {
        None => Command::new(exe),
        Some(sig) => {
            // `trap ''` ignores the signal, and `exec` keeps it ignored.
            let mut c = Command::new("sh");
            c.args(["-c", &format!("trap '' {sig}; exec \"$0\" \"$@\"")])
                .arg(exe)
                .env(KEEP_IGNORED_ENV, "1");
            c
        }
    };
    let mut child = cmd
        .args([
            "--exact",
            "launcher_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(LAUNCH_CHILD_ENV, script)
        .env("DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // A process group of its own, as a job in a terminal has: Ctrl-C reaches it all.
        .process_group(0)
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let pids: Vec<u32> = (0..2)
            .filter_map(|p| std::fs::read_to_string(dir.join(format!("pid.{p}"))).ok())
            .filter_map(|t| t.trim().parse().ok())
            .collect();
        if pids.len() == 2 {
            // The workers have reached their `exec sleep`, traps set.
            std::thread::sleep(Duration::from_millis(300));
            return (child, pids);
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the job did not start");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` is still running (a zombie is not).
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

fn send(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig} {pid}");
}

/// Waits for `child` up to `limit`; its exit code, or the signal that ended it (negated).
fn wait_code(child: &mut Child, limit: Duration) -> i32 {
    let until = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            use std::os::unix::process::ExitStatusExt;
            return status
                .code()
                .unwrap_or_else(|| -status.signal().unwrap_or(0));
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the launcher did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill_leftovers(pids: &[u32]) {
    for &p in pids {
        if running(p) {
            let _ = Command::new("kill")
                .args(["-KILL", &p.to_string()])
                .status();
        }
    }
}

/// Stops a job of workers that ignore SIGTERM with `sig`: the launcher must exit with
/// `code`, after the grace, leaving none of them running.
fn stopping_a_job_of_ignoring_workers(sig: &str, code: i32) {
    let dir = scratch(sig);
    let (mut launcher, pids) = start_job(&dir, IGNORING);
    let t = Instant::now();
    send(launcher.id(), sig);
    let got = wait_code(&mut launcher, STOP_GRACE + Duration::from_secs(20));
    let took = t.elapsed();
    let left: Vec<u32> = pids.iter().copied().filter(|&p| running(p)).collect();
    kill_leftovers(&pids);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(got, code, "SIG{sig}: the launcher's exit code");
    assert!(
        left.is_empty(),
        "SIG{sig}: workers {left:?} outlived the launcher"
    );
    // They had their grace, and not much more.
    assert!(
        took + Duration::from_millis(200) >= STOP_GRACE,
        "SIG{sig}: killed after {took:?}, before the grace"
    );
    assert!(
        took < STOP_GRACE + Duration::from_secs(5),
        "SIG{sig}: took {took:?}"
    );
}

#[test]
fn sigterm_stops_workers_that_ignore_it() {
    stopping_a_job_of_ignoring_workers("TERM", 143);
}

#[test]
fn sigint_stops_workers_that_ignore_it() {
    stopping_a_job_of_ignoring_workers("INT", 130);
}

#[test]
fn sighup_stops_workers_that_ignore_it() {
    stopping_a_job_of_ignoring_workers("HUP", 129);
}

#[test]
fn workers_that_obey_sigterm_are_not_held_for_the_grace() {
    let dir = scratch("obeying");
    let (mut launcher, pids) = start_job(&dir, OBEYING);
    let t = Instant::now();
    send(launcher.id(), "TERM");
    let got = wait_code(&mut launcher, STOP_GRACE + Duration::from_secs(20));
    let took = t.elapsed();
    kill_leftovers(&pids);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(got, 143);
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

#[test]
fn a_second_signal_kills_at_once() {
    let dir = scratch("twice");
    let (mut launcher, pids) = start_job(&dir, IGNORING);
    let t = Instant::now();
    send(launcher.id(), "INT");
    std::thread::sleep(Duration::from_millis(300));
    send(launcher.id(), "INT");
    let got = wait_code(&mut launcher, STOP_GRACE + Duration::from_secs(20));
    let took = t.elapsed();
    let left: Vec<u32> = pids.iter().copied().filter(|&p| running(p)).collect();
    kill_leftovers(&pids);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(got, 130);
    assert!(left.is_empty(), "workers {left:?} outlived the launcher");
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

#[test]
fn a_launcher_killed_outright_takes_workers_that_ignore_sigterm_with_it() {
    // The parent-death signal was SIGTERM: a worker ignoring it ran on, orphaned.
    let dir = scratch("kill");
    let (mut launcher, pids) = start_job(&dir, IGNORING);
    send(launcher.id(), "KILL");
    assert_eq!(wait_code(&mut launcher, Duration::from_secs(10)), -9);
    let until = Instant::now() + Duration::from_secs(5);
    let mut left: Vec<u32> = pids.clone();
    while !left.is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
        left.retain(|&p| running(p));
    }
    kill_leftovers(&pids);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        left.is_empty(),
        "workers {left:?} outlived the killed launcher"
    );
}

#[test]
fn ctrl_c_to_the_whole_group_is_a_stop_not_a_failure() {
    // Ctrl-C in a terminal signals the launcher and its processes at once: the processes
    // dying of that SIGINT are not reported as a failing process.
    let dir = scratch("group");
    let (mut launcher, pids) = start_job(&dir, OBEYING);
    let ok = Command::new("kill")
        .args(["-INT", "--", &format!("-{}", launcher.id())])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -INT to the group");
    let got = wait_code(&mut launcher, STOP_GRACE + Duration::from_secs(20));
    let outcome = std::fs::read_to_string(dir.join("outcome")).unwrap_or_default();
    kill_leftovers(&pids);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(got, 130, "{outcome}");
    assert!(
        outcome.contains("first_failure: None") && outcome.contains("stopped_by: Some(2)"),
        "{outcome}"
    );
}

#[test]
fn a_signal_ignored_when_the_launcher_starts_stays_ignored() {
    // Under `nohup` a hang-up must not stop the job.
    let dir = scratch("nohup");
    let (mut launcher, pids) = start_job_ignoring(&dir, OBEYING, Some("HUP"));
    send(launcher.id(), "HUP");
    std::thread::sleep(Duration::from_millis(500));
    let still = launcher.try_wait().unwrap().is_none() && pids.iter().all(|&p| running(p));
    send(launcher.id(), "TERM");
    let got = wait_code(&mut launcher, STOP_GRACE + Duration::from_secs(20));
    kill_leftovers(&pids);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        still,
        "SIGHUP, ignored when the launcher started, stopped it"
    );
    assert_eq!(got, 143);
}
