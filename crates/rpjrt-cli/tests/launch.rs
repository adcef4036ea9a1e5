//! Multi-process acceptance tests: real processes rendezvous on the TCP store, started by
//! `rpjrt launch` or by hand with a launcher's variables, including the failure cases
//! (a peer that never comes, a peer killed mid-rendezvous, a wrong token).

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const RPJRT: &str = env!("CARGO_BIN_EXE_rpjrt");

/// Launcher variables that must not leak in from the environment running the tests.
const SCRUB: &[&str] = &[
    "RPJRT_PROCESS_ID",
    "RPJRT_NUM_PROCESSES",
    "RPJRT_COORDINATOR",
    "RPJRT_COORDINATOR_PORT",
    "RPJRT_TOKEN",
    "RANK",
    "WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_NODELIST",
    "SLURM_JOB_NODELIST",
    "SLURM_STEP_NODELIST",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
];

/// `rpjrt launch -n N --timeout T -- sh -c SCRIPT`, with no extra environment.
fn launch_sh(n: &str, timeout: &str, script: &str) -> Command {
    cmd(
        &[
            "launch",
            "-n",
            n,
            "--timeout",
            timeout,
            "--",
            "sh",
            "-c",
            script,
        ],
        &[],
    )
}

fn cmd(args: &[&str], env: &[(&str, String)]) -> Command {
    let mut c = Command::new(RPJRT);
    c.args(args);
    for v in SCRUB {
        c.env_remove(v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits for `child`, killing it and failing the test if it is still running after
/// `limit` (a hang, not a speed measurement: the limit is far above the expected time).
fn finish(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "process hung; stdout {:?} stderr {:?}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

const LIMIT: Duration = Duration::from_secs(60);

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn launch_two_and_four_processes_that_rendezvous() {
    for n in [2usize, 4] {
        let port = free_port();
        let out = finish(
            cmd(
                &[
                    "launch",
                    "-n",
                    &n.to_string(),
                    "--port",
                    &port.to_string(),
                    "--",
                    RPJRT,
                    "rendezvous",
                    "--timeout",
                    "20",
                ],
                &[],
            )
            .spawn()
            .unwrap(),
            LIMIT,
        );
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
        for p in 0..n {
            let line =
                format!("[{p}] process {p} of {n}: rendezvous ok, {n} processes (launcher: rpjrt");
            assert!(stdout.contains(&line), "missing {line:?} in {stdout}");
        }
        // Process 0 shut its store down: nothing listens on the port any more.
        assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    }
}

#[test]
fn timeouts_of_any_size_are_usage_errors_or_forever_never_a_panic() {
    // Huge and infinite timeouts mean "as long as it takes" (they panicked converting to a
    // Duration); NaN, negative and zero ones are usage errors naming the option.
    let port = free_port();
    let out = finish(
        cmd(
            &[
                "launch",
                "-n",
                "2",
                "--port",
                &port.to_string(),
                "--timeout=1e300",
                "--",
                RPJRT,
                "rendezvous",
                "--timeout=inf",
            ],
            &[],
        )
        .spawn()
        .unwrap(),
        LIMIT,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("rendezvous ok, 2 processes"));
    for bad in ["nan", "-1", "0"] {
        for verb in [
            &["launch", "-n", "1"][..],
            &["rendezvous"],
            &["conform", "cpu"],
        ] {
            let mut args = verb.to_vec();
            let t = format!("--timeout={bad}");
            args.push(&t);
            if verb[0] == "launch" {
                args.extend(["--", "true"]);
            }
            let out = cmd(&args, &[]).output().unwrap();
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains("--timeout") && !err.contains("panicked"),
                "{args:?}: {err}"
            );
        }
    }
}

#[test]
fn slurm_variables_by_hand() {
    for n in [2usize, 4] {
        let port = free_port();
        let children: Vec<Child> = (0..n)
            .map(|p| {
                cmd(
                    &["rendezvous", "--timeout", "20"],
                    &[
                        ("SLURM_PROCID", p.to_string()),
                        ("SLURM_NTASKS", n.to_string()),
                        ("SLURM_JOB_NODELIST", "localhost".to_string()),
                        ("SLURM_JOB_ID", "4242".to_string()),
                        ("SLURM_STEP_ID", "0".to_string()),
                        ("RPJRT_COORDINATOR_PORT", port.to_string()),
                    ],
                )
                .spawn()
                .unwrap()
            })
            .collect();
        for (p, c) in children.into_iter().enumerate() {
            let out = finish(c, LIMIT);
            let stdout = text(&out.stdout);
            assert!(out.status.success(), "{p}: {stdout}\n{}", text(&out.stderr));
            let line = format!("process {p} of {n}: rendezvous ok, {n} processes (launcher: slurm, store: localhost:{port})");
            assert!(stdout.contains(&line), "{stdout}");
        }
        assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    }
}

fn rpjrt_env(p: usize, n: usize, port: u16, token: &str) -> Vec<(&'static str, String)> {
    vec![
        ("RPJRT_PROCESS_ID", p.to_string()),
        ("RPJRT_NUM_PROCESSES", n.to_string()),
        ("RPJRT_COORDINATOR", format!("127.0.0.1:{port}")),
        ("RPJRT_TOKEN", token.to_string()),
    ]
}

#[test]
fn a_peer_that_never_arrives_is_named_by_everyone_else() {
    let port = free_port();
    // Processes 0 and 1 of 3 start; process 2 never does.
    let children: Vec<Child> = (0..2)
        .map(|p| {
            cmd(
                &["rendezvous", "--timeout", "1.5"],
                &rpjrt_env(p, 3, port, "t"),
            )
            .spawn()
            .unwrap()
        })
        .collect();
    for c in children {
        let out = finish(c, LIMIT);
        let err = text(&out.stderr);
        assert!(!out.status.success());
        assert!(
            err.contains("process 2 of 3 did not join the job's store within 1.5s"),
            "{err}"
        );
    }
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn a_peer_killed_mid_rendezvous_is_named_by_everyone_else() {
    let port = free_port();
    let mut victim = cmd(
        &["rendezvous", "--timeout", "30", "--hold", "30"],
        &rpjrt_env(1, 3, port, "t"),
    )
    .spawn()
    .unwrap();
    let others: Vec<Child> = [0usize, 2]
        .into_iter()
        .map(|p| {
            cmd(
                &["rendezvous", "--timeout", "30"],
                &rpjrt_env(p, 3, port, "t"),
            )
            .spawn()
            .unwrap()
        })
        .collect();
    // Wait until the victim has joined (it sets its key, then holds), then kill it.
    {
        use rpjrt_distributed::{KvStore, TcpStore};
        let watcher = TcpStore::connect(
            &format!("127.0.0.1:{port}"),
            "t",
            99,
            Duration::from_secs(20),
        )
        .unwrap();
        watcher
            .get("rpjrt:rendezvous:1", Duration::from_secs(20))
            .unwrap();
    }
    victim.kill().unwrap();
    victim.wait().unwrap();
    for c in others {
        let out = finish(c, LIMIT);
        let err = text(&out.stderr);
        assert!(!out.status.success());
        // Its connection closed, so the others fail at once rather than at their timeout.
        assert!(
            err.contains("process 1 of 3 lost its connection to the store"),
            "{err}"
        );
    }
}

#[test]
fn a_wrong_token_is_refused_and_the_host_names_the_missing_peer() {
    let port = free_port();
    let host = cmd(
        &["rendezvous", "--timeout", "2"],
        &rpjrt_env(0, 2, port, "right"),
    )
    .spawn()
    .unwrap();
    let stranger = cmd(
        &["rendezvous", "--timeout", "2"],
        &rpjrt_env(1, 2, port, "wrong"),
    )
    .spawn()
    .unwrap();
    let out = finish(stranger, LIMIT);
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("refused process 1") && err.contains("wrong token"),
        "{err}"
    );
    let out = finish(host, LIMIT);
    let err = text(&out.stderr);
    assert!(
        err.contains("process 1 of 2 did not join the job's store"),
        "{err}"
    );
}

#[test]
fn a_missing_host_is_named() {
    let port = free_port();
    let out = finish(
        cmd(
            &["rendezvous", "--timeout", "1"],
            &rpjrt_env(1, 2, port, "t"),
        )
        .spawn()
        .unwrap(),
        LIMIT,
    );
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("process 0 (the store host) was not reachable"),
        "{err}"
    );
}

#[test]
fn launch_reports_the_failing_process_and_its_code() {
    let out = finish(
        cmd(
            &[
                "launch",
                "-n",
                "3",
                "--",
                "sh",
                "-c",
                "echo out $RPJRT_PROCESS_ID of $RPJRT_NUM_PROCESSES; \
                 if [ $RPJRT_PROCESS_ID = 1 ]; then echo bad >&2; exit 7; fi; exec sleep 20",
            ],
            &[],
        )
        .spawn()
        .unwrap(),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(7));
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(stdout.contains("[1] out 1 of 3"), "{stdout}");
    assert!(stderr.contains("[1] bad"), "{stderr}");
    assert!(
        stderr.contains("process 1 failed (exit code 7)"),
        "{stderr}"
    );
}

#[test]
fn launch_timeout_kills_everything() {
    let out = finish(
        cmd(
            &["launch", "-n", "2", "--timeout", "0.5", "--", "sleep", "20"],
            &[],
        )
        .spawn()
        .unwrap(),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(124));
    assert!(text(&out.stderr).contains("timed out"));
}

#[test]
fn launch_refuses_bad_arguments() {
    let out = finish(
        cmd(&["launch", "-n", "0", "--", "true"], &[])
            .spawn()
            .unwrap(),
        LIMIT,
    );
    // Every usage error exits with 2: a count clap refuses (negative, not a number) and
    // one only the launch can judge (zero) alike, and a command that cannot start.
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("at least one process"));
    for n in ["-1", "x"] {
        let out = finish(
            cmd(&["launch", "-n", n, "--", "true"], &[])
                .spawn()
                .unwrap(),
            LIMIT,
        );
        assert_eq!(out.status.code(), Some(2), "-n {n}: {}", text(&out.stderr));
    }
    let out = finish(
        cmd(&["launch", "-n", "1", "--", "/nonexistent/program"], &[])
            .spawn()
            .unwrap(),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("cannot start"));
}

/// The fake plugin library, built here if the workspace has not built it yet.
fn fake_plugin() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../../target").into());
    let lib = target.join("debug").join("librpjrt_fake_plugin.so");
    if !lib.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let ok = Command::new(cargo)
            .args(["build", "--locked", "-p", "rpjrt-fake-plugin"])
            .status()
            .unwrap()
            .success();
        assert!(ok, "building the fake plugin failed");
    }
    lib
}

