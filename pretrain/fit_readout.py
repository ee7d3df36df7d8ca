"""Fit the tower's semantic readout (``model.readout``) and ship it beside the tower.

    python -m pretrain.fit_readout --config configs/backbone/synthclip-s16-readout.yaml \
        --out runs/readout-s16 [key=value ...]

1. renders a corpus of single views (``pretrain.corpus`` scenes: the benchmark's scene
   distribution on a seed stream no benchmark split uses, about half with Set-of-Mark boxes),
   each labelled with its semantic grid (``bench.synth.semantic_grid``): per view only, nothing
   across views, no question text; cached in ``corpus_file``;
2. encodes the views with the frozen tower (``model.backbone``, readout off) and fits the
   readout on the patch tokens (a few held-out scenes measure it);
3. writes ``readout_config.json`` + ``readout.safetensors`` (fp16) + ``readout_figures.json``
   into ``--out``. ``model.backbone.readout`` names that folder.

``--evaluate DIR`` scores an existing readout (for example the one ``pretrain.tower``
trains beside a tower, ``checkpoints/backbone/<name>/readout``) on this corpus instead, with
``backbone=`` naming its tower, and writes ``--out`` as a JSON file of per-block figures.

Seeded: the same config gives the same corpus and weights (for a given thread count).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from safetensors.torch import save_file
from tqdm.auto import tqdm

from common.config import load_config, to_dict
from common.provenance import file_sha256
from bench.synth.config import SynthConfig
from bench.synth.observe import observe_view
from bench.synth.renderer import camera_rays, render
from bench.synth.captions import person_facts
from bench.synth.scene import sample_scene
from bench.synth.scene_temporal import sample_temporal_scene
from bench.synth.semantic_grid import GRID, LAYOUT, block_targets, view_features
from model.readout import SemanticReadout
from pretrain.corpus import draw_random_marks, save_corpus

READOUT_TAGS = (102, 103)  # corpus seed-stream tags (spatial, temporal); the tower's corpus uses 100 / 101


@dataclass
class ReadoutCorpusConfig:
    bench_config: str = "configs/bench/default.yaml"  # scene distribution (a bench.synth config)
    seed: int = 0  # corpus seed; the stream tags keep it apart from every benchmark and the tower's corpus
    n_spatial: int = 3000  # spatial scenes (one image per camera)
    n_temporal: int = 300  # temporal scenes
    frames_per_view: int = 3  # temporal: frames drawn per camera
    mark_prob: float = 0.5  # share of images with Set-of-Mark boxes, drawn as the benchmark draws them
    held_out: float = 0.1  # share of scenes kept out of the fit to measure the readout
    workers: int = 0  # processes; 0 = one per CPU core


@dataclass
class ReadoutConfig:
    backbone: str = "checkpoints/backbone/synthclip-s16"  # the frozen tower the readout reads
    corpus: ReadoutCorpusConfig = field(default_factory=ReadoutCorpusConfig)
    corpus_file: str = "data/pretrain/readout/corpus.pt"  # rendered once, reused by reruns
    depth: int = 2  # transformer blocks of the readout
    width: int = 128  # their width
    heads: int = 4
    seed: int = 0
    epochs: int = 20
    batch_size: int = 128
    lr: float = 1.0e-3
    weight_decay: float = 0.05
    threads: int = 0  # torch intra-op threads; 0 = one per CPU core


# ----------------------------------------------------------------------------- the corpus

def _record(cfg: ReadoutCorpusConfig, scene, out, obs: dict, t: float, rng: np.random.Generator,
            image_size: int) -> tuple[np.ndarray, np.ndarray]:
    cells = view_features(scene, out, obs, t, GRID)
    image, _ = draw_random_marks(Image.fromarray(out.rgb), person_facts(scene, obs, t), rng, cfg.mark_prob)
    if image.size != (image_size, image_size):
        image = image.resize((image_size, image_size), Image.BICUBIC)  # as the feature cache resizes
    return np.asarray(image, dtype=np.uint8), block_targets(cells).astype(np.int8)


def _scene_job(args) -> list[tuple[np.ndarray, np.ndarray]]:
    cfg, synth, idx, temporal, image_size = args
    torch.set_num_threads(1)
    tag = READOUT_TAGS[1] if temporal else READOUT_TAGS[0]
    rng = np.random.default_rng([cfg.seed, tag, idx])
    if temporal:
        scene = sample_temporal_scene(rng, synth, f"r{idx:06d}t")
        records = []
        for cam in scene.cameras:
            rays = camera_rays(cam)
            for f in sorted(rng.choice(len(scene.times), size=cfg.frames_per_view, replace=False)):
                t = scene.times[f]
                out = render(scene.entities(t), cam, synth.render, scene.shadows(t), rays)
                records.append(_record(cfg, scene, out, observe_view(out, scene, synth.observe), t, rng, image_size))
        return records
    scene = sample_scene(rng, synth, f"r{idx:06d}")
    return [_record(cfg, scene, out, observe_view(out, scene, synth.observe), 0.0, rng, image_size)
            for out in (render(scene.entities(), cam, synth.render, scene.shadows()) for cam in scene.cameras)]


def build_corpus(cfg: ReadoutCorpusConfig, image_size: int, out_file: str | Path, progress: bool = True) -> dict:
    """Render the corpus: images (N, S, S, 3) uint8, targets (N, P, blocks) int8, scene (N,)
    (a scene number; temporal scenes after the spatial ones). Saved atomically."""
    synth = load_config(SynthConfig, cfg.bench_config)
    jobs = [(cfg, synth, i, False, image_size) for i in range(cfg.n_spatial)]
    jobs += [(cfg, synth, i, True, image_size) for i in range(cfg.n_temporal)]
    workers = cfg.workers or os.cpu_count() or 1
    images, targets, scene = [], [], []
    with mp.get_context("fork").Pool(workers) as pool:
        for j, recs in enumerate(tqdm(pool.imap(_scene_job, jobs, chunksize=4), total=len(jobs),
                                      disable=not progress, desc="readout corpus", unit="scene")):
            for image, target in recs:
                images.append(image)
                targets.append(target)
                scene.append(j)
    data = {"images": torch.from_numpy(np.stack(images)), "targets": torch.from_numpy(np.stack(targets)),
            "scene": torch.tensor(scene, dtype=torch.long)}
    save_corpus(data, out_file)
    return data


def normalise_images(images: torch.Tensor, mean, std) -> torch.Tensor:
    """uint8 (N, S, S, 3) -> float (N, 3, S, S) in [0, 1], then normalised as the feature cache does."""
    x = images.permute(0, 3, 1, 2).float() / 255.0
    return (x - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)


@torch.no_grad()
def encode(backbone, images: torch.Tensor, batch_size: int = 128, progress: bool = True) -> torch.Tensor:
    """(N, P, C) float16 patch tokens of uint8 (N, S, S, 3) images."""
    out = []
    for start in tqdm(range(0, len(images), batch_size), disable=not progress, desc="encoding corpus", unit="batch"):
        x = normalise_images(images[start:start + batch_size], backbone.cfg.mean, backbone.cfg.std)
        out.append(backbone(x)["patch_tokens"].to(torch.float16))
    return torch.cat(out)


# ----------------------------------------------------------------------------- the fit

def readout_loss(logits: list[torch.Tensor], targets: torch.Tensor) -> torch.Tensor:
    """Sum over blocks of the mean per-cell loss (BCE for flags, cross-entropy otherwise).

    targets: (B, P, blocks) long, as ``bench.synth.semantic_grid.block_targets`` gives them.
    """
    total = logits[0].new_zeros(())
    for b, logit in enumerate(logits):
        target = targets[..., b]
        if logit.shape[-1] == 1:
            total = total + F.binary_cross_entropy_with_logits(logit.squeeze(-1), target.float())
        else:
            total = total + F.cross_entropy(logit.flatten(0, 1), target.flatten())
    return total


def block_predictions(logits: list[torch.Tensor]) -> torch.Tensor:
    """(B, P, blocks) predicted class per cell and block (a flag: logit > 0)."""
    return torch.stack([(lg.squeeze(-1) > 0).long() if lg.shape[-1] == 1 else lg.argmax(-1) for lg in logits], -1)


def shown_cells(target: torch.Tensor, width: int) -> torch.Tensor:
    """Cells where a block is shown: a flag set, or a class block not "not shown"."""
    return target > 0 if width == 1 else target < width


@torch.no_grad()
def readout_figures(model: SemanticReadout, tokens: torch.Tensor, targets: torch.Tensor,
                    batch_size: int = 512) -> dict[str, dict[str, float]]:
    """Per block: ``acc`` over every cell, ``acc_shown`` over the cells the block is shown in
    (the person's posture on the person's cells); ``count``: per image, from the mean of the
    cells' count probabilities."""
    model.eval()
    preds, count_probs = [], []
    for start in range(0, len(tokens), batch_size):
        logits = model.logits(tokens[start:start + batch_size].float())
        preds.append(block_predictions(logits))
        count_probs.append(logits[-1].softmax(-1).mean(1))
    pred, targets = torch.cat(preds), targets.long()
    out = {}
    for b, (name, width) in enumerate(model.layout):
        hit = pred[..., b] == targets[..., b]
        shown = shown_cells(targets[..., b], width)
        out[name] = {"acc": 100 * hit.float().mean().item(),
                     "acc_shown": 100 * hit[shown].float().mean().item() if shown.any() else float("nan"),
                     "n_shown": int(shown.sum())}
    count = torch.cat(count_probs).argmax(-1)
    out["count_per_image"] = {"acc": 100 * (count == targets[:, 0, -1]).float().mean().item(),
                              "within_one": 100 * (count - targets[:, 0, -1]).abs().le(1).float().mean().item()}
    return out


