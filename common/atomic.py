"""Atomic file writes: a reader sees the old file or the new one, never a torn one.

Every output a later command reads back (summary.json, run.json, report.md, plots, metrics)
is written to a temporary file in the same folder, fsync'ed, then renamed over the target;
the folder is fsync'ed so the rename itself survives a power cut. A failure on the way (a
full disk, Ctrl-C) removes the temporary file and leaves the previous target untouched. It
lives in bench/ because bench is the package every other one may import.
"""
from __future__ import annotations

import json
import os
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # some file systems do not open folders; the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _temporary_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(3)}.tmp")


def _named_error(err: OSError, path: Path) -> OSError:
    """The same error, naming the target instead of the temporary file."""
    return OSError(err.errno, err.strerror or str(err), str(path))


@contextmanager
def atomic_target(path: str | Path, durable: bool = True) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path``.

    Use it for writers that want a file name (matplotlib's savefig, safetensors).
    ``durable=False`` skips the fsyncs (a rebuildable cache entry: still never torn, but a
    power cut may lose it)."""
    path = Path(path)
    tmp = _temporary_name(path)
    try:
        yield tmp
        if durable:
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise _named_error(err, path) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        _fsync_dir(path.parent)


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns ``path``."""
    path = Path(path)
    with atomic_target(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any, indent: int | None = 1) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


def read_json_object(path: str | Path) -> dict:
    """A JSON file that must hold an object; ValueError naming the file otherwise."""
    path = Path(path)
    data = json.loads(path.read_bytes())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return data
