"""Entity batches: one token per (view, frame, entity) of a view set, its question and options.

What the entity reasoner (``model.entity_reasoner``) reads. The entities come from per-image
records (``bench.entities``): the ground truth for the entity ceiling, or what the
perception heads predict in the same format. A record's ``id`` is a training target only
(association and pointer), never an input.

Text is a closed word vocabulary (``WordVocab``): the attribute classes' names are words of it,
so the reasoner embeds "red" once, as the class of a shirt and as a word of an option.
"""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any, Sequence

import torch

from bench.format import Sample
from bench.entities import (AIRBORNE_NAMES, ARM_CLASSES, ARM_TEXT, COLOUR_NAMES, CONTACT_KEYS, EFFECTOR_TEXT, FIELDS,
                            FRAC_NAMES, HAT_NAMES, OBJECT_KINDS, POSTURES)

_WORD = re.compile(r"[a-z]+|\d+")
PAD, UNK, CLS = 0, 1, 2
CONTACT_WIDTH = len(CONTACT_KEYS) * 2 * (len(OBJECT_KINDS) + len(COLOUR_NAMES))
# the words naming each class of each categorical field, in class order
# (postures and arm states in the words the questions' options use: "jumps", "raising it above the head")
_POSTURE_WORDS = {"standing": "stands", "walking": "walks", "jumping": "jumps", "crouching": "squats",
                  "sitting": "sits down", "reaching": "reaches", "foot_up": "foot up"}
_ARM_WORDS = {**ARM_TEXT, "waving": "waving it"}
CLASS_NAMES: dict[str, list[str]] = {
    "shirt": COLOUR_NAMES, "trousers": COLOUR_NAMES, "hat": HAT_NAMES, "posture": [_POSTURE_WORDS[p] for p in POSTURES],
    "arm_l": [_ARM_WORDS[a] for a in ARM_CLASSES], "arm_r": [_ARM_WORDS[a] for a in ARM_CLASSES],
    "airborne": AIRBORNE_NAMES, "frac": FRAC_NAMES,
    "object_kind": OBJECT_KINDS, "object_colour": COLOUR_NAMES}
# the words naming each contact effector (bench.entities.CONTACT_KEYS), and an object's
# kind and colour (the contact multi-hot's last axis)
EFFECTOR_NAMES = [EFFECTOR_TEXT.get(k, "body") for k in CONTACT_KEYS]
DESCRIPTOR_NAMES = OBJECT_KINDS + COLOUR_NAMES
# the hand actions an order question names, as (arm field, arm class): "what does X do first"
HAND_ACTIONS = {"raises the left hand": ("arm_l", "raised"), "raises the right hand": ("arm_r", "raised"),
                "waves the left hand": ("arm_l", "waving"), "waves the right hand": ("arm_r", "waving")}
MAX_NUMBER = 16  # number words 0..16 are always in the vocabulary (counts, mark labels)


def mark_role(label: str, question: str, options: Sequence[str]) -> int:
    """How the text refers to a mark: bit 0 = its label is a word of the question ("the
    person marked 3"), bit 1 = it is one of the options ("3")."""
    role = 0
    if label and re.search(rf"(?<!\w){re.escape(label)}(?!\w)", question):
        role |= 1
    if label and any(option.strip() == label for option in options):
        role |= 2
    return role


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("_", " "))


