"""Validation of raw benchmark samples: structure by JSON Schema, then what a schema cannot say.

The structure (keys, types, sizes, enums; no unknown key at any depth) is bench/schema.py's,
checked with ``jsonschema``. Each error becomes a ``Problem`` naming the file, the sample id
and the field path (``views[1].camera.K``) instead of raising, so one pass reports everything
that is wrong. A structurally valid sample then gets the hand-written checks: view ids that
resolve and do not repeat, the answer and distractor letters in range, distinct options with
"None of the above" last, finite numbers, K and R valid, increasing frame times, ordered spans
and boxes, and images that exist, decode and stay inside the folder.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from jsonschema import Draft202012Validator, ValidationError

from bench.constants import LETTERS, NOTA as NOTA_TEXT
from bench.images import ImageInfo, inspect_images
from bench.schema import sample_schema

NOTA = NOTA_TEXT.lower()


@dataclass(frozen=True)
class Problem:
    file: str
    sample: str  # sample id, with "(line N)" for .jsonl; "-" when not sample-specific
    field: str  # field path such as views[1].camera.K; "-" for the whole record
    message: str

    def line(self) -> str:
        return f"ERROR {self.file}:{self.sample}:{self.field}: {self.message}"


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@lru_cache(maxsize=1)
def _validator() -> Draft202012Validator:
    schema = sample_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def field_path(parts: Iterable[Any]) -> str:
    """("views", 1, "camera", "K") -> "views[1].camera.K"; () -> "-" (the whole record)."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "-"


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def schema_problems(raw: Any) -> list[tuple[str, str]]:
    """(field path, message) for every way ``raw`` breaks bench/schema.py, in document order."""
    found: list[tuple[str, str]] = []
    errors = _validator().iter_errors(raw)
    for error in sorted(errors, key=lambda e: [(isinstance(p, str), p) for p in e.absolute_path]):
        found.extend(_translate(error))
    return list(dict.fromkeys(found))  # jsonschema reports each missing required key once per key


def _translate(error: ValidationError) -> list[tuple[str, str]]:
    path = list(error.absolute_path)
    where = field_path(path)
    if error.validator == "additionalProperties" and error.validator_value is False:
        known = set(error.schema.get("properties", {}))
        hint = " (put free-form data under 'meta')" if not path else ""
        return [(field_path(path + [key]), f"unknown field{hint}")
                for key in sorted(set(error.instance) - known)]
    if error.validator == "required":
        return [(field_path(path + [key]), "required field is missing")
                for key in error.validator_value if key not in error.instance]
    if error.validator == "type" and not path:
        return [("-", "a sample must be a JSON object")]
    if "propertyNames" in error.schema_path:  # the instance is the offending key
        return [(field_path(path + [error.instance]), f"{error.instance!r} is not an option letter")]
    if error.validator == "enum":
        return [(where, f"{error.instance!r} is not one of {error.validator_value}")]
    message = error.schema.get("x-error")
    if message:
        return [(where, f"{message}, got {_short(error.instance)}")]
    return [(where, error.message)]


