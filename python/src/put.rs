//! `Client.put`: host data (any buffer-protocol object, DLPack producer, number, list) to a
//! device buffer.
//!
//! Conversion only: a Python object becomes an `rpjrt::HostArray` (bytes, element type,
//! dims, byte strides, byte order) and `rpjrt::Client::put` does the rest (checks, layout,
//! gather, byte swapping, bool normalisation, fallible allocation). Python numbers and
//! nested lists become an `rpjrt_npy::scalars::Nested` tree, which `rpjrt_npy::scalars::to_host`
//! checks and converts under the one rule for numbers.

use crate::detach::Detach;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyComplex, PyFloat, PyInt, PyList, PyTuple, PyType};
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
    // Its own methods are Python code rpjrt calls (see `detach::calling_python`).
    crate::detach::calling_python(layout.py(), || layout_from_py_unguarded(layout))
}

fn layout_from_py_unguarded(layout: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
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
    // The value's own methods (`__array__`, `__dlpack__`, `__len__`, `__float__`, a
    // dtype's attributes, ...) are Python code rpjrt calls (see `detach::calling_python`).
    crate::detach::calling_python(client.py(), || {
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
                    .detach_call(|| match &mem {
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
            let values = read_tree(obj)?.to_host(want)?;
            let array = values.into_host_array();
            let b = py
                .detach_call(|| match layout.as_deref() {
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
            if let Some((t, order)) =
                rpjrt::host::buffer_format_type(view.format(), view.itemsize())
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
            match crate::dlpack::import_to(client, obj, &dev, mem.as_ref(), copy) {
                // The producer's own refusal to export (BufferError by the protocol; jax raises
                // its runtime error for a type DLPack lacks, such as int4): the adapter below
                // may still read it through `__array__`. rpjrt's own errors stand.
                Err(e) if is_producer_refusal(py, &e) => dlpack_refused = Some(e),
                other => return other,
            }
        }

        // 5. Everything else goes through the Python adapter (numpy dtypes, lossy casts of
        //    numbers, raw bytes with dtype=...).
        let as_host = py.import("rpjrt._host")?.getattr("as_host")?;
        let adapted = match crate::detach::calling_python(py, || as_host.call1((obj, dtype, cast)))
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
    })
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
    // The pin of a buffer that may use the memory in place, which the Buffer shares (so
    // that the cycle collector can see the exporter: `pybuf::HostLink`).
    let mut pinned = None;
    let data = if mode == CopyMode::Always {
        // SAFETY: the region lies inside the held view, which outlives the put below.
        HostData::Borrowed(unsafe { region.as_slice() })
    } else {
        let pin = Arc::new(PinnedHost::new(obj, view, region)?);
        pinned = Some(Arc::clone(&pin));
        HostData::Owned(pin)
    };
    let mut array = HostArray::new(data, t, &dims)
        .with_byte_strides(&strides, offset)
        .with_byte_order(order);
    if t.is_sub_byte() {
        array = array.unpacked();
    }
    let b = match layout {
        Some(m2m) => py.detach_call(|| rc.put_array_with_layout(&array, m2m, dev, mem)),
        None => py.detach_call(|| rc.put(&array, dev, mem, mode)),
    }
    .pyerr()?;
    match pinned {
        Some(pin) if b.borrows_host() => {
            // The pin's holders are counted without the array's share.
            drop(array);
            PyBuffer::wrap_pinned(py, b, client, pin)
        }
        _ => wrap_put(py, b, client),
    }
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
    // A subclass's own `__float__`/`__index__`... is Python code rpjrt calls.
    let plain = crate::detach::calling_python(py, || {
        if obj.is_instance_of::<PyComplex>() {
            py.get_type::<PyComplex>().call1((obj,))
        } else if obj.is_instance_of::<PyFloat>() {
            py.get_type::<PyFloat>().call1((obj,))
        } else {
            py.get_type::<PyInt>().call1((obj,))
        }
    })?;
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

/// The element type and numpy dtype of a numpy scalar; `None` for a Python number, or for a
/// numpy type rpjrt has no type for.
type Typed<'py> = Option<(ElementType, Bound<'py, PyAny>)>;

/// numpy's scalar classes that the reader tells apart, when numpy is imported, and what
/// the scalar types met so far are.
struct NumpyScalars<'py> {
    generic: Bound<'py, PyAny>,
    timedelta64: Bound<'py, PyAny>,
    /// Each scalar type met: its element type and numpy dtype, or `None` where rpjrt has
    /// no such type.
    types: Vec<(Bound<'py, PyType>, Typed<'py>)>,
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
            types: Vec::new(),
        }))
    }

    /// The element type and numpy dtype of numpy (or ml_dtypes) scalar `obj`, `None` where
    /// rpjrt has no type for its dtype (`longdouble`, dates, text...).
    fn element_type(&mut self, obj: &Bound<'py, PyAny>) -> PyResult<Typed<'py>> {
        let ty = obj.get_type();
        if let Some((_, found)) = self.types.iter().find(|(t, _)| t.is(&ty)) {
            return Ok(found.clone());
        }
        let py = obj.py();
        let dtype = obj.getattr("dtype")?;
        let found = py
            .import("rpjrt._dtypes")?
            .getattr("_lookup")?
            .call1((&dtype,))?;
        let found = if found.is_none() {
            None
        } else {
            let code: i32 = found.getattr("code")?.extract()?;
            Some((ElementType::from_code(code).pyerr()?, dtype))
        };
        self.types.push((ty, found.clone()));
        Ok(found)
    }
}

