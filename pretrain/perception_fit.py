"""Train the perception heads on the train split's entity labels, and their figures.

    fit_perception(bench_dir, caches, cfg) -> (heads, history)
    perception_figures(predicted records, true records) -> recall, precision, attribute accuracy

Prediction (the heads on any benchmark's images) is ``inputs.perception``, which the evaluator
reads too.

Targets come from ``<bench>/labels/train.jsonl.gz`` only (``inputs.entity_batch.load_entity_labels``
refuses the others for training). Validation figures compare decoded detections with the val
labels, read for measurement: person recall and precision at IoU 0.5, and per-field accuracy on
the matched entities where the view shows the field.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from bench.entities import FIELDS, FRAC_NAMES
from bench.format import Benchmark, Camera, load_benchmark
from inputs.entity_batch import CONTACT_WIDTH, contact_vector, load_entity_labels, match_records
from inputs.perception import LevelCaches, benchmark_images, features
from model.camera import floor_points, pixel_rays
from model.perception import KINDS, OBJECT_FIELDS, PERSON_FIELDS, PerceptionConfig, PerceptionHeads


@dataclass
class PerceptionFitConfig:
    epochs: int = 12
    batch_size: int = 64
    lr: float = 2e-3
    weight_decay: float = 0.01
    seed: int = 0
    box_weight: float = 1.0  # the box distances' L1 (in output cells) beside the centre focal loss
    heads: PerceptionConfig = field(default_factory=PerceptionConfig)


def split_images(bench_dir: Path, split: str) -> list[tuple[str, str, str]]:
    """(absolute image path, scene, stem) of every image a question of the split shows."""
    return benchmark_images(load_benchmark(Path(bench_dir) / split, check_images=False))


def _targets(ents: list[dict], size: int, hw: tuple[float, float]):
    """Heatmap (2, S, S), box distances (4, S, S), box mask (S, S) of one image's records."""
    heat = torch.zeros(len(KINDS), size, size)
    box = torch.zeros(4, size, size)
    where = torch.zeros(size, size, dtype=torch.bool)
    sx, sy = size / hw[1], size / hw[0]
    ys, xs = torch.meshgrid(torch.arange(size) + 0.5, torch.arange(size) + 0.5, indexing="ij")
    for e in ents:
        x0, y0, x1, y1 = e["box"][0] * sx, e["box"][1] * sy, e["box"][2] * sx, e["box"][3] * sy
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        sigma = max(0.5, 0.15 * math.sqrt(max(x1 - x0, 1e-3) * max(y1 - y0, 1e-3)))
        k = KINDS.index(e["kind"])
        g = torch.exp(-((xs - cx) ** 2 + (ys - cy) ** 2) / (2 * sigma ** 2))
        ix, iy = min(int(cx), size - 1), min(int(cy), size - 1)
        g[iy, ix] = 1.0
        heat[k] = torch.maximum(heat[k], g)
        box[:, iy, ix] = torch.tensor([ix + 0.5 - x0, iy + 0.5 - y0, x1 - ix - 0.5, y1 - iy - 0.5])
        where[iy, ix] = True
    return heat, box, where


def focal_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """CenterNet's penalty-reduced focal loss, normalised by the number of centres."""
    p = torch.sigmoid(logits).clamp(1e-4, 1 - 1e-4)
    pos = target.eq(1).float()
    pos_loss = -torch.log(p) * (1 - p) ** 2 * pos
    neg_loss = -torch.log(1 - p) * p ** 2 * (1 - target) ** 4 * (1 - pos)
    return (pos_loss.sum() + neg_loss.sum()) / pos.sum().clamp_min(1)


def _batch_targets(ents_list, size: int, hw):
    heats, boxes, wheres, rois, fields, contacts = [], [], [], [], {f: [] for f in FIELDS}, []
    sx, sy = size / hw[1], size / hw[0]
    for i, ents in enumerate(ents_list):
        h, b, w = _targets(ents, size, hw)
        heats.append(h)
        boxes.append(b)
        wheres.append(w)
        for e in ents:
            rois.append([float(i), e["box"][0] * sx, e["box"][1] * sy, e["box"][2] * sx, e["box"][3] * sy])
            for f in FIELDS:
                own = f in (PERSON_FIELDS if e["kind"] == "person" else OBJECT_FIELDS)
                fields[f].append(int(e.get(f, -1)) + 1 if own else -100)  # -100: not this kind's field
            contacts.append(contact_vector(e.get("contact", [])) if e["kind"] == "person" else [-1.0] * CONTACT_WIDTH)
    return (torch.stack(heats), torch.stack(boxes), torch.stack(wheres), torch.tensor(rois).view(-1, 5),
            {f: torch.tensor(v, dtype=torch.long) for f, v in fields.items()}, torch.tensor(contacts).view(-1, CONTACT_WIDTH))


