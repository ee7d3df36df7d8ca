"""Single-view-sufficient (SVS) tasks: exactly one (golden) view determines the answer.

The other views are occluded or uninformative. For a set of views the possible values are the
intersection of what each view allows (every view constrains the answer independently).
"""
from __future__ import annotations

import math

from bench.synth.options import categorical_options, numeric_options
from bench.synth.primitives import COLOURS
from bench.synth.tasks_common import Candidate, TaskContext, count_domain, seen_persons

QUESTIONS = {
    "attribute": "What colour is the shirt of the person touching the {obj}?",
    "relation": "Which object is nearest to the person marked 1?",
    "count_in_view": "How many people can be seen in the image with the frame labelled 1?",
}
FRAME_ENTITY = 0  # a mark on entity 0 frames the whole image


def _intersect(single, table, facts, views) -> set[str]:
    out = set(facts["domain"])
    for v in views:
        out &= single(table[v], facts)
    return out


# --- attribute ----------------------------------------------------------------------------

def _attribute_single(rec: dict, facts: dict) -> set[str]:
    """Shirts of the people that this view cannot rule out as the one touching the object."""
    if not rec["object_visible"]:
        return set(facts["domain"])
    cands = [c for c in rec["people"].values() if c["status"] != "separated"]
    if not cands or any(c["shirt"] is None for c in cands):
        return set(facts["domain"])
    return {c["shirt"] for c in cands}


def consistent_attribute(table: dict, facts: dict, views: list[str]) -> set[str]:
    return _intersect(_attribute_single, table, facts, views)


def propose_attribute(ctx: TaskContext):
    scene, rng = ctx.scene, ctx.rng
    for i in rng.permutation(len(scene.objects)):
        obj = scene.objects[i]
        touchers = [p for p in scene.persons if scene.touching(p.pid) == obj.oid]
        if len(touchers) != 1:
            continue
        me = touchers[0]
        table = {}
        for v in ctx.views:
            o = ctx.obs[v]
            table[v] = {"object_visible": bool(o["objects"][obj.oid]["visible"]),
                        "people": {str(p.pid): {"status": o["pairs"][(p.pid, obj.oid)]["any"],
                                                "shirt": o["persons"][p.pid]["attrs"].get("shirt")}
                                   for p in scene.persons if o["persons"][p.pid]["px"] > 0}}
        nota = ctx.want_nota()
        others = sorted((p for p in scene.persons if p.pid != me.pid), key=lambda p: math.dist(p.xy, obj.xy))
        typed = [(me.trousers, "trouser_colour"), (obj.colour, "object_colour")]
        typed += [(others[0].shirt, "nearest_person_shirt")] if others else []
        typed += [(p.shirt, "other_person_shirt") for p in others[1:]]
        typed = [typed[k] for k in rng.permutation(len(typed))]
        opts = categorical_options(me.shirt, typed, list(COLOURS), rng, nota, "other_colour")
        if opts is None:
            continue
        yield Candidate("attribute", QUESTIONS["attribute"].format(obj=obj.name), me.shirt, nota,
                        {"object": obj.oid, "person": me.pid, "domain": list(COLOURS)}, table,
                        lambda gt, o=opts: o, evidence={v: [me.pid, obj.oid] for v in ctx.views})


# --- relation -----------------------------------------------------------------------------

def _relation_single(rec: dict, facts: dict) -> set[str]:
    """From a view that recognises the person: the nearest visible object, plus any object the
    view does not show (it could be nearer); clearly farther visible objects are ruled out.
    ``rec["ident"]`` is True only in the mark view (other views cannot see the mark)."""
    if not rec["ident"]:
        return set(facts["domain"])
    dist = facts["distances"]
    visible = [o for o in facts["domain"] if rec["objects"].get(o)]
    if not visible:
        return set(facts["domain"])
    best = min(dist[o] for o in visible)
    near = {o for o in visible if dist[o] - best < facts["margin"]}
    return near | {o for o in facts["domain"] if not rec["objects"].get(o)}


