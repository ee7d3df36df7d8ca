"""Set-of-Mark drawing: a box and a numeric label per marked entity (PIL).

One marked image exists per distinct (view, marks) set: the file name is a hash of the marks,
so questions that mark the same entities with the same labels share one file, and views a
question does not mark reuse the clean render.
"""
from __future__ import annotations

import hashlib
import json

from PIL import Image, ImageDraw, ImageFont

MARK_COLOUR = (255, 235, 0)
FRAME_COLOUR = (255, 0, 200)
OUTLINE = (0, 0, 0)


def mark_key(view_id: str, marks: list[dict]) -> str:
    """Stable short hash of one view's marks (entity, label, box)."""
    items = sorted((m["entity"], str(m["label"]), [int(x) for x in m["box"]]) for m in marks if m["view_id"] == view_id)
    return hashlib.sha1(json.dumps([view_id, items]).encode()).hexdigest()[:12]


def _font(size: int):
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow without FreeType sizes
        return ImageFont.load_default()


def draw_marks(image: Image.Image, marks: list[dict]) -> Image.Image:
    """A copy of ``image`` with each mark's box and label; entity 0 frames the whole image."""
    img = image.convert("RGB").copy()
    draw = ImageDraw.Draw(img)
    w, h = img.size
    size = max(8, round(h / 16))
    font = _font(size)
    lw = max(1, round(w / 160))
    for m in marks:
        x0, y0, x1, y1 = (int(v) for v in m["box"])
        label = str(m["label"])
        if m["entity"] == 0:
            colour = FRAME_COLOUR
            draw.rectangle([0, 0, w - 1, h - 1], outline=colour, width=3 * lw)
            tx, ty = 3 * lw + 1, 3 * lw + 1
        else:
            colour = MARK_COLOUR
            draw.rectangle([x0 - lw, y0 - lw, x1 + lw - 1, y1 + lw - 1], outline=OUTLINE, width=lw + 1)
            draw.rectangle([x0, y0, x1 - 1, y1 - 1], outline=colour, width=lw)
            tx, ty = x0, y0 - size - 2
            if ty < 0:  # no room above: inside the box's top-left corner, so it stays on its box
                tx, ty = x0 + lw + 1, y0 + lw + 1
        bbox = draw.textbbox((tx, ty), label, font=font)
        if bbox[2] >= w:  # keep the label inside the image
            tx -= bbox[2] - w + 2
            bbox = draw.textbbox((tx, ty), label, font=font)
        draw.rectangle([bbox[0] - 2, bbox[1] - 1, bbox[2] + 1, bbox[3] + 1], fill=colour, outline=OUTLINE)
        draw.text((tx, ty), label, fill=OUTLINE, font=font)
    return img
