"""Random temporal scenes: objects, 4 synchronized cameras and people acting over T frames.

Every person gets a role (``bench.synth.motion``): a *tour* from one object to another
(jumping and waving on the way), a *toucher* who walks up to an object, touches it and walks
off, or a *performer* doing a sequence of whole-body actions with two hand actions. Shirts
are unique in a temporal scene, so questions name a person by shirt colour and recognising
that person in another camera or frame is a matter of seeing the shirt.
People walk across the scene, so each camera sees only part of what they do.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from bench.synth import motion
from bench.synth.body import SKINS, Person
from bench.synth.camera import Camera, make_camera
from bench.synth.scene import (HATS, OBJECT_COLOURS, OBJECT_ID0, SHIRTS, TROUSERS, Scene, SceneObject, _reach_person,
                               _sample_objects, number_objects)

ROLES = ["walker", "tour", "toucher", "performer", "signaller", "tour", "performer", "toucher"]
PLACE_ORDER = ["tour", "walker", "toucher", "performer", "signaller"]
PERSON_GAP = 0.5     # people never come closer than this on the same frame
OBJECT_GAP = 0.3     # ... nor closer than this to an object's footprint (except the one they use)


def half_view_cameras(rng: np.random.Generator, n: int, cfg, width: int, height: int,
                      divide: float | None = None) -> list[Camera]:
    """``n`` cameras that each see one half of the scene.

    With ``divide`` (the direction of a line through the scene centre, radians), cameras stand
    in pairs at both ends of that line, one just to each side of it, looking along it and
    turned outward so the inner edge of the field of view runs about along the line: each
    camera sees the people on its own side. A person who crosses the line is seen by some
    cameras before and by others after, so no camera sees the whole clip. Camera k stands at
    end ``+, +, -, -`` and side ``+, -, +, -`` (cycling). Without ``divide``: ring cameras aimed
    off-centre to alternating sides (each covers about half the scene).

    Args:
        cfg: a ``CameraConfig`` (radius, elevation, field of view, yaw jitter; ``aim_jitter``
            is the largest sideways offset of the aim point of the ring layout).
    """
    if divide is not None:
        e, nrm = np.array([math.cos(divide), math.sin(divide)]), np.array([-math.sin(divide), math.cos(divide)])
        cams = []
        for k in range(n):
            end, side = (1, 1, -1, -1)[k % 4], (1, -1, 1, -1)[k % 4]
            fov = rng.uniform(cfg.min_fov, cfg.max_fov)
            radius = rng.uniform(cfg.min_radius, cfg.max_radius)
            eye_xy = end * radius * e + side * rng.uniform(0.25, 0.5) * nrm
            # inner edge of the view a few degrees past the line: the halves overlap a little
            turn = math.radians(0.5 * fov - rng.uniform(2.0, 5.0))
            look = math.cos(turn) * (-end * e) + math.sin(turn) * side * nrm
            eye = np.array([eye_xy[0], eye_xy[1], rng.uniform(cfg.min_elevation, cfg.max_elevation)])
            aim_xy = eye_xy + look * radius
            cams.append(make_camera(f"cam{k}", eye, np.array([aim_xy[0], aim_xy[1], rng.uniform(0.6, 1.0)]), fov,
                                    width, height))
        return cams
    cams, phase = [], rng.uniform(0, 2 * math.pi)
    for k in range(n):
        yaw = phase + 2 * math.pi * k / n + math.radians(rng.uniform(-cfg.yaw_jitter, cfg.yaw_jitter))
        radius = rng.uniform(cfg.min_radius, cfg.max_radius)
        eye = np.array([radius * math.cos(yaw), radius * math.sin(yaw), rng.uniform(cfg.min_elevation, cfg.max_elevation)])
        side = np.array([-math.sin(yaw), math.cos(yaw)]) * (1 if k % 2 == 0 else -1)
        off = side * rng.uniform(0.6 * cfg.aim_jitter, cfg.aim_jitter)
        aim = np.array([off[0], off[1], rng.uniform(0.6, 1.0)])
        cams.append(make_camera(f"cam{k}", eye, aim, rng.uniform(cfg.min_fov, cfg.max_fov), width, height))
    return cams


def crossing_frame(xy: list, divide: float) -> int:
    """The first frame on the other side of the dividing line from frame 0."""
    nrm = (-math.sin(divide), math.cos(divide))
    d = [x * nrm[0] + y * nrm[1] for x, y in xy]
    return next((f for f, x in enumerate(d) if (x > 0) != (d[0] > 0)), len(xy))


def crosses(xy: list, divide: float, margin: float) -> bool:
    """Whether a path goes from one side of the dividing line to the other (by ``margin`` m)."""
    nrm = (-math.sin(divide), math.cos(divide))
    d = [x * nrm[0] + y * nrm[1] for x, y in xy]
    return min(d) < -margin and max(d) > margin


def _panels(rng: np.random.Generator, objects: list, n: int, radius: float) -> list:
    """Tall thin screens between the objects: people walking behind one drop out of some
    cameras for a few frames (the discontinuous views of real multi-camera footage)."""
    out = []
    for _ in range(20 * n):
        if len(out) == n:
            break
        size = {"w": rng.uniform(1.0, 1.4), "d": 0.08, "h": rng.uniform(1.6, 1.9)}
        rr, ang = radius * math.sqrt(rng.random()), rng.uniform(0, 2 * math.pi)
        colour = OBJECT_COLOURS[rng.integers(len(OBJECT_COLOURS))]
        if any(o.colour == colour and o.kind == "panel" for o in objects + out):
            continue
        p = SceneObject(OBJECT_ID0 + len(objects) + len(out), "panel", colour, (rr * math.cos(ang), rr * math.sin(ang)),
                        rng.uniform(0, math.pi), size)
        if all(math.dist(p.xy, o.xy) >= o.radius + p.radius + 0.7 for o in objects + out):
            out.append(p)
    return out


def _fits(xy: list, exempt: set, objects, others: list[list], max_radius: float) -> bool:
    for f, (x, y) in enumerate(xy):
        if math.hypot(x, y) > max_radius:
            return False
        if any(math.hypot(x - o.xy[0], y - o.xy[1]) < o.radius + OBJECT_GAP for o in objects if o.oid not in exempt):
            return False
        if any(math.hypot(x - q[f][0], y - q[f][1]) < PERSON_GAP for q in others):
            return False
    return True


def _build(role: str, rng: np.random.Generator, objects, height: float, T: int, radius: float, used_seat: bool,
           divide: float | None = None):
    """(script, exempt object ids) for one role, or None when this draw does not work out."""
    if role in ("walker", "signaller"):  # enter near the edge, cross through the middle
        ang = rng.uniform(0, 2 * math.pi)
        start = (radius * 1.1 * math.cos(ang), radius * 1.1 * math.sin(ang))
        aim = rng.uniform(-0.8, 0.8, size=2)
        return motion.walker(rng, start, math.atan2(aim[1] - start[1], aim[0] - start[0]), T, role == "signaller"), set()
    if role == "tour":
        if len(objects) < 2:
            return None
        pairs = [(i, j) for i in range(len(objects)) for j in range(len(objects)) if i != j]
        if divide is not None:  # from one side of the dividing line to the other, where possible
            nrm = (-math.sin(divide), math.cos(divide))
            side = [o.xy[0] * nrm[0] + o.xy[1] * nrm[1] for o in objects]
            pairs = [(i, j) for i, j in pairs if side[i] * side[j] < 0] or pairs
        i, j = pairs[rng.integers(len(pairs))]
        return motion.tour(rng, objects[i], objects[j], T, bool(rng.random() < 0.5)), {objects[i].oid, objects[j].oid}
    if role == "toucher":
        obj = objects[rng.integers(len(objects))]
        side = "l" if rng.random() < 0.5 else "r"
        placed = _reach_person(rng, obj, height, 0.0, side)
        if placed is None:
            return None
        return motion.toucher(rng, obj, placed, side, T), {obj.oid}
    seats = [o for o in objects if o.can_seat()] if not used_seat else []
    seat = seats[rng.integers(len(seats))] if seats and rng.random() < 0.6 else None
    rr, ang = 0.6 * radius * math.sqrt(rng.random()), rng.uniform(0, 2 * math.pi)  # the path crosses the middle
    script = motion.performer(rng, T, (rr * math.cos(ang), rr * math.sin(ang)), seat)
    if script is None:
        return None
    return script, ({seat.oid} if seat is not None and "sit" in script.body else set())


def sample_temporal_scene(rng: np.random.Generator, cfg, sid: str) -> Scene:
    """One temporal scene following ``cfg`` (a ``SynthConfig``; ``cfg.temporal`` sizes it)."""
    tc, sc = cfg.temporal, cfg.scene
    T = tc.frames
    objects = _sample_objects(rng, SimpleNamespace(scene=SimpleNamespace(object_weights=tc.object_weights,
                                                                         scene_radius=sc.scene_radius)))
    props = [o for o in objects]  # what people walk to and touch; panels only hide them
    objects = objects + _panels(rng, objects, tc.panels, sc.scene_radius)
    n_persons = int(rng.integers(tc.min_persons, tc.max_persons + 1))
    number_objects(objects, n_persons)
    roles = [ROLES[i] for i in rng.permutation(len(ROLES))]
    roles += [ROLES[int(rng.integers(len(ROLES)))] for _ in range(max(0, n_persons - len(roles)))]
    # tours first (only they give trajectories, and they need two objects on opposite sides),
    # then the long paths of walkers, which are hard to fit once the scene fills up
    roles = sorted(roles[:n_persons], key=PLACE_ORDER.index)
    shirts = [SHIRTS[i] for i in rng.permutation(len(SHIRTS))]  # unique: a shirt names a person
    divide = rng.uniform(0, math.pi) if tc.divide else None
    persons, scripts, paths = [], {}, []
    used_seat = False
    for role in roles[:n_persons]:
        for _ in range(tc.place_tries):
            height = float(rng.uniform(sc.min_height, sc.max_height))
            built = _build(role, rng, props, height, T, tc.area_radius - 0.4, used_seat, divide)
            if built is None:
                continue
            script, exempt = built
            if not _fits(script.xy, exempt, objects, paths, tc.area_radius):
                continue
            if divide is not None and not crosses(script.xy, divide, tc.cross_margin):
                continue  # someone who stays on one side is seen whole by that side's cameras
            if divide is not None and "arms" in script.channels:
                # the first hand action starts as the person crosses: the cameras of one side
                # see the rest before it, the other side's the action (but not what came before)
                motion.retime_hands(rng, script, crossing_frame(script.xy, divide) + int(rng.integers(0, 2)))
            pid = len(persons) + 1
            shirt = shirts[pid - 1]
            trousers = shirt
            while trousers == shirt:
                trousers = TROUSERS[rng.integers(len(TROUSERS))]
            hat = HATS[rng.integers(len(HATS))] if rng.random() < sc.hat_prob else None
            track = script.track(height)
            persons.append(Person(pid, track[0][0], track[0][1], height, shirt, trousers, hat,
                                  SKINS[rng.integers(len(SKINS))], track[0][2], track, tc.frame_dt))
            scripts[pid] = script
            paths.append(script.xy)
            used_seat |= "sit" in script.body
            break
    cams = half_view_cameras(rng, tc.cameras, tc.camera, cfg.render.width, cfg.render.height, divide)
    return Scene(sid, persons, objects, cams, {}, [round(f * tc.frame_dt, 6) for f in range(T)], scripts)
