//! A steady loop of `execute_into` + `block_until_ready` makes no heap allocation of its own.
//!
//! This test binary installs a counting global allocator. It counts only on the thread that
//! asked for it and only between two marks, so the plugin's worker threads (which allocate
//! through Rust's allocator too when the plugin is the fake one) do not show up; the real
//! plugins' own C++ allocations go through `operator new`, not through Rust's allocator,
//! and are not counted either. What is counted is rpjrt's work on the calling thread.
//!
//! Run on the fake plugin and on the PJRT 0.115 CPU plugin, with 1, 2 and 8 outputs.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use rpjrt::{Buffer, Client, ClientOptions, CompileOptions, Executable, Plugin, Program};

/// The system allocator, counting allocations of a marked stretch of one thread.
struct Counting;

thread_local! {
    /// Whether this thread is inside a counted stretch.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    /// Allocations (and reallocations) this thread made while counting.
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

fn note() {
    // `try_with`: the allocator also runs while thread-locals are torn down.
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = COUNT.try_with(|n| n.set(n.get() + 1));
        }
    });
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract holds as it does for `System`; counting touches only
// const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: forwarded unchanged (the caller's contract is `System`'s).
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Allocations `body` makes on this thread.
fn allocations(body: impl FnOnce()) -> u64 {
    COUNT.with(|n| n.set(0));
    COUNTING.with(|on| on.set(true));
    body();
    COUNTING.with(|on| on.set(false));
    COUNT.with(|n| n.get())
}

/// `@main(a, b)` with `n` results: `a * b + k` for k = 0..n (distinct, so no two outputs
/// can be the same buffer).
fn program(n: usize) -> String {
    let results = vec!["tensor<8xf32>"; n].join(", ");
    let mut body = String::from("    %p = stablehlo.multiply %a, %b : tensor<8xf32>\n");
    let mut names = Vec::new();
    for k in 0..n {
        body.push_str(&format!(
            "    %c{k} = stablehlo.constant dense<{k}.0> : tensor<8xf32>\n    %r{k} = stablehlo.add %p, %c{k} : tensor<8xf32>\n"
        ));
        names.push(format!("%r{k}"));
    }
    format!(
        "func.func public @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> ({results}) {{\n{body}    return {} : {results}\n}}\n",
        names.join(", ")
    )
}

/// Warms up, then asserts that `calls` executions + waits allocate nothing; returns the
/// outputs of the last one.
fn assert_no_allocation(exe: &Executable, x: &Buffer, outputs: usize, what: &str) -> Vec<Buffer> {
    let mut outs = Vec::new();
    let run = |outs: &mut Vec<Buffer>| {
        exe.execute_into(&[x, x], outs).expect("execute");
        assert_eq!(outs.len(), outputs, "{what}: outputs");
        for o in outs.iter() {
            o.block_until_ready().expect("wait");
        }
    };
    // Warm-up: the first calls fill the executable's spare handles, the thread-locals of
    // the wait and the output list's capacity.
    for _ in 0..20 {
        run(&mut outs);
    }
    const CALLS: u64 = 200;
    let n = allocations(|| {
        for _ in 0..CALLS {
            run(&mut outs);
        }
    });
    assert_eq!(
        n, 0,
        "{what}: {n} heap allocations in {CALLS} calls of execute_into + block_until_ready \
         with {outputs} output(s); expected none"
    );
    outs
}

/// The counter works: a `Vec` made while counting is seen, and one made on another thread
/// meanwhile is not.
#[test]
fn the_counter_sees_this_threads_allocations_only() {
    let n = allocations(|| {
        let v: Vec<u64> = Vec::with_capacity(3);
        std::hint::black_box(&v);
    });
    assert_eq!(n, 1);
    let n = allocations(|| {
        std::thread::scope(|s| {
            // Spawning allocates on this thread (the thread's handle); what the thread
            // itself allocates is not counted.
            s.spawn(|| {
                let v: Vec<Vec<u8>> = (0..100).map(|_| vec![1u8; 16]).collect();
                std::hint::black_box(&v);
            });
        });
    });
    assert!(
        n < 100,
        "the other thread's 100 allocations were counted ({n})"
    );
}

