//! A store shared by the threads of one process (tests, single-process runs).

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::{cancel, store_error, KvStore, Rendezvous};
use rpjrt::{Code, Result};

/// The map of a store: values are shared, so that a reader copies a value after letting go
/// of the lock, and a writer copies its value before taking it (a copy of hundreds of
/// megabytes under the lock held every other thread, and a fork at that moment left the
/// child with a lock no thread of its would ever release).
pub(crate) type Map = HashMap<String, Arc<[u8]>>;

/// A [`KvStore`] in this process's memory. Clone an `Arc` of it into each thread.
///
/// A store belongs to the process that made it: its threads share it. In a process forked
/// from that one (`fork()` without `exec`), which has a copy that no other process sees and
/// whose lock a thread of the parent may have held at the fork, every call that reaches
/// the store (`set`, `get`, `try_get`, `delete`, `barrier`) is refused with
/// `FAILED_PRECONDITION` naming the fork ([`InMemoryStore::check_not_forked`]), and a drop
/// there leaves the copy alone.
pub struct InMemoryStore {
    map: Mutex<Map>,
    changed: Condvar,
    /// The fork generation and id of the process that made the store.
    origin: (u32, u32),
}

impl Default for InMemoryStore {
    fn default() -> InMemoryStore {
        InMemoryStore::new()
    }
}

impl InMemoryStore {
    /// An empty store.
    pub fn new() -> InMemoryStore {
        InMemoryStore {
            map: Mutex::new(HashMap::new()),
            changed: Condvar::new(),
            origin: (rpjrt::fork_generation(), std::process::id()),
        }
    }

    /// The number of keys set. In a process forked from the one that made the store, 0:
    /// the copy there is refused every use ([`InMemoryStore::check_not_forked`]).
    pub fn len(&self) -> usize {
        if self.forked() {
            return 0;
        }
        self.lock().len()
    }

    /// Whether no key is set (see [`InMemoryStore::len`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `FAILED_PRECONDITION` in a process forked from the one that made this store, which
    /// every call refuses there: the store is shared by the threads of one process, a
    /// fork's copy is seen by no other process, and a thread of the parent may have held
    /// its lock at the fork (the child would wait for it for ever). `Ok` in the process
    /// that made it.
    pub fn check_not_forked(&self) -> Result<()> {
        if !self.forked() {
            return Ok(());
        }
        Err(store_error(
            Code::FailedPrecondition,
            format!(
                "the in-memory key-value store was made by process {}, and this process \
                 (pid {}) is a fork of it: the store is shared by the threads of the process \
                 that made it, a fork has a copy no other process sees, and a thread of the \
                 parent may have held its lock at the fork, so it cannot be used here: make a \
                 new store in this process instead",
                self.origin.1,
                std::process::id()
            ),
        ))
    }

    fn forked(&self) -> bool {
        rpjrt::fork_generation() != self.origin.0
    }

    fn lock(&self) -> MutexGuard<'_, Map> {
        // A panic while holding the lock cannot leave the map half-updated (each update is
        // one insert), so a poisoned lock is still usable.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for InMemoryStore {
    fn drop(&mut self) {
        if self.forked() {
            // A thread of the parent may have been changing the map at the fork: it is
            // let go of as it is, never walked.
            let map = self.map.get_mut().unwrap_or_else(|p| p.into_inner());
            std::mem::forget(std::mem::take(map));
        }
    }
}

/// Waits on `changed` until `key` is in the map behind `guard`, or until `timeout`, or
/// until `stop()` says so (looked at least every 100 ms). Shared by the in-memory store and
/// the TCP store's server.
pub(crate) fn wait_for_key(
    mut guard: MutexGuard<'_, Map>,
    changed: &Condvar,
    key: &str,
    timeout: Duration,
    stop: &dyn Fn() -> bool,
) -> Option<Arc<[u8]>> {
    let deadline = crate::deadline_after(timeout);
    loop {
        if let Some(v) = guard.get(key) {
            return Some(Arc::clone(v));
        }
        let now = Instant::now();
        if now >= deadline || stop() {
            return None;
        }
        // Wake at least every 100 ms so a stop request is seen promptly.
        let wait = (deadline - now).min(Duration::from_millis(100));
        guard = changed
            .wait_timeout(guard, wait)
            .map(|(g, _)| g)
            .unwrap_or_else(|p| p.into_inner().0);
    }
}

