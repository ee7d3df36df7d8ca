"""Temporal tasks (axis "temporal", all MVN): what a person does over the T frames.

A person is named by shirt colour (unique in a temporal scene). Per view, the table holds what
that camera saw on each frame: the label of the person's timeline (airborne or not, hand
waving or not, the landmark they stand at, the body or hand action, hand-object contact)
where the person is recognisable (shirt visible) and the relevant body part is visible,
else None. ``verify_temporal`` turns that into the answers a set of views leaves open.

``ctx.obs[view][f]`` is ``observe_view`` of frame f; ``ctx.scene.scripts`` what people do.
"""
from __future__ import annotations

import math

from bench.synth import verify_temporal as vt
from bench.synth.options import categorical_options, numeric_options
from bench.synth.tasks_common import Candidate, TaskContext, direction_to_camera

QUESTIONS = {
    "trajectory": "Where does the person in the {shirt} shirt walk?",
    "repetition_count": "How many times does the person in the {shirt} shirt jump?",
    "motion_recognition": "What does the person in the {shirt} shirt do, in order?",
    "limb_repetition_count": "How many times does the person in the {shirt} shirt wave their {side} hand?",
    "limb_action_order": "What does the person in the {shirt} shirt do first with their hands?",
    "limb_contact_over_time": "Which object does the person in the {shirt} shirt touch with their {side} hand?",
}
SIDE_TEXT = {"l": "left", "r": "right"}
VAGUE = "moves around"
FEET = {"foot_l", "foot_r", "lower_leg_l", "lower_leg_r"}  # a visible shin or foot shows the feet are off the floor


def _rec(ctx: TaskContext, v: str, f: int, pid: int) -> dict | None:
    """The person's record on frame f of view v if the view recognises them (shirt seen)."""
    rec = ctx.obs[v][f]["persons"][pid]
    return rec if rec["seen"] and "shirt" in rec["attrs"] else None


def _frames(ctx: TaskContext) -> int:
    return len(ctx.scene.times)


def _span(ctx: TaskContext, table: dict, views, entities: list[int]) -> dict:
    """Evidence spans: per view, the frames on which it saw something (first to last)."""
    out = {}
    for v in views:
        seen = [f for f, o in enumerate(table[v]["obs"]) if o is not None]
        if seen:
            out[v] = (ctx.scene.times[seen[0]], ctx.scene.times[seen[-1]], entities)
    return out


def _persons(ctx: TaskContext, channel: str):
    """(person, script) of people with ``channel`` in their script, in a seeded order."""
    people = [p for p in ctx.scene.persons if channel in ctx.scene.scripts[p.pid].channels]
    for i in ctx.rng.permutation(len(people)):
        yield people[i], ctx.scene.scripts[people[i].pid]


# --- repetitions (jumps, hand waves) --------------------------------------------------------

def consistent_count(table: dict, facts: dict, views: list[str]) -> set[str]:
    return vt.values(facts["grammar"], vt.label_mask(table, facts, views))


def count_distractors(table: dict, gt: list[str]) -> list[tuple[int, str]]:
    """Typed wrong counts: the most any one resolving view saw, and the naive sum over them
    (a repetition seen by two cameras counted twice)."""
    per_view = [sum(o == "1" for o in table[v]["obs"]) for v in gt]
    return [(max(per_view), "single_view_count"), (sum(per_view), "naive_sum")]


def _count_candidates(ctx: TaskContext, task: str, channel: str, visible, question: str, other: str | None):
    T = _frames(ctx)
    grammar = {"kind": "events", "T": T}
    hi = (T + 1) // 2
    for person, script in _persons(ctx, channel):
        labels = script.channels[channel]
        table = {v: {"obs": [str(labels[f]) if (r := _rec(ctx, v, f, person.pid)) and visible(r) else None
                             for f in range(T)]} for v in ctx.views}
        truth = sum(labels)
        nota = ctx.want_nota()
        extra = [(sum(script.channels[other]), "other_hand")] if other and other in script.channels else []

        def make_options(gt, table=table, truth=truth, extra=extra, nota=nota):
            typed = count_distractors(table, gt) + extra
            return numeric_options(truth, typed, 0, hi, ctx.rng, nota)

        facts = {"person": person.pid, "grammar": grammar, "domain": vt.grammar_answers(grammar)}
        yield Candidate(task, question.format(shirt=person.shirt), str(truth), nota, facts, table, make_options,
                        spans=_span(ctx, table, ctx.views, [person.pid]))


