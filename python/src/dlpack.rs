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
use crate::pybuf::{classify, gather, Layout};

const KDL_CPU: i32 = 1;
const KDL_CUDA: i32 = 2;
const KDL_CUDA_HOST: i32 = 3;
const KDL_ROCM: i32 = 10;

const FLAG_READ_ONLY: u64 = 1;

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

/// DLPack's (code, bits) of an element type; `None` where DLPack has no equivalent layout.
fn dl_dtype(t: ElementType) -> Option<DLDataType> {
    use ElementType as E;
    let (code, bits) = match t {
        E::Pred => (6, 8),
        E::S8 => (0, 8),
        E::S16 => (0, 16),
        E::S32 => (0, 32),
        E::S64 => (0, 64),
        E::U8 => (1, 8),
        E::U16 => (1, 16),
        E::U32 => (1, 32),
        E::U64 => (1, 64),
        E::F16 => (2, 16),
        E::F32 => (2, 32),
        E::F64 => (2, 64),
        E::BF16 => (4, 16),
        E::C64 => (5, 64),
        E::C128 => (5, 128),
        E::F8E3M4 => (7, 8),
        E::F8E4M3 => (8, 8),
        E::F8E4M3B11FNUZ => (9, 8),
        E::F8E4M3FN => (10, 8),
        E::F8E4M3FNUZ => (11, 8),
        E::F8E5M2 => (12, 8),
        E::F8E5M2FNUZ => (13, 8),
        E::F8E8M0FNU => (14, 8),
        _ => return None,
    };
    Some(DLDataType {
        code,
        bits,
        lanes: 1,
    })
}

fn from_dl_dtype(d: DLDataType) -> Option<ElementType> {
    if d.lanes != 1 {
        return None;
    }
    ElementType::ALL
        .iter()
        .copied()
        .find(|&t| dl_dtype(t).is_some_and(|x| x.code == d.code && x.bits == d.bits))
}

