//! A key-value store over TCP: process 0 hosts it, the other processes connect to it.
//!
//! Protocol (all integers big-endian). Every message is a frame: a `u32` length `N`
//! (at most [`MAX_FRAME`]) followed by `N` bytes whose first byte is the operation.
//!
//! | request | body after the op byte | replies |
//! |---|---|---|
//! | `0x01` hello | magic `RPJRTKV1`, `u32` process id, token bytes | ok, refused |
//! | `0x02` set | `u32` key length, key, value | ok |
//! | `0x03` get | `u64` timeout in ms, key | ok + value, timeout |
//! | `0x04` try-get | key | ok + value, not-found |
//! | `0x05` peer | `u32` process id | ok + one byte: 0 never joined, 1 connected, 2 gone, + `u32` open connections |
//! | `0x06` delete | key | ok + one byte: 1 it was set, 0 it was not |
//!
//! Replies: `0x00` ok (+ value), `0x01` not found, `0x02` timeout, `0x03` refused (+ UTF-8
//! reason), `0x04` error (+ UTF-8 message), `0x05` shutting down (+ UTF-8 reason; to a
//! hello only). A connection must say hello first, with the job's token; a wrong token or
//! magic gets `refused` and the connection is closed. A host in
//! [`TcpStore::shutdown_after`] answers the hello of a process that already left it with
//! `shutting down`, which a connecting peer takes as a host not up yet: it retries, and so
//! reaches the next store on that address.

use std::cell::Cell;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rpjrt::{Code, Error, Result};

use crate::memory::{timeout_error, wait_for_key, Map};
use crate::{
    barrier_with, cancel, invalid, shown, store_error, Hooks, KvStore, LaunchEnv, Rendezvous,
};

/// The 8 bytes a client's hello starts with (protocol name and version).
pub const PROTOCOL_MAGIC: &[u8; 8] = b"RPJRTKV1";

/// The largest frame either side accepts (64 MiB).
const MAX_FRAME: usize = 64 << 20;
/// The most bytes of key plus value one entry may hold: what is left of a frame after a
/// set request's op byte and key length, so that every entry any writer stores (the host
/// itself included) can be sent as a set and served back as a reply.
pub const MAX_ENTRY_BYTES: usize = MAX_FRAME - 5;
/// The longest key: what a get request leaves of a frame after its op byte and its `u64`
/// timeout, so that every key any writer stores can be asked for by every peer. Every
/// operation (set, get, try-get, barrier) refuses a longer key at once with
/// `INVALID_ARGUMENT`, on the host as on a peer.
pub const MAX_KEY_BYTES: usize = MAX_FRAME - 9;
/// The longest answer to a hello an rpjrt host sends (`refused` and its reason): a longer
/// one comes from another service, and is not waited for.
const MAX_HELLO_REPLY: usize = 4096;
/// How often a connection's thread waiting for a key looks whether its client hung up.
const HANG_UP_CHECK: Duration = Duration::from_millis(50);
/// The barrier [`TcpStore::from_env`] holds so that it returns once every process joined.
const JOIN_BARRIER: &str = "rpjrt:join";
/// How long the host waits for a new connection's hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// The token bytes of a hello read in full even when longer than the job's token.
const HELLO_TOKEN_READ: usize = 4096;
/// The longest wait a get may ask the host for (one day).
const MAX_WAIT_MS: u64 = 24 * 3600 * 1000;

const OP_HELLO: u8 = 0x01;
const OP_SET: u8 = 0x02;
const OP_GET: u8 = 0x03;
const OP_TRY_GET: u8 = 0x04;
const OP_PEER: u8 = 0x05;
const OP_DELETE: u8 = 0x06;
/// A client's claim of its process id, sent once on its presence connection with its OS
/// process's nonce ([`process_nonce`]): the host refuses it while another OS process
/// (another nonce) holds the id with a presence connection still open, so two live
/// processes cannot share an id (one process may hold several clients of its id).
const OP_CLAIM: u8 = 0x07;

const R_OK: u8 = 0x00;
const R_NOT_FOUND: u8 = 0x01;
const R_TIMEOUT: u8 = 0x02;
const R_REFUSED: u8 = 0x03;
const R_ERROR: u8 = 0x04;
const R_CLOSING: u8 = 0x05;

fn write_frame(w: &mut impl Write, parts: &[&[u8]]) -> io::Result<()> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("message of {len} bytes exceeds the {MAX_FRAME}-byte limit"),
        ));
    }
    let mut buf = Vec::with_capacity(4 + len);
    buf.extend_from_slice(&(len as u32).to_be_bytes());
    for p in parts {
        buf.extend_from_slice(p);
    }
    w.write_all(&buf)?;
    w.flush()
}

fn read_frame(r: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut head = [0u8; 4];
    r.read_exact(&mut head)?;
    let mut buf = vec![0u8; frame_len(head, "frame")?];
    r.read_exact(&mut buf)?;
    Ok(buf)
}

/// The length a frame's 4-byte head announces, or why no frame of ours starts so (naming
/// what it starts with when that is text: another service answering in its own protocol).
fn frame_len(head: [u8; 4], what: &str) -> io::Result<usize> {
    let len = u32::from_be_bytes(head) as usize;
    if len != 0 && len <= MAX_FRAME {
        return Ok(len);
    }
    let looks = if head.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!(
            "; it starts with {:?}: another service, not an rpjrt key-value store, answers \
             there",
            String::from_utf8_lossy(&head)
        )
    } else {
        String::new()
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{what} of {len} bytes (allowed 1..={MAX_FRAME}){looks}"),
    ))
}

/// A request's key, or `None` once the peer has been told that it is not UTF-8 (the
/// connection stays open: closing it told the peer nothing).
fn utf8<'a>(
    stream: &mut TcpStream,
    shared: &Shared,
    id: u64,
    b: &'a [u8],
) -> io::Result<Option<&'a str>> {
    match std::str::from_utf8(b) {
        Ok(key) => Ok(Some(key)),
        Err(_) => reply(stream, shared, id, &[&[R_ERROR], b"the key is not UTF-8"]).map(|()| None),
    }
}

/// Resolves `addr` ("host:port"), preferring IPv4.
fn resolve(addr: &str) -> Result<SocketAddr> {
    resolve_once(addr)
        .map_err(|e| invalid(format!("cannot resolve store address {}: {e}", shown(addr))))
}

/// Resolves `addr` ("host:port"), preferring IPv4, retrying until `deadline` while the
/// host name does not resolve (a name that enters DNS only once its host is up: a
/// Kubernetes headless service, some Slurm set-ups), as an unreachable host is retried.
/// An address that cannot be one (no port, a bad port) fails at once.
fn resolve_until(addr: &str, deadline: Instant, timeout: Duration) -> Result<SocketAddr> {
    // A name no DNS can ever hold is the user's input, refused at once.
    if let Some(why) = addr
        .rsplit_once(':')
        .and_then(|(host, _)| impossible_host_name(host))
    {
        return Err(invalid(format!(
            "cannot resolve store address {}: {why}",
            shown(addr)
        )));
    }
    loop {
        match resolve_once(addr) {
            Ok(sock) => return Ok(sock),
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                return Err(invalid(format!(
                    "cannot resolve store address {}: {e}",
                    shown(addr)
                )))
            }
            Err(e) if Instant::now() >= deadline => {
                let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
                return Err(store_error(
                    Code::DeadlineExceeded,
                    format!(
                        "the store host's name {} in {} did not resolve within {}; last \
                         error: {e}",
                        shown(host),
                        shown(addr),
                        crate::duration_text(timeout)
                    ),
                ));
            }
            Err(_) => {
                let left = deadline.saturating_duration_since(Instant::now());
                std::thread::sleep(left.min(Duration::from_millis(100)));
            }
        }
    }
}

/// Why `host` can never be resolved (longer than 253 bytes, a label empty or longer than
/// 63 bytes, as DNS allows no other), or `None` for an IP address or a possible name.
fn impossible_host_name(host: &str) -> Option<&'static str> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<std::net::IpAddr>().is_ok() {
        return None;
    }
    let name = host.strip_suffix('.').unwrap_or(host);
    if name.len() > 253 {
        return Some("the host name is longer than the 253 bytes a DNS name may have");
    }
    if name.split('.').any(|l| l.is_empty() || l.len() > 63) {
        return Some("a part of the host name is empty or longer than the 63 bytes DNS allows");
    }
    None
}

/// One try at resolving `addr`: a name that resolves to nothing is an error too (not
/// [`io::ErrorKind::InvalidInput`]: it may resolve later).
fn resolve_once(addr: &str) -> io::Result<SocketAddr> {
    let all: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
    all.iter()
        .find(|a| a.is_ipv4())
        .or_else(|| all.first())
        .copied()
        .ok_or_else(|| io::Error::other("the name resolves to no address"))
}

// ------------------------------------------------------------------------------ the host

struct Shared {
    map: Mutex<Map>,
    changed: Condvar,
    stop: AtomicBool,
    /// Set when [`TcpStore::shutdown_after`] begins: a process that already left is not
    /// let in again (see [`Activity::left_for_good`]).
    closing: AtomicBool,
    token: Vec<u8>,
    conns: Mutex<Vec<(TcpStream, Option<JoinHandle<()>>)>>,
    /// Per process id: its open connections, and whether any connection under the id
    /// ever made a well-formed request. An id that spoke and has no connection left is
    /// gone; one whose connections all closed without a request (a stray connection that
    /// said hello and hung up, or sent garbage) never joined.
    peers: Mutex<HashMap<u32, (usize, bool)>>,
    /// Why the host could not accept a connection (too many open files, ...) and since
    /// when, until a connection is accepted again: what a barrier on the host reports
    /// instead of peers that "did not join" ([`Shared::accept_trouble`]).
    accept_error: Mutex<Option<AcceptTrouble>>,
    /// What the joined connections did, and when each process said goodbye: what
    /// [`TcpStore::shutdown_after`] waits for.
    activity: Mutex<Activity>,
    /// The process ids claimed ([`OP_CLAIM`]): the claiming OS process's nonce and the
    /// connections it claimed on; a claim ends when the last of them closes.
    claims: Mutex<HashMap<u32, Claim>>,
}

/// The host's failures to accept connections ([`Shared::accept_failed`]).
struct AcceptTrouble {
    /// The latest episode's first failure, in words.
    why: String,
    /// When the episode began.
    first: Instant,
    /// Its latest failure.
    last: Instant,
    /// Whether an accept succeeded since that failure.
    accepted_since: bool,
}

impl AcceptTrouble {
    /// Whether the episode is over: no failure for [`ACCEPT_TROUBLE`], and an accept
    /// succeeded since.
    fn over(&self) -> bool {
        self.accepted_since && self.last.elapsed() >= ACCEPT_TROUBLE
    }
}

/// One process id's claim ([`OP_CLAIM`]): the claiming OS process's nonce, and the
/// connections it claimed on.
type Claim = (Vec<u8>, Vec<u64>);

/// How long after a process's goodbye a connection left open under its id, idle since,
/// still holds the host in [`TcpStore::shutdown_after`]: time for another client of that
/// process (one that has not closed) to make its next request, which marks the
/// connection active.
const LEFTOVER_SETTLE: Duration = Duration::from_secs(1);

/// The joined connections and the goodbyes, ordered by one event count (hellos, requests
/// and goodbyes each take the next number), so that "after the goodbye" is exact.
#[derive(Default)]
struct Activity {
    /// The last event's number.
    clock: u64,
    /// The next joined connection's number.
    next_conn: u64,
    /// The joined connections that are open, by number.
    conns: HashMap<u64, Joined>,
    /// Each process's latest goodbye: its event number and when it came.
    goodbyes: HashMap<u32, (u64, Instant)>,
}

/// A connection that said hello with the job's token.
struct Joined {
    /// The process id it said hello as.
    pid: u32,
    /// The event number of its hello, or of the start or end of its latest request.
    last: u64,
    /// Whether a request of its is being answered now (a `get` may wait long).
    busy: bool,
}

/// How much a joined connection holds the host in [`TcpStore::shutdown_after`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Hold {
    /// Not at all: its process said goodbye and it has been idle since, for at least
    /// [`LEFTOVER_SETTLE`] (a connection left open, by that process or another under its
    /// id).
    No,
    /// For now: idle since its process's goodbye, which came less than
    /// [`LEFTOVER_SETTLE`] ago. Cutting it off at the grace cuts off no call.
    Settling,
    /// Until it closes: its process has not said goodbye, or the connection said hello
    /// again (a re-join) or made a request after the goodbye, or has one in progress.
    Active,
}

impl Activity {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// How much connection `c` holds the host now.
    fn hold(&self, c: &Joined) -> Hold {
        match self.goodbyes.get(&c.pid) {
            _ if c.busy => Hold::Active,
            None => Hold::Active,
            Some(&(at, _)) if c.last > at => Hold::Active,
            Some(&(_, when)) if when.elapsed() < LEFTOVER_SETTLE => Hold::Settling,
            Some(_) => Hold::No,
        }
    }

    /// Whether process `pid` left the store for good: it said goodbye, and no connection
    /// of its is active since ([`Hold::Active`]; a second client of the process that goes
    /// on working is).
    fn left_for_good(&self, pid: u32) -> bool {
        self.goodbyes.contains_key(&pid)
            && !self
                .conns
                .values()
                .any(|c| c.pid == pid && self.hold(c) == Hold::Active)
    }

    /// The most any joined connection holds the host now.
    fn most_held(&self) -> Hold {
        self.conns
            .values()
            .map(|c| self.hold(c))
            .max()
            .unwrap_or(Hold::No)
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Map> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Sets `key`; the value it replaces is let go of after the lock.
    fn insert(&self, key: &str, value: &[u8]) {
        let (key, value): (String, Arc<[u8]>) = (key.to_string(), Arc::from(value));
        let old = self.lock().insert(key, value);
        self.changed.notify_all();
        drop(old);
    }
    /// Removes `key`; whether it was set (its value let go of after the lock).
    fn remove(&self, key: &str) -> bool {
        let old = self.lock().remove(key);
        old.is_some()
    }
    /// The value of `key`, shared (copied by the caller after the lock).
    fn value(&self, key: &str) -> Option<Arc<[u8]>> {
        self.lock().get(key).cloned()
    }
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
    fn peer_state(&self, p: u32) -> PeerState {
        self.peer_info(p).0
    }
    /// Process `p`'s state and how many connections it has open now.
    fn peer_info(&self, p: u32) -> (PeerState, usize) {
        match self.peers.lock().unwrap_or_else(|e| e.into_inner()).get(&p) {
            None | Some((0, false)) => (PeerState::NeverJoined, 0),
            Some((0, true)) => (PeerState::Gone, 0),
            Some(&(n, _)) => (PeerState::Connected, n),
        }
    }
    fn peer_delta(&self, p: u32, up: bool) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let (n, _) = peers.entry(p).or_insert((0, false));
        *n = if up { *n + 1 } else { n.saturating_sub(1) };
    }
    /// A connection of process `p` made a well-formed request: `p` has joined for real.
    fn peer_spoke(&self, p: u32) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        peers.entry(p).or_insert((0, false)).1 = true;
    }
    /// Notes that accepting a connection failed with `e`, or, with `None`, that one
    /// succeeded. Failures make one episode, from its first to its latest, until a second
    /// of none with an accept succeeding after them; the failure is still remembered after
    /// that, for a later timeout to name.
    fn accept_failed(&self, e: Option<&io::Error>) {
        let mut at = self.accept_error.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        match (e, at.as_mut()) {
            (None, Some(t)) => t.accepted_since = true,
            (None, None) => {}
            (Some(_), Some(t)) if !t.over() => {
                t.last = now;
                t.accepted_since = false;
            }
            (Some(e), _) => {
                *at = Some(AcceptTrouble {
                    why: e.to_string(),
                    first: now,
                    last: now,
                    accepted_since: false,
                })
            }
        }
    }
    /// The host's failure to accept connections (too many open files), as the error a
    /// wait on the host reports instead of blaming peers: with `lasting`, only when the
    /// episode has gone on for [`ACCEPT_TROUBLE`] and is not over (accepts still fail, or
    /// none succeeded since the last failure: the peers whose connections were dropped
    /// gave up); else whenever one failed (a peer that lost its connection, or did not
    /// join in time, is then likely this host's doing).
    fn accept_trouble(&self, lasting: bool) -> Option<Error> {
        let at = self.accept_error.lock().unwrap_or_else(|p| p.into_inner());
        let t = at.as_ref()?;
        if lasting && (t.first.elapsed() < ACCEPT_TROUBLE || t.over()) {
            return None;
        }
        let (why, first) = (&t.why, t.first);
        let limit = rpjrt_raw::files::open_files_limit()
            .map(|n| format!(" (this process may have {n} files open: `ulimit -n`)"))
            .unwrap_or_default();
        Some(store_error(
            Code::ResourceExhausted,
            format!(
                "the store host (process 0) could not accept connections: {why}{limit}, \
                 first {} ago; each peer holds 2 connections to it, each of which takes 2 of \
                 the host's file descriptors: raise the limit (`ulimit -n 65536` before \
                 starting the job) or start fewer processes",
                crate::duration_text(crate::rounded(first.elapsed()))
            ),
        ))
    }
    fn activity(&self) -> MutexGuard<'_, Activity> {
        self.activity.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Registers a connection that said hello as `pid`; returns its number.
    fn joined(&self, pid: u32) -> u64 {
        let mut a = self.activity();
        let last = a.tick();
        let id = a.next_conn;
        a.next_conn += 1;
        a.conns.insert(
            id,
            Joined {
                pid,
                last,
                busy: false,
            },
        );
        id
    }
    /// Marks connection `id` busy with a request, or returns `false` when the host has
    /// stopped: read under the lock that [`Host::stop_if_left`] sets `stop` under, so a
    /// request either holds the host or is never started.
    fn request_begins(&self, id: u64) -> bool {
        let mut a = self.activity();
        if self.stopped() {
            return false;
        }
        let now = a.tick();
        if let Some(c) = a.conns.get_mut(&id) {
            c.busy = true;
            c.last = now;
        }
        true
    }
    /// Connection `id`'s request is over (when it still was in progress: a second call
    /// changes nothing); `goodbye`: the request was process `pid`'s goodbye, which comes
    /// after the request (the connection it came on is idle since).
    fn request_ends(&self, id: u64, goodbye: Option<u32>) {
        let mut a = self.activity();
        let now = a.tick();
        if let Some(c) = a.conns.get_mut(&id).filter(|c| c.busy) {
            c.busy = false;
            c.last = now;
        }
        if let Some(p) = goodbye {
            let at = a.tick();
            a.goodbyes.insert(p, (at, Instant::now()));
        }
    }
    /// Connection `id` closed.
    fn closed(&self, id: u64) {
        self.activity().conns.remove(&id);
    }
}

