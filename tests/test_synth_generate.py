"""End-to-end generation on a tiny config: splits validate, check passes, bytes are reproducible."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from common.config import ConfigError, load_config
from bench.format import load_benchmark
from bench.synth.check import check
from bench.synth.config import SynthConfig
from bench.synth.generate import generate

TINY = ["n_scenes=8", "render.width=64", "render.height=64", "workers=2", "tasks.per_scene=2"]


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "bench"
    generate(load_config(SynthConfig, None, TINY), out, progress=False)
    return out


def test_splits_validate_and_check_passes(tiny: Path, tmp_path: Path):
    n = 0
    for split in ("train", "val", "test"):
        if (tiny / split / "benchmark.json").exists():
            n += len(load_benchmark(tiny / split))
    assert n > 0
    report = check(tiny, out=tmp_path / "check.json")
    assert report["valid"] and report["svi_rate"] == 1.0 and report["cvr_rate"] == 1.0
    assert Path(report["contact_sheet"]).is_file()
    for key in ("letter_hist", "chance", "blind_acc", "single_view_oracle_acc_mvn", "persons_per_image",
                "occlusion_rate", "n_questions", "by_task"):
        assert key in report


def test_questions_never_name_a_view(tiny: Path):
    for split in ("train", "val", "test"):
        f = tiny / split / "benchmark.json"
        if not f.exists():
            continue
        for s in json.loads(f.read_text())["samples"]:
            text = (s["question"] + " " + " ".join(s["options"])).lower()
            assert "cam" not in text and "first" not in text and "view" not in text.replace("review", "")
            labels = [(m["view_id"], m["label"]) for m in s["marks"]]
            assert len({l for _, l in labels}) == len(labels)  # labels unique across the question's views
            assert set(s["gt_views"]).isdisjoint(s["extra_views"])


def test_same_config_same_bytes(tiny: Path, tmp_path: Path):
    again = tmp_path / "again"
    generate(load_config(SynthConfig, None, TINY), again, progress=False)
    assert _digest(again) == _digest(tiny)


def test_overrides_are_type_checked():
    with pytest.raises(ConfigError):
        load_config(SynthConfig, None, ["seed=seven"])
    with pytest.raises(ConfigError):
        load_config(SynthConfig, None, ["no_such_key=1"])
    assert load_config(SynthConfig, "configs/bench/default.yaml", ["seed=7"]).seed == 7


def test_cvbench_mode_has_none_of_the_above_last(tmp_path: Path):
    cfg = load_config(SynthConfig, None, ["n_scenes=6", "render.width=48", "render.height=48", "workers=1",
                                          "options.mode=cvbench", "options.none_share=0.3"])
    generate(cfg, tmp_path / "b", progress=False)
    samples = [s for split in ("train", "val", "test") if (tmp_path / "b" / split).exists()
               for s in load_benchmark(tmp_path / "b" / split).samples]
    assert samples and all(len(s.options) == 5 and s.options[-1] == "None of the above" for s in samples)
    report = check(tmp_path / "b")
    assert report["svi_rate"] == 1.0 and report["cvr_rate"] == 1.0


def test_train_selection_verified_keeps_every_train_question(tiny: Path, tmp_path: Path):
    """train_selection=verified: train keeps every verified question (a superset of the
    balanced selection); val and test are the same samples; the check still passes."""
    out = tmp_path / "verified"
    generate(load_config(SynthConfig, None, TINY + ["train_selection=verified"]), out, progress=False)

    def questions(root: Path, split: str) -> list:
        f = root / split / "benchmark.json"
        return json.loads(f.read_text())["samples"] if f.exists() else []

    # (a temporal question may be kept with another of its option sets when balanced)
    key = lambda s: (s["scene"], s["task"], s["question"], tuple(m["entity"] for m in s["marks"]))  # noqa: E731
    balanced, verified = questions(tiny, "train"), questions(out, "train")
    assert len(verified) > len(balanced)
    assert {key(s) for s in balanced} <= {key(s) for s in verified}
    for split in ("val", "test"):
        assert questions(out, split) == questions(tiny, split)
    report = check(out)
    assert report["valid"] and report["svi_rate"] == 1.0 and report["cvr_rate"] == 1.0


def test_train_selection_is_checked():
    with pytest.raises(ConfigError, match="train_selection"):
        load_config(SynthConfig, None, ["train_selection=all"])


def test_a_resumed_generation_gives_the_same_bytes(tiny: Path, tmp_path: Path, monkeypatch):
    """A resumable run that stops at a scene keeps the scenes it finished; the next run builds
    only the rest, and the benchmark has the bytes of one uninterrupted run."""
    import bench.synth.generate as gen

    cfg = load_config(SynthConfig, None, TINY)
    out = tmp_path / "bench"
    steps = gen._scene_steps

    def failing(cfg, idx, split, root, axis, step):
        if axis == "spatial" and idx == 5:
            raise RuntimeError("stopped here")
        return steps(cfg, idx, split, root, axis, step)

    monkeypatch.setattr(gen, "_scene_steps", failing)  # the forked workers see it too
    with pytest.raises(gen.SceneError, match="s000005"):
        generate(cfg, out, progress=False, resume=True)
    partial = gen.partial_dir(out)
    finished = {p.stem for p in (partial / "jobs").glob("*.json")}
    assert not out.exists() and "spatial-000000" in finished and "spatial-000005" not in finished

    def once(cfg, idx, split, root, axis, step):
        assert f"{axis}-{idx:06d}" not in finished, "a finished scene was built again"
        return steps(cfg, idx, split, root, axis, step)

    monkeypatch.setattr(gen, "_scene_steps", once)
    generate(cfg, out, progress=False, resume=True)
    assert not partial.exists()
    assert _digest(out) == _digest(tiny)


def test_a_partial_generation_of_another_config_is_refused(tmp_path: Path):
    import bench.synth.generate as gen

    out = tmp_path / "bench"
    gen._open_partial(gen.partial_dir(out), load_config(SynthConfig, None, TINY))
    with pytest.raises(FileExistsError, match="another config"):
        generate(load_config(SynthConfig, None, TINY + ["seed=3"]), out, progress=False, resume=True)
