"""Entity tokens: one token per (view, frame, mark) from the mark's box, and (cameras known)
one "projected" token per mark and other view: where that person stands in the other view.

A token = RoIAlign of the view's patch tokens inside the box (2x2 keeps shirt above
trousers) + box position + label embedding + (when cameras are on) the geometry of the
box-centre ray and the "feet" ray through the bottom-centre of the box, whose floor point
is where the person stands: the cue that ties one person across views.

Projection (`EntityTokenizer.project`): the feet ray of a mark meets the floor at the
person's floor point W; the ray through the top of the box, followed down to the vertical
line above W, gives their height. Projecting that upright segment into every other
calibrated view (same frame index) gives a box there, whatever is marked in that view:
the marked person seen from the other side, where the arm hidden in the marked view or the
object in their hand may be visible. Its token is built like a mark's (same RoIAlign
projection, the source mark's label and role) plus a learned "projected" vector.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple, Union

import torch
from torch import nn
from torchvision.ops import roi_align

from model.camera import RAY_FEATURES, CameraEmbedding, floor_points, pixel_rays, ray_features
from model.config import ModelConfig
from model.view_encoder import ImagePositionEmbedding, PatchTokens


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
        self.role: Optional[nn.Embedding] = nn.Embedding(4, d) if cfg.entity.mark_roles else None
        self.geometry: Optional[CameraEmbedding] = (
            CameraEmbedding(d, cfg.camera, 2 * RAY_FEATURES) if cfg.camera.enabled else None)
        self.projected = nn.Parameter(torch.zeros(d)) if cfg.entity.project else None
        if self.projected is not None:
            nn.init.normal_(self.projected, std=0.02)
        self.norm = nn.LayerNorm(d)

    def forward(self, patch: Union[PatchTokens, torch.Tensor], grid: Tuple[int, int], batch: Dict[str, torch.Tensor],
                offset: torch.Tensor, label_prior: Optional[torch.Tensor] = None
                ) -> Dict[str, torch.Tensor]:
        """
        Args:
            patch: (B, V, T, P, D) encoded patch tokens, or the PatchTokens that build them
                (model/view_encoder.py; then only the frames with a mark are built).
            grid: (gh, gw) of the patch grid.
            batch: mark_boxes (B, V, T, M, 4) pixels, mark_label (B, V, T, M), optional
                mark_role (B, V, T, M) (inputs/items.py mark_role; absent = 0),
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
        boxes = batch["mark_boxes"].to(patch.dtype)
        mask = (batch["mark_mask"] & batch["frame_mask"].unsqueeze(-1)
                & batch["view_mask"][:, :, None, None])
        hw = batch["image_hw"].to(patch.dtype)[:, :, None, None, :]  # (B, V, 1, 1, 2)
        wh = hw.flip(-1).repeat(1, 1, 1, 1, 2)  # (w, h, w, h)
        unit_boxes = torch.where(mask.unsqueeze(-1), boxes / wh,
                                 torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=patch.dtype,
                                              device=patch.device))
        unit_boxes = unit_boxes.clamp(0.0, 1.0)

        labels, roles = self._labels_and_roles(batch, mask)
        index = entity_token_index(v, t, m, patch.device).expand(b, -1, -1)
        view_of = index[..., 0]
        flat_mask = mask.reshape(b, -1)
        tokens, rays = self._box_tokens(patch, grid, batch, offset, view_of, index[..., 1],
                                        unit_boxes.reshape(b, -1, 4), labels.reshape(b, -1),
                                        roles.reshape(b, -1), label_prior, valid=flat_mask)
        feet_xy = rays[..., 1, 6:8]  # floor (x, y) of the feet ray, canonical frame
        feet_ok = (rays[..., 1, 8] > 0.5) & batch["has_camera"].gather(1, view_of) & flat_mask
        tokens = self.norm(tokens) * flat_mask.unsqueeze(-1)
        return {"tokens": tokens, "mask": flat_mask, "floor_xy": feet_xy, "floor_ok": feet_ok,
                "index": index}

    def _labels_and_roles(self, batch: Dict[str, torch.Tensor], mask: torch.Tensor):
        """(B, V, T, M) label ids and mark roles (0 at padding; an absent "mark_role" is 0)."""
        labels = batch["mark_label"].clamp(0, self.cfg.entity.max_label) * mask
        roles = batch.get("mark_role")
        roles = torch.zeros_like(labels) if roles is None else roles.clamp(0, 3) * mask
        return labels, roles

    def _box_tokens(self, patch: Union[PatchTokens, torch.Tensor], grid: Tuple[int, int], batch: Dict[str, torch.Tensor],
                    offset: torch.Tensor, view_of: torch.Tensor, frame_of: torch.Tensor,
                    unit_boxes: torch.Tensor, labels: torch.Tensor, roles: torch.Tensor,
                    label_prior: Optional[torch.Tensor], valid: torch.Tensor):
        """Unnormalised tokens of K boxes per sample, box k in frame frame_of[k] of view view_of[k].

        Args:
            view_of, frame_of: (B, K) long; unit_boxes (B, K, 4) in unit image coordinates;
            labels, roles (B, K) long; valid: (B, K) bool, the boxes whose tokens the caller
            keeps: only their frames' patch tokens are built (the others' tokens are read from
            some built frame and must be masked by the caller). Others as `forward`.
        Returns:
            tokens (B, K, D) and ray features (B, K, 2, RAY_FEATURES) of each box's centre
            and feet (bottom-centre) pixel.
        """
        b, v, t, p, d = patch.shape
        k = unit_boxes.shape[1]
        gh, gw = grid
        sample = torch.arange(b, device=patch.device).unsqueeze(1)
        frame_index = sample * v * t + view_of * t + frame_of  # (B, K) into the B * V * T frames
        if isinstance(patch, PatchTokens):
            # Build only the frames a kept box reads (at least one, so RoIAlign has an input).
            used = frame_index[valid]
            used = torch.unique(used) if used.numel() else frame_index.reshape(-1)[:1]
            local = torch.zeros(b * v * t, dtype=torch.long, device=patch.device)
            local[used] = torch.arange(len(used), device=patch.device)
            maps, frame_index = patch.frames(used), local[frame_index]
        else:
            maps = patch.reshape(b * v * t, p, d)
        # RoIAlign in grid units; aligned=True matches "cell i covers [i, i + 1)".
        feature_maps = maps.reshape(-1, gh, gw, d).permute(0, 3, 1, 2)
        scale = torch.tensor([gw, gh, gw, gh], dtype=patch.dtype, device=patch.device)
        rois = torch.cat([frame_index.to(patch.dtype).reshape(-1, 1), (unit_boxes * scale).reshape(-1, 4)], dim=-1)
        r = self.cfg.entity.roi_size
        pooled = roi_align(feature_maps, rois, output_size=r, spatial_scale=1.0,
                           sampling_ratio=2, aligned=True)  # (B*K, D, r, r)
        tokens = self.roi_proj(pooled.flatten(1)).view(b, k, d)

        x0, y0, x1, y1 = unit_boxes.unbind(-1)
        box_code = torch.stack([(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0], dim=-1)
        tokens = tokens + self.box_position(box_code)
        label_vectors = self.label.weight if label_prior is None else self.label.weight + label_prior
        tokens = tokens + label_vectors[labels]
        if self.role is not None:
            tokens = tokens + self.role(roles)

        # Feet = bottom-centre of the box: its floor point localises the person on the floor.
        # Each box is its own "view" for ray_features: its camera gathered by view_of.
        take = lambda x: x.gather(1, view_of.view(b, k, *([1] * (x.dim() - 2))).expand(b, k, *x.shape[2:]))
        wh = take(batch["image_hw"].to(patch.dtype)).flip(-1)  # (B, K, 2) width, height
        centre_px = torch.stack([(x0 + x1) / 2, (y0 + y1) / 2], -1) * wh
        feet_px = torch.stack([(x0 + x1) / 2, y1], -1) * wh
        pixels = torch.stack([centre_px, feet_px], dim=-2)  # (B, K, 2, 2)
        rays = ray_features(take(batch["camera_K"]), take(batch["camera_R"]), take(batch["camera_t"]),
                            pixels, offset, self.cfg.camera)  # (B, K, 2, RAY_FEATURES)
        if self.geometry is not None:
            tokens = tokens + self.geometry(rays.flatten(-2), take(batch["has_camera"]))
        return tokens, rays

    def project(self, patch: Union[PatchTokens, torch.Tensor], grid: Tuple[int, int], batch: Dict[str, torch.Tensor],
                offset: torch.Tensor, label_prior: Optional[torch.Tensor] = None
                ) -> Dict[str, torch.Tensor]:
        """Projected tokens: every mark of a calibrated view, seen in every OTHER calibrated
        view at the same frame index (see the module docstring).

        Args: as `forward`.
        Returns:
            The keys of `forward` for N' tokens (the most valid pairs any sample has; the
            valid ones first), with "index" (B, N', 3) = (target view, frame, mark) and
            "source" (B, N', 3) = (source view, frame, mark); "boxes" (B, N', 4) the box in
            unit coordinates of the target image. A pair is valid when the source is a real
            mark whose feet ray meets the floor, the target is another calibrated real view
            with that frame, and the upright segment projects in front of the target camera
            and into its image.
        """
        b, v, t, p, d = patch.shape
        m = batch["mark_boxes"].shape[3]
        dtype = patch.dtype
        K, R, tr = batch["camera_K"].to(dtype), batch["camera_R"].to(dtype), batch["camera_t"].to(dtype)
        has_camera = batch["has_camera"]
        frame_ok = batch["frame_mask"] & batch["view_mask"].unsqueeze(-1)  # (B, V, T)
        mask = batch["mark_mask"] & frame_ok.unsqueeze(-1) & has_camera[:, :, None, None]
        boxes = batch["mark_boxes"].to(dtype)  # (B, V, T, M, 4) pixels
        feet = torch.stack([(boxes[..., 0] + boxes[..., 2]) / 2, boxes[..., 3]], -1)
        top = torch.stack([(boxes[..., 0] + boxes[..., 2]) / 2, boxes[..., 1]], -1)
        origin, direction = pixel_rays(K, R, tr, torch.stack([feet, top], -2).reshape(b, v, -1, 2))
        direction = direction.view(b, v, t, m, 2, 3)
        origin = origin.view(b, v, 1, 1, 3)
        floor_xy, hit = floor_points(origin, direction[..., 0, :])  # world frame
        # Height: follow the top ray to the vertical line above the floor point.
        top_dir = direction[..., 1, :]
        reach = (floor_xy - origin[..., :2]).norm(dim=-1) / top_dir[..., :2].norm(dim=-1).clamp_min(1e-6)
        scale = self.cfg.camera.world_scale
        height = (origin[..., 2] + reach * top_dir[..., 2]).clamp(0.3 * scale, 3.0 * scale)
        source_ok = mask & hit  # (B, V, T, M)

        base = torch.cat([floor_xy, torch.zeros_like(height).unsqueeze(-1)], -1)  # (B, V, T, M, 3)
        upright = torch.stack([base, base + torch.stack([torch.zeros_like(height)] * 2 + [height], -1)], -2)
        # Into every target view u: x_cam = R_u X + t_u, pixel = K_u x_cam / z.
        points = upright.reshape(b, 1, v * t * m * 2, 3)
        cam = points @ R.transpose(-1, -2) + tr.unsqueeze(-2)  # (B, U, VTM2, 3)
        depth = cam[..., 2]
        pix = (cam @ K.transpose(-1, -2))[..., :2] / depth.clamp_min(1e-6).unsqueeze(-1)
        depth = depth.view(b, v, v, t, m, 2).permute(0, 2, 3, 4, 1, 5)  # (B, Vs, T, M, U, 2)
        pix = pix.view(b, v, v, t, m, 2, 2).permute(0, 2, 3, 4, 1, 5, 6)  # (..., U, bottom/top, xy)
        foot, head = pix[..., 0, :], pix[..., 1, :]
        tall = foot[..., 1] - head[..., 1]
        half = 0.25 * tall  # people are about half as wide as tall
        cx = (foot[..., 0] + head[..., 0]) / 2
        target_hw = batch["image_hw"].to(dtype)  # (B, U, 2)
        wh = target_hw.flip(-1)[:, None, None, None, :, :]  # (B, 1, 1, 1, U, 2)
        x0 = (cx - half) / wh[..., 0]
        x1 = (cx + half) / wh[..., 0]
        y0 = head[..., 1] / wh[..., 1]
        y1 = foot[..., 1] / wh[..., 1]
        clipped = torch.stack([x0, y0, x1, y1], -1).clamp(0.0, 1.0)
        visible = ((clipped[..., 2] - clipped[..., 0]) * (clipped[..., 3] - clipped[..., 1]) > 1e-4)
        other = ~torch.eye(v, dtype=torch.bool, device=patch.device)[None, :, None, None, :]
        target_ok = (frame_ok.transpose(1, 2)[:, None, :, None, :] & has_camera[:, None, None, None, :])
        ok = (source_ok.unsqueeze(-1) & other & target_ok & (depth > 1e-3).all(-1) & (tall > 1.0)
              & visible)  # (B, Vs, T, M, U)

        # Keep only the valid (source, target) pairs, packed to the front of each sample: most
        # of the dense V x T x M x V grid is padding, and entity attention is quadratic in it.
        flat_ok = ok.reshape(b, -1)
        count = flat_ok.sum(1)
        width = max(int(count.max()) if b else 0, 1)
        order = torch.sort((~flat_ok).to(torch.uint8), dim=1, stable=True).indices[:, :width]
        valid = torch.arange(width, device=patch.device).unsqueeze(0) < count.unsqueeze(1)
        dims = (v, t, m, v)
        source_view, frame, mark, target_view = torch.unravel_index(order, dims)
        boxes = clipped.reshape(b, -1, 4).gather(1, order.unsqueeze(-1).expand(b, width, 4))
        boxes = torch.where(valid.unsqueeze(-1), boxes, torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=dtype,
                                                                      device=patch.device))
        labels, roles = self._labels_and_roles(batch, mask)
        source = ((source_view * t + frame) * m + mark)  # index into (V, T, M)
        pick = lambda x: x.reshape(b, -1).gather(1, source) * valid
        tokens, _ = self._box_tokens(patch, grid, batch, offset, target_view, frame, boxes,
                                     pick(labels), pick(roles), label_prior, valid=valid)
        tokens = self.norm(tokens + self.projected) * valid.unsqueeze(-1)
        canonical = ((floor_xy - offset[..., :2].view(b, 1, 1, 1, 2)) / scale).clamp(
            -self.cfg.camera.floor_clip, self.cfg.camera.floor_clip)
        floor = canonical.reshape(b, -1, 2).gather(1, source.unsqueeze(-1).expand(b, width, 2))
        index = torch.stack([target_view, frame, mark], -1)
        return {"tokens": tokens, "mask": valid, "floor_xy": floor * valid.unsqueeze(-1),
                "floor_ok": valid, "index": index, "boxes": boxes,
                "source": torch.stack([source_view, frame, mark], -1)}