def fit(cfg: ReadoutConfig, tokens: torch.Tensor, targets: torch.Tensor, progress: bool = True) -> tuple[SemanticReadout, list]:
    """Train a readout on (N, P, C) tokens and (N, P, blocks) targets; returns it and its loss curve."""
    torch.manual_seed(cfg.seed)
    model = SemanticReadout(tokens.shape[-1], LAYOUT, depth=cfg.depth, heads=cfg.heads, grid_cells=tokens.shape[1],
                            width=cfg.width)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    steps = cfg.epochs * max(1, len(tokens) // cfg.batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=steps, pct_start=0.1)
    gen = torch.Generator().manual_seed(cfg.seed)
    curve = []
    model.train()
    bar = tqdm(total=steps, disable=not progress, desc="fitting readout", unit="step")
    for epoch in range(cfg.epochs):
        order = torch.randperm(len(tokens), generator=gen)
        total, n = 0.0, 0
        for k in range(max(1, len(tokens) // cfg.batch_size)):
            idx = order[k * cfg.batch_size:(k + 1) * cfg.batch_size]
            loss = readout_loss(model.logits(tokens[idx].float()), targets[idx].long())
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total, n = total + loss.item(), n + 1
            bar.update(1)
        curve.append(total / n)
        bar.set_postfix(loss=f"{curve[-1]:.3f}")
    bar.close()
    model.eval()
    return model, curve


def save_readout(model: SemanticReadout, out_dir: str | Path, meta: dict) -> Path:
    """``readout_config.json`` (architecture, layout, ``meta``) + fp16 ``readout.safetensors``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    weights = out_dir / "readout.safetensors"
    tmp = weights.with_name(weights.name + f".tmp-{os.getpid()}")
    save_file({k: v.detach().to("cpu", torch.float16).contiguous() for k, v in model.state_dict().items()}, str(tmp))
    os.replace(tmp, weights)
    arch = {"dim": model.dim, "layout": model.layout, "depth": len(model.blocks), "width": model.pos.shape[-1],
            "heads": model.blocks[0].attn.num_heads if len(model.blocks) else 1, "grid_cells": model.pos.shape[1]}
    (out_dir / "readout_config.json").write_text(json.dumps({"model": arch, **meta,
                                                            "sha256": file_sha256(weights)}, indent=1) + "\n")
    return weights


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=None, help="a ReadoutConfig YAML (default: the dataclass defaults)")
    parser.add_argument("--out", required=True, help="folder for readout_config.json / readout.safetensors "
                        "(with --evaluate: the figures' JSON file)")
    parser.add_argument("--evaluate", metavar="DIR", help="score the readout in DIR on the corpus instead of fitting one")
    parser.add_argument("--max-images", type=int, default=0, help="with --evaluate: the corpus's first N images (0: all)")
    parser.add_argument("overrides", nargs="*", help="key=value overrides")
    args = parser.parse_args(argv)
    cfg = load_config(ReadoutConfig, args.config, args.overrides)
    torch.set_num_threads(cfg.threads or os.cpu_count() or 1)
    from inputs.backbone import build_backbone, folder_config, load_readout
    started = time.time()
    backbone = build_backbone(folder_config(cfg.backbone, readout=None))
    corpus_file = Path(cfg.corpus_file)
    if corpus_file.is_file():
        data = torch.load(corpus_file, weights_only=True)
        print(f"[readout] corpus {corpus_file}: {len(data['images'])} images (cached)", flush=True)
    else:
        data = build_corpus(cfg.corpus, backbone.cfg.image_size, corpus_file)
        print(f"[readout] rendered {len(data['images'])} images in {time.time() - started:.0f} s", flush=True)
    render_s = time.time() - started
    if args.evaluate:
        n = args.max_images or len(data["images"])
        readout = load_readout(args.evaluate, backbone.token_dim)
        figures = readout_figures(readout, encode(backbone, data["images"][:n]), data["targets"][:n])
        out = {"readout": args.evaluate, "backbone": cfg.backbone, "corpus_file": str(corpus_file), "images": n,
               "corpus": to_dict(cfg.corpus), "figures": figures}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
        for name, fig in figures.items():
            print(f"[readout] {name:16s} " + "  ".join(f"{k} {v:.1f}" for k, v in fig.items()), flush=True)
        return 0
    tokens = encode(backbone, data["images"])
    encode_s = time.time() - started - render_s
    n_scenes = int(data["scene"].max()) + 1
    held = torch.randperm(n_scenes, generator=torch.Generator().manual_seed(cfg.seed))[:int(n_scenes * cfg.corpus.held_out)]
    is_held = torch.isin(data["scene"], held)
    model, curve = fit(cfg, tokens[~is_held], data["targets"][~is_held])
    fit_s = time.time() - started - render_s - encode_s
    figures = readout_figures(model, tokens[is_held], data["targets"][is_held])
    meta = {"backbone": cfg.backbone, "backbone_sha256": file_sha256(Path(cfg.backbone) / "open_clip_model.safetensors"),
            "config": to_dict(cfg), "n_images": int((~is_held).sum()), "n_held_out": int(is_held.sum()),
            "seconds": {"corpus": round(render_s, 1), "encode": round(encode_s, 1), "fit": round(fit_s, 1)},
            "loss_per_epoch": [round(x, 4) for x in curve]}
    save_readout(model, args.out, meta)
    (Path(args.out) / "readout_figures.json").write_text(json.dumps({"held_out": figures, **meta}, indent=1) + "\n")
    for name, fig in figures.items():
        print(f"[readout] {name:16s} " + "  ".join(f"{k} {v:.1f}" for k, v in fig.items()), flush=True)
    print(f"[readout] wrote {args.out} ({time.time() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
