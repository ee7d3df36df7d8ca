"""Checkpoints for resuming: the whole run config and whether a checkpoint fits a config.

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
from inputs.checkpoint import CheckpointError, read_checkpoint
from training.config import TrainConfig

__all__ = ["CheckpointError", "architecture_differences", "checkpoint_config", "read_checkpoint"]


def checkpoint_config(ckpt: dict, path: str | Path = "checkpoint") -> TrainConfig:
    """The TrainConfig stored in a checkpoint; CheckpointError when it does not load."""
    try:
        return from_dict(TrainConfig, ckpt["hyper_parameters"]["config"])
    except (ConfigError, TypeError, ValueError, KeyError) as err:
        raise CheckpointError(f"{path}: its stored run config does not load ({' '.join(str(err).split())[:200]})") \
            from None


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