#[test]
fn processes_form_a_multi_process_client_through_the_tcp_store() {
    // The fake plugin with RPJRT_FAKE_KV=1 exchanges device counts through the KV
    // callbacks, as a distributed plugin does; each process has 2 devices.
    let fake = fake_plugin();
    for n in [2usize, 4] {
        let mut c = cmd(
            &[
                "launch",
                "-n",
                &n.to_string(),
                "--",
                RPJRT,
                "rendezvous",
                "--timeout",
                "20",
                "--plugin",
                fake.to_str().unwrap(),
                "-o",
                "fake_device_count=2",
            ],
            &[],
        );
        c.env("RPJRT_FAKE_KV", "1");
        let out = finish(c.spawn().unwrap(), LIMIT);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
        for p in 0..n {
            let devices: Vec<String> = (0..2 * n)
                .map(|d| {
                    let owner = d / 2;
                    let mark = if owner == p { "*" } else { "" };
                    format!("{d}@{owner}{mark}")
                })
                .collect();
            let line = format!(
                "[{p}] process {p} of {n}: client process index {p}, {} devices, 2 addressable \
                 [id@process, * = addressable: {}]",
                2 * n,
                devices.join(" ")
            );
            assert!(stdout.contains(&line), "missing {line:?} in\n{stdout}");
        }
    }
}

