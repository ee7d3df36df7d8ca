"""Renderer against analytic cases: disc area, occlusion order, projection, culling."""
from __future__ import annotations

import math

import numpy as np
import pytest

from bench.synth.camera import make_camera, project
from bench.synth.config import RenderConfig
from bench.synth.primitives import Entity, Primitive
from bench.synth.renderer import camera_rays, render

W = H = 64


def _cam(fov=40.0):
    # camera on the +x axis, 5 m from the origin at 1 m height, looking at (0, 0, 1)
    return make_camera("cam0", (5.0, 0.0, 1.0), (0.0, 0.0, 1.0), fov, W, H)


def _sphere(eid, centre, r, colour=(200, 0, 0)):
    return Entity(eid, [Primitive("sphere", (np.asarray(centre, float), r), 0, colour)])


def test_sphere_area_matches_projected_disc():
    cam = _cam()
    r, dist = 0.5, 5.0
    out = render([_sphere(1, (0.0, 0.0, 1.0), r)], cam, RenderConfig())
    f = cam.K[0, 0]
    rho = f * r / math.sqrt(dist * dist - r * r)  # silhouette radius of an on-axis sphere
    area = (out.instance == 1).sum()
    assert area == pytest.approx(math.pi * rho * rho, rel=0.04)
    assert out.amodal_px[1] == area  # nothing occludes it


def test_occlusion_order_and_depth():
    cam = _cam()
    near, far = _sphere(1, (1.0, 0.0, 1.0), 0.3), _sphere(2, (-1.0, 0.0, 1.0), 0.6)
    for order in ([near, far], [far, near]):  # result must not depend on drawing order
        out = render(order, cam, RenderConfig())
        c = (H // 2, W // 2)
        assert out.instance[c] == 1
        assert out.depth[c] == pytest.approx(4.0 - 0.3, abs=0.02)
        assert (out.instance == 2).sum() < out.amodal_px[2]  # the far sphere is partly hidden
        assert (out.instance == 1).sum() == out.amodal_px[1]


def test_projection_of_known_point_matches_rendered_centroid():
    cam = make_camera("cam0", (4.0, 1.0, 1.6), (0.0, 0.0, 0.8), 45.0, W, H)
    point = np.array([0.4, -0.3, 1.1])
    out = render([_sphere(1, point, 0.06)], cam, RenderConfig())
    ys, xs = np.nonzero(out.instance == 1)
    uv, z = project(cam, point[None])
    assert z[0] > 0
    assert abs(xs.mean() - uv[0, 0]) < 0.5 and abs(ys.mean() - uv[0, 1]) < 0.5
    # the projection itself against the pinhole formula
    pc = cam.R @ point + cam.t
    assert np.allclose(uv[0], (cam.K @ pc)[:2] / pc[2], atol=1e-6)


def test_capsule_and_box_parts_and_floor():
    cam = _cam()
    body = Entity(3, [Primitive("capsule", (np.array([0.0, 0.0, 0.3]), np.array([0.0, 0.0, 1.6]), 0.2), 2, (0, 0, 200)),
                      Primitive("box", (np.array([0.0, 0.6, 0.25]), np.array([0.2, 0.2, 0.25]), 0.3), 0, (0, 200, 0))])
    out = render([body], cam, RenderConfig())
    assert set(np.unique(out.part)) == {0, 2}
    assert (out.instance == 3).sum() == out.amodal_px[3]
    assert out.amodal_part_px[(3, 2)] == ((out.instance == 3) & (out.part == 2)).sum()
    assert (out.instance == 0).any() and np.isinf(out.depth).any()  # floor and sky


def test_entities_outside_the_view_are_culled():
    cam = _cam()
    out = render([_sphere(1, (0.0, 0.0, 1.0), 0.3), _sphere(2, (8.0, 0.0, 1.0), 0.3)], cam, RenderConfig())
    assert 2 not in out.amodal_px and (out.instance == 2).sum() == 0


def test_rays_computed_once_per_camera_give_the_same_pixels_at_every_frame():
    """A temporal scene reuses camera_rays(cam) for each frame: the render must not change."""
    cam = make_camera("cam0", (4.0, 1.0, 2.0), (0.0, 0.0, 0.5), 50.0, W, H)
    rays = camera_rays(cam)
    for x in (0.0, 0.4, -0.3):  # the "person" moves, its shadow with it
        scene = [_sphere(1, (x, 0.0, 0.6), 0.4), _sphere(2, (-1.0, x, 0.3), 0.3, (0, 0, 200))]
        shadows = [(x, 0.0, 0.5)]
        fresh, cached = render(scene, cam, RenderConfig(), shadows), render(scene, cam, RenderConfig(), shadows, rays)
        for name in ("rgb", "instance", "part", "depth"):
            np.testing.assert_array_equal(getattr(cached, name), getattr(fresh, name), err_msg=name)
        assert cached.amodal_px == fresh.amodal_px
