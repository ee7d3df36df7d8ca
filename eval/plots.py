"""The run's figures (matplotlib, Agg backend: no display needed).

- ``acc_vs_extra_views.png``: accuracy against views relative to V_GT (−1, +0, +1, ...),
  one line per subset with 95 % interval bars and the subset's chance level dashed; the
  papers' distraction-decay figure.
- ``per_task.png``: accuracy per task at the primary setting with interval bars and a
  chance tick per bar.
- ``plot_distraction_curves``: several runs' accuracy against +k in one figure (compare).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

from common.atomic import atomic_target
from bench.constants import SUBSETS

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"SVS": "#1f77b4", "MVN": "#d62728", "no_subset": "#7f7f7f"}
OFFSET = {"SVS": -0.05, "MVN": 0.05}  # a small x shift so the two subsets' interval bars do not overlap


def _save(fig, path: Path) -> None:
    """PNG via a temporary file and a rename: a full disk never leaves a 0-byte figure."""
    try:
        with atomic_target(path) as tmp:
            fig.savefig(tmp, format="png")
    finally:
        plt.close(fig)


def _x_of(setting: str) -> int | None:
    if setting == "-1":
        return -1
    if setting.startswith("+"):
        return int(setting[1:])
    return None


def _err(value: float, ci: list[float] | None) -> list[float]:
    if not ci:
        return [0.0, 0.0]
    return [max(0.0, value - ci[0]), max(0.0, ci[1] - value)]


def plot_acc_vs_extra_views(summary: dict, path: Path, title: str | None = None) -> Path:
    acc, ci, chance = summary.get("acc", {}), summary.get("acc_ci", {}), summary.get("chance", {})
    fig, ax = plt.subplots(figsize=(5.6, 4.2), dpi=150)
    xs_all = set()
    for subset in SUBSETS:
        pts = sorted((x, s) for s in acc if (x := _x_of(s)) is not None and subset in acc[s])
        if not pts:
            continue
        main = [(x, s) for x, s in pts if x >= 0]
        xs = [x + OFFSET[subset] for x, _ in main]
        ys = [acc[s][subset] for _, s in main]
        errs = list(zip(*[_err(acc[s][subset], ci.get(s, {}).get(subset)) for _, s in main])) or [[], []]
        ax.errorbar(xs, ys, yerr=errs, marker="o", capsize=3, color=COLORS[subset], label=f"{subset}")
        minus = [(x, s) for x, s in pts if x < 0]
        for x, s in minus:
            e = _err(acc[s][subset], ci.get(s, {}).get(subset))
            ax.errorbar([x + OFFSET[subset]], [acc[s][subset]], yerr=[[e[0]], [e[1]]], marker="s", capsize=3, color=COLORS[subset],
                        linestyle="none", mfc="white", label=f"{subset} −1 (one V_GT view removed)")
            if main:  # dashed: removing a necessary view is not on the "adding views" axis
                ax.plot([x + OFFSET[subset], xs[0]], [acc[s][subset], ys[0]], linestyle="--", color=COLORS[subset], alpha=0.6)
        if subset in chance:
            ax.axhline(chance[subset], color=COLORS[subset], linestyle=":", linewidth=1, alpha=0.8,
                       label=f"{subset} chance")
        xs_all.update(x for x, _ in pts)
    if xs_all:
        ticks = sorted(xs_all)
        ax.set_xticks(ticks, [("−1" if t < 0 else f"+{t}") for t in ticks])
    ax.set_xlabel("views relative to V_GT (extra views added)")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3)
    ax.set_title(title or f"{summary.get('run', {}).get('model', '')}: accuracy vs extra views", fontsize=9)
    if ax.get_legend_handles_labels()[0]:
        # Below the axes: inside, it would hide points near chance or near 100 %.
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, frameon=False)
    fig.tight_layout()
    _save(fig, path)
    return path


def plot_per_task(summary: dict, path: Path, title: str | None = None) -> Path:
    by_task, ci = summary.get("by_task", {}), summary.get("by_task_ci", {})
    chance, n = summary.get("by_task_chance", {}), summary.get("by_task_n", {})
    tasks = sorted(by_task)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.7 * len(tasks) + 1.5), 4.2), dpi=150)
    if tasks:
        ys = [by_task[t] for t in tasks]
        errs = list(zip(*[_err(by_task[t], ci.get(t)) for t in tasks]))
        ax.bar(range(len(tasks)), ys, yerr=errs, capsize=3, color="#4c72b0", ecolor="#555555",
               label="accuracy (95 % CI)")
        for i, t in enumerate(tasks):
            ax.hlines(chance.get(t, 0), i - 0.4, i + 0.4, colors="#d62728", linestyles="--", zorder=3,
                      label="chance" if i == 0 else None)
        # Slanted: task names are long and would run into each other side by side.
        ax.set_xticks(range(len(tasks)), [f"{t} (n={n.get(t, 0)})" for t in tasks], fontsize=7,
                      rotation=35, ha="right", rotation_mode="anchor")
        ax.legend(fontsize=8)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 105)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(title or f"{summary.get('run', {}).get('model', '')}: accuracy per task (primary setting)",
                 fontsize=9)
    fig.tight_layout()
    _save(fig, path)
    return path


def plot_distraction_curves(rows: list[tuple[str, dict]], path: Path) -> Path:
    """Accuracy against the number of extra views (+k), one line per run, SVS and MVN panels:
    the papers' distraction-decay figure across models (``eval compare --plot``)."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), dpi=150, sharey=True)
    for ax, subset in zip(axes, SUBSETS):
        ks = set()
        for name, s in rows:
            acc = s.get("acc", {})
            pts = sorted((int(k[1:]), v[subset]) for k, v in acc.items() if k.startswith("+") and subset in v)
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=name)
                ks.update(x for x, _ in pts)
        chance = rows[0][1].get("chance", {}).get(subset) if rows else None
        if chance is not None:
            ax.axhline(chance, color="grey", linestyle=":", label="chance")
        ax.set_xticks(sorted(ks) or [0])
        ax.set_title(f"{subset}: accuracy vs extra views")
        ax.set_xlabel("extra views added to V_GT (+k)")
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy (%)")
    axes[1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.tight_layout()
    _save(fig, path)
    return path


def save_plots(summary: dict, out_dir: Path) -> list[Path]:
    """Write both figures into ``out_dir``; returns their paths."""
    out_dir = Path(out_dir)
    return [plot_acc_vs_extra_views(summary, out_dir / "acc_vs_extra_views.png"),
            plot_per_task(summary, out_dir / "per_task.png")]