def propose_repetition(ctx: TaskContext):
    yield from _count_candidates(ctx, "repetition_count", "jump", lambda r: bool(FEET & set(r["parts"])),
                                 QUESTIONS["repetition_count"], None)


def propose_limb_repetition(ctx: TaskContext):
    for side in ("r", "l") if ctx.rng.random() < 0.5 else ("l", "r"):
        other = "wave_" + ("l" if side == "r" else "r")
        q = QUESTIONS["limb_repetition_count"].replace("{side}", SIDE_TEXT[side])
        yield from _count_candidates(ctx, "limb_repetition_count", f"wave_{side}", lambda r, s=side: f"lower_arm_{s}" in r["parts"],
                                     q, other)


# --- trajectory -----------------------------------------------------------------------------

def consistent_trajectory(table: dict, facts: dict, views: list[str]) -> set[str]:
    return vt.values(facts["grammar"], vt.label_mask(table, facts, views))


def _place_obs(ctx: TaskContext, v: str, f: int, pid: int, truth: str) -> str | None:
    """The landmark (or ``transit``) a view shows, only when the picture is unambiguous: at a
    landmark, the person's mask touches that object's mask and no other; in transit, the
    person's feet are visible and no object touches their mask."""
    rec = _rec(ctx, v, f, pid)
    if rec is None:
        return None
    obs = ctx.obs[v][f]
    touching = [o.name for o in ctx.scene.objects if obs["pairs"][(pid, o.oid)]["any"] == "overlap"]
    if truth == "transit":
        return "transit" if not touching and FEET & set(rec["parts"]) else None
    return truth if touching == [truth] else None


def propose_trajectory(ctx: TaskContext):
    T, rng = _frames(ctx), ctx.rng
    names = [o.name for o in ctx.scene.objects if o.kind != "panel"]
    grammar = {"kind": "path", "T": T, "vocab": names, "min_len": 2}
    for person, script in _persons(ctx, "place"):
        start, end = script.info["start"], script.info["end"]
        labels = script.channels["place"]
        table = {v: {"obs": [_place_obs(ctx, v, f, person.pid, labels[f]) for f in range(T)]} for v in ctx.views}
        others = [n for n in names if n not in (start, end)]
        if not others:
            continue
        third = others[rng.integers(len(others))]
        # a camera that saw only one end of the walk must not settle it: one option shares the
        # start, one the end, and one is the same walk reversed
        typed = [(vt.path_text(end, start), "reversed_path"), (vt.path_text(start, third), "wrong_end"),
                 (vt.path_text(third, end), "wrong_start")]
        nota = ctx.want_nota()
        truth = vt.path_text(start, end)
        domain = vt.grammar_answers(grammar)
        opts = categorical_options(truth, typed, domain, rng, nota, "wrong_landmark")
        if opts is None:
            continue
        facts = {"person": person.pid, "grammar": grammar, "domain": domain}
        by_name = {o.name: o.oid for o in ctx.scene.objects}
        yield Candidate("trajectory", QUESTIONS["trajectory"].format(shirt=person.shirt), truth, nota, facts, table,
                        lambda gt, o=opts: o,
                        spans=_span(ctx, table, ctx.views, [person.pid, by_name[start], by_name[end]]))


# --- whole-body action sequence -------------------------------------------------------------

def consistent_motion(table: dict, facts: dict, views: list[str]) -> set[str]:
    return vt.values(facts["grammar"], vt.label_mask(table, facts, views))


def _compress(labels: list) -> list[str]:
    out = []
    for x in labels:
        if x is not None and (not out or out[-1] != x):
            out.append(x)
    return out


