//! The staging pool behind large `put` copies, on both CPU plugins: data, reuse of a block
//! after its buffer is gone (the plugin uses it in place), a block never lent twice while a
//! buffer or a running program still reads it, threads, the bound and release on demand.
//!
//! The pool is one per process, so the tests of this file take turns (`serial`).

mod common;

use std::sync::{Mutex, MutexGuard};

use common::{compile, for_each_plugin};
use rpjrt::{staging, Client, CopyMode, ElementType, HostArray};

const MIB: usize = 1 << 20;

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// `n` f32 values that differ with `seed`.
fn values(n: usize, seed: u32) -> Vec<u8> {
    (0..n)
        .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32)
        .flat_map(|x| x.to_ne_bytes())
        .collect()
}

fn put(c: &Client, bytes: &[u8]) -> rpjrt::Buffer {
    let d = c.default_device().unwrap();
    let dims = [(bytes.len() / 4) as i64];
    let a = HostArray::from_slice(bytes, ElementType::F32, &dims);
    c.put(&a, &d, None, CopyMode::Always).unwrap()
}

#[test]
fn repeated_puts_reuse_one_warm_block() {
    let _g = serial();
    staging::set_limit(staging::DEFAULT_LIMIT);
    for_each_plugin(|_, c| {
        staging::release_pooled_memory();
        let n = 8 * MIB / 4;
        let first = values(n, 1);
        let b = put(c, &first);
        assert_eq!(b.to_vec().unwrap(), first);
        let addr = b.unsafe_pointer().unwrap();
        assert_eq!(addr % (2 << 20), 0, "the plugin uses the block in place");
        let s = staging::stats();
        assert_eq!((s.in_use_blocks, s.in_use_bytes), (1, 8 * MIB));
        drop(b);
        let s0 = staging::stats();
        assert_eq!((s0.in_use_blocks, s0.pooled_blocks), (0, 1));
        for k in 2..6 {
            let data = values(n, k);
            let b = put(c, &data);
            assert_eq!(
                b.unsafe_pointer().unwrap(),
                addr,
                "put {k} reuses the block"
            );
            assert_eq!(b.to_vec().unwrap(), data);
        }
        let s = staging::stats();
        assert_eq!(s.hits - s0.hits, 4);
        assert_eq!(s.misses, s0.misses);
    });
}

#[test]
fn a_block_is_not_lent_again_while_a_buffer_uses_it() {
    let _g = serial();
    staging::set_limit(staging::DEFAULT_LIMIT);
    for_each_plugin(|_, c| {
        let n = 6 * MIB / 4;
        let a_data = values(n, 7);
        let a = put(c, &a_data);
        // A clone keeps the buffer (and so its block) alive after the first handle goes.
        let a2 = a.clone();
        drop(a);
        let bufs: Vec<_> = (0..3).map(|k| (values(n, 100 + k), k)).collect();
        let others: Vec<_> = bufs.iter().map(|(d, _)| put(c, d)).collect();
        for (b, (d, _)) in others.iter().zip(&bufs) {
            assert_ne!(b.unsafe_pointer().unwrap(), a2.unsafe_pointer().unwrap());
            assert_eq!(&b.to_vec().unwrap(), d);
        }
        assert_eq!(a2.to_vec().unwrap(), a_data, "untouched by the later puts");
    });
}

