"""Per-view truth in words and numbers: what one rendered view shows, for pretraining a tower.

The in-domain CLIP (``pretrain.tower``) learns from single views only. This module
turns a scene, one camera's render and its observations into
- ``person_facts``: per visible person, the attribute classes the auxiliary heads predict
  (shirt, trousers, hat, posture, each arm's state, the touched object, visible fraction);
- ``view_caption``: a complete canonical caption of that view (people left to right, then
  the objects), with a sentence per marked person when the image carries Set-of-Mark boxes;
- ``CaptionTokenizer``: a closed word vocabulary over the caption grammar (no BPE table).

Nothing here links views: no identity across cameras, no scene-level count, no question text.
"""
from __future__ import annotations

import re

import numpy as np
import torch

# the attribute classes are the entity records' (bench.entities); the per-mark facts the benchmark
# records for training (meta "mark_facts"; inputs/mark_facts.py) are bench.entities.MARK_FACT_KEYS
from bench.entities import ARM_CLASSES, COLOUR_NAMES, FRAC_BINS, HAT_NAMES, IGNORE, OBJECT_KINDS, POSTURES
from bench.synth.primitives import COLOURS

assert list(COLOURS) == COLOUR_NAMES, "the palette renders the schema's colours, in its order"

_POSTURE_OF = {"stand": "standing", "raise_one": "standing", "raise_both": "standing", "walk": "walking",
               "jump": "jumping", "crouch": "crouching", "squat": "crouching", "sit": "sitting",
               "touch": "reaching", "near": "reaching", "reach": "reaching", "foot": "foot_up"}
_ARM_OF = {"down": "down", "side": "side", "hip": "hip", "raised": "raised", "reaching": "reaching",
           "wave": "waving"}


def posture_of(pose) -> str:
    """Whole-body posture class of a ``Pose`` (POSTURES)."""
    return _POSTURE_OF.get(pose.kind, "standing")


def touched_object(scene, pid: int, t: float) -> object | None:
    """The scene object person ``pid`` touches at time t (hand, foot or seat), else None."""
    script = scene.scripts.get(pid)
    if script is not None:
        touch = script.channels.get("touch")
        if not touch:
            return None
        f = min(max(int(round(t / scene.person(pid).track_dt)), 0), len(touch) - 1)
        name = touch[f]
        return next((o for o in scene.objects if o.name == name), None)
    oid = scene.touching(pid)
    return scene.obj(oid) if oid is not None else None


def person_facts(scene, obs: dict, t: float = 0.0) -> list[dict]:
    """Per person that the view shows (``seen``), its visible box and attribute classes.

    Args:
        scene: the ``Scene``; obs: ``observe_view`` of this view; t: the frame time.
    Returns:
        One dict per seen person, left to right by box centre: ``pid``, ``box`` (x0, y0, x1, y1
        in render pixels) and class ids ``shirt``, ``trousers``, ``hat``, ``posture``,
        ``arm_l``, ``arm_r``, ``contact_kind`` (0 = none, 1.. = OBJECT_KINDS),
        ``contact_colour`` (0 = none, 1.. = COLOUR_NAMES), ``frac`` (bin of FRAC_BINS);
        IGNORE where the view does not show the attribute.
    """
    out = []
    for person in scene.persons:
        rec = obs["persons"][person.pid]
        if not rec["seen"] or rec["box"] is None:
            continue
        now = person.at(t)
        attrs = rec["attrs"]
        touched = touched_object(scene, person.pid, t)
        facts = {
            "pid": person.pid, "box": list(rec["box"]),
            "shirt": COLOUR_NAMES.index(attrs["shirt"]) if "shirt" in attrs else IGNORE,
            "trousers": COLOUR_NAMES.index(attrs["trousers"]) if "trousers" in attrs else IGNORE,
            "hat": HAT_NAMES.index(attrs["hat"]) if "hat" in attrs else IGNORE,
            "posture": POSTURES.index(posture_of(now.pose)),
            "contact_kind": OBJECT_KINDS.index(touched.kind) + 1 if touched else 0,
            "contact_colour": COLOUR_NAMES.index(touched.colour) + 1 if touched else 0,
            "frac": int(np.searchsorted(FRAC_BINS, rec["frac"])),
        }
        for side in ("l", "r"):
            state = _ARM_OF.get(now.pose.arms.get(side, "down"), "down")
            facts[f"arm_{side}"] = ARM_CLASSES.index(state) if rec["arms"][side] else IGNORE
        out.append(facts)
    out.sort(key=lambda f: (f["box"][0] + f["box"][2], f["pid"]))
    return out


