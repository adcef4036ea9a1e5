//! Regressions from attack round 23 (saved state): a slot name too long for a checkpoint's
//! zip member is refused naming its length and the limit, with the start of the name only
//! (the zip library's own words, with the whole 65 KB name, were the message), and nothing
//! is written; a name at the limit saves and restores.

use rpjrt::Session;
use rpjrt_npy::checkpoint;

/// The core's test helpers: plugins, fixtures, compiling, error checks.
#[path = "../../rpjrt/tests/common/mod.rs"]
mod common;

use common::{f32_slot, for_each_plugin};

#[test]
fn a_slot_name_too_long_for_a_checkpoint_is_refused_plainly() {
    for_each_plugin(|plugin, client| {
        let dir = std::env::temp_dir().join(format!(
            "rpjrt-r23-names-{}-{}",
            plugin.version().minor,
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ck.npz");
        let longest = "n".repeat(checkpoint::MAX_SLOT_NAME_BYTES);
        let s = Session::new(client).unwrap();
        s.bind(&longest, f32_slot(&[1.0, 2.0])).unwrap();
        checkpoint::save(&s, &path).unwrap();
        let back = Session::new(client).unwrap();
        checkpoint::restore(&back, &path).unwrap();
        let got = back.fetch(&longest).unwrap().to_vec_of::<f32>().unwrap();
        assert_eq!(got, vec![1.0, 2.0]);
        std::fs::remove_file(&path).unwrap();

        let too_long = "x".repeat(checkpoint::MAX_SLOT_NAME_BYTES + 1);
        let s = Session::new(client).unwrap();
        s.bind(&too_long, f32_slot(&[1.0])).unwrap();
        let e = checkpoint::save(&s, &path).unwrap_err().to_string();
        assert!(e.contains(&format!("is {} bytes", too_long.len())), "{e}");
        assert!(e.contains("at most 65000"), "{e}");
        assert!(
            e.len() < 400,
            "the message repeats the name: {} bytes",
            e.len()
        );
        assert!(!path.exists(), "nothing is written");
        std::fs::remove_dir_all(&dir).unwrap();
    });
}
