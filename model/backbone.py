"""Frozen open_clip image tower returning patch tokens and the pooled embedding.

``FrozenClipBackbone`` wraps an image tower that is already built and loaded
(``inputs.backbone`` resolves the pretrained folder and reads the weights); it is applied once
by the feature cache (inputs/features.py) and the perception heads consume the cached tensors. Geometry convention shared with model/camera.py: the image is resized
to image_size x image_size WITHOUT cropping, so patch (i, j) of a gh x gw grid covers
pixels [j/gw*W, (j+1)/gw*W) x [i/gh*H, (i+1)/gh*H) of the original W x H image.
"""
from __future__ import annotations

import dataclasses
import hashlib
from typing import Dict, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from model.config import BackboneConfig


class FrozenClipBackbone(nn.Module):
    """Wraps a locked open_clip image tower: a native VisionTransformer or a timm trunk (a CNN).

    Args:
        visual: an open_clip image tower (already locked: no parameter requires grad); the
            patch grid is the level ``cfg.patch_layer`` of ``tower_levels(visual)``.
        cfg: the BackboneConfig it was built from (layer choice, pooling, identity).
    """

    def __init__(self, visual: nn.Module, cfg: BackboneConfig):
        super().__init__()
        self.visual = visual
        self.cfg = cfg
        levels = tower_levels(visual)
        self.num_blocks = len(levels)
        self.token_dim, self.stride = levels[cfg.patch_layer % self.num_blocks]
        self.patch_dim = self.token_dim
        self.pooled_dim = self.token_dim if cfg.pooled_source == "patch_mean" else pooled_width(visual)
        self.identity = backbone_identity(visual, cfg)
        self.eval()

    def train(self, mode: bool = True) -> "FrozenClipBackbone":
        # Frozen means frozen: dropout / norm statistics never switch to training behaviour,
        # even when a parent module calls .train().
        return super().train(False)

    @property
    def grid_size(self) -> tuple:
        """(gh, gw) of the returned patch grid."""
        side = self.cfg.image_size // self.stride
        if self.cfg.pool_grid:
            side = min(side, self.cfg.pool_grid)
        return side, side

    @torch.no_grad()
    def forward(self, images: torch.Tensor) -> Dict[str, torch.Tensor]:
        """Encode preprocessed images.

        Args:
            images: (N, 3, S, S) float, resized to S = cfg.image_size and normalised with
                cfg.mean / cfg.std (see `preprocess_constants`).
        Returns:
            "patch_tokens": (N, P, C) with P = gh * gw in row-major grid order, C = patch_dim:
                the tower's tokens.
            "pooled": (N, E) the tower's pooled (projected) embedding, E = pooled_dim.
        """
        return encode_levels([self], images)[0]

    def level_shapes(self, layers: Sequence[int]) -> list[tuple[int, int]]:
        """(channels, stride) of each of ``layers`` (indices into ``tower_levels``)."""
        levels = tower_levels(self.visual)
        return [levels[layer % self.num_blocks] for layer in layers]

    @torch.no_grad()
    def feature_maps(self, images: torch.Tensor, layers: Sequence[int]) -> list[torch.Tensor]:
        """The tower's levels ``layers`` as maps, from ONE pass that stops at the deepest of them
        (no pooled embedding, no ``pool_grid``): what the perception's feature pyramid reads.

        Args:
            images: (N, 3, S, S) preprocessed as for ``forward``; S may differ from
                ``cfg.image_size`` for a CNN.
            layers: indices into ``tower_levels`` (a CNN: 1, 2, 3 are its stride-4, 8, 16 stages).
        Returns:
            per layer, in the order asked, (N, C_l, S / stride_l, S / stride_l).
        """
        wanted = sorted({layer % self.num_blocks for layer in layers})
        out = self.visual.forward_intermediates(
            images, indices=wanted, normalize_intermediates=self.cfg.normalize_patches, output_fmt="NCHW",
            stop_early=True, intermediates_only=True)
        maps = dict(zip(wanted, out["image_intermediates"] if isinstance(out, dict) else out))
        return [maps[layer % self.num_blocks] for layer in layers]


