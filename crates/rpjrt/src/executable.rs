//! Programs, compiled executables and execution.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::buffer::Buffer;
use crate::client::{ClientCore, Device};
use crate::dtype::ElementType;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::inline::Inline;
use crate::raw::calls::{
    self, BufferPtr, DevicePtr, ExePtr, ExecuteOne, ExecuteRequest, LoadedPtr,
};

/// Argument and output counts up to this many are handled on the stack when executing.
const INLINE_ARGS: usize = 16;

/// `0, 1, 2, ...`: the non-donatable indices of a call that donates nothing, borrowed
/// instead of built per call.
static ALL_INDICES: [i64; 64] = {
    let mut a = [0i64; 64];
    let mut i = 0;
    while i < a.len() {
        a[i] = i as i64;
        i += 1;
    }
    a
};

/// A program to compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Program {
    /// StableHLO / MHLO: text, MLIR bytecode, or a versioned portable artifact.
    Mlir(Vec<u8>),
    /// A serialized `HloModuleProto`.
    Hlo(Vec<u8>),
}

impl Program {
    /// A StableHLO program (text, bytecode or portable artifact).
    pub fn mlir(code: impl Into<Vec<u8>>) -> Program {
        Program::Mlir(code.into())
    }

    /// A serialized HLO module.
    pub fn hlo(proto: impl Into<Vec<u8>>) -> Program {
        Program::Hlo(proto.into())
    }

    fn parts(&self) -> (&[u8], &'static str) {
        match self {
            Program::Mlir(c) => (c, "mlir"),
            Program::Hlo(c) => (c, "hlo"),
        }
    }
}

/// The type and shape of one array argument or result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArraySpec {
    /// Element type.
    pub element_type: ElementType,
    /// Dimensions.
    pub dims: Vec<i64>,
}

impl fmt::Display for ArraySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{:?}", self.element_type, self.dims)
    }
}

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
}

/// What [`Executable::execute_with`] returns.
#[derive(Debug)]
pub struct Execution {
    /// Outputs, one list per device.
    pub outputs: Vec<Vec<Buffer>>,
    /// One completion event per device, when asked for.
    pub events: Vec<Event>,
}

struct ExeState {
    core: Arc<ClientCore>,
    loaded: LoadedPtr,
    exe: ExePtr,
    name: String,
    num_replicas: usize,
    num_partitions: usize,
    outputs: Vec<ArraySpec>,
    parameters: Option<Vec<ArraySpec>>,
    devices: Vec<DevicePtr>,
    deleted: AtomicBool,
}

