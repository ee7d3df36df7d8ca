"""Per-view tokens: cached patch features + image position + camera rays + time.

There is deliberately NO view-index embedding: the views of a sample are a set, and an
index would let the model learn "the answer is in the first view" (order bias).
"""
from __future__ import annotations

import math
from typing import Dict, Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

from model.camera import (RAY_FEATURES, CameraEmbedding, canonical_offset, grid_pixel_centers,
                          ray_features)
from model.config import ModelConfig


def fourier_features(x: torch.Tensor, num_freqs: int, max_period: float) -> torch.Tensor:
    """(..., k) -> (..., 2 * k * num_freqs) sin/cos at periods max_period / 2^i."""
    periods = max_period / (2.0 ** torch.arange(num_freqs, device=x.device, dtype=x.dtype))
    angles = 2 * math.pi * x.unsqueeze(-1) / periods  # (..., k, F)
    return torch.cat([angles.sin(), angles.cos()], dim=-1).flatten(-2)


class TimeEmbedding(nn.Module):
    """Seconds since the first frame -> d_model (sinusoids at periods up to `max_period`)."""

    def __init__(self, d_model: int, max_period: float, num_freqs: int = 8):
        super().__init__()
        self.num_freqs, self.max_period = num_freqs, max_period
        self.proj = nn.Linear(2 * num_freqs, d_model)

    def forward(self, seconds: torch.Tensor) -> torch.Tensor:
        """(...) -> (..., d_model)."""
        return self.proj(fourier_features(seconds.unsqueeze(-1), self.num_freqs, self.max_period))


class ImagePositionEmbedding(nn.Module):
    """Normalised image-plane coordinates (u, v, ...) in [0, 1] -> d_model.

    Position in the image is a legitimate per-view cue (it does not depend on view order)
    and the only geometric cue left when a camera is uncalibrated.
    """

    def __init__(self, d_model: int, in_coords: int = 2, num_freqs: int = 4):
        super().__init__()
        self.num_freqs = num_freqs
        self.proj = nn.Linear(in_coords * (2 * num_freqs + 1), d_model)

    def forward(self, coords: torch.Tensor) -> torch.Tensor:
        """(..., in_coords) -> (..., d_model)."""
        feats = torch.cat([coords, fourier_features(coords, self.num_freqs, 2.0)], dim=-1)
        return self.proj(feats)


class PatchTokens:
    """The encoded patch tokens of every (view, frame), built only where they are read.

    The frame token needs just their mean, which the encoder takes before the projection (it
    is linear); the (B, V, T, P, D) tensor itself is built for the frames a consumer asks for:
    the entity tokenizer reads only frames with a mark (a temporal question has none). On the
    default temporal batches that is most of what a step used to spend on patches.

    Attributes:
        shape: (B, V, T, P, D), the shape of the full tensor.
    """

    def __init__(self, encoder: "ViewEncoder", patches: torch.Tensor, spatial: torch.Tensor,
                 time: torch.Tensor):
        b, v, t, p, _ = patches.shape
        self.shape = (b, v, t, p, encoder.cfg.d_model)
        self.dtype, self.device = patches.dtype, patches.device
        self._encoder, self._patches, self._spatial, self._time = encoder, patches, spatial, time

    def frames(self, index: torch.Tensor) -> torch.Tensor:
        """(N, P, D) tokens of flat frame indices ``index`` (N,) into (B * V * T): b V T + v T + t."""
        b, v, t, p, _ = self.shape
        x = self._patches.reshape(b * v * t, p, -1)[index]
        spatial = self._spatial.reshape(b * v, p, -1)[torch.div(index, t, rounding_mode="floor")]
        time = self._time.reshape(b * v * t, 1, -1)[index]
        return self._encoder.norm(self._encoder.patch_proj(x) + spatial + time)

    def all(self) -> torch.Tensor:
        """The full (B, V, T, P, D) tensor."""
        enc = self._encoder
        return enc.norm(enc.patch_proj(self._patches) + self._spatial.unsqueeze(2) + self._time.unsqueeze(3))


def patch_tensor(patch: Union[PatchTokens, torch.Tensor]) -> torch.Tensor:
    """The (B, V, T, P, D) tensor of ``patch`` (a PatchTokens is built in full)."""
    return patch.all() if isinstance(patch, PatchTokens) else patch


