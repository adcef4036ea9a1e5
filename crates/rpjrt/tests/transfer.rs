//! Transfers at scale on both CPU plugins: huge-page staged copies, streaming uploads through
//! the async transfer manager, partial raw reads, uninitialised and error buffers.

mod common;

use common::{expect_err, for_each_plugin, is_old};
use rpjrt::{ChunkSink, Code, CopyMode, ElementType, Error, HostArray, StreamOptions};

fn pattern(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i % 9973) as f32 * 0.5 - 7.0).collect()
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

#[test]
fn large_copies_are_staged_in_huge_page_memory_and_round_trip() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let n = (rpjrt::transfer::STAGING_THRESHOLD / 4) * 2 + 3;
        let src = bytes(&pattern(n));
        let dims = [n as i64];
        let a = HostArray::from_slice(&src, ElementType::F32, &dims);
        let b = c.put(&a, &d, None, CopyMode::Always).unwrap();
        assert_eq!(b.to_vec().unwrap(), src);
        // The plugin uses the staging mapping in place: it starts on a 2 MiB boundary.
        assert_eq!(b.unsafe_pointer().unwrap() % (2 << 20), 0);
        assert!(!b.borrows_host() || b.unsafe_pointer().unwrap() != src.as_ptr() as usize);
        // Small copies stay with the plugin.
        let small = bytes(&pattern(16));
        let a = HostArray::from_slice(&small, ElementType::F32, &[16]);
        let b = c.put(&a, &d, None, CopyMode::Always).unwrap();
        assert_eq!(b.to_vec().unwrap(), small);
    });
}

#[test]
fn streaming_uploads_fill_several_buffers_in_chunks_with_progress() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let n = 10_000usize;
        let src = bytes(&pattern(n));
        let mut fill = |off: usize, chunk: &mut [u8]| -> rpjrt::Result<()> {
            chunk.copy_from_slice(&src[off..off + chunk.len()]);
            Ok(())
        };
        let mut calls = Vec::new();
        let mut progress = |done: u64, total: u64| {
            calls.push((done, total));
            Ok(())
        };
        let b = c
            .put_streaming(
                ElementType::F32,
                &[100, 100],
                &d,
                None,
                &mut fill,
                StreamOptions {
                    chunk_size: 12_000,
                    progress: Some(&mut progress),
                    progress_threshold: 1,
                },
            )
            .unwrap();
        assert_eq!(b.dims(), &[100, 100]);
        assert_eq!(b.to_vec().unwrap(), src);
        assert_eq!(
            calls,
            vec![
                (12_000, 40_000),
                (24_000, 40_000),
                (36_000, 40_000),
                (40_000, 40_000)
            ]
        );

        // Below the threshold: no progress calls.
        let mut quiet = 0;
        let mut count = |_: u64, _: u64| {
            quiet += 1;
            Ok(())
        };
        c.put_streaming(
            ElementType::F32,
            &[n as i64],
            &d,
            None,
            &mut fill,
            StreamOptions {
                chunk_size: 4096,
                progress: Some(&mut count),
                progress_threshold: 1 << 30,
            },
        )
        .unwrap();
        assert_eq!(quiet, 0);

        // Several buffers, interleaved writes, checked order and completion.
        let mut up = c
            .begin_upload(
                &[(ElementType::S32, vec![3]), (ElementType::U8, vec![2, 2])],
                &d,
                None,
            )
            .unwrap();
        assert_eq!(
            (up.len(), up.size(0).unwrap(), up.size(1).unwrap()),
            (2, 12, 4)
        );
        let ints: Vec<u8> = [7i32, -8, 9].iter().flat_map(|x| x.to_ne_bytes()).collect();
        up.write(0, 0, &ints[..4], false).unwrap();
        up.write(1, 0, &[1, 2], false).unwrap();
        expect_err(up.write(0, 8, &ints[8..], true), &["in order", "4"]);
        expect_err(up.write(0, 4, &ints[4..], false), &["is_last"]);
        expect_err(up.finish(0), &["incomplete", "4 of 12"]);
        expect_err(up.write(2, 0, &[], true), &["out of range"]);
        up.write(0, 4, &ints[4..], true).unwrap();
        up.write(1, 2, &[3, 4], true).unwrap();
        expect_err(up.write(1, 4, &[], true), &["already completed"]);
        let b0 = up.finish(0).unwrap();
        let b1 = up.finish(1).unwrap();
        drop(up);
        assert_eq!(b0.to_vec_of::<i32>().unwrap(), vec![7, -8, 9]);
        assert_eq!(b1.to_vec().unwrap(), vec![1, 2, 3, 4]);
        expect_err(
            c.begin_upload(&[(ElementType::S4, vec![4])], &d, None),
            &["byte-sized", "int4"],
        );
        expect_err(c.begin_upload(&[], &d, None), &["at least one"]);
        // A failing source stops the upload with its error.
        let e = c
            .put_streaming(
                ElementType::F32,
                &[4],
                &d,
                None,
                &mut |_, _| Err(Error::InvalidArgument("source gave up".into())),
                StreamOptions::default(),
            )
            .unwrap_err();
        assert!(e.to_string().contains("source gave up"), "{e}");
    });
}

