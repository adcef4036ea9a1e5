//! `rpjrt._rpjrt`: the Python bindings of rpjrt.
//!
//! A thin layer: conversion between Python and rpjrt values, the GIL released around every
//! plugin call that can block, and one error-mapping point (`errors::to_py`). Discovery,
//! dtypes, the exception classes and slow-path host conversions live in Python.

mod bench;
mod buffer;
mod client;
mod convert;
mod cuda;
mod dlpack;
mod errors;
mod executable;
mod put;
mod pybuf;
mod session;
mod sharding;

use pyo3::prelude::*;

/// The PJRT version a plugin library reports, read without initialising it.
#[pyfunction]
fn _probe_pjrt_version(py: Python<'_>, path: std::path::PathBuf) -> PyResult<String> {
    py.detach(|| rpjrt::Plugin::probe_version(&path))
        .map(|v| v.to_string())
        .map_err(errors::to_py)
}

/// Runs the rpjrt command-line tool (the `rpjrt` console script) with `args` as argv.
#[pyfunction]
fn _run_cli(py: Python<'_>, args: Vec<String>) -> i32 {
    py.detach(|| rpjrt_cli::run_from_args(args))
}

#[pymodule]
fn _rpjrt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<client::PyPlugin>()?;
    m.add_class::<client::PyClient>()?;
    m.add_class::<client::PyDevice>()?;
    m.add_class::<client::PyMemory>()?;
    m.add_class::<executable::PyExecutable>()?;
    m.add_class::<buffer::PyBuffer>()?;
    m.add_class::<buffer::PyWaiter>()?;
    m.add_class::<session::PySession>()?;
    m.add_class::<session::PySessionProgram>()?;
    m.add_function(wrap_pyfunction!(_run_cli, m)?)?;
    m.add_function(wrap_pyfunction!(sharding::_uses_shardy, m)?)?;
    m.add_function(wrap_pyfunction!(sharding::_shard_split, m)?)?;
    m.add_function(wrap_pyfunction!(sharding::_shard_assemble, m)?)?;
    m.add_function(wrap_pyfunction!(_probe_pjrt_version, m)?)?;
    m.add_function(wrap_pyfunction!(convert::_element_types, m)?)?;
    m.add_function(wrap_pyfunction!(convert::_element_type_from_name, m)?)?;
    m.add_function(wrap_pyfunction!(bench::_bench_c_floor, m)?)?;
    cuda::register(m)?;
    Ok(())
}
