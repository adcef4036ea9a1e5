//! Sessions: named slots and programs that read and write them (rpjrt::Session).
//! Python-only sugar (compiling sources, bind_many) is in rpjrt/session.py.

use crate::detach::Detach;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyBaseException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::{PyTraverseError, PyVisit};
use rpjrt::{ArraySpec, Loader, Session, SessionProgram, SlotState, SlotValue};

use crate::buffer::PyBuffer;
use crate::client::{wrap_device, PyClient, PyDevice};
use crate::convert::{dtype_from_py, dtype_obj, shape_tuple};
use crate::errors::{invalid, make_err, PyErrExt};
use crate::executable::PyExecutable;

/// The Python exception a loader raised (normalized, its traceback attached), kept so that
/// the failed call can chain it.
type Stash = Arc<Mutex<Option<Py<PyBaseException>>>>;

/// The Python objects one loader holds: its callable, and the client and device its value
/// is put on.
struct LoaderObjects {
    call: Py<PyAny>,
    client: Py<PyClient>,
    device: Py<PyDevice>,
}

/// A loader's Python objects, shared by the loader (through [`LoaderHold`]) and its
/// session's list, so that Python's cycle collector sees them (`__traverse__`) and can
/// release them (`__clear__`): a loader that refers back to its session (a bound method of
/// an object holding it) is a reference cycle.
type Held = Mutex<Option<LoaderObjects>>;

/// The loader's share of its [`Held`] objects: when the core drops the loader (it ran, was
/// replaced, or the session closed), the objects are released with it.
struct LoaderHold(Arc<Held>);

impl Drop for LoaderHold {
    fn drop(&mut self) {
        // Taken out under the lock and dropped after it: dropping a callable may run code.
        let objects = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        drop(objects);
    }
}

/// Named slots on one device (the engine of `rpjrt.Session`).
#[pyclass(frozen, weakref, name = "_Session", module = "rpjrt")]
pub struct PySession {
    inner: Session,
    client: Py<PyClient>,
    device: Py<PyDevice>,
    loader_error: Stash,
    /// The Python objects of the loaders bound to slots (entries whose loader is gone are
    /// empty, and pruned when a loader is added).
    loaders: Mutex<Vec<Arc<Held>>>,
    /// Set by `_close` (the end of a `with` block): every later use is refused.
    closed: AtomicBool,
    /// Set when a `_close` freed every slot's buffer: a close refused (a host view of a
    /// slot still open) leaves it unset, and the next `_close` tries again.
    freed: AtomicBool,
}

/// How often a call waiting for another thread's step answers Ctrl-C.
const SIGNAL_SLICE: std::time::Duration = std::time::Duration::from_millis(100);

/// Waits until no other thread runs a program of `s`, in slices without the GIL, raising
/// `KeyboardInterrupt` (or what a signal handler raises) between them: the call that
/// follows then finds the session between steps, or at worst waits for a step begun since.
fn between_steps(py: Python<'_>, s: &Session) -> PyResult<()> {
    between_steps_for(py, s, None)
}

/// [`between_steps`] for a bind or fetch of the slots `names`: it waits only while another
/// thread's step writes or donates one of them (`Session::wait_for_slots`).
fn between_steps_for(py: Python<'_>, s: &Session, names: Option<&[&str]>) -> PyResult<()> {
    while !py.detach_call(|| s.wait_for_slots(names, SIGNAL_SLICE)) {
        py.check_signals()?;
    }
    Ok(())
}

