#!/usr/bin/env bash
# Runs the raw layer's tests against the fake plugin under valgrind memcheck: any invalid
# read or write, or any definite leak, fails the run.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
command -v valgrind >/dev/null || { echo "valgrind is not installed (scripts/setup.sh installs it)" >&2; exit 1; }
cargo build --locked -p rpjrt-fake-plugin
# fake_plugin: the raw layer's negotiation and error paths; ffi_fake: FFI registration
# (entry stubs, metadata calls, error objects) against the scripted fake.
for test in fake_plugin ffi_fake; do
  bin=$(cargo test --locked -p rpjrt --test "$test" --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$test")
  [ -n "$bin" ] || { echo "could not find the $test test binary" >&2; exit 1; }
  # One test thread keeps valgrind's output readable and its run deterministic.
  valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
    --show-leak-kinds=definite --track-origins=yes --quiet \
    "$bin" --test-threads=1
done
echo "valgrind: fake-plugin tests clean"
