"""Can the semantic grid be read from these pixels at all? A small CNN trained on the readout
corpus, against the tower's readout on the same held-out scenes.

    python -m scripts.probe_readout_cnn [--corpus data/pretrain/readout/corpus.pt] [--epochs 3]
        [--readout checkpoints/backbone/<name>/readout --backbone checkpoints/backbone/<name>]
        [--out runs/probe_readout_cnn.json]

Why: a readout of the shipped towers predicts posture, arm state and touched object per person
cell no better than the majority class (docs/experiments.md). Either the labels are not visible
in a 160-px view, or the tower does not learn them. A plain convolutional network (four stride-2
convolutions to the same 10 x 10 grid, two more at that grid, one classifier per block, the
readout's loss), trained from scratch on the same corpus (``pretrain.fit_readout``'s, rendered
there), answers that: if it reads posture well above the majority class, the pixels carry it and
the tower is what fails. Scenes ``0 .. held_out_scenes-1`` are held out from its training; the
tower's readout, when given, is scored on the same images, per cell and per person (a person's
cells averaged, as a RoIAlign of its box averages tokens).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from torch import nn


from bench.synth.semantic_grid import LAYOUT  # noqa: E402
from model.config import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD  # noqa: E402
from pretrain.fit_readout import block_predictions, normalise_images, readout_loss, shown_cells  # noqa: E402

BLOCKS = ("person", "shirt", "posture", "arm_l", "arm_r", "contact_kind", "frac", "object_kind", "count")


class GridCNN(nn.Module):
    """(B, 3, 160, 160) -> per block (B, 100, n) logits, n as SemanticReadout.logits."""

    def __init__(self, width: int = 96):
        super().__init__()
        chans = [3, 32, 48, 64, width]
        layers = []
        for c_in, c_out in zip(chans, chans[1:]):
            layers += [nn.Conv2d(c_in, c_out, 3, stride=2, padding=1), nn.BatchNorm2d(c_out), nn.GELU()]
        for _ in range(2):
            layers += [nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width), nn.GELU()]
        self.body = nn.Sequential(*layers)
        self.classes = [w if w == 1 else w + 1 for _, w in LAYOUT]
        self.head = nn.Conv2d(width, sum(self.classes), 1)

    def forward(self, images: torch.Tensor) -> list[torch.Tensor]:
        x = self.head(self.body(images))  # (B, K, 10, 10)
        return list(x.flatten(2).transpose(1, 2).split(self.classes, dim=-1))


def block_accuracy(logits: list[torch.Tensor], targets: torch.Tensor) -> dict:
    """Per block: accuracy over the cells it is shown in, and that set's majority class; for a
    person's attributes also on the cells of people at least 80 % visible (``*_visible``)."""
    out = {}
    names = [n for n, _ in LAYOUT]
    whole = targets[..., names.index("frac")] == dict(LAYOUT)["frac"] - 1  # the top visibility bin
    preds = block_predictions(logits)
    for b, (name, width) in enumerate(LAYOUT):
        if name not in BLOCKS:
            continue
        t, pred = targets[..., b], preds[..., b]
        shown = torch.ones_like(t, dtype=torch.bool) if name == "person" else shown_cells(t, width)
        out[name] = _acc(pred, t, shown)
        if name in ("shirt", "posture", "arm_l", "arm_r", "contact_kind"):
            out[f"{name}_visible"] = _acc(pred, t, shown & whole)
    return out


PERSON_KEYS = ("shirt", "trousers", "hat", "posture", "arm_l", "arm_r", "contact_kind", "contact_colour", "frac")


def person_accuracy(logits: list[torch.Tensor], targets: torch.Tensor) -> dict:
    """Per PERSON rather than per cell: the cells of one image that share a person's whole
    attribute tuple stand for that person (two people of one view rarely share all nine); their
    logits are averaged, as a RoIAlign over the person's box averages tokens, and the argmax is
    compared with the person's label. Whole-body-visible people only (top visibility bin)."""
    names = [n for n, _ in LAYOUT]
    cols = [names.index(k) for k in PERSON_KEYS]
    person, frac = names.index("person"), names.index("frac")
    out: dict = {}
    for key in ("posture", "arm_l", "arm_r", "contact_kind", "shirt"):
        b, width = names.index(key), dict(LAYOUT)[key]
        hits, labels = [], []
        for i in range(targets.shape[0]):
            t = targets[i]
            keep = (t[:, person] == 1) & (t[:, frac] == dict(LAYOUT)["frac"] - 1) & (t[:, b] < width)
            if not keep.any():
                continue
            groups = torch.unique(t[keep][:, cols], dim=0, return_inverse=True)[1]
            cells = keep.nonzero().flatten()
            for g in groups.unique():
                members = cells[groups == g]
                pred = logits[b][i, members].mean(0)[:width].argmax()
                hits.append(int(pred == t[members[0], b]))
                labels.append(int(t[members[0], b]))
        if labels:
            out[key] = {"acc": round(100 * sum(hits) / len(hits), 1),
                        "majority": round(100 * max(labels.count(c) for c in set(labels)) / len(labels), 1),
                        "n": len(labels)}
    return out


