"""What a perception folder gives the entity reasoner, measured on one split of a benchmark.

    python -m scripts.perception_figures [--perception checkpoints/perception/synthclip-cnn16-heads]
        [--bench data/synth-default] [--split val] [--cache-dir data/cache] [--out runs/perception_figures.json]

Recall and precision per kind at IoU 0.5 (and 0.3), person recall by visible fraction, each
attribute's accuracy on matched entities and the median floor-point error of matched persons in
metres (``pretrain.perception_fit.perception_figures``), against the generator's labels of the
split (read for measurement only). The records are those ``python train.py`` reads: predicted
once per benchmark and perception folder and cached under ``--cache-dir`` (a second call costs no
tower pass). Any neck (``plain`` or ``fpn``) works, so the shipped heads and a new fit are
measured by the same code. Prints and writes JSON.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def measure(perception: str | Path, bench_dir: str | Path, split: str, cache_dir: str | Path) -> dict:
    """The figures of ``perception`` on ``bench_dir/split`` (see the module docstring)."""
    from bench.format import load_benchmark
    from inputs.entity_batch import load_entity_labels
    from inputs.entity_records import locate_perception, perception_hash, predicted_records
    from inputs.perception import benchmark_images
    from pretrain.perception_fit import image_cameras, perception_figures

    bench_dir = Path(bench_dir)
    bench = load_benchmark(bench_dir / split, check_images=False)
    base = Path(bench.root).resolve()
    preds = {str(base / rel): recs for rel, recs in predicted_records(bench, perception, cache_dir).items()}
    labels = load_entity_labels(bench_dir, split, allow_eval_splits=True)
    truths = {path: labels[scene][stem] for path, scene, stem in benchmark_images(bench)}
    figures = perception_figures(preds, truths, image_cameras(bench))
    return {"perception": str(perception), "sha256": perception_hash(locate_perception(perception)),
            "bench": bench_dir.as_posix(), "split": split, "images": len(truths), **figures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--perception", default="checkpoints/perception/synthclip-cnn16-heads")
    parser.add_argument("--bench", default="data/synth-default")
    parser.add_argument("--split", default="val")
    parser.add_argument("--cache-dir", default="data/cache")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="runs/perception_figures.json")
    args = parser.parse_args(argv)
    import torch

    from common.atomic import atomic_write_json
    torch.set_num_threads(args.threads)
    started = time.time()
    try:
        out = measure(args.perception, args.bench, args.split, args.cache_dir)
    except (FileNotFoundError, ValueError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    out["seconds"] = round(time.time() - started, 1)
    for key, value in out.items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
