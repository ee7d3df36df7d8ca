"""Parametric actions over T synchronized frames: per-person scripts -> per-frame poses.

A ``Script`` is what one person does, frame by frame: the track (xy, yaw, Pose per frame) the
renderer draws, and the *label channels* the temporal tasks ask about:

- ``jump``, ``wave_l``, ``wave_r``: 1 on the frames of one jump / one wave of that hand, else 0.
  A repetition is a single frame and two repetitions are never on adjacent frames (the landing
  or the lowered hand separates them): this is the counting convention the verifiers assume.
- ``place`` (role ``tour``): the landmark object the person stands next to, or ``transit``.
- ``touch`` (role ``toucher``): the object the given hand touches on that frame, or ``none``.
- ``body`` (role ``performer``): the whole-body action (walk, jump, squat, sit).
- ``arms`` (role ``performer``): the hand action (raise_l, raise_r, wave_l, wave_r) or ``rest``.

Builders only decide *what* happens when; ``scene_temporal`` places people so they fit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from bench.synth.body import Pose

STEP = 0.55            # metres walked per frame (0.5 s at a brisk pace)
STRIDE = 0.12          # ankle offset (fraction of H) while walking
JUMP_LIFT = (0.28, 0.38)  # metres off the floor on a jump frame
HOP = 0.45             # metres travelled per jump frame (a performer hops forward)
SQUAT_DROP = 0.25      # pelvis drop (fraction of H) while squatting
BODY_ACTIONS = ["walk", "jump", "squat", "sit"]
ARM_ACTIONS = ["raise_l", "raise_r", "wave_l", "wave_r"]
SEGMENTS = (2, 3)      # how many whole-body actions a performer does


@dataclass
class Script:
    """One person's motion: role, per-frame track and the label channels (see module doc)."""

    role: str                                   # tour, toucher, performer
    xy: list[tuple[float, float]]               # per frame
    yaw: list[float]
    body: list[str]                             # stand, walk, jump, squat, sit, reach
    arms: list[dict]                            # per frame {"l": state, "r": state}
    channels: dict[str, list] = field(default_factory=dict)
    info: dict = field(default_factory=dict)    # role facts: landmarks, touched object, hand, seat height
    reach: dict = field(default_factory=dict)   # touch frames: target point and pelvis drop

    def track(self, height: float) -> list[tuple[tuple[float, float], float, Pose]]:
        """Per-frame (xy, yaw, Pose) for ``Person.track``."""
        out = []
        for f, body in enumerate(self.body):
            arms = dict(self.arms[f])
            pose = Pose(body, arms)
            if body == "walk":
                pose.stride = STRIDE * (1 if f % 2 == 0 else -1)
            elif body == "jump":
                pose.lift = JUMP_LIFT[f % 2]
            elif body == "squat":
                pose.drop = SQUAT_DROP
            elif body == "sit":
                pose.seat_z = self.info["seat_z"]
            elif body == "reach":
                pose.reach_target, pose.drop = self.reach["target"], self.reach["drop"]
            out.append(((float(self.xy[f][0]), float(self.xy[f][1])), float(self.yaw[f]), pose))
        return out


def heading(a, b) -> float:
    return math.atan2(b[1] - a[1], b[0] - a[0])


def events(rng: np.random.Generator, allowed: list[int], k: int) -> list[int]:
    """``k`` frames out of ``allowed``, no two adjacent (fewer if ``allowed`` cannot hold k)."""
    for _ in range(50):
        pick = sorted(int(x) for x in rng.choice(allowed, size=min(k, len(allowed)), replace=False)) if k else []
        if all(b - a >= 2 for a, b in zip(pick, pick[1:])):
            return pick
    return events(rng, allowed, k - 1) if k > 0 else []


def _channel(frames: list[int], T: int) -> list[int]:
    return [int(f in frames) for f in range(T)]


def _arms_from_waves(wave_l: list[int], wave_r: list[int]) -> list[dict]:
    return [{"l": "wave" if wl else "down", "r": "wave" if wr else "down"} for wl, wr in zip(wave_l, wave_r)]


def _counts(rng: np.random.Generator, hi: int = 4) -> int:
    """A repetition count, uniform over 0..hi (balancing flattens what verification leaves)."""
    return int(rng.integers(0, hi + 1))


