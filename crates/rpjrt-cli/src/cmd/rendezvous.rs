//! `rpjrt rendezvous`: checks that the processes of a job can meet on the TCP key-value
//! store (process 0 hosts it). Each prints the process count and its own index; with
//! `--plugin`, each then creates a multi-process client through the store and prints the
//! global device view it got.

use std::sync::Arc;
use std::time::Duration;

use rpjrt::{Client, ClientOptions, Plugin};
use rpjrt_distributed::{
    DistributedOptions, KvStore, LaunchEnv, Rendezvous, TcpStore, MAX_TOKEN_BYTES,
};

use crate::common::{self, CliError, EXIT_OK};

/// Arguments of `rpjrt rendezvous`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Give up after this many seconds (each wait is bounded by it).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub timeout: f64,
    /// This process's index (default: from the launcher's environment).
    #[arg(long)]
    pub process_id: Option<usize>,
    /// The number of processes (default: from the launcher's environment).
    #[arg(long)]
    pub num_processes: Option<usize>,
    /// host:port of process 0's store (default: from the launcher's environment).
    #[arg(long)]
    pub coordinator: Option<String>,
    /// Wait this many seconds after joining, before the barrier (for tests).
    #[arg(long, hide = true)]
    pub hold: Option<f64>,
    /// Also create a multi-process client on this plugin (a path, a plugin or wheel name,
    /// or a platform such as `cpu`) through the store, and print the devices it lists.
    #[arg(long)]
    pub plugin: Option<std::ffi::OsString>,
    /// Create options for that client, as NAME=VALUE (as for `rpjrt run -o`).
    #[arg(long = "option", short = 'o', value_name = "NAME=VALUE")]
    pub options: Vec<String>,
}

