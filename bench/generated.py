"""A benchmark folder that is generated when it is missing (what ``python train.py`` starts with).

    ensure_generated("data/synth-default", "configs/bench/default.yaml") -> Path

The generator (``bench.synth``) is imported only when something has to be generated, so the
packages that read benchmarks never depend on it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence


def has_splits(root: str | Path, splits: Sequence[str] = ("train", "val", "test")) -> bool:
    root = Path(root)
    return all((root / s / "benchmark.json").is_file() or (root / s / "benchmark.jsonl").is_file() for s in splits)


def ensure_generated(root: str | Path, config: str | None, splits: Sequence[str] = ("train", "val", "test"),
                     key: str = "config") -> Path:
    """``root``, generated from the generator config ``config`` when one of ``splits`` is missing.

    Raises:
        FileNotFoundError: a split is missing and ``config`` is empty, or ``root`` exists without
            the splits (the generator never writes into a folder that exists).
        ConfigError: ``config`` does not load.
    """
    root = Path(root)
    if has_splits(root, splits):
        return root
    if not config:
        raise FileNotFoundError(f"{root} lacks a {'/'.join(splits)} split and {key} is empty")
    from bench.synth.config import SynthConfig
    from bench.synth.generate import generate
    from common.config import load_config
    synth_cfg = load_config(SynthConfig, config)  # a bad file: ConfigError naming it
    print(f"[bench] generating the synthetic benchmark into {root} ({config}) ...", flush=True)
    try:
        summary = generate(synth_cfg, root)
    except FileExistsError:  # generate() refuses before writing anything
        raise FileExistsError(f"{root} exists but lacks a {'/'.join(splits)} split; remove it to generate the "
                              f"benchmark there, or point {key} elsewhere") from None
    print(f"[bench] generated {summary['n_questions']} questions, {summary['unique_images']} images "
          f"in {summary['seconds']} s", flush=True)
    return root
