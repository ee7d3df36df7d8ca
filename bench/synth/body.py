"""Articulated capsule bodies: pose parameters -> joints -> primitives.

A body is built in its own frame (x forward, y to the person's left, z up; feet on the floor)
and then turned by ``yaw`` and moved to ``xy``. Proportions are fractions of the height H.
Motion: a person may carry a ``track``, one (xy, yaw, Pose) per frame ``track_dt`` seconds
apart (built by ``bench.synth.motion``); ``Person.at(t)`` then gives the static person of the
frame at t. Without a track a person is static (the spatial benchmark, t = 0).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from bench.synth.primitives import COLOURS, Entity, Primitive

PARTS = ["head", "torso", "upper_arm_l", "lower_arm_l", "hand_l", "upper_arm_r", "lower_arm_r",
         "hand_r", "upper_leg_l", "lower_leg_l", "foot_l", "upper_leg_r", "lower_leg_r", "foot_r", "hat"]
PART_ID = {name: i + 1 for i, name in enumerate(PARTS)}  # 0 is "not a body part"
ARM_STATES = ["raised", "down", "side", "hip", "reaching"]
SHOE = (45, 40, 40)
SKINS = [(236, 188, 150), (205, 150, 110), (160, 110, 75), (110, 75, 50)]

# Segment lengths and radii as fractions of H.
UPPER_ARM, LOWER_ARM, HAND_OFFSET = 0.17, 0.145, 0.03
ARM_REACH = UPPER_ARM + LOWER_ARM + HAND_OFFSET  # shoulder to hand centre, straight arm
THIGH, SHIN = 0.245, 0.24
SHOULDER_Z, SHOULDER_Y, HIP_Z, HIP_Y = 0.80, 0.12, 0.53, 0.055
HAND_R = 0.028

_ARM_DIRS = {  # body-frame directions (y sign flipped for the right arm)
    "down": (0.02, 0.15, -1.0), "raised": (0.08, 0.28, 1.0), "side": (0.0, 1.0, -0.12),
}
# waving: upper arm out and up, forearm vertical (an "L" beside the head, unlike "raised")
_WAVE_UPPER, _WAVE_FORE = (0.1, 0.9, 0.35), (0.05, 0.3, 1.0)


@dataclass
class Pose:
    """Static pose parameters. ``reach_target`` is a world point for the reaching hand's centre."""

    kind: str = "stand"  # stand, raise_one, raise_both, touch, near, sit, crouch
    arms: dict = field(default_factory=lambda: {"l": "down", "r": "down"})
    reach_target: tuple | None = None
    drop: float = 0.0           # pelvis drop as a fraction of H (crouching)
    seat_z: float | None = None  # height of the surface the person sits on
    foot_target: tuple | None = None  # world point for one ankle (a foot resting on an object)
    foot_side: str | None = None      # "l" or "r": which foot rests on ``foot_target``
    stride: float = 0.0         # walking: left ankle this fraction of H ahead of the hip (right behind)
    lift: float = 0.0           # jumping: the whole body this many metres above the floor

    def at(self, t: float) -> "Pose":
        """The pose at time t (static for now; motion will interpolate parameters here)."""
        return self


@dataclass
class Person:
    pid: int
    xy: tuple[float, float]
    yaw: float
    height: float
    shirt: str
    trousers: str
    hat: str | None
    skin: tuple[int, int, int]
    pose: Pose = field(default_factory=Pose)
    track: list | None = None   # per frame (xy, yaw, Pose); None = static
    track_dt: float = 0.5       # seconds between track frames

    def at(self, t: float) -> "Person":
        """The static person at time t (the nearest track frame; self when there is no track)."""
        if not self.track:
            return self
        f = min(max(int(round(t / self.track_dt)), 0), len(self.track) - 1)
        xy, yaw, pose = self.track[f]
        return replace(self, xy=xy, yaw=yaw, pose=pose, track=None)

    def raises_hand(self, t: float = 0.0) -> bool:
        return "raised" in self.pose.at(t).arms.values()

    def frame(self) -> tuple[np.ndarray, np.ndarray]:
        """Rotation (3, 3) body -> world and origin (3,)."""
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]), np.array([self.xy[0], self.xy[1], 0.0])


