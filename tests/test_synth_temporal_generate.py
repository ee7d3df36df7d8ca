"""End-to-end temporal generation on a tiny config: multi-frame views validate, check reports
both axes, bytes are reproducible, and a rendered walking person moves between frames."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from common.config import load_config
from bench.format import load_benchmark
from bench.synth.check import check
from bench.synth.config import SynthConfig
from bench.synth.generate import build_temporal_scene, generate

TINY = ["n_scenes=4", "temporal.n_scenes=3", "render.width=64", "render.height=64", "workers=2",
        "tasks.per_scene=2", "split_fractions=[0.34,0.33,0.33]"]


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth_t") / "bench"
    generate(load_config(SynthConfig, None, TINY), out, progress=False)
    return out


def test_temporal_samples_have_frames_in_time_order(tiny: Path, tmp_path: Path):
    samples = [s for split in ("train", "val", "test") if (tiny / split / "benchmark.json").exists()
               for s in load_benchmark(tiny / split).samples]
    temporal = [s for s in samples if s.axis == "temporal"]
    assert temporal, "no temporal question survived verification"
    for s in temporal:
        assert s.subset == "MVN" and s.scene.startswith("t")
        for v in s.views:
            ts = [f.t for f in v.frames]
            assert len(ts) == 8 and ts == sorted(ts) and ts[1] == 0.5
        assert all(e.t_start <= e.t_end for e in s.evidence)
        text = (s.question + " " + " ".join(s.options)).lower()
        assert "cam" not in text and "view" not in text
    report = check(tiny, out=tmp_path / "check.json")
    assert report["valid"] and report["svi_rate"] == 1.0 and report["cvr_rate"] == 1.0
    assert report["by_axis"]["temporal"]["svi_rate"] == 1.0 and report["by_axis"]["temporal"]["cvr_rate"] == 1.0
    assert "spatial" in report["by_axis"] and any(k.startswith("temporal/") for k in report["by_axis_granularity"])
    assert Path(report["contact_sheet"]).is_file()


def test_temporal_same_config_same_bytes(tiny: Path, tmp_path: Path):
    again = tmp_path / "again"
    generate(load_config(SynthConfig, None, TINY), again, progress=False)
    assert _digest(again) == _digest(tiny)


def test_walkers_move_between_frames():
    cfg = load_config(SynthConfig, None, ["render.width=48", "render.height=48"])
    scene, renders, obs, _ = build_temporal_scene(cfg, 0)
    assert len(scene.times) == 8 and all(len(r) == 8 for r in renders.values())
    moved = [p for p in scene.persons if np.hypot(*np.subtract(p.at(scene.times[-1]).xy, p.at(0.0).xy)) > 1.0]
    assert moved, "somebody should walk across the scene"
    cam = next(iter(renders))
    assert not np.array_equal(renders[cam][0].rgb, renders[cam][-1].rgb)


def test_extra_train_scenes_add_train_questions_and_keep_val_test(tiny: Path, tmp_path: Path):
    """extra_train_scenes / temporal.extra_train_scenes: new scenes, all in train; the train
    split keeps its old scenes; val and test are the same samples and the same image bytes."""
    out = tmp_path / "more"
    generate(load_config(SynthConfig, None, TINY + ["extra_train_scenes=2", "temporal.extra_train_scenes=1"]),
             out, progress=False)

    def samples(root: Path, split: str) -> list:
        return json.loads((root / split / "benchmark.json").read_text())["samples"]

    for split in ("val", "test"):
        assert samples(out, split) == samples(tiny, split)
        before, after = _digest(tiny / split / "images"), _digest(out / split / "images")
        assert after == before
    old = {s["scene"] for s in samples(tiny, "train")}
    new = {s["scene"] for s in samples(out, "train")}
    assert old <= new
    assert {"s000004", "s000005", "t000003"} & new  # the added indices come after n_scenes
    assert not {"s000004", "s000005", "t000003"} & {s["scene"] for split in ("val", "test")
                                                      for s in samples(out, split)}
    assert len(samples(out, "train")) > len(samples(tiny, "train"))
