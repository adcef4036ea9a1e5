//! DLPack, both ways: `Buffer.__dlpack__` / `__dlpack_device__` and `from_dlpack`.
//!
//! Only the PyCapsule protocol lives here; the C structs, the export deleter and the import
//! (checks, ownership, `Client::put`) are `rpjrt::dlpack`.

use crate::detach::Detach;
use std::ffi::{c_void, CStr};
use std::ptr::NonNull;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};
use rpjrt::dlpack::{
    DlManagedTensor, DlManagedTensorVersioned, Exported, ImportedTensor, Managed, PlanImport,
    DEVICE_CPU, DEVICE_CUDA_HOST,
};

use crate::buffer::PyBuffer;
use crate::client::PyClient;
use crate::errors::{invalid, unsupported, PyErrExt};

const NAME_V: &CStr = c"dltensor_versioned";
const NAME_L: &CStr = c"dltensor";
const USED_V: &CStr = c"used_dltensor_versioned";
const USED_L: &CStr = c"used_dltensor";

/// A core error as `rpjrt.UnsupportedError` (what DLPack cannot carry or read), except an
/// error about the state of the object rather than its data, which keeps the exception
/// class every other call gives it: a closed client, a deleted buffer, and a failed
/// precondition (an object inherited across fork, whose use every method refuses so).
fn unsupported_from(e: rpjrt::Error) -> PyErr {
    match e {
        rpjrt::Error::Closed(_) | rpjrt::Error::Deleted(_) => crate::errors::to_py(e),
        e if e.code() == rpjrt::Code::FailedPrecondition => crate::errors::to_py(e),
        e => unsupported(e.to_string().replace("invalid argument: ", "")),
    }
}

/// `(device_type, device_id)` of a buffer, as `__dlpack_device__` reports it.
pub fn device_of(b: &PyBuffer) -> PyResult<(i32, i32)> {
    b.check_not_deleted()?;
    rpjrt::dlpack::device_of(b.rb()).map_err(unsupported_from)
}

unsafe extern "C" fn capsule_destructor<M: Managed>(cap: *mut ffi::PyObject) {
    let name = if M::VERSIONED { NAME_V } else { NAME_L };
    // SAFETY: called by CPython with the capsule, holding the GIL. A consumer that took the
    // tensor renamed the capsule, and then it is not ours to free; otherwise the capsule
    // still owns the tensor rpjrt exported, freed once here.
    unsafe {
        if ffi::PyCapsule_IsValid(cap, name.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(cap, name.as_ptr()) as *mut M;
            rpjrt::dlpack::delete_managed(m);
        }
    }
}

/// Wraps an export in a capsule that frees it unless a consumer takes it.
fn capsule<'py, M: Managed>(py: Python<'py>, m: Exported<M>) -> PyResult<Bound<'py, PyAny>> {
    let name = if M::VERSIONED { NAME_V } else { NAME_L };
    let raw = m.into_raw();
    let ptr = NonNull::new(raw as *mut c_void).ok_or_else(|| invalid("allocation failed"))?;
    // SAFETY: the pointer is a managed tensor of the form the name says; the destructor
    // frees it unless a consumer renamed the capsule and took ownership.
    let cap = unsafe {
        PyCapsule::new_with_pointer_and_destructor(py, ptr, name, Some(capsule_destructor::<M>))
    };
    match cap {
        Ok(c) => Ok(c.into_any()),
        Err(e) => {
            // SAFETY: the capsule was not created, so `raw` (from `into_raw`) is still ours.
            drop(unsafe { Exported::from_raw(raw) });
            Err(e)
        }
    }
}

