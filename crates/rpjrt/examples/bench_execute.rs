//! Measures rpjrt's execute path against the raw C floor on the tiny program
//! (`f32[8] a*b+1`, tests/fixtures/mul_add.mlir).
//!
//! Usage: `cargo run --release -p rpjrt --features bench --example bench_execute -- [--plugin PATH]
//! [--reps R] [--iters N] [--json PATH] [--smoke]`. The plugin defaults to `RPJRT_PLUGIN`,
//! then `RPJRT_TEST_PLUGIN_NEW`, then `.deps/plugins.env`.
//!
//! Each repetition runs every variant once, `iters` iterations each, in an order that
//! rotates between repetitions, so that the machine's noise hits all variants alike.
//! Figures are per-iteration times: the median, min and max over repetitions. Ratios are
//! taken per repetition (variant / floor of the same repetition), then summarised.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use rpjrt::__bench::{c_floor_execute, FloorWait};
use rpjrt::{
    Buffer, Client, ClientOptions, CompileOptions, Executable, ExecuteOptions, Plugin, Program,
};

const PROGRAM: &str = include_str!("../tests/fixtures/mul_add.mlir");

struct Args {
    plugin: Option<String>,
    reps: usize,
    iters: usize,
    json: Option<String>,
    only: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        plugin: None,
        reps: 31,
        iters: 4000,
        json: None,
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--plugin" => a.plugin = Some(value("--plugin")?),
            "--reps" => {
                a.reps = value("--reps")?
                    .parse()
                    .map_err(|e| format!("--reps: {e}"))?
            }
            "--iters" => {
                a.iters = value("--iters")?
                    .parse()
                    .map_err(|e| format!("--iters: {e}"))?
            }
            "--json" => a.json = Some(value("--json")?),
            // Runs one variant `iters` times and nothing else (for valgrind --tool=callgrind:
            // the difference of two runs with different `iters` is the cost per iteration).
            "--only" => a.only = Some(value("--only")?),
            "--smoke" => {
                a.reps = 3;
                a.iters = 200;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    a.reps = a.reps.max(1);
    a.iters = a.iters.max(1);
    Ok(a)
}

fn plugin_path(given: Option<String>) -> Option<String> {
    given
        .or_else(|| std::env::var("RPJRT_PLUGIN").ok())
        .or_else(|| std::env::var("RPJRT_TEST_PLUGIN_NEW").ok())
        .or_else(|| {
            let env = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.deps/plugins.env");
            let text = std::fs::read_to_string(env).ok()?;
            text.lines()
                .find_map(|l| l.strip_prefix("RPJRT_TEST_PLUGIN_NEW="))
                .map(str::to_string)
        })
}

type Runner<'a> = Box<dyn FnMut(usize) -> rpjrt::Result<Duration> + 'a>;

struct Variant<'a> {
    name: &'static str,
    what: &'static str,
    run: Runner<'a>,
    per_iter_ns: Vec<f64>,
}

fn timed(iters: usize, mut body: impl FnMut() -> rpjrt::Result<()>) -> rpjrt::Result<Duration> {
    let start = Instant::now();
    for _ in 0..iters {
        body()?;
    }
    Ok(start.elapsed())
}

