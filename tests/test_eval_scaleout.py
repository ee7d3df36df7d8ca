"""Scale-out of the evaluator: a run-wide request pool, sharded runs merged by `finish`,
resume that tells identity from throughput, provenance in run.json and summary.json,
compare in md / csv / json with overlaid curves."""
from __future__ import annotations

import csv
import io
import json
import threading
import time
from pathlib import Path

import pytest

from eval.__main__ import main
from eval.adapters.hf_common import auto_device
from eval.adapters.openai_compat import EndpointError
from eval.errors import EvalInputError
from eval.plan import launcher_shard, parse_shard, plan_run, shard_plan
from eval.runner import evaluate

FAST = dict(progress=False, plots=False, n_boot=50)


def _openai(server, **extra) -> dict:
    return {"base_url": server.url, "model": "fake-gpt", "api_key_env": "", "retries": 0, "timeout": 20, **extra}


def _lines(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]


# ---- the request pool ---------------------------------------------------------------------

def test_concurrency_is_independent_of_the_batch_size(tiny_bench, tmp_path, endpoint):
    server = endpoint(delay=1.0)  # long enough that all 16 workers overlap even on a loaded machine
    s = evaluate(tiny_bench, "openai", tmp_path / "o", batch_size=8, model_args=_openai(server, concurrency=16),
                 **FAST)
    assert server.peak_in_flight == 16  # not 8, the batch size
    assert server.count == s["n_queries"] == 60  # each query asked once
    assert len(server.connections) <= 16  # kept-alive: one connection per worker, not one per request


def test_answers_are_written_as_they_arrive(tiny_bench, tmp_path, endpoint):
    server = endpoint()
    release = server.hold_first_request()
    out = tmp_path / "o"
    thread = threading.Thread(target=evaluate, args=(tiny_bench, "openai", out),
                              kwargs=dict(batch_size=8, model_args=_openai(server, concurrency=4), **FAST))
    thread.start()
    try:
        deadline = time.monotonic() + 30  # a bound on waiting, not a speed requirement
        while time.monotonic() < deadline:
            written = (out / "predictions.jsonl").read_text().count("\n") if (out / "predictions.jsonl").exists() else 0
            if written >= 8:
                break
            time.sleep(0.05)
        assert written >= 8  # later answers are on disk while the first request of the batch is still held
    finally:
        release.set()
        thread.join(60)
    assert len(_lines(out)) == 60


def test_a_run_wide_failure_keeps_every_paid_answer(tiny_bench, tmp_path, endpoint):
    server = endpoint(script=["ok"] * 11, after="401")
    with pytest.raises(EndpointError):
        evaluate(tiny_bench, "openai", tmp_path / "o", batch_size=8, model_args=_openai(server, concurrency=4), **FAST)
    assert len(_lines(tmp_path / "o")) == 11  # answers that came back with the failing ones are kept


# ---- resume: identity vs throughput ---------------------------------------------------------

def test_resume_with_changed_throughput_appends(tiny_bench, tmp_path, endpoint):
    server = endpoint()
    out = tmp_path / "o"
    evaluate(tiny_bench, "openai", out, limit=2, model_args=_openai(server, concurrency=2), **FAST)
    first = server.count
    s = evaluate(tiny_bench, "openai", out, batch_size=3, **FAST,
                 model_args=_openai(server, concurrency=5, timeout=7.5, retries=2, backoff=0.5))
    assert server.count == s["n_queries"] and first < s["n_queries"]  # only the rest was sent
    run = json.loads((out / "run.json").read_text())
    assert run["throughput_args"] == {"concurrency": 5, "timeout": 7.5, "retries": 2, "backoff": 0.5}
    assert "concurrency" not in run["model_args"]
    assert [i["throughput_args"]["concurrency"] for i in run["invocations"]] == [2, 5]


def test_changed_identity_names_every_key_and_both_values(tiny_bench, tmp_path):
    out = tmp_path / "r"
    evaluate(tiny_bench, "random", out, model_args={"seed": 1}, **FAST)
    with pytest.raises(EvalInputError) as err:
        evaluate(tiny_bench, "random", out, model_args={"seed": 5}, seed=2, circular=True, **FAST)
    text = str(err.value)
    for expected in ("model_args.seed was 1, now 5", "seed was 0, now 2", "circular was false, now true"):
        assert expected in text, text


def test_an_older_manifest_with_throughput_args_in_model_args_resumes(tiny_bench, tmp_path, endpoint):
    server = endpoint()
    out = tmp_path / "o"
    evaluate(tiny_bench, "openai", out, limit=1, model_args=_openai(server), **FAST)
    run = json.loads((out / "run.json").read_text())
    run["model_args"].update(concurrency=3, timeout=99.0)  # how run.json looked before throughput args
    (out / "run.json").write_text(json.dumps(run))
    evaluate(tiny_bench, "openai", out, model_args=_openai(server), **FAST)


# ---- sharding -------------------------------------------------------------------------------

