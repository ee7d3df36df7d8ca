"""The entity model's checkpoint, written by ``python train.py`` and read without Lightning.

A checkpoint is Lightning's dict: ``state_dict`` (the LightningModule's, every weight under
``model.``) and ``hyper_parameters``: ``config`` (the resolved run config; its ``model`` section
rebuilds the network, its ``perception`` section names the heads that made the records),
``vocab`` (the word vocabulary, in id order), ``perception_sha256`` (the hash of the perception
heads whose records it was trained on; None for the ceiling) and ``format`` (``CHECKPOINT_FORMAT``).
Files are read with ``weights_only=True``: no code runs from them.

Every way a checkpoint can be wrong (missing, unreadable, a bare tensor, a foreign dict, one of
the mark-based model this code replaced, a stored config that does not load, missing /
unexpected / mis-shaped weights) raises ``CheckpointError`` with one line naming the file.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import NamedTuple

import torch

from common.config import ConfigError, from_dict
from inputs.entity_batch import WordVocab
from model.entity_reasoner import EntityReasoner, EntityReasonerConfig

CHECKPOINT_FORMAT = "entity-reasoner/1"
# The mark-based cross-view model (model/crossview.py) was replaced by the entity model: its run
# configs and checkpoints are read by this commit and by none after it.
OLD_MODEL_COMMIT = "38347b0"
MODEL_PREFIX = "model."  # the LightningModule holds the network as its attribute ``model``


class CheckpointError(ValueError):
    """A checkpoint is missing, unreadable or not one of this model."""


class LoadedCheckpoint(NamedTuple):
    model: EntityReasoner  # weights loaded, eval mode, on the CPU
    vocab: WordVocab
    config: dict  # the stored run config (plain dict; training.config.TrainConfig's fields)
    perception_sha256: str | None  # the hash of the heads whose records it was trained on (None: the truth)


def build_entity_model(cfg: EntityReasonerConfig, vocab: list[str]) -> EntityReasoner:
    """The entity reasoner for a word vocabulary (``vocab_size`` and ``to_word``, the id of "to" that splits
    an option "from X to Y" into its ends, follow the vocabulary)."""
    words = WordVocab(vocab)
    cfg = from_dict(EntityReasonerConfig, {**dataclasses.asdict(cfg), "vocab_size": len(words),
                                           "to_word": words.stoi.get("to", 0)})
    return EntityReasoner(cfg, words.class_words())


def read_checkpoint(path: str | Path) -> dict:
    """The checkpoint dict, loaded with ``weights_only=True``; CheckpointError unless it is one
    of this model (``CHECKPOINT_FORMAT``)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - torch raises many types for a bad or unsafe file
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"cannot load checkpoint {path}: {' '.join(first.split())[:200]}") from None
    hp = ckpt.get("hyper_parameters") if isinstance(ckpt, dict) else None
    if not (isinstance(ckpt, dict) and isinstance(ckpt.get("state_dict"), dict) and isinstance(hp, dict)):
        raise CheckpointError(f"{path} is not a checkpoint written by python train.py "
                              f"(found {type(ckpt).__name__} without state_dict and hyper_parameters)")
    if hp.get("format") != CHECKPOINT_FORMAT:
        if "config" in hp and "format" not in hp:
            raise CheckpointError(f"{path} was written by the mark-based model this code replaced; "
                                  f"commit {OLD_MODEL_COMMIT} is the last that reads it")
        raise CheckpointError(f"{path}: format {hp.get('format')!r}, expected {CHECKPOINT_FORMAT!r}")
    if not isinstance(hp.get("config"), dict) or not isinstance(hp.get("vocab"), list):
        raise CheckpointError(f"{path}: hyper_parameters lack the run config or the vocabulary")
    return ckpt


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
        raise CheckpointError(f"{path} does not fit the model it describes: {'; '.join(problems)}")
    module.load_state_dict(state_dict)


def load_entity_checkpoint(path: str | Path) -> LoadedCheckpoint:
    """The entity reasoner a checkpoint describes, weights loaded, in eval mode on the CPU."""
    ckpt = read_checkpoint(path)
    hp = ckpt["hyper_parameters"]
    try:
        cfg = from_dict(EntityReasonerConfig, hp["config"].get("model", {}), path="model")
        model = build_entity_model(cfg, hp["vocab"])
    except (ConfigError, TypeError, ValueError, KeyError) as err:
        raise CheckpointError(f"{path}: its stored model config does not load ({' '.join(str(err).split())[:200]})") \
            from None
    state = {k.removeprefix(MODEL_PREFIX): v for k, v in ckpt["state_dict"].items() if k.startswith(MODEL_PREFIX)}
    load_state(model, state, path)
    return LoadedCheckpoint(model.eval(), WordVocab(hp["vocab"]), hp["config"], hp.get("perception_sha256"))
