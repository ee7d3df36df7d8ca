"""The question-conditioned readers (model/readers.py): frame readers and the option reader."""
import dataclasses

import torch

from model import build_model, tiny_model_config
from model.dummy_batch import permute_views, random_batch

MIXED = dict(views=[1, 6, 3, 2], frames=[1, 2, 8, 3], options=[4, 5, 4, 5],
             cameras=[True, False, True, True])


def _config(frame_readers=2, option_reader=True):
    cfg = tiny_model_config()
    return dataclasses.replace(cfg, fusion=dataclasses.replace(
        cfg.fusion, frame_readers=frame_readers, option_reader=option_reader))


def _randomise_option_score(model):
    for p in model.option_reader.score[-1].parameters():
        torch.nn.init.normal_(p, std=0.5)


def test_readers_off_build_the_model_of_before():
    torch.manual_seed(0)
    plain = build_model(tiny_model_config())
    torch.manual_seed(0)
    off = build_model(_config(0, False))
    assert off.frame_reader is None and off.option_reader is None
    assert plain.state_dict().keys() == off.state_dict().keys()
    for name, value in plain.state_dict().items():
        assert torch.equal(value, off.state_dict()[name]), name


def test_option_reader_starts_at_the_language_head_scores():
    torch.manual_seed(0)
    with_reader = build_model(_config(0, True)).eval()
    torch.manual_seed(0)
    without = build_model(_config(0, False)).eval()
    without.load_state_dict(with_reader.state_dict(), strict=False)
    batch = random_batch(with_reader.cfg, **MIXED)
    with torch.no_grad():
        torch.testing.assert_close(with_reader(batch)["option_logits"], without(batch)["option_logits"])


def test_readers_keep_view_order_invariance_and_padding():
    torch.manual_seed(0)
    model = build_model(_config()).eval()
    _randomise_option_score(model)
    batch = random_batch(model.cfg, **MIXED)
    with torch.no_grad():
        ref = model(batch)["option_logits"]
        out = model(permute_views(batch, [3, 1, 0, 5, 2, 4]))["option_logits"]
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)
    assert torch.isfinite(ref).all()
    assert (ref[[0, 2], 4] <= -1e3).all()  # 4-option samples: E is padding


def test_option_reader_reads_word_order():
    torch.manual_seed(0)
    model = build_model(_config()).eval()
    _randomise_option_score(model)
    batch = random_batch(model.cfg, views=[2], frames=[3], options=[2], option_len=3)
    batch["option_ids"][0, 0] = torch.tensor([5, 6, 7])
    batch["option_ids"][0, 1] = torch.tensor([7, 6, 5])  # the same words, reversed
    batch["option_mask"][:] = True
    with torch.no_grad():
        scores = model.read_options(*_fused(model, batch), batch)
    assert not torch.allclose(scores[0, 0], scores[0, 1])


def _fused(model, batch):
    views = model.encode_views(batch)
    entities, projected = model.encode_entities(views, batch)
    attended = model.attend_entities(entities, projected)
    groups, masks = model.token_groups(views, entities, projected, attended)
    fused, masks, _ = model.fuse(views, groups, masks, batch)
    _, gates = model.score_evidence(views, fused, entities["mask"])
    return fused, masks, gates


def test_frame_readers_follow_the_question_and_every_part_learns():
    torch.manual_seed(0)
    model = build_model(_config()).train()
    batch = random_batch(model.cfg, **MIXED)
    fused, masks, _ = _fused(model, batch)
    b, v, t = batch["frame_mask"].shape
    assert fused["read"].shape == (b, v * t * 2, model.cfg.d_model)
    assert torch.equal(masks["read"], batch["frame_mask"].unsqueeze(-1).expand(b, v, t, 2).reshape(b, -1)
                       & batch["view_mask"].repeat_interleave(t * 2, 1))
    # Another question, same images: other read tokens.
    other = dict(batch, prompt_ids=batch["prompt_ids"].flip(1))
    views = model.encode_views(batch)
    q1 = model.token_proj(model.language_head.embed(batch["prompt_ids"]))
    q2 = model.token_proj(model.language_head.embed(other["prompt_ids"]))
    r1, _ = model.frame_reader(views["patch"], views["frame_mask"], q1, batch["prompt_mask"])
    r2, _ = model.frame_reader(views["patch"], views["frame_mask"], q2, batch["prompt_mask"])
    assert not torch.allclose(r1, r2)
    _randomise_option_score(model)
    out = model(batch)
    out["option_logits"].clamp_min(-100).sum().backward()
    for part in (model.frame_reader, model.option_reader):
        missing = [n for n, p in part.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
        assert not missing, missing
