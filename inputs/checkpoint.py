"""Checkpoints of ``python train.py`` read without Lightning (``weights_only=True``).

A checkpoint is Lightning's dict: ``state_dict`` (the LightningModule's, every weight under
``model.``) and ``hyper_parameters["config"]`` (the resolved run config; its ``model`` section
rebuilds the network). ``load_model`` gives the plain ``model.CrossViewModel`` with its
weights, which is all scoring needs; training/checkpoint.py adds what resuming and fine-tuning
need (the whole run config, the LightningModule).

Every way a checkpoint can be wrong (missing, not a checkpoint, unpicklable, a bare tensor,
a stored config that does not load, missing / unexpected / mis-shaped weights) raises
``CheckpointError`` with one line naming the file and what to do.
"""
from __future__ import annotations

from pathlib import Path

import torch

from common.config import ConfigError, from_dict
from model.config import ModelConfig

MODEL_PREFIX = "model."  # the LightningModule holds the network as its attribute ``model``


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


def stored_config_error(path: str | Path, err: Exception) -> CheckpointError:
    """The one-line error for a stored config that does not load."""
    return CheckpointError(f"{path}: its stored config does not load ({' '.join(str(err).split())}); "
                           "was it written by another version of this code?")


def checkpoint_model_config(ckpt: dict, path: str | Path = "checkpoint") -> ModelConfig:
    """The ModelConfig stored in a checkpoint (its run config's ``model`` section)."""
    try:
        return from_dict(ModelConfig, ckpt["hyper_parameters"]["config"]["model"])
    except (ConfigError, TypeError, ValueError, KeyError) as err:
        raise stored_config_error(path, err) from None


def load_state(module: torch.nn.Module, state_dict: dict, path: str | Path) -> None:
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


def model_state_dict(ckpt: dict) -> dict:
    """The network's weights: the LightningModule's ``model.*`` entries without the prefix (any
    other entry is kept as it is, so ``load_state`` names it as unexpected)."""
    return {k.removeprefix(MODEL_PREFIX): v for k, v in ckpt["state_dict"].items()}


def load_model(path: str | Path):
    """(model, ModelConfig): the ``model.CrossViewModel`` a checkpoint describes, weights loaded,
    in eval mode on the CPU. Imports neither Lightning nor anything of training/."""
    from model import build_model
    ckpt = read_checkpoint(path)
    cfg = checkpoint_model_config(ckpt, path)
    try:
        model = build_model(cfg)
    except (ValueError, TypeError, KeyError) as err:
        raise CheckpointError(f"{path}: its stored config does not build a model ({' '.join(str(err).split())})") \
            from None
    load_state(model, model_state_dict(ckpt), path)
    return model.eval(), cfg
