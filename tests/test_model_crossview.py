"""CrossViewModel: view-order invariance, padding, gradients, ablation switches."""
import dataclasses

import pytest
import torch

from model import build_model, tiny_model_config
from model.dummy_batch import permute_views, random_batch

MIXED = dict(views=[1, 6, 3, 2], frames=[1, 2, 8, 3], options=[4, 5, 4, 5],
             cameras=[True, False, True, True])


def _finite_outputs(out):
    for name, value in out.items():
        if value.is_floating_point():
            assert torch.isfinite(value).all(), name


def test_view_permutation_leaves_option_logits_unchanged():
    torch.manual_seed(0)
    cfg = tiny_model_config()
    model = build_model(cfg).eval()
    batch = random_batch(cfg, views=[4, 6, 2], frames=[2, 1, 3], options=[4, 5, 5],
                         cameras=[True, True, False])
    with torch.no_grad():
        ref = model(batch)
        for order in ([5, 4, 3, 2, 1, 0], [2, 0, 5, 1, 3, 4]):
            out = model(permute_views(batch, order))
            torch.testing.assert_close(out["option_logits"], ref["option_logits"], atol=1e-5, rtol=0)
            # Per-view outputs move with their view.
            torch.testing.assert_close(out["evidence_logits"], ref["evidence_logits"][:, order],
                                       atol=1e-5, rtol=0)


def test_mixed_batch_runs_with_padding_and_without_cameras():
    cfg = tiny_model_config()
    model = build_model(cfg).eval()
    batch = random_batch(cfg, **MIXED)
    with torch.no_grad():
        out = model(batch)
    _finite_outputs(out)
    b, v, t, m = batch["mark_mask"].shape
    n = v * t * m
    assert out["option_logits"].shape == (4, 5)
    assert (out["option_logits"][[0, 2], 4] <= -1e3).all()  # 4-option samples: E is padding
    assert out["evidence_logits"].shape == (b, v, t)
    assert (out["evidence_logits"][~batch["frame_mask"]] <= -1e3).all()
    assert out["entity_evidence_logits"].shape == (b, v, t, m)
    assert out["entity_attn"].shape == (b, n, cfg.entity.num_slots)
    assert out["entity_identity"].shape == (b, v, t, m, cfg.entity.identity_dim)
    index = out["entity_token_index"][0]
    assert index.shape == (n, 3) and index[-1].tolist() == [v - 1, t - 1, m - 1]
    assert torch.equal(out["entity_token_mask"].view(b, v, t, m),
                       batch["mark_mask"] & batch["frame_mask"][..., None])


def test_no_marks_and_no_prompt_padding_edge_case():
    cfg = tiny_model_config()
    model = build_model(cfg).eval()
    batch = random_batch(cfg, views=[2], frames=[1], options=[4])
    batch["mark_mask"][:] = False
    with torch.no_grad():
        _finite_outputs(model(batch))


