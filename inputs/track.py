"""Per-frame states of the person a temporal question asks about, from the generator's record.

The synthetic generator stores, for every temporal question, what each camera saw of the asked
person on each frame (``sample.meta["observations"][view]["obs"]``, bench/synth/tasks_temporal.py):
airborne or not, the asked hand waving or not, the body action, both hands' states, the
landmark the person stands at, the objects the asked hand overlaps. ``track_targets`` turns
that record into one class id per (view, frame) of a view set, over a fixed vocabulary
(``TRACK_STATES``): the supervision of the model's per-person track (model/track.py,
``fusion.track``) and, for the oracle diagnostic (``fusion.track_oracle``), its input.

Class 0 (``unseen``) is a frame on which the camera did not see the person (or the part the
question is about); ``IGNORE`` marks frames with no record (spatial questions, benchmarks
without the generator's metadata, states outside the vocabulary). Nothing here is read at
test time unless the oracle diagnostic is on.

``track_boxes`` reads where the asked person is on each frame (``meta["person_boxes"]``, the
box of their visible pixels per view and frame): the supervision of the track's locator
(``loss.track_locate``), which otherwise learns where to look only through the states.
"""
from __future__ import annotations

import itertools
from typing import Any, Optional, Sequence

import torch

from bench.entities import COLOUR_NAMES, OBJECT_KINDS

IGNORE = -100  # F.cross_entropy's ignore_index
UNSEEN = 0

_OBJECTS = [f"{colour} {kind}" for kind in OBJECT_KINDS for colour in COLOUR_NAMES]
_HAND = ("none", "down", "raised", "wave")
TRACK_STATES: tuple[str, ...] = tuple(
    ["unseen", "jump:0", "jump:1", "wave:0", "wave:1"]
    + [f"action:{a}" for a in ("walk", "jump", "squat", "sit", "stand", "reach")]
    + [f"hands:{left}/{right}" for left, right in itertools.product(_HAND, _HAND)]
    + [f"place:{p}" for p in ["transit"] + _OBJECTS]
    + [f"touch:{o}" for o in ["none"] + _OBJECTS])
STATE_ID = {name: i for i, name in enumerate(TRACK_STATES)}

# task -> the channel its per-frame record is written in.
CHANNEL = {"repetition_count": "jump", "limb_repetition_count": "wave", "motion_recognition": "action",
           "limb_action_order": "hands", "trajectory": "place", "limb_contact_over_time": "touch"}


def state_name(task: str, obs: Any) -> Optional[str]:
    """One frame's record -> its state name; "unseen" for None; None when it has no state
    in the vocabulary (an unknown task or value)."""
    channel = CHANNEL.get(task)
    if channel is None:
        return None
    if obs is None:
        return "unseen"
    if channel == "hands":
        if not isinstance(obs, (list, tuple)) or len(obs) != 2:
            return None
        return "hands:" + "/".join("none" if h is None else str(h) for h in obs)
    if channel == "touch":
        if not isinstance(obs, dict):
            return None
        overlap = sorted(name for name, status in obs.items() if status == "overlap")
        if overlap:
            return f"touch:{overlap[0]}"
        if all(status == "hidden" for status in obs.values()):
            return "unseen"  # the hand is hidden from every object: nothing to read
        return "touch:none"
    return f"{channel}:{obs}"


def track_targets(task: str, meta: dict, view_ids: Sequence[str], n_frames: int) -> torch.Tensor:
    """(V, T) long class ids of a view set; IGNORE where the sample has no record.

    Args:
        task: the sample's task; meta: its ``meta`` (the generator's "observations" are read).
        view_ids: the view set's views, in order; n_frames: the padded frame count T.
    """
    out = torch.full((len(view_ids), n_frames), IGNORE, dtype=torch.long)
    observations = meta.get("observations") if isinstance(meta, dict) else None
    if task not in CHANNEL or not isinstance(observations, dict):
        return out
    for i, view in enumerate(view_ids):
        record = observations.get(view)
        frames = record.get("obs") if isinstance(record, dict) else None
        if not isinstance(frames, list):
            continue
        for j, obs in enumerate(frames[:n_frames]):
            name = state_name(task, obs)
            if name is not None and name in STATE_ID:
                out[i, j] = STATE_ID[name]
    return out


def track_boxes(meta: dict, views: Sequence[Any], n_frames: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Where the asked person is, per (view, frame) of a view set.

    Args:
        meta: the sample's ``meta`` (the generator's "person_boxes" are read: per view id a list
            over frames of [x0, y0, x1, y1] render pixels, or None where no pixel shows).
        views: the view set's ``bench.format.View`` objects, in order (their cameras give the
            image size the boxes are relative to).
        n_frames: the padded frame count T.
    Returns:
        box (V, T, 4) float, the box as fractions of the image's width and height (0 where
        there is none); flag (V, T) long: 1 a box, 0 the person shows no pixel in that view
        on that frame, IGNORE no record (no "person_boxes", no camera, padding).
    """
    box = torch.zeros(len(views), n_frames, 4)
    flag = torch.full((len(views), n_frames), IGNORE, dtype=torch.long)
    record = meta.get("person_boxes") if isinstance(meta, dict) else None
    if not isinstance(record, dict):
        return box, flag
    for i, view in enumerate(views):
        frames = record.get(view.view_id)
        cam = view.camera
        if not isinstance(frames, list) or cam is None or not cam.width or not cam.height:
            continue
        scale = torch.tensor([cam.width, cam.height, cam.width, cam.height], dtype=torch.float)
        for j, b in enumerate(frames[:n_frames]):
            if b is None:
                flag[i, j] = 0
            elif isinstance(b, (list, tuple)) and len(b) == 4:
                box[i, j] = torch.tensor([float(x) for x in b]) / scale
                flag[i, j] = 1
    return box, flag


def box_cells(box: torch.Tensor, grid: int) -> torch.Tensor:
    """(..., 4) boxes in image fractions -> (..., grid * grid) bool: the cells of a row-major
    grid over the image that the box overlaps (a box inside one cell still marks that cell)."""
    edges = torch.arange(grid + 1, dtype=box.dtype, device=box.device) / grid
    lo, hi = edges[:-1], edges[1:]
    cols = (box[..., 0:1] < hi) & (box[..., 2:3] > lo)  # (..., grid)
    rows = (box[..., 1:2] < hi) & (box[..., 3:4] > lo)
    return (rows.unsqueeze(-1) & cols.unsqueeze(-2)).flatten(-2)
