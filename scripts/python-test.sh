#!/usr/bin/env bash
# Builds the rpjrt wheel, installs it into .venv, runs the Python tests on both CPU plugins
# and checks the typed stubs against the built module.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
[ -f .deps/plugins.env ] || bash scripts/setup.sh
set -a; . .deps/plugins.env; set +a
VPY="$root/.venv/bin/python"

rm -rf target/wheels
(cd python && "$VPY" -m maturin build --release --locked -o "$root/target/wheels")
wheel=$(ls target/wheels/rpjrt-*.whl | head -n 1)
"$VPY" -m pip install --disable-pip-version-check -q --force-reinstall --no-deps "$wheel"
export RPJRT_TEST_WHEEL="$root/$wheel"

# Run from outside the source tree so the installed wheel is what gets imported.
(cd python/tests && "$VPY" -m pytest -q -p no:cacheprovider .)

# The stubs must describe the built module exactly, and type-check.
"$VPY" -m mypy.stubtest rpjrt --allowlist python/stubtest-allowlist.txt
"$VPY" -m mypy --strict python/examples
