"""End-to-end runs on the tiny benchmark: oracle, random, resume, circular, fallback, reports."""
from __future__ import annotations

import json
import pytest

from bench.format import load_benchmark
from eval.__main__ import main
from eval.adapters import ModelAdapter, Response, build_model
from eval.errors import EvalInputError
from eval.runner import evaluate
from bench.tiny import make_tiny_benchmark

FAST = dict(progress=False, plots=False, n_boot=100)


class Recorder(ModelAdapter):
    """Answers like the oracle, remembers every key it was asked, and can crash after N queries."""

    def __init__(self, crash_after: int = -1):
        super().__init__()
        self.crash_after = crash_after  # not an Args field: the manifest must match across the resume
        self.asked: list[str] = []
        self.batch_sizes: list[int] = []

    def generate(self, requests):
        if 0 <= self.crash_after <= len(self.asked):
            raise KeyboardInterrupt  # like Ctrl-C between batches
        self.asked += [r.key for r in requests]
        self.batch_sizes.append(len(requests))
        return [Response(text=f"({r.sample.answer})" if i % 2 else f"The answer is {r.sample.answer}")
                for i, r in enumerate(requests)]


class Mumbler(ModelAdapter):
    def generate(self, requests):
        return [Response(text="Hard to say from these views.") for _ in requests]


