//! Executable: compiled programs and execution.

use crate::detach::Detach;
use std::sync::atomic::{AtomicU32, Ordering};

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use pyo3::{PyTraverseError, PyVisit};
use rpjrt::{ArraySpec, ExecuteOptions};

use crate::buffer::PyBuffer;
use crate::client::{wrap_device, PyClient, PyDevice};
use crate::convert::{dtype_obj, int_arg, sequence_items, shape_tuple, spec_string};
use crate::errors::{invalid, unsupported, PyErrExt};

/// A compiled, loaded program (`Client.compile`, `Client.load`).
///
/// `exe(*args, device=None, donate=None, ffi_user_data=None, wait=False)` runs it on one
/// device (`device`: by default the executable's first device; any device for a
/// portable program) and returns at once with not-yet-ready output Buffers.
///
/// Arguments that are not Buffers are put on the device first. `donate` lists
/// argument positions whose Buffers the program may reuse (they become deleted).
/// `ffi_user_data` is handed to custom-call handlers as `call.user_data` (the call
/// then waits until the execution has finished, and raises a handler's error).
/// `wait=True` returns once every output is ready (or raises its computation's error),
/// polling without the GIL in the same release as the execution: `exe(x, wait=True)` is
/// one release where `exe(x)[0].block_until_ready()` is two. For a program with no
/// outputs, `wait=True` waits for the execution itself.
#[pyclass(frozen, weakref, name = "Executable", module = "rpjrt")]
pub struct PyExecutable {
    inner: crate::notify::Held<rpjrt::Executable>,
    client: Py<PyClient>,
    /// Plain calls in a row whose outputs were not ready on return (see `note_ready`).
    ready_misses: AtomicU32,
}

impl Drop for PyExecutable {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            crate::notify::drop_detached(inner);
        }
    }
}

impl PyExecutable {
    /// The wrapped executable (for bench.rs).
    pub fn rexe(&self) -> &rpjrt::Executable {
        &self.inner
    }

    /// The client it belongs to (for prepared.rs).
    pub(crate) fn client_ref(&self) -> &Py<PyClient> {
        &self.client
    }

    pub fn wrap(
        py: Python<'_>,
        inner: rpjrt::Executable,
        client: Py<PyClient>,
    ) -> PyResult<Py<PyExecutable>> {
        Py::new(
            py,
            PyExecutable {
                inner: crate::notify::Held::new(inner),
                client,
                ready_misses: AtomicU32::new(0),
            },
        )
    }

    fn params(&self) -> PyResult<&[ArraySpec]> {
        self.inner.parameters().ok_or_else(|| {
            unsupported(format!(
                "the input types of {} are not known: the compiled program's signature \
                 cannot be used ({})",
                self.inner.name(),
                self.inner
                    .parameters_unknown_reason()
                    .unwrap_or("the plugin did not describe them")
            ))
        })
    }