/// Whether a process has joined the store and is still connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PeerState {
    NeverJoined = 0,
    Connected = 1,
    Gone = 2,
}

struct Host {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Mutex<Option<JoinHandle<()>>>,
}

/// The longest job token: a host reads a hello's token only this far, so a longer one
/// could never be presented (`random_token` makes 32 characters).
pub const MAX_TOKEN_BYTES: usize = HELLO_TOKEN_READ;

/// Refuses a token no peer could present.
fn check_token(token: &str) -> Result<()> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(invalid(format!(
            "the job token is {} bytes long; at most {MAX_TOKEN_BYTES} are accepted",
            token.len()
        )));
    }
    Ok(())
}

impl Host {
    fn bind(addr: SocketAddr, token: &str) -> Result<Host> {
        check_token(token)?;
        // Each peer costs the host 4 descriptors (2 connections, each kept with a clone
        // for shutdown): a soft limit of 1024 held about 255 peers. The hard limit is
        // usually far higher, and raising the soft one to it needs no privilege.
        rpjrt_raw::files::raise_open_files_limit();
        let listener = TcpListener::bind(addr).map_err(|e| {
            let who = match e.kind() {
                // A store this process hosts there itself is said as such, not taken for
                // another process's (it answers a hello as any host of the job does).
                io::ErrorKind::AddrInUse => {
                    hosted_here(addr).unwrap_or_else(|| who_listens(addr, token))
                }
                _ => String::new(),
            };
            store_error(
                Code::Unavailable,
                format!("cannot host the store on {addr}: {e}{who}"),
            )
        })?;
        let addr = listener.local_addr().map_err(io_err("local address"))?;
        listener
            .set_nonblocking(true)
            .map_err(io_err("set_nonblocking"))?;
        let shared = Arc::new(Shared {
            map: Mutex::new(HashMap::new()),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            token: token.as_bytes().to_vec(),
            conns: Mutex::new(Vec::new()),
            peers: Mutex::new(HashMap::new()),
            accept_error: Mutex::new(None),
            activity: Mutex::new(Activity::default()),
            claims: Mutex::new(HashMap::new()),
        });
        let s = Arc::clone(&shared);
        let accept = std::thread::Builder::new()
            .name("rpjrt-kv-accept".into())
            .spawn(move || accept_loop(listener, s))
            .map_err(io_err("spawn"))?;
        let mut hosted = HOSTED.lock().unwrap_or_else(|p| p.into_inner());
        hosted.retain(|(_, h, _)| h.upgrade().is_some_and(|h| !h.stopped()));
        hosted.push((addr, Arc::downgrade(&shared), std::process::id()));
        drop(hosted);
        Ok(Host {
            addr,
            shared,
            accept: Mutex::new(Some(accept)),
        })
    }

    /// Stops the host's service (as [`Host::shutdown`] begins to) when no joined
    /// connection holds it ([`Activity::hold`]), or, with `anyway` (the grace ran out),
    /// whatever holds it. Returns `None` while it is held and not stopped, else how much
    /// was still held when it stopped. The decision and the stop are one step under the
    /// activity lock, which a request takes to start: no request starts after the host
    /// found none in progress and before it stopped.
    ///
    /// Connections that never said hello with the job's token are not peers and are not
    /// waited for; one left open under the id of a process that said goodbye, idle since,
    /// is waited for only [`LEFTOVER_SETTLE`] after that goodbye.
    fn stop_if_left(&self, anyway: bool) -> Option<Hold> {
        let a = self.shared.activity();
        let held = a.most_held();
        if held != Hold::No && !anyway {
            return None;
        }
        self.shared.stop.store(true, Ordering::Release);
        Some(held)
    }

    fn shutdown(&self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.changed.notify_all();
        let accept = self.accept.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = accept {
            let _ = t.join();
        }
        let conns =
            std::mem::take(&mut *self.shared.conns.lock().unwrap_or_else(|p| p.into_inner()));
        for (stream, _) in &conns {
            let _ = stream.shutdown(Shutdown::Both);
        }
        for (_, t) in conns {
            if let Some(t) = t {
                let _ = t.join();
            }
        }
    }
}

/// The stores hosted in this process (and, in a forked child, in the process it was forked
/// from): the address each listens on, its state (gone once the host is dropped) and the
/// OS process id that made it. What [`hosted_here`] reads.
type Hosted = Vec<(SocketAddr, std::sync::Weak<Shared>, u32)>;
static HOSTED: Mutex<Hosted> = Mutex::new(Vec::new());

/// For a host whose address is in use: when a store this same process hosts (and has not
/// shut down) listens there, the end of its error saying so, with what to do. A second
/// `initialize` (or `TcpStore::host`) in a process whose first store is still open is
/// not "another process".
fn hosted_here(addr: SocketAddr) -> Option<String> {
    let hosted = HOSTED.lock().unwrap_or_else(|p| p.into_inner());
    let same = |a: &SocketAddr| {
        a.port() == addr.port()
            && (a.ip() == addr.ip() || a.ip().is_unspecified() || addr.ip().is_unspecified())
    };
    let (at, _, pid) = hosted
        .iter()
        .find(|(a, h, _)| same(a) && h.upgrade().is_some_and(|h| !h.stopped()))?;
    let whose = match *pid == std::process::id() {
        true => "this process hosts a store there already",
        false => "the process this one was forked from hosts a store there",
    };
    Some(format!(
        "; {whose} ({at}: one made earlier, by an earlier `initialize` or `TcpStore.host`, \
         and not shut down): shut that store down first (`Distributed.shutdown()`, \
         `TcpStore.shutdown()`), or go on using it, rather than hosting a second one"
    ))
}

/// How long a host that cannot bind its address gives the process listening there to
/// answer a hello ([`who_listens`]).
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// For a host whose address is in use: who listens there, as the end of its error. A
/// hello as process 0 with this job's token is refused by an rpjrt host of this job as the
/// host's own id ([`HOST_ID_TAKEN`]): another process hosts this job's store (id 0 given
/// twice, or an earlier run of the job is still up). Any other answer, or none, adds
/// nothing but what that means.
fn who_listens(addr: SocketAddr, token: &str) -> String {
    let mut to = addr;
    if to.ip().is_unspecified() {
        to.set_ip(match to {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    let deadline = Instant::now() + PROBE_TIMEOUT;
    let answer = TcpStream::connect_timeout(&to, PROBE_TIMEOUT).and_then(|mut s| {
        s.set_write_timeout(Some(PROBE_TIMEOUT))?;
        write_frame(
            &mut s,
            &[
                &[OP_HELLO],
                PROTOCOL_MAGIC,
                &0u32.to_be_bytes(),
                token.as_bytes(),
            ],
        )?;
        read_frame_by(&mut s, deadline, MAX_HELLO_REPLY)
    });
    match answer {
        Ok(r) if r.first() == Some(&R_REFUSED) && r[1..] == *HOST_ID_TAKEN.as_bytes() => {
            "; another process hosts this job's store there (it answered with this job's \
             token): process id 0 is used by more than one process (give exactly one process \
             id 0), or an earlier run of this job is still up"
                .to_string()
        }
        Ok(r) if r.first() == Some(&R_REFUSED) => {
            "; an rpjrt key-value store of another job (another token) listens there: give \
             this job another address"
                .to_string()
        }
        _ => "; something else listens there: give the job another address".to_string(),
    }
}

/// The host's answer to a hello as process 0 with the job's token.
const HOST_ID_TAKEN: &str = "process 0 is this store's host, which never connects to it: \
                             process id 0 is used by more than one process (a peer cannot \
                             connect as process 0)";

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while !shared.stopped() {
        match listener.accept() {
            Ok((stream, _)) => {
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_nodelay(true);
                let clone = match stream.try_clone() {
                    Ok(c) => c,
                    // Out of descriptors for the clone: said as the accept's failure.
                    Err(e) => {
                        shared.accept_failed(Some(&e));
                        drop(stream);
                        forget_finished(&shared);
                        std::thread::sleep(ACCEPT_BACKOFF);
                        continue;
                    }
                };
                shared.accept_failed(None);
                let s = Arc::clone(&shared);
                let t = std::thread::Builder::new()
                    .name("rpjrt-kv-conn".into())
                    .spawn(move || {
                        let mut stream = stream;
                        let _ = serve(&mut stream, &s);
                        // The accept loop keeps a clone for shutdown; close for real now.
                        let _ = stream.shutdown(Shutdown::Both);
                    })
                    .ok();
                let mut conns = shared.conns.lock().unwrap_or_else(|p| p.into_inner());
                // Forget finished connections so a long job does not accumulate them.
                conns.retain(|(_, t)| t.as_ref().is_some_and(|t| !t.is_finished()));
                conns.push((clone, t));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                forget_finished(&shared);
                std::thread::sleep(Duration::from_millis(10));
            }
            // Out of descriptors (EMFILE, ENFILE) or memory: noted for the host's barrier to
            // report (`Shared::accept_trouble`), and retried less often meanwhile (the
            // connection waits in the listen backlog).
            Err(e) => {
                if e.kind() != io::ErrorKind::Interrupted
                    && e.kind() != io::ErrorKind::ConnectionAborted
                {
                    shared.accept_failed(Some(&e));
                }
                forget_finished(&shared);
                std::thread::sleep(ACCEPT_BACKOFF);
            }
        }
    }
    // The listener is dropped here: nothing listens after shutdown.
}

/// The key under which a host that cannot accept connections leaves its error, for the
/// joined peers' waits (`meet`) to end with it.
const HOST_TROUBLE_KEY: &str = "rpjrt:host-cannot-accept";

/// How long the accept loop waits after a failed accept before it tries again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// How long the host's accepts must have failed, with none succeeding in between, before
/// a barrier on the host gives up with that failure ([`Shared::accept_trouble`]).
const ACCEPT_TROUBLE: Duration = Duration::from_secs(1);

/// Drops the kept clones of connections whose thread has ended, closing their sockets
/// while no new connection arrives (the accept loop polls every 10 ms): 300 closed
/// connections kept 300 sockets open until the next accept.
fn forget_finished(shared: &Shared) {
    let mut conns = shared.conns.lock().unwrap_or_else(|p| p.into_inner());
    if conns
        .iter()
        .any(|(_, t)| t.as_ref().is_none_or(|t| t.is_finished()))
    {
        conns.retain(|(_, t)| t.as_ref().is_some_and(|t| !t.is_finished()));
    }
}

/// Reads exactly `buf.len()` bytes before `deadline`: a peer that sends a byte now and then
/// cannot stretch the wait past it.
fn read_until(stream: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "hello too slow"));
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut buf[filled..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// [`read_frame`] that must end by `deadline` as a whole: a host answering a byte at a time
/// cannot stretch a call past its bound. A reply announcing more than `max` bytes (the
/// most the request can be answered with) is refused unread, naming the limit.
fn read_frame_by(stream: &mut TcpStream, deadline: Instant, max: usize) -> io::Result<Vec<u8>> {
    read_reply(stream, deadline, deadline, max).map_err(NoReply::into_io)
}

/// Why a reply did not come ([`read_reply`]).
enum NoReply {
    /// Not even its head came in time (or the read failed before it).
    Head(io::Error),
    /// Its head came, announcing this many bytes, but not the rest in time.
    Body(usize, io::Error),
    /// What came is not a reply of ours.
    Bad(io::Error),
}

impl NoReply {
    fn into_io(self) -> io::Error {
        match self {
            NoReply::Head(e) => late(e, "no answer"),
            NoReply::Body(len, e) => late(e, &format!("the {len}-byte reply did not come whole")),
            NoReply::Bad(e) => e,
        }
    }
}

/// A reply frame whose head (its length) comes by `head_by` and whose whole by `deadline`
/// (a host that does not answer is told from one whose long answer is on its way). A reply
/// announcing more than `max` bytes is refused unread, naming the limit.
fn read_reply(
    stream: &mut TcpStream,
    head_by: Instant,
    deadline: Instant,
    max: usize,
) -> std::result::Result<Vec<u8>, NoReply> {
    let mut head = [0u8; 4];
    read_until(stream, &mut head, head_by.min(deadline)).map_err(NoReply::Head)?;
    let len = frame_len(head, "a reply frame").map_err(NoReply::Bad)?;
    if len > max {
        return Err(NoReply::Bad(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "a reply frame of {len} bytes, more than the {max} bytes this request is \
                 answered with at most (is an rpjrt key-value store listening there?)"
            ),
        )));
    }
    let mut buf = vec![0u8; len];
    read_until(stream, &mut buf, deadline).map_err(|e| NoReply::Body(len, e))?;
    Ok(buf)
}

/// A read that ran out of time (`WouldBlock` or `TimedOut`, whichever the OS says) as
/// `TimedOut` saying `what` happened "in time", not as an OS error number.
fn late(e: io::Error, what: &str) -> io::Error {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{what} in time (is an rpjrt key-value store listening there?)"),
        ),
        _ => e,
    }
}

/// A connection's hello, before it is trusted: the whole frame within [`HELLO_TIMEOUT`],
/// and never more than `max` bytes (a hello holds the op byte, the magic, the process id
/// and the token). Returns the frame, or `(empty, true)` for a longer one, which is refused
/// unread: a stranger cannot make the host wait for or allocate a 64 MiB frame.
fn read_hello(stream: &mut TcpStream, max: usize) -> io::Result<(Vec<u8>, bool)> {
    let deadline = Instant::now() + HELLO_TIMEOUT;
    let mut len = [0u8; 4];
    read_until(stream, &mut len, deadline)?;
    let len = u32::from_be_bytes(len) as usize;
    // An empty frame is as malformed as a short one: refused with an answer (below).
    if len > max {
        return Ok((Vec::new(), true));
    }
    let mut hello = vec![0u8; len];
    read_until(stream, &mut hello, deadline)?;
    Ok((hello, false))
}

fn serve(stream: &mut TcpStream, shared: &Shared) -> io::Result<()> {
    // Read whole up to a few KiB, so that a client with a longer (wrong) token is told so.
    let (hello, too_long) = read_hello(stream, 13 + shared.token.len().max(HELLO_TOKEN_READ))?;
    let well_formed =
        !too_long && hello.len() >= 13 && hello[0] == OP_HELLO && &hello[1..9] == PROTOCOL_MAGIC;
    let pid = match well_formed {
        true => u32::from_be_bytes([hello[9], hello[10], hello[11], hello[12]]),
        false => 0,
    };
    let ok = well_formed && constant_time_eq(&hello[13..], &shared.token);
    // A process id a client could not have been given (connect refuses them) is refused
    // too, so peer states only ever name real processes.
    if ok && pid as usize >= crate::MAX_PROCESSES {
        let why = format!(
            "process id {pid} is out of range (at most {})",
            crate::MAX_PROCESSES - 1
        );
        let _ = write_frame(stream, &[&[R_REFUSED], why.as_bytes()]);
        return Ok(());
    }
    // Process 0 is the host itself, which never connects: a peer saying it is process 0
    // shares the host's id (a second process 0 of this job).
    if ok && pid == 0 {
        let _ = write_frame(stream, &[&[R_REFUSED], HOST_ID_TAKEN.as_bytes()]);
        return Ok(());
    }
    if !ok {
        let why = if too_long {
            "the hello is longer than any this store accepts (a wrong token, or not an rpjrt \
             key-value store client)"
        } else if hello.len() < 13 || hello[0] != OP_HELLO || &hello[1..9] != PROTOCOL_MAGIC {
            // Shorter than op, magic and process id: malformed, whatever token follows.
            "not an rpjrt key-value store client (bad hello)"
        } else {
            "wrong token: this store belongs to another job"
        };
        let _ = write_frame(stream, &[&[R_REFUSED], why.as_bytes()]);
        return Ok(());
    }
    // A host shutting down takes no new connection from a process that left it: that
    // process is joining the job's next store on this address (it called `initialize`
    // again), which it reaches by retrying. Let in, it found its own marks of this store
    // and was refused as a restarted process.
    if shared.closing.load(Ordering::Acquire) && shared.activity().left_for_good(pid) {
        let why = format!(
            "the store is shutting down, and process {pid} already left it (it said \
             goodbye): it takes no new connection from that process"
        );
        let _ = write_frame(stream, &[&[R_CLOSING], why.as_bytes()]);
        return Ok(());
    }
    // Counted as joined before the client hears so: a host deciding whether to wait sees
    // every connection whose client believes it is in.
    shared.peer_delta(pid, true);
    let id = shared.joined(pid);
    let r = write_frame(stream, &[&[R_OK]])
        .and_then(|()| stream.set_read_timeout(None))
        .and_then(|()| serve_requests(stream, shared, pid, id));
    shared
        .claims
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|_, (_, by)| {
            by.retain(|c| *c != id);
            !by.is_empty()
        });
    shared.closed(id);
    shared.peer_delta(pid, false);
    r
}

