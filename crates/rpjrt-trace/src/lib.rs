//! rpjrt's own spans: what a program spent its time on (loading the plugin, compiling,
//! moving data, executing, waiting, fetching results, custom calls), written in the Chrome
//! trace format that Perfetto (<https://ui.perfetto.dev>) and `chrome://tracing` open.
//!
//! Recording is off by default. Off, a span costs one relaxed atomic load and allocates
//! nothing, so the instrumented paths (execute included) run as fast as without it.
//! [`start`] turns it on for the whole process, [`stop`] turns it off and returns what was
//! recorded:
//!
//! ```
//! # fn main() -> rpjrt_trace::Result<()> {
//! use rpjrt_trace::{self as trace, Category};
//! trace::start()?;
//! {
//!     let _span = trace::span(Category::Execute, "my step").bytes(1024);
//! }
//! let t = trace::stop()?;
//! assert_eq!(t.count(Category::Execute), 1);
//! let json = t.to_chrome_json();
//! assert!(json.contains("\"ph\":\"X\""));
//! # Ok(()) }
//! ```
//!
//! Each thread keeps its own list of finished spans behind its own lock, which only
//! [`stop`] ever contends for; threads register their list once, on their first span of a
//! recording. A span is written when it ends (its guard is dropped); spans still open when
//! [`stop`] runs, and spans that began before [`start`], are left out.
//!
//! A recording belongs to the process that started it. In a process forked during one,
//! nothing is recorded (a span there is as cheap as with recording off, and keeps no
//! memory), [`is_recording`] is false, [`stop`] finds nothing to stop, and [`start`]
//! begins the child's own recording.
//!
//! [`html`] turns a trace into one self-contained HTML page (a timeline and a per-phase
//! summary, no network), what `rpjrt trace view` writes.
//!
//! This crate is `rpjrt::trace`: the client re-exports it under that name and records its
//! spans here; it needs no plugin, and errors are rpjrt's own [`Error`] type.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use rpjrt_raw::error::Code;
pub use rpjrt_raw::error::{Error, Result};

/// What a span measured. The names are the `cat` field of the Chrome trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    /// Loading a plugin, creating a client.
    Load,
    /// Compiling a program, or loading a serialized executable.
    Compile,
    /// Host-to-device copies (puts).
    Transfer,
    /// Launching an execution.
    Execute,
    /// Waiting for a buffer or an event to become ready.
    Wait,
    /// Device-to-host copies.
    Fetch,
    /// A custom-call handler running (called by the plugin during an execution).
    CustomCall,
}

impl Category {
    /// Every category, in the order the viewer lists them.
    pub const ALL: [Category; 7] = [
        Category::Load,
        Category::Compile,
        Category::Transfer,
        Category::Execute,
        Category::Wait,
        Category::Fetch,
        Category::CustomCall,
    ];

    /// The name written to the trace (`load`, `compile`, ..., `custom_call`).
    pub fn name(self) -> &'static str {
        match self {
            Category::Load => "load",
            Category::Compile => "compile",
            Category::Transfer => "transfer",
            Category::Execute => "execute",
            Category::Wait => "wait",
            Category::Fetch => "fetch",
            Category::CustomCall => "custom_call",
        }
    }

    /// The category of a name written by [`Category::name`].
    pub fn from_name(name: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.name() == name)
    }
}

impl std::fmt::Display for Category {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A small argument of a span: a number or a text.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// An integer (bytes, a device id, a count).
    Int(i64),
    /// A text (a program name, a custom-call target).
    Text(String),
}

impl Arg {
    fn to_json(&self) -> Value {
        match self {
            Arg::Int(i) => json!(i),
            Arg::Text(s) => json!(s),
        }
    }
}

/// One finished span.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// What was done (`execute`, `put`, `to_host`, ...).
    pub name: String,
    /// Its category.
    pub category: Category,
    /// Start, in microseconds since the recording started.
    pub start_us: f64,
    /// Duration in microseconds.
    pub duration_us: f64,
    /// The recording's number for the thread it ran on (1, 2, ... in order of first span).
    pub thread: u64,
    /// Small arguments: `program`, `bytes`, `device`, `target`, ...
    pub args: Vec<(&'static str, Arg)>,
}

