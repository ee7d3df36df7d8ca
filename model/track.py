"""PersonTrack: the state of the person a question names, frame by frame, across views.

A temporal question names a person by description ("the person in the red shirt ... jump")
and carries no mark, so no entity token stands for that person. The track makes one:

1. a learned query reads the question (what person, what about them);
2. on every (view, frame) each question word scores each patch (per head; a patch scores as
   its best word, so "red" is not diluted by the other words), the best-scored patches are
   read, and a head classifies what was read (with the question's query) into a per-frame
   state (``inputs/track.py``: ``unseen``, airborne or not, the hand waving or not, the body
   action, the place, ...);
3. the views are merged per frame, each weighted by how sure it is that it sees the person
   (1 - p(unseen)): a view that does not see the person on a frame gives way to one that does;
4. a small transformer over the frames (frame-index embedding) orders the merged states; its
   T tokens join the fusion set (type "track"); a pooled token (what a learned query reads
   from them, plus an embedding of how many frames show each state) closes the LM prefix:
   the last context token, the short path from the per-frame states to the answer.

The state head is trained on the generator's per-frame records (``loss.track``). With
``fusion.track_oracle`` the recorded states replace the predicted ones (where a record
exists): a diagnostic of what the rest of the model makes of perfect per-frame states, never
a model to report.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple, Union

import torch
from timm.models.vision_transformer import Block
from torch import nn
from torchvision.ops import roi_align

from model.attention import CrossAttentionLayer, key_padding_bias
from model.config import ModelConfig
from model.view_encoder import PatchTokens, patch_tensor

MAX_FRAMES = 64  # size of the frame-index table
MOTION_FEATURES = 9  # PersonTrack.motion: found, centre (2), spread (2), move in and out (2 + 2)
GEOMETRY_FEATURES = 5  # PersonTrack.geometry: found, centre (2), spread (2); the box head's input


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
        # Locating the named person: every question word scores every cell (per head), a
        # cell's score is its best word's. A single query that first pools the question
        # dilutes the one word that names the person ("red") among a dozen others.
        self.heads = cfg.heads
        self.word_key = nn.Linear(d, d)
        self.cell_key = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d))
        self.cell_value = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d))
        self.located = nn.Linear(d, d)
        self.state = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.GELU(), nn.Linear(d, n_states))
        # The states as an embedding table (N(0, 1), like nn.Embedding): at nn.Linear's default
        # scale a one-hot state was ~5 % of the norm of the token it is added to.
        self.state_embed = nn.Linear(n_states, d, bias=False)
        nn.init.normal_(self.state_embed.weight, std=1.0)
        # How many frames show each state (the merged states summed over frames): counting
        # questions ask for exactly that, and attention pooling only averages.
        self.count_embed = nn.Linear(n_states, d, bias=False)
        nn.init.normal_(self.count_embed.weight, std=0.3)
        self.frame_index = nn.Embedding(MAX_FRAMES, d)
        nn.init.normal_(self.frame_index.weight, std=0.02)
        self.blocks = nn.ModuleList(
            Block(d, cfg.heads, mlp_ratio=cfg.mlp_ratio, qkv_bias=True, proj_drop=cfg.dropout)
            for _ in range(cfg.fusion.track_layers))
        self.norm = nn.LayerNorm(d)
        self.pool_query = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pool = CrossAttentionLayer(d, cfg.heads, cfg.mlp_ratio, cfg.dropout)
        # Created last, so a run without them initialises as it did before the options existed.
        self.motion_embed = nn.Linear(MOTION_FEATURES, d) if cfg.fusion.track_motion else None
        self.word_norm = nn.LayerNorm(d) if cfg.fusion.track_word_norm else None
        self.box_head: Optional[nn.Module] = None
        self.box_read: Optional[nn.Module] = None
        if cfg.fusion.track_box_read:
            geo = GEOMETRY_FEATURES
            self.box_head = nn.Sequential(nn.LayerNorm(d + geo), nn.Linear(d + geo, d), nn.GELU(), nn.Linear(d, 4))
            self.box_read = nn.Sequential(nn.LayerNorm(4 * d), nn.Linear(4 * d, d))
        self.box_detach = cfg.fusion.track_box_detach  # loss.track_box trains the box head alone

    def forward(self, patch: Union[PatchTokens, torch.Tensor], frame_mask: torch.Tensor,
                question: torch.Tensor, question_mask: torch.Tensor,
                oracle: Optional[torch.Tensor] = None,
                teacher_box: Optional[Tuple[torch.Tensor, torch.Tensor]] = None) -> Dict[str, torch.Tensor]:
        """
        Args:
            patch: (B, V, T, P, D) encoded patch tokens; frame_mask (B, V, T) bool.
            question: (B, L, D) question tokens (d_model); question_mask (B, L) bool.
            oracle: optional (B, V, T) recorded state ids (inputs/track.py; < 0 = no record):
                one-hot states replace the predicted ones where a record exists.
            teacher_box: optional (box (B, V, T, 4), flag (B, V, T)) of inputs/track.py
                track_boxes: with fusion.track_box_read, the box read where flag is 1 (training).
        Returns:
            "tokens" (B, T, D) and "mask" (B, T): one token per frame index;
            "pooled" (B, 1, D): the track read by a learned query, plus an embedding of how
                many frames show each merged state;
            "state_logits" (B, V, T, S): the per-(view, frame) state classifier;
            "locate" (B, V, T, 1 + P): where the locator looked (``locate``);
            "box" (B, V, T, 4): the predicted box of the person, unit x0 y0 x1 y1 (only with
                fusion.track_box_read).
        """
        patch = patch_tensor(patch)
        b, v, t, p, d = patch.shape
        if t > MAX_FRAMES:
            raise ValueError(f"PersonTrack handles at most {MAX_FRAMES} frames, the batch has {t}")
        if self.word_norm is not None:
            question = self.word_norm(question)
        query = self.condition(self.query.expand(b, -1, -1), question, key_padding_bias(question_mask))
        located, where = self.locate(patch, question, question_mask)
        read = located + query[:, None]  # (B, V, T, D)
        if self.motion_embed is not None:
            read = read + self.motion_embed(self.motion(where, frame_mask))
        box = None
        if self.box_head is not None:
            box, read = self.read_box(patch, read, where, frame_mask, teacher_box)
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
        counts = (state * mask.unsqueeze(-1).to(state.dtype)).sum(1)  # (B, S)
        pooled = self.pool(self.pool_query.expand(b, -1, -1), tokens, bias) + self.count_embed(counts).unsqueeze(1)
        out = {"tokens": tokens, "mask": mask, "pooled": pooled, "state_logits": logits, "locate": where}
        if box is not None:
            out["box"] = box
        return out

    def read_box(self, patch: torch.Tensor, read: torch.Tensor, where: torch.Tensor, frame_mask: torch.Tensor,
                 teacher_box: Optional[Tuple[torch.Tensor, torch.Tensor]]) -> Tuple[torch.Tensor, torch.Tensor]:
        """The person's box on every (view, frame), predicted from what and where the locator
        read (its centre moves from the attention's centre by at most half the image; width
        and height in (0, 1)), and ``read`` plus a 2x2 RoIAlign of the patch grid in that box
        (the teacher's box where its flag is 1). The box the RoI reads is detached: the box
        head learns from loss.track_box, the state head from what the box holds. With
        fusion.track_box_detach the head's inputs are detached too, so the box loss does not
        reach the locator."""
        assert self.box_head is not None and self.box_read is not None
        b, v, t, p, d = patch.shape
        g = int(round(p ** 0.5))
        if g * g != p:
            raise ValueError(f"fusion.track_box_read needs a square patch grid, the features have {p} cells")
        seen, at = (read.detach(), where.detach()) if self.box_detach else (read, where)
        geo = self.geometry(at, frame_mask)  # found, centre (x, y), spread (x, y)
        raw = self.box_head(torch.cat([seen, geo], -1))
        centre = (geo[..., 1:3] + 0.5 * torch.tanh(raw[..., :2])).clamp(0.0, 1.0)
        size = torch.sigmoid(raw[..., 2:])
        box = torch.cat([centre - size / 2, centre + size / 2], -1).clamp(0.0, 1.0)
        used = box.detach()
        if teacher_box is not None:
            known, flag = teacher_box
            used = torch.where((flag == 1).unsqueeze(-1), known.to(used.dtype), used)
        fmap = patch.reshape(b * v * t, g, g, d).permute(0, 3, 1, 2)
        index = torch.arange(b * v * t, device=patch.device, dtype=patch.dtype).unsqueeze(-1)
        rois = torch.cat([index, used.reshape(-1, 4) * g], -1)
        roi = roi_align(fmap, rois, output_size=2, aligned=True).reshape(b, v, t, 4 * d)
        return box, read + self.box_read(roi) * frame_mask.unsqueeze(-1).to(read.dtype)

    @staticmethod
    def geometry(where: torch.Tensor, frame_mask: torch.Tensor) -> torch.Tensor:
        """(B, V, T, 1 + P) locator weights (null cell first, a square grid of P cells) ->
        (B, V, T, GEOMETRY_FEATURES): how much of the attention found the person (1 - null), and
        the centre (x, y) and spread (x, y) of the attention on the cells (image fractions); 0 on
        padded frames."""
        b, v, t, n = where.shape
        g = int(round((n - 1) ** 0.5))
        centres = (torch.arange(g, dtype=where.dtype, device=where.device) + 0.5) / g
        found = 1.0 - where[..., 0]
        cells = (where[..., 1:] / found.unsqueeze(-1).clamp_min(1e-6)).view(b, v, t, g, g)
        py, px = cells.sum(-1), cells.sum(-2)  # (B, V, T, g): row and column marginals
        y, x = py @ centres, px @ centres
        sy = (py @ centres.square() - y.square()).clamp_min(0).sqrt()
        sx = (px @ centres.square() - x.square()).clamp_min(0).sqrt()
        out = torch.cat([found.unsqueeze(-1), torch.stack([x, y, sx, sy], -1)], -1)
        return out * frame_mask.unsqueeze(-1).to(where.dtype)

    @staticmethod
    def motion(where: torch.Tensor, frame_mask: torch.Tensor) -> torch.Tensor:
        """(B, V, T, 1 + P) locator weights (null cell first, a square grid of P cells) ->
        (B, V, T, MOTION_FEATURES): how much of the attention found the person (1 - null), the
        centre (x, y) and spread of the attention on the cells (image fractions), and the
        centre's move from the view's previous frame and to its next (0 at either end)."""
        geo = PersonTrack.geometry(where, frame_mask)
        b, v = geo.shape[:2]
        pos = geo[..., 1:3]  # (B, V, T, 2), 0 on padded frames
        both = (frame_mask[:, :, 1:] & frame_mask[:, :, :-1]).unsqueeze(-1).to(where.dtype)
        step = (pos[:, :, 1:] - pos[:, :, :-1]) * both  # (B, V, T - 1, 2)
        before = torch.cat([step.new_zeros(b, v, 1, 2), step], 2)
        after = torch.cat([step, step.new_zeros(b, v, 1, 2)], 2)
        return torch.cat([geo, before, after], -1) * frame_mask.unsqueeze(-1).to(where.dtype)

    def locate(self, patch: torch.Tensor, question: torch.Tensor, question_mask: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, V, T, P, D) patches, (B, L, D) words -> (B, V, T, D): per head, the cells the
        question's words point at (a cell scores as its best-matching word; a null cell
        with score 0 takes the weight when nothing matches), their values averaged; and
        (B, V, T, 1 + P) where it looked: the weights averaged over heads, the null cell first
        (``loss.track_locate`` supervises them with the person's box)."""
        b, v, t, p, d = patch.shape
        h, e = self.heads, d // self.heads
        words = self.word_key(question).view(b, -1, h, e)
        cells = self.cell_key(patch).view(b, v, t, p, h, e)
        sim = torch.einsum("bvtphe,blhe->bvthpl", cells, words) / e ** 0.5
        sim = sim.masked_fill(~question_mask[:, None, None, None, None, :], -1e4).amax(-1)  # (B, V, T, H, P)
        full = torch.cat([sim.new_zeros(b, v, t, h, 1), sim], -1).softmax(-1)
        weight = full[..., 1:]
        values = self.cell_value(patch).view(b, v, t, p, h, e)
        read = self.located(torch.einsum("bvthp,bvtphe->bvthe", weight, values).reshape(b, v, t, d))
        return read, full.mean(3)
