"""The person track's own stage (configs/track_stage.yaml): train on a subset of tasks
(data.tasks) with the track loss alone, then start the joint training from its weights."""
from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import pytest
import torch

from bench.format import load_benchmark
from bench.tiny import make_tiny_benchmark
from training.checkpoint import read_checkpoint
from training.config import load_train_config
from training.datamodule import _tasks
from training.run import train

warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")

TRACK_SWITCHES = ("track", "track_box_read", "track_box_teacher", "track_box_detach", "track_motion",
                  "track_word_norm", "track_layers", "track_last")


def _with_track_records(root: Path) -> Path:
    """The tiny benchmark's clip question becomes a repetition_count with per-frame records."""
    path = root / "benchmark.json"
    data = json.loads(path.read_text())
    for sample in data["samples"]:
        if sample["task"] == "relation":
            sample["task"], sample["subset"] = "repetition_count", "MVN"  # scored at +0 by validation
            sample["meta"] = {"observations": {v["view_id"]: {"obs": [["0", "1", None][(i + j) % 3]
                                                                     for j in range(len(v["frames"]))]}
                                               for i, v in enumerate(sample["views"])},
                              # where the person is (the locator's target): a box, or no pixel
                              "person_boxes": {v["view_id"]: [[4 * j, 2, 4 * j + 9, 20] if (i + j) % 3 != 2 else None
                                                              for j in range(len(v["frames"]))]
                                               for i, v in enumerate(sample["views"])}}
    path.write_text(json.dumps(data))
    return root


