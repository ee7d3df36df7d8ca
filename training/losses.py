"""The entity reasoner's criterion: named loss terms and their weights (``LossConfig``).

    answer   cross-entropy over the options
    pointer  BCE of the pointer against the evidence spans' entities (every task has them)
    assoc    BCE of the association logits against "same renderer id", over every pair of real
             sightings of one kind in different images (a detection that matches no true
             entity, id -1, has no target)
    count    smooth L1 of the soft distinct count against the answer's number, on the questions
             whose answer is the number of distinct pointed people (``SET_COUNT_TASKS``)
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bench.format import Sample

# tasks whose answer is the number of distinct pointed people: the distinct count's target
SET_COUNT_TASKS = ("dedup_count", "count_in_view", "action_count")


def count_target(sample: Sample) -> float:
    """The distinct count's target of a sample: its answer's number, or -1 (no target)."""
    if sample.task not in SET_COUNT_TASKS:
        return -1.0
    try:
        return float(sample.options[sample.answer_index])
    except ValueError:  # "None of the above": no number to count to
        return -1.0


class EntityCriterion(nn.Module):
    """Args: cfg with the weights ``answer``, ``pointer``, ``assoc``, ``count`` (training.config.LossConfig)."""

    def __init__(self, cfg):
        super().__init__()
        self.weights = {"answer": cfg.answer, "pointer": cfg.pointer, "assoc": cfg.assoc, "count": cfg.count}

    def forward(self, out: dict[str, torch.Tensor], batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Each term (unweighted) and ``loss``, their weighted sum."""
        answer = F.cross_entropy(out["option_logits"], batch["answer"])
        zero = answer * 0
        mask = batch["entity_mask"]
        pointer = F.binary_cross_entropy_with_logits(out["pointer_logits"][mask], batch["pointer"][mask])
        ids, kind = batch["entity_id"], batch["kind"]
        known = mask & (ids >= 0)
        pair = known.unsqueeze(-1) & known.unsqueeze(-2) & (kind.unsqueeze(-1) == kind.unsqueeze(-2))
        pair &= ~torch.eye(mask.shape[1], dtype=torch.bool, device=mask.device)
        same = (ids.unsqueeze(-1) == ids.unsqueeze(-2)).float()
        assoc = F.binary_cross_entropy_with_logits(out["assoc_logits"][pair], same[pair]) if pair.any() else zero
        target = batch.get("count_target", torch.full_like(out["distinct_count"], -1.0))
        counted = target >= 0
        count = (F.smooth_l1_loss(out["distinct_count"][counted], target[counted], beta=0.5)
                 if counted.any() else zero)
        terms = {"answer": answer, "pointer": pointer, "assoc": assoc, "count": count}
        terms["loss"] = sum((self.weights[k] * v for k, v in terms.items() if self.weights[k] > 0), zero)
        return terms
