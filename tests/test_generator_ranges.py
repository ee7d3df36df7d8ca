"""The generator takes every scene inside its documented ranges and refuses, at load time and in
one line, every config outside them or that cannot be satisfied."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest
import torch

from bench.__main__ import main as bench_main
from common.config import ConfigError, load_config
from bench.synth import generate as gen
from bench.synth.check import check
from bench.synth.config import SVS_TASKS, SynthConfig
from bench.synth.generate import SceneError, generate
from bench.synth.scene import CROWD_OBJECT_ID0, OBJECT_ID0, sample_scene
from bench.synth.tasks import TASKS
from bench.synth.tasks_common import count_domain

TINY = ["render.width=40", "render.height=40", "tasks.per_scene=1", "temporal.per_scene=1", "temporal.frames=7",
        "workers=1"]


@pytest.mark.parametrize("override,words", [
    (["scene.max_persons=17"], "scene.max_persons: 17 is out of range; allowed: [1, 16]"),
    (["scene.min_persons=0"], "scene.min_persons: 0 is out of range; allowed: [1, 16]"),
    (["temporal.max_persons=13"], "temporal.max_persons: 13 is out of range; allowed: [1, 12] (each person of a "
                                  "temporal scene wears a shirt colour of their own and the palette has 12)"),
    (["scene.min_persons=9"], "scene.min_persons (9) must not exceed scene.max_persons (8)"),
    (["scene.min_cameras=7"], "scene.min_cameras (7) must not exceed scene.max_cameras (6)"),
    (["temporal.min_persons=9", "temporal.max_persons=8"],
     "temporal.min_persons (9) must not exceed temporal.max_persons (8)"),
    (["scene.min_cameras=0"], "scene.min_cameras: 0 is out of range; allowed: [2, 12]"),
    (["temporal.cameras=0"], "temporal.cameras: 0 is out of range; allowed: [2, 12]"),
    (["scene.max_cameras=13"], "scene.max_cameras: 13 is out of range; allowed: [2, 12]"),
    (["scene.min_cameras=2", "scene.max_cameras=3"],
     "scene.max_cameras (3) is too few for an MVN question: 2 resolving view(s) plus tasks.mvn_extra_views (2)"),
    (["temporal.n_scenes=1", "temporal.cameras=3"],
     "temporal.cameras (3) is too few for a temporal question: 2 resolving view(s) plus tasks.mvn_extra_views (2)"),
    (["camera.min_radius=1.5"], "camera.min_radius (1.5) must exceed scene.scene_radius (2.0)"),
    (["camera.min_elevation=0"], "camera.min_elevation: 0.0 is out of range; allowed: > 0"),
])
def test_bad_config_is_one_line_and_exit_2(override, words, capsys, tmp_path):
    with pytest.raises(ConfigError, match="^" + re.escape(words)):
        load_config(SynthConfig, None, override)
    rc = bench_main(["generate", "--out", str(tmp_path / "b"), *override])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(f"config error: {words}")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "b").exists()


def test_fewer_cameras_pass_with_fewer_extra_views():
    cfg = load_config(SynthConfig, None, ["scene.min_cameras=2", "scene.max_cameras=2", "tasks.mvn_extra_views=0",
                                          "tasks.svs_extra_views=1", "temporal.n_scenes=1", "temporal.cameras=2"])
    assert cfg.scene.max_cameras == 2
    # no spatial scenes, only SVS tasks: the MVN requirement does not apply
    load_config(SynthConfig, None, ["n_scenes=0", "scene.min_cameras=2", "scene.max_cameras=2"])
    load_config(SynthConfig, None, ["scene.min_cameras=2", "scene.max_cameras=2", "tasks.svs_extra_views=1",
                                    "tasks.enabled=[attribute,relation]"])


def test_svs_task_list_matches_the_registry():
    assert SVS_TASKS == {name for name, t in TASKS.items() if t.subset == "SVS"}


@pytest.mark.parametrize("axis,override", [
    ("spatial", ["scene.min_persons=16", "scene.max_persons=16", "scene.min_cameras=12", "scene.max_cameras=12"]),
    ("spatial", ["scene.min_persons=1", "scene.max_persons=1", "scene.min_cameras=2", "scene.max_cameras=2",
                 "tasks.mvn_extra_views=0", "tasks.svs_extra_views=1"]),
    ("spatial", ["camera.min_fov=1", "camera.max_fov=1", "camera.min_radius=40", "camera.max_radius=40"]),
    ("spatial", ["camera.min_fov=179", "camera.max_fov=179", "camera.min_radius=2.01", "camera.max_radius=2.01",
                 "camera.min_elevation=0.01", "camera.max_elevation=0.01"]),
    ("temporal", ["temporal.min_persons=12", "temporal.max_persons=12", "temporal.cameras=12"]),
    ("temporal", ["temporal.min_persons=1", "temporal.max_persons=1", "temporal.cameras=2", "tasks.mvn_extra_views=0",
                  "temporal.divide=false"]),
])
def test_scenes_at_the_range_corners_build(axis, override, tmp_path):
    cfg = load_config(SynthConfig, None, TINY + override)
    for idx in range(2 if axis == "spatial" else 1):
        out = gen._scene_job((cfg, idx, "test", str(tmp_path), axis))
        assert out["sid"].startswith("t" if axis == "temporal" else "s")


def test_person_and_object_ids_never_meet():
    for n, base in ((8, OBJECT_ID0), (10, OBJECT_ID0), (11, CROWD_OBJECT_ID0), (16, CROWD_OBJECT_ID0)):
        cfg = load_config(SynthConfig, None, [f"scene.min_persons={n}", f"scene.max_persons={n}",
                                              "scene.object_weights=[0,0,0,0,0,1]"])
        scene = sample_scene(np.random.default_rng([0, 2, n]), cfg, "s")
        assert [o.oid for o in scene.objects] == list(range(base, base + len(scene.objects)))
        assert max(p.pid for p in scene.persons) < base
        assert all(c["object"] in {o.oid for o in scene.objects} for c in scene.contacts.values())


def test_count_domain_grows_only_for_crowds():
    assert count_domain(SynthConfig()) == [str(k) for k in range(13)]  # the default benchmark's bytes
    assert count_domain(load_config(SynthConfig, None, ["scene.max_persons=16"]))[-1] == "16"


def test_a_12_person_and_a_10_camera_scene_verify(tmp_path):
    cfg = load_config(SynthConfig, None, [
        "n_scenes=2", "split_fractions=[0,0,1]", "render.width=64", "render.height=64", "workers=1", "seed=3",
        "scene.min_persons=12", "scene.max_persons=12", "scene.min_cameras=10", "scene.max_cameras=10"])
    summary = generate(cfg, tmp_path / "b", progress=False)
    assert summary["splits"]["test"]["questions"] > 0
    assert not (tmp_path / "b" / "train").exists()  # a split with no scene gets no folder
    report = check(tmp_path / "b", sheet=tmp_path / "sheet.png")
    assert report["valid"] and report["svi_rate"] == 1.0 and report["cvr_rate"] == 1.0
    assert report["n_by_split"] == {"test": summary["splits"]["test"]["questions"]}


def _boom(*args, **kwargs):
    raise KeyError(11)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failing_scene_is_one_line_naming_seed_and_step(workers, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(gen, "observe_view", _boom)
    cfg = load_config(SynthConfig, None, TINY + ["n_scenes=2", f"workers={workers}", "seed=5"])
    with pytest.raises(SceneError) as info:
        generate(cfg, tmp_path / "b", progress=False)
    msg = str(info.value)
    assert msg.startswith("spatial scene s00000") and "(seed [5, 2, " in msg
    assert msg.endswith("failed while observing the views: KeyError: 11") and "\n" not in msg
    assert not (tmp_path / "b").exists() and not list(tmp_path.glob(".b.tmp-*"))
    rc = bench_main(["generate", "--out", str(tmp_path / "c"), "--quiet", *TINY, "n_scenes=2", f"workers={workers}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and "failed while observing the views: KeyError: 11" in err[0]
    if workers == 1:  # --debug: the scene's own exception, raised in this process
        with pytest.raises(KeyError):
            bench_main(["generate", "--out", str(tmp_path / "d"), "--quiet", "--debug", *TINY, "n_scenes=2"])


def test_one_worker_runs_in_process_and_restores_threads(monkeypatch, tmp_path):
    pids = []
    real = gen.observe_view

    def spy(*args, **kwargs):
        pids.append((os.getpid(), torch.get_num_threads()))
        return real(*args, **kwargs)

    monkeypatch.setattr(gen, "observe_view", spy)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        generate(load_config(SynthConfig, None, TINY + ["n_scenes=1"]), tmp_path / "b", progress=False)
        assert pids and all(p == (os.getpid(), 1) for p in pids)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
