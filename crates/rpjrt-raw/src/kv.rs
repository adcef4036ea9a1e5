//! The key-value callbacks of `PJRT_Client_Create`: `extern "C"` trampolines over a
//! [`KvBackend`] (the safe layer's store), each run inside [`super::callback::guard`] so a panic never reaches C.
//!
//! The plugin may call these from any of its threads, during client creation and later
//! (GPU plugins exchange collective ids through the store at execution time), so the store
//! lives in a box owned by the client core until the C client is destroyed.

use std::ffi::{c_char, c_void};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rpjrt_sys as sys;

use super::callback::guard;
use super::{Api, Args};
use crate::error::Code;

super::args_types! {
    PJRT_KeyValueGetCallback_Args => PJRT_KeyValueGetCallback_Args_STRUCT_SIZE,
    PJRT_KeyValueTryGetCallback_Args => PJRT_KeyValueTryGetCallback_Args_STRUCT_SIZE,
    PJRT_KeyValuePutCallback_Args => PJRT_KeyValuePutCallback_Args_STRUCT_SIZE,
}

/// The PJRT minor version that added `kv_try_get_callback` to `PJRT_Client_Create_Args`.
pub const KV_TRY_GET_SINCE_MINOR: i32 = 61;

/// The store the trampolines call; the safe layer adapts its `KvStore` to this.
pub trait KvBackend: Send + Sync {
    /// Stores a value.
    fn set(&self, key: &str, value: &[u8]) -> crate::error::Result<()>;
    /// Waits up to `timeout` for a key.
    fn get(&self, key: &str, timeout: Duration) -> crate::error::Result<Vec<u8>>;
    /// A key's value now, if set.
    fn try_get(&self, key: &str) -> crate::error::Result<Option<Vec<u8>>>;
}

/// What the callbacks' `user_arg` points to. Kept in an `Arc` so its address is stable.
pub struct KvUserData {
    store: Arc<dyn KvBackend>,
}

impl KvUserData {
    /// User data for the callbacks, serving `store`.
    pub fn new(store: Arc<dyn KvBackend>) -> KvUserData {
        KvUserData { store }
    }
    fn as_arg(&self) -> *mut c_void {
        (self as *const KvUserData).cast_mut().cast()
    }
}

fn code_number(code: Code) -> sys::PJRT_Error_Code {
    code.number() as sys::PJRT_Error_Code
}

/// Builds the plugin's error through the `callback_error` function it passed in.
///
/// # Safety
/// `callback_error` must be the pointer from a live callback args struct (or null).
unsafe fn report(
    callback_error: *mut Option<sys::PJRT_CallbackError>,
    code: Code,
    message: &str,
) -> *mut sys::PJRT_Error {
    if callback_error.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: the plugin passes a pointer to its error-making function, valid during the
    // callback (caller's contract).
    let Some(f) = (unsafe { callback_error.read() }) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the plugin's function copies the message before returning.
    unsafe { f(code_number(code), message.as_ptr().cast(), message.len()) }
}

/// Size of the length header in front of each value we hand out.
const HEADER: usize = std::mem::size_of::<usize>();

/// Copies `v` into a buffer the plugin frees with [`free_value`]: the length is kept in a
/// header just before the bytes, since the deleter receives only the pointer.
fn alloc_value(v: &[u8]) -> (*mut c_char, usize) {
    let mut buf = Vec::with_capacity(HEADER + v.len());
    buf.extend_from_slice(&v.len().to_ne_bytes());
    buf.extend_from_slice(v);
    let raw = Box::into_raw(buf.into_boxed_slice()).cast::<u8>();
    // SAFETY: the allocation is HEADER + len bytes long, so HEADER is inside it.
    (unsafe { raw.add(HEADER) }.cast(), v.len())
}

/// The value deleter we give the plugin.
unsafe extern "C" fn free_value(value: *mut c_char) {
    if value.is_null() {
        return;
    }
    guard(|| {
        // SAFETY: `value` came from `alloc_value`, so the header precedes it inside the same
        // allocation, and the plugin frees each value once.
        unsafe {
            let start = value.cast::<u8>().sub(HEADER);
            let mut len = [0u8; HEADER];
            std::ptr::copy_nonoverlapping(start, len.as_mut_ptr(), HEADER);
            let len = usize::from_ne_bytes(len);
            let slice = std::ptr::slice_from_raw_parts_mut(start, HEADER + len);
            drop(Box::from_raw(slice));
        }
    });
}

