"""Per-entity labels of one rendered image: every seen person and visible object, as that view shows it.

``image_entities`` computes the entity records of one image (``bench.entities``: the record's
schema and format, its fields' classes); the generator writes them to ``<bench>/labels/<split>.jsonl.gz``
(``bench.synth.generate``, which also rebuilds a scene's records from its config: ``scene_entities``).
A record is what perfect perception of *one image* could report, never more: a person's shirt only
when the torso is visible, an arm's state only when the arm is, the posture and whether the feet are
off the floor only when a shin or a foot is, and contact as the image's 2-D relation between a body
part and an object (``overlap`` is ambiguous in 2-D: it is not contact). No record links views:
``id`` (the renderer's person or object id) is a training label for the association head and the
pointer, never an input. The entity ceiling feeds these records to the reasoning model in place of
predicted ones; the perception heads learn them (train split only).
"""
from __future__ import annotations

import numpy as np

from bench.entities import (ARM_CLASSES, COLOUR_NAMES, CONTACT_KEYS, FRAC_BINS, HAT_NAMES, IGNORE, OBJECT_KINDS,
                            POSTURES)
from bench.entities import FIELDS  # noqa: F401  (for importers not yet moved to bench.entities)
from bench.synth.captions import posture_of
from bench.synth.observe import OVERLAP, SEPARATED

FEET = {"foot_l", "foot_r", "lower_leg_l", "lower_leg_r"}  # a visible shin or foot shows posture and airborne
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
