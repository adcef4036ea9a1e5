//! Raw copies to host that run while Python does other work (conversion only; the logic is
//! `rpjrt::external`). Python-side sugar is `rpjrt.transfer.copy_raw_to_host_async`.

use crate::detach::Detach;
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::buffer::PyBuffer;
use crate::errors::{invalid, PyErrExt};

/// A raw copy to host in flight; `wait()` gives the bytes once.
#[pyclass(frozen, weakref, name = "RawCopy", module = "rpjrt")]
pub struct PyRawCopy {
    /// The copy and its source buffer (whose contents it waits for), until waited for.
    inner: Mutex<Option<(rpjrt::RawCopy, rpjrt::Buffer)>>,
    size: usize,
}

fn already_waited() -> PyErr {
    invalid("this raw copy was already waited for")
}

impl PyRawCopy {
    fn take(&self) -> PyResult<(rpjrt::RawCopy, rpjrt::Buffer)> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(already_waited)
    }

    /// The source buffer (shared), while the copy is not waited for yet.
    fn source(&self) -> PyResult<rpjrt::Buffer> {
        match &*self.inner.lock().unwrap_or_else(|p| p.into_inner()) {
            Some((_, b)) => Ok(b.clone()),
            None => Err(already_waited()),
        }
    }
}

impl Drop for PyRawCopy {
    fn drop(&mut self) {
        let pending = self
            .inner
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(pending) = pending {
            if !pending.0.is_ready().unwrap_or(true) {
                // Dropping an unfinished copy waits for it; never with the GIL held.
                std::thread::spawn(move || drop(pending));
            } else {
                // It may hold the last reference to its source buffer.
                crate::notify::drop_detached(pending);
            }
        }
    }
}

#[pymethods]
impl PyRawCopy {
    /// Waits for the copy (without the GIL) and returns the bytes. The wait for the
    /// source buffer's contents answers Ctrl-C; the copy is then still there to wait for.
    fn wait<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let source = self.source()?;
        let settled = crate::transfer::wait_settled(py, &source);
        // The last reference to the source may be this one: never dropped with the GIL.
        crate::notify::drop_detached(source);
        settled?;
        let (copy, source) = self.take()?;
        let out = py
            .detach_call(move || {
                let out = copy.wait();
                drop(source);
                out
            })
            .pyerr()?;
        Ok(PyBytes::new(py, &out))
    }

    /// Whether the copy has finished; True once waited for.
    #[getter]
    fn ready(&self) -> PyResult<bool> {
        match &*self.inner.lock().unwrap_or_else(|p| p.into_inner()) {
            Some((c, _)) => c.is_ready().pyerr(),
            None => Ok(true),
        }
    }

    fn __repr__(&self) -> String {
        let state = match self.ready() {
            Ok(true) => "done",
            Ok(false) => "pending",
            Err(_) => "unknown",
        };
        format!("rpjrt.RawCopy({} bytes, {state})", self.size)
    }
}

/// Starts copying `size` bytes from byte `offset` of the buffer's on-device form; the
/// returned copy's `wait()` gives them.
#[pyfunction]
pub fn _copy_raw_to_host_async(
    py: Python<'_>,
    buffer: &Bound<'_, PyBuffer>,
    offset: usize,
    size: usize,
) -> PyResult<PyRawCopy> {
    let b = buffer.get();
    b.check_not_deleted()?;
    let copy = py
        .detach_call(|| b.rb().copy_raw_to_host_async(offset, size))
        .pyerr()?;
    Ok(PyRawCopy {
        inner: Mutex::new(Some((copy, b.rb().clone()))),
        size,
    })
}
