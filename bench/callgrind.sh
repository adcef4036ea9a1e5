#!/usr/bin/env bash
# Where the time of the tiny execute goes, in instructions (valgrind --tool=callgrind; perf
# is not available on the benchmark machine). Each loop runs twice with different
# iteration counts; the difference per iteration is split by shared object. Takes ~10
# minutes on a quiet machine (an hour under heavy load). Builds the release example for the
# Rust variants; the Python ones use the installed extension (maturin develop --release).
#
#   bash bench/callgrind.sh [VARIANT ...]   default: every Rust and Python variant
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
set -a; . .deps/plugins.env; set +a
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
PY="$root/.venv/bin/python"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin="$root/target/release/examples/bench_execute"

rust_variants="floor_event floor_ready rust_execute rust_execute_into rust_execute_to_host"
py_variants="bur wait numpy asarray jax_bur jax_numpy session session_direct jax_session"
wanted="${*:-$rust_variants $py_variants}"
for v in $wanted; do
  if [[ " $rust_variants " == *" $v "* ]]; then
    cargo build --locked -q --release -p rpjrt --features bench --example bench_execute
    break
  fi
done
# The session loops read the JAX-lowered step from bench/out/mlp_step.mlir: write it
# outside valgrind.
if [[ " $wanted " == *" session"* || " $wanted " == *" jax_session "* ]]; then
  "$PY" bench/_cg_py_loop.py session 0
fi

cg() { valgrind --tool=callgrind --callgrind-out-file="$1" "${@:2}" >/dev/null 2>&1; }
for v in $wanted; do
  if [[ " $rust_variants " == *" $v "* ]]; then
    echo "== Rust $v"
    cg "$tmp/a.out" "$bin" --only "$v" --iters 1000
    cg "$tmp/b.out" "$bin" --only "$v" --iters 2000
    "$PY" bench/_cg_group.py "$tmp/a.out" "$tmp/b.out" 1000
  else
    echo "== Python $v"
    cg "$tmp/a.out" "$PY" bench/_cg_py_loop.py "$v" 1000
    cg "$tmp/b.out" "$PY" bench/_cg_py_loop.py "$v" 3000
    "$PY" bench/_cg_group.py "$tmp/a.out" "$tmp/b.out" 2000
  fi
done