def propose_motion(ctx: TaskContext):
    T, rng = _frames(ctx), ctx.rng
    for person, script in _persons(ctx, "body"):
        labels = script.channels["body"]
        seq = script.info["sequence"]
        vocab = ["walk", "jump", "squat"] + (["sit"] if script.info["seat_z"] is not None else [])
        grammar = {"kind": "segments", "T": T, "vocab": vocab, "min_len": 2, "min_segments": 1,
                   "max_segments": T // 2}  # the viewer is not told how many actions there are
        table = {v: {"obs": [labels[f] if (r := _rec(ctx, v, f, person.pid)) and FEET & set(r["parts"]) else None
                             for f in range(T)]} for v in ctx.views}
        truth = vt.sequence_text(seq)
        unused = [x for x in vocab if x not in seq]
        wrong = list(seq)
        wrong[int(rng.integers(len(seq)))] = unused[0] if unused else seq[0]
        nota = ctx.want_nota()
        domain = vt.grammar_answers(grammar)

        def make_options(gt, table=table, seq=seq, truth=truth, wrong=wrong, nota=nota, domain=domain):
            partial = max((_compress(table[v]["obs"]) for v in gt), key=len)
            typed = [(vt.sequence_text(seq[::-1]), "reversed_order"), (VAGUE, "vague_verb")]
            if len(partial) >= 2 and partial != seq:
                typed.append((vt.sequence_text(partial), "single_view_sequence"))
            if wrong != seq and len(set(wrong)) == len(wrong):
                typed.append((vt.sequence_text(wrong), "wrong_action"))
            return categorical_options(truth, typed, domain, ctx.rng, nota, "other_sequence")

        facts = {"person": person.pid, "grammar": grammar, "domain": domain}
        yield Candidate("motion_recognition", QUESTIONS["motion_recognition"].format(shirt=person.shirt), truth, nota,
                        facts, table, make_options, spans=_span(ctx, table, ctx.views, [person.pid]))


# --- hand actions: which first --------------------------------------------------------------

def consistent_hand_order(table: dict, facts: dict, views: list[str]) -> set[str]:
    return vt.values(facts["grammar"], vt.arms_mask(table, facts, views))


def propose_hand_order(ctx: TaskContext):
    T, rng = _frames(ctx), ctx.rng
    vocab = list(vt.HAND_TEXT)
    # the viewer is not told how many hand actions there are: "first" needs the clip before it
    grammar = {"kind": "hand_actions", "T": T, "vocab": vocab, "min_len": 2, "max_actions": 3}
    for person, script in _persons(ctx, "arms"):
        first, second = script.info["hand_order"]
        arms = script.arms
        table = {}
        for v in ctx.views:
            obs = []
            for f in range(T):
                r = _rec(ctx, v, f, person.pid)
                seen = [arms[f][s] if r is not None and r["arms"][s] else None for s in ("l", "r")]
                obs.append(seen if any(x is not None for x in seen) else None)
            table[v] = {"obs": obs}
        nota = ctx.want_nota()
        truth = vt.HAND_TEXT[first]
        opts = categorical_options(truth, [(vt.HAND_TEXT[second], "reversed_order")], list(vt.HAND_TEXT.values()),
                                   rng, nota, "not_performed")
        if opts is None:
            continue
        facts = {"person": person.pid, "grammar": grammar, "domain": vt.grammar_answers(grammar)}
        yield Candidate("limb_action_order", QUESTIONS["limb_action_order"].format(shirt=person.shirt), truth, nota,
                        facts, table, lambda gt, o=opts: o, spans=_span(ctx, table, ctx.views, [person.pid]))


# --- hand-object contact over time ----------------------------------------------------------

def consistent_touch(table: dict, facts: dict, views: list[str]) -> set[str]:
    return vt.values(facts["grammar"], vt.touch_mask(table, facts, views))


def propose_touch(ctx: TaskContext):
    T, rng, scene = _frames(ctx), ctx.rng, ctx.scene
    names = [o.name for o in scene.objects if o.kind != "panel"]
    grammar = {"kind": "touch", "T": T, "vocab": names, "min_len": 2}
    for person, script in _persons(ctx, "touch"):
        side, target = script.info["side"], next(o for o in scene.objects if o.name == script.info["object"])
        table = {}
        for v in ctx.views:
            obs = []
            for f in range(T):
                r = _rec(ctx, v, f, person.pid)
                pairs = ctx.obs[v][f]["pairs"]
                obs.append({o.name: pairs[(person.pid, o.oid)][f"hand_{side}"] for o in scene.objects
                            if o.name in names} if r is not None else None)
            table[v] = {"dir": direction_to_camera(ctx.cams[v], target.centre()), "obs": obs}
        path_dist = {o.name: min(math.dist(xy, o.xy) - o.radius for xy in script.xy) for o in scene.objects
                     if o.name in names}
        near = sorted((n for n in names if n != target.name), key=path_dist.get)
        nota = ctx.want_nota()
        opts = categorical_options(target.name, [(near[0], "nearest_object")] if near else [], near, rng, nota,
                                   "other_object")
        if opts is None:
            continue
        facts = {"person": person.pid, "grammar": grammar, "domain": names,
                 "confirm_angle": ctx.cfg.observe.confirm_angle}
        q = QUESTIONS["limb_contact_over_time"].format(shirt=person.shirt, side=SIDE_TEXT[side])
        yield Candidate("limb_contact_over_time", q, target.name, nota, facts, table, lambda gt, o=opts: o,
                        value_key=target.kind, spans=_span(ctx, table, ctx.views, [person.pid, target.oid]))
