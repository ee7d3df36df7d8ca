"""CLIP zero-shot adapter on a tiny random open_clip config: per-option scores through the
evaluator, and a loud, recorded warning that the weights are random."""
from __future__ import annotations

import json

import pytest

from eval.__main__ import main
from eval.adapters import build_model
from eval.adapters.clip_zeroshot import RANDOM_WARNING
from bench.tiny import make_tiny_benchmark

TINY_CLIP = {"embed_dim": 16,
             "vision_cfg": {"image_size": 32, "layers": 1, "width": 16, "patch_size": 8, "head_width": 8},
             "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 16, "heads": 2, "layers": 1}}


@pytest.fixture
def tiny_config(tmp_path):
    path = tmp_path / "tiny-clip-test.json"
    path.write_text(json.dumps(TINY_CLIP))
    return path


def test_scores_every_option_and_says_it_is_random(tmp_path, tiny_config, capsys):
    bench = make_tiny_benchmark(tmp_path / "b", n_scenes=2)
    out = tmp_path / "o"
    with pytest.warns(UserWarning, match="NO pretrained weights"):
        code = main(["run", "--bench", str(bench), "--model", "clip-zeroshot", "--model-arg", "arch=tiny-clip-test",
                     "--model-arg", f"model_config={tiny_config}", "--out", str(out), "--settings", "+0,+2,all",
                     "--no-progress", "--no-plots", "--n-boot", "20"])
    assert code == 0
    assert f"WARNING {RANDOM_WARNING}" in capsys.readouterr().err
    recs = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert recs and all(len(r["scores"]) == r["n_options"] and r["method"] == "scores" for r in recs)
    assert all(-1.0 <= v <= 1.0 for r in recs for v in r["scores"])
    assert all(r["meta"]["pretrained"] is False and r["meta"]["warning"] == RANDOM_WARNING for r in recs)
    assert json.loads((out / "run.json").read_text())["model_args"]["pretrained"] == ""


@pytest.mark.filterwarnings("ignore::UserWarning")  # the expected random-weights warning
def test_template_and_arch_errors(tiny_config):
    with pytest.raises(ValueError, match="fields are question"):
        build_model("clip-zeroshot", {"template": "{nope}"})
    with pytest.raises(ValueError, match="not an open_clip model"):
        build_model("clip-zeroshot", {"arch": "no-such-arch"})
    # a path that names nothing: one line naming the argument (inputs.backbone.locate_pretrained)
    with pytest.raises(ValueError, match="--model-arg pretrained=.*missing.pt.*no open_clip folder"):
        build_model("clip-zeroshot", {"arch": "tiny-clip-test", "model_config": str(tiny_config),
                                      "pretrained": str(tiny_config.parent / "missing.pt")})


@pytest.mark.filterwarnings("ignore::UserWarning")  # the expected random-weights warning
def test_cached_embeddings_give_the_uncached_scores_and_encode_each_image_once(tmp_path, tiny_config):
    from eval.runner import evaluate
    bench = make_tiny_benchmark(tmp_path / "b", n_scenes=2)
    args = {"arch": "tiny-clip-test", "model_config": str(tiny_config)}
    scores, adapters = {}, {}
    for size in (0, 65536):
        out = tmp_path / f"o{size}"
        adapters[size] = build_model("clip-zeroshot", {**args, "cache_size": size})
        evaluate(bench, adapters[size], out, settings=["+0", "+2", "all"], progress=False, plots=False, n_boot=10)
        scores[size] = {r["key"]: r["scores"] for r in map(json.loads, (out / "predictions.jsonl").open())}
    assert scores[0].keys() == scores[65536].keys() and len(scores[0]) > 4
    for q, s in scores[0].items():
        assert s == pytest.approx(scores[65536][q], abs=1e-5), q
    images = {p.resolve() for p in bench.rglob("*.png")}
    cached, uncached = adapters[65536].n_encoded, adapters[0].n_encoded
    assert cached["images"] <= len(images) < uncached["images"]  # each image once, not once a query
    assert cached["captions"] < uncached["captions"]
    with pytest.raises(ValueError, match="cache_size"):
        build_model("clip-zeroshot", {**args, "cache_size": -1})
