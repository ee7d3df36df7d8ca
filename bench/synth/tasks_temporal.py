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

from bench.synth import motion
from bench.synth import verify_temporal as vt
from bench.synth.options import numeric_options
from bench.synth.options_temporal import cover_options, grid_option_sets, twin_option_sets
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
OPTION_SETS = 4  # option sets offered per motion / walk question; selection keeps one (balance.select)
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


def _singles(consistent, table: dict, facts: dict) -> list[set]:
    return [consistent(table, facts, [v]) for v in table]


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

        facts = {"person": person.pid, "grammar": grammar, "domain": vt.grammar_answers(grammar)}

        def make_options(gt, table=table, truth=truth, extra=extra, nota=nota, facts=facts):
            # every support value but one is listed; the one left out is drawn uniformly among
            # those whose absence leaves no single view settled, so that each number is listed
            # (and, answers being flat, right) about equally often: omitting the values far
            # from the evidence would make the extremes right whenever they are listed
            kinds = {v: k for v, k in reversed(count_distractors(table, gt) + extra)}
            others = [v for v in range(hi + 1) if v != truth]
            keep = others
            if not nota:
                singles = [{int(x) for x in vals} for vals in _singles(consistent_count, table, facts)]
                ok = [o for o in others if not any(len(sv) > 1 and not (sv & (set(others) - {o})) for sv in singles)]
                omit = (ok or others)[int(ctx.rng.integers(len(ok or others)))]
                keep = [v for v in others if v != omit]
            typed = [(v, kinds.get(v, "off_by_%d" % min(abs(v - truth), 2))) for v in keep]
            return numeric_options(truth, typed, 0, hi, ctx.rng, nota)

        yield Candidate(task, question.format(shirt=person.shirt), str(truth), nota, facts, table, make_options,
                        spans=_span(ctx, table, ctx.views, [person.pid]))


def counted_part_visible(task: str, side: str = "r"):
    """What a counting question's record needs on a frame beyond a recognisable person: a visible
    shin or foot for a jump (``repetition_count``), the ``side`` forearm for a wave."""
    if task == "repetition_count":
        return lambda r: bool(FEET & set(r["parts"]))
    return lambda r: f"lower_arm_{side}" in r["parts"]


def propose_repetition(ctx: TaskContext):
    yield from _count_candidates(ctx, "repetition_count", "jump", counted_part_visible("repetition_count"),
                                 QUESTIONS["repetition_count"], None)


def propose_limb_repetition(ctx: TaskContext):
    for side in ("r", "l") if ctx.rng.random() < 0.5 else ("l", "r"):
        other = "wave_" + ("l" if side == "r" else "r")
        q = QUESTIONS["limb_repetition_count"].replace("{side}", SIDE_TEXT[side])
        yield from _count_candidates(ctx, "limb_repetition_count", f"wave_{side}",
                                     counted_part_visible("limb_repetition_count", side), q, other)


# --- trajectory -----------------------------------------------------------------------------

def consistent_trajectory(table: dict, facts: dict, views: list[str]) -> set[str]:
    return vt.values(facts["grammar"], vt.label_mask(table, facts, views))


AT_RADIUS = 0.5       # feet within this of an object's footprint: "at" that object (3-D truth) ...
CLEAR_RADIUS = 1.0    # ... and farther than this from every other one; "in transit": farther from all


def place_label(xy, objects) -> str | None:
    """The landmark a person standing at ``xy`` is at, ``transit``, or None (in between).

    ``objects``: (name, (x, y), footprint radius). At X: the feet are within ``AT_RADIUS`` of
    X's footprint and more than ``CLEAR_RADIUS`` from every other object's; in transit: more
    than ``CLEAR_RADIUS`` from all of them; anything else is too close to call.
    """
    dist = {n: math.dist(xy, oxy) - r for n, oxy, r in objects}
    near = [n for n, d in dist.items() if d <= AT_RADIUS]
    if len(near) == 1 and all(d > CLEAR_RADIUS for n, d in dist.items() if n != near[0]):
        return near[0]
    if all(d > CLEAR_RADIUS for d in dist.values()):
        return "transit"
    return None


def _place_obs(ctx: TaskContext, v: str, f: int, pid: int, truth: str, xy) -> str | None:
    """The landmark (or ``transit``) a view shows. A calibrated camera that sees a person's
    feet on the floor knows where they stand, so a view tells "at X" when it recognises the
    person, sees their feet and sees X, and ``place_label`` of the true feet position is X;
    it tells "in transit" when it sees the feet and ``place_label`` says transit. The label
    must agree with the script (frames where it does not are nobody's evidence)."""
    rec = _rec(ctx, v, f, pid)
    if rec is None or not FEET & set(rec["parts"]):
        return None
    props = [o for o in ctx.scene.objects if o.kind != "panel"]
    label = place_label(xy, [(o.name, o.xy, o.radius) for o in props])
    if label is None or label != truth:
        return None
    if label != "transit" and not ctx.obs[v][f]["objects"][next(o.oid for o in props if o.name == label)]["visible"]:
        return None
    return label


