"""Asking the model: requests in, parsed prediction lines out, each written as it completes.

The adapter's ``stream`` yields answers in completion order (a batching model: one batch at a
time; an endpoint: whenever any of its workers finishes), and every answer is written and
flushed at once, so a crash loses only the requests in flight. Answers the parser's rules
cannot read wait, ``batch_size`` at a time, for the fallback extractor.
"""
from __future__ import annotations

from typing import Callable

from bench.format import Benchmark
from bench.prompt import build_extract_prompt
from bench.protocol import primary_setting, subset_key
from eval.adapters.base import ModelAdapter, Request, Response
from eval.manifest import PlanImages
from eval.parser import FAILED, ParseResult, parse_answer, parse_scores
from eval.plan import PlannedQuery, build_request
from eval.predictions import PredictionWriter


def read_response(request: Request, response: Response) -> ParseResult:
    if response.scores is not None:
        return parse_scores(response.scores, request.options)
    return parse_answer(response.text, request.options)


def run_fallback(fallback: ModelAdapter, pairs: list[tuple[Request, Response]]) -> list[tuple[ParseResult, str | None]]:
    """Ask the fallback extractor to map each unread answer to a letter (rules only on its output)."""
    requests = [Request(key=r.key + "|extract", sample=r.sample, setting="extract", views=[],
                        prompt=build_extract_prompt(r.sample, resp.text or "")) for r, resp in pairs]
    responses = fallback.generate(requests)
    out = []
    for req, resp in zip(requests, responses):
        parsed = read_response(req, resp)
        out.append((ParseResult(parsed.letter, "fallback", False) if not parsed.failed else FAILED, resp.text))
    return out


def make_record(pq: PlannedQuery, request: Request, response: Response, parsed: ParseResult,
                fallback_raw: str | None = None) -> dict:
    """The predictions.jsonl line of one answered query."""
    s, asked = pq.sample, request.sample
    correct = (not parsed.failed) and parsed.letter == asked.answer
    chosen_type = None
    if not correct and not parsed.failed:
        chosen_type = asked.distractors.get(parsed.letter) or None
    rec = {
        "key": pq.key, "sample_id": s.id, "setting": pq.query.setting, "variant": pq.query.variant,
        "rotation": pq.rotation, "n_rotations": pq.n_rotations, "view_order": list(pq.query.view_ids),
        "letter": parsed.letter, "method": parsed.method, "confidence": parsed.confidence, "failed": parsed.failed,
        "correct": correct,
        "answer": asked.answer, "chosen_type": chosen_type,
        "raw": response.text, "scores": response.scores,
        "subset": subset_key(s), "task": s.task, "axis": s.axis, "granularity": s.granularity,
        "cluster": s.cluster, "n_options": len(s.options), "primary": pq.query.setting == primary_setting(s),
    }
    if fallback_raw is not None:
        rec["fallback_raw"] = fallback_raw
    if response.meta:
        rec["meta"] = response.meta
    return rec


def answer_queries(bench: Benchmark, model: ModelAdapter, todo: list[PlannedQuery], writer: PredictionWriter,
                   batch_size: int, fallback: ModelAdapter | None = None, images: PlanImages | None = None,
                   on_written: Callable[[int], None] | None = None) -> None:
    """Ask ``model`` every query of ``todo`` and write each parsed line as its answer arrives.

    Args:
        batch_size: requests per ``generate`` call of a batching model, and per fallback call.
        images: adds each query's images hash to its line.
        on_written: called with the number of lines just written (a progress bar).
    """
    by_key = {pq.key: pq for pq in todo}
    waiting: list[tuple[PlannedQuery, Request, Response]] = []  # unread, for the fallback

    def write(items: list[tuple[PlannedQuery, Request, Response, ParseResult, str | None]]) -> None:
        records = [make_record(*item) for item in items]
        if images is not None:
            for rec in records:
                rec["images"] = images.of(rec["key"])
        writer.append(records)
        if on_written is not None:
            on_written(len(records))

    def ask_fallback() -> None:
        batch = waiting[:]
        waiting.clear()
        results = run_fallback(fallback, [(req, resp) for _, req, resp in batch])
        write([(pq, req, resp, parsed, raw) for (pq, req, resp), (parsed, raw) in zip(batch, results)])

    requests = (build_request(bench, pq) for pq in todo)  # built lazily: images are read by the adapter
    completed = False
    try:
        for request, response in model.stream(requests, batch_size):
            pq = by_key[request.key]
            parsed = read_response(request, response)
            if fallback is not None and parsed.failed and response.text:
                waiting.append((pq, request, response))
                if len(waiting) >= batch_size:
                    ask_fallback()
            else:
                write([(pq, request, response, parsed, None)])
        completed = True
    finally:
        if waiting:  # answers already paid for: keep them, read by the fallback when it can
            if completed:
                ask_fallback()
            else:
                try:
                    ask_fallback()
                except Exception:
                    write([(pq, req, resp, FAILED, None) for pq, req, resp in waiting])
