//! Compiled executables and execution.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

use crate::client::buffer::{Buffer, BufferMeta};
use crate::client::event::Event;
use crate::client::{Client, ClientCore, Device};
use crate::dtype::ElementType;
use crate::error::{Error, Result};
use crate::hlo::Signature;
use crate::program::{ArraySpec, Program};
use crate::raw;
use crate::raw::device::DeviceRef;
use crate::raw::execute::{ExecuteRequest, ExecuteSink};

mod prepared;
pub use prepared::{CallOutputs, PreparedCall};

/// Per-call options of [`Executable::execute_with`].
#[derive(Clone, Debug, Default)]
pub struct ExecuteOptions {
    /// Argument positions whose buffers the execution may consume (reuse for outputs).
    /// All other inputs stay usable. Donated buffers are marked deleted afterwards.
    pub donate: Vec<usize>,
    /// Run a single-device (portable) executable on this device instead of its own.
    pub device: Option<Device>,
    /// Return per-device completion events.
    pub completion_events: bool,
    /// Per-execute data for custom-call handlers ([`crate::ffi::ExecuteContext`]). When
    /// set, the call waits until the execution has finished (its completion events and its
    /// outputs), so the context may be dropped as soon as it returns, and a failing
    /// handler's error is this call's error, also for a program with no outputs.
    pub ffi_context: Option<Arc<crate::ffi::ExecuteContext>>,
}

/// The options of a plain [`Executable::execute`] (the defaults, made once).
static NO_OPTIONS: ExecuteOptions = ExecuteOptions {
    donate: Vec::new(),
    device: None,
    completion_events: false,
    ffi_context: None,
};

/// What [`Executable::execute_with`] returns.
#[derive(Debug)]
pub struct Execution {
    /// Outputs, one list per device.
    pub outputs: Vec<Vec<Buffer>>,
    /// One completion event per device, when asked for.
    pub events: Vec<Event>,
}

/// An executable's parameter types, as far as the plugin's compiled program tells them.
struct Params {
    parameters: Option<Vec<ArraySpec>>,
    /// Why `parameters` is `None`: the executable cannot be called with array arguments
    /// (`refuse`), or its signature could not be read (then the checks are conservative).
    unknown: Option<UnknownParameters>,
    /// The parameters an output may alias (`tf.aliasing_output`); `None` when not read.
    aliased: Option<Vec<usize>>,
}

impl Params {
    /// Reads them from the compiled program the plugin hands back (`optimized`).
    fn of(optimized: Result<(Vec<u8>, String)>, tupled: bool) -> Params {
        // A tupled program's aliases name tuple elements, which are not read: unknown.
        let aliased = (optimized.as_ref().ok().filter(|_| !tupled))
            .and_then(|(code, format)| crate::hlo::entry_aliases(code, format))
            .map(|a| a.into_iter().map(|(_, p)| p).collect());
        let (parameters, unknown) = match optimized {
            Err(e) => (
                None,
                Some(UnknownParameters {
                    refuse: false,
                    why: format!("the plugin did not hand back the compiled program ({e})"),
                }),
            ),
            Ok((code, format)) => match crate::hlo::entry_signature(&code, &format, tupled) {
                Some(Signature::Arrays(ps)) => (
                    Some(
                        ps.into_iter()
                            .map(|(element_type, dims)| ArraySpec { element_type, dims })
                            .collect(),
                    ),
                    None,
                ),
                Some(Signature::Unsupported(why)) => {
                    (None, Some(UnknownParameters { refuse: true, why }))
                }
                None => (
                    None,
                    Some(UnknownParameters {
                        refuse: false,
                        why: format!(
                            "rpjrt cannot read the parameter list of the compiled program the \
                             plugin handed back (format {format:?})"
                        ),
                    }),
                ),
            },
        };
        Params {
            parameters,
            unknown,
            aliased,
        }
    }
}

/// Why an executable's parameter types are not known.
struct UnknownParameters {
    /// Executing is refused (the plugin would abort on any argument list).
    refuse: bool,
    /// What happened, for messages.
    why: String,
}

/// The execute context of the options (custom-call user data), or the default one custom
/// calls need: none while no handler is registered in the process, and none for a program
/// known to hold no custom call (the CPU plugin's Execute costs 6-9 % more with a context).
fn ffi_context<'a>(
    options: &'a ExecuteOptions,
    state: &ExeState,
) -> Option<&'a crate::raw::execute::ExecuteContext> {
    match &options.ffi_context {
        Some(c) => Some(c.raw_context()),
        None if state.custom_calls.load(Ordering::Relaxed) == CALLS_NONE => None,
        None => crate::ffi::default_context(state.core.api),
    }
}

/// Waits until an execution has finished (its execute context must outlive it): every
/// completion event in `events`, then every output. The error of the first output whose
/// producer failed (it names the output and, for memory, the device's figures), else the
/// first failed event's (a program with no outputs fails only there).
pub(crate) fn wait_execution<'a>(
    events: &[Event],
    outputs: impl Iterator<Item = &'a Buffer>,
) -> Result<()> {
    let refs: Vec<&Event> = events.iter().collect();
    let done = if refs.is_empty() {
        Ok(())
    } else {
        Event::wait_all(&refs)
    };
    wait_all(outputs)?;
    done
}

