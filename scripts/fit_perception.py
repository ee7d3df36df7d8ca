"""Train the perception heads on the frozen tower, print their val figures, write predicted records.

    python -m scripts.fit_perception [--bench data/synth-default] [--config configs/default.yaml]
        [--out runs/perception] [--epochs 12] [--threads 1] [--box-weight 1.0] [--fine-layer 2]
    python -m scripts.fit_perception --heads runs/perception --bench data/ood/crowd --splits test \
        --out runs/perception-ood/crowd          # predict with trained heads, no fitting

The tower is the run config's backbone (its feature cache is shared with ``python train.py``).
Writes ``<out>/perception.safetensors`` (the heads), ``<out>/perception.json`` (the tower, level and
heads config they were fitted on), ``<out>/figures.json`` (val: person and
object recall and precision at IoU 0.5, per-field accuracy on matched entities) and
``<out>/records/<split>.jsonl.gz`` (one line per image: its path relative to the split and the
predicted entity records), which the entity reasoner reads in place of the ground truth.
With ``--heads DIR`` the heads of an earlier run (on the tower and levels its ``perception.json``
names) predict the records of ``--splits`` of any benchmark, an OOD split included;
where the benchmark has labels for a split, its figures are printed and written too (measurement
only: nothing is fitted).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from common.atomic import atomic_write_text
from inputs.entity_batch import load_entity_labels, write_predicted_records
from inputs.perception import (SETTINGS, WEIGHTS, level_caches, load_perception, predict_records, read_settings,
                               settings_of)
from training.config import load_train_config
from training.perception_fit import PerceptionFitConfig, fit_perception, perception_figures, split_images


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", default="data/synth-default")
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument("--out", default="runs/perception")
    parser.add_argument("--epochs", type=int, default=PerceptionFitConfig.epochs)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--box-weight", type=float, default=PerceptionFitConfig.box_weight)
    parser.add_argument("--fine-layer", type=int, default=2,
                        help="also read this finer level of the tower (its own feature cache; 2: stride 8); "
                             "-1: the patch grid alone; with --heads, the level they were fitted on")
    parser.add_argument("--heads", default=None, help="a folder with the perception.safetensors of an earlier run: "
                                                      "predict only, no fitting")
    parser.add_argument("--splits", default="train,val,test", help="the splits to write records of")
    args = parser.parse_args(argv)
    splits = [s for s in args.splits.split(",") if s]
    bench = Path(args.bench)
    missing = [s for s in splits if not (bench / s / "benchmark.json").is_file()]
    if missing:
        parser.error(f"--splits: {bench} has no split {', '.join(missing)}")
    if args.heads and not (Path(args.heads) / WEIGHTS).is_file():
        parser.error(f"--heads {args.heads}: no {WEIGHTS} there")
    if args.heads and Path(args.heads).resolve() == Path(args.out).resolve():
        parser.error("--out: give another folder than --heads (the fit's figures.json stays as it is)")
    torch.set_num_threads(args.threads)
    cfg = load_train_config(args.config)
    out = Path(args.out)
    if args.heads:  # the tower and levels the heads were fitted on
        backbone, fine_layer, heads_cfg = read_settings(args.heads)
        caches = level_caches(backbone, cfg.data.cache_dir, fine_layer)
        try:
            heads = load_perception(args.heads, caches, heads_cfg)
        except ValueError as err:
            parser.error(f"--heads {args.heads}: {err}")
        report = {}
    else:
        caches = level_caches(cfg.model.backbone, cfg.data.cache_dir, args.fine_layer)
        heads, figures, history = fit_perception(args.bench, caches,
                                                 PerceptionFitConfig(epochs=args.epochs, box_weight=args.box_weight))
        out.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in heads.state_dict().items()}, str(out / WEIGHTS))
        atomic_write_text(out / SETTINGS, json.dumps(settings_of(caches, heads.cfg), indent=1) + "\n")
        report = {"val": figures, "history": history}
        print(json.dumps(figures, indent=1))
    (out / "records").mkdir(parents=True, exist_ok=True)
    for split in splits:
        images = split_images(bench, split)
        recs = predict_records(heads, [p for p, _, _ in images], caches)
        if args.heads and (bench / "labels" / f"{split}.jsonl.gz").is_file():  # measurement only
            labels = load_entity_labels(bench, split, allow_eval_splits=True)
            report[split] = perception_figures(recs, {p: labels[scene][stem] for p, scene, stem in images})
            print(split, json.dumps(report[split], indent=1))
        root = (bench / split).resolve()
        write_predicted_records(out / "records" / f"{split}.jsonl.gz",
                                {str(Path(p).relative_to(root)): r for p, r in recs.items()})
    (out / "figures.json").write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
