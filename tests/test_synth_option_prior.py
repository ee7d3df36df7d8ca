"""The option-prior probe (``bench check``'s ``option_prior_acc``) flags answers that the form
of the options gives away, and stays at chance on balanced options."""
import numpy as np

from bench.synth import verify_temporal as vt
from bench.synth.blind import OptionPriorProbe
from bench.synth.tasks_temporal import grid_options

NAMES = [f"{c} {k}" for c in ("red", "blue", "green", "yellow", "purple") for k in ("box", "ball", "pole", "chair")]


def _sample(options: list[str], truth: str, rng) -> dict:
    opts = [options[i] for i in rng.permutation(len(options))]
    return {"task": "trajectory", "question": "Where does the person in the red shirt walk?", "options": opts,
            "answer": "ABCD"[opts.index(truth)]}


def _trajectories(n: int, leaky: bool, seed: int) -> list[dict]:
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
            out.append(dict(_sample(opts, truth, rng), task="motion_recognition"))
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
