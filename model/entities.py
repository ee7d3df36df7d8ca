"""Entity tokens: one token per (view, frame, mark) from the mark's box.

A token = RoIAlign of the view's patch tokens inside the box (2x2 keeps shirt above
trousers) + box position + label embedding + (when cameras are on) the geometry of the
box-centre ray and the "feet" ray through the bottom-centre of the box, whose floor point
is where the person stands: the cue that ties one person across views.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch
from torch import nn
from torchvision.ops import roi_align

from model.camera import RAY_FEATURES, CameraEmbedding, ray_features
from model.config import ModelConfig
from model.view_encoder import ImagePositionEmbedding


def entity_token_index(v: int, t: int, m: int, device=None) -> torch.Tensor:
    """(N, 3) long (view, frame, mark) of each flattened entity token, N = v * t * m."""
    grids = torch.meshgrid(torch.arange(v, device=device), torch.arange(t, device=device),
                           torch.arange(m, device=device), indexing="ij")
    return torch.stack(grids, dim=-1).reshape(-1, 3)


class EntityTokenizer(nn.Module):
    """Builds entity tokens from mark boxes.

    Args:
        cfg: ModelConfig (d_model, entity.roi_size, entity.max_label, camera switch).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d, r = cfg.d_model, cfg.entity.roi_size
        self.cfg = cfg
        self.roi_proj = nn.Linear(d * r * r, d)
        self.box_position = ImagePositionEmbedding(d, in_coords=4)
        self.label = nn.Embedding(cfg.entity.max_label + 1, d)
        self.geometry: Optional[CameraEmbedding] = (
            CameraEmbedding(d, cfg.camera, 2 * RAY_FEATURES) if cfg.camera.enabled else None)
        self.norm = nn.LayerNorm(d)

    def forward(self, patch: torch.Tensor, grid: Tuple[int, int], batch: Dict[str, torch.Tensor],
                offset: torch.Tensor, label_prior: Optional[torch.Tensor] = None
                ) -> Dict[str, torch.Tensor]:
        """
        Args:
            patch: (B, V, T, P, D) encoded patch tokens (model/view_encoder.py).
            grid: (gh, gw) of the patch grid.
            batch: mark_boxes (B, V, T, M, 4) pixels, mark_label (B, V, T, M),
                mark_mask (B, V, T, M), frame/view masks, camera tensors.
            offset: (B, 1, 3) canonical-frame offset.
            label_prior: optional (max_label + 1, D) added to the label embedding (tying
                labels to the LM's number words).
        Returns:
            "tokens" (B, N, D), "mask" (B, N) bool, "floor_xy" (B, N, 2) canonical feet point,
            "floor_ok" (B, N) bool (camera known and feet ray hits the floor),
            "index" (B, N, 3) long (v, t, m); N = V * T * M, flattened row-major.
        """
        b, v, t, p, d = patch.shape
        m = batch["mark_boxes"].shape[3]
        gh, gw = grid
        boxes = batch["mark_boxes"].to(patch.dtype)
        mask = (batch["mark_mask"] & batch["frame_mask"].unsqueeze(-1)
                & batch["view_mask"][:, :, None, None])
        hw = batch["image_hw"].to(patch.dtype)[:, :, None, None, :]  # (B, V, 1, 1, 2)
        wh = hw.flip(-1).repeat(1, 1, 1, 1, 2)  # (w, h, w, h)
        unit_boxes = torch.where(mask.unsqueeze(-1), boxes / wh,
                                 torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=patch.dtype,
                                              device=patch.device))
        unit_boxes = unit_boxes.clamp(0.0, 1.0)

        # RoIAlign in grid units; aligned=True matches "cell i covers [i, i + 1)".
        feature_maps = patch.reshape(b * v * t, gh, gw, d).permute(0, 3, 1, 2)
        scale = torch.tensor([gw, gh, gw, gh], dtype=patch.dtype, device=patch.device)
        frame_index = torch.arange(b * v * t, device=patch.device, dtype=patch.dtype)
        rois = torch.cat([frame_index.repeat_interleave(m).unsqueeze(-1),
                          (unit_boxes * scale).reshape(-1, 4)], dim=-1)
        r = self.cfg.entity.roi_size
        pooled = roi_align(feature_maps, rois, output_size=r, spatial_scale=1.0,
                           sampling_ratio=2, aligned=True)  # (B*V*T*M, D, r, r)
        tokens = self.roi_proj(pooled.flatten(1)).view(b, v, t, m, d)

        x0, y0, x1, y1 = unit_boxes.unbind(-1)
        box_code = torch.stack([(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0], dim=-1)
        tokens = tokens + self.box_position(box_code)
        labels = batch["mark_label"].clamp(0, self.cfg.entity.max_label) * mask
        label_vectors = self.label.weight if label_prior is None else self.label.weight + label_prior
        tokens = tokens + label_vectors[labels]

        # Feet = bottom-centre of the box: its floor point localises the person on the floor.
        centre_px = torch.stack([(x0 + x1) / 2, (y0 + y1) / 2], -1) * hw.flip(-1)
        feet_px = torch.stack([(x0 + x1) / 2, y1], -1) * hw.flip(-1)
        pixels = torch.stack([centre_px, feet_px], dim=-2).reshape(b, v, t * m * 2, 2)
        has_camera = batch["has_camera"]
        rays = ray_features(batch["camera_K"], batch["camera_R"], batch["camera_t"], pixels,
                            offset, self.cfg.camera).view(b, v, t, m, 2, RAY_FEATURES)
        feet_xy = rays[..., 1, 6:8]  # floor (x, y) of the feet ray, canonical frame
        feet_ok = (rays[..., 1, 8] > 0.5) & has_camera[:, :, None, None] & mask
        if self.geometry is not None:
            tokens = tokens + self.geometry(rays.flatten(-2), has_camera)

        tokens = self.norm(tokens) * mask.unsqueeze(-1)
        index = entity_token_index(v, t, m, patch.device).expand(b, -1, -1)
        return {"tokens": tokens.reshape(b, v * t * m, d), "mask": mask.reshape(b, -1),
                "floor_xy": feet_xy.reshape(b, -1, 2), "floor_ok": feet_ok.reshape(b, -1),
                "index": index}
