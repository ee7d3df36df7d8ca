"""Selection for the temporal axis (``balance.select(joint_caps=True)``): it keeps more of the
same verified questions than the plain path under the same bounds (flat answers, oracle hits
within chance, option keys), uses a question's alternative option sets only to fit option
keys, and the option-set builders offer real alternatives."""
from collections import Counter
from types import SimpleNamespace

import numpy as np

from bench.synth import verify_temporal as vt
from bench.synth.balance import select, value_key
from bench.synth.blind import option_prior_keys, structure_signature
from bench.synth.options_temporal import grid_option_sets, grid_options, twin_option_sets, twin_options

CFG = SimpleNamespace(options=SimpleNamespace(mode="ssmn", none_share=0.2),
                      tasks=SimpleNamespace(major_value_share=0.08, value_cap=1.0, max_task_share=1.0))


def _rec(task: str, answer: str, hit: bool, listed: list[str] | None = None, **kw) -> dict:
    listed = listed or [answer, "x1", "x2", "x3"]
    return {"task": task, "answer_value": answer, "listed": listed, "subset": "MVN", "oracle_correct": hit,
            "value_key": None, **kw}


def _counts(rng) -> list[dict]:
    """Counting questions, 40 per answer; the single-view oracle guesses "0" right far more often."""
    return [_rec("repetition_count", str(v), bool(rng.random() < (0.8 if v == 0 else 0.3)), [str(v), "a", "b", "c"])
            for v in range(5) for _ in range(40)]


def test_joint_caps_keep_more_with_flat_answers_and_oracle_at_chance():
    recs = _counts(np.random.default_rng(0))
    plain = select(recs, CFG, np.random.default_rng(1))
    joint = select(recs, CFG, np.random.default_rng(1), joint_caps=True)
    assert len(joint) >= len(plain) + 30, (len(plain), len(joint))
    values = Counter(value_key(r) for r in joint)
    assert len(values) == 5 and len(set(values.values())) == 1  # exactly flat
    assert sum(r["oracle_correct"] for r in joint) <= 0.25 * len(joint)
    assert len({id(r) for r in joint}) == len(joint)


def test_alternative_option_sets_fit_option_keys():
    """A box that is the answer whenever it is listed is a prior; alternatives that list more boxes fix it."""
    kinds = ["ball", "pole", "chair"]
    recs = []
    for i in range(40):
        truth = f"c{i} box"
        leaky = [truth] + [f"c{i} {k}" for k in kinds]
        alt = [truth, f"d{i} box", f"e{i} box", f"f{i} box"]
        recs.append(_rec("limb_contact_over_time", truth, False, leaky,
                         alternatives=[_rec("limb_contact_over_time", truth, False, alt)]))
    plain = select(recs, CFG, np.random.default_rng(0))
    joint = select(recs, CFG, np.random.default_rng(0), joint_caps=True)
    assert len(plain) < 10 and len(joint) >= 30
    listed = sum(o.endswith(" box") for r in joint for o in r["listed"])
    assert abs(len(joint) - 0.25 * listed) <= max(2.0, 0.025 * listed)  # boxes right 1/4 of the times listed
    assert sum(r["listed"][1].startswith("c") for r in joint) < 8  # most leaky sets swapped (keys have slack)


def test_alternatives_never_dodge_the_oracle():
    """An option set the oracle guesses right is not swapped for one it gets wrong."""
    misses = [_rec("limb_action_order", f"m{i}", False) for i in range(8)]
    hits = [_rec("limb_action_order", f"h{i}", True, alternatives=[_rec("limb_action_order", f"h{i}", False)])
            for i in range(8)]
    kept = select(misses + hits, CFG, np.random.default_rng(0), joint_caps=True)
    assert sum(r["answer_value"].startswith("m") for r in kept) == 8
    assert all(r["oracle_correct"] for r in kept if r["answer_value"].startswith("h"))
    assert sum(r["oracle_correct"] for r in kept) <= 0.25 * len(kept) and len(kept) == 10


def test_twin_option_sets_are_distinct_alternatives_led_by_twin_options():
    acts = ["walks", "jumps", "squats"]
    pool = sorted({", then ".join(p) for p in
                   [(a, b) for a in acts for b in acts if a != b] + [(a, b, c) for a in acts for b in acts for c in acts
                                                                     if len({a, b, c}) == 3]})
    truth = "walks, then jumps"
    others = [d for d in pool if d != truth]
    per_view = [{d for d in pool if d.startswith("walks")}, {d for d in pool if d.endswith("jumps")}, set(pool)]
    sets = twin_option_sets(truth, others, per_view, {}, np.random.default_rng(3), "other_sequence", 4)
    assert sets[0] == twin_options(truth, others, per_view, {}, np.random.default_rng(3), "other_sequence")
    assert 2 <= len(sets) <= 4
    for i, (listed, types) in enumerate(sets):
        assert listed[0] == truth and len(set(listed)) == 4 and set(types) == set(listed[1:])
        assert all(len(v & set(listed)) >= 2 for v in per_view)
        assert all(len(set(listed) & set(prev)) <= 2 for prev, _ in sets[:i])  # two distractors differ or more
    sig = [structure_signature(k) for k in option_prior_keys(sets[0][0])]
    assert sig.count(sig[0]) >= 2


def test_grid_option_sets_share_every_end_twice():
    others = ["green pole", "red chair", "blue box", "white ball"]
    names = ["red box", "blue ball"] + others
    open_view = [{vt.path_text(a, b) for a in names for b in names if a != b}]  # a view that rules nothing out
    sets = grid_option_sets("red box", "blue ball", others, open_view, np.random.default_rng(0), False, 3)
    assert len(sets) == 3 and len({tuple(s[0]) for s in sets}) == 3
    assert sets[0] == grid_options("red box", "blue ball", others, open_view, np.random.default_rng(0), False)
    for listed, _ in sets:
        starts = Counter(o.split(" to the ")[0] for o in listed)
        ends = Counter(o.split(" to the ")[1] for o in listed)
        assert listed[0] == "from the red box to the blue ball"
        assert set(starts.values()) == {2} and set(ends.values()) == {2}
