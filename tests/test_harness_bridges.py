"""lmms-eval and VLMEvalKit bridges, without either harness installed: the exported task files
load and run, and answers imported back give the native run's summary."""
from __future__ import annotations

import ast
import base64
import csv
import importlib.util
import json

import datasets
import pytest
import yaml
from openpyxl import Workbook
from PIL import Image

from bench.__main__ import main as bench_main
from eval.__main__ import main as eval_main
from eval.runner import evaluate
from bench.tiny import make_tiny_benchmark

N_BOOT = 100


class FunctionLoader(yaml.SafeLoader):
    """Reads lmms-eval's ``!function module.name`` tags as ("function", "module.name")."""


FunctionLoader.add_constructor("!function", lambda loader, node: ("function", loader.construct_scalar(node)))


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    """A benchmark with temporal views and the oracle's native run on it."""
    root = tmp_path_factory.mktemp("bridge")
    bench = make_tiny_benchmark(root / "bench", n_scenes=3, n_frames=2)
    summary = evaluate(bench, "oracle", root / "native", progress=False, plots=False, n_boot=N_BOOT)
    lines = [json.loads(x) for x in (root / "native" / "predictions.jsonl").read_text().splitlines()]
    return root, bench, summary, {r["key"]: r for r in lines}


def same_summary(imported: dict, native: dict) -> None:
    assert {k: v for k, v in imported.items() if k != "run"} == {k: v for k, v in native.items() if k != "run"}


