"""View settings: which views a model sees for one sample, in which order.

The protocol is part of the benchmark's definition, so it lives in bench/ (it needs only
bench.format): the evaluator, the trainer's validation and the harness exports all plan their
queries here. Settings (eval/README.md, "The protocol"):

- ``+0``  V_GT only. Applies to samples with a subset (SVS and MVN).
- ``+k``  V_GT plus the first k views of ``extra_views``; k <= ``max_extra[subset]``
          (3 for SVS, 2 for MVN by default) and k <= len(extra_views).
- ``-1``  MVN only: V_GT minus one view. A sample with a single gt view has no ``-1``.
          ``minus_one="each"`` drops each gt view in turn (one query per dropped view; the
          sample's score is the mean over them); ``"seeded"`` drops one seeded choice.
- ``all`` every view of the sample (CVBench style). Applies to samples with no subset.

The order of the views inside a query is a permutation seeded by (run seed, sample id,
setting, variant) through sha256, so a model cannot learn "the answer view comes first",
``--seed`` changes every order, and the same seed reproduces it on any machine
(Python's ``hash()`` is salted per process, so it is never used).
"""
from __future__ import annotations

import argparse
import hashlib
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from bench.constants import K_T, NO_SUBSET, SUBSETS
from bench.format import Sample

ALL_SETTINGS = ("+0", "+1", "+2", "+3", "-1", "all")  # the default run: everything that applies
_PLUS = re.compile(r"^\+(\d+)$")


@dataclass(frozen=True)
class ProtocolConfig:
    """How settings map to views; stored in the run manifest (changing it is a new run)."""
    max_extra: dict[str, int] = field(default_factory=lambda: dict(K_T))  # K_T per subset
    minus_one: str = "each"  # "each": drop every gt view in turn, averaged; "seeded": one choice

    def to_dict(self) -> dict:
        return {"max_extra": dict(self.max_extra), "minus_one": self.minus_one}


MINUS_ONE_MODES = ("each", "seeded")


def add_protocol_arguments(parser: argparse.ArgumentParser) -> None:
    """``--max-extra-svs``, ``--max-extra-mvn`` and ``--minus-one``, defaults from ``ProtocolConfig()``
    (``python -m eval run``, ``python -m eval import``, ``python -m bench export``)."""
    default = ProtocolConfig()
    for subset in SUBSETS:
        parser.add_argument(f"--max-extra-{subset.lower()}", type=int, default=default.max_extra[subset],
                            help=f"K_{subset}: largest +k for {subset} samples (default {default.max_extra[subset]})")
    parser.add_argument("--minus-one", choices=MINUS_ONE_MODES, default=default.minus_one,
                        help="-1: drop each gt view in turn (averaged) or one seeded choice")


def protocol_from_arguments(args: argparse.Namespace) -> ProtocolConfig:
    """The ProtocolConfig of the flags ``add_protocol_arguments`` added."""
    return ProtocolConfig(max_extra={s: getattr(args, f"max_extra_{s.lower()}") for s in SUBSETS},
                          minus_one=args.minus_one)


@dataclass(frozen=True)
class Query:
    """One model query before rotation: a sample under one setting (and variant)."""
    sample_id: str
    setting: str
    variant: str  # "" or "drop=<view_id>" for -1
    view_ids: tuple[str, ...]  # in presentation order (already permuted)


