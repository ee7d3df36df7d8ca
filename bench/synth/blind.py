"""A text-only ("blind") baseline: bag-of-words option scorer trained on the train split.

Each option is scored by a linear model over hashed features of its own words, its words
crossed with the question's words, the (task, option text) pair and its letter; a softmax
over the options is fit by SGD. If this beats chance, the text leaks the answer.
"""
from __future__ import annotations

import re
import zlib

import numpy as np

DIM = 1 << 18
_WORD = re.compile(r"[a-z0-9]+")


def _h(s: str) -> int:
    return zlib.crc32(s.encode()) % DIM


def option_features(sample: dict) -> list[np.ndarray]:
    """Hashed feature indices, one array per option."""
    q_words = sorted(set(_WORD.findall(sample["question"].lower())))
    feats = []
    for i, opt in enumerate(sample["options"]):
        letter = "ABCDEFGHIJ"[i]
        o_words = _WORD.findall(opt.lower())
        keys = [f"o:{w}" for w in o_words] + [f"q:{q}|o:{w}" for q in q_words for w in o_words]
        keys += [f"t:{sample['task']}|o:{opt}", f"L:{letter}", f"L:{letter}|t:{sample['task']}", f"o:{opt}"]
        feats.append(np.array(sorted({_h(k) for k in keys}), dtype=np.int64))
    return feats


class BlindClassifier:
    """Softmax over options of a linear bag-of-words score.

    SGD on a few thousand questions depends on the visiting order, so ``n_seeds`` models with
    different orders are trained and their weights averaged: the reported accuracy is then a
    property of the data, not of one shuffle.
    """

    def __init__(self, epochs: int = 6, lr: float = 0.1, l2: float = 1e-3, n_seeds: int = 3, seed: int = 0):
        self.w = np.zeros(DIM)
        self.epochs, self.lr, self.l2, self.n_seeds, self.seed = epochs, lr, l2, n_seeds, seed

    def _scores(self, feats: list[np.ndarray], w: np.ndarray | None = None) -> np.ndarray:
        w = self.w if w is None else w
        return np.array([w[f].sum() for f in feats])

    def fit(self, samples: list[dict]) -> "BlindClassifier":
        data = [(option_features(s), "ABCDEFGHIJ".index(s["answer"])) for s in samples]
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

    def predict(self, sample: dict) -> str:
        return "ABCDEFGHIJ"[int(np.argmax(self._scores(option_features(sample))))]

    def accuracy(self, samples: list[dict]) -> float:
        if not samples:
            return float("nan")
        return float(np.mean([self.predict(s) == s["answer"] for s in samples]))
