"""OUT/predictions.jsonl and its manifest OUT/run.json: the resumable record of a run.

One line per query (sample x setting x variant x rotation) with the raw output kept. The
manifest pins what makes predictions comparable (benchmark content hash, model and its
arguments, seed, circular, protocol, prompt template, fallback extractor); a rerun with the
same manifest continues where the last one stopped, a different one is refused so two
configurations never mix in one file. Lines are flushed and fsync'ed after every batch, so
a killed run loses at most the batch in flight; a half-written last line is dropped.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

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
        old = json.loads(man_path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        return [f"{man_path}: unreadable manifest ({err}); use a new --out folder"]
    problems = []
    for key in MANIFEST_KEYS:
        if old.get(key) != manifest.get(key):
            problems.append(f"{out_dir}: holds predictions of a different run: {key} was "
                            f"{_describe(old.get(key))}, now {_describe(manifest.get(key))}; use a new --out folder")
    return problems


def read_manifest(out_dir: Path) -> dict:
    return json.loads((Path(out_dir) / MANIFEST).read_text())


def read_predictions(out_dir: Path) -> dict[str, dict]:
    """Finished lines by query key; a truncated or corrupt line (a killed write) is skipped."""
    path = Path(out_dir) / PREDICTIONS
    records: dict[str, dict] = {}
    if not path.exists():
        return records
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.endswith("\n"):
                break  # the write of this line was cut short
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and "key" in rec:
                records[rec["key"]] = rec
    return records


class PredictionWriter:
    """Appends prediction lines; writes the manifest on the first use."""

    def __init__(self, out_dir: Path, manifest: dict):
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        man_path = self.out_dir / MANIFEST
        if not man_path.exists():
            man_path.write_text(json.dumps({"version": MANIFEST_VERSION, **manifest}, indent=1) + "\n")
        self.path = self.out_dir / PREDICTIONS
        self._drop_partial_tail()
        self._fh = open(self.path, "a", encoding="utf-8")

    def _drop_partial_tail(self) -> None:
        """Cut a half-written last line so the next append starts on a fresh line."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(self.path, "wb") as fh:
                fh.write(data[: data.rfind(b"\n") + 1])

    def append(self, records: list[dict]) -> None:
        for rec in records:
            self._fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> "PredictionWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
