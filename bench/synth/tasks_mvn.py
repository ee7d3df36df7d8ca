"""Multi-view-necessary (MVN) tasks: no single view determines the answer, V_GT does.

Each task is a ``propose_*`` generator of ``Candidate`` questions for one scene and a
``consistent_*`` function (table, facts, views) -> values still possible from those views.
Questions never name a view: people are referred to by mark labels, objects by colour and kind.
"""
from __future__ import annotations

import math

from bench.entities import ARM_TEXT, EFFECTOR_TEXT, EFFECTORS
from bench.synth.body import ARM_STATES
from bench.synth.options import categorical_options, numeric_options
from bench.synth.tasks_common import (MAX_COUNT, Candidate, TaskContext, compatible, contact_values, count_domain,
                                      direction_to_camera, identifiable, identifying_views, seen_persons)

QUESTIONS = {
    "dedup_count": "How many different people are in the scene?",
    "identity_match": "The person marked 1 also appears, with a different mark, in another image. "
                      "Which mark does that person have there?",
    "person_object_contact": "Which object is the person marked 1 touching?",
    "limb_contact": "Which body part of the person marked 1 is touching the {obj}?",
    "limb_occlusion": "What is the person marked 1 doing with their {side} arm?",
    "action_count": "How many people in the scene have at least one hand raised?",
}
SIDE_TEXT = {"l": "left", "r": "right"}
COUNTS = [str(k) for k in range(MAX_COUNT + 1)]  # the count domain of scenes of up to 12 people


# --- counting -----------------------------------------------------------------------------

def consistent_dedup(table: dict, facts: dict, views: list[str]) -> set[str]:
    """Seeing every person settles the count; otherwise any count >= the people seen."""
    seen = set().union(*(table[v]["seen"] for v in views)) if views else set()
    if len(seen) == facts["n_persons"]:
        return {str(facts["n_persons"])}
    return {str(k) for k in range(len(seen), int(facts["domain"][-1]) + 1)}


def propose_dedup(ctx: TaskContext):
    n = len(ctx.scene.persons)
    table = {v: {"seen": sorted(str(p) for p in seen_persons(ctx.obs[v]))} for v in ctx.views}
    nota = ctx.want_nota()

    def make_options(gt):
        svc = max(len(table[v]["seen"]) for v in gt)
        naive = sum(len(table[v]["seen"]) for v in gt)
        hi = ctx.cfg.scene.max_persons
        lo = hi - 3 - int(ctx.nota_mode)  # the support where verified head counts are common
        return numeric_options(n, [(svc, "single_view_count"), (naive, "naive_sum")], lo, hi, ctx.rng, nota)

    yield Candidate("dedup_count", QUESTIONS["dedup_count"], str(n), nota, {"n_persons": n, "domain": count_domain(ctx.cfg)}, table, make_options,
                    evidence={v: [int(p) for p in table[v]["seen"]] for v in ctx.views})


def _arm_evidence(person, rec) -> list:
    """Per arm (left, right): 1 raised, 0 not raised, None not visible in this view."""
    return [(1 if person.pose.arms[s] == "raised" else 0) if rec["arms"][s] else None for s in ("l", "r")]


def consistent_action(table: dict, facts: dict, views: list[str]) -> set[str]:
    """A person raises a hand if any view shows a raised arm; does not if every arm has been
    seen down somewhere; otherwise unknown. Arms may be seen in different views."""
    raised = unknown = 0
    for pid in facts["persons"]:
        arms = [[table[v]["arms"][pid][k] for v in views if pid in table[v]["arms"]] for k in (0, 1)]
        if any(1 in a for a in arms):
            raised += 1
        elif not all(0 in a for a in arms):
            unknown += 1
    return {str(k) for k in range(raised, raised + unknown + 1)}


def propose_action(ctx: TaskContext):
    persons = ctx.scene.persons
    table = {v: {"arms": {str(p.pid): _arm_evidence(p, ctx.obs[v]["persons"][p.pid])
                            for p in persons if ctx.obs[v]["persons"][p.pid]["seen"]}} for v in ctx.views}
    truth = sum(p.raises_hand() for p in persons)
    nota = ctx.want_nota()

    def make_options(gt):
        per_view = [sum(1 in a for a in table[v]["arms"].values()) for v in gt]
        typed = [(max(per_view), "single_view_count"), (sum(per_view), "naive_sum"), (len(persons), "all_people")]
        # few scenes have more than three people raising a hand: the support is 0-3 (0-4 with NOTA)
        return numeric_options(truth, typed, 0, 3 + int(ctx.nota_mode), ctx.rng, nota)

    yield Candidate("action_count", QUESTIONS["action_count"], str(truth), nota,
                    {"persons": [str(p.pid) for p in persons], "domain": count_domain(ctx.cfg)}, table, make_options,
                    evidence={v: [int(p) for p, a in table[v]["arms"].items() if 1 in a] for v in ctx.views})