def stable_hash(*parts: object) -> int:
    """A 64-bit hash of the parts that is the same in every process and on every machine."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def query_key(sample_id: str, setting: str, variant: str = "", rotation: int = 0) -> str:
    """The key of one query under one option rotation: a line of predictions.jsonl, a row of
    the harness exports (``"<sample>|<setting>|<variant>|r<rotation>"``)."""
    return f"{sample_id}|{setting}|{variant}|r{rotation}"


def seeded_order(view_ids: list[str], seed: int, sample_id: str, setting: str, variant: str = "") -> tuple[str, ...]:
    """A seeded permutation of ``view_ids``: sort by a per-view sha256 key."""
    return tuple(sorted(view_ids, key=lambda v: (stable_hash(seed, sample_id, setting, variant, v), v)))


def subset_key(sample: Sample) -> str:
    return sample.subset or NO_SUBSET


def check_settings(names: list[str], protocol: ProtocolConfig) -> list[str]:
    """Problems with a list of setting names (empty list: all fine)."""
    problems = []
    top_k = max(protocol.max_extra.values(), default=0)
    if not names:
        problems.append("no settings given")
    for name in names:
        m = _PLUS.match(name)
        if name in ("-1", "all"):
            continue
        if not m:
            problems.append(f"unknown setting {name!r}; valid: +0, +1 .. +{top_k}, -1, all")
        elif int(m.group(1)) > top_k:
            problems.append(f"setting {name!r} needs more extra views than any subset allows "
                            f"(max_extra {protocol.max_extra})")
    if len(set(names)) != len(names):
        problems.append(f"a setting is listed twice: {','.join(names)}")
    if protocol.minus_one not in MINUS_ONE_MODES:
        problems.append(f"minus_one must be 'each' or 'seeded', got {protocol.minus_one!r}")
    return problems


def parse_settings(text: str | list[str] | None) -> list[str]:
    """``"+0,+1,-1"`` -> ``["+0", "+1", "-1"]``; None -> every setting."""
    if text is None:
        return list(ALL_SETTINGS)
    if isinstance(text, str):
        return [s.strip() for s in text.split(",") if s.strip()]
    return list(text)


def view_sets(sample: Sample, setting: str, protocol: ProtocolConfig, seed: int) -> list[tuple[str, list[str]]]:
    """The (variant, unordered view ids) of ``sample`` under ``setting``; [] if it does not apply."""
    gt = list(sample.gt_views)
    if setting == "all":
        return [("", [v.view_id for v in sample.views])] if sample.subset is None else []
    if sample.subset is None:
        return []
    if setting == "-1":
        if sample.subset != "MVN" or len(gt) < 2:
            return []
        drops = gt if protocol.minus_one == "each" else [gt[stable_hash(seed, sample.id, "-1") % len(gt)]]
        return [(f"drop={d}", [v for v in gt if v != d]) for d in drops]
    m = _PLUS.match(setting)
    if not m:
        raise ValueError(f"unknown setting {setting!r}")
    k = int(m.group(1))
    if k > protocol.max_extra.get(sample.subset, 0) or k > len(sample.extra_views):
        return []
    return [("", gt + list(sample.extra_views[:k]))]


def plan_queries(sample: Sample, settings: list[str], protocol: ProtocolConfig, seed: int) -> list[Query]:
    """Every query of one sample under the given settings, views in seeded order."""
    queries = []
    for setting in settings:
        for variant, ids in view_sets(sample, setting, protocol, seed):
            queries.append(Query(sample.id, setting, variant, seeded_order(ids, seed, sample.id, setting, variant)))
    return queries


def primary_setting(sample: Sample) -> str:
    """The setting that stands for a sample in whole-benchmark tables (CVBench, per task):
    ``all`` for samples with no subset, ``+0`` (V_GT) for SVS / MVN samples."""
    return "all" if sample.subset is None else "+0"


def setting_sort_key(name: str) -> tuple[int, int]:
    """+0, +1, ..., -1, all."""
    m = _PLUS.match(name)
    if m:
        return (0, int(m.group(1)))
    return (1, 0) if name == "-1" else (2, 0)


# ---------------------------------------------------------------- scoring units


def unit_scores(lines: Iterable[tuple[str, str, str, bool]]) -> dict[tuple[str, str], float]:
    """The scoring units of a run: ``(sample_id, setting, variant, correct)`` lines -> the score
    in [0, 1] of every (sample, setting).

    A (sample, setting, variant) is right when every line of it is (one line per option
    rotation under circular evaluation); a (sample, setting) scores the mean over its variants
    (``-1`` with ``minus_one="each"`` has one per dropped view), so every sample counts once in
    a setting however many views it can drop. The evaluator's tables (eval/metrics.py) and the
    trainer's validation accuracy (training/module.py) both score through this function.
    """
    variants: dict[tuple[str, str, str], list[bool]] = defaultdict(list)
    for sample_id, setting, variant, correct in lines:
        variants[(sample_id, setting, variant)].append(bool(correct))
    per_unit: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (sample_id, setting, _), flags in variants.items():
        per_unit[(sample_id, setting)].append(1.0 if all(flags) else 0.0)
    return {key: float(np.mean(scores)) for key, scores in per_unit.items()}


def accuracy_by_setting(scores: dict[tuple[str, str], float]) -> dict[str, float]:
    """Accuracy in points (0-100) per setting: the mean score of its units, over every subset
    (the evaluator's ``acc[setting]["overall"]``)."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for (_, setting), score in scores.items():
        totals[setting][0] += score
        totals[setting][1] += 1
    return {setting: 100.0 * total / n for setting, (total, n) in totals.items()}