/// Waits until every output is ready; the error of the first output whose producer failed. Outputs on several devices share one
/// wait (`raw::event::AllReady`: the caller wakes once, not once per output).
fn wait_all<'a>(outputs: impl Iterator<Item = &'a Buffer>) -> Result<()> {
    let pending: Vec<&Buffer> = outputs.filter(|b| !b.is_known_ready()).collect();
    let events = match pending.as_slice() {
        [] => return Ok(()),
        [_] => None,
        [first, ..] => {
            first.core().check("buffer")?;
            pending
                .iter()
                .map(|b| b.raw.ready_event())
                .collect::<Result<Vec<_>>>()
                .ok()
        }
    };
    if let Some(events) = events {
        let failed = raw::event::AllReady::register(&events).wait(&events);
        for (i, b) in pending.iter().enumerate() {
            if failed.binary_search_by_key(&i, |(k, _)| *k).is_err() {
                b.raw.mark_ready();
            }
        }
    }
    // Each failed output's own wait gives its error, with its device's memory figures.
    let mut first = None;
    for o in pending {
        if let Err(e) = o.block_until_ready() {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

struct ExeState {
    core: Arc<ClientCore>,
    loaded: raw::executable::Loaded,
    name: String,
    num_replicas: usize,
    num_partitions: usize,
    outputs: Vec<ArraySpec>,
    /// The parameter types, read from the plugin's compiled program: at compile time, or
    /// at first need for a loaded executable (an artifact's bytes do not vouch for them).
    signature: std::sync::OnceLock<Params>,
    /// Whether it takes its arguments as one tuple (read from its compile options).
    tupled: bool,
    devices: Vec<DeviceRef>,
    deleted: AtomicBool,
    /// The encoded compile options it was built with, where rpjrt knows them.
    options: std::sync::OnceLock<Vec<u8>>,
    /// For a loaded (not compiled) executable: the serialized form it was loaded from.
    origin: std::sync::OnceLock<Origin>,
    source_signature: std::sync::OnceLock<Option<String>>,
    /// Spare output handle allocations: a loop of executions whose outputs are dropped
    /// reuses them instead of allocating.
    spare: raw::buffer::Recycler<BufferMeta>,
    /// Whether the program holds custom calls (and so needs the default execute context):
    /// `CALLS_NONE` only when the compiled program and the source (where either was read)
    /// name none. Running a custom call without that context would crash the plugin (XLA
    /// dereferences the absent context when a handler asks for its user data), so anything
    /// not read counts as holding some.
    custom_calls: AtomicU8,
}

/// [`ExeState::custom_calls`]: nothing was read, or what was read names no custom call, or
/// it names one.
const CALLS_UNKNOWN: u8 = 0;
const CALLS_NONE: u8 = 1;
const CALLS_SOME: u8 = 2;

/// What a loaded executable came from. Serializing it again returns those bytes: a CPU
/// plugin's own serialization of a deserialized executable leaves out the compiled code,
/// so the blob it writes loads and then fails at its first run ("Function ... not found").
pub(crate) struct Origin {
    /// Where its serialized form is.
    pub(crate) source: Source,
    /// Whether compile options given at load replaced those stored in the blob.
    pub(crate) overridden: bool,
}

/// Where a loaded executable's serialized form is.
pub(crate) enum Source {
    /// The plugin's serialized executable, as loaded (the caller's bytes).
    Blob(Vec<u8>),
    /// A compile-cache entry, read again when it is needed: an executable the cache
    /// loaded does not keep a second copy of its program in memory.
    CacheEntry {
        /// The entry's file.
        path: std::path::PathBuf,
        /// The key it was filed under (and recorded) when loaded.
        key: String,
    },
}

/// How many spare output handles an executable keeps: two calls' worth, within bounds.
fn spare_outputs(num_outputs: usize, num_devices: usize) -> usize {
    num_outputs
        .saturating_mul(num_devices.max(1))
        .saturating_mul(2)
        .clamp(8, 256)
}

/// A compiled, loaded program. Cheap to clone; safe to execute from many threads.
#[derive(Clone)]
pub struct Executable {
    state: Arc<ExeState>,
}

impl Executable {
    pub(crate) fn compile(
        core: &Arc<ClientCore>,
        program: &Program,
        options: &[u8],
    ) -> Result<Executable> {
        let (code, format) = program.parts();
        if code.is_empty() {
            return Err(Error::invalid("the program is empty"));
        }
        let _span =
            crate::trace::span(crate::trace::Category::Compile, "compile").bytes(code.len());
        // The raw handle owns the executable from here: any failure below destroys it.
        let loaded = core.raw.compile(code, format, options).map_err(|e| {
            core.with_memory_context(e, &core.addressable_refs(), || {
                Some(("compiling the program".to_string(), None))
            })
        })?;
        let exe = Executable::from_loaded_with(core, loaded, options, false)?;
        exe.set_recorded_options(options.to_vec());
        exe.note_source(program);
        Ok(exe)
    }

    /// Reads `program`, the source this executable was built from, for custom calls: an
    /// executable whose source and compiled program (where read) name none runs without
    /// the default execute context.
    pub(crate) fn note_source(&self, program: &Program) {
        let calls = &self.state.custom_calls;
        if crate::program::may_hold_custom_calls(program.code()) {
            calls.store(CALLS_SOME, Ordering::Relaxed);
        } else if calls.load(Ordering::Relaxed) == CALLS_UNKNOWN {
            calls.store(CALLS_NONE, Ordering::Relaxed);
        }
        let sig = &self.state.source_signature;
        let _ = sig.set(crate::mlir::entry_signature(program.code()));
    }

    /// The entry signature (global shapes, shardings) of the MLIR text it was compiled from.
    pub fn source_signature(&self) -> Option<&str> {
        self.state.source_signature.get()?.as_deref()
    }

    /// Records the encoded compile options this executable was built with.
    pub(crate) fn set_recorded_options(&self, options: Vec<u8>) {
        let _ = self.state.options.set(options);
    }

    /// Records the serialized form a loaded executable came from.
    pub(crate) fn set_origin(&self, origin: Origin) {
        let _ = self.state.origin.set(origin);
    }

    /// The serialized form it was loaded from, for a loaded executable.
    pub(crate) fn origin(&self) -> Option<&Origin> {
        self.state.origin.get()
    }

    /// The encoded compile options recorded at compile or load time.
    pub(crate) fn recorded_options(&self) -> Option<&[u8]> {
        self.state.options.get().map(|v| v.as_slice())
    }

    /// The client core and the raw loaded executable, after the usual liveness checks (for
    /// the compile-once modules: aot, introspect).
    pub(crate) fn raw_parts(&self) -> Result<(&Arc<ClientCore>, &raw::executable::Loaded)> {
        self.check()?;
        Ok((&self.state.core, &self.state.loaded))
    }

    /// Wraps a freshly compiled or loaded executable built with the encoded compile
    /// `options` (empty when unknown). With `lazy` (a loaded executable) the parameter
    /// types are read from the plugin at first need instead of now: reading the compiled
    /// program back costs a large module tens of milliseconds, which a load that is never
    /// executed (or inspected) need not pay. They are never taken from an artifact's header,
    /// whose fields anyone can rewrite along with the checksum: a header that said `s32[8]`
    /// for an `f32[8]` parameter would let integers run as floats.
    pub(crate) fn from_loaded_with(
        core: &Arc<ClientCore>,
        loaded: raw::executable::Loaded,
        options: &[u8],
        lazy: bool,
    ) -> Result<Executable> {
        let facts = loaded.executable().facts()?;
        if facts.output_types.len() != facts.num_outputs
            || facts.output_dims.len() != facts.num_outputs
            || facts.num_outputs != loaded.num_outputs()
        {
            return Err(Error::invalid(format!(
                "the plugin reported {} outputs but {} output types",
                facts.num_outputs,
                facts.output_types.len()
            )));
        }
        let mut outputs = Vec::with_capacity(facts.num_outputs);
        for (t, d) in facts.output_types.iter().zip(facts.output_dims) {
            outputs.push(ArraySpec {
                element_type: ElementType::from_code(*t)?,
                dims: d,
            });
        }
        let tupled = crate::options::tupled_arguments(options);
        // Read only when needed: for the parameters, or to check the layouts of custom
        // calls that rpjrt's own handlers serve.
        let served = crate::ffi::rust_served(core.api, &core.platform_name);
        let optimized =
            (!lazy || !served.is_empty()).then(|| loaded.executable().optimized_program());
        let mut custom_calls = CALLS_UNKNOWN;
        if let Some(Ok((code, format))) = &optimized {
            crate::ffi::check_layouts(&served, code, format)?;
            custom_calls = if crate::program::may_hold_custom_calls(code) {
                CALLS_SOME
            } else {
                CALLS_NONE
            };
        }
        let signature = std::sync::OnceLock::new();
        if let Some(optimized) = optimized {
            let _ = signature.set(Params::of(optimized, tupled));
        }
        let devices = loaded.devices()?;
        let spare = raw::buffer::Recycler::new(spare_outputs(outputs.len(), devices.len()));
        Ok(Executable {
            state: Arc::new(ExeState {
                core: Arc::clone(core),
                loaded,
                name: facts.name,
                num_replicas: facts.num_replicas,
                num_partitions: facts.num_partitions,
                outputs,
                signature,
                tupled,
                devices,
                deleted: AtomicBool::new(false),
                options: std::sync::OnceLock::new(),
                origin: std::sync::OnceLock::new(),
                source_signature: std::sync::OnceLock::new(),
                spare,
                custom_calls: AtomicU8::new(custom_calls),
            }),
        })
    }

    fn check(&self) -> Result<()> {
        self.state.core.check("executable")?;
        if self.state.deleted.load(Ordering::Acquire) {
            return Err(Error::Deleted("executable was deleted".into()));
        }
        Ok(())
    }

    /// The module name.
    pub fn name(&self) -> &str {
        &self.state.name
    }
    /// Number of replicas it was compiled for.
    pub fn num_replicas(&self) -> usize {
        self.state.num_replicas
    }
    /// Number of partitions it was compiled for.
    pub fn num_partitions(&self) -> usize {
        self.state.num_partitions
    }
    /// Number of outputs per device.
    pub fn num_outputs(&self) -> usize {
        self.state.outputs.len()
    }
    /// Type and shape of each output.
    pub fn outputs(&self) -> &[ArraySpec] {
        &self.state.outputs
    }
    /// Output element types.
    pub fn output_element_types(&self) -> Vec<ElementType> {
        self.state.outputs.iter().map(|o| o.element_type).collect()
    }
    /// Output dimensions.
    pub fn output_dimensions(&self) -> Vec<Vec<i64>> {
        self.state.outputs.iter().map(|o| o.dims.clone()).collect()
    }
    /// Type and shape of each parameter, when the plugin exposes the compiled module.
    pub fn parameters(&self) -> Option<&[ArraySpec]> {
        self.params().parameters.as_deref()
    }
    /// The parameter types, read from the plugin on first need.
    fn params(&self) -> &Params {
        let st = &*self.state;
        st.signature
            .get_or_init(|| Params::of(st.loaded.executable().optimized_program(), st.tupled))
    }
    /// Why [`Executable::parameters`] is `None`, in words: the signature could not be
    /// read (arguments are then checked conservatively: same count, element types and
    /// shapes on every device), or it has parameters PJRT cannot pass, e.g. a tuple
    /// (executing is then refused).
    pub fn parameters_unknown_reason(&self) -> Option<&str> {
        self.params().unknown.as_ref().map(|u| u.why.as_str())
    }
    /// The devices the executable runs on, in argument-list order.
    pub fn addressable_devices(&self) -> Result<Vec<Device>> {
        self.check()?;
        Ok(self.state.core.devices_of(&self.state.devices))
    }
    /// Where a call without a chosen device runs (and where host arguments go): the first
    /// of [`Executable::addressable_devices`], or the client's default device for a portable
    /// executable, which has none of its own.
    pub fn default_device(&self) -> Result<Device> {
        match self.addressable_devices()?.into_iter().next() {
            Some(d) => Ok(d),
            None => Client {
                core: Arc::clone(&self.state.core),
            }
            .default_device(),
        }
    }

    /// The plugin's fingerprint of the executable (`PJRT_Executable_Fingerprint`). XLA's
    /// plugins give their fingerprint of the program module, which need not change with
    /// compile options: it does not identify the compiled code. A plugin without one
    /// answers `Err` with code `Unimplemented` (or an empty string); a closed client or a
    /// deleted executable is the usual error.
    pub fn fingerprint(&self) -> Result<String> {
        self.check()?;
        self.state.loaded.executable().fingerprint()
    }
    /// Whether [`Executable::delete`] was called (on this or any clone).
    pub fn is_deleted(&self) -> bool {
        self.state.deleted.load(Ordering::Acquire)
    }

    /// Frees the executable's device resources now (for every clone); deleting again does
    /// nothing, as for [`Buffer::delete`]. Later executions are refused with a clear error.
    pub fn delete(&self) -> Result<()> {
        self.state.core.check("executable")?;
        if self.state.deleted.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.state.loaded.delete()
    }

    /// Runs on the executable's single device. Returns without waiting for completion;
    /// outputs become ready when the computation finishes.
    ///
    /// Allocates one `Vec` per call (the result); [`Executable::execute_into`] reuses the
    /// caller's.
    pub fn execute(&self, args: &[&Buffer]) -> Result<Vec<Buffer>> {
        let mut outputs = Vec::with_capacity(self.state.outputs.len());
        self.execute_into(args, &mut outputs)?;
        Ok(outputs)
    }

    /// [`Executable::execute`] into `outputs`: clears it (dropping what it held, which
    /// frees those buffers unless they are shared) and pushes the new outputs.
    ///
    /// A loop that reuses one `outputs` makes no heap allocation per call once warm: the
    /// argument and output lists live on the stack and each output's handle reuses the
    /// allocation of an earlier output of this executable that was dropped (the executable
    /// keeps a few spare). On failure `outputs` is left empty.
    pub fn execute_into(&self, args: &[&Buffer], outputs: &mut Vec<Buffer>) -> Result<()> {
        outputs.clear();
        let options = &NO_OPTIONS;
        self.validate(&[args], options)?;
        let mut sink = OneDevice::new(&self.state, outputs);
        self.launch(&[args], options, false, &mut sink)
    }

    /// Runs a single-device executable on `device` (compile with `portable: true`).
    pub fn execute_on(&self, device: &Device, args: &[&Buffer]) -> Result<Vec<Buffer>> {
        let options = ExecuteOptions {
            device: Some(device.clone()),
            ..Default::default()
        };
        self.validate(&[args], &options)?;
        let mut outputs = Vec::with_capacity(self.state.outputs.len());
        let mut sink = OneDevice::new(&self.state, &mut outputs);
        self.launch(&[args], &options, false, &mut sink)?;
        Ok(outputs)
    }

    /// Runs on every addressable device: one argument list per device, in the order of
    /// [`Executable::addressable_devices`]. Returns one output list per device.
    pub fn execute_sharded(&self, args: &[Vec<&Buffer>]) -> Result<Vec<Vec<Buffer>>> {
        let lists: Vec<&[&Buffer]> = args.iter().map(|l| l.as_slice()).collect();
        Ok(self.run(&lists, &ExecuteOptions::default(), false)?.outputs)
    }

    /// Runs with explicit options: donation, a chosen device, completion events.
    pub fn execute_with(
        &self,
        args: &[Vec<&Buffer>],
        options: &ExecuteOptions,
    ) -> Result<Execution> {
        let lists: Vec<&[&Buffer]> = args.iter().map(|l| l.as_slice()).collect();
        self.run(&lists, options, options.completion_events)
    }

    fn run(
        &self,
        lists: &[&[&Buffer]],
        options: &ExecuteOptions,
        events: bool,
    ) -> Result<Execution> {
        self.validate(lists, options)?;
        // With an execute context the call waits for the execution itself (its completion
        // events), not only for its outputs: a program with no outputs, or whose outputs
        // are ready before a later custom call runs, would otherwise free the context
        // (and the handlers' user data) under that custom call.
        let with_context = options.ffi_context.is_some();
        let want_events = events || with_context;
        if let [list] = lists {
            let mut outputs = Vec::with_capacity(self.state.outputs.len());
            let mut sink = OneDevice::new(&self.state, &mut outputs);
            self.launch(&[list], options, want_events, &mut sink)?;
            let mut event = sink.event.take();
            // A portable executable's device is the one chosen for this call.
            if let (Some(ev), Some(d)) = (event.as_mut(), options.device.as_ref()) {
                ev.set_devices(vec![d.data.raw]);
            }
            if with_context {
                wait_execution(event.as_slice(), outputs.iter())?;
            }
            return Ok(Execution {
                outputs: vec![outputs],
                events: event.into_iter().filter(|_| events).collect(),
            });
        }
        let mut sink = ManyDevices {
            state: &self.state,
            outputs: (0..lists.len()).map(|_| Vec::new()).collect(),
            events: Vec::new(),
        };
        self.launch(lists, options, want_events, &mut sink)?;
        if with_context {
            wait_execution(&sink.events, sink.outputs.iter().flatten())?;
        }
        if !events {
            sink.events.clear();
        }
        Ok(Execution {
            outputs: sink.outputs,
            events: sink.events,
        })
    }

    /// The one call into the raw marshaller, after `validate`.
    fn launch(
        &self,
        lists: &[&[&Buffer]],
        options: &ExecuteOptions,
        want_events: bool,
        sink: &mut impl ExecuteSink<BufferMeta>,
    ) -> Result<()> {
        let copies = self.concrete_args(lists, &options.donate)?;
        let (refs, fixed): (Vec<Vec<&Buffer>>, Vec<&[&Buffer]>);
        let lists = if copies.is_empty() {
            lists
        } else {
            refs = copies.iter().map(|l| l.iter().collect()).collect();
            fixed = refs.iter().map(Vec::as_slice).collect();
            &fixed
        };
        let req = ExecuteRequest {
            lists,
            raw: raw_of,
            donate: &options.donate,
            device: options.device.as_ref().map(|d| d.data.raw),
            want_events,
            context: ffi_context(options, &self.state),
            send_recv: None,
            recycle: Some(&self.state.spare),
        };
        let _span = crate::trace::span(crate::trace::Category::Execute, "execute")
            .program(&self.state.name)
            .int("devices", lists.len() as i64);
        self.state.loaded.execute(&req, sink).map_err(|e| {
            let ran = plugin_ran(&e);
            let st = &*self.state;
            let on = options.device.as_ref().map(|d| d.data.raw);
            let devices = on.map_or_else(|| st.devices.clone(), |d| vec![d]);
            let e = st.core.with_memory_context(e, &devices, || {
                let outs: Vec<String> = st.outputs.iter().map(|o| o.to_string()).collect();
                let bytes = st.outputs.iter().try_fold(0u64, |sum, o| {
                    let n = crate::dtype::element_count(&o.dims).ok()?;
                    let b = o.element_type.dense_byte_size(n).ok()?;
                    sum.checked_add(b as u64)
                });
                let what = format!("executing {} (outputs {})", st.name, outs.join(", "));
                Some((what, bytes.map(|b| b * devices.len() as u64)))
            });
            // One device's placement is left to the plugin (a query per argument would
            // cost every call); its refusal is explained here, naming the argument.
            if let ([list], Some(want)) = (lists, on.or(st.devices.first().copied())) {
                if let Err(placed) = self.check_placement_on(list, 0, want) {
                    return placed;
                }
            }
            // Another thread may delete an argument between the checks and the plugin's
            // own: the plugin then refuses it ("deleted or donated"); say what happened.
            // A donated argument the plugin consumed before it failed reads as deleted
            // now (see `Donation::failed`): that is this call's doing, said as such.
            let deleted = lists
                .iter()
                .flat_map(|l| l.iter().enumerate())
                .find(|(i, b)| b.is_deleted() && !options.donate.contains(i));
            let e = match deleted {
                Some((i, _)) if !matches!(e, Error::Deleted(_)) => Error::Deleted(format!(
                    "argument {i} was deleted while the execution was being launched ({e})"
                )),
                _ => e,
            };
            let consumed = options.donate.iter().copied().filter(|&i| {
                lists
                    .iter()
                    .any(|l| l.get(i).is_some_and(|b| b.is_deleted()))
            });
            with_consumed(e, ran, consumed)
        })
    }

    /// `lists` with an on-device copy in place of each argument whose memory may not exist
    /// (a pending or failed alias buffer: `raw::buffer::Buffer::may_lack_memory`) given, not
    /// donated, to a parameter an output may alias; empty when there is none. The CPU plugins
    /// copy such an argument at once and abort (at the call, or when the alias fails later),
    /// while their own copy of it waits for it and carries its error. A program without
    /// aliases costs one check, a buffer known ready none; the caller keeps the copies alive.
    #[inline]
    fn concrete_args(&self, lists: &[&[&Buffer]], donate: &[usize]) -> Result<Vec<Vec<Buffer>>> {
        let aliased = self.params().aliased.as_deref();
        if aliased.is_some_and(|a| a.is_empty()) {
            return Ok(Vec::new());
        }
        self.concrete_copies(lists, donate, aliased)
    }

    /// [`Executable::concrete_args`] of a program that may alias parameters.
    fn concrete_copies(
        &self,
        lists: &[&[&Buffer]],
        donate: &[usize],
        aliased: Option<&[usize]>,
    ) -> Result<Vec<Vec<Buffer>>> {
        // The buffer's flag first: a long argument list meets a long alias list only here.
        let copy = |i: usize, b: &Buffer| {
            b.raw.may_lack_memory()
                && !donate.contains(&i)
                && aliased.is_none_or(|a| a.contains(&i))
        };
        if !(lists.iter()).any(|l| l.iter().enumerate().any(|(i, b)| copy(i, b))) {
            return Ok(Vec::new());
        }
        let one = |(i, b): (usize, &&Buffer)| match copy(i, b) {
            true => b.duplicate(),
            false => Ok((*b).clone()),
        };
        (lists.iter())
            .map(|l| l.iter().enumerate().map(one).collect())
            .collect()
    }

    /// Every check of an execution request, with messages that name the argument.
    fn validate(&self, lists: &[&[&Buffer]], options: &ExecuteOptions) -> Result<()> {
        self.check()?;
        let st = &*self.state;
        let expected_lists = if options.device.is_some() {
            1
        } else {
            st.devices.len()
        };
        if expected_lists == 0 {
            return Err(Error::invalid(
                "this executable was compiled portable and has no device of its own: name \
                 the device to run it on (Rust: execute_on(device, ...); Python: \
                 exe(..., device=d))",
            ));
        }
        if lists.len() != expected_lists {
            return Err(Error::invalid(format!(
                "{} argument list(s) given, but the executable runs on {expected_lists} \
                 device(s) and takes one list per device (execute_sharded)",
                lists.len()
            )));
        }
        let params = self.params();
        if let Some(u) = params.unknown.as_ref().filter(|u| u.refuse) {
            return Err(Error::invalid(format!(
                "{} cannot be executed: {}",
                st.name, u.why
            )));
        }
        if let Some(dev) = &options.device {
            if !Arc::ptr_eq(&dev.core, &st.core) {
                return Err(Error::invalid(format!("{dev} belongs to another client")));
            }
            // One device of several would run one replica or shard alone: a wrong answer,
            // or a collective that waits for the others for ever.
            if st.devices.len() > 1 {
                return Err(Error::invalid(format!(
                    "{} runs on {} devices and takes one argument list per device \
                     (execute_sharded); a device is chosen only for a single-device or \
                     portable executable",
                    st.name,
                    st.devices.len()
                )));
            }
            // Compiled for devices of its own: another device needs a portable compile (the
            // plugins' own message calls the device "not addressable").
            if !st.devices.is_empty() && !st.devices.contains(&dev.raw_ref()) {
                let own: Vec<String> = (st.core.devices_of(&st.devices).iter())
                    .map(|d| d.to_string())
                    .collect();
                return Err(Error::invalid(format!(
                    "{} was compiled for {}, not {dev}: compile it portable \
                     (CompileOptions::portable, Python portable=True) to choose its device \
                     at each call",
                    st.name,
                    own.join(", ")
                )));
            }
        }
        let num_args = lists.first().map_or(0, |l| l.len());
        // Every list is checked before anything is launched: a collective started on some
        // devices waits for partners that a refused list would never start.
        for (d, list) in lists.iter().enumerate() {
            if list.len() != num_args {
                return Err(Error::invalid(format!(
                    "argument list {d} has {} buffers, list 0 has {num_args}",
                    list.len()
                )));
            }
            self.check_args(list, d)?;
            if params.parameters.is_none() && d > 0 {
                // No signature to check against: at least every device gets the same kinds
                // of argument.
                for (i, (b, first)) in list.iter().zip(lists[0].iter()).enumerate() {
                    if b.element_type() != first.element_type() || b.dims() != first.dims() {
                        return Err(Error::invalid(format!(
                            "argument {i} of device list {d} is {}{:?}, but in list 0 it is \
                             {}{:?}",
                            b.element_type(),
                            b.dims(),
                            first.element_type(),
                            first.dims()
                        )));
                    }
                }
            }
        }
        if lists.len() > 1 {
            self.check_placement(lists)?;
        }
        if let Some(ctx) = &options.ffi_context {
            if !ctx.is_for(st.core.api) {
                return Err(Error::invalid(
                    "the FFI execute context was made for a client of another plugin",
                ));
            }
        }
        for &i in &options.donate {
            if i >= num_args {
                return Err(Error::invalid(format!(
                    "donate index {i} is out of range for {num_args} arguments"
                )));
            }
            // The plugin reads such memory until the execution ends, while the caller,
            // told the buffer is consumed, would feel free to change it. (rpjrt's own
            // staging memory, a large put's, nobody else can change: it is consumed.)
            if lists.iter().any(|l| l[i].shares_callers_memory()) {
                return Err(Error::invalid(format!(
                    "argument {i} cannot be donated: the plugin reads it in place from host \
                     memory the caller shares (a zero-copy put or a DLPack import); donate a \
                     copy (buf.copy()) instead"
                )));
            }
        }
        Ok(())
    }

    /// What the benchmark floor needs, after the checks `execute` makes on `args`.
    #[cfg(feature = "bench")]
    pub(crate) fn floor_parts(&self, lists: &[&[&Buffer]]) -> Result<&raw::executable::Loaded> {
        // The same checks as `execute_sharded` (one list per device of the executable).
        self.validate(lists, &ExecuteOptions::default())?;
        Ok(&self.state.loaded)
    }

    /// Checks that argument list `d` of an execution lies on device `d`.
    pub(super) fn check_placement(&self, lists: &[&[&Buffer]]) -> Result<()> {
        for (d, (list, &want)) in lists.iter().zip(&self.state.devices).enumerate() {
            self.check_placement_on(list, d, want)?;
        }
        Ok(())
    }

    /// Every argument of device list `d` is on `want`.
    fn check_placement_on(&self, list: &[&Buffer], d: usize, want: DeviceRef) -> Result<()> {
        let st = &*self.state;
        let name = |r: DeviceRef| {
            st.core.device_data(r).map_or_else(
                || "an unknown device".to_string(),
                |x| format!("device {}", x.facts.id),
            )
        };
        for (i, b) in list.iter().enumerate() {
            let on = b.raw_device()?;
            if on != want {
                let (which, runs) = if st.devices.len() > 1 {
                    (format!(" of device list {d}"), format!("list {d}"))
                } else {
                    (String::new(), st.name.clone())
                };
                return Err(Error::invalid(format!(
                    "argument {i}{which} is on {}, but {runs} runs on {}; copy it there \
                     first (nothing was launched)",
                    name(on),
                    name(want)
                )));
            }
        }
        Ok(())
    }

    fn check_args(&self, list: &[&Buffer], device_index: usize) -> Result<()> {
        let st = &*self.state;
        let parameters = self.parameters();
        if let Some(params) = parameters {
            if list.len() != params.len() {
                return Err(Error::invalid(format!(
                    "{} takes {} argument(s), but {} were given",
                    st.name,
                    params.len(),
                    list.len()
                )));
            }
        }
        for (i, b) in list.iter().enumerate() {
            b.check().map_err(|e| match e {
                Error::Deleted(m) => Error::Deleted(format!("argument {i}: {m}")),
                other => other,
            })?;
            if !Arc::ptr_eq(b.core(), &st.core) {
                return Err(Error::invalid(format!(
                    "argument {i} belongs to another client"
                )));
            }
            if b.raw.meta().non_default_layout {
                return Err(Error::invalid(format!(
                    "argument {i} was put with a non-default device layout (or is a copy \
                     of such a buffer, which keeps it); {} takes the default (row-major) \
                     layout and plugins disagree on such a buffer (one reads it as row-major \
                     bytes): read it to the host and put it again with the default layout",
                    st.name
                )));
            }
            if let Some(params) = parameters {
                let p = &params[i];
                if b.element_type() != p.element_type || !same_dims(b.dims(), &p.dims) {
                    return Err(Error::invalid(format!(
                        "argument {i}{} is {}{:?}, but {} expects {p}",
                        if st.devices.len() > 1 {
                            format!(" of device list {device_index}")
                        } else {
                            String::new()
                        },
                        b.element_type(),
                        b.dims(),
                        st.name
                    )));
                }
            }
        }
        Ok(())
    }
}

fn raw_of(b: &Buffer) -> &raw::buffer::Buffer<BufferMeta> {
    &b.raw
}

/// Collects the outputs (and event) of a one-device execution, wrapped once, into the
/// caller's list.
struct OneDevice<'a> {
    state: &'a ExeState,
    outputs: &'a mut Vec<Buffer>,
    event: Option<Event>,
}

impl<'a> OneDevice<'a> {
    fn new(state: &'a ExeState, outputs: &'a mut Vec<Buffer>) -> Self {
        OneDevice {
            state,
            outputs,
            event: None,
        }
    }
}

/// Whether two shapes are equal, compared inline: shapes are short, and slice equality
/// calls the C library's `memcmp` on the execute path.
#[inline]
pub(crate) fn same_dims(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

fn output_meta(state: &ExeState, output: usize) -> BufferMeta {
    let spec = &state.outputs[output];
    BufferMeta::new(&state.core, spec.element_type, &spec.dims)
}

/// [`output_meta`] written over the metadata of a reused output handle.
fn refill_output_meta(state: &ExeState, output: usize, meta: &mut BufferMeta) {
    let spec = &state.outputs[output];
    meta.refill(&state.core, spec.element_type, &spec.dims);
}

impl ExecuteSink<BufferMeta> for OneDevice<'_> {
    fn meta(&mut self, _device: usize, output: usize) -> BufferMeta {
        output_meta(self.state, output)
    }
    fn refill(&mut self, _device: usize, output: usize, meta: &mut BufferMeta) {
        refill_output_meta(self.state, output, meta)
    }
    fn output(&mut self, _device: usize, buffer: raw::buffer::Buffer<BufferMeta>) {
        self.outputs.push(Buffer::from_raw(buffer));
    }
    fn event(&mut self, device: usize, event: raw::event::Event) {
        self.event = Some(execution_event(self.state, device, event));
    }
}

/// Collects per-device outputs and events of a multi-device execution.
struct ManyDevices<'a> {
    state: &'a ExeState,
    outputs: Vec<Vec<Buffer>>,
    events: Vec<Event>,
}

impl ExecuteSink<BufferMeta> for ManyDevices<'_> {
    fn meta(&mut self, _device: usize, output: usize) -> BufferMeta {
        output_meta(self.state, output)
    }
    fn refill(&mut self, _device: usize, output: usize, meta: &mut BufferMeta) {
        refill_output_meta(self.state, output, meta)
    }
    fn output(&mut self, device: usize, buffer: raw::buffer::Buffer<BufferMeta>) {
        self.outputs[device].push(Buffer::from_raw(buffer));
    }
    fn event(&mut self, device: usize, event: raw::event::Event) {
        self.events.push(execution_event(self.state, device, event));
    }
}

