"""Camera geometry: rays, floor points, canonical frame."""
import torch

from model.camera import canonical_offset, floor_points, pixel_rays


def look_at_camera(eye: torch.Tensor, target: torch.Tensor, focal: float, width: int, height: int):
    """OpenCV camera at `eye` looking at `target`, world z up -> (K, R, t)."""
    forward = target - eye
    forward = forward / forward.norm()
    right = torch.linalg.cross(forward, torch.tensor([0.0, 0.0, 1.0]))
    right = right / right.norm()
    down = torch.linalg.cross(forward, right)
    R = torch.stack([right, down, forward])  # rows: camera x, y, z axes in world
    return torch.tensor([[focal, 0.0, width / 2], [0.0, focal, height / 2], [0.0, 0.0, 1.0]]), R, -R @ eye


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


def test_canonical_frame_centres_the_known_cameras():
    eye, K, R, t = _camera()
    Rs, ts = R.expand(1, 2, 3, 3), t.expand(1, 2, 3)
    offset = canonical_offset(Rs, ts, torch.tensor([[True, False]]))
    assert torch.allclose(offset.squeeze(), torch.tensor([eye[0], eye[1], 0.0]), atol=1e-5)
