"""Entity records from pixels: the perception heads (``model.perception``) on the frozen tower's
levels, in the record format of ``bench.entities``.

    backbone, fine_layer, cfg = read_settings("runs/perception")      # perception.json
    source = perception_source(backbone, "data/cache", fine_layer, cfg)  # one load of the tower
    heads = load_perception("runs/perception", source, cfg)          # perception.safetensors
    records = predict_records(heads, image_paths, source)            # absolute path -> records

A perception folder holds the heads' weights (``perception.safetensors``) and what they were
fitted on (``perception.json``: the tower's config, the finer level, the heads' config), both
written by ``python -m pretrain.perception``. What the heads read depends on their neck:

- ``plain`` (the shipped heads): the tower's patch grid and a finer level through their feature
  caches (``LevelCaches``), so the tower is never re-run on an image it has encoded;
- ``fpn``: the tower's stride-4, 8 and 16 maps, computed for each image as it is predicted
  (``TowerPyramid``): its records are predicted once and cached (``inputs.entity_records``), and
  the finest map alone would cost 0.4 MB an image in a feature cache.
"""
from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path
from typing import NamedTuple

import torch

from bench.format import Benchmark
from bench.entities import FIELDS
from common.config import from_dict, to_dict
from inputs.entity_batch import CONTACT_WIDTH, image_stem
from inputs.features import FeatureCache, fill_together, image_hw, load_image_tensor
from model.backbone import FrozenClipBackbone
from model.config import BackboneConfig
from model.perception import PerceptionConfig, PerceptionHeads

WEIGHTS = "perception.safetensors"
SETTINGS = "perception.json"


class LevelCaches(NamedTuple):
    coarse: FeatureCache               # the tower's patch grid (the level python train.py reads)
    fine: FeatureCache | None          # a finer level of the same tower, or None
    backbone: BackboneConfig
    fine_layer: int                    # -1: none


class TowerPyramid(NamedTuple):
    tower: FrozenClipBackbone           # the frozen tower, run on each image
    levels: tuple[int, ...]             # the levels the feature pyramid reads, finest first

    def level_dims(self) -> list[int]:
        return [c for c, _ in self.tower.level_shapes(self.levels)]

    def images(self, paths: list[str]) -> torch.Tensor:
        """(N, 3, S, S) of ``paths``, resized (no crop) to the tower's input side and normalised;
        channels-last in memory, as the tower's convolutions run fastest on the CPU (13 % on the
        tower's pass and the heads' at 224 px, width 64)."""
        cfg = self.tower.cfg
        images = torch.stack([load_image_tensor(p, cfg.image_size, cfg.mean, cfg.std) for p in paths])
        return images.contiguous(memory_format=torch.channels_last)

    def maps(self, images: torch.Tensor) -> list[torch.Tensor]:
        """The tower's maps of ``levels`` for preprocessed images (one pass, no grad)."""
        return self.tower.feature_maps(images, self.levels)


def tower_pyramid(backbone: BackboneConfig, levels: list[int] | tuple[int, ...]) -> TowerPyramid:
    """The frozen tower ``backbone`` names, read at ``levels`` (one resolution and load)."""
    from inputs.backbone import build_backbone
    return TowerPyramid(build_backbone(backbone).to(memory_format=torch.channels_last), tuple(levels))


def perception_source(backbone: BackboneConfig, cache_dir: str | Path, fine_layer: int,
                      heads: PerceptionConfig) -> "LevelCaches | TowerPyramid":
    """What heads of ``heads`` read: the tower's cached levels (plain) or the tower itself (fpn)."""
    if heads.neck == "fpn":
        return tower_pyramid(backbone, heads.levels)
    return level_caches(backbone, cache_dir, fine_layer)


def level_caches(backbone: BackboneConfig, cache_dir: str | Path, fine_layer: int = 2) -> LevelCaches:
    """The feature caches of the tower's configured level and of ``fine_layer`` (-1: none), from
    one resolution of ``backbone.pretrained`` and one load of its weights."""
    from inputs.backbone import load_clip, locate_pretrained, tower_from_clip
    source = locate_pretrained(backbone.pretrained)
    clip = load_clip(backbone, source)
    coarse = FeatureCache(cache_dir, tower_from_clip(clip, backbone, source))
    fine = None
    if fine_layer >= 0:
        with warnings.catch_warnings():  # the finer level is read beside the trained one on purpose
            warnings.filterwarnings("ignore", message="backbone.patch_layer .* reads another level")
            fine_tower = tower_from_clip(clip, dataclasses.replace(backbone, patch_layer=fine_layer), source)
        fine = FeatureCache(cache_dir, fine_tower)
    return LevelCaches(coarse, fine, backbone, fine_layer)


def settings_of(source: "LevelCaches | TowerPyramid", heads: PerceptionConfig) -> dict:
    """What ``perception.json`` records: enough to rebuild the heads' source and the heads."""
    if isinstance(source, TowerPyramid):
        return {"backbone": to_dict(source.tower.cfg), "fine_layer": -1, "heads": dataclasses.asdict(heads)}
    return {"backbone": to_dict(source.backbone), "fine_layer": source.fine_layer, "heads": dataclasses.asdict(heads)}