impl PySession {
    /// Deletes the buffer of every slot that holds one (`_close`'s work, and what a call
    /// during which the session was closed does for slots a loader filled after the close).
    fn free_slots(&self) -> rpjrt::Result<()> {
        let s = &self.inner;
        let mut first = None;
        for slot in s.slots() {
            if slot.state != SlotState::Ready {
                continue;
            }
            // Every slot is tried; the first failure (a host view still open) is raised.
            // A buffer shared by two slots is already deleted when the second is reached.
            // A closed client has freed every buffer already: nothing is left to do.
            match s.fetch(&slot.name).and_then(|b| b.delete()) {
                Ok(()) | Err(rpjrt::Error::Deleted(_) | rpjrt::Error::Closed(_)) => {}
                Err(e) => {
                    let name = slot.name;
                    first.get_or_insert(e.map_message(|m| format!("slot {name:?}: {m}")));
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// The names of the slots whose buffers are still alive (a close that could not free
    /// them), quoted and joined; empty when none.
    fn unfreed(&self) -> String {
        self.inner
            .slots()
            .into_iter()
            .filter(|s| s.state == SlotState::Ready)
            .map(|s| format!("{:?}", s.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The error of a use after `_close`: it says whether the close freed the slots'
    /// buffers, or which it could not free (a host view still open) and how to finish.
    fn closed_error(&self, py: Python<'_>) -> PyErr {
        let unfreed = self.unfreed();
        let msg = if unfreed.is_empty() {
            "this Session was closed (by close() or the end of its `with` block) and \
             its slots' buffers were freed; make a new Session"
                .to_string()
        } else {
            format!(
                "this Session was closed (by close() or the end of its `with` block), but \
                 the buffers of slot(s) {unfreed} could not be freed yet (a host view of them \
                 was open): drop the views and call close() again to free them; make a new \
                 Session to go on"
            )
        };
        make_err(py, "FAILED_PRECONDITION", "SessionClosed", msg, None)
    }

    /// Refuses use after `_close`, with an error that says so.
    fn check_open(&self, py: Python<'_>) -> PyResult<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(self.closed_error(py));
        }
        Ok(())
    }

    /// Refuses a loader (or anything else that runs later) for a client already closed:
    /// it could never run.
    fn check_client_open(&self) -> PyResult<()> {
        if self.inner.client().is_closed() {
            return Err(crate::errors::to_py(rpjrt::Error::Closed("session")));
        }
        Ok(())
    }

    /// The Python exception of a call that failed. When the session was closed meanwhile
    /// (by a loader, a custom-call handler or another thread), that is the error, as the
    /// next call would say: the buffers the close freed are not to blame. A failure that
    /// is not that fallout (a loader's own exception, a handler's error) is kept as its
    /// cause; Ctrl-C in a loader stays Ctrl-C.
    fn fail(&self, py: Python<'_>, e: rpjrt::Error) -> PyErr {
        if !self.closed.load(Ordering::Acquire) {
            return raise(py, &self.loader_error, e);
        }
        let loader = take_stash(py, &self.loader_error);
        let cause = match loader {
            Some(c) if !c.is_instance_of::<pyo3::exceptions::PyException>(py) => return c,
            Some(c) => Some(c),
            None if matches!(e, rpjrt::Error::Deleted(_) | rpjrt::Error::Closed(_)) => None,
            None => Some(crate::errors::to_py(e)),
        };
        let err = self.closed_error(py);
        if cause.is_some() {
            err.set_cause(py, cause);
        }
        err
    }

    /// The end of a call that put values into slots, or ran loaders that did (a bind, a
    /// restore, a step, a load): when the session was closed meanwhile (by another thread,
    /// a loader or a custom-call handler), what landed after the close is freed, as close()
    /// promises, and the call fails as the next call would (`fail`); otherwise `r`, its
    /// error raised as `fail` raises it. Every slot then reads `deleted`, whichever of the
    /// call and the close came first: a close that ran before the values landed is seen
    /// here, and one that runs after frees them itself.
    fn landed<T>(&self, py: Python<'_>, r: rpjrt::Result<T>) -> PyResult<T> {
        if self.closed.load(Ordering::Acquire) {
            let _ = py.detach_call(|| self.free_slots());
            // A loader bound after the close never runs either.
            self.inner.drop_loaders();
            return Err(match r {
                Ok(_) => self.closed_error(py),
                Err(e) => self.fail(py, e),
            });
        }
        r.map_err(|e| self.fail(py, e))
    }

    /// `Err` once the session is closed (what `landed` then reports as closed): the check a
    /// checkpoint save or restore runs, without the GIL, before it writes or binds.
    fn still_open(&self) -> rpjrt::Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(rpjrt::Error::Closed("session"));
        }
        Ok(())
    }

    /// What slot state `s` reads as: after close, a loader that never ran never will, so
    /// its slot reads `deleted` like every slot whose buffer the close freed (the core
    /// reads a slot deleted once its client closed). A slot whose buffer a refused close
    /// could not free (a host view open) still holds it, and reads `ready` until a later
    /// close frees it.
    fn state_name(&self, s: SlotState) -> &'static str {
        if s == SlotState::Pending && self.closed.load(Ordering::Acquire) {
            return "deleted";
        }
        // A session inherited across fork holds nothing this process can use.
        if s != SlotState::Empty && self.inner.client().is_forked() {
            return crate::client::gone(self.inner.client());
        }
        state_name(s)
    }

    /// Refuses a loader that `loader_of` could not bind: an empty name, or one that is
    /// not callable.
    fn check_loader(&self, name: &str, loader: &Bound<'_, PyAny>) -> PyResult<()> {
        if name.is_empty() {
            return Err(invalid("a slot name is empty"));
        }
        if !loader.is_callable() {
            return Err(invalid(format!(
                "the loader of slot {name:?} is not callable"
            )));
        }
        Ok(())
    }

    /// The core loader of slot `name` that calls the Python callable `loader` (already
    /// checked by `check_loader`) and turns what it returns into the slot's value.
    fn loader_of(&self, py: Python<'_>, name: &str, loader: &Bound<'_, PyAny>) -> Loader {
        // No Session in the closure: the slot holds the closure. The Python objects it
        // needs are shared with the session's list, where the cycle collector sees them
        // (the callable may refer back to the session).
        let held: Arc<Held> = Arc::new(Mutex::new(Some(LoaderObjects {
            call: loader.clone().unbind(),
            client: self.client.clone_ref(py),
            device: self.device.clone_ref(py),
        })));
        {
            let mut list = self.loaders.lock().unwrap_or_else(|p| p.into_inner());
            // Entries whose loader is gone (it ran, or was replaced) are empty: drop them.
            list.retain(|h| Arc::strong_count(h) > 1);
            list.push(Arc::clone(&held));
        }
        let hold = LoaderHold(held);
        let stash = Arc::clone(&self.loader_error);
        let slot = name.to_string();
        let load = move || -> rpjrt::Result<SlotValue> {
            Python::attach(|py| {
                let objects = {
                    let g = hold.0.lock().unwrap_or_else(|p| p.into_inner());
                    g.as_ref().map(|o| {
                        (
                            o.call.clone_ref(py),
                            o.client.clone_ref(py),
                            o.device.clone_ref(py),
                        )
                    })
                };
                let Some((f, client, device)) = objects else {
                    return Err(rpjrt::Error::Closed("session"));
                };
                let r = crate::detach::calling_python(py, || f.bind(py).call0())
                    .and_then(|v| slot_value(py, None, &client, &device, &slot, &v));
                r.map_err(|e| {
                    let msg = format!("its loader raised {e}");
                    *stash.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.into_value(py));
                    rpjrt::Error::InvalidArgument(msg)
                })
            })
        };
        Arc::new(load)
    }
}

/// The spec a loader's slot is declared to hold, from `bind_all`'s `(dtype, shape)` (None:
/// none declared).
fn declared_spec(name: &str, spec: Option<&Bound<'_, PyAny>>) -> PyResult<Option<ArraySpec>> {
    let Some(spec) = spec.filter(|s| !s.is_none()) else {
        return Ok(None);
    };
    let (dtype, dims): (Bound<'_, PyAny>, Vec<i64>) = spec.extract().map_err(|_| {
        invalid(format!(
            "the spec declared for slot {name:?} is (dtype, shape), not {}",
            crate::convert::type_name(spec)
        ))
    })?;
    if dims.iter().any(|&d| d < 0) {
        return Err(invalid(format!(
            "the shape declared for slot {name:?} has a negative size: {dims:?}"
        )));
    }
    Ok(Some(ArraySpec {
        element_type: dtype_from_py(&dtype)?,
        dims,
    }))
}

/// A value for a slot: Buffers are bound as they are, anything else is put on the
/// session's device (taking the slot's dtype for Python numbers and lists).
fn slot_value(
    py: Python<'_>,
    session: Option<&Session>,
    client: &Py<PyClient>,
    device: &Py<PyDevice>,
    name: &str,
    value: &Bound<'_, PyAny>,
) -> PyResult<SlotValue> {
    if let Ok(b) = value.cast::<PyBuffer>() {
        return Ok(SlotValue::Buffer(b.get().rb().clone()));
    }
    let plain = crate::put::as_python_tree(value)?;
    let value = plain.as_ref().unwrap_or(value);
    let dtype = match session.filter(|_| plain.is_some()) {
        Some(session) => session
            .slots()
            .into_iter()
            .find(|s| s.name == name)
            .and_then(|s| s.spec)
            .map(|s| dtype_obj(py, s.element_type))
            .transpose()?,
        None => None,
    };
    let put = crate::put::put_input(
        client.bind(py),
        value,
        device.bind(py).as_any(),
        dtype.as_ref(),
        || format!("slot {name:?}"),
    )?;
    Ok(SlotValue::Uploaded(put.bind(py).get().rb().clone()))
}

fn state_name(s: SlotState) -> &'static str {
    match s {
        SlotState::Empty => "empty",
        SlotState::Pending => "pending",
        SlotState::Ready => "ready",
        SlotState::Deleted => "deleted",
    }
}

