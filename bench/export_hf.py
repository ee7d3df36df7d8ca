"""``python -m bench export hf DIR --out OUT``: a benchmark as a Hugging Face dataset (parquet).

Two configs, one parquet folder each, split by the benchmark's own splits:

- ``samples``: one row per sample, lossless. Scalar fields are columns; nested ones (views
  with cameras, distractors, evidence, marks, meta) are JSON strings; ``images`` holds every
  frame's file bytes in view order and ``image_paths`` their relative paths, so
  ``python -m bench import hf --preset generic`` rebuilds the same benchmark byte for byte.
- ``queries``: one row per planned query of the protocol (+0..+3, -1, all): the views in
  presentation order, the unified interleaved prompt, and the images in the order of its
  ``<image>`` placeholders. Harness bridges (lmms-eval) read this config.

Images keep their original file bytes (no re-encoding). The dataset card (README.md) carries
the YAML the Hub reads: configs, features, task categories, license. Nothing is written to
OUT unless every split was converted (bench/outdir.py).

The queries config plans its queries with the protocol (bench/protocol.py) and words them with
the unified prompt (bench/prompt.py), the same functions the evaluator calls.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from bench.constants import K_T
from bench.format import BENCHMARK_FILES, Benchmark, Sample, load_benchmark, sample_to_dict
from bench.prompt import build_prompt
from bench.protocol import ProtocolConfig, Query, parse_settings, plan_queries, query_key

SPLIT_ORDER = ("train", "validation", "val", "dev", "test")
SAMPLES, QUERIES = "samples", "queries"
DEFAULT_SHARD_MB = 500  # the Hub's viewer and loaders work best with parquet files of a few hundred MB
EXPORT_MARKER = "README.md"


@dataclass
class ExportConfig:
    """What ``export hf`` writes; every field has a CLI flag."""
    name: str = ""  # pretty name on the card; default: the folder name
    license: str = "apache-2.0"  # the card's license field (an SPDX-like Hub id, or "other")
    settings: list[str] | None = None  # settings of the queries config; None = every one that applies
    seed: int = 0  # view-order seed, as `python -m eval run --seed`
    max_extra: dict[str, int] = field(default_factory=lambda: dict(K_T))  # K_T per subset
    minus_one: str = ProtocolConfig().minus_one
    shard_mb: int = DEFAULT_SHARD_MB


def find_splits(path: str | Path) -> list[tuple[str, Path]]:
    """(split name, benchmark folder) pairs: DIR itself, or the benchmark folders directly in it.

    A folder named like a split (train, val, test, ...) gives that split; any other single
    benchmark is exported as ``test``.
    """
    path = Path(path)
    if path.is_file() or any((path / f).is_file() for f in BENCHMARK_FILES):
        folder = path.parent if path.is_file() else path
        return [(split_name(folder.name), folder)]
    subs = sorted((d for d in path.iterdir() if d.is_dir() and any((d / f).is_file() for f in BENCHMARK_FILES)),
                  key=lambda d: (SPLIT_ORDER.index(d.name) if d.name in SPLIT_ORDER else len(SPLIT_ORDER), d.name))
    if not subs:
        raise FileNotFoundError(f"{path}: no {' or '.join(BENCHMARK_FILES)} in it or in its subfolders")
    names = [split_name(d.name) if len(subs) == 1 else re.sub(r"\W", "_", d.name) for d in subs]
    return list(zip(names, subs))


def split_name(folder_name: str) -> str:
    return folder_name if folder_name in SPLIT_ORDER else "test"


# ---------------------------------------------------------------- features


def samples_features():
    from datasets import Features, Image, List, Value
    string = Value("string")
    return Features({
        "id": string, "task": string, "subset": string, "axis": string, "granularity": string, "scene": string,
        "question": string, "options": List(string), "answer": string,
        "gt_views": List(string), "extra_views": List(string),
        "views_json": string, "distractors_json": string, "evidence_json": string, "marks_json": string,
        "meta_json": string, "image_paths": List(string), "images": List(Image()),
    })


def queries_features():
    from datasets import Features, Image, List, Value
    string = Value("string")
    return Features({
        "key": string, "sample_id": string, "setting": string, "variant": string,
        "task": string, "subset": string, "axis": string, "granularity": string, "scene": string,
        "question": string, "options": List(string), "answer": string, "distractors_json": string,
        "view_ids": List(string), "view_roles": List(string), "view_frame_times": List(List(Value("float64"))),
        "image_views": List(string), "images": List(Image()), "prompt": string,
        "bench_sha256": string, "seed": Value("int64"),
    })


# ---------------------------------------------------------------- rows


def _image(bench: Benchmark, rel: str) -> dict:
    return {"bytes": bench.image_path(rel).read_bytes(), "path": rel}


def sample_row(bench: Benchmark, sample: Sample) -> dict:
    """The ``samples`` row of one sample (lossless)."""
    d = sample_to_dict(sample)
    rels = [f["image"] for v in d["views"] for f in v["frames"]]
    return {
        "id": d["id"], "task": d["task"], "subset": d["subset"], "axis": d["axis"],
        "granularity": d["granularity"], "scene": d["scene"], "question": d["question"],
        "options": d["options"], "answer": d["answer"], "gt_views": d["gt_views"], "extra_views": d["extra_views"],
        "views_json": json.dumps(d["views"]), "distractors_json": json.dumps(d["distractors"]),
        "evidence_json": json.dumps(d["evidence"]), "marks_json": json.dumps(d["marks"]),
        "meta_json": json.dumps(d["meta"]), "image_paths": rels, "images": [_image(bench, r) for r in rels],
    }


def view_role(sample: Sample, view_id: str) -> str:
    """"gt" for a V_GT view, "extra" for one of the +k pool, else "view"."""
    if view_id in sample.gt_views:
        return "gt"
    return "extra" if view_id in sample.extra_views else "view"


def query_rows(bench: Benchmark, cfg: ExportConfig, bench_sha256: str) -> Iterator[dict]:
    """One ``queries`` row per planned query, in the evaluator's plan order (keys match its runs
    without ``--circular``: one rotation, the options as stored)."""
    protocol = ProtocolConfig(max_extra=dict(cfg.max_extra), minus_one=cfg.minus_one)
    settings = parse_settings(cfg.settings)
    for sample in bench.samples:
        for query in plan_queries(sample, settings, protocol, cfg.seed):
            yield query_row(bench, sample, query, bench_sha256, cfg.seed)


def query_row(bench: Benchmark, sample: Sample, query: Query, bench_sha256: str, seed: int) -> dict:
    """The ``queries`` row of one query (no rotation: the options as stored)."""
    views = [sample.view(v) for v in query.view_ids]
    return {
        "key": query_key(sample.id, query.setting, query.variant), "sample_id": sample.id,
        "setting": query.setting, "variant": query.variant,
        "task": sample.task, "subset": sample.subset, "axis": sample.axis, "granularity": sample.granularity,
        "scene": sample.scene, "question": sample.question, "options": list(sample.options),
        "answer": sample.answer, "distractors_json": json.dumps(sample.distractors),
        "view_ids": [v.view_id for v in views], "view_roles": [view_role(sample, v.view_id) for v in views],
        "view_frame_times": [[f.t for f in v.frames] for v in views],
        "image_views": [v.view_id for v in views for _ in v.frames],
        "images": [_image(bench, f.image) for v in views for f in v.frames],
        "prompt": build_prompt(sample, views), "bench_sha256": bench_sha256, "seed": seed,
    }


# ---------------------------------------------------------------- writing


def _row_bytes(row: dict) -> int:
    return sum(len(im["bytes"]) for im in row.get("images", [])) + 2048


def write_shards(rows: Iterable[dict], features, folder: Path, split: str, shard_mb: int) -> tuple[int, int]:
    """Write rows to ``folder/{split}-0000i-of-0000n.parquet``; returns (rows, bytes written)."""
    from datasets import Dataset
    from datasets.utils.logging import disable_progress_bar, enable_progress_bar, is_progress_bar_enabled
    folder.mkdir(parents=True, exist_ok=True)
    parts: list[Path] = []
    batch: list[dict] = []
    size, n_rows = 0, 0

    def flush() -> None:
        part = folder / f".{split}-{len(parts):05d}.parquet"
        bars = is_progress_bar_enabled()
        disable_progress_bar()  # one bar per shard is noise
        try:
            Dataset.from_list(batch, features=features).to_parquet(str(part))
        finally:
            if bars:
                enable_progress_bar()
        parts.append(part)

    for row in rows:
        batch.append(row)
        size += _row_bytes(row)
        n_rows += 1
        if size >= shard_mb * 2**20:
            flush()
            batch, size = [], 0
    if batch or not parts:
        flush()
    n_bytes = 0
    for i, part in enumerate(parts):
        n_bytes += part.stat().st_size
        part.rename(folder / f"{split}-{i:05d}-of-{len(parts):05d}.parquet")
    return n_rows, n_bytes


def export_hf(path: str | Path, out: str | Path, cfg: ExportConfig | None = None, overwrite: bool = False) -> dict:
    """Export a benchmark (or its train/val/test folders) as a Hub dataset folder.

    Args:
        path: a benchmark folder, or a folder of split folders (``bench generate`` output).
        out: the dataset folder to write (README.md, samples/, queries/).
        cfg: names, license, protocol of the queries config, shard size.
        overwrite: replace a non-empty ``out`` that is not an earlier export.
    Returns:
        {"splits": {split: {"samples": (rows, bytes), "queries": (rows, bytes)}}, "out": str}
    """
    from bench.hf_card import write_card
    from bench.outdir import staged_dir
    from common.provenance import file_sha256
    cfg = cfg or ExportConfig()
    splits = find_splits(path)
    benches = [(name, load_benchmark(folder)) for name, folder in splits]
    counts: dict[str, dict[str, tuple[int, int]]] = {}
    with staged_dir(out, overwrite=overwrite, marker=EXPORT_MARKER) as tmp:
        for name, bench in benches:
            sha = file_sha256(bench.file)
            counts[name] = {
                SAMPLES: write_shards((sample_row(bench, s) for s in bench.samples), samples_features(),
                                      tmp / SAMPLES, name, cfg.shard_mb),
                QUERIES: write_shards(query_rows(bench, cfg, sha), queries_features(), tmp / QUERIES, name,
                                      cfg.shard_mb),
            }
        title = cfg.name or (Path(path).resolve().name if len(splits) > 1 else benches[0][1].name)
        write_card(tmp / "README.md", title, cfg, counts,
                   {SAMPLES: samples_features(), QUERIES: queries_features()}, benches)
    return {"splits": counts, "out": str(out)}

