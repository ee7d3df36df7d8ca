"""Run a model through the protocol: plan queries, ask, parse, record, summarise.

``evaluate`` is the entry point for the CLI and for training code. It checks every input
first, images decoded included (nothing is written to ``out_dir`` when one is wrong), takes
the folder's run lock (one writer per folder, or per shard), then continues whatever an
earlier run of the same identity left in ``out_dir`` and never asks a finished query again.
A shard (``shard=(r, n)``) answers its part of the plan; whichever shard completes the plan
last, or ``finish``, merges the shard files and writes the summary.
"""
from __future__ import annotations

import socket
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from common.atomic import atomic_write_text
from bench.constants import DEFAULT_N_BOOT
from bench.format import Benchmark
from bench.prompt import template_fingerprint
from bench.protocol import ProtocolConfig
from common.provenance import file_sha256, utc_now
from eval.adapters.base import ModelAdapter
from eval.answering import answer_queries, make_record  # noqa: F401  (make_record: public API)
from eval.errors import DATA, USAGE, EvalInputError
from eval.inputs import (check_numbers, resolve_benchmark, resolve_blind, resolve_human, resolve_model,
                         resolve_settings)
from eval.manifest import (PlanImages, end_invocation, manifest_conflicts, read_manifest, start_invocation,
                           update_manifest)
from eval.plan import PlannedQuery, build_request, parse_shard, plan_run, query_images, shard_plan  # noqa: F401
from eval.predictions import PredictionWriter, merge_shards, read_predictions
from eval.runlock import RunLock
from eval.summary import summarize, write_summary


def identity(benchmark: Benchmark, adapter: ModelAdapter, fallback: ModelAdapter | None, seed: int,
             circular: bool, protocol: ProtocolConfig) -> dict:
    """The keys that decide whether two invocations may share a run folder."""
    return {
        "bench": str(benchmark.root.resolve()), "bench_sha256": file_sha256(benchmark.file),
        "model": adapter.name or type(adapter).__name__, "model_args": adapter.identity_args(),
        "seed": seed, "circular": circular, "protocol": protocol.to_dict(), "prompt": template_fingerprint(),
        "fallback": None if fallback is None else {"model": fallback.name, "args": fallback.identity_args()},
    }


def _ignored(adapter: ModelAdapter, fallback: ModelAdapter | None) -> set[str]:
    """Throughput arguments an older run.json may list among the identity: not compared."""
    paths = {f"model_args.{k}" for k in adapter.throughput_keys()}
    if fallback is not None:
        paths |= {f"fallback.args.{k}" for k in fallback.throughput_keys()}
    return paths


def _locks(out_dir: Path, shard: tuple[int, int] | None, wait: bool) -> list[RunLock]:
    if shard is None:
        return [RunLock(out_dir, wait=wait)]
    return [RunLock(out_dir, wait=wait, shared=True),
            RunLock(out_dir, wait=wait, name=f".lock.shard-{shard[0]}-of-{shard[1]}")]


