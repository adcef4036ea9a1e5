//! Ending a store call from another thread: [`Cancel`].
//!
//! A wait in a store (a `get`, a barrier, a connect that retries, the join of
//! `TcpStore::from_env`) may be given up on by its caller (Python's Ctrl-C). Left alone, the
//! call went on in the background until its own timeout (for ever with an endless one),
//! holding a thread, a connection and, for a barrier, its place at the barrier. A call made
//! inside [`Cancel::run`] ends soon after [`Cancel::cancel`] instead: a wait on a condition
//! looks at the token between its slices (at most 100 ms apart), and a call waiting on a TCP
//! connection has its connection shut down at once.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rpjrt::{Code, Error, Result};

/// A token that ends the store calls made inside [`Cancel::run`] once [`Cancel::cancel`] is
/// called (from any thread). A cancelled call fails with `CANCELLED`; a barrier that is
/// cancelled takes its arrival back and gives back its use, so calling it again waits at
/// the same generation (see [`crate::Rendezvous::barrier`]). A clone is the same token.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use rpjrt_distributed::{Cancel, InMemoryStore, KvStore};
///
/// let store = Arc::new(InMemoryStore::new());
/// let cancel = Cancel::new();
/// let (s, c) = (Arc::clone(&store), cancel.clone());
/// let waiter = std::thread::spawn(move || c.run(|| s.get("never", Duration::MAX)));
/// cancel.cancel();
/// let e = waiter.join().unwrap().unwrap_err();
/// assert_eq!(e.code(), rpjrt::Code::Cancelled);
/// ```
#[derive(Clone, Default)]
pub struct Cancel(Arc<Inner>);

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    /// The connections calls inside [`Cancel::run`] wait on now, by number.
    sockets: Mutex<HashMap<u64, TcpStream>>,
    next: AtomicU64,
}

thread_local! {
    /// The token of the [`Cancel::run`] this thread is inside, if any.
    static CURRENT: RefCell<Option<Cancel>> = const { RefCell::new(None) };
}

/// Puts the previous token back when a [`Cancel::run`] or [`shielded`] ends (a panic too).
struct Restore(Option<Cancel>);

impl Drop for Restore {
    fn drop(&mut self) {
        let previous = self.0.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

impl Cancel {
    /// A token not cancelled yet.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Ends the calls made inside [`Cancel::run`] with this token, at once for a call
    /// waiting on a connection and within 100 ms for one waiting on a condition; every
    /// later call inside it fails at once. Idempotent.
    pub fn cancel(&self) {
        self.0.cancelled.store(true, Ordering::Release);
        for s in self.sockets().values() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Whether [`Cancel::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::Acquire)
    }

    /// Runs `f` on this thread with this token: the store calls `f` makes end once the
    /// token is cancelled. Nests: the token of an enclosing `run` is restored afterwards.
    pub fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        let previous = CURRENT.with(|c| c.borrow_mut().replace(self.clone()));
        let _restore = Restore(previous);
        f()
    }

    fn sockets(&self) -> std::sync::MutexGuard<'_, HashMap<u64, TcpStream>> {
        self.0.sockets.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cancel(cancelled: {})", self.is_cancelled())
    }
}

/// The token of the [`Cancel::run`] this thread is inside.
fn current() -> Option<Cancel> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Whether this thread is inside a [`Cancel::run`] whose token was cancelled.
pub(crate) fn cancelled() -> bool {
    CURRENT.with(|c| c.borrow().as_ref().is_some_and(Cancel::is_cancelled))
}

/// `CANCELLED` when this thread's call was cancelled ([`cancelled`]).
pub(crate) fn check() -> Result<()> {
    if cancelled() {
        return Err(cancelled_error());
    }
    Ok(())
}

/// The error of a call ended by [`Cancel::cancel`].
pub(crate) fn cancelled_error() -> Error {
    crate::store_error(
        Code::Cancelled,
        "the call was cancelled (interrupted) before it ended",
    )
}

/// Whether `e` is the error of a cancelled call, or this thread's token is cancelled
/// (whatever error a cut connection surfaced as).
pub(crate) fn ended_by_cancel(e: &Error) -> bool {
    e.code() == Code::Cancelled || cancelled()
}

/// Runs `f` outside any token: the bookkeeping a cancelled call does on its way out (a
/// barrier giving its use back, a peer's goodbye) is not itself cancelled.
pub(crate) fn shielded<T>(f: impl FnOnce() -> T) -> T {
    let previous = CURRENT.with(|c| c.borrow_mut().take());
    let _restore = Restore(previous);
    f()
}

/// A connection a call waits on, registered with this thread's token so that cancelling
/// it shuts the connection down; unregistered on drop.
pub(crate) struct Watch(Option<(Cancel, u64)>);

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some((c, id)) = self.0.take() {
            c.sockets().remove(&id);
        }
    }
}

/// Registers `stream` with this thread's token (if any) for as long as the returned
/// [`Watch`] lives; `CANCELLED` when the token is cancelled already. The flag is read
/// under the lock that [`Cancel::cancel`] takes after setting it: either the cancel finds
/// the connection registered and shuts it down, or this sees the flag.
pub(crate) fn watch(stream: &TcpStream) -> Result<Watch> {
    let Some(c) = current() else {
        return Ok(Watch(None));
    };
    let clone = stream
        .try_clone()
        .map_err(|e| crate::store_error(Code::Unavailable, format!("clone a connection: {e}")))?;
    let id = c.0.next.fetch_add(1, Ordering::Relaxed);
    {
        let mut sockets = c.sockets();
        if c.is_cancelled() {
            return Err(cancelled_error());
        }
        sockets.insert(id, clone);
    }
    Ok(Watch(Some((c, id))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_sets_the_token_for_its_call_only_and_nests() {
        assert!(!cancelled());
        let outer = Cancel::new();
        let inner = Cancel::new();
        inner.cancel();
        outer.run(|| {
            assert!(!cancelled());
            inner.run(|| {
                assert!(cancelled());
                assert_eq!(check().unwrap_err().code(), Code::Cancelled);
                shielded(|| assert!(!cancelled()));
                assert!(cancelled());
            });
            assert!(!cancelled());
        });
        assert!(current().is_none());
        // A panic inside run restores the token too.
        let r = std::panic::catch_unwind(|| inner.run(|| panic!("inside")));
        assert!(r.is_err());
        assert!(current().is_none());
    }

    #[test]
    fn a_cancel_shuts_down_the_connections_being_waited_on() {
        use std::io::Read;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _server_side = l.accept().unwrap();
        let c = Cancel::new();
        let c2 = c.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            c2.cancel();
        });
        let read = c.run(|| {
            let _w = watch(&s).unwrap();
            let mut b = [0u8; 1];
            s.read(&mut b)
        });
        t.join().unwrap();
        // The shut-down connection reads as closed (or failed), not as data.
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        assert!(c.0.sockets.lock().unwrap().is_empty());
        // Watching under a cancelled token is refused.
        let e = c.run(|| watch(&s).err()).unwrap();
        assert_eq!(e.code(), Code::Cancelled);
    }
}
