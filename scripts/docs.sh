#!/usr/bin/env bash
# Builds the documentation site into site/ (one folder, readable from the disk or any static
# web server) and fails on a broken internal link:
#   - the guide: docs/*.md rendered by mkdocs (nav in mkdocs.yml), with --strict so that a
#     Markdown link to a missing page or heading fails the build;
#   - the Python API reference: mkdocstrings reads the package's docstrings and the typed
#     stub python/rpjrt/_rpjrt.pyi (no build of the extension needed);
#   - the Rust API reference: `cargo doc` of every library of the workspace, copied to
#     site/api/rust/, with rustdoc's broken and private intra-doc link lints denied;
#   - then scripts/check_links.py follows every link of the site's pages (including those
#     into the Rust reference) and fails on one that points at nothing.
# Needs python3 (3.10+) and cargo; the tools (scripts/docs-requirements.txt) go into .venv,
# which is created when missing. Works from a clean clone.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "docs: creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
echo "docs: tools (scripts/docs-requirements.txt)"
.venv/bin/python -m pip install --disable-pip-version-check -q -r scripts/docs-requirements.txt

echo "docs: Rust API reference (cargo doc)"
RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D rustdoc::broken_intra_doc_links -D rustdoc::private_intra_doc_links" \
  cargo doc --no-deps --workspace --lib --locked

echo "docs: guide and Python API reference (mkdocs build --strict)"
rm -rf site
# Not --quiet: it silences the warnings that --strict turns into a failure.
.venv/bin/python -m mkdocs build --strict --site-dir site
# rustdoc writes to the target directory, which CARGO_TARGET_DIR or a cargo config may move.
target_dir=$(cargo metadata --format-version 1 --no-deps --locked |
  .venv/bin/python -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
mkdir -p site/api/rust
cp -R "$target_dir/doc/." site/api/rust/

echo "docs: internal links"
.venv/bin/python scripts/check_links.py --self-test
.venv/bin/python scripts/check_links.py site api/rust
echo "docs: built $root/site (open site/index.html)"
