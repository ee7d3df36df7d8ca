"""A Lightning callback for the DDP test (``trainer.callbacks=[ddp_probe:DisjointSamples]``):
every rank records the view sets it trained and validated on; rank 0 checks that no view set
was seen by two ranks and that validation covered every view set, and fails the run if not."""
from __future__ import annotations

import json
from pathlib import Path

import lightning as L


class DisjointSamples(L.Callback):
    def setup(self, trainer, pl_module, stage):
        self.seen = {"train": [], "val": []}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.seen["train"] += batch["index"].tolist()

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        if not trainer.sanity_checking:
            self.seen["val"] += batch["index"].tolist()

    def on_fit_end(self, trainer, pl_module):
        folder = Path(trainer.default_root_dir)
        n_val = len(trainer.datamodule.val_set)
        (folder / f"ddp_probe_rank{trainer.global_rank}.json").write_text(json.dumps({**self.seen, "n_val": n_val}))
        trainer.strategy.barrier()
        if not trainer.is_global_zero:
            return
        ranks = [json.loads((folder / f"ddp_probe_rank{r}.json").read_text()) for r in range(trainer.world_size)]
        report = {"world_size": trainer.world_size}
        for part in ("train", "val"):
            seen = [set(r[part]) for r in ranks]
            report[f"{part}_per_rank"] = [len(r[part]) for r in ranks]
            report[f"{part}_disjoint"] = sum(map(len, seen)) == len(set().union(*seen)) and all(
                len(s) == len(r[part]) for s, r in zip(seen, ranks))
        report["val_complete"] = set().union(*(set(r["val"]) for r in ranks)) == set(range(n_val))
        (folder / "ddp_probe.json").write_text(json.dumps(report))
        if not (report["train_disjoint"] and report["val_disjoint"] and report["val_complete"]):
            raise AssertionError(f"ranks overlap or miss view sets: {report}")
