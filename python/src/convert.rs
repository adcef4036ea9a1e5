//! Conversions between Python values and rpjrt values: dtypes, options, shapes.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use rpjrt::{ElementType, Value};

use crate::errors::{invalid, PyErrExt};

/// Whether `e` is what a conversion raises for a value of the wrong type or out of range:
/// a `TypeError`, `ValueError`, `OverflowError` or `AttributeError` that is not one of
/// rpjrt's own errors. Only such a failure may be replaced by a message naming the
/// argument; anything else raised while converting (Ctrl-C's `KeyboardInterrupt`,
/// `SystemExit`, `MemoryError`, an rpjrt error, any other exception of the object's own
/// code) propagates as itself.
pub fn is_conversion_failure(py: Python<'_>, e: &PyErr) -> bool {
    use pyo3::exceptions as x;
    (e.is_instance_of::<x::PyTypeError>(py)
        || e.is_instance_of::<x::PyValueError>(py)
        || e.is_instance_of::<x::PyOverflowError>(py)
        || e.is_instance_of::<x::PyAttributeError>(py))
        && !crate::errors::is_rpjrt_error(py, e)
}

/// Whether `e` may be replaced by a stand-in where Python code only describes a value (a
/// `repr()` or a name in an error message): any `Exception` but `MemoryError`. Ctrl-C,
/// `SystemExit` and running out of memory propagate as themselves.
pub fn is_describable_failure(py: Python<'_>, e: &PyErr) -> bool {
    e.is_instance_of::<pyo3::exceptions::PyException>(py)
        && !e.is_instance_of::<pyo3::exceptions::PyMemoryError>(py)
}

/// The one rule for the fallbacks of argument conversion: only the failures a conversion
/// expects ([`is_conversion_failure`]) are rewritten or taken as "not this kind of value".
pub trait Conversion<T> {
    /// The value, or `refusal()` in place of an expected conversion failure; when the
    /// object's own Python code raised that failure (it has a traceback), it becomes the
    /// refusal's `__cause__`, so what it said is not lost. Any other error is returned
    /// as it was.
    fn or_refuse(self, refusal: impl FnOnce() -> PyErr) -> PyResult<T>;
    /// `Some(value)`, or `None` for an expected conversion failure; any other error is
    /// returned as it was.
    fn or_none(self) -> PyResult<Option<T>>;
    /// The value, or `fallback()` for a failure that only describing it met
    /// ([`is_describable_failure`]); Ctrl-C, `SystemExit` and `MemoryError` are returned.
    fn or_describe(self, fallback: impl FnOnce() -> T) -> PyResult<T>;
}

impl<T> Conversion<T> for PyResult<T> {
    fn or_refuse(self, refusal: impl FnOnce() -> PyErr) -> PyResult<T> {
        self.map_err(|e| {
            Python::attach(|py| {
                if !is_conversion_failure(py, &e) {
                    return e;
                }
                let new = refusal();
                if e.traceback(py).is_some() {
                    new.set_cause(py, Some(e));
                }
                new
            })
        })
    }

    fn or_none(self) -> PyResult<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(e) if Python::attach(|py| is_conversion_failure(py, &e)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn or_describe(self, fallback: impl FnOnce() -> T) -> PyResult<T> {
        match self {
            Ok(v) => Ok(v),
            Err(e) if Python::attach(|py| is_describable_failure(py, &e)) => Ok(fallback()),
            Err(e) => Err(e),
        }
    }
}

/// The name of `obj`'s type, for messages.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

struct DtypeCache {
    /// `rpjrt.dtype`, the class (its constructor normalises anything dtype-like).
    class: Py<PyAny>,
    /// The dtype object for each PJRT code (index = code).
    by_code: Vec<Option<Py<PyAny>>>,
}

static DTYPES: PyOnceLock<DtypeCache> = PyOnceLock::new();

fn cache(py: Python<'_>) -> PyResult<&DtypeCache> {
    DTYPES.get_or_try_init(py, || {
        let m = py.import("rpjrt._dtypes")?;
        let class = m.getattr("DType")?.unbind();
        let from_code = m.getattr("from_code")?;
        let mut by_code: Vec<Option<Py<PyAny>>> = (0..64).map(|_| None).collect();
        for &t in ElementType::ALL {
            let code = t.code() as usize;
            if code < by_code.len() {
                by_code[code] = Some(from_code.call1((t.code(),))?.unbind());
            }
        }
        Ok(DtypeCache { class, by_code })
    })
}

/// The Python `rpjrt.dtype` object of an element type.
pub fn dtype_obj<'py>(py: Python<'py>, t: ElementType) -> PyResult<Bound<'py, PyAny>> {
    let c = cache(py)?;
    match c.by_code.get(t.code() as usize).and_then(|o| o.as_ref()) {
        Some(o) => Ok(o.bind(py).clone()),
        None => Err(invalid(format!("element type {t} has no Python dtype"))),
    }
}

