//! The one place where an `rpjrt::Error` becomes a Python exception.
//!
//! The exception classes live in Python (`rpjrt._errors`); `error_class(code, kind)` picks
//! the class and is looked up once per interpreter.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;

static ERROR_CLASS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static ERROR_BASE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The name of the `rpjrt::Error` variant, which `error_class` may map to its own class.
fn kind_name(e: &rpjrt::Error) -> &'static str {
    match e {
        rpjrt::Error::PluginLoad { .. } => "PluginLoad",
        rpjrt::Error::Pjrt { .. } => "Pjrt",
        rpjrt::Error::Unsupported { .. } => "Unsupported",
        rpjrt::Error::StructSize { .. } => "StructSize",
        rpjrt::Error::InvalidArgument(_) => "InvalidArgument",
        rpjrt::Error::Closed(_) => "Closed",
        rpjrt::Error::Deleted(m) if is_executable_deletion(m) => "ExecutableDeleted",
        rpjrt::Error::Deleted(_) => "Deleted",
        rpjrt::Error::ResourceExhausted(_) => "ResourceExhausted",
        _ => "Other",
    }
}

/// Whether a `Deleted` error's message is about an executable (`Executable.delete()`), not
/// a buffer: the core names one kind of deletion, Python has a class for each.
fn is_executable_deletion(message: &str) -> bool {
    message.starts_with("executable was deleted")
}

/// An instance of the class `error_class(code, kind)` with `message` and `entry`, whose
/// `__context__` is the exception being handled where the native call was made (as a
/// `raise` in an `except` or `finally` block would set it): an error raised while cleaning
/// up after another never hides that other.
pub fn make_err(
    py: Python<'_>,
    code: &str,
    kind: &str,
    message: String,
    entry: Option<&str>,
) -> PyErr {
    let built = (|| -> PyResult<PyErr> {
        let f = ERROR_CLASS.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            Ok(py.import("rpjrt._errors")?.getattr("error_class")?.unbind())
        })?;
        let cls = f.bind(py).call1((code, kind))?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("entry", entry)?;
        let inst = cls.call((message,), Some(&kwargs))?;
        let err = PyErr::from_value(inst);
        if let Some(handled) = handled_exception(py) {
            // What CPython's PyErr_SetObject does for an exception raised from C; the new
            // instance is in no chain yet, so no cycle can form.
            if !handled.is(err.value(py)) {
                err.set_context(py, Some(PyErr::from_value(handled)));
            }
        }
        Ok(err)
    })();
    built.unwrap_or_else(|e| e)
}

/// The exception being handled on this thread (`sys.exception()`), if any.
fn handled_exception(py: Python<'_>) -> Option<Bound<'_, PyAny>> {
    let (mut ty, mut value, mut tb) = (
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    // SAFETY: the GIL is held (`py`); PyErr_GetExcInfo (stable ABI) stores a new reference
    // or NULL in each pointer, and each is owned by exactly one Bound below.
    unsafe {
        pyo3::ffi::PyErr_GetExcInfo(&mut ty, &mut value, &mut tb);
        drop(Bound::<PyAny>::from_owned_ptr_or_opt(py, ty));
        drop(Bound::<PyAny>::from_owned_ptr_or_opt(py, tb));
        Bound::<PyAny>::from_owned_ptr_or_opt(py, value)
    }
    .filter(|v| !v.is_none())
}

/// Whether `e` is one of rpjrt's own exceptions (an `rpjrt.Error`).
pub fn is_rpjrt_error(py: Python<'_>, e: &PyErr) -> bool {
    let base = ERROR_BASE.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        Ok(py.import("rpjrt._errors")?.getattr("Error")?.unbind())
    });
    match base {
        Ok(base) => e.value(py).is_instance(base.bind(py)).unwrap_or(false),
        Err(_) => false,
    }
}

/// Adds `note` to `err`'s `__notes__` (PEP 678; a list made here on Python 3.10, which has
/// no `add_note`), once: a note already there is not added again.
fn add_note(py: Python<'_>, err: &PyErr, note: String) -> PyResult<()> {
    let value = err.value(py);
    let notes = match value.getattr("__notes__") {
        Ok(n) if n.is_instance_of::<pyo3::types::PyList>() => n,
        _ => {
            let n = pyo3::types::PyList::empty(py).into_any();
            value.setattr("__notes__", &n)?;
            n
        }
    };
    if !notes.contains(&note)? {
        notes.call_method1("append", (note,))?;
    }
    Ok(())
}

/// The Python exception for an rpjrt error.
pub fn to_py(e: rpjrt::Error) -> PyErr {
    Python::attach(|py| {
        // The core names its no-copy mode for both faces; Python's is copy=False.
        let message = e.to_string().replace(
            "no-copy mode (CopyMode::Never, Python's copy=False)",
            "copy=False",
        );
        // A custom-call handler's KeyboardInterrupt/SystemExit propagates as itself; what
        // the failed execution consumed (donated arguments, a session's slots) is said in
        // a note on it, as the error of an ordinary exception says it in its message.
        if let Some(original) = crate::ffi::base_exception_in(py, &message) {
            if let Some(at) = message.find(rpjrt::CONSUMED_NOTE) {
                let note = message[at + "; ".len()..].to_string();
                let _ = add_note(py, &original, note);
            }
            return original;
        }
        let err = make_err(py, e.code().name(), kind_name(&e), message, e.entry());
        if let Some(report) = e.oom_report() {
            // Best effort: the message holds the same facts.
            let _ = set_oom_attributes(py, &err, report);
        }
        err
    })
}