/// The exception a loader raised, taken from `stash` (None when none is kept).
fn take_stash(py: Python<'_>, stash: &Stash) -> Option<PyErr> {
    let e = stash.lock().unwrap_or_else(|p| p.into_inner()).take();
    e.map(|v| PyErr::from_value(v.into_bound(py).into_any()))
}

/// Turns a failed call's error into the Python exception, chaining a loader's own
/// exception as its cause. A loader interrupted by something that is not an `Exception`
/// (KeyboardInterrupt, SystemExit) raises that itself: Ctrl-C must stay Ctrl-C.
fn raise(py: Python<'_>, stash: &Stash, e: rpjrt::Error) -> PyErr {
    let cause = take_stash(py, stash);
    match cause {
        Some(c) if !c.is_instance_of::<pyo3::exceptions::PyException>(py) => c,
        Some(c) => {
            // The loader's failure keeps its kind: an rpjrt error its own class, a
            // MemoryError (or another exception with a status of its own) that status's
            // class; anything else is the refusal of the slot's value.
            // Its words without "invalid argument: " (the loader's failure is not one
            // where it keeps a class of its own).
            let message = match &e {
                rpjrt::Error::InvalidArgument(m) => m.clone(),
                e => e.to_string(),
            };
            let own = crate::errors::is_rpjrt_error(py, &c)
                .then(|| c.get_type(py).call1((message.clone(),)).ok())
                .flatten()
                .map(PyErr::from_value);
            let err = own.unwrap_or_else(|| match crate::errors::code_of_exception(py, &c) {
                rpjrt::Code::Unknown | rpjrt::Code::InvalidArgument => crate::errors::to_py(e),
                code => crate::errors::make_err(py, code.name(), "Other", message, None),
            });
            err.set_cause(py, Some(c));
            err
        }
        None => crate::errors::to_py(e),
    }
}

