//! Prepared calls (`Executable.prepare`): arguments bound once, every check done once, then
//! called many times (`rpjrt::PreparedCall`); the outputs of one call come back as one
//! `CallOutputs` object whose Buffers are made only when asked for.

use crate::detach::Detach;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyList;
use pyo3::{PyTraverseError, PyVisit};

use crate::buffer::PyBuffer;
use crate::client::PyClient;
use crate::errors::PyErrExt;
use crate::executable::{donate_list, PyExecutable};

/// How often a blocking wait wakes up to check for Ctrl-C.
const SIGNAL_SLICE: Duration = Duration::from_millis(20);

/// Waits until a call has finished on every device (one wait for all of them) without the
/// GIL, waking every few ms to check for signals (Ctrl-C raises KeyboardInterrupt; the
/// computation goes on).
fn wait_outputs(py: Python<'_>, outs: &rpjrt::CallOutputs) -> PyResult<()> {
    loop {
        if py.detach_call(|| outs.wait_timeout(SIGNAL_SLICE)).pyerr()? {
            return Ok(());
        }
        py.check_signals()?;
    }
}

/// An executable with its arguments bound (Executable.prepare).
///
/// `call(*, wait=True)` runs it once and returns its `CallOutputs`; with wait=True it
/// returns once every device has finished (one wait for all of them, interruptible by
/// Ctrl-C) and raises the execution's error; with wait=False it returns at once.
#[pyclass(frozen, weakref, name = "PreparedCall", module = "rpjrt")]
pub struct PyPreparedCall {
    inner: crate::notify::Held<rpjrt::PreparedCall>,
    client: Py<PyClient>,
}

impl Drop for PyPreparedCall {
    fn drop(&mut self) {
        // It may hold the last reference to its executable, whose destruction may wait for
        // running computations: dropped without the GIL, as an Executable is.
        if let Some(inner) = self.inner.take() {
            crate::notify::drop_detached(inner);
        }
    }
}

/// The outputs of one prepared call: `outs[j]` is the list of output `j`'s shards (one
/// Buffer per device, in `Executable.addressable_devices()` order); `outs.per_device()` is
/// one output list per device, as `Executable.execute_sharded` returns.
#[pyclass(frozen, weakref, name = "CallOutputs", module = "rpjrt")]
pub struct PyCallOutputs {
    inner: rpjrt::CallOutputs,
    client: Py<PyClient>,
}

impl PyCallOutputs {
    fn wrap_all<'a, 'py>(
        &self,
        py: Python<'py>,
        bufs: impl Iterator<Item = &'a rpjrt::Buffer>,
    ) -> PyResult<Bound<'py, PyList>> {
        let items = bufs
            .map(|b| PyBuffer::wrap(py, b.clone(), &self.client))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }
}

#[pymethods]
impl PyExecutable {
    /// Binds `args` for repeated calls: one argument list per device, in
    /// `addressable_devices()` order (as for `execute_sharded`; one list for a single-device
    /// executable). Non-Buffer arguments are put on their list's device once, here. `donate`
    /// lists argument positions the execution may consume (then the call can run once).
    /// Every check of a call (types, shapes, placement, donation) runs here.
    #[pyo3(signature = (args, *, donate = None))]
    fn prepare(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyAny>,
        donate: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyPreparedCall> {
        let py = slf.py();
        let this = slf.get();
        let donate = donate_list(donate)?;
        let exe = this.rexe();
        let devices = exe.addressable_devices().pyerr()?;
        let all = this.collect_device_lists(py, args, &devices, "prepare")?;
        let refs: Vec<Vec<&rpjrt::Buffer>> = all
            .iter()
            .map(|l| l.iter().map(|b| b.get().rb()).collect())
            .collect();
        let inner = py.detach_call(|| exe.prepare(&refs, &donate)).pyerr()?;
        Ok(PyPreparedCall {
            inner: crate::notify::Held::new(inner),
            client: this.client_ref().clone_ref(py),
        })
    }
}

#[pymethods]
impl PyPreparedCall {
    /// Runs once with the bound arguments. With `wait=True` (the default) it returns once the
    /// execution has finished on every device (one wait for all of them, interruptible by
    /// Ctrl-C) and raises its error; with `wait=False` it returns at once (`CallOutputs.block_until_ready()`
    /// waits).
    #[pyo3(signature = (*, wait = true))]
    fn __call__(&self, py: Python<'_>, wait: bool) -> PyResult<PyCallOutputs> {
        let call: &rpjrt::PreparedCall = &self.inner;
        // One release of the GIL for the call and, mostly, the whole wait.
        let (inner, done) = py
            .detach_call(|| -> rpjrt::Result<_> {
                let outs = call.call()?;
                let done = !wait || outs.wait_timeout(SIGNAL_SLICE)?;
                Ok((outs, done))
            })
            .pyerr()?;
        if !done {
            wait_outputs(py, &inner)?;
        }
        Ok(PyCallOutputs {
            inner,
            client: self.client.clone_ref(py),
        })
    }

