//! Sharded arrays: Shardy detection (rpjrt::sharding), mesh split/assemble and spec checks
//! (rpjrt_mesh). The Python-facing helpers (Mesh, shard, assemble, run_sharded) are in
//! rpjrt/sharding.py.

use crate::detach::Detach;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use rpjrt::{sharding, ElementType, Program};
use rpjrt_mesh::{HostShard, Mesh, PartitionSpec};

use crate::convert::dtype_from_py;
use crate::errors::PyErrExt;

fn mesh(axes: Vec<(String, i64)>, device_ids: Vec<i64>) -> PyResult<Mesh> {
    // A negative size goes in as 0, which the core refuses naming the axis (as a usize
    // argument it was Python's OverflowError about C types).
    let axes: Vec<(&str, usize)> = axes
        .iter()
        .map(|(n, s)| (n.as_str(), usize::try_from(*s).unwrap_or(0)))
        .collect();
    Mesh::new(&axes, &device_ids).pyerr()
}

/// Whether a StableHLO program (text or bytecode) uses the Shardy dialect.
#[pyfunction]
pub fn _uses_shardy(program: &Bound<'_, PyAny>) -> PyResult<bool> {
    let code: Vec<u8> = match program.extract::<String>() {
        Ok(s) => s.into_bytes(),
        Err(_) => program.extract::<Vec<u8>>()?,
    };
    Ok(sharding::uses_shardy(&Program::mlir(code)))
}

/// Splits dense row-major host bytes (numpy's form: sub-byte types one element per byte)
/// into one shard per mesh position.
#[pyfunction]
pub fn _shard_split<'py>(
    py: Python<'py>,
    data: &[u8],
    dtype: &Bound<'py, PyAny>,
    dims: Vec<i64>,
    axes: Vec<(String, i64)>,
    device_ids: Vec<i64>,
    spec: PartitionSpec,
) -> PyResult<(Bound<'py, PyList>, Vec<i64>)> {
    let ty = dtype_from_py(dtype)?;
    let m = mesh(axes, device_ids)?;
    let (shards, shard_dims) = py
        .detach_call(|| rpjrt_mesh::split(data, byte_form(ty), &dims, &m, &spec))
        .pyerr()?;
    let items = shards.iter().map(|s| PyBytes::new(py, s));
    Ok((PyList::new(py, items)?, shard_dims))
}

/// Reassembles dense row-major host bytes from one shard per mesh position, each given as
/// `(bytes, dtype, dims)` so that the core refuses a shard of another type or shape.
#[pyfunction]
pub fn _shard_assemble<'py>(
    py: Python<'py>,
    shards: Vec<(Vec<u8>, Bound<'py, PyAny>, Vec<i64>)>,
    dtype: &Bound<'py, PyAny>,
    dims: Vec<i64>,
    axes: Vec<(String, i64)>,
    device_ids: Vec<i64>,
    spec: PartitionSpec,
) -> PyResult<Bound<'py, PyBytes>> {
    let ty = dtype_from_py(dtype)?;
    let m = mesh(axes, device_ids)?;
    let types = shards
        .iter()
        .map(|(_, t, _)| dtype_from_py(t))
        .collect::<PyResult<Vec<_>>>()?;
    // Shards all of the array's type move as bytes when it is sub-byte (see `byte_form`);
    // a shard of another type is left for the core to name.
    let same = types.iter().all(|&t| t == ty);
    let as_moved = |t: ElementType| if same { byte_form(t) } else { t };
    let array_ty = as_moved(ty);
    let refs: Vec<HostShard> = shards
        .iter()
        .zip(&types)
        .map(|((data, _, d), t)| HostShard::new(data, as_moved(*t), d))
        .collect();
    let full = py
        .detach_call(|| rpjrt_mesh::assemble(&refs, array_ty, &dims, &m, &spec))
        .pyerr()?;
    Ok(PyBytes::new(py, &full))
}

/// The global dims of an array whose shards have `shard_dims` (`rpjrt_mesh::global_dims`).
#[pyfunction]
pub fn _shard_global_dims(
    shard_dims: Vec<i64>,
    axes: Vec<(String, i64)>,
    device_ids: Vec<i64>,
    spec: PartitionSpec,
) -> PyResult<Vec<i64>> {
    let m = mesh(axes, device_ids)?;
    rpjrt_mesh::global_dims(&m, &spec, &shard_dims).pyerr()
}

/// Checks `spec` against an executable's `sharding` of a value of `rank` dimensions
/// (`rpjrt_mesh::check_spec`); InvalidArgumentError saying where they differ.
#[pyfunction]
pub fn _shard_check(
    sharding: &crate::aot::PyOpSharding,
    rank: usize,
    axes: Vec<(String, i64)>,
    device_ids: Vec<i64>,
    spec: PartitionSpec,
) -> PyResult<()> {
    let m = mesh(axes, device_ids)?;
    rpjrt_mesh::check_spec(&m, &spec, rank, &sharding.inner).pyerr()
}

/// The type a host array's elements move as when split or assembled: numpy's form holds a
/// sub-byte type (int4, uint2, float4 ...) one element per byte, so its elements move as
/// bytes; the core's own dense form packs them.
fn byte_form(t: ElementType) -> ElementType {
    if t.is_sub_byte() {
        ElementType::U8
    } else {
        t
    }
}
