"""Export of a pretrained in-domain CLIP tower (``pretrain.tower``): the loss plot,
the open_clip folder (config + fp16 weights) and its model card."""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import torch
from safetensors.torch import save_file

from common.config import to_dict
from common.provenance import file_sha256
from bench.synth.captions import CaptionTokenizer
from model.config import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD


def plot_losses(log_file: Path, out_png: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(log_file) as fh:
        rows = list(csv.DictReader(fh))
    steps = [int(r["step"]) for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for key in ["total", "clip", "count", "dense_part", "dense_shirt", "region_shirt", "region_posture"]:
        if rows and key in rows[0]:
            ax.plot(steps, [float(r[key]) for r in rows], label=key)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    tmp = out_png.with_name(".tmp-" + out_png.name)
    fig.savefig(tmp, dpi=90, format="png")
    plt.close(fig)
    os.replace(tmp, out_png)


def export(model, name: str, model_cfg: dict, tokenizer: CaptionTokenizer, cfg, out_dir: Path,
           steps: int, train_seconds: float, data: dict, log_file: Path, wall: float) -> dict:
    """Write the open_clip folder (config, fp16 weights) and the model card's figures (``cfg``: the
    ``PretrainConfig`` the tower was trained with)."""
    weights = {k: v.detach().to("cpu", torch.float16).contiguous() for k, v in model.state_dict().items()}
    tmp = out_dir / ".tmp-open_clip_model.safetensors"
    save_file(weights, str(tmp))
    os.replace(tmp, out_dir / "open_clip_model.safetensors")
    size = model_cfg["vision_cfg"]["image_size"]
    config = {"model_cfg": model_cfg,
              "preprocess_cfg": {"mean": list(OPENAI_CLIP_MEAN), "std": list(OPENAI_CLIP_STD), "size": size,
                                 "interpolation": "bicubic", "resize_mode": "squash"},
              "tokenizer": {"class": "bench.synth.captions.CaptionTokenizer",
                            "context_length": tokenizer.context_length, "vocab": tokenizer.vocab},
              "architecture_name": name}
    (out_dir / "open_clip_config.json").write_text(json.dumps(config, indent=1) + "\n")
    with open(log_file) as fh:
        last = list(csv.DictReader(fh))[-1]
    figures = {"name": out_dir.name, "steps": steps, "epochs": cfg.epochs, "images": int(data["images"].shape[0]),
               "persons": int(data["persons"].shape[0]), "train_seconds": round(train_seconds),
               "wall_seconds": round(wall),
               "img_per_s": round(steps * cfg.batch_size / max(train_seconds, 1e-9), 1),
               "params": sum(p.numel() for p in model.parameters()),
               "final_losses": {k: v for k, v in last.items() if k not in ("step", "epoch", "lr", "img_per_s")},
               "sha256": file_sha256(out_dir / "open_clip_model.safetensors"),
               "config": to_dict(cfg)}
    timm_name = model_cfg["vision_cfg"].get("timm_model_name")
    if timm_name:
        figures["image_tower"] = (f"a convolutional image tower (timm `{timm_name}`, trained from scratch; the "
                                  f"heads and the cross-view model read its level {cfg.grid_level}, "
                                  f"`model.backbone.patch_layer={cfg.grid_level}`)")
    (out_dir / "pretrain_figures.json").write_text(json.dumps(figures, indent=1) + "\n")
    write_model_card(out_dir, figures)
    return figures


def write_model_card(out_dir: Path, figures: dict) -> None:
    """MODEL_CARD.md: what the tower is, how it was made (data, seeds, steps, time, losses), its
    sha256 and what it is not. A "Probes" section may be appended by hand from
    scripts/probe_features.py; it is kept when the card is rewritten."""
    cfg, c = figures["config"], figures["config"]["corpus"]
    losses = figures["final_losses"]
    readout = out_dir / "readout" / "readout.safetensors"
    readout_files = (f"""- `readout/readout_config.json`, `readout/readout.safetensors`: the semantic readout trained beside
  the tower (`model/readout.py`; fp16, sha256 `{file_sha256(readout)}`). With `model.backbone.readout`
  naming that folder, its per-cell probabilities of the semantic grid are appended to each patch token.
""" if readout.is_file() else "")
    init = (f"""- Start: the weights of `{cfg['init_from']}` (continued pretraining; that folder's card says how it was
  made), then this corpus.
""" if cfg.get("init_from") else "")
    semantic = (" Beside them, a semantic readout learns each view's semantic grid (`bench/synth/semantic_grid.py`:\n"
                "  per cell the owning person's attributes, the owning object, the view's person count) from\n"
                "  the same tokens, with its own loss (weight "
                f"{cfg['loss'].get('semantic', 1.0)}); it is exported, the other heads are not."
                if cfg.get("readout", {}).get("enabled") else "")
    card = out_dir / "MODEL_CARD.md"
    kept = ""
    if card.is_file() and "\n## Probes" in card.read_text():
        kept = card.read_text()[card.read_text().index("\n## Probes"):]
    text = f"""# {figures['name']}: an in-domain CLIP tower for the synthetic cross-view benchmark

An open_clip CLIP ({figures['params'] / 1e6:.2f} M parameters) pretrained on this repository's own
renders: {figures.get('image_tower', 'a ViT image tower')} and a small text tower over a closed caption vocabulary. It is the
default frozen backbone of the cross-view model (`model.backbone.pretrained`).

**What it is not:** a model of real photographs. It has seen only views rendered by `bench.synth`
(capsule people, a checkerboard floor, boxes, balls, poles, chairs), so its features describe this
renderer's images and nothing else. Use real CLIP weights for real images.

## Files
- `open_clip_config.json`: the open_clip architecture (`model_cfg`, from
  `{cfg['model_config']}`), preprocessing (resize without crop to {figures['config']['corpus']['image_size']} px,
  CLIP mean/std) and the caption tokenizer's vocabulary.
- `open_clip_model.safetensors`: fp16 weights of the whole CLIP (image and text towers; the
  auxiliary heads are dropped). sha256 `{figures['sha256']}`.
{readout_files}- `log.csv`, `loss.png`: the loss terms during training; `pretrain_figures.json`: the figures below.

Load: `open_clip.create_model('local-dir:checkpoints/backbone/{figures['name']}')`, or through
`inputs.backbone.load_open_clip_folder` (which checks that every stored tensor arrived).

## How it was made
    python -m pretrain.tower --config configs/backbone/{figures['name']}.yaml --out checkpoints/backbone/{figures['name']}

{init}- Data: {figures['images']:,} images ({c['n_spatial']:,} spatial scenes, one image per camera; {c['n_temporal']}
  temporal scenes, {c['frames_per_view']} frames per camera) with {figures['persons']:,} visible people, rendered from the
  scene distribution of `{c['bench_config']}` with corpus seed {c['seed']} on the seed-stream tags 100 / 101
  (benchmark splits use 2 / 4: no benchmark scene is in the corpus). About {c['mark_prob']:.0%} carry
  Set-of-Mark boxes drawn as the benchmark draws them.
- Supervision, per view only (nothing links views, no question text): a canonical caption of the
  view (people left to right with colours, hat, posture, raised or hidden arms, touched object;
  the objects; a sentence per marked person), dense labels on the patch grid (body part, shirt and
  trouser colour, entity and object kind, person centres, log depth), the number of people shown,
  and per person its attributes from a RoIAlign of its box.
- Loss: CLIP image-text (identical captions are positives) + the auxiliary heads, equal weights.{semantic}
- Training: seed {cfg['seed']}, {figures['epochs']} epochs, {figures['steps']:,} steps of batch {cfg['batch_size']}, AdamW lr {cfg['lr']}
  (warm-up {cfg['warmup_steps']} steps, cosine), weight decay {cfg['weight_decay']}; {figures['train_seconds']:,} s of training at
  {figures['img_per_s']} images/s, {figures['wall_seconds']:,} s for the whole command (rendering included), on 2 CPU cores.
- Final losses (mean of the last logged steps): clip {losses.get('clip')}, count {losses.get('count')},
  dense part {losses.get('dense_part')}, dense shirt {losses.get('dense_shirt')}, region shirt {losses.get('region_shirt')},
  region posture {losses.get('region_posture')}, region arms {losses.get('region_arm_l')} / {losses.get('region_arm_r')}{
  f", semantic readout {losses['semantic']}" if 'semantic' in losses else ''}.
"""
    tmp = out_dir / ".tmp-MODEL_CARD.md"
    tmp.write_text(text + kept)
    tmp.replace(card)