# --- identity -----------------------------------------------------------------------------

def consistent_identity(table: dict, facts: dict, views: list[str]) -> set[str]:
    """With both images, the candidates whose visible appearance matches the marked person."""
    a, b = facts["mark_view"], facts["cand_view"]
    if a not in views or b not in views:
        return set(facts["domain"])
    ref = table[a]["marked"]
    left = {(k if k in facts["labels"] else "other") for k, attrs in table[b]["persons"].items() if compatible(ref, attrs)}
    return left or set(facts["domain"])


def propose_identity(ctx: TaskContext):
    scene, rng = ctx.scene, ctx.rng
    combos = [(a, p, b) for a in ctx.views for p in seen_persons(ctx.obs[a]) for b in ctx.views if b != a]
    for i in rng.permutation(len(combos)):
        a, pid, b = combos[i]
        ref = ctx.obs[a]["persons"][pid]["attrs"]
        in_b = [q for q in seen_persons(ctx.obs[b]) if "shirt" in ctx.obs[b]["persons"][q]["attrs"]]
        if "shirt" not in ref or pid not in in_b:
            continue
        same = [q for q in in_b if q != pid and scene.person(q).shirt == scene.person(pid).shirt]
        if not same:
            continue
        nota = ctx.want_nota()
        me = scene.person(pid)
        others = sorted((q for q in in_b if q not in (pid, same[0])),
                        key=lambda q: math.dist(scene.person(q).xy, me.xy))
        cands = ([] if nota else [pid]) + [same[0]] + others
        if len(cands) < 4:
            continue
        cands = cands[:4]
        labels = [str(k) for k in rng.permutation(4) + 2]
        label_of = dict(zip(cands, labels))
        kinds = {same[0]: "same_shirt_person"}
        if others and others[0] in label_of:
            kinds[others[0]] = "nearest_person"
        table = {v: {} for v in ctx.views}
        table[a] = {"marked": ctx.obs[a]["persons"][pid]["attrs"]}
        table[b] = {"persons": {label_of.get(q, f"u{q}"): ctx.obs[b]["persons"][q]["attrs"] for q in in_b}}
        truth = label_of.get(pid, "other")
        facts = {"mark_view": a, "cand_view": b, "labels": labels, "domain": labels + ["other"], "person": pid}
        listed = [label_of[q] for q in cands]
        types = {label_of[q]: kinds.get(q, "other_person") for q in cands if q != pid}
        marks = [(a, pid, "1")] + [(b, q, label_of[q]) for q in cands]
        yield Candidate("identity_match", QUESTIONS["identity_match"], truth, nota, facts, table,
                        lambda gt, o=(listed, types): o, marks=marks, evidence={a: [pid], b: [pid] if not nota else cands})


# --- contact ------------------------------------------------------------------------------

def consistent_object_contact(table: dict, facts: dict, views: list[str]) -> set[str]:
    return contact_values(table, facts, views, "pairs")


def consistent_limb_contact(table: dict, facts: dict, views: list[str]) -> set[str]:
    return contact_values(table, facts, views, "parts")


def _mark_views(ctx: TaskContext, pid: int) -> list[str]:
    views = [v for v in ctx.views if ctx.obs[v]["persons"][pid]["seen"]]
    return [views[i] for i in ctx.rng.permutation(len(views))]


def propose_object_contact(ctx: TaskContext):
    scene, rng = ctx.scene, ctx.rng
    names = [o.name for o in scene.objects]
    for i in rng.permutation(len(scene.persons)):
        person = scene.persons[i]
        oid = scene.touching(person.pid)
        if oid is None:
            continue
        target = scene.obj(oid)
        for a in _mark_views(ctx, person.pid)[:ctx.first(2)]:
            nota = ctx.want_nota()
            if len(names) < 4 + int(nota):
                return
            table = {v: {"ident": identifiable(ctx, person.pid, a, v),
                         "dir": direction_to_camera(ctx.cams[v], target.centre()),
                         "pairs": {o.name: ctx.obs[v]["pairs"][(person.pid, o.oid)]["any"] for o in scene.objects}}
                     for v in ctx.views}
            by_dist = sorted((o for o in scene.objects if o.oid != oid),
                             key=lambda o: math.dist(o.xy, person.xy) - o.radius)
            typed = [(by_dist[0].name, "nearest_object")]
            opts = categorical_options(target.name, typed, [o.name for o in by_dist[1:]], rng, nota, "other_object")
            if opts is None:
                continue
            facts = {"mark_view": a, "person": person.pid, "domain": names,
                     "confirm_angle": ctx.cfg.observe.confirm_angle}
            yield Candidate("person_object_contact", QUESTIONS["person_object_contact"], target.name, nota, facts,
                            table, lambda gt, o=opts: o, marks=[(a, person.pid, "1")],
                            evidence={v: [person.pid, oid] for v in ctx.views if table[v]["ident"]})