/// Whether spans are recorded: the one load a span makes when off. Set in the process that
/// started the recording ([`OWNER`]); a child forked during the recording inherits it set,
/// and treats it as off.
static ON: AtomicBool = AtomicBool::new(false);
/// The fork generation (`rpjrt_raw::guard::generation`) of the process that started the
/// current (or last) recording.
static OWNER: AtomicU32 = AtomicU32::new(0);
/// The number of the current (or last) recording; a span keeps the one it started in.
static GENERATION: AtomicU64 = AtomicU64::new(0);
/// Thread numbers, handed out on a thread's first span.
static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

struct Raw {
    name: &'static str,
    category: Category,
    start: Instant,
    duration: Duration,
    generation: u64,
    args: Vec<(&'static str, Arg)>,
}

/// A thread's finished spans.
struct ThreadLog {
    id: u64,
    name: String,
    spans: Mutex<Vec<Raw>>,
}

struct Recorder {
    started: Option<(Instant, i64)>,
    threads: Vec<Arc<ThreadLog>>,
    /// The fork generation whose threads `threads` lists (in a child, the logs of the
    /// parent's other threads are left behind: those threads do not exist there).
    generation: u32,
}

static RECORDER: Mutex<Recorder> = Mutex::new(Recorder {
    started: None,
    threads: Vec::new(),
    generation: 0,
});

/// Whether a recording is on in this process: on, and started by this process, not by
/// one it was forked from.
#[inline]
fn recording_here() -> bool {
    ON.load(Ordering::Acquire) && !rpjrt_raw::guard::forked_since(OWNER.load(Ordering::Acquire))
}

/// Now, in nanoseconds since the Unix epoch (0 if the clock is before it).
fn unix_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

fn recorder() -> MutexGuard<'static, Recorder> {
    RECORDER.lock().unwrap_or_else(|p| p.into_inner())
}

thread_local! {
    static LOG: Arc<ThreadLog> = {
        let id = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
        let name = std::thread::current()
            .name()
            .map_or_else(|| format!("thread {id}"), str::to_string);
        let log = Arc::new(ThreadLog { id, name, spans: Mutex::new(Vec::new()) });
        recorder().threads.push(Arc::clone(&log));
        log
    };
}

/// Whether spans are being recorded now in this process (a recording of the process this
/// one was forked from does not count).
#[inline]
pub fn is_recording() -> bool {
    recording_here()
}