/// A Python number or nested lists/tuples of numbers, read for the core's rule
/// (`rpjrt_npy::scalars`; conversion only, which checks shape and values): the tree, and
/// which of its leaves were numpy or ml_dtypes scalars, which keep their dtype as numpy
/// keeps it (`[np.int8(1)]` is int8, a NaN keeps its bits).
pub struct PyTree<'py> {
    nested: Nested,
    /// (row-major index, element type) of the leaves that were numpy scalars, ascending.
    typed: Vec<(usize, ElementType)>,
    /// The numpy dtype of each type in `typed`, once, in the order met.
    dtypes: Vec<(ElementType, Bound<'py, PyAny>)>,
}

/// Reads a Python number or nested lists/tuples of them (see [`PyTree`]). Leaves are bool,
/// int, float, complex and numpy (and ml_dtypes) scalars; anything else is refused here,
/// naming its type, and so is a numpy scalar of a dtype rpjrt has no type for
/// (`longdouble`), as the bare scalar is.
pub fn read_tree<'py>(obj: &Bound<'py, PyAny>) -> PyResult<PyTree<'py>> {
    // The leaves' own methods are Python code rpjrt calls (see `detach::calling_python`).
    crate::detach::calling_python(obj.py(), || read_tree_unguarded(obj))
}

fn read_tree_unguarded<'py>(obj: &Bound<'py, PyAny>) -> PyResult<PyTree<'py>> {
    let mut r = Reader {
        np: None,
        leaves: 0,
        tree: PyTree {
            nested: Nested::List(Vec::new()),
            typed: Vec::new(),
            dtypes: Vec::new(),
        },
    };
    r.tree.nested = r.read(obj, 0)?;
    Ok(r.tree)
}

struct Reader<'py> {
    np: Option<Option<NumpyScalars<'py>>>,
    /// Leaves read so far (in row-major order for a rectangular tree).
    leaves: usize,
    tree: PyTree<'py>,
}

