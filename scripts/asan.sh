#!/usr/bin/env bash
# Runs the Rust tests over the fake plugin under AddressSanitizer: the rpjrt crate's
# fake-plugin tests (with the fake plugin itself instrumented too) and the fake plugin's
# own tests. Any ASan report (invalid access, use after free, double free, leak) fails
# the run.
#
# Sanitizers are a nightly rustc feature; RUSTC_BOOTSTRAP=1 unlocks it on the stable
# toolchain the project pins. `--target` keeps RUSTFLAGS off build scripts and proc
# macros (which run on the host uninstrumented), and target/asan keeps these artefacts
# away from the normal build's.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
triple=$(rustc -vV | sed -n 's/^host: //p')
export RUSTC_BOOTSTRAP=1
# The test executables export their symbols, so that the instrumented fake plugin they
# dlopen finds the ASan runtime linked into them.
export RUSTFLAGS="-Zsanitizer=address -Cforce-frame-pointers=yes -Clink-arg=-Wl,--export-dynamic"
export RUSTDOCFLAGS="$RUSTFLAGS"
export CARGO_TARGET_DIR="$root/target/asan"
# Leaks count as failures; a report ends the process with a non-zero status. SIGSEGV is
# left to the default action (handle_segv=0): the fake plugin's crash knob must really
# crash its test child, and any other segfault still fails the run by killing the test.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=86:detect_stack_use_after_return=0:handle_segv=0"
# Suppressed: leaks a test makes on purpose (more_knobs' kv_get hands the plugin a
# Box::leak'ed value, since its KV callback protocol has no deleter there).
suppressions=$(mktemp)
trap 'rm -f "$suppressions"' EXIT
printf 'leak:more_knobs::kv_get\n' >"$suppressions"
export LSAN_OPTIONS="exitcode=86:suppressions=$suppressions:print_suppressions=0"
args=(--locked --target "$triple")

cargo build "${args[@]}" -p rpjrt-fake-plugin
export RPJRT_FAKE_PLUGIN="$CARGO_TARGET_DIR/$triple/debug/librpjrt_fake_plugin.so"
[ -f "$RPJRT_FAKE_PLUGIN" ] || { echo "asan: $RPJRT_FAKE_PLUGIN was not built" >&2; exit 1; }
# A run without instrumentation would pass vacuously: check that the plugin has it.
if ! nm -D --undefined-only "$RPJRT_FAKE_PLUGIN" | grep -q __asan_report; then
  echo "asan: $RPJRT_FAKE_PLUGIN is not instrumented" >&2
  exit 1
fi

echo "asan: rpjrt over the fake plugin"
cargo test "${args[@]}" -p rpjrt --test fake_plugin
echo "asan: the fake plugin's own tests"
cargo build "${args[@]}" -p rpjrt-fake-plugin --examples
cargo test "${args[@]}" -p rpjrt-fake-plugin --tests
echo "asan: clean"
