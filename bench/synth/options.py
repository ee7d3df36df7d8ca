"""Answer options: typed hard negatives, "None of the above", balanced letters.

Options are built as *values* (the option texts) first; letters are assigned only at the end
by a permutation, so verification (which depends on the set of listed values) and balancing
(which chooses the answer's letter) stay independent.
"""
from __future__ import annotations

import numpy as np

from bench.constants import LETTERS, NOTA

N_LISTED = 4  # listed options besides "None of the above"


def categorical_options(truth: str, typed: list[tuple[str, str]], pool: list[str], rng: np.random.Generator,
                        nota_answer: bool, fill_type: str = "other") -> tuple[list[str], dict[str, str]] | None:
    """Pick listed values: the truth (unless the answer is NOTA) plus typed distractors.

    Args:
        truth: the right value.
        typed: (value, type) hard negatives in order of preference (duplicates/truth skipped).
        pool: further values to fill up with, typed ``fill_type``.
        nota_answer: build the "None of the above is right" variant (truth not listed).
    Returns:
        (listed values, {value: distractor type}) or None if there are not enough values.
    """
    listed: list[str] = [] if nota_answer else [truth]
    types: dict[str, str] = {}
    for value, kind in typed:
        if len(listed) == N_LISTED:
            break
        if value != truth and value not in listed:
            listed.append(value)
            types[value] = kind
    rest = [v for v in pool if v != truth and v not in listed]
    for i in rng.permutation(len(rest)):
        if len(listed) == N_LISTED:
            break
        listed.append(rest[i])
        types[rest[i]] = fill_type
    return (listed, types) if len(listed) == N_LISTED else None


def numeric_options(truth: int, typed: list[tuple[int, str]], lo: int, hi: int, rng: np.random.Generator,
                    nota_answer: bool) -> tuple[list[str], dict[str, str]] | None:
    """Counting options drawn from the task's answer support ``[lo, hi]``.

    Typed negatives (single-view count, naive sum, ...) inside the support come first; the
    rest are drawn uniformly from the support. Because balancing flattens the answers over the
    same support, every listed number is right about equally often: neither the value nor
    its rank ("the middle one") tells a text-only model anything. A truth outside the support
    gives None (the question is dropped), and so do typed values outside it.
    """
    if not lo <= truth <= hi:
        return None
    pool = [v for v in range(lo, hi + 1) if v != truth]
    need = N_LISTED - (0 if nota_answer else 1)
    chosen: dict[int, str] = {}
    for v, kind in typed:
        if v in pool and v not in chosen and len(chosen) < need:
            chosen[v] = kind
    rest = [v for v in pool if v not in chosen]
    for i in rng.permutation(len(rest))[: need - len(chosen)]:
        chosen[rest[i]] = "off_by_%d" % min(abs(rest[i] - truth), 2)
    if len(chosen) != need:
        return None
    values = ([] if nota_answer else [truth]) + sorted(chosen)
    return [str(v) for v in values], {str(v): k for v, k in chosen.items()}


def arrange(listed: list[str], answer_value: str, types: dict[str, str], answer_letter: str,
            nota: bool, rng: np.random.Generator) -> tuple[list[str], str, dict[str, str]]:
    """Order the options so the answer gets ``answer_letter``; append NOTA in 5-option mode.

    Returns:
        options, answer letter, {letter: distractor type}.
    """
    others = [v for v in listed if v != answer_value]
    others = [others[i] for i in rng.permutation(len(others))]
    if answer_value == NOTA:
        options = others + [NOTA]
    else:
        slot = LETTERS.index(answer_letter)
        options = others[:slot] + [answer_value] + others[slot:]
        if nota:
            options.append(NOTA)
    letter = LETTERS[options.index(answer_value)]
    dist = {LETTERS[i]: types[v] for i, v in enumerate(options) if v in types}
    if nota and answer_value != NOTA:
        dist[LETTERS[len(options) - 1]] = "none_of_the_above"
    return options, letter, dist
