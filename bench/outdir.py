"""Write an output folder all at once: build it in a hidden sibling, then rename it into place.

A command that fails half-way (a bad row, Ctrl-C, a full disk) leaves the old folder, or no
folder, never a half-written one that looks finished. Used by the exporters, the importers
and the run browser.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


class OutDirError(ValueError):
    """The output folder cannot be written (it exists and may not be replaced)."""


def check_out_dir(out: str | Path, overwrite: bool, marker: str | None = None) -> list[str]:
    """Why ``out`` cannot be (re)written; [] when it can.

    Args:
        out: the folder to write.
        overwrite: replace an existing, non-empty folder.
        marker: a file name that marks a folder this tool wrote before; such a folder is
            replaced without ``overwrite`` (a re-rendered browser, a re-run export).
    """
    out = Path(out)
    if not out.exists():
        return []
    if not out.is_dir():
        return [f"{out}: exists and is not a folder"]
    if overwrite or not any(out.iterdir()) or (marker is not None and (out / marker).exists()):
        return []
    return [f"{out}: exists and is not empty; pass --overwrite or choose a new --out folder"]


@contextmanager
def staged_dir(out: str | Path, overwrite: bool = False, marker: str | None = None) -> Iterator[Path]:
    """Yield an empty temporary folder next to ``out``; on success it replaces ``out``.

    Raises:
        OutDirError: ``out`` exists, is not empty and may not be replaced (checked first).
    """
    out = Path(out)
    problems = check_out_dir(out, overwrite, marker)
    if problems:
        raise OutDirError(problems[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        yield tmp
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
            os.replace(out, old / "x")
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
