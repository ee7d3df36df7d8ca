"""The option-prior probe (``bench check``'s ``option_prior_acc``) flags answers that the form
of the options gives away, and stays at chance on balanced options."""
import dataclasses

import numpy as np

from bench.constants import LETTERS
from bench.format import Sample
from bench.synth import verify_temporal as vt
from bench.synth.balance import select
from bench.synth.blind import OptionPriorProbe, option_prior_keys, structure_signature
from bench.synth.options_temporal import ambiguous_pick, grid_options, twin_options

NAMES = [f"{c} {k}" for c in ("red", "blue", "green", "yellow", "purple") for k in ("box", "ball", "pole", "chair")]


def _question(task: str, question: str, options: list[str], truth: str) -> Sample:
    """A text-only sample: all the probes read (task, question, options, answer)."""
    return Sample(id="q", task=task, question=question, options=options, answer=LETTERS[options.index(truth)],
                  views=[], gt_views=[])


def _sample(options: list[str], truth: str, rng) -> Sample:
    opts = [options[i] for i in rng.permutation(len(options))]
    return _question("trajectory", "Where does the person in the red shirt walk?", opts, truth)


def _trajectories(n: int, leaky: bool, seed: int) -> list[Sample]:
    rng, out = np.random.default_rng(seed), []
    for _ in range(n):
        x, y, c, d = (NAMES[i] for i in rng.choice(len(NAMES), 4, replace=False))
        truth = vt.path_text(x, y)
        if leaky:  # the old construction: the answer is the one whose start and end both recur
            opts = [truth, vt.path_text(y, x), vt.path_text(x, c), vt.path_text(c, y)]
        else:
            opts = grid_options(x, y, [c, d], [set()], rng, False)[0]
        out.append(_sample(opts, truth, rng))
    return out


def test_probe_flags_consensus_trajectories():
    probe = OptionPriorProbe().fit(_trajectories(300, True, 0))
    assert probe.accuracy(_trajectories(200, True, 1)) > 0.6


def test_probe_at_chance_on_grid_trajectories():
    probe = OptionPriorProbe().fit(_trajectories(300, False, 0))
    assert probe.accuracy(_trajectories(400, False, 1)) < 0.33


def test_probe_flags_length_prior():
    """2-action options right more often than 3-action ones (the old motion_recognition leak)."""
    acts = ["walks", "jumps", "squats"]

    def make(n, seed):
        rng, out = np.random.default_rng(seed), []
        for _ in range(n):
            two = [", then ".join(rng.choice(acts, 2, replace=False)) for _ in range(2)]
            three = [", then ".join(rng.choice(acts, 3, replace=False)) for _ in range(2)]
            opts = list(dict.fromkeys(two + three))
            if len(opts) < 4:
                continue
            truth = opts[0] if rng.random() < 0.9 else opts[int(rng.integers(2, 4))]
            out.append(dataclasses.replace(_sample(opts, truth, rng), task="motion_recognition"))
        return out

    probe = OptionPriorProbe().fit(make(400, 0))
    assert probe.accuracy(make(300, 1)) > 0.38  # 0.45 expected, chance 0.25


def test_grid_options_share_every_end_twice():
    rng = np.random.default_rng(0)
    listed, types = grid_options("red box", "blue ball", ["green pole", "red chair", "blue box"], [set()], rng, False)
    assert vt.path_text("red box", "blue ball") in listed and len(set(listed)) == 4
    starts = [o.split(" to the ")[0] for o in listed]
    ends = [o.split(" to the ")[1] for o in listed]
    assert all(starts.count(s) == 2 for s in starts) and all(ends.count(e) == 2 for e in ends)
    assert grid_options("red box", "blue ball", ["green pole"], [set()], rng, False) is None


def _motion_records(n: int, seed: int, build) -> list[dict]:
    """Simulated motion questions: one side's cameras see the first action, the other side's
    the last, so single views leave open the sequences that start (end) like the answer."""
    from itertools import permutations
    rng, out = np.random.default_rng(seed), []
    acts = ["walk", "jump", "squat"]
    pool = [vt.sequence_text(p) for k in (2, 3) for p in permutations(acts, k)]
    for _ in range(n):
        seq = [acts[i] for i in rng.permutation(3)][: int(rng.choice([2, 3]))]
        truth = vt.sequence_text(seq)
        first, last = vt.BODY_TEXT[seq[0]], vt.BODY_TEXT[seq[-1]]
        per_view = [{d for d in pool if d.split(", then ")[0] == first},
                    {d for d in pool if d.split(", then ")[-1] == last}]
        opts = build(truth, [d for d in pool if d != truth], per_view, rng)
        if opts is not None:
            out.append({"task": "motion_recognition", "answer_value": truth, "listed": opts, "subset": "MVN",
                        "oracle_correct": False, "value_key": f"{len(seq)} actions"})
    return out


def _consensus(truth, pool, per_view, rng):
    """The old construction: distractors by what single views leave open (ambiguous_pick)."""
    return [truth] + ambiguous_pick(truth, [pool[i] for i in rng.permutation(len(pool))], per_view, 3, [truth])


def _twins(truth, pool, per_view, rng):
    opts = twin_options(truth, pool, per_view, {}, rng, "other_sequence")
    return None if opts is None else opts[0]


def _selected_samples(records: list[dict], seed: int) -> list[Sample]:
    from types import SimpleNamespace
    cfg = SimpleNamespace(options=SimpleNamespace(mode="ssmn", none_share=0.2),
                          tasks=SimpleNamespace(major_value_share=0.0, value_cap=10.0, max_task_share=1.0))
    rng = np.random.default_rng(seed)
    out = []
    for r in select(records, cfg, rng):
        opts = [r["listed"][i] for i in rng.permutation(4)]
        out.append(_question(r["task"], "What does the person in the red shirt do, in order?", opts,
                             r["answer_value"]))
    return out


def test_twin_motion_options_keep_single_views_open_and_match_the_answer_form():
    for r in _motion_records(200, 0, _twins):
        sig = [structure_signature(k) for k in option_prior_keys(r["listed"])]
        assert sig.count(sig[0]) >= 2, r["listed"]  # another option looks exactly like the answer


def test_probe_at_chance_on_twin_motion_options_after_selection():
    old = _motion_records(600, 0, _consensus)  # answer listed first: only the form can pick it
    probe = OptionPriorProbe().fit(_shuffled(old[:300]))
    assert probe.accuracy(_shuffled(old[300:])) > 0.33  # the consensus leak the probe finds
    new = _selected_samples(_motion_records(1500, 0, _twins), 0)  # selection balances each signature
    assert len(new) >= 10
    probe = OptionPriorProbe().fit(new[: len(new) // 2])
    assert probe.accuracy(new[len(new) // 2:]) < 0.34


def _shuffled(records: list[dict]) -> list[Sample]:
    rng = np.random.default_rng(0)
    return [dataclasses.replace(_sample(r["listed"], r["answer_value"], rng), task=r["task"]) for r in records]