impl<'py> Reader<'py> {
    fn read(&mut self, obj: &Bound<'py, PyAny>, depth: usize) -> PyResult<Nested> {
        let mut items = |it: &mut dyn Iterator<Item = Bound<'py, PyAny>>| -> PyResult<Nested> {
            if depth > MAX_DEPTH {
                // Deeper than any rank: the core refuses the tree, so stop descending.
                return Ok(Nested::List(Vec::new()));
            }
            let mut v = Vec::with_capacity(it.size_hint().0);
            for x in it {
                v.push(self.read(&x, depth + 1)?);
            }
            Ok(Nested::List(v))
        };
        if let Ok(l) = obj.cast::<PyList>() {
            return items(&mut l.iter());
        }
        if let Ok(t) = obj.cast::<PyTuple>() {
            return items(&mut t.iter());
        }
        let (s, typed) = self.scalar(obj)?;
        if let Some((t, dtype)) = typed {
            self.tree.typed.push((self.leaves, t));
            if !self.tree.dtypes.iter().any(|(u, _)| *u == t) {
                self.tree.dtypes.push((t, dtype));
            }
        }
        self.leaves += 1;
        Ok(Nested::Scalar(s))
    }

    /// One leaf, and its element type and numpy dtype when it is a numpy scalar.
    fn scalar(&mut self, obj: &Bound<'py, PyAny>) -> PyResult<(Scalar, Typed<'py>)> {
        let py = obj.py();
        if obj.is_exact_instance_of::<PyFloat>() {
            return Ok((Scalar::Float(obj.extract()?), None));
        }
        if obj.is_exact_instance_of::<PyBool>() {
            return Ok((Scalar::Bool(obj.extract()?), None));
        }
        if obj.is_exact_instance_of::<PyInt>() {
            return Ok((int_from_py(obj)?, None));
        }
        let np = match &mut self.np {
            Some(np) => np,
            None => self.np.insert(NumpyScalars::get(py)?),
        };
        if let Some(np) = np.as_mut() {
            if obj.is_instance(&np.generic)? {
                // A duration is no number, though numpy makes timedelta64 a
                // signedinteger (int() of one gives its count of its unit, or a
                // datetime.timedelta, or None for NaT).
                if obj.is_instance(&np.timedelta64)? {
                    return Err(not_a_number(obj)?);
                }
                return match np.element_type(obj)? {
                    Some((t, dtype)) => Ok((typed_scalar(obj, t)?, Some((t, dtype)))),
                    // ml_dtypes' types are of kind V too: one rpjrt lacks is a number.
                    None if numpy_kind_without_numbers(obj) && !is_ml_dtypes(obj) => {
                        Err(not_a_number(obj)?)
                    }
                    None => Err(no_type_for(obj)?),
                };
            }
        }
        if obj.is_instance_of::<PyBool>() {
            return Ok((Scalar::Bool(obj.is_truthy()?), None));
        }
        if obj.is_instance_of::<PyInt>() {
            return Ok((int_from_py(&py.get_type::<PyInt>().call1((obj,))?)?, None));
        }
        if obj.is_instance_of::<PyFloat>() {
            return Ok((Scalar::Float(obj.extract()?), None));
        }
        if obj.is_instance_of::<PyComplex>() {
            return Ok((complex_from_py(obj)?, None));
        }
        Err(not_a_number(obj)?)
    }
}

/// The value of numpy (or ml_dtypes) scalar `obj` of element type `t`, exactly: integers
/// through `int()`, floats and complex numbers from their bits, NaN payloads included
/// (`float()` of a float32 NaN would set its quiet bit).
fn typed_scalar(obj: &Bound<'_, PyAny>, t: ElementType) -> PyResult<Scalar> {
    use rpjrt::ElementKind as K;
    use rpjrt_npy::scalars::decode_float;
    let py = obj.py();
    match t.kind() {
        K::Bool => Ok(Scalar::Bool(obj.is_truthy()?)),
        K::Signed | K::Unsigned => int_from_py(&py.get_type::<PyInt>().call1((obj,))?),
        K::Float | K::Complex => {
            let bytes = obj.call_method0("tobytes")?;
            let bytes = bytes.cast::<PyBytes>()?.as_bytes();
            let complex = t.kind() == K::Complex;
            let part = match t {
                ElementType::C64 => ElementType::F32,
                ElementType::C128 => ElementType::F64,
                t => t,
            };
            let size = part.host_itemsize();
            if bytes.len() != size * (1 + usize::from(complex)) {
                return Err(invalid(format!(
                    "a {} scalar gave {} bytes, not {}",
                    t,
                    bytes.len(),
                    t.host_itemsize()
                )));
            }
            let value = |b: &[u8]| -> f64 {
                let bits = match b.len() {
                    8 => u64::from_ne_bytes(b.try_into().unwrap_or_default()),
                    4 => u64::from(u32::from_ne_bytes(b.try_into().unwrap_or_default())),
                    2 => u64::from(u16::from_ne_bytes(b.try_into().unwrap_or_default())),
                    _ => u64::from(b[0]),
                };
                decode_float(bits, part).unwrap_or(f64::NAN)
            };
            Ok(if complex {
                Scalar::Complex(value(&bytes[..size]), value(&bytes[size..]))
            } else {
                Scalar::Float(value(bytes))
            })
        }
        _ => Err(not_a_number(obj)?),
    }
}

