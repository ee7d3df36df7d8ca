"""Perception heads (model/perception.py) and their training pieces (pretrain/perception_fit.py)."""
from __future__ import annotations

import torch

from bench.entities import FIELDS
from inputs.entity_batch import CONTACT_WIDTH, match_records, with_true_ids
from model.perception import PerceptionConfig, PerceptionHeads
from pretrain.perception_fit import _batch_targets, _targets, focal_loss, perception_figures, perception_loss

PERSON = {"id": 3, "kind": "person", "box": [40.0, 30.0, 80.0, 200.0], "frac": 3, "shirt": 2, "trousers": 1, "hat": 0,
          "posture": 1, "airborne": 0, "arm_l": 0, "arm_r": -1, "contact": [[0, 1, 2, 1]]}
BALL = {"id": 11, "kind": "object", "box": [150.0, 150.0, 180.0, 180.0], "object_kind": 1, "object_colour": 4}


def _heads():
    torch.manual_seed(0)
    return PerceptionHeads(PerceptionConfig(in_dim=16, width=16), FIELDS, CONTACT_WIDTH)


def test_targets_put_each_centre_at_one_and_its_box_there():
    heat, box, where = _targets([PERSON, BALL], 20, (224.0, 224.0))
    assert heat.shape == (2, 20, 20) and heat.max() == 1.0
    assert where.sum() == 2
    iy, ix = [int(i) for i in torch.nonzero(heat[0] == 1)[0]]
    s = 20 / 224
    l, t, r, b = box[:, iy, ix].tolist()
    assert abs((ix + 0.5 - l) - PERSON["box"][0] * s) < 1e-4 and abs((iy + 0.5 + b) - PERSON["box"][3] * s) < 1e-4


def test_focal_loss_is_lower_for_the_right_map():
    target, _, _ = _targets([PERSON], 20, (224.0, 224.0))
    good = torch.where(target[None] == 1, torch.tensor(4.0), torch.tensor(-4.0))
    assert focal_loss(good, target[None]) < focal_loss(torch.zeros_like(good), target[None])


def test_decode_gives_records_in_the_label_format():
    heads = _heads().eval()
    maps = heads(torch.randn(2, 100, 16))
    maps["heat"] = torch.full_like(maps["heat"], -10.0)
    maps["heat"][0, 0, 5, 6] = 5.0  # one person in image 0
    recs = heads.decode(maps, (224.0, 224.0))
    assert [len(r) for r in recs] == [1, 0]
    rec = recs[0][0]
    assert rec["kind"] == "person" and rec["id"] == -1 and len(rec["box"]) == 4
    assert all(-1 <= rec[f] < FIELDS[f] for f in ("shirt", "posture", "airborne", "arm_l"))
    assert len(rec["contact_p"]) == CONTACT_WIDTH


def test_loss_terms_are_finite_and_train():
    heads = _heads()
    feats = torch.randn(2, 100, 16)
    targets = _batch_targets([[PERSON, BALL], [PERSON]], 20, (224.0, 224.0))
    opt = torch.optim.Adam(heads.parameters(), 1e-2)
    first = None
    for _ in range(30):
        terms = perception_loss(heads, heads(feats), targets)
        assert all(torch.isfinite(v) for v in terms.values())
        opt.zero_grad()
        terms["loss"].backward()
        opt.step()
        first = first if first is not None else float(terms["loss"].detach())
    assert float(terms["loss"].detach()) < first


def test_matching_and_figures():
    pred = [dict(PERSON, id=-1, score=0.9, shirt=2), dict(BALL, id=-1, score=0.8, box=[0.0, 0.0, 10.0, 10.0])]
    assert match_records(pred, [PERSON, BALL]) == [(0, 0)]
    figs = perception_figures({"a": pred}, {"a": [PERSON, BALL]})
    assert figs["person_recall"] == 100.0 and figs["object_recall"] == 0.0 and figs["object_precision"] == 0.0
    assert figs["shirt_accuracy"] == 100.0
    ids = with_true_ids({"images/s000001/cam0_m0123456789ab.png": pred}, {"s000001": {"cam0": [PERSON, BALL]}})
    assert [e["id"] for e in ids["images/s000001/cam0_m0123456789ab.png"]] == [3, -1]


def test_a_finer_level_sets_the_output_grid_and_is_required():
    import pytest
    heads = PerceptionHeads(PerceptionConfig(in_dim=16, fine_dim=8, width=16), FIELDS, CONTACT_WIDTH)
    maps = heads(torch.randn(2, 25, 16), torch.randn(2, 100, 8))  # a 5 x 5 grid beside a 10 x 10 level
    assert maps["heat"].shape == (2, 2, 10, 10) and maps["box"].shape == (2, 4, 10, 10)
    recs = heads.decode(maps, (224.0, 224.0))
    assert len(recs) == 2
    with pytest.raises(ValueError, match="fine"):
        heads(torch.randn(2, 25, 16))


def test_stored_heads_load_on_their_levels_and_name_a_mismatch():
    import pytest

    from inputs.perception import load_heads
    cfg = PerceptionConfig(in_dim=16, fine_dim=8, width=16)
    heads = PerceptionHeads(cfg, FIELDS, CONTACT_WIDTH)
    again = load_heads(heads.state_dict(), PerceptionConfig(width=16), in_dim=16, fine_dim=8)
    x, fine = torch.randn(1, 25, 16), torch.randn(1, 100, 8)
    heads.eval()
    assert torch.equal(again(x, fine)["heat"], heads(x, fine)["heat"])
    with pytest.raises(ValueError, match="16 \\+ 0 channels"):
        load_heads(heads.state_dict(), PerceptionConfig(width=16), in_dim=16, fine_dim=0)


def test_predicted_boxes_are_in_each_images_own_pixels(tmp_path):
    import warnings

    import numpy as np
    from PIL import Image

    from inputs.perception import level_caches, predict_records
    from model.config import tiny_backbone_config
    paths = []
    for i, (w, h) in enumerate([(64, 64), (200, 120), (64, 64)]):
        path = tmp_path / f"im{i}.png"
        Image.fromarray(np.random.default_rng(i).integers(0, 255, (h, w, 3), dtype=np.uint8)).save(path)
        paths.append(str(path.resolve()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny tower is untrained, and says so
        caches = level_caches(tiny_backbone_config(), tmp_path / "cache", fine_layer=-1)
    dim = caches.coarse.expected_shapes()["patch_tokens"][-1]
    heads = PerceptionHeads(PerceptionConfig(in_dim=dim, width=16, max_entities=8), FIELDS, CONTACT_WIDTH)
    torch.nn.init.constant_(heads.heat.bias, 3.0)  # a detection at every peak
    recs = predict_records(heads, paths, caches, batch_size=3)
    wide = max(b for e in recs[paths[1]] for b in e["box"][0::2])
    assert 64 < wide <= 200  # the wide image's boxes reach past 64 px: decoded in its own size
    for p in (paths[0], paths[2]):
        assert recs[p] and max(b for e in recs[p] for b in e["box"]) <= 64