    /// The `device=` argument of a call (`None` when not given), and the device the
    /// arguments go to: that one, or the executable's first.
    fn target_device(
        &self,
        device: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(Option<rpjrt::Device>, rpjrt::Device)> {
        let chosen = match device.filter(|d| !d.is_none()) {
            Some(d) => {
                let dev = d
                    .cast::<PyDevice>()
                    .map_err(|_| invalid("device must be an rpjrt.Device"))?
                    .get()
                    .inner
                    .clone();
                // Checked before any argument is put there: a device of another client is
                // the `device=` argument's fault, said as `put` and `compile` say it.
                let client = self.client.get();
                Some(
                    client
                        .inner
                        .resolve_device(&rpjrt::DeviceChoice::Device(dev))
                        .pyerr()?,
                )
            }
            None => None,
        };
        let target = match &chosen {
            Some(d) => d.clone(),
            None => self.first_device()?,
        };
        Ok((chosen, target))
    }

    /// One argument list per addressable device (in `devices` order), each turned into
    /// Buffers on its device; `verb` names the method in the errors.
    pub(crate) fn collect_device_lists<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyAny>,
        devices: &[rpjrt::Device],
        verb: &str,
    ) -> PyResult<Vec<Vec<Bound<'py, PyBuffer>>>> {
        let lists = sequence_items(
            args,
            &format!("{verb}'s argument (one argument list per device)"),
        )?;
        if devices.is_empty() {
            // A portable executable has no device of its own: the core's refusal of a
            // call without a device says how to run it.
            self.inner.execute_sharded(&[]).pyerr()?;
        }
        if lists.len() != devices.len() {
            return Err(invalid(format!(
                "{} argument list(s) given, but the executable runs on {} device(s) and \
                 takes one list per device",
                lists.len(),
                devices.len()
            )));
        }
        let mut all = Vec::with_capacity(lists.len());
        for (d, (list, dev)) in lists.iter().zip(devices).enumerate() {
            let items = sequence_items(
                list,
                &format!("argument list {d} ({verb} takes one argument list per device)"),
            )?;
            let tuple = PyTuple::new(py, items)?;
            all.push(self.collect_args(py, &tuple, dev)?);
        }
        Ok(all)
    }

    /// Turns arguments into Buffers: Buffers pass through, anything else is put on `device`.
    pub(crate) fn collect_args<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        device: &rpjrt::Device,
    ) -> PyResult<Vec<Bound<'py, PyBuffer>>> {
        let client = self.client.bind(py);
        let mut out = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            let b = match a.cast::<PyBuffer>() {
                Ok(b) => b.clone(),
                Err(_) => {
                    let dev = wrap_device(py, &self.client, device.clone())?;
                    // Python numbers and lists take the parameter's type (as JAX's weak
                    // types do); arrays keep theirs and must match.
                    let param = self.inner.parameters().and_then(|p| p.get(i));
                    let (a, dtype) = match (crate::put::as_python_tree(&a)?, param) {
                        (Some(v), Some(spec)) => (v, Some(dtype_obj(py, spec.element_type)?)),
                        _ => (a, None),
                    };
                    let put = crate::put::put_input(
                        client,
                        &a,
                        dev.bind(py).as_any(),
                        dtype.as_ref(),
                        || format!("argument {i}"),
                    )?;
                    put.into_bound(py)
                }
            };
            out.push(b);
        }
        Ok(out)
    }

    /// A call with any arguments and options: non-Buffer arguments are put on the target
    /// device first. With `wait_execution`, it also waits (interruptibly) for the
    /// execution's completion event and raises its error.
    fn call_general<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        device: Option<&Bound<'py, PyAny>>,
        donate: Option<&Bound<'py, PyAny>>,
        ffi_user_data: Option<Py<PyAny>>,
        wait_execution: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let donate = donate_list(donate)?;
        let (chosen, target) = self.target_device(device)?;
        let bufs = self.collect_args(py, args, &target)?;
        let refs: Vec<&rpjrt::Buffer> = bufs.iter().map(|b| b.get().rb()).collect();
        let exe = &self.inner;
        let ffi_context = match ffi_user_data {
            Some(obj) => Some(crate::ffi::user_data_context(
                &self.client.bind(py).get().inner,
                obj,
            )?),
            None => None,
        };
        // With an execute context the core waits for the execution itself.
        let events = wait_execution && ffi_context.is_none();
        let mut outs = if donate.is_empty() && chosen.is_none() && ffi_context.is_none() && !events
        {
            if crate::bench::hold_gil() {
                exe.execute(&refs).pyerr()?
            } else {
                py.detach_call(|| exe.execute(&refs)).pyerr()?
            }
        } else {
            let opts = ExecuteOptions {
                donate,
                device: chosen,
                ffi_context,
                completion_events: events,
            };
            let lists = vec![refs];
            let mut r = py.detach_call(|| exe.execute_with(&lists, &opts)).pyerr()?;
            wait_events(py, exe, std::mem::take(&mut r.events))?;
            r.outputs.pop().unwrap_or_default()
        };
        let outs = std::mem::take(&mut outs);
        self.wrap_outputs(py, outs)
    }

    /// The fast path of a plain call whose arguments are all Buffers (at most
    /// `FAST_ARGS`): no intermediate lists, one release of the GIL for the execution and,
    /// with `wait`, for polling the outputs until they are ready (a computation still
    /// running after the poll time is waited for interruptibly, as `block_until_ready`
    /// does). `None` when an argument is not a Buffer (the general path converts it).
    fn call_buffers<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        wait: bool,
    ) -> Option<PyResult<Bound<'py, PyList>>> {
        const FAST_ARGS: usize = 16;
        let n = args.len();
        if n > FAST_ARGS {
            return None;
        }
        let mut items = args.iter_borrowed();
        let filled: [&rpjrt::Buffer; FAST_ARGS];
        let refs: &[&rpjrt::Buffer] = match items.next() {
            None => &[],
            Some(first) => {
                let first = first.cast::<PyBuffer>().ok()?.get().rb();
                let mut all = [first; FAST_ARGS];
                for (slot, a) in all[1..].iter_mut().zip(items) {
                    *slot = a.cast::<PyBuffer>().ok()?.get().rb();
                }
                filled = all;
                &filled[..n]
            }
        };
        let exe = &self.inner;
        let client = self.client.get();
        let mut outs = Vec::with_capacity(exe.num_outputs());
        let run = |outs: &mut Vec<rpjrt::Buffer>| -> rpjrt::Result<()> {
            // Buffers dropped with the GIL held go first (their handles can then be reused
            // for this call's outputs).
            drop(client.take_deferred());
            exe.execute_into(refs, outs)?;
            if wait {
                // Poll each output once released; what is still running is waited for
                // below, with the GIL, interruptibly.
                for o in outs.iter() {
                    if !o.poll_ready()? {
                        break;
                    }
                }
            } else {
                self.note_ready(outs);
            }
            Ok(())
        };
        let ran = if crate::bench::hold_gil() {
            run(&mut outs)
        } else {
            py.detach_call(|| run(&mut outs))
        };
        Some(self.finish_call(py, ran, outs, wait))
    }

    /// Wraps a fast call's outputs (after waiting for them, with `wait`).
    fn finish_call<'py>(
        &self,
        py: Python<'py>,
        ran: rpjrt::Result<()>,
        outs: Vec<rpjrt::Buffer>,
        wait: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        ran.pyerr()?;
        if wait {
            for o in &outs {
                crate::buffer::wait_buffer(py, o)?;
            }
        }
        self.wrap_outputs(py, outs)
    }

    fn first_device(&self) -> PyResult<rpjrt::Device> {
        self.inner.default_device().pyerr()
    }

    fn wrap_outputs<'py>(
        &self,
        py: Python<'py>,
        outs: Vec<rpjrt::Buffer>,
    ) -> PyResult<Bound<'py, PyList>> {
        crate::buffer::wrap_list(py, outs, &self.client)
    }
}

