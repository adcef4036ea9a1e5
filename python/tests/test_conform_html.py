"""``rpjrt conform --html``: the page and the matrix, loaded in a real headless Chromium.

Both CPU plugins' reports come from the conform verb itself (the whole harness, once per
plugin); the matrix of the two is rendered and read back from the browser's DOM, and compared
with the JSON. Screenshots (a 390 px phone and a 1280 px desktop window) are kept under
``target/test-artifacts/conform-html/``. A missing Chromium fails these tests: install
Debian's ``chromium`` (``scripts/setup.sh`` does).
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from .browser import BrowserMissing, chromium, frame_page, render
from .conftest import REPO

ARTIFACTS = REPO / "target" / "test-artifacts" / "conform-html"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
EVIL = "</script><img src=x onerror=\"document.title='owned'\"><script>document.title='owned'</script>"


@pytest.fixture(scope="module", autouse=True)
def browser() -> str:
    try:
        return chromium()
    except BrowserMissing as e:
        pytest.fail(str(e), pytrace=False)


def conform(*args: str | Path, expect: int = 0) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(
        [sys.executable, "-m", "rpjrt", "conform", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == expect, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def runs(plugin_paths_all: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each CPU plugin checked once, its JSON report and its page written by that run."""
    d = tmp_path_factory.mktemp("conform-html")
    out = {}
    for label, plugin in plugin_paths_all.items():
        conform(plugin, "--json", d / f"{label}.json", "--html", d / f"{label}.html")
        out[label] = d / f"{label}.json"
    return out


@dataclass
class Row:
    check: str
    classes: list[str]
    outcomes: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)


