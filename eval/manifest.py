"""OUT/run.json: what a run is (its identity) and where its answers came from (provenance).

Identity: the benchmark's content hash, the model and the arguments that change its answers,
seed, circular, protocol, prompt template and fallback extractor. A rerun with the same
identity continues the folder; a different one is refused, naming every key that differs
with both values. Arguments declared ``throughput(...)`` (concurrency, timeouts, retries,
batch size, device) are recorded but may change between invocations.

Provenance: the images hash over every image the plan shows, creation / finish time (UTC)
and wall seconds, git commit and dirty flag, package versions, host and device, what the
adapter reports (weights fingerprint, served model), and one record per invocation. run.json
is rewritten atomically under a small lock of its own, so shards running side by side add
their records without losing each other's.
"""
from __future__ import annotations

import hashlib
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from common.atomic import atomic_write_json, read_json_object
from bench.format import Benchmark
from bench.images import images_digest, inspect_images
from common.provenance import environment, utc_now
from eval.predictions import prediction_files

MANIFEST = "run.json"
MANIFEST_VERSION = 2
# Keys that must match for two invocations to share a run folder.
IDENTITY_KEYS = ("bench_sha256", "model", "model_args", "seed", "circular", "protocol", "prompt", "fallback")
MANIFEST_KEYS = IDENTITY_KEYS  # the name earlier versions used
_LOCK = ".run.json.lock"


def _show(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 200 else text[:197] + "..."


def differences(old: Any, new: Any, path: str) -> list[tuple[str, Any, Any]]:
    """(dotted path, old value, new value) of every leaf that differs; dicts are walked key by key."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            out += differences(old.get(key, "<absent>"), new.get(key, "<absent>"), f"{path}.{key}")
        return out
    return [] if old == new else [(path, old, new)]


def read_manifest(out_dir: Path) -> dict:
    """run.json as a dict; ValueError naming the file when it is not a JSON object."""
    return read_json_object(Path(out_dir) / MANIFEST)


def manifest_conflicts(out_dir: Path, manifest: dict, ignore: set[str] | None = None) -> list[str]:
    """Why OUT cannot take predictions of ``manifest`` ([] when it can: new, empty or same run).

    Each differing identity key is named with both values. ``ignore`` holds dotted paths that
    do not count (throughput arguments an older run.json still lists among ``model_args``).
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        return [f"{out_dir}: exists and is not a folder"]
    man_path = out_dir / MANIFEST
    if not man_path.exists():
        lines = [p for p in prediction_files(out_dir) if p.stat().st_size > 0]
        if lines:
            return [f"{lines[0]}: predictions without a {MANIFEST} manifest; use a new --out folder"]
        return []
    try:
        old = read_manifest(out_dir)
    except (OSError, ValueError) as err:
        return [f"{man_path}: unreadable manifest ({type(err).__name__}: {err}); use a new --out folder"]
    problems = []
    for key in IDENTITY_KEYS:
        for path, before, now in differences(old.get(key), manifest.get(key), key):
            if path not in (ignore or set()):
                problems.append(f"{out_dir}: holds predictions of a different run: {path} was {_show(before)}, "
                                f"now {_show(now)}; use a new --out folder")
    return problems


@contextmanager
def _manifest_lock(out_dir: Path) -> Iterator[None]:
    import fcntl
    fd = os.open(Path(out_dir) / _LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def update_manifest(out_dir: Path, change: Callable[[dict], None]) -> dict:
    """Read run.json (or start one), apply ``change`` in place, write it back atomically."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with _manifest_lock(out_dir):
        try:
            data = read_manifest(out_dir)
        except FileNotFoundError:
            data = {}
        change(data)
        data["version"] = MANIFEST_VERSION
        atomic_write_json(out_dir / MANIFEST, data)
    return data


def start_invocation(out_dir: Path, manifest: dict, facts: dict) -> int:
    """Record the identity (first time), this invocation's facts and the environment; returns
    the invocation's index in ``invocations``."""
    index = {}

    def change(data: dict) -> None:
        if "created_at" not in data:
            data["created_at"] = facts["started_at"]
        data.update(manifest)
        data.update(environment())
        data.setdefault("invocations", []).append(dict(facts))
        index["i"] = len(data["invocations"]) - 1
    update_manifest(out_dir, change)
    return index["i"]


def end_invocation(out_dir: Path, index: int, facts: dict, provenance: dict, finished: bool) -> None:
    """Close invocation ``index`` (finish time, wall seconds, answered, status) and, when the run's
    summary was written, the run's own finish time and total wall seconds."""
    def change(data: dict) -> None:
        invocations = data.setdefault("invocations", [])
        if 0 <= index < len(invocations):
            invocations[index].update(facts)
        if provenance:
            data["model_provenance"] = provenance
            data["device"] = provenance.get("device")
        data["wall_seconds"] = round(sum(i.get("wall_seconds") or 0.0 for i in invocations), 3)
        if finished:
            data["finished_at"] = facts.get("finished_at") or utc_now()
    update_manifest(out_dir, change)


class PlanImages:
    """Content hashes of every image a plan touches (hashed once; see bench/images.py).

    ``digest`` identifies the whole set (run.json); ``of(key)`` the images of one query, in
    order (each prediction line keeps it, so a resume notices an image changed under it).

    Args:
        bench: the benchmark.
        paths_by_key: query key -> its image files in presentation order.
    """

    def __init__(self, bench: Benchmark, paths_by_key: dict[str, list[Path]]):
        self.paths = {key: [str(Path(p).resolve()) for p in paths] for key, paths in paths_by_key.items()}
        unique = list(dict.fromkeys(p for paths in self.paths.values() for p in paths))
        info = inspect_images(unique, root=bench.root, decode=False)
        self.sha = {p: info[p].sha256 or "unreadable" for p in unique}
        root = bench.root.resolve()
        self.digest = images_digest((os.path.relpath(p, root), self.sha[p]) for p in unique)
        self.count = len(unique)

    def of(self, key: str) -> str:
        return hashlib.sha256("\n".join(self.sha[p] for p in self.paths[key]).encode()).hexdigest()[:16]

    def changed(self, done: dict[str, dict]) -> list[str]:
        """Keys of finished lines whose query's images differ from the ones they were answered on."""
        return [key for key, rec in done.items() if key in self.paths and rec.get("images") not in (None, self.of(key))]
