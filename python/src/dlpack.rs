//! DLPack, both ways: `Buffer.__dlpack__` / `__dlpack_device__` and `from_dlpack`.
//!
//! The structs are DLPack's C ABI (dlpack.h 1.x, with the pre-1.0 `DLManagedTensor` kept
//! for older consumers and producers).

use std::ffi::{c_void, CStr};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};
use rpjrt::ElementType;

use crate::buffer::PyBuffer;
use crate::client::PyClient;
use crate::errors::{invalid, unsupported, PyErrExt};

use rpjrt::dlpack::{DEVICE_CPU as KDL_CPU, DEVICE_CUDA_HOST as KDL_CUDA_HOST, FLAG_READ_ONLY};

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DLPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DLManagedTensorVersioned {
    version: DLPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

const NAME_V: &CStr = c"dltensor_versioned";
const NAME_L: &CStr = c"dltensor";
const USED_V: &CStr = c"used_dltensor_versioned";
const USED_L: &CStr = c"used_dltensor";

/// DLPack's data type of an element type (from the element-type table).
fn dl_dtype(t: ElementType) -> Option<DLDataType> {
    t.dlpack().map(|d| DLDataType {
        code: d.code,
        bits: d.bits,
        lanes: d.lanes,
    })
}

/// `(device_type, device_id)` of a buffer, as `__dlpack_device__` reports it.
pub fn device_of(b: &PyBuffer) -> PyResult<(i32, i32)> {
    b.check_not_deleted()?;
    let dev = b.rb().device().pyerr()?;
    let platform = b.client.get().platform_name();
    rpjrt::dlpack::device_for_platform(platform, dev.local_hardware_id())
        .map_err(|e| unsupported(e.to_string().replace("invalid argument: ", "")))
}

/// What a capsule owns until its consumer's deleter runs.
#[repr(C)]
struct ExportV {
    managed: DLManagedTensorVersioned,
    hold: ExportHold,
}

#[repr(C)]
struct ExportL {
    managed: DLManagedTensor,
    hold: ExportHold,
}

struct ExportHold {
    shape: Vec<i64>,
    strides: Vec<i64>,
    /// Pins the device memory (PJRT external reference count) while the consumer uses it.
    _pin: rpjrt::ExternalReference,
    owner: Py<PyBuffer>,
}

impl Drop for ExportHold {
    fn drop(&mut self) {
        // `get` on a frozen pyclass needs no GIL; the Py decref is deferred if we lack it.
        self.owner.get().exports.fetch_sub(1, Ordering::AcqRel);
    }
}

unsafe extern "C" fn deleter_v(m: *mut DLManagedTensorVersioned) {
    if m.is_null() {
        return;
    }
    // SAFETY: `m` is the first field of a leaked Box<ExportV> (manager_ctx points at it);
    // DLPack calls the deleter exactly once.
    unsafe { drop(Box::from_raw((*m).manager_ctx as *mut ExportV)) }
}

unsafe extern "C" fn deleter_l(m: *mut DLManagedTensor) {
    if m.is_null() {
        return;
    }
    // SAFETY: as in `deleter_v`, for the legacy struct.
    unsafe { drop(Box::from_raw((*m).manager_ctx as *mut ExportL)) }
}

unsafe extern "C" fn capsule_destructor_v(cap: *mut ffi::PyObject) {
    // SAFETY: called by CPython with the capsule, holding the GIL. A consumer that took the
    // tensor renamed the capsule, and then we must not free it.
    unsafe {
        if ffi::PyCapsule_IsValid(cap, NAME_V.as_ptr()) == 1 {
            let m =
                ffi::PyCapsule_GetPointer(cap, NAME_V.as_ptr()) as *mut DLManagedTensorVersioned;
            if !m.is_null() {
                if let Some(d) = (*m).deleter {
                    d(m);
                }
            }
        }
    }
}

unsafe extern "C" fn capsule_destructor_l(cap: *mut ffi::PyObject) {
    // SAFETY: as in `capsule_destructor_v`.
    unsafe {
        if ffi::PyCapsule_IsValid(cap, NAME_L.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(cap, NAME_L.as_ptr()) as *mut DLManagedTensor;
            if !m.is_null() {
                if let Some(d) = (*m).deleter {
                    d(m);
                }
            }
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
    let owner: Bound<'py, PyBuffer> = if copy == Some(true) {
        let rb = b.rb();
        let dev = rb.device().pyerr()?;
        let c = py.detach(|| rb.copy_to_device(&dev)).pyerr()?;
        let nb = PyBuffer::wrap(py, c, &b.client)?.into_bound(py);
        nb.get().wait_ready(py)?;
        nb
    } else {
        slf.clone()
    };
    let ob = owner.get();
    let rb = ob.rb();
    let t = rb.element_type();
    let dtype =
        dl_dtype(t).ok_or_else(|| unsupported(format!("DLPack cannot carry {t} buffers")))?;
    let arc = ob.arc();
    let pin = py.detach(|| arc.external_reference()).pyerr()?;
    let data = pin.data_ptr();
    let dims = rb.dims().to_vec();
    let layout = rb.layout().pyerr()?;
    let strides = rpjrt::dlpack::export_strides(&dims, layout.as_deref());
    let device = DLDevice {
        device_type: here.0,
        device_id: here.1,
    };
    ob.exports.fetch_add(1, Ordering::AcqRel);
    let hold = ExportHold {
        shape: dims,
        strides,
        _pin: pin,
        owner: owner.clone().unbind(),
    };
    let tensor = |hold: &ExportHold| DLTensor {
        data: data as *mut c_void,
        device,
        ndim: hold.shape.len() as i32,
        dtype,
        shape: hold.shape.as_ptr() as *mut i64,
        strides: hold.strides.as_ptr() as *mut i64,
        byte_offset: 0,
    };
    let versioned = max_version.is_some_and(|(major, _)| major >= 1);
    if versioned {
        let mut bx = Box::new(ExportV {
            managed: DLManagedTensorVersioned {
                version: DLPackVersion { major: 1, minor: 0 },
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(deleter_v),
                flags: FLAG_READ_ONLY,
                dl_tensor: DLTensor {
                    data: std::ptr::null_mut(),
                    device,
                    ndim: 0,
                    dtype,
                    shape: std::ptr::null_mut(),
                    strides: std::ptr::null_mut(),
                    byte_offset: 0,
                },
            },
            hold,
        });
        bx.managed.dl_tensor = tensor(&bx.hold);
        let raw = Box::into_raw(bx);
        // SAFETY: `raw` is a live, leaked ExportV; manager_ctx lets the deleter find it.
        unsafe { (*raw).managed.manager_ctx = raw as *mut c_void };
        let ptr = NonNull::new(raw as *mut c_void).ok_or_else(|| invalid("allocation failed"))?;
        // SAFETY: the pointer is a DLManagedTensorVersioned (first field of ExportV); the
        // destructor frees it unless a consumer renamed the capsule and took ownership.
        let cap = unsafe {
            PyCapsule::new_with_pointer_and_destructor(py, ptr, NAME_V, Some(capsule_destructor_v))
        };
        match cap {
            Ok(c) => Ok(c.into_any()),
            Err(e) => {
                // SAFETY: the capsule was not created, so we still own `raw`.
                unsafe { deleter_v(raw as *mut DLManagedTensorVersioned) };
                Err(e)
            }
        }
    } else {
        let mut bx = Box::new(ExportL {
            managed: DLManagedTensor {
                dl_tensor: DLTensor {
                    data: std::ptr::null_mut(),
                    device,
                    ndim: 0,
                    dtype,
                    shape: std::ptr::null_mut(),
                    strides: std::ptr::null_mut(),
                    byte_offset: 0,
                },
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(deleter_l),
            },
            hold,
        });
        bx.managed.dl_tensor = tensor(&bx.hold);
        let raw = Box::into_raw(bx);
        // SAFETY: as above, for the legacy struct.
        unsafe { (*raw).managed.manager_ctx = raw as *mut c_void };
        let ptr = NonNull::new(raw as *mut c_void).ok_or_else(|| invalid("allocation failed"))?;
        // SAFETY: as above.
        let cap = unsafe {
            PyCapsule::new_with_pointer_and_destructor(py, ptr, NAME_L, Some(capsule_destructor_l))
        };
        match cap {
            Ok(c) => Ok(c.into_any()),
            Err(e) => {
                // SAFETY: the capsule was not created, so we still own `raw`.
                unsafe { deleter_l(raw as *mut DLManagedTensor) };
                Err(e)
            }
        }
    }
}

/// A consumed DLPack tensor: its deleter runs when this drops.
struct DlOwner {
    managed: usize,
    versioned: bool,
    /// The addressed bytes (from the import plan).
    addr: usize,
    len: usize,
}

// SAFETY: `bytes` always returns the same range, fixed at creation: the bytes the tensor
// addresses, which the producer keeps valid until its deleter runs, which happens only
// when this owner drops. rpjrt never writes them.
unsafe impl rpjrt::HostBytes for DlOwner {
    fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: see the impl's comment.
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }
}

impl Drop for DlOwner {
    fn drop(&mut self) {
        // SAFETY: we took ownership by renaming the capsule, so the deleter is ours to call,
        // once. DLPack deleters may run on any thread.
        unsafe {
            if self.versioned {
                let m = self.managed as *mut DLManagedTensorVersioned;
                if let Some(d) = (*m).deleter {
                    d(m);
                }
            } else {
                let m = self.managed as *mut DLManagedTensor;
                if let Some(d) = (*m).deleter {
                    d(m);
                }
            }
        }
    }
}

fn call_dlpack<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let kwargs = PyDict::new(py);
    kwargs.set_item("max_version", (1, 0))?;
    match obj.call_method("__dlpack__", (), Some(&kwargs)) {
        Ok(c) => Ok(c),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyTypeError>(py) => {
            obj.call_method0("__dlpack__")
        }
        Err(e) => Err(e),
    }
}

