"""The mark-fact head: what each mark token says of the marked person, scored in words.

For every mark token it scores each class of each fact (shirt colour, trouser colour, hat,
posture, each arm's state, the kind of object touched; inputs/mark_facts.py) against a class
vector, the projected mean LM embedding of the words that name the class ("red", "raising it
above the head"). Trained by ``loss.mark_facts`` on the generator's per-mark records, it reaches
the word embeddings the question and the options are made of, so the words an answer needs learn
what they look like from every mark of every training question, and the fused mark tokens keep
what their view shows in a form read against those words.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn


class MarkFactHead(nn.Module):
    """Per-fact queries of each token against the class vectors of that fact.

    Args:
        d_model: token width D.
        sizes: classes per fact (F facts, C = sum(sizes) classes, one fact after another).
    """

    def __init__(self, d_model: int, sizes: Sequence[int]):
        super().__init__()
        self.sizes = [int(n) for n in sizes]
        self.query = nn.Linear(d_model, d_model * len(self.sizes))
        self.bias = nn.Parameter(torch.zeros(sum(self.sizes)))
        fact_of_class = torch.repeat_interleave(torch.arange(len(self.sizes)), torch.tensor(self.sizes))
        self.register_buffer("fact_of_class", fact_of_class, persistent=False)

    def forward(self, tokens: torch.Tensor, classes: torch.Tensor) -> torch.Tensor:
        """tokens (..., D), classes (C, D) -> logits (..., C); each fact's softmax is its own slice."""
        d = tokens.shape[-1]
        queries = self.query(tokens).unflatten(-1, (len(self.sizes), d))  # (..., F, D)
        per_class = queries[..., self.fact_of_class, :]  # (..., C, D)
        return (per_class * classes).sum(-1) / math.sqrt(d) + self.bias
