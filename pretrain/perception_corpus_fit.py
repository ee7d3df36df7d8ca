"""Fit the feature-pyramid perception on a perception corpus (``pretrain.perception_corpus``).

    heads, report = fit_on_corpus(cfg, out_dir, resume=False)

The tower is frozen and runs under ``no_grad`` (``inputs.perception.TowerPyramid``) at the corpus
images' own size (224 px: the renders' native resolution); only the neck and the heads train. Its
levels are computed on the fly, or with a ``LevelStore`` (``--level-store``) kept in fp16 on disk
the first time an image is seen and read back in later epochs: on 1 thread, decoding an image and
the tower's pass cost 0.04 CPU s against 0.06 s for the width-64 heads' training step and 0.20 s at
width 128 (scripts/bench_perception.py), while the three levels take 0.7 MB an image (22 GB at
32k images). The store changes what is computed, not the result: a fit may be resumed with or
without it.

Resumable: the state (heads, optimiser, step) is saved to ``OUT/train_state.pt`` every
``ckpt_every`` steps and at the end; ``resume=True`` continues from it (a changed config is
refused). The epoch order is a function of seed and epoch and the learning rate of the step, so a
resumed fit sees the batches and rates an uninterrupted one would.
"""
from __future__ import annotations

import csv
import hashlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from tqdm.auto import tqdm

from bench.entities import FIELDS
from common.atomic import atomic_target
from common.config import to_dict
from inputs.entity_batch import CONTACT_WIDTH
from inputs.features import image_hw
from inputs.perception import TowerPyramid
from model.perception import PerceptionConfig, PerceptionHeads
from pretrain.perception_corpus import corpus_items
from pretrain.perception_fit import _batch_targets, perception_loss

STATE, LOG = "train_state.pt", "log.csv"


@dataclass
class CorpusFitConfig:
    """The fit of fpn heads on a corpus (the tower: ``model.config.BackboneConfig``'s, frozen)."""

    RANGES: ClassVar[dict] = {"images": ">= 1", "image_size": ">= 0", "width": ">= 1", "roi": ">= 1",
                              "epochs": ">= 1", "batch_size": ">= 1", "lr": "> 0", "ckpt_every": ">= 1"}

    corpus: str = "data/perception-corpus"  # the corpus folder (python -m pretrain.perception_corpus)
    images: int = 32000  # its first images fitted on (more images rather than more epochs)
    image_size: int = 0  # the tower's input side; 0: the corpus images' own (the renders' 224 px)
    levels: list[int] = field(default_factory=lambda: [1, 2, 3])  # the tower levels the pyramid reads
    #   (the CNN's stride-4, 8 and 16 stages)
    width: int = 128  # the neck's and heads' channels
    roi: int = 7  # RoIAlign output side on the finest level
    epochs: int = 3
    batch_size: int = 32
    lr: float = 2e-3  # AdamW peak; linear warm-up, then cosine to 0
    warmup_steps: int = 100
    weight_decay: float = 0.01
    box_weight: float = 1.0  # the box distances' L1 (in output cells) beside the centre focal loss
    seed: int = 0
    ckpt_every: int = 100  # steps between saved states
    log_every: int = 20  # steps between log.csv rows

    def heads(self, level_dims: list[int]) -> PerceptionConfig:
        return PerceptionConfig(neck="fpn", levels=list(self.levels), level_dims=list(level_dims), width=self.width,
                                roi=self.roi)


def same_settings(saved: dict, current: dict) -> bool:
    """Whether a saved fit's settings are ``current``'s; a fit config field added since the state was
    saved matches where it holds its default (what the saved fit ran with)."""
    defaults = to_dict(CorpusFitConfig())
    fit = {k: saved["fit"].get(k, defaults[k]) for k in current["fit"]}
    return fit == current["fit"] and set(saved["fit"]) <= set(current["fit"]) and saved["tower"] == current["tower"]


def lr_at(cfg: CorpusFitConfig, step: int, total: int) -> float:
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    return cfg.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps))))


def epoch_order(cfg: CorpusFitConfig, epoch: int, n: int) -> np.ndarray:
    return np.random.default_rng([cfg.seed, epoch]).permutation(n)


class LevelStore:
    """The tower's levels of images, in fp16 on disk under ``folder/<tower identity>/``, one
    safetensors file an image (named by a digest of its absolute path), written atomically the first
    time the image is seen; ``maps`` returns what ``TowerPyramid.maps`` would, to fp16 precision."""

    def __init__(self, folder: str | Path, source: TowerPyramid):
        self.source = source
        levels = "-".join(str(k) for k in source.levels)
        self.root = Path(folder) / f"{source.tower.identity}-levels{levels}"

    def file(self, path: str) -> Path:
        digest = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()
        return self.root / digest[:2] / f"{digest}.safetensors"

    def maps(self, paths: list[str]) -> list[torch.Tensor]:
        from safetensors.torch import load_file, save_file
        files = [self.file(p) for p in paths]
        missing = [i for i, f in enumerate(files) if not f.is_file()]
        fresh = dict(zip(missing, zip(*self.source.maps(self.source.images([paths[i] for i in missing]))))) \
            if missing else {}
        per_image = []
        for i, f in enumerate(files):
            if i in fresh:
                tensors = [m.half().contiguous() for m in fresh[i]]
                f.parent.mkdir(parents=True, exist_ok=True)
                with atomic_target(f) as tmp:
                    save_file({f"level{k}": t for k, t in enumerate(tensors)}, str(tmp))
            else:
                stored = load_file(str(f))
                tensors = [stored[f"level{k}"] for k in range(len(self.source.levels))]
            per_image.append(tensors)
        return [torch.stack([t[k] for t in per_image]).float().contiguous(memory_format=torch.channels_last)
                for k in range(len(self.source.levels))]


