"""Two runs on one tiny temporal benchmark for the browser tests: an oracle, and a model that
answers wrong on purpose, sometimes with markup, sometimes with nothing readable."""
from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from eval.adapters import ModelAdapter, Response
from eval.runner import evaluate
from bench.tiny import make_tiny_benchmark

FAST = dict(progress=False, plots=False, n_boot=50)
SCRIPT = '<script>document.title="pwned"</script>'


class Trickster(ModelAdapter):
    """Right on +0, wrong with a <script> answer on +1, unreadable elsewhere every third query."""

    def generate(self, requests):
        out = []
        for i, r in enumerate(requests):
            wrong = next(x for x in r.sample.letters if x != r.sample.answer)
            if r.setting == "+0":
                out.append(Response(text=f"Answer: {r.sample.answer}"))
            elif r.setting == "+1":
                out.append(Response(text=f"{SCRIPT} Answer: ({wrong})"))
            elif i % 3 == 0:
                out.append(Response(text="I cannot tell from these views."))
            else:
                out.append(Response(text=wrong))
        return out


def make_runs(root: Path) -> tuple[Path, Path, Path]:
    """(benchmark, trickster run, oracle run) under ``root``; views have 2 frames each."""
    bench = make_tiny_benchmark(root / "bench", n_scenes=2, n_frames=2)
    tricky, oracle = root / "tricky", root / "oracle"
    evaluate(bench, Trickster(), tricky, **FAST)
    evaluate(bench, "oracle", oracle, **FAST)
    return bench, tricky, oracle


def predictions(run: Path) -> dict[str, dict]:
    lines = (run / "predictions.jsonl").read_text().splitlines()
    return {r["key"]: r for r in map(json.loads, lines)}


class Cards(HTMLParser):
    """The cards (their attributes), the <img> sources and the <script> tags of a page."""

    def __init__(self, text: str):
        super().__init__()
        self.cards: list[dict] = []
        self.images: list[str] = []
        self.scripts = 0
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "article" and "card" in (a.get("class") or "").split():
            self.cards.append(a)
        elif tag == "img":
            self.images.append(a["src"])
        elif tag == "script":
            self.scripts += 1
