//! `rpjrt.triton`: Triton kernels compiled by the plugin (rpjrt::triton).
//! The Python-facing module is rpjrt/triton.py.

use crate::detach::Detach;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyString};

use rpjrt::triton::{TritonCompileOptions, TritonKernel};

use crate::client::{PyClient, PyPlugin};
use crate::errors::PyErrExt;

/// A kernel the plugin compiled from Triton IR, with the options it was compiled with.
#[pyclass(frozen, name = "TritonKernel", module = "rpjrt.triton")]
pub struct PyTritonKernel {
    inner: TritonKernel,
    options: TritonCompileOptions,
}

#[pymethods]
impl PyTritonKernel {
    /// The assembly (PTX on CUDA) as bytes; empty when the plugin wrote a file (`path`).
    #[getter]
    fn asm<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.asm)
    }

    /// The assembly as text, or None if it is not UTF-8.
    #[getter]
    fn asm_text(&self) -> Option<&str> {
        self.inner.asm_text()
    }

    /// The first `.entry` of the PTX (the kernel function to launch), if any.
    #[getter]
    fn entry_name(&self) -> Option<&str> {
        self.inner.entry_name()
    }

    /// Dynamic shared memory the kernel needs at launch, in bytes.
    #[getter]
    fn shared_mem_bytes(&self) -> u64 {
        self.inner.shared_mem_bytes
    }

    /// Thread-block cluster dimensions (x, y, z), reported by version-1 plugins only.
    #[getter]
    fn cluster_dims(&self) -> Option<(u32, u32, u32)> {
        self.inner.cluster_dims.map(|[x, y, z]| (x, y, z))
    }

    /// The file the plugin wrote the kernel to (ROCm), if it did instead of returning asm.
    #[getter]
    fn path(&self) -> Option<&str> {
        self.inner.path.as_deref()
    }

    /// The architecture it was compiled for, as sent to the plugin ("9.0").
    #[getter]
    fn arch(&self) -> &str {
        self.options.arch()
    }

    /// Warps per CTA (the kernel's block is 32 * num_warps threads).
    #[getter]
    fn num_warps(&self) -> i32 {
        self.options.warps()
    }

    /// CTAs per cluster.
    #[getter]
    fn num_ctas(&self) -> i32 {
        self.options.ctas()
    }

    /// Software-pipelining stages.
    #[getter]
    fn num_stages(&self) -> i32 {
        self.options.stages()
    }

    fn __repr__(&self) -> String {
        let k = &self.inner;
        let out = match (&k.path, k.entry_name()) {
            (Some(p), _) => format!("path={}", quote(p)),
            (None, Some(e)) => format!("entry={}, asm={} bytes", quote(e), k.asm.len()),
            (None, None) => format!("asm={} bytes", k.asm.len()),
        };
        let cluster = match k.cluster_dims {
            Some([x, y, z]) => format!(", cluster_dims=({x}, {y}, {z})"),
            None => String::new(),
        };
        format!(
            "TritonKernel(arch={}, num_warps={}, num_ctas={}, num_stages={}, {out}, \
             shared_mem_bytes={}{cluster})",
            quote(self.options.arch()),
            self.options.warps(),
            self.options.ctas(),
            self.options.stages(),
            k.shared_mem_bytes,
        )
    }
}

/// `s` quoted as Python's repr quotes a str without quotes in it: 'text'.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' | '\'' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&c.escape_default().to_string()),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// The plugin behind `target`: a Client or a Plugin.
fn plugin_of(target: &Bound<'_, PyAny>) -> PyResult<(rpjrt::Plugin, Option<rpjrt::Client>)> {
    if let Ok(c) = target.cast::<PyClient>() {
        let client: rpjrt::Client = (*c.get().inner).clone();
        return Ok((client.plugin().clone(), Some(client)));
    }
    if let Ok(p) = target.cast::<PyPlugin>() {
        return Ok((p.get().inner.clone(), None));
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "expected an rpjrt.Client or rpjrt.Plugin, got {}",
        target.get_type().name()?
    )))
}

/// Compiles Triton IR (str, or bytes of text or MLIR bytecode) with the plugin's Triton
/// extension. `arch` None takes the client's first addressable device's compute
/// capability.
#[pyfunction]
#[pyo3(signature = (target, module, arch = None, num_warps = 4, num_ctas = 1, num_stages = 3))]
pub fn _triton_compile(
    py: Python<'_>,
    target: &Bound<'_, PyAny>,
    module: &Bound<'_, PyAny>,
    arch: Option<&str>,
    num_warps: i32,
    num_ctas: i32,
    num_stages: i32,
) -> PyResult<PyTritonKernel> {
    let bytes: Vec<u8> = if let Ok(s) = module.cast::<PyString>() {
        s.to_str()?.as_bytes().to_vec()
    } else if let Ok(b) = module.cast::<PyBytes>() {
        b.as_bytes().to_vec()
    } else if let Ok(b) = module.cast::<PyByteArray>() {
        b.to_vec()
    } else {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "module must be Triton IR as str or bytes, got {}",
            module.get_type().name()?
        )));
    };
    let (plugin, client) = plugin_of(target)?;
    let base = match (arch, &client) {
        (Some(a), _) => TritonCompileOptions::new(a),
        (None, Some(c)) => TritonCompileOptions::for_client(c),
        (None, None) => Err(rpjrt::Error::InvalidArgument(
            "arch is required when compiling with a Plugin (a Client can supply its device's \
             compute capability)"
                .into(),
        )),
    };
    let options = base
        .and_then(|o| o.num_warps(num_warps))
        .and_then(|o| o.num_ctas(num_ctas))
        .and_then(|o| o.num_stages(num_stages))
        .pyerr()?;
    let inner = py
        .detach_call(|| match &client {
            Some(c) => c.triton_compile(&bytes, &options),
            None => rpjrt::triton::compile(&plugin, &bytes, &options),
        })
        .pyerr()?;
    Ok(PyTritonKernel { inner, options })
}

/// Whether the plugin behind `target` (a Client or a Plugin) has the Triton extension.
#[pyfunction]
pub fn _triton_available(target: &Bound<'_, PyAny>) -> PyResult<bool> {
    let (plugin, _) = plugin_of(target)?;
    Ok(rpjrt::triton::is_available(&plugin))
}

/// Adds the Triton names to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTritonKernel>()?;
    m.add_function(wrap_pyfunction!(_triton_compile, m)?)?;
    m.add_function(wrap_pyfunction!(_triton_available, m)?)?;
    Ok(())
}