/// The ergonomic `execute` allocates its result `Vec`, and nothing else.
fn assert_execute_allocates_only_its_vec(exe: &Executable, x: &Buffer, what: &str) {
    for _ in 0..20 {
        exe.execute(&[x, x]).expect("execute")[0]
            .block_until_ready()
            .expect("wait");
    }
    let n = allocations(|| {
        for _ in 0..100 {
            let out = exe.execute(&[x, x]).expect("execute");
            out[0].block_until_ready().expect("wait");
        }
    });
    assert_eq!(
        n, 100,
        "{what}: execute should allocate exactly its result Vec per call"
    );
}

fn check_plugin(plugin: &Plugin, fake: bool) {
    let client = Client::new(plugin, &ClientOptions::new()).expect("client");
    let device = client.default_device().expect("device");
    let data: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let x = client.buffer_from_slice(&data, &[8], &device).expect("put");
    for n in [1usize, 2, 8] {
        let exe = client
            .compile(&Program::mlir(program(n)), &CompileOptions::default())
            .expect("compile");
        assert_eq!(exe.num_outputs(), n);
        let what = format!("{} with {n} outputs", plugin.path().display());
        let outs = assert_no_allocation(&exe, &x, n, &what);
        // The recycled handles carry the right contents (the fake copies argument 0).
        for (k, o) in outs.iter().enumerate() {
            let got = o.to_vec_of::<f32>().expect("read");
            let want: Vec<f32> = if fake {
                data.clone()
            } else {
                data.iter().map(|v| v * v + k as f32).collect()
            };
            assert_eq!(got, want, "{what}: output {k}");
        }
        assert_execute_allocates_only_its_vec(&exe, &x, &what);
    }
}

#[test]
fn execute_into_allocates_nothing_on_the_fake_plugin() {
    let plugin = common::load_fake(&[], &[]).expect("fake plugin");
    check_plugin(&plugin, true);
}

#[test]
fn execute_into_allocates_nothing_on_a_real_cpu_plugin() {
    check_plugin(&common::plugin(common::Which::New), false);
}

/// A recycled handle is a new buffer: an output kept from an earlier call keeps its
/// contents and stays usable while later calls run, and a dropped output's allocation
/// serves a later call without touching the kept one.
#[test]
fn kept_outputs_are_never_recycled() {
    let plugin = common::plugin(common::Which::New);
    let client = Client::new(&plugin, &ClientOptions::new()).expect("client");
    let device = client.default_device().expect("device");
    let exe = client
        .compile(&Program::mlir(program(2)), &CompileOptions::default())
        .expect("compile");
    let a = client
        .buffer_from_slice(&[1f32; 8], &[8], &device)
        .expect("put");
    let b = client
        .buffer_from_slice(&[2f32; 8], &[8], &device)
        .expect("put");
    let mut outs = Vec::new();
    exe.execute_into(&[&a, &a], &mut outs).expect("execute");
    let kept = outs[1].clone();
    for _ in 0..50 {
        exe.execute_into(&[&b, &b], &mut outs).expect("execute");
        assert_eq!(outs[1].to_vec_of::<f32>().unwrap(), vec![5f32; 8]);
    }
    assert_eq!(kept.to_vec_of::<f32>().unwrap(), vec![2f32; 8]);
    drop(outs);
    drop(exe);
    // The kept output outlives its executable (its recycler is gone: it is freed normally).
    assert_eq!(kept.to_vec_of::<f32>().unwrap(), vec![2f32; 8]);
}

