//! Out-of-memory diagnostics on the fake plugin's limited allocator
//! (`RPJRT_FAKE_MEMORY_LIMIT`): every allocating call (put, execute, copy) that runs out
//! reports the device's figures, the client's memory options and a hint; and
//! `Device::memory_stats` on the fake and on the CPU plugins.

mod common;

use std::sync::OnceLock;

use rpjrt::diagnostics::OomReport;
use rpjrt::{Client, ClientOptions, Code, CompileOptions, ElementType, Error, Plugin, Program};

/// Each device of the fake holds this many bytes.
const LIMIT: usize = 4096;

const PROGRAM: &str = "func.func public @main(%a: tensor<3000xui8>) -> tensor<3000xui8> {\n  return %a : tensor<3000xui8>\n}\n";

/// One copy of the fake, loaded once with the memory limit (the knob is read at load).
fn plugin() -> &'static Plugin {
    static PLUGIN: OnceLock<Plugin> = OnceLock::new();
    PLUGIN.get_or_init(|| {
        let copy = std::env::temp_dir().join(format!("rpjrt-fake-oom-{}.so", std::process::id()));
        std::fs::copy(common::fake_plugin_library(), &copy).unwrap();
        std::env::set_var("RPJRT_FAKE_MEMORY_LIMIT", LIMIT.to_string());
        let p = Plugin::load(&copy).expect("the fake loads");
        std::env::remove_var("RPJRT_FAKE_MEMORY_LIMIT");
        let _ = std::fs::remove_file(&copy);
        p
    })
}

fn client(options: &ClientOptions) -> Client {
    Client::new(plugin(), options).expect("client")
}

fn report(e: &Error) -> &OomReport {
    assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
    e.oom_report()
        .unwrap_or_else(|| panic!("no report in {e:?}"))
}

#[test]
fn a_put_past_the_limit_names_the_request_the_figures_and_the_hint() {
    let c = client(&ClientOptions::new());
    let d = c.default_device().unwrap();
    let big = vec![0u8; 2 * LIMIT];
    let e = c
        .buffer_from_host(&big, ElementType::U8, &[8192], None, &d, None)
        .unwrap_err();
    let r = report(&e);
    assert_eq!(e.entry(), Some("PJRT_Client_BufferFromHostBuffer"));
    let s = r.stats().expect("the fake reports figures");
    assert_eq!((s.bytes_in_use, s.bytes_limit), (0, Some(LIMIT as i64)));
    assert_eq!(r.request_bytes, Some(8192));
    let text = e.to_string();
    for needle in [
        "RESOURCE_EXHAUSTED",
        "request: uint8[8192], 8192 bytes, on device 0",
        "device 0 allocator: in use 0 bytes, limit 4.0 KiB (4096 bytes)",
        "largest free block 4.0 KiB (4096 bytes)",
        "client memory options: none set",
        "hint: the request alone (8.0 KiB (8192 bytes)) is larger than the device's limit",
        "no memory cap",
    ] {
        assert!(text.contains(needle), "{needle:?} not in:\n{text}");
    }
    // Already explained: the CLI's helper adds nothing more.
    assert_eq!(rpjrt::diagnostics::explain(&e, Some(&d), None), None);
    // The client stays usable.
    let b = c.buffer_from_slice(&[1u8; 16], &[16], &d).unwrap();
    assert_eq!(b.to_vec().unwrap(), vec![1u8; 16]);
}

#[test]
fn an_execute_whose_outputs_do_not_fit_reports_the_device_in_use() {
    let c = client(&ClientOptions::new().set("memory_fraction", 0.5f32));
    let d = c.default_device().unwrap();
    let exe = c
        .compile(&Program::mlir(PROGRAM), &CompileOptions::default())
        .unwrap();
    let x = c
        .buffer_from_host(&[7u8; 3000], ElementType::U8, &[3000], None, &d, None)
        .unwrap();
    let e = exe.execute(&[&x]).unwrap_err();
    let r = report(&e);
    assert_eq!(e.entry(), Some("PJRT_LoadedExecutable_Execute"));
    assert_eq!(r.stats().unwrap().bytes_in_use, 3000);
    assert_eq!(r.request_bytes, Some(3000));
    let text = e.to_string();
    for needle in [
        "request: executing",
        "in use 2.9 KiB (3000 bytes), limit 4.0 KiB (4096 bytes)",
        "largest free block 1.1 KiB (1096 bytes)",
        "allocations 1",
        "client memory options: memory_fraction=0.5",
        "capped at memory_fraction=0.5",
    ] {
        assert!(text.contains(needle), "{needle:?} not in:\n{text}");
    }
    // Freeing the input makes room.
    x.delete().unwrap();
    let y = c
        .buffer_from_host(&[9u8; 3000], ElementType::U8, &[3000], None, &d, None)
        .unwrap();
    drop(x);
    let e = exe.execute(&[&y]).unwrap_err();
    assert_eq!(report(&e).stats().unwrap().bytes_in_use, 3000);
    y.delete().unwrap();
}

#[test]
fn a_copy_to_a_full_device_names_that_device() {
    let c = client(&ClientOptions::new().set("preallocate", true));
    let devs = c.addressable_devices().unwrap();
    let (d0, d1) = (&devs[0], &devs[1]);
    let x = c
        .buffer_from_host(&[1u8; 3000], ElementType::U8, &[3000], None, d0, None)
        .unwrap();
    let first = x.copy_to_device(d1).unwrap();
    let e = x.copy_to_device(d1).unwrap_err();
    let r = report(&e);
    assert_eq!(r.devices.len(), 1);
    assert_eq!(r.devices[0].device, d1.id());
    let text = e.to_string();
    assert!(
        text.contains(&format!("device {} allocator: in use 2.9 KiB", d1.id())),
        "{text}"
    );
    assert!(text.contains("preallocate=true"), "{text}");
    assert!(text.contains("set preallocate=false"), "{text}");
    drop(first);
    x.copy_to_device(d1).unwrap();
}

#[test]
fn memory_stats_count_what_is_allocated() {
    let c = client(&ClientOptions::new());
    let d = c.default_device().unwrap();
    let before = d.memory_stats().unwrap();
    assert_eq!(before.bytes_in_use, 0);
    assert_eq!(before.bytes_limit, Some(LIMIT as i64));
    let b = c.buffer_from_slice(&[0f32; 100], &[100], &d).unwrap();
    let s = d.memory_stats().unwrap();
    assert_eq!(s.bytes_in_use, 400);
    assert_eq!(s.largest_free_block_bytes, Some(LIMIT as i64 - 400));
    assert_eq!(s.peak_bytes_in_use, Some(400));
    assert_eq!(s.num_allocs, Some(1));
    drop(b);
    let s = d.memory_stats().unwrap();
    assert_eq!((s.bytes_in_use, s.peak_bytes_in_use), (0, Some(400)));
    assert_eq!(rpjrt::diagnostics::memory_stats(&d).unwrap(), s);
}

/// Both CPU plugins report no allocator figures: the plugin's answer, not a crash or
/// made-up numbers.
#[test]
fn cpu_plugins_say_why_they_report_no_figures() {
    common::for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let e = d.memory_stats().unwrap_err();
        assert_eq!(e.code(), Code::Unimplemented, "{e}");
        let r = d.memory_report(None).to_string();
        assert!(r.contains("the plugin reports no allocator figures"), "{r}");
    });
}
