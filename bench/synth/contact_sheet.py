"""Contact sheet: one example question per task with its views, marks, options and answer."""
from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from PIL import Image  # noqa: E402


def contact_sheet(examples: list[tuple[Path, dict]], path: str | Path, max_views: int = 4) -> None:
    """Write a PNG grid: per row the V_GT views (green title) then extra views (grey), and text.

    Args:
        examples: (benchmark folder, sample dict) pairs.
    """
    rows = len(examples)
    fig, axes = plt.subplots(rows, max_views + 1, figsize=(2.3 * max_views + 4.6, 2.45 * rows),
                             gridspec_kw={"width_ratios": [1] * max_views + [2.1]}, squeeze=False)
    for r, (root, s) in enumerate(examples):
        by_id = {v["view_id"]: v for v in s["views"]}
        shown = (s["gt_views"] + s["extra_views"])[:max_views]
        for c in range(max_views):
            ax = axes[r][c]
            ax.axis("off")
            if c < len(shown):
                v = shown[c]
                ax.imshow(Image.open(Path(root) / by_id[v]["frames"][0]["image"]))
                gt = v in s["gt_views"]
                ax.set_title(f"{v} ({'V_GT' if gt else 'extra'})", fontsize=8, color="green" if gt else "grey")
        ax = axes[r][max_views]
        ax.axis("off")
        lines = [f"{s['task']}  [{s['subset']}, {s['granularity']}]  {s['id']}"]
        lines += textwrap.wrap(s["question"], 58)
        for i, opt in enumerate(s["options"]):
            letter = "ABCDE"[i]
            tag = " <= answer" if letter == s["answer"] else f"  ({s['distractors'].get(letter, '')})"
            lines.append(f"{letter}. {opt}{tag}")
        ax.text(0.0, 1.0, "\n".join(lines), va="top", ha="left", fontsize=7.5, family="monospace",
                transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
