"""One source of truth for defaults: the dataclasses are the shipped model, and
configs/default.yaml (python train.py) states only what the demo itself decides."""
from __future__ import annotations

from pathlib import Path

import yaml

from common.config import to_dict
from training.config import TrainConfig, load_train_config

ROOT = Path(__file__).resolve().parents[1]

# The keys configs/default.yaml may set. Everything else it resolves to is a dataclass default.
DEMO_KEYS = {
    "data.bench_dir",         # where the demo's benchmark is generated and read
    "data.generate_config",   # the benchmark config it is generated from
    "data.cache_dir",         # where the tower's features and the predicted records are cached
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
    assert not cfg.is_ceiling  # the ceiling is a config of its own, never a default
    assert Path(cfg.perception.folder) == Path("checkpoints/perception/synthclip-cnn16-heads")
    assert (cfg.optim.lr, cfg.data.batch_size, cfg.trainer.max_epochs) == (1e-3, 32, 8)
    assert (cfg.loss.answer, cfg.loss.pointer, cfg.loss.assoc, cfg.loss.count) == (1.0, 1.0, 1.0, 0.5)
