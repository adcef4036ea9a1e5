//! DLPack in the core: export a buffer as an owning managed tensor (legacy and versioned),
//! hand it out as a C pointer, import it back through `Client::put`; the deleter runs
//! exactly once whichever way the tensor ends. On both CPU plugins and the fake plugin.

mod common;

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{expect_err, for_each_plugin};
use rpjrt::dlpack::{
    self, DlDataType, DlDevice, DlManagedTensor, DlManagedTensorVersioned, DlPackVersion, DlTensor,
    ImportedTensor, FLAG_READ_ONLY,
};
use rpjrt::{Buffer, Client, CopyMode, ElementType};

/// Counts drops: kept alive by an export, dropped when its deleter runs.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn f32_buffer(client: &Client, values: &[f32], dims: &[i64]) -> Buffer {
    let dev = client.default_device().unwrap();
    client.buffer_from_slice(values, dims, &dev).unwrap()
}

/// Export → into_raw → import (the import owns the pointer and calls its deleter) on one
/// client: the values survive, and the buffer's pin is released exactly once. `dims` has
/// 6 elements.
fn round_trip(client: &Client, dims: &[i64]) {
    let dev = client.default_device().unwrap();
    let values: Vec<f32> = (0..6).map(|i| i as f32 * 1.5 - 2.0).collect();
    let b = f32_buffer(client, &values, dims);
    let strides: Vec<i64> = if dims.len() == 2 { vec![3, 1] } else { vec![1] };
    for versioned in [false, true] {
        let drops = Arc::new(AtomicUsize::new(0));
        let keep = Box::new(DropCount(Arc::clone(&drops)));
        let imported = if versioned {
            let m = dlpack::export_with::<DlManagedTensorVersioned>(&b, keep).unwrap();
            assert_eq!(m.shape(), dims);
            assert_eq!(m.strides(), strides);
            assert!(m.is_read_only());
            assert_eq!(m.flags() & FLAG_READ_ONLY, FLAG_READ_ONLY);
            let t = m.tensor();
            assert_eq!(t.ndim as usize, dims.len());
            assert_eq!(t.dtype, ElementType::F32.dlpack().unwrap());
            assert_eq!(
                t.device,
                DlDevice {
                    device_type: 1,
                    device_id: 0
                }
            );
            let raw = m.into_raw();
            // SAFETY: a live versioned tensor just handed out by rpjrt; ownership passes on.
            unsafe { ImportedTensor::from_versioned(raw) }.unwrap()
        } else {
            let m = dlpack::export_with::<DlManagedTensor>(&b, keep).unwrap();
            assert!(!m.is_read_only(), "the legacy form has no flags");
            assert_eq!(m.strides(), strides);
            let raw = m.into_raw();
            // SAFETY: as above, for the legacy struct.
            unsafe { ImportedTensor::from_legacy(raw) }.unwrap()
        };
        assert_eq!(imported.is_versioned(), versioned);
        assert_eq!(imported.desc().shape, dims);
        assert_eq!(imported.desc().strides.as_ref(), Some(&strides));
        assert_eq!(imported.desc().readonly, versioned);
        // While exported, the buffer cannot be deleted.
        expect_err(b.delete(), &["external reference"]);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        let back = dlpack::import(client, imported, &dev, CopyMode::Always).unwrap();
        assert_eq!(back.dims(), dims);
        assert_eq!(back.to_vec().unwrap(), common::f32_bytes(&values));
        // A copy does not keep the tensor: its deleter ran once, releasing the pin.
        assert_eq!(drops.load(Ordering::SeqCst), 1, "versioned={versioned}");
        assert!(!back.borrows_host());
    }
    b.delete().unwrap();
}

#[test]
fn export_then_import_round_trips_on_both_plugins() {
    for_each_plugin(|_, client| round_trip(client, &[2, 3]));
}