/// Reads a (pointer, length) key.
///
/// # Safety
/// `key` must point to `len` readable bytes (or be null).
unsafe fn read_key<'a>(key: *const c_char, len: usize) -> std::result::Result<&'a str, String> {
    if key.is_null() {
        return if len == 0 {
            Ok("")
        } else {
            Err("the plugin passed a null key".into())
        };
    }
    // SAFETY: caller's contract.
    let bytes = unsafe { std::slice::from_raw_parts(key.cast::<u8>(), len) };
    std::str::from_utf8(bytes).map_err(|_| "the plugin passed a key that is not UTF-8".into())
}

/// What the three callbacks' argument structs share.
trait KvArgs {
    /// The key as the plugin passed it.
    fn key(&self) -> (*const c_char, usize);
    /// The `user_arg` we registered (a `KvUserData`).
    fn user_arg(&self) -> *mut c_void;
    /// The plugin's error constructor.
    fn callback_error(&self) -> *mut Option<sys::PJRT_CallbackError>;
}

/// The two getters' argument structs, which return a value to the plugin.
trait KvValueOut {
    /// Hands `v` to the plugin, with [`free_value`] as its deleter.
    fn set_value(&mut self, v: &[u8]);
}

macro_rules! kv_args {
    ($($t:ident),*) => {$(
        impl KvArgs for sys::$t {
            fn key(&self) -> (*const c_char, usize) {
                (self.key, self.key_size)
            }
            fn user_arg(&self) -> *mut c_void {
                self.user_arg
            }
            fn callback_error(&self) -> *mut Option<sys::PJRT_CallbackError> {
                self.callback_error
            }
        }
    )*};
}
kv_args!(
    PJRT_KeyValueGetCallback_Args,
    PJRT_KeyValueTryGetCallback_Args,
    PJRT_KeyValuePutCallback_Args
);

macro_rules! kv_value_out {
    ($($t:ident),*) => {$(
        impl KvValueOut for sys::$t {
            fn set_value(&mut self, v: &[u8]) {
                let (ptr, len) = alloc_value(v);
                self.value = ptr;
                self.value_size = len;
                self.value_deleter_callback = Some(free_value);
            }
        }
    )*};
}
kv_value_out!(
    PJRT_KeyValueGetCallback_Args,
    PJRT_KeyValueTryGetCallback_Args
);

/// One callback: inside the panic guard, reads the key and the store from `args`, runs
/// `body` and reports its error (or a panic) through the plugin's `callback_error`.
///
/// # Safety
/// `args` is null or the plugin's args struct, valid for the duration of the call, whose
/// key fields address `key_size` bytes and whose `user_arg` is the [`KvUserData`] we passed
/// (it outlives the client).
unsafe fn serve<A: KvArgs>(
    args: *mut A,
    body: impl FnOnce(&mut A, &dyn KvBackend, &str) -> std::result::Result<(), (Code, String)>,
) -> *mut sys::PJRT_Error {
    if args.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: the caller's contract: a valid args struct for the duration of the call.
    let a = unsafe { &mut *args };
    let callback_error = a.callback_error();
    let outcome = guard(|| -> std::result::Result<(), (Code, String)> {
        let (key, len) = a.key();
        // SAFETY: the key fields come from the plugin and are valid during the call.
        let key = unsafe { read_key(key, len) }.map_err(|m| (Code::InvalidArgument, m))?;
        // SAFETY: user_arg is the KvUserData we passed; it outlives the client.
        let data = unsafe { &*(a.user_arg() as *const KvUserData) };
        body(a, &*data.store, key)
    });
    finish(callback_error, outcome)
}

/// The store's error as the callback reports it.
fn fail(e: crate::error::Error) -> (Code, String) {
    (e.code(), e.to_string())
}

/// The keys a plugin is waiting for in a `kv_get` callback now, each with when its wait
/// began (one entry per call in progress; a call's entry goes when it returns).
static WAITING: std::sync::Mutex<Vec<(u64, String, Instant)>> = std::sync::Mutex::new(Vec::new());

/// The next entry number of [`WAITING`].
static WAIT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// One `kv_get` in progress, listed in [`WAITING`] while it lives.
struct Waiting(u64);

