"""The pretraining corpus of the in-domain CLIP: rendered single views with per-view truth.

Scenes come from the benchmark generator (``bench.synth``) with its scene distribution, but
from a seed stream no benchmark split uses: benchmark scenes draw ``rng([seed, 2, idx])``
(spatial) and ``rng([seed, 4, idx])`` (temporal); the corpus draws ``rng([seed, 100, idx])`` and
``rng([seed, 101, idx])`` (tests/test_pretrain_corpus.py checks the scenes differ).

Per image (a spatial view, or a frame of a temporal clip; about half carry Set-of-Mark boxes
drawn exactly as the benchmark draws them):
- the image itself, resized (bicubic, no crop) to the tower's input size, uint8;
- its canonical caption (``bench.synth.captions.view_caption``);
- dense labels on the tower's g x g patch grid: body part, shirt and trousers colour, entity
  kind, object kind, person centres (visible-mask centroids) and mean log depth per cell;
- the number of people the view shows (``seen``) and, per seen person, its visible box and
  attribute classes (``bench.synth.captions.person_facts``);
- with ``semantic``: the view's semantic grid (``bench.synth.semantic_grid``: per cell the owning
  person's attributes, the owning object, the view's count) as class indices per block, the
  targets of the readout trained beside the tower.
Nothing links views: every label is about one image.
"""
from __future__ import annotations

import multiprocessing as mp
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from tqdm.auto import tqdm

from common.config import load_config
from bench.entities import COLOUR_NAMES, OBJECT_KINDS
from bench.synth.body import PARTS
from bench.synth.captions import person_facts, view_caption
from bench.synth.config import SynthConfig
from bench.synth.marks import draw_marks
from bench.synth.observe import observe_view
from bench.synth.renderer import camera_rays, render
from bench.synth.scene import sample_scene
from bench.synth.scene_temporal import sample_temporal_scene
from bench.synth.semantic_grid import block_targets, view_features

SPATIAL_TAG, TEMPORAL_TAG = 100, 101  # corpus seed-stream tags (the benchmark uses 2 and 4)
PERSON_FIELDS = ("shirt", "trousers", "hat", "posture", "arm_l", "arm_r", "contact_kind", "contact_colour", "frac")
DENSE_FIELDS = ("part", "shirt", "trousers", "kind", "object", "centre")


@dataclass
class CorpusConfig:
    """What to render. Sizes are scenes; a spatial scene gives one image per camera (4-6)."""

    bench_config: str = "configs/bench/default.yaml"  # scene distribution (a bench.synth config)
    seed: int = 0  # corpus seed; the stream tags keep it apart from every benchmark seed
    n_spatial: int = 3000  # spatial scenes
    n_temporal: int = 300  # temporal scenes
    frames_per_view: int = 2  # temporal: frames drawn per camera (of cfg.temporal.frames)
    mark_prob: float = 0.5  # share of images with Set-of-Mark boxes on 1-4 of their people
    image_size: int = 160  # tower input side
    grid: int = 10  # patch grid side (image_size / patch size)
    semantic: bool = False  # also store each view's semantic grid (the readout's targets)
    workers: int = 0  # processes; 0 = one per CPU core


