//! The paths the CPU plugins lack or refuse, on the fake plugin: DMA mapping (both CPU
//! plugins answer UNIMPLEMENTED), user events on a plugin that has them, and each entry of
//! the four families missing from a plugin's table: `Error::Unsupported` naming the entry
//! and the PJRT version that added it.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::set_error_wakes_a_waiter;
use rpjrt::{Client, ClientOptions, Code, DeviceAddress, ElementType, Error, Event, Plugin};

const KNOBS: [&str; 3] = [
    "RPJRT_FAKE_NULL_SLOTS",
    "RPJRT_FAKE_VERSION",
    "RPJRT_FAKE_FAIL",
];

static LOCK: Mutex<()> = Mutex::new(());
static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A client on a fresh copy of the fake plugin configured with `knobs`.
fn client(knobs: &[(&str, &str)]) -> Client {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let dir = std::env::temp_dir().join(format!("rpjrt-external-fake-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let copy = dir.join(format!("fake-{n}.so"));
    std::fs::copy(common::fake_plugin_library(), &copy).unwrap();
    for (k, v) in knobs {
        assert!(KNOBS.contains(k), "unknown knob {k}");
        std::env::set_var(k, v);
    }
    let p = Plugin::load(&copy);
    // The library stays mapped (never unloaded); the copy on disk is not needed again.
    let _ = std::fs::remove_file(&copy);
    for k in KNOBS {
        std::env::remove_var(k);
    }
    Client::new(&p.expect("fake plugin loads"), &ClientOptions::new()).expect("client")
}

fn unsupported(e: Error, entry: &str, version: &str) {
    assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains(entry), "{text} does not name {entry}");
    assert!(text.contains(version), "{text} does not name {version}");
}

#[test]
fn a_dma_region_is_mapped_writable_and_unmapped() {
    let c = client(&[]);
    let mut r = c.dma_map(10_000).unwrap();
    assert_eq!(r.len(), 10_000);
    assert!(r.iter().all(|&b| b == 0), "zeroed");
    assert_eq!(r.as_ptr() as usize % 4096, 0, "page-aligned");
    r[..4].copy_from_slice(&7.5f32.to_ne_bytes());
    // Used as host data for a buffer like any slice.
    let d = c.default_device().unwrap();
    let floats: Vec<f32> = r[..16]
        .chunks(4)
        .map(|b| f32::from_ne_bytes(b.try_into().unwrap()))
        .collect();
    let b = c.buffer_from_slice(&floats, &[4], &d).unwrap();
    assert_eq!(&b.to_vec().unwrap()[..4], &7.5f32.to_ne_bytes());
    r.unmap().unwrap();

    // Dropped, a region is unmapped too: the fake refuses a second map of a mapped range,
    // so two regions alive at once are distinct and both unmap cleanly.
    let a = c.dma_map(4096).unwrap();
    let b = c.dma_map(4096).unwrap();
    assert_ne!(a.as_ptr(), b.as_ptr());
    drop(a);
    b.unmap().unwrap();
}

#[test]
fn a_failed_unmap_is_reported_and_the_memory_is_kept() {
    let c = client(&[(
        "RPJRT_FAKE_FAIL",
        "PJRT_Client_DmaUnmap:INTERNAL:still in use",
    )]);
    let r = c.dma_map(4096).unwrap();
    let e = r.unmap().unwrap_err();
    assert_eq!(e.code(), Code::Internal, "{e:?}");
    let text = e.to_string();
    assert!(text.contains("PJRT_Client_DmaUnmap"), "{text}");
    assert!(text.contains("still in use"), "{text}");
    // A refused map is the plugin's error, naming the entry.
    let c = client(&[(
        "RPJRT_FAKE_FAIL",
        "PJRT_Client_DmaMap:RESOURCE_EXHAUSTED:no pins",
    )]);
    let e = c.dma_map(4096).unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.to_string().contains("PJRT_Client_DmaMap"), "{e}");
}

#[test]
fn user_events_on_the_fake_wake_waiters_and_callbacks() {
    let c = client(&[]);
    let ev = Arc::new(Event::new_user(&c).unwrap());
    assert!(!ev.is_ready().unwrap());
    // The timed wait registers OnReady on the pending event; nothing completes it yet.
    assert!(!ev.wait_timeout(Duration::from_millis(10)).unwrap());
    set_error_wakes_a_waiter(&ev, Code::DataLoss, "the producer died");
    // The OnReady registered by the timed wait got the same status.
    let e = ev.wait_timeout(Duration::from_secs(5)).unwrap_err();
    assert_eq!(e.code(), Code::DataLoss, "{e:?}");
    assert_eq!(ev.error().map(|e| e.code()), Some(Code::DataLoss));
    assert!(ev
        .set(Ok(()))
        .unwrap_err()
        .to_string()
        .contains("set already"));
}

#[test]
fn a_refused_set_leaves_the_event_settable() {
    let c = client(&[("RPJRT_FAKE_FAIL", "PJRT_Event_Set:UNAVAILABLE:try later")]);
    let ev = Event::new_user(&c).unwrap();
    let e = ev.set(Ok(())).unwrap_err();
    assert!(e.to_string().contains("PJRT_Event_Set"), "{e}");
    // rpjrt's once-only guard did not latch on the refusal.
    let e = ev.set(Ok(())).unwrap_err();
    assert!(e.to_string().contains("try later"), "{e}");
}

#[test]
fn each_missing_entry_is_unsupported_naming_it_and_its_version() {
    // A plugin older than the entries: the table is too short to hold them.
    let c = client(&[("RPJRT_FAKE_VERSION", "0.66")]);
    unsupported(c.dma_map(4096).unwrap_err(), "PJRT_Client_DmaMap", "0.67");
    unsupported(
        Event::new_user(&c).unwrap_err(),
        "PJRT_Event_Create",
        "0.89",
    );

    // A plugin new enough that leaves the slots empty.
    let c = client(&[(
        "RPJRT_FAKE_NULL_SLOTS",
        "PJRT_Client_CreateViewOfDeviceBuffer,PJRT_Client_DmaMap,PJRT_Event_Create,\
         PJRT_Buffer_CopyRawToHost",
    )]);
    let d = c.default_device().unwrap();
    unsupported(c.dma_map(4096).unwrap_err(), "PJRT_Client_DmaMap", "0.67");
    unsupported(
        Event::new_user(&c).unwrap_err(),
        "PJRT_Event_Create",
        "0.89",
    );
    let ran = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&ran);
    // SAFETY: the call is refused before the plugin could use the address.
    let addr = unsafe { DeviceAddress::new(4096) };
    let e = c
        .view_of_device_buffer(
            addr,
            ElementType::F32,
            &[4],
            &d,
            None,
            Some(Box::new(move || {
                r.fetch_add(1, Ordering::SeqCst);
            })),
        )
        .unwrap_err();
    unsupported(e, "PJRT_Client_CreateViewOfDeviceBuffer", "0.57");
    assert_eq!(ran.load(Ordering::SeqCst), 0, "dropped, not run");
    assert_eq!(Arc::strong_count(&ran), 1, "its captures are released");
    let b = c.buffer_from_slice(&[1.0f32, 2.0], &[2], &d).unwrap();
    unsupported(
        b.copy_raw_to_host_async(0, 4).unwrap_err(),
        "PJRT_Buffer_CopyRawToHost",
        "0.57",
    );
}