def perception_loss(heads: PerceptionHeads, maps: dict, targets, box_weight: float = 1.0) -> dict[str, torch.Tensor]:
    heat_t, box_t, where, rois, fields, contact = targets
    heat = focal_loss(maps["heat"], heat_t)
    box = (F.l1_loss(maps["box"].permute(0, 2, 3, 1)[where], box_t.permute(0, 2, 3, 1)[where])
           if where.any() else heat * 0)
    out = heads.read(maps["feat"], rois) if len(rois) else None
    attr = sum(F.cross_entropy(out[f], fields[f], ignore_index=-100) for f in FIELDS
               if out is not None and (fields[f] != -100).any()) if out is not None else heat * 0
    person = contact[:, 0] >= 0
    ct = (F.binary_cross_entropy_with_logits(out["contact"][person], contact[person])
          if out is not None and person.any() else heat * 0)
    return {"loss": heat + box_weight * box + attr + ct, "heat": heat, "box": box, "attr": attr, "contact": ct}


def perception_figures(preds: dict[str, list[dict]], truths: dict[str, list[dict]],
                       cameras: dict[str, Camera] | None = None) -> dict[str, float]:
    """Recall / precision per kind at IoU 0.5, person recall by visible fraction (the true record's
    ``frac`` bin, ``bench.entities.FRAC_NAMES``), per-field accuracy on matched entities (in %), and
    with ``cameras`` (image path -> its view's camera) the median floor-point error of matched
    persons in metres (``person_floor_error_m``: where the ray through the box's bottom centre meets
    the floor, predicted box against true box; the floor point the entity reasoner reads)."""
    n = {k: [0, 0, 0] for k in KINDS}  # matched, predicted, true
    loose = {k: 0 for k in KINDS}  # matched at IoU 0.3: found, with a loose box
    by_frac = [[0, 0] for _ in FRAC_NAMES]  # matched, true persons per visible-fraction bin
    right: dict[str, list[int]] = {f: [0, 0] for f in FIELDS}
    floor: list[tuple[Camera, list[float], list[float]]] = []
    for path, truth in truths.items():
        pred = preds.get(path, [])
        matched = match_records(pred, truth)
        for i, _ in match_records(pred, truth, iou=0.3):
            loose[pred[i]["kind"]] += 1
        found = {j for _, j in matched}
        for j, t in enumerate(truth):
            if t["kind"] == "person" and 0 <= t.get("frac", -1) < len(FRAC_NAMES):
                by_frac[t["frac"]][0] += j in found
                by_frac[t["frac"]][1] += 1
        for kind in KINDS:
            pairs = [(i, j) for i, j in matched if pred[i]["kind"] == kind]
            n[kind][0] += len(pairs)
            n[kind][1] += sum(p["kind"] == kind for p in pred)
            n[kind][2] += sum(t["kind"] == kind for t in truth)
            for i, j in pairs:
                for f in (PERSON_FIELDS if kind == "person" else OBJECT_FIELDS):
                    if truth[j].get(f, -1) >= 0:
                        right[f][0] += int(pred[i].get(f, -1) == truth[j][f])
                        right[f][1] += 1
                if kind == "person" and cameras is not None and cameras.get(path) is not None:
                    floor.append((cameras[path], pred[i]["box"], truth[j]["box"]))
    out = {}
    for kind, (m, p, t) in n.items():
        out[f"{kind}_recall"] = 100.0 * m / max(t, 1)
        out[f"{kind}_precision"] = 100.0 * m / max(p, 1)
        out[f"{kind}_recall_iou30"] = 100.0 * loose[kind] / max(t, 1)
    for name, (m, t) in zip(FRAC_NAMES, by_frac):
        out[f"person_recall_{name}"] = 100.0 * m / max(t, 1)
        out[f"n_persons_{name}"] = t
    for f, (r, t) in right.items():
        out[f"{f}_accuracy"] = 100.0 * r / max(t, 1)
    if cameras is not None:
        errors = floor_errors(floor)
        out["person_floor_error_m"] = float(errors.quantile(0.5)) if len(errors) else float("nan")
        out["n_floor_points"] = len(errors)
    return out


