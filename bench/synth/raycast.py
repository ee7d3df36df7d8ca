"""Vectorised ray-primitive intersection (torch): capsules, spheres, yaw-rotated boxes.

All functions take one ray origin ``o`` (3,) shared by every ray and directions ``d`` (N, 3)
of unit length; they return the entry distance ``t`` (N, n) per primitive, ``inf`` on a miss.
Rays start outside every primitive (cameras stand outside the scene), so the first hit of a
union of convex pieces is the minimum of the pieces' entries.
"""
from __future__ import annotations

import torch

EPS = 1e-4
INF = float("inf")


def _valid(t: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    return torch.where(ok & (t > EPS), t, torch.full_like(t, INF))


def ray_spheres(o: torch.Tensor, d: torch.Tensor, centres: torch.Tensor, radii: torch.Tensor) -> torch.Tensor:
    """Spheres: centres (n, 3), radii (n,) -> t (N, n)."""
    oc = o - centres                                   # (n, 3)
    b = d @ oc.T                                       # (N, n)
    c = (oc * oc).sum(-1) - radii * radii              # (n,)
    h = b * b - c
    t = -b - torch.sqrt(h.clamp(min=0.0))
    return _valid(t, h >= 0)


def ray_capsules(o: torch.Tensor, d: torch.Tensor, a: torch.Tensor, b: torch.Tensor, radii: torch.Tensor) -> torch.Tensor:
    """Capsules with axis a -> b (n, 3) and radii (n,) -> t (N, n).

    A capsule is a finite cylinder plus two end spheres; its entry is the minimum of theirs.
    """
    ba, oa = b - a, o - a                              # (n, 3)
    baba, baoa, oaoa = (ba * ba).sum(-1), (ba * oa).sum(-1), (oa * oa).sum(-1)
    bard, rdoa = d @ ba.T, d @ oa.T                    # (N, n)
    qa = baba - bard * bard
    qb = baba * rdoa - baoa * bard
    qc = baba * oaoa - baoa * baoa - radii * radii * baba
    h = qb * qb - qa * qc
    qa_safe = torch.where(qa.abs() < 1e-9, torch.full_like(qa, 1e-9), qa)
    t_body = (-qb - torch.sqrt(h.clamp(min=0.0))) / qa_safe
    y = baoa + t_body * bard
    body = _valid(t_body, (h >= 0) & (qa.abs() >= 1e-9) & (y > 0) & (y < baba))
    ends = torch.minimum(ray_spheres(o, d, a, radii), ray_spheres(o, d, b, radii))
    return torch.minimum(body, ends)


def _rotate_z(v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate vectors (..., n, 3) about z by angles given as cos/sin (n,)."""
    x = cos * v[..., 0] - sin * v[..., 1]
    y = sin * v[..., 0] + cos * v[..., 1]
    return torch.stack([x, y, v[..., 2]], dim=-1)


def ray_boxes(o: torch.Tensor, d: torch.Tensor, centres: torch.Tensor, halves: torch.Tensor,
              yaws: torch.Tensor) -> torch.Tensor:
    """Boxes rotated by yaw about z: centres, halves (n, 3), yaws (n,) -> t (N, n) (slab test)."""
    cos, sin = torch.cos(yaws), torch.sin(yaws)
    o_l = _rotate_z(o - centres, cos, -sin)            # (n, 3)
    d_l = _rotate_z(d[:, None, :].expand(-1, len(yaws), 3), cos, -sin)  # (N, n, 3)
    d_l = torch.where(d_l.abs() < 1e-9, torch.full_like(d_l, 1e-9), d_l)
    t1 = (-halves - o_l) / d_l
    t2 = (halves - o_l) / d_l
    t_near = torch.minimum(t1, t2).amax(-1)
    t_far = torch.maximum(t1, t2).amin(-1)
    return _valid(t_near, t_far >= t_near)


def box_normals(p: torch.Tensor, centres: torch.Tensor, halves: torch.Tensor, yaws: torch.Tensor) -> torch.Tensor:
    """Outward normals (N, 3) at points p (N, 3) on boxes given per point (N, 3), (N, 3), (N,)."""
    cos, sin = torch.cos(yaws), torch.sin(yaws)
    q = _rotate_z(p - centres, cos, -sin) / halves
    axis = q.abs().argmax(-1)
    n_local = torch.zeros_like(q)
    n_local.scatter_(1, axis[:, None], torch.sign(q.gather(1, axis[:, None])))
    return _rotate_z(n_local, cos, sin)


def capsule_normals(p: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Normals (N, 3) at points p on capsules a -> b given per point."""
    ba = b - a
    s = (((p - a) * ba).sum(-1) / (ba * ba).sum(-1).clamp(min=1e-12)).clamp(0.0, 1.0)
    n = p - (a + s[:, None] * ba)
    return n / n.norm(dim=-1, keepdim=True).clamp(min=1e-9)
