"""Letter baselines that never look at images or text: they set the floor of every table.

- ``random``   a seeded uniform letter per query (hash of seed and query key, so resuming or
               batching differently gives the same letters).
- ``first``    always "A": exposes a benchmark whose answers pile up on the first letter.
- ``majority`` the most frequent answer letter among samples with the same number of
               options, counted on ``prior`` (a benchmark folder, e.g. the train split) or,
               when empty, on the evaluated benchmark itself (an upper bound on letter bias).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from bench.format import Benchmark, load_benchmark
from bench.protocol import stable_hash
from bench.constants import LETTERS
from eval.adapters.base import ModelAdapter, Request, Response
from eval.adapters.registry import register_model


@register_model("random")
class RandomLetter(ModelAdapter):
    """A seeded uniform letter per query; its accuracy is chance."""
    blind = True

    @dataclass
    class Args:
        seed: int = 0  # letters are a hash of (seed, query key)

    def generate(self, requests: list[Request]) -> list[Response]:
        return [Response(text=LETTERS[stable_hash("random", self.args.seed, r.key) % len(r.options)])
                for r in requests]


@register_model("first")
class FirstLetter(ModelAdapter):
    """Always "A": exposes answers piled on the first letter."""
    blind = True

    def generate(self, requests: list[Request]) -> list[Response]:
        return [Response(text="A") for _ in requests]


@register_model("majority")
class MajorityLetter(ModelAdapter):
    """The most frequent answer letter per number of options (on --model-arg prior=DIR)."""
    blind = True

    @dataclass
    class Args:
        prior: str = ""  # benchmark folder to count answer letters on; "" = the evaluated one

    def __init__(self, args=None):
        super().__init__(args)
        self.by_n_options: dict[int, str] = {}

    def prepare(self, benchmark: Benchmark) -> None:
        source = load_benchmark(self.args.prior, check_images=False) if self.args.prior else benchmark
        counts: dict[int, Counter] = {}
        for s in source:
            counts.setdefault(len(s.options), Counter())[s.answer] += 1
        # Ties go to the earlier letter so the baseline is deterministic.
        self.by_n_options = {n: min(c, key=lambda x: (-c[x], x)) for n, c in counts.items()}

    def generate(self, requests: list[Request]) -> list[Response]:
        return [Response(text=self.by_n_options.get(len(r.options), "A")) for r in requests]
