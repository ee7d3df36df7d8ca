"""Pinhole cameras: look-at extrinsics, intrinsics, per-pixel rays and projection.

Conventions (bench/FORMAT.md, `views[i].camera`): world z up, floor z = 0, metres; x_cam = R x_world + t with
OpenCV axes (x right, y down, z forward). Pixel (i, j) has its centre at u = i, v = j, so the
principal point of a W x H image is ((W - 1) / 2, (H - 1) / 2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from kornia.geometry.camera import project_points, unproject_points
from kornia.geometry import create_meshgrid


@dataclass
class Camera:
    """One calibrated view. K: (3, 3) pixels; R: (3, 3); t: (3,)."""

    view_id: str
    K: np.ndarray
    R: np.ndarray
    t: np.ndarray
    width: int
    height: int

    @property
    def centre(self) -> np.ndarray:
        """Camera centre in world coordinates, (3,)."""
        return -self.R.T @ self.t

    def to_json(self) -> dict:
        r6 = lambda a: np.round(np.asarray(a, dtype=np.float64), 6).tolist()  # noqa: E731
        return {"K": r6(self.K), "R": r6(self.R), "t": r6(self.t),
                "width": self.width, "height": self.height}


def look_at(eye: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World-to-camera (R, t) of a camera at ``eye`` looking at ``target``, z up, no roll."""
    forward = target - eye
    forward = forward / np.linalg.norm(forward)
    right = np.cross(forward, np.array([0.0, 0.0, 1.0]))
    right = right / np.linalg.norm(right)
    down = np.cross(forward, right)
    R = np.stack([right, down, forward])
    return R, -R @ eye


def intrinsics(width: int, height: int, fov_deg: float) -> np.ndarray:
    """K for a horizontal field of view, square pixels, centred principal point."""
    f = (width / 2.0) / math.tan(math.radians(fov_deg) / 2.0)
    return np.array([[f, 0.0, (width - 1) / 2.0], [0.0, f, (height - 1) / 2.0], [0.0, 0.0, 1.0]])


def make_camera(view_id: str, eye, target, fov_deg: float, width: int, height: int) -> Camera:
    R, t = look_at(np.asarray(eye, float), np.asarray(target, float))
    return Camera(view_id, intrinsics(width, height, fov_deg), R, t, width, height)


def pixel_rays(cam: Camera) -> tuple[torch.Tensor, torch.Tensor]:
    """World-space rays through every pixel centre.

    Returns:
        origin: (3,) camera centre; dirs: (H, W, 3) unit directions.
    """
    grid = create_meshgrid(cam.height, cam.width, normalized_coordinates=False, dtype=torch.float64)[0]
    K = torch.as_tensor(cam.K, dtype=torch.float64)
    depth = torch.ones(cam.height, cam.width, 1, dtype=torch.float64)
    pts_cam = unproject_points(grid, depth, K)  # (H, W, 3) on the z = 1 plane
    R = torch.as_tensor(cam.R, dtype=torch.float64)
    dirs = pts_cam @ R  # R^T applied to row vectors: camera -> world
    dirs = dirs / dirs.norm(dim=-1, keepdim=True)
    origin = torch.as_tensor(cam.centre, dtype=torch.float64)
    return origin.float(), dirs.float()


def project(cam: Camera, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Project world points (N, 3) to pixels (N, 2); also returns camera depth z (N,)."""
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    cam_pts = pts @ cam.R.T + cam.t
    uv = project_points(torch.as_tensor(cam_pts), torch.as_tensor(cam.K)).numpy()
    return uv, cam_pts[:, 2]


def sample_ring_cameras(rng: np.random.Generator, n: int, cfg, width: int, height: int,
                        centre_xy=(0.0, 0.0)) -> list[Camera]:
    """``n`` cameras evenly spaced on a ring (with jitter) at varied height, distance and aim.

    Args:
        cfg: a ``CameraConfig``. The jittered aim point makes some views partial on purpose.
    """
    cams = []
    phase = rng.uniform(0, 2 * math.pi)
    for k in range(n):
        yaw = phase + 2 * math.pi * k / n + math.radians(rng.uniform(-cfg.yaw_jitter, cfg.yaw_jitter))
        radius = rng.uniform(cfg.min_radius, cfg.max_radius)
        eye = np.array([centre_xy[0] + radius * math.cos(yaw), centre_xy[1] + radius * math.sin(yaw),
                        rng.uniform(cfg.min_elevation, cfg.max_elevation)])
        aim = np.array([centre_xy[0] + rng.uniform(-cfg.aim_jitter, cfg.aim_jitter),
                        centre_xy[1] + rng.uniform(-cfg.aim_jitter, cfg.aim_jitter),
                        rng.uniform(0.5, 1.1)])
        cams.append(make_camera(f"cam{k}", eye, aim, rng.uniform(cfg.min_fov, cfg.max_fov), width, height))
    return cams