/// Whether `obj`'s type comes from ml_dtypes.
fn is_ml_dtypes(obj: &Bound<'_, PyAny>) -> bool {
    obj.get_type()
        .module()
        .is_ok_and(|m| m.to_str().is_ok_and(|m| m.starts_with("ml_dtypes")))
}

/// The refusal of a numpy scalar of a numeric dtype rpjrt has no type for (`longdouble`,
/// `clongdouble`), as the bare scalar is refused: it is not read through `float()`, which
/// would turn a value beyond float64 into an infinity.
fn no_type_for(obj: &Bound<'_, PyAny>) -> PyResult<PyErr> {
    let py = obj.py();
    let why = py
        .import("rpjrt._host")?
        .getattr("no_equivalent")?
        .call1((obj.getattr("dtype")?,))?
        .str()?
        .to_string();
    let ty = obj.get_type();
    Ok(invalid(format!(
        "cannot put a {}.{} ({}) on a device: {why}",
        ty.module()?,
        ty.name()?,
        short_repr(obj)?
    )))
}

/// `repr(obj)`, shortened to 40 characters and `...` ("?" where the repr itself fails).
fn short_repr(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    let repr: String = obj
        .repr()
        .map(|r| r.to_string())
        .or_describe(|| "?".into())?;
    let mut short: String = repr.chars().take(40).collect();
    if short.len() < repr.len() {
        short.push_str("...");
    }
    Ok(short)
}

