"""What went wrong: failure taxonomy, predicted-letter histogram, parse statistics.

Each wrong query is classified by the type of the distractor it chose (the sample's
``distractors`` map letters to failure modes such as ``single_view_count`` or
``naive_sum``), which turns predictions into the papers' error tables. A wrong answer to an
option without a type counts as ``untyped``, an answer the parser could not read as
``parse_failure``. Counts are over queries (every setting, variant and rotation).
"""
from __future__ import annotations

from collections import Counter

PARSE_FAILURE = "parse_failure"
UNTYPED = "untyped"


def error_type(record: dict) -> str | None:
    """The failure type of one prediction line; None when it is right."""
    if record.get("failed"):
        return PARSE_FAILURE
    if record.get("correct"):
        return None
    return record.get("chosen_type") or UNTYPED


def _sorted_counts(counter: Counter) -> dict[str, int]:
    return {k: counter[k] for k in sorted(counter, key=lambda k: (-counter[k], k))}


def failure_taxonomy(records: list[dict]) -> dict[str, int]:
    """{failure type: number of wrong queries}, most frequent first."""
    return _sorted_counts(Counter(t for r in records if (t := error_type(r)) is not None))


def failure_taxonomy_by_setting(records: list[dict]) -> dict[str, dict[str, int]]:
    by: dict[str, Counter] = {}
    for r in records:
        t = error_type(r)
        if t is not None:
            by.setdefault(r["setting"], Counter())[t] += 1
    return {s: _sorted_counts(c) for s, c in by.items()}


def letter_histogram(records: list[dict]) -> dict[str, dict[str, int]]:
    """Predicted vs gold letters over all queries; unread answers count under "none"."""
    predicted = Counter(r.get("letter") or "none" for r in records)
    gold = Counter(r["answer"] for r in records)
    letters = sorted(set(predicted) | set(gold), key=lambda x: (x == "none", x))
    return {"predicted": {k: predicted.get(k, 0) for k in letters},
            "gold": {k: gold.get(k, 0) for k in letters if k != "none"}}


def parse_stats(records: list[dict]) -> dict:
    """Parse-failure and fallback rates (points, over all queries) and counts per method."""
    n = len(records)
    methods = Counter(r.get("method", "failed") for r in records)
    failures = sum(1 for r in records if r.get("failed"))
    fallbacks = sum(1 for r in records if r.get("method") == "fallback")
    return {
        "parse_failure_rate": round(100.0 * failures / n, 2) if n else None,
        "fallback_rate": round(100.0 * fallbacks / n, 2) if n else None,
        "parse_methods": _sorted_counts(methods),
    }
