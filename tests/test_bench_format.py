"""The benchmark format: loading, and one clear error per bad field."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.__main__ import main as bench_main
from bench.format import BenchmarkError, load_benchmark, sample_to_dict
from bench.tiny import make_tiny_benchmark


def _rewrite(root: Path, edit) -> None:
    """Apply ``edit(samples)`` to the tiny benchmark's JSON in place."""
    path = root / "benchmark.json"
    data = json.loads(path.read_text())
    edit(data["samples"])
    path.write_text(json.dumps(data))


def test_loads_json_and_jsonl(tmp_path):
    a = load_benchmark(make_tiny_benchmark(tmp_path / "a"))
    b = load_benchmark(make_tiny_benchmark(tmp_path / "b", fmt="jsonl"))
    assert len(a) == len(b) == 16
    assert {len(s.options) for s in a} == {4, 5}
    assert {s.subset for s in a} == {"SVS", "MVN", None}
    nota = [s for s in a if len(s.options) == 5]
    assert all(s.has_nota for s in nota)
    assert any(v.camera is None for s in a for v in s.views)
    assert a.samples[0].letters == "ABCD"


def test_list_top_level_and_roundtrip(tmp_path):
    root = make_tiny_benchmark(tmp_path / "a")
    data = json.loads((root / "benchmark.json").read_text())["samples"]
    (root / "benchmark.json").write_text(json.dumps(data))
    bench = load_benchmark(root)
    assert sample_to_dict(bench.samples[3]) == {**data[3], "distractors": {}, "evidence": [], "marks": [],
                                                  "extra_views": [], "subset": None, "meta": {}}


def _set(path, value):
    """An edit that sets samples[i].a.b[...] = value (path like "0.views.1.camera.K")."""
    def edit(samples):
        keys = path.split(".")
        node = samples
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        last = keys[-1]
        if value is _DELETE:
            del node[int(last) if isinstance(node, list) else last]
        elif isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return edit


_DELETE = object()
ROT_BAD = [[1, 0, 0], [0, 2, 0], [0, 0, 1]]

BAD_CASES = [
    # (edit, sample id, field, words in the message)
    (_set("1.gt_views", ["cam0", "cam9"]), "s000-mvn", "gt_views[1]", "unknown view id"),
    (_set("1.extra_views", ["cam7"]), "s000-mvn", "extra_views[0]", "unknown view id"),
    (_set("1.extra_views", ["cam0"]), "s000-mvn", "extra_views", "already in gt_views"),
    (_set("0.evidence.0.view_id", "camX"), "s000-svs", "evidence[0].view_id", "unknown view id"),
    (_set("1.marks.0.view_id", "camX"), "s000-mvn", "marks[0].view_id", "unknown view id"),
    (_set("0.answer", "E"), "s000-svs", "answer", "out of range"),
    (_set("0.answer", "b"), "s000-svs", "answer", "capital letter"),
    (_set("1.id", "s000-svs"), "s000-svs", "id", "duplicate sample id"),
    (_set("0.views.1.view_id", "cam0"), "s000-svs", "views[1].view_id", "duplicate view id"),
    (_set("0.views.0.frames.0.image", "images/missing.png"), "s000-svs", "views[0].frames[0].image", "not found"),
    (_set("0.views.0.frames.0.image", "../../etc/passwd"), "s000-svs", "views[0].frames[0].image", "escapes"),
    (_set("0.views.0.frames.0.image", "/etc/passwd"), "s000-svs", "views[0].frames[0].image", "absolute"),
    (_set("0.views.1.camera.K", [[1, 0, 0], [0, 1, 0]]), "s000-svs", "views[1].camera.K", "3x3"),
    (_set("0.views.1.camera.t", [0, 1]), "s000-svs", "views[1].camera.t", "3 numbers"),
    (_set("0.views.1.camera.K", [[1e400, 0, 0], [0, 1, 0], [0, 0, 1]]), "s000-svs", "views[1].camera.K", "finite"),
    (_set("0.views.1.camera.R", ROT_BAD), "s000-svs", "views[1].camera.R", "not a rotation"),
    (_set("0.views.1.camera.width", 0), "s000-svs", "views[1].camera.width", "positive integer"),
    (_set("0.question", "  "), "s000-svs", "question", "non-empty"),
    (_set("0.options", []), "s000-svs", "options", "at least 2"),
    (_set("0.options.2", "1"), "s000-svs", "options[2]", "duplicate option"),
    (_set("0.options.1", ""), "s000-svs", "options[1]", "non-empty"),
    (_set("2.options.0", "None of the above"), "s000-nota", "options[0]", "must be the last"),
    (_set("1.distractors.Z", "naive_sum"), "s000-mvn", "distractors.Z", "not an option letter"),
    (_set("0.distractors", {"A": "naive_sum"}), "s000-svs", "distractors.A", "right answer"),
    (_set("0.views.0.frames.0.t", float("nan")), "s000-svs", "views[0].frames[0].t", "finite"),
    (_set("0.evidence.0.t_end", -1.0), "s000-svs", "evidence[0].t_end", "before t_start"),
    (_set("1.marks.0.box", [10, 2, 2, 20]), "s000-mvn", "marks[0].box", "x0 <= x1"),
    (_set("0.subset", "XYZ"), "s000-svs", "subset", "not one of"),
    (_set("0.views", []), "s000-svs", "views", "non-empty"),
    (_set("0.gt_views", []), "s000-svs", "gt_views", "at least one"),
    (_set("0.answer", _DELETE), "s000-svs", "answer", "missing"),
    (_set("0.colour", "red"), "s000-svs", "colour", "unknown field"),
    (_set("0.views.0.frames", []), "s000-svs", "views[0].frames", "non-empty"),
    # Misspelt keys at any depth are errors (they used to validate and be dropped on loading).
    (_set("0.evidence.0.entites", [1]), "s000-svs", "evidence[0].entites", "unknown field"),
    (_set("1.marks.0.colour", "red"), "s000-mvn", "marks[0].colour", "unknown field"),
    (_set("0.views.1.camera.k", [[1, 0, 0]]), "s000-svs", "views[1].camera.k", "unknown field"),
    (_set("0.views.0.frames.0.time", 0.0), "s000-svs", "views[0].frames[0].time", "unknown field"),
    (_set("0.views.0.frames.0.image", _DELETE), "s000-svs", "views[0].frames[0].image", "missing"),
    (_set("1.marks.0.entity", "p1"), "s000-mvn", "marks[0].entity", "integer entity id"),
    (_set("0.evidence.0.entities", [1.5]), "s000-svs", "evidence[0].entities[0]", "not of type 'integer'"),
    (_set("0.distractors", {"a": "naive_sum"}), "s000-svs", "distractors.a", "not an option letter"),
    (_set("0.views.1.camera.K", [[1, 0, 0], [0, 1], [0, 0, 1]]), "s000-svs", "views[1].camera.K[1]", "3 numbers"),
    (_set("0.meta", []), "s000-svs", "meta", "must be an object"),
]


