#!/usr/bin/env bash
# The real-store tier (opt-in; CI runs only its Redis part, inside the Python tests): the
# store adapters of rpjrt.distributed against real servers that the tests start on
# 127.0.0.1 with free ports and stop afterwards.
#   - RedisStore against Debian's redis-server (redis Python client from PyPI),
#   - TorchStore against a real torch.distributed.TCPStore,
#   - JaxStore against JAX's coordination service (jax from scripts/setup.sh).
# Each runs set/get/try_get, a blocking get, a timeout, a 32 MiB value, four processes in
# barriers, an absent process, and rpjrt Client(kv=adapter) on the fake plugin (which calls
# the KV callbacks), alone and as two processes.
#
# torch: the PyPI wheel for Linux cannot even be imported without its nvidia-* CUDA
# libraries (about 3 GB; libtorch_cpu.so itself links libcudart), so this tier uses
# Debian's CPU build, python3-torch (about 650 MB installed), from /usr/lib/python3/
# dist-packages, appended to the venv's search path (the venv's own packages win). Set
# RPJRT_TEST_TORCH_PATH to use another torch (empty: the venv's own `import torch`).
# Nothing here is skipped: a server or module that cannot be found fails the tier.
#
#   bash scripts/test-stores.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

bash scripts/setup.sh
set -a; . .deps/plugins.env; set +a
export PATH="$root/.venv/bin:$PATH"

if ! dpkg -s python3-torch >/dev/null 2>&1 && [ -z "${RPJRT_TEST_TORCH_PATH+x}" ]; then
  echo "stores: installing Debian's python3-torch (CPU build)"
  (apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-torch) >/dev/null
fi
export RPJRT_TEST_TORCH_PATH=${RPJRT_TEST_TORCH_PATH-/usr/lib/python3/dist-packages}
export RPJRT_TEST_STORES_TORCH=1

cargo build -q --locked -p rpjrt-fake-plugin
(cd python && VIRTUAL_ENV="$root/.venv" maturin develop --release --locked -q)
cd python
python -m pytest -q tests/test_store_servers.py \
  "tests/test_distributed.py::test_jax_adapter_with_the_real_jax_coordination_service" \
  "tests/test_distributed.py::test_adapters_behave_like_stores"
