"""Each temporal verifier on a hand-built timeline with a known answer (no rendering)."""
from __future__ import annotations

import numpy as np

from bench.synth import options_temporal as ot
from bench.synth import tasks_temporal as tt
from bench.synth import verify_temporal as vt
from bench.synth.body import Person, Pose, joints
from bench.synth.options import numeric_options
from bench.synth.tasks import TASKS
from bench.synth.verify import check_question

VIEWS = ["cam0", "cam1", "cam2", "cam3"]
T = 8


def _check(task, table, facts, listed, answer, gt):
    return check_question("MVN", TASKS[task].consistent, table, facts, VIEWS, listed, False, answer, gt)


def _obs(text: str) -> list:
    """'.' = not seen on that frame, any other character = the label seen."""
    return [None if c == "." else c for c in text]


def test_three_jumps_two_cameras_see_two_each():
    # jumps on frames 1, 3, 5: cam0 sees frames 0-3 (jumps 1 and 3), cam1 frames 3-7 (jumps 3 and 5)
    table = {"cam0": {"obs": _obs("0101....")}, "cam1": {"obs": _obs("...10100")},
             "cam2": {"obs": _obs("........")}, "cam3": {"obs": _obs(".0......")}}
    grammar = {"kind": "events", "T": T}
    facts = {"grammar": grammar, "domain": vt.grammar_answers(grammar)}
    assert facts["domain"] == ["0", "1", "2", "3", "4"]
    # cam0 alone: frame 4 follows a jump (so no jump), but 5-7 may hold one or two more
    assert tt.consistent_count(table, facts, ["cam0"]) == {"2", "3", "4"}
    assert tt.consistent_count(table, facts, ["cam1"]) == {"2", "3"}
    assert tt.consistent_count(table, facts, ["cam0", "cam1"]) == {"3"}
    res = _check("repetition_count", table, facts, ["1", "2", "3", "4"], "3", ["cam0", "cam1"])
    assert res["svi"] and res["cvr"] and res["minimal"]
    typed = tt.count_distractors(table, ["cam0", "cam1"])
    assert typed == [(2, "single_view_count"), (4, "naive_sum")]
    listed, types = numeric_options(3, typed, 0, 4, np.random.default_rng(0), False)
    assert "3" in listed and types["2"] == "single_view_count" and types["4"] == "naive_sum"


def test_wave_count_needs_the_arm_seen_on_every_open_frame():
    # right-hand waves on frames 0 and 6; nobody sees frame 3 -> a third wave stays possible
    table = {"cam0": {"obs": _obs("100.....")}, "cam1": {"obs": _obs("....0010")},
             "cam2": {"obs": _obs("........")}, "cam3": {"obs": _obs("........")}}
    grammar = {"kind": "events", "T": T}
    facts = {"grammar": grammar, "domain": vt.grammar_answers(grammar)}
    assert tt.consistent_count(table, facts, ["cam0", "cam1"]) == {"2", "3"}
    table["cam2"]["obs"] = _obs("...0....")
    res = _check("limb_repetition_count", table, facts, ["1", "2", "3", "4"], "2", ["cam0", "cam1", "cam2"])
    assert res["svi"] and res["cvr"] and res["minimal"]


def test_trajectory_start_and_end_from_different_cameras():
    names = ["red box", "blue ball", "green pole"]
    grammar = {"kind": "path", "T": T, "vocab": names, "min_len": 2}
    facts = {"grammar": grammar, "domain": vt.grammar_answers(grammar)}
    # truth: at the red box on frames 0-1, walking 2-5, at the blue ball 6-7
    table = {v: {"obs": [None] * T} for v in VIEWS}
    table["cam0"]["obs"][1] = "red box"
    table["cam0"]["obs"][2] = "transit"
    table["cam2"]["obs"][6] = "blue ball"
    truth = vt.path_text("red box", "blue ball")
    assert tt.consistent_trajectory(table, facts, ["cam0", "cam2"]) == {truth}
    assert len(tt.consistent_trajectory(table, facts, ["cam2"])) > 1  # the start is open
    assert len(tt.consistent_trajectory(table, facts, ["cam0"])) > 1  # the end is open
    listed = [truth, vt.path_text("blue ball", "red box"), vt.path_text("red box", "green pole"),
              vt.path_text("green pole", "blue ball")]
    res = _check("trajectory", table, facts, listed, truth, ["cam0", "cam2"])
    assert res["svi"] and res["cvr"] and res["minimal"]