#[test]
fn export_then_import_round_trips_on_the_fake_plugin() {
    let plugin = rpjrt::Plugin::load(common::fake_plugin_library()).unwrap();
    let client = Client::new(&plugin, &rpjrt::ClientOptions::new()).unwrap();
    // Rank 1: reading back a rank-2 buffer asks for its layout, which the fake lacks.
    round_trip(&client, &[6]);
}

#[test]
fn a_zero_copy_import_keeps_the_tensor_until_the_buffer_goes() {
    for_each_plugin(|_, client| {
        let dev = client.default_device().unwrap();
        let values = [1.0f32, 2.0, 3.0, 4.0];
        let b = f32_buffer(client, &values, &[4]);
        let drops = Arc::new(AtomicUsize::new(0));
        let m = dlpack::export_with::<DlManagedTensorVersioned>(
            &b,
            Box::new(DropCount(Arc::clone(&drops))),
        )
        .unwrap();
        let data = m.data_ptr();
        // SAFETY: as in `round_trip`.
        let t = unsafe { ImportedTensor::from_versioned(m.into_raw()) }.unwrap();
        let back = dlpack::import(client, t, &dev, CopyMode::IfNeeded).unwrap();
        assert_eq!(back.to_vec_of::<f32>().unwrap(), values);
        if back.borrows_host() {
            let view = back.host_view().unwrap();
            assert_eq!(view.as_ptr() as usize, data, "in place: the same memory");
            drop(view);
            assert_eq!(
                drops.load(Ordering::SeqCst),
                0,
                "the buffer keeps the tensor"
            );
        }
        drop(back);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        b.delete().unwrap();
    });
}

#[test]
fn dropping_an_unconsumed_export_runs_the_deleter_once() {
    for_each_plugin(|_, client| {
        let b = f32_buffer(client, &[1.0, 2.0], &[2]);
        let drops = Arc::new(AtomicUsize::new(0));
        let m =
            dlpack::export_with::<DlManagedTensor>(&b, Box::new(DropCount(drops.clone()))).unwrap();
        expect_err(b.delete(), &["external reference"]);
        drop(m);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        // The pin went with it.
        b.delete().unwrap();

        // Handed out and taken back (a consumer that could not take it).
        let b = f32_buffer(client, &[1.0, 2.0], &[2]);
        let drops = Arc::new(AtomicUsize::new(0));
        let m =
            dlpack::export_with::<DlManagedTensorVersioned>(&b, Box::new(DropCount(drops.clone())))
                .unwrap();
        let raw = m.into_raw();
        // SAFETY: `raw` came from `into_raw` and its deleter has not run.
        let m = unsafe { dlpack::Exported::from_raw(raw) };
        drop(m);
        assert_eq!(drops.load(Ordering::SeqCst), 1);

        // Consumed through the C deleter, as a C consumer would.
        let drops = Arc::new(AtomicUsize::new(0));
        let m =
            dlpack::export_with::<DlManagedTensor>(&b, Box::new(DropCount(drops.clone()))).unwrap();
        let raw = m.into_raw();
        assert_eq!(drops.load(Ordering::SeqCst), 0, "handed out, not freed");
        // SAFETY: we own `raw` and give it up here; the deleter is read from the struct.
        unsafe { ((*raw).deleter.expect("rpjrt sets a deleter"))(raw) };
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        let m = dlpack::export_versioned(&b).unwrap();
        // SAFETY: as above, through the helper.
        unsafe { dlpack::delete_managed(m.into_raw()) };
        b.delete().unwrap();
    });
}

#[test]
fn exports_carry_row_major_strides_and_refuse_deleted_buffers() {
    for_each_plugin(|_, client| {
        let b = f32_buffer(client, &[0.0; 24], &[2, 3, 4]);
        let m = dlpack::export(&b).unwrap();
        assert_eq!(m.strides(), &[12, 4, 1]);
        assert_eq!(
            m.tensor().dtype,
            DlDataType {
                code: 2,
                bits: 32,
                lanes: 1
            }
        );
        drop(m);
        let s = client
            .buffer_from_slice(&[7i64], &[], &client.default_device().unwrap())
            .unwrap();
        let m = dlpack::export_versioned(&s).unwrap();
        assert_eq!(
            (m.shape(), m.strides(), m.tensor().ndim),
            (&[][..], &[][..], 0)
        );
        drop(m);
        b.delete().unwrap();
        expect_err(dlpack::export(&b), &["deleted"]);
    });
}

