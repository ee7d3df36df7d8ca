"""Verification over time: which answers a set of views leaves open about a person's timeline.

A temporal question is about one person's *label sequence* over the T frames (one label per
frame, e.g. airborne or not, the landmark the person stands at, the hand action). A
``grammar`` (stored in ``facts``) says which sequences are possible at all, e.g. "each jump is
one frame and jumps are never on adjacent frames" or "2-3 distinct actions of >= 2 frames".
Each view contributes, per frame, what it saw (nothing when the person or the limb is not
visible there). The answers still possible for a set of views are those of the grammar's
sequences that agree with every view on every frame.

Grammars are small (at most ~1,000 sequences for T = 8), enumerated once and cached, and the
agreement test is one vectorised lookup, so ``bench check`` re-verifies quickly from JSON.
"""
from __future__ import annotations

import itertools
import json
from functools import lru_cache

import numpy as np

from bench.synth.tasks_common import angle_deg

BODY_TEXT = {"walk": "walks", "jump": "jumps", "squat": "squats", "sit": "sits down"}
HAND_TEXT = {"raise_l": "raises the left hand", "raise_r": "raises the right hand",
             "wave_l": "waves the left hand", "wave_r": "waves the right hand"}
ARM_STATES = {"rest": ("down", "down"), "raise_l": ("raised", "down"), "raise_r": ("down", "raised"),
              "wave_l": ("wave", "down"), "wave_r": ("down", "wave")}


def path_text(start: str, end: str) -> str:
    return f"from the {start} to the {end}"


def sequence_text(labels: list[str]) -> str:
    return ", then ".join(BODY_TEXT[x] for x in labels)


def _compositions(total: int, parts: int, mins: list[int]):
    """Tuples of ``parts`` non-negative lengths summing to ``total`` with lengths >= ``mins``."""
    free = total - sum(mins)
    if free < 0:
        return
    for cut in itertools.combinations(range(free + parts - 1), parts - 1):
        bounds = (-1,) + cut + (free + parts - 1,)
        yield tuple(bounds[i + 1] - bounds[i] - 1 + mins[i] for i in range(parts))


def _sequences(g: dict) -> tuple[list[str], list[list[str]], list[str]]:
    """(label alphabet, label sequences, answer per sequence) of a grammar."""
    T, kind = g["T"], g["kind"]
    seqs, answers = [], []
    if kind == "events":  # one-frame repetitions, never adjacent; the answer is their count
        for bits in itertools.product("01", repeat=T):
            if "11" not in "".join(bits):
                seqs.append(list(bits))
                answers.append(str(bits.count("1")))
        return ["0", "1"], seqs, answers
    vocab, m = list(g["vocab"]), g.get("min_len", 2)
    if kind == "path":  # stand at X, walk (transit), stand at Y
        for a, t, b in _compositions(T, 3, [m, 1, m]):
            for x, y in itertools.permutations(vocab, 2):
                seqs.append([x] * a + ["transit"] * t + [y] * b)
                answers.append(path_text(x, y))
        return vocab + ["transit"], seqs, answers
    if kind == "segments":  # 2-3 distinct actions of >= m frames each, back to back
        for n in range(g["min_segments"], g["max_segments"] + 1):
            for lengths in _compositions(T, n, [m] * n):
                for labels in itertools.permutations(vocab, n):
                    seqs.append([x for x, k in zip(labels, lengths) for _ in range(k)])
                    answers.append(sequence_text(list(labels)))
        return vocab, seqs, answers
    if kind == "hand_actions":  # rests around 1..max distinct actions of >= m frames; the answer is the first
        for n in range(1, g["max_actions"] + 1):
            for lengths in _compositions(T, 2 * n + 1, [0] + [m, 0] * n):
                for acts in itertools.permutations(vocab, n):
                    seq = ["rest"] * lengths[0]
                    for i, x in enumerate(acts):
                        seq += [x] * lengths[2 * i + 1] + ["rest"] * lengths[2 * i + 2]
                    seqs.append(seq)
                    answers.append(HAND_TEXT[acts[0]])
        return vocab + ["rest"], seqs, answers
    if kind == "touch":  # one touch of one object lasting >= m frames; the answer is the object
        for a, k, b in _compositions(T, 3, [0, m, 0]):
            for x in vocab:
                seqs.append(["none"] * a + [x] * k + ["none"] * b)
                answers.append(x)
        return vocab + ["none"], seqs, answers
    raise ValueError(f"unknown grammar kind {kind!r}")


