"""The perception corpus: rendered images and the generator's entity records, from seeds no benchmark uses.

    python -m pretrain.perception_corpus --out data/perception-corpus --images 32000 [--workers 2] [key=value ...]

Scenes follow ``bench_config`` (``configs/bench/default.yaml``: the distribution the benchmark's
images come from, never an OOD config) in the mix of the default benchmark's train images: each
shard holds ``spatial_per_shard`` spatial scenes (every camera's view; with probability
``mark_prob`` a view carries Set-of-Mark boxes, drawn as the benchmark draws them) and
``temporal_per_shard`` temporal scenes (``frames_per_view`` frames of each camera), about 30 %
spatial views and 70 % temporal frames by default, as in ``data/synth-default/train``.

Seeds: spatial scene ``i`` of the corpus draws ``rng([seed, 200, i])``, temporal scene ``i``
``rng([seed, 201, i])``. A benchmark's scenes draw ``rng([seed, 2, i])`` and ``rng([seed, 4, i])``
(``bench.synth.generate.SEED_TAGS``), the tower's corpus tags 100 / 101, the readout's 102 / 103. A
numpy stream is a function of its whole key and no two of these keys share their tag, so no corpus
scene is a benchmark scene, whatever either seed (tests/test_perception_corpus.py checks the keys
of every config in configs/bench/ and the scenes themselves).

Layout of the corpus folder::

    corpus.json                      the config it was rendered with (a rerun with another is refused)
    shard-00000/                     spatial scenes [k*S, (k+1)*S), temporal scenes [k*T, (k+1)*T)
        images/<scene>/<view>.png          a spatial view (marks drawn or not)
        images/<scene>/<view>_fNN.png      a temporal scene's frame NN
        labels.jsonl.gz              one line per scene: {"scene", "images": {stem: [record, ...]},
                                     "marked": [stems]}, the generator's ``labels/<split>.jsonl.gz``
                                     format (``bench.entities``)

A shard is rendered into a temporary folder and renamed once complete, so a shard folder is always
whole: a rerun (with a larger ``--images``, or after a crash) renders only the shards missing.
"""
from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import multiprocessing as mp
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from PIL import Image
from tqdm.auto import tqdm

from bench.synth.config import SynthConfig
from bench.synth.entity_labels import image_entities
from bench.synth.marks import draw_marks
from bench.synth.observe import observe_view
from bench.synth.renderer import camera_rays, render
from bench.synth.scene import sample_scene
from bench.synth.scene_temporal import sample_temporal_scene
from common.config import load_config, to_dict

SPATIAL_TAG, TEMPORAL_TAG = 200, 201  # seed-stream tags (benchmarks: 2 / 4; tower corpus: 100 / 101; readout: 102 / 103)
SETTINGS, LABELS = "corpus.json", "labels.jsonl.gz"
PNG_OPTS = {"format": "PNG", "compress_level": 6}  # as the generator writes its renders


@dataclass
class PerceptionCorpusConfig:
    """What each shard renders (sizes in scenes). The defaults give ~100 images a shard."""

    RANGES: ClassVar[dict] = {"spatial_per_shard": ">= 0", "temporal_per_shard": ">= 0", "frames_per_view": ">= 1",
              "mark_prob": "[0, 1]"}

    bench_config: str = "configs/bench/default.yaml"  # the scene distribution (a bench.synth config)
    synth_overrides: list[str] = field(default_factory=list)  # key=value on it (tests: small renders)
    seed: int = 0  # corpus seed; the stream tags keep it apart from every benchmark seed
    spatial_per_shard: int = 6  # spatial scenes a shard (4-6 views each)
    temporal_per_shard: int = 9  # temporal scenes a shard
    frames_per_view: int = 2  # temporal: frames drawn per camera (of the scene's 8): more scenes, fewer
    #   near-copies of one scene
    mark_prob: float = 0.5  # share of spatial views with marks (the default benchmark's train split: 53 %)

    def synth(self) -> SynthConfig:
        return load_config(SynthConfig, self.bench_config, list(self.synth_overrides))

    def images_per_shard(self, synth: SynthConfig) -> float:
        """The expected number of images a shard holds."""
        views = (synth.scene.min_cameras + synth.scene.max_cameras) / 2
        return self.spatial_per_shard * views + self.temporal_per_shard * synth.temporal.cameras * self.frames_per_view


