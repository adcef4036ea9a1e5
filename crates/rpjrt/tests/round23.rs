//! Round 23 (outside checks): `Client::close` ends asynchronous waits (done callbacks and
//! `.await` of an event) as it ends blocking ones; deleting a pending alias buffer fails it,
//! so that waits begun before the delete end; an error the program chose (a failed alias,
//! an error buffer) is not reported as an allocation failure; file-system failures are
//! classed by their cause; and a compile-cache directory that is a symbolic link loop is
//! named as one.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::{plugin_path, Which};
use rpjrt::{Cache, Client, ClientOptions, Code, ElementType, Error};

fn client(which: Which) -> Client {
    let plugin = rpjrt::Plugin::load(plugin_path(which)).unwrap();
    Client::new(&plugin, &ClientOptions::new()).unwrap()
}

/// A pending alias of `c`, its fulfiller, its ready event, and what a done callback of that
/// event receives.
fn watched_alias(
    c: &Client,
) -> (
    rpjrt::Buffer,
    rpjrt::AliasFulfiller,
    rpjrt::Event,
    mpsc::Receiver<rpjrt::Result<()>>,
) {
    let d = c.default_device().unwrap();
    let (alias, fulfiller) = c
        .create_alias_buffer(ElementType::F32, &[4], &d, None)
        .unwrap();
    let ev = alias.ready_event().unwrap();
    let (tx, rx) = mpsc::channel();
    ev.add_done_callback(move |r| tx.send(r).unwrap());
    (alias, fulfiller, ev, rx)
}

/// A done callback of a pending alias's ready event runs when the client closes, with the
/// client's `Closed` error (the fulfiller is kept, so nothing else would complete it).
#[test]
fn close_completes_the_done_callbacks_of_pending_events() {
    for which in Which::BOTH {
        let c = client(which);
        let (_alias, fulfiller, ev, rx) = watched_alias(&c);
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        c.close().unwrap();
        let got = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{which:?}: close() must complete the callback"));
        assert!(matches!(got, Err(Error::Closed(_))), "{which:?}: {got:?}");
        // A timed wait (which uses the same completion) ends with it too.
        assert!(matches!(
            ev.wait_timeout(Duration::from_secs(10)),
            Err(Error::Closed(_))
        ));
        drop(fulfiller);
    }
}

/// `.await` of a pending event ends when the client closes (polled here by hand: the
/// waker is woken by `close`).
#[test]
fn close_wakes_an_awaited_event() {
    use std::future::Future;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};

    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let c = client(Which::New);
    let d = c.default_device().unwrap();
    let (alias, _fulfiller) = c
        .create_alias_buffer(ElementType::F32, &[4], &d, None)
        .unwrap();
    let mut ev = Box::pin(alias.ready_event().unwrap());
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(Arc::clone(&flag));
    let mut cx = Context::from_waker(&waker);
    assert!(ev.as_mut().poll(&mut cx).is_pending());
    c.close().unwrap();
    assert!(
        flag.0.load(Ordering::SeqCst),
        "close() must wake the awaiting task"
    );
    assert!(matches!(
        ev.as_mut().poll(&mut cx),
        Poll::Ready(Err(Error::Closed(_)))
    ));
}

/// Deleting a pending alias fails it: a wait begun before the delete ends (with
/// `CANCELLED`), and the fulfiller refuses to consume a target for it.
#[test]
fn deleting_a_pending_alias_fails_it() {
    for which in Which::BOTH {
        let c = client(which);
        let (alias, fulfiller, _ev, rx) = watched_alias(&c);
        alias.delete().unwrap();
        let got = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{which:?}: deleting the alias must fail it"));
        let e = got.unwrap_err();
        assert_eq!(e.code(), Code::Cancelled, "{which:?}: {e}");
        assert!(
            e.to_string().contains("deleted before it was fulfilled"),
            "{e}"
        );
        let target = c
            .buffer_from_slice(&[1.0f32; 4], &[4], &c.default_device().unwrap())
            .unwrap();
        assert!(matches!(fulfiller.fulfill(&target), Err(Error::Deleted(_))));
        assert_eq!(target.to_vec_of::<f32>().unwrap(), vec![1.0; 4]);
    }
}

