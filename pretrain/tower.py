"""Pretrain the in-domain CLIP tower on rendered views and export it for open_clip.

    python -m pretrain.tower --config configs/backbone/synthclip-s16.yaml \
        --out checkpoints/backbone/synthclip-s16 [key=value ...]

1. renders the corpus (``pretrain.corpus``) into ``corpus_file`` unless it exists;
2. trains an open_clip CLIP (architecture: the JSON ``model_config``, registered with
   open_clip) with an image-text loss in which identical captions are positives, plus the
   auxiliary dense, count and region heads of ``pretrain.heads`` on the patch grid;
3. exports ``open_clip_config.json`` + ``open_clip_model.safetensors`` (fp16, heads dropped)
   + ``MODEL_CARD.md`` into ``--out``, loadable with ``open_clip.create_model('local-dir:OUT')``.

With ``readout.enabled`` a semantic readout (``model.readout``) learns the corpus's semantic
grids beside the heads, from the same tokens, and is kept: ``OUT/readout/`` (what
``model.backbone.readout`` names). ``init_from`` starts the CLIP from an exported tower of the
same architecture (continued pretraining on a new corpus).

Seeded and resumable: the training state is saved every ``ckpt_every`` steps to
``OUT/train_state.pt`` and a rerun of the same command continues from it (the epoch order is
a function of seed and epoch, so a resumed run sees the batches an uninterrupted one would).
``OUT/log.csv`` holds the loss terms, ``OUT/loss.png`` their curves.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import open_clip
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from common.config import load_config, to_dict
from bench.entities import ARM_CLASSES, COLOUR_NAMES, FRAC_BINS, HAT_NAMES, IGNORE, OBJECT_KINDS, POSTURES
from bench.synth.body import PARTS
from bench.synth.captions import CaptionTokenizer, caption_vocabulary
from model.config import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
from bench.synth.semantic_grid import LAYOUT
from inputs.backbone import load_open_clip_folder
from model.backbone import tower_levels
from pretrain.heads import PretrainHeads
from model.readout import SemanticReadout
from pretrain.fit_readout import readout_loss, save_readout
from pretrain.corpus import DENSE_FIELDS, CorpusConfig, build_corpus
from pretrain.export import export, plot_losses

MAX_COUNT = 9
DENSE_CLASSES = {"part": len(PARTS) + 1, "shirt": len(COLOUR_NAMES) + 1, "trousers": len(COLOUR_NAMES) + 1,
                 "kind": 3, "object": len(OBJECT_KINDS) + 1, "centre": 1, "depth": 1}
REGION_CLASSES = {"shirt": len(COLOUR_NAMES), "trousers": len(COLOUR_NAMES), "hat": len(HAT_NAMES),
                  "posture": len(POSTURES), "arm_l": len(ARM_CLASSES), "arm_r": len(ARM_CLASSES),
                  "contact_kind": len(OBJECT_KINDS) + 1, "contact_colour": len(COLOUR_NAMES) + 1,
                  "frac": len(FRAC_BINS) + 1, "marked": 10}


@dataclass
class LossWeights:
    clip: float = 1.0  # image-text contrastive loss
    dense: float = 1.0  # each dense map's loss
    count: float = 1.0  # people-per-view counter
    region: float = 1.0  # each person attribute's loss
    semantic: float = 1.0  # the readout's loss (summed over its blocks)


@dataclass
class ReadoutHeadConfig:
    enabled: bool = False  # train a semantic readout beside the heads and export it (needs corpus.semantic)
    depth: int = 2  # its transformer blocks
    width: int = 128  # their width
    heads: int = 4


@dataclass
class PretrainConfig:
    model_config: str = "configs/backbone/synthclip_s16.json"  # open_clip architecture (JSON; name = file stem)
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    corpus_file: str = "data/pretrain/synthclip-s16/corpus.pt"  # rendered once, reused by reruns
    seed: int = 0  # init, epoch order
    epochs: int = 8
    batch_size: int = 64
    lr: float = 1.0e-3
    weight_decay: float = 0.05
    warmup_steps: int = 200
    threads: int = 0  # torch intra-op threads; 0 = one per CPU core
    device: str = "cpu"  # where the model trains ("cuda" on a GPU machine; the corpus stays in CPU memory)
    ckpt_every: int = 200  # steps between saved training states
    log_every: int = 25  # steps between log.csv rows
    loss: LossWeights = field(default_factory=LossWeights)
    readout: ReadoutHeadConfig = field(default_factory=ReadoutHeadConfig)
    init_from: Optional[str] = None  # an exported tower folder of the same architecture to start from
    grid_level: int = -1  # the tower level the heads read (model/backbone.tower_levels: a ViT's block, a
    #   timm CNN's stage); its stride must give corpus.grid cells; backbone.patch_layer reads the same


def read_model_config(path: str | Path) -> tuple[str, dict]:
    """(open_clip model name, its config dict), registered with open_clip's registry."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"model_config {path}: no such file")
    open_clip.add_model_config(path)
    return path.stem, json.loads(path.read_text())


