//! `Client.put`: host data (any buffer-protocol object, DLPack producer, number, list) to a
//! device buffer.
//!
//! Conversion only: a Python object becomes an `rpjrt::HostArray` (bytes, element type,
//! dims, byte strides, byte order) and `rpjrt::Client::put` does the rest (checks, layout,
//! gather, byte swapping, bool normalisation, fallible allocation). Python numbers and
//! nested lists become an `rpjrt_npy::scalars::Nested` tree, which `rpjrt_npy::scalars::to_host`
//! checks and converts under the one rule for numbers.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyComplex, PyFloat, PyInt, PyList, PyTuple};
use rpjrt::{ByteOrder, CopyMode, ElementType, HostArray, HostData};
use rpjrt_npy::scalars::{Nested, Scalar, MAX_DEPTH};

use crate::buffer::PyBuffer;
use crate::client::PyClient;
use crate::convert::{dtype_from_py, spec_string, type_name, Conversion};
use crate::errors::{invalid, PyErrExt};
use crate::pybuf::{HostView, PinnedHost};

/// The copy mode of Python's `copy=` argument (`True`, `None`, `False`).
pub fn copy_mode(copy: Option<bool>) -> CopyMode {
    match copy {
        Some(true) => CopyMode::Always,
        None => CopyMode::IfNeeded,
        Some(false) => CopyMode::Never,
    }
}

/// Copies a value that stands for a program's input (an execute argument, a session
/// slot) onto `device`, as `dtype` where given; a `ValueError` becomes an
/// `InvalidArgumentError` whose message starts with `what` (`argument 0`, `slot "x"`).
pub fn put_input(
    client: &Bound<'_, PyClient>,
    obj: &Bound<'_, PyAny>,
    device: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    what: impl FnOnce() -> String,
) -> PyResult<Py<PyBuffer>> {
    let py = client.py();
    put_with(
        client,
        obj,
        Some(device),
        None,
        dtype,
        Some(true),
        false,
        None,
    )
    .map_err(|e| {
        if e.is_instance_of::<pyo3::exceptions::PyValueError>(py) {
            // The rule's hints name `cast=`, which only `Client.put` takes.
            let why = e.value(py).to_string().replace(
                "from Python, cast=True",
                "client.put(value, dtype=..., cast=True)",
            );
            invalid(format!("{}: {why}", what()))
        } else {
            e
        }
    })
}

/// The `layout=` argument of `Client.put`: a sequence of dimension numbers
/// (`minor_to_major`) or anything with a `minor_to_major` attribute and no tiles (such as
/// `rpjrt.transfer.DeviceLayout`).
pub fn layout_from_py(layout: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    // Named by the type of what was given and, when it is an item (or the minor_to_major)
    // that is wrong, by that one's type too: a list with one bad item is still a list.
    let bad = |of: &Bound<'_, PyAny>| {
        let mut why = format!(
            "layout= takes minor_to_major dimension numbers (a sequence of ints) or a \
             DeviceLayout, not {}",
            type_name(layout)
        );
        if !of.is(layout) {
            why.push_str(&format!(" (it holds a {})", type_name(of)));
        }
        invalid(why)
    };
    let dims = |seq: &Bound<'_, PyAny>| -> PyResult<Vec<i64>> {
        // A sequence as a Vec is extracted from (not a str, a set or a generator).
        let items: Vec<Bound<'_, PyAny>> = seq.extract().or_refuse(|| bad(seq))?;
        items
            .iter()
            .map(|item| item.extract::<i64>().or_refuse(|| bad(item)))
            .collect()
    };
    if layout.hasattr("minor_to_major")? {
        if let Some(tiles) = layout.getattr("tiles").or_none()? {
            if tiles.len().or_none()?.unwrap_or(0) > 0 {
                return Err(invalid(
                    "a tiled device layout cannot be requested for a put; give \
                     minor_to_major only",
                ));
            }
        }
        return dims(&layout.getattr("minor_to_major")?);
    }
    dims(layout)
}

