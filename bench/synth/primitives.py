"""Geometric primitives that scenes are built from and the renderer ray-casts.

A ``Primitive`` is one capsule, sphere or yaw-rotated box with a body-part id and an RGB
albedo; an ``Entity`` is a person or an object: an instance id plus its primitives.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Named colours used for shirts, trousers, hats and objects; questions use these names.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (205, 40, 40), "blue": (40, 85, 210), "green": (40, 150, 60), "yellow": (235, 205, 40),
    "orange": (245, 130, 25), "purple": (135, 60, 175), "white": (238, 238, 238),
    "pink": (245, 135, 190), "black": (35, 35, 35), "grey": (125, 125, 125),
    "brown": (120, 75, 40), "cyan": (40, 195, 205),
}


@dataclass
class Primitive:
    """kind: 'capsule' (a, b, radius), 'sphere' (centre, radius) or 'box' (centre, half, yaw)."""

    kind: str
    params: tuple  # capsule: (a(3), b(3), r); sphere: (c(3), r); box: (c(3), half(3), yaw)
    part: int      # body-part id (see body.PARTS), 0 for objects
    colour: tuple[int, int, int]

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Axis-aligned world bounding box (lo, hi), each (3,)."""
        if self.kind == "capsule":
            a, b, r = np.asarray(self.params[0]), np.asarray(self.params[1]), self.params[2]
            return np.minimum(a, b) - r, np.maximum(a, b) + r
        if self.kind == "sphere":
            c, r = np.asarray(self.params[0]), self.params[1]
            return c - r, c + r
        c, half, yaw = np.asarray(self.params[0]), np.asarray(self.params[1]), self.params[2]
        cy, sy = abs(np.cos(yaw)), abs(np.sin(yaw))
        ext = np.array([cy * half[0] + sy * half[1], sy * half[0] + cy * half[1], half[2]])
        return c - ext, c + ext


@dataclass
class Entity:
    """A renderable instance: ``eid`` goes into the instance-id map (0 = floor/background)."""

    eid: int
    prims: list[Primitive] = field(default_factory=list)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        los, his = zip(*(p.bounds() for p in self.prims))
        return np.min(los, axis=0), np.max(his, axis=0)