def _acc(pred: torch.Tensor, target: torch.Tensor, cells: torch.Tensor) -> dict:
    n = max(1, int(cells.sum()))
    return {"acc": round(100 * (pred[cells] == target[cells]).float().mean().item(), 1),
            "majority": round(100 * torch.bincount(target[cells]).max().item() / n, 1) if cells.any() else 0.0,
            "n": int(cells.sum())}


def _normalise(images: torch.Tensor) -> torch.Tensor:
    return normalise_images(images, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD)


@torch.no_grad()
def _predict(fn, images: torch.Tensor, batch: int = 256) -> list[torch.Tensor]:
    parts = [fn(images[i:i + batch]) for i in range(0, len(images), batch)]
    return [torch.cat([p[b] for p in parts]) for b in range(len(parts[0]))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="data/pretrain/readout/corpus.pt")
    ap.add_argument("--held-out-scenes", type=int, default=600)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--readout", default=None, help="a readout folder to score on the same images")
    ap.add_argument("--backbone", default=None, help="the tower that readout reads")
    ap.add_argument("--out", default="runs/probe_readout_cnn.json")
    args = ap.parse_args(argv)
    data = torch.load(args.corpus, weights_only=True)
    held = data["scene"] < args.held_out_scenes
    x_tr, y_tr = data["images"][~held], data["targets"][~held].long()
    x_va, y_va = data["images"][held], data["targets"][held].long()
    torch.manual_seed(args.seed)
    model = GridCNN()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.05)
    steps = args.epochs * (len(x_tr) // args.batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=steps, pct_start=0.1)
    gen = torch.Generator().manual_seed(args.seed)
    started, curve = time.time(), []
    for epoch in range(args.epochs):
        model.train()
        order, total = torch.randperm(len(x_tr), generator=gen), 0.0
        for k in range(len(x_tr) // args.batch_size):
            idx = order[k * args.batch_size:(k + 1) * args.batch_size]
            loss = readout_loss(model(_normalise(x_tr[idx])), y_tr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item()
        curve.append(round(total / max(1, len(x_tr) // args.batch_size), 4))
        print(f"[cnn] epoch {epoch}: loss {curve[-1]} ({time.time() - started:.0f} s)", flush=True)
    model.eval()
    result = {"corpus": args.corpus, "train_images": len(x_tr), "held_out_images": len(x_va),
              "epochs": args.epochs, "loss_per_epoch": curve, "seconds": round(time.time() - started),
              "cnn": block_accuracy(cnn_logits := _predict(lambda x: model(_normalise(x)), x_va), y_va),
              "cnn_per_person": person_accuracy(cnn_logits, y_va)}
    if args.readout:
        from inputs.backbone import build_backbone, folder_config, load_readout
        tower = build_backbone(folder_config(args.backbone, readout=None))
        readout = load_readout(args.readout, tower.token_dim)
        ro_logits = _predict(lambda x: readout.logits(tower(_normalise(x))["patch_tokens"]), x_va)
        result["readout"] = block_accuracy(ro_logits, y_va)
        result["readout_per_person"] = person_accuracy(ro_logits, y_va)
        result["readout_of"] = {"readout": args.readout, "backbone": args.backbone}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for name in [k for k in result["cnn"]]:
        row = f"{name:14s} cnn {result['cnn'][name]['acc']:5.1f}"
        if "readout" in result:
            row += f"  readout {result['readout'][name]['acc']:5.1f}"
        print(row + f"  majority {result['cnn'][name]['majority']:5.1f}  (n {result['cnn'][name]['n']})")
    for key, fig in result["cnn_per_person"].items():
        row = f"per person {key:14s} cnn {fig['acc']:5.1f}"
        if "readout_per_person" in result:
            row += f"  readout {result['readout_per_person'][key]['acc']:5.1f}"
        print(row + f"  majority {fig['majority']:5.1f}  (n {fig['n']})")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