/// What became of one request.
enum Served {
    /// Answered; the connection goes on.
    Answered,
    /// The connection ends (the host stopped, or the client hung up).
    Close,
}

/// Serves the requests of connection `id`, which said hello as process `pid`.
fn serve_requests(stream: &mut TcpStream, shared: &Shared, pid: u32, id: u64) -> io::Result<()> {
    loop {
        let req = match read_frame(stream) {
            Ok(r) => r,
            Err(_) => return Ok(()),
        };
        if !shared.request_begins(id) {
            return Ok(());
        }
        // A well-formed request (not garbage after a hello) shows a client of ours.
        if matches!(req[0], OP_SET..=OP_CLAIM) {
            shared.peer_spoke(pid);
        }
        match answer(stream, shared, &req, pid, id)? {
            // Ended already, before its reply went out (see `reply`).
            Served::Answered => {}
            Served::Close => return Ok(()),
        }
    }
}

/// Sends the reply to connection `id`'s request, marking the request ended first: the
/// client acts on the reply (says goodbye on another connection, connects again) only
/// after the host has counted the request as over, never before.
fn reply(stream: &mut TcpStream, shared: &Shared, id: u64, parts: &[&[u8]]) -> io::Result<()> {
    shared.request_ends(id, None);
    write_frame(stream, parts)
}

/// Answers one request of connection `id`, which said hello as process `pid`; every reply
/// goes through [`reply`].
fn answer(
    stream: &mut TcpStream,
    shared: &Shared,
    req: &[u8],
    pid: u32,
    id: u64,
) -> io::Result<Served> {
    let body = &req[1..];
    match req[0] {
        OP_SET if body.len() >= 4 => {
            let klen = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) as usize;
            if body.len() < 4 + klen {
                reply(stream, shared, id, &[&[R_ERROR], b"truncated set"])?;
                return Ok(Served::Answered);
            }
            let Some(key) = utf8(stream, shared, id, &body[4..4 + klen])? else {
                return Ok(Served::Answered);
            };
            shared.insert(key, &body[4 + klen..]);
            if key == goodbye_key(pid as usize) {
                // Counted before the client hears back: its next connection comes after.
                shared.request_ends(id, Some(pid));
            }
            reply(stream, shared, id, &[&[R_OK]])?;
        }
        OP_GET if body.len() >= 8 => {
            let mut ms = [0u8; 8];
            ms.copy_from_slice(&body[..8]);
            let ms = u64::from_be_bytes(ms).min(MAX_WAIT_MS);
            let Some(key) = utf8(stream, shared, id, &body[8..])? else {
                return Ok(Served::Answered);
            };
            // While it waits, the thread also looks whether the client hung up (it
            // exited or was killed inside its get): the thread then ends, so the
            // process counts as gone at once (a barrier fails naming it, a host's
            // `shutdown_after` stops waiting for it), not when the get's wait ran out.
            let hung_up = Cell::new(false);
            let last_look = Cell::new(Instant::now());
            let client = &*stream;
            let v = wait_for_key(
                shared.lock(),
                &shared.changed,
                key,
                Duration::from_millis(ms),
                &|| {
                    if shared.stopped() {
                        return true;
                    }
                    if last_look.get().elapsed() >= HANG_UP_CHECK {
                        last_look.set(Instant::now());
                        hung_up.set(client_hung_up(client));
                    }
                    hung_up.get()
                },
            );
            if v.is_none() && (shared.stopped() || hung_up.get()) {
                // Closing tells the client the host went away, not that time ran out;
                // a client that hung up has no one to answer.
                return Ok(Served::Close);
            }
            match v {
                Some(v) => reply(stream, shared, id, &[&[R_OK], &v[..]])?,
                None => reply(stream, shared, id, &[&[R_TIMEOUT]])?,
            }
        }
        OP_PEER if body.len() == 4 => {
            let p = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
            let (state, open) = shared.peer_info(p);
            let open = u32::try_from(open).unwrap_or(u32::MAX);
            reply(
                stream,
                shared,
                id,
                &[&[R_OK, state as u8], &open.to_be_bytes()],
            )?;
        }
        OP_CLAIM if !body.is_empty() => {
            let mut claims = shared.claims.lock().unwrap_or_else(|p| p.into_inner());
            let claim = claims
                .entry(pid)
                .or_insert_with(|| (body.to_vec(), Vec::new()));
            let taken = claim.0.as_slice() != body;
            if !taken {
                claim.1.push(id);
            }
            drop(claims);
            if taken {
                let why = format!(
                    "process id {pid} is used by more than one process: another process \
                     connected as process {pid} and is still connected; give each process \
                     its own id"
                );
                reply(stream, shared, id, &[&[R_REFUSED], why.as_bytes()])?;
            } else {
                reply(stream, shared, id, &[&[R_OK]])?;
            }
        }
        OP_DELETE => {
            let Some(key) = utf8(stream, shared, id, body)? else {
                return Ok(Served::Answered);
            };
            let was = shared.remove(key);
            reply(stream, shared, id, &[&[R_OK, u8::from(was)]])?;
        }
        OP_TRY_GET => {
            let Some(key) = utf8(stream, shared, id, body)? else {
                return Ok(Served::Answered);
            };
            let v = shared.value(key);
            match v {
                Some(v) => reply(stream, shared, id, &[&[R_OK], &v[..]])?,
                None => reply(stream, shared, id, &[&[R_NOT_FOUND]])?,
            }
        }
        _ => reply(
            stream,
            shared,
            id,
            &[&[R_ERROR], b"unknown or malformed request"],
        )?,
    }
    Ok(Served::Answered)
}

/// Whether the client at the other end of `stream` hung up: its end reads as closed (it
/// exited, was killed, or shut its side down) or the socket failed. A client that is
/// merely silent, as one waiting for its reply is, has not. Never blocks.
fn client_hung_up(stream: &TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return false;
    }
    let mut probe = [0u8; 1];
    let looked = stream.peek(&mut probe);
    if stream.set_nonblocking(false).is_err() {
        // A connection that cannot block again cannot be served: end it.
        return true;
    }
    match looked {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
        ),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn io_err(what: &'static str) -> impl Fn(io::Error) -> Error {
    move |e| store_error(Code::Unavailable, format!("key-value store: {what}: {e}"))
}

// ---------------------------------------------------------------------------- the client

struct Remote {
    addr: SocketAddr,
    token: String,
    process_id: u32,
    io_timeout: Duration,
    /// A connection opened at connect and used for no request: it stays open until the
    /// store is shut down, so that the host counts this process as connected while it
    /// lives even when every connection calls use was dropped (after a timeout, or cut by a
    /// cancel): a live process was reported as "exited or crashed" when its only
    /// connection was dropped after a timeout.
    presence: Mutex<Option<TcpStream>>,
    pool: Mutex<Vec<TcpStream>>,
    /// The connections calls are using now (a clone of each, sharing its socket), by call
    /// number: [`TcpStore::shutdown`] shuts them down too, so that a call waiting in
    /// another thread (a `get`, a barrier) ends at once instead of when its wait runs
    /// out. A call registers its connection under this lock after looking at `closed`
    /// under it, so no call starts using a connection that shutdown misses.
    in_use: Mutex<HashMap<u64, TcpStream>>,
    /// Numbers the calls, for `in_use`.
    calls: AtomicU64,
    /// Set by [`TcpStore::shutdown`]: no call opens a connection after it, and a call
    /// whose connection it shut down reports the shutdown.
    closed: AtomicBool,
    /// Set once the host has answered a hello: a later hello that gets no answer is a
    /// host that stopped answering (paused, overloaded), not a wrong address.
    spoken: AtomicBool,
}

/// How long a client waits for the answer to its claim ([`Remote::claim`]).
const CLAIM_WAIT: Duration = Duration::from_secs(1);

/// This OS process's nonce for claims ([`OP_CLAIM`]): random once per process, with the
/// OS process id, so a forked child (which inherits the random part) has its own.
fn process_nonce() -> String {
    static RANDOM: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    format!(
        "{}:{}",
        RANDOM.get_or_init(rpjrt::random_token),
        std::process::id()
    )
}

/// Why [`Remote::try_open`] got no connection.
enum OpenFailed {
    /// The error to report.
    Error(Error),
    /// A host this client has spoken to did not answer the hello within this long.
    Silent(Duration),
}

/// The longest single try at a TCP connect: connecting to a host that drops packets waits
/// for the OS's timeout, so a connect is made in tries of at most this, a cancel looked at
/// between them.
const CONNECT_TRY: Duration = Duration::from_secs(1);

/// What a `get` allows the host beyond its timeout for the head of the answer (or the I/O
/// timeout, when shorter): a host that does not answer (paused with `SIGSTOP`, overloaded)
/// fails the get then, not after the whole I/O timeout. A long value whose reply has begun
/// still has the I/O timeout to arrive.
const ANSWER_GRACE: Duration = Duration::from_secs(1);

impl Remote {
    /// Opens a connection and says hello, within `timeout`; a cancel ([`cancel`]) ends it.
    /// A host this client has spoken to that does not answer the hello is reported as
    /// calls report a host that does not answer (`DEADLINE_EXCEEDED`, "did not answer
    /// within ... (it may be paused, overloaded or unreachable)").
    fn open(&self, timeout: Duration) -> Result<TcpStream> {
        self.try_open(timeout).map_err(|f| match f {
            OpenFailed::Error(e) => e,
            OpenFailed::Silent(waited) => self.no_answer(Code::DeadlineExceeded, waited, ""),
        })
    }

    /// The error of a host (process 0) that did not answer within `waited`.
    fn no_answer(&self, code: Code, waited: Duration, maybe_done: &str) -> Error {
        store_error(
            code,
            format!(
                "the store host (process 0) at {} did not answer within {} (it may be \
                 paused, overloaded or unreachable){maybe_done}",
                self.addr,
                // A measured time: to the millisecond (the microsecond below one), not to
                // the nanosecond.
                crate::duration_text(crate::rounded(waited))
            ),
        )
    }

    /// [`Remote::open`], telling a silent host this client has spoken to apart.
    fn try_open(&self, timeout: Duration) -> std::result::Result<TcpStream, OpenFailed> {
        let started = Instant::now();
        let lost = |e: io::Error| {
            store_error(
                Code::Unavailable,
                format!(
                    "cannot reach the store host (process 0) at {}: {e}",
                    self.addr
                ),
            )
        };
        cancel::check().map_err(OpenFailed::Error)?;
        let deadline = crate::deadline_after(timeout);
        let mut s = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let try_for = left.min(CONNECT_TRY).max(Duration::from_millis(1));
            match TcpStream::connect_timeout(&self.addr, try_for) {
                Ok(s) => break s,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                    ) && Instant::now() < deadline
                        && !cancel::cancelled() => {}
                Err(e) => {
                    cancel::check().map_err(OpenFailed::Error)?;
                    return Err(OpenFailed::Error(lost(e)));
                }
            }
        };
        let _watch = cancel::watch(&s).map_err(OpenFailed::Error)?;
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        let hello = (|| {
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(left))?;
            s.set_write_timeout(Some(left))?;
            write_frame(
                &mut s,
                &[
                    &[OP_HELLO],
                    PROTOCOL_MAGIC,
                    &self.process_id.to_be_bytes(),
                    self.token.as_bytes(),
                ],
            )?;
            read_frame_by(&mut s, deadline, MAX_HELLO_REPLY)
        })();
        cancel::check().map_err(OpenFailed::Error)?;
        let reply = match hello {
            Ok(r) => r,
            Err(e)
                if self.spoken.load(Ordering::Acquire)
                    && matches!(
                        e.kind(),
                        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                    ) =>
            {
                return Err(OpenFailed::Silent(started.elapsed()));
            }
            Err(e) => return Err(OpenFailed::Error(lost(e))),
        };
        // The I/O timeout is the connection's again (a try's own may have been shorter).
        let _ = s.set_read_timeout(Some(self.io_timeout));
        let _ = s.set_write_timeout(Some(self.io_timeout));
        let refused = match reply[0] {
            R_OK => {
                self.spoken.store(true, Ordering::Release);
                return Ok(s);
            }
            R_REFUSED => store_error(
                Code::PermissionDenied,
                format!(
                    "the store host at {} refused process {}: {}",
                    self.addr,
                    self.process_id,
                    String::from_utf8_lossy(&reply[1..])
                ),
            ),
            // Not a refusal: the next store on this address may take the process.
            R_CLOSING => store_error(
                Code::Unavailable,
                format!(
                    "the store host at {} is shutting down: {}",
                    self.addr,
                    String::from_utf8_lossy(&reply[1..])
                ),
            ),
            code => store_error(
                Code::Unavailable,
                format!(
                    "the store host at {} answered hello oddly (reply code {code:#04x}, \
                     which no rpjrt host sends to a hello)",
                    self.addr
                ),
            ),
        };
        Err(OpenFailed::Error(refused))
    }

    /// Claims this client's process id on `presence` (its presence connection) with a
    /// nonce of its own ([`OP_CLAIM`]): the host refuses the claim while another live
    /// client holds the id. A host that does not know the request (answers anything
    /// but a refusal) is taken as not checking.
    ///
    /// The answer is waited for at most [`CLAIM_WAIT`]: a host that does not answer it (one
    /// that does not know the request and says nothing) is not waited for, and a late
    /// answer is never read (no call uses the presence connection).
    fn claim(&self, presence: &mut TcpStream, deadline: Instant) -> Result<()> {
        let nonce = process_nonce();
        let by = deadline.min(Instant::now() + CLAIM_WAIT);
        let sent = write_frame(presence, &[&[OP_CLAIM], nonce.as_bytes()])
            .and_then(|()| read_frame_by(presence, by, MAX_HELLO_REPLY));
        let reply = match sent {
            Ok(r) => r,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                ) =>
            {
                return Ok(())
            }
            Err(e) => {
                return Err(store_error(
                    Code::Unavailable,
                    format!(
                        "cannot reach the store host (process 0) at {}: claiming process id \
                         {}: {e}",
                        self.addr, self.process_id
                    ),
                ))
            }
        };
        match reply.first() {
            Some(&R_REFUSED) => Err(store_error(
                Code::AlreadyExists,
                format!(
                    "the store host at {} refused process {}: {}",
                    self.addr,
                    self.process_id,
                    String::from_utf8_lossy(&reply[1..])
                ),
            )),
            _ => Ok(()),
        }
    }

    /// How many connections to the host this client holds open now.
    fn open_connections(&self) -> usize {
        let presence = self
            .presence
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        usize::from(presence)
            + self.pool.lock().unwrap_or_else(|p| p.into_inner()).len()
            + self.in_use.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Sends one request and reads its reply, on a pooled connection (or a new one),
    /// within the I/O timeout plus `wait`, by `cap` when given (a barrier's deadline and
    /// grace), and with the head of the reply by `head_by` when given (a get's timeout and
    /// grace). A reply that does not come by `cap` is `UNAVAILABLE` (the host does not
    /// answer), not a key that was not set: the connection is dropped, never reused.
    /// A call that [`TcpStore::shutdown`] (in another thread) cuts short fails with the
    /// shutdown's `FAILED_PRECONDITION`, not as a lost connection or a key's timeout, and
    /// one cancelled ([`cancel`]) with `CANCELLED`.
    fn call(
        &self,
        parts: &[&[u8]],
        wait: Duration,
        cap: Option<Instant>,
        head_by: Option<Instant>,
    ) -> Result<Vec<u8>> {
        self.exchange(parts, wait, cap, head_by, false)
    }

    /// [`Remote::call`]; `goodbye` is the one call a shutdown makes itself (its goodbye),
    /// let through after `closed` is set.
    fn exchange(
        &self,
        parts: &[&[u8]],
        wait: Duration,
        cap: Option<Instant>,
        head_by: Option<Instant>,
        goodbye: bool,
    ) -> Result<Vec<u8>> {
        if !goodbye && self.is_closed() {
            return Err(closed_error());
        }
        cancel::check()?;
        // A request too large for one frame is refused here, before a connection is
        // touched: nothing was sent, and the connection is not lost.
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > MAX_FRAME {
            return Err(invalid(format!(
                "a request of {len} bytes exceeds the TCP store's {MAX_FRAME}-byte message \
                 limit"
            )));
        }
        let natural = crate::deadline_after(self.io_timeout.saturating_add(wait));
        let deadline = cap.map_or(natural, |c| c.min(natural));
        let capped = deadline < natural;
        let head_by = head_by.map_or(deadline, |h| h.min(deadline));
        let left = |by: Instant| by.saturating_duration_since(Instant::now());
        let silent = |waited: Duration| self.no_answer(Code::Unavailable, waited, "");
        if capped && left(deadline).is_zero() {
            return Err(silent(Duration::ZERO));
        }
        // What a request that changes the store may have done when its answer is missing.
        let maybe_done = match parts.first().and_then(|p| p.first()) {
            Some(&OP_SET) => "; the value may have been stored all the same",
            Some(&OP_DELETE) => "; the key may have been deleted all the same",
            _ => "",
        };
        let started = Instant::now();
        let pooled = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut s = match pooled {
            Some(s) => s,
            None => match self.try_open(
                self.io_timeout
                    .min(left(head_by).max(Duration::from_millis(1))),
            ) {
                Ok(s) => s,
                Err(OpenFailed::Error(e)) => return Err(e),
                // Nothing was sent: the host that does not answer the hello is reported as
                // one that does not answer a request, with the same code.
                Err(OpenFailed::Silent(_)) if capped => return Err(silent(started.elapsed())),
                Err(OpenFailed::Silent(_)) => {
                    return Err(self.no_answer(Code::DeadlineExceeded, started.elapsed(), ""))
                }
            },
        };
        // Dropping `s` on a refusal closes it.
        let id = self.check_out(&s, goodbye)?;
        let watched = cancel::watch(&s);
        let result = match &watched {
            Err(_) => Err(NoReply::Head(io::Error::other("cancelled"))),
            Ok(_) => (|| {
                let limit = left(deadline).max(Duration::from_millis(1));
                s.set_read_timeout(Some(limit)).map_err(NoReply::Head)?;
                s.set_write_timeout(Some(limit)).map_err(NoReply::Head)?;
                write_frame(&mut s, parts).map_err(NoReply::Head)?;
                read_reply(&mut s, head_by, deadline, MAX_FRAME)
            })(),
        };
        drop(watched);
        self.in_use
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        let timed_out = |e: &io::Error| {
            matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            )
        };
        match result {
            Ok(reply) => {
                self.put_back(s);
                Ok(reply)
            }
            // Whatever the read saw (an end of stream, a reset, a timeout), a connection
            // a shutdown cut is the shutdown's doing, and one a cancel cut the cancel's.
            Err(_) if !goodbye && self.is_closed() => Err(closed_error()),
            Err(_) if cancel::cancelled() => Err(cancel::cancelled_error()),
            Err(NoReply::Head(e)) if timed_out(&e) => {
                if capped {
                    return Err(silent(started.elapsed()));
                }
                Err(self.no_answer(Code::DeadlineExceeded, started.elapsed(), maybe_done))
            }
            Err(NoReply::Body(n, e)) if timed_out(&e) => Err(store_error(
                Code::DeadlineExceeded,
                format!(
                    "the store host (process 0) at {} answered, but its reply of {n} bytes \
                     did not arrive whole within {} (this store's I/O timeout, the timeout \
                     it connected with, may be too short for values this large){maybe_done}",
                    self.addr,
                    crate::duration_text(crate::rounded(started.elapsed()))
                ),
            )),
            Err(NoReply::Head(e) | NoReply::Body(_, e) | NoReply::Bad(e)) => Err(store_error(
                Code::Unavailable,
                format!(
                    "lost the connection to the store host (process 0) at {}: {e}{maybe_done}",
                    self.addr
                ),
            )),
        }
    }

    /// Whether [`TcpStore::shutdown`] has begun.
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Registers `s` in `in_use` for one call and returns the call's number, or the
    /// shutdown's error when the store was shut down (`goodbye`: the shutdown's own call,
    /// registered all the same). `closed` is read under the lock that shutdown takes
    /// after setting it: either shutdown finds `s` registered and shuts it down, or the
    /// call sees the flag and never uses `s`.
    fn check_out(&self, s: &TcpStream, goodbye: bool) -> Result<u64> {
        let clone = s.try_clone().map_err(io_err("clone a connection"))?;
        let mut in_use = self.in_use.lock().unwrap_or_else(|p| p.into_inner());
        if !goodbye && self.is_closed() {
            return Err(closed_error());
        }
        let id = self.calls.fetch_add(1, Ordering::Relaxed);
        in_use.insert(id, clone);
        Ok(id)
    }

    /// Returns a connection that answered to the pool, or closes it when the store was
    /// shut down meanwhile (read under the pool's lock, which shutdown drains after
    /// setting `closed`: no connection is left open in a drained pool).
    fn put_back(&self, s: TcpStream) {
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_closed() {
            let _ = s.shutdown(Shutdown::Both);
        } else {
            pool.push(s);
        }
    }

    /// Ends this client: every later call fails, the calls other threads are making now
    /// end at once with the shutdown's error (their connections are shut down), then a
    /// brief goodbye to the host (only on the first shutdown; not itself cancelled), then
    /// the idle connections and the presence connection close.
    fn shutdown(&self) {
        let first = !self.closed.swap(true, Ordering::AcqRel);
        for s in self
            .in_use
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
        {
            let _ = s.shutdown(Shutdown::Both);
        }
        if first {
            // Best effort, and brief: a host that is gone needs no goodbye, and one that
            // does not answer (paused) must not hold up a drop for the I/O timeout; the
            // host counts a closed connection as a goodbye too.
            let key = goodbye_key(self.process_id as usize);
            let klen = (key.len() as u32).to_be_bytes();
            let cap = crate::deadline_after(GOODBYE_GRACE.min(self.io_timeout));
            let _ = cancel::shielded(|| {
                self.exchange(
                    &[&[OP_SET], &klen, key.as_bytes()],
                    Duration::ZERO,
                    Some(cap),
                    None,
                    true,
                )
            });
        }
        for s in self
            .pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            let _ = s.shutdown(Shutdown::Both);
        }
        if let Some(s) = self
            .presence
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

