//! Compile once: `Executable.serialize`, `Client.load`, the compile cache (`rpjrt.Cache`),
//! introspection, StableHLO versions and topologies. Conversion only; the logic is in the
//! rpjrt crate (`aot`, `cache`, `introspect`, `stablehlo`, `topology`).

use crate::detach::Detach;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::client::{PyClient, PyPlugin};
use crate::convert::{type_name, value_to_py, Conversion};
use crate::errors::{invalid, PyErrExt};
use crate::executable::PyExecutable;

/// When compiling `program` failed because the plugin's StableHLO parser refused its text
/// (`rpjrt::is_text_parse_refusal`), serializes the text as a portable artifact for the
/// plugin's StableHLO version with jaxlib (`rpjrt._stablehlo.to_portable`) and compiles that
/// with `compile` (GIL released); any other result, or no serializer, is returned as it was.
pub fn retry_as_portable(
    py: Python<'_>,
    client: &rpjrt::Client,
    program: &rpjrt::Program,
    result: rpjrt::Result<rpjrt::Executable>,
    compile: impl Fn(&rpjrt::Program) -> rpjrt::Result<rpjrt::Executable> + Sync,
) -> PyResult<rpjrt::Result<rpjrt::Executable>> {
    let err = match result {
        Err(e) if rpjrt::is_text_parse_refusal(program, &e) => e,
        other => return Ok(other),
    };
    let (rpjrt::Program::Mlir(code), Some(target)) = (program, client.plugin().stablehlo_target())
    else {
        return Ok(Err(err));
    };
    let Ok(text) = std::str::from_utf8(code) else {
        return Ok(Err(err));
    };
    // Python code (jaxlib's) that rpjrt calls: see `detach::calling_python`.
    let artifact = crate::detach::calling_python(py, || {
        py.import("rpjrt._stablehlo")?
            .call_method1("to_portable", (text, &target))
    })?;
    if artifact.is_none() {
        return Ok(Err(err));
    }
    let artifact = rpjrt::Program::mlir(artifact.cast::<PyBytes>()?.as_bytes().to_vec());
    Ok(py.detach_call(|| compile(&artifact)))
}

/// `program`, text holding CHLO ops (`chlo.digamma`, `chlo.polygamma`, ...), with them
/// legalized to StableHLO by jaxlib's code, as JAX does before a plugin sees a program: a
/// portable artifact for the plugin's StableHLO version (`rpjrt._stablehlo.legalize_chlo`).
/// The plugin's own decomposition may be older and give other values (digamma(0) is -inf
/// there, NaN in JAX). `None`, the text compiled as it is, for text without `chlo.` (jaxlib
/// is not imported then), without jaxlib, with `RPJRT_LEGALIZE_CHLO=0`, or when jaxlib
/// cannot serialize it.
pub fn legalize_chlo(
    py: Python<'_>,
    client: &rpjrt::Client,
    program: &rpjrt::Program,
) -> PyResult<Option<rpjrt::Program>> {
    let rpjrt::Program::Mlir(code) = program else {
        return Ok(None);
    };
    let text = std::str::from_utf8(code)
        .ok()
        .filter(|t| t.contains("chlo."));
    let (Some(text), Some(target)) = (text, client.plugin().stablehlo_target()) else {
        return Ok(None);
    };
    // Python code (jaxlib's) that rpjrt calls: see `detach::calling_python`.
    let artifact = crate::detach::calling_python(py, || {
        py.import("rpjrt._stablehlo")?
            .call_method1("legalize_chlo", (text, &target))
    })?;
    if artifact.is_none() {
        return Ok(None);
    }
    let bytes = artifact.cast::<PyBytes>()?.as_bytes().to_vec();
    Ok(Some(rpjrt::Program::mlir(bytes)))
}

/// Bytes from `bytes`, `bytearray`, `memoryview` or a path-like naming a file (read
/// without the GIL).
fn data_bytes(data: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    data_or_file(data, |p| rpjrt::read_regular_file(p))
}

/// [`data_bytes`] of a serialized OpSharding: a file is read only up to its own bound
/// (`rpjrt_cli::common::MAX_SHARDING_BYTES`, or `RPJRT_MAX_FILE_BYTES`).
fn sharding_bytes(data: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    data_or_file(data, |p| {
        use rpjrt_cli::common as c;
        c::read_regular_file_at_most(p, c::MAX_SHARDING_BYTES, "a serialized OpSharding")
    })
}

