"""The headless-browser helper itself: what it says when Chromium is missing or too slow."""

from __future__ import annotations

from pathlib import Path

import pytest

from .browser import BrowserError, BrowserMissing, chromium, frame_page, render


def test_a_missing_chromium_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RPJRT_TEST_CHROMIUM", "/nonexistent/chromium")
    with pytest.raises(BrowserMissing, match="RPJRT_TEST_CHROMIUM=/nonexistent/chromium: no such executable"):
        chromium()
    monkeypatch.delenv("RPJRT_TEST_CHROMIUM")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(BrowserMissing, match="apt-get install chromium"):
        render(Path(__file__), None)


def test_a_missing_page_and_a_timeout_are_errors(tmp_path: Path) -> None:
    chromium()  # fails the test when the browser is missing
    with pytest.raises(BrowserError, match="no such file"):
        render(tmp_path / "absent.html", None)
    page = tmp_path / "p.html"
    page.write_text("<!DOCTYPE html><title>t</title><p>x</p>")
    with pytest.raises(BrowserError, match="ran past 0.01 s"):
        render(page, None, timeout=0.01)


def test_scripts_run_before_the_dom_is_read_and_the_frame_has_the_size(tmp_path: Path) -> None:
    page = tmp_path / "p.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta name='viewport' content='width=device-width'></head>"
        "<body><p id='o'>before</p><script>"
        "setTimeout(() => { document.getElementById('o').textContent = 'after ' + innerWidth; "
        "parent.postMessage(innerWidth + 'x' + innerHeight, '*'); }, 100);"
        "</script></body></html>"
    )
    png = tmp_path / "shot" / "p.png"
    dom = render(page, png, width=800, height=600)
    assert "<p id=\"o\">after 800</p>" in dom, dom
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Narrower than the headless window can be: framed, the page sees exactly 390 x 844.
    frame = tmp_path / "frame.html"
    listen = "<pre id='r'></pre><script>addEventListener('message', e => { r.textContent = e.data; });</script>"
    frame.write_text(frame_page(page.as_uri(), 390, 844, listen))
    assert '<pre id="r">390x844</pre>' in render(frame, None)