fn reply_error(reply: &[u8]) -> Error {
    let text = String::from_utf8_lossy(reply.get(1..).unwrap_or_default());
    let message = match reply.first() {
        Some(&R_ERROR) if !text.is_empty() => {
            format!("the store host answered with an error: {text}")
        }
        Some(&code) => {
            let name = match code {
                R_OK => "ok",
                R_NOT_FOUND => "not found",
                R_TIMEOUT => "timeout",
                R_REFUSED => "refused",
                R_ERROR => "error",
                R_CLOSING => "closing",
                _ => "unknown",
            };
            let text = if text.is_empty() {
                "no text".to_string()
            } else {
                format!("text {text:?}")
            };
            format!(
                "the store host answered with reply code {code:#04x} ({name}), which this \
                 request does not expect ({text}): not an rpjrt host of this version, or a \
                 broken one"
            )
        }
        None => "the store host answered with an empty reply".to_string(),
    };
    store_error(Code::Internal, message)
}

// ------------------------------------------------------------------------------ the store

enum Role {
    Host(Host),
    Remote(Remote),
}

/// A [`KvStore`] over TCP, hosted by process 0 and reached by the others, like JAX's
/// coordination service or torch's `TCPStore`.
///
/// Every call is bounded: `get` by its timeout plus the I/O timeout, the others by the I/O
/// timeout. A peer must present the job's token to join. The host stops listening and
/// closes every connection on [`TcpStore::shutdown`] (or drop).
///
/// A store belongs to the process that made it. In a process forked from it (`fork()`
/// without `exec`), which inherits a copy of the store but none of its threads, every call
/// that reaches the store (`set`, `get`, `try_get`, `barrier`) is refused with
/// `FAILED_PRECONDITION` naming the fork ([`TcpStore::check_not_forked`]; `address`,
/// `is_host` and `Debug` still answer), and [`TcpStore::shutdown`],
/// [`TcpStore::shutdown_after`] and drop do nothing there: they neither join the host's
/// threads (which do not exist in the child) nor say goodbye or shut down a connection
/// (which the child shares with its parent, whose store goes on working).
pub struct TcpStore {
    role: Role,
    io_timeout: Duration,
    /// The job's process count, when known ([`TcpStore::from_env`]): the host then waits
    /// for every peer's goodbye in [`TcpStore::shutdown_after`].
    members: Option<usize>,
    /// The process that made the store.
    origin: Origin,
}

/// The process a store was made in: its fork generation ([`rpjrt::fork_generation`]),
/// which differs in every process forked from it since, and its id, for messages.
#[derive(Clone, Copy)]
struct Origin {
    generation: u32,
    pid: u32,
}

impl Origin {
    /// This process (registering the fork handler that tells a fork apart, on first use).
    fn here() -> Origin {
        Origin {
            generation: rpjrt::fork_generation(),
            pid: std::process::id(),
        }
    }

    /// Whether this process is a fork of the one the store was made in (one atomic load).
    fn forked(&self) -> bool {
        rpjrt::fork_generation() != self.generation
    }
}

/// The key a peer sets when it leaves the store.
fn goodbye_key(p: usize) -> String {
    format!("rpjrt:goodbye:{p}")
}

/// Refuses a key too long for the protocol ([`MAX_KEY_BYTES`]), whoever asks for it: at
/// once, rather than waiting for a key no one can set, or failing as a lost connection.
fn check_key(key: &str) -> Result<()> {
    if key.len() > MAX_KEY_BYTES {
        return Err(invalid(format!(
            "key {} is longer than the TCP store's limit of {MAX_KEY_BYTES} bytes for a key",
            // Always shown with its length: the key is far longer than what is shown.
            shown(key)
        )));
    }
    Ok(())
}

/// Refuses an entry too large for the protocol, whoever writes it.
fn check_entry(key: &str, value: &[u8]) -> Result<()> {
    check_key(key)?;
    let total = key.len().saturating_add(value.len());
    if total > MAX_ENTRY_BYTES {
        return Err(invalid(format!(
            "key {} and its value take {total} bytes ({} of key, {} of value), more than \
             the TCP store's limit of {MAX_ENTRY_BYTES} bytes of key and value",
            shown(key),
            key.len(),
            value.len()
        )));
    }
    Ok(())
}

fn closed_error() -> Error {
    store_error(
        Code::FailedPrecondition,
        "the key-value store was shut down",
    )
}

impl TcpStore {
    /// Hosts the store on `addr` (e.g. `127.0.0.1:0` for any free port) for the peers that
    /// present `token`. This process talks to the map directly.
    pub fn host(addr: &str, token: &str) -> Result<TcpStore> {
        let host = Host::bind(resolve(addr)?, token)?;
        Ok(TcpStore {
            role: Role::Host(host),
            io_timeout: Duration::from_secs(30),
            members: None,
            origin: Origin::here(),
        })
    }

    /// Connects to the store hosted at `addr` as process `process_id`, retrying until
    /// `timeout` while the host is not up yet.
    pub fn connect(
        addr: &str,
        token: &str,
        process_id: usize,
        timeout: Duration,
    ) -> Result<TcpStore> {
        check_token(token)?;
        // The port is checked before the name is looked up (which may be retried).
        let port_zero = addr
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>() == Ok(0));
        if port_zero {
            return Err(invalid(format!(
                "store address {} has port 0, which nothing can be reached on: give the \
                 port the store host (process 0) listens on",
                shown(addr)
            )));
        }
        if process_id >= crate::MAX_PROCESSES {
            return Err(invalid(format!(
                "process id {process_id} is above the largest id a job may have, {}",
                crate::MAX_PROCESSES - 1
            )));
        }
        if process_id == 0 {
            return Err(invalid(
                "process 0 is the store's host (TcpStore::host), which never connects to it: \
                 a peer connects as process 1 or above; process id 0 used by a peer would be \
                 used by more than one process",
            ));
        }
        let process_id = process_id as u32;
        let deadline = crate::deadline_after(timeout);
        let sock = resolve_until(addr, deadline, timeout)?;
        if sock.port() == 0 {
            return Err(invalid(format!(
                "store address {} has port 0, which nothing can be reached on: give the \
                 port the store host (process 0) listens on",
                shown(addr)
            )));
        }
        let remote = Remote {
            addr: sock,
            token: token.to_string(),
            process_id,
            io_timeout: timeout.max(Duration::from_millis(100)),
            presence: Mutex::new(None),
            pool: Mutex::new(Vec::new()),
            in_use: Mutex::new(HashMap::new()),
            calls: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            spoken: AtomicBool::new(false),
        };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // Two connections: the presence connection, which no call uses (see
            // `Remote::presence`), and the first of the pool.
            // The presence connection claims the id (refused while another live client
            // holds it), and holds the claim while it is open.
            let opened = remote
                .open(left.max(Duration::from_millis(50)))
                .and_then(|mut presence| {
                    let by = deadline.max(Instant::now() + Duration::from_millis(50));
                    remote.claim(&mut presence, by)?;
                    let _ = presence.set_read_timeout(Some(remote.io_timeout));
                    Ok(presence)
                })
                .and_then(|presence| {
                    let left = deadline.saturating_duration_since(Instant::now());
                    Ok((presence, remote.open(left.max(Duration::from_millis(50)))?))
                });
            match opened {
                Ok((presence, pooled)) => {
                    *remote.presence.lock().unwrap_or_else(|p| p.into_inner()) = Some(presence);
                    remote
                        .pool
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(pooled);
                    break;
                }
                Err(e)
                    if matches!(
                        e.code(),
                        Code::PermissionDenied | Code::Cancelled | Code::AlreadyExists
                    ) =>
                {
                    return Err(e)
                }
                Err(e) => {
                    if Instant::now() >= deadline {
                        return Err(store_error(
                            Code::DeadlineExceeded,
                            format!(
                                "process 0 (the store host) was not reachable at {sock} within \
                                 {}; last error: {e}",
                                crate::duration_text(timeout)
                            ),
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(50));
                    cancel::check()?;
                }
            }
        }
        Ok(TcpStore {
            role: Role::Remote(remote),
            io_timeout: timeout.max(Duration::from_millis(100)),
            members: None,
            origin: Origin::here(),
        })
    }

    /// Process 0 hosts on the launch environment's coordinator address, the others connect
    /// to it (waiting up to `timeout` for it to come up); then every process waits, up to
    /// `timeout` again, until all `num_processes` have joined, so that no process goes on
    /// (and the host never shuts down) before a peer has arrived. The error names the
    /// processes that did not join.
    ///
    /// The store knows the process count: [`TcpStore::shutdown_after`] on the host waits
    /// for every peer to leave.
    pub fn from_env(env: &LaunchEnv, timeout: Duration) -> Result<TcpStore> {
        let deadline = crate::deadline_after(timeout);
        let mut wait = timeout;
        let mut store = loop {
            // The host refuses the id while another live process holds it (`Remote::claim`).
            let store = TcpStore::open_env(env, wait, timeout).map_err(|e| {
                if e.code() != Code::AlreadyExists {
                    return e;
                }
                invalid(format!(
                    "process id {} of {} is used by more than one process (another process \
                     connected to the job's store as process {} and is still connected): give \
                     each process its own id, 0 to {}",
                    env.process_id,
                    env.num_processes,
                    env.process_id,
                    env.num_processes.saturating_sub(1)
                ))
            })?;
            if store.is_host() {
                break store;
            }
            // A store this process said goodbye to: the job's previous store (this
            // process called `initialize` again), still up because process 0 has not
            // shut it down yet or is waiting in its shutdown for the others to leave. The
            // next store comes on the same address once it stops: try again until then.
            match store.try_get(&goodbye_key(env.process_id)) {
                Ok(None) => break store,
                Ok(Some(_)) if Instant::now() < deadline => {
                    drop(store);
                    std::thread::sleep(Duration::from_millis(100));
                    cancel::check()?;
                    wait = deadline.saturating_duration_since(Instant::now());
                }
                Ok(Some(_)) => {
                    return Err(store_error(
                        Code::FailedPrecondition,
                        format!(
                            "process {} of {} already joined the job's store at {} and left \
                             it (it shut its store down, saying goodbye), and within {} that \
                             store was not shut down for a new one to take its place: a store \
                             takes each process once; to join again, process 0 must shut the \
                             store down and start a new one (initialize again after its \
                             shutdown)",
                            env.process_id,
                            env.num_processes,
                            store.address(),
                            crate::duration_text(timeout)
                        ),
                    ))
                }
                Err(e) => return Err(e),
            }
        };
        // Each process marks its id with a nonce of its own before the join barrier: one
        // that finds the mark already there, or (when two marked at once) another's nonce
        // there after the barrier, shares its id with another process. Unnoticed, that
        // process would wait in the barrier's next generation and time out naming others.
        let claim = format!("rpjrt:member:{}", env.process_id);
        let nonce = rpjrt::random_token();
        let shared_id = || {
            invalid(format!(
                "process id {} of {} is used by more than one process: give each process \
                 its own id, 0 to {}",
                env.process_id,
                env.num_processes,
                env.num_processes.saturating_sub(1)
            ))
        };
        let claimed = match store.try_get(&claim) {
            Ok(Some(_)) => Err(store.taken_id_error(env, shared_id())),
            Ok(None) => store.set(&claim, nonce.as_bytes()),
            Err(e) => Err(e),
        };
        let joined = claimed.and_then(|()| {
            store.meet(
                JOIN_BARRIER,
                env.process_id,
                env.num_processes,
                timeout,
                "join the job's store",
            )
        });
        let joined = joined.and_then(|()| match store.get(&claim, timeout)? {
            v if v == nonce.as_bytes() => Ok(()),
            _ => Err(shared_id()),
        });
        if let Err(e) = joined {
            if cancel::ended_by_cancel(&e) {
                // Given up on: the store stops now (a host frees its port at once), and
                // the peers that joined see it gone.
                store.shutdown();
                return Err(cancel::cancelled_error());
            }
            // The peers that did join are failing their own wait; the host serves them
            // until they have gone (bounded), so they see the missing processes named
            // rather than a lost connection.
            store.shutdown_after(timeout);
            return Err(e);
        }
        store.members = Some(env.num_processes);
        Ok(store)
    }

