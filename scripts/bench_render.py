"""Speed of the synthetic benchmark: renderer images/s and generator questions/s.

    python -m scripts.bench_render [--scenes 12] [--gen-scenes 60] [--out data/bench_render.json] [key=value ...]

Overrides (e.g. render.width=64) apply to the default SynthConfig for both measurements.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from common.config import load_config
from bench.synth.config import SynthConfig
from bench.synth.generate import generate
from bench.synth.observe import observe_view
from bench.synth.renderer import render
from bench.synth.scene import sample_scene


def time_renderer(cfg: SynthConfig, n_scenes: int) -> dict:
    """Single-process render (and observation) throughput over ``n_scenes`` random scenes."""
    torch.set_num_threads(1)
    scenes = [sample_scene(np.random.default_rng([cfg.seed, 99, i]), cfg, f"b{i}") for i in range(n_scenes)]
    work = [(s, s.entities(), c) for s in scenes for c in s.cameras]
    render(work[0][1], work[0][2], cfg.render, work[0][0].shadows())  # warm-up
    t0 = time.perf_counter()
    outs = [render(ents, cam, cfg.render, s.shadows()) for s, ents, cam in work]
    t_render = time.perf_counter() - t0
    t0 = time.perf_counter()
    for (s, _, _), out in zip(work, outs):
        observe_view(out, s, cfg.observe)
    t_obs = time.perf_counter() - t0
    return {"images": len(work), "width": cfg.render.width, "height": cfg.render.height,
            "render_images_per_s_1proc": round(len(work) / t_render, 2),
            "render_plus_observe_images_per_s_1proc": round(len(work) / (t_render + t_obs), 2)}


def time_generator(cfg: SynthConfig, n_scenes: int) -> dict:
    """End-to-end generation (all cores, PNG writing included) on ``n_scenes`` scenes."""
    cfg.n_scenes = n_scenes
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        summary = generate(cfg, Path(tmp) / "bench", progress=False)
        dt = time.perf_counter() - t0
    return {"scenes": n_scenes, "questions": summary["n_questions"], "unique_images": summary["unique_images"],
            "seconds": round(dt, 2), "questions_per_s": round(summary["n_questions"] / dt, 2),
            "scenes_per_s": round(n_scenes / dt, 3), "workers": summary["workers"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenes", type=int, default=12, help="scenes for the renderer timing")
    ap.add_argument("--gen-scenes", type=int, default=60, help="scenes for the generator timing")
    ap.add_argument("--out", default="data/bench_render.json")
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args(argv)
    cfg = load_config(SynthConfig, None, args.overrides)
    report = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__},
              "renderer": time_renderer(cfg, args.scenes),
              "generator": time_generator(load_config(SynthConfig, None, args.overrides), args.gen_scenes)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
