"""The benchmark format: typed samples and the loader that validates them.

A benchmark is a folder holding ``benchmark.json`` (a list of samples, or an object with a
``samples`` list) or ``benchmark.jsonl`` (one sample a line) and the media it names, by paths
relative to that folder. See bench/FORMAT.md for the field reference and a full example.

Loading never half-trusts a file: every problem is collected as a ``Problem`` naming the
file, the sample id (and line, for .jsonl) and the field path, and ``BenchmarkError`` lists
them all at once so a user can fix a file in one pass.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.validate import LETTERS, Problem, SampleChecker

NOTA = "None of the above"
SUBSETS = ("SVS", "MVN")
AXES = ("spatial", "temporal")
GRANULARITIES = ("coarse", "fine")
BENCHMARK_FILES = ("benchmark.json", "benchmark.jsonl")


@dataclass(frozen=True)
class Camera:
    """Pinhole camera. ``x_cam = R @ x_world + t``; OpenCV axes (x right, y down, z forward)."""
    K: list[list[float]]  # 3x3 intrinsics in pixels
    R: list[list[float]]  # 3x3 world-to-camera rotation
    t: list[float]  # world-to-camera translation (3,)
    width: int  # image width in pixels that K refers to
    height: int  # image height in pixels that K refers to


@dataclass(frozen=True)
class Frame:
    t: float  # seconds from the clip start; 0.0 for still images
    image: str  # path relative to the benchmark folder


@dataclass(frozen=True)
class View:
    view_id: str
    frames: list[Frame]
    camera: Camera | None = None  # None: uncalibrated


@dataclass(frozen=True)
class EvidenceSpan:
    """The part of one view that resolves the question."""
    view_id: str
    t_start: float
    t_end: float
    entities: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Mark:
    """A Set-of-Mark label drawn on a frame: box in pixels ``[x0, y0, x1, y1]``."""
    view_id: str
    t: float
    entity: int
    label: str
    box: list[float]


@dataclass(frozen=True)
class Sample:
    id: str
    task: str
    question: str
    options: list[str]
    answer: str  # the letter of the right option
    views: list[View]
    gt_views: list[str]  # V_GT: the views that make the question answerable
    extra_views: list[str] = field(default_factory=list)  # ordered pool for the +k settings
    subset: str | None = None  # SSMN: "SVS" or "MVN"
    axis: str | None = None  # CVBench: "spatial" or "temporal"
    granularity: str | None = None  # CVBench: "coarse" or "fine"
    scene: str | None = None  # samples of one scene share a bootstrap cluster
    distractors: dict[str, str] = field(default_factory=dict)  # letter -> failure-mode type
    evidence: list[EvidenceSpan] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)  # free-form; kept, never interpreted

    @property
    def letters(self) -> str:
        """The valid option letters of this sample, e.g. "ABCD"."""
        return LETTERS[: len(self.options)]

    @property
    def answer_index(self) -> int:
        return LETTERS.index(self.answer)

    @property
    def has_nota(self) -> bool:
        return self.options[-1].strip().lower() == NOTA.lower()

    @property
    def cluster(self) -> str:
        """The bootstrap cluster: the scene when known, else the sample itself."""
        return self.scene or self.id

    def view(self, view_id: str) -> View:
        for v in self.views:
            if v.view_id == view_id:
                return v
        raise KeyError(f"sample {self.id}: no view {view_id!r}")


@dataclass
class Benchmark:
    root: Path  # the benchmark folder; image paths are relative to it
    file: Path  # benchmark.json or benchmark.jsonl
    samples: list[Sample]
    name: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.samples)

    def __iter__(self):
        return iter(self.samples)

    def image_path(self, rel: str) -> Path:
        return self.root / rel


class BenchmarkError(ValueError):
    """A benchmark failed validation; ``problems`` lists every problem found."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        head = f"{len(problems)} problem(s) in the benchmark:\n"
        shown = "\n".join(p.line() for p in problems[:50])
        more = f"\n... and {len(problems) - 50} more" if len(problems) > 50 else ""
        super().__init__(head + shown + more)


def find_benchmark_file(path: str | Path) -> Path:
    """The benchmark file of a folder (or the file itself)."""
    path = Path(path)
    if path.is_file():
        return path
    for name in BENCHMARK_FILES:
        if (path / name).is_file():
            return path / name
    raise BenchmarkError([Problem(str(path), "-", "-", f"no {' or '.join(BENCHMARK_FILES)} in this folder")])