fn variants<'a>(exe: &'a Executable, x: &'a Buffer, x2: &'a Buffer) -> Vec<Variant<'a>> {
    let mut host = vec![0u8; x.host_size()];
    let v = |name, what, run: Runner<'a>| Variant {
        name,
        what,
        run,
        per_iter_ns: Vec::new(),
    };
    vec![
        v(
            "floor_event",
            "raw C: Execute(completion event) + Event_Await + destroys",
            Box::new(move |n| c_floor_execute(exe, &[x, x], n, FloorWait::CompletionEvent)),
        ),
        v(
            "floor_ready",
            "raw C: Execute + Buffer_ReadyEvent + Event_Await + destroys",
            Box::new(move |n| c_floor_execute(exe, &[x, x], n, FloorWait::OutputReady)),
        ),
        v(
            "rust_execute",
            "Rust: exe.execute(&[&x, &x]) + out[0].block_until_ready() + drop",
            Box::new(move |n| {
                timed(n, || {
                    let out = exe.execute(&[x, x])?;
                    out[0].block_until_ready()
                })
            }),
        ),
        v(
            "rust_execute_into",
            "Rust: exe.execute_into(&[&x, &x], &mut outs) + outs[0].block_until_ready() (no allocation)",
            Box::new(move |n| {
                let mut outs = Vec::new();
                timed(n, || {
                    exe.execute_into(&[x, x], &mut outs)?;
                    outs[0].block_until_ready()
                })
            }),
        ),
        v(
            "floor_nowait",
            "raw C: Execute + destroys, no wait (the call half of floor_ready)",
            Box::new(move |n| c_floor_execute(exe, &[x, x], n, FloorWait::None)),
        ),
        v(
            "rust_execute_into_nowait",
            "Rust: exe.execute_into(&[&x, &x], &mut outs), no wait (the call half of rust_execute_into)",
            Box::new(move |n| {
                let mut outs = Vec::new();
                timed(n, || exe.execute_into(&[x, x], &mut outs))
            }),
        ),
        v(
            "rust_execute_with_event",
            "Rust: execute_with(completion_events) + events[0].wait() + drop",
            Box::new(move |n| {
                let opts = ExecuteOptions {
                    completion_events: true,
                    ..Default::default()
                };
                timed(n, || {
                    let run = exe.execute_with(&[vec![x, x]], &opts)?;
                    run.events[0].wait()
                })
            }),
        ),
        v(
            "rust_execute_2threads",
            "Rust: the rust_execute loop on 2 threads at once, each with its own input buffer (time per execution)",
            Box::new(move |n| {
                let start = Instant::now();
                let results: Vec<rpjrt::Result<()>> = std::thread::scope(|s| {
                    let workers: Vec<_> = [x, x2]
                        .into_iter()
                        .map(|x| {
                            s.spawn(move || -> rpjrt::Result<()> {
                                for _ in 0..n {
                                    let out = exe.execute(&[x, x])?;
                                    out[0].block_until_ready()?;
                                }
                                Ok(())
                            })
                        })
                        .collect();
                    workers
                        .into_iter()
                        .map(|w| w.join().expect("benchmark thread panicked"))
                        .collect()
                });
                results.into_iter().collect::<rpjrt::Result<()>>()?;
                // 2n executions: report the time per n, like the other variants.
                Ok(start.elapsed() / 2)
            }),
        ),
        v(
            "rust_execute_to_host",
            "Rust: exe.execute(&[&x, &x]) + out[0].to_host(&mut [u8; 32]) + drop",
            Box::new(move |n| {
                timed(n, || {
                    let out = exe.execute(&[x, x])?;
                    out[0].to_host(&mut host)
                })
            }),
        ),
    ]
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn stats(v: &[f64]) -> (f64, f64, f64) {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (median(v), min, max)
}

