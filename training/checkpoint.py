"""Checkpoints for resuming and fine-tuning: the whole run config, the LightningModule, and
whether a checkpoint fits a config.

Reading a file safely (``weights_only=True``) and loading weights with every mismatch named
live in inputs/checkpoint.py, below both training and evaluation; this module adds the run
config and the architecture checks. Every way a checkpoint can be wrong (missing, not a
checkpoint, unpicklable, a bare tensor, a stored config that does not load, missing /
unexpected / mis-shaped weights, another architecture) raises ``CheckpointError`` with one
line naming the file and what to do.
"""
from __future__ import annotations

from pathlib import Path

from common.config import ConfigError, from_dict, to_dict
from inputs.checkpoint import CheckpointError, load_state, read_checkpoint, stored_config_error
from training.config import TrainConfig

__all__ = ["CheckpointError", "architecture_differences", "check_init_from", "checkpoint_config", "init_weights_from",
           "load_module_from_checkpoint", "load_state", "read_checkpoint"]


def checkpoint_config(ckpt: dict, path: str | Path = "checkpoint") -> TrainConfig:
    """The TrainConfig stored in a checkpoint; CheckpointError when it does not load."""
    try:
        return from_dict(TrainConfig, ckpt["hyper_parameters"]["config"])
    except (ConfigError, TypeError, ValueError, KeyError) as err:
        raise stored_config_error(path, err) from None


def architecture_differences(old: TrainConfig, new: TrainConfig) -> list[str]:
    """Model fields that differ between two configs (what a resume must refuse)."""
    diffs: list[str] = []

    def walk(a, b, path):
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                walk(a.get(key), b.get(key), f"{path}.{key}")
        elif a != b:
            diffs.append(f"{path}: checkpoint {a!r} vs config {b!r}")

    walk(to_dict(old.model), to_dict(new.model), "model")
    return [d for d in diffs if ".dropout" not in d]  # dropout changes no parameter


def load_module_from_checkpoint(path: str | Path):
    """A CrossViewModule rebuilt from the config stored in the checkpoint, weights loaded."""
    from training.module import CrossViewModule
    ckpt = read_checkpoint(path)
    cfg = checkpoint_config(ckpt, path)
    try:
        module = CrossViewModule(to_dict(cfg))
    except (ValueError, TypeError, KeyError) as err:
        raise CheckpointError(f"{path}: its stored config does not build a model ({' '.join(str(err).split())})") \
            from None
    load_state(module, ckpt["state_dict"], path)
    return module


def check_init_from(path: str | Path, cfg: TrainConfig) -> dict:
    """The checkpoint ``init_from`` names, checked against ``cfg`` before any run folder exists."""
    ckpt = read_checkpoint(path)
    diffs = architecture_differences(checkpoint_config(ckpt, path), cfg)
    if diffs:
        raise CheckpointError(f"init_from={path} has another architecture ({'; '.join(diffs)}); "
                              "start from a checkpoint of the same model config")
    return ckpt


def init_weights_from(module, path: str | Path, ckpt: dict | None = None) -> None:
    """Fine-tuning start: copy the model weights of ``path`` into ``module`` (same architecture)."""
    ckpt = ckpt if ckpt is not None else check_init_from(path, module.cfg)
    load_state(module, ckpt["state_dict"], path)
