"""Selection and letter assignment so that text alone predicts nothing.

Per split and task, in a seeded order, a verified question is kept unless it would
- push its answer value (``value_key``) above ``value_cap`` x the count of the rarest common
  value (values with at least ``major_value_share`` of the task), flattening the answer prior,
- push "None of the above" answers above ``options.none_share`` (5-option mode), or
- (MVN) push the single-view oracle's hits above chance: a question the best single view
  happens to get right is kept only while such hits stay within 1 / n_options of the task, or
- (tasks in ``OPTION_KEYS``) make some option feature (an object kind, a number of actions,
  the start / end of a walk) right more or less often than 1 / n_options of the times it is
  listed, by more than ``_key_slack``: flat answers alone do not stop "listed boxes are
  right 37 % of the time" when some kinds are listed as distractors more often than others.
Answer letters are then dealt round-robin in a shuffled order: exactly balanced per task.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np

from bench.constants import LETTERS, NOTA
from bench.synth.blind import option_prior_keys, structure_signature
from bench.synth.options import N_LISTED, arrange


OBJECT_TASKS = ("person_object_contact", "relation")


def value_key(rec: dict) -> str:
    """What a text-only model could latch on to: the answer value, or for object answers
    ("red box") the object kind, since which kinds get touched is not uniform."""
    if rec.get("value_key"):
        return rec["value_key"]
    if rec["task"] in OBJECT_TASKS:
        return rec["answer_value"].split()[-1]
    return rec["answer_value"]


def _kind(text: str) -> str:
    return text.split()[-1]


# option features a text-only model could count (per listed option, a list of keys); only
# temporal tasks, so that the spatial selection stays as it was
OPTION_KEYS = {
    "limb_contact_over_time": lambda o, sig: ["kind:" + _kind(o)],
    "motion_recognition": lambda o, sig: [f"n:{o.count(', then ') + 1}", "sig:" + sig[o]]
    + [f"a{i}:{a}" for i, a in enumerate(o.split(", then "))],
    "trajectory": lambda o, sig: ["s:" + _kind(o.split(" to the ")[0]), "e:" + _kind(o)],
}


def _key_slack(listed: int, chance: float) -> float:
    return max(2.0, 0.1 * chance * listed)


def _keys_of(r: dict, keyf) -> tuple[Counter, Counter]:
    """Option keys of a record: over its listed options, and of its answer (none for NOTA).
    ``keyf(option, signatures)``: signatures are each option's structural form among the
    listed ones (``blind.structure_signature``), e.g. "shares its first action with one other"."""
    sig = dict(zip(r["listed"], (structure_signature(k) for k in option_prior_keys(r["listed"]))))
    listed = Counter(k for o in r["listed"] for k in keyf(o, sig))
    right = Counter(keyf(r["answer_value"], sig)) if r["answer_value"] != NOTA else Counter()
    return listed, right


def _option_keys_ok(add_l: Counter, add_r: Counter, right: Counter, listed: Counter, chance: float) -> bool:
    """Whether adding a record's keys (``_keys_of``) leaves every option key right within
    slack of chance x listed."""
    for k in set(add_l) | set(add_r):
        n_l, n_r = listed[k] + add_l[k], right[k] + add_r[k]
        dev, before = n_r - chance * n_l, right[k] - chance * listed[k]
        if abs(dev) > _key_slack(n_l, chance) and abs(dev) > abs(before):
            return False  # out of bounds, and not on the way back
    return True


def select(records: list[dict], cfg, rng: np.random.Generator, joint_caps: bool = False,
           max_task_share: float | None = None) -> list[dict]:
    """Balanced subset of ``records`` (question records from ``verify_candidate``).

    Args:
        joint_caps: choose the value cap and the oracle cap together (``_joint_pick``) instead
            of one after the other; keeps more of the same records under the same bounds
            (used for the temporal axis, where most questions that single views narrow down
            to two options are oracle hits).
        max_task_share: the task-share cap (default ``cfg.tasks.max_task_share``).
    """
    nota_mode = cfg.options.mode == "cvbench"
    chance = 1.0 / (N_LISTED + int(nota_mode))
    by_task: dict[str, list[dict]] = {}
    for rec in records:
        by_task.setdefault(rec["task"], []).append(rec)
    kept_all = []
    for task in sorted(by_task):
        recs = by_task[task]
        recs = [recs[i] for i in rng.permutation(len(recs))]
        if joint_caps:
            kept_all.append(_joint_pick(recs, cfg, task, chance))
            continue
        recs = _oracle_filter(recs, chance)  # first, so the value caps see what the oracle cap leaves
        values = Counter(value_key(r) for r in recs if r["answer_value"] != NOTA)
        total = sum(values.values())
        major = [c for c in values.values() if c >= cfg.tasks.major_value_share * total] or [total]
        kept_all.append(_pick(recs, cfg, task, chance, math.ceil(cfg.tasks.value_cap * min(major))))
    # no task may dominate: cap each at max_task_share of the split
    share = cfg.tasks.max_task_share if max_task_share is None else max_task_share
    cap_task = math.ceil(share * sum(len(k) for k in kept_all))
    return [r for kept in kept_all for r in _trim(kept, cap_task, cfg.options.none_share)]


def _pick(recs: list[dict], cfg, task: str, chance: float, cap: int, keys: dict | None = None,
          passes: int = 1) -> list[dict]:
    """Passes over ``recs`` in order, keeping a record unless it breaks a bound (module doc).

    Args:
        cap: the most records per answer value (``value_key``).
        keys: cache id(record) -> ``_keys_of`` (the joint search runs this many times); with
            it, a record's ``alternatives`` (the same question with other option sets) are
            tried in order when its option keys do not fit; without it they are ignored.
            Only option keys move on to the next set: a set is never swapped for another
            because the single-view oracle happens to guess the first one right.
        passes: the most passes; a later pass revisits the records an earlier one skipped,
            since keeping others may since have made room (an option key moved back towards
            chance, more kept questions for the oracle share). Stops when a pass keeps none.
    """
    counts, kept, n_nota, hits = Counter(), [], 0, 0
    keyf, k_right, k_listed = OPTION_KEYS.get(task), Counter(), Counter()
    todo = list(recs)
    for _ in range(passes):
        skipped = []
        for rec in todo:
            if rec["answer_value"] == NOTA:
                if n_nota + 1 > cfg.options.none_share * (len(kept) + 1):
                    skipped.append(rec)
                    continue
            elif counts[value_key(rec)] >= cap:
                continue  # final: counts only grow
            fits = None
            for r in [rec] + (rec.get("alternatives", []) if keys is not None else []):
                if r["subset"] == "MVN" and r["oracle_correct"] and hits + 1 > chance * (len(kept) + 1):
                    break
                if keyf is not None:
                    add_l, add_r = keys[id(r)] if keys is not None else _keys_of(r, keyf)
                    if not _option_keys_ok(add_l, add_r, k_right, k_listed, 1.0 / len(r["listed"])):
                        continue
                    k_listed.update(add_l)
                    k_right.update(add_r)
                fits = r
                break
            if fits is None:
                skipped.append(rec)
                continue
            kept.append(fits)
            counts[value_key(fits)] += 1
            n_nota += fits["answer_value"] == NOTA
            hits += fits["oracle_correct"]
        if len(skipped) == len(todo) or not skipped:
            break
        todo = skipped
    return kept


PASSES = 8  # joint selection: passes over the skipped records (module doc)


def _joint_pick(recs: list[dict], cfg, task: str, chance: float) -> list[dict]:
    """``_pick`` with the largest value cap that every common value still reaches.

    Filtering oracle hits first (the plain path) and then capping every value at the rarest
    one wastes questions: values whose questions are often oracle hits become the rarest and
    set a low cap for all, while the hits dropped from common values were the surplus anyway.
    Here the single-view oracle's misses are visited before its hits (each group in the seeded
    order), so the oracle cap falls on the surplus first, and the cap c is the largest for
    which every common value (``major_value_share`` of the task's records) keeps c questions:
    answers stay exactly as flat, oracle hits within chance.
    """
    recs = [r for r in recs if not r["oracle_correct"]] + [r for r in recs if r["oracle_correct"]]
    values = Counter(value_key(r) for r in recs if r["answer_value"] != NOTA)
    total = sum(values.values())
    major = [v for v, c in values.items() if c >= cfg.tasks.major_value_share * total]
    keyf = OPTION_KEYS.get(task)
    keys = {id(r): _keys_of(r, keyf) for rec in recs for r in [rec] + rec.get("alternatives", [])} \
        if keyf is not None else {}
    if not major:  # no value is common (e.g. walks between named objects): no value cap
        return _pick(recs, cfg, task, chance, total, keys, PASSES)
    kept = []
    for cap in range(math.ceil(cfg.tasks.value_cap * min(values[v] for v in major)), 0, -1):
        kept = _pick(recs, cfg, task, chance, cap, keys, PASSES)
        got = Counter(value_key(r) for r in kept)
        if all(got[v] >= cap for v in major):
            break
    return kept


def _oracle_filter(recs: list[dict], chance: float) -> list[dict]:
    """Drop MVN questions the single-view oracle gets right beyond a chance share (prefix-wise)."""
    out, hits = [], 0
    for r in recs:
        if r["subset"] == "MVN" and r["oracle_correct"] and hits + 1 > chance * (len(out) + 1):
            continue
        out.append(r)
        hits += r["oracle_correct"]
    return out


def _trim(kept: list[dict], cap: int, none_share: float) -> list[dict]:
    """At most ``cap`` records, taken round-robin over answer values so the trimmed task stays
    as flat as the untrimmed one ("None of the above" keeps its share)."""
    if len(kept) <= cap:
        return kept
    nota = [r for r in kept if r["answer_value"] == NOTA][: round(none_share * cap)]
    groups: dict[str, list[dict]] = {}
    for r in kept:
        if r["answer_value"] != NOTA:
            groups.setdefault(value_key(r), []).append(r)
    plain, queues = [], [list(g) for g in groups.values()]
    while len(plain) < cap - len(nota) and any(queues):
        for q in queues:
            if q and len(plain) < cap - len(nota):
                plain.append(q.pop(0))
    return plain + nota


def assign_letters(records: list[dict], cfg, rng: np.random.Generator) -> None:
    """Fill ``options``, ``answer`` and ``distractors`` of every record, letters balanced per task."""
    nota_mode = cfg.options.mode == "cvbench"
    by_task: dict[str, list[dict]] = {}
    for rec in records:
        by_task.setdefault(rec["task"], []).append(rec)
    dealt = 0  # continue the round-robin across tasks so remainders do not all land on A
    for task in sorted(by_task):
        plain = [r for r in by_task[task] if r["answer_value"] != NOTA]
        letters = [LETTERS[(dealt + i) % N_LISTED] for i in range(len(plain))]
        dealt += len(plain)
        letters = [letters[i] for i in rng.permutation(len(letters))]
        for rec, letter in zip(plain, letters):
            rec["options"], rec["answer"], rec["distractors"] = arrange(
                rec["listed"], rec["answer_value"], rec["types"], letter, nota_mode, rng)
        for rec in by_task[task]:
            if rec["answer_value"] == NOTA:
                rec["options"], rec["answer"], rec["distractors"] = arrange(
                    rec["listed"], NOTA, rec["types"], "E", nota_mode, rng)
