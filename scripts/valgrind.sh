#!/usr/bin/env bash
# Runs the raw layer's tests against the fake plugin under valgrind memcheck: any invalid
# read or write, or any definite leak, fails the run.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
command -v valgrind >/dev/null || { echo "valgrind is not installed (scripts/setup.sh installs it)" >&2; exit 1; }
cargo build --locked -p rpjrt-fake-plugin
bin=$(cargo test --locked -p rpjrt --test fake_plugin --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "fake_plugin":
        print(m["executable"])')
[ -n "$bin" ] || { echo "could not find the fake_plugin test binary" >&2; exit 1; }
# One test thread keeps valgrind's output readable and its run deterministic.
valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
  --show-leak-kinds=definite --track-origins=yes --quiet \
  "$bin" --test-threads=1
echo "valgrind: fake-plugin tests clean"
