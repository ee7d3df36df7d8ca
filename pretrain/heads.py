"""Auxiliary heads of the in-domain CLIP pretraining; dropped when the tower is exported.

They read the patch grid the cross-view model reads (the tower's last block, after its final
LayerNorm), so what they teach lands in the very tokens the downstream model consumes:
- dense heads: one linear classifier (or regressor) per patch for each dense label map;
- a counter: a DeepSets sum over patches (how many people the view shows);
- region heads: a 2x2 RoIAlign of the grid in a person's box (as model/entities.py pools a
  mark) and one classifier per person attribute.
"""
from __future__ import annotations

from typing import Dict

import torch
from torch import nn
from torchvision.ops import roi_align


class PretrainHeads(nn.Module):
    """Args:
        dim: patch token width C.
        dense_classes: dense label name -> number of classes (1 = a regression, e.g. depth;
            "centre" is a binary map predicted with one logit).
        region_classes: person attribute name -> number of classes.
        max_count: counts above it share the last class.
        roi_size: RoIAlign output side.
    """

    def __init__(self, dim: int, dense_classes: Dict[str, int], region_classes: Dict[str, int],
                 max_count: int = 9, roi_size: int = 2, hidden: int = 256):
        super().__init__()
        self.roi_size = roi_size
        self.dense = nn.ModuleDict({k: nn.Linear(dim, n) for k, n in dense_classes.items()})
        self.count_phi = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, hidden))
        self.count_rho = nn.Sequential(nn.GELU(), nn.Linear(hidden, max_count + 1))
        self.region_trunk = nn.Sequential(nn.Linear(dim * roi_size * roi_size, hidden), nn.GELU())
        self.region = nn.ModuleDict({k: nn.Linear(hidden, n) for k, n in region_classes.items()})

    def forward(self, grid: torch.Tensor, boxes: torch.Tensor, image_size: int) -> Dict[str, torch.Tensor]:
        """Args:
            grid: (B, C, g, g) patch tokens.
            boxes: (M, 5) float: batch index, x0, y0, x1, y1 in pixels of the original render.
            image_size: side of the render the boxes refer to (pixels).
        Returns:
            "dense_<name>": (B, g, g, n) logits (n = 1 squeezed to (B, g, g));
            "count": (B, max_count + 1) logits;
            "region_<name>": (M, n) logits.
        """
        b, c, g, _ = grid.shape
        tokens = grid.flatten(2).transpose(1, 2)  # (B, g*g, C)
        out = {}
        for name, head in self.dense.items():
            logits = head(tokens).view(b, g, g, -1)
            out[f"dense_{name}"] = logits.squeeze(-1) if logits.shape[-1] == 1 else logits
        out["count"] = self.count_rho(self.count_phi(tokens).sum(1) / g)
        if boxes.shape[0]:
            rois = roi_align(grid, boxes, self.roi_size, spatial_scale=g / image_size, sampling_ratio=2, aligned=True)
            feats = self.region_trunk(rois.flatten(1))
        else:
            feats = grid.new_zeros(0, self.region_trunk[0].out_features)
        for name, head in self.region.items():
            out[f"region_{name}"] = head(feats)
        return out
