"""model.lm.clip_prior: each option's CLIP zero-shot logit from the backbone's own text tower."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from inputs.clip_text import ClipTextEncoder
from inputs.text import build_tokenizer, collate_text
from model import build_model, tiny_model_config
from model.config import BackboneConfig, ModelConfig
from model.dummy_batch import permute_views, random_batch

ROOT = Path(__file__).resolve().parents[1]
TOWER = "checkpoints/backbone/synthclip-s16"
QUESTION = "What colour is the shirt of the person touching the grey ball?"


@pytest.fixture(scope="module")
def encoder():
    return ClipTextEncoder.from_pretrained(TOWER)


def test_the_text_side_is_the_towers_normalised_caption_embedding_times_its_scale(encoder):
    options = ["black", "purple", "orange", "red"]
    text = encoder(QUESTION, options)
    assert text.shape == (4, 128)
    torch.testing.assert_close(text.norm(dim=-1), torch.full((4,), encoder.scale))
    captions = [f"{QUESTION} {o}" for o in options]
    with torch.no_grad():
        expected = F.normalize(encoder.model.encode_text(encoder.tokenizer(captions)), dim=-1) * encoder.scale
    torch.testing.assert_close(text, expected)
    assert not torch.allclose(text[0], text[3])  # the option words reach the embedding


def test_tokenizer_and_collate_carry_option_clip():
    cfg = ModelConfig(lm=dataclasses.replace(ModelConfig().lm, clip_prior=True))
    tokenizer = build_tokenizer(cfg)
    a = tokenizer.encode(QUESTION, ["black", "red"])
    b = tokenizer.encode(QUESTION, ["black", "purple", "orange"])
    batch = collate_text([a, b], tokenizer.pad_id)
    assert batch["option_clip"].shape == (2, 3, 128)
    assert torch.equal(batch["option_clip"][0, :2], a["option_clip"])
    assert (batch["option_clip"][0, 2] == 0).all()
    # Off by default: no text tower, no extra key.
    assert "option_clip" not in build_tokenizer(ModelConfig()).encode(QUESTION, ["black", "red"])


def test_clip_prior_needs_a_clip_embedding_and_a_text_tower():
    lm = dataclasses.replace(ModelConfig().lm, clip_prior=True)
    with pytest.raises(ValueError, match="pooled_source=clip"):
        build_tokenizer(ModelConfig(lm=lm, backbone=BackboneConfig(pooled_source="patch_mean")))
    with pytest.raises(ValueError, match="local open_clip folder"):
        build_tokenizer(ModelConfig(lm=lm, backbone=BackboneConfig(pretrained=None)))


def _prior_model(**lm):
    cfg = tiny_model_config()
    cfg = dataclasses.replace(cfg, lm=dataclasses.replace(cfg.lm, clip_prior=True, **lm))
    torch.manual_seed(0)
    return build_model(cfg).eval()


def test_the_gate_starts_at_clip_prior_gate():
    batch = random_batch(_prior_model().cfg, views=[3, 2], frames=[2, 1], options=[4, 3])
    batch["option_clip"] = torch.randn(2, 4, _prior_model().cfg.pooled_dim) * 5
    with torch.no_grad():
        full, small = _prior_model().clip_prior(batch), _prior_model(clip_prior_gate=0.05).clip_prior(batch)
    torch.testing.assert_close(small, 0.05 * full, atol=1e-6, rtol=1e-5)
    assert full.abs().sum() > 0


def test_the_prior_starts_as_the_mean_zero_shot_logit_over_real_frames():
    model = _prior_model()
    batch = random_batch(model.cfg, views=[3, 2], frames=[2, 1], options=[4, 3])
    batch["option_clip"] = torch.randn(2, 4, model.cfg.pooled_dim) * 5
    with torch.no_grad():
        prior = model.clip_prior(batch)
    for i in range(2):
        frames = batch["frame_mask"][i] & batch["view_mask"][i].unsqueeze(-1)
        image = F.normalize(batch["pooled"][i][frames], dim=-1)  # (n_frames, E)
        expected = (image @ batch["option_clip"][i].T).mean(0)
        expected = expected.masked_fill(~batch["option_valid"][i], 0.0)
        torch.testing.assert_close(prior[i], expected, atol=1e-5, rtol=1e-5)
    # It is part of the scores, and moving the views around changes nothing.
    with torch.no_grad():
        ref = model(batch)["option_logits"]
        out = model(permute_views(batch, [2, 0, 1]))["option_logits"]
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)


def test_the_gate_learns_and_a_batch_without_option_clip_is_refused():
    model = _prior_model().train()
    batch = random_batch(model.cfg, views=[2], frames=[1], options=[4])
    batch["option_clip"] = torch.randn(1, 4, model.cfg.pooled_dim)
    model(batch)["option_logits"].logsumexp(-1).sum().backward()
    assert model.clip_gate.weight.grad.abs().sum() > 0
    del batch["option_clip"]
    with pytest.raises(ValueError, match="option_clip"):
        model(batch)
