"""Random scenes: a checkerboard floor, objects, articulated people in poses, ring cameras.

Entity ids: people 1..P; objects from 11 in scenes of up to 10 people (every scene of the
default benchmark), from 101 in larger ones (``object_id0``); 0 is the floor in id maps. Code
tells people from objects by ``scene.persons`` / ``scene.objects``, never by the id's size.
People who touch an
object put a hand on its surface (true contact); "near" people stop 5-25 cm short of it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from bench.synth.body import ARM_REACH, HAND_R, SHOULDER_Y, SKINS, Person, Pose, joints, person_entity, reach_shoulder
from bench.synth.camera import Camera, sample_ring_cameras
from bench.synth.primitives import COLOURS, Entity, Primitive

# One palette for shirts, trousers and objects: a colour's name then says nothing about which
# of them it belongs to, so a text-only model cannot tell a shirt answer from a distractor.
SHIRTS = list(COLOURS)
TROUSERS = list(COLOURS)
HATS = ["red", "yellow", "black", "white", "blue"]
OBJECT_KINDS = ["box", "ball", "pole", "chair"]
OBJECT_COLOURS = list(COLOURS)
OBJECT_ID0 = 11          # the first object id in a scene of up to 10 people ...
CROWD_OBJECT_ID0 = 101   # ... and in a larger one (up to 16 people: ids 1..16 stay theirs)
FREE_ARMS = ["down", "down", "side", "hip"]


@dataclass
class SceneObject:
    oid: int
    kind: str  # box, ball, pole, chair; panel (temporal scenes: a tall screen people walk behind)
    colour: str
    xy: tuple[float, float]
    yaw: float
    size: dict  # box: w, d, h; ball: r; pole: h, r; chair: {}

    @property
    def name(self) -> str:
        return f"{self.colour} {self.kind}"

    @property
    def radius(self) -> float:
        """Radius of a circle on the floor that contains the object."""
        if self.kind in ("box", "panel"):
            return 0.5 * math.hypot(self.size["w"], self.size["d"])
        return {"ball": self.size.get("r", 0.2), "pole": 0.16, "chair": 0.33}[self.kind]

    def centre(self) -> np.ndarray:
        """A representative 3-D point (for distances and view angles)."""
        z = {"box": self.size.get("h", 0) / 2, "panel": self.size.get("h", 0) / 2, "ball": self.size.get("r", 0), "pole": 1.0, "chair": 0.5}[self.kind]
        return np.array([self.xy[0], self.xy[1], z])

    def can_seat(self) -> bool:
        return self.kind == "chair" or (self.kind == "box" and 0.38 <= self.size["h"] <= 0.6)

    def seat_height(self) -> float:
        return 0.48 if self.kind == "chair" else self.size["h"]

    def entity(self) -> Entity:
        col, x, y, c = COLOURS[self.colour], self.xy[0], self.xy[1], math.cos(self.yaw)
        s = math.sin(self.yaw)
        local = lambda lx, ly, z: np.array([x + c * lx - s * ly, y + s * lx + c * ly, z])  # noqa: E731
        box = lambda ctr, half: Primitive("box", (ctr, np.array(half), self.yaw), 0, col)  # noqa: E731
        if self.kind in ("box", "panel"):
            w, d, h = self.size["w"], self.size["d"], self.size["h"]
            prims = [box(local(0, 0, h / 2), (w / 2, d / 2, h / 2))]
        elif self.kind == "ball":
            r = self.size["r"]
            prims = [Primitive("sphere", (np.array([x, y, r]), r), 0, col)]
        elif self.kind == "pole":
            prims = [Primitive("capsule", (np.array([x, y, 0.0]), np.array([x, y, self.size["h"]]), self.size["r"]), 0, col),
                     box(local(0, 0, 0.02), (0.15, 0.15, 0.02))]
        else:  # chair: seat, back rest on the -x side, four legs
            prims = [box(local(0, 0, 0.45), (0.22, 0.22, 0.03)), box(local(-0.2, 0, 0.72), (0.02, 0.22, 0.25))]
            prims += [box(local(sx * 0.19, sy * 0.19, 0.21), (0.02, 0.02, 0.21)) for sx in (-1, 1) for sy in (-1, 1)]
        return Entity(self.oid, prims)

    def contact_point(self, direction: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """A point on the surface facing horizontal ``direction`` and its outward normal."""
        dx, dy = direction
        if self.kind == "box":
            c, s = math.cos(self.yaw), math.sin(self.yaw)
            lx, ly = c * dx + s * dy, -s * dx + c * dy  # direction in the box frame
            hw, hd = self.size["w"] / 2 - 0.07, self.size["d"] / 2 - 0.07
            k = min(hw / max(abs(lx), 1e-6), hd / max(abs(ly), 1e-6))
            px, py = lx * k, ly * k
            return np.array([self.xy[0] + c * px - s * py, self.xy[1] + s * px + c * py, self.size["h"]]), np.array([0, 0, 1.0])
        if self.kind == "ball":
            r, el = self.size["r"], math.radians(rng.uniform(35, 65))
            n = np.array([math.cos(el) * dx, math.cos(el) * dy, math.sin(el)])
            return np.array([self.xy[0], self.xy[1], r]) + r * n, n
        if self.kind == "pole":
            z = rng.uniform(0.9, 1.35)
            n = np.array([dx, dy, 0.0])
            return np.array([self.xy[0], self.xy[1], z]) + self.size["r"] * n, n
        # chair: the top of the back rest
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        return np.array([self.xy[0] - 0.2 * c, self.xy[1] - 0.2 * s, 0.97]), np.array([0, 0, 1.0])


@dataclass
class Scene:
    sid: str
    persons: list[Person]
    objects: list[SceneObject]
    cameras: list[Camera]
    contacts: dict[int, dict] = field(default_factory=dict)
    # ^ pid -> {"object": oid, "kind": "touch" | "near" | "sit", "effector": "hand_l" | "hand_r" | "seat", "gap": m}
    times: list[float] = field(default_factory=lambda: [0.0])  # frame times in seconds (temporal: T of them)
    scripts: dict = field(default_factory=dict)  # temporal: pid -> motion.Script (what each person does when)

    def person(self, pid: int) -> Person:
        return next(p for p in self.persons if p.pid == pid)

    def obj(self, oid: int) -> SceneObject:
        return next(o for o in self.objects if o.oid == oid)

    def entities(self, t: float = 0.0) -> list[Entity]:
        return [person_entity(p, t) for p in self.persons] + [o.entity() for o in self.objects]

    def shadows(self, t: float = 0.0) -> list[tuple[float, float, float]]:
        """Blob shadows under people (they stay on the floor when a person jumps)."""
        return [(q.xy[0], q.xy[1], 0.3) for q in (p.at(t) for p in self.persons)]

    def touching(self, pid: int) -> int | None:
        """The object a person truly touches (hand contact or sitting), else None."""
        c = self.contacts.get(pid)
        return c["object"] if c and c["kind"] in ("touch", "sit") else None


def object_id0(n_persons: int) -> int:
    """The first object id of a scene with at most ``n_persons`` people (ids 1..n_persons)."""
    return OBJECT_ID0 if n_persons < OBJECT_ID0 else CROWD_OBJECT_ID0


def number_objects(objects: list, n_persons: int) -> None:
    """Give ``objects`` (in order) the ids of a scene with at most ``n_persons`` people; the
    default scenes (up to 10 people) keep the ids 11, 12, ... they were sampled with."""
    for k, obj in enumerate(objects):
        obj.oid = object_id0(n_persons) + k


def _free_spot(rng, radius, taken, objects, min_gap=0.62, near=None) -> tuple[float, float] | None:
    for _ in range(60):
        if near is not None and rng.random() < 0.8:
            ang, dist = rng.uniform(0, 2 * math.pi), rng.uniform(0.65, 1.1)
            xy = (near[0] + dist * math.cos(ang), near[1] + dist * math.sin(ang))
        else:
            rr, ang = radius * math.sqrt(rng.random()), rng.uniform(0, 2 * math.pi)
            xy = (rr * math.cos(ang), rr * math.sin(ang))
        if math.hypot(*xy) > radius + 0.4:
            continue
        if all(math.hypot(xy[0] - q[0], xy[1] - q[1]) >= min_gap for q in taken) and \
                all(math.hypot(xy[0] - o.xy[0], xy[1] - o.xy[1]) >= o.radius + 0.3 for o in objects):
            return xy
    return None


def _sample_objects(rng, cfg) -> list[SceneObject]:
    weights = np.asarray(cfg.scene.object_weights, float)
    n = int(rng.choice(len(weights), p=weights / weights.sum()))
    objects, names = [], set()
    for k in range(n * 4):
        if len(objects) == n:
            break
        kind, colour = OBJECT_KINDS[rng.integers(4)], OBJECT_COLOURS[rng.integers(len(OBJECT_COLOURS))]
        if (colour, kind) in names:  # object names must be unique in a scene
            continue
        size = {"box": lambda: {"w": rng.uniform(0.4, 0.75), "d": rng.uniform(0.4, 0.75),
                                "h": rng.choice([rng.uniform(0.4, 0.55), rng.uniform(0.6, 0.95)])},
                "ball": lambda: {"r": rng.uniform(0.14, 0.3)},
                "pole": lambda: {"h": rng.uniform(1.5, 2.0), "r": rng.uniform(0.035, 0.055)},
                "chair": lambda: {}}[kind]()
        obj = SceneObject(OBJECT_ID0 + len(objects), kind, colour, (0.0, 0.0), rng.uniform(0, 2 * math.pi), size)
        for _ in range(40):
            rr, ang = cfg.scene.scene_radius * math.sqrt(rng.random()), rng.uniform(0, 2 * math.pi)
            xy = (rr * math.cos(ang), rr * math.sin(ang))
            if all(math.hypot(xy[0] - o.xy[0], xy[1] - o.xy[1]) >= o.radius + obj.radius + 0.9 for o in objects):
                obj.xy = xy
                objects.append(obj)
                names.add((colour, kind))
                break
    return objects


def _reach_person(rng, obj: SceneObject, height: float, gap: float, side: str) -> tuple | None:
    """Root xy, yaw, pelvis drop and hand target for a person reaching ``obj``; None if infeasible."""
    ang = rng.uniform(0, 2 * math.pi)
    if obj.kind == "chair":  # reach the back rest from behind the chair
        ang = obj.yaw + math.pi + rng.uniform(-0.6, 0.6)
    direction = np.array([math.cos(ang), math.sin(ang)])
    point, normal = obj.contact_point(direction, rng)
    target = point + normal * (HAND_R * height + (gap if gap > 0 else -0.006))
    reach = ARM_REACH * height
    for drop in (0.0, 0.08, 0.16, 0.24, 0.3):
        fwd, sz = reach_shoulder(height, drop)
        dz = sz - target[2]
        if abs(dz) <= 0.82 * reach:
            break
    else:
        return None
    hd = math.sqrt(max((0.9 * reach) ** 2 - dz * dz, 0.0))
    yaw = math.atan2(-direction[1], -direction[0])  # face the object
    left = np.array([-math.sin(yaw), math.cos(yaw)])
    fwd_v = np.array([math.cos(yaw), math.sin(yaw)])
    shoulder_xy = target[:2] + direction * hd
    root = shoulder_xy - left * SHOULDER_Y * height * (1 if side == "l" else -1) - fwd_v * fwd
    if math.hypot(root[0] - obj.xy[0], root[1] - obj.xy[1]) < obj.radius + 0.12:
        return None
    return (float(root[0]), float(root[1])), yaw, drop, tuple(float(v) for v in target)


def _foot_person(rng, obj: SceneObject, height: float, side: str) -> tuple | None:
    """Root xy, yaw and ankle target for a person resting one foot on a ball or a low box."""
    if not (obj.kind == "ball" or (obj.kind == "box" and obj.size["h"] <= 0.55)):
        return None
    ang = rng.uniform(0, 2 * math.pi)
    direction = np.array([math.cos(ang), math.sin(ang)])
    if obj.kind == "ball":
        point, normal = np.array([obj.xy[0], obj.xy[1], 2 * obj.size["r"]]), np.array([0.0, 0.0, 1.0])
    else:
        point, normal = obj.contact_point(direction, rng)
    # the foot capsule (radius 0.025 H) rests on the surface; the ankle is its back end
    target = point + normal * (0.025 * height - 0.006)
    yaw = math.atan2(-direction[1], -direction[0])
    fwd = np.array([math.cos(yaw), math.sin(yaw)])
    left = np.array([-math.sin(yaw), math.cos(yaw)])
    target[:2] -= fwd * 0.04 * height  # toes over the top, ankle slightly behind it
    root = target[:2] + direction * rng.uniform(0.22, 0.3) * height - left * 0.06 * height * (1 if side == "l" else -1)
    if math.hypot(root[0] - obj.xy[0], root[1] - obj.xy[1]) < obj.radius + 0.1:
        return None
    return (float(root[0]), float(root[1])), yaw, tuple(float(v) for v in target)


def sample_scene(rng: np.random.Generator, cfg, sid: str) -> Scene:
    """One random scene following ``cfg`` (a ``SynthConfig``)."""
    sc = cfg.scene
    objects = _sample_objects(rng, cfg)
    n_persons = int(rng.integers(sc.min_persons, sc.max_persons + 1))
    number_objects(objects, n_persons)
    shirts = list(rng.permutation(SHIRTS))[:n_persons]
    while len(shirts) < n_persons:
        shirts.append(SHIRTS[rng.integers(len(SHIRTS))])
    if n_persons >= 3 and rng.random() < sc.shared_shirt_prob:  # same-shirt pairs on purpose
        i, j = rng.choice(n_persons, 2, replace=False)
        shirts[j] = shirts[i]
    persons, contacts, taken = [], {}, []
    # contact people first: touch / near / sit, at most one per object and role
    plans = []
    for obj in objects:
        if rng.random() < 0.7:
            plans.append((obj, "touch"))
        if rng.random() < 0.45:
            plans.append((obj, "near"))
        if obj.can_seat() and rng.random() < 0.3:
            plans.append((obj, "sit"))
        if rng.random() < 0.7:
            plans.append((obj, "foot"))
    plans = [plans[i] for i in rng.permutation(len(plans))]
    for obj, kind in plans:
        if len(persons) >= n_persons:
            break
        pid, height = len(persons) + 1, float(rng.uniform(sc.min_height, sc.max_height))
        other = FREE_ARMS[rng.integers(len(FREE_ARMS))] if rng.random() < 0.75 else "raised"
        if kind == "sit":
            if any(c["object"] == obj.oid and c["kind"] == "sit" for c in contacts.values()):
                continue
            yaw = obj.yaw if obj.kind == "chair" else rng.uniform(0, 2 * math.pi)
            arms = {"l": FREE_ARMS[rng.integers(4)], "r": FREE_ARMS[rng.integers(4)]}
            if rng.random() < 0.25:
                arms["l" if rng.random() < 0.5 else "r"] = "raised"
            pose, xy, eff, gap = Pose("sit", arms, seat_z=obj.seat_height()), obj.xy, "seat", 0.0
        elif kind == "foot":
            side = "l" if rng.random() < 0.5 else "r"
            placed = _foot_person(rng, obj, height, side)
            if placed is None:
                continue
            xy, yaw, target = placed
            arms = {"l": FREE_ARMS[rng.integers(4)], "r": FREE_ARMS[rng.integers(4)]}
            pose, eff, gap = Pose("foot", arms, foot_target=target, foot_side=side), f"foot_{side}", 0.0
            probe = Person(0, xy, yaw, height, "red", "black", None, (0, 0, 0), pose)
            if np.linalg.norm(joints(probe)[f"ankle_{side}"] - np.asarray(target)) > 0.01:
                continue
            kind = "touch"
        else:
            side = "l" if rng.random() < 0.5 else "r"
            gap = float(rng.uniform(0.05, 0.25)) if kind == "near" else 0.0
            placed = _reach_person(rng, obj, height, gap, side)
            if placed is None:
                continue
            xy, yaw, drop, target = placed
            arms = {side: "reaching", ("r" if side == "l" else "l"): other}
            pose, eff = Pose(kind, arms, reach_target=target, drop=drop), f"hand_{side}"
            probe = Person(0, xy, yaw, height, "red", "black", None, (0, 0, 0), pose)
            if np.linalg.norm(joints(probe)[f"hand_{side}"] - np.asarray(target)) > 0.01:
                continue  # the arm cannot reach exactly: contact (or the gap) would be wrong
        if any(math.hypot(xy[0] - q[0], xy[1] - q[1]) < 0.6 for q in taken) or any(
                o is not obj and math.hypot(xy[0] - o.xy[0], xy[1] - o.xy[1]) < o.radius + 0.3 for o in objects):
            continue
        persons.append(Person(pid, xy, yaw, height, "", "", None, (0, 0, 0), pose))
        contacts[pid] = {"object": obj.oid, "kind": kind, "effector": eff, "gap": round(gap, 4)}
        taken.append(xy)
    while len(persons) < n_persons:
        near = taken[rng.integers(len(taken))] if taken and rng.random() < sc.cluster_prob else None
        xy = _free_spot(rng, sc.scene_radius, taken, objects, near=near)
        if xy is None:
            break
        kind = rng.choice(["stand", "stand", "raise_one", "raise_both", "crouch"])
        arms = {"l": FREE_ARMS[rng.integers(4)], "r": FREE_ARMS[rng.integers(4)]}
        if kind == "raise_one":
            arms["l" if rng.random() < 0.5 else "r"] = "raised"
        elif kind == "raise_both":
            arms = {"l": "raised", "r": "raised"}
        pose = Pose(str(kind), arms, drop=0.22 if kind == "crouch" else 0.0)
        persons.append(Person(len(persons) + 1, xy, rng.uniform(0, 2 * math.pi),
                              float(rng.uniform(sc.min_height, sc.max_height)), "", "", None, (0, 0, 0), pose))
        taken.append(xy)
    for person, shirt in zip(persons, shirts):  # appearance, after the count is final
        person.shirt = shirt
        person.trousers = shirt
        while person.trousers == shirt:  # same-colour outfits would hide the trousers cue
            person.trousers = TROUSERS[rng.integers(len(TROUSERS))]
        person.hat = HATS[rng.integers(len(HATS))] if rng.random() < sc.hat_prob else None
        person.skin = SKINS[rng.integers(len(SKINS))]
    n_cams = int(rng.integers(cfg.scene.min_cameras, cfg.scene.max_cameras + 1))
    cams = sample_ring_cameras(rng, n_cams, cfg.camera, cfg.render.width, cfg.render.height)
    return Scene(sid, persons, objects, cams, contacts)
