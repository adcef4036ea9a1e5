//! Memory outside a buffer's own allocation, and user events, on both CPU plugins: views
//! of memory someone else owns, asynchronous raw copies to host, user-created events
//! (PJRT 0.89: only the 0.115 plugin has them) and DMA mapping (both CPU plugins refuse it;
//! `external_fake.rs` covers the mapping itself).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{for_each_plugin, set_error_wakes_a_waiter};
use rpjrt::{Code, DeviceAddress, ElementType, Error, Event};

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

/// Sixteen floats on a 64-byte boundary, as XLA's CPU runtime wants its arrays.
#[repr(C, align(64))]
struct Aligned([f32; 16]);

#[test]
fn a_view_adopts_memory_without_a_copy_and_reports_when_it_is_released() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let mut mem = Box::new(Aligned([0.0; 16]));
        for (i, x) in mem.0.iter_mut().enumerate() {
            *x = i as f32 * 1.5;
        }
        let addr_value = mem.0.as_ptr() as usize;
        let released = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&released);
        // SAFETY: `mem` holds 16 aligned floats and outlives the view: the test waits for
        // `on_delete` before it drops `mem`.
        let addr = unsafe { DeviceAddress::new(addr_value) };
        let view = c
            .view_of_device_buffer(
                addr,
                ElementType::F32,
                &[4, 4],
                &d,
                None,
                Some(Box::new(move || {
                    r.fetch_add(1, Ordering::SeqCst);
                })),
            )
            .unwrap();
        assert_eq!(view.dims(), &[4, 4]);
        assert_eq!(view.element_type(), ElementType::F32);
        // No copy: the buffer is the memory.
        assert_eq!(view.unsafe_pointer().unwrap(), addr_value);
        assert_eq!(view.to_vec().unwrap(), f32_bytes(&mem.0));
        assert_eq!(released.load(Ordering::SeqCst), 0);
        drop(view);
        let start = Instant::now();
        while released.load(Ordering::SeqCst) == 0 && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(released.load(Ordering::SeqCst), 1, "on_delete runs once");
        drop(mem);

        // Without an on_delete the view is still released cleanly (XLA's wrapper calls the
        // callback it was given unconditionally; rpjrt always gives one).
        let mem = Box::new(Aligned([2.0; 16]));
        // SAFETY: as above; the view is dropped before `mem`, and with no on_delete rpjrt
        // gives the plugin a no-op, so nothing runs after `mem` is gone.
        let addr = unsafe { DeviceAddress::new(mem.0.as_ptr() as usize) };
        let view = c
            .view_of_device_buffer(addr, ElementType::F32, &[16], &d, None, None)
            .unwrap();
        assert_eq!(view.to_vec().unwrap(), f32_bytes(&[2.0; 16]));
        view.block_until_ready().unwrap();
        drop(view);
        drop(mem);
    });
}

#[test]
fn a_view_refuses_bad_arguments_before_the_plugin() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        // SAFETY: refused before any use (null address).
        let null = unsafe { DeviceAddress::new(0) };
        let ran = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&ran);
        let e = c
            .view_of_device_buffer(
                null,
                ElementType::F32,
                &[4],
                &d,
                None,
                Some(Box::new(move || {
                    r.fetch_add(1, Ordering::SeqCst);
                })),
            )
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        assert!(e.to_string().contains("non-null address"), "{e}");
        // The callback was dropped without running, and its captures released.
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        assert_eq!(Arc::strong_count(&ran), 1);
        // SAFETY: refused before any use (negative dimension).
        let addr = unsafe { DeviceAddress::new(64) };
        let e = c
            .view_of_device_buffer(addr, ElementType::F32, &[-1], &d, None, None)
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    });
}

#[test]
fn an_async_raw_copy_reads_a_range_later() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let b = c
            .buffer_from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4], &d)
            .unwrap();
        let copy = b.copy_raw_to_host_async(4, 8).unwrap();
        let bytes = copy.wait().unwrap();
        assert_eq!(bytes, f32_bytes(&[2.0, 3.0]));

        // Several in flight at once, each with its own destination.
        let copies: Vec<_> = (0..4)
            .map(|i| b.copy_raw_to_host_async(i * 4, 4).unwrap())
            .collect();
        let got: Vec<Vec<u8>> = copies.into_iter().map(|c| c.wait().unwrap()).collect();
        assert_eq!(got.concat(), f32_bytes(&[1.0, 2.0, 3.0, 4.0]));

        // Dropped unawaited: the drop waits, so nothing writes freed memory.
        let copy = b.copy_raw_to_host_async(0, 16).unwrap();
        drop(copy);

        // An empty range needs no call; a range past the end is refused.
        let empty = b.copy_raw_to_host_async(16, 0).unwrap();
        assert!(empty.is_ready().unwrap());
        assert!(empty.wait().unwrap().is_empty());
        let e = b.copy_raw_to_host_async(12, 8).unwrap_err();
        assert!(
            e.to_string().contains("runs past the buffer's 16 bytes"),
            "{e}"
        );
        let e = b.copy_raw_to_host_async(usize::MAX, 2).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    });
}

#[test]
fn user_events_complete_when_set_or_name_the_entry_and_version() {
    for_each_plugin(|p, c| {
        if p.version().minor < 89 {
            let e = Event::new_user(c).unwrap_err();
            assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
            let text = e.to_string();
            assert!(text.contains("PJRT_Event_Create"), "{text}");
            assert!(text.contains("0.89"), "{text}");
            return;
        }
        let ev = Event::new_user(c).unwrap();
        assert!(!ev.is_ready().unwrap());
        assert!(!ev.wait_timeout(Duration::from_millis(20)).unwrap());
        ev.set(Ok(())).unwrap();
        assert!(ev.is_ready().unwrap());
        ev.wait().unwrap();
        let again = ev.set(Ok(())).unwrap_err();
        assert!(again.to_string().contains("set already"), "{again}");

        // A waiter on another thread is woken by the set, with the error it carries.
        let ev = Arc::new(Event::new_user(c).unwrap());
        set_error_wakes_a_waiter(&ev, Code::Aborted, "stopped by the user");

        // A timed wait registers the OnReady callback; the set completes it.
        let ev = Arc::new(Event::new_user(c).unwrap());
        let setter = {
            let ev = Arc::clone(&ev);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(10));
                ev.set(Ok(())).unwrap();
            })
        };
        assert!(ev.wait_timeout(Duration::from_secs(10)).unwrap());
        setter.join().unwrap();

        // A plugin's own event cannot be set.
        let b = c
            .buffer_from_slice(&[1.0f32], &[1], &c.default_device().unwrap())
            .unwrap();
        let ready = b.ready_event().unwrap();
        let e = ready.set(Ok(())).unwrap_err();
        assert!(e.to_string().contains("Event::new_user"), "{e}");
    });
}

#[test]
fn dma_mapping_is_refused_by_the_cpu_plugins_with_the_entry_named() {
    for_each_plugin(|_, c| {
        let e = c.dma_map(4096).unwrap_err();
        assert_eq!(e.code(), Code::Unimplemented, "{e:?}");
        assert!(e.to_string().contains("PJRT_Client_DmaMap"), "{e}");
        let e = c.dma_map(0).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        assert!(e.to_string().contains("at least one byte"), "{e}");
    });
}