/// [`data_bytes`] of an rpjrt artifact: a file is read whole only once its head shows it
/// is one (`rpjrt::Artifact::read_file`).
fn artifact_bytes(data: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    data_or_file(data, |p| rpjrt::Artifact::read_file(p))
}

fn data_or_file(
    data: &Bound<'_, PyAny>,
    read: impl FnOnce(&std::path::Path) -> rpjrt::Result<Vec<u8>> + Send,
) -> PyResult<Vec<u8>> {
    if let Ok(b) = data.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if data.is_instance_of::<PyString>() {
        return Err(invalid(
            "data must be bytes (an artifact), not str; read the file first or pass a pathlib.Path",
        ));
    }
    let py = data.py();
    let path_like = py.import("os")?.getattr("PathLike")?;
    if data.is_instance(&path_like)? {
        // Its `__fspath__` is Python code rpjrt calls (see `detach::calling_python`).
        let p: std::path::PathBuf = crate::detach::calling_python(py, || data.extract())?;
        return py.detach_call(|| read(&p)).pyerr();
    }
    // Only the buffer protocol (not `bytes(obj)`, which makes `bytes(10**12)` a terabyte of
    // zeros from an int).
    let memoryview = py.import("builtins")?.getattr("memoryview")?;
    let refusal = || {
        invalid(format!(
            "data must be bytes-like or a path, not {}",
            type_name(data)
        ))
    };
    // Its `__bytes__` (or buffer export) is Python code rpjrt calls (`calling_python`).
    let bytes = crate::detach::calling_python(py, || -> PyResult<_> {
        Ok(match data.call_method0("__bytes__").or_none()? {
            Some(b) => b,
            None => memoryview
                .call1((data,))
                .and_then(|view| view.call_method0("tobytes"))
                .or_refuse(refusal)?,
        })
    })?;
    Ok(bytes
        .cast::<PyBytes>()
        .map_err(|_| refusal())?
        .as_bytes()
        .to_vec())
}

fn target_dict<'py>(py: Python<'py>, t: &rpjrt::ArtifactTarget) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in t.fields() {
        if k == "device_count" {
            d.set_item(k, t.device_count)?;
        } else {
            d.set_item(k, v)?;
        }
    }
    Ok(d)
}

/// Emits each pending cache warning once as a Python `RuntimeWarning`.
pub fn emit_cache_warnings(py: Python<'_>, cache: &rpjrt::Cache) -> PyResult<()> {
    let pending = cache.take_warnings();
    if pending.is_empty() {
        return Ok(());
    }
    let warnings = py.import("warnings")?;
    let cat = py.get_type::<pyo3::exceptions::PyRuntimeWarning>();
    for w in pending {
        warnings.call_method1("warn", (w, cat.clone(), 2))?;
    }
    Ok(())
}

/// A persistent compile-cache directory (atomic writes, shared by processes, LRU bound).
#[pyclass(frozen, weakref, name = "Cache", module = "rpjrt")]
pub struct PyCache {
    pub inner: rpjrt::Cache,
}

fn entry_dict<'py>(py: Python<'py>, e: &rpjrt::CacheEntry) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("key", &e.key)?;
    d.set_item("path", e.path.as_os_str())?;
    d.set_item("bytes", e.size)?;
    let t = e
        .last_used
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    d.set_item("last_used", t)?;
    d.set_item("compile_ms", e.compile_ms)?;
    match &e.target {
        Some(t) => d.set_item("target", target_dict(py, t)?)?,
        None => d.set_item("target", py.None())?,
    }
    d.set_item("error", e.error.clone())?;
    Ok(d)
}

#[pymethods]
impl PyCache {
    #[new]
    #[pyo3(signature = (dir, max_bytes = None))]
    fn new(dir: &Bound<'_, PyAny>, max_bytes: Option<&Bound<'_, PyAny>>) -> PyResult<PyCache> {
        let dir = crate::convert::path_arg(dir, "the cache directory")?;
        let max_bytes = match max_bytes.filter(|m| !m.is_none()) {
            None => None,
            Some(m) => match crate::convert::int_arg(m, "max_bytes")? {
                n if n < 0 => {
                    return Err(invalid(format!(
                        "max_bytes is a size in bytes (>= 0), not {n}"
                    )))
                }
                n => Some(n as u64),
            },
        };
        Ok(PyCache {
            inner: rpjrt::Cache::new(dir, max_bytes).pyerr()?,
        })
    }