class WordVocab:
    """Lower-case word vocabulary; unknown words map to ``UNK``."""

    def __init__(self, vocab: Sequence[str]):
        self.itos = list(vocab)
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    @classmethod
    def build(cls, texts: Sequence[str]) -> "WordVocab":
        """The special tokens, number words, class names, then every word of ``texts`` (sorted)."""
        base = ["<pad>", "<unk>", "<cls>"] + [str(k) for k in range(MAX_NUMBER + 1)]
        names = sorted({w for classes in [*CLASS_NAMES.values(), EFFECTOR_NAMES, list(HAND_ACTIONS)]
                        for c in classes for w in words(c)})
        seen = set(base)
        vocab = [w for w in base] + [w for w in names if w not in seen]
        seen.update(vocab)
        vocab += sorted({w for t in texts for w in words(t)} - seen)
        return cls(vocab)

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str, cls_token: bool = False) -> list[int]:
        ids = [self.stoi.get(w, UNK) for w in words(text)]
        return ([CLS] if cls_token else []) + (ids or [UNK])

    def phrases(self, texts: Sequence[str]) -> torch.Tensor:
        """(len(texts), max words) word ids of each text, padded with PAD."""
        ids = [self.encode(c) for c in texts]
        width = max(len(i) for i in ids)
        return torch.tensor([i + [PAD] * (width - len(i)) for i in ids])

    def class_words(self) -> dict[str, torch.Tensor]:
        """Per field, (classes, max words) word ids of its class names, padded with PAD; then
        ``effector`` (contact effectors), ``descriptor`` (object kinds, then colours) and
        ``hand_action`` (``HAND_ACTIONS``)."""
        out = {field: self.phrases(classes) for field, classes in CLASS_NAMES.items()}
        out["effector"] = self.phrases(EFFECTOR_NAMES)
        out["descriptor"] = self.phrases(DESCRIPTOR_NAMES)
        out["hand_action"] = self.phrases(list(HAND_ACTIONS))
        return out


def load_entity_labels(bench_dir: str | Path, split: str, allow_eval_splits: bool = False) -> dict[str, dict]:
    """Scene id -> image stem -> entity records, from ``bench_dir/labels/<split>.jsonl.gz``.

    Training reads the train split's labels only: the labels of val and test are there for the
    entity ceiling (``allow_eval_splits=True``), which is told the truth on purpose.
    """
    if split != "train" and not allow_eval_splits:
        raise PermissionError(f"entity labels of the {split!r} split are not for training: only the ceiling "
                              "(allow_eval_splits=True) reads labels outside train")
    path = Path(bench_dir) / "labels" / f"{split}.jsonl.gz"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; regenerate the benchmark with python -m bench generate "
                                "(the generator writes per-entity labels beside the splits)")
    out = {}
    with gzip.open(path, "rt") as fh:
        for line in fh:
            rec = json.loads(line)
            out[rec["scene"]] = rec["images"]
    return out


