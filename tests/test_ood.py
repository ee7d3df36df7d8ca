"""``python -m eval ood``: OOD splits generated once and reused, scored beside in-distribution."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from common.config import load_config
from bench.synth.config import SynthConfig
from bench.synth.generate import generate
from eval.__main__ import main as eval_main
from eval.metrics import Unit
from eval.ood import IN_DIST, OOD_CONFIGS, ood_table, parse_splits, render_markdown

TINY = ["n_scenes=3", "temporal.n_scenes=0", "render.width=48", "render.height=48"]


@pytest.fixture(scope="module")
def id_bench(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ood") / "id"
    generate(load_config(SynthConfig, None, TINY + ["n_scenes=4", "workers=1"]), root, progress=False)
    return root


def _args(id_bench: Path, tmp: Path, *more: str) -> list[str]:
    overrides = [x for o in TINY for x in ("--bench-override", o)]
    return ["ood", "--id-bench", str(id_bench), "--data", str(tmp / "ood"), "--out", str(tmp / "runs"),
            "--workers", "1", "--n-boot", "50", "--no-progress", *overrides, *more]


@pytest.mark.parametrize("name", list(OOD_CONFIGS))
def test_the_ood_configs_are_test_only_and_of_their_own_seed(name):
    cfg = load_config(SynthConfig, OOD_CONFIGS[name])
    default = load_config(SynthConfig, "configs/bench/default.yaml")
    assert cfg.split_fractions == [0.0, 0.0, 1.0] and cfg.seed != default.seed
    assert len({load_config(SynthConfig, c).seed for c in OOD_CONFIGS.values()}) == len(OOD_CONFIGS)
    if name == "crowd":
        assert (cfg.scene.min_persons, cfg.scene.max_persons) == (10, 14)
    if name == "cameras":
        assert (cfg.scene.min_cameras, cfg.scene.max_cameras) == (8, 10) and cfg.temporal.cameras >= 8
        assert cfg.camera.min_radius > default.camera.max_radius
    if name == "fov":
        assert cfg.camera.min_fov > default.camera.max_fov and cfg.temporal.camera.min_fov > default.temporal.camera.max_fov


def test_ood_scores_each_split_beside_in_distribution_and_reuses_them(id_bench, tmp_path, capsys, monkeypatch):
    assert eval_main(_args(id_bench, tmp_path, "--model", "oracle", "--splits", "crowd")) == 0
    out = capsys.readouterr().out
    assert "| metric | in-dist | crowd | Δ |" in out and "MVN +0" in out
    table = json.loads((tmp_path / "runs" / "ood.json").read_text())
    assert table["splits"] == [IN_DIST, "crowd"]
    overall = next(r for r in table["rows"] if r["metric"] == "overall")["cells"]
    assert overall[IN_DIST]["acc"] == 100.0 and overall["crowd"]["acc"] == 100.0 and overall["crowd"]["diff"] == 0.0
    stored = json.loads((tmp_path / "ood" / "crowd" / "test" / "benchmark.json").read_text())
    assert stored["config"]["seed"] == 1001 and stored["config"]["scene"]["min_persons"] == 10
    # a second call reuses the split and the finished runs: nothing is generated again
    import bench.synth.generate as gen
    monkeypatch.setattr(gen, "generate", lambda *a, **k: pytest.fail("generated again"))
    assert eval_main(_args(id_bench, tmp_path, "--model", "oracle", "--splits", "crowd")) == 0


def test_a_split_from_another_config_is_refused(id_bench, tmp_path, capsys):
    assert eval_main(_args(id_bench, tmp_path, "--model", "random", "--splits", "fov")) == 0
    capsys.readouterr()
    rc = eval_main(_args(id_bench, tmp_path, "--model", "random", "--splits", "fov", "--bench-override", "seed=77"))
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and "generated from another config" in err[0] and "seed" in err[0]


def test_a_split_sharing_the_in_distribution_seed_is_refused(id_bench, tmp_path, capsys):
    config = tmp_path / "same_seed.yaml"
    config.write_text("seed: 0\nsplit_fractions: [0.0, 0.0, 1.0]\n")
    rc = eval_main(_args(id_bench, tmp_path, "--model", "random", "--splits", f"mine={config}"))
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and "seed 0 is also the seed of" in err[0]


@pytest.mark.parametrize("more,words", [
    (["--splits", "nowhere", "--model", "random"], "unknown split"),
    (["--model", "random", "--ckpt", "x.ckpt"], "not both"),
    (["--ckpt", "missing/best.ckpt"], "--ckpt missing/best.ckpt: not found"),
    (["--model", "random", "--bench-override", "scene.max_persons=17"], "scene.max_persons: 17 is out of range"),
])
def test_bad_arguments_are_one_line_each_and_exit_2(id_bench, tmp_path, capsys, more, words):
    rc = eval_main(_args(id_bench, tmp_path, *more))
    err = capsys.readouterr().err
    assert rc == 2 and words in err and "Traceback" not in err


def test_parse_splits():
    assert parse_splits("crowd, fov") == ({"crowd": OOD_CONFIGS["crowd"], "fov": OOD_CONFIGS["fov"]}, [])
    assert parse_splits("x=a.yaml")[0] == {"x": "a.yaml"}
    assert parse_splits("crowd,crowd")[1] and parse_splits(f"{IN_DIST}=a.yaml")[1] and parse_splits("")[1]


def _units(split: str, n_scenes: int, right: float, task: str = "dedup_count") -> list[Unit]:
    rng = np.random.default_rng(len(split))
    out = []
    for s in range(n_scenes):
        for q in range(4):
            for setting in ("+0", "-1"):
                out.append(Unit(f"{split}{s}-{q}", setting, float(rng.random() < right), f"{split}{s}", "MVN", task,
                                "spatial", "coarse", 4, 1, setting == "+0"))
    return out


def test_the_table_differences_and_their_intervals():
    table = ood_table({IN_DIST: _units("a", 60, 0.8), "crowd": _units("b", 60, 0.3)}, n_boot=200)
    rows = {r["metric"]: r["cells"] for r in table["rows"]}
    mvn = rows["MVN +0"]
    assert mvn[IN_DIST]["acc"] > 70 and mvn["crowd"]["acc"] < 40
    assert mvn["crowd"]["diff"] == pytest.approx(mvn["crowd"]["acc"] - mvn[IN_DIST]["acc"], abs=0.02)
    lo, hi = mvn["crowd"]["diff_ci"]
    assert lo < mvn["crowd"]["diff"] < hi < 0
    assert "task dedup_count" in rows and "necessity gap" in rows
    assert rows["MVN +0, in-dist task mix"]["crowd"]["acc"] == pytest.approx(mvn["crowd"]["acc"], abs=0.02)
    text = render_markdown(table)
    assert "| MVN +0 |" in text and "*" in text.split("| MVN +0 |")[1].splitlines()[0]


def test_the_task_mix_row_weights_tasks_by_their_in_distribution_share():
    ref = _units("a", 40, 0.9, "identity_match") + _units("c", 120, 0.3, "dedup_count")
    ood = _units("b", 120, 0.9, "identity_match") + _units("d", 40, 0.3, "dedup_count")  # the easy task dominates
    rows = {r["metric"]: r["cells"] for r in ood_table({IN_DIST: ref, "crowd": ood}, n_boot=100)["rows"]}
    assert rows["MVN +0"]["crowd"]["diff"] > 20  # the mix alone
    mix = rows["MVN +0, in-dist task mix"]
    assert mix[IN_DIST]["acc"] == pytest.approx(rows["MVN +0"][IN_DIST]["acc"], abs=0.02)
    assert abs(mix["crowd"]["diff"]) < 8 and mix["crowd"]["diff_ci"][0] < 0 < mix["crowd"]["diff_ci"][1]