    /// The cache named by RPJRT_CACHE_DIR (and RPJRT_CACHE_MAX_BYTES), or None.
    #[staticmethod]
    fn from_env() -> PyResult<Option<PyCache>> {
        Ok(rpjrt::Cache::from_env()
            .pyerr()?
            .map(|inner| PyCache { inner }))
    }

    /// The cache's directory.
    #[getter]
    fn dir(&self) -> std::ffi::OsString {
        self.inner.dir().as_os_str().to_owned()
    }

    /// The bound on the directory's size in bytes, or None for no bound.
    #[getter]
    fn max_bytes(&self) -> Option<u64> {
        self.inner.max_bytes()
    }

    /// hits, misses, corrupt, writes, evictions, bytes_read, bytes_written, time_saved,
    /// compile_time, hit_time and hit_plugin_time (seconds; the plugin's deserialization
    /// within the hits), counted by this object.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("hits", s.hits)?;
        d.set_item("misses", s.misses)?;
        d.set_item("corrupt", s.corrupt)?;
        d.set_item("writes", s.writes)?;
        d.set_item("evictions", s.evictions)?;
        d.set_item("bytes_read", s.bytes_read)?;
        d.set_item("bytes_written", s.bytes_written)?;
        d.set_item("time_saved", s.time_saved.as_secs_f64())?;
        d.set_item("compile_time", s.compile_time.as_secs_f64())?;
        d.set_item("hit_time", s.hit_time.as_secs_f64())?;
        d.set_item("hit_plugin_time", s.hit_plugin_time.as_secs_f64())?;
        Ok(d)
    }

    /// Sets every counter of stats() back to zero.
    fn reset_stats(&self) {
        self.inner.reset_stats()
    }

    /// Every entry, most recently used first, described from its header alone.
    fn entries<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let entries = py.detach_call(|| self.inner.entries()).pyerr()?;
        let items = entries
            .iter()
            .map(|e| entry_dict(py, e))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// The entry with `key` (or a unique key prefix), read whole and verified.
    fn info<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyDict>> {
        let e = py.detach_call(|| self.inner.info(key)).pyerr()?;
        entry_dict(py, &e)
    }

    /// Removes every entry (and stray temporary files); returns how many entries went.
    fn clear(&self, py: Python<'_>) -> PyResult<usize> {
        py.detach_call(|| self.inner.clear()).pyerr()
    }

    /// Removes least recently used entries until the directory fits max_bytes;
    /// returns how many were removed (none without a bound).
    fn evict(&self, py: Python<'_>) -> PyResult<usize> {
        py.detach_call(|| self.inner.evict()).pyerr()
    }

    /// Total bytes of the entries in the directory.
    fn total_bytes(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach_call(|| self.inner.total_bytes()).pyerr()
    }

    /// Warnings not yet taken (each problem is reported once per cache object).
    fn take_warnings(&self) -> Vec<String> {
        self.inner.take_warnings()
    }

    fn __repr__(&self) -> String {
        format!(
            "rpjrt.Cache({:?}, max_bytes={})",
            self.inner.dir().display().to_string(),
            self.inner
                .max_bytes()
                .map_or("None".to_string(), |m| m.to_string())
        )
    }
}

/// A plugin's description of a set of devices (for compiling without them).
#[pyclass(frozen, weakref, name = "Topology", module = "rpjrt")]
pub struct PyTopology {
    inner: rpjrt::Topology,
}

#[pymethods]
impl PyTopology {
    /// The platform name of the topology, e.g. "cpu".
    #[getter]
    fn platform_name(&self) -> String {
        self.inner.platform_name().to_string()
    }
    /// The platform version of the topology.
    #[getter]
    fn platform_version(&self) -> String {
        self.inner.platform_version().to_string()
    }
    /// `(id, kind)` of each device it describes.
    fn devices(&self) -> Vec<(i32, String)> {
        self.inner.devices().to_vec()
    }
    /// The plugin's fingerprint of the topology, or None where it gives none.
    fn fingerprint(&self) -> Option<u64> {
        self.inner.fingerprint()
    }
    /// The plugin's serialized form of the topology.
    fn serialize<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let b = py.detach_call(|| self.inner.serialize()).pyerr()?;
        Ok(PyBytes::new(py, &b))
    }
    /// Compile without devices; returns an artifact for Client.load.
    #[pyo3(signature = (program, *, format = None))]
    fn compile<'py>(
        &self,
        py: Python<'py>,
        program: &Bound<'py, PyAny>,
        format: Option<&str>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let prog = program_from_py(program, format)?;
        let b = py
            .detach_call(|| self.inner.compile(&prog, &rpjrt::CompileOptions::default()))
            .pyerr()?;
        Ok(PyBytes::new(py, &b))
    }
}

