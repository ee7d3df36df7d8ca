"""Run folders: two runs started in the same second do not share one (training/run.py)."""
from __future__ import annotations

from training.config import TrainConfig
from training.run import RUN_DIR_ENV, claim_run_dir


def test_an_automatic_run_name_is_claimed_once(tmp_path, monkeypatch):
    monkeypatch.delenv(RUN_DIR_ENV, raising=False)
    cfg = TrainConfig()
    path = tmp_path / "runs" / "default-20261203-125539"
    first = claim_run_dir(path, cfg)
    second = claim_run_dir(path, cfg)
    third = claim_run_dir(path, cfg)
    assert first == path and second.name == path.name + "-2" and third.name == path.name + "-3"
    assert all(p.is_dir() for p in (first, second, third))


def test_named_resumed_and_inherited_folders_are_used_as_they_are(tmp_path, monkeypatch):
    monkeypatch.delenv(RUN_DIR_ENV, raising=False)
    path = tmp_path / "runs" / "x"
    path.mkdir(parents=True)
    assert claim_run_dir(path, TrainConfig(), resumed=True) == path
    named = TrainConfig()
    named.run_name = "x"
    assert claim_run_dir(path, named) == path
    monkeypatch.setenv(RUN_DIR_ENV, str(path))
    assert claim_run_dir(path, TrainConfig()) == path
