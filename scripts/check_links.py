#!/usr/bin/env python3
"""Fails when a page of the built documentation site links to something the site lacks.

Usage: check_links.py SITE_DIR [SKIP_PREFIX ...]
       check_links.py --self-test   (checks that a broken link is caught)

Every ``href`` and ``src`` of every HTML page under SITE_DIR is checked, except in pages
under a SKIP_PREFIX (the copied rustdoc output, whose own links rustdoc checks): a relative
or site-absolute target must be a file of the site (a folder needs its ``index.html``), and
a ``#fragment`` must be the ``id`` (or ``name``) of an element of the target page. Links
to other sites (``https:``, ``mailto:`` ...) are not followed. Standard library only.
"""

from __future__ import annotations

import os
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[int, str]] = []
        self.anchors: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if value is None:
                continue
            if key in ("href", "src"):
                self.links.append((self.getpos()[0], value))
            elif key == "id" or (key == "name" and tag == "a"):
                self.anchors.add(value)


_parsed: dict[Path, _Page] = {}


def _parse(path: Path) -> _Page:
    page = _parsed.get(path)
    if page is None:
        page = _Page()
        page.feed(path.read_text(encoding="utf-8", errors="replace"))
        _parsed[path] = page
    return page


def _check(site: Path, page_path: Path) -> list[str]:
    problems = []
    for line, link in _parse(page_path).links:
        parts = urlsplit(link)
        if parts.scheme or link.startswith("//"):
            continue  # another site (https:, mailto:, data: ...)
        rel = unquote(parts.path)
        if rel.startswith("/"):
            target = site / rel.lstrip("/")
        elif rel:
            target = page_path.parent / rel
        else:
            target = page_path
        target = Path(os.path.normpath(target))
        if target.is_dir():
            target = target / "index.html"
        where = f"{page_path.relative_to(site)}:{line}: {link}"
        if site.resolve() not in (target.resolve(), *target.resolve().parents):
            problems.append(f"{where}: points outside the site")
        elif not target.is_file():
            problems.append(f"{where}: no such file")
        elif parts.fragment and target.suffix == ".html":
            if unquote(parts.fragment) not in _parse(target).anchors:
                problems.append(f"{where}: no anchor #{parts.fragment} in {target.relative_to(site)}")
    return problems


def _self_test() -> int:
    """Builds a tiny site with known good and broken links; fails unless exactly the broken
    ones are reported."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp)
        (site / "sub").mkdir()
        (site / "skipped").mkdir()
        (site / "index.html").write_text(
            '<a href="sub/page.html#here">ok</a> <a href="sub/">ok</a> <a href="#top">ok</a>'
            '<a id="top"></a> <a href="https://example.org/x">other site</a>'
            '<img src="missing.png"> <a href="sub/page.html#gone">bad anchor</a>'
            '<a href="../outside.html">outside</a> <a href="/sub/page.html">ok</a>'
        )
        (site / "sub" / "index.html").write_text('<a href="../index.html#top">ok</a>')
        (site / "sub" / "page.html").write_text('<h2 id="here">x</h2><a href="nope.html">bad</a>')
        (site / "skipped" / "x.html").write_text('<a href="nope.html">not checked</a>')
        got = sorted(p for page in sorted(site.rglob("*.html"))
                     if not page.relative_to(site).as_posix().startswith("skipped/")
                     for p in _check(site, page))
    want = [
        "index.html:1: ../outside.html: points outside the site",
        "index.html:1: missing.png: no such file",
        "index.html:1: sub/page.html#gone: no anchor #gone in sub/page.html",
        "sub/page.html:1: nope.html: no such file",
    ]
    if got != want:
        print("check_links: self-test failed:", *got, sep="\n  ", file=sys.stderr)
        return 1
    print("check_links: self-test passed (4 broken links of 4 found; 5 good and 1 external accepted)")
    return 0


def main(argv: list[str]) -> int:
    if argv[1:] == ["--self-test"]:
        return _self_test()
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    site = Path(argv[1])
    if not (site / "index.html").is_file():
        print(f"check_links: {site} has no index.html (not a built site)", file=sys.stderr)
        return 2
    skip = [p.strip("/") + "/" for p in argv[2:]]
    pages = sorted(
        p
        for p in site.rglob("*.html")
        if not any(p.relative_to(site).as_posix().startswith(s) for s in skip)
    )
    problems = [problem for page in pages for problem in _check(site, page)]
    for problem in problems:
        print(f"broken link: {problem}", file=sys.stderr)
    if problems:
        print(f"check_links: {len(problems)} broken internal link(s) in {site}", file=sys.stderr)
        return 1
    print(f"check_links: {len(pages)} pages, every internal link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
