#!/usr/bin/env bash
# Prepares a fresh machine for building and testing rpjrt.
#
# Creates a project-local virtual environment in .venv with the build and test tools,
# installs the two CPU PJRT plugins used by the tests (xla-cpu-pjrt at PJRT 0.81 and
# lammps-jax-pjrt-cpu at PJRT 0.115) and writes their paths to .deps/plugins.env, which the
# Rust and Python test suites read. Safe to run again: finished steps are skipped quickly.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
VPY="$root/.venv/bin/python"
pip_install() { "$VPY" -m pip install --disable-pip-version-check -q "$@"; }

if ! command -v valgrind >/dev/null; then
  echo "setup: installing valgrind"
  (apt-get update -qq && apt-get install -y -qq valgrind) >/dev/null
fi

# redis-server for the Redis store adapter's tests (python/tests/test_store_servers.py
# starts its own on 127.0.0.1).
if ! command -v redis-server >/dev/null; then
  echo "setup: installing redis-server"
  (apt-get update -qq && apt-get install -y -qq --no-install-recommends redis-server) >/dev/null
fi

# Chromium for the tests that load generated HTML pages in a real headless browser.
if ! command -v chromium >/dev/null; then
  echo "setup: installing chromium"
  (apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium) >/dev/null
fi

echo "setup: build and test tools"
pip_install "maturin>=1.5,<2" "pytest>=8" "numpy>=1.26" "ml_dtypes>=0.4" "jax[cpu]>=0.4.30" "mypy>=1.10" "hypothesis>=6.100" "redis>=5"
# Release wheels (scripts/wheel.sh): zig links them against an old glibc; auditwheel checks the tag.
pip_install "ziglang>=0.13" "auditwheel>=6"

echo "setup: CPU PJRT plugins"
pip_install "xla-cpu-pjrt==0.0.1"
pip_install --no-deps "lammps-jax-pjrt-cpu==0.11.2"

# The CUDA PJRT plugin (about 135 MB). Without its nvidia-* dependencies and without a GPU it
# still loads and reports its version, extensions and attributes; client creation then fails
# cleanly, which the no-GPU tests check. It goes into its own directory, not the venv's
# site-packages: there, discovery would rank it (an accelerator) before the CPU plugins and
# `rpjrt info` with no plugin named would pick it and fail on machines without a GPU. The
# tests put .deps/cuda-plugin on the search path themselves.
cuda_dir="$root/.deps/cuda-plugin"
cuda="$cuda_dir/jax_plugins/xla_cuda13/xla_cuda_plugin.so"
if [ ! -f "$cuda" ]; then
  echo "setup: CUDA PJRT plugin into .deps/cuda-plugin (no GPU needed to load it)"
  mkdir -p "$cuda_dir"
  pip_install --no-deps --target "$cuda_dir" "jax-cuda13-pjrt==0.12.0.1"
fi

site=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
old="$site/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"
new="$site/lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so"
for f in "$old" "$new" "$cuda"; do
  [ -f "$f" ] || { echo "setup: expected plugin file missing: $f" >&2; exit 1; }
done
mkdir -p .deps
cat > .deps/plugins.env <<ENV
RPJRT_TEST_PLUGIN_OLD=$old
RPJRT_TEST_PLUGIN_NEW=$new
RPJRT_TEST_PLUGIN_CUDA=$cuda
ENV
echo "setup: plugins recorded in .deps/plugins.env"
