"""The LightningDataModule: benchmark splits -> entity records -> view-set batches.

``prepare_data`` (one process per node, before the others start reading) generates the
benchmark if it is missing and predicts every image's entity records once with the shipped
perception into the cache (inputs/entity_records.py); ``setup`` only loads. Batches are split over the ranks of a distributed run by our own
samplers (Lightning's DistributedSampler cannot wrap a bucketed batch sampler): training
batches round-robin with an equal count per rank, validation view sets in contiguous
frame-sorted shares, so every view set is seen by exactly one rank.
"""
from __future__ import annotations

from pathlib import Path

import lightning as L
from torch.utils.data import DataLoader

from bench.format import Benchmark, load_benchmark
from bench.generated import ensure_generated
from bench.protocol import ProtocolConfig, plan_queries
from inputs.entity_batch import WordVocab
from inputs.entity_records import locate_perception, split_records
from training.config import TrainConfig
from training.data import BucketBatchSampler, EntityViewSetDataset, ViewSet, collate, frame_count

SPLITS = ("train", "val", "test")

def ensure_benchmark(cfg: TrainConfig) -> Path:
    """The benchmark folder; generated from ``data.generate_config`` when a split is missing."""
    return ensure_generated(cfg.data.bench_dir, cfg.data.generate_config, SPLITS, key="data.generate_config")


def protocol_view_sets(bench: Benchmark, settings: list[str], seed: int) -> list[ViewSet]:
    """The evaluator's view sets (same settings, same seeded order) as ViewSets."""
    index = {s.id: i for i, s in enumerate(bench.samples)}
    out = []
    for sample in bench.samples:
        for query in plan_queries(sample, settings, ProtocolConfig(), seed):
            out.append(ViewSet(index[sample.id], query.view_ids, query.setting, variant=query.variant))
    return out


def frame_sorted_batches(dataset: EntityViewSetDataset, batch_size: int, num_replicas: int = 1,
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


def build_vocab(train: Benchmark) -> WordVocab:
    """The run's word vocabulary: the class names, then every word of the train questions and options."""
    return WordVocab.build([s.question for s in train.samples] + [o for s in train.samples for o in s.options])


class EntityDataModule(L.LightningDataModule):
    """Train / val splits of ``cfg.data.bench_dir`` as entity view-set batches.

    Args:
        cfg: the run config. ``cfg.perception.entities == "truth"`` reads the generator's records
            of every split (the entity ceiling); otherwise the shipped perception predicts them.
    """

    def __init__(self, cfg: TrainConfig):
        super().__init__()
        self.cfg = cfg
        self.perception = None if cfg.is_ceiling else locate_perception(cfg.perception.folder)
        self.train_set: EntityViewSetDataset | None = None
        self.val_set: EntityViewSetDataset | None = None
        self.vocab: WordVocab | None = None

    def records(self, split: str, bench: Benchmark | None = None) -> dict[str, dict]:
        """Scene id -> image -> entity records of a split (predicted and cached, or the truth)."""
        source = None if split == "train" and self.train_on_truth else self.perception
        return split_records(self.cfg.data.bench_dir, split, source, self.cfg.data.cache_dir, bench=bench)

    @property
    def train_on_truth(self) -> bool:
        """Whether the train split's records are the generator's (``perception.train_entities``)."""
        return self.cfg.is_ceiling or self.cfg.perception.train_entities == "truth"

    def prepare_data(self) -> None:
        """Generate the benchmark if missing and predict every split's records (local rank 0 only)."""
        root = ensure_benchmark(self.cfg)
        if self.cfg.is_ceiling:
            missing = [s for s in SPLITS if not (root / "labels" / f"{s}.jsonl.gz").is_file()]
            if missing:
                raise FileNotFoundError(f"perception.entities=truth: {root}/labels has no entity labels of "
                                        f"{', '.join(missing)}; the ceiling needs a benchmark generated by "
                                        "python -m bench generate")
            return
        for split in SPLITS:
            if split != "train" or not self.train_on_truth:
                self.records(split)

    def load_vocab(self) -> WordVocab:
        """The vocabulary of the (limited) train split; built once."""
        if self.vocab is None:
            train = _limit(load_benchmark(Path(self.cfg.data.bench_dir) / "train", check_images=False),
                           self.cfg.data.limit_train)
            self.vocab = build_vocab(train)
        return self.vocab

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        data = self.cfg.data
        root = Path(data.bench_dir)
        train = _limit(load_benchmark(root / "train", check_images=False), data.limit_train)
        val = _limit(load_benchmark(root / "val", check_images=False), data.limit_val)
        if self.vocab is None:  # the train split is loaded already: no second read for the vocabulary
            self.vocab = build_vocab(train)
        vocab = self.vocab
        self.train_set = EntityViewSetDataset(train, self.records("train", train), vocab, augment=self.cfg.augment,
                                              seed=self.cfg.seed)
        val_sets = protocol_view_sets(val, self.cfg.eval.val_settings, self.cfg.eval.seed)
        self.val_set = EntityViewSetDataset(val, self.records("val", val), vocab, view_sets=val_sets)

    def _replicas(self) -> tuple[int, int]:
        """(world size, global rank) of the attached trainer; (1, 0) without one."""
        trainer = getattr(self, "trainer", None)
        if trainer is None:
            return 1, 0
        return trainer.world_size, trainer.global_rank

    def _loader(self, dataset: EntityViewSetDataset, batch_sampler) -> DataLoader:
        return DataLoader(dataset, batch_sampler=batch_sampler, num_workers=self.cfg.data.num_workers,
                          collate_fn=collate)

    def train_dataloader(self) -> DataLoader:
        assert self.train_set is not None
        world, rank = self._replicas()
        return self._loader(self.train_set, BucketBatchSampler(self.train_set, self.cfg.data.batch_size, self.cfg.seed,
                                                               num_replicas=world, rank=rank))

    def val_dataloader(self) -> DataLoader:
        assert self.val_set is not None
        world, rank = self._replicas()
        return self._loader(self.val_set, frame_sorted_batches(self.val_set, self.cfg.data.eval_batch_size, world, rank))
