"""The training objective as one module with named, weighted terms (DETR SetCriterion style)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from inputs.track import IGNORE, box_cells
from training.config import LossConfig


class CrossViewCriterion(nn.Module):
    """answer CE + evidence BCE + per-mark evidence BCE (+ identity consistency) (+ the person
    track's per-frame state CE and its locator's box loss, when the model has a track) (+ the
    per-frame people-count CE, when the model has a view counter) (+ the mark facts' CE, when
    the model has a mark-fact head).

    ``forward(outputs, batch)`` returns ``{"loss": total, "loss_answer": ..., ...}``; each
    term is averaged over the positions it is defined on, so an all-masked term is 0, not NaN.
    """

    def __init__(self, cfg: LossConfig):
        super().__init__()
        self.track_only = cfg.track_only  # the loss reads only the track path's outputs
        self.weights = {"answer": cfg.answer, "evidence": cfg.evidence,
                        "entity_evidence": cfg.entity_evidence, "identity": cfg.identity,
                        "track": cfg.track, "track_locate": cfg.track_locate, "track_box": cfg.track_box,
                        "view_count": cfg.view_count, "mark_facts": cfg.mark_facts}

    @staticmethod
    def loss_answer(out: dict, batch: dict) -> torch.Tensor:
        valid = batch["answer_valid"]
        if not valid.any():
            return out["option_logits"].sum() * 0.0
        return F.cross_entropy(out["option_logits"][valid], batch["answer"][valid])

    @staticmethod
    def _masked_bce(logits: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if not mask.any():
            return logits.sum() * 0.0
        return F.binary_cross_entropy_with_logits(logits[mask], target[mask])

    def loss_evidence(self, out: dict, batch: dict) -> torch.Tensor:
        mask = batch["frame_mask"] & batch["evidence_valid"][:, None, None]
        return self._masked_bce(out["evidence_logits"], batch["evidence_target"], mask)

    def loss_entity_evidence(self, out: dict, batch: dict) -> torch.Tensor:
        mask = batch["mark_mask"] & batch["evidence_valid"][:, None, None, None]
        return self._masked_bce(out["entity_evidence_logits"], batch["entity_evidence_target"], mask)

    @staticmethod
    def _frame_positions(batch: dict, target: str) -> torch.Tensor:
        """(B, V, T) bool: real frames of real views where ``batch[target]`` holds a record."""
        return (batch[target] != IGNORE) & batch["frame_mask"] & batch["view_mask"].unsqueeze(-1)

    @staticmethod
    def _frame_ce(logits: torch.Tensor, batch: dict, target: str) -> torch.Tensor:
        """CE of per-frame logits (B, V, T, K) on ``batch[target]`` at its recorded frames; 0 for
        a batch without records."""
        keep = CrossViewCriterion._frame_positions(batch, target)
        if not keep.any():
            return logits.sum() * 0.0
        return F.cross_entropy(logits[keep], batch[target][keep])

    @staticmethod
    def track_positions(batch: dict) -> torch.Tensor:
        """(B, V, T) bool: real frames of real views with a recorded track state."""
        return CrossViewCriterion._frame_positions(batch, "track_target")

    @staticmethod
    def loss_track(out: dict, batch: dict) -> torch.Tensor:
        """CE of the track's state logits (B, V, T, S) on the recorded states of real frames;
        0 for a batch without records (spatial questions)."""
        return CrossViewCriterion._frame_ce(out["track_logits"], batch, "track_target")

    @staticmethod
    def locate_targets(out: dict, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Where the locator should look: (B, V, T) bool positions with a record, and
        (B, V, T, 1 + P) bool target cells (the null cell first: the person shows no pixel
        there; otherwise the cells the person's box covers, inputs/track.py)."""
        where = out["track_locate"]
        p = where.shape[-1] - 1
        grid = int(round(p ** 0.5))
        if grid * grid != p:
            raise ValueError(f"loss.track_locate needs a square patch grid, the features have {p} cells")
        keep = CrossViewCriterion._frame_positions(batch, "track_box_flag")
        cells = box_cells(batch["track_box"].to(where.dtype), grid) & (batch["track_box_flag"] == 1).unsqueeze(-1)
        null = (batch["track_box_flag"] == 0).unsqueeze(-1)
        return keep, torch.cat([null, cells], -1)

    @staticmethod
    def locate_hits(out: dict, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """``locate_targets``' positions, and (B, V, T) bool: whether the locator's most-attended
        cell is a target cell (the person's box, or the null cell where they show no pixel)."""
        keep, target = CrossViewCriterion.locate_targets(out, batch)
        return keep, target.gather(-1, out["track_locate"].argmax(-1, keepdim=True)).squeeze(-1)

    @staticmethod
    def loss_track_locate(out: dict, batch: dict) -> torch.Tensor:
        """-log of the locator's attention (mean over heads) on the target cells of each
        recorded (view, frame); 0 for a batch without records."""
        keep, target = CrossViewCriterion.locate_targets(out, batch)
        if not keep.any():
            return out["track_locate"].sum() * 0.0
        mass = (out["track_locate"] * target).sum(-1)[keep]
        return -torch.log(mass.clamp_min(1e-6)).mean()

    @staticmethod
    def loss_track_box(out: dict, batch: dict) -> torch.Tensor:
        """Smooth L1 of the track's predicted box (unit x0 y0 x1 y1) against the generator's, on
        the recorded (view, frame)s where the person shows; 0 for a batch without such frames."""
        keep = CrossViewCriterion._frame_positions(batch, "track_box_flag") & (batch["track_box_flag"] == 1)
        pred = out["track_box_pred"]
        if not keep.any():
            return pred.sum() * 0.0
        return F.smooth_l1_loss(pred[keep], batch["track_box"][keep].to(pred.dtype), beta=0.05)

    @staticmethod
    def count_positions(batch: dict) -> torch.Tensor:
        """(B, V, T) bool: real frames of real views with a recorded people count."""
        return CrossViewCriterion._frame_positions(batch, "count_target")

    @staticmethod
    def loss_view_count(out: dict, batch: dict) -> torch.Tensor:
        """CE of the per-frame people-count logits (B, V, T, K) on the recorded counts of real
        frames; 0 for a batch without records."""
        return CrossViewCriterion._frame_ce(out["count_logits"], batch, "count_target")

    @staticmethod
    def mark_fact_hits(out: dict, batch: dict) -> tuple[int, int]:
        """(right, recorded): over every fact of every real mark with a record, whether the best
        class of that fact's slice is the recorded one."""
        logits, fact_of_class, target = out["mark_fact_logits"], out["mark_fact_of_class"], batch["mark_facts"]
        marks = batch["mark_mask"] & batch["frame_mask"].unsqueeze(-1) & batch["view_mask"][:, :, None, None]
        right = total = 0
        for f in range(target.shape[-1]):
            keep = marks & (target[..., f] != IGNORE)
            pred = logits[..., fact_of_class == f].argmax(-1)
            right += int((pred == target[..., f])[keep].sum())
            total += int(keep.sum())
        return right, total

    @staticmethod
    def loss_mark_facts(out: dict, batch: dict) -> torch.Tensor:
        """Each fact's CE over its own classes (out "mark_fact_of_class" says which columns of
        "mark_fact_logits" (B, V, T, M, C) are whose), on the real marks whose record names a class
        of it (batch "mark_facts" (B, V, T, M, F), inputs/mark_facts.py), averaged over the facts
        that have one; 0 for a batch without records."""
        logits, fact_of_class, target = out["mark_fact_logits"], out["mark_fact_of_class"], batch["mark_facts"]
        marks = batch["mark_mask"] & batch["frame_mask"].unsqueeze(-1) & batch["view_mask"][:, :, None, None]
        terms = []
        for f in range(target.shape[-1]):
            keep = marks & (target[..., f] != IGNORE)
            if keep.any():
                terms.append(F.cross_entropy(logits[..., fact_of_class == f][keep], target[..., f][keep]))
        return torch.stack(terms).mean() if terms else logits.sum() * 0.0

    @staticmethod
    def loss_identity(out: dict, batch: dict, temperature: float = 0.1) -> torch.Tensor:
        """Supervised contrastive loss on the entity embeddings: marks of the same scene entity
        (in other views or frames) are positives, the other marks of the sample negatives.
        Uses ground-truth entity ids, which the model never sees as input."""
        emb, index, mask = out["entity_embed"], out["entity_token_index"], out["entity_token_mask"]
        total, count = emb.sum() * 0.0, 0
        for b in range(emb.shape[0]):
            keep = mask[b]
            idx = index[b][keep]
            ids = batch["mark_entity"][b][idx[:, 0], idx[:, 1], idx[:, 2]]
            if len(ids) < 2:
                continue
            z = F.normalize(emb[b][keep], dim=-1)
            sim = z @ z.t() / temperature
            eye = torch.eye(len(ids), dtype=torch.bool, device=z.device)
            pos = (ids[:, None] == ids[None, :]) & ~eye
            has_pos = pos.any(1)
            if not has_pos.any():
                continue
            log_prob = sim.masked_fill(eye, -1e4).log_softmax(-1)
            per_anchor = -(log_prob * pos).sum(1) / pos.sum(1).clamp(min=1)  # 0/0 would poison the grad
            total = total + per_anchor[has_pos].sum()
            count += int(has_pos.sum())
        return total / max(count, 1)

    def forward(self, out: dict, batch: dict) -> dict[str, torch.Tensor]:
        if self.track_only:  # the track path's outputs alone (CrossViewModel.forward_track)
            terms = {"track": self.loss_track(out, batch)}
        else:
            terms = {
                "answer": self.loss_answer(out, batch),
                "evidence": self.loss_evidence(out, batch),
                "entity_evidence": self.loss_entity_evidence(out, batch),
            }
            if self.weights["identity"] > 0:
                terms["identity"] = self.loss_identity(out, batch)
            if "track_logits" in out and self.weights["track"] > 0:
                terms["track"] = self.loss_track(out, batch)
        if "track_locate" in out and "track_box_flag" in batch and self.weights["track_locate"] > 0:
            terms["track_locate"] = self.loss_track_locate(out, batch)
        if "track_box_pred" in out and "track_box_flag" in batch and self.weights["track_box"] > 0:
            terms["track_box"] = self.loss_track_box(out, batch)
        if "count_logits" in out and "count_target" in batch and self.weights["view_count"] > 0:
            terms["view_count"] = self.loss_view_count(out, batch)
        if "mark_fact_logits" in out and "mark_facts" in batch and self.weights["mark_facts"] > 0:
            terms["mark_facts"] = self.loss_mark_facts(out, batch)
        losses = {f"loss_{k}": v for k, v in terms.items()}
        losses["loss"] = sum(self.weights[k] * v for k, v in terms.items())
        return losses
