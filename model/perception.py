"""Perception heads on the frozen tower: every person and object, with its attributes.

Two necks (``PerceptionConfig.neck``):

- ``plain`` (the shipped ``synthclip-cnn16-heads``): the patch grid (B, g*g, C) [+ a finer level
  (B, (2g)^2, C'), the coarse grid up-sampled onto it and concatenated] -> convs (2x up-sampling
  without a finer level);
- ``fpn``: a feature pyramid (FPN-style: a lateral 1x1 per level, top-down nearest up-sampling and
  sum, a 3x3 smoothing) over the tower's stride-4, 8 and 16 maps, whose finest output (56 x 56 at
  224 px) the heads read.

On the neck's output: a centre heatmap per kind (person, object) + a box (distances from the cell
centre to the box sides) [CenterNet-like]; box -> RoIAlign of the neck's map -> per field logits
(class 0: the view does not show it) + the 2-D contact multi-hot (effector x overlap / separated x
object kind and colour).

``decode`` turns the maps into entity records in the format of ``bench.entities``
(``id`` -1: identity is never perceived), so the entity reasoner reads predicted entities exactly
as it reads the ground truth of the entity ceiling. Pure tensors in, tensors out.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.ops import roi_align

KINDS = ("person", "object")
PERSON_FIELDS = ("frac", "shirt", "trousers", "hat", "posture", "airborne", "arm_l", "arm_r")
OBJECT_FIELDS = ("object_kind", "object_colour")


@dataclass
class PerceptionConfig:
    neck: Literal["plain", "fpn"] = "plain"  # "plain": the patch grid through convs (what a settings
    #   file without the key holds: the shipped heads); "fpn": the feature pyramid over ``levels``
    in_dim: int = 256          # plain: the tower's patch width
    fine_dim: int = 0          # plain: > 0: width of a finer tower level (twice the grid side) read beside it
    levels: list[int] = field(default_factory=list)  # fpn: the tower levels it reads, finest first
    #   (``model.backbone.tower_levels`` indices; the CNN's 1, 2, 3: strides 4, 8, 16)
    level_dims: list[int] = field(default_factory=list)  # fpn: their channels (set from the tower)
    width: int = 128           # the neck's channels
    upsample: int = 2          # plain without a finer level: output map = grid * upsample per side
    roi: int = 3               # RoIAlign output size
    threshold: float = 0.3     # centre score that makes a detection
    max_entities: int = 40     # per image


class FeaturePyramid(nn.Module):
    """FPN's top-down path (Lin et al. 2017) with only its finest output: a lateral 1x1 per level,
    coarse to fine nearest up-sampling and sum, a 3x3 smoothing of the finest sum. (torchvision's
    ``FeaturePyramidNetwork`` smooths every level; the heads read only the finest, so the other
    smoothing convs would be weights that never learn.)

    Args: in_dims: channels of each level, finest first; width: the output channels."""

    def __init__(self, in_dims: list[int], width: int):
        super().__init__()
        self.lateral = nn.ModuleList(nn.Conv2d(c, width, 1) for c in in_dims)
        self.smooth = nn.Conv2d(width, width, 3, padding=1)

    def forward(self, maps: list[torch.Tensor]) -> torch.Tensor:
        """maps: per level (B, C_l, H_l, W_l), finest first -> (B, width, H_0, W_0)."""
        x = self.lateral[-1](maps[-1].float())
        for lateral, level in zip(reversed(self.lateral[:-1]), reversed(maps[:-1])):
            x = lateral(level.float()) + F.interpolate(x, size=level.shape[-2:], mode="nearest")
        return self.smooth(x)


class PerceptionHeads(nn.Module):
    """Args: cfg; field_sizes: classes per categorical field (``bench.entities.FIELDS``);
    contact_width: the contact multi-hot's width."""

    def __init__(self, cfg: PerceptionConfig, field_sizes: dict[str, int], contact_width: int):
        super().__init__()
        self.cfg, w = cfg, cfg.width
        if cfg.neck == "fpn":
            if not cfg.level_dims or len(cfg.level_dims) != len(cfg.levels):
                raise ValueError(f"PerceptionConfig.neck='fpn' needs the channels of each of its levels {cfg.levels}, "
                                 f"got level_dims {cfg.level_dims}")
            self.neck = FeaturePyramid(cfg.level_dims, w)
            # the pyramid is linear: one 3x3 conv and a GELU before the 1x1 outputs (CenterNet's head conv)
            self.trunk = nn.Sequential(nn.Conv2d(w, w, 3, padding=1), nn.GELU())
        elif cfg.fine_dim:  # the finer level already has the output grid: a 1x1 fusion, no up-sampling
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

    def forward(self, *levels: torch.Tensor | None) -> dict[str, torch.Tensor]:
        """The maps of a batch of images.

        Args:
            levels: plain: patch_tokens (B, g*g, C) [, fine_tokens (B, (2g)^2, C') with ``fine_dim``];
                fpn: the tower's maps of ``cfg.levels`` (B, C_l, H_l, W_l), finest first.
        Returns:
            ``heat`` logits (B, 2, H, W), ``box`` (B, 4, H, W) distances (left, top, right, bottom)
            in output cells, ``feat`` (B, width, H, W) (the map ``read`` pools).
        """
        if self.cfg.neck == "fpn":
            feat = self.neck(list(levels))
            hidden = self.trunk(feat)
            return {"heat": self.heat(hidden), "box": F.softplus(self.box(hidden)), "feat": feat}
        patch_tokens, fine_tokens = levels[0], levels[1] if len(levels) > 1 else None
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
