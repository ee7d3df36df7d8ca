"""How sure a read is (ParseResult.confidence) and the summary's reads per rule and confidence."""
from __future__ import annotations

import json

import pytest

from eval.adapters import ModelAdapter, Response
from eval.parser import CONFIDENCES, FAILED, ParseResult, method_confidence, parse_answer, parse_scores
from eval.report import render_reads_line
from eval.runner import evaluate
from eval.summary import parse_reads

POINTS = ["Point A", "Point B", "Point C", "Point D"]
IMAGES = ["the second image", "the third image"]
FAST = dict(progress=False, plots=False, n_boot=100)


@pytest.mark.parametrize("text,options,letter,confidence", [
    # the answer states its option: a letter, a marker, its first judgement, its conclusion
    ("B", POINTS, "B", "statement"),
    ("The answer is (C).", POINTS, "C", "statement"),
    ("Box A fits the dog most closely. Box B, on the other hand, is too wide.", ["Box A", "Box B"], "A", "statement"),
    ("Point A is on the rim. Point B is on the base. Therefore, point B is the corresponding point.", POINTS, "B",
     "statement"),
    # the answer only names it
    ("I think it's D", POINTS, "D", "mention"),
    ("The chair (option (B)) is touched, not the table.", ["table", "chair"], "B", "mention"),
    # a hedge first, or tentative words: a guess
    ("It is hard to tell from one view, but point A is closer.", POINTS, "A", "guess"),
    ("If I had to choose, the third image might be the better match. It has the same sky.", IMAGES, "B", "guess"),
    ("Based on this analysis, the second image is perhaps the most similar one. Its colours match.", IMAGES, "A",
     "guess"),
    # nothing read
    ("I cannot tell which point is closer.", POINTS, None, "none"),
])
def test_confidence_of_a_read(text, options, letter, confidence):
    result = parse_answer(text, options)
    assert (result.letter, result.confidence) == (letter, confidence), (text, result)


def test_confidence_defaults_to_the_rules_own():
    assert ParseResult("A", "fallback", False).confidence == "guess"
    assert ParseResult("A", "label", False).confidence == "mention"
    assert ParseResult("A", "marker", False).confidence == "statement"
    assert FAILED.confidence == "none"
    assert parse_scores([0.1, 0.9], ["x", "y"]).confidence == "statement"
    assert method_confidence("an unknown rule") == "mention"
    assert set(CONFIDENCES) == {"statement", "mention", "guess", "none"}


def test_parse_reads_counts_rules_and_confidence():
    records = [{"method": "marker", "confidence": "statement", "failed": False},
               {"method": "closing", "confidence": "guess", "failed": False},
               {"method": "label", "failed": False},  # an older line: the rule's default
               {"method": "failed", "failed": True}]
    reads = parse_reads(records)
    assert reads["by_rule"] == {"closing": 1, "failed": 1, "label": 1, "marker": 1}
    assert reads["by_confidence"] == {"statement": 1, "mention": 1, "guess": 1, "none": 1}
    assert reads["guess_rate"] == pytest.approx(33.33)
    assert parse_reads([])["guess_rate"] is None
    line = render_reads_line({"parse_reads": reads})
    assert "guess 1" in line and "33.33 %" in line
    assert render_reads_line({}) == "Reads by confidence: –"


class Hedger(ModelAdapter):
    """Names the right option, but only after a hedge: every read is a guess."""

    def generate(self, requests):
        return [Response(text=f"It is hard to say from these views, but I lean towards ({r.sample.answer}).")
                for r in requests]


def test_a_run_reports_its_guessed_reads(tiny_bench, tmp_path):
    s = evaluate(tiny_bench, Hedger(), tmp_path / "h", settings="+0", **FAST)
    assert s["parse_reads"]["by_confidence"]["guess"] == s["n_queries"] and s["parse_reads"]["guess_rate"] == 100.0
    line = json.loads((tmp_path / "h" / "predictions.jsonl").read_text().splitlines()[0])
    assert line["confidence"] == "guess" and line["method"] == "claim"
    assert "guessed: 100.00 %" in (tmp_path / "h" / "report.md").read_text()
