"""From a proposed ``Candidate`` to a verified question record (still without letters).

MVN: V_GT is the first smallest set of views (>= 2) that determines the answer with the
listed options, and no single view may determine it. SVS: exactly one view, the golden
view, determines it. ``extra_views`` mixes informative and uninformative views.
"""
from __future__ import annotations


from bench.constants import NOTA
from bench.entities import MARK_FACT_KEYS
from bench.synth.captions import person_facts
from bench.synth.tasks import TaskDef
from bench.synth.tasks_common import Candidate, TaskContext
from bench.synth.verify import (check_question, determined, informative_views, minimal_resolving_set,
                                oracle_answer)
from bench.synth.wording import phrase


def _extra_views(task: TaskDef, cand: Candidate, rest: list[str], listed, nota, k: int, rng) -> list[str]:
    info = informative_views(task.consistent, cand.table, cand.facts, rest, listed, nota)
    a = [rest[i] for i in rng.permutation(len(rest)) if rest[i] in info]
    b = [rest[i] for i in rng.permutation(len(rest)) if rest[i] not in info]
    first, second = (a, b) if rng.random() < 0.5 else (b, a)
    out = []
    while len(out) < k and (first or second):
        for src in (first, second):
            if src and len(out) < k:
                out.append(src.pop(0))
    return out


def person_boxes(ctx: TaskContext, pid: int) -> dict[str, list]:
    """Per view of a temporal scene, the asked person's box of visible pixels on every frame
    ([x0, y0, x1, y1] in render pixels; None where no pixel of them shows): where the person
    is, for the track's locator (inputs/track.py, ``track_boxes``)."""
    out = {}
    for v, frames in ctx.obs.items():
        boxes = []
        for frame in frames:
            rec = frame["persons"].get(pid)
            boxes.append(None if rec is None else rec["box"])  # observe_view: None where no pixel shows
        out[v] = boxes
    return out


def mark_facts(ctx: TaskContext, marks: list[dict]) -> list[dict | None]:
    """Per mark of a static scene, what its view shows of the marked person: the class ids of
    ``captions.person_facts`` (MARK_FACT_KEYS; -1 where the view does not show it), or None for
    a mark on an object or the whole image. Training-only supervision (``loss.mark_facts``):
    each fact is read from the mark's own view, nothing links views."""
    by_view: dict[str, dict[int, dict]] = {}
    out = []
    for mark in marks:
        view = mark["view_id"]
        if view not in by_view:
            by_view[view] = {f["pid"]: f for f in person_facts(ctx.scene, ctx.obs[view])}
        facts = by_view[view].get(mark["entity"])
        out.append(None if facts is None else {k: int(facts[k]) for k in MARK_FACT_KEYS})
    return out


def verify_candidate(task: TaskDef, cand: Candidate, ctx: TaskContext) -> dict | None:
    """Verify one candidate; return the question record or None if it fails."""
    rng, views = ctx.rng, ctx.views
    order = [views[i] for i in rng.permutation(len(views))]
    domain = list(cand.facts["domain"])
    if task.subset == "MVN":
        # value level first (every domain value listed): which views pin the truth at all
        gt0 = minimal_resolving_set(task.consistent, cand.table, cand.facts, views, domain, False, cand.truth, order)
        if gt0 is None or len(gt0) < 2:
            return None
    else:
        single = [v for v in views if determined(task.consistent, cand.table, cand.facts, [v], domain, False) is not None]
        if len(single) != 1 or (cand.golden is not None and single != [cand.golden]):
            return None
        gt0 = single
    opts = cand.make_options(gt0)
    if not opts:
        return None
    recs = [r for r in (_verify_options(task, cand, ctx, order, gt0, listed, types)
                        for listed, types in (opts if isinstance(opts, list) else [opts])) if r is not None]
    if not recs:
        return None
    if len(recs) > 1:  # further option sets of the same question: selection keeps at most one
        recs[0]["alternatives"] = recs[1:]
    return recs[0]


