"""The training split as a Dataset of view sets, and its bucketed, rank-split batch sampler.

A *view set* is one sample seen through an ordered list of its views (inputs/items.py builds
and collates them). Training draws view sets with augmentation (extra views added, a necessary
view sometimes dropped, order shuffled); validation uses the protocol's settings. Every random
choice is a function of (seed, epoch, index), so a resumed run draws exactly what an
uninterrupted one would.
"""
from __future__ import annotations

import random
from typing import Any

import torch
from torch.utils.data import Dataset, Sampler

from bench.format import Benchmark
from inputs.features import FeatureTable
from inputs.items import ViewSet, build_item, frame_count
from training.config import AugmentConfig


class ViewSetDataset(Dataset):
    """View sets of one benchmark split over a feature table.

    Args:
        bench: the split.
        table: cached features of every image of the split.
        tokenizer: turns (question, options) into {"prompt_ids", "option_ids"} (inputs/text.py).
        view_sets: fixed view sets (evaluation); None draws one augmented set per sample (training).
        augment: augmentation settings, used when view_sets is None.
        seed: seeds the augmentation together with the epoch and index.
    """

    def __init__(self, bench: Benchmark, table: FeatureTable, tokenizer, view_sets: list[ViewSet] | None = None,
                 augment: AugmentConfig | None = None, seed: int = 0):
        self.bench, self.table, self.seed = bench, table, seed
        self.view_sets, self.augment = view_sets, augment or AugmentConfig()
        self.tokenizer = tokenizer
        self.epoch = 0
        self._text = {}
        for s in bench.samples:
            self._text[s.id] = tokenizer.encode(s.question, s.options)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.view_sets) if self.view_sets is not None else len(self.bench.samples)

    def draw(self, index: int) -> ViewSet:
        """The augmented view set of sample ``index`` in the current epoch."""
        sample = self.bench.samples[index]
        rng = random.Random(f"{self.seed}/{self.epoch}/{index}")
        aug = self.augment
        views = list(sample.gt_views)
        valid = True
        if sample.subset == "MVN" and len(views) >= 2 and rng.random() < aug.p_drop:
            views.pop(rng.randrange(len(views)))
            valid = False
        pool = [v.view_id for v in sample.views if v.view_id not in sample.gt_views]
        if pool and aug.max_extra > 0 and rng.random() < aug.p_extra:
            k = rng.randint(1, min(aug.max_extra, len(pool)))
            views += rng.sample(pool, k)
        if aug.shuffle_views:
            rng.shuffle(views)
        return ViewSet(index, tuple(views), "train", valid)

    def option_order(self, index: int) -> list[int] | None:
        """The order sample ``index``'s options are shown in this epoch (``order[i]`` is the
        original index of the option shown at place i), or None: as stored. Only in training with
        ``augment.shuffle_options``; a "none of the above" option stays last."""
        if self.view_sets is not None or not self.augment.shuffle_options:
            return None
        sample = self.bench.samples[index]
        n = len(sample.options) - (1 if sample.has_nota else 0)
        order = list(range(n))
        random.Random(f"{self.seed}/{self.epoch}/{index}/options").shuffle(order)
        return order + list(range(n, len(sample.options)))

    def __getitem__(self, index: int) -> dict[str, Any]:
        view_set = self.view_sets[index] if self.view_sets is not None else self.draw(index)
        sample = self.bench.samples[view_set.sample_index]
        order = self.option_order(view_set.sample_index)
        if order is None:
            item = build_item(sample, view_set, self.bench.root, self.table, self._text[sample.id])
        else:
            text = self.tokenizer.encode(sample.question, [sample.options[i] for i in order])
            item = build_item(sample, view_set, self.bench.root, self.table, text)
            item["answer"] = torch.tensor(order.index(sample.answer_index))
        item["index"] = index  # which view set: tells ranks' shares apart under DDP
        return item


class BucketBatchSampler(Sampler[list[int]]):
    """Shuffled batches of samples with the same frame count, reproducible from (seed, epoch),
    split over the ranks of a distributed run.

    Padding a batch to its longest clip makes one 8-frame sample cost a whole batch eight
    times the compute, so still images and clips are batched apart. The permutation depends
    only on (seed, epoch): resuming mid-run replays it exactly. Lightning calls ``set_epoch``
    before every epoch; it is passed on to the dataset so augmentation depends on it too.

    Under DDP every rank builds the same global batch order and takes every
    ``num_replicas``-th batch starting at its ``rank``; the last ``len % num_replicas``
    batches of an epoch (a different few each epoch) are left out so every rank runs the same
    number of steps and no sample is seen twice. With one replica this is exactly the
    single-process order.

    Args:
        dataset: the training ViewSetDataset.
        batch_size: samples per batch (per rank).
        seed: seeds the permutation together with the epoch.
        num_replicas / rank: the data-parallel world size and this process's place in it.
    """

    def __init__(self, dataset: ViewSetDataset, batch_size: int, seed: int, num_replicas: int = 1, rank: int = 0):
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is outside 0..{num_replicas - 1}")
        self.dataset, self.batch_size, self.seed, self.epoch = dataset, batch_size, seed, 0
        self.num_replicas, self.rank = num_replicas, rank
        self.buckets: dict[int, list[int]] = {}
        for index in range(len(dataset)):
            frames = frame_count(dataset.bench.samples[index])
            self.buckets.setdefault(frames, []).append(index)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.dataset.set_epoch(epoch)

    def global_batches(self) -> list[list[int]]:
        """The epoch's batches over all ranks, in order."""
        rng = random.Random(f"sampler/{self.seed}/{self.epoch}")
        batches = []
        for frames in sorted(self.buckets):
            order = list(self.buckets[frames])
            rng.shuffle(order)
            batches += [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        rng.shuffle(batches)
        return batches

    def _n_global(self) -> int:
        return sum(-(-len(b) // self.batch_size) for b in self.buckets.values())

    def __len__(self) -> int:
        return self._n_global() // self.num_replicas

    def __iter__(self):
        batches = self.global_batches()
        return iter(batches[self.rank: len(self) * self.num_replicas: self.num_replicas])
