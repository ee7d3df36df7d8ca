"""Data parallel training: the rank-aware samplers reduce to today's single-process order,
split the data disjointly with an equal number of steps, and `python train.py` runs DDP on
two CPU processes (gloo) with ranks that see disjoint samples."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from common.config import save_config
from bench.format import load_benchmark
from bench.tiny import make_tiny_benchmark
from training.config import TrainConfig
from training.data import BucketBatchSampler, frame_count
from training.datamodule import frame_sorted_batches

warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")
ROOT = Path(__file__).resolve().parents[1]


class FakeSet:
    """What the samplers read of a ViewSetDataset."""

    def __init__(self, samples, view_sets=None):
        self.bench = type("B", (), {"samples": samples})()
        self.view_sets, self.epoch = view_sets, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return len(self.bench.samples)


def todays_batches(dataset, batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """The single-process batch order before the sampler knew about ranks (frozen reference)."""
    buckets: dict[int, list[int]] = {}
    for index in range(len(dataset)):
        buckets.setdefault(frame_count(dataset.bench.samples[index]), []).append(index)
    rng = random.Random(f"sampler/{seed}/{epoch}")
    batches = []
    for frames in sorted(buckets):
        order = list(buckets[frames])
        rng.shuffle(order)
        batches += [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return batches


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixed")
    stills = load_benchmark(make_tiny_benchmark(root / "a", n_scenes=5)).samples
    clips = load_benchmark(make_tiny_benchmark(root / "b", n_scenes=3, n_frames=3)).samples
    return FakeSet(stills + clips)


def test_one_replica_is_exactly_todays_order(mixed):
    for seed in (0, 1):
        sampler = BucketBatchSampler(mixed, batch_size=5, seed=seed)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            assert list(sampler) == todays_batches(mixed, 5, seed, epoch)
            assert len(sampler) == len(todays_batches(mixed, 5, seed, epoch))


def test_ranks_get_disjoint_batches_and_equal_step_counts(mixed):
    world = 3
    samplers = [BucketBatchSampler(mixed, batch_size=5, seed=0, num_replicas=world, rank=r) for r in range(world)]
    for s in samplers:
        s.set_epoch(2)
    per_rank = [list(s) for s in samplers]
    assert len({len(b) for b in per_rank}) == 1 and len(per_rank[0]) == len(samplers[0])
    seen = [i for batches in per_rank for b in batches for i in b]
    assert len(seen) == len(set(seen))  # no sample on two ranks
    reference = todays_batches(mixed, 5, 0, 2)
    kept = reference[: len(per_rank[0]) * world]
    assert sorted(seen) == sorted(i for b in kept for i in b)  # the global order, dealt round-robin
    assert all(len({frame_count(mixed.bench.samples[i]) for i in b}) == 1 for batches in per_rank for b in batches)


def test_validation_shards_cover_every_view_set_once(mixed):
    data = FakeSet(mixed.bench.samples, view_sets=[type("V", (), {"sample_index": i})() for i in range(len(mixed))])
    whole = frame_sorted_batches(data, 4)
    assert frame_sorted_batches(data, 4, 1, 0) == whole
    shares = [frame_sorted_batches(data, 4, 3, r) for r in range(3)]
    flat = [i for share in shares for b in share for i in b]
    assert sorted(flat) == list(range(len(mixed))) and all(shares)


@pytest.mark.slow
def test_train_py_runs_ddp_on_two_cpu_processes(synth_bench, tiny_perception, tmp_path):
    cfg = TrainConfig()
    cfg.run_name, cfg.out_dir = "ddp", str(tmp_path / "runs")
    cfg.model.width, cfg.model.heads = 16, 2
    cfg.data.bench_dir, cfg.data.generate_config = str(synth_bench), None
    cfg.data.cache_dir = str(tiny_perception.parent / "cache")
    cfg.perception.folder = str(tiny_perception)
    cfg.data.batch_size = 4  # two batches of four on each rank
    cfg.trainer.enable_progress_bar = False
    cfg.eval.settings, cfg.eval.val_settings = ["+0", "-1"], ["+0", "-1"]
    save_config(cfg, tmp_path / "tiny.yaml")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    env.pop("CROSSVIEW_RUN_DIR", None)
    proc = subprocess.run(
        [sys.executable, "train.py", "--config", str(tmp_path / "tiny.yaml"), "trainer.accelerator=cpu",
         "trainer.devices=2", "trainer.strategy=ddp", "trainer.max_epochs=1", "trainer.limit_train_batches=2",
         "trainer.callbacks=[ddp_probe:DisjointSamples]"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = tmp_path / "runs" / "ddp"
    probe = json.loads((run / "ddp_probe.json").read_text())
    assert probe["world_size"] == 2 and probe["train_disjoint"] and probe["val_disjoint"] and probe["val_complete"]
    assert all(0 < n <= 8 for n in probe["train_per_rank"])  # two batches of at most four on each rank
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["ddp"]  # one run folder, not one per rank
    provenance = json.loads((run / "provenance.json").read_text())
    assert provenance["world_size"] == 2 and provenance["finished_at"] and provenance["images_sha256"]
    assert (run / "metrics.json").is_file() and (run / "last.ckpt").is_file()