/// A launcher killed with SIGKILL (no chance to clean up) takes its processes with it: each
/// gets SIGTERM from the kernel instead of running on without it.
#[cfg(target_os = "linux")]
#[test]
fn a_killed_launcher_leaves_no_process_running() {
    let dir = std::env::temp_dir().join(format!("rpjrt-launch-orphans-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let script = format!(
        "echo $$ > {}/pid.$RPJRT_PROCESS_ID.tmp && mv {0}/pid.$RPJRT_PROCESS_ID.tmp {0}/pid.$RPJRT_PROCESS_ID && exec sleep 120",
        dir.display()
    );
    let mut launcher = cmd(&["launch", "-n", "2", "--", "sh", "-c", &script], &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid_of = |p: usize| -> Option<u32> {
        std::fs::read_to_string(dir.join(format!("pid.{p}")))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    };
    let start = Instant::now();
    while (pid_of(0).is_none() || pid_of(1).is_none()) && start.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let pids = [
        pid_of(0).expect("process 0 started"),
        pid_of(1).expect("process 1 started"),
    ];
    launcher.kill().unwrap();
    launcher.wait().unwrap();
    // Running (or sleeping) still, as opposed to gone or a zombie waiting to be reaped.
    let alive = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
            .unwrap_or(false)
    };
    let start = Instant::now();
    while pids.iter().any(|&p| alive(p)) && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    for p in &left {
        let _ = Command::new("kill").arg("-9").arg(p.to_string()).status();
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        left.is_empty(),
        "processes {left:?} outlived their killed launcher"
    );
}

/// A launcher whose own output is read slowly (a pager, a slow `tee`) forwards every line
/// of its processes, however long after they exited: it used to stop reading 2 s after
/// the last one exited and lose the tail of the output with exit code 0.
#[test]
fn launch_output_read_slowly_arrives_whole() {
    use std::io::Read;
    let mut child = cmd(&["launch", "-n", "1", "--", "seq", "1", "40000"], &[])
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    // About 40 KB/s: the 229 KB of output take about 6 s, long after `seq` ended.
    loop {
        let n = stdout.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = finish(child, LIMIT);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let got = text(&got);
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(lines.len(), 40000, "last line {:?}", lines.last());
    assert_eq!(lines[39999], "[0] 40000");
}

/// A pipe that a process's own background child keeps open is given up, but not in
/// silence: the launcher says whose output it stopped reading and exits with 1.
#[test]
fn launch_says_when_it_stops_reading_a_pipe_held_open() {
    let started = Instant::now();
    let out = finish(
        cmd(
            &[
                "launch",
                "-n",
                "1",
                "--",
                "sh",
                "-c",
                "echo before; sleep 8 & exit 0",
            ],
            &[],
        )
        .spawn()
        .unwrap(),
        LIMIT,
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stdout.contains("[0] before"), "{stdout}");
    assert!(
        stderr.contains(
            "stopped reading the output of process 0: its pipe was still open, with \
             nothing written to it, 2s after every process had exited (a process it \
             started (pid "
        ),
        "{stderr}"
    );
    // Given up after the idle limit, not held until the background process ends.
    assert!(
        started.elapsed() < Duration::from_secs(7),
        "{:?}",
        started.elapsed()
    );
}

/// A background process that a worker started and that keeps writing held `launch
/// --timeout 2` open for as long as it lived (the drain of leftover output never looked
/// at the timeout), and the message blamed 2 s of silence. The timeout now bounds the
/// drain: exit 124, a message that says the processes had exited and names the process
/// still holding the pipe (left running: this test stops it).
#[cfg(target_os = "linux")]
#[test]
fn launch_timeout_bounds_a_chatty_background_process() {
    let dir = std::env::temp_dir().join(format!("rpjrt-chatty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("daemon.pid");
    let script = format!(
        "sh -c 'echo $$ > {}; while true; do echo tick; sleep 0.3; done' & exit 0",
        pidfile.display()
    );
    let started = Instant::now();
    let out = finish(launch_sh("1", "2", &script).spawn().unwrap(), LIMIT);
    let took = started.elapsed();
    let daemon = std::fs::read_to_string(&pidfile)
        .unwrap_or_default()
        .trim()
        .to_string();
    if !daemon.is_empty() {
        let _ = Command::new("kill").arg("-KILL").arg(&daemon).status();
    }
    let _ = std::fs::remove_dir_all(&dir);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(124), "{stderr}");
    assert!(stdout.contains("[0] tick"), "{stdout}");
    assert!(took < Duration::from_secs(6), "{took:?} {stderr}");
    assert!(
        stderr.contains(
            "rpjrt: stopped reading the output of process 0: the launch timed out after \
             2.0s while its pipe was still open after every process had exited"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("(pids {daemon}, "))
            || stderr.contains(&format!(
                "(pid {daemon}) keeps it open and was left running"
            )),
        "{daemon} {stderr}"
    );
    assert!(
        stderr.contains(
            "rpjrt: launch timed out after 2.0s: every process had exited, but a process \
             they started still held their output open"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("killed the processes"), "{stderr}");
    assert!(!stderr.contains("with nothing written"), "{stderr}");
}

/// A worker killed at the timeout leaves a background writer (out of its process tree:
/// the subshell that started it exited)
/// holding the pipe: the drain ends at most the idle limit after the kill.
#[cfg(target_os = "linux")]
#[test]
fn launch_timeout_bounds_the_drain_after_killing_the_processes() {
    let started = Instant::now();
    let out = finish(
        cmd(
            &[
                "launch",
                "-n",
                "1",
                "--timeout",
                "1",
                "--",
                "sh",
                "-c",
                "( while true; do echo tick; sleep 0.3; done & ); exec sleep 30",
            ],
            &[],
        )
        .spawn()
        .unwrap(),
        LIMIT,
    );
    let took = started.elapsed();
    let stderr = text(&out.stderr);
    // The reparented writer is stopped by the test, found through the message's pid.
    for pids in stderr
        .split(['(', ')'])
        .filter_map(|r| r.strip_prefix("pid ").or_else(|| r.strip_prefix("pids ")))
    {
        for pid in pids.split(", ") {
            let _ = Command::new("kill").arg("-KILL").arg(pid).status();
        }
    }
    assert_eq!(out.status.code(), Some(124), "{stderr}");
    assert!(took < Duration::from_secs(6), "{took:?} {stderr}");
    assert!(
        stderr.contains("launch timed out after 1.0s; killed the processes still running"),
        "{stderr}"
    );
    assert!(stderr.contains("left running"), "{stderr}");
}

/// A process killed by a signal is reported by the signal's name and number, and the
/// launcher exits with 128 + N as a shell would: it said "failed (a signal)" and exited 1.
#[test]
fn launch_names_the_signal_that_killed_a_process() {
    let out = finish(
        cmd(
            &["launch", "-n", "2", "--", "sh", "-c", "kill -ABRT $$"],
            &[],
        )
        .spawn()
        .unwrap(),
        LIMIT,
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + 6), "{stderr}");
    assert!(stderr.contains("killed by SIGABRT (6)"), "{stderr}");
    assert_eq!(rpjrt_distributed::signal_name(11), "SIGSEGV");
    assert_eq!(rpjrt_distributed::signal_name(40), "signal 40");
}

/// The timeout message shows the timeout as given: `--timeout 0.001` said "timed out after
/// 0.0s".
#[test]
fn launch_timeout_message_shows_the_timeout_as_given() {
    let out = finish(
        cmd(
            &[
                "launch",
                "-n",
                "1",
                "--timeout",
                "0.001",
                "--",
                "sleep",
                "20",
            ],
            &[],
        )
        .spawn()
        .unwrap(),
        LIMIT,
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "{stderr}");
    assert!(stderr.contains("timed out after 1ms;"), "{stderr}");
    assert!(!stderr.contains("0.0s"), "{stderr}");
    // Every size reads as given, through the same words.
    use rpjrt_cli::cmd::launch::end_messages;
    use rpjrt_distributed::LaunchOutcome;
    let timed_out = LaunchOutcome {
        exit_codes: vec![None],
        signals: vec![Some(9)],
        first_failure: None,
        timed_out: true,
        stopped_by: None,
        output_cut: vec![],
        output_cut_why: None,
        output_holders: vec![],
    };
    for (t, want) in [
        (0.25, "250ms"),
        (0.0005, "0.5ms"),
        (2.5, "2.5s"),
        (30.0, "30.0s"),
    ] {
        let lines = end_messages(&timed_out, Some(Duration::from_secs_f64(t)));
        assert_eq!(
            lines,
            [format!(
                "rpjrt: launch timed out after {want}; killed the processes still running"
            )]
        );
    }
}

/// A launcher stopped by a signal (SIGINT, SIGTERM, SIGHUP) stopped its processes and
/// exited 128 + N without a word; it now says which signal stopped it and what it did.
#[cfg(unix)]
#[test]
fn a_launcher_stopped_by_a_signal_says_so() {
    use std::io::BufRead;
    let mut child = cmd(
        &[
            "launch",
            "-n",
            "2",
            "--",
            "sh",
            "-c",
            "echo ready; exec sleep 30",
        ],
        &[],
    )
    .spawn()
    .unwrap();
    // Both processes started: the launcher catches the signal from before the first one.
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap_or_default());
        }
    });
    let mut ready = 0;
    while ready < 2 {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("both processes start");
        ready += usize::from(line.ends_with("] ready"));
    }
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let out = finish(child, LIMIT);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + 15), "{stderr}");
    assert!(
        stderr.contains(
            "rpjrt: stopped by SIGTERM (15): sent SIGTERM to the processes still running, \
             SIGKILL to those still running 5.0s later"
        ),
        "{stderr}"
    );
    // The processes it stopped are not reported as failures.
    assert!(!stderr.contains("failed"), "{stderr}");
    // The other stop signals read the same way, with the grace the launcher gives.
    use rpjrt_cli::cmd::launch::end_messages;
    let grace = rpjrt_distributed::duration_text(rpjrt_distributed::STOP_GRACE);
    for (sig, name) in [(2, "SIGINT"), (1, "SIGHUP")] {
        let outcome = rpjrt_distributed::LaunchOutcome {
            exit_codes: vec![None, Some(0)],
            signals: vec![Some(15), None],
            first_failure: None,
            timed_out: false,
            stopped_by: Some(sig),
            output_cut: vec![],
            output_cut_why: None,
            output_holders: vec![],
        };
        assert_eq!(outcome.exit_code(), 128 + sig);
        assert_eq!(
            end_messages(&outcome, None),
            [format!(
                "rpjrt: stopped by {name} ({sig}): sent SIGTERM to the processes still \
                 running, SIGKILL to those still running {grace} later"
            )]
        );
    }
}

