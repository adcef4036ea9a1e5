#!/usr/bin/env bash
# The GPU tier: rpjrt on a real NVIDIA GPU through the CUDA PJRT plugin. CI does not run
# it. Without a GPU it FAILS (exit 1), it does not skip.
#
#   bash scripts/test-gpu.sh build   # where Rust is: builds the abi3 wheel into bench/out/gpu-wheel/
#   bash scripts/test-gpu.sh run     # on the GPU machine: installs that wheel and runs the tier
#   bash scripts/test-gpu.sh         # both, on a GPU machine that also has Rust
#
# `run` needs Python >= 3.10 with numpy, jax + a JAX CUDA plugin wheel (jax-cuda12-pjrt or
# jax-cuda13-pjrt), torch and CuPy installed; it needs no network and no Rust. It installs
# the wheel into a throwaway venv that sees the system site-packages, runs
# python/tests_gpu/test_gpu.py and writes bench/out/RESULTS-GPU.md (also $OUT/RESULTS-GPU.md
# when OUT is set), ready to be copied into bench/RESULTS-GPU.md.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
wheel_dir="$root/bench/out/gpu-wheel"
what=${1:-all}

build() {
  local maturin=${MATURIN:-}
  if [ -z "$maturin" ]; then
    if [ -x "$root/.venv/bin/maturin" ]; then maturin="$root/.venv/bin/maturin"; else maturin=maturin; fi
  fi
  rm -rf "$wheel_dir"
  mkdir -p "$wheel_dir"
  (cd python && "$maturin" build --release --compatibility linux -o "$wheel_dir")
  ls -l "$wheel_dir"
}

run() {
  if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "test-gpu: no NVIDIA GPU here (nvidia-smi -L lists none): the GPU tier needs one." >&2
    echo "test-gpu: FAILED (a missing GPU is a failure of this tier, not a skip)" >&2
    exit 1
  fi
  local wheel
  wheel=$(ls "$wheel_dir"/rpjrt-*.whl 2>/dev/null | head -n1 || true)
  if [ -z "$wheel" ]; then
    echo "test-gpu: no wheel in $wheel_dir: run 'bash scripts/test-gpu.sh build' where Rust is" >&2
    exit 1
  fi
  local py=${PYTHON:-python3}
  local venv=${TMPDIR:-/tmp}/rpjrt-gpu-venv
  rm -rf "$venv"
  "$py" -m venv --system-site-packages "$venv"
  "$venv/bin/python" -m pip install -q --no-deps --no-index --force-reinstall "$wheel"

  mkdir -p bench/out
  local results="$root/bench/out/RESULTS-GPU.md"
  {
    echo "# GPU tier results"
    echo
    echo "Written by \`bash scripts/test-gpu.sh run\` on $(date -u '+%Y-%m-%d %H:%M UTC')."
    echo
    echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n1)"
    echo "- Python $("$venv/bin/python" -c 'import sys; print(sys.version.split()[0])'); $("$venv/bin/python" - <<'PY'
from importlib import metadata
names = ["jax", "jaxlib", "jax-cuda13-pjrt", "jax-cuda12-pjrt", "torch", "cupy-cuda12x", "cupy-cuda13x", "triton"]
parts = []
for n in names:
    try:
        parts.append(f"{n} {metadata.version(n)}")
    except metadata.PackageNotFoundError:
        pass
print(", ".join(parts))
PY
)"
    echo "- rpjrt wheel: $(basename "$wheel")"
    echo
    echo "| check | result |"
    echo "|---|---|"
  } > "$results"

  local rc=0
  # JAX shares the GPU with rpjrt in the test process: no preallocation, a modest share.
  # Command buffers (CUDA graphs) are off so a Python FFI handler runs at execute time.
  env XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_MEM_FRACTION=0.3 \
    XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_enable_command_buffer=" \
    RPJRT_GPU_RESULTS="$results" \
    timeout "${RPJRT_GPU_TIMEOUT:-540}" "$venv/bin/python" python/tests_gpu/test_gpu.py || rc=$?
  echo >> "$results"
  if [ "$rc" -eq 0 ]; then echo "All checks passed." >> "$results"; else echo "Exit status $rc: some checks failed (see above)." >> "$results"; fi
  if [ -n "${OUT:-}" ]; then cp "$results" "$OUT/RESULTS-GPU.md"; fi
  cat "$results"
  return "$rc"
}

case "$what" in
  build) build ;;
  run) run ;;
  all) build && run ;;
  *) echo "usage: $0 [build|run|all]" >&2; exit 2 ;;
esac