def load_predicted_records(path: str | Path) -> dict[str, list[dict]]:
    """Image path (relative to its split) -> predicted entity records (``pretrain.perception``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; write predicted records with python -m pretrain.perception")
    out = {}
    with gzip.open(path, "rt") as fh:
        for line in fh:
            rec = json.loads(line)
            out[rec["image"]] = rec["entities"]
    return out


def write_predicted_records(path: str | Path, records: dict[str, list[dict]]) -> None:
    """``load_predicted_records``' file: one line per image (its path relative to its split, and
    its entity records), sorted, gzipped with no timestamp, written atomically."""
    from common.atomic import atomic_write_bytes
    lines = [json.dumps({"image": image, "entities": recs}, separators=(",", ":")) + "\n"
             for image, recs in sorted(records.items())]
    atomic_write_bytes(path, gzip.compress("".join(lines).encode(), mtime=0))


def match_records(pred: list[dict], truth: list[dict], iou: float = 0.5) -> list[tuple[int, int]]:
    """Greedy matching, by score, of predicted records to true ones of the same kind at IoU >= ``iou``:
    (pred index, truth index) pairs."""
    pairs = []
    for kind in ("person", "object"):
        order = sorted((i for i, e in enumerate(pred) if e["kind"] == kind), key=lambda i: -pred[i].get("score", 1.0))
        free = {j for j, t in enumerate(truth) if t["kind"] == kind}
        for i in order:
            best = max(free, key=lambda j: _iou(pred[i]["box"], truth[j]["box"]), default=None)
            if best is not None and _iou(pred[i]["box"], truth[best]["box"]) >= iou:
                pairs.append((i, best))
                free.discard(best)
    return pairs


def with_true_ids(pred: dict[str, list[dict]], labels: dict[str, dict]) -> dict[str, list[dict]]:
    """Predicted records of the train split with the ``id`` of the true entity each matches (-1: none),
    the targets of the pointer and association losses. ``pred`` keys are ``images/<scene>/<file>``."""
    out = {}
    for image, recs in pred.items():
        scene = Path(image).parent.name
        truth = labels.get(scene, {}).get(image_stem(image), [])
        recs = [dict(e, id=-1) for e in recs]
        for i, j in match_records(recs, truth):
            recs[i]["id"] = int(truth[j]["id"])
        out[image] = recs
    return out


def image_stem(image: str) -> str:
    """The clean view or frame an image shows ("cam2" for images/s000001/cam2_m0123456789ab.png)."""
    stem = Path(image).stem
    m = re.match(r"^(.+)_m[0-9a-f]{12}$", stem)
    return m.group(1) if m else stem


def _iou(a: Sequence[float], b: Sequence[float]) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _frames_image(box: Sequence[float], hw: tuple[float, float]) -> bool:
    return (box[2] - box[0]) * (box[3] - box[1]) >= 0.9 * hw[0] * hw[1]


def contact_vector(contact: list) -> list[float]:
    """The multi-hot (effector x overlap/separated x object kind and colour) of a contact list."""
    out = [0.0] * CONTACT_WIDTH
    desc = len(OBJECT_KINDS) + len(COLOUR_NAMES)
    for eff, kind, colour, overlap in contact:
        base = (eff * 2 + (1 - int(overlap))) * desc
        out[base + kind] = 1.0
        out[base + len(OBJECT_KINDS) + colour] = 1.0
    return out


def build_entity_item(sample: Sample, view_ids: Sequence[str], images: dict[str, list[dict]],
                      vocab: WordVocab) -> dict[str, Any]:
    """Unpadded tensors of one view set of ``sample`` (E entity tokens).

    Args:
        view_ids: the views shown, in order; images: image path (as the frame names it) or image
            stem -> entity records (predicted records are keyed by path, the truth by stem).
    Returns:
        ``fields`` (E, F) long class + 1 (0: not shown), ``contact`` (E, CONTACT_WIDTH), ``kind``
        (E,) 0 person / 1 object, ``box`` (E, 4) pixels, ``image_hw`` (E, 2), ``view`` / ``frame``
        (E,) long indices, ``time`` (E,) seconds, ``mark`` (E,) word id of the attached mark's
        label (0: none), ``image_mark`` (E,) word id of a mark framing the entity's whole image,
        ``mark_role`` (E,), ``camera_K`` / ``camera_R`` (V, 3, 3), ``camera_t``
        (V, 3), ``has_camera`` (V,); targets ``entity_id`` (E,) and ``pointer`` (E,) float.
    """
    rows: dict[str, list] = {k: [] for k in ("fields", "contact", "kind", "box", "image_hw", "view", "frame", "time",
                                             "mark", "image_mark", "mark_role", "entity_id", "pointer")}
    Ks, Rs, ts, has_cam = [], [], [], []
    evidence = {}  # the pointer's target: the entities the evidence names, in its views and time spans
    for span in sample.evidence:
        evidence.setdefault(span.view_id, []).append(span)
    for v_idx, vid in enumerate(view_ids):
        view = sample.view(vid)
        cam = view.camera
        if cam is not None:
            Ks.append(torch.tensor(cam.K, dtype=torch.float32))
            Rs.append(torch.tensor(cam.R, dtype=torch.float32))
            ts.append(torch.tensor(cam.t, dtype=torch.float32))
            hw = (float(cam.height), float(cam.width))
        else:
            Ks.append(torch.eye(3))
            Rs.append(torch.eye(3))
            ts.append(torch.zeros(3))
            hw = (224.0, 224.0)
        has_cam.append(cam is not None)
        for f_idx, frame in enumerate(view.frames):
            stem = image_stem(frame.image)
            ents = images.get(frame.image, images.get(stem))
            if ents is None:
                raise KeyError(f"sample {sample.id}: no entity records for image {frame.image!r} (stem {stem!r})")
            marks = [m for m in sample.marks if m.view_id == vid and abs(m.t - frame.t) < 1e-6]
            mark_of: dict[int, Any] = {}
            framed = [m for m in marks if _frames_image(m.box, hw)]  # a mark that frames the whole image
            marks = [m for m in marks if m not in framed]
            image_mark = vocab.stoi.get(framed[0].label, UNK) if framed else 0
            for m in marks:  # a mark attaches to the entity its box overlaps most
                best = max(range(len(ents)), key=lambda i: _iou(ents[i]["box"], m.box), default=None)
                if best is not None and _iou(ents[best]["box"], m.box) > 0.1:
                    mark_of[best] = m
            for i, e in enumerate(ents):
                person = e["kind"] == "person"
                rows["fields"].append([int(e.get(f, -1)) + 1 for f in FIELDS])
                rows["contact"].append((e["contact_p"] if "contact_p" in e else contact_vector(e.get("contact", [])))
                                       if person else [0.0] * CONTACT_WIDTH)
                rows["kind"].append(0 if person else 1)
                rows["box"].append([float(x) for x in e["box"]])
                rows["image_hw"].append(hw)
                rows["view"].append(v_idx)
                rows["frame"].append(f_idx)
                rows["time"].append(float(frame.t))
                m = mark_of.get(i)
                rows["mark"].append(vocab.stoi.get(m.label, UNK) if m is not None else 0)
                rows["image_mark"].append(image_mark)
                rows["mark_role"].append(mark_role(m.label, sample.question, sample.options) if m is not None else 0)
                rows["entity_id"].append(int(e["id"]))
                hit = any(int(e["id"]) in span.entities and span.t_start - 1e-6 <= frame.t <= span.t_end + 1e-6
                          for span in evidence.get(vid, []))
                rows["pointer"].append(float(hit))
    if not rows["kind"]:
        raise ValueError(f"sample {sample.id}: no entity in views {list(view_ids)}")
    out = {k: torch.tensor(v, dtype=torch.float32 if k in ("contact", "box", "image_hw", "time", "pointer")
                           else torch.long) for k, v in rows.items()}
    out.update(camera_K=torch.stack(Ks), camera_R=torch.stack(Rs), camera_t=torch.stack(ts),
               has_camera=torch.tensor(has_cam))
    return out


def build_text_item(sample: Sample, vocab: WordVocab) -> dict[str, Any]:
    """Question ids (with a leading CLS), each option's ids, the answer index."""
    return {"question": torch.tensor(vocab.encode(sample.question, cls_token=True)),
            "options": [torch.tensor(vocab.encode(o, cls_token=True)) for o in sample.options],
            "answer": sample.answer_index}


