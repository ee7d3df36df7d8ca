"""Train the perception heads on the frozen tower, print their val figures, write predicted records.

    python -m scripts.fit_perception [--bench data/synth-default] [--config configs/default.yaml]
        [--out runs/perception] [--epochs 12] [--threads 1] [--box-weight 1.0] [--fine-layer 2]

The tower is the run config's backbone (its feature cache is shared with ``python train.py``).
Writes ``<out>/perception.safetensors`` (the heads), ``<out>/figures.json`` (val: person and
object recall and precision at IoU 0.5, per-field accuracy on matched entities) and
``<out>/records/<split>.jsonl.gz`` (one line per image: its path relative to the split and the
predicted entity records), which the entity reasoner reads in place of the ground truth.
"""
from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from inputs.features import FeatureCache
from inputs.backbone import build_backbone
from training.config import load_train_config
from training.perception_fit import PerceptionFitConfig, fit_perception, predict_records
from training.run import build_components


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
                             "-1: the patch grid alone")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = load_train_config(args.config)
    cache, _ = build_components(cfg)
    fine_cache = None
    if args.fine_layer >= 0:
        fine_cfg = dataclasses.replace(cfg.model.backbone, patch_layer=args.fine_layer)
        fine_cache = FeatureCache(cfg.data.cache_dir, build_backbone(fine_cfg))
    heads, figures, history = fit_perception(args.bench, cache, PerceptionFitConfig(epochs=args.epochs, box_weight=args.box_weight),
                                             fine_cache=fine_cache)
    out = Path(args.out)
    (out / "records").mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in heads.state_dict().items()}, str(out / "perception.safetensors"))
    (out / "figures.json").write_text(json.dumps({"val": figures, "history": history}, indent=1) + "\n")
    print(json.dumps(figures, indent=1))
    bench = Path(args.bench)
    for split in ("train", "val", "test"):
        recs = predict_records(heads, bench, split, cache, fine_cache=fine_cache)
        root = (bench / split).resolve()
        lines = [json.dumps({"image": str(Path(p).relative_to(root)), "entities": r}, separators=(",", ":"))
                 for p, r in sorted(recs.items())]
        (out / "records" / f"{split}.jsonl.gz").write_bytes(gzip.compress("".join(x + "\n" for x in lines).encode(),
                                                                         mtime=0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
