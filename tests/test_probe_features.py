"""scripts/probe_features.py: labels come from the generator's truth, and the probes learn
when the features carry the answer (so a chance-level figure is the features' fault)."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch

from common.config import load_config, save_config
from bench.format import load_benchmark
from bench.synth.config import SynthConfig
from bench.synth.generate import generate
from model.config import tiny_model_config
from training.config import TrainConfig

warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")

import scripts.probe_features as probe  # noqa: E402


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "bench"
    tasks = '["count_in_view","dedup_count","attribute","identity_match"]'
    generate(load_config(SynthConfig, None, ["n_scenes=12", "render.width=64", "render.height=64", "workers=1",
                                             "tasks.per_scene=2", f"tasks.enabled={tasks}",
                                             "temporal.n_scenes=0"]),
             out, progress=False)
    return out


def test_count_probe_learns_a_count_the_tokens_carry():
    torch.manual_seed(0)
    n, cells, dim = 600, 16, 8
    counts = torch.randint(0, 6, (n,))
    tokens = torch.randn(n, cells, dim) * 0.1
    for i, k in enumerate(counts.tolist()):  # k "person" cells carry a marker feature
        tokens[i, torch.randperm(cells)[:k], 0] += 3.0
    res = probe.probe_count(tokens[:500], counts[:500], tokens[500:], counts[500:], epochs=40, seed=0)
    assert res["val_acc"] > 90 and res["val_within_one"] > 98


def test_labels_follow_the_generator_truth(synth: Path):
    bench = load_benchmark(synth / "train", check_images=False)
    labels = probe.count_labels(bench)
    assert labels, "the tiny benchmark has no count questions"
    for s in bench.samples:
        if s.task != "count_in_view":
            continue
        for view in s.views:
            seen = s.meta["observations"][view.view_id]["seen"]
            for frame in view.frames:
                assert labels[str(bench.image_path(frame.image).resolve())] == min(seen, probe.MAX_COUNT)
    for path, box, colour in probe.shirt_labels(bench):
        assert Path(path).is_file() and len(box) == 4 and isinstance(colour, str)


def test_script_writes_its_figures(synth: Path, tmp_path: Path):
    cfg = TrainConfig()
    cfg.model = tiny_model_config()
    cfg.data.bench_dir = str(synth)
    cfg.data.generate_config = None
    cfg.data.cache_dir = str(tmp_path / "cache")
    save_config(cfg, tmp_path / "tiny.yaml")
    out = tmp_path / "probe.json"
    assert probe.main(["--config", str(tmp_path / "tiny.yaml"), "--out", str(out), "--epochs", "2",
                       "--held-out", "train"]) == 0
    result = json.loads(out.read_text())
    assert result["count"]["n_train"] > 0
    for key in ("majority_val_acc", "all"):
        assert key in result["count"]
    assert {"train_acc", "val_acc", "val_within_one"} <= set(result["count"]["all"])
    assert result["count_every_image"]["n_train"] > result["count"]["n_train"]  # every image, not only counted ones
    assert "val_within_one" in result["count_every_image"]["all"]


def test_posture_labels_come_from_the_rebuilt_scene(synth: Path):
    import numpy as np

    from bench.synth.captions import POSTURES, posture_of
    from bench.synth.scene import sample_scene
    bench = load_benchmark(synth / "train", check_images=False)
    rows = probe.posture_labels(synth / "train" / "benchmark.json", bench)
    assert rows and all(Path(p).is_file() and r in POSTURES for p, _, r in rows)
    # the rebuilt scene is the one the images show: its people match the marks' entities
    s = next(s for s in bench.samples if s.marks and s.marks[0].entity)
    cfg = load_config(SynthConfig, None, ["n_scenes=12", "render.width=64", "render.height=64"])
    scene = sample_scene(np.random.default_rng([cfg.seed, 2, int(s.scene[1:])]), cfg, s.scene)
    frames = {(v.view_id, f.t): f.image for v in s.views for f in v.frames}
    key = (str(bench.image_path(frames[(s.marks[0].view_id, s.marks[0].t)]).resolve()), tuple(s.marks[0].box))
    assert dict(((p, tuple(b)), r) for p, b, r in rows)[key] == posture_of(scene.person(s.marks[0].entity).pose)


def test_frame_state_labels_take_each_seen_frame_of_the_asked_person(tmp_path: Path):
    from types import SimpleNamespace as NS
    frames = [NS(image=f"images/t0/cam{v}_f{f:02d}.png") for v in range(2) for f in range(3)]
    views = [NS(view_id="cam0", frames=frames[:3]), NS(view_id="cam1", frames=frames[3:])]
    obs = {"cam0": {"obs": ["0", "1", None]}, "cam1": {"obs": [None, None, "0"]}}
    samples = [NS(task="repetition_count", views=views, meta={"observations": obs}),
               NS(task="trajectory", views=views, meta={"observations": {"cam0": {"obs": ["1", "1", "1"]}}})]
    bench = NS(samples=samples, image_path=lambda rel: tmp_path / rel)
    labels = probe.frame_state_labels(bench, "repetition_count")
    path = lambda v, f: str((tmp_path / f"images/t0/cam{v}_f{f:02d}.png").resolve())  # noqa: E731
    assert labels == {path(0, 0): 0, path(0, 1): 1, path(1, 2): 0}
    assert probe.frame_state_labels(bench, "limb_repetition_count") == {}


def test_person_state_labels_take_the_asked_persons_box_where_the_state_is_recorded(tmp_path: Path):
    from types import SimpleNamespace as NS
    frames = [NS(image=f"images/t0/cam{v}_f{f:02d}.png") for v in range(2) for f in range(3)]
    views = [NS(view_id="cam0", frames=frames[:3]), NS(view_id="cam1", frames=frames[3:])]
    obs = {"cam0": {"obs": ["0", "1", None]}, "cam1": {"obs": [None, "1", "0"]}}
    boxes = {"cam0": [[1, 2, 3, 4], None, [5, 6, 7, 8]], "cam1": [None, [0, 0, 9, 9], [2, 2, 8, 8]]}
    sample = NS(task="repetition_count", views=views, meta={"observations": obs, "person_boxes": boxes})
    bench = NS(samples=[sample, sample, NS(task="repetition_count", views=views, meta={"observations": obs})],
               image_path=lambda rel: tmp_path / rel)
    path = lambda v, f: str((tmp_path / f"images/t0/cam{v}_f{f:02d}.png").resolve())  # noqa: E731
    # a recorded state with no pixels (cam0 f1), or pixels with no state (cam0 f2), gives no row;
    # the repeated sample and the sample without boxes add none
    assert probe.person_state_labels(bench, "repetition_count") == [
        (path(0, 0), (1, 2, 3, 4), 0), (path(1, 1), (0, 0, 9, 9), 1), (path(1, 2), (2, 2, 8, 8), 0)]
    assert probe.person_state_labels(bench, "limb_repetition_count") == []


def test_shirt_mark_labels_cover_every_spatial_mark_with_the_scene_shirt(synth: Path):
    import numpy as np

    from bench.synth.scene import sample_scene
    bench = load_benchmark(synth / "train", check_images=False)
    rows = probe.shirt_mark_labels(synth / "train" / "benchmark.json", bench)
    postures = probe.posture_labels(synth / "train" / "benchmark.json", bench)
    assert [(p, b) for p, b, _ in rows] == [(p, b) for p, b, _ in postures]  # the same marks
    assert len(rows) >= len(probe.shirt_labels(bench))
    cfg = load_config(SynthConfig, None, ["n_scenes=12", "render.width=64", "render.height=64"])
    by_key = {(p, tuple(b)): c for p, b, c in rows}
    for s in bench.samples:
        if not s.marks or not s.marks[0].entity:
            continue
        scene = sample_scene(np.random.default_rng([cfg.seed, 2, int(s.scene[1:])]), cfg, s.scene)
        frames = {(v.view_id, f.t): f.image for v in s.views for f in v.frames}
        m = s.marks[0]
        key = (str(bench.image_path(frames[(m.view_id, m.t)]).resolve()), tuple(m.box))
        assert by_key[key] == scene.person(m.entity).shirt


def test_count_every_image_labels_every_image_with_the_view_record(synth: Path, tmp_path: Path):
    bench = load_benchmark(synth / "train", check_images=False)
    every = probe.count_every_image_labels(bench)
    images = {str(bench.image_path(f.image).resolve()) for s in bench.samples for v in s.views for f in v.frames}
    assert set(every) == images
    counted = probe.count_labels(bench)
    assert counted and all(every[p] == n for p, n in counted.items())  # what count_in_view asks for

    from types import SimpleNamespace as NS  # clip frames: keyed by stem, the mark suffix dropped
    views = [NS(view_id="cam0", frames=[NS(image="images/t0/cam0_f00.png"), NS(image="images/t0/cam0_f01_m0a1b.png")])]
    stats = {"cam0_f00": [2, 3, 1], "cam0_f01": [9, 9, 0]}
    clip = NS(samples=[NS(id="t0-q0", views=views, meta={"view_stats": stats})], image_path=lambda rel: tmp_path / rel)
    assert probe.count_every_image_labels(clip) == {str((tmp_path / "images/t0/cam0_f00.png").resolve()): 2,
                                                    str((tmp_path / "images/t0/cam0_f01_m0a1b.png").resolve()): 7}
    views[0].frames.append(NS(image="images/t0/cam0_f02.png"))
    with pytest.raises(ValueError, match="t0-q0.*cam0_f02"):
        probe.count_every_image_labels(clip)
