//! rpjrt's own spans on the real CPU plugins and the fake: the phases of a run are
//! recorded (load, compile, transfer, execute, wait, fetch, custom calls), nothing is
//! recorded or allocated when tracing is off, and a plugin's own profile (the Profiler
//! extension, which the fake has and the CPU plugins lack) is collected beside the trace.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Mutex;

use common::*;
use rpjrt::ffi::{self, CallFrame, FfiError};
use rpjrt::profiler::PluginProfiler;
use rpjrt::trace::{self, Category};
use rpjrt::{Client, ClientOptions, Code};

/// Counts the allocations of the current thread.
struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; the counter is a
// const-initialised thread local without a destructor, safe to touch in an allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: a block System allocated with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCS.with(Cell::get);
    f();
    ALLOCS.with(Cell::get) - before
}

/// The recorder is process-wide: tests that record take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

#[test]
fn a_span_costs_no_allocation_when_off_and_one_box_when_on() {
    let _g = serial();
    assert!(!trace::is_recording());
    let off = allocations(|| {
        for _ in 0..1000 {
            let _s = trace::span(Category::Execute, "off")
                .bytes(8)
                .device(0)
                .program("a program name");
        }
    });
    assert_eq!(off, 0, "spans allocated {off} times while tracing was off");
    trace::start().unwrap();
    let on = allocations(|| {
        let _s = trace::span(Category::Execute, "on").bytes(8);
    });
    let t = trace::stop().unwrap();
    assert!(on > 0, "the counter counts");
    assert_eq!(t.events().iter().filter(|e| e.name == "on").count(), 1);
}

#[test]
fn a_run_records_every_phase_on_both_cpu_plugins() {
    let _g = serial();
    for_each_plugin_only(|plugin| {
        trace::start().unwrap();
        let client = Client::new(plugin, &ClientOptions::new());
        let profiler = client
            .as_ref()
            .map_err(Clone::clone)
            .and_then(PluginProfiler::begin);
        let run = || -> rpjrt::Result<()> {
            let client = client.as_ref().map_err(Clone::clone)?;
            let exe = compile(client, &mul_add());
            let dev = client.default_device()?;
            let x = client.buffer_from_slice(&[1f32; 8], &[8], &dev)?;
            for _ in 0..3 {
                let out = exe.execute(&[&x, &x])?;
                out[0].block_until_ready()?;
                assert_eq!(out[0].to_vec_of::<f32>()?, vec![2f32; 8]);
            }
            Ok(())
        };
        let r = run();
        let mut t = trace::stop().unwrap();
        r.unwrap();
        t.attach_plugin_profile(profiler.and_then(|p| p.finish()));
        assert_eq!(
            t.count(Category::Load),
            1,
            "client_create: {:?}",
            t.events()
        );
        assert_eq!(t.count(Category::Compile), 1);
        assert_eq!(t.count(Category::Transfer), 1);
        assert_eq!(t.count(Category::Execute), 3);
        assert!(t.count(Category::Wait) >= 3);
        assert_eq!(t.count(Category::Fetch), 3);
        let exec = t.of(Category::Execute).next().unwrap();
        assert!(exec
            .args
            .iter()
            .any(|(k, v)| *k == "program" && matches!(v, trace::Arg::Text(_))));
        let put = t.of(Category::Transfer).next().unwrap();
        assert!(
            put.args.contains(&("bytes", trace::Arg::Int(32))),
            "{put:?}"
        );
        // No Profiler extension on the CPU plugins: said in the metadata, not an error.
        let note = &t.metadata()["plugin_profile"];
        assert!(
            note.starts_with("none: ") && note.contains("Profiler extension"),
            "{note}"
        );
        assert!(t.plugin_profile().is_none());
        let v: serde_json::Value = serde_json::from_str(&t.to_chrome_json()).unwrap();
        assert!(v["otherData"]["plugin_profile"]
            .as_str()
            .unwrap()
            .contains("Profiler"));
    });
}

#[test]
fn custom_call_handlers_are_spans() {
    let _g = serial();
    for_each_plugin(|plugin, client| {
        let target = format!(
            "trace_double_{}",
            if is_old(plugin) { "old" } else { "new" }
        );
        ffi::register(client, &target, |call: &mut CallFrame<'_>| {
            let (args, rets) = call.split();
            let x = args[0].as_slice::<f32>()?.to_vec();
            for (y, x) in rets[0].as_mut_slice::<f32>()?.iter_mut().zip(x) {
                *y = 2.0 * x;
            }
            Ok::<(), FfiError>(())
        })
        .unwrap();
        let program = format!(
            "func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {{
  %0 = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32}} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}}"
        );
        let exe = compile(client, &program);
        let x = client
            .buffer_from_slice(&[1f32; 8], &[8], &client.default_device().unwrap())
            .unwrap();
        trace::start().unwrap();
        let r = exe.execute(&[&x]).and_then(|o| o[0].to_vec_of::<f32>());
        let t = trace::stop().unwrap();
        assert_eq!(r.unwrap(), vec![2f32; 8]);
        let calls: Vec<_> = t.of(Category::CustomCall).collect();
        assert_eq!(calls.len(), 1, "{:?}", t.events());
        assert_eq!(calls[0].name, "custom_call");
        assert!(calls[0]
            .args
            .contains(&("target", trace::Arg::Text(target.clone()))));
    });
}

