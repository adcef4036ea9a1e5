//! One wait for many devices: `Event::wait_all` and the wait of a prepared multi-device call
//! (`CallOutputs::block_until_ready` / `wait_timeout`) sleep once however many events
//! complete one after another, and report a failed device's error.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use rpjrt::{Client, ClientOptions, Code, Error, Event, Plugin};

const KNOBS: [&str; 1] = ["RPJRT_FAKE_EVENT_ERROR"];

/// The calling thread's voluntary context switches so far: how often it went to sleep.
fn sleeps_of_this_thread() -> u64 {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("voluntary_ctxt_switches in /proc/thread-self/status")
}

/// Eight pending events set one after another, 3 ms apart, by another thread, the sixth
/// with an error: one `wait_all` returns after the last one, with the sixth's error, having
/// slept at most a few times (a wait per event would sleep once per event).
fn one_wait_covers_events_set_one_by_one(client: &Client) {
    let events: Vec<Arc<Event>> = (0..8)
        .map(|_| Arc::new(Event::new_user(client).unwrap()))
        .collect();
    let setter = {
        let events = events.clone();
        std::thread::spawn(move || {
            for (i, ev) in events.iter().enumerate() {
                std::thread::sleep(Duration::from_millis(3));
                let r = if i == 5 {
                    Err(Error::Pjrt {
                        entry: "test",
                        code: Code::Internal,
                        message: "device 5 fell over".into(),
                    })
                } else {
                    Ok(())
                };
                ev.set(r).unwrap();
            }
        })
    };
    let refs: Vec<&Event> = events.iter().map(|e| &**e).collect();
    let before = sleeps_of_this_thread();
    let r = Event::wait_all(&refs);
    let slept = sleeps_of_this_thread() - before;
    setter.join().unwrap();
    let e = r.unwrap_err();
    assert_eq!(e.code(), Code::Internal, "{e}");
    assert!(e.to_string().contains("device 5 fell over"), "{e}");
    for (i, ev) in events.iter().enumerate() {
        assert!(
            ev.is_ready().unwrap(),
            "event {i} is complete after the wait"
        );
        assert_eq!(ev.error().is_some(), i == 5, "event {i}: {:?}", ev.error());
    }
    assert!(
        slept <= 3,
        "the waiter slept {slept} times for 8 events set one after another"
    );
    // Complete events: no callback, no sleep, the same answer.
    let e = Event::wait_all(&refs).unwrap_err();
    assert!(e.to_string().contains("device 5 fell over"), "{e}");
    Event::wait_all(&[]).unwrap();
    Event::wait_all(&refs[..5]).unwrap();
}

#[test]
fn one_wait_covers_events_on_the_fake_plugin() {
    let p = load_fake(&[], &KNOBS).unwrap();
    let c = Client::new(&p, &ClientOptions::new()).unwrap();
    one_wait_covers_events_set_one_by_one(&c);
}

#[test]
fn one_wait_covers_events_on_the_cpu_plugin() {
    // User events need PJRT 0.89: the 0.115 plugin (the 0.81 one has none).
    let p = plugin(Which::New);
    let c = Client::new(&p, &ClientOptions::new()).unwrap();
    one_wait_covers_events_set_one_by_one(&c);
}

/// A prepared call on 4 devices of the fake plugin whose completion events all fail.
fn failing_call(p: &Plugin) -> rpjrt::PreparedCall {
    let c = Client::new(p, &ClientOptions::new().set("fake_device_count", 4)).unwrap();
    let text = "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}\n";
    let exe = compile_with(&c, text, &replicas(4));
    let devices = exe.addressable_devices().unwrap();
    assert_eq!(devices.len(), 4);
    let bufs: Vec<_> = devices
        .iter()
        .map(|d| c.buffer_from_slice(&[1.0f32; 4], &[4], d).unwrap())
        .collect();
    let lists: Vec<Vec<_>> = bufs.iter().map(|b| vec![b]).collect();
    exe.prepare(&lists, &[]).unwrap()
}

#[test]
fn a_failing_device_fails_the_prepared_call_with_its_error() {
    let p = load_fake(
        &[(
            "RPJRT_FAKE_EVENT_ERROR",
            "PJRT_LoadedExecutable_Execute:INTERNAL:a device fell over",
        )],
        &KNOBS,
    )
    .unwrap();
    let call = failing_call(&p);
    let e = call.call_and_wait().unwrap_err();
    assert_eq!(e.code(), Code::Internal, "{e}");
    assert!(e.to_string().contains("a device fell over"), "{e}");

    let outs = call.call().unwrap();
    assert!(outs.device_errors().is_empty(), "no wait yet");
    let e = outs.wait_timeout(Duration::from_secs(10)).unwrap_err();
    assert!(e.to_string().contains("a device fell over"), "{e}");
    // Every device's error is recorded, in device order; waiting again says the same.
    let errors = outs.device_errors();
    assert_eq!(
        errors.iter().map(|(d, _)| *d).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    assert!(errors
        .iter()
        .all(|(_, e)| e.to_string().contains("a device fell over")));
    let e = outs.block_until_ready().unwrap_err();
    assert!(e.to_string().contains("a device fell over"), "{e}");
}

#[test]
fn a_prepared_call_on_every_cpu_device_waits_once_for_all() {
    let p = plugin(Which::New);
    let c = Client::new(&p, &ClientOptions::new().set("cpu_device_count", 8)).unwrap();
    let exe = compile_with(&c, &mul_add(), &replicas(8));
    let devices = exe.addressable_devices().unwrap();
    assert_eq!(devices.len(), 8);
    let bufs: Vec<_> = devices
        .iter()
        .enumerate()
        .map(|(r, d)| {
            let v: Vec<f32> = (0..8).map(|i| (i + 10 * r) as f32).collect();
            c.buffer_from_slice(&v, &[8], d).unwrap()
        })
        .collect();
    let lists: Vec<Vec<_>> = bufs.iter().map(|b| vec![b, b]).collect();
    let call = exe.prepare(&lists, &[]).unwrap();
    for _ in 0..50 {
        let outs = call.call().unwrap();
        assert!(outs.wait_timeout(Duration::from_secs(30)).unwrap());
        assert!(outs.device_errors().is_empty());
        for (r, b) in outs.buffers().iter().enumerate() {
            assert!(b.is_known_ready(), "output of device {r} is known ready");
            let want: Vec<f32> = (0..8)
                .map(|i| ((i + 10 * r) * (i + 10 * r)) as f32 + 1.0)
                .collect();
            assert_eq!(b.to_vec_of::<f32>().unwrap(), want);
        }
        outs.block_until_ready().unwrap();
    }
}
