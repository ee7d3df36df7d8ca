"""Cross-view entity attention: entity tokens attend to each other with a geometric bias,
then learned scene-entity queries (DETR / MvP style) read all of them.

Bias between tokens i and j, per head h:
    pair_bias[h, type(i, j)] - softplus(w_h) * |floor_i - floor_j|   (second term only when
                                                                     both feet points are known)
type: same (view, frame) / same view other frame / other view / itself. Two marks in one frame
are different people; tokens standing on the same floor spot in two views are likely one person.
Types are relations, not indices, so the bias does not depend on view order.
"""
from __future__ import annotations

from typing import Dict

import torch
import torch.nn.functional as F
from timm.models.vision_transformer import Block
from torch import nn

from model.attention import SlotReader, key_padding_bias
from model.config import ModelConfig

SAME_FRAME, SAME_VIEW, OTHER_VIEW, SELF = range(4)


def pair_types(index: torch.Tensor) -> torch.Tensor:
    """index (B, N, 3) (view, frame, mark) -> (B, N, N) long relation type."""
    same_view = index[:, :, None, 0] == index[:, None, :, 0]
    same_frame = same_view & (index[:, :, None, 1] == index[:, None, :, 1])
    types = torch.full(same_view.shape, OTHER_VIEW, dtype=torch.long, device=index.device)
    types = types.masked_fill(same_view, SAME_VIEW).masked_fill(same_frame, SAME_FRAME)
    eye = torch.eye(index.shape[1], dtype=torch.bool, device=index.device)
    return types.masked_fill(eye, SELF)


class EntityAttention(nn.Module):
    """Geometry-biased transformer over entity tokens + scene-entity slots.

    Args:
        cfg: ModelConfig (d_model, heads, entity.layers / num_slots / slot_layers, camera switch).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d, heads = cfg.d_model, cfg.heads
        self.heads = heads
        self.pair_bias = nn.Parameter(torch.zeros(heads, 4))
        # Multi-scale start: head h halves its distance tolerance; softplus keeps it decaying.
        self.floor_weight = (nn.Parameter(torch.log(torch.expm1(0.5 * 2.0 ** torch.arange(heads).float())))
                             if cfg.camera.enabled else None)
        self.blocks = nn.ModuleList(
            Block(d, heads, mlp_ratio=cfg.mlp_ratio, qkv_bias=True, proj_drop=cfg.dropout)
            for _ in range(cfg.entity.layers))
        self.slots = SlotReader(d, heads, cfg.entity.num_slots, cfg.entity.slot_layers,
                                cfg.mlp_ratio, cfg.dropout)
        self.assign_q = nn.Linear(d, d)
        self.assign_k = nn.Linear(d, d)

    def attention_bias(self, entities: Dict[str, torch.Tensor]) -> torch.Tensor:
        """-> (B, H, N, N) additive bias (geometry + relation type + key padding)."""
        types = pair_types(entities["index"])  # (B, N, N)
        bias = self.pair_bias[:, types].permute(1, 0, 2, 3)  # (B, H, N, N)
        if self.floor_weight is not None:
            xy, ok = entities["floor_xy"], entities["floor_ok"]
            dist = torch.cdist(xy, xy)  # (B, N, N)
            both = ok[:, :, None] & ok[:, None, :]
            weight = F.softplus(self.floor_weight)[None, :, None, None]
            bias = bias - weight * (dist * both).unsqueeze(1)
        return bias + key_padding_bias(entities["mask"])

    def forward(self, entities: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """
        Args:
            entities: EntityTokenizer output (tokens (B, N, D), mask, floor_xy, floor_ok, index).
        Returns:
            "tokens" (B, N, D) contextualised entity tokens (padding zeroed),
            "slots" (B, S, D) scene-entity slots,
            "assign_logits" (B, N, S) token-to-slot logits; padding rows are 0.
        """
        tokens, mask = entities["tokens"], entities["mask"]
        bias = self.attention_bias(entities).to(tokens.dtype)
        for block in self.blocks:
            tokens = block(tokens, attn_mask=bias)
        tokens = tokens * mask.unsqueeze(-1)
        slots = self.slots(tokens, key_padding_bias(mask).to(tokens.dtype))
        scale = tokens.shape[-1] ** -0.5
        assign = torch.einsum("bnd,bsd->bns", self.assign_q(tokens), self.assign_k(slots)) * scale
        return {"tokens": tokens, "slots": slots, "assign_logits": assign * mask.unsqueeze(-1)}