pub fn export<'py>(
    slf: &Bound<'py, PyBuffer>,
    _stream: Option<&Bound<'py, PyAny>>,
    max_version: Option<(u32, u32)>,
    dl_device: Option<(i32, i32)>,
    copy: Option<bool>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = slf.py();
    let b = slf.get();
    let here = device_of(b)?;
    if let Some(want) = dl_device {
        if want != here {
            return Err(unsupported(format!(
                "the buffer is on DLPack device {here:?}; exporting to {want:?} needs a copy rpjrt does not make"
            )));
        }
    }
    // The consumer reads right away (CPU) or on its stream: make the data ready first.
    b.wait_ready(py)?;
    let copied = copy == Some(true);
    let owner: Bound<'py, PyBuffer> = if copied {
        let rb = b.rb();
        let dev = rb.device().pyerr()?;
        let c = py.detach_call(|| rb.copy_to_device(&dev)).pyerr()?;
        let nb = PyBuffer::wrap(py, c, &b.client)?.into_bound(py);
        nb.get().wait_ready(py)?;
        nb
    } else {
        slf.clone()
    };
    let ob = owner.get();
    let rb = ob.rb();
    let t = rb.element_type();
    if t.dlpack().is_none() {
        return Err(unsupported(format!("DLPack cannot carry {t} buffers")));
    }
    // The core's export pin refuses deleting or donating the buffer until the consumer's
    // deleter runs; the Python owner is kept as long, so its drop releases the GIL as usual.
    // A type DLPack 1.1 added (float8, float6, float4) is not in the version a consumer
    // asking for at most 1.0 reads: refused, as the protocol says, rather than stamped with
    // a version past its limit.
    if let (Some((1, 0)), Some(d)) = (max_version, t.dlpack()) {
        if rpjrt::dlpack::minor_version_for(d.code, 0) > 0 {
            return Err(pyo3::exceptions::PyBufferError::new_err(format!(
                "{t} needs DLPack 1.1, and the consumer asked for max_version (1, 0): pass \
                 max_version=(1, 1) or newer"
            )));
        }
    }
    let hold = Box::new(owner.clone().unbind());
    if max_version.is_some_and(|(major, _)| major >= 1) {
        // A copy made for this consumer is its own to write (numpy's
        // `from_dlpack(x, copy=True)` gives a writable array); the buffer itself is not.
        let m = py
            .detach_call(|| match copied {
                true => {
                    rpjrt::dlpack::export_copy_with::<DlManagedTensorVersioned>(rb.clone(), hold)
                }
                false => rpjrt::dlpack::export_with::<DlManagedTensorVersioned>(rb, hold),
            })
            .pyerr()?;
        capsule(py, m)
    } else {
        let m = py
            .detach_call(|| rpjrt::dlpack::export_with::<DlManagedTensor>(rb, hold))
            .pyerr()?;
        capsule(py, m)
    }
}

fn call_dlpack<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let kwargs = PyDict::new(py);
    kwargs.set_item("max_version", (1, 0))?;
    // The producer's own code may be slow Python (see `detach::calling_python`).
    crate::detach::calling_python(py, || {
        match obj.call_method("__dlpack__", (), Some(&kwargs)) {
            Ok(c) => Ok(c),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyTypeError>(py) => {
                obj.call_method0("__dlpack__")
            }
            Err(e) => Err(e),
        }
    })
}

/// A producer's own refusal to export (jax refuses int4 arrays, say) as rpjrt's
/// `UnsupportedError`, naming the producer and what still works, with the producer's error
/// as its cause; rpjrt's own errors and interruptions stand as they are. Only for
/// `Client.from_dlpack`: `put` goes on to `__array__` after such a refusal.
pub fn producer_refused(obj: &Bound<'_, PyAny>, e: PyErr) -> PyErr {
    let py = obj.py();
    if !crate::put::is_producer_refusal(py, &e) {
        return e;
    }
    let kind = obj
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "the object".into());
    // `put` reads an object through these too; without any, it has no other way in.
    let other_way = crate::detach::calling_python(py, || {
        crate::pybuf::HostView::get(obj).is_some()
            || obj.hasattr("__array__").unwrap_or(false)
            || obj.hasattr("__array_interface__").unwrap_or(false)
    });
    let instead = if other_way {
        "client.put(x) copies it in through its array interface instead"
    } else {
        "it offers no other way to read its data (no __array__, __array_interface__ or \
         buffer protocol), so it cannot go in"
    };
    let wrapped = unsupported(format!(
        "{kind} refused to export its data through DLPack ({}: {}); {instead}",
        e.get_type(py)
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default(),
        e.value(py)
    ));
    wrapped.set_cause(py, Some(e));
    wrapped
}

/// Imports a `__dlpack__` producer onto `dev`, in its default memory (`from_dlpack`).
pub fn import(
    client: &Bound<'_, PyClient>,
    obj: &Bound<'_, PyAny>,
    dev: &rpjrt::Device,
    copy: Option<bool>,
) -> PyResult<Py<PyBuffer>> {
    import_to(client, obj, dev, None, copy)
}

