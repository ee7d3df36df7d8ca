"""Learned query slots that read a token set (DETR decoder / Perceiver style).

timm's ViT Block covers self-attention; this is the cross-attention counterpart. Reading
a set with learned queries is what makes outputs independent of the set's order: the
result is a sum over keys, and keys carry no index embedding.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from timm.models.vision_transformer import Block
from torch import nn

NEG_INF = -1e4  # large enough to zero a softmax weight, small enough to stay finite in fp16


def key_padding_bias(mask: torch.Tensor) -> torch.Tensor:
    """(B, N) bool, True = real -> (B, 1, 1, N) additive bias for scaled_dot_product_attention."""
    bias = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    return bias.masked_fill(~mask, NEG_INF)[:, None, None, :]


def read_bias(mask: torch.Tensor, gate: Optional[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    """(B, N) mask and optional (B, N) additive gate (<= 0) -> (B, 1, 1, N) attention bias."""
    bias = key_padding_bias(mask).to(dtype)
    if gate is not None:
        bias = bias + gate[:, None, None, :].to(dtype)
    return bias


class CrossAttentionLayer(nn.Module):
    """Queries attend to a memory set (with an additive bias), then a timm Block (self-attn + MLP).

    A learned "null" key is always present, so a query whose memory is entirely masked
    (no marks, no camera) still has a well-defined softmax instead of NaN.

    Args:
        dim: token width; heads: attention heads; mlp_ratio: MLP hidden / dim;
        dropout: dropout on projections.
    """

    def __init__(self, dim: int, heads: int, mlp_ratio: float = 2.0, dropout: float = 0.0):
        super().__init__()
        self.heads = heads
        self.norm_q = nn.LayerNorm(dim)
        self.norm_kv = nn.LayerNorm(dim)
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.proj = nn.Linear(dim, dim)
        self.null_kv = nn.Parameter(torch.zeros(1, 1, dim))
        self.drop = nn.Dropout(dropout)
        self.self_block = Block(dim, heads, mlp_ratio=mlp_ratio, qkv_bias=True,
                                proj_drop=dropout)

    def forward(self, queries: torch.Tensor, memory: torch.Tensor,
                bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        """
        Args:
            queries: (B, Q, D); memory: (B, N, D).
            bias: (B, 1 or H, 1 or Q, N) additive attention bias (padding -> NEG_INF,
                evidence gating -> log-sigmoid of relevance), or None.
        Returns:
            (B, Q, D) updated queries.
        """
        b, q_len, dim = queries.shape
        memory = torch.cat([self.null_kv.expand(b, 1, dim), memory], dim=1)
        if bias is not None:
            bias = F.pad(bias, (1, 0), value=0.0)
        head_dim = dim // self.heads
        q = self.q(self.norm_q(queries)).view(b, q_len, self.heads, head_dim).transpose(1, 2)
        k, v = self.kv(self.norm_kv(memory)).view(b, -1, 2, self.heads, head_dim).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=None if bias is None else bias.to(q.dtype))
        queries = queries + self.drop(self.proj(out.transpose(1, 2).reshape(b, q_len, dim)))
        # timm Block: slot-to-slot self-attention (slots agree on who reads what) + MLP.
        return self.self_block(queries)


class SlotReader(nn.Module):
    """`num_slots` learned queries reading a memory set through `layers` CrossAttentionLayers.

    Args:
        dim, heads, mlp_ratio, dropout: as CrossAttentionLayer; num_slots: output tokens;
        layers: depth.
    """

    def __init__(self, dim: int, heads: int, num_slots: int, layers: int,
                 mlp_ratio: float = 2.0, dropout: float = 0.0):
        super().__init__()
        self.slots = nn.Parameter(torch.randn(1, num_slots, dim) * 0.02)
        self.layers = nn.ModuleList(
            CrossAttentionLayer(dim, heads, mlp_ratio, dropout) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)

    def forward(self, memory: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        """memory (B, N, D), bias as CrossAttentionLayer -> slots (B, num_slots, D)."""
        slots = self.slots.expand(memory.shape[0], -1, -1)
        for layer in self.layers:
            slots = layer(slots, memory, bias)
        return self.norm(slots)
