//! Sharded arrays: Shardy detection (rpjrt::sharding), mesh split/assemble and spec checks
//! (rpjrt_mesh). The Python-facing helpers (Mesh, shard, assemble, run_sharded) are in
//! rpjrt/sharding.py.

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList};
use rpjrt::{sharding, ElementType, Program};
use rpjrt_mesh::{HostShard, Mesh, PartitionSpec};

use crate::convert::dtype_from_py;
use crate::errors::{invalid, PyErrExt};
use crate::pybuf::HostView;

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

/// The C-contiguous bytes of a buffer-protocol object (a numpy array from the helpers in
/// rpjrt/sharding.py), read in place: no copy of the whole array is made.
fn host_bytes<'a>(view: &'a Option<HostView>, what: &str) -> PyResult<&'a [u8]> {
    view.as_ref()
        .and_then(HostView::contiguous_bytes)
        .ok_or_else(|| invalid(format!("{what} must be C-contiguous host data")))
}

/// A Python allocation of `n` bytes that failed (`MemoryError`) as rpjrt's
/// `ResourceExhaustedError` naming the size; other errors unchanged.
fn exhausted(py: Python<'_>, e: PyErr, n: usize, what: &str) -> PyErr {
    if e.is_instance_of::<pyo3::exceptions::PyMemoryError>(py)
        && !crate::errors::is_rpjrt_error(py, &e)
    {
        crate::errors::to_py(rpjrt::Error::ResourceExhausted(format!(
            "{what} needs a host allocation of {n} bytes, which cannot be made"
        )))
    } else {
        e
    }
}

/// Splits dense row-major host data (numpy's form: sub-byte types one element per byte;
/// any C-contiguous buffer) into one shard per mesh position, each a bytes object
/// allocated fallibly: memory running out is `ResourceExhaustedError` naming the size,
/// never an abort.
#[pyfunction]
pub fn _shard_split<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    dtype: &Bound<'py, PyAny>,
    dims: Vec<i64>,
    axes: Vec<(String, i64)>,
    device_ids: Vec<i64>,
    spec: PartitionSpec,
) -> PyResult<(Bound<'py, PyList>, Vec<i64>)> {
    let ty = dtype_from_py(dtype)?;
    let m = mesh(axes, device_ids)?;
    let view = HostView::get(data);
    let bytes = host_bytes(&view, "the array to split")?;
    let plan = rpjrt_mesh::split_plan(bytes.len(), byte_form(ty), &dims, &m, &spec).pyerr()?;
    let n = plan.shard_bytes();
    let list = PyList::empty(py);
    for k in 0..plan.shards() {
        // Each shard is written once, straight into its bytes object (with the GIL held,
        // so the source cannot change under the copy).
        let shard = PyBytes::new_with(py, n, |out| plan.write_shard(bytes, k, out).pyerr())
            .map_err(|e| exhausted(py, e, n, &format!("shard {k} of {}", plan.shards())))?;
        list.append(shard)?;
    }
    Ok((list, plan.shard_dims().to_vec()))
}

/// Reassembles dense row-major host data from one shard per mesh position, each given as
/// `(data, dtype, dims)` (any C-contiguous buffer, read in place) so that the core
/// refuses a shard of another type or shape. The result is a bytearray (writable, for
/// `np.frombuffer`) allocated fallibly: `ResourceExhaustedError` naming the size.
#[pyfunction]
pub fn _shard_assemble<'py>(
    py: Python<'py>,
    shards: Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>, Vec<i64>)>,
    dtype: &Bound<'py, PyAny>,
    dims: Vec<i64>,
    axes: Vec<(String, i64)>,
    device_ids: Vec<i64>,
    spec: PartitionSpec,
) -> PyResult<Bound<'py, PyByteArray>> {
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
    let views: Vec<Option<HostView>> = shards.iter().map(|(d, _, _)| HostView::get(d)).collect();
    let mut refs: Vec<HostShard> = Vec::with_capacity(shards.len());
    for (k, ((v, (_, _, d)), t)) in views.iter().zip(&shards).zip(&types).enumerate() {
        refs.push(HostShard::new(
            host_bytes(v, &format!("shard {k}"))?,
            as_moved(*t),
            d,
        ));
    }
    // Every check before the allocation: a wrong call is refused, not sized.
    let total = rpjrt_mesh::assemble_bytes(&refs, array_ty, &dims, &m, &spec).pyerr()?;
    PyByteArray::new_with(py, total, |out| {
        rpjrt_mesh::assemble_into(&refs, array_ty, &dims, &m, &spec, out).pyerr()
    })
    .map_err(|e| exhausted(py, e, total, "the assembled array"))
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

/// The global shapes of an executable's parameters and results, from the MLIR text it was
/// compiled from (`rpjrt_mesh::signature_dims`): for each, its dims or None where not a
/// static tensor; None when rpjrt did not see that text (a loaded executable, bytecode,
/// HLO).
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn _global_signature(
    exe: &crate::executable::PyExecutable,
) -> Option<(Vec<Option<Vec<i64>>>, Vec<Option<Vec<i64>>>)> {
    rpjrt_mesh::signature_dims(exe.rexe().source_signature()?)
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