/// The completion event of an execution on device list `device`, knowing that device (a
/// wait for it from a custom-call handler on a worker thread of that device is refused, as
/// a wait for its outputs is). A portable executable's chosen device is not known here.
fn execution_event(state: &ExeState, device: usize, event: raw::event::Event) -> Event {
    let devices = state.devices.get(device).copied().into_iter().collect();
    Event::of_buffer_on(&state.core, event, devices)
}

impl fmt::Debug for Executable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ins = match self.parameters() {
            Some(p) => p
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            None => "?".into(),
        };
        let outs = self
            .state
            .outputs
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        write!(
            f,
            "Executable({}: ({ins}) -> ({outs}), replicas={}, partitions={}{})",
            self.state.name,
            self.state.num_replicas,
            self.state.num_partitions,
            if self.is_deleted() { ", deleted" } else { "" }
        )
    }
}

impl Executable {
    /// The compiled program's input/output aliases as `(output, parameter)` pairs: when
    /// argument `parameter` is donated, output `output` may be written into its buffer
    /// (from `tf.aliasing_output` / donation in the lowered module).
    ///
    /// `Ok(None)` when the plugin does not expose the compiled module in a form rpjrt reads.
    pub fn input_output_aliases(&self) -> Result<Option<Vec<(usize, usize)>>> {
        self.check()?;
        Ok(self
            .state
            .loaded
            .executable()
            .optimized_program()
            .ok()
            .and_then(|(code, format)| crate::hlo::entry_aliases(&code, &format)))
    }
}