def _unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v)


def two_link(start: np.ndarray, end: np.ndarray, l1: float, l2: float, pole: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Middle joint and (possibly clamped) end point of a two-segment limb bending toward ``pole``."""
    d_vec = end - start
    dist = float(np.linalg.norm(d_vec))
    u = d_vec / max(dist, 1e-9)
    dist_c = min(max(dist, abs(l1 - l2) + 1e-4), l1 + l2 - 1e-4)
    cos_a = (l1 * l1 + dist_c * dist_c - l2 * l2) / (2 * l1 * dist_c)
    w = pole - np.dot(pole, u) * u
    w = w / max(np.linalg.norm(w), 1e-9)
    mid = start + l1 * (cos_a * u + math.sqrt(max(0.0, 1 - cos_a * cos_a)) * w)
    return mid, start + dist_c * u


def joints(person: Person, t: float = 0.0) -> dict[str, np.ndarray]:
    """World positions of the joints (and the hand centres) at time t."""
    person = person.at(t)
    pose = person.pose.at(t)
    H = person.height
    rot, origin = person.frame()
    origin = origin + np.array([0.0, 0.0, pose.lift])  # a jump lifts everything, targets included
    to_world = lambda p: rot @ np.asarray(p, float) + origin  # noqa: E731
    j: dict[str, np.ndarray] = {}
    if pose.seat_z is not None:  # sitting: thighs forward on the seat, shins down
        hip_z, hip_x, lean = pose.seat_z + 0.045 * H, 0.0, 0.0
    else:
        d = pose.drop * H
        hip_z, hip_x, lean = HIP_Z * H - d, -0.35 * d, 0.9 * pose.drop
    axis = np.array([math.sin(lean), 0.0, math.cos(lean)])
    base = np.array([hip_x, 0.0, hip_z + 0.03 * H])
    j["pelvis"], j["chest"] = to_world(base), to_world(base + axis * 0.22 * H)
    j["head"] = to_world(base + axis * 0.375 * H)
    for side, sign in (("l", 1.0), ("r", -1.0)):
        hip = np.array([hip_x, sign * HIP_Y * H, hip_z])
        if pose.seat_z is not None:
            knee = hip + np.array([THIGH * H, 0.01 * sign * H, 0.0])
            ankle = knee + np.array([0.03 * H, 0.0, -SHIN * H])
            ankle[2] = max(ankle[2], 0.045 * H)
        elif pose.foot_target is not None and pose.foot_side == side:
            ankle = rot.T @ (np.asarray(pose.foot_target, float) - origin)
            knee, ankle = two_link(hip, ankle, THIGH * H, SHIN * H, np.array([1.0, 0.0, 0.3]))
        else:
            ankle = np.array([sign * pose.stride * H, sign * 0.06 * H, 0.045 * H])
            if pose.lift > 0:  # tucked feet in the air read as a jump, not as a floating stance
                ankle += np.array([-0.05 * H, 0.0, 0.07 * H])
            knee, ankle = two_link(hip, ankle, THIGH * H, SHIN * H, np.array([1.0, 0.0, 0.0]))
        j[f"hip_{side}"], j[f"knee_{side}"], j[f"ankle_{side}"] = to_world(hip), to_world(knee), to_world(ankle)
        toe_drop = 0.0 if (pose.foot_target is not None and pose.foot_side == side) else -0.02 * H
        j[f"toe_{side}"] = to_world(ankle + np.array([0.1 * H, 0.0, toe_drop]))
        shoulder = base + axis * 0.24 * H + np.array([0.0, sign * SHOULDER_Y * H, 0.0])
        state = pose.arms[side]
        if state == "reaching" and pose.reach_target is not None:
            target = rot.T @ (np.asarray(pose.reach_target, float) - origin)
            elbow, hand = two_link(shoulder, target, UPPER_ARM * H, (LOWER_ARM + HAND_OFFSET) * H,
                                   np.array([-0.2, sign * 0.6, -1.0]))
        elif state == "hip":
            hand = np.array([hip_x - 0.02 * H, sign * 0.115 * H, hip_z + 0.06 * H])
            elbow, hand = two_link(shoulder, hand, UPPER_ARM * H, (LOWER_ARM + HAND_OFFSET) * H,
                                   np.array([-0.3, sign * 1.0, 0.0]))
        elif state == "wave":
            flip = np.array([1.0, sign, 1.0])
            elbow = shoulder + _unit(np.array(_WAVE_UPPER) * flip) * UPPER_ARM * H
            hand = elbow + _unit(np.array(_WAVE_FORE) * flip) * (LOWER_ARM + HAND_OFFSET) * H
        else:
            dvec = np.array(_ARM_DIRS.get(state, _ARM_DIRS["down"]))
            dvec = _unit(dvec * np.array([1.0, sign, 1.0]))
            elbow = shoulder + dvec * UPPER_ARM * H
            hand = elbow + dvec * (LOWER_ARM + HAND_OFFSET) * H
        fore = _unit(hand - elbow)
        j[f"shoulder_{side}"], j[f"elbow_{side}"] = to_world(shoulder), to_world(elbow)
        j[f"wrist_{side}"], j[f"hand_{side}"] = to_world(hand - fore * HAND_OFFSET * H), to_world(hand)
    return j


def reach_shoulder(person_height: float, drop: float) -> tuple[float, float]:
    """(forward offset, height) of a shoulder for a pelvis drop, used to place reaching people."""
    H, lean = person_height, 0.9 * drop
    base_z, base_x = HIP_Z * H - drop * H + 0.03 * H, -0.35 * drop * H
    return base_x + math.sin(lean) * 0.24 * H, base_z + math.cos(lean) * 0.24 * H


def person_entity(person: Person, t: float = 0.0) -> Entity:
    """Capsules, spheres and boxes of one person at time t."""
    person = person.at(t)
    H, j = person.height, joints(person, t)
    skin, shirt, trousers = person.skin, COLOURS[person.shirt], COLOURS[person.trousers]
    cap = lambda a, b, r, part, col: Primitive("capsule", (a, b, r * H), PART_ID[part], col)  # noqa: E731
    prims = [Primitive("sphere", (j["head"], 0.065 * H), PART_ID["head"], skin),
             cap(j["pelvis"], j["chest"], 0.085, "torso", shirt)]
    for s in ("l", "r"):
        prims += [cap(j[f"shoulder_{s}"], j[f"elbow_{s}"], 0.03, f"upper_arm_{s}", shirt),
                  cap(j[f"elbow_{s}"], j[f"wrist_{s}"], 0.025, f"lower_arm_{s}", skin),
                  Primitive("sphere", (j[f"hand_{s}"], HAND_R * H), PART_ID[f"hand_{s}"], skin),
                  cap(j[f"hip_{s}"], j[f"knee_{s}"], 0.045, f"upper_leg_{s}", trousers),
                  cap(j[f"knee_{s}"], j[f"ankle_{s}"], 0.035, f"lower_leg_{s}", trousers),
                  cap(j[f"ankle_{s}"], j[f"toe_{s}"], 0.025, f"foot_{s}", SHOE)]
    if person.hat is not None:
        top = j["head"] + np.array([0.0, 0.0, 0.045 * H])
        prims += [cap(top, top + np.array([0.0, 0.0, 0.03 * H]), 0.056, "hat", COLOURS[person.hat]),
                  Primitive("box", (top - np.array([0.0, 0.0, 0.005 * H]), np.array([0.085, 0.085, 0.006]) * H,
                                    person.yaw), PART_ID["hat"], COLOURS[person.hat])]
    return Entity(person.pid, prims)