    /// Why this process cannot take its id, whose mark another process set before it:
    /// when the id has no connection open but this process's own, the process that marked
    /// it joined and then left: by a goodbye (it shut its store down; the job's store
    /// takes each process once), or by losing its connection (this one is a restarted
    /// process, which a job cannot take); otherwise `shared` (two live processes hold the
    /// id).
    fn taken_id_error(&self, env: &LaunchEnv, shared: Error) -> Error {
        let Role::Remote(r) = &self.role else {
            return shared;
        };
        let (p, n) = (env.process_id, env.num_processes);
        let state = self.peer_info(p, None);
        let own = r.open_connections();
        match state {
            Ok((PeerState::Connected, Some(open))) if open <= own => {
                if matches!(self.try_get(&goodbye_key(p)), Ok(Some(_))) {
                    return store_error(
                        Code::FailedPrecondition,
                        format!(
                            "process {p} of {n} already joined the job's store at {} and \
                             left it (it shut its store down, saying goodbye), and that store \
                             is still up: a store takes each process once; to join again, \
                             process 0 must shut the store down and start a new one \
                             (initialize again after its shutdown)",
                            r.addr
                        ),
                    );
                }
                store_error(
                    Code::FailedPrecondition,
                    format!(
                        "process {p} of {n} already joined this job and then lost its \
                         connection without saying goodbye (it exited or was killed): a job \
                         cannot take a restarted process; start the whole job again"
                    ),
                )
            }
            _ => shared,
        }
    }

    /// Hosts (process 0) or connects, waiting up to `wait` for the host, with `io` as the
    /// store's I/O timeout.
    fn open_env(env: &LaunchEnv, wait: Duration, io: Duration) -> Result<TcpStore> {
        let addr = env.coordinator.as_deref().ok_or_else(|| {
            invalid(format!(
                "the launch environment ({}) names no coordinator address; set \
                 RPJRT_COORDINATOR=host:port",
                env.source
            ))
        })?;
        let token = env.token.as_deref().unwrap_or("");
        let io = io.max(Duration::from_millis(100));
        // A host on port 0 listens on a port the OS picks, which no peer can know: with
        // peers to come, refused at once (as a peer given port 0 is), not after a join
        // that cannot happen. One process alone may host anywhere.
        let port_zero = addr
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>() == Ok(0));
        if env.process_id == 0 && env.num_processes > 1 && port_zero {
            return Err(invalid(format!(
                "store address {} has port 0: process 0 would host the store on a port the \
                 OS picks, which the other {} process(es) cannot know; give a real port \
                 (rpjrt launch picks one itself)",
                shown(addr),
                env.num_processes - 1
            )));
        }
        let mut s = if env.process_id == 0 {
            TcpStore::host(addr, token)?
        } else {
            TcpStore::connect(addr, token, env.process_id, wait)?
        };
        s.io_timeout = io;
        if let Role::Remote(r) = &mut s.role {
            r.io_timeout = io;
        }
        Ok(s)
    }

    /// The address the host listens on (for the host) or connects to (for the others).
    pub fn address(&self) -> SocketAddr {
        match &self.role {
            Role::Host(h) => h.addr,
            Role::Remote(r) => r.addr,
        }
    }

    /// Whether this process hosts the store.
    pub fn is_host(&self) -> bool {
        matches!(self.role, Role::Host(_))
    }

    /// `FAILED_PRECONDITION` in a process forked from the one that made this store, which
    /// every call refuses there (see [`TcpStore`]): the store's threads did not survive
    /// the fork, and its connections are the parent's. `Ok` in the process that made it.
    pub fn check_not_forked(&self) -> Result<()> {
        if !self.origin.forked() {
            return Ok(());
        }
        let what = match &self.role {
            Role::Host(h) => format!("the key-value store hosted on {}", h.addr),
            Role::Remote(r) => format!(
                "the key-value store connection of process {} to {}",
                r.process_id, r.addr
            ),
        };
        Err(store_error(
            Code::FailedPrecondition,
            format!(
                "{what} was made by process {}, and this process (pid {}) is a fork of it: a \
                 store's threads do not survive fork and its connections are the parent's, \
                 so it cannot be used or shut down here (it is left to the parent): connect \
                 a new store in this process instead",
                self.origin.pid,
                std::process::id()
            ),
        ))
    }

    /// Stops the host at once (it stops listening, closes every connection and joins its
    /// threads), or says goodbye to the host and closes this client's connections. Every
    /// later call on this store fails, and so does every call another thread is waiting
    /// in now (a `get`, a barrier), at once rather than when its wait runs out: both with
    /// `FAILED_PRECONDITION` "the key-value store was shut down", on the host as on a
    /// peer. Idempotent. Does nothing in a process forked from the one that made the store
    /// (see [`TcpStore`]).
    pub fn shutdown(&self) {
        if self.origin.forked() {
            return;
        }
        match &self.role {
            Role::Host(h) => h.shutdown(),
            Role::Remote(r) => r.shutdown(),
        }
    }

    /// Like [`TcpStore::shutdown`], but the host first waits up to `grace` for its peers
    /// to leave, so that a peer still reading the last barrier's keys is not cut off: for
    /// each peer's goodbye (or lost connection) when the store knows the process count
    /// ([`TcpStore::from_env`]), and for every joined connection that is active to close.
    ///
    /// A joined connection (one that said hello with the job's token) is active while
    /// its process has not said goodbye, while a request of its is in progress, and once
    /// it said hello again (a re-join) or made a request after its process's goodbye: a
    /// process that reconnects after its goodbye, or goes on using a second client after
    /// closing one, is waited for until that connection closes. The host stops waiting as
    /// soon as only idle leftovers remain: connections that never presented the token
    /// (silent, or a stranger), and ones left open under the id of a process that said
    /// goodbye and idle since, which hold it at most `LEFTOVER_SETTLE` (1 s) after that
    /// goodbye (time for another client of the process to make its next request).
    ///
    /// Returns whether the shutdown was clean: every peer had left, and no active
    /// connection was cut off. A peer cut off when the grace ran out makes it `false`. In a
    /// process forked from the one that made the store it does nothing and returns `false`
    /// (see [`TcpStore::check_not_forked`]).
    pub fn shutdown_after(&self, grace: Duration) -> bool {
        if self.origin.forked() {
            return false;
        }
        let mut clean = true;
        if let Role::Host(h) = &self.role {
            h.shared.closing.store(true, Ordering::Release);
            let until = crate::deadline_after(grace);
            let left = |p: usize| {
                h.shared.lock().contains_key(&goodbye_key(p))
                    || u32::try_from(p).is_ok_and(|p| h.shared.peer_state(p) == PeerState::Gone)
            };
            let n = self.members.unwrap_or(0);
            // Whether every peer had left, as last seen while the host still ran: a stop
            // closes the peers' connections, after which they all read as gone.
            let mut seen_left = None;
            loop {
                // A cancelled wait (Python's Ctrl-C) stops the host now.
                let out = Instant::now() >= until || cancel::cancelled();
                let running = !h.shared.stopped();
                let members_left = (1..n).all(left);
                // Stopped already (by a shutdown in another thread, which ends this wait,
                // or an earlier one): nothing is left to wait for. A reading taken across
                // the stop may count peers its closing of connections made gone.
                if !running || h.shared.stopped() {
                    clean = match seen_left {
                        Some(l) => l,
                        None => (1..n).all(|p| h.shared.lock().contains_key(&goodbye_key(p))),
                    };
                    break;
                }
                seen_left = Some(members_left);
                if members_left || out {
                    if let Some(held) = h.stop_if_left(out) {
                        clean = members_left && held != Hold::Active;
                        break;
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        self.shutdown();
        clean
    }

    /// Whether process `p` has joined the store and is still connected to it.
    fn peer_state(&self, p: usize, cap: Option<Instant>) -> Result<PeerState> {
        if p == 0 {
            // Process 0 is the host; a host that answers is alive.
            return Ok(PeerState::Connected);
        }
        Ok(self.peer_info(p, cap)?.0)
    }

    /// Process `p`'s state, and how many connections to the host it has open (`None`
    /// from a host that does not say).
    fn peer_info(&self, p: usize, cap: Option<Instant>) -> Result<(PeerState, Option<usize>)> {
        self.check_not_forked()?;
        let p32 = u32::try_from(p).map_err(|_| invalid("process id too large"))?;
        match &self.role {
            Role::Host(h) => {
                let (state, open) = h.shared.peer_info(p32);
                Ok((state, Some(open)))
            }
            Role::Remote(r) => {
                let reply = r.call(&[&[OP_PEER], &p32.to_be_bytes()], Duration::ZERO, cap, None)?;
                let state = match (reply[0], reply.get(1)) {
                    (R_OK, Some(0)) => PeerState::NeverJoined,
                    (R_OK, Some(1)) => PeerState::Connected,
                    (R_OK, Some(2)) => PeerState::Gone,
                    _ => return Err(reply_error(&reply)),
                };
                let open = reply
                    .get(2..6)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize);
                Ok((state, open))
            }
        }
    }
}

impl Drop for TcpStore {
    fn drop(&mut self) {
        if self.origin.forked() {
            // In a fork the host's threads do not exist: their handles are let go without
            // a join or a detach (the threads' memory is the parent's copy, and leaks).
            // The sockets are only closed (the child's descriptors), never shut down: the
            // connections stay the parent's, and nothing is said on them.
            if let Role::Host(h) = &mut self.role {
                let accept = h.accept.get_mut().unwrap_or_else(|p| p.into_inner());
                std::mem::forget(accept.take());
            }
            return;
        }
        self.shutdown();
    }
}

impl TcpStore {
    /// The barrier `name`, failing at once when a peer that joined loses its connection;
    /// errors say the missing processes did not `what`. Every call it makes to the host
    /// ends by the barrier's deadline plus [`BARRIER_GRACE`]: a host that stops answering
    /// (paused, overloaded) fails the barrier then, naming the host, instead of holding
    /// it for the I/O timeout of each call.
    fn meet(&self, name: &str, pid: usize, n: usize, timeout: Duration, what: &str) -> Result<()> {
        self.check_not_forked()?;
        crate::check_world(pid, n)?;
        if name.len() > MAX_KEY_BYTES - BARRIER_KEY_EXTRA {
            return Err(invalid(format!(
                "barrier name {} is too long for the TCP store: a key holds at most \
                 {MAX_KEY_BYTES} bytes, and a barrier's keys add up to {BARRIER_KEY_EXTRA} \
                 bytes to its name",
                shown(name)
            )));
        }
        let cap = crate::deadline_after(timeout.saturating_add(BARRIER_GRACE.min(self.io_timeout)));
        let view = Capped { store: self, cap };
        let alive = |p: usize| -> Result<()> {
            if let Some(e) = self.accept_trouble(true) {
                return Err(e);
            }
            // A host that cannot accept connections says so to the peers it has.
            if let Role::Remote(_) = &self.role {
                if let Ok(Some(why)) = self.try_get_by(HOST_TROUBLE_KEY, Some(cap)) {
                    let why = String::from_utf8_lossy(&why).into_owned();
                    return Err(store_error(Code::ResourceExhausted, why));
                }
            }
            let Some(how) = self.departure_by(p, Some(cap))? else {
                return Ok(());
            };
            if let Some(e) = self.accept_trouble(false) {
                return Err(e);
            }
            Err(store_error(
                Code::Unavailable,
                format!(
                    "process {p} of {n} {} before it could {what}",
                    how.describe()
                ),
            ))
        };
        let delete = |k: &str| view.delete(k);
        barrier_with(
            &view,
            self as *const Self as *const () as usize,
            name,
            pid,
            n,
            timeout,
            &Hooks {
                poll: Some(Duration::from_millis(200)),
                alive: &alive,
                what: what.to_string(),
                delete: Some(&delete),
            },
        )
        // Peers that did not join while the host could not accept them: the host's doing.
        .map_err(|e| match e.code() {
            Code::DeadlineExceeded => self.accept_trouble(false).unwrap_or(e),
            _ => e,
        })
    }
}

/// How a process that joined a [`TcpStore`] left it ([`TcpStore::departure`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Departure {
    /// It shut its store down (it said goodbye).
    Left,
    /// Its connection ended without a goodbye: it exited or crashed.
    Lost,
}

impl Departure {
    /// The words the store's errors use: `left the store (it shut its store down)`,
    /// `lost its connection to the store (it exited or crashed)`.
    pub fn describe(self) -> &'static str {
        match self {
            Departure::Left => "left the store (it shut its store down)",
            Departure::Lost => "lost its connection to the store (it exited or crashed)",
        }
    }
}

impl TcpStore {
    /// Whether process `p` joined this store and has left it since, and how: the check a
    /// barrier makes of each process it waits for, for a caller that waits on something
    /// else (a plugin waiting in the store for a key of `p`'s) and wants to stop as soon
    /// as `p` cannot come. `None` while `p` is connected, before it joined, and for
    /// process 0 (the host: one that answers is up). A host that cannot be asked is an
    /// error.
    pub fn departure(&self, p: usize) -> Result<Option<Departure>> {
        self.departure_by(p, None)
    }

    /// [`TcpStore::departure`], its calls to the host ending by `cap` when given.
    fn departure_by(&self, p: usize, cap: Option<Instant>) -> Result<Option<Departure>> {
        if self.peer_state(p, cap)? != PeerState::Gone {
            return Ok(None);
        }
        // Gone: by its own shutdown (a goodbye), or without one.
        Ok(Some(match self.try_get_by(&goodbye_key(p), cap) {
            Ok(Some(_)) => Departure::Left,
            _ => Departure::Lost,
        }))
    }
}

/// How long a peer's shutdown waits for the host to take its goodbye.
const GOODBYE_GRACE: Duration = Duration::from_secs(2);

/// The most bytes a barrier's keys add to its name (`rpjrt:barrier:<name>:<use>:<process>`
/// with a 20-digit use count and a 10-digit process id is 46 more).
const BARRIER_KEY_EXTRA: usize = 64;

/// What a barrier over the TCP store allows the host beyond the barrier's timeout to
/// answer its last calls (or the I/O timeout, when shorter).
const BARRIER_GRACE: Duration = Duration::from_secs(1);

/// The TCP store as one barrier sees it: every call ends by `cap`.
struct Capped<'a> {
    store: &'a TcpStore,
    cap: Instant,
}

impl Capped<'_> {
    fn delete(&self, key: &str) -> Result<bool> {
        self.store.delete_by(key, Some(self.cap))
    }
}

impl KvStore for Capped<'_> {
    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        self.store.set_by(key, value, Some(self.cap))
    }
    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>> {
        self.store.get_by(key, timeout, Some(self.cap))
    }
    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.store.try_get_by(key, Some(self.cap))
    }
}

impl TcpStore {
    /// On the host: its lasting failure to accept connections ([`Shared::accept_trouble`]).
    fn accept_trouble(&self, lasting: bool) -> Option<Error> {
        let Role::Host(h) = &self.role else {
            return None;
        };
        let e = h.shared.accept_trouble(lasting)?;
        // For the peers' waits to end with it too, rather than at their timeout.
        h.shared.insert(HOST_TROUBLE_KEY, e.to_string().as_bytes());
        Some(e)
    }
}

impl Rendezvous for TcpStore {
    /// Like every store's barrier ([`Rendezvous::barrier`]: among others, an arrival whose
    /// wait timed out still counts, so a process arriving there later passes at once),
    /// and it also fails at once, naming the process, when a process that joined the
    /// store loses its connection (it exited or crashed) before arriving.
    fn barrier(&self, name: &str, pid: usize, n: usize, timeout: Duration) -> Result<()> {
        self.meet(
            name,
            pid,
            n,
            timeout,
            &format!("reach barrier {}", shown(name)),
        )
    }

    /// Removes `key` from the store, on the host or over the protocol from a peer (the
    /// host's answer says whether it was set). Refused in a fork, after a shutdown, and
    /// for a key longer than [`MAX_KEY_BYTES`], like every other call.
    fn delete(&self, key: &str) -> Result<bool> {
        self.delete_by(key, None)
    }
}