/// The refusal of `copy=False` for a value that had to be converted into a new array
/// first: the buffer could only share that array's memory, not the caller's.
fn converted_refusal(obj: &Bound<'_, PyAny>, how: &str) -> PyErr {
    let what = type_name(obj);
    invalid(format!(
        "copy=False shares the caller's memory, but this {what} is {how} into a new array \
         first; leave copy= at its default (None) to allow the copy"
    ))
}

/// `Client.put`: with `cast`, Python numbers and lists may be converted lossily (wrapping,
/// rounding, saturating as numpy's `astype` does) instead of refused; `layout` asks for a
/// device layout (`minor_to_major`), which copies.
#[allow(clippy::too_many_arguments)]
pub fn put_with(
    client: &Bound<'_, PyClient>,
    obj: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
    memory: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    copy: Option<bool>,
    cast: bool,
    layout: Option<Vec<i64>>,
) -> PyResult<Py<PyBuffer>> {
    let py = client.py();
    if layout.is_some() && copy == Some(false) {
        return Err(invalid(
            "copy=False cannot be combined with layout=: the data is rearranged into the \
             requested device layout",
        ));
    }
    let c = client.get();
    let (dev, mem) = c.resolve_target(py, device, memory)?;
    let want = dtype.map(dtype_from_py).transpose()?;
    let me = client.clone().unbind();

    // 1. A Buffer: copy it to the target. One of another client cannot be copied inside
    //    the plugin: it goes in as host data does (through DLPack, below), copied.
    if let Ok(b) = obj.cast::<PyBuffer>() {
        let src = b.get();
        src.check_not_deleted()?;
        if let Some(w) = want {
            if w != src.rb().element_type() {
                return Err(invalid(format!(
                    "the buffer holds {}, not {}; rpjrt does not convert on the device",
                    src.rb().element_type(),
                    w
                )));
            }
        }
        if copy == Some(false) {
            return Err(invalid(
                "copy=False cannot move a Buffer; pass the Buffer itself",
            ));
        }
        if layout.is_some() {
            return Err(invalid(
                "layout= applies to host data; a Buffer is copied in its own layout \
                 (copy it to the host first)",
            ));
        }
        if src.client.is(&me) {
            let rb = src.rb();
            let out = py
                .detach(|| match &mem {
                    Some(m) => rb.copy_to_memory(m),
                    None => rb.copy_to_device(&dev),
                })
                .pyerr()?;
            return PyBuffer::wrap(py, out, &me);
        }
    }

    // 2. Python numbers and (nested) lists/tuples of them: the core's rule for numbers.
    //    (numpy scalars at the top level keep numpy's dtype, in the adapter below.) Lists
    //    and Python numbers have neither the buffer protocol nor DLPack, so they go first.
    if !cast && is_plain_python_tree(obj) {
        if copy == Some(false) {
            return Err(converted_refusal(obj, "a Python number or list, converted"));
        }
        let tree = nested_from_py(obj)?;
        let values = rpjrt_npy::scalars::to_host(&tree, want).pyerr()?;
        let array = values.into_host_array();
        let b = py
            .detach(|| match layout.as_deref() {
                Some(m2m) => c
                    .inner
                    .put_array_with_layout(&array, m2m, &dev, mem.as_ref()),
                None => c.inner.put(&array, &dev, mem.as_ref(), copy_mode(copy)),
            })
            .pyerr()?;
        return wrap_put(py, b, &me);
    }

    // 3. The buffer protocol with a format rpjrt knows, in either byte order (the fast path).
    //    A numpy scalar is read by its dtype, not its buffer: numpy exports a datetime64,
    //    timedelta64 or bytes_ scalar as raw bytes (format "B", eight of them for a
    //    duration), which would be stored as uint8. Those go to the adapter, which refuses
    //    them by dtype (or reinterprets raw void bytes with dtype=, as for arrays).
    refuse_masked(obj)?;
    let mut dlpack_refused = None;
    if let Some(view) = HostView::get(obj) {
        if let Some((t, order)) = rpjrt::host::buffer_format_type(view.format(), view.itemsize())
            .filter(|_| !is_numpy_scalar_without_numbers(obj))
        {
            if want.is_none_or(|w| w == t) {
                return from_view(
                    py,
                    &me,
                    obj,
                    &view,
                    t,
                    order,
                    None,
                    &dev,
                    mem.as_ref(),
                    copy,
                    layout.as_deref(),
                );
            }
        }
    } else if want.is_none()
        && layout.is_none()
        && obj.hasattr("__dlpack__")?
        && !(obj.hasattr("__array__")? && checked_by_dtype(obj))
        && !is_numpy_without_numbers(obj)
        && !obj.is_instance_of::<pyo3::types::PyType>()
    {
        // 4. A DLPack producer without the buffer protocol (torch, jax, cupy...). numpy
        //    arrays of types numpy does not export (datetime64, timedelta64, ml_dtypes'
        //    types) go to the adapter below directly: it reads ml_dtypes' types and refuses
        //    the others by their dtype.
        match crate::dlpack::import(client, obj, &dev, copy) {
            // The producer's own refusal to export (BufferError by the protocol; jax raises
            // its runtime error for a type DLPack lacks, such as int4): the adapter below
            // may still read it through `__array__`. rpjrt's own errors stand.
            Err(e) if is_producer_refusal(py, &e) => dlpack_refused = Some(e),
            other => return other,
        }
    }

    // 5. Everything else goes through the Python adapter (numpy dtypes, lossy casts of
    //    numbers, raw bytes with dtype=...).
    let adapted = match py
        .import("rpjrt._host")?
        .getattr("as_host")?
        .call1((obj, dtype, cast))
    {
        Ok(a) => a,
        // The adapter knows no other way in either: the producer's own refusal is the news.
        Err(e) => match dlpack_refused {
            Some(refusal) => {
                let err = invalid(format!(
                    "cannot put a {}: its __dlpack__ refused to export it ({}), and it offers \
                     no other way to read its data",
                    obj.get_type().name()?,
                    refusal.value(py)
                ));
                err.set_cause(py, Some(refusal));
                drop(e);
                return Err(err);
            }
            None => return Err(e),
        },
    };
    let (data, dt, shape): (Bound<'_, PyAny>, Bound<'_, PyAny>, Option<Vec<i64>>) =
        adapted.extract()?;
    if copy == Some(false)
        && !py
            .import("rpjrt._host")?
            .getattr("shares_memory")?
            .call1((obj, &data))?
            .is_truthy()?
    {
        return Err(converted_refusal(
            obj,
            "converted (its values, dtype= or cast=)",
        ));
    }
    let t = dtype_from_py(&dt)?;
    let view = HostView::get(&data)
        .ok_or_else(|| invalid("the host adapter returned an object without a buffer"))?;
    from_view(
        py,
        &me,
        &data,
        &view,
        t,
        ByteOrder::Native,
        shape,
        &dev,
        mem.as_ref(),
        copy,
        layout.as_deref(),
    )
}

