"""Analytic ray-casting renderer: RGB, instance ids, part ids and depth, with Lambert shading.

Each entity is intersected only with the rays inside its projected bounding box, so the cost
grows with the pixels the entity covers rather than with pixels x primitives. The same pass
gives every entity's *unoccluded* pixel count (its footprint with all others removed), which
the observation model needs for visible fractions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from bench.synth.camera import Camera, pixel_rays, project
from bench.synth.primitives import Entity
from bench.synth.raycast import INF, box_normals, capsule_normals, ray_boxes, ray_capsules, ray_spheres

SKY = (200, 215, 232)
FLOOR_TILES = ((186, 176, 156), (142, 133, 118))
FLOOR_TILE_SIZE = 0.5  # metres per checker square


@dataclass
class RenderOutput:
    """rgb (H, W, 3) uint8; instance (H, W) int32, 0 = floor/background; part (H, W) int16,
    0 = not a body part; depth (H, W) float32 camera z in metres, inf where nothing is hit."""

    rgb: np.ndarray
    instance: np.ndarray
    part: np.ndarray
    depth: np.ndarray
    amodal_px: dict[int, int] = field(default_factory=dict)              # entity -> unoccluded pixels
    amodal_part_px: dict[tuple[int, int], int] = field(default_factory=dict)  # (entity, part) -> pixels


class _Packed:
    """One entity's primitives as tensors, grouped by kind (capsules, spheres, boxes)."""

    def __init__(self, ent: Entity):
        order = [p for p in ent.prims if p.kind == "capsule"] + [p for p in ent.prims if p.kind == "sphere"] \
            + [p for p in ent.prims if p.kind == "box"]
        f = lambda xs: torch.tensor(np.asarray(xs, dtype=np.float32))  # noqa: E731
        caps = [p.params for p in order if p.kind == "capsule"]
        sphs = [p.params for p in order if p.kind == "sphere"]
        boxes = [p.params for p in order if p.kind == "box"]
        self.n_cap, self.n_sph, self.n_box = len(caps), len(sphs), len(boxes)
        self.cap_a = f([c[0] for c in caps]).reshape(-1, 3)
        self.cap_b = f([c[1] for c in caps]).reshape(-1, 3)
        self.cap_r = f([c[2] for c in caps]).reshape(-1)
        self.sph_c = f([s[0] for s in sphs]).reshape(-1, 3)
        self.sph_r = f([s[1] for s in sphs]).reshape(-1)
        self.box_c = f([b[0] for b in boxes]).reshape(-1, 3)
        self.box_h = f([b[1] for b in boxes]).reshape(-1, 3)
        self.box_y = f([b[2] for b in boxes]).reshape(-1)
        self.part = torch.tensor([p.part for p in order], dtype=torch.int16)
        self.colour = f([p.colour for p in order]).reshape(-1, 3) / 255.0

    def intersect(self, o: torch.Tensor, d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """First hit distance (N,) and primitive index (N,) for rays d (N, 3)."""
        ts = []
        if self.n_cap:
            ts.append(ray_capsules(o, d, self.cap_a, self.cap_b, self.cap_r))
        if self.n_sph:
            ts.append(ray_spheres(o, d, self.sph_c, self.sph_r))
        if self.n_box:
            ts.append(ray_boxes(o, d, self.box_c, self.box_h, self.box_y))
        return torch.cat(ts, dim=1).min(dim=1)

    def normals(self, p: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """Surface normals (N, 3) at hit points p of primitives k."""
        out = torch.zeros_like(p)
        is_cap, is_sph = k < self.n_cap, (k >= self.n_cap) & (k < self.n_cap + self.n_sph)
        is_box = k >= self.n_cap + self.n_sph
        if is_cap.any():
            kk = k[is_cap]
            out[is_cap] = capsule_normals(p[is_cap], self.cap_a[kk], self.cap_b[kk])
        if is_sph.any():
            kk = k[is_sph] - self.n_cap
            n = p[is_sph] - self.sph_c[kk]
            out[is_sph] = n / n.norm(dim=-1, keepdim=True).clamp(min=1e-9)
        if is_box.any():
            kk = k[is_box] - self.n_cap - self.n_sph
            out[is_box] = box_normals(p[is_box], self.box_c[kk], self.box_h[kk], self.box_y[kk])
        return out


def pixel_box(ent: Entity, cam: Camera) -> tuple[int, int, int, int] | None:
    """Projected bounding box [x0, x1) x [y0, y1) of an entity, clipped; None if off-screen."""
    lo, hi = ent.bounds()
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    uv, z = project(cam, corners)
    if (z <= 0.05).all():
        return None
    if (z <= 0.05).any():  # straddles the camera plane: fall back to the whole image
        return 0, cam.width, 0, cam.height
    x0, y0 = np.floor(uv.min(0)).astype(int)
    x1, y1 = np.ceil(uv.max(0)).astype(int) + 1
    x0, x1 = max(x0, 0), min(x1, cam.width)
    y0, y1 = max(y0, 0), min(y1, cam.height)
    if x0 >= x1 or y0 >= y1:
        return None
    return int(x0), int(x1), int(y0), int(y1)


def light_direction(azimuth_deg: float, elevation_deg: float) -> torch.Tensor:
    az, el = math.radians(azimuth_deg), math.radians(elevation_deg)
    return torch.tensor([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])


@dataclass
class CameraRays:
    """What a render of one camera computes before any entity: the pixel rays, where each
    ray meets the floor and the floor's checker colour there, and each ray's camera z. A
    temporal scene renders every camera at each of its frames; computing these once per
    camera gives the same pixels (the same element-wise operations on the same values)."""

    origin: torch.Tensor     # (3,) camera centre
    dirs: torch.Tensor       # (H, W, 3) unit ray directions
    t_floor: torch.Tensor    # (H, W) distance to the floor z = 0, inf where the ray misses it
    floor_xy: torch.Tensor   # (F, 3) floor points of the F rays that meet it, row-major
    floor_col: torch.Tensor  # (F, 3) checker albedo at those points
    cam_z: torch.Tensor      # (H, W) camera z of a unit step along each ray


def camera_rays(cam: Camera) -> CameraRays:
    """The per-camera part of ``render`` (see CameraRays)."""
    H, W = cam.height, cam.width
    o, dirs = pixel_rays(cam)
    t_floor = torch.where(dirs[..., 2] < -1e-6, -o[2] / dirs[..., 2], torch.full((H, W), INF))
    meets = torch.isfinite(t_floor)
    fp = o + t_floor[meets][:, None] * dirs[meets]
    parity = (torch.floor(fp[:, 0] / FLOOR_TILE_SIZE) + torch.floor(fp[:, 1] / FLOOR_TILE_SIZE)).remainder(2)
    tiles = torch.tensor(FLOOR_TILES, dtype=torch.float32) / 255.0
    cam_z = dirs @ torch.as_tensor(cam.R[2], dtype=torch.float32)
    return CameraRays(o, dirs, t_floor, fp, tiles[parity.long()], cam_z)


def render(entities: list[Entity], cam: Camera, cfg, shadows: list[tuple[float, float, float]] = (),
           rays: CameraRays | None = None) -> RenderOutput:
    """Ray-cast the floor and ``entities`` as seen by ``cam``.

    Args:
        entities: people and objects; ``eid`` > 0 goes into the instance map.
        cfg: a ``RenderConfig`` (light and ambient; the size comes from the camera).
        shadows: (x, y, radius) soft blob shadows on the floor under people, for depth cues.
        rays: ``camera_rays(cam)``, when the caller renders the same camera several times.
    """
    H, W = cam.height, cam.width
    rays = rays if rays is not None else camera_rays(cam)
    o, dirs = rays.origin, rays.dirs
    depth = torch.full((H, W), INF)
    inst = torch.zeros((H, W), dtype=torch.int32)
    part = torch.zeros((H, W), dtype=torch.int16)
    albedo = torch.zeros((H, W, 3))
    normal = torch.zeros((H, W, 3))
    # flat views of the buffers: entities write their winning pixels by flat index
    depth_f, inst_f, part_f = depth.view(-1), inst.view(-1), part.view(-1)
    albedo_f, normal_f = albedo.view(-1, 3), normal.view(-1, 3)
    out = RenderOutput(None, None, None, None)
    for ent in entities:
        box = pixel_box(ent, cam)
        if box is None:
            continue
        x0, x1, y0, y1 = box
        packed = _Packed(ent)
        d = dirs[y0:y1, x0:x1].reshape(-1, 3)
        t, k = packed.intersect(o, d)
        hit = torch.isfinite(t)
        n_hit = int(hit.sum())
        if n_hit == 0:
            continue
        out.amodal_px[ent.eid] = n_hit
        parts_hit = packed.part[k[hit]].long()
        for pid, cnt in enumerate(torch.bincount(parts_hit).tolist()):
            if cnt and pid:
                out.amodal_part_px[(ent.eid, pid)] = cnt
        flat = (torch.arange(y0, y1)[:, None] * W + torch.arange(x0, x1)[None, :]).reshape(-1)
        win = hit & (t < depth_f[flat])
        idx = win.nonzero().squeeze(1)
        if len(idx) == 0:
            continue
        kw, tw, pix = k[idx], t[idx], flat[idx]
        pts = o + tw[:, None] * d[idx]
        depth_f[pix], inst_f[pix], part_f[pix] = tw, ent.eid, packed.part[kw]
        albedo_f[pix], normal_f[pix] = packed.colour[kw], packed.normals(pts, kw)
    # floor z = 0 takes part in the depth test (it hides what is below it)
    t_floor = rays.t_floor
    meets = torch.isfinite(t_floor)
    floor = meets & (t_floor < depth)
    shown = floor[meets]  # which of the rays that meet the floor see it
    fp, floor_col = rays.floor_xy[shown], rays.floor_col[shown]
    for sx, sy, sr in shadows:
        dist2 = ((fp[:, 0] - sx) ** 2 + (fp[:, 1] - sy) ** 2) / (sr * sr)
        floor_col = floor_col * (1.0 - 0.35 * torch.exp(-2.0 * dist2))[:, None]
    albedo[floor] = floor_col
    normal[floor] = torch.tensor([0.0, 0.0, 1.0])
    depth[floor], inst[floor], part[floor] = t_floor[floor], 0, 0
    light = light_direction(cfg.light_azimuth, cfg.light_elevation)
    shade = cfg.ambient + (1.0 - cfg.ambient) * (normal @ light).clamp(min=0.0)
    rgb = albedo * shade[..., None]
    sky = ~torch.isfinite(depth)
    rgb[sky] = torch.tensor(SKY, dtype=torch.float32) / 255.0
    # ray distance -> camera z
    cam_z = rays.cam_z
    out.rgb = (rgb.clamp(0, 1) * 255.0 + 0.5).to(torch.uint8).numpy()
    out.instance, out.part = inst.numpy(), part.numpy()
    out.depth = (depth * cam_z).numpy().astype(np.float32)
    return out
