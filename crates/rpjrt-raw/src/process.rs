//! Process-level calls the safe crates need and may not make themselves: ending the
//! process at once, tying a child process's life to its parent's, signalling a child, and
//! catching the signals that ask a process to stop ([`StopSignals`]); and the one way the
//! crates wait for a child with a deadline ([`wait_until`]).

use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Ends the process at once with `code`: no exit handlers, no static destructors, no
/// flushing of C stdio buffers. For giving up on a plugin call that does not return: a
/// normal exit would run the plugin's static destructors while one of its threads is still
/// inside it, which can crash or wait forever on that thread.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: `_exit` takes any status and does not return; it touches no memory of ours.
    unsafe { libc::_exit(code) }
}

/// Makes the process `cmd` starts receive SIGTERM when the thread that starts it ends (on
/// Linux, where the kernel offers it; elsewhere nothing changes), and exit at once if that
/// parent is already gone when it starts. A process that ignores or handles SIGTERM can
/// outlive its parent: [`killed_with_parent`] leaves it no such choice. Call `spawn` from
/// a thread that outlives the child (the kernel ties the signal to the spawning thread,
/// not to the process).
pub fn die_with_parent(cmd: &mut Command) {
    tie_to_parent(cmd, libc::SIGTERM);
}

/// Like [`die_with_parent`], with SIGKILL as the parent-death signal: the process `cmd`
/// starts cannot ignore or handle it, so it never runs on after the thread that started
/// it ends, whichever way that ends (SIGKILL included). For a launcher whose children must
/// not outlive it; a launcher that is asked to stop (SIGINT, SIGTERM) should first give
/// them SIGTERM and a grace period itself ([`StopSignals`], [`signal_child`]).
pub fn killed_with_parent(cmd: &mut Command) {
    tie_to_parent(cmd, libc::SIGKILL);
}

/// Sets the parent-death signal `sig` on the process `cmd` starts (Linux only).
fn tie_to_parent(cmd: &mut Command, sig: libc::c_int) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: getpid is async-signal-safe and reads nothing of ours.
        let parent = unsafe { libc::getpid() };
        let hook = move || -> std::io::Result<()> {
            // SAFETY: prctl, getppid and _exit are async-signal-safe system calls, allowed
            // between fork and exec; they read only their integer arguments.
            unsafe {
                if libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent died before the line above took effect: no signal will come.
                if libc::getppid() != parent {
                    libc::_exit(128 + sig);
                }
            }
            Ok(())
        };
        // SAFETY: the hook runs in the child between fork and exec and only makes the
        // async-signal-safe calls above; it allocates nothing and takes no lock.
        unsafe {
            cmd.pre_exec(hook);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (cmd, sig);
}

/// Sends signal `sig` to `child` if it is still running, and says whether it was sent.
/// A child already reaped (by an earlier `try_wait` or `wait`: its status is kept) is
/// never signalled, so the signal cannot reach another process that took over its pid.
pub fn signal_child(child: &mut Child, sig: i32) -> std::io::Result<bool> {
    if child.try_wait()?.is_some() {
        return Ok(false);
    }
    let pid = libc::pid_t::try_from(child.id())
        .map_err(|_| std::io::Error::other("process id out of range"))?;
    // SAFETY: kill takes two integers and touches no memory of ours. `pid` is our child,
    // which `try_wait` just found not yet reaped, so the pid still names it.
    if unsafe { libc::kill(pid, sig) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(true)
}

/// Sends `sig` to every process descended from `child` (its children, theirs, ...), then
/// to `child` itself as [`signal_child`] does: a worker that is a wrapper script, or that
/// started helpers of its own, is stopped whole. Descendants are read from `/proc` (Linux;
/// elsewhere only `child` is signalled); one that has left the tree (reparented after its
/// parent ended) is not found. To signal many children, scan once ([`ProcessTree::scan`])
/// and use [`signal_child_tree_in`]: each call here reads every process's parent.
pub fn signal_child_tree(child: &mut Child, sig: i32) -> std::io::Result<bool> {
    if child.try_wait()?.is_some() {
        return Ok(false);
    }
    signal_child_tree_in(child, sig, &ProcessTree::scan())
}

/// As [`signal_child_tree`], with the descendants taken from `tree`, one reading of
/// `/proc` shared by every child signalled in one round (a launch of thousands of
/// processes would otherwise read every process's parent once per child).
pub fn signal_child_tree_in(
    child: &mut Child,
    sig: i32,
    tree: &ProcessTree,
) -> std::io::Result<bool> {
    if child.try_wait()?.is_some() {
        return Ok(false);
    }
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        for d in tree.descendants(pid) {
            // SAFETY: kill takes two integers and touches no memory of ours. `d` was a
            // descendant of our unreaped child a moment ago; a pid reused since is the
            // one risk, as with any signal sent by pid.
            unsafe {
                libc::kill(d, sig);
            }
        }
    }
    signal_child(child, sig)
}

