"""The feature-pyramid perception fitted on a perception corpus (pretrain/perception_corpus_fit.py,
python -m pretrain.perception --corpus) and its figures (pretrain/perception_fit.py)."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch

from bench.format import Camera
from model.config import tiny_cnn_backbone_config
from pretrain.perception_corpus_fit import STATE, CorpusFitConfig, LevelStore, fit_on_corpus
from pretrain.perception_fit import floor_errors, perception_figures

# a camera 2 m above the origin looking straight down: pixel (50, 50) sees (0, 0), 10 px = 0.2 m
DOWN = Camera(K=[[100.0, 0.0, 50.0], [0.0, 100.0, 50.0], [0.0, 0.0, 1.0]],
              R=[[1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, -1.0]], t=[0.0, 0.0, 2.0], width=100, height=100)


def _person(box, frac=3, **fields):
    return {"id": 1, "kind": "person", "box": box, "frac": frac, "shirt": 0, **fields}


def test_figures_give_recall_by_visible_fraction_and_the_floor_point_error_in_metres():
    assert torch.allclose(floor_errors([(DOWN, [40, 10, 60, 50], [50, 10, 70, 50])]), torch.tensor([0.2], dtype=torch.float64))
    truth = {"a": [_person([40, 10, 60, 50], frac=3), _person([0, 0, 10, 10], frac=0)],
             "b": [_person([20, 20, 40, 60], frac=3)]}
    pred = {"a": [dict(_person([41, 10, 61, 50]), score=0.9)],  # the whole one, its feet 1 px off: 0.02 m
            "b": [dict(_person([20, 20, 40, 60]), score=0.9)]}  # exact: 0 m
    figs = perception_figures(pred, truth, {"a": DOWN, "b": DOWN})
    assert figs["person_recall_whole"] == 100.0 and figs["person_recall_hidden"] == 0.0
    assert figs["n_persons_whole"] == 2 and figs["n_persons_hidden"] == 1 and figs["n_persons_partly"] == 0
    assert figs["n_floor_points"] == 2 and abs(figs["person_floor_error_m"] - 0.01) < 1e-9  # median of 0.02 and 0
    assert "person_floor_error_m" not in perception_figures(pred, truth)  # no cameras, no floor figure


@pytest.fixture(scope="module")
def tiny_tower():
    from inputs.perception import tower_pyramid
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")
        return tower_pyramid(tiny_cnn_backbone_config(64), [1, 2, 3])


def _fit_cfg(corpus: Path, **over) -> CorpusFitConfig:
    fields = dict(corpus=str(corpus), images=10, width=16, epochs=2, batch_size=4, warmup_steps=1, ckpt_every=2,
                  log_every=1)
    return CorpusFitConfig(**{**fields, **over})


def test_an_interrupted_fit_resumes_to_the_same_weights(perception_corpus, tiny_tower, tmp_path):
    cfg = _fit_cfg(perception_corpus)
    whole, report = fit_on_corpus(cfg, tiny_tower, tmp_path / "whole", progress=False)
    assert report == {"steps": 6, "total_steps": 6, "seconds": report["seconds"], "images": 10, "stopped": False}
    assert whole.cfg.neck == "fpn" and whole.cfg.level_dims == [32, 48, 192]
    _, cut = fit_on_corpus(cfg, tiny_tower, tmp_path / "cut", progress=False, stop_after=3)
    assert cut["stopped"] and (tmp_path / "cut" / STATE).is_file()
    with pytest.raises(ValueError, match="--resume"):
        fit_on_corpus(cfg, tiny_tower, tmp_path / "cut", progress=False)
    with pytest.raises(ValueError, match="another config"):
        fit_on_corpus(_fit_cfg(perception_corpus, lr=1e-3), tiny_tower, tmp_path / "cut", resume=True, progress=False)
    state = torch.load(tmp_path / "cut" / STATE, weights_only=True)
    saved = json.loads(json.dumps(state["settings"]))
    del state["settings"]["fit"]["log_every"]  # as if saved before the field existed; the fit sets 1, not 20
    torch.save(state, tmp_path / "cut" / STATE)
    with pytest.raises(ValueError, match="another config"):
        fit_on_corpus(cfg, tiny_tower, tmp_path / "cut", resume=True, progress=False)
    del state["settings"]["fit"]["roi"]  # at its default (7): resumes
    state["settings"]["fit"]["log_every"] = saved["fit"]["log_every"]
    torch.save(state, tmp_path / "cut" / STATE)
    resumed, again = fit_on_corpus(cfg, tiny_tower, tmp_path / "cut", resume=True, progress=False)
    assert again["steps"] == 6 and not again["stopped"]
    for name, tensor in whole.state_dict().items():
        assert torch.equal(resumed.state_dict()[name], tensor), name


def test_the_level_store_returns_the_towers_maps_and_a_fit_may_switch_to_it(perception_corpus, tiny_tower,
                                                                           tmp_path):
    from pretrain.perception_corpus import corpus_items
    paths = [p for p, _ in corpus_items(perception_corpus, 3)]
    store = LevelStore(tmp_path / "levels", tiny_tower)
    direct = tiny_tower.maps(tiny_tower.images(paths))
    first = store.maps(paths[:2])  # two computed and written
    assert len(list(store.root.rglob("*.safetensors"))) == 2
    both = store.maps(paths)  # two read back, one computed
    assert len(list(store.root.rglob("*.safetensors"))) == 3
    for d, f, b in zip(direct, first, both):
        assert b.shape == d.shape and b.dtype == torch.float32
        assert torch.equal(f, b[:2]) and torch.allclose(b, d.half().float())
    # a fit from the store resumes from the store to the same weights; a fit begun on the fly goes on from it
    cfg = _fit_cfg(perception_corpus)
    whole, _ = fit_on_corpus(cfg, tiny_tower, tmp_path / "whole", progress=False, level_store=tmp_path / "levels")
    assert len(list(store.root.rglob("*.safetensors"))) == 10
    fit_on_corpus(cfg, tiny_tower, tmp_path / "cut", progress=False, stop_after=3, level_store=tmp_path / "levels")
    resumed, _ = fit_on_corpus(cfg, tiny_tower, tmp_path / "cut", resume=True, progress=False,
                               level_store=tmp_path / "levels")
    for name, tensor in whole.state_dict().items():
        assert torch.equal(resumed.state_dict()[name], tensor), name
    fit_on_corpus(cfg, tiny_tower, tmp_path / "fly", progress=False, stop_after=3)
    _, done = fit_on_corpus(cfg, tiny_tower, tmp_path / "fly", resume=True, progress=False,
                            level_store=tmp_path / "levels")
    assert done["steps"] == 6 and not done["stopped"]


def test_shipping_from_a_corpus_writes_a_perception_the_reasoners_records_come_from(
        perception_corpus, synth_bench, tmp_path):
    """python -m pretrain.perception --corpus, as a function: the folder loads through the same path
    the entity reasoner's records take, and its card names the corpus's seeds, size and figures."""
    from inputs.entity_records import split_records
    from inputs.perception import read_settings
    from pretrain.perception import ship_from_corpus
    cfg = _fit_cfg(perception_corpus, epochs=1)
    out = tmp_path / "fpn"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")
        report = ship_from_corpus(cfg, tiny_cnn_backbone_config(32), synth_bench, out, threads=1, command="test",
                                  progress=False)
        backbone, fine_layer, heads_cfg = read_settings(out)
        records = split_records(synth_bench, "val", out, tmp_path / "cache", progress=False)
    assert backbone.image_size == 64  # the corpus images' own size, not the config's 32
    assert heads_cfg.neck == "fpn" and heads_cfg.levels == [1, 2, 3] and heads_cfg.roi == 7 and fine_layer == -1
    val = report["val"]
    assert {"person_recall", "person_precision", "object_recall", "person_recall_partly", "shirt_accuracy",
            "arm_l_accuracy", "person_floor_error_m"} <= set(val)
    assert report["n_val_images"] > 0 and "train" not in report and len(report["history"]) == 3
    card = (out / "MODEL_CARD.md").read_text()
    assert report["sha256"] in card and "[0, 200, i]" in card and "[0, 201, i]" in card and "first 10 images" in card
    assert "visible fraction whole" in card and "floor-point error" in card
    assert json.loads((out / "figures.json").read_text())["sha256"] == report["sha256"]
    scenes = json.loads((synth_bench / "val" / "benchmark.json").read_text())["samples"]
    some = records[scenes[0]["scene"]]
    assert some and all(e["id"] == -1 and "box" in e for recs in some.values() for e in recs)


def test_the_command_fits_on_the_shipped_tower_and_refuses_what_it_cannot_do(perception_corpus, synth_bench,
                                                                             tmp_path, capsys):
    from pretrain.perception import main
    out = tmp_path / "fpn"
    args = ["--corpus", str(perception_corpus), "--bench", str(synth_bench), "--out", str(out), "--images", "8",
            "--epochs", "1", "--threads", "1", "batch_size=4", "width=8", "log_every=1"]
    assert main(args) == 0
    settings = json.loads((out / "perception.json").read_text())
    assert settings["backbone"]["pretrained"] == "checkpoints/backbone/synthclip-cnn16"
    assert settings["backbone"]["image_size"] == 64 and settings["heads"]["neck"] == "fpn"
    assert "--images 8" in (out / "MODEL_CARD.md").read_text()
    capsys.readouterr()
    assert main(args) == 2  # the fit's state is there: continuing it needs --resume
    assert "--resume" in capsys.readouterr().err
    assert main(args[:7] + ["100000"] + args[8:] + ["--out", str(tmp_path / "big")]) == 2
    assert "--images 100000" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--bench", str(synth_bench), "--resume"])  # --resume belongs to a corpus fit
