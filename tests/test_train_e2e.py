"""Training end to end on a tiny benchmark: round trip, resume, fine-tuning, config errors."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import lightning as L
import pytest
import torch
import yaml

from common.config import ConfigError, to_dict
from model.config import tiny_model_config
from bench.tiny import make_tiny_benchmark
from training.checkpoint import CheckpointError, read_checkpoint
from training.config import TrainConfig, load_train_config
from training.run import train

warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")


@pytest.fixture(scope="module")
def splits(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bench")
    for i, split in enumerate(("train", "val", "test")):
        make_tiny_benchmark(root / split, n_scenes=4 if split == "train" else 2)
    return root


def tiny_config(splits: Path, tmp_path: Path, **overrides) -> TrainConfig:
    cfg = TrainConfig()
    cfg.run_name = "tiny"
    cfg.out_dir = str(tmp_path / "runs")
    cfg.model = tiny_model_config()
    cfg.model.lm.vocab_size = 49408  # the open_clip tokenizer's ids
    cfg.data.bench_dir = str(splits)
    cfg.data.generate_config = None
    cfg.data.cache_dir = str(tmp_path / "cache")
    cfg.data.batch_size = 8
    cfg.trainer.max_epochs = 2
    cfg.trainer.accelerator = "cpu"
    cfg.trainer.enable_progress_bar = False
    cfg.eval.settings = ["+0", "+1", "-1", "all"]
    cfg.eval.val_settings = ["+0", "-1"]
    for key, value in overrides.items():
        section, _, field = key.partition("__")
        setattr(getattr(cfg, section), field, value) if field else setattr(cfg, key, value)
    return cfg


def test_train_evaluate_round_trip(splits, tmp_path):
    cfg = tiny_config(splits, tmp_path)
    metrics = train(cfg)
    run = Path(cfg.out_dir) / "tiny"
    for name in ("last.ckpt", "best.ckpt", "config.yaml", "metrics.json", "report.md"):
        assert (run / name).is_file(), name
    assert list(run.glob("*.png"))
    saved = json.loads((run / "metrics.json").read_text())
    for key in ("acc", "delta_dis", "necessity_gap", "by_task", "by_axis_granularity", "failure_taxonomy",
                "n_samples", "chance"):
        assert key in saved, key
    assert set(saved["acc"]) >= {"+0", "+1", "-1", "all"}
    assert metrics["n_samples"] == 8
    ckpt = read_checkpoint(run / "best.ckpt")  # weights_only=True
    assert ckpt["hyper_parameters"]["config"]["model"] == to_dict(cfg.model)
    # the saved checkpoint evaluates through the CLI adapter too
    from eval.runner import evaluate
    summary = evaluate(splits / "test", "crossview", tmp_path / "ev",
                       model_args={"ckpt": str(run / "best.ckpt"), "cache_dir": cfg.data.cache_dir},
                       settings=["+0"], progress=False, plots=False)
    assert summary["acc"]["+0"]["SVS"] == pytest.approx(metrics["acc"]["+0"]["SVS"])


class Crash(Exception):
    pass


class CrashAtEpoch(L.Callback):
    """Simulates a killed run: raises when epoch ``epoch`` starts (last.ckpt of the previous exists)."""

    def __init__(self, epoch: int):
        self.epoch = epoch

    def on_train_epoch_start(self, trainer, pl_module):
        if trainer.current_epoch == self.epoch:
            raise Crash()


def test_resume_matches_uninterrupted(splits, tmp_path):
    full = tiny_config(splits, tmp_path / "a", eval__enabled=False)
    train(full)
    broken = tiny_config(splits, tmp_path / "b", eval__enabled=False)
    with pytest.raises(Crash):
        train(broken, callbacks=[CrashAtEpoch(1)])
    run = Path(broken.out_dir) / "tiny"
    assert read_checkpoint(run / "last.ckpt")["epoch"] == 0
    train(broken, resume=run)
    a = read_checkpoint(Path(full.out_dir) / "tiny" / "last.ckpt")["state_dict"]
    b = read_checkpoint(run / "last.ckpt")["state_dict"]
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-5), key


def test_resume_refuses_changed_architecture(splits, tmp_path):
    cfg = tiny_config(splits, tmp_path, eval__enabled=False)
    cfg.trainer.max_epochs = 1
    train(cfg)
    changed = tiny_config(splits, tmp_path, eval__enabled=False)
    changed.model.fusion.layers = 2
    with pytest.raises(CheckpointError, match="model.fusion.layers"):
        train(changed, resume=Path(cfg.out_dir) / "tiny")


def test_finetune_loads_checkpoint_and_trains_evidence(splits, tmp_path):
    base = tiny_config(splits, tmp_path, eval__enabled=False)
    base.trainer.max_epochs = 1
    train(base)
    best = Path(base.out_dir) / "tiny" / "best.ckpt"
    ft = load_train_config("configs/finetune_evidence.yaml", [f"init_from={best}"])
    tuned = tiny_config(splits, tmp_path, eval__enabled=False, run_name="ft", stage="finetune",
                        init_from=str(best))
    tuned.loss, tuned.optim = ft.loss, ft.optim
    tuned.trainer.max_epochs = 1
    train(tuned)
    before = read_checkpoint(best)["state_dict"]
    after = read_checkpoint(Path(tuned.out_dir) / "ft" / "last.ckpt")["state_dict"]
    evidence_keys = [k for k in before if ".evidence." in k]
    assert evidence_keys
    assert any(not torch.equal(before[k], after[k]) for k in evidence_keys)
    log = (Path(tuned.out_dir) / "ft" / "logs" / "metrics.csv").read_text()
    assert "train/loss_evidence" in log


def test_unknown_config_key_fails_clearly(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown config key\(s\) 'trainer.max_epoch'"):
        load_train_config("configs/default.yaml", ["trainer.max_epoch=3"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("_base_: " + str(Path("configs/default.yaml").resolve()) + "\nmodel:\n  fusion:\n    layer: 3\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: unknown config key\(s\) 'model.fusion.layer'"):
        load_train_config(bad)


def test_every_shipped_config_loads():
    # The repo's configs, wherever pytest runs from; the count catches a glob that finds nothing.
    configs = Path(__file__).resolve().parents[1] / "configs"
    train_configs = [p for p in sorted(configs.rglob("*.yaml")) if p.parent.name not in ("bench", "backbone")]
    names = {p.relative_to(configs).as_posix() for p in train_configs}
    assert {"default.yaml", "full.yaml", "finetune_evidence.yaml", "ablations/bag_of_frames.yaml",
            "ablations/random_backbone.yaml"} <= names, names
    assert len(train_configs) >= 9
    for path in train_configs:
        finetune = yaml.safe_load(path.read_text()).get("stage") == "finetune"  # these need init_from
        overrides = ["init_from=x.ckpt"] if finetune else []
        load_train_config(path, overrides)


def test_batches_never_mix_clips_and_stills(tmp_path):
    from inputs.items import frame_count
    from training.data import BucketBatchSampler

    class Fake:
        def __init__(self, samples):
            self.bench = type("B", (), {"samples": samples})()
            self.view_sets = None
            self.epoch = 0

        def set_epoch(self, epoch):
            self.epoch = epoch

        def __len__(self):
            return len(self.bench.samples)

    from bench.format import load_benchmark
    stills = load_benchmark(make_tiny_benchmark(tmp_path / "a", n_scenes=3)).samples
    clips = load_benchmark(make_tiny_benchmark(tmp_path / "b", n_scenes=2, n_frames=3)).samples
    data = Fake(stills + clips)
    sampler = BucketBatchSampler(data, batch_size=5, seed=0)
    sampler.set_epoch(1)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(data)))
    assert all(len({frame_count(data.bench.samples[i]) for i in b}) == 1 for b in batches)
    assert data.epoch == 1 and list(sampler) == batches  # same epoch, same batches
    sampler.set_epoch(2)
    assert list(sampler) != batches