/// Starts recording spans in this process. Fails with `FailedPrecondition` when a
/// recording is already running (one at a time: stop it first); one that was running in
/// the process this one was forked from is not (it is the parent's, and is dropped here).
pub fn start() -> Result<()> {
    // Registers the fork handler that tells a child from its parent (before the recording
    // starts, so that a fork during it is seen).
    let now = rpjrt_raw::guard::generation();
    // This thread's log, made before the recorder is locked (making it locks it).
    let mine = LOG.try_with(Arc::clone).ok();
    let mut r = recorder();
    if r.generation != now {
        // The first recording in a forked child: the other threads of the parent are not
        // here, and their logs (whose locks one of them may have held at the fork) are
        // never touched again.
        r.threads
            .retain(|t| mine.as_ref().is_some_and(|m| Arc::ptr_eq(t, m)));
        r.generation = now;
    }
    if recording_here() {
        return Err(Error::Pjrt {
            entry: "rpjrt::trace::start",
            code: Code::FailedPrecondition,
            message: "a trace is already being recorded: stop it before starting another"
                .to_string(),
        });
    }
    // Spans left from an earlier recording (still open at its stop) are dropped.
    for t in &r.threads {
        t.spans.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
    GENERATION.fetch_add(1, Ordering::Relaxed);
    r.started = Some((Instant::now(), unix_ns()));
    OWNER.store(now, Ordering::Release);
    ON.store(true, Ordering::Release);
    Ok(())
}

/// Stops recording and returns the spans that ended since [`start`], ordered by start
/// time. Fails with `FailedPrecondition` when no recording is running in this process (a
/// recording of the process this one was forked from is that process's to stop).
pub fn stop() -> Result<Trace> {
    if ON.load(Ordering::Acquire) && !recording_here() {
        return Err(Error::Pjrt {
            entry: "rpjrt::trace::stop",
            code: Code::FailedPrecondition,
            message: "no trace is being recorded in this process: the one running when it \
                      was forked belongs to the parent process, which stops it"
                .to_string(),
        });
    }
    let mut r = recorder();
    if !ON.swap(false, Ordering::AcqRel) {
        return Err(Error::Pjrt {
            entry: "rpjrt::trace::stop",
            code: Code::FailedPrecondition,
            message: "no trace is being recorded (call start first)".to_string(),
        });
    }
    let (started, start_unix_ns) = r
        .started
        .take()
        .unwrap_or_else(|| (Instant::now(), unix_ns()));
    let generation = GENERATION.load(Ordering::Relaxed);
    let mut events = Vec::new();
    let mut threads = BTreeMap::new();
    for log in &r.threads {
        let spans = std::mem::take(&mut *log.spans.lock().unwrap_or_else(|p| p.into_inner()));
        for s in spans.into_iter().filter(|s| s.generation == generation) {
            // A span that began before the recording started is not in it (start clears
            // the lists, so only one that ended in between could get here).
            let Some(offset) = s.start.checked_duration_since(started) else {
                continue;
            };
            threads.entry(log.id).or_insert_with(|| log.name.clone());
            events.push(Event {
                name: s.name.to_string(),
                category: s.category,
                start_us: offset.as_secs_f64() * 1e6,
                duration_us: s.duration.as_secs_f64() * 1e6,
                thread: log.id,
                args: s.args,
            });
        }
    }
    // Logs of threads that have ended are no longer needed (their spans were taken).
    r.threads.retain(|t| Arc::strong_count(t) > 1);
    events.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
    Ok(Trace {
        events,
        threads,
        start_unix_ns,
        ..Trace::default()
    })
}

/// Opens a span of `category` named `name`; it ends when the returned guard is dropped.
/// When not recording this is one relaxed atomic load, and the guard (and its builder
/// methods) do nothing.
#[inline]
pub fn span(category: Category, name: &'static str) -> Span {
    if !ON.load(Ordering::Relaxed) {
        return Span { open: None };
    }
    Span::begin(category, name)
}

/// An open span: records itself when dropped (if recording is still on).
#[must_use = "a span ends when dropped: bind it to a variable (`let _span = ...`)"]
pub struct Span {
    open: Option<Box<Open>>,
}

struct Open {
    name: &'static str,
    category: Category,
    start: Instant,
    generation: u64,
    args: Vec<(&'static str, Arg)>,
}

impl Span {
    #[cold]
    fn begin(category: Category, name: &'static str) -> Span {
        // A recording inherited across fork is the parent's: nothing is kept here.
        if !recording_here() {
            return Span { open: None };
        }
        Span {
            open: Some(Box::new(Open {
                name,
                category,
                generation: GENERATION.load(Ordering::Relaxed),
                args: Vec::new(),
                start: Instant::now(),
            })),
        }
    }

    /// Whether this span will be recorded (recording was on when it opened).
    #[inline]
    pub fn is_recording(&self) -> bool {
        self.open.is_some()
    }

    /// Adds an integer argument.
    #[inline]
    pub fn int(self, key: &'static str, value: i64) -> Span {
        match self.open {
            None => self,
            Some(_) => self.push(key, Arg::Int(value)),
        }
    }

    /// [`Span::text`] while recording (out of line: the off path stays a test).
    #[cold]
    #[inline(never)]
    fn push_text(self, key: &'static str, value: &str) -> Span {
        self.push(key, Arg::Text(value.to_string()))
    }

    /// Adds an argument to an open span.
    #[cold]
    #[inline(never)]
    fn push(mut self, key: &'static str, arg: Arg) -> Span {
        if let Some(o) = &mut self.open {
            o.args.push((key, arg));
        }
        self
    }

    /// Adds a text argument (copied only when recording).
    #[inline]
    pub fn text(self, key: &'static str, value: &str) -> Span {
        match self.open {
            None => self,
            Some(_) => self.push_text(key, value),
        }
    }

    /// Adds the `bytes` argument.
    #[inline]
    pub fn bytes(self, n: usize) -> Span {
        self.int("bytes", i64::try_from(n).unwrap_or(i64::MAX))
    }

    /// Adds the `device` argument (a device id).
    #[inline]
    pub fn device(self, id: i64) -> Span {
        self.int("device", id)
    }

    /// Adds the `program` argument.
    #[inline]
    pub fn program(self, name: &str) -> Span {
        self.text("program", name)
    }
}

impl Drop for Span {
    #[inline]
    fn drop(&mut self) {
        if let Some(o) = self.open.take() {
            finish(*o);
        }
    }
}

/// Records a span that was opened while recording (if the recording is still the same).
#[cold]
fn finish(o: Open) {
    let duration = o.start.elapsed();
    if !recording_here() || GENERATION.load(Ordering::Relaxed) != o.generation {
        return;
    }
    let raw = Raw {
        name: o.name,
        category: o.category,
        start: o.start,
        duration,
        generation: o.generation,
        args: o.args,
    };
    // During thread teardown the thread's log may be gone: the span is dropped.
    let _ = LOG.try_with(|log| {
        log.spans
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(raw)
    });
}

/// A finished recording: spans, the threads they ran on, and free-form metadata.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    events: Vec<Event>,
    threads: BTreeMap<u64, String>,
    metadata: BTreeMap<String, String>,
    /// When the recording started, in nanoseconds since the Unix epoch (to place a
    /// plugin's events, which carry wall-clock times).
    start_unix_ns: i64,
    plugin_profile: Option<Vec<u8>>,
    plugin_events: Vec<Value>,
}

impl Trace {
    /// The spans, ordered by start time.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The spans of one category.
    pub fn of(&self, category: Category) -> impl Iterator<Item = &Event> {
        self.events.iter().filter(move |e| e.category == category)
    }

    /// How many spans of `category` were recorded.
    pub fn count(&self, category: Category) -> usize {
        self.of(category).count()
    }

    /// Thread numbers and names of the threads that recorded spans.
    pub fn threads(&self) -> &BTreeMap<u64, String> {
        &self.threads
    }

    /// The metadata (`otherData` in the Chrome trace): what produced the trace, where the
    /// plugin's own profile went, or why there is none.
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// Sets a metadata entry.
    pub fn set_metadata(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.metadata.insert(key.into(), value.into());
    }

    /// The trace as a Chrome trace-event JSON value: `{"traceEvents": [...],
    /// "displayTimeUnit": "ms", "otherData": {...}}`, with one complete (`"ph":"X"`) event
    /// per span (`ts` and `dur` in microseconds) and metadata (`"ph":"M"`) events naming
    /// the process and its threads.
    pub fn to_chrome_value(&self) -> Value {
        self.chrome_value(None)
    }

    fn chrome_value(&self, profile_file: Option<&str>) -> Value {
        let pid = std::process::id();
        let mut out = Vec::with_capacity(self.events.len() + self.threads.len() + 1);
        out.push(
            json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                        "args": {"name": "rpjrt"}}),
        );
        for (tid, name) in &self.threads {
            out.push(
                json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                            "args": {"name": name}}),
            );
        }
        for e in &self.events {
            let args: Map<String, Value> = e
                .args
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_json()))
                .collect();
            out.push(json!({
                "name": e.name, "cat": e.category.name(), "ph": "X",
                "ts": e.start_us, "dur": e.duration_us,
                "pid": pid, "tid": e.thread, "args": args,
            }));
        }
        out.extend(self.plugin_events.iter().cloned());
        let mut other: Map<String, Value> = self
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        other.insert("start_unix_ns".into(), json!(self.start_unix_ns));
        if let Some(f) = profile_file {
            other.insert("plugin_profile_file".into(), json!(f));
        }
        other
            .entry("producer")
            .or_insert_with(|| json!(format!("rpjrt {}", env!("CARGO_PKG_VERSION"))));
        json!({"traceEvents": out, "displayTimeUnit": "ms", "otherData": other})
    }

    /// [`Trace::to_chrome_value`] as text.
    pub fn to_chrome_json(&self) -> String {
        self.to_chrome_value().to_string()
    }

    /// Writes the Chrome trace JSON to `path`, and the plugin's profile, if one was
    /// attached, beside it ([`profile_path`]: `trace.json` → `trace.plugin.xspace.pb`),
    /// named in the trace's metadata (`plugin_profile_file`). Errors name the path.
    pub fn save(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        let path = path.as_ref();
        let write = |p: &std::path::Path, bytes: &[u8]| {
            rpjrt_raw::files::write_regular_file(p, |f| std::io::Write::write_all(f, bytes))
                .map_err(|e| match e {
                    Error::InvalidArgument(m) => {
                        Error::invalid(format!("writing the trace to {m}"))
                    }
                    other => other,
                })
        };
        let mut file = None;
        if let Some(bytes) = &self.plugin_profile {
            let beside = profile_path(path);
            write(&beside, bytes)?;
            file = beside.file_name().map(|n| n.to_string_lossy().into_owned());
        }
        write(
            path,
            self.chrome_value(file.as_deref()).to_string().as_bytes(),
        )
    }

    /// The self-contained HTML viewer page of this trace (see [`html`]).
    pub fn to_html(&self) -> String {
        page(&self.to_chrome_value(), "rpjrt trace")
    }
}

