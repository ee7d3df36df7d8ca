"""A bad checkpoint, wherever it is given, ends in one line naming the file and exit code 1;
a refused init_from leaves no run folder behind."""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from common.config import to_dict
from eval.__main__ import main as eval_main
from inputs.checkpoint import load_model
from model.config import tiny_model_config
from training.checkpoint import CheckpointError, load_module_from_checkpoint
from training.config import TrainConfig

warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")


def _tiny_config() -> dict:
    cfg = TrainConfig()
    cfg.model = tiny_model_config()
    cfg.model.lm.vocab_size = 49408
    return to_dict(cfg)


@pytest.fixture(scope="module")
def bad_checkpoints(tmp_path_factory) -> dict[str, Path]:
    from training.module import CrossViewModule
    root = tmp_path_factory.mktemp("ckpt")
    config = _tiny_config()
    state = CrossViewModule(config).state_dict()
    name = next(k for k, v in state.items() if v.ndim == 2)
    missing = {k: v for k, v in state.items() if k != name}
    rows, cols = state[name].shape
    misshaped = {**state, name: torch.zeros(rows + 1, cols)}
    files = {
        "bare_tensor": torch.zeros(3),
        "missing_key": {"state_dict": missing, "hyper_parameters": {"config": config}},
        "misshaped_key": {"state_dict": misshaped, "hyper_parameters": {"config": config}},
        "bad_config": {"state_dict": state, "hyper_parameters": {"config": {"model": {"no_such_field": 1}}}},
    }
    out = {}
    for kind, obj in files.items():
        out[kind] = root / f"{kind}.ckpt"
        torch.save(obj, out[kind])
    out["garbage"] = root / "garbage.ckpt"
    out["garbage"].write_bytes(b"not a zip file at all")
    return out


@pytest.mark.parametrize("loader", [load_module_from_checkpoint, load_model], ids=["lightning_module", "model_only"])
@pytest.mark.parametrize("kind", ["bare_tensor", "missing_key", "misshaped_key", "bad_config", "garbage"])
def test_loading_a_bad_checkpoint_is_one_checkpoint_error(bad_checkpoints, kind, loader):
    with pytest.raises(CheckpointError) as err:
        loader(bad_checkpoints[kind])
    assert str(bad_checkpoints[kind]) in str(err.value) and "\n" not in str(err.value)


def test_the_model_only_loader_gives_the_modules_weights(tmp_path):
    """inputs.checkpoint.load_model (no Lightning) rebuilds the same network as the LightningModule."""
    from training.module import CrossViewModule
    config = _tiny_config()
    module = CrossViewModule(config)
    torch.save({"state_dict": module.state_dict(), "hyper_parameters": {"config": config}}, tmp_path / "ok.ckpt")
    model, model_cfg = load_model(tmp_path / "ok.ckpt")
    assert model_cfg == module.cfg.model and not model.training
    theirs = module.model.state_dict()
    assert model.state_dict().keys() == theirs.keys()
    assert all(torch.equal(v, theirs[k]) for k, v in model.state_dict().items())


@pytest.mark.parametrize("kind", ["bare_tensor", "misshaped_key"])
def test_eval_with_a_bad_checkpoint_is_one_line_exit_1(bad_checkpoints, tiny_bench, tmp_path, capsys, kind):
    code = eval_main(["run", "--bench", str(tiny_bench), "--model", "crossview", "--model-arg",
                      f"ckpt={bad_checkpoints[kind]}", "--out", str(tmp_path / "o"), "--no-progress"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 1 and len(err) == 1 and str(bad_checkpoints[kind]) in err[0], err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("kind", ["bare_tensor", "garbage"])
def test_train_with_a_bad_init_from_is_one_line_exit_1_and_no_run_folder(bad_checkpoints, tmp_path, capsys, kind):
    from train import main as train_main
    code = train_main(["--config", "configs/default.yaml", f"init_from={bad_checkpoints[kind]}",
                       f"out_dir={tmp_path / 'runs'}", "run_name=x", f"data.bench_dir={tmp_path / 'nobench'}",
                       "data.generate_config=null"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 1 and len(err) == 1 and str(bad_checkpoints[kind]) in err[0], err
    assert not (tmp_path / "runs" / "x").exists()
