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
    // A coordinator address that does not parse is the user's input: a usage error.
    let store = Arc::new(TcpStore::from_env(&env, timeout).map_err(|e| match e {
        rpjrt::Error::InvalidArgument(m) => CliError::usage(format!("process {p} of {n}: {m}")),
        other => fail(other),
    })?);
    // Whether this process's own step (its client) failed, as opposed to the meeting
    // (a process that did not come, which the others are told of by name).
    let mut own_failure = false;
    let result = meet(&store, p, n, timeout, args.hold)
        .map_err(ClientError::Other)
        .and_then(|seen| {
            let view = match &plugin {
                Some(pl) => {
                    // While the plugin waits in the store for the others, a process whose
                    // own step failed (it publishes why, below) ends this one at once.
                    let watch = FailureWatch::start(&store, p, n, timeout);
                    let view = client_view(pl, &options, &store, p, n);
                    watch.stop();
                    own_failure = view.is_err();
                    Some(view?)
                }
                None => None,
            };
            store
                .barrier("rendezvous-done", p, n, timeout)
                .map_err(ClientError::Other)?;
            Ok((seen, view))
        });
    // Client options the plugin or rpjrt refused are the user's input (exit 2).
    let result = result.map_err(|e| match e {
        ClientError::Options(e) => CliError::usage(format!(
            "process {p} of {n}: {e}{}",
            common::option_refusal_note(&e, &options)
        )),
        ClientError::Other(e) => fail(e),
    });
    // This process's own step failed: the others, waiting in the store for its keys,
    // hear why at once (`FailureWatch`) rather than when their waits run out.
    if let (true, Err(e)) = (own_failure, &result) {
        let _ = store.set(FAILED_KEY, e.message.as_bytes());
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
    }
    drop(store);
    let (seen, view) = result?;
    crate::outln!(
        "process {p} of {n}: rendezvous ok, {seen} processes (launcher: {}, store: {})",
        crate::common::printable(&env.source.to_string()),
        crate::common::printable(&address.to_string()),
    );
    if let Some(v) = view {
        crate::outln!(
            "process {p} of {n}: {}",
            crate::common::printable(&v.to_string())
        );
    }
    Ok(EXIT_OK)
}

/// The key a process whose own step failed sets to its error: the others' [`FailureWatch`]
/// reads it.
const FAILED_KEY: &str = "rpjrt:rendezvous:failed";

/// How often a [`FailureWatch`] looks for [`FAILED_KEY`].
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// How long a host whose own step failed (or who heard of another's failure) serves the
/// others, who leave as soon as they have read the failure.
const FAILED_GRACE: Duration = Duration::from_secs(5);

/// A thread that looks for another process's failure ([`FAILED_KEY`]) while this one waits
/// in its client creation (the plugin waiting in the store for that process's key): it
/// ends this process with that process's error, at once. The plugin's wait cannot be
/// cut short any other way.
struct FailureWatch {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FailureWatch {
    fn start(store: &Arc<TcpStore>, p: usize, n: usize, timeout: Duration) -> FailureWatch {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (store, flag) = (Arc::clone(store), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("rpjrt-rendezvous-watch".into())
            .spawn(move || {
                while !flag.load(std::sync::atomic::Ordering::Acquire) {
                    if let Ok(Some(why)) = store.try_get(FAILED_KEY) {
                        if flag.load(std::sync::atomic::Ordering::Acquire) {
                            return;
                        }
                        let message = format!(
                            "process {p} of {n}: another process failed, so this job cannot \
                             go on: {}",
                            String::from_utf8_lossy(&why)
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
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Why a rendezvous failed: client options rpjrt or the plugin refused (the user's input,
/// [`common::refuses_options`]), or anything else.
enum ClientError {
    Options(rpjrt::Error),
    Other(rpjrt::Error),
}

impl From<rpjrt::Error> for ClientError {
    fn from(e: rpjrt::Error) -> ClientError {
        ClientError::Other(e)
    }
}

/// Creates the multi-process client and describes the device list it sees.
fn client_view(
    plugin: &Plugin,
    options: &ClientOptions,
    store: &Arc<TcpStore>,
    p: usize,
    n: usize,
) -> Result<String, ClientError> {
    let dist = DistributedOptions::new(store.clone(), p, n)?;
    let client = Client::new_distributed(plugin, options, &dist).map_err(|e| {
        if common::refuses_options(&e, options) {
            ClientError::Options(e)
        } else {
            ClientError::Other(e)
        }
    })?;
    let devices = client.devices()?;
    let owners: Vec<String> = devices
        .iter()
        .map(|d| {
            let mark = if d.is_addressable() { "*" } else { "" };
            format!("{}@{}{mark}", d.id(), d.process_index())
        })
        .collect();
    Ok(format!(
        "client process index {}, {} devices, {} addressable [id@process, * = addressable: {}]",
        client.process_index()?,
        devices.len(),
        client.addressable_devices()?.len(),
        owners.join(" ")
    ))
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