/// Every process's children, as read once from each `/proc/PID/stat` (Linux; empty
/// elsewhere).
#[derive(Debug, Default)]
pub struct ProcessTree {
    children_of: std::collections::HashMap<libc::pid_t, Vec<libc::pid_t>>,
}

impl ProcessTree {
    /// Reads the parent of every process now running.
    pub fn scan() -> ProcessTree {
        let mut children_of: std::collections::HashMap<libc::pid_t, Vec<libc::pid_t>> =
            std::collections::HashMap::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(p) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            // "pid (comm) state ppid ...": the command may hold spaces and parentheses, so
            // the fields are read after the last ')'.
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|x| x.parse::<libc::pid_t>().ok());
            if let Some(ppid) = ppid {
                children_of.entry(ppid).or_default().push(p);
            }
        }
        ProcessTree { children_of }
    }

    /// The pids descended from `pid` at the time of the scan, deepest last.
    pub fn descendants(&self, pid: libc::pid_t) -> Vec<libc::pid_t> {
        let mut seen = std::collections::HashSet::from([pid]);
        let mut found: Vec<libc::pid_t> = Vec::new();
        let mut next = 0;
        let mut parents = vec![pid];
        while next < parents.len() {
            let q = parents[next];
            next += 1;
            for &p in self.children_of.get(&q).map_or(&[][..], Vec::as_slice) {
                if seen.insert(p) {
                    found.push(p);
                    parents.push(p);
                }
            }
        }
        found
    }
}

/// The signals [`StopSignals`] catches: SIGINT (Ctrl-C), SIGTERM and SIGHUP (the terminal
/// went away), the ones that ask a process to stop.
pub const STOP_SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The first stop signal caught while a [`StopSignals`] was held (0: none).
static FIRST_CAUGHT: AtomicI32 = AtomicI32::new(0);
/// How many stop signals were caught while a [`StopSignals`] was held.
static TIMES_CAUGHT: AtomicUsize = AtomicUsize::new(0);

/// The live [`StopSignals`] holds, and the dispositions the first one replaced.
struct Holds {
    count: usize,
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

static HOLDS: Mutex<Holds> = Mutex::new(Holds {
    count: 0,
    previous: Vec::new(),
});

/// The handler of the stop signals. It only updates two lock-free atomics, which is
/// async-signal-safe: no allocation, no lock, no I/O.
extern "C" fn record_stop_signal(sig: libc::c_int) {
    let _ = FIRST_CAUGHT.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    TIMES_CAUGHT.fetch_add(1, Ordering::SeqCst);
}

/// A hold on the stop signals ([`STOP_SIGNALS`]) for a process that must clean up before
/// it stops, as a launcher must stop its children. While any hold is alive, a stop signal
/// does not end the process: it is recorded, and the holder polls [`StopSignals::caught`]
/// (a flag, no self-pipe: the handler only stores into atomics). A signal that was
/// ignored when the first hold was taken (`nohup`'s SIGHUP, the SIGINT of a shell's
/// background job) stays ignored. When the last hold drops, the dispositions it replaced
/// come back. Holds taken at the same time (several launches in one process) share the
/// record: a signal stops them all.
#[derive(Debug)]
pub struct StopSignals {
    _private: (),
}

impl StopSignals {
    /// Takes a hold, installing the handler if this is the only hold. Fails only when the
    /// system refuses a handler (then nothing is changed).
    pub fn catch() -> std::io::Result<StopSignals> {
        let mut holds = HOLDS.lock().unwrap_or_else(|p| p.into_inner());
        if holds.count == 0 {
            FIRST_CAUGHT.store(0, Ordering::SeqCst);
            TIMES_CAUGHT.store(0, Ordering::SeqCst);
            let mut previous = Vec::new();
            for sig in STOP_SIGNALS {
                match install(sig) {
                    Ok(Some(old)) => previous.push((sig, old)),
                    Ok(None) => {}
                    Err(e) => {
                        restore(&previous);
                        return Err(e);
                    }
                }
            }
            holds.previous = previous;
        }
        holds.count += 1;
        Ok(StopSignals { _private: () })
    }