class SampleChecker:
    """Validates raw sample dicts of one benchmark file; caches image checks across samples."""

    def __init__(self, file: Path, root: Path, check_images: bool = True):
        self.file = file
        self.root = root.resolve()
        self.check_images = check_images
        self._image_ok: dict[str, str | None] = {}  # rel path -> None if fine, else the reason
        self._inspected: dict[str, ImageInfo] = {}  # absolute path -> hash and decode result

    def prefetch_images(self, records: list[Any]) -> None:
        """Decode and hash every image the records name, in parallel, before the serial checks."""
        if not self.check_images:
            return
        paths = []
        for raw in records:
            views = raw.get("views") if isinstance(raw, dict) else None
            for view in views if isinstance(views, list) else []:
                frames = view.get("frames") if isinstance(view, dict) else None
                for frame in frames if isinstance(frames, list) else []:
                    rel = frame.get("image") if isinstance(frame, dict) else None
                    if isinstance(rel, str) and rel and not Path(rel).is_absolute():
                        resolved = (self.root / rel).resolve()
                        if resolved.is_relative_to(self.root) and resolved.is_file():
                            paths.append(resolved)
        self._inspected.update(inspect_images(paths, root=self.root))

    def check(self, raw: Any, where: str = "") -> list[Problem]:
        """Every problem of one raw sample: its schema errors, or, when it has none, what the
        schema cannot say."""
        sid = raw.get("id") if isinstance(raw, dict) else None
        label = sid if isinstance(sid, str) and sid else "<no id>"
        if where:
            label = f"{label} ({where})"
        problems: list[Problem] = []

        def bad(field: str, message: str) -> None:
            problems.append(Problem(str(self.file), label, field, message))

        for field, message in schema_problems(raw):
            bad(field, message)
        if problems:
            return problems
        n_options = self._check_options(raw["options"], bad)
        self._check_answer(raw, n_options, bad)
        view_ids = self._check_views(raw["views"], bad)
        self._check_view_lists(raw, view_ids, bad)
        self._check_evidence(raw.get("evidence") or [], view_ids, bad)
        self._check_marks(raw.get("marks") or [], view_ids, bad)
        return problems

    # The checks below run on a sample that fits the schema: types and shapes are known.

    def _check_options(self, options: list[str], bad) -> int:
        seen: dict[str, int] = {}
        for i, opt in enumerate(options):
            key = " ".join(opt.lower().split())
            if key in seen:
                bad(f"options[{i}]", f"duplicate option text {opt!r} (same as options[{seen[key]}])")
            seen[key] = i
            if key == NOTA and i != len(options) - 1:
                bad(f"options[{i}]", "'None of the above' must be the last option")
        return len(options)

    def _check_answer(self, raw: dict, n_options: int, bad) -> None:
        answer = raw["answer"]
        valid = LETTERS[:n_options]
        if answer not in valid:
            bad("answer", f"letter {answer!r} is out of range for {n_options} options ({valid[0]}-{valid[-1]})")
        for letter in raw.get("distractors") or {}:
            if letter not in valid:
                bad(f"distractors.{letter}", f"not an option letter ({valid[0]}-{valid[-1]})")
            elif letter == answer:
                bad(f"distractors.{letter}", "the right answer cannot be a distractor")

    def _check_views(self, views: list[dict], bad) -> set[str]:
        ids: set[str] = set()
        for i, view in enumerate(views):
            path = f"views[{i}]"
            vid = view["view_id"]
            if vid in ids:
                bad(f"{path}.view_id", f"duplicate view id {vid!r}")
            ids.add(vid)
            last_t = -math.inf
            for j, frame in enumerate(view["frames"]):
                t = frame.get("t", 0.0)
                if not _finite(t):
                    bad(f"{path}.frames[{j}].t", f"must be a finite number, got {t!r}")
                elif t <= last_t:
                    bad(f"{path}.frames[{j}].t", "frame times must increase within a view")
                else:
                    last_t = t
                self._check_image(frame["image"], f"{path}.frames[{j}].image", bad)
            if view.get("camera") is not None:
                self._check_camera(view["camera"], f"{path}.camera", bad)
        return ids

    def _check_image(self, rel: str, path: str, bad) -> None:
        if rel not in self._image_ok:
            self._image_ok[rel] = self._image_problem(rel)
        reason = self._image_ok[rel]
        if reason:
            bad(path, reason)

    def _image_problem(self, rel: str) -> str | None:
        candidate = Path(rel)
        if candidate.is_absolute():
            return f"absolute path {rel!r} is not allowed; paths are relative to the benchmark folder"
        resolved = (self.root / candidate).resolve()
        if not resolved.is_relative_to(self.root):
            return f"path {rel!r} escapes the benchmark folder"
        if not self.check_images:
            return None
        if not resolved.is_file():
            return f"image file not found: {rel}"
        info = self._inspected.get(str(resolved))
        if info is None:
            info = inspect_images([resolved], root=self.root)[str(resolved)]
        if info.error:
            return f"unreadable image {rel}: {info.error}"
        return None

    def _check_camera(self, cam: dict, path: str, bad) -> None:
        for key in ("K", "R", "t"):
            values = [x for row in cam[key] for x in row] if key != "t" else cam[key]
            if not all(_finite(x) for x in values):
                bad(f"{path}.{key}", "must hold finite numbers only")
        K, R = cam["K"], cam["R"]
        if all(_finite(x) for row in K for x in row) and (K[0][0] <= 0 or K[1][1] <= 0 or K[2] != [0, 0, 1]):
            bad(f"{path}.K", "intrinsics need fx, fy > 0 and last row [0, 0, 1]")
        if all(_finite(x) for row in R for x in row):
            err = max(abs(sum(R[i][k] * R[j][k] for k in range(3)) - (1.0 if i == j else 0.0))
                      for i in range(3) for j in range(3))
            det = (R[0][0] * (R[1][1] * R[2][2] - R[1][2] * R[2][1])
                   - R[0][1] * (R[1][0] * R[2][2] - R[1][2] * R[2][0])
                   + R[0][2] * (R[1][0] * R[2][1] - R[1][1] * R[2][0]))
            if err > 1e-3 or abs(det - 1.0) > 1e-3:
                bad(f"{path}.R", f"not a rotation (|R R^T - I| = {err:.2g}, det = {det:.3g})")

    def _check_view_lists(self, raw: dict, view_ids: set[str], bad) -> None:
        gt, extra = raw["gt_views"], raw.get("extra_views") or []
        for key, ids in (("gt_views", gt), ("extra_views", extra)):
            for i, vid in enumerate(ids):
                if vid not in view_ids:
                    bad(f"{key}[{i}]", f"unknown view id {vid!r}")
        both = sorted(set(gt) & set(extra))
        if both:
            bad("extra_views", f"views {both} are already in gt_views")

    def _check_evidence(self, evidence: list[dict], view_ids: set[str], bad) -> None:
        for i, span in enumerate(evidence):
            path = f"evidence[{i}]"
            if span["view_id"] not in view_ids:
                bad(f"{path}.view_id", f"unknown view id {span['view_id']!r}")
            t0, t1 = span["t_start"], span["t_end"]
            if not _finite(t0) or not _finite(t1):
                bad(path, "t_start and t_end must be finite numbers")
            elif t0 > t1:
                bad(f"{path}.t_end", f"t_end {t1} is before t_start {t0}")

    def _check_marks(self, marks: list[dict], view_ids: set[str], bad) -> None:
        for i, mark in enumerate(marks):
            path = f"marks[{i}]"
            if mark["view_id"] not in view_ids:
                bad(f"{path}.view_id", f"unknown view id {mark['view_id']!r}")
            if not _finite(mark.get("t", 0.0)):
                bad(f"{path}.t", "must be a finite number")
            box = mark["box"]
            if not all(_finite(x) for x in box):
                bad(f"{path}.box", "must be [x0, y0, x1, y1] finite pixel coordinates")
            elif box[0] > box[2] or box[1] > box[3]:
                bad(f"{path}.box", "needs x0 <= x1 and y0 <= y1")