def consistent_relation(table: dict, facts: dict, views: list[str]) -> set[str]:
    return _intersect(_relation_single, table, facts, views)


def propose_relation(ctx: TaskContext):
    scene, rng = ctx.scene, ctx.rng
    if len(scene.objects) < 4:
        return
    for i in rng.permutation(len(scene.persons)):
        person = scene.persons[i]
        dist = {o.name: round(max(math.dist(o.xy, person.xy) - o.radius, 0.0), 3) for o in scene.objects}
        order = sorted(dist, key=dist.get)
        for g in [v for v in ctx.views if ctx.obs[v]["persons"][person.pid]["seen"]][:ctx.first(3)]:
            nota = ctx.want_nota()
            if len(order) < 4 + int(nota):
                return
            table = {v: {"ident": v == g,
                         "objects": {o.name: bool(ctx.obs[v]["objects"][o.oid]["visible"]) for o in scene.objects}}
                     for v in ctx.views}
            box = ctx.obs[g]["persons"][person.pid]["box"]
            pc = ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)
            in_image = [o for o in scene.objects if ctx.obs[g]["objects"][o.oid]["box"] is not None]
            typed = [(order[1], "second_nearest_object")]
            if in_image:
                img_near = min(in_image, key=lambda o: math.dist(pc, _centre(ctx.obs[g]["objects"][o.oid]["box"])))
                typed.append((img_near.name, "nearest_in_image"))
            typed.append((order[-1], "farthest_object"))
            opts = categorical_options(order[0], typed, order, rng, nota, "other_object")
            if opts is None:
                continue
            facts = {"person": person.pid, "distances": dist, "margin": 0.5, "domain": order}
            by_name = {o.name: o.oid for o in scene.objects}
            yield Candidate("relation", QUESTIONS["relation"], order[0], nota, facts, table, lambda gt, o=opts: o,
                            marks=[(g, person.pid, "1")], golden=g,
                            evidence={g: [person.pid] + [by_name[n] for n in opts[0] if n in by_name]})


def _centre(box):
    return ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)


# --- counting in one view -----------------------------------------------------------------

def _count_single(rec: dict, facts: dict) -> set[str]:
    if not rec["framed"]:
        return set(facts["domain"])
    return {str(k) for k in range(rec["seen"], rec["seen"] + rec["borderline"] + 1)}


def consistent_count_in_view(table: dict, facts: dict, views: list[str]) -> set[str]:
    return _intersect(_count_single, table, facts, views)


def propose_count_in_view(ctx: TaskContext):
    scene, rng = ctx.scene, ctx.rng
    for i in rng.permutation(len(ctx.views)):
        g = ctx.views[i]
        counts = {v: len(seen_persons(ctx.obs[v])) for v in ctx.views}
        border = sum(rec["borderline"] for rec in ctx.obs[g]["persons"].values())
        if border or counts[g] == 0:
            continue
        table = {v: {"framed": v == g, "seen": counts[v],
                     "borderline": sum(r["borderline"] for r in ctx.obs[v]["persons"].values())} for v in ctx.views}
        nota = ctx.want_nota()
        typed = [(len(scene.persons), "scene_count")] + [(counts[v], "other_view_count") for v in ctx.views if v != g]
        # people per image are mostly 2-6: that is the answer support (balancing flattens it)
        opts = numeric_options(counts[g], typed, 2, 6 + int(ctx.nota_mode), rng, nota)
        if opts is None:
            continue
        yield Candidate("count_in_view", QUESTIONS["count_in_view"], str(counts[g]), nota,
                        {"domain": count_domain(ctx.cfg)}, table, lambda gt, o=opts: o,
                        marks=[(g, FRAME_ENTITY, "1")], golden=g, evidence={g: seen_persons(ctx.obs[g])})