def test_motion_sequence_needs_both_halves_of_the_clip():
    vocab = ["walk", "jump", "squat"]
    grammar = {"kind": "segments", "T": T, "vocab": vocab, "min_len": 2, "min_segments": 1, "max_segments": 4}
    facts = {"grammar": grammar, "domain": vt.grammar_answers(grammar)}
    truth_labels = ["walk"] * 3 + ["squat"] * 3 + ["jump"] * 2
    table = {v: {"obs": [None] * T} for v in VIEWS}
    table["cam1"]["obs"][:4] = truth_labels[:4]          # sees the walk and the start of the squat
    table["cam3"]["obs"][4:] = truth_labels[4:]          # sees the rest of the squat and the jump
    truth = vt.sequence_text(["walk", "squat", "jump"])
    assert tt.consistent_motion(table, facts, ["cam1", "cam3"]) == {truth}
    assert len(tt.consistent_motion(table, facts, ["cam1"])) > 1
    listed = [truth, vt.sequence_text(["jump", "squat", "walk"]), vt.sequence_text(["squat", "jump"]),
              vt.sequence_text(["walk", "squat"])]  # reversed, and what each camera alone suggests
    res = _check("motion_recognition", table, facts, listed, truth, ["cam1", "cam3"])
    assert res["svi"] and res["cvr"] and res["minimal"]


def test_hand_order_first_action_needs_the_start_of_the_clip():
    grammar = {"kind": "hand_actions", "T": T, "vocab": list(vt.HAND_TEXT), "min_len": 2, "max_actions": 3}
    facts = {"grammar": grammar, "domain": vt.grammar_answers(grammar)}
    # truth: rest, wave_r on 1-2, rest 3, raise_l on 4-6, rest 7
    table = {v: {"obs": [None] * T} for v in VIEWS}
    table["cam0"]["obs"][0] = ["down", "down"]
    table["cam0"]["obs"][1] = ["down", None]               # right arm hidden on frame 1
    table["cam2"]["obs"][2] = ["down", "wave"]
    table["cam2"]["obs"][4] = ["raised", "down"]
    first = vt.HAND_TEXT["wave_r"]
    # cam2 alone: frames 0-1 unseen, so another action might have come first; cam0 alone sees no action
    assert len(tt.consistent_hand_order(table, facts, ["cam2"])) > 1
    assert len(tt.consistent_hand_order(table, facts, ["cam0"])) > 1
    assert tt.consistent_hand_order(table, facts, ["cam0", "cam2"]) == {first}
    res = _check("limb_action_order", table, facts, list(vt.HAND_TEXT.values()), first, ["cam0", "cam2"])
    assert res["svi"] and res["cvr"] and res["minimal"]


def test_touch_over_time_confirmed_by_two_wide_views_on_one_frame():
    names = ["red box", "blue ball", "green pole", "white chair"]
    grammar = {"kind": "touch", "T": T, "vocab": names, "min_len": 2}
    facts = {"grammar": grammar, "domain": names, "confirm_angle": 30.0}
    dirs = {"cam0": [1, 0, 0], "cam1": [0, 1, 0], "cam2": [0.99, 0.14, 0], "cam3": [-1, 0, 0]}
    table = {v: {"dir": dirs[v], "obs": [None] * T} for v in VIEWS}
    table["cam0"]["obs"][3] = {"red box": "overlap", "blue ball": "overlap", "green pole": "separated",
                               "white chair": "hidden"}
    table["cam1"]["obs"][3] = {"red box": "overlap", "blue ball": "separated", "green pole": "hidden",
                               "white chair": "separated"}
    table["cam2"]["obs"][3] = {"red box": "overlap", "blue ball": "overlap", "green pole": "hidden",
                               "white chair": "hidden"}
    assert tt.consistent_touch(table, facts, ["cam0"]) == set(names)  # one camera never confirms
    assert tt.consistent_touch(table, facts, ["cam0", "cam2"]) == set(names)  # 8 degrees apart: no
    assert tt.consistent_touch(table, facts, ["cam0", "cam1"]) == {"red box"}
    res = _check("limb_contact_over_time", table, facts, names, "red box", ["cam0", "cam1"])
    assert res["svi"] and res["cvr"] and res["minimal"]


