"""The LightningDataModule: benchmark splits -> cached features -> view-set batches.

``prepare_data`` (one process per node, before the others start reading) generates the
benchmark if it is missing and encodes every image the run needs into the feature cache;
``setup`` only loads. Batches are split over the ranks of a distributed run by our own
samplers (Lightning's DistributedSampler cannot wrap a bucketed batch sampler): training
batches round-robin with an equal count per rank, validation view sets in contiguous
frame-sorted shares, so every view set is seen by exactly one rank.
"""
from __future__ import annotations

import functools
from pathlib import Path

import lightning as L
from torch.utils.data import DataLoader

from bench.format import Benchmark, load_benchmark
from bench.protocol import ProtocolConfig, plan_queries
from inputs.features import FeatureCache, FeatureTable
from inputs.items import ViewSet, collate, frame_count, split_images
from training.config import TrainConfig
from training.data import BucketBatchSampler, ViewSetDataset

SPLITS = ("train", "val", "test")

def ensure_benchmark(cfg: TrainConfig) -> Path:
    """The benchmark folder; generated from ``data.generate_config`` when a split is missing."""
    root = Path(cfg.data.bench_dir)
    if all((root / s / "benchmark.json").is_file() or (root / s / "benchmark.jsonl").is_file() for s in SPLITS):
        return root
    if not cfg.data.generate_config:
        raise FileNotFoundError(f"{root} lacks a train/val/test split and data.generate_config is empty")
    from common.config import load_config
    from bench.synth.config import SynthConfig
    from bench.synth.generate import generate
    synth_cfg = load_config(SynthConfig, cfg.data.generate_config)  # a bad file: ConfigError naming it
    print(f"[train] generating the synthetic benchmark into {root} ({cfg.data.generate_config}) ...", flush=True)
    try:
        summary = generate(synth_cfg, root)
    except FileExistsError:  # generate() refuses before writing anything
        raise FileExistsError(f"{root} exists but lacks a train/val/test split; remove it to generate the benchmark "
                              f"there, or point data.bench_dir elsewhere") from None
    print(f"[train] generated {summary['n_questions']} questions, {summary['unique_images']} images "
          f"in {summary['seconds']} s", flush=True)
    return root


def check_mark_facts(cfg: TrainConfig, train: Benchmark) -> None:
    """With the mark-fact head trained (model.entity.fact_head, loss.mark_facts > 0), the train
    split must carry the generator's per-mark records, or the head would learn nothing.

    Raises:
        ValueError: no marked training sample has ``meta.mark_facts``.
    """
    if not (cfg.model.entity.fact_head and cfg.loss.mark_facts > 0):
        return
    marked = [s for s in train.samples if s.marks]
    if marked and not any("mark_facts" in (s.meta or {}) for s in marked):
        raise ValueError(f"{train.root}: model.entity.fact_head is trained by loss.mark_facts, but no marked "
                         f"sample of the split has meta.mark_facts (a benchmark generated before the generator "
                         f"recorded them): generate it again, e.g. python -m bench generate --config "
                         f"{cfg.data.generate_config or 'configs/bench/default.yaml'} --out <new folder>")


def protocol_view_sets(bench: Benchmark, settings: list[str], seed: int) -> list[ViewSet]:
    """The evaluator's view sets (same settings, same seeded order) as ViewSets."""
    index = {s.id: i for i, s in enumerate(bench.samples)}
    out = []
    for sample in bench.samples:
        for query in plan_queries(sample, settings, ProtocolConfig(), seed):
            out.append(ViewSet(index[sample.id], query.view_ids, query.setting, variant=query.variant))
    return out


def frame_sorted_batches(dataset: ViewSetDataset, batch_size: int, num_replicas: int = 1,
                         rank: int = 0) -> list[list[int]]:
    """Fixed evaluation batches of one rank, grouped by frame count (see BucketBatchSampler).

    The frame-sorted view sets are cut into ``num_replicas`` contiguous shares whose sizes
    differ by at most one, so every rank has work whenever there are as many view sets as
    ranks; one replica gives the single-process batches."""
    sets = dataset.view_sets or []
    order = sorted(range(len(sets)), key=lambda i: frame_count(dataset.bench.samples[sets[i].sample_index]))
    per, extra = divmod(len(order), num_replicas)
    start = rank * per + min(rank, extra)
    mine = order[start:start + per + (1 if rank < extra else 0)]
    return [mine[i:i + batch_size] for i in range(0, len(mine), batch_size)]


