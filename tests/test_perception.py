"""Perception heads (model/perception.py) and their training pieces (pretrain/perception_fit.py)."""
from __future__ import annotations

import pytest
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


def _pyramid_maps(batch: int = 2, side: int = 64) -> list[torch.Tensor]:
    """Maps shaped as the tiny CNN's stride-4, 8 and 16 levels (32, 48, 192 channels)."""
    return [torch.randn(batch, c, side // s, side // s) for c, s in ((32, 4), (48, 8), (192, 16))]


def _fpn_heads(**over) -> PerceptionHeads:
    torch.manual_seed(0)
    cfg = PerceptionConfig(neck="fpn", levels=[1, 2, 3], level_dims=[32, 48, 192], width=16, roi=7, **over)
    return PerceptionHeads(cfg, FIELDS, CONTACT_WIDTH)


def test_the_feature_pyramid_puts_the_heads_on_the_stride_4_map_and_pools_7_by_7():
    heads = _fpn_heads().eval()
    maps = heads(*_pyramid_maps())
    assert maps["heat"].shape == (2, 2, 16, 16) and maps["box"].shape == (2, 4, 16, 16)
    assert maps["feat"].shape == (2, 16, 16, 16)  # the finest level's grid: 64 px / 4
    assert heads.roi_mlp[0].in_features == 16 * 7 * 7 + 4
    # the coarsest level reaches the output through the top-down path
    levels = _pyramid_maps()
    changed = [m.clone() for m in levels]
    changed[2] += 1.0
    assert not torch.allclose(heads(*levels)["heat"], heads(*changed)["heat"])
    maps["heat"] = torch.full_like(maps["heat"], -10.0)
    maps["heat"][1, 1, 3, 12] = 5.0  # one object in image 1
    recs = heads.decode(maps, (64.0, 64.0))
    assert [len(r) for r in recs] == [0, 1] and recs[1][0]["kind"] == "object"
    assert set(recs[1][0]) == {"id", "kind", "score", "box", "object_kind", "object_colour"}
    with pytest.raises(ValueError, match="level_dims"):
        PerceptionHeads(PerceptionConfig(neck="fpn", levels=[1, 2, 3], level_dims=[32, 48]), FIELDS, CONTACT_WIDTH)


def test_the_feature_pyramid_trains_with_the_same_loss():
    heads = _fpn_heads()
    levels = _pyramid_maps(side=80)  # 20 x 20 output cells
    targets = _batch_targets([[PERSON, BALL], [PERSON]], 20, (224.0, 224.0))
    opt = torch.optim.Adam(heads.parameters(), 1e-2)
    losses = []
    for _ in range(25):
        terms = perception_loss(heads, heads(*levels), targets)
        opt.zero_grad()
        terms["loss"].backward()
        opt.step()
        losses.append(float(terms["loss"].detach()))
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0]
    assert all(p.grad is not None for p in heads.neck.parameters())


def write_tiny_pyramid_perception(folder, heat_bias: float = 3.0):
    """Untrained fpn heads on the tiny random CNN (64 px), written as a perception folder."""
    import json
    import warnings

    from safetensors.torch import save_file

    from inputs.perception import settings_of, tower_pyramid
    from model.config import tiny_cnn_backbone_config
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")
        source = tower_pyramid(tiny_cnn_backbone_config(64), [1, 2, 3])
    heads = _fpn_heads(max_entities=5)
    torch.nn.init.constant_(heads.heat.bias, heat_bias)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in heads.state_dict().items()}, str(folder / "perception.safetensors"))
    (folder / "perception.json").write_text(json.dumps(settings_of(source, heads.cfg)))
    return folder, heads


def test_pyramid_settings_round_trip_and_predict_on_the_tower(tmp_path):
    """perception.json names the neck and its tower levels; the heads' source is then the tower run
    on each image (no feature cache), and boxes come out in each image's own pixels."""
    import warnings

    import numpy as np
    from PIL import Image

    from inputs.perception import TowerPyramid, load_perception, perception_source, predict_records, read_settings
    folder, heads = write_tiny_pyramid_perception(tmp_path / "heads")
    backbone, fine_layer, cfg = read_settings(folder)
    assert cfg.neck == "fpn" and cfg.levels == [1, 2, 3] and cfg.roi == 7 and backbone.image_size == 64
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*NO pretrained weights.*")
        source = perception_source(backbone, tmp_path / "cache", fine_layer, cfg)
    assert isinstance(source, TowerPyramid) and not (tmp_path / "cache").exists()
    loaded = load_perception(folder, source, cfg)
    for name, tensor in heads.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    paths = []
    for i, (w, h) in enumerate([(64, 64), (200, 120)]):
        paths.append(str(tmp_path / f"im{i}.png"))
        Image.fromarray(np.random.default_rng(i).integers(0, 255, (h, w, 3), dtype=np.uint8)).save(paths[-1])
    recs = predict_records(loaded, paths, source)
    assert recs[paths[0]] and max(b for e in recs[paths[0]] for b in e["box"]) <= 64
    assert 64 < max(b for e in recs[paths[1]] for b in e["box"][0::2]) <= 200
    with pytest.raises(ValueError, match="\\[32, 48, 96\\]"):
        from inputs.perception import load_heads
        load_heads(heads.state_dict(), cfg, level_dims=[32, 48, 96])