/// Runs `rpjrt rendezvous`.
pub fn run(args: Args) -> Result<i32, CliError> {
    let timeout = crate::common::positive_seconds(args.timeout, "--timeout")?;
    let explicit = match (args.process_id, args.num_processes) {
        (Some(_), Some(_)) => true,
        (None, None) => false,
        _ => {
            return Err(CliError::usage(
                "give both --process-id and --num-processes, or neither",
            ))
        }
    };
    // As the library resolves `initialize`'s arguments (`LaunchEnv::resolve`): explicit
    // ids take the coordinator and token from `RPJRT_COORDINATOR` and `RPJRT_TOKEN` (as
    // `rpjrt launch` sets them) unless --coordinator is given; without ids, the launcher's
    // environment, --coordinator overriding its coordinator. A value that is not UTF-8 is
    // kept (with replacement characters), to fail naming it, never dropped as unset.
    let env = LaunchEnv::resolve(
        args.process_id,
        args.num_processes,
        args.coordinator.clone(),
        None,
    )
    .map_err(|e| CliError::usage(e.to_string()))?;
    // Named as the variable the user set, not as "the job token" (the launcher's own
    // environment has checked its token already).
    if let Some(t) = env
        .token
        .as_ref()
        .filter(|t| explicit && t.len() > MAX_TOKEN_BYTES)
    {
        return Err(CliError::usage(format!(
            "RPJRT_TOKEN is {} bytes long; at most {MAX_TOKEN_BYTES} are accepted",
            t.len()
        )));
    }
    let (p, n) = (env.process_id, env.num_processes);
    if env.coordinator.is_none() {
        return Err(CliError::usage(format!(
            "process {p} of {n}: no coordinator address: the launch environment ({}) names \
             none; pass --coordinator HOST:PORT or set RPJRT_COORDINATOR=host:port (process \
             0 hosts the store there)",
            env.source
        )));
    }
    let fail = |e: rpjrt::Error| CliError::failed(format!("process {p} of {n}: {e}"));
    // Create options are the client's: without --plugin there is none to take them, and
    // an option that does nothing is refused rather than ignored.
    if args.plugin.is_none() && !args.options.is_empty() {
        return Err(CliError::usage(format!(
            "process {p} of {n}: -o/--option {} sets a create option of the client that \
             --plugin makes, and has no effect without --plugin: add --plugin P, or leave \
             -o out",
            common::printable(&args.options[0])
        )));
    }
    let options = common::parse_options(&args.options)?;
    // Found as every verb finds it: no plugin matching the name is a usage error (exit 2),
    // one that cannot be loaded a failure (exit 1) saying what to install.
    let plugin = match &args.plugin {
        Some(spec) => Some(
            common::load_plugin(Some(spec))
                .map_err(|e| CliError {
                    message: format!("process {p} of {n}: {}", e.message),
                    ..e
                })?
                .0,
        ),
        None => None,
    };
    // Never printed into the plugin library it loaded (`... >> lib.so`).
    if let Some(plugin) = &plugin {
        common::check_stdout(&[("the plugin library", plugin.path())])?;
    }
    // A coordinator address that does not parse is the user's input: a usage error.
    let store = Arc::new(TcpStore::from_env(&env, timeout).map_err(|e| match e {
        rpjrt::Error::InvalidArgument(m) => CliError::usage(format!("process {p} of {n}: {m}")),
        other => fail(other),
    })?);
    // Whether this process's own step (its client) failed, as opposed to the meeting
    // (a process that did not come, which the others are told of by name).
    let mut own_failure = false;
    // The client, kept (and never destroyed: see `client_view`) until the rendezvous ends.
    let mut made: Option<rpjrt::Client> = None;
    let result = meet(&store, p, n, timeout, args.hold)
        .map_err(ClientError::other)
        .and_then(|seen| {
            // From here to the end of the last barrier, a process whose own step failed
            // (it publishes why, below) or that lost its connection to the store ends
            // this one at once, naming it: the plugin's waits in the store for that
            // process's keys, and the last barrier, are not waited out.
            let watch = FailureWatch::start(&store, p, n, timeout);
            let view = match &plugin {
                Some(pl) => {
                    let view = client_view(pl, &options, &store, p, n, timeout);
                    own_failure = view.is_err();
                    let (view, client) = view?;
                    made = Some(client);
                    Some(view)
                }
                None => None,
            };
            // Said before the barrier: a process that has reached it and leaves once it
            // passes is not taken for one that was lost.
            let _ = store.set(&done_key(p), b"1");
            let done = store.barrier("rendezvous-done", p, n, timeout);
            watch.stop();
            done.map_err(|e| ClientError::other(published_failure(&store, e)))?;
            Ok((seen, view))
        });
    // Client options the plugin or rpjrt refused are the user's input (exit 2).
    let result = result.map_err(|e| match e.refused {
        true => CliError::usage(common::with_log(
            format!(
                "process {p} of {n}: {}{}",
                e.error,
                common::option_refusal_note(&e.error, &options)
            ),
            &e.log,
        )),
        false => CliError::failed(common::with_log(
            format!("process {p} of {n}: {}", e.error),
            &e.log,
        )),
    });
    // This process's own step failed: the others, waiting in the store for its keys,
    // hear why at once (`FailureWatch`) rather than when their waits run out.
    if let (true, Err(e)) = (own_failure, &result) {
        // Without this process's plugin log, which it shows itself.
        let why = e
            .message
            .split(common::LOG_HEADING)
            .next()
            .unwrap_or_default();
        let _ = store.set(FAILED_KEY, why.trim_end().as_bytes());
    }
    // The store as the user named it, unless that was port 0 (the host then listens on
    // a free port: show that one).
    let address = match env.coordinator.as_deref() {
        Some(c) if !c.ends_with(":0") => c.to_string(),
        _ => store.address().to_string(),
    };
    // Process 0 hosts the store: it outlives the others' last reads (or their own
    // timeouts, when the rendezvous failed), bounded by the timeout. When a process's own
    // step failed, the others leave as soon as they read why: the host waits for them only
    // briefly, not for the whole timeout.
    if store.is_host() {
        let grace = match own_failure {
            true => timeout.min(FAILED_GRACE),
            false => timeout,
        };
        store.shutdown_after(grace);
    } else {
        // Said now, not left to the store's drop: the client, never destroyed, holds the
        // store too.
        store.shutdown();
    }
    drop(store);
    let (seen, view) = result?;
    crate::outln!(
        "process {p} of {n}: rendezvous ok, {seen} processes (launcher: {}, store: {})",
        crate::common::printable(&env.source.to_string()),
        crate::common::printable(&address.to_string()),
    );
    if let Some(v) = view {
        crate::outln!("process {p} of {n}: {}", crate::common::printable(&v.text));
        if let Some(w) = v.single_process_warning(p, n) {
            crate::errln!(
                "{} process {p} of {n}: {}",
                common::paint_stderr("rpjrt: warning:", common::Style::Yellow),
                common::printable_lines(&w)
            );
        }
    }
    drop(made);
    Ok(EXIT_OK)
}

