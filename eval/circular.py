"""Circular evaluation: rotate the options so a letter prior cannot pass for understanding.

Rotation r moves the option at old position ``(i + r) % n`` to position i, for the n
options that are not "None of the above"; NOTA stays last in every rotation (it is a
fixed final option in CVBench). The answer letter and the distractor letters are remapped
with the options. With ``--circular`` a sample counts as right only if every rotation is.
"""
from __future__ import annotations

import dataclasses

from bench.format import Sample
from bench.constants import LETTERS


def n_rotations(sample: Sample, circular: bool) -> int:
    """How many rotations a sample gets: 1 without --circular, else its non-NOTA option count."""
    if not circular:
        return 1
    return len(sample.options) - (1 if sample.has_nota else 0)


def rotate_letter(letter: str, rotation: int, n_rotating: int) -> str:
    """Where the option with ``letter`` goes under ``rotation``; NOTA letters stay put."""
    j = LETTERS.index(letter)
    if j >= n_rotating:
        return letter
    return LETTERS[(j - rotation) % n_rotating]


def rotate_sample(sample: Sample, rotation: int) -> Sample:
    """The sample with its options rotated; answer and distractor letters follow their options."""
    if rotation == 0:
        return sample
    n = len(sample.options) - (1 if sample.has_nota else 0)
    rotation %= n
    options = [sample.options[(i + rotation) % n] for i in range(n)] + list(sample.options[n:])
    return dataclasses.replace(
        sample,
        options=options,
        answer=rotate_letter(sample.answer, rotation, n),
        distractors={rotate_letter(k, rotation, n): v for k, v in sample.distractors.items()},
    )