/// The element type that a Python dtype-like object names (via `rpjrt.dtype(obj)`).
pub fn dtype_from_py(obj: &Bound<'_, PyAny>) -> PyResult<ElementType> {
    // `rpjrt.dtype(obj)` reads the object's own attributes (`dtype`, `__str__`): Python
    // code rpjrt calls (see `detach::calling_python`).
    crate::detach::calling_python(obj.py(), || dtype_from_py_unguarded(obj))
}

fn dtype_from_py_unguarded(obj: &Bound<'_, PyAny>) -> PyResult<ElementType> {
    let py = obj.py();
    let d = cache(py)?.class.bind(py).call1((obj,))?;
    let code: i32 = d.getattr("code")?.extract()?;
    ElementType::from_code(code).map_err(crate::errors::to_py)
}

/// A client create option / attribute value from Python.
pub fn value_from_py(name: &str, v: &Bound<'_, PyAny>) -> PyResult<Value> {
    // An int or float subclass's or a list's items' own methods may run (`__index__`,
    // `__repr__`): Python code rpjrt calls (see `detach::calling_python`).
    crate::detach::calling_python(v.py(), || value_from_py_unguarded(name, v))
}

fn value_from_py_unguarded(name: &str, v: &Bound<'_, PyAny>) -> PyResult<Value> {
    if v.is_instance_of::<PyBool>() {
        return Ok(Value::Bool(v.extract()?));
    }
    if v.is_instance_of::<PyInt>() {
        return Ok(Value::Int64(v.extract().or_refuse(|| {
            invalid(format!(
                "option {name:?}: {v} does not fit in a 64-bit integer"
            ))
        })?));
    }
    if v.is_instance_of::<PyFloat>() {
        // The rule of the CLI's -o and JSON plugin configs: no silent inf or 0.
        let f: f64 = v.extract()?;
        return match Value::float_option(f, None) {
            Ok(f) => Ok(Value::Float(f)),
            Err(why) => Err(invalid(format!("option {name:?}: {} is {why}", v.repr()?))),
        };
    }
    if v.is_instance_of::<PyString>() {
        return Ok(Value::String(v.extract()?));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let items: Vec<i64> = v.extract().or_refuse(|| {
            invalid(format!(
                "option {name:?}: a list option must hold only integers"
            ))
        })?;
        return Ok(Value::Int64List(items));
    }
    Err(invalid(format!(
        "option {name:?}: {} is not a str, int, float, bool or list of int",
        v.get_type().name()?
    )))
}

/// A plugin attribute / device attribute as a Python object.
pub fn value_to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        Value::Int64(i) => i.into_pyobject(py)?.into_any(),
        Value::Int64List(l) => PyList::new(py, l)?.into_any(),
        Value::Float(f) => f64::from(*f).into_pyobject(py)?.into_any(),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
    })
}

/// `[(name, value)]` as a dict. A name repeated keeps its first value, as rpjrt's own
/// readers (`Plugin::attribute`, the StableHLO versions) and `rpjrt info` do.
pub fn attributes_to_py<'py>(
    py: Python<'py>,
    attrs: &[(String, Value)],
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in attrs {
        if !d.contains(k)? {
            d.set_item(k, value_to_py(py, v)?)?;
        }
    }
    Ok(d)
}

/// Dims as a Python tuple of ints.
pub fn shape_tuple<'py>(py: Python<'py>, dims: &[i64]) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, dims)
}

/// `float32[2, 3]` for messages and reprs.
pub fn spec_string(t: ElementType, dims: &[i64]) -> String {
    let d: Vec<String> = dims.iter().map(|x| x.to_string()).collect();
    format!("{}[{}]", t.name(), d.join(", "))
}

