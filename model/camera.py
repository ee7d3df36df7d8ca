"""Camera geometry: rays and floor points per pixel, and the canonical frame of a view set.

Conventions (bench/FORMAT.md, `views[i].camera`): x_cam = R x_world + t, OpenCV axes, K in pixels.
The canonical frame of a sample is the floor-aligned world (z up, floor z = 0, as in the
synthetic data) translated so the centroid of the sample's camera centres lies above the
origin, in units of `world_scale` metres. The centroid is a mean over the view SET, so the
frame does not depend on view order.
"""
from __future__ import annotations

from typing import Tuple

import torch
from kornia.geometry.camera import unproject_points



def camera_centers(R: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """World position of each camera centre: -R^T t.  R (..., 3, 3), t (..., 3) -> (..., 3)."""
    return -(R.transpose(-1, -2) @ t.unsqueeze(-1)).squeeze(-1)


def pixel_rays(K: torch.Tensor, R: torch.Tensor, t: torch.Tensor,
               pixels: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """World-frame rays through pixels.

    Args:
        K, R: (..., 3, 3); t: (..., 3) for one camera per leading index.
        pixels: (..., N, 2) pixel coordinates (x right, y down) in the image K refers to.
    Returns:
        origin (..., 1, 3) camera centre and direction (..., N, 3) unit vectors, world frame.
    """
    n = pixels.shape[-2]
    K_n = K.unsqueeze(-3).expand(*K.shape[:-2], n, 3, 3)
    depth = torch.ones_like(pixels[..., :1])
    # kornia back-projects to the camera-frame point at depth 1 along the optical axis.
    cam_points = unproject_points(pixels, depth, K_n, normalize=False)  # (..., N, 3)
    direction = cam_points @ R  # row-vector form of R^T d
    direction = direction / direction.norm(dim=-1, keepdim=True).clamp_min(1e-8)
    return camera_centers(R, t).unsqueeze(-2), direction


def floor_points(origin: torch.Tensor, direction: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Where rays meet the floor z = 0.

    Args:
        origin (..., 3), direction (..., 3), broadcastable.
    Returns:
        xy (..., 2) floor intersection (zeros where there is none) and hit (...,) bool,
        True when the ray goes down towards the floor from above it.
    """
    oz, dz = origin[..., 2], direction[..., 2]
    hit = (dz < -1e-6) & (oz > 0)
    s = torch.where(hit, -oz / dz.clamp(max=-1e-6), torch.zeros_like(dz))
    xy = origin[..., :2] + s.unsqueeze(-1) * direction[..., :2]
    return torch.where(hit.unsqueeze(-1), xy, torch.zeros_like(xy)), hit


def canonical_offset(R: torch.Tensor, t: torch.Tensor, has_camera: torch.Tensor) -> torch.Tensor:
    """Per-sample translation to the canonical frame: mean (x, y) of the known camera centres.

    Args:
        R (B, V, 3, 3), t (B, V, 3), has_camera (B, V) bool.
    Returns:
        (B, 1, 3) offset to subtract from world points (z stays 0: the floor stays z = 0).
    """
    centers = camera_centers(R, t) * has_camera.unsqueeze(-1)
    count = has_camera.sum(1, keepdim=True).clamp_min(1).unsqueeze(-1)
    offset = centers.sum(1, keepdim=True) / count
    return torch.cat([offset[..., :2], torch.zeros_like(offset[..., 2:])], dim=-1)
