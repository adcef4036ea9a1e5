//! A persistent compile cache: compile a program once per target, load it afterwards.
//!
//! Off by default. Turned on per client ([`crate::ClientOptions::cache_dir`] or
//! [`Client::set_cache`], or `RPJRT_CACHE_DIR` in the environment when the client is
//! created, with an optional `RPJRT_CACHE_MAX_BYTES`), or per call
//! ([`Client::compile_with_cache`]).
//!
//! - Each entry is one file `<key>.rpjrtexe` holding an rpjrt artifact (see [`crate::client::aot`]):
//!   the key is the SHA-256 of the program bytes and format, the encoded compile options,
//!   every [`ArtifactTarget`] field (platform name and version, PJRT version, the plugin's
//!   XLA and StableHLO versions and build, device kinds and count), and the `XLA_FLAGS`
//!   taken as the plugin's first client was created (a flags file's contents included).
//! - Writes go to a temporary file in the same directory, then are renamed into place, so a
//!   reader never sees half an entry and several processes can share a directory (the last
//!   writer of a key wins; every writer's entry is complete and valid).
//! - Each entry records its own key, checked on lookup: an entry renamed or copied to
//!   another key's name (a valid artifact of another program) is a corrupt entry, not a hit.
//! - A truncated or corrupt entry fails the artifact checksum before the plugin sees it: it
//!   is reported once (a warning, see [`Cache::take_warnings`] and
//!   [`Cache::set_warning_handler`]), removed and recompiled. An intact entry the plugin
//!   refuses for a reason of this process (a custom-call handler not registered here:
//!   NOT_FOUND; out of memory; cancelled) is reported, kept for the processes that can load
//!   it, and the program compiled.
//! - With a size bound, the least recently used entries (oldest modification time; a hit
//!   touches its entry) are removed after each write until the directory fits.

use std::collections::HashSet;
use std::fmt;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use sha2::{Digest, Sha256};

use crate::client::aot::{Artifact, ArtifactTarget};
use crate::client::executable::Executable;
use crate::client::Client;
use crate::error::{Code, Error, Result};
use crate::options::CompileOptions;
use crate::program::Program;

/// File name extension of cache entries.
pub const ENTRY_EXTENSION: &str = "rpjrtexe";

/// How a half-written entry's temporary file is named (then the process id, a counter and
/// the time): [`Cache::clear`] removes these and no other hidden file.
const TMP_PREFIX: &str = ".tmp-rpjrtexe-";

/// The file at `p` opened for reading, with its size, when it is a regular file: opened
/// without waiting, so a FIFO planted under an entry's name (or swapped in after a look at
/// the path) is refused, never waited on.
fn open_entry(p: &Path) -> std::io::Result<(fs::File, u64)> {
    match crate::raw::files::open_for_reading(p)? {
        (f, m) if m.is_file() => Ok((f, m.len())),
        _ => Err(std::io::Error::other("not a regular file")),
    }
}

/// Whether the file at `p` begins with an artifact's magic bytes (an entry of ours).
fn starts_with_magic(p: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; crate::program::ENVELOPE_MAGIC.len()];
    open_entry(p)
        .and_then(|(mut f, _)| f.read_exact(&mut head))
        .is_ok_and(|()| crate::program::is_artifact(&head))
}
/// Checks an entry of `len` bytes against the bound of every whole read of a file
/// (`RPJRT_MAX_FILE_BYTES`, [`crate::raw::files::read_bound`]): hit, store, `info` and the
/// read-back of a hit's serialization all agree on it.
fn entry_bound(path: &Path, len: u64) -> Result<u64> {
    use crate::raw::files::{read_bound, MAX_READ_BYTES};
    read_bound(path, len, MAX_READ_BYTES, "a compile cache entry")
}
const KEY_DOMAIN: &[u8] = b"rpjrt compile cache key v1\0";

/// The artifact field in which an entry records its own key.
const KEY_FIELD: &str = "cache_key";

/// Checks that an entry records the key it is filed under. The key is a hash of the
/// program and options, which the artifact does not hold, so without this an entry renamed
/// (or copied) to another key's name would be loaded for the other program: a valid
/// artifact, the wrong executable. An entry without the field (or another key) is treated
/// as corrupt: reported, removed and recompiled.
pub(crate) fn check_key(artifact: &Artifact, key: &str) -> Result<()> {
    match artifact.extra_field(KEY_FIELD) {
        Some(k) if k == key => Ok(()),
        Some(k) => Err(Error::invalid(format!(
            "it records the key {k}, not the key {key} it is filed under (renamed or copied)"
        ))),
        None => Err(Error::invalid(format!(
            "it records no key (written by an older rpjrt, or not by the cache), so it \
             cannot be shown to be the entry for {key}"
        ))),
    }
}