/// A string as Python's repr() writes it (single quotes), for __repr__ output.
pub fn q(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// The element-type table, for `rpjrt._dtypes` to build its dtype objects from: one tuple
/// per type, in PJRT code order: `(name, code, bits, itemsize, kind, format, aliases,
/// dlpack, ffi_code)` with `dlpack` a `(code, bits, lanes)` tuple or `None`.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn _element_types() -> Vec<(
    &'static str,
    i32,
    usize,
    usize,
    char,
    Option<&'static str>,
    Vec<&'static str>,
    Option<(u8, u8, u16)>,
    Option<i32>,
)> {
    ElementType::ALL
        .iter()
        .map(|&t| {
            (
                t.name(),
                t.code(),
                t.bit_width(),
                t.host_itemsize(),
                t.kind().numpy_char(),
                t.buffer_format(),
                t.aliases().to_vec(),
                t.dlpack().map(|d| (d.code, d.bits, d.lanes)),
                t.ffi_code(),
            )
        })
        .collect()
}

/// The PJRT code of the element type `name` denotes (`rpjrt::ElementType::from_name`'s
/// rule), or `(None, message)` saying why it denotes none.
#[pyfunction]
pub fn _element_type_from_name(name: &str) -> (Option<i32>, String) {
    match ElementType::from_name(name) {
        Ok(t) => (Some(t.code()), String::new()),
        Err(e) => (
            None,
            e.to_string()
                .trim_start_matches("invalid argument: ")
                .to_string(),
        ),
    }
}

/// Refuses `True`/`False` where an integer index is expected (bool is an int in Python,
/// so `device=True` would otherwise mean device 1).
pub fn reject_bool(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<()> {
    if obj.is_instance_of::<PyBool>() {
        return Err(invalid(format!(
            "{obj} is not {what} (a bool is not an index)"
        )));
    }
    Ok(())
}

/// Whether `obj` is an integer as Python indexes with it: an int (a bool too, which
/// [`int_arg`] then refuses) or anything with `__index__`, such as a numpy integer. An
/// error looking the attribute up that is not an `AttributeError` (a `__getattr__` that
/// Ctrl-C interrupted) propagates.
pub fn int_like(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    if obj.is_instance_of::<PyInt>() {
        return Ok(true);
    }
    // A `__getattr__` is Python code rpjrt calls (see `detach::calling_python`).
    crate::detach::calling_python(obj.py(), || obj.hasattr("__index__"))
}

/// An integer argument as an `i64`, `what` naming it ("a device index") in the errors: a
/// bool is refused, an int too large for 64 bits is said to be out of range (not
/// Python's OverflowError about C types), and anything else is named by its type.
pub fn int_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<i64> {
    if obj.is_exact_instance_of::<PyInt>() {
        return int_arg_unguarded(obj, what);
    }
    // Its `__index__` (and `__str__`, for the message) is Python code rpjrt calls (see
    // `detach::calling_python`).
    crate::detach::calling_python(obj.py(), || int_arg_unguarded(obj, what))
}

fn int_arg_unguarded(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<i64> {
    reject_bool(obj, what)?;
    let py = obj.py();
    match obj.extract::<i64>() {
        Ok(v) => Ok(v),
        // An integer too large for 64 bits (an OverflowError that the object's own Python
        // code raised is not that: it is kept as the refusal's cause below).
        Err(e)
            if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(py)
                && e.traceback(py).is_none() =>
        {
            Err(invalid(format!("{obj} is out of range for {what}")))
        }
        Err(e) => {
            Err(e).or_refuse(|| invalid(format!("{what} must be an int, not {}", type_name(obj))))
        }
    }
}

/// A file-system path argument as `open()` takes one: a str, bytes (the file name's raw
/// bytes, which need not be UTF-8) or an `os.PathLike`; anything else is a `TypeError`
/// naming `what` and the type.
pub fn path_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<std::path::PathBuf> {
    // An `os.PathLike`'s `__fspath__` is Python code rpjrt calls (`detach::calling_python`).
    crate::detach::calling_python(obj.py(), || path_arg_unguarded(obj, what))
}

fn path_arg_unguarded(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<std::path::PathBuf> {
    let os = obj.py().import("os")?;
    let decoded = os
        .getattr("fspath")?
        .call1((obj,))
        .and_then(|p| os.getattr("fsdecode")?.call1((p,)));
    decoded
        .or_refuse(|| {
            pyo3::exceptions::PyTypeError::new_err(format!(
                "{what} must be a path (str, bytes or os.PathLike), not {}",
                type_name(obj)
            ))
        })?
        .extract()
}

/// The `(name, value)` items of a mapping of option names (`argument` names it, `item` names
/// one of its keys in messages): anything without `items()` and any key that is not a str
/// are refused, naming the type.
pub fn option_items<'py>(
    obj: &Bound<'py, PyAny>,
    argument: &str,
    item: &str,
) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
    // A mapping's `items()` and its iteration are Python code rpjrt calls (see
    // `detach::calling_python`).
    crate::detach::calling_python(obj.py(), || option_items_unguarded(obj, argument, item))
}

fn option_items_unguarded<'py>(
    obj: &Bound<'py, PyAny>,
    argument: &str,
    item: &str,
) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
    let items = obj.call_method0("items").or_refuse(|| {
        invalid(format!(
            "{argument} must be a mapping of option names to values, not {}",
            type_name(obj)
        ))
    })?;
    let mut out = Vec::new();
    for pair in items.try_iter()? {
        let (k, v): (Bound<'py, PyAny>, Bound<'py, PyAny>) = pair?.extract()?;
        let k: String = k
            .extract()
            .or_refuse(|| invalid(format!("{item} names are strings, not {}", type_name(&k))))?;
        out.push((k, v));
    }
    Ok(out)
}

