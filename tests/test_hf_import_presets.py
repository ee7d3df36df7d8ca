"""``import hf --preset blink|mmsi|all-angles|generic`` on tiny files shaped like each public
benchmark (columns from their dataset cards), then the oracle scores 100 under ``all``."""
from __future__ import annotations

import io
import json

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from bench.__main__ import main as bench_main
from bench.format import load_benchmark
from bench.import_presets import answer_letter, split_question_options
from eval.runner import evaluate


def png(seed: int, size: int = 12, fmt: str = "PNG") -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 255, (size, size, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format=fmt)
    return buf.getvalue()


def blink_file(root):
    """BLINK-Benchmark/BLINK: one parquet per sub-task config, HF image columns image_1..image_4."""
    features = datasets.Features({
        "idx": datasets.Value("string"), "question": datasets.Value("string"), "sub_task": datasets.Value("string"),
        **{f"image_{k}": datasets.Image() for k in range(1, 5)}, "choices": datasets.List(datasets.Value("string")),
        "answer": datasets.Value("string"), "prompt": datasets.Value("string"), "explanation": datasets.Value("string")})
    rows = [{"idx": f"val_Multi-view_Reasoning_{i}", "question": "Is the camera moving left or right?",
             "sub_task": "Multi-view Reasoning" if i < 2 else "Counting",
             "image_1": {"bytes": png(i), "path": None}, "image_2": {"bytes": png(10 + i), "path": None} if i < 2 else None,
             "image_3": None, "image_4": None, "choices": ["left", "right"] if i < 2 else ["1", "2", "3", "4"],
             "answer": "(B)" if i != 1 else "(A)", "prompt": "...", "explanation": ""} for i in range(3)]
    path = root / "Multi-view_Reasoning" / "val-00000-of-00001.parquet"
    path.parent.mkdir()
    datasets.Dataset.from_list(rows, features=features).to_parquet(str(path))
    return path, [2, 2, 1], ["B", "A", "B"]


def mmsi_file(root):
    """RunsenXu/MMSI-Bench: MMSI_Bench.parquet, options written into the question, images as raw bytes."""
    table = pa.table({
        "id": [0, 1],
        "images": [[png(1), png(2, fmt="JPEG")], [png(3), png(4), png(5)]],
        "question_type": ["Positional Relationship (Cam.-Cam.)", "Multi-Step Reasoning"],
        "question": ["The two images are taken by one camera. Where is image 2 relative to image 1? "
                     "Options: A: Left, B: Right, C: Behind, D: Above",
                     "Which object is closest to the door?\nOptions: A: sofa, B: lamp, C: table, D: chair"],
        "answer": ["C", "A"], "thought": ["reasoning 1", "reasoning 2"],
        "mean_normed_duration_seconds": [12.5, 30.0], "difficulty": ["easy", "hard"]})
    path = root / "MMSI_Bench.parquet"
    pq.write_table(table, path)
    return path, [2, 3], ["C", "A"]


def all_angles_file(root):
    """ch-chenyu/All-Angles-Bench: image paths relative to the file, options A-C, paired questions."""
    (root / "egohumans" / "scene1").mkdir(parents=True)
    paths = []
    for k in range(3):
        rel = f"egohumans/scene1/cam{k}.jpg"
        (root / rel).write_bytes(png(20 + k, fmt="JPEG"))
        paths.append(rel)
    table = pa.table({
        "index": [0, 1], "folder": ["scene1", "scene1"], "category": ["counting", "relative_direction"],
        "pair_idx": [1, 0], "image_path": [paths, paths[:2]],
        "question": ["How many people are there?", "Where is the table relative to the camera of view 2?"],
        "A": ["2", "left"], "B": ["3", "right"], "C": ["4", "behind"], "answer": ["B", "C"],
        "sourced_dataset": ["EgoHumans", "EgoHumans"]})
    path = root / "data.parquet"
    pq.write_table(table, path)
    return path, [3, 2], ["B", "C"]


MAKERS = {"blink": blink_file, "mmsi": mmsi_file, "all-angles": all_angles_file}