impl TcpStore {
    /// [`KvStore::set`], its call to the host ending by `cap` when given.
    fn set_by(&self, key: &str, value: &[u8], cap: Option<Instant>) -> Result<()> {
        self.check_not_forked()?;
        check_entry(key, value)?;
        match &self.role {
            Role::Host(h) => {
                if h.shared.stopped() {
                    return Err(closed_error());
                }
                h.shared.insert(key, value);
                Ok(())
            }
            Role::Remote(r) => {
                let klen =
                    u32::try_from(key.len()).map_err(|_| invalid("key longer than 4 GiB"))?;
                let reply = r.call(
                    &[&[OP_SET], &klen.to_be_bytes(), key.as_bytes(), value],
                    Duration::ZERO,
                    cap,
                    None,
                )?;
                match reply[0] {
                    R_OK => Ok(()),
                    _ => Err(reply_error(&reply)),
                }
            }
        }
    }

    /// [`KvStore::get`], its call to the host ending by `cap` when given.
    fn get_by(&self, key: &str, timeout: Duration, cap: Option<Instant>) -> Result<Vec<u8>> {
        self.check_not_forked()?;
        check_key(key)?;
        match &self.role {
            Role::Host(h) => {
                // Refused like every other call after a shutdown, even for a key the map
                // still holds.
                if h.shared.stopped() {
                    return Err(closed_error());
                }
                cancel::check()?;
                let v = wait_for_key(h.shared.lock(), &h.shared.changed, key, timeout, &|| {
                    h.shared.stopped() || cancel::cancelled()
                });
                match v {
                    Some(v) => Ok(v.to_vec()),
                    None if h.shared.stopped() => Err(closed_error()),
                    None if cancel::cancelled() => Err(cancel::cancelled_error()),
                    None => Err(timeout_error(key, timeout)),
                }
            }
            Role::Remote(r) => {
                let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
                // The head of the answer comes by the timeout and a grace: a host that
                // does not answer fails the get then, not after the whole I/O timeout.
                // (A barrier's calls have their own bound, `cap`.)
                let head_by = cap.is_none().then(|| {
                    crate::deadline_after(timeout.saturating_add(ANSWER_GRACE.min(self.io_timeout)))
                });
                let reply = r.call(
                    &[&[OP_GET], &ms.to_be_bytes(), key.as_bytes()],
                    timeout,
                    cap,
                    head_by,
                )?;
                match reply[0] {
                    R_OK => Ok(reply[1..].to_vec()),
                    R_TIMEOUT => Err(timeout_error(key, timeout)),
                    _ => Err(reply_error(&reply)),
                }
            }
        }
    }

    /// [`KvStore::try_get`], its call to the host ending by `cap` when given.
    fn try_get_by(&self, key: &str, cap: Option<Instant>) -> Result<Option<Vec<u8>>> {
        self.check_not_forked()?;
        check_key(key)?;
        match &self.role {
            Role::Host(h) => {
                if h.shared.stopped() {
                    return Err(closed_error());
                }
                Ok(h.shared.value(key).map(|v| v.to_vec()))
            }
            Role::Remote(r) => {
                let reply = r.call(&[&[OP_TRY_GET], key.as_bytes()], Duration::ZERO, cap, None)?;
                match reply[0] {
                    R_OK => Ok(Some(reply[1..].to_vec())),
                    R_NOT_FOUND => Ok(None),
                    _ => Err(reply_error(&reply)),
                }
            }
        }
    }

    /// [`Rendezvous::delete`], its call to the host ending by `cap` when given.
    fn delete_by(&self, key: &str, cap: Option<Instant>) -> Result<bool> {
        self.check_not_forked()?;
        check_key(key)?;
        match &self.role {
            Role::Host(h) => {
                if h.shared.stopped() {
                    return Err(closed_error());
                }
                Ok(h.shared.remove(key))
            }
            Role::Remote(r) => {
                let reply = r.call(&[&[OP_DELETE], key.as_bytes()], Duration::ZERO, cap, None)?;
                match (reply[0], reply.get(1)) {
                    (R_OK, Some(&was)) => Ok(was == 1),
                    _ => Err(reply_error(&reply)),
                }
            }
        }
    }
}

impl KvStore for TcpStore {
    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        self.set_by(key, value, None)
    }
    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>> {
        self.get_by(key, timeout, None)
    }
    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.try_get_by(key, None)
    }
}

impl std::fmt::Debug for TcpStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.role {
            Role::Host(h) => write!(f, "TcpStore(host on {})", h.addr),
            Role::Remote(r) => write!(f, "TcpStore(process {} -> {})", r.process_id, r.addr),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(10);

    fn pair(token: &str) -> (TcpStore, String) {
        let host = TcpStore::host("127.0.0.1:0", token).unwrap();
        let addr = host.address().to_string();
        (host, addr)
    }

    #[test]
    fn remote_set_get_try_get() {
        let (host, addr) = pair("tok");
        let c = TcpStore::connect(&addr, "tok", 1, T).unwrap();
        c.set("a", b"1").unwrap();
        assert_eq!(host.get("a", T).unwrap(), b"1");
        host.set("b", b"2").unwrap();
        assert_eq!(c.get("b", T).unwrap(), b"2");
        assert_eq!(c.try_get("nope").unwrap(), None);
        assert_eq!(c.try_get("a").unwrap().as_deref(), Some(&b"1"[..]));
        let e = c.get("never", Duration::from_millis(100)).unwrap_err();
        assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
        // Empty values and binary values survive.
        c.set("empty", b"").unwrap();
        assert_eq!(host.get("empty", T).unwrap(), b"");
        c.set("bin", &[0, 255, 10, 13]).unwrap();
        assert_eq!(c.get("bin", T).unwrap(), [0, 255, 10, 13]);
        // A value too large for one message is refused before sending; the connection
        // stays usable.
        let e = c.set("big", &vec![0u8; MAX_FRAME]).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        c.set("after", b"ok").unwrap();
    }

    #[test]
    fn a_forever_timeout_is_a_long_wait_not_a_panic() {
        let (host, addr) = pair("t");
        let c = TcpStore::connect(&addr, "t", 1, T).unwrap();
        host.set("k", b"v").unwrap();
        assert_eq!(c.get("k", Duration::MAX).unwrap(), b"v");
        assert_eq!(host.get("k", Duration::MAX).unwrap(), b"v");
        let m = crate::InMemoryStore::new();
        m.set("k", b"w").unwrap();
        assert_eq!(m.get("k", Duration::MAX).unwrap(), b"w");
        host.barrier("alone", 0, 1, Duration::MAX).unwrap();
        let c = TcpStore::connect(&addr, "t", 1, Duration::MAX).unwrap();
        assert_eq!(c.try_get("k").unwrap().as_deref(), Some(&b"v"[..]));
    }

    #[test]
    fn a_peer_given_port_0_is_told_at_once() {
        let t = Instant::now();
        let e = TcpStore::connect("127.0.0.1:0", "t", 1, T).unwrap_err();
        assert!(e.to_string().contains("port 0"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn tokens_longer_than_a_hello_carries_are_refused_at_once() {
        let long = "t".repeat(MAX_TOKEN_BYTES + 1);
        let at = std::time::Instant::now();
        for e in [
            TcpStore::host("127.0.0.1:0", &long).err(),
            TcpStore::connect("127.0.0.1:9", &long, 1, Duration::from_secs(30)).err(),
        ] {
            let e = e.expect("refused").to_string();
            assert!(e.contains("job token") && e.contains("at most 4096"), "{e}");
        }
        // Refused before any retry loop: no wait for the 30 s timeout.
        assert!(at.elapsed() < Duration::from_secs(10));
        let longest = "t".repeat(MAX_TOKEN_BYTES);
        let (_host, addr) = pair(&longest);
        TcpStore::connect(&addr, &longest, 1, Duration::from_secs(10)).unwrap();
    }

    #[test]
    fn wrong_token_is_refused() {
        let (_host, addr) = pair("right");
        let e = TcpStore::connect(&addr, "wrong", 1, T).unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied, "{e}");
        assert!(e.to_string().contains("wrong token"), "{e}");
    }

    #[test]
    fn a_stranger_speaking_another_protocol_is_refused() {
        let (host, addr) = pair("t");
        let mut s = TcpStream::connect(&addr).unwrap();
        s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let mut buf = Vec::new();
        s.set_read_timeout(Some(T)).unwrap();
        let _ = s.read_to_end(&mut buf);
        // Whatever it got back, the host still serves its own clients.
        let c = TcpStore::connect(&addr, "t", 1, T).unwrap();
        c.set("x", b"y").unwrap();
        assert_eq!(host.try_get("x").unwrap().as_deref(), Some(&b"y"[..]));
    }

    #[test]
    fn hellos_with_an_impossible_process_id_or_no_bytes_are_refused_with_a_reason() {
        // A process id connect() would never send, and an empty hello frame: both get a
        // `refused` answer saying why (the first used to be let in and listed as a peer,
        // the second had the connection dropped without a word).
        let (_host, addr) = pair("t");
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write_frame(
            &mut s,
            &[&[OP_HELLO], PROTOCOL_MAGIC, &u32::MAX.to_be_bytes(), b"t"],
        )
        .unwrap();
        let reply = raw_reply(&mut s).unwrap();
        assert_eq!(reply[0], R_REFUSED);
        assert!(String::from_utf8_lossy(&reply[1..]).contains("out of range"));
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write_frame(&mut s, &[]).unwrap();
        let reply = raw_reply(&mut s).unwrap();
        assert_eq!(reply[0], R_REFUSED);
        assert!(String::from_utf8_lossy(&reply[1..]).contains("bad hello"));
    }

    /// A joined raw connection to `addr` (hello with token `t` answered).
    fn joined(addr: &str) -> TcpStream {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write_frame(
            &mut s,
            &[&[OP_HELLO], PROTOCOL_MAGIC, &1u32.to_be_bytes(), b"t"],
        )
        .unwrap();
        assert_eq!(raw_reply(&mut s).unwrap(), [R_OK]);
        s
    }

    #[test]
    fn malformed_requests_are_answered_with_an_error_naming_them() {
        // Valid requests, then damaged copies: truncated, extended, with length fields set
        // to 0, huge or just past the end, other op bytes, keys that are not UTF-8. Each
        // gets a reply frame (never a dropped connection or a wait), and the host serves
        // well-formed requests afterwards.
        let (host, addr) = pair("t");
        host.set("k", b"v").unwrap();
        let set = [&[OP_SET][..], &1u32.to_be_bytes(), b"k", b"value"].concat();
        let get = [&[OP_GET][..], &0u64.to_be_bytes(), b"k"].concat();
        let try_get = [&[OP_TRY_GET][..], b"k"].concat();
        let peer = [&[OP_PEER][..], &1u32.to_be_bytes()].concat();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut s = joined(&addr);
        for round in 0..400 {
            let mut req = [&set, &get, &try_get, &peer][round % 4].clone();
            let at = 1 + next() as usize % req.len().max(2).saturating_sub(1).max(1);
            match next() % 6 {
                0 => req.truncate(at.min(req.len())),
                1 => req.extend((0..next() % 9).map(|_| next() as u8)),
                2 if req.len() >= at + 4 => {
                    let v = [0u32, 1, u32::MAX, req.len() as u32 - 4][next() as usize % 4];
                    req[at..at + 4].copy_from_slice(&v.to_be_bytes());
                }
                3 => req[0] = next() as u8,
                4 => {
                    let last = req.len() - 1;
                    req[last] = 0xff;
                }
                _ => {
                    let i = next() as usize % req.len();
                    req[i] ^= 1 << (next() % 8);
                }
            }
            // A get that would wait for a key nobody sets asks for no wait.
            if req[0] == OP_GET && req.len() >= 9 {
                req[1..9].copy_from_slice(&0u64.to_be_bytes());
            }
            if req.is_empty() {
                continue;
            }
            write_frame(&mut s, &[&req]).unwrap();
            let reply = raw_reply(&mut s).unwrap_or_else(|| panic!("no reply to {req:?}"));
            assert!(
                [R_OK, R_NOT_FOUND, R_TIMEOUT, R_ERROR].contains(&reply[0]),
                "{req:?}: {reply:?}"
            );
            if reply[0] == R_ERROR {
                let why = String::from_utf8_lossy(&reply[1..]);
                assert!(
                    ["malformed", "truncated", "not UTF-8"]
                        .iter()
                        .any(|w| why.contains(w)),
                    "{req:?}: {why}"
                );
            }
        }
        let c = TcpStore::connect(&addr, "t", 1, T).unwrap();
        c.set("after", b"ok").unwrap();
        assert_eq!(host.try_get("after").unwrap().as_deref(), Some(&b"ok"[..]));
    }

    /// A hello cut short after the magic (no full process id) is answered as a bad hello,
    /// not as a wrong token: nothing about the token was wrong.
    #[test]
    fn a_hello_without_a_process_id_is_a_bad_hello() {
        let (_host, addr) = pair("t");
        for extra in 0..4usize {
            let mut s = TcpStream::connect(&addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let hello = [&[OP_HELLO][..], PROTOCOL_MAGIC, &vec![0u8; extra]].concat();
            write_frame(&mut s, &[&hello]).unwrap();
            let reply = raw_reply(&mut s).expect("a refusal");
            assert_eq!(reply[0], R_REFUSED);
            let why = String::from_utf8_lossy(&reply[1..]);
            assert!(why.contains("bad hello"), "{} bytes: {why}", hello.len());
        }
    }

    /// Reads one reply frame from a raw connection: `None` when the host closed it.
    fn raw_reply(s: &mut TcpStream) -> Option<Vec<u8>> {
        read_frame(s).ok()
    }

    #[test]
    fn a_hello_claiming_a_huge_frame_is_refused_at_once() {
        let (host, addr) = pair("t");
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut start = (MAX_FRAME as u32).to_be_bytes().to_vec();
        start.extend_from_slice(&[OP_HELLO]);
        start.extend_from_slice(PROTOCOL_MAGIC);
        start.extend_from_slice(&1u32.to_be_bytes());
        s.write_all(&start).unwrap();
        // Refused without waiting for (or allocating) the 64 MiB it claims.
        let t = Instant::now();
        let reply = raw_reply(&mut s).expect("a refusal, not a silent wait");
        assert_eq!(reply[0], R_REFUSED);
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        // A client whose wrong token is longer than the job's is still told why.
        for len in [100, MAX_TOKEN_BYTES] {
            let e = TcpStore::connect(&addr, &"x".repeat(len), 1, T).unwrap_err();
            assert!(e.to_string().contains("wrong token"), "{e}");
        }
        // A hello longer than any token (which no rpjrt client sends) is refused as such.
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut hello = vec![OP_HELLO];
        hello.extend_from_slice(PROTOCOL_MAGIC);
        hello.extend_from_slice(&1u32.to_be_bytes());
        hello.extend_from_slice(&[b'x'; 10_000]);
        let mut frame = (hello.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&hello);
        s.write_all(&frame).unwrap();
        let reply = raw_reply(&mut s).expect("a refusal");
        assert_eq!(reply[0], R_REFUSED);
        assert!(String::from_utf8_lossy(&reply[1..]).contains("longer than any"));
        let c = TcpStore::connect(&addr, "t", 1, T).unwrap();
        c.set("k", b"v").unwrap();
        assert_eq!(host.try_get("k").unwrap().as_deref(), Some(&b"v"[..]));
    }

    #[test]
    fn a_hello_sent_a_byte_at_a_time_is_cut_off_at_the_hello_timeout() {
        let (_host, addr) = pair("t");
        let mut s = TcpStream::connect(&addr).unwrap();
        s.write_all(&100u32.to_be_bytes()).unwrap();
        let t = Instant::now();
        // One byte every 300 ms keeps each read short of the timeout; the hello as a whole
        // is not allowed more than HELLO_TIMEOUT.
        let closed = loop {
            std::thread::sleep(Duration::from_millis(300));
            if s.write_all(&[OP_HELLO]).is_err() {
                break true;
            }
            let mut probe = [0u8; 1];
            s.set_nonblocking(true).unwrap();
            let r = s.read(&mut probe);
            s.set_nonblocking(false).unwrap();
            if matches!(r, Ok(0)) || matches!(&r, Err(e) if e.kind() != io::ErrorKind::WouldBlock) {
                break true;
            }
            if t.elapsed() > HELLO_TIMEOUT + Duration::from_secs(3) {
                break false;
            }
        };
        assert!(closed, "the host still waited after {:?}", t.elapsed());
        assert!(
            t.elapsed() < HELLO_TIMEOUT + Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn a_host_answering_a_byte_at_a_time_cannot_stretch_a_call_past_its_bound() {
        // A "host" that takes the hello, then dribbles a 100-byte reply one byte per 200 ms
        // (each read well inside the timeout, the reply far outside it).
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let _ = read_frame(&mut s);
            let _ = s.write_all(&100u32.to_be_bytes());
            for _ in 0..100 {
                std::thread::sleep(Duration::from_millis(200));
                if s.write_all(&[R_OK]).is_err() {
                    break;
                }
            }
        });
        let t = Instant::now();
        let e = TcpStore::connect(&addr, "t", 1, Duration::from_secs(1)).unwrap_err();
        assert!(
            t.elapsed() < Duration::from_secs(4),
            "{:?}: {e}",
            t.elapsed()
        );
        assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
        drop(server);
    }

    #[test]
    fn another_service_at_the_address_is_named_as_such() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            for _ in 0..100 {
                let Ok((mut s, _)) = listener.accept() else {
                    break;
                };
                let mut buf = [0u8; 64];
                let _ = s.read(&mut buf);
                let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
            }
        });
        let e = TcpStore::connect(&addr, "t", 1, Duration::from_millis(500)).unwrap_err();
        assert!(e.to_string().contains("it starts with \"HTTP\""), "{e}");
        drop(server);
    }