@lru_cache(maxsize=256)
def _compiled(key: str) -> tuple[list[str], np.ndarray, list[str]]:
    alphabet, seqs, answers = _sequences(json.loads(key))
    index = {x: i for i, x in enumerate(alphabet)}
    return alphabet, np.array([[index[x] for x in s] for s in seqs], dtype=np.int64), answers


def compiled(grammar: dict) -> tuple[list[str], np.ndarray, list[str]]:
    """(alphabet, sequences as label indices (N, T), answer per sequence), cached."""
    return _compiled(json.dumps(grammar, sort_keys=True))


def grammar_answers(grammar: dict) -> list[str]:
    """Every answer the grammar allows (the value-level domain), sorted."""
    return sorted(set(compiled(grammar)[2]))


def values(grammar: dict, mask: np.ndarray) -> set[str]:
    """Answers of the sequences whose label on every frame f is allowed by ``mask[f]`` (T, L)."""
    _, seqs, answers = compiled(grammar)
    ok = mask[np.arange(seqs.shape[1])[None, :], seqs].all(axis=1)
    return {answers[i] for i in np.flatnonzero(ok)}


def label_mask(table: dict, facts: dict, views: list[str]) -> np.ndarray:
    """Per-frame allowed labels when a view that sees the person reports the label itself.

    ``table[v]["obs"][f]`` is the label view v saw on frame f, or None.
    """
    alphabet = compiled(facts["grammar"])[0]
    mask = np.ones((facts["grammar"]["T"], len(alphabet)), dtype=bool)
    for v in views:
        for f, lab in enumerate(table[v]["obs"]):
            if lab is not None:
                mask[f] &= np.array([x == lab for x in alphabet])
    return mask


def arms_mask(table: dict, facts: dict, views: list[str]) -> np.ndarray:
    """Hand actions: ``obs[f]`` = [left arm state or None, right arm state or None]; a label is
    allowed on a frame when its arm states agree with every arm some view saw there."""
    alphabet = compiled(facts["grammar"])[0]
    mask = np.ones((facts["grammar"]["T"], len(alphabet)), dtype=bool)
    for v in views:
        for f, arms in enumerate(table[v]["obs"]):
            if arms is None:
                continue
            for side, state in enumerate(arms):
                if state is not None:
                    mask[f] &= np.array([ARM_STATES[x][side] == state for x in alphabet])
    return mask


def touch_mask(table: dict, facts: dict, views: list[str]) -> np.ndarray:
    """Hand-object contact per frame, as in the spatial contact tasks: a view that sees the hand
    ``separated`` from an object rules that object out on that frame; two views at least
    ``confirm_angle`` apart that both see the hand ``overlap`` an object confirm the touch.
    ``obs[f]`` = {object name: status} from a view that sees the person, else None."""
    alphabet = compiled(facts["grammar"])[0]
    T = facts["grammar"]["T"]
    mask = np.ones((T, len(alphabet)), dtype=bool)
    for f in range(T):
        seen = [(table[v]["dir"], table[v]["obs"][f]) for v in views if table[v]["obs"][f] is not None]
        for i, x in enumerate(alphabet):
            if x != "none" and any(st.get(x) == "separated" for _, st in seen):
                mask[f, i] = False
        for i, x in enumerate(alphabet):
            dirs = [d for d, st in seen if st.get(x) == "overlap"]
            if any(angle_deg(a, b) >= facts["confirm_angle"] for k, a in enumerate(dirs) for b in dirs[k + 1:]):
                mask[f] = False
                mask[f, i] = True
    return mask
