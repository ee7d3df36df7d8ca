"""Fit the perception heads on the frozen tower and ship them: ``python -m pretrain.perception``.

    python -m pretrain.perception [--bench data/synth-default] [--out checkpoints/perception/synthclip-cnn16-heads]
        [--epochs 10] [--threads 2] [--cache-dir data/cache]

The heads (``model.perception``) are fitted on the entity labels of the benchmark's train split
(``pretrain.perception_fit``) over the shipped tower's cached levels, and measured on train and
val images (val is never fitted on). The output folder is what ``checkpoints/perception/<name>/``
ships and what ``inputs.perception`` loads:

- ``perception.safetensors``: the heads' weights in fp16;
- ``perception.json``: the tower config, the finer level and the heads' config they were fitted on;
- ``figures.json``: recall, precision and attribute accuracy on train and val, and the fit's history;
- ``MODEL_CARD.md``: what they are, the command, the wall time, the figures and the sha256.

The tower is the default one (``model.config.BackboneConfig``); ``--fine-layer`` reads a finer
level beside its patch grid. Files are written only once the fit has finished.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from common.atomic import atomic_write_text
from common.provenance import file_sha256
from model.config import BackboneConfig

DEFAULT_OUT = "checkpoints/perception/synthclip-cnn16-heads"


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", default="data/synth-default", help="benchmark whose train labels are fitted")
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--cache-dir", default="data/cache", help="the tower's feature caches")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--fine-layer", type=int, default=2, help="finer tower level read beside the grid (-1: none)")
    args = parser.parse_args(argv)

    from safetensors.torch import save_file

    from inputs.entity_batch import load_entity_labels
    from inputs.perception import SETTINGS, WEIGHTS, level_caches, load_perception, predict_records, settings_of
    from pretrain.perception_fit import PerceptionFitConfig, fit_perception, perception_figures, split_images

    bench = Path(args.bench)
    if not (bench / "labels" / "train.jsonl.gz").is_file():
        print(f"error: {bench}/labels/train.jsonl.gz is missing: generate the benchmark first "
              f"(python -m bench generate --config configs/bench/default.yaml --out {bench})", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    started = time.time()
    caches = level_caches(BackboneConfig(), args.cache_dir, args.fine_layer)
    fit_cfg = PerceptionFitConfig(epochs=args.epochs)
    fit_started = time.time()
    heads, history = fit_perception(bench, caches, fit_cfg)
    fit_seconds = round(time.time() - fit_started, 1)
    out = Path(args.out)
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
