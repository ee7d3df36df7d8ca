"""The learned read-out (model/learned_readout.py, ``readout: learned``): what it reads, and that it has no
fixed rule's parameters."""
from __future__ import annotations

import pytest
import torch

from common.config import ConfigError, from_dict
from inputs.entity_batch import WordVocab
from model.entity_reasoner import EntityReasoner, EntityReasonerConfig
from tests import test_entity_reasoner as entity_tests
from tests.test_entity_reasoner import _check_outputs, _mixed_batch

bench_dir, split = entity_tests.bench_dir, entity_tests.split  # the tiny benchmark's fixtures


def _model(vocab, **kw) -> EntityReasoner:
    torch.manual_seed(0)
    return EntityReasoner(EntityReasonerConfig(vocab_size=len(vocab), width=32, heads=2, readout="learned", **kw),
                          vocab.class_words())


def test_the_learned_read_out_trains_end_to_end_without_the_rules_parameters(split):
    batch, vocab = _mixed_batch(split)
    model = _model(vocab)
    assert not hasattr(model, "readout_gate") and not hasattr(model, "tied_scale")
    _check_outputs(model.train()(batch), batch)
    grads = [p.grad for p in model.learned_readout.parameters()]
    assert all(g is not None for g in grads) and sum(float(g.abs().sum()) for g in grads) > 0


def test_it_pools_the_pointed_entities(split, monkeypatch):
    """With the pointer told (one person) and no association (so the pointed set is that person),
    none of any slot's attention lies on the other persons."""
    batch, vocab = _mixed_batch(split)
    model = _model(vocab, association=False).eval()
    person = (batch["kind"] == 0) & batch["entity_mask"]
    row = int(torch.nonzero(person.sum(1) >= 2)[0])
    pointed = int(torch.nonzero(person[row])[0])
    batch["pointer_override"] = torch.zeros_like(batch["entity_mask"], dtype=torch.float)
    batch["pointer_override"][row, pointed] = 1.0
    seen = {}
    pool = model.learned_readout.pool
    monkeypatch.setattr(model.learned_readout, "pool", lambda logit: seen.setdefault("attn", pool(logit)))
    with torch.no_grad():
        model(batch)
    on_entity = seen["attn"][row].sum(-1)  # (K, E)
    others = person[row].clone()
    others[pointed] = False
    assert float(on_entity[:, others].sum(-1).max()) < 0.05
    assert torch.allclose(on_entity.sum(-1), torch.ones(on_entity.shape[0]), atol=1e-4)


def test_its_scale_starts_at_the_config_value_and_must_be_positive():
    vocab = WordVocab.build(["a question"])
    assert float(_model(vocab, readout_scale=2.5).learned_readout.scale) == 2.5
    with pytest.raises(ConfigError, match="readout_scale"):
        from_dict(EntityReasonerConfig, {"readout_scale": 0.0})


def test_fields_that_share_class_words_give_different_values(split):
    """The left and the right arm name their classes in the same words; each value carries its own
    learned vector, so once trained the pooled reading can tell which arm it read."""
    batch, vocab = _mixed_batch(split)
    model = _model(vocab)
    readout, fields = model.learned_readout, model.fields
    left, right = fields.index("arm_l"), fields.index("arm_r")
    batch["fields"][..., right] = batch["fields"][..., left]
    with torch.no_grad():
        same = readout.values(model, batch)
        assert torch.equal(same[..., left, :], same[..., right, :])  # at the start: the words alone
        readout.value_embed.normal_()
        apart = readout.values(model, batch)
    assert not torch.allclose(apart[..., left, :], apart[..., right, :])
