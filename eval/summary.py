"""summary.json: every number of a run, computed from its prediction lines alone.

Because the summary is a pure function of predictions.jsonl (plus the run header), a
resumed run, a re-rendered report and ``python -m eval compare`` all agree on the numbers.
Key reference: eval/README.md.
"""
from __future__ import annotations

from pathlib import Path

from common.atomic import atomic_write_json, read_json_object
from bench.constants import DEFAULT_N_BOOT
from bench.protocol import setting_sort_key
from eval.bootstrap import ALPHA
from eval.metrics import accuracy_summary, chance_by_subset, score_units
from eval.parser import CONFIDENCES, GUESS, NONE, method_confidence
from eval.taxonomy import failure_taxonomy, failure_taxonomy_by_setting, letter_histogram, parse_stats

SUMMARY = "summary.json"
SCHEMA_VERSION = 2  # 2: usage totals; bump when a key changes meaning
UNITS_NOTE = "accuracies, chance, deltas, gaps and rates in points (0-100); counts are integers"


def summarize(records: list[dict], max_extra: dict[str, int], n_boot: int = DEFAULT_N_BOOT, seed: int = 0,
              header: dict | None = None) -> dict:
    """The summary dict of a run.

    Args:
        records: prediction lines (dicts as written to predictions.jsonl).
        max_extra: K_T per subset (the +k settings delta_dis averages over).
        n_boot: bootstrap replicates; seed: bootstrap seed (the run seed).
        header: run facts copied into ``run`` (model, bench, settings, ...).
    """
    units = score_units(records)
    summary = {
        "schema_version": SCHEMA_VERSION,
        "units": UNITS_NOTE,
        "run": dict(header or {}),
        "n_samples": len({r["sample_id"] for r in records}),
        "n_queries": len(records),
        "settings": sorted({r["setting"] for r in records}, key=setting_sort_key),
        "chance": chance_by_subset(units),
    }
    summary.update(accuracy_summary(units, max_extra, n_boot, seed))
    summary["failure_taxonomy"] = failure_taxonomy(records)
    summary["failure_taxonomy_by_setting"] = failure_taxonomy_by_setting(records)
    summary["letter_histogram"] = letter_histogram(records)
    summary.update(parse_stats(records))
    summary["parse_reads"] = parse_reads(records)
    summary["usage"] = usage_totals(records)
    summary["bootstrap"] = {"n_boot": n_boot, "seed": seed, "cluster": "scene (Sample.cluster)",
                            "interval": f"{int(100 * (1 - ALPHA))} % percentile"}
    return summary


def parse_reads(records: list[dict]) -> dict:
    """How each answer was read: queries per parser rule and per confidence (statement, mention,
    guess, none), and the share of read answers that are guesses (points). A line without
    ``confidence`` (an older run) gets its rule's default."""
    by_rule: dict[str, int] = {}
    by_confidence = {c: 0 for c in CONFIDENCES}
    for rec in records:
        method = rec.get("method", "failed")
        by_rule[method] = by_rule.get(method, 0) + 1
        confidence = rec.get("confidence") or (NONE if rec.get("failed") else method_confidence(method))
        by_confidence[confidence] = by_confidence.get(confidence, 0) + 1
    read = len(records) - by_confidence[NONE]
    return {"by_rule": dict(sorted(by_rule.items(), key=lambda kv: (-kv[1], kv[0]))),
            "by_confidence": by_confidence,
            "guess_rate": round(100.0 * by_confidence[GUESS] / read, 2) if read else None}


def usage_totals(records: list[dict]) -> dict:
    """What the answers cost, summed over prediction lines' ``meta``: prompt and completion
    tokens (an endpoint's ``usage`` or a local model's token counts), seconds and attempts of
    endpoint calls, and the queries whose answer is an error (a refused query)."""
    totals = {"prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0, "attempts": 0, "errors": 0}
    for rec in records:
        meta = rec.get("meta") or {}
        usage = meta.get("usage") or {}
        totals["prompt_tokens"] += int(usage.get("prompt_tokens", meta.get("prompt_tokens", 0)) or 0)
        totals["completion_tokens"] += int(usage.get("completion_tokens", meta.get("new_tokens", 0)) or 0)
        totals["seconds"] += float(meta.get("seconds", 0.0) or 0.0)
        totals["attempts"] += int(meta.get("attempts", 0) or 0)
        totals["errors"] += 1 if meta.get("error") else 0
    totals["seconds"] = round(totals["seconds"], 3)
    return totals


def write_summary(summary: dict, out_dir: Path) -> Path:
    """summary.json, atomically: a full disk or a kill leaves the previous one intact."""
    return atomic_write_json(Path(out_dir) / SUMMARY, summary)


def read_summary(out_dir: Path) -> dict:
    """summary.json as a dict; ValueError when it is not a JSON object."""
    return read_json_object(Path(out_dir) / SUMMARY)