    /// The first stop signal caught since the hold was taken (with other holds alive
    /// then, since the earliest of them), if any.
    pub fn caught(&self) -> Option<i32> {
        match FIRST_CAUGHT.load(Ordering::SeqCst) {
            0 => None,
            sig => Some(sig),
        }
    }

    /// How many stop signals were caught so far (a second one can mean "stop now").
    pub fn times(&self) -> usize {
        TIMES_CAUGHT.load(Ordering::SeqCst)
    }
}

impl Drop for StopSignals {
    fn drop(&mut self) {
        let mut holds = HOLDS.lock().unwrap_or_else(|p| p.into_inner());
        holds.count -= 1;
        if holds.count == 0 {
            let previous = std::mem::take(&mut holds.previous);
            restore(&previous);
        }
    }
}

/// Gives the stop signals ([`STOP_SIGNALS`]) their default disposition in this process:
/// what a program started with them ignored (by `nohup`, or as a background job of a
/// script, which ignores SIGINT) does when it means to take them after all;
/// [`StopSignals::catch`] otherwise leaves an ignored signal ignored.
pub fn default_stop_signals() -> std::io::Result<()> {
    for sig in STOP_SIGNALS {
        // SAFETY: signal() with SIG_DFL only changes the disposition of `sig`; no handler
        // of ours is involved.
        if unsafe { libc::signal(sig, libc::SIG_DFL) } == libc::SIG_ERR {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Installs [`record_stop_signal`] for `sig` and returns the disposition it replaced, or
/// `None` (and changes nothing) when `sig` is ignored.
fn install(sig: libc::c_int) -> std::io::Result<Option<libc::sigaction>> {
    // SAFETY: an all-zero sigaction is a valid value of the plain C struct (SIG_DFL, no
    // flags, an empty mask); sigaction only reads `new` and writes `old`, both live locals
    // of the right type, and sigemptyset writes only the mask it is given. The handler
    // installed is async-signal-safe (see `record_stop_signal`).
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if old.sa_sigaction == libc::SIG_IGN {
            return Ok(None);
        }
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = record_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // Restarted system calls: a signal must not fail a read or a wait of the process.
        new.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut new.sa_mask);
        if libc::sigaction(sig, &new, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Some(old))
    }
}

/// Puts back the dispositions [`install`] replaced.
fn restore(previous: &[(libc::c_int, libc::sigaction)]) {
    for (sig, old) in previous {
        // SAFETY: `old` is a disposition sigaction itself returned for `sig`; sigaction
        // only reads it.
        unsafe {
            libc::sigaction(*sig, old, std::ptr::null_mut());
        }
    }
}

/// How [`wait_until`] left a child.
#[derive(Debug)]
pub enum Reaped {
    /// It ended by itself before the deadline.
    Ended(ExitStatus),
    /// It was still running at the deadline and was killed; its status after the kill.
    Killed(Option<ExitStatus>),
    /// Its state could not be read; it was killed (and reaped) to leave nothing behind.
    Failed(std::io::Error),
}

/// Waits for `child` until `deadline`, checking every few milliseconds, and kills it if it
/// is still running then.
pub fn wait_until(child: &mut Child, deadline: Instant) -> Reaped {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Reaped::Ended(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                return Reaped::Killed(child.wait().ok());
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Reaped::Failed(e);
            }
        }
    }
}
