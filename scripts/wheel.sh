#!/usr/bin/env bash
# Builds the Python package for distribution into dist/ (or the folder given as $1):
#   - an abi3 wheel (CPython 3.10+) tagged manylinux_2_28, so it installs on glibc 2.28+
#     (Debian 10+, Ubuntu 18.10+, RHEL 8+), wherever jaxlib's manylinux wheels install.
#     maturin links it with zig against glibc 2.28's symbols (zig from PyPI: `ziglang`,
#     installed by scripts/setup.sh); the C++ exception guard is still built by GCC and
#     linked to the system libstdc++, the C++ runtime PJRT plugins use (crates/rpjrt-raw/build.rs);
#   - an sdist (`pip install rpjrt-*.tar.gz` builds it with a Rust toolchain).
# Then `auditwheel show` must find the wheel consistent with manylinux_2_28 (that checks the
# glibc and libstdc++ symbol versions it needs), else this fails.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$(mkdir -p "${1:-$root/dist}" && cd "${1:-$root/dist}" && pwd)
export PATH="$root/.venv/bin:$PATH"
policy=manylinux_2_28

python -m ziglang version >/dev/null 2>&1 ||
  { echo "wheel.sh: zig is missing: pip install ziglang (scripts/setup.sh installs it)" >&2; exit 1; }
command -v auditwheel >/dev/null ||
  { echo "wheel.sh: auditwheel is missing: pip install auditwheel" >&2; exit 1; }

cd "$root/python"
rm -f "$out"/rpjrt-*.whl "$out"/rpjrt-*.tar.gz
maturin build --release --locked --zig --compatibility "$policy" --out "$out"
maturin sdist --out "$out"

wheel=$(ls "$out"/rpjrt-*.whl)
report=$(auditwheel show "$wheel")
echo "$report"
tag=$(printf '%s\n' "$report" | tr -d '\n' | grep -o 'consistent with *the following platform tag: *"[^"]*"' | grep -o '"[^"]*"' | tr -d '"')
# manylinux_2_28 or older (a smaller glibc version) is fine.
if ! [[ "$tag" =~ ^manylinux_2_([0-9]+)_ ]] || [ "${BASH_REMATCH[1]}" -gt 28 ]; then
  echo "wheel.sh: auditwheel says the wheel is ${tag:-of no manylinux tag}, not $policy or older" >&2
  exit 1
fi
echo "wheel.sh: $(basename "$wheel") ($tag) and $(basename "$(ls "$out"/rpjrt-*.tar.gz)") in $out"