@pytest.fixture(scope="module")
def splits(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bench")
    for split in ("train", "val", "test"):
        _with_track_records(make_tiny_benchmark(root / split, n_scenes=4 if split == "train" else 2, n_frames=3))
    return root


def test_data_tasks_keeps_only_those_tasks(splits):
    bench = load_benchmark(splits / "train")
    assert _tasks(bench, []) is bench
    kept = _tasks(bench, ["repetition_count", "count_in_view"])
    assert {s.task for s in kept.samples} == {"repetition_count", "count_in_view"}
    assert len(kept.samples) == 8
    with pytest.raises(ValueError, match=r"no samples of \['trajectory'\]"):
        _tasks(bench, ["count_in_view", "trajectory"])


@pytest.mark.slow
def test_the_track_stage_trains_the_track_alone_and_seeds_the_joint_run(splits, tmp_path):
    from test_train_e2e import tiny_config
    stage_file = load_train_config("configs/track_stage.yaml")
    stage = tiny_config(splits, tmp_path, eval__enabled=False, run_name="stage")
    for key in TRACK_SWITCHES:  # the stage's track, with its box read
        setattr(stage.model.fusion, key, getattr(stage_file.model.fusion, key))
    stage.loss, stage.data.tasks = stage_file.loss, ["repetition_count"]
    stage.trainer.monitor = stage_file.trainer.monitor
    stage.trainer.max_epochs, stage.trainer.log_every_n_steps = 2, 1
    train(stage)
    run = Path(stage.out_dir) / "stage"
    rows = list(csv.DictReader(open(run / "logs" / "metrics.csv")))
    steps = [r for r in rows if r.get("train/loss_track_step")]
    track = [float(r["train/loss_track_step"]) for r in steps]
    locate = [float(r["train/loss_track_locate_step"]) for r in steps]
    box = [float(r["train/loss_track_box_step"]) for r in steps]
    total = [float(r["train/loss_step"]) for r in steps]
    assert track and all(t > 0 for t in track) and all(x > 0 for x in locate) and all(x > 0 for x in box)
    w, wb = stage.loss.track_locate, stage.loss.track_box
    assert w > 0 and wb > 0  # the track's terms alone
    assert total == pytest.approx([t + w * x + wb * y for t, x, y in zip(track, locate, box)])
    assert any(r.get("val/track_acc") for r in rows) and any(r.get("val/track_seen_acc") for r in rows)
    assert any(r.get("val/track_locate_acc") for r in rows)
    assert not any(r.get("val/acc") or r.get("train/acc_step") for r in rows)  # the track path alone
    saved = json.loads((run / "metrics.json").read_text())
    assert saved["best_val_acc"] is None and set(saved["best_monitor"]) == {"val/track_seen_acc"}

    # scripts/probe_track.py scores the stage's head per task against the train majority
    from test_probe_track import probe_track
    assert probe_track.main([str(run / "best.ckpt"), "--out", str(tmp_path / "probe.json")]) == 0
    probe = json.loads((tmp_path / "probe.json").read_text())["tasks"]
    assert set(probe) == {"repetition_count", "all"} and probe["all"]["seen"] > 0
    assert 0 <= probe["all"]["acc"] <= 100 and 0 <= probe["all"]["majority"] <= 100
    assert 0 <= probe["all"]["located"] <= 100  # the boxes reached the probe

    joint_file = load_train_config("configs/track_joint.yaml", [f"init_from={run / 'best.ckpt'}"])
    joint = tiny_config(splits, tmp_path, eval__enabled=False, run_name="joint",
                        init_from=str(run / "best.ckpt"))
    for key in TRACK_SWITCHES:
        setattr(joint.model.fusion, key, getattr(joint_file.model.fusion, key))
    joint.loss = joint_file.loss
    joint.trainer.max_epochs = 1
    joint.freeze = ["track."]  # kept fixed: they must be the stage's, not a fresh initialisation
    train(joint)
    a = read_checkpoint(run / "best.ckpt")["state_dict"]
    b = read_checkpoint(Path(joint.out_dir) / "joint" / "last.ckpt")["state_dict"]
    keys = [k for k in a if ".track." in k]
    assert keys and all(torch.equal(a[k], b[k]) for k in keys)


def test_monitoring_the_track_needs_the_track():
    from common.config import ConfigError
    with pytest.raises(ConfigError, match="model.fusion.track=true"):
        load_train_config("configs/default.yaml", ["trainer.monitor=val/track_acc"])
    assert load_train_config("configs/track_stage.yaml").trainer.monitor == "val/track_seen_acc"


def test_a_loss_of_the_track_alone_needs_the_track_and_its_monitor():
    stage = load_train_config("configs/track_stage.yaml")
    assert stage.loss.track_only  # the stage runs the model's track path alone
    assert not load_train_config("configs/default.yaml").loss.track_only
    from common.config import ConfigError
    with pytest.raises(ConfigError, match="monitor to val/track_acc or val/track_seen_acc"):
        load_train_config("configs/track_stage.yaml", ["trainer.monitor=val/acc"])
    only_track = [f"loss.{k}=0" for k in ("answer", "evidence", "entity_evidence", "identity", "view_count")]
    with pytest.raises(ConfigError, match="model.fusion.track is off"):
        load_train_config("configs/default.yaml", only_track + ["trainer.monitor=val/acc"])


def test_train_py_says_a_stage_was_not_scored(monkeypatch, capsys):
    """eval.enabled=false (the stage): no empty result tables, the monitor's best figure instead."""
    import training.run
    from train import main as train_main
    fake = {"fit_seconds": 1.0, "run_dir": "checkpoints/stage", "best_val_acc": None,
            "best_monitor": {"val/track_seen_acc": 0.3285}}
    monkeypatch.setattr(training.run, "train", lambda cfg, config_name, resume: fake)
    assert train_main(["--config", "configs/track_stage.yaml"]) == 0
    out = capsys.readouterr().out
    assert "not evaluated" in out and "val/track_seen_acc 0.3285" in out and "checkpoints/stage" in out
    assert "SSMNBench" not in out


def test_the_stage_trains_on_every_verified_question_of_the_default_benchmark():
    """configs/track_stage.yaml reads configs/bench/verified.yaml: the default benchmark's config
    with train_selection=verified and nothing else changed (so val and test are the default's)."""
    from common.config import load_config
    from bench.synth.config import SynthConfig
    from common.config import to_dict
    stage = load_train_config("configs/track_stage.yaml")
    assert stage.data.generate_config == "configs/bench/verified.yaml"
    assert stage.data.bench_dir != load_train_config("configs/default.yaml").data.bench_dir
    verified = to_dict(load_config(SynthConfig, stage.data.generate_config))
    default = to_dict(load_config(SynthConfig, "configs/bench/default.yaml"))
    assert verified.pop("train_selection") == "verified" and default.pop("train_selection") == "balanced"
    assert verified.pop("name") != default.pop("name")
    assert verified == default


def test_the_joint_config_continues_the_stage():
    """configs/track_joint.yaml: the stage's track architecture (init_from checks it), the
    default's everything else, and no run without the stage's checkpoint."""
    from common.config import ConfigError
    with pytest.raises(ConfigError, match="init_from"):
        load_train_config("configs/track_joint.yaml")
    stage = load_train_config("configs/track_stage.yaml")
    joint = load_train_config("configs/track_joint.yaml", ["init_from=checkpoints/stage/best.ckpt"])
    default = load_train_config("configs/default.yaml")
    assert joint.model.fusion.track and joint.model.fusion.track_box_read
    assert {k: getattr(joint.model.fusion, k) for k in TRACK_SWITCHES} == \
        {k: getattr(stage.model.fusion, k) for k in TRACK_SWITCHES}
    assert joint.model.backbone == stage.model.backbone == default.model.backbone
    assert joint.data == default.data and joint.trainer == default.trainer and joint.optim == default.optim
    assert joint.loss.answer == default.loss.answer and joint.loss.track_box > 0 and joint.loss.track_locate > 0
