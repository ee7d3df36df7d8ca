"""Fit the perception and ship it: ``python -m pretrain.perception``.

    python -m pretrain.perception --corpus data/perception-corpus [--images 32000] [--epochs 3]
        [--bench data/synth-default] [--out checkpoints/perception/<name>] [--threads 2] [--resume]
        [--level-store data/perception-levels]
        [key=value ...]                                    # pretrain.perception_corpus_fit.CorpusFitConfig

With ``--corpus`` the feature-pyramid heads (``model.perception``, neck ``fpn``) are fitted on a
perception corpus (``python -m pretrain.perception_corpus``; ``pretrain.perception_corpus_fit``):
the frozen tower at the corpus images' native size, levels computed on the fly; ``--resume``
continues an interrupted fit from ``OUT/train_state.pt``. They are measured on the benchmark's val
split (never fitted on; ``--figure-splits train,val`` adds its train split).

Without ``--corpus``: the plain heads fitted on the benchmark's own train split over the tower's
cached levels (``pretrain.perception_fit``), how the shipped ``synthclip-cnn16-heads`` were made:

    python -m pretrain.perception --bench data/synth-default [--epochs 10] [--fine-layer 2] [--cache-dir data/cache]

The output folder is what ``checkpoints/perception/<name>/`` ships and what ``inputs.perception``
loads:

- ``perception.safetensors``: the heads' weights in fp16;
- ``perception.json``: the tower config, the finer level and the heads' config they were fitted on;
- ``figures.json``: recall, precision and attribute accuracy (and with a corpus: recall by visible
  fraction, the floor-point error of matched persons), and the fit's history;
- ``MODEL_CARD.md``: what they are, the command, the wall time, the figures and the sha256.

The weights and the card are written only once the fit has finished.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import torch

from common.atomic import atomic_target, atomic_write_text
from common.config import ConfigError, load_config, to_dict
from common.provenance import file_sha256
from model.config import BackboneConfig

DEFAULT_OUT = "checkpoints/perception/synthclip-cnn16-heads"  # without --corpus
CORPUS_OUT = "checkpoints/perception/synthclip-cnn16-fpn"  # with --corpus
SIZE_BUDGET = 25 * 2 ** 20  # tower and perception weights together


def write_card(out: Path, report: dict) -> None:
    """MODEL_CARD.md of a perception folder from its figures.json report."""
    val, train = report["val"], report["train"]
    fig = lambda d, k: f"{d.get(k, float('nan')):.1f}"  # noqa: E731
    rows = [("persons recall / precision", "person_recall", "person_precision"),
            ("objects recall / precision", "object_recall", "object_precision")]
    lines = [f"| {name} | {fig(train, r)} / {fig(train, p)} | {fig(val, r)} / {fig(val, p)} |" for name, r, p in rows]
    for f in ("shirt", "trousers", "hat", "posture", "airborne", "arm_l", "arm_r", "object_kind", "object_colour"):
        lines.append(f"| {f} accuracy | {fig(train, f + '_accuracy')} | {fig(val, f + '_accuracy')} |")
    cfg = report["config"]
    text = f"""# {out.name}: perception heads on the shipped tower

CenterNet-like heads (`model/perception.py`) on the frozen tower `{cfg['backbone']['pretrained']}`:
a centre heatmap and a box per kind (person, object) on its patch grid (level {cfg['backbone']['patch_layer']})
with its level {cfg['fine_layer']} beside it, and per entity the attributes the generator records
(`bench/entities.py`) from a RoIAlign of the neck. They turn each image into entity records, the
input of the entity reasoner (`python train.py` predicts every image's records once and caches them,
keyed by the sha256 below).

**What they are not:** a detector for real photographs; they have seen only `bench.synth` renders.

## How they were made
    python -m pretrain.perception --bench {cfg['bench']} --out {out.as_posix()} --epochs {cfg['epochs']}

- Data: the entity labels of `{cfg['bench']}/train` ({report['n_train_images']:,} images; the benchmark of
  `configs/bench/default.yaml`, seed 0). The reasoner later trains on the records these heads
  predict for those same images, so its train records are cleaner than those of val and test: the
  gap is the train and val columns below.
- Training: seed {cfg['seed']}, {cfg['epochs']} epochs of batch {cfg['batch_size']}, AdamW lr {cfg['lr']} (one-cycle),
  box L1 weight {cfg['box_weight']}; {report['fit_seconds']:,} s of fitting, {report['wall_seconds']:,} s for the whole
  command (encoding included), {report['threads']} threads, on a 2-core CPU machine.