/// A device allocator's figures as a dict (`None` for figures the plugin leaves unset).
pub fn memory_stats_dict<'py>(
    py: Python<'py>,
    s: &rpjrt::diagnostics::MemoryStats,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("bytes_in_use", s.bytes_in_use)?;
    d.set_item("peak_bytes_in_use", s.peak_bytes_in_use)?;
    d.set_item("num_allocs", s.num_allocs)?;
    d.set_item("largest_alloc_size", s.largest_alloc_size)?;
    d.set_item("bytes_limit", s.bytes_limit)?;
    d.set_item("largest_free_block_bytes", s.largest_free_block_bytes)?;
    Ok(d)
}

/// `memory_stats`, `device_id`, `memory_options` and `hint` on an out-of-memory exception.
fn set_oom_attributes(
    py: Python<'_>,
    err: &PyErr,
    report: &rpjrt::diagnostics::OomReport,
) -> PyResult<()> {
    let v = err.value(py);
    let first = report.devices.iter().find(|d| d.stats.is_ok());
    let stats = match report.stats() {
        Some(s) => Some(memory_stats_dict(py, s)?),
        None => None,
    };
    v.setattr("memory_stats", stats)?;
    let device = first.or(report.devices.first()).map(|d| d.device);
    v.setattr("device_id", device)?;
    let options = PyDict::new(py);
    for (k, val) in &report.options {
        options.set_item(k, val)?;
    }
    v.setattr("memory_options", options)?;
    v.setattr("hint", report.hint())
}

/// The PJRT status code for an exception raised by Python code that rpjrt calls (a custom-
/// call handler, a store's methods): the one table from Python exceptions to codes.
///
/// An `rpjrt.Error` keeps its code; then, first match wins: `TimeoutError` (and any class
/// whose name says `DeadlineExceeded`, as other libraries' timeouts do) is
/// DEADLINE_EXCEEDED, `IndexError` OUT_OF_RANGE, any other `LookupError` (`KeyError`)
/// NOT_FOUND, `ValueError`/`TypeError` INVALID_ARGUMENT, `NotImplementedError`
/// UNIMPLEMENTED, `MemoryError` RESOURCE_EXHAUSTED, `PermissionError` PERMISSION_DENIED,
/// `FileExistsError` ALREADY_EXISTS, `ConnectionError` UNAVAILABLE; anything else UNKNOWN.
pub fn code_of_exception(py: Python<'_>, e: &PyErr) -> rpjrt::Code {
    use pyo3::exceptions as x;
    use rpjrt::Code;
    let value = e.value(py);
    if is_rpjrt_error(py, e) {
        if let Some(code) = value
            .getattr("code")
            .and_then(|c| c.extract::<String>())
            .ok()
            .and_then(|c| Code::from_name(&c).ok())
        {
            return code;
        }
    }
    let says_deadline = || {
        e.get_type(py)
            .name()
            .map(|n| n.to_string().contains("DeadlineExceeded"))
            .unwrap_or(false)
    };
    if e.is_instance_of::<x::PyTimeoutError>(py) || says_deadline() {
        Code::DeadlineExceeded
    } else if e.is_instance_of::<x::PyIndexError>(py) {
        Code::OutOfRange
    } else if e.is_instance_of::<x::PyLookupError>(py) {
        Code::NotFound
    } else if e.is_instance_of::<x::PyValueError>(py) || e.is_instance_of::<x::PyTypeError>(py) {
        Code::InvalidArgument
    } else if e.is_instance_of::<x::PyNotImplementedError>(py) {
        Code::Unimplemented
    } else if e.is_instance_of::<x::PyMemoryError>(py) {
        Code::ResourceExhausted
    } else if e.is_instance_of::<x::PyPermissionError>(py) {
        Code::PermissionDenied
    } else if e.is_instance_of::<x::PyFileExistsError>(py) {
        Code::AlreadyExists
    } else if e.is_instance_of::<x::PyConnectionError>(py) {
        Code::Unavailable
    } else {
        Code::Unknown
    }
}

/// `rpjrt.InvalidArgumentError(msg)`.
pub fn invalid(msg: impl Into<String>) -> PyErr {
    Python::attach(|py| make_err(py, "INVALID_ARGUMENT", "InvalidArgument", msg.into(), None))
}

/// `rpjrt.UnsupportedError(msg)`.
pub fn unsupported(msg: impl Into<String>) -> PyErr {
    Python::attach(|py| make_err(py, "UNIMPLEMENTED", "Unsupported", msg.into(), None))
}

/// `rpjrt.BufferDeletedError(msg)`.
pub fn deleted(msg: impl Into<String>) -> PyErr {
    Python::attach(|py| make_err(py, "FAILED_PRECONDITION", "Deleted", msg.into(), None))
}

/// `.pyerr()` on an rpjrt result: the single conversion point.
pub trait PyErrExt<T> {
    /// Maps the error to its Python exception.
    fn pyerr(self) -> PyResult<T>;
}

impl<T> PyErrExt<T> for rpjrt::Result<T> {
    #[inline]
    fn pyerr(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

/// Warns that `old` is deprecated in favour of `new` (a `DeprecationWarning` pointing at
/// the caller's line); the old name keeps working for one release.
pub fn deprecated(py: Python<'_>, old: &str, new: &str) -> PyResult<()> {
    let msg = std::ffi::CString::new(format!(
        "{old} is deprecated and will be removed in the next release; use {new}"
    ))
    .map_err(|_| invalid("a deprecation message holds a NUL byte"))?;
    PyErr::warn(
        py,
        &py.get_type::<pyo3::exceptions::PyDeprecationWarning>(),
        &msg,
        1,
    )
}
