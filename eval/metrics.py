"""Accuracy tables, distraction decay and necessity gap, with cluster-bootstrap intervals.

Units: every accuracy, decay, gap and rate is in **points (0-100)**, as the papers report.

Scoring: a query line is right when its letter is the (rotated) answer. A (sample, setting,
variant) is right when every rotation of it is (circular evaluation); a (sample, setting)
scores the mean over its variants (``-1`` with ``minus_one="each"`` has one variant per
dropped view). Accuracy of a group is the mean score of its (sample, setting) units.

- ``acc[setting][subset]``: subset SVS / MVN / no_subset, plus ``overall``.
- ``delta_dis_by_subset[T]`` = mean over k = 1..K_T (the +k settings that were run) of
  ``acc[+0][T] - acc[+k][T]``; ``delta_dis`` = mean over the subsets that have one.
- ``necessity_gap`` = ``acc[+0][MVN] - acc[-1][MVN]``.
- ``by_task`` and ``by_axis_granularity`` use each sample's primary setting
  (``all`` for samples with no subset, ``+0`` otherwise; see bench/protocol.py).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from bench.constants import AXES, GRANULARITIES, NO_SUBSET, OVERALL, SUBSETS
from bench.protocol import setting_sort_key, unit_scores
from eval.bootstrap import cluster_sums, cluster_weights, percentile_ci, replicate_means

SUBSET_ORDER = (*SUBSETS, NO_SUBSET, OVERALL)


@dataclass(frozen=True)
class Unit:
    """One (sample, setting) with its score in [0, 1] and what groups it belongs to."""
    sample_id: str
    setting: str
    score: float
    cluster: str
    subset: str
    task: str
    axis: str | None
    granularity: str | None
    n_options: int
    n_rotations: int
    primary: bool


def score_units(records: list[dict]) -> list[Unit]:
    """Collapse prediction lines into (sample, setting) units (rotations: all; variants: mean;
    bench.protocol.unit_scores)."""
    first: dict[tuple, dict] = {}
    for r in records:
        first.setdefault((r["sample_id"], r["setting"]), r)
    scores = unit_scores((r["sample_id"], r["setting"], r.get("variant", ""), bool(r.get("correct"))) for r in records)
    units = []
    for key, score in scores.items():
        r = first[key]
        units.append(Unit(sample_id=key[0], setting=key[1], score=score, cluster=r["cluster"],
                          subset=r["subset"], task=r["task"], axis=r.get("axis"), granularity=r.get("granularity"),
                          n_options=int(r["n_options"]), n_rotations=int(r.get("n_rotations", 1)),
                          primary=bool(r.get("primary"))))
    units.sort(key=lambda u: (u.sample_id, setting_sort_key(u.setting)))
    return units


def unit_cells(u: Unit) -> list[tuple]:
    """The table cells a unit counts in."""
    cells = [("acc", u.setting, u.subset), ("acc", u.setting, OVERALL), ("task_setting", u.task, u.setting)]
    if u.primary:
        cells += [("task", u.task), ("ag", OVERALL, "all")]
        if u.axis:
            cells.append(("ag", u.axis, "all"))
            if u.granularity:
                cells.append(("ag", u.axis, u.granularity))
        if u.granularity:
            cells.append(("ag", OVERALL, u.granularity))
    return cells


def _r(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), 2)


def _mean_or_none(values: list) -> float | np.ndarray | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return np.mean(np.stack(values), axis=0) if isinstance(values[0], np.ndarray) else float(np.mean(values))


def decay_and_gap(acc: dict[tuple, float | np.ndarray], max_extra: dict[str, int]) -> dict:
    """delta per subset, delta_dis and necessity gap from cell accuracies (floats or replicates)."""
    deltas = {}
    for subset in SUBSETS:
        base = acc.get(("acc", "+0", subset))
        diffs = [base - acc[("acc", f"+{k}", subset)] for k in range(1, max_extra.get(subset, 0) + 1)
                 if base is not None and ("acc", f"+{k}", subset) in acc]
        deltas[subset] = _mean_or_none(diffs)
    minus = acc.get(("acc", "-1", "MVN"))
    base_mvn = acc.get(("acc", "+0", "MVN"))
    return {"delta_by_subset": deltas, "delta_dis": _mean_or_none(list(deltas.values())),
            "necessity_gap": None if minus is None or base_mvn is None else base_mvn - minus}


def accuracy_summary(units: list[Unit], max_extra: dict[str, int], n_boot: int, seed: int) -> dict:
    """Every accuracy-type metric of the run with its 95 % cluster-bootstrap interval."""
    cells: dict[tuple, list[Unit]] = defaultdict(list)
    for u in units:
        for c in unit_cells(u):
            cells[c].append(u)
    clusters = sorted({u.cluster for u in units})
    index = {c: i for i, c in enumerate(clusters)}
    weights = cluster_weights(len(clusters), n_boot, seed)
    point, reps, chance, count = {}, {}, {}, {}
    for cell, members in cells.items():
        sums, counts = cluster_sums([100.0 * m.score for m in members], [m.cluster for m in members], index)
        point[cell] = float(sums.sum() / counts.sum())
        reps[cell] = replicate_means(weights, sums, counts)
        chance[cell] = float(np.mean([100.0 / m.n_options ** m.n_rotations for m in members]))
        count[cell] = len(members)
    derived = decay_and_gap(point, max_extra)
    derived_reps = decay_and_gap(reps, max_extra)

    def table(kind: str, with_ci: bool = True):
        out, ci, n, ch = {}, {}, {}, {}
        for cell in sorted((c for c in cells if c[0] == kind), key=_cell_order):
            a, b = cell[1], cell[2] if len(cell) > 2 else None
            for dst, val in ((out, _r(point[cell])), (ci, percentile_ci(reps[cell])), (n, count[cell]),
                             (ch, _r(chance[cell]))):
                if b is None:
                    dst[a] = val
                else:
                    dst.setdefault(a, {})[b] = val
        return out, ci, n, ch

    acc, acc_ci, acc_n, acc_chance = table("acc")
    by_task, by_task_ci, by_task_n, by_task_chance = table("task")
    by_ag, by_ag_ci, by_ag_n, by_ag_chance = table("ag")
    by_task_setting, by_task_setting_ci, _, _ = table("task_setting")
    deltas = derived["delta_by_subset"]
    return {
        "acc": acc, "acc_ci": acc_ci, "acc_n": acc_n, "acc_chance": acc_chance,
        "delta_dis": _r(derived["delta_dis"]),
        "delta_dis_ci": percentile_ci(derived_reps["delta_dis"]) if derived["delta_dis"] is not None else None,
        "delta_dis_by_subset": {s: _r(v) for s, v in deltas.items() if v is not None},
        "delta_dis_by_subset_ci": {s: percentile_ci(derived_reps["delta_by_subset"][s])
                                   for s, v in deltas.items() if v is not None},
        "necessity_gap": _r(derived["necessity_gap"]),
        "necessity_gap_ci": (percentile_ci(derived_reps["necessity_gap"])
                             if derived["necessity_gap"] is not None else None),
        "by_task": by_task, "by_task_ci": by_task_ci, "by_task_n": by_task_n, "by_task_chance": by_task_chance,
        "by_task_setting": by_task_setting, "by_task_setting_ci": by_task_setting_ci,
        "by_axis_granularity": by_ag, "by_axis_granularity_ci": by_ag_ci,
        "by_axis_granularity_n": by_ag_n, "by_axis_granularity_chance": by_ag_chance,
    }


def _cell_order(cell: tuple) -> tuple:
    order = {name: i for i, name in enumerate(SUBSET_ORDER + AXES + GRANULARITIES + ("all",))}

    def key(x):
        if x is None:
            return (0, 0, "")
        if x in order:
            return (1, order[x], x)
        if x[:1] in "+-" or x == "all":
            return (0, setting_sort_key(x)[0] * 100 + setting_sort_key(x)[1], x)
        return (2, 0, x)
    return tuple(key(x) for x in cell[1:])


def chance_by_subset(units: list[Unit]) -> dict[str, float]:
    """Random guessing (1 / number of options, one pass), averaged over the samples of a subset."""
    per_sample: dict[str, Unit] = {}
    for u in units:
        per_sample.setdefault(u.sample_id, u)
    groups: dict[str, list[float]] = defaultdict(list)
    for u in per_sample.values():
        groups[u.subset].append(100.0 / u.n_options)
        groups[OVERALL].append(100.0 / u.n_options)
    return {s: round(float(np.mean(groups[s])), 2) for s in SUBSET_ORDER if s in groups}