impl Waiting {
    fn begin(key: &str) -> Waiting {
        let id = WAIT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        WAITING.lock().unwrap_or_else(|p| p.into_inner()).push((
            id,
            key.to_string(),
            Instant::now(),
        ));
        Waiting(id)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        WAITING
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(id, _, _)| *id != self.0);
    }
}

/// The keys that plugins are waiting for in the store now (a `kv_get` callback in
/// progress, typically another process's rendezvous key during client creation) whose
/// wait began at or after `since`, oldest first.
pub fn waiting_keys(since: Instant) -> Vec<String> {
    WAITING
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|(_, _, t)| *t >= since)
        .map(|(_, k, _)| k.clone())
        .collect()
}

/// `kv_get_callback`: waits for a key through the store.
pub(crate) unsafe extern "C" fn kv_get(
    args: *mut sys::PJRT_KeyValueGetCallback_Args,
) -> *mut sys::PJRT_Error {
    // SAFETY: the plugin calls this with its args struct, as `serve` requires.
    unsafe {
        serve(args, |a, store, key| {
            let timeout = Duration::from_millis(a.timeout_in_ms.max(0) as u64);
            let _waiting = Waiting::begin(key);
            a.set_value(&store.get(key, timeout).map_err(fail)?);
            Ok(())
        })
    }
}

/// `kv_try_get_callback`: reads a key without waiting; `NOT_FOUND` when absent.
pub(crate) unsafe extern "C" fn kv_try_get(
    args: *mut sys::PJRT_KeyValueTryGetCallback_Args,
) -> *mut sys::PJRT_Error {
    // SAFETY: as in `kv_get`.
    unsafe {
        serve(args, |a, store, key| {
            match store.try_get(key).map_err(fail)? {
                Some(v) => {
                    a.set_value(&v);
                    Ok(())
                }
                None => Err((Code::NotFound, format!("key {key:?} is not set"))),
            }
        })
    }
}

/// `kv_put_callback`: stores a key.
pub(crate) unsafe extern "C" fn kv_put(
    args: *mut sys::PJRT_KeyValuePutCallback_Args,
) -> *mut sys::PJRT_Error {
    let body = |a: &mut sys::PJRT_KeyValuePutCallback_Args, store: &dyn KvBackend, key: &str| {
        let value: &[u8] = if a.value.is_null() || a.value_size == 0 {
            &[]
        } else {
            // SAFETY: value/value_size come from the plugin, valid during the call.
            unsafe { std::slice::from_raw_parts(a.value.cast::<u8>(), a.value_size) }
        };
        store.set(key, value).map_err(fail)
    };
    // SAFETY: as in `kv_get`.
    unsafe { serve(args, body) }
}

fn finish(
    callback_error: *mut Option<sys::PJRT_CallbackError>,
    outcome: Option<std::result::Result<(), (Code, String)>>,
) -> *mut sys::PJRT_Error {
    let (code, message) = match outcome {
        Some(Ok(())) => return std::ptr::null_mut(),
        Some(Err(e)) => e,
        None => (
            Code::Internal,
            "the key-value store panicked (see stderr for the panic message)".to_string(),
        ),
    };
    // SAFETY: `callback_error` comes from the live args struct of this callback.
    unsafe { report(callback_error, code, &message) }
}

