"""HF datasets export (parquet + card) and the lossless round trip through ``import hf``."""
from __future__ import annotations

import json

import datasets
import numpy as np
import pytest
import yaml
from PIL import Image

from bench.__main__ import main as bench_main
from bench.format import load_benchmark, sample_to_dict
from bench.protocol import ProtocolConfig, parse_settings
from eval.runner import plan_run
from bench.tiny import make_tiny_benchmark


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    bench = make_tiny_benchmark(root / "bench", n_scenes=3, n_frames=2)
    assert bench_main(["export", "hf", str(bench), "--out", str(root / "hf"), "--name", "Tiny cross-view"]) == 0
    return bench, root / "hf", root


def test_datasets_loads_the_export_and_the_first_image_is_the_source(exported):
    bench, out, root = exported
    ds = datasets.load_dataset("parquet", data_files=str(out / "samples" / "*.parquet"), split="train",
                               cache_dir=str(root / "cache"))
    source = json.loads((bench / "benchmark.json").read_text())["samples"]
    assert len(ds) == len(source) == 12 and ds[0]["id"] == source[0]["id"]
    first = source[0]["views"][0]["frames"][0]["image"]
    assert ds[0]["image_paths"][0] == first
    decoded = ds[0]["images"][0]  # a PIL image, decoded by datasets
    assert np.array_equal(np.asarray(decoded), np.asarray(Image.open(bench / first)))
    raw = ds.cast_column("images", datasets.List(datasets.Image(decode=False)))
    assert raw[0]["images"][0]["bytes"] == (bench / first).read_bytes()  # stored as the file, not re-encoded
    assert len(ds[0]["images"]) == 4 * 2  # every frame of every view


def test_queries_config_follows_the_plan_and_the_card(exported):
    bench, out, root = exported
    queries = datasets.load_dataset(str(out), "queries", split="test", cache_dir=str(root / "cache"))
    planned = plan_run(load_benchmark(bench), parse_settings(None), ProtocolConfig(), 0, circular=False)
    assert queries["key"] == [pq.key for pq in planned]
    for row, pq in zip(queries, planned):
        assert row["view_ids"] == list(pq.query.view_ids)
        assert row["prompt"].count("<image>") == len(row["images"]) == 2 * len(row["view_ids"])
        assert row["image_views"] == [v for v in row["view_ids"] for _ in range(2)]
        assert set(row["view_roles"]) <= {"gt", "extra", "view"}
    card = (out / "README.md").read_text()
    meta = yaml.safe_load(card.split("---")[1])
    assert meta["license"] == "apache-2.0" and meta["pretty_name"] == "Tiny cross-view"
    assert "visual-question-answering" in meta["task_categories"]
    assert [c["config_name"] for c in meta["configs"]] == ["samples", "queries"]
    assert meta["configs"][0]["data_files"] == [{"split": "test", "path": "samples/test-*.parquet"}]
    info = {i["config_name"]: i for i in meta["dataset_info"]}
    assert [f["name"] for f in info["queries"]["features"]] == queries.column_names
    assert {"name": "images", "list": "image"} in info["samples"]["features"]
    assert info["queries"]["splits"][0]["num_examples"] == len(queries)


def test_export_import_validate_gives_the_same_samples(exported, capsys):
    bench, out, root = exported
    back = root / "back"
    assert bench_main(["import", "hf", str(out / "samples"), "--preset", "generic", "--out", str(back)]) == 0
    assert bench_main(["validate", str(back)]) == 0
    original, restored = load_benchmark(bench), load_benchmark(back)
    assert [sample_to_dict(s) for s in restored.samples] == [sample_to_dict(s) for s in original.samples]
    for s in original.samples:
        for v in s.views:
            for f in v.frames:
                assert (back / f.image).read_bytes() == (bench / f.image).read_bytes()
    assert "OK (12 samples)" in capsys.readouterr().err


def test_split_folders_and_refusals(tmp_path, capsys):
    for split in ("train", "test"):
        make_tiny_benchmark(tmp_path / "root" / split, n_scenes=1, image_size=8)
    out = tmp_path / "hf"
    assert bench_main(["export", "hf", str(tmp_path / "root"), "--out", str(out), "--settings", "+0,all"]) == 0
    meta = yaml.safe_load((out / "README.md").read_text().split("---")[1])
    assert [f["split"] for f in meta["configs"][1]["data_files"]] == ["train", "test"]
    assert sorted(p.name for p in (out / "queries").iterdir()) == ["test-00000-of-00001.parquet",
                                                                   "train-00000-of-00001.parquet"]
    # a second export replaces an earlier export, never another folder
    assert bench_main(["export", "hf", str(tmp_path / "root"), "--out", str(out)]) == 0
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("keep")
    assert bench_main(["export", "hf", str(tmp_path / "root"), "--out", str(tmp_path / "busy")]) == 1
    assert "not empty" in capsys.readouterr().err and (tmp_path / "busy" / "notes.txt").read_text() == "keep"
    assert bench_main(["export", "hf", str(tmp_path / "root"), "--out", str(tmp_path / "x"), "--settings", "+7"]) == 2