    /// The executable it runs.
    #[getter]
    fn executable(&self, py: Python<'_>) -> PyResult<Py<PyExecutable>> {
        PyExecutable::wrap(
            py,
            self.inner.executable().clone(),
            self.client.clone_ref(py),
        )
    }

    /// Number of device lists.
    #[getter]
    fn num_devices(&self) -> usize {
        self.inner.num_devices()
    }

    /// Number of arguments per device.
    #[getter]
    fn num_args(&self) -> usize {
        self.inner.num_args()
    }

    /// Argument `position` of device list `device`, as bound (the same buffer: deleting it
    /// makes later calls fail).
    fn argument(&self, py: Python<'_>, device: usize, position: usize) -> PyResult<Py<PyBuffer>> {
        let b = self.inner.argument(device, position).ok_or_else(|| {
            pyo3::exceptions::PyIndexError::new_err(format!(
                "no argument {position} of device list {device}: the call has {} device list(s) \
                 of {} argument(s)",
                self.inner.num_devices(),
                self.inner.num_args()
            ))
        })?;
        PyBuffer::wrap_shared(py, b, &self.client)
    }

    /// Visits its client (its own reference), so that a cycle through it and a Client's
    /// store is collectable.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.client)
    }

    fn __repr__(&self) -> String {
        format!(
            "rpjrt.PreparedCall({}: {} device(s) x {} argument(s){})",
            self.inner.executable().name(),
            self.inner.num_devices(),
            self.inner.num_args(),
            crate::client::gone_suffix(&self.client.get().inner)
        )
    }
}

#[pymethods]
impl PyCallOutputs {
    /// Number of outputs (per device).
    fn __len__(&self) -> usize {
        self.inner.num_outputs()
    }

    /// The shards of output `index` (negative counts from the end): one Buffer per device.
    fn __getitem__<'py>(&self, py: Python<'py>, index: isize) -> PyResult<Bound<'py, PyList>> {
        let n = self.inner.num_outputs() as isize;
        let j = if index < 0 { index + n } else { index };
        let shards = (j >= 0)
            .then(|| self.inner.output(j as usize))
            .flatten()
            .ok_or_else(|| {
                pyo3::exceptions::PyIndexError::new_err(format!(
                    "output index {index} is out of range for {n} output(s)"
                ))
            })?;
        self.wrap_all(py, shards.into_iter())
    }

    /// Number of devices the call ran on.
    #[getter]
    fn num_devices(&self) -> usize {
        self.inner.num_devices()
    }

    /// One output list per device (device order), as `Executable.execute_sharded` returns.
    fn per_device<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let lists = (0..self.inner.num_devices())
            .map(|d| self.wrap_all(py, self.inner.device(d).iter()))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, lists)
    }

    /// The outputs of device `device` (in device order).
    fn device<'py>(&self, py: Python<'py>, device: usize) -> PyResult<Bound<'py, PyList>> {
        if device >= self.inner.num_devices() {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "device index {device} is out of range for {} device(s)",
                self.inner.num_devices()
            )));
        }
        self.wrap_all(py, self.inner.device(device).iter())
    }

    /// Blocks until the execution has finished on every device (one wait for all of them,
    /// interruptible by Ctrl-C); raises the first failed device's error. Returns self.
    fn block_until_ready(slf: &Bound<'_, Self>) -> PyResult<Py<Self>> {
        wait_outputs(slf.py(), &slf.get().inner)?;
        Ok(slf.clone().unbind())
    }

    /// Visits its client (its own reference), so that a cycle through it and a Client's
    /// store is collectable.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.client)
    }

    fn __repr__(&self) -> String {
        format!(
            "rpjrt.CallOutputs({} device(s) x {} output(s){})",
            self.inner.num_devices(),
            self.inner.num_outputs(),
            crate::client::gone_suffix(&self.client.get().inner)
        )
    }
}