def shard_name(k: int) -> str:
    return f"shard-{k:05d}"


def draw_corpus_marks(image: Image.Image, records: list[dict], rng: np.random.Generator,
                      mark_prob: float) -> tuple[Image.Image, bool]:
    """With probability ``mark_prob`` marks as the benchmark's questions draw them: one in ten a frame
    around the whole image, else boxes on one (most often) or four of the seen people, labels 1-9.
    Returns the image and whether it was marked."""
    persons = [e for e in records if e["kind"] == "person"]
    if not persons or rng.random() >= mark_prob:
        return image, False
    labels = rng.permutation(np.arange(1, 10))
    if rng.random() < 0.1:
        marks = [{"entity": 0, "label": str(labels[0]), "box": [0, 0, image.width, image.height]}]
    else:
        n = 4 if rng.random() < 0.16 and len(persons) >= 4 else 1
        chosen = rng.choice(len(persons), size=n, replace=False)
        marks = [{"entity": persons[i]["id"], "label": str(lab), "box": persons[i]["box"]}
                 for i, lab in zip(chosen, labels)]
    return draw_marks(image, marks), True


def _spatial_scene(cfg: PerceptionCorpusConfig, synth: SynthConfig, idx: int, folder: Path) -> dict:
    rng = np.random.default_rng([cfg.seed, SPATIAL_TAG, idx])
    scene = sample_scene(rng, synth, f"ps{idx:06d}")
    (folder / scene.sid).mkdir(parents=True)
    images, marked = {}, []
    for cam in scene.cameras:
        out = render(scene.entities(), cam, synth.render, scene.shadows())
        records = image_entities(scene, observe_view(out, scene, synth.observe), 0.0)
        image, has_marks = draw_corpus_marks(Image.fromarray(out.rgb), records, rng, cfg.mark_prob)
        image.save(folder / scene.sid / f"{cam.view_id}.png", **PNG_OPTS)
        images[cam.view_id] = records
        if has_marks:
            marked.append(cam.view_id)
    return {"scene": scene.sid, "images": images, "marked": marked}


def _temporal_scene(cfg: PerceptionCorpusConfig, synth: SynthConfig, idx: int, folder: Path) -> dict:
    rng = np.random.default_rng([cfg.seed, TEMPORAL_TAG, idx])
    scene = sample_temporal_scene(rng, synth, f"pt{idx:06d}")
    (folder / scene.sid).mkdir(parents=True)
    images = {}
    for cam in scene.cameras:
        rays = camera_rays(cam)  # the same for each of the view's frames
        for f in sorted(rng.choice(len(scene.times), size=min(cfg.frames_per_view, len(scene.times)), replace=False)):
            t = scene.times[f]
            out = render(scene.entities(t), cam, synth.render, scene.shadows(t), rays)
            stem = f"{cam.view_id}_f{f:02d}"
            Image.fromarray(out.rgb).save(folder / scene.sid / f"{stem}.png", **PNG_OPTS)
            images[stem] = image_entities(scene, observe_view(out, scene, synth.observe), t)
    return {"scene": scene.sid, "images": images, "marked": []}


def render_shard(cfg: PerceptionCorpusConfig, synth: SynthConfig, k: int, root: Path) -> int:
    """Render shard ``k`` into ``root/shard-k`` (through a temporary folder); returns its image count."""
    torch.set_num_threads(1)
    tmp = root / f".{shard_name(k)}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        lines = [_spatial_scene(cfg, synth, i, tmp / "images")
                 for i in range(k * cfg.spatial_per_shard, (k + 1) * cfg.spatial_per_shard)]
        lines += [_temporal_scene(cfg, synth, i, tmp / "images")
                  for i in range(k * cfg.temporal_per_shard, (k + 1) * cfg.temporal_per_shard)]
        data = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines).encode()
        (tmp / LABELS).write_bytes(gzip.compress(data, compresslevel=6, mtime=0))
        os.replace(tmp, root / shard_name(k))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return sum(len(line["images"]) for line in lines)


def _shard_job(args) -> tuple[int, int]:
    cfg, synth, k, root = args
    return k, render_shard(cfg, synth, k, Path(root))


