"""From benchmark samples to padded model batches over cached features.

A *view set* is one sample seen through an ordered list of its views: a protocol query
(evaluation, validation) or an augmented draw (training, training/data.py). ``build_item``
turns one into unpadded tensors, ``collate`` pads a list of them into the model's batch and
gathers their rows of a feature table (inputs/features.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from bench.format import Benchmark, Sample
from inputs.features import FeatureTable
from inputs.mark_facts import FACTS, mark_fact_table
from inputs.text import collate_text
from inputs.track import IGNORE, track_boxes, track_targets
from inputs.view_counts import view_count_targets


@dataclass(frozen=True)
class ViewSet:
    """One model input: a sample under an ordered list of view ids."""
    sample_index: int
    view_ids: tuple[str, ...]
    setting: str = "train"  # protocol setting name, or "train"
    answer_valid: bool = True  # False when augmentation removed a view the answer needs
    variant: str = ""  # the protocol query's variant ("drop=<view>" under -1); "" otherwise


def split_images(bench: Benchmark) -> list[Path]:
    """Every image path of a split (duplicates included; the cache deduplicates)."""
    return [bench.root / f.image for s in bench.samples for v in s.views for f in v.frames]


def frame_count(sample: Sample) -> int:
    """Frames of the longest view: what a batch is padded to."""
    return max(len(v.frames) for v in sample.views)


def _label_id(label: str) -> int:
    """Mark label "3" -> 3; labels that are not small integers map to 0 (unknown)."""
    try:
        value = int(label)
    except ValueError:
        return 0
    return value if 0 < value < 64 else 0


def mark_role(label: str, question: str, options: Sequence[str]) -> int:
    """How the text refers to a mark: bit 0 = its label is a word of the question ("the
    person marked 3"), bit 1 = it is one of the options ("3"). Set-of-marks grounding as an
    input: the model is told which marks the text names instead of discovering it."""
    role = 0
    if label and re.search(rf"(?<!\w){re.escape(label)}(?!\w)", question):
        role |= 1
    if label and any(option.strip() == label for option in options):
        role |= 2
    return role


def build_item(sample: Sample, view_set: ViewSet, root: Path, table: FeatureTable,
               text: dict[str, Any]) -> dict[str, Any]:
    """Unpadded tensors of one view set (the per-sample text is tokenised once, outside)."""
    views = [sample.view(v) for v in view_set.view_ids]
    n_v, n_t = len(views), max(len(v.frames) for v in views)
    marks_by_vt: dict[tuple[str, float], list] = {}
    mark_index = {}
    for i, mark in enumerate(sample.marks):
        marks_by_vt.setdefault((mark.view_id, mark.t), []).append(mark)
        mark_index[id(mark)] = i
    fact_table = mark_fact_table(sample.meta, len(sample.marks))
    n_m = max([len(marks_by_vt.get((v.view_id, f.t), [])) for v in views for f in v.frames] + [1])
    rows = torch.full((n_v, n_t), -1, dtype=torch.long)
    times = torch.zeros(n_v, n_t)
    K = torch.eye(3).repeat(n_v, 1, 1)
    R = torch.eye(3).repeat(n_v, 1, 1)
    t = torch.zeros(n_v, 3)
    hw = torch.zeros(n_v, 2)
    has_cam = torch.zeros(n_v, dtype=torch.bool)
    boxes = torch.zeros(n_v, n_t, n_m, 4)
    labels = torch.zeros(n_v, n_t, n_m, dtype=torch.long)
    roles = torch.zeros(n_v, n_t, n_m, dtype=torch.long)
    entity = torch.full((n_v, n_t, n_m), -1, dtype=torch.long)
    mark_mask = torch.zeros(n_v, n_t, n_m, dtype=torch.bool)
    facts = torch.full((n_v, n_t, n_m, len(FACTS)), IGNORE, dtype=torch.long)
    ev = torch.zeros(n_v, n_t)
    ent_ev = torch.zeros(n_v, n_t, n_m)
    spans = sample.evidence
    for i, view in enumerate(views):
        for j, frame in enumerate(view.frames):
            path = str((root / frame.image).resolve())
            rows[i, j] = table.index[path]
            times[i, j] = frame.t - view.frames[0].t
            hits = [s for s in spans if s.view_id == view.view_id and s.t_start - 1e-6 <= frame.t <= s.t_end + 1e-6]
            ev[i, j] = 1.0 if hits else 0.0
            wanted = {e for s in hits for e in s.entities}
            for k, mark in enumerate(marks_by_vt.get((view.view_id, frame.t), [])):
                boxes[i, j, k] = torch.tensor(mark.box)
                labels[i, j, k] = _label_id(mark.label)
                roles[i, j, k] = mark_role(mark.label, sample.question, sample.options)
                entity[i, j, k] = mark.entity
                mark_mask[i, j, k] = True
                facts[i, j, k] = fact_table[mark_index[id(mark)]]
                ent_ev[i, j, k] = 1.0 if mark.entity in wanted else 0.0
        first = str((root / view.frames[0].image).resolve())
        if view.camera is not None:
            cam = view.camera
            K[i], R[i], t[i] = torch.tensor(cam.K), torch.tensor(cam.R), torch.tensor(cam.t)
            hw[i] = torch.tensor([cam.height, cam.width], dtype=torch.float)
            has_cam[i] = True
        else:
            hw[i] = torch.tensor(table.sizes[first], dtype=torch.float)
    return {
        "rows": rows, "frame_time": times, "camera_K": K, "camera_R": R, "camera_t": t,
        "image_hw": hw, "has_camera": has_cam, "mark_boxes": boxes, "mark_label": labels,
        "mark_role": roles, "mark_entity": entity, "mark_mask": mark_mask, "mark_facts": facts, "evidence_target": ev,
        "entity_evidence_target": ent_ev, "evidence_valid": torch.tensor(bool(spans)),
        "track_target": track_targets(sample.task, sample.meta, view_set.view_ids, n_t),
        "count_target": view_count_targets(sample.meta, views, n_t),
        **dict(zip(("track_box", "track_box_flag"), track_boxes(sample.meta, views, n_t))),
        "prompt_ids": text["prompt_ids"], "option_ids": text["option_ids"],
        "answer": torch.tensor(sample.answer_index), "answer_valid": torch.tensor(view_set.answer_valid),
        "n_options": len(sample.options), "sample_index": view_set.sample_index, "setting": view_set.setting,
        **({"option_clip": text["option_clip"]} if "option_clip" in text else {}),
    }


def _pad(tensors: Sequence[torch.Tensor], value: float | int | bool = 0) -> torch.Tensor:
    """Stack tensors of equal rank, padding every dimension to the max with ``value``."""
    shape = [max(s) for s in zip(*(x.shape for x in tensors))]
    out = torch.full((len(tensors), *shape), value, dtype=tensors[0].dtype)
    for i, x in enumerate(tensors):
        out[(i, *(slice(0, n) for n in x.shape))] = x
    return out


def collate(items: list[dict[str, Any]], table: FeatureTable, pad_id: int) -> dict[str, Any]:
    """Pad view sets into one batch and gather their cached features (model contract)."""
    batch: dict[str, Any] = {}
    rows = _pad([it["rows"] for it in items], -1)  # (B, V, T)
    batch["frame_mask"] = rows >= 0
    batch["view_mask"] = batch["frame_mask"].any(-1)
    gather = rows.clamp(min=0)
    batch["patch_tokens"] = table.patch_tokens[gather].float() * batch["frame_mask"][..., None, None]
    batch["pooled"] = table.pooled[gather].float() * batch["frame_mask"][..., None]
    for key in ("frame_time", "camera_t", "image_hw", "has_camera", "mark_boxes", "mark_label",
                "mark_role", "mark_mask", "evidence_target", "entity_evidence_target"):
        batch[key] = _pad([it[key] for it in items])
    eye = torch.eye(3)
    for key in ("camera_K", "camera_R"):  # pad with identity so padded views stay well-defined
        mats = _pad([it[key] for it in items])
        pad_views = ~batch["view_mask"]
        mats[pad_views] = eye
        batch[key] = mats
    batch["image_hw"][~batch["view_mask"]] = 1.0
    batch["mark_entity"] = _pad([it["mark_entity"] for it in items], -1)
    batch["track_target"] = _pad([it["track_target"] for it in items], IGNORE)  # inputs/track.py
    batch["count_target"] = _pad([it["count_target"] for it in items], IGNORE)  # inputs/view_counts.py
    batch["mark_facts"] = _pad([it["mark_facts"] for it in items], IGNORE)  # inputs/mark_facts.py
    batch["track_box"] = _pad([it["track_box"] for it in items])  # inputs/track.py, track_boxes
    batch["track_box_flag"] = _pad([it["track_box_flag"] for it in items], IGNORE)
    batch.update(collate_text(items, pad_id))
    batch["answer"] = torch.stack([it["answer"] for it in items])
    batch["answer_valid"] = torch.stack([it["answer_valid"] for it in items])
    batch["evidence_valid"] = torch.stack([it["evidence_valid"] for it in items])
    batch["sample_index"] = torch.tensor([it["sample_index"] for it in items])
    batch["index"] = torch.tensor([it.get("index", -1) for it in items])
    batch["setting"] = [it["setting"] for it in items]
    return batch