/// XLA's OpSharding of a parameter or output; str() is XLA's short form
/// (`"{replicated}"`, `"{maximal device=0}"`, `"{devices=[2,1]<=[2]}"`).
#[pyclass(frozen, eq, hash, name = "OpSharding", module = "rpjrt")]
#[derive(PartialEq, Hash)]
pub struct PyOpSharding {
    pub(crate) inner: rpjrt::OpSharding,
}

#[pymethods]
impl PyOpSharding {
    /// Decodes a serialized OpSharding proto (InvalidArgumentError when it is not one).
    #[staticmethod]
    fn from_bytes(data: &Bound<'_, PyAny>) -> PyResult<PyOpSharding> {
        let b = sharding_bytes(data)?;
        Ok(PyOpSharding {
            inner: rpjrt::OpSharding::decode(&b).pyerr()?,
        })
    }
    /// The sharding's kind: "replicated", "maximal", "tuple", "other", "manual",
    /// "unknown" or "unreduced".
    #[getter]
    #[pyo3(name = "type")]
    fn type_name(&self) -> &'static str {
        self.inner.kind.name()
    }
    /// The shape of the tile assignment.
    #[getter]
    fn tile_assignment_dimensions(&self) -> Vec<i64> {
        self.inner.tile_assignment_dimensions.clone()
    }
    /// Devices listed explicitly (empty for an iota assignment; see devices()).
    #[getter]
    fn tile_assignment_devices(&self) -> Vec<i64> {
        self.inner.tile_assignment_devices.clone()
    }
    /// The reshape dimensions of an iota tile assignment (empty otherwise).
    #[getter]
    fn iota_reshape_dims(&self) -> Vec<i64> {
        self.inner.iota_reshape_dims.clone()
    }
    /// The transpose permutation of an iota tile assignment (empty otherwise).
    #[getter]
    fn iota_transpose_perm(&self) -> Vec<i64> {
        self.inner.iota_transpose_perm.clone()
    }
    /// Whether the last tile dimension is replicated.
    #[getter]
    fn replicate_on_last_tile_dim(&self) -> bool {
        self.inner.replicate_on_last_tile_dim
    }
    /// The kinds of the trailing tile dimensions (e.g. "replicated", "manual").
    #[getter]
    fn last_tile_dims(&self) -> Vec<&'static str> {
        self.inner.last_tile_dims.iter().map(|t| t.name()).collect()
    }
    /// The sharding of each element of a tuple sharding.
    #[getter]
    fn tuple_shardings(&self) -> Vec<PyOpSharding> {
        self.inner
            .tuple_shardings
            .iter()
            .map(|t| PyOpSharding { inner: t.clone() })
            .collect()
    }
    /// ("shard_as" or "shard_like", group id) of a shard group, or None.
    #[getter]
    fn shard_group(&self) -> Option<(&'static str, i64)> {
        self.inner
            .shard_group
            .map(|g| (if g.like { "shard_like" } else { "shard_as" }, g.id))
    }
    /// Whether every device holds the whole value.
    #[getter]
    fn is_replicated(&self) -> bool {
        self.inner.is_replicated()
    }
    /// The tile assignment's device ids in row-major order, an iota expanded.
    fn devices(&self) -> Vec<i64> {
        self.inner.devices()
    }
    fn __str__(&self) -> String {
        self.inner.to_string()
    }
    fn __repr__(&self) -> String {
        format!("OpSharding({})", self.inner)
    }
}

fn program_from_py(program: &Bound<'_, PyAny>, format: Option<&str>) -> PyResult<rpjrt::Program> {
    if let Some(path) = as_path(program)? {
        return rpjrt::Program::read(path, format).pyerr();
    }
    let code = if let Ok(s) = program.cast::<PyString>() {
        program_text(s)?
    } else {
        data_bytes(program)?
    };
    program_from_code(code, format)
}