/// Whether a failed load of an entry (which passed the envelope and checksum checks) says
/// nothing against the file: the plugin's codes for what this process lacks or ran out of.
fn kept_on_refusal(e: &Error) -> bool {
    matches!(e, Error::Pjrt { .. })
        && matches!(
            e.code(),
            Code::NotFound
                | Code::ResourceExhausted
                | Code::Cancelled
                | Code::Aborted
                | Code::Unavailable
                | Code::DeadlineExceeded
        )
}

/// Counters of one [`Cache`] object (this process only).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CacheStats {
    /// Compilations answered from the cache.
    pub hits: u64,
    /// Compilations that had to compile.
    pub misses: u64,
    /// Entries found corrupt or unloadable (and recompiled).
    pub corrupt: u64,
    /// Entries written.
    pub writes: u64,
    /// Entries removed to keep the directory under its bound.
    pub evictions: u64,
    /// Bytes of entries read on hits.
    pub bytes_read: u64,
    /// Bytes of entries written.
    pub bytes_written: u64,
    /// Compile time recorded in the entries that hit, minus the time the hits took.
    pub time_saved: Duration,
    /// Time spent compiling on misses.
    pub compile_time: Duration,
    /// Time the hits took, from the call to the loaded executable.
    pub hit_time: Duration,
    /// The part of `hit_time` spent inside the plugin's deserialization
    /// (`PJRT_Executable_DeserializeAndLoad`); the rest is rpjrt's own work: the key, the
    /// file read, the envelope checks and the executable's facts.
    pub hit_plugin_time: Duration,
}

/// One entry of a cache directory.
#[derive(Clone, Debug)]
pub struct CacheEntry {
    /// The key (hex SHA-256).
    pub key: String,
    /// The entry's file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Last use (modification time; hits touch it).
    pub last_used: SystemTime,
    /// What the artifact was built for, when it decodes.
    pub target: Option<ArtifactTarget>,
    /// The compile time recorded when it was written, in milliseconds.
    pub compile_ms: Option<f64>,
    /// Why it is unusable (does not decode, or records another key), if it is.
    pub error: Option<String>,
}

type WarningHandler = Box<dyn Fn(&str) + Send + Sync>;

struct CacheInner {
    dir: PathBuf,
    max_bytes: Option<u64>,
    stats: Mutex<CacheStats>,
    warnings: Mutex<Vec<String>>,
    reported: Mutex<HashSet<String>>,
    handler: Mutex<Option<WarningHandler>>,
}

/// A compile-cache directory. Cheap to clone; clones share counters.
#[derive(Clone)]
pub struct Cache {
    inner: Arc<CacheInner>,
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// An entry's bytes, read whole.
enum EntryBytes {
    Heap(Vec<u8>),
    Staged(crate::raw::transfer::Leased),
}

/// From this size up an entry is read into huge-page staging memory (below it, a huge
/// page's clearing costs more than the small pages' faults it saves).
const STAGED_ENTRY: usize = 256 << 10;

impl EntryBytes {
    /// Reads an entry (`file` positioned at its start, `size` bytes long). A large one goes
    /// into staging memory from the process's pool: huge pages, warm when an earlier load or
    /// put left a block idle. A fresh heap buffer costs a page fault and a cleared page per
    /// 4 KiB, which was most of a warm load's own time (0.5 ms of 0.55 for a 389 KB entry,
    /// on a virtual machine); the block goes back to the pool when this value drops.
    fn read(file: &mut fs::File, size: u64) -> Result<EntryBytes> {
        use std::io::Read as _;
        let whole = |e: &dyn fmt::Display| Error::invalid(format!("cannot read it whole: {e}"));
        let len = usize::try_from(size).map_err(|_| whole(&"too large"))?;
        if len < STAGED_ENTRY {
            let mut v = vec![0; len];
            file.read_exact(&mut v).map_err(|e| whole(&e))?;
            return Ok(EntryBytes::Heap(v));
        }
        crate::staging::fill(crate::staging::global(), len, |block| {
            file.read_exact(block).map_err(|e| whole(&e))
        })
        .map(EntryBytes::Staged)
    }

