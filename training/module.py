"""The LightningModule: owns the loss, the metrics and the optimiser; calls ``model.EntityReasoner``."""
from __future__ import annotations

import math
from typing import Sequence

import lightning as L
import torch

from bench.format import Sample
from bench.protocol import accuracy_by_setting, unit_scores
from common.config import from_dict
from inputs.checkpoint import CHECKPOINT_FORMAT, build_entity_model
from inputs.entity_records import perception_hash
from training.config import TrainConfig
from training.data import ViewSet
from training.losses import EntityCriterion


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


class EntityModule(L.LightningModule):
    """Trains ``model.EntityReasoner`` on entity view-set batches (training/data.py).

    Args:
        config: the resolved TrainConfig as a plain dict; saved in every checkpoint
            (``hyper_parameters["config"]``) with the word vocabulary (``hyper_parameters["vocab"]``)
            and the format tag, so a checkpoint rebuilds its own model (inputs/checkpoint.py).
        vocab: the run's word vocabulary (its words, in id order); None: the datamodule's, read in
            ``configure_model``.
    """

    def __init__(self, config: dict, vocab: list[str] | None = None):
        super().__init__()
        self.cfg = from_dict(TrainConfig, config)
        trained_on = None if self.cfg.is_ceiling else perception_hash(self.cfg.perception.folder)
        self.save_hyperparameters({"config": config, "vocab": list(vocab or []), "perception_sha256": trained_on,
                                   "format": CHECKPOINT_FORMAT})
        self.model = build_entity_model(self.cfg.model, vocab) if vocab else None
        self.criterion = EntityCriterion(self.cfg.loss)
        self._val: dict[int, bool] = {}  # validation view-set index -> answered right (this rank's share)

    def configure_model(self) -> None:
        """Build the reasoner once the datamodule knows the train split's vocabulary (the benchmark
        may be generated inside fit); Lightning calls this after setup, before DDP wraps the model."""
        if self.model is None:
            vocab = self.trainer.datamodule.load_vocab().itos
            self.hparams["vocab"] = list(vocab)
            # The initial weights follow from the seed alone, not from what drew random numbers
            # before them: a first run predicts and caches the records (building the perception
            # heads draws), a second reads the cache, and both must start from the same weights.
            with torch.random.fork_rng():
                torch.manual_seed(self.cfg.seed)
                self.model = build_entity_model(self.cfg.model, vocab)

    def forward(self, batch: dict) -> dict:
        return self.model(batch)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        out = self(batch)
        losses = self.criterion(out, batch)
        size = len(batch["answer"])
        # sync_dist: epoch values averaged over ranks under DDP (a no-op in one process)
        for name, value in losses.items():
            self.log(f"train/{name}", value, batch_size=size, prog_bar=name == "loss", on_step=True, on_epoch=True,
                     sync_dist=True)
        acc = (out["option_logits"].argmax(-1) == batch["answer"]).float().mean()
        self.log("train/acc", acc, batch_size=size, prog_bar=True, on_step=True, on_epoch=True, sync_dist=True)
        return losses["loss"]

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        out = self(batch)
        losses = self.criterion(out, batch)
        self.log("val/loss", losses["loss"], batch_size=len(batch["answer"]), sync_dist=True)
        right = (out["option_logits"].argmax(-1) == batch["answer"]).tolist()
        for index, ok in zip(batch["index"].tolist(), right):
            self._val[index] = bool(ok)

    def on_validation_epoch_end(self) -> None:
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
        """AdamW's groups: weight decay on matrices, not on embeddings, biases and norms."""
        decay, plain = [], []
        for name, param in self.model.named_parameters():
            if param.requires_grad:
                (plain if param.ndim < 2 or "embed" in name or name.startswith("word.") else decay).append(param)
        return [{"params": decay, "weight_decay": self.cfg.optim.weight_decay},
                {"params": plain, "weight_decay": 0.0}]

    def configure_optimizers(self):
        opt_cfg = self.cfg.optim
        groups = self.parameter_groups()
        params = [p for group in groups for p in group["params"]]
        # The fused kernel: one pass per parameter instead of a chain of foreach ops (same update rule).
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
