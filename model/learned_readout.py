"""The entity reasoner's LEARNED read-out (``readout: learned``): what the pointed entities say,
read by learned slots instead of the hand-written rules of ``model.fixed_readouts``.

A few slot tokens read the reasoner's sequence (question, count, per-frame state, entity tokens)
through a small transformer decoder. Each slot then pools, over the entities of the pointed set
and over time, one "value" in word space; the values an entity offers are generic, not per task:

    field   each categorical field's class, as its words (shirt "red", posture "walks", ...)
    mark    the entity's mark label and its image's frame label
    touch   per body part, the objects it overlaps (their kind and colour words)
    part    per body part, its name, keyed by how much it touches the pointed objects

Each value also carries a learned vector of its own (field, mark, part): two fields that share
class words (the left and the right arm's "raised") give different values.

The slot's attention over these (entity, value) pairs adds the log pointer (the set), a learned
lean toward early or late frames (first / last), and for objects a learned nearness to where
the pointed people stand at the slot's moments. A count head gives each slot a soft number: a
learned mix of the distinct pointed people and the number of frames on which a learned event
shows. A slot's reading is its number or its pooled value (a learned mix), projected in word
space; each option is read per slot as a learned soft span of its words, and the option's score
is the scale times the gated sum over slots of cos(reading, span). No rule names a task, and no
option phrase is in the code.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class LearnedReadout(nn.Module):
    """Args: d: token width; heads; n_fields: categorical fields; n_effectors: body parts of the
    contact vector; scale: the score scale at the start (``EntityReasonerConfig.readout_scale``);
    slots: reading slots; dropout."""

    def __init__(self, d: int, heads: int, n_fields: int, n_effectors: int, scale: float, slots: int = 4,
                 dropout: float = 0.1):
        super().__init__()
        self.n_fields, self.n_effectors, self.n_slots = n_fields, n_effectors, slots
        self.n_values = n_fields + 2 + 2 * n_effectors  # field, mark x2, touch per part, part
        self.slots = nn.Parameter(torch.randn(slots, d) * 0.02)
        layer = nn.TransformerDecoderLayer(d, heads, 2 * d, dropout, batch_first=True, norm_first=True)
        self.decoder = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(d))
        self.value_type = nn.Parameter(torch.randn(self.n_values, d) * 0.02)  # in the slots' attention
        self.value_embed = nn.Parameter(torch.zeros(self.n_values, d))  # in the value itself: which field it is
        self.query = nn.Linear(d, d)
        self.entity_key = nn.Linear(d, d)
        self.value_key = nn.Linear(d, d, bias=False)
        self.slot_terms = nn.Linear(d, 6)  # lean in time (values, anchor), nearness, part-touch, number mix, count mix
        self.event = nn.Linear(d, d)
        self.state_norm = nn.LayerNorm(d)
        self.event_bias = nn.Parameter(torch.tensor(-2.0))
        self.out = nn.Linear(d, d)
        nn.init.eye_(self.out.weight)
        nn.init.zeros_(self.out.bias)
        self.span_query = nn.Linear(d, d)
        self.slot_gate = nn.Linear(d, 1)
        self.scale = nn.Parameter(torch.tensor(float(scale)))

    def values(self, reasoner, batch: dict) -> torch.Tensor:
        """(B, E, V, d) what each entity offers in word space (see the module docstring)."""
        fields, mask = batch["fields"], batch["entity_mask"]
        out = [reasoner._shown(i, fields) for i in range(self.n_fields)]
        out += [reasoner.word(batch["mark"]), reasoner.word(batch["image_mark"])]
        n_d, n_x = reasoner.n_descriptor, self.n_effectors
        contact = batch["contact"].view(*mask.shape, n_x, 2, n_d)
        desc = reasoner._phrase(reasoner.descriptor_words)  # (D, d)
        out += list((contact[..., 0, :] @ desc).unbind(2))  # what each part overlaps
        eff = reasoner._phrase(reasoner.effector_words)  # (X, d)
        out += list(eff.expand(*mask.shape, n_x, eff.shape[-1]).unbind(2))
        return torch.stack(out, 2) + self.value_embed  # the left arm's "raised" is not the right arm's

    def pool(self, logit: torch.Tensor) -> torch.Tensor:
        """(B, K, E, V) each slot's attention over the (entity, value) pairs, from their logits."""
        return torch.softmax(logit.flatten(2), -1).view_as(logit)

    def forward(self, reasoner, batch: dict, h: torch.Tensor, h_mask: torch.Tensor, x: torch.Tensor,
                p: torch.Tensor, p_set: torch.Tensor, distinct: torch.Tensor, state: torch.Tensor,
                state_mask: torch.Tensor, geo: torch.Tensor, known: torch.Tensor, o_tokens: torch.Tensor) -> torch.Tensor:
        """(B, O) the read-out's option scores.

        Args: reasoner: the EntityReasoner (its word embedding and class tables); h, h_mask (B, N, d),
        (B, N): the reasoner's sequence; x (B, E, d) entity tokens; p, p_set (B, E) pointer and
        pointed set; distinct (B,) soft distinct count; state, state_mask (B, T, d), (B, T) the
        pointed state per frame; geo, known (B, E, 3), (B, E) floor geometry; o_tokens (B, O, L, d)
        the option encoder's tokens (position 0: the option's CLS)."""
        mask = batch["entity_mask"]
        b, d = x.shape[0], x.shape[-1]
        s = self.decoder(self.slots.expand(b, -1, -1), h, memory_key_padding_mask=~h_mask)  # (B, K, d)
        terms = self.slot_terms(s)  # (B, K, 6)
        lean_v, lean_a, near, touch_w = (terms[..., i] for i in range(4))
        frames = batch["frame"].clamp_min(0).float()
        t_rel = frames / frames.amax(-1, keepdim=True).clamp_min(1.0) * 2 - 1  # (B, E) in [-1, 1]
        person = (batch["kind"] == 0) & mask
        # where the pointed people stand at the slot's moments (anchor), for nearness
        anchor_w = (p_set * person * known).unsqueeze(1)  # (B, 1, E)
        anchor_l = torch.log(anchor_w.clamp_min(1e-6)) + lean_a.unsqueeze(-1) * 4 * t_rel.unsqueeze(1)
        anchor_l = anchor_l.masked_fill(anchor_w <= 1e-6, -1e4)
        anchor_p = torch.softmax(anchor_l, -1) * (anchor_w.sum(-1, keepdim=True) > 1e-6)
        at = anchor_p @ geo[..., :2]  # (B, K, 2)
        dist = (geo[..., :2].unsqueeze(1) - at.unsqueeze(2)).norm(dim=-1)  # (B, K, E)
        obj = ((batch["kind"] == 1) & mask & known).unsqueeze(1)
        # slot attention over (entity, value) pairs
        vals = self.values(reasoner, batch)  # (B, E, V, d)
        q = self.query(s) / math.sqrt(d)  # (B, K, d)
        logit = (torch.einsum("bkd,bed->bke", q, self.entity_key(x)).unsqueeze(-1)
                 + torch.einsum("bkd,vd->bkv", q, self.value_type).unsqueeze(2)
                 + torch.einsum("bkd,bevd->bkev", self.value_key(q), vals))  # (B, K, E, V)
        entity_l = (torch.log(p_set.clamp_min(1e-4)).unsqueeze(1) + lean_v.unsqueeze(-1) * 4 * t_rel.unsqueeze(1)
                    - F.softplus(near).unsqueeze(-1) * 4 * dist * obj)
        logit = logit + entity_l.unsqueeze(-1)
        # how much each body part of each entity touches the pointed objects (overlaps minus separations)
        pointed = reasoner.pointed_objects(batch, p)
        pointed = pointed / pointed.sum(-1, keepdim=True).clamp_min(1e-3)
        touch = (reasoner.net_contact(batch) * pointed[:, None, None]).sum(-1)  # (B, E, X)
        part0 = self.n_fields + 2 + self.n_effectors
        logit[..., part0:] = logit[..., part0:] + touch_w[:, :, None, None] * 4 * touch.unsqueeze(1)
        attn = self.pool(logit.masked_fill(~mask[:, None, :, None], -1e4))
        pooled = torch.einsum("bkev,bevd->bkd", attn, vals)
        # the count head: distinct pointed people, or frames on which a learned event shows
        event = torch.sigmoid(torch.einsum("bkd,btd->bkt", self.event(s), self.state_norm(state)) / math.sqrt(d)
                              + self.event_bias)
        frames_with = (event * state_mask.unsqueeze(1)).sum(-1)  # (B, K)
        mix = torch.sigmoid(terms[..., 5])
        count = mix * distinct.unsqueeze(-1) + (1 - mix) * frames_with
        number = reasoner._number(count)  # (B, K, d)
        use_n = torch.sigmoid(terms[..., 4]).unsqueeze(-1)
        reading = F.normalize(self.out(use_n * number + (1 - use_n) * pooled), dim=-1)  # (B, K, d)
        # each option read per slot as a soft span of its words (their embeddings, tied)
        o_ids = batch["option_ids"]
        words = reasoner.word(o_ids)  # (B, O, L, d)
        span_l = torch.einsum("bkd,bold->bkol", self.span_query(s), o_tokens) / math.sqrt(d)
        real = o_ids != 0
        real[..., 0] = False  # not the CLS
        span_l = span_l.masked_fill(~real.unsqueeze(1), -1e4)
        span = torch.einsum("bkol,bold->bkod", torch.softmax(span_l, -1), words)
        cos = (F.normalize(span, dim=-1) * reading.unsqueeze(2)).sum(-1)  # (B, K, O)
        gate = torch.softmax(self.slot_gate(s).squeeze(-1), -1)  # (B, K)
        return self.scale * (gate.unsqueeze(-1) * cos).sum(1)
