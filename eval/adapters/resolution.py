"""How large each frame is when a zero-shot model sees it: one policy per run.

``--model-arg resolution=...`` takes
  - ``native``          every frame as stored;
  - ``fixed:WxH``       every frame resized to W x H (the SSMNBench resolution ablation uses
                        1920x1080, 1280x720 and 640x480);
  - ``budget:PIXELS``   a fixed total pixel budget per query: split evenly across the views,
                        then across a view's frames, each frame keeping its aspect ratio. More
                        views means smaller frames, so +k settings cost the model no more
                        vision tokens than +0 (the distraction ablation stays compute-matched).

Sizes are rounded to a model's patch multiple (``multiple``) so the processor does not
re-round them behind our back; what was used is logged per query in ``Response.meta``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from eval.adapters.base import Request

_FIXED = re.compile(r"^fixed:(\d+)x(\d+)$")
_BUDGET = re.compile(r"^budget:(\d+)$")


@dataclass(frozen=True)
class ResolutionPolicy:
    """A parsed ``resolution=`` argument."""
    kind: str  # "native", "fixed" or "budget"
    width: int = 0  # fixed: frame width in pixels
    height: int = 0  # fixed: frame height in pixels
    pixels: int = 0  # budget: total pixels over all frames of one query

    @classmethod
    def parse(cls, text: str) -> "ResolutionPolicy":
        """``native`` | ``fixed:WxH`` | ``budget:PIXELS``; ValueError on anything else."""
        text = text.strip().lower()
        if text == "native":
            return cls("native")
        m = _FIXED.match(text)
        if m and int(m.group(1)) > 0 and int(m.group(2)) > 0:
            return cls("fixed", width=int(m.group(1)), height=int(m.group(2)))
        m = _BUDGET.match(text)
        if m and int(m.group(1)) > 0:
            return cls("budget", pixels=int(m.group(1)))
        raise ValueError(f"resolution={text!r}: expected native, fixed:WxH (e.g. fixed:1280x720) "
                         "or budget:PIXELS (e.g. budget:1843200)")

    def __str__(self) -> str:
        if self.kind == "fixed":
            return f"fixed:{self.width}x{self.height}"
        if self.kind == "budget":
            return f"budget:{self.pixels}"
        return "native"

    def frame_sizes(self, request: Request, native_sizes: list[tuple[int, int]],
                    multiple: int = 1) -> list[tuple[int, int]]:
        """(width, height) per frame of ``request`` (in ``request.image_paths`` order).

        Args:
            request: the query; its views decide how a budget is split.
            native_sizes: stored (width, height) per frame, same order.
            multiple: round each side to a multiple of this (>= one multiple).
        """
        if self.kind == "native":
            return [_round(w, h, multiple) for w, h in native_sizes]
        if self.kind == "fixed":
            return [_round(self.width, self.height, multiple)] * len(native_sizes)
        sizes, i = [], 0
        n_views = max(1, len(request.views))
        for view in request.views:
            per_frame = self.pixels / n_views / max(1, len(view.image_paths))
            for _ in view.image_paths:
                w, h = native_sizes[i]
                scale = math.sqrt(per_frame / (w * h))
                # Round down so the rounded frames never exceed the budget.
                sizes.append(_round(w * scale, h * scale, multiple, down=True))
                i += 1
        return sizes


def _round(w: float, h: float, multiple: int, down: bool = False) -> tuple[int, int]:
    step = max(1, multiple)
    op = math.floor if down else round
    return max(step, int(op(w / step)) * step), max(step, int(op(h / step)) * step)


def load_frames(request: Request, policy: ResolutionPolicy, multiple: int = 1) -> tuple[list[Image.Image], list[tuple[int, int]]]:
    """The request's frames as RGB images resized by ``policy``, and their (width, height)."""
    images = [_open_rgb(p) for p in request.image_paths]
    sizes = policy.frame_sizes(request, [im.size for im in images], multiple)
    resized = [im if im.size == size else im.resize(size, Image.Resampling.BICUBIC) for im, size in zip(images, sizes)]
    return resized, sizes


def _open_rgb(path: Path) -> Image.Image:
    with Image.open(path) as im:
        return im.convert("RGB")
