"""Perception heads on the frozen tower's patch grid: every person and object, with its attributes.

    patch grid (B, g*g, C) [+ a finer level of the tower (B, (2g)^2, C'), the coarse grid
    up-sampled onto it and concatenated] -> neck (convs, 2x up-sampling without a finer level)
    -> centre heatmap per kind (person, object) + box (distances from the cell centre to the box
    sides)                                                               [CenterNet-like]
    box -> RoIAlign of the neck's map -> per field logits (class 0: the view does not show it)
           + the 2-D contact multi-hot (effector x overlap / separated x object kind and colour)

``decode`` turns the maps into entity records in the format of ``bench.entities``
(``id`` -1: identity is never perceived), so the entity reasoner reads predicted entities exactly
as it reads the ground truth of the entity ceiling. Pure tensors in, tensors out.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.ops import roi_align

KINDS = ("person", "object")
PERSON_FIELDS = ("frac", "shirt", "trousers", "hat", "posture", "airborne", "arm_l", "arm_r")
OBJECT_FIELDS = ("object_kind", "object_colour")


@dataclass
class PerceptionConfig:
    in_dim: int = 256          # the tower's patch width
    fine_dim: int = 0          # > 0: width of a finer tower level (twice the grid side) read beside it
    width: int = 128           # the neck's channels
    upsample: int = 2          # output map = grid * upsample per side
    roi: int = 3               # RoIAlign output size
    threshold: float = 0.3     # centre score that makes a detection
    max_entities: int = 40     # per image


class PerceptionHeads(nn.Module):
    """Args: cfg; field_sizes: classes per categorical field (``bench.entities.FIELDS``);
    contact_width: the contact multi-hot's width."""

    def __init__(self, cfg: PerceptionConfig, field_sizes: dict[str, int], contact_width: int):
        super().__init__()
        self.cfg, w = cfg, cfg.width
        if cfg.fine_dim:  # the finer level already has the output grid: a 1x1 fusion, no up-sampling
            self.neck = nn.Sequential(nn.Conv2d(cfg.in_dim + cfg.fine_dim, w, 1), nn.GELU(),
                                      nn.Conv2d(w, w, 3, padding=1), nn.GELU(), nn.Conv2d(w, w, 3, padding=1), nn.GELU())
        else:
            up = [nn.ConvTranspose2d(w, w, cfg.upsample, stride=cfg.upsample), nn.GELU()] if cfg.upsample > 1 else []
            self.neck = nn.Sequential(nn.Conv2d(cfg.in_dim, w, 3, padding=1), nn.GELU(), nn.Conv2d(w, w, 3, padding=1),
                                      nn.GELU(), *up, nn.Conv2d(w, w, 3, padding=1), nn.GELU())
        self.heat = nn.Conv2d(w, len(KINDS), 1)
        nn.init.constant_(self.heat.bias, -2.19)  # a prior of 0.1 per cell
        self.box = nn.Conv2d(w, 4, 1)
        self.roi_mlp = nn.Sequential(nn.Linear(w * cfg.roi * cfg.roi + 4, 2 * w), nn.GELU(), nn.Linear(2 * w, 2 * w),
                                     nn.GELU())
        self.field_sizes = dict(field_sizes)
        self.fields = nn.ModuleDict({f: nn.Linear(2 * w, n + 1) for f, n in field_sizes.items()})
        self.contact = nn.Linear(2 * w, contact_width)

    def forward(self, patch_tokens: torch.Tensor, fine_tokens: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """patch_tokens (B, g*g, C) [fine_tokens (B, (2g)^2, C') with ``fine_dim``] -> ``heat``
        logits (B, 2, H, W), ``box`` (B, 4, H, W) distances (left, top, right, bottom) in output
        cells, ``feat`` (B, width, H, W)."""
        b, p, c = patch_tokens.shape
        g = int(round(p ** 0.5))
        x = patch_tokens.float().transpose(1, 2).reshape(b, c, g, g)
        if self.cfg.fine_dim:
            if fine_tokens is None:
                raise ValueError("PerceptionConfig.fine_dim > 0: pass the finer level's tokens")
            gf = int(round(fine_tokens.shape[1] ** 0.5))
            fine = fine_tokens.float().transpose(1, 2).reshape(b, -1, gf, gf)
            x = torch.cat([F.interpolate(x, size=(gf, gf), mode="nearest"), fine], 1)
        feat = self.neck(x)
        return {"heat": self.heat(feat), "box": F.softplus(self.box(feat)), "feat": feat}

    def read(self, feat: torch.Tensor, rois: torch.Tensor) -> dict[str, torch.Tensor]:
        """Attributes of boxes. rois (K, 5): image index, x0, y0, x1, y1 in output cells.
        Returns per field (K, classes + 1) logits and ``contact`` (K, contact_width) logits."""
        pooled = roi_align(feat, rois, self.cfg.roi, spatial_scale=1.0, sampling_ratio=2, aligned=True)
        size = feat.shape[-1]
        geo = rois[:, 1:] / size * 2 - 1
        h = self.roi_mlp(torch.cat([pooled.flatten(1), geo], -1))
        out = {f: head(h) for f, head in self.fields.items()}
        out["contact"] = self.contact(h)
        return out

    @torch.no_grad()
    def decode(self, maps: dict[str, torch.Tensor], image_hw: tuple[float, float]) -> list[list[dict]]:
        """Entity records per image (``bench.entities`` format, ``id`` -1, boxes in pixels
        of an image of ``image_hw``; ``contact_p`` holds the contact multi-hot's probabilities)."""
        heat = torch.sigmoid(maps["heat"])
        peak = heat == F.max_pool2d(heat, 3, stride=1, padding=1)
        b, _, hh, ww = heat.shape
        scores = (heat * peak).flatten(1)  # (B, 2*H*W)
        out: list[list[dict]] = []
        rois, owners = [], []
        for i in range(b):
            top = scores[i].topk(min(self.cfg.max_entities, scores.shape[1]))
            keep = top.values > self.cfg.threshold
            recs = []
            for s, idx in zip(top.values[keep].tolist(), top.indices[keep].tolist()):
                kind, cell = divmod(idx, hh * ww)
                y, x = divmod(cell, ww)
                dist = maps["box"][i, :, y, x]
                cx, cy = x + 0.5, y + 0.5
                box = [cx - float(dist[0]), cy - float(dist[1]), cx + float(dist[2]), cy + float(dist[3])]
                recs.append({"id": -1, "kind": KINDS[kind], "score": round(s, 4), "_cells": box})
                rois.append([float(i), *box])
                owners.append((i, len(recs) - 1))
            out.append(recs)
        if rois:
            heads = self.read(maps["feat"], torch.tensor(rois))
            sx, sy = image_hw[1] / ww, image_hw[0] / hh
            for k, (i, j) in enumerate(owners):
                rec = out[i][j]
                x0, y0, x1, y1 = rec.pop("_cells")
                rec["box"] = [round(max(0.0, x0 * sx), 1), round(max(0.0, y0 * sy), 1),
                              round(min(image_hw[1], x1 * sx), 1), round(min(image_hw[0], y1 * sy), 1)]
                for f in PERSON_FIELDS if rec["kind"] == "person" else OBJECT_FIELDS:
                    rec[f] = int(heads[f][k].argmax()) - 1  # class 0: not shown -> -1
                if rec["kind"] == "person":
                    rec["contact_p"] = [round(v, 3) for v in torch.sigmoid(heads["contact"][k]).tolist()]
        for recs in out:
            recs.sort(key=lambda e: (e["box"][0] + e["box"][2], e["kind"]))
        return out