    fn as_slice(&self) -> &[u8] {
        use crate::raw::hostmem::HostBytes as _;
        match self {
            EntryBytes::Heap(v) => v,
            EntryBytes::Staged(l) => l.bytes(),
        }
    }
}

fn io_err(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::io(
        format_args!("compile cache: cannot {what} {}", path.display()),
        &e,
    )
}

impl Cache {
    /// A cache in `dir` (created if needed), bounded to `max_bytes` if given.
    pub fn new(dir: impl AsRef<Path>, max_bytes: Option<u64>) -> Result<Cache> {
        if dir.as_ref().as_os_str().is_empty() {
            return Err(Error::invalid(
                "compile cache: the directory's name is empty",
            ));
        }
        // Made absolute now: a relative name means the directory it names when the cache
        // is made, not whatever directory the process is in when an entry is stored.
        let dir = std::path::absolute(dir.as_ref())
            .map_err(|e| io_err("resolve the directory", dir.as_ref(), e))?;
        // Something that exists and is no directory (a file, /dev/null) is named as such,
        // not by create_dir_all's "File exists".
        if let Err(e) = fs::create_dir_all(&dir) {
            // What is there, if anything, says more than "File exists": a symbolic link
            // loop or a dangling link is named by the error of following it.
            match fs::metadata(&dir) {
                Ok(_) => {}
                Err(m) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Err(io_err("use the directory", &dir, m))
                }
                Err(_) => return Err(io_err("create the directory", &dir, e)),
            }
        }
        if !dir.is_dir() {
            return Err(Error::invalid(format!(
                "compile cache: {} exists and is not a directory",
                dir.display()
            )));
        }
        Ok(Cache {
            inner: Arc::new(CacheInner {
                dir,
                max_bytes,
                stats: Mutex::new(CacheStats::default()),
                warnings: Mutex::new(Vec::new()),
                reported: Mutex::new(HashSet::new()),
                handler: Mutex::new(None),
            }),
        })
    }

    /// The cache named by `RPJRT_CACHE_DIR` (and `RPJRT_CACHE_MAX_BYTES`), if set.
    pub fn from_env() -> Result<Option<Cache>> {
        let Some(dir) = std::env::var_os("RPJRT_CACHE_DIR").filter(|d| !d.is_empty()) else {
            return Ok(None);
        };
        Cache::at(dir).map(Some)
    }

    /// A cache in `dir`, bounded by `RPJRT_CACHE_MAX_BYTES` when set, as the one
    /// `RPJRT_CACHE_DIR` names is (what a client's `cache_dir` option and the CLI's
    /// `--cache-dir` make).
    pub fn at(dir: impl AsRef<Path>) -> Result<Cache> {
        Cache::new(dir, env_max_bytes()?)
    }

