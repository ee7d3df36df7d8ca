"""Training the entity model end to end on a tiny benchmark: round trip through the evaluator,
the ceiling labelled as one, resume, configs."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import lightning as L
import pytest
import torch

from common.config import ConfigError, to_dict
from inputs.checkpoint import CHECKPOINT_FORMAT, OLD_MODEL_COMMIT, read_checkpoint
from training.checkpoint import CheckpointError
from training.config import TrainConfig, load_train_config
from training.run import train

warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")
ROOT = Path(__file__).resolve().parents[1]


def tiny_config(bench: Path, perception: Path, tmp_path: Path, **overrides) -> TrainConfig:
    cfg = TrainConfig()
    cfg.run_name = "tiny"
    cfg.out_dir = str(tmp_path / "runs")
    cfg.data.bench_dir = str(bench)
    cfg.data.generate_config = None
    cfg.data.cache_dir = str(perception.parent / "cache")  # the tiny tower's features are there already
    cfg.data.batch_size = 8
    cfg.perception.folder = str(perception)
    cfg.model.width, cfg.model.heads = 32, 2
    cfg.trainer.max_epochs = 2
    cfg.trainer.accelerator = "cpu"
    cfg.trainer.enable_progress_bar = False
    cfg.eval.settings = ["+0", "+1", "-1"]
    for key, value in overrides.items():
        section, _, field = key.partition("__")
        setattr(getattr(cfg, section), field, value) if field else setattr(cfg, key, value)
    return cfg


def _answers(run_dir: Path) -> dict:
    lines = [json.loads(x) for x in (run_dir / "predictions.jsonl").read_text().splitlines()]
    return {(x["sample_id"], x["setting"], x.get("variant", "")): x["letter"] for x in lines}


def test_train_evaluate_round_trip(synth_bench, tiny_perception, tmp_path):
    cfg = tiny_config(synth_bench, tiny_perception, tmp_path)
    metrics = train(cfg)
    run = Path(cfg.out_dir) / "tiny"
    for name in ("last.ckpt", "best.ckpt", "config.yaml", "metrics.json", "report.md", "provenance.json"):
        assert (run / name).is_file(), name
    saved = json.loads((run / "metrics.json").read_text())
    assert saved["ceiling"] is False
    for key in ("acc", "delta_dis", "necessity_gap", "by_task", "by_axis_granularity", "failure_taxonomy"):
        assert key in saved, key
    ckpt = read_checkpoint(run / "best.ckpt")  # weights_only=True
    hp = ckpt["hyper_parameters"]
    assert hp["format"] == CHECKPOINT_FORMAT and hp["config"]["model"] == to_dict(cfg.model) and hp["vocab"]
    manifest = json.loads((run / "eval" / "run.json").read_text())
    assert manifest["model"] == "crossview"
    # the evaluator's CLI path scores best.ckpt to the same answers and figures as the run
    from eval.runner import evaluate
    summary = evaluate(synth_bench / "test", "crossview", tmp_path / "ev",
                       model_args={"ckpt": str(run / "best.ckpt"), "cache_dir": cfg.data.cache_dir},
                       settings=["+0", "+1", "-1"], progress=False, plots=False)
    assert _answers(tmp_path / "ev") == _answers(run / "eval")
    assert summary["acc"] == metrics["acc"] and summary["necessity_gap"] == metrics["necessity_gap"]
    # the records were predicted once, into the cache, keyed by the perception's hash
    from inputs.entity_records import perception_hash
    cached = list((Path(cfg.data.cache_dir) / "records" / perception_hash(tiny_perception)[:16]).glob("*.jsonl.gz"))
    assert len(cached) == 3


def test_the_ceiling_is_labelled_in_every_output(synth_bench, tiny_perception, tmp_path):
    cfg = tiny_config(synth_bench, tiny_perception, tmp_path, eval__settings=["+0"])
    cfg.perception.entities = "truth"
    cfg.trainer.max_epochs = 1
    metrics = train(cfg)
    run = Path(cfg.out_dir) / "tiny"
    assert metrics["ceiling"] is True and json.loads((run / "metrics.json").read_text())["ceiling"] is True
    assert json.loads((run / "eval" / "run.json").read_text())["model"] == "crossview-ceiling"
    assert "ceiling" in (run / "report.md").read_text()
    assert "entity ceiling" in (run / "provenance.json").read_text()
    # scored again, its default (entities=model) is the truth it was trained on: still labelled
    from eval.adapters.registry import build_model
    adapter = build_model("crossview", {"ckpt": str(run / "best.ckpt")})
    assert adapter.is_ceiling and adapter.name == "crossview-ceiling"


def test_training_on_the_true_train_entities_is_a_model_not_a_ceiling(synth_bench, tiny_perception, tmp_path):
    """perception.train_entities=truth: train reads the generator's records, val and test the
    predicted ones, so the run is scored end to end and never labelled a ceiling."""
    cfg = tiny_config(synth_bench, tiny_perception, tmp_path, eval__settings=["+0"])
    cfg.data.cache_dir = str(tmp_path / "cache")
    cfg.perception.train_entities = "truth"
    cfg.trainer.max_epochs = 1
    metrics = train(cfg)
    run = Path(cfg.out_dir) / "tiny"
    assert metrics["ceiling"] is False
    assert json.loads((run / "eval" / "run.json").read_text())["model"] == "crossview"
    assert "truth (train)" in (run / "provenance.json").read_text()
    from inputs.entity_records import perception_hash
    cached = list((tmp_path / "cache" / "records" / perception_hash(tiny_perception)[:16]).glob("*.jsonl.gz"))
    assert len(cached) == 2  # val and test: the train split's records are the labels, never predicted


class Crash(Exception):
    pass


class CrashAtEpoch(L.Callback):
    """Simulates a killed run: raises when epoch ``epoch`` starts (last.ckpt of the previous exists)."""

    def __init__(self, epoch: int):
        self.epoch = epoch

    def on_train_epoch_start(self, trainer, pl_module):
        if trainer.current_epoch == self.epoch:
            raise Crash()


@pytest.mark.slow
def test_resume_matches_uninterrupted(synth_bench, tiny_perception, tmp_path):
    full = tiny_config(synth_bench, tiny_perception, tmp_path / "a", eval__enabled=False)
    train(full)
    broken = tiny_config(synth_bench, tiny_perception, tmp_path / "b", eval__enabled=False)
    with pytest.raises(Crash):
        train(broken, callbacks=[CrashAtEpoch(1)])
    run = Path(broken.out_dir) / "tiny"
    assert read_checkpoint(run / "last.ckpt")["epoch"] == 0
    train(broken, resume=run)
    a = read_checkpoint(Path(full.out_dir) / "tiny" / "last.ckpt")["state_dict"]
    b = read_checkpoint(run / "last.ckpt")["state_dict"]
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-5), key


@pytest.mark.slow
@pytest.mark.parametrize("readout", ["fixed", "learned"])
def test_a_rerun_starts_from_the_weights_of_the_first_run(synth_bench, tiny_perception, tmp_path, readout):
    """The first run predicts and caches the records (building the perception heads draws random
    numbers), the second reads them: both end on the same weights, from the seed alone."""
    states = []
    for name in ("first", "rerun"):
        cfg = tiny_config(synth_bench, tiny_perception, tmp_path / name, eval__enabled=False)
        cfg.data.cache_dir = str(tmp_path / "cache")  # empty for the first run, filled by it
        cfg.model.readout = readout
        train(cfg)
        states.append(read_checkpoint(Path(cfg.out_dir) / "tiny" / "last.ckpt")["state_dict"])
    assert (tmp_path / "cache" / "records").is_dir()
    for key in states[0]:
        assert torch.equal(states[0][key], states[1][key]), key


def test_resume_refuses_changed_architecture(synth_bench, tiny_perception, tmp_path):
    cfg = tiny_config(synth_bench, tiny_perception, tmp_path, eval__enabled=False)
    cfg.trainer.max_epochs = 1
    train(cfg)
    changed = tiny_config(synth_bench, tiny_perception, tmp_path, eval__enabled=False)
    changed.model.reason_layers = 1
    with pytest.raises(CheckpointError, match="model.reason_layers"):
        train(changed, resume=Path(cfg.out_dir) / "tiny")


def test_unknown_and_removed_config_keys_fail_clearly(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown config key\(s\) 'trainer.max_epoch'"):
        load_train_config("configs/default.yaml", ["trainer.max_epoch=3"])
    bad = tmp_path / "old.yaml"
    bad.write_text("model:\n  fusion:\n    layers: 3\n")
    with pytest.raises(ConfigError, match=f"'model.fusion' is a key of the mark-based model.*{OLD_MODEL_COMMIT}"):
        load_train_config(bad)


def test_every_shipped_config_loads():
    configs = ROOT / "configs"
    train_configs = [p for p in sorted(configs.rglob("*.yaml")) if p.parent.name not in ("bench", "backbone")]
    names = {p.relative_to(configs).as_posix() for p in train_configs}
    assert {"default.yaml", "ceiling.yaml", "full.yaml", "ablations/bag_of_frames.yaml", "ablations/blind.yaml",
            "ablations/no_camera.yaml", "ablations/no_evidence.yaml", "ablations/no_readouts.yaml"} <= names, names
    for path in train_configs:
        cfg = load_train_config(path)
        assert cfg.is_ceiling == (path.name == "ceiling.yaml"), path  # the ceiling is never a default


def test_batches_never_mix_clips_and_stills(synth_bench):
    from bench.format import load_benchmark
    from training.data import BucketBatchSampler, frame_count

    class Fake:
        def __init__(self, samples):
            self.bench = type("B", (), {"samples": samples})()
            self.epoch = 0

        def set_epoch(self, epoch):
            self.epoch = epoch

        def __len__(self):
            return len(self.bench.samples)

    data = Fake(load_benchmark(synth_bench / "train").samples)
    assert len({frame_count(s) for s in data.bench.samples}) == 2  # stills and 8-frame clips
    sampler = BucketBatchSampler(data, batch_size=5, seed=0)
    sampler.set_epoch(1)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(data)))
    assert all(len({frame_count(data.bench.samples[i]) for i in b}) == 1 for b in batches)
    assert data.epoch == 1 and list(sampler) == batches  # same epoch, same batches
    sampler.set_epoch(2)
    assert list(sampler) != batches
