"""The training objective: named terms, masking, finite gradients in edge cases."""
from __future__ import annotations

import torch

from training.config import LossConfig
from training.losses import CrossViewCriterion


def _outputs_and_batch(n_marks=4, entity_ids=(1, 1, 2, 3)):
    b, v, t, m, o = 1, 2, 1, n_marks // 2, 4
    emb = torch.randn(b, v * t * m, 8, requires_grad=True)
    index = torch.stack(torch.meshgrid(torch.arange(v), torch.arange(t), torch.arange(m), indexing="ij"), -1).view(1, -1, 3)
    out = {
        "option_logits": torch.randn(b, o, requires_grad=True),
        "evidence_logits": torch.randn(b, v, t, requires_grad=True),
        "entity_evidence_logits": torch.randn(b, v, t, m, requires_grad=True),
        "entity_embed": emb, "entity_token_index": index,
        "entity_token_mask": torch.ones(b, v * t * m, dtype=torch.bool),
    }
    batch = {
        "answer": torch.tensor([2]), "answer_valid": torch.tensor([True]),
        "frame_mask": torch.ones(b, v, t, dtype=torch.bool), "evidence_valid": torch.tensor([True]),
        "evidence_target": torch.tensor([[[1.0], [0.0]]]),
        "mark_mask": torch.ones(b, v, t, m, dtype=torch.bool),
        "entity_evidence_target": torch.zeros(b, v, t, m),
        "mark_entity": torch.tensor(entity_ids).view(b, v, t, m),
    }
    return out, batch


def test_terms_are_named_and_weighted():
    out, batch = _outputs_and_batch()
    crit = CrossViewCriterion(LossConfig(answer=1.0, evidence=0.5, entity_evidence=0.0, identity=2.0))
    losses = crit(out, batch)
    assert set(losses) == {"loss", "loss_answer", "loss_evidence", "loss_entity_evidence", "loss_identity"}
    expected = losses["loss_answer"] + 0.5 * losses["loss_evidence"] + 2.0 * losses["loss_identity"]
    assert torch.allclose(losses["loss"], expected)


def test_identity_loss_gradient_is_finite_when_some_anchors_have_no_positive():
    out, batch = _outputs_and_batch(entity_ids=(1, 1, 2, 3))  # entities 2 and 3 are seen once
    loss = CrossViewCriterion(LossConfig(identity=1.0))(out, batch)["loss"]
    loss.backward()
    assert torch.isfinite(out["entity_embed"].grad).all()
    assert out["entity_embed"].grad.abs().sum() > 0


def test_all_masked_terms_are_zero_not_nan():
    out, batch = _outputs_and_batch(entity_ids=(1, 2, 3, 4))
    batch["answer_valid"] = torch.tensor([False])
    batch["evidence_valid"] = torch.tensor([False])
    losses = CrossViewCriterion(LossConfig(identity=1.0))(out, batch)
    for name, value in losses.items():
        assert torch.isfinite(value) and value == 0, name
    losses["loss"].backward()