/// Whether an error from reading a DLPack producer is the producer refusing to export
/// (rather than one of rpjrt's errors, or an interruption, which stand as they are).
pub(crate) fn is_producer_refusal(py: Python<'_>, e: &PyErr) -> bool {
    e.is_instance_of::<pyo3::exceptions::PyBufferError>(py)
        || (e.is_instance_of::<pyo3::exceptions::PyException>(py)
            && !crate::errors::is_rpjrt_error(py, e))
}

/// Whether `obj` says (by its `dtype`) that it holds a type packed below a byte, which
/// rpjrt's DLPack import does not unpack (jax exports float4 packed), or a type whose
/// bytes have bits no value uses (float6), which the DLPack import does not check: such an
/// array goes in through `__array__` instead.
fn checked_by_dtype(obj: &Bound<'_, PyAny>) -> bool {
    obj.getattr("dtype")
        .ok()
        .and_then(|d| dtype_from_py(&d).ok())
        .is_some_and(|t| t.byte_width().is_none() || has_spare_bits(t))
}

/// Whether a byte of `t` has bits above the element's (the float6 types: 6 bits in a byte),
/// which must be clear. The sub-byte types are checked by the core when they are packed.
fn has_spare_bits(t: ElementType) -> bool {
    !t.is_sub_byte() && t.bit_width() > 0 && t.bit_width() < 8
}

