#!/usr/bin/env bash
# Runs every test tier of rpjrt on a fresh machine: set-up, lint, Rust tests on both CPU
# plugins and the fake plugin, valgrind and AddressSanitizer over the fake-plugin tests, and the
# Python package (lints, wheel, pytest on both plugins, stubtest and mypy), the documentation
# site (scripts/docs.sh: fails on a broken internal link), then a smoke run of the benchmarks.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

step() { printf '\n==== %s ====\n' "$*"; }

step "set-up"
bash scripts/setup.sh
set -a; . .deps/plugins.env; set +a
export PATH="$root/.venv/bin:$PATH"

step "format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# API docs: a broken intra-doc link or any other rustdoc warning is an error.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --locked
# unsafe code is confined by crates and lints, not by a grep: rpjrt is `#![forbid(unsafe_code)]`
# over its unsafe layer, the crate rpjrt-raw; the CLI is `#![forbid(unsafe_code)]`, and every
# unsafe block (raw, fake plugin, the CPython boundary in python/src) needs a SAFETY comment
# (clippy's undocumented_unsafe_blocks, denied workspace-wide and in python/).
# The safe layer's size (issue 20: well under 20k lines without tests; 15.9k at the split).
python3 scripts/core-size.py crates/rpjrt/src --max 17500

step "Rust tests (both CPU plugins and the fake plugin)"
# The test harness builds the fake plugin itself when it is missing.
cargo test --workspace --locked

step "valgrind: raw layer against the fake plugin"
bash scripts/valgrind.sh

step "AddressSanitizer: rpjrt and the fake plugin's tests (target/asan)"
bash scripts/asan.sh

step "publishable crates (cargo publish --dry-run, in dependency order)"
bash scripts/publish-check.sh

step "Python package (both CPU plugins)"
bash python/ci.sh

step "documentation site (guide, Python and Rust API references, internal links)"
bash scripts/docs.sh

step "benchmark smoke run (no thresholds; bench/RESULTS.md has a full run)"
bash scripts/bench.sh --smoke

echo
echo "all tiers passed"