fn json_list(v: &[f64], digits: usize) -> String {
    let items: Vec<String> = v.iter().map(|x| format!("{x:.digits$}")).collect();
    format!("[{}]", items.join(", "))
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let path = plugin_path(args.plugin).ok_or("no plugin: pass --plugin or set RPJRT_PLUGIN")?;
    let plugin = Plugin::load(&path)?;
    let client = Client::new(&plugin, &ClientOptions::new())?;
    let device = client.default_device()?;
    let exe = client.compile(&Program::mlir(PROGRAM), &CompileOptions::default())?;
    let data: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let x = client.buffer_from_slice(&data, &[8], &device)?;
    let out = exe.execute(&[&x, &x])?;
    let got = out[0].to_vec_of::<f32>()?;
    let want: Vec<f32> = data.iter().map(|v| v * v + 1.0).collect();
    if got != want {
        return Err(format!("wrong result {got:?}, expected {want:?}").into());
    }
    drop(out);

    let x2 = client.buffer_from_slice(&data, &[8], &device)?;
    let mut vs = variants(&exe, &x, &x2);
    if let Some(only) = &args.only {
        let v = vs
            .iter_mut()
            .find(|v| v.name == only.as_str())
            .ok_or_else(|| format!("no variant {only:?}"))?;
        let t = (v.run)(args.iters)?;
        println!(
            "{only}: {:.0} ns per iteration",
            t.as_nanos() as f64 / args.iters as f64
        );
        return Ok(());
    }
    // Warm up every variant (first calls page in code, grow the plugin's pools).
    for v in vs.iter_mut() {
        (v.run)(args.iters.min(1000))?;
    }
    let n = vs.len();
    for rep in 0..args.reps {
        for k in 0..n {
            let v = &mut vs[(rep + k) % n];
            let t = (v.run)(args.iters)?;
            v.per_iter_ns.push(t.as_nanos() as f64 / args.iters as f64);
        }
    }

    println!(
        "rpjrt execute vs the raw C floor: {} (PJRT {}), f32[8] a*b+1, {} reps x {} iterations",
        plugin.path().display(),
        plugin.version(),
        args.reps,
        args.iters
    );
    println!(
        "{:<26} {:>10} {:>10} {:>10}  what",
        "variant", "median", "min", "max"
    );
    for v in &vs {
        let (m, lo, hi) = stats(&v.per_iter_ns);
        println!(
            "{:<26} {:>8.0}ns {:>8.0}ns {:>8.0}ns  {}",
            v.name, m, lo, hi, v.what
        );
    }
    let ratio_of = |a: &str, b: &str| -> Vec<f64> {
        let va = &vs
            .iter()
            .find(|v| v.name == a)
            .expect("variant")
            .per_iter_ns;
        let vb = &vs
            .iter()
            .find(|v| v.name == b)
            .expect("variant")
            .per_iter_ns;
        va.iter().zip(vb).map(|(x, y)| x / y).collect()
    };
    // The floor: the faster of the two C sequences in each repetition (the strictest).
    let floor: Vec<f64> = {
        let e = &vs
            .iter()
            .find(|v| v.name == "floor_event")
            .expect("variant")
            .per_iter_ns;
        let r = &vs
            .iter()
            .find(|v| v.name == "floor_ready")
            .expect("variant")
            .per_iter_ns;
        e.iter().zip(r).map(|(a, b)| a.min(*b)).collect()
    };
    let over_floor = |a: &str| -> Vec<f64> {
        let va = &vs
            .iter()
            .find(|v| v.name == a)
            .expect("variant")
            .per_iter_ns;
        va.iter().zip(&floor).map(|(x, y)| x / y).collect()
    };
    let ratios = [
        ("rust_execute/floor", over_floor("rust_execute")),
        ("rust_execute_into/floor", over_floor("rust_execute_into")),
        (
            "rust_execute/floor_event",
            ratio_of("rust_execute", "floor_event"),
        ),
        (
            "rust_execute/floor_ready",
            ratio_of("rust_execute", "floor_ready"),
        ),
        (
            "rust_execute_with_event/floor_event",
            ratio_of("rust_execute_with_event", "floor_event"),
        ),
        (
            "rust_execute_into/floor_ready",
            ratio_of("rust_execute_into", "floor_ready"),
        ),
        (
            "rust_execute_into_nowait/floor_nowait",
            ratio_of("rust_execute_into_nowait", "floor_nowait"),
        ),
        (
            "floor_ready/floor_event",
            ratio_of("floor_ready", "floor_event"),
        ),
        // Throughput of 2 threads over 1 (time per execution of 1 thread / of 2 threads).
        (
            "rust_2threads_speedup",
            ratio_of("rust_execute", "rust_execute_2threads"),
        ),
    ];
    println!(
        "{:<36} {:>7} {:>7} {:>7}",
        "ratio (per repetition)", "median", "min", "max"
    );
    for (name, r) in &ratios {
        let (m, lo, hi) = stats(r);
        println!("{name:<36} {m:>7.3} {lo:>7.3} {hi:>7.3}");
    }

    if let Some(out) = args.json {
        let mut j = String::new();
        let _ = writeln!(j, "{{");
        let _ = writeln!(
            j,
            "  \"plugin\": {},",
            json_str(&plugin.path().display().to_string())
        );
        let _ = writeln!(
            j,
            "  \"pjrt_version\": {},",
            json_str(&plugin.version().to_string())
        );
        let _ = writeln!(j, "  \"program\": \"f32[8] a*b+1 (mul_add.mlir)\",");
        let _ = writeln!(j, "  \"reps\": {},", args.reps);
        let _ = writeln!(j, "  \"iters\": {},", args.iters);
        let _ = writeln!(j, "  \"unit\": \"ns per iteration\",");
        let _ = writeln!(j, "  \"variants\": {{");
        for (i, v) in vs.iter().enumerate() {
            let (m, lo, hi) = stats(&v.per_iter_ns);
            let _ = writeln!(
                j,
                "    {}: {{\"what\": {}, \"median\": {m:.1}, \"min\": {lo:.1}, \"max\": {hi:.1}, \"samples\": {}}}{}",
                json_str(v.name),
                json_str(v.what),
                json_list(&v.per_iter_ns, 1),
                if i + 1 < vs.len() { "," } else { "" }
            );
        }
        let _ = writeln!(j, "  }},");
        let _ = writeln!(j, "  \"ratios\": {{");
        for (i, (name, r)) in ratios.iter().enumerate() {
            let (m, lo, hi) = stats(r);
            let _ = writeln!(
                j,
                "    {}: {{\"median\": {m:.4}, \"min\": {lo:.4}, \"max\": {hi:.4}, \"samples\": {}}}{}",
                json_str(name),
                json_list(r, 4),
                if i + 1 < ratios.len() { "," } else { "" }
            );
        }
        let _ = writeln!(j, "  }}");
        let _ = writeln!(j, "}}");
        if let Some(dir) = std::path::Path::new(&out).parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&out, j)?;
    }
    Ok(())
}
