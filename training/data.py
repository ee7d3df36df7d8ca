"""A split as a Dataset of view sets over entity records, and its bucketed, rank-split batch sampler.

A *view set* is one sample seen through an ordered list of its views (inputs/entity_batch.py
builds and collates its entity tokens). Training draws view sets with augmentation (extra views
added, order shuffled); validation uses the protocol's settings. Every random choice is a
function of (seed, epoch, index), so a resumed run draws exactly what an uninterrupted one would.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import Dataset, Sampler

from bench.format import Benchmark, Sample
from bench.protocol import ProtocolConfig
from inputs.entity_batch import WordVocab, build_entity_item, build_text_item, collate_entities
from training.config import AugmentConfig
from training.losses import count_target


@dataclass(frozen=True)
class ViewSet:
    """One model input: a sample under an ordered list of view ids."""
    sample_index: int
    view_ids: tuple[str, ...]
    setting: str = "train"  # protocol setting name, or "train"
    variant: str = ""  # the protocol query's variant ("drop=<view>" under -1); "" otherwise


def frame_count(sample: Sample) -> int:
    """Frames of the longest view: what a batch is padded to."""
    return max(len(v.frames) for v in sample.views)


class EntityViewSetDataset(Dataset):
    """View sets of one benchmark split as entity items (inputs/entity_batch.py).

    Args:
        bench: the split.
        records: scene id -> image -> entity records (inputs.entity_records.split_records).
        vocab: the run's word vocabulary.
        view_sets: fixed view sets (evaluation); None draws one augmented set per sample (training).
        augment: augmentation settings, used when view_sets is None.
        seed: seeds the augmentation together with the epoch and index.
    """

    def __init__(self, bench: Benchmark, records: dict[str, dict], vocab: WordVocab,
                 view_sets: list[ViewSet] | None = None, augment: AugmentConfig | None = None, seed: int = 0):
        self.bench, self.records, self.vocab, self.seed = bench, records, vocab, seed
        self.view_sets, self.augment = view_sets, augment or AugmentConfig()
        self.protocol = ProtocolConfig()
        self.epoch = 0
        self._text = {s.id: build_text_item(s, vocab) for s in bench.samples}

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.view_sets) if self.view_sets is not None else len(self.bench.samples)

    def draw(self, index: int) -> ViewSet:
        """The augmented view set of sample ``index`` in the current epoch: its necessary views,
        with probability ``p_extra`` plus the first k of its extra views (k <= the protocol's K_T)."""
        sample = self.bench.samples[index]
        rng = random.Random(f"{self.seed}/{self.epoch}/{index}")
        views = list(sample.gt_views)
        k_max = min(self.protocol.max_extra.get(sample.subset or "", 0), len(sample.extra_views))
        if k_max and rng.random() < self.augment.p_extra:
            views += list(sample.extra_views[:rng.randint(1, k_max)])
        if self.augment.shuffle_views:
            rng.shuffle(views)
        return ViewSet(index, tuple(views), "train")

    def __getitem__(self, index: int) -> dict[str, Any]:
        view_set = self.view_sets[index] if self.view_sets is not None else self.draw(index)
        sample = self.bench.samples[view_set.sample_index]
        images = self.records.get(sample.scene)
        if images is None:
            raise KeyError(f"sample {sample.id}: no entity records for scene {sample.scene!r}")
        item = {**build_entity_item(sample, view_set.view_ids, images, self.vocab), **self._text[sample.id]}
        item["count_target"] = count_target(sample)
        item["index"] = index  # which view set: tells ranks' shares apart under DDP
        return item


def collate(items: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """``collate_entities`` plus the count targets and the view-set indices."""
    batch = collate_entities(items)
    batch["count_target"] = torch.tensor([it["count_target"] for it in items], dtype=torch.float32)
    batch["index"] = torch.tensor([it["index"] for it in items])
    return batch


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
        dataset: the training EntityViewSetDataset.
        batch_size: samples per batch (per rank).
        seed: seeds the permutation together with the epoch.
        num_replicas / rank: the data-parallel world size and this process's place in it.
    """

    def __init__(self, dataset: EntityViewSetDataset, batch_size: int, seed: int, num_replicas: int = 1, rank: int = 0):
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
