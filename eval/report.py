"""Markdown tables shaped like the papers' tables, and the run report that holds them.

- ``render_ssmn_table``: SSMNBench Table 3 shape. One row per model: SVS +0..+3 with
  delta_SVS, MVN +0..+2 and -1 with delta_MVN, delta_dis and the necessity gap; a Random row.
- ``render_cvbench_table``: CVBench Table 2/3 shape. Spatial and temporal, each coarse /
  fine / all, and overall; Random, Blind and Human rows when known.
Every number is in points (0-100); "–" marks a cell the run has no samples for.
"""
from __future__ import annotations

from bench.constants import AXES, GRANULARITIES, K_T, NO_SUBSET, OVERALL, SUBSETS
from bench.protocol import setting_sort_key

DASH = "–"


def fmt(value: float | None, digits: int = 1) -> str:
    return DASH if value is None else f"{value:.{digits}f}"


def fmt_ci(value: float | None, ci: list[float] | None) -> str:
    if value is None:
        return DASH
    return f"{value:.1f} [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else f"{value:.1f}"


def _table(header: list[str], rows: list[list[str]], align_first_left: bool = True) -> str:
    sep = [":---" if i == 0 and align_first_left else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _max_extra(summaries: list[dict]) -> dict[str, int]:
    out = {subset: 0 for subset in SUBSETS}
    for s in summaries:
        for subset, k in s.get("run", {}).get("protocol", {}).get("max_extra", K_T).items():
            out[subset] = max(out.get(subset, 0), k)
    return out


def render_ssmn_table(rows: list[tuple[str, dict]], random_row: bool = True) -> str:
    """SSMNBench Table 3-shaped Markdown: accuracy per setting and subset, decay, gap.

    Args:
        rows: (row name, summary dict) per model.
        random_row: prepend the chance row of the first summary.
    """
    k = _max_extra([s for _, s in rows])
    svs_cols = [f"+{i}" for i in range(k["SVS"] + 1)]
    mvn_cols = [f"+{i}" for i in range(k["MVN"] + 1)] + ["-1"]
    header = (["Model"] + [f"SVS {c}" for c in svs_cols] + ["Δ SVS ↓"] + [f"MVN {c.replace('-', '−')}" for c in mvn_cols]
              + ["Δ MVN ↓", "Δ dis ↓", "Gap (+0 − −1)"])
    body = []
    if random_row and rows:
        ch = rows[0][1].get("acc_chance", {})
        body.append(["Random"] + [fmt(ch.get(c, {}).get("SVS")) for c in svs_cols] + [DASH]
                    + [fmt(ch.get(c, {}).get("MVN")) for c in mvn_cols] + [DASH, DASH, DASH])
    for name, s in rows:
        acc, d = s.get("acc", {}), s.get("delta_dis_by_subset", {})
        body.append([name] + [fmt(acc.get(c, {}).get("SVS")) for c in svs_cols] + [fmt(d.get("SVS"))]
                    + [fmt(acc.get(c, {}).get("MVN")) for c in mvn_cols] + [fmt(d.get("MVN"))]
                    + [fmt(s.get("delta_dis")), fmt(s.get("necessity_gap"))])
    return _table(header, body)


def render_cvbench_table(rows: list[tuple[str, dict]], blind: dict | None = None, human: dict | None = None,
                         random_row: bool = True) -> str:
    """CVBench Table 2/3-shaped Markdown: spatial / temporal x coarse / fine / all, overall.

    Args:
        rows: (row name, summary dict) per model; the primary setting of each sample is used.
        blind: a summary (or {"by_axis_granularity": ...}) of a text-only run, for the Blind row.
        human: {"by_axis_granularity": {axis: {granularity: points}}} for the Human row.
    """
    cols = [(a, g) for a in AXES for g in (*GRANULARITIES, "all")] + [(OVERALL, "all")]
    header = ["Model"] + [f"{a.capitalize()} {g}" if a != OVERALL else "Overall" for a, g in cols]

    def row(name: str, table: dict | None) -> list[str]:
        table = table or {}
        return [name] + [fmt((table.get(a) or {}).get(g)) for a, g in cols]

    body = []
    if random_row and rows:
        body.append(row("Random", rows[0][1].get("by_axis_granularity_chance")))
    if blind:
        body.append(row(f"Blind ({blind.get('model', 'text only')})", blind.get("by_axis_granularity")))
    if human:
        body.append(row("Human", human.get("by_axis_granularity")))
    body += [row(name, s.get("by_axis_granularity")) for name, s in rows]
    return _table(header, body)


def render_ci_table(summary: dict) -> str:
    """Accuracy per setting x subset with its 95 % cluster-bootstrap interval and n."""
    acc, ci, n = summary.get("acc", {}), summary.get("acc_ci", {}), summary.get("acc_n", {})
    subsets = [s for s in (*SUBSETS, NO_SUBSET, OVERALL) if any(s in acc[x] for x in acc)]
    body = []
    for setting in sorted(acc, key=setting_sort_key):
        body.append([setting] + [f"{fmt_ci(acc[setting].get(s), ci.get(setting, {}).get(s))} (n={n[setting][s]})"
                                 if s in acc[setting] else DASH for s in subsets])
    for key, label in (("delta_dis", "Δ dis"), ("necessity_gap", "Gap (+0 − −1)")):
        if summary.get(key) is not None:
            body.append([label, fmt_ci(summary[key], summary.get(f"{key}_ci"))] + [""] * (len(subsets) - 1))
    return _table(["Setting"] + subsets, body)


def render_task_table(summary: dict) -> str:
    """Accuracy per task at the primary setting, with interval, chance and n."""
    t, ci, n, ch = (summary.get(k, {}) for k in ("by_task", "by_task_ci", "by_task_n", "by_task_chance"))
    body = [[task, fmt_ci(t[task], ci.get(task)), fmt(ch.get(task)), str(n.get(task, 0))] for task in sorted(t)]
    return _table(["Task", "Accuracy [95 % CI]", "Random", "n"], body)


def render_failure_table(summary: dict) -> str:
    """Wrong answers by the type of the distractor chosen (share of all wrong answers)."""
    tax = summary.get("failure_taxonomy", {})
    total = sum(tax.values())
    body = [[kind, str(count), fmt(100.0 * count / total)] for kind, count in tax.items()]
    return _table(["Failure type", "Wrong answers", "Share of errors (%)"], body) if body else "No wrong answers."


def render_letter_table(summary: dict) -> str:
    hist = summary.get("letter_histogram", {})
    pred, gold = hist.get("predicted", {}), hist.get("gold", {})
    letters = list(pred)
    return _table(["", *letters], [["Predicted", *(str(pred.get(x, 0)) for x in letters)],
                                   ["Gold", *(str(gold.get(x, 0)) if x != "none" else DASH for x in letters)]])


def render_reads_line(summary: dict) -> str:
    """Reads by confidence: how many answers stated their option, only mentioned it, or were guessed."""
    reads = summary.get("parse_reads") or {}
    conf = reads.get("by_confidence") or {}
    if not conf:
        return "Reads by confidence: –"
    return ("Reads by confidence: " + ", ".join(f"{k} {v}" for k, v in conf.items())
            + f" (guessed: {fmt(reads.get('guess_rate'), 2)} % of the answers read)")


def render_report(summary: dict, name: str | None = None) -> str:
    """The whole report.md of one run."""
    run = summary.get("run", {})
    name = name or run.get("model", "model")
    refs = summary.get("reference_rows") or {}
    args = ", ".join(f"{k}={v}" for k, v in (run.get("model_args") or {}).items()) or "none"
    parts = [
        f"# Evaluation: {name}",
        "",
        f"- benchmark: `{run.get('bench', '?')}`; samples: {summary.get('n_samples')}; "
        f"queries: {summary.get('n_queries')}",
        f"- model: `{run.get('model')}` (args: {args}); seed: {run.get('seed')}; "
        f"circular: {run.get('circular')}; settings: {', '.join(summary.get('settings', []))}",
        f"- units: {summary.get('units')}. Intervals: {summary.get('bootstrap', {}).get('interval')} "
        f"cluster bootstrap over scenes, {summary.get('bootstrap', {}).get('n_boot')} replicates.",
        "",
        "## Multi-view settings (SSMNBench Table 3 layout)",
        "",
        "+k: V_GT plus k extra views; −1: V_GT minus one necessary view. "
        "Δ = mean over k of Acc(+0) − Acc(+k) (lower is better); Gap = Acc_MVN(+0) − Acc_MVN(−1).",
        "",
        render_ssmn_table([(name, summary)]),
        "",
        "## Spatial / temporal (CVBench Table 2/3 layout)",
        "",
        "Each sample at its primary setting: all views for samples without a subset, V_GT (+0) otherwise.",
        "",
        render_cvbench_table([(name, summary)], blind=refs.get("blind"), human=refs.get("human")),
        "",
        "## Accuracy with 95 % intervals",
        "",
        render_ci_table(summary),
        "",
        "## Per task",
        "",
        render_task_table(summary),
        "",
        "## Failure taxonomy",
        "",
        render_failure_table(summary),
        "",
        "## Predicted letters",
        "",
        render_letter_table(summary),
        "",
        f"Parse failures: {fmt(summary.get('parse_failure_rate'), 2)} %; "
        f"fallback used: {fmt(summary.get('fallback_rate'), 2)} %; methods: "
        + ", ".join(f"{k} {v}" for k, v in (summary.get("parse_methods") or {}).items()),
        "",
        render_reads_line(summary),
        "",
        "## Plots",
        "",
        "![Accuracy against the number of extra views](acc_vs_extra_views.png)",
        "",
        "![Accuracy per task](per_task.png)",
        "",
    ]
    return "\n".join(parts)
