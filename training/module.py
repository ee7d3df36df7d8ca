"""The LightningModule: owns the loss, the metrics and the optimiser; calls a plain nn.Module."""
from __future__ import annotations

import math
from collections import defaultdict

import lightning as L
import torch

from bench.config import from_dict, to_dict
from model import build_model
from training.config import TrainConfig
from training.losses import CrossViewCriterion


class CrossViewModule(L.LightningModule):
    """Trains ``model.CrossViewModel`` on view-set batches (training/data.py).

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
        for name, param in self.model.named_parameters():
            if any(name.startswith(prefix) for prefix in self.cfg.freeze):
                param.requires_grad_(False)
        self._val = defaultdict(lambda: [0, 0])  # setting -> [correct, total]

    def forward(self, batch: dict) -> dict:
        return self.model(batch)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        out = self.model(batch)
        losses = self.criterion(out, batch)
        size = len(batch["answer"])
        # sync_dist: epoch values averaged over ranks under DDP (a no-op in one process)
        for name, value in losses.items():
            self.log(f"train/{name}", value, batch_size=size, prog_bar=name == "loss", on_step=True, on_epoch=True,
                     sync_dist=True)
        valid = batch["answer_valid"]
        if valid.any():
            acc = (out["option_logits"].argmax(-1) == batch["answer"])[valid].float().mean()
            self.log("train/acc", acc, batch_size=int(valid.sum()), prog_bar=True, on_step=True, on_epoch=True,
                     sync_dist=True)
        return losses["loss"]

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        out = self.model(batch)
        losses = self.criterion(out, batch)
        self.log("val/loss", losses["loss"], batch_size=len(batch["answer"]), sync_dist=True)
        right = (out["option_logits"].argmax(-1) == batch["answer"]).tolist()
        for setting, ok in zip(batch["setting"], right):
            self._val[setting][0] += int(ok)
            self._val[setting][1] += 1

    def on_validation_epoch_end(self) -> None:
        # Each rank scored its own share of the view sets: sum the counts over ranks (Lightning's
        # strategy reduce; a no-op in one process) before dividing, so val/acc is the accuracy
        # over all view sets, not a mean of per-rank accuracies.
        settings = sorted(set(self.cfg.eval.val_settings))
        counts = torch.tensor([self._val[s] if s in self._val else [0, 0] for s in settings], dtype=torch.long,
                              device=self.device)
        counts = self.trainer.strategy.reduce(counts, reduce_op="sum")
        accs = []
        for setting, (correct, total) in zip(settings, counts.tolist()):
            if total == 0:
                continue
            acc = 100.0 * correct / total
            accs.append(acc)
            self.log(f"val/acc_{setting}", acc, sync_dist=True)  # equal on every rank already
        if accs:
            self.log("val/acc", sum(accs) / len(accs), prog_bar=True, sync_dist=True)
        self._val.clear()

    def configure_optimizers(self):
        opt_cfg = self.cfg.optim
        decay, no_decay = [], []
        for name, param in self.model.named_parameters():
            if not param.requires_grad:
                continue
            (no_decay if param.ndim < 2 or "embed" in name else decay).append(param)
        optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": opt_cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=opt_cfg.lr, betas=tuple(opt_cfg.betas))
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

    def config_dict(self) -> dict:
        return to_dict(self.cfg)
