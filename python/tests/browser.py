"""A real browser for tests: load a page in headless Chromium, read the DOM, take a screenshot.

Usage from a test::

    from .browser import render

    dom = render(page_path, artifacts / "page.png", width=390, height=844)
    assert 'data-check="api.version"' in dom

``render`` runs Debian's ``chromium`` twice: once with ``--dump-dom`` (the document as
serialized after its scripts ran and the page loaded) and once with ``--screenshot``. Each
run gets a fresh profile directory and a timeout. Name resolution is mapped to nothing
except ``localhost`` (IP literals are unaffected), so a page that tries to fetch anything
from the network fails to, as it would offline.

Sizes: headless Chromium lays a page out at least 500 px wide, and its viewport is shorter
than the window. So the screenshot shows the page inside an ``<iframe>`` of exactly
``width`` x ``height`` CSS pixels (what a 390 px phone shows, for ``width=390``), while the
DOM dump loads the page itself in a window of that size (its layout at least 500 px wide).
A test that measures layout at a phone's width does it from a script in its own copy of
the page, framed the same way (see ``test_conform_html.py``).

A missing browser raises ``BrowserMissing`` and the tests that need one fail with that
message: the CI tier installs chromium (``scripts/setup.sh``) and must not pass without it.
``RPJRT_TEST_CHROMIUM`` names another executable.
"""

from __future__ import annotations

import html
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

__all__ = ["BrowserError", "BrowserMissing", "chromium", "frame_page", "render"]

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class BrowserError(RuntimeError):
    """Chromium ran but did not produce the DOM or the screenshot (a crash, a timeout)."""


class BrowserMissing(BrowserError):
    """No Chromium executable was found."""


def chromium() -> str:
    """The path of the Chromium executable: ``$RPJRT_TEST_CHROMIUM``, else the first on ``PATH``."""
    named = os.environ.get("RPJRT_TEST_CHROMIUM")
    if named:
        found = shutil.which(named)
        if not found:
            raise BrowserMissing(f"RPJRT_TEST_CHROMIUM={named}: no such executable")
        return found
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    raise BrowserMissing(
        "no Chromium on PATH (looked for " + ", ".join(_CANDIDATES) + "); "
        "install Debian's package: apt-get install chromium (scripts/setup.sh does)"
    )


def _url(target: str | os.PathLike[str]) -> str:
    text = os.fspath(target)
    if "://" in text:
        return text
    path = Path(text).resolve()
    if not path.is_file():
        raise BrowserError(f"{path}: no such file to load")
    return path.as_uri()


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="rpjrt-chromium-") as profile:
        cmd = [
            chromium(),
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost",
            f"--user-data-dir={profile}",
            *args,
        ]
        # Its own session, so that a timeout ends the browser's helper processes too.
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            env=dict(os.environ, HOME=profile),
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise BrowserError(
                f"chromium ran past {timeout:g} s: {' '.join(cmd)}\n{err[-2000:]}"
            ) from None
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def frame_page(url: str, width: int, height: int, extra: str = "") -> str:
    """A page that shows ``url`` in an ``<iframe>`` of exactly ``width`` x ``height`` CSS
    pixels at its top left corner, followed by ``extra`` (markup of the caller's own)."""
    src = html.escape(url, quote=True)
    return (
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head>"
        "<body style=\"margin:0;overflow:hidden\">"
        f'<iframe src="{src}" style="border:0;display:block;width:{width}px;height:{height}px"></iframe>'
        f"{extra}</body></html>"
    )


def render(
    target: str | os.PathLike[str],
    screenshot: str | os.PathLike[str] | None,
    *,
    width: int = 1280,
    height: int = 900,
    timeout: float = 60.0,
) -> str:
    """Load ``target`` (a file path or a URL) in headless Chromium and return its DOM.

    The DOM is the document serialized after its scripts ran (``--dump-dom``). When
    ``screenshot`` is a path, a second run writes there a PNG of the page as a viewport of
    ``width`` x ``height`` CSS pixels shows it (through ``frame_page``); its folder is
    created. Raises ``BrowserMissing`` without
    a Chromium, ``BrowserError`` when a run fails, times out or leaves no output.
    """
    url = _url(target)
    size = f"--window-size={width},{height}"
    # Scripts that wait on timers get up to 2 s of virtual time before the dump.
    dom_run = _run([size, "--virtual-time-budget=2000", "--dump-dom", url], timeout)
    if dom_run.returncode != 0 or "<html" not in dom_run.stdout.lower():
        raise BrowserError(
            f"chromium --dump-dom {url} exited with {dom_run.returncode} and no document:\n"
            f"{dom_run.stderr[-2000:]}"
        )
    if screenshot is not None:
        png = Path(screenshot).resolve()
        png.parent.mkdir(parents=True, exist_ok=True)
        png.unlink(missing_ok=True)
        with tempfile.TemporaryDirectory(prefix="rpjrt-frame-") as d:
            frame = Path(d) / "frame.html"
            frame.write_text(frame_page(url, width, height))
            shot = _run(
                [size, "--hide-scrollbars", "--virtual-time-budget=2000", f"--screenshot={png}", frame.as_uri()],
                timeout,
            )
        if shot.returncode != 0 or not png.is_file() or png.stat().st_size == 0:
            raise BrowserError(
                f"chromium --screenshot={png} {url} exited with {shot.returncode} and wrote "
                f"no image:\n{shot.stderr[-2000:]}"
            )
    return dom_run.stdout