impl PyExecutable {
    /// One non-blocking readiness check of a fresh execution's outputs, made while the GIL
    /// is released anyway for the execution: a program the plugin ran inline (a tiny one,
    /// on a CPU plugin) has its outputs ready on return, and a success is remembered in
    /// each output, so a later `block_until_ready()` returns without a plugin call or a
    /// second release of the GIL. Stops at the first output not ready yet (the others of a
    /// still running execution are most likely not ready either). An executable whose
    /// outputs were not ready on return `READY_PROBES` times in a row (an accelerator, a
    /// long program) is checked only once every `READY_REPROBE` calls after that. An
    /// error of the check is left for the wait to report.
    fn note_ready(&self, outs: &[rpjrt::Buffer]) {
        const READY_PROBES: u32 = 4;
        const READY_REPROBE: u32 = 64;
        let misses = self.ready_misses.load(Ordering::Relaxed);
        if misses >= READY_PROBES && !misses.is_multiple_of(READY_REPROBE) {
            self.ready_misses
                .store(misses.wrapping_add(1), Ordering::Relaxed);
            return;
        }
        let mut first_ready = false;
        for (i, o) in outs.iter().enumerate() {
            if !o.is_ready().unwrap_or(false) {
                break;
            }
            first_ready |= i == 0;
        }
        let now = if first_ready {
            0
        } else {
            misses.wrapping_add(1).max(1)
        };
        if now != misses {
            self.ready_misses.store(now, Ordering::Relaxed);
        }
    }
}