    #[test]
    fn missing_host_times_out_naming_process_0() {
        // A port that was free a moment ago and is closed now.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let start = Instant::now();
        let e = TcpStore::connect(
            &format!("127.0.0.1:{port}"),
            "t",
            1,
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
        assert!(e.to_string().contains("process 0"), "{e}");
    }

    #[test]
    fn shutdown_leaves_nothing_listening_and_fails_clients_cleanly() {
        let (host, addr) = pair("t");
        let c = TcpStore::connect(&addr, "t", 1, T).unwrap();
        let c = Arc::new(c);
        let c2 = Arc::clone(&c);
        let waiter = std::thread::spawn(move || c2.get("never", Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(100));
        let start = Instant::now();
        host.shutdown();
        let e = waiter.join().unwrap().unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(5), "{e}");
        assert_eq!(e.code(), Code::Unavailable, "{e}");
        assert!(
            TcpStream::connect(&addr).is_err(),
            "still listening on {addr}"
        );
        host.shutdown();
        assert_eq!(
            host.set("a", b"").unwrap_err().code(),
            Code::FailedPrecondition
        );
    }

    #[test]
    fn barrier_over_tcp_names_the_missing_process() {
        let (host, addr) = pair("t");
        let host = Arc::new(host);
        let h = Arc::clone(&host);
        let t0 = std::thread::spawn(move || h.barrier("b", 0, 3, Duration::from_millis(300)));
        let c = TcpStore::connect(&addr, "t", 1, T).unwrap();
        let e = c
            .barrier("b", 1, 3, Duration::from_millis(300))
            .unwrap_err();
        assert!(e.to_string().contains("process 2 of 3"), "{e}");
        let e = t0.join().unwrap().unwrap_err();
        assert!(e.to_string().contains("process 2 of 3"), "{e}");
    }

    #[test]
    fn barrier_over_tcp_with_two_world_sizes_fails_at_once_on_both_sides() {
        let (host, addr) = pair("t");
        let host = Arc::new(host);
        let h = Arc::clone(&host);
        let start = Instant::now();
        let t0 = std::thread::spawn(move || h.barrier("sizes", 0, 2, T));
        let c = TcpStore::connect(&addr, "t", 1, T).unwrap();
        let e = c.barrier("sizes", 1, 3, T).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(
            e.to_string().contains(
                "barrier \"sizes\": process 0 arrived with num_processes 2, but this \
                 process (1) was called with num_processes 3"
            ),
            "{e}"
        );
        let e = t0.join().unwrap().unwrap_err();
        assert!(
            e.to_string()
                .contains("process 1 arrived with num_processes 3")
                && e.to_string().contains("num_processes 2"),
            "{e}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn a_barrier_ends_on_time_when_the_host_stops_answering() {
        // A "host" that takes the hello and then never answers a request (as one that was
        // paused with SIGSTOP): each call would wait for the 30 s I/O timeout; the barrier
        // ends at its own timeout plus the grace, naming the silent host.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            let mut held = Vec::new();
            for _ in 0..4 {
                let Ok((mut s, _)) = listener.accept() else {
                    break;
                };
                let _ = read_frame(&mut s);
                let _ = write_frame(&mut s, &[&[R_OK]]);
                held.push(s); // requests are read by no one
            }
            std::thread::sleep(Duration::from_secs(6));
        });
        let c = TcpStore::connect(&addr, "t", 1, Duration::from_secs(30)).unwrap();
        let start = Instant::now();
        let e = c
            .barrier("b", 1, 2, Duration::from_millis(500))
            .unwrap_err();
        let took = start.elapsed();
        assert!(took < Duration::from_secs(3), "{took:?}: {e}");
        assert_eq!(e.code(), Code::Unavailable, "{e}");
        assert!(
            e.to_string().contains("did not answer") && e.to_string().contains(&addr),
            "{e}"
        );
        // Leaving does not wait for the silent host either.
        let start = Instant::now();
        drop(c);
        assert!(
            start.elapsed() < Duration::from_secs(4),
            "{:?}",
            start.elapsed()
        );
        drop(server);
    }

    #[test]
    fn a_process_id_beyond_the_job_limit_is_refused_before_connecting() {
        let e = TcpStore::connect("127.0.0.1:9", "t", crate::MAX_PROCESSES, T).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(e.to_string().contains("largest id"), "{e}");
    }

    #[test]
    fn barrier_fails_fast_naming_a_peer_that_left() {
        let (host, addr) = pair("t");
        let leaver = TcpStore::connect(&addr, "t", 2, T).unwrap();
        let stayer = TcpStore::connect(&addr, "t", 1, T).unwrap();
        drop(leaver);
        let stayer = std::thread::spawn(move || stayer.barrier("b", 1, 3, T));
        let e = host.barrier("b", 0, 3, T).unwrap_err();
        assert_eq!(e.code(), Code::Unavailable, "{e}");
        // It said goodbye (a drop does): named as having left, not as crashed.
        assert!(
            e.to_string()
                .contains("process 2 of 3 left the store (it shut its store down)"),
            "{e}"
        );
        let e = stayer.join().unwrap().unwrap_err();
        assert!(
            e.to_string().contains("process 2 of 3 left the store"),
            "{e}"
        );
        // One that goes without a goodbye (killed) is named as lost: it had joined (made
        // a request, as every client does at once).
        let (host, addr) = pair("t");
        let raw = joined_as(&addr, 1, b"t");
        std::thread::sleep(Duration::from_millis(100));
        drop(raw);
        let e = host.barrier("c", 0, 2, T).unwrap_err();
        assert!(
            e.to_string().contains("process 1 of 2 lost its connection"),
            "{e}"
        );
    }

    #[test]
    fn one_entry_limit_for_every_writer() {
        let (host, addr) = pair("t");
        let c = TcpStore::connect(&addr, "t", 1, T).unwrap();
        // The host's own set obeys the limit peers obey...
        let too_big = vec![7u8; MAX_ENTRY_BYTES];
        let e = host.set("k", &too_big).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(e.to_string().contains(&MAX_ENTRY_BYTES.to_string()), "{e}");
        let e = c.set("k", &too_big).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        // ...and the largest entry either may write is served back whole.
        let largest = vec![9u8; MAX_ENTRY_BYTES - 1];
        host.set("k", &largest).unwrap();
        assert_eq!(c.get("k", T).unwrap(), largest);
        c.set("j", &largest).unwrap();
        assert_eq!(c.try_get("j").unwrap().as_deref(), Some(&largest[..]));
        assert_eq!(host.get("j", T).unwrap(), largest);
    }

    fn env(p: usize, n: usize, addr: &str) -> LaunchEnv {
        LaunchEnv::explicit(p, n, Some(addr.to_string()), Some("j".into())).unwrap()
    }

    #[test]
    fn from_env_returns_once_everyone_joined_and_the_host_waits_for_goodbyes() {
        let addr = format!(
            "127.0.0.1:{}",
            TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        );
        let (a0, a1, a2) = (addr.clone(), addr.clone(), addr.clone());
        let start = Instant::now();
        let host = std::thread::spawn(move || {
            let s = TcpStore::from_env(&env(0, 3, &a0), T).unwrap();
            let joined = start.elapsed();
            // Shut down at once: the host must still serve the peers until they leave.
            let clean = s.shutdown_after(T);
            (joined, clean)
        });
        let early = std::thread::spawn(move || {
            let s = TcpStore::from_env(&env(1, 3, &a1), T).unwrap();
            std::thread::sleep(Duration::from_millis(300));
            s.set("late-write", b"1").unwrap();
            s.shutdown();
        });
        std::thread::sleep(Duration::from_millis(300));
        let s = TcpStore::from_env(&env(2, 3, &a2), T).unwrap();
        let joined_at = start.elapsed();
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(s.get("late-write", T).unwrap(), b"1");
        drop(s); // a drop says goodbye too
        early.join().unwrap();
        let (host_joined, clean) = host.join().unwrap();
        assert!(
            host_joined + Duration::from_millis(50) >= Duration::from_millis(300),
            "the host returned from from_env after {host_joined:?}, before process 2 came \
             ({joined_at:?})"
        );
        assert!(clean, "the host stopped before every peer said goodbye");
        assert!(TcpStream::connect(&addr).is_err(), "still listening");
    }