def test_oracle_cli_scores_100_and_zero_decay(tiny_bench, tmp_path, capsys):
    out = tmp_path / "oracle"
    assert main(["run", "--bench", str(tiny_bench), "--model", "oracle", "--out", str(out), "--no-progress",
                 "--n-boot", "50"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert all(v == 100.0 for row in s["acc"].values() for v in row.values())
    assert s["delta_dis"] == 0.0 and s["necessity_gap"] == 0.0
    assert s["failure_taxonomy"] == {} and s["parse_failure_rate"] == 0.0
    for key in ("acc", "delta_dis", "delta_dis_by_subset", "necessity_gap", "by_task", "by_axis_granularity",
                "failure_taxonomy", "parse_failure_rate", "fallback_rate", "n_samples", "chance", "acc_ci"):
        assert key in s, key
    assert s["n_samples"] == 16
    report = (out / "report.md").read_text()
    assert "| Random |" in report and "SVS +3" in report and "Temporal fine" in report
    assert (out / "acc_vs_extra_views.png").stat().st_size > 1000 and (out / "per_task.png").exists()
    lines = (out / "predictions.jsonl").read_text().splitlines()
    assert len(lines) == s["n_queries"] == 60
    assert all(json.loads(x)["raw"] for x in lines)  # the raw output is kept
    assert "SVS +0" in capsys.readouterr().out


def test_random_is_within_its_interval_of_chance(tmp_path):
    bench = make_tiny_benchmark(tmp_path / "b", n_scenes=15, image_size=8)
    s = evaluate(bench, "random", tmp_path / "r", model_args={"seed": 1}, n_boot=300, progress=False, plots=False)
    lo, hi = s["by_axis_granularity_ci"]["overall"]["all"]
    assert lo <= s["by_axis_granularity_chance"]["overall"]["all"] <= hi
    lo, hi = s["acc_ci"]["+0"]["overall"]
    assert lo <= s["acc_chance"]["+0"]["overall"] <= hi


def test_resume_never_asks_twice_and_gives_the_same_summary(tiny_bench, tmp_path):
    bench = load_benchmark(tiny_bench)
    full = Recorder()
    expected = evaluate(bench, full, tmp_path / "full", batch_size=4, **FAST)
    crashing = Recorder(crash_after=8)
    with pytest.raises(KeyboardInterrupt):
        evaluate(bench, crashing, tmp_path / "part", batch_size=4, **FAST)
    assert len((tmp_path / "part" / "predictions.jsonl").read_text().splitlines()) == 8
    with open(tmp_path / "part" / "predictions.jsonl", "a") as fh:
        fh.write('{"key": "half a line')  # a write cut short by the kill
    rest = Recorder()
    resumed = evaluate(bench, rest, tmp_path / "part", batch_size=4, **FAST)
    assert not set(crashing.asked) & set(rest.asked)
    assert sorted(crashing.asked + rest.asked) == sorted(full.asked)
    assert resumed == expected
    again = Recorder()
    assert evaluate(bench, again, tmp_path / "part", batch_size=4, **FAST) == expected
    assert again.asked == []  # a finished run asks nothing
    assert max(full.batch_sizes) == 4


def test_refuses_to_mix_runs(tiny_bench, tmp_path):
    out = tmp_path / "run"
    evaluate(tiny_bench, "random", out, seed=0, **FAST)
    before = (out / "predictions.jsonl").read_bytes()
    for kwargs in ({"seed": 1}, {"circular": True}, {"model_args": {"seed": 5}}):
        with pytest.raises(EvalInputError) as err:
            evaluate(tiny_bench, "random", out, **{"seed": 0, **kwargs}, **FAST)
        assert "different run" in str(err.value)
    with pytest.raises(EvalInputError):
        evaluate(tiny_bench, "first", out, **FAST)
    assert (out / "predictions.jsonl").read_bytes() == before


def test_seed_changes_view_orders(tiny_bench, tmp_path):
    def orders(seed):
        evaluate(tiny_bench, "first", tmp_path / f"s{seed}", seed=seed, settings="all", **FAST)
        lines = (tmp_path / f"s{seed}" / "predictions.jsonl").read_text().splitlines()
        return [json.loads(x)["view_order"] for x in lines]
    assert orders(0) != orders(1)
    assert orders(0) == orders(0)


def test_circular_oracle_and_first(tiny_bench, tmp_path):
    s = evaluate(tiny_bench, "oracle", tmp_path / "o", circular=True, **FAST)
    assert s["acc"]["+0"]["overall"] == 100.0
    lines = [json.loads(x) for x in (tmp_path / "o" / "predictions.jsonl").read_text().splitlines()]
    nota = [x for x in lines if x["sample_id"] == "s000-nota" and x["setting"] == "+0"]
    assert [x["rotation"] for x in nota] == [0, 1, 2, 3]  # 4 rotations; NOTA stays E
    assert {x["answer"] for x in nota} == set("ABCD")
    first = evaluate(tiny_bench, "first", tmp_path / "f", circular=True, **FAST)
    assert first["acc"]["+0"]["overall"] == 0.0  # "always A" cannot pass every rotation


def test_fallback_extractor_and_scores(tiny_bench, tmp_path):
    s = evaluate(tiny_bench, Mumbler(), tmp_path / "m", settings="+0", **FAST)
    assert s["parse_failure_rate"] == 100.0 and s["failure_taxonomy"] == {"parse_failure": 12}
    s = evaluate(tiny_bench, Mumbler(), tmp_path / "fb", settings="+0", fallback="oracle",
                 fallback_args={"output": "letter"}, **FAST)
    assert s["fallback_rate"] == 100.0 and s["parse_failure_rate"] == 0.0 and s["acc"]["+0"]["overall"] == 100.0
    line = json.loads((tmp_path / "fb" / "predictions.jsonl").read_text().splitlines()[0])
    assert line["raw"] == "Hard to say from these views." and line["method"] == "fallback" and line["fallback_raw"]
    s = evaluate(tiny_bench, build_model("oracle", {"output": "scores"}), tmp_path / "sc", settings="+0", **FAST)
    assert s["parse_methods"] == {"scores": 12} and s["acc"]["+0"]["overall"] == 100.0


def test_limit_settings_and_reference_rows(tiny_bench, tmp_path, capsys):
    blind = tmp_path / "blind"
    evaluate(tiny_bench, "majority", blind, **FAST)
    human = tmp_path / "human.json"
    human.write_text(json.dumps({"spatial": {"coarse": 93.0, "fine": 90.5, "all": 91.7}, "overall": {"all": 91.0}}))
    out = tmp_path / "run"
    assert main(["run", "--bench", str(tiny_bench), "--model", "random", "--out", str(out), "--limit", "8",
                 "--settings=-1,+0", "--blind-run", str(blind), "--human-json", str(human), "--no-progress",
                 "--no-plots", "--n-boot", "50"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["n_samples"] == 6 and s["settings"] == ["+0", "-1"]  # 8 samples, 2 have neither setting
    report = (out / "report.md").read_text()
    assert "| Blind (majority) |" in report and "| Human | 93.0 | 90.5 | 91.7 |" in report
    assert main(["compare", str(blind), str(out), "--n-boot", "50", "--out", str(tmp_path / "cmp.md")]) == 0
    text = capsys.readouterr().out
    assert "Paired differences" in text and "overall (primary setting)" in text and "95 % CI" in text
    assert main(["report", str(out)]) == 0 and (out / "per_task.png").exists()