/// `(device_type, device_id)` of a buffer, as `__dlpack_device__` reports it.
pub fn device_of(b: &PyBuffer) -> PyResult<(i32, i32)> {
    b.check_not_deleted()?;
    let dev = b.rb().device().pyerr()?;
    let platform = b.client.get().platform_name();
    match platform {
        "cpu" | "host" => Ok((KDL_CPU, 0)),
        "cuda" | "gpu" => Ok((KDL_CUDA, dev.local_hardware_id().max(0))),
        "rocm" => Ok((KDL_ROCM, dev.local_hardware_id().max(0))),
        other => Err(unsupported(format!(
            "DLPack has no device type for platform {other:?}"
        ))),
    }
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

/// Element strides of a buffer from its layout (minor-to-major), or row-major.
fn element_strides(dims: &[i64], minor_to_major: Option<&[i64]>) -> Vec<i64> {
    let n = dims.len();
    let mut s = vec![0i64; n];
    let order: Vec<usize> = match minor_to_major {
        Some(m) if m.len() == n && m.iter().all(|&d| (d as usize) < n) => {
            m.iter().map(|&d| d as usize).collect()
        }
        _ => (0..n).rev().collect(),
    };
    let mut acc = 1i64;
    for &d in &order {
        s[d] = acc;
        acc = acc.saturating_mul(dims[d].max(1));
    }
    s
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
    let strides = element_strides(&dims, layout.as_deref());
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
    data: usize,
    span: usize,
}

impl rpjrt::HostBytes for DlOwner {
    fn bytes(&self) -> &[u8] {
        if self.span == 0 {
            return &[];
        }
        // SAFETY: the producer keeps `data..data+span` valid until its deleter runs, which
        // happens only when this owner drops.
        unsafe { std::slice::from_raw_parts(self.data as *const u8, self.span) }
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
    let (tensor, flags_ok) = unsafe {
        if versioned {
            let m = &*(managed as *const DLManagedTensorVersioned);
            (m.dl_tensor, m.version.major == 1)
        } else {
            ((*(managed as *const DLManagedTensor)).dl_tensor, true)
        }
    };
    if !flags_ok {
        return Err(unsupported(
            "the producer speaks a DLPack major version other than 1",
        ));
    }
    if tensor.device.device_type != KDL_CPU && tensor.device.device_type != KDL_CUDA_HOST {
        return Err(unsupported(format!(
            "importing DLPack device type {} memory is not supported yet",
            tensor.device.device_type
        )));
    }
    let t = from_dl_dtype(tensor.dtype).ok_or_else(|| {
        unsupported(format!(
            "DLPack dtype (code {}, bits {}, lanes {}) has no PJRT equivalent rpjrt supports",
            tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes
        ))
    })?;
    let itemsize = t
        .byte_width()
        .ok_or_else(|| unsupported(format!("DLPack import of {t}")))?;
    let ndim = tensor.ndim.max(0) as usize;
    let dims: Vec<i64> = if ndim == 0 {
        Vec::new()
    } else {
        // SAFETY: DLPack guarantees `ndim` shape entries (and strides entries when non-null).
        unsafe { std::slice::from_raw_parts(tensor.shape, ndim) }.to_vec()
    };
    let strides: Vec<i64> = if tensor.strides.is_null() || ndim == 0 {
        crate::pybuf::c_strides(&dims, itemsize as i64)
    } else {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts(tensor.strides, ndim) }
            .iter()
            .map(|&s| s * itemsize as i64)
            .collect()
    };
    // Take ownership: from here on the deleter is ours to call (through DlOwner).
    let used = if versioned { USED_V } else { USED_L };
    // SAFETY: renaming a capsule we hold, under the GIL.
    if unsafe { ffi::PyCapsule_SetName(cap_ptr, used.as_ptr()) } != 0 {
        return Err(PyErr::fetch(py));
    }
    let count: usize = dims.iter().map(|&d| d.max(0) as usize).product();
    let data = (tensor.data as usize).wrapping_add(tensor.byte_offset as usize);
    let layout = classify(&dims, &strides, itemsize);
    let span = match &layout {
        Layout::C => count * itemsize,
        Layout::Strided(_, span) => *span,
        Layout::Gather => 0,
    };
    let owner = DlOwner {
        managed: managed as usize,
        versioned,
        data,
        span,
    };
    let rc = &c.inner;
    let host_platform = matches!(c.platform_name(), "cpu" | "host");
    match (&layout, copy) {
        (Layout::C, Some(false) | None) if host_platform && count > 0 => {
            let owner: Arc<dyn rpjrt::HostBytes> = Arc::new(owner);
            let b = py.detach(|| rc.buffer_from_host_owned(owner, t, &dims, None, dev, None)).pyerr()?;
            if copy == Some(false) && b.unsafe_pointer().map(|p| p != data).unwrap_or(true) {
                return Err(invalid(format!(
                    "copy=False: the plugin did not use the DLPack memory in place (data at {data:#x}, \
                     {} bytes past a 64-byte boundary; XLA's CPU plugins alias only 64-byte-aligned memory)",
                    data % 64
                )));
            }
            PyBuffer::wrap_borrowing(py, b, &me)
        }
        (_, Some(false)) if count > 0 => Err(invalid(
            "copy=False: this DLPack tensor cannot be used in place (strided, or not host-visible to this plugin)",
        )),
        _ => {
            let gathered;
            let (bytes, bstrides): (&[u8], Option<&[i64]>) = match &layout {
                Layout::C => (rpjrt::HostBytes::bytes(&owner), None),
                Layout::Strided(s, _) => (rpjrt::HostBytes::bytes(&owner), Some(s.as_slice())),
                Layout::Gather => {
                    let p = data;
                    gathered = py.detach(|| {
                        // SAFETY: the producer guarantees every element at these strides is
                        // readable while we own the tensor.
                        unsafe { gather(p as *const u8, &dims, &strides, itemsize) }
                    });
                    (gathered.as_slice(), None)
                }
            };
            let b = py.detach(|| rc.buffer_from_host(bytes, t, &dims, bstrides, dev, None)).pyerr()?;
            drop(owner);
            PyBuffer::wrap(py, b, &me)
        }
    }
}
