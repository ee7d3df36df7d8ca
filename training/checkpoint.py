"""Loading checkpoints safely (``weights_only=True``) and checking that they fit a config."""
from __future__ import annotations

from pathlib import Path

import torch

from bench.config import from_dict, to_dict
from training.config import TrainConfig


class CheckpointError(ValueError):
    """A checkpoint is missing, unreadable or does not fit the requested run."""


def read_checkpoint(path: str | Path) -> dict:
    """The checkpoint dict, loaded with ``weights_only=True`` (no code runs from the file)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for a bad or unsafe file
        raise CheckpointError(f"cannot load checkpoint {path}: {err}") from None
    if "state_dict" not in ckpt or "config" not in ckpt.get("hyper_parameters", {}):
        raise CheckpointError(f"{path} is not a checkpoint written by python train.py")
    return ckpt


def checkpoint_config(ckpt: dict) -> TrainConfig:
    return from_dict(TrainConfig, ckpt["hyper_parameters"]["config"])


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
    module = CrossViewModule(ckpt["hyper_parameters"]["config"])
    module.load_state_dict(ckpt["state_dict"])
    return module


def init_weights_from(module, path: str | Path) -> None:
    """Fine-tuning start: copy the model weights of ``path`` into ``module`` (same architecture)."""
    ckpt = read_checkpoint(path)
    diffs = architecture_differences(checkpoint_config(ckpt), module.cfg)
    if diffs:
        raise CheckpointError(f"init_from={path} has another architecture:\n  " + "\n  ".join(diffs))
    module.load_state_dict(ckpt["state_dict"])