pub fn import(
    client: &Bound<'_, PyClient>,
    obj: &Bound<'_, PyAny>,
    dev: &rpjrt::Device,
    copy: Option<bool>,
) -> PyResult<Py<PyBuffer>> {
    let py = client.py();
    let me = client.clone().unbind();
    let c = client.get();
    if let Ok(b) = obj.cast::<PyBuffer>() {
        if copy != Some(true) && b.get().client.is(&me) {
            return Ok(b.clone().unbind());
        }
    }
    if !obj.hasattr("__dlpack__")? {
        return Err(invalid(format!(
            "{} is not a DLPack producer (it has no __dlpack__)",
            obj.get_type().name()?
        )));
    }
    if obj.hasattr("__dlpack_device__")? {
        let (dt, _): (i32, i32) = obj.call_method0("__dlpack_device__")?.extract()?;
        if dt != KDL_CPU && dt != KDL_CUDA_HOST {
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
    let name = if versioned { NAME_V } else { NAME_L };
    // SAFETY: the capsule is valid with this name (checked just above).
    let managed = unsafe { ffi::PyCapsule_GetPointer(cap_ptr, name.as_ptr()) };
    if managed.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a valid capsule of this name points at the matching DLPack struct, owned by
    // the capsule until renamed.
    let (tensor, flags_ok, readonly) = unsafe {
        if versioned {
            let m = &*(managed as *const DLManagedTensorVersioned);
            (
                m.dl_tensor,
                m.version.major == 1,
                m.flags & rpjrt::dlpack::FLAG_READ_ONLY != 0,
            )
        } else {
            (
                (*(managed as *const DLManagedTensor)).dl_tensor,
                true,
                false,
            )
        }
    };
    if !flags_ok {
        return Err(unsupported(
            "the producer speaks a DLPack major version other than 1",
        ));
    }
    let ndim = tensor.ndim.max(0) as usize;
    let shape: Vec<i64> = if ndim == 0 || tensor.shape.is_null() {
        Vec::new()
    } else {
        // SAFETY: DLPack guarantees `ndim` shape entries (and strides entries when non-null).
        unsafe { std::slice::from_raw_parts(tensor.shape, ndim) }.to_vec()
    };
    let strides: Option<Vec<i64>> = if tensor.strides.is_null() || ndim == 0 {
        None
    } else {
        // SAFETY: as above.
        Some(unsafe { std::slice::from_raw_parts(tensor.strides, ndim) }.to_vec())
    };
    let desc = rpjrt::dlpack::DlTensorDesc {
        device_type: tensor.device.device_type,
        device_id: tensor.device.device_id,
        dtype: rpjrt::DlDataType {
            code: tensor.dtype.code,
            bits: tensor.dtype.bits,
            lanes: tensor.dtype.lanes,
        },
        shape,
        strides,
        byte_offset: tensor.byte_offset,
        readonly,
    };
    let plan = desc
        .plan_import()
        .map_err(|e| unsupported(e.to_string().replace("invalid argument: ", "")))?;
    // Take ownership: from here on the deleter is ours to call (through DlOwner).
    let used = if versioned { USED_V } else { USED_L };
    // SAFETY: renaming a capsule we hold, under the GIL.
    if unsafe { ffi::PyCapsule_SetName(cap_ptr, used.as_ptr()) } != 0 {
        return Err(PyErr::fetch(py));
    }
    let first = (tensor.data as usize).wrapping_add(tensor.byte_offset as usize);
    let owner = DlOwner {
        managed: managed as usize,
        versioned,
        addr: (first as i128 + plan.lo) as usize,
        len: plan.len,
    };
    let rc = &c.inner;
    let host_platform = matches!(c.platform_name(), "cpu" | "host");
    let mode = match crate::put::copy_mode(copy) {
        // Only host platforms can use host memory in place; others copy.
        rpjrt::CopyMode::IfNeeded if !host_platform => rpjrt::CopyMode::Always,
        m => m,
    };
    let array = rpjrt::HostArray::from_owner(Arc::new(owner), plan.element_type, &plan.dims)
        .with_byte_strides(&plan.byte_strides, plan.offset());
    let b = py.detach(|| rc.put(&array, dev, None, mode)).pyerr()?;
    drop(array);
    if b.borrows_host() {
        PyBuffer::wrap_borrowing(py, b, &me)
    } else {
        PyBuffer::wrap(py, b, &me)
    }
}