def propose_limb_contact(ctx: TaskContext):
    scene, rng = ctx.scene, ctx.rng
    domain = [EFFECTOR_TEXT[e] for e in EFFECTORS]
    for i in rng.permutation(len(scene.persons)):
        person = scene.persons[i]
        contact = scene.contacts.get(person.pid)
        if not contact or contact["kind"] != "touch":
            continue
        target = scene.obj(contact["object"])
        if target.kind not in ("ball", "box"):
            continue  # poles and chairs are only touched by hands: the object name would give it away
        truth = EFFECTOR_TEXT[contact["effector"]]
        for a in _mark_views(ctx, person.pid)[:ctx.first(2)]:
            nota = ctx.want_nota()
            table = {v: {"ident": identifiable(ctx, person.pid, a, v),
                         "dir": direction_to_camera(ctx.cams[v], target.centre()),
                         "parts": {EFFECTOR_TEXT[e]: ctx.obs[v]["pairs"][(person.pid, target.oid)][e] for e in EFFECTORS}}
                     for v in ctx.views}
            side, limb = contact["effector"][-1], contact["effector"][:-2]
            mirror = EFFECTOR_TEXT[f"{limb}_{'r' if side == 'l' else 'l'}"]
            other_limb = "foot" if limb == "hand" else "hand"
            rest = [(EFFECTOR_TEXT[f"{other_limb}_{s}"], "other_limb") for s in ("l", "r")] + [("head", "head")]
            # 4-option mode lists exactly the four hands and feet, so every listed part is a possible answer
            rest = [rest[k] for k in rng.permutation(2)] + ([rest[2]] if nota else [])
            opts = categorical_options(truth, [(mirror, f"other_{limb}")] + rest, [], rng, nota)
            if opts is None:
                continue
            facts = {"mark_view": a, "person": person.pid, "domain": domain,
                     "confirm_angle": ctx.cfg.observe.confirm_angle}
            yield Candidate("limb_contact", QUESTIONS["limb_contact"].format(obj=target.name), truth, nota, facts,
                            table, lambda gt, o=opts: o, marks=[(a, person.pid, "1")],
                            value_key=f"{target.kind}|{truth}",
                            evidence={v: [person.pid, target.oid] for v in ctx.views if table[v]["ident"]})


# --- occluded limbs -----------------------------------------------------------------------

def consistent_limb_occlusion(table: dict, facts: dict, views: list[str]) -> set[str]:
    """The arm's posture is known once a view both recognises the person and shows the arm."""
    if any(table[v]["arm"] for v in identifying_views(table, facts, views)):
        return {facts["truth"]}
    return set(facts["domain"])


def propose_limb_occlusion(ctx: TaskContext):
    scene, rng = ctx.scene, ctx.rng
    combos = [(a, p, s) for a in ctx.views for p in seen_persons(ctx.obs[a]) for s in ("l", "r")
              if not ctx.obs[a]["persons"][p]["arms"][s]]
    for i in rng.permutation(len(combos)):
        a, pid, side = combos[i]
        person = scene.person(pid)
        truth = ARM_TEXT[person.pose.arms[side]]
        nota = ctx.want_nota()
        table = {v: {"ident": identifiable(ctx, pid, a, v), "arm": bool(ctx.obs[v]["persons"][pid]["arms"][side])}
                 for v in ctx.views}
        other = ARM_TEXT[person.pose.arms["r" if side == "l" else "l"]]
        opts = categorical_options(truth, [(other, "other_arm")], [ARM_TEXT[s] for s in ARM_STATES], rng, nota,
                                   "other_posture")
        if opts is None:
            continue
        facts = {"mark_view": a, "person": pid, "truth": truth, "domain": [ARM_TEXT[s] for s in ARM_STATES]}
        yield Candidate("limb_occlusion", QUESTIONS["limb_occlusion"].format(side=SIDE_TEXT[side]), truth, nota,
                        facts, table, lambda gt, o=opts: o, marks=[(a, pid, "1")],
                        evidence={v: [pid] for v in ctx.views if table[v]["ident"] and table[v]["arm"]})
