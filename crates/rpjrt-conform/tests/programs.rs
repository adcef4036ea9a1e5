//! The programs the checks compile (`programs/`, inside this package so that it builds once
//! published) are byte-for-byte the rpjrt test fixtures they were copied from. Regenerating
//! the fixtures (`crates/rpjrt/tests/fixtures/make_binary_fixtures.py`) means copying them
//! here again; this test says which file fell behind.

use std::path::Path;

#[test]
fn programs_match_the_rpjrt_fixtures() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fixtures = here.join("../rpjrt/tests/fixtures");
    let mut compared = 0;
    for entry in std::fs::read_dir(here.join("programs")).expect("programs/ is readable") {
        let path = entry.expect("programs/ entry").path();
        let name = path.file_name().expect("a file name").to_owned();
        let ours = std::fs::read(&path).expect("program is readable");
        let original = fixtures.join(&name);
        let theirs = std::fs::read(&original)
            .unwrap_or_else(|e| panic!("{}: {e} (the fixture it copies)", original.display()));
        assert!(
            ours == theirs,
            "{} differs from {}: copy the fixture again",
            path.display(),
            original.display()
        );
        compared += 1;
    }
    assert_eq!(compared, 4, "programs/ should hold the four mul_add forms");
}
