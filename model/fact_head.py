"""The mark-fact head: what each mark token says of the marked person, scored in words.

For every mark token it scores each class of each fact (shirt colour, trouser colour, hat,
posture, each arm's state, the kind of object touched; inputs/mark_facts.py) against a class
vector, the projected mean LM embedding of the words that name the class ("red", "raising it
above the head"). Trained by ``loss.mark_facts`` on the generator's per-mark records, it reaches
the word embeddings the question and the options are made of, so the words an answer needs learn
what they look like from every mark of every training question, and the fused mark tokens keep
what their view shows in a form read against those words.

The score is a cosine with a learned temperature, against class vectors centred per fact: at
init the projected class words are mostly ``token_proj``'s bias, shared by every class, and a
scaled dot product left the head at the majority classes (docs/experiments.md, 2026-12-06, 99a74f2).
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

INIT_SCALE = 10.0  # the cosine's initial temperature (CLIP's is 1 / 0.07 = 14.3)


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
        self.log_scale = nn.Parameter(torch.tensor(math.log(INIT_SCALE)))
        fact_of_class = torch.repeat_interleave(torch.arange(len(self.sizes)), torch.tensor(self.sizes))
        self.register_buffer("fact_of_class", fact_of_class, persistent=False)

    def centred(self, classes: torch.Tensor) -> torch.Tensor:
        """(C, D) class vectors minus the mean class vector of their own fact."""
        sums = classes.new_zeros(len(self.sizes), classes.shape[-1]).index_add(0, self.fact_of_class, classes)
        counts = torch.tensor(self.sizes, dtype=classes.dtype, device=classes.device).unsqueeze(-1)
        return classes - (sums / counts)[self.fact_of_class]

    def forward(self, tokens: torch.Tensor, classes: torch.Tensor) -> torch.Tensor:
        """tokens (..., D), classes (C, D) -> logits (..., C); each fact's softmax is its own slice."""
        d = tokens.shape[-1]
        queries = F.normalize(self.query(tokens).unflatten(-1, (len(self.sizes), d)), dim=-1)  # (..., F, D)
        per_class = queries[..., self.fact_of_class, :]  # (..., C, D)
        keys = F.normalize(self.centred(classes), dim=-1)
        return self.log_scale.exp() * (per_class * keys).sum(-1) + self.bias