def evaluate(bench: str | Path | Benchmark, model: str | ModelAdapter, out_dir: str | Path,
             settings: str | list[str] | None = None, seed: int = 0, circular: bool = False,
             limit: int | None = None, batch_size: int = 8, model_args: dict[str, Any] | None = None,
             protocol: ProtocolConfig | None = None, fallback: str | ModelAdapter | None = None,
             fallback_args: dict[str, Any] | None = None, n_boot: int = DEFAULT_N_BOOT,
             blind_run: str | Path | None = None, human_json: str | Path | None = None,
             progress: bool = True, plots: bool = True, extra_problems: list[str] | None = None,
             wait: bool = False, shard: str | tuple[int, int] | None = None) -> dict | None:
    """Evaluate a model on a benchmark with the full protocol and write the run to ``out_dir``.

    Args:
        bench: benchmark folder / file, or a loaded Benchmark.
        model: a registered adapter name (with ``model_args``) or an adapter instance.
        out_dir: run folder: predictions.jsonl, run.json, summary.json, report.md, *.png.
        settings: "+0,+1,-1" or a list; None = every setting (+0..+3, -1, all) that applies.
        seed: seeds view orders, the seeded -1 choice and the bootstrap.
        circular: ask every rotation of the non-NOTA options; a sample counts if all are right.
        limit: only the first ``limit`` samples.
        batch_size: requests per ``generate`` call of a batching model (an endpoint's
            concurrency is its own argument).
        protocol: K_T per subset and the -1 mode; default ProtocolConfig().
        fallback: adapter (name or instance) that maps unreadable answers to a letter.
        n_boot: bootstrap replicates for the 95 % intervals.
        blind_run / human_json: reference rows for the CVBench-style table.
        extra_problems: problems found by a caller (the CLI) to report together with ours.
        wait: when another run holds ``out_dir`` (or this shard), wait for it instead of failing.
        shard: "r/n" or (r, n): answer only the queries of shard r of n.
    Returns:
        The summary dict (also written to out_dir/summary.json; keys in eval/README.md), or
        None for a shard that is done while other shards still have queries to answer.
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
    if isinstance(shard, str):
        try:
            shard = parse_shard(shard)
        except ValueError as err:
            usage.append(f"ERROR {err}")
            shard = None
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
        manifest = identity(benchmark, adapter, fallback_adapter, seed, circular, protocol)
        data += [f"ERROR --out {m}" for m in manifest_conflicts(out_dir, manifest, _ignored(adapter, fallback_adapter))]
    if usage or data:
        raise EvalInputError(usage + data, USAGE if usage else DATA)
    assert benchmark is not None and adapter is not None and manifest is not None

    planned = plan_run(benchmark, names, protocol, seed, circular, limit)
    mine = shard_plan(planned, shard)
    images = PlanImages(benchmark, {pq.key: query_images(benchmark, pq) for pq in planned})
    manifest.update({
        "throughput_args": adapter.throughput_args(),
        "fallback_throughput_args": None if fallback_adapter is None else fallback_adapter.throughput_args(),
        "images_sha256": images.digest, "n_images": images.count,
        "plan": {"settings": names, "limit": limit, "n_boot": n_boot, "plots": plots,
                 "blind_run": None if blind_run is None else str(Path(blind_run).resolve()),
                 "human_json": None if human_json is None else str(Path(human_json).resolve())},
    })
    locks = _locks(out_dir, shard, wait)
    for lock in locks:
        lock.acquire()
    try:
        # Checked again under the lock: a run that held the folder may have written it meanwhile.
        problems = [f"ERROR --out {m}" for m in manifest_conflicts(out_dir, manifest, _ignored(adapter, fallback_adapter))]
        done = read_predictions(out_dir)
        changed = images.changed(done)
        if changed:
            problems.append(f"ERROR --out {out_dir}: {len(changed)} finished answer(s) were given on images that "
                            f"have changed since (first: {changed[0]}); use a new --out folder")
        if problems:
            raise EvalInputError(problems, DATA)
        todo = [pq for pq in mine if pq.key not in done]
        _answer(out_dir, benchmark, adapter, fallback_adapter, todo, len(mine), manifest, images, batch_size,
                shard, progress)
        if shard is None:
            summary = finish_run(out_dir, planned, manifest, names, limit, protocol, n_boot, blind, human, plots)
            update_manifest(out_dir, lambda m: m.update(finished_at=utc_now()))
            return summary
    finally:
        for lock in reversed(locks):
            lock.release()
    left = sum(pq.key not in read_predictions(out_dir) for pq in planned)
    if left:
        print(f"shard {shard[0]}/{shard[1]} done; {left} of {len(planned)} queries are still open in other shards: "
              f"the last shard to finish writes the summary (or run: python -m eval finish {out_dir})",
              file=sys.stderr)
        return None
    return finish(out_dir, wait=True)


def _answer(out_dir: Path, benchmark: Benchmark, adapter: ModelAdapter, fallback: ModelAdapter | None,
            todo: list[PlannedQuery], n_mine: int, manifest: dict, images: PlanImages, batch_size: int,
            shard: tuple[int, int] | None, progress: bool) -> None:
    """Answer ``todo``, recording this invocation (times, counts, throughput args) in run.json."""
    facts = {"started_at": utc_now(), "host": socket.gethostname(), "shard": None if shard is None else list(shard),
             "batch_size": batch_size, "throughput_args": manifest["throughput_args"], "status": "running"}
    index = start_invocation(out_dir, manifest, facts)
    started, status, writer = time.monotonic(), "failed", None
    try:
        with PredictionWriter(out_dir, shard) as writer:
            if todo:
                adapter.prepare(benchmark)
                if fallback is not None:
                    fallback.prepare(benchmark)
            name = manifest["model"] + ("" if shard is None else f" shard {shard[0]}/{shard[1]}")
            with tqdm(total=n_mine, initial=n_mine - len(todo), unit="query", file=sys.stderr,
                      disable=not progress, desc=f"eval {name}") as bar:
                answer_queries(benchmark, adapter, todo, writer, batch_size, fallback, images, bar.update)
        status = "answered"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        done = {"finished_at": utc_now(), "wall_seconds": round(time.monotonic() - started, 3), "status": status,
                "answered": 0 if writer is None else writer.written}
        try:
            end_invocation(out_dir, index, done, adapter.provenance(), finished=False)
        except OSError:
            if status == "answered":
                raise
            # the run is failing already (say, a full disk): its own error is the one to show


def finish(out_dir: str | Path, n_boot: int | None = None, plots: bool | None = None, wait: bool = False) -> dict:
    """Merge a run's shard files and write its summary, report and plots.

    Everything comes from run.json: the benchmark (whose content hash must match), the plan
    and the reference rows. Every planned query must be answered.

    Raises:
        EvalInputError: not a run folder, the benchmark changed, or queries are unanswered.
    """
    out_dir = Path(out_dir)
    try:
        manifest = read_manifest(out_dir)
        plan = manifest["plan"]
        protocol = ProtocolConfig(**manifest["protocol"])
    except FileNotFoundError:
        raise EvalInputError([f"ERROR {out_dir / 'run.json'}: missing; is {out_dir} a run folder?"], DATA) from None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise EvalInputError([f"ERROR {out_dir / 'run.json'}: unreadable or written by an older version "
                              f"({type(err).__name__}: {err})"], DATA) from None
    benchmark, problems = resolve_benchmark(manifest["bench"])
    if benchmark is not None and file_sha256(benchmark.file) != manifest.get("bench_sha256"):
        problems.append(f"ERROR {benchmark.file}: changed since the run started (bench_sha256 differs)")
    blind, p = resolve_blind(plan.get("blind_run"))
    problems += p
    human, p = resolve_human(plan.get("human_json"))
    problems += p
    if problems:
        raise EvalInputError(problems, DATA)
    planned = plan_run(benchmark, plan["settings"], protocol, manifest["seed"], manifest["circular"], plan["limit"])
    with RunLock(out_dir, wait=wait):
        done = read_predictions(out_dir)
        missing = [pq.key for pq in planned if pq.key not in done]
        if missing:
            raise EvalInputError([f"ERROR {out_dir}: {len(missing)} of {len(planned)} planned queries are unanswered "
                                  f"(first: {missing[0]}); run the missing shards first"], DATA)
        merge_shards(out_dir)
        summary = finish_run(out_dir, planned, manifest, plan["settings"], plan["limit"], protocol,
                             plan["n_boot"] if n_boot is None else n_boot, blind, human,
                             plan.get("plots", True) if plots is None else plots)
        update_manifest(out_dir, lambda m: m.update(finished_at=utc_now()))
    return summary


def finish_run(out_dir: Path, planned: list[PlannedQuery], manifest: dict, settings: list[str],
               limit: int | None, protocol: ProtocolConfig, n_boot: int, blind: dict | None,
               human: dict | None, plots: bool) -> dict:
    """Summary, report and plots from the finished prediction lines of this plan."""
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