def read_settings(folder: str | Path) -> tuple[BackboneConfig, int, PerceptionConfig]:
    """(tower config, finer level, heads config) of a perception folder.

    Raises:
        FileNotFoundError / ValueError: the folder lacks its files or its settings do not parse.
    """
    folder = Path(folder)
    for name in (WEIGHTS, SETTINGS):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder / name}: missing; python -m pretrain.perception writes it")
    try:
        raw = json.loads((folder / SETTINGS).read_text())
        return (from_dict(BackboneConfig, raw["backbone"], path="backbone"), int(raw["fine_layer"]),
                from_dict(PerceptionConfig, raw["heads"], path="heads"))
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{folder / SETTINGS}: not perception settings ({' '.join(str(err).split())[:200]})") from None


def load_heads(state: dict[str, torch.Tensor], cfg: PerceptionConfig, in_dim: int = 0, fine_dim: int = 0,
               level_dims: list[int] | None = None) -> PerceptionHeads:
    """Heads of an earlier fit from their weights, on a tower level of ``in_dim`` channels (and a
    finer one of ``fine_dim``, 0: none), or for an fpn neck on levels of ``level_dims`` channels.
    Raises ValueError, naming the mismatch, when the weights were fitted on other levels."""
    if cfg.neck == "fpn":
        cfg, levels = dataclasses.replace(cfg, level_dims=list(level_dims or [])), f"{level_dims}"
    else:
        cfg, levels = dataclasses.replace(cfg, in_dim=in_dim, fine_dim=fine_dim), f"{in_dim} + {fine_dim}"
    heads = PerceptionHeads(cfg, FIELDS, CONTACT_WIDTH)
    try:
        heads.load_state_dict(state)
    except RuntimeError as err:
        raise ValueError(f"perception heads do not fit tower levels of {levels} channels: "
                         f"{' '.join(str(err).split())[:300]}") from None
    return heads.eval()


def load_perception(folder: str | Path, source: "LevelCaches | TowerPyramid", cfg: PerceptionConfig | None = None
                    ) -> PerceptionHeads:
    """The heads stored in ``folder`` (``WEIGHTS``) on ``source``'s levels."""
    from safetensors.torch import load_file
    if cfg is None:
        cfg = read_settings(folder)[2]
    state = load_file(str(Path(folder) / WEIGHTS))
    if isinstance(source, TowerPyramid):
        return load_heads(state, cfg, level_dims=source.level_dims())
    fine_dim = source.fine.expected_shapes()["patch_tokens"][-1] if source.fine is not None else 0
    return load_heads(state, cfg, source.coarse.expected_shapes()["patch_tokens"][-1], fine_dim)


def benchmark_images(bench: Benchmark) -> list[tuple[str, str, str]]:
    """(absolute image path, scene, stem) of every image a question of ``bench`` shows, sorted."""
    out = {}
    for s in bench.samples:
        for v in s.views:
            for f in v.frames:
                path = str((Path(bench.root) / f.image).resolve())
                out[path] = (path, s.scene, image_stem(f.image))
    return sorted(out.values())


def features(caches: LevelCaches, paths: list[str]) -> tuple[torch.Tensor, torch.Tensor | None,
                                                              dict[str, tuple[int, int]]]:
    """The patch tokens of ``paths`` at both levels (the finer one None without it), and each image's
    size. An image either cache lacks is encoded once for both levels (``fill_together``)."""
    if caches.fine is not None:
        fill_together([caches.coarse, caches.fine], paths, desc="encoding images (both levels)")
    table = caches.coarse.table(paths, desc="features")
    rows = torch.tensor([table.index[p] for p in paths])
    fine = None
    if caches.fine is not None:
        ft = caches.fine.table(paths, desc="fine features")
        fine = ft.patch_tokens[torch.tensor([ft.index[p] for p in paths])]
    return table.patch_tokens[rows], fine, table.sizes


@torch.no_grad()
def predict_records(heads: PerceptionHeads, paths: list[str], source: "LevelCaches | TowerPyramid",
                    batch_size: int = 128) -> dict[str, list[dict]]:
    """Absolute image path -> predicted entity records (``id`` -1: identity is never perceived)."""
    heads.eval()
    if isinstance(source, TowerPyramid):
        return _predict_on_the_tower(heads, paths, source, min(batch_size, 32))
    feats, fine, sizes = features(source, paths)
    out = {}
    for i in range(0, len(paths), batch_size):
        chunk = paths[i:i + batch_size]
        maps = heads(feats[i:i + batch_size], None if fine is None else fine[i:i + batch_size])
        out.update(decode_by_size(heads, maps, chunk, sizes))
    return out


def decode_by_size(heads: PerceptionHeads, maps: dict[str, torch.Tensor], paths: list[str],
                   sizes: dict[str, tuple[int, int]]) -> dict[str, list[dict]]:
    """``heads.decode`` of a batch's maps, each image's boxes in its own pixels (``sizes``: (h, w))."""
    out = {}
    for hw in dict.fromkeys(sizes[p] for p in paths):
        rows = [j for j, p in enumerate(paths) if sizes[p] == hw]
        for j, recs in zip(rows, heads.decode({k: v[rows] for k, v in maps.items()}, hw)):
            out[paths[j]] = recs
    return out


def _predict_on_the_tower(heads: PerceptionHeads, paths: list[str], source: TowerPyramid,
                          batch_size: int) -> dict[str, list[dict]]:
    from tqdm.auto import tqdm
    out = {}
    for i in tqdm(range(0, len(paths), batch_size), desc="perception", unit="batch", disable=None):
        chunk = paths[i:i + batch_size]
        maps = heads(*source.maps(source.images(chunk)))
        out.update(decode_by_size(heads, maps, chunk, {p: image_hw(p) for p in chunk}))
    return out
