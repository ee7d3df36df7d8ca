"""The semantic grid: what one rendered view shows, cell by cell, from the 3-D truth.

A view is cut into a g x g grid (the tower's patch grid: cell (i, j) covers the same pixels as
patch (i, j)); each cell is a concatenation of one-hot blocks (``LAYOUT``):
- the seen person owning most of the cell's pixels (``bench.synth.captions.person_facts``):
  shirt, trousers, hat, posture, left / right arm state, touched object kind and colour,
  visible-fraction bin; attributes the view does not show stay all-zero. Every seen person
  owns at least one cell;
- the visible object owning most of the cell's pixels among the objects: kind and colour;
- the view's count of seen people, broadcast to every cell.
Identity is deliberately absent. ``scripts/probe_ceiling.py`` feeds these cells to the model in
place of the tower's (perfect perception); ``pretrain.fit_readout`` teaches a readout head to
predict them from the tower's patch tokens (``model.readout``).
"""
from __future__ import annotations

import numpy as np

from bench.synth.captions import (ARM_CLASSES, COLOUR_NAMES, FRAC_BINS, HAT_NAMES, IGNORE, OBJECT_KINDS, POSTURES,
                                  person_facts)

GRID = 10  # the shipped tower's patch grid (16-px patches at 160 px)
MAX_COUNT = 8  # count classes 0..8: views that show more people (crowd configs) share the top class
# (name, width) of each one-hot block of a cell's feature vector, in order
LAYOUT: list[tuple[str, int]] = [
    ("person", 1), ("shirt", len(COLOUR_NAMES)), ("trousers", len(COLOUR_NAMES)), ("hat", len(HAT_NAMES)),
    ("posture", len(POSTURES)), ("arm_l", len(ARM_CLASSES)), ("arm_r", len(ARM_CLASSES)),
    ("contact_kind", 1 + len(OBJECT_KINDS)), ("contact_colour", 1 + len(COLOUR_NAMES)),
    ("frac", len(FRAC_BINS) + 1), ("object", 1), ("object_kind", len(OBJECT_KINDS)),
    ("object_colour", len(COLOUR_NAMES)), ("count", MAX_COUNT + 1),
]
OFFSET = {name: sum(w for _, w in LAYOUT[:i]) for i, (name, _) in enumerate(LAYOUT)}
WIDTH = sum(w for _, w in LAYOUT)
PERSON_FIELDS = ("shirt", "trousers", "hat", "posture", "arm_l", "arm_r", "contact_kind", "contact_colour", "frac")


def cell_pixel_counts(instance: np.ndarray, grid: int) -> np.ndarray:
    """(grid * grid, max_id + 1) pixels of each instance id per cell, cells in row-major order."""
    h, w = instance.shape
    rows, cols = np.arange(h) * grid // h, np.arange(w) * grid // w
    cell = (rows[:, None] * grid + cols[None, :]).ravel()
    ids = instance.ravel().astype(np.int64)
    n = int(ids.max()) + 1
    return np.bincount(cell * n + ids, minlength=grid * grid * n).reshape(grid * grid, n)


def cell_owners(counts: np.ndarray, ids: list[int], keep_one: bool) -> np.ndarray:
    """Per cell the index into ``ids`` of the entity with most pixels there, -1 where none has any.

    keep_one: an entity that wins no cell takes the cell where it has most pixels, unless that
    would leave the cell's owner with none (a thin or mostly hidden person stays on the map).
    """
    if not ids:
        return np.full(len(counts), -1)
    px = np.stack([counts[:, i] if i < counts.shape[1] else np.zeros(len(counts), np.int64) for i in ids], 1)
    owner = np.where(px.max(1) > 0, px.argmax(1), -1)
    if keep_one:
        for j in range(len(ids)):
            if (owner == j).any() or px[:, j].max() == 0:
                continue
            cell = int(px[:, j].argmax())
            if owner[cell] < 0 or (owner == owner[cell]).sum() > 1:
                owner[cell] = j
    return owner


def view_features(scene, render, obs: dict, t: float = 0.0, grid: int = GRID) -> np.ndarray:
    """(grid * grid, WIDTH) float32 ground-truth cells of one rendered view, row-major.

    Args:
        scene: the ``Scene``; render: its ``RenderOutput`` for this view and time;
        obs: ``observe_view`` of that render; t: the frame time (temporal scenes).
    """
    counts = cell_pixel_counts(render.instance, grid)
    feats = np.zeros((grid * grid, WIDTH), np.float32)
    facts = person_facts(scene, obs, t)
    owner = cell_owners(counts, [f["pid"] for f in facts], keep_one=True)
    for j, f in enumerate(facts):
        cells = owner == j
        feats[cells, OFFSET["person"]] = 1.0
        for name in PERSON_FIELDS:
            if f[name] != IGNORE:
                feats[cells, OFFSET[name] + f[name]] = 1.0
    objects = [o for o in scene.objects if obs["objects"][o.oid]["visible"]]
    owner = cell_owners(counts, [o.oid for o in objects], keep_one=False)
    for j, o in enumerate(objects):
        cells = owner == j
        feats[cells, OFFSET["object"]] = 1.0
        feats[cells, OFFSET["object_kind"] + OBJECT_KINDS.index(o.kind)] = 1.0
        feats[cells, OFFSET["object_colour"] + COLOUR_NAMES.index(o.colour)] = 1.0
    feats[:, OFFSET["count"] + min(len(facts), MAX_COUNT)] = 1.0
    return feats


def block_targets(cells: np.ndarray) -> np.ndarray:
    """(P, len(LAYOUT)) int64 class per cell and block of ``view_features`` output: for a one-hot
    block of width w > 1 the set index, or w where the block is all-zero ("not shown"); for a
    width-1 flag 1 or 0."""
    out = np.zeros((cells.shape[0], len(LAYOUT)), np.int64)
    for b, (name, width) in enumerate(LAYOUT):
        part = cells[:, OFFSET[name]:OFFSET[name] + width]
        if width == 1:
            out[:, b] = part[:, 0] > 0
        else:
            out[:, b] = np.where(part.max(1) > 0, part.argmax(1), width)
    return out
