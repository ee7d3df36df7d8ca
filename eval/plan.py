"""The query plan of a run: every (sample, setting, variant, rotation) to ask, and its shards.

A plan is a pure function of the benchmark, the settings, the protocol, the seed, circular
and the sample limit, so every shard of a run, ``eval finish`` and a resumed run all see the
same queries under the same keys.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from bench.format import Benchmark, Sample
from eval.adapters.base import Request, RequestView
from eval.circular import n_rotations, rotate_sample
from eval.prompt import build_prompt
from eval.settings import ProtocolConfig, Query, plan_queries


@dataclass(frozen=True)
class PlannedQuery:
    """One line-to-be of predictions.jsonl: a query under one option rotation."""
    key: str
    sample: Sample  # the original (unrotated) sample
    query: Query
    rotation: int
    n_rotations: int


def plan_run(bench: Benchmark, settings: list[str], protocol: ProtocolConfig, seed: int, circular: bool,
             limit: int | None = None) -> list[PlannedQuery]:
    """Every query of the run, in benchmark order, then setting, variant and rotation."""
    planned = []
    for sample in bench.samples[:limit]:
        n_rot = n_rotations(sample, circular)
        for q in plan_queries(sample, settings, protocol, seed):
            for rot in range(n_rot):
                key = f"{sample.id}|{q.setting}|{q.variant}|r{rot}"
                planned.append(PlannedQuery(key, sample, q, rot, n_rot))
    return planned


def shard_of(key: str, n_shards: int) -> int:
    """The shard a query belongs to: a hash of its key, so the split is fixed and balanced."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % n_shards


def shard_plan(planned: list[PlannedQuery], shard: tuple[int, int] | None) -> list[PlannedQuery]:
    """The queries of shard (r, n); the whole plan for None."""
    if shard is None:
        return planned
    rank, n = shard
    return [pq for pq in planned if shard_of(pq.key, n) == rank]


def parse_shard(text: str) -> tuple[int, int]:
    """"r/n" -> (r, n); ValueError unless 0 <= r < n."""
    rank, sep, n = text.partition("/")
    try:
        r, k = int(rank), int(n)
    except ValueError:
        raise ValueError(f"--shard {text!r}: expected r/n, e.g. 0/4") from None
    if not sep or not 0 <= r < k:
        raise ValueError(f"--shard {text!r}: expected r/n with 0 <= r < n")
    return r, k


def launcher_shard(env: dict[str, str] | None = None) -> tuple[int, int] | None:
    """(RANK, WORLD_SIZE) when started by torchrun / accelerate launch with more than one process."""
    env = os.environ if env is None else env
    try:
        world = int(env.get("WORLD_SIZE", "1"))
        rank = int(env.get("RANK", env.get("LOCAL_RANK", "0")))
    except ValueError:
        return None
    return (rank, world) if world > 1 and 0 <= rank < world else None


def query_images(bench: Benchmark, pq: PlannedQuery) -> list[Path]:
    """The image files a query shows, in presentation order."""
    return [bench.image_path(f.image) for v in pq.query.view_ids for f in pq.sample.view(v).frames]


def build_request(bench: Benchmark, pq: PlannedQuery) -> Request:
    """The adapter's request for a planned query (options rotated, views in presentation order)."""
    sample = rotate_sample(pq.sample, pq.rotation)
    views = [pq.sample.view(v) for v in pq.query.view_ids]
    request_views = [RequestView(view_id=v.view_id, position=i, image_paths=[bench.image_path(f.image) for f in v.frames],
                                 times=[f.t for f in v.frames], camera=v.camera) for i, v in enumerate(views, 1)]
    return Request(key=pq.key, sample=sample, setting=pq.query.setting, views=request_views,
                   prompt=build_prompt(sample, views))