def _clip_loss(img: torch.Tensor, txt: torch.Tensor, caption_ids: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Contrastive loss over a batch whose images may share captions.

    img: (B, E) and txt: (U, E) normalised, one row per UNIQUE caption; caption_ids: (B,)
    the caption row of each image. Image -> text is a plain softmax over the U captions;
    text -> image spreads the target evenly over every image with that caption.
    """
    logits = scale * img @ txt.T  # (B, U)
    i2t = F.cross_entropy(logits, caption_ids)
    target = F.one_hot(caption_ids, txt.shape[0]).T.float()  # (U, B)
    target = target / target.sum(1, keepdim=True)
    t2i = -(target * F.log_softmax(logits.T, dim=1)).sum(1).mean()
    return 0.5 * (i2t + t2i)


def compute_losses(out: dict, batch: dict) -> dict[str, torch.Tensor]:
    """Named loss terms (unweighted) of one batch; see DENSE_CLASSES / REGION_CLASSES."""
    terms = {}
    for name in DENSE_FIELDS:
        if name == "centre":
            target = (batch["dense_centre"] > 0).float()
            terms["dense_centre"] = F.binary_cross_entropy_with_logits(out["dense_centre"], target,
                                                                       pos_weight=target.new_tensor(4.0))
        else:
            logits = out[f"dense_{name}"]
            terms[f"dense_{name}"] = F.cross_entropy(logits.flatten(0, 2), batch[f"dense_{name}"].flatten())
    depth, pred = batch["dense_depth"], out["dense_depth"]
    ok = torch.isfinite(depth)
    terms["dense_depth"] = F.smooth_l1_loss(pred[ok], depth[ok]) if ok.any() else pred.sum() * 0
    terms["count"] = F.cross_entropy(out["count"], batch["count"].clamp(max=MAX_COUNT))
    for i, name in enumerate(REGION_CLASSES):
        target = batch["person_labels"][:, i]
        valid = target != IGNORE
        terms[f"region_{name}"] = (F.cross_entropy(out[f"region_{name}"][valid], target[valid])
                                   if valid.any() else out[f"region_{name}"].sum() * 0)
    return terms


class Batches:
    """Seeded epoch order over the in-memory corpus; batch ``k`` of epoch ``e`` is fixed."""

    def __init__(self, data: dict, batch_size: int, seed: int, tokenizer: CaptionTokenizer):
        self.data, self.batch_size, self.seed, self.tokenizer = data, batch_size, seed, tokenizer
        self.n = data["images"].shape[0]
        owner = data["person_image"]
        self.starts = torch.searchsorted(owner, torch.arange(self.n + 1))
        self.mean = torch.tensor(OPENAI_CLIP_MEAN).view(1, 3, 1, 1)
        self.std = torch.tensor(OPENAI_CLIP_STD).view(1, 3, 1, 1)

    def __len__(self) -> int:
        return self.n // self.batch_size

    def order(self, epoch: int) -> torch.Tensor:
        return torch.randperm(self.n, generator=torch.Generator().manual_seed(self.seed * 1000 + epoch))

    def get(self, epoch: int, k: int) -> dict:
        idx = self.order(epoch)[k * self.batch_size:(k + 1) * self.batch_size]
        d = self.data
        images = d["images"][idx].permute(0, 3, 1, 2).float() / 255.0
        rows, owners = [], []
        for j, i in enumerate(idx.tolist()):
            rows.append(d["persons"][self.starts[i]:self.starts[i + 1]])
            owners += [j] * int(self.starts[i + 1] - self.starts[i])
        persons = torch.cat(rows) if rows else torch.zeros(0, d["persons"].shape[1])
        captions = [d["captions"][i] for i in idx.tolist()]
        unique = sorted(set(captions))
        batch = {"images": (images - self.mean) / self.std,
                 "boxes": torch.cat([torch.tensor(owners, dtype=torch.float32)[:, None], persons[:, :4]], 1),
                 "person_labels": persons[:, 4:].long(),
                 "count": d["count"][idx],
                 "tokens": self.tokenizer(unique),
                 "caption_ids": torch.tensor([unique.index(c) for c in captions])}
        for name in DENSE_FIELDS + ("depth",):
            batch[f"dense_{name}"] = d[f"dense_{name}"][idx]
        if "semantic" in d:
            batch["semantic"] = d["semantic"][idx].long()
        return batch


def _render_size(cfg: PretrainConfig) -> int:
    from bench.synth.config import SynthConfig
    return load_config(SynthConfig, cfg.corpus.bench_config).render.width


def forward(model, heads: PretrainHeads, batch: dict, render_size: int, readout: SemanticReadout | None,
            level: int) -> dict:
    """The CLIP embeddings and every head's output for one batch, the heads on the tower's level
    ``level`` (an index into ``tower_levels``, >= 0; ``semantic``: the readout's per-block logits,
    when there is one)."""
    inter = model.visual.forward_intermediates(batch["images"], indices=[level], normalize_intermediates=True,
                                               output_fmt="NCHW")
    grid = inter["image_intermediates"][0]
    out = heads(grid, batch["boxes"], render_size)
    if readout is not None:
        out["semantic"] = readout.logits(grid.flatten(2).transpose(1, 2))
    out["image"] = F.normalize(inter["image_features"], dim=-1)
    out["text"] = model.encode_text(batch["tokens"], normalize=True)
    return out


def _lr(cfg: PretrainConfig, step: int, total: int) -> float:
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    return cfg.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps))))


def _save_atomic(obj, path: Path) -> None:
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def pretrain(cfg: PretrainConfig, out_dir: str | Path, progress: bool = True, stop_after: int | None = None) -> dict:
    """Train (or resume) and export; returns the figures written to the model card.

    ``stop_after``: end after that many steps in all, with the state saved and nothing
    exported (as an interruption would; tests use it to check resuming).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(cfg.threads or os.cpu_count() or 1)
    t_start = time.time()
    corpus_file = Path(cfg.corpus_file)
    if not corpus_file.is_file():
        t0 = time.time()
        build_corpus(cfg.corpus, corpus_file, progress=progress)
        print(f"corpus rendered in {time.time() - t0:.0f} s -> {corpus_file}", flush=True)
    data = torch.load(corpus_file, weights_only=True)
    name, model_cfg = read_model_config(cfg.model_config)
    tokenizer = CaptionTokenizer(caption_vocabulary(), model_cfg["text_cfg"]["context_length"])
    if model_cfg["text_cfg"]["vocab_size"] != tokenizer.vocab_size:
        raise ValueError(f"{cfg.model_config}: text_cfg.vocab_size {model_cfg['text_cfg']['vocab_size']} != "
                         f"caption vocabulary size {tokenizer.vocab_size}")
    torch.manual_seed(cfg.seed)
    model = open_clip.create_model(name, pretrained=None, load_weights=False)
    if cfg.init_from:
        model.load_state_dict(load_open_clip_folder(Path(cfg.init_from)).state_dict())
    levels = tower_levels(model.visual)
    level = cfg.grid_level % len(levels)
    width, stride = levels[level]
    side, grid = int(data["images"].shape[1]), int(data["dense_part"].shape[1])
    if side // stride != grid:
        raise ValueError(f"grid_level {cfg.grid_level}: stride {stride} gives a {side // stride}-cell grid at {side} px, "
                         f"the corpus {corpus_file} labels a {grid}-cell grid (levels (channels, stride): {levels})")
    heads = PretrainHeads(width, DENSE_CLASSES, REGION_CLASSES, MAX_COUNT)
    readout = None
    if cfg.readout.enabled:
        if "semantic" not in data:
            raise ValueError(f"{corpus_file}: no semantic grids; readout.enabled needs corpus.semantic=true")
        grid_cells = int(data["semantic"].shape[1])
        readout = SemanticReadout(width, LAYOUT, depth=cfg.readout.depth, heads=cfg.readout.heads,
                                  grid_cells=grid_cells, width=cfg.readout.width)
    device = torch.device(cfg.device)
    model.to(device)
    heads.to(device)
    if readout is not None:
        readout.to(device)
    extra = list(readout.parameters()) if readout is not None else []
    params = list(model.parameters()) + list(heads.parameters()) + extra
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr)
    batches = Batches(data, cfg.batch_size, cfg.seed, tokenizer)
    total = cfg.epochs * len(batches)
    state_file, log_file = out_dir / "train_state.pt", out_dir / "log.csv"
    step, spent = 0, 0.0
    if state_file.is_file():
        state = torch.load(state_file, weights_only=True, map_location="cpu")
        if state["config"] != to_dict(cfg):
            raise ValueError(f"{state_file} was written by another config; remove it or use another --out")
        model.load_state_dict(state["model"])
        heads.load_state_dict(state["heads"])
        if readout is not None:
            readout.load_state_dict(state["readout"])
        opt.load_state_dict(state["opt"])
        step, spent = state["step"], state["seconds"]
        print(f"resuming from step {step}/{total}", flush=True)
    render_size = _render_size(cfg)
    fields = None
    model.train()
    heads.train()
    if readout is not None:
        readout.train()
    bar = tqdm(total=total, initial=step, disable=not progress, desc="pretrain", unit="step")
    window, t_window = {}, time.time()
    end = total if stop_after is None else min(total, stop_after)
    while step < end:
        epoch, k = divmod(step, len(batches))
        batch = {n: v.to(device, non_blocking=True) if torch.is_tensor(v) else v for n, v in batches.get(epoch, k).items()}
        for group in opt.param_groups:
            group["lr"] = _lr(cfg, step, total)
        out = forward(model, heads, batch, render_size, readout, level)
        terms = compute_losses(out, batch)
        terms["clip"] = _clip_loss(out["image"], out["text"], batch["caption_ids"], model.logit_scale.exp())
        if readout is not None:
            terms["semantic"] = readout_loss(out["semantic"], batch["semantic"])
        w = cfg.loss
        weight = {"clip": w.clip, "count": w.count, "semantic": w.semantic}
        loss = sum((weight[n] if n in weight else w.dense if n.startswith("dense") else w.region) * v
                   for n, v in terms.items())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        step += 1
        bar.update(1)
        for n, v in terms.items():
            window[n] = window.get(n, 0.0) + float(v.detach())
        window["total"] = window.get("total", 0.0) + float(loss.detach())
        if step % cfg.log_every == 0 or step == end:
            n_steps = (step - 1) % cfg.log_every + 1
            elapsed = time.time() - t_window
            spent += elapsed
            row = {"step": step, "epoch": round(step / len(batches), 3), "lr": f"{_lr(cfg, step - 1, total):.3g}",
                   "img_per_s": round(n_steps * cfg.batch_size / max(elapsed, 1e-9), 1),
                   **{n: round(v / n_steps, 4) for n, v in window.items()}}
            new = not log_file.is_file()
            with open(log_file, "a", newline="") as fh:
                fields = fields or list(row)
                writer = csv.DictWriter(fh, fieldnames=fields)
                if new:
                    writer.writeheader()
                writer.writerow(row)
            bar.set_postfix(loss=row["total"], clip=row.get("clip"), img_s=row["img_per_s"])
            window, t_window = {}, time.time()
        if step % cfg.ckpt_every == 0 or step == end:
            _save_atomic({"model": model.state_dict(), "heads": heads.state_dict(), "opt": opt.state_dict(),
                          "step": step, "seconds": spent, "config": to_dict(cfg),
                          **({"readout": readout.state_dict()} if readout is not None else {})}, state_file)
    bar.close()
    if step < total:
        return {"steps": step, "stopped": True}
    plot_losses(log_file, out_dir / "loss.png")
    if readout is not None:
        readout.eval()
        save_readout(readout, out_dir / "readout", {"trained_with": f"python -m pretrain.tower ({out_dir.name})",
                                                    "steps": step})
    return export(model, name, model_cfg, tokenizer, cfg, out_dir, step, spent, data, log_file,
                  time.time() - t_start)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pretrain.tower", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="YAML PretrainConfig (configs/backbone/*.yaml)")
    ap.add_argument("--out", required=True, help="output folder (the exported open_clip model)")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("overrides", nargs="*", help="key=value overrides, e.g. epochs=2 corpus.n_spatial=100")
    args = ap.parse_args(argv)
    try:
        cfg = load_config(PretrainConfig, args.config, args.overrides)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    figures = pretrain(cfg, args.out, progress=not args.no_progress)
    print(json.dumps({k: v for k, v in figures.items() if k != "config"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