const FAKE_KNOBS: &[&str] = &["RPJRT_FAKE_EXTENSIONS"];

#[test]
fn the_fakes_profile_is_collected_converted_and_saved_beside_the_trace() {
    let _g = serial();
    let plugin = load_fake(
        &[("RPJRT_FAKE_EXTENSIONS", "Layouts,FFI,Profiler")],
        FAKE_KNOBS,
    )
    .unwrap();
    let client = Client::new(&plugin, &ClientOptions::new()).unwrap();
    trace::start().unwrap();
    let p = PluginProfiler::begin(&client).unwrap();
    let x = client
        .buffer_from_slice(&[1f32; 4], &[4], &client.default_device().unwrap())
        .unwrap();
    drop(x);
    let mut t = trace::stop().unwrap();
    let bytes = p.finish().unwrap();
    assert!(!bytes.is_empty());
    // Collecting again hands over the same data.
    assert_eq!(p.collect().unwrap(), bytes);
    t.attach_plugin_profile(Ok(bytes.clone()));
    assert_eq!(t.plugin_profile(), Some(bytes.as_slice()));
    let note = &t.metadata()["plugin_profile"];
    assert!(
        note.contains("3 event(s)") && note.contains("/device:FAKE:0"),
        "{note}"
    );
    let kernels: Vec<_> = t
        .plugin_events()
        .iter()
        .filter(|e| e["ph"] == "X")
        .collect();
    assert_eq!(kernels.len(), 3);
    assert!(kernels
        .iter()
        .all(|e| e["name"] == "fake_kernel" && e["cat"] == "plugin"));
    // The fake's times are not wall-clock: they count from the recording's start (1 ms).
    assert_eq!(kernels[0]["ts"], 1000.0);
    assert_eq!(kernels[1]["ts"], 1002.0);
    assert_eq!(kernels[0]["dur"], 1.0);

    let dir = std::env::temp_dir().join(format!("rpjrt-trace-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.json");
    t.save(&path).unwrap();
    let beside = dir.join("run.plugin.xspace.pb");
    assert_eq!(trace::profile_path(&path), beside);
    assert_eq!(std::fs::read(&beside).unwrap(), bytes);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(
        v["otherData"]["plugin_profile_file"],
        "run.plugin.xspace.pb"
    );
    let events = v["traceEvents"].as_array().unwrap();
    assert!(events
        .iter()
        .any(|e| e["ph"] == "M" && e["args"]["name"] == "plugin: /device:FAKE:0"));
    assert_eq!(
        events.iter().filter(|e| e["cat"] == "transfer").count(),
        1,
        "{events:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn profiler_misuse_and_absence_are_errors_that_name_the_cause() {
    // Not recording, but its loads and clients would be spans in another test's recording.
    let _g = serial();
    let plugin = load_fake(
        &[("RPJRT_FAKE_EXTENSIONS", "Layouts,FFI,Profiler")],
        FAKE_KNOBS,
    )
    .unwrap();
    let client = Client::new(&plugin, &ClientOptions::new()).unwrap();
    let p = client.profiler().unwrap();
    let e = p.stop().unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(e.to_string().contains("PLUGIN_Profiler_Stop"), "{e}");
    assert!(e.to_string().contains("stop before start"), "{e}");
    p.start().unwrap();
    let e = p.collect().unwrap_err();
    assert!(e.to_string().contains("PLUGIN_Profiler_CollectData"), "{e}");

    // The extension's base only, without the API pointer: unusable, and said so.
    let plugin = load_fake(&[("RPJRT_FAKE_EXTENSIONS", "Profiler:24")], FAKE_KNOBS).unwrap();
    let client = Client::new(&plugin, &ClientOptions::new()).unwrap();
    expect_err(client.profiler(), &["PJRT_Profiler_Extension"]);

    // No extension at all.
    let plugin = load_fake(&[("RPJRT_FAKE_EXTENSIONS", "Layouts,FFI")], FAKE_KNOBS).unwrap();
    let client = Client::new(&plugin, &ClientOptions::new()).unwrap();
    let e = expect_err(
        client.profiler(),
        &["profiler (the PJRT Profiler extension)"],
    );
    assert!(matches!(e, rpjrt::Error::Unsupported { .. }), "{e:?}");
}
