"""Speed of the rule-based answer parser (eval.parser.parse_answer), per answer.

    python -m scripts.bench_parser [--real ../shared/parser/real_answers_dev.jsonl.gz] [--repeats 3] \
        [--out runs/bench_parser.json]

Parses every answer of the parser corpus (tests/data/parser_corpus.jsonl) and, with ``--real``, of a
file of real model answers (one JSON object a line with ``response`` and ``options``, gzip or not),
``--repeats`` times each. Reports CPU time per answer (``time.process_time``: the parser's own
work, which a busy shared machine disturbs least) and wall time, as the mean over all answers of
the best repeat, plus the slowest single answer. Prints the figures and writes them as JSON to
``--out`` (written whole, or not at all).
"""
from __future__ import annotations

import argparse
import gzip
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from eval.parser import parse_answer  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "parser_corpus.jsonl"


def load(path: Path, text_key: str) -> list[tuple[str, list[str]]]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [(r[text_key], r["options"]) for r in rows]


def time_answers(answers: list[tuple[str, list[str]]], repeats: int) -> dict:
    """Mean CPU and wall milliseconds per answer (best of ``repeats``) and the slowest answer."""
    best_cpu = best_wall = float("inf")
    slowest = 0.0
    for _ in range(repeats):
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for text, options in answers:
            t = time.perf_counter()
            parse_answer(text, options)
            slowest = max(slowest, time.perf_counter() - t)
        best_cpu = min(best_cpu, time.process_time() - cpu0)
        best_wall = min(best_wall, time.perf_counter() - wall0)
    n = len(answers)
    return {"n": n, "repeats": repeats, "cpu_ms_per_answer": round(1000 * best_cpu / n, 4),
            "wall_ms_per_answer": round(1000 * best_wall / n, 4), "slowest_answer_ms": round(1000 * slowest, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--real", type=Path, default=None, help="a file of real answers (response, options)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_parser.json")
    args = ap.parse_args(argv)

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    result = {"commit": commit.strip() or None, "python": platform.python_version(), "machine": platform.machine(),
              "corpus": time_answers(load(CORPUS, "text"), args.repeats)}
    if args.real:
        result["real"] = {"file": args.real.name, **time_answers(load(args.real, "response"), args.repeats)}
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(args.out.suffix + ".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