def _pad(tensors: list[torch.Tensor], value=0) -> torch.Tensor:
    n = max(t.shape[0] for t in tensors)
    out = torch.full((len(tensors), n, *tensors[0].shape[1:]), value, dtype=tensors[0].dtype)
    for i, t in enumerate(tensors):
        out[i, :t.shape[0]] = t
    return out


def collate_entities(items: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Pad a list of ``build_entity_item`` + ``build_text_item`` dicts into a batch.

    Adds ``entity_mask`` (B, E), ``view_mask`` (B, V), ``question_mask`` (B, L), ``option_ids``
    (B, O, Lo), ``option_mask`` (B, O, Lo), ``option_valid`` (B, O), ``answer`` (B,).
    """
    batch: dict[str, torch.Tensor] = {}
    for key in ("fields", "contact", "kind", "box", "image_hw", "view", "frame", "time", "mark", "image_mark",
                "mark_role", "entity_id", "pointer"):
        batch[key] = _pad([it[key] for it in items], -1 if key == "entity_id" else 0)
    batch["entity_mask"] = _pad([torch.ones(len(it["kind"]), dtype=torch.bool) for it in items], False)
    batch["image_hw"][~batch["entity_mask"]] = 224.0
    for key in ("camera_K", "camera_R"):
        batch[key] = _pad([it[key] for it in items])
        pad = batch[key].abs().sum((-1, -2)) == 0
        batch[key][pad] = torch.eye(3)
    batch["camera_t"] = _pad([it["camera_t"] for it in items])
    batch["has_camera"] = _pad([it["has_camera"] for it in items], False)
    batch["view_mask"] = _pad([torch.ones(len(it["camera_t"]), dtype=torch.bool) for it in items], False)
    batch["question"] = _pad([it["question"] for it in items], PAD)
    batch["question_mask"] = batch["question"] != PAD
    n_opt = max(len(it["options"]) for it in items)
    width = max(len(o) for it in items for o in it["options"])
    opts = torch.full((len(items), n_opt, width), PAD, dtype=torch.long)
    for b, it in enumerate(items):
        for o, ids in enumerate(it["options"]):
            opts[b, o, :len(ids)] = ids
    batch["option_ids"] = opts
    batch["option_mask"] = opts != PAD
    batch["option_valid"] = batch["option_mask"].any(-1)
    batch["answer"] = torch.tensor([it["answer"] for it in items])
    return batch