def test_shard_plans_partition_the_plan(tiny_bench):
    from bench.format import load_benchmark
    from bench.protocol import ProtocolConfig
    planned = plan_run(load_benchmark(tiny_bench), ["+0", "+1", "-1", "all"], ProtocolConfig(), 0, False)
    parts = [shard_plan(planned, (r, 3)) for r in range(3)]
    keys = [pq.key for part in parts for pq in part]
    assert sorted(keys) == sorted(pq.key for pq in planned) and len(set(keys)) == len(keys)
    assert all(parts)
    assert parse_shard("1/3") == (1, 3)
    with pytest.raises(ValueError):
        parse_shard("3/3")
    assert launcher_shard({"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}) == (1, 4)
    assert launcher_shard({"WORLD_SIZE": "1"}) is None and launcher_shard({}) is None
    assert auto_device(True, {"LOCAL_RANK": "3"}) == "cuda:3"
    assert auto_device(True, {}) == "cuda" and auto_device(False, {"LOCAL_RANK": "3"}) == "cpu"


def test_two_shards_and_finish_equal_an_unsharded_run(tiny_bench, tmp_path, monkeypatch, capsys):
    common = ["--bench", str(tiny_bench), "--model", "random", "--model-arg", "seed=3", "--no-progress",
              "--n-boot", "50", "--no-plots"]
    assert main(["run", "--out", str(tmp_path / "whole")] + common) == 0
    whole = json.loads((tmp_path / "whole" / "summary.json").read_text())
    out = tmp_path / "sharded"
    assert main(["run", "--out", str(out), "--shard", "0/2"] + common) == 0
    assert not (out / "summary.json").exists() and (out / "predictions.shard-0-of-2.jsonl").is_file()
    capsys.readouterr()
    assert main(["finish", str(out)]) == 1  # shard 1 has not run yet
    assert "unanswered" in capsys.readouterr().err
    monkeypatch.setenv("RANK", "1")  # as torchrun starts the second process
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert main(["run", "--out", str(out)] + common) == 0  # the last shard writes the summary
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    merged = json.loads((out / "summary.json").read_text())
    assert merged == whole
    assert not list(out.glob("predictions.shard-*"))
    assert sorted(r["key"] for r in _lines(out)) == sorted(r["key"] for r in _lines(tmp_path / "whole"))
    assert main(["finish", str(out)]) == 0 and json.loads((out / "summary.json").read_text()) == whole
    run = json.loads((out / "run.json").read_text())
    assert sorted(tuple(i["shard"]) for i in run["invocations"]) == [(0, 2), (1, 2)]


# ---- provenance -------------------------------------------------------------------------------

def test_run_json_and_summary_record_provenance_and_usage(tiny_bench, tmp_path, endpoint):
    server = endpoint()
    out = tmp_path / "o"
    s = evaluate(tiny_bench, "openai", out, limit=2, model_args=_openai(server), **FAST)
    run = json.loads((out / "run.json").read_text())
    for key in ("created_at", "finished_at", "wall_seconds", "git", "versions", "device", "images_sha256",
                "n_images", "host", "invocations", "model_provenance"):
        assert key in run, key
    assert run["created_at"].endswith("Z") and run["finished_at"] >= run["created_at"]
    assert run["git"] is None or set(run["git"]) == {"commit", "dirty"}
    assert set(run["versions"]) >= {"python", "torch", "transformers", "open_clip", "crossview-baseline"}
    assert run["model_provenance"]["served_model"] == ["fake-gpt"]
    assert run["device"] == f"endpoint {server.origin}"
    assert s["schema_version"] == 2
    n = s["n_queries"]
    assert s["usage"] == {"prompt_tokens": 10 * n, "completion_tokens": 5 * n, "seconds": s["usage"]["seconds"],
                          "attempts": n, "errors": 0}


def test_compare_formats_and_curves(tiny_bench, tmp_path, capsys):
    for name, model in (("a", "oracle"), ("b", "random")):
        evaluate(tiny_bench, model, tmp_path / name, **FAST)
    runs = [str(tmp_path / "a"), str(tmp_path / "b")]
    assert main(["compare", *runs, "--n-boot", "50", "--format", "json", "--plot", str(tmp_path / "c.png")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["model"] for r in data["runs"]] == ["oracle", "random"]
    assert data["runs"][0]["metrics"]["acc +0 overall"] == 100.0
    assert any(p["metric"] == "delta_dis" for p in data["paired"])
    assert (tmp_path / "c.png").stat().st_size > 1000
    assert main(["compare", *runs, "--n-boot", "50", "--format", "csv", "--out", str(tmp_path / "c.csv")]) == 0
    rows = list(csv.DictReader(io.StringIO((tmp_path / "c.csv").read_text())))
    assert {r["kind"] for r in rows} == {"metric", "paired"}
    assert any(r["kind"] == "paired" and r["metric"] == "necessity_gap" for r in rows)
