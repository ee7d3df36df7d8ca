"""The JSON Schema (draft 2020-12) of the benchmark format: the one statement of its structure.

``bench/validate.py`` validates every sample against ``sample_schema()`` with ``jsonschema``
(and turns each error into an ``ERROR file:sample:field: message`` line), then checks only what
a schema cannot say: view ids that resolve, R a rotation, finite numbers, images that exist and
stay inside the folder, "None of the above" last, ... (bench/FORMAT.md lists them).
``python -m bench schema`` prints it.

Every object is closed (``additionalProperties: false``), at every depth: a misspelt key is an
error, never silently dropped. Free-form data goes under a sample's ``meta``, the one open
object. ``x-error`` is this project's keyword (JSON Schema ignores unknown keywords): the
message the validator reports when that subschema fails.
"""
from __future__ import annotations

from typing import Any

from bench.constants import AXES, GRANULARITIES, SUBSETS

NUMBER = {"type": "number"}
NON_EMPTY = {"type": "string", "pattern": r"\S", "x-error": "must be a non-empty string"}
LETTER = "^[A-Z]$"


def _list(items: dict, n: int | None = None, **extra: Any) -> dict:
    out: dict[str, Any] = {"type": "array", "items": items}
    if n is not None:
        out.update(minItems=n, maxItems=n)
    return {**out, **extra}


def _object(required: list[str], properties: dict, **extra: Any) -> dict:
    return {"type": "object", "additionalProperties": False, "required": required,
            "properties": properties, **extra}


MATRIX3 = _list(_list(NUMBER, 3, **{"x-error": "a row of a 3x3 matrix must be 3 numbers"}), 3,
                **{"x-error": "must be a 3x3 matrix (list of 3 lists of 3 numbers)"})


def sample_schema() -> dict:
    """The schema of one sample (an item of benchmark.json's list, or a line of benchmark.jsonl)."""
    camera = _object(
        ["K", "R", "t", "width", "height"],
        {
            "K": {**MATRIX3, "description": "3x3 intrinsics [[fx,0,cx],[0,fy,cy],[0,0,1]] in pixels"},
            "R": {**MATRIX3, "description": "3x3 world-to-camera rotation"},
            "t": _list(NUMBER, 3, **{"x-error": "must be a list of 3 numbers",
                                     "description": "world-to-camera translation"}),
            "width": {"type": "integer", "minimum": 1, "x-error": "must be a positive integer",
                      "description": "image width in pixels that K refers to"},
            "height": {"type": "integer", "minimum": 1, "x-error": "must be a positive integer",
                       "description": "image height in pixels that K refers to"},
        },
        description="Pinhole camera: x_cam = R x_world + t, OpenCV axes; null or absent: uncalibrated.")
    camera["type"] = ["object", "null"]  # the object keywords apply to objects only
    frame = _object(["image"], {
        "t": {**NUMBER, "description": "seconds from the clip start (default 0); increasing within a view"},
        "image": {**NON_EMPTY, "x-error": "must be a relative image path",
                  "description": "path relative to the benchmark folder"},
    })
    view = _object(["view_id", "frames"], {
        "view_id": {**NON_EMPTY, "description": "camera name, unique in the sample"},
        "frames": _list(frame, minItems=1, **{"x-error": "must be a non-empty list of frames"}),
        "camera": camera,
    })
    span = _object(["view_id", "t_start", "t_end"], {
        "view_id": {"type": "string", "description": "a view of this sample"},
        "t_start": NUMBER,
        "t_end": NUMBER,
        "entities": _list({"type": "integer"}, **{"x-error": "must be a list of integer entity ids"}),
    }, description="The part of one view that resolves the question.")
    mark = _object(["view_id", "entity", "label", "box"], {
        "view_id": {"type": "string", "description": "a view of this sample"},
        "t": {**NUMBER, "description": "time of the frame the mark is drawn on (default 0)"},
        "entity": {"type": "integer", "x-error": "must be an integer entity id"},
        "label": {"type": ["string", "integer"], "x-error": "must be a string",
                  "description": "the text drawn on the image (an integer is read as its digits)"},
        "box": _list(NUMBER, 4, **{"x-error": "must be [x0, y0, x1, y1] finite pixel coordinates",
                                   "description": "[x0, y0, x1, y1] in pixels"}),
    }, description="A Set-of-Mark label drawn on a frame.")
    view_ids = _list({"type": "string"}, uniqueItems=True)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Cross-view benchmark sample",
        **_object(["id", "task", "question", "options", "answer", "views", "gt_views"], {
            "id": {**NON_EMPTY, "description": "unique in the benchmark; errors name it"},
            "task": {**NON_EMPTY, "description": "task name, e.g. dedup_count"},
            "subset": {"enum": [*SUBSETS, None], "description": "SSMNBench subset"},
            "axis": {"enum": [*AXES, None], "description": "CVBench axis"},
            "granularity": {"enum": [*GRANULARITIES, None], "description": "CVBench granularity"},
            "scene": {"type": ["string", "null"], "description": "bootstrap cluster"},
            "views": _list(view, minItems=1, **{"x-error": "must be a non-empty list"}),
            "gt_views": {**view_ids, "minItems": 1, "x-error": "must name at least one view, each once",
                         "description": "V_GT: views that make it answerable"},
            "extra_views": {**view_ids, "x-error": "must be a list of view ids, each once",
                            "description": "ordered pool for the +k settings"},
            "question": NON_EMPTY,
            "options": _list(NON_EMPTY, minItems=2, maxItems=26,
                             **{"x-error": "must be a list of at least 2 option texts (at most 26)",
                                "description": "'None of the above', when present, is last"}),
            "answer": {"type": "string", "pattern": LETTER, "x-error": "must be one capital letter",
                       "description": "the letter of the right option"},
            "distractors": {"type": "object", "propertyNames": {"pattern": LETTER},
                            "additionalProperties": {**NON_EMPTY, "x-error": "the type must be a non-empty string"},
                            "x-error": "must be an object mapping option letters to distractor types",
                            "description": "letter -> failure-mode type of that wrong option"},
            "evidence": _list(span, **{"x-error": "must be a list of spans"}),
            "marks": _list(mark, **{"x-error": "must be a list"}),
            "meta": {"type": "object", "x-error": "must be an object",
                     "description": "free-form, kept and never interpreted"},
        }),
    }


def benchmark_schema() -> dict:
    """A benchmark.json file: a list of samples or {"samples": [...], ...}; the other keys of
    that object are the file's free-form metadata (name, generator config, import source)."""
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
