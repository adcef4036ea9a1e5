//! `Client.put`: host data (any buffer-protocol object, DLPack producer, number, list) to a
//! device buffer.

use std::sync::Arc;

use pyo3::prelude::*;
use rpjrt::ElementType;

use crate::buffer::PyBuffer;
use crate::client::PyClient;
use crate::convert::{dtype_from_py, spec_string};
use crate::errors::{invalid, PyErrExt};
use crate::pybuf::{classify, format_type, gather, host_itemsize, HostView, Layout, PinnedHost};

/// A raw address that may cross into `py.detach` (the view it points into outlives the call).
#[derive(Clone, Copy)]
struct SendPtr(usize);

pub fn put(
    client: &Bound<'_, PyClient>,
    obj: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
    memory: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    copy: Option<bool>,
) -> PyResult<Py<PyBuffer>> {
    let py = client.py();
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
        let rb = src.rb();
        let out = py
            .detach(|| match &mem {
                Some(m) => rb.copy_to_memory(m),
                None => rb.copy_to_device(&dev),
            })
            .pyerr()?;
        return PyBuffer::wrap(py, out, &me);
    }

    // 2. The buffer protocol with a format rpjrt knows (the fast path).
    if let Some(view) = HostView::get(obj) {
        if let Some(t) = format_type(view.format(), view.itemsize()) {
            if want.is_none_or(|w| w == t) {
                return from_view(py, &me, obj, &view, t, None, &dev, mem.as_ref(), copy);
            }
        }
    } else if want.is_none()
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
        .call1((obj, dtype))?;
    let (data, dt, shape): (Bound<'_, PyAny>, Bound<'_, PyAny>, Option<Vec<i64>>) =
        adapted.extract()?;
    let t = dtype_from_py(&dt)?;
    let view = HostView::get(&data)
        .ok_or_else(|| invalid("the host adapter returned an object without a buffer"))?;
    from_view(py, &me, &data, &view, t, shape, &dev, mem.as_ref(), copy)
}

#[allow(clippy::too_many_arguments)]
fn from_view(
    py: Python<'_>,
    client: &Py<PyClient>,
    obj: &Bound<'_, PyAny>,
    view: &HostView,
    t: ElementType,
    forced_shape: Option<Vec<i64>>,
    dev: &rpjrt::Device,
    mem: Option<&rpjrt::Memory>,
    copy: Option<bool>,
) -> PyResult<Py<PyBuffer>> {
    let rc = &client.get().inner;
    let itemsize = host_itemsize(t);
    if itemsize == 0 {
        return Err(invalid(format!("{t} has no host representation")));
    }
    let (dims, layout) = match forced_shape {
        Some(shape) => {
            let strides = view.strides();
            let vshape = view.shape();
            if !matches!(classify(&vshape, &strides, view.itemsize()), Layout::C) {
                return Err(invalid("reinterpreted host data must be contiguous"));
            }
            let have: i64 = vshape.iter().product::<i64>() * view.itemsize() as i64;
            let need: i64 = shape.iter().product::<i64>() * itemsize as i64;
            if have != need {
                return Err(invalid(format!(
                    "the host data has {have} bytes, but {} needs {need}",
                    spec_string(t, &shape)
                )));
            }
            (shape, Layout::C)
        }
        None => {
            if view.itemsize() != itemsize {
                return Err(invalid(format!(
                    "the host data has {}-byte items, but {t} has {itemsize}",
                    view.itemsize()
                )));
            }
            let dims = view.shape();
            let layout = classify(&dims, &view.strides(), itemsize);
            (dims, layout)
        }
    };
    let count: usize = dims.iter().map(|&d| d.max(0) as usize).product();
    let dense_len = count * itemsize;
    let base = SendPtr(view.ptr() as usize);

    // Sub-byte types: numpy keeps one element per byte, PJRT wants them packed.
    if t.is_sub_byte() {
        if copy == Some(false) {
            return Err(invalid(format!(
                "copy=False is impossible for {t}: its elements must be packed"
            )));
        }
        let strides = view.strides();
        let packed = py.detach(|| {
            let dense = match &layout {
                Layout::C => dense_slice(base, dense_len).to_vec(),
                // SAFETY: the view addresses every element at these strides while it is held.
                _ => unsafe { gather(base.0 as *const u8, &dims, &strides, itemsize) },
            };
            rpjrt::pack_sub_byte(t, &dense)
        });
        let b = py
            .detach(|| rc.buffer_from_host(&packed, t, &dims, None, dev, mem))
            .pyerr()?;
        return PyBuffer::wrap(py, b, client);
    }

    match (copy, &layout) {
        // Zero-copy: the buffer borrows the exporter's memory, pinned by a memoryview.
        (Some(false) | None, Layout::C) => {
            let owner: Arc<dyn rpjrt::HostBytes> = Arc::new(PinnedHost::new(obj, view, dense_len)?);
            let b = py
                .detach(|| rc.buffer_from_host_owned(owner, t, &dims, None, dev, mem))
                .pyerr()?;
            if copy == Some(false) && dense_len > 0 {
                // The plugin may have copied after all (e.g. misaligned data, device memory).
                let aliased = b.unsafe_pointer().map(|p| p == base.0).unwrap_or(false);
                if !aliased {
                    return Err(invalid(format!(
                        "copy=False: the plugin ({} on {dev}) did not use this host memory in place; \
                         the data is at {:#x} ({} bytes past a 64-byte boundary; XLA's CPU plugins \
                         alias only 64-byte-aligned memory, other plugins none); pass copy=None to \
                         allow a copy",
                        client.get().platform_name(),
                        base.0,
                        base.0 % 64
                    )));
                }
            }
            PyBuffer::wrap_borrowing(py, b, client)
        }
        (Some(false), _) => Err(invalid(
            "copy=False needs C-contiguous host data; this data is strided (pass copy=None to allow one copy)",
        )),
        (_, Layout::C) => {
            let b = py
                .detach(|| rc.buffer_from_host(dense_slice(base, dense_len), t, &dims, None, dev, mem))
                .pyerr()?;
            PyBuffer::wrap(py, b, client)
        }
        (_, Layout::Strided(strides, span)) => {
            let span = *span;
            let b = py
                .detach(|| rc.buffer_from_host(dense_slice(base, span), t, &dims, Some(strides), dev, mem))
                .pyerr()?;
            PyBuffer::wrap(py, b, client)
        }
        (_, Layout::Gather) => {
            let strides = view.strides();
            let b = py
                .detach(|| {
                    // SAFETY: the view addresses every element at these strides while held.
                    let dense = unsafe { gather(base.0 as *const u8, &dims, &strides, itemsize) };
                    rc.buffer_from_host(&dense, t, &dims, None, dev, mem)
                })
                .pyerr()?;
            PyBuffer::wrap(py, b, client)
        }
    }
}

/// The `len` bytes at `p` (a held buffer view).
fn dense_slice<'a>(p: SendPtr, len: usize) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: callers pass the start of a held buffer-protocol view and at most the bytes it
    // covers; the view outlives the returned slice's use (both stay inside `from_view`).
    unsafe { std::slice::from_raw_parts(p.0 as *const u8, len) }
}