/// The bytes of program text given as a `str`, refusing one that is a file's name: a
/// program's text always has a `{`, and a `str` is never read as a path.
pub(crate) fn program_text(s: &Bound<'_, PyString>) -> PyResult<Vec<u8>> {
    let text = s.to_str()?;
    let one_word = !text.contains('{') && !text.trim().contains(char::is_whitespace);
    let suffix = [
        ".mlir",
        ".mlirbc",
        ".stablehlo",
        ".hlo",
        ".pb",
        ".hlopb",
        ".txt",
    ]
    .iter()
    .any(|x| text.trim().ends_with(x));
    if one_word && !text.trim().is_empty() && (suffix || std::path::Path::new(text).is_file()) {
        return Err(invalid(format!(
            "{text:?} is a file name, but a str is taken as the program's text: pass \
             pathlib.Path({text:?}) to compile the file"
        )));
    }
    Ok(text.as_bytes().to_vec())
}

/// `obj` as a path when it is an `os.PathLike` (str is program text, never a path).
pub(crate) fn as_path(obj: &Bound<'_, PyAny>) -> PyResult<Option<std::path::PathBuf>> {
    let path_like = obj.py().import("os")?.getattr("PathLike")?;
    if obj.is_instance(&path_like)? {
        // Its `__fspath__` is Python code rpjrt calls (see `detach::calling_python`).
        return Ok(Some(crate::detach::calling_python(obj.py(), || {
            obj.extract()
        })?));
    }
    Ok(None)
}

/// A program's bytes as the core tells their format (`rpjrt::ProgramFile::detect`, the
/// rule the CLI uses too); an rpjrt artifact is refused: it is loaded, not compiled.
pub(crate) fn program_from_code(code: Vec<u8>, format: Option<&str>) -> PyResult<rpjrt::Program> {
    match rpjrt::ProgramFile::detect(code, None, format).pyerr()? {
        rpjrt::ProgramFile::Program(p) => Ok(p),
        rpjrt::ProgramFile::Artifact(_) => Err(invalid(
            "these bytes are an rpjrt artifact, not a program: load them with Client.load",
        )),
        rpjrt::ProgramFile::Executable(_) => Err(invalid(
            "these bytes are a plugin's serialized executable, not a program: load them with \
             Client.load(data, bare=True)",
        )),
    }
}

#[pymethods]
impl PyExecutable {
    /// An rpjrt artifact (envelope + the plugin's blob); load it with `Client.load`.
    fn serialize<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let exe = self.rexe().clone();
        let b = py.detach_call(|| exe.serialize()).pyerr()?;
        Ok(PyBytes::new(py, &b))
    }

    /// The plugin's own serialized executable, without an envelope.
    fn serialize_bare<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let exe = self.rexe().clone();
        let b = py.detach_call(|| exe.serialize_bare()).pyerr()?;
        Ok(PyBytes::new(py, &b))
    }

    /// (format, bytes) of the optimized program the plugin compiled.
    fn optimized_program<'py>(&self, py: Python<'py>) -> PyResult<(String, Bound<'py, PyBytes>)> {
        let (format, code) = self.rexe().optimized_program().pyerr()?;
        Ok((format, PyBytes::new(py, &code)))
    }

    /// Optimized HLO text; UnsupportedError where the plugin gives only a binary form.
    fn optimized_hlo_text(&self) -> PyResult<String> {
        self.rexe().optimized_hlo_text().pyerr()
    }

    /// The plugin's cost analysis of the program (`flops`, `bytes accessed`, ...).
    fn cost_analysis<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.rexe().cost_analysis().pyerr()? {
            d.set_item(k, value_to_py(py, &v)?)?;
        }
        Ok(d)
    }

    /// The compiled program's memory statistics, with the fields the plugin's version has.
    fn compiled_memory_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.rexe().compiled_memory_stats().pyerr()?;
        let d = PyDict::new(py);
        for (k, v) in s.fields() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// The memory kind of each output (`device`, `pinned_host`, ...).
    fn output_memory_kinds(&self) -> PyResult<Vec<String>> {
        self.rexe().output_memory_kinds().pyerr()
    }

    /// The sharding of each parameter: the plugin's (Shardings extension), else what the
    /// SPMD partitioner recorded in the compiled program; UnsupportedError when neither says.
    fn parameter_shardings(&self) -> PyResult<Vec<PyOpSharding>> {
        let s = self.rexe().parameter_shardings().pyerr()?;
        Ok(s.into_iter().map(|inner| PyOpSharding { inner }).collect())
    }

    /// The sharding of each output, from the plugin or the compiled program as
    /// parameter_shardings(); UnsupportedError when neither says.
    fn output_shardings(&self) -> PyResult<Vec<PyOpSharding>> {
        let s = self.rexe().output_shardings().pyerr()?;
        Ok(s.into_iter().map(|inner| PyOpSharding { inner }).collect())
    }

    /// minor_to_major of each parameter's layout (Layouts extension).
    fn parameter_layouts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        layouts_py(py, self.rexe().parameter_layouts().pyerr()?)
    }

    /// minor_to_major of each output's layout (Layouts extension).
    fn output_layouts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        layouts_py(py, self.rexe().output_layouts().pyerr()?)
    }

    /// The serialized CompileOptionsProto it was built with.
    fn compile_options<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let b = self.rexe().compile_options_bytes().pyerr()?;
        Ok(PyBytes::new(py, &b))
    }
}

