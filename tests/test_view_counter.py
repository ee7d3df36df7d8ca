"""The per-frame people counter (model.view_counter, loss.view_count) and its targets
(inputs/view_counts.py: the generator's per-view record)."""
import dataclasses
from types import SimpleNamespace as NS

import pytest
import torch

from inputs.track import IGNORE
from inputs.view_counts import MAX_COUNT, image_count, view_count_targets
from model import build_model, tiny_model_config
from model.config import ModelConfig
from model.dummy_batch import permute_views, random_batch, with_answer_labels
from model.view_encoder import ViewCounter
from training.config import LossConfig
from training.losses import CrossViewCriterion

CLIPS = dict(views=[2, 3, 1], frames=[3, 3, 3], options=[4, 4, 5], cameras=[True, True, False])


def _config(width=16):
    return dataclasses.replace(tiny_model_config(), view_counter=width)


def test_targets_read_the_view_record_by_view_id_or_frame_stem():
    spatial = {"view_stats": {"cam0": [3, 4, 1], "cam1": [9, 9, 0]}}
    views = [NS(view_id="cam1", frames=[NS(image="images/s0/cam1_m0a9f.png")]),  # a marked copy of cam1
             NS(view_id="cam0", frames=[NS(image="images/s0/cam0.png")]),
             NS(view_id="cam7", frames=[NS(image="images/s0/cam7.png")])]
    assert view_count_targets(spatial, views, 2).tolist() == [[MAX_COUNT, IGNORE], [3, IGNORE], [IGNORE, IGNORE]]
    clip = {"view_stats": {"cam0_f00": [1, 2, 0], "cam0_f01": [0, 1, 1]}}
    frames = [NS(image="images/t0/cam0_f00.png"), NS(image="images/t0/cam0_f01_m12ab.png"),
              NS(image="images/t0/cam0_f02.png")]
    assert view_count_targets(clip, [NS(view_id="cam0", frames=frames)], 3).tolist() == [[1, 0, IGNORE]]
    assert (view_count_targets({}, views, 1) == IGNORE).all()  # no record, no target
    assert image_count(None, "cam0", "images/s0/cam0.png", 1) is None


def test_counter_off_builds_the_model_of_before():
    torch.manual_seed(0)
    plain = build_model(tiny_model_config())
    torch.manual_seed(0)
    on = build_model(_config())
    assert ModelConfig().view_counter == 0 and plain.view_counter is None
    for name, value in plain.state_dict().items():  # created last: every other weight is the same
        assert torch.equal(value, on.state_dict()[name]), name


def test_counter_starts_as_the_model_without_it_and_outputs_count_logits():
    torch.manual_seed(0)
    plain = build_model(tiny_model_config()).eval()
    torch.manual_seed(0)
    on = build_model(_config()).eval()
    batch = random_batch(on.cfg, **CLIPS)
    out, ref = on(batch), plain(batch)
    b, v, t = batch["frame_mask"].shape
    assert out["count_logits"].shape == (b, v, t, MAX_COUNT + 1) and "count_logits" not in ref
    valid = batch["option_valid"]
    assert torch.equal(out["option_logits"][valid], ref["option_logits"][valid])  # zero-initialised token
    order = [2, 0, 1]
    with torch.no_grad():
        on.view_counter.to_token.weight.normal_()
        on.view_counter.to_entity.weight.normal_()
    a, p = on(batch)["option_logits"], on(permute_views(batch, order))["option_logits"]
    assert torch.allclose(a[valid], p[valid], atol=1e-4)  # still invariant to the order of views
    assert not torch.allclose(a[valid], ref["option_logits"][valid])  # and now the count is read


def test_the_counter_learns_a_count_the_cells_carry():
    torch.manual_seed(0)
    cfg = dataclasses.replace(tiny_model_config(), view_counter=32, patch_dim=8)
    n, cells = 600, 16
    counts = torch.randint(0, MAX_COUNT + 1, (n,))
    tokens = torch.randn(n, cells, 8) * 0.1
    for i, k in enumerate(counts.tolist()):  # k "person" cells carry a marker feature
        tokens[i, torch.randperm(cells)[:k], 0] += 3.0
    counter = ViewCounter(cfg, MAX_COUNT + 1)
    opt = torch.optim.AdamW(counter.parameters(), lr=3e-3)
    for _ in range(300):
        idx = torch.randint(0, 500, (64,))
        loss = torch.nn.functional.cross_entropy(counter(tokens[idx])["logits"], counts[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    acc = (counter(tokens[500:])["logits"].argmax(-1) == counts[500:]).float().mean()
    assert acc > 0.9


def test_the_count_loss_is_masked_and_in_the_total():
    torch.manual_seed(0)
    model = build_model(_config()).train()
    batch = with_answer_labels(random_batch(model.cfg, **CLIPS))
    out = model(batch)
    crit = CrossViewCriterion(LossConfig(view_count=1.0, identity=0.0))
    losses = crit(out, batch)
    keep = (batch["count_target"] != IGNORE) & batch["frame_mask"]
    expected = torch.nn.functional.cross_entropy(out["count_logits"][keep], batch["count_target"][keep])
    assert torch.allclose(losses["loss_view_count"], expected)
    assert torch.allclose(losses["loss"], sum(losses[f"loss_{k}"] for k in ("answer", "evidence", "entity_evidence",
                                                                              "view_count")))
    none = crit(out, dict(batch, count_target=torch.full_like(batch["count_target"], IGNORE)))
    assert none["loss_view_count"].item() == 0.0
    assert "loss_view_count" not in CrossViewCriterion(LossConfig(view_count=0.0, identity=0.0))(out, batch)


@pytest.mark.parametrize("width", [-1])
def test_a_negative_width_is_refused(width):
    from common.config import ConfigError, load_config
    from training.config import TrainConfig
    with pytest.raises(ConfigError, match="view_counter"):
        load_config(TrainConfig, None, [f"model.view_counter={width}"])


def test_a_mark_region_sums_the_cells_its_box_covers():
    cfg = _config(width=4)
    counter = ViewCounter(cfg, MAX_COUNT + 1)
    with torch.no_grad():
        counter.to_entity.weight.copy_(torch.eye(cfg.d_model, 4))  # the region sum itself, in the first 4 dims
    gh = gw = 2
    cells = torch.arange(1.0, 17.0).reshape(1, 1, 1, 4, 4)  # (B, V, T, P, h): cell p holds 4p+1 .. 4p+4
    hw = torch.tensor([[[40.0, 80.0]]])  # height 40, width 80: cells are 20 x 40 px
    boxes = torch.tensor([[[[[0.0, 0.0, 80.0, 40.0],      # the whole image: every cell
                             [40.0, 0.0, 80.0, 20.0],     # exactly the top-right cell
                             [0.0, 20.0, 20.0, 40.0]]]]])  # half of the bottom-left cell
    out = counter.regions(cells, boxes, hw, (gh, gw))[0, 0, 0, :, :4]
    assert torch.allclose(out[0], cells[0, 0, 0].sum(0))
    assert torch.allclose(out[1], cells[0, 0, 0, 1])
    assert torch.allclose(out[2], 0.5 * cells[0, 0, 0, 2])
