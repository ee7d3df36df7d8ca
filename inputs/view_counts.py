"""How many people each image shows, from the generator's per-view record.

The synthetic generator stores, in every sample's ``meta["view_stats"]``, what each image of
the scene shows (bench/synth/generate.py): ``[people seen, people visible, visible people
partly occluded]``, keyed by the view id for a spatial scene (one frame per camera) and by the
frame stem ``{view}_f{k:02d}`` for a clip. "Seen" is the count that count_in_view asks for.

``view_count_targets`` turns that record into one class per (view, frame) of a view set
(counts above ``max_count`` share the last class): the supervision of the model's per-frame
counter (``model.view_counter``, ``loss.view_count``), read from the *training* split only;
nothing here is read at test time. ``IGNORE`` marks frames without a record (benchmarks
without the generator's metadata). ``scripts/probe_features.py`` labels its
``count_every_image`` probe with the same function.
"""
from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any, Optional, Sequence

import torch

from inputs.track import IGNORE
from model.config import MAX_VIEW_COUNT as MAX_COUNT  # counts above this share its class
_FRAME_STEM = re.compile(r"^(?P<key>.+?_f\d+)(?:_m[0-9a-f]+)?$")


def view_stats_key(stats: dict, view_id: str, image: str, n_frames: int) -> Optional[str]:
    """The key of ``image`` (a frame of view ``view_id``, which has ``n_frames`` frames in the
    sample) in a ``view_stats`` record, or None: the view id for a single-frame view the record
    names, else the image's file stem ``{view}_f{k}`` without a mark suffix ``_m<hex>``."""
    if n_frames == 1 and view_id in stats:
        return view_id
    m = _FRAME_STEM.match(PurePosixPath(image).stem)
    key = m.group("key") if m else None
    return key if key in stats else None


def image_count(meta: Optional[dict], view_id: str, image: str, n_frames: int,
                max_count: int = MAX_COUNT) -> Optional[int]:
    """People seen in one image (capped at ``max_count``), or None without a record."""
    stats = (meta or {}).get("view_stats")
    if not stats:
        return None
    key = view_stats_key(stats, view_id, image, n_frames)
    if key is None:
        return None
    return min(int(stats[key][0]), max_count)


def view_count_targets(meta: Optional[dict], views: Sequence[Any], n_t: int,
                       max_count: int = MAX_COUNT) -> torch.Tensor:
    """(len(views), n_t) long: the count class of every frame of ``views`` (objects with
    ``view_id`` and ``frames``, each frame with ``image``); IGNORE where there is no record
    and on padding frames."""
    out = torch.full((len(views), n_t), IGNORE, dtype=torch.long)
    for i, view in enumerate(views):
        for j, frame in enumerate(view.frames):
            n = image_count(meta, view.view_id, frame.image, len(view.frames), max_count)
            if n is not None:
                out[i, j] = n
    return out
