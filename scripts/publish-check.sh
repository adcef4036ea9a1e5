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

# Cargo builds each package against a throw-away local registry under target/package and
# unpacks the workspace's crates from it into $CARGO_HOME/registry/src/<hash of that
# registry's path>/NAME-VERSION. It never unpacks a crate again once that folder exists, so
# on a machine that keeps $CARGO_HOME between runs (a CI cache) and checks out at the same
# path, a later run would build against the sources of an earlier commit and fail (or pass)
# for the wrong reason. Remove our crates' unpacked copies from every local registry's
# folder (those are named "-<hash>"; crates.io's folder is left alone) before and after.
cargo_home=${CARGO_HOME:-$HOME/.cargo}
mapfile -t ours < <(cargo metadata --no-deps --format-version 1 --locked |
    python3 -c 'import json, sys
for p in json.load(sys.stdin)["packages"]:
    print(p["name"] + "-" + p["version"])')
forget_unpacked() {
    local dir name
    for dir in "$cargo_home"/registry/src/-*/; do
        [ -d "$dir" ] || continue
        for name in "${ours[@]}"; do
            rm -rf -- "${dir:?}$name"
        done
    done
}
forget_unpacked
trap forget_unpacked EXIT
cargo publish --dry-run --workspace --locked "$@"
