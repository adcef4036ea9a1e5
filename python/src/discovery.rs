//! Plugin discovery (`rpjrt_discovery`) for `rpjrt._discovery`: conversion only.

use crate::detach::Detach;
use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use rpjrt_discovery::{pick_library, Discovery, PluginInfo, SearchPath};

use crate::convert::attributes_to_py;
use crate::errors::{make_err, to_py};

/// A discovery error as Python sees it: a load failure's reason alone (it is a whole
/// message about the search), anything else through the usual mapping.
fn discovery_err(e: rpjrt::Error) -> PyErr {
    match e {
        rpjrt::Error::PluginLoad { reason, .. } => {
            Python::attach(|py| make_err(py, "NOT_FOUND", "PluginLoad", reason, None))
        }
        other => to_py(other),
    }
}

/// `p` as `(name, path, version, source, platform, package, options, problem)`, where
/// `problem` says why the entry cannot be used (a plugin config that cannot be read).
fn info_tuple<'py>(
    py: Python<'py>,
    p: &PluginInfo,
    problem: Option<&str>,
) -> PyResult<Bound<'py, PyTuple>> {
    let options = match &p.options {
        Some(o) => Some(attributes_to_py(py, o.entries())?),
        None => None,
    };
    (
        &p.name,
        p.path.as_os_str(),
        &p.version,
        &p.source,
        &p.platform,
        &p.package,
        options,
        problem,
    )
        .into_pyobject(py)
}

/// Every plugin found over `search_path` (Python's `sys.path`), in search order, as
/// `(name, path, version, source, platform, package, options, problem)` tuples.
#[pyfunction]
pub fn _discover<'py>(
    py: Python<'py>,
    search_path: Vec<PathBuf>,
) -> PyResult<Vec<Bound<'py, PyTuple>>> {
    // A plugin config that cannot be read is listed (under its own path, with why, as
    // `rpjrt plugins` lists it) instead of failing the whole listing.
    let (found, problems) =
        py.detach_call(|| Discovery::new(SearchPath::new(search_path)).plugins_and_problems());
    found
        .iter()
        .map(|p| (p, None))
        .chain(problems.iter().map(|(p, why)| (p, Some(why.as_str()))))
        .map(|(p, why)| info_tuple(py, p, why))
        .collect()
}

/// The plugins `spec` selects (a platform, a name, a path, or `None`), in the order to
/// try them, as [`_discover`]'s tuples; the error says what was searched.
#[pyfunction]
#[pyo3(signature = (spec, search_path))]
pub fn _candidates<'py>(
    py: Python<'py>,
    spec: Option<std::ffi::OsString>,
    search_path: Vec<PathBuf>,
) -> PyResult<Vec<Bound<'py, PyTuple>>> {
    let found = py
        .detach_call(|| Discovery::new(SearchPath::new(search_path)).candidates(spec.as_deref()))
        .map_err(discovery_err)?;
    found.iter().map(|p| info_tuple(py, p, None)).collect()
}

/// The PJRT library in a plugin module's directory, or `None`.
#[pyfunction]
#[pyo3(signature = (directory, preferred = None))]
pub fn _pick_library(directory: PathBuf, preferred: Option<String>) -> Option<std::ffi::OsString> {
    pick_library(&directory, preferred.as_deref()).map(PathBuf::into_os_string)
}

/// The discovery constants of `rpjrt_discovery`, so that Python states none of them again:
/// `(known packages as (package, module_dir, library, name, platform) tuples, entry point
/// groups, namespace packages)`.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn _discovery_tables() -> (
    Vec<(
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
    )>,
    Vec<&'static str>,
    Vec<&'static str>,
) {
    (
        rpjrt_discovery::KNOWN_PACKAGES
            .iter()
            .map(|k| (k.package, k.module_dir, k.library, k.name, k.platform))
            .collect(),
        rpjrt_discovery::ENTRY_POINT_GROUPS.to_vec(),
        rpjrt_discovery::NAMESPACE_PACKAGES.to_vec(),
    )
}
