"""The entity reasoner: every person and object of every view and frame is a token.

    entity token  = attribute classes (embedded through the words that name them) + 2-D contact
                    + box + its own floor point and height (camera) + mark label and role + time
    entity attention within a time step, biased by floor distance, across views: the tokens of
                    each (sample, time step) regrouped, so attention never spans all pairs of a clip
    association   = pairwise same-entity logits (across views and frames), its own head
    pointer       = which entities the question is about (question tokens attend to entities)
    set features  = soft distinct count of the pointed persons, the pointed state per frame,
                    each entity's association with the pointed set
    reasoner      = transformer over question, set features and entity tokens
    option scores = each option's words attend to the reasoner's output

Attribute classes and answer words share one word embedding: "red" is the same vector as the
class red of a shirt and as a word of an option, so an attribute answer is not learnt per task.
Pure tensors in, tensors out; inputs.entity_batch builds the batch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import nn

from model.camera import canonical_offset, floor_points, pixel_rays
from model.entity_layers import BiasedBlock, encoder, group_slots, image_columns, mlp, pool_images, pointed_set, to_entities
from model.fixed_readouts import EVENTS, MAX_FRAMES, FixedReadouts
from model.learned_readout import LearnedReadout


@dataclass
class EntityReasonerConfig:
    RANGES: ClassVar[dict] = {"vocab_size": ">= 1", "width": ">= 1", "heads": ">= 1", "entity_layers": ">= 0",
                              "question_layers": ">= 0", "reason_layers": ">= 0", "option_layers": ">= 0",
                              "dropout": "[0, 1)", "world_scale": "> 0", "to_word": ">= 0",
                              "readout_scale": "> 0"}

    vocab_size: int = 512         # set from the run's word vocabulary (inputs.checkpoint.build_entity_model)
    width: int = 128              # token width
    heads: int = 4
    entity_layers: int = 2        # entity attention (within a time step, floor-distance bias)
    question_layers: int = 2
    reason_layers: int = 2
    option_layers: int = 1
    dropout: float = 0.1
    contact_width: int = 204      # inputs.entity_batch.CONTACT_WIDTH
    world_scale: float = 4.0      # metres per canonical unit
    camera: bool = True           # floor point and height from the camera; False: the "no camera" ablation
    entity_attention: bool = True  # False: no entity attention (tokens stay per image)
    association: bool = True      # False: no association features (set features see no identity)
    to_word: int = 0              # word id of "to" (an option "from X to Y" scores its ends apart); 0: none;
    #                               set from the vocabulary (inputs.checkpoint.build_entity_model)
    readouts: bool = True         # False: no read-out term, the answer is the learned option scorer alone
    readout: Literal["fixed", "learned"] = "fixed"  # fixed: the hand-written rules (model.fixed_readouts);
    #                               learned: slots that pool the pointed set in word space (model.learned_readout)
    readout_scale: float = 5.0    # learned: its score scale at the start (a learned parameter); 1.0 gives
    #                               the same val and test overall at 1x (docs/experiments.md, "data-volume curve")
    bag_of_frames: bool = False   # True: one token per image (its entities mean-pooled), no geometry, no association
    blind: bool = False           # True: every entity input zeroed, one token per image: question and options only


class EntityReasoner(FixedReadouts, nn.Module):
    """Args: cfg; class_words: field -> (classes, words) word ids naming each class
    (``inputs.entity_batch.WordVocab.class_words``), in the order of the batch's ``fields``."""

    def __init__(self, cfg: EntityReasonerConfig, class_words: dict[str, torch.Tensor]):
        super().__init__()
        self.cfg = cfg
        d = cfg.width
        self.fields = [f for f in class_words if f not in ("effector", "descriptor", "hand_action")]
        for i, f in enumerate(self.fields):
            self.register_buffer(f"class_words_{i}", class_words[f], persistent=False)
        self.register_buffer("effector_words", class_words["effector"], persistent=False)
        self.register_buffer("descriptor_words", class_words["descriptor"], persistent=False)
        self.register_buffer("hand_action_words", class_words["hand_action"], persistent=False)
        self.n_effectors, self.n_descriptor = class_words["effector"].shape[0], class_words["descriptor"].shape[0]
        # the tied read-outs: each field pooled over the pointed entities, the mark labels, the distinct
        # count, per-frame event counts (airborne; left / right arm waving, raised), per-effector contact
        # objects, the effector touching the pointed object, the first hand action, the objects nearest
        # to the pointed person's first and last floor points, the first and the last posture
        self.n_readouts = len(self.fields) + 1 + 1 + len(EVENTS) + self.n_effectors + 1 + 1 + 1 + 2
        self.trajectory_index = self.n_readouts - 3
        if cfg.readout == "fixed":
            self.readout_gate = nn.Linear(d, self.n_readouts)
            self.tied_scale = nn.Parameter(torch.tensor(5.0))
            self.near_log_sigma = nn.Parameter(torch.tensor(-2.0))  # trajectory: softmin width over object distance
        else:
            self.learned_readout = LearnedReadout(d, cfg.heads, len(self.fields), self.n_effectors,
                                                  dropout=cfg.dropout, scale=cfg.readout_scale)
        self.word = nn.Embedding(cfg.vocab_size, d, padding_idx=0)
        self.field_type = nn.Parameter(torch.zeros(len(self.fields), d))
        self.contact = nn.Linear(cfg.contact_width, d)
        self.box = mlp(6, d, d)
        self.geometry = mlp(4, d, d)
        self.no_camera = nn.Parameter(torch.zeros(d))
        self.kind = nn.Embedding(2, d)
        self.role = nn.Embedding(4, d)
        self.framed = nn.Parameter(torch.zeros(d))  # the entity's image is framed by a mark
        self.time = nn.Embedding(MAX_FRAMES, d)
        self.entity_norm = nn.LayerNorm(d)
        self.entity_blocks = nn.ModuleList(BiasedBlock(d, cfg.heads, cfg.dropout) for _ in range(cfg.entity_layers))
        self.floor_scale = nn.Parameter(torch.full((cfg.heads,), 1.0))
        self.same_image = nn.Parameter(torch.zeros(cfg.heads))
        self.question_pos = nn.Embedding(64, d)
        self.question = encoder(d, cfg.heads, cfg.question_layers, cfg.dropout)
        self.pointer_attn = nn.MultiheadAttention(d, cfg.heads, dropout=cfg.dropout, batch_first=True)
        self.pointer_head = mlp(2 * d + len(self.fields) + 2, d, 1)
        self.assoc_proj = nn.Linear(d, d)
        self.assoc_scale = nn.Parameter(torch.tensor(10.0))
        self.assoc_bias = nn.Parameter(torch.tensor(-5.0))
        self.set_feat = mlp(2, d, d)        # (pointer prob, association with the pointed set)
        self.count_type = nn.Parameter(torch.zeros(d))
        self.state_type = nn.Parameter(torch.zeros(d))
        self.reason = encoder(d, cfg.heads, cfg.reason_layers, cfg.dropout)
        self.option = encoder(d, cfg.heads, cfg.option_layers, cfg.dropout)
        self.option_attn = nn.MultiheadAttention(d, cfg.heads, dropout=cfg.dropout, batch_first=True)
        self.score = mlp(3 * d, d, 1)

    # -- entity tokens ---------------------------------------------------------------------
    def _class_table(self, i: int) -> torch.Tensor:
        return self._phrase(getattr(self, f"class_words_{i}"))

    def _shown(self, i: int, fields: torch.Tensor) -> torch.Tensor:
        """(B, E, d) each entity's class of field ``i`` as words; zero where the view does not show it."""
        table = torch.cat([torch.zeros_like(self.field_type[:1]), self._class_table(i)])
        return table[fields[..., i]]

    def _phrase(self, ids: torch.Tensor) -> torch.Tensor:
        """Mean word embedding of padded word ids (..., W) -> (..., d)."""
        emb = self.word(ids)
        n = (ids != 0).sum(-1, keepdim=True).clamp_min(1)
        return emb.sum(-2) / n

    def floor_geometry(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Each entity's floor point (canonical frame, world_scale units) and height, and whether
        its camera is known: (B, E, 3), (B, E) bool. The feet are the box's bottom centre; the
        height is where the ray through the top centre passes above that floor point."""
        view = batch["view"].clamp_min(0)
        gather = lambda x: torch.gather(x, 1, view.view(*view.shape, *([1] * (x.dim() - 2))).expand(  # noqa: E731
            *view.shape, *x.shape[2:]))
        K, R, t = gather(batch["camera_K"]), gather(batch["camera_R"]), gather(batch["camera_t"])
        box = batch["box"]
        feet = torch.stack([(box[..., 0] + box[..., 2]) / 2, box[..., 3]], -1)
        top = torch.stack([(box[..., 0] + box[..., 2]) / 2, box[..., 1]], -1)
        px = torch.stack([feet, top], -2)  # (B, E, 2, 2)
        origin, direction = pixel_rays(K, R, t, px)
        offset = canonical_offset(batch["camera_R"], batch["camera_t"], batch["has_camera"])  # (B, 1, 3)
        origin = (origin - offset.unsqueeze(-2)) / self.cfg.world_scale
        xy, hit = floor_points(origin[..., 0, :], direction[..., 0, :])
        # height: the top ray's point nearest to the vertical line through the floor point
        d_top, o = direction[..., 1, :], origin[..., 0, :]
        horiz = d_top[..., :2].norm(dim=-1).clamp_min(1e-6)
        s = ((xy - o[..., :2]) * d_top[..., :2]).sum(-1) / horiz.pow(2)
        height = (o[..., 2] + s * d_top[..., 2]).clamp(-2.0, 2.0)
        known = gather(batch["has_camera"].unsqueeze(-1)).squeeze(-1) & hit
        geo = torch.cat([xy.clamp(-4.0, 4.0), height.unsqueeze(-1)], -1)
        return torch.where(known.unsqueeze(-1), geo, torch.zeros_like(geo)), known

    def embed_entities(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        fields = batch["fields"]  # (B, E, F) class + 1, 0 = not shown
        x = self.contact(batch["contact"]) + self.kind(batch["kind"]) + self.role(batch["mark_role"])
        for i in range(len(self.fields)):
            table = torch.cat([torch.zeros_like(self.field_type[:1]), self._class_table(i) + self.field_type[i]])
            x = x + table[fields[..., i]]
        x = x + self.word(batch["mark"])
        x = x + (self.word(batch["image_mark"]) + self.framed) * (batch["image_mark"] > 0).unsqueeze(-1)
        hw = batch["image_hw"]
        box = batch["box"] / torch.cat([hw.flip(-1), hw.flip(-1)], -1)
        size = torch.stack([box[..., 2] - box[..., 0], box[..., 3] - box[..., 1]], -1)
        x = x + self.box(torch.cat([box, size], -1) * 2 - 1)
        geo, known = self.floor_geometry(batch)
        if not self.cfg.camera or self.cfg.bag_of_frames:
            known = torch.zeros_like(known)
        geo_emb = self.geometry(torch.cat([geo, known.unsqueeze(-1).float()], -1))
        x = x + torch.where(known.unsqueeze(-1), geo_emb, self.no_camera.expand_as(geo_emb))
        x = x + self.time(batch["frame"].clamp(0, MAX_FRAMES - 1))
        return self.entity_norm(x), geo, known

    def entity_attention(self, x: torch.Tensor, view: torch.Tensor, frame: torch.Tensor, mask: torch.Tensor,
                         geo: torch.Tensor, known: torch.Tensor) -> torch.Tensor:
        """The entity blocks: each token attends to the tokens of its own time step (of its own
        image without entity attention), biased by ``group_bias``. x (B, E, d); view, frame, mask
        (B, E); geo (B, E, 3); known (B, E). The real tokens are regrouped by (sample, time step)
        into (groups, slots), so attention never spans two time steps nor padding; padding
        tokens come back unchanged."""
        if len(self.entity_blocks) == 0 or not bool(mask.any()):
            return x
        n_f = int(frame.max()) + 1
        key, per_b = frame, n_f
        if not self.cfg.entity_attention:
            key, per_b = view * n_f + frame, (int(view.max()) + 1) * n_f
        rows = torch.arange(mask.shape[0], device=x.device).unsqueeze(1)
        gid, slot, _, counts = group_slots((rows * per_b + key)[mask])
        index = gid * int(counts.max()) + slot  # each real token's place in the (G * S) grid
        bias = self.group_bias(index, counts, view[mask], geo[mask], known[mask])
        h = x[mask]
        for blk in self.entity_blocks:
            h = blk(h, index, bias)
        return x.masked_scatter(mask.unsqueeze(-1).expand_as(x), h)

    def group_bias(self, index: torch.Tensor, counts: torch.Tensor, view: torch.Tensor, geo: torch.Tensor,
                   known: torch.Tensor) -> torch.Tensor:
        """(G, H, S, S) additive bias of G groups of S slots (``index`` (N,) places N tokens, ``counts``
        (G,) tokens per group): -scale * floor distance between tokens with known geometry; a learned
        same-image term (same view, within one time step); -inf to empty slots (each slot sees itself,
        so no row is empty). Padding folds into the float bias the floor term needs anyway."""
        g, s = counts.numel(), int(counts.max())
        xy = geo.new_zeros(g * s, 2).index_copy(0, index, geo[:, :2]).view(g, s, 2)
        kn = known.new_zeros(g * s).index_copy(0, index, known).view(g, s)
        vw = view.new_full((g * s,), -1).index_copy(0, index, view).view(g, s)
        # exact differences: the matmul form cdist takes past 25 points loses ~1e-4 m to cancellation
        dist = torch.cdist(xy, xy, compute_mode="donot_use_mm_for_euclid_dist") * (kn.unsqueeze(-1) & kn.unsqueeze(-2))
        bias = -F.softplus(self.floor_scale).view(1, -1, 1, 1) * dist.unsqueeze(1)
        same_img = vw.unsqueeze(-1) == vw.unsqueeze(-2)
        bias = bias + self.same_image.view(1, -1, 1, 1) * same_img.unsqueeze(1)
        real = torch.arange(s, device=counts.device) < counts.unsqueeze(-1)
        allowed = real.unsqueeze(-2) | torch.eye(s, dtype=torch.bool, device=real.device)
        return bias.masked_fill(~allowed.unsqueeze(1), float("-inf"))

    def word_match(self, batch: dict) -> torch.Tensor:
        """(B, E, F + 2): per field, the best cosine between the entity's class (as words) and a word
        of the question ("the person in the purple shirt" matches shirt = purple exactly); then
        the same for its mark's label and its image's frame label. 0 where the entity has none."""
        words = F.normalize(self.word(batch["question"]), dim=-1)  # (B, L, d)
        words = words * batch["question_mask"].unsqueeze(-1)
        fields, out = batch["fields"], []
        for i in range(len(self.fields)):  # each class against the question once, then each entity its class's
            table = F.normalize(torch.cat([torch.zeros_like(self.field_type[:1]), self._class_table(i)]), dim=-1)
            best = torch.einsum("cd,bld->bcl", table, words).amax(-1)  # (B, classes + 1)
            out.append(best.gather(1, fields[..., i]) * (fields[..., i] > 0))
        labels = torch.stack([batch["mark"], batch["image_mark"]], -1)  # (B, E, 2) word ids
        ids, which = torch.unique(labels, return_inverse=True)  # the few distinct labels of the batch
        best = torch.einsum("ud,bld->bul", F.normalize(self.word(ids), dim=-1), words).amax(-1)  # (B, U)
        got = best.gather(1, which.flatten(1)).view(labels.shape) * (labels > 0)
        return torch.cat([torch.stack(out, -1), got], -1)

    # -- forward -----------------------------------------------------------------------------
    def forward(self, batch: dict) -> dict[str, torch.Tensor]:
        """Args: a batch of ``inputs.entity_batch.collate_entities``.

        Returns:
            option_logits (B, O): -1e4 at invalid options;
            pointer_logits (B, E): which entities the question is about; -1e4 at padding;
            assoc_logits (B, E, E): same person / object across views and frames;
            distinct_count (B,): soft count of distinct pointed persons;
            entity_tokens (B, E, W) after entity attention (padding: the embedding).
        With ``bag_of_frames`` or ``blind`` the tokens are images: each entity gets its image's
        pointer logit, token and association logits (and with ``bag_of_frames`` the read-outs read
        every entity of the pointed images).
        """
        return self._blind(batch) if self.cfg.blind else self._forward(batch)

    def _forward(self, batch: dict) -> dict[str, torch.Tensor]:
        mask = batch["entity_mask"]
        x, geo, known = self.embed_entities(batch)
        bag = self.cfg.bag_of_frames
        if bag:  # one token per image: its entity tokens, mean-pooled; no geometry
            col, t_view, t_frame, t_mask = image_columns(batch)
            n_i = t_mask.shape[1]
            tok = self.entity_attention(pool_images(x, col, mask, n_i, "mean"), t_view, t_frame, t_mask,
                                        geo.new_zeros(*t_mask.shape, 3), torch.zeros_like(t_mask))
            x = to_entities(tok, col)
        else:
            t_mask = mask
            tok = x = self.entity_attention(x, batch["view"], batch["frame"], mask, geo, known)

        q_ids, q_mask = batch["question"], batch["question_mask"]
        pos = torch.arange(q_ids.shape[1], device=q_ids.device).clamp_max(63)
        q = self.question(self.word(q_ids) + self.question_pos(pos), src_key_padding_mask=~q_mask)

        # pointer: each token reads the question, and how well its classes and marks match its words
        read, _ = self.pointer_attn(tok, q, q, key_padding_mask=~q_mask)
        match = self.word_match(batch)
        if bag:
            match = pool_images(match, col, mask, n_i, "amax")
        t_pointer = self.pointer_head(torch.cat([tok, read, match], -1)).squeeze(-1).masked_fill(~t_mask, -1e4)
        pointer_logits = to_entities(t_pointer, col).masked_fill(~mask, -1e4) if bag else t_pointer
        p = torch.sigmoid(pointer_logits) * mask
        if "pointer_override" in batch:  # the oracle pointer: answer accuracy given the right entities
            p = batch["pointer_override"] * mask

        # association: its own projection, so the tokens themselves stay view-specific
        e = F.normalize(self.assoc_proj(tok), dim=-1)
        assoc_logits = self.assoc_scale * e @ e.transpose(1, 2) + self.assoc_bias
        if bag:
            assoc_logits = to_entities(to_entities(assoc_logits, col, 1), col, 2)
        pair = mask.unsqueeze(-1) & mask.unsqueeze(-2)
        eye = torch.eye(pair.shape[1], dtype=torch.bool, device=pair.device)
        if self.cfg.association and not bag:
            a = torch.sigmoid(assoc_logits) * pair
            a = torch.where(eye, pair.float(), a)
            same_image = ((batch["view"].unsqueeze(-1) == batch["view"].unsqueeze(-2))
                          & (batch["frame"].unsqueeze(-1) == batch["frame"].unsqueeze(-2)) & ~eye)
            a = a.masked_fill(same_image, 0.0)  # two sightings in one image are two entities
        else:  # no association (bag of frames: none across images either)
            a = eye.float() * pair
        p_set, distinct = pointed_set(p, a, mask, batch["kind"] == 0)
        with_pointed = (a * p.unsqueeze(1)).masked_fill(eye, 0).amax(-1)
        # the pointed state per frame (mean of the pointed tokens of frame f)
        frames = batch["frame"].clamp(0, MAX_FRAMES - 1)
        n_f = int(frames.max().item()) + 1
        onehot = F.one_hot(frames, n_f).float() * (p_set * mask).unsqueeze(-1)  # (B, E, T)
        state = onehot.transpose(1, 2) @ x / onehot.sum(1).unsqueeze(-1).clamp_min(1e-3)  # (B, T, d)
        state = state + self.time.weight[:n_f] + self.state_type
        count_tok = self._number(distinct) + self.count_type

        if bag:  # an image token: the most pointed of its entities; no association
            t_p = pool_images(p, col, mask, n_i, "amax")
            ent = tok + self.set_feat(torch.stack([t_p, torch.zeros_like(t_p)], -1))
        else:
            ent = x + self.set_feat(torch.stack([p, with_pointed], -1))
        seq = torch.cat([q, count_tok.unsqueeze(1), state, ent], 1)
        state_mask = onehot.sum(1) > 0  # (B, T) frames the pointed set is seen on
        seq_mask = torch.cat([q_mask, torch.ones_like(q_mask[:, :1]), state_mask, t_mask], 1)
        h = self.reason(seq, src_key_padding_mask=~seq_mask)

        o_ids, o_mask = batch["option_ids"], batch["option_mask"]
        b, n_o, lo = o_ids.shape
        o_pos = torch.arange(lo, device=o_ids.device).clamp_max(63)
        keep = o_mask.view(b * n_o, lo).clone()
        keep[:, 0] = True  # a padded option keeps its CLS position, so no row is all padding
        o = self.option((self.word(o_ids) + self.question_pos(o_pos)).view(b * n_o, lo, -1),
                        src_key_padding_mask=~keep)
        o_tokens = o.view(b, n_o, lo, -1)
        o = o[:, 0].view(b, n_o, -1)  # each option's CLS
        z, _ = self.option_attn(o, h, h, key_padding_mask=~seq_mask)
        logits = self.score(torch.cat([z, o, z * o], -1)).squeeze(-1)  # the learned option scorer
        if self.cfg.readouts and self.cfg.readout == "learned":
            logits = logits + self.learned_readout(self, batch, h, seq_mask, x, p, p_set, distinct, state,
                                                   state_mask, geo, known, o_tokens)
        elif self.cfg.readouts:
            logits = logits + self.tied(batch, q, p, p_set, distinct, geo, known)
        logits = logits.masked_fill(~batch["option_valid"], -1e4)
        return {"option_logits": logits, "pointer_logits": pointer_logits, "assoc_logits": assoc_logits,
                "distinct_count": distinct, "entity_tokens": x}

    def _blind(self, batch: dict) -> dict[str, torch.Tensor]:
        """``blind``: the forward on a stand-in batch of one token per image with every entity input
        zero (fields, contact, kind, box, geometry, marks), so neither what the images show nor how
        many entities they hold reaches the model; only the views and frames stay (the tokens'
        view and time). Each entity gets its image's outputs."""
        mask = batch["entity_mask"]
        col, view, frame, real = image_columns(batch)
        b, n_i = view.shape
        zero = torch.zeros_like(view)
        stand_in = {key: batch[key] for key in ("question", "question_mask", "option_ids", "option_mask",
                                                "option_valid", "camera_K", "camera_R", "camera_t")}
        stand_in.update(
            fields=batch["fields"].new_zeros(b, n_i, batch["fields"].shape[-1]),
            contact=batch["contact"].new_zeros(b, n_i, batch["contact"].shape[-1]), kind=zero,
            box=batch["box"].new_zeros(b, n_i, 4), image_hw=batch["image_hw"].new_full((b, n_i, 2), 224.0),
            view=view, frame=frame, mark=zero, image_mark=zero, mark_role=zero, entity_mask=real,
            has_camera=torch.zeros_like(batch["has_camera"]))
        if "pointer_override" in batch:
            stand_in["pointer_override"] = pool_images(batch["pointer_override"], col, mask, n_i, "amax")
        out = self._forward(stand_in)
        assoc = to_entities(to_entities(out["assoc_logits"], col, 1), col, 2)
        return {"option_logits": out["option_logits"], "distinct_count": out["distinct_count"],
                "pointer_logits": to_entities(out["pointer_logits"], col).masked_fill(~mask, -1e4),
                "assoc_logits": assoc, "entity_tokens": to_entities(out["entity_tokens"], col)}
