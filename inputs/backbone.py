"""The frozen tower from its config: ``pretrained`` resolved once, the weights loaded from what it names.

``locate_pretrained`` is the one place that reads that string; ``load_clip`` loads the open_clip
model once; ``tower_from_clip`` locks its image tower into ``model.backbone.FrozenClipBackbone``
(the perception's levels are read through ``inputs.perception.level_caches`` from one load).
model/ receives the built modules and never reads a path.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import open_clip
import torch
from open_clip.model import CLIP, CLIPTextCfg, CLIPVisionCfg
from safetensors.torch import load_file

from common.config import ConfigError
from model.backbone import FrozenClipBackbone, has_fixed_input_size, tower_levels
from model.config import BackboneConfig

REPO_ROOT = Path(__file__).resolve().parents[1]
KEY = "model.backbone.pretrained"
WEIGHT_SUFFIXES = (".bin", ".pt", ".pth", ".safetensors", ".ckpt")


def search_bases() -> list[Path]:
    """Where a relative path is looked up: the working directory, then the repository root, so
    shipped folders (``checkpoints/backbone/<name>``) are found from any directory."""
    return list(dict.fromkeys([Path.cwd().resolve(), REPO_ROOT]))


def find_folder(path: str, marker: str) -> Path | None:
    """The folder ``path`` names if it holds ``marker``, else None (relative: see ``search_bases``)."""
    for base in search_bases():
        folder = (base / path) if not Path(path).is_absolute() else Path(path)
        if (folder / marker).is_file():
            return folder.resolve()
    return None


def locate_pretrained(pretrained: str | None, key: str = KEY) -> Path | str | None:
    """What ``pretrained`` names: a local open_clip folder (its Path), a local checkpoint file
    for ``arch`` (its Path), an open_clip tag (the string), or None (a random tower).

    Raises:
        ConfigError: one line naming ``key``, when the value looks like a path (it has a folder
            part or a weights suffix) and names neither an open_clip folder nor a file.
    """
    if pretrained is None:
        return None
    folder = find_folder(pretrained, "open_clip_config.json")
    if folder is not None:
        return folder
    for base in search_bases():
        candidate = Path(pretrained) if Path(pretrained).is_absolute() else base / pretrained
        if candidate.is_file():
            return candidate.resolve()
    if "/" in pretrained or "\\" in pretrained or pretrained.endswith(WEIGHT_SUFFIXES):
        where = " and ".join(str(b) for b in search_bases())
        raise ConfigError(f"{key}={pretrained!r}: no open_clip folder (open_clip_config.json) or weights file "
                          f"there (a relative path is looked up under {where})")
    return pretrained  # an open_clip tag for backbone.arch (e.g. "openai")


def trained_level(folder: Path | None) -> int | None:
    """The tower level the auxiliary heads of a folder made by ``pretrain.tower`` were trained on
    (its ``pretrain_figures.json``: ``grid_level``, -1 before that key existed), the level
    ``backbone.patch_layer`` should read; None for any other weights."""
    if folder is None or not (Path(folder) / "pretrain_figures.json").is_file():
        return None
    return int(json.loads((Path(folder) / "pretrain_figures.json").read_text())["config"].get("grid_level", -1))


def folder_config(pretrained: str, **fields) -> BackboneConfig:
    """A BackboneConfig for a pretrained folder that reads the level its heads were trained on."""
    source = locate_pretrained(pretrained, key="backbone")
    level = trained_level(source if isinstance(source, Path) and source.is_dir() else None)
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


def load_clip(cfg: BackboneConfig, source: Path | str | None) -> CLIP:
    """The open_clip model (image and text towers) ``source`` names, its image tower locked.
    Built under a forked RNG seeded by ``cfg.init_seed``: a random tower is reproducible and the
    caller's random stream is untouched."""
    if source is None:
        warnings.warn(
            f"backbone {cfg.arch!r} has NO pretrained weights (pretrained=None): features come "
            "from a randomly initialised ViT and are untrained. Set backbone.pretrained to an "
            "open_clip folder, tag or local checkpoint path for trained features.",
            stacklevel=3,
        )
    folder = source if isinstance(source, Path) and source.is_dir() else None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.init_seed)
        if folder is not None:
            clip = load_open_clip_folder(folder)
            native = clip.visual.image_size[0] if isinstance(clip.visual.image_size, tuple) else clip.visual.image_size
            if native != cfg.image_size and has_fixed_input_size(clip.visual):
                raise ValueError(f"backbone.image_size {cfg.image_size} != {native}, the input size of the ViT {folder}")
        elif cfg.vision_cfg is not None:
            vision = CLIPVisionCfg(**cfg.vision_cfg)
            text = CLIPTextCfg(context_length=8, vocab_size=16, width=8, heads=1, layers=1)
            clip = CLIP(embed_dim=cfg.embed_dim or vision.width, vision_cfg=vision, text_cfg=text)
        else:
            clip = open_clip.create_model(
                cfg.arch, pretrained=None if source is None else str(source), force_image_size=cfg.image_size,
                load_weights=source is not None,
            )
    clip.lock_image_tower()
    clip.visual.requires_grad_(False)  # a timm tower's lock leaves its projection head trainable
    return clip


def tower_from_clip(clip: CLIP, cfg: BackboneConfig, source: Path | str | None) -> FrozenClipBackbone:
    """The frozen tower module over a loaded CLIP, with a warning when
    ``patch_layer`` reads another level than the folder's auxiliary heads were trained on."""
    levels = tower_levels(clip.visual)
    folder = source if isinstance(source, Path) and source.is_dir() else None
    trained = trained_level(folder)
    if trained is not None and trained % len(levels) != cfg.patch_layer % len(levels):
        warnings.warn(f"backbone.patch_layer {cfg.patch_layer} reads another level than the one {folder.name}'s "
                      f"auxiliary heads were trained on ({trained}); set model.backbone.patch_layer={trained} "
                      "for the features its pretraining made readable", stacklevel=3)
    return FrozenClipBackbone(clip.visual, cfg)


def build_backbone(cfg: BackboneConfig) -> FrozenClipBackbone:
    """The frozen image tower alone (a probe, a cache at one level).

    ``cfg.pretrained`` is a local open_clip folder (the shipped in-domain tower,
    ``checkpoints/backbone/<name>``), an open_clip tag or checkpoint file for ``cfg.arch``, or
    None: a randomly initialised tower (seeded by cfg.init_seed), announced by a warning: its
    features carry no semantics, only what random projections keep.
    """
    source = locate_pretrained(cfg.pretrained)
    return tower_from_clip(load_clip(cfg, source), cfg, source)
