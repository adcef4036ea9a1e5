#!/usr/bin/env bash
# The Python tier: lint the PyO3 crate, build the extension and the wheel, and run pytest
# (both CPU plugins; stubtest and mypy run inside it, and so does the fresh-venv test of
# the manylinux wheel). Needs what scripts/setup.sh prepares (.venv with maturin, pytest, numpy,
# ml_dtypes, jax, mypy, and the two plugins in .deps/plugins.env).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$here"
export VIRTUAL_ENV="$root/.venv"
export PATH="$root/.venv/bin:$PATH"
set -a; . "$root/.deps/plugins.env"; set +a

echo "== python: format and lints"
cargo fmt -- --check
cargo clippy --all-targets --locked -- -D warnings

echo "== python: build"
maturin develop --release --locked
# The distributable wheel and sdist, as a release builds them: manylinux_2_28 (zig), checked
# by auditwheel inside scripts/wheel.sh; test_wheel_venv.py installs the wheel in a fresh venv.
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
bash "$root/scripts/wheel.sh" "$wheels"
RPJRT_TEST_WHEEL=$(ls "$wheels"/rpjrt-*.whl)
export RPJRT_TEST_WHEEL

echo "== python: the sdist builds on its own"
# pip unpacks it away from the repository and builds a wheel with the venv's maturin; the
# registry crates come from this folder's target/, so only rpjrt's own crates compile again.
CARGO_TARGET_DIR="$here/target" python -m pip wheel --no-deps --no-build-isolation --no-index \
  --disable-pip-version-check -q -w "$wheels/from-sdist" "$wheels"/rpjrt-*.tar.gz
ls "$wheels"/from-sdist/rpjrt-*.whl

echo "== python: tests"
python -m pytest -q
