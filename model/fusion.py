"""Fusion of question, views and entities, and the set-invariant LM prefix built from it.

FusionTransformer: timm ViT blocks over [question tokens | frame tokens | entity tokens |
scene slots]. Only question tokens carry a position (question word order is meaningful);
the other parts get a type embedding only, so fusion is permutation-EQUIVARIANT in views.
PrefixReader: learned prefix slots cross-attend to that set (+ optionally every patch
token): a sum over keys, hence INVARIANT to view order, as the LM prefix must be.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import torch
from timm.models.vision_transformer import Block
from torch import nn

from model.attention import SlotReader, key_padding_bias, read_bias
from model.config import ModelConfig

QUESTION, FRAME, ENTITY, SLOT, PROJECTED = range(5)


class FusionTransformer(nn.Module):
    """timm Blocks over the concatenation of token groups.

    Args:
        cfg: ModelConfig (d_model, heads, mlp_ratio, dropout, fusion.layers / max_question_len).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d = cfg.d_model
        self.question_position = nn.Embedding(cfg.fusion.max_question_len, d)
        self.type_embedding = nn.Embedding(5, d)
        self.blocks = nn.ModuleList(
            Block(d, cfg.heads, mlp_ratio=cfg.mlp_ratio, qkv_bias=True, proj_drop=cfg.dropout)
            for _ in range(cfg.fusion.layers))
        self.norm = nn.LayerNorm(d)
        # The frame readers' type (fusion.frame_readers); created last, so that a model
        # without readers initialises exactly as before.
        self.read_type: Optional[nn.Parameter] = None
        if cfg.fusion.frame_readers:
            self.read_type = nn.Parameter(torch.randn(d) * 0.02)
        # The per-person track's type (fusion.track), created last for the same reason.
        self.track_type: Optional[nn.Parameter] = None
        if cfg.fusion.track:
            self.track_type = nn.Parameter(torch.randn(d) * 0.02)

    def forward(self, groups: Dict[str, torch.Tensor], masks: Dict[str, torch.Tensor]
                ) -> Dict[str, torch.Tensor]:
        """
        Args:
            groups: name -> (B, N_g, D) for names in ("question", "frame", "entity", "slot",
                "projected", "read" (only with fusion.frame_readers), "track" (only with
                fusion.track));
                missing names are skipped. "question" must be in word order.
            masks: name -> (B, N_g) bool, True = real token.
        Returns:
            name -> (B, N_g, D) fused tokens, same names and lengths.
        """
        type_ids = {"question": QUESTION, "frame": FRAME, "entity": ENTITY, "slot": SLOT,
                    "projected": PROJECTED}
        names: List[str] = [n for n in type_ids if n in groups]
        names += [n for n in ("read", "track") if n in groups]
        extra = {"read": self.read_type, "track": self.track_type}
        parts = []
        for name in names:
            kind = extra[name] if name in extra else self.type_embedding.weight[type_ids[name]]
            x = groups[name] + kind
            if name == "question":
                length = x.shape[1]
                x = x + self.question_position.weight[:length]
            parts.append(x)
        tokens = torch.cat(parts, dim=1)
        bias = key_padding_bias(torch.cat([masks[n] for n in names], dim=1)).to(tokens.dtype)
        for block in self.blocks:
            tokens = block(tokens, attn_mask=bias)
        tokens = self.norm(tokens)
        sizes = [groups[n].shape[1] for n in names]
        return dict(zip(names, torch.split(tokens, sizes, dim=1)))


class PrefixReader(nn.Module):
    """Learned prefix slots reading a token set; output projected to the LM width.

    Args:
        cfg: ModelConfig (fusion.prefix_tokens / prefix_layers, lm width).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.reader = SlotReader(cfg.d_model, cfg.heads, cfg.fusion.prefix_tokens,
                                 cfg.fusion.prefix_layers, cfg.mlp_ratio, cfg.dropout)
        self.to_lm = nn.Linear(cfg.d_model, cfg.lm_width)

    def forward(self, memory: torch.Tensor, mask: torch.Tensor,
                gate: Optional[torch.Tensor] = None) -> torch.Tensor:
        """
        Args:
            memory: (B, N, D) the set to read; mask: (B, N) bool.
            gate: optional (B, N) additive bias (<= 0) from the evidence head.
        Returns:
            (B, prefix_tokens, lm_width) prefix embeddings.
        """
        return self.to_lm(self.reader(memory, read_bias(mask, gate, memory.dtype)))


class BagOfFramesPrefix(nn.Module):
    """Fusion-off baseline: the prefix is the (gated) masked mean of frame tokens, plus the
    mean of entity tokens, each one LM token. No question-conditioned reading at all.

    Args:
        cfg: ModelConfig (d_model, lm width).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.to_lm = nn.Linear(cfg.d_model, cfg.lm_width)

    def forward(self, groups: List[torch.Tensor], masks: List[torch.Tensor],
                gates: List[Optional[torch.Tensor]]) -> torch.Tensor:
        """groups: list of (B, N_g, D); masks (B, N_g) bool; gates (B, N_g) or None
        -> (B, len(groups), lm_width)."""
        pooled = []
        for tokens, mask, gate in zip(groups, masks, gates):
            weight = mask.to(tokens.dtype)
            if gate is not None:
                weight = weight * gate.exp()  # gate is log(sigmoid): a weight in (0, 1)
            weight = weight / weight.sum(1, keepdim=True).clamp_min(1e-6)
            pooled.append(torch.einsum("bn,bnd->bd", weight, tokens))
        return self.to_lm(torch.stack(pooled, dim=1))