/// Whether the numpy dtype kind (`dtype.kind`) of a numpy array or scalar is none of
/// numpy's numeric kinds (b, i, u, f, c): dates, durations, objects, text, bytes, records.
/// ml_dtypes' types are kind V too; the adapter reads those by their dtype.
fn numpy_kind_without_numbers(obj: &Bound<'_, PyAny>) -> bool {
    obj.getattr("dtype")
        .and_then(|d| d.getattr("kind"))
        .ok()
        .and_then(|k| k.extract::<String>().ok())
        .is_some_and(|k| !matches!(k.as_str(), "b" | "i" | "u" | "f" | "c"))
}

/// Whether `obj` is a numpy scalar (`numpy.generic`) whose dtype holds no numbers (see
/// [`numpy_kind_without_numbers`]). An exact ndarray, the fast path's usual object, costs
/// one type comparison; other objects one `isinstance`.
fn is_numpy_scalar_without_numbers(obj: &Bound<'_, PyAny>) -> bool {
    let py = obj.py();
    if crate::npy::ndarray_type(py).is_some_and(|t| obj.get_type().is(t)) {
        return false;
    }
    crate::npy::generic_type(py).is_some_and(|g| obj.is_instance(g).unwrap_or(false))
        && numpy_kind_without_numbers(obj)
}

/// Whether `obj` is a numpy array (any subclass) or scalar whose dtype holds no numbers.
fn is_numpy_without_numbers(obj: &Bound<'_, PyAny>) -> bool {
    let py = obj.py();
    let is_numpy = crate::npy::ndarray_type(py)
        .is_some_and(|t| obj.is_instance(t).unwrap_or(false))
        || crate::npy::generic_type(py).is_some_and(|g| obj.is_instance(g).unwrap_or(false));
    is_numpy && numpy_kind_without_numbers(obj)
}

