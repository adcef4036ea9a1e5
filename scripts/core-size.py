#!/usr/bin/env python3
"""Measures a Rust source tree without its tests: the size issue 20 bounds for the core.

    python3 scripts/core-size.py crates/rpjrt/src [--max LINES]

Counts the lines of every `.rs` file under the folder after dropping each item marked
`#[cfg(test)]` (a `mod tests { ... }` block, or a one-line item ending in `;`) and every
file such a one-line `mod NAME;` brings in (its tests live there), and prints
two figures: all remaining lines, and those that are neither blank nor a `//` comment.
With `--max`, exits 1 when the first figure is above LINES, so a check can hold the line.
"""

import argparse
import pathlib
import re
import sys


def without_test_items(lines):
    """The lines of one file with every `#[cfg(test)]` item left out."""
    kept = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != "#[cfg(test)]":
            kept.append(lines[i])
            i += 1
            continue
        # Skip the attribute and the item it marks: up to the brace that closes the item's
        # first block, or up to the `;` of an item without a block.
        j = i + 1
        depth = 0
        opened = False
        while j < len(lines):
            depth += lines[j].count("{") - lines[j].count("}")
            opened = opened or "{" in lines[j]
            if opened and depth <= 0:
                break
            if not opened and lines[j].rstrip().endswith(";"):
                break
            j += 1
        i = j + 1
    return kept


def test_module_files(path, lines):
    """The files of the `#[cfg(test)] mod NAME;` declarations in `path`'s lines."""
    # A module's children sit beside `mod.rs` / `lib.rs`, or in a folder named after it.
    base = path.parent if path.name in ("mod.rs", "lib.rs", "main.rs") else path.with_suffix("")
    found = set()
    for attr, item in zip(lines, lines[1:]):
        m = re.fullmatch(r"(?:pub(?:\([^)]*\))? )?mod (\w+);", item.strip())
        if attr.strip() == "#[cfg(test)]" and m:
            found |= {base / f"{m.group(1)}.rs", base / m.group(1) / "mod.rs"}
    return found


def measure(root):
    """(lines without tests, of which code) over the `.rs` files under `root`."""
    total = code = 0
    paths = sorted(pathlib.Path(root).rglob("*.rs"))
    tests = set()
    for path in paths:
        tests |= test_module_files(path, path.read_text(encoding="utf-8").split("\n"))
    for path in paths:
        if path in tests:
            continue
        kept = without_test_items(path.read_text(encoding="utf-8").split("\n"))
        total += len(kept)
        code += sum(1 for l in kept if l.strip() and not l.strip().startswith("//"))
    return total, code


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", help="a source folder, e.g. crates/rpjrt/src")
    parser.add_argument("--max", type=int, help="fail when the lines without tests exceed this")
    args = parser.parse_args()
    if not pathlib.Path(args.folder).is_dir():
        sys.exit(f"core-size: {args.folder} is not a folder")
    total, code = measure(args.folder)
    print(f"{args.folder}: {total} lines without tests, {code} of them code "
          "(not blank, not a // comment)")
    if args.max is not None and total > args.max:
        sys.exit(f"core-size: {args.folder} has {total} lines without tests, over the "
                 f"limit of {args.max}")


if __name__ == "__main__":
    main()
