#!/usr/bin/env bash
# Checks that every publishable crate of the workspace would publish: `cargo publish
# --dry-run --workspace` packages each crate (crates with `publish = false`, the fake plugin,
# are left out), in dependency order, and builds each package on its own from its .crate
# file, with the workspace's not-yet-published crates resolved from those packages and
# everything else from crates.io. So it catches a file a crate needs from outside its
# package, a dependency without a version, and missing metadata. Nothing is uploaded.
# Needs network access to crates.io (the index); extra arguments go to cargo (e.g.
# --allow-dirty for a work tree with uncommitted changes).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cargo publish --dry-run --workspace --locked "$@"
