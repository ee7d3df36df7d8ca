"""The OpenAI-compatible adapter against a local HTTP server started by the test: retries on
429/5xx, resume without re-sending, images as data URLs, and a key that never leaks."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.__main__ import main
from eval.adapters.openai_compat import EndpointError
from eval.runner import evaluate
from eval.fake_endpoint import FakeEndpoint, error_reply
from bench.tiny import make_tiny_benchmark

SECRET = "sk-test-DO-NOT-LEAK-1234567890"
FAST = dict(progress=False, plots=False, n_boot=20)


@pytest.fixture
def bench(tmp_path) -> Path:
    return make_tiny_benchmark(tmp_path / "bench", n_scenes=2, image_size=8)


@pytest.fixture(autouse=True)
def secret_key(monkeypatch):
    monkeypatch.setenv("TEST_ENDPOINT_KEY", SECRET)


def _args(server: FakeEndpoint, **extra) -> dict:
    return {"base_url": server.url, "model": "fake-gpt", "api_key_env": "TEST_ENDPOINT_KEY", "backoff": 0.01,
            "retries": 3, "timeout": 10.0, **extra}


def _lines(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]


def test_survives_429_then_500_then_answers(endpoint, bench, tmp_path):
    server = endpoint(script=["429", "500"])
    s = evaluate(bench, "openai", tmp_path / "o", settings="+0", limit=1, model_args=_args(server), **FAST)
    assert server.count == 3  # two failures retried, one good answer
    (rec,) = _lines(tmp_path / "o")
    assert rec["raw"] == "The answer is (B)." and rec["letter"] == "B" and rec["meta"]["attempts"] == 3
    assert rec["meta"]["usage"] == {"prompt_tokens": 10, "completion_tokens": 5}
    assert s["parse_failure_rate"] == 0.0


def test_killed_run_resumes_without_resending(endpoint, bench, tmp_path):
    """The server dies after 5 answers; the rerun asks only what predictions.jsonl lacks."""
    broken = endpoint(script=["ok"] * 5, after="503")
    with pytest.raises(EndpointError, match="gave up after 2 attempts: HTTP 503"):
        evaluate(bench, "openai", tmp_path / "o", batch_size=1, model_args=_args(broken, retries=1, concurrency=1),
                 **FAST)
    written = _lines(tmp_path / "o")
    assert len(written) == 5 and broken.count == 5 + 2  # 5 answers, then one query tried twice
    # base_url is part of the manifest, so the rerun talks to the same address: the server recovers
    broken.script, broken.after = [], "ok"
    s = evaluate(bench, "openai", tmp_path / "o", batch_size=1, model_args=_args(broken, retries=1, concurrency=3),
                 **FAST)  # concurrency is a throughput argument: the resume may change it
    assert broken.count - 7 == s["n_queries"] - 5  # only the unfinished queries were sent
    assert len(_lines(tmp_path / "o")) == s["n_queries"]


def test_limit_then_full_rerun_sends_only_the_rest(endpoint, bench, tmp_path):
    server = endpoint()
    common = ["run", "--bench", str(bench), "--model", "openai", "--out", str(tmp_path / "o"), "--no-progress",
              "--no-plots", "--n-boot", "20", "--batch-size", "3"]
    common += [x for k, v in _args(server, concurrency=3).items() for x in ("--model-arg", f"{k}={v}")]
    assert main(common + ["--limit", "2"]) == 0
    first = server.count
    assert first == len(_lines(tmp_path / "o")) > 0
    assert main(common) == 0
    total = json.loads((tmp_path / "o" / "summary.json").read_text())["n_queries"]
    assert server.count == total  # nothing asked twice


def test_images_are_data_urls_in_prompt_order(endpoint, bench, tmp_path):
    server = endpoint()
    evaluate(bench, "openai", tmp_path / "o", settings="all", limit=4, model_args=_args(server), **FAST)
    (body,) = server.bodies  # one sample without a subset among the first four
    parts = body["messages"][0]["content"]
    images = [p for p in parts if p["type"] == "image_url"]
    assert len(images) == 4 and all(p["image_url"]["url"].startswith("data:image/png;base64,") for p in images)
    assert parts[0] == {"type": "text", "text": "View 1: "} and parts[1]["type"] == "image_url"
    assert body["temperature"] == 0 and body["max_tokens"] == 64 and body["model"] == "fake-gpt"


def test_resized_frames_and_a_refused_query(endpoint, bench, tmp_path):
    refusal = lambda handler, body: error_reply(400, "This model's maximum context length is 8192 tokens.")
    server = endpoint(script=[refusal])
    evaluate(bench, "openai", tmp_path / "o", settings="+0", limit=2,
             model_args=_args(server, resolution="fixed:16x12", concurrency=1), **FAST)
    recs = _lines(tmp_path / "o")
    assert recs[0]["raw"] == "" and recs[0]["failed"] and "HTTP 400" in recs[0]["meta"]["error"]
    assert server.count == len(recs)  # a 400 is not retried
    assert recs[1]["meta"]["image_sizes"] == [[16, 12]] * len(recs[1]["view_order"])


def test_key_never_leaks(endpoint, bench, tmp_path, capsys):
    server = endpoint(script=["401"])
    with pytest.raises(EndpointError) as err:
        evaluate(bench, "openai", tmp_path / "bad", settings="+0", limit=1, model_args=_args(server), **FAST)
    assert "HTTP 401" in str(err.value) and SECRET not in str(err.value)
    evaluate(bench, "openai", tmp_path / "o", settings="+0", limit=2, model_args=_args(server), **FAST)
    assert set(server.auth) == {f"Bearer {SECRET}"}  # the key is sent ...
    captured = capsys.readouterr()
    for out in (tmp_path / "o", tmp_path / "bad"):  # ... and written nowhere
        for f in out.iterdir():
            assert SECRET not in f.read_text(errors="replace"), f
    assert SECRET not in captured.out + captured.err
    assert json.loads((tmp_path / "o" / "run.json").read_text())["model_args"]["api_key_env"] == "TEST_ENDPOINT_KEY"


def test_missing_key_variable_is_a_usage_error(bench, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TEST_ENDPOINT_KEY")
    code = main(["run", "--bench", str(bench), "--model", "openai", "--out", str(tmp_path / "o"),
                 "--model-arg", "model=x", "--model-arg", "api_key_env=TEST_ENDPOINT_KEY"])
    assert code == 2 and "TEST_ENDPOINT_KEY is not set" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
