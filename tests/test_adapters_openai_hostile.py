"""The key never leaves for anywhere but the endpoint, whatever the endpoint does: redirects
to another origin, error bodies that echo the request headers; redirects and unexplained 4xx
stop the run instead of becoming final empty answers; Retry-After as an HTTP date."""
from __future__ import annotations

import email.utils
import json
import logging
import time
from pathlib import Path

import pytest

from eval.__main__ import main
from eval.adapters.openai_compat import EndpointError
from eval.runner import evaluate
from eval.fake_endpoint import error_reply
from bench.tiny import make_tiny_benchmark

SECRET = "sk-test-DO-NOT-LEAK-1234567890"
FAST = dict(progress=False, plots=False, n_boot=20)


@pytest.fixture
def bench(tmp_path) -> Path:
    return make_tiny_benchmark(tmp_path / "bench", n_scenes=2, image_size=8)


@pytest.fixture(autouse=True)
def secret_key(monkeypatch):
    monkeypatch.setenv("TEST_ENDPOINT_KEY", SECRET)


def _cli(server_url: str, bench: Path, out: Path, **extra) -> list[str]:
    args = {"base_url": server_url, "model": "fake-gpt", "api_key_env": "TEST_ENDPOINT_KEY", "backoff": 0.01,
            "retries": 2, "timeout": 10.0, **extra}
    cmd = ["run", "--bench", str(bench), "--model", "openai", "--out", str(out), "--no-progress", "--no-plots",
           "--n-boot", "20", "--settings", "+0", "--limit", "2"]
    return cmd + [x for k, v in args.items() for x in ("--model-arg", f"{k}={v}")]


def _assert_no_secret(out: Path, captured, caplog) -> None:
    assert SECRET not in captured.out + captured.err
    assert not [r for r in caplog.records if SECRET in r.getMessage()]
    for f in out.rglob("*") if out.exists() else []:
        if f.is_file():
            assert SECRET not in f.read_text(errors="replace"), f


def _redirect_to(target: str):
    def action(handler, body):
        return 302, {"Location": target + "/v1/chat/completions"}, b""
    return action


def test_redirect_to_another_origin_never_gets_the_key(endpoint, bench, tmp_path, capsys, caplog):
    elsewhere = endpoint()  # another local port: another origin
    server = endpoint(after=_redirect_to(elsewhere.origin))
    out = tmp_path / "o"
    code = main(_cli(server.url, bench, out))
    captured = capsys.readouterr()
    assert all(a is None or SECRET not in a for a in elsewhere.auth)
    assert elsewhere.count == 0
    assert code == 1  # a redirect is run-wide: stop, nothing stored as an answer
    err = [line for line in captured.err.splitlines() if line.strip()]
    assert len(err) == 1 and "redirect" in err[0] and server.origin in err[0], err
    assert not (out / "predictions.jsonl").exists() or (out / "predictions.jsonl").read_text() == ""
    _assert_no_secret(out, captured, caplog)


def _echo_headers(status: int, message: str = ""):
    def action(handler, body):
        echoed = {k: v for k, v in handler.headers.items()}
        text = json.dumps({"error": {"message": message or "bad request", "request_headers": echoed}})
        return status, {"Content-Type": "application/json"}, text.encode()
    return action


@pytest.mark.parametrize("status", [400, 401])
def test_echoed_headers_leave_no_key_anywhere(endpoint, bench, tmp_path, capsys, caplog, status):
    caplog.set_level(logging.DEBUG)
    server = endpoint(after=_echo_headers(status))
    out = tmp_path / "o"
    code = main(_cli(server.url, bench, out))
    captured = capsys.readouterr()
    assert set(server.auth) == {f"Bearer {SECRET}"}  # the key did go to the endpoint
    assert code == 1  # 401 is run-wide; so is a 400 that names no per-query reason
    err = [line for line in captured.err.splitlines() if line.strip()]
    assert len(err) == 1 and f"HTTP {status}" in err[0], err
    _assert_no_secret(out, captured, caplog)


def test_a_refused_query_is_stored_without_the_key(endpoint, bench, tmp_path, capsys, caplog):
    server = endpoint(after=_echo_headers(400, "maximum context length exceeded"))
    out = tmp_path / "o"
    assert main(_cli(server.url, bench, out)) == 0
    recs = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert recs and all("HTTP 400" in r["meta"]["error"] and "context length" in r["meta"]["error"] for r in recs)
    _assert_no_secret(out, capsys.readouterr(), caplog)


def test_redirect_ending_in_405_is_not_a_final_answer(endpoint, bench, tmp_path):
    same = endpoint(after="405")
    server = endpoint(after=_redirect_to(same.origin))
    with pytest.raises(EndpointError, match="redirect"):
        evaluate(bench, "openai", tmp_path / "o", settings="+0", limit=1, **FAST,
                 model_args={"base_url": server.url, "model": "m", "api_key_env": "TEST_ENDPOINT_KEY"})
    assert not (tmp_path / "o" / "predictions.jsonl").exists() or \
        (tmp_path / "o" / "predictions.jsonl").read_text() == ""


def test_retry_after_as_an_http_date_is_honoured(endpoint, bench, tmp_path, monkeypatch):
    import eval.adapters.openai_compat as oc
    when = email.utils.formatdate(time.time() + 30, usegmt=True)

    def busy(handler, body):
        status, headers, data = error_reply(429, "slow down")
        return status, {**headers, "Retry-After": when}, data
    server = endpoint(script=[busy])
    waits: list[float] = []
    monkeypatch.setattr(oc, "pause", waits.append)
    evaluate(bench, "openai", tmp_path / "o", settings="+0", limit=1, **FAST,
             model_args={"base_url": server.url, "model": "m", "api_key_env": "TEST_ENDPOINT_KEY", "backoff": 0.01})
    assert len(waits) == 1 and 20 <= waits[0] <= 31, waits  # the date, not the 0.01 s backoff
