"""What the run browser shows: the benchmark, the runs, and one entry per query.

Runs are compared on one benchmark only: every run's ``bench_sha256`` must be the sha256 of
the benchmark file the browser reads, else the browser refuses to build (the views, options
and answers it would draw would not be the ones the model saw).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench.format import Benchmark, Sample
from bench.protocol import setting_sort_key
from common.provenance import file_sha256
from eval.circular import rotate_sample
from eval.errors import DATA, USAGE, EvalInputError
from eval.inputs import resolve_benchmark
from eval.manifest import MANIFEST, read_manifest
from eval.predictions import PREDICTIONS, read_predictions
from eval.summary import SUMMARY, read_summary
from eval.taxonomy import error_type

RUN_LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
RIGHT, WRONG, UNREAD, MISSING = "right", "wrong", "unread", "missing"
CORRECT_BUCKET = "correct"


@dataclass
class RunData:
    label: str  # "A", "B", ...: the run's column and its name in the filters
    path: Path
    manifest: dict
    summary: dict | None
    records: dict[str, dict]  # query key -> prediction line

    @property
    def model(self) -> str:
        return str(self.manifest.get("model", "?"))

    @property
    def source(self) -> str | None:
        src = self.manifest.get("source")
        return src.get("harness") if isinstance(src, dict) else None


@dataclass
class QueryEntry:
    """One card: a query of the plan (sample x setting x variant x rotation) and every run's line."""
    number: int  # card number, unique in the browser (anchor q<number>)
    key: str
    sample_index: int  # the sample's position in the benchmark (its page samples/<index>.html)
    sample: Sample  # the sample as asked (options rotated under --circular)
    setting: str
    variant: str
    rotation: int
    view_order: list[str]  # presentation order of the first run that has this query
    records: list[dict | None] = field(default_factory=list)  # one per run, None when a run lacks it


def correctness(record: dict | None) -> str:
    if record is None:
        return MISSING
    if record.get("failed"):
        return UNREAD
    return RIGHT if record.get("correct") else WRONG


def bucket(record: dict | None) -> str:
    """The failure-taxonomy bucket of a line (eval/taxonomy.py), "correct" or "missing"."""
    if record is None:
        return MISSING
    return error_type(record) or CORRECT_BUCKET


def load_runs(run_dirs: list[str | Path], bench: str | Path | None) -> tuple[Benchmark, list[RunData]]:
    """The benchmark and the runs; EvalInputError (nothing written) on any problem.

    ``bench`` defaults to the folder the first run's manifest names.
    """
    problems: list[str] = []
    runs: list[RunData] = []
    if len(run_dirs) > len(RUN_LABELS):
        raise EvalInputError([f"ERROR browse: at most {len(RUN_LABELS)} runs"], USAGE)
    for label, d in zip(RUN_LABELS, run_dirs):
        d = Path(d)
        missing = [n for n in (MANIFEST, PREDICTIONS) if not (d / n).is_file()]
        if missing:
            problems.append(f"ERROR {d}: not a run folder (missing {', '.join(missing)})")
            continue
        summary = read_summary(d) if (d / SUMMARY).is_file() else None
        runs.append(RunData(label, d, read_manifest(d), summary, read_predictions(d)))
    if problems:
        raise EvalInputError(problems, DATA)
    if bench is None:
        bench = runs[0].manifest.get("bench")
        if not bench:
            raise EvalInputError([f"ERROR {runs[0].path}: run.json names no benchmark; pass --bench"], USAGE)
    benchmark, problems = resolve_benchmark(bench)
    if benchmark is None:
        raise EvalInputError(problems, DATA)
    sha = file_sha256(benchmark.file)
    for run in runs:
        if run.manifest.get("bench_sha256") != sha:
            problems.append(f"ERROR {run.path}: evaluated a different benchmark: its bench_sha256 "
                            f"{str(run.manifest.get('bench_sha256'))[:12]} is not {sha[:12]} of {benchmark.file}")
    if problems:
        raise EvalInputError(problems, DATA)
    return benchmark, runs


def build_entries(benchmark: Benchmark, runs: list[RunData]) -> list[QueryEntry]:
    """Every query any run answered, in benchmark order, then setting, variant and rotation."""
    index = {s.id: i for i, s in enumerate(benchmark.samples)}
    first: dict[str, dict] = {}
    for run in runs:
        for key, rec in run.records.items():
            if rec.get("sample_id") in index:
                first.setdefault(key, rec)
    order = sorted(first, key=lambda k: (index[first[k]["sample_id"]], setting_sort_key(first[k]["setting"]),
                                          first[k].get("variant", ""), first[k].get("rotation", 0)))
    entries = []
    for number, key in enumerate(order):
        rec = first[key]
        i = index[rec["sample_id"]]
        sample = rotate_sample(benchmark.samples[i], int(rec.get("rotation", 0)))
        entries.append(QueryEntry(number, key, i, sample, rec["setting"], rec.get("variant", ""),
                                  int(rec.get("rotation", 0)), list(rec.get("view_order") or []),
                                  [run.records.get(key) for run in runs]))
    return entries


def facet_counts(entries: list[QueryEntry], run: int = 0) -> dict[str, dict[str, int]]:
    """{facet: {value: n}} over the cards, correctness and bucket for run ``run``."""
    facets: dict[str, dict[str, int]] = {"correct": {}, "bucket": {}, "task": {}, "setting": {}, "subset": {}}

    def add(facet: str, value: str) -> None:
        facets[facet][value] = facets[facet].get(value, 0) + 1

    for e in entries:
        add("correct", correctness(e.records[run]))
        add("bucket", bucket(e.records[run]))
        add("task", e.sample.task)
        add("setting", e.setting)
        add("subset", e.sample.subset or "none")
    facets["setting"] = dict(sorted(facets["setting"].items(), key=lambda kv: setting_sort_key(kv[0])))
    for name in ("task", "subset"):
        facets[name] = dict(sorted(facets[name].items()))
    facets["bucket"] = dict(sorted(facets["bucket"].items(), key=lambda kv: (kv[0] != CORRECT_BUCKET, -kv[1], kv[0])))
    return facets
