"""Evidence head: how relevant each (view, frame) and each entity token is to the question.

The logits are supervised by evidence spans (training/) and, when gating is on, become an
additive attention bias log(sigmoid(logit)) on what the LM prefix reads. Sigmoid, not
softmax: several views can be necessary at once (MVN questions), and an irrelevant extra
view should be pushed towards 0 without stealing weight from the others.
"""
from __future__ import annotations

from typing import Dict

import torch
import torch.nn.functional as F
from torch import nn

from model.attention import NEG_INF


class EvidenceHead(nn.Module):
    """Scores fused frame tokens and fused entity tokens.

    Args:
        d_model: token width.
    """

    def __init__(self, d_model: int):
        super().__init__()
        self.frame = nn.Sequential(nn.LayerNorm(d_model), nn.Linear(d_model, 1))
        self.entity = nn.Sequential(nn.LayerNorm(d_model), nn.Linear(d_model, 1))
        # Start open (sigmoid(2) ~ 0.88): gating must not starve the prefix before it learns.
        for head in (self.frame, self.entity):
            nn.init.normal_(head[1].weight, std=0.01)
            nn.init.constant_(head[1].bias, 2.0)

    def forward(self, frame: torch.Tensor, frame_mask: torch.Tensor, entity: torch.Tensor,
                entity_mask: torch.Tensor) -> Dict[str, torch.Tensor]:
        """
        Args:
            frame: (B, V, T, D), frame_mask (B, V, T) bool;
            entity: (B, N, D), entity_mask (B, N) bool.
        Returns:
            "frame": (B, V, T) logits, NEG_INF at padding;
            "entity": (B, N) logits, NEG_INF at padding.
        """
        frame_logits = self.frame(frame).squeeze(-1).masked_fill(~frame_mask, NEG_INF)
        entity_logits = self.entity(entity).squeeze(-1).masked_fill(~entity_mask, NEG_INF)
        return {"frame": frame_logits, "entity": entity_logits}


def gate_bias(logits: torch.Tensor) -> torch.Tensor:
    """Relevance logits (any shape) -> additive attention bias log(sigmoid(logit)) <= 0."""
    return F.logsigmoid(logits)
