"""Compare runs on one benchmark: the papers' tables across runs, and paired significance.

Every run is compared with the first (the reference) on the (sample, setting) units both
have. A paired cluster bootstrap resamples scenes once per replicate and recomputes both
runs' metrics on the same draw, so the difference's interval and p-value account for the
questions being shared (much tighter than two independent intervals).
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from eval.bootstrap import DEFAULT_N_BOOT, cluster_sums, cluster_weights, paired_p_value, percentile_ci, replicate_means
from eval.errors import DATA, EvalInputError
from eval.metrics import OVERALL, Unit, decay_and_gap, score_units, unit_cells
from eval.manifest import MANIFEST, read_manifest
from eval.predictions import read_predictions
from eval.report import _table, fmt, render_cvbench_table, render_ssmn_table
from eval.settings import setting_sort_key
from eval.summary import SUMMARY, read_summary

PRIMARY = ("ag", OVERALL, "all")


def cell_name(cell: tuple) -> str:
    if cell == PRIMARY:
        return "overall (primary setting)"
    return f"{cell[1]} {cell[2]}" if cell[0] == "acc" else " ".join(str(x) for x in cell)


def paired_compare(units_a: list[Unit], units_b: list[Unit], max_extra: dict[str, int],
                   n_boot: int = DEFAULT_N_BOOT, seed: int = 0) -> dict[str, dict]:
    """Paired differences (b − a, points) on the shared units.

    Returns:
        {metric: {"a", "b", "diff", "ci": [lo, hi], "p", "n"}} for the overall primary
        accuracy, every setting x subset accuracy, delta_dis and the necessity gap.
    """
    ua = {(u.sample_id, u.setting): u for u in units_a}
    ub = {(u.sample_id, u.setting): u for u in units_b}
    common = sorted(set(ua) & set(ub), key=lambda k: (k[0], setting_sort_key(k[1])))
    clusters = sorted({ua[k].cluster for k in common})
    index = {c: i for i, c in enumerate(clusters)}
    weights = cluster_weights(len(clusters), n_boot, seed)
    members: dict[tuple, list[tuple]] = {}
    for k in common:
        for cell in unit_cells(ua[k]):
            # Per-subset cells and the primary overall; the per-setting "overall" rows repeat them.
            if cell == PRIMARY or (cell[0] == "acc" and cell[2] != OVERALL):
                members.setdefault(cell, []).append(k)
    point = {"a": {}, "b": {}}
    reps = {"a": {}, "b": {}}
    for cell, keys in members.items():
        for side, units in (("a", ua), ("b", ub)):
            sums, counts = cluster_sums([100.0 * units[k].score for k in keys], [units[k].cluster for k in keys], index)
            point[side][cell] = float(sums.sum() / counts.sum())
            reps[side][cell] = replicate_means(weights, sums, counts)
    out: dict[str, dict] = {}

    def add(name: str, a, b, ra, rb, n: int) -> None:
        if a is None or b is None:
            return
        diff = b - a
        d_reps = rb - ra
        out[name] = {"a": round(a, 2), "b": round(b, 2), "diff": round(diff, 2), "ci": percentile_ci(d_reps),
                     "p": round(paired_p_value(diff, d_reps), 4), "n": n}

    ordered = sorted(members, key=lambda c: (c != PRIMARY, setting_sort_key(c[1]) if c[0] == "acc" else (0, 0), c))
    for cell in ordered:
        add(cell_name(cell), point["a"][cell], point["b"][cell], reps["a"][cell], reps["b"][cell], len(members[cell]))
    da, db = decay_and_gap(point["a"], max_extra), decay_and_gap(point["b"], max_extra)
    ra, rb = decay_and_gap(reps["a"], max_extra), decay_and_gap(reps["b"], max_extra)
    add("delta_dis", da["delta_dis"], db["delta_dis"], ra["delta_dis"], rb["delta_dis"], len(common))
    add("necessity_gap", da["necessity_gap"], db["necessity_gap"], ra["necessity_gap"], rb["necessity_gap"],
        len(members.get(("acc", "+0", "MVN"), [])))
    return out


def load_run(out_dir: str | Path) -> tuple[dict, dict, list[dict]]:
    """(manifest, summary, prediction lines) of a finished run; EvalInputError (one line per
    file) if it is not one or a file of it cannot be read."""
    out_dir = Path(out_dir)
    problems = [f"ERROR {out_dir / name}: missing; is {out_dir} a finished run folder?"
                for name in (MANIFEST, SUMMARY) if not (out_dir / name).is_file()]
    if problems:
        raise EvalInputError(problems, DATA)
    loaded = []
    for name, read in ((MANIFEST, read_manifest), (SUMMARY, read_summary)):
        try:
            loaded.append(read(out_dir))
        except (OSError, ValueError) as err:  # a torn or foreign file; JSONDecodeError is a ValueError
            problems.append(f"ERROR {out_dir / name}: unreadable ({type(err).__name__}: {err}); rerun the run's "
                            f"command to rewrite it")
    if problems:
        raise EvalInputError(problems, DATA)
    return loaded[0], loaded[1], list(read_predictions(out_dir).values())


def run_label(manifest: dict, out_dir: Path) -> str:
    return f"{manifest.get('model', '?')} ({Path(out_dir).name})"


def compare_runs(out_dirs: list[str | Path], n_boot: int = DEFAULT_N_BOOT, seed: int = 0,
                 labels: list[str] | None = None, output: str = "md", plot: str | Path | None = None) -> str:
    """The SSMN and CVBench tables over all runs and paired tests against the first.

    Args:
        labels: row names (default: "model (folder)").
        output: "md" (Markdown tables), "csv" (one row per run metric and per paired difference)
            or "json" (the same as one object).
        plot: also draw every run's accuracy against extra views here (PNG, SVS and MVN panels).
    """
    runs, problems = [], []
    for d in out_dirs:
        try:
            runs.append((Path(d), *load_run(d)))
        except EvalInputError as err:
            problems += err.problems
    if len(out_dirs) < 2:
        problems.append("ERROR compare: needs at least two run folders")
    if output not in ("md", "csv", "json"):
        problems.append(f"ERROR compare: --format {output!r}: expected md, csv or json")
    if runs and not problems:
        ref_sha = runs[0][1].get("bench_sha256")
        problems += [f"ERROR {d}: evaluated a different benchmark than {runs[0][0]} (bench_sha256 differs)"
                     for d, m, _, _ in runs[1:] if m.get("bench_sha256") != ref_sha]
    if problems:
        raise EvalInputError(problems, DATA)
    names = labels if labels and len(labels) == len(runs) else [run_label(m, d) for d, m, _, _ in runs]
    rows = [(name, s) for name, (_, _, s, _) in zip(names, runs)]
    ref_sum, ref_recs = runs[0][2], runs[0][3]
    max_extra = ref_sum.get("run", {}).get("protocol", {}).get("max_extra", {"SVS": 3, "MVN": 2})
    ref_units = score_units(ref_recs)
    paired = [(label, paired_compare(ref_units, score_units(recs), max_extra, n_boot, seed))
              for (_, _, _, recs), (label, _) in zip(runs[1:], rows[1:])]
    if plot is not None:
        from eval.plots import plot_distraction_curves
        plot_distraction_curves(rows, Path(plot))
    if output == "json":
        return json.dumps(comparison_dict(runs, rows, paired, n_boot, seed), indent=1) + "\n"
    if output == "csv":
        return comparison_csv(rows, paired)
    return comparison_markdown(rows, paired, n_boot, seed)


def comparison_markdown(rows: list[tuple[str, dict]], paired: list[tuple[str, dict]], n_boot: int, seed: int) -> str:
    parts = ["# Run comparison", "", f"Reference: {rows[0][0]}. Differences are run − reference in points, "
             f"paired cluster bootstrap over scenes ({n_boot} replicates, seed {seed}).", "",
             "## Multi-view settings (SSMNBench Table 3 layout)", "", render_ssmn_table(rows), "",
             "## Spatial / temporal (CVBench Table 2/3 layout)", "", render_cvbench_table(rows), "",
             "## Paired differences against the reference", ""]
    body = []
    for label, diffs in paired:
        for metric, r in diffs.items():
            ci = f"[{r['ci'][0]:+.1f}, {r['ci'][1]:+.1f}]" if r["ci"] else "–"
            star = " *" if r["p"] < 0.05 else ""
            body.append([label, metric, fmt(r["a"]), fmt(r["b"]), f"{r['diff']:+.1f}", ci, f"{r['p']:.3f}{star}",
                         str(r["n"])])
    parts.append(_table(["Run", "Metric", "Reference", "Run", "Δ", "95 % CI", "p", "n"], body))
    parts += ["", "\\* p < 0.05 (two-sided). Δ dis and the gap: lower Δ dis is better; a real fuser has a large gap."]
    return "\n".join(parts) + "\n"


def _run_metrics(summary: dict) -> dict[str, float | None]:
    """Flat "metric name -> points" of one summary: accuracy per setting x subset, decay, gap."""
    out: dict[str, float | None] = {}
    for setting in sorted(summary.get("acc", {}), key=setting_sort_key):
        for subset, value in summary["acc"][setting].items():
            out[f"acc {setting} {subset}"] = value
    for axis, row in (summary.get("by_axis_granularity") or {}).items():
        for gran, value in row.items():
            out[f"{axis} {gran}"] = value
    out["delta_dis"] = summary.get("delta_dis")
    out["necessity_gap"] = summary.get("necessity_gap")
    return out


def comparison_dict(runs: list[tuple], rows: list[tuple[str, dict]], paired: list[tuple[str, dict]], n_boot: int,
                    seed: int) -> dict:
    return {
        "reference": rows[0][0], "n_boot": n_boot, "seed": seed, "units": "points (0-100)",
        "runs": [{"label": label, "dir": str(d), "model": m.get("model"), "metrics": _run_metrics(s)}
                 for (d, m, s, _), (label, _) in zip(runs, rows)],
        "paired": [{"run": label, "metric": metric, "reference": r["a"], "value": r["b"], "diff": r["diff"],
                    "ci": r["ci"], "p": r["p"], "n": r["n"]} for label, diffs in paired for metric, r in diffs.items()],
    }


def comparison_csv(rows: list[tuple[str, dict]], paired: list[tuple[str, dict]]) -> str:
    """Long format: a ``metric`` row per run and metric, a ``paired`` row per difference."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["kind", "run", "metric", "value", "reference", "diff", "ci_low", "ci_high", "p", "n"])
    for label, summary in rows:
        for metric, value in _run_metrics(summary).items():
            writer.writerow(["metric", label, metric, value, "", "", "", "", "", ""])
    for label, diffs in paired:
        for metric, r in diffs.items():
            lo, hi = r["ci"] if r["ci"] else ("", "")
            writer.writerow(["paired", label, metric, r["b"], r["a"], r["diff"], lo, hi, r["p"], r["n"]])
    return buf.getvalue()
