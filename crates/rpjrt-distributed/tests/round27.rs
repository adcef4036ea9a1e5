//! Round 27 of the outside probe: barrier use counters from the store (a far-off oldest
//! generation, a count at `u64::MAX`, a damaged value), and half of a launcher's pair.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rpjrt::Code;
use rpjrt_distributed::{InMemoryStore, KvStore, LaunchEnv, Rendezvous, TcpStore};

const COUNTER: &str = "rpjrt:barrier-uses:b:0";

fn stores() -> Vec<(&'static str, Box<dyn Rendezvous>)> {
    vec![
        ("memory", Box::new(InMemoryStore::new())),
        ("tcp", Box::new(TcpStore::host("127.0.0.1:0", "t").unwrap())),
    ]
}

/// One pass of barrier "b" (1 process) that must take well under its 1 s timeout's
/// bound (3 s allows a loaded machine).
fn quick_barrier(s: &dyn Rendezvous, kind: &str) {
    let t = Instant::now();
    s.barrier("b", 0, 1, Duration::from_secs(1)).unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "{kind}: {:?}",
        t.elapsed()
    );
}

/// A counter whose oldest generation is far behind (another program, or damage, wrote
/// it) does not make the passed barrier delete keys for hours: its clean-up is bounded,
/// and what is left is kept in the counter for later uses.
#[test]
fn a_far_off_oldest_generation_is_cleaned_up_in_bounded_steps() {
    for (kind, s) in stores() {
        s.set(COUNTER, b"100000000000 0").unwrap();
        quick_barrier(&*s, kind);
        let left = String::from_utf8(s.try_get(COUNTER).unwrap().unwrap()).unwrap();
        let (used, from) = left.split_once(' ').expect("a range is left");
        assert_eq!(used, "100000000001", "{kind}");
        let from: u64 = from.parse().unwrap();
        assert!(from > 0 && from <= 64, "{kind}: {left}");
        // The next use goes on from there, and is as quick.
        quick_barrier(&*s, kind);
    }
}

/// A real backlog is removed: the arrivals of older generations are deleted.
#[test]
fn a_small_backlog_is_removed_entirely() {
    let s = InMemoryStore::new();
    for g in 0..5 {
        s.set(&format!("rpjrt:barrier:b:{g}:0"), b"1").unwrap();
    }
    s.set(COUNTER, b"5 0").unwrap();
    s.barrier("b", 0, 1, Duration::from_secs(1)).unwrap();
    assert_eq!(s.try_get(COUNTER).unwrap().as_deref(), Some(&b"6"[..]));
    for g in 0..5 {
        assert_eq!(s.try_get(&format!("rpjrt:barrier:b:{g}:0")).unwrap(), None);
    }
    assert!(s.try_get("rpjrt:barrier:b:5:0").unwrap().is_some());
}

/// A count at `u64::MAX` is refused on the first use (never wrapped to 0), saying it is
/// at its limit; the store is left as it was.
#[test]
fn a_count_at_the_limit_is_refused_not_wrapped() {
    for (kind, s) in stores() {
        let max = u64::MAX.to_string();
        s.set(COUNTER, max.as_bytes()).unwrap();
        let e = s.barrier("b", 0, 1, Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.code(), Code::DataLoss, "{kind}: {e}");
        let m = e.to_string();
        assert!(
            m.contains("largest count") && m.contains(&max),
            "{kind}: {m}"
        );
        assert!(!m.contains("not a number"), "{kind}: {m}");
        assert_eq!(s.try_get(COUNTER).unwrap().as_deref(), Some(max.as_bytes()));
    }
}

/// Each kind of damaged counter gets its own words.
#[test]
fn damaged_counters_say_what_is_wrong() {
    let s = InMemoryStore::new();
    for (value, says) in [
        (&b"abc"[..], "which is not a count"),
        (b"", "which is not a count"),
        (b"5 x", "which is not a count"),
        (
            b"5 6",
            "oldest stored generation 6 is above its count of uses 5",
        ),
        (b"99999999999999999999", "count is beyond the largest count"),
        (
            b"5 99999999999999999999",
            "oldest generation is beyond the largest count",
        ),
        (b"1 2 3", "which is not a count"),
        (b"+5", "which is not a count"),
        (b"\xff\xfe", "which is not a count"),
    ] {
        s.set(COUNTER, value).unwrap();
        let e = s.barrier("b", 0, 1, Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.code(), Code::DataLoss, "{value:?}: {e}");
        assert!(e.to_string().contains(says), "{value:?}: {e}");
    }
    // A count just below the limit is used, and the next use is refused.
    let below = (u64::MAX - 1).to_string();
    s.set(COUNTER, below.as_bytes()).unwrap();
    s.barrier("b", 0, 1, Duration::from_secs(1)).unwrap();
    let e = s.barrier("b", 0, 1, Duration::from_secs(1)).unwrap_err();
    assert!(e.to_string().contains("largest count"), "{e}");
}

fn detect(vars: &[(&str, &str)]) -> rpjrt::Result<LaunchEnv> {
    let m: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    LaunchEnv::detect_from(|k| m.get(k).cloned())
}

/// Half of rpjrt's own pair is refused, naming both variables, whatever other launcher's
/// variables are present; a rank without its count is refused for every launcher.
#[test]
fn half_a_launcher_pair_is_refused() {
    let torch = [
        ("RANK", "0"),
        ("WORLD_SIZE", "2"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "29500"),
    ];
    let slurm = [
        ("SLURM_PROCID", "0"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_JOB_NODELIST", "n1"),
    ];
    for (half, set, missing) in [
        (
            ("RPJRT_PROCESS_ID", "1"),
            "RPJRT_PROCESS_ID",
            "RPJRT_NUM_PROCESSES",
        ),
        (
            ("RPJRT_NUM_PROCESSES", "4"),
            "RPJRT_NUM_PROCESSES",
            "RPJRT_PROCESS_ID",
        ),
    ] {
        for others in [&torch[..], &slurm[..], &[]] {
            let mut vars = others.to_vec();
            vars.push(half);
            let e = detect(&vars).unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{vars:?}: {e}");
            let m = e.to_string();
            assert!(
                m.contains(&format!("{set} is set but {missing} is not")),
                "{vars:?}: {m}"
            );
        }
    }
    for (rank, size) in [
        ("RANK", "WORLD_SIZE"),
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        ("PMI_RANK", "PMI_SIZE"),
    ] {
        let e = detect(&[(rank, "0"), ("SLURM_PROCID", "1"), ("SLURM_NTASKS", "2")]).unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("{rank} is set but {size} is not")),
            "{e}"
        );
    }
    // Whole pairs still work, and a count alone of another launcher is passed over (an
    // allocation's shell sets SLURM_NTASKS without SLURM_PROCID).
    let env = detect(&[("RPJRT_PROCESS_ID", "1"), ("RPJRT_NUM_PROCESSES", "2")]).unwrap();
    assert_eq!((env.process_id, env.num_processes), (1, 2));
    let env = detect(&[
        ("WORLD_SIZE", "8"),
        ("RPJRT_PROCESS_ID", "0"),
        ("RPJRT_NUM_PROCESSES", "1"),
    ])
    .unwrap();
    assert_eq!(env.num_processes, 1);
}
