"""Projected entity tokens: a mark's upright segment seen from the other calibrated views."""
import dataclasses

import torch

from model import build_model, tiny_model_config
from model.dummy_batch import look_at_camera, permute_views, random_batch


def _config():
    cfg = tiny_model_config()
    return dataclasses.replace(cfg, entity=dataclasses.replace(cfg.entity, project=True))


def _project(K, R, t, point):
    cam = R @ point + t
    return (K @ cam)[:2] / cam[2]


def _upright_box(K, R, t, floor_xy, height, size):
    """Pixel box of a person standing at floor_xy: x = centre +- height / 4, y = head..feet."""
    foot = _project(K, R, t, torch.tensor([*floor_xy, 0.0]))
    head = _project(K, R, t, torch.tensor([*floor_xy, height]))
    tall = foot[1] - head[1]
    cx = (foot[0] + head[0]) / 2
    return torch.stack([cx - tall / 4, head[1], cx + tall / 4, foot[1]])


def test_projection_finds_the_same_person_in_the_other_views():
    cfg = _config()
    model = build_model(cfg).eval()
    size = 64
    batch = random_batch(cfg, views=[3], frames=[1], options=[4], cameras=[True], marks=1, image_size=size)
    eyes = [torch.tensor([5.0, 0.0, 2.5]), torch.tensor([0.0, 5.0, 2.0]), torch.tensor([-4.0, -3.0, 3.0])]
    cams = [look_at_camera(eye, torch.tensor([0.0, 0.0, 0.8]), 60.0, size, size) for eye in eyes]
    for v, (K, R, t) in enumerate(cams):
        batch["camera_K"][0, v], batch["camera_R"][0, v], batch["camera_t"][0, v] = K, R, t
    batch["image_hw"][0] = float(size)
    person, height = (0.4, -0.3), 1.7
    batch["mark_mask"][0] = False
    batch["mark_mask"][0, 0, 0, 0] = True  # one mark, in view 0 only
    batch["mark_boxes"][0, 0, 0, 0] = _upright_box(*cams[0], person, height, size)
    batch["mark_label"][0, 0, 0, 0] = 5
    with torch.no_grad():
        views = model.view_encoder(batch)
        out = model.entity_tokenizer.project(views["patch"], views["grid"], batch, views["offset"])
    valid = out["mask"][0]
    assert int(valid.sum()) == 2  # views 1 and 2, never the source view
    targets = sorted(int(u) for u in out["index"][0, valid, 0])
    assert targets == [1, 2]
    for n in valid.nonzero().flatten().tolist():
        u = int(out["index"][0, n, 0])
        assert out["source"][0, n].tolist() == [0, 0, 0]
        expected = _upright_box(*cams[u], person, height, size).clamp(0, size) / size
        # The height comes from the ray through the top-centre of the box, which passes near
        # (not through) the head: sub-pixel error.
        torch.testing.assert_close(out["boxes"][0, n], expected, atol=0.01, rtol=0)
    # All projected tokens of one person share the source's floor point.
    floor = out["floor_xy"][0, valid]
    torch.testing.assert_close(floor[0], floor[1])


def test_projection_needs_a_calibrated_source_and_target():
    cfg = _config()
    model = build_model(cfg).eval()
    batch = random_batch(cfg, views=[3, 2], frames=[1, 1], options=[4, 4], cameras=[False, True])
    with torch.no_grad():
        views = model.view_encoder(batch)
        out = model.entity_tokenizer.project(views["patch"], views["grid"], batch, views["offset"])
    assert not out["mask"][0].any()  # sample 0 has no cameras
    assert (out["tokens"][~out["mask"]] == 0).all()


def test_projected_tokens_keep_view_order_invariance_and_get_gradients():
    torch.manual_seed(0)
    cfg = _config()
    model = build_model(cfg).eval()
    batch = random_batch(cfg, views=[4, 3], frames=[1, 2], options=[4, 4], cameras=[True, True])
    with torch.no_grad():
        ref = model(batch)["option_logits"]
        out = model(permute_views(batch, [3, 1, 0, 2]))["option_logits"]
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)
    model.train()
    model(batch)["option_logits"].clamp_min(-100).sum().backward()
    assert model.entity_tokenizer.projected.grad.abs().sum() > 0
