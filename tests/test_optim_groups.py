"""optim.lr_scale: per-prefix learning-rate factors, and the default's two AdamW groups."""
import warnings

import pytest

from common.config import ConfigError, to_dict
from model.config import tiny_model_config
from training.config import TrainConfig, load_train_config
from training.module import CrossViewModule


def _module(**optim):
    warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")
    cfg = TrainConfig()
    cfg.model = tiny_model_config()
    for key, value in optim.items():
        setattr(cfg.optim, key, value)
    return CrossViewModule(to_dict(cfg))


def _names(module, group):
    ids = {id(p) for p in group["params"]}
    return [n for n, p in module.model.named_parameters() if id(p) in ids]


def test_without_lr_scale_the_groups_are_decay_then_no_decay_at_the_base_lr():
    module = _module()
    groups = module.parameter_groups()
    assert [(g["lr"], g["weight_decay"]) for g in groups] == [(5e-4, 0.01), (5e-4, 0.0)]
    assert sum(len(g["params"]) for g in groups) == len(list(module.model.parameters()))
    assert all(p.ndim >= 2 for p in groups[0]["params"])
    assert "language_head.embed" not in " ".join(_names(module, groups[0]))


def test_lr_scale_gives_the_named_parameters_their_factor_and_the_schedule_keeps_it():
    module = _module(lr_scale={"evidence.": 0.25, "language_head.": 2.0})
    groups = module.parameter_groups()
    by_lr = {}
    for group in groups:
        by_lr.setdefault(group["lr"], []).extend(_names(module, group))
    assert sorted(by_lr) == [1.25e-4, 5e-4, 1e-3]
    assert all(n.startswith("evidence.") for n in by_lr[1.25e-4])
    assert all(n.startswith("language_head.") for n in by_lr[1e-3])
    assert not any(n.startswith(("evidence.", "language_head.")) for n in by_lr[5e-4])
    assert sum(len(g["params"]) for g in groups) == len(list(module.model.parameters()))
    # The scheduler multiplies each group's own lr: the ratio holds at every step.
    module._trainer = type("T", (), {"estimated_stepping_batches": 10})()
    opt = module.configure_optimizers()
    optimizer, scheduler = opt["optimizer"], opt["lr_scheduler"]["scheduler"]
    for _ in range(4):
        lrs = sorted({g["lr"] for g in optimizer.param_groups})
        assert lrs[0] / lrs[1] == pytest.approx(0.25) and lrs[2] / lrs[1] == pytest.approx(2.0)
        optimizer.step()
        scheduler.step()


def test_a_prefix_that_names_no_parameter_fails_naming_it():
    module = _module(lr_scale={"trak.": 0.2})
    with pytest.raises(ValueError, match="trak"):
        module.parameter_groups()


@pytest.mark.parametrize("value", ["{track.: 0}", "{track.: -1}", "{'': 0.5}"])
def test_a_bad_factor_or_empty_prefix_is_refused_at_load(value):
    with pytest.raises(ConfigError, match="lr_scale"):
        load_train_config(None, [f"optim.lr_scale={value}"])


def test_lr_scale_loads_from_the_command_line():
    assert load_train_config(None, ["optim.lr_scale={track.: 0.2}"]).optim.lr_scale == {"track.": 0.2}
