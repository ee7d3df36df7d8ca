"""A text-only ("blind") baseline: bag-of-words option scorer trained on the train split.

Each option is scored by a linear model over hashed features of its own words, its words
crossed with the question's words, the (task, option text) pair and its letter; a softmax
over the options is fit by SGD. If this beats chance, the text leaks the answer.

``option_prior_features`` is a lower-capacity probe of the same kind (``OptionPriorProbe``):
it sees only the *shape* of each option relative to the others of its question (its length,
its last word (an object kind), how many other options share each of its slots ("from X" /
"to Y", the k-th action) and how much it overlaps with them, i.e. whether it is the
"consensus" option), each crossed with the task. Structural leaks (e.g. "the answer shares
its start with one option and its end with another", "2-action options are right more
often") show up here on a few hundred questions, long before the bag of words finds them.
"""
from __future__ import annotations

import re
import zlib

import numpy as np

from bench.constants import LETTERS, NOTA
from bench.format import Sample

DIM = 1 << 18
_WORD = re.compile(r"[a-z0-9]+")


def _h(s: str) -> int:
    return zlib.crc32(s.encode()) % DIM


def option_features(sample: Sample) -> list[np.ndarray]:
    """Hashed feature indices, one array per option."""
    q_words = sorted(set(_WORD.findall(sample.question.lower())))
    feats = []
    for i, opt in enumerate(sample.options):
        letter = LETTERS[i]
        o_words = _WORD.findall(opt.lower())
        keys = [f"o:{w}" for w in o_words] + [f"q:{q}|o:{w}" for q in q_words for w in o_words]
        keys += [f"t:{sample.task}|o:{opt}", f"L:{letter}", f"L:{letter}|t:{sample.task}", f"o:{opt}"]
        feats.append(np.array(sorted({_h(k) for k in keys}), dtype=np.int64))
    return feats


_SLOT = re.compile(r", then | to |^from ")


def _slots(opt: str) -> list[str]:
    """An option's parts: the actions of a sequence, the ends of a walk, else the whole text."""
    return [p.strip() for p in _SLOT.split(opt.lower()) if p.strip()]


def option_prior_features(sample: Sample) -> list[np.ndarray]:
    """Option-only structural features (no question words, no letters), one array per option."""
    task = sample.task
    return [np.array(sorted({_h(k) for k in keys + [f"t:{task}|{k}" for k in keys]}), dtype=np.int64)
            for keys in option_prior_keys(sample.options)]


def option_prior_keys(options: list[str]) -> list[list[str]]:
    """The (unhashed) keys of ``option_prior_features``, one list per option."""
    opts = [o for o in options if o != NOTA]
    words = [set(_WORD.findall(o.lower())) for o in opts]
    slots = [_slots(o) for o in opts]
    overlap = [sum(len(w & x) for j, x in enumerate(words) if j != i) for i, w in enumerate(words)]
    ranks = {v: r for r, v in enumerate(sorted(set(overlap), reverse=True))}
    feats = []
    for opt in options:
        if opt == NOTA:
            keys = ["nota"]
        else:
            i = opts.index(opt)
            o_words = _WORD.findall(opt.lower())
            keys = [f"nw:{len(o_words)}", f"ns:{len(slots[i])}", f"last:{o_words[-1] if o_words else ''}",
                    f"ovl_rank:{ranks[overlap[i]]}", f"ovl_top:{overlap[i] == max(overlap)}"]
            shared = [sum(len(s) > k and s[k] == slots[i][k] for j, s in enumerate(slots) if j != i)
                      for k in range(len(slots[i]))]
            keys += [f"slot{k}_shared:{n}" for k, n in enumerate(shared[:3])]
            keys += [f"slots_shared:{'/'.join(map(str, shared[:3]))}", f"slot_any_shared:{sum(n > 0 for n in shared)}"]
            if len(slots[i]) >= 2:
                keys.append(f"slotlast_shared:{shared[-1]}")
        feats.append(keys)
    return feats


STRUCT_PREFIXES = ("ns:", "ovl_rank:", "ovl_top:", "slot", "slots_shared:")


def structure_signature(keys: list[str]) -> str:
    """An option's structural keys (slots, sharing, overlap rank; not its words) as one string."""
    return "|".join(sorted(k for k in keys if k.startswith(STRUCT_PREFIXES)))


class BlindClassifier:
    """Softmax over options of a linear bag-of-words score.

    SGD on a few thousand questions depends on the visiting order, so ``n_seeds`` models with
    different orders are trained and their weights averaged: the reported accuracy is then a
    property of the data, not of one shuffle.
    """

    features = staticmethod(option_features)

    def __init__(self, epochs: int = 6, lr: float = 0.1, l2: float = 1e-3, n_seeds: int = 3, seed: int = 0):
        self.w = np.zeros(DIM)
        self.epochs, self.lr, self.l2, self.n_seeds, self.seed = epochs, lr, l2, n_seeds, seed

    def _scores(self, feats: list[np.ndarray], w: np.ndarray | None = None) -> np.ndarray:
        w = self.w if w is None else w
        return np.array([w[f].sum() for f in feats])

    def fit(self, samples: list[Sample]) -> "BlindClassifier":
        data = [(self.features(s), LETTERS.index(s.answer)) for s in samples]
        total = np.zeros(DIM)
        for k in range(self.n_seeds):
            w = np.zeros(DIM)
            rng = np.random.default_rng([self.seed, k])
            for _ in range(self.epochs):
                for i in rng.permutation(len(data)):
                    feats, y = data[i]
                    s = self._scores(feats, w)
                    p = np.exp(s - s.max())
                    p /= p.sum()
                    for j, f in enumerate(feats):
                        g = p[j] - (1.0 if j == y else 0.0)
                        w[f] -= self.lr * (g + self.l2 * w[f])
            total += w
        self.w = total / self.n_seeds
        return self

    def predict(self, sample: Sample) -> str:
        return LETTERS[int(np.argmax(self._scores(self.features(sample))))]

    def accuracy(self, samples: list[Sample]) -> float:
        if not samples:
            return float("nan")
        return float(np.mean([self.predict(s) == s.answer for s in samples]))


class OptionPriorProbe(BlindClassifier):
    """The blind model's softmax over ``option_prior_features`` only: can the *form* of the
    options (not their words) pick the answer? Fit on train, scored on test; near chance
    when options carry no prior."""

    features = staticmethod(option_prior_features)
