"""Per-entity labels of one rendered image: every seen person and visible object, as that view shows it.

An entity record is what perfect perception of *one image* could report, never more: a person's
shirt only when the torso is visible, an arm's state only when the arm is, the posture and
whether the feet are off the floor only when a shin or a foot is, and contact as the image's 2-D
relation between a body part and an object (``overlap`` is ambiguous in 2-D: it is not contact).
No record links views: ``id`` (the renderer's person or object id) is a training label for the
association head and the pointer, never an input. The entity ceiling feeds these records to the
reasoning model in place of predicted ones; the perception heads learn them (train split only).

Record (JSON, one per entity, left to right by box centre):
    {"id": int, "kind": "person" | "object", "box": [x0, y0, x1, y1],
     person: "frac", "shirt", "trousers", "hat", "posture", "arm_l", "arm_r", "airborne"
             (class ids of ``bench.synth.captions``; -1 where the view does not show it),
             "contact": [[effector index, object kind, object colour, 1 overlap | 0 separated], ...]
     object: "object_kind", "object_colour"}
"""
from __future__ import annotations

import numpy as np

from bench.synth.captions import (ARM_CLASSES, COLOUR_NAMES, FRAC_BINS, HAT_NAMES, IGNORE, OBJECT_KINDS, POSTURES,
                                  posture_of)
from bench.synth.observe import EFFECTORS, OVERLAP, SEPARATED

FEET = {"foot_l", "foot_r", "lower_leg_l", "lower_leg_r"}  # a visible shin or foot shows posture and airborne
CONTACT_KEYS = EFFECTORS + ["any"]
_ARM_OF = {"down": "down", "side": "side", "hip": "hip", "raised": "raised", "reaching": "reaching", "wave": "waving"}


def _airborne(scene, person, t: float) -> int:
    script = scene.scripts.get(person.pid)
    if script is not None and "jump" in script.channels:
        jump = script.channels["jump"]
        f = min(max(int(round(t / person.track_dt)), 0), len(jump) - 1)
        return int(str(jump[f]) == "1")
    return int(person.at(t).pose.kind == "jump")


def image_entities(scene, obs: dict, t: float = 0.0) -> list[dict]:
    """The entity records of one image (see module docstring).

    Args:
        scene: the ``Scene``; obs: ``observe_view`` of this image; t: the frame time.
    """
    out = []
    for person in scene.persons:
        rec = obs["persons"][person.pid]
        if not rec["seen"] or rec["box"] is None:
            continue
        attrs, parts, now = rec["attrs"], set(rec["parts"]), person.at(t)
        feet = bool(FEET & parts)
        ent = {"id": person.pid, "kind": "person", "box": list(rec["box"]),
               "frac": int(np.searchsorted(FRAC_BINS, rec["frac"])),
               "shirt": COLOUR_NAMES.index(attrs["shirt"]) if "shirt" in attrs else IGNORE,
               "trousers": COLOUR_NAMES.index(attrs["trousers"]) if "trousers" in attrs else IGNORE,
               "hat": HAT_NAMES.index(attrs["hat"]) if "hat" in attrs else IGNORE,
               "posture": POSTURES.index(posture_of(now.pose)) if feet else IGNORE,
               "airborne": _airborne(scene, person, t) if feet else IGNORE}
        for side in ("l", "r"):
            state = _ARM_OF.get(now.pose.arms.get(side, "down"), "down")
            ent[f"arm_{side}"] = ARM_CLASSES.index(state) if rec["arms"][side] else IGNORE
        contact = []
        for obj in scene.objects:
            pair = obs["pairs"].get((person.pid, obj.oid), {})
            for e, key in enumerate(CONTACT_KEYS):
                status = pair.get(key)
                if status in (OVERLAP, SEPARATED):
                    contact.append([e, OBJECT_KINDS.index(obj.kind), COLOUR_NAMES.index(obj.colour),
                                    int(status == OVERLAP)])
        ent["contact"] = contact
        out.append(ent)
    for obj in scene.objects:
        rec = obs["objects"][obj.oid]
        if not rec["visible"] or rec["box"] is None:
            continue
        out.append({"id": obj.oid, "kind": "object", "box": list(rec["box"]),
                    "object_kind": OBJECT_KINDS.index(obj.kind), "object_colour": COLOUR_NAMES.index(obj.colour)})
    out.sort(key=lambda e: (e["box"][0] + e["box"][2], e["id"]))
    return out


def scene_entities(cfg, sid: str) -> dict[str, list[dict]]:
    """Image stem ("cam2", "cam0_f03") -> entity records, for a scene rebuilt from its generator config."""
    from bench.synth.generate import build_scene, build_temporal_scene
    if sid[:1] not in ("s", "t") or not sid[1:].isdigit():
        raise ValueError(f"scene id {sid!r} is not a synthetic scene id (s000123 / t000012)")
    if sid[0] == "s":
        scene, _, obs, _ = build_scene(cfg, int(sid[1:]))
        return {v: image_entities(scene, o, 0.0) for v, o in obs.items()}
    scene, _, obs, _ = build_temporal_scene(cfg, int(sid[1:]))
    return {f"{v}_f{f:02d}": image_entities(scene, o, t) for v, os_ in obs.items()
            for f, (o, t) in enumerate(zip(os_, scene.times))}


FIELDS = {"shirt": len(COLOUR_NAMES), "trousers": len(COLOUR_NAMES), "hat": len(HAT_NAMES),
          "posture": len(POSTURES), "arm_l": len(ARM_CLASSES), "arm_r": len(ARM_CLASSES), "airborne": 2,
          "frac": len(FRAC_BINS) + 1, "object_kind": len(OBJECT_KINDS), "object_colour": len(COLOUR_NAMES)}
"""Class count of each categorical field of a record (the perception heads' outputs)."""