impl Drop for ExeState {
    fn drop(&mut self) {
        let _ = calls::exe_destroy(self.core.api, self.exe);
        let _ = calls::loaded_destroy(self.core.api, self.loaded);
    }
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
        let loaded = calls::client_compile(core.api, core.ptr, code, format, options)?;
        // Build the state right away so that any failure below still destroys `loaded`.
        let exe = match calls::loaded_get_executable(core.api, loaded) {
            Ok(e) => e,
            Err(e) => {
                let _ = calls::loaded_destroy(core.api, loaded);
                return Err(e);
            }
        };
        let mut st = ExeState {
            core: Arc::clone(core),
            loaded,
            exe,
            name: String::new(),
            num_replicas: 1,
            num_partitions: 1,
            outputs: Vec::new(),
            parameters: None,
            devices: Vec::new(),
            deleted: AtomicBool::new(false),
        };
        let facts = calls::exe_facts(core.api, exe)?;
        st.name = facts.name;
        st.num_replicas = facts.num_replicas;
        st.num_partitions = facts.num_partitions;
        if facts.output_types.len() == facts.num_outputs
            && facts.output_dims.len() == facts.num_outputs
        {
            for (t, d) in facts.output_types.iter().zip(facts.output_dims) {
                st.outputs.push(ArraySpec {
                    element_type: ElementType::from_code(*t)?,
                    dims: d,
                });
            }
        } else {
            return Err(Error::invalid(format!(
                "the plugin reported {} outputs but {} output types",
                facts.num_outputs,
                facts.output_types.len()
            )));
        }
        st.parameters = calls::exe_optimized_program(core.api, exe)
            .ok()
            .and_then(|(code, format)| crate::hlo::entry_parameters(&code, &format))
            .map(|ps| {
                ps.into_iter()
                    .map(|(element_type, dims)| ArraySpec { element_type, dims })
                    .collect()
            });
        st.devices = calls::loaded_devices(core.api, loaded)?;
        Ok(Executable {
            state: Arc::new(st),
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
        self.state.parameters.as_deref()
    }
    /// The devices the executable runs on, in argument-list order.
    pub fn addressable_devices(&self) -> Result<Vec<Device>> {
        self.check()?;
        let core = &self.state.core;
        Ok(self
            .state
            .devices
            .iter()
            .filter_map(|p| core.device_data(*p))
            .map(|d| Device {
                core: Arc::clone(core),
                data: Arc::clone(d),
            })
            .collect())
    }
    /// A fingerprint of the compiled code, where the plugin offers one.
    pub fn fingerprint(&self) -> Result<String> {
        self.check()?;
        calls::exe_fingerprint(self.state.core.api, self.state.exe)
    }
    /// Frees the executable's device resources now.
    pub fn delete(&self) -> Result<()> {
        self.state.core.check("executable")?;
        if self.state.deleted.swap(true, Ordering::AcqRel) {
            return Err(Error::Deleted("executable was already deleted".into()));
        }
        calls::loaded_delete(self.state.core.api, self.state.loaded)
    }

    /// Runs on the executable's single device. Returns without waiting for completion;
    /// outputs become ready when the computation finishes.
    pub fn execute(&self, args: &[&Buffer]) -> Result<Vec<Buffer>> {
        let options = ExecuteOptions::default();
        let non_donatable = self.validate(&[args], &options)?;
        Ok(self.launch_one(args, &options, &non_donatable, false)?.0)
    }

    /// Runs a single-device executable on `device` (compile with `portable: true`).
    pub fn execute_on(&self, device: &Device, args: &[&Buffer]) -> Result<Vec<Buffer>> {
        let options = ExecuteOptions {
            device: Some(device.clone()),
            ..Default::default()
        };
        let non_donatable = self.validate(&[args], &options)?;
        Ok(self.launch_one(args, &options, &non_donatable, false)?.0)
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
        let non_donatable = self.validate(lists, options)?;
        if let [list] = lists {
            let (outputs, event) = self.launch_one(list, options, &non_donatable, events)?;
            return Ok(Execution {
                outputs: vec![outputs],
                events: event.into_iter().collect(),
            });
        }
        let st = &*self.state;
        let ptrs: Vec<Vec<BufferPtr>> = lists
            .iter()
            .map(|l| l.iter().map(|b| b.ptr).collect())
            .collect();
        let req = ExecuteRequest {
            args: &ptrs,
            non_donatable: &non_donatable,
            device: options.device.as_ref().map(|d| d.data.ptr),
            num_outputs: st.outputs.len(),
            want_events: events,
        };
        let donation = Donation::reserve(lists, &options.donate)?;
        // `execute_checked` relies on the checks in `validate` (live, same client, not
        // deleted) that every argument passed.
        let (outs, evs) = donation.settle(calls::execute_checked(st.core.api, st.loaded, &req))?;
        let outputs = outs
            .into_iter()
            .map(|list| {
                list.into_iter()
                    .zip(&st.outputs)
                    .map(|(p, spec)| {
                        Buffer::from_raw(&st.core, p, spec.element_type, &spec.dims, None)
                    })
                    .collect()
            })
            .collect();
        let events = evs
            .into_iter()
            .map(|e| Event::from_raw(&st.core, e))
            .collect();
        Ok(Execution { outputs, events })
    }

    /// Every check of an execution request; returns the non-donatable argument indices
    /// (borrowed from a static table when nothing is donated).
    fn validate(
        &self,
        lists: &[&[&Buffer]],
        options: &ExecuteOptions,
    ) -> Result<Cow<'static, [i64]>> {
        self.check()?;
        let st = &*self.state;
        let expected_lists = if options.device.is_some() {
            1
        } else {
            st.devices.len()
        };
        if expected_lists == 0 {
            return Err(Error::invalid(
                "this executable was compiled portable and has no device of its own: run it \
                 with execute_on(device, ...)",
            ));
        }
        if lists.len() != expected_lists {
            return Err(Error::invalid(format!(
                "{} argument lists given, but the executable runs on {expected_lists} device(s)",
                lists.len()
            )));
        }
        let num_args = lists.first().map_or(0, |l| l.len());
        for (d, list) in lists.iter().enumerate() {
            if list.len() != num_args {
                return Err(Error::invalid(format!(
                    "argument list {d} has {} buffers, list 0 has {num_args}",
                    list.len()
                )));
            }
            self.check_args(list, d)?;
        }
        if let Some(dev) = &options.device {
            if !Arc::ptr_eq(&dev.core, &st.core) {
                return Err(Error::invalid(format!("{dev} belongs to another client")));
            }
        }
        if options.donate.is_empty() && num_args <= ALL_INDICES.len() {
            return Ok(Cow::Borrowed(&ALL_INDICES[..num_args]));
        }
        let mut non_donatable: Vec<i64> = (0..num_args as i64).collect();
        for &i in &options.donate {
            if i >= num_args {
                return Err(Error::invalid(format!(
                    "donate index {i} is out of range for {num_args} arguments"
                )));
            }
            for list in lists {
                if list[i].is_zero_copy() {
                    return Err(Error::invalid(format!(
                        "argument {i} borrows host memory (zero-copy) and cannot be donated"
                    )));
                }
            }
            non_donatable.retain(|&x| x != i as i64);
        }
        Ok(Cow::Owned(non_donatable))
    }