    /// The cache a client created with `options` uses: the directory of
    /// [`crate::ClientOptions::cache_dir`] if set, else [`Cache::from_env`]; either is
    /// bounded by `RPJRT_CACHE_MAX_BYTES` when set. Checked before the plugin creates the
    /// client, so a bad setting costs no client.
    pub fn for_client(options: &crate::ClientOptions) -> Result<Option<Cache>> {
        match options.cache_dir_path() {
            Some(dir) => Cache::at(dir).map(Some),
            None => Cache::from_env(),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The size bound, if any.
    pub fn max_bytes(&self) -> Option<u64> {
        self.inner.max_bytes
    }

    /// This object's counters.
    pub fn stats(&self) -> CacheStats {
        lock(&self.inner.stats).clone()
    }

    /// Sets every counter back to zero.
    pub fn reset_stats(&self) {
        *lock(&self.inner.stats) = CacheStats::default();
    }

    /// Warnings not yet taken (each problem is reported once per cache object).
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.inner.warnings))
    }

    /// Calls `handler` with each warning as it happens (in addition to queuing it).
    pub fn set_warning_handler(&self, handler: impl Fn(&str) + Send + Sync + 'static) {
        *lock(&self.inner.handler) = Some(Box::new(handler));
    }

    fn warn(&self, dedup: &str, message: String) {
        if !lock(&self.inner.reported).insert(dedup.to_string()) {
            return;
        }
        if let Some(h) = &*lock(&self.inner.handler) {
            h(&message);
        }
        lock(&self.inner.warnings).push(message);
    }

    /// The cache key of `program` compiled with the encoded `options` for `target` on
    /// `plugin`, under the `XLA_FLAGS` in force for it: compiler flags the plugin reads
    /// too, taken as its first client was created (with the contents of a flags file).
    pub fn key(
        program: &Program,
        options: &[u8],
        target: &ArtifactTarget,
        plugin: &crate::Plugin,
    ) -> String {
        let mut h = Sha256::new();
        h.update(KEY_DOMAIN);
        let (format, code): (&[u8], &[u8]) = match program {
            Program::Mlir(c) => (b"mlir", c),
            Program::Hlo(c) => (b"hlo", c),
        };
        let mut part = |b: &[u8]| {
            h.update((b.len() as u64).to_le_bytes());
            h.update(b);
        };
        part(format);
        part(code);
        part(options);
        for (k, v) in target.fields() {
            part(k.as_bytes());
            part(v.as_bytes());
        }
        // XLA's flags (fast math, NaN handling): a program compiled under other flags is
        // another executable. Keys made without flags stay as they were.
        match plugin.xla_flags() {
            crate::plugin::XlaFlags::Known(parts) => parts.iter().for_each(|p| part(p)),
            // `compile` neither reads nor writes an entry then; no key of known flags is this.
            crate::plugin::XlaFlags::Unknown(_) => part(b"XLA_FLAGS: unknown"),
        }
        crate::plugin::hex(&h.finalize())
    }

    /// The file of the entry with `key`.
    pub fn entry_path(&self, key: &str) -> PathBuf {
        self.inner.dir.join(format!("{key}.{ENTRY_EXTENSION}"))
    }

    /// Compiles `program` for `client`, or loads it from the cache.
    pub fn compile(
        &self,
        client: &Client,
        program: &Program,
        options: &CompileOptions,
    ) -> Result<Executable> {
        let started = Instant::now();
        client.core.check("client")?;
        // What Client::compile would send (so the key covers it).
        let encoded = options
            .effective(program, &client.core.platform_name)
            .encode(&client.device_ids())?;
        // The plugin's build from this directory's memo, where a process put it before.
        client.plugin().build_memo(Some(self.dir()));
        let target = ArtifactTarget::of_client(client)?;
        let key = Cache::key(program, &encoded, &target, client.plugin());
        let path = self.entry_path(&key);
        // Under compiler flags it cannot know, the cache is neither read nor written: an
        // entry could hold another compilation than the plugin would make now.
        let flags_known = match client.plugin().xla_flags() {
            crate::plugin::XlaFlags::Known(_) => true,
            crate::plugin::XlaFlags::Unknown(why) => {
                self.warn(
                    "xla-flags",
                    format!("compile cache: not used: {why}; compiling without it"),
                );
                false
            }
        };
        let hit = match flags_known {
            true => self.try_load(client, &key, &path, &target, started)?,
            false => None,
        };
        if let Some(exe) = hit {
            // The entry holds this program's executable (its key says so).
            exe.note_source(program);
            return Ok(exe);
        }
        // Screened before compiling only: an entry exists only for a program that compiled
        // (screened then), and a hit compiles nothing.
        client.plugin().check_program(program)?;
        let t0 = Instant::now();
        let exe = Executable::compile(&client.core, program, &encoded)
            .map_err(|e| crate::stablehlo::explain(client.plugin(), program, e))?;
        let took = t0.elapsed();
        {
            let mut s = lock(&self.inner.stats);
            s.misses += 1;
            s.compile_time += took;
        }
        let extra = vec![
            (
                "compile_ms".to_string(),
                format!("{:.3}", took.as_secs_f64() * 1e3),
            ),
            (KEY_FIELD.to_string(), key.clone()),
        ];
        if !flags_known {
            return Ok(exe);
        }
        match exe.to_artifact(extra) {
            Ok(artifact) => {
                if let Err(e) = self.write_entry(&path, &artifact.encode()) {
                    self.warn(
                        &format!("write:{key}"),
                        format!("compile cache: could not store an entry: {e}"),
                    );
                }
            }
            // A client closed during the compile (or the serialization) is no sign of what
            // the plugin can do: said as such, and the capability warning stays for a
            // real refusal.
            Err(e) if matches!(e, Error::Closed(_)) || client.is_closed() => self.warn(
                "closed",
                "compile cache: nothing is cached for a compile whose client was closed \
                 while it ran (its executable cannot be used)"
                    .to_string(),
            ),
            Err(e) => self.warn(
                "serialize",
                format!("compile cache: this plugin cannot serialize executables, nothing is cached: {e}"),
            ),
        }
        Ok(exe)
    }

    fn try_load(
        &self,
        client: &Client,
        key: &str,
        path: &Path,
        target: &ArtifactTarget,
        started: Instant,
    ) -> Result<Option<Executable>> {
        // Only a regular file is read: a FIFO (or a device) planted under an entry's name
        // would block the read forever. A symbolic link is not read either: the listings,
        // eviction and `clear` see only files, and a hit they cannot see would be served
        // from a cache that says it is empty. (Storing the entry then replaces the link.)
        match fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Ok(m) if !m.is_file() => {
                self.warn(
                    &format!("read:{key}"),
                    format!(
                        "compile cache: {} is not a regular file; recompiling",
                        path.display()
                    ),
                );
                return Ok(None);
            }
            _ => {}
        }
        let cannot_read = |e: std::io::Error| {
            self.warn(
                &format!("read:{key}"),
                format!(
                    "compile cache: cannot read {} ({e}); recompiling",
                    path.display()
                ),
            );
            Ok(None)
        };
        // Opened without waiting (something swapped in since the look above is told by
        // what was opened, not waited on).
        let (mut file, size) = match open_entry(path) {
            Ok(opened) => opened,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return cannot_read(e),
        };
        // Serializing a hit reads the entry again, bounded: one above it is a miss, kept.
        if let Err(Error::InvalidArgument(why)) = entry_bound(path, size) {
            let why = format!("compile cache: not reading an entry: {why}; compiling instead");
            self.warn(&format!("read:{key}"), why);
            return Ok(None);
        }
        // The header first (a few hundred bytes): a file that is no entry, or another
        // program's or target's, is refused before its body is read or hashed, however
        // large the file claims to be.
        let head = Artifact::read_head(&mut file, size)
            .and_then(|a| check_key(&a, key).and_then(|()| a.check_target(target)))
            .and_then(|()| {
                use std::io::Seek as _;
                file.rewind()
                    .map_err(|e| Error::invalid(format!("cannot read it again: {e}")))
            });
        // Set once the entry passed every check of its own and goes to the plugin: a
        // failure from there on may be this process's rather than the file's.
        let mut checked = false;
        let failures_before = crate::raw::ffi::handler_failures();
        let loaded = head
            .and_then(|()| EntryBytes::read(&mut file, size))
            .and_then(|bytes| {
                let bytes = bytes.as_slice();
                let (a, blob) = Artifact::decode_parts(bytes)?;
                check_key(&a, key)?;
                a.check_target(target)?;
                let recorded = a
                    .extra_field("compile_ms")
                    .and_then(|s| s.parse::<f64>().ok())
                    // A field of a file on disk: any number, none of them a crash.
                    .and_then(|ms| crate::duration_from_secs(ms / 1e3, "compile_ms").ok())
                    .unwrap_or_default();
                if blob.is_empty() {
                    return Err(Error::invalid("it holds no executable"));
                }
                checked = true;
                client
                    .load_cache_entry(&a, &bytes[blob], path, key)
                    .map(|exe| (recorded, exe, bytes.len() as u64))
            });
        match loaded {
            Ok((recorded, (exe, plugin_time), read)) => {
                // The file read, not opened again; "now" needs write permission, not ownership.
                if let Err(e) = crate::raw::files::touch(&file) {
                    self.warn("touch", format!("compile cache: cannot record the use of {} ({e}), so eviction may take it first; a cache shared by users needs group-writable entries (docs/compile-once.md)", path.display()));
                }
                let mut s = lock(&self.inner.stats);
                s.hits += 1;
                s.bytes_read += read;
                let took = started.elapsed();
                s.time_saved += recorded.saturating_sub(took);
                s.hit_time += took;
                s.hit_plugin_time += plugin_time;
                Ok(Some(exe))
            }
            // A custom-call handler (or instantiate function) of this process failed while
            // the plugin loaded the entry, or its target's handler was removed: the error
            // is the registrant's, as it would be from a compile, and the compile ends with
            // it (a recompile would run the failing code again, or lose what it raised, a
            // Ctrl-C among them). The file is not at fault: kept.
            Err(e) if checked && crate::raw::ffi::handler_failures() != failures_before => Err(e),
            // The client was closed while the entry loaded: neither the file's nor the
            // plugin's doing, and a compile would be refused the same way.
            Err(e) if matches!(e, Error::Closed(_)) || client.is_closed() => Err(e),
            // The plugin refused a checked entry for a reason of this process, not of the
            // file: a custom-call handler not registered here (NOT_FOUND), memory, a
            // cancellation; or rpjrt refused what the plugin loaded for a reason of this
            // process (a custom call served here by a handler that cannot take the
            // compiled layout). Other processes sharing the directory may load it: kept.
            Err(e) if checked && (kept_on_refusal(&e) || !matches!(e, Error::Pjrt { .. })) => {
                self.warn(
                    &format!("refused:{key}"),
                    format!(
                        "compile cache: entry {} cannot be loaded in this process ({e}); \
                         compiling instead, the entry is kept",
                        path.display()
                    ),
                );
                Ok(None)
            }
            Err(e) => {
                lock(&self.inner.stats).corrupt += 1;
                let removed = match fs::remove_file(path) {
                    Ok(()) => "removed".to_string(),
                    Err(r) if r.kind() == std::io::ErrorKind::NotFound => "removed".to_string(),
                    Err(r) => format!("it could not be removed ({r}), so it is met again"),
                };
                self.warn(
                    &format!("corrupt:{key}"),
                    format!(
                        "compile cache: entry {} is unusable ({e}); {removed}; recompiled",
                        path.display()
                    ),
                );
                Ok(None)
            }
        }
    }

    /// Writes an entry atomically (temporary file in the same directory, then rename) and
    /// evicts least recently used entries beyond the bound.
    fn write_entry(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        // Never an entry a hit would not read (`try_load`): it would be written each time.
        if let Err(Error::InvalidArgument(m)) = entry_bound(path, bytes.len() as u64) {
            let message = format!("{m}; it is not kept");
            return Err(Error::Io {
                code: Code::ResourceExhausted,
                message,
            });
        }
        if let Some(max) = self.inner.max_bytes.filter(|&m| bytes.len() as u64 > m) {
            let message = format!("the entry ({} bytes) is larger than the cache's bound ({max} bytes, RPJRT_CACHE_MAX_BYTES or max_bytes), so it is not kept", bytes.len());
            return Err(Error::Io {
                code: Code::ResourceExhausted,
                message,
            });
        }
        crate::remove_orphaned_temps(&self.inner.dir, 3, |t| t.strip_prefix(TMP_PREFIX));
        let tmp = self.inner.dir.join(format!(
            "{TMP_PREFIX}{}-{}-{}",
            std::process::id(),
            TMP_COUNTER.fetch_add(1, Ordering::Relaxed),
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        let result = (|| -> std::io::Result<()> {
            // A directory removed while the client lives (a cleaner, `rm -rf`) is made again.
            fs::create_dir_all(&self.inner.dir)?;
            let mut f = fs::File::create(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            fs::rename(&tmp, path)
        })();
        if let Err(e) = result {
            let _ = fs::remove_file(&tmp);
            return Err(io_err("write", path, e));
        }
        {
            let mut s = lock(&self.inner.stats);
            s.writes += 1;
            s.bytes_written += bytes.len() as u64;
        }
        if let Some(max) = self.inner.max_bytes {
            let removal = self.evict_to(max, Some(path))?;
            lock(&self.inner.stats).evictions += removal.removed as u64;
            // The entry is stored: an entry that could not be evicted is said, not failed.
            if let Err(e) = removal.outcome(&self.inner.dir, "evict") {
                self.warn("evict", e.to_string());
            }
        }
        Ok(())
    }

    fn scan(&self) -> Result<Vec<(PathBuf, u64, SystemTime)>> {
        let rd = fs::read_dir(&self.inner.dir).map_err(|e| io_err("list", &self.inner.dir, e))?;
        let mut out = Vec::new();
        for ent in rd.flatten() {
            let p = ent.path();
            if p.extension().and_then(|e| e.to_str()) != Some(ENTRY_EXTENSION) {
                continue;
            }
            // Only our own entries: named by a key (64 hex digits), empty or an artifact. A
            // file that merely has the extension, such as an artifact `rpjrt compile -o`
            // wrote (the directory may be one the user named, holding anything), is never
            // listed, evicted or cleared.
            let keyed = p.file_stem().and_then(|s| s.to_str()).is_some_and(|s| {
                s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            });
            if let (true, Ok(m)) = (keyed, ent.metadata()) {
                if m.is_file() && (m.len() == 0 || starts_with_magic(&p)) {
                    out.push((p, m.len(), m.modified().unwrap_or(SystemTime::UNIX_EPOCH)));
                }
            }
        }
        Ok(out)
    }

    /// Removes least recently used entries until the directory holds at most `max` bytes
    /// of entries (`keep`, the entry just written, goes last). Says what went and what
    /// could not.
    fn evict_to(&self, max: u64, keep: Option<&Path>) -> Result<Removal> {
        let mut all = self.scan()?;
        let mut total: u64 = all.iter().map(|e| e.1).sum();
        let mut removal = Removal::default();
        if total <= max {
            return Ok(removal);
        }
        all.sort_by_key(|(p, _, t)| (Some(p.as_path()) == keep, *t));
        for (p, size, _) in all {
            if total <= max {
                break;
            }
            // An entry that cannot be removed still takes its room: the next one goes.
            if removal.remove(&p) {
                total = total.saturating_sub(size);
            }
        }
        Ok(removal)
    }

    /// Removes least recently used entries until the directory fits the bound; returns
    /// how many were removed (none without a bound). An entry that cannot be removed (a
    /// read-only directory) makes it an error, after the others were tried.
    pub fn evict(&self) -> Result<usize> {
        match self.inner.max_bytes {
            Some(max) => self.evict_to(max, None)?.outcome(&self.inner.dir, "evict"),
            None => Ok(0),
        }
    }

    /// Total bytes of the entries in the directory.
    pub fn total_bytes(&self) -> Result<u64> {
        Ok(self.scan()?.iter().map(|e| e.1).sum())
    }

    /// Every entry, most recently used first, described from its header alone: a listing
    /// reads a few hundred bytes of each entry, however large. A header that does not
    /// decode, or records another key, marks the entry unusable; damage past the header
    /// (the checksum) is found by [`Cache::info`] and when the entry is used.
    pub fn entries(&self) -> Result<Vec<CacheEntry>> {
        let mut all = self.scan()?;
        all.sort_by_key(|e| std::cmp::Reverse(e.2));
        Ok(all
            .into_iter()
            .map(|(p, size, t)| describe(p, size, t, false))
            .collect())
    }

    /// The entry with `key` (or a unique key prefix), read whole and verified (checksum
    /// included).
    pub fn info(&self, key: &str) -> Result<CacheEntry> {
        // An empty (or blank) prefix names no entry: it would pick whichever is alone.
        if key.trim().is_empty() {
            return Err(Error::invalid(format!(
                "compile cache {}: give a key, or the start of one (`rpjrt cache ls` lists \
                 them)",
                self.inner.dir.display()
            )));
        }
        let matches: Vec<_> = self
            .scan()?
            .into_iter()
            .filter(|(p, _, _)| {
                p.file_stem()
                    .and_then(|s| s.to_str())
                    .is_some_and(|s| s.starts_with(key))
            })
            .collect();
        match matches.len() {
            0 => Err(Error::invalid(format!(
                "compile cache {}: no entry with key {key:?}",
                self.inner.dir.display()
            ))),
            1 => {
                let (p, size, t) = matches.into_iter().next().expect("one match");
                Ok(describe(p, size, t, true))
            }
            n => Err(Error::invalid(format!(
                "compile cache {}: {n} entries start with {key:?}; give more of the key",
                self.inner.dir.display()
            ))),
        }
    }

    /// Removes every entry, and the temporary files that writers killed mid-write left;
    /// returns how many entries went. An entry another process is writing right now is
    /// left to its writer (removing its temporary file would fail that write). An entry
    /// that cannot be removed makes it an error naming it, after the others were tried.
    pub fn clear(&self) -> Result<usize> {
        let mut removal = Removal::default();
        for (p, _, _) in self.scan()? {
            removal.remove(&p);
        }
        crate::remove_orphaned_temps(&self.inner.dir, 3, |t| t.strip_prefix(TMP_PREFIX));
        removal.outcome(&self.inner.dir, "clear")
    }
}

/// Entries removed from a cache directory, and the first of those that could not be.
#[derive(Default)]
struct Removal {
    removed: usize,
    failed: usize,
    first_failure: Option<(PathBuf, std::io::Error)>,
}

impl Removal {
    /// Removes the entry at `p`; whether it is gone (one already gone, removed by another
    /// process, is gone without being counted).
    fn remove(&mut self, p: &Path) -> bool {
        match fs::remove_file(p) {
            Ok(()) => self.removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                self.failed += 1;
                self.first_failure.get_or_insert((p.to_path_buf(), e));
                return false;
            }
        }
        true
    }

    /// How many went, or (when one could not be removed) an error saying how many could
    /// not, the first of them and why, and how many went: a cache that stays full (a
    /// read-only directory, say) is not reported as emptied.
    fn outcome(self, dir: &Path, what: &str) -> Result<usize> {
        let Some((p, e)) = self.first_failure else {
            return Ok(self.removed);
        };
        Err(Error::invalid(format!(
            "compile cache {}: cannot {what}: {} of its entries could not be removed (the \
             first, {}: {e}); {} removed",
            dir.display(),
            self.failed,
            p.display(),
            self.removed
        )))
    }
}

/// The entry at `path` (`size` bytes): its header only, or with `whole`, every byte
/// decoded and the checksum verified.
fn describe(path: PathBuf, size: u64, last_used: SystemTime, whole: bool) -> CacheEntry {
    let key = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_string();
    let decoded = open_entry(&path)
        .map_err(|e| Error::invalid(format!("cannot read it: {e}")))
        .and_then(|(f, len)| {
            // The header first, whole or not: a large file that is no entry is refused
            // after a few hundred bytes.
            let head = Artifact::read_head(&mut std::io::BufReader::new(&f), len.min(size))?;
            // One a compile would not read is no usable entry, in a listing too.
            entry_bound(&path, len)?;
            if !whole {
                return Ok(head);
            }
            check_key(&head, &key)?;
            let mut b = Vec::new();
            std::io::Seek::rewind(&mut &f)
                .and_then(|_| std::io::Read::read_to_end(&mut &f, &mut b))
                .map_err(|e| Error::invalid(format!("cannot read it: {e}")))?;
            Artifact::decode(&b)
        })
        .and_then(|a| check_key(&a, &key).map(|()| a));
    let (target, compile_ms, error) = match decoded {
        Ok(a) => (
            Some(a.target.clone()),
            a.extra_field("compile_ms").and_then(|s| s.parse().ok()),
            None,
        ),
        Err(e) => (None, None, Some(e.to_string())),
    };
    CacheEntry {
        key,
        path,
        size,
        last_used,
        target,
        compile_ms,
        error,
    }
}

impl fmt::Debug for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Cache({}, max_bytes={:?})",
            self.inner.dir.display(),
            self.inner.max_bytes
        )
    }
}