class ViewEncoder(nn.Module):
    """Turns cached backbone features of every (view, frame) into d_model tokens.

    Args:
        cfg: ModelConfig (d_model, feature widths, camera switch, time scale).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d = cfg.d_model
        self.cfg = cfg
        self.patch_proj = nn.Sequential(nn.LayerNorm(cfg.patch_dim), nn.Linear(cfg.patch_dim, d))
        self.pooled_proj = nn.Sequential(nn.LayerNorm(cfg.pooled_dim), nn.Linear(cfg.pooled_dim, d))
        self.position = ImagePositionEmbedding(d)
        self.time = TimeEmbedding(d, cfg.time_scale)
        self.camera: Optional[CameraEmbedding] = (
            CameraEmbedding(d, cfg.camera, RAY_FEATURES) if cfg.camera.enabled else None)
        self.drop = nn.Dropout(cfg.dropout)
        self.norm = nn.LayerNorm(d)

    def forward(self, batch: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """
        Args:
            batch: the CrossViewModel batch (see model/README.md).
        Returns:
            "patch": PatchTokens, the (B, V, T, P, D) patch tokens built on demand; "frame":
            (B, V, T, D) one token per frame;
            "offset": (B, 1, 3) canonical-frame offset (model/camera.py); "grid": (gh, gw).
        """
        patches = batch["patch_tokens"]
        b, v, t, p, _ = patches.shape
        gh = gw = int(round(math.sqrt(p)))
        if gh * gw != p:
            raise ValueError(f"patch_tokens has P={p}, not a square grid")
        image_hw = batch["image_hw"].to(patches.dtype)
        pixels = grid_pixel_centers(gh, gw, image_hw)  # (B, V, P, 2)
        spatial = self.position(pixels / image_hw.flip(-1).unsqueeze(-2))  # (B, V, P, D)
        offset = canonical_offset(batch["camera_R"], batch["camera_t"], batch["has_camera"])
        if self.camera is not None:
            rays = ray_features(batch["camera_K"], batch["camera_R"], batch["camera_t"],
                                pixels, offset, self.cfg.camera)
            spatial = spatial + self.camera(rays, batch["has_camera"])
        time = self.time(batch["frame_time"].to(patches.dtype))  # (B, V, T, D)
        # The mean over patches of patch_proj(x) + spatial + time, with the mean taken first:
        # LayerNorm's affine part and the Linear commute with it (the features are frozen, so
        # the normalisation itself needs no gradient).
        norm, proj = self.patch_proj
        mean_hat = F.layer_norm(patches, norm.normalized_shape, eps=norm.eps).mean(dim=3)
        patch_mean = proj(mean_hat * norm.weight + norm.bias)
        tokens_mean = patch_mean + spatial.mean(dim=2).unsqueeze(2) + time
        # Dropout on the frame token only: masking every patch costs ~10 % of a CPU step.
        frame = self.drop(self.pooled_proj(batch["pooled"]) + tokens_mean)
        return {"patch": PatchTokens(self, patches, spatial, time), "frame": self.norm(frame),
                "offset": offset, "grid": (gh, gw)}


class ViewCounter(nn.Module):
    """How many people a frame shows, and a marked region of it, from its patches
    (``model.view_counter`` = hidden width).

    The frame token is a linear function of the mean patch, and a count is not: the number of
    people is a sum over cells of a non-linear "this cell holds a person" feature. So a
    DeepSets counter (a per-cell MLP, summed over the grid and scaled by 1 / sqrt(P)) reads every
    frame; its sum goes to count logits (``count_logits``, trained by ``loss.view_count`` on the
    generator's per-view counts, inputs/view_counts.py) and, through a zero-initialised
    projection, is added to the frame token. The same cell features summed over a mark's box
    (each cell weighted by the share of it the box covers) go, through a second zero-initialised
    projection, to that mark's entity token: a question names a view by a mark ("the image with
    the frame labelled 1" is a mark around the whole image), so the count has to reach the mark
    the text names. At the start the model is unchanged, and the answer loss decides how much
    of the counts the rest of the model reads.
    """

    def __init__(self, cfg: ModelConfig, n_counts: int):
        super().__init__()
        h = cfg.view_counter
        self.norm = nn.LayerNorm(cfg.patch_dim)
        self.phi = nn.Sequential(nn.Linear(cfg.patch_dim, h), nn.GELU(), nn.Linear(h, h), nn.GELU())
        self.head = nn.Sequential(nn.Linear(h, h), nn.GELU(), nn.Linear(h, n_counts))
        self.to_token = nn.Linear(h, cfg.d_model)
        self.to_entity = nn.Linear(h, cfg.d_model)
        for layer in (self.to_token, self.to_entity):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, patches: torch.Tensor) -> Dict[str, torch.Tensor]:
        """patches (..., P, C) frozen features -> "logits" (..., n_counts), "token" (..., D),
        "cells" (..., P, h) the per-cell features (scaled by 1 / sqrt(P))."""
        cells = self.phi(self.norm(patches)) / math.sqrt(patches.shape[-2])
        summed = cells.sum(-2)
        return {"logits": self.head(summed), "token": self.to_token(summed), "cells": cells}

    def regions(self, cells: torch.Tensor, boxes: torch.Tensor, image_hw: torch.Tensor,
                grid: tuple) -> torch.Tensor:
        """(B, V, T, M, D) entity-token additions: ``cells`` (B, V, T, P, h) summed over each box
        of ``boxes`` (B, V, T, M, 4) pixel x0 y0 x1 y1, a cell weighted by the share of its area
        inside the box; ``image_hw`` (B, V, 2), ``grid`` (gh, gw)."""
        gh, gw = grid
        hw = image_hw.to(cells.dtype)
        ch, cw = hw[..., 0] / gh, hw[..., 1] / gw  # (B, V) cell height, width in pixels
        ys = torch.arange(gh, device=cells.device, dtype=cells.dtype)
        xs = torch.arange(gw, device=cells.device, dtype=cells.dtype)
        box = boxes.to(cells.dtype)

        def overlap(lo, hi, idx, size):  # (B, V, T, M, n): share of each cell row / column inside [lo, hi]
            c0 = idx * size[:, :, None, None, None]
            c1 = c0 + size[:, :, None, None, None]
            inter = torch.minimum(hi.unsqueeze(-1), c1) - torch.maximum(lo.unsqueeze(-1), c0)
            return inter.clamp_min(0) / size[:, :, None, None, None]

        oy = overlap(box[..., 1], box[..., 3], ys, ch)  # (B, V, T, M, gh)
        ox = overlap(box[..., 0], box[..., 2], xs, cw)  # (B, V, T, M, gw)
        share = (oy.unsqueeze(-1) * ox.unsqueeze(-2)).flatten(-2)  # (B, V, T, M, P) row-major
        return self.to_entity(torch.einsum("bvtmp,bvtph->bvtmh", share, cells))
