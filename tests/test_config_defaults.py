"""One source of truth for defaults: the dataclasses are the shipped model, and
configs/default.yaml (python train.py) states only what the demo itself decides."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from common.config import ConfigError, to_dict
from training.config import TrainConfig, load_train_config

ROOT = Path(__file__).resolve().parents[1]

# The keys configs/default.yaml may set. Everything else it resolves to is a dataclass default.
DEMO_KEYS = {
    "data.bench_dir",         # where the demo's benchmark is generated and read
    "data.generate_config",   # the benchmark config it is generated from
    "data.cache_dir",         # where the backbone features are cached
    "trainer.max_epochs",     # the demo's time budget (equal to the default today)
    "trainer.accelerator",    # the demo runs on the CPU; the default "auto" takes a GPU if present
}


def _leaves(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out.update(_leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def test_default_yaml_states_only_demo_keys():
    raw = yaml.safe_load((ROOT / "configs/default.yaml").read_text())
    assert "_base_" not in raw
    assert set(_leaves(raw)) <= DEMO_KEYS, sorted(set(_leaves(raw)) - DEMO_KEYS)


def test_default_yaml_resolves_to_the_dataclass_defaults_but_the_demo_keys():
    resolved = _leaves(to_dict(load_train_config(ROOT / "configs/default.yaml")))
    defaults = _leaves(to_dict(TrainConfig()))
    assert set(resolved) == set(defaults)
    differ = {key for key in defaults if resolved[key] != defaults[key]}
    assert differ <= DEMO_KEYS, {key: (defaults[key], resolved[key]) for key in differ - DEMO_KEYS}
    assert {k: v for k, v in resolved.items() if k not in DEMO_KEYS} == \
        {k: v for k, v in defaults.items() if k not in DEMO_KEYS}


def test_defaults_are_the_shipped_model():
    cfg = TrainConfig()
    assert Path(cfg.model.backbone.pretrained) == Path("checkpoints/backbone/synthclip-cnn16")
    assert (ROOT / cfg.model.backbone.pretrained / "open_clip_config.json").is_file()
    assert cfg.model.fusion.summary_tokens and cfg.model.dropout == 0.0
    assert (cfg.optim.lr, cfg.data.batch_size, cfg.loss.identity) == (5e-4, 16, 0.0)


def test_removed_option_still_loads_from_old_run_configs():
    # Configs stored in runs and checkpoints before fusion.prefix_reads_patches was removed.
    assert load_train_config(None, ["model.fusion.prefix_reads_patches=false"]) == TrainConfig()
    with pytest.raises(ConfigError, match="model.fusion.prefix_reads_patches: this option was removed"):
        load_train_config(None, ["model.fusion.prefix_reads_patches=true"])