def _limit(bench: Benchmark, n: int) -> Benchmark:
    if n and n < len(bench.samples):
        return Benchmark(root=bench.root, file=bench.file, samples=bench.samples[:n], name=bench.name, meta=bench.meta)
    return bench


def _tasks(bench: Benchmark, tasks: list[str]) -> Benchmark:
    """Only the samples of ``tasks`` (all for an empty list); a task no sample has is an error."""
    if not tasks:
        return bench
    present = {s.task for s in bench.samples}
    missing = [t for t in tasks if t not in present]
    if missing:
        raise ValueError(f"data.tasks: {bench.root} has no samples of {missing}; "
                         f"its tasks are {sorted(present)}")
    keep = [s for s in bench.samples if s.task in tasks]
    return Benchmark(root=bench.root, file=bench.file, samples=keep, name=bench.name, meta=bench.meta)


class CrossViewDataModule(L.LightningDataModule):
    """Train / val splits of ``cfg.data.bench_dir`` as view-set batches over cached features.

    Args:
        cfg: the run config.
        cache: the feature cache (built from the run's backbone).
        tokenizer: inputs.text tokenizer with ``encode`` and ``pad_id``.
    """

    def __init__(self, cfg: TrainConfig, cache: FeatureCache, tokenizer):
        super().__init__()
        self.cfg, self.cache, self.tokenizer = cfg, cache, tokenizer
        self.train_set: ViewSetDataset | None = None
        self.val_set: ViewSetDataset | None = None
        self._prepared: dict[str, tuple[Benchmark, FeatureTable]] = {}  # this process's prepare_data work

    def _split(self, name: str, limit: int) -> tuple[Benchmark, FeatureTable]:
        if name in self._prepared:
            return self._prepared.pop(name)
        bench = _limit(_tasks(load_benchmark(Path(self.cfg.data.bench_dir) / name), self.cfg.data.tasks), limit)
        return bench, self.cache.table(split_images(bench), desc=f"encoding {name} images")

    def prepare_data(self) -> None:
        """Generate the benchmark if missing and fill the feature cache (local rank 0 only)."""
        ensure_benchmark(self.cfg)
        data = self.cfg.data
        for name, limit in (("train", data.limit_train), ("val", data.limit_val)):
            self._prepared[name] = self._split(name, limit)

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        data = self.cfg.data
        train, train_table = self._split("train", data.limit_train)
        val, val_table = self._split("val", data.limit_val)
        check_mark_facts(self.cfg, train)
        self.train_set = ViewSetDataset(train, train_table, self.tokenizer, augment=self.cfg.augment,
                                        seed=self.cfg.seed)
        val_sets = protocol_view_sets(val, self.cfg.eval.val_settings, self.cfg.eval.seed)
        self.val_set = ViewSetDataset(val, val_table, self.tokenizer, view_sets=val_sets)

    def _replicas(self) -> tuple[int, int]:
        """(world size, global rank) of the attached trainer; (1, 0) without one."""
        trainer = getattr(self, "trainer", None)
        if trainer is None:
            return 1, 0
        return trainer.world_size, trainer.global_rank

    def _loader(self, dataset: ViewSetDataset, batch_sampler) -> DataLoader:
        return DataLoader(dataset, batch_sampler=batch_sampler, num_workers=self.cfg.data.num_workers,
                          collate_fn=functools.partial(collate, table=dataset.table, pad_id=self.tokenizer.pad_id))

    def train_dataloader(self) -> DataLoader:
        assert self.train_set is not None
        world, rank = self._replicas()
        return self._loader(self.train_set, BucketBatchSampler(self.train_set, self.cfg.data.batch_size, self.cfg.seed,
                                                               num_replicas=world, rank=rank))

    def val_dataloader(self) -> DataLoader:
        assert self.val_set is not None
        world, rank = self._replicas()
        return self._loader(self.val_set, frame_sorted_batches(self.val_set, self.cfg.data.eval_batch_size, world, rank))
