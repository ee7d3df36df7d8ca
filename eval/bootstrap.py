"""Seeded cluster bootstrap: resample scenes, not samples.

Questions about one scene share its people and cameras, so they are not independent;
resampling whole clusters (``Sample.cluster``: the scene, or the sample when no scene is
known) gives honest intervals. Every statistic here is a ratio of per-cluster sums, so one
(B x C) matrix of cluster multiplicities serves every cell at once: the replicate of a
cell's accuracy is ``(W @ sums) / (W @ counts)``, and derived metrics (distraction decay,
necessity gap, paired differences) are computed replicate by replicate from the same W.
"""
from __future__ import annotations

import numpy as np

ALPHA = 0.05  # 95 % intervals


def cluster_weights(n_clusters: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n_clusters) multiplicities of clusters drawn with replacement."""
    rng = np.random.default_rng(seed)
    if n_clusters == 0:
        return np.zeros((n_boot, 0))
    draws = rng.integers(0, n_clusters, size=(n_boot, n_clusters))
    return np.stack([np.bincount(row, minlength=n_clusters) for row in draws]).astype(float)


def cluster_sums(values: list[float], clusters: list[str], index: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster (sum of values, count) vectors, aligned with ``index``."""
    sums = np.zeros(len(index))
    counts = np.zeros(len(index))
    for v, c in zip(values, clusters):
        sums[index[c]] += v
        counts[index[c]] += 1
    return sums, counts


def replicate_means(weights: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(B,) bootstrap replicates of a mean; NaN where a replicate drew none of its clusters."""
    num = weights @ sums
    den = weights @ counts
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def percentile_ci(replicates: np.ndarray, alpha: float = ALPHA) -> list[float] | None:
    """[low, high] percentile interval of replicates (NaN replicates ignored)."""
    r = np.asarray(replicates, float)
    r = r[np.isfinite(r)]
    if r.size == 0:
        return None
    lo, hi = np.quantile(r, [alpha / 2, 1 - alpha / 2])
    return [round(float(lo), 2), round(float(hi), 2)]


def paired_p_value(observed: float, replicates: np.ndarray) -> float:
    """Two-sided p-value of a paired difference: the share of replicates, re-centred on 0,
    at least as far from 0 as the observed difference (+1 smoothing so p is never 0)."""
    r = np.asarray(replicates, float)
    r = r[np.isfinite(r)]
    if r.size == 0:
        return float("nan")
    extreme = np.abs(r - observed) >= abs(observed) - 1e-12
    return float((1 + extreme.sum()) / (1 + r.size))