@pytest.mark.parametrize("edit,sample_id,field,words", BAD_CASES, ids=[c[2] + ":" + c[3] for c in BAD_CASES])
def test_bad_field_is_named(tmp_path, edit, sample_id, field, words, capsys):
    root = make_tiny_benchmark(tmp_path / "b", n_scenes=1)
    _rewrite(root, edit)
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(root)
    lines = [p.line() for p in info.value.problems]
    match = [p for p in info.value.problems if p.sample == sample_id and p.field == field and words in p.message]
    assert match, lines
    # the CLI reports the same line and exits 1, without a traceback
    assert bench_main(["validate", str(root)]) == 1
    out = capsys.readouterr().out
    assert f"ERROR {root / 'benchmark.json'}:{sample_id}:{field}:" in out
    assert "Traceback" not in out


def test_unreadable_image(tmp_path):
    root = make_tiny_benchmark(tmp_path / "b", n_scenes=1)
    (root / "images/s000/cam1_000.png").write_bytes(b"not a png")
    with pytest.raises(BenchmarkError, match=r"views\[1\].frames\[0\].image: unreadable image"):
        load_benchmark(root)


def test_jsonl_names_the_line(tmp_path):
    root = make_tiny_benchmark(tmp_path / "b", n_scenes=1, fmt="jsonl")
    lines = (root / "benchmark.jsonl").read_text().splitlines()
    bad = json.loads(lines[2])
    bad["answer"] = "Q"
    lines[2] = json.dumps(bad)
    lines.insert(1, "{not json")
    (root / "benchmark.jsonl").write_text("\n".join(lines))
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(root)
    text = str(info.value)
    assert ":line 2:-: invalid JSON" in text
    assert "s000-nota (line 4):answer:" in text


def test_missing_folder_and_empty(tmp_path):
    with pytest.raises(BenchmarkError, match="no benchmark.json"):
        load_benchmark(tmp_path)
    (tmp_path / "benchmark.json").write_text("[]")
    with pytest.raises(BenchmarkError, match="no samples"):
        load_benchmark(tmp_path)


def test_stats_and_schema_commands(tiny_bench, capsys):
    assert bench_main(["stats", str(tiny_bench), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["n_samples"] == 16 and stats["by_subset"] == {"MVN": 8, "SVS": 4, "none": 4}
    assert sum(stats["answer_letters"].values()) == 16
    assert bench_main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    sample = schema["$defs"]["sample"]
    assert set(sample["required"]) >= {"id", "question", "options", "answer", "views", "gt_views"}


def test_the_printed_schema_is_what_the_loader_enforces(tiny_bench, capsys):
    import jsonschema

    assert bench_main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator.check_schema(schema)
    data = json.loads((tiny_bench / "benchmark.json").read_text())
    jsonschema.validate(data, schema)
    data["samples"][0]["evidence"][0]["entites"] = [1]
    with pytest.raises(jsonschema.ValidationError, match="entites"):
        jsonschema.validate(data["samples"][0], schema["$defs"]["sample"])


def test_every_problem_of_a_sample_in_one_pass(tmp_path):
    root = make_tiny_benchmark(tmp_path / "b", n_scenes=1)

    def edit(samples):
        samples[0]["evidence"][0]["entites"] = [1]
        samples[0]["answer"] = "b"
        samples[1]["marks"][0]["colour"] = "red"
    _rewrite(root, edit)
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(root)
    named = {(p.sample, p.field) for p in info.value.problems}
    assert {("s000-svs", "evidence[0].entites"), ("s000-svs", "answer"), ("s000-mvn", "marks[0].colour")} <= named