/// The key a process whose own step failed sets to its error: the others' [`FailureWatch`]
/// reads it. The store's host also sets it for a process it saw lose its connection.
const FAILED_KEY: &str = "rpjrt:rendezvous:failed";

/// The key process `p` sets when it has reached the last barrier: once it is there, its
/// leaving (when it passes) is no failure for a [`FailureWatch`] to report.
fn done_key(p: usize) -> String {
    format!("rpjrt:rendezvous:done:{p}")
}

/// How often a [`FailureWatch`] looks for [`FAILED_KEY`] (and, on the host, for a process
/// that left the store).
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// How long a host whose own step failed (or who heard of another's failure) serves the
/// others, who leave as soon as they have read the failure.
const FAILED_GRACE: Duration = Duration::from_secs(5);

/// A thread that, from the meeting to the end of the last barrier, looks for another
/// process's failure ([`FAILED_KEY`]) and ends this process with that process's error, at
/// once: the plugin's waits in the store for that process's keys cannot be cut short any
/// other way, and the last barrier would only say that the process left. On the store's
/// host (where it costs no call over the network), it also looks for a process that lost
/// its connection to the store (it exited or crashed: it could publish nothing) or left
/// it before reaching the last barrier, and publishes that as the failure, naming it, for
/// every process to read.
struct FailureWatch {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FailureWatch {
    fn start(store: &Arc<TcpStore>, p: usize, n: usize, timeout: Duration) -> FailureWatch {
        use std::sync::atomic::Ordering;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (store, flag) = (Arc::clone(store), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("rpjrt-rendezvous-watch".into())
            .spawn(move || {
                while !flag.load(Ordering::Acquire) {
                    let why = match store.try_get(FAILED_KEY) {
                        Ok(Some(why)) => Some(String::from_utf8_lossy(&why).into_owned()),
                        _ if store.is_host() => lost_process(&store, p, n),
                        _ => None,
                    };
                    if let Some(why) = why {
                        if flag.load(Ordering::Acquire) {
                            return;
                        }
                        let message = format!(
                            "process {p} of {n}: another process failed, so this job cannot \
                             go on: {why}"
                        );
                        if store.is_host() {
                            store.shutdown_after(timeout.min(FAILED_GRACE));
                        }
                        rpjrt::stdio::notice(&format!(
                            "{} {}",
                            common::paint_stderr("rpjrt:", common::Style::Red),
                            common::printable_lines(&message)
                        ));
                        crate::supervise::note_finished();
                        rpjrt::stdio::exit_now(crate::common::EXIT_DEFECT);
                    }
                    std::thread::sleep(WATCH_EVERY);
                }
            })
            .ok();
        FailureWatch { stop, thread }
    }

    /// Ends the watch (this process's own step ended, well or not).
    fn stop(mut self) {
        self.end();
    }

    fn end(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for FailureWatch {
    fn drop(&mut self) {
        self.end();
    }
}

/// On the store's host: a process of `0..n` (not `p`) that left the store before reaching
/// the last barrier, said as the failure the others read ([`FAILED_KEY`], which is set to
/// it unless a process published its own failure meanwhile). `None` when every process
/// is still there, or has reached the last barrier.
fn lost_process(store: &TcpStore, p: usize, n: usize) -> Option<String> {
    let (q, how) = (1..n).filter(|&q| q != p).find_map(|q| {
        let how = store.departure(q).ok().flatten()?;
        // Reached the last barrier, and left once it passed: not a failure.
        match store.try_get(&done_key(q)) {
            Ok(None) => Some((q, how)),
            _ => None,
        }
    })?;
    // A process that failed publishes why before it leaves: that says more.
    if let Ok(Some(why)) = store.try_get(FAILED_KEY) {
        return Some(String::from_utf8_lossy(&why).into_owned());
    }
    let why = format!(
        "process {q} of {n} {} before the rendezvous ended (while the processes created \
         their clients, or in the last barrier)",
        how.describe()
    );
    let _ = store.set(FAILED_KEY, why.as_bytes());
    Some(why)
}

/// How long a process whose last barrier ran out of time looks for another process's
/// published failure ([`FAILED_KEY`]): the process it waited for may be failing in its
/// client creation, whose waits end at the same limit, and publish why a moment later.
const LATE_FAILURE_WAIT: Duration = Duration::from_secs(1);

/// The error of a failed last barrier: when another process published its failure (now,
/// or within [`LATE_FAILURE_WAIT`] of a barrier that ran out of time), that failure, which
/// says why the barrier could not pass; else the barrier's own error.
fn published_failure(store: &TcpStore, barrier: rpjrt::Error) -> rpjrt::Error {
    let until = std::time::Instant::now()
        + match barrier.code() {
            rpjrt::Code::DeadlineExceeded => LATE_FAILURE_WAIT,
            _ => Duration::ZERO,
        };
    loop {
        if let Ok(Some(why)) = store.try_get(FAILED_KEY) {
            return rpjrt::Error::Store {
                code: barrier.code(),
                message: format!(
                    "another process failed, so this job cannot go on: {}",
                    String::from_utf8_lossy(&why)
                ),
            };
        }
        if std::time::Instant::now() >= until {
            return barrier;
        }
        std::thread::sleep(WATCH_EVERY);
    }
}

/// Why a rendezvous failed: the error, whether it is client options rpjrt or the plugin
/// refused (the user's input, [`common::refuses_options`]), and what the plugin wrote
/// meanwhile (captured; shown because it failed).
struct ClientError {
    error: rpjrt::Error,
    refused: bool,
    log: String,
}

impl ClientError {
    fn other(error: rpjrt::Error) -> ClientError {
        ClientError {
            error,
            refused: false,
            log: String::new(),
        }
    }
}

impl From<rpjrt::Error> for ClientError {
    fn from(e: rpjrt::Error) -> ClientError {
        ClientError::other(e)
    }
}

/// The store as the plugin sees it while it creates the client: each of its waits for a
/// key is bounded by `rendezvous --timeout` (a plugin's own wait may be minutes), and one
/// that runs out says so.
struct BoundedStore {
    store: Arc<TcpStore>,
    limit: Duration,
}

impl KvStore for BoundedStore {
    fn set(&self, key: &str, value: &[u8]) -> rpjrt::Result<()> {
        self.store.set(key, value)
    }

    fn get(&self, key: &str, timeout: Duration) -> rpjrt::Result<Vec<u8>> {
        if timeout <= self.limit {
            return self.store.get(key, timeout);
        }
        self.store.get(key, self.limit).map_err(|e| match e.code() {
            rpjrt::Code::DeadlineExceeded => rpjrt::Error::Store {
                code: rpjrt::Code::DeadlineExceeded,
                message: format!(
                    "key {} was not set within {} (--timeout bounds each wait of the \
                     plugin's in the store; it asked for {}): is every process of the job \
                     running `rpjrt rendezvous` with the same --plugin?",
                    rpjrt_distributed::shown(key),
                    rpjrt_distributed::duration_text(self.limit),
                    rpjrt_distributed::duration_text(timeout)
                ),
            },
            _ => e,
        })
    }

    fn try_get(&self, key: &str) -> rpjrt::Result<Option<Vec<u8>>> {
        self.store.try_get(key)
    }
}

/// What a multi-process client showed: the line printed, and what tells whether the
/// plugin formed a multi-process client at all.
struct View {
    text: String,
    process_index: i32,
    devices: usize,
    others: usize,
}

impl View {
    /// For a job of several processes whose client lists no device of another process:
    /// what to say (the plugin formed no multi-process client).
    fn single_process_warning(&self, p: usize, n: usize) -> Option<String> {
        if n < 2 || self.others > 0 {
            return None;
        }
        let index = match usize::try_from(self.process_index) == Ok(p) {
            true => String::new(),
            false => format!(", and its process index is {}, not {p}", self.process_index),
        };
        Some(format!(
            "the plugin formed no multi-process client: its {} devices are all this \
             process's own, and none is another process's of the job's {n}{index}; the \
             plugin may not support multi-process clients (XLA's CPU plugin, for one, makes \
             a client of its own devices in each process), or it did not use the store",
            self.devices,
        ))
    }
}

/// Creates the multi-process client and describes the device list it sees. Every plugin
/// call of it goes the way of every verb's client creation (`common::Quiet`): the plugin's
/// log is captured (shown when it fails, or with --plugin-log), a call still running after
/// 5 s is noted, and `--plugin-timeout` ends the command when one runs past it. The client
/// is returned to be kept until the rendezvous ends, and is then left undestroyed (as
/// every verb leaves its objects at its end, `common::work_done`): a plugin hanging in
/// `PJRT_Client_Destroy` cannot hold the command, failed or not.
fn client_view(
    plugin: &Plugin,
    options: &ClientOptions,
    store: &Arc<TcpStore>,
    p: usize,
    n: usize,
    timeout: Duration,
) -> Result<(View, Client), ClientError> {
    let bounded: Arc<dyn KvStore> = Arc::new(BoundedStore {
        store: Arc::clone(store),
        limit: timeout,
    });
    let dist = DistributedOptions::new(bounded, p, n)?;
    common::work_done();
    let quiet = common::Quiet::start(&format!(
        "process {p} of {n}: creating the multi-process client"
    ));
    let made = (|| {
        let client = Client::new_distributed(plugin, options, &dist).map_err(|e| ClientError {
            refused: common::refuses_options(&e, options),
            error: e,
            log: String::new(),
        })?;
        let devices = client.devices()?;
        let owners: Vec<String> = devices
            .iter()
            .map(|d| {
                let mark = if d.is_addressable() { "*" } else { "" };
                format!("{}@{}{mark}", d.id(), d.process_index())
            })
            .collect();
        let process_index = client.process_index()?;
        let addressable = client.addressable_devices()?.len();
        let others = devices
            .iter()
            .filter(|d| !d.is_addressable() || d.process_index() != process_index)
            .count();
        let view = View {
            text: format!(
                "client process index {process_index}, {} devices, {addressable} \
                 addressable [id@process, * = addressable: {}]",
                devices.len(),
                owners.join(" ")
            ),
            process_index,
            devices: devices.len(),
            others,
        };
        Ok((view, client))
    })();
    let log = quiet.finish();
    made.map_err(|e| ClientError { log, ..e })
}

fn meet(
    store: &TcpStore,
    p: usize,
    n: usize,
    timeout: Duration,
    hold: Option<f64>,
) -> rpjrt::Result<usize> {
    store.set(&format!("rpjrt:rendezvous:{p}"), p.to_string().as_bytes())?;
    if let Some(h) = hold {
        std::thread::sleep(rpjrt::duration_from_secs(h.max(0.0), "--hold")?);
    }
    store.barrier("rendezvous", p, n, timeout)?;
    let mut seen = 0;
    for q in 0..n {
        let v = store.get(&format!("rpjrt:rendezvous:{q}"), timeout)?;
        if v != q.to_string().as_bytes() {
            return Err(rpjrt::Error::InvalidArgument(format!(
                "process {q}'s key holds a wrong value"
            )));
        }
        seen += 1;
    }
    Ok(seen)
}
