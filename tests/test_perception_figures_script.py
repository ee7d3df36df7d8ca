"""scripts/perception_figures.py: a perception folder measured on a benchmark split from the records
train.py caches."""
import json

import pytest

from scripts.perception_figures import main, measure

pytestmark = pytest.mark.filterwarnings("ignore:.*NO pretrained weights")


def test_measure_counts_every_image_and_person(synth_bench, tiny_perception, tmp_path):
    from bench.format import load_benchmark
    from inputs.entity_batch import load_entity_labels
    from inputs.perception import benchmark_images

    figs = measure(tiny_perception, synth_bench, "val", tmp_path / "cache")
    images = benchmark_images(load_benchmark(synth_bench / "val", check_images=False))
    labels = load_entity_labels(synth_bench, "val", allow_eval_splits=True)
    persons = [r for _, scene, stem in images for r in labels[scene][stem] if r["kind"] == "person"]
    assert figs["images"] == len(images) > 0
    banded = sum(figs[k] for k in figs if k.startswith("n_persons_"))
    assert banded == sum(0 <= r.get("frac", -1) for r in persons) > 0
    assert 0.0 <= figs["person_recall"] <= 100.0 and 0.0 <= figs["person_precision"] <= 100.0
    assert "person_floor_error_m" in figs and figs["split"] == "val"
    assert any((tmp_path / "cache").rglob("*")), "the predicted records are cached, as train.py caches them"


def test_cli_writes_json_and_names_a_missing_folder(synth_bench, tiny_perception, tmp_path, capsys):
    out = tmp_path / "figs.json"
    assert main(["--perception", str(tiny_perception), "--bench", str(synth_bench), "--cache-dir",
                 str(tmp_path / "cache"), "--out", str(out), "--threads", "1"]) == 0
    assert json.loads(out.read_text())["images"] > 0
    assert main(["--perception", str(tmp_path / "nowhere"), "--bench", str(synth_bench), "--out",
                 str(tmp_path / "x.json")]) == 2
    assert "nowhere" in capsys.readouterr().err