def floor_errors(pairs: list[tuple[Camera, list[float], list[float]]]) -> torch.Tensor:
    """Per (camera, predicted box, true box): the distance in metres between the floor points of the
    two boxes' bottom centres; pairs whose rays miss the floor are left out."""
    if not pairs:
        return torch.zeros(0)
    f64 = torch.float64
    K = torch.tensor([c.K for c, _, _ in pairs], dtype=f64)
    R = torch.tensor([c.R for c, _, _ in pairs], dtype=f64)
    t = torch.tensor([c.t for c, _, _ in pairs], dtype=f64)
    feet = torch.tensor([[[(a[0] + a[2]) / 2, a[3]], [(b[0] + b[2]) / 2, b[3]]] for _, a, b in pairs], dtype=f64)
    origin, direction = pixel_rays(K, R, t, feet)  # (N, 1, 3), (N, 2, 3)
    xy, hit = floor_points(origin, direction)
    both = hit.all(-1)
    return (xy[:, 0] - xy[:, 1]).norm(dim=-1)[both]


def image_cameras(bench: Benchmark) -> dict[str, Camera | None]:
    """Absolute image path -> the camera of the view that shows it (None: uncalibrated), for a loaded
    split of a benchmark."""
    return {str((Path(bench.root) / f.image).resolve()): v.camera for s in bench.samples for v in s.views
            for f in v.frames}


def fit_perception(bench_dir: str | Path, caches: LevelCaches, cfg: PerceptionFitConfig, progress: bool = True):
    """Train the heads on train's labels, on ``caches``' levels of the tower; returns (heads, history)."""
    torch.manual_seed(cfg.seed)
    bench_dir = Path(bench_dir)
    labels = load_entity_labels(bench_dir, "train")
    images = split_images(bench_dir, "train")
    paths = [p for p, _, _ in images]
    ents = [labels[scene][stem] for _, scene, stem in images]
    feats, fine, sizes = features(caches, paths)
    cfg.heads.in_dim = feats.shape[-1]
    cfg.heads.fine_dim = 0 if fine is None else fine.shape[-1]
    heads = PerceptionHeads(cfg.heads, FIELDS, CONTACT_WIDTH)
    g = int(round(feats.shape[1] ** 0.5))
    size = int(round(fine.shape[1] ** 0.5)) if fine is not None else g * cfg.heads.upsample
    hw = sizes[paths[0]]
    opt = torch.optim.AdamW(heads.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    steps = cfg.epochs * math.ceil(len(paths) / cfg.batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, cfg.lr, total_steps=steps, pct_start=0.1)
    rng = np.random.default_rng(cfg.seed)
    history = []
    t0 = time.time()
    for epoch in range(cfg.epochs):
        heads.train()
        order = rng.permutation(len(paths))
        sums: dict[str, float] = {}
        for i in tqdm(range(0, len(order), cfg.batch_size), disable=not progress, desc=f"perception {epoch}"):
            idx = order[i:i + cfg.batch_size]
            rows = torch.from_numpy(idx)
            maps = heads(feats[rows], None if fine is None else fine[rows])
            terms = perception_loss(heads, maps, _batch_targets([ents[j] for j in idx], size, hw), cfg.box_weight)
            opt.zero_grad()
            terms["loss"].backward()
            opt.step()
            sched.step()
            for k, v in terms.items():
                sums[k] = sums.get(k, 0.0) + float(v.detach())
        history.append({"epoch": epoch, **{k: v / math.ceil(len(order) / cfg.batch_size) for k, v in sums.items()},
                        "seconds": round(time.time() - t0, 1)})
        if progress:
            print(" ".join(f"{k}={v:.4g}" for k, v in history[-1].items()), flush=True)
    return heads, history
