"""Field-by-field validation of raw benchmark samples.

Each check appends a ``Problem`` naming the file, the sample id and the field path
(``views[1].camera.K``) instead of raising, so one pass reports everything that is wrong.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.images import ImageInfo, inspect_images

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
NOTA = "none of the above"
SAMPLE_KEYS = {
    "id", "task", "subset", "axis", "granularity", "scene", "views", "gt_views", "extra_views",
    "question", "options", "answer", "distractors", "evidence", "marks", "meta",
}
REQUIRED_KEYS = ("id", "task", "question", "options", "answer", "views", "gt_views")
ENUMS = {"subset": ("SVS", "MVN"), "axis": ("spatial", "temporal"), "granularity": ("coarse", "fine")}


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
        problems: list[Problem] = []
        sid = raw.get("id") if isinstance(raw, dict) else None
        label = sid if isinstance(sid, str) and sid else "<no id>"
        if where:
            label = f"{label} ({where})"

        def bad(field_path: str, message: str) -> None:
            problems.append(Problem(str(self.file), label, field_path, message))

        if not isinstance(raw, dict):
            bad("-", "a sample must be a JSON object")
            return problems
        for key in sorted(set(raw) - SAMPLE_KEYS):
            bad(key, "unknown field (put free-form data under 'meta')")
        for key in REQUIRED_KEYS:
            if key not in raw:
                bad(key, "required field is missing")
        if problems:
            return problems
        if not isinstance(sid, str) or not sid.strip():
            bad("id", "must be a non-empty string")
        if not isinstance(raw["task"], str) or not raw["task"].strip():
            bad("task", "must be a non-empty string")
        for key, allowed in ENUMS.items():
            value = raw.get(key)
            if value is not None and value not in allowed:
                bad(key, f"{value!r} is not one of {list(allowed)} (or null)")
        for key in ("scene",):
            if raw.get(key) is not None and not isinstance(raw[key], str):
                bad(key, "must be a string or null")
        if not isinstance(raw["question"], str) or not raw["question"].strip():
            bad("question", "must be a non-empty string")
        n_options = self._check_options(raw["options"], bad)
        self._check_answer(raw, n_options, bad)
        view_ids = self._check_views(raw["views"], bad)
        self._check_view_lists(raw, view_ids, bad)
        self._check_evidence(raw.get("evidence"), view_ids, bad)
        self._check_marks(raw.get("marks"), view_ids, bad)
        if raw.get("meta") is not None and not isinstance(raw["meta"], dict):
            bad("meta", "must be an object")
        return problems

    def _check_options(self, options: Any, bad) -> int:
        if not isinstance(options, list) or len(options) < 2:
            bad("options", "must be a list of at least 2 option texts")
            return 0
        if len(options) > len(LETTERS):
            bad("options", f"at most {len(LETTERS)} options")
            return 0
        seen: dict[str, int] = {}
        for i, opt in enumerate(options):
            if not isinstance(opt, str) or not opt.strip():
                bad(f"options[{i}]", "must be a non-empty string")
                continue
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
        if not isinstance(answer, str) or len(answer) != 1 or answer not in LETTERS:
            bad("answer", f"must be one capital letter, got {answer!r}")
        elif n_options and answer not in valid:
            bad("answer", f"letter {answer!r} is out of range for {n_options} options ({valid[0]}-{valid[-1]})")
        distractors = raw.get("distractors")
        if distractors is None:
            return
        if not isinstance(distractors, dict):
            bad("distractors", "must be an object mapping option letters to distractor types")
            return
        for letter, kind in distractors.items():
            if letter not in valid:
                bad(f"distractors.{letter}", f"not an option letter ({valid[:1]}-{valid[-1:]})")
            elif letter == answer:
                bad(f"distractors.{letter}", "the right answer cannot be a distractor")
            if not isinstance(kind, str) or not kind:
                bad(f"distractors.{letter}", "the type must be a non-empty string")

    def _check_views(self, views: Any, bad) -> set[str]:
        ids: set[str] = set()
        if not isinstance(views, list) or not views:
            bad("views", "must be a non-empty list")
            return ids
        for i, view in enumerate(views):
            path = f"views[{i}]"
            if not isinstance(view, dict):
                bad(path, "must be an object")
                continue
            for key in sorted(set(view) - {"view_id", "frames", "camera"}):
                bad(f"{path}.{key}", "unknown field")
            vid = view.get("view_id")
            if not isinstance(vid, str) or not vid:
                bad(f"{path}.view_id", "must be a non-empty string")
            elif vid in ids:
                bad(f"{path}.view_id", f"duplicate view id {vid!r}")
            else:
                ids.add(vid)
            self._check_frames(view.get("frames"), f"{path}.frames", bad)
            if view.get("camera") is not None:
                self._check_camera(view["camera"], f"{path}.camera", bad)
        return ids

    def _check_frames(self, frames: Any, path: str, bad) -> None:
        if not isinstance(frames, list) or not frames:
            bad(path, "must be a non-empty list of frames")
            return
        last_t = -math.inf
        for j, frame in enumerate(frames):
            fpath = f"{path}[{j}]"
            if not isinstance(frame, dict):
                bad(fpath, "must be an object with 't' and 'image'")
                continue
            t = frame.get("t", 0.0)
            if not _finite(t):
                bad(f"{fpath}.t", f"must be a finite number, got {t!r}")
            elif t <= last_t:
                bad(f"{fpath}.t", "frame times must increase within a view")
            else:
                last_t = t
            self._check_image(frame.get("image"), f"{fpath}.image", bad)

    def _check_image(self, rel: Any, path: str, bad) -> None:
        if not isinstance(rel, str) or not rel:
            bad(path, "must be a relative image path")
            return
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

    def _check_matrix(self, value: Any, rows: int, cols: int, path: str, bad) -> list | None:
        shape_ok = (isinstance(value, list) and len(value) == rows
                    and all(isinstance(r, list) and len(r) == cols for r in value))
        if not shape_ok:
            bad(path, f"must be a {rows}x{cols} matrix (list of {rows} lists of {cols} numbers)")
            return None
        if not all(_finite(x) for r in value for x in r):
            bad(path, "must hold finite numbers only")
            return None
        return value

    def _check_camera(self, cam: Any, path: str, bad) -> None:
        if not isinstance(cam, dict):
            bad(path, "must be an object with K, R, t, width, height")
            return
        for key in sorted(set(cam) - {"K", "R", "t", "width", "height"}):
            bad(f"{path}.{key}", "unknown field")
        for key in ("K", "R", "t", "width", "height"):
            if key not in cam:
                bad(f"{path}.{key}", "required camera field is missing")
        K = self._check_matrix(cam.get("K"), 3, 3, f"{path}.K", bad) if "K" in cam else None
        if K is not None and (K[0][0] <= 0 or K[1][1] <= 0 or K[2] != [0, 0, 1]):
            bad(f"{path}.K", "intrinsics need fx, fy > 0 and last row [0, 0, 1]")
        R = self._check_matrix(cam.get("R"), 3, 3, f"{path}.R", bad) if "R" in cam else None
        if R is not None:
            err = max(abs(sum(R[i][k] * R[j][k] for k in range(3)) - (1.0 if i == j else 0.0))
                      for i in range(3) for j in range(3))
            det = (R[0][0] * (R[1][1] * R[2][2] - R[1][2] * R[2][1])
                   - R[0][1] * (R[1][0] * R[2][2] - R[1][2] * R[2][0])
                   + R[0][2] * (R[1][0] * R[2][1] - R[1][1] * R[2][0]))
            if err > 1e-3 or abs(det - 1.0) > 1e-3:
                bad(f"{path}.R", f"not a rotation (|R R^T - I| = {err:.2g}, det = {det:.3g})")
        if "t" in cam:
            t = cam["t"]
            if not isinstance(t, list) or len(t) != 3:
                bad(f"{path}.t", "must be a list of 3 numbers")
            elif not all(_finite(x) for x in t):
                bad(f"{path}.t", "must hold finite numbers only")
        for key in ("width", "height"):
            if key in cam and (not isinstance(cam[key], int) or isinstance(cam[key], bool) or cam[key] <= 0):
                bad(f"{path}.{key}", "must be a positive integer")

    def _check_view_lists(self, raw: dict, view_ids: set[str], bad) -> None:
        gt = raw["gt_views"]
        extra = raw.get("extra_views") or []
        for key, ids in (("gt_views", gt), ("extra_views", extra)):
            if not isinstance(ids, list):
                bad(key, "must be a list of view ids")
                continue
            if key == "gt_views" and not ids:
                bad(key, "must name at least one view")
            seen = set()
            for i, vid in enumerate(ids):
                if vid not in view_ids:
                    bad(f"{key}[{i}]", f"unknown view id {vid!r}")
                elif vid in seen:
                    bad(f"{key}[{i}]", f"view id {vid!r} listed twice")
                seen.add(vid)
        if isinstance(gt, list) and isinstance(extra, list):
            both = sorted(set(gt) & set(extra))
            if both:
                bad("extra_views", f"views {both} are already in gt_views")

    def _check_evidence(self, evidence: Any, view_ids: set[str], bad) -> None:
        if evidence is None:
            return
        if not isinstance(evidence, list):
            bad("evidence", "must be a list of spans")
            return
        for i, span in enumerate(evidence):
            path = f"evidence[{i}]"
            if not isinstance(span, dict):
                bad(path, "must be an object")
                continue
            if span.get("view_id") not in view_ids:
                bad(f"{path}.view_id", f"unknown view id {span.get('view_id')!r}")
            t0, t1 = span.get("t_start"), span.get("t_end")
            if not _finite(t0) or not _finite(t1):
                bad(path, "t_start and t_end must be finite numbers")
            elif t0 > t1:
                bad(f"{path}.t_end", f"t_end {t1} is before t_start {t0}")
            ents = span.get("entities", [])
            if not isinstance(ents, list) or not all(isinstance(e, int) and not isinstance(e, bool) for e in ents):
                bad(f"{path}.entities", "must be a list of integer entity ids")

    def _check_marks(self, marks: Any, view_ids: set[str], bad) -> None:
        if marks is None:
            return
        if not isinstance(marks, list):
            bad("marks", "must be a list")
            return
        for i, mark in enumerate(marks):
            path = f"marks[{i}]"
            if not isinstance(mark, dict):
                bad(path, "must be an object")
                continue
            if mark.get("view_id") not in view_ids:
                bad(f"{path}.view_id", f"unknown view id {mark.get('view_id')!r}")
            if not _finite(mark.get("t", 0.0)):
                bad(f"{path}.t", "must be a finite number")
            ent = mark.get("entity")
            if not isinstance(ent, int) or isinstance(ent, bool):
                bad(f"{path}.entity", "must be an integer entity id")
            if not isinstance(mark.get("label"), (str, int)) or isinstance(mark.get("label"), bool):
                bad(f"{path}.label", "must be a string")
            box = mark.get("box")
            if not isinstance(box, list) or len(box) != 4 or not all(_finite(x) for x in box):
                bad(f"{path}.box", "must be [x0, y0, x1, y1] finite pixel coordinates")
            elif box[0] > box[2] or box[1] > box[3]:
                bad(f"{path}.box", "needs x0 <= x1 and y0 <= y1")
