"""Counts over a benchmark: ``python -m bench stats DIR``."""
from __future__ import annotations

from collections import Counter

from bench.format import Benchmark


def benchmark_stats(bench: Benchmark) -> dict:
    """Counts per task, subset, axis x granularity; answer letters; views and frames per sample."""
    samples = bench.samples
    views = Counter(len(s.views) for s in samples)
    frames = Counter(max(len(v.frames) for v in s.views) for s in samples)
    images = {f.image for s in samples for v in s.views for f in v.frames}
    return {
        "n_samples": len(samples),
        "n_scenes": len({s.cluster for s in samples}),
        "n_unique_images": len(images),
        "by_task": dict(sorted(Counter(s.task for s in samples).items())),
        "by_subset": dict(sorted(Counter(s.subset or "none" for s in samples).items())),
        "by_axis_granularity": dict(sorted(Counter(f"{s.axis or 'none'}/{s.granularity or 'none'}"
                                                   for s in samples).items())),
        "answer_letters": dict(sorted(Counter(s.answer for s in samples).items())),
        "n_options": dict(sorted(Counter(len(s.options) for s in samples).items())),
        "views_per_sample": dict(sorted(views.items())),
        "gt_views_per_sample": dict(sorted(Counter(len(s.gt_views) for s in samples).items())),
        "frames_per_view": dict(sorted(frames.items())),
        "with_camera": sum(all(v.camera is not None for v in s.views) for s in samples),
    }


def format_stats(stats: dict) -> str:
    """Human-readable stats, one block per count."""
    lines = [f"samples: {stats['n_samples']}   scenes: {stats['n_scenes']}   "
             f"unique images: {stats['n_unique_images']}   fully calibrated samples: {stats['with_camera']}"]
    for key in ("by_task", "by_subset", "by_axis_granularity", "answer_letters", "n_options",
                "views_per_sample", "gt_views_per_sample", "frames_per_view"):
        lines.append(f"\n{key}:")
        total = sum(stats[key].values()) or 1
        for name, count in stats[key].items():
            lines.append(f"  {str(name):<24} {count:>7}  {100 * count / total:5.1f} %")
    return "\n".join(lines)
