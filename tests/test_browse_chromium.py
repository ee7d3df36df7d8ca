"""The run browser in a real headless Chromium (Debian's package; .ci/run installs it).

The filter script runs on the page as a browser opens it from disk: the URL fragment selects
the cards, the count and the shown cards match the predictions, the escaped ``<script>`` in a
raw answer never runs, and a screenshot shows a rendered page. Skips only without the binary.
"""
from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image

from browse_runs import Cards, make_runs, predictions
from eval.browse import build_browser

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (apt-get install chromium)")


def chromium(tmp_path, *args: str) -> str:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
           f"--user-data-dir={tmp_path / 'profile'}", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_filters_run_in_chromium_and_the_page_renders(tmp_path):
    bench, tricky, oracle = make_runs(tmp_path)
    out = tmp_path / "site"
    build_browser([tricky, oracle], out, page_size=5)
    url = (out / "index.html").resolve().as_uri()
    recs = predictions(tricky)

    def shown(fragment: str) -> tuple[int, list[dict], str]:
        dom = chromium(tmp_path, "--dump-dom", f"{url}#{fragment}")
        page = Cards(dom)
        count = int(re.search(r'data-shown="(\d+)"', dom).group(1))
        assert re.search(rf'id="count">{count} of {len(recs)} queries<', dom)
        assert sum(c.get("data-match") == "1" for c in page.cards) == count
        visible = [c for c in page.cards if "hidden" not in c]
        assert len(visible) == min(count, 5) and all(c["data-match"] == "1" for c in visible)
        return count, visible, dom

    wrong = {k for k, r in recs.items() if not r["correct"] and not r["failed"]}
    count, visible, dom = shown("correct=wrong")
    assert count == len(wrong) and {c["data-key"] for c in visible} <= wrong
    assert "<title>tiny: browse</title>" in dom  # the raw answer's <script> did not run
    assert "&lt;script&gt;document.title=" in dom
    plus1 = {k for k, r in recs.items() if r["setting"] == "+1"}
    count, visible, _ = shown("setting=%2B1&task=dedup_count")
    assert count == sum(recs[k]["task"] == "dedup_count" for k in plus1) > 0
    # A = the trickster, B = the oracle: "A wrong / B right" is every query the trickster missed
    count, _, _ = shown("pair=a_wrong_b_right")
    assert count == sum(not r["correct"] for r in recs.values())
    count, _, _ = shown("a=1&b=0&pair=a_right_b_wrong&page=2")
    assert count == sum(not r["correct"] for r in recs.values())
    count, _, _ = shown("sample=s001-mvn")
    assert count == sum(r["sample_id"] == "s001-mvn" for r in recs.values())

    shot = tmp_path / "screenshot.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,1400", "--hide-scrollbars", f"{url}#correct=wrong")
    with Image.open(shot) as im:
        assert im.size == (1280, 1400)
        pixels = np.asarray(im.convert("RGB"), dtype=np.float32)
    assert pixels.std() > 20  # text, tables and the benchmark's noise images, not a blank page
    assert (pixels.reshape(-1, 3).std(axis=1) > 40).mean() > 0.05  # colourful image content was painted
