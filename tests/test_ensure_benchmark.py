"""python train.py generates a missing benchmark through the generator function itself
(bench.synth.generate.generate), not through the bench command line."""
from __future__ import annotations

from pathlib import Path

import pytest

from common.config import ConfigError
from training.config import TrainConfig
from training.datamodule import ensure_benchmark


def _cfg(tmp_path: Path, generate_config: str | None) -> TrainConfig:
    cfg = TrainConfig()
    cfg.data.bench_dir = str(tmp_path / "bench")
    cfg.data.generate_config = generate_config
    return cfg


def test_a_missing_benchmark_is_generated_by_the_generator_function(tmp_path, monkeypatch):
    import bench.__main__
    import bench.synth.generate
    calls = []

    def fake_generate(cfg, out, overwrite=False, progress=True):
        calls.append((cfg, Path(out), overwrite))
        for split in ("train", "val", "test"):
            (Path(out) / split).mkdir(parents=True)
            (Path(out) / split / "benchmark.json").write_text('{"samples": []}')
        return {"n_questions": 0, "unique_images": 0, "seconds": 0.0}

    monkeypatch.setattr(bench.synth.generate, "generate", fake_generate)
    monkeypatch.setattr(bench.__main__, "main", lambda *a, **k: pytest.fail("the bench CLI was called"))
    cfg = _cfg(tmp_path, "configs/bench/default.yaml")
    assert ensure_benchmark(cfg) == tmp_path / "bench"
    [(synth_cfg, out, overwrite)] = calls
    assert out == tmp_path / "bench" and not overwrite and synth_cfg.name
    assert ensure_benchmark(cfg) == tmp_path / "bench" and len(calls) == 1  # present now: not generated again


def test_generation_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="data.generate_config is empty"):
        ensure_benchmark(_cfg(tmp_path, None))
    with pytest.raises(ConfigError, match="no_such.yaml"):
        ensure_benchmark(_cfg(tmp_path, str(tmp_path / "no_such.yaml")))
    (tmp_path / "bench").mkdir()
    (tmp_path / "tiny.yaml").write_text("n_scenes: 1\n")
    with pytest.raises(FileExistsError, match="exists but lacks a train/val/test split"):
        ensure_benchmark(_cfg(tmp_path, str(tmp_path / "tiny.yaml")))
