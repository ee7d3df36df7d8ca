"""Metrics against hand computations: accuracy tables, distraction decay, necessity gap,
bootstrap intervals, paired comparison, failure taxonomy."""
from __future__ import annotations

import numpy as np

from eval.compare import paired_compare
from eval.metrics import score_units
from eval.summary import summarize

K = {"SVS": 3, "MVN": 2}


def rec(sid, setting, correct, subset="SVS", cluster=None, variant="", rotation=0, n_rot=1, letter=None,
        chosen_type=None, failed=False, task="t", n_options=4, primary=None):
    return {"key": f"{sid}|{setting}|{variant}|r{rotation}", "sample_id": sid, "setting": setting, "variant": variant,
            "rotation": rotation, "n_rotations": n_rot, "correct": correct, "failed": failed,
            "letter": None if failed else (letter or ("A" if correct else "B")), "answer": "A",
            "method": "failed" if failed else "letter", "chosen_type": chosen_type, "subset": subset, "task": task,
            "axis": "spatial", "granularity": "coarse", "cluster": cluster or sid, "n_options": n_options,
            "primary": setting == "+0" if primary is None else primary}


def hand_records():
    """SVS: +0 100, +1 50, +2 0, +3 100 -> delta_SVS 50. MVN: +0 75, +1 50, +2 100 -> delta_MVN 0;
    -1 per sample (mean over dropped views) .5, 1, 0, .5 -> 50; gap 75 - 50 = 25; delta_dis 25."""
    r = []
    for sid, flags in (("s1", (1, 1, 0, 1)), ("s2", (1, 0, 0, 1))):
        for setting, ok in zip(("+0", "+1", "+2", "+3"), flags):
            r.append(rec(sid, setting, bool(ok)))
    mvn = {"m1": (1, 1, 1, (1, 0)), "m2": (1, 1, 1, (1, 1)), "m3": (1, 0, 1, (0, 0)), "m4": (0, 0, 1, (1, 0))}
    for sid, (a0, a1, a2, minus) in mvn.items():
        for setting, ok in (("+0", a0), ("+1", a1), ("+2", a2)):
            r.append(rec(sid, setting, bool(ok), subset="MVN"))
        for i, ok in enumerate(minus):
            r.append(rec(sid, "-1", bool(ok), subset="MVN", variant=f"drop=v{i}"))
    return r


def test_decay_and_gap_match_hand_computation():
    s = summarize(hand_records(), K, n_boot=200, seed=0)
    assert s["acc"]["+0"] == {"SVS": 100.0, "MVN": 75.0, "overall": 83.33}
    assert s["acc"]["+1"]["SVS"] == 50.0 and s["acc"]["+2"]["SVS"] == 0.0 and s["acc"]["+3"]["SVS"] == 100.0
    assert s["acc"]["-1"]["MVN"] == 50.0
    assert s["delta_dis_by_subset"] == {"SVS": 50.0, "MVN": 0.0}
    assert s["delta_dis"] == 25.0
    assert s["necessity_gap"] == 25.0
    assert s["n_samples"] == 6
    assert s["chance"]["SVS"] == 25.0
    for key in ("delta_dis", "necessity_gap"):
        lo, hi = s[f"{key}_ci"]
        assert lo <= s[key] <= hi


def test_decay_uses_only_k_up_to_K():
    s = summarize(hand_records(), {"SVS": 1, "MVN": 1}, n_boot=50, seed=0)
    assert s["delta_dis_by_subset"] == {"SVS": 50.0, "MVN": 25.0}


def test_circular_counts_a_sample_only_if_every_rotation_is_right():
    r = [rec("a", "+0", True, rotation=i, n_rot=4) for i in range(4)]
    r += [rec("b", "+0", i != 2, rotation=i, n_rot=4) for i in range(4)]
    units = score_units(r)
    assert [u.score for u in units] == [1.0, 0.0]
    s = summarize(r, K, n_boot=50)
    assert s["acc"]["+0"]["SVS"] == 50.0
    assert s["acc_chance"]["+0"]["SVS"] == round(100 * 0.25 ** 4, 2)  # random must hit all 4 rotations


def _bernoulli_records(n, p, seed):
    rng = np.random.default_rng(seed)
    return [rec(f"s{i}", "+0", bool(rng.random() < p), cluster=f"c{i // 2}") for i in range(n)]


def test_bootstrap_interval_contains_estimate_and_narrows_with_n():
    widths = []
    for n in (40, 400):
        s = summarize(_bernoulli_records(n, 0.6, seed=1), K, n_boot=400, seed=0)
        est, (lo, hi) = s["acc"]["+0"]["SVS"], s["acc_ci"]["+0"]["SVS"]
        assert lo <= est <= hi
        widths.append(hi - lo)
    assert widths[1] < widths[0] / 2


def test_bootstrap_is_seeded():
    r = _bernoulli_records(60, 0.5, seed=2)
    assert summarize(r, K, n_boot=100, seed=3)["acc_ci"] == summarize(r, K, n_boot=100, seed=3)["acc_ci"]
    assert summarize(r, K, n_boot=100, seed=3)["acc_ci"] != summarize(r, K, n_boot=100, seed=4)["acc_ci"]


def test_paired_comparison():
    a = _bernoulli_records(200, 0.5, seed=5)
    same = paired_compare(score_units(a), score_units(a), K, n_boot=200)
    first = next(iter(same.values()))
    assert first["diff"] == 0.0 and first["p"] == 1.0
    better = [dict(x, correct=True) for x in a]  # every answer right
    res = paired_compare(score_units(a), score_units(better), K, n_boot=200)["+0 SVS"]
    assert res["diff"] == round(100.0 - res["a"], 2)
    assert res["ci"][0] > 0 and res["p"] < 0.05


def test_failure_taxonomy_histogram_and_parse_rates():
    r = [rec("a", "+0", True),
         rec("b", "+0", False, letter="B", chosen_type="naive_sum"),
         rec("c", "+0", False, letter="C", chosen_type="naive_sum"),
         rec("d", "+0", False, letter="D"),
         rec("e", "+0", False, failed=True)]
    s = summarize(r, K, n_boot=20)
    assert s["failure_taxonomy"] == {"naive_sum": 2, "parse_failure": 1, "untyped": 1}
    assert s["letter_histogram"]["predicted"] == {"A": 1, "B": 1, "C": 1, "D": 1, "none": 1}
    assert s["letter_histogram"]["gold"]["A"] == 5
    assert s["parse_failure_rate"] == 20.0 and s["fallback_rate"] == 0.0


def test_by_task_and_axis_use_primary_setting():
    r = [rec("a", "+0", True, task="count"), rec("a", "+1", False, task="count"),
         rec("b", "all", False, subset="no_subset", task="relation", primary=True)]
    s = summarize(r, K, n_boot=20)
    assert s["by_task"] == {"count": 100.0, "relation": 0.0}
    assert s["by_axis_granularity"]["spatial"]["all"] == 50.0
    assert s["by_task_setting"]["count"] == {"+0": 100.0, "+1": 0.0}
