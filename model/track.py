"""PersonTrack: the state of the person a question names, frame by frame, across views.

A temporal question names a person by description ("the person in the red shirt ... jump")
and carries no mark, so no entity token stands for that person. The track makes one:

1. a learned query reads the question (what person, what about them);
2. on every (view, frame) the conditioned query reads the frame's patch tokens, and a head
   classifies what it read into a per-frame state (``inputs/track.py``: ``unseen``,
   airborne or not, the hand waving or not, the body action, the place, ...);
3. the views are merged per frame, each weighted by how sure it is that it sees the person
   (1 - p(unseen)): a view that does not see the person on a frame gives way to one that does;
4. a small transformer over the frames (frame-index embedding) orders and counts the merged
   states; its T tokens join the fusion set (type "track") and a pooled token joins the LM
   prefix, a short path from the per-frame states to the answer.

The state head is trained on the generator's per-frame records (``loss.track``). With
``fusion.track_oracle`` the recorded states replace the predicted ones (where a record
exists): a diagnostic of what the rest of the model makes of perfect per-frame states, never
a model to report.
"""
from __future__ import annotations

from typing import Dict, Optional, Union

import torch
from timm.models.vision_transformer import Block
from torch import nn

from model.attention import CrossAttentionLayer, key_padding_bias
from model.config import ModelConfig
from model.view_encoder import PatchTokens, patch_tensor

MAX_FRAMES = 64  # size of the frame-index table


class PersonTrack(nn.Module):
    """Question-conditioned per-frame states of one person, merged over views.

    Args:
        cfg: ModelConfig (d_model, heads, mlp_ratio, dropout, fusion.track_layers).
        n_states: size of the state vocabulary (class 0 = unseen).
    """

    def __init__(self, cfg: ModelConfig, n_states: int):
        super().__init__()
        d = cfg.d_model
        self.n_states = n_states
        self.query = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.condition = CrossAttentionLayer(d, cfg.heads, cfg.mlp_ratio, cfg.dropout)
        self.read = CrossAttentionLayer(d, cfg.heads, cfg.mlp_ratio, cfg.dropout)
        self.state = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, n_states))
        self.state_embed = nn.Linear(n_states, d)
        self.frame_index = nn.Embedding(MAX_FRAMES, d)
        nn.init.normal_(self.frame_index.weight, std=0.02)
        self.blocks = nn.ModuleList(
            Block(d, cfg.heads, mlp_ratio=cfg.mlp_ratio, qkv_bias=True, proj_drop=cfg.dropout)
            for _ in range(cfg.fusion.track_layers))
        self.norm = nn.LayerNorm(d)
        self.pool_query = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pool = CrossAttentionLayer(d, cfg.heads, cfg.mlp_ratio, cfg.dropout)

    def forward(self, patch: Union[PatchTokens, torch.Tensor], frame_mask: torch.Tensor,
                question: torch.Tensor, question_mask: torch.Tensor,
                oracle: Optional[torch.Tensor] = None) -> Dict[str, torch.Tensor]:
        """
        Args:
            patch: (B, V, T, P, D) encoded patch tokens; frame_mask (B, V, T) bool.
            question: (B, L, D) question tokens (d_model); question_mask (B, L) bool.
            oracle: optional (B, V, T) recorded state ids (inputs/track.py; < 0 = no record):
                one-hot states replace the predicted ones where a record exists.
        Returns:
            "tokens" (B, T, D) and "mask" (B, T): one token per frame index;
            "pooled" (B, 1, D): the track read by a learned query;
            "state_logits" (B, V, T, S): the per-(view, frame) state classifier.
        """
        patch = patch_tensor(patch)
        b, v, t, p, d = patch.shape
        if t > MAX_FRAMES:
            raise ValueError(f"PersonTrack handles at most {MAX_FRAMES} frames, the batch has {t}")
        query = self.condition(self.query.expand(b, -1, -1), question, key_padding_bias(question_mask))
        queries = query[:, None, None].expand(b, v, t, 1, d).reshape(b * v * t, 1, d)
        read = self.read(queries, patch.reshape(b * v * t, p, d)).view(b, v, t, d)
        logits = self.state(read)  # (B, V, T, S)
        probs = logits.softmax(-1)
        if oracle is not None:
            known = oracle >= 0
            onehot = nn.functional.one_hot(oracle.clamp_min(0), self.n_states).to(probs.dtype)
            probs = torch.where(known.unsqueeze(-1), onehot, probs)
        # Merge the views of each frame, weighted by how sure each is that it sees the person;
        # the small floor keeps a frame no view sees well-defined (its state is then "unseen").
        weight = ((1.0 - probs[..., 0]) + 1e-3) * frame_mask.to(probs.dtype)  # (B, V, T)
        norm = weight.sum(1).clamp_min(1e-6)  # (B, T)
        state = torch.einsum("bvt,bvts->bts", weight, probs) / norm.unsqueeze(-1)
        merged = torch.einsum("bvt,bvtd->btd", weight, read) / norm.unsqueeze(-1)
        mask = frame_mask.any(1)  # (B, T)
        tokens = merged + self.state_embed(state) + self.frame_index.weight[:t]
        bias = key_padding_bias(mask).to(tokens.dtype)
        for block in self.blocks:
            tokens = block(tokens, attn_mask=bias)
        tokens = self.norm(tokens) * mask.unsqueeze(-1)
        pooled = self.pool(self.pool_query.expand(b, -1, -1), tokens, bias)
        return {"tokens": tokens, "mask": mask, "pooled": pooled, "state_logits": logits}