class Dom(HTMLParser):
    """The check rows of a rendered page (``tr[data-check]``), the matrix's column titles
    and a count of every tag."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[Row] = []
        self.tags: Counter[str] = Counter()
        self.columns: list[str] = []
        self._into: str | None = None
        self._depth = 0
        self._matrix = False
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags[tag] += 1
        if self._into:
            self._depth += tag == "span"
            return
        if tag == "table":
            self._matrix = a.get("class") == "matrix"
        elif tag == "tr" and "data-check" in a:
            self.rows.append(Row(a["data-check"], a.get("class", "").split()))
        elif tag == "th" and "data-plugin" in a and self._matrix:
            self.columns.append(a["data-plugin"])
        elif tag == "td" and "data-outcome" in a and self.rows:
            r = self.rows[-1]
            r.outcomes.append(a["data-outcome"])
            r.labels.append("")
            r.details.append("")
        elif tag == "span" and a.get("class") in ("label", "detail") and self.rows and self.rows[-1].labels:
            self._into, self._depth = a["class"], 0

    def handle_endtag(self, tag: str) -> None:
        if self._into and tag == "span":
            if self._depth == 0:
                self._into = None
            else:
                self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._into == "label":
            self.rows[-1].labels[-1] += data
        elif self._into == "detail":
            self.rows[-1].details[-1] += data


def results(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in report["results"]}


def shoot(page: Path, name: str, size: dict[str, int]) -> str:
    png = ARTIFACTS / f"{name}.png"
    dom = render(page, png, **size)
    assert png.stat().st_size > 1000, png
    return dom


def announce(capsys: pytest.CaptureFixture[str], *names: str) -> None:
    with capsys.disabled():
        print(f"\n  screenshots: {', '.join(str(ARTIFACTS / (n + '.png')) for n in names)}")


def test_matrix_of_the_two_cpu_plugins(runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "matrix.html"
    r = conform("--html", page, runs["old"], runs["new"])
    assert r.stdout == "" and page.is_file()
    reports = [json.loads(runs[k].read_text()) for k in ("old", "new")]
    by = [results(x) for x in reports]
    names = list(dict.fromkeys([*by[0], *by[1]]))
    for name, size in (("matrix-phone", PHONE), ("matrix-desktop", DESKTOP)):
        dom = Dom(shoot(page, name, size))
        # Every check is a row, in run order, and nothing else is.
        assert [row.check for row in dom.rows] == names
        assert dom.columns == ["xla_cpu_pjrt.so", "pjrt_c_api_cpu_plugin.so"]
        for row in dom.rows:
            want = [b[row.check]["outcome"] if row.check in b else "absent" for b in by]
            assert row.outcomes == want, row
            assert row.labels == want, row
            differs = len(set(want)) > 1
            assert ("diff" in row.classes) == differs, row
            assert ("same" in row.classes) == (not differs), row
        assert dom.tags["script"] == 0 and dom.tags["img"] == 0
    # The plugins differ at least where PJRT 0.81 lacks an element type that 0.115 has.
    diff_rows = [row.check for row in dom.rows if "diff" in row.classes]
    assert "buffers.roundtrip.int1" in diff_rows
    announce(capsys, "matrix-phone", "matrix-desktop")


PROBE = """
<script>
(() => {
  const box = document.getElementById('only-diff');
  const table = document.querySelector('table.matrix');
  const wrap = table.parentElement;
  const seen = () => [...document.querySelectorAll('tr[data-check]')]
    .filter(r => r.getClientRects().length > 0).map(r => r.dataset.check);
  const all = seen();
  box.checked = true;
  const only = seen();
  const first = table.querySelector('tbody tr.diff th');
  wrap.scrollLeft = 400;
  const out = {
    all: all.length, only,
    viewport: window.innerWidth,
    pageWidth: document.documentElement.scrollWidth,
    boxScrolls: wrap.scrollWidth > wrap.clientWidth,
    scrolled: wrap.scrollLeft,
    stickyLeft: first.getBoundingClientRect().left - wrap.getBoundingClientRect().left,
    position: getComputedStyle(first).position,
  };
  parent.postMessage(JSON.stringify(out), '*');
})();
</script>
"""


def test_matrix_on_a_phone_scrolls_inside_its_box_and_filters_with_css(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "matrix.html"
    conform("--html", page, runs["old"], runs["new"])
    html = page.read_text()
    assert "<script" not in html
    # A copy measured by a probe script of the test's own (the page's policy forbids
    # scripts, so the copy drops it): the page stays within 390 px, the matrix scrolls in
    # its box with the check names pinned, and the checkbox leaves only the differing rows.
    probed = tmp_path / "probed.html"
    probed.write_text(
        re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html).replace("</body>", PROBE + "</body>")
    )
    shoot(probed, "matrix-phone-only-differences", PHONE)
    # Measured at 390 px: framed (the headless window itself is at least 500 px wide), the
    # probe posting its figures to the frame's page.
    frame = tmp_path / "frame.html"
    listen = (
        '<pre id="probe"></pre><script>addEventListener("message", '
        'e => { document.getElementById("probe").textContent = e.data; });</script>'
    )
    frame.write_text(frame_page(probed.as_uri(), PHONE["width"], PHONE["height"], listen))
    dom = render(frame, None)
    m = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert m and m.group(1), dom[-3000:]
    probe = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    diff_rows = [row.check for row in Dom(html).rows if "diff" in row.classes]
    assert probe["all"] == len(Dom(html).rows)
    assert probe["only"] == diff_rows and diff_rows
    assert probe["viewport"] == 390 and probe["pageWidth"] <= 390, probe
    assert probe["boxScrolls"] and probe["scrolled"] > 0, probe
    assert probe["position"] == "sticky" and abs(probe["stickyLeft"]) <= 2, probe
    announce(capsys, "matrix-phone-only-differences")


def test_a_known_difference_and_hostile_text(runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = json.loads(runs["old"].read_text())
    evil = copy.deepcopy(base)
    evil["plugin"]["path"] = f"/plugins/{EVIL}.so"
    evil["plugin"]["attributes"] = {EVIL: EVIL}
    target = evil["results"][0]
    target.update(outcome="fail", detail=EVIL, facts={EVIL: EVIL}, stderr=EVIL)
    evil["summary"] = None
    (tmp_path / "evil.json").write_text(json.dumps(evil))
    (tmp_path / "base.json").write_text(json.dumps(base))
    page = tmp_path / "evil.html"
    conform("--html", page, tmp_path / "base.json", tmp_path / "evil.json")
    dom_text = shoot(page, "matrix-hostile", DESKTOP)
    dom = Dom(dom_text)
    # The hostile strings are text: no element came of them, no script ran.
    assert dom.tags["img"] == 0 and dom.tags["script"] == 0, dom.tags
    assert "<title>rpjrt conform" in dom_text and "owned" not in dom_text.split("</title>")[0]
    assert [row.check for row in dom.rows if "diff" in row.classes] == [target["name"]]
    row = next(row for row in dom.rows if row.check == target["name"])
    assert row.labels == [base["results"][0]["outcome"], "fail"]
    assert row.details[1] == EVIL
    assert len(dom.columns) == 2 and dom.columns[0] == "xla_cpu_pjrt.so", dom.columns
    # One report: that plugin's page, with its hostile strings as text too.
    single = tmp_path / "evil-page.html"
    conform("--html", single, tmp_path / "evil.json")
    one = Dom(shoot(single, "page-hostile", PHONE))
    assert one.tags["img"] == 0 and one.tags["script"] == 0
    assert [r.details[0] for r in one.rows if r.check == target["name"]] == [EVIL]
    announce(capsys, "matrix-hostile", "page-hostile")


def test_the_page_a_run_writes(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    for label, report_file in runs.items():
        report = json.loads(report_file.read_text())
        name = f"page-{label}-phone"
        dom_text = shoot(report_file.with_suffix(".html"), name, PHONE)
        dom = Dom(dom_text)
        assert [r.check for r in dom.rows] == [x["name"] for x in report["results"]]
        for row, x in zip(dom.rows, report["results"]):
            assert row.labels == [x["outcome"]] and row.outcomes == [x["outcome"]], row
        for outcome, n in report["summary"].items():
            if n:
                assert f'data-summary="{outcome}">{n} {outcome}</li>' in dom_text, outcome
        announce(capsys, name)
