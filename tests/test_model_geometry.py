"""Camera geometry: rays, floor points, canonical frame."""
import math

import torch

from model.camera import canonical_offset, floor_points, pixel_rays, ray_features
from model.config import CameraConfig
from model.dummy_batch import look_at_camera


def _camera():
    eye = torch.tensor([3.0, -2.0, 2.5])
    K, R, t = look_at_camera(eye, torch.tensor([0.5, 0.5, 0.0]), focal=40.0, width=64, height=48)
    return eye, K, R, t


def test_principal_point_ray_is_optical_axis():
    eye, K, R, t = _camera()
    principal = K[:2, 2].view(1, 2)
    origin, direction = pixel_rays(K, R, t, principal)
    axis = R.T @ torch.tensor([0.0, 0.0, 1.0])  # camera +z in world coordinates
    assert torch.allclose(origin.squeeze(), eye, atol=1e-5)
    assert torch.allclose(direction.squeeze(), axis, atol=1e-6)


def test_floor_point_matches_hand_computation():
    # Camera 2 m above the origin, looking straight down (camera z = world -z), f = 100 px.
    K = torch.tensor([[100.0, 0.0, 50.0], [0.0, 100.0, 40.0], [0.0, 0.0, 1.0]])
    R = torch.tensor([[1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, -1.0]])
    t = -R @ torch.tensor([0.0, 0.0, 2.0])
    pixel = torch.tensor([[70.0, 30.0]])  # 20 px right, 10 px up of the principal point
    origin, direction = pixel_rays(K, R, t, pixel)
    xy, hit = floor_points(origin, direction)
    # By hand: camera ray (0.2, -0.1, 1) -> world (0.2, 0.1, -1); from height 2 -> (0.4, 0.2).
    assert hit.item()
    assert torch.allclose(xy.squeeze(), torch.tensor([0.4, 0.2]), atol=1e-5)


def test_upward_ray_has_no_floor_point():
    xy, hit = floor_points(torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.0, 0.6, 0.8]))
    assert not hit.item() and torch.all(xy == 0)


def test_ray_features_pluecker_and_canonical_frame():
    eye, K, R, t = _camera()
    cfg = CameraConfig()
    Ks, Rs, ts = K.expand(1, 2, 3, 3), R.expand(1, 2, 3, 3), t.expand(1, 2, 3)
    offset = canonical_offset(Rs, ts, torch.tensor([[True, False]]))
    assert torch.allclose(offset.squeeze(), torch.tensor([eye[0], eye[1], 0.0]), atol=1e-5)
    pixels = torch.rand(1, 2, 5, 2) * 40
    feats = ray_features(Ks, Rs, ts, pixels, offset, cfg)
    d, moment = feats[..., :3], feats[..., 3:6]
    origin = torch.tensor([0.0, 0.0, eye[2]])  # camera centre in the canonical frame
    assert torch.allclose(moment, torch.cross(origin.expand_as(d), d, dim=-1), atol=1e-5)
    assert torch.allclose((d * moment).sum(-1), torch.zeros(1, 2, 5), atol=1e-5)
    assert math.isclose(d.norm(dim=-1).mean().item(), 1.0, rel_tol=1e-5)