def test_lmms_eval_tasks_load_and_their_functions_run(native):
    root, bench, _, lines = native
    out = root / "tasks" / "crossview"
    assert bench_main(["export", "lmms-eval", str(bench), "--out", str(out)]) == 0
    docs = {p.stem: yaml.load(p.read_text(), Loader=FunctionLoader) for p in out.glob("*.yaml")}
    group = docs.pop("crossview")
    assert group["group"] == "crossview" and sorted(group["task"]) == sorted(docs)
    assert [t.rsplit("_", 1)[1] for t in group["task"]] == ["plus0", "plus1", "plus2", "plus3", "minus1", "all"]
    spec = importlib.util.spec_from_file_location("crossview_utils", out / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    data_files = next(iter(docs.values()))["dataset_kwargs"]["data_files"]
    dataset = datasets.load_dataset("parquet", data_files=data_files, split="test", cache_dir=str(root / "cache"))
    seen = 0
    for name, task in docs.items():
        assert task["task"] == name and task["dataset_path"] == "parquet" and task["test_split"] == "test"
        functions = {k: v[1] for k, v in task.items() if isinstance(v, tuple) and v[0] == "function"}
        assert set(functions) == {"process_docs", "doc_to_visual", "doc_to_text", "process_results"}
        for ref in functions.values():
            module, fn = ref.split(".")
            assert module == "utils" and callable(getattr(utils, fn))
        fn = {k: getattr(utils, v.split(".")[1]) for k, v in functions.items()}
        rows = fn["process_docs"](dataset)
        assert len(rows) > 0 and set(rows["setting"]) == {task["metadata"]["setting"]}
        for doc in rows:
            text = fn["doc_to_text"](doc)
            assert text == doc["prompt"]  # utils.py rebuilds the project's interleaved prompt
            visuals = fn["doc_to_visual"](doc)
            assert len(visuals) == text.count("<image>") and all(isinstance(v, Image.Image) for v in visuals)
            wrong = next(x for x in "ABCDE" if x != doc["answer"])
            assert fn["process_results"](doc, [lines[doc["key"]]["raw"]]) == {"accuracy": 1.0}
            assert fn["process_results"](doc, [f"Answer: {wrong}"]) == {"accuracy": 0.0}
            assert "<image>" not in fn["doc_to_text"](doc, {"image_placeholder": ""})
            seen += 1
    assert seen == len(dataset) == len(lines)


def test_lmms_eval_samples_import_to_the_native_summary(native, capsys):
    root, bench, summary, lines = native
    out = root / "tasks2" / "cv"
    assert bench_main(["export", "lmms-eval", str(bench), "--out", str(out)]) == 0
    rows = datasets.load_dataset("parquet", data_files=str(out / "queries" / "*.parquet"), split="train",
                                 cache_dir=str(root / "cache")).remove_columns(["images"])
    files = []
    for setting in sorted(set(rows["setting"])):  # one samples file per task, as lmms-eval logs them
        path = root / f"samples_cv_{setting}.jsonl"
        with open(path, "w") as fh:
            for doc_id, doc in enumerate(r for r in rows if r["setting"] == setting):
                raw = lines[doc["key"]]["raw"]
                fh.write(json.dumps({"doc_id": doc_id, "doc": doc, "target": doc["answer"], "arguments": [],
                                     "resps": [[raw]], "filtered_resps": [raw], "accuracy": 1.0}) + "\n")
        files.append(str(path))
    run = root / "imported_lmms"
    assert eval_main(["import", "lmms-eval", *files, "--bench", str(bench), "--out", str(run), "--n-boot", str(N_BOOT),
                      "--no-plots", "--model", "oracle-via-lmms"]) == 0
    imported = json.loads((run / "summary.json").read_text())
    same_summary(imported, summary)
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["source"]["harness"] == "lmms-eval" and manifest["model"] == "oracle-via-lmms"
    assert manifest["source"]["answered"] == manifest["source"]["planned"] == len(lines)
    assert "SVS +0" in capsys.readouterr().out
    # the browser reads an imported run like a native one
    assert eval_main(["browse", str(run), str(root / "native"), "--out", str(root / "site")]) == 0


def test_vlmevalkit_tsv_and_predictions_import_to_the_native_summary(native, capsys):
    root, bench, summary, lines = native
    tsv = root / "crossview.tsv"
    assert bench_main(["export", "vlmevalkit", str(bench), "--out", str(tsv)]) == 0
    with open(tsv, newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    assert len(rows) == len(lines)
    assert list(rows[0])[:10] == ["index", "image", "image_path", "question", "hint", "A", "B", "C", "D", "E"]
    for row in rows:
        images = ast.literal_eval(row["image"])  # VLMEvalKit's toliststr reads a list written as text
        names = ast.literal_eval(row["image_path"])
        assert len(images) == len(names) == 2 * len(json.loads(row["view_order"])) and row["answer"] in "ABCDE"
        assert row["category"] == lines[row["key"]]["task"] and row["l2-category"] == lines[row["key"]]["setting"]
        assert (row["E"] == "") == (lines[row["key"]]["n_options"] == 4)
    first = json.loads((bench / "benchmark.json").read_text())["samples"]
    key0 = rows[0]["key"]
    view0 = json.loads(rows[0]["view_order"])[0]
    src = next(v for v in first if v["id"] == lines[key0]["sample_id"])["views"]
    frame0 = next(v for v in src if v["view_id"] == view0)["frames"][0]["image"]
    assert base64.b64decode(ast.literal_eval(rows[0]["image"])[0]) == (bench / frame0).read_bytes()
    many = next(r for r in rows if len(json.loads(r["view_order"])) == 3)
    assert "View 2: images 3-4 (t=0s to 0.5s)" in many["hint"]
    assert "frames of one camera" in next(r for r in rows if len(json.loads(r["view_order"])) == 1)["hint"]

    # VLMEvalKit's prediction file: the TSV's columns without `image`, plus `prediction`
    book = Workbook()
    sheet = book.active
    columns = [c for c in rows[0] if c != "image"] + ["prediction"]
    sheet.append(columns)
    for row in rows:
        sheet.append([int(row["index"]) if c == "index" else lines[row["key"]]["raw"] if c == "prediction" else row[c]
                      for c in columns])
    xlsx = root / "oracle_crossview.xlsx"
    book.save(xlsx)
    run = root / "imported_vlm"
    assert eval_main(["import", "vlmevalkit", str(xlsx), "--bench", str(bench), "--out", str(run),
                      "--n-boot", str(N_BOOT), "--no-plots"]) == 0
    same_summary(json.loads((run / "summary.json").read_text()), summary)
    assert json.loads((run / "run.json").read_text())["model"] == "vlmevalkit:oracle_crossview"

    # without our key column the row index (plan order) still finds each query
    bare = root / "bare.tsv"
    with open(bare, "w", newline="") as fh:
        w = csv.writer(fh, delimiter="\t")
        w.writerow(["index", "question", "answer", "prediction"])
        for row in reversed(rows):
            w.writerow([row["index"], row["question"], row["answer"], lines[row["key"]]["raw"]])
    assert eval_main(["import", "vlmevalkit", str(bare), "--bench", str(bench), "--out", str(root / "bare_run"),
                      "--n-boot", str(N_BOOT), "--no-plots"]) == 0
    same_summary(json.loads((root / "bare_run" / "summary.json").read_text()), summary)


def test_import_refusals(native, capsys):
    root, bench, _, lines = native
    key = next(iter(lines))
    bad = root / "bad.jsonl"
    bad.write_text(json.dumps({"doc": {"key": "nope|+0||r0"}, "filtered_resps": ["A"]}) + "\n"
                   + json.dumps({"doc": {"key": key, "view_ids": ["cam9"]}, "filtered_resps": ["A"]}) + "\n")
    out = root / "bad_run"
    assert eval_main(["import", "lmms-eval", str(bad), "--bench", str(bench), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "'nope|+0||r0' is not in the plan" in err and "import with the export's --seed" in err
    assert not out.exists()
    partial = root / "partial.jsonl"
    partial.write_text(json.dumps({"doc": {"key": key}, "filtered_resps": [lines[key]["raw"]]}) + "\n")
    assert eval_main(["import", "lmms-eval", str(partial), "--bench", str(bench), "--out", str(out), "--n-boot", "50",
                      "--no-plots"]) == 0
    assert "1 of" in capsys.readouterr().err
    assert json.loads((out / "summary.json").read_text())["n_queries"] == 1
    # a native run folder is never replaced by an import
    assert eval_main(["import", "lmms-eval", str(partial), "--bench", str(bench), "--out", str(root / "native")]) == 1
    assert "not empty" in capsys.readouterr().err