/// How a failed execution's error begins the sentence it gains when the plugin consumed
/// donated arguments before it failed (a Session names them as its slots): `"; "` and
/// this, after the plugin's own message. A face that raises something
/// other than the error (a handler's `KeyboardInterrupt`) finds that sentence by it.
pub const CONSUMED_NOTE: &str = "; the plugin consumed donated ";

/// `e`, a failed execution's error, saying which donated arguments (`consumed`, by
/// position) the plugin consumed before it failed: they read as deleted now.
///
/// Only when the plugin's execute itself failed (`ran`, as [`plugin_ran`] read the error
/// the plugin returned): a call that rpjrt refused before the plugin ran consumed nothing,
/// and a donated argument that reads as deleted then was taken by another thread.
pub(crate) fn with_consumed(e: Error, ran: bool, consumed: impl Iterator<Item = usize>) -> Error {
    if !ran {
        return e;
    }
    let consumed: Vec<String> = consumed.map(|i| i.to_string()).collect();
    if consumed.is_empty() {
        return e;
    }
    let (s, they) = if consumed.len() == 1 {
        ("", "it reads")
    } else {
        ("s", "they read")
    };
    let note = format!(
        "argument{s} {} before it failed: {they} as deleted now",
        consumed.join(", ")
    );
    e.map_message(|m| format!("{m}{CONSUMED_NOTE}{note}"))
}

/// Whether `e` is the plugin's own failure of an execution (so the plugin ran, and may
/// have consumed donated arguments), not a refusal of rpjrt's before the call.
pub(crate) fn plugin_ran(e: &Error) -> bool {
    e.entry() == Some("PJRT_LoadedExecutable_Execute")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A donated argument that reads as deleted after rpjrt itself refused the call was
    /// taken by another thread: the plugin never ran, so it consumed nothing (the refusal
    /// said it did). After the plugin's own failure the note stays.
    #[test]
    fn only_the_plugins_own_failure_is_said_to_have_consumed_donations() {
        let refused = Error::Deleted("argument 0 was deleted or donated".into());
        assert!(!plugin_ran(&refused));
        let e = with_consumed(refused, false, [0].into_iter()).to_string();
        assert!(!e.contains("consumed"), "{e}");
        let failed = Error::Pjrt {
            entry: "PJRT_LoadedExecutable_Execute",
            code: crate::Code::Internal,
            message: "the handler refuses".into(),
        };
        assert!(plugin_ran(&failed));
        let e = with_consumed(failed, true, [0].into_iter()).to_string();
        assert!(
            e.contains("consumed donated argument 0 before it failed"),
            "{e}"
        );
    }
}
