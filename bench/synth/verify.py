"""Verification of single-view (in)sufficiency from per-view observations.

A task defines ``consistent(table, facts, views) -> set of values``: the answer values that
remain possible for someone who sees exactly ``views`` (``table`` holds what each view shows,
``facts`` the question's fixed ground truth). Mapping those values onto the listed options
(values that are not listed map to "None of the above" in 5-option mode and are ruled out by
the question's presupposition in 4-option mode) says whether the views *determine* the answer:
exactly one option remains.

MVN keeps a question if no single view determines it (SVI) and V_GT does (CVR), with V_GT a
smallest resolving set. SVS keeps it if exactly one view, the golden view, determines it.
Everything here runs on JSON data, so ``bench check`` re-verifies stored samples.
"""
from __future__ import annotations

import hashlib
import itertools

from bench.constants import NOTA


def option_set(values: set[str], listed: list[str], nota: bool) -> set[str]:
    """The options (listed values, or NOTA) that the consistent ``values`` leave open."""
    if nota:
        return {v if v in listed else NOTA for v in values}
    return {v for v in values if v in listed}


def determined(consistent, table: dict, facts: dict, views: list[str], listed: list[str], nota: bool) -> str | None:
    """The one option the views leave open, or None."""
    left = option_set(consistent(table, facts, list(views)), listed, nota)
    return next(iter(left)) if len(left) == 1 else None


def minimal_resolving_set(consistent, table, facts, views, listed, nota, answer, order, max_size=3) -> list[str] | None:
    """The first smallest set of views (in ``order``) that determines ``answer``; None if none."""
    for size in range(1, max_size + 1):
        for subset in itertools.combinations(order, size):
            got = determined(consistent, table, facts, list(subset), listed, nota)
            if got is not None:
                return list(subset) if got == answer else None  # a view set proving a wrong answer: drop
    return None


def check_question(subset: str, consistent, table, facts, views, listed, nota, answer, gt_views) -> dict:
    """Re-verify a stored question.

    Returns:
        {"svi": bool (MVN: no single view determines), "cvr": bool (gt_views determine the answer),
         "minimal": bool (no proper subset of gt_views does), "single_view": {view: option or None}}
    """
    single = {v: determined(consistent, table, facts, [v], listed, nota) for v in views}
    cvr = determined(consistent, table, facts, list(gt_views), listed, nota) == answer
    minimal = all(determined(consistent, table, facts, list(s), listed, nota) is None
                  for k in range(1, len(gt_views)) for s in itertools.combinations(gt_views, k))
    if subset == "MVN":
        svi = all(o is None for o in single.values())
    else:  # SVS: the golden view alone decides, no other view does
        svi = len(gt_views) == 1 and all((o is None) == (v not in gt_views) for v, o in single.items())
    return {"svi": svi, "cvr": cvr, "minimal": minimal, "single_view": single}


def oracle_answer(consistent, table, facts, views, listed, nota, key: str) -> str:
    """A single-view oracle: pick among the options left open by the most informative view.

    The most informative view is the one that leaves the fewest options open (first in
    ``views`` on ties); among those options it picks one by a hash of ``key``, i.e. a fair
    guess that does not depend on the option order.
    """
    universe = sorted(set(listed) | ({NOTA} if nota else set()))
    best = universe
    for v in views:
        left = sorted(option_set(consistent(table, facts, [v]), listed, nota)) or universe
        if len(left) < len(best):
            best = left
    h = int(hashlib.sha1(key.encode()).hexdigest()[:8], 16)
    return best[h % len(best)]


def informative_views(consistent, table, facts, views, listed, nota) -> list[str]:
    """Views that on their own rule out at least one option."""
    n_all = len(listed) + (1 if nota else 0)
    out = []
    for v in views:
        left = option_set(consistent(table, facts, [v]), listed, nota)
        if 0 < len(left) < n_all:
            out.append(v)
    return out