## Figures (IoU 0.5; attributes on matched entities where the view shows them; %)

| figure | train images | val images |
|---|---|---|
{chr(10).join(lines)}

## Files
- `perception.safetensors`: fp16 weights, sha256 `{report['sha256']}`.
- `perception.json`: the tower, level and heads config they were fitted on.
- `figures.json`: the figures above and the fit's history.
"""
    atomic_write_text(out / "MODEL_CARD.md", text)


FIGURE_ROWS = [("persons recall / precision", "person_recall", "person_precision"),
               ("objects recall / precision", "object_recall", "object_precision")]
ATTRIBUTES = ("shirt", "trousers", "hat", "posture", "airborne", "arm_l", "arm_r", "object_kind", "object_colour")


def write_corpus_card(out: Path, report: dict) -> None:
    """MODEL_CARD.md of perception fitted on a corpus, from its figures.json report."""
    from bench.entities import FRAC_NAMES
    from pretrain.perception_corpus import SPATIAL_TAG, TEMPORAL_TAG
    splits = [s for s in ("train", "val") if s in report]
    fig = lambda d, k: f"{d.get(k, float('nan')):.1f}"  # noqa: E731
    head = "| figure | " + " | ".join(f"benchmark {s} images" for s in splits) + " |"
    rule = "|---|" + "---|" * len(splits)
    lines = [f"| {name} | " + " | ".join(f"{fig(report[s], r)} / {fig(report[s], p)}" for s in splits) + " |"
             for name, r, p in FIGURE_ROWS]
    lines += [f"| person recall, visible fraction {name} | " + " | ".join(
        f"{fig(report[s], 'person_recall_' + name)} (of {report[s]['n_persons_' + name]:,})" for s in splits) + " |"
        for name in FRAC_NAMES]
    lines += [f"| {f} accuracy | " + " | ".join(fig(report[s], f + "_accuracy") for s in splits) + " |"
              for f in ATTRIBUTES]
    lines.append("| median floor-point error of matched persons (m) | " + " | ".join(
        f"{report[s]['person_floor_error_m']:.3f}" for s in splits) + " |")
    fit, corpus, tower = report["fit"], report["corpus"], report["tower"]
    text = f"""# {out.name}: feature-pyramid perception on the shipped tower

A feature-pyramid neck (`model/perception.py`, neck `fpn`: a lateral 1x1 per level, top-down sum, a
3x3 smoothing) over the frozen tower `{tower['pretrained']}` at {tower['image_size']} px, its levels
{fit['levels']} (strides 4, 8, 16); a centre heatmap and a box per kind (person, object) on the
stride-4 output, and per entity the attributes the generator records (`bench/entities.py`) from a
{fit['roi']}x{fit['roi']} RoIAlign of that level. They turn each image into entity records, the input
of the entity reasoner (`python train.py` predicts every image's records once and caches them, keyed
by the sha256 below).

**What they are not:** a detector for real photographs; they have seen only `bench.synth` renders.

## How they were made
    {report['command']}

- Data: the first {fit['images']:,} images of the perception corpus `{corpus['folder']}`
  (`python -m pretrain.perception_corpus`): scenes of `{corpus['config']['bench_config']}`'s distribution
  drawn from the seed streams [{corpus['config']['seed']}, {SPATIAL_TAG}, i] (spatial) and
  [{corpus['config']['seed']}, {TEMPORAL_TAG}, i] (temporal), which no benchmark uses; labels: the
  generator's entity records. No benchmark image was fitted on, so the records of the benchmark's
  train split are predicted as those of val and test are (`--figure-splits train,val` shows both).
- Training: seed {fit['seed']}, {fit['epochs']} epochs of batch {fit['batch_size']}, AdamW lr {fit['lr']}
  (warm-up {fit['warmup_steps']} steps, cosine), width {fit['width']}, box L1 weight {fit['box_weight']};
  {report['fit_seconds']:,} s of fitting steps (summed over resumed runs), {report['figures_seconds']:,} s to
  export and measure, {report['threads']} thread(s) on a 2-core CPU machine.

## Figures on the benchmark `{report['bench']}` (IoU 0.5; attributes on matched entities where the view shows them; %)

{head}
{rule}
{chr(10).join(lines)}

## Files
- `perception.safetensors`: fp16 weights, sha256 `{report['sha256']}`; with the tower's weights
  {report['shipped_mb']:.1f} MB.
