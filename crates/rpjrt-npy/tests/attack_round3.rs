//! Third-round attacks on session checkpoints.

use std::sync::Arc;

use rpjrt::{ElementType, HostArray, Session, SlotValue};
use rpjrt_npy::checkpoint;

#[path = "../../rpjrt/tests/common/mod.rs"]
mod common;

use common::for_each_plugin;

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("rpjrt-atk3-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn bind_f32(s: &Session, name: &str, v: f32) {
    let bytes = v.to_ne_bytes().to_vec();
    s.bind(
        name,
        SlotValue::Host(HostArray::from_owner(
            Arc::new(bytes),
            ElementType::F32,
            vec![1],
        )),
    )
    .unwrap();
}

fn value(s: &Session, name: &str) -> f32 {
    s.fetch(name).unwrap().to_vec_of::<f32>().unwrap()[0]
}

/// Saving to a path that is a symbolic link writes the file the link leads to. It used to
/// rename the new file over the link itself: the save succeeded, the link became a plain
/// file, and the file it had pointed at (where the user keeps checkpoints) kept the old one.
#[test]
fn saving_through_a_symlink_writes_its_target() {
    for_each_plugin(|plugin, client| {
        let dir = temp_dir(&format!("link{}", plugin.version().minor));
        std::fs::create_dir_all(dir.join("store")).unwrap();
        let real = dir.join("store").join("ckpt.npz");
        let s = Session::new(client).unwrap();
        bind_f32(&s, "w", 1.0);
        checkpoint::save(&s, &real).unwrap();
        // A relative link, and a link to that link.
        let link = dir.join("latest.npz");
        std::os::unix::fs::symlink("store/ckpt.npz", &link).unwrap();
        let link2 = dir.join("current.npz");
        std::os::unix::fs::symlink(&link, &link2).unwrap();
        for (k, path) in [&link, &link2].into_iter().enumerate() {
            bind_f32(&s, "w", 2.0 + k as f32);
            checkpoint::save(&s, path).unwrap();
            for l in [&link, &link2] {
                let m = std::fs::symlink_metadata(l).unwrap();
                assert!(m.file_type().is_symlink(), "{} was replaced", l.display());
            }
            let back = Session::new(client).unwrap();
            checkpoint::restore(&back, &real).unwrap();
            assert_eq!(value(&back, "w"), 2.0 + k as f32);
        }
        // A dangling link: the file is created where it points.
        let dangling = dir.join("next.npz");
        std::os::unix::fs::symlink("store/new.npz", &dangling).unwrap();
        checkpoint::save(&s, &dangling).unwrap();
        assert!(std::fs::symlink_metadata(&dangling)
            .unwrap()
            .file_type()
            .is_symlink());
        let back = Session::new(client).unwrap();
        checkpoint::restore(&back, dir.join("store").join("new.npz")).unwrap();
        assert_eq!(value(&back, "w"), 3.0);
        // No temporary file is left behind in either directory.
        for d in [dir.clone(), dir.join("store")] {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                assert!(!n.ends_with(".tmp"), "{n} left in {}", d.display());
            }
        }
        // A link to a device is still refused, and a loop of links is an error.
        let full = dir.join("full.npz");
        std::os::unix::fs::symlink("/dev/full", &full).unwrap();
        common::expect_err(checkpoint::save(&s, &full), &["character device"]);
        let (a, b) = (dir.join("a.npz"), dir.join("b.npz"));
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        assert!(checkpoint::save(&s, &a).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    });
}
