"""Run a model through the protocol: plan queries, ask in batches, parse, record, summarise.

``evaluate`` is the entry point for the CLI and for training code. It checks every input
first, images decoded included (nothing is written to ``out_dir`` when one is wrong), takes
the folder's run lock (one writer per folder), then continues whatever an earlier identical
run left in ``out_dir/predictions.jsonl`` and never asks a finished query again.
"""
from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from tqdm import tqdm

from bench.atomic import atomic_write_text
from bench.format import Benchmark, Sample
from bench.images import images_digest, inspect_images
from eval.adapters.base import ModelAdapter, Request, RequestView, Response
from eval.bootstrap import DEFAULT_N_BOOT
from eval.circular import n_rotations, rotate_sample
from eval.errors import DATA, USAGE, EvalInputError
from eval.inputs import (check_numbers, resolve_benchmark, resolve_blind, resolve_human, resolve_model,
                         resolve_settings)
from eval.parser import FAILED, ParseResult, parse_answer, parse_scores
from eval.predictions import PredictionWriter, file_sha256, manifest_conflicts, read_predictions
from eval.runlock import RunLock
from eval.prompt import build_extract_prompt, build_prompt, template_fingerprint
from eval.settings import ProtocolConfig, Query, plan_queries, primary_setting, subset_key
from eval.summary import summarize, write_summary


@dataclass(frozen=True)
class PlannedQuery:
    """One line-to-be of predictions.jsonl: a query under one option rotation."""
    key: str
    sample: Sample  # the original (unrotated) sample
    query: Query
    rotation: int
    n_rotations: int


def plan_run(bench: Benchmark, settings: list[str], protocol: ProtocolConfig, seed: int, circular: bool,
             limit: int | None = None) -> list[PlannedQuery]:
    """Every query of the run, in benchmark order, then setting, variant and rotation."""
    planned = []
    for sample in bench.samples[:limit]:
        n_rot = n_rotations(sample, circular)
        for q in plan_queries(sample, settings, protocol, seed):
            for rot in range(n_rot):
                key = f"{sample.id}|{q.setting}|{q.variant}|r{rot}"
                planned.append(PlannedQuery(key, sample, q, rot, n_rot))
    return planned


def build_request(bench: Benchmark, pq: PlannedQuery) -> Request:
    sample = rotate_sample(pq.sample, pq.rotation)
    views = [pq.sample.view(v) for v in pq.query.view_ids]
    request_views = [RequestView(view_id=v.view_id, position=i, image_paths=[bench.image_path(f.image) for f in v.frames],
                                 times=[f.t for f in v.frames], camera=v.camera) for i, v in enumerate(views, 1)]
    return Request(key=pq.key, sample=sample, setting=pq.query.setting, views=request_views,
                   prompt=build_prompt(sample, views))


def query_images(bench: Benchmark, pq: PlannedQuery) -> list[Path]:
    """The image files a query shows, in presentation order."""
    return [bench.image_path(f.image) for v in pq.query.view_ids for f in pq.sample.view(v).frames]


class PlanImages:
    """Content hashes of every image a plan touches (hashed once; see bench/images.py).

    ``digest`` identifies the whole set (run.json); ``of(pq)`` the images of one query, in
    order (each prediction line keeps it, so a resume notices an image changed under it)."""

    def __init__(self, bench: Benchmark, planned: list[PlannedQuery]):
        self.paths = {pq.key: [str(p.resolve()) for p in query_images(bench, pq)] for pq in planned}
        unique = list(dict.fromkeys(p for paths in self.paths.values() for p in paths))
        info = inspect_images(unique, root=bench.root, decode=False)
        self.sha = {p: info[p].sha256 or "unreadable" for p in unique}
        root = bench.root.resolve()
        self.digest = images_digest((os.path.relpath(p, root), self.sha[p]) for p in unique)
        self.count = len(unique)

    def of(self, key: str) -> str:
        return hashlib.sha256("\n".join(self.sha[p] for p in self.paths[key]).encode()).hexdigest()[:16]


def changed_images(done: dict[str, dict], images: PlanImages) -> list[str]:
    """Keys of finished lines whose query's images differ from the ones they were answered on."""
    return [key for key, rec in done.items() if key in images.paths and rec.get("images") not in (None, images.of(key))]


