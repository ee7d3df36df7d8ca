"""Time per training epoch of the entity reasoner: batches bucketed by frame count against
batches that mix still images and 8-frame clips, on the real train split.

    python -m scripts.bench_train [--config configs/default.yaml] [--out runs/bench_train.json]
        [--batches 12] [--threads 2] [key=value ...]

Uses the config's benchmark and its cached entity records (run ``python train.py`` first, or
this script predicts them). For each batching it times ``--batches`` training steps (forward,
backward, optimiser) drawn as an epoch would draw them, reports ms per question and the share of
padded entity slots, and scales to a whole epoch. Prints and writes JSON.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch


def _steps(module, dataset, batches: list[list[int]], collate) -> tuple[float, int, float]:
    """(seconds, questions, share of empty entity slots) of training steps on ``batches``."""
    opt = torch.optim.AdamW(module.parameters(), lr=1e-4)
    seconds, questions, empty, slots = 0.0, 0, 0, 0
    for indices in batches:
        batch = collate([dataset[i] for i in indices])
        started = time.perf_counter()
        out = module(batch)
        loss = module.criterion(out, batch)["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
        seconds += time.perf_counter() - started
        questions += len(indices)
        mask = batch["entity_mask"]
        empty, slots = empty + int((~mask).sum()), slots + mask.numel()
    return seconds, questions, empty / max(slots, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument("--out", default="runs/bench_train.json")
    parser.add_argument("--batches", type=int, default=12, help="training batches timed per batching")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)

    from common.config import to_dict
    from training.config import load_train_config
    from training.data import BucketBatchSampler, collate
    from training.datamodule import EntityDataModule
    from training.module import EntityModule

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = load_train_config(args.config, args.overrides)
    data = EntityDataModule(cfg)
    data.prepare_data()
    data.setup()
    dataset = data.train_set
    module = EntityModule(to_dict(cfg), vocab=data.vocab.itos)
    module.train()
    bucketed = BucketBatchSampler(dataset, cfg.data.batch_size, cfg.seed)
    bucketed.set_epoch(0)
    order = list(range(len(dataset)))
    random.Random(0).shuffle(order)
    mixed = [order[i:i + cfg.data.batch_size] for i in range(0, len(order), cfg.data.batch_size)]
    per_epoch = len(mixed)
    result = {"config": args.config, "threads": args.threads, "torch": torch.__version__,
              "batch_size": cfg.data.batch_size, "batches_per_epoch": per_epoch, "timed_batches": args.batches}
    _steps(module, dataset, mixed[:2], collate)  # warm-up
    for name, batches in (("mixed", mixed), ("bucketed", list(bucketed))):
        # the same share of clip batches as a whole epoch: every k-th batch of it
        step = max(1, len(batches) // args.batches)
        seconds, questions, empty = _steps(module, dataset, batches[::step][:args.batches], collate)
        ms = 1000 * seconds / questions
        result[name] = {"ms_per_question": round(ms, 2), "empty_slot_share": round(empty, 3),
                        "seconds_per_epoch": round(ms * len(dataset) / 1000, 1)}
        print(f"{name:9s} {ms:7.2f} ms per question, {100 * empty:4.1f} % empty entity slots, "
              f"{ms * len(dataset) / 1000:6.1f} s per epoch", flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
