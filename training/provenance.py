"""checkpoints/<run>/provenance.json: where a trained model came from.

Written by global rank 0 when the run starts (time, code, versions, host, the launch) and
completed when it ends (finish time, wall seconds, the devices the ranks used, the hash of
every image the run read: train, val and test splits). The final evaluation's own run.json
(checkpoints/<run>/eval/run.json) holds the evaluator's provenance.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch

from common.atomic import atomic_write_json
from bench.format import load_benchmark
from bench.images import images_digest, inspect_images
from common.provenance import environment, utc_now
from training.config import TrainConfig

PROVENANCE = "provenance.json"


def split_images_digest(bench_dir: str | Path, splits: tuple[str, ...] = ("train", "val", "test")) -> dict:
    """SHA-256 over every image of the splits (cached by size and mtime; see bench/images.py)."""
    pairs, count = [], 0
    for split in splits:
        root = Path(bench_dir) / split
        if not root.is_dir():
            continue
        bench = load_benchmark(root, check_images=False)
        paths = list(dict.fromkeys(str((bench.root / f.image).resolve()) for s in bench.samples
                                   for v in s.views for f in v.frames))
        info = inspect_images(paths, root=bench.root, decode=False)
        pairs += [(f"{split}/{os.path.relpath(p, bench.root.resolve())}", info[p].sha256 or "unreadable")
                  for p in paths]
        count += len(paths)
    return {"images_sha256": images_digest(pairs), "n_images": count}


def device_facts(trainer) -> dict:
    """What the run ran on: the Trainer's launch settings and the accelerator's name."""
    root = trainer.strategy.root_device
    name = torch.cuda.get_device_name(root) if root.type == "cuda" else root.type
    return {"device": name, "accelerator": type(trainer.accelerator).__name__.removesuffix("Accelerator").lower(),
            "strategy": type(trainer.strategy).__name__, "world_size": trainer.world_size,
            "num_nodes": trainer.num_nodes, "precision": str(trainer.precision)}


def start_provenance(run_dir: Path, cfg: TrainConfig, resumed: bool) -> float:
    """Write the start record; returns the start time (time.time()) for the wall seconds."""
    path = run_dir / PROVENANCE
    previous = json.loads(path.read_text()) if resumed and path.is_file() else {}
    record = {**previous, **environment(), "created_at": previous.get("created_at") or utc_now(),
              "started_at": utc_now(), "finished_at": None, "bench_dir": str(Path(cfg.data.bench_dir).resolve())}
    record.setdefault("wall_seconds", 0.0)
    atomic_write_json(path, record)
    return time.time()


def finish_provenance(run_dir: Path, cfg: TrainConfig, trainer, started: float, entities: str) -> dict:
    """Complete the record: finish time, wall seconds (summed over resumes), devices, images hash."""
    path = run_dir / PROVENANCE
    record = json.loads(path.read_text()) if path.is_file() else {}
    record.update(device_facts(trainer))
    record.update(split_images_digest(cfg.data.bench_dir))
    record["entities"] = entities  # the perception that made the records, or the truth (the ceiling)
    record["finished_at"] = utc_now()
    record["wall_seconds"] = round((record.get("wall_seconds") or 0.0) + time.time() - started, 1)
    atomic_write_json(path, record)
    return record