pub(crate) fn timeout_error(key: &str, timeout: Duration) -> rpjrt::Error {
    store_error(
        Code::DeadlineExceeded,
        format!(
            "key {} was not set within {}",
            crate::shown(key),
            crate::duration_text(timeout)
        ),
    )
}

impl Rendezvous for InMemoryStore {
    fn barrier(&self, name: &str, pid: usize, n: usize, timeout: Duration) -> Result<()> {
        // Before the barrier's own bookkeeping (whose locks a fork may have copied held).
        self.check_not_forked()?;
        crate::barrier_with(
            self,
            self as *const Self as *const () as usize,
            name,
            pid,
            n,
            timeout,
            &crate::Hooks {
                delete: Some(&|k: &str| self.delete(k)),
                ..crate::Hooks::plain(name)
            },
        )
    }

    fn delete(&self, key: &str) -> Result<bool> {
        self.check_not_forked()?;
        // The value is let go of after the lock.
        let old = self.lock().remove(key);
        Ok(old.is_some())
    }
}

impl KvStore for InMemoryStore {
    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        self.check_not_forked()?;
        let (key, value): (String, Arc<[u8]>) = (key.to_string(), Arc::from(value));
        // The value replaced is let go of after the lock.
        let old = self.lock().insert(key, value);
        self.changed.notify_all();
        drop(old);
        Ok(())
    }

    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>> {
        self.check_not_forked()?;
        cancel::check()?;
        let v = wait_for_key(self.lock(), &self.changed, key, timeout, &cancel::cancelled);
        match v {
            Some(v) => Ok(v.to_vec()),
            None if cancel::cancelled() => Err(cancel::cancelled_error()),
            None => Err(timeout_error(key, timeout)),
        }
    }

    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.check_not_forked()?;
        let v = self.lock().get(key).cloned();
        Ok(v.map(|v| v.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn set_get_try_get() {
        let s = InMemoryStore::new();
        assert_eq!(s.try_get("a").unwrap(), None);
        s.set("a", b"1").unwrap();
        assert_eq!(s.get("a", Duration::from_millis(1)).unwrap(), b"1");
        assert_eq!(s.try_get("a").unwrap().as_deref(), Some(&b"1"[..]));
        let e = s.get("b", Duration::from_millis(20)).unwrap_err();
        assert_eq!(e.code(), Code::DeadlineExceeded);
        assert!(e.to_string().contains("\"b\""), "{e}");
    }

    #[test]
    fn a_long_key_or_barrier_name_is_shown_short() {
        // The whole key went into the message: a 64 MiB key made a 64 MiB message.
        let s = InMemoryStore::new();
        let key = "k".repeat(1 << 20);
        let e = s
            .get(&key, Duration::from_millis(10))
            .unwrap_err()
            .to_string();
        assert!(e.len() < 200, "{} bytes", e.len());
        assert!(e.contains("\"kkkk") && e.contains("1048576 bytes"), "{e}");
        let e = s
            .barrier(&key, 0, 2, Duration::from_millis(50))
            .unwrap_err()
            .to_string();
        assert!(e.len() < 300, "{} bytes", e.len());
        assert!(e.contains("1048576 bytes"), "{e}");
        // A short key is shown whole, as before.
        assert_eq!(crate::shown("b"), "\"b\"");
    }

    #[test]
    fn get_waits_for_a_later_set() {
        let s = Arc::new(InMemoryStore::new());
        let s2 = Arc::clone(&s);
        let t = std::thread::spawn(move || s2.get("k", Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(20));
        s.set("k", b"v").unwrap();
        assert_eq!(t.join().unwrap().unwrap(), b"v");
    }

    #[test]
    fn barrier_names_the_missing_process() {
        let s = Arc::new(InMemoryStore::new());
        let handles: Vec<_> = [0usize, 2]
            .into_iter()
            .map(|p| {
                let s = Arc::clone(&s);
                std::thread::spawn(move || s.barrier("b", p, 4, Duration::from_millis(200)))
            })
            .collect();
        for h in handles {
            let e = h.join().unwrap().unwrap_err();
            assert_eq!(e.code(), Code::DeadlineExceeded);
            let m = e.to_string();
            assert!(m.contains("processes 1, 3 of 4"), "{m}");
        }
    }

    #[test]
    fn a_huge_job_gets_a_short_message_quickly() {
        // One process of a million: the others are named as runs, a bounded number looked
        // up (the message was megabytes long, one id per missing process).
        let s = InMemoryStore::new();
        s.set("rpjrt:barrier:b:0:7", b"1000000").unwrap();
        let e = s
            .barrier("b", 0, 1_000_000, Duration::from_millis(50))
            .unwrap_err()
            .to_string();
        assert!(e.len() < 400, "{} bytes: {e}", e.len());
        assert!(e.contains("processes 1-6, 8-10001 of 1000000"), "{e}");
        assert!(
            e.contains("989998 later processes were not looked up"),
            "{e}"
        );
        assert_eq!(crate::id_runs(&[1, 2, 4, 6, 7, 8]), "1, 2, 4, 6-8");
        let many: Vec<usize> = (0..100).map(|i| i * 2).collect();
        assert!(
            crate::id_runs(&many).ends_with("and 80 more"),
            "{}",
            crate::id_runs(&many)
        );
    }

    #[test]
    fn a_world_of_billions_times_out_on_time() {
        // The count of processes not looked up was found by walking them all: with
        // 4 billion a 50 ms barrier took minutes to report its timeout.
        let s = InMemoryStore::new();
        let n = 4_000_000_000usize;
        let t0 = std::time::Instant::now();
        let e = s
            .barrier("b", 5, n, Duration::from_millis(50))
            .unwrap_err()
            .to_string();
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert!(e.contains("processes 0-4, 6-10001 of 4000000000"), "{e}");
        // n - 1 others: 0, waited for, then 10000 looked up (1 to 10001, without 5).
        assert!(
            e.contains("3999989998 later processes were not looked up"),
            "{e}"
        );
    }

    #[test]
    fn barrier_completes_with_everyone() {
        let s = Arc::new(InMemoryStore::new());
        let handles: Vec<_> = (0..4)
            .map(|p| {
                let s = Arc::clone(&s);
                std::thread::spawn(move || s.barrier("b", p, 4, Duration::from_secs(10)))
            })
            .collect();
        for h in handles {
            h.join().unwrap().unwrap();
        }
    }

    #[test]
    fn a_barrier_name_used_again_waits_again() {
        let s = Arc::new(InMemoryStore::new());
        let t = Duration::from_secs(10);
        let peer = {
            let s = Arc::clone(&s);
            std::thread::spawn(move || s.barrier("b", 1, 2, t))
        };
        s.barrier("b", 0, 2, t).unwrap();
        peer.join().unwrap().unwrap();
        // The second use of "b" must wait for process 1 again, and name it.
        let e = s
            .barrier("b", 0, 2, Duration::from_millis(100))
            .unwrap_err();
        assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
        assert!(e.to_string().contains("process 1 of 2"), "{e}");
        // Process 1's second use meets process 0's second (already arrived), and a
        // third round meets again.
        s.barrier("b", 1, 2, t).unwrap();
        let peer = {
            let s = Arc::clone(&s);
            std::thread::spawn(move || s.barrier("b", 1, 2, t))
        };
        s.barrier("b", 0, 2, t).unwrap();
        peer.join().unwrap().unwrap();
    }

    #[test]
    fn eight_threads_a_thousand_keys_each() {
        let s = Arc::new(InMemoryStore::new());
        crate::tests_support::hammer(|_| Arc::clone(&s) as Arc<dyn KvStore>);
    }
}
