#!/usr/bin/env bash
# Runs every rpjrt benchmark and prints one table of figures and of the speed targets, each
# judged against references measured in the same run (median of several interleaved
# repetitions, with min and max). Writes bench/out/rust_execute.json (the Rust benchmark)
# and bench/out/results.json (everything).
#
#   bash scripts/bench.sh            full run (a few minutes); what bench/RESULTS.md records
#   bash scripts/bench.sh --smoke    few iterations, no thresholds, under 2 minutes (CI)
#   bash scripts/bench.sh --strict   full run that exits 1 when a target misses
#
# The Python benchmarks use the rpjrt extension installed in .venv; the full run rebuilds
# it first (maturin develop --release --features bench, incremental) unless RPJRT_BENCH_NO_BUILD=1, the
# smoke run builds it only when it is missing. OPENBLAS_NUM_THREADS defaults to 1: numpy's
# OpenBLAS threads otherwise spin on a 2-core machine and slow every Python figure (rpjrt's
# and JAX's alike) by up to 2x.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

smoke=0
py_args=()
for arg in "$@"; do
  case "$arg" in
    --smoke) smoke=1; py_args+=(--smoke) ;;
    --strict) py_args+=(--strict) ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "usage: bash scripts/bench.sh [--smoke] [--strict]" >&2; exit 2 ;;
  esac
done

[ -f .deps/plugins.env ] || bash scripts/setup.sh
set -a; . .deps/plugins.env; set +a
export PATH="$root/.venv/bin:$PATH"
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
PY="$root/.venv/bin/python"
out="$root/bench/out"
mkdir -p "$out"
# matplotlib draws the sweep plots (bench/out/*.png); a bench-only tool, never a dependency
# of the package. Without it the sweeps still print as tables.
if ! "$PY" -c "import matplotlib" 2>/dev/null; then
  "$PY" -m pip install --disable-pip-version-check -q "matplotlib>=3.7" \
    || echo "matplotlib could not be installed: the sweeps print as tables only" >&2
fi

echo "== Rust: execute vs the raw C floor"
if [ "$smoke" = 1 ]; then
  # The debug build that `cargo test` already made; no thresholds in smoke mode.
  cargo run --locked -q -p rpjrt --features bench --example bench_execute -- --smoke --json "$out/rust_execute.json"
else
  cargo run --locked -q --release -p rpjrt --features bench --example bench_execute -- --json "$out/rust_execute.json"
fi

echo "== Python extension"
if [ "$smoke" = 0 ] && [ "${RPJRT_BENCH_NO_BUILD:-0}" != 1 ]; then
  (cd python && maturin develop --release --locked -q --features bench)
elif ! "$PY" -c "import rpjrt._rpjrt" 2>/dev/null; then
  (cd python && maturin develop --release --locked -q --features bench)
fi
"$PY" -c "import rpjrt, rpjrt._rpjrt as m; print('rpjrt', rpjrt.__version__, 'from', m.__file__)"

echo "== Python benchmarks"
"$PY" bench/run.py "${py_args[@]}" --rust-json "$out/rust_execute.json" --out "$out/results.json"