/// Where [`Trace::save`] writes the plugin's profile for a trace written to `path`: the
/// same folder, `.json` replaced by `.plugin.xspace.pb` (appended when the name has no
/// `.json`).
pub fn profile_path(path: &std::path::Path) -> std::path::PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "trace".into(), |n| n.to_string_lossy().into_owned());
    let stem = name.strip_suffix(".json").unwrap_or(&name);
    path.with_file_name(format!("{stem}.plugin.xspace.pb"))
}

/// A self-contained HTML page that draws a Chrome trace: a timeline with one row per
/// thread, spans coloured by category and labelled, a legend, and a summary table per
/// category and per span name (count, total, mean). The trace is embedded; the page loads
/// nothing from the network. `json` is the text of a Chrome trace (an object with
/// `traceEvents`, or a bare array of events); `title` names the page.
///
/// Only what the page can draw is embedded: complete (`"ph":"X"`) events with a numeric
/// `ts` (their `name` and `cat` made text, `?` when absent) and `thread_name` metadata.
/// Other elements of the list (`null`, a number, an event without a `ts`) are left out,
/// and the page names them above the timeline; other kinds of event are counted there.
///
/// Fails, naming what is wrong, when the text is not JSON or has no event list.
pub fn html(json: &str, title: &str) -> Result<String> {
    let value: Value = serde_json::from_str(json)
        .map_err(|e| Error::invalid(format!("the trace is not JSON: {e}")))?;
    let value = match value {
        Value::Array(events) => json!({"traceEvents": events}),
        Value::Object(ref o) if o.get("traceEvents").is_some_and(Value::is_array) => value,
        Value::Object(_) => {
            return Err(Error::invalid(
                "the trace has no \"traceEvents\" list: is it a Chrome trace-event file?",
            ))
        }
        _ => {
            return Err(Error::invalid(
                "the trace is neither an object with \"traceEvents\" nor a list of events",
            ))
        }
    };
    Ok(page(&value, title))
}

const VIEWER: &str = include_str!("viewer.html");

fn page(trace: &Value, title: &str) -> String {
    let empty = Map::new();
    let trace = viewer::drawable(trace.as_object().unwrap_or(&empty));
    // Inside <script>, "</" or "<!--" would change how the page is read: a `<` can only
    // be inside a JSON string, where `\u003c` means the same.
    let data = trace.to_string().replace('<', "\\u003c");
    VIEWER
        .replace("@@TITLE@@", &escape_html(title))
        .replace("@@TRACE@@", &data)
}

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('@', "&#64;")
}

#[cfg(test)]
mod tests;
mod viewer;
mod xspace;