def _cell_index(h: int, w: int, grid: int) -> np.ndarray:
    ys = (np.arange(h) * grid // h)[:, None]
    xs = (np.arange(w) * grid // w)[None, :]
    return (ys * grid + xs).ravel()


def _majority(cls: np.ndarray, cells: np.ndarray, n_cls: int, grid: int, min_share: float = 0.15) -> np.ndarray:
    """Per cell, the most frequent non-zero class if it covers >= min_share of the cell, else 0."""
    counts = np.bincount(cells * n_cls + cls.ravel(), minlength=grid * grid * n_cls).reshape(grid * grid, n_cls)
    size = counts.sum(1)
    counts[:, 0] = 0
    best = counts.argmax(1)
    keep = counts[np.arange(len(best)), best] >= min_share * np.maximum(size, 1)
    return np.where(keep, best, 0).reshape(grid, grid).astype(np.int8)


def dense_labels(out, scene, facts: list[dict], grid: int) -> dict[str, np.ndarray]:
    """(grid, grid) label maps of one render (see module docstring)."""
    h, w = out.instance.shape
    cells = _cell_index(h, w, grid)
    inst = out.instance.astype(np.int64)
    n_ent = max([int(inst.max())] + [p.pid for p in scene.persons] + [o.oid for o in scene.objects]) + 1
    shirt_of, trousers_of = np.zeros(n_ent, np.int64), np.zeros(n_ent, np.int64)
    kind_of, object_of = np.zeros(n_ent, np.int64), np.zeros(n_ent, np.int64)
    for p in scene.persons:
        shirt_of[p.pid] = COLOUR_NAMES.index(p.shirt) + 1
        trousers_of[p.pid] = COLOUR_NAMES.index(p.trousers) + 1
        kind_of[p.pid] = 1
    for o in scene.objects:
        kind_of[o.oid] = 2
        object_of[o.oid] = OBJECT_KINDS.index(o.kind) + 1
    part = out.part.astype(np.int64)
    torso_like = np.isin(part, [2, 3, 6])  # torso and upper arms carry the shirt colour
    leg_like = np.isin(part, [9, 10, 12, 13])
    labels = {
        "part": _majority(part, cells, len(PARTS) + 1, grid),
        "shirt": _majority(np.where(torso_like, shirt_of[inst], 0), cells, len(COLOUR_NAMES) + 1, grid),
        "trousers": _majority(np.where(leg_like, trousers_of[inst], 0), cells, len(COLOUR_NAMES) + 1, grid),
        "kind": _majority(kind_of[inst], cells, 3, grid),
        "object": _majority(object_of[inst], cells, len(OBJECT_KINDS) + 1, grid),
    }
    centre = np.zeros((grid, grid), np.int8)
    for f in facts:
        ys, xs = np.nonzero(out.instance == f["pid"])
        centre[int(ys.mean() * grid // h), int(xs.mean() * grid // w)] += 1
    labels["centre"] = centre
    depth = np.where(np.isfinite(out.depth), np.log(np.clip(out.depth, 0.1, 50.0)), np.nan).ravel()
    sums = np.bincount(cells, weights=np.nan_to_num(depth), minlength=grid * grid)
    hits = np.bincount(cells, weights=np.isfinite(depth).astype(float), minlength=grid * grid)
    labels["depth"] = np.where(hits > 0, sums / np.maximum(hits, 1), np.nan).reshape(grid, grid).astype(np.float16)
    return labels


def draw_random_marks(image: Image.Image, facts: list[dict], rng: np.random.Generator,
                      mark_prob: float) -> tuple[Image.Image, dict]:
    """With probability ``mark_prob``, Set-of-Mark boxes on 1-4 of the seen people, drawn as the
    benchmark draws them; returns the image and {pid: label} of the marked people."""
    if not facts or rng.random() >= mark_prob:
        return image, {}
    chosen = rng.choice(len(facts), size=int(rng.integers(1, min(4, len(facts)) + 1)), replace=False)
    labels = rng.choice(np.arange(1, 10), size=len(chosen), replace=False)
    marks = {facts[i]["pid"]: str(lab) for i, lab in zip(chosen, labels)}
    image = draw_marks(image, [{"entity": facts[i]["pid"], "label": marks[facts[i]["pid"]],
                                "box": facts[i]["box"]} for i in chosen])
    return image, marks


def save_corpus(data: dict, out_file: str | Path) -> None:
    """torch.save to a temporary name, then rename: an interrupted build leaves nothing behind."""
    out_file = Path(out_file)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_file.with_name(out_file.name + f".tmp-{os.getpid()}")
    torch.save(data, tmp)
    os.replace(tmp, out_file)


def _image_record(cfg: CorpusConfig, scene, out, obs, t: float, rng: np.random.Generator) -> dict:
    facts = person_facts(scene, obs, t)
    objects = sorted((o for o in scene.objects if obs["objects"][o.oid]["visible"]),
                     key=lambda o: sum(obs["objects"][o.oid]["box"][0::2]))
    image, marks = draw_random_marks(Image.fromarray(out.rgb), facts, rng, cfg.mark_prob)
    if image.size != (cfg.image_size, cfg.image_size):
        image = image.resize((cfg.image_size, cfg.image_size), Image.BICUBIC)
    for f in facts:
        f["marked"] = int(marks.get(f["pid"], 0))
    record = {"image": np.asarray(image, dtype=np.uint8),
              "caption": view_caption(facts, [o.name for o in objects], marks),
              "dense": dense_labels(out, scene, facts, cfg.grid), "count": len(facts), "persons": facts}
    if cfg.semantic:
        record["semantic"] = block_targets(view_features(scene, out, obs, t, cfg.grid)).astype(np.int8)
    return record


def _scene_job(args) -> list[dict]:
    cfg, synth, idx, temporal = args
    torch.set_num_threads(1)
    if temporal:
        rng = np.random.default_rng([cfg.seed, TEMPORAL_TAG, idx])
        scene = sample_temporal_scene(rng, synth, f"p{idx:06d}t")
        records = []
        for cam in scene.cameras:
            rays = camera_rays(cam)  # the same for each of the view's frames
            for f in sorted(rng.choice(len(scene.times), size=cfg.frames_per_view, replace=False)):
                t = scene.times[f]
                out = render(scene.entities(t), cam, synth.render, scene.shadows(t), rays)
                records.append(_image_record(cfg, scene, out, observe_view(out, scene, synth.observe), t, rng))
        return records
    rng = np.random.default_rng([cfg.seed, SPATIAL_TAG, idx])
    scene = sample_scene(rng, synth, f"p{idx:06d}")
    records = []
    for cam in scene.cameras:
        out = render(scene.entities(), cam, synth.render, scene.shadows())
        records.append(_image_record(cfg, scene, out, observe_view(out, scene, synth.observe), 0.0, rng))
    return records


def corpus_scenes(cfg: CorpusConfig):
    """(synth config, [(kind, scene)]) of every corpus scene, unrendered (for overlap checks)."""
    synth = load_config(SynthConfig, cfg.bench_config)
    out = [("spatial", sample_scene(np.random.default_rng([cfg.seed, SPATIAL_TAG, i]), synth, f"p{i:06d}"))
           for i in range(cfg.n_spatial)]
    out += [("temporal", sample_temporal_scene(np.random.default_rng([cfg.seed, TEMPORAL_TAG, i]), synth, f"p{i:06d}t"))
            for i in range(cfg.n_temporal)]
    return synth, out


def build_corpus(cfg: CorpusConfig, out_file: str | Path, progress: bool = True) -> dict:
    """Render the corpus and save it as one torch file (uint8 images + label tensors).

    Written to a temporary name and renamed, so an interrupted build leaves nothing behind.
    Returns the saved dict (see ``_pack``).
    """
    synth = load_config(SynthConfig, cfg.bench_config)
    jobs = [(cfg, synth, i, True) for i in range(cfg.n_temporal)] + [(cfg, synth, i, False) for i in range(cfg.n_spatial)]
    workers = cfg.workers or os.cpu_count() or 1
    records = []
    with mp.get_context("fork").Pool(workers) as pool:
        for recs in tqdm(pool.imap(_scene_job, jobs, chunksize=4), total=len(jobs), disable=not progress,
                         desc="corpus scenes", unit="scene"):
            records.extend(recs)
    data = _pack(records)
    save_corpus(data, out_file)
    return data


def _pack(records: list[dict]) -> dict:
    """Stack per-image records: images (N, S, S, 3) uint8, dense_* (N, g, g), count (N,),
    persons (M, 4 + fields) float boxes then classes, person_image (M,) and captions (list)."""
    rows, owner = [], []
    for i, r in enumerate(records):
        for f in r["persons"]:
            rows.append(list(f["box"]) + [f[k] for k in PERSON_FIELDS] + [f["marked"]])
            owner.append(i)
    data = {"images": torch.from_numpy(np.stack([r["image"] for r in records])),
            "count": torch.tensor([r["count"] for r in records], dtype=torch.long),
            "persons": torch.tensor(rows, dtype=torch.float32).reshape(-1, 4 + len(PERSON_FIELDS) + 1),
            "person_image": torch.tensor(owner, dtype=torch.long),
            "captions": [r["caption"] for r in records]}
    for k in DENSE_FIELDS:
        data[f"dense_{k}"] = torch.from_numpy(np.stack([r["dense"][k] for r in records]).astype(np.int64))
    data["dense_depth"] = torch.from_numpy(np.stack([r["dense"]["depth"] for r in records]).astype(np.float32))
    if records and "semantic" in records[0]:
        data["semantic"] = torch.from_numpy(np.stack([r["semantic"] for r in records]))
    return data
