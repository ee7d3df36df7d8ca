"""Bad input stops a run before anything is written: one clear line per problem, exit 1/2,
no traceback; benchmark errors name the sample id and the field."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.__main__ import main


def _edit(root: Path, edit) -> None:
    path = root / "benchmark.json"
    data = json.loads(path.read_text())
    edit(data["samples"])
    path.write_text(json.dumps(data))


def _sample(samples, sid):
    return next(s for s in samples if s["id"] == sid)


def _set(sid, key, value):
    return lambda samples: _sample(samples, sid).__setitem__(key, value)


def _del(sid, key):
    return lambda samples: _sample(samples, sid).pop(key)


def _cam(sid, key, value, view=1):
    return lambda samples: _sample(samples, sid)["views"][view]["camera"].__setitem__(key, value)


# (edit, sample id, field the error must name)
BAD_BENCH = [
    (_set("s000-svs", "answer", "E"), "s000-svs", "answer"),
    (_set("s000-svs", "answer", "b"), "s000-svs", "answer"),
    (_set("s001-mvn", "gt_views", ["cam9"]), "s001-mvn", "gt_views[0]"),
    (_set("s001-mvn", "extra_views", ["cam2", "nope"]), "s001-mvn", "extra_views[1]"),
    (_set("s000-mvn", "gt_views", []), "s000-mvn", "gt_views"),
    (_cam("s002-svs", "K", [[1, 0, 0], [0, 1, 0]]), "s002-svs", "views[1].camera.K"),
    (_cam("s002-svs", "R", [[2, 0, 0], [0, 1, 0], [0, 0, 1]]), "s002-svs", "views[1].camera.R"),
    (_cam("s002-svs", "t", [1, 2]), "s002-svs", "views[1].camera.t"),
    (_cam("s002-svs", "width", -3), "s002-svs", "views[1].camera.width"),
    (lambda s: _sample(s, "s003-all")["views"][0]["frames"][0].__setitem__("image", "images/missing.png"),
     "s003-all", "views[0].frames[0].image"),
    (_set("s001-svs", "subset", "XYZ"), "s001-svs", "subset"),
    (_set("s001-svs", "distractors", {"Q": "naive_sum"}), "s001-svs", "distractors.Q"),
    (_set("s001-nota", "options", ["None of the above", "2", "3", "4", "5"]), "s001-nota", "options[0]"),
    (_set("s001-svs", "options", ["1", "1", "3", "4"]), "s001-svs", "options[1]"),
    (_del("s002-mvn", "question"), "s002-mvn", "question"),
    (_set("s002-mvn", "colour", "red"), "s002-mvn", "colour"),
    (lambda s: _sample(s, "s000-mvn")["marks"][0].__setitem__("box", [5, 5, 1, 1]), "s000-mvn", "marks[0].box"),
    (_set("s003-svs", "evidence", [{"view_id": "camX", "t_start": 0, "t_end": 0}]), "s003-svs",
     "evidence[0].view_id"),
    (lambda s: _sample(s, "s003-mvn").__setitem__("id", "s003-svs"), "s003-svs", "id"),
    (_set("s000-all", "granularity", "medium"), "s000-all", "granularity"),
]


@pytest.mark.parametrize("edit,sid,field", BAD_BENCH)
def test_bad_benchmark_field(tiny_bench, tmp_path, capsys, edit, sid, field):
    _edit(tiny_bench, edit)
    out = tmp_path / "out"
    rc = main(["run", "--bench", str(tiny_bench), "--model", "oracle", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1
    assert not out.exists()
    lines = err.strip().splitlines()
    assert all(line.startswith("ERROR ") for line in lines), err
    assert any(f":{sid}" in line and f":{field}:" in line for line in lines), err
    assert "Traceback" not in err


def _write_human(tmp_path: Path, data) -> str:
    path = tmp_path / "human.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


# (extra CLI args, exit code, text the error must contain)
BAD_ARGS = [
    (["--model", "nosuchmodel"], 2, "unknown model 'nosuchmodel'"),
    (["--model-arg", "seed"], 2, "expected key=value"),
    (["--model-arg", "sed=3"], 2, "model_arg.sed"),
    (["--model-arg", "seed=abc"], 2, "model_arg.seed"),
    (["--settings", "+0,+9"], 2, "'+9'"),
    (["--settings", "+0,banana"], 2, "unknown setting 'banana'"),
    (["--settings", "+0,+0"], 2, "listed twice"),
    (["--limit", "0"], 2, "--limit"),
    (["--batch-size", "0"], 2, "--batch-size"),
    (["--n-boot", "1"], 2, "--n-boot"),
    (["--max-extra-svs", "-1"], 2, "max_extra"),
    (["--fallback", "nosuch"], 2, "unknown model 'nosuch'"),
    (["--blind-run", "/nonexistent/run"], 1, "--blind-run"),
    (["--human-json", "/nonexistent/h.json"], 1, "--human-json"),
    (["--human-json", "{bad json"], 1, "--human-json"),
    (["--human-json", {"spatial": {"coarse": 150}}], 1, "spatial.coarse"),
    (["--human-json", {"sideways": {"all": 50}}], 1, "sideways"),
]


@pytest.mark.parametrize("extra,code,needle", BAD_ARGS)
def test_bad_arguments(tiny_bench, tmp_path, capsys, extra, code, needle):
    args = ["run", "--bench", str(tiny_bench), "--model", "random", "--out", str(tmp_path / "out"), "--no-progress"]
    extra = [_write_human(tmp_path, x) if i and extra[i - 1] == "--human-json" and not str(x).startswith("/")
             else x for i, x in enumerate(extra)]
    rc = main(args + extra)
    err = capsys.readouterr().err
    assert rc == code, err
    assert needle in err, err
    assert not (tmp_path / "out").exists()
    assert "Traceback" not in err


def test_argparse_errors_exit_2(tiny_bench, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--bench", str(tiny_bench), "--out", str(tmp_path / "o")])  # no --model
    assert exc.value.code == 2 and not (tmp_path / "o").exists()
    with pytest.raises(SystemExit) as exc:
        main(["run", "--bench", str(tiny_bench), "--model", "random", "--out", str(tmp_path / "o"), "--limit", "x"])
    assert exc.value.code == 2


def test_missing_benchmark_and_all_problems_at_once(tmp_path, capsys):
    rc = main(["run", "--bench", str(tmp_path / "nothing"), "--model", "nosuch", "--settings", "+7",
               "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 3 and not (tmp_path / "o").exists()


def test_existing_out_untouched_on_error(tiny_bench, tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["run", "--bench", str(tiny_bench), "--model", "first", "--out", str(out), "--no-progress",
                 "--no-plots", "--n-boot", "20", "--settings", "+0"]) == 0
    snapshot = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(["run", "--bench", str(tiny_bench), "--model", "first", "--out", str(out), "--seed", "3"]) == 1
    assert "different run: seed" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == snapshot


def test_enough_bad_input_cases():
    assert len(BAD_BENCH) + len(BAD_ARGS) >= 20
