"""Question-conditioned readers: what a frame shows about the question, and how well each
option fits what the model has read.

FrameReader: without marks (every temporal question, "How many people ...", "the person in
the red shirt ..."), the only tokens of a frame are its pooled token and, through RoIAlign,
nothing at all: no token says what one person in it is doing. The reader's queries first read
the question ("the person in the red shirt ... jump"), then each frame's patch tokens, giving
`frame_readers` tokens per frame about the part of the frame the question names. They join
the fusion set (type "read"), where time and camera, already in the patch tokens, let the
fusion count and order the per-frame states.

OptionReader: a direct score per option. Each option's words (with their order: "jumps, then
walks" is not "walks, then jumps") become one query, conditioned on the question, that reads
the fused set; an MLP turns what it read into a score added to the language head's
likelihood. Zero-initialised, so the scores start as the LM's. It is the one-hop path from
"what the model saw" to "which option": the LM likelihood path must learn to emit the
option's words from a prefix, which takes many more questions.
"""
from __future__ import annotations

from typing import Optional, Union

import torch
from timm.models.vision_transformer import Block
from torch import nn

from model.attention import CrossAttentionLayer, key_padding_bias, read_bias
from model.config import ModelConfig
from model.view_encoder import PatchTokens, patch_tensor


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(..., N, D), (..., N) bool -> (..., D); 0 where the mask is empty."""
    weight = mask.to(x.dtype).unsqueeze(-1)
    return (x * weight).sum(-2) / weight.sum(-2).clamp_min(1.0)


class FrameReader(nn.Module):
    """`cfg.fusion.frame_readers` question-conditioned tokens per frame.

    Args:
        cfg: ModelConfig (d_model, heads, mlp_ratio, dropout, fusion.frame_readers).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d = cfg.d_model
        self.queries = nn.Parameter(torch.randn(1, cfg.fusion.frame_readers, d) * 0.02)
        self.condition = CrossAttentionLayer(d, cfg.heads, cfg.mlp_ratio, cfg.dropout)
        self.read = CrossAttentionLayer(d, cfg.heads, cfg.mlp_ratio, cfg.dropout)
        self.norm = nn.LayerNorm(d)

    def forward(self, patch: Union[PatchTokens, torch.Tensor], frame_mask: torch.Tensor, question: torch.Tensor,
                question_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """
        Args:
            patch: (B, V, T, P, D) encoded patch tokens (a PatchTokens is built in full);
                frame_mask (B, V, T) bool.
            question: (B, L, D) question tokens (d_model); question_mask (B, L) bool.
        Returns:
            tokens (B, V * T * Q, D), frame-major (view, frame, query); mask (B, V * T * Q).
        """
        patch = patch_tensor(patch)
        b, v, t, p, d = patch.shape
        q = self.queries.shape[1]
        queries = self.condition(self.queries.expand(b, -1, -1), question,
                                 key_padding_bias(question_mask))  # (B, Q, D)
        queries = queries[:, None, None].expand(b, v, t, q, d).reshape(b * v * t, q, d)
        read = self.read(queries, patch.reshape(b * v * t, p, d))
        mask = frame_mask.unsqueeze(-1).expand(b, v, t, q).reshape(b, -1)
        tokens = self.norm(read).view(b, v * t * q, d) * mask.unsqueeze(-1)
        return tokens, mask


class OptionReader(nn.Module):
    """One score per option from the option's words reading the fused token set.

    Args:
        cfg: ModelConfig (d_model, heads, mlp_ratio, dropout).
        max_option_len: size of the option word-position table.
    """

    def __init__(self, cfg: ModelConfig, max_option_len: int = 32):
        super().__init__()
        d = cfg.d_model
        self.position = nn.Embedding(max_option_len, d)
        nn.init.normal_(self.position.weight, std=0.02)
        self.words = Block(d, cfg.heads, mlp_ratio=cfg.mlp_ratio, qkv_bias=True, proj_drop=cfg.dropout)
        self.question = nn.Linear(d, d)
        self.read = CrossAttentionLayer(d, cfg.heads, cfg.mlp_ratio, cfg.dropout)
        self.score = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.GELU(), nn.Linear(d, 1))
        nn.init.zeros_(self.score[-1].weight)
        nn.init.zeros_(self.score[-1].bias)

    def forward(self, option_tokens: torch.Tensor, option_mask: torch.Tensor, question: torch.Tensor,
                memory: torch.Tensor, memory_mask: torch.Tensor,
                gate: Optional[torch.Tensor] = None) -> torch.Tensor:
        """
        Args:
            option_tokens: (B, O, Lo, D) embedded option words (d_model); option_mask (B, O, Lo).
            question: (B, D) the pooled fused question.
            memory: (B, N, D) the fused set; memory_mask (B, N) bool; gate: (B, N) additive
                bias (<= 0) or None.
        Returns:
            (B, O) scores (0 at initialisation).
        """
        b, o, lo, d = option_tokens.shape
        if lo > self.position.num_embeddings:
            option_tokens, option_mask = option_tokens[:, :, :self.position.num_embeddings], \
                option_mask[:, :, :self.position.num_embeddings]
            lo = self.position.num_embeddings
        words = (option_tokens + self.position.weight[:lo]).reshape(b * o, lo, d)
        flat_mask = option_mask.reshape(b * o, lo)
        # Rows of padded options have no real word: let them attend to themselves.
        attend = flat_mask | ~flat_mask.any(-1, keepdim=True)
        words = self.words(words, attn_mask=key_padding_bias(attend).to(words.dtype))
        query = masked_mean(words, flat_mask).view(b, o, d) + self.question(question).unsqueeze(1)
        bias = read_bias(memory_mask, gate, memory.dtype)
        read = self.read(query.reshape(b * o, 1, d), memory.repeat_interleave(o, dim=0),
                         bias.repeat_interleave(o, dim=0))  # (B * O, 1, D)
        return self.score(read).view(b, o)