    #[test]
    fn two_processes_with_one_id_are_told_so() {
        let host = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = host.local_addr().unwrap().to_string();
        drop(host);
        let a = addr.clone();
        let h = std::thread::spawn(move || TcpStore::from_env(&env(0, 2, &a), T));
        let first = {
            let a = addr.clone();
            std::thread::spawn(move || TcpStore::from_env(&env(1, 2, &a), T))
        };
        // The second process with id 1 claims the id after the first did.
        std::thread::sleep(Duration::from_millis(500));
        let second = TcpStore::from_env(&env(1, 2, &addr), T);
        let first = first.join().unwrap();
        let errors: Vec<String> = [&first, &second]
            .iter()
            .filter_map(|r| r.as_ref().err().map(|e| e.to_string()))
            .collect();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains("process id 1 of 2 is used by more than one process"),
            "{errors:?}"
        );
        let host = h.join().unwrap().unwrap();
        drop((first, second));
        host.shutdown_after(Duration::from_secs(2));
    }

    #[test]
    fn from_env_names_a_process_that_never_joins() {
        let (_h, addr) = pair("j");
        let e = TcpStore::from_env(&env(1, 3, &addr), Duration::from_millis(300)).unwrap_err();
        assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
        assert!(
            e.to_string()
                .contains("processes 0, 2 of 3 did not join the job's store"),
            "{e}"
        );
    }

    #[test]
    fn a_closed_client_refuses_further_calls() {
        let (_host, addr) = pair("t");
        let c = TcpStore::connect(&addr, "t", 1, T).unwrap();
        c.shutdown();
        let e = c.set("a", b"1").unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "{e}");
    }

    #[test]
    fn a_reused_barrier_name_waits_again_over_tcp() {
        let (host, addr) = pair("t");
        let host = Arc::new(host);
        let h = Arc::clone(&host);
        let peer = std::thread::spawn(move || h.barrier("b", 0, 2, T));
        let c = TcpStore::connect(&addr, "t", 1, T).unwrap();
        c.barrier("b", 1, 2, T).unwrap();
        peer.join().unwrap().unwrap();
        let e = c
            .barrier("b", 1, 2, Duration::from_millis(300))
            .unwrap_err();
        assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
        assert!(e.to_string().contains("process 0 of 2"), "{e}");
    }

    #[test]
    fn a_peer_killed_inside_a_get_counts_as_gone_at_once() {
        // The host's thread for a connection waiting in a get looked at nothing but the
        // key: a peer killed in a get of a minute stayed "connected" for that minute, so
        // the barrier waited its whole timeout and `shutdown_after` its whole grace.
        let (host, addr) = pair("t");
        let mut s = joined(&addr);
        write_frame(&mut s, &[&[OP_GET], &60_000u64.to_be_bytes(), b"never"]).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(host.peer_state(1, None).unwrap(), PeerState::Connected);
        drop(s); // as the kernel closes a killed process's socket
        let t = Instant::now();
        let e = host
            .barrier("b", 0, 2, Duration::from_secs(20))
            .unwrap_err();
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{:?}: {e}",
            t.elapsed()
        );
        assert_eq!(e.code(), Code::Unavailable, "{e}");
        assert!(
            e.to_string().contains("process 1 of 2 lost its connection"),
            "{e}"
        );
        // Its thread has ended: the host has no connection left to wait for.
        let t = Instant::now();
        assert!(host.shutdown_after(Duration::from_secs(20)));
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn a_silent_client_waiting_in_a_get_is_not_taken_for_gone() {
        // Sending nothing while it waits for its reply is what a client in a get does.
        let (host, addr) = pair("t");
        let mut s = joined(&addr);
        write_frame(&mut s, &[&[OP_GET], &5_000u64.to_be_bytes(), b"later"]).unwrap();
        std::thread::sleep(Duration::from_millis(700));
        assert_eq!(host.peer_state(1, None).unwrap(), PeerState::Connected);
        host.set("later", b"v").unwrap();
        assert_eq!(raw_reply(&mut s).unwrap(), [R_OK, b'v']);
        // A get that runs out is answered as such, on a connection still served.
        write_frame(&mut s, &[&[OP_GET], &300u64.to_be_bytes(), b"never"]).unwrap();
        assert_eq!(raw_reply(&mut s).unwrap(), [R_TIMEOUT]);
        assert_eq!(host.peer_state(1, None).unwrap(), PeerState::Connected);
    }

    #[test]
    fn oversized_keys_are_refused_at_once_on_the_host_and_on_a_peer() {
        // A key longer than any frame: the host waited out a get's timeout for a key no
        // one can set, a peer reported a lost connection (UNAVAILABLE, retryable), and
        // every message held the whole key.
        let (host, addr) = pair("t");
        let c = TcpStore::connect(&addr, "t", 1, T).unwrap();
        let long = "k".repeat(MAX_KEY_BYTES + 1);
        let len = long.len().to_string();
        let wait = Duration::from_secs(30);
        for (who, s, pid) in [("host", &host, 0), ("peer", &c, 1)] {
            let results: [(&str, Result<()>); 4] = [
                ("set", s.set(&long, b"v")),
                ("get", s.get(&long, wait).map(drop)),
                ("try_get", s.try_get(&long).map(drop)),
                ("barrier", s.barrier(&long, pid, 2, wait)),
            ];
            for (op, r) in results {
                let e = r.unwrap_err();
                let m = e.to_string();
                assert_eq!(e.code(), Code::InvalidArgument, "{who} {op}: {m:.300}");
                assert!(m.len() < 400, "{who} {op}: {} bytes: {m:.300}", m.len());
                assert!(
                    m.contains(&len) && m.contains("kkkkkkkk"),
                    "{who} {op}: {m}"
                );
            }
        }
        // All at once, not after a wait; and the peer's connection was never lost.
        c.set("a", b"1").unwrap();
        assert_eq!(c.get("a", T).unwrap(), b"1");
        // The longest key is served to a peer that asks for it.
        let longest = "k".repeat(MAX_KEY_BYTES);
        host.set(&longest, b"").unwrap();
        assert_eq!(c.get(&longest, T).unwrap(), b"");
        assert_eq!(c.try_get(&longest).unwrap().as_deref(), Some(&b""[..]));
    }

    #[test]
    fn a_request_too_large_for_a_frame_is_invalid_not_a_lost_connection() {
        let (_host, addr) = pair("t");
        let c = TcpStore::connect(&addr, "t", 1, T).unwrap();
        let Role::Remote(r) = &c.role else {
            unreachable!()
        };
        let big = vec![0u8; MAX_FRAME];
        let e = r
            .call(&[&[OP_TRY_GET], &big], Duration::ZERO, None, None)
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(e.to_string().contains("message limit"), "{e}");
        c.set("still", b"ok").unwrap();
    }

    #[test]
    fn messages_show_a_long_key_short() {
        let (host, addr) = pair("t");
        let c = TcpStore::connect(&addr, "t", 1, T).unwrap();
        let key = "\u{e9}".repeat(50_000);
        for s in [&host, &c] {
            let e = s.get(&key, Duration::from_millis(50)).unwrap_err();
            assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
            let m = e.to_string();
            assert!(m.len() < 300 && m.contains("100000 bytes"), "{m}");
            let e = s.set(&key, &vec![0u8; MAX_ENTRY_BYTES]).unwrap_err();
            let m = e.to_string();
            assert!(m.len() < 300 && m.contains("100000 bytes"), "{m}");
        }
        let e = host
            .barrier(&key, 0, 2, Duration::from_millis(100))
            .unwrap_err()
            .to_string();
        assert!(e.len() < 400 && e.contains("100000 bytes"), "{e}");
    }

    #[test]
    fn a_restarted_process_is_told_so_not_that_its_id_is_shared() {
        // Process 1 joins (marks its id) and is killed; a restarted process 1 was told
        // that its id "is used by more than one process", a usage error.
        let (_host, addr) = pair("j");
        // The first process 1, killed: it marked its id and closed without a goodbye.
        let mut old = hello_as(&addr, 1, b"j");
        let key = b"rpjrt:member:1";
        let klen = (key.len() as u32).to_be_bytes();
        write_frame(&mut old, &[&[OP_SET], &klen, key, b"the first process 1"]).unwrap();
        assert_eq!(raw_reply(&mut old).unwrap(), [R_OK]);
        drop(old);
        std::thread::sleep(Duration::from_millis(200));
        let e = TcpStore::from_env(&env(1, 3, &addr), T).unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "{e}");
        assert!(
            e.to_string()
                .contains("process 1 of 3 already joined this job and then lost its connection")
                && e.to_string().contains("cannot take a restarted process"),
            "{e}"
        );
        assert!(!e.to_string().contains("more than one process"), "{e}");
    }

    /// A "host" that takes the hello and answers it with `reply` (head and body, sent a
    /// byte every `gap`); returns its address.
    fn odd_host(reply: Vec<u8>, gap: Duration) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while let Ok((mut s, _)) = listener.accept() {
                let _ = read_frame(&mut s);
                let mut t = s.try_clone().unwrap();
                let reply = reply.clone();
                std::thread::spawn(move || {
                    for b in reply {
                        if t.write_all(&[b]).is_err() {
                            break;
                        }
                        std::thread::sleep(gap);
                    }
                });
                held.push(s);
            }
        });
        addr
    }

    #[test]
    fn a_trickled_or_huge_reply_is_named_not_an_os_error() {
        // The body of a reply read past its deadline surfaced as "Resource temporarily
        // unavailable (os error 11)".
        let trickle = odd_host(
            [&5u32.to_be_bytes()[..], &[R_OK], b"abcd"].concat(),
            Duration::from_millis(300),
        );
        let e = TcpStore::connect(&trickle, "t", 1, Duration::from_secs(1))
            .unwrap_err()
            .to_string();
        assert!(!e.contains("os error"), "{e}");
        assert!(
            e.contains("the 5-byte reply did not come whole in time"),
            "{e}"
        );
        // A hello answered with a 64 MiB frame: refused unread, naming the limit.
        let huge = odd_host((MAX_FRAME as u32).to_be_bytes().to_vec(), Duration::ZERO);
        let t = Instant::now();
        let e = TcpStore::connect(&huge, "t", 1, Duration::from_secs(1))
            .unwrap_err()
            .to_string();
        assert!(!e.contains("os error"), "{e}");
        assert!(
            e.contains(&format!("a reply frame of {MAX_FRAME} bytes"))
                && e.contains(&format!("the {MAX_HELLO_REPLY} bytes")),
            "{e}"
        );
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn eight_clients_a_thousand_keys_each() {
        let (_host, addr) = pair("t");
        crate::tests_support::hammer(|i| {
            Arc::new(TcpStore::connect(&addr, "t", i + 1, T).unwrap()) as Arc<dyn KvStore>
        });
    }

    /// A free port on 127.0.0.1, as an address.
    fn free_addr() -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    }

    /// A raw connection that said hello as `pid` with `token` and was let in.
    fn hello_as(addr: &str, pid: u32, token: &[u8]) -> TcpStream {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write_frame(
            &mut s,
            &[&[OP_HELLO], PROTOCOL_MAGIC, &pid.to_be_bytes(), token],
        )
        .unwrap();
        assert_eq!(raw_reply(&mut s).unwrap(), [R_OK]);
        s
    }

    /// [`hello_as`], then a request (as every client of ours makes at once: its claim),
    /// answered: process `pid` has joined.
    fn joined_as(addr: &str, pid: u32, token: &[u8]) -> TcpStream {
        let mut s = hello_as(addr, pid, token);
        write_frame(&mut s, &[&[OP_TRY_GET], b"k"]).unwrap();
        assert_eq!(raw_reply(&mut s).unwrap(), [R_NOT_FOUND]);
        s
    }

    #[test]
    fn a_stray_hello_that_made_no_request_is_not_a_process() {
        // It made the host's barrier fail at once: "process 1 of 2 lost its connection",
        // though process 1 had not started; the real process 1 then joins.
        for garbage in [false, true] {
            let (host, addr) = pair("t");
            let mut raw = hello_as(&addr, 1, b"t");
            if garbage {
                let _ = raw.write_all(&[0, 0, 0, 3, 0xee, 1, 2]);
                let _ = raw_reply(&mut raw);
            }
            drop(raw);
            std::thread::sleep(Duration::from_millis(300));
            let a = addr.clone();
            let real = std::thread::spawn(move || {
                let p1 = TcpStore::connect(&a, "t", 1, T).unwrap();
                p1.barrier("b", 1, 2, T)
            });
            host.barrier("b", 0, 2, T).unwrap();
            real.join().unwrap().unwrap();
        }
    }

    /// Hosts a job of two from `addr` in a thread, which returns how long the host's
    /// `shutdown_after` (of 20 s) took once `from_env` returned, and whether it was clean.
    fn host_of_two(addr: &str) -> JoinHandle<(Duration, bool)> {
        let a = addr.to_string();
        let h = std::thread::spawn(move || {
            let s = TcpStore::from_env(&env(0, 2, &a), Duration::from_secs(20)).unwrap();
            let t = Instant::now();
            let clean = s.shutdown_after(Duration::from_secs(20));
            (t.elapsed(), clean)
        });
        // The host is up before the callers connect.
        let until = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).is_err() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        h
    }

    #[test]
    fn a_silent_connection_does_not_hold_the_host_after_everyone_left() {
        // The host waited for every connection's thread to end, a connection that never
        // said hello included: it stayed up for the 5 s hello deadline after the job.
        let addr = free_addr();
        let host = host_of_two(&addr);
        let silent = TcpStream::connect(&addr).unwrap();
        let peer = TcpStore::from_env(&env(1, 2, &addr), T).unwrap();
        drop(peer); // says goodbye
        let (took, clean) = host.join().unwrap();
        assert!(clean);
        assert!(took < Duration::from_secs(3), "the host stayed {took:?}");
        drop(silent);
    }

    #[test]
    fn a_connection_left_open_under_a_peers_id_does_not_hold_the_host() {
        // A connection that said hello as process 1 and stayed open, then the real
        // process 1: the host waited for that connection to close, for its whole grace.
        let addr = free_addr();
        let host = host_of_two(&addr);
        let extra = hello_as(&addr, 1, b"j");
        let peer = TcpStore::from_env(&env(1, 2, &addr), T).unwrap();
        drop(peer);
        let (took, clean) = host.join().unwrap();
        assert!(clean);
        assert!(took < Duration::from_secs(5), "the host stayed {took:?}");
        drop(extra);
    }

    /// A reader of keys `k0`..`k4` on `store`, pausing `pause` before each; returns what
    /// it saw (`"ok"` or the first error) and shuts the store down when `close`.
    fn reader(store: Arc<TcpStore>, pause: Duration, close: bool) -> JoinHandle<String> {
        std::thread::spawn(move || {
            let mut seen = "ok".to_string();
            for i in 0..5 {
                std::thread::sleep(pause);
                if let Err(e) = store.get(&format!("k{i}"), Duration::from_secs(5)) {
                    seen = e.to_string();
                    break;
                }
            }
            if close {
                store.shutdown();
            }
            seen
        })
    }

    #[test]
    fn a_peer_that_reconnects_after_its_goodbye_is_waited_for() {
        // Process 1 said goodbye, connected again as process 1 and went on reading: the
        // host took the old goodbye for the new connection's and cut it off at once,
        // saying the shutdown was clean.
        let (host, addr) = pair("t");
        let first = TcpStore::connect(&addr, "t", 1, T).unwrap();
        first.set("phase1", b"x").unwrap();
        first.shutdown();
        let again = Arc::new(TcpStore::connect(&addr, "t", 1, T).unwrap());
        let read = reader(Arc::clone(&again), Duration::from_millis(300), true);
        for i in 0..5 {
            host.set(&format!("k{i}"), b"v").unwrap();
        }
        let t = Instant::now();
        let clean = host.shutdown_after(Duration::from_secs(20));
        assert_eq!(read.join().unwrap(), "ok");
        assert!(clean, "cut off after {:?}", t.elapsed());
        assert!(
            t.elapsed() >= Duration::from_millis(1400),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn a_peer_cut_off_when_the_grace_runs_out_is_not_a_clean_shutdown() {
        // The re-joined process never leaves: the host waits for it the whole grace, and
        // says it did not end cleanly.
        let (host, addr) = pair("t");
        TcpStore::connect(&addr, "t", 1, T).unwrap().shutdown();
        let again = TcpStore::connect(&addr, "t", 1, T).unwrap();
        let t = Instant::now();
        assert!(!host.shutdown_after(Duration::from_millis(1500)));
        assert!(
            t.elapsed() >= Duration::from_millis(1400),
            "{:?}",
            t.elapsed()
        );
        let e = again.try_get("k").unwrap_err();
        assert_eq!(e.code(), Code::Unavailable, "{e}");
    }

    #[test]
    fn a_process_using_a_second_client_after_closing_one_is_waited_for() {
        // Process 1 holds two clients and closes one (its goodbye) while using the other:
        // the host cut the other off, saying the shutdown was clean. Its first request
        // comes a little after the goodbye and after the host began to shut down.
        for pause in [Duration::ZERO, Duration::from_millis(300)] {
            let (host, addr) = pair("t");
            let a = TcpStore::connect(&addr, "t", 1, T).unwrap();
            let b = Arc::new(TcpStore::connect(&addr, "t", 1, T).unwrap());
            a.shutdown();
            let read = reader(Arc::clone(&b), pause, true);
            for i in 0..5 {
                host.set(&format!("k{i}"), b"v").unwrap();
            }
            let clean = host.shutdown_after(Duration::from_secs(20));
            assert_eq!(read.join().unwrap(), "ok", "pause {pause:?}");
            assert!(clean, "pause {pause:?}");
        }
    }

    #[test]
    fn a_request_in_progress_across_a_goodbye_holds_the_host() {
        // Process 1's second client waits in a get when its first client says goodbye;
        // the key comes after the leftover allowance: the get is answered, and the
        // connection (active since) is waited for until it closes.
        let (host, addr) = pair("t");
        let host = Arc::new(host);
        let a = TcpStore::connect(&addr, "t", 1, T).unwrap();
        let b = Arc::new(TcpStore::connect(&addr, "t", 1, T).unwrap());
        let b2 = Arc::clone(&b);
        let waiter = std::thread::spawn(move || {
            let v = b2.get("late", Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(500));
            let after = b2.try_get("late");
            b2.shutdown();
            (v, after)
        });
        std::thread::sleep(Duration::from_millis(200));
        a.shutdown();
        let h2 = Arc::clone(&host);
        let setter = std::thread::spawn(move || {
            std::thread::sleep(LEFTOVER_SETTLE + Duration::from_millis(500));
            h2.set("late", b"v").unwrap();
        });
        let clean = host.shutdown_after(Duration::from_secs(20));
        setter.join().unwrap();
        let (v, after) = waiter.join().unwrap();
        assert_eq!(v.unwrap(), b"v");
        assert_eq!(after.unwrap().as_deref(), Some(&b"v"[..]));
        assert!(clean);
    }

    #[test]
    fn a_host_whose_join_failed_ends_promptly() {
        // Process 1 joins (a hello and a request) and closes: it counts as gone, the join fails
        // at once, and the host's wait for its peers ends with it.
        let addr = free_addr();
        let a = addr.clone();
        let t = Instant::now();
        let host = std::thread::spawn(move || {
            TcpStore::from_env(&env(0, 2, &a), Duration::from_secs(20)).map(drop)
        });
        let until = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(&addr).is_err() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        let silent = TcpStream::connect(&addr).unwrap();
        drop(joined_as(&addr, 1, b"j"));
        let e = host.join().unwrap().unwrap_err();
        assert!(
            t.elapsed() < Duration::from_secs(8),
            "{:?}: {e}",
            t.elapsed()
        );
        assert!(
            e.to_string().contains("process 1 of 2 lost its connection"),
            "{e}"
        );
        assert!(TcpStream::connect(&addr).is_err(), "still listening");
        drop(silent);
    }

    #[test]
    fn a_long_address_is_shortened_in_messages() {
        // A 100 KB address was echoed whole in the error.
        let long = format!("{}:1", "a".repeat(100_000));
        for e in [
            TcpStore::connect(&long, "t", 1, Duration::from_millis(100)).unwrap_err(),
            TcpStore::host(&long, "t").unwrap_err(),
        ] {
            let m = e.to_string();
            assert!(m.len() < 400, "{} bytes: {}", m.len(), &m[..400]);
            assert!(m.contains("(100002 bytes)"), "{m}");
        }
        // A short one is quoted whole.
        let m = TcpStore::connect("127.0.0.1:0", "t", 1, T)
            .unwrap_err()
            .to_string();
        assert!(m.contains("\"127.0.0.1:0\" has port 0"), "{m}");
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

    #[test]
    fn a_store_seen_from_another_fork_generation_refuses_every_call() {
        // A fork seen without forking: the stores claim another generation.
        let (mut host, addr) = pair("t");
        let peer = TcpStore::connect(&addr, "t", 1, T).unwrap();
        let mut other = TcpStore::connect(&addr, "t", 2, T).unwrap();
        host.set("k", b"v").unwrap();
        assert_eq!(other.get("k", T).unwrap(), b"v");
        other.origin.generation = other.origin.generation.wrapping_add(1);
        host.origin.generation = host.origin.generation.wrapping_add(1);
        for s in [&other, &host] {
            assert!(refused_as_forked(s.get("k", T)));
            assert!(refused_as_forked(s.set("k", b"w")));
            assert!(refused_as_forked(s.try_get("k")));
            assert!(refused_as_forked(s.barrier("b", 2, 3, T)));
            assert!(refused_as_forked(s.check_not_forked()));
            assert!(!s.shutdown_after(T));
            s.shutdown();
        }
        // Neither shutdown nor drop said goodbye for process 2 (its drop only closes its
        // connection), and the host still serves.
        drop(other);
        host.origin = Origin::here();
        assert_eq!(host.try_get(&goodbye_key(2)).unwrap(), None);
        assert_eq!(peer.get("k", T).unwrap(), b"v");
        peer.check_not_forked().unwrap();
    }

    #[test]
    fn a_shutdown_in_another_thread_ends_a_hosts_grace_at_once() {
        // Python's `shutdown(grace)` stops the host at once on Ctrl-C: the wait it gave up
        // on (in another thread) must end with it, not hold the store for the grace.
        let (host, addr) = pair("t");
        let peer = TcpStore::connect(&addr, "t", 1, T).unwrap();
        let mut host = host;
        host.members = Some(2);
        let started = Instant::now();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| host.shutdown_after(Duration::from_secs(60)));
            std::thread::sleep(Duration::from_millis(200));
            host.shutdown();
            assert!(!waiter.join().unwrap(), "process 1 had not left");
        });
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        // Once every peer left, a later shutdown reports a clean end, as before.
        drop(peer);
        let (mut h2, addr2) = pair("t");
        h2.members = Some(2);
        let p2 = TcpStore::connect(&addr2, "t", 1, T).unwrap();
        p2.shutdown();
        assert!(h2.shutdown_after(T));
        assert!(h2.shutdown_after(T));
    }

    #[test]
    fn a_call_that_times_out_leaves_its_live_process_connected() {
        // The call's connection is dropped (never reused) when its answer is late; when it
        // was the process's only one, the host counted the live process as gone.
        let (host, addr) = pair("t");
        let peer = TcpStore::connect(&addr, "t", 1, T).unwrap();
        let Role::Remote(r) = &peer.role else {
            unreachable!()
        };
        // A get the host holds for 5 s, whose answer is wanted within 50 ms.
        let ms = 5000u64.to_be_bytes();
        let head_by = Instant::now() + Duration::from_millis(50);
        let e = r
            .call(
                &[&[OP_GET], &ms, b"never"],
                Duration::ZERO,
                None,
                Some(head_by),
            )
            .unwrap_err();
        assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
        assert!(e.to_string().contains("did not answer within"), "{e}");
        assert!(
            r.pool.lock().unwrap().is_empty(),
            "the late connection was kept"
        );
        // The host's thread for the dropped connection ends within its hang-up check.
        std::thread::sleep(Duration::from_millis(300));
        let Role::Host(h) = &host.role else {
            unreachable!()
        };
        assert_eq!(h.shared.peer_info(1), (PeerState::Connected, 1));
        // The peer goes on: a new connection for the next call.
        peer.set("k", b"v").unwrap();
        assert_eq!(host.get("k", T).unwrap(), b"v");
    }

    #[test]
    fn a_host_shutting_down_turns_away_only_the_processes_that_left_it() {
        let (mut host, addr) = pair("t");
        host.members = Some(3);
        let leaver = TcpStore::connect(&addr, "t", 1, T).unwrap();
        let stayer = TcpStore::connect(&addr, "t", 2, T).unwrap();
        leaver.shutdown();
        let host = Arc::new(host);
        let h = Arc::clone(&host);
        let closing = std::thread::spawn(move || h.shutdown_after(Duration::from_secs(20)));
        std::thread::sleep(Duration::from_millis(300));
        // Process 1 said goodbye: turned away, in words a connect retries on.
        let hello = |pid: u32| {
            let mut s = TcpStream::connect(&addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            write_frame(
                &mut s,
                &[&[OP_HELLO], PROTOCOL_MAGIC, &pid.to_be_bytes(), b"t"],
            )
            .unwrap();
            (raw_reply(&mut s).unwrap(), s)
        };
        let (reply, _) = hello(1);
        assert_eq!(reply[0], R_CLOSING, "{:?}", String::from_utf8_lossy(&reply));
        let why = String::from_utf8_lossy(&reply[1..]).to_string();
        assert!(
            why.contains("shutting down") && why.contains("process 1"),
            "{why}"
        );
        let e = TcpStore::connect(&addr, "t", 1, Duration::from_millis(300)).unwrap_err();
        assert!(e.to_string().contains("is shutting down"), "{e}");
        // Process 2, still in the job, gets a new connection.
        let (reply, extra) = hello(2);
        assert_eq!(reply, [R_OK]);
        drop(extra);
        drop(stayer);
        assert!(closing.join().unwrap());
    }
}
