"""The LightningModule: owns the loss, the metrics and the optimiser; calls a plain nn.Module."""
from __future__ import annotations

import math
from typing import Sequence

import lightning as L
import torch

from common.config import from_dict
from bench.format import Sample
from bench.protocol import accuracy_by_setting, unit_scores
from inputs.items import ViewSet
from inputs.track import UNSEEN
from model import build_model
from training.config import TrainConfig
from training.losses import CrossViewCriterion


def validation_accuracy(view_sets: Sequence[ViewSet], samples: Sequence[Sample], right: Sequence[int],
                        scored: Sequence[int], settings: Sequence[str]) -> dict[str, float]:
    """``val/acc_<setting>`` for each setting that was scored and ``val/acc``, their mean.

    Scored like the evaluator (bench.protocol.unit_scores, eval/metrics.py): a (sample, setting)
    scores the mean over its variants (the views ``-1`` drops in turn), and a setting's accuracy
    is the mean over its samples. ``right[i]`` / ``scored[i]``: whether view set i was answered
    right / scored at all (the sanity check scores only a few)."""
    lines = [(samples[vs.sample_index].id, vs.setting, vs.variant, bool(right[i]))
             for i, vs in enumerate(view_sets) if scored[i]]
    accs = accuracy_by_setting(unit_scores(lines))
    out = {f"val/acc_{s}": accs[s] for s in sorted(set(settings)) if s in accs}
    if out:
        out["val/acc"] = sum(out.values()) / len(out)
    return out