#[test]
fn lent_streaming_hands_chunks_over_in_place_and_checks_each_one() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let src = bytes(&pattern(1000));
        let mut seen = Vec::new();
        let b = c
            .put_streaming_lent(
                ElementType::F32,
                &[10, 100],
                &d,
                None,
                &mut |off, len, sink: &mut ChunkSink<'_>| {
                    seen.push((off, len, sink.offset(), sink.len()));
                    sink.write(&src[off..off + len])
                },
                StreamOptions {
                    chunk_size: 1500,
                    ..StreamOptions::default()
                },
            )
            .unwrap();
        assert_eq!(b.to_vec().unwrap(), src);
        assert_eq!(
            seen,
            vec![
                (0, 1500, 0, 1500),
                (1500, 1500, 1500, 1500),
                (3000, 1000, 3000, 1000)
            ]
        );

        // A zero-size array is one empty chunk.
        let z = c
            .put_streaming_lent(
                ElementType::F32,
                &[0, 3],
                &d,
                None,
                &mut |_, len, sink: &mut ChunkSink<'_>| {
                    assert!(sink.is_empty());
                    sink.write(&src[..len])
                },
                StreamOptions::default(),
            )
            .unwrap();
        assert_eq!(z.dims(), &[0, 3]);

        let run = |lend: &mut dyn FnMut(usize, usize, &mut ChunkSink<'_>) -> rpjrt::Result<()>,
                   chunk_size: usize| {
            c.put_streaming_lent(
                ElementType::F32,
                &[1000],
                &d,
                None,
                lend,
                StreamOptions {
                    chunk_size,
                    ..StreamOptions::default()
                },
            )
            .map(|_| ())
        };
        expect_err(
            run(
                &mut |off, len, sink| sink.write(&src[off..off + len - 4]),
                1000,
            ),
            &["lent 996 bytes", "bytes 0..1000", "exactly 1000"],
        );
        expect_err(
            run(
                &mut |off, _, _| if off == 0 { Ok(()) } else { unreachable!() },
                4000,
            ),
            &["without lending", "0..4000"],
        );
        expect_err(
            run(
                &mut |off, len, sink| {
                    sink.write(&src[off..off + len])?;
                    sink.write(&src[off..off + len])
                },
                4000,
            ),
            &["already lent", "0..4000"],
        );
        expect_err(run(&mut |_, _, _| Ok(()), 0), &["chunk size", "at least 1"]);
        // A progress callback's error stops the transfer after the chunk it was told about.
        let mut chunks = 0;
        let mut stop = |done: u64, _: u64| {
            if done >= 2000 {
                Err(Error::InvalidArgument("stopped by the user".into()))
            } else {
                Ok(())
            }
        };
        let e = c
            .put_streaming_lent(
                ElementType::F32,
                &[1000],
                &d,
                None,
                &mut |off, len, sink: &mut ChunkSink<'_>| {
                    chunks += 1;
                    sink.write(&src[off..off + len])
                },
                StreamOptions {
                    chunk_size: 1000,
                    progress: Some(&mut stop),
                    progress_threshold: 0,
                },
            )
            .unwrap_err();
        assert!(e.to_string().contains("stopped by the user"), "{e}");
        assert_eq!(chunks, 2);
    });
}

