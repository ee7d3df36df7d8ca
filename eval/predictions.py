"""OUT/predictions.jsonl and its manifest OUT/run.json: the resumable record of a run.

One line per query (sample x setting x variant x rotation) with the raw output kept. The
manifest pins what makes predictions comparable (benchmark content hash, model and its
arguments, seed, circular, protocol, prompt template, fallback extractor); a rerun with the
same manifest continues where the last one stopped, a different one is refused so two
configurations never mix in one file.

What survives what: lines are flushed and fsync'ed after every batch, so a killed run loses
at most the batch in flight. A half-written last line (a kill mid-write) is cut off by
truncating the file at its last newline, in place: no step ever holds fewer complete lines
than it found, so a second kill during the repair loses nothing either. Lines are read as
bytes and decoded one by one: a line that is not UTF-8 JSON (a bad byte, a torn character)
is skipped with a warning that names it, and its query is asked again.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from bench.atomic import atomic_write_json

log = logging.getLogger(__name__)

PREDICTIONS = "predictions.jsonl"
MANIFEST = "run.json"
MANIFEST_VERSION = 1
# Keys that must match for two invocations to share a predictions file.
MANIFEST_KEYS = ("bench_sha256", "model", "model_args", "seed", "circular", "protocol", "prompt", "fallback")


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _describe(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def manifest_conflicts(out_dir: Path, manifest: dict) -> list[str]:
    """Why OUT cannot take predictions of ``manifest`` ([] when it can: new, empty or same run)."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        return [f"{out_dir}: exists and is not a folder"]
    man_path, pred_path = out_dir / MANIFEST, out_dir / PREDICTIONS
    if not man_path.exists():
        if pred_path.exists() and pred_path.stat().st_size > 0:
            return [f"{pred_path}: predictions without a {MANIFEST} manifest; use a new --out folder"]
        return []
    try:
        old = json.loads(man_path.read_bytes())
        if not isinstance(old, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as err:
        return [f"{man_path}: unreadable manifest ({type(err).__name__}: {err}); use a new --out folder"]
    problems = []
    for key in MANIFEST_KEYS:
        if old.get(key) != manifest.get(key):
            problems.append(f"{out_dir}: holds predictions of a different run: {key} was "
                            f"{_describe(old.get(key))}, now {_describe(manifest.get(key))}; use a new --out folder")
    return problems


def read_manifest(out_dir: Path) -> dict:
    """run.json as a dict; ValueError naming the file when it is not a JSON object."""
    path = Path(out_dir) / MANIFEST
    data = json.loads(path.read_bytes())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return data


def write_manifest(out_dir: Path, manifest: dict) -> Path:
    """run.json, atomically (a full disk leaves the previous one)."""
    return atomic_write_json(Path(out_dir) / MANIFEST, {"version": MANIFEST_VERSION, **manifest})


def read_predictions(out_dir: Path) -> dict[str, dict]:
    """Finished lines by query key (the last line of a key wins).

    A last line without its newline (a write cut short) is ignored; a complete line that is
    not UTF-8 JSON is skipped with one warning naming the file and its line numbers.
    """
    path = Path(out_dir) / PREDICTIONS
    records: dict[str, dict] = {}
    if not path.exists():
        return records
    bad: list[int] = []
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.endswith(b"\n"):
                break  # the write of this line was cut short
            try:
                rec = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                bad.append(lineno)
                continue
            if isinstance(rec, dict) and isinstance(rec.get("key"), str):
                records[rec["key"]] = rec
            elif raw.strip():
                bad.append(lineno)
    if bad:
        shown = ", ".join(map(str, bad[:10])) + (f" and {len(bad) - 10} more" if len(bad) > 10 else "")
        log.warning("%s: skipping %d unreadable line(s) (line %s); their queries are asked again",
                    path, len(bad), shown)
    return records


def repair_tail(path: Path) -> int:
    """Cut a half-written last line off ``path``, in place; returns the bytes removed.

    Only a truncation at the last newline: every complete line stays where it is, so a kill
    at any moment of the repair leaves either the torn file or the repaired one.
    """
    path = Path(path)
    if not path.exists():
        return 0
    with open(path, "r+b") as fh:
        end = fh.seek(0, os.SEEK_END)
        pos, keep = end, 0
        while pos > 0:  # scan back for the last newline, one block at a time
            step = min(1 << 16, pos)
            fh.seek(pos - step)
            block = fh.read(step)
            cut = block.rfind(b"\n")
            if cut >= 0:
                keep = pos - step + cut + 1
                break
            pos -= step
        if keep == end:
            return 0
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    log.warning("%s: removed a half-written last line (%d bytes); its query is asked again", path, end - keep)
    return end - keep


class PredictionWriter:
    """Appends prediction lines to OUT/predictions.jsonl (the caller holds OUT's run lock).

    Args:
        out_dir: the run folder.
        manifest: written to run.json when given (atomically; identity already checked).
    """

    def __init__(self, out_dir: Path, manifest: dict | None = None):
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if manifest is not None:
            write_manifest(self.out_dir, manifest)
        self.path = self.out_dir / PREDICTIONS
        repair_tail(self.path)
        self._fh = open(self.path, "ab")

    def append(self, records: list[dict]) -> None:
        """Write ``records`` as lines and make them durable (flush + fsync) before returning."""
        if not records:
            return
        self._fh.write(b"".join(json.dumps(rec, ensure_ascii=False).encode("utf-8") + b"\n" for rec in records))
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> "PredictionWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