/// Refuses a numpy masked array (as `rpjrt._host.refuse_masked` does): its buffer is its
/// data without the mask, so the masked values would be used as data. Only a subclass of
/// `numpy.ndarray` can be one, so anything else (an exact ndarray, bytes, a memoryview, a
/// numpy scalar, any object before numpy is imported) costs a type comparison.
pub(crate) fn refuse_masked(obj: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = obj.py();
    let Some(ndarray) = crate::npy::ndarray_type(py) else {
        return Ok(());
    };
    let ty = obj.get_type();
    if ty.is(ndarray) || !ty.is_subclass(ndarray)? {
        return Ok(());
    }
    py.import("rpjrt._host")?
        .getattr("refuse_masked")?
        .call1((obj,))?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn from_view(
    py: Python<'_>,
    client: &Py<PyClient>,
    obj: &Bound<'_, PyAny>,
    view: &HostView,
    t: ElementType,
    order: ByteOrder,
    forced_shape: Option<Vec<i64>>,
    dev: &rpjrt::Device,
    mem: Option<&rpjrt::Memory>,
    copy: Option<bool>,
    layout: Option<&[i64]>,
) -> PyResult<Py<PyBuffer>> {
    let rc = &client.get().inner;
    let itemsize = t.host_itemsize();
    if itemsize == 0 {
        return Err(invalid(format!("{t} has no host representation")));
    }
    let (dims, strides) = match forced_shape {
        Some(shape) => {
            // Reinterpreted or adapted host data: C-contiguous bytes in the given shape.
            if !view.is_c_contiguous() {
                return Err(invalid("reinterpreted host data must be contiguous"));
            }
            let have = view.byte_len();
            let need = rpjrt::element_count(&shape)
                .ok()
                .and_then(|n| n.checked_mul(itemsize));
            if need != Some(have) {
                return Err(invalid(format!(
                    "the host data has {have} bytes, but {} needs {}",
                    spec_string(t, &shape),
                    need.map_or("more than the address space".to_string(), |n| n.to_string())
                )));
            }
            let strides = rpjrt::host::c_strides(&shape, itemsize);
            (shape, strides)
        }
        None => {
            if view.itemsize() != itemsize {
                return Err(invalid(format!(
                    "the host data has {}-byte items, but {t} has {itemsize}",
                    view.itemsize()
                )));
            }
            (view.shape(), view.strides())
        }
    };
    // The bytes the view addresses: [start + lo, start + end).
    let (lo, end) = rpjrt::extent(&dims, &strides, itemsize)
        .pyerr()?
        .unwrap_or((0, 0));
    let region = view.region(lo, end)?;
    let offset = (-lo) as usize;
    let mode = if layout.is_some() {
        CopyMode::Always
    } else {
        copy_mode(copy)
    };
    let data = if mode == CopyMode::Always {
        // SAFETY: the region lies inside the held view, which outlives the put below.
        HostData::Borrowed(unsafe { region.as_slice() })
    } else {
        HostData::Owned(Arc::new(PinnedHost::new(obj, view, region)?))
    };
    let mut array = HostArray::new(data, t, &dims)
        .with_byte_strides(&strides, offset)
        .with_byte_order(order);
    if t.is_sub_byte() {
        array = array.unpacked();
    }
    let b = match layout {
        Some(m2m) => py.detach(|| rc.put_array_with_layout(&array, m2m, dev, mem)),
        None => py.detach(|| rc.put(&array, dev, mem, mode)),
    }
    .pyerr()?;
    wrap_put(py, b, client)
}

fn wrap_put(py: Python<'_>, b: rpjrt::Buffer, client: &Py<PyClient>) -> PyResult<Py<PyBuffer>> {
    if b.borrows_host() {
        PyBuffer::wrap_borrowing(py, b, client)
    } else {
        PyBuffer::wrap(py, b, client)
    }
}

/// Whether `obj` is a Python number (not a numpy scalar) or a list/tuple: what takes a
/// parameter's element type as an execute argument (JAX's weak types) and goes through
/// `rpjrt_npy::scalars`.
fn is_python_tree(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<PyList>()
        || obj.is_instance_of::<PyTuple>()
        || obj.is_instance_of::<PyFloat>()
        || obj.is_instance_of::<PyInt>()
        || obj.is_instance_of::<PyComplex>()
}

/// A Python number or (nested) list/tuple of them, for an argument that takes its
/// parameter's type: the value itself, or for a subclass of a number type (numpy's float64
/// and complex128, an `IntEnum`) the equal plain number, so that it goes through the same
/// checked conversion as the number it equals (numpy's cast would wrap 300.0 into int8 as
/// 44 and drop an imaginary part). `None` for anything else.
pub fn as_python_tree<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
    if !is_python_tree(obj) {
        return Ok(None);
    }
    if is_plain_python_tree(obj) {
        return Ok(Some(obj.clone()));
    }
    let py = obj.py();
    let plain = if obj.is_instance_of::<PyComplex>() {
        py.get_type::<PyComplex>().call1((obj,))?
    } else if obj.is_instance_of::<PyFloat>() {
        py.get_type::<PyFloat>().call1((obj,))?
    } else {
        py.get_type::<PyInt>().call1((obj,))?
    };
    Ok(Some(plain))
}

/// [`is_python_tree`] without subclasses of the number types (numpy's float64 is a float).
fn is_plain_python_tree(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<PyList>()
        || obj.is_instance_of::<PyTuple>()
        || obj.is_exact_instance_of::<PyFloat>()
        || obj.is_exact_instance_of::<PyInt>()
        || obj.is_exact_instance_of::<PyBool>()
        || obj.is_exact_instance_of::<PyComplex>()
}