def train_step(heads: PerceptionHeads, source: TowerPyramid, opt: torch.optim.Optimizer, items: list,
               box_weight: float, store: LevelStore | None = None) -> dict[str, float]:
    """One optimiser step on ``items`` ((image path, records) of one size); returns the loss terms."""
    paths = [p for p, _ in items]
    maps = store.maps(paths) if store is not None else source.maps(source.images(paths))  # frozen: no graph
    out = heads(*maps)
    size = out["heat"].shape[-1]
    targets = _batch_targets([records for _, records in items], size, image_hw(paths[0]))
    terms = perception_loss(heads, out, targets, box_weight)
    opt.zero_grad(set_to_none=True)
    terms["loss"].backward()
    opt.step()
    return {k: float(v.detach()) for k, v in terms.items()}


def fit_on_corpus(cfg: CorpusFitConfig, source: TowerPyramid, out_dir: str | Path, resume: bool = False,
                  progress: bool = True, stop_after: int | None = None, level_store: str | Path | None = None
                  ) -> tuple[PerceptionHeads, dict]:
    """Train the fpn heads on the corpus's first ``cfg.images`` images; returns (heads, report) with
    report = {"steps", "seconds", "images", "stopped"}.

    Args:
        source: the frozen tower at the input size and levels to fit on (``cfg.levels``).
        resume: continue from ``out_dir/train_state.pt``; without it an existing state is refused.
        stop_after: end after that many steps in all, state saved (as an interruption would; tests).
        level_store: a folder where the tower's levels are kept in fp16 (``LevelStore``); None: the
            tower runs on every batch.
    Raises:
        ValueError: a state exists and ``resume`` is off, or it was written by another config.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    items = corpus_items(cfg.corpus, cfg.images)
    torch.manual_seed(cfg.seed)
    heads = PerceptionHeads(cfg.heads(source.level_dims()), FIELDS, CONTACT_WIDTH)
    decay = [p for p in heads.parameters() if p.ndim >= 2]
    rest = [p for p in heads.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay}, {"params": rest, "weight_decay": 0.0}],
                            lr=cfg.lr)
    per_epoch = math.ceil(len(items) / cfg.batch_size)
    total = cfg.epochs * per_epoch
    state_file, log_file = out_dir / STATE, out_dir / LOG
    step, spent = 0, 0.0
    settings = {"fit": to_dict(cfg), "tower": to_dict(source.tower.cfg)}
    if state_file.is_file():
        if not resume:
            raise ValueError(f"{state_file} exists: pass --resume to continue that fit, or use another --out")
        state = torch.load(state_file, weights_only=True, map_location="cpu")
        if not same_settings(state["settings"], settings):
            raise ValueError(f"{state_file} was written by another config or tower; resume with the same settings "
                             "or use another --out")
        heads.load_state_dict(state["heads"])
        opt.load_state_dict(state["opt"])
        step, spent = state["step"], state["seconds"]
        if progress:
            print(f"resuming from step {step}/{total}", flush=True)
    end = total if stop_after is None else min(total, stop_after)
    store = LevelStore(level_store, source) if level_store is not None else None
    heads.train()
    bar = tqdm(total=total, initial=step, disable=not progress, desc="perception fit", unit="step")
    window: dict[str, float] = {}
    t_window = time.time()
    while step < end:
        epoch, k = divmod(step, per_epoch)
        batch = [items[i] for i in epoch_order(cfg, epoch, len(items))[k * cfg.batch_size:(k + 1) * cfg.batch_size]]
        for group in opt.param_groups:
            group["lr"] = lr_at(cfg, step, total)
        terms = train_step(heads, source, opt, batch, cfg.box_weight, store)
        step += 1
        bar.update(1)
        for name, value in terms.items():
            window[name] = window.get(name, 0.0) + value
        if step % cfg.log_every == 0 or step == end:
            n_steps, elapsed = (step - 1) % cfg.log_every + 1, time.time() - t_window
            spent += elapsed
            row = {"step": step, "epoch": round(step / per_epoch, 3), "lr": f"{lr_at(cfg, step - 1, total):.3g}",
                   "img_per_s": round(n_steps * cfg.batch_size / max(elapsed, 1e-9), 2),
                   **{name: round(v / n_steps, 4) for name, v in window.items()}}
            new = not log_file.is_file()
            with open(log_file, "a", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=list(row))
                if new:
                    writer.writeheader()
                writer.writerow(row)
            bar.set_postfix(loss=row["loss"], img_s=row["img_per_s"])
            window, t_window = {}, time.time()
        if step % cfg.ckpt_every == 0 or step == end:
            with atomic_target(state_file) as tmp:
                torch.save({"heads": heads.state_dict(), "opt": opt.state_dict(), "step": step, "seconds": spent,
                            "settings": settings}, tmp)
    bar.close()
    heads.eval()
    return heads, {"steps": step, "total_steps": total, "seconds": round(spent, 1), "images": len(items),
                   "stopped": step < total}