def tour(rng: np.random.Generator, start_obj, end_obj, T: int, signals: bool = False) -> Script:
    """Stand next to ``start_obj``, walk over, stand next to ``end_obj``; jump on the way, and
    wave now and then or (``signals``) do two hand actions in order."""
    a = b = 2  # short stays, a long walk: the walk carries the person across cameras' views
    m = T - a - b
    ax, ay = start_obj.xy
    bx, by = end_obj.xy
    base = heading((ax, ay), (bx, by))
    ua = base + math.radians(rng.uniform(-50, 50))
    ub = base + math.pi + math.radians(rng.uniform(-50, 50))
    # close enough that the person's and the object's silhouettes meet in most views
    spot_a = (ax + (start_obj.radius + 0.22) * math.cos(ua), ay + (start_obj.radius + 0.22) * math.sin(ua))
    spot_b = (bx + (end_obj.radius + 0.22) * math.cos(ub), by + (end_obj.radius + 0.22) * math.sin(ub))
    xy, body, place = [], [], []
    for f in range(T):
        if f < a:
            xy.append(spot_a), body.append("stand"), place.append(start_obj.name)
        elif f < a + m:
            k = f - a + 1
            xy.append((spot_a[0] + (spot_b[0] - spot_a[0]) * k / (m + 1), spot_a[1] + (spot_b[1] - spot_a[1]) * k / (m + 1)))
            body.append("walk"), place.append("transit")
        else:
            xy.append(spot_b), body.append("stand"), place.append(end_obj.name)
    yaw = [heading(spot_a, spot_b)] * T
    jumps = events(rng, list(range(T)), _counts(rng))
    for f in jumps:
        body[f] = "jump"
    info = {"start": start_obj.name, "end": end_obj.name}
    if signals:
        labels, arms, acts = _hand_actions(rng, T)
        return Script("tour", xy, yaw, body, arms, {"place": place, "jump": _channel(jumps, T), "arms": labels},
                      dict(info, hand_order=acts))
    wave_l = _channel(events(rng, list(range(T)), _counts(rng)), T)
    wave_r = _channel(events(rng, list(range(T)), _counts(rng)), T)
    return Script("tour", xy, yaw, body, _arms_from_waves(wave_l, wave_r),
                  {"place": place, "jump": _channel(jumps, T), "wave_l": wave_l, "wave_r": wave_r}, info)


def _hand_actions(rng: np.random.Generator, T: int, start: int | None = None) -> tuple[list[str], list[dict], list[str]]:
    """Two different hand actions one after the other, 2-3 frames each, with rests around them.

    Args:
        start: the frame the first action starts on (>= 1; clipped so both actions fit);
            None: anywhere after at least one resting frame.
    Returns:
        (per-frame label, per-frame arm states, [first action, second action]).
    """
    acts = [ARM_ACTIONS[i] for i in rng.permutation(len(ARM_ACTIONS))[:2]]
    la, lb = int(rng.integers(2, 4)), int(rng.integers(2, 4))
    if start is None:
        rests = rng.multinomial(T - la - lb - 1, [1 / 3] * 3) + np.array([1, 0, 0])
        # ^ at least one resting frame first: "which first" then needs the start of the clip too
    else:
        first = min(max(start, 1), T - la - lb)
        rests = np.concatenate([[first], rng.multinomial(T - la - lb - first, [0.5, 0.5])])
    labels = ["rest"] * rests[0] + [acts[0]] * la + ["rest"] * rests[1] + [acts[1]] * lb + ["rest"] * rests[2]
    arms = []
    for lab in labels:
        a = {"l": "down", "r": "down"}
        if lab != "rest":
            a[lab[-1]] = "raised" if lab.startswith("raise") else "wave"
        arms.append(a)
    return labels, arms, acts


def walker(rng: np.random.Generator, start: tuple[float, float], direction: float, T: int, signals: bool) -> Script:
    """Walk straight across the scene for the whole clip, through several cameras' views.

    Jump now and then; ``signals``: do two hand actions in order (role ``signaller``), else
    wave with either hand now and then (role ``walker``: the repetition-counting role).
    """
    u = (math.cos(direction), math.sin(direction))
    xy = [(start[0] + u[0] * STEP * f, start[1] + u[1] * STEP * f) for f in range(T)]
    body = ["walk"] * T
    jumps = events(rng, list(range(T)), _counts(rng))
    for f in jumps:
        body[f] = "jump"
    if signals:
        labels, arms, acts = _hand_actions(rng, T)
        return Script("signaller", xy, [direction] * T, body, arms, {"arms": labels, "jump": _channel(jumps, T)},
                      {"hand_order": acts})
    wave_l = _channel(events(rng, list(range(T)), _counts(rng)), T)
    wave_r = _channel(events(rng, list(range(T)), _counts(rng)), T)
    return Script("walker", xy, [direction] * T, body, _arms_from_waves(wave_l, wave_r),
                  {"jump": _channel(jumps, T), "wave_l": wave_l, "wave_r": wave_r})