def _read_records(file: Path, problems: list[Problem]) -> tuple[list[tuple[dict, str]], dict]:
    """Raw sample dicts with their location tag ("" or "line N"), and top-level metadata."""
    records: list[tuple[dict, str]] = []
    top: dict = {}
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        problems.append(Problem(str(file), "-", "-", f"cannot read: {err}"))
        return records, top
    if file.suffix == ".jsonl":
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                problems.append(Problem(str(file), f"line {lineno}", "-", f"invalid JSON: {err}"))
                continue
            records.append((obj, f"line {lineno}"))
        return records, top
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        problems.append(Problem(str(file), "-", "-", f"invalid JSON: {err}"))
        return records, top
    if isinstance(obj, dict):
        if not isinstance(obj.get("samples"), list):
            problems.append(Problem(str(file), "-", "samples", "an object file needs a 'samples' list"))
            return records, top
        top = {k: v for k, v in obj.items() if k != "samples"}
        obj = obj["samples"]
    if not isinstance(obj, list):
        problems.append(Problem(str(file), "-", "-", "top level must be a list of samples or {'samples': [...]}"))
        return records, top
    return [(rec, "") for rec in obj], top


def _build_sample(d: dict) -> Sample:
    """Typed sample from an already-validated dict."""
    views = []
    for v in d["views"]:
        cam = v.get("camera")
        camera = None
        if cam is not None:
            camera = Camera(K=cam["K"], R=cam["R"], t=cam["t"], width=int(cam["width"]), height=int(cam["height"]))
        views.append(View(view_id=v["view_id"], camera=camera,
                          frames=[Frame(t=float(f.get("t", 0.0)), image=f["image"]) for f in v["frames"]]))
    return Sample(
        id=d["id"], task=d["task"], question=d["question"], options=list(d["options"]), answer=d["answer"],
        views=views, gt_views=list(d["gt_views"]), extra_views=list(d.get("extra_views") or []),
        subset=d.get("subset"), axis=d.get("axis"), granularity=d.get("granularity"), scene=d.get("scene"),
        distractors=dict(d.get("distractors") or {}),
        evidence=[EvidenceSpan(view_id=e["view_id"], t_start=float(e["t_start"]), t_end=float(e["t_end"]),
                               entities=list(e.get("entities") or [])) for e in d.get("evidence") or []],
        marks=[Mark(view_id=m["view_id"], t=float(m.get("t", 0.0)), entity=m["entity"], label=str(m["label"]),
                    box=[float(x) for x in m["box"]]) for m in d.get("marks") or []],
        meta=dict(d.get("meta") or {}),
    )


def validate_benchmark(path: str | Path, check_images: bool = True) -> tuple[list[Problem], Benchmark | None]:
    """Validate a benchmark folder or file; returns (problems, benchmark or None)."""
    try:
        file = find_benchmark_file(path)
    except BenchmarkError as err:
        return err.problems, None
    root = file.parent
    problems: list[Problem] = []
    records, top = _read_records(file, problems)
    checker = SampleChecker(file=file, root=root, check_images=check_images)
    checker.prefetch_images([raw for raw, _ in records])
    samples: list[Sample] = []
    seen: dict[str, str] = {}
    for raw, where in records:
        sample_problems = checker.check(raw, where)
        sid = raw.get("id") if isinstance(raw, dict) else None
        if isinstance(sid, str) and sid:
            if sid in seen:
                loc = f"{sid} ({where})" if where else sid
                sample_problems.append(Problem(str(file), loc, "id", f"duplicate sample id (first at {seen[sid] or 'an earlier sample'})"))
            else:
                seen[sid] = where
        problems.extend(sample_problems)
        if not sample_problems:
            samples.append(_build_sample(raw))
    if not records and not problems:
        problems.append(Problem(str(file), "-", "samples", "the benchmark has no samples"))
    if problems:
        return problems, None
    return [], Benchmark(root=root, file=file, samples=samples, name=str(top.get("name", root.name)), meta=top)


def load_benchmark(path: str | Path, check_images: bool = True) -> Benchmark:
    """Load and validate a benchmark; raises BenchmarkError listing every problem."""
    problems, bench = validate_benchmark(path, check_images=check_images)
    if problems:
        raise BenchmarkError(problems)
    assert bench is not None
    return bench


def sample_to_dict(sample: Sample) -> dict:
    """The JSON form of a sample (inverse of loading)."""
    from dataclasses import asdict
    d = asdict(sample)
    for v in d["views"]:
        if v["camera"] is None:
            del v["camera"]
    return d
