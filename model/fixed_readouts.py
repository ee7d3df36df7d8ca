"""The entity reasoner's FIXED read-outs: rules, written by hand, that say what the pointed
entities show, in word embeddings, and score the options by cosine (model/README.md lists them).

``FixedReadouts`` is a mixin of ``model.entity_reasoner.EntityReasoner``: it reads the reasoner's
word embedding, class tables, gate and scales. ``readouts: false`` in the config switches the
whole term off (the learned option scorer alone).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

MAX_FRAMES = 16
MAX_COUNT = 16
# per-frame events counted over time: (field, class + 1); arm classes: bench.entities.ARM_CLASSES
EVENTS = (("airborne", 2), ("arm_l", 6), ("arm_r", 6), ("arm_l", 4), ("arm_r", 4))
HAND_ACTION_CLASSES = (("arm_l", 4), ("arm_r", 4), ("arm_l", 6), ("arm_r", 6))  # inputs.entity_batch.HAND_ACTIONS
AIRBORNE = 2  # the field value (class + 1) of bench.entities.AIRBORNE_NAMES "airborne"
EARLY = 0.2  # the weight of each later frame, when a read-out asks what comes first


class FixedReadouts:
    """The tied read-out term of ``EntityReasoner`` (see the module docstring)."""

    def tied(self, batch: dict, q: torch.Tensor, p: torch.Tensor, p_set: torch.Tensor, distinct: torch.Tensor,
             geo: torch.Tensor, known: torch.Tensor) -> torch.Tensor:
        """(B, O) the tied read-out term: tied_scale * sum over read-outs r of gate_r * cos(read-out r,
        the option's mean word embedding). The question's CLS gates which read-out it asks for. With
        ``to_word``, an option "X to Y" scores the trajectory read-out as cos(start, X) + cos(end, Y)."""
        readouts, ends = self.readouts(batch, p, p_set, distinct, geo, known)  # (B, R, d), (B, 2, d)
        gate = torch.softmax(self.readout_gate(q[:, 0]), -1)  # which read-out the question asks for
        words = batch["option_ids"].clone()
        words[..., 0] = 0  # the option's words, without its CLS
        option_words = F.normalize(self._phrase(words), dim=-1)
        cos = torch.einsum("bod,brd->bor", option_words, F.normalize(readouts, dim=-1))  # (B, O, R)
        if self.cfg.to_word:
            start, end, split = self.path_words(words)
            ends = F.normalize(ends, dim=-1)
            path = ((F.normalize(start, dim=-1) * ends[:, None, 0]).sum(-1)
                    + (F.normalize(end, dim=-1) * ends[:, None, 1]).sum(-1))  # (B, O)
            at = torch.arange(cos.shape[-1], device=cos.device) == self.trajectory_index
            cos = torch.where(at & split.unsqueeze(-1), path.unsqueeze(-1), cos)
        return self.tied_scale * (cos * gate.unsqueeze(1)).sum(-1)

    def path_words(self, words: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """An option's words before and after its first ``to_word`` ("from the red box" / "the blue
        ball"), each as a mean word embedding (..., d), and whether it has both parts (...,)."""
        is_to = words == self.cfg.to_word
        at = torch.where(is_to.any(-1), is_to.int().argmax(-1), words.shape[-1]).unsqueeze(-1)
        i = torch.arange(words.shape[-1], device=words.device)
        before, after = words.masked_fill(i >= at, 0), words.masked_fill(i <= at, 0)
        return self._phrase(before), self._phrase(after), (before != 0).any(-1) & (after != 0).any(-1)

    def readouts(self, batch: dict, p: torch.Tensor, p_set: torch.Tensor, distinct: torch.Tensor,
                 geo: torch.Tensor, known: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, R, d) what the pointed entities say, in word embeddings, and (B, 2, d) the trajectory's
        start and end apart (the read-out holds their sum): per categorical field the
        pointed entities' classes; their mark labels; the distinct count; the number of frames
        on which a person of the pointed set shows each of ``EVENTS``; per effector the objects a
        pointed person's effector overlaps; the effector that touches the pointed objects; the
        hand action the pointed set shows first; the objects nearest to where the pointed set is
        first and last seen on the floor; the posture it shows first and last. ``p``: the pointer (these views, these moments);
        ``p_set``: every sighting of the pointed entities."""
        mask, fields = batch["entity_mask"], batch["fields"]
        person = ((batch["kind"] == 0) & mask).float()
        out = []
        for i in range(len(self.fields)):
            w = p * (fields[..., i] > 0)
            out.append((w.unsqueeze(-1) * self._shown(i, fields)).sum(1) / w.sum(1, keepdim=True).clamp_min(1e-3))
        w = p * (batch["mark"] > 0)
        out.append((w.unsqueeze(-1) * self.word(batch["mark"])).sum(1) / w.sum(1, keepdim=True).clamp_min(1e-3))
        out.append(self._number(distinct))
        frames = batch["frame"].clamp(0, MAX_FRAMES - 1)
        n_f = int(frames.max().item()) + 1
        at_frame = F.one_hot(frames, n_f).float() * mask.unsqueeze(-1)  # (B, E, T)
        wp = p * person
        ws = p_set * person  # the set, scaled so its most pointed sighting weighs 1, sharpened
        ws = ws / ws.amax(-1, keepdim=True).clamp_min(1e-3)
        ws = ws * (ws > 0.5)
        present = {}  # (field, class) -> (B, T): a pointed person shows it at frame t
        for name, cls in set(EVENTS) | set(HAND_ACTION_CLASSES):
            flag = (fields[..., self.fields.index(name)] == cls).float() * ws  # (B, E)
            present[name, cls] = (flag.unsqueeze(-1) * at_frame).amax(1)
        for key in EVENTS:
            out.append(self._number(present[key].sum(-1)))
        n_d = self.n_descriptor
        contact = batch["contact"].view(*mask.shape, self.n_effectors, 2, n_d)[..., 0, :]  # overlap: (B, E, X, D)
        desc = self._phrase(self.descriptor_words)  # (D, d)
        touched = (wp[..., None, None] * contact).sum(1) / wp.sum(1).clamp_min(1e-3)[:, None, None]  # (B, X, D)
        out += list((touched @ desc).unbind(1))
        overlap = self.touching_effector(batch, p, wp)  # (B, X)
        eff = self._phrase(self.effector_words)  # (X, d)
        out.append(overlap @ eff / overlap.sum(-1, keepdim=True).clamp_min(1e-3))
        early = EARLY ** torch.arange(n_f, device=p.device, dtype=p.dtype)  # (T,)
        first = torch.stack([(present[key] * early).sum(-1) for key in HAND_ACTION_CLASSES], -1)  # (B, 4)
        first = first / first.sum(-1, keepdim=True).clamp_min(1e-6)
        out.append(first @ self._phrase(self.hand_action_words))
        start, end = self._trajectory(batch, ws, geo, known, at_frame, early)
        out.append(start + end)
        i = self.fields.index("posture")
        table = self._class_table(i)  # (C, d)
        shown = F.one_hot((fields[..., i] - 1).clamp_min(0), table.shape[0]).float() * (fields[..., i] > 0).unsqueeze(-1)
        posture = ((shown * ws.unsqueeze(-1)).unsqueeze(2) * at_frame.unsqueeze(-1)).amax(1)  # (B, T, C)
        for order in (early, early.flip(0)):  # the posture shown first, last
            w = (posture * order.view(1, -1, 1)).sum(1)
            out.append(w / w.sum(-1, keepdim=True).clamp_min(1e-6) @ table)
        return torch.stack(out, 1), torch.stack([start, end], 1)

    def touching_effector(self, batch: dict, p: torch.Tensor, wp: torch.Tensor) -> torch.Tensor:
        """(B, X) how much each effector of the pointed persons (``wp``) touches the pointed objects
        (``p``): its overlaps with them minus its separations from them, summed over the sightings,
        clamped at 0. An effector that touches an object overlaps it in every view that shows both;
        one that passes in front of it in one view is apart from it in another."""
        net, pointed_obj = self.net_contact(batch), self.pointed_objects(batch, p)  # (B, E, X, D), (B, D)
        return ((wp[..., None, None] * net).sum(1) * pointed_obj.unsqueeze(1)).sum(-1).clamp_min(0)

    def net_contact(self, batch: dict) -> torch.Tensor:
        """(B, E, X, D) each body part's overlaps with each object kind and colour minus its separations."""
        contact = batch["contact"].view(*batch["entity_mask"].shape, self.n_effectors, 2, self.n_descriptor)
        return contact[..., 0, :] - contact[..., 1, :]

    def pointed_objects(self, batch: dict, p: torch.Tensor) -> torch.Tensor:
        """(B, D) the pointed objects' kinds and colours (the contact vector's last axis), weighted by ``p``."""
        fields, n_d = batch["fields"], self.n_descriptor
        obj = p * (batch["kind"] == 1) * batch["entity_mask"]
        n_kind = int(getattr(self, f"class_words_{self.fields.index('object_kind')}").shape[0])
        kind = F.one_hot((fields[..., self.fields.index("object_kind")] - 1).clamp_min(0), n_kind).float()
        colour = F.one_hot((fields[..., self.fields.index("object_colour")] - 1).clamp_min(0), n_d - n_kind).float()
        return (obj.unsqueeze(-1) * torch.cat([kind, colour], -1)).sum(1)

    def _trajectory(self, batch: dict, wp: torch.Tensor, geo: torch.Tensor, known: torch.Tensor,
                    at_frame: torch.Tensor, early: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, d) twice: the kind and colour words of the objects nearest to the pointed person's
        floor point on the first frames it is seen (the start), and on the last frames (the end).
        Sightings off the floor (``airborne``) are left out: their box bottom is not on the floor, so
        the floor point read from it is too far from the camera."""
        mask, fields = batch["entity_mask"], batch["fields"]
        grounded = fields[..., self.fields.index("airborne")] != AIRBORNE
        w = (wp * known * grounded).unsqueeze(-1) * at_frame  # (B, E, T)
        seen = w.sum(1)  # (B, T)
        where = (w.unsqueeze(-1) * geo[..., :2].unsqueeze(2)).sum(1) / seen.unsqueeze(-1).clamp_min(1e-3)  # (B, T, 2)
        seen = seen.clamp(max=1.0)
        obj = (batch["kind"] == 1) & mask & known
        kind_i, colour_i = self.fields.index("object_kind"), self.fields.index("object_colour")
        desc = self._shown(kind_i, fields) + self._shown(colour_i, fields)  # (B, E, d)
        sigma = self.near_log_sigma.exp()
        ends = []
        for order in (early, early.flip(0)):  # first frames, last frames
            wt = seen * order
            at = (wt.unsqueeze(-1) * where).sum(1) / wt.sum(-1, keepdim=True).clamp_min(1e-6)  # (B, 2)
            dist = (geo[..., :2] - at.unsqueeze(1)).norm(dim=-1)  # (B, E)
            near = torch.softmax((-dist / sigma).masked_fill(~obj, -1e4), -1) * obj.any(-1, keepdim=True)
            ends.append((near.unsqueeze(-1) * desc).sum(1))
        return ends[0], ends[1]

    def _number(self, value: torch.Tensor) -> torch.Tensor:
        """A soft number as the interpolated embeddings of the number words around it (word ids
        3.. are "0".."16", inputs.entity_batch.WordVocab)."""
        v = value.clamp(0, MAX_COUNT)
        lo = v.floor().long().clamp_max(MAX_COUNT - 1)
        w = (v - lo.float()).unsqueeze(-1)
        return (1 - w) * self.word(lo + 3) + w * self.word(lo + 4)