#[test]
fn raw_reads_take_an_offset_and_size() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let v = pattern(64);
        let b = c.buffer_from_slice(&v, &[8, 8], &d).unwrap();
        let mut dst = vec![0u8; 40];
        b.copy_raw_to_host(12, &mut dst).unwrap();
        assert_eq!(dst, bytes(&v)[12..52]);
        b.copy_raw_to_host(256, &mut []).unwrap();
        expect_err(b.copy_raw_to_host(250, &mut [0u8; 8]), &["past", "256"]);
        b.delete().unwrap();
        expect_err(b.copy_raw_to_host(0, &mut [0u8; 4]), &["deleted"]);
    });
}

#[test]
fn uninitialised_and_error_buffers() {
    for_each_plugin(|p, c| {
        let d = c.default_device().unwrap();
        let u = c
            .create_uninitialized_buffer(ElementType::F64, &[3, 5], &d, None)
            .unwrap();
        assert_eq!(
            (u.element_type(), u.dims()),
            (ElementType::F64, &[3i64, 5][..])
        );
        assert_eq!(u.on_device_size().unwrap(), 120);
        expect_err(
            c.create_uninitialized_buffer(ElementType::Token, &[], &d, None),
            &["token"],
        );
        let r = c.create_error_buffer(Code::Internal, "boom", ElementType::F32, &[4], &d, None);
        if is_old(p) {
            let e = r.unwrap_err();
            assert!(matches!(e, Error::Unsupported { .. }), "{e}");
            assert!(
                e.to_string().contains("PJRT_Client_CreateErrorBuffer"),
                "{e}"
            );
        } else {
            let b = r.unwrap();
            let e = b.block_until_ready().unwrap_err();
            assert_eq!(e.code(), Code::Internal);
            assert!(e.to_string().contains("boom"), "{e}");
            assert!(b.to_vec().is_err());
        }
    });
}

