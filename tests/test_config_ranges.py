"""Out-of-range config values fail at load time, naming the dotted key and the allowed range."""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from common.config import ConfigError, in_range, load_config
from bench.synth.config import SynthConfig
from training.config import load_train_config


def test_range_specs():
    assert in_range(0.5, "(0, 1]") and in_range(1, "[0, 1]") and in_range(7, ">= 7")
    assert not in_range(1, "[0, 1)") and not in_range(0, "> 0") and not in_range(180, "(0, 180)")
    with pytest.raises(ValueError, match="not a range"):
        in_range(1, "positive")


@pytest.mark.parametrize("frames", [4, 6])
def test_too_few_temporal_frames_fail_at_load(frames):
    # 4..6 frames used to pass the load and crash inside a generator worker (ValueError: n < 0 or
    # low >= high in bench/synth/motion.py): two hand actions of up to 3 frames after a rest need 7.
    with pytest.raises(ConfigError, match=rf"temporal.frames: {frames} is out of range; allowed: >= 7"):
        load_config(SynthConfig, None, [f"temporal.frames={frames}"])
    assert load_config(SynthConfig, None, ["temporal.frames=7"]).temporal.frames == 7


@pytest.mark.parametrize("override,words", [
    ("scene.hat_prob=1.5", "scene.hat_prob: 1.5 is out of range; allowed: [0, 1]"),
    ("scene.object_weights=[0.2,-0.1]", "scene.object_weights[1]: -0.1 is out of range; allowed: >= 0"),
    ("render.width=0", "render.width: 0 is out of range; allowed: >= 1"),
    ("camera.max_fov=180", "camera.max_fov: 180.0 is out of range; allowed: (0, 180)"),
    ("tasks.max_task_share=0", "tasks.max_task_share: 0.0 is out of range; allowed: (0, 1]"),
    ("scene.min_persons=9", "scene.min_persons (9) must not exceed scene.max_persons (8)"),
    ("tasks.enabled=[no_such_task]", "tasks.enabled: unknown task(s)"),
])
def test_generator_ranges(override, words):
    with pytest.raises(ConfigError) as info:
        load_config(SynthConfig, None, [override])
    assert words in str(info.value)


@pytest.mark.parametrize("override,words", [
    ("optim.lr=0", "optim.lr: 0.0 is out of range; allowed: > 0"),
    ("optim.betas=[0.9,1.0]", "optim.betas[1]: 1.0 is out of range; allowed: [0, 1)"),
    ("augment.p_extra=-0.1", "augment.p_extra: -0.1 is out of range; allowed: [0, 1]"),
    ("loss.pointer=-1", "loss.pointer: -1.0 is out of range; allowed: >= 0"),
    ("data.batch_size=0", "data.batch_size: 0 is out of range; allowed: >= 1"),
    ("trainer.max_epochs=0", "trainer.max_epochs: 0 is out of range; allowed: >= 1"),
    ("model.dropout=1", "model.dropout: 1.0 is out of range; allowed: [0, 1)"),
    ("model.width=0", "model.width: 0 is out of range; allowed: >= 1"),
    ("model.entity_layers=-1", "model.entity_layers: -1 is out of range; allowed: >= 0"),
])
def test_training_ranges_name_the_file_and_key(override, words):
    with pytest.raises(ConfigError) as info:
        load_train_config("configs/default.yaml", [override])
    assert str(info.value) == f"configs/default.yaml: {words}"


def test_none_passes_an_optional_range():
    from model.config import BackboneConfig
    assert load_config(BackboneConfig, None, ["pool_grid=null"]).pool_grid is None
    with pytest.raises(ConfigError, match="pool_grid: 0 is out of range"):
        load_config(BackboneConfig, None, ["pool_grid=0"])


@dataclass
class Inner:
    RANGES = {"p": "[0, 1]"}
    p: float = 0.5


@dataclass
class Outer:
    inner: Inner = field(default_factory=Inner)


def test_nested_ranges_are_checked_with_their_path():
    with pytest.raises(ConfigError, match=r"^inner.p: 2.0 is out of range; allowed: \[0, 1\]$"):
        load_config(Outer, None, ["inner.p=2"])