    /// Executes one validated argument list on one device, with the argument and output
    /// pointer lists on the stack.
    fn launch_one(
        &self,
        args: &[&Buffer],
        options: &ExecuteOptions,
        non_donatable: &[i64],
        want_event: bool,
    ) -> Result<(Vec<Buffer>, Option<Event>)> {
        let st = &*self.state;
        let ptrs = Inline::<BufferPtr, INLINE_ARGS>::from_exact_iter(
            args.len(),
            args.iter().map(|b| b.ptr),
        );
        let mut outs =
            Inline::<BufferPtr, INLINE_ARGS>::filled(st.outputs.len(), BufferPtr::default());
        let mut req = ExecuteOne {
            args: &ptrs,
            non_donatable,
            device: options.device.as_ref().map(|d| d.data.ptr),
            outputs: outs.as_mut_slice(),
            want_event,
        };
        let donation = Donation::reserve(&[args], &options.donate)?;
        // `execute_one_checked` relies on the checks in `validate` (live, same client, not
        // deleted) that every argument passed.
        let event =
            donation.settle(calls::execute_one_checked(st.core.api, st.loaded, &mut req))?;
        let mut outputs = Vec::with_capacity(outs.len());
        for (&p, spec) in outs.iter().zip(&st.outputs) {
            outputs.push(Buffer::from_raw(
                &st.core,
                p,
                spec.element_type,
                &spec.dims,
                None,
            ));
        }
        Ok((outputs, event.map(|e| Event::from_raw(&st.core, e))))
    }

    /// What the benchmark floor needs, after the checks `execute` makes on `args`.
    pub(crate) fn floor_parts(
        &self,
        args: &[&Buffer],
    ) -> Result<(&'static crate::raw::Api, LoadedPtr, usize)> {
        // The same checks as `execute` (which also require a single-device executable).
        self.validate(&[args], &ExecuteOptions::default())?;
        Ok((
            self.state.core.api,
            self.state.loaded,
            self.state.outputs.len(),
        ))
    }

    fn check_args(&self, list: &[&Buffer], device_index: usize) -> Result<()> {
        let st = &*self.state;
        if let Some(params) = &st.parameters {
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
            if !Arc::ptr_eq(&b.core, &st.core) {
                return Err(Error::invalid(format!(
                    "argument {i} belongs to another client"
                )));
            }
            if let Some(params) = &st.parameters {
                let p = &params[i];
                if b.element_type() != p.element_type || b.dims() != p.dims.as_slice() {
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

/// The buffers an execution consumes, marked deleted before the call (so that no host view
/// of them can be taken meanwhile) and restored if the call fails.
struct Donation<'a> {
    reserved: Vec<&'a Buffer>,
}

impl<'a> Donation<'a> {
    fn reserve(lists: &[&[&'a Buffer]], donate: &[usize]) -> Result<Donation<'a>> {
        let mut d = Donation {
            reserved: Vec::new(),
        };
        for &i in donate {
            for list in lists {
                let b = list[i];
                if d.reserved.iter().any(|r| std::ptr::eq(*r, b)) {
                    continue;
                }
                // On error `d` drops and restores what it reserved so far.
                b.reserve_donation()?;
                d.reserved.push(b);
            }
        }
        Ok(d)
    }

    /// Keeps the reservation if the execution ran; undoes it (on drop) if it failed.
    fn settle<T>(mut self, result: Result<T>) -> Result<T> {
        if result.is_ok() {
            self.reserved.clear();
        }
        result
    }
}

impl Drop for Donation<'_> {
    fn drop(&mut self) {
        for b in &self.reserved {
            b.cancel_donation();
        }
    }
}

impl fmt::Debug for Executable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ins = match &self.state.parameters {
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
            "Executable({}: ({ins}) -> ({outs}), replicas={}, partitions={})",
            self.state.name, self.state.num_replicas, self.state.num_partitions
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
        Ok(
            calls::exe_optimized_program(self.state.core.api, self.state.exe)
                .ok()
                .and_then(|(code, format)| crate::hlo::entry_aliases(&code, &format)),
        )
    }
}
