"""The LightningDataModule: benchmark splits -> cached features -> view-set batches."""
from __future__ import annotations

import functools
from pathlib import Path

import lightning as L
from torch.utils.data import DataLoader

from bench.format import Benchmark, load_benchmark
from eval.settings import ProtocolConfig, plan_queries
from training.config import TrainConfig
from training.data import BucketBatchSampler, ViewSet, ViewSetDataset, collate, frame_count
from training.features import FeatureCache, FeatureTable


def split_images(bench: Benchmark) -> list[Path]:
    """Every image path of a split (duplicates included; the cache deduplicates)."""
    return [bench.root / f.image for s in bench.samples for v in s.views for f in v.frames]


def protocol_view_sets(bench: Benchmark, settings: list[str], seed: int) -> list[ViewSet]:
    """The evaluator's view sets (same settings, same seeded order) as ViewSets."""
    index = {s.id: i for i, s in enumerate(bench.samples)}
    out = []
    for sample in bench.samples:
        for query in plan_queries(sample, settings, ProtocolConfig(), seed):
            out.append(ViewSet(index[sample.id], query.view_ids, query.setting))
    return out


def frame_sorted_batches(dataset: ViewSetDataset, batch_size: int) -> list[list[int]]:
    """Fixed evaluation batches, grouped by frame count (see BucketBatchSampler)."""
    sets = dataset.view_sets or []
    order = sorted(range(len(sets)), key=lambda i: frame_count(dataset.bench.samples[sets[i].sample_index]))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def _limit(bench: Benchmark, n: int) -> Benchmark:
    if n and n < len(bench.samples):
        return Benchmark(root=bench.root, file=bench.file, samples=bench.samples[:n], name=bench.name, meta=bench.meta)
    return bench


class CrossViewDataModule(L.LightningDataModule):
    """Train / val splits of ``cfg.data.bench_dir`` as view-set batches over cached features.

    Args:
        cfg: the run config.
        cache: the feature cache (built from the run's backbone).
        tokenizer: training.text tokenizer with ``encode`` and ``pad_id``.
    """

    def __init__(self, cfg: TrainConfig, cache: FeatureCache, tokenizer):
        super().__init__()
        self.cfg, self.cache, self.tokenizer = cfg, cache, tokenizer
        self.train_set: ViewSetDataset | None = None
        self.val_set: ViewSetDataset | None = None

    def _split(self, name: str, limit: int) -> tuple[Benchmark, FeatureTable]:
        bench = _limit(load_benchmark(Path(self.cfg.data.bench_dir) / name), limit)
        return bench, self.cache.table(split_images(bench), desc=f"encoding {name} images")

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        data = self.cfg.data
        train, train_table = self._split("train", data.limit_train)
        val, val_table = self._split("val", data.limit_val)
        self.train_set = ViewSetDataset(train, train_table, self.tokenizer, augment=self.cfg.augment,
                                        seed=self.cfg.seed)
        val_sets = protocol_view_sets(val, self.cfg.eval.val_settings, self.cfg.eval.seed)
        self.val_set = ViewSetDataset(val, val_table, self.tokenizer, view_sets=val_sets)

    def _loader(self, dataset: ViewSetDataset, batch_sampler) -> DataLoader:
        return DataLoader(dataset, batch_sampler=batch_sampler, num_workers=self.cfg.data.num_workers,
                          collate_fn=functools.partial(collate, table=dataset.table, pad_id=self.tokenizer.pad_id))

    def train_dataloader(self) -> DataLoader:
        assert self.train_set is not None
        return self._loader(self.train_set, BucketBatchSampler(self.train_set, self.cfg.data.batch_size, self.cfg.seed))

    def val_dataloader(self) -> DataLoader:
        assert self.val_set is not None
        return self._loader(self.val_set, frame_sorted_batches(self.val_set, self.cfg.data.eval_batch_size))
