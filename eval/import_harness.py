"""``python -m eval import {lmms-eval,vlmevalkit} FILE ... --bench DIR --out RUN``: score another
harness's raw answers with this project's parser and protocol.

The queries of ``python -m bench export lmms-eval|vlmevalkit`` carry the evaluator's query keys,
so every answer is matched to its planned query (same settings, seed and protocol as the
export; the view order the harness saw is checked against the plan). The raw text goes through
eval/parser.py, the lines are written exactly as ``python -m eval run`` writes them, and the
run is summarised the same way: an oracle's answers imported from a harness give the native
oracle run's summary. ``run.json`` names the harness under ``source``.

Queries the file does not answer are left out (a harness run with ``--limit``) and counted;
an answer to a query the plan does not have is an error (another benchmark or protocol).
"""
from __future__ import annotations

import sys
from pathlib import Path

from bench.constants import DEFAULT_N_BOOT
from bench.prompt import template_fingerprint
from bench.protocol import ProtocolConfig
from common.provenance import file_sha256
from eval.adapters.base import Response
from eval.errors import DATA, USAGE, EvalInputError
from eval.harness_files import READERS, HarnessAnswer, HarnessFileError
from eval.inputs import resolve_benchmark, resolve_settings
from eval.manifest import MANIFEST, read_manifest, update_manifest
from eval.parser import parse_answer
from eval.predictions import PredictionWriter
from eval.runner import PlannedQuery, build_request, finish_run, make_record, plan_run


def match_answers(answers: list[HarnessAnswer], planned: list[PlannedQuery]) -> tuple[dict[str, HarnessAnswer], list[str]]:
    """{query key: answer} and the problems (unknown keys, repeats, a different view order)."""
    by_key = {pq.key: pq for pq in planned}
    matched: dict[str, HarnessAnswer] = {}
    problems: list[str] = []
    for ans in answers:
        if ans.key is not None:
            pq = by_key.get(ans.key)
            if pq is None:
                problems.append(f"ERROR {ans.where}: query {ans.key!r} is not in the plan of this benchmark "
                                f"(another benchmark, --settings or protocol?)")
                continue
        elif ans.index is not None and 0 <= ans.index < len(planned):
            pq = planned[ans.index]  # VLMEvalKit dropped our key column: the export wrote plan order
        else:
            problems.append(f"ERROR {ans.where}: no `key` and no usable `index`; cannot tell which query it answers")
            continue
        if pq.key in matched:
            problems.append(f"ERROR {ans.where}: a second answer to {pq.key!r} (first at {matched[pq.key].where})")
            continue
        if ans.view_order is not None and tuple(ans.view_order) != tuple(pq.query.view_ids):
            problems.append(f"ERROR {ans.where}: {pq.key!r} was asked with views {list(ans.view_order)}, the plan "
                            f"has {list(pq.query.view_ids)}; import with the export's --seed and protocol")
            continue
        matched[pq.key] = ans
    return matched, problems


def import_harness(harness: str, files: list[str | Path], bench: str | Path, out: str | Path, model: str | None = None,
                   settings: str | list[str] | None = None, seed: int = 0, protocol: ProtocolConfig | None = None,
                   n_boot: int = DEFAULT_N_BOOT, plots: bool = True, overwrite: bool = False) -> dict:
    """Score a harness's answers into a run folder; returns the summary (also in OUT/summary.json).

    Args:
        harness: "lmms-eval" or "vlmevalkit".
        files: the harness's output files (lmms-eval: one samples file per task is fine).
        bench: the benchmark folder the export was made from.
        out: the run folder to write (run.json, predictions.jsonl, summary.json, report.md, plots).
        model: the run's model name (default: "<harness>:<first file stem>").
        settings / seed / protocol: as at export time.
    Raises:
        EvalInputError: bad arguments or files; nothing was written to ``out``.
    """
    from bench.outdir import OutDirError, check_out_dir, staged_dir
    protocol = protocol or ProtocolConfig()
    usage: list[str] = []
    if harness not in READERS:
        usage.append(f"ERROR import: unknown harness {harness!r}; one of {', '.join(READERS)}")
    names, p = resolve_settings(settings, protocol)
    usage += p
    paths = [Path(f) for f in files]
    data = [f"ERROR {f}: no such file" for f in paths if not f.is_file()]
    benchmark, p = resolve_benchmark(bench)
    data += p
    if usage or data:
        raise EvalInputError(usage + data, USAGE if usage else DATA)
    assert benchmark is not None
    answers: list[HarnessAnswer] = []
    try:
        for f in paths:
            answers += READERS[harness](f)
    except HarnessFileError as err:
        raise EvalInputError(err.problems, DATA) from None
    except (OSError, ValueError, KeyError) as err:
        raise EvalInputError([f"ERROR {harness} file: cannot read ({type(err).__name__}: {err})"], DATA) from None
    planned = plan_run(benchmark, names, protocol, seed, circular=False)
    matched, problems = match_answers(answers, planned)
    if not matched and not problems:
        problems.append(f"ERROR {', '.join(map(str, paths))}: no answers found")
    out = Path(out)
    source = {"harness": harness, "files": [str(f.resolve()) for f in paths],
              "files_sha256": [file_sha256(f) for f in paths], "answered": len(matched), "planned": len(planned)}
    previous = read_manifest(out).get("source", {}) if (out / MANIFEST).is_file() else {}
    same_import = isinstance(previous, dict) and previous.get("harness") == harness
    problems += [f"ERROR --out {p}" for p in check_out_dir(out, overwrite or same_import)]
    if problems:
        raise EvalInputError(problems, DATA)
    manifest = {
        "bench": str(benchmark.root.resolve()), "bench_sha256": file_sha256(benchmark.file),
        "model": model or f"{harness}:{paths[0].stem}", "model_args": {}, "seed": seed, "circular": False,
        "protocol": protocol.to_dict(), "prompt": template_fingerprint(), "fallback": None, "source": source,
    }
    answered = [pq for pq in planned if pq.key in matched]
    records = []
    for pq in answered:
        request = build_request(benchmark, pq)
        raw = matched[pq.key].raw
        records.append(make_record(pq, request, Response(text=raw), parse_answer(raw, request.options)))
    if len(answered) < len(planned):
        print(f"{harness}: {len(answered)} of {len(planned)} planned queries answered; the summary covers those",
              file=sys.stderr)
    try:
        with staged_dir(out, overwrite=True) as tmp:
            update_manifest(tmp, lambda m: m.update(manifest))
            with PredictionWriter(tmp) as writer:
                writer.append(records)
            summary = finish_run(tmp, answered, manifest, names, None, protocol, n_boot, None, None, plots)
    except OutDirError as err:
        raise EvalInputError([f"ERROR --out {err}"], DATA) from None
    return summary