def toucher(rng: np.random.Generator, obj, placed: tuple, side: str, T: int) -> Script:
    """Walk up to ``obj``, touch it with the ``side`` hand for 3-4 frames, walk away.

    Args:
        placed: (xy, yaw, drop, target) of the reaching stance (``scene._reach_person``).
    """
    (rx, ry), yaw0, drop, target = placed
    k = int(rng.integers(3, 5))  # long enough for two cameras to catch the hand on the same frame
    a = int(rng.integers(1, T - k))          # walking frames before the touch (>= 1 after it too)
    fwd = (math.cos(yaw0), math.sin(yaw0))
    away = yaw0 + math.pi + math.radians(rng.uniform(-70, 70))
    xy, yaw, body, touch = [], [], [], []
    for f in range(T):
        if f < a:
            d = STEP * (a - f)
            xy.append((rx - fwd[0] * d, ry - fwd[1] * d)), yaw.append(yaw0), body.append("walk"), touch.append("none")
        elif f < a + k:
            xy.append((rx, ry)), yaw.append(yaw0), body.append("reach"), touch.append(obj.name)
        else:
            d = STEP * (f - a - k + 1)
            xy.append((rx + math.cos(away) * d, ry + math.sin(away) * d)), yaw.append(away)
            body.append("walk"), touch.append("none")
    walk = [f for f in range(T) if body[f] == "walk"]
    jumps = events(rng, walk, _counts(rng))
    for f in jumps:
        body[f] = "jump"
    other = "r" if side == "l" else "l"
    waves = _channel(events(rng, walk, _counts(rng)), T)  # the free hand waves while walking
    arms = [{side: "reaching" if body[f] == "reach" else "down", other: "wave" if waves[f] else "down"}
            for f in range(T)]
    return Script("toucher", xy, yaw, body, arms,
                  {"touch": touch, "jump": _channel(jumps, T), f"wave_{other}": waves},
                  {"object": obj.name, "side": side}, {"target": target, "drop": drop})


def _segments(rng: np.random.Generator, T: int, vocab: list[str]) -> list[tuple[str, int]] | None:
    """2-3 distinct actions of >= 2 frames each filling T frames; sitting only next to walking
    (a person walks to the seat and away from it)."""
    n = int(rng.choice(SEGMENTS))
    labels = [vocab[i] for i in rng.permutation(len(vocab))[:n]]
    if len(labels) < 2 or T < 2 * len(labels):
        return None
    for i, lab in enumerate(labels):
        if lab == "sit" and any(labels[j] != "walk" for j in (i - 1, i + 1) if 0 <= j < len(labels)):
            return None
    lengths = 2 + rng.multinomial(T - 2 * len(labels), [1.0 / len(labels)] * len(labels))
    return list(zip(labels, (int(x) for x in lengths)))


def performer(rng: np.random.Generator, T: int, anchor, seat=None) -> Script | None:
    """A sequence of whole-body actions (walk / jump / squat / sit) and, on the hands, two
    actions one after the other (raise or wave a hand) with rests around them.

    Args:
        anchor: (x, y) where in-place actions happen (the seat's xy for sitting).
        seat: the seat object (chair or low box) or None (then no sitting).
    """
    vocab = [b for b in BODY_ACTIONS if b != "sit" or seat is not None]
    segs = _segments(rng, T, vocab)
    if segs is None:
        return None
    body = [lab for lab, n in segs for _ in range(n)]
    direction = rng.uniform(0, 2 * math.pi)
    u = (math.cos(direction), math.sin(direction))
    # walking and jumping carry the person along ``u`` (jumps are hops forward), so the clip
    # spans several metres and no one camera sees all of it; squats and sits stay put
    along, d = [], 0.0
    for lab in body:
        d += STEP if lab == "walk" else HOP if lab == "jump" else 0.0
        along.append(d)
    if "sit" in body:  # the seat is where the sitting happens
        ref, place = along[body.index("sit")], seat.xy
    else:              # the anchor is the middle of the path
        ref, place = 0.5 * (along[0] + along[-1]), anchor
    xy = [(place[0] + u[0] * (a - ref), place[1] + u[1] * (a - ref)) for a in along]
    yaw = [seat.yaw if lab == "sit" and seat.kind == "chair" else direction for lab in body]
    arm_lab, arms, acts = _hand_actions(rng, T)
    info = {"seat_z": seat.seat_height() if seat is not None else None, "sequence": [lab for lab, _ in segs],
            "hand_order": acts}
    return Script("performer", xy, yaw, body, arms, {"body": body, "arms": arm_lab}, info)


def retime_hands(rng: np.random.Generator, script: Script, start: int) -> None:
    """Redraw the hand actions of a ``performer`` or ``signaller`` so the first one starts on
    frame ``start`` (e.g. when the person crosses from one camera's half into another's)."""
    labels, arms, acts = _hand_actions(rng, len(script.xy), start)
    script.arms, script.channels["arms"], script.info["hand_order"] = arms, labels, acts