class CrossViewModule(L.LightningModule):
    """Trains ``model.CrossViewModel`` on view-set batches (inputs/items.py, training/data.py).

    Args:
        config: the resolved TrainConfig as a plain dict; saved in every checkpoint
            (``hyper_parameters["config"]``) so a checkpoint rebuilds its own model.
    """

    def __init__(self, config: dict):
        super().__init__()
        self.save_hyperparameters({"config": config})
        self.cfg = from_dict(TrainConfig, config)
        self.model = build_model(self.cfg.model)
        self.criterion = CrossViewCriterion(self.cfg.loss)
        # The track's own stage: with only loss.track weighted, steps and validation run the
        # model's track path (forward_track), and validation scores the track, not answers.
        self.track_only = self.criterion.track_only
        if self.track_only and self.model.track is None:  # load_train_config says so first
            raise ValueError("loss.track is the only weighted loss term, but model.fusion.track is off")
        for name, param in self.model.named_parameters():
            if any(name.startswith(prefix) for prefix in self.cfg.freeze):
                param.requires_grad_(False)
        self._val: dict[int, bool] = {}  # validation view-set index -> answered right (this rank's share)

    def forward(self, batch: dict) -> dict:
        return self.model.forward_track(batch) if self.track_only else self.model(batch)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        out = self(batch)
        losses = self.criterion(out, batch)
        size = len(batch["answer"])
        # sync_dist: epoch values averaged over ranks under DDP (a no-op in one process)
        for name, value in losses.items():
            self.log(f"train/{name}", value, batch_size=size, prog_bar=name == "loss", on_step=True, on_epoch=True,
                     sync_dist=True)
        valid = batch["answer_valid"]
        if not self.track_only and valid.any():
            acc = (out["option_logits"].argmax(-1) == batch["answer"])[valid].float().mean()
            self.log("train/acc", acc, batch_size=int(valid.sum()), prog_bar=True, on_step=True, on_epoch=True,
                     sync_dist=True)
        return losses["loss"]

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        out = self(batch)
        losses = self.criterion(out, batch)
        self.log("val/loss", losses["loss"], batch_size=len(batch["answer"]), sync_dist=True)
        if "track_logits" in out:  # the person track's per-frame state accuracy (inputs/track.py)
            keep = self.criterion.track_positions(batch)
            hits = out["track_logits"].argmax(-1) == batch["track_target"]
            if keep.any():
                self.log("val/track_acc", hits[keep].float().mean(), batch_size=int(keep.sum()), sync_dist=True)
            seen = keep & (batch["track_target"] != UNSEEN)  # frames that show the person: the
            if seen.any():                                  # majority class "unseen" left out
                self.log("val/track_seen_acc", hits[seen].float().mean(), batch_size=int(seen.sum()),
                         sync_dist=True)
        if "track_locate" in out and "track_box_flag" in batch:  # the locator: its most-attended
            keep, hit = self.criterion.locate_hits(out, batch)      # cell is the person's (or null
            if keep.any():                                           # where they show no pixel)
                self.log("val/track_locate_acc", hit[keep].float().mean(), batch_size=int(keep.sum()),
                         sync_dist=True)
        if "count_logits" in out and "count_target" in batch:  # the view counter (inputs/view_counts.py)
            keep = self.criterion.count_positions(batch)
            if keep.any():
                hits = out["count_logits"].argmax(-1) == batch["count_target"]
                self.log("val/count_acc", hits[keep].float().mean(), batch_size=int(keep.sum()), sync_dist=True)
        if "mark_fact_logits" in out and "mark_facts" in batch:  # the mark-fact head (inputs/mark_facts.py)
            hits, total = self.criterion.mark_fact_hits(out, batch)
            if total:
                self.log("val/mark_fact_acc", hits / total, batch_size=total, sync_dist=True)
        if self.track_only:
            return
        right = (out["option_logits"].argmax(-1) == batch["answer"]).tolist()
        for index, ok in zip(batch["index"].tolist(), right):
            self._val[index] = bool(ok)

    def on_validation_epoch_end(self) -> None:
        if self.track_only:
            return
        # Each rank scored its own share of the view sets: sum the per-view-set flags over ranks
        # (Lightning's strategy reduce; a no-op in one process), so every rank scores all view
        # sets, not a mean of per-rank accuracies.
        val_set = self.trainer.datamodule.val_set
        flags = torch.zeros(2, len(val_set), dtype=torch.long)  # rows: right, scored
        if self._val:
            index = torch.tensor(list(self._val), dtype=torch.long)
            flags[0, index] = torch.tensor([int(ok) for ok in self._val.values()], dtype=torch.long)
            flags[1, index] = 1
        right, scored = self.trainer.strategy.reduce(flags.to(self.device), reduce_op="sum").tolist()
        accs = validation_accuracy(val_set.view_sets, val_set.bench.samples, right, scored, self.cfg.eval.val_settings)
        for name, value in accs.items():  # equal on every rank already
            self.log(name, value, prog_bar=name == "val/acc", sync_dist=True)
        self._val.clear()

    def parameter_groups(self) -> list[dict]:
        """AdamW's groups: weight decay on matrices (not on embeddings, biases and norms), and
        with optim.lr_scale one group per (prefix, decay) with lr times the prefix's factor.
        Without lr_scale: exactly the two groups the model has always had."""
        opt_cfg = self.cfg.optim
        scales = list(opt_cfg.lr_scale.items())
        grouped: dict[tuple[float, bool], list] = {(1.0, False): [], (1.0, True): []}
        used = set()
        for name, param in self.model.named_parameters():
            if not param.requires_grad:
                continue
            scale = 1.0
            for prefix, factor in scales:
                if name.startswith(prefix):
                    scale = factor
                    used.add(prefix)
                    break
            grouped.setdefault((scale, param.ndim < 2 or "embed" in name), []).append(param)
        unused = [prefix for prefix, _ in scales if prefix not in used]
        if unused:
            raise ValueError(f"optim.lr_scale: no trainable parameter name starts with {unused} "
                             "(names are the model's, e.g. 'track.' or 'language_head.')")
        order = sorted(grouped, key=lambda key: (key[0] != 1.0, key[0], key[1]))
        return [{"params": grouped[key], "weight_decay": 0.0 if key[1] else opt_cfg.weight_decay,
                 "lr": opt_cfg.lr * key[0]} for key in order]

    def configure_optimizers(self):
        opt_cfg = self.cfg.optim
        groups = self.parameter_groups()
        params = [p for group in groups for p in group["params"]]
        # The fused kernel: one pass per parameter instead of a chain of foreach ops; on the
        # 2-core CPU it steps 6.3 M parameters in 9 ms instead of 37 (same update rule).
        fused = {"fused": True} if all(p.device.type in ("cpu", "cuda") for p in params) else {}
        optimizer = torch.optim.AdamW(groups, lr=opt_cfg.lr, betas=tuple(opt_cfg.betas), **fused)
        total = max(1, int(self.trainer.estimated_stepping_batches))
        warmup = max(1, int(opt_cfg.warmup_frac * total))
        floor = opt_cfg.min_lr_frac

        def schedule(step: int) -> float:
            if step < warmup:
                return (step + 1) / warmup
            progress = min(1.0, (step - warmup) / max(1, total - warmup))
            return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