pub(crate) fn donate_list(donate: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<usize>> {
    match donate {
        None => Ok(Vec::new()),
        Some(d) if d.is_none() => Ok(Vec::new()),
        Some(d) => sequence_items(d, "donate (a sequence of argument positions)")?
            .iter()
            .map(|item| {
                let at = int_arg(item, "an argument position")?;
                usize::try_from(at)
                    .map_err(|_| invalid(format!("donate: argument position {at} is negative")))
            })
            .collect(),
    }
}

#[pymethods]
impl PyExecutable {
    /// The program's name, as the plugin reports it.
    #[getter]
    fn name(&self) -> String {
        self.inner.name().to_string()
    }

    /// Frees the compiled program's device resources now, for every reference to it
    /// (`Executable::delete`); a no-op when already deleted.
    fn delete(&self, py: Python<'_>) -> PyResult<()> {
        let e = &self.inner;
        py.detach_call(|| e.delete()).pyerr()
    }

    /// Whether `delete()` was called.
    fn is_deleted(&self) -> bool {
        self.inner.is_deleted()
    }
    /// The client it was compiled or loaded on.
    #[getter]
    fn client(&self, py: Python<'_>) -> Py<PyClient> {
        self.client.clone_ref(py)
    }
    /// The number of outputs of one call.
    #[getter]
    fn num_outputs(&self) -> usize {
        self.inner.num_outputs()
    }
    /// The number of replicas it was compiled for.
    #[getter]
    fn num_replicas(&self) -> usize {
        self.inner.num_replicas()
    }
    /// The number of partitions it was compiled for.
    #[getter]
    fn num_partitions(&self) -> usize {
        self.inner.num_partitions()
    }
    /// The DType of each parameter.
    #[getter]
    fn input_dtypes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .params()?
            .iter()
            .map(|p| dtype_obj(py, p.element_type))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }
    /// The shape of each parameter.
    #[getter]
    fn input_shapes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .params()?
            .iter()
            .map(|p| shape_tuple(py, &p.dims))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }
    /// The DType of each output.
    #[getter]
    fn output_dtypes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .inner
            .outputs()
            .iter()
            .map(|p| dtype_obj(py, p.element_type))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }
    /// The shape of each output.
    #[getter]
    fn output_shapes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .inner
            .outputs()
            .iter()
            .map(|p| shape_tuple(py, &p.dims))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }
    /// The plugin's fingerprint of the executable (`PJRT_Executable_Fingerprint`), or
    /// None where the plugin offers none (it lacks the entry, answers UNIMPLEMENTED, or
    /// gives an empty one). XLA's plugins give their fingerprint of the program module:
    /// it need not change with compile options, so it does not identify compiled code.
    /// A closed client, a deleted executable or a plugin error raises, as every other
    /// method does.
    #[getter]
    fn fingerprint(&self) -> PyResult<Option<String>> {
        match self.inner.fingerprint() {
            Ok(f) => Ok(Some(f).filter(|f| !f.is_empty())),
            Err(e) if e.code() == rpjrt::Code::Unimplemented => Ok(None),
            Err(e) => Err(e).pyerr(),
        }
    }

    /// Deprecated name of `addressable_devices()`; kept for one release.
    fn devices<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        crate::errors::deprecated(
            py,
            "Executable.devices()",
            "Executable.addressable_devices()",
        )?;
        self.addressable_devices(py)
    }

    /// The addressable devices it runs on, in `execute_sharded` order
    /// (`rpjrt::Executable::addressable_devices`).
    fn addressable_devices<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .inner
            .addressable_devices()
            .pyerr()?
            .into_iter()
            .map(|d| wrap_device(py, &self.client, d))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    #[pyo3(signature = (*args, device = None, donate = None, ffi_user_data = None, wait = false))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        device: Option<&Bound<'py, PyAny>>,
        donate: Option<&Bound<'py, PyAny>>,
        ffi_user_data: Option<Py<PyAny>>,
        wait: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        // A program with no outputs has only its completion event to wait for (and to
        // carry a failing custom call's error): `wait` takes the general path.
        let no_outputs = self.inner.num_outputs() == 0;
        if device.is_none() && donate.is_none() && ffi_user_data.is_none() && !(wait && no_outputs)
        {
            if let Some(outs) = self.call_buffers(py, args, wait) {
                return outs;
            }
        }
        let outs =
            self.call_general(py, args, device, donate, ffi_user_data, wait && no_outputs)?;
        if wait {
            for o in outs.iter() {
                o.cast::<PyBuffer>()?.get().wait_ready(py)?;
            }
        }
        Ok(outs)
    }

    /// Run on every addressable device: `args[i]` is device i's argument list. With
    /// `wait`, returns once every output is ready, raising a failed execution's error (for
    /// a program without outputs, from its completion events, the only place it goes).
    #[pyo3(signature = (args, *, donate = None, wait = false))]
    fn execute_sharded<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyAny>,
        donate: Option<&Bound<'py, PyAny>>,
        wait: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let donate = donate_list(donate)?;
        let devices = self.inner.addressable_devices().pyerr()?;
        let all = self.collect_device_lists(py, args, &devices, "execute_sharded")?;
        let refs: Vec<Vec<&rpjrt::Buffer>> = all
            .iter()
            .map(|l| l.iter().map(|b| b.get().rb()).collect())
            .collect();
        let exe = &self.inner;
        let opts = ExecuteOptions {
            donate,
            completion_events: wait && exe.num_outputs() == 0,
            ..Default::default()
        };
        let mut result = py.detach_call(|| exe.execute_with(&refs, &opts)).pyerr()?;
        wait_events(py, exe, std::mem::take(&mut result.events))?;
        let per_device = result
            .outputs
            .into_iter()
            .map(|outs| self.wrap_outputs(py, outs))
            .collect::<PyResult<Vec<_>>>()?;
        if wait {
            for outs in &per_device {
                for o in outs.iter() {
                    o.cast::<PyBuffer>()?.get().wait_ready(py)?;
                }
            }
        }
        PyList::new(py, per_device)
    }

    /// Runs like `__call__` and also returns the execution's completion event:
    /// `(outputs, event)`; `event` is `None` where the plugin hands back none.
    #[pyo3(signature = (*args, device = None, donate = None))]
    fn execute_with_events<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        device: Option<&Bound<'py, PyAny>>,
        donate: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyList>, Option<crate::event::PyEvent>)> {
        let donate = donate_list(donate)?;
        let (chosen, target) = self.target_device(device)?;
        let bufs = self.collect_args(py, args, &target)?;
        let refs: Vec<&rpjrt::Buffer> = bufs.iter().map(|b| b.get().rb()).collect();
        let opts = ExecuteOptions {
            donate,
            device: chosen,
            completion_events: true,
            ..Default::default()
        };
        let exe = &self.inner;
        let lists = vec![refs];
        let mut r = py.detach_call(|| exe.execute_with(&lists, &opts)).pyerr()?;
        let outs = self.wrap_outputs(py, r.outputs.pop().unwrap_or_default())?;
        let what = format!("execution of {} on device {}", exe.name(), target.id());
        let event = r.events.pop().map(|e| crate::event::PyEvent::new(e, what));
        Ok((outs, event))
    }

    /// Visits its client (its own reference), so that a cycle through it and a Client's
    /// store is collectable.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.client)
    }

    fn __repr__(&self) -> String {
        let ins = match self.inner.parameters() {
            Some(p) => p
                .iter()
                .map(|a| spec_string(a.element_type, &a.dims))
                .collect::<Vec<_>>()
                .join(", "),
            None => "?".into(),
        };
        let outs = self
            .inner
            .outputs()
            .iter()
            .map(|a| spec_string(a.element_type, &a.dims))
            .collect::<Vec<_>>()
            .join(", ");
        let devs = if self.inner.is_deleted() {
            "deleted".to_string()
        } else {
            match self.inner.addressable_devices() {
                Ok(d) => {
                    let ids: Vec<String> = d.iter().map(|d| d.id().to_string()).collect();
                    format!("devices=[{}]", ids.join(", "))
                }
                Err(_) => match self.client.get().inner.is_forked() {
                    true => "inherited across fork".to_string(),
                    false => "client closed".to_string(),
                },
            }
        };
        format!(
            "rpjrt.Executable({}: ({ins}) -> ({outs}), {devs})",
            self.inner.name()
        )
    }
}

/// Waits (interruptibly) for an execution's completion events, one per device: every
/// device finishes before the first failure is raised; an interruption is raised at once.
fn wait_events(py: Python<'_>, exe: &rpjrt::Executable, events: Vec<rpjrt::Event>) -> PyResult<()> {
    let mut failed = None;
    for e in events {
        let what = format!("execution of {}", exe.name());
        if let Err(err) = crate::event::PyEvent::new(e, what).wait(py, None) {
            if !err.is_instance_of::<pyo3::exceptions::PyException>(py) {
                return Err(err);
            }
            failed.get_or_insert(err);
        }
    }
    failed.map_or(Ok(()), Err)
}
