"""The JSON Schema (draft 2020-12) of one benchmark sample; ``python -m bench schema`` prints it.

The loader (bench/format.py, bench/validate.py) enforces more than a schema can say (view ids
that resolve, R a rotation, images that exist and stay inside the folder); the schema is for
other tools and for documentation.
"""
from __future__ import annotations

NUMBER = {"type": "number"}
MATRIX3 = {"type": "array", "minItems": 3, "maxItems": 3,
           "items": {"type": "array", "minItems": 3, "maxItems": 3, "items": NUMBER}}


def sample_schema() -> dict:
    camera = {
        "type": "object", "additionalProperties": False,
        "required": ["K", "R", "t", "width", "height"],
        "description": "Pinhole camera: x_cam = R x_world + t, OpenCV axes; K in pixels.",
        "properties": {
            "K": {**MATRIX3, "description": "3x3 intrinsics [[fx,0,cx],[0,fy,cy],[0,0,1]]"},
            "R": {**MATRIX3, "description": "3x3 world-to-camera rotation"},
            "t": {"type": "array", "minItems": 3, "maxItems": 3, "items": NUMBER},
            "width": {"type": "integer", "minimum": 1},
            "height": {"type": "integer", "minimum": 1},
        },
    }
    frame = {"type": "object", "additionalProperties": False, "required": ["image"],
             "properties": {"t": {**NUMBER, "description": "seconds from clip start"},
                            "image": {"type": "string", "description": "path relative to the benchmark folder"}}}
    view = {"type": "object", "additionalProperties": False, "required": ["view_id", "frames"],
            "properties": {"view_id": {"type": "string", "minLength": 1},
                           "frames": {"type": "array", "minItems": 1, "items": frame},
                           "camera": {"oneOf": [camera, {"type": "null"}]}}}
    span = {"type": "object", "required": ["view_id", "t_start", "t_end"],
            "properties": {"view_id": {"type": "string"}, "t_start": NUMBER, "t_end": NUMBER,
                           "entities": {"type": "array", "items": {"type": "integer"}}}}
    mark = {"type": "object", "required": ["view_id", "entity", "label", "box"],
            "properties": {"view_id": {"type": "string"}, "t": NUMBER, "entity": {"type": "integer"},
                           "label": {"type": "string"},
                           "box": {"type": "array", "minItems": 4, "maxItems": 4, "items": NUMBER,
                                   "description": "[x0, y0, x1, y1] in pixels"}}}
    view_ids = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Cross-view benchmark sample",
        "type": "object",
        "additionalProperties": False,
        "required": ["id", "task", "question", "options", "answer", "views", "gt_views"],
        "properties": {
            "id": {"type": "string", "minLength": 1},
            "task": {"type": "string", "minLength": 1},
            "subset": {"enum": ["SVS", "MVN", None], "description": "SSMNBench subset"},
            "axis": {"enum": ["spatial", "temporal", None], "description": "CVBench axis"},
            "granularity": {"enum": ["coarse", "fine", None], "description": "CVBench granularity"},
            "scene": {"type": ["string", "null"], "description": "bootstrap cluster"},
            "views": {"type": "array", "minItems": 1, "items": view},
            "gt_views": {**view_ids, "minItems": 1, "description": "V_GT: views that make it answerable"},
            "extra_views": {**view_ids, "description": "ordered pool for the +k settings"},
            "question": {"type": "string", "minLength": 1},
            "options": {"type": "array", "minItems": 2, "maxItems": 26,
                        "items": {"type": "string", "minLength": 1},
                        "description": "'None of the above', when present, is last"},
            "answer": {"type": "string", "pattern": "^[A-Z]$"},
            "distractors": {"type": "object", "propertyNames": {"pattern": "^[A-Z]$"},
                            "additionalProperties": {"type": "string"},
                            "description": "letter -> failure-mode type of that wrong option"},
            "evidence": {"type": "array", "items": span},
            "marks": {"type": "array", "items": mark},
            "meta": {"type": "object", "description": "free-form, kept and never interpreted"},
        },
    }


def benchmark_schema() -> dict:
    """A benchmark.json file: a list of samples or {"samples": [...], ...}."""
    sample = sample_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Cross-view benchmark file (benchmark.json)",
        "$defs": {"sample": {k: v for k, v in sample.items() if k != "$schema"}},
        "oneOf": [
            {"type": "array", "items": {"$ref": "#/$defs/sample"}},
            {"type": "object", "required": ["samples"],
             "properties": {"samples": {"type": "array", "items": {"$ref": "#/$defs/sample"}}}},
        ],
    }