def propose_trajectory(ctx: TaskContext):
    T, rng = _frames(ctx), ctx.rng
    names = [o.name for o in ctx.scene.objects if o.kind != "panel"]
    grammar = {"kind": "path", "T": T, "vocab": names, "min_len": 2}
    for person, script in _persons(ctx, "place"):
        start, end = script.info["start"], script.info["end"]
        labels = script.channels["place"]
        table = {v: {"obs": [_place_obs(ctx, v, f, person.pid, labels[f], script.xy[f]) for f in range(T)]}
                 for v in ctx.views}
        nota = ctx.want_nota()
        truth = vt.path_text(start, end)
        domain = vt.grammar_answers(grammar)
        facts = {"person": person.pid, "grammar": grammar, "domain": domain}
        opts = grid_option_sets(start, end, [n for n in names if n not in (start, end)],
                                _singles(consistent_trajectory, table, facts), rng, nota, OPTION_SETS)
        if not opts:
            continue
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


_BODY_LABEL = {t: k for k, t in vt.BODY_TEXT.items()}


def _performable(text: str, n: int) -> bool:
    """Whether ``text`` is an n-action sequence a performer could do (``motion._segments``)."""
    labels = [_BODY_LABEL.get(x) for x in text.split(", then ")]
    if len(labels) != n or None in labels or len(set(labels)) != n:
        return False
    return all(all(labels[j] == "walk" for j in (i - 1, i + 1) if 0 <= j < n) for i, x in enumerate(labels) if x == "sit")


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

        facts = {"person": person.pid, "grammar": grammar, "domain": domain}

        def make_options(gt, table=table, seq=seq, truth=truth, wrong=wrong, nota=nota, domain=domain, facts=facts):
            partial = max((_compress(table[v]["obs"]) for v in gt), key=len)
            typed = [(vt.sequence_text(seq[::-1]), "reversed_order")]
            if len(partial) == len(seq) and partial != seq:
                typed.append((vt.sequence_text(partial), "single_view_sequence"))
            if wrong != seq and len(set(wrong)) == len(wrong):
                typed.append((vt.sequence_text(wrong), "wrong_action"))
            # options name only sequences a performer can do (2-3 distinct actions, sitting
            # next to walking; others would never be right), ties going to the answer's length.
            # Single views mostly leave open *longer* sequences (actions they did not see), so
            # 2-action options were right 32 % of the time and 3-action ones 20 %: selection
            # (``balance.OPTION_KEYS``) keeps each length right 1 / 4 of the times it is listed
            n = len(seq)
            plausible = [d for d in domain if any(_performable(d, m) for m in motion.SEGMENTS)]
            shuffled = [plausible[i] for i in ctx.rng.permutation(len(plausible))]
            pool = sorted(shuffled, key=lambda d: abs(d.count(", then ") + 1 - n))
            typed = [(v, k) for v, k in typed if _performable(v, n)]
            if not nota:
                sets = twin_option_sets(truth, [d for d in pool if d != truth], _singles(consistent_motion, table, facts),
                                        {v: k for v, k in reversed(typed)}, ctx.rng, "other_sequence", OPTION_SETS)
                return sets or None
            return cover_options(truth, typed, pool, _singles(consistent_motion, table, facts), ctx.rng, nota,
                                 "other_sequence", keep_order=True)

        yield Candidate("motion_recognition", QUESTIONS["motion_recognition"].format(shirt=person.shirt), truth, nota,
                        facts, table, make_options, value_key=f"{len(seq)} actions",
                        spans=_span(ctx, table, ctx.views, [person.pid]))


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
        facts = {"person": person.pid, "grammar": grammar, "domain": vt.grammar_answers(grammar)}
        opts = cover_options(truth, [(vt.HAND_TEXT[second], "reversed_order")], list(vt.HAND_TEXT.values()),
                             _singles(consistent_hand_order, table, facts), rng, nota, "not_performed")
        if opts is None:
            continue
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
        facts = {"person": person.pid, "grammar": grammar, "domain": names,
                 "confirm_angle": ctx.cfg.observe.confirm_angle}
        opts = cover_options(target.name, [(near[0], "nearest_object")] if near else [], near,
                             _singles(consistent_touch, table, facts), rng, nota, "other_object")
        if opts is None:
            continue
        q = QUESTIONS["limb_contact_over_time"].format(shirt=person.shirt, side=SIDE_TEXT[side])
        # no answer flattening by kind: ``balance.OPTION_KEYS`` keeps each kind right as often
        # as it is listed divided by 4 instead (flat answers over unevenly listed kinds made
        # listed boxes right 37 % of the time and chairs 18 %)
        yield Candidate("limb_contact_over_time", q, target.name, nota, facts, table, lambda gt, o=opts: o,
                        spans=_span(ctx, table, ctx.views, [person.pid, target.oid]))