/// Whether a process whose command line holds `needle` is running (from `/proc`).
fn running_with(needle: &str) -> bool {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .any(|c| {
            String::from_utf8_lossy(&c)
                .replace('\0', " ")
                .contains(needle)
        })
}

#[test]
fn an_abandoned_launch_takes_its_processes_descendants_with_it() {
    // A worker that is a wrapper script (no exec) left its job running after the launcher
    // killed the wrapper on a timeout or another process's failure.
    let secs = 300_000 + std::process::id() % 10_000;
    for (extra, failing) in [(0, false), (1, true)] {
        let marker = format!("sleep {}", secs + extra);
        let script = if failing {
            format!("if [ \"$RPJRT_PROCESS_ID\" = 1 ]; then exit 5; fi; {marker}; echo done")
        } else {
            format!("{marker}; echo done")
        };
        let out = finish(launch_sh("2", "3", &script).spawn().unwrap(), LIMIT);
        let err = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(if failing { 5 } else { 124 }),
            "{err}"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(
            !running_with(&marker),
            "{marker} still runs after the launch ended: {err}"
        );
    }
}

#[test]
fn a_launch_the_system_cannot_carry_out_is_a_failure_not_a_usage_error() {
    // Out of file descriptors after 15 of 50 processes: "invalid argument", exit 2, as if
    // the command line were wrong.
    let script = format!("ulimit -n 40 && exec {RPJRT} launch -n 50 -- sleep 30");
    let mut sh = Command::new("sh");
    sh.args(["-c", &script]);
    for v in SCRUB {
        sh.env_remove(v);
    }
    let started = Instant::now();
    let out = finish(
        sh.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        LIMIT,
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot start"), "{err}");
    assert!(err.contains("ulimit -n"), "{err}");
    assert!(!err.contains("invalid argument"), "{err}");
    // The processes started were killed, not waited for.
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    // A command that is not there, or cannot be run, stays the user's error.
    for program in ["/nonexistent/program", "/etc/passwd", "/"] {
        let out = finish(
            cmd(&["launch", "-n", "2", "--", program], &[])
                .spawn()
                .unwrap(),
            LIMIT,
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{program}: {err}");
        assert!(err.contains("cannot start"), "{program}: {err}");
    }
}

#[test]
fn launcher_variables_with_spaces_are_refused_naming_them() {
    // " 1" and "1 " were read as 1, though the documentation says digits and nothing else.
    let port = free_port();
    for bad in [" 1", "1 "] {
        let mut env = rpjrt_env(1, 2, port, "t");
        env[0].1 = bad.to_string();
        let out = finish(
            cmd(&["rendezvous", "--timeout", "2"], &env)
                .spawn()
                .unwrap(),
            LIMIT,
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {err}");
        assert!(err.contains("RPJRT_PROCESS_ID"), "{bad:?}: {err}");
    }
}

#[test]
fn a_long_coordinator_is_shortened_in_the_error() {
    let long = format!("{}:1", "a".repeat(100_000));
    let out = finish(
        cmd(
            &[
                "rendezvous",
                "--process-id",
                "1",
                "--num-processes",
                "2",
                "--coordinator",
                &long,
                "--timeout",
                "2",
            ],
            &[],
        )
        .spawn()
        .unwrap(),
        LIMIT,
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", &err[..err.len().min(500)]);
    assert!(err.len() < 1000, "{} bytes", err.len());
    assert!(err.contains("(100002 bytes)"), "{err}");
}

#[test]
fn a_long_program_name_or_job_id_is_shortened_and_named() {
    // `launch -n 1 -- /nonexist/<100 KB>` printed a 100 KB error; a 100 KB SLURM_JOB_ID
    // was refused as "the job token is 100007 bytes long", naming no variable.
    let program = format!("/nonexist/{}", "x".repeat(100_000));
    let out = finish(
        cmd(&["launch", "-n", "1", "--", &program], &[])
            .spawn()
            .unwrap(),
        LIMIT,
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", &err[..err.len().min(500)]);
    assert!(err.len() < 1000, "{} bytes", err.len());
    assert!(err.contains("cannot start \"/nonexist/xxx"), "{err}");
    assert!(err.contains("(100010 bytes)"), "{err}");
    let long = "7".repeat(100_000);
    for (name, env) in [
        (
            "SLURM_JOB_ID (100000 bytes)",
            vec![
                ("SLURM_PROCID", "1".to_string()),
                ("SLURM_NTASKS", "2".to_string()),
                ("SLURM_NODELIST", "127.0.0.1".to_string()),
                ("SLURM_JOB_ID", long.clone()),
            ],
        ),
        (
            "TORCHELASTIC_RUN_ID (100000 bytes)",
            vec![
                ("RANK", "1".to_string()),
                ("WORLD_SIZE", "2".to_string()),
                ("MASTER_ADDR", "127.0.0.1".to_string()),
                ("MASTER_PORT", "1".to_string()),
                ("TORCHELASTIC_RUN_ID", long.clone()),
            ],
        ),
    ] {
        let out = finish(
            cmd(&["rendezvous", "--timeout", "2"], &env)
                .spawn()
                .unwrap(),
            LIMIT,
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(name), "{err}");
        assert!(err.len() < 1000, "{} bytes", err.len());
    }
    // With the process id and count given, a long RPJRT_TOKEN is named too.
    let out = finish(
        cmd(
            &[
                "rendezvous",
                "--process-id",
                "1",
                "--num-processes",
                "2",
                "--coordinator",
                "127.0.0.1:1",
                "--timeout",
                "2",
            ],
            &[("RPJRT_TOKEN", long.clone())],
        )
        .spawn()
        .unwrap(),
        LIMIT,
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("RPJRT_TOKEN is 100000 bytes long; at most 4096 are accepted"),
        "{err}"
    );
}

/// Raw connections that are not the job's processes: one that never says hello, and one
/// that says hello as process 1 (with the token) and stays open while the real process 1
/// joins. Neither may keep the host up once process 1 has left (it stayed 5 s for the
/// first, its whole --timeout for the second).
#[test]
fn connections_that_are_not_peers_do_not_keep_the_rendezvous_host_up() {
    use std::io::{Read, Write};
    let port = free_port();
    let host = cmd(
        &["rendezvous", "--timeout", "30"],
        &rpjrt_env(0, 2, port, "tok"),
    )
    .spawn()
    .unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    let silent = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("the host never listened: {e}"),
        }
    };
    let mut extra = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut hello = vec![0x01];
    hello.extend_from_slice(b"RPJRTKV1");
    hello.extend_from_slice(&1u32.to_be_bytes());
    hello.extend_from_slice(b"tok");
    let mut frame = (hello.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&hello);
    extra.write_all(&frame).unwrap();
    let mut reply = [0u8; 5];
    extra.read_exact(&mut reply).unwrap();
    assert_eq!(reply, [0, 0, 0, 1, 0], "the hello was not let in");
    let peer = finish(
        cmd(
            &["rendezvous", "--timeout", "30"],
            &rpjrt_env(1, 2, port, "tok"),
        )
        .spawn()
        .unwrap(),
        LIMIT,
    );
    assert!(peer.status.success(), "{}", text(&peer.stderr));
    let left = Instant::now();
    let out = finish(host, LIMIT);
    let stayed = left.elapsed();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stayed < Duration::from_secs(4),
        "the host stayed {stayed:?}"
    );
    drop((silent, extra));
}
