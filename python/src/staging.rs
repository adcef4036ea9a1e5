//! The staging pool behind large `put` copies (`rpjrt::staging`): its figures, its bound
//! and release on demand.

use crate::detach::Detach;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Unmap the idle blocks of the staging pool and return the bytes released.
///
/// A ``put`` of 4 MiB or more (copying) goes through a warm staging block that returns to
/// a process-wide pool once its buffer is gone, so repeated puts of similar sizes copy at
/// ``memcpy`` speed. Blocks in use by live buffers are not affected.
#[pyfunction]
pub fn release_pooled_memory(py: Python<'_>) -> usize {
    py.detach_call(rpjrt::staging::release_pooled_memory)
}

/// What the staging pool holds and has done: ``limit``, ``pooled_bytes``,
/// ``pooled_blocks`` (idle, kept for reuse), ``in_use_bytes``, ``in_use_blocks`` (lent to
/// live buffers), ``hits`` (puts served warm), ``misses`` (new mappings),
/// ``released_bytes`` (unmapped by the bound or on demand).
#[pyfunction]
pub fn pooled_memory_stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let s = rpjrt::staging::stats();
    let d = PyDict::new(py);
    d.set_item("limit", s.limit)?;
    d.set_item("pooled_bytes", s.pooled_bytes)?;
    d.set_item("pooled_blocks", s.pooled_blocks)?;
    d.set_item("in_use_bytes", s.in_use_bytes)?;
    d.set_item("in_use_blocks", s.in_use_blocks)?;
    d.set_item("hits", s.hits)?;
    d.set_item("misses", s.misses)?;
    d.set_item("released_bytes", s.released_bytes)?;
    Ok(d)
}

/// Sets the bound on idle pooled bytes (0 turns pooling off); idle blocks above it are
/// unmapped at once (`rpjrt::staging::set_limit`).
#[pyfunction]
pub fn set_pooled_memory_limit(py: Python<'_>, nbytes: usize) {
    py.detach_call(|| rpjrt::staging::set_limit(nbytes))
}
