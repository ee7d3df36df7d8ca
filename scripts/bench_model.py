"""Parameter counts and CPU forward latency of the cross-view model (tiny and default configs).

    python -m scripts.bench_model [--out bench_model.json] [--batch 8] [--repeats 5]

The model runs on cached backbone features, so latency excludes the backbone; the backbone's
own parameter count (frozen) and its image throughput are reported separately.
"""
from __future__ import annotations

import argparse
import json
import os
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from inputs.backbone import build_backbone  # noqa: E402
from model import ModelConfig, build_model, tiny_model_config  # noqa: E402
from model.dummy_batch import random_batch  # noqa: E402


def count(params) -> int:
    return sum(p.numel() for p in params)


def time_call(fn, repeats: int) -> float:
    """Median wall time of fn() in seconds, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def bench_config(name: str, cfg: ModelConfig, batch_size: int, repeats: int, views: int,
                 frames: int, grid: int) -> dict:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        backbone = build_backbone(cfg.backbone)
    model = build_model(cfg).eval()
    batch = random_batch(cfg, views=[views] * batch_size, frames=[frames] * batch_size,
                         options=[5] * batch_size, marks=3, grid=grid, prompt_len=48,
                         option_len=4, image_size=224)
    with torch.no_grad():
        forward = time_call(lambda: model(batch), repeats)

    def train_step():
        out = model(batch)
        out["option_logits"].clamp_min(-100).sum().backward()

    model.train()
    train = time_call(train_step, repeats)
    size = cfg.backbone.image_size
    images = torch.randn(batch_size, 3, size, size)
    backbone_s = time_call(lambda: backbone(images), max(1, repeats // 2))
    return {
        "config": name,
        "batch": {"samples": batch_size, "views": views, "frames": frames, "patches": grid * grid,
                  "marks_per_frame": 3, "options": 5},
        "params_trainable": count(p for p in model.parameters() if p.requires_grad),
        "params_frozen": count(p for p in model.parameters() if not p.requires_grad),
        "backbone_params_frozen": count(backbone.parameters()),
        "backbone": backbone.identity,
        "forward_ms_per_sample": 1000 * forward / batch_size,
        "train_step_ms_per_sample": 1000 * train / batch_size,
        "backbone_images_per_s": batch_size / backbone_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench_model.json")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    default = ModelConfig()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grid = build_backbone(default.backbone).grid_size[0]  # the default tower's patch grid
    results = {
        "torch_threads": args.threads,
        "configs": [
            bench_config("tiny", tiny_model_config(), args.batch, args.repeats, views=4, frames=1,
                         grid=4),
            bench_config("default", default, args.batch, args.repeats, views=5, frames=1,
                         grid=grid),
            bench_config("default_temporal", default, args.batch, args.repeats, views=4,
                         frames=4, grid=grid),
        ],
    }
    text = json.dumps(results, indent=2)
    print(text)
    with open(args.out, "w") as fh:
        fh.write(text + "\n")


if __name__ == "__main__":
    main()