/// Refuses a program whose slots would have more dimensions than numpy holds: such a slot
/// could never be fetched (`fetch`, `to_numpy`) or saved (`save`), so the program is
/// refused up front, naming the slot, rather than at the first fetch.
fn check_slot_ranks(exe: &rpjrt::Executable, inputs: &[&str], outputs: &[&str]) -> PyResult<()> {
    const MAX: usize = rpjrt_npy::npz::MAX_NUMPY_DIMS;
    let params = exe.parameters().unwrap_or_default();
    let inputs = inputs.iter().zip(params).enumerate();
    let inputs = inputs.map(|(k, (n, s))| (n, s, format!("argument {k}")));
    let outputs = outputs.iter().zip(exe.outputs()).enumerate();
    let outputs = outputs.map(|(k, (n, s))| (n, s, format!("output {k}")));
    for (name, spec, what) in inputs.chain(outputs) {
        if !name.is_empty() && spec.dims.len() > MAX {
            return Err(invalid(format!(
                "{what} of {} has {} dimensions, but numpy holds at most {MAX}: slot {name:?} \
                 could never be fetched or saved; reshape it to at most {MAX} dimensions in \
                 the program (an output can also be left unkept, as None)",
                exe.name(),
                spec.dims.len()
            )));
        }
    }
    Ok(())
}

