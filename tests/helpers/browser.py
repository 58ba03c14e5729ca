"""The report in a real headless browser (Debian's chromium): what a reader sees.

:func:`measure` opens a copy of an HTML file (beside the original, so its
images load) with a measuring script appended, in a 1400-pixel-wide window,
and returns what the script found after the page loaded: the page's scroll
width, the right edge of every table and image, the cell count of every table
row against its header (colspans counted), each table's class, the cells and text holding a
backtick, the scripts on the page and whether an injected one ran, and where asked the
geometry of one section's table cells.
:func:`screenshot` takes a PNG of the page and returns the share of pixels
that are not white.

Locally a missing chromium skips these tests with the reason; where
``CI`` or ``MEMOBENCH_REQUIRE_CHROMIUM`` is set (.ci/run sets it where it can
install chromium) a missing chromium fails them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

WIDTH = 1400
MEASURE = """
<script id='memobench-measure'>
window.addEventListener('load', () => {
  const right = el => Math.ceil(el.getBoundingClientRect().right);
  const width = row => [...row.cells].reduce((n, c) => n + (c.colSpan || 1), 0);
  const r = {scrollWidth: document.documentElement.scrollWidth, tables: [], tableClasses: [], images: [], rows: [],
             backtickCells: [], scripts: document.scripts.length, injected: !!window.__memobenchInjected,
             text: document.body.innerText.length, backtickText: document.body.innerText.includes('`')};
  for (const t of document.querySelectorAll('table')) {
    r.tables.push(right(t));
    r.tableClasses.push(t.className);
    const rows = [...t.rows];
    // the first row spans every column (a grouped header's rowspans and colspans included)
    for (const row of rows.slice(1)) if ([...row.cells].some(c => c.tagName === 'TD'))
      r.rows.push([width(rows[0]), width(row), row.cells[0].textContent.slice(0, 60)]);
  }
  for (const c of document.querySelectorAll('td,th')) if (c.textContent.includes('`')) r.backtickCells.push(c.textContent);
  for (const i of document.images) r.images.push([i.naturalWidth, right(i)]);
  // the table cells and their elements in the section under the heading with id `section`, as laid out
  r.section = [];
  const sec = document.getElementById(SECTION);
  for (let el = sec && sec.nextElementSibling; el && el.tagName !== 'H2'; el = el.nextElementSibling)
    for (const c of el.querySelectorAll('td, td *')) {
      const b = c.getBoundingClientRect(), lh = parseFloat(getComputedStyle(c).lineHeight);
      r.section.push({tag: c.tagName, cls: c.className, text: c.textContent, width: b.width, height: b.height,
                      top: b.top, left: b.left, lineHeight: lh});
    }
  const out = document.createElement('pre');
  out.id = 'memobench-measured';
  out.textContent = JSON.stringify(r);
  document.body.appendChild(out);
});
</script>
"""


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe:
        return exe
    why = "chromium is not installed (Debian: apt-get install -y chromium)"
    if os.environ.get("CI") or os.environ.get("MEMOBENCH_REQUIRE_CHROMIUM"):
        pytest.fail(why)
    pytest.skip(why)


def _run(args: list[str], profile: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    # --no-sandbox: chromium refuses to start as root without it; a profile per call: tests may run at once
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           f"--user-data-dir={profile}", f"--window-size={WIDTH},1000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True)


def measure(html_path: Path, work: Path, section: str = "") -> dict:
    """``section``: the id of an h2 whose section's table cells (and the
    elements in them) are measured too, as ``section``: tag, class, text,
    width, height, top, left and line height of each."""
    html_path = Path(html_path)
    copy = html_path.with_name(html_path.stem + ".measure.html")
    script = MEASURE.replace("SECTION", json.dumps(section))
    copy.write_text(html_path.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8")
    try:
        proc = _run(["--virtual-time-budget=10000", "--dump-dom", copy.as_uri()], work / "profile-measure")
    finally:
        copy.unlink()
    m = re.search(r"<pre id=\"memobench-measured\">(.*?)</pre>", proc.stdout, re.S)
    assert m, f"the measuring script did not run: {proc.stdout[-500:]}{proc.stderr[-500:]}"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                      .replace("&amp;", "&"))


def screenshot(html_path: Path, png: Path, work: Path, height: int = 3000) -> float:
    """The page's first ``height`` pixels as a PNG; returns the share of non-white pixels."""
    from PIL import Image

    _run([f"--window-size={WIDTH},{height}", f"--screenshot={png}", Path(html_path).as_uri()], work / "profile-shot")
    im = Image.open(png).convert("L")
    assert im.size == (WIDTH, height), im.size
    hist = im.histogram()
    return 1 - sum(hist[245:]) / (im.size[0] * im.size[1])
