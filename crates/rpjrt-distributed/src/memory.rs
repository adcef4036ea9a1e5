//! A store shared by the threads of one process (tests, single-process runs).

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::{store_error, KvStore, Rendezvous};
use rpjrt::{Code, Result};

/// A [`KvStore`] in this process's memory. Clone an `Arc` of it into each thread.
#[derive(Default)]
pub struct InMemoryStore {
    map: Mutex<HashMap<String, Vec<u8>>>,
    changed: Condvar,
}

impl InMemoryStore {
    /// An empty store.
    pub fn new() -> InMemoryStore {
        InMemoryStore::default()
    }

    /// The number of keys set.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no key is set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Vec<u8>>> {
        // A panic while holding the lock cannot leave the map half-updated (each update is
        // one insert), so a poisoned lock is still usable.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Waits on `changed` until `key` is in the map behind `guard`, or until `timeout`.
/// Shared by the in-memory store and the TCP store's server.
pub(crate) fn wait_for_key(
    mut guard: MutexGuard<'_, HashMap<String, Vec<u8>>>,
    changed: &Condvar,
    key: &str,
    timeout: Duration,
    stop: &dyn Fn() -> bool,
) -> Option<Vec<u8>> {
    let deadline = crate::deadline_after(timeout);
    loop {
        if let Some(v) = guard.get(key) {
            return Some(v.clone());
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

impl Rendezvous for InMemoryStore {}

impl KvStore for InMemoryStore {
    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        self.lock().insert(key.to_string(), value.to_vec());
        self.changed.notify_all();
        Ok(())
    }

    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>> {
        let v = wait_for_key(self.lock(), &self.changed, key, timeout, &|| false);
        v.ok_or_else(|| timeout_error(key, timeout))
    }

    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.lock().get(key).cloned())
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
