#!/usr/bin/env bash
# Runs every test tier of rpjrt on a fresh machine: set-up, lint, Rust tests on both CPU
# plugins and the fake plugin, valgrind and AddressSanitizer over the fake-plugin tests, and the
# Python package (lints, wheel, pytest on both plugins, stubtest and mypy), then a smoke
# run of the benchmarks.
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
# unsafe code lives only in crates/rpjrt/src/raw and the fake plugin (rpjrt-sys declares
# C function-pointer types, which name `unsafe extern "C" fn` but contain no code). The
# Python extension (python/src) is the CPython boundary: PyO3 gives no buffer protocol or
# DLPack capsules under abi3-py310, so it has audited unsafe blocks of its own, each with a
# SAFETY comment that clippy's undocumented_unsafe_blocks lint (deny) enforces there.
if git grep -nE '\bunsafe\b' -- 'crates/*.rs' \
    | grep -v '^crates/rpjrt/src/raw/' | grep -v '^crates/rpjrt-fake-plugin/' \
    | grep -vE '^[^:]+:[0-9]+:\s*//' | grep -vE 'unsafe_code|unsafe_op_in_unsafe_fn|undocumented_unsafe_blocks' \
    | grep -vE 'unsafe extern "C" fn'; then
  echo "unsafe code outside crates/rpjrt/src/raw and the fake plugin" >&2
  exit 1
fi

step "Rust tests (both CPU plugins and the fake plugin)"
cargo build --locked -p rpjrt-fake-plugin
cargo test --workspace --locked

step "valgrind: raw layer against the fake plugin"
bash scripts/valgrind.sh

step "AddressSanitizer: rpjrt and the fake plugin's tests (target/asan)"
bash scripts/asan.sh

step "Python package (both CPU plugins)"
bash python/ci.sh

step "benchmark smoke run (no thresholds; bench/RESULTS.md has a full run)"
bash scripts/bench.sh --smoke

echo
echo "all tiers passed"