/// The refusal of a list item that is no number, naming its type (an error reading its
/// repr other than an ordinary failure, such as an interruption, stands instead).
fn not_a_number(obj: &Bound<'_, PyAny>) -> PyResult<PyErr> {
    Ok(invalid(format!(
        "cannot put a {} ({}) on a device: a list must hold only numbers (bool, int, float or \
         complex, or numpy scalars of them)",
        obj.get_type().name()?,
        short_repr(obj)?
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

impl PyTree<'_> {
    /// The tree's values as a dense host array of `want`, or of the type the values imply:
    /// for Python numbers alone the core's (one kind only: `bool`, `int64`, `float64`,
    /// `complex128`), and where numpy scalars are among them numpy's
    /// ([`PyTree::numpy_type`]). Either way the values are converted under the core's rule.
    pub fn to_host(&self, want: Option<ElementType>) -> PyResult<rpjrt_npy::scalars::HostValues> {
        let (leaves, dims) = rpjrt_npy::scalars::flatten(&self.nested).pyerr()?;
        let (want, promoted) = match want {
            None if !self.typed.is_empty() => {
                let (t, how) = self.numpy_type(&leaves, &dims)?;
                (Some(t), Some(how))
            }
            want => (want, None),
        };
        rpjrt_npy::scalars::values_to_host_from(&leaves, &self.typed, dims, want).map_err(|e| {
            match promoted {
                Some(how) if e.code() == rpjrt::Code::InvalidArgument => {
                    invalid(format!("{e} ({how}; pass dtype= to choose another type)"))
                }
                _ => crate::errors::to_py(e),
            }
        })
    }

    /// The element type of the values with `want` where given, else as [`PyTree::to_host`]
    /// picks it (for `cast=True`, which converts as numpy's `astype` does).
    pub fn element_type(&self, want: Option<ElementType>) -> PyResult<(Vec<i64>, ElementType)> {
        let (leaves, dims) = rpjrt_npy::scalars::flatten(&self.nested).pyerr()?;
        let t = match want {
            Some(t) => t,
            None if !self.typed.is_empty() => self.numpy_type(&leaves, &dims)?.0,
            None => rpjrt_npy::scalars::default_element_type(&leaves).pyerr()?,
        };
        Ok((dims, t))
    }

    /// The element type `numpy.asarray` gives these values, where some are numpy scalars:
    /// `numpy.result_type` of their dtypes and of the dtypes numpy reads Python's numbers
    /// in a list as (`bool`, `int64` or `uint64` beyond it, `float64`, `complex128`); and
    /// how it came about, for messages. An int beyond 64 bits (numpy would make an array of
    /// Python objects) and types numpy cannot promote are refused.
    fn numpy_type(&self, leaves: &[&Scalar], dims: &[i64]) -> PyResult<(ElementType, String)> {
        let Some((_, first)) = self.dtypes.first() else {
            return Err(invalid("no numpy scalars to promote"));
        };
        let py = first.py();
        let mut dtypes: Vec<Bound<'_, PyAny>> =
            self.dtypes.iter().map(|(_, d)| d.clone()).collect();
        let mut names: Vec<String> = self.dtypes.iter().map(|(t, _)| t.to_string()).collect();
        let mut python: Vec<&str> = Vec::new();
        let mut typed = self.typed.iter().peekable();
        for (i, s) in leaves.iter().enumerate() {
            if typed.next_if(|&&(at, _)| at == i).is_some() {
                continue;
            }
            let dtype = match s {
                Scalar::Bool(_) => "bool",
                Scalar::Int(v) if i64::try_from(*v).is_ok() => "int64",
                Scalar::Int(v) if u64::try_from(*v).is_ok() => "uint64",
                Scalar::Int(_) | Scalar::BigInt(_) => {
                    return Err(invalid(format!(
                        "{s}{} does not fit in 64 bits: numpy would hold this list, which has \
                         numpy scalars, as Python objects, which rpjrt has no type for; pass \
                         dtype= to say what to store",
                        rpjrt_npy::scalars::index_text(dims, i)
                    )))
                }
                Scalar::Float(_) => "float64",
                Scalar::Complex(..) => "complex128",
            };
            if !python.contains(&dtype) {
                python.push(dtype);
            }
        }
        let np = py.import("numpy")?;
        for dtype in python {
            dtypes.push(np.getattr("dtype")?.call1((dtype,))?);
            names.push(format!("Python numbers read as {dtype}"));
        }
        let names = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => names.join(""),
        };
        let result = np
            .getattr("result_type")?
            .call1(PyTuple::new(py, &dtypes)?)
            .or_refuse(|| {
                invalid(format!(
                    "the list holds {names}, which numpy promotes to no one dtype; pass dtype= \
                     to say what to store"
                ))
            })?;
        let found = py
            .import("rpjrt._dtypes")?
            .getattr("_lookup")?
            .call1((&result,))?;
        if found.is_none() {
            return Err(invalid(format!(
                "the list holds {names}, which numpy promotes to {}, a dtype rpjrt has no type \
                 for; pass dtype= to say what to store",
                result.str()?
            )));
        }
        let t = ElementType::from_code(found.getattr("code")?.extract()?).pyerr()?;
        Ok((t, format!("{t} is numpy's type for {names}")))
    }
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
    let v = read_tree(obj)?.to_host(want)?;
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
        .detach_call(|| rpjrt_npy::scalars::convert(bytes, from, shape, want))
        .pyerr()?;
    Ok((PyBytes::new(py, &v.bytes), v.element_type.code(), v.dims))
}

/// `(shape, element type code)` of Python numbers or nested lists of them: the shape
/// checks and the type `Client.put` picks ([`PyTree::to_host`]) without converting
/// values (for the lossy `cast=True` path, which converts as numpy's `astype` does).
#[pyfunction]
#[pyo3(signature = (obj, dtype = None))]
pub fn _python_shape(
    obj: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Vec<i64>, i32)> {
    let want = dtype.map(dtype_from_py).transpose()?;
    let (dims, t) = read_tree(obj)?.element_type(want)?;
    Ok((dims, t.code()))
}
