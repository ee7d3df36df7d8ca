"""OUT/predictions.jsonl: the resumable record of a run, one line per answered query.

One line per query (sample x setting x variant x rotation) with the raw output kept; the run's
identity lives in run.json (eval/manifest.py). A sharded run (``--shard r/n``) writes
``predictions.shard-r-of-n.jsonl`` instead; readers take every file, and ``eval finish``
merges the shard files into predictions.jsonl.

What survives what: each answer is written and flushed to the OS as soon as it arrives, and
fsync'ed at least once per batch or second, so a killed run loses only the requests in
flight. A half-written last line (a kill mid-write) is cut off by truncating the file at its
last newline, in place: no step ever holds fewer complete lines than it found, so a second
kill during the repair loses nothing either. Lines are read as bytes and decoded one by one:
a line that is not UTF-8 JSON (a bad byte, a torn character) is skipped with a warning that
names it, and its query is asked again.
"""
from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from common.atomic import atomic_target

log = logging.getLogger(__name__)

PREDICTIONS = "predictions.jsonl"
SHARD_GLOB = "predictions.shard-*-of-*.jsonl"


def shard_file(shard: tuple[int, int] | None) -> str:
    """The predictions file of shard (r, n); predictions.jsonl for an unsharded run."""
    return PREDICTIONS if shard is None else f"predictions.shard-{shard[0]}-of-{shard[1]}.jsonl"


def prediction_files(out_dir: Path) -> list[Path]:
    """predictions.jsonl (when present) and every shard file, in a fixed order."""
    out_dir = Path(out_dir)
    main = [out_dir / PREDICTIONS] if (out_dir / PREDICTIONS).is_file() else []
    return main + sorted(out_dir.glob(SHARD_GLOB))


def _read_lines(path: Path, records: dict[str, dict]) -> None:
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


def read_predictions(out_dir: Path) -> dict[str, dict]:
    """Finished lines by query key, from predictions.jsonl and every shard file (a later line
    of a key wins).

    A last line without its newline (a write cut short) is ignored; a complete line that is
    not UTF-8 JSON is skipped with one warning naming the file and its line numbers.
    """
    records: dict[str, dict] = {}
    for path in prediction_files(out_dir):
        _read_lines(path, records)
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
    """Appends prediction lines to OUT's predictions file (the caller holds the run lock).

    Args:
        out_dir: the run folder.
        shard: (r, n) writes predictions.shard-r-of-n.jsonl; None writes predictions.jsonl.
        sync_every: fsync after this many lines at most ...
        sync_seconds: ... or this many seconds, whichever comes first (every line is flushed
            to the OS at once, so only a power cut can lose the unsynced ones).
    """

    def __init__(self, out_dir: Path, shard: tuple[int, int] | None = None, sync_every: int = 8,
                 sync_seconds: float = 1.0):
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.out_dir / shard_file(shard)
        self.sync_every, self.sync_seconds = max(1, sync_every), sync_seconds
        repair_tail(self.path)
        self._fh = open(self.path, "ab")
        self._unsynced, self._last_sync = 0, time.monotonic()
        self.written = 0

    def append(self, records: list[dict]) -> None:
        """Write ``records`` as lines, flushed to the OS at once; fsync'ed per the sync policy."""
        if not records:
            return
        self._fh.write(b"".join(json.dumps(rec, ensure_ascii=False).encode("utf-8") + b"\n" for rec in records))
        self._fh.flush()
        self.written += len(records)
        self._unsynced += len(records)
        if self._unsynced >= self.sync_every or time.monotonic() - self._last_sync >= self.sync_seconds:
            self.sync()

    def sync(self) -> None:
        if self._unsynced:
            os.fsync(self._fh.fileno())
        self._unsynced, self._last_sync = 0, time.monotonic()

    def close(self) -> None:
        if not self._fh.closed:
            try:
                self.sync()
            finally:
                self._fh.close()

    def __enter__(self) -> "PredictionWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def merge_shards(out_dir: Path) -> int:
    """Fold every shard file into predictions.jsonl; returns the lines moved.

    The merged file is written beside the old one and renamed over it (fsync'ed), and only
    then are the shard files removed: a kill at any point leaves every line in some file
    (a key found twice is read once).
    """
    out_dir = Path(out_dir)
    shards = sorted(out_dir.glob(SHARD_GLOB))
    if not shards:
        return 0
    main = out_dir / PREDICTIONS
    repair_tail(main)
    moved = 0
    with atomic_target(main) as tmp:
        with open(tmp, "wb") as out:
            if main.exists():
                with open(main, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        out.write(block)
            for shard in shards:
                repair_tail(shard)
                with open(shard, "rb") as fh:
                    for line in fh:
                        out.write(line)
                        moved += 1
    for shard in shards:
        shard.unlink()
    return moved