impl Client {
    /// Turns the persistent compile cache on (`Some`) or off (`None`) for
    /// [`Client::compile`] on this client and its clones.
    pub fn set_cache(&self, cache: Option<Cache>) {
        *self.core.cache.write().unwrap_or_else(|p| p.into_inner()) = cache;
    }

    /// The compile cache this client uses, if any.
    pub fn cache(&self) -> Option<Cache> {
        self.core
            .cache
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Compiles through `cache` regardless of the client's own cache setting.
    pub fn compile_with_cache(
        &self,
        program: &Program,
        options: &CompileOptions,
        cache: &Cache,
    ) -> Result<Executable> {
        cache.compile(self, program, options)
    }
}

#[cfg(test)]
#[allow(dead_code)]
fn _assert_send_sync() {
    fn check<T: Send + Sync + 'static>() {}
    check::<Cache>();
    check::<crate::client::topology::Topology>();
    check::<Artifact>();
}

/// `RPJRT_CACHE_MAX_BYTES`, the size bound of a cache directory, if set.
fn env_max_bytes() -> Result<Option<u64>> {
    match crate::env_text("RPJRT_CACHE_MAX_BYTES") {
        Some(s) if !s.trim().is_empty() => s.trim().parse::<u64>().map(Some).map_err(|_| {
            Error::invalid(format!(
                "RPJRT_CACHE_MAX_BYTES={s:?} is not a whole number of bytes"
            ))
        }),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry that cannot be removed is counted and named, not passed over as removed:
    /// `clear` and `evict` said "0 removed" and succeeded on a read-only directory.
    #[test]
    fn an_entry_that_cannot_be_removed_is_reported() {
        let dir = std::env::temp_dir().join(format!("rpjrt-removal-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("stuck")).unwrap();
        fs::write(dir.join("gone"), b"x").unwrap();
        let mut r = Removal::default();
        assert!(r.remove(&dir.join("gone")));
        // Removing a directory as a file fails, as an entry on a read-only file system does.
        assert!(!r.remove(&dir.join("stuck")));
        // One already removed by another process is neither removed nor failed.
        assert!(r.remove(&dir.join("gone")));
        let e = r.outcome(&dir, "clear").unwrap_err().to_string();
        assert!(
            e.contains("cannot clear: 1 of its entries could not be removed"),
            "{e}"
        );
        assert!(e.contains("stuck"), "{e}");
        assert!(e.contains("1 removed"), "{e}");
        assert_eq!(Removal::default().outcome(&dir, "evict").unwrap(), 0);
        fs::remove_dir_all(&dir).unwrap();
    }

    /// An entry's name holding a FIFO (planted, or swapped in after the first look) is
    /// refused when opened, never waited on for a writer.
    #[test]
    fn a_fifo_is_refused_when_opened() {
        let dir = std::env::temp_dir().join(format!("rpjrt-fifo-entry-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("entry");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let (tx, rx) = std::sync::mpsc::channel();
        let p = fifo.clone();
        std::thread::spawn(move || tx.send(open_entry(&p).map(|_| ()).unwrap_err().to_string()));
        let e = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("opening a FIFO entry waited for a writer");
        assert!(e.contains("not a regular file"), "{e}");
        assert!(!starts_with_magic(&fifo));
        fs::remove_dir_all(&dir).unwrap();
    }
}
