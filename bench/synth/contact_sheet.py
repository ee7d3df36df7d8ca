"""Contact sheet: one example question per task with its views, marks, options and answer.

A spatial example shows its views side by side; a temporal example shows one strip per view,
its frames in time order left to right (V_GT views first, labelled with the frame times).
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from PIL import Image, ImageDraw  # noqa: E402

from bench.constants import LETTERS  # noqa: E402
from bench.format import Sample  # noqa: E402

STRIP_PX = 112  # frame size inside a temporal strip


def temporal_strips(root: Path, sample: Sample, max_views: int = 4) -> Image.Image:
    """One image: per shown view (V_GT then extra) a row of its frames, labelled."""
    shown = (sample.gt_views + sample.extra_views)[:max_views]
    n_frames = max(len(sample.view(v).frames) for v in shown)
    pad, head = 4, 14
    canvas = Image.new("RGB", (n_frames * (STRIP_PX + pad), len(shown) * (STRIP_PX + head + pad)), "white")
    draw = ImageDraw.Draw(canvas)
    for r, v in enumerate(shown):
        y = r * (STRIP_PX + head + pad)
        gt = v in sample.gt_views
        draw.text((2, y), f"{v} ({'V_GT' if gt else 'extra'})", fill=(0, 130, 0) if gt else (110, 110, 110))
        for c, frame in enumerate(sample.view(v).frames):
            img = Image.open(Path(root) / frame.image).convert("RGB").resize((STRIP_PX, STRIP_PX))
            x = c * (STRIP_PX + pad)
            canvas.paste(img, (x, y + head))
            draw.text((x + 3, y + head + 2), f"t={frame.t:g}", fill=(0, 0, 0))
    return canvas


def _text(s: Sample) -> str:
    lines = [f"{s.task}  [{s.axis}, {s.subset}, {s.granularity}]", s.id]
    lines += textwrap.wrap(s.question, 58)
    for i, opt in enumerate(s.options):
        letter = LETTERS[i]
        tag = " <= answer" if letter == s.answer else f"  ({s.distractors.get(letter, '')})"
        lines += textwrap.wrap(f"{letter}. {opt}{tag}", 62)
    for e in s.evidence[:4]:
        lines.append(f"evidence {e.view_id}: t {e.t_start:g}-{e.t_end:g}")
    return "\n".join(lines)


def contact_sheet(examples: list[tuple[Path, Sample]], path: str | Path, max_views: int = 4) -> None:
    """Write a PNG: per row the V_GT views (green title) then extra views (grey), and text.

    Args:
        examples: (benchmark folder, sample) pairs; samples with more than one frame per view
            are drawn as one strip of frames per view.
    """
    temporal = [max(len(v.frames) for v in s.views) > 1 for _, s in examples]
    heights = [4.8 if t else 2.45 for t in temporal]
    fig = plt.figure(figsize=(2.3 * max_views + 4.6, sum(heights)))
    gs = fig.add_gridspec(len(examples), max_views + 1, width_ratios=[1] * max_views + [2.1], height_ratios=heights)
    for r, (root, s) in enumerate(examples):
        if temporal[r]:
            ax = fig.add_subplot(gs[r, :max_views])
            ax.axis("off")
            ax.imshow(temporal_strips(Path(root), s, max_views))
        else:
            shown = (s.gt_views + s.extra_views)[:max_views]
            for c in range(max_views):
                ax = fig.add_subplot(gs[r, c])
                ax.axis("off")
                if c < len(shown):
                    v = shown[c]
                    ax.imshow(Image.open(Path(root) / s.view(v).frames[0].image))
                    gt = v in s.gt_views
                    ax.set_title(f"{v} ({'V_GT' if gt else 'extra'})", fontsize=8, color="green" if gt else "grey")
        ax = fig.add_subplot(gs[r, max_views])
        ax.axis("off")
        ax.text(0.0, 1.0, _text(s), va="top", ha="left", fontsize=7.5, family="monospace", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
