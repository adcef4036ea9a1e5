//! Process-level calls the safe crates need and may not make themselves: ending the
//! process at once, and tying a child process's life to its parent's; and the one way the
//! crates wait for a child with a deadline ([`wait_until`]).

use std::process::{Child, Command, ExitStatus};
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
/// parent is already gone when it starts. A launcher that is killed, even with SIGKILL,
/// then leaves no process of its job running on. Call `spawn` from a thread that outlives
/// the child (the kernel ties the signal to the spawning thread, not to the process).
pub fn die_with_parent(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: getpid is async-signal-safe and reads nothing of ours.
        let parent = unsafe { libc::getpid() };
        let hook = move || -> std::io::Result<()> {
            // SAFETY: prctl, getppid and _exit are async-signal-safe system calls, allowed
            // between fork and exec; they read only their integer arguments.
            unsafe {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent died before the line above took effect: no signal will come.
                if libc::getppid() != parent {
                    libc::_exit(143);
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
    let _ = cmd;
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