/// numpy's abstract scalar classes, when numpy is imported.
struct NumpyScalars<'py> {
    generic: Bound<'py, PyAny>,
    timedelta64: Bound<'py, PyAny>,
    bool_: Bound<'py, PyAny>,
    integer: Bound<'py, PyAny>,
    floating: Bound<'py, PyAny>,
    complexfloating: Bound<'py, PyAny>,
}

impl<'py> NumpyScalars<'py> {
    fn get(py: Python<'py>) -> PyResult<Option<NumpyScalars<'py>>> {
        let modules = py.import("sys")?.getattr("modules")?;
        let Ok(np) = modules.get_item("numpy") else {
            return Ok(None);
        };
        Ok(Some(NumpyScalars {
            generic: np.getattr("generic")?,
            timedelta64: np.getattr("timedelta64")?,
            bool_: np.getattr("bool_")?,
            integer: np.getattr("integer")?,
            floating: np.getattr("floating")?,
            complexfloating: np.getattr("complexfloating")?,
        }))
    }
}

/// A Python number or nested lists/tuples of numbers as the core's tree (conversion only;
/// shape and values are checked by `rpjrt_npy::scalars`). Leaves are bool, int, float, complex
/// and numpy scalars; anything else is refused here, naming its type.
pub fn nested_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Nested> {
    let mut np = None;
    to_nested(obj, 0, &mut np)
}

fn to_nested<'py>(
    obj: &Bound<'py, PyAny>,
    depth: usize,
    np: &mut Option<Option<NumpyScalars<'py>>>,
) -> PyResult<Nested> {
    let items = |it: &mut dyn Iterator<Item = Bound<'py, PyAny>>,
                 np: &mut Option<Option<NumpyScalars<'py>>>|
     -> PyResult<Nested> {
        if depth > MAX_DEPTH {
            // Deeper than any rank: the core refuses the tree, so stop descending.
            return Ok(Nested::List(Vec::new()));
        }
        let mut v = Vec::with_capacity(it.size_hint().0);
        for x in it {
            v.push(to_nested(&x, depth + 1, np)?);
        }
        Ok(Nested::List(v))
    };
    if let Ok(l) = obj.cast::<PyList>() {
        return items(&mut l.iter(), np);
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return items(&mut t.iter(), np);
    }
    Ok(Nested::Scalar(scalar_from_py(obj, np)?))
}

fn scalar_from_py<'py>(
    obj: &Bound<'py, PyAny>,
    np: &mut Option<Option<NumpyScalars<'py>>>,
) -> PyResult<Scalar> {
    let py = obj.py();
    if obj.is_exact_instance_of::<PyFloat>() {
        return Ok(Scalar::Float(obj.extract()?));
    }
    if obj.is_exact_instance_of::<PyBool>() {
        return Ok(Scalar::Bool(obj.extract()?));
    }
    if obj.is_exact_instance_of::<PyInt>() {
        return int_from_py(obj);
    }
    let np = match np {
        Some(np) => np,
        None => np.insert(NumpyScalars::get(py)?),
    };
    let np = match np.as_ref() {
        Some(n) if obj.is_instance(&n.generic)? => Some(n),
        _ => None,
    };
    if let Some(np) = np {
        // A duration is no number, though numpy makes timedelta64 a signedinteger (int()
        // of one gives its count of its unit, or a datetime.timedelta, or None for NaT).
        if obj.is_instance(&np.timedelta64)? {
            return Err(not_a_number(obj)?);
        }
        if obj.is_instance(&np.bool_)? {
            return Ok(Scalar::Bool(obj.is_truthy()?));
        }
        if obj.is_instance(&np.integer)? {
            return int_from_py(&py.get_type::<PyInt>().call1((obj,))?);
        }
        if obj.is_instance(&np.floating)? {
            return Ok(Scalar::Float(obj.extract()?));
        }
        if obj.is_instance(&np.complexfloating)? {
            return complex_from_py(&py.get_type::<PyComplex>().call1((obj,))?);
        }
    }
    if obj.is_instance_of::<PyBool>() {
        return Ok(Scalar::Bool(obj.is_truthy()?));
    }
    if obj.is_instance_of::<PyInt>() {
        return int_from_py(&py.get_type::<PyInt>().call1((obj,))?);
    }
    if obj.is_instance_of::<PyFloat>() {
        return Ok(Scalar::Float(obj.extract()?));
    }
    if obj.is_instance_of::<PyComplex>() {
        return complex_from_py(obj);
    }
    Err(not_a_number(obj)?)
}

