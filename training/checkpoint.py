"""Loading checkpoints safely (``weights_only=True``) and checking that they fit a config.

Every way a checkpoint can be wrong (missing, not a checkpoint, unpicklable, a bare tensor,
a stored config that does not load, missing / unexpected / mis-shaped weights, another
architecture) raises ``CheckpointError`` with one line naming the file and what to do.
"""
from __future__ import annotations

from pathlib import Path

import torch

from bench.config import ConfigError, from_dict, to_dict
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
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"cannot load checkpoint {path}: {first}") from None
    if not (isinstance(ckpt, dict) and isinstance(ckpt.get("state_dict"), dict)
            and isinstance(ckpt.get("hyper_parameters"), dict) and "config" in ckpt["hyper_parameters"]):
        raise CheckpointError(f"{path} is not a checkpoint written by python train.py "
                              f"(found {type(ckpt).__name__} without state_dict and hyper_parameters.config)")
    return ckpt


def checkpoint_config(ckpt: dict, path: str | Path = "checkpoint") -> TrainConfig:
    """The TrainConfig stored in a checkpoint; CheckpointError when it does not load."""
    try:
        return from_dict(TrainConfig, ckpt["hyper_parameters"]["config"])
    except (ConfigError, TypeError, ValueError, KeyError) as err:
        raise CheckpointError(f"{path}: its stored config does not load ({' '.join(str(err).split())}); "
                              "was it written by another version of this code?") from None


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


def load_state(module, state_dict: dict, path: str | Path) -> None:
    """``module.load_state_dict`` (strict) with every mismatch named in one CheckpointError."""
    own = module.state_dict()
    missing = [k for k in own if k not in state_dict]
    unexpected = [k for k in state_dict if k not in own]
    misshaped = [f"{k} {tuple(v.shape)} vs {tuple(own[k].shape)}" for k, v in state_dict.items()
                 if k in own and (not isinstance(v, torch.Tensor) or v.shape != own[k].shape)]
    problems = []
    for label, keys in (("missing", missing), ("unexpected", unexpected), ("mis-shaped (file vs model)", misshaped)):
        if keys:
            problems.append(f"{len(keys)} {label} weight(s): {', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}")
    if problems:
        raise CheckpointError(f"{path} does not fit the model it describes: {'; '.join(problems)}; "
                              "is the file complete and written by this version of python train.py?")
    try:
        module.load_state_dict(state_dict)
    except (RuntimeError, TypeError, ValueError) as err:
        raise CheckpointError(f"{path}: cannot load the weights ({' '.join(str(err).split())[:300]})") from None


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
