"""Bad input to python train.py and to the crossview adapter: one line, its exit code, nothing written."""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from eval.__main__ import main as eval_main
from inputs.checkpoint import CHECKPOINT_FORMAT, OLD_MODEL_COMMIT, CheckpointError, load_entity_checkpoint
from train import main as train_main

warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")


@pytest.fixture(scope="module")
def bad_checkpoints(tmp_path_factory) -> dict[str, Path]:
    from common.config import to_dict
    from inputs.checkpoint import build_entity_model
    from model.entity_reasoner import EntityReasonerConfig
    from training.config import TrainConfig
    root = tmp_path_factory.mktemp("ckpt")
    cfg = TrainConfig()
    cfg.model = EntityReasonerConfig(width=16, heads=2)
    vocab = ["<pad>", "<unk>", "<cls>"] + [str(k) for k in range(17)]
    state = {f"model.{k}": v for k, v in build_entity_model(cfg.model, vocab).state_dict().items()}
    hp = {"config": to_dict(cfg), "vocab": vocab, "format": CHECKPOINT_FORMAT}
    name = next(k for k, v in state.items() if v.ndim == 2)
    files = {
        "bare_tensor": torch.zeros(3),
        "foreign_dict": {"weights": state},
        "old_model": {"state_dict": state, "hyper_parameters": {"config": {"model": {"fusion": {}}}}},
        "other_format": {"state_dict": state, "hyper_parameters": {**hp, "format": "something/2"}},
        "missing_key": {"state_dict": {k: v for k, v in state.items() if k != name}, "hyper_parameters": hp},
        "bad_config": {"state_dict": state, "hyper_parameters": {**hp, "config": {"model": {"no_such_field": 1}}}},
    }
    out = {}
    for kind, obj in files.items():
        out[kind] = root / f"{kind}.ckpt"
        torch.save(obj, out[kind])
    out["garbage"] = root / "garbage.ckpt"
    out["garbage"].write_bytes(b"not a zip file at all")
    return out


@pytest.mark.parametrize("kind", ["bare_tensor", "foreign_dict", "old_model", "other_format", "missing_key",
                                  "bad_config", "garbage"])
def test_a_bad_checkpoint_is_one_checkpoint_error(bad_checkpoints, kind):
    with pytest.raises(CheckpointError) as err:
        load_entity_checkpoint(bad_checkpoints[kind])
    assert str(bad_checkpoints[kind]) in str(err.value) and "\n" not in str(err.value)
    if kind == "old_model":
        assert OLD_MODEL_COMMIT in str(err.value)


@pytest.mark.parametrize("kind", ["old_model", "garbage", "foreign_dict"])
def test_eval_cli_refuses_a_bad_checkpoint_in_one_line(bad_checkpoints, kind, tiny_bench, tmp_path, capsys):
    out = tmp_path / "ev"
    code = eval_main(["run", "--model", "crossview", "--model-arg", f"ckpt={bad_checkpoints[kind]}",
                      "--bench", str(tiny_bench), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1 and str(bad_checkpoints[kind]) in err
    assert not (out / "predictions.jsonl").exists()


def _train_cli(args: list[str], tmp_path: Path, capsys) -> tuple[int, str]:
    code = train_main(args + [f"out_dir={tmp_path / 'runs'}", "run_name=x"])
    return code, capsys.readouterr().err.strip()


def test_a_removed_key_is_one_line_exit_2_and_nothing_written(tmp_path, capsys):
    code, err = _train_cli(["model.fusion.layers=2"], tmp_path, capsys)
    assert code == 2 and len(err.splitlines()) == 1 and OLD_MODEL_COMMIT in err and "model.fusion" in err
    assert not (tmp_path / "runs").exists()


def test_the_ceiling_on_a_benchmark_without_labels_is_one_line(tiny_bench, tmp_path, capsys):
    bench = tmp_path / "b"
    for split in ("train", "val", "test"):  # hand-made splits: no labels/ beside them
        (bench / split).parent.mkdir(exist_ok=True)
        (bench / split).symlink_to(tiny_bench, target_is_directory=True)
    code, err = _train_cli(["--config", "configs/ceiling.yaml", f"data.bench_dir={bench}"], tmp_path, capsys)
    assert code == 1 and len(err.splitlines()) == 1 and "labels" in err and "ceiling" in err
    assert not (tmp_path / "runs").exists()


def test_training_on_true_entities_without_train_labels_is_one_line(tiny_bench, tiny_perception, tmp_path, capsys):
    bench = tmp_path / "b"
    for split in ("train", "val", "test"):  # hand-made splits: no labels/ beside them
        (bench / split).parent.mkdir(exist_ok=True)
        (bench / split).symlink_to(tiny_bench, target_is_directory=True)
    code, err = _train_cli([f"data.bench_dir={bench}", "data.generate_config=null", "perception.train_entities=truth",
                            f"perception.folder={tiny_perception}"], tmp_path, capsys)
    assert code == 1 and len(err.splitlines()) == 1 and "train_entities=truth" in err and "labels" in err
    assert not (tmp_path / "runs").exists()


def test_a_perception_folder_without_heads_is_one_line(tmp_path, capsys):
    code, err = _train_cli([f"perception.folder={tmp_path / 'nothing'}"], tmp_path, capsys)
    assert code == 1 and len(err.splitlines()) == 1 and "perception.folder" in err
    assert not (tmp_path / "runs").exists()


def test_scoring_with_heads_other_than_the_trained_ones_is_refused(tiny_perception, tmp_path):
    """entities=model reads the heads the run was trained on; heads changed since (another hash)
    are refused in one line instead of scoring the reasoner on records it never saw."""
    from eval.adapters.crossview import CrossViewAdapter
    from eval.errors import RunError
    from inputs.checkpoint import build_entity_model
    from inputs.entity_batch import WordVocab
    from model.entity_reasoner import EntityReasonerConfig
    vocab = WordVocab.build(["how many people"])
    model = build_entity_model(EntityReasonerConfig(width=16, heads=2), vocab.itos)
    config = {"perception": {"entities": "predicted", "folder": str(tiny_perception)}}
    with pytest.raises(RunError, match="perception") as err:
        CrossViewAdapter.from_loaded(model, vocab, config, perception_sha256="0" * 64)
    assert "\n" not in str(err.value)
