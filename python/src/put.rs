//! `Client.put`: host data (any buffer-protocol object, DLPack producer, number, list) to a
//! device buffer.
//!
//! Conversion only: a Python object becomes an `rpjrt::HostArray` (bytes, element type,
//! dims, byte strides, byte order) and `rpjrt::Client::put` does the rest (checks, layout,
//! gather, byte swapping, bool normalisation, fallible allocation).

use std::sync::Arc;

use pyo3::prelude::*;
use rpjrt::{ByteOrder, CopyMode, ElementType, HostArray, HostData};

use crate::buffer::PyBuffer;
use crate::client::PyClient;
use crate::convert::{dtype_from_py, spec_string};
use crate::errors::{invalid, PyErrExt};
use crate::pybuf::{format_type, HostView, PinnedHost};

/// The copy mode of Python's `copy=` argument (`True`, `None`, `False`).
pub fn copy_mode(copy: Option<bool>) -> CopyMode {
    match copy {
        Some(true) => CopyMode::Always,
        None => CopyMode::IfNeeded,
        Some(false) => CopyMode::Never,
    }
}

pub fn put(
    client: &Bound<'_, PyClient>,
    obj: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
    memory: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    copy: Option<bool>,
) -> PyResult<Py<PyBuffer>> {
    put_with(client, obj, device, memory, dtype, copy, false, None)
}

/// The `layout=` argument of `Client.put`: a sequence of dimension numbers
/// (`minor_to_major`) or anything with a `minor_to_major` attribute and no tiles (such as
/// `rpjrt.transfer.DeviceLayout`).
pub fn layout_from_py(layout: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    let bad = || {
        invalid(format!(
            "layout= takes minor_to_major dimension numbers (a sequence of ints) or a \
             DeviceLayout, not {}",
            layout
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "?".into())
        ))
    };
    if layout.hasattr("minor_to_major")? {
        if let Ok(tiles) = layout.getattr("tiles") {
            if tiles.len().unwrap_or(0) > 0 {
                return Err(invalid(
                    "a tiled device layout cannot be requested for a put; give \
                     minor_to_major only",
                ));
            }
        }
        return layout
            .getattr("minor_to_major")?
            .extract::<Vec<i64>>()
            .map_err(|_| bad());
    }
    if layout.is_instance_of::<pyo3::types::PyString>() {
        return Err(bad());
    }
    layout.extract::<Vec<i64>>().map_err(|_| bad())
}

/// [`put`] with `cast` and `layout`: Python numbers and lists may be converted lossily (wrapping,
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

    // 1. A Buffer: copy it to the target.
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
        let rb = src.rb();
        let out = py
            .detach(|| match &mem {
                Some(m) => rb.copy_to_memory(m),
                None => rb.copy_to_device(&dev),
            })
            .pyerr()?;
        return PyBuffer::wrap(py, out, &me);
    }

    // 2. The buffer protocol with a format rpjrt knows, in either byte order (the fast path).
    if let Some(view) = HostView::get(obj) {
        if let Some((t, order)) = format_type(view.format(), view.itemsize()) {
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
        && !obj.is_instance_of::<pyo3::types::PyType>()
    {
        // 3. A DLPack producer without the buffer protocol (torch, jax, cupy...). numpy
        //    arrays of ml_dtypes types get here too; numpy refuses to export those, and
        //    the adapter below handles them.
        match crate::dlpack::import(client, obj, &dev, copy) {
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyBufferError>(py) => {}
            other => return other,
        }
    }

    // 4. Everything else goes through the Python adapter (numpy dtypes, lists, numbers,
    //    raw bytes with dtype=...).
    let adapted = py
        .import("rpjrt._host")?
        .getattr("as_host")?
        .call1((obj, dtype, cast))?;
    let (data, dt, shape): (Bound<'_, PyAny>, Bound<'_, PyAny>, Option<Vec<i64>>) =
        adapted.extract()?;
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
    if b.borrows_host() {
        PyBuffer::wrap_borrowing(py, b, client)
    } else {
        PyBuffer::wrap(py, b, client)
    }
}