@pytest.mark.parametrize("preset", sorted(MAKERS))
def test_preset_imports_and_the_oracle_scores_100(preset, tmp_path):
    (tmp_path / "src").mkdir()
    src, n_images, answers = MAKERS[preset](tmp_path / "src")
    out = tmp_path / "bench"
    source = src.parent if preset == "blink" else src  # a folder of per-config parquet files works too
    assert bench_main(["import", "hf", str(source), "--preset", preset, "--out", str(out)]) == 0
    assert bench_main(["validate", str(out)]) == 0
    bench = load_benchmark(out)
    assert [len(s.views) for s in bench.samples] == n_images
    assert [s.answer for s in bench.samples] == answers
    for s in bench.samples:
        assert s.subset is None and s.gt_views == [v.view_id for v in s.views] and s.extra_views == []
        assert s.meta["preset"] == preset
    if preset == "mmsi":
        assert bench.samples[0].options == ["Left", "Right", "Behind", "Above"]
        assert bench.samples[0].question.endswith("relative to image 1?") and bench.samples[1].meta["thought"]
        assert bench.samples[0].views[1].frames[0].image.endswith(".jpg")  # the JPEG stays a JPEG
    if preset == "all-angles":
        assert bench.samples[0].scene == "scene1" and bench.samples[0].options == ["2", "3", "4"]
        assert bench.samples[1].meta["pair_idx"] == 0 and bench.samples[1].task == "relative_direction"
        assert (out / bench.samples[0].views[2].frames[0].image).read_bytes() == (
            tmp_path / "src" / "egohumans/scene1/cam2.jpg").read_bytes()
    if preset == "blink":
        assert bench.samples[2].task == "Counting" and bench.samples[0].options == ["left", "right"]
    s = evaluate(out, "oracle", tmp_path / "run", progress=False, plots=False, n_boot=50)
    assert s["settings"] == ["all"] and s["acc"]["all"]["no_subset"] == 100.0
    assert s["by_axis_granularity"]["overall"]["all"] == 100.0 and s["n_samples"] == len(n_images)


def test_generic_with_map_json_and_errors(tmp_path, capsys):
    src = tmp_path / "mine.jsonl"
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "a.png").write_bytes(png(1))
    rows = [{"qid": "q1", "kind": "count", "prompt_text": "How many?", "opts": ["1", "2"], "gold": "2",
             "pics": ["imgs/a.png", {"bytes": None, "path": "imgs/a.png"}]},
            {"qid": "q2", "kind": "count", "prompt_text": "How many now?", "opts": ["1", "2"], "gold": "Z",
             "pics": ["imgs/a.png"]}]
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    args = ["import", "hf", str(src), "--out", str(tmp_path / "b"), "--map", "id=qid", "--map", "task=kind",
            "--map", "question=prompt_text", "--map", "options=opts", "--map", "answer=gold", "--map", "images=pics"]
    assert bench_main(args) == 1
    err = capsys.readouterr().err
    assert f"ERROR {src}:row 2: answer: 'Z' is not a letter or an option" in err
    assert not (tmp_path / "b").exists()  # nothing half-written
    assert bench_main(args + ["--skip-invalid"]) == 0
    bench = load_benchmark(tmp_path / "b")
    assert [s.id for s in bench.samples] == ["q1"] and bench.samples[0].answer == "B"
    assert len(bench.samples[0].views) == 2 and bench.samples[0].task == "count"
    assert bench_main(["import", "hf", str(src), "--out", str(tmp_path / "c"), "--map", "colour=x"]) == 2
    assert bench_main(["import", "hf", str(src), "--out", str(tmp_path / "d")]) == 1
    assert "use --map id=COLUMN" in capsys.readouterr().err


def test_question_option_splitting_and_answers():
    assert split_question_options("Q? Options: A: x, y, B: z") == ("Q?", ["x, y", "z"])
    assert split_question_options("Pick one.\n(A) red\n(B) blue\n(C) green") == ("Pick one.", ["red", "blue", "green"])
    assert split_question_options("Is it A or B?") is None
    assert [answer_letter(a, ["3", "4"]) for a in ("(B)", "b.", "4", " A ", "C", None)] == ["B", "B", "B", "A", None, None]


def test_all_angles_json_with_an_image_root(tmp_path, capsys):
    """All-Angles ships data.json; its image paths point into frames downloaded elsewhere."""
    (tmp_path / "frames").mkdir()
    all_angles_file(tmp_path / "frames")
    rows = pq.read_table(tmp_path / "frames" / "data.parquet").to_pylist()
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "data.json").write_text(json.dumps(rows))
    args = ["import", "hf", str(tmp_path / "meta" / "data.json"), "--preset", "all-angles", "--out", str(tmp_path / "b")]
    assert bench_main(args) == 1
    assert "is neither a file under" in capsys.readouterr().err and not (tmp_path / "b").exists()
    assert bench_main(args + ["--image-root", str(tmp_path / "frames")]) == 0
    assert [len(s.views) for s in load_benchmark(tmp_path / "b").samples] == [3, 2]
