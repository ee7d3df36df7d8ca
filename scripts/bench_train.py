"""Training-pipeline figures: the feature cache against re-encoding, the full protocol against
+0 alone, and images encoded once against the naive count.

    python -m scripts.bench_train [--config configs/default.yaml] [--out bench_train.json] [key=value ...]

Uses the config's benchmark (generated if missing) and feature cache. The per-epoch
figures are measured on ``--batches`` training batches and scaled to a whole epoch.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument("--out", default="bench_train.json")
    parser.add_argument("--batches", type=int, default=6, help="training batches timed per variant")
    parser.add_argument("--eval-samples", type=int, default=120, help="test samples for the protocol timing")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)

    from common.config import to_dict
    from bench.format import Benchmark, load_benchmark
    from eval.adapters.crossview import CrossViewAdapter
    from eval.runner import evaluate
    from inputs.features import load_image_tensor
    from inputs.items import collate, split_images
    from training.config import load_train_config
    from training.data import BucketBatchSampler
    from training.datamodule import CrossViewDataModule
    from training.module import CrossViewModule
    from training.run import build_components, ensure_benchmark

    cfg = load_train_config(args.config, args.overrides)
    torch.manual_seed(cfg.seed)
    ensure_benchmark(cfg)
    cache, tokenizer = build_components(cfg)
    train_bench = load_benchmark(Path(cfg.data.bench_dir) / "train", check_images=False)
    n_image_refs = len(split_images(train_bench))
    started = time.time()
    dm = CrossViewDataModule(cfg, cache, tokenizer)
    dm.setup("fit")
    cache_seconds = time.time() - started
    dataset = dm.train_set
    module = CrossViewModule(to_dict(cfg))
    optimizer = torch.optim.AdamW(module.model.parameters(), lr=1e-4)
    backbone = cache.encoder
    bcfg = backbone.cfg
    batch_size = cfg.data.batch_size

    def step(batch):
        out = module.model(batch)
        loss = module.criterion(out, batch)["loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    row_to_path = {row: path for path, row in dataset.table.index.items()}
    # The first batches of the real (shuffled, frame-bucketed) epoch: a representative mix of
    # still images and clips, the same batches for both variants.
    all_batches = list(BucketBatchSampler(dataset, batch_size, cfg.seed))
    timed_batches = all_batches[:args.batches]
    n_batches_epoch = len(all_batches)

    def time_batches(reencode: bool) -> tuple[float, int]:
        seconds, images = 0.0, 0
        for indices in timed_batches:
            items = [dataset[i] for i in indices]
            t0 = time.time()
            batch = collate(items, dataset.table, tokenizer.pad_id)
            if reencode:  # what a pipeline without the cache does: decode + encode every frame
                paths = [row_to_path[int(r)] for item in items for r in item["rows"].flatten() if r >= 0]
                with torch.no_grad():
                    x = torch.stack([load_image_tensor(p, bcfg.image_size, bcfg.mean, bcfg.std) for p in paths])
                    backbone(x)
                images += len(paths)
            step(batch)
            seconds += time.time() - t0
        return seconds / len(timed_batches) * n_batches_epoch, images

    time_batches(False)  # warm-up: first-call allocations would bias whichever ran first
    cached_epoch, _ = time_batches(False)
    reencode_epoch, reencoded = time_batches(True)

    test = load_benchmark(Path(cfg.data.bench_dir) / cfg.eval.split, check_images=False)
    small = Benchmark(root=test.root, file=test.file, samples=test.samples[: args.eval_samples], name=test.name)
    adapter = CrossViewAdapter.from_loaded(module.eval().model, cache, tokenizer)
    timings = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, settings in (("plus0", ["+0"]), ("full", list(cfg.eval.settings))):
            t0 = time.time()
            summary = evaluate(small, adapter, Path(tmp) / name, settings=settings, progress=False, plots=False,
                               batch_size=cfg.data.eval_batch_size)
            timings[name] = (time.time() - t0, summary["n_queries"])
    epochs = cfg.trainer.max_epochs
    naive = 0
    for epoch in range(epochs):
        dataset.set_epoch(epoch)
        for i in range(len(dataset)):
            vs = dataset.draw(i)
            sample = dataset.bench.samples[i]
            naive += sum(len(sample.view(v).frames) for v in vs.view_ids)
    result = {
        "config": args.config,
        "train_samples": len(dataset),
        "batch_size": batch_size,
        "batches_timed": args.batches,
        "epoch_seconds_cached": round(cached_epoch, 2),
        "epoch_seconds_reencoding": round(reencode_epoch, 2),
        "reencode_over_cache_ratio": round(reencode_epoch / max(cached_epoch, 1e-9), 2),
        "cache_build_or_load_seconds": round(cache_seconds, 2),
        "protocol_samples": len(small.samples),
        "protocol_seconds_full": round(timings["full"][0], 2),
        "protocol_queries_full": timings["full"][1],
        "protocol_seconds_plus0": round(timings["plus0"][0], 2),
        "protocol_queries_plus0": timings["plus0"][1],
        "full_over_plus0_ratio": round(timings["full"][0] / max(timings["plus0"][0], 1e-9), 2),
        "unique_images_encoded": dataset.table.patch_tokens.shape[0],
        "image_references_in_train_split": n_image_refs,
        "naive_encodes_over_training": naive,
        "naive_over_cached_ratio": round(naive / max(1, dataset.table.patch_tokens.shape[0]), 1),
        "backbone": cache.identity,
        "torch_threads": torch.get_num_threads(),
    }
    text = json.dumps(result, indent=2)
    print(text)
    Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