def _read_response(request: Request, response: Response) -> ParseResult:
    if response.scores is not None:
        return parse_scores(response.scores, request.options)
    return parse_answer(response.text, request.options)


def _run_fallback(fallback: ModelAdapter, pairs: list[tuple[Request, Response]]) -> list[tuple[ParseResult, str | None]]:
    """Ask the fallback extractor to map each unread answer to a letter (rules only on its output)."""
    requests = [Request(key=r.key + "|extract", sample=r.sample, setting="extract", views=[],
                        prompt=build_extract_prompt(r.sample, resp.text or "")) for r, resp in pairs]
    responses = fallback.generate(requests)
    out = []
    for req, resp in zip(requests, responses):
        parsed = _read_response(req, resp)
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
        "letter": parsed.letter, "method": parsed.method, "failed": parsed.failed, "correct": correct,
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


def answer_batch(bench: Benchmark, model: ModelAdapter, batch: list[PlannedQuery],
                 fallback: ModelAdapter | None = None, images: PlanImages | None = None) -> list[dict]:
    """Ask the model one batch; parse; ask the fallback only for what the rules could not read."""
    requests = [build_request(bench, pq) for pq in batch]
    responses = model.generate(requests)
    if len(responses) != len(requests):
        raise RuntimeError(f"model {model.name!r} returned {len(responses)} responses for {len(requests)} requests")
    parsed = [_read_response(r, resp) for r, resp in zip(requests, responses)]
    fallback_raw: dict[int, str | None] = {}
    failed_idx = [i for i, p in enumerate(parsed) if p.failed and responses[i].text]
    if fallback is not None and failed_idx:
        results = _run_fallback(fallback, [(requests[i], responses[i]) for i in failed_idx])
        for i, (p, raw) in zip(failed_idx, results):
            parsed[i], fallback_raw[i] = p, raw
    records = [make_record(pq, req, resp, p, fallback_raw.get(i))
               for i, (pq, req, resp, p) in enumerate(zip(batch, requests, responses, parsed))]
    if images is not None:
        for rec in records:
            rec["images"] = images.of(rec["key"])
    return records