/// The refusal of a list item that is no number, naming its type (an error reading its
/// repr other than an ordinary failure, such as an interruption, stands instead).
fn not_a_number(obj: &Bound<'_, PyAny>) -> PyResult<PyErr> {
    let repr: String = obj
        .repr()
        .map(|r| r.to_string())
        .or_describe(|| "?".into())?;
    Ok(invalid(format!(
        "cannot put a {} ({}) on a device: a list must hold only numbers (bool, int, float or \
         complex)",
        obj.get_type().name()?,
        repr.chars().take(40).collect::<String>()
    )))
}

/// An exact Python int: `i128` where it fits, else its decimal text.
fn int_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Scalar> {
    if let Some(v) = obj.extract::<i64>().or_none()? {
        return Ok(Scalar::Int(v.into()));
    }
    if let Some(v) = obj.extract::<i128>().or_none()? {
        return Ok(Scalar::Int(v));
    }
    Ok(Scalar::BigInt(obj.str()?.to_string().into()))
}

fn complex_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Scalar> {
    let c = obj.cast::<PyComplex>()?;
    Ok(Scalar::Complex(c.real(), c.imag()))
}

/// `(bytes, element type code, shape)` of Python numbers or nested lists of them under
/// the core's rule (`rpjrt.scalars.to_host`), for `rpjrt._host.as_host`.
#[pyfunction]
#[pyo3(signature = (obj, dtype = None))]
pub fn _python_to_host<'py>(
    obj: &Bound<'py, PyAny>,
    dtype: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyBytes>, i32, Vec<i64>)> {
    let want = dtype.map(dtype_from_py).transpose()?;
    let tree = nested_from_py(obj)?;
    let v = rpjrt_npy::scalars::to_host(&tree, want).pyerr()?;
    Ok((
        PyBytes::new(obj.py(), &v.bytes),
        v.element_type.code(),
        v.dims,
    ))
}

/// `(bytes, element type code, shape)` of dense native host data of element type `from_`
/// (`data`, any buffer-protocol object of `shape`'s element count) converted into `dtype`
/// under the core's rule for numbers (`rpjrt.scalars.convert`), for `rpjrt._host`'s
/// numpy path without `cast=True`.
#[pyfunction]
pub fn _convert_host<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    from_: &Bound<'py, PyAny>,
    shape: Vec<i64>,
    dtype: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyBytes>, i32, Vec<i64>)> {
    let from = dtype_from_py(from_)?;
    let want = dtype_from_py(dtype)?;
    let view = HostView::get(data);
    let bytes = view
        .as_ref()
        .and_then(HostView::contiguous_bytes)
        .ok_or_else(|| invalid("the data to convert must be a C-contiguous buffer"))?;
    let v = py
        .detach(|| rpjrt_npy::scalars::convert(bytes, from, shape, want))
        .pyerr()?;
    Ok((PyBytes::new(py, &v.bytes), v.element_type.code(), v.dims))
}

/// `(shape, element type code)` of Python numbers or nested lists of them: the shape
/// checks and the default type of `rpjrt.scalars` without converting values (for the
/// lossy `cast=True` path, which converts as numpy's `astype` does).
#[pyfunction]
#[pyo3(signature = (obj, dtype = None))]
pub fn _python_shape(
    obj: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Vec<i64>, i32)> {
    let want = dtype.map(dtype_from_py).transpose()?;
    let tree = nested_from_py(obj)?;
    let (leaves, dims) = rpjrt_npy::scalars::flatten(&tree).pyerr()?;
    let t = match want {
        Some(t) => t,
        None => rpjrt_npy::scalars::default_element_type(&leaves).pyerr()?,
    };
    Ok((dims, t.code()))
}