def _verify_options(task: TaskDef, cand: Candidate, ctx: TaskContext, order: list[str], gt0: list[str],
                    listed: list[str], types: dict[str, str]) -> dict | None:
    """The question record of ``cand`` with one option set, or None if it fails."""
    rng, views, nota = ctx.rng, ctx.views, ctx.nota_mode
    answer = NOTA if cand.nota_answer else cand.truth
    if task.subset == "MVN":
        gt = minimal_resolving_set(task.consistent, cand.table, cand.facts, views, listed, nota, answer, order)
        if gt is None or len(gt) < 2:
            return None
    else:
        gt = gt0
    check = check_question(task.subset, task.consistent, cand.table, cand.facts, views, listed, nota, answer, gt)
    if not (check["svi"] and check["cvr"] and check["minimal"]):
        return None
    k = ctx.cfg.tasks.mvn_extra_views if task.subset == "MVN" else ctx.cfg.tasks.svs_extra_views
    rest = [v for v in views if v not in gt]
    if len(rest) < k:
        return None
    extra = _extra_views(task, cand, rest, listed, nota, k, rng)
    key = f"{ctx.scene.sid}|{cand.question}|{cand.facts.get('person', '')}|{cand.facts.get('mark_view', '')}"
    oracle = oracle_answer(task.consistent, cand.table, cand.facts, gt + extra, listed, nota, key)
    marks = []
    for view_id, ent, label in cand.marks:
        if ent == 0:
            cam = ctx.cams[view_id]
            box = [0, 0, cam.width, cam.height]
        else:
            rec = ctx.obs[view_id]["persons"].get(ent) or ctx.obs[view_id]["objects"].get(ent)
            if rec is None or rec["box"] is None:
                return None
            box = rec["box"]
        marks.append({"view_id": view_id, "t": 0.0, "entity": int(ent), "label": label, "box": list(box)})
    if cand.spans is not None:  # temporal: the frames on which each resolving view saw the action
        evidence = [{"view_id": v, "t_start": cand.spans[v][0], "t_end": cand.spans[v][1],
                     "entities": [int(e) for e in cand.spans[v][2]]} for v in gt if v in cand.spans]
    else:
        evidence = [{"view_id": v, "t_start": 0.0, "t_end": 0.0,
                     "entities": [int(e) for e in cand.evidence.get(v, [])]} for v in gt]
    meta = {"facts": cand.facts, "observations": cand.table,
            "verification": {"svi": check["svi"], "cvr": check["cvr"], "minimal": check["minimal"],
                             "single_view": check["single_view"], "oracle_answer": oracle,
                             "informative_extra": [v for v in extra if v in informative_views(
                                 task.consistent, cand.table, cand.facts, [v], listed, nota)]}}
    if cand.spans is not None and "person" in cand.facts:
        meta["person_boxes"] = person_boxes(ctx, int(cand.facts["person"]))
    if marks and cand.spans is None:
        meta["mark_facts"] = mark_facts(ctx, marks)
    return {
        "task": task.name, "subset": task.subset, "axis": task.axis, "granularity": task.granularity,
        "scene": ctx.scene.sid,
        "question": phrase(task.name, cand.question, ctx.cfg.question_template),  # the oracle's key keeps the primary
        "listed": listed, "value_key": cand.value_key, "types": types, "answer_value": answer,
        "gt_views": gt, "extra_views": extra, "marks": marks, "evidence": evidence,
        "oracle_correct": oracle == answer, "oracle_key": key,
        "meta": meta,
    }


MAX_TRIES = 40  # proposals verified per task and sampled scene


def scene_questions(ctx: TaskContext, tasks: list[TaskDef], per_scene: int) -> list[dict]:
    """Verified question records of one scene: up to ``per_scene`` per task from its first
    ``MAX_TRIES`` proposals, or, when ``ctx.dense``, every distinct one its proposals verify."""
    out = []
    per_scene, max_tries = (None, None) if ctx.dense else (per_scene, MAX_TRIES)
    for task in tasks:
        kept = tries = 0
        seen_q = set()
        for cand in task.propose(ctx):
            tries += 1
            if max_tries is not None and (tries > max_tries or kept >= per_scene):
                break
            rec = verify_candidate(task, cand, ctx)
            if rec is None:
                continue
            # the same question, options and marked entities is one question; in a dense scene marks
            # drawn in other images make another one (which image is framed, where a person is marked)
            marks = tuple((m["view_id"], m["entity"]) if ctx.dense else m["entity"] for m in rec["marks"])
            sig = (rec["question"], tuple(sorted(rec["listed"])), marks)
            if sig in seen_q:
                continue
            seen_q.add(sig)
            out.append(rec)
            kept += 1
    return out