- `perception.json`: the tower, levels and heads config they were fitted on.
- `figures.json`: the figures above and the fit's history (`log.csv` of the fit holds every logged step).
"""
    atomic_write_text(out / "MODEL_CARD.md", text)


def ship_from_corpus(cfg, backbone: BackboneConfig, bench: Path, out: Path, resume: bool = False,
                     figure_splits: tuple[str, ...] = ("val",), threads: int = 2, command: str = "",
                     progress: bool = True, stop_after: int | None = None, level_store: str | Path | None = None) -> dict:
    """Fit fpn heads on ``cfg.corpus`` (``CorpusFitConfig``) with the tower ``backbone`` (its input
    size replaced by ``cfg.image_size``, or the corpus images' own side), write the perception folder
    ``out`` and return its report (``figures.json``); ``{"stopped": True, ...}`` when ``stop_after``
    ended the fit first (nothing but the fit's state written)."""
    import dataclasses

    from safetensors.torch import save_file

    from inputs.backbone import locate_pretrained
    from inputs.entity_batch import load_entity_labels
    from inputs.features import image_hw
    from inputs.perception import SETTINGS, WEIGHTS, load_perception, predict_records, settings_of, tower_pyramid
    from pretrain.perception_corpus import SETTINGS as CORPUS_SETTINGS, corpus_items
    from pretrain.perception_corpus_fit import LOG, fit_on_corpus
    from bench.format import load_benchmark
    from inputs.perception import benchmark_images
    from pretrain.perception_fit import image_cameras, perception_figures

    started = time.time()
    torch.set_num_threads(threads)
    first = corpus_items(cfg.corpus, 1)[0][0]
    size = cfg.image_size or image_hw(first)[0]
    source = tower_pyramid(dataclasses.replace(backbone, image_size=size), cfg.levels)
    heads, fit = fit_on_corpus(cfg, source, out, resume=resume, progress=progress, stop_after=stop_after,
                               level_store=level_store)
    if fit["stopped"]:
        return fit
    exported = time.time()
    with atomic_target(out / WEIGHTS) as tmp:
        save_file({k: v.detach().half().contiguous() for k, v in heads.state_dict().items()}, str(tmp))
    atomic_write_text(out / SETTINGS, json.dumps(settings_of(source, heads.cfg), indent=1) + "\n")
    heads = load_perception(out, source)  # the figures are those of the shipped fp16 weights
    report = {"command": command, "bench": bench.as_posix(), "fit": to_dict(cfg), "tower": to_dict(source.tower.cfg),
              "corpus": {"folder": Path(cfg.corpus).as_posix(),
                         **json.loads((Path(cfg.corpus) / CORPUS_SETTINGS).read_text())}}
    for split in figure_splits:
        loaded = load_benchmark(bench / split, check_images=False)
        images = benchmark_images(loaded)
        labels = load_entity_labels(bench, split, allow_eval_splits=True)  # read for measurement only
        preds = predict_records(heads, [p for p, _, _ in images], source)
        report[split] = perception_figures(preds, {p: labels[scene][stem] for p, scene, stem in images},
                                           image_cameras(loaded))
        report[f"n_{split}_images"] = len(images)
    folder = locate_pretrained(source.tower.cfg.pretrained)
    tower_bytes = sum(f.stat().st_size for f in folder.glob("*.safetensors")) if isinstance(folder, Path) else 0
    with open(out / LOG) as fh:
        report["history"] = list(csv.DictReader(fh))
    report.update(fit_seconds=fit["seconds"], steps=fit["steps"], threads=threads,
                  figures_seconds=round(time.time() - exported, 1), wall_seconds=round(time.time() - started, 1),
                  sha256=file_sha256(out / WEIGHTS),
                  shipped_mb=(tower_bytes + (out / WEIGHTS).stat().st_size) / 2 ** 20)
    if report["shipped_mb"] * 2 ** 20 > SIZE_BUDGET:
        print(f"warning: tower and perception weigh {report['shipped_mb']:.1f} MB, over the 25 MB budget",
              file=sys.stderr)
    atomic_write_text(out / "figures.json", json.dumps(report, indent=1) + "\n")
    write_corpus_card(out, report)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", help="fit the fpn heads on this perception corpus (python -m pretrain.perception_corpus)")
    parser.add_argument("--bench", default="data/synth-default",
                        help="the benchmark: figures on its val split (without --corpus: fitted on its train split)")
    parser.add_argument("--out", help=f"the perception folder (default: {CORPUS_OUT} with --corpus, else {DEFAULT_OUT})")
    parser.add_argument("--images", type=int, help="with --corpus: its first images fitted on (default 32000)")
    parser.add_argument("--epochs", type=int, help="default: 3 with --corpus, else 10")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--resume", action="store_true", help="with --corpus: continue the fit saved in --out")
    parser.add_argument("--level-store", help="with --corpus: keep the tower's levels of each image in fp16 in this "
                        "folder (0.7 MB an image at 224 px) and read them back in later epochs, instead of running "
                        "the tower on every batch")
    parser.add_argument("--figure-splits", default="val", help="with --corpus: benchmark splits measured (train,val)")
    parser.add_argument("--cache-dir", default="data/cache", help="without --corpus: the tower's feature caches")
    parser.add_argument("--fine-layer", type=int, default=2,
                        help="without --corpus: finer tower level read beside the grid (-1: none)")
    parser.add_argument("overrides", nargs="*", help="with --corpus: key=value on CorpusFitConfig")
    args = parser.parse_args(argv)
    bench = Path(args.bench)
    if args.corpus is not None:
        from pretrain.perception_corpus_fit import CorpusFitConfig
        given = [f"corpus={args.corpus}"] + [f"{k}={v}" for k, v in (("images", args.images), ("epochs", args.epochs))
                                             if v is not None]
        try:
            cfg = load_config(CorpusFitConfig, None, given + list(args.overrides))
            if not (bench / "labels" / "val.jsonl.gz").is_file():
                raise ValueError(f"{bench}/labels/val.jsonl.gz is missing: generate the benchmark first "
                                 f"(python -m bench generate --config configs/bench/default.yaml --out {bench})")
            report = ship_from_corpus(cfg, BackboneConfig(), bench, Path(args.out or CORPUS_OUT), args.resume,
                                      tuple(args.figure_splits.split(",")), args.threads,
                                      "python -m pretrain.perception " + " ".join(sys.argv[1:] if argv is None else argv),
                                      level_store=args.level_store)
        except (ConfigError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(json.dumps({k: report[k] for k in args.figure_splits.split(",")}, indent=1))
        print(f"wrote {args.out or CORPUS_OUT} in {report['wall_seconds']} s")
        return 0
    if args.overrides or args.images is not None or args.resume:
        parser.error("key=value overrides, --images and --resume need --corpus")

    from safetensors.torch import save_file

    from inputs.entity_batch import load_entity_labels
    from inputs.perception import SETTINGS, WEIGHTS, level_caches, load_perception, predict_records, settings_of
    from pretrain.perception_fit import PerceptionFitConfig, fit_perception, perception_figures, split_images

    if not (bench / "labels" / "train.jsonl.gz").is_file():
        print(f"error: {bench}/labels/train.jsonl.gz is missing: generate the benchmark first "
              f"(python -m bench generate --config configs/bench/default.yaml --out {bench})", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    started = time.time()
    caches = level_caches(BackboneConfig(), args.cache_dir, args.fine_layer)
    fit_cfg = PerceptionFitConfig(epochs=10 if args.epochs is None else args.epochs)
    fit_started = time.time()
    heads, history = fit_perception(bench, caches, fit_cfg)
    fit_seconds = round(time.time() - fit_started, 1)
    out = Path(args.out or DEFAULT_OUT)
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().half().contiguous() for k, v in heads.state_dict().items()}, str(out / WEIGHTS))
    atomic_write_text(out / SETTINGS, json.dumps(settings_of(caches, heads.cfg), indent=1) + "\n")
    heads = load_perception(out, caches)  # the figures are those of the shipped fp16 weights
    figures = {}
    for split in ("train", "val"):  # val is read for measurement only
        images = split_images(bench, split)
        labels = load_entity_labels(bench, split, allow_eval_splits=True)
        preds = predict_records(heads, [p for p, _, _ in images], caches)
        figures[split] = perception_figures(preds, {p: labels[scene][stem] for p, scene, stem in images})
        figures[f"n_{split}_images"] = len(images)
    report = {"config": {"bench": bench.as_posix(), "epochs": fit_cfg.epochs, "batch_size": fit_cfg.batch_size,
                         "lr": fit_cfg.lr, "seed": fit_cfg.seed, "box_weight": fit_cfg.box_weight,
                         "fine_layer": caches.fine_layer, "backbone": {"pretrained": caches.backbone.pretrained,
                                                                       "patch_layer": caches.backbone.patch_layer}},
              **figures, "history": history,
              "fit_seconds": fit_seconds, "wall_seconds": round(time.time() - started, 1), "threads": args.threads,
              "sha256": file_sha256(out / WEIGHTS)}
    atomic_write_text(out / "figures.json", json.dumps(report, indent=1) + "\n")
    write_card(out, report)
    print(json.dumps({k: figures[k] for k in ("train", "val")}, indent=1))
    print(f"wrote {out} in {report['wall_seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
