"""Frozen open_clip image tower returning patch tokens and the pooled embedding.

The backbone is applied once by the feature cache (training/); CrossViewModel consumes
the cached tensors. Geometry convention shared with model/camera.py: the image is resized
to image_size x image_size WITHOUT cropping, so patch (i, j) of a gh x gw grid covers
pixels [j/gw*W, (j+1)/gw*W) x [i/gh*H, (i+1)/gh*H) of the original W x H image.
"""
from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import Dict

import open_clip
import torch
import torch.nn.functional as F
from open_clip.model import CLIP, CLIPTextCfg, CLIPVisionCfg
from safetensors.torch import load_file
from torch import nn

from model.config import BackboneConfig
from model.readout import SemanticReadout

REPO_ROOT = Path(__file__).resolve().parents[1]


class FrozenClipBackbone(nn.Module):
    """Wraps a locked open_clip image tower: a native VisionTransformer or a timm trunk (a CNN).

    Args:
        visual: an open_clip image tower (already locked: no parameter requires grad); the
            patch grid is the level ``cfg.patch_layer`` of ``tower_levels(visual)``.
        cfg: the BackboneConfig it was built from (layer choice, pooling, identity).
        readout: an optional frozen ``SemanticReadout`` over the tower's tokens; its per-cell
            probabilities are appended to each patch token.
    """

    def __init__(self, visual: nn.Module, cfg: BackboneConfig, readout: SemanticReadout | None = None):
        super().__init__()
        self.visual = visual
        self.cfg = cfg
        self.readout = readout
        if readout is not None:
            readout.requires_grad_(False)
        levels = tower_levels(visual)
        self.num_blocks = len(levels)
        self.token_dim, self.stride = levels[cfg.patch_layer % self.num_blocks]
        if cfg.readout_only and readout is None:
            raise ValueError("backbone.readout_only needs backbone.readout")
        self.patch_dim = (readout.out_dim if cfg.readout_only else self.token_dim + 3 * cfg.pixel_cells ** 2
                          + (readout.out_dim if readout is not None else 0))
        self.pooled_dim = self.token_dim if cfg.pooled_source == "patch_mean" else pooled_width(visual)
        self.identity = backbone_identity(visual, cfg, readout)
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
                the tower's tokens, then (cfg.pixel_cells > 0) the cell's normalised pixels
                averaged to k x k sub-cells, channel-major (3 * k * k values), then (a readout)
                the readout's probabilities of the cell's semantic blocks.
            "pooled": (N, E) the tower's pooled (projected) embedding, E = pooled_dim.
        """
        layer = self.cfg.patch_layer % self.num_blocks
        early = self.cfg.pooled_source == "patch_mean"
        # patch_mean stops the tower after `layer`: an early layer then costs a fraction of
        # the full forward, and the pooled vector is the mean patch token of that layer.
        out = self.visual.forward_intermediates(
            images, indices=[layer], normalize_intermediates=self.cfg.normalize_patches,
            output_fmt="NCHW", stop_early=early, intermediates_only=early,
        )
        grid = (out["image_intermediates"] if isinstance(out, dict) else out)[0]  # (N, C, gh, gw)
        pooled = grid.mean((2, 3)) if early else out["image_features"]
        if self.cfg.pool_grid and self.cfg.pool_grid < grid.shape[-1]:
            grid = F.adaptive_avg_pool2d(grid, self.cfg.pool_grid)
        tokens = grid.flatten(2).transpose(1, 2)
        semantic = self.readout(tokens.float()).to(tokens.dtype) if self.readout is not None else None
        k = self.cfg.pixel_cells
        if k:
            gh, gw = grid.shape[-2:]
            cells = F.adaptive_avg_pool2d(images.float(), (gh * k, gw * k))  # (N, 3, gh*k, gw*k)
            cells = cells.view(-1, 3, gh, k, gw, k).permute(0, 2, 4, 1, 3, 5).reshape(-1, gh * gw, 3 * k * k)
            tokens = torch.cat([tokens, cells.to(tokens.dtype)], dim=-1)
        if self.cfg.readout_only:
            tokens = semantic
        elif semantic is not None:
            tokens = torch.cat([tokens, semantic], dim=-1)
        return {"patch_tokens": tokens, "pooled": pooled}


def tower_levels(visual: nn.Module) -> list[tuple[int, int]]:
    """(channels, stride in pixels) of each level ``forward_intermediates`` can return: a native
    open_clip ViT's blocks, or the feature levels of a timm trunk (``vision_cfg.timm_model_name``;
    a CNN: one level per stage, stride 2 .. 32)."""
    trunk = getattr(visual, "trunk", None)
    if trunk is not None:
        return [(int(f["num_chs"]), int(f["reduction"])) for f in trunk.feature_info]
    return [(visual.transformer.width, visual.patch_size[0])] * len(visual.transformer.resblocks)


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


def backbone_identity(visual: nn.Module, cfg: BackboneConfig, readout: nn.Module | None = None) -> str:
    """A string that changes whenever cached features would: architecture, weights, size, layer, readout."""
    pool = f"-pool{cfg.pool_grid}" if cfg.pool_grid else ""
    norm = "-ln" if cfg.normalize_patches else ""
    return (f"{cfg.arch}-{_state_digest(visual)[:16]}-{cfg.image_size}px"
            f"-layer{cfg.patch_layer}{norm}{pool}-pooled_{cfg.pooled_source}"
            + (f"-pix{cfg.pixel_cells}" if cfg.pixel_cells else "")
            + (f"-readout{_state_digest(readout)[:16]}" if readout is not None else "")
            + ("-only" if readout is not None and cfg.readout_only else ""))


def find_folder(path: str, marker: str) -> Path | None:
    """The folder ``path`` names if it holds ``marker``, else None. A relative path is tried
    against the working directory, then against the repository root, so shipped folders
    (``checkpoints/backbone/<name>``) are found from any directory."""
    for base in (Path.cwd(), REPO_ROOT):
        folder = (base / path) if not Path(path).is_absolute() else Path(path)
        if (folder / marker).is_file():
            return folder.resolve()
    return None


def resolve_pretrained(pretrained: str) -> Path | None:
    """The local open_clip folder (``open_clip_config.json`` + weights) ``pretrained`` names, else None."""
    return find_folder(pretrained, "open_clip_config.json")


def trained_level(pretrained: str | None) -> int | None:
    """The tower level the auxiliary heads of a folder made by ``pretrain.tower`` were
    trained on (its ``pretrain_figures.json``: ``grid_level``, -1 before that key existed), the
    level ``backbone.patch_layer`` should read; None for any other weights."""
    folder = find_folder(pretrained, "pretrain_figures.json") if pretrained else None
    if folder is None:
        return None
    return int(json.loads((folder / "pretrain_figures.json").read_text())["config"].get("grid_level", -1))


def folder_config(pretrained: str, **fields) -> BackboneConfig:
    """A BackboneConfig for a pretrained folder that reads the level its heads were trained on."""
    level = trained_level(pretrained)
    return BackboneConfig(pretrained=pretrained, patch_layer=-1 if level is None else level, **fields)


def load_open_clip_folder(folder: Path) -> CLIP:
    """open_clip's own loader on a local folder (``create_model('local-dir:...')``, strict), then a
    check that every stored tensor really arrived: a silent partial load would give random
    features under a pretrained name."""
    model = open_clip.create_model(f"local-dir:{folder}")
    weights = next((folder / n for n in ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")
                    if (folder / n).is_file()), None)
    if weights is None:
        raise FileNotFoundError(f"{folder}: no open_clip_model.safetensors beside open_clip_config.json")
    if weights.suffix == ".safetensors":
        stored = load_file(str(weights))
    else:
        stored = torch.load(weights, map_location="cpu", weights_only=True)
    state = model.state_dict()
    missing = sorted(set(state) - set(stored))
    wrong = [k for k, v in stored.items() if k not in state or state[k].shape != v.shape
             or not torch.equal(state[k].to(v.dtype), v)]
    if missing or wrong:
        raise RuntimeError(f"{weights}: weights did not load into the open_clip model "
                           f"(missing {missing[:3]}, mismatched {wrong[:3]})")
    return model


def build_backbone(cfg: BackboneConfig) -> FrozenClipBackbone:
    """Create the open_clip tower named by cfg, load weights if any, lock it.

    ``cfg.pretrained`` is a local open_clip folder (the shipped in-domain tower,
    ``checkpoints/backbone/<name>``), an open_clip tag or checkpoint file for ``cfg.arch``, or
    None: a randomly initialised tower (seeded by cfg.init_seed), announced by a warning: its
    features carry no semantics, only what random projections keep.
    """
    folder = resolve_pretrained(cfg.pretrained) if cfg.pretrained else None
    if cfg.pretrained is None:
        warnings.warn(
            f"backbone {cfg.arch!r} has NO pretrained weights (pretrained=None): features come "
            "from a randomly initialised ViT and are untrained. Set backbone.pretrained to an "
            "open_clip folder, tag or local checkpoint path for trained features.",
            stacklevel=2,
        )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.init_seed)
        if folder is not None:
            clip = load_open_clip_folder(folder)
            native = clip.visual.image_size[0] if isinstance(clip.visual.image_size, tuple) else clip.visual.image_size
            if native != cfg.image_size:
                raise ValueError(f"backbone.image_size {cfg.image_size} != {native}, the input size of {folder}")
        elif cfg.vision_cfg is not None:
            vision = CLIPVisionCfg(**cfg.vision_cfg)
            text = CLIPTextCfg(context_length=8, vocab_size=16, width=8, heads=1, layers=1)
            clip = CLIP(embed_dim=cfg.embed_dim or vision.width, vision_cfg=vision, text_cfg=text)
        else:
            clip = open_clip.create_model(
                cfg.arch, pretrained=cfg.pretrained, force_image_size=cfg.image_size,
                load_weights=cfg.pretrained is not None,
            )
    clip.lock_image_tower()
    clip.visual.requires_grad_(False)  # a timm tower's lock leaves its projection head trainable
    levels = tower_levels(clip.visual)
    trained = trained_level(cfg.pretrained) if folder is not None else None
    if trained is not None and trained % len(levels) != cfg.patch_layer % len(levels):
        warnings.warn(f"backbone.patch_layer {cfg.patch_layer} reads another level than the one {folder.name}'s "
                      f"auxiliary heads were trained on ({trained}); set model.backbone.patch_layer={trained} "
                      "for the features its pretraining made readable", stacklevel=2)
    readout = load_readout(cfg.readout, levels[cfg.patch_layer % len(levels)][0]) if cfg.readout else None
    return FrozenClipBackbone(clip.visual, cfg, readout)


def load_readout(path: str, dim: int) -> SemanticReadout:
    """The frozen semantic readout in folder ``path`` (``readout_config.json`` + ``readout.safetensors``,
    as ``pretrain.fit_readout`` writes them), strictly loaded: a readout with missing, extra or
    misshapen tensors, or one fitted on a tower of another width, is refused."""
    folder = find_folder(path, "readout_config.json")
    if folder is None:
        raise FileNotFoundError(f"backbone.readout {path!r}: no readout_config.json there "
                                f"(relative paths are tried against {Path.cwd()} and {REPO_ROOT})")
    arch = json.loads((folder / "readout_config.json").read_text())["model"]
    if arch["dim"] != dim:
        raise ValueError(f"backbone.readout {folder}: fitted on {arch['dim']}-wide tokens, the tower gives {dim}")
    readout = SemanticReadout(arch["dim"], [tuple(b) for b in arch["layout"]], depth=arch["depth"],
                              heads=arch["heads"], grid_cells=arch["grid_cells"], width=arch["width"])
    stored = load_file(str(folder / "readout.safetensors"))
    readout.load_state_dict({k: v.float() for k, v in stored.items()}, strict=True)
    return readout.eval()