def test_person_track_moves_and_jumps():
    track = [((0.0, 0.0), 0.0, Pose("stand")), ((0.5, 0.0), 0.0, Pose("jump", lift=0.3))]
    p = Person(1, (0.0, 0.0), 0.0, 1.7, "red", "blue", None, (200, 150, 120), track[0][2], track, 0.5)
    assert p.at(0.5).xy == (0.5, 0.0) and p.at(0.0).xy == (0.0, 0.0)
    z0, z1 = joints(p, 0.0)["pelvis"][2], joints(p, 0.5)["pelvis"][2]
    assert abs(z1 - z0 - 0.3) < 1e-6
    assert joints(p, 0.5)["pelvis"][0] > joints(p, 0.0)["pelvis"][0]


# --- rules added for yield: the landmark radius, view-aware distractors, the dividing line ---

def test_place_label_is_3d_feet_distance_to_footprints():
    objects = [("red box", (0.0, 0.0), 0.4), ("blue ball", (3.0, 0.0), 0.2)]
    assert tt.place_label((0.7, 0.0), objects) == "red box"      # 0.3 m from the box's footprint
    assert tt.place_label((0.0, -0.85), objects) == "red box"    # 0.45 m: still at it
    assert tt.place_label((1.1, 0.0), objects) is None           # 0.7 m: too close to call
    assert tt.place_label((1.6, 1.2), objects) == "transit"      # > 1 m from both
    # near one object but within the clear radius of another: nobody can say which
    assert tt.place_label((1.5, 0.0), [("red box", (0.0, 0.0), 0.4), ("green pole", (2.3, 0.0), 0.16)]) is None


def test_ambiguous_pick_keeps_every_single_view_open():
    truth = "a"
    per_view = [{"a", "b"}, {"a", "c", "d"}, {"a", "b", "c", "d", "e"}, {"a", "e"}]
    picked = ot.ambiguous_pick(truth, ["z", "e", "d", "c", "b"], per_view, 3, [truth])
    assert len(picked) == 3 and truth not in picked
    assert all(len(s & set([truth] + picked)) >= 2 for s in per_view)   # no view settles it alone
    opts = ot.cover_options(truth, [("z", "typed")], ["b", "c", "d", "e"], per_view, np.random.default_rng(0),
                            False, "fill")
    listed, types = opts
    assert listed[0] == truth and all(len(s & set(listed)) >= 2 for s in per_view)
    assert "z" not in listed  # a typed value no view allows loses to ones that keep views open


def test_dividing_line_cameras_each_see_one_side():
    from bench.synth.camera import project
    from bench.synth.config import CameraConfig
    from bench.synth.scene_temporal import crosses, crossing_frame, half_view_cameras

    divide = 0.3
    e, n = np.array([np.cos(divide), np.sin(divide)]), np.array([-np.sin(divide), np.cos(divide)])
    cams = half_view_cameras(np.random.default_rng(1), 4, CameraConfig(min_radius=3.8, max_radius=4.8, min_fov=36.0,
                                                                      max_fov=46.0), 64, 64, divide)

    def sees(cam, xy):
        uv, z = project(cam, np.array([[xy[0], xy[1], 1.0]]))
        return z[0] > 0 and 0 <= uv[0, 0] < 64 and 0 <= uv[0, 1] < 64

    for side, ks in ((1, (0, 2)), (-1, (1, 3))):
        for along in (-1.5, 0.0, 1.5):
            p = along * e + side * 1.2 * n
            assert all(sees(cams[k], p) for k in ks) and not any(sees(cams[k], p) for k in set(range(4)) - set(ks))
    path = [tuple(x * n + 0.2 * e) for x in np.linspace(-1.5, 1.5, 8)]
    assert crosses(path, divide, 0.3) and crossing_frame(path, divide) == 4
    assert not crosses([(p[0] + 3 * n[0], p[1] + 3 * n[1]) for p in path], divide, 0.3)


def test_performer_travels_and_hand_actions_start_on_cue():
    from bench.synth import motion

    rng = np.random.default_rng(3)
    for _ in range(20):
        s = motion.performer(rng, T, (0.0, 0.0))
        if s is None:
            continue
        moving = sum(b in ("walk", "jump") for b in s.body)
        assert np.hypot(*np.subtract(s.xy[-1], s.xy[0])) > 0.4 * (moving - 1)  # walking and hopping move the person
        motion.retime_hands(rng, s, 2)  # (a start too late for both actions to fit is moved earlier)
        assert s.channels["arms"][:2] == ["rest"] * 2 and s.channels["arms"][2] != "rest"
        assert s.info["hand_order"][0] == s.channels["arms"][2]