@torch.no_grad()
def encode_levels(towers: Sequence[FrozenClipBackbone], images: torch.Tensor) -> list[Dict[str, torch.Tensor]]:
    """What each of ``towers`` returns for ``images`` (``FrozenClipBackbone.forward``), from ONE pass
    of the image tower: they must wrap the same tower and differ only in ``patch_layer``."""
    first = towers[0]
    if any(t.visual is not first.visual or dataclasses.replace(t.cfg, patch_layer=first.cfg.patch_layer) != first.cfg
           for t in towers):
        raise ValueError("encode_levels: the towers must share one image tower and differ only in patch_layer")
    cfg = first.cfg
    layers = [t.cfg.patch_layer % t.num_blocks for t in towers]
    early = cfg.pooled_source == "patch_mean"
    # patch_mean stops the tower after the deepest level asked: an early layer then costs a
    # fraction of the full forward, and the pooled vector is the mean patch token of that level.
    out = first.visual.forward_intermediates(
        images, indices=sorted(set(layers)), normalize_intermediates=cfg.normalize_patches,
        output_fmt="NCHW", stop_early=early, intermediates_only=early,
    )
    grids = dict(zip(sorted(set(layers)), out["image_intermediates"] if isinstance(out, dict) else out))
    results = []
    for layer in layers:
        grid = grids[layer]  # (N, C, gh, gw)
        pooled = grid.mean((2, 3)) if early else out["image_features"]
        if cfg.pool_grid and cfg.pool_grid < grid.shape[-1]:
            grid = F.adaptive_avg_pool2d(grid, cfg.pool_grid)
        results.append({"patch_tokens": grid.flatten(2).transpose(1, 2), "pooled": pooled})
    return results


def tower_levels(visual: nn.Module) -> list[tuple[int, int]]:
    """(channels, stride in pixels) of each level ``forward_intermediates`` can return: a native
    open_clip ViT's blocks, or the feature levels of a timm trunk (``vision_cfg.timm_model_name``;
    a CNN: one level per stage, stride 2 .. 32)."""
    trunk = getattr(visual, "trunk", None)
    if trunk is not None:
        return [(int(f["num_chs"]), int(f["reduction"])) for f in trunk.feature_info]
    return [(visual.transformer.width, visual.patch_size[0])] * len(visual.transformer.resblocks)


def has_fixed_input_size(visual: nn.Module) -> bool:
    """Whether the tower has position embeddings (a ViT, native or timm), which fix its input size;
    a CNN runs at any size."""
    trunk = getattr(visual, "trunk", None)
    if trunk is not None:
        return getattr(trunk, "pos_embed", None) is not None
    return getattr(visual, "positional_embedding", None) is not None


def pooled_width(visual: nn.Module) -> int:
    """Width of the tower's pooled (projected) image embedding."""
    if hasattr(visual, "output_dim"):
        return int(visual.output_dim)
    linears = [m for m in visual.head.modules() if isinstance(m, nn.Linear)]  # a timm tower's projection
    return int(linears[-1].out_features) if linears else tower_levels(visual)[-1][0]


def preprocess_constants(cfg: BackboneConfig) -> Dict[str, object]:
    """What the feature cache needs to prepare images: resize (no crop) then normalise."""
    return {"image_size": cfg.image_size, "mean": tuple(cfg.mean), "std": tuple(cfg.std),
            "resize": "squash"}


def _state_digest(module: nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def backbone_identity(visual: nn.Module, cfg: BackboneConfig) -> str:
    """A string that changes whenever cached features would: architecture, weights, size, layer."""
    pool = f"-pool{cfg.pool_grid}" if cfg.pool_grid else ""
    norm = "-ln" if cfg.normalize_patches else ""
    return (f"{cfg.arch}-{_state_digest(visual)[:16]}-{cfg.image_size}px"
            f"-layer{cfg.patch_layer}{norm}{pool}-pooled_{cfg.pooled_source}")