/// The items of an argument that must be an ordered sequence (a list or tuple, or any
/// other iterable of items). A str or bytes (its characters), a mapping (its keys) and a
/// set (no order) are iterable too, but never what the caller meant: they are refused,
/// naming `what` and the type, instead of being taken item by item.
pub fn sequence_items<'py>(
    obj: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if let Ok(list) = obj.cast::<PyList>() {
        return Ok(list.iter().collect());
    }
    if let Ok(tuple) = obj.cast::<PyTuple>() {
        return Ok(tuple.iter().collect());
    }
    // Any other iterable's own methods are Python code rpjrt calls (see
    // `detach::calling_python`).
    crate::detach::calling_python(obj.py(), || sequence_items_unguarded(obj, what))
}

fn sequence_items_unguarded<'py>(
    obj: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let refused = obj.is_instance_of::<PyString>()
        || obj.is_instance_of::<pyo3::types::PyBytes>()
        || obj.is_instance_of::<pyo3::types::PyByteArray>()
        || obj.is_instance_of::<PyDict>()
        || obj.is_instance_of::<pyo3::types::PySet>()
        || obj.is_instance_of::<pyo3::types::PyFrozenSet>()
        || obj.hasattr("keys")?;
    let iter = if refused {
        None
    } else {
        obj.try_iter().or_none()?
    };
    let Some(iter) = iter else {
        return Err(invalid(format!(
            "{what} must be a list or tuple, not {} (any ordered iterable is taken: a list, \
             tuple, range, numpy array or generator; not a str, bytes, mapping or set)",
            type_name(obj)
        )));
    };
    iter.collect()
}

/// A wait in seconds from Python (`None`: `default`): anything Python takes as a float
/// (an int, a float, a numpy scalar) except a bool, which would pass for 0 or 1 s; text
/// and other types are a `TypeError` naming the parameter. A negative or NaN wait is
/// refused by `rpjrt::duration_from_secs`; infinity waits as long as a `Duration` can.
pub(crate) fn secs_arg(
    obj: Option<&Bound<'_, PyAny>>,
    default: f64,
    what: &str,
) -> PyResult<std::time::Duration> {
    let secs = match obj.filter(|o| !o.is_none()) {
        None => default,
        Some(o) => secs_value(o, what)?,
    };
    rpjrt::duration_from_secs(secs, what).pyerr()
}

/// A number of seconds given as `what`, as a float (an int or a float; a bool is refused
/// with a TypeError naming its type), for the caller to check its range.
pub(crate) fn secs_value(o: &Bound<'_, PyAny>, what: &str) -> PyResult<f64> {
    if o.is_exact_instance_of::<pyo3::types::PyFloat>() || o.is_exact_instance_of::<PyInt>() {
        return secs_value_unguarded(o, what);
    }
    // Its `__float__` or `__index__` is Python code rpjrt calls (`detach::calling_python`).
    crate::detach::calling_python(o.py(), || secs_value_unguarded(o, what))
}

fn secs_value_unguarded(o: &Bound<'_, PyAny>, what: &str) -> PyResult<f64> {
    let refusal = || {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "{what} must be a number of seconds (int or float), not {}",
            type_name(o)
        ))
    };
    if o.is_instance_of::<pyo3::types::PyBool>() {
        return Err(refusal());
    }
    match o.extract::<f64>() {
        Ok(v) => Ok(v),
        // A number too large for a float (`10**400`) is a wait as long as infinity's, or a
        // negative one, which the caller refuses as negative: not a wrong type.
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(o.py()) => {
            Ok(match o.lt(0)? {
                true => f64::NEG_INFINITY,
                false => f64::INFINITY,
            })
        }
        e => e.or_refuse(refusal),
    }
}