/// An alias the program failed with `RESOURCE_EXHAUSTED`, and an error buffer, report their
/// own words, not an allocation failure with the allocator's figures: the buffers are
/// marked as the program's when made (round 23 first remembered the words, which a short
/// message matched in any later error).
#[test]
fn a_chosen_resource_exhausted_error_is_not_out_of_memory() {
    let c = client(Which::New);
    let d = c.default_device().unwrap();
    let (alias, fulfiller) = c
        .create_alias_buffer(ElementType::F32, &[4], &d, None)
        .unwrap();
    fulfiller
        .fail(Code::ResourceExhausted, "the r23 queue is full")
        .unwrap();
    let e = alias.block_until_ready().unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted);
    assert!(e.oom_report().is_none(), "{e}");
    assert!(e.to_string().ends_with("the r23 queue is full"), "{e}");
    let made = c
        .create_error_buffer(
            Code::ResourceExhausted,
            "the r23 quota ran out",
            ElementType::F32,
            &[4],
            &d,
            None,
        )
        .unwrap();
    let e = made.block_until_ready().unwrap_err();
    assert!(e.oom_report().is_none(), "{e}");
    // The mark is the buffer's, not the words': another client's error buffer with the
    // same words changes nothing for a buffer whose producer really failed (the words are
    // not remembered anywhere).
    assert!(e.to_string().ends_with("the r23 quota ran out"), "{e}");
}

/// A full disk, a permission or a device error is classed by its cause; a bad path stays
/// an invalid argument.
#[test]
fn file_system_failures_are_classed_by_cause() {
    let io = |errno| std::io::Error::from_raw_os_error(errno);
    let code = |errno| Error::io("writing /x", &io(errno)).code();
    assert_eq!(code(libc_errno::ENOSPC), Code::ResourceExhausted);
    assert_eq!(code(libc_errno::EMFILE), Code::ResourceExhausted);
    assert_eq!(code(libc_errno::EACCES), Code::PermissionDenied);
    assert_eq!(code(libc_errno::EROFS), Code::PermissionDenied);
    assert_eq!(code(libc_errno::EIO), Code::DataLoss);
    assert_eq!(code(libc_errno::ELOOP), Code::InvalidArgument);
    let e = Error::io("writing /x", &io(libc_errno::ENOSPC));
    assert!(e.to_string().starts_with("writing /x: "), "{e}");
}

/// The errno values used above (Linux).
mod libc_errno {
    pub const EIO: i32 = 5;
    pub const EACCES: i32 = 13;
    pub const EROFS: i32 = 30;
    pub const ENOSPC: i32 = 28;
    pub const ELOOP: i32 = 40;
    pub const EMFILE: i32 = 24;
}

/// An alias donated to an execution (what JAX's donation of a pending input does) can
/// still be fulfilled: the execution waits for its contents. The fulfiller refused it as
/// a deleted alias, and the execution waited until the fulfiller was dropped.
#[test]
fn a_pending_alias_donated_to_an_execution_can_be_fulfilled() {
    use rpjrt::{CompileOptions, ExecuteOptions, Program};
    for which in Which::BOTH {
        let c = client(which);
        let d = c.default_device().unwrap();
        let exe = c
            .compile(
                &Program::mlir(
                    "func.func public @main(%a: tensor<4xf32> {tf.aliasing_output = 0 : i32}) \
                     -> tensor<4xf32> {\n  %0 = stablehlo.add %a, %a : tensor<4xf32>\n  \
                     return %0 : tensor<4xf32>\n}",
                ),
                &CompileOptions::default(),
            )
            .unwrap();
        let (alias, fulfiller) = c
            .create_alias_buffer(ElementType::F32, &[4], &d, None)
            .unwrap();
        let donate = ExecuteOptions {
            donate: vec![0],
            ..Default::default()
        };
        let out = exe.execute_with(&[vec![&alias]], &donate).unwrap();
        let target = c
            .buffer_from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4], &d)
            .unwrap();
        fulfiller
            .fulfill(&target)
            .unwrap_or_else(|e| panic!("{which:?}: a donated pending alias refused: {e}"));
        let got = out.outputs[0][0].to_vec_of::<f32>().unwrap();
        assert_eq!(got, vec![2.0, 4.0, 6.0, 8.0], "{which:?}");
    }
}

/// A cache directory that is a symbolic link loop is named as one (it read "File exists").
#[test]
fn a_cache_directory_that_is_a_link_loop_is_named_so() {
    let dir = std::env::temp_dir().join(format!("rpjrt-r23-loop-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let lp = dir.join("loop");
    std::os::unix::fs::symlink(&lp, &lp).unwrap();
    let e = Cache::new(&lp, None).unwrap_err().to_string();
    assert!(e.contains("symbolic links"), "{e}");
    assert!(!e.contains("File exists"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