fn layouts_py<'py>(
    py: Python<'py>,
    ls: Vec<rpjrt::CompiledLayout>,
) -> PyResult<Bound<'py, PyList>> {
    let items = ls
        .into_iter()
        .map(|l| -> PyResult<Bound<'py, PyAny>> {
            Ok(match l.minor_to_major {
                Some(m) => PyTuple::new(py, m)?.into_any(),
                None => py.None().into_bound(py),
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

#[pymethods]
impl PyClient {
    /// Load an artifact written by Executable.serialize(), checked completely (magic,
    /// length, checksum, target) before the plugin sees it; a mismatch names both sides.
    /// bare=True loads a plugin's own serialized executable with no checks: a bare blob
    /// does not name the plugin or version that wrote it, so one from another plugin may
    /// load and compute wrong values without an error (use it only for bytes this same
    /// plugin serialized with serialize_bare()). device_ordinal overrides are checked as
    /// compile options are (-1 or a device of this client). overrides
    /// (num_replicas, num_partitions, portable, use_spmd_partitioning, device_ordinal)
    /// replace the artifact's compile options where the plugin allows it (PJRT 0.71+).
    #[pyo3(signature = (data, *, bare = false, overrides = None))]
    fn load(
        slf: &Bound<'_, Self>,
        data: &Bound<'_, PyAny>,
        bare: bool,
        overrides: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyExecutable>> {
        let py = slf.py();
        let bytes = if bare {
            data_bytes(data)?
        } else {
            artifact_bytes(data)?
        };
        let overrides = match overrides.filter(|o| !o.is_none()) {
            None => None,
            Some(_) if bare => {
                return Err(invalid(
                    "overrides need an rpjrt artifact: they cannot be combined with bare=True",
                ))
            }
            Some(o) => Some(overrides_from_py(o)?),
        };
        let client = slf.get().inner.clone();
        let exe = py
            .detach_call(|| {
                if bare {
                    client.load_bare(&bytes)
                } else {
                    client.load(&bytes, overrides.as_ref())
                }
            })
            .pyerr()?;
        PyExecutable::wrap(py, exe, slf.clone().unbind())
    }

    /// The compile cache compile() uses (settable: a Cache, a directory, or None).
    #[getter]
    fn cache(&self) -> Option<PyCache> {
        self.inner.cache().map(|inner| PyCache { inner })
    }

    #[setter]
    fn set_cache(&self, cache: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let c = match cache.filter(|c| !c.is_none()) {
            None => None,
            Some(c) => Some(cache_from_py(c)?),
        };
        self.inner.set_cache(c);
        Ok(())
    }

    /// The topology of the client's devices (UnsupportedError where the plugin has none).
    fn topology(&self, py: Python<'_>) -> PyResult<PyTopology> {
        let c = self.inner.clone();
        let inner = py.detach_call(|| c.topology()).pyerr()?;
        Ok(PyTopology { inner })
    }

    /// What the artifacts this client writes are built for.
    fn artifact_target<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let t = rpjrt::ArtifactTarget::of_client(&self.inner).pyerr()?;
        target_dict(py, &t)
    }
}

/// Compile options that replace an artifact's own when loading it: a mapping with the keys
/// `num_replicas`, `num_partitions`, `portable`, `use_spmd_partitioning`, `device_ordinal`.
fn overrides_from_py(o: &Bound<'_, PyAny>) -> PyResult<rpjrt::CompileOptions> {
    let mut opts = rpjrt::CompileOptions::default();
    for (k, v) in crate::convert::option_items(o, "overrides", "override")? {
        let bad = |what: &str| invalid(format!("override {k:?} must be {what}"));
        // A bool is an int to Python, but True replicas is a mistake, not 1.
        let int = |what: &str| match v.is_instance_of::<pyo3::types::PyBool>() {
            true => Err(bad(what)),
            // Its `__index__` is Python code rpjrt calls (see `detach::calling_python`).
            false => {
                crate::detach::calling_python(o.py(), || v.extract::<i64>()).or_refuse(|| bad(what))
            }
        };
        let count = |what: &str| u32::try_from(int(what)?).map_err(|_| bad(what));
        let flag = |what: &str| v.extract::<bool>().or_refuse(|| bad(what));
        match k.as_str() {
            "num_replicas" => opts.num_replicas = count("an int >= 1")?,
            "num_partitions" => opts.num_partitions = count("an int >= 1")?,
            "portable" => opts.portable = flag("a bool")?,
            "use_spmd_partitioning" => opts.use_spmd_partitioning = flag("a bool")?,
            "device_ordinal" => opts.device_ordinal = int("an int")?,
            other => {
                return Err(invalid(format!(
                    "unknown override {other:?} (num_replicas, num_partitions, portable, \
                     use_spmd_partitioning, device_ordinal)"
                )))
            }
        }
    }
    Ok(opts)
}

/// A `Cache` from a Cache object, a directory path, or `os.PathLike`.
pub fn cache_from_py(c: &Bound<'_, PyAny>) -> PyResult<rpjrt::Cache> {
    if let Ok(pc) = c.cast::<PyCache>() {
        return Ok(pc.get().inner.clone());
    }
    let dir = crate::convert::path_arg(c, "cache (an rpjrt.Cache or a directory path)")?;
    rpjrt::Cache::at(dir).pyerr()
}

#[pymethods]
impl PyPlugin {
    /// `(current, minimum)` StableHLO versions as "X.Y.Z" strings, or None.
    fn stablehlo_versions(&self) -> Option<(String, String)> {
        self.inner
            .stablehlo_versions()
            .map(|(c, m)| (c.to_string(), m.to_string()))
    }

    /// The StableHLO version to serialize portable artifacts to for this plugin.
    fn stablehlo_target(&self) -> Option<String> {
        self.inner.stablehlo_target()
    }

    /// Which StableHLO version `program` was written for and whether this plugin takes it.
    fn stablehlo_fit<'py>(
        &self,
        py: Python<'py>,
        program: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let code = program_from_py(program, Some("mlir"))?;
        let rpjrt::Program::Mlir(code) = code else {
            return Err(invalid("stablehlo_fit reads a StableHLO program"));
        };
        let fit = self.inner.stablehlo_fit(&code);
        let d = PyDict::new(py);
        d.set_item("artifact", fit.artifact.map(|v| v.to_string()))?;
        d.set_item("minimum", fit.minimum.map(|v| v.to_string()))?;
        d.set_item("current", fit.current.map(|v| v.to_string()))?;
        d.set_item("fits", fit.fits)?;
        d.set_item("refused", fit.refused)?;
        Ok(d)
    }

    /// A named topology without a client (UnsupportedError where the plugin has none).
    fn topology(&self, py: Python<'_>, name: &str) -> PyResult<PyTopology> {
        let p = self.inner.clone();
        let inner = py.detach_call(|| p.topology(name)).pyerr()?;
        Ok(PyTopology { inner })
    }
}

/// The StableHLO version a portable artifact was written for, or None.
#[pyfunction]
pub fn artifact_stablehlo_version(data: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    let b = data_bytes(data)?;
    Ok(rpjrt::artifact_version(&b).map(|v| v.to_string()))
}

/// Verifies an rpjrt artifact (magic, length, checksum) and describes it.
#[pyfunction]
pub fn inspect_artifact<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let b = artifact_bytes(data)?;
    let a = rpjrt::Artifact::decode(&b).pyerr()?;
    let d = PyDict::new(py);
    d.set_item("target", target_dict(py, &a.target)?)?;
    d.set_item("blob_bytes", a.blob.len())?;
    d.set_item("compile_options_bytes", a.compile_options.len())?;
    let extra = PyDict::new(py);
    for (k, v) in &a.extra {
        extra.set_item(k, v)?;
    }
    d.set_item("extra", extra)?;
    Ok(d)
}
