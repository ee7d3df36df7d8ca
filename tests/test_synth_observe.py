"""Observation model on hand-built scenes: visibility, fractions, parts and contact states."""
from __future__ import annotations

import math

import numpy as np

from bench.synth.body import Person, Pose, joints
from bench.synth.camera import make_camera
from bench.synth.config import ObserveConfig, RenderConfig
from bench.synth.observe import observe_view
from bench.synth.renderer import render
from bench.synth.scene import Scene, SceneObject, _reach_person

W = H = 64


def _person(pid, xy, yaw=0.0, pose=None, shirt="red"):
    return Person(pid, xy, yaw, 1.75, shirt, "black", None, (230, 190, 150), pose or Pose())


def _observe(scene, cam):
    out = render(scene.entities(), cam, RenderConfig())
    return observe_view(out, scene, ObserveConfig()), out


def test_person_hidden_behind_another_and_fractions():
    front, back = _person(1, (1.0, 0.0)), _person(2, (-1.0, 0.0), shirt="blue")
    scene = Scene("t", [front, back], [], [])
    cam = make_camera("c", (6.0, 0.0, 1.0), (0.0, 0.0, 1.0), 45.0, W, H)
    obs, _ = _observe(scene, cam)
    assert obs["persons"][1]["seen"] and obs["persons"][1]["frac"] > 0.95
    assert obs["persons"][2]["frac"] < obs["persons"][1]["frac"]
    side = make_camera("c2", (0.0, 6.0, 1.0), (0.0, 0.0, 1.0), 45.0, W, H)
    obs2, _ = _observe(scene, side)
    assert obs2["persons"][2]["seen"] and obs2["persons"][2]["attrs"]["shirt"] == "blue"
    assert "torso" in obs2["persons"][2]["parts"]


def test_touch_and_gap_contact_states():
    box = SceneObject(11, "box", "green", (0.0, 0.0), 0.0, {"w": 0.6, "d": 0.6, "h": 0.9})
    placed = None
    rng = np.random.default_rng(0)
    while placed is None:  # the generator's own placement of a reaching person
        placed = _reach_person(rng, box, 1.75, 0.0, "r")
    xy, yaw, drop, hand_target = placed
    toucher = _person(1, xy, yaw=yaw, pose=Pose("touch", {"l": "down", "r": "reaching"},
                                                reach_target=hand_target, drop=drop))
    assert np.linalg.norm(joints(toucher)["hand_r"] - np.array(hand_target)) < 0.01
    assert abs(hand_target[2] - (0.9 + 0.028 * 1.75 - 0.006)) < 1e-6  # resting on the top face
    scene = Scene("t", [toucher], [box], [])
    side = make_camera("c", (xy[0] + 5.0 * math.sin(yaw), xy[1] - 5.0 * math.cos(yaw), 1.4), (0.0, 0.0, 0.9), 40.0, W, H)
    obs, _ = _observe(scene, side)
    assert obs["pairs"][(1, 11)]["hand_r"] == "overlap"
    assert obs["pairs"][(1, 11)]["any"] == "overlap"
    far = Scene("t", [_person(1, (2.0, 0.0))], [box], [])
    wide = make_camera("c3", (1.0, 6.0, 1.4), (1.0, 0.0, 0.9), 50.0, W, H)
    obs_far, _ = _observe(far, wide)
    assert obs_far["pairs"][(1, 11)]["any"] == "separated"
    assert obs_far["pairs"][(1, 11)]["hand_l"] in ("separated", "hidden")


def test_arm_visibility_and_raised_pose():
    p = _person(1, (0.0, 0.0), yaw=0.0, pose=Pose("raise_one", {"l": "raised", "r": "down"}))
    scene = Scene("t", [p], [], [])
    front = make_camera("c", (5.0, 0.0, 1.2), (0.0, 0.0, 1.0), 45.0, W, H)
    obs, _ = _observe(scene, front)
    assert obs["persons"][1]["arms"] == {"l": True, "r": True}
    assert joints(p)["hand_l"][2] > 1.75  # the raised hand is above the head
    # seen from the right side, the left arm is behind the torso
    right = make_camera("c2", (0.0, -5.0, 1.2), (0.0, 0.0, 1.0), 45.0, W, H)
    p_down = _person(1, (0.0, 0.0), pose=Pose("stand", {"l": "down", "r": "down"}))
    obs_r, _ = _observe(Scene("t", [p_down], [], []), right)
    assert obs_r["persons"][1]["arms"]["r"] and not obs_r["persons"][1]["arms"]["l"]