/// A poll that sees the output ready remembers it, so the wait after it is free; the
/// ergonomic wait remembers it too.
#[test]
fn a_successful_poll_is_remembered() {
    // A zero poll time (RPJRT_WAIT_SPIN_US=0) would make every poll say "pending".
    if rpjrt::wait_spin().is_zero() {
        rpjrt::set_wait_spin(std::time::Duration::from_micros(100));
    }
    let plugin = common::plugin(common::Which::New);
    let client = Client::new(&plugin, &ClientOptions::new()).expect("client");
    let device = client.default_device().expect("device");
    let exe = client
        .compile(&Program::mlir(program(1)), &CompileOptions::default())
        .expect("compile");
    let x = client
        .buffer_from_slice(&[3f32; 8], &[8], &device)
        .expect("put");
    let out = exe.execute(&[&x, &x]).expect("execute");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !out[0].poll_ready().expect("poll") {
        assert!(std::time::Instant::now() < deadline, "never ready");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(out[0].is_known_ready());
    out[0].block_until_ready().expect("wait");
    let out = exe.execute(&[&x, &x]).expect("execute");
    assert!(!out[0].is_known_ready() || out[0].is_ready().unwrap());
    out[0].block_until_ready().expect("wait");
    assert!(out[0].is_known_ready());
    assert_eq!(out[0].to_vec_of::<f32>().unwrap(), vec![9f32; 8]);
}

/// Spare handles move between outputs of different shapes and between threads: every
/// output keeps the element type, shape and contents of the output it is, whichever
/// earlier output's allocation it reuses and whichever thread dropped that one.
#[test]
fn reused_handles_take_the_shape_of_their_output_across_threads() {
    let plugin = common::plugin(common::Which::New);
    let client = Client::new(&plugin, &ClientOptions::new()).expect("client");
    let device = client.default_device().expect("device");
    let text = "func.func public @main(%a: tensor<8xf32>) -> (tensor<2x3xi32>, tensor<8xf32>, tensor<f32>) {\n\
        %i = stablehlo.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>\n\
        %d = stablehlo.add %a, %a : tensor<8xf32>\n\
        %z = stablehlo.constant dense<0.0> : tensor<f32>\n\
        %s = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [0] : (tensor<8xf32>, tensor<f32>) -> tensor<f32>\n\
        return %i, %d, %s : tensor<2x3xi32>, tensor<8xf32>, tensor<f32>\n}\n";
    let exe = client
        .compile(&Program::mlir(text), &CompileOptions::default())
        .expect("compile");
    let x = client
        .buffer_from_slice(&[1.5f32; 8], &[8], &device)
        .expect("put");
    let check = |outs: &[Buffer]| {
        assert_eq!(outs.len(), 3);
        assert_eq!(outs[0].dims(), &[2, 3]);
        assert_eq!(outs[0].to_vec_of::<i32>().unwrap(), vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(outs[1].dims(), &[8]);
        assert_eq!(outs[1].to_vec_of::<f32>().unwrap(), vec![3f32; 8]);
        assert!(outs[2].dims().is_empty());
        assert_eq!(outs[2].to_vec_of::<f32>().unwrap(), vec![12f32]);
    };
    let (tx, rx) = std::sync::mpsc::channel::<Vec<Buffer>>();
    std::thread::scope(|s| {
        // Another thread drops the outputs, in reverse order: spares go back from there
        // and come out for other output positions here.
        let dropper = s.spawn(move || {
            for mut outs in rx {
                while let Some(o) = outs.pop() {
                    drop(o);
                }
            }
        });
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let tx = tx.clone();
                let (exe, x) = (&exe, &x);
                s.spawn(move || {
                    for i in 0..200 {
                        let mut outs = exe.execute(&[x]).expect("execute");
                        check(&outs);
                        if i % 3 == 0 {
                            outs.rotate_left(1); // drop order differs from output order
                        }
                        tx.send(outs).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        for w in workers {
            w.join().unwrap();
        }
        dropper.join().unwrap();
    });
    let outs = exe.execute(&[&x]).expect("execute");
    check(&outs);
}

/// A prepared call on several devices reuses its outputs' handles too: once warm, a call
/// allocates its two lists (outputs, events) and nothing per device or output.
#[test]
fn a_prepared_call_allocates_no_handle_per_device() {
    let plugin = common::plugin(common::Which::New);
    for devices in [2usize, 4] {
        let options = ClientOptions::new().set("cpu_device_count", devices as i64);
        let client = Client::new(&plugin, &options).expect("client");
        let opts = CompileOptions {
            num_replicas: devices as u32,
            ..Default::default()
        };
        let exe = common::compile_with(&client, &common::mul_add(), &opts);
        let data: Vec<f32> = (0..8).map(|i| i as f32).collect();
        let bufs: Vec<Buffer> = exe
            .addressable_devices()
            .expect("devices")
            .iter()
            .map(|d| client.buffer_from_slice(&data, &[8], d).expect("put"))
            .collect();
        let lists: Vec<Vec<&Buffer>> = bufs.iter().map(|b| vec![b, b]).collect();
        let call = exe.prepare(&lists, &[]).expect("prepare");
        for _ in 0..4 {
            call.call_and_wait().expect("warm-up");
        }
        for _ in 0..4 {
            let mut outs = None;
            let n = allocations(|| outs = Some(call.call().expect("call")));
            let outs = outs.expect("outputs");
            outs.block_until_ready().expect("wait");
            assert!(n <= 2, "{devices} devices: {n} allocations for one call");
            let want: Vec<f32> = data.iter().map(|v| v * v + 1.0).collect();
            for d in 0..devices {
                assert_eq!(outs.device(d)[0].to_vec_of::<f32>().expect("read"), want);
            }
        }
    }
}
