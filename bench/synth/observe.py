"""Observation model: what one view alone shows, computed from its id maps.

Per view: which entities are visible and how much (visible pixels / unoccluded pixels), which
body parts are visible, what a person's visible appearance is (shirt, trousers, hat), whether
each arm's posture can be seen, and for every person-object pair whether the view shows them
``separated`` in 2-D, ``overlap`` (touching or overlapping in 2-D: contact is ambiguous), or
``hidden`` (one of them cannot be seen well enough to tell).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from bench.entities import EFFECTORS
from bench.synth.body import PART_ID
from bench.synth.renderer import RenderOutput

SEPARATED, OVERLAP, HIDDEN = "separated", "overlap", "hidden"


def _thresholds(width: int, height: int, cfg) -> tuple[int, int, int]:
    area_scale = width * height / (224.0 * 224.0)
    ent_px = max(cfg.min_entity_px, int(round(cfg.min_entity_frac * width * height)))
    part_px = max(1, int(round(cfg.min_part_px * area_scale)))
    gap = max(1, int(math.ceil(cfg.gap_px * width / 224.0)))
    return ent_px, part_px, gap


def _box(mask: np.ndarray) -> list[int] | None:
    ys, xs = np.nonzero(mask)
    if len(xs) == 0:
        return None
    return [int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1]


def _adjacent(mask_a: np.ndarray, box_a: list[int], mask_b: np.ndarray, box_b: list[int], gap: int) -> bool:
    """Whether two masks come within ``gap`` pixels of each other (square dilation)."""
    x0, y0 = max(box_a[0], box_b[0]) - gap, max(box_a[1], box_b[1]) - gap
    x1, y1 = min(box_a[2], box_b[2]) + gap, min(box_a[3], box_b[3]) + gap
    if x0 >= x1 or y0 >= y1:
        return False
    h, w = mask_a.shape
    cx0, cy0, cx1, cy1 = max(x0 - gap, 0), max(y0 - gap, 0), min(x1 + gap, w), min(y1 + gap, h)
    a = torch.from_numpy(mask_a[cy0:cy1, cx0:cx1].astype(np.float32))[None, None]
    grown = F.max_pool2d(a, 2 * gap + 1, stride=1, padding=gap)[0, 0].numpy() > 0
    return bool((grown & mask_b[cy0:cy1, cx0:cx1]).any())


def observe_view(out: RenderOutput, scene, cfg) -> dict:
    """Observations of one rendered view (int keys; see module docstring).

    Args:
        out: the view's render (id maps and unoccluded pixel counts).
        scene: the ``Scene`` (for entity ids and appearance names).
        cfg: an ``ObserveConfig``.
    """
    height, width = out.instance.shape
    ent_px, part_px, gap = _thresholds(width, height, cfg)
    inst, part = out.instance, out.part
    masks, persons, objects = {}, {}, {}
    object_ids = {o.oid for o in scene.objects}  # ids tell people from objects only through the scene
    for ent_id in [p.pid for p in scene.persons] + [o.oid for o in scene.objects]:
        mask = inst == ent_id
        px, amodal = int(mask.sum()), out.amodal_px.get(ent_id, 0)
        masks[ent_id] = mask
        rec = {"px": px, "frac": round(px / amodal, 4) if amodal else 0.0, "box": _box(mask) if px else None,
               "visible": px >= ent_px}
        (objects if ent_id in object_ids else persons)[ent_id] = rec
    part_masks = {}
    for person in scene.persons:
        rec = persons[person.pid]
        visible_parts = []
        if rec["px"]:
            pm = part[masks[person.pid]]
            counts = np.bincount(pm.astype(np.int64), minlength=len(PART_ID) + 1)
            for name, pid_ in PART_ID.items():
                amodal = out.amodal_part_px.get((person.pid, pid_), 0)
                if counts[pid_] >= part_px and amodal and counts[pid_] / amodal >= cfg.min_part_visible:
                    visible_parts.append(name)
        rec["parts"] = visible_parts
        vis = set(visible_parts)
        attrs = {}
        if "torso" in vis:
            attrs["shirt"] = person.shirt
        if vis & {"upper_leg_l", "upper_leg_r"}:
            attrs["trousers"] = person.trousers
        if "hat" in vis or "head" in vis:
            attrs["hat"] = person.hat or "none"
        rec["attrs"] = attrs
        rec["arms"] = {s: {f"upper_arm_{s}", f"lower_arm_{s}"} <= vis for s in ("l", "r")}
        rec["seen"] = rec["visible"] and bool(vis & {"torso", "head"})
        rec["borderline"] = (rec["px"] > 0 and not rec["seen"])
    pairs = {}
    for person in scene.persons:
        prec = persons[person.pid]
        for obj in scene.objects:
            orec = objects[obj.oid]
            entry = {}
            if not prec["px"] or not orec["visible"]:
                entry = {k: HIDDEN for k in EFFECTORS + ["any"]}
            else:
                for eff in EFFECTORS:
                    key = (person.pid, eff)
                    if key not in part_masks:
                        m = masks[person.pid] & (part == PART_ID[eff])
                        part_masks[key] = (m, _box(m) if m.any() else None, int(m.sum()))
                    m, box, n = part_masks[key]
                    if n < part_px:
                        entry[eff] = HIDDEN
                    else:
                        entry[eff] = OVERLAP if _adjacent(m, box, masks[obj.oid], orec["box"], gap) else SEPARATED
                if _adjacent(masks[person.pid], prec["box"], masks[obj.oid], orec["box"], gap):
                    entry["any"] = OVERLAP
                elif prec["frac"] >= cfg.min_separated_frac and orec["frac"] >= cfg.min_separated_frac:
                    entry["any"] = SEPARATED
                else:
                    entry["any"] = HIDDEN
            pairs[(person.pid, obj.oid)] = entry
    return {"persons": persons, "objects": objects, "pairs": pairs}

