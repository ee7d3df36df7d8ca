"""The protocol: which views each setting shows, seeded orders, circular rotation, the prompt."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.format import Frame, Sample, View, load_benchmark
from bench.prompt import build_extract_prompt, build_prompt
from bench.protocol import ProtocolConfig, check_settings, plan_queries, primary_setting, seeded_order, view_sets
from eval.circular import n_rotations, rotate_sample

SNAPSHOT = Path(__file__).parent / "snapshots" / "eval_prompt.txt"


def _by_id(bench, sid):
    return next(s for s in bench if s.id == sid)


def test_settings_per_subset(tiny_bench):
    bench = load_benchmark(tiny_bench)
    proto = ProtocolConfig()
    svs, mvn, nota, cv = (_by_id(bench, f"s000-{k}") for k in ("svs", "mvn", "nota", "all"))
    settings = ["+0", "+1", "+2", "+3", "-1", "all"]
    assert [q.setting for q in plan_queries(svs, settings, proto, 0)] == ["+0", "+1", "+2", "+3"]
    assert [q.setting for q in plan_queries(mvn, settings, proto, 0)] == ["+0", "+1", "+2", "-1", "-1"]
    assert [q.setting for q in plan_queries(cv, settings, proto, 0)] == ["all"]
    # +k = V_GT plus the first k extra views, in any order
    assert sorted(view_sets(svs, "+2", proto, 0)[0][1]) == sorted(svs.gt_views + svs.extra_views[:2])
    assert view_sets(nota, "+0", proto, 0) == [("", nota.gt_views)]
    assert sorted(view_sets(cv, "all", proto, 0)[0][1]) == [v.view_id for v in cv.views]
    assert primary_setting(cv) == "all" and primary_setting(svs) == "+0"


def test_k_is_configurable(tiny_bench):
    bench = load_benchmark(tiny_bench)
    svs, mvn = _by_id(bench, "s001-svs"), _by_id(bench, "s001-mvn")
    proto = ProtocolConfig(max_extra={"SVS": 1, "MVN": 0})
    assert view_sets(svs, "+2", proto, 0) == [] and len(view_sets(svs, "+1", proto, 0)) == 1
    assert view_sets(mvn, "+1", proto, 0) == []
    assert check_settings(["+2"], proto)  # beyond every K


def test_minus_one_each_seeded_and_single_gt(tiny_bench):
    bench = load_benchmark(tiny_bench)
    mvn, svs = _by_id(bench, "s002-mvn"), _by_id(bench, "s002-svs")
    each = view_sets(mvn, "-1", ProtocolConfig(minus_one="each"), 0)
    assert [v for v, _ in each] == [f"drop={g}" for g in mvn.gt_views]
    for variant, ids in each:
        assert len(ids) == len(mvn.gt_views) - 1 and variant[5:] not in ids
    seeded = view_sets(mvn, "-1", ProtocolConfig(minus_one="seeded"), 0)
    assert len(seeded) == 1 and seeded[0] in each
    assert view_sets(svs, "-1", ProtocolConfig(), 0) == []  # SVS has no -1
    single = Sample(id="x", task="t", question="q?", options=["a", "b"], answer="A", subset="MVN",
                    views=[View("c0", [Frame(0.0, "i.png")])], gt_views=["c0"])
    assert view_sets(single, "-1", ProtocolConfig(), 0) == []  # one gt view: no -1


def test_view_order_is_seeded_and_stable():
    ids = [f"cam{i}" for i in range(6)]
    a = seeded_order(ids, 0, "s1", "all")
    assert a == seeded_order(ids, 0, "s1", "all")  # same seed: same order
    assert sorted(a) == ids
    orders = {seeded_order(ids, seed, "s1", "all") for seed in range(20)}
    assert len(orders) > 10  # --seed changes the order
    assert seeded_order(ids, 0, "s1", "+3") != a or seeded_order(ids, 0, "s2", "all") != a
    # sha256-based: a fixed value that never depends on the process (no Python hash()).
    assert seeded_order(["a", "b", "c", "d"], 7, "id", "+0") == seeded_order(["d", "c", "b", "a"], 7, "id", "+0")


def test_circular_rotation_pins_nota_and_remaps_letters(tiny_bench):
    bench = load_benchmark(tiny_bench)
    nota = _by_id(bench, "s001-nota")  # answer B, distractor C
    assert n_rotations(nota, True) == 4 and n_rotations(nota, False) == 1
    seen_answers = set()
    for r in range(4):
        rot = rotate_sample(nota, r)
        assert rot.options[-1] == "None of the above"
        assert sorted(rot.options[:4]) == sorted(nota.options[:4])
        assert rot.options[rot.answer_index] == nota.options[nota.answer_index]
        for letter, kind in rot.distractors.items():
            orig = next(k for k, v in nota.distractors.items() if v == kind)
            assert rot.options["ABCDE".index(letter)] == nota.options["ABCDE".index(orig)]
        seen_answers.add(rot.answer)
    assert seen_answers == set("ABCD")
    # a NOTA answer stays last in every rotation
    e_sample = Sample(id="e", task="t", question="q?", options=["1", "2", "3", "None of the above"], answer="D",
                      views=nota.views, gt_views=nota.gt_views, distractors={"A": "x"})
    assert {rotate_sample(e_sample, r).answer for r in range(3)} == {"D"}


def _snapshot_sample() -> tuple[Sample, list[View]]:
    views = [View("cam2", [Frame(0.0, "a.png")]), View("cam0", [Frame(0.0, "b.png")])]
    temporal = [View("cam1", [Frame(0.0, "c0.png"), Frame(0.5, "c1.png")]),
                View("cam3", [Frame(0.0, "d0.png"), Frame(0.5, "d1.png")])]
    sample = Sample(id="snap", task="dedup_count", question="How many different people are in the scene?",
                    options=["2", "3", "4", "5", "None of the above"], answer="B", views=views + temporal,
                    gt_views=["cam2", "cam0"])
    return sample, views, temporal


def test_prompt_snapshot():
    sample, views, temporal = _snapshot_sample()
    text = "\n=====\n".join([build_prompt(sample, views), build_prompt(sample, temporal),
                             build_prompt(sample, views[:1]), build_extract_prompt(sample, "I think three.")]) + "\n"
    if os.environ.get("UPDATE_SNAPSHOTS") or not SNAPSHOT.exists():
        if not os.environ.get("UPDATE_SNAPSHOTS"):
            pytest.fail(f"missing snapshot {SNAPSHOT}; run with UPDATE_SNAPSHOTS=1 once and commit it")
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(text)
    assert text == SNAPSHOT.read_text(), "the prompt changed; if on purpose, rerun with UPDATE_SNAPSHOTS=1"


def test_prompt_has_one_image_token_per_frame():
    sample, views, temporal = _snapshot_sample()
    assert build_prompt(sample, temporal).count("<image>") == 4
    prompt = build_prompt(sample, views)
    assert "cam2" not in prompt and "cam0" not in prompt  # view ids never leak


def test_every_cli_takes_its_protocol_defaults_from_protocol_config():
    """python -m eval run / import and python -m bench export: no copied K_T, minus_one or n_boot."""
    from bench.__main__ import build_parser as bench_parser
    from bench.constants import DEFAULT_N_BOOT, K_T
    from bench.protocol import protocol_from_arguments
    from eval.__main__ import build_parser as eval_parser
    commands = [(eval_parser(), ["run", "--bench", "b", "--model", "random", "--out", "o"]),
                (eval_parser(), ["import", "lmms-eval", "f.jsonl", "--bench", "b", "--out", "o"]),
                (bench_parser(), ["export", "hf", "d", "--out", "o"]),
                (bench_parser(), ["export", "vlmevalkit", "d", "--out", "o"])]
    for parser, argv in commands:
        args = parser.parse_args(argv)
        assert protocol_from_arguments(args) == ProtocolConfig(), argv
        assert getattr(args, "n_boot", DEFAULT_N_BOOT) == DEFAULT_N_BOOT, argv
    assert ProtocolConfig().max_extra == dict(K_T)
    assert protocol_from_arguments(eval_parser().parse_args(commands[0][1] + ["--max-extra-mvn", "1"])).max_extra \
        == {"SVS": K_T["SVS"], "MVN": 1}


def test_stable_hash_and_view_order_golden_values():
    """Query plans must be the same on every machine and Python: golden values, not a self-comparison."""
    from bench.protocol import seeded_order, stable_hash
    assert stable_hash("s000001", "+1", 0) == 5953865738459047262
    assert stable_hash() == 16406829232824261652
    assert seeded_order(["cam0", "cam1", "cam2", "cam3"], 0, "s000001", "+0") == ("cam1", "cam2", "cam3", "cam0")