def test_patch_tokens_are_built_only_for_frames_with_a_mark():
    """The entity tokenizer builds the patch tokens of the frames a kept mark reads, and its
    tokens equal those read from the full tensor; the frame token is the mean of the full one."""
    cfg = tiny_model_config()
    model = build_model(cfg).eval()
    batch = random_batch(cfg, views=[2, 3], frames=[3, 2], options=[4, 4], marks=2)
    batch["mark_mask"][0, 1] = False  # view 1 of sample 0: no marks in any frame
    batch["mark_mask"][1, :, 1] = False  # frame 1 of sample 1: no marks in any view
    with torch.no_grad():
        views = model.view_encoder(batch)
        patch = views["patch"]
        full = patch.all()
        built, frames = [], patch.frames
        patch.frames = lambda index: (built.append(index.clone()), frames(index))[1]
        lazy = model.entity_tokenizer(patch, views["grid"], batch, views["offset"])
        eager = model.entity_tokenizer(full, views["grid"], batch, views["offset"])
        enc = model.view_encoder  # the unfactored formula: project every patch, then average
        tokens = enc.patch_proj(batch["patch_tokens"]) + patch._spatial.unsqueeze(2) + patch._time.unsqueeze(3)
        frame = enc.norm(enc.pooled_proj(batch["pooled"]) + tokens.mean(dim=3))
    b, v, t = batch["mark_mask"].shape[:3]
    keep = (batch["mark_mask"] & batch["frame_mask"].unsqueeze(-1)
            & batch["view_mask"][:, :, None, None]).any(-1).reshape(-1)
    assert len(built) == 1 and sorted(built[0].tolist()) == keep.nonzero().squeeze(1).tolist()
    assert 0 < len(built[0]) < b * v * t
    torch.testing.assert_close(lazy["tokens"], eager["tokens"], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(full, enc.norm(tokens))
    torch.testing.assert_close(views["frame"], frame, atol=1e-5, rtol=1e-5)


def test_every_trainable_parameter_gets_a_gradient():
    cfg = tiny_model_config()
    model = build_model(cfg).train()
    out = model(random_batch(cfg, **MIXED))
    # Everything the trainer's losses can touch: answer, evidence, identity, slot assignment.
    loss = (out["option_logits"].clamp_min(-100).sum() + out["evidence_logits"].clamp_min(-100).sum()
            + out["entity_evidence_logits"].clamp_min(-100).sum() + out["entity_embed"].pow(2).sum()
            + out["entity_attn"].pow(2).sum())
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not missing, missing


SWITCHES = {
    "camera": (lambda c: dataclasses.replace(c, camera=dataclasses.replace(c.camera, enabled=False)),
               ["view_encoder.camera.", "entity_tokenizer.geometry.", "entity_attention.floor_weight"]),
    "entity_attention": (lambda c: dataclasses.replace(c, entity=dataclasses.replace(c.entity, attention=False)),
                         ["entity_attention."]),
    "fusion": (lambda c: dataclasses.replace(c, fusion=dataclasses.replace(c.fusion, enabled=False)),
               ["fusion.", "prefix.reader.", "summary."]),  # summary tokens exist only with fusion
    "gating": (lambda c: dataclasses.replace(c, evidence=dataclasses.replace(c.evidence, gating=False)), []),
}


@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_switch_off_removes_its_parameters_and_still_runs(switch):
    cfg = tiny_model_config()
    make_off, removed_prefixes = SWITCHES[switch]
    full = {n for n, _ in build_model(cfg).named_parameters()}
    model = build_model(make_off(cfg)).eval()
    ablated = {n for n, _ in model.named_parameters()}
    removed = full - ablated
    for prefix in removed_prefixes:
        assert any(n.startswith(prefix) for n in removed), prefix
    assert all(any(n.startswith(p) for p in removed_prefixes) for n in removed), sorted(removed)
    batch = random_batch(cfg, **MIXED)
    with torch.no_grad():
        out = model(batch)
    _finite_outputs(out)
    assert out["option_logits"].shape == (4, 5)
    assert ("entity_attn" in out) == (switch != "entity_attention")
    if switch == "gating":
        with torch.no_grad():
            gated = build_model(cfg).eval()
            gated.load_state_dict(model.state_dict())
            assert not torch.allclose(gated(batch)["option_logits"], out["option_logits"])


def test_summary_tokens_join_the_prefix_and_learn():
    cfg = tiny_model_config()
    cfg = dataclasses.replace(cfg, fusion=dataclasses.replace(cfg.fusion, summary_tokens=True))
    model = build_model(cfg).train()
    batch = random_batch(cfg, **MIXED)
    out = model(batch)
    assert out["prefix"].shape[1] == cfg.fusion.prefix_tokens + 2  # + frame and entity summaries
    out["option_logits"].clamp_min(-100).sum().backward()
    assert model.summary.to_lm.weight.grad.abs().sum() > 0
    # Still invariant to the order of the views.
    model.eval()
    with torch.no_grad():
        ref = model(batch)["option_logits"]
        out = model(permute_views(batch, [3, 1, 0, 5, 2, 4]))["option_logits"]
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("last", [False, True])
def test_summary_last_puts_the_bag_tokens_at_the_end_of_the_prefix(last):
    """fusion.summary_last: the summary tokens close the prefix, so the context token that
    predicts an option's first word is the bag of entities; the slots come first."""
    torch.manual_seed(0)
    cfg = tiny_model_config()
    cfg = dataclasses.replace(cfg, fusion=dataclasses.replace(cfg.fusion, summary_tokens=True, summary_last=last))
    model = build_model(cfg).eval()
    batch = random_batch(cfg, **MIXED)
    captured = {}
    model.summary.register_forward_hook(lambda module, args, output: captured.setdefault("summary", output))
    with torch.no_grad():
        prefix = model(batch)["prefix"]
    summary = captured["summary"]
    where = prefix[:, -2:] if last else prefix[:, :2]
    torch.testing.assert_close(where, summary, atol=0, rtol=0)
    assert not torch.equal(prefix[:, :2] if last else prefix[:, -2:], summary)


@pytest.mark.parametrize("source", ["attended", "raw"])
def test_summary_entities_chooses_which_mark_tokens_the_summary_pools(source):
    """fusion.summary_entities: "raw" pools the tokenizer's mark tokens (what bag-of-frames
    pools), so the summary no longer depends on the entity transformer; "attended" pools its
    output."""
    torch.manual_seed(0)
    cfg = tiny_model_config()
    # Without evidence gating: the gates on what the summary pools come from the fused tokens.
    cfg = dataclasses.replace(cfg, fusion=dataclasses.replace(cfg.fusion, summary_tokens=True,
                                                              summary_entities=source),
                              evidence=dataclasses.replace(cfg.evidence, gating=False))
    model = build_model(cfg).train()
    batch = random_batch(cfg, **MIXED)
    captured = {}

    def keep(name, read):
        def hook(module, args, out):
            captured[name] = read(args, out)  # returns None: the output stays as it is
        return hook
    model.entity_tokenizer.register_forward_hook(keep("raw", lambda a, out: out["tokens"]))
    model.entity_attention.register_forward_hook(keep("att", lambda a, out: out["tokens"]))
    model.summary.register_forward_hook(keep("in", lambda a, out: a[0][1]))
    out = model(batch)
    n = captured["raw"].shape[1]
    expected = captured["raw"] if source == "raw" else captured["att"][:, :n]
    assert torch.equal(captured["in"], expected)
    # Only the summary's entity token: the gradient reaches the entity transformer's weights
    # through it with "attended" and not with "raw".
    k = cfg.fusion.prefix_tokens
    out["prefix"][:, k + 1].sum().backward()
    grad = sum(p.grad.abs().sum() for p in model.entity_attention.parameters() if p.grad is not None)
    assert (grad > 0) == (source == "attended")


def test_a_stored_config_without_summary_last_keeps_the_prefix_order_of_its_time():
    """A checkpoint's config written before the key existed loads with summary_last false
    (FusionConfig.ADDED_KEYS); a config loaded from YAML gets the current default."""
    from common.config import from_dict, load_config, to_dict
    from model import ModelConfig
    stored = to_dict(ModelConfig())
    del stored["fusion"]["summary_last"]
    assert from_dict(ModelConfig, stored).fusion.summary_last is False
    assert load_config(ModelConfig).fusion.summary_last is ModelConfig().fusion.summary_last
