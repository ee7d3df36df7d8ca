"""The per-person track (model/track.py, fusion.track) and its targets (inputs/track.py)."""
import dataclasses

import pytest
import torch

from inputs.track import CHANNEL, IGNORE, STATE_ID, TRACK_STATES, UNSEEN, state_name, track_targets
from model import build_model, tiny_model_config
from model.config import FusionConfig
from model.dummy_batch import permute_views, random_batch, with_answer_labels
from training.config import LossConfig
from training.losses import CrossViewCriterion

CLIPS = dict(views=[2, 3, 1], frames=[8, 8, 8], options=[4, 4, 5], cameras=[True, True, False])


def _config(track=True, oracle=False, last="unmarked"):
    cfg = tiny_model_config()
    return dataclasses.replace(cfg, fusion=dataclasses.replace(cfg.fusion, track=track, track_oracle=oracle,
                                                               track_last=last))


def fit_steps(model, loss_fn, steps: int = 40, lr: float = 3e-3) -> tuple[float, float]:
    """AdamW steps on ``loss_fn()``; the first and the last loss."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = loss_fn()
        losses.append(float(loss))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return losses[0], losses[-1]


def test_the_vocabulary_size_is_the_configured_one():
    assert FusionConfig().track_states == len(TRACK_STATES)
    assert TRACK_STATES[UNSEEN] == "unseen" and len(set(TRACK_STATES)) == len(TRACK_STATES)


def test_every_temporal_record_kind_maps_to_a_state():
    assert state_name("repetition_count", "1") == "jump:1"
    assert state_name("limb_repetition_count", "0") == "wave:0"
    assert state_name("motion_recognition", "squat") == "action:squat"
    assert state_name("limb_action_order", [None, "wave"]) == "hands:none/wave"
    assert state_name("trajectory", "green pole") == "place:green pole"
    assert state_name("limb_contact_over_time", {"grey ball": "hidden", "red box": "overlap"}) == "touch:red box"
    assert state_name("limb_contact_over_time", {"grey ball": "hidden", "red box": "separated"}) == "touch:none"
    assert state_name("limb_contact_over_time", {"grey ball": "hidden"}) == "unseen"
    assert state_name("trajectory", None) == "unseen"
    assert state_name("relation", "1") is None  # spatial tasks have no per-frame record
    assert state_name("limb_action_order", "down") is None  # malformed: not a pair
    assert set(CHANNEL) == {"repetition_count", "limb_repetition_count", "motion_recognition",
                            "limb_action_order", "trajectory", "limb_contact_over_time"}


def test_targets_follow_the_view_set_order_and_padding():
    meta = {"observations": {"cam0": {"obs": [None, "0", "1"]}, "cam1": {"obs": ["1", None, None]}}}
    out = track_targets("repetition_count", meta, ["cam1", "cam0", "cam9"], 4)
    assert out.tolist() == [[STATE_ID["jump:1"], UNSEEN, UNSEEN, IGNORE],
                            [UNSEEN, STATE_ID["jump:0"], STATE_ID["jump:1"], IGNORE],
                            [IGNORE] * 4]
    assert (track_targets("relation", meta, ["cam0"], 3) == IGNORE).all()
    assert (track_targets("repetition_count", {}, ["cam0"], 3) == IGNORE).all()
    assert (track_targets("trajectory", {"observations": {"cam0": {"obs": ["mauve blob"]}}}, ["cam0"], 1)
            == IGNORE).all()  # outside the vocabulary: no target rather than a wrong one


def test_track_off_builds_the_model_of_before():
    torch.manual_seed(0)
    plain = build_model(tiny_model_config())
    torch.manual_seed(0)
    off = build_model(_config(track=False))
    assert off.track is None
    assert plain.state_dict().keys() == off.state_dict().keys()
    for name, value in plain.state_dict().items():
        assert torch.equal(value, off.state_dict()[name]), name


def test_track_outputs_state_logits_and_one_more_prefix_token():
    torch.manual_seed(0)
    model = build_model(_config()).eval()
    torch.manual_seed(0)
    plain = build_model(_config(track=False)).eval()
    batch = random_batch(model.cfg, **CLIPS)
    out, ref = model(batch), plain(batch)
    b, v, t = batch["frame_mask"].shape
    assert out["track_logits"].shape == (b, v, t, model.cfg.fusion.track_states)
    assert out["prefix"].shape[1] == ref["prefix"].shape[1] + 1
    assert torch.isfinite(out["option_logits"][batch["option_valid"]]).all()


def test_the_track_token_closes_only_unmarked_prefixes():
    """track_last "unmarked": a marked question keeps the summary tokens last and gets the track
    token just before them; an unmarked one ends on the track token; "all" ends every prefix on it."""
    torch.manual_seed(0)
    model = build_model(_config(last="all")).eval()
    batch = random_batch(model.cfg, **CLIPS)
    batch["mark_mask"][1] = False  # sample 1 has no marks, samples 0 and 2 do
    assert batch["mark_mask"][0].any() and batch["mark_mask"][2].any()
    all_last = model(batch)["prefix"]
    model.cfg = _config(last="unmarked")
    prefix = model(batch)["prefix"]
    k = 1 + (2 if model.cfg.fusion.summary_tokens else 0)  # the track token and the summary tokens
    assert torch.equal(prefix[1], all_last[1])
    for i in (0, 2):
        assert torch.equal(prefix[i, :-k], all_last[i, :-k])
        assert torch.equal(prefix[i, -k], all_last[i, -1])  # the track token, now before the summary
        assert torch.equal(prefix[i, -k + 1:], all_last[i, -k:-1])


def test_track_keeps_the_model_invariant_to_view_order():
    torch.manual_seed(0)
    model = build_model(_config()).eval()
    batch = random_batch(model.cfg, **CLIPS)
    order = [2, 0, 1]
    a = model(batch)["option_logits"]
    b = model(permute_views(batch, order))["option_logits"]
    valid = batch["option_valid"]
    assert torch.allclose(a[valid], b[valid], atol=1e-4)


def test_the_oracle_reads_the_recorded_states_and_only_then():
    torch.manual_seed(0)
    batch = random_batch(_config(), **CLIPS)
    other = dict(batch, track_target=torch.where(batch["track_target"] >= 0,
                                                 (batch["track_target"] + 7) % len(TRACK_STATES),
                                                 batch["track_target"]))
    torch.manual_seed(0)
    oracle = build_model(_config(oracle=True)).eval()
    assert not torch.allclose(oracle(batch)["option_logits"], oracle(other)["option_logits"])
    torch.manual_seed(0)
    learned = build_model(_config()).eval()
    assert torch.equal(learned(batch)["option_logits"], learned(other)["option_logits"])
    missing = {k: x for k, x in batch.items() if k != "track_target"}
    try:
        oracle(missing)
    except ValueError as err:
        assert "track_target" in str(err)
    else:
        raise AssertionError("the oracle ran without recorded states")


def test_the_track_loss_is_masked_and_teaches_the_state_head():
    torch.manual_seed(0)
    model = build_model(_config()).train()
    batch = with_answer_labels(random_batch(model.cfg, **CLIPS))
    crit = CrossViewCriterion(LossConfig(track=1.0, identity=0.0))
    spatial = dict(batch, track_target=torch.full_like(batch["track_target"], IGNORE))
    assert float(crit(model(spatial), spatial)["loss_track"]) == 0.0
    first, last = fit_steps(model, lambda: crit.loss_track(model(batch), batch))
    assert last < 0.5 * first
    weightless = CrossViewCriterion(LossConfig(track=0.0, identity=0.0))(model(batch), batch)
    assert "loss_track" not in weightless


def test_forward_track_is_the_track_of_forward_and_trains_only_what_it_reads():
    torch.manual_seed(0)
    model = build_model(_config()).eval()
    batch = with_answer_labels(random_batch(model.cfg, **CLIPS))
    with torch.no_grad():
        assert torch.allclose(model.forward_track(batch)["track_logits"], model(batch)["track_logits"], atol=1e-6)
    crit = CrossViewCriterion(LossConfig(answer=0.0, evidence=0.0, entity_evidence=0.0, identity=0.0,
                                         view_count=0.0, track=1.0))
    assert crit.track_only and not CrossViewCriterion(LossConfig(track=1.0)).track_only
    model.train()
    grads = []
    for run in (model, model.forward_track):
        model.zero_grad(set_to_none=True)
        losses = crit(run(batch), batch)
        assert set(losses) == {"loss", "loss_track"}
        losses["loss"].backward()
        grads.append({n: p.grad for n, p in model.named_parameters()})
    full, track = grads
    assert all((full[n] is None) == (track[n] is None) for n in full)
    assert all(torch.allclose(full[n], track[n], atol=1e-6) for n in full if full[n] is not None)
    assert all(g is None for n, g in track.items() if n.startswith(("language_head.lm.transformer.h", "fusion.", "evidence.", "entity_")))
    assert any(g is not None and g.abs().sum() > 0 for n, g in track.items() if n.startswith("track."))
    with pytest.raises(ValueError, match="fusion.track"):
        build_model(_config(track=False)).forward_track(batch)