#[test]
fn a_running_program_keeps_its_input_block() {
    let _g = serial();
    staging::set_limit(staging::DEFAULT_LIMIT);
    for_each_plugin(|_, c| {
        let n = 2 * MIB; // 8 MiB of f32
        let prog = format!(
            "func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{\n\
             %0 = stablehlo.multiply %x, %x : tensor<{n}xf32>\n\
             %1 = stablehlo.sine %0 : tensor<{n}xf32>\n\
             %2 = stablehlo.add %1, %x : tensor<{n}xf32>\n\
             return %2 : tensor<{n}xf32>\n}}\n"
        );
        let exe = compile(c, &prog);
        let x_data = values(n, 3);
        let expect: Vec<u8> = x_data
            .chunks_exact(4)
            .map(|b| f32::from_ne_bytes(b.try_into().unwrap()))
            .flat_map(|x| ((x * x).sin() + x).to_ne_bytes())
            .collect();
        for round in 0..2 {
            let x = put(c, &x_data);
            let out = exe.execute(&[&x]).unwrap();
            // Dropped while the program may still run: the block must stay with it.
            drop(x);
            // Would land in the same block if it had come back early.
            let junk = put(c, &values(n, 1000 + round));
            let got = out[0].to_vec().unwrap();
            let bad = got
                .chunks_exact(4)
                .zip(expect.chunks_exact(4))
                .filter(|(g, e)| {
                    let (g, e) = (
                        f32::from_ne_bytes((*g).try_into().unwrap()),
                        f32::from_ne_bytes((*e).try_into().unwrap()),
                    );
                    (g - e).abs() > 1e-3 * e.abs().max(1.0)
                })
                .count();
            assert_eq!(bad, 0, "round {round}: {bad} wrong elements");
            drop(junk);
        }
    });
}

#[test]
fn threads_put_concurrently_through_the_pool() {
    let _g = serial();
    staging::set_limit(staging::DEFAULT_LIMIT);
    for_each_plugin(|_, c| {
        let n = 5 * MIB / 4;
        std::thread::scope(|s| {
            for t in 0..3u32 {
                s.spawn(move || {
                    for i in 0..6u32 {
                        let data = values(n, t * 100 + i);
                        let b = put(c, &data);
                        assert_eq!(b.to_vec().unwrap(), data, "thread {t} put {i}");
                    }
                });
            }
        });
        let s = staging::stats();
        assert_eq!(s.in_use_blocks, 0, "{s:?}");
        assert!(s.pooled_blocks <= 3, "{s:?}");
    });
}

#[test]
fn the_bound_holds_and_release_gives_memory_back() {
    let _g = serial();
    for_each_plugin(|_, c| {
        staging::release_pooled_memory();
        staging::set_limit(20 * MIB);
        let bufs: Vec<_> = (0..4).map(|k| put(c, &values(8 * MIB / 4, k))).collect();
        assert_eq!(staging::stats().in_use_bytes, 32 * MIB);
        drop(bufs);
        let s = staging::stats();
        assert!(s.pooled_bytes <= 20 * MIB, "{s:?}");
        assert_eq!(s.pooled_blocks, 2);
        let before = s.released_bytes;
        assert_eq!(staging::release_pooled_memory(), 16 * MIB);
        let s = staging::stats();
        assert_eq!((s.pooled_blocks, s.pooled_bytes), (0, 0));
        assert_eq!(s.released_bytes - before, 16 * MIB as u64);
        // Pooling off: every put maps its own block and gives it back at once.
        staging::set_limit(0);
        let m0 = staging::stats().misses;
        for k in 0..3 {
            let d = values(8 * MIB / 4, 50 + k);
            assert_eq!(put(c, &d).to_vec().unwrap(), d);
        }
        let s = staging::stats();
        assert_eq!((s.misses - m0, s.pooled_blocks), (3, 0));
        staging::set_limit(staging::DEFAULT_LIMIT);
    });
}

#[test]
fn large_copies_round_trip() {
    let _g = serial();
    staging::set_limit(staging::DEFAULT_LIMIT);
    for_each_plugin(|_, c| {
        // A length that is no multiple of a page, both ways.
        let n = 19 * MIB / 4 + 1001;
        let data = values(n, 77);
        let b = put(c, &data);
        let mut back = vec![0u8; data.len()];
        b.to_host(&mut back).unwrap();
        assert!(back == data, "the round trip changed the data");
    });
}