#[pymethods]
impl PySession {
    #[new]
    #[pyo3(signature = (client, device = None))]
    fn new(
        py: Python<'_>,
        client: &Bound<'_, PyClient>,
        device: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PySession> {
        let c = client.get();
        let dev = c.resolve_device(py, device.filter(|d| !d.is_none()))?;
        let inner = Session::on_device(&c.inner, &dev).pyerr()?;
        let client = client.clone().unbind();
        let device = wrap_device(py, &client, dev)?;
        Ok(PySession {
            inner,
            client,
            device,
            loader_error: Arc::new(Mutex::new(None)),
            loaders: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            freed: AtomicBool::new(false),
        })
    }

    /// Visits every Python object the session holds (its client and device, each pending
    /// loader's callable, client and device, a loader's exception not yet raised), so that
    /// Python's cycle collector can reclaim a session its loaders refer back to. A lock
    /// another thread holds is not waited for: what it guards is skipped this time (the
    /// collector then keeps those objects, which is safe).
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.client)?;
        visit.call(&self.device)?;
        if let Ok(stash) = self.loader_error.try_lock() {
            if let Some(e) = stash.as_ref() {
                visit.call(e)?;
            }
        }
        if let Ok(list) = self.loaders.try_lock() {
            for held in list.iter() {
                if let Ok(objects) = held.try_lock() {
                    if let Some(o) = objects.as_ref() {
                        visit.call(&o.call)?;
                        visit.call(&o.client)?;
                        visit.call(&o.device)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Releases the Python objects of the pending loaders (and a kept loader exception),
    /// breaking a cycle through them; a loader whose objects were released fails as if the
    /// session had closed.
    fn __clear__(&self) {
        let list = std::mem::take(&mut *self.loaders.lock().unwrap_or_else(|p| p.into_inner()));
        for held in &list {
            let objects = held.lock().unwrap_or_else(|p| p.into_inner()).take();
            drop(objects);
        }
        let e = self
            .loader_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        drop(e);
    }

    /// The session's client.
    #[getter]
    fn client(&self, py: Python<'_>) -> Py<PyClient> {
        self.client.clone_ref(py)
    }

    /// The device the session's slots live on.
    #[getter]
    fn device(&self, py: Python<'_>) -> Py<PyDevice> {
        self.device.clone_ref(py)
    }

    /// How many host values were uploaded into slots (by binds and by loaders).
    #[getter]
    fn uploads(&self) -> usize {
        self.inner.uploads()
    }

    /// How many times a loader ran.
    #[getter]
    fn loads(&self) -> usize {
        self.inner.loads()
    }

    /// Whether the session has been closed.
    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Refuses every later use, drops the loaders that never ran (they never will, and
    /// what they captured is released), then deletes the buffer of every slot that holds
    /// one. A buffer that cannot be deleted (a host view of it is open) fails the close,
    /// naming its slot; the session stays closed to every other use, and a later close
    /// tries again. Once a close has freed everything, closing again does nothing, and
    /// neither does closing a session whose client was closed (that freed every buffer).
    fn _close(&self, py: Python<'_>) -> PyResult<()> {
        self.closed.store(true, Ordering::Release);
        if self.freed.load(Ordering::Acquire) {
            return Ok(());
        }
        self.inner.drop_loaders();
        // In a forked child the buffers are the parent's (nothing here can free them), as
        // the client's close does nothing there.
        if self.inner.client().is_forked() {
            return Ok(());
        }
        // A step running on another thread stores its outputs first: waited for in slices,
        // so that Ctrl-C ends the wait.
        between_steps(py, &self.inner)?;
        match py.detach_call(|| self.free_slots()) {
            Ok(()) => {
                self.freed.store(true, Ordering::Release);
                Ok(())
            }
            Err(e) => Err(crate::errors::to_py(e.map_message(|m| {
                format!(
                    "{m}; the session is closed to every other use (the other slots were \
                     freed): drop the views, then call close() again to free this one"
                )
            }))),
        }
    }

    /// A SessionProgram running `executable` with its arguments read from the `inputs`
    /// slots and its outputs written to the `outputs` slots (None: not kept); with
    /// `donate`, slots that are both read and written are donated.
    #[pyo3(signature = (executable, inputs, outputs, donate = true))]
    fn program(
        slf: &Bound<'_, Self>,
        executable: &Bound<'_, PyAny>,
        inputs: Vec<String>,
        outputs: Vec<Option<String>>,
        donate: bool,
    ) -> PyResult<PySessionProgram> {
        let exe = executable.cast::<PyExecutable>().map_err(|_| {
            invalid("program takes an rpjrt.Executable (or source, through Session.program)")
        })?;
        let ins: Vec<&str> = inputs.iter().map(String::as_str).collect();
        let outs: Vec<&str> = outputs.iter().map(|o| o.as_deref().unwrap_or("")).collect();
        let this = slf.get();
        this.check_open(slf.py())?;
        check_slot_ranks(exe.get().rexe(), &ins, &outs)?;
        let inner = this
            .inner
            .program_with(exe.get().rexe(), &ins, &outs, donate)
            .pyerr()?;
        Ok(PySessionProgram {
            inner,
            session: slf.clone().unbind(),
            executable: exe.clone().unbind(),
        })
    }

    /// Binds slot `name` to `value` (a Buffer, or host data put on the session's device).
    fn bind(&self, py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.check_open(py)?;
        let v = slot_value(
            py,
            Some(&self.inner),
            &self.client,
            &self.device,
            name,
            value,
        )?;
        // Converting ran Python code, which may have closed the session.
        self.check_open(py)?;
        let s = &self.inner;
        between_steps_for(py, s, Some(&[name]))?;
        let r = py.detach_call(|| s.bind(name, v));
        self.landed(py, r)
    }

    /// Binds every `(name, value)` pair, and every `(name, loader)` or `(name, loader,
    /// spec)` of `lazy` to its loader, all or nothing (`Session::bind_all_with`): the
    /// loaders' names and declared specs (`(dtype, shape)`, which become their slots'
    /// specs), the values and the client are checked, and the values uploaded, before any
    /// slot changes.
    #[pyo3(signature = (pairs, lazy = None))]
    fn bind_all(
        &self,
        py: Python<'_>,
        pairs: &Bound<'_, PyAny>,
        lazy: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.check_open(py)?;
        let mut loaders: Vec<(String, Bound<'_, PyAny>, Option<ArraySpec>)> = Vec::new();
        if let Some(lazy) = lazy.filter(|l| !l.is_none()) {
            for item in crate::convert::sequence_items(lazy, "bind_all's loaders")? {
                let three: PyResult<(String, Bound<'_, PyAny>, Bound<'_, PyAny>)> = item.extract();
                let (name, loader, spec) = match three {
                    Ok((name, loader, spec)) => (name, loader, Some(spec)),
                    Err(_) => {
                        let (name, loader): (String, Bound<'_, PyAny>) = item.extract()?;
                        (name, loader, None)
                    }
                };
                self.check_loader(&name, &loader)?;
                if loaders.iter().any(|(n, ..)| *n == name) {
                    return Err(invalid(format!(
                        "slot {name:?} is given more than one loader"
                    )));
                }
                let spec = declared_spec(&name, spec.as_ref())?;
                loaders.push((name, loader, spec));
            }
            self.check_client_open()?;
        }
        let mut values = Vec::new();
        for item in crate::convert::sequence_items(pairs, "bind_all's pairs")? {
            let (name, value): (String, Bound<'_, PyAny>) = item.extract()?;
            if loaders.iter().any(|(n, ..)| *n == name) {
                return Err(invalid(format!(
                    "slot {name:?} is given both a value and a loader"
                )));
            }
            let v = slot_value(
                py,
                Some(&self.inner),
                &self.client,
                &self.device,
                &name,
                &value,
            )?;
            values.push((name, v));
        }
        // Converting ran Python code, which may have closed the session or its client.
        self.check_open(py)?;
        if !loaders.is_empty() {
            self.check_client_open()?;
        }
        let lazy: Vec<_> = loaders
            .into_iter()
            .map(|(name, loader, spec)| {
                let load = self.loader_of(py, &name, &loader);
                (name, spec, load)
            })
            .collect();
        let s = &self.inner;
        let names = values.iter().map(|v| v.0.as_str());
        let names: Vec<&str> = names.chain(lazy.iter().map(|l| l.0.as_str())).collect();
        between_steps_for(py, s, Some(&names))?;
        // One core call: the values and the loaders land together, or nothing does.
        let r = py.detach_call(|| s.bind_all_with(values, lazy));
        self.landed(py, r)
    }

    /// Binds slot `name` to `loader`, a callable run when the slot is first read.
    fn bind_lazy(&self, py: Python<'_>, name: &str, loader: &Bound<'_, PyAny>) -> PyResult<()> {
        self.check_open(py)?;
        self.check_loader(name, loader)?;
        self.check_client_open()?;
        let load = self.loader_of(py, name, loader);
        let s = &self.inner;
        between_steps_for(py, s, Some(&[name]))?;
        let r = py.detach_call(|| s.bind_lazy(name, load));
        self.landed(py, r)
    }

    /// The Buffer slot `name` holds (shared with the slot).
    fn buffer(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyBuffer>> {
        self.check_open(py)?;
        let s = &self.inner;
        // A slot that holds its buffer is read with the GIL held (nothing to wait for); a
        // loader, or waiting for another thread's use of the session, runs without it.
        let b = match s.fetch_loaded(name).pyerr()? {
            Some(b) => b,
            None => {
                between_steps_for(py, s, Some(&[name]))?;
                // Its loader may close the session: what it loaded is freed too, as
                // close() promises, and the call fails as the next one would.
                let r = py.detach_call(|| s.fetch(name));
                self.landed(py, r)?
            }
        };
        PyBuffer::wrap_shared(py, b, &self.client)
    }

    /// Slot `name` copied to the host as a numpy array (`Session::read_slot`): a step that
    /// starts during the copy writes a fresh buffer instead of donating the slot's, so
    /// neither the copy nor the step fails.
    fn fetch_host<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let b = self.buffer(py, name)?;
        let b = b.bind(py);
        let rb = b.get().rb();
        // Waited for first, answering Ctrl-C (the copy does not wait long then).
        crate::transfer::wait_settled(py, rb)?;
        let Some(api) = crate::npy::api(py)? else {
            return b.call_method0("to_numpy");
        };
        if let Some(why) = api.rank_refusal(rb.dims()) {
            return Err(invalid(format!("slot {name:?} cannot be fetched: {why}")));
        }
        let descr = crate::npy::descr(py, rb.element_type())?.bind(py);
        let Some((arr, data)) = api.empty(py, descr, rb.dims())? else {
            return b.call_method0("to_numpy");
        };
        let (ty, dims, len) = (rb.element_type(), rb.dims().to_vec(), rb.host_array_size());
        let dst: &mut [u8] = match len {
            0 => &mut [],
            // SAFETY: `data` addresses the new array's `len` bytes (its dtype has the host
            // item size, checked by `npy::descr`); nothing else can reach the array before it
            // is returned, and `arr` keeps it alive while the slice is used.
            _ => unsafe { std::slice::from_raw_parts_mut(data, len) },
        };
        let copy = |cur: &rpjrt::Buffer| -> rpjrt::Result<()> {
            // A slot keeps its type and shape: a value that differs is not this slot's.
            if cur.element_type() != ty || cur.dims() != dims.as_slice() {
                return Err(rpjrt::Error::invalid(format!(
                    "slot {name:?} changed its type while it was being fetched"
                )));
            }
            match dst.is_empty() {
                true => Ok(()),
                false => cur.to_host_array(dst),
            }
        };
        let s = &self.inner;
        let r = py.detach_call(|| s.read_slot(name, copy));
        self.landed(py, r)?;
        Ok(arr)
    }

    /// Writes every slot with a value to an `.npz` checkpoint (rpjrt_npy::checkpoint::save).
    fn save(&self, py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<()> {
        let path = crate::convert::path_arg(path, "the checkpoint path")?;
        self.check_open(py)?;
        let s = &self.inner;
        between_steps(py, s)?;
        // The save copies the slots' contents inside one call, where no signal is seen:
        // their buffers are waited for first, answering Ctrl-C.
        for slot in s.slots() {
            if slot.state != SlotState::Ready {
                continue;
            }
            if let Ok(Some(b)) = s.fetch_loaded(&slot.name) {
                let settled = crate::transfer::wait_settled(py, &b);
                crate::notify::drop_detached(b);
                settled?;
            }
        }
        // Nothing is written when the session was closed before the values were taken (by
        // a loader the save ran, or another thread): the save fails as the next call would,
        // and what the loaders filled after the close is freed. A close that comes after
        // the values were taken waits for them, and the file is that state.
        let r = py.detach_call(|| rpjrt_npy::checkpoint::save_with(s, &path, || self.still_open()));
        match r {
            Ok(()) => Ok(()),
            Err(e) => self.landed(py, Err(e)),
        }
    }

    /// Binds every array of an `.npz` file to its slot (rpjrt_npy::checkpoint::restore).
    fn restore(&self, py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<()> {
        let path = crate::convert::path_arg(path, "the checkpoint path")?;
        self.check_open(py)?;
        let s = &self.inner;
        between_steps(py, s)?;
        // A close while the file is read stops the restore; one that races its bind frees
        // what it bound (`landed`): either way the call fails and every slot reads deleted.
        let r =
            py.detach_call(|| rpjrt_npy::checkpoint::restore_with(s, &path, &|| self.still_open()));
        self.landed(py, r)
    }

    /// `[(name, dtype | None, shape | None, state)]` in creation order.
    fn slots<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .inner
            .slots()
            .into_iter()
            .map(|s| {
                let (dtype, shape) = match &s.spec {
                    Some(spec) => (
                        dtype_obj(py, spec.element_type)?.unbind(),
                        shape_tuple(py, &spec.dims)?.into_any().unbind(),
                    ),
                    None => (py.None(), py.None()),
                };
                PyTuple::new(
                    py,
                    [
                        s.name.into_pyobject(py)?.into_any().unbind(),
                        dtype,
                        shape,
                        self.state_name(s.state)
                            .into_pyobject(py)?
                            .into_any()
                            .unbind(),
                    ],
                )
            })
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    fn __repr__(&self) -> String {
        let slots = self
            .inner
            .slots()
            .into_iter()
            .map(|s| {
                let spec = s.spec.map_or_else(
                    || "?".to_string(),
                    |sp| crate::convert::spec_string(sp.element_type, &sp.dims),
                );
                format!("{}: {spec} {}", s.name, self.state_name(s.state))
            })
            .collect::<Vec<_>>()
            .join(", ");
        // The device as every other repr names it (`cpu:0`), not the plugin's own text.
        let platform = self.inner.client().platform_name();
        format!(
            "rpjrt.Session(device={}:{}, slots=[{slots}], uploads={})",
            platform
                .as_deref()
                .unwrap_or(crate::client::gone(self.inner.client())),
            self.inner.device().id(),
            self.inner.uploads()
        )
    }
}

/// A program whose arguments and outputs are slots of a Session.
///
/// `program(**values)` binds the keyword arguments to their slots, then runs (without
/// waiting); it returns the outputs that have a slot, `{slot name: Buffer}`, each shared
/// with its slot.
#[pyclass(frozen, weakref, name = "SessionProgram", module = "rpjrt")]
pub struct PySessionProgram {
    inner: SessionProgram,
    session: Py<PySession>,
    executable: Py<PyExecutable>,
}

#[pymethods]
impl PySessionProgram {
    /// Visits the session and executable it holds, so that Python's cycle collector sees a
    /// cycle through a program (a loader of its session that refers to it).
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.session)?;
        visit.call(&self.executable)
    }

    /// The executable it runs.
    #[getter]
    fn executable(&self, py: Python<'_>) -> Py<PyExecutable> {
        self.executable.clone_ref(py)
    }

    /// The slot read for each argument.
    #[getter]
    fn inputs(&self) -> Vec<String> {
        self.inner.inputs()
    }

    /// The slot written by each output (None: not kept).
    #[getter]
    fn outputs(&self) -> Vec<Option<String>> {
        self.inner.outputs()
    }

    /// Slots donated to each call (read and written, aliased in the compiled module).
    #[getter]
    fn donated(&self) -> Vec<String> {
        self.inner.donated()
    }

    /// Binds the keyword arguments to their slots, then runs the program (without waiting
    /// for it); the outputs go to their slots. Returns this step's outputs that have a
    /// slot, `{slot name: Buffer}` in output order (each shared with its slot).
    #[pyo3(signature = (**values))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        values: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let s = self.session.get();
        s.check_open(py)?;
        let p = &self.inner;
        let mut pairs = Vec::new();
        if let Some(values) = values.filter(|v| !v.is_empty()) {
            // A name that is not an input of this program is refused (it would only create
            // a slot the step never reads), before any conversion.
            let inputs = p.inputs();
            for (k, v) in values.iter() {
                let name: String = k.extract()?;
                if !inputs.contains(&name) {
                    return Err(invalid(format!(
                        "{} has no input slot {name:?} (its inputs: {})",
                        p.executable().name(),
                        if inputs.is_empty() {
                            "none".to_string()
                        } else {
                            inputs.join(", ")
                        }
                    )));
                }
                let value = slot_value(py, Some(&s.inner), &s.client, &s.device, &name, &v)?;
                pairs.push((name, value));
            }
            // The conversions ran Python code, which may have closed the session.
            s.check_open(py)?;
        }
        between_steps(py, &s.inner)?;
        // The values land and the step reads them in one hold of the session (all or
        // nothing: every value is checked and uploaded before any slot changes), so another
        // thread's call cannot replace them in between.
        // Closed while the step ran (by its own custom-call handler, one of its inputs'
        // loaders, or another thread): the outputs it stored in slots, and what the loaders
        // loaded, are freed too, as close() promises.
        let r = py.detach_call(|| p.call_with(pairs));
        let outs = s.landed(py, r)?;
        let dict = PyDict::new(py);
        for (out, slot) in outs.into_iter().zip(p.outputs()) {
            if let Some(name) = slot {
                dict.set_item(name, PyBuffer::wrap_shared(py, out, &s.client)?)?;
            }
        }
        Ok(dict)
    }

    fn __repr__(&self) -> String {
        let outs = self
            .inner
            .outputs()
            .into_iter()
            .map(|o| o.unwrap_or_else(|| "_".into()))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "rpjrt.SessionProgram({}: ({}) -> ({outs}), donates=[{}])",
            self.inner.executable().name(),
            self.inner.inputs().join(", "),
            self.inner.donated().join(", ")
        )
    }
}