def _batches(items: list, size: int) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def evaluate(bench: str | Path | Benchmark, model: str | ModelAdapter, out_dir: str | Path,
             settings: str | list[str] | None = None, seed: int = 0, circular: bool = False,
             limit: int | None = None, batch_size: int = 8, model_args: dict[str, Any] | None = None,
             protocol: ProtocolConfig | None = None, fallback: str | ModelAdapter | None = None,
             fallback_args: dict[str, Any] | None = None, n_boot: int = DEFAULT_N_BOOT,
             blind_run: str | Path | None = None, human_json: str | Path | None = None,
             progress: bool = True, plots: bool = True, extra_problems: list[str] | None = None,
             wait: bool = False) -> dict:
    """Evaluate a model on a benchmark with the full protocol and write the run to ``out_dir``.

    Args:
        bench: benchmark folder / file, or a loaded Benchmark.
        model: a registered adapter name (with ``model_args``) or an adapter instance.
        out_dir: run folder: predictions.jsonl, run.json, summary.json, report.md, *.png.
        settings: "+0,+1,-1" or a list; None = every setting (+0..+3, -1, all) that applies.
        seed: seeds view orders, the seeded -1 choice and the bootstrap.
        circular: ask every rotation of the non-NOTA options; a sample counts if all are right.
        limit: only the first ``limit`` samples.
        batch_size: requests per ``generate`` call (and per flush).
        protocol: K_T per subset and the -1 mode; default ProtocolConfig().
        fallback: adapter (name or instance) that maps unreadable answers to a letter.
        n_boot: bootstrap replicates for the 95 % intervals.
        blind_run / human_json: reference rows for the CVBench-style table.
        extra_problems: problems found by a caller (the CLI) to report together with ours.
        wait: when another run holds ``out_dir``, wait for it instead of failing.
    Returns:
        The summary dict (also written to out_dir/summary.json; keys in eval/README.md).
    Raises:
        EvalInputError: an input is invalid (nothing was written to out_dir), or another run
            holds out_dir and ``wait`` is False.
        RunError: the model's service or a file failed mid-run; finished answers are kept.
    """
    protocol = protocol or ProtocolConfig()
    out_dir = Path(out_dir)
    usage = list(extra_problems or [])
    names, p = resolve_settings(settings, protocol)
    usage += p
    usage += check_numbers(limit, batch_size, n_boot, protocol.max_extra)
    adapter, p, d = resolve_model(model, model_args)
    usage += p
    data: list[str] = list(d)
    fallback_adapter, p, d = resolve_model(fallback, fallback_args, flag="--fallback")
    usage += p
    data += d
    benchmark, p = resolve_benchmark(bench)
    data += p
    blind, p = resolve_blind(blind_run)
    data += p
    human, p = resolve_human(human_json)
    data += p
    manifest = None
    if benchmark is not None and adapter is not None and not usage:
        manifest = {
            "bench": str(benchmark.root.resolve()), "bench_sha256": file_sha256(benchmark.file),
            "model": adapter.name or type(adapter).__name__, "model_args": adapter.args_dict(),
            "seed": seed, "circular": circular, "protocol": protocol.to_dict(), "prompt": template_fingerprint(),
            "fallback": None if fallback_adapter is None else
            {"model": fallback_adapter.name, "args": fallback_adapter.args_dict()},
        }
        data += [f"ERROR --out {m}" for m in manifest_conflicts(out_dir, manifest)]
    if usage or data:
        raise EvalInputError(usage + data, USAGE if usage else DATA)
    assert benchmark is not None and adapter is not None and manifest is not None

    planned = plan_run(benchmark, names, protocol, seed, circular, limit)
    images = PlanImages(benchmark, planned)
    manifest["images_sha256"], manifest["n_images"] = images.digest, images.count
    with RunLock(out_dir, wait=wait):
        # Checked again under the lock: a run that held the folder may have written it meanwhile.
        problems = [f"ERROR --out {m}" for m in manifest_conflicts(out_dir, manifest)]
        done = read_predictions(out_dir)
        changed = changed_images(done, images)
        if changed:
            problems.append(f"ERROR --out {out_dir}: {len(changed)} finished answer(s) were given on images that "
                            f"have changed since (first: {changed[0]}); use a new --out folder")
        if problems:
            raise EvalInputError(problems, DATA)
        todo = [pq for pq in planned if pq.key not in done]
        with PredictionWriter(out_dir, manifest) as writer:
            if todo:
                adapter.prepare(benchmark)
                if fallback_adapter is not None:
                    fallback_adapter.prepare(benchmark)
            bar = tqdm(total=len(planned), initial=len(planned) - len(todo), unit="query", file=sys.stderr,
                       disable=not progress, desc=f"eval {manifest['model']}")
            for batch in _batches(todo, batch_size):
                writer.append(answer_batch(benchmark, adapter, batch, fallback_adapter, images))
                bar.update(len(batch))
            bar.close()
        return finish_run(out_dir, planned, manifest, names, limit, protocol, n_boot, blind, human, plots)


def finish_run(out_dir: Path, planned: list[PlannedQuery], manifest: dict, settings: list[str],
               limit: int | None, protocol: ProtocolConfig, n_boot: int, blind: dict | None,
               human: dict | None, plots: bool) -> dict:
    """Summary, report and plots from the finished prediction lines of this invocation's plan."""
    from eval.report import render_report

    done = read_predictions(out_dir)
    records = [done[pq.key] for pq in planned if pq.key in done]
    header = {k: manifest[k] for k in ("bench", "model", "model_args", "seed", "circular", "protocol", "prompt")}
    header.update({"settings_requested": settings, "limit": limit})
    summary = summarize(records, protocol.max_extra, n_boot=n_boot, seed=manifest["seed"], header=header)
    summary["reference_rows"] = {"blind": blind, "human": human}
    write_summary(summary, out_dir)
    atomic_write_text(out_dir / "report.md", render_report(summary))
    if plots:
        from eval.plots import save_plots
        save_plots(summary, out_dir)
    return summary