def read_shard(folder: Path) -> list[dict]:
    """The label lines of a finished shard (``labels.jsonl.gz``)."""
    with gzip.open(folder / LABELS, "rt") as fh:
        return [json.loads(line) for line in fh]


def finished_shards(root: Path) -> list[int]:
    """Indices of the shards rendered in full, sorted."""
    return sorted(int(p.name.split("-")[1]) for p in root.glob("shard-*") if (p / LABELS).is_file())


def corpus_items(root: str | Path, n_images: int | None = None) -> list[tuple[str, list[dict]]]:
    """(absolute image path, entity records) of the corpus's first ``n_images`` images (None: all), in
    shard order. Raises ValueError when the corpus holds fewer, naming the command that renders more."""
    root = Path(root).resolve()
    done, items, k = set(finished_shards(root)), [], 0
    while k in done and (n_images is None or len(items) < n_images):  # the prefix of whole shards
        for line in read_shard(root / shard_name(k)):
            for stem, records in line["images"].items():
                items.append((str(root / shard_name(k) / "images" / line["scene"] / f"{stem}.png"), records))
        k += 1
    if n_images is not None and len(items) < n_images:
        raise ValueError(f"{root}: {len(items):,} images in its first shards, {n_images:,} asked; render more with "
                         f"python -m pretrain.perception_corpus --out {root} --images {n_images}")
    return items if n_images is None else items[:n_images]


def build_corpus(cfg: PerceptionCorpusConfig, root: str | Path, n_images: int, workers: int = 0,
                 progress: bool = True) -> dict:
    """Render shards 0, 1, ... into ``root`` until they hold at least ``n_images`` images, skipping
    the shards already there. Returns {"shards", "images", "rendered"} (shards rendered by this call).

    Raises:
        ValueError: ``root`` holds a corpus rendered with another config.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    settings = {"config": to_dict(cfg)}
    if (root / SETTINGS).is_file():
        if json.loads((root / SETTINGS).read_text()) != settings:
            raise ValueError(f"{root / SETTINGS}: the corpus there was rendered with another config; "
                             "use another --out or the same settings")
    else:
        (root / SETTINGS).write_text(json.dumps(settings, indent=1) + "\n")
    for stale in root.glob(".shard-*.tmp-*"):  # a killed run's unfinished shard
        shutil.rmtree(stale, ignore_errors=True)
    synth = cfg.synth()
    counts = {k: sum(len(line["images"]) for line in read_shard(root / shard_name(k))) for k in finished_shards(root)}
    rendered = 0
    workers = workers or os.cpu_count() or 1
    bar = tqdm(total=n_images, initial=min(n_images, sum(counts.values())), desc="perception corpus", unit="img",
               disable=not progress)
    while True:
        prefix = 0
        while prefix in counts:
            prefix += 1
        have = sum(counts[k] for k in range(prefix))
        if have >= n_images:
            break
        todo = list(itertools.islice((k for k in itertools.count(prefix) if k not in counts),
                                     max(1, math.ceil((n_images - have) / cfg.images_per_shard(synth)))))
        jobs = [(cfg, synth, k, str(root)) for k in todo]
        if workers > 1 and len(jobs) > 1:
            with mp.get_context("fork").Pool(min(workers, len(jobs))) as pool:
                results = pool.imap_unordered(_shard_job, jobs)
                for k, n in results:
                    counts[k], rendered = n, rendered + 1
                    bar.update(n)
        else:
            for job in jobs:
                k, n = _shard_job(job)
                counts[k], rendered = n, rendered + 1
                bar.update(n)
    bar.close()
    return {"shards": prefix, "images": have, "rendered": rendered}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the corpus folder (created; a rerun continues it)")
    parser.add_argument("--images", type=int, required=True, help="render shards until they hold this many images")
    parser.add_argument("--workers", type=int, default=0, help="processes (0: one per CPU core)")
    parser.add_argument("overrides", nargs="*", help="key=value on PerceptionCorpusConfig")
    args = parser.parse_args(argv)
    try:
        cfg = load_config(PerceptionCorpusConfig, None, args.overrides)
        summary = build_corpus(cfg, args.out, args.images, args.workers)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