/// [`import`] into `mem` (a memory of `dev`) when given: `put(x, memory=...)` of a
/// DLPack producer or a Buffer of another client lands where it was asked, as every
/// other source does, never silently in the default memory.
pub fn import_to(
    client: &Bound<'_, PyClient>,
    obj: &Bound<'_, PyAny>,
    dev: &rpjrt::Device,
    mem: Option<&rpjrt::Memory>,
    copy: Option<bool>,
) -> PyResult<Py<PyBuffer>> {
    let py = client.py();
    let me = client.clone().unbind();
    let c = client.get();
    if let Ok(b) = obj.cast::<PyBuffer>() {
        // The very Buffer, when it already is what was asked for; on another device (or
        // in another memory than the one asked for) it is copied there (copy=False cannot
        // move it, as for a put).
        if copy != Some(true) && b.get().client.is(&me) {
            let rb = b.get().rb();
            let here = match mem {
                Some(m) => rb.memory().pyerr()? == *m,
                None => rb.device().pyerr()? == *dev,
            };
            if here {
                return Ok(b.clone().unbind());
            }
            if let Some(m) = mem {
                if copy == Some(false) {
                    return Err(invalid(format!(
                        "copy=False cannot move a Buffer in {} to {m}: a move is a copy",
                        rb.memory().pyerr()?
                    )));
                }
                let out = py.detach_call(|| rb.copy_to_memory(m)).pyerr()?;
                return PyBuffer::wrap(py, out, &me);
            }
            if copy == Some(false) {
                return Err(invalid(format!(
                    "copy=False cannot move a Buffer on {} to {dev}: a move is a copy",
                    b.get().rb().device().pyerr()?
                )));
            }
            return crate::put::put_input(
                client,
                b.as_any(),
                crate::client::wrap_device(py, &me, dev.clone())?
                    .bind(py)
                    .as_any(),
                None,
                || "the DLPack import".to_string(),
            );
        }
    }
    // A masked array exports its data without the mask: refused as `put` refuses it
    // (before its __dlpack__, which may refuse for other reasons).
    crate::put::refuse_masked(obj)?;
    // The producer's `__getattr__` and `__dlpack_device__` are Python code rpjrt calls
    // (see `detach::calling_python`).
    let has = |name: &str| crate::detach::calling_python(py, || obj.hasattr(name));
    if !has("__dlpack__")? {
        return Err(invalid(format!(
            "{} is not a DLPack producer (it has no __dlpack__)",
            obj.get_type().name()?
        )));
    }
    if has("__dlpack_device__")? {
        let (dt, _): (i32, i32) =
            crate::detach::calling_python(py, || obj.call_method0("__dlpack_device__")?.extract())?;
        if dt != DEVICE_CPU && dt != DEVICE_CUDA_HOST {
            return Err(unsupported(format!(
                "importing DLPack device type {dt} memory needs rpjrt support for foreign device \
                 memory; copy it to the host first"
            )));
        }
    }
    let cap = call_dlpack(obj)?;
    let cap_ptr = cap.as_ptr();
    // SAFETY: IsValid only inspects the object (any object is allowed) under the GIL.
    let versioned = unsafe { ffi::PyCapsule_IsValid(cap_ptr, NAME_V.as_ptr()) } == 1;
    // SAFETY: as above.
    let legacy = !versioned && unsafe { ffi::PyCapsule_IsValid(cap_ptr, NAME_L.as_ptr()) } == 1;
    if !versioned && !legacy {
        return Err(invalid(
            "__dlpack__ returned something that is not an unused DLPack capsule",
        ));
    }
    let (name, used) = if versioned {
        (NAME_V, USED_V)
    } else {
        (NAME_L, USED_L)
    };
    // SAFETY: the capsule is valid with this name (checked just above).
    let managed = unsafe { ffi::PyCapsule_GetPointer(cap_ptr, name.as_ptr()) };
    if managed.is_null() {
        return Err(PyErr::fetch(py));
    }
    // Take ownership: renamed, the capsule no longer frees the tensor; rpjrt does.
    // SAFETY: renaming a capsule we hold, under the GIL.
    if unsafe { ffi::PyCapsule_SetName(cap_ptr, used.as_ptr()) } != 0 {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: the CPython boundary: a valid, unused capsule of this name holds the matching
    // DLPack struct, owned by the capsule until renamed (done just above), so it is ours to
    // hand over; the DLPack protocol promises the described memory stays valid until its
    // deleter runs.
    let tensor = unsafe {
        if versioned {
            ImportedTensor::from_versioned(managed as *mut DlManagedTensorVersioned)
        } else {
            ImportedTensor::from_legacy(managed as *mut DlManagedTensor)
        }
    }
    .map_err(unsupported_from)?;
    // Refused descriptions are UnsupportedError (what DLPack sent cannot be read here);
    // `import` checks the same again on its way to `Client::put`.
    tensor.desc().plan_import().map_err(unsupported_from)?;
    let mode = crate::put::copy_mode(copy);
    let rc = &c.inner;
    if let Some(pin) = pin_for_import(obj, &tensor, rc, mode)? {
        return import_pinned(py, &me, tensor, pin, dev, mem, mode);
    }
    let b = match mem {
        None => py
            .detach_call(|| rpjrt::dlpack::import(rc, tensor, dev, mode))
            .pyerr()?,
        // `rpjrt::dlpack::import` into the memory asked for: the same plan and host
        // array, put there.
        Some(m) => {
            let plan = tensor.desc().plan_import().map_err(unsupported_from)?;
            let mode = match mode {
                // Only host platforms can use host memory in place; others copy.
                rpjrt::CopyMode::IfNeeded
                    if !matches!(rc.platform_name().pyerr()?.as_str(), "cpu" | "host") =>
                {
                    rpjrt::CopyMode::Always
                }
                m => m,
            };
            let first = tensor.first_element_offset();
            let array = rpjrt::HostArray::from_owner(
                std::sync::Arc::new(tensor) as std::sync::Arc<dyn rpjrt::HostBytes>,
                plan.element_type,
                &plan.dims,
            )
            .with_byte_strides(&plan.byte_strides, first);
            py.detach_call(|| rc.put(&array, dev, Some(m), mode))
                .pyerr()?
        }
    };
    if b.borrows_host() {
        PyBuffer::wrap_borrowing(py, b, &me)
    } else {
        PyBuffer::wrap(py, b, &me)
    }
}

/// For an import that may use the memory in place (a host platform, `copy` not True): a pin
/// of the producer's own buffer-protocol export when it covers the tensor's bytes (a numpy
/// array, and its subclasses, export both ways), else `None`.
///
/// A buffer over the memory then holds the producer through that export, which the cycle
/// collector can see (`pybuf::HostPin`), and not through the DLPack tensor, whose hold on
/// the producer (numpy's keeps a reference to the array in its private context) no
/// collector can see: `x.dev = client.from_dlpack(x)` would otherwise be a cycle never
/// collected.
fn pin_for_import(
    obj: &Bound<'_, PyAny>,
    tensor: &ImportedTensor,
    rc: &rpjrt::Client,
    mode: rpjrt::CopyMode,
) -> PyResult<Option<crate::pybuf::PinnedHost>> {
    use rpjrt::HostBytes;
    if mode == rpjrt::CopyMode::Always
        || !matches!(rc.platform_name().pyerr()?.as_str(), "cpu" | "host")
    {
        return Ok(None);
    }
    let bytes = tensor.bytes();
    crate::pybuf::PinnedHost::covering(obj, bytes.as_ptr() as usize, bytes.len())
}

/// `rpjrt::dlpack::import` with `pin` (an export of the same bytes, see
/// [`pin_for_import`]) as the owner of the memory in place of the tensor, whose deleter
/// runs here (the export keeps the memory valid and in place from now on).
fn import_pinned(
    py: Python<'_>,
    client: &Py<PyClient>,
    tensor: ImportedTensor,
    pin: crate::pybuf::PinnedHost,
    dev: &rpjrt::Device,
    mem: Option<&rpjrt::Memory>,
    mode: rpjrt::CopyMode,
) -> PyResult<Py<PyBuffer>> {
    let plan = tensor.desc().plan_import().map_err(unsupported_from)?;
    let first = tensor.first_element_offset();
    drop(tensor);
    let pin = std::sync::Arc::new(pin);
    let array = rpjrt::HostArray::from_owner(
        std::sync::Arc::clone(&pin) as std::sync::Arc<dyn rpjrt::HostBytes>,
        plan.element_type,
        &plan.dims,
    )
    .with_byte_strides(&plan.byte_strides, first);
    let rc = &client.get().inner;
    let b = py.detach_call(|| rc.put(&array, dev, mem, mode)).pyerr()?;
    // Counted without the array's share: the pin's holders are now the buffer's (if it
    // uses the memory in place) and the Buffer object's.
    drop(array);
    if b.borrows_host() {
        PyBuffer::wrap_pinned(py, b, client, pin)
    } else {
        PyBuffer::wrap(py, b, client)
    }
}
