"""Entity records from pixels: the perception heads (``model.perception``) on the frozen tower's
cached levels, in the record format of ``bench.entities``.

    caches = level_caches(backbone_cfg, "data/cache", fine_layer=2)   # one load of the tower
    heads = load_perception("runs/perception", caches)                # perception.safetensors + .json
    records = predict_records(heads, image_paths, caches)             # absolute path -> records

A perception folder holds the heads' weights (``perception.safetensors``) and what they were
fitted on (``perception.json``: the tower's config, the finer level, the heads' config), both
written by ``python -m pretrain.perception``. The tower is never re-run on an image it has
encoded: both levels are read through their feature caches.
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
from inputs.features import FeatureCache, fill_together
from model.config import BackboneConfig
from model.perception import PerceptionConfig, PerceptionHeads

WEIGHTS = "perception.safetensors"
SETTINGS = "perception.json"


class LevelCaches(NamedTuple):
    coarse: FeatureCache               # the tower's patch grid (the level python train.py reads)
    fine: FeatureCache | None          # a finer level of the same tower, or None
    backbone: BackboneConfig
    fine_layer: int                    # -1: none


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


def settings_of(caches: LevelCaches, heads: PerceptionConfig) -> dict:
    """What ``perception.json`` records: enough to rebuild the caches and the heads."""
    return {"backbone": to_dict(caches.backbone), "fine_layer": caches.fine_layer, "heads": dataclasses.asdict(heads)}


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


def load_heads(state: dict[str, torch.Tensor], cfg: PerceptionConfig, in_dim: int, fine_dim: int = 0
               ) -> PerceptionHeads:
    """Heads of an earlier fit from their weights, on a tower level of ``in_dim`` channels (and a
    finer one of ``fine_dim``, 0: none). Raises ValueError, naming the mismatch, when the weights
    were fitted on other levels."""
    heads = PerceptionHeads(dataclasses.replace(cfg, in_dim=in_dim, fine_dim=fine_dim), FIELDS, CONTACT_WIDTH)
    try:
        heads.load_state_dict(state)
    except RuntimeError as err:
        raise ValueError(f"perception heads do not fit tower levels of {in_dim} + {fine_dim} channels: "
                         f"{' '.join(str(err).split())[:300]}") from None
    return heads.eval()


def load_perception(folder: str | Path, caches: LevelCaches, cfg: PerceptionConfig | None = None) -> PerceptionHeads:
    """The heads stored in ``folder`` (``WEIGHTS``) on ``caches``' levels."""
    from safetensors.torch import load_file
    if cfg is None:
        cfg = read_settings(folder)[2]
    fine_dim = caches.fine.expected_shapes()["patch_tokens"][-1] if caches.fine is not None else 0
    return load_heads(load_file(str(Path(folder) / WEIGHTS)), cfg, caches.coarse.expected_shapes()["patch_tokens"][-1],
                      fine_dim)


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
def predict_records(heads: PerceptionHeads, paths: list[str], caches: LevelCaches,
                    batch_size: int = 128) -> dict[str, list[dict]]:
    """Absolute image path -> predicted entity records (``id`` -1: identity is never perceived)."""
    heads.eval()
    feats, fine, sizes = features(caches, paths)
    out = {}
    for i in range(0, len(paths), batch_size):
        chunk = paths[i:i + batch_size]
        maps = heads(feats[i:i + batch_size], None if fine is None else fine[i:i + batch_size])
        for hw in dict.fromkeys(sizes[p] for p in chunk):  # boxes in each image's own pixels
            rows = [j for j, p in enumerate(chunk) if sizes[p] == hw]
            for j, recs in zip(rows, heads.decode({k: v[rows] for k, v in maps.items()}, hw)):
                out[chunk[j]] = recs
    return out
