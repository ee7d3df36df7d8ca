"""The layers and tensor helpers of the entity reasoner (``model.entity_reasoner``): attention
within (sample, time step) groups biased by floor distance, the regrouping of entity tokens into
those groups and back, pooling per image, and the pointed set with its soft distinct count.
Pure tensors in, tensors out."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

def mlp(d_in: int, d: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, d), nn.GELU(), nn.Linear(d, d_out))


class BiasedBlock(nn.Module):
    """Pre-norm transformer block over groups of tokens (the entities of one time step).

    The tokens come flat, (N, d); ``index`` (N,) places each in a (G * S) grid of G groups of S
    slots. The per-token parts (norms, projections, MLP) run on the N tokens only; attention runs
    per group with an additive (G, H, S, S) bias that is -inf to the empty slots."""

    def __init__(self, d: int, heads: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = mlp(d, 4 * d, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, index: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        n, d = x.shape
        g, _, s, _ = bias.shape
        qkv = self.qkv(self.norm1(x))
        grid = qkv.new_zeros(g * s, 3 * d).index_copy(0, index, qkv)
        q, k, v = grid.view(g, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)  # (G, H, S, d / H)
        att = att.transpose(1, 2).reshape(g * s, d).index_select(0, index)
        x = x + self.drop(self.out(att))
        return x + self.drop(self.mlp(self.norm2(x)))


def group_slots(key: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Groups of equal keys. key (N,) long -> each element's group (N,) (groups in ascending key
    order), its slot within the group (N,) (in input order, by a cumulative count), the groups'
    keys (G,) and sizes (G,)."""
    keys, gid, counts = torch.unique(key, return_inverse=True, return_counts=True)
    order = torch.argsort(gid, stable=True)
    start = counts.cumsum(0) - counts
    slot = torch.empty_like(gid)
    slot[order] = torch.arange(gid.numel(), device=key.device) - start[gid[order]]
    return gid, slot, keys, counts


def image_columns(batch: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The images (view, frame) of each sample as slots of a (B, I) layout: each entity's image
    slot (B, E) (0 at padding), and per slot its view, frame (B, I) and whether it is an image."""
    mask = batch["entity_mask"]
    b = mask.shape[0]
    n_f = int(batch["frame"].max()) + 1
    per_b = (int(batch["view"].max()) + 1) * n_f
    rows = torch.arange(b, device=mask.device).unsqueeze(1)
    gid, _, keys, _ = group_slots((rows * per_b + batch["view"] * n_f + batch["frame"])[mask])
    img_b, img_key = keys // per_b, keys % per_b
    _, img_slot, _, _ = group_slots(img_b)
    n_i = int(img_slot.max()) + 1
    flat = img_b * n_i + img_slot  # each image's place in (B * I)
    long = torch.zeros(b * n_i, dtype=torch.long, device=mask.device)
    view, frame = long.index_copy(0, flat, img_key // n_f), long.index_copy(0, flat, img_key % n_f)
    real = torch.zeros(b * n_i, dtype=torch.bool, device=mask.device).index_fill(0, flat, True)
    col = torch.zeros_like(batch["frame"]).masked_scatter(mask, img_slot[gid])
    return col, view.view(b, n_i), frame.view(b, n_i), real.view(b, n_i)


def pool_images(t: torch.Tensor, col: torch.Tensor, mask: torch.Tensor, n_i: int, reduce: str) -> torch.Tensor:
    """Per-entity values (B, E, ...) reduced ("mean", "amax") over the entities of each image slot
    ``col`` (B, E) of (B, I): (B, I, ...); 0 at slots without an image."""
    flat = (torch.arange(mask.shape[0], device=t.device).unsqueeze(1) * n_i + col)[mask]
    src = t[mask]
    idx = flat.view(-1, *([1] * (src.dim() - 1))).expand_as(src)
    out = src.new_zeros(mask.shape[0] * n_i, *src.shape[1:])
    return out.scatter_reduce(0, idx, src, reduce, include_self=False).view(mask.shape[0], n_i, *src.shape[1:])


def to_entities(t: torch.Tensor, col: torch.Tensor, dim: int = 1) -> torch.Tensor:
    """Per-image values broadcast to the entities along ``dim``: t (B, ..., I, ...) -> (B, ..., E, ...),
    each entity taking its image slot ``col`` (B, E)'s value."""
    shape = [1] * t.dim()
    shape[0], shape[dim] = col.shape
    idx = col.view(shape).expand(*t.shape[:dim], col.shape[1], *t.shape[dim + 1:])
    return t.gather(dim, idx)


def encoder(d: int, heads: int, layers: int, dropout: float) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout, activation="gelu", batch_first=True, norm_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


def pointed_set(p: torch.Tensor, a: torch.Tensor, mask: torch.Tensor, person: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """The pointed set and its soft distinct count of persons.

    p (B, E) pointer; a (B, E, E) association probabilities (1 on the diagonal of real entities).
    The set is the pointed sightings spread along the association where it says "same" (a > 0.5)
    to every sighting of the same entities, other views and frames: (B, E). The count gives each
    sighting of a person 1 / (sightings of the same person) of its set weight, so a person counts
    as much as the pointer holds it, however many views see it: (B,).
    """
    eye = torch.eye(a.shape[-1], dtype=torch.bool, device=a.device)
    sure = torch.where(eye, a, ((a - 0.5) * 2).clamp(0, 1))
    p_set = (sure * p.unsqueeze(1)).amax(-1) * mask
    person = (person & mask).float()
    distinct = (p_set * person / (sure @ person.unsqueeze(-1)).squeeze(-1).clamp_min(1.0)).sum(-1)
    return p_set, distinct
