"""Shared pieces of the task generators: the proposal record and cross-view helpers.

A task proposes ``Candidate`` questions for one scene from the per-view observations; the
generator then verifies them (``bench.synth.verify``) and keeps the ones that pass.
Tables and facts use string keys only: they are stored in the JSON and re-checked from it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from bench.synth.camera import Camera


@dataclass
class TaskContext:
    """Everything a task may look at for one scene."""

    scene: object                     # bench.synth.scene.Scene
    obs: dict[str, dict]              # view_id -> observe_view(...) output (int keys)
    cams: dict[str, Camera]
    rng: np.random.Generator
    cfg: object                       # SynthConfig
    nota_mode: bool                   # 5-option (CVBench) mode
    dense: bool = False               # propose every question the scene supports, not a sample of them

    @property
    def views(self) -> list[str]:
        return list(self.obs)

    def first(self, k: int) -> int | None:
        """A proposer's cap on variants of one question (mark views, golden views): ``k``, or
        None (all of them) when the scene is dense; for slicing, ``items[:ctx.first(2)]``."""
        return None if self.dense else k

    def want_nota(self) -> bool:
        """Whether to build the "None of the above is right" variant of the next question.

        Over-sampled (1.5x the target share) because not every variant survives verification;
        balancing trims the share back to ``options.none_share``.
        """
        return self.nota_mode and self.rng.random() < 1.5 * self.cfg.options.none_share


@dataclass
class Candidate:
    """A proposed question before verification and letter assignment."""

    task: str
    question: str
    truth: str                        # the right value (option text); NOTA variants do not list it
    nota_answer: bool                 # True: the truth is left out and "None of the above" is right
    facts: dict
    table: dict                       # view_id -> what that view shows (task-specific, JSON)
    make_options: Callable[[list[str]], tuple[list[str], dict[str, str]] | list[tuple] | None]
    # ^ V_GT -> (listed values, {value: distractor type}); distractors may depend on V_GT. A list of
    # such pairs offers alternative option sets, best first: each is verified, the record of the
    # first that passes carries the others' as ``alternatives``, and selection keeps one of them
    marks: list[tuple[str, int, str]] = field(default_factory=list)   # (view_id, entity, label)
    evidence: dict[str, list[int]] = field(default_factory=dict)      # view_id -> entity ids it shows
    golden: str | None = None         # SVS: the view that must decide the question
    value_key: str | None = None      # what answer balancing flattens (default: the answer value)
    spans: dict[str, tuple] | None = None  # temporal: view_id -> (t_start, t_end, entities) of its evidence


MAX_COUNT = 12  # count answers run 0..12, or up to the config's largest scene when that is larger


def count_domain(cfg) -> list[str]:
    """The values a person count may take in scenes of ``cfg`` (a ``SynthConfig``): "0".."12", or
    up to ``scene.max_persons`` for crowds (the default benchmark's domain stays 0..12)."""
    return [str(k) for k in range(max(MAX_COUNT, cfg.scene.max_persons) + 1)]


def seen_persons(obs: dict) -> list[int]:
    return [pid for pid, rec in obs["persons"].items() if rec["seen"]]


def compatible(attrs_a: dict, attrs_b: dict) -> bool:
    """Two sightings can be the same person: every attribute visible in both agrees."""
    return all(attrs_a[k] == attrs_b[k] for k in attrs_a.keys() & attrs_b.keys())


def identifiable(ctx: TaskContext, pid: int, mark_view: str, view: str) -> bool:
    """Whether the person marked in ``mark_view`` can be recognised in ``view`` by appearance.

    True in the mark view itself; elsewhere the person must be seen, share at least one visible
    attribute with the marked sighting, and be the only seen person compatible with it.
    """
    if view == mark_view:
        return True
    ref = ctx.obs[mark_view]["persons"][pid]["attrs"]
    here = ctx.obs[view]["persons"]
    if not here[pid]["seen"] or not (ref.keys() & here[pid]["attrs"].keys()):
        return False
    matches = [q for q in seen_persons(ctx.obs[view]) if compatible(ref, here[q]["attrs"])]
    return matches == [pid]


def direction_to_camera(cam: Camera, point: np.ndarray) -> list[float]:
    v = cam.centre - point
    return [round(float(x), 4) for x in v / np.linalg.norm(v)]


def angle_deg(u: list[float], v: list[float]) -> float:
    return float(np.degrees(np.arccos(np.clip(np.dot(u, v), -1.0, 1.0))))


def identifying_views(table: dict, facts: dict, views: list[str]) -> list[str]:
    """Views in which the marked person can be told apart: the mark view itself, and views
    whose ``ident`` flag says the person is recognisable *given* the mark view is also seen."""
    mark = facts["mark_view"]
    if mark not in views:
        return []
    return [v for v in views if v == mark or table[v]["ident"]]


def contact_values(table: dict, facts: dict, views: list[str], key: str) -> set[str]:
    """Values (objects or body parts) that may be in contact, seen from ``views``.

    ``table[v]`` = {"ident": bool, "dir": unit vector to the camera, key: {value: status}}.
    A value is ruled out by any view that identifies the person and shows it ``separated``;
    a value is confirmed by two identifying views, at least ``facts['confirm_angle']`` apart,
    that both show it ``overlap``: then only confirmed values remain.
    """
    domain = list(facts["domain"])
    ident = identifying_views(table, facts, views)
    left = {x for x in domain if not any(table[v][key].get(x) == "separated" for v in ident)}
    confirmed = set()
    for x in left:
        overl = [table[v]["dir"] for v in ident if table[v][key].get(x) == "overlap"]
        if any(angle_deg(a, b) >= facts["confirm_angle"] for i, a in enumerate(overl) for b in overl[i + 1:]):
            confirmed.add(x)
    return confirmed or left