/// Sets the KV callbacks of a `PJRT_Client_Create_Args` to our trampolines over `kv`.
/// `kv_try_get` is set only for plugins whose struct has it (PJRT 0.61 on).
pub fn set_callbacks(api: &Api, a: &mut sys::PJRT_Client_Create_Args, kv: &Arc<KvUserData>) {
    a.kv_get_callback = Some(kv_get);
    a.kv_get_user_arg = kv.as_arg();
    a.kv_put_callback = Some(kv_put);
    a.kv_put_user_arg = kv.as_arg();
    if api.version().minor >= KV_TRY_GET_SINCE_MINOR {
        a.kv_try_get_callback = Some(kv_try_get);
        a.kv_try_get_user_arg = kv.as_arg();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A map that never waits: a missing key is a timeout at once.
    #[derive(Default)]
    struct MapStore(Mutex<HashMap<String, Vec<u8>>>);
    impl KvBackend for MapStore {
        fn set(&self, key: &str, value: &[u8]) -> Result<()> {
            self.0.lock().unwrap().insert(key.into(), value.to_vec());
            Ok(())
        }
        fn get(&self, key: &str, _: Duration) -> Result<Vec<u8>> {
            self.0
                .lock()
                .unwrap()
                .get(key)
                .cloned()
                .ok_or_else(|| crate::error::Error::Store {
                    code: Code::DeadlineExceeded,
                    message: format!("key {key:?} was not set in time"),
                })
        }
        fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
            Ok(self.0.lock().unwrap().get(key).cloned())
        }
    }
    use crate::error::Result;
    use std::sync::Mutex;

    /// Stands in for the plugin's error maker: records (code, message) and returns a
    /// non-null marker.
    static SEEN: Mutex<Vec<(i32, String)>> = Mutex::new(Vec::new());

    unsafe extern "C" fn record_error(
        code: sys::PJRT_Error_Code,
        message: *const c_char,
        len: usize,
    ) -> *mut sys::PJRT_Error {
        // SAFETY: our trampolines pass a valid (pointer, length) message.
        let m = unsafe { std::slice::from_raw_parts(message.cast::<u8>(), len) };
        SEEN.lock()
            .unwrap()
            .push((code as i32, String::from_utf8_lossy(m).into_owned()));
        std::ptr::NonNull::dangling().as_ptr()
    }

    struct Panicky;
    impl KvBackend for Panicky {
        fn set(&self, _: &str, _: &[u8]) -> Result<()> {
            panic!("boom in set")
        }
        fn get(&self, _: &str, _: Duration) -> Result<Vec<u8>> {
            panic!("boom in get")
        }
        fn try_get(&self, _: &str) -> Result<Option<Vec<u8>>> {
            panic!("boom in try_get")
        }
    }

    fn last_error() -> (i32, String) {
        SEEN.lock().unwrap().last().cloned().unwrap()
    }

    #[test]
    fn trampolines_put_get_try_get_and_free() {
        let data = Arc::new(KvUserData::new(Arc::new(MapStore::default())));
        let mut cb: Option<sys::PJRT_CallbackError> = Some(record_error);
        let key = "proc:1";
        let val = [7u8, 0, 9];
        let mut p = sys::PJRT_KeyValuePutCallback_Args::new();
        p.key = key.as_ptr().cast();
        p.key_size = key.len();
        p.value = val.as_ptr().cast();
        p.value_size = val.len();
        p.callback_error = &mut cb;
        p.user_arg = data.as_arg();
        // SAFETY: every pointer in `p` is valid for the call.
        assert!(unsafe { kv_put(&mut p) }.is_null());

        let mut g = sys::PJRT_KeyValueGetCallback_Args::new();
        g.key = key.as_ptr().cast();
        g.key_size = key.len();
        g.timeout_in_ms = 1000;
        g.callback_error = &mut cb;
        g.user_arg = data.as_arg();
        // SAFETY: as above.
        assert!(unsafe { kv_get(&mut g) }.is_null());
        // SAFETY: the trampoline returned `value_size` bytes at `value`.
        let got = unsafe { std::slice::from_raw_parts(g.value.cast::<u8>(), g.value_size) };
        assert_eq!(got, val);
        // SAFETY: the deleter frees the value it was handed, once.
        unsafe { (g.value_deleter_callback.unwrap())(g.value) };

        let mut t = sys::PJRT_KeyValueTryGetCallback_Args::new();
        let missing = "proc:2";
        t.key = missing.as_ptr().cast();
        t.key_size = missing.len();
        t.callback_error = &mut cb;
        t.user_arg = data.as_arg();
        // SAFETY: as above.
        assert!(!unsafe { kv_try_get(&mut t) }.is_null());
        let (code, msg) = last_error();
        assert_eq!(code, 5, "{msg}");
        assert!(msg.contains("proc:2"), "{msg}");
        t.key = key.as_ptr().cast();
        t.key_size = key.len();
        // SAFETY: as above.
        assert!(unsafe { kv_try_get(&mut t) }.is_null());
        assert_eq!(t.value_size, 3);
        // SAFETY: as above.
        unsafe { (t.value_deleter_callback.unwrap())(t.value) };

        // A get that times out reports DEADLINE_EXCEEDED with the key.
        g.key = missing.as_ptr().cast();
        g.key_size = missing.len();
        g.timeout_in_ms = 10;
        // SAFETY: as above.
        assert!(!unsafe { kv_get(&mut g) }.is_null());
        let (code, msg) = last_error();
        assert_eq!(code, 4, "{msg}");
    }

    #[test]
    fn a_panicking_store_becomes_an_internal_error() {
        let data = Arc::new(KvUserData::new(Arc::new(Panicky)));
        let mut cb: Option<sys::PJRT_CallbackError> = Some(record_error);
        let key = "k";
        let mut g = sys::PJRT_KeyValueGetCallback_Args::new();
        g.key = key.as_ptr().cast();
        g.key_size = key.len();
        g.callback_error = &mut cb;
        g.user_arg = data.as_arg();
        // SAFETY: valid args.
        assert!(!unsafe { kv_get(&mut g) }.is_null());
        let (code, msg) = last_error();
        assert_eq!(code, 13);
        assert!(msg.contains("panicked"), "{msg}");
        let mut p = sys::PJRT_KeyValuePutCallback_Args::new();
        p.key = key.as_ptr().cast();
        p.key_size = key.len();
        p.callback_error = &mut cb;
        p.user_arg = data.as_arg();
        // SAFETY: valid args (a null value with size 0 is an empty value).
        assert!(!unsafe { kv_put(&mut p) }.is_null());
        assert!(last_error().1.contains("panicked"));
    }

    #[test]
    fn a_key_that_is_not_utf8_is_refused() {
        let data = Arc::new(KvUserData::new(Arc::new(MapStore::default())));
        let mut cb: Option<sys::PJRT_CallbackError> = Some(record_error);
        let key = [0xffu8, 0xfe];
        let mut t = sys::PJRT_KeyValueTryGetCallback_Args::new();
        t.key = key.as_ptr().cast();
        t.key_size = key.len();
        t.callback_error = &mut cb;
        t.user_arg = data.as_arg();
        // SAFETY: valid args.
        assert!(!unsafe { kv_try_get(&mut t) }.is_null());
        let (code, msg) = last_error();
        assert_eq!(code, 3);
        assert!(msg.contains("UTF-8"), "{msg}");
    }

    /// A store whose `get` waits until told to go on.
    struct Gate(Mutex<std::sync::mpsc::Receiver<()>>);
    impl KvBackend for Gate {
        fn set(&self, _: &str, _: &[u8]) -> Result<()> {
            Ok(())
        }
        fn get(&self, _: &str, _: Duration) -> Result<Vec<u8>> {
            let _ = self.0.lock().unwrap().recv_timeout(Duration::from_secs(10));
            Ok(vec![1])
        }
        fn try_get(&self, _: &str) -> Result<Option<Vec<u8>>> {
            Ok(None)
        }
    }

    #[test]
    fn a_get_in_progress_lists_its_key_until_it_returns() {
        let since = Instant::now();
        let (tx, rx) = std::sync::mpsc::channel();
        let data = Arc::new(KvUserData::new(Arc::new(Gate(Mutex::new(rx)))));
        let arg = data.as_arg() as usize;
        let waiter = std::thread::spawn(move || {
            let mut cb: Option<sys::PJRT_CallbackError> = Some(record_error);
            let key = "peer:waited";
            let mut g = sys::PJRT_KeyValueGetCallback_Args::new();
            g.key = key.as_ptr().cast();
            g.key_size = key.len();
            g.timeout_in_ms = 10_000;
            g.callback_error = &mut cb;
            g.user_arg = arg as *mut c_void;
            // SAFETY: valid args; the user data outlives the call (joined below).
            assert!(unsafe { kv_get(&mut g) }.is_null());
            // SAFETY: the trampoline returned the value; the deleter frees it once.
            unsafe { (g.value_deleter_callback.unwrap())(g.value) };
        });
        let waited = |t| waiting_keys(t).contains(&"peer:waited".to_string());
        let deadline = Instant::now() + Duration::from_secs(10);
        while !waited(since) {
            assert!(Instant::now() < deadline, "the waited key was never listed");
            std::thread::sleep(Duration::from_millis(5));
        }
        // A wait that began before `since` is not listed.
        assert!(!waited(Instant::now() + Duration::from_secs(5)));
        tx.send(()).unwrap();
        waiter.join().unwrap();
        assert!(!waited(since));
        drop(data);
    }
}
