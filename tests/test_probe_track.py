"""scripts/probe_track.py: the track's per-task state accuracy against the train majority."""
from __future__ import annotations

from collections import Counter, defaultdict

import torch

from inputs.track import IGNORE, STATE_ID, TRACK_STATES, UNSEEN

import scripts.probe_track as probe_track

J0, J1 = STATE_ID["jump:0"], STATE_ID["jump:1"]


def _logits(pred, second=None):
    """Logits whose argmax is ``pred`` and whose best state other than unseen is ``second``."""
    pred = torch.tensor(pred)
    out = torch.zeros(*pred.shape, len(TRACK_STATES))
    out.scatter_(-1, pred.unsqueeze(-1), 2.0)
    if second is not None:
        out.scatter_(-1, torch.tensor(second).unsqueeze(-1), 1.0)
    return out


def _figures(pred, target, tasks, majority, second=None):
    tally = defaultdict(Counter)
    probe_track.tally_frames(tally, _logits(pred, second), torch.tensor(target), tasks, majority)
    return probe_track.summarise(tally)


def test_frames_are_split_into_hits_missed_persons_and_wrong_states():
    # one clip, one view, six frames: two unrecorded, one unseen, three that show the person
    target = [[[IGNORE, UNSEEN, J0, J0, J1, IGNORE]]]
    pred = [[[J1, UNSEEN, J0, UNSEEN, J0, J1]]]
    second = [[[J0, J1, J1, J0, J1, J0]]]  # where unseen is the argmax, J0 comes next: right
    row = _figures(pred, target, ["repetition_count"], {"repetition_count": J0}, second)["repetition_count"]
    assert row["seen"] == 3 and row["acc"] == 33.3  # one of the three shown frames right
    assert row["majority"] == 66.7  # "jump:0" is right on two of them
    assert row["state_acc"] == 66.7  # the missed person's frame reads right without "unseen"
    assert row["pred_unseen"] == 33.3 and row["wrong_state"] == 33.3
    assert row["unseen"] == 1 and row["unseen_acc"] == 100.0


def test_located_counts_the_shown_frames_with_a_box():
    target = [[[J0, J0, J1, UNSEEN]]]
    located = torch.tensor([[[1, 0, -1, 1]]])  # the third frame has no box; the fourth is unseen
    tally = defaultdict(Counter)
    probe_track.tally_frames(tally, _logits([[[J0, J0, J1, UNSEEN]]]), torch.tensor(target), ["repetition_count"],
                             {"repetition_count": J0}, located)
    assert probe_track.summarise(tally)["repetition_count"]["located"] == 50.0
    assert _figures([[[J0]]], [[[J0]]], ["repetition_count"], {})["repetition_count"]["located"] is None


def test_locator_hits_reads_the_best_cell_against_the_box():
    out = {"track_locate": torch.tensor([[[[0.1, 0.7, 0.1, 0.05, 0.05], [0.1, 0.1, 0.1, 0.1, 0.6],
                                           [0.9, 0.1, 0.0, 0.0, 0.0]]]])}  # (1, 1, 3, 1 + 4): a 2 x 2 grid
    batch = {"track_box": torch.tensor([[[[0.0, 0.0, 0.4, 0.4]] * 3]]),  # the top-left cell
             "track_box_flag": torch.tensor([[[1, 1, 0]]]), "frame_mask": torch.ones(1, 1, 3, dtype=torch.bool),
             "view_mask": torch.ones(1, 1, dtype=torch.bool)}
    assert probe_track.locator_hits(out, batch).tolist() == [[[1, 0, -1]]]


def test_the_all_row_pools_frames_and_empty_figures_are_none():
    target = [[[J1, J1]], [[UNSEEN, UNSEEN]]]
    pred = [[[J1, J1]], [[J0, UNSEEN]]]
    figures = _figures(pred, target, ["repetition_count", "trajectory"], {"repetition_count": J0})
    assert figures["repetition_count"]["acc"] == 100.0 and figures["repetition_count"]["majority"] == 0.0
    assert figures["trajectory"]["seen"] == 0 and figures["trajectory"]["acc"] is None
    assert figures["trajectory"]["unseen_acc"] == 50.0
    assert figures["all"]["seen"] == 2 and figures["all"]["unseen"] == 2 and figures["all"]["unseen_acc"] == 50.0


def test_the_majority_state_is_counted_over_the_frames_that_show_the_person():
    class View:
        def __init__(self, view_id, n):
            self.view_id, self.frames = view_id, [None] * n

    class Sample:
        def __init__(self, task, obs):
            self.task = task
            self.views = [View(v, len(o)) for v, o in obs.items()]
            self.meta = {"observations": {v: {"obs": o} for v, o in obs.items()}}

    class Bench:
        samples = [Sample("repetition_count", {"a": ["1", "1", None, None], "b": [None, "0", "1", None]}),
                   Sample("count_in_view", {"a": ["3"]})]  # not a track task: ignored

    # "unseen" frames (None) outnumber the jumps but are not a shown state
    assert probe_track.majority_states(Bench) == {"repetition_count": J1}


def test_unseen_records_are_told_apart_by_what_the_view_hides():
    person = lambda seen, attrs, parts: {"persons": {7: {"seen": seen, "attrs": attrs, "parts": parts}}}
    frames = [person(True, {"shirt": 1}, ["foot_l", "torso"]),  # shown
              person(False, {}, []),  # not seen
              person(True, {}, ["foot_l"]),  # seen, shirt hidden
              person(True, {"shirt": 1}, ["torso"])]  # in view, feet hidden
    doc = {"samples": [
        {"task": "repetition_count", "scene": "t000003", "question": "How many times ... jump?",
         "meta": {"facts": {"person": 7}, "observations": {"a": {"obs": ["0", None, None, None]}}}},
        {"task": "limb_repetition_count", "scene": "t000003", "question": "... wave their left hand?",
         "meta": {"facts": {"person": 7}, "observations": {"a": {"obs": [None, None, None, None]}}}},
        {"task": "count_in_view", "scene": "s000001", "question": "?", "meta": {}}]}
    built = []
    reasons = probe_track.unseen_reasons(doc, build=lambda idx: built.append(idx) or {"a": frames})
    assert built == [3]  # one rebuild per scene, spatial questions skipped
    assert reasons["repetition_count"] == {"shown": 1, "not seen": 1, "shirt hidden": 1, "part hidden": 1}
    # no forearm in any frame: the recognisable frames are "part hidden" for a wave
    assert reasons["limb_repetition_count"] == {"not seen": 1, "shirt hidden": 1, "part hidden": 2}
