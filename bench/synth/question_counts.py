"""Questions per task and per scene of generated benchmarks, side by side:
``python -m bench.synth.question_counts DIR [DIR ...] [--split train] [--json]``.

Per scene means over all scenes of the split and axis (those without a question included),
counted from the generator config the split records, so a sampled and a dense benchmark of the
same scenes divide by the same numbers.
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from common.config import from_dict
from bench.synth.config import SynthConfig
from bench.synth.generate import scene_splits
from bench.synth.tasks import TASKS


def split_scenes(cfg: SynthConfig, split: str) -> dict[str, int]:
    """Scenes of ``split`` per axis (spatial, temporal) under ``cfg``."""
    spatial = scene_splits(cfg, extra_train=cfg.extra_train_scenes)
    temporal = scene_splits(cfg, cfg.temporal.n_scenes, tag=5, extra_train=cfg.temporal.extra_train_scenes)
    return {"spatial": spatial.count(split), "temporal": temporal.count(split)}


def question_counts(root: str | Path, split: str = "train") -> dict:
    """``{"scenes": {axis: n}, "by_task": {task: {"questions": n, "per_scene": x}}, "questions": n}``
    for ``root/split`` (a generated benchmark; empty counts when the split has no folder)."""
    path = Path(root) / split / "benchmark.json"
    if not path.is_file():
        return {"scenes": {}, "by_task": {}, "questions": 0}
    doc = json.loads(path.read_text())
    scenes = split_scenes(from_dict(SynthConfig, doc["config"]), split)
    counts = Counter(s["task"] for s in doc["samples"])
    by_task = {t: {"questions": counts[t], "per_scene": round(counts[t] / max(scenes[TASKS[t].axis], 1), 3)}
               for t in TASKS if counts[t]}
    return {"scenes": scenes, "by_task": by_task, "questions": sum(counts.values())}


def format_counts(reports: dict[str, dict]) -> str:
    """One row per task, per benchmark its questions and questions per scene."""
    names = list(reports)
    tasks = [t for t in TASKS if any(t in r["by_task"] for r in reports.values())]
    head = f"{'task':<24}" + "".join(f"{n[-22:]:>24}" for n in names)
    lines = [head, f"{'scenes (spatial/temporal)':<24}" + "".join(
        f"{'{}/{}'.format(r['scenes'].get('spatial', 0), r['scenes'].get('temporal', 0)):>24}"
        for r in reports.values())]
    for t in tasks:
        cells = [r["by_task"].get(t, {"questions": 0, "per_scene": 0.0}) for r in reports.values()]
        lines.append(f"{t:<24}" + "".join(f"{c['questions']:>14} {c['per_scene']:>7.2f}/sc" for c in cells))
    lines.append(f"{'total':<24}" + "".join(f"{r['questions']:>24}" for r in reports.values()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.synth.question_counts", description=__doc__.split("\n")[0])
    p.add_argument("dirs", nargs="+", help="generated benchmark folders (holding train/, val/, test/)")
    p.add_argument("--split", default="train", choices=("train", "val", "test"))
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = p.parse_args(argv)
    reports = {d: question_counts(d, args.split) for d in args.dirs}
    print(json.dumps(reports, indent=1) if args.json else format_counts(reports))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