def _person_words(f: dict) -> list[str]:
    words = []
    if f["shirt"] != IGNORE:
        words.append(f"{COLOUR_NAMES[f['shirt']]} shirt")
    if f["trousers"] != IGNORE:
        words.append(f"{COLOUR_NAMES[f['trousers']]} trousers")
    if f["hat"] != IGNORE:
        words.append("no hat" if f["hat"] == 0 else f"{HAT_NAMES[f['hat']]} hat")
    words.append(POSTURES[f["posture"]].replace("_", " "))
    for side, name in (("l", "left"), ("r", "right")):
        if f[f"arm_{side}"] not in (IGNORE, 0):
            words.append(f"{name} arm {ARM_CLASSES[f[f'arm_{side}']]}")
    if f["contact_kind"]:
        words.append(f"touching {COLOUR_NAMES[f['contact_colour'] - 1]} {OBJECT_KINDS[f['contact_kind'] - 1]}")
    return words


def view_caption(facts: list[dict], objects: list[str], marks: dict[int, str] | None = None) -> str:
    """The canonical caption of one view.

    Args:
        facts: ``person_facts`` of the view (left to right).
        objects: names ("red box") of the objects the view shows, left to right.
        marks: pid -> mark label for the people the image marks (Set-of-Mark), if any.
    """
    n = len(facts)
    parts = [f"{n} {'person' if n == 1 else 'people'} ."]
    for f in facts:
        parts.append("person : " + " , ".join(_person_words(f)) + " .")
    parts.append("objects : " + (" , ".join(objects) if objects else "none") + " .")
    for f in facts:
        if marks and f["pid"] in marks:
            parts.append(f"person marked {marks[f['pid']]} : " + " , ".join(_person_words(f)) + " .")
    return " ".join(parts)


def caption_vocabulary() -> list[str]:
    """Every word the caption grammar can produce (sorted, stable)."""
    words = {"person", "people", "shirt", "trousers", "hat", "no", "arm", "left", "right", "touching",
             "objects", "none", "marked", ":", ",", "."}
    words |= {str(i) for i in range(16)}
    words |= set(COLOUR_NAMES) | set(HAT_NAMES) | set(OBJECT_KINDS) | set(ARM_CLASSES)
    words |= {w for p in POSTURES for w in p.split("_")}
    return sorted(words)


class CaptionTokenizer:
    """Closed-vocabulary word tokenizer for the caption grammar, open_clip style output.

    Ids: 0 pad, 1 start, 2 unknown word, then the vocabulary, and end-of-text as the LARGEST id
    (open_clip's text tower pools at the argmax token id). Text is lower-cased and split into
    words and the punctuation marks ``: , . ? ( )``; words outside the vocabulary become unknown.

    Args:
        vocab: the word list (``caption_vocabulary()`` when None).
        context_length: tokens per text, start and end included; longer texts are cut.
        drop_unknown: leave out words outside the vocabulary instead of coding them as unknown
            (zero-shot scoring of free text such as benchmark questions).
    """

    PAD, SOT, UNK = 0, 1, 2

    def __init__(self, vocab: list[str] | None = None, context_length: int = 128, drop_unknown: bool = False):
        self.vocab = list(vocab if vocab is not None else caption_vocabulary())
        self.index = {w: i + 3 for i, w in enumerate(self.vocab)}
        self.eot = len(self.vocab) + 3
        self.vocab_size = self.eot + 1
        self.context_length = context_length
        self.drop_unknown = drop_unknown

    def encode(self, text: str) -> list[int]:
        words = re.findall(r"[a-z0-9_]+|[:,.?()]", text.lower())
        ids = [self.index.get(w, self.UNK) for w in words]
        return [i for i in ids if i != self.UNK] if self.drop_unknown else ids

    def __call__(self, texts: str | list[str]) -> torch.Tensor:
        """(N, context_length) int64 token ids."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        out = torch.full((len(texts), self.context_length), self.PAD, dtype=torch.long)
        for i, text in enumerate(texts):
            ids = [self.SOT] + self.encode(text)[: self.context_length - 2] + [self.eot]
            out[i, : len(ids)] = torch.tensor(ids)
        return out
