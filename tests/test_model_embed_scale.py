"""model.embed_std and fusion.question_norm: the scale of what is added to a token."""
from __future__ import annotations

import dataclasses

import torch
from torch import nn

from model import build_model, tiny_model_config
from model.dummy_batch import random_batch


def _embeddings(model):
    lm = set(model.language_head.lm.modules())
    return {name: m for name, m in model.named_modules() if isinstance(m, nn.Embedding) and m not in lm}


def test_embed_std_reinitialises_the_models_embeddings_but_not_the_lms():
    torch.manual_seed(0)
    default = build_model(tiny_model_config())
    torch.manual_seed(0)
    small = build_model(tiny_model_config(embed_std=0.02))
    names = set(_embeddings(small))
    assert {"fusion.type_embedding", "fusion.question_position", "entity_tokenizer.label"} <= names
    for name, module in _embeddings(small).items():
        assert module.weight.std().item() < 0.03, name
        assert _embeddings(default)[name].weight.std().item() > 0.5, name  # PyTorch's N(0, 1)
    # The LM keeps its own init: same seed, same weights as without the switch.
    torch.testing.assert_close(small.language_head.lm.get_input_embeddings().weight,
                               default.language_head.lm.get_input_embeddings().weight)


def test_question_norm_normalises_the_projected_words_the_fusion_reads():
    cfg = tiny_model_config()
    on = build_model(dataclasses.replace(cfg, fusion=dataclasses.replace(cfg.fusion, question_norm=True)))
    off = build_model(cfg)
    assert off.question_norm is None and on.question_norm is not None
    ids = torch.randint(1, cfg.lm.vocab_size, (2, 7))
    tokens = on.question_tokens(ids)
    torch.testing.assert_close(tokens.std(-1, unbiased=False), torch.ones(2, 7), atol=1e-3, rtol=0)
    raw = off.question_tokens(ids)
    assert raw.norm(dim=-1).mean() < 0.5 * tokens.norm(dim=-1).mean()
    out = on(random_batch(on.cfg, views=[2, 3], frames=[1, 1], options=[4, 3]))
    assert torch.isfinite(out["option_logits"]).all()