#[test]
fn alias_buffers_are_fulfilled_later() {
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        // Both CPU plugins have alias buffers (the 0.115 one needs an explicit layout).
        let (alias, promise) = c
            .create_alias_buffer(ElementType::F32, &[4], &d, None)
            .unwrap();
        let target = c
            .buffer_from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4], &d)
            .unwrap();
        promise.fulfill(&target).unwrap();
        assert_eq!(alias.to_vec_of::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
        // The plugin moved the target into the alias: it reads as deleted, not as the
        // plugin's "deleted or donated" INVALID_ARGUMENT.
        assert!(target.is_deleted());
        assert!(matches!(target.to_vec().unwrap_err(), Error::Deleted(_)));
        // A target pinned by a host view cannot move.
        let (_, promise) = c
            .create_alias_buffer(ElementType::F32, &[4], &d, None)
            .unwrap();
        let pinned = c
            .buffer_from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4], &d)
            .unwrap();
        let view = pinned.host_view().unwrap();
        let e = promise.fulfill(&pinned).unwrap_err();
        assert!(e.to_string().contains("host view"), "{e}");
        drop(view);
        assert!(!pinned.is_deleted());
        let (failed, promise) = c
            .create_alias_buffer(ElementType::F32, &[4], &d, None)
            .unwrap();
        promise.fail(Code::DataLoss, "gone").unwrap();
        let e = failed.block_until_ready().unwrap_err();
        assert!(e.to_string().contains("gone"), "{e}");
        let (dropped, promise) = c
            .create_alias_buffer(ElementType::F32, &[4], &d, None)
            .unwrap();
        drop(promise);
        let e = dropped.block_until_ready().unwrap_err();
        assert!(e.to_string().contains("dropped unfulfilled"), "{e}");
        // A target of another shape, type or device is refused before the plugin sees it.
        let (pending, promise) = c
            .create_alias_buffer(ElementType::F32, &[2, 2], &d, None)
            .unwrap();
        assert!(format!("{promise:?}").contains("pending: true"));
        let wrong = c.buffer_from_slice(&[1i32, 2, 3, 4], &[2, 2], &d).unwrap();
        let e = promise.fulfill(&wrong).unwrap_err();
        assert!(e.to_string().contains("float32[2, 2]"), "{e}");
        assert!(e.to_string().contains("int32[2, 2]"), "{e}");
        let e = pending.block_until_ready().unwrap_err();
        assert!(e.to_string().contains("dropped unfulfilled"), "{e}");
        let (_, promise) = c
            .create_alias_buffer(ElementType::F32, &[4], &d, None)
            .unwrap();
        let elsewhere = c.devices().unwrap()[1].clone();
        let other = c
            .buffer_from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4], &elsewhere)
            .unwrap();
        let e = promise.fulfill(&other).unwrap_err();
        assert!(e.to_string().contains("target buffer is on"), "{e}");
        // An alias deleted before it was fulfilled: the target would be consumed for
        // nothing, so it is refused and the target stays usable.
        let (gone, promise) = c
            .create_alias_buffer(ElementType::F32, &[4], &d, None)
            .unwrap();
        gone.delete().unwrap();
        let keep = c
            .buffer_from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4], &d)
            .unwrap();
        let e = promise.fulfill(&keep).unwrap_err();
        assert!(matches!(e, Error::Deleted(_)), "{e}");
        assert!(e.to_string().contains("alias buffer was deleted"), "{e}");
        assert_eq!(keep.to_vec_of::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    });
}

#[test]
fn an_alias_never_waits_for_itself_or_for_another_pending_alias() {
    // Fulfilling an alias with itself, or two aliases with each other, was accepted and
    // every execution queued on them never ended.
    for_each_plugin(|_, c| {
        let d = c.default_device().unwrap();
        let (a, fa) = c
            .create_alias_buffer(ElementType::F32, &[4], &d, None)
            .unwrap();
        let (b, fb) = c
            .create_alias_buffer(ElementType::F32, &[4], &d, None)
            .unwrap();
        let e = fa.check(&a).unwrap_err();
        assert!(e.to_string().contains("with itself"), "{e}");
        let e = fa.fulfill(&b).unwrap_err();
        assert!(e.to_string().contains("not fulfilled yet"), "{e}");
        // fa was consumed by the refusal: `a` is cancelled, `b` still pending.
        assert!(a.block_until_ready().is_err());
        let t = c.buffer_from_slice(&[1f32, 2., 3., 4.], &[4], &d).unwrap();
        fb.fulfill(&t).unwrap();
        assert_eq!(b.to_vec_of::<f32>().unwrap(), [1., 2., 3., 4.]);
    });
}

#[test]
fn a_fulfiller_dropped_after_close_still_cancels_its_alias() {
    // After Client::close the drop skipped the cancel: a thread already waiting on the
    // alias waited for ever, although the docs promise CANCELLED.
    for_each_plugin(|plugin, _| {
        let c = rpjrt::Client::new(plugin, &rpjrt::ClientOptions::new()).unwrap();
        let d = c.default_device().unwrap();
        let (alias, promise) = c
            .create_alias_buffer(ElementType::F32, &[4], &d, None)
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || tx.send(alias.block_until_ready().is_err()));
        std::thread::sleep(std::time::Duration::from_millis(50));
        c.close().unwrap();
        drop(promise);
        let failed = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(failed, Ok(true), "the waiting thread is still waiting");
        waiter.join().unwrap().unwrap();
    });
}