/// A producer's tensor made here, as a foreign library would: a strided view (every other
/// element) of host memory, freed by its own deleter.
struct Producer {
    managed: DlManagedTensorVersioned,
    data: Vec<f32>,
    shape: [i64; 1],
    strides: [i64; 1],
    freed: Arc<AtomicUsize>,
}

unsafe extern "C" fn producer_deleter(m: *mut DlManagedTensorVersioned) {
    // SAFETY: `manager_ctx` is the leaked `Producer` this tensor belongs to.
    let p = unsafe { Box::from_raw((*m).manager_ctx.cast::<Producer>()) };
    p.freed.fetch_add(1, Ordering::SeqCst);
}

fn produce(freed: &Arc<AtomicUsize>, major: u32) -> *mut DlManagedTensorVersioned {
    let mut p = Box::new(Producer {
        managed: DlManagedTensorVersioned {
            version: DlPackVersion { major, minor: 0 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(producer_deleter),
            flags: FLAG_READ_ONLY,
            dl_tensor: DlTensor {
                data: std::ptr::null_mut(),
                device: DlDevice {
                    device_type: 1,
                    device_id: 0,
                },
                ndim: 1,
                dtype: ElementType::F32.dlpack().unwrap(),
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 4,
            },
        },
        data: (0..9).map(|i| i as f32).collect(),
        shape: [4],
        strides: [2],
        freed: Arc::clone(freed),
    });
    p.managed.dl_tensor.data = p.data.as_mut_ptr().cast::<c_void>();
    p.managed.dl_tensor.shape = p.shape.as_mut_ptr();
    p.managed.dl_tensor.strides = p.strides.as_mut_ptr();
    let raw = Box::into_raw(p);
    // SAFETY: `raw` is live; the context lets the deleter find the box.
    unsafe {
        (*raw).managed.manager_ctx = raw.cast();
        std::ptr::addr_of_mut!((*raw).managed)
    }
}

#[test]
fn a_foreign_strided_tensor_imports_and_is_freed_once() {
    for_each_plugin(|_, client| {
        let dev = client.default_device().unwrap();
        let freed = Arc::new(AtomicUsize::new(0));
        // SAFETY: `produce` hands over a live tensor over memory it keeps until freed.
        let t = unsafe { ImportedTensor::from_versioned(produce(&freed, 1)) }.unwrap();
        assert!(t.desc().readonly);
        assert_eq!(t.desc().byte_offset, 4);
        let b = dlpack::import(client, t, &dev, CopyMode::IfNeeded).unwrap();
        // byte_offset 4 skips element 0; stride 2 takes every other one.
        assert_eq!(b.to_vec_of::<f32>().unwrap(), vec![1.0, 3.0, 5.0, 7.0]);
        drop(b);
        assert_eq!(freed.load(Ordering::SeqCst), 1);

        // Refused imports still free the tensor, once.
        // SAFETY: as above.
        let e = unsafe { ImportedTensor::from_versioned(produce(&freed, 2)) }.unwrap_err();
        assert!(e.to_string().contains("DLPack 2.0"), "{e}");
        assert_eq!(freed.load(Ordering::SeqCst), 2);
        // SAFETY: as above.
        let t = unsafe { ImportedTensor::from_versioned(produce(&freed, 1)) }.unwrap();
        expect_err(
            dlpack::import(client, t, &dev, CopyMode::Never),
            &["no-copy"],
        );
        assert_eq!(freed.load(Ordering::SeqCst), 3);
        // SAFETY: a null pointer is refused before anything is read.
        let e = unsafe { ImportedTensor::from_legacy(std::ptr::null_mut()) }.unwrap_err();
        assert!(e.to_string().contains("null"), "{e}");
    });
}
